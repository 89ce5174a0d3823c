# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# The checks of a batch's framing before anything of it is trusted, in Kafka's
# FileLogInputStream order (the twin's ``_frame_at``): batch length, whole batch present,
# magic, v2 header length, last offset within an int64; and check_offsets' rule across
# batches. Each raises CorruptRecordError with its fixed reason and the batch's position. The
# CRC is checked apart, by the record decoders (Batch._check_crc, codec_batch.pxi).

cdef int _check_batch_length(const unsigned char *data, Py_ssize_t position,
                             int64_t max_batch_bytes) except -1:
    cdef int32_t batch_length = <int32_t>load_u32(data + position + BATCH_LENGTH_POSITION)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, below the minimum "
            f"{MIN_BATCH_LENGTH}",
            reason=REASON_BATCH_TOO_SMALL, position=position,
        )
    if max_batch_bytes >= 0 and batch_length > max_batch_bytes:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, above the maximum "
            f"{max_batch_bytes}",
            reason=REASON_BATCH_TOO_LARGE, position=position,
        )
    return 0


cdef int _check_magic_and_header(const unsigned char *data, Py_ssize_t position,
                                 int32_t batch_length) except -1:
    cdef int8_t magic = <int8_t>data[position + MAGIC_POSITION]
    if magic != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at position {position} has magic {magic}; "
            f"only magic {MAGIC_V2} is supported",
            reason=REASON_BAD_MAGIC, position=position,
        )
    if batch_length < BATCH_LENGTH_MIN_V2:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, shorter than a "
            f"v2 header ({BATCH_LENGTH_MIN_V2})",
            reason=REASON_BATCH_TOO_SMALL, position=position,
        )
    # The last offset (and the next batch's first, one more) must be an int64; the twin
    # compares Python ints, this the overflow flag.
    cdef int64_t base_offset = <int64_t>load_u64(data + position + BASE_OFFSET_POSITION)
    cdef int32_t last_offset_delta = <int32_t>load_u32(data + position + LAST_OFFSET_DELTA_POSITION)
    cdef int64_t last_offset
    if (seglog_add_overflows(base_offset, last_offset_delta, &last_offset)
            or last_offset == INT64_MAX_C):
        raise CorruptRecordError(
            f"batch at position {position} has base offset {base_offset} and last offset delta "
            f"{last_offset_delta}: its last offset overflows an int64",
            reason=REASON_BAD_LAST_OFFSET_DELTA, position=position,
        )
    return 0


cdef int _check_offsets_increase(Batch batch, int64_t *next_offset_min) except -1:
    """``check_offsets`` (the twin's ``_check_offsets_increase``): the batch's offsets start at
    next_offset_min[0] or above and its last offset delta is not negative; then
    next_offset_min[0] becomes its last offset + 1 (an int64: _frame_at checked)."""
    if batch.base_offset < next_offset_min[0] or batch.last_offset_delta < 0:
        raise CorruptRecordError(
            f"batch at position {batch.position} has offsets {batch.base_offset}.."
            f"{batch.base_offset + batch.last_offset_delta}; offsets must increase from "
            f"{next_offset_min[0]}",
            reason=REASON_OFFSETS_NOT_INCREASING, position=batch.position,
        )
    next_offset_min[0] = batch.base_offset + batch.last_offset_delta + 1
    return 0


cdef int32_t _frame_at(_Buffer owner, Py_ssize_t *position, int64_t max_batch_bytes) except -2:
    """Kafka's ``FileLogInputStream.nextBatch`` checks for the batch at position[0] (the twin's
    ``_frame_at``): its batch_length, or -1 when the buffer ends before the batch does (fewer
    than 17 bytes left, or a torn tail). Raises CorruptRecordError in iter_batches' order."""
    cdef Py_ssize_t at = position[0]
    cdef int32_t batch_length
    if owner.size - at < HEADER_SIZE_UP_TO_MAGIC:
        return -1
    _check_batch_length(owner.data, at, max_batch_bytes)
    batch_length = <int32_t>load_u32(owner.data + at + BATCH_LENGTH_POSITION)
    if LOG_OVERHEAD + <Py_ssize_t>batch_length > owner.size - at:
        return -1
    _check_magic_and_header(owner.data, at, batch_length)
    return batch_length
