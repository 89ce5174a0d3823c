# cython: boundscheck=False, wraparound=False, cdivision=True
"""Kafka's request framing on the broker's hot path, in C: the request header, the common
Produce request and its answer (issue 27: the broker's CPU per produced record).

Each reader is a *fast path*: it returns the fields of a well-formed request of the common
shape and None for anything else (a truncated or malformed frame, a client id or topic name
that is not UTF-8, a non-empty tagged-field section, a Produce request of several topics or
partitions). The caller's full parser then reads that request and gives its answer or its
refusal, so there is one source of the protocol's error rules; a fast path may decline, never
disagree. The pure twin is :mod:`seglog.pure.wire`: same names, same answers.

* :func:`read_request_header`: request header v1 (``flexible`` False) or v2.
* :func:`read_produce_single`: a Produce request body (v3-v13) of one topic with one partition.
* :func:`encode_produce_single`: the body of the Produce response to such a request when the
  partition's answer has no record errors nor message (a success, or an error without text).
* :func:`frame_buffer`: a bytearray, not zeroed, for a large request the connection fills as
  it arrives (one copy of its bytes, none of zeroes).
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from _bigendian cimport load_i16, load_i32, store_i64, store_u32

cdef enum:
    # The smallest request header: key, version, correlation id, client id length.
    REQUEST_HEADER_BYTES_MIN = 10
    PRODUCE_VERSION_MIN = 3
    PRODUCE_VERSION_MAX = 13
    FIRST_FLEXIBLE_PRODUCE = 9
    FIRST_PRODUCE_BY_ID = 13
    TOPIC_ID_BYTES = 16


cdef inline object _utf8(const unsigned char *p, Py_ssize_t length):
    """The UTF-8 text at ``p``, or None when it is not UTF-8 (the caller declines)."""
    try:
        return PyUnicode_DecodeUTF8(<const char *>p, length, "strict")
    except UnicodeDecodeError:
        return None


cdef inline Py_ssize_t _compact(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end):
    """A compact length or count (the uvarint minus one: -1 is null) at ``pos[0]``, moving it
    past; -2 for a uvarint that is truncated or beyond an int32 (the caller declines)."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef unsigned char byte
    while pos[0] < end and shift <= 28:
        byte = p[pos[0]]
        pos[0] += 1
        value |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            if value > 0x80000000:
                return -2
            return <Py_ssize_t>value - 1
        shift += 7
    return -2


cdef inline Py_ssize_t _length(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end,
                               bint flexible, int fixed_bytes):
    """A string's or bytes' length (compact when ``flexible``, else a big-endian int16 or
    int32 of ``fixed_bytes``); -2 when it cannot be read."""
    cdef Py_ssize_t value
    if flexible:
        return _compact(p, pos, end)
    if pos[0] + fixed_bytes > end:
        return -2
    value = load_i16(p + pos[0]) if fixed_bytes == 2 else load_i32(p + pos[0])
    pos[0] += fixed_bytes
    return value if value >= -1 else -2


def read_request_header(frame, bint flexible):
    """``(api_key, api_version, correlation_id, client_id, body_offset)`` of the request
    header at the start of ``frame`` (v2 when ``flexible``, with an empty tagged-field
    section; else v1); ``client_id`` None for a null one. None for any other frame: the
    caller's full parser reads it (and refuses what is malformed)."""
    cdef Py_buffer view
    cdef const unsigned char *p
    cdef Py_ssize_t end, position
    cdef int16_t length
    cdef object client_id = None
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        end = view.len
        if end < REQUEST_HEADER_BYTES_MIN:
            return None
        length = load_i16(p + 8)
        position = REQUEST_HEADER_BYTES_MIN
        if length >= 0:
            if position + length > end:
                return None
            client_id = _utf8(p + position, length)
            if client_id is None:
                return None
            position += length
        elif length != -1:
            return None
        if flexible:
            if position >= end or p[position] != 0:
                return None
            position += 1
        return (load_i16(p), load_i16(p + 2), load_i32(p + 4), client_id, position)
    finally:
        PyBuffer_Release(&view)


