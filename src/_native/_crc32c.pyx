# cython: language_level=3
"""CRC-32C (Castagnoli), the checksum of Kafka's RecordBatch v2, over any bytes-like object.

The C code is ``crc32c.h`` (SSE4.2 with three interleaved streams where the CPU has it, a
slicing-by-8 table otherwise); this module is its Python face and the twin of
``seglog.pure.crc32c``. Inputs of 32 KiB or more are checksummed with the GIL released.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint32_t

# The seglog_crc32c* functions are declared in this module's .pxd
# (src/seglog/_native/_crc32c.pxd; extern declarations of crc32c.h).

cdef enum:
    # Below this many bytes the GIL is kept: releasing and re-taking it costs more than
    # checksumming (the hardware path does about 10-20 GB/s, so 32 KiB is ~2-3 us).
    _NOGIL_BYTES_MIN = 32768

seglog_crc32c_init()
if seglog_crc32c(0, <const unsigned char *>b"123456789", 9) != 0xE3069283u:  # RFC 3720
    raise ImportError("seglog._native._crc32c: CRC-32C self-check failed")


import operator

def crc32c(data, crc=0):
    """CRC-32C of ``data`` (bytes, bytearray, memoryview, numpy array: any C-contiguous
    buffer), continuing from ``crc`` (0 to start), as an int in [0, 2**32).

    ``crc32c(b, crc32c(a)) == crc32c(a + b)``, like ``zlib.crc32``.
    Raises TypeError if ``data`` does not support the buffer protocol or is not C-contiguous,
    ValueError for ``crc`` outside [0, 2**32). Thread-safe; the GIL is released for inputs of
    32 KiB or more.
    """
    cdef uint32_t start
    cdef uint32_t result
    cdef Py_buffer view
    cdef const unsigned char *pointer
    cdef size_t n
    # operator.index: a float or other non-integer ``crc`` is a TypeError, as in the twin.
    crc = operator.index(crc)
    if not 0 <= crc <= 0xFFFFFFFF:
        raise ValueError(f"crc must be an unsigned 32-bit value, got {crc}")
    start = <uint32_t>crc
    if type(data) is bytes:
        pointer = <const unsigned char *>PyBytes_AS_STRING(data)
        n = <size_t>PyBytes_GET_SIZE(data)
        if n < _NOGIL_BYTES_MIN:
            return seglog_crc32c(start, pointer, n)
        with nogil:
            result = seglog_crc32c(start, pointer, n)
        return result
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except BufferError as exc:  # e.g. a strided memoryview: TypeError, as memoryview.cast gives
        raise TypeError(f"crc32c needs a C-contiguous buffer: {exc}") from None
    try:
        pointer = <const unsigned char *>view.buf
        n = <size_t>view.len
        if n < _NOGIL_BYTES_MIN:
            result = seglog_crc32c(start, pointer, n)
        else:
            with nogil:
                result = seglog_crc32c(start, pointer, n)
    finally:
        PyBuffer_Release(&view)
    return result


def hardware_accelerated():
    """True if CRC-32C uses the CPU's crc32 instruction (SSE4.2, self-checked at import)."""
    return bool(seglog_crc32c_hardware())


def _set_hardware(bint on):
    """Tests only: False forces the table path, True restores the hardware path (if it passed
    its self-check). Returns the previous setting. Affects this module only; not thread-safe."""
    return bool(seglog_crc32c_set_hardware(on))
