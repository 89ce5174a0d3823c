"""ShareFetch (API key 78, v1-2) and ShareAcknowledge (79, v1-2) of KIP-932: a share group
member fetches records from the partitions' leaders and acknowledges them (Kafka 4.4's
``KafkaApis.handleShareFetchRequest`` / ``handleShareAcknowledgeRequest``).

The order of checks is Kafka's: share groups off (``share.version`` finalized below 1)
UNSUPPORTED_VERSION; no group id INVALID_REQUEST; READ on the GROUP denied
GROUP_AUTHORIZATION_FAILED; a member id empty or longer than 36 characters INVALID_REQUEST;
a v2 renew-only ShareFetch (``is_renew_ack``) with a non-zero ``max_bytes``, ``min_bytes``,
``max_records`` or ``max_wait_ms`` INVALID_REQUEST; then the share session
(:mod:`seglog.server.share_sessions`; a full cache answers SHARE_SESSION_LIMIT_REACHED after
``max_wait_ms``). Each of those answers the whole request with that error and nothing else.

Per partition: a topic id this broker does not know UNKNOWN_TOPIC_ID, READ on the TOPIC
denied TOPIC_AUTHORIZATION_FAILED, an index the topic does not have
UNKNOWN_TOPIC_OR_PARTITION, a partition this broker does not lead NOT_LEADER_OR_FOLLOWER with
the current leader and its endpoint. Acknowledgement batches are checked as Kafka's
``validateAcknowledgementBatches`` (first <= last, in order, one type or one per offset, types
0-3 and 4 = RENEW from v2) and answered INVALID_REQUEST per partition otherwise; an
acknowledgement piggy-backed on a ShareFetch is answered in the partition's
``acknowledge_error_code`` (partitions only acknowledged are added to the answer).

The work is :class:`seglog.server.share_partitions.SharePartitionManager`'s: acknowledgements
are applied (and persisted) first, then records are acquired; epoch -1 closes the session
and releases the member's remaining records once answered. Quotas as Fetch: a client over
its fetch byte rate or request quota is answered with no partitions and the throttle time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Iterable, Sequence

from ... import error_codes as codes
from ... import features
from ...types import TopicPartition
from .. import quotas
from ..authorization import AclOperation, ResourceType, authorize, filter_authorized
from ..context import RequestContext
from ..finalized_features import FINALIZED_FEATURES_KEY
from ..registry import ApiHandler
from ..share_partitions import (PartitionFetch, find_share_partition_manager,
                                share_partition_manager)
from ..share_sessions import FINAL_EPOCH, SharedPartition, ShareSessionError, ShareSessionKey
from .admin_wire import make, response_classes
from .data_fetch import FETCH_MAX_BYTES_DEFAULT
from .data_topics import partition_seam, topic_ids

__all__ = ["HANDLERS", "handle_share_acknowledge", "handle_share_fetch", "stop"]

SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79
#: Kafka's bound on a member id (``KafkaApis.isMemberIdValid``).
MEMBER_ID_LENGTH_MAX = 36
#: The acknowledge types (Kafka's ``AcknowledgeType`` ids): 0 gap ... 3 reject, 4 renew (v2).
_RENEW = 4
#: ShareFetch v2's ShareAcquireMode ids: 0 batch-optimized, 1 record-limit.
_ACQUIRE_MODES = (0, 1)


def _share_groups_enabled(ctx: RequestContext) -> bool:
    """Kafka's ``isShareGroupProtocolEnabled``: ``share.version`` finalized at 1 or more.
    While seglog's feature table has no ``share.version`` yet, share groups are on."""
    if "share.version" not in features.FEATURES:
        return True
    finalized = ctx.broker.extensions.get(FINALIZED_FEATURES_KEY)
    if finalized is None:
        return True
    _epoch, levels = finalized.current()
    return int(levels.get("share.version", 0)) >= 1


def _disabled(ctx: RequestContext) -> bool:
    """Share groups are off: the manager lets go of its sessions and partitions (Kafka does
    it when share.version changes; here at the next request), and the request is
    refused."""
    if _share_groups_enabled(ctx):
        return False
    manager = find_share_partition_manager(ctx.broker)
    if manager is not None:
        manager.share_groups_disabled()
    return True


