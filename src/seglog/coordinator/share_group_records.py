"""Kafka 4.4's ``__consumer_offsets`` records of a share group (KIP-932), bytes for bytes:
the keys and values of ``org.apache.kafka.coordinator.group.generated.ShareGroup*``.

A key is an int16 record type then the key's fields (not flexible: int16-length strings); a
value is an int16 value version (0) then the value's fields in the flexible encoding (compact
strings and arrays, a tagged-field section after each struct). The record types
(``CoordinatorRecordType``): 10 ShareGroupMemberMetadata, 11 ShareGroupMetadata (epoch,
metadata hash), 12 ShareGroupTargetAssignmentMetadata, 13 ShareGroupTargetAssignmentMember,
14 ShareGroupCurrentMemberAssignment, 15 ShareGroupStatePartitionMetadata. A None value is
the record's tombstone.

Partitions are ``{topic id: (partition, ...)}``. A leaf of the coordinator package: no I/O.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import CorruptRecordError

__all__ = ["CURRENT_MEMBER_ASSIGNMENT", "GROUP_METADATA", "MEMBER_METADATA",
           "RECORD_TYPES", "STATE_PARTITION_METADATA", "ShareRecord",
           "TARGET_ASSIGNMENT_MEMBER", "TARGET_ASSIGNMENT_METADATA", "TopicPartitions",
           "decode_key", "decode_value", "encode_key", "encode_value"]

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
#: The record types whose keys carry a member id after the group id.
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
RECORD_TYPES = frozenset({MEMBER_METADATA, GROUP_METADATA, TARGET_ASSIGNMENT_METADATA,
                          TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT,
                          STATE_PARTITION_METADATA})

#: ``{topic id: (partition, ...)}``.
TopicPartitions = Mapping[uuid.UUID, tuple[int, ...]]


@dataclass(frozen=True)
class ShareRecord:
    """One record: its type, group id, member id (None for the group-level types) and the
    value's fields as a dict (None: a tombstone)."""

    record_type: int
    group_id: str
    member_id: str | None
    value: dict[str, Any] | None


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def fixed(self, fmt: str, v: int) -> None:
        self.parts.append(struct.pack(fmt, v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def string(self, v: str) -> None:  # not flexible: int16 length
        data = v.encode()
        self.fixed(">h", len(data))
        self.parts.append(data)

    def cstring(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        data = v.encode()
        self.uvarint(len(data) + 1)
        self.parts.append(data)

    def carray(self, items: Any, write: Callable[[Any], None]) -> None:
        items = list(items)
        self.uvarint(len(items) + 1)
        for item in items:
            write(item)

    def int32(self, v: int) -> None:
        self.fixed(">i", v)

    def topic_partitions(self, partitions: TopicPartitions) -> None:
        def one(entry: tuple[uuid.UUID, tuple[int, ...]]) -> None:
            self.parts.append(entry[0].bytes)
            self.carray(sorted(entry[1]), self.int32)
            self.uvarint(0)
        self.carray(sorted(partitions.items(), key=lambda e: str(e[0])), one)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    """The key bytes of a record of ``record_type`` for ``group_id`` (and ``member_id``)."""
    w = _Writer()
    w.fixed(">h", record_type)
    w.string(group_id)
    if record_type in _MEMBER_KEYS:
        w.string(member_id or "")
    return w.bytes()


def encode_value(record_type: int, value: dict[str, Any] | None) -> bytes | None:
    """The value bytes (version 0) of a record of ``record_type``; None for a tombstone.

    Fields: GROUP_METADATA ``epoch``, ``metadata_hash``; MEMBER_METADATA ``rack_id``,
    ``client_id``, ``client_host``, ``subscribed_topic_names``; TARGET_ASSIGNMENT_METADATA
    ``assignment_epoch``, ``assignment_timestamp_ms`` (tag 0, written when not 0);
    TARGET_ASSIGNMENT_MEMBER ``partitions``; CURRENT_MEMBER_ASSIGNMENT ``member_epoch``,
    ``previous_member_epoch``, ``state``, ``partitions``; STATE_PARTITION_METADATA
    ``initializing`` / ``initialized`` (``{topic id: (name, (partition, ...))}``) and
    ``deleting`` (``{topic id: name}``)."""
    if value is None:
        return None
    w = _Writer()
    w.fixed(">h", 0)
    v = value
    tags: list[tuple[int, bytes]] = []
    if record_type == GROUP_METADATA:
        w.int32(v["epoch"])
        w.fixed(">q", v.get("metadata_hash", 0))
    elif record_type == MEMBER_METADATA:
        w.cstring(v.get("rack_id"))
        w.cstring(v["client_id"])
        w.cstring(v["client_host"])
        w.carray(v["subscribed_topic_names"], w.cstring)
    elif record_type == TARGET_ASSIGNMENT_METADATA:
        w.int32(v["assignment_epoch"])
        if v.get("assignment_timestamp_ms", 0):
            tags.append((0, struct.pack(">q", v["assignment_timestamp_ms"])))
    elif record_type == TARGET_ASSIGNMENT_MEMBER:
        w.topic_partitions(v["partitions"])
    elif record_type == CURRENT_MEMBER_ASSIGNMENT:
        w.int32(v["member_epoch"])
        w.int32(v["previous_member_epoch"])
        w.fixed(">b", v["state"])
        w.topic_partitions(v["partitions"])
    elif record_type == STATE_PARTITION_METADATA:
        def info(entry: tuple[uuid.UUID, tuple[str, tuple[int, ...]]]) -> None:
            w.parts.append(entry[0].bytes)
            w.cstring(entry[1][0])
            w.carray(sorted(entry[1][1]), w.int32)
            w.uvarint(0)

        def deleting(entry: tuple[uuid.UUID, str]) -> None:
            w.parts.append(entry[0].bytes)
            w.cstring(entry[1])
            w.uvarint(0)
        for name in ("initializing", "initialized"):
            w.carray(sorted(v[name].items(), key=lambda e: str(e[0])), info)
        w.carray(sorted(v["deleting"].items(), key=lambda e: str(e[0])), deleting)
    else:
        raise ValueError(f"not a share group record type: {record_type}")
    w.uvarint(len(tags))
    for tag, data in tags:
        w.uvarint(tag)
        w.uvarint(len(data))
        w.parts.append(data)
    return w.bytes()


class _Reader:
    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = bytes(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptRecordError("a share group record ends early")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def fixed(self, fmt: str) -> int:
        return int(struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0])

    def int32(self) -> int:
        return self.fixed(">i")

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise CorruptRecordError("a varint longer than 5 bytes in a share group record")

    def string(self) -> str:
        return self.take(self.fixed(">h")).decode()

    def cstring(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def cstr(self) -> str:
        found = self.cstring()
        if found is None:
            raise CorruptRecordError("a null string where a share group record needs one")
        return found

    def carray(self, read: Callable[[], Any]) -> list[Any]:
        n = self.uvarint()
        if n - 1 > len(self.data) - self.pos:
            raise CorruptRecordError("an array longer than its share group record")
        return [read() for _ in range(n - 1)]

    def tags(self) -> dict[int, bytes]:
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self.take(self.uvarint())
        return found

    def topic_id(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def topic_partitions(self) -> dict[uuid.UUID, tuple[int, ...]]:
        def one() -> tuple[uuid.UUID, tuple[int, ...]]:
            topic_id = self.topic_id()
            partitions = tuple(self.carray(self.int32))
            self.tags()
            return topic_id, partitions
        return dict(self.carray(one))


def decode_key(data: bytes | bytearray | memoryview) -> tuple[int, str, str | None] | None:
    """``(record type, group id, member id or None)`` of a share group record key, None for
    a key of another record type. CorruptRecordError for a malformed one."""
    r = _Reader(data)
    record_type = r.fixed(">h")
    if record_type not in RECORD_TYPES:
        return None
    group_id = r.string()
    member_id = r.string() if record_type in _MEMBER_KEYS else None
    return record_type, group_id, member_id


def decode_value(record_type: int, data: bytes | bytearray | memoryview | None
                 ) -> dict[str, Any] | None:
    """The fields of a value of ``record_type`` (as :func:`encode_value` takes them); None
    for a tombstone. CorruptRecordError for a malformed value or an unknown version."""
    if data is None:
        return None
    r = _Reader(data)
    version = r.fixed(">h")
    if version != 0:
        raise CorruptRecordError(f"share group record type {record_type}: unknown value "
                                 f"version {version}")
    v: dict[str, Any] = {}
    if record_type == GROUP_METADATA:
        v["epoch"] = r.int32()
        v["metadata_hash"] = r.fixed(">q")
    elif record_type == MEMBER_METADATA:
        v["rack_id"] = r.cstring()
        v["client_id"] = r.cstr()
        v["client_host"] = r.cstr()
        v["subscribed_topic_names"] = tuple(r.carray(r.cstr))
    elif record_type == TARGET_ASSIGNMENT_METADATA:
        v["assignment_epoch"] = r.int32()
    elif record_type == TARGET_ASSIGNMENT_MEMBER:
        v["partitions"] = r.topic_partitions()
    elif record_type == CURRENT_MEMBER_ASSIGNMENT:
        v["member_epoch"] = r.int32()
        v["previous_member_epoch"] = r.int32()
        v["state"] = r.fixed(">b")
        v["partitions"] = r.topic_partitions()
    elif record_type == STATE_PARTITION_METADATA:
        def info() -> tuple[uuid.UUID, tuple[str, tuple[int, ...]]]:
            topic_id = r.topic_id()
            name = r.cstr()
            partitions = tuple(r.carray(r.int32))
            r.tags()
            return topic_id, (name, partitions)

        def deleting() -> tuple[uuid.UUID, str]:
            topic_id = r.topic_id()
            name = r.cstr()
            r.tags()
            return topic_id, name
        v["initializing"] = dict(r.carray(info))
        v["initialized"] = dict(r.carray(info))
        v["deleting"] = dict(r.carray(deleting))
    else:
        raise CorruptRecordError(f"not a share group record type: {record_type}")
    tags = r.tags()
    if record_type == TARGET_ASSIGNMENT_METADATA:
        raw = tags.get(0)
        v["assignment_timestamp_ms"] = struct.unpack(">q", raw)[0] if raw and len(raw) == 8 \
            else 0
    return v
