"""Sparse segment indexes, memory-mapped: Kafka's OffsetIndex and TimeIndex (AbstractIndex).

An index maps a key column (offset or timestamp) to a value column (position or offset) for a
*sample* of the batches in one segment's ``.log``; lookups binary-search it and the segment then
scans batch headers forward. The index is derived data: the log is the truth and recovery
rebuilds indexes from it (``Segment.recover``).

On disk (big-endian, no header, no checksum):

* ``.index``: 8-byte entries ``(relative_offset int32, position int32)``.
* ``.timeindex``: 12-byte entries ``(timestamp_ms int64, relative_offset int32)``.

A writable index opened on an empty (or new) file is preallocated (zero-filled, sparse) to
``max_index_bytes`` rounded down to the entry size and mmapped; appends are stores into the map.
``preallocate=False`` opens it at its current length instead (an empty file stays empty, with no
room): a segment opens an existing index that way, since only the active segment's indexes are
ever appended to and the Log ``resize()``s those (Kafka's LogLoader); an old segment's trimmed
index is never grown just to be read. ``trim()`` (on close and roll)
cuts the file to the valid entries. Kafka trusts every slot of an existing file; we instead
count the entries before the first all-zero entry, so a read-only reader can open a writer's
untrimmed, preallocated index, and an index left untrimmed by a crash reopens correctly. For
that to work an all-zero entry must never be valid: the first batch of a segment never gets an
entry (the check happens before its bytes are counted), so an offset-index entry never has
position 0; an append that *would* write an all-zero entry is skipped, which changes no lookup
(the fallback answer ``(base_offset, 0)`` / ``(-1, base_offset)`` is equivalent). Removed
entries (``truncate_to``, ``reset``) are zeroed for the same reason.

Memory: a store holds two preallocated indexes per partition, so an index costs only the pages
of its entries. The file is grown with ftruncate (sparse: no block, no page until written).
Counting on open reads a probe only if the file has data under it (``lseek(SEEK_DATA)``; a
hole reads as zeros), so an empty index touches no page and the answer is the one reading
every probe gives. The map is advised ``MADV_RANDOM``: no read-around on a fault, which would
cache the tail's zero pages for the kernel to map in beside the next fault (fault-around);
passes over the entries (``sanity_check``, zeroing) read exactly their pages ahead instead.
``reset`` cuts the file to 0 bytes and grows it back instead of zeroing slots, and
``truncate_to`` zeroes only the slots of the dropped entries.

Disk: the first store into a page of a hole needs a disk block, and through a mapping a
refused block is no error code but SIGBUS, which kills the process (issue 14: a disk filled by
10,000 partitions). So no entry is stored in a page whose blocks are not reserved: before a
write reaches past ``reserved_bytes``, the blocks are reserved with ``posix_fallocate``
(inside the file's length, so its size and bytes do not change, and no page is touched: an
idle index still costs no memory). Reservations start at one page and reach ahead as far as
the entries already reach, at most ``_RESERVE_AHEAD_BYTES_MAX``, so a busy index makes one
call per doubling and an index of a few entries holds one page. ``reserve(count)`` lets the
segment reserve its append's entries *before* it writes the ``.log``: on a full disk the
append then fails with :class:`~seglog.errors.KafkaStorageError` and writes nothing. Failing
is Kafka's answer, not skipping the entry: in Kafka an IOException from ``LogSegment.append``
(log or index) becomes ``KafkaStorageException`` (``UnifiedLog.append`` under
``maybeHandleIOException``), the produce is answered KAFKA_STORAGE_ERROR and nothing is
acknowledged; a skipped entry would hide a full disk until the next ``.log`` write failed,
and the roll/close time-index entry is not optional (it carries the segment's largest
timestamp, which time retention reads). Unlike Kafka's, the failed append leaves the segment
exactly as it was, so the log need not go offline: the producer's retry succeeds once space
is freed. A file system without fallocate (EOPNOTSUPP) is written as before, unprotected.

Index bytes are untrusted input (a crash, a cut ``.log``, bit rot, another tool): nothing
here trusts an entry for memory safety (entries are only compared and returned), and
``sanity_check`` states what a valid index always satisfies (offsets and positions strictly
increasing, positions inside the ``.log``; time-index timestamps non-decreasing, offsets
non-decreasing and below the segment's next offset). The segment runs it on open and checks
every lookup result against the ``.log`` (``seglog.pure.segment``). Numbers: a non-integer
argument is TypeError; a lookup or truncation target may be any int (clamped to int64).

Thread-safety: none; the owning Segment (and above it the Log) serialises calls. This module is
the pure-Python twin of ``src/_native/index.pyx``; both write byte-identical files.
"""

