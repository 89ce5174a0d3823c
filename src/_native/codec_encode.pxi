# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# encode_batch and encode_control_batch: the encode steps in the twin's order (compression
# codec, inputs, header fields, record sizes, then records, compression, header and CRC).

cdef bytes _write_uncompressed(_RecordsToEncode records, const _HeaderFields *fields,
                               Py_ssize_t area_bytes):
    """Step 4 without compression: records and header straight into the output bytes, with
    the GIL released when the columns allow it (or, for the header's CRC, when the batch is
    large enough to be worth it)."""
    cdef Py_ssize_t batch_bytes = RECORD_BATCH_OVERHEAD + area_bytes
    cdef bytes out = PyBytes_FromStringAndSize(NULL, batch_bytes)
    cdef unsigned char *p = <unsigned char *>PyBytes_AS_STRING(out)
    if records.release_gil:
        with nogil:
            _write_records(p + RECORD_BATCH_OVERHEAD, records.n, records.values, records.keys,
                           records.headers, records.stamps, fields.base_timestamp,
                           records.deltas.values, records.bodies)
            _write_header(p, batch_bytes, fields)
        return out
    _write_records(p + RECORD_BATCH_OVERHEAD, records.n, records.values, records.keys,
                   records.headers, records.stamps, fields.base_timestamp,
                   records.deltas.values, records.bodies)
    if batch_bytes >= NOGIL_BYTES_MIN:
        with nogil:
            _write_header(p, batch_bytes, fields)
    else:
        _write_header(p, batch_bytes, fields)
    return out


cdef bytes _encode(values, keys, timestamps_ms, headers, base_offset, compression,
                   compression_level, timestamp_type, producer_id, producer_epoch,
                   base_sequence, is_transactional, bint is_control, partition_leader_epoch,
                   delete_horizon_ms, offset_deltas=None, last_offset_delta=None):
    """One batch, in the twin's steps and order of errors: the compression codec, the record
    columns, the header fields, the record sizes, then records, (compression,) header, CRC."""
    cdef int cid = _compression_id(compression, compression_level)
    cdef _RecordsToEncode records = _gather_records(values, keys, timestamps_ms, headers,
                                                    offset_deltas, last_offset_delta)
    cdef _HeaderFields fields
    cdef Py_ssize_t area_bytes
    _check_header_fields(&fields, records, cid, base_offset, timestamp_type, producer_id,
                         producer_epoch, base_sequence, is_transactional, is_control,
                         partition_leader_epoch, delete_horizon_ms)
    area_bytes = _size_all_records(records, fields.base_timestamp)
    if cid == COMPRESSION_NONE:
        return _write_uncompressed(records, &fields, area_bytes)
    return _write_compressed(records, &fields, area_bytes, cid, compression_level)


def encode_batch(
    values,
    keys=None,
    timestamps_ms=None,
    headers=None,
    *,
    base_offset=0,
    compression="none",
    compression_level=None,
    timestamp_type=0,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    is_transactional=False,
    partition_leader_epoch=-1,
    delete_horizon_ms=-1,
    offset_deltas=None,
    last_offset_delta=None,
):
    """Encode one RecordBatch v2 (magic 2) and return its bytes; byte-identical to
    ``seglog.pure.codec.encode_batch`` (see its docstring for the rules and errors).

    ``values``/``keys``: a sequence of bytes-like objects or None; a 2-D C-contiguous uint8
    numpy array (one row per record); or ``(data, lengths)``: one bytes-like buffer and a 1-D
    integer numpy array of lengths (-1 = null). ``keys`` None means every key is null.
    ``timestamps_ms``: None (the wall clock, read once per batch), one int for every record,
    or a sequence/int64 array. ``headers``: None or, per record, None or a sequence of
    ``(str, bytes | None)`` pairs. ``offset_deltas``/``last_offset_delta`` (for the cleaner):
    None, or each record's ``offset - base_offset`` (strictly increasing) and the header's
    lastOffsetDelta. Numpy inputs are sized, copied and checksummed without the
    GIL; a list is read with the GIL held (another thread could mutate it).

    Raises InvalidRecordError, InvalidTimestampError, UnsupportedCompressionError,
    TypeError/ValueError (compression level) and RecordTooLargeError exactly as the twin;
    never OverflowError (every number is checked as a Python int before it is converted).
    """
    return _encode(values, keys, timestamps_ms, headers, base_offset, compression,
                   compression_level, timestamp_type, producer_id, producer_epoch,
                   base_sequence, is_transactional, False, partition_leader_epoch,
                   delete_horizon_ms, offset_deltas, last_offset_delta)


def encode_control_batch(
    control_type,
    *,
    producer_id,
    producer_epoch,
    coordinator_epoch=0,
    base_offset=0,
    timestamp_ms=None,
    partition_leader_epoch=-1,
    timestamp_type=TIMESTAMP_TYPE_CREATE_TIME,
    delete_horizon_ms=-1,
):
    """A 78-byte transactional control batch holding one end-transaction marker
    (``control_type`` the int 0 ABORT or 1 COMMIT, else InvalidRecordError); as the twin,
    ``timestamp_type`` and ``delete_horizon_ms`` (the cleaner's rebuilt marker) included."""
    try:
        control_type = operator.index(control_type)
    except TypeError:
        control_type = None  # 1.0, "1", None: not an int, so not a marker type either
    if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError("an end-transaction marker is ABORT (0) or COMMIT (1)")
    coordinator_epoch = _check_range("coordinator_epoch", coordinator_epoch, INT32_MIN, INT32_MAX)
    key = CONTROL_KEY.pack(CONTROL_RECORD_VERSION, control_type)
    value = END_TXN_MARKER_VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch)
    return _encode([value], [key], timestamp_ms, None, base_offset, COMPRESSION_NONE, None,
                   timestamp_type, producer_id, producer_epoch, -1, True, True,
                   partition_leader_epoch, delete_horizon_ms)
