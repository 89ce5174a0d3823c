# C declarations of the cleaner's offset map (twin of seglog.pure.keymap): the XXH64 key hash
# from xxh64.h. The module is built as seglog._native.keymap from src/_native, so Cython does
# not find this .pxd by the qualified name; keymap.pyx cimports it by file name (extern
# declarations only, no import at run time), as _crc32c.pyx does. Other native modules that
# want the hash do the same: `from keymap cimport seglog_xxh64`.

from libc.stdint cimport int64_t, uint64_t

cdef extern from "xxh64.h" nogil:
    uint64_t seglog_xxh64(const unsigned char *data, size_t n, uint64_t seed)
