# C declarations of the cleaner's offset map (twin of seglog.pure.keymap): the XXH64 key hash
# from xxh64.h (extern declarations only: cimporting them costs no import at run time).
# keymap.pyx sees this file as its own .pxd (it lives here, in the package directory, because
# Cython finds a module's .pxd by its qualified name; see codec.pxd). Other native modules that
# want the hash write ``from seglog._native.keymap cimport seglog_xxh64``.

from libc.stdint cimport int64_t, uint64_t

cdef extern from "xxh64.h" nogil:
    uint64_t seglog_xxh64(const unsigned char *data, size_t n, uint64_t seed)
