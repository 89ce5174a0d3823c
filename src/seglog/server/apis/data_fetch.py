"""Fetch (API key 1, v4-v18) for consumers: whole batches straight from the segment files,
Kafka's size rules, a long poll without busy waiting, and read_committed
(``KafkaApis.handleFetchRequest``, ``ReplicaManager.fetchMessages`` / ``readFromLog``,
``Partition.fetchRecords``, ``DelayedFetch``).

Sizes. The response holds at most ``min(max_bytes, fetch.max.bytes)`` bytes of records and
each partition at most its ``partition_max_bytes``, except that the first partition that has
any data returns at least one whole batch even when it is larger (Kafka's ``minOneMessage``:
true until a partition returned bytes, then false for the rest).

Waiting. The response goes out at once when ``max_wait_ms`` is 0, the request names no
partition, some partition failed, or ``min(min_bytes, max bytes)`` bytes are ready. Otherwise
the handler awaits the broker's :class:`~seglog.server.context.AppendNotifier` (no polling),
re-reads when something was appended, and answers once enough bytes are there or the wait is
over, reading again as Kafka's ``DelayedFetch.onComplete`` does. A broker that is shutting
down (``BrokerState.closing``, when the core sets it and notifies) ends the wait at once.

Isolation. read_uncommitted reads stop at the high watermark; read_committed at the last
stable offset, with the aborted transactions that overlap what was read (the test-only
negative control ``read_committed_sees_aborted`` of ``BrokerState.test_breaks``,
:mod:`seglog.cluster.test_breaks`, answers an empty list instead).

Fetch sessions (KIP-227, :mod:`seglog.server.fetch_sessions`). The request's session id and
epoch pick its context: a full request (epoch 0) is answered in full with a new session id
when the cache has room; an incremental one reads every partition of its session (the ones it
names added or updated, its ``forgotten_topics_data`` dropped) and answers only those with
something new; epoch -1 is sessionless (session id 0). Session errors are answered with no
partitions and session id 0. Authorization, reading and waiting are the same for every kind:
an incremental request with nothing new waits ``max_wait_ms`` as a full one does.

Followers. On a single-node broker a fetch from a replica (``replica_id`` >= 0) is refused
per partition, as Kafka refuses a replica not in the partition's assignment
(NOT_LEADER_OR_FOLLOWER, or UNKNOWN_LEADER_EPOCH when it names a leader epoch).

In a cluster (``zookeeper.connect``) only a partition's leader answers (NOT_LEADER_OR_FOLLOWER
elsewhere, and for a replica id that is not one of its replicas); ``CurrentLeaderEpoch`` is
checked against the leader's epoch (FENCED_LEADER_EPOCH older, UNKNOWN_LEADER_EPOCH newer).
A follower's read goes to the log end offset; v12+ ``LastFetchedEpoch`` is checked against the
leader's epoch cache and a divergence answered at once with ``DivergingEpoch`` and no records;
otherwise the follower's fetch offset is recorded (once per request, at its first read): the
ISR may grow, the high watermark may move and delayed produces complete
(:mod:`seglog.cluster.replica_manager`). Consumers read to the high watermark as always.
The leader's replication throttle (:mod:`seglog.cluster.replication_quota`) answers a
throttled follower out of the ISR no records of a partition while its quota is exceeded.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Sequence

from ... import error_codes as codes
from ... import errors
from ...cluster.seam import PartitionSeam
from ...cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from .. import quotas
from ..authorization import (AclOperation, ResourceType, authorize, authorize_cluster,
                             filter_authorized)
from ..context import RawResponse, RequestContext
from ..fetch_sessions import (CACHE_SLOTS_DEFAULT, FINAL_EPOCH, FetchContext, FetchManager,
                              PartitionData, PartitionKey, PartitionOutcome)
from .data_fetch_codec import PartitionResult, encode_fetch_response
from .data_topics import (
    gone_or_storage_error,
    partition_seam,
    topic_ids,
    topic_or_none,
)
from ...types import TopicPartition

if TYPE_CHECKING:
    from ...store import Store, Topic

__all__ = ["API_KEY", "VERSION_MIN", "VERSION_MAX", "FETCH_MAX_BYTES_DEFAULT", "SESSIONS_KEY",
           "fetch_manager", "handle_fetch"]

API_KEY = 1
VERSION_MIN = 4
VERSION_MAX = 18

#: Kafka's ``fetch.max.bytes`` broker default (55 MiB).
FETCH_MAX_BYTES_DEFAULT = 55 * 1024 * 1024
#: Kafka's ``FetchRequest.CONSUMER_REPLICA_ID``.
CONSUMER_REPLICA_ID = -1
#: The request's isolation level (Kafka's ``IsolationLevel`` id) as :meth:`Log.read`'s name.
_ISOLATION = {0: "read_uncommitted", 1: "read_committed"}
#: Where the broker's :class:`~seglog.server.fetch_sessions.FetchManager` lives in
#: ``BrokerState.extensions``.
SESSIONS_KEY = "seglog.server.fetch_sessions"
_ZERO_UUID = uuid.UUID(int=0)


def fetch_manager(broker: Any) -> FetchManager:
    """The broker's fetch session cache (made at its first Fetch, sized by
    ``max.incremental.fetch.session.cache.slots``)."""
    manager = broker.extensions.get(SESSIONS_KEY)
    if not isinstance(manager, FetchManager):
        slots = int(broker.config.get("max.incremental.fetch.session.cache.slots",
                                      CACHE_SLOTS_DEFAULT))
        manager = broker.extensions[SESSIONS_KEY] = FetchManager(slots)
    return manager


def _failed(partition: int, code: int) -> PartitionResult:
    """Kafka's ``createLogReadResult(e)`` / ``FetchResponse.partitionResponse``: no records,
    every offset unknown."""
    return PartitionResult(partition, code, -1, -1, -1, None, b"")


class _Wanted:
    """One requested partition, resolved: where to answer it and how to read it."""

    __slots__ = ("key", "topic", "partition", "log", "error_code", "fetch_offset", "max_bytes",
                 "current_leader_epoch", "replica", "last_fetched_epoch",
                 "follower_log_start_offset")

    def __init__(self, key: str | uuid.UUID, topic: Topic | None, partition: int,
                 log: Any, error_code: int,
                 fetch_offset: int, max_bytes: int, current_leader_epoch: int,
                 replica: Any = None, last_fetched_epoch: int = -1,
                 follower_log_start_offset: int = -1):
        self.key = key
        self.topic = topic
        self.partition = partition
        self.log = log
        self.error_code = error_code
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        #: In a cluster: the leader's PartitionReplica (None on a single-node broker).
        self.replica = replica
        self.last_fetched_epoch = last_fetched_epoch
        self.follower_log_start_offset = follower_log_start_offset


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", CONSUMER_REPLICA_ID))


def _topic_key(version: int, fetch_topic: Any) -> str | uuid.UUID:
    if version >= 13:
        return fetch_topic.topic_id or _ZERO_UUID
    return str(fetch_topic.topic)


def _requested(ctx: RequestContext, request: Any
               ) -> tuple[dict[PartitionKey, PartitionData], list[PartitionKey]]:
    """The request's partitions (Kafka's ``fetchData``, first of duplicates kept in place,
    the last one's parameters) and the ones it forgets (v7+)."""
    version = ctx.api_version
    fetch_data: dict[PartitionKey, PartitionData] = {}
    for fetch_topic in request.topics:
        key = _topic_key(version, fetch_topic)
        for p in fetch_topic.partitions:
            fetch_data[(key, int(p.partition))] = PartitionData(
                int(p.fetch_offset), int(getattr(p, "log_start_offset", -1)),
                int(p.partition_max_bytes), int(getattr(p, "current_leader_epoch", -1)),
                int(getattr(p, "last_fetched_epoch", -1)))
    forgotten: list[PartitionKey] = []
    for forgotten_topic in getattr(request, "forgotten_topics_data", None) or ():
        key = _topic_key(version, forgotten_topic)
        forgotten.extend((key, int(index)) for index in forgotten_topic.partitions)
    return fetch_data, forgotten


