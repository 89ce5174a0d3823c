"""A share-partition's in-flight records (KIP-932): Kafka 4.4's ``SharePartition``, ported.

One ``SharePartition`` holds, for one (share group, topic partition), the records between its
*start offset* (everything before it is done: acknowledged or archived) and its *end offset*
(the last offset ever acquired): which are AVAILABLE to hand out, ACQUIRED by a member (with an
acquisition-lock deadline), ACKNOWLEDGED, ARCHIVING (on their way to the dead-letter queue,
KIP-1191) or ARCHIVED, and how often each was delivered.

It is a faithful port of Kafka 4.4's ``kafka.server.share.SharePartition`` together with
``InFlightState``, ``InFlightBatch``, ``RecordState``, ``DeliveryCountOps``, the
``AcquisitionLockTimerTask`` semantics and ``ShareFetchUtils.accumulateAcquiredRecords``. The
cached state is Kafka's: a sorted map from first offset to an *in-flight batch*, which holds
one state for the whole batch until a request touches only part of it; then (and only then)
the batch switches to one state per offset (Kafka's ``maybeInitializeOffsetStateUpdate``).
Whole-batch acquisition and acknowledgement therefore keep one Python object per batch.

Pure: no I/O, no asyncio, no threads, no locks (callers serialise: the server on its event
loop, the embedded consumer under a lock); every method that depends on time takes ``now_ms``.

Where this differs in shape from Kafka, and why:

* Persisting. Kafka's ``writeShareGroupState`` is an asynchronous call whose completion commits
  or rolls back the state transitions it carries (``rollbackOrProcessStateUpdates``). Here each
  change that Kafka would write is queued, in order, as a ``ShareState`` holding exactly the
  state batches Kafka sends (the changed ranges, not the whole cache; the share coordinator
  merges them) with the start offset and delivery-complete count of that moment. The caller
  persists the head of the queue (``pending_write()``) and reports ``write_done(ok)``; the
  partition then does what Kafka's completion does (commit, or roll back; advance the start
  offset; hand ARCHIVING records to the DLQ). ``last_write_seq`` / ``write_done``'s return
  value let a caller wait for the write its own request produced. Acquisition is not written
  (Kafka does not write it either). Writes complete in the order they were made (Kafka may
  have several in flight that complete in any order; records in a pending transition are
  locked either way).
* Timers. Kafka's acquisition-lock timer tasks become deadlines; ``expire_locks(now_ms)`` runs
  every task whose deadline has passed, in deadline order, exactly as Kafka's timer would.
* DLQ. Kafka calls ``ShareGroupDLQManager.enqueue`` itself; here the ARCHIVING ranges are
  handed out by ``take_dlq_batches()`` and the caller reports ``archiving_done(first, last)``
  (Kafka's archive action plus the ARCHIVED write that follows it).
* Fetched data. ``acquire`` takes the batch boundaries of the log read (``FetchedBatch``), not
  the records: that is all Kafka's acquisition looks at. An ABORT control batch is flagged
  (``is_abort_marker``) since Kafka reads the marker's key to know it. Aborted transactions
  are ``(producer_id, first_offset, ...)`` tuples (extra fields, such as a last offset, are
  ignored, as Kafka's ``AbortedTransaction`` has only those two). Control batches are acquired
  like any offsets, as in Kafka: the client skips their records and acknowledges
  the acquired offsets it found no record for as GAP (Kafka's ``ShareCompletedFetch``).
* Configuration. Kafka reads the group's configs (``share.record.lock.duration.ms``, ...) from
  its config provider on each call; here they come from ``self.config``, which a caller may
  replace when a group config changes.
* Failed initialization raises ``IllegalStateError`` (Kafka's ``IllegalStateException``) and
  leaves the partition FAILED (a FAILED or FENCED partition is dropped and made anew, as
  Kafka's SharePartitionManager does).
* A persisted ACQUIRED record loads as AVAILABLE. Kafka never writes ACQUIRED (acquisition is
  not persisted); it would load one as ACQUIRED with no owner and no lock.
* Kafka's own quirks are kept: the persisted start offset is the one before the change a
  write carries (the advance goes out with the next write); archiving aborted or vanished
  records is not written; the delivery-complete count can drift (records archived below a
  moved start offset are counted; a rollback after the lock ran out archives at the limit
  without counting, and without the DLQ).
* Beyond the design's interface: ``acquire`` also takes ShareFetch's ``batch_size`` and
  ``acquire_mode`` (KIP-1206's RECORD_LIMIT), the ``fetch_offset`` the log read started at
  (Kafka archives AVAILABLE records the read skipped: compaction) and an ``isolation_level``;
  ``release_acquired_records`` returns the error code; ``leader_epoch`` (constructor),
  ``mark_fenced``, ``num_in_flight_records``, ``pending_write_count``, ``record_states``.
* Two Kafka 4.4 bugs are not ported. An acknowledgement straddling the start offset when no
  in-flight batch starts at or before it throws NullPointerException out of Kafka's
  ``acknowledge`` (the request fails; that request's earlier changes stay mid-transition):
  here it is UNKNOWN_SERVER_ERROR with those changes rolled back. ``canMoveStartOffset``
  throws NullPointerException when the start offset lies past the end of a split batch (the
  log start moved into a hole), inside a write's completion, which drops that write's DLQ
  hand-off (the records stay ARCHIVING): here the start offset just does not move.
* ``share.auto.offset.reset``: the caller answers the offset (``offset_for_reset``), as Kafka's
  PartitionMetadataProvider does; ``auto_offset_reset_timestamp_ms`` turns
  ``by_duration:<ISO-8601 duration>`` into the timestamp Kafka looks up.
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from seglog import error_codes as codes
from seglog.errors import IllegalStateError, InvalidRecordError
from seglog.format import CONTROL_TYPE_ABORT as _CONTROL_TYPE_ABORT

__all__ = [
    "AckBatch",
    "AcknowledgeType",
    "AcquiredRecords",
    "DeliveryCountOps",
    "DlqBatch",
    "FetchedBatch",
    "RecordState",
    "ShareAcquireMode",
    "SharePartition",
    "SharePartitionConfig",
    "SharePartitionState",
    "ShareState",
    "StateBatch",
    "EMPTY_MEMBER_ID",
    "auto_offset_reset_timestamp_ms",
    "parse_auto_offset_reset",
    "DLQ_CAUSE_CLIENT_REJECT",
    "DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED",
]

#: Kafka's ``InFlightState.EMPTY_MEMBER_ID``: the owner of records nobody holds.
EMPTY_MEMBER_ID = ""
#: ``DlqBatch.cause`` for records a client rejected (Kafka's ``ShareGroupDLQManager.CLIENT_REJECT``).
DLQ_CAUSE_CLIENT_REJECT = "CLIENT_REJECT"
#: ``DlqBatch.cause`` for records delivered ``delivery_count_limit`` times.
DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED = "DELIVERY_COUNT_EXCEEDED"
# Kafka's MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT.
_MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT = 2
# RecordBatch.NO_PRODUCER_ID.
_NO_PRODUCER_ID = -1


class RecordState(IntEnum):
    """The state of an in-flight record (Kafka's ``RecordState``; ids as persisted)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """How a client acknowledges a record (ids as on the wire; GAP is 0 in ShareAcknowledge)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class DeliveryCountOps(IntEnum):
    """What a state transition does to the delivery count (Kafka's ``DeliveryCountOps``)."""

    INCREASE = 0
    DECREASE = 1
    NO_OP = 2


class ShareAcquireMode(IntEnum):
    """ShareFetch v2's ``ShareAcquireMode`` (KIP-1206)."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


class SharePartitionState(IntEnum):
    """The life of a share partition (Kafka's ``SharePartition.SharePartitionState``)."""

    EMPTY = 0
    INITIALIZING = 1
    ACTIVE = 2
    FAILED = 3
    FENCED = 4


@dataclass(frozen=True)
class StateBatch:
    """A range of offsets in one state (Kafka's ``PersisterStateBatch``)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareState:
    """What a persister reads and writes (Read/WriteShareGroupState). In a write, ``batches``
    are the ranges that changed (Kafka sends deltas; the share coordinator merges them)."""

    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    leader_epoch: int = -1
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class SharePartitionConfig:
    """The group configs a share partition reads (Kafka 4.4's names and defaults:
    share.record.lock.duration.ms, share.delivery.count.limit, share.partition.max.record.locks,
    share.auto.offset.reset, share.isolation.level, share.renew.acknowledge.enable; DLQ is on
    when the group has errors.deadletterqueue.topic.name and the broker allows it)."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_in_flight_records: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    dlq_enabled: bool = False
    renew_acknowledge_enable: bool = True

    @classmethod
    def from_group_configs(cls, effective: Callable[[str], str | None], *,
                           dlq_allowed: bool = True) -> SharePartitionConfig:
        """From a group's effective configs by Kafka's names (``effective(name)``: the group's
        value, else the broker default, else None). The DLQ is on when the broker allows it
        (``dlq_allowed``) and the group names a topic in errors.deadletterqueue.topic.name
        (Kafka's ``isDLQEnabledForGroup``). ValueError for a value that does not parse."""
        defaults = cls()

        def integer(name: str, default: int) -> int:
            value = effective(name)
            return default if value is None or value == "" else int(value)

        def boolean(name: str, default: bool) -> bool:
            value = effective(name)
            if value is None or value == "":
                return default
            if value.strip().lower() not in ("true", "false"):
                raise ValueError(f"{name}: expected true or false, got {value!r}")
            return value.strip().lower() == "true"

        reset = effective("share.auto.offset.reset") or defaults.auto_offset_reset
        parse_auto_offset_reset(reset)
        isolation = effective("share.isolation.level") or defaults.isolation_level
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"share.isolation.level: unknown value {isolation!r}")
        return cls(
            record_lock_duration_ms=integer("share.record.lock.duration.ms",
                                            defaults.record_lock_duration_ms),
            delivery_count_limit=integer("share.delivery.count.limit",
                                         defaults.delivery_count_limit),
            max_in_flight_records=integer("share.partition.max.record.locks",
                                          defaults.max_in_flight_records),
            auto_offset_reset=reset,
            isolation_level=isolation,
            dlq_enabled=dlq_allowed and bool(effective("errors.deadletterqueue.topic.name")),
            renew_acknowledge_enable=boolean("share.renew.acknowledge.enable",
                                             defaults.renew_acknowledge_enable),
        )


@dataclass(frozen=True)
class FetchedBatch:
    """One record batch of the log read a fetch acquires from: its offsets and what
    read_committed filtering needs. ``is_abort_marker``: a control batch holding an ABORT."""

    base_offset: int
    last_offset: int
    producer_id: int = _NO_PRODUCER_ID
    is_transactional: bool = False
    is_control: bool = False
    is_abort_marker: bool = False

    @classmethod
    def of(cls, batch: Any) -> FetchedBatch:
        """From a codec ``Batch`` (``seglog._native.codec.Batch`` or its pure twin): a control
        batch whose record key does not parse is not an ABORT marker (Kafka would fail the
        fetch; a bad marker must not stop the queue)."""
        abort = False
        if batch.is_control:
            try:
                abort = batch.control_type(check_crcs=False) == _CONTROL_TYPE_ABORT
            except InvalidRecordError:
                abort = False
        return cls(batch.base_offset, batch.last_offset, batch.producer_id,
                   batch.is_transactional, batch.is_control, abort)


@dataclass(frozen=True)
class AcquiredRecords:
    """A range handed to a member (ShareFetchResponse's ``AcquiredRecords``)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AckBatch:
    """An acknowledgement range (Kafka's ``ShareAcknowledgementBatch``): one type for the whole
    range, or one type per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True)
class DlqBatch:
    """Records now ARCHIVING, to be written to the group's dead-letter topic."""

    first_offset: int
    last_offset: int
    delivery_count: int
    cause: str


# --- InFlightState / InFlightBatch / AcquisitionLockTimerTask --------------------------------


class _LockTask:
    """An acquisition lock (Kafka's ``AcquisitionLockTimerTask``): when it fires, the records
    of [first_offset, last_offset] still ACQUIRED go back to AVAILABLE (or ARCHIVED)."""

    __slots__ = ("deadline_ms", "member_id", "first_offset", "last_offset", "cancelled",
                 "expired")

    def __init__(self, deadline_ms: int, member_id: str, first_offset: int,
                 last_offset: int) -> None:
        self.deadline_ms = deadline_ms
        self.member_id = member_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.cancelled = False
        self.expired = False


class _RollbackState:
    """Kafka's ``InFlightState.RollbackState``: the state before a transition."""

    __slots__ = ("state", "delivery_count", "member_id", "max_delivery_count")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str,
                 max_delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.max_delivery_count = max_delivery_count


class _InFlightState:
    """Kafka's ``InFlightState``: state, delivery count, owner, lock, rollback point."""

    __slots__ = ("state", "delivery_count", "member_id", "lock_task", "rollback",
                 "is_terminal")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str,
                 lock_task: _LockTask | None = None) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock_task = lock_task
        self.rollback: _RollbackState | None = None
        self.is_terminal = False

    def __repr__(self) -> str:
        return (f"InFlightState(state={self.state.name}, deliveryCount={self.delivery_count}, "
                f"memberId={self.member_id})")

    def has_ongoing_state_transition(self) -> bool:
        """A change waits for its write (it can be rolled back)."""
        return self.rollback is not None

    def update_lock_task(self, task: _LockTask) -> None:
        """Hold ``task`` as the lock; Kafka refuses to replace a live one."""
        if self.lock_task is not None:
            raise IllegalStateError("Existing acquisition lock timeout exists, cannot override.")
        self.lock_task = task

    def cancel_lock_task(self) -> None:
        """Drop the lock (it will not fire)."""
        if self.lock_task is not None:
            self.lock_task.cancelled = True
            self.lock_task = None

    def try_update_state(self, new_state: RecordState, ops: DeliveryCountOps,
                         max_delivery_count: int, new_member_id: str,
                         dlq_enabled: bool) -> _InFlightState | None:
        """Kafka's ``tryUpdateState``: None when the transition is not allowed."""
        if self.rollback is not None:
            return None
        if (new_state is RecordState.AVAILABLE and ops is not DeliveryCountOps.DECREASE
                and self.delivery_count >= max_delivery_count):
            new_state = RecordState.ARCHIVING if dlq_enabled else RecordState.ARCHIVED
        current = self.state
        # RecordState.validateTransition, inline (it runs once per record acknowledged).
        if current is new_state or current is RecordState.ACKNOWLEDGED \
                or current is RecordState.ARCHIVED \
                or (current is RecordState.AVAILABLE and new_state is not RecordState.ACQUIRED):
            return None
        self.state = new_state
        if new_state != RecordState.ARCHIVED:
            if ops == DeliveryCountOps.INCREASE:
                self.delivery_count += 1
            elif ops == DeliveryCountOps.DECREASE:
                self.delivery_count -= 1
        self.member_id = new_member_id
        return self

    def archive(self) -> None:
        """ARCHIVED for good, whatever the state and any pending transition."""
        self.is_terminal = True
        self.state = RecordState.ARCHIVED
        self.member_id = EMPTY_MEMBER_ID
        self.cancel_lock_task()

    def start_state_transition(self, new_state: RecordState, ops: DeliveryCountOps,
                               max_delivery_count: int, new_member_id: str,
                               dlq_enabled: bool) -> _InFlightState | None:
        """``try_update_state``, remembering the state before so the write's outcome can
        commit or roll it back."""
        previous = _RollbackState(self.state, self.delivery_count, self.member_id,
                                  max_delivery_count)
        updated = self.try_update_state(new_state, ops, max_delivery_count, new_member_id,
                                        dlq_enabled)
        if updated is not None:
            self.rollback = previous
        return updated

    def complete_state_transition(self, commit: bool) -> None:
        """The write finished: keep the change (``commit``) or go back (to AVAILABLE, or
        ARCHIVED at the limit, when the lock ran out meanwhile)."""
        rollback = self.rollback
        if not commit and not self.is_terminal and rollback is not None:
            task = self.lock_task
            if task is not None and task.expired:
                # The lock ran out while the write was pending: the records are nobody's.
                self.state = (RecordState.ARCHIVED
                              if rollback.delivery_count >= rollback.max_delivery_count
                              else RecordState.AVAILABLE)
                self.member_id = EMPTY_MEMBER_ID
                self.cancel_lock_task()
            else:
                self.state = rollback.state
                self.member_id = rollback.member_id
            self.rollback = None
        else:
            self.cancel_lock_task()
            self.rollback = None


