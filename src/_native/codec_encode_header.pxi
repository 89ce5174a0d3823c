# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# The batch header on the encode side: step 2 checks every header argument into
# _HeaderFields (attributes, base and max timestamps); _write_header writes the 61 bytes last,
# once the records are in place after them, and the CRC-32C over attributes..end.

cdef struct _HeaderFields:
    # The checked batch header fields but the length and CRC (written last, by _write_header).
    int64_t base_offset
    int32_t partition_leader_epoch
    int16_t attributes
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t record_count


cdef void _write_header(unsigned char *out, Py_ssize_t batch_bytes,
                        const _HeaderFields *fields) noexcept nogil:
    """The 61-byte header at ``out``, then its CRC over attributes..end (the records are
    already written after it)."""
    store_u64(out + BASE_OFFSET_POSITION, <uint64_t>fields.base_offset)
    store_u32(out + BATCH_LENGTH_POSITION, <uint32_t>(batch_bytes - LOG_OVERHEAD))
    store_u32(out + PARTITION_LEADER_EPOCH_POSITION, <uint32_t>fields.partition_leader_epoch)
    out[MAGIC_POSITION] = MAGIC_V2
    store_u16(out + ATTRIBUTES_POSITION, <uint16_t>fields.attributes)
    store_u32(out + LAST_OFFSET_DELTA_POSITION, <uint32_t>fields.last_offset_delta)
    store_u64(out + BASE_TIMESTAMP_POSITION, <uint64_t>fields.base_timestamp)
    store_u64(out + MAX_TIMESTAMP_POSITION, <uint64_t>fields.max_timestamp)
    store_u64(out + PRODUCER_ID_POSITION, <uint64_t>fields.producer_id)
    store_u16(out + PRODUCER_EPOCH_POSITION, <uint16_t>fields.producer_epoch)
    store_u32(out + BASE_SEQUENCE_POSITION, <uint32_t>fields.base_sequence)
    store_u32(out + RECORDS_COUNT_POSITION, <uint32_t>fields.record_count)
    store_u32(out + CRC_POSITION, seglog_crc32c(
        0, out + ATTRIBUTES_POSITION, <size_t>(batch_bytes - ATTRIBUTES_POSITION)))


cdef int _check_header_fields(_HeaderFields *fields, _RecordsToEncode records, int cid,
                              base_offset, timestamp_type, producer_id, producer_epoch,
                              base_sequence, is_transactional, bint is_control,
                              partition_leader_epoch, delete_horizon_ms) except -1:
    """Step 2: every header argument checked as a Python int (no OverflowError), the
    attributes, and the base and max timestamps (the base is the delete horizon when set)."""
    cdef Py_ssize_t i
    cdef const int64_t *stamps = records.stamps.values
    cdef int64_t max_timestamp
    # INT64_MAX - 1: the next offset after the batch must be an int64 too (as the twin).
    fields.base_offset = _check_range("base_offset", base_offset, 0,
                                      INT64_MAX - 1 - records.last_offset_delta)
    timestamp_type = _check_range("timestamp_type", timestamp_type, TIMESTAMP_TYPE_CREATE_TIME,
                                  TIMESTAMP_TYPE_LOG_APPEND_TIME)
    fields.producer_id = _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
    fields.producer_epoch = _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
    fields.base_sequence = _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
    fields.partition_leader_epoch = _check_range(
        "partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX)
    delete_horizon = _check_range("delete_horizon_ms", delete_horizon_ms, -1, INT64_MAX)
    fields.last_offset_delta = records.last_offset_delta
    fields.record_count = <int32_t>records.n

    fields.attributes = <int16_t>cid
    if timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME:
        fields.attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        fields.attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        fields.attributes |= CONTROL_FLAG_MASK
    if stamps == NULL:
        fields.max_timestamp = fields.base_timestamp = records.stamps.constant
    else:
        max_timestamp = stamps[0]  # a local: stores through `fields` could alias `stamps`
        for i in range(1, records.n):
            if stamps[i] > max_timestamp:
                max_timestamp = stamps[i]
        fields.max_timestamp = max_timestamp
        fields.base_timestamp = stamps[0]
    if delete_horizon >= 0:
        fields.attributes |= DELETE_HORIZON_FLAG_MASK
        fields.base_timestamp = delete_horizon
    return 0
