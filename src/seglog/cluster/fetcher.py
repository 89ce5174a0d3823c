"""Replica fetchers: a follower copies its leaders' logs (Kafka 2.8's ``ReplicaFetcherManager``,
``AbstractFetcherThread`` and ``ReplicaFetcherThread``; research R§3.2, R§3.3).

:class:`ReplicaFetcherManager` holds one :class:`_LeaderFetcher` per leader broker (Kafka's
``num.replica.fetchers=1``): an asyncio task on the broker's loop with one TCP connection
(:class:`~seglog.cluster.inter_broker.BrokerConnection`) to that leader, started when a
partition is added for it and ended when it has none left. Each partition is in one of two
states (Kafka's ``PartitionFetchState``):

- **truncating**: before any fetch at a new epoch, the follower asks the leader where its own
  latest epoch ends (OffsetsForLeaderEpoch ``{CurrentLeaderEpoch, LeaderEpoch: latest}``) and
  cuts its log there (:func:`seglog.cluster.truncation.offset_truncation_state`,
  ``Log.truncate_to``), asking again while the answer is not complete (KIP-279). A log with
  no epoch at all truncates to its high watermark (Kafka's ``truncateToHighWatermark``).
- **fetching**: Fetch v12 from the log end offset, with ``LastFetchedEpoch``, in a fetch session
  with the leader (:mod:`seglog.cluster.fetch_session_client`: a full request first, then
  incremental ones naming only what changed; an incremental answer leaves out the partitions
  with nothing new; a session error makes the next request full, at once); the leader's
  batches are appended as they are (``Log.append_as_follower``), then the follower's high
  watermark becomes ``min(leader HW, LEO)`` and its log start follows the leader's. A
  ``DivergingEpoch`` in the answer truncates as OffsetsForLeaderEpoch would.

Which state a new epoch starts in follows Kafka at IBP >= 2.7 (``makeFollower``): a log whose
epoch cache is non-empty starts fetching at its LEO and truncates on the leader's
``DivergingEpoch``; an empty cache starts truncating at the high watermark.
``FetcherConfig.truncation_on_fetch=False`` is Kafka before 2.7: always truncating first. One deviation: a
truncation that is not complete stays truncating and asks OffsetsForLeaderEpoch again (Kafka
2.7+ goes on fetching and relies on ``DivergingEpoch``); it costs a round trip and does not
depend on the leader setting ``DivergingEpoch``. With the negative control ``truncate_to_hw``
(the manager's ``test_breaks``, :mod:`seglog.cluster.test_breaks`) every new epoch truncates
to the high watermark before fetching (Kafka before KIP-101).

Errors (``processFetchRequest``): FENCED_LEADER_EPOCH marks the partition failed, and it waits
for :meth:`ReplicaFetcherManager.add_partitions` with a newer epoch; OFFSET_OUT_OF_RANGE asks
the leader for its offsets (ListOffsets as a replica) and truncates or restarts the log
(:func:`seglog.cluster.truncation.out_of_range_fetch_offset`); UNKNOWN_LEADER_EPOCH,
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and any other error, and records that do not
validate (``CorruptRecordError`` / ``InvalidRecordError``: logged, nothing appended), delay the
partition ``backoff_ms``; a failed connection delays every partition of that leader. A storage
failure (``KafkaStorageError``, ``OSError``) or a log that is not where the fetcher left it
marks the partition failed (Kafka's ``markPartitionFailed``).

Throttle. With a follower replication quota (:mod:`.replication_quota`), a throttled
partition that has not caught up (``lag`` unknown or above 0) is left out of the request while
the quota is exceeded, and a request left empty so waits ``backoff_ms`` (Kafka's
``shouldFollowerThrottle`` and empty fetch); the bytes fetched for throttled partitions are
recorded.

Threads. Everything runs on the loop thread; the fetcher calls the Log (appends, truncations,
high watermark) synchronously between awaits, never from another thread, so a caller on the
loop that removes a partition (:meth:`ReplicaFetcherManager.remove_partitions`) knows the
fetcher is not inside that Log and will not touch it again. Appends and truncations are short
(an append writes at most ``fetch_response_max_bytes``); nothing else blocks.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from .. import error_codes as codes
from .. import errors
from ..aio import wait_event
from ..types import TopicPartition
from .fetch_session_client import FetchSessionClient
from .sasl_login import SaslLogin
from .test_breaks import NO_TEST_BREAKS, TestBreaks
from .inter_broker import (
    InterBrokerListener,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BrokerConnection,
    FetchPartitionRequest,
    FetchPartitionResponse,
    InterBrokerError,
    whole_batches,
)
from .truncation import (
    TruncationState,
    needs_leader_start_offset,
    offset_truncation_state,
    out_of_range_fetch_offset,
)
from ..log_limits import REPEATS

if TYPE_CHECKING:
    from ..storage.log import Log
    from .replication_quota import ReplicationQuota

__all__ = ["FetcherConfig", "FetchTarget", "FetchState", "ReplicaFetcherManager",
           "TRUNCATING", "FETCHING"]

_log = logging.getLogger(__name__)

#: The two states of a partition in a fetcher (Kafka's ``Truncating`` / ``Fetching``).
TRUNCATING = "truncating"
FETCHING = "fetching"

_INT32_MAX = 2**31 - 1
#: How long :meth:`ReplicaFetcherManager.close` waits for its tasks.
_CLOSE_TIMEOUT_S = 10.0
#: Slack above ``fetch_response_max_bytes`` for a response frame: the leader returns at least
#: one whole batch even when it is larger (up to ``message.max.bytes`` and its headers).
_FRAME_SLACK_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class FetcherConfig:
    """The fetchers' settings, by Kafka's broker configs of the same meaning (see
    :meth:`from_kafka_config`)."""

    fetch_wait_max_ms: int = 500
    """``replica.fetch.wait.max.ms``: the leader's longest wait for ``fetch_min_bytes``."""
    fetch_min_bytes: int = 1
    """``replica.fetch.min.bytes``."""
    fetch_max_bytes: int = 1048576
    """``replica.fetch.max.bytes``: each partition's ``PartitionMaxBytes``."""
    fetch_response_max_bytes: int = 10485760
    """``replica.fetch.response.max.bytes``: the request's ``MaxBytes``."""
    backoff_ms: int = 1000
    """``replica.fetch.backoff.ms``: the wait after an error before a partition is retried."""
    request_timeout_ms: int = 30000
    """``replica.socket.timeout.ms``: connect and round-trip bound of every request (at least
    ``fetch_wait_max_ms``, as Kafka requires; a Fetch gets both added)."""
    client_id: str | None = None
    """The requests' client id; None: Kafka's ``broker-<id>-fetcher-0``."""
    truncation_on_fetch: bool = True
    """Kafka's ``isTruncationOnFetchSupported`` (IBP >= 2.7): a log with epochs starts
    fetching at its LEO with ``LastFetchedEpoch`` and truncates on the leader's
    ``DivergingEpoch``. False: every new epoch truncates through OffsetsForLeaderEpoch before
    fetching, and no ``LastFetchedEpoch`` is sent (Kafka before 2.7)."""

    _KAFKA_NAMES = {
        "replica.fetch.wait.max.ms": "fetch_wait_max_ms",
        "replica.fetch.min.bytes": "fetch_min_bytes",
        "replica.fetch.max.bytes": "fetch_max_bytes",
        "replica.fetch.response.max.bytes": "fetch_response_max_bytes",
        "replica.fetch.backoff.ms": "backoff_ms",
        "replica.socket.timeout.ms": "request_timeout_ms",
    }

    def __post_init__(self) -> None:
        for name in ("fetch_wait_max_ms", "fetch_min_bytes", "fetch_max_bytes",
                     "fetch_response_max_bytes", "backoff_ms", "request_timeout_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not \
                    0 <= value <= _INT32_MAX:
                raise errors.InvalidConfigError(
                    f"FetcherConfig.{name} must be an int in [0, {_INT32_MAX}], got {value!r}")
        if self.request_timeout_ms < self.fetch_wait_max_ms:
            # Kafka's check (KafkaConfig): replica.socket.timeout.ms >= replica.fetch.wait.max.ms.
            raise errors.InvalidConfigError(
                f"request_timeout_ms ({self.request_timeout_ms}) must be at least "
                f"fetch_wait_max_ms ({self.fetch_wait_max_ms})")

    @classmethod
    def from_kafka_config(cls, config: Mapping[str, Any]) -> "FetcherConfig":
        """The settings from a broker's Kafka-named config (str or int values; names not given
        keep their defaults)."""
        values: dict[str, Any] = {field: int(config[name]) for name, field in cls._KAFKA_NAMES.items()
                  if name in config}
        return cls(**values)


@dataclass(frozen=True)
class FetchTarget:
    """Where one partition is fetched from: its leader, the leader epoch the follower knows,
    the follower's own replicated Log (opened ``auto_high_watermark=False``) and the topic id
    (informational: Fetch v12 names topics)."""

    leader_id: int
    leader_epoch: int
    log: Log
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True)
class FetchState:
    """A partition's fetch state (Kafka's ``PartitionFetchState``), replaced on every change:
    ``fetch_offset`` is the next offset to fetch (the log end offset while fetching, the high
    watermark while truncating without epochs), ``last_fetched_epoch`` the epoch of the last
    batch the log holds (None: none), ``delayed_until`` a ``time.monotonic()`` value before
    which the partition waits (None: not delayed)."""

    leader_id: int
    leader_epoch: int
    fetch_offset: int
    state: str
    last_fetched_epoch: int | None
    delayed_until: float | None = None

    def ready(self, now: float) -> bool:
        """Whether the partition may be truncated or fetched at ``now`` (not delayed)."""
        return self.delayed_until is None or self.delayed_until <= now


