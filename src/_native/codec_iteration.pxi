# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# Walking a buffer batch by batch: iter_batches and the step it repeats (_next_batch), which
# decode_columns walks with too. A torn tail ends the walk; bad framing raises
# (codec_validation.pxi).

@cython.final
cdef class _BatchIterator:
    """Iterator of :func:`iter_batches` (Kafka's FileLogInputStream rules)."""
    cdef _Buffer _buffer
    cdef Py_ssize_t _position
    cdef int64_t _max_batch_bytes
    cdef bint _check_offsets
    cdef int64_t _next_offset_min

    def __iter__(self):
        return self

    def __next__(self):
        cdef Batch batch = _next_batch(self._buffer, &self._position, self._max_batch_bytes)
        if batch is None:
            raise StopIteration
        if self._check_offsets:
            _check_offsets_increase(batch, &self._next_offset_min)
        return batch


cdef Batch _next_batch(_Buffer owner, Py_ssize_t *position, int64_t max_batch_bytes):
    """The batch at position[0] (advancing it), or None at the end / at a torn tail."""
    cdef int32_t batch_length = _frame_at(owner, position, max_batch_bytes)
    cdef Batch batch
    if batch_length < 0:
        return None
    batch = Batch.__new__(Batch)
    batch._fill(owner, position[0])
    position[0] += LOG_OVERHEAD + batch_length
    return batch


def iter_batches(buffer, *, max_batch_bytes=None, check_offsets=False):
    """Iterate a :class:`Batch` for each whole batch in ``buffer`` (any C-contiguous
    bytes-like).

    Kafka's ``FileLogInputStream`` rules, in this order at each batch: fewer than 17 bytes
    left -> stop; batch_length < 14 -> CorruptRecordError (REASON_BATCH_TOO_SMALL);
    batch_length > ``max_batch_bytes`` -> CorruptRecordError (REASON_BATCH_TOO_LARGE); the
    batch runs past the buffer -> stop (a torn tail is invisible, not an error); magic != 2 ->
    CorruptRecordError (REASON_BAD_MAGIC); batch_length < 49 -> CorruptRecordError
    (REASON_BATCH_TOO_SMALL); base_offset + last_offset_delta outside an int64 (or the next
    offset past it) -> CorruptRecordError (REASON_BAD_LAST_OFFSET_DELTA). Every error carries
    the batch's ``position``. CRCs and records are not checked here.

    ``check_offsets`` (default False): each batch's base_offset must be >= 0 for the first and
    >= the previous batch's last_offset + 1 after it, and its last_offset_delta >= 0, else
    CorruptRecordError (REASON_OFFSETS_NOT_INCREASING) when that batch is reached (the base
    offset lies outside the CRC). ``max_batch_bytes``: None or an int >= 0. TypeError for a
    buffer that is not C-contiguous bytes-like or a ``max_batch_bytes`` that is not an int,
    ValueError for a negative one, raised by this call. As the twin.
    """
    cdef _BatchIterator iterator = _BatchIterator.__new__(_BatchIterator)
    iterator._buffer = _acquire(buffer)
    limit = _size_argument("max_batch_bytes", max_batch_bytes, True)
    iterator._position = 0
    # Clamped by _size_argument to sys.maxsize, which an int64 holds; -1 means no limit.
    iterator._max_batch_bytes = -1 if limit is None else limit
    iterator._check_offsets = bool(check_offsets)
    iterator._next_offset_min = 0
    return iterator
