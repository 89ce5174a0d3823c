"""Log compaction: Kafka's cleaner, for one partition (``LogCleaner.Cleaner``,
``LogCleanerManager``).

A compacted log keeps at least the latest record of every key. One cleaning pass:

1. **Choose** (§5.1). The *dirty* section starts at the cleaner checkpoint (``first dirty
   offset``; the log start when there is none or it is outside [start, end]) and ends at the
   *first uncleanable offset*: the minimum of the last stable offset, the active segment's
   base, and (``min.compaction.lag.ms`` > 0) the base
   of the first dirty segment whose largest timestamp is newer than ``now - lag``, rounded down
   to the start of its segment. The log is cleaned when ``cleanable / (clean + cleanable)``
   bytes exceeds ``min.cleanable.dirty.ratio``, or when ``max.compaction.lag.ms`` has passed
   for the oldest dirty segment's first batch and there is something to clean.
2. **Map** (§5.3.1). A :class:`KeyMap` of ``cleaner_memory_bytes_max`` bytes is filled with
   ``key -> latest offset`` from the dirty section, batch by batch, in C for the native
   backend. When the map is full it stops mid-segment: ``end offset = map.latest_offset + 1``
   is where this pass stops and the next one resumes (progress is guaranteed: the map holds at
   least one key).
3. **Clean** (§5.3.2-5.3.8). Segments below the end offset are grouped (a group fits one
   segment's ``segment.bytes``, index bytes and 32-bit relative offsets) and each group is
   rewritten into one new segment ``<base>.log.cleaned``. Per record: kept when past the map's
   latest offset; keyless records are dropped; otherwise kept iff it is the latest for its key
   and has a value, or is a tombstone whose batch has no delete horizon yet or whose horizon
   has not passed. Per batch: all kept and no horizon needed -> copied byte for byte; none kept
   -> dropped, unless the batch must stay as an empty 61-byte header (the last batch of the
   round, of each group, or of an idempotent producer, so that offsets and sequence numbers
   survive); otherwise re-encoded with the same codec, base offset, producer fields, leader
   epoch and original last offset (``encode_batch(offset_deltas=..., last_offset_delta=...)``).
   Offsets are never renumbered. A batch whose kept records include a tombstone and that has
   no delete horizon gets ``now + delete.retention.ms`` (attribute bit 6); a later pass after
   the horizon drops those tombstones.
4. **Swap** (§5.3.9), under the Log's lock: ``.cleaned -> .swap`` (fsync dir), the old
   segments' files -> ``.deleted``, ``.swap -> ""`` (fsync dir), then the Log publishes the new
   segment chain and deletes the old files after ``file.delete.delay.ms``. A crash at any step
   leaves, after :mod:`seglog.storage.loader` resolves the leftovers on open, either the old segments
   (only ``.cleaned`` files existed: they are deleted) or the new one (a ``.swap`` existed: old
   segments in its range are deleted and the swap completed). Keeping the last batch of each
   group makes the new segment's offset range reach the end of the group, so the loader's
   range rule removes every old segment of the group.
5. **Checkpoint**: the Log's ``cleaner_checkpoint`` becomes the end offset of the map.

Transactions (§5.3.7, Kafka's ``CleanedTransactionMetadata``): the aborted transactions of the
range come from the ``.txnindex`` files; their batches are neither mapped nor kept. Nothing at
or above the last stable offset is cleaned. Each producer the producer state still knows keeps
the batch holding its last data offset (or, with none, its last marker of the current epoch),
emptied if need be, so duplicates are still detected and zombies still fenced after
compaction. An ABORT marker is kept, and its entry copied into the cleaned segment's
``.txnindex``, while this pass still saw batches of its transaction; a COMMIT marker while the
pass saw batches of its transaction. A marker that is no longer needed first gets a delete
horizon (``now + delete.retention.ms``) and is removed by a later pass once the horizon has
passed: two passes, so a consumer that read the data has time to read the marker.

What the cleaner needs from a Log is :class:`CleanableLog`; :meth:`seglog.storage.log.Log.compact` is
the public entry. The Log's writer lock is held for the whole pass (appends wait); reads do not
wait.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import struct
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Protocol, Sequence

from .. import filenames
from .. import format as fmt
from ..errors import CorruptRecordError
from .txnindex import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from .._contract import Backend, KeyMap, KeyMapModule, Segment

__all__ = [
    "CleanableLog",
    "CleanableOffsets",
    "CleanerStats",
    "build_offset_map",
    "cleanable_offsets",
    "clean_log",
    "dirty_bytes",
    "first_dirty_offset",
    "group_segments_by_size",
]

#: Bytes of output gathered before one ``Segment.append`` of the cleaned segment.
WRITE_CHUNK_BYTES = 1 << 20
#: Swap steps at which tests may inject a crash (``clean_log(..., crash_after=step)``).
SWAP_STEPS = ("cleaned", "swap", "deleted", "final")

_UINT32 = struct.Struct(">I")


class CleanableLog(Protocol):
    """What the cleaner uses of a Log (:class:`seglog.storage.log.Log` provides it).

    ``segments`` in offset order, the last one active; ``cleaning()`` a context manager that
    holds the writer lock (re-entrant) for the pass; ``cleaner_checkpoint`` the per-partition
    cleaner checkpoint (None when there is none; the Store gathers it into
    ``cleaner-offset-checkpoint``); ``last_stable_offset`` is optional (the high watermark is
    used without it). ``replace_segments(new, old, now_ms=, new_txn_index=,
    old_txn_indexes=)`` publishes the segment chain with ``new`` in place of ``old`` (whose
    files, ``.txnindex`` included, the cleaner already renamed to ``.deleted``) and deletes the
    old files after ``file.delete.delay.ms``. Optional: ``aborted_transactions(start, upper)``
    (the txn indexes), ``producer_state`` (whose producers keep their last batch) and
    ``txn_index(base)`` (the log's own index objects, so its cache follows the swap).
    """

    dir_path: str
    config: Any
    backend: Any
    segments: Sequence[Any]
    start_offset: int
    end_offset: int
    high_watermark: int
    cleaner_checkpoint: int | None

    def cleaning(self) -> ContextManager[Any]: ...

    def replace_segments(self, new_segment: Any, old_segments: Sequence[Any], *,
                         now_ms: int, new_txn_index: TransactionIndex | None = None,
                         old_txn_indexes: list | None = None) -> None: ...


@dataclass
class CleanerStats:
    """What one :func:`clean_log` call did. ``skipped`` is '' when the log was cleaned, else
    why not. Byte counts are ``.log`` bytes; ``duration_ms`` is wall time of the pass."""

    skipped: str = ""
    first_dirty_offset: int = -1
    first_uncleanable_offset: int = -1
    end_offset: int = -1
    dirty_ratio: float = 0.0
    compaction_delay_ms: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_dropped: int = 0
    batches_copied: int = 0
    batches_rebuilt: int = 0
    batches_emptied: int = 0
    batches_dropped: int = 0
    map_bytes_read: int = 0
    map_records: int = 0
    map_size: int = 0
    map_slots: int = 0
    map_utilization: float = 0.0
    map_full: bool = False
    groups: int = 0
    segments_cleaned: int = 0
    duration_ms: float = 0.0
    group_bases: list = field(default_factory=list)

    @property
    def mb_per_s(self) -> float:
        """Cleaning throughput: bytes read from the segments cleaned, MB (1e6) per second."""
        return self.bytes_read / 1e6 / (self.duration_ms / 1e3) if self.duration_ms > 0 else 0.0

    def as_dict(self) -> dict:
        """The counters as a plain dict (for logs and JSON)."""
        return asdict(self)


@dataclass(frozen=True)
class CleanableOffsets:
    """Where a pass may clean: ``[first_dirty_offset, first_uncleanable_offset)`` is dirty
    (``first_uncleanable_offset`` is a segment base); ``clean_bytes`` and ``cleanable_bytes``
    are Kafka's ratio terms; ``compaction_delay_ms`` > 0 when max.compaction.lag.ms has passed
    for a dirty segment by that much."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int

    @property
    def dirty_ratio(self) -> float:
        """``cleanable / (clean + cleanable)`` bytes, 0 for an empty log."""
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def must_clean_now(self) -> bool:
        """max.compaction.lag.ms forces a clean (and there is something to clean)."""
        return self.compaction_delay_ms > 0 and self.cleanable_bytes > 0


class _InjectedCrash(Exception):
    """Raised by the swap when a test asked for a crash after a step."""


# --- choosing what to clean ------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _overlapping(segments: Sequence[Any], lo: int, hi: int) -> list[Any]:
    """Kafka's ``logSegments(lo, hi)``: the segment holding ``lo`` (floor) and every later one
    whose base is < ``hi``."""
    start = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= lo:
            start = i
        else:
            break
    return [s for s in segments[start:] if s.base_offset < hi]


def _largest_timestamp_ms(segment: Any) -> int:
    """Kafka's ``LogSegment.largestTimestamp``: the max record timestamp, else the mtime."""
    if segment.max_timestamp_ms >= 0:
        return segment.max_timestamp_ms
    return segment.last_modified_ms


def first_dirty_offset(log: CleanableLog) -> int:
    """The cleaner checkpoint, reset to the log start when absent or outside [start, end]
    (``LogCleanerManager.cleanableOffsets``)."""
    checkpoint = getattr(log, "cleaner_checkpoint", None)
    start, end = log.start_offset, log.end_offset
    if checkpoint is None or checkpoint < start or checkpoint > end:
        return start
    return checkpoint


def cleanable_offsets(log: CleanableLog, now_ms: int) -> CleanableOffsets:
    """First dirty and first uncleanable offsets, clean/cleanable bytes and the
    max.compaction.lag.ms delay (§5.1; ``cleanableOffsets``, ``calculateCleanableBytes``,
    ``maxCompactionDelay``)."""
    segments = list(log.segments)
    config = log.config
    dirty_start = first_dirty_offset(log)
    active = segments[-1]
    non_active = segments[:-1]
    dirty_segments = _overlapping(non_active, dirty_start, active.base_offset)
    last_stable = getattr(log, "last_stable_offset", None)
    if last_stable is None:
        last_stable = log.high_watermark
    uncleanable = min(last_stable, active.base_offset)
    if config.min_compaction_lag_ms > 0:
        too_new = now_ms - config.min_compaction_lag_ms
        for segment in dirty_segments:
            if _largest_timestamp_ms(segment) > too_new:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    # Round down to the base of the non-active segment holding it (a segment is cleaned whole
    # or not at all); the active segment's base when it lies there.
    first_uncleanable = active.base_offset
    if uncleanable < active.base_offset:
        for segment in non_active:
            if segment.base_offset > uncleanable:
                break
            first_uncleanable = segment.base_offset
    clean_bytes = sum(s.size_bytes for s in segments if s.base_offset < dirty_start)
    cleanable_bytes = sum(
        s.size_bytes
        for s in _overlapping(segments, min(dirty_start, first_uncleanable), first_uncleanable))
    # max.compaction.lag.ms: the earliest first-batch timestamp among dirty non-active segments.
    first_timestamps = [s.first_batch_timestamp_ms for s in dirty_segments
                        if s.first_batch_timestamp_ms > 0]
    delay = 0
    if first_timestamps:
        clean_until = now_ms - max(config.max_compaction_lag_ms, 0)
        earliest = min(first_timestamps)
        if earliest < clean_until:
            delay = clean_until - earliest
    return CleanableOffsets(dirty_start, first_uncleanable, clean_bytes, cleanable_bytes, delay)


def dirty_bytes(log: CleanableLog, now_ms: int | None = None) -> tuple[int, int]:
    """``(clean_bytes, cleanable_bytes)`` of ``log`` now (for choosing the filthiest log)."""
    offsets = cleanable_offsets(log, _now_ms() if now_ms is None else now_ms)
    return offsets.clean_bytes, offsets.cleanable_bytes


# --- reading segments ------------------------------------------------------------------------


def _whole_view(segment: Any, from_offset: int | None = None) -> memoryview:
    """A zero-copy view of the segment's batches from the one holding ``from_offset`` (all of
    them when None). Callers drop it rather than ``release()`` it: Batch objects of the native
    codec may still hold the buffer."""
    if segment.size_bytes == 0:
        return memoryview(b"")
    offset = segment.base_offset if from_offset is None else max(from_offset, segment.base_offset)
    if offset >= segment.next_offset:
        return memoryview(b"")
    return segment.read(offset, segment.size_bytes)


class _CleanedTxns:
    """Kafka's ``CleanedTransactionMetadata``: walks the batches of a cleaning range in order,
    knowing the aborted transactions of the range, and says which data batches are aborted
    and which markers may be discarded. ``cleaned_index``: the cleaned segment's
    ``.txnindex``, which receives the aborts whose markers stay."""

    def __init__(self, cleaned_index: TransactionIndex | None = None):
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seen: set = set()
        self._ongoing_aborted: dict[int, list] = {}  # pid -> [AbortedTxn, last batch seen]
        self._ongoing_committed: set = set()
        self.cleaned_index = cleaned_index

    def add_aborted(self, aborted_txns: list) -> None:
        for txn in aborted_txns:
            if txn not in self._seen:  # an abort overlaps several segments' ranges
                self._seen.add(txn)
                heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch(self, batch: Any) -> bool:
        """Whether the marker may be discarded (its transaction has no batch left here)."""
        self._consume_up_to(batch.last_offset)
        if batch.record_count == 0:
            return True  # an emptied marker: already cleaned
        control_type = batch.control_type()
        producer_id = batch.producer_id
        if control_type == fmt.CONTROL_TYPE_ABORT:
            metadata = self._ongoing_aborted.pop(producer_id, None)
            if metadata is not None and metadata[1] is not None:
                # Batches of the transaction were seen: keep the marker and its entry.
                if self.cleaned_index is not None:
                    self.cleaned_index.append(metadata[0])
                return False
            return True
        if control_type == fmt.CONTROL_TYPE_COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_data_batch(self, batch: Any) -> bool:
        """Whether the data batch belongs to an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        metadata = self._ongoing_aborted.get(batch.producer_id)
        if metadata is not None:
            metadata[1] = batch.last_offset
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False


def _aborted_in(log: CleanableLog, start: int, upper_bound: int) -> list:
    """The aborted transactions overlapping ``[start, upper_bound)`` (the log's txn indexes)."""
    collect = getattr(log, "aborted_transactions", None)
    return collect(start, upper_bound) if collect is not None else []


def _last_records(log: CleanableLog) -> dict:
    """Producer id -> LastRecord of the producers the log's producer state knows."""
    state = getattr(log, "producer_state", None)
    return state.last_records_of_active_producers() if state is not None else {}


# --- the offset map --------------------------------------------------------------------------


def _checked_batches(backend: Any, view: memoryview, segment: Any) -> Any:
    """The batches of ``view`` (a whole-segment read of ``segment``), each with its CRC32C
    verified and its base offset above the previous batch's last offset: the cleaner
    decides what to keep from keys and offsets, so it must not read them from corrupt bytes.
    CorruptRecordError naming the segment's file and the batch's position otherwise (the
    cleaning pass of that log is aborted; nothing it had not swapped in is changed)."""
    previous_next = -1
    batch = None
    try:
        for batch in backend.iter_batches(view, check_offsets=True):
            batch.ensure_valid()
            if batch.base_offset < previous_next:
                raise CorruptRecordError(
                    f"base offset {batch.base_offset} is not above the previous batch's last "
                    f"offset {previous_next - 1}", reason=fmt.REASON_OFFSETS_NOT_INCREASING,
                    position=batch.position)
            previous_next = batch.next_offset
            yield batch
    except CorruptRecordError as exc:
        position = exc.position if exc.position >= 0 else (
            batch.position if batch is not None else 0)
        raise CorruptRecordError(
            f"cleaner: corrupt batch in {segment.log_path} at position {position}: {exc}",
            reason=exc.reason, position=position) from exc


def build_offset_map(backend: Backend, segments: Sequence[Segment], keymap: KeyMap, start: int,
                     end: int,
                     *, aborted_txns: Sequence[AbortedTxn] = (),
                     stats: CleanerStats | None = None) -> bool:
    """Fill ``keymap`` with the keys of ``[start, end)`` (Kafka's ``buildOffsetMap``); returns
    True when the map filled before ``end``. Afterwards ``keymap.latest_offset + 1`` is where
    the pass stops: the last offset put when full, else ``end - 1`` (gaps skipped).
    ``aborted_txns``: the aborted transactions of the range, whose batches are not mapped.

    Every batch is checked before its keys are mapped (CRC32C, base offsets increasing):
    a corrupt key in the map could make the clean drop the live records of another key.
    CorruptRecordError (naming the segment and position) aborts the pass before anything
    was written."""
    keymap.clear()
    txns = _CleanedTxns()
    txns.add_aborted(list(aborted_txns))
    dirty = _overlapping(segments, start, end)
    for i, segment in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        view = _whole_view(segment, start)
        for batch in _checked_batches(backend, view, segment):
            if batch.base_offset >= end:
                break
            if stats is not None:
                stats.map_bytes_read += batch.size_bytes
                stats.map_records += batch.record_count
            if batch.is_control:
                txns.on_control_batch(batch)
            elif not txns.on_data_batch(batch):
                data = view[batch.position:batch.position + batch.size_bytes]
                if not keymap.put_batch_keys(data, start_offset=start):
                    return True
            if batch.last_offset >= start:
                keymap.update_latest_offset(batch.last_offset)
        keymap.update_latest_offset(next_start - 1)
    return False


# --- grouping --------------------------------------------------------------------------------


def group_segments_by_size(segments: Sequence[Any], *, segment_bytes_max: int,
                           index_bytes_max: int, first_uncleanable_offset: int) -> list[list[Any]]:
    """Kafka's ``groupSegmentsBySize`` (§5.3.2): runs of consecutive segments whose total log
    bytes fit ``segment_bytes_max``, whose offset- and time-index bytes each fit
    ``index_bytes_max``, and whose offsets fit 32-bit relative offsets from the group base
    (checked with the next segment's base - 1, or ``first_uncleanable_offset - 1``; skipped for
    empty segments)."""
    groups: list[list[Any]] = []
    rest = list(segments)
    i = 0
    while i < len(rest):
        group = [rest[i]]
        log_bytes = rest[i].size_bytes
        offset_index_bytes = rest[i].offset_index.size_bytes
        time_index_bytes = rest[i].time_index.size_bytes
        i += 1
        while i < len(rest):
            candidate = rest[i]
            last_offset = (rest[i + 1].base_offset - 1 if i + 1 < len(rest)
                           else first_uncleanable_offset - 1)
            if not (log_bytes + candidate.size_bytes <= segment_bytes_max
                    and offset_index_bytes + candidate.offset_index.size_bytes <= index_bytes_max
                    and time_index_bytes + candidate.time_index.size_bytes <= index_bytes_max
                    and (candidate.size_bytes == 0
                         or last_offset - group[0].base_offset <= fmt.INT32_MAX)):
                break
            group.append(candidate)
            log_bytes += candidate.size_bytes
            offset_index_bytes += candidate.offset_index.size_bytes
            time_index_bytes += candidate.time_index.size_bytes
            i += 1
        groups.append(group)
    return groups


# --- cleaning one group ----------------------------------------------------------------------


def _empty_batch(backend: Any, batch: Any) -> bytes:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader`` for ``batch``: 61 bytes, no records,
    no compression, base timestamp -1, same base offset, last offset delta, max timestamp,
    producer fields, leader epoch and timestamp-type/transactional/control bits."""
    attributes = batch.attributes & (
        fmt.TIMESTAMP_TYPE_MASK | fmt.TRANSACTIONAL_FLAG_MASK | fmt.CONTROL_FLAG_MASK)
    header = bytearray(fmt.BATCH_HEADER.pack(
        batch.base_offset, fmt.RECORD_BATCH_OVERHEAD - fmt.LOG_OVERHEAD,
        batch.partition_leader_epoch, fmt.MAGIC_V2, 0, attributes, batch.last_offset_delta,
        fmt.NO_TIMESTAMP, batch.max_timestamp_ms, batch.producer_id, batch.producer_epoch,
        batch.base_sequence, 0))
    crc = backend.crc32c(memoryview(header)[fmt.ATTRIBUTES_POSITION:])
    _UINT32.pack_into(header, fmt.CRC_POSITION, crc)
    return bytes(header)


def _rebuild(backend: Any, batch: Any, mask: Any, horizon_ms: int) -> bytes:
    """Re-encode the kept records of ``batch`` with their original offsets (§1.6, §5.3.5)."""
    # The CRC was checked by _checked_batches before the batch got here.
    kept = [record for record, keep in zip(batch.records(check_crcs=False), mask) if keep]
    headers = [record.headers for record in kept]
    return backend.encode_batch(
        [record.value for record in kept],
        keys=[record.key for record in kept],
        timestamps_ms=[record.timestamp_ms for record in kept],
        headers=headers if any(headers) else None,
        base_offset=batch.base_offset,
        compression=batch.compression,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=horizon_ms,
        offset_deltas=[record.offset - batch.base_offset for record in kept],
        last_offset_delta=batch.last_offset_delta,
    )


class _Writer:
    """Gathers output batches (views of the source mmap or new bytes) and appends them to the
    cleaned segment about WRITE_CHUNK_BYTES at a time (offsets kept: assign_offsets=False)."""

    def __init__(self, segment: Any, stats: CleanerStats):
        self.segment = segment
        self.stats = stats
        self.pieces: list = []
        self.pending_bytes = 0

    def add(self, data: Any) -> None:
        self.pieces.append(data)
        self.pending_bytes += len(data)
        if self.pending_bytes >= WRITE_CHUNK_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.pieces:
            return
        data = self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)
        self.segment.append(data, assign_offsets=False)
        self.stats.bytes_written += self.pending_bytes
        self.pieces.clear()
        self.pending_bytes = 0


def _marker_with_horizon(backend: Any, batch: Any, horizon_ms: int) -> bytes:
    """A copy of the end-transaction marker ``batch`` with a delete horizon (§1.6): attribute
    bit 6, base timestamp ``horizon_ms`` and the record's timestamp delta rewritten so its
    absolute timestamp is kept. The codec frames it (tests/twins/test_codec_control.py checks
    the bytes against the batch this function used to frame by hand)."""
    (record,) = batch.records(check_crcs=False)  # checked by _checked_batches
    _version, coordinator_epoch = fmt.END_TXN_MARKER_VALUE.unpack_from(record.value)
    return backend.encode_control_batch(
        batch.control_type(check_crcs=False), producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, coordinator_epoch=coordinator_epoch,
        base_offset=batch.base_offset, timestamp_ms=record.timestamp_ms,
        partition_leader_epoch=batch.partition_leader_epoch,
        timestamp_type=batch.timestamp_type, delete_horizon_ms=horizon_ms)


def _is_last_of_producer(batch: Any, last_records: dict) -> bool:
    """Kafka's ``isBatchLastRecordOfProducer``: the batch holds the last data offset of a
    producer the state knows, or (no data offset known) it is that producer's marker of its
    current epoch."""
    last = last_records.get(batch.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return batch.last_offset == last.last_data_offset
    return batch.is_control and batch.producer_epoch == last.producer_epoch


def _clean_into(backend: Any, source: Any, writer: _Writer, keymap: Any, *, now_ms: int,
                delete_retention_ms: int, retain_last_offsets: set, txns: _CleanedTxns,
                last_records: dict, stats: CleanerStats) -> None:
    """Copy the batches of ``source`` that survive into ``writer`` (Kafka's ``cleanInto``,
    ``checkBatchRetention`` and ``MemoryRecords.filterTo``). Every batch is checked first
    (CRC32C, base offsets increasing, :func:`_checked_batches`): CorruptRecordError aborts
    the pass, and the caller deletes the unfinished ``.cleaned`` segment."""
    view = _whole_view(source)
    try:
        for batch in _checked_batches(backend, view, source):
            data = view[batch.position:batch.position + batch.size_bytes]
            stats.bytes_read += batch.size_bytes
            count = batch.record_count
            if batch.is_control:
                can_discard = txns.on_control_batch(batch)
                discard_records = (can_discard and batch.has_delete_horizon
                                   and batch.delete_horizon_ms <= now_ms)
            else:
                can_discard = discard_records = txns.on_data_batch(batch)
            retain_empty = ((batch.producer_id >= 0 and _is_last_of_producer(batch, last_records))
                            or batch.last_offset in retain_last_offsets)
            if discard_records:
                mask, kept, tombstone_kept = None, 0, False
            elif batch.is_control:
                mask, kept, tombstone_kept = None, count, False
            else:
                mask, kept, tombstone_kept = keymap.retain_mask(data, now_ms=now_ms)
            stats.records_kept += kept
            stats.records_dropped += count - kept
            # A marker of a transaction with nothing left gets a horizon, then goes (§5.3.7).
            need_horizon = ((tombstone_kept or (can_discard and batch.is_control))
                            and not batch.has_delete_horizon)
            if kept == 0:
                if not retain_empty:
                    stats.batches_dropped += 1
                elif count == 0:
                    writer.add(data)
                    stats.batches_copied += 1
                else:
                    writer.add(_empty_batch(backend, batch))
                    stats.batches_emptied += 1
            elif kept == count and not need_horizon:
                writer.add(data)
                stats.batches_copied += 1
            elif batch.is_control:
                writer.add(_marker_with_horizon(backend, batch, now_ms + delete_retention_ms))
                stats.batches_rebuilt += 1
            else:
                if need_horizon:
                    horizon_ms = now_ms + delete_retention_ms
                else:
                    horizon_ms = batch.delete_horizon_ms if batch.has_delete_horizon else -1
                writer.add(_rebuild(backend, batch, mask, horizon_ms))
                stats.batches_rebuilt += 1
    finally:
        writer.flush()  # the pieces are views of this source's mmap: write them now


def _remove_leftovers(dir_path: str, base_offset: int, suffix: str) -> None:
    for path in filenames.segment_files(dir_path, base_offset):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


def _clean_group(log: CleanableLog, group: Sequence[Any], keymap: Any, *, now_ms: int,
                 upper_bound_offset: int, last_records: dict,
                 stats: CleanerStats) -> tuple[Any, TransactionIndex]:
    """Write the cleaned copy of ``group`` as ``<group base>.log.cleaned`` (and
    ``.txnindex.cleaned``); return it flushed and inactive (indexes trimmed), its mtime that
    of the group's last segment, with its transaction index."""
    backend, config = log.backend, log.config
    base = group[0].base_offset
    _remove_leftovers(log.dir_path, base, filenames.CLEANED_SUFFIX)
    cleaned = backend.Segment.open(
        log.dir_path, base, create=True, index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes, max_message_bytes=fmt.INT32_MAX,
        file_suffix=filenames.CLEANED_SUFFIX)
    txn_index = TransactionIndex(log.dir_path, base, file_suffix=filenames.CLEANED_SUFFIX)
    txns = _CleanedTxns(txn_index)
    try:
        writer = _Writer(cleaned, stats)
        last_batch_offsets = {upper_bound_offset - 1}
        last = group[-1]
        if last.size_bytes > 0:
            last_batch_offsets.add(last.next_offset - 1)  # crash safety: see module docstring
        for i, source in enumerate(group):
            # Kafka's cleanSegments: the aborts overlapping this segment, from the indexes.
            upper = (group[i + 1].base_offset if i + 1 < len(group)
                     else max(source.next_offset, source.base_offset))
            txns.add_aborted(_aborted_in(log, source.base_offset, upper))
            _clean_into(backend, source, writer, keymap, now_ms=now_ms,
                        delete_retention_ms=config.delete_retention_ms,
                        retain_last_offsets=last_batch_offsets, txns=txns,
                        last_records=last_records, stats=stats)
        cleaned.on_become_inactive()
        cleaned.flush()
        txn_index.flush()
        txn_index.close()
        mtime_ns = os.stat(last.log_path).st_mtime_ns
        os.utime(cleaned.log_path, ns=(mtime_ns, mtime_ns))
    except BaseException:
        cleaned.delete()
        txn_index.delete()
        raise
    return cleaned, txn_index


# --- the swap --------------------------------------------------------------------------------


def _fsync_dir(dir_path: str) -> None:
    fd = os.open(dir_path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap(log: CleanableLog, cleaned: Any, txn_index: TransactionIndex, old: Sequence[Any], *,
          now_ms: int, crash_after: str | None) -> None:
    """§5.3.9: ``.cleaned -> .swap``, old -> ``.deleted``, ``.swap -> ""``, fsync the directory,
    publish. ``crash_after`` (tests) raises _InjectedCrash after that step, leaving the files
    as a crash there would."""

    def step(name: str) -> None:
        if crash_after == name:
            raise _InjectedCrash(name)

    step("cleaned")
    txn_index.rename_suffix(filenames.SWAP_SUFFIX)
    cleaned.rename_suffix(filenames.SWAP_SUFFIX)
    _fsync_dir(log.dir_path)
    step("swap")
    old_txn_indexes = []
    for segment in old:
        segment.rename_suffix(filenames.DELETED_SUFFIX)
        old_index = _log_txn_index(log, segment.base_offset)
        old_index.close()
        old_index.rename_suffix(filenames.DELETED_SUFFIX)
        old_txn_indexes.append(old_index)
        step("deleted")
    txn_index.rename_suffix("")
    cleaned.rename_suffix("")
    _fsync_dir(log.dir_path)
    step("final")
    log.replace_segments(cleaned, list(old), now_ms=now_ms, new_txn_index=txn_index,
                         old_txn_indexes=old_txn_indexes)


def _log_txn_index(log: CleanableLog, base_offset: int) -> TransactionIndex:
    """The log's own object for a segment's ``.txnindex`` (so its cache follows renames)."""
    get = getattr(log, "txn_index", None)
    return get(base_offset) if get is not None else TransactionIndex(log.dir_path, base_offset)


def _map_bytes(keymap_module: KeyMapModule, memory_bytes_max: int, dirty_offsets: int) -> int:
    """Bytes for the key map: ``memory_bytes_max``, or less when the dirty section has fewer
    offsets than that map could hold (it then cannot fill, so the result is the same; filling
    128 MiB for a small log would cost more than the clean). The slack covers the step down
    to a prime slot count (prime gaps below 2**40 are < 800)."""
    km = keymap_module
    slots_needed = dirty_offsets * km.LOAD_FACTOR_DENOMINATOR // km.LOAD_FACTOR_NUMERATOR + 1024
    return min(memory_bytes_max, slots_needed * km.SLOT_BYTES)


# --- one pass --------------------------------------------------------------------------------


def clean_log(log: CleanableLog, now_ms: int | None = None, *, force: bool = False,
              memory_bytes_max: int | None = None, keymap: KeyMap | None = None,
              crash_after: str | None = None) -> CleanerStats:
    """One cleaning pass over ``log`` (see the module docstring); returns its statistics.

    Skipped (``stats.skipped`` says why) when ``cleanup.policy`` has no "compact", when there is
    nothing dirty below the first uncleanable offset, or when the dirty ratio is not above
    ``min.cleanable.dirty.ratio`` and max.compaction.lag.ms does not force a clean; ``force``
    ignores the policy and the ratio. ``memory_bytes_max`` (default: the config's
    ``cleaner_memory_bytes_max``) sizes the key map; ``keymap`` reuses one instead. Holds the
    Log's writer lock throughout. ``crash_after`` is for tests (one of SWAP_STEPS).
    """
    started = time.perf_counter()
    now = _now_ms() if now_ms is None else now_ms
    config = log.config
    stats = CleanerStats()
    if not force and not config.compaction_enabled:
        stats.skipped = "cleanup.policy does not contain compact"
        return stats
    with log.cleaning():
        segments = list(log.segments)
        offsets = cleanable_offsets(log, now)
        stats.first_dirty_offset = offsets.first_dirty_offset
        stats.first_uncleanable_offset = offsets.first_uncleanable_offset
        stats.dirty_ratio = offsets.dirty_ratio
        stats.compaction_delay_ms = offsets.compaction_delay_ms
        if offsets.first_dirty_offset >= offsets.first_uncleanable_offset:
            stats.skipped = "nothing cleanable"
            return stats
        if not force and not (offsets.dirty_ratio > config.min_cleanable_dirty_ratio
                              or offsets.must_clean_now):
            stats.skipped = (f"dirty ratio {offsets.dirty_ratio:.3f} <= "
                             f"min.cleanable.dirty.ratio {config.min_cleanable_dirty_ratio}")
            return stats
        backend = log.backend
        if keymap is None:
            keymap = backend.KeyMap(_map_bytes(
                backend.keymap, memory_bytes_max or config.cleaner_memory_bytes_max,
                offsets.first_uncleanable_offset - offsets.first_dirty_offset))
        full = build_offset_map(
            backend, segments, keymap, offsets.first_dirty_offset,
            offsets.first_uncleanable_offset,
            aborted_txns=_aborted_in(log, offsets.first_dirty_offset,
                                     offsets.first_uncleanable_offset),
            stats=stats)
        last_records = _last_records(log)
        end_offset = keymap.latest_offset + 1
        stats.end_offset = end_offset
        stats.map_full = full
        stats.map_size, stats.map_slots = keymap.size, keymap.slots
        stats.map_utilization = keymap.utilization
        to_clean = [s for s in segments[:-1] if s.base_offset < end_offset]
        groups = group_segments_by_size(
            to_clean, segment_bytes_max=config.segment_bytes,
            index_bytes_max=config.segment_index_bytes,
            first_uncleanable_offset=offsets.first_uncleanable_offset)
        for group in groups:
            cleaned, txn_index = _clean_group(
                log, group, keymap, now_ms=now,
                upper_bound_offset=offsets.first_uncleanable_offset,
                last_records=last_records, stats=stats)
            try:
                _swap(log, cleaned, txn_index, group, now_ms=now, crash_after=crash_after)
            except _InjectedCrash:
                raise
            stats.groups += 1
            stats.segments_cleaned += len(group)
            stats.group_bases.append(group[0].base_offset)
        log.cleaner_checkpoint = end_offset
    stats.duration_ms = (time.perf_counter() - started) * 1e3
    return stats
