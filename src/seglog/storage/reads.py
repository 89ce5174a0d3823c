"""What a Log read sees and how it finds its bytes: the reader snapshot (:class:`LogView`), the
read result (:class:`LogReadResult`) and the segment walk bounded by the snapshot.

A writer publishes a :class:`LogView` with one attribute store after every change; a read takes
the current one and reads segments bounded by it (the high watermark, the last stable offset
or the end offset, each with its segment and batch-boundary position), so it sees only whole
batches that were fully appended. The Log holds its lock while a read calls into a segment
(the Segment contract says segments are not thread-safe); the functions here take no lock.

Untrusted bytes (issue 8). A read never moves past a segment that still holds something it
could not read (an unparseable header below its end, a torn batch in a segment that has a
later one): CorruptRecordError (:func:`check_nothing_hidden`) instead of records that silently
vanish. Every read (raw ones included) also bounds a segment's batches by what the Log knows:
offsets below the next segment's base offset, or below the log end offset in the last
segment; a batch past that (a raised base offset) is never handed out (:func:`cut_at_bound`:
the batches before it are, then CorruptSegmentError with ``REASON_OFFSETS_OUTSIDE_SEGMENT``).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

from .. import format as fmt
from ..errors import CorruptRecordError, CorruptSegmentError, LogClosedError, OffsetOutOfRangeError
from .config import INT32_MAX, check_int, check_optional_int
from .segments import SegmentMap
from .transactions import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    checked_batches,
    collect_aborted_transactions,
    filter_batches,
)

if TYPE_CHECKING:
    from .._contract import Segment
    from .txnindex import TransactionIndex

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LogReads",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "READ_BYTES_DEFAULT",
    "LogReadResult",
    "LogView",
    "SlicedColumns",
    "check_isolation",
    "check_max_bytes",
    "check_nothing_hidden",
    "cut_at_bound",
    "iter_records",
    "last_batch",
    "offset_by_time",
    "position_of",
    "read_columns_from",
    "read_in",
    "segments_for_read",
    "sendfile_in",
]

#: ``offset_for_timestamp`` sentinels (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

#: Default and largest ``max_bytes`` of one read.
READ_BYTES_DEFAULT = 1 << 20
_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def check_max_bytes(max_bytes: Any) -> int:
    """A read's ``max_bytes``: an int >= 0 (TypeError / ValueError otherwise), capped at
    INT32_MAX because segment positions are int32 (a larger bound reads the same bytes)."""
    return min(check_int("max_bytes", max_bytes, minimum=0), INT32_MAX)


def check_isolation(isolation: str) -> bool:
    """True for read_committed, False for read_uncommitted; ValueError for an unknown level."""
    if isolation == READ_UNCOMMITTED:
        return False
    if isolation == READ_COMMITTED:
        return True
    raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}")


@dataclass(frozen=True, kw_only=True)
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

    Built with keyword arguments only (its many offsets must not be confused by position).
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


class LogView(NamedTuple):
    """What readers see, published by the Log's writer with one attribute store."""

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


class SlicedColumns:
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


def last_batch(buffer: memoryview) -> tuple[int, int]:
    """``(position, next_offset)`` of the last whole batch in ``buffer`` (which holds whole
    batches only, as segment reads return). The lengths are checked all the same (a length
    below the minimum would walk backwards forever): CorruptRecordError."""
    position, last, size_bytes = 0, 0, len(buffer)
    while position + fmt.LOG_OVERHEAD <= size_bytes:
        last = position
        length = _BATCH_PREFIX.unpack_from(buffer, position)[1]
        if length < fmt.RECORD_BATCH_OVERHEAD - fmt.LOG_OVERHEAD \
                or position + fmt.LOG_OVERHEAD + length > size_bytes:
            raise CorruptRecordError(
                f"batch length {length} at position {position} of a segment read is not a "
                "whole batch", position=position,
                reason=fmt.REASON_BATCH_TOO_SMALL
                if length < fmt.RECORD_BATCH_OVERHEAD - fmt.LOG_OVERHEAD else fmt.REASON_TRUNCATED)
        position += fmt.LOG_OVERHEAD + length
    base_offset = _INT64.unpack_from(buffer, last)[0]
    delta = _INT32.unpack_from(buffer, last + fmt.LAST_OFFSET_DELTA_POSITION)[0]
    return last, base_offset + delta + 1


