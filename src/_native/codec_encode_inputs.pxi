# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# Encode, step 1: the arguments of encode_batch gathered into C arrays, checked in the twin's
# order and with its errors: values and keys (_Column: lists of bytes-likes, 2-D uint8 arrays,
# (data, lengths)), headers encoded per record, timestamps, offset deltas; all held in one
# _RecordsToEncode.

@cython.final
cdef class _Column:
    """Pointers and lengths of one column (values, keys or encoded headers) of ``n`` records,
    with every buffer export and object they point into held until the column is freed."""
    cdef const unsigned char **pointers
    cdef Py_ssize_t *lengths          # -1 for null
    cdef Py_ssize_t n
    cdef Py_buffer *held
    cdef Py_ssize_t held_count
    cdef Py_ssize_t held_capacity
    cdef list keep
    cdef bint nogil_safe              # pointers do not depend on a mutable Python container

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.held_count):
            PyBuffer_Release(&self.held[i])
        PyMem_Free(self.held)
        PyMem_Free(self.pointers)
        PyMem_Free(self.lengths)

    cdef int _allocate(self, Py_ssize_t n) except -1:
        self.n = n
        self.pointers = <const unsigned char **>PyMem_Malloc((n if n else 1) * sizeof(void *))
        self.lengths = <Py_ssize_t *>PyMem_Malloc((n if n else 1) * sizeof(Py_ssize_t))
        if self.pointers == NULL or self.lengths == NULL:
            raise MemoryError()
        self.keep = []
        return 0

    cdef Py_buffer *_hold(self) except NULL:
        """A slot for one more buffer export. The array is allocated once with room for every
        record (plus two for numpy inputs) and never moved: a Py_buffer may point into itself
        (``shape = &len``)."""
        if self.held == NULL:
            self.held_capacity = self.n + 2
            self.held = <Py_buffer *>PyMem_Malloc(self.held_capacity * sizeof(Py_buffer))
            if self.held == NULL:
                raise MemoryError()
        if self.held_count >= self.held_capacity:
            raise AssertionError("more buffer exports than records")
        return &self.held[self.held_count]


cdef bint _is_data_and_lengths(column):
    # The twin's rule: any 2-tuple whose second item is a numpy array is (data, lengths), and
    # lengths that are not a 1-D integer array are then an error.
    return isinstance(column, tuple) and len(column) == 2 and _is_ndarray(column[1])


cdef int _check_lengths_array(lengths, str what) except -1:
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise InvalidRecordError(
            f"the lengths of a (data, lengths) {what} column must be a 1-D integer numpy "
            f"array, got {lengths.ndim}-D {lengths.dtype}"
        )
    return 0


cdef int _export_item(_Column column, Py_ssize_t index, object item, str what) except -1:
    """Point column[index] at a bytes-like ``item`` that is not exactly ``bytes``."""
    cdef Py_buffer *slot = column._hold()
    try:
        PyObject_GetBuffer(item, slot, PyBUF_FULL_RO)
    except (TypeError, BufferError):
        raise InvalidRecordError(
            f"{what} of record {index} is {type(item).__name__}, expected a bytes-like object "
            "or None"
        ) from None
    column.held_count += 1
    if not PyBuffer_IsContiguous(slot, b'C'):
        raise InvalidRecordError(f"{what} of record {index} is not a C-contiguous buffer")
    column.pointers[index] = <const unsigned char *>slot.buf
    column.lengths[index] = slot.len
    return 0