def _member_id_valid(member_id: str | None) -> bool:
    return bool(member_id) and len(member_id or "") <= MEMBER_ID_LENGTH_MAX


def _error_response(ctx: RequestContext, error_code: int, throttle_ms: int = 0) -> Any:
    """``getErrorResponse``: the top-level error alone."""
    cls, _ = response_classes(ctx.api_key, ctx.api_version)
    return make(cls, throttle_time=throttle_ms, error_code=error_code,
                acquisition_lock_timeout=0, responses=(), node_endpoints=())


def _resolve(ctx: RequestContext, topic_id: uuid.UUID | None, index: int) -> SharedPartition:
    topic = topic_ids(ctx.broker).topic(topic_id) if topic_id is not None else None
    return SharedPartition(topic_id or uuid.UUID(int=0),
                           topic.name if topic is not None else None, int(index))


def _known_partition(ctx: RequestContext, part: SharedPartition) -> bool:
    """Kafka's ``metadataCache.contains(tp)``."""
    if part.topic is None:
        return False
    count = partition_seam(ctx.broker).partition_count(part.topic)
    return count is not None and 0 <= part.partition < count


def _ack_batches(ctx: RequestContext, topics: Iterable[Any]
                 ) -> tuple[dict[SharedPartition, list[tuple[int, int, tuple[int, ...]]]],
                            dict[SharedPartition, int]]:
    """``getAcknowledgeBatchesFrom...Request``: the batches per partition, and the
    partitions of unknown topic ids (UNKNOWN_TOPIC_ID)."""
    batches: dict[SharedPartition, list[tuple[int, int, tuple[int, ...]]]] = {}
    erroneous: dict[SharedPartition, int] = {}
    for topic in topics:
        for p in topic.partitions:
            part = _resolve(ctx, topic.topic_id, p.partition_index)
            if part.topic is None:
                erroneous[part] = codes.UNKNOWN_TOPIC_ID
                continue
            batches[part] = [(int(b.first_offset), int(b.last_offset),
                              tuple(int(t) for t in b.acknowledge_types))
                             for b in p.acknowledgement_batches]
    return batches, erroneous


def _batches_valid(batches: Sequence[tuple[int, int, tuple[int, ...]]], *,
                   supports_renew: bool, is_renew_ack: bool) -> bool:
    """Kafka's ``validateAcknowledgementBatches`` for one partition."""
    previous_last = -1
    max_type = _RENEW if supports_renew else 3
    for first, last, types in batches:
        if first > last or first < previous_last:
            return False
        if not types:
            return False
        if len(types) > 1 and last - first != len(types) - 1:
            return False
        if any(t < 0 or t > max_type for t in types):
            return False
        if is_renew_ack and any(t not in (_RENEW, 0) for t in types):
            return False
        previous_last = last
    return True


async def _acknowledge(ctx: RequestContext, group_id: str, member_id: str,
                       batches: dict[SharedPartition, list[tuple[int, int, tuple[int, ...]]]],
                       erroneous: dict[SharedPartition, int], authorized: set[str], *,
                       is_renew_ack: bool) -> dict[SharedPartition, tuple[int, str | None]]:
    """Kafka's ``handleAcknowledgements``: ``{partition: (error code, message)}``."""
    supports_renew = ctx.api_version >= 2
    result: dict[SharedPartition, tuple[int, str | None]] = {
        part: (code, None) for part, code in erroneous.items()}
    interested: dict[SharedPartition, list[tuple[int, int, tuple[int, ...]]]] = {}
    for part, part_batches in batches.items():
        if not _batches_valid(part_batches, supports_renew=supports_renew,
                              is_renew_ack=is_renew_ack):
            result[part] = (codes.INVALID_REQUEST, None)
        elif part.topic not in authorized:
            result[part] = (codes.TOPIC_AUTHORIZATION_FAILED, None)
        elif not _known_partition(ctx, part):
            result[part] = (codes.UNKNOWN_TOPIC_OR_PARTITION, None)
        elif not part_batches:
            result[part] = (codes.NONE, None)
        else:
            interested[part] = part_batches
    if interested:
        manager = share_partition_manager(ctx.broker)
        outcome = await manager.acknowledge(group_id, member_id, interested)
        for part in interested:
            result[part] = outcome.get(part.key, (codes.UNKNOWN_TOPIC_OR_PARTITION, None))
    return result


