"""The partition leader's side of share groups (KIP-932): Kafka 4.4's
``SharePartitionManager``, ``DelayedShareFetch`` and ``ShareFetchUtils`` over seglog's logs.

The manager keeps, per ``(group, topic id, partition)`` this broker leads, one
:class:`~seglog.coordinator.share_partition.SharePartition` (the in-flight state machine:
pure, no I/O) and does its I/O:

- Initialization (Kafka's ``maybeInitialize``): the partition's state is read through the
  share-state persister (:class:`seglog.server.share_persister.SharePersister`: the share
  coordinator of ``__share_group_state``); a partition with no state starts where the
  group's ``share.auto.offset.reset`` says (latest: the high watermark; earliest: the log
  start; ``by_duration:<ISO-8601>``: the first record at or after now minus it).
- Fetching (``DelayedShareFetch``): each partition is read from its next fetch offset (the
  first record not yet acquired or acknowledged), as Fetch reads (only the leader, the group's
  ``share.isolation.level``: read_uncommitted to the high watermark, read_committed to the
  last stable offset with the aborted transactions), its records acquired for the member up
  to ``max_records``, and the record batches answered sliced to what was acquired
  (``maybeSliceFetchRecords``). The request waits up to ``max_wait_ms`` until
  ``min_bytes`` of records are there to acquire, woken (no polling) by an append and by any
  change of a share partition (acknowledged, released, a lock that expired).
- Acknowledging: the member's acknowledgements are applied, and every change (acknowledge,
  release of a member's records, an acquisition lock that expired) is written through the
  persister before the request is answered (Kafka's order: a failed write rolls the change
  back and answers its error).
- One timer task expires the acquisition locks (``share.record.lock.duration.ms``) of every
  partition, at the earliest deadline.
- A member that leaves (its share session's connection closed, or the group coordinator's
  ``on_member_leave``) has its acquired records released; a group with no member left drops
  its share partitions (Kafka's ``onGroupEmpty``); a partition this broker stops leading
  drops its share partitions (Kafka's partition listener ``onBecomingFollower``).
- Records that reach the dead-letter state (KIP-1191: ARCHIVING) are handed to
  :mod:`seglog.server.share_dlq` when it is there.

Everything runs on the broker's event loop; a partition's changes and their writes are
serialised by one ``asyncio.Lock`` per share partition.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from .. import error_codes as codes
from .. import errors
from ..coordinator.share_partition import (AckBatch, FetchedBatch, SharePartition,
                                           SharePartitionConfig, ShareAcquireMode,
                                           auto_offset_reset_timestamp_ms)
from ..errors import IllegalStateError
from ..types import TopicPartition
from .context import AppendNotifier, BrokerState
from .share_sessions import (MAX_SHARE_SESSIONS_CONFIG, MAX_SHARE_SESSIONS_DEFAULT,
                             ShareSessionCache, SharedPartition)

__all__ = [
    "EXTENSION", "AcknowledgeOutcome", "FetchOutcome", "PartitionFetch", "SharePartitionManager",
    "find_share_partition_manager", "share_partition_manager",
]

log = logging.getLogger(__name__)

#: Where the manager lives in ``BrokerState.extensions``.
EXTENSION = "seglog.server.share_partitions"

#: How long a shutdown waits for releases and their state writes under way.
CLOSE_WAIT_S = 5.0
#: Kafka 4.4's broker defaults (``ShareGroupConfig``) the group configs fall back to.
_BROKER_DEFAULTS: dict[str, tuple[str, Any]] = {
    # group config name: (broker config name, Kafka's default)
    "share.record.lock.duration.ms": ("group.share.record.lock.duration.ms", 30000),
    "share.delivery.count.limit": ("group.share.delivery.count.limit", 5),
    "share.partition.max.record.locks": ("group.share.partition.max.record.locks", 2000),
    "share.auto.offset.reset": ("", "latest"),
    "share.isolation.level": ("", "read_uncommitted"),
}

# The record batch header (magic 2): what acquiring needs of each batch.
_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length
_ATTRIBUTES_AT = 21
_LAST_OFFSET_DELTA_AT = 23
_PRODUCER_ID_AT = 43
_HEADER_SIZE = 61
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


def _optional_module(name: str) -> Any | None:
    """A module another part of seglog provides, or None while it is not there."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@dataclass
class PartitionFetch:
    """What a ShareFetch answers for one partition (``ShareFetchResponseData.PartitionData``
    before the acknowledgement outcome is added): the error, the records (whole batches
    covering what was acquired) and the acquired ranges ``[(first, last, delivery
    count)]``."""

    error_code: int = codes.NONE
    error_message: str | None = None
    records: bytes = b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)


