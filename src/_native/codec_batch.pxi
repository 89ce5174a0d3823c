# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# Batch: one RecordBatch v2 header decoded over the buffer that holds it, its derived fields,
# its CRC check (at most once per Batch) and its record decoders (records, consumer_records,
# record_at, columns, record_summary, control_type).

# Not tracked by the garbage collector: a Batch refers only to its _Buffer, which refers to
# the exporter of the bytes (bytes, bytearray, memoryview, mmap: C types that hold no
# reference back), so it is never part of a reference cycle. A consumer's read makes
# hundreds of them; tracked, every collection a poll's allocations trigger walked them and
# they pushed the full collections nearer (GC traversal was ~13 % of Consumer.poll).
@cython.no_gc
@cython.final
cdef class Batch:
    """One RecordBatch v2 header, decoded, over the buffer that holds the whole batch.

    Attributes are Kafka's header fields in snake case: ``base_offset``, ``batch_length``,
    ``partition_leader_epoch``, ``magic``, ``crc`` (as stored), ``attributes`` (the stored
    int16), ``last_offset_delta``, ``base_timestamp_ms``, ``max_timestamp_ms``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``record_count``; and derived:
    ``last_offset``, ``next_offset``, ``size_bytes`` (12 + batch_length), ``position`` (of the
    batch in the buffer), ``compression_id`` (attributes & 7), ``compression`` (its name, or
    ``"unknown"`` for ids 5-7), ``timestamp_type``, ``is_transactional``, ``is_control``,
    ``has_delete_horizon``, ``delete_horizon_ms`` and ``last_sequence``.

    ``Batch(buffer, position=0)`` reads the batch at ``position`` of ``buffer``; it raises
    CorruptRecordError (REASON_TRUNCATED) when the buffer ends before the batch does, and the
    reasons of :func:`iter_batches` otherwise; TypeError for a ``position`` that is not an
    int, ValueError for one outside the buffer. The batch holds a buffer export of ``buffer``.

    The record decoders (``records``, ``columns``, ``record_at``) check the CRC first by
    default (``check_crcs=True``), once per Batch object, and bound decompression by
    ``max_decompressed_bytes``; see the twin's docstrings.
    """

    cdef _Buffer _buffer
    cdef const unsigned char *_data          # start of this batch
    cdef readonly Py_ssize_t position
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp_ms
    cdef readonly int64_t max_timestamp_ms
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t record_count
    # CRC verdict, computed at most once per Batch by the decoders: 0 not computed yet,
    # 1 valid, -1 mismatch (see _check_crc).
    cdef int8_t _crc_state

    def __init__(self, buffer, position=0):
        cdef _Buffer owner = _acquire(buffer)
        cdef Py_ssize_t at
        position = _int_argument("position", position)
        if not 0 <= position <= owner.size:
            raise ValueError(f"position {position} is outside the {owner.size}-byte buffer")
        at = position
        if _frame_at(owner, &at, -1) < 0:
            raise CorruptRecordError(
                f"the buffer ends before the batch at position {position} does",
                reason=REASON_TRUNCATED, position=position,
            )
        self._fill(owner, position)

    cdef void _fill(self, _Buffer owner, Py_ssize_t position) noexcept:
        # The caller checked that the whole (>= 61-byte) batch lies inside the buffer.
        cdef const unsigned char *p = owner.data + position
        self._buffer = owner
        self._data = p
        self.position = position
        self.base_offset = <int64_t>load_u64(p + BASE_OFFSET_POSITION)
        self.batch_length = <int32_t>load_u32(p + BATCH_LENGTH_POSITION)
        self.partition_leader_epoch = <int32_t>load_u32(p + PARTITION_LEADER_EPOCH_POSITION)
        self.magic = <int8_t>p[MAGIC_POSITION]
        self.crc = load_u32(p + CRC_POSITION)
        self.attributes = <int16_t>load_u16(p + ATTRIBUTES_POSITION)
        self.last_offset_delta = <int32_t>load_u32(p + LAST_OFFSET_DELTA_POSITION)
        self.base_timestamp_ms = <int64_t>load_u64(p + BASE_TIMESTAMP_POSITION)
        self.max_timestamp_ms = <int64_t>load_u64(p + MAX_TIMESTAMP_POSITION)
        self.producer_id = <int64_t>load_u64(p + PRODUCER_ID_POSITION)
        self.producer_epoch = <int16_t>load_u16(p + PRODUCER_EPOCH_POSITION)
        self.base_sequence = <int32_t>load_u32(p + BASE_SEQUENCE_POSITION)
        self.record_count = <int32_t>load_u32(p + RECORDS_COUNT_POSITION)
        self._crc_state = 0

    # --- derived fields ------------------------------------------------------------------------

    @property
    def size_bytes(self):
        """Bytes of the whole batch: 12 + batch_length."""
        return LOG_OVERHEAD + <int64_t>self.batch_length

    @property
    def last_offset(self):
        """Offset of the batch's last record (base_offset + last_offset_delta)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        """last_offset + 1: the offset the next batch starts at."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_id(self):
        """The codec id in attribute bits 0-2 (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression(self):
        """The codec name, or ``"unknown"`` for ids 5-7 (decoding those raises)."""
        return COMPRESSION_NAMES.get(self.attributes & COMPRESSION_CODEC_MASK, "unknown")

    @property
    def timestamp_type(self):
        """0 CreateTime, 1 LogAppendTime (attribute bit 3)."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self):
        """Attribute bit 4."""
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self):
        """Attribute bit 5: the batch holds a control record (commit/abort marker)."""
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self):
        """Attribute bit 6: base_timestamp_ms holds the compaction delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self):
        """The delete horizon (base_timestamp_ms) when has_delete_horizon, else -1."""
        return self.base_timestamp_ms if self.attributes & DELETE_HORIZON_FLAG_MASK else -1

    @property
    def last_sequence(self):
        """Sequence of the last record, wrapping past INT32_MAX to 0 as Kafka's
        ``incrementSequence`` does; -1 when base_sequence is -1."""
        cdef int64_t base = self.base_sequence, increment = self.last_offset_delta
        if base == -1:
            return -1
        if base > INT32_MAX_ - increment:
            return increment - (INT32_MAX_ - base) - 1
        return base + increment

    def __repr__(self):
        return (
            f"<Batch offsets {self.base_offset}..{self.last_offset} at position {self.position}: "
            f"{self.record_count} records, {self.size_bytes} bytes, {self.compression}"
            f"{', control' if self.is_control else ''}"
            f"{', transactional' if self.is_transactional else ''}>"
        )

    # --- checks --------------------------------------------------------------------------------

    cdef uint32_t _computed_crc(self):
        cdef const unsigned char *start = self._data + ATTRIBUTES_POSITION
        cdef size_t n = <size_t>(LOG_OVERHEAD + <Py_ssize_t>self.batch_length - ATTRIBUTES_POSITION)
        cdef uint32_t crc
        if n < NOGIL_BYTES_MIN:
            return seglog_crc32c(0, start, n)
        with nogil:
            crc = seglog_crc32c(0, start, n)
        return crc

    def is_valid(self):
        """True if the stored CRC32C equals the CRC of bytes 21..end of the batch.

        Always computes the CRC and remembers the verdict for the decoders' check."""
        cdef bint valid = self.crc == self._computed_crc()
        self._crc_state = 1 if valid else -1
        return valid

    def ensure_valid(self):
        """Raise CorruptRecordError (reason REASON_CRC_MISMATCH, position of the batch) unless
        :meth:`is_valid`."""
        if not self.is_valid():
            raise self._crc_error()

    cdef object _crc_error(self):
        return CorruptRecordError(
            f"batch at position {self.position} is corrupt: stored crc {self.crc:#010x}, "
            f"computed {self._computed_crc():#010x}",
            reason=REASON_CRC_MISMATCH, position=self.position,
        )

    cdef int _check_crc(self) except -1:
        """The decoders' CRC check (Kafka's consumer ``check.crcs``), computed once per Batch:
        repeated record_at calls on one batch hash it once."""
        if self._crc_state == 0:
            self._crc_state = 1 if self._computed_crc() == self.crc else -1
        if self._crc_state < 0:
            raise self._crc_error()
        return 0

    # --- decoding ------------------------------------------------------------------------------

    cdef object _area(self, const unsigned char **data, Py_ssize_t *start, Py_ssize_t *end,
                      Py_ssize_t decompressed_limit):
        """Locate the record area to parse: returns the object that owns it (None when it is
        the iterated buffer, else the decompressed bytes, at most ``decompressed_limit``) and
        sets data/start/end. Raises as the twin's ``_decode`` before parsing (the CRC is the
        caller's)."""
        cdef int cid
        if self.record_count < 0:
            raise InvalidRecordError(
                f"Found invalid record count {self.record_count} in magic v2 batch"
            )
        cid = self.attributes & COMPRESSION_CODEC_MASK
        if self.record_count == 0 or cid == COMPRESSION_NONE:
            data[0] = self._buffer.data
            start[0] = self.position + RECORD_BATCH_OVERHEAD
            end[0] = self.position + LOG_OVERHEAD + <Py_ssize_t>self.batch_length
            return None
        decompressed = _decompress_area(self._data, LOG_OVERHEAD + <Py_ssize_t>self.batch_length,
                                        cid, self.position, decompressed_limit)
        data[0] = <const unsigned char *>PyBytes_AS_STRING(decompressed)
        start[0] = 0
        end[0] = PyBytes_GET_SIZE(decompressed)
        return decompressed

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def records(self, *, check_crcs=True, max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """Decode every record (decompressing if needed) into :class:`Record` objects.

        ``check_crcs`` (default True, Kafka's consumer ``check.crcs``): first check the
        batch's CRC32C, once per Batch object, and raise CorruptRecordError
        (REASON_CRC_MISMATCH) on a mismatch; False skips it. ``max_decompressed_bytes``
        (default 64 MiB): a compressed record area that decompresses to more is
        CorruptRecordError (REASON_DECOMPRESSED_TOO_LARGE) after bounded memory.

        For LogAppendTime batches every record's timestamp is ``max_timestamp_ms``. A batch with
        record_count 0 has no records. Raises InvalidRecordError for malformed records (Kafka's
        checks, including more or fewer records than record_count), CorruptRecordError
        (REASON_BAD_COMPRESSION) for a stream the codec cannot decompress,
        UnsupportedCompressionError for codec ids 5-7 or a missing codec package;
        TypeError/ValueError for a bad ``max_decompressed_bytes``. As the twin.
        """
        cdef const unsigned char *data
        cdef Py_ssize_t position, end, capacity, i, count
        cdef ParsedRecord parsed
        cdef ParseFailure failure
        cdef Record record
        cdef bint log_append_time = (self.attributes & TIMESTAMP_TYPE_MASK) != 0
        cdef uint64_t base_offset = <uint64_t>self.base_offset
        cdef uint64_t base_timestamp = <uint64_t>self.base_timestamp_ms
        cdef tuple empty = ()
        cdef Py_ssize_t decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        memset(&parsed, 0, sizeof(parsed))  # written by _parse_record; silences -Wmaybe-uninitialized
        if check_crcs:
            self._check_crc()
        owner = self._area(&data, &position, &end, decompressed_limit)
        count = self.record_count
        if count == 0:
            return []
        # Every record that parses takes >= 7 bytes, so this bounds a hostile record_count.
        capacity = (end - position) // RECORD_BYTES_MIN + 1
        if capacity > count:
            capacity = count
        result = PyList_New(capacity)
        for i in range(count):
            position = _parse_record(data, position, end, &parsed, &failure)
            if position < 0:
                _raise_parse_failure(&failure)
            if i >= capacity:  # cannot happen: see capacity
                raise AssertionError("record count bound broken")
            record = Record.__new__(Record)
            record.offset = <int64_t>(base_offset + <uint64_t><int64_t>parsed.offset_delta)
            if log_append_time:
                record.timestamp_ms = self.max_timestamp_ms
            else:
                record.timestamp_ms = <int64_t>(base_timestamp + <uint64_t>parsed.timestamp_delta)
            if parsed.key_length >= 0:
                record.key = PyBytes_FromStringAndSize(
                    <const char *>data + parsed.key_position, parsed.key_length)
            else:
                record.key = None
            if parsed.value_length >= 0:
                record.value = PyBytes_FromStringAndSize(
                    <const char *>data + parsed.value_position, parsed.value_length)
            else:
                record.value = None
            if parsed.header_count:
                record.headers = _decode_headers(data, parsed.headers_position,
                                                 parsed.header_count)
            else:
                record.headers = empty
            Py_INCREF(record)
            PyList_SET_ITEM(result, i, record)
        if position != end:
            raise InvalidRecordError(_RECORDS_REMAINING)
        return result

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def consumer_records(self, record_type, topic, partition, min_offset=0, *,
                         check_crcs=True,
                         max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """The consumer's records of this batch: for each record at or after ``min_offset``,
        ``record_type(topic, partition, offset, timestamp_ms, key, value, headers)``, where
        ``record_type`` is a record type with 7 ``_fields`` (ConsumerRecord, either twin's;
        TypeError otherwise). This module's :class:`ConsumerRecord` is built in C straight
        from the parse (no constructor call, no intermediate :class:`Record`); another type
        is called.

        Every record is parsed and checked as by :meth:`records` (same ``check_crcs``,
        ``max_decompressed_bytes`` and errors, also for records before ``min_offset``); only
        the objects made differ. As the twin.
        """
        cdef const unsigned char *data
        cdef Py_ssize_t position, end, i, count
        cdef ParsedRecord parsed
        cdef ParseFailure failure
        cdef int64_t offset, timestamp_ms
        cdef int64_t first_offset
        cdef bint log_append_time = (self.attributes & TIMESTAMP_TYPE_MASK) != 0
        cdef uint64_t base_offset = <uint64_t>self.base_offset
        cdef uint64_t base_timestamp = <uint64_t>self.base_timestamp_ms
        cdef tuple empty = ()
        cdef Py_ssize_t decompressed_limit
        cdef bint native = record_type is ConsumerRecord
        cdef int32_t partition_c = 0
        cdef ConsumerRecord item
        cdef list result
        if not native and not (isinstance(record_type, type)
                               and len(getattr(record_type, "_fields", ())) == 7):
            raise TypeError("record_type must be a record type with 7 _fields "
                            "(ConsumerRecord)")
        first_offset = min_offset
        if native:
            partition_c = operator.index(partition)  # the C field, once per batch
        decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        memset(&parsed, 0, sizeof(parsed))  # written by _parse_record
        if check_crcs:
            self._check_crc()
        owner = self._area(&data, &position, &end, decompressed_limit)
        count = self.record_count
        result = []
        if count == 0:
            return result
        for i in range(count):
            position = _parse_record(data, position, end, &parsed, &failure)
            if position < 0:
                _raise_parse_failure(&failure)
            offset = <int64_t>(base_offset + <uint64_t><int64_t>parsed.offset_delta)
            if offset < first_offset:
                continue
            if log_append_time:
                timestamp_ms = self.max_timestamp_ms
            else:
                timestamp_ms = <int64_t>(base_timestamp + <uint64_t>parsed.timestamp_delta)
            if parsed.key_length >= 0:
                key = PyBytes_FromStringAndSize(<const char *>data + parsed.key_position,
                                                parsed.key_length)
            else:
                key = None
            if parsed.value_length >= 0:
                value = PyBytes_FromStringAndSize(<const char *>data + parsed.value_position,
                                                  parsed.value_length)
            else:
                value = None
            if parsed.header_count:
                headers = _decode_headers(data, parsed.headers_position, parsed.header_count)
            else:
                headers = empty
            if native:
                # Freelisted, no GC header, the ints as C fields: no int object per record
                # and nothing for the young-generation collections to walk (ConsumerRecord).
                item = ConsumerRecord.__new__(ConsumerRecord)
                item.topic = topic
                item.partition = partition_c
                item.offset = offset
                item.timestamp_ms = timestamp_ms
                item.key = key
                item.value = value
                item.headers = headers
                result.append(item)
            else:
                result.append(record_type(topic, partition, offset, timestamp_ms, key, value,
                                          headers))
        if position != end:
            raise InvalidRecordError(_RECORDS_REMAINING)
        return result

    def record_at(self, offset, *, check_crcs=True,
                  max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """The record with ``offset``, or None when no record has it (outside
        ``[base_offset, last_offset]``, a gap left by compaction, or record_count 0).

        ``offset`` must be an int (TypeError otherwise); any int is accepted. ``check_crcs``
        and ``max_decompressed_bytes`` as for :meth:`records`; the CRC is checked first, once
        per Batch object, so point reads of several offsets of one batch hash it once.

        Records before it are skipped by their framing (length, attributes, timestamp and
        offset deltas are read and checked; keys, values and headers are not); the record
        itself is parsed with every check of :meth:`records`. A compressed batch is
        decompressed first. A control batch's record is returned like any other. Raises as
        :meth:`records` for malformed framing up to and including that record.
        """
        cdef const unsigned char *data
        cdef Py_ssize_t start, end, decompressed_limit
        offset = _int_argument("offset", offset)
        decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        if check_crcs:
            self._check_crc()
        # Compared as Python ints: ``offset`` may be any int (2**70 is simply not here).
        if offset < self.base_offset or offset > self.last_offset:
            return None
        owner = self._area(&data, &start, &end, decompressed_limit)  # keeps it alive
        if self.record_count == 0:
            return None
        return _record_in_area(data, start, end, self.record_count, self.base_offset,
                               self.base_timestamp_ms, self.max_timestamp_ms,
                               (self.attributes & TIMESTAMP_TYPE_MASK) != 0, offset)

    def columns(self, *, check_crcs=True, max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """This batch's records as :class:`Columns`. ``data`` is a read-only view of the whole
        iterated buffer when nothing was decompressed (positions are absolute in it), else the
        decompressed record area. A control batch's record is included. ``check_crcs`` and
        ``max_decompressed_bytes`` as for :meth:`records`; raises as :meth:`records`."""
        cdef Py_ssize_t hint = self.record_count if self.record_count > 0 else 0
        cdef Py_ssize_t decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        cdef _ColumnsBuilder builder
        if check_crcs:
            self._check_crc()
        # A hostile record_count must not size the columns: each record takes >= 7 bytes
        # (compressed areas: unknown until decompressed; the builder grows).
        if hint > 65536 and hint > self.batch_length // RECORD_BYTES_MIN + 1:
            hint = 65536 if self.attributes & COMPRESSION_CODEC_MASK else \
                self.batch_length // RECORD_BYTES_MIN + 1
        builder = _ColumnsBuilder(hint)
        builder.add_batch(self, decompressed_limit)
        return builder.finish(self._buffer, -1)

    def record_summary(self, *, check_crcs=True,
                       max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
        """What validating a producer's batch needs of its records, without building
        :class:`Columns` (no numpy: the wire broker's produce path calls this):
        ``(record_count, offsets_in_order, min_timestamp_ms, max_timestamp_ms,
        first_keyless)`` = the number of records parsed; whether their offsets are
        ``base_offset + 0..record_count-1``; the lowest and highest record timestamp (-1, -1
        without records); the index of the first record whose key is null, -1 for none.
        ``check_crcs`` and ``max_decompressed_bytes`` as for :meth:`records`; raises as
        :meth:`records`."""
        cdef Py_ssize_t decompressed_limit = _decompressed_limit(max_decompressed_bytes)
        cdef Py_ssize_t n, first_keyless = -1
        cdef bint in_order = True
        cdef int64_t lowest = -1, highest = -1
        if check_crcs:
            self._check_crc()
        n = self._summary(decompressed_limit, &in_order, &lowest, &highest, &first_keyless)
        return n, in_order, lowest, highest, first_keyless

    cdef Py_ssize_t _summary(self, Py_ssize_t decompressed_limit, bint *in_order,
                             int64_t *lowest, int64_t *highest,
                             Py_ssize_t *first_keyless) except -1:
        """:meth:`record_summary` without the CRC check: the records parsed, the rest through
        the pointers (set by the caller to True, -1, -1, -1)."""
        cdef Py_ssize_t hint = self.record_count if self.record_count > 0 else 0
        cdef _ColumnsBuilder builder
        cdef Py_ssize_t i, n
        cdef int64_t timestamp
        if hint > 65536 and hint > self.batch_length // RECORD_BYTES_MIN + 1:
            hint = 65536 if self.attributes & COMPRESSION_CODEC_MASK else \
                self.batch_length // RECORD_BYTES_MIN + 1
        builder = _ColumnsBuilder(hint, True)
        builder.add_batch(self, decompressed_limit)
        n = builder.count
        if n:
            lowest[0] = highest[0] = builder.timestamps[0]
        for i in range(n):
            if builder.offsets[i] != self.base_offset + i:
                in_order[0] = False
            timestamp = builder.timestamps[i]
            if timestamp < lowest[0]:
                lowest[0] = timestamp
            elif timestamp > highest[0]:
                highest[0] = timestamp
            if first_keyless[0] < 0 and builder.key_lengths[i] < 0:
                first_keyless[0] = i
        return n

    def control_type(self, *, check_crcs=True):
        """For a control batch, the type in its record key (0 ABORT, 1 COMMIT, ...; the stored
        int16, unknown types included). Raises InvalidRecordError when the batch is not a
        control batch, has no record, or its key is null, shorter than 4 bytes or has a
        negative version; as :meth:`records` (``check_crcs`` included) for the record."""
        if not self.attributes & CONTROL_FLAG_MASK:
            raise InvalidRecordError(f"batch at position {self.position} is not a control batch")
        records = self.records(check_crcs=check_crcs)
        if not records:
            raise InvalidRecordError(f"control batch at position {self.position} has no record")
        key = records[0].key
        if key is None or len(key) < CONTROL_KEY.size:
            raise InvalidRecordError(
                f"control record key must be at least {CONTROL_KEY.size} bytes, got "
                f"{'null' if key is None else len(key)}"
            )
        version, control_type = CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise InvalidRecordError(f"Invalid version found for control record: {version}")
        return control_type
