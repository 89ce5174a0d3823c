# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# What the decoders are handed: numeric arguments checked by the twin's rule, and the buffer
# export (_Buffer) that batches and columns point into while they live.

# The twin's rule for every count, size and position argument of the decoders, checked on
# Python objects before any C conversion so that no OverflowError leaks: an int
# (operator.index: TypeError for 1.5 or "3"), not negative (ValueError), and clamped to
# sys.maxsize (an int that large means "no limit").

cdef object _int_argument(str name, value):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


cdef object _size_argument(str name, value, bint allow_none):
    if value is None and allow_none:
        return None
    value = _int_argument(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0{' or None' if allow_none else ''}, got {value}")
    return min(value, sys.maxsize)


cdef Py_ssize_t _decompressed_limit(value) except -1:
    """max_decompressed_bytes checked as the twin checks it (seglog.compression)."""
    if value is DECOMPRESSED_BYTES_MAX_DEFAULT:  # the usual call: skip the Python call
        return DECOMPRESSED_BYTES_MAX_DEFAULT
    return check_max_decompressed_bytes(value)


@cython.final
cdef class _Buffer:
    """A buffer export of an object, held while batches or columns point into it."""
    cdef Py_buffer view
    cdef bint acquired
    cdef object obj
    cdef const unsigned char *data
    cdef Py_ssize_t size

    def __dealloc__(self):
        if self.acquired:
            PyBuffer_Release(&self.view)
            self.acquired = False

    cdef object readonly_view(self):
        """A read-only 1-D "B" memoryview of the whole buffer (what the twin's Columns hold)."""
        view = memoryview(self.obj)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        return view.toreadonly()


cdef _Buffer _acquire(object buffer):
    """Export ``buffer`` (C-contiguous bytes-like). TypeError otherwise, as the twin's
    memoryview cast gives."""
    cdef _Buffer owner = _Buffer.__new__(_Buffer)
    if isinstance(buffer, _Buffer):
        return buffer
    try:
        PyObject_GetBuffer(buffer, &owner.view, PyBUF_SIMPLE)
    except BufferError as exc:
        raise TypeError(f"expected a C-contiguous bytes-like object: {exc}") from None
    owner.acquired = True
    owner.obj = buffer
    owner.data = <const unsigned char *>owner.view.buf
    owner.size = owner.view.len
    return owner
