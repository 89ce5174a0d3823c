# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# Decoded records: the Record type, the errors of the shared record parser (_records.pxd)
# raised with Kafka's messages, headers made into Python objects, and one record found by its
# offset (Batch.record_at, and batch_record_at, Segment.read_record's entry through codec.pxd).

@cython.freelist(4096)
@cython.no_gc
@cython.final
cdef class Record:
    """One decoded record: ``offset``, ``timestamp_ms``, ``key``, ``value``, ``headers``.

    ``key``/``value`` are ``bytes`` or None; ``headers`` a tuple of ``(str, bytes | None)``
    pairs, ``()`` when there are none. ``tuple(record)`` is ``(offset, timestamp_ms, key,
    value, headers)``. Equality compares those five fields with any object that has them (a
    native record equals a pure one); records are hashable.

    The fields are read-only and the type is not tracked by the cyclic garbage collector: a
    batch's records() makes thousands at once, and tracking them made every young-generation
    collection walk them (a third of the decode time). Records hold only bytes, None and
    tuples of (str, bytes), so they cannot be part of a reference cycle unless one is built
    on purpose through the constructor's ``headers`` argument (that cycle would leak).
    """

    cdef readonly int64_t offset
    cdef readonly int64_t timestamp_ms
    cdef readonly object key
    cdef readonly object value
    cdef readonly object headers

    def __init__(self, offset, timestamp_ms, key, value, headers=()):
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.key = key
        self.value = value
        self.headers = headers

    def __iter__(self):
        return iter((self.offset, self.timestamp_ms, self.key, self.value, self.headers))

    def __eq__(self, other):
        try:
            other_fields = (
                other.offset, other.timestamp_ms, other.key, other.value, other.headers
            )
        except AttributeError:
            return NotImplemented
        return (self.offset, self.timestamp_ms, self.key, self.value, self.headers) == other_fields

    def __ne__(self, other):
        result = self.__eq__(other)
        if result is NotImplemented:
            return result
        return not result

    def __hash__(self):
        return hash((self.offset, self.timestamp_ms, self.key, self.value, self.headers))

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp_ms, self.key, self.value, self.headers))

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp_ms={self.timestamp_ms}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


#: ConsumerRecord's field names, in the order of its constructor, tuple() and indexing.
_CONSUMER_RECORD_FIELDS = ("topic", "partition", "offset", "timestamp_ms", "key", "value",
                           "headers")


cdef inline bint _is_consumer_record_like(object other):
    # What a ConsumerRecord compares with: a tuple (the NamedTuple it was equalled, hashed
    # and ordered as), or a record type with its fields (the twin's ConsumerRecord).
    return isinstance(other, tuple) or \
        getattr(type(other), "_fields", None) == _CONSUMER_RECORD_FIELDS


