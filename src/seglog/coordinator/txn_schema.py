"""The bytes of ``__transaction_state`` records: Kafka's transaction-log key and value schemas.

The transaction coordinator keeps each transactional id's state as records in the compacted
internal topic ``__transaction_state``: the key names the transactional id, the value holds
its producer id, epoch and the state of its current transaction, last value per key winning.
Every key and value starts with an int16 version.

* ``TransactionLogKey`` version 0: ``transactional_id`` string.
* ``TransactionLogValue`` versions 0 and 1, the same fields in the same order:

  ====================================  =====================================================
  producer_id int64
  producer_epoch int16
  transaction_timeout_ms int32
  transaction_status int8               :data:`EMPTY` .. :data:`PREPARE_EPOCH_FENCE`
  transaction_partitions                nullable array of (topic string, partition_ids
                                        array of int32); null when the state is Empty
  transaction_last_update_timestamp_ms int64
  transaction_start_timestamp_ms int64  -1 when no transaction was started
  ====================================  =====================================================

  Version 0 writes a string as an int16 length and UTF-8 bytes, an array as an int32 count
  (-1: null). Version 1 is the first *flexible* version: a string is an unsigned varint of
  length + 1, an array an unsigned varint of count + 1 (0: null), and every struct (the value
  and each ``transaction_partitions`` entry) ends with its tagged fields: an unsigned varint
  count, then per field an unsigned varint tag, an unsigned varint size in bytes and the
  bytes, in increasing tag order. A tagged field is written only when it differs from its
  default. The value's tagged fields (:data:`TAGGED_FIELDS`):

  ===  ==========================  =====  =======  =========================================
  tag  field                       type   default  meaning
  ===  ==========================  =====  =======  =========================================
  0    previous_producer_id        int64  -1       producer id of the last committed txn
  1    next_producer_id            int64  -1       producer id already sent to the client
                                                   for after this transaction (epoch
                                                   exhausted), taken when it completes
  2    client_transaction_version  int16  0        the client's transaction.version (2:
                                                   the epoch is bumped by every EndTxn)
  3    next_producer_epoch         int16  -1       epoch for ``next_producer_id``; in the
                                                   schema, neither written nor read by
                                                   Kafka 4.1.1 or 4.4.0
  ===  ==========================  =====  =======  =========================================

  Kafka writes version 1 when the cluster's ``transaction.version`` is 1 or more (4.x formats
  a cluster at 2), else version 0 (``TransactionVersion.transactionLogValueVersion``), and
  reads both. Unknown tags are kept as raw
  bytes (:attr:`TransactionLogValue.unknown_tagged_fields`) and written back.

**What seglog writes**: version 0 (:data:`VALUE_VERSION`) for every state its coordinator
starts. It bumps epochs as Kafka does for a client below ``transaction.version`` 2 (on
InitProducerId, not on every EndTxn), so of version 1's tagged fields it would only ever
write defaults; version 0 says the same in fewer bytes, and every Kafka since 0.11 reads it
(a 4.x broker adopting the directory included). The one exception: a state loaded from
Kafka's version 1 is written back in version 1, tagged fields kept, until a seglog producer
initialises the id (:mod:`seglog.coordinator.transaction`). :func:`encode_value` writes either
version (``value.version``).

Malformed bytes raise :class:`~seglog.errors.CorruptRecordError` (reason ``invalid
records``), never ``struct.error`` or ``IndexError``: truncated fields, a varint longer than
5 bytes, a string or array or tagged field longer than the bytes left, an array of more than
:data:`COLLECTION_COUNT_MAX` entries or more than :data:`TAGGED_FIELD_COUNT_MAX` tagged
fields (Kafka's generated readers' limits), a null where the schema has no null, a known tag
whose size is not its type's (Kafka would read the type's bytes and go on misaligned), an
unknown version or status. Bytes after the last field are ignored, as Kafka ignores them. A
null ``transaction_partitions`` decodes as no partitions, in both versions (Kafka's loader
reads it so for an Empty state and fails on a ``NullPointerException`` for any other; seglog
has always read it as empty).

Sources: ``transaction-coordinator/src/main/resources/common/message/TransactionLogKey.json``,
``TransactionLogValue.json`` (as shipped in the 4.1.1 and 4.4.0 jars); the generated
``TransactionLogValue.read`` / ``write``; ``TransactionLog.valueToBytes`` /
``TransactionLog.read``; ``TransactionMetadata.prepareComplete``; ``TransactionState`` ids;
``TransactionStateManager.partitionFor`` (``Utils.abs(transactionalId.hashCode()) % n``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from .offsets_schema import (
    SchemaReader,
    encode_string,
    encode_uvarint,
    java_abs,
    java_string_hash,
)

#: The internal topic and Kafka's default partition count
#: (``transaction.state.log.num.partitions``).
TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_PARTITIONS_DEFAULT = 50

KEY_VERSION = 0
#: The value version seglog writes (see the module docstring), and the versions it reads.
VALUE_VERSION = 0
VALUE_VERSIONS = range(0, 2)
FLEXIBLE_VALUE_VERSION = 1

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

#: Limits of Kafka's generated readers: entries of one array, tagged fields of one struct.
COLLECTION_COUNT_MAX = 1_000_000
TAGGED_FIELD_COUNT_MAX = 10_000

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class _TaggedField(NamedTuple):
    """One known tagged field of the value: its tag, attribute name, type and default."""

    tag: int
    name: str
    fmt: struct.Struct
    default: int


#: The value's tagged fields (version 1), in tag order.
TAGGED_FIELDS = (
    _TaggedField(0, "previous_producer_id", _INT64, -1),
    _TaggedField(1, "next_producer_id", _INT64, -1),
    _TaggedField(2, "client_transaction_version", _INT16, 0),
    _TaggedField(3, "next_producer_epoch", _INT16, -1),
)
_TAGGED_FIELD_BY_TAG = {field.tag: field for field in TAGGED_FIELDS}
assert [f.tag for f in TAGGED_FIELDS] == sorted(_TAGGED_FIELD_BY_TAG)


@dataclass(frozen=True)
class TransactionLogValue:
    """One transactional id's state: its producer id and epoch, the transaction timeout, the
    transaction's status and partitions (``((topic, partition), ...)``, sorted), and times
    (ms since the epoch; ``start_timestamp_ms`` -1 when no transaction was started).

    The fields after ``start_timestamp_ms`` exist in version 1 only (the tagged fields of the
    module docstring, at their defaults in version 0); ``version`` is the version the value was
    read in or is to be written in; ``unknown_tagged_fields`` holds version 1's tags this
    module does not know, as ``(tag, raw bytes)`` pairs in the order read.
    """

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, int], ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1
    version: int = VALUE_VERSION
    unknown_tagged_fields: tuple[tuple[int, bytes], ...] = ()


def encode_key(transactional_id: str) -> bytes:
    """The record key bytes for ``transactional_id`` (version 0)."""
    return _INT16.pack(KEY_VERSION) + encode_string(transactional_id, "transactional_id")


def encode_value(value: TransactionLogValue) -> bytes:
    """The record value bytes of ``value`` in ``value.version`` (0 or 1; topics sorted by
    name). ValueError for another version, an unknown status, an Empty state with partitions
    (Kafka's IllegalStateException), a tagged field other than its default in version 0
    (Kafka's UnsupportedVersionException), or an unknown tag that is a known one or repeated.
    """
    version = value.version
    if version not in VALUE_VERSIONS:
        raise ValueError(f"TransactionLogValue version must be 0 or 1, got {version}")
    if value.status not in STATE_NAMES:
        raise ValueError(f"unknown transaction status {value.status}")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    parts = [_INT16.pack(version), _INT64.pack(value.producer_id),
             _INT16.pack(value.producer_epoch), _INT32.pack(value.timeout_ms),
             _INT8.pack(value.status)]
    if value.status == EMPTY:
        if value.partitions:
            raise ValueError("an Empty transaction state has no partitions")
        parts.append(encode_uvarint(0) if flexible else _INT32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        parts.append(_count_bytes(len(by_topic), flexible=flexible))
        for topic, ids in by_topic.items():
            parts += [encode_string(topic, "topic", compact=flexible),
                      _count_bytes(len(ids), flexible=flexible)]
            parts += [_INT32.pack(p) for p in ids]
            if flexible:
                parts.append(encode_uvarint(0))  # the partition entry's tagged fields: none
    parts += [_INT64.pack(value.last_update_timestamp_ms),
              _INT64.pack(value.start_timestamp_ms)]
    tagged = _tagged_fields_to_write(value)
    if flexible:
        parts.append(encode_uvarint(len(tagged)))
        for tag, raw in tagged:
            parts += [encode_uvarint(tag), encode_uvarint(len(raw)), raw]
    elif tagged:
        raise ValueError(f"TransactionLogValue version 0 has no tagged fields, got tags "
                         f"{[tag for tag, _ in tagged]} (fields of version 1 must keep "
                         "their defaults)")
    return b"".join(parts)


def _count_bytes(count: int, *, flexible: bool) -> bytes:
    return encode_uvarint(count + 1) if flexible else _INT32.pack(count)


def _tagged_fields_to_write(value: TransactionLogValue) -> list[tuple[int, bytes]]:
    """``(tag, bytes)`` of every known tagged field off its default and every unknown one,
    in tag order (as Kafka's generated ``write``)."""
    tagged = [(field.tag, field.fmt.pack(getattr(value, field.name)))
              for field in TAGGED_FIELDS if getattr(value, field.name) != field.default]
    for tag, raw in value.unknown_tagged_fields:
        if tag in _TAGGED_FIELD_BY_TAG:
            raise ValueError(f"unknown tagged field {tag} is a known tag "
                             f"({_TAGGED_FIELD_BY_TAG[tag].name})")
        tagged.append((tag, bytes(raw)))
    tagged.sort(key=lambda item: item[0])
    tags = [tag for tag, _ in tagged]
    if len(set(tags)) != len(tags):
        raise ValueError(f"tagged field repeated: {tags}")
    return tagged


def key_version(data: bytes | bytearray | memoryview) -> int:
    """The int16 version a ``__transaction_state`` key starts with. CorruptRecordError when
    it has fewer than 2 bytes (Kafka's ``readShort`` underflows and the load fails)."""
    return SchemaReader(data, "transaction log key").unpack(_INT16)


def decode_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id of a ``__transaction_state`` key. CorruptRecordError for an
    unknown version or malformed bytes."""
    reader = SchemaReader(data, "transaction log key")
    version = reader.unpack(_INT16)
    if version != KEY_VERSION:
        raise reader.fail(f"unknown transaction log key version {version}")
    return reader.string("transactional_id")


def decode_value(data: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """Decode a value (version 0 or 1); None for a tombstone (the id expired).
    CorruptRecordError for an unknown version or status, or malformed bytes (see the module
    docstring)."""
    if data is None:
        return None
    reader = SchemaReader(data, "transaction log value")
    version = reader.unpack(_INT16)
    if version not in VALUE_VERSIONS:
        raise reader.fail(f"unknown transaction log value version {version}")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    producer_id = reader.unpack(_INT64)
    producer_epoch = reader.unpack(_INT16)
    timeout_ms = reader.unpack(_INT32)
    status = reader.unpack(_INT8)
    if status not in STATE_NAMES:
        raise reader.fail(f"unknown transaction status {status}")
    partitions: list[tuple[str, int]] = []
    topic_count = _read_count(reader, "transaction_partitions", flexible=flexible,
                              nullable=True)
    for _ in range(topic_count):
        topic = reader.string("topic", compact=flexible)
        count = _read_count(reader, "partition_ids", flexible=flexible, nullable=False)
        partitions += [(topic, reader.unpack(_INT32)) for _ in range(count)]
        if flexible:
            _read_tagged_fields(reader)  # the entry has no tagged fields of its own: skipped
    last_update = reader.unpack(_INT64)
    start = reader.unpack(_INT64)
    known = {field.name: field.default for field in TAGGED_FIELDS}
    unknown: list[tuple[int, bytes]] = []
    if flexible:
        for tag, raw in _read_tagged_fields(reader):
            field = _TAGGED_FIELD_BY_TAG.get(tag)
            if field is None:
                unknown.append((tag, raw))
                continue
            if len(raw) != field.fmt.size:
                raise reader.fail(f"tagged field {field.name} (tag {tag}) has {len(raw)} "
                                  f"bytes, its type has {field.fmt.size}")
            known[field.name] = field.fmt.unpack(raw)[0]
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, status,
                               tuple(sorted(partitions)), last_update, start,
                               version=version, unknown_tagged_fields=tuple(unknown), **known)


def _read_count(reader: SchemaReader, field: str, *, flexible: bool, nullable: bool) -> int:
    """An array's entry count (0 for a null ``nullable`` array), checked as Kafka's generated
    readers check it: no null unless ``nullable``, no more entries than bytes left, at most
    :data:`COLLECTION_COUNT_MAX`."""
    count = reader.uvarint() - 1 if flexible else reader.unpack(_INT32)
    if count < 0:
        if nullable:
            return 0
        raise reader.fail(f"non-nullable field {field} was serialized as null")
    remaining = len(reader.data) - reader.position
    if count > remaining:
        raise reader.fail(f"array {field} of {count} entries, only {remaining} bytes left")
    if count > COLLECTION_COUNT_MAX:
        raise reader.fail(f"array {field} of {count} entries, more than "
                          f"{COLLECTION_COUNT_MAX}")
    return count


def _read_tagged_fields(reader: SchemaReader) -> list[tuple[int, bytes]]:
    """A flexible struct's tagged fields, ``[(tag, raw bytes), ...]`` in the order read."""
    count = reader.uvarint()
    remaining = len(reader.data) - reader.position
    if count > remaining:
        raise reader.fail(f"{count} tagged fields, only {remaining} bytes left")
    if count > TAGGED_FIELD_COUNT_MAX:
        raise reader.fail(f"{count} tagged fields, more than {TAGGED_FIELD_COUNT_MAX}")
    fields = []
    for _ in range(count):
        tag = reader.uvarint()
        fields.append((tag, reader.take(reader.uvarint())))
    return fields


def partition_for_transactional_id(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition holding ``transactional_id``:
    ``Utils.abs(transactionalId.hashCode()) % num_partitions``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return java_abs(java_string_hash(transactional_id)) % num_partitions
