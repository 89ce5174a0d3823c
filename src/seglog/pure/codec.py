"""The RecordBatch v2 codec in plain Python: the readable reference for ``src/_native/codec.pyx``.

A batch is a 61-byte header (:data:`seglog.format.BATCH_HEADER`) followed by its *record area*:
the records back to back (``docs/format.md``; Kafka's ``DefaultRecordBatch`` and
``DefaultRecord``), or one compressed stream of them. Encoding builds the record area in one
bytearray, compresses it once, fills in the header and the CRC-32C over bytes 21..end.
Decoding walks the header fields of each batch without touching the records
(:func:`iter_batches`), and decodes records only when asked, into ``Record`` objects
(:meth:`Batch.records`) or into numpy columns with no per-record objects (:meth:`Batch.columns`,
:func:`decode_columns`).

The native twin writes byte-identical batches and raises the same exception types for the same
bytes; the choices that make that possible are written down where they are made, in
:func:`encode_batch`, :func:`iter_batches` and :func:`decode_columns`.

Every byte decoded is untrusted (it comes from disk or a client): the record decoders check the
batch's CRC32C first unless told not to (``check_crcs=True``, Kafka's consumer ``check.crcs``;
once per Batch object), a compressed record area may not decompress to more than
``max_decompressed_bytes`` (64 MiB by default; no codec allocates what a header declares), a
header whose last offset overflows an int64 is corrupt, and ``check_offsets=True`` makes the
batch walk require increasing base offsets (they lie outside the CRC). Whole-batch readers
(:func:`iter_batches`, header fields) do not hash: they serve bytes as Kafka's broker does.
Numeric arguments are ints (``operator.index``) or a TypeError/ValueError/typed error, the same
in both twins.

Thread-safety: the functions keep no state. A ``Batch`` holds a memoryview of the buffer it was
read from; while it lives, a bytearray cannot be resized and an mmap cannot be closed.
"""

from __future__ import annotations

