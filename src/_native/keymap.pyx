# cython: language_level=3
"""The cleaner's offset map in C: the twin of :mod:`seglog.pure.keymap` (read that module's
docstring for the design: XXH64 of the key, double hashing over a prime number of slots, two
numpy arrays of 16 bytes per slot, a 0.9 load factor, ``put`` returning False when full).

What is native here: the hash (``xxh64.h``), the probe loop, and ``put_batch_keys``, which
walks a batch's record area in C (varint framing only; values and headers are skipped, never
decoded) and puts every keyed record without creating a Python object per record. Compressed
record areas are decompressed first through :mod:`seglog.compression` (one Python call per
batch). Both twins fill the table identically, slot by slot.
"""

cimport cython
from libc.stdint cimport int64_t, uint64_t, uint32_t, int32_t
from libc.string cimport memcpy
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE


# seglog_xxh64 is declared in this module's .pxd (src/seglog/_native/keymap.pxd).
from varint cimport read_varint, read_varlong

from seglog import compression as _compression
from seglog.errors import CorruptRecordError
from seglog.format import (
    REASON_BAD_MAGIC,
    REASON_BAD_RECORDS,
    REASON_TRUNCATED,
)

cdef enum:
    _SLOT_BYTES = 16
    _LOAD_NUM = 9
    _LOAD_DEN = 10
    _EMPTY = -1
    # RecordBatch v2 header positions; tests/test_keymap.py asserts them against seglog.format.
    _BATCH_LENGTH_POSITION = 8
    _MAGIC_POSITION = 16
    _ATTRIBUTES_POSITION = 21
    _BASE_TIMESTAMP_POSITION = 27
    _RECORDS_COUNT_POSITION = 57
    _RECORD_BATCH_OVERHEAD = 61
    _LOG_OVERHEAD = 12
    _COMPRESSION_MASK = 0x07
    _CONTROL_FLAG = 0x20
    _DELETE_HORIZON_FLAG = 0x40
    _MAGIC_V2 = 2
    # _put_records results
    _ALL_PUT = 0
    _FULL = 1
    _BAD_RECORDS = -1

SLOT_BYTES = _SLOT_BYTES
LOAD_FACTOR_NUMERATOR = _LOAD_NUM
LOAD_FACTOR_DENOMINATOR = _LOAD_DEN
EMPTY_OFFSET = _EMPTY
HEADER_POSITIONS = {
    "batch_length": _BATCH_LENGTH_POSITION,
    "magic": _MAGIC_POSITION,
    "attributes": _ATTRIBUTES_POSITION,
    "base_timestamp": _BASE_TIMESTAMP_POSITION,
    "records_count": _RECORDS_COUNT_POSITION,
    "overhead": _RECORD_BATCH_OVERHEAD,
    "control_flag": _CONTROL_FLAG,
    "delete_horizon_flag": _DELETE_HORIZON_FLAG,
}

