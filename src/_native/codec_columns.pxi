# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# Records as numpy columns: the Columns type, the builder that owns the six columns in one
# reusable block, and the parser that fills them without the GIL (a fast loop for the common
# record shape, the checked _parse_record for everything else).

@cython.final
cdef class Columns:
    """Records of one or more batches as numpy columns, with no per-record Python objects.

    ``offsets``, ``timestamps_ms``, ``key_positions`` and ``value_positions`` are int64 arrays;
    ``key_lengths`` and ``value_lengths`` int32 arrays. A null key or value has length -1 and
    position -1. ``data`` is the read-only bytes-like object the positions index (see
    :func:`decode_columns`). ``len(columns)`` is the record count; ``key(i)``/``value(i)``
    give one record's key/value as ``bytes`` or None (IndexError out of range; negative ``i``
    counts from the end).
    """

    cdef public object offsets
    cdef public object timestamps_ms
    cdef public object key_positions
    cdef public object key_lengths
    cdef public object value_positions
    cdef public object value_lengths
    cdef public object data

    def __init__(self, *, offsets, timestamps_ms, key_positions, key_lengths, value_positions,
                 value_lengths, data):
        self.offsets = offsets
        self.timestamps_ms = timestamps_ms
        self.key_positions = key_positions
        self.key_lengths = key_lengths
        self.value_positions = value_positions
        self.value_lengths = value_lengths
        self.data = data

    def __len__(self):
        return len(self.offsets)

    cdef object _field(self, positions, lengths, index):
        length = int(lengths[index])
        if length < 0:
            return None
        position = int(positions[index])
        return bytes(self.data[position : position + length])

    def key(self, index):
        """The key of record ``index`` as bytes, or None when it is null."""
        return self._field(self.key_positions, self.key_lengths, index)

    def value(self, index):
        """The value of record ``index`` as bytes, or None when it is null."""
        return self._field(self.value_positions, self.value_lengths, index)

    def __repr__(self):
        if len(self):
            span = f"offsets {int(self.offsets[0])}..{int(self.offsets[-1])}"
        else:
            span = "empty"
        return f"<Columns {len(self)} records, {span}, {len(self.data)} data bytes>"


cdef enum:
    COLUMN_BYTES_PER_RECORD = 40   # 4 int64 columns + 2 int32 columns
    # A consumer's poll_columns returns one Columns per partition and its caller holds them
    # until the next poll's are made: 2 x partitions blocks live at once. Up to 16 blocks and
    # 64 MiB are remembered (in use or not).
    SPARE_BLOCKS_MAX = 16
    SPARE_BLOCK_BYTES_MIN = 1 << 20
    SPARE_BYTES_MAX = 64 << 20


ctypedef struct ColumnsTarget:
    # The six columns of a _ColumnsBuilder as plain pointers (read without the GIL, possibly on
    # a worker thread): see _ColumnsBuilder for the layout.
    int64_t *offsets
    int64_t *timestamps
    int64_t *key_positions
    int64_t *value_positions
    int32_t *key_lengths
    int32_t *value_lengths
    Py_ssize_t capacity


ctypedef struct AreaTask:
    # One record area to parse into the columns at index ``at`` (room for ``bound`` records).
    Py_ssize_t start
    Py_ssize_t end
    int32_t count
    Py_ssize_t bound
    Py_ssize_t at
    int64_t base_offset
    int64_t base_timestamp
    int64_t max_timestamp
    bint log_append_time
    # The threaded decode checks the batch's CRC on the worker thread first (check_crc):
    # data[crc_start:crc_start + crc_bytes] must hash to crc_expected.
    bint check_crc
    Py_ssize_t crc_start
    size_t crc_bytes
    uint32_t crc_expected


# Column blocks kept for reuse (see _column_block). Touched with the GIL held only.
cdef list _spare_blocks = []


