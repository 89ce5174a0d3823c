# cython: language_level=3
"""Kafka RecordBatch v2 encode and decode in C: the native twin of ``seglog.pure.codec``.

Same names, same arguments, byte-identical batches and the same exception types as the twin,
which is the readable reference (its docstrings explain every deterministic choice). What this
module adds is speed:

* ``encode_batch`` sizes every record in a first pass (pointers and lengths gathered into C
  arrays), allocates the output ``bytes`` once and writes header, varints and payloads into it;
  CRC-32C is computed in C (SSE4.2). From a list of ``bytes`` there is no Python call per record;
  from numpy inputs (2-D uint8, or ``(data, lengths)``) there is no Python object per record
  and the sizing, copy and CRC loops run without the GIL.
* ``iter_batches`` reads headers only. ``Batch.records()`` parses in C and creates one
  ``Record`` (a freelisted cdef class built without ``__init__``) plus its key/value ``bytes``
  per record. ``decode_columns`` parses straight into numpy arrays without the GIL (large
  inputs on two threads).
* Compression goes through ``seglog.compression`` (one Python call per batch), exactly as the
  twin, so both write identical compressed bytes and decompress with the same bounds.
* The record decoders check the CRC32C first (``check_crcs=True``; once per Batch; the GIL is
  released for batches of 32 KiB or more, and the two-thread ``decode_columns`` hashes each
  batch on the thread that parses it). Every numeric argument is checked as a Python int
  before any C conversion, so no OverflowError escapes (the twin's rules, see its docstring).

Thread-safety: the only module state is the spare column blocks of ``decode_columns``
(touched with the GIL held). A ``Batch`` (and ``Columns`` over an uncompressed buffer) holds
a buffer export of the iterated object: while it lives, a bytearray cannot be resized and an
mmap cannot be closed.
"""

cimport cython
from cpython.buffer cimport (
    PyBUF_FULL_RO,
    PyBUF_SIMPLE,
    PyBuffer_IsContiguous,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, _Py_REFCNT
from cpython.object cimport PyTypeObject
from cpython.tuple cimport PyTuple_SET_ITEM

cdef extern from "Python.h":
    PyObject *PyType_GenericAlloc(PyTypeObject *cls, Py_ssize_t items) except NULL
    void PyObject_GC_UnTrack(void *op)
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from seglog._native._crc32c cimport seglog_crc32c
from _bigendian cimport *
from varint cimport *
from _records cimport *

import operator
import sys
import time

from seglog import compression as _compression
from seglog.compression import DECOMPRESSED_BYTES_MAX_DEFAULT, check_max_decompressed_bytes
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from seglog.format import (
    COMPRESSION_NAMES,
    CONTROL_KEY,
    END_TXN_MARKER_VALUE,
    REASON_BAD_LAST_OFFSET_DELTA,
    REASON_BAD_MAGIC,
    REASON_BATCH_TOO_LARGE,
    REASON_BATCH_TOO_SMALL,
    REASON_CRC_MISMATCH,
    REASON_OFFSETS_NOT_INCREASING,
    REASON_TRUNCATED,
)

# numpy is imported on first use, not with this module: the wire broker loads the codec but
# no numpy column path, and numpy alone is ~14 MiB of its memory. An object cannot be an
# ndarray while numpy is not loaded, which is what _is_ndarray relies on.
cdef object _numpy_module = None


cdef object _np():
    global _numpy_module
    if _numpy_module is None:
        import numpy
        _numpy_module = numpy
    return _numpy_module


cdef inline bint _is_ndarray(object value):
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)



cdef extern from "Python.h":
    # Borrowed-pointer variants (no reference counting in the hot loops).
    PyObject **_seq_items "PySequence_Fast_ITEMS"(object seq)
    bint _is_bytes_exact "PyBytes_CheckExact"(PyObject *o) nogil
    char *_bytes_data "PyBytes_AS_STRING"(PyObject *o) nogil
    Py_ssize_t _bytes_size "PyBytes_GET_SIZE"(PyObject *o) nogil
    PyObject *_Py_None "Py_None"
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)
    int PyBUF_READ

cdef extern from *:
    """
    #include <time.h>
    static int64_t seglog_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
    }
    static int seglog_sub_overflows(int64_t a, int64_t b, int64_t *out) {
        return __builtin_sub_overflow(a, b, out);
    }
    static int seglog_add_overflows(int64_t a, int64_t b, int64_t *out) {
        return __builtin_add_overflow(a, b, out);
    }
    """
    int64_t seglog_now_ms() nogil
    void __builtin_prefetch(const void *address) nogil
    int seglog_sub_overflows(int64_t a, int64_t b, int64_t *out) nogil
    int seglog_add_overflows(int64_t a, int64_t b, int64_t *out) nogil

cdef extern from "<stdint.h>":
    const int64_t INT64_MAX_C "INT64_MAX"

cdef enum:
    INT32_MAX_ = 2147483647
    BATCH_LENGTH_MIN_V2 = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD   # 49
    RECORD_AREA_BYTES_MAX = INT32_MAX_ - BATCH_LENGTH_MIN_V2
    RECORD_BYTES_MIN = 7
    # Below this many records a parse keeps the GIL (release + re-take costs ~0.2 us).
    NOGIL_RECORDS_MIN = 64
    # Below this many bytes the CRC keeps the GIL.
    NOGIL_BYTES_MIN = 32768


# The format constants as module attributes (a test checks them against seglog.format).
_CONSTANTS = dict(
    BASE_OFFSET_POSITION=BASE_OFFSET_POSITION,
    BATCH_LENGTH_POSITION=BATCH_LENGTH_POSITION,
    PARTITION_LEADER_EPOCH_POSITION=PARTITION_LEADER_EPOCH_POSITION,
    MAGIC_POSITION=MAGIC_POSITION,
    CRC_POSITION=CRC_POSITION,
    ATTRIBUTES_POSITION=ATTRIBUTES_POSITION,
    LAST_OFFSET_DELTA_POSITION=LAST_OFFSET_DELTA_POSITION,
    BASE_TIMESTAMP_POSITION=BASE_TIMESTAMP_POSITION,
    MAX_TIMESTAMP_POSITION=MAX_TIMESTAMP_POSITION,
    PRODUCER_ID_POSITION=PRODUCER_ID_POSITION,
    PRODUCER_EPOCH_POSITION=PRODUCER_EPOCH_POSITION,
    BASE_SEQUENCE_POSITION=BASE_SEQUENCE_POSITION,
    RECORDS_COUNT_POSITION=RECORDS_COUNT_POSITION,
    RECORD_BATCH_OVERHEAD=RECORD_BATCH_OVERHEAD,
    LOG_OVERHEAD=LOG_OVERHEAD,
    HEADER_SIZE_UP_TO_MAGIC=HEADER_SIZE_UP_TO_MAGIC,
    MIN_BATCH_LENGTH=MIN_BATCH_LENGTH,
    MAX_RECORD_OVERHEAD=MAX_RECORD_OVERHEAD,
    MAGIC_V2=MAGIC_V2,
    COMPRESSION_CODEC_MASK=COMPRESSION_CODEC_MASK,
    TIMESTAMP_TYPE_MASK=TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK=TRANSACTIONAL_FLAG_MASK,
    CONTROL_FLAG_MASK=CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK=DELETE_HORIZON_FLAG_MASK,
    COMPRESSION_NONE=COMPRESSION_NONE,
    COMPRESSION_GZIP=COMPRESSION_GZIP,
    COMPRESSION_SNAPPY=COMPRESSION_SNAPPY,
    COMPRESSION_LZ4=COMPRESSION_LZ4,
    COMPRESSION_ZSTD=COMPRESSION_ZSTD,
    TIMESTAMP_TYPE_CREATE_TIME=TIMESTAMP_TYPE_CREATE_TIME,
    TIMESTAMP_TYPE_LOG_APPEND_TIME=TIMESTAMP_TYPE_LOG_APPEND_TIME,
    CONTROL_TYPE_ABORT=CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT=CONTROL_TYPE_COMMIT,
    CONTROL_RECORD_VERSION=CONTROL_RECORD_VERSION,
    END_TXN_MARKER_BATCH_BYTES=END_TXN_MARKER_BATCH_BYTES,
)
globals().update(_CONSTANTS)

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Kafka's exact messages (as the twin).
_PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"
_RECORDS_REMAINING = "Incorrect declared batch size, records still remaining in file"


# ================================================================================================
# Arguments
# ================================================================================================
# The twin's rule for every count, size and position argument of the decoders, checked on
# Python objects before any C conversion so that no OverflowError leaks: an int
# (operator.index: TypeError for 1.5 or "3"), not negative (ValueError), and clamped to
# sys.maxsize (an int that large means "no limit").

cdef object _int_argument(str name, value):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


cdef object _size_argument(str name, value, bint allow_none):
    if value is None and allow_none:
        return None
    value = _int_argument(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0{' or None' if allow_none else ''}, got {value}")
    return min(value, sys.maxsize)


cdef Py_ssize_t _decompressed_limit(value) except -1:
    """max_decompressed_bytes checked as the twin checks it (seglog.compression)."""
    if value is DECOMPRESSED_BYTES_MAX_DEFAULT:  # the usual call: skip the Python call
        return DECOMPRESSED_BYTES_MAX_DEFAULT
    return check_max_decompressed_bytes(value)


# ================================================================================================
# Records
# ================================================================================================

@cython.freelist(4096)
@cython.no_gc
@cython.final
cdef class Record:
    """One decoded record: ``offset``, ``timestamp_ms``, ``key``, ``value``, ``headers``.

    ``key``/``value`` are ``bytes`` or None; ``headers`` a tuple of ``(str, bytes | None)``
    pairs, ``()`` when there are none. ``tuple(record)`` is ``(offset, timestamp_ms, key,
    value, headers)``. Equality compares those five fields with any object that has them (a
    native record equals a pure one); records are hashable.

    The fields are read-only and the type is not tracked by the cyclic garbage collector: a
    batch's records() makes thousands at once, and tracking them made every young-generation
    collection walk them (a third of the decode time). Records hold only bytes, None and
    tuples of (str, bytes), so they cannot be part of a reference cycle unless one is built
    on purpose through the constructor's ``headers`` argument (that cycle would leak).
    """

    cdef readonly int64_t offset
    cdef readonly int64_t timestamp_ms
    cdef readonly object key
    cdef readonly object value
    cdef readonly object headers

    def __init__(self, offset, timestamp_ms, key, value, headers=()):
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.key = key
        self.value = value
        self.headers = headers

    def __iter__(self):
        return iter((self.offset, self.timestamp_ms, self.key, self.value, self.headers))

    def __eq__(self, other):
        try:
            other_fields = (
                other.offset, other.timestamp_ms, other.key, other.value, other.headers
            )
        except AttributeError:
            return NotImplemented
        return (self.offset, self.timestamp_ms, self.key, self.value, self.headers) == other_fields

    def __ne__(self, other):
        result = self.__eq__(other)
        if result is NotImplemented:
            return result
        return not result

    def __hash__(self):
        return hash((self.offset, self.timestamp_ms, self.key, self.value, self.headers))

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp_ms, self.key, self.value, self.headers))

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp_ms={self.timestamp_ms}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


# ================================================================================================
# Record parsing (shared by records() and the columns)
# ================================================================================================

cdef int _raise_parse_failure(ParseFailure *failure) except -1:
    cdef int code = failure.code
    if code == E_PREMATURE_EOF:
        raise InvalidRecordError(_PREMATURE_EOF)
    if code == E_VARINT_TOO_LONG:
        raise InvalidRecordError(f"varint is longer than 5 bytes at position {failure.a}")
    if code == E_VARINT_UNDERFLOW:
        raise InvalidRecordError(f"varint runs past the end of the buffer at position {failure.a}")
    if code == E_VARLONG_TOO_LONG:
        raise InvalidRecordError(f"varlong is longer than 10 bytes at position {failure.a}")
    if code == E_VARLONG_UNDERFLOW:
        raise InvalidRecordError(f"varlong runs past the end of the buffer at position {failure.a}")
    if code == E_BODY_SIZE:
        raise InvalidRecordError(
            f"Invalid record size: expected {failure.a} bytes in record payload, but "
            f"instead the buffer has only {failure.b} remaining bytes."
        )
    if code == E_NO_ATTRIBUTES:
        raise InvalidRecordError("Found invalid record structure: no attributes byte")
    if code == E_KEY_PAST:
        raise InvalidRecordError("Found invalid record structure: key runs past the record")
    if code == E_VALUE_PAST:
        raise InvalidRecordError("Found invalid record structure: value runs past the record")
    if code == E_HEADER_COUNT_NEGATIVE:
        raise InvalidRecordError(f"Found invalid number of record headers {failure.a}")
    if code == E_HEADER_COUNT_LARGE:
        raise InvalidRecordError(
            f"Found invalid number of record headers. {failure.a} is larger than the "
            "remaining size of the buffer"
        )
    if code == E_HEADER_KEY_NEGATIVE:
        raise InvalidRecordError(f"Invalid negative header key size {failure.a}")
    if code == E_HEADER_KEY_PAST:
        raise InvalidRecordError("Found invalid record structure: header key runs past the record")
    if code == E_HEADER_VALUE_PAST:
        raise InvalidRecordError(
            "Found invalid record structure: header value runs past the record"
        )
    if code == E_SIZE_MISMATCH:
        raise InvalidRecordError(
            f"Invalid record size: expected to read {failure.a} bytes in record payload, "
            f"but instead read {failure.b}"
        )
    if code == E_RECORDS_REMAINING:
        raise InvalidRecordError(_RECORDS_REMAINING)
    raise AssertionError(f"unknown parse failure {code}")


cdef tuple _decode_headers(const unsigned char *data, Py_ssize_t position, int32_t count):
    """Headers already validated by _parse_record, as a tuple of (str, bytes | None)."""
    cdef int32_t length = 0, i
    cdef list pairs = []
    cdef object key, value
    for i in range(count):
        position = read_varint(data, position, position + VARINT_BYTES_MAX, &length)
        # Java's new String(bytes, UTF_8) replaces malformed input; so does the twin.
        key = PyUnicode_DecodeUTF8(<const char *>data + position, length, "replace")
        position += length
        position = read_varint(data, position, position + VARINT_BYTES_MAX, &length)
        if length >= 0:
            value = PyBytes_FromStringAndSize(<const char *>data + position, length)
            position += length
        else:
            value = None
        pairs.append((key, value))
    return tuple(pairs)


