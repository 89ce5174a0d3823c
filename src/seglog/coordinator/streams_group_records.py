"""Kafka 4.4's ``__consumer_offsets`` records of a streams group (KIP-1071), bytes for bytes:
the keys and values of ``org.apache.kafka.coordinator.group.generated.StreamsGroup*``.

A key is an int16 record type then the key's fields (not flexible: int16-length strings); a
value is an int16 value version (0) then the value's fields in the flexible encoding (compact
strings and arrays, a tagged-field section after each struct). The record types
(``CoordinatorRecordType``): 17 StreamsGroupMetadata (epoch, metadata hash), 19
StreamsGroupMemberMetadata, 20 StreamsGroupTargetAssignmentMetadata, 21
StreamsGroupTargetAssignmentMember, 22 StreamsGroupCurrentMemberAssignment, 23
StreamsGroupTopology. A None value is the record's tombstone.

:func:`encode_record` / :func:`decode_record` turn :class:`StreamsRecord` values into bytes
and back; tagged fields seglog does not use are skipped when read and not written.
A leaf of the coordinator package: no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptRecordError

__all__ = ["CURRENT_MEMBER_ASSIGNMENT", "GROUP_METADATA", "MEMBER_METADATA",
           "RECORD_TYPES", "StreamsRecord", "TARGET_ASSIGNMENT_MEMBER",
           "TARGET_ASSIGNMENT_METADATA", "TOPOLOGY", "decode_key", "decode_value",
           "encode_key", "encode_value", "group_of_key"]

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_ASSIGNMENT_METADATA = 20
TARGET_ASSIGNMENT_MEMBER = 21
CURRENT_MEMBER_ASSIGNMENT = 22
TOPOLOGY = 23
#: The record types whose keys carry a member id after the group id.
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
RECORD_TYPES = frozenset({GROUP_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA,
                          TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT, TOPOLOGY})

#: Tasks of one kind: ``((subtopology id, (partition, ...)), ...)``.
TaskList = tuple[tuple[str, tuple[int, ...]], ...]
#: A topic of a topology: ``(name, partitions, replication factor, ((key, value), ...))``.
TopicInfoFields = tuple[str, int, int, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class StreamsRecord:
    """One record: its type, group id, member id (None for the group-level types) and the
    value's fields as a dict (None: a tombstone)."""

    record_type: int
    group_id: str
    member_id: str | None
    value: dict[str, Any] | None


