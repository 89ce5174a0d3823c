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
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple

from .. import format as fmt
from ..errors import CorruptRecordError, CorruptSegmentError, OffsetOutOfRangeError
from .config import INT32_MAX, check_int
from .segments import SegmentMap
from .transactions import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    checked_batches,
    filter_batches,
)

__all__ = [
    "EARLIEST_TIMESTAMP",
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
    "read_columns",
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


@dataclass(frozen=True, init=False)
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

    def __init__(self, *, buffer: memoryview, offset: int, next_offset: int,
                 log_path: str | None, position: int, size_bytes: int, high_watermark: int,
                 start_offset: int, end_offset: int, last_stable_offset: int = -1,
                 aborted_transactions: list | None = None):
        # One dict update instead of the frozen dataclass's object.__setattr__ per field:
        # a result is made on every read, and eleven setattr calls cost more than the read's
        # index lookup. Frozen all the same (assignment raises FrozenInstanceError).
        self.__dict__.update(
            buffer=buffer, offset=offset, next_offset=next_offset, log_path=log_path,
            position=position, size_bytes=size_bytes, high_watermark=high_watermark,
            start_offset=start_offset, end_offset=end_offset,
            last_stable_offset=last_stable_offset, aborted_transactions=aborted_transactions)


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
    segment = segments.floor(offset) or segments.oldest()
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
            min_one_batch: bool) -> tuple[Any, memoryview, int, int]:
    """``(segment, buffer, next_offset, position)`` of the whole batches from ``offset`` that
    a read bounded by ``view`` and ``max_offset`` returns (``position``: the buffer's in the
    segment's .log), or ``(None, empty, offset, 0)``. The caller holds the Log's lock
    (segments are not thread-safe)."""
    for segment, max_position in segments_for_read(view, offset, max_offset):
        # One header walk gives the bytes, their position and the next offset (the segment's
        # read_span); a read-only segment whose file came up short (-1) is walked again here.
        buffer, position, next_offset = segment.read_span(
            offset, max_bytes, max_position=max_position, min_one_batch=min_one_batch)
        if buffer.nbytes:
            if next_offset < 0:
                next_offset = last_batch(buffer)[1]
            following = view.segments.next_base(segment)
            bound = following if following is not None else view.end_offset
            if next_offset > bound:
                buffer, next_offset = cut_at_bound(segment, buffer, offset=offset, bound=bound,
                                                   last=following is None)
            return segment, buffer, next_offset, position
        if max_position is not None:
            break  # the bound is in this segment: nothing more to read
        if min_one_batch:
            check_nothing_hidden(segment, offset)
        if not min_one_batch and segment.translate_offset(offset) is not None:
            break  # the next batch is larger than max_bytes
    return None, memoryview(b""), offset, 0


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
            where=result.log_path or "", base_position=result.position)
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


def read_columns(read: Callable[..., LogReadResult], backend: Any, *, offset: int,
                 max_records: int, max_bytes: int, max_offset: int | None, isolation: str,
                 check_crcs: bool) -> Any:
    """Up to ``max_records`` records from ``offset`` as the backend's Columns, from one
    ``read`` (reading on past reads that held only control batches): aborted transactions'
    batches left out for read_committed (every batch checked first), records below
    ``offset`` sliced off (:class:`SlicedColumns`)."""
    while True:
        result = read(offset, max_bytes, max_offset=max_offset, isolation=isolation)
        buffer: bytes | memoryview = result.buffer
        if result.aborted_transactions:
            # Only batches of aborted transactions need leaving out: copy the others.
            # Every batch is checked before its header decides what is left out.
            buffer = b"".join(
                result.buffer[b.position:b.position + b.size_bytes]
                for b in filter_batches(
                    checked_batches(backend.iter_batches(result.buffer, check_offsets=True),
                                    check_crcs=check_crcs, where=result.log_path or "",
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
