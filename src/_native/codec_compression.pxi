# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# The glue to seglog.compression, both ways, one Python call per batch exactly as the twin
# (so both write identical compressed bytes and decompress with the same bounds): the codec id
# of a compression argument, a batch's record area decompressed, and a record area compressed
# into the output batch.

cdef int _compression_id(compression, compression_level) except -1:
    """The codec id of ``compression``, its level checked (the twin's order of errors)."""
    cdef int cid
    if compression is None or (type(compression) is str and compression == "none"):
        cid = COMPRESSION_NONE
    else:
        cid = _compression.codec_id(compression)
    if compression_level is not None:
        _compression.check_level(cid, compression_level)
    return cid


cdef bytes _decompress_area(const unsigned char *batch, Py_ssize_t batch_bytes, int cid,
                            Py_ssize_t position, Py_ssize_t decompressed_limit):
    """The record area of the compressed batch ``batch[0:batch_bytes]`` (codec id ``cid``, not
    0), decompressed through seglog.compression into ``bytes`` of at most
    ``decompressed_limit``. UnsupportedCompressionError for ids 5-7; the errors of
    ``seglog.compression.decompress`` otherwise, all carrying the batch's ``position``."""
    if cid not in COMPRESSION_NAMES:
        raise UnsupportedCompressionError(
            f"Unknown compression type id {cid} in batch at position {position}"
        )
    area = PyMemoryView_FromMemory(
        <char *>batch + RECORD_BATCH_OVERHEAD, batch_bytes - RECORD_BATCH_OVERHEAD, PyBUF_READ)
    try:
        decompressed = _compression.decompress(
            cid, area, max_decompressed_bytes=decompressed_limit, position=position)
    finally:
        area.release()
    if type(decompressed) is not bytes:
        decompressed = bytes(decompressed)
    return decompressed


cdef bytes _write_compressed(_RecordsToEncode records, const _HeaderFields *fields,
                             Py_ssize_t area_bytes, int cid, compression_level):
    """Step 4 with compression: the record area into a scratch bytes, compressed through
    seglog.compression (as the twin), then header and compressed area into the output."""
    cdef bytes out, area = PyBytes_FromStringAndSize(NULL, area_bytes)
    cdef unsigned char *p
    cdef Py_ssize_t batch_bytes
    _write_records(<unsigned char *>PyBytes_AS_STRING(area), records.n, records.values,
                   records.keys, records.headers, records.stamps, fields.base_timestamp,
                   records.deltas.values, records.bodies)
    PyMem_Free(records.bodies)  # not needed while compressing
    records.bodies = NULL
    compressed = _compression.compress(cid, area, compression_level)
    del area
    if len(compressed) > RECORD_AREA_BYTES_MAX:
        raise RecordTooLargeError("the compressed batch is larger than 2 GiB")
    batch_bytes = RECORD_BATCH_OVERHEAD + len(compressed)
    out = PyBytes_FromStringAndSize(NULL, batch_bytes)
    p = <unsigned char *>PyBytes_AS_STRING(out)
    _copy_into(p + RECORD_BATCH_OVERHEAD, compressed)
    with nogil:
        _write_header(p, batch_bytes, fields)
    return out


cdef int _copy_into(unsigned char *destination, object source) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(source, &view, PyBUF_SIMPLE)
    memcpy(destination, view.buf, view.len)
    PyBuffer_Release(&view)
    return 0