cdef _Column _make_column(object source, str what):
    """Gather a values/keys argument into a _Column; the twin's ``_column_items`` rules and
    errors. No per-record Python work for numpy inputs; for a list only a type check per item."""
    if _is_ndarray(source) and source.ndim != 1:
        return _array_column(source, what)
    if _is_data_and_lengths(source):
        return _data_and_lengths_column(source[0], source[1], what)
    if isinstance(source, (str, int)) or source is None:
        raise InvalidRecordError(
            f"{what}s must be a sequence, a 2-D uint8 array or (data, lengths), not "
            f"{type(source).__name__}"
        )
    if type(source) is not list and type(source) is not tuple:
        try:
            source = list(source)
        except TypeError:
            raise InvalidRecordError(
                f"{what}s must be a sequence, a 2-D uint8 array or (data, lengths), not "
                f"{type(source).__name__}"
            ) from None
    return _sequence_column(source, what)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Column _array_column(object source, str what):
    """A 2-D C-contiguous uint8 array: one row per record, pointers computed without the GIL."""
    cdef _Column column = _Column.__new__(_Column)
    cdef Py_ssize_t n, i, row_bytes
    cdef Py_buffer *slot
    cdef const unsigned char *base
    np = _np()
    if source.ndim != 2 or source.dtype != np.uint8 or not source.flags.c_contiguous:
        raise InvalidRecordError(
            f"a numpy array of {what}s must be 2-D C-contiguous uint8, got "
            f"{source.ndim}-D {source.dtype}"
            f"{'' if source.flags.c_contiguous else ' (not C-contiguous)'}"
        )
    n = source.shape[0]
    row_bytes = source.shape[1]
    column._allocate(n)
    slot = column._hold()
    PyObject_GetBuffer(source, slot, PyBUF_SIMPLE)
    column.held_count += 1
    base = <const unsigned char *>slot.buf
    with nogil:
        for i in range(n):
            column.pointers[i] = base + i * row_bytes
            column.lengths[i] = row_bytes
    column.nogil_safe = True
    return column


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Column _data_and_lengths_column(object data, object length_array, str what):
    """``(data, lengths)``: records cut from one buffer in order, -1 a null; the lengths are
    checked against the data's size without the GIL."""
    cdef _Column column = _Column.__new__(_Column)
    cdef Py_ssize_t n, i, position, data_bytes
    cdef Py_buffer *slot
    cdef const unsigned char *base
    cdef const int64_t *lengths
    cdef int64_t length
    np = _np()
    _check_lengths_array(length_array, what)
    if length_array.dtype.kind == "u" and length_array.dtype.itemsize >= 8:
        # uint64 lengths above INT64_MAX would wrap to negatives (-1: null) in the int64
        # copy below; clamped they fail the data-size check as they do in the twin.
        length_array = np.minimum(length_array, np.uint64(INT64_MAX))
    length_array = np.ascontiguousarray(length_array, dtype=np.int64)
    n = length_array.shape[0]
    column._allocate(n)
    slot = column._hold()
    try:
        PyObject_GetBuffer(data, slot, PyBUF_SIMPLE)
    except (TypeError, BufferError):
        raise InvalidRecordError(
            f"the data of a (data, lengths) {what} column is {type(data).__name__}, "
            "expected a C-contiguous bytes-like object"
        ) from None
    column.held_count += 1
    base = <const unsigned char *>slot.buf
    data_bytes = slot.len
    slot = column._hold()
    PyObject_GetBuffer(length_array, slot, PyBUF_SIMPLE)
    column.held_count += 1
    lengths = <const int64_t *>slot.buf
    position = 0
    i = -1
    with nogil:
        for i in range(n):
            length = lengths[i]
            if length == -1:
                column.pointers[i] = NULL
                column.lengths[i] = -1
                continue
            if length < -1 or length > data_bytes - position:
                break
            column.pointers[i] = base + position
            column.lengths[i] = length
            position += length
        else:
            i = n
    if i < n:
        length = lengths[i]
        if length < -1:
            raise InvalidRecordError(f"{what} length of record {i} is {length}, below -1")
        raise InvalidRecordError(
            f"{what} lengths add up to more than the {data_bytes} bytes of data "
            f"(at record {i})"
        )
    column.nogil_safe = True
    return column


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Column _sequence_column(object source, str what):
    """A list or tuple of bytes-like objects or None: ``bytes`` items are pointed at directly,
    others are buffer exports held by the column."""
    cdef _Column column = _Column.__new__(_Column)
    cdef Py_ssize_t n = len(source), i
    cdef PyObject *item
    cdef PyObject **items
    column._allocate(n)
    column.keep.append(source)
    items = _seq_items(source)
    for i in range(n):
        item = items[i]
        if _is_bytes_exact(item):
            column.pointers[i] = <const unsigned char *>_bytes_data(item)
            column.lengths[i] = _bytes_size(item)
        elif item == _Py_None:
            column.pointers[i] = NULL
            column.lengths[i] = -1
        else:
            _export_item(column, i, <object>item, what)
    # A list could be mutated by another thread once the GIL is released; keep it.
    column.nogil_safe = False
    return column


cdef bytes _header_block(record_headers, Py_ssize_t index):
    """The encoded header count and headers of one record (the twin's rules and errors)."""
    if record_headers is None:
        return b"\x00"
    try:
        pairs = list(record_headers)
    except TypeError:
        raise InvalidRecordError(
            f"headers of record {index} must be a sequence of (str, bytes | None) pairs, not "
            f"{type(record_headers).__name__}"
        ) from None
    parts = [_varint_bytes(len(pairs))]
    for header_index, pair in enumerate(pairs):
        try:
            key, value = pair
        except (TypeError, ValueError):
            raise InvalidRecordError(
                f"header {header_index} of record {index} is not a (str, bytes | None) pair"
            ) from None
        if not isinstance(key, str):
            raise InvalidRecordError(
                f"header key {header_index} of record {index} is {type(key).__name__}, "
                "expected str (a null header key is illegal)"
            )
        try:
            key_bytes = key.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRecordError(
                f"header key {header_index} of record {index} is not encodable as UTF-8: {exc}"
            ) from None
        parts.append(_varint_bytes(len(key_bytes)))
        parts.append(key_bytes)
        if value is None:
            parts.append(b"\x01")  # varint -1
        else:
            value = _header_value_bytes(value, index, header_index)
            parts.append(_varint_bytes(len(value)))
            parts.append(value)
    return b"".join(parts)