from __future__ import annotations

import errno
import mmap
import operator
import os
import struct

from .. import format as fmt
from ..errors import CorruptIndexError, IndexFullError, InvalidOffsetError, KafkaStorageError

__all__ = ["OffsetIndex", "TimeIndex"]

_MAX_INDEX_BYTES_DEFAULT = 10 * 1024 * 1024
_SEEK_DATA = getattr(os, "SEEK_DATA", None)  # Linux >= 3.1, the BSDs, macOS, Solaris
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)
_MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)
_PREFETCH_BYTES = 128 * 1024  # one readahead request (a multiple of any page size)
_PAGE_BYTES = mmap.PAGESIZE  # the unit a store through the map allocates blocks in
_RESERVE_AHEAD_BYTES_MAX = 1 << 20  # disk reserved past the entries' pages, at most
_RESERVE_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOSYS)  # no fallocate: best effort


def _int_arg(value, name):
    """``value`` as an int; TypeError (the same message in both twins) for anything that is not
    an integer (a float such as 1.5, a str, None). bool counts as an int, as in Python."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _clamp64(value):
    """An int clamped to int64: searches compare against int64 keys, so any larger target
    finds the same slot as INT64_MAX (the native twin cannot hold more than 64 bits)."""
    return max(-fmt.INT64_MAX - 1, min(value, fmt.INT64_MAX))


def _slot_in_hole(fd, slot, entry_bytes):
    """True when no byte of slot ``slot`` of ``fd`` is data: the slot lies in a hole of the
    sparse file (or past its end) and so reads as zeros, known without touching its page.
    Where SEEK_DATA is not supported the whole file is data, and every slot is read."""
    if _SEEK_DATA is None:
        return False
    start = slot * entry_bytes
    try:
        data = os.lseek(fd, start, _SEEK_DATA)
    except OSError as e:
        return e.errno == errno.ENXIO  # no data at or after start
    return data >= start + entry_bytes


class _Index:
    """What both index types share: the file, the map, entry counting, search, trim, resize.

    Subclasses set ``_ENTRY`` (a ``struct.Struct``) and ``_KEY_COLUMN``/``_VALUE_COLUMN`` (which
    field of an entry is searched and which is returned).
    """

    _ENTRY: struct.Struct  # set by each subclass
    _ENTRY_BYTES = 0

    def __init__(self, path, base_offset, *, max_index_bytes=_MAX_INDEX_BYTES_DEFAULT,
                 writable=True, preallocate=True):
        base_offset = _int_arg(base_offset, "base_offset")
        max_index_bytes = _int_arg(max_index_bytes, "max_index_bytes")
        if base_offset < 0 or base_offset > fmt.INT64_MAX:
            raise ValueError(f"base_offset must be in [0, 2**63), got {base_offset}")
        if not 0 <= max_index_bytes <= fmt.INT32_MAX:
            raise ValueError(f"max_index_bytes must be in [0, 2**31), got {max_index_bytes}")
        self.path = os.fspath(path)
        self.base_offset = int(base_offset)
        self.writable = bool(writable)
        self.max_index_bytes = int(max_index_bytes)
        self.entries = 0
        self._mm = None
        self._length = 0
        self._reserved_bytes = 0  # blocks known allocated: bytes [0, this) of the file
        self._closed = False
        if writable:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                length = os.fstat(fd).st_size
                if length == 0 and preallocate:
                    # Newly created (or empty): preallocate, as AbstractIndex does.
                    length = self._round_down(max_index_bytes)
                    os.ftruncate(fd, length)
                self._map(fd, length)
                self.entries = self._count_entries(fd, 0)
            finally:
                os.close(fd)
        else:
            self._load_copy()

    # --- mapping ------------------------------------------------------------------------------

    def _round_down(self, n):
        return n - n % self._ENTRY_BYTES

    def _map(self, fd, length):
        """Map the first ``length`` bytes of ``fd`` (whole entries only are ever used)."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._length = length
        usable = self._round_down(length)
        self._reserved_bytes = min(self._reserved_bytes, usable)  # a cut frees its blocks
        if usable > 0:
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            self._mm = mmap.mmap(fd, usable, access=access)
            if _MADV_RANDOM is not None:
                self._mm.madvise(_MADV_RANDOM)  # no read-around (see the module docstring)

    def _prefetch(self, first_slot, end_slot):
        """Start reading the pages of slots ``[first_slot, end_slot)`` (entries: no page of
        the zero tail) before a pass over them: the map is MADV_RANDOM, so the pass would
        otherwise wait for one disk read per page of a cold index. Only a hint."""
        if not isinstance(self._mm, mmap.mmap) or _MADV_WILLNEED is None:
            return  # not mapped (a reader's copy) or no madvise here
        end = end_slot * self._ENTRY_BYTES
        start = first_slot * self._ENTRY_BYTES
        start -= start % _PREFETCH_BYTES  # madvise wants a page-aligned start
        while start < end:
            length = min(end - start, _PREFETCH_BYTES)
            self._mm.madvise(_MADV_WILLNEED, start, length)
            start += length

    def _load_copy(self):
        """Read-only: copy the valid entries into memory with pread instead of mapping them.

        A writer trims its index on roll and close; a mapping of the old, longer file would
        then fault (SIGBUS) on the first access past the new end, and a read-only reader may
        live in another process, so readers never map an index. Counting is the same binary
        search for the first all-zero slot, done with small preads (a short read is the end)
        and none for a slot in a hole."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            length = os.fstat(fd).st_size
            size = self._ENTRY_BYTES

            def is_zero(n):
                if _slot_in_hole(fd, n, size):
                    return True
                chunk = os.pread(fd, size, n * size)
                return len(chunk) < size or chunk.count(0) == size

            lo, hi = 0, length // size
            while lo < hi:
                mid = (lo + hi) >> 1
                if is_zero(mid):
                    hi = mid
                else:
                    lo = mid + 1
            data = os.pread(fd, lo * size, 0)
        finally:
            os.close(fd)
        self._length = length
        self._mm = data[:len(data) - len(data) % size]
        self.entries = len(self._mm) // size

    @property
    def max_entries(self):
        """How many entries the mapped file can hold."""
        return self._round_down(self._length) // self._ENTRY_BYTES

    @property
    def size_bytes(self):
        """Bytes of valid entries (``entries * entry size``)."""
        return self.entries * self._ENTRY_BYTES

    def _is_zero(self, n):
        start = n * self._ENTRY_BYTES
        return self._mm[start:start + self._ENTRY_BYTES].count(0) == self._ENTRY_BYTES

    def _count_entries(self, fd, start):
        """Entries before the first all-zero entry of ``fd`` (the mapped file); entries below
        ``start`` are known valid.

        Valid entries are a prefix and the zero tail a suffix, so this is a binary search for
        the first zero slot (O(log n) probes on open, not a scan of a 10 MiB file). A probe in
        a hole is zero without reading it: an empty index touches no page, one with entries
        only pages that hold some, and the probes and the answer are those of reading each.
        """
        lo, hi = start, self.max_entries  # answer in [lo, hi]
        while lo < hi:
            mid = (lo + hi) >> 1
            if _slot_in_hole(fd, mid, self._ENTRY_BYTES) or self._is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _check_open(self):
        if self._closed:
            raise ValueError(f"index {self.path} is closed")

    def _check_writable(self):
        self._check_open()
        if not self.writable:
            raise ValueError(f"index {self.path} was opened read-only")

    # --- disk reservation (see the module docstring) ------------------------------------------

    @property
    def reserved_bytes(self):
        """Bytes at the start of the file whose disk blocks are reserved (``posix_fallocate``
        since the file was last mapped): entries up to here are stored without allocating.
        The file's whole mapped length where fallocate is not supported."""
        return self._reserved_bytes

    def reserve(self, count):
        """Reserve the disk blocks of the next ``count`` entries (slots ``entries`` to
        ``entries + count - 1``, at most up to ``max_entries``), and some ahead, before
        anything is written: KafkaStorageError (an ``OSError`` with the call's errno:
        ENOSPC, EDQUOT, EIO, ...) when the disk refuses them. No page is touched. ValueError
        for a negative ``count``; TypeError for a non-integer."""
        self._check_writable()
        count = _int_arg(count, "count")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        self._reserve_slots(self.entries + count)

    def _reserve_slots(self, end_slot):
        """Reserve the blocks of slots ``[0, end_slot)`` (clamped to the map) if not yet."""
        usable = self._round_down(self._length)
        end = min(end_slot * self._ENTRY_BYTES, usable)
        if end <= self._reserved_bytes:
            return
        pages_end = -(-end // _PAGE_BYTES) * _PAGE_BYTES
        target = min(pages_end + min(pages_end - _PAGE_BYTES, _RESERVE_AHEAD_BYTES_MAX), usable)
        start = self._reserved_bytes
        try:
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, start, target - start)
            finally:
                os.close(fd)
        except OSError as e:
            if e.errno in _RESERVE_UNSUPPORTED:
                self._reserved_bytes = usable  # stop trying until the next remap
                return
            raise KafkaStorageError(
                e.errno, f"cannot reserve disk blocks for index entries: {os.strerror(e.errno)}",
                self.path) from None
        self._reserved_bytes = target

    # --- entries ------------------------------------------------------------------------------

    def _raw(self, n):
        return self._ENTRY.unpack_from(self._mm, n * self._ENTRY_BYTES)

    def _key(self, n):
        """The searched column of entry ``n``: absolute offset or timestamp."""
        raise NotImplementedError

    def _write(self, fields):
        """Store one entry at slot ``entries`` (the caller checked order and space), its
        disk blocks reserved first: a store into an unreserved page of a full disk is SIGBUS."""
        self._reserve_slots(self.entries + 1)
        self._ENTRY.pack_into(self._mm, self.entries * self._ENTRY_BYTES, *fields)
        self.entries += 1

    def _zero_from(self, n):
        """Zero slots ``n .. entries-1`` (only the dropped entries: the tail past them is
        zero, and a hole) and set ``entries = n``."""
        if n < self.entries:
            self._prefetch(n, self.entries)
            start, end = n * self._ENTRY_BYTES, self.entries * self._ENTRY_BYTES
            self._mm[start:end] = bytes(end - start)
        self.entries = n

    # --- search (AbstractIndex.indexSlotRangeFor) ----------------------------------------------

    def _largest_lower_bound_slot(self, target):
        """Slot of the entry with the greatest key <= ``target``, or -1.

        Warm-section search, as Kafka's AbstractIndex: indexes are mmapped and almost every
        lookup (in-sync followers, tailing consumers) targets the tail. A plain binary search
        touches pages spread over the whole file, and which pages it touches shifts as the
        index grows, so a lookup can page-fault on a cold page (Kafka saw produce latency jump
        from a few ms to ~1 s). Searching only the last 8 KiB of entries first keeps the
        pages of tail lookups (at most 3 with 4 KiB pages) always warm; only lookups older
        than ~4 MB of log (offset index at default settings) search the cold section.
        """
        entries = self.entries
        if entries == 0:
            return -1
        warm_entries = fmt.INDEX_WARM_SECTION_BYTES // self._ENTRY_BYTES
        first_hot = max(0, entries - 1 - warm_entries)
        if self._key(first_hot) < target:
            return self._binary_search(target, first_hot, entries - 1)
        if self._key(0) > target:
            return -1
        return self._binary_search(target, 0, first_hot)

    def _binary_search(self, target, lo, hi):
        # Invariant: key(lo) <= target; find the last slot in [lo, hi] with key <= target.
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._key(mid) > target:
                hi = mid - 1
            else:
                lo = mid
        return lo

    # --- maintenance --------------------------------------------------------------------------

    def is_full(self):
        """True when no entry can be appended."""
        return self.entries >= self.max_entries

    def reset(self):
        """Drop every entry and resize the file to ``max_index_bytes`` (Kafka's ``reset`` =
        truncateToEntries(0) + resize(maxIndexSize)). The file is cut to 0 bytes and grown
        back, all zeros and sparse (its blocks given back), without faulting a page in."""
        self._check_writable()
        self._set_length(self._round_down(self.max_index_bytes), drop_entries=True)

    def trim(self):
        """Cut the file to the valid entries (``entries * entry size`` bytes). Runs on close and
        roll so that Kafka (which trusts every slot of an existing file) reads it too."""
        self._check_writable()
        self.resize(self.size_bytes)

    def resize(self, max_index_bytes):
        """Set the file length to ``max_index_bytes`` rounded down to the entry size and remap.
        Growing adds zero slots; shrinking below the valid entries drops the cut ones."""
        self._check_writable()
        max_index_bytes = _int_arg(max_index_bytes, "max_index_bytes")
        if not 0 <= max_index_bytes <= fmt.INT32_MAX:
            raise ValueError(f"max_index_bytes must be in [0, 2**31), got {max_index_bytes}")
        length = self._round_down(max_index_bytes)
        if length != self._length:
            self._set_length(length, drop_entries=False)

    def _set_length(self, length, *, drop_entries):
        """Set the file length and remap. ``drop_entries``: cut the file to 0 bytes first, so
        it is all hole (its blocks given back) and no slot is zeroed through the map."""
        if self._mm is not None and not drop_entries:
            self._mm.flush()
        fd = os.open(self.path, os.O_RDWR)
        try:
            if self._mm is not None:
                self._mm.close()
                self._mm = None
            if drop_entries:
                self.entries = 0
                self._reserved_bytes = 0
                os.ftruncate(fd, 0)
            os.ftruncate(fd, length)
            self._map(fd, length)
        finally:
            os.close(fd)
        self.entries = min(self.entries, self.max_entries)

    def flush(self):
        """Write dirty pages of the map to disk (msync)."""
        self._check_open()
        if self._mm is not None and self.writable:
            self._mm.flush()

    def reload(self):
        """Read-only readers: pick up entries (and a new file length) the writer produced.

        Readers hold a copy of the valid entries (see ``_load_copy``); it is re-read. Entries
        are recounted (the writer may also have truncated)."""
        self._check_open()
        if not self.writable:
            self._load_copy()
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            length = os.fstat(fd).st_size
            self._reserved_bytes = 0  # someone else changed the file: know nothing of its blocks
            if length != self._length:
                self._map(fd, length)
            self.entries = self._count_entries(fd, 0)
        finally:
            os.close(fd)

    def close(self):
        """Unmap the file (it is not trimmed here: the segment trims before closing)."""
        if self._closed:
            return
        self._closed = True
        if self._mm is not None:
            if self.writable:
                self._mm.flush()
                self._mm.close()
            self._mm = None

    @property
    def closed(self):
        return self._closed

    def __repr__(self):
        return (f"{type(self).__name__}({self.path!r}, base_offset={self.base_offset}, "
                f"entries={self.entries}, max_entries={self.max_entries})")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class OffsetIndex(_Index):
    """Offset index of one segment (``<base>.index``); see :class:`seglog._contract.OffsetIndex`.

    ``OffsetIndex(path, base_offset, *, max_index_bytes=10485760, writable=True,
    preallocate=True)``. Entries map
    an absolute offset (stored relative to ``base_offset``) to the byte position in the
    ``.log`` of the batch that holds it. Not thread-safe. ``lookup`` and ``entry`` return
    absolute offsets. Errors: InvalidOffsetError (order, int32 range), IndexFullError,
    CorruptIndexError (``sanity_check``).
    """

    _ENTRY = fmt.OFFSET_INDEX_ENTRY
    _ENTRY_BYTES = fmt.OFFSET_INDEX_ENTRY_BYTES

    def _key(self, n):
        return self.base_offset + self._ENTRY.unpack_from(self._mm, n * 8)[0]

    @property
    def last_offset(self):
        """Offset of the last entry; ``base_offset`` when empty."""
        if self.entries == 0:
            return self.base_offset
        return self._key(self.entries - 1)

    def entry(self, n):
        """Entry ``n`` as ``(offset, position)``; IndexError outside ``[0, entries)``."""
        n = _int_arg(n, "n")
        if not 0 <= n < self.entries:
            raise IndexError(f"index entry {n} out of range [0, {self.entries})")
        relative_offset, position = self._raw(n)
        return self.base_offset + relative_offset, position

    def append(self, offset, position):
        """Add ``(offset, position)``. InvalidOffsetError unless the index is empty or ``offset >
        last_offset``, and ``0 <= offset - base_offset <= INT32_MAX`` and ``0 <= position <=
        INT32_MAX``; IndexFullError when full. ``(base_offset, 0)`` is skipped (see module)."""
        self._check_writable()
        offset = _int_arg(offset, "offset")
        position = _int_arg(position, "position")
        relative_offset = offset - self.base_offset
        if not 0 <= relative_offset <= fmt.INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} is not storable in the index of segment {self.base_offset}")
        if not 0 <= position <= fmt.INT32_MAX:
            raise InvalidOffsetError(f"position {position} out of int32 range")
        if self.entries > 0 and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is not larger than the last index entry {self.last_offset} "
                f"({self.path})")
        if self.is_full():
            raise IndexFullError(f"offset index {self.path} is full ({self.entries} entries)")
        if relative_offset == 0 and position == 0:
            return  # equivalent to the fallback answer; an all-zero slot ends the index
        self._write((relative_offset, position))

    def lookup(self, target_offset):
        """``(offset, position)`` of the entry with the greatest offset <= ``target_offset``,
        or ``(base_offset, 0)`` when there is none. Any int is a valid target (beyond int64 it
        finds what INT64_MAX finds); TypeError for a non-integer. The entry is returned as
        stored: it is not checked against the ``.log`` (the segment does that, see
        ``seglog.pure.segment``)."""
        self._check_open()
        slot = self._largest_lower_bound_slot(_clamp64(_int_arg(target_offset, "target_offset")))
        if slot < 0:
            return self.base_offset, 0
        relative_offset, position = self._raw(slot)
        return self.base_offset + relative_offset, position

    def truncate_to(self, offset):
        """Drop every entry with offset >= ``offset`` (Kafka's OffsetIndex.truncateTo). Any int;
        TypeError for a non-integer."""
        self._check_writable()
        offset = _clamp64(_int_arg(offset, "offset"))
        slot = self._largest_lower_bound_slot(offset)
        if slot < 0:
            keep = 0
        elif self._key(slot) == offset:
            keep = slot
        else:
            keep = slot + 1
        self._zero_from(keep)

    def sanity_check(self, *, log_size_bytes=None):
        """Check every entry before it is trusted (index bytes are untrusted input, Kafka's
        AbstractIndex.sanityCheck made stricter): CorruptIndexError if the file length is not a
        multiple of 8, or relative offsets are not strictly increasing from >= 0, or positions
        are negative or not strictly increasing, or (when ``log_size_bytes`` is given) a
        position is not below the ``.log`` size. Entries are written in file order, one per
        batch start, so a valid index always passes. Whether an entry lands on a batch start
        needs the ``.log``: the segment checks that at lookup."""
        self._check_open()
        if self._length % self._ENTRY_BYTES != 0:
            raise CorruptIndexError(
                f"index file {self.path} has length {self._length}, not a multiple of 8")
        if log_size_bytes is not None:
            log_size_bytes = _int_arg(log_size_bytes, "log_size_bytes")
        self._prefetch(0, self.entries)
        previous_offset = previous_position = -1
        for n in range(self.entries):
            relative_offset, position = self._raw(n)
            if (relative_offset <= previous_offset or position <= previous_position
                    or (log_size_bytes is not None and position >= log_size_bytes)):
                raise CorruptIndexError(
                    f"corrupt index {self.path}: entry {n} = ({relative_offset}, {position})")
            previous_offset, previous_position = relative_offset, position