_TERMINAL = frozenset((RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))


def _is_terminal(state: RecordState) -> bool:
    return state == RecordState.ACKNOWLEDGED or state == RecordState.ARCHIVED


class _InFlightBatch:
    """Kafka's ``InFlightBatch``: a batch state, or (after a partial operation) one state per
    offset, in offset order."""

    __slots__ = ("first_offset", "last_offset", "batch_state", "offset_state", "stable_upto")

    def __init__(self, first_offset: int, last_offset: int, state: _InFlightState) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.batch_state: _InFlightState | None = state
        # Holds every offset of [first_offset, last_offset] once set, in offset order.
        self.offset_state: dict[int, _InFlightState] | None = None
        # With offset states: every offset up to here is terminal with no transition going
        # on. That never changes back (terminal states have no way out), so scans for the
        # start offset's advance resume from here instead of the batch's first offset.
        self.stable_upto = first_offset - 1

    def offsets_in(self, low: int, high: int) -> Iterator[tuple[int, _InFlightState]]:
        """The offset states of [low, high] within this batch, in order (Kafka iterates the
        whole map and skips; the map holds every offset, so look them up directly)."""
        offsets = self.offset_state
        assert offsets is not None
        for offset in range(max(low, self.first_offset), min(high, self.last_offset) + 1):
            yield offset, offsets[offset]

    def __repr__(self) -> str:
        return (f"InFlightBatch(firstOffset={self.first_offset}, lastOffset={self.last_offset},"
                f" inFlightState={self.batch_state}, offsetState={self.offset_state})")

    @property
    def state(self) -> _InFlightState:
        """The whole batch's state (only while it has no per-offset states)."""
        if self.batch_state is None:
            raise IllegalStateError(
                "The batch state is not available as the offset state is maintained")
        return self.batch_state

    def init_offset_state_split(self, target_offset: int, deadline_ms: int,
                                tasks: _Timer) -> None:
        """Kafka's ``maybeInitializeOffsetStateUpdate(targetOffset, delayMs)``: offsets up to
        ``target_offset`` keep the batch's state (with their own lock), the rest are
        AVAILABLE with one delivery fewer."""
        if self.offset_state is not None:
            return
        batch = self.state
        offsets: dict[int, _InFlightState] = {}
        for offset in range(self.first_offset, self.last_offset + 1):
            if offset <= target_offset:
                task = tasks.add(deadline_ms, batch.member_id, offset, offset)
                offsets[offset] = _InFlightState(batch.state, batch.delivery_count,
                                                 batch.member_id, task)
            else:
                offsets[offset] = _InFlightState(RecordState.AVAILABLE,
                                                 batch.delivery_count - 1, EMPTY_MEMBER_ID)
        self.offset_state = offsets
        self.batch_state = None

    def init_offset_state(self, tasks: _Timer) -> None:
        """Kafka's ``maybeInitializeOffsetStateUpdate()``: one state per offset, each with its
        own lock ending when the batch's did."""
        if self.offset_state is not None:
            return
        batch = self.state
        task = batch.lock_task
        offsets: dict[int, _InFlightState] = {}
        for offset in range(self.first_offset, self.last_offset + 1):
            if task is not None:
                offsets[offset] = _InFlightState(
                    batch.state, batch.delivery_count, batch.member_id,
                    tasks.add(task.deadline_ms, batch.member_id, offset, offset))
            else:
                offsets[offset] = _InFlightState(batch.state, batch.delivery_count,
                                                 batch.member_id)
        if task is not None:
            batch.cancel_lock_task()
        self.offset_state = offsets
        self.batch_state = None


