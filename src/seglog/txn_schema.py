"""The bytes of ``__transaction_state`` records: Kafka's transaction-log key and value schemas.

The transaction coordinator keeps each transactional id's state as records in the compacted
internal topic ``__transaction_state``: the key names the transactional id, the value holds
its producer id, epoch and the state of its current transaction, last value per key winning.
Every key and value starts with an int16 version.

* ``TransactionLogKey`` version 0: ``transactional_id`` string.
* ``TransactionLogValue`` version 0 (what Kafka writes unless ``transaction.version`` enables
  the flexible version 1, which this module does not read):

  ====================================  =====================================================
  producer_id int64
  producer_epoch int16
  transaction_timeout_ms int32
  transaction_status int8               :data:`EMPTY` .. :data:`PREPARE_EPOCH_FENCE`
  transaction_partitions                nullable array (int32 count, -1 null) of
                                        (topic string, partition_ids array of int32);
                                        null when the state is Empty
  transaction_last_update_timestamp_ms int64
  transaction_start_timestamp_ms int64  -1 when no transaction was started
  ====================================  =====================================================

Strings are an int16 length and UTF-8 bytes. Malformed bytes raise
:class:`~seglog.errors.CorruptRecordError`. Sources: ``transaction-coordinator/src/main/
resources/common/message/TransactionLogKey.json``, ``TransactionLogValue.json``;
``TransactionLog.valueToBytes``; ``TransactionState`` ids; ``TransactionStateManager.
partitionFor`` (``Utils.abs(transactionalId.hashCode()) % n``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .offsets_schema import _Reader, _string, java_abs, java_string_hash

#: The internal topic and Kafka's default partition count
#: (``transaction.state.log.num.partitions``).
TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_PARTITIONS_DEFAULT = 50

KEY_VERSION = 0
VALUE_VERSION = 0

#: Kafka's ``TransactionState`` ids, as written in ``transaction_status``.
EMPTY = 0
ONGOING = 1
PREPARE_COMMIT = 2
PREPARE_ABORT = 3
COMPLETE_COMMIT = 4
COMPLETE_ABORT = 5
DEAD = 6
PREPARE_EPOCH_FENCE = 7
STATE_NAMES = {EMPTY: "Empty", ONGOING: "Ongoing", PREPARE_COMMIT: "PrepareCommit",
               PREPARE_ABORT: "PrepareAbort", COMPLETE_COMMIT: "CompleteCommit",
               COMPLETE_ABORT: "CompleteAbort", DEAD: "Dead",
               PREPARE_EPOCH_FENCE: "PrepareEpochFence"}

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True)
class TransactionLogValue:
    """One transactional id's state: its producer id and epoch, the transaction timeout, the
    transaction's status and partitions (``((topic, partition), ...)``, sorted), and times
    (ms since the epoch; ``start_timestamp_ms`` -1 when no transaction was started)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, int], ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int = -1


def encode_key(transactional_id: str) -> bytes:
    """The record key bytes for ``transactional_id`` (version 0)."""
    return _INT16.pack(KEY_VERSION) + _string(transactional_id, "transactional_id")


def encode_value(value: TransactionLogValue) -> bytes:
    """The record value bytes of ``value`` (version 0). ValueError for an Empty state with
    partitions (Kafka's IllegalStateException) or an unknown status."""
    if value.status not in STATE_NAMES:
        raise ValueError(f"unknown transaction status {value.status}")
    parts = [_INT16.pack(VALUE_VERSION), _INT64.pack(value.producer_id),
             _INT16.pack(value.producer_epoch), _INT32.pack(value.timeout_ms),
             _INT8.pack(value.status)]
    if value.status == EMPTY:
        if value.partitions:
            raise ValueError("an Empty transaction state has no partitions")
        parts.append(_INT32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        parts.append(_INT32.pack(len(by_topic)))
        for topic, ids in by_topic.items():
            parts += [_string(topic, "topic"), _INT32.pack(len(ids))]
            parts += [_INT32.pack(p) for p in ids]
    parts += [_INT64.pack(value.last_update_timestamp_ms),
              _INT64.pack(value.start_timestamp_ms)]
    return b"".join(parts)


def key_version(data: bytes | bytearray | memoryview) -> int:
    """The int16 version a ``__transaction_state`` key starts with. CorruptRecordError when
    it has fewer than 2 bytes (Kafka's ``readShort`` underflows and the load fails)."""
    return _Reader(data, "transaction log key").unpack(_INT16)


def decode_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id of a ``__transaction_state`` key. CorruptRecordError for an
    unknown version or malformed bytes."""
    reader = _Reader(data, "transaction log key")
    version = reader.unpack(_INT16)
    if version != KEY_VERSION:
        raise reader.fail(f"unknown transaction log key version {version}")
    return reader.string("transactional_id")


def decode_value(data: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """Decode a value (version 0); None for a tombstone (the id expired). CorruptRecordError
    for an unknown version or status, or malformed bytes."""
    if data is None:
        return None
    reader = _Reader(data, "transaction log value")
    version = reader.unpack(_INT16)
    if version != VALUE_VERSION:
        raise reader.fail(f"unknown transaction log value version {version}")
    producer_id = reader.unpack(_INT64)
    producer_epoch = reader.unpack(_INT16)
    timeout_ms = reader.unpack(_INT32)
    status = reader.unpack(_INT8)
    if status not in STATE_NAMES:
        raise reader.fail(f"unknown transaction status {status}")
    partitions: list[tuple[str, int]] = []
    topic_count = reader.unpack(_INT32)
    for _ in range(max(0, topic_count)):
        topic = reader.string("topic")
        count = reader.unpack(_INT32)
        if count < 0 or count > len(reader.data):
            raise reader.fail(f"bad partition count {count}")
        partitions += [(topic, reader.unpack(_INT32)) for _ in range(count)]
    last_update = reader.unpack(_INT64)
    start = reader.unpack(_INT64)
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, status,
                               tuple(sorted(partitions)), last_update, start)


def partition_for_transactional_id(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition holding ``transactional_id``:
    ``Utils.abs(transactionalId.hashCode()) % num_partitions``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return java_abs(java_string_hash(transactional_id)) % num_partitions
