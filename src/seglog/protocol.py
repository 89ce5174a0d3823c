"""The backend interface: what ``seglog.pure`` and ``seglog._native`` both provide.

The Python layer (Log, Store, ...) only ever calls these names on the backend object it was
given; it never branches on which backend that is. Both backends pass the same tests and write
byte-identical files. This module is the contract in code (``typing.Protocol``); the
docstrings are the contract in words and are binding for both implementations.

Vocabulary: *offset* is a record number; *position* a byte index in a file or buffer;
*base_offset* a batch's or segment's first offset; *relative offset* ``offset - base_offset``.
"""

from __future__ import annotations

from typing import Any, Iterator, Protocol, Sequence

Headers = Sequence[tuple[str, "bytes | None"]]


class Record(Protocol):
    """One record. ``key`` and ``value`` are ``bytes`` or None; ``headers`` a tuple of
    ``(str, bytes | None)`` pairs (``()`` when there are none). Equality compares the five
    fields; ``tuple(record)`` gives ``(offset, timestamp_ms, key, value, headers)``."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple


class Columns(Protocol):
    """Records of one or more batches as numpy columns, with no per-record Python objects.

    ``offsets`` and ``timestamps_ms`` are int64 arrays. ``key_positions``/``value_positions``
    (int64) and ``key_lengths``/``value_lengths`` (int32, -1 for null) locate each key and value
    in ``data``, a read-only bytes-like object: the input buffer itself for uncompressed batches,
    or a buffer of decompressed record areas. ``len(columns)`` is the record count.
    ``columns.key(i)``/``columns.value(i)`` return ``bytes`` or None for one record.
    """

    offsets: Any
    timestamps_ms: Any
    key_positions: Any
    key_lengths: Any
    value_positions: Any
    value_lengths: Any
    data: Any


class Batch(Protocol):
    """One RecordBatch v2 header, decoded, over a buffer that holds the whole batch.

    Attributes are Kafka's header fields in snake case plus derived ones: ``base_offset``,
    ``batch_length``, ``partition_leader_epoch``, ``magic``, ``crc``, ``attributes``,
    ``last_offset_delta``, ``base_timestamp_ms``, ``max_timestamp_ms``, ``producer_id``,
    ``producer_epoch``, ``base_sequence``, ``record_count``; derived: ``last_offset``,
    ``next_offset`` (last_offset + 1), ``size_bytes`` (12 + batch_length), ``position``
    (where the batch starts in the iterated buffer), ``compression`` (name), ``compression_id``,
    ``timestamp_type`` (0 CreateTime, 1 LogAppendTime), ``is_transactional``, ``is_control``,
    ``has_delete_horizon``, ``delete_horizon_ms`` (or -1), ``last_sequence`` (Kafka's wrapping
    rule; -1 when base_sequence is -1).
    """

    base_offset: int
    last_offset: int
    record_count: int
    compression: str
    is_control: bool
    crc: int

    def is_valid(self) -> bool:
        """True if the stored CRC32C equals the CRC of bytes 21..end."""

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError(reason=REASON_CRC_MISMATCH) unless ``is_valid()``."""

    def records(self) -> list:
        """Decode every record (decompressing if needed) into Record objects. For
        LogAppendTime batches every record's timestamp is ``max_timestamp_ms``. Raises
        InvalidRecordError / CorruptRecordError on malformed records (Kafka's checks)."""

    def columns(self) -> Columns:
        """This batch's records as numpy columns."""

    def control_type(self) -> int:
        """For a control batch, the type in its record key (0 ABORT, 1 COMMIT, ...)."""


class Backend(Protocol):
    """A backend module: ``seglog.pure`` or ``seglog._native``."""

    name: str  # "pure" or "native"

    def crc32c(self, data: Any, crc: int = 0) -> int:
        """CRC-32C (Castagnoli) of any bytes-like ``data``, continuing from ``crc``."""

    def encode_batch(
        self,
        values: Any,
        keys: Any = None,
        timestamps_ms: Any = None,
        headers: Any = None,
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
    ) -> bytes:
        """Encode one RecordBatch v2 (magic 2).

        values/keys: a sequence of bytes-like or None, a 2-D C-contiguous uint8 numpy array
        (one row per record), or a ``(data, lengths)`` pair (one bytes-like buffer and an
        integer numpy array of lengths, -1 for null, summing to the used bytes of data).
        keys None means every key is null. timestamps_ms: None (wall clock, read once per
        batch), an int for every record, or a sequence/int64 array. headers: None or one
        sequence of ``(str, bytes | None)`` pairs per record.
        The batch's base timestamp is the first record's timestamp (Kafka's builder), or
        ``delete_horizon_ms`` when that is >= 0 (attribute bit 6); max timestamp is the
        largest record timestamp. Record attributes are 0. Raises InvalidRecordError for a
        value/key that is not bytes-like (message names the record index), mismatched column
        lengths, an empty batch, or a header key that is not str; UnsupportedCompressionError.
        """

    def encode_control_batch(
        self,
        control_type: int,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int = 0,
        base_offset: int = 0,
        timestamp_ms: int | None = None,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """A 78-byte transactional control batch holding one commit (1) or abort (0) marker."""

    def iter_batches(self, buffer: Any, *, max_batch_bytes: int | None = None) -> Iterator[Batch]:
        """Walk the batches in ``buffer`` (Kafka's FileLogInputStream rules, §1.7): stop silently
        when fewer than 17 bytes or a partial batch remain; raise CorruptRecordError for a
        batch_length < 14 (REASON_BATCH_TOO_SMALL), > max_batch_bytes (REASON_BATCH_TOO_LARGE)
        or a magic other than 2 (REASON_BAD_MAGIC). CRCs are not checked here."""

    def decode_columns(self, buffer: Any, *, max_records: int | None = None) -> Columns:
        """All records of every whole batch in ``buffer`` (up to ``max_records``, whole batches
        are decoded but columns are cut) as one Columns object. Control batches are skipped."""

    Segment: Any  # see seglog/pure/segment.py for the contract
    OffsetIndex: Any
    TimeIndex: Any
