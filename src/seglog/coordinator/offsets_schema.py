"""The bytes of ``__consumer_offsets`` records: Kafka's group-coordinator key and value schemas.

Committed offsets are records in the compacted topic ``__consumer_offsets``; the record key
says what the record is about and the value holds the state. Every key and value starts with
an int16 version:

* key version 0 or 1: ``OffsetCommitKey`` (group string, topic string, partition int32);
  Kafka writes version 1;
* key version 2: ``GroupMetadataKey`` (group string); its value (members, generation) is kept
  as raw bytes here;
* key versions 3 and up: records of newer group types (KIP-848, share groups); decoded as
  :class:`UnknownKey` so a reader can skip them, as Kafka's loader skips unknown types (and
  so is any negative version: Kafka's ``readMessageKey`` knows only 0-2).

``OffsetCommitValue`` versions (Kafka writes 3; reads 0-4):

====  ==========================================================================
v0    offset int64, metadata string, commit_timestamp int64
v1    offset, metadata, commit_timestamp, expire_timestamp int64
v2    offset, metadata, commit_timestamp
v3    offset, leader_epoch int32, metadata, commit_timestamp
v4    v3 as a flexible version: compact string (uvarint length+1), then tagged fields
====  ==========================================================================

Strings in versions 0-3 are an int16 length and UTF-8 bytes. A record with a null value is a
tombstone: the committed offset was deleted. Fields a version does not have are dropped on
encode, as Kafka drops "ignorable" fields. Bytes after the last field are ignored, as Kafka
ignores them. Malformed bytes raise :class:`~seglog.errors.CorruptRecordError` (reason
``invalid records``). Sources: ``group-coordinator/src/main/resources/common/message/
OffsetCommitKey.json``, ``OffsetCommitValue.json``, ``GroupMetadataKey.json``;
``GroupCoordinatorService.partitionFor`` (``Utils.abs(groupId.hashCode()) % n``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CorruptRecordError, InvalidRecordError
from ..format import REASON_BAD_RECORDS

#: The internal topic and Kafka's default partition count (``offsets.topic.num.partitions``).
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS_DEFAULT = 50

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSIONS = range(0, 5)
_FLEXIBLE_VALUE_VERSION = 4
_STRING_BYTES_MAX = 0x7FFF

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True)
class OffsetCommitKey:
    """Key of a committed offset: which group's position in which partition (key v0/v1)."""

    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION


@dataclass(frozen=True)
class GroupMetadataKey:
    """Key of a group's membership record (key v2); its value is opaque here."""

    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclass(frozen=True)
class UnknownKey:
    """A key of a record type this module does not decode (key version 3 and up)."""

    version: int
    payload: bytes


@dataclass(frozen=True)
class OffsetCommitValue:
    """A committed offset: the next offset to read, with its leader epoch, metadata and times.

    ``leader_epoch`` is -1 when unknown (and in versions < 3); ``expire_timestamp_ms`` exists
    only in version 1 (-1 otherwise). ``tagged_fields`` holds version 4's tagged fields as
    ``(tag, raw bytes)`` pairs, kept for a faithful round trip.
    """

    offset: int
    commit_timestamp_ms: int
    leader_epoch: int = -1
    metadata: str = ""
    expire_timestamp_ms: int = -1
    version: int = OFFSET_COMMIT_VALUE_VERSION
    tagged_fields: tuple[tuple[int, bytes], ...] = ()


# --- writing ------------------------------------------------------------------------------------


def encode_string(text: str, field: str, *, compact: bool = False) -> bytes:
    """``text`` as Kafka's STRING (int16 length, UTF-8) or, ``compact``, COMPACT_STRING
    (unsigned varint length + 1). InvalidRecordError naming ``field`` when it is longer than
    32767 bytes. Shared with :mod:`seglog.coordinator.txn_schema`."""
    data = text.encode("utf-8")
    if len(data) > _STRING_BYTES_MAX:
        raise InvalidRecordError(f"'{field}' field is too long to be serialized "
                                 f"({len(data)} > {_STRING_BYTES_MAX} bytes)")
    if compact:
        return encode_uvarint(len(data) + 1) + data
    return _INT16.pack(len(data)) + data