import operator
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from .. import compression as _compression
from ..compression import DECOMPRESSED_BYTES_MAX_DEFAULT, check_max_decompressed_bytes
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    SeglogError,
    UnsupportedCompressionError,
)
from ..format import (
    ATTRIBUTES_POSITION,
    BATCH_HEADER,
    BATCH_LENGTH_POSITION,
    COMPRESSION_CODEC_MASK,
    COMPRESSION_NAMES,
    COMPRESSION_NONE,
    CONTROL_FLAG_MASK,
    CONTROL_KEY,
    CONTROL_RECORD_VERSION,
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    CRC_POSITION,
    DELETE_HORIZON_FLAG_MASK,
    END_TXN_MARKER_VALUE,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32_MAX,
    INT64_MAX,
    LAST_OFFSET_DELTA_POSITION,
    LOG_OVERHEAD,
    MAGIC_POSITION,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    REASON_BAD_LAST_OFFSET_DELTA,
    REASON_BAD_MAGIC,
    REASON_BATCH_TOO_LARGE,
    REASON_BATCH_TOO_SMALL,
    REASON_CRC_MISMATCH,
    REASON_OFFSETS_NOT_INCREASING,
    REASON_TRUNCATED,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_CREATE_TIME,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from .crc32c import crc32c
from .varint import (
    read_varint,
    read_varlong,
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN = -(2**31)
INT64_MIN = -(2**63)
_MASK64 = 2**64 - 1
_CRC = struct.Struct(">I")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
#: batchLength of a batch that holds only its header (61 - 12).
BATCH_LENGTH_MIN_V2 = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49
#: The uncompressed record area must fit a batch whose batchLength is an int32.
RECORD_AREA_BYTES_MAX = INT32_MAX - BATCH_LENGTH_MIN_V2
#: Smallest record: length, attributes, timestamp delta, offset delta, key length, value
#: length and header count, one byte each.
RECORD_BYTES_MIN = 7

# Kafka's exact messages, so a log line reads the same as the broker's.
_PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"
_RECORDS_REMAINING = "Incorrect declared batch size, records still remaining in file"


def _wrap_int64(value: int) -> int:
    # Kafka adds deltas to bases in Java longs, which wrap; the native twin does the same in
    # C with unsigned arithmetic. Only reachable with hostile bytes.
    if INT64_MIN <= value <= INT64_MAX:
        return value
    return ((value - INT64_MIN) & _MASK64) + INT64_MIN


def _byte_view(buffer) -> memoryview:
    """A 1-D unsigned-byte memoryview of any C-contiguous bytes-like ``buffer``."""
    view = memoryview(buffer)
    if not view.c_contiguous:
        raise TypeError("seglog needs a C-contiguous buffer")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


# --- Arguments ---------------------------------------------------------------------------------
# One rule for every count, size and position argument of the decoders, shared with the native
# twin (which must not let an OverflowError out of a C conversion): it is an int
# (operator.index, so numpy ints count and 1.5 or "3" do not: TypeError), it is not negative
# (ValueError), and an int too large for a C size means "no limit" (clamped).


def _int_argument(name: str, value) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


def _size_argument(name: str, value, *, allow_none: bool) -> int | None:
    """``value`` as an int in [0, sys.maxsize] (None stays None when allowed)."""
    if value is None and allow_none:
        return None
    value = _int_argument(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0{' or None' if allow_none else ''}, got {value}")
    return min(value, sys.maxsize)


# --- Records -----------------------------------------------------------------------------------


class Record:
    """One decoded record: ``offset``, ``timestamp_ms``, ``key``, ``value``, ``headers``.

    ``key``/``value`` are ``bytes`` or None (a null value is a tombstone); ``headers`` is a
    tuple of ``(str, bytes | None)`` pairs, ``()`` when there are none. ``tuple(record)`` is
    ``(offset, timestamp_ms, key, value, headers)``, the order of the constructor's arguments.
    Equality compares those five fields with any object that has them (so a native record
    equals a pure one); records are hashable.
    """

    __slots__ = ("offset", "timestamp_ms", "key", "value", "headers")

    def __init__(self, offset: int, timestamp_ms: int, key, value, headers: tuple = ()):
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.key = key
        self.value = value
        self.headers = headers

    def __iter__(self):
        return iter((self.offset, self.timestamp_ms, self.key, self.value, self.headers))

    def __eq__(self, other: object) -> Any:
        candidate: Any = other  # any object with the five fields compares
        try:
            other_fields = (
                candidate.offset, candidate.timestamp_ms, candidate.key, candidate.value,
                candidate.headers
            )
        except AttributeError:
            return NotImplemented
        return tuple(self) == other_fields

    def __hash__(self):
        return hash(tuple(self))

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp_ms={self.timestamp_ms}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


#: ConsumerRecord's field names, in the order of its constructor, tuple() and indexing.
_CONSUMER_RECORD_FIELDS = ("topic", "partition", "offset", "timestamp_ms", "key", "value",
                           "headers")


def _is_consumer_record_like(other: object) -> bool:
    # What a ConsumerRecord compares with: a tuple (the NamedTuple it was equalled, hashed
    # and ordered as), or a record type with its fields (the native twin's ConsumerRecord).
    return isinstance(other, tuple) or \
        getattr(type(other), "_fields", None) == _CONSUMER_RECORD_FIELDS


class ConsumerRecord:
    """One record as a consumer sees it: where it is (``topic``, ``partition``, ``offset``)
    and what it holds (``timestamp_ms``, ``key``, ``value``, ``headers``).

    ``key``/``value`` are ``bytes`` or None; ``headers`` a tuple of ``(str, bytes | None)``
    pairs, ``()`` when there are none. The fields are read-only. It behaves as the 7-field
    NamedTuple it used to be: ``tuple(record)``, unpacking, ``record[i]`` (slices too) and
    ``len`` give the fields in that order; ``_fields``, ``_asdict()``, ``_replace(**fields)``
    and ``_make(iterable)`` are there; it equals, hashes and orders as the tuple of its
    fields (so it equals that tuple and the native twin's ConsumerRecord), its ``repr`` is
    the NamedTuple's, and it pickles. It is **not a tuple subclass** (since issue 27):
    ``isinstance(record, tuple)`` is False and ``record + (x,)`` is not defined
    (``(*record, x)`` is). The native twin is the same without a cyclic-GC header
    (``seglog._native.codec``: why).
    """

    __slots__ = _CONSUMER_RECORD_FIELDS
    _fields = _CONSUMER_RECORD_FIELDS
    __match_args__ = _CONSUMER_RECORD_FIELDS
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple

    def __init__(self, topic: str, partition: int, offset: int, timestamp_ms: int,
                 key: bytes | None, value: bytes | None, headers: tuple) -> None:
        # As the native twin's C fields: the ints are ints (TypeError otherwise).
        partition, offset, timestamp_ms = (int(operator.index(partition)),
                                           int(operator.index(offset)),
                                           int(operator.index(timestamp_ms)))
        if not -(1 << 31) <= partition < (1 << 31):
            raise OverflowError("partition does not fit an int32")
        for number in (offset, timestamp_ms):
            if not -(1 << 63) <= number < (1 << 63):
                raise OverflowError("offset and timestamp_ms must fit an int64")
        for name, value_ in zip(_CONSUMER_RECORD_FIELDS,
                                (topic, partition, offset, timestamp_ms, key, value, headers)):
            object.__setattr__(self, name, value_)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ConsumerRecord's {name!r} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ConsumerRecord's {name!r} is read-only")

    def _as_tuple(self) -> tuple:
        return (self.topic, self.partition, self.offset, self.timestamp_ms, self.key,
                self.value, self.headers)

    @classmethod
    def _make(cls, iterable: Any) -> ConsumerRecord:
        """A ConsumerRecord of the 7 items of ``iterable`` (NamedTuple's ``_make``)."""
        fields = tuple(iterable)
        if len(fields) != 7:
            raise TypeError(f"Expected 7 arguments, got {len(fields)}")
        return cls(*fields)

    def _asdict(self) -> dict:
        """The fields as a dict, by name (NamedTuple's ``_asdict``)."""
        return dict(zip(_CONSUMER_RECORD_FIELDS, self._as_tuple()))

    def _replace(self, **changes: Any) -> ConsumerRecord:
        """A new ConsumerRecord with ``changes`` (by field name) applied (NamedTuple's
        ``_replace``: ValueError for a name that is not a field)."""
        fields = self._asdict()
        for name, value in changes.items():
            if name not in fields:
                raise ValueError(f"Got unexpected field names: {list(changes)!r}")
            fields[name] = value
        return ConsumerRecord(**fields)

    def __len__(self) -> int:
        return 7

    def __iter__(self) -> Iterator[Any]:
        return iter(self._as_tuple())

    def __getitem__(self, index: Any) -> Any:
        return self._as_tuple()[index]

    def _compared(self, other: object) -> tuple | None:
        candidate: Any = other  # iterable when it is consumer-record-like
        return tuple(candidate) if _is_consumer_record_like(other) else None

    def __eq__(self, other: object) -> Any:
        theirs = self._compared(other)
        return NotImplemented if theirs is None else self._as_tuple() == theirs

    def __ne__(self, other: object) -> Any:
        theirs = self._compared(other)
        return NotImplemented if theirs is None else self._as_tuple() != theirs

    def __lt__(self, other: object) -> Any:
        theirs = self._compared(other)
        return NotImplemented if theirs is None else self._as_tuple() < theirs

    def __le__(self, other: object) -> Any:
        theirs = self._compared(other)
        return NotImplemented if theirs is None else self._as_tuple() <= theirs

    def __gt__(self, other: object) -> Any:
        theirs = self._compared(other)
        return NotImplemented if theirs is None else self._as_tuple() > theirs

    def __ge__(self, other: object) -> Any:
        theirs = self._compared(other)
        return NotImplemented if theirs is None else self._as_tuple() >= theirs

    def __hash__(self) -> int:
        return hash(self._as_tuple())

    def __reduce__(self) -> Any:
        return (ConsumerRecord, self._as_tuple())

    def __repr__(self) -> str:
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition!r}, "
            f"offset={self.offset!r}, timestamp_ms={self.timestamp_ms!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


def _parse_records(data, position: int, end: int, record_count: int) -> list[tuple]:
    """Parse ``record_count`` records from ``data[position:end]`` with Kafka's checks.

    Returns one tuple per record: ``(offset_delta, timestamp_delta, key_position, key_length,
    value_position, value_length, headers)``; a null key or value has position and length -1.
    Raises InvalidRecordError for every rule ``DefaultRecord.readFrom`` and the batch iterator
    enforce. Unlike Kafka, the fields of a record are read within its declared body size, so
    a record that overruns its size fails as an underflow rather than a size mismatch; the
    exception type is the same.
    """
    parsed = []
    # Bounded: each turn consumes at least one byte or raises, so the loop ends within
    # end - position turns even when record_count is a hostile 2**31 - 1.
    for _ in range(record_count):
        record, position = _parse_record(data, position, end)
        parsed.append(record)
    if position != end:
        raise InvalidRecordError(_RECORDS_REMAINING)
    return parsed


def _parse_record(data, position: int, end: int) -> tuple[tuple, int]:
    """Parse the record at ``data[position:end]``: ``(record tuple, position after it)`` (the
    tuple as in :func:`_parse_records`)."""
    if position >= end:
        raise InvalidRecordError(_PREMATURE_EOF)
    body_size, position = read_varint(data, position, end)
    if body_size < 0 or body_size > end - position:
        raise InvalidRecordError(
            f"Invalid record size: expected {body_size} bytes in record payload, but "
            f"instead the buffer has only {end - position} remaining bytes."
        )
    body_start, body_end = position, position + body_size
    if body_size < 1:
        raise InvalidRecordError("Found invalid record structure: no attributes byte")
    position += 1  # the record attributes byte: unused, and ignored as Kafka does
    timestamp_delta, position = read_varlong(data, position, body_end)
    offset_delta, position = read_varint(data, position, body_end)

    # Kafka treats any negative length as null, not only -1.
    key_length, position = read_varint(data, position, body_end)
    if key_length >= 0:
        key_position = position
        position += key_length
        if position > body_end:
            raise InvalidRecordError("Found invalid record structure: key runs past the record")
    else:
        key_position = key_length = -1
    value_length, position = read_varint(data, position, body_end)
    if value_length >= 0:
        value_position = position
        position += value_length
        if position > body_end:
            raise InvalidRecordError(
                "Found invalid record structure: value runs past the record"
            )
    else:
        value_position = value_length = -1

    header_count, position = read_varint(data, position, body_end)
    if header_count < 0:
        raise InvalidRecordError(f"Found invalid number of record headers {header_count}")
    if header_count > body_end - position:
        raise InvalidRecordError(
            f"Found invalid number of record headers. {header_count} is larger than the "
            "remaining size of the buffer"
        )
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if header_count:
        header_list = []
        for _ in range(header_count):
            header_key_length, position = read_varint(data, position, body_end)
            if header_key_length < 0:
                raise InvalidRecordError(
                    f"Invalid negative header key size {header_key_length}"
                )
            if position + header_key_length > body_end:
                raise InvalidRecordError(
                    "Found invalid record structure: header key runs past the record"
                )
            # Java's new String(bytes, UTF_8) replaces malformed input; so do we.
            header_key = str(data[position : position + header_key_length], "utf-8", "replace")
            position += header_key_length
            header_value_length, position = read_varint(data, position, body_end)
            if header_value_length >= 0:
                if position + header_value_length > body_end:
                    raise InvalidRecordError(
                        "Found invalid record structure: header value runs past the record"
                    )
                header_value = bytes(data[position : position + header_value_length])
                position += header_value_length
            else:
                header_value = None
            header_list.append((header_key, header_value))
        headers = tuple(header_list)

    if position != body_end:
        raise InvalidRecordError(
            f"Invalid record size: expected to read {body_size} bytes in record payload, "
            f"but instead read {position - body_start}"
        )
    return (
        (offset_delta, timestamp_delta, key_position, key_length, value_position, value_length,
         headers),
        position,
    )


def _find_record(data, position: int, end: int, record_count: int,
                 target_delta: int) -> int | None:
    """Position of the record whose offset delta is ``target_delta`` among the first
    ``record_count`` records of ``data[position:end]``, or None when a record with a larger
    delta comes first or the records run out without it (a gap left by compaction).

    Records before it are skipped by their length prefix: only a skipped record's length,
    attributes byte, timestamp delta and offset delta are read (with :func:`_parse_record`'s
    checks and errors for those fields), never its key, value or headers.
    """
    for _ in range(record_count):
        if position >= end:
            raise InvalidRecordError(_PREMATURE_EOF)
        body_size, body_start = read_varint(data, position, end)
        if body_size < 0 or body_size > end - body_start:
            raise InvalidRecordError(
                f"Invalid record size: expected {body_size} bytes in record payload, but "
                f"instead the buffer has only {end - body_start} remaining bytes."
            )
        if body_size < 1:
            raise InvalidRecordError("Found invalid record structure: no attributes byte")
        body_end = body_start + body_size
        _, field = read_varlong(data, body_start + 1, body_end)
        offset_delta, _ = read_varint(data, field, body_end)
        if offset_delta == target_delta:
            return position
        if offset_delta > target_delta:
            return None
        position = body_end
    return None


# --- Columns -----------------------------------------------------------------------------------


class Columns:
    """Records of one or more batches as numpy columns, with no per-record Python objects.

    ``offsets``, ``timestamps_ms``, ``key_positions`` and ``value_positions`` are int64 arrays;
    ``key_lengths`` and ``value_lengths`` int32 arrays. A null key or value has length -1 and
    position -1. ``data`` is the read-only bytes-like object the positions index (see
    :func:`decode_columns` for which buffer that is). ``len(columns)`` is the record count;
    ``key(i)``/``value(i)`` give one record's key/value as ``bytes`` or None (IndexError out
    of range; negative ``i`` counts from the end).
    """

    __slots__ = (
        "offsets", "timestamps_ms", "key_positions", "key_lengths", "value_positions",
        "value_lengths", "data",
    )

    def __init__(self, *, offsets, timestamps_ms, key_positions, key_lengths, value_positions,
                 value_lengths, data):
        self.offsets = offsets
        self.timestamps_ms = timestamps_ms
        self.key_positions = key_positions
        self.key_lengths = key_lengths
        self.value_positions = value_positions
        self.value_lengths = value_lengths
        self.data = data

    def __len__(self) -> int:
        return len(self.offsets)

    def _field(self, positions, lengths, index: int):
        length = int(lengths[index])
        if length < 0:
            return None
        position = int(positions[index])
        return bytes(self.data[position : position + length])

    def key(self, index: int):
        """The key of record ``index`` as bytes, or None when it is null."""
        return self._field(self.key_positions, self.key_lengths, index)

    def value(self, index: int):
        """The value of record ``index`` as bytes, or None when it is null."""
        return self._field(self.value_positions, self.value_lengths, index)

    def __repr__(self):
        if len(self):
            span = f"offsets {int(self.offsets[0])}..{int(self.offsets[-1])}"
        else:
            span = "empty"
        return f"<Columns {len(self)} records, {span}, {len(self.data)} data bytes>"


def _build_columns(chunks: list, whole_view: memoryview, max_records: int | None) -> Columns:
    """Assemble Columns from ``(batch, data, parsed, decompressed)`` chunks: ``data`` is the
    decompressed record area when ``decompressed``, else the buffer the batch was parsed in
    (with the same bytes as ``whole_view``)."""
    offsets, timestamps, key_positions, key_lengths = [], [], [], []
    value_positions, value_lengths = [], []
    any_decompressed = any(decompressed for _, _, _, decompressed in chunks)
    pieces, data_bytes = [], 0
    for batch, data, parsed, decompressed in chunks:
        if any_decompressed:
            # Positions move from the chunk's own buffer to the concatenation of the areas.
            if not decompressed:
                area_start = batch.position + RECORD_BATCH_OVERHEAD
                area_end = batch.position + batch.size_bytes
            else:
                area_start, area_end = 0, len(data)
            shift = data_bytes - area_start
            pieces.append(data[area_start:area_end])
            data_bytes += area_end - area_start
        else:
            shift = 0
        base_offset, base_timestamp = batch.base_offset, batch.base_timestamp_ms
        log_append_time = batch.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME
        for (offset_delta, timestamp_delta, key_position, key_length, value_position,
             value_length, _headers) in parsed:
            offsets.append(_wrap_int64(base_offset + offset_delta))
            if log_append_time:
                timestamps.append(batch.max_timestamp_ms)
            else:
                timestamps.append(_wrap_int64(base_timestamp + timestamp_delta))
            key_positions.append(key_position + shift if key_length >= 0 else -1)
            key_lengths.append(key_length)
            value_positions.append(value_position + shift if value_length >= 0 else -1)
            value_lengths.append(value_length)
    if max_records is not None:
        del offsets[max_records:], timestamps[max_records:], key_positions[max_records:]
        del key_lengths[max_records:], value_positions[max_records:], value_lengths[max_records:]
    data = b"".join(pieces) if any_decompressed else whole_view.toreadonly()
    return Columns(
        offsets=np.array(offsets, dtype=np.int64),
        timestamps_ms=np.array(timestamps, dtype=np.int64),
        key_positions=np.array(key_positions, dtype=np.int64),
        key_lengths=np.array(key_lengths, dtype=np.int32),
        value_positions=np.array(value_positions, dtype=np.int64),
        value_lengths=np.array(value_lengths, dtype=np.int32),
        data=data,
    )


# --- Batches -----------------------------------------------------------------------------------


class Batch:
    """One RecordBatch v2 header, decoded, over the buffer that holds the whole batch.

    Attributes are Kafka's header fields in snake case: ``base_offset``, ``batch_length``,
    ``partition_leader_epoch``, ``magic``, ``crc`` (as stored), ``attributes`` (the stored
    int16), ``last_offset_delta``, ``base_timestamp_ms``, ``max_timestamp_ms``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``record_count``; and derived:
    ``last_offset``, ``next_offset``, ``size_bytes`` (12 + batch_length), ``position`` (of the
    batch in the buffer), ``compression_id`` (attributes & 7), ``compression`` (its name, or
    ``"unknown"`` for ids 5-7), ``timestamp_type``, ``is_transactional``, ``is_control``,
    ``has_delete_horizon``, ``delete_horizon_ms`` (base timestamp when the flag is set, else
    -1) and ``last_sequence`` (Kafka's wrapping rule; -1 when base_sequence is -1).

    ``Batch(buffer, position=0)`` reads the batch at ``position`` of ``buffer`` with the
    checks of :func:`iter_batches`, except that a buffer ending before the batch does is a
    CorruptRecordError (REASON_TRUNCATED) here, not the end of iteration. Usually batches
    come from :func:`iter_batches`.
    The batch keeps a memoryview of ``buffer``.
    """

    __slots__ = (
        "_view", "position", "base_offset", "batch_length", "partition_leader_epoch", "magic",
        "crc", "attributes", "last_offset_delta", "base_timestamp_ms", "max_timestamp_ms",
        "producer_id", "producer_epoch", "base_sequence", "record_count", "_crc_state",
    )

    def __init__(self, buffer, position: int = 0):
        view = _byte_view(buffer)
        position = _int_argument("position", position)
        if not 0 <= position <= len(view):
            raise ValueError(f"position {position} is outside the {len(view)}-byte buffer")
        if _frame_at(view, position, None) is None:
            raise CorruptRecordError(
                f"the buffer ends before the batch at position {position} does",
                reason=REASON_TRUNCATED, position=position,
            )
        self._read_header(view, position)

    @classmethod
    def _checked(cls, view: memoryview, position: int) -> "Batch":
        # For iter_batches, which has already run _frame_at on this position.
        batch = cls.__new__(cls)
        batch._read_header(view, position)
        return batch

    def _read_header(self, view: memoryview, position: int) -> None:
        self._view = view
        self.position = position
        (
            self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
            self.crc, self.attributes, self.last_offset_delta, self.base_timestamp_ms,
            self.max_timestamp_ms, self.producer_id, self.producer_epoch, self.base_sequence,
            self.record_count,
        ) = BATCH_HEADER.unpack_from(view, position)
        # CRC verdict, computed at most once per Batch by the decoders: 0 not computed yet,
        # 1 valid, -1 mismatch (see _check_crc).
        self._crc_state = 0

    # Derived fields are properties: iterating a segment's headers should not pay for them.
    @property
    def size_bytes(self) -> int:
        """Bytes of the whole batch: 12 + batch_length."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record (base_offset + last_offset_delta)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """last_offset + 1: the offset the next batch starts at."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_id(self) -> int:
        """The codec id in attribute bits 0-2 (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression(self) -> str:
        """The codec name, or ``"unknown"`` for ids 5-7 (decoding those raises)."""
        return COMPRESSION_NAMES.get(self.attributes & COMPRESSION_CODEC_MASK, "unknown")

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (attribute bit 3)."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        """Attribute bit 4."""
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        """Attribute bit 5: the batch holds a control record (commit/abort marker)."""
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Attribute bit 6: base_timestamp_ms holds the compaction delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The delete horizon (base_timestamp_ms) when has_delete_horizon, else -1."""
        return self.base_timestamp_ms if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record: base_sequence + last_offset_delta, wrapping past
        INT32_MAX to 0 as Kafka's ``incrementSequence`` does; -1 when base_sequence is -1."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        increment = self.last_offset_delta
        if self.base_sequence > INT32_MAX - increment:
            return increment - (INT32_MAX - self.base_sequence) - 1
        return self.base_sequence + increment

    def __repr__(self):
        return (
            f"<Batch offsets {self.base_offset}..{self.last_offset} at position {self.position}: "
            f"{self.record_count} records, {self.size_bytes} bytes, {self.compression}"
            f"{', control' if self.is_control else ''}"
            f"{', transactional' if self.is_transactional else ''}>"
        )

    # --- checks and decoding -------------------------------------------------------------------

    def _computed_crc(self) -> int:
        start = self.position + ATTRIBUTES_POSITION
        end = self.position + LOG_OVERHEAD + self.batch_length
        return crc32c(self._view[start:end])

    def is_valid(self) -> bool:
        """True if the stored CRC32C equals the CRC of bytes 21..end of the batch.

        Always computes the CRC (the bytes may have changed since the last call) and
        remembers the verdict for the decoders' check (see :meth:`records`)."""
        valid = self.crc == self._computed_crc()
        self._crc_state = 1 if valid else -1
        return valid

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError (reason REASON_CRC_MISMATCH, position of the batch) unless
        :meth:`is_valid`."""
        if not self.is_valid():
            raise self._crc_error()

    def _crc_error(self) -> CorruptRecordError:
        return CorruptRecordError(
            f"batch at position {self.position} is corrupt: stored crc {self.crc:#010x}, "
            f"computed {self._computed_crc():#010x}",
            reason=REASON_CRC_MISMATCH, position=self.position,
        )

    def _check_crc(self) -> None:
        """The decoders' CRC check (Kafka's consumer ``check.crcs``): computed once per Batch,
        so repeated record_at calls on one batch hash it once."""
        if self._crc_state == 0:
            self._crc_state = 1 if self.crc == self._computed_crc() else -1
        if self._crc_state < 0:
            raise self._crc_error()

    def _decode(self, check_crcs: bool, limit: int) -> tuple[Any, list, bool]:
        """Return ``(data, parsed, decompressed)``: the buffer holding the record area, its
        parsed records (positions index ``data``), and whether ``data`` is a decompressed copy
        (else it is the iterated buffer: uncompressed batches are parsed in place).
        ``limit``: the checked max_decompressed_bytes."""
        if check_crcs:
            self._check_crc()
        if self.record_count < 0:
            raise InvalidRecordError(
                f"Found invalid record count {self.record_count} in magic v2 batch"
            )
        if self.record_count == 0:
            # Kafka never looks at the record area of an empty batch (the cleaner writes
            # empty batches that keep their compression bits).
            return self._view, [], False
        area_start = self.position + RECORD_BATCH_OVERHEAD
        area_end = self.position + LOG_OVERHEAD + self.batch_length
        cid = self.compression_id
        if cid == COMPRESSION_NONE:
            parsed = _parse_records(self._view, area_start, area_end, self.record_count)
            return self._view, parsed, False
        data = self._decompress(area_start, area_end, limit)
        return data, _parse_records(data, 0, len(data), self.record_count), True

    def _decompress(self, area_start: int, area_end: int, limit: int) -> bytes:
        cid = self.compression_id
        if cid not in COMPRESSION_NAMES:
            raise UnsupportedCompressionError(
                f"Unknown compression type id {cid} in batch at position {self.position}"
            )
        return _compression.decompress(
            cid, self._view[area_start:area_end], max_decompressed_bytes=limit,
            position=self.position,
        )

    def records(
        self, *, check_crcs: bool = True,
        max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    ) -> list:
        """Decode every record (decompressing if needed) into :class:`Record` objects.

        ``check_crcs`` (default True, Kafka's consumer ``check.crcs``): first check the
        batch's CRC32C, once per Batch object (the verdict is kept), and raise
        CorruptRecordError (REASON_CRC_MISMATCH) on a mismatch; False skips it for bytes
        already verified. ``max_decompressed_bytes`` (default 64 MiB): a compressed record
        area that decompresses to more is CorruptRecordError (REASON_DECOMPRESSED_TOO_LARGE),
        raised after bounded memory (:func:`seglog.compression.decompress`).

        For LogAppendTime batches every record's timestamp is ``max_timestamp_ms``. A batch with
        record_count 0 has no records (its area is not read). Raises InvalidRecordError for
        malformed records (Kafka's checks, including more or fewer records than
        record_count), CorruptRecordError (REASON_BAD_COMPRESSION) for a stream the codec
        cannot decompress, UnsupportedCompressionError for codec ids 5-7 or a missing codec
        package; TypeError/ValueError for a bad ``max_decompressed_bytes``.
        """
        limit = check_max_decompressed_bytes(max_decompressed_bytes)
        data, parsed, _ = self._decode(check_crcs, limit)
        base_offset, base_timestamp = self.base_offset, self.base_timestamp_ms
        log_append_time = self.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME
        records = []
        for (offset_delta, timestamp_delta, key_position, key_length, value_position,
             value_length, headers) in parsed:
            if log_append_time:
                timestamp_ms = self.max_timestamp_ms
            else:
                timestamp_ms = _wrap_int64(base_timestamp + timestamp_delta)
            key = bytes(data[key_position : key_position + key_length]) if key_length >= 0 else None
            value = (
                bytes(data[value_position : value_position + value_length])
                if value_length >= 0 else None
            )
            records.append(
                Record(_wrap_int64(base_offset + offset_delta), timestamp_ms, key, value, headers)
            )
        return records

    def consumer_records(
        self, record_type, topic, partition, min_offset: int = 0, *, check_crcs: bool = True,
        max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    ) -> list:
        """The consumer's records of this batch: for each record at or after ``min_offset``,
        ``record_type(topic, partition, offset, timestamp_ms, key, value, headers)``, where
        ``record_type`` is a record type with 7 ``_fields`` (ConsumerRecord, either twin's;
        TypeError otherwise). Every record is parsed and checked as by :meth:`records` (same
        arguments and errors, also for records before ``min_offset``)."""
        if not (isinstance(record_type, type)
                and len(getattr(record_type, "_fields", ())) == 7):
            raise TypeError("record_type must be a record type with 7 _fields "
                            "(ConsumerRecord)")
        return [record_type(topic, partition, r.offset, r.timestamp_ms, r.key, r.value,
                            r.headers)
                for r in self.records(check_crcs=check_crcs,
                                      max_decompressed_bytes=max_decompressed_bytes)
                if r.offset >= min_offset]

    def record_at(
        self, offset: int, *, check_crcs: bool = True,
        max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    ):
        """The record with ``offset``, or None when no record has it (outside
        ``[base_offset, last_offset]``, a gap left by compaction, or record_count 0).

        ``offset`` must be an int (TypeError otherwise, e.g. for 1.5); any int is accepted
        (one far outside the batch gives None). ``check_crcs`` and ``max_decompressed_bytes``
        as for :meth:`records`; the CRC is checked first, before the offset is looked at, and
        once per Batch object, so point reads of several offsets of one batch hash it once.

        Records before it are skipped by their framing (length, attributes, timestamp and
        offset deltas are read and checked; keys, values and headers are not); the record
        itself is parsed with every check of :meth:`records`. A compressed batch is
        decompressed first. A control batch's record is returned like any other. Raises as
        :meth:`records` for malformed framing up to and including that record.
        """
        offset = _int_argument("offset", offset)
        limit = check_max_decompressed_bytes(max_decompressed_bytes)
        if check_crcs:
            self._check_crc()
        if offset < self.base_offset or offset > self.last_offset:
            return None
        if self.record_count < 0:
            raise InvalidRecordError(
                f"Found invalid record count {self.record_count} in magic v2 batch"
            )
        if self.record_count == 0:
            return None
        area_start = self.position + RECORD_BATCH_OVERHEAD
        area_end = self.position + LOG_OVERHEAD + self.batch_length
        data: memoryview | bytes
        if self.compression_id == COMPRESSION_NONE:
            data, start, end = self._view, area_start, area_end
        else:
            data = self._decompress(area_start, area_end, limit)
            start, end = 0, len(data)
        position = _find_record(data, start, end, self.record_count, offset - self.base_offset)
        if position is None:
            return None
        (_, timestamp_delta, key_position, key_length, value_position, value_length,
         headers), _ = _parse_record(data, position, end)
        if self.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME:
            timestamp_ms = self.max_timestamp_ms
        else:
            timestamp_ms = _wrap_int64(self.base_timestamp_ms + timestamp_delta)
        key = bytes(data[key_position : key_position + key_length]) if key_length >= 0 else None
        value = (bytes(data[value_position : value_position + value_length])
                 if value_length >= 0 else None)
        return Record(offset, timestamp_ms, key, value, headers)

    def columns(
        self, *, check_crcs: bool = True,
        max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    ) -> Columns:
        """This batch's records as :class:`Columns`. ``data`` is a read-only view of the whole
        iterated buffer when nothing was decompressed (an uncompressed or empty batch;
        positions are absolute in it), else the decompressed record area. A control batch's
        record is included. ``check_crcs`` and ``max_decompressed_bytes`` as for
        :meth:`records`; raises as :meth:`records`."""
        limit = check_max_decompressed_bytes(max_decompressed_bytes)
        return _build_columns([(self, *self._decode(check_crcs, limit))], self._view, None)

    def record_summary(
        self, *, check_crcs: bool = True,
        max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    ) -> tuple[int, bool, int, int, int]:
        """What validating a producer's batch needs of its records:
        ``(record_count, offsets_in_order, min_timestamp_ms, max_timestamp_ms,
        first_keyless)`` = the number of records parsed; whether their offsets are
        ``base_offset + 0..record_count-1``; the lowest and highest record timestamp (-1, -1
        without records); the index of the first record whose key is null, -1 for none.
        ``check_crcs`` and ``max_decompressed_bytes`` as for :meth:`records`; raises as
        :meth:`records`."""
        columns = self.columns(check_crcs=check_crcs,
                               max_decompressed_bytes=max_decompressed_bytes)
        count = len(columns)
        if not count:
            return 0, True, -1, -1, -1
        offsets = columns.offsets.tolist()
        in_order = offsets == list(range(self.base_offset, self.base_offset + count))
        timestamps = columns.timestamps_ms
        keyless = [i for i, length in enumerate(columns.key_lengths.tolist()) if length < 0]
        return (count, in_order, int(timestamps.min()), int(timestamps.max()),
                keyless[0] if keyless else -1)

    def control_type(self, *, check_crcs: bool = True) -> int:
        """For a control batch, the type in its record key (0 ABORT, 1 COMMIT, 2 LEADER_CHANGE,
        ...; the stored int16, unknown types included).

        Raises InvalidRecordError when the batch is not a control batch, has no record, or its
        key is null, shorter than 4 bytes or has a negative version (Kafka's
        ``ControlRecordType.parse`` rules; a higher version is read as version 0); as
        :meth:`records` (``check_crcs`` included) for the record itself.
        """
        if not self.is_control:
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


def _frame_at(view: memoryview, position: int, max_batch_bytes: int | None) -> int | None:
    """Kafka's ``FileLogInputStream.nextBatch`` checks for the batch at ``position``.

    Returns its batch_length, or None when the buffer ends before the batch does (fewer than
    17 bytes left, or a partial batch: a torn tail). Raises CorruptRecordError in the order
    documented on :func:`iter_batches`.
    """
    if len(view) - position < HEADER_SIZE_UP_TO_MAGIC:
        return None
    (batch_length,) = _INT32.unpack_from(view, position + BATCH_LENGTH_POSITION)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, below the minimum "
            f"{MIN_BATCH_LENGTH}",
            reason=REASON_BATCH_TOO_SMALL, position=position,
        )
    if max_batch_bytes is not None and batch_length > max_batch_bytes:
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, above the maximum "
            f"{max_batch_bytes}",
            reason=REASON_BATCH_TOO_LARGE, position=position,
        )
    if LOG_OVERHEAD + batch_length > len(view) - position:
        return None
    magic = view[position + MAGIC_POSITION]
    if magic != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at position {position} has magic {magic - 256 if magic > 127 else magic}; "
            f"only magic {MAGIC_V2} is supported",
            reason=REASON_BAD_MAGIC, position=position,
        )
    if batch_length < BATCH_LENGTH_MIN_V2:
        # Kafka's iterator would yield this and fail its isValid(); a v2 batch shorter than
        # its own header cannot be read at all, so it is reported here.
        raise CorruptRecordError(
            f"batch at position {position} has batch length {batch_length}, shorter than a "
            f"v2 header ({BATCH_LENGTH_MIN_V2})",
            reason=REASON_BATCH_TOO_SMALL, position=position,
        )
    # The last offset (and the next batch's first, one more) must be an int64: Kafka's Java
    # longs would wrap, and the twins must not read such a header differently.
    (base_offset,) = _INT64.unpack_from(view, position)
    (last_offset_delta,) = _INT32.unpack_from(view, position + LAST_OFFSET_DELTA_POSITION)
    if not INT64_MIN <= base_offset + last_offset_delta < INT64_MAX:
        raise CorruptRecordError(
            f"batch at position {position} has base offset {base_offset} and last offset delta "
            f"{last_offset_delta}: its last offset overflows an int64",
            reason=REASON_BAD_LAST_OFFSET_DELTA, position=position,
        )
    return batch_length


def _check_offsets_increase(batch: Batch, next_offset_min: int) -> int:
    """``check_offsets``: the batch's offsets must start at ``next_offset_min`` or above (0 for
    the first batch, else the previous batch's last offset + 1) and its last offset must not
    be below its base offset. Returns the next batch's minimum; CorruptRecordError
    (REASON_OFFSETS_NOT_INCREASING, the batch's position) otherwise."""
    if batch.base_offset < next_offset_min or batch.last_offset_delta < 0:
        raise CorruptRecordError(
            f"batch at position {batch.position} has offsets {batch.base_offset}.."
            f"{batch.last_offset}; offsets must increase from {next_offset_min}",
            reason=REASON_OFFSETS_NOT_INCREASING, position=batch.position,
        )
    return batch.last_offset + 1


def iter_batches(buffer, *, max_batch_bytes: int | None = None, check_offsets: bool = False):
    """Yield a :class:`Batch` for each whole batch in ``buffer`` (any C-contiguous bytes-like).

    Kafka's ``FileLogInputStream`` rules, in this order at each batch:
    fewer than 17 bytes left -> stop; batch_length < 14 -> CorruptRecordError
    (REASON_BATCH_TOO_SMALL); batch_length > ``max_batch_bytes`` -> CorruptRecordError
    (REASON_BATCH_TOO_LARGE); the batch runs past the buffer -> stop (a torn tail is invisible,
    not an error); magic != 2 -> CorruptRecordError (REASON_BAD_MAGIC); batch_length < 49
    (shorter than a v2 header) -> CorruptRecordError (REASON_BATCH_TOO_SMALL); base_offset +
    last_offset_delta outside an int64 (or the next offset past it) -> CorruptRecordError
    (REASON_BAD_LAST_OFFSET_DELTA). Every error carries the batch's ``position``. CRCs and
    records are not checked here (whole-batch readers serve batches unverified, as Kafka's
    broker does; the record decoders check the CRC).

    ``check_offsets`` (default False): also require each batch's offsets to increase, since
    the base offset lies outside the CRC: base_offset >= 0 for the first batch and >= the
    previous batch's last_offset + 1 after it, and last_offset_delta >= 0; else
    CorruptRecordError (REASON_OFFSETS_NOT_INCREASING) when that batch is reached. Segment
    bytes should be read with True; client batches (which all start at offset 0) with False.

    ``max_batch_bytes``: None (no limit) or an int >= 0 (ints too large to matter mean no
    limit). The arguments are checked when ``iter_batches`` is called: TypeError for a
    buffer that is not C-contiguous bytes-like or a ``max_batch_bytes`` that is not an int,
    ValueError for a negative one.
    """
    view = _byte_view(buffer)
    max_batch_bytes = _size_argument("max_batch_bytes", max_batch_bytes, allow_none=True)
    return _iter_batches(view, max_batch_bytes, bool(check_offsets))


def check_client_batch(buffer, lowest_allowed_ms: int, highest_allowed_ms: int,
                       max_message_bytes: int, keys_required: bool,
                       compression_id: int) -> Batch | None:
    """The :class:`Batch` of ``buffer`` when it is exactly one whole batch a client may append
    as it is, else None (the caller's full validator then rewrites or refuses it). As it is:
    magic 2, a valid CRC32C, at most ``max_message_bytes``, base offset 0, not a control
    batch, at least one record, a record count equal to last_offset_delta + 1 and to the
    records parsed, record offsets 0..count-1, a producer id only with a base sequence >= 0,
    CreateTime, every record timestamp within ``lowest_allowed_ms`` ..
    ``highest_allowed_ms`` and the header's max timestamp equal to the records' largest, no
    keyless record when ``keys_required``, and codec ``compression_id`` unless it is -1.
    Nothing raises for bad bytes: they decline."""
    view = _byte_view(buffer)
    try:
        batch_length = _frame_at(view, 0, None)
    except CorruptRecordError:
        return None
    if batch_length is None or LOG_OVERHEAD + batch_length != len(view) \
            or LOG_OVERHEAD + batch_length > max_message_bytes:
        return None
    batch = Batch._checked(view, 0)
    if batch.base_offset != 0 or batch.is_control or batch.timestamp_type != 0 \
            or batch.record_count <= 0 or batch.last_offset_delta + 1 != batch.record_count \
            or (batch.producer_id >= 0 and batch.base_sequence < 0) \
            or (compression_id >= 0 and batch.compression_id != compression_id) \
            or not batch.is_valid():
        return None
    try:
        count, in_order, lowest, highest, first_keyless = batch.record_summary()
    except (SeglogError, ValueError):
        return None
    if count != batch.record_count or not in_order or (keys_required and first_keyless >= 0) \
            or lowest < lowest_allowed_ms or highest > highest_allowed_ms \
            or batch.max_timestamp_ms != highest:
        return None
    return batch


def _iter_batches(view: memoryview, max_batch_bytes: int | None, check_offsets: bool):
    position, next_offset_min = 0, 0
    # Bounded: every batch moves position forward by at least 12 + 14 bytes.
    while (batch_length := _frame_at(view, position, max_batch_bytes)) is not None:
        batch = Batch._checked(view, position)
        if check_offsets:
            next_offset_min = _check_offsets_increase(batch, next_offset_min)
        yield batch
        position += LOG_OVERHEAD + batch_length


def decode_columns(
    buffer,
    *,
    max_records: int | None = None,
    check_crcs: bool = True,
    check_offsets: bool = False,
    max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
) -> Columns:
    """All records of every whole batch in ``buffer`` as one :class:`Columns`.

    Batches are walked as by :func:`iter_batches` (same errors; a torn tail ends the walk;
    ``check_offsets`` as there). Control batches and batches with record_count 0 are skipped.
    Batches are decoded whole until at least ``max_records`` records were collected, then the
    columns are cut to ``max_records`` (``max_records=0`` decodes nothing; None means no limit).

    ``check_crcs`` (default True): every batch walked before the limit is reached, control and
    empty batches included, has its CRC32C checked first (CorruptRecordError,
    REASON_CRC_MISMATCH); ``max_decompressed_bytes`` bounds each compressed record area as in
    :meth:`Batch.records`.

    ``data``: if no decoded batch is compressed, a read-only memoryview of the whole ``buffer``
    (positions are absolute in it; zero-copy); otherwise ``bytes`` holding, in batch order, the
    record area of every decoded batch (decompressed, or copied as is when uncompressed), and
    positions index that. Raises as :meth:`Batch.records`; TypeError for a ``max_records`` or
    ``max_decompressed_bytes`` that is not an int (or None for ``max_records``), ValueError
    for a negative one.
    """
    max_records = _size_argument("max_records", max_records, allow_none=True)
    limit = check_max_decompressed_bytes(max_decompressed_bytes)
    view = _byte_view(buffer)
    chunks, record_total = [], 0
    for batch in _iter_batches(view, None, bool(check_offsets)):
        if max_records is not None and record_total >= max_records:
            break
        if check_crcs:
            batch._check_crc()
        if batch.is_control or batch.record_count == 0:
            continue
        chunk = (batch, *batch._decode(False, limit))
        chunks.append(chunk)
        record_total += len(chunk[2])
    return _build_columns(chunks, view, max_records)


# --- Encoding ----------------------------------------------------------------------------------


def _bytes_like(item, index: int, what: str):
    """``item`` as an object whose ``len`` is its byte count (bytes, or a "B" memoryview)."""
    if type(item) is bytes:
        return item
    try:
        view = memoryview(item)
    except TypeError:
        raise InvalidRecordError(
            f"{what} of record {index} is {type(item).__name__}, expected a bytes-like object "
            "or None"
        ) from None
    if not view.c_contiguous:
        raise InvalidRecordError(f"{what} of record {index} is not a C-contiguous buffer")
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _is_data_and_lengths(column) -> bool:
    # Any 2-tuple whose second item is a numpy array is the (data, lengths) form, and its
    # lengths are then checked: a float, bool or 2-D array of lengths is an error, never two
    # records made of the data and the array's raw bytes.
    return isinstance(column, tuple) and len(column) == 2 and isinstance(column[1], np.ndarray)


def _check_lengths_array(lengths, what: str) -> None:
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise InvalidRecordError(
            f"the lengths of a (data, lengths) {what} column must be a 1-D integer numpy "
            f"array, got {lengths.ndim}-D {lengths.dtype}"
        )


def _column_items(column, what: str) -> list:
    """Normalise a values or keys argument into a list of bytes-like objects and Nones.

    Accepted forms (the native twin accepts the same): a 2-D C-contiguous uint8 numpy array
    (row i is record i); a ``(data, lengths)`` tuple whose second item is a 1-D integer numpy
    array (lengths >= -1, -1 = null, their non-negative sum at most ``len(data)``); or any
    other iterable of bytes-like objects and Nones (including a 1-D object array). A 2-tuple
    whose second item is any numpy array is the ``(data, lengths)`` form; lengths that are not
    a 1-D integer array are an InvalidRecordError.
    """
    if isinstance(column, np.ndarray) and column.ndim != 1:
        if column.ndim != 2 or column.dtype != np.uint8 or not column.flags.c_contiguous:
            raise InvalidRecordError(
                f"a numpy array of {what}s must be 2-D C-contiguous uint8, got "
                f"{column.ndim}-D {column.dtype}"
                f"{'' if column.flags.c_contiguous else ' (not C-contiguous)'}"
            )
        row_bytes = column.shape[1]
        view = column.reshape(-1).data  # a memoryview of the array: it is C-contiguous
        return [view[row * row_bytes : (row + 1) * row_bytes] for row in range(column.shape[0])]
    if _is_data_and_lengths(column):
        data, lengths = column
        _check_lengths_array(lengths, what)
        try:
            data_view = _byte_view(data)
        except TypeError:
            raise InvalidRecordError(
                f"the data of a (data, lengths) {what} column is {type(data).__name__}, "
                "expected a C-contiguous bytes-like object"
            ) from None
        items: list[memoryview | None] = []
        position = 0
        for index, length in enumerate(lengths.tolist()):
            if length < -1:
                raise InvalidRecordError(f"{what} length of record {index} is {length}, below -1")
            if length == -1:
                items.append(None)
                continue
            if length > len(data_view) - position:
                raise InvalidRecordError(
                    f"{what} lengths add up to more than the {len(data_view)} bytes of data "
                    f"(at record {index})"
                )
            items.append(data_view[position : position + length])
            position += length
        return items
    if isinstance(column, (str, int)) or column is None:
        raise InvalidRecordError(
            f"{what}s must be a sequence, a 2-D uint8 array or (data, lengths), not "
            f"{type(column).__name__}"
        )
    try:
        items = list(column)
    except TypeError:
        raise InvalidRecordError(
            f"{what}s must be a sequence, a 2-D uint8 array or (data, lengths), not "
            f"{type(column).__name__}"
        ) from None
    for index, item in enumerate(items):
        if item is not None:
            items[index] = _bytes_like(item, index, what)
    return items


def _timestamps(timestamps_ms, record_count: int) -> list:
    """One int timestamp per record; InvalidTimestampError outside [-1, INT64_MAX]."""
    if timestamps_ms is None:
        # One clock read per batch: every record of the batch gets the same time.
        return [time.time_ns() // 1_000_000] * record_count
    if isinstance(timestamps_ms, np.ndarray):
        timestamps_ms = timestamps_ms.tolist()
    if hasattr(timestamps_ms, "__len__"):
        stamps = list(timestamps_ms)
        if len(stamps) != record_count:
            raise InvalidRecordError(
                f"got {len(stamps)} timestamps for {record_count} records"
            )
    else:
        stamps = [timestamps_ms] * record_count
    for index, stamp in enumerate(stamps):
        try:
            stamp = operator.index(stamp)
        except TypeError:
            raise InvalidTimestampError(
                f"timestamp of record {index} is {type(stamp).__name__}, expected an int"
            ) from None
        if not NO_TIMESTAMP <= stamp <= INT64_MAX:
            raise InvalidTimestampError(
                f"timestamp of record {index} is {stamp}; timestamps are -1 or in [0, 2**63)"
            )
        stamps[index] = stamp
    return stamps


def _header_block(record_headers, index: int) -> bytes:
    """The encoded header count and headers of one record."""
    if record_headers is None:
        return b"\x00"
    try:
        pairs = list(record_headers)
    except TypeError:
        raise InvalidRecordError(
            f"headers of record {index} must be a sequence of (str, bytes | None) pairs, not "
            f"{type(record_headers).__name__}"
        ) from None
    out = bytearray()
    write_varint(out, len(pairs))
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
        write_varint(out, len(key_bytes))
        out += key_bytes
        if value is None:
            write_varint(out, -1)
        else:
            value = _bytes_like(value, index, f"header value {header_index}")
            write_varint(out, len(value))
            out += value
    return bytes(out)


def _offset_deltas(offset_deltas, last_offset_delta, record_count: int) -> tuple[list, int]:
    """Each record's offset delta and the header's lastOffsetDelta (see :func:`encode_batch`)."""
    if offset_deltas is None:
        deltas = list(range(record_count))
    else:
        if isinstance(offset_deltas, np.ndarray):
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
    if last_offset_delta is None:
        return deltas, deltas[-1]
    last_offset_delta = _check_range("last_offset_delta", last_offset_delta, deltas[-1], INT32_MAX)
    return deltas, last_offset_delta


def _check_range(name: str, value, low: int, high: int) -> int:
    try:
        value = operator.index(value)
    except TypeError:
        raise InvalidRecordError(f"{name} must be an int, got {type(value).__name__}") from None
    if not low <= value <= high:
        raise InvalidRecordError(f"{name} must be in [{low}, {high}], got {value}")
    return value


class _RecordsToEncode(NamedTuple):
    """The checked record columns of one batch (step 1 of :func:`_encode`)."""

    values: list
    keys: list
    header_blocks: list  # each record's encoded header count and headers
    stamps: list
    deltas: list
    last_offset_delta: int


class _HeaderFields(NamedTuple):
    """The checked batch header fields but the length and CRC (step 2 of :func:`_encode`)."""

    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


def _gather_records(values, keys, timestamps_ms, headers, offset_deltas,
                    last_offset_delta) -> _RecordsToEncode:
    """Step 1: values, keys, header blocks, timestamps and offset deltas, checked in this
    order (values first: they give the record count)."""
    value_items = _column_items(values, "value")
    record_count = len(value_items)
    if record_count == 0:
        raise InvalidRecordError("a batch needs at least one record")
    if record_count > INT32_MAX:
        raise RecordTooLargeError(f"{record_count} records do not fit one batch")
    key_items = [None] * record_count if keys is None else _column_items(keys, "key")
    if len(key_items) != record_count:
        raise InvalidRecordError(f"got {len(key_items)} keys for {record_count} values")
    if headers is None:
        header_blocks = [b"\x00"] * record_count
    else:
        if isinstance(headers, (str, bytes)):
            raise InvalidRecordError("headers must be one sequence of pairs per record")
        headers = list(headers)
        if len(headers) != record_count:
            raise InvalidRecordError(f"got {len(headers)} header lists for {record_count} values")
        header_blocks = [_header_block(h, index) for index, h in enumerate(headers)]
    stamps = _timestamps(timestamps_ms, record_count)
    deltas, last_offset_delta = _offset_deltas(offset_deltas, last_offset_delta, record_count)
    return _RecordsToEncode(value_items, key_items, header_blocks, stamps, deltas,
                            last_offset_delta)


def _check_header_fields(records: _RecordsToEncode, cid: int, *, base_offset, timestamp_type,
                         producer_id, producer_epoch, base_sequence, is_transactional,
                         is_control, partition_leader_epoch,
                         delete_horizon_ms) -> _HeaderFields:
    """Step 2: every header argument checked as an int in its field's range, the attributes,
    and the base and max timestamps (the base is the delete horizon when one is set)."""
    # INT64_MAX - 1: the next offset after the batch must be an int64 too (iter_batches
    # refuses a batch whose last offset is INT64_MAX).
    base_offset = _check_range(
        "base_offset", base_offset, 0, INT64_MAX - 1 - records.last_offset_delta)
    timestamp_type = _check_range(
        "timestamp_type", timestamp_type, TIMESTAMP_TYPE_CREATE_TIME, TIMESTAMP_TYPE_LOG_APPEND_TIME
    )
    producer_id = _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
    producer_epoch = _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
    base_sequence = _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
    partition_leader_epoch = _check_range(
        "partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX
    )
    delete_horizon_ms = _check_range(
        "delete_horizon_ms", delete_horizon_ms, NO_TIMESTAMP, INT64_MAX
    )

    attributes = cid
    if timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms >= 0:
        attributes |= DELETE_HORIZON_FLAG_MASK
        base_timestamp_ms = delete_horizon_ms
    else:
        base_timestamp_ms = records.stamps[0]
    return _HeaderFields(
        base_offset, partition_leader_epoch, attributes, records.last_offset_delta,
        base_timestamp_ms, max(records.stamps), producer_id, producer_epoch, base_sequence,
        len(records.values),
    )


def _write_records(out: bytearray, records: _RecordsToEncode, base_timestamp_ms: int) -> None:
    """Step 3: append every record to ``out`` (after the header's placeholder bytes), checking
    each timestamp delta and the record area's size as it goes."""
    stamps, deltas = records.stamps, records.deltas
    for index, (key, value) in enumerate(zip(records.keys, records.values)):
        timestamp_delta = stamps[index] - base_timestamp_ms
        if not INT64_MIN <= timestamp_delta <= INT64_MAX:
            raise InvalidTimestampError(
                f"timestamp of record {index} is {stamps[index]}, too far from the base "
                f"timestamp {base_timestamp_ms}"
            )
        key_length = -1 if key is None else len(key)
        value_length = -1 if value is None else len(value)
        header_block = records.header_blocks[index]
        body_size = (
            1  # attributes
            + size_of_varlong(timestamp_delta)
            + size_of_varint(deltas[index])
            + size_of_varint(key_length) + max(key_length, 0)
            + size_of_varint(value_length) + max(value_length, 0)
            + len(header_block)
        )
        record_bytes = size_of_varint(min(body_size, INT32_MAX)) + body_size
        area_bytes = len(out) - RECORD_BATCH_OVERHEAD + record_bytes
        if area_bytes > RECORD_AREA_BYTES_MAX:
            raise RecordTooLargeError(
                f"record {index} makes the batch larger than {INT32_MAX} bytes"
            )
        write_varint(out, body_size)
        out.append(0)  # record attributes: unused by Kafka, always 0
        write_varlong(out, timestamp_delta)
        write_varint(out, deltas[index])
        write_varint(out, key_length)
        if key is not None:
            out += key
        write_varint(out, value_length)
        if value is not None:
            out += value
        out += header_block


def _compress_record_area(out: bytearray, cid: int, compression_level) -> None:
    """Step 4 (compressed batches only): replace the record area after the header's
    placeholder bytes by its compressed form."""
    with memoryview(out) as whole, whole[RECORD_BATCH_OVERHEAD:] as record_area:
        compressed = _compression.compress(cid, record_area, compression_level)
    if len(compressed) > RECORD_AREA_BYTES_MAX:
        raise RecordTooLargeError("the compressed batch is larger than 2 GiB")
    del out[RECORD_BATCH_OVERHEAD:]
    out += compressed


def _write_header(out: bytearray, fields: _HeaderFields) -> None:
    """Step 5: the 61-byte header over the placeholder, then its CRC over attributes..end."""
    BATCH_HEADER.pack_into(
        out, 0,
        fields.base_offset,
        len(out) - LOG_OVERHEAD,  # batch_length
        fields.partition_leader_epoch,
        MAGIC_V2,
        0,  # crc, computed below over attributes..end
        fields.attributes,
        fields.last_offset_delta,
        fields.base_timestamp_ms,
        fields.max_timestamp_ms,
        fields.producer_id,
        fields.producer_epoch,
        fields.base_sequence,
        fields.record_count,
    )
    with memoryview(out) as whole, whole[ATTRIBUTES_POSITION:] as covered:
        crc = crc32c(covered)
    _CRC.pack_into(out, CRC_POSITION, crc)


def _encode(values, keys, timestamps_ms, headers, *, base_offset, compression,
            compression_level, timestamp_type, producer_id, producer_epoch, base_sequence,
            is_transactional, is_control, partition_leader_epoch, delete_horizon_ms,
            offset_deltas=None, last_offset_delta=None) -> bytes:
    """One batch, step by step (each step's errors come before the next step's): the
    compression codec, the record columns, the header fields, the records, compression, the
    header and CRC."""
    cid = _compression.codec_id(compression)
    _compression.check_level(cid, compression_level)
    records = _gather_records(values, keys, timestamps_ms, headers, offset_deltas,
                              last_offset_delta)
    fields = _check_header_fields(
        records, cid, base_offset=base_offset, timestamp_type=timestamp_type,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        is_transactional=is_transactional, is_control=is_control,
        partition_leader_epoch=partition_leader_epoch, delete_horizon_ms=delete_horizon_ms,
    )
    # The header is filled in last; the records go straight after its 61 placeholder bytes.
    out = bytearray(RECORD_BATCH_OVERHEAD)
    _write_records(out, records, fields.base_timestamp_ms)
    if cid != COMPRESSION_NONE:
        _compress_record_area(out, cid, compression_level)
    _write_header(out, fields)
    return bytes(out)


def encode_batch(
    values,
    keys=None,
    timestamps_ms=None,
    headers=None,
    *,
    base_offset: int = 0,
    compression: str | int = "none",
    compression_level: int | None = None,
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
    delete_horizon_ms: int = -1,
    offset_deltas=None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode one RecordBatch v2 (magic 2) and return its bytes.

    ``values``/``keys``: a sequence of bytes-like objects or None; a 2-D C-contiguous uint8
    numpy array (one row per record); or ``(data, lengths)``: one bytes-like buffer and a 1-D
    integer numpy array of lengths (-1 = null) taken from ``data`` in order. ``keys`` None means
    every key is null. ``timestamps_ms``: None (the wall clock, read once for the whole batch),
    one int for every record, or a sequence/array of ints (each -1 or in [0, 2**63)).
    ``headers``: None or, per record, None or a sequence of ``(str, bytes | None)`` pairs
    (keys are written UTF-8).

    The bytes are fully determined by the arguments (and the clock when ``timestamps_ms`` is
    None), and the native twin writes the same: base timestamp = the first record's timestamp,
    or ``delete_horizon_ms`` when that is >= 0 (sets attribute bit 6); max timestamp = the
    largest record timestamp; offset deltas 0..n-1 and last offset delta n - 1 unless given;
    record attributes 0; LogAppendTime (``timestamp_type=1``) only sets attribute bit 3, the
    given timestamps are written as usual; ``compression="none"`` writes the records raw;
    gzip, lz4, zstd and snappy go through :func:`seglog.compression.compress`.

    ``offset_deltas``/``last_offset_delta`` serve the cleaner, which rebuilds a batch from the
    records it keeps with their original offsets (Kafka's ``buildRetainedRecordsInto`` and
    ``overrideLastOffset``): ``offset_deltas`` is None or n strictly increasing ints (a
    sequence or integer numpy array) in [0, INT32_MAX], each record's ``offset - base_offset``;
    ``last_offset_delta`` is None (the last record's delta) or an int from the last record's
    delta to INT32_MAX, written as the header's lastOffsetDelta.

    Every numeric argument must be an int (``operator.index``: numpy ints count, 1.0 and 1.5
    do not) within its field's range; no argument makes an OverflowError. Raises
    InvalidRecordError for an empty batch, a value/key that is not bytes-like (the message
    names the record index), a ``(data, lengths)`` column whose lengths are not a 1-D integer
    array or do not fit ``data``, mismatched column lengths, a bad header, bad offset deltas,
    or a header field that is not an int or out of its range (base_offset must be >= 0 and
    its last offset below 2**63 - 1, timestamp_type 0 or 1); InvalidTimestampError for a
    timestamp that is not an int in range; UnsupportedCompressionError for an unknown or
    unavailable codec; TypeError for a compression level that is not an int, ValueError for
    one outside the codec's range; RecordTooLargeError when the batch would not fit an int32
    length.
    """
    return _encode(
        values, keys, timestamps_ms, headers,
        base_offset=base_offset, compression=compression, compression_level=compression_level,
        timestamp_type=timestamp_type, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, is_transactional=is_transactional, is_control=False,
        partition_leader_epoch=partition_leader_epoch, delete_horizon_ms=delete_horizon_ms,
        offset_deltas=offset_deltas, last_offset_delta=last_offset_delta,
    )


def encode_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    partition_leader_epoch: int = -1,
    timestamp_type: int = TIMESTAMP_TYPE_CREATE_TIME,
    delete_horizon_ms: int = -1,
) -> bytes:
    """A 78-byte transactional control batch holding one end-transaction marker.

    ``control_type`` is the int 0 (ABORT) or 1 (COMMIT); anything else (2, 1.0, "1") is an
    InvalidRecordError, as is a producer or coordinator field that is not an int in range. As
    Kafka's ``MemoryRecords.writeEndTransactionalMarker``: attributes transactional + control,
    CreateTime, no compression, base sequence -1, one record whose key is
    ``(version 0, type)`` and whose value is ``(version 0, coordinator_epoch)``, no headers.
    ``timestamp_ms`` None reads the wall clock.

    For the cleaner, which rebuilds a marker it keeps: ``delete_horizon_ms`` >= 0 sets the
    delete-horizon attribute (bit 6) and writes the horizon as the base timestamp, the record's
    timestamp delta then being ``timestamp_ms - delete_horizon_ms`` and the max timestamp
    ``timestamp_ms`` (Kafka's ``MemoryRecordsBuilder`` with a delete horizon);
    ``timestamp_type`` 1 (LogAppendTime) keeps that attribute bit of a marker written to a
    LogAppendTime topic. Both are checked as :func:`encode_batch` checks them.
    """
    marker_type: int | None
    try:
        marker_type = operator.index(control_type)
    except TypeError:
        marker_type = None  # 1.0, "1", None: not an int, so not a marker type either
    if marker_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError("an end-transaction marker is ABORT (0) or COMMIT (1)")
    coordinator_epoch = _check_range("coordinator_epoch", coordinator_epoch, INT32_MIN, INT32_MAX)
    key = CONTROL_KEY.pack(CONTROL_RECORD_VERSION, marker_type)
    value = END_TXN_MARKER_VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch)
    return _encode(
        [value], [key], timestamp_ms, None,
        base_offset=base_offset, compression=COMPRESSION_NONE, compression_level=None,
        timestamp_type=timestamp_type, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, is_transactional=True,
        is_control=True, partition_leader_epoch=partition_leader_epoch,
        delete_horizon_ms=delete_horizon_ms,
    )