def _current_leader(ctx: RequestContext, part: SharedPartition
                    ) -> tuple[tuple[int, int], Any | None]:
    """Kafka's ``getCurrentLeader``: ``((leader id, leader epoch), (id, host, port, rack) of
    its endpoint on the request's listener or None)``."""
    cluster = partition_seam(ctx.broker)
    if part.topic is None:
        return (-1, -1), None
    state = None
    states = getattr(cluster, "states", None)
    if states is not None:
        state = states.get(TopicPartition(part.topic, part.partition))
    if state is None or state.leader < 0:
        return (-1, -1), None
    endpoint = None
    brokers = getattr(cluster, "live_brokers", None) or {}
    info = brokers.get(state.leader)
    if info is not None:
        address = info.address(ctx.listener_name) if hasattr(info, "address") else None
        if address is not None:
            endpoint = (state.leader, address[0], address[1], info.rack)
    return (state.leader, state.leader_epoch), endpoint


async def handle_share_fetch(ctx: RequestContext, request: Any) -> Any:
    """Answer a ShareFetch (see the module docstring)."""
    version = ctx.api_version
    if _disabled(ctx):
        return _error_response(ctx, codes.UNSUPPORTED_VERSION)
    group_id = request.group_id
    if group_id is None:
        return _error_response(ctx, codes.INVALID_REQUEST)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return _error_response(ctx, codes.GROUP_AUTHORIZATION_FAILED)
    member_id = request.member_id
    if not _member_id_valid(member_id):
        return _error_response(ctx, codes.INVALID_REQUEST)
    epoch = int(request.share_session_epoch)
    max_wait_ms = int(request.max_wait.total_seconds() * 1000) \
        if hasattr(request, "max_wait") else int(request.max_wait_ms)
    is_renew_ack = version >= 2 and bool(getattr(request, "is_renew_ack", False))
    if is_renew_ack and (int(request.max_bytes) != 0 or int(request.min_bytes) != 0
                         or int(request.max_records) != 0 or max_wait_ms != 0):
        return _error_response(ctx, codes.INVALID_REQUEST)
    ack_present = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    share_fetch_data = [_resolve(ctx, t.topic_id, p.partition_index)
                        for t in request.topics for p in t.partitions]
    forgotten = [_resolve(ctx, t.topic_id, index)
                 for t in request.forgotten_topics_data for index in t.partitions]
    manager = share_partition_manager(ctx.broker)
    try:
        context = manager.sessions.new_context(
            group_id, share_fetch_data, forgotten, member_id, epoch,
            acknowledge_data_present=ack_present, connection_id=ctx.connection_id)
    except ShareSessionError as exc:
        if exc.error_code == codes.SHARE_SESSION_LIMIT_REACHED:
            # Kafka's idle share fetch timer task: the answer after max_wait_ms.
            await asyncio.sleep(max(max_wait_ms, 0) / 1000.0)
        return _error_response(ctx, exc.error_code)
    erroneous, valid = context.erroneous_and_valid()
    names = {p.topic for p, _ in erroneous} | {p.topic for p in valid} \
        | {p.topic for p in share_fetch_data}
    authorized = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                   (n for n in names if n is not None))
    started_ns = time.perf_counter_ns()
    acks: dict[SharedPartition, tuple[int, str | None]] = {}
    if ack_present:
        batches, ack_erroneous = _ack_batches(ctx, request.topics)
        acks = await _acknowledge(ctx, group_id, member_id, batches, ack_erroneous, authorized,
                                  is_renew_ack=is_renew_ack)
    fetched: list[tuple[SharedPartition, PartitionFetch]] = []
    if not is_renew_ack:
        failed: list[tuple[SharedPartition, PartitionFetch]] = [
            (p, PartitionFetch(code)) for p, code in erroneous]
        interested: list[SharedPartition] = []
        for part in valid:
            if part.topic not in authorized:
                failed.append((part, PartitionFetch(codes.TOPIC_AUTHORIZATION_FAILED)))
            elif not _known_partition(ctx, part):
                failed.append((part, PartitionFetch(codes.UNKNOWN_TOPIC_OR_PARTITION)))
            else:
                interested.append(part)
        acquire_mode = int(getattr(request, "share_acquire_mode", 0))
        if interested and acquire_mode not in _ACQUIRE_MODES:
            # Kafka's ShareAcquireMode.forId throws inside fetchMessages: the whole request
            # fails (getErrorResponse of an unexpected exception).
            return _error_response(ctx, codes.UNKNOWN_SERVER_ERROR)
        if interested:
            config_max = int(ctx.broker.config.get("fetch.max.bytes", FETCH_MAX_BYTES_DEFAULT))
            max_bytes = min(int(request.max_bytes), config_max)
            if quotas.any_quota(ctx):
                max_bytes = min(max_bytes, max(int(quotas.fetch_bytes_max(ctx)), 0))
            min_bytes = min(int(request.min_bytes), max_bytes)
            outcome = await manager.fetch(
                group_id, member_id, interested, session_epoch=epoch,
                max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                max_records=int(getattr(request, "max_records", 500)),
                batch_size=int(getattr(request, "batch_size", 500)),
                acquire_mode=acquire_mode)
            by_key = {p.key: p for p in interested}
            fetched = [(by_key[key], result) for key, result in outcome.items()
                       if key in by_key]
        fetched += failed
    lock_ms = manager.record_lock_duration_ms(group_id)
    size_bytes = sum(len(r.records) for _, r in fetched)
    if quotas.any_quota(ctx):
        throttle_ms = quotas.fetch_throttle_ms(ctx, size_bytes,
                                               time.perf_counter_ns() - started_ns)
        if throttle_ms > 0:
            response = _error_response(ctx, context.throttled(), throttle_ms)
            if epoch == FINAL_EPOCH:
                await _close_session(manager, group_id, member_id)
            return response
    error_code, selected = context.respond(
        [(p.key, bool(r.acquired), r.error_code) for p, r in fetched])
    if selected is not None:
        fetched = [(p, r) for p, r in fetched if p.key in selected]
    response = _fetch_response(ctx, error_code, fetched, acks, lock_ms)
    if epoch == FINAL_EPOCH:
        await _close_session(manager, group_id, member_id)
    return response