# ================================================================================================
# Buffers
# ================================================================================================

@cython.final
cdef class _Buffer:
    """A buffer export of an object, held while batches or columns point into it."""
    cdef Py_buffer view
    cdef bint acquired
    cdef object obj
    cdef const unsigned char *data
    cdef Py_ssize_t size

    def __dealloc__(self):
        if self.acquired:
            PyBuffer_Release(&self.view)
            self.acquired = False

    cdef object readonly_view(self):
        """A read-only 1-D "B" memoryview of the whole buffer (what the twin's Columns hold)."""
        view = memoryview(self.obj)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        return view.toreadonly()


cdef _Buffer _acquire(object buffer):
    """Export ``buffer`` (C-contiguous bytes-like). TypeError otherwise, as the twin's
    memoryview cast gives."""
    cdef _Buffer owner = _Buffer.__new__(_Buffer)
    if isinstance(buffer, _Buffer):
        return buffer
    try:
        PyObject_GetBuffer(buffer, &owner.view, PyBUF_SIMPLE)
    except BufferError as exc:
        raise TypeError(f"expected a C-contiguous bytes-like object: {exc}") from None
    owner.acquired = True
    owner.obj = buffer
    owner.data = <const unsigned char *>owner.view.buf
    owner.size = owner.view.len
    return owner


# ================================================================================================
# Batches
# ================================================================================================

cdef int _check_batch_length(const unsigned char *data, Py_ssize_t position,
                             int64_t max_batch_bytes) except -1:
    cdef int32_t batch_length = <int32_t>load_u32(data + position + BATCH_LENGTH_POSITION)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, below the minimum "
            f"{MIN_BATCH_LENGTH}",
            reason=REASON_BATCH_TOO_SMALL, position=position,
        )
    if max_batch_bytes >= 0 and batch_length > max_batch_bytes:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, above the maximum "
            f"{max_batch_bytes}",
            reason=REASON_BATCH_TOO_LARGE, position=position,
        )
    return 0


cdef int _check_magic_and_header(const unsigned char *data, Py_ssize_t position,
                                 int32_t batch_length) except -1:
    cdef int8_t magic = <int8_t>data[position + MAGIC_POSITION]
    if magic != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at position {position} has magic {magic}; "
            f"only magic {MAGIC_V2} is supported",
            reason=REASON_BAD_MAGIC, position=position,
        )
    if batch_length < BATCH_LENGTH_MIN_V2:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, shorter than a "
            f"v2 header ({BATCH_LENGTH_MIN_V2})",
            reason=REASON_BATCH_TOO_SMALL, position=position,
        )
    # The last offset (and the next batch's first, one more) must be an int64; the twin
    # compares Python ints, this the overflow flag.
    cdef int64_t base_offset = <int64_t>load_u64(data + position + BASE_OFFSET_POSITION)
    cdef int32_t last_offset_delta = <int32_t>load_u32(data + position + LAST_OFFSET_DELTA_POSITION)
    cdef int64_t last_offset
    if (seglog_add_overflows(base_offset, last_offset_delta, &last_offset)
            or last_offset == INT64_MAX_C):
        raise CorruptRecordError(
            f"batch at position {position} has base offset {base_offset} and last offset delta "
            f"{last_offset_delta}: its last offset overflows an int64",
            reason=REASON_BAD_LAST_OFFSET_DELTA, position=position,
        )
    return 0


cdef int _check_offsets_increase(Batch batch, int64_t *next_offset_min) except -1:
    """``check_offsets`` (the twin's ``_check_offsets_increase``): the batch's offsets start at
    next_offset_min[0] or above and its last offset delta is not negative; then
    next_offset_min[0] becomes its last offset + 1 (an int64: _frame_at checked)."""
    if batch.base_offset < next_offset_min[0] or batch.last_offset_delta < 0:
        raise CorruptRecordError(
            f"batch at position {batch.position} has offsets {batch.base_offset}.."
            f"{batch.base_offset + batch.last_offset_delta}; offsets must increase from "
            f"{next_offset_min[0]}",
            reason=REASON_OFFSETS_NOT_INCREASING, position=batch.position,
        )
    next_offset_min[0] = batch.base_offset + batch.last_offset_delta + 1
    return 0


