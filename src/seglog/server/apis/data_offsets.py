"""ListOffsets (API key 2, v1-v11) and OffsetForLeaderEpoch (API key 23, v2-v4): where a log
starts and ends, which offset a time maps to, and where a leader epoch ends
(``ReplicaManager.fetchOffset``, ``Partition.fetchOffsetForTimestamp``,
``UnifiedLog.fetchOffsetByTimestamp``, ``Partition.lastOffsetForLeaderEpoch``).

ListOffsets, per partition: a partition named twice is INVALID_REQUEST; a negative timestamp
that is not a sentinel the version knows is UNSUPPORTED_VERSION (-1 latest and -2 earliest
from v1, -3 max timestamp from v7, -4 earliest local from v8, -5 latest tiered from v9,
-6 earliest pending upload from v11); an unknown partition UNKNOWN_TOPIC_OR_PARTITION; a
``current_leader_epoch`` other than this leader's FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
Then, for a consumer (``replica_id`` -1) the last fetchable offset is the high watermark, or
the last stable offset with read_committed (any other replica id: the log end offset):

- latest (-1): the last fetchable offset, timestamp -1;
- earliest (-2) and earliest local (-4): the log start offset (no tiered storage here);
- latest tiered (-5) and earliest pending upload (-6): offset -1, epoch -1 (nothing is
  tiered, as Kafka answers with remote storage disabled);
- max timestamp (-3): the first record holding the largest timestamp;
- a time: the first record whose timestamp is at or after it (the time indexes);

and the last two answer nothing found (offset and timestamp -1) when the record is at or
past the last fetchable offset. Leader epochs are answered from v4 on, and are always
:data:`~seglog.server.apis.data_topics.LEADER_EPOCH` here (see :mod:`.data_topics`).

In a cluster (``zookeeper.connect``) both APIs are answered by the partition's leader only
(NOT_LEADER_OR_FOLLOWER elsewhere), ``current_leader_epoch`` is fenced against the leader's
epoch, and the epochs come from the leader's epoch cache: OffsetForLeaderEpoch answers
``Log.end_offset_for_epoch`` (Kafka's ``LeaderEpochFileCache.endOffsetFor``), ListOffsets the
current leader epoch for latest and the cached epoch of the offset found otherwise.
"""

from __future__ import annotations

import datetime
from collections import Counter
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ... import error_codes as codes
from ... import errors
from ...cluster.seam import Replica
from ...types import TopicPartition
from ..authorization import AclOperation, ResourceType, authorize_cluster, filter_authorized
from ..context import RequestContext
from .data_metadata import build
from .data_topics import (
    UNDEFINED_EPOCH,
    error_code_for,
    partition_seam,
    response_entities,
    topic_or_none,
)

if TYPE_CHECKING:
    from ...storage.log import Log

__all__ = ["LIST_OFFSETS_KEY", "LIST_OFFSETS_VERSION_MIN", "LIST_OFFSETS_VERSION_MAX",
           "OFFSET_FOR_LEADER_EPOCH_KEY", "OFFSET_FOR_LEADER_EPOCH_VERSION_MIN",
           "OFFSET_FOR_LEADER_EPOCH_VERSION_MAX", "handle_list_offsets",
           "handle_offset_for_leader_epoch"]