async def _close_session(manager: Any, group_id: str, member_id: str) -> None:
    """Kafka's ``releaseSession``: drop the session, release the member's records."""
    parts = manager.sessions.cached_partitions(group_id, member_id)
    if manager.sessions.remove(ShareSessionKey(group_id, member_id)) is None:
        return
    await manager.release_session(group_id, member_id, parts)


def _fetch_response(ctx: RequestContext, error_code: int,
                    fetched: Sequence[tuple[SharedPartition, PartitionFetch]],
                    acks: dict[SharedPartition, tuple[int, str | None]], lock_ms: int) -> Any:
    cls, m = response_classes(SHARE_FETCH, ctx.api_version)
    endpoints: dict[int, Any] = {}
    topics: dict[uuid.UUID, list[Any]] = {}
    ack_by_key = {p.key: v for p, v in acks.items()}
    for part, result in fetched:
        leader = (0, 0)
        if result.error_code in (codes.NOT_LEADER_OR_FOLLOWER, codes.FENCED_LEADER_EPOCH):
            leader, endpoint = _current_leader(ctx, part)
            if endpoint is not None:
                endpoints[endpoint[0]] = endpoint
        ack_code, ack_message = ack_by_key.pop(part.key, (codes.NONE, None))
        topics.setdefault(part.topic_id, []).append(make(
            m.PartitionData, partition_index=part.partition, error_code=result.error_code,
            error_message=result.error_message, acknowledge_error_code=ack_code,
            acknowledge_error_message=ack_message,
            current_leader=make(m.LeaderIdAndEpoch, leader_id=leader[0],
                                leader_epoch=leader[1]),
            records=result.records,
            acquired_records=tuple(make(m.AcquiredRecords, first_offset=first,
                                        last_offset=last, delivery_count=count)
                                   for first, last, count in result.acquired)))
    for (topic_id, index), (ack_code, ack_message) in ack_by_key.items():
        # Acknowledged only: answered with their acknowledgement outcome.
        topics.setdefault(topic_id, []).append(make(
            m.PartitionData, partition_index=index, error_code=codes.NONE,
            acknowledge_error_code=ack_code, acknowledge_error_message=ack_message,
            current_leader=make(m.LeaderIdAndEpoch, leader_id=0, leader_epoch=0),
            records=b"", acquired_records=()))
    return make(cls, throttle_time=0, error_code=error_code, acquisition_lock_timeout=lock_ms,
                responses=tuple(make(m.ShareFetchableTopicResponse, topic_id=topic_id,
                                     partitions=tuple(parts))
                                for topic_id, parts in topics.items()),
                node_endpoints=tuple(make(m.NodeEndpoint, node_id=e[0], host=e[1], port=e[2],
                                          rack=e[3]) for e in endpoints.values()))


