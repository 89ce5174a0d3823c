"""The share groups of one :class:`~seglog.store.Store`: queues on the log, embedded.

A share group (Kafka's KIP-932) lets any number of consumers take records from the same
partitions: each record is *acquired* by one member for ``share.record.lock.duration.ms``,
then acknowledged (ACCEPT), released for redelivery (RELEASE, its delivery count goes up at
the next acquisition) or rejected (REJECT, archived). A record delivered
``share.delivery.count.limit`` times is archived. An acquisition lock that runs out makes its
records available again, to any member.

This module is the broker side of that for the embedded
:class:`~seglog.clients.share_consumer.ShareConsumer`, in the shape of Kafka's
SharePartitionManager and ShareFetch/ShareAcknowledge handlers: one
:class:`~seglog.coordinator.share_partition.SharePartition` (the in-flight state machine the
wire broker uses too) per (group, partition), made on first fetch, held once per Store and
shared by every consumer thread under one lock per share-partition. Each change a
SharePartition asks to persist (``pending_write``) is written, before the call returns,
through the Store's :class:`~seglog.coordinator.share_coordinator.ShareCoordinator` into
``__share_group_state`` (Kafka's ShareSnapshot/ShareUpdate records), and loaded from there
when the partition is first used after a reopen: a Store reopened after a crash or a close
redelivers exactly the records that were not acknowledged, with their delivery counts.

Membership is Kafka's for share groups with every member subscribed to the same topics: a
member may fetch from every partition of its topics (the simple assignor gives every
partition to every member while members outnumber partitions; in-process there is no
network to spare, so every member fetches everything). Members live as long as their
consumer: :meth:`EmbeddedShareGroups.leave` releases what the member still holds, as Kafka
does when a member leaves or its session times out.

Acquisition locks expire without a timer thread: every fetch and acknowledgement first runs
the partition's ``expire_locks(now)``, and a consumer waiting for records wakes by the
earliest lock deadline, so a member that stops acknowledging has its records redelivered to
another after the lock duration.

One writer per data directory: threads of one process share a queue through one Store;
processes share it through ``seglog serve`` and any Kafka share consumer. A Store that a
``seglog.Broker`` serves keeps its share-partitions in the server (the wire broker's
SharePartitionManager): share consumers of such a Store go through the wire, not through
these embedded share groups, which would hold a second state machine for the same
share-partitions.

Layers: imports the coordinators and the log manager (as :mod:`seglog.store_coordinators`
does); the clients reach it only through :class:`~seglog.broker_api.ShareGroupsApi`.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from . import error_codes
from .config_table import BROKER_CONFIGS
from .configdef import parse_value
from .coordinator.share_coordinator import ShareCoordinator
from .coordinator.share_partition import (
    AckBatch,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from .errors import (
    IllegalStateError,
    InvalidConfigError,
    InvalidGroupIdError,
    ShareAcknowledgeError,
    UnknownMemberIdError,
)
from .group_configs import GroupConfigsView, normalized, parse_iso8601_duration_ms, validate
from .group_configs_file import read_group_configs, write_group_configs
from .storage.transactions import READ_COMMITTED, is_abort_marker
from .types import TopicPartition

if TYPE_CHECKING:
    from .log_manager import LogManager
    from .store_coordinators import StoreCoordinators

__all__ = ["EmbeddedShareGroups", "ShareFetchPartition", "StoreShareGroups",
           "EMBEDDED_BROKER_CONFIGS", "EMBEDDED_GROUP_CONFIGS"]

#: The group configs (Kafka 4.4's GroupConfig names) the embedded share groups run with.
#: The others (sessions, heartbeats, assignment, dead-letter queues) are refused by name: an
#: embedded member has no session to time out, and no DLQ is written here.
EMBEDDED_GROUP_CONFIGS = ("share.record.lock.duration.ms", "share.delivery.count.limit",
                          "share.partition.max.record.locks", "share.auto.offset.reset",
                          "share.isolation.level", "share.renew.acknowledge.enable")
#: The broker configs behind them (their defaults and the bounds a group's value is held in,
#: Kafka's ``group.share.*``), which an embedded Store may set as a broker's config would.
EMBEDDED_BROKER_CONFIGS = tuple(
    f"group.share.{bound}{name}" for name in ("record.lock.duration.ms", "delivery.count.limit",
                                              "partition.max.record.locks")
    for bound in ("", "min.", "max."))
#: The leader epoch share-partition state is read and written with.
_LEADER_EPOCH = 0
#: Bytes read from a partition's Log per fetch at most (Kafka's
#: ``max.partition.fetch.bytes``) and at least (a whole first batch is read either way).
FETCH_BYTES_MAX = 1024 * 1024
FETCH_BYTES_MIN = 4096
#: The guess of log bytes per record before a partition's first read.
_READ_BYTES_PER_RECORD_FIRST = 256


class ShareFetchPartition(NamedTuple):
    """What one fetch acquired in one partition (Kafka's ShareFetch answer for it): the
    partition ``tp``, the ``batches`` read from its Log (whole batches as the Log holds them,
    control batches included, not decoded) and ``acquired``: ``(first_offset, last_offset,
    delivery_count)`` ranges, the records of the batches this member now holds."""

    tp: TopicPartition
    batches: list
    acquired: list


class _Member:
    __slots__ = ("topics",)

    def __init__(self, topics: frozenset[str]):
        self.topics = topics


class _Partition:
    """One share-partition and the lock every thread takes to use it."""

    __slots__ = ("share", "lock", "topic_id", "partition", "isolation_level",
                 "bytes_per_record")

    def __init__(self, share: SharePartition, topic_id: uuid.UUID, partition: int,
                 isolation_level: str):
        self.share = share
        self.lock = threading.Lock()
        self.topic_id = topic_id
        self.partition = partition
        self.isolation_level = isolation_level
        # Log bytes per record in the last read: sizes the next read to what a fetch may
        # acquire (scanning a 1 MiB read of one-record batches costs more than the rest).
        self.bytes_per_record = _READ_BYTES_PER_RECORD_FIRST


def _state_error(code: int, group_id: str, tp: TopicPartition) -> ShareAcknowledgeError:
    return ShareAcknowledgeError(
        f"share group {group_id!r}, {tp}: the share-partition state cannot be initialized: "
        f"{error_codes.name(code)}", int(code))


class EmbeddedShareGroups:
    """The share groups of one Store (see the module docstring).

    ``EmbeddedShareGroups(logs, share_coordinator, notify_appended)``: ``logs`` the Store's
    partitions, ``share_coordinator`` a callable giving the Store's
    :class:`~seglog.coordinator.share_coordinator.ShareCoordinator` (made on first use),
    ``notify_appended`` wakes the consumers that wait (records released or expired are new
    records to a share consumer). ``clock_ms`` gives the time in ms (wall clock by default).

    Thread-safe: the group table is guarded by one lock, each share-partition by its own
    (lock order: a share-partition's, then the Log's and the metadata lock); the share
    coordinator is called under the share-partition's lock, so a partition's writes to
    ``__share_group_state`` are in the order of its changes.
    """

    def __init__(self, logs: "LogManager", share_coordinator: Callable[[], Any],
                 notify_appended: Callable[[], None], *, config_dir: str | None = None,
                 clock_ms: Callable[[], int] | None = None):
        self._logs = logs
        # Where the group configs are kept (seglog.group_configs_file: the file seglog serve
        # keeps them in too); None: in memory only.
        self._config_dir = config_dir
        self._share_coordinator = share_coordinator
        self._notify_appended = notify_appended
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._members: dict[str, dict[str, _Member]] = {}
        self._broker_configs: dict[str, Any] = {}
        # Used under self._lock only (the view is single-threaded).
        self._configs = GroupConfigsView(
            self._broker_value, read_group_configs(config_dir) if config_dir else None)
        self._partitions: dict[tuple[str, TopicPartition], _Partition] = {}

    # --- group configs ---------------------------------------------------------------------

    def _broker_value(self, name: str) -> Any:
        value = self._broker_configs.get(name)
        return BROKER_CONFIGS[name].default if value is None else value

    def alter_broker_configs(self, configs: Mapping[str, Any]) -> None:
        """Set broker configs of the embedded share groups (:data:`EMBEDDED_BROKER_CONFIGS`:
        ``group.share.record.lock.duration.ms`` and its ``min``/``max`` bounds, the same for
        ``delivery.count.limit`` and ``partition.max.record.locks``), over Kafka's defaults,
        as ``--config`` does for ``seglog serve``; loaded share-partitions take the new
        values at once. In memory: set them again after a reopen. Raises
        :class:`~seglog.errors.InvalidConfigError` for another name or a bad value."""
        parsed = {}
        for name, value in configs.items():
            if name not in EMBEDDED_BROKER_CONFIGS:
                raise InvalidConfigError(f"{name} is not a broker config of the embedded share "
                                         f"groups (they take {', '.join(EMBEDDED_BROKER_CONFIGS)})")
            parsed[name] = parse_value(BROKER_CONFIGS[name], value)
        with self._lock:
            self._broker_configs.update(parsed)
            groups = {g for g, _tp in self._partitions}
        for group_id in groups:
            self._apply_configs(group_id)

    def alter_group_config(self, group_id: str, configs: Mapping[str, Any]) -> None:
        """Set share-group configs of ``group_id`` (Kafka's GROUP resource configs, of
        :data:`EMBEDDED_GROUP_CONFIGS`; a value None removes one), validated as Kafka's
        ``GroupConfig.validate`` does, within the broker configs' bounds (Kafka's: a lock
        duration of 15 to 60 s; :meth:`alter_broker_configs` moves them). The group's loaded
        share-partitions take them at once (``share.auto.offset.reset`` applies where a
        partition has no state yet). Kept in the data directory's group-config file, the one
        ``seglog serve`` keeps GROUP configs in: they survive a reopen, and configs set
        through ``kafka-configs --entity-type groups`` against ``seglog serve`` on the same
        directory apply here. Raises :class:`~seglog.errors.InvalidConfigError` with Kafka's
        message."""
        for name in configs:
            if name not in EMBEDDED_GROUP_CONFIGS:
                raise InvalidConfigError(f"{name} is not a group config of the embedded share "
                                         f"groups (they take {', '.join(EMBEDDED_GROUP_CONFIGS)})")
        with self._lock:
            values = dict(self._configs.get(group_id))
            for name, value in configs.items():
                if value is None:
                    values.pop(name, None)
                else:
                    values[name] = str(value)
            validate(values, self._broker_value)
            if self._configs.replace(group_id, normalized(values)) and self._config_dir:
                write_group_configs(self._config_dir, self._configs.all())
        self._apply_configs(group_id)

    def group_config(self, group_id: str) -> dict[str, str]:
        """The share-group configs ``group_id`` runs with (its values held in the broker's
        bounds, else the broker's defaults), as Kafka describes them."""
        with self._lock:
            return {name: self._configs.effective(group_id, name)
                    for name in EMBEDDED_GROUP_CONFIGS}

    def _partition_config(self, group_id: str) -> SharePartitionConfig:
        with self._lock:
            value = self._configs.value
            return SharePartitionConfig(
                record_lock_duration_ms=value(group_id, "share.record.lock.duration.ms"),
                delivery_count_limit=value(group_id, "share.delivery.count.limit"),
                max_in_flight_records=value(group_id, "share.partition.max.record.locks"),
                auto_offset_reset=value(group_id, "share.auto.offset.reset"),
                isolation_level=value(group_id, "share.isolation.level"),
                renew_acknowledge_enable=value(group_id, "share.renew.acknowledge.enable"))

    def _apply_configs(self, group_id: str) -> None:
        """Kafka reads a group's configs at each use: the loaded share-partitions of the
        group take the current ones."""
        config = self._partition_config(group_id)
        with self._lock:
            parts = [p for (g, _tp), p in self._partitions.items() if g == group_id]
        for part in parts:
            with part.lock:
                part.share.config = config
                part.isolation_level = config.isolation_level

    # --- membership (ShareGroupHeartbeat) --------------------------------------------------

    def join(self, group_id: str, topics: Iterable[str], *, member_id: str | None = None) -> str:
        """A member of ``group_id`` subscribed to ``topics`` (a new one with ``member_id``
        None; else the member changes its topics); returns its member id. Raises
        :class:`~seglog.errors.InvalidGroupIdError` for an empty group id,
        :class:`~seglog.errors.LogClosedError` on a closed store. A topic that does not exist
        (yet) is fetched from once it does, as Kafka's subscriptions are."""
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(f"group_id must be a non-empty str, got {group_id!r}")
        topics = frozenset(topics)
        self._logs.check_open()
        with self._lock:
            members = self._members.setdefault(group_id, {})
            if member_id is None:
                # Kafka 4.x share consumers make their member id themselves (a uuid).
                member_id = str(uuid.uuid4())
            members[member_id] = _Member(topics)
        return member_id

    def leave(self, group_id: str, member_id: str) -> None:
        """The member leaves: the records it still holds become available to the others
        (their delivery counts stay). No-op for an unknown member."""
        with self._lock:
            members = self._members.get(group_id, {})
            if members.pop(member_id, None) is None:
                return
            parts = [p for (g, _tp), p in self._partitions.items() if g == group_id]
        if self._logs.closed:
            return
        now_ms = self._clock_ms()
        for part in parts:
            with part.lock:
                part.share.release_acquired_records(member_id, now_ms=now_ms)
                self._persist(group_id, part)
        self._notify_appended()

    def members(self, group_id: str) -> list[str]:
        """The member ids of ``group_id`` now."""
        with self._lock:
            return sorted(self._members.get(group_id, {}))

    def groups(self) -> list[str]:
        """The ids of the share groups with members or loaded share-partitions."""
        with self._lock:
            return sorted({g for g, m in self._members.items() if m}
                          | {g for g, _tp in self._partitions})

    def _check_member(self, group_id: str, member_id: str) -> _Member:
        with self._lock:
            member = self._members.get(group_id, {}).get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not a member of share group "
                                       f"{group_id!r}")
        return member

    # --- share-partitions ------------------------------------------------------------------

    def _partition(self, group_id: str, tp: TopicPartition) -> _Partition:
        """The share-partition of ``(group_id, tp)``, loaded from ``__share_group_state``
        (or started at ``share.auto.offset.reset``) on first use."""
        key = (group_id, tp)
        with self._lock:
            part = self._partitions.get(key)
        if part is not None:
            return part
        # One load at a time: a second thread's InitializeShareGroupState written after the
        # first thread's acknowledgements would wipe them.
        with self._load_lock:
            with self._lock:
                part = self._partitions.get(key)
            if part is None:
                part = self._load(group_id, tp)
                with self._lock:
                    self._partitions[key] = part
        return part

    def _load(self, group_id: str, tp: TopicPartition) -> _Partition:
        topic = self._logs.topic(tp.topic)
        log = topic.log(tp.partition)
        config = self._partition_config(group_id)
        # Leader epoch 0: a Store is the only leader its partitions ever have.
        share = SharePartition(group_id, tp.topic, topic.uuid, tp.partition, config,
                               leader_epoch=_LEADER_EPOCH)
        coordinator = self._share_coordinator()
        error, state = coordinator.read_state(group_id, topic.uuid, tp.partition,
                                              _LEADER_EPOCH)
        if error != error_codes.NONE:
            state = None  # never initialized (READ_UNINITIALIZED): start from the reset
        share.initialize(state, log_start_offset=log.start_offset,
                         log_end_offset=log.high_watermark,
                         offset_for_reset=lambda strategy: self._offset_for_reset(log, strategy))
        if state is None:
            # Kafka's group coordinator initializes a newly assigned share-partition's state
            # (InitializeShareGroupState); here its start offset is the one the reset chose,
            # so a reopen before any acknowledgement starts at the same place.
            error = coordinator.initialize_state(group_id, topic.uuid, tp.partition, 0,
                                                 share.start_offset)
            if error != error_codes.NONE:
                raise _state_error(error, group_id, tp)
        part = _Partition(share, topic.uuid, tp.partition, config.isolation_level)
        with part.lock:
            self._persist(group_id, part)
        return part

    def _offset_for_reset(self, log: Any, strategy: str) -> int:
        """Where a share-partition without state starts (Kafka's
        ``startOffsetDuringInitialization``): the log start, the high watermark, or the
        first offset at or after now minus a ``by_duration:<ISO8601>`` duration."""
        if strategy == "earliest":
            return log.start_offset
        if strategy.startswith("by_duration:"):
            since_ms = self._clock_ms() - parse_iso8601_duration_ms(strategy.split(":", 1)[1])
            found = log.offset_for_timestamp(since_ms)
            return log.high_watermark if found is None else found
        return log.high_watermark

    def _persist(self, group_id: str, part: _Partition) -> int:
        """Write what the share-partition asks to persist; the caller holds its lock.
        Returns the share coordinator's error code (the change is rolled back on error)."""
        share = part.share
        first_error = error_codes.NONE
        # Writes complete in order; each call queues a few at most (a change and the lock
        # expiries before it), so the loop is bounded by what the queue holds now.
        for _ in range(share.pending_write_count()):
            state = share.pending_write()
            if state is None:
                break
            error = self._share_coordinator().write_state(group_id, part.topic_id,
                                                          part.partition, state)
            share.write_done(error == error_codes.NONE)
            if first_error == error_codes.NONE:
                first_error = error
        return first_error

    def next_lock_deadline_ms(self, group_id: str) -> int | None:
        """The earliest acquisition-lock deadline of the group's share-partitions (ms since
        the epoch), or None: a waiting member wakes then to take expired records."""
        with self._lock:
            parts = [p for (g, _tp), p in self._partitions.items() if g == group_id]
        deadlines = []
        for part in parts:
            with part.lock:
                deadline = part.share.next_lock_deadline_ms()
            if deadline is not None:
                deadlines.append(deadline)
        return min(deadlines) if deadlines else None

    # --- ShareFetch and ShareAcknowledge ---------------------------------------------------

    def fetch(self, group_id: str, member_id: str, *, max_records: int,
              start_index: int = 0) -> list[ShareFetchPartition]:
        """Acquire up to ``max_records`` records for the member from the partitions of its
        topics (Kafka's ShareFetch), starting at the ``start_index``-th partition (callers
        rotate it for fairness). Never blocks on the log; an empty list when nothing is
        available now. Raises :class:`~seglog.errors.UnknownMemberIdError`,
        :class:`~seglog.errors.LogClosedError`."""
        member = self._check_member(group_id, member_id)
        self._logs.check_open()
        tps: list[TopicPartition] = []
        for name in sorted(member.topics):
            topic = self._logs.existing_topic(name)
            if topic is not None:
                tps.extend(TopicPartition(name, p) for p in range(topic.partitions))
        if not tps:
            return []
        start = start_index % len(tps)
        out: list[ShareFetchPartition] = []
        wanted = max_records
        for tp in tps[start:] + tps[:start]:
            if wanted <= 0:
                break
            fetched = self._fetch_partition(group_id, member_id, tp, wanted)
            if fetched is not None:
                out.append(fetched)
                wanted -= sum(last - first + 1 for first, last, _count in fetched.acquired)
        return out

    def _fetch_partition(self, group_id: str, member_id: str, tp: TopicPartition,
                         wanted: int) -> ShareFetchPartition | None:
        part = self._partition(group_id, tp)
        log = self._logs.topic(tp.topic).log(tp.partition)
        isolation = part.isolation_level
        backend = log.backend
        with part.lock:
            share = part.share
            now_ms = self._clock_ms()
            if share.expire_locks(now_ms):
                self._persist(group_id, part)
            if not share.can_acquire_records():
                return None
            offset = share.next_fetch_offset()
            if offset < log.start_offset:
                share.update_log_start_offset(log.start_offset)
                offset = share.next_fetch_offset()
            readable_end = (log.last_stable_offset if isolation == READ_COMMITTED
                            else log.high_watermark)
            if offset >= readable_end:
                return None
            read_bytes = min(FETCH_BYTES_MAX,
                             max(FETCH_BYTES_MIN, wanted * part.bytes_per_record * 5 // 4))
            result = log.read(offset, read_bytes, isolation=isolation)
            # The batches this fetch may acquire from: up to ``wanted`` records past the
            # fetch offset (a read of small batches holds thousands; each costs a
            # FetchedBatch in acquire and a decode in the client).
            batches = []
            for batch in backend.iter_batches(result.buffer, check_offsets=True):
                batches.append(batch)
                if batch.last_offset - offset + 1 >= wanted:
                    break
            if not batches:
                return None
            read_records = max(1, result.next_offset - batches[0].base_offset)
            part.bytes_per_record = max(1, len(result.buffer) // read_records)
            fetched = [FetchedBatch(b.base_offset, b.last_offset, b.producer_id,
                                    b.is_transactional, b.is_control,
                                    b.is_control and is_abort_marker(b)) for b in batches]
            aborted = [(a.producer_id, a.first_offset)
                       for a in (result.aborted_transactions or ())]
            acquired = share.acquire(member_id, fetched, max_records=wanted, now_ms=now_ms,
                                     aborted_producer_ranges=aborted, fetch_offset=offset)
            if self._persist(group_id, part) != error_codes.NONE:
                return None  # rolled back: nothing acquired
        if not acquired:
            return None
        return ShareFetchPartition(tp, batches, [(a.first_offset, a.last_offset,
                                                  a.delivery_count) for a in acquired])

    def acknowledge(self, group_id: str, member_id: str,
                    acks: Mapping[TopicPartition, Sequence[tuple[int, int, Sequence[int]]]]
                    ) -> dict[TopicPartition, int]:
        """Kafka's ShareAcknowledge: for each partition, ``(first_offset, last_offset,
        acknowledge_types)`` ranges (one type for the whole range, else one per offset;
        Kafka's ids: 0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT, 4 RENEW). Returns each
        partition's Kafka error code (0: acknowledged and persisted; INVALID_RECORD_STATE
        for records this member does not hold, ...). Raises
        :class:`~seglog.errors.UnknownMemberIdError`, :class:`~seglog.errors.LogClosedError`."""
        self._check_member(group_id, member_id)
        self._logs.check_open()
        results: dict[TopicPartition, int] = {}
        for tp, ranges in acks.items():
            with self._lock:
                part = self._partitions.get((group_id, tp))
            if part is None:
                results[tp] = error_codes.INVALID_RECORD_STATE
                continue
            batches = [AckBatch(first, last, tuple(types)) for first, last, types in ranges]
            with part.lock:
                now_ms = self._clock_ms()
                if part.share.expire_locks(now_ms):
                    self._persist(group_id, part)
                error = part.share.acknowledge(member_id, batches, now_ms=now_ms)
                persisted = self._persist(group_id, part)
            results[tp] = error if error != error_codes.NONE else persisted
        # Released records are records to fetch again, and acknowledged ones make room under
        # share.partition.max.record.locks: wake the members waiting for either.
        self._notify_appended()
        return results


class StoreShareGroups:
    """The share-group methods of :class:`~seglog.store.Store`: its share coordinator and
    share groups, and the share consumers' factory (a mixin, kept apart so that store.py stays
    within its line budget; the Store sets ``_logs``, ``_lock`` and ``_coordinators``)."""

    _logs: "LogManager"
    _lock: threading.RLock
    _coordinators: "StoreCoordinators"
    _share_groups: EmbeddedShareGroups | None = None
    #: Why embedded share groups are refused on this Store (set when a broker serves it).
    _share_groups_refused: str | None = None

    notify_appended: Callable[[], None]

    def serve_share_groups_elsewhere(self, reason: str) -> None:
        """Refuse embedded share groups from now on, with ``reason``: a broker that serves
        this Store keeps the share-partitions itself, and a second state machine over the
        same ``__share_group_state`` would hand a record to two members at once. Raises
        :class:`~seglog.errors.IllegalStateError` if embedded share groups exist already."""
        with self._lock:
            if self._share_groups is not None:
                raise IllegalStateError("this Store has embedded share consumers already: "
                                        + reason)
            self._share_groups_refused = reason

    def share_coordinator(self) -> ShareCoordinator:
        """The store's :class:`~seglog.coordinator.share_coordinator.ShareCoordinator`
        (KIP-932 share-partition state in ``__share_group_state``, made on first use), which
        share consumers and the wire broker persist through. Raises LogClosedError."""
        return self._coordinators.share_coordinator()

    def share_groups(self) -> EmbeddedShareGroups:
        """The Store's share groups (:class:`EmbeddedShareGroups`), made on first use; what
        :class:`~seglog.ShareConsumer` calls. Raises
        :class:`~seglog.errors.ReadOnlyError` on a read-only store (acquiring records
        writes ``__share_group_state``), :class:`~seglog.errors.LogClosedError`,
        :class:`~seglog.errors.IllegalStateError` when a broker serves this Store (its share
        consumers go through the wire: :meth:`serve_share_groups_elsewhere`)."""
        with self._lock:
            self._logs.check_writable()
            if self._share_groups_refused is not None:
                raise IllegalStateError(self._share_groups_refused)
            if self._share_groups is None:
                self._share_groups = EmbeddedShareGroups(
                    self._logs, self.share_coordinator, self.notify_appended,
                    config_dir=self._logs.path)
            return self._share_groups

    def share_consumer(self, group_id: str, topics: Iterable[str] | None = None,
                       **kwargs: Any) -> Any:
        """A :class:`~seglog.ShareConsumer` of share group ``group_id`` on this store,
        subscribed to ``topics`` if given; keyword arguments as its constructor."""
        from .clients.share_consumer import ShareConsumer
        consumer = ShareConsumer(self, group_id, **kwargs)  # type: ignore[arg-type]
        if topics is not None:
            consumer.subscribe(topics)
        return consumer

