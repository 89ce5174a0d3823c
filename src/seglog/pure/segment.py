"""One log segment: ``<base>.log`` plus its ``.index`` and ``.timeindex`` (Kafka's LogSegment).

The ``.log`` is a plain concatenation of RecordBatch v2 batches (disk format = wire format). The
two sparse indexes get an entry for a batch when more than ``index_interval_bytes`` were
appended since the last entry (checked *before* the batch's bytes are counted, so the first
batch never gets one): offset index ``(batch last offset, batch position)``, time index
``(max timestamp so far, last offset of the batch that carried it)``. Appends apply this rule
per batch, exactly as ``recover()`` does, so an appended segment's indexes equal the rebuilt
ones (Kafka applies it per append call; the difference only makes our indexes denser).

A writer's reads are zero-copy: ``read()`` returns a read-only memoryview of an mmap of the
``.log``. A mapping stays alive while any view of it exists; when the file outgrows it a new
one is made. Truncating a file under a live mapping would turn the next access into SIGBUS, so
``truncate_to``/``recover`` first close every mapping that reaches past the cut and raise
ViewsOutstandingError if one still has views (this twin cannot see view ranges, so any live
view of such a mapping counts, even one below the cut).

Dropping mapped pages (issue 11). Every page of the mapping a view was read through stays in
this process's page tables (its RSS) after the bytes were used, e.g. sent to a socket, so a
broker serving a whole log zero-copy would end up with the log in its RSS (Kafka sends with
sendfile and maps nothing). :func:`drop_mapped_pages` takes those pages back out with
``madvise(MADV_DONTNEED)`` once the caller is done with them. This is safe for these
mappings, and only for them (hence the function refuses any other buffer): they are
``MAP_SHARED`` read-only file mappings, so no page in them was ever written through the
mapping or copied on write; madvise(2) says that after MADV_DONTNEED a later access to a
shared file mapping "will result in ... repopulating the memory contents from the up-to-date
contents of the underlying mapped file". The data stays in the page cache (nothing is written
or freed), and any view of the range still alive (another reader's, or a transport that kept
a view of what the socket had not taken yet, as Python 3.12's does) reads the same bytes
again through a page fault. Appends write with pwrite, never through the mapping, so nothing
appended can be lost. (``posix_madvise(POSIX_MADV_DONTNEED)`` would not do: glibc makes it a
no-op on Linux.) The range is rounded out to whole pages: the partial pages at its ends hold
other batches, which are equally safe to drop.

The range is widened further, to whole ``_DROP_BLOCK_BYTES`` (2 MiB) blocks, because a page
fault maps more than the page it hits: the kernel maps the page cache's whole folio around it
(ext4 keeps file data in large folios, up to a PMD, 2 MiB on x86-64) and, around that,
fault-around's neighbours (64 KiB). So the next read, whose header walk starts at or a little
before where the previous range ended, maps that range's last folio again; measured on Linux
6.18 with 537 KiB batches, a drop of the page-rounded range alone left a 64 KiB to 512 KiB
piece of every range mapped. Folios are aligned to their size in the file, so a drop that
starts at a 2 MiB boundary takes those pieces back, and one that ends at one takes the folio
the read's look at the next header mapped. The walk starts at the offset-index entry at or
before the offset read, which can be a whole batch earlier (up to max.message.bytes, 1 MiB by
default): the drop starts one block earlier still, a block of page tables that costs the
kernel a few microseconds to walk. Another reader's pages in the widened range are dropped as
well, which, as above, costs it a page fault and nothing else.

Small ranges are gathered. Each drop unmaps what the reads since the last one mapped, and a
read that follows a drop maps the folio around its start again (measured: ~1 us for the call,
~14 us when an 11 KB range's folio had been mapped again, ~30 us for a 1 MiB range), so a
consumer at the end of the log fetching a few KB at a time would pay a drop and a folio's
fault per fetch. Each mapping therefore keeps one pending range: a range under
``_DROP_PENDING_BYTES`` (1 MiB) joins it when it lies within a block of it, and the pending
range is dropped once it spans 1 MiB, or first when a range far from it comes (a reader
elsewhere in the segment). At most about 1 MiB read last (plus the folios around it) stays
mapped per mapping; a range of 1 MiB or more is dropped at once.

A read-only segment (a follower, often in another process) maps nothing: the writer may
truncate the file at any time (``Log.truncate_to``, recovery, index trims on roll), and a
mapping touched past the file's new end kills the reader with SIGBUS. It reads with pread
(4 KiB chunks for header scans, the exact range for ``read()``, which returns bytes) and
treats a short read as the end (the file shrank; ``refresh()`` catches up). Its index copies
are read with pread too (``seglog.pure.index``).

Untrusted bytes (issue 8; docs/format.md states the rule):

* Index entries are checked before use. On open, ``sanity_check`` (offsets and positions
  strictly increasing, positions non-negative and below the ``.log`` size; time index
  timestamps non-decreasing, offsets non-decreasing and below ``next_offset``); on every
  lookup, the entry must land on a batch start (a parseable header whose offsets fit the
  entry), else the entry before it is tried (``_ENTRY_FALLBACKS`` times) and then position 0.
  An index that fails: a writer empties it (appends and close go on) and sets
  ``indexes_need_rebuild`` (the Log then calls ``recover()``, which rebuilds it from the
  ``.log``); a reader ignores it and scans. A broken index never crashes and never hides data.
* Below the segment's extent (a writer: its file size; a reader: the whole batches it saw,
  plus corrupt bytes, never a torn tail the writer may still be writing) every byte was
  written as whole batches, so a header that cannot be parsed (length < 14, bad magic, shorter
  than 61 bytes, or running past the extent) is ``CorruptSegmentError`` (a
  ``CorruptRecordError`` with ``reason``, ``position``, ``path`` and ``base_offset``), never a
  silent end of data. Open and ``refresh()`` scan the tail leniently (the tail may be torn
  before recovery); only ``recover()`` cuts bytes.
* Base offsets (bytes 0-7 of a batch) lie outside the CRC, so every header walk checks them
  (fuzz findings F4, F5: a lowered base offset made a read step over the batch holding the
  offset asked for): each batch needs ``floor < base <= last`` with ``floor`` the previous
  batch's last offset in the walk (``base_offset - 1`` for the first), a last offset inside
  int64, and, for a walk that starts at an offset-index entry ``(E, P)``, a batch whose last
  offset reaches E before one whose base offset passes it (E is the last offset of the
  append that starts at P, so a batch at P whose base offset was lowered is caught too).
  A failure is ``CorruptSegmentError(REASON_OFFSETS_NOT_INCREASING)`` at the batch's
  position (for an unmet entry, where the walk passed it, or P at the end of the segment).
  The lenient open/refresh scan steps over such a batch (its offsets count neither for
  ``next_offset`` nor for the max timestamp; the batches after it do, and ``next_offset``
  is at least the last index entry's offset + 1), so reads that reach it raise, and
  ``recover()`` cuts there (its own check: base offset above the previous last offset,
  the first above ``base_offset - 1``).
* ``read_record`` decodes a record, so it checks the batch CRC32C first (``check_crcs=True``,
  once per batch until bytes change); raw reads (``read``, ``sendfile``) are served
  unverified, as Kafka's broker serves them.
* Numbers: a non-integer is TypeError; offsets and timestamps may be any int (clamped to
  int64); sizes and positions below 0 are ValueError. Both twins behave alike.

Kafka decisions made here (see ``seglog._contract.Segment`` for the contract):

* ``translate_offset``: index lookup, then a header-only scan for the first batch whose last
  offset >= the target (FileRecords.searchForOffsetWithSize): a read inside a batch returns the
  whole batch, a read of an offset in a gap returns the next batch.
* ``read``: whole batches only (Kafka may cut the last one; we never do), at least one when
  ``min_one_batch`` (Kafka's minOneMessage), never past ``max_position``.
* Opening an existing segment uses its indexes once checked (above); ``next_offset``, the max
  timestamp and the bytes since the last index entry come from the last index entries plus a
  header scan of the tail after the last offset-index entry. If an index file is missing or
  fails a check, ``indexes_need_rebuild`` is True and the Log calls ``recover()`` (Kafka's
  LogLoader calls recoverSegment on a CorruptIndexException).
  Existing indexes open at their trimmed length (not preallocated: a log of 1,000 old
  segments would otherwise map 10 GB of zeros), so a Log must ``resize_indexes()`` its active
  segment after opening or recovering it (indexes are trimmed on close and recover, Kafka's
  LogLoader resizes the active one). ``create=True`` preallocates; ``recover()`` resets
  (preallocates) and then trims.
* ``truncate_to(offset)`` drops the batches whose *base* offset >= offset (the contract); Kafka
  drops the batch containing ``offset``. The indexes are truncated and resized to
  ``max_index_bytes`` as in Kafka.
* Recovery validates (in this order) length >= 14, length <= INT32_MAX - 12, whole batch
  present (else REASON_TRUNCATED), magic 2, size >= 61, CRC32C, last_offset_delta >= 0, records
  area (record_count in [0, last_offset_delta + 1]; for uncompressed batches the record
  lengths fill the area exactly), offsets increasing and >= base_offset, relative last offset
  <= INT32_MAX (REASON_BAD_LAST_OFFSET_DELTA). A zero-filled (preallocated) tail reads as batch
  length 0: REASON_BATCH_TOO_SMALL at that position.

Write-path hints the native twin adds and this one leaves out (they change no byte a reader
can see and no durability promise): reserving disk blocks past EOF ahead of appends
(``fallocate`` KEEP_SIZE) and starting writeback of each 8 MiB appended
(``sync_file_range``, which Python's ``os`` does not offer), so that a later fsync is short.

Not thread-safe: the Log serialises calls. ``OSError`` propagates unchanged.
"""