LIST_OFFSETS_KEY = 2
LIST_OFFSETS_VERSION_MIN = 1
LIST_OFFSETS_VERSION_MAX = 11
OFFSET_FOR_LEADER_EPOCH_KEY = 23
OFFSET_FOR_LEADER_EPOCH_VERSION_MIN = 2
OFFSET_FOR_LEADER_EPOCH_VERSION_MAX = 4

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
#: The first ListOffsets version that knows each sentinel (ReplicaManager's
#: ``timestampMinSupportedVersion``).
_SENTINEL_MIN_VERSION = {LATEST_TIMESTAMP: 1, EARLIEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7,
                         EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9,
                         EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
CONSUMER_REPLICA_ID = -1
_READ_COMMITTED = 1
_ZERO_MS = datetime.timedelta(0)


def _timestamp_of(log: Log, offset: int) -> int:
    """The timestamp of the record at ``offset`` (a data record the time index found)."""
    for record in log.records(start=offset, end=offset + 1):
        timestamp_ms: int = record.timestamp_ms  # the storage's records are untyped (Any)
        return timestamp_ms
    return -1


def _epoch_for_offset(log: Log, offset: int) -> int:
    """The leader epoch of the record at ``offset`` in a replicated log's epoch cache (the
    latest entry starting at or before it); -1 when the cache has none."""
    epoch = UNDEFINED_EPOCH
    for entry in log.leader_epoch_cache.entries:
        if entry.start_offset > offset:
            break
        epoch = entry.epoch
    return epoch


def _lookup(replica: Replica, timestamp: int, *, isolation_level: int | None
            ) -> tuple[int, int, int]:
    """``(offset, timestamp, leader epoch)`` for one partition of this leader's ``replica``;
    ``(-1, -1, -1)`` when no record qualifies. Epochs come from the log's epoch cache (as
    Kafka's ``Log.fetchOffsetByTimestamp``); a log that keeps none (a lone broker's: it is
    not replicated) is in the replica's one epoch throughout."""
    log = replica.log
    cached = log.leader_epoch is not None
    if isolation_level is None:
        last_fetchable = log.end_offset
    elif isolation_level == _READ_COMMITTED:
        last_fetchable = log.last_stable_offset
    else:
        last_fetchable = log.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        return last_fetchable, -1, replica.leader_epoch
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        start = log.start_offset
        if not cached:
            return start, -1, replica.leader_epoch
        earliest = log.leader_epoch_cache.earliest_entry
        return start, -1, (earliest.epoch if earliest is not None
                           and earliest.start_offset <= start else UNDEFINED_EPOCH)
    if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        return -1, -1, UNDEFINED_EPOCH
    offset = log.offset_for_timestamp(timestamp)
    if offset is None or offset >= last_fetchable:
        return -1, -1, UNDEFINED_EPOCH
    return offset, _timestamp_of(log, offset), (
        _epoch_for_offset(log, offset) if cached else replica.leader_epoch)


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    """Answer a ListOffsets request (see the module docstring)."""
    version = ctx.api_version
    store = ctx.broker.store
    response_cls, module = response_entities(LIST_OFFSETS_KEY, version)
    topic_cls, partition_cls = module.ListOffsetsTopicResponse, module.ListOffsetsPartitionResponse
    replica_id = int(request.replica_id)
    isolation_level = int(getattr(request, "isolation_level", 0)) \
        if replica_id == CONSUMER_REPLICA_ID else None
    counts = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    cluster = partition_seam(ctx.broker)

    def answer(index: int, code: int, offset: int = -1, timestamp: int = -1,
               epoch: int = UNDEFINED_EPOCH) -> Any:
        return build(partition_cls, partition_index=index, error_code=ErrorCode(code),
                     timestamp=timestamp, offset=offset,
                     leader_epoch=epoch if version >= 4 else UNDEFINED_EPOCH,
                     old_style_offsets=())

    topics: list[Any] = []
    describable = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (t.name for t in request.topics))
    for t in request.topics:
        topic = topic_or_none(store, t.name)
        partitions: list[Any] = []
        for p in t.partitions:
            index, timestamp = p.partition_index, int(p.timestamp)
            if t.name not in describable:
                partitions.append(answer(index, codes.TOPIC_AUTHORIZATION_FAILED))
                continue
            if counts[(t.name, index)] > 1:
                partitions.append(answer(index, codes.INVALID_REQUEST))
                continue
            if timestamp < 0 and _SENTINEL_MIN_VERSION.get(timestamp, version + 1) > version:
                partitions.append(answer(index, codes.UNSUPPORTED_VERSION))
                continue
            if topic is None or not 0 <= index < topic.partitions:
                partitions.append(answer(index, codes.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            current_epoch = int(getattr(p, "current_leader_epoch", -1))
            # Only the leader answers (fetchOnlyFromLeader), a follower's request (replica
            # id >= 0) as a consumer's.
            replica = cluster.leader_replica(TopicPartition(t.name, index))
            code = (cluster.no_replica_error(TopicPartition(t.name, index)) if replica is None
                    else cluster.check_leader_epoch(replica, current_epoch))
            if code != codes.NONE or replica is None:  # None: code is not NONE
                partitions.append(answer(index, code))
                continue
            try:
                offset, found_ms, epoch = _lookup(replica, timestamp,
                                                  isolation_level=isolation_level)
            except (errors.SeglogError, OSError) as e:
                partitions.append(answer(index, error_code_for(e)))
                continue
            partitions.append(answer(index, codes.NONE, offset, found_ms, epoch))
        topics.append(build(topic_cls, name=t.name, partitions=tuple(partitions)))
    # KafkaApis answers the topics the caller may not DESCRIBE after the others.
    topics.sort(key=lambda topic: topic.name not in describable)
    return build(response_cls, throttle_time=_ZERO_MS, topics=tuple(topics))


async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    """Answer an OffsetForLeaderEpoch request: per partition UNKNOWN_TOPIC_OR_PARTITION, the
    leader-epoch fencing of ``current_leader_epoch``, else the end offset of the requested
    epoch (:func:`~seglog.server.apis.data_topics.end_offset_for_epoch`: the log end offset
    for this leader's epoch, -1/-1 for any other). A follower's request (``replica_id`` >= 0,
    v3+) is answered the same way: there is no replica to refuse it for yet."""
    version = ctx.api_version
    store = ctx.broker.store
    response_cls, module = response_entities(OFFSET_FOR_LEADER_EPOCH_KEY, version)
    topic_cls, partition_cls = module.OffsetForLeaderTopicResult, module.EpochEndOffset
    cluster = partition_seam(ctx.broker)
    topics: list[Any] = []
    # KIP-320: CLUSTER_ACTION (followers), else DESCRIBE on each topic (consumers).
    describable = None if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION) else \
        filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                          (t.topic for t in request.topics))
    for t in request.topics:
        topic = topic_or_none(store, t.topic)
        partitions: list[Any] = []
        for p in t.partitions:
            epoch, end_offset = UNDEFINED_EPOCH, -1
            if describable is not None and t.topic not in describable:
                code = codes.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= p.partition < topic.partitions:
                code = codes.UNKNOWN_TOPIC_OR_PARTITION
            else:
                # Partition.lastOffsetForLeaderEpoch: the leader only, its epoch cache.
                replica = cluster.leader_replica(TopicPartition(t.topic, p.partition))
                code = (cluster.no_replica_error(TopicPartition(t.topic, p.partition))
                        if replica is None
                        else cluster.check_leader_epoch(replica, int(p.current_leader_epoch)))
                if code == codes.NONE and replica is not None:  # None: code is not NONE
                    try:
                        epoch, end_offset = replica.end_offset_for_epoch(int(p.leader_epoch))
                    except (errors.SeglogError, OSError) as e:
                        code = error_code_for(e)
            partitions.append(build(partition_cls, error_code=ErrorCode(code),
                                    partition=p.partition, leader_epoch=epoch,
                                    end_offset=end_offset))
        topics.append(build(topic_cls, topic=t.topic, partitions=tuple(partitions)))
    return build(response_cls, throttle_time=_ZERO_MS, topics=tuple(topics))
