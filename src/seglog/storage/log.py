"""One partition's log: a chain of segments in one directory, with Kafka's rules for appending,
rolling, reading, flushing, recovering, truncating and retention (Kafka's ``UnifiedLog`` and
``LocalLog``; kafka-format.md §2.6, §3, §4).

Offsets. The log holds the records ``[start_offset, end_offset)``. ``end_offset`` (Kafka's log
end offset, LEO) is the offset the next record gets. ``high_watermark`` is a separate value:
the offset below which records count as committed. Until replication exists it follows the end
offset after every append (``auto_high_watermark=True``); a replicated log moves it itself with
:meth:`Log.update_high_watermark`. Consumer-facing reads stop at the high watermark, retention
never deletes at or above it, and ``delete_records_before`` may not pass it.

Segments. The newest segment is *active*; appends go only there. Before an append the active
segment *rolls* (a new, empty segment starts at the end offset) when the append would make it
exceed ``segment_bytes``, when its first batch's timestamp is ``segment_ms`` (minus jitter)
older than the incoming batch's max timestamp (an empty segment never rolls on time; a segment
without timestamps uses its creation time), when either index is full, or when the incoming
last offset does not fit a 32-bit relative offset. The old segment is then flushed (fsync), so
the recovery point advances to the new base offset. The invariant kept throughout: the active
segment's next offset equals the log's end offset.

Durability. Appends reach the page cache. :meth:`Log.flush` fsyncs the unflushed segments and
persists the recovery point (everything below it is on disk); ``flush_messages`` and
``flush_ms`` flush automatically (checked on append and by :meth:`Log.maybe_flush`). Closing
flushes, persists the checkpoints and writes the clean-shutdown marker; the next open then
trusts the files. An open without the marker recovers every segment from the one holding the
recovery point (:mod:`seglog.storage.loader`). Where the recovery point and the log start offset are
kept is :mod:`seglog.storage.partition_state`'s business (standalone: Kafka-format checkpoint files in
the partition directory).

Producers and transactions (kafka-format.md §6; Kafka's ``UnifiedLog`` with
:mod:`seglog.storage.producer_state`). Batches carrying a producer id (``append_raw``, ``append_batch``
with producer fields, ``append_txn_marker``) are checked against the producer state after the
roll and before the write: a retry of one of the producer's last 5 batches writes nothing and
returns the original offsets; sequence, epoch, transaction-state and coordinator-epoch
violations raise. After the write the state takes the batches, an ABORT marker adds an entry
to the active segment's ``.txnindex``, and the *last stable offset* (the first offset of the
earliest open transaction, capped by the high watermark) is published with the reader
snapshot. The state is snapshotted (``<offset>.snapshot``) at every roll and on close,
loaded on open (corrupt snapshots deleted, strays removed, the log replayed past the latest),
rebuilt by truncation, and snapshots and ``.txnindex`` files go with their segments.
Recovering a segment rebuilds its ``.txnindex``. Idle producers without an open transaction
expire after ``producer_id_expiration_ms`` (checked at most every 10 minutes of ``now_ms``,
on append and retention). Reads take ``isolation``: ``"read_committed"`` stops at the last
stable offset, :meth:`Log.read` then lists the overlapping aborted transactions, and the
record-level readers skip aborted and control batches.

Threads. All mutating methods serialise on one lock. Reads (``read``, ``records``,
``read_columns``, ``sendfile``, ``offset_for_timestamp``) take an immutable snapshot of the
segment chain and of the end and high-watermark positions and read segments bounded by that
snapshot, so they see only whole batches that were fully appended. Because the Segment
contract says segments are not thread-safe, a read holds the same lock while it calls into a
segment (an index lookup and a header scan: microseconds; ``sendfile`` for as long as the
kernel takes to send); decoding and copying happen after, on the zero-copy views, without it.
The snapshot design is ready for lock-free reads once segments allow read-side calls
concurrent with one appender. ``wait_for_data`` blocks on a condition the writer signals;
nothing polls.

Untrusted bytes (issue 8). Every byte read from disk is checked before it is believed. The
record-decoding readers (:meth:`Log.records`, :meth:`Log.read_columns`, and the consumer and
internal-topic loaders above them) verify every batch's CRC32C by default (Kafka's consumer
``check.crcs``; ``check_crcs=False`` opts out) and that base offsets, which the CRC does not
cover, increase batch to batch, also across reads. Raw whole-batch reads (:meth:`Log.read`,
:meth:`Log.sendfile`) are served unverified, as Kafka's broker serves fetches. A read never
moves past a segment that still holds something it could not read (an unparseable header below
its end, a torn batch in a segment that has a later one): CorruptRecordError instead of
records that silently vanish. Every read (raw ones included) also bounds a segment's batches
by what the Log knows: offsets below the next segment's base offset, or below the log end
offset in the last segment; a batch past that (a raised base offset) is never handed out
(:func:`_cut_at_bound`: the batches before it are, then CorruptSegmentError with
``REASON_OFFSETS_OUTSIDE_SEGMENT``). On open the loader checks the segment chain and the
recovery point (overlaps, proven cuts, a log ending below its recovery point after a clean
shutdown are CorruptSegmentError; unproven gaps are reported), and a log start offset
checkpoint that cannot be a base offset is CorruptCheckpointError before anything is deleted. On open, indexes that name offsets the log does not hold are
rebuilt, but bytes are cut only where recovery after an unclean shutdown may cut them
(:mod:`seglog.storage.loader`). Integer arguments are checked alike on both backends
(:func:`seglog.storage.config.check_int`: TypeError for a non-integer, ValueError out of range).

Processes. A writer holds an exclusive lock on the directory (:mod:`seglog.storage.locking`); a second
writer gets :class:`~seglog.errors.LogLockedError`. ``read_only=True`` opens without the lock,
never changes a file, and :meth:`Log.refresh` follows the writer: new batches, new segments,
segments retention removed; it only ever exposes whole batches.

The Python layer never branches on the backend: it calls the :mod:`seglog.protocol` interface.
"""

from __future__ import annotations

import os
import random
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

from .. import filenames
from .. import format as fmt
from .._backend import get_backend
from .config import INT16_MAX, INT32_MAX, LogConfig, check_int, check_optional_int
from ..errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    CorruptSegmentError,
    InvalidRecordError,
    InvalidTimestampError,
    LogClosedError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from .loader import RecoveryReport, load_segments
from .locking import DirectoryLock
from .partition_state import PartitionDirState, PartitionState
from .producer_state import (
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    ProducerStateManager,
    rebuild_producer_state,
)
from .retention import (
    deletable_segments,
    retention_bytes_breached,
    retention_ms_breached,
    start_offset_breached,
)
from .segments import SegmentMap
from .transactions import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    checked_batches,
    collect_aborted_transactions,
    filter_batches,
)
from .txnindex import TransactionIndex

__all__ = ["Log", "LogConfig", "LogReadResult", "RecoveryReport"]

#: ``offset_for_timestamp`` sentinels (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

#: How often appends and retention drop expired producers (Kafka's
#: producer.id.expiration.check.interval.ms), counted from the open's ``now_ms``.
_EXPIRATION_CHECK_MS = PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS

#: Default and largest ``max_bytes`` of one read.
READ_BYTES_DEFAULT = 1 << 20
_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
#: The largest base offset a segment may have (a batch needs room for its next offset).
_BASE_OFFSET_MAX = 2**63 - 2


def _now_ms(now_ms: int | None) -> int:
    """``now_ms`` checked (:func:`~seglog.storage.config.check_int`), or the wall clock for None."""
    if now_ms is None:
        return int(time.time() * 1000)
    return check_int("now_ms", now_ms)


def _max_bytes(max_bytes: Any) -> int:
    """A read's ``max_bytes``: an int >= 0 (TypeError / ValueError otherwise), capped at
    INT32_MAX because segment positions are int32 (a larger bound reads the same bytes)."""
    return min(check_int("max_bytes", max_bytes, minimum=0), INT32_MAX)


# --- read results and snapshots -----------------------------------------------------------------


@dataclass(frozen=True)
class LogReadResult:
    """Whole batches read from one segment, as bytes and as a file range.

    * ``buffer``: a read-only memoryview of the batches (zero-copy: a view of the segment's
      mapping; it stays valid after the log moves on, is truncated or closed; release it to let
      a later ``truncate_to`` cut the range). Empty when nothing is readable.
    * ``offset``: the offset asked for. The first batch may start below it (a read inside a
      batch returns the whole batch; skip records below ``offset``).
    * ``next_offset``: the offset to read next (after the last batch; ``offset`` when empty).
    * ``log_path``, ``position``, ``size_bytes``: the same bytes as a range of the segment's
      ``.log`` file (for sendfile and a broker's fetch response); ``log_path`` is None when
      empty.
    * ``high_watermark``, ``start_offset``, ``end_offset``: the log's values when the read
      started; ``last_stable_offset`` too (Kafka's fetch response carries it).
    * ``aborted_transactions``: for ``isolation="read_committed"``, the aborted transactions
      (:class:`~seglog.storage.txnindex.AbortedTxn`) overlapping ``[offset, next_offset)``, which a
      consumer needs to skip their batches (:func:`seglog.storage.transactions.filter_batches`);
      None for read_uncommitted (Kafka's fetch response: null).
    """

    buffer: memoryview
    offset: int
    next_offset: int
    log_path: str | None
    position: int
    size_bytes: int
    high_watermark: int
    start_offset: int
    end_offset: int
    last_stable_offset: int = -1
    aborted_transactions: list | None = None


class _View(NamedTuple):
    """What readers see, published by the writer with one attribute store."""

    segments: SegmentMap
    start_offset: int
    end_offset: int
    end_position: int  # active segment size at end_offset
    high_watermark: int
    hw_base: int  # base offset of the segment the high watermark falls in
    hw_position: int  # its position there (a batch boundary)
    first_unstable: int | None  # producer state's first unstable offset (None: none)

    @property
    def last_stable_offset(self) -> int:
        """Kafka's ``UnifiedLog.lastStableOffset``: the first unstable offset when it is below
        the high watermark (never below the start offset), else the high watermark."""
        first = self.first_unstable
        if first is None or first >= self.high_watermark:
            return self.high_watermark
        return max(first, self.start_offset)


class _Retired:
    """A segment renamed ``.deleted`` with its transaction index and producer snapshot (the
    snapshot at its base, renamed ``.deleted`` too, or None); removed together later."""

    __slots__ = ("segment", "txn_index", "snapshot_path")

    def __init__(self, segment: Any, txn_index: TransactionIndex | None,
                 snapshot_path: str | None):
        self.segment = segment
        self.txn_index = txn_index
        self.snapshot_path = snapshot_path

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset

    def close(self) -> None:
        self.segment.close()
        if self.txn_index is not None:
            self.txn_index.close()

    def delete(self) -> None:
        self.segment.delete()
        if self.txn_index is not None:
            self.txn_index.delete()
        if self.snapshot_path is not None:
            try:
                os.remove(self.snapshot_path)
            except FileNotFoundError:
                pass