from __future__ import annotations

import errno
import mmap
import operator
import os
import struct
from typing import ClassVar

import numpy as np

from .. import filenames
from .. import format as fmt
from ..arguments import check_int_argument
from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    CorruptSegmentError,
    IndexFullError,
    InvalidOffsetError,
    InvalidRecordError,
    LogClosedError,
    ReadOnlyError,
    RecordTooLargeError,
    ViewsOutstandingError,
)
from ..results import AppendResult, RecoveryResult
from .codec import Batch, iter_batches
from .crc32c import crc32c
from .index import OffsetIndex, TimeIndex

__all__ = ["Segment", "AppendResult", "RecoveryResult", "drop_mapped_pages"]

_HEADER = fmt.BATCH_HEADER
_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_HEAD_BYTES = fmt.RECORD_BATCH_OVERHEAD
#: Offset-index entries tried (each one before the last) before a lookup falls back to the
#: segment start: a broken entry costs one more index interval of scanning.
_ENTRY_FALLBACKS = 4
#: A reader's pread granularity for header scans (a few dozen small batches per syscall).
_CHUNK_BYTES = 4096
#: A reader's batches() reads whole batches in windows of about this size.
_WINDOW_BYTES = 1 << 20
#: :func:`drop_mapped_pages` widens its range to whole blocks of this size (see the module
#: docstring): the span of a PMD on x86-64, the largest folio the page cache maps.
_DROP_BLOCK_BYTES = 2 << 20
#: :func:`drop_mapped_pages` gathers smaller ranges of a mapping until they span this much.
_DROP_PENDING_BYTES = 1 << 20


class _LogMap(mmap.mmap):
    """A writer segment's read-only mapping of its ``.log``: its own type, so that
    :func:`drop_mapped_pages` drops pages of these mappings only (never of a private or
    anonymous mapping, whose pages MADV_DONTNEED would lose). ``drop_start``/``drop_end``:
    the range it gathers for the next drop (``drop_end`` 0: none)."""

    drop_start = 0
    drop_end = 0


def _address(buffer):
    """The memory address of ``buffer``'s first byte (numpy can tell it for a read-only
    buffer; Python itself cannot)."""
    return np.frombuffer(buffer, dtype=np.uint8).__array_interface__["data"][0]


