# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# Encode, steps 3 and 4 for the records: every record's body sized in a first pass (so the
# output is allocated once), then the records written as varints and copies, both without the
# GIL when no column points into a list.

cdef inline Py_ssize_t _field_bytes(Py_ssize_t length) noexcept nogil:
    # length varint + bytes; a null (-1) is the one-byte varint 0x01
    if length < 0:
        return 1
    return varint_size(<int32_t>length) + length


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _size_records(Py_ssize_t n, _Column values, _Column keys, _Column headers,
                              _Timestamps stamps, int64_t base_timestamp,
                              const int32_t *offset_deltas, int32_t *bodies,
                              Py_ssize_t *failed_index, int *failure) noexcept nogil:
    """First pass: every record's body size into ``bodies``; returns the record area's size,
    or -1 with failure 1 (timestamp delta overflows int64) or 2 (area too large)."""
    cdef Py_ssize_t i, body, total = 0
    cdef int64_t delta, stamp = stamps.constant
    cdef const Py_ssize_t *value_lengths = values.lengths
    cdef const Py_ssize_t *key_lengths = keys.lengths if keys is not None else NULL
    cdef const Py_ssize_t *header_lengths = headers.lengths if headers is not None else NULL
    cdef const int64_t *stamp_values = stamps.values
    for i in range(n):
        if stamp_values != NULL:
            stamp = stamp_values[i]
        if seglog_sub_overflows(stamp, base_timestamp, &delta):
            failed_index[0] = i
            failure[0] = 1
            return -1
        body = (1 + varlong_size(delta)
                + varint_size(offset_deltas[i] if offset_deltas != NULL else <int32_t>i)
                + (_field_bytes(key_lengths[i]) if key_lengths != NULL else 1)
                + _field_bytes(value_lengths[i])
                + (header_lengths[i] if header_lengths != NULL else 1))
        if body > RECORD_AREA_BYTES_MAX - total:
            failed_index[0] = i
            failure[0] = 2
            return -1
        bodies[i] = <int32_t>body
        total += varint_size(<int32_t>body) + body
        if total > RECORD_AREA_BYTES_MAX:
            failed_index[0] = i
            failure[0] = 2
            return -1
    return total


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _write_records(unsigned char *out, Py_ssize_t n, _Column values, _Column keys,
                         _Column headers, _Timestamps stamps, int64_t base_timestamp,
                         const int32_t *offset_deltas, const int32_t *bodies) noexcept nogil:
    """Second pass: write the records, sized by _size_records, from ``out``."""
    cdef Py_ssize_t i, length
    cdef int64_t stamp = stamps.constant
    cdef const Py_ssize_t *value_lengths = values.lengths
    cdef const unsigned char **value_pointers = values.pointers
    cdef const Py_ssize_t *key_lengths = keys.lengths if keys is not None else NULL
    cdef const unsigned char **key_pointers = keys.pointers if keys is not None else NULL
    cdef const Py_ssize_t *header_lengths = headers.lengths if headers is not None else NULL
    cdef const unsigned char **header_pointers = headers.pointers if headers is not None else NULL
    cdef const int64_t *stamp_values = stamps.values
    for i in range(n):
        if stamp_values != NULL:
            stamp = stamp_values[i]
        out = write_varint(out, bodies[i])
        out[0] = 0  # record attributes: unused by Kafka, always 0
        out = write_varlong(out + 1, stamp - base_timestamp)
        out = write_varint(out, offset_deltas[i] if offset_deltas != NULL else <int32_t>i)
        if key_lengths == NULL:
            out[0] = 1  # varint -1: null key
            out += 1
        else:
            length = key_lengths[i]
            out = write_varint(out, <int32_t>length)
            if length > 0:
                memcpy(out, key_pointers[i], length)
                out += length
        length = value_lengths[i]
        out = write_varint(out, <int32_t>length)
        if length > 0:
            memcpy(out, value_pointers[i], length)
            out += length
        if header_lengths == NULL:
            out[0] = 0  # no headers
            out += 1
        else:
            memcpy(out, header_pointers[i], header_lengths[i])
            out += header_lengths[i]


cdef Py_ssize_t _size_all_records(_RecordsToEncode records, int64_t base_timestamp) except -1:
    """Step 3: every record's body size into ``records.bodies`` (the GIL released when no
    column points into a list); returns the record area's size, or raises as the twin."""
    cdef Py_ssize_t area_bytes, failed_index = -1
    cdef int failure = 0
    records.bodies = <int32_t *>PyMem_Malloc(records.n * sizeof(int32_t))
    if records.bodies == NULL:
        raise MemoryError()
    if records.release_gil:
        with nogil:
            area_bytes = _size_records(records.n, records.values, records.keys, records.headers,
                                       records.stamps, base_timestamp, records.deltas.values,
                                       records.bodies, &failed_index, &failure)
    else:
        area_bytes = _size_records(records.n, records.values, records.keys, records.headers,
                                   records.stamps, base_timestamp, records.deltas.values,
                                   records.bodies, &failed_index, &failure)
    if area_bytes >= 0:
        return area_bytes
    if failure == 1:
        stamp = (records.stamps.values[failed_index] if records.stamps.values != NULL
                 else records.stamps.constant)
        raise InvalidTimestampError(
            f"timestamp of record {failed_index} is {stamp}, too far from the base "
            f"timestamp {base_timestamp}"
        )
    raise RecordTooLargeError(
        f"record {failed_index} makes the batch larger than {INT32_MAX} bytes"
    )
