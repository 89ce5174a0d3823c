# Record framing parsed in C, shared by the codec (records(), columns, record_at) and the
# segment (read_record): Kafka's DefaultRecord layout, every read bounds-checked.
#
# A record is: length varint, then a body of that many bytes: attributes (1 byte), timestamp
# delta varlong, offset delta varint, key length varint + key, value length varint + value,
# header count varint + headers. The parsers return positions (or -1 with a ParseFailure
# filled in) and never raise: they run inside `with nogil:` loops, and the caller turns a
# failure into the twin's exception (codec._raise_parse_failure). The twin is
# seglog/pure/codec.py (_parse_record, _find_record).

cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from varint cimport *

ctypedef struct ParsedRecord:
    int64_t timestamp_delta
    int32_t offset_delta
    Py_ssize_t key_position
    int32_t key_length
    Py_ssize_t value_position
    int32_t value_length
    Py_ssize_t headers_position
    int32_t header_count

cdef enum ParseError:
    E_NONE = 0
    E_PREMATURE_EOF
    E_VARINT_TOO_LONG
    E_VARINT_UNDERFLOW
    E_VARLONG_TOO_LONG
    E_VARLONG_UNDERFLOW
    E_BODY_SIZE
    E_NO_ATTRIBUTES
    E_KEY_PAST
    E_VALUE_PAST
    E_HEADER_COUNT_NEGATIVE
    E_HEADER_COUNT_LARGE
    E_HEADER_KEY_NEGATIVE
    E_HEADER_KEY_PAST
    E_HEADER_VALUE_PAST
    E_SIZE_MISMATCH
    E_RECORDS_REMAINING

ctypedef struct ParseFailure:
    int code
    int64_t a
    int64_t b


cdef inline Py_ssize_t _varint_failed(Py_ssize_t code, Py_ssize_t position, bint is_long,
                                      ParseFailure *failure) noexcept nogil:
    if is_long:
        failure.code = E_VARLONG_TOO_LONG if code == VARINT_TOO_LONG else E_VARLONG_UNDERFLOW
    else:
        failure.code = E_VARINT_TOO_LONG if code == VARINT_TOO_LONG else E_VARINT_UNDERFLOW
    failure.a = position
    return -1


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline Py_ssize_t _parse_record(const unsigned char *data, Py_ssize_t position, Py_ssize_t end,
                              ParsedRecord *record, ParseFailure *failure) noexcept nogil:
    """Parse one record at data[position:end] (every read checked against end or the record's
    body end). Returns the position after it, or -1 with ``failure`` filled in. Same checks,
    in the same order, as the twin's ``_parse_records``."""
    cdef int32_t body_size, length, header_count, i
    cdef Py_ssize_t body_start, body_end, next_position
    if position >= end:
        failure.code = E_PREMATURE_EOF
        return -1
    next_position = read_varint(data, position, end, &body_size)
    if next_position < 0:
        return _varint_failed(next_position, position, False, failure)
    position = next_position
    if body_size < 0 or body_size > end - position:
        failure.code = E_BODY_SIZE
        failure.a = body_size
        failure.b = end - position
        return -1
    body_start = position
    body_end = position + body_size
    if body_size < 1:
        failure.code = E_NO_ATTRIBUTES
        return -1
    position += 1  # record attributes: unused, ignored as Kafka does
    next_position = read_varlong(data, position, body_end, &record.timestamp_delta)
    if next_position < 0:
        return _varint_failed(next_position, position, True, failure)
    position = next_position
    next_position = read_varint(data, position, body_end, &record.offset_delta)
    if next_position < 0:
        return _varint_failed(next_position, position, False, failure)
    position = next_position

    next_position = read_varint(data, position, body_end, &length)
    if next_position < 0:
        return _varint_failed(next_position, position, False, failure)
    position = next_position
    if length >= 0:  # Kafka reads any negative length as null
        if length > body_end - position:
            failure.code = E_KEY_PAST
            return -1
        record.key_position = position
        record.key_length = length
        position += length
    else:
        record.key_position = -1
        record.key_length = -1

    next_position = read_varint(data, position, body_end, &length)
    if next_position < 0:
        return _varint_failed(next_position, position, False, failure)
    position = next_position
    if length >= 0:
        if length > body_end - position:
            failure.code = E_VALUE_PAST
            return -1
        record.value_position = position
        record.value_length = length
        position += length
    else:
        record.value_position = -1
        record.value_length = -1

    next_position = read_varint(data, position, body_end, &header_count)
    if next_position < 0:
        return _varint_failed(next_position, position, False, failure)
    position = next_position
    if header_count < 0:
        failure.code = E_HEADER_COUNT_NEGATIVE
        failure.a = header_count
        return -1
    if header_count > body_end - position:
        failure.code = E_HEADER_COUNT_LARGE
        failure.a = header_count
        return -1
    record.headers_position = position
    record.header_count = header_count
    for i in range(header_count):  # bounded: header_count <= bytes left
        next_position = read_varint(data, position, body_end, &length)
        if next_position < 0:
            return _varint_failed(next_position, position, False, failure)
        position = next_position
        if length < 0:
            failure.code = E_HEADER_KEY_NEGATIVE
            failure.a = length
            return -1
        if length > body_end - position:
            failure.code = E_HEADER_KEY_PAST
            return -1
        position += length
        next_position = read_varint(data, position, body_end, &length)
        if next_position < 0:
            return _varint_failed(next_position, position, False, failure)
        position = next_position
        if length >= 0:
            if length > body_end - position:
                failure.code = E_HEADER_VALUE_PAST
                return -1
            position += length
    if position != body_end:
        failure.code = E_SIZE_MISMATCH
        failure.a = body_size
        failure.b = position - body_start
        return -1
    return position


