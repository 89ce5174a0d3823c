"""The share coordinator on the wire (KIP-932): InitializeShareGroupState (83 v0),
ReadShareGroupState (84 v0), WriteShareGroupState (85 v0-1), DeleteShareGroupState (86 v0)
and ReadShareGroupStateSummary (87 v0-1), the requests a broker's share-group state
persister sends to the share coordinator of a share-partition.

As Kafka 4.4's ``KafkaApis`` and ``ShareCoordinatorService``: CLUSTER_ACTION on the cluster
(else CLUSTER_AUTHORIZATION_FAILED for every partition, with Kafka's message); an empty group
id, no topics or (but for Initialize) a topic without partitions: an empty answer; then each
partition on its own: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker does not
coordinate its ``__share_group_state`` partition (``"Unable to write share group state: "``
and the exception's message, as the service words it), else the Store's
:class:`~seglog.coordinator.share_coordinator.ShareCoordinator` with its fencing, errors and
messages (:class:`~seglog.server.share_persister.SharePersister` runs it and waits for the
replication of what it wrote). Results are grouped by topic id, one per partition (a
partition asked twice answers once, as Kafka's map keeps the last).

At start this module makes the broker's persister and follows the leadership of the
``__share_group_state`` partitions (:class:`~seglog.cluster.coordinators.CoordinatorPartitions`:
a partition's state is loaded from its log when this broker becomes its leader and dropped
when it stops), so a restart or a leader move keeps the state, and runs Kafka's periodic
jobs over the partitions it leads: cold-partition snapshots, pruning the records later
snapshots made redundant, and deleting the state of deleted topics. Configs: Kafka's
``share.coordinator.*``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
import uuid
from typing import Any, Callable

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i8, i16, i32, i64
from kio.static.protocol import ResponsePayload

from ... import error_codes as codes
from ...aio import cancel_and_wait
from ...coordinator.share_coordinator import (ErrorCode, ShareCoordinator,
                                              ShareCoordinatorConfig, ShareState,
                                              ShareStateSummary, StateBatch)
from ...cluster import coordinators as cluster_coordinators
from ...cluster.coordinators import CoordinatorAnswer
from ...coordinator.share_state_records import SHARE_STATE_TOPIC, coordinator_key
from ...schemas import load_response_schema
from ...errors import SeglogError
from ...storage.checkpoints import uuid_from_kafka_str
from ...types import TopicPartition
from ..authorization import AclOperation, authorize_cluster
from ..context import BrokerState, RequestContext
from ..registry import ApiHandler
from ..share_persister import EXTENSION, SharePersister, find_share_persister
from .data_topics import partition_seam

__all__ = ["HANDLERS", "find_share_coordinator", "parse_share_key", "start", "stop"]

log = logging.getLogger("seglog.server.apis.share_state")

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
_OPERATIONS = {INITIALIZE: "initialize share group state", READ: "read share group state",
               WRITE: "write share group state", DELETE: "delete share group state",
               SUMMARY: "read share group state summary"}


def _module(ctx: RequestContext) -> Any:
    return sys.modules[load_response_schema(ctx.api_key, ctx.api_version).__module__]


def _parts(request: Any, *, empty_topics_ok: bool) -> dict[uuid.UUID, dict[int, Any]] | None:
    """``{topic id: {partition: its data}}`` of the request, or None when Kafka's service
    answers an empty response (no group id, no topics, a topic without partitions)."""
    if not request.group_id or not request.topics:
        return None
    found: dict[uuid.UUID, dict[int, Any]] = {}
    for topic in request.topics:
        if not topic.partitions and not empty_topics_ok:
            return None
        for data in topic.partitions:
            found.setdefault(_topic_id(topic), {})[int(data.partition)] = data
    return found


#: Kafka's ``Uuid.ZERO_UUID``: a topic id of sixteen zero bytes (kio reads it as None).
_ZERO_ID = uuid.UUID(int=0)


def _topic_id(topic: Any) -> uuid.UUID:
    """The topic id of a request's topic (the zero uuid, a valid id no topic has, for
    kio's None)."""
    topic_id: uuid.UUID | None = topic.topic_id
    return _ZERO_ID if topic_id is None else topic_id


