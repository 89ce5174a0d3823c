# Big-endian loads and stores on raw pointers, for the codec, index and segment hot paths.
# No bounds checks: callers check lengths first (push the branch up, keep the loop tight).
# Compilers turn the shift-or patterns into single bswap'd moves.

from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t


cdef inline uint32_t load_u32(const unsigned char *p) noexcept nogil:
    return ((<uint32_t>p[0]) << 24) | ((<uint32_t>p[1]) << 16) | ((<uint32_t>p[2]) << 8) | (<uint32_t>p[3])


cdef inline int32_t load_i32(const unsigned char *p) noexcept nogil:
    return <int32_t>load_u32(p)


cdef inline int16_t load_i16(const unsigned char *p) noexcept nogil:
    return <int16_t>(((<uint16_t>p[0]) << 8) | (<uint16_t>p[1]))


cdef inline int64_t load_i64(const unsigned char *p) noexcept nogil:
    return <int64_t>(((<uint64_t>load_u32(p)) << 32) | (<uint64_t>load_u32(p + 4)))


cdef inline void store_u32(unsigned char *p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void store_i64(unsigned char *p, int64_t value) noexcept nogil:
    cdef uint64_t v = <uint64_t>value
    store_u32(p, <uint32_t>(v >> 32))
    store_u32(p + 4, <uint32_t>v)


cdef inline uint16_t load_u16(const unsigned char *p) noexcept nogil:
    return <uint16_t>(((<uint16_t>p[0]) << 8) | (<uint16_t>p[1]))


cdef inline uint64_t load_u64(const unsigned char *p) noexcept nogil:
    return ((<uint64_t>load_u32(p)) << 32) | (<uint64_t>load_u32(p + 4))


cdef inline void store_u16(unsigned char *p, uint16_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v


cdef inline void store_u64(unsigned char *p, uint64_t v) noexcept nogil:
    store_u32(p, <uint32_t>(v >> 32))
    store_u32(p + 4, <uint32_t>v)
