# cython: language_level=3
"""Sparse segment indexes over a POSIX mmap: Kafka's OffsetIndex and TimeIndex (AbstractIndex).

The native twin of ``seglog.pure.index``: same names, rules, errors and bytes on disk. Read the
pure module's docstring for the format and the counting rule (entries end at the first all-zero
slot). Here a writer's file is mapped with mmap(2) directly (no file descriptor is kept: the
mapping outlives the fd) and lookups are a C binary search over the map with the GIL released
(a cold page can fault to disk). Read-only readers copy the valid entries with pread instead
(a writer trims its index on roll; a reader's longer mapping would then SIGBUS). Memory: a
preallocated file is sparse (ftruncate) and only the pages of written entries are touched;
counting skips the file's holes (``lseek(SEEK_DATA)``), and ``reset`` cuts the file to 0
bytes and grows it back instead of zeroing slots (the pure module's docstring). Disk: no entry
is stored in a page whose blocks are not reserved (posix_fallocate, in the same growing steps
as the twin), since a store into a hole of a full disk is SIGBUS; a refusal is
KafkaStorageError, and ``reserve`` lets the segment take the blocks of an append's entries
before it writes the ``.log`` (the pure module's docstring says why failing, as Kafka, and
not skipping the entry). The segment
calls these classes through their Python methods (once per index entry, never per batch),
except for a point read's lookup, ``offset_lookup``, which it cimports (declared in
src/seglog/_native/index.pxd).

Thread-safety: none; the owning Segment (and above it the Log) serialises calls.
"""

from libc.errno cimport EINTR, ENOSYS, ENXIO, EOPNOTSUPP, errno
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from posix.unistd cimport pread
from posix.fcntl cimport O_CREAT, O_RDONLY, O_RDWR, open as c_open
from posix.mman cimport (MADV_RANDOM, MADV_WILLNEED, MAP_FAILED, MAP_SHARED, MS_SYNC, PROT_READ,
                         PROT_WRITE, madvise, mmap, msync, munmap)
from posix.stat cimport fstat, struct_stat
from posix.types cimport off_t
from posix.unistd cimport close as c_close, ftruncate, lseek, sysconf, _SC_PAGESIZE

cdef extern from "<unistd.h>" nogil:
    enum: SEEK_DATA  # Linux >= 3.1, the BSDs, macOS, Solaris (_GNU_SOURCE: from Python.h)

cdef extern from "<fcntl.h>" nogil:
    int posix_fallocate(int fd, off_t offset, off_t length)  # returns an errno, or 0
    enum: O_CLOEXEC

from _bigendian cimport load_i32, load_i64, store_i64, store_u32

import operator
import os

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError, KafkaStorageError

cdef enum:
    OFFSET_ENTRY_BYTES = 8
    TIME_ENTRY_BYTES = 12
    WARM_SECTION_BYTES = 8192     # AbstractIndex.warmEntries() * entrySize
    PREFETCH_BYTES = 131072       # one readahead request (a multiple of any page size)
    RESERVE_AHEAD_BYTES_MAX = 1048576  # disk reserved past the entries' pages, at most
    INT32_MAX_ = 2147483647
    NO_TIMESTAMP_ = -1

_MAX_INDEX_BYTES_DEFAULT = 10 * 1024 * 1024
_INT64_MAX = 2**63 - 1
_INT32_LIMIT = 2**31  # one past the largest int32: no position or relative offset reaches it
cdef Py_ssize_t PAGE_BYTES = sysconf(_SC_PAGESIZE)  # the unit a store allocates blocks in