# --- writing ----------------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int8(self, v: int) -> None:
        self.parts.append(struct.pack(">b", v))

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def uint16(self, v: int) -> None:
        self.parts.append(struct.pack(">H", v))

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def int64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def string(self, v: str) -> None:  # not flexible: int16 length
        data = v.encode()
        self.int16(len(data))
        self.parts.append(data)

    def cstring(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        data = v.encode()
        self.uvarint(len(data) + 1)
        self.parts.append(data)

    def carray(self, items: Any, write: Any) -> None:
        items = list(items)
        self.uvarint(len(items) + 1)
        for item in items:
            write(item)

    def no_tags(self) -> None:
        self.uvarint(0)

    def tasks(self, tasks: TaskList) -> None:
        def one(task: tuple[str, tuple[int, ...]]) -> None:
            self.cstring(task[0])
            self.carray(task[1], self.int32)
            self.no_tags()
        self.carray(tasks, one)

    def topic_info(self, t: TopicInfoFields) -> None:
        name, partitions, replication_factor, configs = t
        self.cstring(name)
        self.int32(partitions)
        self.int16(replication_factor)

        def kv(pair: tuple[str, str]) -> None:
            self.cstring(pair[0])
            self.cstring(pair[1])
            self.no_tags()
        self.carray(configs, kv)
        self.no_tags()

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    """The key bytes of a record of ``record_type`` for ``group_id`` (and ``member_id``)."""
    w = _Writer()
    w.int16(record_type)
    w.string(group_id)
    if record_type in _MEMBER_KEYS:
        w.string(member_id or "")
    return w.bytes()


def encode_value(record_type: int, value: dict[str, Any] | None) -> bytes | None:
    """The value bytes (version 0) of a record of ``record_type``; None for a tombstone."""
    if value is None:
        return None
    w = _Writer()
    w.int16(0)
    v = value
    if record_type == GROUP_METADATA:
        w.int32(v["epoch"])
        w.int64(v.get("metadata_hash", 0))
    elif record_type == TOPOLOGY:
        w.int32(v["epoch"])

        def subtopology(s: dict[str, Any]) -> None:
            w.cstring(s["subtopology_id"])
            w.carray(s["source_topics"], w.cstring)
            w.carray(s["source_topic_regex"], w.cstring)
            w.carray(s["state_changelog_topics"], w.topic_info)
            w.carray(s["repartition_sink_topics"], w.cstring)
            w.carray(s["repartition_source_topics"], w.topic_info)
            w.carray((), w.int16)  # copartition groups: not kept
            w.no_tags()
        w.carray(v["subtopologies"], subtopology)
    elif record_type == MEMBER_METADATA:
        w.cstring(v.get("instance_id"))
        w.cstring(v.get("rack_id"))
        w.cstring(v["client_id"])
        w.cstring(v["client_host"])
        w.int32(v["rebalance_timeout_ms"])
        w.int32(v["topology_epoch"])
        w.cstring(v["process_id"])
        endpoint = v.get("user_endpoint")
        if endpoint is None:
            w.int8(-1)
        else:
            w.int8(1)
            w.cstring(endpoint[0])
            w.uint16(endpoint[1])
            w.no_tags()

        def kv(pair: tuple[str, str]) -> None:
            w.cstring(pair[0])
            w.cstring(pair[1])
            w.no_tags()
        w.carray(v.get("client_tags", ()), kv)
    elif record_type == TARGET_ASSIGNMENT_METADATA:
        w.int32(v["assignment_epoch"])
    elif record_type == TARGET_ASSIGNMENT_MEMBER:
        for kind in ("active", "standby", "warmup"):
            w.tasks(v[kind])
    elif record_type == CURRENT_MEMBER_ASSIGNMENT:
        w.int32(v["member_epoch"])
        w.int32(v["previous_member_epoch"])
        w.int8(v["state"])
        for kind in ("active", "standby", "warmup", "active_pending_revocation",
                     "standby_pending_revocation", "warmup_pending_revocation"):
            w.tasks(v[kind])
    else:
        raise ValueError(f"not a streams group record type: {record_type}")
    w.no_tags()
    return w.bytes()


# --- reading ----------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptRecordError("a streams group record ends early")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def uint16(self) -> int:
        return int(struct.unpack(">H", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise CorruptRecordError("a varint longer than 5 bytes in a streams group record")

    def string(self) -> str:
        return self._take(self.int16()).decode()

    def cstring(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def cstr(self) -> str:
        found = self.cstring()
        if found is None:
            raise CorruptRecordError("a null string where a streams group record needs one")
        return found

    def carray(self, read: Any) -> list[Any]:
        n = self.uvarint()
        if n - 1 > len(self.data) - self.pos:
            raise CorruptRecordError("an array longer than its streams group record")
        return [read() for _ in range(n - 1)]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def tasks(self) -> TaskList:
        def one() -> tuple[str, tuple[int, ...]]:
            s = self.cstr()
            ps = tuple(self.carray(self.int32))
            self.tags()
            return (s, ps)
        return tuple(self.carray(one))

    def topic_info(self) -> TopicInfoFields:
        name = self.cstr()
        partitions = self.int32()
        replication_factor = self.int16()

        def kv() -> tuple[str, str]:
            pair = (self.cstr(), self.cstr())
            self.tags()
            return pair
        configs = tuple(self.carray(kv))
        self.tags()
        return (name, partitions, replication_factor, configs)


def decode_key(data: bytes | bytearray | memoryview) -> tuple[int, str, str | None] | None:
    """``(record type, group id, member id or None)`` of a streams group record key, None
    for a key of another record type. CorruptRecordError for a malformed one."""
    r = _Reader(data)
    record_type = r.int16()
    if record_type not in RECORD_TYPES:
        return None
    group_id = r.string()
    member_id = r.string() if record_type in _MEMBER_KEYS else None
    return record_type, group_id, member_id


def group_of_key(data: bytes | bytearray | memoryview) -> str | None:
    """The group id of a streams group record key (None for another record type)."""
    decoded = decode_key(data)
    return None if decoded is None else decoded[1]


def decode_value(record_type: int, data: bytes | bytearray | memoryview | None
                 ) -> dict[str, Any] | None:
    """The fields of a value of ``record_type`` (as :func:`encode_value` takes them); None
    for a tombstone. CorruptRecordError for a malformed value or an unknown version."""
    if data is None:
        return None
    r = _Reader(data)
    version = r.int16()
    if version != 0:
        raise CorruptRecordError(f"streams group record type {record_type}: unknown value "
                                 f"version {version}")
    v: dict[str, Any] = {}
    if record_type == GROUP_METADATA:
        v["epoch"] = r.int32()
        v["metadata_hash"] = r.int64()
    elif record_type == TOPOLOGY:
        v["epoch"] = r.int32()

        def subtopology() -> dict[str, Any]:
            s: dict[str, Any] = {"subtopology_id": r.cstr()}
            s["source_topics"] = tuple(r.carray(r.cstr))
            s["source_topic_regex"] = tuple(r.carray(r.cstr))
            s["state_changelog_topics"] = tuple(r.carray(r.topic_info))
            s["repartition_sink_topics"] = tuple(r.carray(r.cstr))
            s["repartition_source_topics"] = tuple(r.carray(r.topic_info))

            def copartition() -> None:
                for _ in range(3):
                    r.carray(r.int16)
                r.tags()
            r.carray(copartition)
            r.tags()
            return s
        v["subtopologies"] = tuple(r.carray(subtopology))
    elif record_type == MEMBER_METADATA:
        v["instance_id"] = r.cstring()
        v["rack_id"] = r.cstring()
        v["client_id"] = r.cstr()
        v["client_host"] = r.cstr()
        v["rebalance_timeout_ms"] = r.int32()
        v["topology_epoch"] = r.int32()
        v["process_id"] = r.cstr()
        if r.int8() < 0:
            v["user_endpoint"] = None
        else:
            host = r.cstr()
            port = r.uint16()
            r.tags()
            v["user_endpoint"] = (host, port)

        def kv() -> tuple[str, str]:
            pair = (r.cstr(), r.cstr())
            r.tags()
            return pair
        v["client_tags"] = tuple(r.carray(kv))
    elif record_type == TARGET_ASSIGNMENT_METADATA:
        v["assignment_epoch"] = r.int32()
    elif record_type == TARGET_ASSIGNMENT_MEMBER:
        for kind in ("active", "standby", "warmup"):
            v[kind] = r.tasks()
    elif record_type == CURRENT_MEMBER_ASSIGNMENT:
        v["member_epoch"] = r.int32()
        v["previous_member_epoch"] = r.int32()
        v["state"] = r.int8()
        for kind in ("active", "standby", "warmup", "active_pending_revocation",
                     "standby_pending_revocation", "warmup_pending_revocation"):
            v[kind] = r.tasks()
    else:
        raise CorruptRecordError(f"not a streams group record type: {record_type}")
    r.tags()
    return v
