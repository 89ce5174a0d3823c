"""The bytes of ``__share_group_state`` records: Kafka 4.4's share-coordinator records.

The share coordinator (KIP-932) keeps the state of every share-partition (a share group's
view of one topic partition: its start offset, state epoch, leader epoch and the delivery
state of the in-flight offsets) in the compacted internal topic ``__share_group_state``.
Kafka 4.4's formats (``share-coordinator/src/main/resources/common/message/Share*.json``):
a key is an int16 record type followed by the key's fields, not flexible (int16-length
string, 16-byte uuid, int32); a value is an int16 version (0) followed by its fields in the
flexible encoding (compact arrays, tagged fields):

==== =============================== =========================================================
type key (GroupId, TopicId,          value (version 0)
     Partition)
==== =============================== =========================================================
0    ShareSnapshotKey                SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset,
                                     CreateTimestamp, WriteTimestamp, StateBatches
                                     [(FirstOffset, LastOffset, DeliveryState int8,
                                     DeliveryCount int16)]; tagged 0: DeliveryCompleteCount
                                     (KIP-1226, default -1, written only when not -1)
1    ShareUpdateKey                  SnapshotEpoch, LeaderEpoch, StartOffset, StateBatches;
                                     tagged 0: DeliveryCompleteCount
==== =============================== =========================================================

A snapshot holds the whole state of a share-partition; an update holds only the batches
that changed since (the coordinator merges them over the last snapshot, see
:mod:`seglog.coordinator.share_coordinator`). A null value under a snapshot key is the
share-partition's tombstone (its state was deleted). Kafka's ``kafka-dump-log
--share-group-state-decoder`` reads these bytes (``tests/kafka``).

Also here: :func:`share_state_partition` (which partition of ``__share_group_state`` holds a
share-partition). The persisted form of a share-partition, :class:`StateBatch` and
:class:`ShareState`, is :mod:`seglog.coordinator.share_partition`'s (re-exported). A leaf: it
knows nothing of storage.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .offsets_schema import (SchemaReader, encode_string, encode_uvarint, java_abs,
                             java_string_hash)
from .share_partition import ShareState, StateBatch
from ..errors import CorruptRecordError
from ..format import REASON_BAD_RECORDS
from ..storage.checkpoints import uuid_to_kafka_str

__all__ = ["KEY_TYPES", "SHARE_SNAPSHOT", "SHARE_STATE_TOPIC", "SHARE_UPDATE", "ShareSnapshotValue",
           "ShareState", "ShareStateKey", "ShareUpdateValue", "StateBatch",
           "coordinator_key", "decode_key", "decode_value", "encode_key",
           "encode_snapshot_value", "encode_update_value", "share_state_partition"]

#: Kafka's ``Topic.SHARE_GROUP_STATE_TOPIC_NAME``.
SHARE_STATE_TOPIC = "__share_group_state"
#: Record types (key versions): Kafka's ``CoordinatorRecordType`` of the share coordinator.
SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
KEY_TYPES = frozenset({SHARE_SNAPSHOT, SHARE_UPDATE})
#: The one value version of both records.
VALUE_VERSION = 0

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")
_DELIVERY_COMPLETE_COUNT_TAG = 0


@dataclass(frozen=True)
class ShareStateKey:
    """The key of a share-coordinator record: its ``record_type`` (:data:`SHARE_SNAPSHOT` or
    :data:`SHARE_UPDATE`) and the share-partition (``group_id``, ``topic_id``,
    ``partition``)."""

    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareSnapshotValue:
    """A ``ShareSnapshotValue`` (version 0): the whole state of a share-partition."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp_ms: int
    write_timestamp_ms: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ShareUpdateValue:
    """A ``ShareUpdateValue`` (version 0): the batches that changed since the snapshot of
    ``snapshot_epoch`` (``start_offset`` -1: unchanged)."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


# --- placement ------------------------------------------------------------------------------


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``"group:topicId:partition"`` with
    the topic id as Kafka prints it (base64url); FindCoordinator key type 2 names it."""
    return f"{group_id}:{uuid_to_kafka_str(topic_id)}:{partition}"


