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

Layout: this file and the parts it ``include``s, in this order (all in src/_native/):

====================================  ======================================================
``codec.pyx``                         this docstring; every cimport and import; the C helpers,
                                      constants and messages the parts share
``codec_arguments.pxi``               the twin's argument rules; buffer exports (_Buffer)
``codec_records.pxi``                 Record, ConsumerRecord; record parse errors and
                                      headers; one record by offset (batch_record_at,
                                      cimported by segment)
``codec_validation.pxi``              a batch's framing checks (FileLogInputStream's rules)
``codec_batch.pxi``                   Batch: the decoded header, its CRC check, its decoders
``codec_iteration.pxi``               iter_batches: a buffer walked batch by batch
``codec_columns.pxi``                 Columns, their builder, the parser into columns
``codec_decode_columns.pxi``          decode_columns and its two-thread path
``codec_encode_inputs.pxi``           encode step 1: the arguments as checked C arrays
``codec_encode_header.pxi``           encode step 2, and the header and CRC written last
``codec_encode_records.pxi``          encode steps 3-4: records sized, then written
``codec_compression.pxi``             the glue to seglog.compression, both ways
``codec_encode.pxi``                  encode_batch, encode_control_batch: the steps in order
====================================  ======================================================

Why ``include`` (as asyncpg's ``protocol.pyx`` includes a dozen small files) and not modules
linked by ``cimport`` through ``.pxd`` files, which house style rule 4 prefers: the parts are
not modules. They read the private C attributes of each other's cdef classes (Batch,
_ColumnsBuilder, _Column, _RecordsToEncode) and call each other's cdef functions in the hot
loops, which in one C file are static functions the compiler can inline; as modules they would
call through Cython's ``__pyx_capi__`` pointers, and ``seglog._native.codec`` (its public
names, ``codec.pyi`` and ``codec.pxd``, the ``__module__`` that pickling records) would become
several modules. Rule 4's worry, a giant include chain, is answered by keeping the chain one
level deep: only this file includes, and a part includes, imports and cimports nothing, so the
layout test (tests/test_layout.py reads this file's imports) sees every import of the module.
tests/twins/test_native_linking.py checks both and holds each part under a line budget. Build:
cythonize tracks included files, so a changed part rebuilds the module; MANIFEST.in ships the
parts in the sdist.
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
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, _Py_REFCNT
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from seglog._native._crc32c cimport seglog_crc32c
from _bigendian cimport *
from varint cimport *
from _records cimport *

import operator
import os
import sys
import time

from seglog import compression as _compression
from seglog.compression import DECOMPRESSED_BYTES_MAX_DEFAULT, check_max_decompressed_bytes
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    SeglogError,
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
# The parts, in dependency order: C types (ctypedef struct, cdef enum) are declared before the
# parts that use them; cdef classes and functions may be used before their part.
# ================================================================================================

include "codec_arguments.pxi"
include "codec_records.pxi"
include "codec_validation.pxi"
include "codec_batch.pxi"
include "codec_iteration.pxi"
include "codec_columns.pxi"
include "codec_decode_columns.pxi"
include "codec_encode_inputs.pxi"
include "codec_encode_header.pxi"
include "codec_encode_records.pxi"
include "codec_compression.pxi"
include "codec_encode.pxi"