def _by_topic(partitions: Sequence[tuple[PartitionKey, PartitionData]]
              ) -> list[tuple[str | uuid.UUID, list[tuple[int, PartitionData]]]]:
    """Consecutive partitions of one topic grouped, in order."""
    topics: list[tuple[str | uuid.UUID, list[tuple[int, PartitionData]]]] = []
    for (key, index), data in partitions:
        if topics and topics[-1][0] == key:
            topics[-1][1].append((index, data))
        else:
            topics.append((key, [(index, data)]))
    return topics


def _resolve(ctx: RequestContext, request: Any,
             partitions: Sequence[tuple[PartitionKey, PartitionData]]) -> list[_Wanted]:
    by_id = ctx.api_version >= 13
    store = ctx.broker.store
    ids = topic_ids(ctx.broker) if by_id else None
    replica_id = _replica_id(request)
    follower = replica_id >= 0
    cluster = partition_seam(ctx.broker)
    wanted: list[_Wanted] = []
    # KafkaApis: a follower needs CLUSTER_ACTION, a consumer READ on each topic (checked
    # before the topic's existence, once its name is known).
    cluster_action = follower and authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    topics = _by_topic(partitions)
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, (
        str(key) for key, _ in topics)) if not by_id and not follower else None
    for key, entries in topics:
        if ids is not None:
            topic = ids.topic(key) if isinstance(key, uuid.UUID) else None
        else:
            topic = topic_or_none(store, key) if isinstance(key, str) else None
        if follower:
            denied = not cluster_action
        elif readable is not None:
            denied = key not in readable
        else:
            denied = topic is not None and not authorize(
                ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for index, p in entries:
            epoch = p.current_leader_epoch
            log, code, replica = None, codes.NONE, None
            if denied and (topic is not None or not by_id or follower):
                code = codes.TOPIC_AUTHORIZATION_FAILED
            elif topic is None:
                code = codes.UNKNOWN_TOPIC_ID if by_id else codes.UNKNOWN_TOPIC_OR_PARTITION
            elif not 0 <= index < topic.partitions:
                code = codes.UNKNOWN_TOPIC_OR_PARTITION
            else:
                # Only the leader serves fetches, a follower's (replica id >= 0, one of the
                # partition's replicas) and a consumer's alike; a request's stale leader
                # epoch is fenced first (Partition.localLogWithEpochOrThrow).
                replica = cluster.leader_replica(TopicPartition(topic.name, index))
                if replica is None:
                    code = cluster.no_replica_error(TopicPartition(topic.name, index))
                elif follower and replica_id not in replica.replicas:
                    code = cluster.check_leader_epoch(replica, epoch) \
                        or codes.NOT_LEADER_OR_FOLLOWER
                    replica = None
                else:
                    log = replica.log
            wanted.append(_Wanted(key, topic, index, log, code, p.fetch_offset,
                                  p.max_bytes, epoch, replica, p.last_fetched_epoch,
                                  p.log_start_offset))
    return wanted


def _read_one(store: Store, w: _Wanted, *, limit_bytes: int, min_one_batch: bool,
              isolation: str, cluster: PartitionSeam, replica_id: int = CONSUMER_REPLICA_ID,
              record_follower: bool = False,
              breaks: TestBreaks = NO_TEST_BREAKS) -> PartitionResult:
    """Kafka's ``readFromLog.read`` for one partition of a fetch. In a cluster a follower's
    read (``replica_id`` >= 0) goes to the log end offset, is answered ``DivergingEpoch``
    when its last fetched epoch diverges, and (``record_follower``: the request's first read,
    as Kafka's ``fetchMessages``) records the follower's fetch state at the leader."""
    # A long poll outlived this broker's leadership: Kafka's DelayedFetch completes with
    # NOT_LEADER_OR_FOLLOWER then (the client finds the new leader).
    code = (cluster.check_leader_epoch(w.replica, w.current_leader_epoch)
            if w.replica.is_leader else codes.NOT_LEADER_OR_FOLLOWER)
    if code != codes.NONE:
        return _failed(w.partition, code)
    adjusted_max_bytes = min(w.max_bytes, limit_bytes)
    if adjusted_max_bytes < 0:
        # Kafka's LogSegment.read: IllegalArgumentException("Invalid max size").
        return _failed(w.partition, codes.UNKNOWN_SERVER_ERROR)
    follower = w.replica is not None and replica_id >= 0
    try:
        if follower:
            diverging = cluster.diverging_epoch(w.replica, w.last_fetched_epoch,
                                                w.fetch_offset)
            if diverging is not None:
                # Partition.readRecords: no records, the follower's fetch state untouched.
                log_ = w.log
                return PartitionResult(w.partition, codes.NONE, log_.high_watermark,
                                       log_.last_stable_offset, log_.start_offset, None, b"",
                                       diverging)
            log_ = w.log
            result = log_.read(w.fetch_offset, max_bytes=adjusted_max_bytes,
                               min_one_batch=min_one_batch, max_offset=log_.end_offset)
        else:
            result = w.log.read(w.fetch_offset, max_bytes=adjusted_max_bytes,
                                min_one_batch=min_one_batch, isolation=isolation)
    except (errors.SeglogError, OSError) as e:
        return _failed(w.partition, gone_or_storage_error(store, w.topic, e))
    if follower and record_follower:
        # The high watermark answered is the one read before this fetch's own update
        # (Kafka's initialHighWatermark): a follower's lags the leader's by one fetch.
        cluster.follower_fetched(w.replica, replica_id, w.fetch_offset, result.end_offset,
                                 w.follower_log_start_offset)
    if follower and len(result.buffer) and cluster.leader_throttled(w.replica, replica_id):
        # Kafka's shouldLeaderThrottle: a throttled replica out of the ISR over the leader's
        # replication quota gets no records of this partition (not a delay).
        return PartitionResult(w.partition, codes.NONE, result.high_watermark,
                               result.last_stable_offset, result.start_offset, None, b"")
    aborted = result.aborted_transactions
    if aborted is not None and breaks.enabled("read_committed_sees_aborted"):
        aborted = []  # the negative control: the consumer keeps every aborted record
    if aborted is not None:
        aborted = [(txn.producer_id, txn.first_offset) for txn in aborted]
    return PartitionResult(w.partition, codes.NONE, result.high_watermark,
                           result.last_stable_offset, result.start_offset, aborted,
                           result.buffer)


def _read_all(store: Store, wanted: list[_Wanted], *, max_bytes: int,
              isolation: str, cluster: PartitionSeam, replica_id: int = CONSUMER_REPLICA_ID,
              record_follower: bool = False, breaks: TestBreaks = NO_TEST_BREAKS
              ) -> tuple[list[tuple[_Wanted, PartitionResult]], int, bool]:
    """Read every partition in request order; ``(results, record bytes, any error)``."""
    limit_bytes = max_bytes
    min_one_batch = True
    results: list[tuple[_Wanted, PartitionResult]] = []
    failed = False
    total_bytes = 0
    for w in wanted:
        if w.error_code != codes.NONE:
            continue
        result = _read_one(store, w, limit_bytes=limit_bytes, min_one_batch=min_one_batch,
                           isolation=isolation, cluster=cluster, replica_id=replica_id,
                           record_follower=record_follower, breaks=breaks)
        if result.diverging_epoch is not None:
            failed = True  # answered at once, as Kafka's divergence completes the fetch
        size_bytes = len(result.records)
        if size_bytes:
            min_one_batch = False
        limit_bytes = max(0, limit_bytes - size_bytes)
        total_bytes += size_bytes
        failed = failed or result.error_code != codes.NONE
        results.append((w, result))
    return results, total_bytes, failed


def _answer(ctx: RequestContext, context: FetchContext, wanted: list[_Wanted],
            results: Sequence[tuple[_Wanted, PartitionResult]], *, size_bytes: int,
            replica_id: int, started_ns: int) -> RawResponse:
    """The answer to a Fetch, under the client's quotas (``handleFetchRequest``): a consumer
    over its ``consumer_byte_rate`` or ``request_percentage`` is answered empty with the
    throttle time (its bytes are not counted; a full request gets no session then), a
    follower never is (its bytes count against the leader's replication throttle)."""
    if replica_id >= 0:
        cluster = partition_seam(ctx.broker)
        for w, r in results:
            if len(r.records) and w.replica is not None:
                cluster.leader_sent(w.replica, len(r.records))
    if replica_id < 0 and quotas.any_quota(ctx):
        throttle_ms = quotas.fetch_throttle_ms(ctx, size_bytes,
                                               time.perf_counter_ns() - started_ns)
        if throttle_ms > 0:
            error_code, session_id = context.throttled()
            return RawResponse(encode_fetch_response(ctx.api_version,
                                                     throttle_time_ms=throttle_ms,
                                                     error_code=error_code,
                                                     session_id=session_id, topics=()),
                               throttle_time_ms=throttle_ms)
    if replica_id < 0:
        metrics = ctx.broker.metrics
        for w, r in results:
            if w.topic is not None:
                metrics.sent(w.topic.name, len(r.records))
    return _response(ctx, context, wanted, results)


def _response(ctx: RequestContext, context: FetchContext, wanted: list[_Wanted],
              results: Sequence[tuple[_Wanted, PartitionResult]]) -> RawResponse:
    # Kafka's order: the partitions read, then the ones that failed before reading;
    # consecutive partitions of one topic share a topic entry (FetchResponse.toMessage).
    answers = [(w.key, r) for w, r in results]
    answers += [(w.key, _failed(w.partition, w.error_code))
                for w in wanted if w.error_code != codes.NONE]
    # The session decides what is sent (an incremental answer: only what changed); a
    # sessionless request (every librdkafka Fetch) sends all and needs no outcomes.
    error_code, session_id, keys = context.respond(() if context.kind == "sessionless" else [
        ((key, r.partition), PartitionOutcome(r.error_code, r.high_watermark,
                                              r.log_start_offset, len(r.records),
                                              r.diverging_epoch is not None))
        for key, r in answers])
    if keys is not None:
        answers = [(key, r) for key, r in answers if (key, r.partition) in keys]
    topics: list[tuple[str | uuid.UUID | None, list[PartitionResult]]] = []
    for key, result in answers:
        if topics and topics[-1][0] == key:
            topics[-1][1].append(result)
        else:
            topics.append((key, [result]))
    return RawResponse(encode_fetch_response(ctx.api_version, throttle_time_ms=0,
                                             error_code=error_code, session_id=session_id,
                                             topics=topics))


async def handle_fetch(ctx: RequestContext, request: Any) -> RawResponse:
    """Answer a Fetch request (see the module docstring)."""
    version = ctx.api_version
    broker = ctx.broker
    replica_id = _replica_id(request)
    fetch_data, forgotten = _requested(ctx, request)
    context = fetch_manager(broker).new_context(
        version, int(getattr(request, "session_id", 0)),
        int(getattr(request, "session_epoch", FINAL_EPOCH)), follower=replica_id >= 0,
        fetch_data=fetch_data, to_forget=forgotten)
    if context.kind == "error":
        return RawResponse(encode_fetch_response(
            version, throttle_time_ms=0, error_code=context.error_code, session_id=0,
            topics=()))
    config_max = int(broker.config.get("fetch.max.bytes", FETCH_MAX_BYTES_DEFAULT))
    max_bytes = min(int(request.max_bytes), config_max)  # negative: see _read_one
    if replica_id < 0 and quotas.any_quota(ctx):
        # A consumer gets no more than its fetch quota allows in one window (Kafka caps
        # fetch.max.bytes so: a larger answer would be throttled whatever came before).
        window_bytes_max = quotas.fetch_bytes_max(ctx)
        if window_bytes_max < max_bytes:
            max_bytes = max(int(window_bytes_max), 0)
    min_bytes = min(int(request.min_bytes), max_bytes)
    isolation = _ISOLATION.get(int(request.isolation_level), "read_uncommitted")
    max_wait_ms = max(int(request.max_wait.total_seconds() * 1000), 0)
    deadline_s = time.monotonic() + max_wait_ms / 1000.0
    wanted = _resolve(ctx, request, context.partitions())
    appended = broker.appended
    seen = appended.count
    store = broker.store
    cluster = partition_seam(broker)
    breaks = broker.test_breaks
    started_ns = time.perf_counter_ns()
    results, size_bytes, failed = _read_all(store, wanted, max_bytes=max_bytes,
                                            isolation=isolation, cluster=cluster,
                                            replica_id=replica_id, record_follower=True,
                                            breaks=breaks)
    # Partitions that failed before reading (unknown ones) do not end the wait: Kafka's
    # delayed fetch covers the partitions it could read.
    if max_wait_ms <= 0 or not results or size_bytes >= min_bytes or failed:
        return _answer(ctx, context, wanted, results, size_bytes=size_bytes,
                       replica_id=replica_id, started_ns=started_ns)
    while not getattr(broker, "closing", False):
        remaining_s = deadline_s - time.monotonic()
        if remaining_s <= 0:
            break
        if not await appended.wait(seen, remaining_s):
            break
        seen = appended.count
        started_ns = time.perf_counter_ns()
        results, size_bytes, failed = _read_all(store, wanted, max_bytes=max_bytes,
                                                isolation=isolation, cluster=cluster,
                                                replica_id=replica_id, breaks=breaks)
        if size_bytes >= min_bytes or failed:
            return _answer(ctx, context, wanted, results, size_bytes=size_bytes,
                           replica_id=replica_id, started_ns=started_ns)
    started_ns = time.perf_counter_ns()
    results, size_bytes, _failed_any = _read_all(store, wanted, max_bytes=max_bytes,
                                                 isolation=isolation, cluster=cluster,
                                                 replica_id=replica_id, breaks=breaks)
    return _answer(ctx, context, wanted, results, size_bytes=size_bytes,
                   replica_id=replica_id, started_ns=started_ns)