cdef bytes _header_value_bytes(value, Py_ssize_t index, Py_ssize_t header_index):
    if type(value) is bytes:
        return value
    try:
        view = memoryview(value)
    except TypeError:
        raise InvalidRecordError(
            f"header value {header_index} of record {index} is {type(value).__name__}, "
            "expected a bytes-like object or None"
        ) from None
    if not view.c_contiguous:
        raise InvalidRecordError(
            f"header value {header_index} of record {index} is not a C-contiguous buffer"
        )
    return view.tobytes()


cdef bytes _varint_bytes(Py_ssize_t value):
    cdef unsigned char scratch[VARINT_BYTES_MAX]
    cdef unsigned char *end
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    end = write_varint(scratch, <int32_t>value)
    return PyBytes_FromStringAndSize(<char *>scratch, end - scratch)


cdef _Column _headers_column(headers, Py_ssize_t record_count):
    cdef _Column column
    cdef Py_ssize_t i
    cdef bytes block
    if isinstance(headers, (str, bytes)):
        raise InvalidRecordError("headers must be one sequence of pairs per record")
    headers = list(headers)
    if len(headers) != record_count:
        raise InvalidRecordError(f"got {len(headers)} header lists for {record_count} values")
    column = _Column.__new__(_Column)
    column._allocate(record_count)
    for i in range(record_count):
        block = _header_block(headers[i], i)
        column.keep.append(block)
        column.pointers[i] = <const unsigned char *>PyBytes_AS_STRING(block)
        column.lengths[i] = PyBytes_GET_SIZE(block)
    column.nogil_safe = True  # the blocks are immutable bytes held in column.keep
    return column


@cython.final
cdef class _Timestamps:
    cdef int64_t *values       # NULL: every record has `constant`
    cdef int64_t constant
    cdef object keep

    def __dealloc__(self):
        if self.keep is None:
            PyMem_Free(self.values)


cdef int64_t _timestamp_value(stamp, Py_ssize_t index) except? -2:
    try:
        stamp = operator.index(stamp)
    except TypeError:
        raise InvalidTimestampError(
            f"timestamp of record {index} is {type(stamp).__name__}, expected an int"
        ) from None
    if not -1 <= stamp <= INT64_MAX:
        raise InvalidTimestampError(
            f"timestamp of record {index} is {stamp}; timestamps are -1 or in [0, 2**63)"
        )
    return stamp


@cython.boundscheck(False)
@cython.wraparound(False)
cdef _Timestamps _make_timestamps(timestamps_ms, Py_ssize_t record_count):
    """The twin's ``_timestamps`` rules: None -> one clock read; an int -> every record; a
    sequence or array -> one per record; each -1 or in [0, 2**63)."""
    cdef _Timestamps result = _Timestamps.__new__(_Timestamps)
    cdef Py_buffer view
    cdef const int64_t *source
    cdef Py_ssize_t i, bad = -1
    if timestamps_ms is None:
        result.constant = seglog_now_ms()
        return result
    if (_is_ndarray(timestamps_ms) and timestamps_ms.ndim == 1
            and timestamps_ms.dtype == _np().int64):
        if timestamps_ms.shape[0] != record_count:
            raise InvalidRecordError(
                f"got {timestamps_ms.shape[0]} timestamps for {record_count} records"
            )
        array = _np().ascontiguousarray(timestamps_ms)
        result.keep = array
        PyObject_GetBuffer(array, &view, PyBUF_SIMPLE)
        result.values = <int64_t *>view.buf  # alive while `keep` holds the array
        PyBuffer_Release(&view)
        source = result.values
        with nogil:
            for i in range(record_count):
                if source[i] < -1:
                    bad = i
                    break
        if bad >= 0:
            _timestamp_value(int(source[bad]), bad)
        return result
    if _is_ndarray(timestamps_ms):
        timestamps_ms = timestamps_ms.tolist()
    if isinstance(timestamps_ms, (list, tuple)) or (
        hasattr(timestamps_ms, "__len__") and hasattr(timestamps_ms, "__getitem__")
    ):
        stamps = timestamps_ms if type(timestamps_ms) is list else list(timestamps_ms)
        if len(stamps) != record_count:
            raise InvalidRecordError(f"got {len(stamps)} timestamps for {record_count} records")
        result.values = <int64_t *>PyMem_Malloc((record_count if record_count else 1) * sizeof(int64_t))
        if result.values == NULL:
            raise MemoryError()
        for i in range(record_count):
            result.values[i] = _timestamp_value(stamps[i], i)
        return result
    result.constant = _timestamp_value(timestamps_ms, 0)
    return result