def _int_arg(value, name):
    """``value`` as an int; TypeError (the pure twin's message) for a non-integer (1.5, "1",
    None): no C conversion sees anything but a checked int, so no OverflowError escapes."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _clamp64(value):
    """An int clamped to int64 (searches of int64 keys: a larger target finds what
    INT64_MAX finds)."""
    return max(-_INT64_MAX - 1, min(value, _INT64_MAX))


cdef inline OSError _os_error(int err, str path):
    return OSError(err, os.strerror(err), path)


cdef inline bint _slot_in_hole(int fd, Py_ssize_t slot, Py_ssize_t entry_bytes) noexcept nogil:
    """True when no byte of slot ``slot`` of ``fd`` is data: the slot lies in a hole of the
    sparse file (or past its end) and so reads as zeros, known without touching its page.
    Where SEEK_DATA is not supported the whole file is data, and every slot is read."""
    cdef off_t start = <off_t>slot * entry_bytes
    cdef off_t data = lseek(fd, start, SEEK_DATA)
    if data < 0:
        return errno == ENXIO  # no data at or after start
    return data >= start + entry_bytes


cdef class _Index:
    """What both index types share: the file, the map, entry counting, search, trim, resize."""

    cdef public str path
    cdef readonly object base_offset         # Python int (attribute API)
    cdef readonly bint writable
    cdef readonly Py_ssize_t entries
    cdef readonly object max_index_bytes
    cdef int64_t _base                       # base_offset as a C integer
    cdef unsigned char *_map                 # NULL when the usable length is 0
    cdef Py_ssize_t _map_bytes               # mapped bytes (whole entries)
    cdef Py_ssize_t _length                  # file length when last mapped
    cdef Py_ssize_t _reserved_bytes          # blocks known allocated: bytes [0, this) of the file
    cdef Py_ssize_t _entry_bytes
    cdef bint _closed
    cdef bint _owned                         # _map is a malloc'd copy (read-only readers)

    def __init__(self, path, base_offset, *, max_index_bytes=_MAX_INDEX_BYTES_DEFAULT,
                 writable=True, preallocate=True):
        cdef int fd
        cdef struct_stat st
        cdef Py_ssize_t length
        base_offset = _int_arg(base_offset, "base_offset")
        max_index_bytes = _int_arg(max_index_bytes, "max_index_bytes")
        if base_offset < 0 or base_offset > _INT64_MAX:
            raise ValueError(f"base_offset must be in [0, 2**63), got {base_offset}")
        if not 0 <= max_index_bytes <= INT32_MAX_:
            raise ValueError(f"max_index_bytes must be in [0, 2**31), got {max_index_bytes}")
        self.path = os.fspath(path)
        self.base_offset = int(base_offset)
        self._base = base_offset
        self.writable = writable
        self.max_index_bytes = int(max_index_bytes)
        self.entries = 0
        if not writable:
            self._load_copy()
            return
        path_bytes = os.fsencode(self.path)
        fd = c_open(path_bytes, O_RDWR | O_CREAT, 0o644)
        if fd < 0:
            raise _os_error(errno, self.path)
        try:
            if fstat(fd, &st) != 0:
                raise _os_error(errno, self.path)
            length = st.st_size
            if length == 0 and preallocate:
                # Newly created (or empty): preallocate, as AbstractIndex does.
                length = max_index_bytes - max_index_bytes % self._entry_bytes
                if ftruncate(fd, length) != 0:
                    raise _os_error(errno, self.path)
            self._remap(fd, length)
            self.entries = self._count_entries(fd, 0)
        finally:
            c_close(fd)

    def __dealloc__(self):
        self._unmap()

    cdef void _unmap(self) noexcept:
        if self._map != NULL:
            if self._owned:
                free(self._map)
            else:
                munmap(self._map, self._map_bytes)
        self._map = NULL
        self._map_bytes = 0
        self._owned = False

    cdef int _load_copy(self) except -1:
        """Read-only: copy the valid entries into memory with pread instead of mapping them.

        A writer trims its index on roll and close; a mapping of the old, longer file would
        then fault (SIGBUS) on the first access past the new end, and a read-only reader may
        live in another process, so readers never map an index. Counting is the same binary
        search for the first all-zero slot, done with small preads (a short read is the end)
        and none for a slot in a hole."""
        cdef int fd, i
        cdef struct_stat st
        cdef Py_ssize_t lo = 0, hi, mid, size = self._entry_bytes, got
        cdef unsigned char chunk[16]
        cdef unsigned char *copy = NULL
        cdef bint zero
        fd = c_open(os.fsencode(self.path), O_RDONLY, 0)
        if fd < 0:
            raise _os_error(errno, self.path)
        try:
            if fstat(fd, &st) != 0:
                raise _os_error(errno, self.path)
            hi = st.st_size // size
            while lo < hi:
                mid = (lo + hi) >> 1
                if _slot_in_hole(fd, mid, size):
                    hi = mid
                    continue
                got = pread(fd, chunk, size, mid * size)
                if got < 0:
                    raise _os_error(errno, self.path)
                zero = True
                if got == size:
                    for i in range(size):
                        if chunk[i] != 0:
                            zero = False
                            break
                if zero:
                    hi = mid
                else:
                    lo = mid + 1
            if lo > 0:
                copy = <unsigned char *>malloc(lo * size)
                if copy == NULL:
                    raise MemoryError()
                got = pread(fd, copy, lo * size, 0)
                if got < 0:
                    free(copy)
                    raise _os_error(errno, self.path)
                lo = got // size
        finally:
            c_close(fd)
        self._unmap()
        self._map = copy
        self._owned = copy != NULL
        self._map_bytes = lo * size
        self._length = st.st_size
        self.entries = lo
        return 0

    cdef int _remap(self, int fd, Py_ssize_t length) except -1:
        cdef void *address
        cdef Py_ssize_t usable = length - length % self._entry_bytes
        self._unmap()
        self._length = length
        if self._reserved_bytes > usable:
            self._reserved_bytes = usable  # a cut frees its blocks
        if usable > 0:
            address = mmap(NULL, usable, (PROT_READ | PROT_WRITE) if self.writable else PROT_READ,
                           MAP_SHARED, fd, 0)
            if address == MAP_FAILED:
                raise _os_error(errno, self.path)
            self._map = <unsigned char *>address
            self._map_bytes = usable
            # No read-around on a fault: it would fill the page cache with the zero pages of
            # the preallocated tail, and a later fault maps cached neighbours (fault-around),
            # so an index of one entry would keep 64 KiB resident. Passes over the entries
            # read them ahead themselves (_prefetch). Only a hint: errors are ignored.
            madvise(address, usable, MADV_RANDOM)
        return 0

    cdef int64_t _key(self, Py_ssize_t n) noexcept nogil:
        return 0

    cdef int _reserve_slots(self, Py_ssize_t end_slot) except -1:
        """Reserve the blocks of slots ``[0, end_slot)`` (clamped to the map) if not yet: the
        twin's steps (one page first, then as far ahead as the entries reach, at most
        RESERVE_AHEAD_BYTES_MAX). KafkaStorageError when the disk refuses them."""
        cdef Py_ssize_t end = end_slot * self._entry_bytes, pages_end, ahead, target, start
        cdef int fd, err = 0
        cdef const char *c_path
        if end > self._map_bytes:
            end = self._map_bytes
        if end <= self._reserved_bytes:
            return 0
        pages_end = (end + PAGE_BYTES - 1) // PAGE_BYTES * PAGE_BYTES
        ahead = pages_end - PAGE_BYTES
        if ahead > RESERVE_AHEAD_BYTES_MAX:
            ahead = RESERVE_AHEAD_BYTES_MAX
        target = pages_end + ahead
        if target > self._map_bytes:
            target = self._map_bytes
        start = self._reserved_bytes
        path_bytes = os.fsencode(self.path)
        c_path = path_bytes
        with nogil:
            fd = c_open(c_path, O_RDWR | O_CLOEXEC, 0)
            if fd < 0:
                err = errno
            else:
                err = posix_fallocate(fd, start, target - start)
                while err == EINTR:
                    err = posix_fallocate(fd, start, target - start)
                c_close(fd)
        if err == EOPNOTSUPP or err == ENOSYS:
            self._reserved_bytes = self._map_bytes  # stop trying until the next remap
        elif err != 0:
            raise KafkaStorageError(
                err, f"cannot reserve disk blocks for index entries: {os.strerror(err)}",
                self.path)
        else:
            self._reserved_bytes = target
        return 0

    cdef void _prefetch(self, Py_ssize_t first_slot, Py_ssize_t end_slot) noexcept nogil:
        """Start reading the pages of slots ``[first_slot, end_slot)`` (entries: no page of
        the zero tail) before a pass over them: the map is MADV_RANDOM, so the pass would
        otherwise wait for one disk read per page of a cold index. Only a hint."""
        cdef Py_ssize_t start, end = end_slot * self._entry_bytes, length
        if self._map == NULL or self._owned or first_slot >= end_slot:
            return
        start = first_slot * self._entry_bytes
        start -= start % PREFETCH_BYTES  # madvise wants a page-aligned start
        while start < end:
            length = end - start if end - start < PREFETCH_BYTES else PREFETCH_BYTES
            madvise(self._map + start, length, MADV_WILLNEED)
            start += length

    cdef Py_ssize_t _count_entries(self, int fd, Py_ssize_t start) noexcept nogil:
        # Valid entries are a prefix, the zero tail a suffix: binary-search the first zero slot.
        # A probe in a hole of the (sparse, preallocated) file is zero without reading it, so
        # an empty index touches no page and one with entries only pages that hold some: the
        # same probes, and the same answer, as reading every probe through the map.
        cdef Py_ssize_t lo = start, hi = self._map_bytes // self._entry_bytes, mid, i
        cdef const unsigned char *p
        cdef bint zero
        while lo < hi:
            mid = (lo + hi) >> 1
            zero = _slot_in_hole(fd, mid, self._entry_bytes)
            if not zero:
                p = self._map + mid * self._entry_bytes
                zero = True
                for i in range(self._entry_bytes):
                    if p[i] != 0:
                        zero = False
                        break
            if zero:
                hi = mid
            else:
                lo = mid + 1
        return lo

    cdef Py_ssize_t _lower_slot(self, int64_t target) noexcept nogil:
        """Slot of the greatest key <= target, or -1 (AbstractIndex.indexSlotRangeFor).

        Warm-section search, as Kafka's AbstractIndex: indexes are mmapped and almost every
        lookup (in-sync followers, tailing consumers) targets the tail. A plain binary search
        touches pages spread over the whole file, and which pages it touches shifts as the
        index grows, so a lookup can page-fault on a cold page (Kafka saw produce latency jump
        from a few ms to ~1 s). Searching only the last 8 KiB of entries first keeps the pages
        of tail lookups (at most 3 with 4 KiB pages) always warm.
        """
        cdef Py_ssize_t entries = self.entries, first_hot, lo, hi, mid
        if entries == 0:
            return -1
        first_hot = entries - 1 - WARM_SECTION_BYTES // self._entry_bytes
        if first_hot < 0:
            first_hot = 0
        if self._key(first_hot) < target:
            lo, hi = first_hot, entries - 1
        elif self._key(0) > target:
            return -1
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._key(mid) > target:
                hi = mid - 1
            else:
                lo = mid
        return lo

    cdef int _zero_from(self, Py_ssize_t n) except -1:
        # Only the slots of the dropped entries: the tail past them is zero (and a hole).
        if n < self.entries:
            self._prefetch(n, self.entries)
            memset(self._map + n * self._entry_bytes, 0, (self.entries - n) * self._entry_bytes)
            self.entries = n
        return 0

    cdef int _check_writable(self) except -1:
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        if not self.writable:
            raise ValueError(f"index {self.path} was opened read-only")
        return 0

    cdef int _resize(self, Py_ssize_t max_index_bytes, bint drop_entries=False) except -1:
        """Set the file length and remap. ``drop_entries``: cut the file to 0 bytes first, so
        it is all hole (its blocks given back) and no slot is zeroed through the map."""
        cdef Py_ssize_t length = max_index_bytes - max_index_bytes % self._entry_bytes
        cdef int fd
        self._check_writable()
        if length == self._length and not drop_entries:
            return 0
        if self._map != NULL and not drop_entries:
            msync(self._map, self._map_bytes, MS_SYNC)
        fd = c_open(os.fsencode(self.path), O_RDWR, 0)
        if fd < 0:
            raise _os_error(errno, self.path)
        try:
            self._unmap()
            if drop_entries:
                self.entries = 0
                self._reserved_bytes = 0
                if ftruncate(fd, 0) != 0:
                    raise _os_error(errno, self.path)
            if ftruncate(fd, length) != 0:
                raise _os_error(errno, self.path)
            self._remap(fd, length)
        finally:
            c_close(fd)
        if self.entries > self._map_bytes // self._entry_bytes:
            self.entries = self._map_bytes // self._entry_bytes
        return 0

    @property
    def max_entries(self):
        """How many entries the file can hold."""
        return self._length // self._entry_bytes

    @property
    def size_bytes(self):
        """Bytes of valid entries (``entries * entry size``)."""
        return self.entries * self._entry_bytes

    @property
    def closed(self):
        return self._closed

    @property
    def reserved_bytes(self):
        """Bytes at the start of the file whose disk blocks are reserved (the twin's)."""
        return self._reserved_bytes

    def reserve(self, count):
        """Reserve the disk blocks of the next ``count`` entries (and some ahead) before
        anything is written: KafkaStorageError (an OSError with the call's errno) when the
        disk refuses them; no page is touched. ValueError for a negative ``count``,
        TypeError for a non-integer (the twin's rules)."""
        cdef Py_ssize_t end_slot
        self._check_writable()
        if type(count) is not int:  # C-level checks first: the segment calls this per entry
            count = _int_arg(count, "count")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if count > 2147483647:  # past any index (positions are int32): as many as fit
            count = 2147483647
        end_slot = self.entries + <Py_ssize_t>count
        if end_slot * self._entry_bytes > self._reserved_bytes:
            self._reserve_slots(end_slot)

    def is_full(self):
        """True when no entry can be appended."""
        return self.entries >= self._length // self._entry_bytes

    def reset(self):
        """Drop every entry and resize the file to ``max_index_bytes``: the file is cut to 0
        bytes and grown back, all zeros and sparse, without faulting a page in."""
        self._check_writable()
        self._resize(self.max_index_bytes, drop_entries=True)

    def trim(self):
        """Cut the file to the valid entries (run on close and roll)."""
        self._check_writable()
        self._resize(self.entries * self._entry_bytes)

    def resize(self, max_index_bytes):
        """Set the file length to ``max_index_bytes`` rounded down to the entry size and remap.
        Growing adds zero slots; shrinking below the valid entries drops the cut ones."""
        self._check_writable()
        max_index_bytes = _int_arg(max_index_bytes, "max_index_bytes")
        if not 0 <= max_index_bytes <= INT32_MAX_:
            raise ValueError(f"max_index_bytes must be in [0, 2**31), got {max_index_bytes}")
        self._resize(max_index_bytes)

    def flush(self):
        """Write dirty pages of the map to disk (msync)."""
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        if self._map != NULL and self.writable:
            with nogil:
                msync(self._map, self._map_bytes, MS_SYNC)

    def reload(self):
        """Read-only readers: pick up entries (and a new file length) the writer produced."""
        cdef struct_stat st
        cdef int fd
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        if not self.writable:
            self._load_copy()
            return
        fd = c_open(os.fsencode(self.path), O_RDWR, 0)
        if fd < 0:
            raise _os_error(errno, self.path)
        try:
            if fstat(fd, &st) != 0:
                raise _os_error(errno, self.path)
            self._reserved_bytes = 0  # someone else changed the file: know nothing of its blocks
            if st.st_size != self._length:
                self._remap(fd, st.st_size)
            self.entries = self._count_entries(fd, 0)
        finally:
            c_close(fd)

    def close(self):
        """Unmap the file (not trimmed here: the segment trims before closing)."""
        if self._closed:
            return
        self._closed = True
        if self._map != NULL and self.writable:
            msync(self._map, self._map_bytes, MS_SYNC)
        self._unmap()

    def __repr__(self):
        return (f"{type(self).__name__}({self.path!r}, base_offset={self.base_offset}, "
                f"entries={self.entries}, max_entries={self.max_entries})")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


cdef class OffsetIndex(_Index):
    """Offset index of one segment (``<base>.index``); see :class:`seglog._contract.OffsetIndex`.

    ``OffsetIndex(path, base_offset, *, max_index_bytes=10485760, writable=True)``: entries map
    an absolute offset (stored relative to ``base_offset``) to the byte position of its batch.
    Not thread-safe. Errors: InvalidOffsetError, IndexFullError, CorruptIndexError.
    """

    def __cinit__(self, *args, **kwargs):
        self._entry_bytes = OFFSET_ENTRY_BYTES

    cdef int64_t _key(self, Py_ssize_t n) noexcept nogil:
        return self._base + load_i32(self._map + n * OFFSET_ENTRY_BYTES)

    @property
    def last_offset(self):
        """Offset of the last entry; ``base_offset`` when empty."""
        if self.entries == 0:
            return self.base_offset
        return self._key(self.entries - 1)

    def entry(self, n):
        """Entry ``n`` as ``(offset, position)``; IndexError outside ``[0, entries)``."""
        cdef Py_ssize_t slot
        n = _int_arg(n, "n")
        if not 0 <= n < self.entries:
            raise IndexError(f"index entry {n} out of range [0, {self.entries})")
        slot = n
        return self._key(slot), load_i32(self._map + slot * OFFSET_ENTRY_BYTES + 4)

    cdef int append_entry(self, int64_t offset, int64_t position) except -1:
        cdef int64_t relative_offset = offset - self._base
        cdef unsigned char *p
        self._check_writable()
        if relative_offset < 0 or relative_offset > INT32_MAX_:
            raise InvalidOffsetError(
                f"offset {offset} is not storable in the index of segment {self.base_offset}")
        if position < 0 or position > INT32_MAX_:
            raise InvalidOffsetError(f"position {position} out of int32 range")
        if self.entries > 0 and offset <= self._key(self.entries - 1):
            raise InvalidOffsetError(
                f"offset {offset} is not larger than the last index entry "
                f"{self._key(self.entries - 1)} ({self.path})")
        if self.entries >= self._map_bytes // OFFSET_ENTRY_BYTES:
            raise IndexFullError(f"offset index {self.path} is full ({self.entries} entries)")
        if relative_offset == 0 and position == 0:
            return 0  # equivalent to the fallback answer; an all-zero slot ends the index
        if (self.entries + 1) * OFFSET_ENTRY_BYTES > self._reserved_bytes:
            self._reserve_slots(self.entries + 1)  # a store into a hole of a full disk: SIGBUS
        p = self._map + self.entries * OFFSET_ENTRY_BYTES
        store_u32(p, <uint32_t>relative_offset)
        store_u32(p + 4, <uint32_t>position)
        self.entries += 1
        return 0

    def append(self, offset, position):
        """Add ``(offset, position)``. InvalidOffsetError unless the index is empty or ``offset >
        last_offset``, and both fit int32 (offset relative to base); IndexFullError when full.
        TypeError for non-integers; out-of-range ints are InvalidOffsetError, as in the twin."""
        self._check_writable()
        offset = _int_arg(offset, "offset")
        position = _int_arg(position, "position")
        if not 0 <= offset - self.base_offset <= INT32_MAX_:
            raise InvalidOffsetError(
                f"offset {offset} is not storable in the index of segment {self.base_offset}")
        if not 0 <= position <= INT32_MAX_:
            raise InvalidOffsetError(f"position {position} out of int32 range")
        self.append_entry(offset, position)

    cdef inline Py_ssize_t _lower_offset_slot(self, int64_t target) noexcept nogil:
        """_lower_slot (the same warm-section search, step for step, so the same slot for any
        bytes) with the offset keys read in place: no virtual _key call per step (a point
        read's lookup runs this ~14 times per read)."""
        cdef Py_ssize_t entries = self.entries, first_hot, lo, hi, mid
        cdef const unsigned char *keys = self._map
        cdef int64_t base = self._base
        if entries == 0:
            return -1
        first_hot = entries - 1 - WARM_SECTION_BYTES // OFFSET_ENTRY_BYTES
        if first_hot < 0:
            first_hot = 0
        if base + load_i32(keys + first_hot * OFFSET_ENTRY_BYTES) < target:
            lo, hi = first_hot, entries - 1
        elif base + load_i32(keys) > target:
            return -1
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if base + load_i32(keys + mid * OFFSET_ENTRY_BYTES) > target:
                hi = mid - 1
            else:
                lo = mid
        return lo

    cdef int64_t lookup_position(self, int64_t target_offset, int64_t *found_offset) noexcept nogil:
        cdef Py_ssize_t slot = self._lower_offset_slot(target_offset)
        if slot < 0:
            found_offset[0] = self._base
            return 0
        found_offset[0] = self._key(slot)
        return load_i32(self._map + slot * OFFSET_ENTRY_BYTES + 4)

    def lookup(self, target_offset):
        """``(offset, position)`` of the entry with the greatest offset <= ``target_offset``,
        or ``(base_offset, 0)`` when there is none. The GIL is released for the search. Any
        int target; TypeError for a non-integer. The entry is returned as stored: the segment
        checks it against the ``.log`` before use."""
        cdef int64_t target, found, position
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        target_offset = _int_arg(target_offset, "target_offset")
        if target_offset < self.base_offset:
            return self.base_offset, 0
        target = min(target_offset, 2**63 - 1)
        with nogil:
            position = self.lookup_position(target, &found)
        return found, position

    def truncate_to(self, offset):
        """Drop every entry with offset >= ``offset`` (Kafka's OffsetIndex.truncateTo). Any int;
        TypeError for a non-integer."""
        cdef Py_ssize_t slot, keep
        self._check_writable()
        offset = _clamp64(_int_arg(offset, "offset"))
        if offset <= self.base_offset:
            keep = 0
        else:
            slot = self._lower_slot(min(offset, 2**63 - 1))
            if slot < 0:
                keep = 0
            elif self._key(slot) == offset:
                keep = slot
            else:
                keep = slot + 1
        self._zero_from(keep)

    def sanity_check(self, *, log_size_bytes=None):
        """Check every entry before it is trusted (the pure twin's rules): CorruptIndexError
        if the file length is not a multiple of 8, relative offsets are not strictly
        increasing from >= 0, positions are negative or not strictly increasing, or (with
        ``log_size_bytes``) a position is not below the ``.log`` size. One C loop."""
        cdef Py_ssize_t n, bad = -1
        cdef int32_t relative_offset = 0, position = 0, previous_offset = -1, previous_position = -1
        cdef int64_t limit = <int64_t>INT32_MAX_ + 1
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        if self._length % OFFSET_ENTRY_BYTES != 0:
            raise CorruptIndexError(
                f"index file {self.path} has length {self._length}, not a multiple of 8")
        if log_size_bytes is not None:
            limit = min(max(_int_arg(log_size_bytes, "log_size_bytes"), 0), _INT32_LIMIT)
        with nogil:
            self._prefetch(0, self.entries)
            for n in range(self.entries):
                relative_offset = load_i32(self._map + n * OFFSET_ENTRY_BYTES)
                position = load_i32(self._map + n * OFFSET_ENTRY_BYTES + 4)
                if (relative_offset <= previous_offset or position <= previous_position
                        or position >= limit):
                    bad = n
                    break
                previous_offset, previous_position = relative_offset, position
        if bad >= 0:
            raise CorruptIndexError(
                f"corrupt index {self.path}: entry {bad} = ({relative_offset}, {position})")


cdef class TimeIndex(_Index):
    """Time index of one segment (``<base>.timeindex``); see :class:`seglog._contract.TimeIndex`.

    An entry ``(timestamp_ms, offset)`` means: the largest timestamp seen in batches up to
    ``offset`` is ``timestamp_ms``. The last slot is reserved for the roll/close entry.
    """

    def __cinit__(self, *args, **kwargs):
        self._entry_bytes = TIME_ENTRY_BYTES

    cdef int64_t _key(self, Py_ssize_t n) noexcept nogil:
        return load_i64(self._map + n * TIME_ENTRY_BYTES)

    cdef inline int64_t _offset_at(self, Py_ssize_t n) noexcept nogil:
        return self._base + load_i32(self._map + n * TIME_ENTRY_BYTES + 8)

    def entry(self, n):
        """Entry ``n`` as ``(timestamp_ms, offset)``; IndexError outside ``[0, entries)``."""
        cdef Py_ssize_t slot
        n = _int_arg(n, "n")
        if not 0 <= n < self.entries:
            raise IndexError(f"index entry {n} out of range [0, {self.entries})")
        slot = n
        return self._key(slot), self._offset_at(slot)

    cdef int64_t last_timestamp(self) noexcept nogil:
        if self.entries == 0:
            return NO_TIMESTAMP_
        return self._key(self.entries - 1)

    def last_entry(self):
        """The last ``(timestamp_ms, offset)``, or ``(-1, base_offset)`` when empty."""
        if self.entries == 0:
            return NO_TIMESTAMP_, self.base_offset
        return self._key(self.entries - 1), self._offset_at(self.entries - 1)

    @property
    def last_offset(self):
        """Offset of the last entry; ``base_offset`` when empty."""
        return self.last_entry()[1]

    def is_full(self):
        """``entries >= max_entries - 1``: the last slot is kept for the roll/close entry."""
        return self.entries >= self._length // TIME_ENTRY_BYTES - 1

    cdef int maybe_append_entry(self, int64_t timestamp_ms, int64_t offset,
                                bint skip_full_check) except -1:
        cdef int64_t relative_offset = offset - self._base
        cdef int64_t last_timestamp_ms = self.last_timestamp()
        cdef unsigned char *p
        self._check_writable()
        if not skip_full_check and self.entries >= self._map_bytes // TIME_ENTRY_BYTES - 1:
            raise IndexFullError(f"time index {self.path} is full ({self.entries} entries)")
        if relative_offset < 0 or relative_offset > INT32_MAX_:
            raise InvalidOffsetError(
                f"offset {offset} is not storable in the time index of segment "
                f"{self.base_offset}")
        if self.entries > 0 and offset < self._offset_at(self.entries - 1):
            raise InvalidOffsetError(
                f"offset {offset} is below the last time index entry's offset "
                f"{self._offset_at(self.entries - 1)} ({self.path})")
        if self.entries > 0 and timestamp_ms < last_timestamp_ms:
            raise ValueError(
                f"timestamp {timestamp_ms} is below the last time index entry's timestamp "
                f"{last_timestamp_ms} ({self.path})")
        if timestamp_ms <= last_timestamp_ms:
            return 0
        if self.entries >= self._map_bytes // TIME_ENTRY_BYTES:
            raise IndexFullError(f"time index {self.path} has no slot left")
        if timestamp_ms == 0 and relative_offset == 0:
            return 0  # equivalent to the fallback answer; an all-zero slot ends the index
        if (self.entries + 1) * TIME_ENTRY_BYTES > self._reserved_bytes:
            self._reserve_slots(self.entries + 1)  # a store into a hole of a full disk: SIGBUS
        p = self._map + self.entries * TIME_ENTRY_BYTES
        store_i64(p, timestamp_ms)
        store_u32(p + 8, <uint32_t>relative_offset)
        self.entries += 1
        return 0

    def maybe_append(self, timestamp_ms, offset, *, skip_full_check=False):
        """Add ``(timestamp_ms, offset)`` if ``timestamp_ms`` is larger than the last entry's (or
        the index is empty and it is > -1); otherwise do nothing (Kafka's maybeAppend).
        IndexFullError when full (unless ``skip_full_check``); InvalidOffsetError for an offset
        below the last entry's or out of int32 range; ValueError for a smaller timestamp or
        one outside [-1, 2**63); TypeError for non-integers."""
        self._check_writable()
        timestamp_ms = _int_arg(timestamp_ms, "timestamp_ms")
        offset = _int_arg(offset, "offset")
        if not -1 <= timestamp_ms <= _INT64_MAX:
            raise ValueError(f"timestamp_ms must be in [-1, 2**63), got {timestamp_ms}")
        if not skip_full_check and self.entries >= self._map_bytes // TIME_ENTRY_BYTES - 1:
            raise IndexFullError(f"time index {self.path} is full ({self.entries} entries)")
        if not 0 <= offset - self.base_offset <= INT32_MAX_:
            raise InvalidOffsetError(
                f"offset {offset} is not storable in the time index of segment "
                f"{self.base_offset}")
        self.maybe_append_entry(timestamp_ms, offset, skip_full_check)

    cdef int64_t lookup_offset(self, int64_t timestamp_ms, int64_t *found_timestamp_ms) noexcept nogil:
        cdef Py_ssize_t slot = self._lower_slot(timestamp_ms), lo, hi, mid
        cdef int64_t key
        if slot < 0:
            found_timestamp_ms[0] = NO_TIMESTAMP_
            return self._base
        if slot > 0 and self._key(slot - 1) == self._key(slot):
            key, lo, hi = self._key(slot), 0, slot  # the first slot with this key
            while lo < hi:
                mid = (lo + hi) >> 1
                if self._key(mid) < key:
                    lo = mid + 1
                else:
                    hi = mid
            slot = lo
        found_timestamp_ms[0] = self._key(slot)
        return self._offset_at(slot)

    def lookup(self, timestamp_ms):
        """``(timestamp_ms, offset)`` of the entry with the greatest timestamp <= the target,
        or ``(-1, base_offset)``. The GIL is released for the search. Among equal timestamps
        (timestamps are only required to be non-decreasing) the first, lowest offset is
        returned. Any int target (clamped to int64); TypeError for a non-integer."""
        cdef int64_t target, found, offset
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        target = _clamp64(_int_arg(timestamp_ms, "timestamp_ms"))
        with nogil:
            offset = self.lookup_offset(target, &found)
        return found, offset

    def truncate_to(self, offset):
        """Drop every entry whose offset >= ``offset`` (Kafka's TimeIndex.truncateTo). Any int;
        TypeError for a non-integer."""
        cdef Py_ssize_t lo = 0, hi, mid
        self._check_writable()
        offset = _int_arg(offset, "offset")
        hi = self.entries
        # Offsets may repeat in a time index: find the first slot with offset >= target.
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._offset_at(mid) < offset:
                lo = mid + 1
            else:
                hi = mid
        self._zero_from(lo)

    def sanity_check(self, *, next_offset=None):
        """Check every entry before it is trusted (the pure twin's rules): CorruptIndexError if
        the file length is not a multiple of 12, a timestamp is below -1 or below the one
        before, a relative offset is negative or below the one before, or (with
        ``next_offset``, the segment's) an entry's offset is not below ``next_offset``."""
        cdef Py_ssize_t n, bad = -1
        cdef int64_t timestamp_ms = 0, previous_timestamp_ms = NO_TIMESTAMP_
        cdef int32_t relative_offset = 0, previous_relative = 0
        cdef int64_t limit = <int64_t>INT32_MAX_ + 1
        if self._closed:
            raise ValueError(f"index {self.path} is closed")
        if self._length % TIME_ENTRY_BYTES != 0:
            raise CorruptIndexError(
                f"time index file {self.path} has length {self._length}, not a multiple of 12")
        if next_offset is not None:
            limit = min(max(_int_arg(next_offset, "next_offset") - self.base_offset, 0),
                        _INT32_LIMIT)
        with nogil:
            self._prefetch(0, self.entries)
            for n in range(self.entries):
                timestamp_ms = self._key(n)
                relative_offset = load_i32(self._map + n * TIME_ENTRY_BYTES + 8)
                if (relative_offset < previous_relative or timestamp_ms < previous_timestamp_ms
                        or relative_offset >= limit):
                    bad = n
                    break
                previous_timestamp_ms, previous_relative = timestamp_ms, relative_offset
        if bad >= 0:
            raise CorruptIndexError(
                f"corrupt time index {self.path}: entry {bad} = "
                f"({timestamp_ms}, {relative_offset})")


cdef int64_t offset_lookup(object index, int64_t target_offset,
                           int64_t *found_offset) except? -2:
    """``OffsetIndex.lookup`` for seglog._native.segment (cimported through index.pxd): the
    position, with the entry's offset in
    ``found_offset``, and no tuple. The GIL is kept: a point read's search over a mapped
    index takes ~50 ns, less than releasing and re-taking the GIL."""
    cdef OffsetIndex self = <OffsetIndex?>index
    if self._closed:
        raise ValueError(f"index {self.path} is closed")
    if target_offset < self._base:
        found_offset[0] = self._base
        return 0
    return self.lookup_position(target_offset, found_offset)


cdef int offset_append(object index, int64_t offset, int64_t position) except -1:
    """``OffsetIndex.append`` for seglog._native.segment (cimported through index.pxd), with
    the same checks and errors (``append_entry`` makes them all) and without the Python call
    and its int conversions: the segment adds an entry per ``index.interval.bytes`` written,
    about one per produced batch."""
    return (<OffsetIndex?>index).append_entry(offset, position)


cdef int time_maybe_append(object index, int64_t timestamp_ms, int64_t offset) except -1:
    """``TimeIndex.maybe_append`` for seglog._native.segment (cimported through index.pxd), as
    :func:`offset_append`: the same checks and errors (a timestamp below -1 is ValueError
    here, the rest ``maybe_append_entry``'s)."""
    if timestamp_ms < -1:
        raise ValueError(f"timestamp_ms must be in [-1, 2**63), got {timestamp_ms}")
    return (<TimeIndex?>index).maybe_append_entry(timestamp_ms, offset, False)


cdef int64_t offset_lookup_ahead(object index, int64_t target_offset, int64_t *found_offset,
                                 int64_t *ahead) except? -2:
    """``offset_lookup``, and the two entries after the one found, as a hint for prefetching
    (cimported through index.pxd): ``ahead[0]``, ``ahead[1]`` the next entry's position and
    offset, ``ahead[2]`` the position of the entry after it; -1 where there is no such entry
    (nor any entry at or below the target). The entries are as stored, unchecked: the caller
    may only use them to guess which memory it will touch, never to decide what it reads."""
    cdef OffsetIndex self = <OffsetIndex?>index
    cdef Py_ssize_t slot
    if self._closed:
        raise ValueError(f"index {self.path} is closed")
    ahead[0] = ahead[1] = ahead[2] = -1
    if target_offset < self._base:
        found_offset[0] = self._base
        return 0
    slot = self._lower_offset_slot(target_offset)
    if slot < 0:
        found_offset[0] = self._base
        return 0
    if slot + 1 < self.entries:
        ahead[0] = load_i32(self._map + (slot + 1) * OFFSET_ENTRY_BYTES + 4)
        ahead[1] = self._base + load_i32(self._map + (slot + 1) * OFFSET_ENTRY_BYTES)
        if slot + 2 < self.entries:
            ahead[2] = load_i32(self._map + (slot + 2) * OFFSET_ENTRY_BYTES + 4)
    found_offset[0] = self._base + load_i32(self._map + slot * OFFSET_ENTRY_BYTES)
    return load_i32(self._map + slot * OFFSET_ENTRY_BYTES + 4)
