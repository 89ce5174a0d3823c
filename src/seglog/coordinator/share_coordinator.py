"""The share coordinator (KIP-932): the persisted state of share-partitions in
``__share_group_state``, as Kafka 4.4's ``ShareCoordinatorShard`` keeps it.

A share-partition (a share group's view of one topic partition) persists its start offset,
state epoch, leader epoch and the delivery state of its in-flight offsets through a
persister (Kafka's ``DefaultStatePersister``: the Initialize/Read/Write/Delete/
ReadSummary ShareGroupState requests, 83-87). The share coordinator that answers them keeps
the state of each share-partition in the partition of the compacted internal topic
``__share_group_state`` that :func:`share_state_partition` names, as records
(:mod:`seglog.coordinator.share_state_records`):

* InitializeShareGroupState writes a ShareSnapshot (snapshot epoch 0, or one more than the
  last), with the state epoch and start offset asked for and no batches;
* WriteShareGroupState writes a ShareUpdate holding only the batches written (merged over
  the state by :func:`combine_state_batches`, Kafka's ``PersisterStateBatchCombiner``), or,
  once ``share.coordinator.snapshot.update.records.per.snapshot`` updates were written since
  the last snapshot, a new ShareSnapshot of the whole merged state;
* ReadShareGroupState answers the state and, when the reader's leader epoch is newer than
  the one recorded, writes it (an update or a snapshot as above);
* DeleteShareGroupState writes the tombstone of the snapshot key;
* ReadShareGroupStateSummary answers start offset, state and leader epochs and the
  delivery-complete count (KIP-1226) without writing.

Fencing as Kafka's: a write whose leader epoch or state epoch is older than the recorded one
gets FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH, a read whose leader epoch is older
FENCED_LEADER_EPOCH, an initialize whose state epoch is older FENCED_STATE_EPOCH; a
negative partition, leader epoch or state epoch, or a read/write of a share-partition never
initialized, INVALID_REQUEST with Kafka's message; a topic id the metadata does not know (or
a partition past its count) UNKNOWN_TOPIC_OR_PARTITION; a ``__share_group_state`` partition
this coordinator does not serve NOT_COORDINATOR. Results carry Kafka's error message
(:class:`ErrorCode`, an ``int``).

The state of each ``__share_group_state`` partition is rebuilt from its log by replaying its
records (:meth:`ShareCoordinator.load`: snapshots replace, updates merge, tombstones
delete), when a Store opens or a broker becomes the partition's leader; :meth:`unload`
forgets it when the broker stops leading. Writes are appended (through
:class:`~seglog.coordinator.internal_topics.InternalTopics`, or the appender the broker
sets so that a cluster member appends as the partition's leader) and then replayed into the
state, so the state is always what the log says. :meth:`ShareCoordinator.last_redundant_offset`
is Kafka's ``ShareCoordinatorOffsetsManager``: the offset below which every record of a
partition is superseded (what the broker may delete).

Thread-safe: every call runs under the InternalTopics metadata lock. It knows nothing of
the wire or of clients.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from . import share_state_records as records
from .internal_topics import InternalTopics
from .share_state_records import (SHARE_SNAPSHOT, SHARE_STATE_TOPIC, SHARE_UPDATE,
                                  ShareSnapshotValue, ShareState, ShareUpdateValue, StateBatch,
                                  share_state_partition)
from .. import error_codes as codes
from ..errors import CorruptRecordError, SeglogError

__all__ = ["ErrorCode", "ShareCoordinator", "ShareCoordinatorConfig", "ShareState",
           "ShareStateSummary", "StateBatch", "combine_state_batches", "runtime_error_code",
           "share_state_partition"]

log = logging.getLogger("seglog.coordinator.share_coordinator")

#: Kafka's ShareCoordinatorShard messages for INVALID_REQUEST.
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."

#: ``(key bytes, value bytes or None)``: a record an appender writes.
Record = tuple[bytes, bytes | None]
#: ``appender(partition, records)``: append ``records`` to ``__share_group_state``
#: partition ``partition`` as its leader and return the offset of the first (-1: not known);
#: raises SeglogError (its ``kafka_error_code`` says why) when it cannot.
Appender = Callable[[int, list[Record]], int]


class ErrorCode(int):
    """A Kafka error code (an ``int``) with the ``message`` Kafka answers with it (None:
    no message, as Kafka's success answers)."""

    message: str | None

    def __new__(cls, code: int, message: str | None = None) -> "ErrorCode":
        self = super().__new__(cls, code)
        self.message = message
        return self


_OK = ErrorCode(codes.NONE)


def _error(code: int, message: str | None = None) -> ErrorCode:
    return ErrorCode(code, codes.message(code) if message is None else message)


class ShareStateSummary(NamedTuple):
    """ReadShareGroupStateSummary's answer for one share-partition: ``error_code`` first
    (an :class:`ErrorCode`), then ``start_offset``, ``state_epoch``, ``leader_epoch`` and
    ``delivery_complete_count`` (Kafka's -1, 0, 0, -1 for a share-partition without
    state)."""

    error_code: int
    start_offset: int = -1
    state_epoch: int = 0
    leader_epoch: int = 0
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    """Kafka's ``share.coordinator.*`` configs the coordinator uses:
    ``state_topic_num_partitions`` (``share.coordinator.state.topic.num.partitions``),
    ``snapshot_update_records_per_snapshot``
    (``share.coordinator.snapshot.update.records.per.snapshot``) and ``compression`` (the
    codec of its record batches, ``share.coordinator.state.topic.compression.codec``: none,
    gzip, snappy, lz4, zstd)."""

    state_topic_num_partitions: int = 50
    snapshot_update_records_per_snapshot: int = 500
    compression: str = "none"


# --- PersisterStateBatchCombiner ------------------------------------------------------------


def combine_state_batches(so_far: Sequence[StateBatch], new: Sequence[StateBatch],
                          start_offset: int) -> list[StateBatch]:
    """Kafka's ``PersisterStateBatchCombiner.combineStateBatches``: the batches of both lists
    below ``start_offset`` dropped (cut at it), then each offset taking the batch with the
    highest delivery count, then the highest delivery state, among those covering it;
    neighbours with the same state and count coalesced. ``start_offset`` -1 prunes
    nothing. ValueError when a batch ends before it begins and the sweep meets it (where
    Kafka's combiner fails too)."""
    pruned: list[StateBatch] = []
    for batch in (*so_far, *new):
        if start_offset != -1 and batch.last_offset < start_offset:
            continue
        if start_offset != -1 and batch.first_offset < start_offset:
            batch = replace(batch, first_offset=start_offset)
        pruned.append(batch)
    if len(pruned) <= 1:
        return pruned
    # A sweep over begin/end events; the active priorities are a multiset.
    events: list[tuple[int, bool, tuple[int, int]]] = []
    for b in pruned:
        priority = (b.delivery_count, b.delivery_state)
        events.append((b.first_offset, True, priority))
        events.append((b.last_offset + 1, False, priority))
    events.sort(key=lambda e: (e[0], e[1]))  # ends before begins at one offset
    active: dict[tuple[int, int], int] = {}
    out: list[StateBatch] = []
    open_from = -1
    winner: tuple[int, int] | None = None
    i = 0
    while i < len(events):
        offset = events[i][0]
        if winner is not None and offset > open_from:
            _append_coalesced(out, open_from, offset - 1, winner)
        while i < len(events) and events[i][0] == offset:
            _offset, begin, priority = events[i]
            i += 1
            if begin:
                active[priority] = active.get(priority, 0) + 1
            elif priority not in active:
                # A batch whose last offset is below its first ends before it begins:
                # Kafka's combiner fails on it (a NullPointerException), so does this one.
                raise ValueError(f"a state batch ends at {offset - 1} before it begins "
                                 "(first offset above last offset)")
            elif active[priority] == 1:
                del active[priority]
            else:
                active[priority] -= 1
        winner = max(active) if active else None
        open_from = offset
    return out


def _append_coalesced(out: list[StateBatch], first: int, last: int,
                      winner: tuple[int, int]) -> None:
    count, state = winner
    if out:
        tail = out[-1]
        if (tail.last_offset + 1 == first and tail.delivery_state == state
                and tail.delivery_count == count):
            out[-1] = replace(tail, last_offset=last)
            return
    out.append(StateBatch(first, last, state, count))


# --- one __share_group_state partition (ShareCoordinatorShard's maps) -----------------------


@dataclass
class _Offset:
    """Kafka's ``ShareGroupOffset``: the state of one share-partition."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]
    create_timestamp_ms: int = 0
    write_timestamp_ms: int = 0


_Key = tuple[str, uuid.UUID, int]


@dataclass
class _Shard:
    """The state of the share-partitions of one ``__share_group_state`` partition, with
    Kafka's maps (leader epochs, state epochs, updates since the last snapshot) and its
    offsets manager (the last record offset per key)."""

    updates_per_snapshot: int
    state: dict[_Key, _Offset] = field(default_factory=dict)
    leader_epochs: dict[_Key, int] = field(default_factory=dict)
    state_epochs: dict[_Key, int] = field(default_factory=dict)
    update_counts: dict[_Key, int] = field(default_factory=dict)
    # ShareCoordinatorOffsetsManager: the offset of each key's last snapshot.
    record_offsets: dict[_Key, int] = field(default_factory=dict)
    last_redundant: int = 2**63 - 1

    def replay(self, offset: int, record_type: int, key: _Key,
               value: ShareSnapshotValue | ShareUpdateValue | None) -> None:
        """Kafka's ``ShareCoordinatorShard.replay`` of one record at ``offset``."""
        if record_type == SHARE_SNAPSHOT:
            assert value is None or isinstance(value, ShareSnapshotValue)
            self._snapshot(offset, key, value)
        elif record_type == SHARE_UPDATE and isinstance(value, ShareUpdateValue):
            self._update(key, value)

    def _snapshot(self, offset: int, key: _Key, value: ShareSnapshotValue | None) -> None:
        if value is None:
            self.state.pop(key, None)
            self.leader_epochs.pop(key, None)
            self.state_epochs.pop(key, None)
            self.update_counts.pop(key, None)
        else:
            _raise(self.leader_epochs, key, value.leader_epoch)
            _raise(self.state_epochs, key, value.state_epoch)
            self.state[key] = _Offset(
                value.snapshot_epoch, value.state_epoch, value.leader_epoch,
                value.start_offset, value.delivery_complete_count, tuple(value.batches),
                value.create_timestamp_ms, value.write_timestamp_ms)
            if self.update_counts.get(key, -1) >= self.updates_per_snapshot:
                self.update_counts[key] = 0
        self._track(key, offset, value is None)

    def _update(self, key: _Key, value: ShareUpdateValue) -> None:
        _raise(self.leader_epochs, key, value.leader_epoch)
        current = self.state.get(key)
        if current is None:
            self.state[key] = _Offset(value.snapshot_epoch, 0, value.leader_epoch,
                                      value.start_offset, value.delivery_complete_count,
                                      tuple(value.batches))
        else:
            start = current.start_offset if value.start_offset == -1 else value.start_offset
            leader = current.leader_epoch if value.leader_epoch == -1 else value.leader_epoch
            self.state[key] = _Offset(
                current.snapshot_epoch, current.state_epoch, leader, start,
                value.delivery_complete_count,
                tuple(combine_state_batches(current.batches, value.batches, start)),
                current.create_timestamp_ms, current.write_timestamp_ms)
        self.update_counts[key] = self.update_counts.get(key, 0) + 1

    def _track(self, key: _Key, offset: int, deleted: bool) -> None:
        """``ShareCoordinatorOffsetsManager.updateState`` (``offset`` -1: an appender that
        did not say where it wrote; nothing is tracked)."""
        if offset < 0:
            return
        self.last_redundant = min(self.last_redundant, offset)
        self.record_offsets[key] = offset
        if self.record_offsets:
            lowest = 2**63 - 1
            for at in self.record_offsets.values():
                lowest = min(lowest, at)
                if lowest == self.last_redundant:
                    break
            self.last_redundant = lowest
        if deleted:
            del self.record_offsets[key]


def _raise(mapping: dict[_Key, int], key: _Key, epoch: int) -> None:
    """Kafka's ``maybeUpdate*EpochMap``: keep the highest epoch seen."""
    if mapping.get(key, epoch) <= epoch:
        mapping[key] = epoch
    # else: an older epoch never lowers the recorded one


# --- the coordinator ------------------------------------------------------------------------


def runtime_error_code(code: int) -> int:
    """Kafka's ``CoordinatorOperationExceptionHelper``: the answer to a coordinator write
    that failed with ``code`` (NOT_COORDINATOR when the partition is not led here any more,
    COORDINATOR_NOT_AVAILABLE when it could not be replicated, ...)."""
    if code in (codes.NOT_LEADER_OR_FOLLOWER, codes.KAFKA_STORAGE_ERROR, codes.NOT_COORDINATOR):
        return codes.NOT_COORDINATOR
    if code in (codes.MESSAGE_TOO_LARGE, codes.RECORD_LIST_TOO_LARGE):
        return codes.UNKNOWN_SERVER_ERROR
    if code in (codes.NONE, codes.UNKNOWN_SERVER_ERROR, codes.UNKNOWN_TOPIC_OR_PARTITION,
                codes.NOT_ENOUGH_REPLICAS, codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                codes.REQUEST_TIMED_OUT):
        # NONE/UNKNOWN_SERVER_ERROR: a local failure without a code (read-only, closed).
        return codes.COORDINATOR_NOT_AVAILABLE
    return code



def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class ShareCoordinator:
    """The share coordinator of one Store (see the module docstring).

    ``ShareCoordinator(topics, config=..., topic_partition_count=..., now_ms=...)``:
    ``topics`` the storage, ``topic_partition_count(topic_id)`` the partition count of the
    topic with that id (None: no such topic; Kafka's metadata image), ``now_ms`` the clock
    of the records' timestamps. ``serve_all`` (the embedded Store, a lone broker): every
    partition of ``__share_group_state`` is served, loaded from its log on first use;
    otherwise only those :meth:`load` took (a cluster member's, as it leads them).
    """

    def __init__(self, topics: InternalTopics, *,
                 config: ShareCoordinatorConfig = ShareCoordinatorConfig(),
                 topic_partition_count: Callable[[uuid.UUID], int | None],
                 now_ms: Callable[[], int] = _wall_ms, serve_all: bool = True):
        self._topics = topics
        self.config = config
        self._topic_partition_count = topic_partition_count
        self._now_ms = now_ms
        self._serve_all = serve_all
        self._shards: dict[int, _Shard] = {}
        self._appender: Appender | None = None
        #: ``{partition: why}``: the partitions whose last load failed (not served).
        self.load_failures: dict[int, str] = {}

    # --- wiring ---------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        """The partition count of ``__share_group_state`` (the existing topic's, else the
        configured one it will be created with)."""
        topic = self._topics.existing_topic(SHARE_STATE_TOPIC)
        return topic.partitions if topic is not None else self.config.state_topic_num_partitions

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The ``__share_group_state`` partition of the share-partition."""
        return share_state_partition(group_id, topic_id, partition, self.num_partitions)

    def set_appender(self, appender: Appender | None, *, serve_all: bool | None = None
                     ) -> None:
        """Append through ``appender`` from now on (None: straight to the Store's log, the
        default); ``serve_all`` as the constructor's (a cluster member serves only what it
        loaded)."""
        with self._topics.lock:
            self._appender = appender
            if serve_all is not None:
                self._serve_all = serve_all
                if not serve_all:
                    self._shards.clear()

    def set_config(self, config: ShareCoordinatorConfig) -> None:
        """Use ``config`` from now on (a broker's ``share.coordinator.*`` configs)."""
        with self._topics.lock:
            self.config = config
            for shard in self._shards.values():
                shard.updates_per_snapshot = config.snapshot_update_records_per_snapshot

    def set_topic_partition_count(self, lookup: Callable[[uuid.UUID], int | None]) -> None:
        """Know topics through ``lookup`` from now on (a broker's metadata)."""
        self._topic_partition_count = lookup

    # --- loading --------------------------------------------------------------------------

    def load(self, partition: int, items: Iterable[tuple[int, Any, Any]] | None = None
             ) -> None:
        """Rebuild the state of ``__share_group_state`` partition ``partition`` and serve it
        (this broker leads it now): from ``items`` (``(offset, key bytes, value bytes or
        None)``) when given, else from the partition's log. Records of other types are
        skipped, as Kafka's loader skips them; one that does not parse raises
        CorruptRecordError naming the partition and offset (the partition is then not
        served, and named in :attr:`load_failures`)."""
        with self._topics.lock:
            self._shards.pop(partition, None)
            if items is None:
                items = self._log_items(partition)
            shard = _Shard(self.config.snapshot_update_records_per_snapshot)
            at = -1
            try:
                for at, key, value in items:
                    _replay_raw(shard, at, key, value)
            except CorruptRecordError as exc:
                why = (f"{SHARE_STATE_TOPIC}-{partition} cannot be loaded at offset {at}: "
                       f"{exc}")
                self.load_failures[partition] = why
                raise CorruptRecordError(why, reason=getattr(exc, "reason", "")) from None
            self.load_failures.pop(partition, None)
            self._shards[partition] = shard

    def _log_items(self, partition: int) -> list[tuple[int, Any, Any]]:
        topic = self._topics.existing_topic(SHARE_STATE_TOPIC)
        if topic is None or not 0 <= partition < topic.partitions:
            return []
        partition_log = topic.log(partition)
        return [(r.offset, r.key, r.value) for r in partition_log.records(
            start=partition_log.start_offset, max_offset=partition_log.end_offset)]

    def unload(self, partition: int) -> None:
        """Forget the state of ``partition`` (this broker stopped leading it); its
        share-partitions answer NOT_COORDINATOR until :meth:`load`."""
        with self._topics.lock:
            self._shards.pop(partition, None)
            self.load_failures.pop(partition, None)

    def loaded_partitions(self) -> frozenset[int]:
        """The ``__share_group_state`` partitions whose state is held now."""
        with self._topics.lock:
            return frozenset(self._shards)

    def _shard(self, partition: int) -> _Shard | None:
        shard = self._shards.get(partition)
        if shard is None and self._serve_all and partition not in self.load_failures:
            try:
                self.load(partition)
            except CorruptRecordError:
                log.exception("share coordinator: %s-%d is not served", SHARE_STATE_TOPIC,
                              partition)
                return None
            shard = self._shards.get(partition)
        return shard

    # --- the five operations ----------------------------------------------------------------

    def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> ErrorCode:
        """InitializeShareGroupState: a snapshot with ``state_epoch`` and ``start_offset``
        and no batches (Kafka's ``ShareCoordinatorShard.initializeState``)."""
        with self._topics.lock:
            where, shard = self._locate(group_id, topic_id, partition)
            if shard is None:
                return _error(codes.NOT_COORDINATOR)
            if partition < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            if state_epoch < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
            key = (group_id, topic_id, partition)
            if shard.state_epochs.get(key, state_epoch) > state_epoch:
                return _error(codes.FENCED_STATE_EPOCH)
            if not self._topic_exists(topic_id, partition):
                return _error(codes.UNKNOWN_TOPIC_OR_PARTITION)
            current = shard.state.get(key)
            now = self._now_ms()
            value = ShareSnapshotValue(
                0 if current is None else current.snapshot_epoch + 1, state_epoch, 0,
                start_offset, now, now, (), -1 if start_offset == -1 else 0)
            return self._write(where, shard, SHARE_SNAPSHOT, key, value)

    def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        """ReadShareGroupState: the state (None with the error), recording
        ``leader_epoch`` when it is newer than the one known (Kafka's
        ``readStateAndMaybeUpdateLeaderEpoch``)."""
        with self._topics.lock:
            where, shard = self._locate(group_id, topic_id, partition)
            if shard is None:
                return _error(codes.NOT_COORDINATOR), None
            if partition < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_PARTITION_ID), None
            if leader_epoch < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH), None
            key = (group_id, topic_id, partition)
            current = shard.state.get(key)
            if current is None:
                return ErrorCode(codes.INVALID_REQUEST, READ_UNINITIALIZED), None
            if shard.leader_epochs.get(key, leader_epoch) > leader_epoch:
                return _error(codes.FENCED_LEADER_EPOCH), None
            if not self._topic_exists(topic_id, partition):
                return _error(codes.UNKNOWN_TOPIC_OR_PARTITION), None
            answer = ShareState(current.state_epoch, current.start_offset, current.batches,
                                current.leader_epoch, current.delivery_complete_count)
            if shard.leader_epochs.get(key) != leader_epoch:
                try:
                    record_type, value = self._state_record(
                        shard, key, current, leader_epoch=leader_epoch,
                        start_offset=current.start_offset,
                        delivery_complete_count=current.delivery_complete_count, batches=())
                except ValueError as exc:  # batches loaded from a log the combiner refuses
                    return ErrorCode(codes.UNKNOWN_SERVER_ERROR,
                                     f"Unable to read share group state: {exc}"), None
                written = self._write(where, shard, record_type, key, value)
                if written:
                    return written, None
                answer = replace(answer, leader_epoch=leader_epoch)
            return _OK, answer

    def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state: ShareState) -> ErrorCode:
        """WriteShareGroupState: ``state.batches`` merged over the state (an update, or a
        snapshot every ``snapshot_update_records_per_snapshot`` updates)."""
        with self._topics.lock:
            where, shard = self._locate(group_id, topic_id, partition)
            if shard is None:
                return _error(codes.NOT_COORDINATOR)
            if partition < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            if state.leader_epoch < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
            if state.state_epoch < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
            key = (group_id, topic_id, partition)
            current = shard.state.get(key)
            if current is None:
                return ErrorCode(codes.INVALID_REQUEST, WRITE_UNINITIALIZED)
            if shard.leader_epochs.get(key, state.leader_epoch) > state.leader_epoch:
                return _error(codes.FENCED_LEADER_EPOCH)
            if shard.state_epochs.get(key, state.state_epoch) > state.state_epoch:
                return _error(codes.FENCED_STATE_EPOCH)
            if not self._topic_exists(topic_id, partition):
                return _error(codes.UNKNOWN_TOPIC_OR_PARTITION)
            try:
                record_type, value = self._state_record(
                    shard, key, current, leader_epoch=current.leader_epoch,
                    start_offset=state.start_offset,
                    delivery_complete_count=state.delivery_complete_count,
                    batches=state.batches)
                if isinstance(value, ShareUpdateValue):
                    # What the replay will merge, checked before anything is written (Kafka
                    # replays before appending: a failing merge writes nothing).
                    combine_state_batches(current.batches, value.batches, value.start_offset)
            except ValueError as exc:
                return ErrorCode(codes.UNKNOWN_SERVER_ERROR,
                                 f"Unable to write share group state: {exc}")
            return self._write(where, shard, record_type, key, value)

    def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        """DeleteShareGroupState: the tombstone of the share-partition (nothing written,
        and no error, when it has no state)."""
        with self._topics.lock:
            where, shard = self._locate(group_id, topic_id, partition)
            if shard is None:
                return _error(codes.NOT_COORDINATOR)
            if partition < 0:
                return ErrorCode(codes.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            if not self._topic_exists(topic_id, partition):
                return _error(codes.UNKNOWN_TOPIC_OR_PARTITION)
            key = (group_id, topic_id, partition)
            if key not in shard.state:
                log.warning("Attempted to delete non-existent share partition %s.", key)
                return _OK
            return self._write(where, shard, SHARE_SNAPSHOT, key, None)

    def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int = -1) -> ShareStateSummary:
        """ReadShareGroupStateSummary: ``(error, start offset, state epoch, leader epoch,
        delivery-complete count)``; -1, 0, 0, -1 for a share-partition without state
        (``leader_epoch`` is not checked, as Kafka's)."""
        del leader_epoch  # Kafka's shard does not fence the summary
        with self._topics.lock:
            _where, shard = self._locate(group_id, topic_id, partition)
            if shard is None:
                return ShareStateSummary(_error(codes.NOT_COORDINATOR))
            if partition < 0:
                return ShareStateSummary(ErrorCode(codes.INVALID_REQUEST,
                                                   NEGATIVE_PARTITION_ID))
            if not self._topic_exists(topic_id, partition):
                return ShareStateSummary(_error(codes.UNKNOWN_TOPIC_OR_PARTITION))
            current = shard.state.get((group_id, topic_id, partition))
            if current is None:
                return ShareStateSummary(_OK, -1, 0, 0, -1)
            return ShareStateSummary(_OK, current.start_offset, current.state_epoch,
                                     current.leader_epoch, current.delivery_complete_count)

    # --- housekeeping -------------------------------------------------------------------------

    def last_redundant_offset(self, partition: int) -> int | None:
        """Kafka's ``ShareCoordinatorOffsetsManager.lastRedundantOffset``: the offset of
        ``partition`` below which every record is superseded by a later snapshot or
        tombstone (None: nothing to prune, or the partition is not served)."""
        with self._topics.lock:
            shard = self._shards.get(partition)
            if shard is None:
                return None
            value = shard.last_redundant
            return value if 0 < value < 2**63 - 1 else None

    def snapshot_cold_partitions(self, partition: int, interval_ms: int) -> ErrorCode:
        """Kafka's ``snapshotColdPartitions`` for ``__share_group_state`` partition
        ``partition``: a snapshot of each share-partition whose last snapshot is
        ``interval_ms`` old or older (``share.coordinator.cold.partition.snapshot.interval.ms``),
        so that the updates before it become redundant and can be pruned; nothing when every
        share-partition was snapshotted so already. NONE, or the first write's error."""
        with self._topics.lock:
            shard = self._shards.get(partition)
            if shard is None or not shard.state:
                return _OK
            if all(o.create_timestamp_ms != o.write_timestamp_ms for o in shard.state.values()):
                return _OK  # all already cold-snapshotted (Kafka skips then)
            now = self._now_ms()
            for key, current in list(shard.state.items()):
                if now - current.write_timestamp_ms < interval_ms:
                    continue
                value = ShareSnapshotValue(
                    current.snapshot_epoch + 1, current.state_epoch, current.leader_epoch,
                    current.start_offset, current.create_timestamp_ms, now, current.batches,
                    current.delivery_complete_count)
                written = self._write(partition, shard, SHARE_SNAPSHOT, key, value)
                if written:
                    return written
            return _OK

    def delete_state_of_deleted_topics(self, partition: int | None = None) -> ErrorCode:
        """Kafka's ``maybeCleanupShareState``: the tombstone of every share-partition (of
        ``__share_group_state`` partition ``partition``, None: of every partition served)
        whose topic no longer exists. NONE, or the first write's error."""
        with self._topics.lock:
            wanted = list(self._shards) if partition is None else [partition]
            exists: dict[uuid.UUID, bool] = {}
            for where in wanted:
                shard = self._shards.get(where)
                if shard is None:
                    continue
                for key in list(shard.state):
                    topic_id = key[1]
                    if topic_id not in exists:
                        exists[topic_id] = self._topic_partition_count(topic_id) is not None
                    if exists[topic_id]:
                        continue
                    written = self._write(where, shard, SHARE_SNAPSHOT, key, None)
                    if written:
                        return written
            return _OK

    def on_topics_changed(self) -> None:
        """Topics were created or deleted (the embedded Store tells): the state of deleted
        topics' share-partitions is deleted at once. A broker (an appender set) does it from
        its own timer instead, as the partitions' leader."""
        with self._topics.lock:
            if self._appender is not None or self._topics.read_only or not self._shards:
                return
            code = self.delete_state_of_deleted_topics()
            if code:
                log.warning("share coordinator: the state of deleted topics was not deleted "
                            "(%s)", codes.BY_CODE[int(code)].name)

    def share_partitions(self) -> list[tuple[str, uuid.UUID, int]]:
        """The share-partitions with state in the served partitions, sorted."""
        with self._topics.lock:
            return sorted((k for shard in self._shards.values() for k in shard.state),
                          key=lambda k: (k[0], str(k[1]), k[2]))

    # --- internals ------------------------------------------------------------------------

    def _locate(self, group_id: str, topic_id: uuid.UUID, partition: int
                ) -> tuple[int, _Shard | None]:
        if (self._serve_all and not self._topics.read_only
                and self._topics.existing_topic(SHARE_STATE_TOPIC) is None):
            # Made now (as Kafka makes it on the first FindCoordinator), so that the
            # partition count placing this key is the one the topic has.
            self._topics.internal_topic(SHARE_STATE_TOPIC)
        where = self.partition_for(group_id, topic_id, partition)
        return where, self._shard(where)

    def _topic_exists(self, topic_id: uuid.UUID, partition: int) -> bool:
        count = self._topic_partition_count(topic_id)
        return count is not None and count > partition

    def _state_record(self, shard: _Shard, key: _Key, current: _Offset, *, leader_epoch: int,
                      start_offset: int, delivery_complete_count: int,
                      batches: Sequence[StateBatch]
                      ) -> tuple[int, ShareSnapshotValue | ShareUpdateValue]:
        """Kafka's ``generateShareStateRecord``."""
        new_start = max(start_offset, current.start_offset)
        complete = delivery_complete_count
        if start_offset == current.start_offset:
            complete = max(delivery_complete_count, current.delivery_complete_count)
        elif start_offset < current.start_offset:
            complete = current.delivery_complete_count
        if shard.update_counts.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
            now = self._now_ms()
            return SHARE_SNAPSHOT, ShareSnapshotValue(
                current.snapshot_epoch + 1, current.state_epoch, leader_epoch, new_start,
                now, now, tuple(combine_state_batches(current.batches, batches, new_start)),
                complete)
        return SHARE_UPDATE, ShareUpdateValue(
            current.snapshot_epoch, leader_epoch, new_start,
            tuple(combine_state_batches((), batches, new_start)), complete)

    def _write(self, partition: int, shard: _Shard, record_type: int, key: _Key,
               value: ShareSnapshotValue | ShareUpdateValue | None) -> ErrorCode:
        """Append one record and replay it into ``shard``; the append's failure as Kafka's
        coordinator runtime maps it (NOT_COORDINATOR when the partition is not led here,
        COORDINATOR_NOT_AVAILABLE otherwise)."""
        raw_key = records.encode_key(record_type, *key)
        if value is None:
            raw_value = None
        elif isinstance(value, ShareSnapshotValue):
            raw_value = records.encode_snapshot_value(value)
        else:
            raw_value = records.encode_update_value(value)
        try:
            offset = self._append(partition, [(raw_key, raw_value)])
        except SeglogError as exc:
            log.warning("share coordinator: appending to %s-%d failed: %s", SHARE_STATE_TOPIC,
                        partition, exc)
            return _error(runtime_error_code(exc.kafka_error_code))
        shard.replay(offset, record_type, key, value)
        return _OK

    def _append(self, partition: int, batch: list[Record]) -> int:
        """Append ``batch``; the offset of its first record (-1 when an appender that does
        not tell wrote it)."""
        if self._appender is not None:
            return self._appender(partition, batch)
        self._topics.check_writable()
        topic = self._topics.internal_topic(SHARE_STATE_TOPIC)
        now = self._now_ms()
        first, _last = topic.log(partition).append_batch(
            [v for _k, v in batch], keys=[k for k, _v in batch], timestamps_ms=[now] * len(batch),
            compression=self.config.compression)
        self._topics.notify_appended()
        return int(first)