def _result(module: Any, ctx: RequestContext, partition: int, code: int,
            message: str | None, **fields: Any) -> Any:
    base: dict[str, Any] = dict(partition=i32(partition), error_code=KioErrorCode(code),
                                error_message=message)
    if ctx.api_key == READ:
        base.update(state_epoch=i32(fields.get("state_epoch", 0)),
                    start_offset=i64(fields.get("start_offset", 0)),
                    state_batches=fields.get("state_batches", ()))
    elif ctx.api_key == SUMMARY:
        base.update(state_epoch=i32(fields.get("state_epoch", 0)),
                    leader_epoch=i32(fields.get("leader_epoch", 0)),
                    start_offset=i64(fields.get("start_offset", 0)))
        if ctx.api_version >= 1:
            base["delivery_complete_count"] = i32(fields.get("delivery_complete_count", -1))
    return module.PartitionResult(**base)


_RESULT_CLASSES = {INITIALIZE: ("InitializeShareGroupStateResponse", "InitializeStateResult"),
                   READ: ("ReadShareGroupStateResponse", "ReadStateResult"),
                   WRITE: ("WriteShareGroupStateResponse", "WriteStateResult"),
                   DELETE: ("DeleteShareGroupStateResponse", "DeleteStateResult"),
                   SUMMARY: ("ReadShareGroupStateSummaryResponse", "ReadStateSummaryResult")}


def _response(ctx: RequestContext, by_topic: dict[uuid.UUID, list[Any]]) -> ResponsePayload:
    module = _module(ctx)
    response_name, topic_name = _RESULT_CLASSES[ctx.api_key]
    topic_class = getattr(module, topic_name)
    response: ResponsePayload = getattr(module, response_name)(results=tuple(
        topic_class(topic_id=topic_id, partitions=tuple(results))
        for topic_id, results in by_topic.items()))
    return response


async def _serve(ctx: RequestContext, request: Any, *, empty_topics_ok: bool,
                 run: Callable[[SharePersister, str, uuid.UUID, int, Any], Any]
                 ) -> ResponsePayload:
    """The common shape of 83-87 (see the module docstring); ``run`` answers one partition
    this broker coordinates with a PartitionResult."""
    module = _module(ctx)
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        # Kafka's toGlobalErrorResponse: every partition asked, the error's own message.
        code = codes.CLUSTER_AUTHORIZATION_FAILED
        return _response(ctx, {_topic_id(topic): [
            _result(module, ctx, int(p.partition), code, codes.message(code))
            for p in topic.partitions] for topic in request.topics})
    parts = _parts(request, empty_topics_ok=empty_topics_ok)
    if parts is None:
        return _response(ctx, {})
    persister = find_share_persister(ctx.broker)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for topic_id, partitions in parts.items():
        for partition, data in partitions.items():
            if persister is None:
                code = codes.COORDINATOR_NOT_AVAILABLE
                result = _result(module, ctx, partition, code,
                                 "Share coordinator is not available.")
            else:
                gate = persister.coordinator_error(request.group_id, topic_id, partition)
                if gate == codes.NONE and SHARE_STATE_TOPIC not in ctx.broker.store:
                    # Kafka's coordinator runs only over the partitions of an existing
                    # topic, which FindCoordinator makes: NOT_COORDINATOR until then.
                    gate = codes.NOT_COORDINATOR
                if gate != codes.NONE:
                    result = _result(module, ctx, partition, gate,
                                     f"Unable to {_OPERATIONS[ctx.api_key]}: "
                                     f"{codes.message(gate)}")
                else:
                    result = await run(persister, request.group_id, topic_id, partition, data)
            by_topic.setdefault(topic_id, []).append(result)
    return _response(ctx, by_topic)


def _same(code: ErrorCode) -> ErrorCode:
    """An error answered as it is."""
    return code


def _message(code: int) -> str | None:
    return getattr(code, "message", None) if code else None


async def handle_initialize_share_group_state(ctx: RequestContext, request: Any
                                              ) -> ResponsePayload:
    """InitializeShareGroupState (83 v0)."""
    module = _module(ctx)

    async def run(persister: SharePersister, group_id: str, topic_id: uuid.UUID,
                  partition: int, data: Any) -> Any:
        code = await persister.local(
            lambda c: c.initialize_state(group_id, topic_id, partition,
                                         int(data.state_epoch), int(data.start_offset)),
            lambda error: error)
        return _result(module, ctx, partition, code, _message(code))

    return await _serve(ctx, request, empty_topics_ok=True, run=run)