class _SlicedColumns:
    """A slice ``[lo, hi)`` of a backend Columns object (same attributes, same ``data``)."""

    def __init__(self, columns: Any, lo: int, hi: int):
        self.offsets = columns.offsets[lo:hi]
        self.timestamps_ms = columns.timestamps_ms[lo:hi]
        self.key_positions = columns.key_positions[lo:hi]
        self.key_lengths = columns.key_lengths[lo:hi]
        self.value_positions = columns.value_positions[lo:hi]
        self.value_lengths = columns.value_lengths[lo:hi]
        self.data = columns.data

    def __len__(self) -> int:
        return len(self.offsets)

    def _slot(self, positions: Any, lengths: Any, i: int) -> bytes | None:
        length = int(lengths[i])
        if length < 0:
            return None
        start = int(positions[i])
        return bytes(self.data[start:start + length])

    def key(self, i: int) -> bytes | None:
        """Key of record ``i`` (bytes or None)."""
        return self._slot(self.key_positions, self.key_lengths, i)

    def value(self, i: int) -> bytes | None:
        """Value of record ``i`` (bytes or None)."""
        return self._slot(self.value_positions, self.value_lengths, i)


def _nbytes(buffer: memoryview) -> int:
    """Length of a segment read; a released (necessarily empty, shared) view counts as 0.

    The pure Segment (b8b0466) returns one shared empty memoryview for empty reads and
    ``recover()`` of an empty segment releases it; until that is fixed, tolerate it here.
    """
    try:
        return buffer.nbytes
    except ValueError:
        return 0


def _batches_from(segments: SegmentMap, offset: int) -> Iterator[Any]:
    """The Batch objects of ``segments`` in order, from the batch holding ``offset`` (or the
    first after it) to the end; what producer-state replay reads."""
    first = True
    for segment in segments.from_offset(offset):
        position = 0
        if first:
            first = False
            located = segment.translate_offset(offset)
            if located is None:
                continue
            position = located[0]
        yield from segment.batches(position)


def _last_batch(buffer: memoryview) -> tuple[int, int]:
    """``(position, next_offset)`` of the last whole batch in ``buffer`` (which holds whole
    batches only, as segment reads return). The lengths are checked all the same (a length
    below the minimum would walk backwards forever): CorruptRecordError."""
    position, last, size = 0, 0, len(buffer)
    while position + fmt.LOG_OVERHEAD <= size:
        last = position
        length = _BATCH_PREFIX.unpack_from(buffer, position)[1]
        if length < fmt.RECORD_BATCH_OVERHEAD - fmt.LOG_OVERHEAD \
                or position + fmt.LOG_OVERHEAD + length > size:
            raise CorruptRecordError(
                f"batch length {length} at position {position} of a segment read is not a "
                "whole batch", position=position,
                reason=fmt.REASON_BATCH_TOO_SMALL
                if length < fmt.RECORD_BATCH_OVERHEAD - fmt.LOG_OVERHEAD else fmt.REASON_TRUNCATED)
        position += fmt.LOG_OVERHEAD + length
    base_offset = _INT64.unpack_from(buffer, last)[0]
    delta = _INT32.unpack_from(buffer, last + fmt.LAST_OFFSET_DELTA_POSITION)[0]
    return last, base_offset + delta + 1


def _cut_at_bound(segment: Any, buffer: memoryview, offset: int, bound: int, *,
                  last: bool) -> tuple[memoryview, int]:
    """``buffer`` (a read of ``segment`` at ``offset``) up to its first batch whose offsets
    reach ``bound`` -- the next segment's base offset, or the log end offset for the last
    segment -- and the next offset there. A batch's base offset is outside its CRC: a raised
    one in the last batch of a segment keeps offsets increasing inside the segment, and only
    the segment's bound shows it. The batches before it are served (a reader gets the
    records before the bad batch); when the first batch of the read is the bad one,
    CorruptSegmentError (``REASON_OFFSETS_OUTSIDE_SEGMENT``, its position in the ``.log``), so
    a reader stops there and keeps raising there."""
    position, previous_next, size = 0, offset, len(buffer)
    while position + fmt.LOG_OVERHEAD <= size:
        length = _BATCH_PREFIX.unpack_from(buffer, position)[1]
        base_offset = _INT64.unpack_from(buffer, position)[0]
        delta = _INT32.unpack_from(buffer, position + fmt.LAST_OFFSET_DELTA_POSITION)[0]
        if base_offset + delta + 1 > bound:
            break
        previous_next = base_offset + delta + 1
        position += fmt.LOG_OVERHEAD + length
    if position > 0:
        return buffer[:position], previous_next
    located = segment.translate_offset(offset)
    file_position = (located[0] if located is not None else 0) + position
    what = ("the log end offset" if last else "the next segment's base offset")
    raise CorruptSegmentError(
        f"batch at position {file_position} of {segment.log_path} has offsets "
        f"{base_offset}..{base_offset + delta}, at or above {what} {bound}: its base offset "
        "(outside the CRC) is corrupt", reason=fmt.REASON_OFFSETS_OUTSIDE_SEGMENT,
        position=file_position, path=segment.log_path, base_offset=segment.base_offset)


def _check_nothing_hidden(segment: Any, offset: int) -> None:
    """Before a read moves past ``segment`` because it returned nothing at or after
    ``offset``: the segment must really hold nothing there. It does if its offsets reach
    past ``offset`` or if its bytes go on after its last readable batch (a header that
    cannot be parsed below the end makes the segment look shorter than its file); going on
    to the next segment would then hide records. CorruptRecordError
    (REASON_UNREADABLE_BATCH, the position where the readable batches end)."""
    if segment.size_bytes == 0:
        return
    if segment.next_offset > max(offset, segment.base_offset):
        raise CorruptRecordError(
            f"segment {segment.log_path} ends at offset {segment.next_offset - 1} but no batch "
            f"at or after offset {offset} can be read from it",
            reason=fmt.REASON_UNREADABLE_BATCH)
    last = (segment.translate_offset(segment.next_offset - 1)
            if segment.next_offset > segment.base_offset else None)
    end = last[0] + last[2] if last is not None else 0
    if end != segment.size_bytes:
        raise CorruptRecordError(
            f"segment {segment.log_path} has {segment.size_bytes - end} bytes after its last "
            f"readable batch (position {end}): a batch there cannot be parsed",
            reason=fmt.REASON_UNREADABLE_BATCH, position=end)
    # A read-only segment shows whole batches only (a writer may be appending to the last
    # one); a segment that has a later one is complete, so a partial batch at the end of its
    # file is a torn write nobody recovered (a reader opened after a crash), not an append.
    try:
        file_bytes = os.path.getsize(segment.log_path)
    except OSError:
        return  # renamed or removed by retention meanwhile: nothing to compare
    if file_bytes != end:
        raise CorruptRecordError(
            f"segment {segment.log_path} ends with {file_bytes - end} bytes that are not a "
            f"whole batch (position {end}) and a later segment follows it",
            reason=fmt.REASON_TRUNCATED, position=end)


# --- the log ------------------------------------------------------------------------------------