@cython.freelist(4096)
@cython.no_gc
@cython.final
cdef class ConsumerRecord:
    """One record as a consumer sees it: where it is (``topic``, ``partition``, ``offset``)
    and what it holds (``timestamp_ms``, ``key``, ``value``, ``headers``).

    ``key``/``value`` are ``bytes`` or None; ``headers`` a tuple of ``(str, bytes | None)``
    pairs, ``()`` when there are none. The fields are read-only. It behaves as the
    7-field NamedTuple it used to be: ``tuple(record)``, unpacking, ``record[i]`` (slices
    too) and ``len`` give the fields in that order; ``_fields``, ``_asdict()``,
    ``_replace(**fields)`` and ``_make(iterable)`` are there; it equals, hashes and orders as
    the tuple of its fields (so it equals that tuple and a twin's ConsumerRecord), its
    ``repr`` is the NamedTuple's, and it pickles. It is **not a tuple subclass** (since issue
    27): ``isinstance(record, tuple)`` is False and ``record + (x,)`` is not defined
    (``(*record, x)`` is).

    Why not a NamedTuple: a poll makes thousands at once; a tuple subclass carries a cyclic
    GC header and an ``int`` object per offset, and its allocations triggered young-generation
    collections that walked every record held (half of a poll's cost over the core's
    :class:`Record`). This type keeps ``partition`` as a C int32, ``offset`` and
    ``timestamp_ms`` as C int64, and is not tracked by the cyclic garbage collector: it holds
    only str, bytes, None and tuples of (str, bytes), so it is in no reference cycle unless
    one is built on purpose through the constructor's ``headers`` (that cycle would leak).
    """

    cdef readonly object topic
    cdef readonly int32_t partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp_ms
    cdef readonly object key
    cdef readonly object value
    cdef readonly object headers

    _fields = _CONSUMER_RECORD_FIELDS
    __match_args__ = _CONSUMER_RECORD_FIELDS

    def __init__(self, topic, partition, offset, timestamp_ms, key, value, headers):
        self.topic = topic
        # operator.index: an int or TypeError (a C field would truncate 1.5), as the twin
        self.partition = operator.index(partition)
        self.offset = operator.index(offset)
        self.timestamp_ms = operator.index(timestamp_ms)
        self.key = key
        self.value = value
        self.headers = headers

    cdef tuple _as_tuple(self):
        return (self.topic, self.partition, self.offset, self.timestamp_ms, self.key,
                self.value, self.headers)

    @classmethod
    def _make(cls, iterable):
        """A ConsumerRecord of the 7 items of ``iterable`` (NamedTuple's ``_make``)."""
        fields = tuple(iterable)
        if len(fields) != 7:
            raise TypeError(f"Expected 7 arguments, got {len(fields)}")
        return cls(*fields)

    def _asdict(self):
        """The fields as a dict, by name (NamedTuple's ``_asdict``)."""
        return dict(zip(_CONSUMER_RECORD_FIELDS, self._as_tuple()))

    def _replace(self, **changes):
        """A new ConsumerRecord with ``changes`` (by field name) applied (NamedTuple's
        ``_replace``: ValueError for a name that is not a field)."""
        fields = self._asdict()
        for name, value in changes.items():
            if name not in fields:
                raise ValueError(f"Got unexpected field names: {list(changes)!r}")
            fields[name] = value
        return ConsumerRecord(**fields)

    def __len__(self):
        return 7

    def __iter__(self):
        return iter(self._as_tuple())

    def __getitem__(self, index):
        return self._as_tuple()[index]

    def __richcmp__(self, other, int op):
        if isinstance(other, ConsumerRecord):
            theirs = (<ConsumerRecord>other)._as_tuple()
        elif _is_consumer_record_like(other):
            theirs = tuple(other)
        else:
            return NotImplemented
        mine = self._as_tuple()
        if op == 2:
            return mine == theirs
        if op == 3:
            return mine != theirs
        if op == 0:
            return mine < theirs
        if op == 1:
            return mine <= theirs
        if op == 4:
            return mine > theirs
        return mine >= theirs

    def __hash__(self):
        return hash(self._as_tuple())

    def __reduce__(self):
        return (ConsumerRecord, self._as_tuple())

    def __repr__(self):
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition!r}, "
            f"offset={self.offset!r}, timestamp_ms={self.timestamp_ms!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


cdef int _raise_parse_failure(ParseFailure *failure) except -1:
    cdef int code = failure.code
    if code == E_PREMATURE_EOF:
        raise InvalidRecordError(_PREMATURE_EOF)
    if code == E_VARINT_TOO_LONG:
        raise InvalidRecordError(f"varint is longer than 5 bytes at position {failure.a}")
    if code == E_VARINT_UNDERFLOW:
        raise InvalidRecordError(f"varint runs past the end of the buffer at position {failure.a}")
    if code == E_VARLONG_TOO_LONG:
        raise InvalidRecordError(f"varlong is longer than 10 bytes at position {failure.a}")
    if code == E_VARLONG_UNDERFLOW:
        raise InvalidRecordError(f"varlong runs past the end of the buffer at position {failure.a}")
    if code == E_BODY_SIZE:
        raise InvalidRecordError(
            f"Invalid record size: expected {failure.a} bytes in record payload, but "
            f"instead the buffer has only {failure.b} remaining bytes."
        )
    if code == E_NO_ATTRIBUTES:
        raise InvalidRecordError("Found invalid record structure: no attributes byte")
    if code == E_KEY_PAST:
        raise InvalidRecordError("Found invalid record structure: key runs past the record")
    if code == E_VALUE_PAST:
        raise InvalidRecordError("Found invalid record structure: value runs past the record")
    if code == E_HEADER_COUNT_NEGATIVE:
        raise InvalidRecordError(f"Found invalid number of record headers {failure.a}")
    if code == E_HEADER_COUNT_LARGE:
        raise InvalidRecordError(
            f"Found invalid number of record headers. {failure.a} is larger than the "
            "remaining size of the buffer"
        )
    if code == E_HEADER_KEY_NEGATIVE:
        raise InvalidRecordError(f"Invalid negative header key size {failure.a}")
    if code == E_HEADER_KEY_PAST:
        raise InvalidRecordError("Found invalid record structure: header key runs past the record")
    if code == E_HEADER_VALUE_PAST:
        raise InvalidRecordError(
            "Found invalid record structure: header value runs past the record"
        )
    if code == E_SIZE_MISMATCH:
        raise InvalidRecordError(
            f"Invalid record size: expected to read {failure.a} bytes in record payload, "
            f"but instead read {failure.b}"
        )
    if code == E_RECORDS_REMAINING:
        raise InvalidRecordError(_RECORDS_REMAINING)
    raise AssertionError(f"unknown parse failure {code}")