async def handle_read_share_group_state(ctx: RequestContext, request: Any) -> ResponsePayload:
    """ReadShareGroupState (84 v0)."""
    module = _module(ctx)

    async def run(persister: SharePersister, group_id: str, topic_id: uuid.UUID,
                  partition: int, data: Any) -> Any:
        code, state = await persister.local(
            lambda c: c.read_state(group_id, topic_id, partition, int(data.leader_epoch)),
            lambda error: (error, None))
        if state is None:
            # Kafka's toErrorResponseData: the error and its message, zero fields.
            return _result(module, ctx, partition, code, _message(code))
        return _result(module, ctx, partition, codes.NONE, None,
                       state_epoch=state.state_epoch, start_offset=state.start_offset,
                       state_batches=tuple(module.StateBatch(
                           first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                           delivery_state=i8(b.delivery_state),
                           delivery_count=i16(b.delivery_count)) for b in state.batches))

    return await _serve(ctx, request, empty_topics_ok=False, run=run)


async def handle_write_share_group_state(ctx: RequestContext, request: Any) -> ResponsePayload:
    """WriteShareGroupState (85 v0-1; v1 carries DeliveryCompleteCount, -1 before)."""
    module = _module(ctx)

    async def run(persister: SharePersister, group_id: str, topic_id: uuid.UUID,
                  partition: int, data: Any) -> Any:
        state = ShareState(
            int(data.state_epoch), int(data.start_offset),
            tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                             int(b.delivery_count)) for b in data.state_batches),
            int(data.leader_epoch), int(getattr(data, "delivery_complete_count", -1)))
        code = await persister.local(
            lambda c: c.write_state(group_id, topic_id, partition, state), lambda error: error)
        return _result(module, ctx, partition, code, _message(code))

    return await _serve(ctx, request, empty_topics_ok=False, run=run)


async def handle_delete_share_group_state(ctx: RequestContext, request: Any
                                          ) -> ResponsePayload:
    """DeleteShareGroupState (86 v0)."""
    module = _module(ctx)

    async def run(persister: SharePersister, group_id: str, topic_id: uuid.UUID,
                  partition: int, data: Any) -> Any:
        del data
        code = await persister.local(lambda c: c.delete_state(group_id, topic_id, partition),
                                     lambda error: error)
        return _result(module, ctx, partition, code, _message(code))

    return await _serve(ctx, request, empty_topics_ok=False, run=run)


async def handle_read_share_group_state_summary(ctx: RequestContext, request: Any
                                                ) -> ResponsePayload:
    """ReadShareGroupStateSummary (87 v0-1; v1 carries DeliveryCompleteCount)."""
    module = _module(ctx)

    async def run(persister: SharePersister, group_id: str, topic_id: uuid.UUID,
                  partition: int, data: Any) -> Any:
        summary = await persister.local(
            lambda c: c.read_state_summary(group_id, topic_id, partition,
                                           int(data.leader_epoch)),
            ShareStateSummary)
        code = summary.error_code
        if code:
            return _result(module, ctx, partition, code, _message(code))
        return _result(module, ctx, partition, codes.NONE, None,
                       state_epoch=summary.state_epoch, leader_epoch=summary.leader_epoch,
                       start_offset=summary.start_offset,
                       delivery_complete_count=summary.delivery_complete_count)

    return await _serve(ctx, request, empty_topics_ok=False, run=run)


# --- FindCoordinator key type 2 ------------------------------------------------------------------


def parse_share_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """Kafka's ``SharePartitionKey.getInstance(key)``: ``"group:topicId:partition"`` (the
    group may hold colons; Java's ``split`` drops trailing empty parts), or None when it is
    not one (a blank group, a topic id that is not a Kafka uuid, a partition that is not an
    int32)."""
    tokens = key.split(":")
    while tokens and tokens[-1] == "":
        tokens.pop()  # Java's String.split drops trailing empty strings
    if len(tokens) < 3:
        return None
    group_id = ":".join(tokens[:-2])
    if not group_id.strip():
        return None
    try:
        topic_id = uuid_from_kafka_str(tokens[-2])
    except ValueError:
        return None
    text = tokens[-1]
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    partition = int(text)
    if not -2**31 <= partition < 2**31:
        return None
    return group_id, topic_id, partition