# Not tracked by the garbage collector: a Batch refers only to its _Buffer, which refers to
# the exporter of the bytes (bytes, bytearray, memoryview, mmap: C types that hold no
# reference back), so it is never part of a reference cycle. A consumer's read makes
# hundreds of them; tracked, every collection a poll's allocations trigger walked them and
# they pushed the full collections nearer (GC traversal was ~13 % of Consumer.poll).
@cython.no_gc
@cython.final
cdef class Batch:
    """One RecordBatch v2 header, decoded, over the buffer that holds the whole batch.

    Attributes are Kafka's header fields in snake case: ``base_offset``, ``batch_length``,
    ``partition_leader_epoch``, ``magic``, ``crc`` (as stored), ``attributes`` (the stored
    int16), ``last_offset_delta``, ``base_timestamp_ms``, ``max_timestamp_ms``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``record_count``; and derived:
    ``last_offset``, ``next_offset``, ``size_bytes`` (12 + batch_length), ``position`` (of the
    batch in the buffer), ``compression_id`` (attributes & 7), ``compression`` (its name, or
    ``"unknown"`` for ids 5-7), ``timestamp_type``, ``is_transactional``, ``is_control``,
    ``has_delete_horizon``, ``delete_horizon_ms`` and ``last_sequence``.

    ``Batch(buffer, position=0)`` reads the batch at ``position`` of ``buffer``; it raises
    CorruptRecordError (REASON_TRUNCATED) when the buffer ends before the batch does, and the
    reasons of :func:`iter_batches` otherwise; TypeError for a ``position`` that is not an
    int, ValueError for one outside the buffer. The batch holds a buffer export of ``buffer``.

    The record decoders (``records``, ``columns``, ``record_at``) check the CRC first by
    default (``check_crcs=True``), once per Batch object, and bound decompression by
    ``max_decompressed_bytes``; see the twin's docstrings.
    """

    cdef _Buffer _buffer
    cdef const unsigned char *_data          # start of this batch
    cdef readonly Py_ssize_t position
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp_ms
    cdef readonly int64_t max_timestamp_ms
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t record_count
    # CRC verdict, computed at most once per Batch by the decoders: 0 not computed yet,
    # 1 valid, -1 mismatch (see _check_crc).
    cdef int8_t _crc_state

    def __init__(self, buffer, position=0):
        cdef _Buffer owner = _acquire(buffer)
        cdef Py_ssize_t at
        position = _int_argument("position", position)
        if not 0 <= position <= owner.size:
            raise ValueError(f"position {position} is outside the {owner.size}-byte buffer")
        at = position
        if _frame_at(owner, &at, -1) < 0:
            raise CorruptRecordError(
                f"the buffer ends before the batch at position {position} does",
                reason=REASON_TRUNCATED, position=position,
            )
        self._fill(owner, position)

    cdef void _fill(self, _Buffer owner, Py_ssize_t position) noexcept:
        # The caller checked that the whole (>= 61-byte) batch lies inside the buffer.
        cdef const unsigned char *p = owner.data + position
        self._buffer = owner
        self._data = p
        self.position = position
        self.base_offset = <int64_t>load_u64(p + BASE_OFFSET_POSITION)
        self.batch_length = <int32_t>load_u32(p + BATCH_LENGTH_POSITION)
        self.partition_leader_epoch = <int32_t>load_u32(p + PARTITION_LEADER_EPOCH_POSITION)
        self.magic = <int8_t>p[MAGIC_POSITION]
        self.crc = load_u32(p + CRC_POSITION)
        self.attributes = <int16_t>load_u16(p + ATTRIBUTES_POSITION)
        self.last_offset_delta = <int32_t>load_u32(p + LAST_OFFSET_DELTA_POSITION)
        self.base_timestamp_ms = <int64_t>load_u64(p + BASE_TIMESTAMP_POSITION)
        self.max_timestamp_ms = <int64_t>load_u64(p + MAX_TIMESTAMP_POSITION)
        self.producer_id = <int64_t>load_u64(p + PRODUCER_ID_POSITION)
        self.producer_epoch = <int16_t>load_u16(p + PRODUCER_EPOCH_POSITION)
        self.base_sequence = <int32_t>load_u32(p + BASE_SEQUENCE_POSITION)
        self.record_count = <int32_t>load_u32(p + RECORDS_COUNT_POSITION)
        self._crc_state = 0

    # --- derived fields ------------------------------------------------------------------------

    @property
    def size_bytes(self):
        """Bytes of the whole batch: 12 + batch_length."""
        return LOG_OVERHEAD + <int64_t>self.batch_length

    @property
    def last_offset(self):
        """Offset of the batch's last record (base_offset + last_offset_delta)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        """last_offset + 1: the offset the next batch starts at."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_id(self):
        """The codec id in attribute bits 0-2 (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression(self):
        """The codec name, or ``"unknown"`` for ids 5-7 (decoding those raises)."""
        return COMPRESSION_NAMES.get(self.attributes & COMPRESSION_CODEC_MASK, "unknown")

    @property
    def timestamp_type(self):
        """0 CreateTime, 1 LogAppendTime (attribute bit 3)."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self):
        """Attribute bit 4."""
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self):
        """Attribute bit 5: the batch holds a control record (commit/abort marker)."""
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self):
        """Attribute bit 6: base_timestamp_ms holds the compaction delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self):
        """The delete horizon (base_timestamp_ms) when has_delete_horizon, else -1."""
        return self.base_timestamp_ms if self.attributes & DELETE_HORIZON_FLAG_MASK else -1

    @property
    def last_sequence(self):
        """Sequence of the last record, wrapping past INT32_MAX to 0 as Kafka's
        ``incrementSequence`` does; -1 when base_sequence is -1."""
        cdef int64_t base = self.base_sequence, increment = self.last_offset_delta
        if base == -1:
            return -1
        if base > INT32_MAX_ - increment:
            return increment - (INT32_MAX_ - base) - 1
        return base + increment

    def __repr__(self):
        return (
            f"<Batch offsets {self.base_offset}..{self.last_offset} at position {self.position}: "
            f"{self.record_count} records, {self.size_bytes} bytes, {self.compression}"
            f"{', control' if self.is_control else ''}"
            f"{', transactional' if self.is_transactional else ''}>"
        )

    # --- checks --------------------------------------------------------------------------------

    cdef uint32_t _computed_crc(self):
        cdef const unsigned char *start = self._data + ATTRIBUTES_POSITION
        cdef size_t n = <size_t>(LOG_OVERHEAD + <Py_ssize_t>self.batch_length - ATTRIBUTES_POSITION)
        cdef uint32_t crc
        if n < NOGIL_BYTES_MIN:
            return seglog_crc32c(0, start, n)
        with nogil:
            crc = seglog_crc32c(0, start, n)
        return crc

    def is_valid(self):
        """True if the stored CRC32C equals the CRC of bytes 21..end of the batch.

        Always computes the CRC and remembers the verdict for the decoders' check."""
        cdef bint valid = self.crc == self._computed_crc()
        self._crc_state = 1 if valid else -1
        return valid

    def ensure_valid(self):
        """Raise CorruptRecordError (reason REASON_CRC_MISMATCH, position of the batch) unless
        :meth:`is_valid`."""
        if not self.is_valid():
            raise self._crc_error()

    cdef object _crc_error(self):
        return CorruptRecordError(
            f"batch at position {self.position} is corrupt: stored crc {self.crc:#010x}, "
            f"computed {self._computed_crc():#010x}",
            reason=REASON_CRC_MISMATCH, position=self.position,
        )

    cdef int _check_crc(self) except -1:
        """The decoders' CRC check (Kafka's consumer ``check.crcs``), computed once per Batch:
        repeated record_at calls on one batch hash it once."""
        if self._crc_state == 0:
            self._crc_state = 1 if self._computed_crc() == self.crc else -1
        if self._crc_state < 0:
            raise self._crc_error()
        return 0

    # --- decoding ------------------------------------------------------------------------------

    cdef object _area(self, const unsigned char **data, Py_ssize_t *start, Py_ssize_t *end,
                      Py_ssize_t decompressed_limit):
        """Locate the record area to parse: returns the object that owns it (None when it is
        the iterated buffer, else the decompressed bytes, at most ``decompressed_limit``) and
        sets data/start/end. Raises as the twin's ``_decode`` before parsing (the CRC is the
        caller's)."""
        cdef int cid
        if self.record_count < 0:
            raise InvalidRecordError(
                f"Found invalid record count {self.record_count} in magic v2 batch"
            )
        cid = self.attributes & COMPRESSION_CODEC_MASK
        if self.record_count == 0 or cid == COMPRESSION_NONE:
            data[0] = self._buffer.data
            start[0] = self.position + RECORD_BATCH_OVERHEAD
            end[0] = self.position + LOG_OVERHEAD + <Py_ssize_t>self.batch_length
            return None
        if cid not in COMPRESSION_NAMES:
            raise UnsupportedCompressionError(
                f"Unknown compression type id {cid} in batch at position {self.position}"
            )
        area = PyMemoryView_FromMemory(
            <char *>self._data + RECORD_BATCH_OVERHEAD,
            LOG_OVERHEAD + <Py_ssize_t>self.batch_length - RECORD_BATCH_OVERHEAD,
            PyBUF_READ,
        )
        try:
            decompressed = _compression.decompress(
                cid, area, max_decompressed_bytes=decompressed_limit, position=self.position)
        finally:
            area.release()
        if type(decompressed) is not bytes:
            decompressed = bytes(decompressed)
        data[0] = <const unsigned char *>PyBytes_AS_STRING(decompressed)
        start[0] = 0
        end[0] = PyBytes_GET_SIZE(decompressed)
        return decompressed

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def records(self, *, check_crcs=True, max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """Decode every record (decompressing if needed) into :class:`Record` objects.

        ``check_crcs`` (default True, Kafka's consumer ``check.crcs``): first check the
        batch's CRC32C, once per Batch object, and raise CorruptRecordError
        (REASON_CRC_MISMATCH) on a mismatch; False skips it. ``max_decompressed_bytes``
        (default 64 MiB): a compressed record area that decompresses to more is
        CorruptRecordError (REASON_DECOMPRESSED_TOO_LARGE) after bounded memory.

        For LogAppendTime batches every record's timestamp is ``max_timestamp_ms``. A batch with
        record_count 0 has no records. Raises InvalidRecordError for malformed records (Kafka's
        checks, including more or fewer records than record_count), CorruptRecordError
        (REASON_BAD_COMPRESSION) for a stream the codec cannot decompress,
        UnsupportedCompressionError for codec ids 5-7 or a missing codec package;
        TypeError/ValueError for a bad ``max_decompressed_bytes``. As the twin.
        """
        cdef const unsigned char *data
        cdef Py_ssize_t position, end, capacity, i, count
        cdef ParsedRecord parsed
        cdef ParseFailure failure
        cdef Record record
        cdef bint log_append_time = (self.attributes & TIMESTAMP_TYPE_MASK) != 0
        cdef uint64_t base_offset = <uint64_t>self.base_offset
        cdef uint64_t base_timestamp = <uint64_t>self.base_timestamp_ms
        cdef tuple empty = ()
        cdef Py_ssize_t decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        memset(&parsed, 0, sizeof(parsed))  # written by _parse_record; silences -Wmaybe-uninitialized
        if check_crcs:
            self._check_crc()
        owner = self._area(&data, &position, &end, decompressed_limit)
        count = self.record_count
        if count == 0:
            return []
        # Every record that parses takes >= 7 bytes, so this bounds a hostile record_count.
        capacity = (end - position) // RECORD_BYTES_MIN + 1
        if capacity > count:
            capacity = count
        result = PyList_New(capacity)
        for i in range(count):
            position = _parse_record(data, position, end, &parsed, &failure)
            if position < 0:
                _raise_parse_failure(&failure)
            if i >= capacity:  # cannot happen: see capacity
                raise AssertionError("record count bound broken")
            record = Record.__new__(Record)
            record.offset = <int64_t>(base_offset + <uint64_t><int64_t>parsed.offset_delta)
            if log_append_time:
                record.timestamp_ms = self.max_timestamp_ms
            else:
                record.timestamp_ms = <int64_t>(base_timestamp + <uint64_t>parsed.timestamp_delta)
            if parsed.key_length >= 0:
                record.key = PyBytes_FromStringAndSize(
                    <const char *>data + parsed.key_position, parsed.key_length)
            else:
                record.key = None
            if parsed.value_length >= 0:
                record.value = PyBytes_FromStringAndSize(
                    <const char *>data + parsed.value_position, parsed.value_length)
            else:
                record.value = None
            if parsed.header_count:
                record.headers = _decode_headers(data, parsed.headers_position,
                                                 parsed.header_count)
            else:
                record.headers = empty
            Py_INCREF(record)
            PyList_SET_ITEM(result, i, record)
        if position != end:
            raise InvalidRecordError(_RECORDS_REMAINING)
        return result

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def consumer_records(self, record_type, topic, partition, min_offset=0, *,
                         check_crcs=True,
                         max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """The consumer's records of this batch, decoded straight into ``record_type``
        tuples: for each record at or after ``min_offset``, ``record_type(topic, partition,
        offset, timestamp_ms, key, value, headers)``, where ``record_type`` is a 7-field tuple
        subclass (ConsumerRecord; TypeError otherwise), built in C without calling its
        constructor and without an intermediate :class:`Record`.

        Every record is parsed and checked as by :meth:`records` (same ``check_crcs``,
        ``max_decompressed_bytes`` and errors, also for records before ``min_offset``); only
        the objects made differ. As the twin.
        """
        cdef const unsigned char *data
        cdef Py_ssize_t position, end, i, count
        cdef ParsedRecord parsed
        cdef ParseFailure failure
        cdef int64_t offset, timestamp_ms
        cdef int64_t first_offset
        cdef bint log_append_time = (self.attributes & TIMESTAMP_TYPE_MASK) != 0
        cdef uint64_t base_offset = <uint64_t>self.base_offset
        cdef uint64_t base_timestamp = <uint64_t>self.base_timestamp_ms
        cdef tuple empty = ()
        cdef Py_ssize_t decompressed_limit
        cdef PyTypeObject *cls
        cdef list result
        cdef object timestamp_object = None, offset_object
        cdef int64_t last_timestamp_ms = 0
        if not (isinstance(record_type, type) and issubclass(record_type, tuple)
                and len(getattr(record_type, "_fields", ())) == 7):
            raise TypeError("record_type must be a 7-field tuple subclass")
        first_offset = min_offset
        decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        cls = <PyTypeObject *>record_type
        memset(&parsed, 0, sizeof(parsed))  # written by _parse_record
        if check_crcs:
            self._check_crc()
        owner = self._area(&data, &position, &end, decompressed_limit)
        count = self.record_count
        result = []
        if count == 0:
            return result
        for i in range(count):
            position = _parse_record(data, position, end, &parsed, &failure)
            if position < 0:
                _raise_parse_failure(&failure)
            offset = <int64_t>(base_offset + <uint64_t><int64_t>parsed.offset_delta)
            if offset < first_offset:
                continue
            if log_append_time:
                timestamp_ms = self.max_timestamp_ms
            else:
                timestamp_ms = <int64_t>(base_timestamp + <uint64_t>parsed.timestamp_delta)
            if parsed.key_length >= 0:
                key = PyBytes_FromStringAndSize(<const char *>data + parsed.key_position,
                                                parsed.key_length)
            else:
                key = None
            if parsed.value_length >= 0:
                value = PyBytes_FromStringAndSize(<const char *>data + parsed.value_position,
                                                  parsed.value_length)
            else:
                value = None
            if parsed.header_count:
                headers = _decode_headers(data, parsed.headers_position, parsed.header_count)
            else:
                headers = empty
            # The ints as objects: a batch's records mostly share one timestamp (the
            # producer's clock read per batch or per millisecond), so its object is reused.
            if timestamp_object is None or timestamp_ms != last_timestamp_ms:
                timestamp_object = timestamp_ms
                last_timestamp_ms = timestamp_ms
            offset_object = offset
            item = <object>PyType_GenericAlloc(cls, 7)
            Py_DECREF(item)  # the cast took a second reference to the new object
            # Set each field straight (a tuple of the fields and enumerate cost more than
            # the record itself); PyTuple_SET_ITEM steals the reference taken here.
            Py_INCREF(topic)
            PyTuple_SET_ITEM(item, 0, topic)
            Py_INCREF(partition)
            PyTuple_SET_ITEM(item, 1, partition)
            Py_INCREF(offset_object)
            PyTuple_SET_ITEM(item, 2, offset_object)
            Py_INCREF(timestamp_object)
            PyTuple_SET_ITEM(item, 3, timestamp_object)
            Py_INCREF(key)
            PyTuple_SET_ITEM(item, 4, key)
            Py_INCREF(value)
            PyTuple_SET_ITEM(item, 5, value)
            Py_INCREF(headers)
            PyTuple_SET_ITEM(item, 6, headers)
            # Its fields are str, int, bytes, None and tuples of those, so it cannot be in a
            # reference cycle: untracked, the collections a poll's thousands of allocations
            # trigger do not walk it (they took half of the decode time), as Record's no_gc.
            PyObject_GC_UnTrack(<void *>item)
            result.append(item)
        if position != end:
            raise InvalidRecordError(_RECORDS_REMAINING)
        return result

    def record_at(self, offset, *, check_crcs=True,
                  max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """The record with ``offset``, or None when no record has it (outside
        ``[base_offset, last_offset]``, a gap left by compaction, or record_count 0).

        ``offset`` must be an int (TypeError otherwise); any int is accepted. ``check_crcs``
        and ``max_decompressed_bytes`` as for :meth:`records`; the CRC is checked first, once
        per Batch object, so point reads of several offsets of one batch hash it once.

        Records before it are skipped by their framing (length, attributes, timestamp and
        offset deltas are read and checked; keys, values and headers are not); the record
        itself is parsed with every check of :meth:`records`. A compressed batch is
        decompressed first. A control batch's record is returned like any other. Raises as
        :meth:`records` for malformed framing up to and including that record.
        """
        cdef const unsigned char *data
        cdef Py_ssize_t start, end, decompressed_limit
        offset = _int_argument("offset", offset)
        decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        if check_crcs:
            self._check_crc()
        # Compared as Python ints: ``offset`` may be any int (2**70 is simply not here).
        if offset < self.base_offset or offset > self.last_offset:
            return None
        owner = self._area(&data, &start, &end, decompressed_limit)  # keeps it alive
        if self.record_count == 0:
            return None
        return _record_in_area(data, start, end, self.record_count, self.base_offset,
                               self.base_timestamp_ms, self.max_timestamp_ms,
                               (self.attributes & TIMESTAMP_TYPE_MASK) != 0, offset)

    def columns(self, *, check_crcs=True, max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """This batch's records as :class:`Columns`. ``data`` is a read-only view of the whole
        iterated buffer when nothing was decompressed (positions are absolute in it), else the
        decompressed record area. A control batch's record is included. ``check_crcs`` and
        ``max_decompressed_bytes`` as for :meth:`records`; raises as :meth:`records`."""
        cdef Py_ssize_t hint = self.record_count if self.record_count > 0 else 0
        cdef Py_ssize_t decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        cdef _ColumnsBuilder builder
        if check_crcs:
            self._check_crc()
        # A hostile record_count must not size the columns: each record takes >= 7 bytes
        # (compressed areas: unknown until decompressed; the builder grows).
        if hint > 65536 and hint > self.batch_length // RECORD_BYTES_MIN + 1:
            hint = 65536 if self.attributes & COMPRESSION_CODEC_MASK else \
                self.batch_length // RECORD_BYTES_MIN + 1
        builder = _ColumnsBuilder(hint)
        builder.add_batch(self, decompressed_limit)
        return builder.finish(self._buffer, -1)

    def record_summary(self, *, check_crcs=True,
                       max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """What validating a producer's batch needs of its records, without building
        :class:`Columns` (no numpy: the wire broker's produce path calls this):
        ``(record_count, offsets_in_order, min_timestamp_ms, max_timestamp_ms,
        first_keyless)`` = the number of records parsed; whether their offsets are
        ``base_offset + 0..record_count-1``; the lowest and highest record timestamp (-1, -1
        without records); the index of the first record whose key is null, -1 for none.
        ``check_crcs`` and ``max_decompressed_bytes`` as for :meth:`records`; raises as
        :meth:`records`."""
        cdef Py_ssize_t hint = self.record_count if self.record_count > 0 else 0
        cdef Py_ssize_t decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        cdef _ColumnsBuilder builder
        cdef Py_ssize_t i, n, first_keyless = -1
        cdef bint in_order = True
        cdef int64_t lowest = -1, highest = -1, timestamp
        if check_crcs:
            self._check_crc()
        if hint > 65536 and hint > self.batch_length // RECORD_BYTES_MIN + 1:
            hint = 65536 if self.attributes & COMPRESSION_CODEC_MASK else \
                self.batch_length // RECORD_BYTES_MIN + 1
        builder = _ColumnsBuilder(hint, True)
        builder.add_batch(self, decompressed_limit)
        n = builder.count
        if n:
            lowest = highest = builder.timestamps[0]
        for i in range(n):
            if builder.offsets[i] != self.base_offset + i:
                in_order = False
            timestamp = builder.timestamps[i]
            if timestamp < lowest:
                lowest = timestamp
            elif timestamp > highest:
                highest = timestamp
            if first_keyless < 0 and builder.key_lengths[i] < 0:
                first_keyless = i
        return n, in_order, lowest, highest, first_keyless

    def control_type(self, *, check_crcs=True):
        """For a control batch, the type in its record key (0 ABORT, 1 COMMIT, ...; the stored
        int16, unknown types included). Raises InvalidRecordError when the batch is not a
        control batch, has no record, or its key is null, shorter than 4 bytes or has a
        negative version; as :meth:`records` (``check_crcs`` included) for the record."""
        if not self.attributes & CONTROL_FLAG_MASK:
            raise InvalidRecordError(f"batch at position {self.position} is not a control batch")
        records = self.records(check_crcs=check_crcs)
        if not records:
            raise InvalidRecordError(f"control batch at position {self.position} has no record")
        key = records[0].key
        if key is None or len(key) < CONTROL_KEY.size:
            raise InvalidRecordError(
                f"control record key must be at least {CONTROL_KEY.size} bytes, got "
                f"{'null' if key is None else len(key)}"
            )
        version, control_type = CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise InvalidRecordError(f"Invalid version found for control record: {version}")
        return control_type


cdef Record _make_record(const unsigned char *data, ParsedRecord *parsed, int64_t offset,
                         int64_t timestamp_ms):
    cdef Record record = Record.__new__(Record)
    record.offset = offset
    record.timestamp_ms = timestamp_ms
    if parsed.key_length >= 0:
        record.key = PyBytes_FromStringAndSize(<const char *>data + parsed.key_position,
                                               parsed.key_length)
    else:
        record.key = None
    if parsed.value_length >= 0:
        record.value = PyBytes_FromStringAndSize(<const char *>data + parsed.value_position,
                                                 parsed.value_length)
    else:
        record.value = None
    if parsed.header_count:
        record.headers = _decode_headers(data, parsed.headers_position, parsed.header_count)
    else:
        record.headers = ()
    return record


cdef object _record_in_area(const unsigned char *data, Py_ssize_t start, Py_ssize_t end,
                            int32_t count, int64_t base_offset, int64_t base_timestamp_ms,
                            int64_t max_timestamp_ms, bint log_append_time, int64_t offset,
                            Py_ssize_t hint=-1):
    """Batch.record_at on a record area (count > 0, offset within the batch's range).
    ``hint``: where the record probably starts (>= start), or -1. It is taken only when a
    whole record parses there with the wanted offset delta; otherwise the area is walked."""
    cdef ParsedRecord parsed
    cdef ParseFailure failure
    cdef Py_ssize_t position
    memset(&parsed, 0, sizeof(parsed))
    if start <= hint < end:
        position = _parse_record(data, hint, end, &parsed, &failure)
        if position >= 0 and parsed.offset_delta == offset - base_offset:
            return _make_record(
                data, &parsed, offset,
                max_timestamp_ms if log_append_time else
                <int64_t>(<uint64_t>base_timestamp_ms + <uint64_t>parsed.timestamp_delta))
    position = _find_record(data, start, end, count, offset - base_offset, &failure)
    if position == RECORD_NOT_FOUND:
        return None
    if position >= 0:
        position = _parse_record(data, position, end, &parsed, &failure)
    if position < 0:
        _raise_parse_failure(&failure)
    return _make_record(
        data, &parsed, offset,
        max_timestamp_ms if log_append_time else
        <int64_t>(<uint64_t>base_timestamp_ms + <uint64_t>parsed.timestamp_delta))


cdef object batch_record_at(const unsigned char *batch, Py_ssize_t size, int64_t offset,
                            Py_ssize_t hint, bint check_crcs, Py_ssize_t max_decompressed_bytes):
    """Segment.read_record's entry (cimported through codec.pxd):
    Batch.record_at(offset, check_crcs=..., max_decompressed_bytes=...) for the whole, framed
    batch at ``batch[0:size]`` (61-byte header, magic 2, all present; the caller checked),
    without making a Batch for an uncompressed one. A segment that remembers which batches it
    has verified passes ``check_crcs`` False for them. ``hint``: where the record probably starts
    in an uncompressed batch, or -1 (see _record_in_area). The CRC (when checked) is computed
    on every call: the caller keeps no Batch to remember it in. Errors carry position 0 (the
    batch's start), as a Batch over ``batch`` would."""
    cdef int64_t base_offset = <int64_t>load_u64(batch + BASE_OFFSET_POSITION)
    cdef int32_t last_delta = <int32_t>load_u32(batch + LAST_OFFSET_DELTA_POSITION)
    cdef int32_t count = <int32_t>load_u32(batch + RECORDS_COUNT_POSITION)
    cdef int16_t attributes = <int16_t>load_u16(batch + ATTRIBUTES_POSITION)
    cdef int64_t last_offset
    cdef uint32_t computed
    if attributes & COMPRESSION_CODEC_MASK:
        view = PyMemoryView_FromMemory(<char *>batch, size, PyBUF_READ)
        whole = Batch(view)
        try:
            return whole.record_at(offset, check_crcs=check_crcs,
                                   max_decompressed_bytes=max_decompressed_bytes)
        finally:
            whole = None
            view.release()
    if seglog_add_overflows(base_offset, last_delta, &last_offset) or last_offset == INT64_MAX_C:
        # What Batch(view) (the compressed path, and the twin) raises for this header.
        raise CorruptRecordError(
            f"batch at position 0 has base offset {base_offset} and last offset delta "
            f"{last_delta}: its last offset overflows an int64",
            reason=REASON_BAD_LAST_OFFSET_DELTA, position=0,
        )
    if check_crcs:
        if size - ATTRIBUTES_POSITION < NOGIL_BYTES_MIN:
            computed = seglog_crc32c(0, batch + ATTRIBUTES_POSITION,
                                     <size_t>(size - ATTRIBUTES_POSITION))
        else:
            with nogil:
                computed = seglog_crc32c(0, batch + ATTRIBUTES_POSITION,
                                         <size_t>(size - ATTRIBUTES_POSITION))
        if computed != load_u32(batch + CRC_POSITION):
            raise CorruptRecordError(
                f"batch at position 0 is corrupt: stored crc {load_u32(batch + CRC_POSITION):#010x}, "
                f"computed {computed:#010x}",
                reason=REASON_CRC_MISMATCH, position=0,
            )
    if offset < base_offset or offset > last_offset:
        return None
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
    if count == 0:
        return None
    return _record_in_area(batch, RECORD_BATCH_OVERHEAD, size, count, base_offset,
                           <int64_t>load_u64(batch + BASE_TIMESTAMP_POSITION),
                           <int64_t>load_u64(batch + MAX_TIMESTAMP_POSITION),
                           (attributes & TIMESTAMP_TYPE_MASK) != 0, offset, hint)


@cython.final
cdef class _BatchIterator:
    """Iterator of :func:`iter_batches` (Kafka's FileLogInputStream rules)."""
    cdef _Buffer _buffer
    cdef Py_ssize_t _position
    cdef int64_t _max_batch_bytes
    cdef bint _check_offsets
    cdef int64_t _next_offset_min

    def __iter__(self):
        return self

    def __next__(self):
        cdef Batch batch = _next_batch(self._buffer, &self._position, self._max_batch_bytes)
        if batch is None:
            raise StopIteration
        if self._check_offsets:
            _check_offsets_increase(batch, &self._next_offset_min)
        return batch


cdef int32_t _frame_at(_Buffer owner, Py_ssize_t *position, int64_t max_batch_bytes) except -2:
    """Kafka's ``FileLogInputStream.nextBatch`` checks for the batch at position[0] (the twin's
    ``_frame_at``): its batch_length, or -1 when the buffer ends before the batch does (fewer
    than 17 bytes left, or a torn tail). Raises CorruptRecordError in iter_batches' order."""
    cdef Py_ssize_t at = position[0]
    cdef int32_t batch_length
    if owner.size - at < HEADER_SIZE_UP_TO_MAGIC:
        return -1
    _check_batch_length(owner.data, at, max_batch_bytes)
    batch_length = <int32_t>load_u32(owner.data + at + BATCH_LENGTH_POSITION)
    if LOG_OVERHEAD + <Py_ssize_t>batch_length > owner.size - at:
        return -1
    _check_magic_and_header(owner.data, at, batch_length)
    return batch_length


cdef Batch _next_batch(_Buffer owner, Py_ssize_t *position, int64_t max_batch_bytes):
    """The batch at position[0] (advancing it), or None at the end / at a torn tail."""
    cdef int32_t batch_length = _frame_at(owner, position, max_batch_bytes)
    cdef Batch batch
    if batch_length < 0:
        return None
    batch = Batch.__new__(Batch)
    batch._fill(owner, position[0])
    position[0] += LOG_OVERHEAD + batch_length
    return batch


def iter_batches(buffer, *, max_batch_bytes=None, check_offsets=False):
    """Iterate a :class:`Batch` for each whole batch in ``buffer`` (any C-contiguous
    bytes-like).

    Kafka's ``FileLogInputStream`` rules, in this order at each batch: fewer than 17 bytes
    left -> stop; batch_length < 14 -> CorruptRecordError (REASON_BATCH_TOO_SMALL);
    batch_length > ``max_batch_bytes`` -> CorruptRecordError (REASON_BATCH_TOO_LARGE); the
    batch runs past the buffer -> stop (a torn tail is invisible, not an error); magic != 2 ->
    CorruptRecordError (REASON_BAD_MAGIC); batch_length < 49 -> CorruptRecordError
    (REASON_BATCH_TOO_SMALL); base_offset + last_offset_delta outside an int64 (or the next
    offset past it) -> CorruptRecordError (REASON_BAD_LAST_OFFSET_DELTA). Every error carries
    the batch's ``position``. CRCs and records are not checked here.

    ``check_offsets`` (default False): each batch's base_offset must be >= 0 for the first and
    >= the previous batch's last_offset + 1 after it, and its last_offset_delta >= 0, else
    CorruptRecordError (REASON_OFFSETS_NOT_INCREASING) when that batch is reached (the base
    offset lies outside the CRC). ``max_batch_bytes``: None or an int >= 0. TypeError for a
    buffer that is not C-contiguous bytes-like or a ``max_batch_bytes`` that is not an int,
    ValueError for a negative one, raised by this call. As the twin.
    """
    cdef _BatchIterator iterator = _BatchIterator.__new__(_BatchIterator)
    iterator._buffer = _acquire(buffer)
    limit = _size_argument("max_batch_bytes", max_batch_bytes, True)
    iterator._position = 0
    # Clamped by _size_argument to sys.maxsize, which an int64 holds; -1 means no limit.
    iterator._max_batch_bytes = -1 if limit is None else limit
    iterator._check_offsets = bool(check_offsets)
    iterator._next_offset_min = 0
    return iterator


# ================================================================================================
# Columns
# ================================================================================================

@cython.final
cdef class Columns:
    """Records of one or more batches as numpy columns, with no per-record Python objects.

    ``offsets``, ``timestamps_ms``, ``key_positions`` and ``value_positions`` are int64 arrays;
    ``key_lengths`` and ``value_lengths`` int32 arrays. A null key or value has length -1 and
    position -1. ``data`` is the read-only bytes-like object the positions index (see
    :func:`decode_columns`). ``len(columns)`` is the record count; ``key(i)``/``value(i)``
    give one record's key/value as ``bytes`` or None (IndexError out of range; negative ``i``
    counts from the end).
    """

    cdef public object offsets
    cdef public object timestamps_ms
    cdef public object key_positions
    cdef public object key_lengths
    cdef public object value_positions
    cdef public object value_lengths
    cdef public object data

    def __init__(self, *, offsets, timestamps_ms, key_positions, key_lengths, value_positions,
                 value_lengths, data):
        self.offsets = offsets
        self.timestamps_ms = timestamps_ms
        self.key_positions = key_positions
        self.key_lengths = key_lengths
        self.value_positions = value_positions
        self.value_lengths = value_lengths
        self.data = data

    def __len__(self):
        return len(self.offsets)

    cdef object _field(self, positions, lengths, index):
        length = int(lengths[index])
        if length < 0:
            return None
        position = int(positions[index])
        return bytes(self.data[position : position + length])

    def key(self, index):
        """The key of record ``index`` as bytes, or None when it is null."""
        return self._field(self.key_positions, self.key_lengths, index)

    def value(self, index):
        """The value of record ``index`` as bytes, or None when it is null."""
        return self._field(self.value_positions, self.value_lengths, index)

    def __repr__(self):
        if len(self):
            span = f"offsets {int(self.offsets[0])}..{int(self.offsets[-1])}"
        else:
            span = "empty"
        return f"<Columns {len(self)} records, {span}, {len(self.data)} data bytes>"


cdef enum:
    COLUMN_BYTES_PER_RECORD = 40   # 4 int64 columns + 2 int32 columns
    SPARE_BLOCKS_MAX = 2
    SPARE_BLOCK_BYTES_MIN = 1 << 20


ctypedef struct ColumnsTarget:
    # The six columns of a _ColumnsBuilder as plain pointers (read without the GIL, possibly on
    # a worker thread): see _ColumnsBuilder for the layout.
    int64_t *offsets
    int64_t *timestamps
    int64_t *key_positions
    int64_t *value_positions
    int32_t *key_lengths
    int32_t *value_lengths
    Py_ssize_t capacity


ctypedef struct AreaTask:
    # One record area to parse into the columns at index ``at`` (room for ``bound`` records).
    Py_ssize_t start
    Py_ssize_t end
    int32_t count
    Py_ssize_t bound
    Py_ssize_t at
    int64_t base_offset
    int64_t base_timestamp
    int64_t max_timestamp
    bint log_append_time
    # The threaded decode checks the batch's CRC on the worker thread first (check_crc):
    # data[crc_start:crc_start + crc_bytes] must hash to crc_expected.
    bint check_crc
    Py_ssize_t crc_start
    size_t crc_bytes
    uint32_t crc_expected


# Column blocks kept for reuse (see _column_block). Touched with the GIL held only.
cdef list _spare_blocks = []


cdef object _column_block(Py_ssize_t size_bytes):
    """A numpy uint8 block of at least ``size_bytes`` for a _ColumnsBuilder.

    Fresh memory costs a page fault and zeroing per 4 KiB on first touch (~2 ns per record of
    columns at 40 B/record on the development VM, a fifth of a large decode), so blocks of 1 MiB
    or more are remembered (at most two) and handed out again once nothing else references
    them: a block whose only reference is this list has no live Columns, array or buffer
    export left (every numpy view holds its base). A spare block is reused for a request of
    a quarter of its size or more; the cost is up to two such blocks kept after their
    Columns are gone."""
    cdef Py_ssize_t i
    cdef PyObject *item
    for i in range(len(_spare_blocks)):
        item = PyList_GET_ITEM(_spare_blocks, i)
        if _Py_REFCNT(item) == 1:
            nbytes = (<object>item).nbytes
            if size_bytes <= nbytes <= 4 * size_bytes:
                return <object>item
    np = _np()
    block = np.empty(size_bytes, dtype=np.uint8)
    if size_bytes >= SPARE_BLOCK_BYTES_MIN:
        if len(_spare_blocks) < SPARE_BLOCKS_MAX:
            _spare_blocks.append(block)
        else:
            # Replace the smallest unused spare, and only by a larger block: a small decode
            # must not push out the block that large ones reuse.
            smallest, smallest_bytes = -1, size_bytes
            for i in range(len(_spare_blocks)):
                item = PyList_GET_ITEM(_spare_blocks, i)
                if _Py_REFCNT(item) == 1 and (<object>item).nbytes < smallest_bytes:
                    smallest, smallest_bytes = i, (<object>item).nbytes
            if smallest >= 0:
                _spare_blocks[smallest] = block
    return block


@cython.final
cdef class _ColumnsBuilder:
    """The six columns, parsed into straight by the C parser, batch by batch.

    They live in one numpy uint8 block (capacity C records): offsets, timestamps, key
    positions, value positions (int64, 8C bytes each), then key and value lengths (int32, 4C
    each); the final arrays are views of it. One allocation instead of six matters: fresh
    memory costs a page fault per 4 KiB, and numpy asks for transparent huge pages for blocks
    of 4 MiB or more. Each decompressed area is kept with the chunk it belongs to, to build the
    data buffer and shift positions into it at the end."""
    cdef object block
    cdef int64_t *offsets
    cdef int64_t *timestamps
    cdef int64_t *key_positions
    cdef int64_t *value_positions
    cdef int32_t *key_lengths
    cdef int32_t *value_lengths
    cdef Py_ssize_t count
    cdef Py_ssize_t capacity
    cdef list chunks            # (batch, decompressed bytes or None, first record, record count)
    cdef bint any_decompressed
    cdef bint plain             # a bytearray block, never finished into Columns (no numpy)

    def __cinit__(self, Py_ssize_t capacity_hint, bint plain=False):
        self.chunks = []
        self.plain = plain
        self._grow(capacity_hint if capacity_hint > 0 else 0)

    cdef int _grow(self, Py_ssize_t capacity) except -1:
        cdef Py_buffer view
        cdef unsigned char *base
        cdef Py_ssize_t n = self.count
        if self.plain:
            block = bytearray(capacity * COLUMN_BYTES_PER_RECORD + 8)
        else:
            block = _column_block(capacity * COLUMN_BYTES_PER_RECORD + 8)
        PyObject_GetBuffer(block, &view, PyBUF_SIMPLE)
        base = <unsigned char *>view.buf
        PyBuffer_Release(&view)  # the block is kept alive in self.block
        if n:
            memcpy(base, self.offsets, n * 8)
            memcpy(base + 8 * capacity, self.timestamps, n * 8)
            memcpy(base + 16 * capacity, self.key_positions, n * 8)
            memcpy(base + 24 * capacity, self.value_positions, n * 8)
            memcpy(base + 32 * capacity, self.key_lengths, n * 4)
            memcpy(base + 36 * capacity, self.value_lengths, n * 4)
        self.block = block
        self.offsets = <int64_t *>base
        self.timestamps = <int64_t *>(base + 8 * capacity)
        self.key_positions = <int64_t *>(base + 16 * capacity)
        self.value_positions = <int64_t *>(base + 24 * capacity)
        self.key_lengths = <int32_t *>(base + 32 * capacity)
        self.value_lengths = <int32_t *>(base + 36 * capacity)
        self.capacity = capacity
        return 0

    cdef int add_batch(self, Batch batch, Py_ssize_t decompressed_limit) except -1:
        """Parse all records of ``batch`` into the arrays (errors as Batch.records; the CRC is
        the caller's)."""
        cdef const unsigned char *data
        cdef Py_ssize_t start, end, bound, parsed_count
        cdef int32_t count
        cdef ParseFailure failure
        owner = batch._area(&data, &start, &end, decompressed_limit)
        count = batch.record_count
        if count == 0:
            return 0
        bound = (end - start) // RECORD_BYTES_MIN + 1
        if bound > count:
            bound = count
        if self.count + bound > self.capacity:
            self._grow(max(self.count + bound, 2 * self.capacity))
        if bound >= NOGIL_RECORDS_MIN:
            with nogil:
                parsed_count = _parse_into(self, data, start, end, count, bound, batch, &failure)
        else:
            parsed_count = _parse_into(self, data, start, end, count, bound, batch, &failure)
        if parsed_count < 0:
            _raise_parse_failure(&failure)
        self.chunks.append((batch, owner, self.count, parsed_count))
        if owner is not None:
            self.any_decompressed = True
        self.count += parsed_count
        return 0

    cdef Columns finish(self, _Buffer whole, Py_ssize_t max_records):
        cdef Py_ssize_t n = self.count
        cdef Py_ssize_t shift, data_bytes = 0, first, k, index, c = self.capacity
        cdef Py_ssize_t area_start, area_end
        cdef Batch batch
        cdef Columns columns
        if 0 <= max_records < n:
            n = max_records
        if self.any_decompressed:
            # Positions move from each chunk's own buffer into the concatenation of the areas.
            pieces = []
            for batch, owner, first, k in self.chunks:
                if owner is None:
                    area_start = batch.position + RECORD_BATCH_OVERHEAD
                    area_end = batch.position + LOG_OVERHEAD + <Py_ssize_t>batch.batch_length
                    pieces.append(PyBytes_FromStringAndSize(
                        <const char *>whole.data + area_start, area_end - area_start))
                else:
                    area_start, area_end = 0, len(owner)
                    pieces.append(owner)
                shift = data_bytes - area_start
                for index in range(first, first + k):
                    if self.key_lengths[index] >= 0:
                        self.key_positions[index] += shift
                    if self.value_lengths[index] >= 0:
                        self.value_positions[index] += shift
                data_bytes += area_end - area_start
            data = b"".join(pieces)
        else:
            data = whole.readonly_view()
        block = self.block
        columns = Columns.__new__(Columns)
        np = _np()
        columns.offsets = block[0 : 8 * n].view(np.int64)
        columns.timestamps_ms = block[8 * c : 8 * c + 8 * n].view(np.int64)
        columns.key_positions = block[16 * c : 16 * c + 8 * n].view(np.int64)
        columns.value_positions = block[24 * c : 24 * c + 8 * n].view(np.int64)
        columns.key_lengths = block[32 * c : 32 * c + 4 * n].view(np.int32)
        columns.value_lengths = block[36 * c : 36 * c + 4 * n].view(np.int32)
        columns.data = data
        return columns


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline Py_ssize_t _parse_run(const unsigned char *data, Py_ssize_t *position_io,
                                  Py_ssize_t end, Py_ssize_t i, Py_ssize_t limit,
                                  uint64_t base_offset, uint64_t base_timestamp,
                                  bint log_append_time, int64_t max_timestamp,
                                  int64_t *columns64, int32_t *columns32,
                                  Py_ssize_t stride) noexcept nogil:
    """Parse records i, i+1, ... (below ``limit``) of the common shape into the columns,
    from ``position_io[0]``; stop at the first record of another shape (or near the end of
    the area) and return the index reached, with ``position_io`` at that record. Never fails:
    the caller parses the record it stopped at with the checked ``_parse_record``.

    The columns are the builder's block: int64 offsets, timestamps, key positions and value
    positions at ``columns64 + k * stride`` and int32 key and value lengths at ``columns32 +
    k * stride`` (one pointer each keeps the loop in registers).

    The common shape: length, timestamp delta, offset delta, key length and value length of
    1 or 2 bytes, no headers, 16 bytes readable from the record's start. Its fields come out
    of three 8-byte loads by shifts (``_uvarint2``, no load per byte), lengths are checked
    on the raw zig-zag value (odd: negative), and the next record's position is taken from
    the length alone: one load and one varint from record to record, while the checks of
    each record's fields (in bounds, ending exactly at the body end, as ``_parse_record``)
    run beside that chain. ~5 ns/record instead of ~9 ns."""
    cdef Py_ssize_t position = position_io[0], body_start, body_end, at
    cdef Py_ssize_t key_position, value_position
    cdef uint64_t word, u, timestamp_u, offset_u
    cdef unsigned int n
    cdef int64_t key_length, value_length
    while i < limit and end - position >= 16:
        __builtin_prefetch(data + position + 2048)
        if not _uvarint2(seglog_load_le64(data + position), &n, &u) or (u & 1) or u < 2:
            break
        body_start = position + n
        body_end = body_start + <Py_ssize_t>(u >> 1)
        if body_end > end:
            break
        # After the attributes byte: timestamp delta, offset delta, key length (<= 6 bytes;
        # body_start + 9 <= position + 11 <= end).
        word = seglog_load_le64(data + body_start + 1)
        at = body_start + 1
        if not _uvarint2(word, &n, &timestamp_u):
            break
        at += n
        word >>= 8 * n
        if not _uvarint2(word, &n, &offset_u):
            break
        at += n
        word >>= 8 * n
        if not _uvarint2(word, &n, &u):
            break
        at += n
        if u & 1:  # Kafka reads any negative length as null
            key_position = key_length = -1
        else:
            key_length = <int64_t>(u >> 1)
            if key_length > body_end - at:
                break
            key_position = at
            at += key_length
        if end - at < 8 or not _uvarint2(seglog_load_le64(data + at), &n, &u):
            break
        at += n
        if u & 1:
            value_position = value_length = -1
        else:
            value_length = <int64_t>(u >> 1)
            if value_length > body_end - at - 1:
                break
            value_position = at
            at += value_length
        if at + 1 != body_end or data[at] != 0:  # header count 0, fields end at the body end
            break
        columns64[i] = <int64_t>(base_offset + <uint64_t>_unzigzag(offset_u))
        columns64[i + stride] = max_timestamp if log_append_time else \
            <int64_t>(base_timestamp + <uint64_t>_unzigzag(timestamp_u))
        columns64[i + 2 * stride] = key_position
        columns64[i + 3 * stride] = value_position
        columns32[i] = <int32_t>key_length
        columns32[i + stride] = <int32_t>value_length
        position = body_end
        i += 1
    position_io[0] = position
    return i


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _parse_into(_ColumnsBuilder builder, const unsigned char *data, Py_ssize_t start,
                            Py_ssize_t end, int32_t count, Py_ssize_t bound, Batch batch,
                            ParseFailure *failure) noexcept nogil:
    """Parse ``count`` records of one area into the builder's arrays from index builder.count
    (room for ``bound`` records is reserved). Returns the records parsed, or -1."""
    cdef ColumnsTarget target
    cdef AreaTask task
    target.offsets = builder.offsets
    target.timestamps = builder.timestamps
    target.key_positions = builder.key_positions
    target.value_positions = builder.value_positions
    target.key_lengths = builder.key_lengths
    target.value_lengths = builder.value_lengths
    target.capacity = builder.capacity
    task.start = start
    task.end = end
    task.count = count
    task.bound = bound
    task.at = builder.count
    task.base_offset = batch.base_offset
    task.base_timestamp = batch.base_timestamp_ms
    task.max_timestamp = batch.max_timestamp_ms
    task.log_append_time = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
    return _parse_area(&target, data, &task, failure)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _parse_area(const ColumnsTarget *target, const unsigned char *data,
                            const AreaTask *task, ParseFailure *failure) noexcept nogil:
    """Parse ``task.count`` records of data[task.start:task.end] into the columns from index
    ``task.at`` (room for ``task.bound`` records is reserved there). Returns the records
    parsed, or -1 with ``failure`` filled in. Touches no Python object (the threaded decode
    runs it on a worker thread). Runs of common-shape records go through ``_parse_run``; any
    other record through the checked ``_parse_record`` (which also reports every error)."""
    cdef Py_ssize_t start = task.start, end = task.end, bound = task.bound, at = task.at
    cdef int32_t count = task.count
    cdef Py_ssize_t position = start, next_position, i = 0
    cdef Py_ssize_t limit = count if count < bound else bound
    cdef ParsedRecord parsed
    cdef bint log_append_time = task.log_append_time
    cdef uint64_t base_offset = <uint64_t>task.base_offset
    cdef uint64_t base_timestamp = <uint64_t>task.base_timestamp
    cdef int64_t max_timestamp = task.max_timestamp
    cdef int64_t *offsets = target.offsets + at
    cdef int64_t *timestamps = target.timestamps + at
    cdef int64_t *key_positions = target.key_positions + at
    cdef int32_t *key_lengths = target.key_lengths + at
    cdef int64_t *value_positions = target.value_positions + at
    cdef int32_t *value_lengths = target.value_lengths + at
    memset(&parsed, 0, sizeof(parsed))
    while True:
        i = _parse_run(data, &position, end, i, limit, base_offset, base_timestamp,
                       log_append_time, max_timestamp, offsets, key_lengths,
                       target.capacity)
        if i >= count:
            break
        # Records are read front to back but only their framing is touched; ask for the
        # cache lines a few records ahead (prefetch never faults, even past the end).
        __builtin_prefetch(data + position + 2048)
        next_position = _parse_record(data, position, end, &parsed, failure)
        if next_position < 0:
            return -1
        position = next_position
        if i >= bound:  # unreachable: each record takes >= 7 bytes
            failure.code = E_PREMATURE_EOF
            return -1
        offsets[i] = <int64_t>(base_offset + <uint64_t><int64_t>parsed.offset_delta)
        if log_append_time:
            timestamps[i] = max_timestamp
        else:
            timestamps[i] = <int64_t>(base_timestamp + <uint64_t>parsed.timestamp_delta)
        key_positions[i] = parsed.key_position
        key_lengths[i] = parsed.key_length
        value_positions[i] = parsed.value_position
        value_lengths[i] = parsed.value_length
        i += 1
    if position != end:
        failure.code = E_RECORDS_REMAINING
        return -1
    return count


cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef void *(*_thread_start)(void *) noexcept nogil
    int pthread_create(pthread_t *thread, const void *attributes, _thread_start start,
                       void *argument)
    int pthread_join(pthread_t thread, void **result)


# decode_columns parses on two threads when the buffer has at least this many bytes and at
# least this many batches to parse (module attributes, so a test can lower them).
_THREADED_BYTES_MIN = 8 << 20
_THREADED_BATCHES_MIN = 8

# Decodes that took the two-thread path (a test checks it was taken). GIL held.
cdef Py_ssize_t _threaded_decodes = 0


def _threaded_decode_count():
    """How many decode_columns calls parsed on two threads (for tests)."""
    return _threaded_decodes


ctypedef struct _HalfJob:
    # A run of tasks [first, stop) parsed by one thread; ``failed`` is the index of the task
    # that failed (-1: none), with ``failure`` filled in.
    const ColumnsTarget *target
    const unsigned char *data
    const AreaTask *tasks
    Py_ssize_t first
    Py_ssize_t stop
    Py_ssize_t failed
    ParseFailure failure


cdef void _parse_half(_HalfJob *job) noexcept nogil:
    cdef Py_ssize_t k
    cdef const AreaTask *task
    job.failed = -1
    for k in range(job.first, job.stop):
        task = &job.tasks[k]
        # A CRC mismatch fails the run like a parse error: the single-threaded decode then
        # raises it in batch order.
        if task.check_crc and seglog_crc32c(0, job.data + task.crc_start,
                                            task.crc_bytes) != task.crc_expected:
            job.failed = k
            return
        if _parse_area(job.target, job.data, task, &job.failure) < 0:
            job.failed = k
            return


cdef void *_parse_half_thread(void *job) noexcept nogil:
    _parse_half(<_HalfJob *>job)
    return NULL


cdef bint _decode_threaded(_Buffer owner, _ColumnsBuilder builder, Py_ssize_t limit,
                           bint check_crcs, bint check_offsets) except -1:
    """decode_columns' two-thread path: fill the empty ``builder`` with every record of
    ``owner`` and return True, or return False with the builder untouched (the caller then
    takes the single-threaded path, which raises what it raises).

    The batches are walked first (as decode_columns' loop walks them); the path is taken
    only when that walk raises nothing, at least _THREADED_BATCHES_MIN batches are to be
    parsed, none of them is compressed, every record_count is >= 0 and fits its area (each
    record takes >= 7 bytes, so a count that does not is an error), the limit (if any) is
    not below the total and the builder has room for it. Each batch then has a known slice
    of the columns (index ``at``, ``count`` records), and the batches are split in two runs
    of about equal record-area bytes: the second run is parsed on a new POSIX thread while
    this one parses the first, both without the GIL, into disjoint slices of the block. A
    parse succeeds with exactly ``count`` records or fails; on any failure (in either run)
    everything is dropped and False returned, so the single-threaded path raises the first
    error in batch order, as always. If the thread cannot be created, the second run is
    parsed here after the first.

    ``check_offsets`` is checked in the walk and ``check_crcs`` too for the batches that are
    not parsed (control, empty); the parsed batches' CRCs are computed by the thread that
    parses them, just before it does, so the hashing is split over the two threads as well. A
    mismatch anywhere returns False (the single-threaded decode raises it)."""
    global _threaded_decodes
    cdef Py_ssize_t position = 0, n, k, split, total = 0, area_bytes = 0, half, seen
    cdef list batches = []
    cdef Batch batch
    cdef AreaTask *tasks
    cdef AreaTask *task
    cdef ColumnsTarget target
    cdef _HalfJob first_run, second_run
    cdef pthread_t thread
    cdef int started
    cdef int64_t next_offset_min = 0
    try:
        while True:
            batch = _next_batch(owner, &position, -1)
            if batch is None:
                break
            if check_offsets:
                _check_offsets_increase(batch, &next_offset_min)
            if batch.attributes & CONTROL_FLAG_MASK or batch.record_count == 0:
                if check_crcs:
                    batch._check_crc()
                continue
            if batch.record_count < 0 or batch.attributes & COMPRESSION_CODEC_MASK:
                return False
            batches.append(batch)
    except Exception:
        return False  # the single-threaded walk raises it, after the batches before it
    n = len(batches)
    if n < 2 or n < _THREADED_BATCHES_MIN:
        return False
    tasks = <AreaTask *>PyMem_Malloc(n * sizeof(AreaTask))
    if tasks == NULL:
        return False
    try:
        for k in range(n):
            batch = <Batch>PyList_GET_ITEM(batches, k)
            task = &tasks[k]
            task.start = batch.position + RECORD_BATCH_OVERHEAD
            task.end = batch.position + LOG_OVERHEAD + <Py_ssize_t>batch.batch_length
            task.count = batch.record_count
            if task.count > (task.end - task.start) // RECORD_BYTES_MIN + 1:
                return False
            task.bound = task.count
            task.at = total
            task.base_offset = batch.base_offset
            task.base_timestamp = batch.base_timestamp_ms
            task.max_timestamp = batch.max_timestamp_ms
            task.log_append_time = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
            task.check_crc = check_crcs
            task.crc_start = batch.position + ATTRIBUTES_POSITION
            task.crc_bytes = <size_t>(task.end - task.crc_start)
            task.crc_expected = batch.crc
            total += task.count
            area_bytes += task.end - task.start
        if 0 <= limit < total or total > builder.capacity:
            return False
        # The first run: the batches before the one at which half the area bytes were seen.
        half = area_bytes // 2
        seen = 0
        split = n - 1
        for k in range(n):
            if seen >= half:
                split = k
                break
            seen += tasks[k].end - tasks[k].start
        if split < 1:
            split = 1
        target.offsets = builder.offsets
        target.timestamps = builder.timestamps
        target.key_positions = builder.key_positions
        target.value_positions = builder.value_positions
        target.key_lengths = builder.key_lengths
        target.value_lengths = builder.value_lengths
        target.capacity = builder.capacity
        first_run.target = second_run.target = &target
        first_run.data = second_run.data = owner.data
        first_run.tasks = second_run.tasks = tasks
        first_run.first, first_run.stop = 0, split
        second_run.first, second_run.stop = split, n
        with nogil:
            started = pthread_create(&thread, NULL, _parse_half_thread, &second_run)
            _parse_half(&first_run)
            if started == 0:
                pthread_join(thread, NULL)
            else:
                _parse_half(&second_run)
        if first_run.failed >= 0 or second_run.failed >= 0:
            return False
        for k in range(n):
            builder.chunks.append((<object>PyList_GET_ITEM(batches, k), None, tasks[k].at,
                                   <Py_ssize_t>tasks[k].count))
        builder.count = total
        _threaded_decodes += 1
        return True
    finally:
        PyMem_Free(tasks)


def decode_columns(buffer, *, max_records=None, check_crcs=True, check_offsets=False,
                   max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
    """All records of every whole batch in ``buffer`` as one :class:`Columns`.

    Batches are walked as by :func:`iter_batches` (same errors; a torn tail ends the walk;
    ``check_offsets`` as there). Control batches and batches with record_count 0 are skipped.
    Batches are decoded whole until at least ``max_records`` records were collected, then the
    columns are cut to ``max_records`` (0 decodes nothing; None means no limit).

    ``check_crcs`` (default True): every batch walked before the limit is reached, control and
    empty batches included, has its CRC32C checked first (CorruptRecordError,
    REASON_CRC_MISMATCH); ``max_decompressed_bytes`` bounds each compressed record area as in
    :meth:`Batch.records`. TypeError for a ``max_records`` or ``max_decompressed_bytes`` that
    is not an int (None allowed for ``max_records``), ValueError for a negative one.

    ``data``: if nothing was decompressed, a read-only memoryview of the whole ``buffer``
    (positions are absolute in it; zero-copy); otherwise ``bytes`` holding, in batch order, the
    record area of every decoded batch (decompressed, or copied as is), and positions index
    that. Raises as :meth:`Batch.records`. Uncompressed record areas are parsed (and their
    CRCs computed) without the GIL.

    Large inputs are parsed on two threads: when ``buffer`` holds at least 8 MiB
    (``_THREADED_BYTES_MIN``) and at least 8 batches to decode (``_THREADED_BATCHES_MIN``), all
    uncompressed with record counts that fit their areas (and ``max_records``, if given, not
    below their total), the batches are split in two halves by bytes and the second half is
    parsed on a worker thread while the calling thread parses the first, each into its own
    slice of the columns. The result is identical to the single-threaded decode; on any error
    (or anything else unusual) the single-threaded decode runs instead and raises the first
    error in batch order.
    """
    cdef Py_ssize_t limit = -1, position = 0, hint = 0, at = 0, bound, decompressed_limit
    cdef int32_t batch_length, count
    cdef int64_t next_offset_min = 0
    cdef _Buffer owner
    cdef _ColumnsBuilder builder
    cdef Batch batch
    cdef bint c_check_crcs = bool(check_crcs), c_check_offsets = bool(check_offsets)
    max_records = _size_argument("max_records", max_records, True)
    if max_records is not None:
        limit = max_records
    decompressed_limit = _decompressed_limit(max_decompressed_bytes)
    owner = _acquire(buffer)
    # Capacity hint: the declared record counts of the whole batches, each bounded by its size
    # (no errors here; the real walk below raises them in the twin's order).
    while owner.size - at >= RECORD_BATCH_OVERHEAD:
        batch_length = <int32_t>load_u32(owner.data + at + BATCH_LENGTH_POSITION)
        if batch_length < BATCH_LENGTH_MIN_V2 or LOG_OVERHEAD + <Py_ssize_t>batch_length > owner.size - at:
            break
        count = <int32_t>load_u32(owner.data + at + RECORDS_COUNT_POSITION)
        if count > 0:
            if owner.data[at + ATTRIBUTES_POSITION + 1] & COMPRESSION_CODEC_MASK:
                bound = 65536  # unknown until decompressed; the builder grows if needed
            else:
                bound = batch_length // RECORD_BYTES_MIN + 1
            hint += count if count < bound else bound
        at += LOG_OVERHEAD + batch_length
    if limit >= 0 and hint > limit + 65536:
        hint = limit + 65536
    builder = _ColumnsBuilder(hint)
    if owner.size >= _THREADED_BYTES_MIN and _decode_threaded(
            owner, builder, limit, c_check_crcs, c_check_offsets):
        return builder.finish(owner, limit)
    while True:
        # The next header (and its offsets) is checked before the limit, as the twin's loop
        # over iter_batches; the CRC after it.
        batch = _next_batch(owner, &position, -1)
        if batch is None:
            break
        if c_check_offsets:
            _check_offsets_increase(batch, &next_offset_min)
        if limit >= 0 and builder.count >= limit:
            break
        if c_check_crcs:
            batch._check_crc()
        if batch.attributes & CONTROL_FLAG_MASK or batch.record_count == 0:
            continue
        builder.add_batch(batch, decompressed_limit)
    return builder.finish(owner, limit)


# ================================================================================================
# Encoding
# ================================================================================================

@cython.final
cdef class _Column:
    """Pointers and lengths of one column (values, keys or encoded headers) of ``n`` records,
    with every buffer export and object they point into held until the column is freed."""
    cdef const unsigned char **pointers
    cdef Py_ssize_t *lengths          # -1 for null
    cdef Py_ssize_t n
    cdef Py_buffer *held
    cdef Py_ssize_t held_count
    cdef Py_ssize_t held_capacity
    cdef list keep
    cdef bint nogil_safe              # pointers do not depend on a mutable Python container

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.held_count):
            PyBuffer_Release(&self.held[i])
        PyMem_Free(self.held)
        PyMem_Free(self.pointers)
        PyMem_Free(self.lengths)

    cdef int _allocate(self, Py_ssize_t n) except -1:
        self.n = n
        self.pointers = <const unsigned char **>PyMem_Malloc((n if n else 1) * sizeof(void *))
        self.lengths = <Py_ssize_t *>PyMem_Malloc((n if n else 1) * sizeof(Py_ssize_t))
        if self.pointers == NULL or self.lengths == NULL:
            raise MemoryError()
        self.keep = []
        return 0

    cdef Py_buffer *_hold(self) except NULL:
        """A slot for one more buffer export. The array is allocated once with room for every
        record (plus two for numpy inputs) and never moved: a Py_buffer may point into itself
        (``shape = &len``)."""
        if self.held == NULL:
            self.held_capacity = self.n + 2
            self.held = <Py_buffer *>PyMem_Malloc(self.held_capacity * sizeof(Py_buffer))
            if self.held == NULL:
                raise MemoryError()
        if self.held_count >= self.held_capacity:
            raise AssertionError("more buffer exports than records")
        return &self.held[self.held_count]


cdef bint _is_data_and_lengths(column):
    # The twin's rule: any 2-tuple whose second item is a numpy array is (data, lengths), and
    # lengths that are not a 1-D integer array are then an error.
    return isinstance(column, tuple) and len(column) == 2 and _is_ndarray(column[1])


cdef int _check_lengths_array(lengths, str what) except -1:
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise InvalidRecordError(
            f"the lengths of a (data, lengths) {what} column must be a 1-D integer numpy "
            f"array, got {lengths.ndim}-D {lengths.dtype}"
        )
    return 0


cdef int _export_item(_Column column, Py_ssize_t index, object item, str what) except -1:
    """Point column[index] at a bytes-like ``item`` that is not exactly ``bytes``."""
    cdef Py_buffer *slot = column._hold()
    try:
        PyObject_GetBuffer(item, slot, PyBUF_FULL_RO)
    except (TypeError, BufferError):
        raise InvalidRecordError(
            f"{what} of record {index} is {type(item).__name__}, expected a bytes-like object "
            "or None"
        ) from None
    column.held_count += 1
    if not PyBuffer_IsContiguous(slot, b'C'):
        raise InvalidRecordError(f"{what} of record {index} is not a C-contiguous buffer")
    column.pointers[index] = <const unsigned char *>slot.buf
    column.lengths[index] = slot.len
    return 0


cdef _Column _make_column(object source, str what):
    """Gather a values/keys argument into a _Column; the twin's ``_column_items`` rules and
    errors. No per-record Python work for numpy inputs; for a list only a type check per item."""
    if _is_ndarray(source) and source.ndim != 1:
        return _array_column(source, what)
    if _is_data_and_lengths(source):
        return _data_and_lengths_column(source[0], source[1], what)
    if isinstance(source, (str, int)) or source is None:
        raise InvalidRecordError(
            f"{what}s must be a sequence, a 2-D uint8 array or (data, lengths), not "
            f"{type(source).__name__}"
        )
    if type(source) is not list and type(source) is not tuple:
        try:
            source = list(source)
        except TypeError:
            raise InvalidRecordError(
                f"{what}s must be a sequence, a 2-D uint8 array or (data, lengths), not "
                f"{type(source).__name__}"
            ) from None
    return _sequence_column(source, what)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Column _array_column(object source, str what):
    """A 2-D C-contiguous uint8 array: one row per record, pointers computed without the GIL."""
    cdef _Column column = _Column.__new__(_Column)
    cdef Py_ssize_t n, i, row_bytes
    cdef Py_buffer *slot
    cdef const unsigned char *base
    np = _np()
    if source.ndim != 2 or source.dtype != np.uint8 or not source.flags.c_contiguous:
        raise InvalidRecordError(
            f"a numpy array of {what}s must be 2-D C-contiguous uint8, got "
            f"{source.ndim}-D {source.dtype}"
            f"{'' if source.flags.c_contiguous else ' (not C-contiguous)'}"
        )
    n = source.shape[0]
    row_bytes = source.shape[1]
    column._allocate(n)
    slot = column._hold()
    PyObject_GetBuffer(source, slot, PyBUF_SIMPLE)
    column.held_count += 1
    base = <const unsigned char *>slot.buf
    with nogil:
        for i in range(n):
            column.pointers[i] = base + i * row_bytes
            column.lengths[i] = row_bytes
    column.nogil_safe = True
    return column


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Column _data_and_lengths_column(object data, object length_array, str what):
    """``(data, lengths)``: records cut from one buffer in order, -1 a null; the lengths are
    checked against the data's size without the GIL."""
    cdef _Column column = _Column.__new__(_Column)
    cdef Py_ssize_t n, i, position, data_bytes
    cdef Py_buffer *slot
    cdef const unsigned char *base
    cdef const int64_t *lengths
    cdef int64_t length
    np = _np()
    _check_lengths_array(length_array, what)
    if length_array.dtype.kind == "u" and length_array.dtype.itemsize >= 8:
        # uint64 lengths above INT64_MAX would wrap to negatives (-1: null) in the int64
        # copy below; clamped they fail the data-size check as they do in the twin.
        length_array = np.minimum(length_array, np.uint64(INT64_MAX))
    length_array = np.ascontiguousarray(length_array, dtype=np.int64)
    n = length_array.shape[0]
    column._allocate(n)
    slot = column._hold()
    try:
        PyObject_GetBuffer(data, slot, PyBUF_SIMPLE)
    except (TypeError, BufferError):
        raise InvalidRecordError(
            f"the data of a (data, lengths) {what} column is {type(data).__name__}, "
            "expected a C-contiguous bytes-like object"
        ) from None
    column.held_count += 1
    base = <const unsigned char *>slot.buf
    data_bytes = slot.len
    slot = column._hold()
    PyObject_GetBuffer(length_array, slot, PyBUF_SIMPLE)
    column.held_count += 1
    lengths = <const int64_t *>slot.buf
    position = 0
    i = -1
    with nogil:
        for i in range(n):
            length = lengths[i]
            if length == -1:
                column.pointers[i] = NULL
                column.lengths[i] = -1
                continue
            if length < -1 or length > data_bytes - position:
                break
            column.pointers[i] = base + position
            column.lengths[i] = length
            position += length
        else:
            i = n
    if i < n:
        length = lengths[i]
        if length < -1:
            raise InvalidRecordError(f"{what} length of record {i} is {length}, below -1")
        raise InvalidRecordError(
            f"{what} lengths add up to more than the {data_bytes} bytes of data "
            f"(at record {i})"
        )
    column.nogil_safe = True
    return column


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Column _sequence_column(object source, str what):
    """A list or tuple of bytes-like objects or None: ``bytes`` items are pointed at directly,
    others are buffer exports held by the column."""
    cdef _Column column = _Column.__new__(_Column)
    cdef Py_ssize_t n = len(source), i
    cdef PyObject *item
    cdef PyObject **items
    column._allocate(n)
    column.keep.append(source)
    items = _seq_items(source)
    for i in range(n):
        item = items[i]
        if _is_bytes_exact(item):
            column.pointers[i] = <const unsigned char *>_bytes_data(item)
            column.lengths[i] = _bytes_size(item)
        elif item == _Py_None:
            column.pointers[i] = NULL
            column.lengths[i] = -1
        else:
            _export_item(column, i, <object>item, what)
    # A list could be mutated by another thread once the GIL is released; keep it.
    column.nogil_safe = False
    return column


cdef bytes _header_block(record_headers, Py_ssize_t index):
    """The encoded header count and headers of one record (the twin's rules and errors)."""
    if record_headers is None:
        return b"\x00"
    try:
        pairs = list(record_headers)
    except TypeError:
        raise InvalidRecordError(
            f"headers of record {index} must be a sequence of (str, bytes | None) pairs, not "
            f"{type(record_headers).__name__}"
        ) from None
    parts = [_varint_bytes(len(pairs))]
    for header_index, pair in enumerate(pairs):
        try:
            key, value = pair
        except (TypeError, ValueError):
            raise InvalidRecordError(
                f"header {header_index} of record {index} is not a (str, bytes | None) pair"
            ) from None
        if not isinstance(key, str):
            raise InvalidRecordError(
                f"header key {header_index} of record {index} is {type(key).__name__}, "
                "expected str (a null header key is illegal)"
            )
        try:
            key_bytes = key.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRecordError(
                f"header key {header_index} of record {index} is not encodable as UTF-8: {exc}"
            ) from None
        parts.append(_varint_bytes(len(key_bytes)))
        parts.append(key_bytes)
        if value is None:
            parts.append(b"\x01")  # varint -1
        else:
            value = _header_value_bytes(value, index, header_index)
            parts.append(_varint_bytes(len(value)))
            parts.append(value)
    return b"".join(parts)


cdef bytes _header_value_bytes(value, Py_ssize_t index, Py_ssize_t header_index):
    if type(value) is bytes:
        return value
    try:
        view = memoryview(value)
    except TypeError:
        raise InvalidRecordError(
            f"header value {header_index} of record {index} is {type(value).__name__}, "
            "expected a bytes-like object or None"
        ) from None
    if not view.c_contiguous:
        raise InvalidRecordError(
            f"header value {header_index} of record {index} is not a C-contiguous buffer"
        )
    return view.tobytes()


cdef bytes _varint_bytes(Py_ssize_t value):
    cdef unsigned char scratch[VARINT_BYTES_MAX]
    cdef unsigned char *end
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    end = write_varint(scratch, <int32_t>value)
    return PyBytes_FromStringAndSize(<char *>scratch, end - scratch)


cdef _Column _headers_column(headers, Py_ssize_t record_count):
    cdef _Column column
    cdef Py_ssize_t i
    cdef bytes block
    if isinstance(headers, (str, bytes)):
        raise InvalidRecordError("headers must be one sequence of pairs per record")
    headers = list(headers)
    if len(headers) != record_count:
        raise InvalidRecordError(f"got {len(headers)} header lists for {record_count} values")
    column = _Column.__new__(_Column)
    column._allocate(record_count)
    for i in range(record_count):
        block = _header_block(headers[i], i)
        column.keep.append(block)
        column.pointers[i] = <const unsigned char *>PyBytes_AS_STRING(block)
        column.lengths[i] = PyBytes_GET_SIZE(block)
    column.nogil_safe = True  # the blocks are immutable bytes held in column.keep
    return column


@cython.final
cdef class _Timestamps:
    cdef int64_t *values       # NULL: every record has `constant`
    cdef int64_t constant
    cdef object keep

    def __dealloc__(self):
        if self.keep is None:
            PyMem_Free(self.values)


cdef int64_t _timestamp_value(stamp, Py_ssize_t index) except? -2:
    try:
        stamp = operator.index(stamp)
    except TypeError:
        raise InvalidTimestampError(
            f"timestamp of record {index} is {type(stamp).__name__}, expected an int"
        ) from None
    if not -1 <= stamp <= INT64_MAX:
        raise InvalidTimestampError(
            f"timestamp of record {index} is {stamp}; timestamps are -1 or in [0, 2**63)"
        )
    return stamp


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Timestamps _make_timestamps(timestamps_ms, Py_ssize_t record_count):
    """The twin's ``_timestamps`` rules: None -> one clock read; an int -> every record; a
    sequence or array -> one per record; each -1 or in [0, 2**63)."""
    cdef _Timestamps result = _Timestamps.__new__(_Timestamps)
    cdef Py_buffer view
    cdef const int64_t *source
    cdef Py_ssize_t i, bad = -1
    if timestamps_ms is None:
        result.constant = seglog_now_ms()
        return result
    if (_is_ndarray(timestamps_ms) and timestamps_ms.ndim == 1
            and timestamps_ms.dtype == _np().int64):
        if timestamps_ms.shape[0] != record_count:
            raise InvalidRecordError(
                f"got {timestamps_ms.shape[0]} timestamps for {record_count} records"
            )
        array = _np().ascontiguousarray(timestamps_ms)
        result.keep = array
        PyObject_GetBuffer(array, &view, PyBUF_SIMPLE)
        result.values = <int64_t *>view.buf  # alive while `keep` holds the array
        PyBuffer_Release(&view)
        source = result.values
        with nogil:
            for i in range(record_count):
                if source[i] < -1:
                    bad = i
                    break
        if bad >= 0:
            _timestamp_value(int(source[bad]), bad)
        return result
    if _is_ndarray(timestamps_ms):
        timestamps_ms = timestamps_ms.tolist()
    if isinstance(timestamps_ms, (list, tuple)) or (
        hasattr(timestamps_ms, "__len__") and hasattr(timestamps_ms, "__getitem__")
    ):
        stamps = timestamps_ms if type(timestamps_ms) is list else list(timestamps_ms)
        if len(stamps) != record_count:
            raise InvalidRecordError(f"got {len(stamps)} timestamps for {record_count} records")
        result.values = <int64_t *>PyMem_Malloc((record_count if record_count else 1) * sizeof(int64_t))
        if result.values == NULL:
            raise MemoryError()
        for i in range(record_count):
            result.values[i] = _timestamp_value(stamps[i], i)
        return result
    result.constant = _timestamp_value(timestamps_ms, 0)
    return result


@cython.final
cdef class _OffsetDeltas:
    """Each record's offset delta: NULL means 0..n-1 (the usual batch)."""
    cdef int32_t *values

    def __dealloc__(self):
        PyMem_Free(self.values)


cdef tuple _offset_deltas(offset_deltas, last_offset_delta, Py_ssize_t record_count):
    """``(deltas, last_offset_delta)``, the twin's ``_offset_deltas`` rules and errors (used by
    the cleaner to rebuild batches with the original offsets; not a hot path)."""
    cdef _OffsetDeltas result = _OffsetDeltas.__new__(_OffsetDeltas)
    cdef Py_ssize_t index
    if offset_deltas is None:
        last = record_count - 1
    else:
        if _is_ndarray(offset_deltas):
            if offset_deltas.ndim != 1 or offset_deltas.dtype.kind not in "iu":
                raise InvalidRecordError("offset_deltas must be a 1-D integer array")
            offset_deltas = offset_deltas.tolist()
        try:
            deltas = [operator.index(delta) for delta in offset_deltas]
        except TypeError:
            raise InvalidRecordError("offset_deltas must be a sequence of ints") from None
        if len(deltas) != record_count:
            raise InvalidRecordError(
                f"got {len(deltas)} offset deltas for {record_count} records"
            )
        previous = -1
        for index, delta in enumerate(deltas):
            if not previous < delta <= INT32_MAX:
                raise InvalidRecordError(
                    f"offset delta of record {index} is {delta}; deltas must be strictly "
                    f"increasing ints in [0, {INT32_MAX}]"
                )
            previous = delta
        result.values = <int32_t *>PyMem_Malloc(record_count * sizeof(int32_t))
        if result.values == NULL:
            raise MemoryError()
        for index in range(record_count):
            result.values[index] = deltas[index]
        last = deltas[-1]
    if last_offset_delta is not None:
        last = _check_range("last_offset_delta", last_offset_delta, last, INT32_MAX)
    return result, last


cdef object _check_range(str name, value, low, high):
    try:
        value = operator.index(value)
    except TypeError:
        raise InvalidRecordError(f"{name} must be an int, got {type(value).__name__}") from None
    if not low <= value <= high:
        raise InvalidRecordError(f"{name} must be in [{low}, {high}], got {value}")
    return value


cdef inline Py_ssize_t _field_bytes(Py_ssize_t length) noexcept nogil:
    # length varint + bytes; a null (-1) is the one-byte varint 0x01
    if length < 0:
        return 1
    return varint_size(<int32_t>length) + length


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _size_records(Py_ssize_t n, _Column values, _Column keys, _Column headers,
                              _Timestamps stamps, int64_t base_timestamp,
                              const int32_t *offset_deltas, int32_t *bodies,
                              Py_ssize_t *failed_index, int *failure) noexcept nogil:
    """First pass: every record's body size into ``bodies``; returns the record area's size,
    or -1 with failure 1 (timestamp delta overflows int64) or 2 (area too large)."""
    cdef Py_ssize_t i, body, total = 0
    cdef int64_t delta, stamp = stamps.constant
    cdef const Py_ssize_t *value_lengths = values.lengths
    cdef const Py_ssize_t *key_lengths = keys.lengths if keys is not None else NULL
    cdef const Py_ssize_t *header_lengths = headers.lengths if headers is not None else NULL
    cdef const int64_t *stamp_values = stamps.values
    for i in range(n):
        if stamp_values != NULL:
            stamp = stamp_values[i]
        if seglog_sub_overflows(stamp, base_timestamp, &delta):
            failed_index[0] = i
            failure[0] = 1
            return -1
        body = (1 + varlong_size(delta)
                + varint_size(offset_deltas[i] if offset_deltas != NULL else <int32_t>i)
                + (_field_bytes(key_lengths[i]) if key_lengths != NULL else 1)
                + _field_bytes(value_lengths[i])
                + (header_lengths[i] if header_lengths != NULL else 1))
        if body > RECORD_AREA_BYTES_MAX - total:
            failed_index[0] = i
            failure[0] = 2
            return -1
        bodies[i] = <int32_t>body
        total += varint_size(<int32_t>body) + body
        if total > RECORD_AREA_BYTES_MAX:
            failed_index[0] = i
            failure[0] = 2
            return -1
    return total


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _write_records(unsigned char *out, Py_ssize_t n, _Column values, _Column keys,
                         _Column headers, _Timestamps stamps, int64_t base_timestamp,
                         const int32_t *offset_deltas, const int32_t *bodies) noexcept nogil:
    """Second pass: write the records, sized by _size_records, from ``out``."""
    cdef Py_ssize_t i, length
    cdef int64_t stamp = stamps.constant
    cdef const Py_ssize_t *value_lengths = values.lengths
    cdef const unsigned char **value_pointers = values.pointers
    cdef const Py_ssize_t *key_lengths = keys.lengths if keys is not None else NULL
    cdef const unsigned char **key_pointers = keys.pointers if keys is not None else NULL
    cdef const Py_ssize_t *header_lengths = headers.lengths if headers is not None else NULL
    cdef const unsigned char **header_pointers = headers.pointers if headers is not None else NULL
    cdef const int64_t *stamp_values = stamps.values
    for i in range(n):
        if stamp_values != NULL:
            stamp = stamp_values[i]
        out = write_varint(out, bodies[i])
        out[0] = 0  # record attributes: unused by Kafka, always 0
        out = write_varlong(out + 1, stamp - base_timestamp)
        out = write_varint(out, offset_deltas[i] if offset_deltas != NULL else <int32_t>i)
        if key_lengths == NULL:
            out[0] = 1  # varint -1: null key
            out += 1
        else:
            length = key_lengths[i]
            out = write_varint(out, <int32_t>length)
            if length > 0:
                memcpy(out, key_pointers[i], length)
                out += length
        length = value_lengths[i]
        out = write_varint(out, <int32_t>length)
        if length > 0:
            memcpy(out, value_pointers[i], length)
            out += length
        if header_lengths == NULL:
            out[0] = 0  # no headers
            out += 1
        else:
            memcpy(out, header_pointers[i], header_lengths[i])
            out += header_lengths[i]


cdef struct _HeaderFields:
    # The checked batch header fields but the length and CRC (written last, by _write_header).
    int64_t base_offset
    int32_t partition_leader_epoch
    int16_t attributes
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t record_count


cdef void _write_header(unsigned char *out, Py_ssize_t batch_bytes,
                        const _HeaderFields *fields) noexcept nogil:
    """The 61-byte header at ``out``, then its CRC over attributes..end (the records are
    already written after it)."""
    store_u64(out + BASE_OFFSET_POSITION, <uint64_t>fields.base_offset)
    store_u32(out + BATCH_LENGTH_POSITION, <uint32_t>(batch_bytes - LOG_OVERHEAD))
    store_u32(out + PARTITION_LEADER_EPOCH_POSITION, <uint32_t>fields.partition_leader_epoch)
    out[MAGIC_POSITION] = MAGIC_V2
    store_u16(out + ATTRIBUTES_POSITION, <uint16_t>fields.attributes)
    store_u32(out + LAST_OFFSET_DELTA_POSITION, <uint32_t>fields.last_offset_delta)
    store_u64(out + BASE_TIMESTAMP_POSITION, <uint64_t>fields.base_timestamp)
    store_u64(out + MAX_TIMESTAMP_POSITION, <uint64_t>fields.max_timestamp)
    store_u64(out + PRODUCER_ID_POSITION, <uint64_t>fields.producer_id)
    store_u16(out + PRODUCER_EPOCH_POSITION, <uint16_t>fields.producer_epoch)
    store_u32(out + BASE_SEQUENCE_POSITION, <uint32_t>fields.base_sequence)
    store_u32(out + RECORDS_COUNT_POSITION, <uint32_t>fields.record_count)
    store_u32(out + CRC_POSITION, seglog_crc32c(
        0, out + ATTRIBUTES_POSITION, <size_t>(batch_bytes - ATTRIBUTES_POSITION)))


@cython.final
@cython.freelist(8)
cdef class _RecordsToEncode:
    """The checked record columns of one batch (step 1 of _encode), then each record's body
    size (step 3, ``bodies``, owned here and freed with the object)."""
    cdef _Column values
    cdef _Column keys                 # None: every key null
    cdef _Column headers              # None: no record has headers
    cdef _Timestamps stamps
    cdef _OffsetDeltas deltas
    cdef Py_ssize_t n
    cdef int32_t last_offset_delta
    cdef bint release_gil             # every column may be read without the GIL
    cdef int32_t *bodies

    def __dealloc__(self):
        PyMem_Free(self.bodies)


cdef int _compression_id(compression, compression_level) except -1:
    """The codec id of ``compression``, its level checked (the twin's order of errors)."""
    cdef int cid
    if compression is None or (type(compression) is str and compression == "none"):
        cid = COMPRESSION_NONE
    else:
        cid = _compression.codec_id(compression)
    if compression_level is not None:
        _compression.check_level(cid, compression_level)
    return cid


cdef _RecordsToEncode _gather_records(values, keys, timestamps_ms, headers, offset_deltas,
                                      last_offset_delta):
    """Step 1: the values, keys, headers, timestamps and offset deltas as C arrays, checked in
    the twin's order (values first: they give the record count)."""
    cdef _RecordsToEncode records = _RecordsToEncode.__new__(_RecordsToEncode)
    cdef Py_ssize_t n
    records.values = _make_column(values, "value")
    n = records.n = records.values.n
    if n == 0:
        raise InvalidRecordError("a batch needs at least one record")
    if n > INT32_MAX_:
        raise RecordTooLargeError(f"{n} records do not fit one batch")
    if keys is not None:
        records.keys = _make_column(keys, "key")
        if records.keys.n != n:
            raise InvalidRecordError(f"got {records.keys.n} keys for {n} values")
    if headers is not None:
        records.headers = _headers_column(headers, n)
    records.stamps = _make_timestamps(timestamps_ms, n)
    records.deltas, last = _offset_deltas(offset_deltas, last_offset_delta, n)
    records.last_offset_delta = last
    records.release_gil = (records.values.nogil_safe
                           and (records.keys is None or records.keys.nogil_safe))
    return records


cdef int _check_header_fields(_HeaderFields *fields, _RecordsToEncode records, int cid,
                              base_offset, timestamp_type, producer_id, producer_epoch,
                              base_sequence, is_transactional, bint is_control,
                              partition_leader_epoch, delete_horizon_ms) except -1:
    """Step 2: every header argument checked as a Python int (no OverflowError), the
    attributes, and the base and max timestamps (the base is the delete horizon when set)."""
    cdef Py_ssize_t i
    cdef const int64_t *stamps = records.stamps.values
    cdef int64_t max_timestamp
    # INT64_MAX - 1: the next offset after the batch must be an int64 too (as the twin).
    fields.base_offset = _check_range("base_offset", base_offset, 0,
                                      INT64_MAX - 1 - records.last_offset_delta)
    timestamp_type = _check_range("timestamp_type", timestamp_type, TIMESTAMP_TYPE_CREATE_TIME,
                                  TIMESTAMP_TYPE_LOG_APPEND_TIME)
    fields.producer_id = _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
    fields.producer_epoch = _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
    fields.base_sequence = _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
    fields.partition_leader_epoch = _check_range(
        "partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX)
    delete_horizon = _check_range("delete_horizon_ms", delete_horizon_ms, -1, INT64_MAX)
    fields.last_offset_delta = records.last_offset_delta
    fields.record_count = <int32_t>records.n

    fields.attributes = <int16_t>cid
    if timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME:
        fields.attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        fields.attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        fields.attributes |= CONTROL_FLAG_MASK
    if stamps == NULL:
        fields.max_timestamp = fields.base_timestamp = records.stamps.constant
    else:
        max_timestamp = stamps[0]  # a local: stores through `fields` could alias `stamps`
        for i in range(1, records.n):
            if stamps[i] > max_timestamp:
                max_timestamp = stamps[i]
        fields.max_timestamp = max_timestamp
        fields.base_timestamp = stamps[0]
    if delete_horizon >= 0:
        fields.attributes |= DELETE_HORIZON_FLAG_MASK
        fields.base_timestamp = delete_horizon
    return 0


cdef Py_ssize_t _size_all_records(_RecordsToEncode records, int64_t base_timestamp) except -1:
    """Step 3: every record's body size into ``records.bodies`` (the GIL released when no
    column points into a list); returns the record area's size, or raises as the twin."""
    cdef Py_ssize_t area_bytes, failed_index = -1
    cdef int failure = 0
    records.bodies = <int32_t *>PyMem_Malloc(records.n * sizeof(int32_t))
    if records.bodies == NULL:
        raise MemoryError()
    if records.release_gil:
        with nogil:
            area_bytes = _size_records(records.n, records.values, records.keys, records.headers,
                                       records.stamps, base_timestamp, records.deltas.values,
                                       records.bodies, &failed_index, &failure)
    else:
        area_bytes = _size_records(records.n, records.values, records.keys, records.headers,
                                   records.stamps, base_timestamp, records.deltas.values,
                                   records.bodies, &failed_index, &failure)
    if area_bytes >= 0:
        return area_bytes
    if failure == 1:
        stamp = (records.stamps.values[failed_index] if records.stamps.values != NULL
                 else records.stamps.constant)
        raise InvalidTimestampError(
            f"timestamp of record {failed_index} is {stamp}, too far from the base "
            f"timestamp {base_timestamp}"
        )
    raise RecordTooLargeError(
        f"record {failed_index} makes the batch larger than {INT32_MAX} bytes"
    )


cdef bytes _write_uncompressed(_RecordsToEncode records, const _HeaderFields *fields,
                               Py_ssize_t area_bytes):
    """Step 4 without compression: records and header straight into the output bytes, with
    the GIL released when the columns allow it (or, for the header's CRC, when the batch is
    large enough to be worth it)."""
    cdef Py_ssize_t batch_bytes = RECORD_BATCH_OVERHEAD + area_bytes
    cdef bytes out = PyBytes_FromStringAndSize(NULL, batch_bytes)
    cdef unsigned char *p = <unsigned char *>PyBytes_AS_STRING(out)
    if records.release_gil:
        with nogil:
            _write_records(p + RECORD_BATCH_OVERHEAD, records.n, records.values, records.keys,
                           records.headers, records.stamps, fields.base_timestamp,
                           records.deltas.values, records.bodies)
            _write_header(p, batch_bytes, fields)
        return out
    _write_records(p + RECORD_BATCH_OVERHEAD, records.n, records.values, records.keys,
                   records.headers, records.stamps, fields.base_timestamp,
                   records.deltas.values, records.bodies)
    if batch_bytes >= NOGIL_BYTES_MIN:
        with nogil:
            _write_header(p, batch_bytes, fields)
    else:
        _write_header(p, batch_bytes, fields)
    return out


cdef bytes _write_compressed(_RecordsToEncode records, const _HeaderFields *fields,
                             Py_ssize_t area_bytes, int cid, compression_level):
    """Step 4 with compression: the record area into a scratch bytes, compressed through
    seglog.compression (as the twin), then header and compressed area into the output."""
    cdef bytes out, area = PyBytes_FromStringAndSize(NULL, area_bytes)
    cdef unsigned char *p
    cdef Py_ssize_t batch_bytes
    _write_records(<unsigned char *>PyBytes_AS_STRING(area), records.n, records.values,
                   records.keys, records.headers, records.stamps, fields.base_timestamp,
                   records.deltas.values, records.bodies)
    PyMem_Free(records.bodies)  # not needed while compressing
    records.bodies = NULL
    compressed = _compression.compress(cid, area, compression_level)
    del area
    if len(compressed) > RECORD_AREA_BYTES_MAX:
        raise RecordTooLargeError("the compressed batch is larger than 2 GiB")
    batch_bytes = RECORD_BATCH_OVERHEAD + len(compressed)
    out = PyBytes_FromStringAndSize(NULL, batch_bytes)
    p = <unsigned char *>PyBytes_AS_STRING(out)
    _copy_into(p + RECORD_BATCH_OVERHEAD, compressed)
    with nogil:
        _write_header(p, batch_bytes, fields)
    return out


cdef bytes _encode(values, keys, timestamps_ms, headers, base_offset, compression,
                   compression_level, timestamp_type, producer_id, producer_epoch,
                   base_sequence, is_transactional, bint is_control, partition_leader_epoch,
                   delete_horizon_ms, offset_deltas=None, last_offset_delta=None):
    """One batch, in the twin's steps and order of errors: the compression codec, the record
    columns, the header fields, the record sizes, then records, (compression,) header, CRC."""
    cdef int cid = _compression_id(compression, compression_level)
    cdef _RecordsToEncode records = _gather_records(values, keys, timestamps_ms, headers,
                                                    offset_deltas, last_offset_delta)
    cdef _HeaderFields fields
    cdef Py_ssize_t area_bytes
    _check_header_fields(&fields, records, cid, base_offset, timestamp_type, producer_id,
                         producer_epoch, base_sequence, is_transactional, is_control,
                         partition_leader_epoch, delete_horizon_ms)
    area_bytes = _size_all_records(records, fields.base_timestamp)
    if cid == COMPRESSION_NONE:
        return _write_uncompressed(records, &fields, area_bytes)
    return _write_compressed(records, &fields, area_bytes, cid, compression_level)


cdef int _copy_into(unsigned char *destination, object source) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(source, &view, PyBUF_SIMPLE)
    memcpy(destination, view.buf, view.len)
    PyBuffer_Release(&view)
    return 0


def encode_batch(
    values,
    keys=None,
    timestamps_ms=None,
    headers=None,
    *,
    base_offset=0,
    compression="none",
    compression_level=None,
    timestamp_type=0,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    is_transactional=False,
    partition_leader_epoch=-1,
    delete_horizon_ms=-1,
    offset_deltas=None,
    last_offset_delta=None,
):
    """Encode one RecordBatch v2 (magic 2) and return its bytes; byte-identical to
    ``seglog.pure.codec.encode_batch`` (see its docstring for the rules and errors).

    ``values``/``keys``: a sequence of bytes-like objects or None; a 2-D C-contiguous uint8
    numpy array (one row per record); or ``(data, lengths)``: one bytes-like buffer and a 1-D
    integer numpy array of lengths (-1 = null). ``keys`` None means every key is null.
    ``timestamps_ms``: None (the wall clock, read once per batch), one int for every record,
    or a sequence/int64 array. ``headers``: None or, per record, None or a sequence of
    ``(str, bytes | None)`` pairs. ``offset_deltas``/``last_offset_delta`` (for the cleaner):
    None, or each record's ``offset - base_offset`` (strictly increasing) and the header's
    lastOffsetDelta. Numpy inputs are sized, copied and checksummed without the
    GIL; a list is read with the GIL held (another thread could mutate it).

    Raises InvalidRecordError, InvalidTimestampError, UnsupportedCompressionError,
    TypeError/ValueError (compression level) and RecordTooLargeError exactly as the twin;
    never OverflowError (every number is checked as a Python int before it is converted).
    """
    return _encode(values, keys, timestamps_ms, headers, base_offset, compression,
                   compression_level, timestamp_type, producer_id, producer_epoch,
                   base_sequence, is_transactional, False, partition_leader_epoch,
                   delete_horizon_ms, offset_deltas, last_offset_delta)


def encode_control_batch(
    control_type,
    *,
    producer_id,
    producer_epoch,
    coordinator_epoch=0,
    base_offset=0,
    timestamp_ms=None,
    partition_leader_epoch=-1,
    timestamp_type=TIMESTAMP_TYPE_CREATE_TIME,
    delete_horizon_ms=-1,
):
    """A 78-byte transactional control batch holding one end-transaction marker
    (``control_type`` the int 0 ABORT or 1 COMMIT, else InvalidRecordError); as the twin,
    ``timestamp_type`` and ``delete_horizon_ms`` (the cleaner's rebuilt marker) included."""
    try:
        control_type = operator.index(control_type)
    except TypeError:
        control_type = None  # 1.0, "1", None: not an int, so not a marker type either
    if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError("an end-transaction marker is ABORT (0) or COMMIT (1)")
    coordinator_epoch = _check_range("coordinator_epoch", coordinator_epoch, INT32_MIN, INT32_MAX)
    key = CONTROL_KEY.pack(CONTROL_RECORD_VERSION, control_type)
    value = END_TXN_MARKER_VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch)
    return _encode([value], [key], timestamp_ms, None, base_offset, COMPRESSION_NONE, None,
                   timestamp_type, producer_id, producer_epoch, -1, True, True,
                   partition_leader_epoch, delete_horizon_ms)
