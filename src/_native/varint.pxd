# Zig-zag varints and varlongs as Kafka's ByteUtils writes and reads them, as C inline helpers.
#
# The twin is seglog/pure/varint.py; the rules match it to the bit:
# * a varint holds an int32 in 1-5 bytes, a varlong an int64 in 1-10 bytes;
# * a varint whose fifth byte (varlong: tenth) still has the continuation bit is "too long";
# * the bits of the last byte that do not fit the 32/64-bit word are dropped (Java's shift);
# * running past `end` before the last byte is an underflow.
# Readers return the position after the number, or a negative VARINT_* code; writers return the
# pointer after what they wrote (the caller has sized the buffer with *_size first).
# Everything is `noexcept nogil`: usable inside `with nogil:` loops.

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

cdef enum:
    VARINT_BYTES_MAX = 5
    VARLONG_BYTES_MAX = 10
    VARINT_UNDERFLOW = -1      # the buffer ends inside the number
    VARINT_TOO_LONG = -2       # more than VARINT_BYTES_MAX / VARLONG_BYTES_MAX bytes


cdef inline uint32_t zigzag32(int32_t value) noexcept nogil:
    return (<uint32_t>value << 1) ^ <uint32_t>(value >> 31)


cdef inline uint64_t zigzag64(int64_t value) noexcept nogil:
    return (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)


cdef inline Py_ssize_t uvarint_size(uint64_t unsigned_value) noexcept nogil:
    cdef Py_ssize_t n = 1
    while unsigned_value >= 0x80:
        unsigned_value >>= 7
        n += 1
    return n


cdef inline Py_ssize_t varint_size(int32_t value) noexcept nogil:
    return uvarint_size(zigzag32(value))


cdef inline Py_ssize_t varlong_size(int64_t value) noexcept nogil:
    return uvarint_size(zigzag64(value))


cdef inline unsigned char *write_uvarint(unsigned char *p, uint64_t unsigned_value) noexcept nogil:
    while unsigned_value >= 0x80:
        p[0] = <unsigned char>((unsigned_value & 0x7F) | 0x80)
        unsigned_value >>= 7
        p += 1
    p[0] = <unsigned char>unsigned_value
    return p + 1


cdef inline unsigned char *write_varint(unsigned char *p, int32_t value) noexcept nogil:
    return write_uvarint(p, zigzag32(value))


cdef inline unsigned char *write_varlong(unsigned char *p, int64_t value) noexcept nogil:
    return write_uvarint(p, zigzag64(value))


cdef inline Py_ssize_t read_varint(const unsigned char *data, Py_ssize_t position,
                                   Py_ssize_t end, int32_t *out) noexcept nogil:
    """Read the varint at data[position:end] into out; the position after it, or VARINT_*."""
    cdef uint32_t unsigned_value = 0
    cdef unsigned int shift = 0
    cdef unsigned char byte
    cdef Py_ssize_t index = position
    cdef Py_ssize_t stop = end if end - position < VARINT_BYTES_MAX else position + VARINT_BYTES_MAX
    if position < end:
        byte = data[position]
        if byte < 0x80:  # one byte: values in [-64, 63]
            out[0] = <int32_t>((<uint32_t>byte >> 1) ^ (<uint32_t>0 - (<uint32_t>byte & 1)))
            return position + 1
        if end - position >= 2 and data[position + 1] < 0x80:  # two bytes: [-8192, 8191]
            unsigned_value = (<uint32_t>(byte & 0x7F)) | ((<uint32_t>data[position + 1]) << 7)
            out[0] = <int32_t>((unsigned_value >> 1) ^ (<uint32_t>0 - (unsigned_value & 1)))
            return position + 2
    while index < stop:
        byte = data[index]
        unsigned_value |= (<uint32_t>(byte & 0x7F)) << shift
        index += 1
        if not (byte & 0x80):
            out[0] = <int32_t>((unsigned_value >> 1) ^ (<uint32_t>0 - (unsigned_value & 1)))
            return index
        shift += 7
    if end - position >= VARINT_BYTES_MAX:
        return VARINT_TOO_LONG
    return VARINT_UNDERFLOW


cdef inline Py_ssize_t read_varlong(const unsigned char *data, Py_ssize_t position,
                                    Py_ssize_t end, int64_t *out) noexcept nogil:
    """Read the varlong at data[position:end] into out; the position after it, or VARINT_*."""
    cdef uint64_t unsigned_value = 0
    cdef unsigned int shift = 0
    cdef unsigned char byte
    cdef Py_ssize_t index = position
    cdef Py_ssize_t stop = end if end - position < VARLONG_BYTES_MAX else position + VARLONG_BYTES_MAX
    if position < end and data[position] < 0x80:  # one byte: the usual timestamp delta
        byte = data[position]
        out[0] = <int64_t>((<uint64_t>byte >> 1) ^ (<uint64_t>0 - (<uint64_t>byte & 1)))
        return position + 1
    while index < stop:
        byte = data[index]
        unsigned_value |= (<uint64_t>(byte & 0x7F)) << shift
        index += 1
        if not (byte & 0x80):
            out[0] = <int64_t>((unsigned_value >> 1) ^ (<uint64_t>0 - (unsigned_value & 1)))
            return index
        shift += 7
    if end - position >= VARLONG_BYTES_MAX:
        return VARINT_TOO_LONG
    return VARINT_UNDERFLOW