def _page_span(start, end):
    return (-(-end // mmap.PAGESIZE) - start // mmap.PAGESIZE) * mmap.PAGESIZE


def _drop_pending(mapping):
    """madvise(MADV_DONTNEED) ``mapping``'s pending range, widened (see the module
    docstring), and forget it; its span in whole pages."""
    start, end = mapping.drop_start, mapping.drop_end
    mapping.drop_start = mapping.drop_end = 0
    block_start = max(start - _DROP_BLOCK_BYTES, 0)
    block_start -= block_start % _DROP_BLOCK_BYTES
    block_end = -(-end // _DROP_BLOCK_BYTES) * _DROP_BLOCK_BYTES
    # Python's madvise clips the length at the mapping's (the file's size when it was mapped,
    # not a whole block); the kernel rounds it up to a page.
    mapping.madvise(mmap.MADV_DONTNEED, block_start, block_end - block_start)
    return _page_span(start, end)


def drop_mapped_pages(buffer):
    """Drop the pages of a writer segment's ``.log`` mapping that ``buffer`` (a view from
    :meth:`Segment.read`, or a contiguous slice of one) covers from this process's page
    tables: ``madvise(MADV_DONTNEED)`` on the range widened to whole ``_DROP_BLOCK_BYTES``
    blocks, one more before it. Ranges under ``_DROP_PENDING_BYTES`` are gathered per mapping
    and dropped together once they span that much, or when a range far from them comes. See
    the module docstring for why, and why the data stays correct, for this view and any
    other. Returns the bytes, in whole pages, of the ranges this call dropped (0 when the
    range waits); 0, doing nothing, when ``buffer`` is anything else (bytes, a reader's pread
    copy, an empty read, a released view). OSError when madvise fails."""
    if type(buffer) is not memoryview:
        return 0
    try:
        owner = buffer.obj
    except ValueError:  # a released view: nothing to drop
        return 0
    if type(owner) is not _LogMap or not buffer.c_contiguous or buffer.nbytes == 0:
        return 0
    start = _address(buffer) - _address(owner)
    end = start + buffer.nbytes
    if start < 0 or end > len(owner):
        raise AssertionError(f"a segment view [{start}, {end}) outside its mapping "
                             f"[0, {len(owner)})")
    dropped = 0
    if owner.drop_end and (start > owner.drop_end + _DROP_BLOCK_BYTES
                           or end + _DROP_BLOCK_BYTES < owner.drop_start):
        dropped = _drop_pending(owner)
    if owner.drop_end == 0:
        owner.drop_start, owner.drop_end = start, end
    else:
        owner.drop_start = min(owner.drop_start, start)
        owner.drop_end = max(owner.drop_end, end)
    if owner.drop_end - owner.drop_start >= _DROP_PENDING_BYTES:
        dropped += _drop_pending(owner)
    return dropped


class _Stop:
    """What a lenient header scan found: ``batches`` [(position, header)], ``reason`` ('' at
    a clean end) and ``position`` (where it stopped)."""

    __slots__ = ("batches", "reason", "position")

    def __init__(self):
        self.batches, self.reason, self.position = [], "", 0


class _Invalid(Exception):
    """Internal: a batch check failed with a reason (turned into the caller's error)."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


def _check_records(buf, position, size, attributes, last_offset_delta, record_count):
    """Records-area consistency, cheap version: counts, and for uncompressed batches that the
    record length varints tile the area exactly (Kafka's "Incorrect declared batch size")."""
    if record_count < 0 or record_count > last_offset_delta + 1:
        raise _Invalid(fmt.REASON_BAD_RECORDS,
                       f"record count {record_count} with last offset delta {last_offset_delta}")
    if attributes & fmt.COMPRESSION_CODEC_MASK != fmt.COMPRESSION_NONE:
        if record_count > 0 and size == _HEAD_BYTES:
            raise _Invalid(fmt.REASON_BAD_RECORDS, "compressed batch without a records area")
        return
    p, end = position + _HEAD_BYTES, position + size
    for _ in range(record_count):
        value = shift = 0
        while True:  # zig-zag varint, at most 5 bytes
            if p >= end or shift > 28:
                raise _Invalid(fmt.REASON_BAD_RECORDS, "record length runs past the batch")
            byte = buf[p]
            p += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        length = (value >> 1) ^ -(value & 1)
        if length < 0 or length > end - p:
            raise _Invalid(fmt.REASON_BAD_RECORDS, f"record length {length} out of range")
        p += length
    if p != end:
        raise _Invalid(fmt.REASON_BAD_RECORDS, "records area has bytes after the last record")


def _check_batch(buf, position, end, max_batch_bytes=None, shift=0, checked=False):
    """Validate the batch at ``position`` of ``buf[:end]``; return its header tuple.

    Raises _Invalid with the first failing check's reason (order in the module docstring);
    RecordTooLargeError when its size exceeds ``max_batch_bytes`` (its message names
    ``position + shift``: where the batch is in an append of several parts). ``checked``:
    the caller has checked the CRC and the records (``Segment.append``), not done again."""
    remaining = end - position
    if remaining < fmt.HEADER_SIZE_UP_TO_MAGIC:
        raise _Invalid(fmt.REASON_TRUNCATED, f"{remaining} bytes left, less than a batch header")
    (batch_length,) = _INT32.unpack_from(buf, position + fmt.BATCH_LENGTH_POSITION)
    if batch_length < fmt.MIN_BATCH_LENGTH:
        raise _Invalid(fmt.REASON_BATCH_TOO_SMALL, f"batch length {batch_length}")
    if batch_length > fmt.INT32_MAX - fmt.LOG_OVERHEAD:
        raise _Invalid(fmt.REASON_BATCH_TOO_LARGE, f"batch length {batch_length}")
    size = fmt.LOG_OVERHEAD + batch_length
    if size > remaining:
        raise _Invalid(fmt.REASON_TRUNCATED, f"batch of {size} bytes, {remaining} left")
    if max_batch_bytes is not None and size > max_batch_bytes:
        raise RecordTooLargeError(
            f"batch at position {position + shift} is {size} bytes, above max_message_bytes "
            f"{max_batch_bytes}")
    if buf[position + fmt.MAGIC_POSITION] != fmt.MAGIC_V2:
        raise _Invalid(fmt.REASON_BAD_MAGIC, f"magic {buf[position + fmt.MAGIC_POSITION]}")
    if size < _HEAD_BYTES:
        raise _Invalid(fmt.REASON_BATCH_TOO_SMALL, f"batch of {size} bytes, below a v2 header")
    header = _HEADER.unpack_from(buf, position)
    if not checked:
        crc = crc32c(buf[position + fmt.ATTRIBUTES_POSITION:position + size])
        if crc != header[4]:
            raise _Invalid(fmt.REASON_CRC_MISMATCH,
                           f"stored crc {header[4]:#010x}, computed {crc:#010x}")
    last_offset_delta = header[6]
    if last_offset_delta < 0:
        raise _Invalid(fmt.REASON_BAD_LAST_OFFSET_DELTA, f"last offset delta {last_offset_delta}")
    if not checked:
        _check_records(buf, position, size, header[5], last_offset_delta, header[12])
    return header


def _int_arg(value, name):
    """``value`` as an int; TypeError (the same message in both twins) for anything that is not
    an integer (1.5, "1", None). bool counts as an int, as in Python."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _clamp64(value):
    """An int clamped to int64: offsets and positions on disk are at most 64 bits, so a larger
    request means the same as INT64_MAX (the native twin cannot hold more)."""
    return max(-fmt.INT64_MAX - 1, min(value, fmt.INT64_MAX))


def _max_position_arg(max_position):
    """``max_position`` checked: None, or an int >= 0 (ValueError below 0; clamped above)."""
    if max_position is None:
        return None
    max_position = _int_arg(max_position, "max_position")
    if max_position < 0:
        raise ValueError(f"max_position must be >= 0, got {max_position}")
    return min(max_position, fmt.INT64_MAX)


def _max_bytes_arg(max_bytes):
    """``max_bytes`` checked: an int >= 0 (ValueError below 0; clamped above)."""
    max_bytes = _int_arg(max_bytes, "max_bytes")
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    return min(max_bytes, fmt.INT64_MAX)


class Segment:
    """One segment of a partition log; see :class:`seglog._contract.Segment` for the contract
    and this module's docstring for the Kafka decisions and the untrusted-bytes rules. Build
    with :meth:`open`.

    Not thread-safe. Views returned by :meth:`read` of a writer stay valid after
    :meth:`close` (the mmap lives as long as they do) but must be released before
    :meth:`truncate_to`/:meth:`recover` cut the bytes they map. A read-only segment maps
    nothing: it reads with pread and returns bytes.
    """

    #: The .log, its mapping and the two index mappings: Python's mmap keeps a duplicate of
    #: the descriptor it maps (the Store's file cache counts these).
    open_descriptors_max: ClassVar[int] = 4

    # --- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, dir_path, base_offset, *, create=False, read_only=False,
             index_interval_bytes=4096, max_index_bytes=10 * 1024 * 1024,
             max_message_bytes=fmt.MAX_MESSAGE_BYTES_DEFAULT, file_suffix=""):
        """Open (or with ``create=True`` create) the segment at ``base_offset`` in ``dir_path``.

        FileNotFoundError if the .log is missing (and not ``create``); FileExistsError if
        ``create`` and a non-empty .log exists. ``read_only`` opens everything read-only (a
        missing index is then treated as empty). Stale index files are replaced on create.
        Index entries are checked before they are used (``indexes_need_rebuild`` tells a
        writer's Log to rebuild them; a reader scans instead). TypeError for non-integer
        numbers, ValueError for out-of-range ones."""
        if create and read_only:
            raise ValueError("create and read_only are exclusive")
        base_offset = _int_arg(base_offset, "base_offset")
        if not 0 <= base_offset <= fmt.INT64_MAX:
            raise ValueError(f"base_offset must be in [0, 2**63), got {base_offset}")
        index_interval_bytes = _int_arg(index_interval_bytes, "index_interval_bytes")
        max_index_bytes = _int_arg(max_index_bytes, "max_index_bytes")
        max_message_bytes = _int_arg(max_message_bytes, "max_message_bytes")
        for name, value in (("index_interval_bytes", index_interval_bytes),
                            ("max_index_bytes", max_index_bytes),
                            ("max_message_bytes", max_message_bytes)):
            if not 0 <= value <= fmt.INT32_MAX:
                raise ValueError(f"{name} must be in [0, 2**31), got {value}")
        return cls(os.fspath(dir_path), base_offset, create, read_only, index_interval_bytes,
                   max_index_bytes, max_message_bytes, file_suffix)

    def __init__(self, dir_path, base_offset, create, read_only, index_interval_bytes,
                 max_index_bytes, max_message_bytes, file_suffix):
        if base_offset < 0:
            raise ValueError(f"base_offset must be >= 0, got {base_offset}")
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.read_only = read_only
        self.index_interval_bytes = index_interval_bytes
        self.max_index_bytes = max_index_bytes
        self.max_message_bytes = max_message_bytes
        self.file_suffix = file_suffix
        self.closed = False
        self.indexes_need_rebuild = False
        self._fd = -1
        self._mm = None
        self._mm_bytes = 0
        self._retired = []
        self._scratch = bytearray()
        self._chunk = b""            # read-only: the last pread chunk of the .log
        self._chunk_start = 0
        self._offset_index_trusted = self._time_index_trusted = False
        self._crc_verified = set()   # positions of batches read_record checked the CRC of
        self._last_batch = None      # read-only: (position, bytes) of read_record's last batch
        self.offset_index = self.time_index = None
        log_path = self.log_path
        if create:
            self._fd = os.open(log_path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self._fd).st_size != 0:
                os.close(self._fd)
                raise FileExistsError(f"segment log {log_path} exists and is not empty")
            for path in (self.index_path, self.time_index_path):
                if os.path.exists(path):
                    os.remove(path)
        else:
            self._fd = os.open(log_path, os.O_RDONLY if read_only else os.O_RDWR)
        try:
            # Indexes first, then the .log size: a live writer writes a batch before its index
            # entry, so every entry a reader copied points below the size it sees next.
            self._open_indexes(create)
            self.size_bytes = os.fstat(self._fd).st_size
            self._offset_index_trusted = self.offset_index is not None
            if self._offset_index_trusted:
                try:
                    self.offset_index.sanity_check(log_size_bytes=self.size_bytes)
                except CorruptIndexError:
                    self._distrust_offset_index()
            self._load_tail_state()
        except BaseException:
            self._close_files()
            raise

    def _path(self, suffix):
        return os.path.join(self.dir_path,
                            filenames.offset_prefix(self.base_offset) + suffix + self.file_suffix)

    @property
    def log_path(self):
        """Path of the ``.log`` file (with the current file suffix)."""
        return self._path(filenames.LOG_SUFFIX)

    @property
    def index_path(self):
        """Path of the ``.index`` file."""
        return self._path(filenames.INDEX_SUFFIX)

    @property
    def time_index_path(self):
        """Path of the ``.timeindex`` file."""
        return self._path(filenames.TIME_INDEX_SUFFIX)

    def _open_indexes(self, create):
        # Only a new segment's indexes are preallocated. An existing segment's open at their
        # current (trimmed) length: an old segment's are never appended to, the Log resizes the
        # active one's (resize_indexes), and recover() resets (preallocates) before it rebuilds.
        missing = not (os.path.exists(self.index_path) and os.path.exists(self.time_index_path))
        kwargs = dict(max_index_bytes=self.max_index_bytes, writable=not self.read_only,
                      preallocate=create)
        if os.path.exists(self.index_path) or not self.read_only:
            self.offset_index = OffsetIndex(self.index_path, self.base_offset, **kwargs)
        if os.path.exists(self.time_index_path) or not self.read_only:
            self.time_index = TimeIndex(self.time_index_path, self.base_offset, **kwargs)
        if missing and not create:
            self.indexes_need_rebuild = True

    def _distrust_offset_index(self):
        """An offset index that failed a check: a reader stops using it (lookups answer the
        segment start: a scan); a writer empties it (derived data, and appends and close
        must go on: they add entries after the last one) and its Log rebuilds it from the
        .log (``indexes_need_rebuild``, then ``recover()``)."""
        self.indexes_need_rebuild = True
        if self.read_only:
            self._offset_index_trusted = False
        else:
            self.offset_index.reset()
            self._offset_index_trusted = True

    def _distrust_time_index(self):
        """The time index's twin of ``_distrust_offset_index``."""
        self.indexes_need_rebuild = True
        if self.read_only:
            self._time_index_trusted = False
        else:
            self.time_index.reset()
            self._time_index_trusted = False  # the max timestamp is rescanned, then trusted

    def _entry_lands(self, entry_offset, position):
        """Whether offset-index entry ``(entry_offset, position)`` lands on a batch start: a
        whole, parseable batch header at ``position`` below the segment's end whose offsets
        fit the entry (base offset in ``[segment base, entry_offset]``, last offset <=
        ``entry_offset``: the entry is the last offset of the append that starts there)."""
        if not 0 <= position < self.size_bytes:
            return False
        try:
            header = self._head(position, self.size_bytes)
        except _Invalid:
            return False
        return (header is not None and self.base_offset <= header[0]
                <= header[0] + header[6] <= entry_offset)

    def _index_lookup(self, offset):
        """``(offset, position)`` to scan from for ``offset``: the offset-index entry with the
        greatest offset <= ``offset`` that lands on a batch start (an entry that does not is
        skipped for the one before it, at most ``_ENTRY_FALLBACKS`` times, then the segment
        start), or the segment start without a trusted index. Never a position a scan
        could not start from, so a broken entry costs a longer scan, never hidden data."""
        if not self._offset_index_trusted or self.offset_index.entries == 0:
            return self.base_offset, 0
        entry_offset, position = self.offset_index.lookup(offset)
        for _ in range(_ENTRY_FALLBACKS):
            if position == 0 or self._entry_lands(entry_offset, position):
                return entry_offset, position
            if entry_offset <= self.base_offset:
                break
            entry_offset, position = self.offset_index.lookup(entry_offset - 1)
        return self.base_offset, 0

    def _load_tail_state(self):
        """next_offset, max timestamp, first batch timestamp and bytes since the last index
        entry, from the (checked) indexes and a header scan after the last offset-index entry.

        The scan is lenient: it stops at the first batch it cannot parse, since before a
        recovery the tail may be torn. A writer keeps the whole file as its extent (reads
        below it raise on the bad bytes until ``recover()`` cuts them); a reader's extent
        ends before a torn batch (the writer may be writing it) but includes corrupt bytes
        (bad length or magic: no writer makes those), so its reads raise there too."""
        self._drop_read_caches()
        file_bytes = self.size_bytes
        entry_position, floor, ceiling = self._walk_start(fmt.INT64_MAX)
        entry_offset = ceiling
        if self._offset_index_trusted and entry_position == 0 and self.offset_index.entries:
            self._distrust_offset_index()  # even the last entry does not land on a batch
        next_offset = self.base_offset
        stop = self._lenient_scan(entry_position, file_bytes, floor)
        end = stop.position
        for _, header in stop.batches:
            next_offset = header[0] + header[6] + 1
        if entry_position > 0 and next_offset <= entry_offset:
            # The index proves offsets up to its entry were written: a batch whose base
            # offset was lowered does not take them back (reads from the entry raise).
            next_offset = entry_offset + 1
        self.next_offset = next_offset
        # The time index is checked against the offsets just found: a .log cut behind the
        # index's back leaves stale entries past next_offset, and trusting them would fail
        # the final time-index entry of close().
        self._time_index_trusted = self.time_index is not None
        if self._time_index_trusted:
            try:
                self.time_index.sanity_check(next_offset=next_offset)
            except CorruptIndexError:
                self._distrust_time_index()
        max_ts, max_ts_offset = fmt.NO_TIMESTAMP, self.base_offset
        if self._time_index_trusted:
            max_ts, max_ts_offset = self.time_index.last_entry()
        else:  # no usable time index: the max timestamp needs every batch header
            for _, header in self._lenient_scan(0, entry_position).batches:
                if header[8] > max_ts:
                    max_ts, max_ts_offset = header[8], header[0] + header[6]
        for _, header in stop.batches:
            if header[8] > max_ts:
                max_ts, max_ts_offset = header[8], header[0] + header[6]
        if not self.read_only:
            self._time_index_trusted = True  # checked, or emptied by _distrust_time_index
        self.max_timestamp_ms = max_ts
        self.offset_of_max_timestamp = max_ts_offset if max_ts != fmt.NO_TIMESTAMP else -1
        if self.read_only and (stop.reason == fmt.REASON_TRUNCATED or stop.reason == ""):
            self.size_bytes = end  # readers see whole batches only: a torn tail is not theirs
        self._bytes_since_index_entry = self.size_bytes - entry_position
        self.first_batch_timestamp_ms = fmt.NO_TIMESTAMP
        try:
            first = self._head(0, self.size_bytes)
        except _Invalid:
            first = None
        if first is not None:
            self.first_batch_timestamp_ms = first[8]

    def _drop_read_caches(self):
        """Bytes may have changed (open, cut, recovery, a reader's refresh): forget the
        pread chunk and which batches had their CRC checked."""
        self._chunk, self._chunk_start = b"", 0
        self._last_batch = None
        self._crc_verified.clear()

    # --- reading bytes: the writer's mmap, a reader's pread ---------------------------------

    def _map(self, end):
        """The writer's read mmap, covering at least ``[0, end)`` (remapped when the file
        outgrew it). Only a writer maps: no other process shrinks its file."""
        if self._mm is None or self._mm_bytes < end:
            length = os.fstat(self._fd).st_size
            if length < end:
                raise AssertionError(f"map to {end} past the end of {self.log_path} ({length})")
            if self._mm is not None:
                self._retire(self._mm)
            self._mm = _LogMap(self._fd, length, access=mmap.ACCESS_READ)
            self._mm_bytes = length
            self._retired = [m for m in self._retired if not self._try_close(m)]
        return self._mm

    def _bytes(self, position, size):
        """``(buffer, start)`` with ``buffer[start:start + size]`` the .log bytes at
        ``position``, or ``(None, 0)`` when the file ends before them.

        A writer reads its mapping (its file only shrinks through itself). A read-only
        segment never maps the .log: the writer, in another process, may truncate it (a
        follower truncation, a recovery), and touching a mapping past the file's new end
        is SIGBUS. It preads chunks of _CHUNK_BYTES instead (a short read means the file
        shrank: the caller treats it as the end)."""
        if not self.read_only:
            if position + size > self._mm_bytes and position + size > os.fstat(self._fd).st_size:
                return None, 0
            return self._map(position + size), position
        chunk, start = self._chunk, self._chunk_start
        if start <= position and position + size <= start + len(chunk):
            return chunk, position - start
        chunk = os.pread(self._fd, max(size, _CHUNK_BYTES), position)
        self._chunk, self._chunk_start = chunk, position
        if len(chunk) < size:
            return None, 0
        return chunk, 0

    def _pread_all(self, position, size):
        """``size`` bytes at ``position`` as bytes (read-only reads), or fewer when the
        file shrank under the reader."""
        parts, done = [], 0
        while done < size:
            part = os.pread(self._fd, size - done, position + done)
            if not part:
                break
            parts.append(part)
            done += len(part)
        return b"".join(parts)

    def _head(self, position, end):
        """The header tuple of the whole batch at ``position`` of ``[0, end)``, None when
        ``position >= end`` or the file ends early (a reader whose writer truncated), else
        _Invalid with the reason, checked in this order: fewer than 17 bytes left, batch
        length < 14, > INT32_MAX - 12, magic != 2, size < 61 (REASON_BATCH_TOO_SMALL), batch
        runs past ``end`` (REASON_TRUNCATED: a torn tail)."""
        remaining = end - position
        if remaining <= 0:
            return None
        if remaining < fmt.HEADER_SIZE_UP_TO_MAGIC:
            raise _Invalid(fmt.REASON_TRUNCATED, f"{remaining} bytes left, less than a header")
        buf, at = self._bytes(position, min(remaining, _HEAD_BYTES))
        if buf is None:
            return None
        (batch_length,) = _INT32.unpack_from(buf, at + fmt.BATCH_LENGTH_POSITION)
        if batch_length < fmt.MIN_BATCH_LENGTH:
            raise _Invalid(fmt.REASON_BATCH_TOO_SMALL, f"batch length {batch_length}")
        if batch_length > fmt.INT32_MAX - fmt.LOG_OVERHEAD:
            raise _Invalid(fmt.REASON_BATCH_TOO_LARGE, f"batch length {batch_length}")
        if buf[at + fmt.MAGIC_POSITION] != fmt.MAGIC_V2:
            raise _Invalid(fmt.REASON_BAD_MAGIC, f"magic {buf[at + fmt.MAGIC_POSITION]}")
        size = fmt.LOG_OVERHEAD + batch_length
        if size < _HEAD_BYTES:
            raise _Invalid(fmt.REASON_BATCH_TOO_SMALL, f"batch of {size} bytes")
        if size > remaining:
            raise _Invalid(fmt.REASON_TRUNCATED, f"batch of {size} bytes, {remaining} left")
        return _HEADER.unpack_from(buf, at)

    def _corrupt(self, position, exc):
        return CorruptSegmentError(
            f"segment {self.log_path} (base offset {self.base_offset}): batch at position "
            f"{position}: {exc.reason} ({exc})", reason=exc.reason, position=position,
            path=self.log_path, base_offset=self.base_offset)

    def _walk_start(self, offset):
        """``(position, floor, ceiling)`` a header walk for ``offset`` starts from: the
        checked index lookup's position, and the offset bounds of the walk's batches (see
        ``_offsets_invalid``). From the segment start, every batch must lie above the
        previous one, the first above ``base_offset - 1``. From an index entry ``(E, P)``
        the batch at P was checked to hold offsets in ``[base_offset, E]`` (``_entry_lands``)
        and E is the last offset of the append that starts at P, so the walk must meet a
        batch whose last offset is >= E before one whose base offset is > E: a batch at P
        whose base offset was lowered is then caught instead of skipped."""
        entry_offset, position = self._index_lookup(offset)
        return position, self.base_offset - 1, entry_offset if position else fmt.INT64_MAX

    def _offsets_invalid(self, base, last, floor, ceiling):
        """The offsets check of one header in a walk (base offsets are outside the CRC):
        an _Invalid(REASON_OFFSETS_NOT_INCREASING) unless ``floor < base <= last <= INT64_MAX``
        and ``base <= ceiling`` (``floor``: the previous batch's last offset in this walk, or
        ``base_offset - 1``; ``ceiling``: an index entry's offset not yet met), else None."""
        if floor < base <= last < fmt.INT64_MAX and base <= ceiling:
            return None
        return _Invalid(fmt.REASON_OFFSETS_NOT_INCREASING,
                        f"offsets {base}..{last} after offset {floor} (segment base offset "
                        f"{self.base_offset}{'' if ceiling == fmt.INT64_MAX else f', index entry offset {ceiling}'})")

    def _scan_headers(self, start, end, floor=None, ceiling=fmt.INT64_MAX):
        """Yield ``(position, header tuple)`` for each batch in ``[start, end)``, where
        ``end`` is at most the segment's extent: every byte below it was written as whole
        batches, so a header that cannot be parsed (or a batch running past the extent), or
        whose offsets do not lie above the previous batch's (``_offsets_invalid``; ``floor``
        defaults to ``base_offset - 1``), is CorruptSegmentError, never a silent end of data
        or a skipped batch. Stops early only when a reader's file shrank under it (its
        writer truncated: refresh() catches up)."""
        position = start
        if floor is None:
            floor = self.base_offset - 1
        while position < end:  # bounded: each batch moves on >= 61 bytes
            try:
                header = self._head(position, self.size_bytes)
            except _Invalid as exc:
                raise self._corrupt(position, exc) from None
            if header is None:
                return
            base = header[0]
            last = base + header[6]
            if not floor < base <= last < fmt.INT64_MAX or base > ceiling:
                raise self._corrupt(position, self._offsets_invalid(base, last, floor, ceiling))
            if last >= ceiling:
                ceiling = fmt.INT64_MAX
            floor = last
            yield position, header
            position += fmt.LOG_OVERHEAD + header[1]
        if ceiling != fmt.INT64_MAX and position >= self.size_bytes:
            raise self._corrupt(start, self._entry_unmet(ceiling))

    def _entry_unmet(self, entry_offset):
        """The _Invalid of a walk from index entry ``(entry_offset, P)`` that reached the
        segment's end without a batch whose last offset reaches ``entry_offset``: the batch
        at P (reported) holds fewer offsets than the index proves were written there."""
        return _Invalid(fmt.REASON_OFFSETS_NOT_INCREASING,
                        f"no batch from here reaches offset {entry_offset} of its index entry")

    def _lenient_scan(self, start, end, floor=None):
        """The whole batches from ``start`` up to the first one that cannot be parsed (open
        and refresh, where the tail may be torn): a _Stop with ``batches`` (position, header)
        and ``reason`` ('' at the end, else why it stopped) and ``position``.

        ``batches`` holds only the batches whose offsets lie above the previous ones' (from
        ``floor``, default ``base_offset - 1``; last >= base; inside int64): the others are
        stepped over, since their offsets (outside the CRC) cannot be trusted for
        ``next_offset`` or the max timestamp. They stay inside the extent, so a read that
        walks to one raises CorruptSegmentError (``_scan_headers``), and recovery cuts there;
        the batches after one still count, so a lowered base offset neither moves
        ``next_offset`` back nor makes the records after it look absent."""
        stop = _Stop()
        position = start
        if floor is None:
            floor = self.base_offset - 1
        while position < end:
            try:
                header = self._head(position, end)
            except _Invalid as exc:
                stop.reason = exc.reason
                break
            if header is None:
                break
            base = header[0]
            last = base + header[6]
            if floor < base <= last < fmt.INT64_MAX:
                floor = last
                stop.batches.append((position, header))
            position += fmt.LOG_OVERHEAD + header[1]
        stop.position = position
        return stop

    @staticmethod
    def _try_close(mapping):
        try:
            mapping.close()
            return True
        except BufferError:  # views are alive: it stays mapped until they are gone
            return False

    def _retire(self, mapping):
        if not self._try_close(mapping):
            self._retired.append(mapping)

    def _release_maps_past(self, position):
        """Close every mapping longer than ``position``; ViewsOutstandingError if one has
        live views (truncating under it would SIGBUS on the next access)."""
        maps = self._retired + ([self._mm] if self._mm is not None else [])
        keep = []
        for mapping in maps:
            if len(mapping) > position and not self._try_close(mapping):
                raise ViewsOutstandingError(
                    f"cannot cut {self.log_path} at {position}: read() views of the removed "
                    "bytes are still alive; release them first")
            if not mapping.closed:
                keep.append(mapping)
        if self._mm is not None and self._mm.closed:
            self._mm, self._mm_bytes = None, 0
        self._retired = [m for m in keep if m is not self._mm]

    # --- state checks -------------------------------------------------------------------------

    def _check_open(self):
        if self.closed:
            raise LogClosedError(f"segment {self.log_path} is closed")

    def _check_writable(self):
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"segment {self.log_path} was opened read-only")

    @property
    def last_modified_ms(self):
        """The .log file's modification time, ms since the epoch."""
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # --- append -------------------------------------------------------------------------------

    def append(self, data, *, assign_offsets=True, partition_leader_epoch=None,
               checked=False):
        """Validate and append the whole batches in ``data`` (one bytes-like, or a list or
        tuple of them, each holding whole batches, appended as if joined); see the protocol.
        One write; ``partition_leader_epoch`` (an int32) is written into every batch's
        partitionLeaderEpoch field (the caller's buffers are not modified). ``checked``: the
        caller has checked each batch's CRC and records (the protocol's ``checked``)."""
        self._check_writable()
        if partition_leader_epoch is not None:
            partition_leader_epoch = check_int_argument(
                "partition_leader_epoch", partition_leader_epoch, minimum=-(fmt.INT32_MAX + 1),
                maximum=fmt.INT32_MAX)
        parts = []
        for part in (data if isinstance(data, (list, tuple)) else (data,)):
            view = memoryview(part)
            parts.append(view if view.ndim == 1 and view.itemsize == 1 else view.cast("B"))
        end = sum(len(view) for view in parts)
        if end == 0:
            raise InvalidRecordError("append of no batches")
        batches = []  # (position in data, size, header, new base offset)
        next_offset = self.next_offset
        joined = 0
        for view in parts:  # each part holds whole batches
            position, part_end = 0, len(view)
            while position < part_end:
                try:
                    header = _check_batch(view, position, part_end, self.max_message_bytes,
                                          joined, checked)
                except _Invalid as exc:
                    raise CorruptRecordError(
                        f"batch at position {joined + position} of the append: {exc}",
                        reason=exc.reason, position=joined + position) from None
                size = fmt.LOG_OVERHEAD + header[1]
                base = next_offset if assign_offsets else header[0]
                if not assign_offsets and base < next_offset:
                    raise InvalidOffsetError(
                        f"batch at position {joined + position} has base offset {base}, below "
                        f"the next offset {next_offset} of segment {self.base_offset}")
                last = base + header[6]
                if last - self.base_offset > fmt.INT32_MAX:
                    raise InvalidOffsetError(
                        f"offset {last} does not fit segment {self.base_offset} (roll first)")
                batches.append((joined + position, size, header, base))
                next_offset = last + 1
                position += size
            joined += part_end
        view = parts[0] if len(parts) == 1 else memoryview(b"".join(parts))
        self._check_index_room(batches)
        patch = (assign_offsets and any(b[3] != b[2][0] for b in batches)) or (
            partition_leader_epoch is not None and any(
                _EPOCH.unpack_from(view, position + fmt.PARTITION_LEADER_EPOCH_POSITION)[0]
                != partition_leader_epoch for position, _, _, _ in batches))
        if patch:
            if len(self._scratch) < end:
                self._scratch = bytearray(end)
            scratch = memoryview(self._scratch)[:end]
            scratch[:] = view
            for position, _, _, base in batches:
                _OFFSET.pack_into(scratch, position, base)
                if partition_leader_epoch is not None:
                    _EPOCH.pack_into(scratch, position + fmt.PARTITION_LEADER_EPOCH_POSITION,
                                     partition_leader_epoch)
            out = scratch
        else:
            out = view
        start = self.size_bytes
        self._write_all(out, start)
        return self._account(batches, start, end)

    def _check_index_room(self, batches):
        """IndexFullError before writing if the entries this append adds would not fit; then
        their disk blocks (and the time index's roll/close entry's) are reserved, so that on a
        full disk the append fails with KafkaStorageError and writes nothing (see
        seglog.pure.index, "Disk")."""
        needed, since = 0, self._bytes_since_index_entry
        for _, size, _, _ in batches:
            if since > self.index_interval_bytes:
                needed, since = needed + 1, 0
            since += size
        if needed and (self.offset_index.entries + needed > self.offset_index.max_entries
                       or self.time_index.entries + needed > self.time_index.max_entries - 1):
            raise IndexFullError(f"indexes of segment {self.log_path} are full (roll first)")
        if needed:
            self.offset_index.reserve(needed)
            self.time_index.reserve(needed + 1)
        elif self.size_bytes == 0:
            self.time_index.reserve(1)  # a new segment's roll/close entry

    def _write_all(self, out, position):
        written = 0
        try:
            while written < len(out):
                written += os.pwrite(self._fd, out[written:], position + written)
        except BaseException:
            os.ftruncate(self._fd, position)  # leave no partial batch behind
            raise

    def _account(self, batches, start, end):
        """Update offsets, timestamps and indexes for batches just written at ``start``."""
        append_max_ts, append_max_offset = fmt.NO_TIMESTAMP, -1
        for position, size, header, base in batches:
            last = base + header[6]
            batch_max_ts = header[8]
            if batch_max_ts > append_max_ts:
                append_max_ts, append_max_offset = batch_max_ts, last
            if batch_max_ts > self.max_timestamp_ms:
                self.max_timestamp_ms, self.offset_of_max_timestamp = batch_max_ts, last
            file_position = start + position
            if file_position == 0:
                self.first_batch_timestamp_ms = batch_max_ts
            if self._bytes_since_index_entry > self.index_interval_bytes:
                self.offset_index.append(last, file_position)
                self.time_index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp)
                self._bytes_since_index_entry = 0
            self._bytes_since_index_entry += size
        first = batches[0][3]
        self.next_offset = batches[-1][3] + batches[-1][2][6] + 1
        self.size_bytes = start + end
        if append_max_offset < 0:
            append_max_offset = self.next_offset - 1
        return AppendResult(first, self.next_offset - 1, append_max_ts, append_max_offset,
                            start, end, len(batches))

    # --- reads --------------------------------------------------------------------------------

    def translate_offset(self, offset):
        """``(position, batch_base_offset, batch_size_bytes)`` of the first batch whose last
        offset >= ``offset``, or None (checked index lookup, then a header scan).
        CorruptSegmentError for a batch header on the way that cannot be parsed or whose
        offsets fail the walk check (REASON_OFFSETS_NOT_INCREASING); TypeError
        for a non-integer ``offset`` (any int is accepted: below the segment means its
        start, at or past ``next_offset`` means None)."""
        self._check_open()
        offset = _clamp64(_int_arg(offset, "offset"))
        if offset >= self.next_offset:
            return None
        position, floor, ceiling = self._walk_start(offset)
        for position, header in self._scan_headers(position, self.size_bytes, floor, ceiling):
            if header[0] + header[6] >= offset:
                return position, header[0], fmt.LOG_OVERHEAD + header[1]
        return None

    def _range(self, offset, max_bytes, max_position, min_one_batch):
        """``(position, size_bytes, next_offset)`` of the whole batches a read returns."""
        max_bytes = _max_bytes_arg(max_bytes)
        max_position = _max_position_arg(max_position)
        offset = _clamp64(_int_arg(offset, "offset"))
        found = self.translate_offset(offset)
        if found is None:
            return 0, 0, offset
        start = found[0]
        limit = self.size_bytes if max_position is None else min(max_position, self.size_bytes)
        size, next_offset = 0, offset
        for position, header in self._scan_headers(start, limit, found[1] - 1):
            batch_size = fmt.LOG_OVERHEAD + header[1]
            if position + batch_size > limit:
                break  # the bound (a high watermark) is before this batch's end
            if size + batch_size > max_bytes and not (size == 0 and min_one_batch):
                break
            size += batch_size
            next_offset = header[0] + header[6] + 1
            if size >= max_bytes:
                break  # no further batch fits: do not even read its header
        return start, size, next_offset

    def _read_bytes(self, position, size):
        """A read-only segment's read: the bytes of ``[position, position + size)`` with
        pread, cut to the whole batches present (the writer may have truncated since)."""
        data = self._pread_all(position, size)
        if len(data) < size:
            whole = 0
            while whole + fmt.HEADER_SIZE_UP_TO_MAGIC <= len(data):
                batch_size = fmt.LOG_OVERHEAD + _INT32.unpack_from(
                    data, whole + fmt.BATCH_LENGTH_POSITION)[0]
                if batch_size < _HEAD_BYTES or whole + batch_size > len(data):
                    break
                whole += batch_size
            data = data[:whole]
        return memoryview(data)

    def read(self, offset, max_bytes, *, max_position=None, min_one_batch=True):
        """Whole batches from the one holding ``offset``, never past ``max_position``.

        A writer returns a read-only memoryview over an mmap of the .log (zero-copy; valid
        until released, even after close); a read-only segment returns a memoryview of bytes
        read with pread (see ``_bytes``). CorruptSegmentError for a batch header below the
        segment's end that cannot be parsed (batch contents and CRCs are not checked: raw
        reads are served as Kafka's broker serves them). TypeError for non-integer
        arguments, ValueError for negative ``max_bytes``/``max_position``; huge ones are
        clamped."""
        self._check_open()
        position, size, _ = self._range(offset, max_bytes, max_position, min_one_batch)
        if size == 0:
            # A new view per call, never a shared one: a caller may release it (recover()
            # below releases its own), and that must not break another caller's view.
            return memoryview(b"")
        if self.read_only:
            return self._read_bytes(position, size)
        return memoryview(self._map(position + size))[position:position + size]

    def read_span(self, offset, max_bytes, *, max_position=None, min_one_batch=True):
        """:meth:`read` with where it came from: ``(view, position, next_offset)``, the
        position of the view in the .log and the offset after its last batch (``offset``
        when empty), from the one header walk the read makes (a fetch needs both and would
        otherwise walk the batches again). ``next_offset`` is -1 when a read-only segment's
        file gave fewer bytes than the walk found (its writer truncated it meanwhile): the
        caller walks what it got. Same checks and errors as :meth:`read`."""
        self._check_open()
        position, size, next_offset = self._range(offset, max_bytes, max_position,
                                                  min_one_batch)
        if size == 0:
            return memoryview(b""), position, next_offset
        if self.read_only:
            view = self._read_bytes(position, size)
            return view, position, (next_offset if len(view) == size else -1)
        return memoryview(self._map(position + size))[position:position + size], position, \
            next_offset

    def read_record(self, offset, *, check_crcs=True):
        """The record with ``offset`` as a Record, or None when no data record has it (outside
        ``[base_offset, next_offset)``, a gap, or a control batch).

        Checked index lookup and header scan to the batch (as :meth:`read`), then
        ``Batch.record_at``: the records before it are skipped by their length prefixes and
        only the one record is built (a compressed batch is decompressed). With
        ``check_crcs`` (the default, Kafka's ``check.crcs``) the batch's CRC32C is checked
        first, once per batch (the positions of checked batches are remembered until bytes
        change): CorruptRecordError(REASON_CRC_MISMATCH, position in the .log). Otherwise
        raises as ``Batch.record_at``; CorruptSegmentError for an unparseable header."""
        self._check_open()
        offset = _int_arg(offset, "offset")
        if offset < self.base_offset or offset >= self.next_offset:
            return None
        found = self.translate_offset(offset)
        if found is None or found[1] > offset:
            return None
        position, _, size = found
        if self.read_only:
            # Point reads cluster (a consumer walking a batch): keep the last batch read.
            cached = self._last_batch
            if cached is not None and cached[0] == position and len(cached[1]) == size:
                view = memoryview(cached[1])
            else:
                view = self._read_bytes(position, size)
                if len(view) < size:
                    return None  # the writer truncated it away under us
                self._last_batch = (position, view.obj)
        else:
            view = memoryview(self._map(position + size))[position:position + size]
        batch = None
        try:
            if check_crcs and position not in self._crc_verified:
                (stored,) = _UINT32.unpack_from(view, fmt.CRC_POSITION)
                computed = crc32c(view[fmt.ATTRIBUTES_POSITION:])
                if computed != stored:
                    raise CorruptSegmentError(
                        f"segment {self.log_path} (base offset {self.base_offset}): batch at "
                        f"position {position}: {fmt.REASON_CRC_MISMATCH} (stored "
                        f"{stored:#010x}, computed {computed:#010x})",
                        reason=fmt.REASON_CRC_MISMATCH, position=position,
                        path=self.log_path, base_offset=self.base_offset)
                self._crc_verified.add(position)
            batch = Batch(view)
            if batch.is_control:
                return None
            return batch.record_at(offset, check_crcs=False)  # checked above, if asked
        finally:
            batch = None
            view.release()

    def read_value(self, offset, default=None, *, check_crcs=True):
        """The value (bytes, or None for a null value) of the record with ``offset``, or
        ``default`` when no data record has it: :meth:`read_record`'s lookup, checks and
        errors, answering with the value only."""
        record = self.read_record(offset, check_crcs=check_crcs)
        return default if record is None else record.value

    def read_range(self, offset, max_bytes, *, max_position=None, min_one_batch=True):
        """The bytes :meth:`read` would return, as ``(position, size_bytes)`` in the .log.
        Same checks and errors as :meth:`read`."""
        self._check_open()
        position, size, _ = self._range(offset, max_bytes, max_position, min_one_batch)
        return position, size

    def sendfile(self, out_fd, offset, max_bytes, *, max_position=None):
        """Send the whole batches :meth:`read` would return to ``out_fd`` (socket or file, an
        int or an object with ``fileno()``) with sendfile(2); returns ``(bytes_sent,
        next_offset)``. Loops until all are sent; BlockingIOError propagates on a
        non-blocking fd. Same argument checks as :meth:`read` (TypeError for an ``out_fd``
        that is neither an int nor has ``fileno()``); the kernel copies from the file, so
        a reader whose writer truncated sends fewer bytes, never faults."""
        self._check_open()
        if not isinstance(out_fd, int):
            fileno = getattr(out_fd, "fileno", None)
            if fileno is None:
                raise TypeError(f"out_fd must be an int or have fileno(), got "
                                f"{type(out_fd).__name__}")
            out_fd = fileno()
        out_fd = _int_arg(out_fd, "out_fd")
        if not 0 <= out_fd <= fmt.INT32_MAX:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))  # no such descriptor
        position, size, next_offset = self._range(offset, max_bytes, max_position, True)
        sent = 0
        while sent < size:
            n = os.sendfile(out_fd, self._fd, position + sent, size - sent)
            if n == 0:
                if self.read_only:
                    break  # the file shrank under a reader
                raise OSError(f"sendfile from {self.log_path} made no progress")
            sent += n
        return sent, next_offset

    def batches(self, start_position=0):
        """Iterate the codec's Batch objects over the file from ``start_position`` (a batch
        start) to the segment's end. A writer's hold a view of the mmap and their
        ``position`` counts from ``start_position``; a read-only segment's are read with
        pread in windows of about _WINDOW_BYTES and their ``position`` counts from their
        window. Headers are checked as the segment's reads check them: CorruptSegmentError
        (with the position in the .log) for one that cannot be parsed below the end."""
        self._check_open()
        start_position = _int_arg(start_position, "start_position")
        if start_position < 0:
            raise ValueError(f"start_position must be >= 0, got {start_position}")
        if self.size_bytes <= start_position:
            return iter(())
        return self._batches(start_position, [self.base_offset - 1, fmt.INT64_MAX])

    def _batches(self, start, walk):
        """batches() from ``start`` with ``walk`` = [floor, ceiling], the offset bounds of
        the header walk (see ``_walk_start``), carried across a reader's windows."""
        if not self.read_only:
            end = self.size_bytes
            yield from self._checked_batches(
                memoryview(self._map(end))[start:end], start, end, walk)
            return
        position = start
        while position < self.size_bytes:  # windows of whole batches, read with pread
            window_end = position
            for batch_position, header in self._scan_headers(position, self.size_bytes,
                                                             walk[0], walk[1]):
                batch_end = batch_position + fmt.LOG_OVERHEAD + header[1]
                if window_end > position and batch_end - position > _WINDOW_BYTES:
                    break
                window_end = batch_end
            data = self._read_bytes(position, window_end - position)
            if len(data) == 0:
                return  # the file shrank under the reader
            yield from self._checked_batches(data, position, position + len(data), walk)
            position += len(data)

    def _checked_batches(self, view, start, end, walk):
        """The codec's iter_batches over ``view`` (the .log bytes ``[start, end)``), with its
        errors and its silent stop at a torn batch turned into CorruptSegmentError with the
        position in the .log; each batch's offsets checked as in ``_scan_headers`` against
        ``walk`` = [floor, ceiling] (updated as batches go by)."""
        reached = start
        floor, ceiling = walk
        try:
            for batch in iter_batches(view):
                base, last = batch.base_offset, batch.last_offset
                if not floor < base <= last < fmt.INT64_MAX or base > ceiling:
                    position = start + batch.position
                    raise self._corrupt(position,
                                        self._offsets_invalid(base, last, floor, ceiling))
                if last >= ceiling:
                    ceiling = fmt.INT64_MAX
                floor = walk[0] = last
                walk[1] = ceiling
                reached = start + batch.position + batch.size_bytes
                yield batch
            if ceiling != fmt.INT64_MAX and reached >= self.size_bytes:
                raise self._corrupt(start, self._entry_unmet(ceiling))
        except CorruptSegmentError:
            raise  # ours, positioned in the .log already
        except CorruptRecordError as exc:
            position = start + max(exc.position, 0)
            raise CorruptSegmentError(
                f"segment {self.log_path} (base offset {self.base_offset}): batch at position "
                f"{position}: {exc.reason}", reason=exc.reason, position=position,
                path=self.log_path, base_offset=self.base_offset) from None
        if reached < end:
            try:
                self._head(reached, end)
                reason, detail = fmt.REASON_TRUNCATED, "batch runs past the end"
            except _Invalid as exc:
                reason, detail = exc.reason, str(exc)
            raise self._corrupt(reached, _Invalid(reason, detail))

    def find_offset_by_timestamp(self, timestamp_ms, starting_offset=0):
        """``(timestamp_ms, offset)`` of the first record with timestamp >= ``timestamp_ms`` and
        offset >= ``starting_offset``, or None (Kafka's LogSegment.findOffsetByTimestamp).
        The time index is used only once checked (else the scan starts at the segment
        start); records are decoded, so CRCs are checked (CorruptRecordError). TypeError for
        non-integer arguments; any int is accepted."""
        self._check_open()
        timestamp_ms = _clamp64(_int_arg(timestamp_ms, "timestamp_ms"))
        starting_offset = _clamp64(_int_arg(starting_offset, "starting_offset"))
        index_offset = self.base_offset
        if self._time_index_trusted:
            _, index_offset = self.time_index.lookup(timestamp_ms)
            if not self.base_offset <= index_offset < self.next_offset:
                index_offset = self.base_offset  # an entry a reader reloaded unchecked
        position, floor, ceiling = self._walk_start(max(index_offset, starting_offset))
        batches = self._batches(position, [floor, ceiling]) if position < self.size_bytes else ()
        for batch in batches:
            if batch.max_timestamp_ms >= timestamp_ms and batch.last_offset >= starting_offset:
                for record in batch.records():
                    if record.timestamp_ms >= timestamp_ms and record.offset >= starting_offset:
                        return record.timestamp_ms, record.offset
        return None

    # --- truncation and recovery --------------------------------------------------------------

    def truncate_to(self, offset):
        """Drop every batch whose base offset >= ``offset``; return the bytes removed.

        Indexes drop entries >= ``offset`` and are resized to ``max_index_bytes`` (Kafka).
        ViewsOutstandingError (nothing changed) if live read() views map the removed bytes;
        CorruptSegmentError if a header before the cut cannot be parsed (nothing changed);
        TypeError for a non-integer ``offset`` (any int: at or below the base empties the
        segment, at or past ``next_offset`` removes nothing)."""
        self._check_writable()
        offset = _clamp64(_int_arg(offset, "offset"))
        cut = self.size_bytes
        if offset < self.next_offset:
            position, floor, ceiling = self._walk_start(offset)
            for batch_position, header in self._scan_headers(position, self.size_bytes,
                                                             floor, ceiling):
                if header[0] >= offset:
                    cut = batch_position
                    break
        removed = self.size_bytes - cut
        if removed:
            self._release_maps_past(cut)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.max_index_bytes)
        self.time_index.resize(self.max_index_bytes)
        if removed:
            os.ftruncate(self._fd, cut)
            self.size_bytes = cut
        self._load_tail_state()
        return removed

    def recover(self):
        """Validate every batch, cut at the first invalid byte, rebuild and trim both indexes;
        see the module docstring for the checks and :class:`RecoveryResult`."""
        self._check_writable()
        end = os.fstat(self._fd).st_size
        entries = []  # (last offset, position, max ts so far, its offset)
        position, previous_last, since = 0, self.base_offset - 1, 0
        max_ts, max_ts_offset = fmt.NO_TIMESTAMP, -1
        reason = ""
        view = memoryview(self._map(end)) if end else memoryview(b"")
        try:
            while position < end:
                try:
                    header = _check_batch(view, position, end)
                except _Invalid as exc:
                    reason = exc.reason
                    break
                last = header[0] + header[6]
                if header[0] <= previous_last:
                    reason = fmt.REASON_OFFSETS_NOT_INCREASING
                    break
                if last - self.base_offset > fmt.INT32_MAX:
                    reason = fmt.REASON_BAD_LAST_OFFSET_DELTA
                    break
                if header[8] > max_ts:
                    max_ts, max_ts_offset = header[8], last
                if since > self.index_interval_bytes:
                    entries.append((last, position, max_ts, max_ts_offset))
                    since = 0
                size = fmt.LOG_OVERHEAD + header[1]
                since += size
                position += size
                previous_last = last
        finally:
            view.release()
        truncated = end - position
        if truncated:
            self._release_maps_past(position)
        self.offset_index.reset()
        self.time_index.reset()
        for last, batch_position, ts, ts_offset in entries:
            self.offset_index.append(last, batch_position)
            self.time_index.maybe_append(ts, ts_offset)
        if truncated:
            os.ftruncate(self._fd, position)
        self.size_bytes = position
        self.offset_index.trim()
        if max_ts != fmt.NO_TIMESTAMP:
            self.time_index.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
        self.time_index.trim()
        self.indexes_need_rebuild = False
        self._offset_index_trusted = True  # rebuilt from the batches just validated
        self._load_tail_state()
        return RecoveryResult(position, truncated, reason, position if truncated else -1)

    # --- roll, lifecycle ----------------------------------------------------------------------

    def roll_reason(self, incoming_bytes, incoming_last_offset, segment_bytes):
        """Why this segment must roll before an append of ``incoming_bytes`` ending at
        ``incoming_last_offset`` (Kafka's shouldRoll minus time): ``"size"``,
        ``"offset_index_full"``, ``"time_index_full"``, ``"offset_overflow"``, or None."""
        if self.size_bytes > 0 and self.size_bytes > segment_bytes - incoming_bytes:
            return "size"
        if self.offset_index is not None and self.offset_index.is_full():
            return "offset_index_full"
        if self.time_index is not None and self.time_index.is_full():
            return "time_index_full"
        if not 0 <= incoming_last_offset - self.base_offset <= fmt.INT32_MAX:
            return "offset_overflow"
        return None

    def resize_indexes(self, max_index_bytes=None):
        """Resize both index files to ``max_index_bytes`` (default: the segment's), as Kafka's
        LogLoader does for the active segment after loading or recovery."""
        self._check_writable()
        size = self.max_index_bytes if max_index_bytes is None else max_index_bytes
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def _append_final_time_entry(self):
        """The roll/close time-index entry (skip_full_check). A segment opened at its trimmed
        index length may have no slot left for it; it gets exactly one more (trimmed after)."""
        if self.max_timestamp_ms == fmt.NO_TIMESTAMP:
            return
        index = self.time_index
        if (self.max_timestamp_ms > index.last_entry()[0]
                and index.entries >= index.max_entries):
            index.resize((index.entries + 1) * fmt.TIME_INDEX_ENTRY_BYTES)
        index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp,
                           skip_full_check=True)

    def on_become_inactive(self):
        """On roll: the final time-index entry (skip_full_check), trimmed indexes, and both
        indexes synced (from here on they are trusted on open; see ``flush``)."""
        self._check_writable()
        self._append_final_time_entry()
        self.offset_index.trim()
        self.time_index.trim()
        self.offset_index.flush()
        self.time_index.flush()

    def flush(self):
        """fdatasync the .log; the indexes are not synced here.

        Indexes are derived data: a segment at or above the recovery point has them rebuilt
        by ``recover()`` after an unclean shutdown, and an index whose unsynced pages were lost
        only ends earlier (entries are counted up to the first all-zero one), which is correct,
        just sparser. They are synced when they become trusted: on roll
        (``on_become_inactive``, which lifts the segment below the recovery point) and on
        ``close`` (the indexes msync when closed). One sync per flush instead of three (Kafka's
        LogSegment.flush syncs all three)."""
        self._check_writable()
        os.fdatasync(self._fd)

    def refresh(self):
        """Read-only: see the whole batches (and index entries) a writer appended since, or
        start over from the indexes when the writer cut the file (a follower truncation, a
        recovery). Never maps the file; index entries are checked again (see ``open``)."""
        self._check_open()
        if not self.read_only:
            return
        for index in (self.offset_index, self.time_index):
            if index is not None:
                index.reload()
        self._drop_read_caches()
        end = os.fstat(self._fd).st_size
        if end < self.size_bytes or self._index_repaired(end):
            # The writer truncated, or rebuilt the index this reader distrusted: start over.
            self.size_bytes = end
            self._offset_index_trusted = self.offset_index is not None
            if self._offset_index_trusted:
                try:
                    self.offset_index.sanity_check(log_size_bytes=end)
                except CorruptIndexError:
                    self._distrust_offset_index()
            self._load_tail_state()
            return
        stop = self._lenient_scan(self.size_bytes, end, self.next_offset - 1)
        for position, header in stop.batches:
            last = header[0] + header[6]
            if header[8] > self.max_timestamp_ms:
                self.max_timestamp_ms, self.offset_of_max_timestamp = header[8], last
            if position == 0:
                self.first_batch_timestamp_ms = header[8]
            self.next_offset = last + 1
        self.size_bytes = stop.position
        if stop.reason not in ("", fmt.REASON_TRUNCATED):
            self.size_bytes = end  # corrupt bytes stay inside the extent: reads raise there

    def _index_repaired(self, end):
        """A reader's distrusted offset index now passes its check (its writer rebuilt it).
        Until then refresh() scans on from where it was: lookups scan from 0 anyway."""
        if self._offset_index_trusted or self.offset_index is None:
            return False
        try:
            self.offset_index.sanity_check(log_size_bytes=end)
        except CorruptIndexError:
            return False
        return True

    def _close_files(self):
        for index in (self.offset_index, self.time_index):
            if index is not None:
                index.close()
        if self._mm is not None:
            self._retire(self._mm)
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self):
        """Trim the indexes (writer) and close the files. Views already handed out stay
        valid. Idempotent."""
        if self.closed:
            return
        try:
            if not self.read_only:
                self._append_final_time_entry()
                self.offset_index.trim()
                self.time_index.trim()
        finally:
            self.closed = True
            self._close_files()

    def release(self):
        """Close the descriptor and unmap the files without trimming, syncing or writing an
        index entry (a file cache closing an idle segment it will open again): the files are
        left as a stopped process leaves them, which the next open reads. Views already
        handed out stay valid. Closed afterwards; idempotent."""
        if self.closed:
            return
        self.closed = True
        # Dropping the indexes unmaps them without a flush (mmap's dealloc).
        self.offset_index = self.time_index = None
        if self._mm is not None:
            self._retire(self._mm)
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self):
        """Close and remove the segment's files (missing ones are ignored)."""
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def views_outstanding(self):
        """True while a view returned by ``read()`` is alive. Python's mmap cannot be asked
        how many views it has, only refuse to close: so every mapping no view holds is
        closed on the way (the current one is mapped again by the next read)."""
        maps = self._retired + ([self._mm] if self._mm is not None else [])
        self._retired = [m for m in maps if m is not self._mm and not self._try_close(m)]
        if self._mm is not None and self._try_close(self._mm):
            self._mm, self._mm_bytes = None, 0
        return bool(self._retired) or self._mm is not None

    def rename_suffix(self, new_suffix):
        """Rename every file from the current suffix to ``new_suffix`` (e.g. ``".deleted"``,
        ``""``); open mappings and descriptors follow the files."""
        old = (self.log_path, self.index_path, self.time_index_path)
        self.file_suffix = new_suffix
        new = (self.log_path, self.index_path, self.time_index_path)
        for src, dst in zip(old, new):
            if os.path.exists(src):
                os.replace(src, dst)
        for index, path in ((self.offset_index, new[1]), (self.time_index, new[2])):
            if index is not None:
                index.path = path

    def __repr__(self):
        return (f"Segment({self.log_path!r}, base_offset={self.base_offset}, "
                f"next_offset={self.next_offset}, size_bytes={self.size_bytes})")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