def cut_at_bound(segment: Any, buffer: memoryview, *, offset: int, bound: int,
                 last: bool) -> tuple[memoryview, int]:
    """``buffer`` (a read of ``segment`` at ``offset``) up to its first batch whose offsets
    reach ``bound`` -- the next segment's base offset, or the log end offset for the last
    segment (``last``) -- and the next offset there. A batch's base offset is outside its CRC:
    a raised one in the last batch of a segment keeps offsets increasing inside the segment,
    and only the segment's bound shows it. The batches before it are served (a reader gets the
    records before the bad batch); when the first batch of the read is the bad one,
    CorruptSegmentError (``REASON_OFFSETS_OUTSIDE_SEGMENT``, its position in the ``.log``), so
    a reader stops there and keeps raising there."""
    position, previous_next, size_bytes = 0, offset, len(buffer)
    while position + fmt.LOG_OVERHEAD <= size_bytes:
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


def check_nothing_hidden(segment: Any, offset: int) -> None:
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


def position_of(segments: SegmentMap, offset: int) -> tuple[int, int]:
    """``(segment base, position)`` of the batch boundary at ``offset``."""
    segment = segments.floor(offset) or segments.first()
    located = segment.translate_offset(offset)
    position = located[0] if located is not None else segment.size_bytes
    return segment.base_offset, position


def _limit(view: LogView, max_offset: int | None) -> tuple[int, int, int]:
    """``(limit offset, base of its segment, position there)`` for a read bound."""
    if max_offset is None:
        return view.high_watermark, view.hw_base, view.hw_position
    if max_offset >= view.end_offset:
        active = view.segments.last()
        base = active.base_offset if active is not None else view.end_offset
        return view.end_offset, base, view.end_position
    if max_offset == view.high_watermark:
        return view.high_watermark, view.hw_base, view.hw_position
    base, position = position_of(view.segments, max_offset)
    return max_offset, base, position


def segments_for_read(view: LogView, offset: int,
                      max_offset: int | None) -> Iterator[tuple[Any, int | None]]:
    """Yield ``(segment, max_position or None)`` to try for a read of ``offset`` bounded by
    ``max_offset`` (None: the high watermark). OffsetOutOfRangeError for ``offset`` outside
    ``[start_offset, end_offset]``."""
    if offset < view.start_offset or offset > view.end_offset:
        raise OffsetOutOfRangeError(
            f"offset {offset} is outside the log's range [{view.start_offset}, "
            f"{view.end_offset}]")
    limit, limit_base, limit_position = _limit(view, max_offset)
    if offset >= limit:
        return
    for segment in view.segments.from_offset(offset):
        if segment.base_offset > limit_base:
            return
        yield segment, (limit_position if segment.base_offset == limit_base else None)


def read_in(view: LogView, offset: int, *, max_bytes: int, max_offset: int | None,
            min_one_batch: bool) -> tuple[Any, memoryview, int]:
    """``(segment, buffer, next_offset)`` of the whole batches from ``offset`` that a read
    bounded by ``view`` and ``max_offset`` returns, or ``(None, empty, offset)``. The caller
    holds the Log's lock (segments are not thread-safe)."""
    for segment, max_position in segments_for_read(view, offset, max_offset):
        buffer = segment.read(offset, max_bytes, max_position=max_position,
                              min_one_batch=min_one_batch)
        if _nbytes(buffer):
            next_offset = last_batch(buffer)[1]
            following = view.segments.next_base(segment)
            bound = following if following is not None else view.end_offset
            if next_offset > bound:
                buffer, next_offset = cut_at_bound(segment, buffer, offset=offset, bound=bound,
                                                   last=following is None)
            return segment, buffer, next_offset
        if max_position is not None:
            break  # the bound is in this segment: nothing more to read
        if min_one_batch:
            check_nothing_hidden(segment, offset)
        if not min_one_batch and segment.translate_offset(offset) is not None:
            break  # the next batch is larger than max_bytes
    return None, memoryview(b""), offset