async def find_share_coordinator(ctx: RequestContext, key: str) -> CoordinatorAnswer:
    """FindCoordinator for a share-partition key (type 2), as Kafka 4.4's
    ``KafkaApis.getCoordinator``: INVALID_REQUEST before v6, CLUSTER_AUTHORIZATION_FAILED
    without CLUSTER_ACTION, INVALID_REQUEST for a key that does not parse, else the live
    leader of its ``__share_group_state`` partition (the topic made on first use, answering
    COORDINATOR_NOT_AVAILABLE meanwhile)."""
    # Kafka's v4+ answer of a key carries no message (""), but the authorization failure
    # fails the whole request (prepareErrorResponse: the error's message).
    if ctx.api_version < 6:
        return CoordinatorAnswer(codes.INVALID_REQUEST, error_message="")
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return CoordinatorAnswer(codes.CLUSTER_AUTHORIZATION_FAILED)
    parsed = parse_share_key(key)
    if parsed is None:
        return CoordinatorAnswer(codes.INVALID_REQUEST, error_message="")
    config = ctx.broker.config
    found = await cluster_coordinators.find_coordinator(
        partition_seam(ctx.broker), SHARE_STATE_TOPIC, coordinator_key(*parsed),
        partitions=int(config.get("share.coordinator.state.topic.num.partitions", 50)),
        replication_factor=int(config.get("share.coordinator.state.topic.replication.factor",
                                          3)),
        topic_config=state_topic_config(config))
    if found.error_code != codes.NONE:
        return found._replace(error_message="")
    # A lone broker makes the topic here (a cluster member's comes from ZooKeeper).
    await ctx.broker.run_blocking(partition_seam(ctx.broker).ensure_internal_topic,
                                  SHARE_STATE_TOPIC)
    return found


# --- start, stop -------------------------------------------------------------------------------


def coordinator_config(config: Any) -> ShareCoordinatorConfig:
    """The share coordinator's configs from the broker's (Kafka's ``share.coordinator.*``)."""
    return ShareCoordinatorConfig(
        state_topic_num_partitions=int(config.get(
            "share.coordinator.state.topic.num.partitions", 50)),
        snapshot_update_records_per_snapshot=int(config.get(
            "share.coordinator.snapshot.update.records.per.snapshot", 500)),
        compression=_CODECS[int(config.get("share.coordinator.state.topic.compression.codec",
                                           0))])


#: Kafka's ``CompressionType`` ids (``share.coordinator.state.topic.compression.codec``).
_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def state_topic_config(config: Any) -> dict[str, str]:
    """``__share_group_state``'s configs when a cluster creates it (Kafka 4.4's
    ``ShareCoordinatorService.shareGroupStateTopicConfigs``)."""
    return {"cleanup.policy": "delete", "compression.type": "producer",
            "segment.bytes": str(config.get("share.coordinator.state.topic.segment.bytes",
                                            104857600)),
            "min.insync.replicas": str(config.get("share.coordinator.state.topic.min.isr", 2)),
            "retention.ms": "-1"}


async def start(state: BrokerState) -> None:
    """Make the persister over the Store's share coordinator and follow the leadership of
    the ``__share_group_state`` partitions: a partition's state is loaded from its log when
    this broker leads it (a lone broker leads them all) and dropped when it stops."""
    config = state.config
    cluster = partition_seam(state)
    coordinator = await state.run_blocking(state.store.share_coordinator)
    coordinator.set_config(coordinator_config(config))

    def partition_count(topic_id: uuid.UUID) -> int | None:
        name = cluster.topic_name(topic_id)
        return None if name is None else cluster.partition_count(name)

    coordinator.set_topic_partition_count(partition_count)

    async def load(partition: int, _leader_epoch: int) -> None:
        if serve_all and partition in coordinator.loaded_partitions():
            return  # a lone broker's Store loaded it at open: its log has not moved since
        await state.run_blocking(coordinator.load, partition)

    def unload(partition: int) -> None:
        coordinator.unload(partition)

    serve_all = True  # until the partitions say (load reads it only once they exist)
    partitions = cluster.coordinator_partitions(SHARE_STATE_TOPIC, load=load, unload=unload)
    # A cluster member serves only the partitions it loaded as their leader (their loads
    # are tasks that have not run yet); a lone broker serves them all.
    serve_all = not isinstance(partitions, cluster_coordinators.CoordinatorPartitions)
    persister = SharePersister(
        cluster, coordinator, partitions,
        write_timeout_ms=int(config.get("share.coordinator.write.timeout.ms", 5000)),
        request_timeout_ms=int(config.get("request.timeout.ms", 30000)),
        replication_factor=int(config.get("share.coordinator.state.topic.replication.factor",
                                          3)),
        topic_config=state_topic_config(config), serve_all=serve_all)
    state.extensions[EXTENSION] = persister
    await partitions.start()
    state.extensions[HOUSEKEEPING] = state.loop.create_task(_housekeeping(
        state, persister,
        prune_interval_ms=int(config.get("share.coordinator.state.topic.prune.interval.ms",
                                         300000)),
        cold_interval_ms=int(config.get(
            "share.coordinator.cold.partition.snapshot.interval.ms", 300000))))


#: How often the state of deleted topics is looked for (seconds).
_CLEANUP_S = 5.0
#: This module's key in ``BrokerState.extensions``: its housekeeping task.
HOUSEKEEPING = "share_state_housekeeping"