_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _is_prime(n):
    """Deterministic Miller-Rabin (same as the pure twin)."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x == 1 or x == n - 1:
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def slots_for_memory(memory_bytes_max):
    """Slot count for ``memory_bytes_max`` bytes: the largest prime <= memory_bytes_max // 16
    (0 when there is none)."""
    n = int(memory_bytes_max) // _SLOT_BYTES
    while n >= 2 and not _is_prime(n):
        n -= 1
    return n if n >= 2 else 0


def max_entries_for_slots(slots):
    """How many keys a map of ``slots`` slots holds: ``slots * 0.9`` rounded down."""
    return slots * _LOAD_NUM // _LOAD_DEN


def key_hash(key):
    """XXH64 (seed 0) of ``key`` (any C-contiguous bytes-like): the hash the map stores."""
    cdef Py_buffer buf
    cdef uint64_t h
    PyObject_GetBuffer(key, &buf, PyBUF_SIMPLE)
    try:
        h = seglog_xxh64(<const unsigned char *>buf.buf, <size_t>buf.len, 0)
    finally:
        PyBuffer_Release(&buf)
    return h


cdef inline int64_t _read_i64_be(const unsigned char *p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline int32_t _read_i32_be(const unsigned char *p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) |
                     (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef class KeyMap:
    """A fixed-size map from record key to offset; see :class:`seglog.pure.keymap.KeyMap` for
    the contract (same constructor, attributes, methods, results and errors). Not thread-safe;
    ``put_batch_keys`` releases the GIL while it walks a record area."""

    cdef readonly object hashes       # numpy uint64[slots]; owns the memory _hashes points to
    cdef readonly object offsets      # numpy int64[slots]; -1 marks an empty slot
    cdef uint64_t *_hashes
    cdef int64_t *_offsets
    cdef readonly Py_ssize_t memory_bytes_max
    cdef readonly Py_ssize_t slots
    cdef readonly Py_ssize_t max_entries
    cdef readonly Py_ssize_t size
    cdef readonly int64_t latest_offset
    cdef readonly int64_t lookups
    cdef readonly int64_t probes

    def __cinit__(self, memory_bytes_max):
        slots = slots_for_memory(memory_bytes_max)
        if slots < 2 or max_entries_for_slots(slots) < 1:
            raise ValueError(
                f"memory_bytes_max={memory_bytes_max} is too small for a key map: "
                f"at least {2 * _SLOT_BYTES} bytes are needed"
            )
        self.memory_bytes_max = int(memory_bytes_max)
        self.slots = slots
        self.max_entries = max_entries_for_slots(slots)
        import numpy as np  # on first use: the broker loads this module, not numpy
        self.hashes = np.zeros(slots, dtype=np.uint64)
        self.offsets = np.full(slots, _EMPTY, dtype=np.int64)
        cdef uint64_t[::1] hv = self.hashes
        cdef int64_t[::1] ov = self.offsets
        self._hashes = &hv[0]
        self._offsets = &ov[0]
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    # --- the table ---------------------------------------------------------------------------

    @cython.cdivision(True)
    cdef Py_ssize_t _find(self, uint64_t h) noexcept nogil:
        cdef uint64_t slots = <uint64_t>self.slots
        cdef uint64_t position = h % slots
        cdef uint64_t step = 1 + (h >> 32) % (slots - 1)
        cdef uint64_t i
        self.lookups += 1
        for i in range(slots):
            if self._offsets[position] == _EMPTY or self._hashes[position] == h:
                return <Py_ssize_t>position
            self.probes += 1
            position += step
            if position >= slots:
                position -= slots
        return -1  # unreachable at load <= 0.9

    cdef bint _put_hash(self, uint64_t h, int64_t offset) noexcept nogil:
        cdef Py_ssize_t position = self._find(h)
        if self._offsets[position] == _EMPTY:
            if self.size >= self.max_entries:
                return False
            self._hashes[position] = h
            self.size += 1
        self._offsets[position] = offset
        self.latest_offset = offset
        return True

    def put_hash(self, uint64_t h, int64_t offset):
        """``put`` for a key whose hash is ``h`` (see ``key_hash``)."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        return self._put_hash(h, offset)

    def put(self, key, int64_t offset):
        """Record ``offset`` as the latest offset of ``key`` (bytes-like). True when stored,
        False when ``key`` is new and the map is full (nothing changes). ValueError for a
        negative offset."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        return self._put_hash(key_hash(key), offset)

    def get(self, key):
        """The offset stored for ``key`` (bytes-like), or -1 when it is absent."""
        return self._offsets[self._find(key_hash(key))]

    def update_latest_offset(self, int64_t offset):
        """Force ``latest_offset`` (the cleaner moves it past batches and offset gaps)."""
        self.latest_offset = offset

    def clear(self):
        """Empty the map (keeps its memory); resets ``latest_offset`` and the counters."""
        self.hashes.fill(0)
        self.offsets.fill(_EMPTY)
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    @property
    def utilization(self):
        """``size / slots``: how full the table is (at most 0.9)."""
        return self.size / self.slots

    def __len__(self):
        return self.size

    # --- batches -----------------------------------------------------------------------------

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _put_records(self, const unsigned char *area, Py_ssize_t area_bytes,
                          int64_t base_offset, Py_ssize_t record_count,
                          int64_t start_offset) noexcept nogil:
        cdef Py_ssize_t pos = 0, record_end, i
        cdef int64_t value
        cdef int32_t length, offset_delta, key_length
        for i in range(record_count):
            pos = read_varint(area, pos, area_bytes, &length)
            if pos < 0 or length < 0 or length > area_bytes - pos:
                return _BAD_RECORDS
            record_end = pos + length
            pos += 1  # attributes
            pos = read_varlong(area, pos, record_end, &value)  # timestamp delta
            if pos < 0:
                return _BAD_RECORDS
            pos = read_varint(area, pos, record_end, &offset_delta)
            if pos < 0:
                return _BAD_RECORDS
            pos = read_varint(area, pos, record_end, &key_length)
            if pos < 0 or key_length < -1 or key_length > record_end - pos:
                return _BAD_RECORDS
            if key_length >= 0 and base_offset + offset_delta >= start_offset:
                if not self._put_hash(seglog_xxh64(area + pos, <size_t>key_length, 0),
                                      base_offset + offset_delta):
                    return _FULL
            pos = record_end
        return _ALL_PUT

    cdef object _record_area(self, const unsigned char *p, Py_ssize_t length, object data,
                             const char *who):
        """Check the batch header at ``p``; return None for a control batch, else the
        decompressed record area (bytes) for a compressed batch, or False when the records
        lie uncompressed at p + 61."""
        cdef Py_ssize_t batch_bytes
        cdef int codec
        if length < _RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"{who.decode()}: data does not hold a whole batch",
                                     reason=REASON_TRUNCATED, position=0)
        batch_bytes = <Py_ssize_t>_read_i32_be(p + _BATCH_LENGTH_POSITION) + _LOG_OVERHEAD
        if batch_bytes < _RECORD_BATCH_OVERHEAD or batch_bytes > length:
            raise CorruptRecordError(f"{who.decode()}: data does not hold a whole batch",
                                     reason=REASON_TRUNCATED, position=0)
        if p[_MAGIC_POSITION] != _MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {p[_MAGIC_POSITION]}",
                                     reason=REASON_BAD_MAGIC, position=0)
        if p[_ATTRIBUTES_POSITION + 1] & _CONTROL_FLAG:
            return None
        codec = p[_ATTRIBUTES_POSITION + 1] & _COMPRESSION_MASK
        if codec == 0:
            return False
        return _compression.decompress(
            codec, memoryview(data).cast("B")[_RECORD_BATCH_OVERHEAD:batch_bytes])

    def put_batch_keys(self, data, *, int64_t start_offset=0):
        """Put every keyed record with ``offset >= start_offset`` of the batch at the start of
        ``data``; see :meth:`seglog.pure.keymap.KeyMap.put_batch_keys`. True when all were put,
        False when the map filled on the way. CorruptRecordError for a truncated batch, a
        magic other than 2 or malformed record framing."""
        cdef Py_buffer buf
        cdef const unsigned char *p
        cdef const unsigned char *area
        cdef Py_ssize_t area_bytes, record_count
        cdef int64_t base_offset
        cdef int rc
        PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
        try:
            p = <const unsigned char *>buf.buf
            decompressed = self._record_area(p, buf.len, data, b"put_batch_keys")
            if decompressed is None:
                return True
            base_offset = _read_i64_be(p)
            record_count = _read_i32_be(p + _RECORDS_COUNT_POSITION)
            if decompressed is False:
                area = p + _RECORD_BATCH_OVERHEAD
                area_bytes = _read_i32_be(p + _BATCH_LENGTH_POSITION) + _LOG_OVERHEAD \
                    - _RECORD_BATCH_OVERHEAD
            else:
                area = <const unsigned char *>PyBytes_AS_STRING(decompressed)
                area_bytes = PyBytes_GET_SIZE(decompressed)
            with nogil:
                rc = self._put_records(area, area_bytes, base_offset, record_count, start_offset)
        finally:
            PyBuffer_Release(&buf)
        if rc == _BAD_RECORDS:
            raise CorruptRecordError("put_batch_keys: malformed record framing",
                                     reason=REASON_BAD_RECORDS, position=0)
        return rc == _ALL_PUT

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef Py_ssize_t _retain(self, const unsigned char *area, Py_ssize_t area_bytes,
                            int64_t base_offset, Py_ssize_t record_count, int64_t horizon_ms,
                            int64_t now_ms, unsigned char *mask,
                            bint *tombstone_kept) noexcept nogil:
        """Fill mask[0:record_count]; return the kept count, or -1 for bad framing."""
        cdef Py_ssize_t pos = 0, record_end, i, kept = 0, key_pos
        cdef int64_t value, offset, found
        cdef int32_t length, offset_delta, key_length, value_length
        cdef bint keep
        for i in range(record_count):
            pos = read_varint(area, pos, area_bytes, &length)
            if pos < 0 or length < 0 or length > area_bytes - pos:
                return -1
            record_end = pos + length
            pos += 1  # attributes
            pos = read_varlong(area, pos, record_end, &value)  # timestamp delta
            if pos < 0:
                return -1
            pos = read_varint(area, pos, record_end, &offset_delta)
            if pos < 0:
                return -1
            pos = read_varint(area, pos, record_end, &key_length)
            if pos < 0 or key_length < -1 or key_length > record_end - pos:
                return -1
            offset = base_offset + offset_delta
            if key_length < 0:
                keep = offset > self.latest_offset
                value_length = 0
            else:
                key_pos = pos
                pos = read_varint(area, pos + key_length, record_end, &value_length)
                if pos < 0:
                    return -1
                if offset > self.latest_offset:
                    keep = True
                else:
                    found = self._offsets[self._find(
                        seglog_xxh64(area + key_pos, <size_t>key_length, 0))]
                    keep = offset >= found and (
                        value_length >= 0 or horizon_ms < 0 or now_ms < horizon_ms)
            mask[i] = keep
            if keep:
                kept += 1
                if value_length < 0:
                    tombstone_kept[0] = True
            pos = record_end
        return kept

    def retain_mask(self, data, *, int64_t now_ms):
        """Which records of the batch at the start of ``data`` the cleaner keeps; see
        :meth:`seglog.pure.keymap.KeyMap.retain_mask`. Returns ``(mask, kept_count,
        tombstone_kept)``."""
        cdef Py_buffer buf
        cdef const unsigned char *p
        cdef const unsigned char *area
        cdef Py_ssize_t area_bytes, record_count, kept
        cdef int64_t base_offset, horizon_ms = -1
        cdef bint tombstone_kept = False
        cdef unsigned char[::1] mask_view
        cdef unsigned char *mask_ptr = NULL
        PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
        try:
            p = <const unsigned char *>buf.buf
            decompressed = self._record_area(p, buf.len, data, b"retain_mask")
            record_count = _read_i32_be(p + _RECORDS_COUNT_POSITION)
            if record_count < 0:
                raise CorruptRecordError("retain_mask: negative record count",
                                         reason=REASON_BAD_RECORDS, position=0)
            import numpy as np
            mask = np.ones(record_count, dtype=np.bool_)
            if decompressed is None:
                return mask, record_count, False
            mask_view = mask.view(np.uint8)
            if record_count > 0:
                mask_ptr = &mask_view[0]
            base_offset = _read_i64_be(p)
            if p[_ATTRIBUTES_POSITION + 1] & _DELETE_HORIZON_FLAG:
                horizon_ms = _read_i64_be(p + _BASE_TIMESTAMP_POSITION)
            if decompressed is False:
                area = p + _RECORD_BATCH_OVERHEAD
                area_bytes = _read_i32_be(p + _BATCH_LENGTH_POSITION) + _LOG_OVERHEAD \
                    - _RECORD_BATCH_OVERHEAD
            else:
                area = <const unsigned char *>PyBytes_AS_STRING(decompressed)
                area_bytes = PyBytes_GET_SIZE(decompressed)
            with nogil:
                kept = self._retain(area, area_bytes, base_offset, record_count, horizon_ms,
                                    now_ms, mask_ptr, &tombstone_kept)
        finally:
            PyBuffer_Release(&buf)
        if kept < 0:
            raise CorruptRecordError("retain_mask: malformed record framing",
                                     reason=REASON_BAD_RECORDS, position=0)
        return mask, kept, tombstone_kept