@cython.final
cdef class _OffsetDeltas:
    """Each record's offset delta: NULL means 0..n-1 (the usual batch)."""
    cdef int32_t *values

    def __dealloc__(self):
        PyMem_Free(self.values)


cdef tuple _offset_deltas(offset_deltas, last_offset_delta, Py_ssize_t record_count):
    """``(deltas, last_offset_delta)``, the twin's ``_offset_deltas`` rules and errors (used by
    the cleaner to rebuild batches with the original offsets; not a hot path)."""
    cdef _OffsetDeltas result = _OffsetDeltas.__new__(_OffsetDeltas)
    cdef Py_ssize_t index
    if offset_deltas is None:
        last = record_count - 1
    else:
        if _is_ndarray(offset_deltas):
            if offset_deltas.ndim != 1 or offset_deltas.dtype.kind not in "iu":
                raise InvalidRecordError("offset_deltas must be a 1-D integer array")
            offset_deltas = offset_deltas.tolist()
        try:
            deltas = [operator.index(delta) for delta in offset_deltas]
        except TypeError:
            raise InvalidRecordError("offset_deltas must be a sequence of ints") from None
        if len(deltas) != record_count:
            raise InvalidRecordError(
                f"got {len(deltas)} offset deltas for {record_count} records"
            )
        previous = -1
        for index, delta in enumerate(deltas):
            if not previous < delta <= INT32_MAX:
                raise InvalidRecordError(
                    f"offset delta of record {index} is {delta}; deltas must be strictly "
                    f"increasing ints in [0, {INT32_MAX}]"
                )
            previous = delta
        result.values = <int32_t *>PyMem_Malloc(record_count * sizeof(int32_t))
        if result.values == NULL:
            raise MemoryError()
        for index in range(record_count):
            result.values[index] = deltas[index]
        last = deltas[-1]
    if last_offset_delta is not None:
        last = _check_range("last_offset_delta", last_offset_delta, last, INT32_MAX)
    return result, last


cdef object _check_range(str name, value, low, high):
    try:
        value = operator.index(value)
    except TypeError:
        raise InvalidRecordError(f"{name} must be an int, got {type(value).__name__}") from None
    if not low <= value <= high:
        raise InvalidRecordError(f"{name} must be in [{low}, {high}], got {value}")
    return value


@cython.final
@cython.freelist(8)
cdef class _RecordsToEncode:
    """The checked record columns of one batch (step 1 of _encode), then each record's body
    size (step 3, ``bodies``, owned here and freed with the object)."""
    cdef _Column values
    cdef _Column keys                 # None: every key null
    cdef _Column headers              # None: no record has headers
    cdef _Timestamps stamps
    cdef _OffsetDeltas deltas
    cdef Py_ssize_t n
    cdef int32_t last_offset_delta
    cdef bint release_gil             # every column may be read without the GIL
    cdef int32_t *bodies

    def __dealloc__(self):
        PyMem_Free(self.bodies)


cdef _RecordsToEncode _gather_records(values, keys, timestamps_ms, headers, offset_deltas,
                                      last_offset_delta):
    """Step 1: the values, keys, headers, timestamps and offset deltas as C arrays, checked in
    the twin's order (values first: they give the record count)."""
    cdef _RecordsToEncode records = _RecordsToEncode.__new__(_RecordsToEncode)
    cdef Py_ssize_t n
    records.values = _make_column(values, "value")
    n = records.n = records.values.n
    if n == 0:
        raise InvalidRecordError("a batch needs at least one record")
    if n > INT32_MAX_:
        raise RecordTooLargeError(f"{n} records do not fit one batch")
    if keys is not None:
        records.keys = _make_column(keys, "key")
        if records.keys.n != n:
            raise InvalidRecordError(f"got {records.keys.n} keys for {n} values")
    if headers is not None:
        records.headers = _headers_column(headers, n)
    records.stamps = _make_timestamps(timestamps_ms, n)
    records.deltas, last = _offset_deltas(offset_deltas, last_offset_delta, n)
    records.last_offset_delta = last
    records.release_gil = (records.values.nogil_safe
                           and (records.keys is None or records.keys.nogil_safe))
    return records
