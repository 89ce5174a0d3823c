"""The bytes of a classic group's membership record in ``__consumer_offsets``: Kafka's
``GroupMetadataValue``.

The key is :class:`~seglog.coordinator.offsets_schema.GroupMetadataKey` (key version 2, the
group id), encoded by :mod:`seglog.coordinator.offsets_schema`; this module adds the value
that module keeps opaque. A null value is a tombstone (the group was deleted). Versions
(Kafka writes 3, reads 0-4; ``group-coordinator/src/main/resources/common/message/
GroupMetadataValue.json``):

====  ==========================================================================================
v0    protocol_type string, generation int32, protocol string?, leader string?, members[]:
      member_id, client_id, client_host string, session_timeout int32, subscription bytes,
      assignment bytes
v1    + member rebalance_timeout int32 (after client_host)
v2    + current_state_timestamp int64 (after leader)
v3    + member group_instance_id string? (after member_id)
v4    v3 as a flexible version (compact strings and bytes, tagged fields)
====  ==========================================================================================

``?`` marks a nullable string (length -1). Malformed bytes raise
:class:`~seglog.errors.CorruptRecordError` (reason ``invalid records``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .offsets_schema import (GroupMetadataKey, SchemaReader, encode_key, encode_string,
                             encode_uvarint)

__all__ = ["GROUP_METADATA_VALUE_VERSION", "GroupMetadataValue", "MemberMetadata",
           "decode_group_metadata_value", "encode_group_metadata_value", "group_metadata_key"]

GROUP_METADATA_VALUE_VERSION = 3
_VERSIONS = range(0, 5)
_FLEXIBLE = 4
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True)
class MemberMetadata:
    """One member as persisted: ids, client, timeouts (ms), the metadata of the group's
    selected protocol (``subscription``) and its assignment bytes."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout_ms: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMetadataValue:
    """A classic group's state at the end of a rebalance (or when it became empty)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()
    current_state_timestamp_ms: int = -1
    version: int = GROUP_METADATA_VALUE_VERSION
    tagged_fields: tuple = field(default=(), compare=False)


def group_metadata_key(group_id: str) -> bytes:
    """The record key of ``group_id``'s membership record (GroupMetadataKey, version 2)."""
    return encode_key(GroupMetadataKey(group_id))


def _nullable_string(text: str | None, name: str, flexible: bool) -> bytes:
    if text is None:
        return b"\x00" if flexible else _INT16.pack(-1)
    return encode_string(text, name, compact=flexible)


def _bytes(data: bytes, flexible: bool) -> bytes:
    data = bytes(data)
    return (encode_uvarint(len(data) + 1) if flexible else _INT32.pack(len(data))) + data


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """The record value bytes of ``value`` in ``value.version`` (0-4)."""
    version = value.version
    if version not in _VERSIONS:
        raise ValueError(f"GroupMetadataValue version must be 0-4, got {version}")
    flexible = version >= _FLEXIBLE
    parts = [_INT16.pack(version), encode_string(value.protocol_type, "protocolType",
                                                 compact=flexible),
             _INT32.pack(value.generation), _nullable_string(value.protocol, "protocol", flexible),
             _nullable_string(value.leader, "leader", flexible)]
    if version >= 2:
        parts.append(_INT64.pack(value.current_state_timestamp_ms))
    parts.append(encode_uvarint(len(value.members) + 1) if flexible
                 else _INT32.pack(len(value.members)))
    for member in value.members:
        parts.append(encode_string(member.member_id, "memberId", compact=flexible))
        if version >= 3:
            parts.append(_nullable_string(member.group_instance_id, "groupInstanceId", flexible))
        parts.append(encode_string(member.client_id, "clientId", compact=flexible))
        parts.append(encode_string(member.client_host, "clientHost", compact=flexible))
        if version >= 1:
            parts.append(_INT32.pack(member.rebalance_timeout_ms))
        parts.append(_INT32.pack(member.session_timeout_ms))
        parts.append(_bytes(member.subscription, flexible))
        parts.append(_bytes(member.assignment, flexible))
        if flexible:
            parts.append(b"\x00")  # no tagged fields
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)


def _read_nullable(reader: SchemaReader, name: str, flexible: bool) -> str | None:
    if flexible:
        saved = reader.position
        if reader.uvarint() == 0:
            return None
        reader.position = saved
        return reader.string(name, compact=True)
    saved = reader.position
    if reader.unpack(_INT16) == -1:
        return None
    reader.position = saved
    return reader.string(name)


def _read_bytes(reader: SchemaReader, name: str, flexible: bool) -> bytes:
    length = reader.uvarint() - 1 if flexible else reader.unpack(_INT32)
    if length < 0:
        raise reader.fail(f"non-nullable field {name} was serialized as null")
    return reader.take(length)


def _skip_tags(reader: SchemaReader) -> tuple:
    tags = []
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        tags.append((tag, reader.take(reader.uvarint())))
    return tuple(tags)


def decode_group_metadata_value(data: bytes | bytearray | memoryview | None
                                ) -> GroupMetadataValue | None:
    """Decode a membership record value (versions 0-4); None for a tombstone. Raises
    CorruptRecordError for an unknown version or truncated / malformed bytes (member counts
    are bounded by the bytes present, so no absurd count allocates anything)."""
    if data is None:
        return None
    reader = SchemaReader(data, "group metadata value")
    version = reader.unpack(_INT16)
    if version not in _VERSIONS:
        raise reader.fail(f"unknown group metadata version {version}")
    flexible = version >= _FLEXIBLE
    protocol_type = reader.string("protocolType", compact=flexible)
    generation = reader.unpack(_INT32)
    protocol = _read_nullable(reader, "protocol", flexible)
    leader = _read_nullable(reader, "leader", flexible)
    timestamp = reader.unpack(_INT64) if version >= 2 else -1
    count = reader.uvarint() - 1 if flexible else reader.unpack(_INT32)
    if count < 0:
        raise reader.fail("non-nullable field members was serialized as null")
    if count > len(reader.data) - reader.position:
        raise reader.fail(f"{count} members cannot fit in the bytes left")
    members = []
    for _ in range(count):
        member_id = reader.string("memberId", compact=flexible)
        instance_id = _read_nullable(reader, "groupInstanceId", flexible) if version >= 3 else None
        client_id = reader.string("clientId", compact=flexible)
        client_host = reader.string("clientHost", compact=flexible)
        rebalance_timeout_ms = reader.unpack(_INT32) if version >= 1 else -1
        session_timeout_ms = reader.unpack(_INT32)
        subscription = _read_bytes(reader, "subscription", flexible)
        assignment = _read_bytes(reader, "assignment", flexible)
        if flexible:
            _skip_tags(reader)
        members.append(MemberMetadata(member_id, client_id, client_host, session_timeout_ms,
                                      subscription, assignment, rebalance_timeout_ms,
                                      instance_id))
    tags = _skip_tags(reader) if flexible else ()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, tuple(members),
                              timestamp, version, tags)