async def handle_share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    """Answer a ShareAcknowledge (see the module docstring)."""
    version = ctx.api_version
    cls, m = response_classes(SHARE_ACKNOWLEDGE, version)

    def error(code: int) -> Any:
        return make(cls, throttle_time=0, error_code=code, acquisition_lock_timeout=0,
                    responses=(), node_endpoints=())

    if _disabled(ctx):
        return error(codes.UNSUPPORTED_VERSION)
    group_id = request.group_id
    if group_id is None:
        return error(codes.INVALID_REQUEST)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return error(codes.GROUP_AUTHORIZATION_FAILED)
    member_id = request.member_id
    if not _member_id_valid(member_id):
        return error(codes.INVALID_REQUEST)
    epoch = int(request.share_session_epoch)
    manager = share_partition_manager(ctx.broker)
    try:
        manager.sessions.acknowledge_session_update(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return error(exc.error_code)
    names = set()
    for topic in request.topics:
        part = _resolve(ctx, topic.topic_id, 0)
        if part.topic is not None:
            names.add(part.topic)
    authorized = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    batches, erroneous = _ack_batches(ctx, request.topics)
    started_ns = time.perf_counter_ns()
    acks = await _acknowledge(ctx, group_id, member_id, batches, erroneous, authorized,
                              is_renew_ack=version >= 2 and bool(
                                  getattr(request, "is_renew_ack", False)))
    if epoch == FINAL_EPOCH:
        await _close_session(manager, group_id, member_id)
    throttle_ms = 0
    if quotas.any_quota(ctx):
        throttle_ms = quotas.request_throttle_ms(ctx, time.perf_counter_ns() - started_ns)
    endpoints: dict[int, Any] = {}
    topics: dict[uuid.UUID, list[Any]] = {}
    for part, (code, message) in acks.items():
        leader = (0, 0)
        if code in (codes.NOT_LEADER_OR_FOLLOWER, codes.FENCED_LEADER_EPOCH):
            leader, endpoint = _current_leader(ctx, part)
            if endpoint is not None:
                endpoints[endpoint[0]] = endpoint
        topics.setdefault(part.topic_id, []).append(make(
            m.PartitionData, partition_index=part.partition, error_code=code,
            error_message=message,
            current_leader=make(m.LeaderIdAndEpoch, leader_id=leader[0],
                                leader_epoch=leader[1])))
    return make(cls, throttle_time=throttle_ms, error_code=codes.NONE,
                acquisition_lock_timeout=manager.record_lock_duration_ms(group_id),
                responses=tuple(make(m.ShareAcknowledgeTopicResponse, topic_id=topic_id,
                                     partitions=tuple(parts))
                                for topic_id, parts in topics.items()),
                node_endpoints=tuple(make(m.NodeEndpoint, node_id=e[0], host=e[1], port=e[2],
                                          rack=e[3]) for e in endpoints.values()))


async def stop(state: Any) -> None:
    """Stop the share partition manager's timer (broker shutdown)."""
    manager = find_share_partition_manager(state)
    if manager is not None:
        await manager.close()


HANDLERS = (
    ApiHandler(SHARE_FETCH, 1, 2, handle_share_fetch),
    ApiHandler(SHARE_ACKNOWLEDGE, 1, 2, handle_share_acknowledge),
)