class _Timer:
    """Kafka's timer for acquisition locks, as a heap of deadlines (lazy cancellation)."""

    __slots__ = ("_heap", "_seq", "_compact_at")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, _LockTask]] = []
        self._seq = 0
        self._compact_at = 1024

    def add(self, deadline_ms: int, member_id: str, first_offset: int,
            last_offset: int) -> _LockTask:
        """A lock on [first_offset, last_offset] running out at ``deadline_ms``."""
        task = _LockTask(deadline_ms, member_id, first_offset, last_offset)
        self._seq += 1
        heap = self._heap
        heapq.heappush(heap, (deadline_ms, self._seq, task))
        if len(heap) > self._compact_at:
            # Cancelled locks (acknowledged records) leave the heap only from its top; a
            # caller that never expires locks would let them pile up.
            self._heap = heap = [entry for entry in heap if not entry[2].cancelled]
            heapq.heapify(heap)
            self._compact_at = max(1024, 2 * len(heap))
        return task

    def _drop_cancelled(self) -> None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)

    def next_deadline_ms(self) -> int | None:
        """The earliest live lock's deadline."""
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now_ms: int) -> _LockTask | None:
        """The next live lock due by ``now_ms`` (deadline, then creation order), or None."""
        self._drop_cancelled()
        heap = self._heap
        if heap and heap[0][0] <= now_ms:
            return heapq.heappop(heap)[2]
        return None



# --- pending writes --------------------------------------------------------------------------


class _Transition:
    """Kafka's ``PersisterBatch``: a state changed in a transition, the batch written for it."""

    __slots__ = ("state", "batch", "dlq_cause")

    def __init__(self, state: _InFlightState, batch: StateBatch, dlq_cause: str | None) -> None:
        self.state = state
        self.batch = batch
        self.dlq_cause = dlq_cause


class _DlqEntry:
    __slots__ = ("archive", "first_offset", "last_offset", "delivery_count", "cause")

    def __init__(self, archive: Callable[[], None], first_offset: int, last_offset: int,
                 delivery_count: int, cause: str) -> None:
        self.archive = archive
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.delivery_count = delivery_count
        self.cause = cause


_WRITE_TRANSITION = 0   # acknowledge / release: commit or roll back on completion
_WRITE_TIMEOUT = 1      # lock expiry: no rollback; DLQ the ARCHIVING ones afterwards
_WRITE_ARCHIVED = 2     # the ARCHIVED write after the DLQ: nothing to undo


class _PendingWrite:
    __slots__ = ("seq", "state", "kind", "transitions", "dlq")

    def __init__(self, seq: int, state: ShareState, kind: int,
                 transitions: list[_Transition] | None, dlq: list[_DlqEntry] | None) -> None:
        self.seq = seq
        self.state = state
        self.kind = kind
        self.transitions = transitions
        self.dlq = dlq