def _replay_raw(shard: _Shard, offset: int, raw_key: Any, raw_value: Any) -> None:
    """Replay one record read from the log; keys of other types are skipped."""
    if raw_key is None:
        raise CorruptRecordError("a share coordinator record has a null key")
    raw_key = bytes(raw_key)
    if len(raw_key) >= 2 and int.from_bytes(raw_key[:2], "big", signed=True) not in \
            records.KEY_TYPES:
        log.warning("share coordinator: skipping a record of unknown type at offset %d", offset)
        return
    key = records.decode_key(raw_key)
    value = None if raw_value is None else records.decode_value(key.record_type,
                                                                bytes(raw_value))
    try:
        _replay_value(shard, offset, key, value)
    except ValueError as exc:  # batches the combiner refuses: Kafka's load fails likewise
        raise CorruptRecordError(f"a ShareUpdate record does not merge: {exc}") from None


def _replay_value(shard: _Shard, offset: int, key: records.ShareStateKey,
                  value: ShareSnapshotValue | ShareUpdateValue | None) -> None:
    if value is None and key.record_type == SHARE_UPDATE:
        # Kafka writes none, and its loader fails on one (the update's value is read).
        raise CorruptRecordError("a ShareUpdate record without a value")
    shard.replay(offset, key.record_type, (key.group_id, key.topic_id, key.partition), value)