cdef tuple _decode_headers(const unsigned char *data, Py_ssize_t position, int32_t count):
    """Headers already validated by _parse_record, as a tuple of (str, bytes | None)."""
    cdef int32_t length = 0, i
    cdef list pairs = []
    cdef object key, value
    for i in range(count):
        position = read_varint(data, position, position + VARINT_BYTES_MAX, &length)
        # Java's new String(bytes, UTF_8) replaces malformed input; so does the twin.
        key = PyUnicode_DecodeUTF8(<const char *>data + position, length, "replace")
        position += length
        position = read_varint(data, position, position + VARINT_BYTES_MAX, &length)
        if length >= 0:
            value = PyBytes_FromStringAndSize(<const char *>data + position, length)
            position += length
        else:
            value = None
        pairs.append((key, value))
    return tuple(pairs)


cdef object _make_value(const unsigned char *data, ParsedRecord *parsed):
    """The value of a record _parse_record accepted: bytes, or None for a null value (the
    point read's value-only answer: no Record, no key or header objects)."""
    if parsed.value_length >= 0:
        return PyBytes_FromStringAndSize(<const char *>data + parsed.value_position,
                                         parsed.value_length)
    return None


cdef Record _make_record(const unsigned char *data, ParsedRecord *parsed, int64_t offset,
                         int64_t timestamp_ms):
    cdef Record record = Record.__new__(Record)
    record.offset = offset
    record.timestamp_ms = timestamp_ms
    if parsed.key_length >= 0:
        record.key = PyBytes_FromStringAndSize(<const char *>data + parsed.key_position,
                                               parsed.key_length)
    else:
        record.key = None
    if parsed.value_length >= 0:
        record.value = PyBytes_FromStringAndSize(<const char *>data + parsed.value_position,
                                                 parsed.value_length)
    else:
        record.value = None
    if parsed.header_count:
        record.headers = _decode_headers(data, parsed.headers_position, parsed.header_count)
    else:
        record.headers = ()
    return record


cdef object _record_in_area(const unsigned char *data, Py_ssize_t start, Py_ssize_t end,
                            int32_t count, int64_t base_offset, int64_t base_timestamp_ms,
                            int64_t max_timestamp_ms, bint log_append_time, int64_t offset,
                            Py_ssize_t hint=-1, bint value_only=False):
    """Batch.record_at on a record area (count > 0, offset within the batch's range).
    ``hint``: where the record probably starts (>= start), or -1. It is taken only when a
    whole record parses there with the wanted offset delta; otherwise the area is walked.
    ``value_only``: the record's value (bytes or None) instead of a Record; the record is
    parsed and checked all the same (_make_value)."""
    cdef ParsedRecord parsed
    cdef ParseFailure failure
    cdef Py_ssize_t position
    memset(&parsed, 0, sizeof(parsed))
    if start <= hint < end:
        position = _parse_record(data, hint, end, &parsed, &failure)
        if position >= 0 and parsed.offset_delta == offset - base_offset:
            if value_only:
                return _make_value(data, &parsed)
            return _make_record(
                data, &parsed, offset,
                max_timestamp_ms if log_append_time else
                <int64_t>(<uint64_t>base_timestamp_ms + <uint64_t>parsed.timestamp_delta))
    position = _find_record(data, start, end, count, offset - base_offset, &failure)
    if position == RECORD_NOT_FOUND:
        return None
    if position >= 0:
        position = _parse_record(data, position, end, &parsed, &failure)
    if position < 0:
        _raise_parse_failure(&failure)
    if value_only:
        return _make_value(data, &parsed)
    return _make_record(
        data, &parsed, offset,
        max_timestamp_ms if log_append_time else
        <int64_t>(<uint64_t>base_timestamp_ms + <uint64_t>parsed.timestamp_delta))


