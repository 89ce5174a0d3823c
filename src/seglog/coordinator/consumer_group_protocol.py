"""The embedded consumer protocol of classic members in a consumer group (Kafka's
``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``, versions 0-3).

A classic member (JoinGroup/SyncGroup, ``group.protocol=classic``) of a KIP-848 consumer
group names its subscription, owned partitions and rack in its JoinGroup protocol metadata
and receives the assignment the coordinator computed in SyncGroup, encoded here as Kafka's
``ConsumerProtocol`` does. Not flexible: int16 version, int32 array counts, int16 string
lengths, int32 byte lengths (-1: null).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["MAX_VERSION", "Subscription", "decode_assignment", "decode_subscription",
           "encode_assignment",
           "version_of"]

#: The highest ConsumerProtocol version Kafka 4.4 writes (newer ones are read as this).
MAX_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class Subscription(NamedTuple):
    """A decoded ConsumerProtocolSubscription: topics, owned partitions by topic (v1+),
    rack (v3+; None when absent)."""

    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack_id: str | None


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.position = 0

    def _take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise ValueError("truncated consumer protocol metadata")
        out = self.data[self.position:self.position + size]
        self.position += size
        return out

    def int16(self) -> int:
        return int(_INT16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self._take(4))[0])

    def string(self, nullable: bool = False) -> str | None:
        length = self.int16()
        if length < 0:
            if nullable:
                return None
            raise ValueError("null string")
        return self._take(length).decode("utf-8")

    def count(self) -> int:
        count = self.int32()
        if count < 0 or count > len(self.data):
            raise ValueError(f"bad array length {count}")
        return count

    def done(self) -> bool:
        return self.position >= len(self.data)


def version_of(metadata: bytes) -> int:
    """The ConsumerProtocol version ``metadata`` starts with (Kafka's
    ``deserializeVersion``), capped at :data:`MAX_VERSION`; ValueError when too short."""
    if len(metadata) < 2:
        raise ValueError("no consumer protocol version")
    return min(int(_INT16.unpack(metadata[:2])[0]), MAX_VERSION)


def decode_subscription(metadata: bytes) -> Subscription:
    """``metadata`` (a JoinGroup protocol's) as a ConsumerProtocolSubscription; ValueError
    when it does not parse. A later version's extra fields are ignored, as Kafka's reader
    does."""
    reader = _Reader(bytes(metadata))
    version = reader.int16()
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    topics = []
    for _ in range(reader.count()):
        topics.append(str(reader.string()))
    length = reader.int32()  # user data
    if length >= 0:
        reader._take(length)
    owned: dict[str, frozenset[int]] = {}
    rack_id = None
    if version >= 1 and not reader.done():
        for _ in range(reader.count()):
            topic = str(reader.string())
            parts = frozenset(reader.int32() for _ in range(reader.count()))
            owned[topic] = owned.get(topic, frozenset()) | parts
    if version >= 2 and not reader.done():
        reader.int32()  # generation id
    if version >= 3 and not reader.done():
        rack_id = reader.string(nullable=True)
    return Subscription(version, tuple(topics), owned, rack_id)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """A ConsumerProtocolAssignment's partitions by topic (empty bytes: none); ValueError
    when it does not parse."""
    if not data:
        return {}
    reader = _Reader(bytes(data))
    if reader.int16() < 0:
        raise ValueError("bad consumer protocol version")
    out: dict[str, frozenset[int]] = {}
    for _ in range(reader.count()):
        topic = str(reader.string())
        parts = frozenset(reader.int32() for _ in range(reader.count()))
        out[topic] = out.get(topic, frozenset()) | parts
    return out


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _INT16.pack(len(raw)) + raw


def encode_assignment(partitions: dict[str, frozenset[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions`` at ``version`` (no user data)."""
    out = [_INT16.pack(min(version, MAX_VERSION))]
    topics = [t for t in sorted(partitions) if partitions[t]]
    out.append(_INT32.pack(len(topics)))
    for topic in topics:
        out.append(_string(topic))
        parts = sorted(partitions[topic])
        out.append(_INT32.pack(len(parts)))
        out.extend(_INT32.pack(p) for p in parts)
    out.append(_INT32.pack(-1))  # user data: null
    return b"".join(out)