def read_produce_single(int version, body):
    """``(transactional_id, acks, timeout_ms, topic_name, topic_id, partition, records)`` of a
    Produce request body of ``version`` (3..13) that names one topic with one partition, every
    tagged-field section empty: ``topic_name`` None from v13, ``topic_id`` the 16 bytes of the
    topic's id from v13 (None for the zero uuid, and before v13), ``records`` a view of
    ``body`` (None when null). None for any other body: the caller's full reader reads it."""
    cdef Py_buffer view
    cdef const unsigned char *p
    cdef Py_ssize_t end, pos = 0, length, count, size
    cdef bint flexible = version >= FIRST_FLEXIBLE_PRODUCE
    cdef bint by_id = version >= FIRST_PRODUCE_BY_ID
    cdef int16_t acks
    cdef int32_t timeout_ms, index
    cdef object transactional_id = None, name = None, topic_id = None, records = None
    cdef Py_ssize_t records_start = -1, records_size = 0
    cdef int i
    if version < PRODUCE_VERSION_MIN or version > PRODUCE_VERSION_MAX:
        return None
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        end = view.len
        length = _length(p, &pos, end, flexible, 2)
        if length == -2:
            return None
        if length >= 0:
            if length > end - pos:
                return None
            transactional_id = _utf8(p + pos, length)
            if transactional_id is None:
                return None
            pos += length
        if pos + 6 > end:
            return None
        acks = load_i16(p + pos)
        timeout_ms = load_i32(p + pos + 2)
        pos += 6
        count = _compact(p, &pos, end) if flexible else _length(p, &pos, end, False, 4)
        if count != 1:
            return None
        if by_id:
            if pos + TOPIC_ID_BYTES > end:
                return None
            for i in range(TOPIC_ID_BYTES):
                if p[pos + i] != 0:
                    topic_id = PyBytes_FromStringAndSize(<const char *>(p + pos),
                                                         TOPIC_ID_BYTES)
                    break
            pos += TOPIC_ID_BYTES
        else:
            length = _length(p, &pos, end, flexible, 2)
            if length < 0 or length > end - pos:
                return None
            name = _utf8(p + pos, length)
            if name is None:
                return None
            pos += length
        count = _compact(p, &pos, end) if flexible else _length(p, &pos, end, False, 4)
        if count != 1 or pos + 4 > end:
            return None
        index = load_i32(p + pos)
        pos += 4
        size = _length(p, &pos, end, flexible, 4)
        if size == -2 or size > end - pos:
            return None
        if size >= 0:
            records_start = pos
            records_size = size
            pos += size
        if flexible:
            # The partition's, the topic's and the request's tagged fields: all empty.
            if pos + 3 > end or p[pos] != 0 or p[pos + 1] != 0 or p[pos + 2] != 0:
                return None
    finally:
        PyBuffer_Release(&view)
    if records_start >= 0:
        records = memoryview(body)
        if records.itemsize != 1:  # sliced by bytes, as the buffer was read
            records = records.cast("B")
        records = records[records_start:records_start + records_size]
    return (transactional_id, acks, timeout_ms, name, topic_id, index, records)


cdef inline Py_ssize_t _put_uvarint(unsigned char *out, uint32_t value) noexcept:
    cdef Py_ssize_t n = 0
    while value >= 0x80:
        out[n] = <unsigned char>((value & 0x7F) | 0x80)
        value >>= 7
        n += 1
    out[n] = <unsigned char>value
    return n + 1


cdef inline Py_ssize_t _put_array_of_one(unsigned char *out, bint flexible) noexcept:
    """An array length of one (a compact uvarint 2, else an int32 1); its bytes."""
    if flexible:
        out[0] = 2
        return 1
    store_u32(out, 1)
    return 4


cdef Py_ssize_t _produce_single_bytes(int version, Py_ssize_t name_len) noexcept:
    """The size of :func:`encode_produce_single`'s body (a topic name of ``name_len`` bytes
    before v13), so that it is written into one bytes object of that size."""
    cdef bint flexible = version >= FIRST_FLEXIBLE_PRODUCE
    cdef Py_ssize_t size = 2 if flexible else 8  # the two arrays of one
    cdef uint32_t length = <uint32_t>(name_len + 1)
    if version >= FIRST_PRODUCE_BY_ID:
        size += TOPIC_ID_BYTES
    elif flexible:
        size += name_len + 1  # the compact length's uvarint: one byte per 7 bits
        while length >= 0x80:
            length >>= 7
            size += 1
    else:
        size += 2 + name_len
    size += 22  # index, error code, base offset, log append time
    if version >= 5:
        size += 8  # log start offset
    if version >= 8:
        size += 4 if flexible else 6  # record errors, error message (and tagged fields)
    return size + 4 + (1 if flexible else 0)  # throttle time (and tagged fields)