def iter_records(read: Callable[..., LogReadResult], backend: Any, *, offset: int,
                 end: int | None, max_offset: int | None, isolation: str,
                 check_crcs: bool) -> Iterator[Any]:
    """The records with ``offset <= record offset < end`` that successive ``read`` calls (the
    Log's :meth:`~seglog.storage.log.Log.read`, 1 MiB at a time) return, control batches and,
    for read_committed, aborted transactions left out. Every batch is checked
    (:func:`~seglog.storage.transactions.checked_batches`: CRC32C unless ``check_crcs`` is
    False, base offsets increasing also across reads) before its records are decoded."""
    previous_next = -1  # next offset of the previous batch seen
    while True:
        result = read(offset, READ_BYTES_DEFAULT, max_offset=max_offset, isolation=isolation)
        if not len(result.buffer):
            return
        batches = checked_batches(
            backend.iter_batches(result.buffer, check_offsets=True),
            check_crcs=check_crcs, previous_next_offset=previous_next,
            where=result.log_path, base_position=result.position)
        for batch in filter_batches(batches, result.aborted_transactions, isolation=isolation):
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


def read_columns_from(read: Callable[..., LogReadResult], backend: Any, *, offset: int,
                      max_records: int, max_bytes: int, max_offset: int | None,
                      isolation: str, check_crcs: bool) -> Any:
    """Up to ``max_records`` records from ``offset`` as the backend's Columns, from one
    ``read`` (reading on past reads that held only control batches): aborted transactions'
    batches left out for read_committed (every batch checked first), records below
    ``offset`` sliced off (:class:`SlicedColumns`)."""
    while True:
        result = read(offset, max_bytes, max_offset=max_offset, isolation=isolation)
        buffer = result.buffer
        if result.aborted_transactions:
            # Only batches of aborted transactions need leaving out: copy the others.
            # Every batch is checked before its header decides what is left out.
            buffer = b"".join(
                result.buffer[b.position:b.position + b.size_bytes]
                for b in filter_batches(
                    checked_batches(backend.iter_batches(result.buffer, check_offsets=True),
                                    check_crcs=check_crcs, where=result.log_path,
                                    base_position=result.position),
                    result.aborted_transactions, isolation=isolation))
        columns = backend.decode_columns(buffer, check_crcs=check_crcs, check_offsets=True)
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
    return SlicedColumns(columns, lo, hi)


def sendfile_in(view: LogView, fd: int, offset: int, *, max_bytes: int,
                max_offset: int | None) -> tuple[int, int]:
    """Send the whole batches :func:`read_in` would return to ``fd`` with sendfile(2);
    ``(bytes_sent, next_offset)``, ``(0, offset)`` when nothing is readable. The caller holds
    the Log's lock."""
    for segment, max_position in segments_for_read(view, offset, max_offset):
        sent, next_offset = segment.sendfile(fd, offset, max_bytes, max_position=max_position)
        if sent:
            return sent, next_offset
        if max_position is not None:
            break
        check_nothing_hidden(segment, offset)
    return 0, offset


def offset_by_time(view: LogView, timestamp_ms: int) -> int | None:
    """The first offset whose record timestamp is >= ``timestamp_ms``, through the segments'
    time indexes (``MAX_TIMESTAMP``: the offset of the record with the largest timestamp), or
    None. The caller holds the Log's lock (and answers the other sentinels itself)."""
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
        found = segment.find_offset_by_timestamp(timestamp_ms, starting_offset=view.start_offset)
        if found is not None:
            return found[1]
    return None


# --- the read side of a Log ---------------------------------------------------------------------