cdef object batch_record_known(const unsigned char *batch, Py_ssize_t size, int64_t offset,
                               Py_ssize_t hint, int64_t base_offset, int32_t count,
                               int64_t base_timestamp_ms, int64_t max_timestamp_ms,
                               bint log_append_time, bint value_only):
    """Segment.read_record's (and read_value's) entry for a batch whose header it has already checked and
    remembered (cimported through codec.pxd): the record ``offset`` of the uncompressed batch
    at ``batch[0:size]``, with the header fields passed in, so the header's bytes are not
    read again. The caller guarantees what batch_record_at would check first: an
    uncompressed batch, ``count`` > 0, ``base_offset <= offset <= last offset`` (no int64
    overflow) and its CRC checked when it had to be. The record itself is parsed and checked
    as in batch_record_at (``hint`` is trusted only when a whole record with the wanted
    offset delta parses there). ``value_only``: the record's value (bytes or None) instead of
    a Record, after the same parse and checks (Segment.read_value)."""
    return _record_in_area(batch, RECORD_BATCH_OVERHEAD, size, count, base_offset,
                           base_timestamp_ms, max_timestamp_ms, log_append_time, offset, hint,
                           value_only)


cdef object batch_record_at(const unsigned char *batch, Py_ssize_t size, int64_t offset,
                            Py_ssize_t hint, bint check_crcs, Py_ssize_t max_decompressed_bytes):
    """Segment.read_record's entry (cimported through codec.pxd):
    Batch.record_at(offset, check_crcs=..., max_decompressed_bytes=...) for the whole, framed
    batch at ``batch[0:size]`` (61-byte header, magic 2, all present; the caller checked),
    without making a Batch for an uncompressed one. A segment that remembers which batches it
    has verified passes ``check_crcs`` False for them. ``hint``: where the record probably starts
    in an uncompressed batch, or -1 (see _record_in_area). The CRC (when checked) is computed
    on every call: the caller keeps no Batch to remember it in. Errors carry position 0 (the
    batch's start), as a Batch over ``batch`` would."""
    cdef int64_t base_offset = <int64_t>load_u64(batch + BASE_OFFSET_POSITION)
    cdef int32_t last_delta = <int32_t>load_u32(batch + LAST_OFFSET_DELTA_POSITION)
    cdef int32_t count = <int32_t>load_u32(batch + RECORDS_COUNT_POSITION)
    cdef int16_t attributes = <int16_t>load_u16(batch + ATTRIBUTES_POSITION)
    cdef int64_t last_offset
    cdef uint32_t computed
    if attributes & COMPRESSION_CODEC_MASK:
        view = PyMemoryView_FromMemory(<char *>batch, size, PyBUF_READ)
        whole = Batch(view)
        try:
            return whole.record_at(offset, check_crcs=check_crcs,
                                   max_decompressed_bytes=max_decompressed_bytes)
        finally:
            whole = None
            view.release()
    if seglog_add_overflows(base_offset, last_delta, &last_offset) or last_offset == INT64_MAX_C:
        # What Batch(view) (the compressed path, and the twin) raises for this header.
        raise CorruptRecordError(
            f"batch at position 0 has base offset {base_offset} and last offset delta "
            f"{last_delta}: its last offset overflows an int64",
            reason=REASON_BAD_LAST_OFFSET_DELTA, position=0,
        )
    if check_crcs:
        if size - ATTRIBUTES_POSITION < NOGIL_BYTES_MIN:
            computed = seglog_crc32c(0, batch + ATTRIBUTES_POSITION,
                                     <size_t>(size - ATTRIBUTES_POSITION))
        else:
            with nogil:
                computed = seglog_crc32c(0, batch + ATTRIBUTES_POSITION,
                                         <size_t>(size - ATTRIBUTES_POSITION))
        if computed != load_u32(batch + CRC_POSITION):
            raise CorruptRecordError(
                f"batch at position 0 is corrupt: stored crc {load_u32(batch + CRC_POSITION):#010x}, "
                f"computed {computed:#010x}",
                reason=REASON_CRC_MISMATCH, position=0,
            )
    if offset < base_offset or offset > last_offset:
        return None
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
    if count == 0:
        return None
    return _record_in_area(batch, RECORD_BATCH_OVERHEAD, size, count, base_offset,
                           <int64_t>load_u64(batch + BASE_TIMESTAMP_POSITION),
                           <int64_t>load_u64(batch + MAX_TIMESTAMP_POSITION),
                           (attributes & TIMESTAMP_TYPE_MASK) != 0, offset, hint)