class Log:
    """One partition directory: segments, roll, reads, flush, recovery, truncation, retention.

    Open with :meth:`Log.open`; use as a context manager or call :meth:`close`. See the module
    docstring for the offsets, the threading model and the durability rules.
    """

    # --- opening and closing ---------------------------------------------------------------------

    def __init__(self, *_args: Any, **_kwargs: Any):
        raise TypeError("use Log.open(path, ...)")

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        config: LogConfig | None = None,
        *,
        backend: str | None = None,
        read_only: bool = False,
        now_ms: int | None = None,
        state: PartitionState | None = None,
        auto_high_watermark: bool = True,
    ) -> "Log":
        """Open (creating if needed, unless ``read_only``) the partition directory ``path``.

        ``config`` defaults to ``LogConfig()`` (Kafka's defaults). ``backend`` is "native",
        "pure" or None (the default backend). A writer takes the directory lock
        (:class:`LogLockedError` if another writer holds it), removes the clean-shutdown
        marker, and loads the segments by Kafka's rules (:mod:`seglog.storage.loader`): temporary
        files resolved, missing or corrupt indexes rebuilt and, after an unclean shutdown,
        every segment from the recovery point validated and cut at the first invalid byte;
        what it did is in :attr:`recovery_report`. ``read_only=True`` takes no lock and
        changes nothing (``FileNotFoundError`` if the directory does not exist). ``state``
        replaces where the recovery point, log start offset and clean-shutdown marker are kept
        (default: :class:`~seglog.storage.partition_state.PartitionDirState`, files in ``path``).
        ``auto_high_watermark=False`` leaves the high watermark to
        :meth:`update_high_watermark` (replication); it starts at the end offset either way.
        ``now_ms`` is the clock for segment creation times (time-based roll of segments
        without timestamps).
        """
        log = object.__new__(cls)
        log._init(os.fspath(path), config or LogConfig(), backend, read_only, _now_ms(now_ms),
                  state, auto_high_watermark)
        return log

    def _init(self, dir_path: str, config: LogConfig, backend: str | None, read_only: bool,
              now_ms: int, state: PartitionState | None, auto_high_watermark: bool) -> None:
        self._dir = dir_path
        self._config = config
        self._roll_ms = self._max_segment_ms()
        self._be = get_backend(backend)
        self._read_only = read_only
        self._auto_hw = auto_high_watermark
        self._lock = threading.RLock()
        self._data_cond = threading.Condition(self._lock)
        self._waiters = 0  # threads in wait_for_data (appends notify only when there are some)
        self._closed = False
        self._dir_lock: DirectoryLock | None = None
        self._state = state if state is not None else PartitionDirState(dir_path)
        self._created_ms: dict[int, int] = {}
        self._jitter_ms: dict[int, int] = {}
        self._pending_deletes: list[tuple[int, Any]] = []  # (deadline_ms, _Retired or segment)
        self._txn_indexes: dict[int, TransactionIndex] = {}  # by segment base offset
        self._first_unstable: int | None = None  # published in _View
        self._last_expiration_ms = now_ms
        self._dir_dirty = False  # a segment file was created since the directory was fsynced
        if read_only:
            if not os.path.isdir(dir_path):
                raise FileNotFoundError(dir_path)
        else:
            os.makedirs(dir_path, exist_ok=True)
            self._dir_lock = DirectoryLock(dir_path)
        try:
            self._load(now_ms)
        except BaseException:
            if self._dir_lock is not None:
                self._dir_lock.close()
            raise

    def _load(self, now_ms: int) -> None:
        recovery_point, start_checkpoint, clean = self._state.load()
        if start_checkpoint is not None and not 0 <= start_checkpoint <= _BASE_OFFSET_MAX:
            # Kafka deletes every segment when the start is past the end; with a start that
            # cannot be a base offset the log could then never be written again. Refuse it
            # before anything is deleted.
            path = getattr(self._state, "log_start_offset_path",
                           f"the log start offset checkpoint of {self._dir}")
            partition = getattr(self._state, "topic_partition", os.path.basename(self._dir))
            raise CorruptCheckpointError(
                f"{path}: log start offset {start_checkpoint} of partition {partition} is not "
                f"a possible base offset (outside [0, {_BASE_OFFSET_MAX}])", path=str(path))
        start_checkpoint = start_checkpoint or 0
        self._psm = self._new_producer_state()

        def recover_segment(segment: Any, earlier: list) -> Any:
            return self._recover_segment(segment, earlier, start_checkpoint, now_ms)

        result = load_segments(
            self._dir, self._open_segment,
            recovery_point=recovery_point if recovery_point is not None else 0,
            log_start_offset=start_checkpoint, clean_shutdown=clean, read_only=self._read_only,
            recover_segment=recover_segment, compacted=self._config.compaction_enabled,
            probe_segment=self._probe_segment)
        if not self._read_only:
            # Forget the clean-shutdown marker only once loading succeeded: an open that
            # fails on corruption has cut nothing, and the next open must not take it for
            # a crash and cut what this one refused to (loading before this point only
            # rebuilds derived files and finishes renames, which a crash cannot tear).
            self._state.begin_writing()
        self.recovery_report: RecoveryReport = result.report
        segments = SegmentMap(result.segments)
        for segment in segments:
            self._note_created(segment.base_offset, now_ms)
        end = segments.last().next_offset if segments else start_checkpoint
        first_base = segments.first().base_offset if segments else start_checkpoint
        start = max(start_checkpoint, first_base)
        # Producer state (Kafka's LogLoader.load, then UnifiedLog's constructor): snapshots
        # matching no segment go, the latest good one is loaded and the log replayed past it.
        psm = self._psm
        if segments:
            psm.remove_stray_snapshots(segments.bases)
            rebuild_producer_state(
                psm, segment_base_offsets=segments.bases, log_start_offset=start,
                log_end_offset=end, batches_from=lambda offset: _batches_from(segments, offset),
                reload_from_clean_shutdown=clean, now_ms=now_ms)
        psm.on_high_watermark_updated(end)
        self._first_unstable = psm.first_unstable_offset()
        # LogLoader: after a clean shutdown everything is on disk; otherwise what recovery
        # validated is not flushed yet, so the recovery point stays where it was.
        self._recovery_point = end if clean else min(recovery_point or 0, end)
        self._last_flush_ms = now_ms
        if not self._read_only:
            active = segments.last()
            # Kafka resizes the active segment's indexes to segment.index.bytes after loading:
            # they were trimmed on close and must have room for new entries.
            active.offset_index.resize(self._config.segment_index_bytes)
            active.time_index.resize(self._config.segment_index_bytes)
            if self.recovery_report.lost_data or self.recovery_report.removed_files:
                self._state.save(recovery_point=self._recovery_point, log_start_offset=start)
        self._publish(segments, start, end, high_watermark=end)

    def _new_producer_state(self) -> ProducerStateManager:
        return ProducerStateManager(
            self._dir, producer_id_expiration_ms=self._config.producer_id_expiration_ms,
            backend=self._be, read_only=self._read_only)

    def _recover_segment(self, segment: Any, earlier: list, log_start_offset: int,
                         now_ms: int) -> Any:
        """Kafka's ``LogLoader.recoverSegment``: validate ``segment`` and rebuild its indexes
        and its ``.txnindex``. The aborted transactions' last stable offsets need the producer
        state at the segment's base, so a temporary manager is brought there first (from a
        snapshot, replaying ``earlier`` segments), then fed every batch of the segment, and
        it snapshots the state at the segment's end."""
        base = segment.base_offset
        tmp = self._new_producer_state()
        chain = SegmentMap(list(earlier))
        rebuild_producer_state(
            tmp, segment_base_offsets=[*chain.bases, base],
            log_start_offset=min(log_start_offset, base), log_end_offset=base,
            batches_from=lambda offset: _batches_from(chain, offset),
            reload_from_clean_shutdown=False, now_ms=now_ms)
        result = segment.recover()
        txn_path = filenames.txn_index_file(self._dir, base)
        if os.path.exists(txn_path):
            os.truncate(txn_path, 0)  # reset before reading: the old bytes may be corrupt
        txn_index = TransactionIndex(self._dir, base)
        try:
            for batch in segment.batches():
                tmp.recover_batch(batch, txn_index)
            txn_index.flush()
        finally:
            txn_index.close()
        self._txn_indexes.pop(base, None)
        tmp.take_snapshot()
        return result

    def _txn_index(self, base_offset: int) -> TransactionIndex:
        """The ``.txnindex`` of the segment at ``base_offset`` (opened once; created on its
        first append). A read-only log reopens it every time: the writer may append."""
        txn_index = self._txn_indexes.get(base_offset)
        if txn_index is None:
            txn_index = TransactionIndex(self._dir, base_offset)
            if not self._read_only:
                self._txn_indexes[base_offset] = txn_index
        return txn_index

    def _open_segment(self, base_offset: int, *, create: bool = False, file_suffix: str = "") -> Any:
        config = self._config
        if create:
            self._dir_dirty = True
        return self._be.Segment.open(
            self._dir, base_offset, create=create, read_only=self._read_only,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            max_message_bytes=config.max_message_bytes, file_suffix=file_suffix)

    def _probe_segment(self, base_offset: int) -> Any:
        """The segment at ``base_offset`` opened read-only, whatever this Log is: the loader
        looks at its indexes as they are on disk before a writable open changes them."""
        config = self._config
        return self._be.Segment.open(
            self._dir, base_offset, read_only=True,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            max_message_bytes=config.max_message_bytes)

    def _note_created(self, base_offset: int, now_ms: int) -> None:
        self._created_ms[base_offset] = now_ms
        jitter_max = min(self._config.segment_jitter_ms, self._config.segment_ms)
        self._jitter_ms[base_offset] = random.randrange(jitter_max) if jitter_max > 0 else 0

    def close(self) -> None:
        """Flush, persist the checkpoints, write the clean-shutdown marker, release the lock.

        Waits for reads in flight. Memoryviews handed out stay valid. Idempotent. Segments
        waiting for deletion keep their ``.deleted`` files, which the next open removes.
        """
        with self._lock:
            if self._closed:
                return
            try:
                if not self._read_only:
                    self._flush_locked(_now_ms(None), checkpoint=True)
                    # Kafka's UnifiedLog.close: a snapshot at the log end, so the next open
                    # reads no batch to rebuild producer state.
                    self._psm.update_map_end_offset(self._view.end_offset)
                    self._psm.take_snapshot()
                for segment in self._view.segments:
                    segment.close()
                for txn_index in self._txn_indexes.values():
                    txn_index.close()
                for _deadline, segment in self._pending_deletes:
                    segment.close()
                self._pending_deletes.clear()
                if not self._read_only:
                    self._state.mark_clean_shutdown()
            finally:
                self._closed = True
                if self._dir_lock is not None:
                    self._dir_lock.close()
                self._data_cond.notify_all()

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        view = self._view
        mode = "read-only" if self._read_only else "writer"
        return (f"Log({self._dir!r}, {mode}, backend={self._be.name}, start={view.start_offset}, "
                f"end={view.end_offset}, hw={view.high_watermark}, segments={len(view.segments)})")

    # --- properties ------------------------------------------------------------------------------

    @property
    def dir_path(self) -> str:
        """The partition directory."""
        return self._dir

    @property
    def config(self) -> LogConfig:
        """The log's configuration (replace it with :meth:`update_config`)."""
        return self._config

    @property
    def backend(self) -> Any:
        """The backend module this log uses."""
        return self._be

    @property
    def read_only(self) -> bool:
        """Whether the log was opened with ``read_only=True``."""
        return self._read_only

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def start_offset(self) -> int:
        """The log start offset: the first offset a read may ask for."""
        return self._view.start_offset

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next appended record gets."""
        return self._view.end_offset

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed; reads stop there by default."""
        return self._view.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset (LSO): the first offset of the earliest transaction that is
        open (or whose marker is not yet below the high watermark), capped by the high
        watermark; the high watermark when there is none. read_committed reads stop here."""
        return self._view.last_stable_offset

    @property
    def producer_state(self) -> ProducerStateManager:
        """The partition's :class:`~seglog.storage.producer_state.ProducerStateManager` (idempotence
        and transactions). Read-only use, under no lock: the log owns and mutates it."""
        return self._psm

    @property
    def recovery_point(self) -> int:
        """Every record below this offset is known to be on disk (fsynced)."""
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        """Total bytes of the segments' ``.log`` files."""
        return sum(segment.size_bytes for segment in self._view.segments)

    @property
    def segments(self) -> tuple[Any, ...]:
        """The segments in offset order (the last is active). Read-only use: the log owns them."""
        return self._view.segments.segments

    @property
    def active_segment(self) -> Any:
        """The segment appends go to."""
        return self._view.segments.last()

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (Kafka's dynamic topic config update). Segments that
        exist keep their index sizes; new segments use the new values."""
        with self._lock:
            self._config = config
            self._roll_ms = self._max_segment_ms()

    # --- internal state --------------------------------------------------------------------------

    def _publish(self, segments: SegmentMap, start: int, end: int, *,
                 high_watermark: int | None = None) -> None:
        """Publish a new reader snapshot; ``high_watermark`` None keeps (clamped) the old one."""
        active = segments.last()
        end_position = active.size_bytes if active is not None else 0
        if high_watermark is None:
            old = self._view
            high_watermark = end if self._auto_hw else min(max(old.high_watermark, start), end)
        if high_watermark == end:
            hw_base = active.base_offset if active is not None else end
            hw_position = end_position
        else:
            hw_base, hw_position = self._position_of(segments, high_watermark)
        self._view = _View(segments, start, end, end_position, high_watermark, hw_base,
                           hw_position, self._first_unstable)

    @staticmethod
    def _position_of(segments: SegmentMap, offset: int) -> tuple[int, int]:
        """``(segment base, position)`` of the batch boundary at ``offset``."""
        segment = segments.floor(offset) or segments.first()
        located = segment.translate_offset(offset)
        position = located[0] if located is not None else segment.size_bytes
        return segment.base_offset, position

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self._dir} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(f"log {self._dir} was opened read-only")

    # --- appending -------------------------------------------------------------------------------

    def append(self, value: Any, key: Any = None, timestamp_ms: int | None = None,
               headers: Any = (), *, now_ms: int | None = None) -> int:
        """Append one record as its own batch; returns its offset. See :meth:`append_batch`
        (``timestamp_ms`` is checked as its scalar ``timestamps_ms``)."""
        timestamp_ms = check_optional_int("timestamp_ms", timestamp_ms)
        first, _last = self.append_batch(
            [value], keys=None if key is None else [key], timestamps_ms=timestamp_ms,
            headers=[tuple(headers)] if headers else None, now_ms=now_ms)
        return first

    def append_batch(self, values: Any, keys: Any = None, timestamps_ms: Any = None,
                     headers: Any = None, *, compression: str = "none",
                     now_ms: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
                     base_sequence: int = -1,
                     is_transactional: bool = False) -> tuple[int, int]:
        """Encode ``values`` as one RecordBatch v2 and append it; returns ``(first, last)``
        offsets.

        Idempotent and transactional producers pass ``producer_id``, ``producer_epoch`` and
        ``base_sequence`` (all >= 0, else InvalidRecordError) and ``is_transactional``; the
        batch is then checked against the producer state as a client append
        (:meth:`append_raw`): a retry of one of the producer's last 5 batches writes nothing
        and returns the original offsets; OutOfOrderSequenceError, InvalidProducerEpochError,
        InvalidTxnStateError as Kafka raises them.

        values/keys/timestamps_ms/headers as ``encode_batch`` takes them (lists of
        bytes-like, 2-D uint8 arrays, ``(data, lengths)`` pairs). ``timestamps_ms`` None means
        ``now_ms`` (default: the wall clock) for every record. With
        ``message_timestamp_type="LogAppendTime"`` every record gets ``now_ms`` and the batch
        says LogAppendTime. ``compression`` is the codec unless the config's
        ``compression_type`` names one. Raises RecordTooLargeError (batch larger than
        ``max_message_bytes``), RecordBatchTooLargeError (larger than ``segment_bytes``),
        InvalidTimestampError (CreateTime outside ``message_timestamp_before/after_max_ms``),
        InvalidRecordError / UnsupportedCompressionError from the encoder, LogClosedError,
        ReadOnlyError. Integer arguments are checked first (:func:`~seglog.storage.config.check_int`):
        TypeError for a non-integer ``now_ms``, ``producer_id``, ``producer_epoch``,
        ``base_sequence`` or scalar ``timestamps_ms``; ValueError outside int64 (int16 for the
        epoch, int32 for the sequence). Thread-safe; encoding happens outside the writer lock.
        """
        self._check_writable()
        producer_id = check_int("producer_id", producer_id)
        producer_epoch = check_int("producer_epoch", producer_epoch, minimum=-(INT16_MAX + 1),
                                   maximum=INT16_MAX)
        base_sequence = check_int("base_sequence", base_sequence, minimum=-(INT32_MAX + 1),
                                  maximum=INT32_MAX)
        if timestamps_ms is not None and (isinstance(timestamps_ms, (str, bytes))
                                          or not hasattr(timestamps_ms, "__len__")):
            timestamps_ms = check_int("timestamps_ms", timestamps_ms)
        self._require_keys(keys)  # compaction hook (seglog.storage.cleaner): keyless records rejected
        now = _now_ms(now_ms)
        config = self._config
        log_append_time = config.message_timestamp_type == "LogAppendTime"
        if log_append_time or timestamps_ms is None:
            timestamps_ms = now
        else:
            self._validate_timestamps(timestamps_ms, now)
        codec = config.compression_codec or compression
        if producer_id >= 0:
            if producer_epoch < 0 or base_sequence < 0:
                raise InvalidRecordError(
                    f"a batch of producer {producer_id} needs a producer epoch and a base "
                    f"sequence >= 0, got {producer_epoch} and {base_sequence}")
        elif is_transactional or producer_epoch >= 0 or base_sequence >= 0:
            raise InvalidRecordError(
                "producer_epoch, base_sequence and is_transactional need a producer_id >= 0")
        # Encode outside the writer lock at the offset the batch will most likely get; if
        # another writer gets there first the segment patches the base offset (8 bytes that
        # the CRC does not cover).
        raw = self._be.encode_batch(
            values, keys, timestamps_ms, headers, base_offset=self._view.end_offset,
            compression=codec,
            timestamp_type=fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME if log_append_time
            else fmt.TIMESTAMP_TYPE_CREATE_TIME,
            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
            is_transactional=is_transactional)
        size = len(raw)
        if size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes is larger than max.message.bytes "
                f"({config.max_message_bytes})")
        record_count = _INT32.unpack_from(raw, fmt.LAST_OFFSET_DELTA_POSITION)[0] + 1
        max_timestamp = _INT64.unpack_from(raw, fmt.MAX_TIMESTAMP_POSITION)[0]
        batches = list(self._be.iter_batches(raw)) if producer_id >= 0 else None
        return self._append_encoded(raw, size, record_count, max_timestamp, now, batches)

    def append_txn_marker(self, *, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool,
                          now_ms: int | None = None) -> int:
        """Write a transaction marker, a COMMIT (``commit=True``) or ABORT control batch, for
        ``producer_id`` (what Kafka's transaction coordinator sends with WriteTxnMarkers);
        returns its offset.

        The producer's open transaction (if any) is closed: a commit makes its records
        visible to read_committed readers once the marker is below the high watermark; an
        abort is recorded in the active segment's ``.txnindex`` and its records are hidden
        from them. A marker without an open transaction is written all the same (Kafka).
        Raises InvalidProducerEpochError for an epoch below the producer's,
        TransactionCoordinatorFencedError for a coordinator epoch below the last marker's,
        InvalidRecordError for a negative producer id or epoch, LogClosedError, ReadOnlyError.
        The marker's timestamp is ``now_ms`` (default: the wall clock). TypeError /
        ValueError for non-integer or out-of-range arguments (epochs int16, coordinator epoch
        int32; :func:`~seglog.storage.config.check_int`). Thread-safe.
        """
        self._check_writable()
        producer_id = check_int("producer_id", producer_id)
        producer_epoch = check_int("producer_epoch", producer_epoch, minimum=-(INT16_MAX + 1),
                                   maximum=INT16_MAX)
        coordinator_epoch = check_int("coordinator_epoch", coordinator_epoch,
                                      minimum=-(INT32_MAX + 1), maximum=INT32_MAX)
        if producer_id < 0 or producer_epoch < 0:
            raise InvalidRecordError(
                f"a transaction marker needs a producer id and epoch >= 0, got {producer_id} "
                f"and {producer_epoch}")
        now = _now_ms(now_ms)
        control_type = fmt.CONTROL_TYPE_COMMIT if commit else fmt.CONTROL_TYPE_ABORT
        raw = self._be.encode_control_batch(
            control_type, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, base_offset=self._view.end_offset,
            timestamp_ms=now)
        batches = list(self._be.iter_batches(raw))
        first, _last = self._append_encoded(raw, len(raw), 1, now, now, batches,
                                            origin=ORIGIN_COORDINATOR)
        return first

    def append_raw(self, data: Any, *, now_ms: int | None = None) -> tuple[int, int]:
        """Append client-built batches (a produce request's records); returns ``(first,
        last)`` offsets of the whole set.

        Validates as Kafka's LogValidator does for client appends, then assigns offsets and
        writes the client's bytes unchanged except for the base offsets and, where Kafka
        rewrites them, the max timestamp, timestamp type and CRC. Rules: whole batches only
        (CorruptRecordError for trailing bytes; Kafka silently trims them); magic 2, CRC32C
        (CorruptRecordError); each batch at most ``max_message_bytes`` (RecordTooLargeError);
        the set at most ``segment_bytes`` (RecordBatchTooLargeError); base offset 0, at least
        one record, record count equal to ``last_offset_delta + 1``, record offsets 0..n-1, no
        control batches, a producer id only with a base sequence >= 0 (InvalidRecordError);
        CreateTime timestamps within ``message_timestamp_before/after_max_ms`` of now
        (InvalidTimestampError). CreateTime batches whose max timestamp is wrong get the real
        one; with LogAppendTime every batch gets max timestamp ``now_ms`` and the
        LogAppendTime bit (records then read with that timestamp). The caller's buffer is
        never modified. When the topic's ``compression_type`` names a codec other than the
        batches' (not ``producer``), every batch is re-encoded with it, as Kafka's broker
        recompresses. Thread-safe.

        Batches with a producer id are checked against the producer state (Kafka's
        ``analyzeAndValidateProducerState``): a retry of one of the producer's last 5 batches
        (same epoch, same sequence range) writes nothing and returns the original ``(first,
        last)`` offsets; an older duplicate, a gap or a new epoch not starting at sequence 0
        raises OutOfOrderSequenceError; a lower epoch InvalidProducerEpochError; a
        non-transactional batch while the producer's transaction is open InvalidTxnStateError.
        """
        self._check_writable()
        now = _now_ms(now_ms)
        buffer = memoryview(data)
        if buffer.ndim != 1 or buffer.format not in ("B", "b", "c"):
            buffer = buffer.cast("B")
        to_write, size, record_count, max_timestamp, batches = self._validate_client_batches(
            buffer, now)
        return self._append_encoded(to_write, size, record_count, max_timestamp, now, batches)

    def _validate_timestamps(self, timestamps_ms: Any, now_ms: int) -> None:
        config = self._config
        before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
        if before == fmt.INT64_MAX and after == fmt.INT64_MAX:
            return
        if isinstance(timestamps_ms, int):
            lo = hi = timestamps_ms
        else:
            import numpy as np

            values = np.asarray(timestamps_ms, dtype=np.int64)
            if values.size == 0:
                return
            lo, hi = int(values.min()), int(values.max())
        if lo < now_ms - before or hi > now_ms + after:
            raise InvalidTimestampError(
                f"timestamps [{lo}, {hi}] outside [{now_ms - before}, {now_ms + after}] "
                "(message.timestamp.before.max.ms / after.max.ms)")

    def _validate_client_batches(self, buffer: memoryview,
                                 now_ms: int) -> tuple[Any, int, int, int, list | None]:
        import numpy as np

        config = self._config
        size = len(buffer)
        if size == 0:
            raise InvalidRecordError("an append must hold at least one batch")
        if size > config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {size} bytes is larger than segment.bytes ({config.segment_bytes})")
        log_append_time = config.message_timestamp_type == "LogAppendTime"
        wanted_type = (fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME if log_append_time
                       else fmt.TIMESTAMP_TYPE_CREATE_TIME)
        record_count, max_timestamp, consumed = 0, -1, 0
        rewrites: list[tuple[int, int, int]] = []  # (position, size, max timestamp)
        with_producer = False
        codec = config.compression_codec
        recompress = False
        batches: list = []
        for batch in self._be.iter_batches(buffer):
            batches.append(batch)
            recompress = recompress or (codec is not None and batch.compression != codec)
            position = batch.position
            if position != consumed:
                raise CorruptRecordError("batches are not contiguous", reason=fmt.REASON_BAD_RECORDS,
                                         position=consumed)
            consumed = position + batch.size_bytes
            if batch.size_bytes > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {batch.size_bytes} bytes at position {position} is larger than "
                    f"max.message.bytes ({config.max_message_bytes})")
            batch.ensure_valid()
            if batch.base_offset != 0:
                raise InvalidRecordError(
                    f"the base offset of a client batch must be 0, got {batch.base_offset}")
            if batch.is_control:
                raise InvalidRecordError("clients are not allowed to write control batches")
            count = batch.record_count
            if count <= 0:
                raise InvalidRecordError(f"a client batch must hold records, got count {count}")
            if batch.last_offset_delta + 1 != count:
                raise InvalidRecordError(
                    f"batch count {count} does not match its offset range "
                    f"(last offset delta {batch.last_offset_delta})")
            if batch.producer_id >= 0:
                if batch.base_sequence < 0:
                    raise InvalidRecordError(
                        f"batch with producer id {batch.producer_id} has no base sequence")
                with_producer = True
            columns = batch.columns()
            self._require_batch_keys(columns, position)  # compaction hook (seglog.storage.cleaner)
            if len(columns) != count or not np.array_equal(
                    columns.offsets, np.arange(count, dtype=columns.offsets.dtype)):
                raise InvalidRecordError("record offsets inside the batch are not 0..count-1")
            if log_append_time:
                batch_max = now_ms
            else:
                timestamps = columns.timestamps_ms
                self._validate_timestamps(timestamps, now_ms)
                batch_max = int(timestamps.max())
            if batch.timestamp_type != wanted_type or batch.max_timestamp_ms != batch_max:
                rewrites.append((position, batch.size_bytes, batch_max))
            record_count += count
            max_timestamp = max(max_timestamp, batch_max)
        if consumed != size:
            raise CorruptRecordError(
                f"{size - consumed} trailing bytes are not a whole batch",
                reason=fmt.REASON_TRUNCATED, position=consumed)
        if recompress:
            return self._recompress_client_batches(batches, codec, wanted_type, now_ms,
                                                   record_count, max_timestamp, with_producer)
        if not rewrites:
            return buffer, size, record_count, max_timestamp, batches if with_producer else None
        out = bytearray(buffer)
        view = memoryview(out)
        for position, batch_size, batch_max in rewrites:
            # DefaultRecordBatch.setMaxTimestamp: timestamp type bit, max timestamp, new CRC.
            attributes = _INT16.unpack_from(out, position + fmt.ATTRIBUTES_POSITION)[0]
            attributes &= ~fmt.TIMESTAMP_TYPE_MASK
            if wanted_type == fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME:
                attributes |= fmt.TIMESTAMP_TYPE_MASK
            _INT16.pack_into(out, position + fmt.ATTRIBUTES_POSITION, attributes)
            _INT64.pack_into(out, position + fmt.MAX_TIMESTAMP_POSITION, batch_max)
            crc = self._be.crc32c(view[position + fmt.ATTRIBUTES_POSITION:position + batch_size])
            _UINT32.pack_into(out, position + fmt.CRC_POSITION, crc)
        view.release()
        # The producer state takes the batches as written (max timestamps rewritten).
        batches = list(self._be.iter_batches(out)) if with_producer else None
        return out, size, record_count, max_timestamp, batches

    def _recompress_client_batches(self, batches: list, codec: str, timestamp_type: int,
                                   now_ms: int, record_count: int, max_timestamp: int,
                                   with_producer: bool) -> tuple[Any, int, int, int, list | None]:
        """Re-encode validated client batches with the topic's codec (``compression.type`` is
        neither ``producer`` nor the batches' codec): Kafka's LogValidator then rebuilds every
        batch (``validateMessagesAndAssignOffsetsCompressed`` without in-place assignment),
        keeping the records, their timestamps, headers and the producer fields."""
        parts = []
        for batch in batches:
            records = batch.records()
            if timestamp_type == fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME:
                timestamps = [now_ms] * len(records)
            else:
                timestamps = [r.timestamp_ms for r in records]
            raw = self._be.encode_batch(
                [r.value for r in records], keys=[r.key for r in records],
                timestamps_ms=timestamps, headers=[r.headers for r in records],
                compression=codec, timestamp_type=timestamp_type,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
                partition_leader_epoch=batch.partition_leader_epoch)
            if len(raw) > self._config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch re-encoded with {codec} is {len(raw)} bytes, larger than "
                    f"max.message.bytes ({self._config.max_message_bytes})")
            parts.append(raw)
        out = b"".join(parts)
        batches = list(self._be.iter_batches(out)) if with_producer else None
        return out, len(out), record_count, max_timestamp, batches

    def _append_encoded(self, data: Any, size: int, record_count: int, max_timestamp: int,
                        now_ms: int, batches: list | None = None, *,
                        origin: str = ORIGIN_CLIENT) -> tuple[int, int]:
        """Roll if needed, check ``batches`` (the Batch objects of ``data`` when any carries a
        producer id, else None) against the producer state, write ``data`` (whole batches,
        offsets assigned by the segment) and update the producer state (Kafka's
        ``UnifiedLog.append``). A duplicate writes nothing and returns the original offsets."""
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {size} bytes is larger than segment.bytes "
                f"({self._config.segment_bytes})")
        with self._lock:
            self._check_writable()
            config = self._config
            view = self._view
            psm = self._psm
            if now_ms - self._last_expiration_ms >= _EXPIRATION_CHECK_MS:
                self._expire_producers(now_ms)
            segments = self._maybe_roll(view, size, record_count, max_timestamp, now_ms)
            active = segments._segments[-1]
            analysis = None
            if batches is not None:
                analysis = psm.analyze_batches(batches, first_offset=view.end_offset,
                                               origin=origin)
                if analysis.duplicate is not None:
                    duplicate = analysis.duplicate
                    return duplicate.first_offset, duplicate.last_offset
            result = active.append(data)
            end = result.last_offset + 1
            assert result.first_offset == view.end_offset, (result.first_offset, view.end_offset)
            if analysis is None:
                psm.update_map_end_offset(end)
            else:
                txn_index = (self._txn_index(active.base_offset) if analysis.completed_txns
                             else None)
                psm.apply_append(analysis, end_offset=end, txn_index=txn_index)
                if analysis.completed_txns or any(
                        info.started_transactions for info in analysis.append_infos.values()):
                    if self._auto_hw:
                        psm.on_high_watermark_updated(end)
                    self._first_unstable = psm.first_unstable_offset()
            if self._auto_hw:  # the hot path of _publish
                position = active.size_bytes
                self._view = _View(segments, view.start_offset, end, position, end,
                                   active.base_offset, position, self._first_unstable)
            else:
                self._publish(segments, view.start_offset, end)
            if (end - self._recovery_point >= config.flush_messages
                    or now_ms - self._last_flush_ms >= config.flush_ms):
                self._flush_locked(now_ms, checkpoint=False)
            if self._waiters:
                self._data_cond.notify_all()
            return result.first_offset, result.last_offset

    # --- rolling ---------------------------------------------------------------------------------

    def _max_segment_ms(self) -> int:
        config = self._config
        if config.compaction_enabled and config.max_compaction_lag_ms > 0:
            return min(config.max_compaction_lag_ms, config.segment_ms)
        return config.segment_ms

    def _roll_reason(self, active: Any, size: int, record_count: int, max_timestamp: int,
                     now_ms: int, end: int) -> str | None:
        reason = active.roll_reason(size, end + record_count - 1, self._config.segment_bytes)
        if reason is not None or active.size_bytes == 0:
            return reason  # an empty segment never rolls on time
        first = active.first_batch_timestamp_ms
        if first >= 0:
            waited_ms = max_timestamp - first
        else:
            waited_ms = now_ms - self._created_ms.get(active.base_offset, now_ms)
        if waited_ms > self._roll_ms - self._jitter_ms.get(active.base_offset, 0):
            return "time"
        return None

    def _maybe_roll(self, view: _View, size: int, record_count: int, max_timestamp: int,
                    now_ms: int) -> SegmentMap:
        active = view.segments.last()
        if self._roll_reason(active, size, record_count, max_timestamp, now_ms,
                             view.end_offset) is None:
            return view.segments
        return self._roll_locked(now_ms)

    def roll(self, *, now_ms: int | None = None) -> Any:
        """Start a new, empty active segment at the end offset (unless the active segment is
        already empty); returns the active segment. Flushes the old one."""
        with self._lock:
            self._check_writable()
            self._roll_locked(_now_ms(now_ms))
            return self._view.segments.last()

    def _drop_txn_index(self, base_offset: int) -> None:
        txn_index = self._txn_indexes.pop(base_offset, None)
        if txn_index is not None:
            txn_index.close()

    def _refresh_unstable(self) -> None:
        """Recompute the first unstable offset after the producer state changed (publish
        follows)."""
        self._first_unstable = self._psm.first_unstable_offset()

    def _expire_producers(self, now_ms: int) -> list[int]:
        """Drop producers idle for ``producer_id_expiration_ms`` without an open transaction
        (Kafka checks every 10 minutes; callers bound the rate)."""
        self._last_expiration_ms = now_ms
        return self._psm.remove_expired_producers(now_ms)

    def _roll_locked(self, now_ms: int) -> SegmentMap:
        view = self._view
        old = view.segments.last()
        new_base = view.end_offset
        if old.base_offset == new_base and old.size_bytes == 0:
            return view.segments
        old.on_become_inactive()
        for path in filenames.segment_files(self._dir, new_base):
            if os.path.exists(path):  # Kafka: a leftover file with the new name is deleted
                os.remove(path)
        self._drop_txn_index(new_base)
        new = self._open_segment(new_base, create=True)
        self._note_created(new_base, now_ms)
        segments = view.segments.with_segment(new)
        self._publish(segments, view.start_offset, view.end_offset)
        # Kafka's UnifiedLog.roll: a producer snapshot at every new segment's base.
        self._psm.update_map_end_offset(new_base)
        self._psm.take_snapshot()
        # Kafka flushes up to the new base offset after a roll (asynchronously there); doing it
        # here keeps recovery after a crash to the active segment.
        self._flush_locked(now_ms, checkpoint=False)
        return segments

    # --- flushing --------------------------------------------------------------------------------

    def flush(self, *, now_ms: int | None = None) -> None:
        """Fsync every segment with records at or above the recovery point, move the
        recovery point to the end offset and persist it (and the log start offset)."""
        with self._lock:
            self._check_writable()
            self._flush_locked(_now_ms(now_ms), checkpoint=True)

    def maybe_flush(self, *, now_ms: int | None = None) -> bool:
        """Flush if ``flush_ms`` has passed since the last flush and records are unflushed
        (the periodic check Kafka's log flusher makes); returns whether it flushed."""
        with self._lock:
            self._check_writable()
            now = _now_ms(now_ms)
            if (self._view.end_offset > self._recovery_point
                    and now - self._last_flush_ms >= self._config.flush_ms):
                self._flush_locked(now, checkpoint=False)
                return True
            return False

    def _flush_locked(self, now_ms: int, *, checkpoint: bool) -> None:
        view = self._view
        if view.end_offset > self._recovery_point or self._dir_dirty:
            for segment in view.segments.from_offset(self._recovery_point):
                segment.flush()
                txn_index = self._txn_indexes.get(segment.base_offset)
                if txn_index is not None:
                    txn_index.flush()
            if self._dir_dirty:
                from .checkpoints import fsync_dir

                fsync_dir(self._dir)
                self._dir_dirty = False
            self._recovery_point = view.end_offset
        self._last_flush_ms = now_ms
        if checkpoint:
            self._save_state()

    def _save_state(self) -> None:
        self._state.save(recovery_point=self._recovery_point,
                         log_start_offset=self._view.start_offset)

    # --- reading ---------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int = READ_BYTES_DEFAULT, *,
             max_offset: int | None = None, min_one_batch: bool = True,
             isolation: str = READ_UNCOMMITTED) -> LogReadResult:
        """Whole batches from the first batch holding ``offset`` or later, up to ``max_bytes``
        (at least one batch when ``min_one_batch``, even a larger one), from one segment.

        Reads stop at ``max_offset`` (default: the high watermark; pass ``log.end_offset`` to
        read uncommitted records as a follower does; it should be a batch boundary). An
        offset in a gap (compaction, truncation, retention) returns the next batch after it;
        the next segment is tried when one holds nothing at or after ``offset``. Raises
        OffsetOutOfRangeError for ``offset`` below the start offset or above the end offset;
        ``offset`` at or above ``max_offset`` returns an empty result. Thread-safe, lock-free
        (see module docstring); the buffer is zero-copy (see :class:`LogReadResult`).

        ``isolation="read_committed"`` (Kafka's FetchIsolation.TXN_COMMITTED) also stops at
        the last stable offset and fills ``aborted_transactions``; the batches themselves
        are returned whole, control and aborted ones included, as a broker's fetch returns
        them (filter with :func:`seglog.storage.transactions.filter_batches`). ValueError for an
        unknown isolation level.

        The bytes are not CRC-checked (Kafka's broker serves fetches unverified; the readers
        that decode records check). Arguments: TypeError for a non-integer ``offset``,
        ``max_bytes`` or ``max_offset``, ValueError for a negative ``max_bytes`` or a value
        outside int64 (:func:`~seglog.storage.config.check_int`); ``max_bytes`` above INT32_MAX reads
        as INT32_MAX. CorruptRecordError when a segment holds offsets at or after ``offset``
        but no batch of it can be read (never a silent jump to the next segment), and
        CorruptSegmentError (``REASON_OFFSETS_OUTSIDE_SEGMENT``) when the first batch read
        holds offsets at or above the next segment's base offset (the log end offset in the
        last segment); a later such batch ends the result before it.
        """
        self._check_open()
        offset = check_int("offset", offset)
        max_bytes = _max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        committed = self._check_isolation(isolation)
        self._lock.acquire()
        try:
            view = self._view
            lso = view.last_stable_offset
            if committed:
                max_offset = lso if max_offset is None else min(max_offset, lso)
            segment, buffer, next_offset = self._read_in(view, offset, max_bytes, max_offset,
                                                         min_one_batch)
            aborted = [] if committed else None
            if segment is None:
                return LogReadResult(memoryview(b""), offset, offset, None, 0, 0,
                                     view.high_watermark, view.start_offset, view.end_offset,
                                     lso, aborted)
            located = segment.translate_offset(offset)
            position = located[0] if located is not None else 0
            if committed:
                aborted = self._aborted_locked(view, offset, next_offset)
        finally:
            self._lock.release()
        return LogReadResult(buffer, offset, next_offset, segment.log_path, position, len(buffer),
                             view.high_watermark, view.start_offset, view.end_offset, lso,
                             aborted)

    @staticmethod
    def _check_isolation(isolation: str) -> bool:
        """True for read_committed; ValueError for an unknown level."""
        if isolation == READ_UNCOMMITTED:
            return False
        if isolation == READ_COMMITTED:
            return True
        raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}")

    def aborted_transactions(self, offset: int, upper_bound_offset: int) -> list:
        """The aborted transactions (:class:`~seglog.storage.txnindex.AbortedTxn`) overlapping
        ``[offset, upper_bound_offset)``, from the ``.txnindex`` of the segment holding
        ``offset`` and the later ones (Kafka's ``collectAbortedTransactions``): what a broker
        sends with a read_committed fetch it answers with :meth:`sendfile`. TypeError /
        ValueError for non-integer or out-of-int64 offsets."""
        self._check_open()
        offset = check_int("offset", offset)
        upper_bound_offset = check_int("upper_bound_offset", upper_bound_offset)
        with self._lock:
            return self._aborted_locked(self._view, offset, upper_bound_offset)

    def _aborted_locked(self, view: _View, offset: int, upper_bound_offset: int) -> list:
        if upper_bound_offset <= offset:
            return []
        writer = not self._read_only
        indexes = (self._txn_index(segment.base_offset)
                   for segment in view.segments.from_offset(offset))
        # A writer's cached index without entries has none on disk either: skip the read.
        return collect_aborted_transactions(
            (index for index in indexes if not (writer and index.last_offset is None)),
            offset, upper_bound_offset)

    def _limit(self, view: _View, max_offset: int | None) -> tuple[int, int, int]:
        """``(limit offset, base of its segment, position there)`` for a read bound."""
        if max_offset is None:
            return view.high_watermark, view.hw_base, view.hw_position
        if max_offset >= view.end_offset:
            active = view.segments.last()
            base = active.base_offset if active is not None else view.end_offset
            return view.end_offset, base, view.end_position
        if max_offset == view.high_watermark:
            return view.high_watermark, view.hw_base, view.hw_position
        base, position = self._position_of(view.segments, max_offset)
        return max_offset, base, position

    def _check_range(self, view: _View, offset: int) -> None:
        if offset < view.start_offset or offset > view.end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the log's range [{view.start_offset}, "
                f"{view.end_offset}]")

    def _segments_for_read(self, view: _View, offset: int, max_offset: int | None):
        """Yield ``(segment, max_position or None)`` to try for a read of ``offset``."""
        self._check_range(view, offset)
        limit, limit_base, limit_position = self._limit(view, max_offset)
        if offset >= limit:
            return
        for segment in view.segments.from_offset(offset):
            if segment.base_offset > limit_base:
                return
            yield segment, (limit_position if segment.base_offset == limit_base else None)

    def _read_in(self, view: _View, offset: int, max_bytes: int, max_offset: int | None,
                 min_one_batch: bool) -> tuple[Any, memoryview, int]:
        for segment, max_position in self._segments_for_read(view, offset, max_offset):
            buffer = segment.read(offset, max_bytes, max_position=max_position,
                                  min_one_batch=min_one_batch)
            if _nbytes(buffer):
                next_offset = _last_batch(buffer)[1]
                following = view.segments.next_base(segment)
                bound = following if following is not None else view.end_offset
                if next_offset > bound:
                    buffer, next_offset = _cut_at_bound(segment, buffer, offset, bound,
                                                        last=following is None)
                return segment, buffer, next_offset
            if max_position is not None:
                break  # the bound is in this segment: nothing more to read
            if min_one_batch:
                _check_nothing_hidden(segment, offset)
            if not min_one_batch and segment.translate_offset(offset) is not None:
                break  # the next batch is larger than max_bytes
        return None, memoryview(b""), offset

    def records(self, start: int = 0, end: int | None = None, *,
                max_offset: int | None = None, isolation: str = READ_UNCOMMITTED,
                check_crcs: bool = True) -> Iterator[Any]:
        """Iterate the records with ``start <= offset < end`` (``end`` default: the high
        watermark, or ``max_offset``), across segments and gaps, skipping control batches.
        ``isolation="read_committed"`` also stops at the last stable offset and skips the
        records of aborted transactions (as a Kafka consumer with that isolation level).

        ``start`` below the log start offset starts at the log start offset. Each record has
        ``offset, timestamp_ms, key, value, headers``. The iterator reads ahead one read
        (1 MiB) at a time and holds no lock between records. Raises OffsetOutOfRangeError if
        ``start`` is above the end offset; TypeError / ValueError for non-integer or
        out-of-int64 ``start``, ``end``, ``max_offset``.

        Untrusted bytes (checked while iterating, so records before the bad batch are
        yielded first): every batch's CRC32C is verified before its records are decoded
        (Kafka's consumer ``check.crcs``; ``check_crcs=False`` skips it, as that setting does),
        and each batch's base offset must be above the previous batch's last offset (the base
        offset is outside the CRC); both raise CorruptRecordError (``REASON_CRC_MISMATCH``,
        ``REASON_OFFSETS_NOT_INCREASING``), as does a batch that cannot be parsed below the
        end of a segment.
        """
        start = check_int("start", start)
        end = check_optional_int("end", end)
        max_offset = check_optional_int("max_offset", max_offset)
        self._check_isolation(isolation)
        return self._records(max(start, self.start_offset), end, max_offset, isolation,
                             bool(check_crcs))

    def _records(self, offset: int, end: int | None, max_offset: int | None, isolation: str,
                 check_crcs: bool) -> Iterator[Any]:
        # A generator of its own, so that records() checks its arguments when called rather
        # than at the first next().
        previous_next = -1  # next offset of the previous batch seen
        while True:
            result = self.read(offset, READ_BYTES_DEFAULT, max_offset=max_offset,
                               isolation=isolation)
            if not len(result.buffer):
                return
            batches = checked_batches(
                self._be.iter_batches(result.buffer, check_offsets=True),
                check_crcs=check_crcs, previous_next_offset=previous_next,
                where=result.log_path, base_position=result.position)
            for batch in filter_batches(batches, result.aborted_transactions,
                                        isolation=isolation):
                if batch.last_offset < offset:
                    continue
                for record in batch.records(check_crcs=check_crcs):  # verdict already kept
                    if record.offset < offset:
                        continue
                    if end is not None and record.offset >= end:
                        return
                    yield record
            previous_next = offset = result.next_offset
            if end is not None and offset >= end:
                return

    def read_columns(self, offset: int, max_records: int, *, max_bytes: int = READ_BYTES_DEFAULT,
                     max_offset: int | None = None, isolation: str = READ_UNCOMMITTED,
                     check_crcs: bool = True) -> Any:
        """Up to ``max_records`` records from ``offset`` as numpy columns (the backend's
        Columns: ``offsets``, ``timestamps_ms``, key/value positions and lengths into
        ``data``), with no per-record Python objects. Reads whole batches (at least one) from
        one segment, up to ``max_bytes``; records below ``offset`` are left out; control
        batches are skipped. Empty when nothing is readable (or ``max_records`` is 0).
        ``isolation="read_committed"`` stops at the last stable offset and leaves out aborted
        transactions' records. Raises OffsetOutOfRangeError as :meth:`read`; TypeError for
        non-integer arguments, ValueError for a negative ``max_records`` or ``max_bytes``.

        Every batch decoded has its CRC32C verified (``check_crcs=False`` skips it, Kafka's
        ``check.crcs``) and base offsets must increase batch to batch: CorruptRecordError
        (``REASON_CRC_MISMATCH``, ``REASON_OFFSETS_NOT_INCREASING``) otherwise."""
        offset = check_int("offset", offset)
        max_records = check_int("max_records", max_records, minimum=0)
        max_bytes = _max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        check_crcs = bool(check_crcs)
        while True:
            result = self.read(offset, max_bytes, max_offset=max_offset, isolation=isolation)
            buffer = result.buffer
            if result.aborted_transactions:
                # Only batches of aborted transactions need leaving out: copy the others.
                # Every batch is checked before its header decides what is left out.
                buffer = b"".join(
                    result.buffer[b.position:b.position + b.size_bytes]
                    for b in filter_batches(
                        checked_batches(self._be.iter_batches(result.buffer, check_offsets=True),
                                        check_crcs=check_crcs, where=result.log_path,
                                        base_position=result.position),
                        result.aborted_transactions, isolation=isolation))
            columns = self._be.decode_columns(buffer, check_crcs=check_crcs,
                                              check_offsets=True)
            if len(columns) or not len(result.buffer):
                break
            offset = result.next_offset  # only control batches: read on
        n = len(columns)
        if n == 0:
            return columns
        import numpy as np

        lo = int(np.searchsorted(columns.offsets, offset, side="left"))
        hi = min(n, lo + max_records)
        if lo == 0 and hi == n:
            return columns
        return _SlicedColumns(columns, lo, hi)

    def sendfile(self, out: Any, offset: int, max_bytes: int = READ_BYTES_DEFAULT, *,
                 max_offset: int | None = None,
                 isolation: str = READ_UNCOMMITTED) -> tuple[int, int]:
        """Send whole batches from ``offset`` (as :meth:`read` would return them) to a socket
        or file descriptor with sendfile(2), zero-copy; returns ``(bytes_sent, next_offset)``.

        ``out`` is anything with ``fileno()`` or an int fd. Blocking descriptors are sent in
        full; for non-blocking ones BlockingIOError propagates. ``(0, offset)`` when nothing is
        readable. ``isolation="read_committed"`` stops at the last stable offset; the aborted
        transactions to send along come from :meth:`aborted_transactions` ``(offset,
        next_offset)``. Raises OffsetOutOfRangeError as :meth:`read`, TypeError / ValueError
        for bad ``offset``, ``max_bytes``, ``max_offset`` as :meth:`read`. Unverified bytes,
        as :meth:`read` (Kafka's broker sends them so)."""
        self._check_open()
        offset = check_int("offset", offset)
        max_bytes = _max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        committed = self._check_isolation(isolation)
        fd = out if isinstance(out, int) else out.fileno()
        self._lock.acquire()
        try:
            view = self._view
            if committed:
                lso = view.last_stable_offset
                max_offset = lso if max_offset is None else min(max_offset, lso)
            for segment, max_position in self._segments_for_read(view, offset, max_offset):
                sent, next_offset = segment.sendfile(fd, offset, max_bytes,
                                                     max_position=max_position)
                if sent:
                    return sent, next_offset
                if max_position is not None:
                    break
                _check_nothing_hidden(segment, offset)
            return 0, offset
        finally:
            self._lock.release()

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp_ms`` (Kafka's ListOffsets
        by time, through the time indexes), or None if no record is that new.

        Kafka's sentinels: -2 (earliest) gives the start offset, -1 (latest) the high
        watermark, -3 (max timestamp) the offset of the record with the largest timestamp.
        TypeError / ValueError for a non-integer or out-of-int64 ``timestamp_ms``.
        """
        self._check_open()
        timestamp_ms = check_int("timestamp_ms", timestamp_ms)
        view = self._view
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return view.start_offset
        if timestamp_ms == LATEST_TIMESTAMP:
            return view.high_watermark
        self._lock.acquire()
        try:
            if timestamp_ms == MAX_TIMESTAMP:
                best = None
                for segment in view.segments:
                    if segment.max_timestamp_ms >= 0 and (
                            best is None or segment.max_timestamp_ms > best.max_timestamp_ms):
                        best = segment
                if best is None:
                    return None
                found = best.find_offset_by_timestamp(best.max_timestamp_ms,
                                                      starting_offset=view.start_offset)
                return None if found is None else found[1]
            for segment in view.segments:
                if segment.max_timestamp_ms < timestamp_ms:
                    continue
                found = segment.find_offset_by_timestamp(timestamp_ms,
                                                         starting_offset=view.start_offset)
                if found is not None:
                    return found[1]
            return None
        finally:
            self._lock.release()

    # --- waiting for data ------------------------------------------------------------------------

    def wait_for_data(self, offset: int, timeout_ms: int) -> bool:
        """Block until the high watermark is above ``offset`` (a record at ``offset`` is
        readable), the log is closed, or ``timeout_ms`` passes; returns whether data is there.

        Woken by appends, high-watermark updates, truncation and :meth:`refresh`; no polling.
        A read-only follower wakes only when something in this process calls ``refresh``.
        TypeError / ValueError for non-integer or out-of-int64 arguments.
        """
        offset = check_int("offset", offset)
        timeout_ms = check_int("timeout_ms", timeout_ms)
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        with self._data_cond:
            self._waiters += 1
            try:
                while not self._closed and self._view.high_watermark <= offset:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._data_cond.wait(remaining)
            finally:
                self._waiters -= 1
            return self._view.high_watermark > offset

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to ``[start_offset, end_offset]``; returns it.

        For a replicated log opened with ``auto_high_watermark=False``; with the default the
        next append moves it back to the end offset. Wakes ``wait_for_data`` waiters.
        TypeError / ValueError for a non-integer or out-of-int64 ``offset``."""
        offset = check_int("offset", offset)
        with self._lock:
            self._check_open()
            view = self._view
            hw = min(max(offset, view.start_offset), view.end_offset)
            self._psm.on_high_watermark_updated(hw)
            self._refresh_unstable()
            self._publish(view.segments, view.start_offset, view.end_offset, high_watermark=hw)
            self._data_cond.notify_all()
            return hw

    # --- truncation ------------------------------------------------------------------------------

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> None:
        """Remove every record at or above ``offset``: afterwards ``end_offset == offset`` and
        the next append gets ``offset`` (Kafka's ``truncateTo``, used by a follower).

        A batch holding ``offset`` is removed whole (Kafka truncates at batch boundaries; a
        follower's target always is one). Later segments go through ``.deleted``; an offset
        below the first segment empties the log and restarts it at ``offset`` (the start
        offset moves there). The high watermark and recovery point are lowered to ``offset``
        if above; the start offset to ``offset`` if above. No-op when ``offset >=
        end_offset``. Waits for reads in flight. Raises ValueError for a negative offset,
        ViewsOutstandingError if a live memoryview maps bytes to cut (nothing changes then).
        """
        offset = check_int("offset", offset, minimum=0)  # TypeError / ValueError
        now = _now_ms(now_ms)
        with self._lock:
            self._check_writable()
            view = self._view
            if offset >= view.end_offset:
                return
            self._truncate_locked(view, offset, now)
            self._data_cond.notify_all()

    def _truncate_locked(self, view: _View, offset: int, now_ms: int) -> None:
        segments = view.segments
        first = segments.first()
        psm = self._psm
        if offset < first.base_offset:
            # UnifiedLog.truncateFullyAndStartAt
            self._retire(list(segments), now_ms)
            psm.truncate_fully_and_start_at(offset)
            self._refresh_unstable()
            new = self._fresh_segment(offset, now_ms)
            self._publish(SegmentMap([new]), offset, offset, high_watermark=offset)
        else:
            keep = segments.floor(offset)
            located = keep.translate_offset(offset)
            if located is not None:
                keep.truncate_to(located[1])  # drop the batch holding offset and all after
                keep.flush()  # make the cut durable before anything is appended after it
            self._txn_index(keep.base_offset).truncate_to(offset)
            later = [s for s in segments if s.base_offset > keep.base_offset]
            self._retire(later, now_ms)
            segments = segments.without(s.base_offset for s in later)
            if keep.next_offset != offset:
                # Keep "active next offset == end offset": the records between are gone.
                if keep.size_bytes == 0:
                    self._retire([keep], now_ms)
                    segments = segments.without([keep.base_offset])
                else:
                    keep.on_become_inactive()
                segments = segments.with_segment(self._fresh_segment(offset, now_ms))
            else:
                keep.offset_index.resize(self._config.segment_index_bytes)
                keep.time_index.resize(self._config.segment_index_bytes)
            start = min(view.start_offset, offset)
            # Kafka's UnifiedLog.truncateTo: snapshots above the new end go and the state is
            # reloaded from the latest one left, replaying the log after it.
            rebuild_producer_state(
                psm, segment_base_offsets=segments.bases, log_start_offset=start,
                log_end_offset=offset, batches_from=lambda o: _batches_from(segments, o),
                reload_from_clean_shutdown=False, now_ms=now_ms)
            psm.on_high_watermark_updated(min(view.high_watermark, offset))
            self._refresh_unstable()
            self._publish(segments, start, offset,
                          high_watermark=min(view.high_watermark, offset))
        self._recovery_point = min(self._recovery_point, offset)
        # Kafka checkpoints recovery points right after a truncation: a stale, higher
        # recovery point would skip validating what is appended next.
        self._flush_locked(now_ms, checkpoint=True)

    def _fresh_segment(self, base_offset: int, now_ms: int) -> Any:
        for path in filenames.segment_files(self._dir, base_offset):
            if os.path.exists(path):
                os.remove(path)
        self._drop_txn_index(base_offset)
        segment = self._open_segment(base_offset, create=True)
        self._note_created(base_offset, now_ms)
        return segment

    def _retire(self, segments: list[Any], now_ms: int) -> None:
        """Rename segments' files to ``.deleted``, with their ``.txnindex`` and the producer
        snapshot at their base; they are removed after ``file_delete_delay_ms`` by
        :meth:`delete_expired_files` (Kafka's async delete, ``deleteProducerSnapshots``)."""
        deadline = now_ms + self._config.file_delete_delay_ms
        for segment in segments:
            segment.rename_suffix(filenames.DELETED_SUFFIX)
            self._pending_deletes.append((deadline, self._retired(segment)))
            self._created_ms.pop(segment.base_offset, None)
            self._jitter_ms.pop(segment.base_offset, None)

    def _retired(self, segment: Any) -> _Retired:
        """Rename the ``.txnindex`` and the snapshot of ``segment`` (already renamed
        ``.deleted``) to ``.deleted``; the object that deletes them all later."""
        base = segment.base_offset
        txn_index = self._txn_indexes.pop(base, None) or TransactionIndex(self._dir, base)
        txn_index.close()
        txn_index.rename_suffix(filenames.DELETED_SUFFIX)
        snapshot = self._psm.remove_and_mark_snapshot_for_deletion(base)
        return _Retired(segment, txn_index, snapshot)

    def delete_expired_files(self, *, now_ms: int | None = None) -> int:
        """Remove the files of deleted segments whose ``file_delete_delay_ms`` has passed;
        returns how many segments' files were removed. Waits for reads in flight."""
        now = _now_ms(now_ms)
        with self._lock:
            due = [s for deadline, s in self._pending_deletes if deadline <= now]
            if not due:
                return 0
            for segment in due:
                segment.delete()
            self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now]
            return len(due)

    # --- retention -------------------------------------------------------------------------------

    def apply_retention(self, *, now_ms: int | None = None) -> list[int]:
        """Delete old segments by Kafka's rules (:mod:`seglog.storage.retention`); returns the base
        offsets of the segments deleted.

        With ``cleanup_policy`` containing "delete": segments wholly below the start offset,
        then ``retention_bytes``, then ``retention_ms`` (by each segment's largest
        timestamp); otherwise only the start-offset rule. Whole segments, oldest first, never
        at or above the high watermark. When every segment goes, an empty segment is rolled
        first at the end offset, so the end offset is unchanged and the next append gets it.
        The start offset moves to the first remaining segment and is persisted. Files are
        renamed ``.deleted`` and removed after ``file_delete_delay_ms``; this call also
        removes those already due (:meth:`delete_expired_files`).
        """
        now = _now_ms(now_ms)
        with self._lock:
            self._check_writable()
            if now - self._last_expiration_ms >= _EXPIRATION_CHECK_MS:
                self._expire_producers(now)
            deleted = self._delete_segments(start_offset_breached(self._view.start_offset), now)
            if self._config.deletion_enabled:
                predicate = retention_bytes_breached(self._config.retention_bytes, self.size_bytes)
                if predicate is not None:
                    deleted += self._delete_segments(predicate, now)
                predicate = retention_ms_breached(self._config.retention_ms, now)
                if predicate is not None:
                    deleted += self._delete_segments(predicate, now)
            self.delete_expired_files(now_ms=now)
            return deleted

    def _delete_segments(self, predicate: Any, now_ms: int) -> list[int]:
        view = self._view
        doomed = deletable_segments(view.segments, predicate, high_watermark=view.high_watermark,
                                    end_offset=view.end_offset)
        if not doomed:
            return []
        if len(doomed) == len(view.segments):
            # There must always be a segment: roll an empty one at the end offset first.
            segments = self._roll_locked(now_ms)
            if doomed[-1].base_offset == segments.last().base_offset:
                doomed = doomed[:-1]
            view = self._view
        bases = [s.base_offset for s in doomed]
        segments = view.segments.without(bases)
        self._retire(doomed, now_ms)
        start = max(view.start_offset, segments.first().base_offset)
        self._psm.on_log_start_offset_incremented(start)
        self._refresh_unstable()
        self._publish(segments, start, view.end_offset)
        self._save_state()
        return bases

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (Kafka's DeleteRecords); returns the new
        start offset. Records below it become unreadable at once; whole segments below it are
        deleted (through ``.deleted``). ``offset`` -1 means the high watermark. Raises
        OffsetOutOfRangeError if ``offset`` is above the high watermark; TypeError / ValueError
        for a non-integer or out-of-int64 ``offset``."""
        offset = check_int("offset", offset)
        with self._lock:
            self._check_writable()
            view = self._view
            if offset == -1:
                offset = view.high_watermark
            if offset < 0 or offset > view.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: the high watermark is "
                    f"{view.high_watermark}")
            if offset > view.start_offset:
                self._psm.on_log_start_offset_incremented(offset)
                self._refresh_unstable()
                self._publish(view.segments, offset, view.end_offset)
                now = _now_ms(None)
                self._delete_segments(start_offset_breached(offset), now)
                self._save_state()
            return self._view.start_offset

    # --- compaction (seglog.storage.cleaner) ------------------------------- begin cleaner hooks ---------

    def compact(self, *, now_ms: int | None = None, force: bool = False) -> Any:
        """One compaction pass by Kafka's cleaner rules (:func:`seglog.storage.cleaner.clean_log`);
        returns its :class:`~seglog.storage.cleaner.CleanerStats` (``stats.skipped`` says why nothing
        was done: cleanup.policy without "compact", nothing dirty, or the dirty ratio not above
        ``min_cleanable_dirty_ratio`` and max.compaction.lag.ms not reached). ``force`` cleans
        regardless of policy and ratio. Holds the writer lock for the pass (appends wait, reads
        do not). Raises ReadOnlyError / LogClosedError, CorruptRecordError for a corrupt batch
        in what it reads (the pass stops; nothing it had not swapped in changes), TypeError /
        ValueError for a non-integer or out-of-int64 ``now_ms``."""
        from .cleaner import clean_log

        now = None if now_ms is None else _now_ms(now_ms)
        with self._lock:
            self._check_writable()
            return clean_log(self, now, force=force)

    @property
    def cleaner_checkpoint(self) -> int | None:
        """The cleaner checkpoint: the first offset the next compaction treats as dirty (None
        before the first pass). A Store gathers it into ``cleaner-offset-checkpoint``."""
        return getattr(self, "_cleaner_checkpoint", None)

    @cleaner_checkpoint.setter
    def cleaner_checkpoint(self, offset: int | None) -> None:
        self._cleaner_checkpoint = offset

    def _replace_segments(self, new_segment: Any, old_segments: list[Any], *, now_ms: int,
                          new_txn_index: TransactionIndex | None = None,
                          old_txn_indexes: list | None = None) -> None:
        """Publish the chain with ``new_segment`` in place of ``old_segments`` (the cleaner
        already renamed their files, ``.txnindex`` included, to ``.deleted``); their files
        are removed after ``file_delete_delay_ms`` like retention's, with the producer
        snapshots at the bases of the old segments the new one does not replace
        (``UnifiedLog.replaceSegments``). ``new_txn_index``: the new segment's transaction
        index; ``old_txn_indexes``: the old segments' (renamed). End and start offsets are
        unchanged."""
        with self._lock:
            view = self._view
            segments = view.segments.without(s.base_offset for s in old_segments)
            segments = segments.with_segment(new_segment)
            for segment in old_segments:
                self._txn_indexes.pop(segment.base_offset, None)
            if new_txn_index is not None:
                self._txn_indexes[new_segment.base_offset] = new_txn_index
            self._publish(segments, view.start_offset, view.end_offset)
            deadline = now_ms + self._config.file_delete_delay_ms
            old_txn_indexes = old_txn_indexes or [None] * len(old_segments)
            for segment, txn_index in zip(old_segments, old_txn_indexes):
                snapshot = None
                if segment.base_offset != new_segment.base_offset:
                    snapshot = self._psm.remove_and_mark_snapshot_for_deletion(
                        segment.base_offset)
                self._pending_deletes.append((deadline, _Retired(segment, txn_index, snapshot)))
                if segment.base_offset != new_segment.base_offset:
                    self._created_ms.pop(segment.base_offset, None)
                    self._jitter_ms.pop(segment.base_offset, None)

    def _require_keys(self, keys: Any) -> None:
        """Compacted topics reject keyless records (Kafka's LogValidator): InvalidRecordError
        naming the first record without a key. ``keys`` as ``encode_batch`` takes them."""
        if not self._config.compaction_enabled:
            return
        index = None
        if keys is None:
            index = 0
        elif isinstance(keys, tuple) and len(keys) == 2 and hasattr(keys[1], "dtype"):
            # (data, lengths): lengths -1 are null keys
            import numpy as np

            missing = np.flatnonzero(np.asarray(keys[1]) < 0)
            index = int(missing[0]) if missing.size else None
        elif getattr(keys, "ndim", 1) == 2:
            return  # a 2-D uint8 array: every row is a key
        else:
            index = next((i for i, key in enumerate(keys) if key is None), None)
        if index is not None:
            raise InvalidRecordError(
                f"record {index} has no key: a compacted topic (cleanup.policy=compact) "
                "cannot accept a record without a key")

    def _require_batch_keys(self, columns: Any, position: int) -> None:
        """:meth:`_require_keys` for a client batch's decoded columns."""
        if not self._config.compaction_enabled:
            return
        import numpy as np

        missing = np.flatnonzero(np.asarray(columns.key_lengths) < 0)
        if missing.size:
            raise InvalidRecordError(
                f"record {int(missing[0])} of the batch at position {position} has no key: a "
                "compacted topic (cleanup.policy=compact) cannot accept a record without a key")

    # --- end cleaner hooks -----------------------------------------------------------------------

    # --- following a writer (read-only) ----------------------------------------------------------

    def refresh(self) -> bool:
        """Read-only logs: pick up what the writer appended, rolled and deleted since the last
        refresh; returns whether the end or start offset changed. Only whole batches become
        visible. Segments the writer truncated are not followed (reopen then)."""
        with self._lock:
            self._check_open()
            if not self._read_only:
                raise ReadOnlyError("refresh() is for logs opened with read_only=True")
            view = self._view
            on_disk = set()
            for name in os.listdir(self._dir):
                parsed = filenames.parse_segment_file(name)
                if parsed is not None and parsed[1] == filenames.LOG_SUFFIX and parsed[2] == "":
                    on_disk.add(parsed[0])
            known = set(view.segments.bases)
            gone = [s for s in view.segments if s.base_offset not in on_disk]
            segments = view.segments.without(s.base_offset for s in gone)
            last_known = max(known) if known else -1
            new_bases = sorted(b for b in on_disk - known if b > last_known)
            now = _now_ms(None)
            if new_bases and last_known in on_disk:
                # The writer rolled: the previously active segment got its last batches and
                # its indexes were trimmed (shrunk). Reopen it rather than refresh it, so no
                # mapping of the old, longer index file is read past the new end (SIGBUS).
                gone.append(segments.get(last_known))
                segments = segments.with_segment(self._open_segment(last_known))
            elif last_known in on_disk:
                segments.get(last_known).refresh()
            for base in new_bases:
                segments = segments.with_segment(self._open_segment(base))
                self._note_created(base, now)
            if not segments:
                return False
            end = segments.last().next_offset
            if end > self._psm.map_end_offset:  # follow the writer's producer state
                self._psm.rebuild(_batches_from(segments, self._psm.map_end_offset),
                                  end_offset=end)
                self._psm.on_high_watermark_updated(end)  # a follower's high watermark
                self._refresh_unstable()
            start_checkpoint = getattr(self._state, "read_log_start_offset", lambda: None)()
            start = max(segments.first().base_offset, start_checkpoint or 0, view.start_offset)
            end = segments.last().next_offset
            changed = (start, end) != (view.start_offset, view.end_offset)
            self._publish(segments, min(start, end), end, high_watermark=end)
            for segment in gone:
                segment.close()
            if changed:
                self._data_cond.notify_all()
            return changed