class LogReads:
    """The read side of :class:`~seglog.storage.log.Log` (Kafka's ``UnifiedLog.read`` and its
    neighbours): the offsets readers see and every read, over the :class:`LogView` the writer
    side publishes.

    ``Log`` extends it; it calls :meth:`_init_reads` first, publishes ``_view`` (a
    :class:`LogView`) under ``_lock`` after every change, notifies ``_data_cond`` when
    ``_waiters`` wait, and provides :meth:`txn_index`. Reads hold ``_lock`` only while they
    call into a segment (see :mod:`seglog.storage.log`, Threads).
    """

    _view: LogView

    def _init_reads(self, dir_path: str, backend: Any, *, read_only: bool) -> None:
        self._dir = dir_path
        self._be = backend
        self._read_only = read_only
        self._lock = threading.RLock()
        self._data_cond = threading.Condition(self._lock)
        self._waiters = 0  # threads in wait_for_data (appends notify only when there are some)
        self._closed = False

    def txn_index(self, base_offset: int) -> TransactionIndex:
        """The ``.txnindex`` of the segment at ``base_offset`` (the Log's)."""
        raise NotImplementedError

    @property
    def dir_path(self) -> str:
        """The partition directory."""
        return self._dir

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
    def size_bytes(self) -> int:
        """Total bytes of the segments' ``.log`` files."""
        return sum(segment.size_bytes for segment in self._view.segments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The segments in offset order (the last is active). Read-only use: the log owns them."""
        return self._view.segments.segments

    @property
    def active_segment(self) -> Any:
        """The segment appends go to."""
        return self._view.segments.last()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self._dir} is closed")

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
        max_bytes = check_max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        committed = check_isolation(isolation)
        self._lock.acquire()
        try:
            view = self._view
            lso = view.last_stable_offset
            if committed:
                max_offset = lso if max_offset is None else min(max_offset, lso)
            segment, buffer, next_offset = read_in(view, offset, max_bytes=max_bytes,
                                                   max_offset=max_offset,
                                                   min_one_batch=min_one_batch)
            aborted = [] if committed else None
            if segment is None:
                return LogReadResult(
                    buffer=memoryview(b""), offset=offset, next_offset=offset, log_path=None,
                    position=0, size_bytes=0, high_watermark=view.high_watermark,
                    start_offset=view.start_offset, end_offset=view.end_offset,
                    last_stable_offset=lso, aborted_transactions=aborted)
            located = segment.translate_offset(offset)
            position = located[0] if located is not None else 0
            if committed:
                aborted = self._aborted_locked(view, offset, next_offset)
        finally:
            self._lock.release()
        return LogReadResult(
            buffer=buffer, offset=offset, next_offset=next_offset, log_path=segment.log_path,
            position=position, size_bytes=len(buffer), high_watermark=view.high_watermark,
            start_offset=view.start_offset, end_offset=view.end_offset, last_stable_offset=lso,
            aborted_transactions=aborted)

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

    def _aborted_locked(self, view: LogView, offset: int, upper_bound_offset: int) -> list:
        if upper_bound_offset <= offset:
            return []
        writer = not self._read_only
        indexes = (self.txn_index(segment.base_offset)
                   for segment in view.segments.from_offset(offset))
        # A writer's cached index without entries has none on disk either: skip the read.
        return collect_aborted_transactions(
            (index for index in indexes if not (writer and index.last_offset is None)),
            offset, upper_bound_offset)

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
        check_isolation(isolation)
        return iter_records(self.read, self._be, offset=max(start, self.start_offset), end=end,
                            max_offset=max_offset, isolation=isolation,
                            check_crcs=bool(check_crcs))

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
        max_bytes = check_max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        return read_columns_from(self.read, self._be, offset=offset, max_records=max_records,
                            max_bytes=max_bytes, max_offset=max_offset, isolation=isolation,
                            check_crcs=bool(check_crcs))

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
        max_bytes = check_max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        committed = check_isolation(isolation)
        fd = out if isinstance(out, int) else out.fileno()
        self._lock.acquire()
        try:
            view = self._view
            if committed:
                lso = view.last_stable_offset
                max_offset = lso if max_offset is None else min(max_offset, lso)
            return sendfile_in(view, fd, offset, max_bytes=max_bytes, max_offset=max_offset)
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
        with self._lock:
            return offset_by_time(view, timestamp_ms)

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