def encode_produce_single(int version, topic, int partition, int error_code,
                          int64_t base_offset, int64_t log_append_time_ms,
                          int64_t log_start_offset):
    """The body of a Produce response of ``version`` (3..13) with one topic of one partition
    and no throttle: ``topic`` its name (v3-v12; str) or its id's 16 bytes (v13; None for the
    zero uuid); the partition's ``error_code``, ``base_offset``, ``log_append_time_ms`` and
    (v5+) ``log_start_offset``, an empty record-errors array and a null error message (v8+).
    The same bytes as the general encoder's for that answer."""
    cdef bint flexible = version >= FIRST_FLEXIBLE_PRODUCE
    cdef bint by_id = version >= FIRST_PRODUCE_BY_ID
    cdef bytes name_bytes = None
    cdef const unsigned char *name_p = NULL
    cdef Py_ssize_t name_len = 0, n = 0
    cdef Py_buffer id_view
    cdef bytes out
    cdef unsigned char *o
    if version < PRODUCE_VERSION_MIN or version > PRODUCE_VERSION_MAX:
        raise ValueError(f"no Produce response version {version}")
    if not by_id:
        name_bytes = (<str?>topic).encode("utf-8")
        name_len = len(name_bytes)
        if name_len > 0x7FFF:
            raise ValueError("a topic name longer than 32767 bytes")
        name_p = <const unsigned char *>PyBytes_AS_STRING(name_bytes)
    out = PyBytes_FromStringAndSize(NULL, _produce_single_bytes(version, name_len))
    o = <unsigned char *>PyBytes_AS_STRING(out)
    n += _put_array_of_one(o + n, flexible)  # responses: one topic
    if by_id:
        if topic is None:
            memset(o + n, 0, TOPIC_ID_BYTES)
        else:
            PyObject_GetBuffer(topic, &id_view, PyBUF_SIMPLE)
            try:
                if id_view.len != TOPIC_ID_BYTES:
                    raise ValueError("a topic id is 16 bytes")
                memcpy(o + n, id_view.buf, TOPIC_ID_BYTES)
            finally:
                PyBuffer_Release(&id_view)
        n += TOPIC_ID_BYTES
    else:
        if flexible:
            n += _put_uvarint(o + n, <uint32_t>(name_len + 1))
        else:
            o[n] = <unsigned char>(name_len >> 8)
            o[n + 1] = <unsigned char>name_len
            n += 2
        memcpy(o + n, name_p, name_len)
        n += name_len
    n += _put_array_of_one(o + n, flexible)  # its partitions: one
    store_u32(o + n, <uint32_t>partition)
    o[n + 4] = <unsigned char>((<uint32_t>error_code >> 8) & 0xFF)
    o[n + 5] = <unsigned char>(error_code & 0xFF)
    store_i64(o + n + 6, base_offset)
    store_i64(o + n + 14, log_append_time_ms)
    n += 22
    if version >= 5:
        store_i64(o + n, log_start_offset)
        n += 8
    if version >= 8:
        if flexible:
            o[n] = 1  # record errors: an empty compact array
            o[n + 1] = 0  # error message: a null compact string
            o[n + 2] = 0  # the partition's tagged fields
            o[n + 3] = 0  # the topic's tagged fields
            n += 4
        else:
            store_u32(o + n, 0)
            o[n + 4] = 0xFF  # a null string: length -1
            o[n + 5] = 0xFF
            n += 6
    store_u32(o + n, 0)  # throttle_time_ms
    n += 4
    if flexible:
        o[n] = 0  # the response's tagged fields
        n += 1
    assert n == len(out), (n, len(out))  # the size computed up front, written exactly
    return out


def frame_buffer(Py_ssize_t size_bytes):
    """A bytearray of ``size_bytes`` for a request the connection fills as it arrives, not
    zeroed (its contents undefined until written; the pure twin's is zeroed). ValueError for
    a negative size."""
    if size_bytes < 0:
        raise ValueError(f"negative frame size {size_bytes}")
    return PyByteArray_FromStringAndSize(NULL, size_bytes)