cdef object _column_block(Py_ssize_t size_bytes):
    """A numpy uint8 block of at least ``size_bytes`` for a _ColumnsBuilder.

    Fresh memory costs a page fault and zeroing per 4 KiB on first touch (~2 ns per record of
    columns at 40 B/record on the development VM, a fifth of a large decode; with a
    consumer's poll_columns over 6 partitions, whose caller keeps the last poll's Columns
    while the next are made, fresh blocks were ~6,000 page faults per million records and
    it ran at ~0.6x of the core's decode of the same reads), so blocks of 1 MiB or more are remembered (at most SPARE_BLOCKS_MAX,
    SPARE_BYTES_MAX in all) and handed out again once nothing else references them: a block
    whose only reference is this list has no live Columns, array or buffer export left
    (every numpy view holds its base). A spare block is reused for a request of a quarter of
    its size or more; the cost is up to SPARE_BYTES_MAX kept after their Columns are gone."""
    cdef Py_ssize_t i, kept_bytes = 0
    cdef PyObject *item
    for i in range(len(_spare_blocks)):
        item = PyList_GET_ITEM(_spare_blocks, i)
        nbytes = (<object>item).nbytes
        kept_bytes += nbytes
        if _Py_REFCNT(item) == 1:
            if size_bytes <= nbytes <= 4 * size_bytes:
                return <object>item
    np = _np()
    block = np.empty(size_bytes, dtype=np.uint8)
    if size_bytes >= SPARE_BLOCK_BYTES_MIN:
        if len(_spare_blocks) < SPARE_BLOCKS_MAX and kept_bytes + size_bytes <= SPARE_BYTES_MAX:
            _spare_blocks.append(block)
        else:
            # Replace the smallest unused spare, and only by a larger block: a small decode
            # must not push out the block that large ones reuse.
            smallest, smallest_bytes = -1, size_bytes
            for i in range(len(_spare_blocks)):
                item = PyList_GET_ITEM(_spare_blocks, i)
                if _Py_REFCNT(item) == 1 and (<object>item).nbytes < smallest_bytes:
                    smallest, smallest_bytes = i, (<object>item).nbytes
            if smallest >= 0 and kept_bytes - smallest_bytes + size_bytes <= SPARE_BYTES_MAX:
                _spare_blocks[smallest] = block
    return block


