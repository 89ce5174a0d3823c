"""The Metadata request body (API key 3, v0-v13) read by hand, its topics deduplicated as they
are read: how a big request is decoded (issue 23).

kio builds one entity object per requested topic: a 12 MB request naming one-letter topics 4
million times is 4 million objects, whose allocation sets off the garbage collector's full
passes and whose decoding holds the interpreter for a second at a time even on a worker
thread (measured: a 1 s pause of every other thread). Read here, a topic is a ``str`` (which
the collector does not track) kept once, in a loop of plain bytecode that lets other threads
run between any two steps.

The layout is Kafka's ``MetadataRequest.json``: topics (nullable from v1; v0's empty array
means every topic), each a topic id (v10+) and a name (nullable from v10); then
allow_auto_topic_creation (v4+), include_cluster_authorized_operations (v8-v10),
include_topic_authorized_operations (v8+); v9+ are flexible (compact arrays and strings, a
tagged-field section after each struct, skipped). Bytes after the body are ignored, as
:func:`seglog.server.protocol.read_request_body` ignores them. Every length is checked
against what remains before it is used.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from ...errors import InvalidRequestError
from ..request_lengths import read_uvarint

__all__ = ["MetadataAsk", "read_metadata_request"]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ZERO_UUID = uuid.UUID(int=0)
_ZERO_BYTES = bytes(16)


@dataclass(frozen=True, slots=True)
class MetadataAsk:
    """What a Metadata request asks: ``topics`` as ``(topic_id, name)`` pairs in request order,
    a name asked by name only once (None: every topic), and its three flags (their defaults
    where the version has no such field: auto-creation allowed, no authorized operations).
    A topic asked by name has topic id None (the wire's zero uuid): a pair of a None and a
    ``str`` is a tuple the garbage collector stops tracking, where millions of pairs holding a
    uuid object each made every full collection walk them all (issue 23)."""

    topics: list[tuple[uuid.UUID | None, str | None]] | None
    allow_auto_topic_creation: bool
    include_cluster_authorized_operations: bool
    include_topic_authorized_operations: bool


def _bad(why: str) -> InvalidRequestError:
    return InvalidRequestError(f"API key 3: malformed request body: {why}")


def read_metadata_request(version: int, body: memoryview) -> MetadataAsk:
    """Decode a Metadata request body of ``version`` (0..13). InvalidRequestError for bytes
    that do not hold one (a length past the end, a null where the version has none, a name
    that is not UTF-8)."""
    flexible = version >= 9
    end = len(body)
    pos = 0

    def need(count: int) -> None:
        if count < 0 or pos + count > end:
            raise _bad("the request ends inside a field")

    if flexible:
        count, pos = read_uvarint(body, pos, end, "Metadata request")
        count -= 1
    else:
        need(4)
        (count,) = _INT32.unpack_from(body, pos)
        pos += 4
    topics: list[tuple[uuid.UUID | None, str | None]] | None
    if count < 0:
        if count != -1 or version < 1:
            raise _bad(f"topics array of length {count}")
        topics = None
    else:
        # Each topic takes at least one byte: a count beyond the bytes left is a lie.
        if count > end - pos:
            raise _bad(f"topics array of {count} entries in {end - pos} bytes")
        topics = []
        seen: set[str] = set()
        ids: dict[bytes, uuid.UUID] = {}  # one object per id, however often it is named
        for _ in range(count):
            topic_id: uuid.UUID | None = None
            if version >= 10:
                need(16)
                raw_id = bytes(body[pos:pos + 16])
                if raw_id != _ZERO_BYTES:
                    topic_id = ids.get(raw_id) or ids.setdefault(raw_id, uuid.UUID(bytes=raw_id))
                pos += 16
            if flexible:
                length, pos = read_uvarint(body, pos, end, "Metadata request")
                length -= 1
            else:
                need(2)
                (length,) = _INT16.unpack_from(body, pos)
                pos += 2
            name: str | None
            if length < 0:
                if length != -1 or version < 10:
                    raise _bad(f"topic name of length {length}")
                name = None
            else:
                need(length)
                try:
                    name = str(body[pos:pos + length], "utf-8")
                except UnicodeDecodeError:
                    raise _bad("a topic name that is not UTF-8") from None
                pos += length
            if flexible:
                pos = _skip_tagged_fields(body, pos, end)
            if name is not None and topic_id is None:
                if name in seen:
                    continue  # Kafka answers a topic once (its request's topics are a set)
                seen.add(name)
            topics.append((topic_id, name))
    allow = True
    include_cluster = include_topic = False
    if version >= 4:
        allow = _bool(body, pos, end)
        pos += 1
    if 8 <= version <= 10:
        include_cluster = _bool(body, pos, end)
        pos += 1
    if version >= 8:
        include_topic = _bool(body, pos, end)
        pos += 1
    if flexible:
        _skip_tagged_fields(body, pos, end)
    return MetadataAsk(topics, allow, include_cluster, include_topic)


def _bool(body: memoryview, pos: int, end: int) -> bool:
    # 0 or 1 only, as kio reads a boolean (the small-body path): one answer whatever the size.
    if pos >= end:
        raise _bad("the request ends inside a field")
    value = body[pos]
    if value > 1:
        raise _bad(f"boolean byte {value}")
    return value == 1


def _skip_tagged_fields(body: memoryview, pos: int, end: int) -> int:
    count, pos = read_uvarint(body, pos, end, "Metadata request")
    for _ in range(count):
        _tag, pos = read_uvarint(body, pos, end, "Metadata request")
        size, pos = read_uvarint(body, pos, end, "Metadata request")
        if pos + size > end:
            raise _bad("the request ends inside a tagged field")
        pos += size
    return pos