class _Partition:
    """A partition in a fetcher: its target (the Log) and its current state."""

    __slots__ = ("tp", "target", "state", "lag")

    def __init__(self, tp: TopicPartition, target: FetchTarget, state: FetchState):
        self.tp = tp
        self.target = target
        self.state = state
        #: Kafka's ``PartitionFetchState.lag``: the leader's high watermark minus the log end
        #: after the last answer with records (None: unknown yet); 0 is in sync.
        self.lag: int | None = None


def _latest_epoch(log: Log) -> int | None:
    epoch = log.latest_epoch
    return None if epoch is None or epoch < 0 else int(epoch)


def _initial_state(target: FetchTarget, config: FetcherConfig,
                   breaks: TestBreaks) -> FetchState:
    """Kafka's ``makeFollower`` / ``partitionFetchState``."""
    log = target.log
    latest = _latest_epoch(log)
    if (config.truncation_on_fetch and latest is not None
            and not breaks.enabled("truncate_to_hw")):
        return FetchState(target.leader_id, target.leader_epoch, log.end_offset, FETCHING,
                          latest)
    return FetchState(target.leader_id, target.leader_epoch, log.high_watermark, TRUNCATING,
                      None)


class ReplicaFetcherManager:
    """The fetchers of one broker (see the module docstring and docs/cluster.md §3.5).

    ``resolve_broker(broker_id) -> (host, port) | None`` is asked at every (re)connect (the
    leader's endpoint on the inter-broker listener); ``inter_broker`` says how to connect
    (TLS or not);
    ``on_high_watermark(tp, high_watermark)`` is called on the loop whenever the fetcher moved
    a follower's high watermark. ``test_breaks``: the negative controls it honours
    (``truncate_to_hw``; tests only). All methods run on ``loop``'s thread."""

    def __init__(self, *, broker_id: int, loop: asyncio.AbstractEventLoop,
                 resolve_broker: Callable[[int], tuple[str, int] | None],
                 config: FetcherConfig | None = None,
                 on_high_watermark: Callable[[TopicPartition, int], None] | None = None,
                 test_breaks: TestBreaks = NO_TEST_BREAKS,
                 inter_broker: InterBrokerListener | None = None,
                 login: SaslLogin | None = None,
                 quota: ReplicationQuota | None = None,
                 is_throttled: Callable[[TopicPartition], bool] | None = None):
        self.broker_id = int(broker_id)
        #: The follower's replication throttle (:mod:`.replication_quota`) and which
        #: partitions it throttles (None: no throttle).
        self.quota = quota
        self.is_throttled = is_throttled
        #: How leaders are connected to (plaintext, or TLS on an SSL inter-broker listener).
        self.inter_broker = inter_broker or InterBrokerListener()
        #: The SASL login of every connection to a leader (None: the inter-broker listener
        #: does not use SASL).
        self.login = login
        self.loop = loop
        self.resolve_broker = resolve_broker
        self.config = config or FetcherConfig()
        self.test_breaks = test_breaks
        self.client_id = self.config.client_id or f"broker-{self.broker_id}-fetcher-0"
        self.on_high_watermark = on_high_watermark
        self._fetchers: dict[int, _LeaderFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}
        self._failed: set[TopicPartition] = set()
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False
        self._counts = {"connect": 0, "fetch": 0, "fetch_full": 0, "fetch_incremental": 0,
                        "offsets_for_leader_epoch": 0, "list_offsets": 0}

    # --- the interface ---------------------------------------------------------------------

    def add_partitions(self, targets: Mapping[TopicPartition, FetchTarget]) -> None:
        """Fetch these partitions from their leaders (Kafka's ``addFetcherForPartitions``): a
        partition already fetched from the same leader at the same epoch into the same Log
        keeps its state; any other starts over at its new epoch (truncation first)."""
        if self._closed:
            raise errors.IllegalStateError("the replica fetcher manager is closed")
        for tp, target in targets.items():
            tp = TopicPartition(tp[0], int(tp[1]))
            self._failed.discard(tp)
            previous = self._leader_of.get(tp)
            if previous is not None and previous != target.leader_id:
                self._fetchers[previous].remove(tp)
            fetcher = self._fetchers.get(target.leader_id)
            if fetcher is None:
                fetcher = self._fetchers[target.leader_id] = _LeaderFetcher(
                    self, target.leader_id)
            fetcher.add(tp, target)
            self._leader_of[tp] = target.leader_id
        self._stop_idle()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (Kafka's ``removeFetcherForPartitions``); when this
        returns the fetcher will not touch their Logs again. Unknown ones are ignored."""
        for tp in tps:
            tp = TopicPartition(tp[0], int(tp[1]))
            self._failed.discard(tp)
            leader = self._leader_of.pop(tp, None)
            if leader is not None:
                self._fetchers[leader].remove(tp)
        self._stop_idle()

    async def close(self) -> None:
        """Stop every fetcher and close its connection (idempotent)."""
        self._closed = True
        for fetcher in list(self._fetchers.values()):
            self._stopping.add(fetcher.stop())
        self._fetchers.clear()
        self._leader_of.clear()
        if self._stopping:
            # Bounded: a task ends at its next await (cancelled, or its stop flag seen).
            _done, pending = await asyncio.wait(list(self._stopping),
                                                timeout=_CLOSE_TIMEOUT_S)
            for task in pending:
                _log.error("replica fetcher task %s did not stop", task.get_name())
        self._stopping.clear()

    def fetch_state(self, tp: TopicPartition) -> FetchState | None:
        """The partition's current fetch state, or None when it is not fetched (never added,
        removed, or failed)."""
        leader = self._leader_of.get(TopicPartition(tp[0], int(tp[1])))
        if leader is None:
            return None
        return self._fetchers[leader].state_of(TopicPartition(tp[0], int(tp[1])))

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """The partitions being fetched (failed ones excluded)."""
        return frozenset(tp for tp in self._leader_of if tp not in self._failed)

    @property
    def failed_partitions(self) -> frozenset[TopicPartition]:
        """The partitions marked failed (fenced, storage error), waiting for a new epoch."""
        return frozenset(self._failed)

    @property
    def request_counts(self) -> dict[str, int]:
        """How many connects and requests of each kind the fetchers made (``connect``,
        ``fetch``, of which ``fetch_full`` and ``fetch_incremental`` (the fetch session's
        kinds), ``offsets_for_leader_epoch``, ``list_offsets``): Kafka's fetcher request rate,
        as counts."""
        return dict(self._counts)

    def count(self, kind: str) -> None:
        """Count one request of ``kind`` (for the fetchers)."""
        self._counts[kind] += 1

    @property
    def leader_ids(self) -> frozenset[int]:
        """The leaders that have a running fetcher."""
        return frozenset(self._fetchers)

    # --- for the fetchers ------------------------------------------------------------------

    def mark_failed(self, tp: TopicPartition) -> None:
        """Kafka's ``markPartitionFailed``: stop fetching ``tp`` until it is added again."""
        leader = self._leader_of.pop(tp, None)
        if leader is not None:
            self._fetchers[leader].remove(tp)
        self._failed.add(tp)
        _log.warning("replica fetcher: partition %s marked as failed", tp)

    def high_watermark_moved(self, tp: TopicPartition, high_watermark: int) -> None:
        """Tell the broker (``on_high_watermark``); a callback's exception is logged."""
        if self.on_high_watermark is None:
            return
        try:
            self.on_high_watermark(tp, high_watermark)
        except Exception:
            _log.exception("replica fetcher: on_high_watermark(%s, %d) failed", tp,
                           high_watermark)

    def _stop_idle(self) -> None:
        """Kafka's ``shutdownIdleFetcherThreads``: a fetcher with no partition ends."""
        for leader, fetcher in list(self._fetchers.items()):
            if not fetcher.has_partitions:
                del self._fetchers[leader]
                task = fetcher.stop()
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)


