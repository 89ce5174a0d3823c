# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# Walking a buffer batch by batch: iter_batches and the step it repeats (_next_batch), which
# decode_columns walks with too. A torn tail ends the walk; bad framing raises
# (codec_validation.pxi). Also check_client_batch, the produce validator's one-batch check
# (it needs the Batch class, defined in codec_batch.pxi, which is included before this part).

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


def check_client_batch(buffer, int64_t lowest_allowed_ms, int64_t highest_allowed_ms,
                       int64_t max_message_bytes, bint keys_required, int compression_id):
    """The :class:`Batch` of ``buffer`` when it is exactly one whole batch a client may append
    as it is, else None (the caller's full validator then rewrites or refuses it). As it is:
    magic 2, a valid CRC32C, at most ``max_message_bytes``, base offset 0, not a control
    batch, at least one record, a record count equal to last_offset_delta + 1 and to the
    records parsed, record offsets 0..count-1, a producer id only with a base sequence >= 0,
    CreateTime, every record timestamp within ``lowest_allowed_ms`` ..
    ``highest_allowed_ms`` and the header's max timestamp equal to the records' largest, no
    keyless record when ``keys_required``, and codec ``compression_id`` unless it is -1.
    Nothing raises for bad bytes: they decline. As the twin."""
    cdef _Buffer owner = _acquire(buffer)
    cdef Py_ssize_t position = 0, n, first_keyless = -1
    cdef int32_t batch_length
    cdef bint in_order = True
    cdef int64_t lowest = -1, highest = -1
    cdef Batch batch
    try:
        batch_length = _frame_at(owner, &position, -1)
    except CorruptRecordError:
        return None
    if batch_length < 0 or LOG_OVERHEAD + <Py_ssize_t>batch_length != owner.size \
            or LOG_OVERHEAD + <int64_t>batch_length > max_message_bytes:
        return None
    batch = Batch.__new__(Batch)
    batch._fill(owner, 0)
    if batch.base_offset != 0 or batch.attributes & (CONTROL_FLAG_MASK | TIMESTAMP_TYPE_MASK) \
            or batch.record_count <= 0 or batch.last_offset_delta + 1 != batch.record_count \
            or (batch.producer_id >= 0 and batch.base_sequence < 0) \
            or (compression_id >= 0
                and batch.attributes & COMPRESSION_CODEC_MASK != compression_id):
        return None
    if batch._computed_crc() != batch.crc:
        return None
    batch._crc_state = 1
    try:
        n = batch._summary(_decompressed_limit(DECOMPRESSED_BYTES_MAX_DEFAULT), &in_order,
                           &lowest, &highest, &first_keyless)
    except (SeglogError, ValueError):
        return None
    if n != batch.record_count or not in_order or (keys_required and first_keyless >= 0) \
            or lowest < lowest_allowed_ms or highest > highest_allowed_ms \
            or batch.max_timestamp_ms != highest:
        return None
    return batch