cdef enum:
    RECORD_NOT_FOUND = -2


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline Py_ssize_t _find_record(const unsigned char *data, Py_ssize_t position,
                                    Py_ssize_t end, int32_t count, int64_t target_delta,
                                    ParseFailure *failure) noexcept nogil:
    """Position of the record whose offset delta is ``target_delta`` among the first ``count``
    records of data[position:end]; RECORD_NOT_FOUND when a record with a larger delta comes
    first or ``count`` records pass without it (a gap left by compaction); -1 with
    ``failure`` filled in for malformed framing.

    Records before it are skipped by their length prefix: only the length, attributes byte,
    timestamp delta and offset delta of a skipped record are read (with _parse_record's
    checks and failures for those fields), never its key, value or headers. The next
    record's position depends only on the length varint, so the loop's dependent chain is
    one (usually 1-2 byte) varint per record, not the whole record's fields."""
    cdef int32_t body_size, delta = 0, i
    cdef int64_t timestamp_delta = 0
    cdef Py_ssize_t next_position, body_end, field
    for i in range(count):
        if position >= end:
            failure.code = E_PREMATURE_EOF
            return -1
        next_position = read_varint(data, position, end, &body_size)
        if next_position < 0:
            return _varint_failed(next_position, position, False, failure)
        if body_size < 0 or body_size > end - next_position:
            failure.code = E_BODY_SIZE
            failure.a = body_size
            failure.b = end - next_position
            return -1
        if body_size < 1:
            failure.code = E_NO_ATTRIBUTES
            return -1
        body_end = next_position + body_size
        field = read_varlong(data, next_position + 1, body_end, &timestamp_delta)
        if field < 0:
            return _varint_failed(field, next_position + 1, True, failure)
        next_position = read_varint(data, field, body_end, &delta)
        if next_position < 0:
            return _varint_failed(next_position, field, False, failure)
        if delta == target_delta:
            return position
        if delta > target_delta:
            return RECORD_NOT_FOUND
        position = body_end
    return RECORD_NOT_FOUND


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline Py_ssize_t _skip_records(const unsigned char *data, Py_ssize_t position,
                                     Py_ssize_t end, Py_ssize_t n) noexcept nogil:
    """Position after ``n`` records at data[position:end], read by their length prefixes
    only; -1 when a length is malformed or runs past ``end`` (the caller then takes the
    checked path, which reports why)."""
    cdef int32_t body_size
    cdef Py_ssize_t i, next_position
    for i in range(n):
        next_position = read_varint(data, position, end, &body_size)
        if next_position < 0 or body_size < 1 or body_size > end - next_position:
            return -1
        position = next_position + body_size
    return position


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline Py_ssize_t _record_checkpoints(const unsigned char *data, Py_ssize_t position,
                                           Py_ssize_t end, Py_ssize_t count, Py_ssize_t every,
                                           uint32_t *out) noexcept nogil:
    """Write the positions of records 0, every, 2 * every, ... of the ``count`` records at
    data[position:end] to ``out`` (room for ``(count + every - 1) // every``), reading length
    prefixes only. Returns ``count``, or -1 unless the records tile data[position:end]."""
    cdef int32_t body_size
    cdef Py_ssize_t i, next_position
    for i in range(count):
        if i % every == 0:
            out[i // every] = <uint32_t>position
        next_position = read_varint(data, position, end, &body_size)
        if next_position < 0 or body_size < 1 or body_size > end - next_position:
            return -1
        position = next_position + body_size
    if position != end:
        return -1
    return count


cdef extern from *:
    """
    #include <string.h>
    static inline uint64_t seglog_load_le64(const unsigned char *p) {
        uint64_t v;
        memcpy(&v, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap64(v);
    #endif
        return v;
    }
    """
    uint64_t seglog_load_le64(const unsigned char *p) nogil


cdef inline bint _uvarint2(uint64_t word, unsigned int *nbytes, uint64_t *out) noexcept nogil:
    """The raw (still zig-zag) value of the varint in the low bytes of the little-endian
    ``word`` if it is 1 or 2 bytes long (``nbytes`` gets its length); False when it is longer
    (the caller takes the checked path). Branches, not masks: the shape repeats from record
    to record, so they predict (a branch-free version measured ~50 % slower)."""
    if not (word & 0x80):
        out[0] = word & 0x7F
        nbytes[0] = 1
    elif not (word & 0x8000):
        out[0] = (word & 0x7F) | ((word >> 1) & 0x3F80)
        nbytes[0] = 2
    else:
        return False
    return True


cdef inline int64_t _unzigzag(uint64_t u) noexcept nogil:
    return <int64_t>((u >> 1) ^ (<uint64_t>0 - (u & 1)))
