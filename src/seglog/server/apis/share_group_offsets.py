"""The share-group offset APIs of KIP-932: DescribeShareGroupOffsets (90, v0-1),
AlterShareGroupOffsets (91, v0) and DeleteShareGroupOffsets (92, v0), as Kafka 4.4's
``KafkaApis`` and ``GroupCoordinatorService`` answer them.

A share group's "offset" of a partition is its share-partition's start offset, kept by the
share coordinator (:mod:`seglog.server.share_persister`): Describe reads the state summaries
(and the lag, v1: the partition's high watermark less the start offset less the records
delivered past it; the high watermark from the partition's leader, asked over the
inter-broker listener when it is another broker, as Kafka's
``NetworkPartitionMetadataClient`` does); Alter (an empty group only) initializes the share-partitions at the given
start offsets; Delete (an empty group only) deletes the named topics' share-partition state.
A partition the topic lacks (DescribeShareGroupOffsets): Kafka 4.4's persister retries the
ReadShareGroupStateSummary for it until it gives up (about 30 s) and answers start offset
-1; seglog answers the same -1 at once (no share-partition state can exist for a partition
that does not exist, so the wait tells the client nothing).
The group's ShareGroupStatePartitionMetadata (initializing / initialized / deleting topics)
is kept by :mod:`seglog.server.apis.share_groups`' coordinator.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from ... import error_codes as codes
from ...coordinator import share_group as sg
from ...cluster.inter_broker import InterBrokerError
from ...errors import SeglogError
from ...types import TopicPartition
from ..authorization import AclOperation, ResourceType, authorize
from ..context import BrokerState, RequestContext
from ..registry import ApiHandler
from ..share_dlq_remote import RemoteDlqPartitions
from . import groups
from .data_topics import partition_seam
from . import share_groups as shg

__all__ = ["HANDLERS"]

log = logging.getLogger(__name__)

_ZERO_UUID = uuid.UUID(int=0)
#: Bound on a connect and the ListOffsets round trip to a partition's leader (Kafka's
#: inter-broker client's ``request.timeout.ms`` default).
_LIST_OFFSETS_TIMEOUT_MS = 30_000


def _state(ctx: RequestContext) -> shg.ShareGroupsState:
    found = shg.find_share_groups_state(ctx.broker)
    assert found is not None, "the share_groups module was not started"
    return found


async def _latest_offset(broker: BrokerState, state: shg.ShareGroupsState, topic: str,
                         partition: int) -> tuple[int, int]:
    """``(error code, high watermark)`` of the partition at its leader: Kafka's
    ``NetworkPartitionMetadataClient.listLatestOffsets`` (ListOffsets LATEST, read_uncommitted,
    sent to the partition's leader over the inter-broker listener). This broker's own leader
    replica answers without a round trip; no live leader is LEADER_NOT_AVAILABLE, as Kafka's
    metadata cache without a leader endpoint."""
    cluster = partition_seam(broker)
    tp = TopicPartition(topic, partition)
    replica = cluster.leader_replica(tp)
    if replica is not None:
        return codes.NONE, int(replica.log.high_watermark)
    partition_state = cluster.states.get(tp)
    leader = -1 if partition_state is None else int(partition_state.leader)
    if leader < 0 or leader == cluster.broker_id or leader not in cluster.live_brokers:
        return codes.LEADER_NOT_AVAILABLE, -1
    if state.remote_offsets is None:
        state.remote_offsets = RemoteDlqPartitions(
            cluster, request_timeout_ms=_LIST_OFFSETS_TIMEOUT_MS,
            backend=getattr(broker.store, "backend", None))
    try:
        return codes.NONE, await state.remote_offsets.high_watermark(leader, tp)
    except InterBrokerError as exc:
        code = getattr(exc, "kafka_error_code", None)
        log.warning("share group offsets: the end offset of %s-%d at broker %d: %s", topic,
                    partition, leader, exc)
        # A failed connection is Kafka's NETWORK_EXCEPTION (its client's disconnect).
        return (int(code) if code else codes.NETWORK_EXCEPTION), -1


# --- DescribeShareGroupOffsets --------------------------------------------------------------


async def _summaries(ctx: RequestContext, group_id: str,
                     wanted: list[tuple[str, uuid.UUID, list[int]]], with_lag: bool
                     ) -> list[dict[str, Any]]:
    """Kafka's ``readShareGroupStateSummary`` + ``computeShareGroupLagAndBuildResponse``:
    one response topic per ``(name, topic id, partitions)``."""
    persister = shg.share_persister_of(ctx.broker)
    topics = []
    for name, topic_id, partitions in wanted:
        rows: list[dict[str, Any]] = []
        for p in partitions:
            error, start, leader_epoch, complete = codes.NONE, -1, 0, -1
            if persister is not None:
                try:
                    summary = await persister.read_state_summary(group_id, topic_id, p, -1)
                    error = int(summary.error_code)
                    start, leader_epoch = int(summary.start_offset), int(summary.leader_epoch)
                    complete = int(getattr(summary, "delivery_complete_count", -1))
                except (SeglogError, OSError, asyncio.TimeoutError) as exc:
                    log.warning("share group %r: reading the state summary of %s-%d "
                                "failed: %s", group_id, name, p, exc)
                    error = codes.UNKNOWN_SERVER_ERROR
            if error or start == -1 or complete == -1:
                rows.append(dict(partition_index=p, start_offset=-1 if error else start,
                                 leader_epoch=0 if error else leader_epoch, lag=-1,
                                 error_code=codes.NONE, error_message=None))
                continue
            latest = None
            if with_lag:
                latest_error, latest = await _latest_offset(ctx.broker, _state(ctx), name, p)
                if latest_error:
                    # Kafka's row for a failed end offset: the error, the other fields at
                    # their defaults.
                    rows.append(dict(partition_index=p, start_offset=0, leader_epoch=0, lag=-1,
                                     error_code=latest_error,
                                     error_message=codes.message(latest_error)))
                    continue
            rows.append(dict(partition_index=p, start_offset=start, leader_epoch=leader_epoch,
                             lag=-1 if latest is None else latest - start - complete,
                             error_code=codes.NONE, error_message=None))
        topics.append(dict(topic_name=name, topic_id=topic_id, partitions=rows))
    return topics


async def _describe_group(ctx: RequestContext, group: Any) -> dict[str, Any]:
    group_id = group.group_id
    state = _state(ctx)
    topic_meta = shg.topic_metadata(ctx.broker)

    def failed(code: int, message: str | None = None) -> dict[str, Any]:
        return dict(group_id=group_id, topics=[], error_code=code, error_message=message)

    if not shg.shares_enabled(ctx.broker):
        return failed(codes.UNSUPPORTED_VERSION)
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return failed(codes.GROUP_AUTHORIZATION_FAILED)
    with_lag = ctx.api_version >= 1
    if group.topics is None:  # every initialized share-partition of the group
        not_here = groups.coordinator_error(ctx, group_id)
        if not_here:
            return failed(not_here, codes.message(not_here))
        shg.ensure_loaded(ctx.broker, state, group_id)
        initialized = state.coordinator.initialized_partitions(group_id)
        names = {meta.topic_id: name for name, meta in topic_meta.items()}
        wanted = sorted((names[t], t, sorted(ps)) for t, (_n, ps) in initialized.items()
                        if t in names)
        topics = await _summaries(ctx, group_id, wanted, with_lag)
        # KafkaApis: the topics the caller may not DESCRIBE are left out.
        topics = [t for t in topics if authorize(ctx, AclOperation.DESCRIBE,
                                                 ResourceType.TOPIC, t["topic_name"])]
        return dict(group_id=group_id, topics=topics, error_code=codes.NONE,
                    error_message=None)
    if not group.topics:
        return dict(group_id=group_id, topics=[], error_code=codes.NONE, error_message=None)
    allowed, denied = [], []
    for topic in group.topics:
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic_name):
            allowed.append(topic)
        else:
            denied.append(topic)
    wanted, unknown = [], []
    for topic in allowed:
        meta = topic_meta.get(topic.topic_name)
        if meta is None:
            unknown.append(dict(topic_name=topic.topic_name, topic_id=_ZERO_UUID, partitions=[
                dict(partition_index=p, start_offset=-1, leader_epoch=0, lag=-1,
                     error_code=codes.NONE, error_message=None) for p in topic.partitions]))
        else:
            wanted.append((topic.topic_name, meta.topic_id, list(topic.partitions)))
    topics = await _summaries(ctx, group_id, wanted, with_lag) + unknown
    topics += [dict(topic_name=t.topic_name, topic_id=_ZERO_UUID, partitions=[
        dict(partition_index=p, start_offset=0, leader_epoch=0, lag=-1,
             error_code=codes.TOPIC_AUTHORIZATION_FAILED,
             error_message=codes.message(codes.TOPIC_AUTHORIZATION_FAILED))
        for p in t.partitions]) for t in denied]
    return dict(group_id=group_id, topics=topics, error_code=codes.NONE, error_message=None)


async def handle_describe_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    """DescribeShareGroupOffsets v0-v1: DESCRIBE on each group, DESCRIBE on each topic; the
    share-partitions' start offsets (and, v1, lag) from the share coordinator."""
    answers = [await _describe_group(ctx, group) for group in request.groups]
    return groups.response(ctx, dict(groups=answers))


# --- AlterShareGroupOffsets ----------------------------------------------------------------


async def handle_alter_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    """AlterShareGroupOffsets v0: READ on the group, READ on each topic; the group must be
    empty; each partition's share state is initialized at the given start offset."""
    state = _state(ctx)
    group_id = request.group_id

    def failed(code: int, message: str | None = None) -> Any:
        return groups.response(ctx, dict(error_code=code, error_message=message,
                                         responses=[]))

    if not shg.shares_enabled(ctx.broker):
        return failed(codes.UNSUPPORTED_VERSION, codes.message(codes.UNSUPPORTED_VERSION))
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return failed(codes.GROUP_AUTHORIZATION_FAILED,
                      codes.message(codes.GROUP_AUTHORIZATION_FAILED))
    topic_meta = shg.topic_metadata(ctx.broker)
    refused: list[dict[str, Any]] = []
    allowed: list[tuple[str, list[tuple[int, int]]]] = []
    for topic in request.topics:
        error = codes.NONE
        if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
            error = codes.TOPIC_AUTHORIZATION_FAILED
        elif topic.topic_name not in topic_meta:
            error = codes.UNKNOWN_TOPIC_OR_PARTITION
        if error:
            meta = topic_meta.get(topic.topic_name)
            refused.append(dict(
                topic_name=topic.topic_name,
                topic_id=meta.topic_id if meta is not None else _ZERO_UUID,
                partitions=[dict(partition_index=p.partition_index, error_code=error,
                                 error_message=codes.message(error)) for p in topic.partitions]))
        else:
            allowed.append((topic.topic_name, [(int(p.partition_index), int(p.start_offset))
                                               for p in topic.partitions]))
    if not group_id:
        return failed(codes.INVALID_GROUP_ID, codes.message(codes.INVALID_GROUP_ID))
    not_here = groups.coordinator_error(ctx, group_id)
    if not_here:
        return failed(not_here, codes.message(not_here))
    shg.ensure_loaded(ctx.broker, state, group_id)
    if not state.coordinator.has_group(group_id) and shg.other_group(ctx.broker, group_id):
        return failed(codes.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    try:
        rows, init = state.coordinator.alter_offsets(group_id, allowed, ctx.broker.now_ms())
    except sg.ShareGroupError as exc:
        return failed(exc.error_code, exc.message)
    shg.persist(ctx.broker, state, group_id)
    results = await shg.initialize_share_state(ctx.broker, state, init) if init.offsets \
        else {}
    responses = []
    for name, topic_id, partitions in rows:
        answered = []
        for p, error in partitions:
            if not error and topic_id is not None:
                error = results.get((topic_id, p), codes.NONE)
            answered.append(dict(partition_index=p, error_code=error,
                                 error_message=None if not error else codes.message(error)))
        responses.append(dict(topic_name=name, topic_id=topic_id or _ZERO_UUID,
                              partitions=answered))
    # KafkaApis' response builder holds the refused topics first, then the coordinator's.
    return groups.response(ctx, dict(error_code=codes.NONE, error_message=None,
                                     responses=refused + responses))


# --- DeleteShareGroupOffsets ---------------------------------------------------------------


async def handle_delete_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    """DeleteShareGroupOffsets v0: DELETE on the group, READ on each topic; the group must be
    an empty share group; the named topics' share-partition state is deleted."""
    state = _state(ctx)
    group_id = request.group_id

    def failed(code: int, message: str | None = None) -> Any:
        return groups.response(ctx, dict(
            error_code=code, error_message=message if message is not None
            else codes.message(code), responses=[]))

    if not shg.shares_enabled(ctx.broker):
        return failed(codes.UNSUPPORTED_VERSION)
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return failed(codes.GROUP_AUTHORIZATION_FAILED)
    refused: list[dict[str, Any]] = []
    names: list[str] = []
    for topic in request.topics:
        if authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
            names.append(topic.topic_name)
        else:
            refused.append(dict(topic_name=topic.topic_name, topic_id=_ZERO_UUID,
                                error_code=codes.TOPIC_AUTHORIZATION_FAILED,
                                error_message=codes.message(codes.TOPIC_AUTHORIZATION_FAILED)))
    if not group_id:
        return failed(codes.INVALID_GROUP_ID)
    not_here = groups.coordinator_error(ctx, group_id)
    if not_here:
        return failed(not_here)
    shg.ensure_loaded(ctx.broker, state, group_id)
    if not state.coordinator.has_group(group_id) and shg.other_group(ctx.broker, group_id):
        return failed(codes.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    try:
        errors, to_delete = state.coordinator.initiate_delete_offsets(group_id, names)
    except sg.ShareGroupError as exc:
        return failed(exc.error_code, exc.message)
    shg.persist(ctx.broker, state, group_id)
    error_rows = [dict(topic_name=name, topic_id=_ZERO_UUID, error_code=code,
                       error_message=message) for name, code, message in errors]
    done_rows = []
    if to_delete:
        results = await shg.delete_share_state(
            ctx.broker, group_id, {t: ps for t, (_n, ps) in to_delete.items()})
        done = []
        for topic_id, (name, ps) in to_delete.items():
            failed_codes = [results.get((topic_id, p), codes.NONE) for p in sorted(ps)]
            code = next((c for c in failed_codes if c), codes.NONE)
            if code:
                error_rows.append(dict(topic_name=name, topic_id=topic_id, error_code=code,
                                       error_message=codes.message(code)))
            else:
                done.append(topic_id)
                done_rows.append(dict(topic_name=name, topic_id=topic_id,
                                      error_code=codes.NONE, error_message=None))
        state.coordinator.complete_delete_offsets(group_id, done)
        shg.persist(ctx.broker, state, group_id)
    return groups.response(ctx, dict(error_code=codes.NONE, error_message=None,
                                     responses=done_rows + error_rows + refused))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(90, 0, 1, handle_describe_share_group_offsets),
    ApiHandler(91, 0, 0, handle_alter_share_group_offsets),
    ApiHandler(92, 0, 0, handle_delete_share_group_offsets),
)
