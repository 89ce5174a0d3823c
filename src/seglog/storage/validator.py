"""Checks on what clients append, before the Log writes it (Kafka's ``LogValidator``).

:func:`validate_client_batches` takes a produce request's records (:meth:`Log.append_raw
<seglog.storage.log.Log.append_raw>`) and returns a :class:`ValidationResult`: the bytes to
write, their size, record count and largest timestamp, and the decoded batches when a producer
id needs the producer state to see them. Rules: whole batches only (CorruptRecordError for
trailing bytes; Kafka silently trims them); magic 2 and CRC32C (CorruptRecordError); each
batch at most ``max_message_bytes`` (RecordTooLargeError); the set at most ``segment_bytes``
(RecordBatchTooLargeError); base offset 0, at least one record, a record count equal to
``last_offset_delta + 1``, record offsets 0..n-1, no control batches, a producer id only with
a base sequence >= 0 (InvalidRecordError); CreateTime timestamps within
``message_timestamp_before/after_max_ms`` of now, records without a timestamp (-1) excepted,
and no batch the producer marked LogAppendTime unless each of its records has a CreateTime
timestamp on a CreateTime topic (InvalidTimestampError, Kafka's ``validateTimestamp`` and its
message; :func:`validate_timestamps` checks the first rule for ``append_batch``). The client's bytes are written
unchanged except where Kafka rewrites them: a CreateTime batch whose max timestamp is wrong
gets the real one, and with LogAppendTime every batch gets max timestamp ``now_ms`` and the
LogAppendTime bit (timestamp type bit, max timestamp, new CRC: ``setMaxTimestamp``); the
caller's buffer is never modified. When the topic's ``compression_type`` names a codec other
than the batches' (not ``producer``), :func:`recompress_client_batches` re-encodes every batch
with it, as Kafka's broker recompresses.

The usual request, one batch written as it came, is checked by one backend call
(``check_client_batch``: the same rules, in C for the native backend); whatever it declines
(an error, a rewrite, several batches, records without a timestamp) goes through the rules
one by one, which name the error.

Compacted topics (``cleanup.policy=compact``) reject records without a key
(:func:`require_keys`; client batches through ``Batch.record_summary``): the cleaner keeps the latest record per
key, and a keyless record has none.

Pure functions of their arguments (the backend and the log's config are passed in); no lock,
no state.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from .. import format as fmt
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from .config import INT16_MAX, INT32_MAX, LogConfig, check_int

__all__ = [
    "ValidationResult",
    "check_marker_fields",
    "check_record_timestamps",
    "recompress_client_batches",
    "require_keys",
    "timestamp_out_of_range",
    "validate_client_batches",
    "validate_timestamps",
]

_new_result = tuple.__new__
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")


class ValidationResult(NamedTuple):
    """Validated client batches, ready for the Log to write (Kafka's ``ValidationResult``).
    Immutable and read by name (a NamedTuple because it is made on every ``append_raw``: a
    frozen dataclass costs a microsecond more).

    * ``data``: the bytes to write (the caller's buffer when nothing needed rewriting, else a
      new buffer; never the caller's buffer modified).
    * ``size_bytes``: ``len(data)``.
    * ``record_count``: records in all batches.
    * ``max_timestamp_ms``: the largest max timestamp of the batches as written (``now_ms``
      with LogAppendTime).
    * ``batches``: the Batch objects of ``data`` when any batch carries a producer id (the
      producer state checks them), else None.
    """

    data: Any
    size_bytes: int
    record_count: int
    max_timestamp_ms: int
    batches: list | None


def check_marker_fields(*, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int) -> tuple[int, int, int]:
    """``(producer_id, producer_epoch, coordinator_epoch)`` of a transaction marker checked
    (:func:`~seglog.storage.config.check_int`: the epochs int16 and int32): InvalidRecordError
    for a negative producer id or epoch."""
    producer_id = check_int("producer_id", producer_id)
    producer_epoch = check_int("producer_epoch", producer_epoch, minimum=-(INT16_MAX + 1),
                               maximum=INT16_MAX)
    coordinator_epoch = check_int("coordinator_epoch", coordinator_epoch,
                                  minimum=-(INT32_MAX + 1), maximum=INT32_MAX)
    if producer_id < 0 or producer_epoch < 0:
        raise InvalidRecordError(
            f"a transaction marker needs a producer id and epoch >= 0, got {producer_id} "
            f"and {producer_epoch}")
    return producer_id, producer_epoch, coordinator_epoch


def validate_timestamps(timestamps_ms: Any, *, config: LogConfig, now_ms: int) -> None:
    """InvalidTimestampError unless every timestamp of ``timestamps_ms`` (an int or an array
    of them) is within ``message_timestamp_before_max_ms`` before and
    ``message_timestamp_after_max_ms`` after ``now_ms``, by Kafka's rule
    (:func:`timestamp_out_of_range`: -1, no timestamp, is never out of range)."""
    if isinstance(timestamps_ms, int):
        lowest_ms = highest_ms = timestamps_ms
        values: Any = (timestamps_ms,)
    else:
        import numpy as np

        values = np.asarray(timestamps_ms, dtype=np.int64)
        if values.size == 0:
            return
        lowest_ms, highest_ms = int(values.min()), int(values.max())
    if _within(lowest_ms, highest_ms, config=config, now_ms=now_ms):
        return
    check_record_timestamps([int(t) for t in values], config=config, now_ms=now_ms)


def _within(lowest_ms: int, highest_ms: int, *, config: LogConfig, now_ms: int) -> bool:
    """Whether timestamps spanning ``lowest_ms`` .. ``highest_ms`` are all valid, decided
    from the two alone: exact when none is negative and the clock is not (no -1 to skip, and
    Kafka's long arithmetic cannot overflow); False means "look at each record"."""
    return (lowest_ms >= 0 and now_ms >= 0
            and lowest_ms >= now_ms - config.message_timestamp_before_max_ms
            and highest_ms <= now_ms + config.message_timestamp_after_max_ms)


def _java_long(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as Java's long arithmetic does."""
    return (value + 2**63) % 2**64 - 2**63


def timestamp_out_of_range(timestamp_ms: int, *, config: LogConfig, now_ms: int) -> bool:
    """Kafka's ``LogValidator.recordHasInvalidTimestamp`` for a CreateTime record, in Java's
    long arithmetic: ``now - timestamp > before.max.ms`` or ``timestamp - now >
    after.max.ms``; a record without a timestamp (-1, ``RecordBatch.NO_TIMESTAMP``) never
    is."""
    if timestamp_ms == fmt.NO_TIMESTAMP:
        return False
    diff_ms = _java_long(now_ms - timestamp_ms)
    return (diff_ms > config.message_timestamp_before_max_ms
            or _java_long(-diff_ms) > config.message_timestamp_after_max_ms)


def check_record_timestamps(timestamps_ms: Any, *, config: LogConfig, now_ms: int,
                            batch_log_append_time: bool = False,
                            offsets: Any = None) -> None:
    """Kafka's ``LogValidator.validateTimestamp`` over one batch's records, in order:
    InvalidTimestampError for the first record whose CreateTime timestamp is out of range
    (:func:`timestamp_out_of_range`), in Kafka's words; and, when the producer marked the
    batch LogAppendTime (``batch_log_append_time``), for the first record without a
    timestamp, or any record when the topic itself uses LogAppendTime. ``offsets``: the
    records' offsets for the message (default: their index)."""
    create_time = config.message_timestamp_type == "CreateTime"
    for index, timestamp_ms in enumerate(timestamps_ms):
        offset = index if offsets is None else offsets[index]
        if create_time and timestamp_ms != fmt.NO_TIMESTAMP:
            if timestamp_out_of_range(timestamp_ms, config=config, now_ms=now_ms):
                low_ms = _java_long(now_ms - config.message_timestamp_before_max_ms)
                high_ms = _java_long(now_ms + config.message_timestamp_after_max_ms)
                raise InvalidTimestampError(
                    f"Timestamp {timestamp_ms} of message with offset {offset} is out of "
                    f"range. The timestamp should be within [{low_ms}, {high_ms}]")
        elif batch_log_append_time:
            raise InvalidTimestampError(
                f"Invalid timestamp type in message with offset {offset}. Producer should "
                "not set timestamp type to LogAppendTime.")


def require_keys(keys: Any, *, config: LogConfig) -> None:
    """Compacted topics reject keyless records (Kafka's LogValidator): InvalidRecordError
    naming the first record without a key. ``keys`` as ``encode_batch`` takes them."""
    if not config.compaction_enabled:
        return
    index = None
    if keys is None:
        index = 0
    elif isinstance(keys, tuple) and len(keys) == 2 and hasattr(keys[1], "dtype"):
        # (data, lengths): lengths -1 are null keys
        import numpy as np

        missing = np.flatnonzero(np.asarray(keys[1]) < 0)
        index = int(missing[0]) if missing.size else None
    elif getattr(keys, "ndim", 1) == 2:
        return  # a 2-D uint8 array: every row is a key
    else:
        index = next((i for i, key in enumerate(keys) if key is None), None)
    if index is not None:
        raise InvalidRecordError(
            f"record {index} has no key: a compacted topic (cleanup.policy=compact) "
            "cannot accept a record without a key")


def validate_client_batches(buffer: memoryview, *, backend: Any, config: LogConfig,
                            now_ms: int) -> ValidationResult:
    """Check the client batches in ``buffer`` (a 1-D byte view) by the rules of the module
    docstring and return what to write. ``now_ms`` is the clock for timestamp checks and
    LogAppendTime."""
    size_bytes = len(buffer)
    if size_bytes == 0:
        raise InvalidRecordError("an append must hold at least one batch")
    if size_bytes > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"append of {size_bytes} bytes is larger than segment.bytes "
            f"({config.segment_bytes})")
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    # Decided once per append, not per batch (this is the produce hot path).
    compacted = config.compaction_enabled
    # The CreateTime bounds, for batches whose timestamps are none negative (see _within).
    lowest_allowed_ms = max(0, now_ms - config.message_timestamp_before_max_ms) \
        if now_ms >= 0 else fmt.INT64_MAX + 1
    highest_allowed_ms = now_ms + config.message_timestamp_after_max_ms
    codec = config.compression_codec
    if not log_append_time and now_ms >= 0:
        # The usual produce request: one batch to write as it is, checked in one backend
        # call; anything else (an error, a rewrite) is decided by the loop below. The bounds
        # are int64 there (a timestamp above INT64_MAX cannot be).
        batch = backend.check_client_batch(
            buffer, lowest_allowed_ms, min(highest_allowed_ms, fmt.INT64_MAX),
            config.max_message_bytes, compacted,
            -1 if codec is None else fmt.COMPRESSION_IDS[codec])
        if batch is not None:
            return _new_result(ValidationResult, (
                buffer, size_bytes, batch.record_count, batch.max_timestamp_ms,
                [batch] if batch.producer_id >= 0 else None))
    wanted_type = (fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME if log_append_time
                   else fmt.TIMESTAMP_TYPE_CREATE_TIME)
    record_count, max_timestamp_ms, consumed_bytes = 0, -1, 0
    rewrites: list[tuple[int, int, int]] = []  # (position, size_bytes, max_timestamp_ms)
    with_producer = False
    recompress = False
    batches: list = []
    for batch in backend.iter_batches(buffer):
        batches.append(batch)
        recompress = recompress or (codec is not None and batch.compression != codec)
        position = batch.position
        if position != consumed_bytes:
            raise CorruptRecordError("batches are not contiguous", reason=fmt.REASON_BAD_RECORDS,
                                     position=consumed_bytes)
        consumed_bytes = position + batch.size_bytes
        if batch.size_bytes > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {batch.size_bytes} bytes at position {position} is larger than "
                f"max.message.bytes ({config.max_message_bytes})")
        batch.ensure_valid()
        if batch.base_offset != 0:
            raise InvalidRecordError(
                f"the base offset of a client batch must be 0, got {batch.base_offset}")
        if batch.is_control:
            raise InvalidRecordError("clients are not allowed to write control batches")
        count = batch.record_count
        if count <= 0:
            raise InvalidRecordError(f"a client batch must hold records, got count {count}")
        if batch.last_offset_delta + 1 != count:
            raise InvalidRecordError(
                f"batch count {count} does not match its offset range "
                f"(last offset delta {batch.last_offset_delta})")
        if batch.producer_id >= 0:
            if batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"batch with producer id {batch.producer_id} has no base sequence")
            with_producer = True
        # One pass over the records in C, no Columns: numpy stays out of the broker.
        parsed, in_order, lowest_ms, highest_ms, first_keyless = batch.record_summary()
        if compacted and first_keyless >= 0:
            raise InvalidRecordError(
                f"record {first_keyless} of the batch at position {position} has no key: a "
                "compacted topic (cleanup.policy=compact) cannot accept a record without a key")
        if parsed != count or not in_order:
            raise InvalidRecordError("record offsets inside the batch are not 0..count-1")
        producer_log_append_time = batch.timestamp_type == fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME
        # _within, inlined: this is the produce hot path.
        if producer_log_append_time or not (log_append_time or (
                lowest_ms >= lowest_allowed_ms and highest_ms <= highest_allowed_ms)):
            # Kafka's per-record rules (rare: a bad or a negative timestamp, or a producer
            # that set LogAppendTime itself).
            records = batch.records()
            check_record_timestamps([r.timestamp_ms for r in records], config=config,
                                    now_ms=now_ms, offsets=[r.offset for r in records],
                                    batch_log_append_time=producer_log_append_time)
        batch_max_ms = now_ms if log_append_time else highest_ms
        if batch.timestamp_type != wanted_type or batch.max_timestamp_ms != batch_max_ms:
            rewrites.append((position, batch.size_bytes, batch_max_ms))
        record_count += count
        max_timestamp_ms = max(max_timestamp_ms, batch_max_ms)
    if consumed_bytes != size_bytes:
        raise CorruptRecordError(
            f"{size_bytes - consumed_bytes} trailing bytes are not a whole batch",
            reason=fmt.REASON_TRUNCATED, position=consumed_bytes)
    if recompress and codec is not None:  # recompress is only ever set with a codec
        return recompress_client_batches(
            batches, backend=backend, config=config, codec=codec, timestamp_type=wanted_type,
            now_ms=now_ms, record_count=record_count, max_timestamp_ms=max_timestamp_ms,
            with_producer=with_producer)
    if not rewrites:
        # Every plain append_raw ends here: tuple.__new__ skips the NamedTuple's Python-level
        # __new__ (a third of a microsecond); the field order is ValidationResult's.
        return _new_result(ValidationResult, (buffer, size_bytes, record_count,
                                              max_timestamp_ms,
                                              batches if with_producer else None))
    out = bytearray(buffer)
    view = memoryview(out)
    for position, batch_bytes, batch_max_ms in rewrites:
        # DefaultRecordBatch.setMaxTimestamp: timestamp type bit, max timestamp, new CRC.
        attributes = _INT16.unpack_from(out, position + fmt.ATTRIBUTES_POSITION)[0]
        attributes &= ~fmt.TIMESTAMP_TYPE_MASK
        if wanted_type == fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME:
            attributes |= fmt.TIMESTAMP_TYPE_MASK
        _INT16.pack_into(out, position + fmt.ATTRIBUTES_POSITION, attributes)
        _INT64.pack_into(out, position + fmt.MAX_TIMESTAMP_POSITION, batch_max_ms)
        crc = backend.crc32c(view[position + fmt.ATTRIBUTES_POSITION:position + batch_bytes])
        _UINT32.pack_into(out, position + fmt.CRC_POSITION, crc)
    view.release()
    # The producer state takes the batches as written (max timestamps rewritten).
    return ValidationResult(data=out, size_bytes=size_bytes, record_count=record_count,
                            max_timestamp_ms=max_timestamp_ms,
                            batches=list(backend.iter_batches(out)) if with_producer else None)


def recompress_client_batches(batches: list, *, backend: Any, config: LogConfig, codec: str,
                              timestamp_type: int, now_ms: int, record_count: int,
                              max_timestamp_ms: int,
                              with_producer: bool) -> ValidationResult:
    """Re-encode validated client batches with the topic's codec (``compression.type`` is
    neither ``producer`` nor the batches' codec): Kafka's LogValidator then rebuilds every
    batch (``validateMessagesAndAssignOffsetsCompressed`` without in-place assignment),
    keeping the records, their timestamps, headers and the producer fields. A re-encoded batch
    larger than ``max_message_bytes`` is RecordTooLargeError."""
    parts = []
    for batch in batches:
        records = batch.records()
        if timestamp_type == fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME:
            timestamps_ms = [now_ms] * len(records)
        else:
            timestamps_ms = [r.timestamp_ms for r in records]
        raw = backend.encode_batch(
            [r.value for r in records], keys=[r.key for r in records],
            timestamps_ms=timestamps_ms, headers=[r.headers for r in records],
            compression=codec, timestamp_type=timestamp_type,
            producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
            partition_leader_epoch=batch.partition_leader_epoch)
        if len(raw) > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch re-encoded with {codec} is {len(raw)} bytes, larger than "
                f"max.message.bytes ({config.max_message_bytes})")
        parts.append(raw)
    out = b"".join(parts)
    return ValidationResult(data=out, size_bytes=len(out), record_count=record_count,
                            max_timestamp_ms=max_timestamp_ms,
                            batches=list(backend.iter_batches(out)) if with_producer else None)
