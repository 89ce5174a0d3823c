# CRC-32C (Castagnoli) for other native modules: `from seglog._native._crc32c cimport seglog_crc32c`
# (or `cimport` this .pxd by its file name from src/_native). The functions are static inline C
# from crc32c.h; each including module gets its own tables, initialised when its .so loads.
# seglog_crc32c needs no GIL: call it inside `with nogil:` blocks.

from libc.stdint cimport uint32_t

cdef extern from "crc32c.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const unsigned char *data, size_t n)
    void seglog_crc32c_init()
    int seglog_crc32c_hardware()
    int seglog_crc32c_set_hardware(int on)
    uint32_t seglog_crc32c_sw(uint32_t crc, const unsigned char *data, size_t n)