class _LeaderFetcher:
    """The partitions fetched from one leader, their task and their connection (Kafka's
    ``ReplicaFetcherThread``)."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int):
        self.manager = manager
        self.leader_id = leader_id
        self.config = manager.config
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._wake = asyncio.Event()
        self._conn: BrokerConnection | None = None
        #: This leader's fetch session (KIP-227): full first, then incremental requests.
        self.session = FetchSessionClient()
        # Set by stop(): the loop ends even if a cancellation is lost (Python 3.11's
        # asyncio.wait_for can swallow one that races with the awaited future's completion).
        self._stopped = False
        self._task = manager.loop.create_task(self._run(),
                                              name=f"replica-fetcher-{leader_id}")

    # --- membership (called by the manager, on the loop) -----------------------------------

    @property
    def has_partitions(self) -> bool:
        """Whether any partition is left."""
        return bool(self._partitions)

    def add(self, tp: TopicPartition, target: FetchTarget) -> None:
        """Kafka's ``addPartitions``: keep the state at the same epoch and Log, else start
        over."""
        current = self._partitions.get(tp)
        if (current is not None and current.state.leader_epoch == target.leader_epoch
                and current.target.log is target.log):
            current.target = target
        else:
            self._partitions[tp] = _Partition(tp, target, _initial_state(
                target, self.config, self.manager.test_breaks))
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        """Forget ``tp``; a response in flight for it is dropped."""
        self._partitions.pop(tp, None)

    def state_of(self, tp: TopicPartition) -> FetchState | None:
        """The partition's state, or None."""
        p = self._partitions.get(tp)
        return None if p is None else p.state

    def stop(self) -> asyncio.Task[None]:
        """Cancel the task (it closes the connection); returns it to await."""
        self._partitions.clear()
        self._stopped = True
        self._wake.set()
        self._task.cancel()
        return self._task

    # --- state changes ---------------------------------------------------------------------

    def _current(self, p: _Partition, sent: FetchState) -> bool:
        """Whether ``p`` is still here in the state a request was built from (Kafka checks
        the partition is present, at the requested offset and epoch, before using an
        answer)."""
        return self._partitions.get(p.tp) is p and p.state is sent

    def _delay(self, p: _Partition) -> None:
        """Kafka's ``delayPartitions``: wait ``backoff_ms`` before retrying."""
        if self._partitions.get(p.tp) is p and p.state.delayed_until is None:
            p.state = replace(p.state, delayed_until=time.monotonic()
                              + self.config.backoff_ms / 1000.0)

    def _fail(self, p: _Partition) -> None:
        if self._partitions.get(p.tp) is p:
            self.manager.mark_failed(p.tp)

    def _to_fetching(self, p: _Partition, fetch_offset: int) -> None:
        p.state = FetchState(p.state.leader_id, p.state.leader_epoch, fetch_offset, FETCHING,
                             _latest_epoch(p.target.log))

    def _truncate(self, p: _Partition, offset: int) -> bool:
        """``Log.truncate_to(offset)`` with Kafka's warning below the high watermark; False
        (partition delayed or failed) when it could not."""
        log = p.target.log
        high_watermark_before = log.high_watermark
        if offset < high_watermark_before:
            _log.warning("replica fetcher: truncating %s to %d, below its high watermark %d",
                         p.tp, offset, high_watermark_before)
        try:
            log.truncate_to(offset)
        except errors.ViewsOutstandingError as e:
            # A read of this Log still maps the bytes to cut: try again after the backoff.
            _log.info("replica fetcher: cannot truncate %s yet: %s", p.tp, e)
            self._delay(p)
            return False
        except (errors.SeglogError, OSError):
            _log.exception("replica fetcher: truncating %s to %d failed", p.tp, offset)
            self._fail(p)
            return False
        self._maybe_high_watermark_moved(p, high_watermark_before)
        return True

    def _maybe_high_watermark_moved(self, p: _Partition, before: int) -> None:
        after = p.target.log.high_watermark
        if after != before:
            self.manager.high_watermark_moved(p.tp, after)

    def _apply_truncation_state(self, p: _Partition, result: TruncationState) -> None:
        if not self._truncate(p, result.offset):
            return
        if result.complete:
            self._to_fetching(p, p.target.log.end_offset)
        else:
            # The follower did not know the leader's epoch: ask again with its new latest.
            p.state = replace(p.state, fetch_offset=p.target.log.end_offset)

    def _truncation_for(self, p: _Partition, leader_epoch: int, end_offset: int
                        ) -> TruncationState:
        log = p.target.log
        return offset_truncation_state(
            (leader_epoch, end_offset), follower_end_offset_for=log.end_offset_for_epoch,
            follower_log_end_offset=log.end_offset,
            follower_high_watermark=p.state.fetch_offset if p.state.state == TRUNCATING
            else log.high_watermark, breaks=self.manager.test_breaks)

    # --- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while not self._stopped:
                await self._wait_until_ready()
                if self._stopped:
                    break
                try:
                    await self._maybe_truncate()
                    await self._maybe_fetch()
                except InterBrokerError as e:
                    self._connection_failed(e)
                except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                    raise
                except Exception:
                    # A bug, not the leader's answer: keep the other partitions going.
                    _log.exception("replica fetcher for broker %d: unexpected error",
                                   self.leader_id)
                    self._connection_failed(None)
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def _wait_until_ready(self) -> None:
        """Until some partition is ready (not delayed), something was added, or the
        fetcher is stopped."""
        while not self._stopped:
            now = time.monotonic()
            waits = [p.state.delayed_until - now for p in self._partitions.values()
                     if p.state.delayed_until is not None and not p.state.ready(now)]
            if len(waits) < len(self._partitions):
                for p in self._partitions.values():
                    if p.state.delayed_until is not None and p.state.ready(now):
                        p.state = replace(p.state, delayed_until=None)
                return
            self._wake.clear()
            timeout_s = min(waits) if waits else None
            await wait_event(self._wake, timeout_s)

    def _connection_failed(self, error: InterBrokerError | None) -> None:
        if error is not None:
            # While the leader is down this comes every backoff: printed once, then summed up.
            REPEATS.info(_log, "replica fetcher for broker %d: %s; backing off %d ms",
                         self.leader_id, error, self.config.backoff_ms)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        for p in list(self._partitions.values()):
            self._delay(p)

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        address = self.manager.resolve_broker(self.leader_id)
        if address is None:
            raise _LeaderUnknown(f"broker {self.leader_id} is not known")
        host, port = address
        self.manager.count("connect")
        self._conn = await self.manager.inter_broker.connect(
            host, int(port), client_id=self.manager.client_id,
            timeout_ms=self.config.request_timeout_ms,
            max_response_bytes=self.config.fetch_response_max_bytes + _FRAME_SLACK_BYTES,
            login=self.manager.login)
        return self._conn

    # --- truncation (Kafka's maybeTruncate) ------------------------------------------------

    async def _maybe_truncate(self) -> None:
        now = time.monotonic()
        with_epochs: dict[TopicPartition, tuple[_Partition, FetchState, int]] = {}
        for p in list(self._partitions.values()):
            if p.state.state != TRUNCATING or not p.state.ready(now):
                continue
            latest = _latest_epoch(p.target.log)
            if latest is None or self.manager.test_breaks.enabled("truncate_to_hw"):
                # Kafka's truncateToHighWatermark: the initial fetch offset, the HW.
                self._apply_truncation_state(p, TruncationState(p.state.fetch_offset, True))
            else:
                with_epochs[p.tp] = (p, p.state, latest)
        if not with_epochs:
            return
        conn = await self._connection()
        self.manager.count("offsets_for_leader_epoch")
        answers = await conn.offsets_for_leader_epoch(
            replica_id=self.manager.broker_id,
            partitions={tp: (sent.leader_epoch, latest)
                        for tp, (_p, sent, latest) in with_epochs.items()})
        for tp, (p, sent, _latest) in with_epochs.items():
            if not self._current(p, sent):
                continue  # removed or re-added meanwhile: the answer is for an old state
            answer = answers.get(tp)
            if answer is None:
                self._delay(p)  # not answered: ask again after the backoff
                continue
            if answer.error_code == codes.NONE:
                self._apply_truncation_state(
                    p, self._truncation_for(p, answer.leader_epoch, answer.end_offset))
            elif answer.error_code == codes.FENCED_LEADER_EPOCH:
                _log.info("replica fetcher: %s epoch %d is fenced by broker %d; waiting for "
                          "a newer epoch", tp, sent.leader_epoch, self.leader_id)
                self._fail(p)
            else:
                REPEATS.info(_log, "replica fetcher: OffsetsForLeaderEpoch for %s from broker "
                             "%d: error %d; retrying", tp, self.leader_id, answer.error_code)
                self._delay(p)

    # --- fetching (Kafka's maybeFetch / processFetchRequest) -------------------------------

    def _follower_throttled(self, p: _Partition) -> bool:
        """Kafka's ``shouldFollowerThrottle``: not in sync, throttled, quota exceeded."""
        manager = self.manager
        quota = manager.quota
        if quota is None or manager.is_throttled is None or not quota.bounded:
            return False
        if p.lag is not None and p.lag <= 0:
            return False
        if not manager.is_throttled(p.tp) or not quota.exceeded():
            return False
        quota.throttled_count += 1
        return True

    async def _maybe_fetch(self) -> None:
        now = time.monotonic()
        sent: dict[TopicPartition, tuple[_Partition, FetchState]] = {}
        requests: dict[TopicPartition, FetchPartitionRequest] = {}
        throttled = 0
        for p in list(self._partitions.values()):
            state = p.state
            if state.state != FETCHING or not state.ready(now):
                continue
            if self._follower_throttled(p):
                throttled += 1  # left out of this request (Kafka's buildFetch)
                continue
            sent[p.tp] = (p, state)
            requests[p.tp] = FetchPartitionRequest(
                fetch_offset=state.fetch_offset, log_start_offset=p.target.log.start_offset,
                partition_max_bytes=self.config.fetch_max_bytes,
                current_leader_epoch=state.leader_epoch,
                last_fetched_epoch=-1 if (state.last_fetched_epoch is None
                                          or not self.config.truncation_on_fetch)
                else state.last_fetched_epoch)
        if not requests:
            if throttled:
                # Kafka's empty fetch: wait replica.fetch.backoff.ms (or an added partition).
                self._wake.clear()
                await wait_event(self._wake, self.config.backoff_ms / 1000.0)
            return
        conn = await self._connection()
        self.manager.count("fetch")
        session = self.session
        plan = session.build(requests)
        self.manager.count("fetch_full" if plan.full else "fetch_incremental")
        try:
            response = await conn.fetch(
                replica_id=self.manager.broker_id, max_wait_ms=self.config.fetch_wait_max_ms,
                min_bytes=self.config.fetch_min_bytes,
                max_bytes=self.config.fetch_response_max_bytes, partitions=plan.partitions,
                timeout_ms=self.config.request_timeout_ms + self.config.fetch_wait_max_ms,
                session_id=plan.session_id, session_epoch=plan.session_epoch,
                forgotten=plan.forgotten)
        except BaseException:
            # Kafka's FetchSessionHandler.handleError: the leader may or may not have seen
            # the request, so the next one is full.
            session.handle_error()
            raise
        if not session.handle_response(plan, response.error_code, response.session_id,
                                       response.partitions):
            if response.error_code in (codes.NONE, codes.FETCH_SESSION_ID_NOT_FOUND,
                                       codes.INVALID_FETCH_SESSION_EPOCH):
                # A session problem: nothing of the answer is used, and the next request
                # (full) goes at once (Kafka: an empty fetch result).
                _log.info("replica fetcher: Fetch session %d at broker %d: error %d; "
                          "fetching in full", plan.session_id, self.leader_id,
                          response.error_code)
                return
            # Any other top-level error: nothing was read; retry later.
            REPEATS.info(_log, "replica fetcher: Fetch from broker %d: error %d", self.leader_id,
                         response.error_code)
            for p, state in sent.values():
                if self._current(p, state):
                    self._delay(p)
            return
        out_of_range = []
        for tp, (p, state) in sent.items():
            if not self._current(p, state):
                continue
            data = response.partitions.get(tp)
            if data is None:
                if plan.full:
                    self._delay(p)  # not answered (a full response names every partition)
                # An incremental answer leaves out what has nothing new.
                continue
            code = data.error_code
            if code == codes.NONE:
                self._count_throttled_bytes(p, len(data.records))
                self._process_partition_data(p, state, data)
            elif code == codes.OFFSET_OUT_OF_RANGE:
                out_of_range.append((p, state))
            elif code == codes.FENCED_LEADER_EPOCH:
                _log.info("replica fetcher: %s epoch %d is fenced by broker %d; waiting for "
                          "a newer epoch", tp, state.leader_epoch, self.leader_id)
                self._fail(p)
            else:
                if code not in (codes.UNKNOWN_LEADER_EPOCH, codes.NOT_LEADER_OR_FOLLOWER,
                                codes.UNKNOWN_TOPIC_OR_PARTITION):
                    _log.warning("replica fetcher: %s at offset %d from broker %d: error %d",
                                 tp, state.fetch_offset, self.leader_id, code)
                self._delay(p)
        del response  # the records' memoryviews: the frame can go
        for p, state in out_of_range:
            if self._current(p, state):
                await self._handle_out_of_range(p, state)

    def _count_throttled_bytes(self, p: _Partition, size_bytes: int) -> None:
        """Kafka's ``processPartitionData``: ``quota.record(records.sizeInBytes)`` for a
        throttled partition."""
        manager = self.manager
        if (size_bytes and manager.quota is not None and manager.is_throttled is not None
                and manager.is_throttled(p.tp)):
            manager.quota.record(size_bytes)

    def _process_partition_data(self, p: _Partition, state: FetchState,
                                data: FetchPartitionResponse) -> None:
        """Kafka's ``processPartitionData`` (append, HW, log start) then the
        ``DivergingEpoch`` truncation."""
        log = p.target.log
        if data.diverging_epoch is not None:
            epoch, end_offset = data.diverging_epoch
            _log.info("replica fetcher: %s diverges from broker %d at epoch %d (end %d)",
                      p.tp, self.leader_id, epoch, end_offset)
            self._apply_truncation_state(p, self._truncation_for(p, epoch, end_offset))
            return
        if state.fetch_offset != log.end_offset:
            # Kafka's IllegalStateException("Offset mismatch"): someone else moved the log.
            _log.error("replica fetcher: %s fetched offset %d but the log ends at %d", p.tp,
                       state.fetch_offset, log.end_offset)
            self._fail(p)
            return
        high_watermark_before = log.high_watermark
        records = whole_batches(data.records)
        try:
            if len(records):
                log.append_as_follower(records)
            # min(leader HW, LEO), at least the log start (Log.updateHighWatermark); an
            # unchanged one is not published again (most answers of an idle partition).
            if min(max(data.high_watermark, log.start_offset), log.end_offset) \
                    != log.high_watermark:
                log.update_high_watermark(data.high_watermark)
            if data.log_start_offset > log.start_offset:
                log.delete_records_before(data.log_start_offset)
        except (errors.CorruptRecordError, errors.InvalidRecordError) as e:
            if getattr(log, "load_failure", None) is not None:
                # Our own log's files failed to load (an offline partition, issue 23), not
                # the leader's records: failed until `seglog recover` and a restart.
                _log.error("replica fetcher: %s is offline: %s", p.tp, log.load_failure)
                self._fail(p)
                return
            # Kafka logs, retries the partition; nothing was appended (the append checks
            # everything before it writes).
            _log.error("replica fetcher: invalid records for %s at offset %d from broker %d: "
                       "%s", p.tp, state.fetch_offset, self.leader_id, e)
            self._delay(p)
            return
        except errors.OffsetOutOfRangeError as e:
            # The leader's log start above our high watermark: cannot happen while
            # fetch offset >= leader start; keep fetching, the next answer retries.
            _log.warning("replica fetcher: %s cannot follow the leader's log start: %s",
                         p.tp, e)
        except (errors.SeglogError, OSError):
            _log.exception("replica fetcher: appending to %s failed", p.tp)
            self._fail(p)
            return
        finally:
            del records
        if len(data.records) or p.lag is None:
            p.lag = max(0, data.high_watermark - log.end_offset)
        self._maybe_high_watermark_moved(p, high_watermark_before)
        if log.end_offset != state.fetch_offset:
            self._to_fetching(p, log.end_offset)

    async def _handle_out_of_range(self, p: _Partition, state: FetchState) -> None:
        """Kafka's ``handleOutOfRangeError`` / ``fetchOffsetAndTruncate``."""
        log = p.target.log
        conn = await self._connection()
        latest = await self._list_offset(conn, p, state, LATEST_TIMESTAMP)
        if latest is None:
            return
        follower_end = log.end_offset
        leader_start = None
        if needs_leader_start_offset(follower_end_offset=follower_end, leader_end_offset=latest):
            leader_start = await self._list_offset(conn, p, state, EARLIEST_TIMESTAMP)
            if leader_start is None:
                return
        follower_end = log.end_offset
        resolution = out_of_range_fetch_offset(
            follower_end_offset=follower_end, leader_end_offset=latest,
            leader_start_offset=leader_start)
        _log.warning("replica fetcher: %s offset %d is out of range at broker %d; fetching "
                     "from %d", p.tp, state.fetch_offset, self.leader_id,
                     resolution.fetch_offset)
        if resolution.truncate_to is not None:
            if not self._truncate(p, resolution.truncate_to):
                return
        elif resolution.start_at is not None:
            high_watermark_before = log.high_watermark
            try:
                log.truncate_fully_and_start_at(resolution.start_at)
            except errors.ViewsOutstandingError:
                self._delay(p)
                return
            except (errors.SeglogError, OSError):
                _log.exception("replica fetcher: restarting %s at %d failed", p.tp,
                               resolution.start_at)
                self._fail(p)
                return
            self._maybe_high_watermark_moved(p, high_watermark_before)
        self._to_fetching(p, resolution.fetch_offset)

    async def _list_offset(self, conn: BrokerConnection, p: _Partition, state: FetchState,
                           timestamp: int) -> int | None:
        """The leader's offset for ``timestamp`` (latest / earliest), or None when the answer
        was an error (partition delayed or failed) or the partition changed meanwhile."""
        self.manager.count("list_offsets")
        answers = await conn.list_offsets(
            replica_id=self.manager.broker_id,
            partitions={p.tp: (state.leader_epoch, timestamp)})
        if not self._current(p, state):
            return None
        answer = answers.get(p.tp)
        if answer is None:
            self._delay(p)
            return None
        if answer.error_code == codes.FENCED_LEADER_EPOCH:
            self._fail(p)
            return None
        if answer.error_code != codes.NONE:
            _log.info("replica fetcher: ListOffsets for %s from broker %d: error %d", p.tp,
                      self.leader_id, answer.error_code)
            self._delay(p)
            return None
        return answer.offset


class _LeaderUnknown(InterBrokerError):
    """``resolve_broker`` does not know the leader (yet): back off like a failed connect."""