@cython.final
cdef class _ColumnsBuilder:
    """The six columns, parsed into straight by the C parser, batch by batch.

    They live in one numpy uint8 block (capacity C records): offsets, timestamps, key
    positions, value positions (int64, 8C bytes each), then key and value lengths (int32, 4C
    each); the final arrays are views of it. One allocation instead of six matters: fresh
    memory costs a page fault per 4 KiB, and numpy asks for transparent huge pages for blocks
    of 4 MiB or more. Each decompressed area is kept with the chunk it belongs to, to build the
    data buffer and shift positions into it at the end."""
    cdef object block
    cdef int64_t *offsets
    cdef int64_t *timestamps
    cdef int64_t *key_positions
    cdef int64_t *value_positions
    cdef int32_t *key_lengths
    cdef int32_t *value_lengths
    cdef Py_ssize_t count
    cdef Py_ssize_t capacity
    cdef list chunks            # (batch, decompressed bytes or None, first record, record count)
    cdef bint any_decompressed
    cdef bint plain             # a bytearray block, never finished into Columns (no numpy)

    def __cinit__(self, Py_ssize_t capacity_hint, bint plain=False):
        self.chunks = []
        self.plain = plain
        self._grow(capacity_hint if capacity_hint > 0 else 0)

    cdef int _grow(self, Py_ssize_t capacity) except -1:
        cdef Py_buffer view
        cdef unsigned char *base
        cdef Py_ssize_t n = self.count
        if self.plain:
            # Not zeroed (bytearray(n) would clear it, 6 KiB for a 150-record batch on every
            # produce): only the first ``count`` slots of each column are ever read, each
            # written first.
            block = PyByteArray_FromStringAndSize(NULL, capacity * COLUMN_BYTES_PER_RECORD + 8)
        else:
            block = _column_block(capacity * COLUMN_BYTES_PER_RECORD + 8)
        PyObject_GetBuffer(block, &view, PyBUF_SIMPLE)
        base = <unsigned char *>view.buf
        PyBuffer_Release(&view)  # the block is kept alive in self.block
        if n:
            memcpy(base, self.offsets, n * 8)
            memcpy(base + 8 * capacity, self.timestamps, n * 8)
            memcpy(base + 16 * capacity, self.key_positions, n * 8)
            memcpy(base + 24 * capacity, self.value_positions, n * 8)
            memcpy(base + 32 * capacity, self.key_lengths, n * 4)
            memcpy(base + 36 * capacity, self.value_lengths, n * 4)
        self.block = block
        self.offsets = <int64_t *>base
        self.timestamps = <int64_t *>(base + 8 * capacity)
        self.key_positions = <int64_t *>(base + 16 * capacity)
        self.value_positions = <int64_t *>(base + 24 * capacity)
        self.key_lengths = <int32_t *>(base + 32 * capacity)
        self.value_lengths = <int32_t *>(base + 36 * capacity)
        self.capacity = capacity
        return 0

    cdef int add_batch(self, Batch batch, Py_ssize_t decompressed_limit) except -1:
        """Parse all records of ``batch`` into the arrays (errors as Batch.records; the CRC is
        the caller's)."""
        cdef const unsigned char *data
        cdef Py_ssize_t start, end, bound, parsed_count
        cdef int32_t count
        cdef ParseFailure failure
        owner = batch._area(&data, &start, &end, decompressed_limit)
        count = batch.record_count
        if count == 0:
            return 0
        bound = (end - start) // RECORD_BYTES_MIN + 1
        if bound > count:
            bound = count
        if self.count + bound > self.capacity:
            self._grow(max(self.count + bound, 2 * self.capacity))
        if bound >= NOGIL_RECORDS_MIN:
            with nogil:
                parsed_count = _parse_into(self, data, start, end, count, bound, batch, &failure)
        else:
            parsed_count = _parse_into(self, data, start, end, count, bound, batch, &failure)
        if parsed_count < 0:
            _raise_parse_failure(&failure)
        self.chunks.append((batch, owner, self.count, parsed_count))
        if owner is not None:
            self.any_decompressed = True
        self.count += parsed_count
        return 0

    cdef Columns finish(self, _Buffer whole, Py_ssize_t max_records):
        cdef Py_ssize_t n = self.count
        cdef Py_ssize_t shift, data_bytes = 0, first, k, index, c = self.capacity
        cdef Py_ssize_t area_start, area_end
        cdef Batch batch
        cdef Columns columns
        if 0 <= max_records < n:
            n = max_records
        if self.any_decompressed:
            # Positions move from each chunk's own buffer into the concatenation of the areas.
            pieces = []
            for batch, owner, first, k in self.chunks:
                if owner is None:
                    area_start = batch.position + RECORD_BATCH_OVERHEAD
                    area_end = batch.position + LOG_OVERHEAD + <Py_ssize_t>batch.batch_length
                    pieces.append(PyBytes_FromStringAndSize(
                        <const char *>whole.data + area_start, area_end - area_start))
                else:
                    area_start, area_end = 0, len(owner)
                    pieces.append(owner)
                shift = data_bytes - area_start
                for index in range(first, first + k):
                    if self.key_lengths[index] >= 0:
                        self.key_positions[index] += shift
                    if self.value_lengths[index] >= 0:
                        self.value_positions[index] += shift
                data_bytes += area_end - area_start
            data = b"".join(pieces)
        else:
            data = whole.readonly_view()
        block = self.block
        columns = Columns.__new__(Columns)
        np = _np()
        columns.offsets = block[0 : 8 * n].view(np.int64)
        columns.timestamps_ms = block[8 * c : 8 * c + 8 * n].view(np.int64)
        columns.key_positions = block[16 * c : 16 * c + 8 * n].view(np.int64)
        columns.value_positions = block[24 * c : 24 * c + 8 * n].view(np.int64)
        columns.key_lengths = block[32 * c : 32 * c + 4 * n].view(np.int32)
        columns.value_lengths = block[36 * c : 36 * c + 4 * n].view(np.int32)
        columns.data = data
        return columns


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline Py_ssize_t _parse_run(const unsigned char *data, Py_ssize_t *position_io,
                                  Py_ssize_t end, Py_ssize_t i, Py_ssize_t limit,
                                  uint64_t base_offset, uint64_t base_timestamp,
                                  bint log_append_time, int64_t max_timestamp,
                                  int64_t *columns64, int32_t *columns32,
                                  Py_ssize_t stride) noexcept nogil:
    """Parse records i, i+1, ... (below ``limit``) of the common shape into the columns,
    from ``position_io[0]``; stop at the first record of another shape (or near the end of
    the area) and return the index reached, with ``position_io`` at that record. Never fails:
    the caller parses the record it stopped at with the checked ``_parse_record``.

    The columns are the builder's block: int64 offsets, timestamps, key positions and value
    positions at ``columns64 + k * stride`` and int32 key and value lengths at ``columns32 +
    k * stride`` (one pointer each keeps the loop in registers).

    The common shape: length, timestamp delta, offset delta, key length and value length of
    1 or 2 bytes, no headers, 16 bytes readable from the record's start. Its fields come out
    of three 8-byte loads by shifts (``_uvarint2``, no load per byte), lengths are checked
    on the raw zig-zag value (odd: negative), and the next record's position is taken from
    the length alone: one load and one varint from record to record, while the checks of
    each record's fields (in bounds, ending exactly at the body end, as ``_parse_record``)
    run beside that chain. ~5 ns/record instead of ~9 ns."""
    cdef Py_ssize_t position = position_io[0], body_start, body_end, at
    cdef Py_ssize_t key_position, value_position
    cdef uint64_t word, u, timestamp_u, offset_u
    cdef unsigned int n
    cdef int64_t key_length, value_length
    while i < limit and end - position >= 16:
        __builtin_prefetch(data + position + 2048)
        if not _uvarint2(seglog_load_le64(data + position), &n, &u) or (u & 1) or u < 2:
            break
        body_start = position + n
        body_end = body_start + <Py_ssize_t>(u >> 1)
        if body_end > end:
            break
        # After the attributes byte: timestamp delta, offset delta, key length (<= 6 bytes;
        # body_start + 9 <= position + 11 <= end).
        word = seglog_load_le64(data + body_start + 1)
        at = body_start + 1
        if not _uvarint2(word, &n, &timestamp_u):
            break
        at += n
        word >>= 8 * n
        if not _uvarint2(word, &n, &offset_u):
            break
        at += n
        word >>= 8 * n
        if not _uvarint2(word, &n, &u):
            break
        at += n
        if u & 1:  # Kafka reads any negative length as null
            key_position = key_length = -1
        else:
            key_length = <int64_t>(u >> 1)
            if key_length > body_end - at:
                break
            key_position = at
            at += key_length
        if end - at < 8 or not _uvarint2(seglog_load_le64(data + at), &n, &u):
            break
        at += n
        if u & 1:
            value_position = value_length = -1
        else:
            value_length = <int64_t>(u >> 1)
            if value_length > body_end - at - 1:
                break
            value_position = at
            at += value_length
        if at + 1 != body_end or data[at] != 0:  # header count 0, fields end at the body end
            break
        columns64[i] = <int64_t>(base_offset + <uint64_t>_unzigzag(offset_u))
        columns64[i + stride] = max_timestamp if log_append_time else \
            <int64_t>(base_timestamp + <uint64_t>_unzigzag(timestamp_u))
        columns64[i + 2 * stride] = key_position
        columns64[i + 3 * stride] = value_position
        columns32[i] = <int32_t>key_length
        columns32[i + stride] = <int32_t>value_length
        position = body_end
        i += 1
    position_io[0] = position
    return i


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _parse_into(_ColumnsBuilder builder, const unsigned char *data, Py_ssize_t start,
                            Py_ssize_t end, int32_t count, Py_ssize_t bound, Batch batch,
                            ParseFailure *failure) noexcept nogil:
    """Parse ``count`` records of one area into the builder's arrays from index builder.count
    (room for ``bound`` records is reserved). Returns the records parsed, or -1."""
    cdef ColumnsTarget target
    cdef AreaTask task
    target.offsets = builder.offsets
    target.timestamps = builder.timestamps
    target.key_positions = builder.key_positions
    target.value_positions = builder.value_positions
    target.key_lengths = builder.key_lengths
    target.value_lengths = builder.value_lengths
    target.capacity = builder.capacity
    task.start = start
    task.end = end
    task.count = count
    task.bound = bound
    task.at = builder.count
    task.base_offset = batch.base_offset
    task.base_timestamp = batch.base_timestamp_ms
    task.max_timestamp = batch.max_timestamp_ms
    task.log_append_time = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
    return _parse_area(&target, data, &task, failure)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _parse_area(const ColumnsTarget *target, const unsigned char *data,
                            const AreaTask *task, ParseFailure *failure) noexcept nogil:
    """Parse ``task.count`` records of data[task.start:task.end] into the columns from index
    ``task.at`` (room for ``task.bound`` records is reserved there). Returns the records
    parsed, or -1 with ``failure`` filled in. Touches no Python object (the threaded decode
    runs it on a worker thread). Runs of common-shape records go through ``_parse_run``; any
    other record through the checked ``_parse_record`` (which also reports every error)."""
    cdef Py_ssize_t start = task.start, end = task.end, bound = task.bound, at = task.at
    cdef int32_t count = task.count
    cdef Py_ssize_t position = start, next_position, i = 0
    cdef Py_ssize_t limit = count if count < bound else bound
    cdef ParsedRecord parsed
    cdef bint log_append_time = task.log_append_time
    cdef uint64_t base_offset = <uint64_t>task.base_offset
    cdef uint64_t base_timestamp = <uint64_t>task.base_timestamp
    cdef int64_t max_timestamp = task.max_timestamp
    cdef int64_t *offsets = target.offsets + at
    cdef int64_t *timestamps = target.timestamps + at
    cdef int64_t *key_positions = target.key_positions + at
    cdef int32_t *key_lengths = target.key_lengths + at
    cdef int64_t *value_positions = target.value_positions + at
    cdef int32_t *value_lengths = target.value_lengths + at
    memset(&parsed, 0, sizeof(parsed))
    while True:
        i = _parse_run(data, &position, end, i, limit, base_offset, base_timestamp,
                       log_append_time, max_timestamp, offsets, key_lengths,
                       target.capacity)
        if i >= count:
            break
        # Records are read front to back but only their framing is touched; ask for the
        # cache lines a few records ahead (prefetch never faults, even past the end).
        __builtin_prefetch(data + position + 2048)
        next_position = _parse_record(data, position, end, &parsed, failure)
        if next_position < 0:
            return -1
        position = next_position
        if i >= bound:  # unreachable: each record takes >= 7 bytes
            failure.code = E_PREMATURE_EOF
            return -1
        offsets[i] = <int64_t>(base_offset + <uint64_t><int64_t>parsed.offset_delta)
        if log_append_time:
            timestamps[i] = max_timestamp
        else:
            timestamps[i] = <int64_t>(base_timestamp + <uint64_t>parsed.timestamp_delta)
        key_positions[i] = parsed.key_position
        key_lengths[i] = parsed.key_length
        value_positions[i] = parsed.value_position
        value_lengths[i] = parsed.value_length
        i += 1
    if position != end:
        failure.code = E_RECORDS_REMAINING
        return -1
    return count
