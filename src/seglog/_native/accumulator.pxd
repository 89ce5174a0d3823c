# The native accumulator's C-level names (nothing cimports them yet; every native module has
# a .pxd, see setup.py).
from libc.stdint cimport int32_t

cdef int32_t _murmur2(const unsigned char* data, Py_ssize_t length) noexcept nogil