class _AckError(Exception):
    """An acknowledgement or release failure carrying Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# --- the share partition ----------------------------------------------------------------------


class SharePartition:
    """The in-flight records of one share group on one topic partition (Kafka's
    ``SharePartition``). Call ``initialize`` once, then ``acquire`` / ``acknowledge`` /
    ``release_acquired_records`` / ``expire_locks``, persisting ``pending_write()`` after each."""

    def __init__(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int,
                 config: SharePartitionConfig, *, leader_epoch: int = -1) -> None:
        self.group_id = group_id
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        #: The group's configs; replace it when a group config changes.
        self.config = config
        self.leader_epoch = leader_epoch
        #: Offsets before it are done (ACKNOWLEDGED or ARCHIVED), or were never to be read.
        self.start_offset = 0
        #: The last offset in flight (``start_offset`` when nothing is in flight).
        self.end_offset = 0
        #: The state epoch read from the persister.
        self.state_epoch = 0
        #: Kafka's ``SharePartitionState``.
        self.partition_state = SharePartitionState.EMPTY
        #: Records at or after ``start_offset`` in a terminal state (KIP-1226).
        self.delivery_complete_count = 0
        # Kafka's cachedState: a sorted map first offset -> InFlightBatch.
        self._keys: list[int] = []
        self._cache: dict[int, _InFlightBatch] = {}
        self._find_next_fetch_offset = False
        # Kafka's persisterReadResultGapWindow: (end_offset, gap_start_offset) or None.
        self._gap_window: list[int] | None = None
        self._timer = _Timer()
        self._writes: deque[_PendingWrite] = deque()
        self._write_seq = 0
        self._dlq_ready: list[_DlqEntry] = []
        self._dlq_waiting: dict[tuple[int, int], list[_DlqEntry]] = {}

    def __repr__(self) -> str:
        return (f"SharePartition({self.group_id}, {self.topic}-{self.partition}, "
                f"start={self.start_offset}, end={self.end_offset}, "
                f"batches={len(self._keys)})")

    # --- the sorted map --------------------------------------------------------------------

    def _floor(self, offset: int) -> _InFlightBatch | None:
        i = bisect.bisect_right(self._keys, offset)
        return self._cache[self._keys[i - 1]] if i else None

    def _sub_map(self, low: int, high: int) -> list[_InFlightBatch]:
        """Batches whose first offset is in [low, high]."""
        keys = self._keys
        i = bisect.bisect_left(keys, low)
        j = bisect.bisect_right(keys, high)
        cache = self._cache
        return [cache[k] for k in keys[i:j]]

    def _put(self, batch: _InFlightBatch) -> None:
        key = batch.first_offset
        if key not in self._cache:
            keys = self._keys
            if not keys or keys[-1] < key:
                keys.append(key)
            else:
                bisect.insort(keys, key)
        self._cache[key] = batch

    def _last_batch(self) -> _InFlightBatch:
        return self._cache[self._keys[-1]]

    def _iter_batches(self) -> Iterator[_InFlightBatch]:
        cache = self._cache
        for key in list(self._keys):
            batch = cache.get(key)
            if batch is not None:
                yield batch

    def _remove_through(self, last_key: int) -> None:
        """Drop every batch whose first offset is <= last_key."""
        j = bisect.bisect_right(self._keys, last_key)
        for key in self._keys[:j]:
            del self._cache[key]
        del self._keys[:j]

    def _clear(self) -> None:
        self._keys.clear()
        self._cache.clear()

    # --- configuration ----------------------------------------------------------------------

    def _max_delivery_count(self) -> int:
        return self.config.delivery_count_limit

    def _dlq_enabled(self) -> bool:
        return self.config.dlq_enabled

    def _lock(self, member_id: str, first_offset: int, last_offset: int,
              now_ms: int) -> _LockTask:
        return self._timer.add(now_ms + self.config.record_lock_duration_ms, member_id,
                               first_offset, last_offset)

    # --- initialization (maybeInitialize) --------------------------------------------------

    def initialize(self, persisted: ShareState | None, *, log_start_offset: int,
                   log_end_offset: int,
                   offset_for_reset: Callable[[str], int] | None = None) -> None:
        """Load the persisted state (Kafka's ``maybeInitialize`` after ReadShareGroupState).
        With none (or a start offset of -1) the start offset comes from
        ``config.auto_offset_reset``: latest / earliest, or ``by_duration:<ISO8601>`` asked of
        ``offset_for_reset(strategy)`` (which, when given, answers every strategy). ACQUIRED
        persisted records come back AVAILABLE (nobody holds them after a load); ARCHIVING ones
        are handed to the DLQ again."""
        if self.partition_state == SharePartitionState.ACTIVE:
            return
        if self.partition_state == SharePartitionState.FENCED:
            raise IllegalStateError(
                f"Share partition is fenced {self.group_id}-{self.topic}-{self.partition}")
        if self.partition_state == SharePartitionState.FAILED:
            raise IllegalStateError(
                f"Share partition failed to load {self.group_id}-{self.topic}-{self.partition}")
        self.partition_state = SharePartitionState.INITIALIZING
        try:
            self._load(persisted, log_start_offset, log_end_offset, offset_for_reset)
        except BaseException:
            self.partition_state = SharePartitionState.FAILED
            raise
        self.partition_state = SharePartitionState.ACTIVE

    def _load(self, persisted: ShareState | None, log_start_offset: int, log_end_offset: int,
              offset_for_reset: Callable[[str], int] | None) -> None:
        persisted_start = persisted.start_offset if persisted is not None else -1
        if persisted_start != -1:
            self.start_offset = persisted_start
        else:
            self.start_offset = self._reset_offset(log_start_offset, log_end_offset,
                                                   offset_for_reset)
        self.state_epoch = persisted.state_epoch if persisted is not None else 0
        batches = persisted.batches if persisted is not None else ()
        failure = f"Failed to initialize the share partition {self.group_id}-{self.topic_id}" \
                  f":{self.partition}"
        gap_start_offset = -1
        previous_last_offset = self.start_offset - 1
        dlq: list[_DlqEntry] = []
        self._clear()
        self.delivery_complete_count = 0
        for state_batch in batches:
            if state_batch.first_offset < self.start_offset:
                raise IllegalStateError(failure)
            if state_batch.last_offset < state_batch.first_offset:
                raise IllegalStateError(failure)
            if gap_start_offset == -1 and state_batch.first_offset > previous_last_offset + 1:
                gap_start_offset = previous_last_offset + 1
            previous_last_offset = state_batch.last_offset
            try:
                state = RecordState(state_batch.delivery_state)
            except ValueError:
                raise IllegalStateError(
                    f"Unknown record state id: {state_batch.delivery_state}") from None
            # Kafka never writes ACQUIRED (acquisition is not persisted) and would load one
            # as ACQUIRED with no owner and no lock, stuck; nobody can hold a record after a
            # load, so it is AVAILABLE here.
            if state == RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            batch = _InFlightBatch(state_batch.first_offset, state_batch.last_offset,
                                   _InFlightState(state, state_batch.delivery_count,
                                                  EMPTY_MEMBER_ID))
            self._put(batch)
            if _is_terminal(state):
                self.delivery_complete_count += (state_batch.last_offset
                                                 - state_batch.first_offset + 1)
            if state == RecordState.ARCHIVING:
                dlq.append(_DlqEntry(self._batch_archiver(batch), state_batch.first_offset,
                                     state_batch.last_offset, state_batch.delivery_count, ""))
        if self._keys:
            self._find_next_fetch_offset = True
            self.end_offset = self._last_batch().last_offset
            if gap_start_offset != -1:
                self._gap_window = [self.end_offset, gap_start_offset]
            self._maybe_update_cached_state_and_offsets()
        else:
            self.end_offset = self.start_offset
        # maybeResumeDlqArchiving
        for entry in dlq:
            entry.cause = (DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED
                           if entry.delivery_count >= self._max_delivery_count()
                           else DLQ_CAUSE_CLIENT_REJECT)
            self._dlq_ready.append(entry)

    def _reset_offset(self, log_start_offset: int, log_end_offset: int,
                      offset_for_reset: Callable[[str], int] | None) -> int:
        """Kafka's ``startOffsetDuringInitialization`` for a partition never written."""
        strategy = self.config.auto_offset_reset
        try:
            kind, _duration_ms = parse_auto_offset_reset(strategy)
        except ValueError as exc:
            raise IllegalStateError(str(exc)) from None
        if offset_for_reset is not None:
            return offset_for_reset(strategy)
        if kind == "latest":
            return log_end_offset
        if kind == "earliest":
            return log_start_offset
        raise IllegalStateError(
            f"share.auto.offset.reset {strategy!r} needs an offset_for_reset callback")

    def _batch_archiver(self, batch: _InFlightBatch) -> Callable[[], None]:
        def archive() -> None:
            if batch.batch_state is not None:
                batch.batch_state.archive()
            else:
                # Kafka's archiveBatch would throw here; archive what was ARCHIVING.
                for state in (batch.offset_state or {}).values():
                    if state.state == RecordState.ARCHIVING:
                        state.archive()
        return archive

    def mark_fenced(self) -> None:
        """Kafka's ``markFenced``: the partition is no longer usable (leader moved)."""
        self.partition_state = SharePartitionState.FENCED

    # --- next fetch offset ------------------------------------------------------------------

    def _gap_window_active(self) -> bool:
        window = self._gap_window
        return window is not None and window[0] == self.end_offset

    def next_fetch_offset(self) -> int:
        """The offset the next log read starts from (Kafka's ``nextFetchOffset``)."""
        if not self._find_next_fetch_offset:
            if self._keys and self.start_offset <= self._last_batch().last_offset:
                return self.end_offset + 1
            return self.end_offset
        if not self._keys or self.start_offset > self._last_batch().last_offset:
            self._find_next_fetch_offset = False
            return self.end_offset
        next_offset = -1
        gap_active = self._gap_window_active()
        gap_start = self._gap_window[1] if gap_active and self._gap_window else -1
        for batch in self._iter_batches():
            if gap_active:
                if batch.first_offset > gap_start:
                    next_offset = gap_start
                    break
                gap_start = max(batch.last_offset + 1, gap_start)
            if batch.offset_state is None:
                state = batch.state
                if state.state == RecordState.AVAILABLE and state.rollback is None:
                    next_offset = batch.first_offset
                    break
            else:
                for offset, state in batch.offset_state.items():
                    if state.state == RecordState.AVAILABLE and state.rollback is None:
                        next_offset = offset
                        break
                if next_offset != -1:
                    break
        if next_offset == -1:
            self._find_next_fetch_offset = False
            next_offset = self.end_offset + 1
        return next_offset

    def num_in_flight_records(self) -> int:
        """Records between the start and end offsets (Kafka's ``numInFlightRecords``)."""
        if not self._keys:
            return 0
        return self.end_offset - self.start_offset + 1

    def can_acquire_records(self) -> bool:
        """Whether a fetch could acquire anything (Kafka's ``canAcquireRecords``)."""
        if self.next_fetch_offset() != self.end_offset + 1:
            return True
        return self.num_in_flight_records() < self.config.max_in_flight_records

    # --- acquire ----------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Sequence[FetchedBatch], *, max_records: int,
                now_ms: int, aborted_producer_ranges: Sequence[Sequence[int]] = (),
                batch_size: int | None = None,
                acquire_mode: ShareAcquireMode = ShareAcquireMode.BATCH_OPTIMIZED,
                fetch_offset: int | None = None,
                isolation_level: str | None = None) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the records of a log read (Kafka's ``acquire``):
        ``batches`` are the read's record batches from ``fetch_offset`` (default: the first
        batch's base offset; pass the ``next_fetch_offset()`` the read started from),
        ``max_records`` the records the fetch may still take, ``batch_size`` ShareFetch's
        BatchSize (default: ``max_records``). In read_committed (``isolation_level``, default
        ``config.isolation_level``) the batches of aborted transactions are archived and left
        out. Returns the acquired ranges with their delivery counts.

        Raises IllegalStateError where Kafka's ``acquire`` throws (its fetch then fails for
        the partition): a read cut by the in-flight limit before its first batch, an aborted
        batch below the cache, or (a Kafka bug, kept) an offset split off a batch in the
        middle of a pending write still holding that batch's lock."""
        if self.partition_state != SharePartitionState.ACTIVE or max_records <= 0 \
                or not batches:
            return []
        record_limit = acquire_mode == ShareAcquireMode.RECORD_LIMIT
        if batch_size is None or batch_size <= 0:
            batch_size = max_records
        first_batch = batches[0]
        last_batch = batches[-1]
        if fetch_offset is None:
            fetch_offset = first_batch.base_offset
        if isolation_level is None:
            isolation_level = self.config.isolation_level
        if last_batch.last_offset < self.start_offset:
            return []
        last_to_acquire, max_to_acquire = self._last_offset_and_max_records(
            fetch_offset, max_records, last_batch.last_offset)
        if max_to_acquire <= 0:
            return []
        base_offset = first_batch.base_offset
        self._maybe_archive_stale_batches(fetch_offset, base_offset)
        floor = self._floor(base_offset)
        if floor is None:
            if base_offset < self.start_offset:
                base_offset = self.start_offset
        elif floor.last_offset >= base_offset:
            base_offset = floor.first_offset
        low = min(first_batch.base_offset, base_offset)
        if low > last_to_acquire:
            # At the in-flight limit the read is cut at the end offset, which can fall before
            # the read's first batch (a hole after it): Kafka's subMap throws
            # IllegalArgumentException ("inconsistent range") and the fetch fails.
            raise IllegalStateError("inconsistent range")
        sub_map = self._sub_map(low, last_to_acquire)
        if not sub_map:
            result, _ = self._acquire_new_batch_records(
                member_id, batches, record_limit, base_offset, last_to_acquire, batch_size,
                max_to_acquire, now_ms)
            return self._maybe_filter_aborted(batches, isolation_level,
                                              aborted_producer_ranges, result)
        result = []
        acquired_count = 0
        maybe_gap_start = base_offset
        request_first = first_batch.base_offset
        for in_flight in sub_map:
            if acquired_count >= max_to_acquire:
                break
            if self._gap_window_active():
                if maybe_gap_start < in_flight.first_offset:
                    records, count = self._acquire_new_batch_records(
                        member_id, batches, record_limit, maybe_gap_start,
                        in_flight.first_offset - 1, batch_size,
                        max_to_acquire - acquired_count, now_ms)
                    result.extend(records)
                    acquired_count += count
                maybe_gap_start = in_flight.last_offset + 1
                if acquired_count >= max_to_acquire:
                    break
            full_match = (in_flight.first_offset >= request_first
                          and in_flight.last_offset <= last_to_acquire)
            remaining = max_to_acquire - acquired_count
            record_limit_subset = record_limit and (
                in_flight.last_offset - in_flight.first_offset + 1 > remaining)
            throttle = self._should_throttle(in_flight, request_first, last_to_acquire)
            if throttle and acquired_count > 0:
                max_to_acquire = 0
                break
            if (full_match and in_flight.offset_state is None and not record_limit_subset
                    and not throttle):
                state = in_flight.state
                if state.state == RecordState.AVAILABLE and state.rollback is None:
                    updated = state.try_update_state(
                        RecordState.ACQUIRED, DeliveryCountOps.INCREASE,
                        self._max_delivery_count(), member_id, self._dlq_enabled())
                    if updated is not None and updated.state == RecordState.ACQUIRED:
                        state.update_lock_task(self._lock(
                            member_id, in_flight.first_offset, in_flight.last_offset, now_ms))
                        result.append(AcquiredRecords(in_flight.first_offset,
                                                      in_flight.last_offset,
                                                      state.delivery_count))
                        acquired_count += in_flight.last_offset - in_flight.first_offset + 1
            else:
                if in_flight.offset_state is None:
                    state = in_flight.state
                    if state.state != RecordState.AVAILABLE or state.rollback is not None:
                        continue
                    in_flight.init_offset_state(self._timer)
                subset = self._acquire_subset_batch_records(
                    member_id, record_limit, remaining, request_first, last_to_acquire,
                    in_flight, result, now_ms)
                acquired_count += subset
                if throttle and subset > 0:
                    max_to_acquire = 0
                    break
        last_cached = sub_map[-1].last_offset
        if acquired_count < max_to_acquire and last_cached < last_to_acquire:
            records, count = self._acquire_new_batch_records(
                member_id, batches, record_limit, last_cached + 1, last_to_acquire,
                batch_size, max_to_acquire - acquired_count, now_ms)
            result.extend(records)
            acquired_count += count
        if not result:
            return result
        self._maybe_update_gap_window_start(result[-1].last_offset + 1)
        return self._maybe_filter_aborted(batches, isolation_level, aborted_producer_ranges,
                                          result)

    def _last_offset_and_max_records(self, fetch_offset: int, max_fetch_records: int,
                                     last_offset: int) -> tuple[int, int]:
        """Kafka's ``lastOffsetAndMaxRecordsToAcquire``: the in-flight limit."""
        max_in_flight = self.config.max_in_flight_records
        in_flight = self.num_in_flight_records()
        max_records = min(max_fetch_records, max_in_flight - in_flight)
        if max_records <= 0 and fetch_offset <= self.end_offset:
            # At the limit, but the fetch is between in-flight batches: take from those only.
            max_records = min(max_fetch_records, self.end_offset - fetch_offset + 1)
            last_offset = min(last_offset, self.end_offset)
        return last_offset, max_records

    def _maybe_archive_stale_batches(self, fetch_offset: int, base_offset: int) -> None:
        """Kafka's ``maybeArchiveStaleBatches``: AVAILABLE records between the fetch offset and
        the log read's first batch are gone from the log (compaction): archive them."""
        if not self._keys or fetch_offset >= base_offset:
            return
        floor_offset = fetch_offset
        floor = self._floor(fetch_offset)
        if floor is not None and floor.last_offset >= fetch_offset:
            floor_offset = floor.first_offset
        sub_map = self._sub_map(floor_offset, base_offset - 1)
        if sub_map and self._archive_records(fetch_offset, base_offset, sub_map,
                                             RecordState.AVAILABLE, True):
            self._find_next_fetch_offset = True

    def _acquire_new_batch_records(self, member_id: str, batches: Sequence[FetchedBatch],
                                   record_limit: bool, first_offset: int, last_offset: int,
                                   batch_size: int, max_fetch_records: int,
                                   now_ms: int) -> tuple[list[AcquiredRecords], int]:
        """Kafka's ``acquireNewBatchRecords``: records never in flight before."""
        first_acquired = first_offset
        if not self._keys and self.end_offset > first_offset:
            first_acquired = self.end_offset
        last_acquired = last_offset
        if last_acquired < first_acquired:
            return [], 0  # nothing new (a read ending before the end offset)
        if max_fetch_records < last_offset - first_acquired + 1:
            last_acquired = _last_offset_of_batch_with(batches,
                                                       first_acquired + max_fetch_records - 1)
            if self._gap_window_active() and last_acquired > last_offset:
                last_acquired = last_offset
        acquired = self._create_batches(member_id, batches, record_limit, max_fetch_records,
                                        first_acquired, last_acquired, batch_size, now_ms)
        if self._keys[0] == first_acquired:
            self.start_offset = first_acquired
        if last_acquired > self.end_offset:
            self.end_offset = last_acquired
        if record_limit:
            last_acquired = acquired[0].last_offset
        self._maybe_update_gap_window_start(last_acquired + 1)
        return acquired, last_acquired - first_acquired + 1

    def _create_batches(self, member_id: str, batches: Sequence[FetchedBatch],
                        record_limit: bool, max_fetch_records: int, first_acquired: int,
                        last_acquired: int, batch_size: int,
                        now_ms: int) -> list[AcquiredRecords]:
        """Kafka's ``createBatches``: in-flight batches cut at log batch boundaries once
        ``batch_size`` records are reached."""
        ranges: list[tuple[int, int]] = []
        current_first = first_acquired
        if not record_limit and last_acquired - first_acquired + 1 > batch_size:
            for batch in batches:
                base = batch.base_offset
                if base > last_acquired:
                    break
                if base - current_first >= batch_size:
                    ranges.append((current_first, base - 1))
                    current_first = base
        ranges.append((current_first, last_acquired))
        if record_limit:
            first, last = ranges[0]
            if last - first + 1 > max_fetch_records:
                in_flight = _InFlightBatch(first, last, _InFlightState(
                    RecordState.ACQUIRED, 1, member_id))
                target = first + max_fetch_records - 1
                in_flight.init_offset_state_split(
                    target, now_ms + self.config.record_lock_duration_ms, self._timer)
                self._find_next_fetch_offset = True
                self._put(in_flight)
                return [AcquiredRecords(first, target, 1)]
        result = []
        for first, last in ranges:
            self._put(_InFlightBatch(first, last, _InFlightState(
                RecordState.ACQUIRED, 1, member_id, self._lock(member_id, first, last, now_ms))))
            result.append(AcquiredRecords(first, last, 1))
        return result

    def _acquire_subset_batch_records(self, member_id: str, record_limit: bool,
                                      max_fetch_records: int, request_first: int,
                                      request_last: int, in_flight: _InFlightBatch,
                                      result: list[AcquiredRecords], now_ms: int) -> int:
        """Kafka's ``acquireSubsetBatchRecords``: per-offset acquisition in a split batch."""
        acquired_count = 0
        max_while_throttled = -1
        throttled = False
        max_delivery = self._max_delivery_count()
        throttle_limit = _throttle_records_delivery_limit(max_delivery)
        dlq = self._dlq_enabled()
        offsets = in_flight.offset_state
        assert offsets is not None
        acquired: list[AcquiredRecords] = []
        for offset, state in in_flight.offsets_in(request_first, request_last):
            if state.state != RecordState.AVAILABLE or state.rollback is not None:
                continue
            count = state.delivery_count
            if max_delivery > 2 and count == max_delivery - 1 and acquired_count > 0:
                # The record's last delivery goes alone, in the next fetch.
                break
            if count >= throttle_limit and max_while_throttled < 0:
                max_while_throttled = max(1, len(offsets) >> (count - throttle_limit + 1))
                throttled = True
            updated = state.try_update_state(RecordState.ACQUIRED, DeliveryCountOps.INCREASE,
                                             max_delivery, member_id, dlq)
            if updated is None or updated.state != RecordState.ACQUIRED:
                continue
            state.update_lock_task(self._lock(member_id, offset, offset, now_ms))
            acquired.append(AcquiredRecords(offset, offset, state.delivery_count))
            acquired_count += 1
            if state.delivery_count == max_delivery and max_delivery > 2:
                break
            if record_limit and acquired_count == max_fetch_records:
                break
            if throttled and acquired_count == max_while_throttled:
                break
        _accumulate_acquired_records(result, acquired)
        return acquired_count

    def _should_throttle(self, in_flight: _InFlightBatch, request_first: int,
                         request_last: int) -> bool:
        """Kafka's ``shouldThrottleRecordsDelivery``: records delivered many times go out in
        smaller and smaller groups."""
        limit = _throttle_records_delivery_limit(self._max_delivery_count())
        if in_flight.offset_state is None:
            state = in_flight.state
            if state.state == RecordState.AVAILABLE and state.rollback is None:
                return state.delivery_count >= limit
            return False
        highest = 0
        for _offset, state in in_flight.offsets_in(request_first, request_last):
            if state.state == RecordState.AVAILABLE and state.rollback is None \
                    and state.delivery_count > highest:
                highest = state.delivery_count
        return highest >= limit

    def _maybe_update_gap_window_start(self, offset: int) -> None:
        window = self._gap_window
        if window is not None:
            if window[0] == self.end_offset and offset <= window[0]:
                window[1] = offset
            else:
                self._gap_window = None

    # --- read_committed ---------------------------------------------------------------------

    def _maybe_filter_aborted(self, batches: Sequence[FetchedBatch], isolation_level: str,
                              aborted: Sequence[Sequence[int]],
                              acquired: list[AcquiredRecords]) -> list[AcquiredRecords]:
        """Kafka's ``maybeFilterAbortedTransactionalAcquiredRecords``."""
        if isolation_level != "read_committed" or not aborted:
            return acquired
        to_archive = _aborted_transaction_batches(batches, aborted)
        for batch in to_archive:
            floor = self._floor(batch.base_offset)
            if floor is None:
                raise IllegalStateError(
                    "Batch record not found. The request batch offsets are not found in the "
                    "cache.")
            sub_map = self._sub_map(floor.first_offset, batch.last_offset)
            self._archive_records(batch.base_offset, batch.last_offset + 1, sub_map,
                                  RecordState.ACQUIRED, True)
        return _filter_batches_from_acquired(acquired, to_archive)

    # --- archiving ranges (LSO movement, compaction, aborted transactions) --------------------

    def _archive_records(self, start_offset: int, end_offset: int,
                         batches: Sequence[_InFlightBatch], initial_state: RecordState,
                         update_delivery_complete_count: bool) -> bool:
        """Kafka's ``archiveRecords``: archive the records of [start, end) in
        ``initial_state``."""
        any_archived = False
        for in_flight in batches:
            if in_flight.first_offset >= end_offset:
                break
            full_match = (in_flight.first_offset >= start_offset
                          and in_flight.last_offset <= end_offset - 1)
            if full_match and in_flight.offset_state is None:
                state = in_flight.state
                if state.state == initial_state:
                    state.archive()
                    if update_delivery_complete_count:
                        self.delivery_complete_count += (in_flight.last_offset
                                                         - in_flight.first_offset + 1)
                    any_archived = True
                continue
            if in_flight.offset_state is None:
                if in_flight.state.state != initial_state:
                    continue
                in_flight.init_offset_state(self._timer)
            for _offset, state in in_flight.offsets_in(start_offset, end_offset - 1):
                if state.state == initial_state:
                    state.archive()
                    if update_delivery_complete_count:
                        self.delivery_complete_count += 1
                    any_archived = True
        return any_archived

    # --- acknowledge ------------------------------------------------------------------------

    def acknowledge(self, member_id: str, acks: Sequence[AckBatch], *, now_ms: int) -> int:
        """Apply ``member_id``'s acknowledgements (Kafka's ``acknowledge``): all or nothing.
        Returns Kafka's error code (0: accepted; the change is then ``pending_write()``)."""
        transitions: list[_Transition] = []
        error = codes.NONE
        try:
            for ack in acks:
                types = ack.acknowledge_types
                for ack_type in types:
                    if not 0 <= ack_type <= 4:
                        raise _AckError(codes.INVALID_REQUEST,
                                        f"Invalid acknowledge type: {list(types)}")
                # KafkaApis refuses these before the partition sees them; never crash on them.
                if ack.last_offset < ack.first_offset or not types or (
                        len(types) > 1
                        and len(types) != ack.last_offset - ack.first_offset + 1):
                    raise _AckError(codes.INVALID_REQUEST,
                                    f"Invalid acknowledgement batch: {ack}")
                if ack.last_offset < self.start_offset:
                    continue  # already archived
                sub_map = self._sub_map_for_ack(ack)
                self._acknowledge_batch_records(member_id, ack, sub_map, transitions, now_ms)
        except _AckError as exc:
            error = exc.code
        self._rollback_or_enqueue(error, transitions)
        return error

    def _sub_map_for_ack(self, ack: AckBatch) -> list[_InFlightBatch]:
        """Kafka's ``fetchSubMapForAcknowledgementBatch``."""
        floor = self._floor(ack.first_offset)
        if floor is None:
            if not (ack.first_offset < self.start_offset <= ack.last_offset):
                raise _AckError(codes.INVALID_RECORD_STATE,
                                "Batch record not found. The request batch offsets are not "
                                "found in the cache.")
            floor = self._floor(self.start_offset)
            if floor is None:
                # Kafka dereferences the missing entry here (NullPointerException: the request
                # fails, UNKNOWN_SERVER_ERROR, and the request's earlier changes stay mid-
                # transition for good); the same code here, with those changes rolled back.
                raise _AckError(codes.UNKNOWN_SERVER_ERROR,
                                "Batch record not found. The start offset is not in the "
                                "cache.")
        sub_map = self._sub_map(floor.first_offset, ack.last_offset)
        if sub_map[-1].last_offset < ack.first_offset:
            raise _AckError(codes.INVALID_REQUEST,
                            "Batch record not found. The first offset in request is past "
                            "acquired records.")
        if ack.last_offset > sub_map[-1].last_offset:
            raise _AckError(codes.INVALID_REQUEST,
                            "Batch record not found. The last offset in request is past "
                            "acquired records.")
        return sub_map

    def _acknowledge_batch_records(self, member_id: str, ack: AckBatch,
                                   sub_map: list[_InFlightBatch],
                                   transitions: list[_Transition], now_ms: int) -> None:
        """Kafka's ``acknowledgeBatchRecords``."""
        per_offset_ack = len(ack.acknowledge_types) > 1
        for in_flight in sub_map:
            if in_flight.last_offset < self.start_offset:
                continue  # all archived
            if in_flight.offset_state is None:
                state = in_flight.state
                if state.member_id == EMPTY_MEMBER_ID:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "The batch cannot be acknowledged. The batch is not in "
                                    "the acquired state.")
                if state.member_id != member_id:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "Member is not the owner of batch record")
                if state.rollback is not None:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "The record state is invalid. The acknowledgement of "
                                    "delivery could not be completed.")
            full_match = (in_flight.first_offset >= ack.first_offset
                          and in_flight.last_offset <= ack.last_offset)
            start_moved = in_flight.first_offset < self.start_offset <= in_flight.last_offset
            if full_match and in_flight.offset_state is None and not per_offset_ack \
                    and not start_moved:
                self._acknowledge_complete_batch(in_flight, ack.acknowledge_types[0],
                                                 transitions, member_id, now_ms)
            else:
                if in_flight.offset_state is None:
                    if in_flight.state.state != RecordState.ACQUIRED:
                        raise _AckError(codes.INVALID_RECORD_STATE,
                                        "The batch cannot be acknowledged. The subset batch "
                                        "is not in the acquired state.")
                    in_flight.init_offset_state(self._timer)
                self._acknowledge_per_offset(member_id, ack, in_flight, transitions, now_ms)

    def _acknowledge_per_offset(self, member_id: str, ack: AckBatch, in_flight: _InFlightBatch,
                                transitions: list[_Transition], now_ms: int) -> None:
        """Kafka's ``acknowledgePerOffsetBatchRecords``."""
        types = ack.acknowledge_types
        per_offset = len(types) > 1
        max_delivery = self._max_delivery_count()
        dlq = self._dlq_enabled()
        offsets = in_flight.offset_state
        assert offsets is not None
        # The loop runs once per record of a per-offset acknowledgement: locals, not lookups.
        acquired, archiving = RecordState.ACQUIRED, RecordState.ARCHIVING
        renew = int(AcknowledgeType.RENEW)
        no_op = DeliveryCountOps.NO_OP
        state_for = {t: self._record_state_for_ack(t) for t in set(types) if t != renew}
        first = ack.first_offset
        append = transitions.append
        completed = 0
        try:
            for offset in range(max(first, self.start_offset, in_flight.first_offset),
                                min(ack.last_offset, in_flight.last_offset) + 1):
                state = offsets[offset]
                if state.state is not acquired:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "The offset cannot be acknowledged. The offset is not "
                                    "acquired.")
                if state.rollback is not None:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "The record state is invalid. The acknowledgement of "
                                    "delivery could not be completed.")
                if state.member_id != member_id:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "Member is not the owner of offset")
                ack_type = types[offset - first] if per_offset else types[0]
                if ack_type == renew:
                    if not self.config.renew_acknowledge_enable:
                        raise _AckError(codes.INVALID_RECORD_STATE,
                                        "Renewing acquisition locks is not enabled for the "
                                        "group.")
                    state.cancel_lock_task()
                    state.update_lock_task(self._lock(member_id, offset, offset, now_ms))
                    continue
                record_state = state_for[ack_type]
                cause = DLQ_CAUSE_CLIENT_REJECT if record_state is archiving else None
                updated = state.start_state_transition(record_state, no_op, max_delivery,
                                                       EMPTY_MEMBER_ID, dlq)
                if updated is None:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "Unable to acknowledge records for the batch")
                new_state = updated.state
                if cause is None and new_state is archiving:
                    cause = DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED
                append(_Transition(updated, StateBatch(offset, offset, int(new_state),
                                                       updated.delivery_count), cause))
                if new_state in _TERMINAL:
                    completed += 1
        finally:
            # Counted as Kafka does, per record, even when a later one fails (the rollback
            # takes them off again).
            self.delivery_complete_count += completed

    def _acknowledge_complete_batch(self, in_flight: _InFlightBatch, ack_type: int,
                                    transitions: list[_Transition], member_id: str,
                                    now_ms: int) -> None:
        """Kafka's ``acknowledgeCompleteBatch``."""
        state = in_flight.state
        if state.state != RecordState.ACQUIRED:
            raise _AckError(codes.INVALID_RECORD_STATE,
                            "The batch cannot be acknowledged. The batch is not in the "
                            "acquired state.")
        if ack_type == AcknowledgeType.RENEW:
            if not self.config.renew_acknowledge_enable:
                raise _AckError(codes.INVALID_RECORD_STATE,
                                "Renewing acquisition locks is not enabled for the group.")
            state.cancel_lock_task()
            state.update_lock_task(self._lock(member_id, in_flight.first_offset,
                                              in_flight.last_offset, now_ms))
            return
        record_state = self._record_state_for_ack(ack_type)
        cause = DLQ_CAUSE_CLIENT_REJECT if record_state == RecordState.ARCHIVING else None
        updated = state.start_state_transition(record_state, DeliveryCountOps.NO_OP,
                                               self._max_delivery_count(), EMPTY_MEMBER_ID,
                                               self._dlq_enabled())
        if updated is None:
            raise _AckError(codes.INVALID_RECORD_STATE,
                            "Unable to acknowledge records for the batch")
        if cause is None and updated.state == RecordState.ARCHIVING:
            cause = DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED
        transitions.append(_Transition(updated, StateBatch(
            in_flight.first_offset, in_flight.last_offset, int(updated.state),
            updated.delivery_count), cause))
        if _is_terminal(updated.state):
            self.delivery_complete_count += in_flight.last_offset - in_flight.first_offset + 1

    def _record_state_for_ack(self, ack_type: int) -> RecordState:
        """Kafka's ``recordStateWithDlq`` over ``ACK_TYPE_TO_RECORD_STATE``."""
        if ack_type == AcknowledgeType.REJECT and self._dlq_enabled():
            return RecordState.ARCHIVING
        if ack_type == AcknowledgeType.ACCEPT:
            return RecordState.ACKNOWLEDGED
        if ack_type == AcknowledgeType.RELEASE:
            return RecordState.AVAILABLE
        return RecordState.ARCHIVED  # GAP, REJECT

    # --- release (member left) --------------------------------------------------------------

    def release_acquired_records(self, member_id: str, *, now_ms: int) -> int:
        """Make every record ``member_id`` holds AVAILABLE again (ARCHIVED at the delivery
        limit), as Kafka's ``releaseAcquiredRecords`` when a member leaves. Returns Kafka's
        error code; the change is ``pending_write()``."""
        del now_ms  # the release itself does not depend on time; kept for the interface
        transitions: list[_Transition] = []
        error = codes.NONE
        max_delivery = self._max_delivery_count()
        dlq = self._dlq_enabled()
        try:
            for in_flight in self._iter_batches():
                if in_flight.offset_state is None:
                    state = in_flight.state
                    if state.state == RecordState.ACQUIRED and state.member_id == member_id \
                            and in_flight.first_offset < self.start_offset \
                            <= in_flight.last_offset:
                        in_flight.init_offset_state(self._timer)
                if in_flight.offset_state is not None:
                    for offset, state in in_flight.offset_state.items():
                        if state.member_id != member_id and state.member_id != EMPTY_MEMBER_ID:
                            continue
                        if state.state != RecordState.ACQUIRED:
                            continue
                        target = (RecordState.ARCHIVED if offset < self.start_offset
                                  else RecordState.AVAILABLE)
                        updated = state.start_state_transition(
                            target, DeliveryCountOps.NO_OP, max_delivery, EMPTY_MEMBER_ID, dlq)
                        if updated is None:
                            raise _AckError(codes.INVALID_RECORD_STATE,
                                            "Unable to release acquired records for the offset")
                        cause = (DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED
                                 if updated.state == RecordState.ARCHIVING else None)
                        transitions.append(_Transition(updated, StateBatch(
                            offset, offset, int(updated.state), updated.delivery_count), cause))
                        if offset >= self.start_offset and _is_terminal(updated.state):
                            self.delivery_complete_count += 1
                    continue
                state = in_flight.state
                if state.member_id != member_id and state.member_id != EMPTY_MEMBER_ID:
                    continue
                if state.state != RecordState.ACQUIRED:
                    continue
                target = (RecordState.ARCHIVED if in_flight.last_offset < self.start_offset
                          else RecordState.AVAILABLE)
                updated = state.start_state_transition(target, DeliveryCountOps.NO_OP,
                                                       max_delivery, EMPTY_MEMBER_ID, dlq)
                if updated is None:
                    raise _AckError(codes.INVALID_RECORD_STATE,
                                    "Unable to release acquired records for the batch")
                cause = (DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED
                         if updated.state == RecordState.ARCHIVING else None)
                transitions.append(_Transition(updated, StateBatch(
                    in_flight.first_offset, in_flight.last_offset, int(updated.state),
                    updated.delivery_count), cause))
                if _is_terminal(updated.state):
                    self.delivery_complete_count += self._in_flight_count(
                        in_flight.first_offset, in_flight.last_offset)
        except _AckError as exc:
            error = exc.code
        self._rollback_or_enqueue(error, transitions)
        return error

    # --- log start offset moves (updateCacheAndOffsets) -------------------------------------

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log's start offset moved past the start offset (retention, DeleteRecords, or a
        fetch answered OFFSET_OUT_OF_RANGE): AVAILABLE records before it are archived and the
        start offset moves to it (Kafka's ``updateCacheAndOffsets``)."""
        if log_start_offset <= self.start_offset:
            return
        if self._keys:
            terminal_removed = self._count_terminal_records_up_to(log_start_offset)
            if self._archive_records(self.start_offset, log_start_offset,
                                     list(self._iter_batches()), RecordState.AVAILABLE, False):
                self._find_next_fetch_offset = True
            self.start_offset = log_start_offset
            self.delivery_complete_count -= terminal_removed
            if self.end_offset < self.start_offset:
                self.end_offset = self.start_offset
            return
        self.start_offset = log_start_offset
        self.end_offset = log_start_offset
        self.delivery_complete_count = 0

    def _count_terminal_records_up_to(self, new_start: int) -> int:
        count = 0
        for in_flight in self._sub_map(-(1 << 63), new_start - 1):
            if in_flight.last_offset < self.start_offset:
                continue
            if in_flight.offset_state is None:
                if _is_terminal(in_flight.state.state):
                    first = max(self.start_offset, in_flight.first_offset)
                    last = min(new_start - 1, in_flight.last_offset)
                    if first <= last:
                        count += last - first + 1
            else:
                for _offset, state in in_flight.offsets_in(self.start_offset, new_start - 1):
                    if _is_terminal(state.state):
                        count += 1
        return count

    # --- lock expiry ------------------------------------------------------------------------

    def next_lock_deadline_ms(self) -> int | None:
        """When the earliest acquisition lock runs out (None: no lock held)."""
        return self._timer.next_deadline_ms()

    def expire_locks(self, now_ms: int) -> bool:
        """Run every acquisition lock that ran out by ``now_ms`` (Kafka's
        ``releaseAcquisitionLockOnTimeout``): its records still ACQUIRED become AVAILABLE
        (ARCHIVED, or ARCHIVING with the DLQ, at the delivery limit). True if any changed;
        each expired lock's change is a ``pending_write()``."""
        changed = False
        while True:
            task = self._timer.pop_expired(now_ms)
            if task is None:
                return changed
            task.expired = True
            if self._release_on_timeout(task):
                changed = True

    def _release_on_timeout(self, task: _LockTask) -> bool:
        if task.cancelled:
            return False
        first_offset, last_offset = task.first_offset, task.last_offset
        floor = self._floor(first_offset)
        if floor is None:
            return False
        state_batches: list[StateBatch] = []
        dlq: list[_DlqEntry] = []
        for in_flight in self._sub_map(floor.first_offset, last_offset):
            if in_flight.offset_state is None:
                state = in_flight.state
                if state.state == RecordState.ACQUIRED and \
                        in_flight.first_offset < self.start_offset <= in_flight.last_offset:
                    in_flight.init_offset_state(self._timer)
            if in_flight.offset_state is None:
                state = in_flight.state
                if state.state != RecordState.ACQUIRED:
                    continue
                target = (RecordState.ARCHIVED if in_flight.last_offset < self.start_offset
                          else RecordState.AVAILABLE)
                self._timeout_one(state, target, in_flight.first_offset, in_flight.last_offset,
                                  state_batches, dlq)
            else:
                for offset, state in in_flight.offsets_in(first_offset, last_offset):
                    if state.state != RecordState.ACQUIRED:
                        continue
                    target = (RecordState.ARCHIVED if offset < self.start_offset
                              else RecordState.AVAILABLE)
                    self._timeout_one(state, target, offset, offset, state_batches, dlq)
        if state_batches:
            self._enqueue_write(_WRITE_TIMEOUT, state_batches, None, dlq)
            return True
        return False

    def _timeout_one(self, state: _InFlightState, target: RecordState, first: int, last: int,
                     state_batches: list[StateBatch], dlq: list[_DlqEntry]) -> None:
        updated = state.try_update_state(target, DeliveryCountOps.NO_OP,
                                         self._max_delivery_count(), EMPTY_MEMBER_ID,
                                         self._dlq_enabled())
        if updated is None:
            return  # an ongoing transition: its rollback sees the expired lock
        state_batches.append(StateBatch(first, last, int(updated.state),
                                        updated.delivery_count))
        updated.cancel_lock_task()
        if updated.state == RecordState.ARCHIVING:
            dlq.append(_DlqEntry(updated.archive, first, last, updated.delivery_count,
                                 DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED))
            return
        if updated.state != RecordState.ARCHIVED:
            self._find_next_fetch_offset = True
        if _is_terminal(updated.state):
            self.delivery_complete_count += self._in_flight_count(first, last)

    # --- persisting -------------------------------------------------------------------------

    @property
    def last_write_seq(self) -> int:
        """The sequence number of the most recent write queued (0: none yet); writes complete
        in order, so a request's change is persisted once ``write_done`` returned it."""
        return self._write_seq

    def pending_write(self) -> ShareState | None:
        """The oldest change not yet persisted (WriteShareGroupState's partition data), or
        None. Persist it, then call ``write_done``."""
        return self._writes[0].state if self._writes else None

    def pending_write_count(self) -> int:
        """How many writes are queued."""
        return len(self._writes)

    def write_done(self, ok: bool) -> int:
        """The oldest pending write was persisted (``ok``) or failed: commit or roll back its
        transitions as Kafka's completion does. Returns that write's sequence number."""
        if not self._writes:
            raise IllegalStateError("No share-partition state write is pending")
        write = self._writes.popleft()
        if write.kind == _WRITE_TRANSITION:
            assert write.transitions is not None
            if ok:
                for transition in write.transitions:
                    transition.state.complete_state_transition(True)
                    if transition.state.state == RecordState.AVAILABLE:
                        self._find_next_fetch_offset = True
                self._maybe_update_cached_state_and_offsets()
                for transition in write.transitions:
                    if transition.state.state == RecordState.ARCHIVING:
                        batch = transition.batch
                        self._dlq_ready.append(_DlqEntry(
                            transition.state.archive, batch.first_offset, batch.last_offset,
                            batch.delivery_count,
                            transition.dlq_cause or DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED))
            else:
                self._rollback(write.transitions)
        elif write.kind == _WRITE_TIMEOUT:
            # Kafka logs a failed write here and goes on as if it succeeded.
            self._maybe_update_cached_state_and_offsets()
            self._dlq_ready.extend(write.dlq or ())
        else:
            self._maybe_update_cached_state_and_offsets()
        return write.seq

    def _rollback(self, transitions: list[_Transition]) -> None:
        for transition in transitions:
            transition.state.complete_state_transition(False)
            if transition.state.state == RecordState.AVAILABLE:
                self._find_next_fetch_offset = True
            batch = transition.batch
            if _is_terminal(RecordState(batch.delivery_state)) \
                    and not _is_terminal(transition.state.state):
                self.delivery_complete_count -= self._in_flight_count(batch.first_offset,
                                                                      batch.last_offset)

    def _rollback_or_enqueue(self, error: int, transitions: list[_Transition]) -> None:
        """Kafka's ``rollbackOrProcessStateUpdates`` up to the write."""
        if error != codes.NONE:
            self._rollback(transitions)
        elif transitions:
            self._enqueue_write(_WRITE_TRANSITION, [t.batch for t in transitions], transitions,
                                None)

    def _enqueue_write(self, kind: int, batches: list[StateBatch],
                       transitions: list[_Transition] | None,
                       dlq: list[_DlqEntry] | None) -> None:
        self._write_seq += 1
        state = ShareState(self.state_epoch, self.start_offset, tuple(batches),
                           self.leader_epoch, self.delivery_complete_count)
        self._writes.append(_PendingWrite(self._write_seq, state, kind, transitions, dlq))

    # --- DLQ (KIP-1191) ---------------------------------------------------------------------

    def take_dlq_batches(self) -> list[DlqBatch]:
        """The records that went ARCHIVING since the last call (their state persisted): write
        them to the dead-letter topic, then call ``archiving_done`` for each."""
        out = []
        for entry in self._dlq_ready:
            key = (entry.first_offset, entry.last_offset)
            self._dlq_waiting.setdefault(key, []).append(entry)
            out.append(DlqBatch(entry.first_offset, entry.last_offset, entry.delivery_count,
                                entry.cause))
        self._dlq_ready.clear()
        return out

    def archiving_done(self, first_offset: int, last_offset: int) -> None:
        """The DLQ write of [first_offset, last_offset] finished (or failed: Kafka archives
        regardless): ARCHIVING -> ARCHIVED, queued as a write (Kafka's
        ``initiateDLQAndArchive`` completion)."""
        key = (first_offset, last_offset)
        waiting = self._dlq_waiting.get(key)
        if not waiting:
            raise IllegalStateError(f"No DLQ batch {first_offset}-{last_offset} is pending")
        entry = waiting.pop(0)
        if not waiting:
            del self._dlq_waiting[key]
        entry.archive()
        self.delivery_complete_count += self._in_flight_count(first_offset, last_offset)
        self._enqueue_write(_WRITE_ARCHIVED, [StateBatch(
            first_offset, last_offset, int(RecordState.ARCHIVED), entry.delivery_count)],
            None, None)

    # --- start offset advance (maybeUpdateCachedStateAndOffsets) ---------------------------

    def _in_flight_count(self, first_offset: int, last_offset: int) -> int:
        """Kafka's ``numInFlightRecordsInBatch``: the batch's records at or after the start."""
        if last_offset >= self.start_offset:
            return last_offset - max(self.start_offset, first_offset) + 1
        return 0

    def _can_move_start_offset(self) -> bool:
        if not self._keys:
            return False
        floor = self._floor(self.start_offset)
        if floor is None:
            return False  # an acquirable gap at the beginning
        if floor.offset_state is None:
            state = floor.state
        else:
            found = floor.offset_state.get(self.start_offset)
            if found is None:
                return False
            state = found
        if state.rollback is not None:
            return False
        return _is_terminal(state.state)

    def _find_last_offset_acknowledged(self) -> tuple[int, int]:
        """Kafka's ``findLastOffsetAcknowledgedAndMetadata``."""
        last_acknowledged = -1
        terminal = 0
        gap_active = self._gap_window_active()
        gap_start = self._gap_window[1] if gap_active and self._gap_window else 0
        for in_flight in self._iter_batches():
            if gap_active and in_flight.last_offset >= gap_start:
                return last_acknowledged, terminal
            if in_flight.offset_state is None:
                state = in_flight.state
                if state.rollback is not None or not _is_terminal(state.state):
                    return last_acknowledged, terminal
                last_acknowledged = in_flight.last_offset
                terminal += self._in_flight_count(in_flight.first_offset, in_flight.last_offset)
            else:
                start = self.start_offset
                stable_upto = in_flight.stable_upto
                if stable_upto >= in_flight.first_offset:
                    last_acknowledged = stable_upto
                    if stable_upto >= start:
                        terminal += stable_upto - max(start, in_flight.first_offset) + 1
                for offset, state in in_flight.offsets_in(stable_upto + 1,
                                                          in_flight.last_offset):
                    if state.rollback is not None or state.state not in _TERMINAL:
                        return last_acknowledged, terminal
                    in_flight.stable_upto = offset
                    last_acknowledged = offset
                    if offset >= start:
                        terminal += 1
        return last_acknowledged, terminal

    def _maybe_update_cached_state_and_offsets(self) -> bool:
        """Kafka's ``maybeUpdateCachedStateAndOffsets``: move the start offset past the leading
        terminal records and drop the batches wholly before it."""
        if not self._can_move_start_offset():
            return False
        last_acknowledged, terminal = self._find_last_offset_acknowledged()
        if last_acknowledged == -1:
            return False
        last_cached = self._last_batch().last_offset
        if last_acknowledged == last_cached:
            self.start_offset = last_cached + 1
            self.end_offset = last_cached + 1
            self._clear()
            self.delivery_complete_count = 0
            return True
        entry = self._floor(last_acknowledged)
        assert entry is not None
        if last_acknowledged == entry.last_offset:
            i = bisect.bisect_right(self._keys, last_acknowledged)
            higher_key = self._keys[i]
            if higher_key > self.start_offset:
                self.start_offset = higher_key
            if self._gap_window_active() and self._gap_window is not None:
                self.start_offset = min(self._gap_window[1], self.start_offset)
            last_key_to_remove = entry.first_offset
        else:
            if last_acknowledged + 1 > self.start_offset:
                self.start_offset = last_acknowledged + 1
            i = bisect.bisect_left(self._keys, entry.first_offset)
            last_key_to_remove = self._keys[i - 1] if i > 0 else -1
        self.delivery_complete_count -= terminal
        if last_key_to_remove != -1:
            self._remove_through(last_key_to_remove)
        return True

    # --- introspection (tests, DescribeShareGroupOffsets, benchmarks) -----------------------

    def record_states(self) -> list[tuple[int, int, RecordState, int, str]]:
        """The cached state as (first, last, state, delivery count, member) ranges, in offset
        order: per-offset states as one-offset ranges."""
        out = []
        for in_flight in self._iter_batches():
            if in_flight.offset_state is None:
                s = in_flight.state
                out.append((in_flight.first_offset, in_flight.last_offset, s.state,
                            s.delivery_count, s.member_id))
            else:
                for offset, s in in_flight.offset_state.items():
                    out.append((offset, offset, s.state, s.delivery_count, s.member_id))
        return out

    def cached_batch_count(self) -> int:
        """In-flight batches held (Kafka's in-flight batch count metric)."""
        return len(self._keys)


# --- share.auto.offset.reset ---------------------------------------------------------------------

# java.time.Duration.parse's grammar (case-insensitive): PnDTnHnMn.nS, signs allowed per part.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


def _parse_duration_ms(text: str) -> int:
    """``java.time.Duration.parse(text).toMillis()``; ValueError if it does not parse."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(3) == "T" or match.group(3) == "t" or (
            match.group(2) is None and match.group(3) is None):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    negate = -1 if match.group(1) == "-" else 1
    days = int(match.group(2) or 0)
    hours = int(match.group(4) or 0)
    minutes = int(match.group(5) or 0)
    seconds_text = match.group(6)
    seconds = int(seconds_text or 0)
    nanos = int((match.group(7) or "").ljust(9, "0") or 0)
    if seconds_text is not None and seconds_text.startswith("-"):
        nanos = -nanos
    total_nanos = ((days * 86400 + hours * 3600 + minutes * 60 + seconds) * 1_000_000_000
                   + nanos) * negate
    # Duration.toMillis truncates towards negative infinity (Math.floorDiv on seconds/nanos).
    return total_nanos // 1_000_000


def parse_auto_offset_reset(strategy: str) -> tuple[str, int | None]:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy.fromString``: ("latest", None),
    ("earliest", None) or ("by_duration", duration_ms); ValueError with Kafka's message for
    anything else (including "none", which share groups do not support)."""
    if strategy is None:
        raise ValueError("Auto offset reset strategy is null")
    if strategy == "by_duration":
        raise ValueError(
            "<:duration> part is missing in by_duration auto offset reset strategy.")
    if strategy in ("latest", "earliest"):
        return strategy, None
    if strategy == "none":
        raise ValueError("Unsupported strategy for ShareGroup: NONE")
    if strategy.startswith("by_duration:"):
        try:
            duration_ms = _parse_duration_ms(strategy[len("by_duration:"):])
        except ValueError:
            raise ValueError("Unable to parse duration string in by_duration offset reset "
                             "strategy.") from None
        if duration_ms < 0:
            raise ValueError(
                "Negative duration is not supported in by_duration offset reset strategy.")
        return "by_duration", duration_ms
    raise ValueError(f"Unknown auto offset reset strategy: {strategy}")


def auto_offset_reset_timestamp_ms(strategy: str, now_ms: int) -> int | None:
    """The timestamp whose offset a ``by_duration`` strategy starts from (now minus the
    duration, as Kafka computes it); None for latest / earliest."""
    kind, duration_ms = parse_auto_offset_reset(strategy)
    if kind != "by_duration" or duration_ms is None:
        return None
    return now_ms - duration_ms


# --- helpers ------------------------------------------------------------------------------------


def _throttle_records_delivery_limit(max_delivery_count: int) -> int:
    return max(_MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT, math.ceil(max_delivery_count / 2.0))


def _last_offset_of_batch_with(batches: Sequence[FetchedBatch], offset: int) -> int:
    """Kafka's ``lastOffsetFromBatchWithRequestOffset``: the end of the log batch holding
    ``offset`` (whole batches are acquired), else ``offset``."""
    previous: FetchedBatch | None = None
    for batch in batches:
        if offset < batch.base_offset:
            break
        previous = batch
    if previous is not None and offset <= previous.last_offset:
        return previous.last_offset
    return offset


def _accumulate_acquired_records(result: list[AcquiredRecords],
                                 acquired: list[AcquiredRecords]) -> None:
    """``ShareFetchUtils.accumulateAcquiredRecords``: merge adjacent ranges of one count."""
    if not acquired:
        return
    first, last, count = acquired[0].first_offset, acquired[0].last_offset, \
        acquired[0].delivery_count
    for current in acquired[1:]:
        if current.first_offset == last + 1 and current.delivery_count == count:
            last = current.last_offset
        else:
            result.append(AcquiredRecords(first, last, count))
            first, last, count = current.first_offset, current.last_offset, \
                current.delivery_count
    result.append(AcquiredRecords(first, last, count))


def _aborted_transaction_batches(batches: Sequence[FetchedBatch],
                                 aborted: Sequence[Sequence[int]]) -> list[FetchedBatch]:
    """Kafka's ``fetchAbortedTransactionRecordBatches``: the data batches of aborted
    transactions in this read."""
    ordered = sorted(aborted, key=lambda txn: txn[1])
    i = 0
    aborted_pids: set[int] = set()
    out = []
    for batch in batches:
        if batch.producer_id == _NO_PRODUCER_ID:
            continue
        while i < len(ordered) and ordered[i][1] <= batch.last_offset:
            aborted_pids.add(ordered[i][0])
            i += 1
        if batch.is_control and batch.is_abort_marker:
            aborted_pids.discard(batch.producer_id)
        elif batch.is_transactional and batch.producer_id in aborted_pids:
            out.append(batch)
    return out


def _filter_batches_from_acquired(acquired: list[AcquiredRecords],
                                  to_archive: list[FetchedBatch]) -> list[AcquiredRecords]:
    """Kafka's ``filterRecordBatchesFromAcquiredRecords``: cut archived batches out."""
    if not to_archive:
        return acquired
    result: list[AcquiredRecords] = []
    archive_iter = iter(to_archive)
    acquired_iter = iter(acquired)
    batch: FetchedBatch | None = next(archive_iter)
    unresolved: AcquiredRecords | None = None
    while True:
        if unresolved is None:
            unresolved = next(acquired_iter, None)
            if unresolved is None:
                break
        first, last, count = unresolved.first_offset, unresolved.last_offset, \
            unresolved.delivery_count
        if batch is None:
            result.append(unresolved)
            unresolved = None
            continue
        if last < batch.base_offset:
            result.append(unresolved)
            unresolved = None
        if first <= batch.last_offset and last >= batch.base_offset:
            unresolved = None
            if first < batch.base_offset:
                result.append(AcquiredRecords(first, batch.base_offset - 1, count))
            if last > batch.last_offset:
                unresolved = AcquiredRecords(batch.last_offset + 1, last, count)
        if last > batch.last_offset:
            batch = next(archive_iter, None)
    return result