class TimeIndex(_Index):
    """Time index of one segment (``<base>.timeindex``); see :class:`seglog._contract.TimeIndex`.

    An entry ``(timestamp_ms, offset)`` means: the largest timestamp seen in batches up to
    ``offset`` is ``timestamp_ms``. Timestamps are strictly increasing in the file. The last
    slot is reserved for the final entry written on roll/close (``is_full``). Not thread-safe.
    """

    _ENTRY = fmt.TIME_INDEX_ENTRY
    _ENTRY_BYTES = fmt.TIME_INDEX_ENTRY_BYTES

    def _key(self, n):
        return self._ENTRY.unpack_from(self._mm, n * 12)[0]

    def entry(self, n):
        """Entry ``n`` as ``(timestamp_ms, offset)``; IndexError outside ``[0, entries)``."""
        n = _int_arg(n, "n")
        if not 0 <= n < self.entries:
            raise IndexError(f"index entry {n} out of range [0, {self.entries})")
        timestamp_ms, relative_offset = self._raw(n)
        return timestamp_ms, self.base_offset + relative_offset

    def last_entry(self):
        """The last ``(timestamp_ms, offset)``, or ``(-1, base_offset)`` when empty."""
        self._check_open()
        if self.entries == 0:
            return fmt.NO_TIMESTAMP, self.base_offset
        return self.entry(self.entries - 1)

    @property
    def last_offset(self):
        """Offset of the last entry; ``base_offset`` when empty."""
        return self.last_entry()[1]

    def is_full(self):
        """``entries >= max_entries - 1``: the last slot is kept for the roll/close entry."""
        return self.entries >= self.max_entries - 1

    def maybe_append(self, timestamp_ms, offset, *, skip_full_check=False):
        """Add ``(timestamp_ms, offset)`` if ``timestamp_ms`` is larger than the last entry's (or
        the index is empty and it is > -1); otherwise do nothing (Kafka's maybeAppend).

        IndexFullError when full (unless ``skip_full_check``; even then a file with no free
        slot at all raises); InvalidOffsetError if ``offset`` is below the last entry's offset
        or not storable as int32; ValueError (Kafka: IllegalStateException) if ``timestamp_ms``
        is smaller than the last entry's timestamp while the offset grows.
        """
        self._check_writable()
        timestamp_ms = _int_arg(timestamp_ms, "timestamp_ms")
        offset = _int_arg(offset, "offset")
        if not -1 <= timestamp_ms <= fmt.INT64_MAX:
            raise ValueError(f"timestamp_ms must be in [-1, 2**63), got {timestamp_ms}")
        if not skip_full_check and self.is_full():
            raise IndexFullError(f"time index {self.path} is full ({self.entries} entries)")
        last_timestamp_ms, last_offset = self.last_entry()
        relative_offset = offset - self.base_offset
        if not 0 <= relative_offset <= fmt.INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} is not storable in the time index of segment "
                f"{self.base_offset}")
        if self.entries > 0 and offset < last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is below the last time index entry's offset {last_offset} "
                f"({self.path})")
        if self.entries > 0 and timestamp_ms < last_timestamp_ms:
            raise ValueError(
                f"timestamp {timestamp_ms} is below the last time index entry's timestamp "
                f"{last_timestamp_ms} ({self.path})")
        if timestamp_ms <= last_timestamp_ms:
            return
        if self.entries >= self.max_entries:
            raise IndexFullError(f"time index {self.path} has no slot left")
        if timestamp_ms == 0 and relative_offset == 0:
            return  # equivalent to the fallback answer; an all-zero slot ends the index
        self._write((timestamp_ms, relative_offset))

    def lookup(self, timestamp_ms):
        """``(timestamp_ms, offset)`` of the entry with the greatest timestamp <= the target,
        or ``(-1, base_offset)`` when there is none. Among entries with equal timestamps
        (allowed: timestamps are only required to be non-decreasing) the first, lowest offset
        is returned, so a scan from it misses no record with that timestamp. Any int target
        (clamped to int64); TypeError for a non-integer."""
        self._check_open()
        slot = self._largest_lower_bound_slot(_clamp64(_int_arg(timestamp_ms, "timestamp_ms")))
        if slot < 0:
            return fmt.NO_TIMESTAMP, self.base_offset
        if slot > 0 and self._key(slot - 1) == self._key(slot):
            key, lo, hi = self._key(slot), 0, slot  # first slot with this key, in [lo, hi]
            while lo < hi:
                mid = (lo + hi) >> 1
                if self._key(mid) < key:
                    lo = mid + 1
                else:
                    hi = mid
            slot = lo
        return self.entry(slot)

    def truncate_to(self, offset):
        """Drop every entry whose offset >= ``offset`` (Kafka's TimeIndex.truncateTo). Any int;
        TypeError for a non-integer."""
        self._check_writable()
        offset = _int_arg(offset, "offset")
        # Offsets may repeat in a time index, so find the first slot with offset >= target.
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.entry(mid)[1] < offset:
                lo = mid + 1
            else:
                hi = mid
        self._zero_from(lo)

    def sanity_check(self, *, next_offset=None):
        """Check every entry before it is trusted (Kafka's TimeIndex.sanityCheck made
        stricter): CorruptIndexError if the file length is not a multiple of 12, a timestamp is
        below -1 or below the one before (timestamps are non-decreasing), a relative offset is
        negative or below the one before, or (when ``next_offset`` is given, the segment's)
        an entry's offset is not below ``next_offset`` (a stale entry past a cut .log)."""
        self._check_open()
        if self._length % self._ENTRY_BYTES != 0:
            raise CorruptIndexError(
                f"time index file {self.path} has length {self._length}, not a multiple of 12")
        if next_offset is not None:
            next_offset = _int_arg(next_offset, "next_offset")
        self._prefetch(0, self.entries)
        previous_timestamp_ms, previous_relative = fmt.NO_TIMESTAMP, 0
        for n in range(self.entries):
            timestamp_ms, relative_offset = self._raw(n)
            if (relative_offset < previous_relative or timestamp_ms < previous_timestamp_ms
                    or (next_offset is not None
                        and self.base_offset + relative_offset >= next_offset)):
                raise CorruptIndexError(
                    f"corrupt time index {self.path}: entry {n} = "
                    f"({timestamp_ms}, {relative_offset})")
            previous_timestamp_ms, previous_relative = timestamp_ms, relative_offset