#: ``{(topic id, partition): PartitionFetch}`` in the order to answer.
FetchOutcome = dict[tuple[uuid.UUID, int], PartitionFetch]
#: ``{(topic id, partition): (error code, error message)}``.
AcknowledgeOutcome = dict[tuple[uuid.UUID, int], tuple[int, str | None]]


class _NotLeader(Exception):
    """This broker stopped leading the partition while it was being initialized."""

    def __init__(self, error_code: int) -> None:
        super().__init__(codes.name(error_code))
        self.error_code = error_code


class _Entry:
    """One share partition here: its state machine, the log it reads, whether it is
    initialized, and the lock serialising its changes and writes."""

    __slots__ = ("group_id", "topic", "topic_id", "partition", "sp", "ready", "lock",
                 "leader_epoch")

    def __init__(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int,
                 sp: Any, leader_epoch: int) -> None:
        self.group_id = group_id
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.sp = sp
        #: Done once initialized (its result: an error code, NONE when ready).
        self.ready: asyncio.Future[int] | None = None
        self.lock = asyncio.Lock()
        self.leader_epoch = leader_epoch


def _varint(view: memoryview, position: int) -> tuple[int, int]:
    """A zig-zag varint at ``position``: ``(value, next position)``."""
    shift = 0
    raw = 0
    while True:
        byte = view[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _is_abort_marker(view: memoryview, position: int, end: int) -> bool:
    """Whether the control batch at ``position`` holds an ABORT marker (its first record's
    key: version int16, type int16 with 0 = ABORT, Kafka's ``ControlRecordType``)."""
    try:
        at = position + _HEADER_SIZE
        _length, at = _varint(view, at)
        at += 1  # attributes
        _timestamp_delta, at = _varint(view, at)
        _offset_delta, at = _varint(view, at)
        key_length, at = _varint(view, at)
        if key_length < 4 or at + 4 > end:
            return False
        return bool(struct.unpack_from(">h", view, at + 2)[0] == 0)
    except (IndexError, ValueError, struct.error):
        return False


def _batches(buffer: bytes | memoryview,
             up_to_offset: int | None = None) -> list[tuple[int, int, FetchedBatch]]:
    """The record batches of ``buffer``: ``(position, end, FetchedBatch)`` (base and last
    offset, producer id, transactional, control, ABORT marker) from their headers; with
    ``up_to_offset``, only up to the first batch whose last offset reaches it (Kafka's
    acquire iterates the read's batches lazily and stops once it has enough records: a read
    of max_bytes can hold far more batches than a fetch may acquire)."""
    view = memoryview(buffer)
    batches = []
    position = 0
    size = len(view)
    while position + _HEADER_SIZE <= size:
        base_offset, length = _BATCH_HEADER.unpack_from(view, position)
        end = position + 12 + length
        if end > size:
            break  # a partial batch at the end of a read: not delivered
        attributes = struct.unpack_from(">h", view, position + _ATTRIBUTES_AT)[0]
        delta = struct.unpack_from(">i", view, position + _LAST_OFFSET_DELTA_AT)[0]
        producer_id = struct.unpack_from(">q", view, position + _PRODUCER_ID_AT)[0]
        control = bool(attributes & _CONTROL)
        batches.append((position, end, FetchedBatch(
            base_offset=base_offset, last_offset=base_offset + delta,
            producer_id=producer_id, is_transactional=bool(attributes & _TRANSACTIONAL),
            is_control=control,
            is_abort_marker=control and _is_abort_marker(view, position, end))))
        position = end
        if up_to_offset is not None and base_offset + delta >= up_to_offset:
            break
    return batches


def _slice_records(buffer: bytes | memoryview,
                   batches: Sequence[tuple[int, int, FetchedBatch]],
                   first_acquired: int, last_acquired: int) -> bytes:
    """Kafka's ``maybeSliceFetchRecords``: the batches from the last one starting at or before
    the first acquired offset to the last one starting at or before the last acquired
    offset."""
    if len(batches) <= 1:
        return bytes(buffer[:batches[0][1]]) if batches else b""
    start = batches[0][0]
    end = batches[0][1]
    for position, batch_end, batch in batches[1:]:
        if batch.base_offset <= first_acquired:
            start = position
            end = batch_end
        elif batch.base_offset > last_acquired:
            break
        else:
            end = batch_end
    return bytes(buffer[start:end])


class SharePartitionManager:
    """Kafka's ``SharePartitionManager`` for one broker (see the module docstring)."""

    def __init__(self, broker: BrokerState) -> None:
        self.broker = broker
        max_sessions = int(broker.config.get(MAX_SHARE_SESSIONS_CONFIG,
                                             MAX_SHARE_SESSIONS_DEFAULT))
        self.sessions = ShareSessionCache(max_sessions)
        self.sessions.register_listener(self)
        self.entries: dict[tuple[str, uuid.UUID, int], _Entry] = {}
        #: Counts every change of a share partition (a waiting fetch's wake-up).
        self.changed = AppendNotifier(asyncio.get_running_loop())
        self._timer_wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._closed = False
        broker.connection_closed_listeners.append(self.sessions.on_disconnect)
        self._listen_to_share_groups()
        view = self._group_configs()
        if view is not None:
            view.add_listener(self._group_config_changed)
        cluster = broker.cluster
        add_listener = getattr(cluster, "add_leadership_listener", None)
        if add_listener is not None:
            add_listener(self)

    def _listen_to_share_groups(self) -> None:
        """Hear of members leaving from the share group coordinator
        (:mod:`seglog.server.apis.share_groups`, when it runs here)."""
        module = _optional_module("seglog.server.apis.share_groups")
        find = getattr(module, "find_share_groups_state", None) if module else None
        found = find(self.broker) if find is not None else None
        if found is not None:
            found.add_listener(self)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the acquisition-lock timer."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._run_timer())

    async def close(self) -> None:
        """Stop the timer; let the background work (releases of the members whose
        connections closed, their writes) finish, for at most :data:`CLOSE_WAIT_S`."""
        self._closed = True
        if self._background:
            await asyncio.wait(list(self._background), timeout=CLOSE_WAIT_S)
        tasks = [t for t in [self._timer, *self._background] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
        self.changed.notify()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- configuration -----------------------------------------------------------------------

    def group_config(self, group_id: str, name: str) -> str:
        """The group's ``name`` (``share.*``): its own value, else the broker's default
        (:mod:`seglog.group_configs` when it is there)."""
        view = self._group_configs()
        if view is not None:
            try:
                return str(view.effective(group_id, name))
            except KeyError:  # not a group config of this seglog
                pass
        broker_name, default = _BROKER_DEFAULTS[name]
        if broker_name:
            return str(self.broker.config.get(broker_name, default))
        return str(default)

    def _group_configs(self) -> Any | None:
        """The broker's group configs (:mod:`seglog.server.apis.group_configs`), or None."""
        module = _optional_module("seglog.server.apis.group_configs")
        view_of = getattr(module, "group_configs", None) if module is not None else None
        return view_of(self.broker) if view_of is not None else None

    def _group_config_changed(self, group_id: str) -> None:
        """A group config changed: the group's share partitions run with the new values
        (Kafka reads them on each use)."""
        for entry in list(self.entries.values()):
            if entry.group_id == group_id:
                entry.sp.config = self._partition_config(group_id)
        self.changed.notify()

    def record_lock_duration_ms(self, group_id: str) -> int:
        """The acquisition lock duration of ``group_id`` (``share.record.lock.duration
        .ms``), as ShareFetch and ShareAcknowledge answer it."""
        return int(self.group_config(group_id, "share.record.lock.duration.ms"))

    def isolation_level(self, group_id: str) -> str:
        """The group's ``share.isolation.level`` as :meth:`Log.read` names it."""
        return self.group_config(group_id, "share.isolation.level")

    def _partition_config(self, group_id: str) -> SharePartitionConfig:
        return SharePartitionConfig(
            record_lock_duration_ms=self.record_lock_duration_ms(group_id),
            delivery_count_limit=int(self.group_config(group_id, "share.delivery.count.limit")),
            max_in_flight_records=int(self.group_config(group_id,
                                                        "share.partition.max.record.locks")),
            auto_offset_reset=self.group_config(group_id, "share.auto.offset.reset"),
            isolation_level=self.isolation_level(group_id),
            dlq_enabled=self._dlq_enabled(group_id),
            renew_acknowledge_enable=self._renew_enabled(group_id),
        )

    def _renew_enabled(self, group_id: str) -> bool:
        """The group's ``share.renew.acknowledge.enable`` (KIP-1222; Kafka's default true)."""
        view = self._group_configs()
        if view is None:
            return True
        try:
            return str(view.effective(group_id, "share.renew.acknowledge.enable")).lower() \
                == "true"
        except KeyError:
            return True

    def _dlq_enabled(self, group_id: str) -> bool:
        """KIP-1191: whether the group's records go to a dead-letter queue
        (:mod:`seglog.server.share_dlq` decides; off without it)."""
        dlq = _optional_module("seglog.server.share_dlq")
        enabled = getattr(dlq, "dlq_enabled", None) if dlq is not None else None
        return bool(enabled(self.broker, group_id)) if enabled is not None else False

    # --- the partition cache -----------------------------------------------------------------

    def _leader(self, topic: str, partition: int) -> tuple[Any | None, int]:
        """This broker's leader replica of the partition, or ``(None, error code)``."""
        cluster = self.broker.cluster
        tp = TopicPartition(topic, partition)
        replica = cluster.leader_replica(tp)
        if replica is None:
            return None, cluster.no_replica_error(tp)
        return replica, codes.NONE

    def _entry(self, group_id: str, part: SharedPartition) -> tuple[_Entry | None, int]:
        """Kafka's ``getOrCreateSharePartition``: the share partition, made (uninitialized)
        when this broker leads the partition; else ``(None, error code)``."""
        key = (group_id, part.topic_id, part.partition)
        entry = self.entries.get(key)
        if entry is not None:
            return entry, codes.NONE
        assert part.topic is not None
        replica, code = self._leader(part.topic, part.partition)
        if replica is None:
            return None, code
        leader_epoch = int(getattr(replica, "leader_epoch", -1))
        sp = SharePartition(group_id, part.topic, part.topic_id, part.partition,
                            self._partition_config(group_id), leader_epoch=leader_epoch)
        entry = _Entry(group_id, part.topic, part.topic_id, part.partition, sp, leader_epoch)
        self.entries[key] = entry
        return entry, codes.NONE

    def _drop(self, entry: _Entry) -> None:
        """Kafka's ``removeSharePartitionFromCache``: forget the share partition (its state
        is in the persister; the next leader reads it)."""
        key = (entry.group_id, entry.topic_id, entry.partition)
        if self.entries.get(key) is entry:
            del self.entries[key]
        log.debug("share partition %s %s-%d dropped", entry.group_id, entry.topic,
                  entry.partition)
        entry.sp.mark_fenced()
        self.changed.notify()

    def share_groups_disabled(self) -> None:
        """Kafka's ``onShareVersionToggle`` to a level without share groups: every share
        session and share partition goes (their state stays with the persister)."""
        self.sessions.remove_all()
        for entry in list(self.entries.values()):
            self._drop(entry)

    def drop_partition(self, tp: TopicPartition) -> None:
        """Every share partition of ``tp`` dropped (this broker no longer leads it)."""
        for entry in [e for e in self.entries.values()
                      if e.topic == tp.topic and e.partition == tp.partition]:
            self._drop(entry)

    # LeadershipListener (seglog.cluster.seam) -------------------------------------------------

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """A new leadership: share partitions are made on the first ShareFetch."""
        self.drop_partition(tp)  # an older epoch's state is stale: read it again

    def on_become_follower(self, tp: TopicPartition) -> None:
        """Kafka's ``SharePartitionListener.onBecomingFollower``."""
        self.drop_partition(tp)

    # --- initialization ----------------------------------------------------------------------

    def _persister(self) -> Any | None:
        module = _optional_module("seglog.server.share_persister")
        if module is None:
            return None
        find = getattr(module, "find_share_persister", None) or getattr(
            module, "share_persister", None)
        if find is None:
            return None
        return find(self.broker)

    def _offset_for_reset(self, entry: _Entry) -> Callable[[str], int]:
        def offset_for(strategy: str) -> int:
            replica, code = self._leader(entry.topic, entry.partition)
            if replica is None:
                raise _NotLeader(code)
            log_ = replica.log
            timestamp_ms = auto_offset_reset_timestamp_ms(strategy, BrokerState.now_ms())
            if timestamp_ms is not None:
                # Kafka's offsetForTimestamp: the first record at or after it, else latest.
                found = log_.offset_for_timestamp(timestamp_ms)
                return int(log_.high_watermark if found is None else found)
            if strategy.strip().lower() == "earliest":
                return int(log_.start_offset)
            return int(log_.high_watermark)
        return offset_for

    async def _initialize(self, entry: _Entry) -> int:
        """Kafka's ``maybeInitialize``: read the state through the persister and load it;
        an error code (NONE when ready)."""
        persister = self._persister()
        state = None
        if persister is not None:
            try:
                code, state = await persister.read_state(entry.group_id, entry.topic_id,
                                                         entry.partition, entry.leader_epoch)
            except Exception:  # noqa: BLE001 - a failed read answers its error
                log.exception("share partition %s %s-%d: reading its state failed",
                              entry.group_id, entry.topic, entry.partition)
                return codes.UNKNOWN_SERVER_ERROR
            if code != codes.NONE:
                log.debug("share partition %s %s-%d: reading its state: %s", entry.group_id,
                          entry.topic, entry.partition, codes.name(int(code)))
                return _persister_error(code)
        replica, code = self._leader(entry.topic, entry.partition)
        if replica is None:
            return code
        log_ = replica.log
        try:
            entry.sp.initialize(state, log_start_offset=int(log_.start_offset),
                                log_end_offset=int(log_.high_watermark),
                                offset_for_reset=self._offset_for_reset(entry))
        except _NotLeader as exc:
            return exc.error_code
        except (ValueError, IllegalStateError, errors.SeglogError) as exc:
            log.warning("share partition %s %s-%d: invalid state: %s", entry.group_id,
                        entry.topic, entry.partition, exc)
            return codes.UNKNOWN_SERVER_ERROR
        log.debug("share partition %s %s-%d initialized: start offset %d", entry.group_id,
                  entry.topic, entry.partition, entry.sp.start_offset)
        self._wake_timer()
        self._hand_to_dlq(entry)  # ranges still ARCHIVING when last written
        return codes.NONE

    async def _ready(self, entry: _Entry) -> int:
        """Wait for the partition's initialization (starting it); its error code. A failed
        initialization drops the partition (the next request tries again)."""
        if entry.ready is None:
            entry.ready = asyncio.get_running_loop().create_future()
            try:
                code = await self._initialize(entry)
            except asyncio.CancelledError:
                entry.ready.set_result(codes.UNKNOWN_SERVER_ERROR)
                self._drop(entry)
                raise
            entry.ready.set_result(code)
            if code != codes.NONE:
                self._drop(entry)
            return code
        return await asyncio.shield(entry.ready)

    # --- writing state -----------------------------------------------------------------------

    async def _persist(self, entry: _Entry) -> int:
        """Write the partition's pending change through the persister (Kafka's
        ``writeShareGroupState`` before answering); its error code. Called under the
        partition's lock."""
        result = codes.NONE
        persister = self._persister()
        while True:
            state = entry.sp.pending_write()
            if state is None:
                return result
            if persister is None:
                entry.sp.write_done(True)
                continue
            try:
                code = int(await persister.write_state(entry.group_id, entry.topic_id,
                                                       entry.partition, state))
            except Exception:  # noqa: BLE001 - a failed write rolls back
                log.exception("share partition %s %s-%d: writing its state failed",
                              entry.group_id, entry.topic, entry.partition)
                code = codes.UNKNOWN_SERVER_ERROR
            entry.sp.write_done(code == codes.NONE)
            if code != codes.NONE:
                result = _persister_error(code)
                if result in (codes.NOT_LEADER_OR_FOLLOWER, codes.UNKNOWN_TOPIC_OR_PARTITION):
                    self._drop(entry)  # fenced (Kafka's fencedSharePartitionHandler)
                    return result

    def _after_change(self, entry: _Entry) -> None:
        """Wake waiting fetches and the timer; hand dead-lettered records on."""
        self.changed.notify()
        self._wake_timer()
        self._hand_to_dlq(entry)

    def _hand_to_dlq(self, entry: _Entry) -> None:
        """KIP-1191: records the partition moved to ARCHIVING go to the group's dead-letter
        queue (:mod:`seglog.server.share_dlq`: it writes them, then archives them and
        persists that under the partition's lock); without it they are archived at once."""
        batches = entry.sp.take_dlq_batches()
        if not batches:
            return
        dlq = _optional_module("seglog.server.share_dlq")
        find = getattr(dlq, "find_dlq_manager", None) if dlq is not None else None
        manager = find(self.broker) if find is not None else None
        if manager is None:
            for batch in batches:
                entry.sp.archiving_done(batch.first_offset, batch.last_offset)
            self._spawn(self._persist_locked(entry))
            return

        async def persist() -> bool:
            ok = await self._persist(entry) == codes.NONE
            self.changed.notify()
            return ok

        self._spawn(manager.archive_batches(
            entry.group_id, TopicPartition(entry.topic, entry.partition), entry.topic_id,
            entry.sp, batches, persist=persist, lock=entry.lock))

    async def _persist_locked(self, entry: _Entry) -> None:
        async with entry.lock:
            await self._persist(entry)

    # --- the acquisition-lock timer ----------------------------------------------------------

    def _wake_timer(self) -> None:
        self._timer_wake.set()

    async def _run_timer(self) -> None:
        """One task for every acquisition lock: sleeps to the earliest deadline, expires the
        locks that are due and persists the change (Kafka's ``AcquisitionLockTimerTask``)."""
        while not self._closed:
            self._timer_wake.clear()
            now_ms = BrokerState.now_ms()
            earliest: int | None = None
            for entry in list(self.entries.values()):
                if entry.ready is None or not entry.ready.done() or entry.ready.result():
                    continue
                deadline = entry.sp.next_lock_deadline_ms()
                if deadline is None:
                    continue
                if deadline <= now_ms:
                    if entry.lock.locked():
                        # A change in flight: try again shortly.
                        earliest = now_ms + 10 if earliest is None else min(earliest, now_ms + 10)
                        continue
                    async with entry.lock:
                        changed = entry.sp.expire_locks(BrokerState.now_ms())
                        if changed:
                            await self._persist(entry)
                    if changed:
                        self._after_change(entry)
                    deadline = entry.sp.next_lock_deadline_ms()
                    if deadline is None:
                        continue
                    # Never a busy loop on a deadline that stays in the past.
                    deadline = max(deadline, BrokerState.now_ms() + 10)
                earliest = deadline if earliest is None else min(earliest, deadline)
            timeout_s = None if earliest is None else max(
                0.0, (earliest - BrokerState.now_ms()) / 1000.0)
            try:
                await asyncio.wait_for(self._timer_wake.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass

    # --- member leave, group empty (ShareGroupListener) --------------------------------------

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        """Release the member's acquired records in every share partition of the group
        (Kafka's ``releaseSession`` on a member that left)."""
        for entry in [e for e in self.entries.values() if e.group_id == group_id]:
            self._spawn(self._release(entry, member_id))

    def on_group_empty(self, group_id: str) -> None:
        """Kafka's ``onGroupEmpty``: drop the group's share partitions here (their state is
        the persister's; without one the memory is the only copy, and they stay)."""
        if self._persister() is None:
            return
        if self.sessions.num_members(group_id):
            return  # a member still has a share session here (Kafka counts sessions)
        for entry in [e for e in self.entries.values() if e.group_id == group_id]:
            self._drop(entry)

    async def _release(self, entry: _Entry, member_id: str) -> int:
        if entry.ready is None:
            return codes.NONE
        if await self._ready(entry) != codes.NONE:
            return codes.NONE
        async with entry.lock:
            entry.sp.release_acquired_records(member_id, now_ms=BrokerState.now_ms())
            code = await self._persist(entry)
        self._after_change(entry)
        return int(code)

    async def release_session(self, group_id: str, member_id: str,
                              parts: Sequence[SharedPartition]) -> None:
        """Kafka's ``releaseSession`` after a session closed (epoch -1): the member's
        records in the session's partitions become available again."""
        for part in parts:
            entry = self.entries.get((group_id, part.topic_id, part.partition))
            if entry is not None:
                await self._release(entry, member_id)

    # --- acknowledging -----------------------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str,
                          acks: Mapping[SharedPartition, Sequence[tuple[int, int, Sequence[int]]]]
                          ) -> AcknowledgeOutcome:
        """Kafka's ``SharePartitionManager.acknowledge``: apply each partition's
        acknowledgement batches ``(first offset, last offset, types)`` and persist them;
        ``{partition: (error code, message)}``."""
        outcome: AcknowledgeOutcome = {}
        for part, batches in acks.items():
            entry = self.entries.get((group_id, part.topic_id, part.partition))
            if entry is None or entry.ready is None:
                outcome[part.key] = (codes.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            code = await self._ready(entry)
            if code != codes.NONE:
                outcome[part.key] = (code, None)
                continue
            ack_batches = [AckBatch(first_offset=int(first), last_offset=int(last),
                                           acknowledge_types=tuple(int(t) for t in types))
                           for first, last, types in batches]
            async with entry.lock:
                code = entry.sp.acknowledge(member_id, ack_batches,
                                            now_ms=BrokerState.now_ms())
                if code == codes.NONE:
                    code = await self._persist(entry)
            self._after_change(entry)
            outcome[part.key] = (int(code), None)
        return outcome

    # --- fetching ----------------------------------------------------------------------------

    async def fetch(self, group_id: str, member_id: str, parts: Sequence[SharedPartition], *,
                    session_epoch: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                    max_records: int, batch_size: int, acquire_mode: int = 0) -> FetchOutcome:
        """Kafka's ``fetchMessages`` + ``DelayedShareFetch``: acquire records of ``parts``
        for the member (see the module docstring); the outcome of each partition, in the
        order answered."""
        outcome: FetchOutcome = {}
        if not parts or max_records == 0 or max_bytes == 0:
            return outcome
        # Kafka's PartitionRotateStrategy ROUND_ROBIN: start at epoch % n.
        shift = session_epoch % len(parts) if session_epoch > 0 else 0
        parts = list(parts[shift:]) + list(parts[:shift])
        wanted: list[_Entry] = []
        for part in parts:
            entry, code = self._entry(group_id, part)
            if entry is None:
                outcome[part.key] = PartitionFetch(code)
                continue
            wanted.append(entry)
        ready: list[_Entry] = []
        for entry in wanted:
            code = await self._ready(entry)
            if code != codes.NONE:
                outcome[(entry.topic_id, entry.partition)] = PartitionFetch(code)
            else:
                ready.append(entry)
        if not ready:
            return outcome
        isolation = self.isolation_level(group_id)
        deadline_s = time.monotonic() + max(max_wait_ms, 0) / 1000.0
        broker = self.broker
        while True:
            seen_appended = broker.appended.count
            seen_changed = self.changed.count
            available = self._available_bytes(ready, isolation, max_bytes)
            remaining_s = deadline_s - time.monotonic()
            if (available is None or available >= min_bytes or remaining_s <= 0
                    or self._closed or getattr(broker, "closing", False)):
                break
            await self._wait_any(seen_appended, seen_changed, remaining_s)
        outcome.update(await self._acquire_all(group_id, member_id, ready, isolation,
                                               max_bytes=max_bytes, max_records=max_records,
                                               batch_size=batch_size,
                                               acquire_mode=acquire_mode))
        return outcome

    async def _wait_any(self, seen_appended: int, seen_changed: int, timeout_s: float) -> None:
        """Until something is appended, a share partition changes, or ``timeout_s``."""
        waits = [asyncio.ensure_future(self.broker.appended.wait(seen_appended, timeout_s)),
                 asyncio.ensure_future(self.changed.wait(seen_changed, timeout_s))]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()

    def _available_bytes(self, ready: Sequence[_Entry], isolation: str,
                         max_bytes: int) -> int | None:
        """A lower bound of the bytes ready to acquire from the partitions' next fetch
        offsets (Kafka's ``isMinBytesSatisfied``; one byte per offset, a record has at least
        one); None when a partition fails (answer at once)."""
        total = 0
        for entry in ready:
            if (entry.topic_id, entry.partition) not in _live_keys(self, entry):
                return None  # dropped meanwhile (leadership moved)
            if not entry.sp.can_acquire_records():
                continue
            replica, code = self._leader(entry.topic, entry.partition)
            if replica is None:
                return None
            log_ = replica.log
            end = log_.last_stable_offset if isolation == "read_committed" \
                else log_.high_watermark
            next_offset = entry.sp.next_fetch_offset()
            if next_offset < end:
                total += end - next_offset
        return total

    async def _acquire_all(self, group_id: str, member_id: str, ready: Sequence[_Entry],
                           isolation: str, *, max_bytes: int, max_records: int,
                           batch_size: int, acquire_mode: int) -> FetchOutcome:
        """Read and acquire each partition once (``ShareFetchUtils.processFetchResponse``)."""
        outcome: FetchOutcome = {}
        acquired_count = 0
        # Kafka's PartitionMaxBytesStrategy UNIFORM: the request's bytes split evenly.
        partition_max_bytes = max(max_bytes // max(len(ready), 1), 0)
        min_one_batch = True
        for entry in ready:
            key = (entry.topic_id, entry.partition)
            if self.entries.get((group_id, entry.topic_id, entry.partition)) is not entry:
                outcome[key] = PartitionFetch(codes.NOT_LEADER_OR_FOLLOWER)
                continue
            replica, code = self._leader(entry.topic, entry.partition)
            if replica is None:
                self._drop(entry)
                outcome[key] = PartitionFetch(code)
                continue
            result = PartitionFetch()
            outcome[key] = result
            if entry.lock.locked() or not entry.sp.can_acquire_records():
                continue  # Kafka: the fetch lock is held elsewhere / too many in flight
            offset = entry.sp.next_fetch_offset()
            log_ = replica.log
            # Offsets past the share partition's in-flight end were never acquired: each is
            # one the fetch may take, so the batches up to end + the records still wanted
            # hold everything this acquire can return (the in-flight ones below are all
            # read). Kafka's acquire stops iterating the read's batches there; here the
            # read itself stops there, or a read of max_bytes walks the whole log.
            up_to_offset = max(entry.sp.end_offset, offset) + max_records - acquired_count
            try:
                buffer, aborted_txns = read_for_acquire(
                    log_, offset, up_to_offset, max_bytes=partition_max_bytes,
                    min_one_batch=min_one_batch, isolation=isolation)
            except errors.OffsetOutOfRangeError:
                # Kafka: the share partition moves to the log start; nothing this time.
                entry.sp.update_log_start_offset(int(log_.start_offset))
                continue
            except (errors.SeglogError, OSError) as exc:
                code = int(getattr(exc, "kafka_error_code", codes.KAFKA_STORAGE_ERROR))
                if isinstance(exc, errors.LogClosedError):
                    code = codes.UNKNOWN_TOPIC_OR_PARTITION  # deleted meanwhile
                # Kafka's fencedSharePartitionHandler: the partition is made anew (its state
                # read again) by the next request, if there is one to make.
                self._drop(entry)
                outcome[key] = PartitionFetch(code)
                continue
            if not len(buffer):
                continue
            batches = _batches(buffer, up_to_offset)
            if not batches:
                continue
            aborted = [(int(t.producer_id), int(t.first_offset), int(t.last_offset))
                       for t in aborted_txns]
            try:
                acquired = entry.sp.acquire(member_id, [b for _, _, b in batches],
                                            max_records=max_records - acquired_count,
                                            now_ms=BrokerState.now_ms(),
                                            aborted_producer_ranges=aborted,
                                            batch_size=batch_size,
                                            acquire_mode=ShareAcquireMode(acquire_mode),
                                            fetch_offset=offset, isolation_level=isolation)
            except errors.SeglogError as exc:
                # Kafka's handleFetchException: the partition answers the error
                # (IllegalStateException: UNKNOWN_SERVER_ERROR).
                log.warning("share partition %s %s-%d: acquiring failed: %s", entry.group_id,
                            entry.topic, entry.partition, exc)
                outcome[key] = PartitionFetch(codes.UNKNOWN_SERVER_ERROR)
                continue
            if not acquired:
                continue
            min_one_batch = False
            result.acquired = [(int(a.first_offset), int(a.last_offset),
                                int(a.delivery_count)) for a in acquired]
            result.records = _slice_records(buffer, batches, result.acquired[0][0],
                                            result.acquired[-1][1])
            acquired_count += sum(last - first + 1 for first, last, _ in result.acquired)
            self._wake_timer()
            if acquired_count >= max_records:
                break
        for entry in ready:
            # Partitions not reached after max_records: answered empty.
            outcome.setdefault((entry.topic_id, entry.partition), PartitionFetch())
        return outcome


def read_for_acquire(log_: Any, offset: int, up_to_offset: int, *, max_bytes: int,
                      min_one_batch: bool, isolation: str) -> tuple[memoryview | bytes, list[Any]]:
    """``(buffer, aborted transactions)``: what ``log_.read(offset, max_bytes, ...)`` returns
    (one segment, whole batches, at most ``max_bytes`` unless ``min_one_batch``), cut after
    the batch holding ``up_to_offset``. The read is bounded below that batch (a log read
    stops before the batch holding its ``max_offset``), then that batch is read alone and
    kept if it follows in the same segment and fits in ``max_bytes``."""
    bound = log_.high_watermark if isolation != "read_committed" else log_.last_stable_offset
    if up_to_offset + 1 >= bound:
        read = log_.read(offset, max_bytes=max_bytes, min_one_batch=min_one_batch,
                         isolation=isolation)
        return read.buffer, list(read.aborted_transactions or ())
    read = log_.read(offset, max_bytes=max_bytes, min_one_batch=min_one_batch,
                     isolation=isolation, max_offset=up_to_offset + 1)
    buffer: memoryview | bytes = read.buffer
    aborted: list[Any] = list(read.aborted_transactions or ())
    size = len(buffer)
    if read.next_offset > up_to_offset or (size and size >= max_bytes):
        return buffer, aborted
    # The batch holding up_to_offset (it starts at or below it): read alone.
    more = log_.read(read.next_offset, max_bytes=1, min_one_batch=True, isolation=isolation)
    extra = more.buffer
    if not len(extra):
        return buffer, aborted
    if size and (more.log_path != read.log_path or size + len(extra) > max_bytes):
        return buffer, aborted  # another segment, or past max_bytes: the next fetch's
    if not size and not min_one_batch and len(extra) > max_bytes:
        return buffer, aborted
    for txn in more.aborted_transactions or ():
        if txn not in aborted:
            aborted.append(txn)
    return (bytes(buffer) + bytes(extra)) if size else extra, aborted


def _live_keys(manager: SharePartitionManager, entry: _Entry) -> set[tuple[uuid.UUID, int]]:
    """``{(topic id, partition)}`` when ``entry`` is still the manager's, else empty."""
    if manager.entries.get((entry.group_id, entry.topic_id, entry.partition)) is entry:
        return {(entry.topic_id, entry.partition)}
    return set()


def _persister_error(code: int) -> int:
    """Kafka's ``fetchPersisterError``: the error a share partition answers for the
    persister's."""
    if code in (codes.NOT_COORDINATOR, codes.COORDINATOR_NOT_AVAILABLE,
                codes.COORDINATOR_LOAD_IN_PROGRESS):
        return codes.COORDINATOR_NOT_AVAILABLE
    if code in (codes.GROUP_ID_NOT_FOUND, codes.UNKNOWN_TOPIC_OR_PARTITION):
        return code
    if code in (codes.FENCED_LEADER_EPOCH, codes.FENCED_STATE_EPOCH):
        return codes.NOT_LEADER_OR_FOLLOWER
    return codes.UNKNOWN_SERVER_ERROR


def find_share_partition_manager(broker: BrokerState) -> SharePartitionManager | None:
    """The broker's manager (None before the first share request)."""
    found = broker.extensions.get(EXTENSION)
    return found if isinstance(found, SharePartitionManager) else None


def share_partition_manager(broker: BrokerState) -> SharePartitionManager:
    """The broker's manager, made (and its timer started) on first use."""
    found = find_share_partition_manager(broker)
    if found is None:
        found = broker.extensions[EXTENSION] = SharePartitionManager(broker)
        found.start()
    return found