async def _housekeeping(state: BrokerState, persister: SharePersister, *,
                        prune_interval_ms: int, cold_interval_ms: int) -> None:
    """Kafka's ``ShareCoordinatorService`` periodic jobs over the partitions coordinated
    here: every ``share.coordinator.cold.partition.snapshot.interval.ms`` a snapshot of the
    share-partitions not snapshotted for that long, every
    ``share.coordinator.state.topic.prune.interval.ms`` the records every later snapshot
    made redundant deleted (the log start offset moved up to
    :meth:`~seglog.coordinator.share_coordinator.ShareCoordinator.last_redundant_offset`;
    followers follow the leader's log start)."""
    jobs = _Jobs(state, persister, cold_interval_ms)
    now = time.monotonic()
    next_prune = now + prune_interval_ms / 1000
    next_cold = now + cold_interval_ms / 1000
    while not state.closing:
        await asyncio.sleep(max(0.0, min(next_prune, next_cold, time.monotonic() + _CLEANUP_S)
                                - time.monotonic()))
        cold = time.monotonic() >= next_cold
        prune = time.monotonic() >= next_prune
        if cold:
            next_cold = time.monotonic() + cold_interval_ms / 1000
        if prune:
            next_prune = time.monotonic() + prune_interval_ms / 1000
        try:
            await jobs.run(cold=cold, prune=prune)
        except Exception:  # noqa: BLE001 - one failed round must not end the jobs
            log.exception("share coordinator housekeeping failed; trying again next round")


class _Jobs:
    """One round of :func:`_housekeeping` over the partitions coordinated here."""

    def __init__(self, state: BrokerState, persister: SharePersister, cold_interval_ms: int):
        self.state = state
        self.persister = persister
        self.cold_interval_ms = cold_interval_ms
        self.pruned: dict[int, int] = {}

    async def run(self, *, cold: bool, prune: bool) -> None:
        """Delete the state of deleted topics; with ``cold`` write cold snapshots, with
        ``prune`` delete the records made redundant."""
        persister = self.persister
        owned = sorted(persister.partitions.owned_partitions())
        for partition in owned:
            # Kafka runs maybeCleanupShareState when the metadata says topics were deleted;
            # here on every round, over the partitions led here.
            def cleanup(c: ShareCoordinator, p: int = partition) -> ErrorCode:
                return c.delete_state_of_deleted_topics(p)

            code = await persister.local(cleanup, _same)
            if code:
                log.info("%s-%d: state of deleted topics not deleted (%s)", SHARE_STATE_TOPIC,
                         partition, codes.BY_CODE[int(code)].name)
            if cold:
                def snapshot(c: ShareCoordinator, p: int = partition) -> ErrorCode:
                    return c.snapshot_cold_partitions(p, self.cold_interval_ms)

                code = await persister.local(snapshot, _same)
                if code:
                    log.info("%s-%d: cold snapshots not written (%s)", SHARE_STATE_TOPIC,
                             partition, codes.BY_CODE[int(code)].name)
            if prune:
                await self._prune(partition)

    async def _prune(self, partition: int) -> None:
        offset = self.persister.coordinator.last_redundant_offset(partition)
        replica = partition_seam(self.state).leader_replica(
            TopicPartition(SHARE_STATE_TOPIC, partition))
        if offset is None or replica is None or self.pruned.get(partition) == offset:
            return
        try:
            await self.state.run_blocking(replica.log.delete_records_before, offset)
        except SeglogError as exc:
            log.info("%s-%d: pruning below %d failed: %s", SHARE_STATE_TOPIC, partition,
                     offset, exc)
            return
        self.pruned[partition] = offset
        self.state.appended.notify()


async def stop(state: BrokerState) -> None:
    """Stop the housekeeping, following the leadership and the connections to other
    brokers."""
    task = state.extensions.pop(HOUSEKEEPING, None)
    if task is not None:
        await cancel_and_wait([task])
    persister = state.extensions.pop(EXTENSION, None)
    if persister is None:
        return
    await persister.partitions.close()
    await persister.close()


HANDLERS = (
    ApiHandler(INITIALIZE, 0, 0, handle_initialize_share_group_state),
    ApiHandler(READ, 0, 0, handle_read_share_group_state),
    ApiHandler(WRITE, 0, 1, handle_write_share_group_state),
    ApiHandler(DELETE, 0, 0, handle_delete_share_group_state),
    ApiHandler(SUMMARY, 0, 1, handle_read_share_group_state_summary),
)