def share_state_partition(group_id: str, topic_id: uuid.UUID, partition: int,
                          num_partitions: int) -> int:
    """The ``__share_group_state`` partition holding the share-partition's state (and so its
    share coordinator): Kafka's ``Utils.abs(key.asCoordinatorKey().hashCode()) %
    numPartitions`` (Java ``String.hashCode``, not murmur2)."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    key = coordinator_key(group_id, topic_id, partition)
    return java_abs(java_string_hash(key)) % num_partitions


# --- keys -----------------------------------------------------------------------------------


def encode_key(record_type: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    """The key bytes of a ShareSnapshot (0) or ShareUpdate (1) record."""
    if record_type not in KEY_TYPES:
        raise ValueError(f"not a share-coordinator record type: {record_type}")
    return (_INT16.pack(record_type) + encode_string(group_id, "groupId") + topic_id.bytes
            + _INT32.pack(partition))


def decode_key(data: bytes | bytearray | memoryview) -> ShareStateKey:
    """The :class:`ShareStateKey` of ``data``; CorruptRecordError when it does not parse or
    its type is not 0 or 1."""
    reader = SchemaReader(data, "share coordinator record key")
    record_type = reader.unpack(_INT16)
    if record_type not in KEY_TYPES:
        raise reader.fail(f"unknown record type {record_type}")
    group_id = reader.string("groupId")
    topic_id = uuid.UUID(bytes=reader.take(16))
    partition = reader.unpack(_INT32)
    return ShareStateKey(record_type, group_id, topic_id, partition)


# --- values ---------------------------------------------------------------------------------


def _batches(batches: tuple[StateBatch, ...]) -> bytes:
    out = [encode_uvarint(len(batches) + 1)]
    for b in batches:
        out.append(_BATCH.pack(b.first_offset, b.last_offset, b.delivery_state,
                               b.delivery_count))
        out.append(b"\x00")  # the batch's tagged fields: none
    return b"".join(out)


def _tagged(delivery_complete_count: int) -> bytes:
    if delivery_complete_count == -1:  # the default is not written
        return b"\x00"
    return (encode_uvarint(1) + encode_uvarint(_DELIVERY_COMPLETE_COUNT_TAG)
            + encode_uvarint(_INT32.size) + _INT32.pack(delivery_complete_count))


def encode_snapshot_value(value: ShareSnapshotValue) -> bytes:
    """The value bytes of a ShareSnapshot record (version 0)."""
    return (_INT16.pack(VALUE_VERSION)
            + struct.pack(">iiiqqq", value.snapshot_epoch, value.state_epoch,
                          value.leader_epoch, value.start_offset, value.create_timestamp_ms,
                          value.write_timestamp_ms)
            + _batches(value.batches) + _tagged(value.delivery_complete_count))


def encode_update_value(value: ShareUpdateValue) -> bytes:
    """The value bytes of a ShareUpdate record (version 0)."""
    return (_INT16.pack(VALUE_VERSION)
            + struct.pack(">iiq", value.snapshot_epoch, value.leader_epoch, value.start_offset)
            + _batches(value.batches) + _tagged(value.delivery_complete_count))


def _skip_tags(reader: SchemaReader) -> dict[int, bytes]:
    found = {}
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        found[tag] = reader.take(reader.uvarint())
    return found


def _read_batches(reader: SchemaReader) -> tuple[StateBatch, ...]:
    count = reader.uvarint() - 1
    if count < 0:
        raise reader.fail("non-nullable field stateBatches was serialized as null")
    batches = []
    for _ in range(count):
        first, last, state, delivered = _BATCH.unpack(reader.take(_BATCH.size))
        _skip_tags(reader)
        batches.append(StateBatch(first, last, state, delivered))
    return tuple(batches)


def _delivery_complete_count(reader: SchemaReader) -> int:
    raw = _skip_tags(reader).get(_DELIVERY_COMPLETE_COUNT_TAG)
    if raw is None:
        return -1
    if len(raw) != _INT32.size:
        raise reader.fail("tagged field deliveryCompleteCount is not 4 bytes")
    count: int = _INT32.unpack(raw)[0]
    return count


def decode_value(record_type: int, data: bytes | bytearray | memoryview
                 ) -> ShareSnapshotValue | ShareUpdateValue:
    """The value of a record of ``record_type``; CorruptRecordError when ``data`` does not
    parse or has another version than 0 (Kafka's reader refuses it likewise)."""
    what = "ShareSnapshotValue" if record_type == SHARE_SNAPSHOT else "ShareUpdateValue"
    reader = SchemaReader(data, what)
    version = reader.unpack(_INT16)
    if version != VALUE_VERSION:
        raise CorruptRecordError(f"unknown {what} version {version}",
                                 reason=REASON_BAD_RECORDS)
    if record_type == SHARE_SNAPSHOT:
        snapshot_epoch, state_epoch, leader_epoch, start, created, written = struct.unpack(
            ">iiiqqq", reader.take(36))
        batches = _read_batches(reader)
        return ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start, created,
                                  written, batches, _delivery_complete_count(reader))
    if record_type == SHARE_UPDATE:
        snapshot_epoch, leader_epoch, start = struct.unpack(">iiq", reader.take(16))
        batches = _read_batches(reader)
        return ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches,
                                _delivery_complete_count(reader))
    raise CorruptRecordError(f"unknown share coordinator record type {record_type}",
                             reason=REASON_BAD_RECORDS)