def encode_uvarint(value: int) -> bytes:
    """``value`` (>= 0) as Kafka's UNSIGNED_VARINT (7 bits a byte, low first)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    """The record key bytes of ``key`` (version prefix included)."""
    if isinstance(key, OffsetCommitKey):
        if key.version not in (0, 1):
            raise ValueError(f"OffsetCommitKey version must be 0 or 1, got {key.version}")
        return (_INT16.pack(key.version) + encode_string(key.group, "group")
                + encode_string(key.topic, "topic") + _INT32.pack(key.partition))
    if isinstance(key, GroupMetadataKey):
        if key.version != GROUP_METADATA_KEY_VERSION:
            raise ValueError(f"GroupMetadataKey version must be 2, got {key.version}")
        return _INT16.pack(key.version) + encode_string(key.group, "group")
    raise TypeError(f"cannot encode {type(key).__name__} as an offsets-topic key")


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """The record value bytes of ``value`` in ``value.version`` (0-4)."""
    version = value.version
    if version not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise ValueError(f"OffsetCommitValue version must be 0-4, got {version}")
    flexible = version >= _FLEXIBLE_VALUE_VERSION
    parts = [_INT16.pack(version), _INT64.pack(value.offset)]
    if version >= 3:
        parts.append(_INT32.pack(value.leader_epoch))
    parts.append(encode_string(value.metadata, "metadata", compact=flexible))
    parts.append(_INT64.pack(value.commit_timestamp_ms))
    if version == 1:
        parts.append(_INT64.pack(value.expire_timestamp_ms))
    if flexible:
        tags = sorted(value.tagged_fields)
        parts.append(encode_uvarint(len(tags)))
        for tag, raw in tags:
            parts += [encode_uvarint(tag), encode_uvarint(len(raw)), bytes(raw)]
    return b"".join(parts)


def offset_commit_record(group: str, topic: str, partition: int, offset: int, *,
                         commit_timestamp_ms: int, leader_epoch: int = -1,
                         metadata: str = "") -> tuple[bytes, bytes]:
    """``(key, value)`` bytes of a commit, in the versions Kafka writes (key 1, value 3)."""
    key = encode_key(OffsetCommitKey(group, topic, partition))
    value = encode_offset_commit_value(OffsetCommitValue(
        offset=offset, commit_timestamp_ms=commit_timestamp_ms, leader_epoch=leader_epoch,
        metadata=metadata))
    return key, value


def offset_tombstone(group: str, topic: str, partition: int) -> tuple[bytes, None]:
    """``(key, None)``: the record that deletes a committed offset (compaction drops it)."""
    return encode_key(OffsetCommitKey(group, topic, partition)), None


# --- reading ------------------------------------------------------------------------------------


class SchemaReader:
    """A bounds-checked big-endian reader over one record's key or value (``what`` names it
    in errors). Shared with :mod:`seglog.coordinator.txn_schema`."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str):
        self.data = bytes(data)
        self.position = 0
        self.what = what

    def fail(self, why: str) -> CorruptRecordError:
        return CorruptRecordError(f"invalid {self.what}: {why} at byte {self.position}",
                                  reason=REASON_BAD_RECORDS)

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > len(self.data):
            raise self.fail(f"needs {count} bytes, {len(self.data) - self.position} left")
        chunk = self.data[self.position:self.position + count]
        self.position += count
        return chunk

    def unpack(self, fmt: struct.Struct) -> int:
        return fmt.unpack(self.take(fmt.size))[0]

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):  # at most 5 bytes for an unsigned 32-bit varint
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise self.fail("varint longer than 5 bytes")

    def string(self, field: str, *, compact: bool = False) -> str:
        length = self.uvarint() - 1 if compact else self.unpack(_INT16)
        if length < 0:
            raise self.fail(f"non-nullable field {field} was serialized as null")
        if length > _STRING_BYTES_MAX:
            raise self.fail(f"string field {field} had invalid length {length}")
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"string field {field} is not UTF-8") from None


def decode_key(data: bytes | bytearray | memoryview) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    """Decode a ``__consumer_offsets`` record key by its version (see the module docstring).

    Any version other than 0-2 (negative ones included) is an :class:`UnknownKey`, as
    Kafka's ``readMessageKey`` returns for every version it does not know, so a loader can
    skip it. Raises CorruptRecordError for truncated or malformed bytes.
    """
    reader = SchemaReader(data, "offsets-topic key")
    version = reader.unpack(_INT16)
    if version in (0, 1):
        group = reader.string("group")
        topic = reader.string("topic")
        return OffsetCommitKey(group, topic, reader.unpack(_INT32), version=version)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.string("group"), version=version)
    return UnknownKey(version, bytes(reader.data[reader.position:]))


def decode_offset_commit_value(data: bytes | bytearray | memoryview | None) -> OffsetCommitValue | None:
    """Decode an offset-commit record value (versions 0-4); None for a tombstone (None value).

    Raises CorruptRecordError for an unknown version or truncated / malformed bytes.
    """
    if data is None:
        return None
    reader = SchemaReader(data, "offset commit value")
    version = reader.unpack(_INT16)
    if version not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise reader.fail(f"unknown offset message version {version}")
    flexible = version >= _FLEXIBLE_VALUE_VERSION
    offset = reader.unpack(_INT64)
    leader_epoch = reader.unpack(_INT32) if version >= 3 else -1
    metadata = reader.string("metadata", compact=flexible)
    commit_timestamp_ms = reader.unpack(_INT64)
    expire_timestamp_ms = reader.unpack(_INT64) if version == 1 else -1
    tagged: list[tuple[int, bytes]] = []
    if flexible:
        for _ in range(reader.uvarint()):
            tag = reader.uvarint()
            tagged.append((tag, reader.take(reader.uvarint())))
    return OffsetCommitValue(offset=offset, commit_timestamp_ms=commit_timestamp_ms,
                             leader_epoch=leader_epoch, metadata=metadata,
                             expire_timestamp_ms=expire_timestamp_ms, version=version,
                             tagged_fields=tuple(tagged))


# --- which offsets partition holds a group ------------------------------------------------------


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    as a signed 32-bit int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(number: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` of a Java int, except that ``-2**31`` maps to 0."""
    return 0 if number == -(2**31) else abs(number)


def offsets_partition_for_group(group_id: str,
                                num_partitions: int = OFFSETS_TOPIC_PARTITIONS_DEFAULT) -> int:
    """The ``__consumer_offsets`` partition holding ``group_id``'s records (and coordinator):
    ``Utils.abs(groupId.hashCode()) % num_partitions``. Note: not murmur2."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return java_abs(java_string_hash(group_id)) % num_partitions
