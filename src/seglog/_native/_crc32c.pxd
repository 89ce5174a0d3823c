# CRC-32C (Castagnoli) for other native modules:
# ``from seglog._native._crc32c cimport seglog_crc32c``. The functions are static inline C from
# crc32c.h (extern declarations only, so cimporting them costs no import at run time); each
# including module gets its own tables, initialised when its .so loads. seglog_crc32c needs no
# GIL: call it inside `with nogil:` blocks. _crc32c.pyx sees this file as its own .pxd (it
# lives in the package directory: Cython finds a module's .pxd by its qualified name).

from libc.stdint cimport uint32_t

cdef extern from "crc32c.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const unsigned char *data, size_t n)
    void seglog_crc32c_init()
    int seglog_crc32c_hardware()
    int seglog_crc32c_set_hardware(int on)
    uint32_t seglog_crc32c_sw(uint32_t crc, const unsigned char *data, size_t n)
