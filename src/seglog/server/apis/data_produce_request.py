"""The Produce request body (API key 0, v3-v13) read by hand: the request every producer sends
thousands of times a second.

The generic path, :func:`seglog.server.protocol.read_request_body` (the field-by-field length
walk of :mod:`seglog.server.request_lengths`, a few Python calls per field, then kio's reader
building frozen dataclasses and copying every batch into a ``bytes``), took 3.2-3.5 µs for a
one-partition v9/v11 request with a 16 KiB batch; this reader 2.0-2.1 µs (issue 27,
``bench/results-issue27-prodcpu.md``), of about 60 µs of broker CPU per such request. Here a
partition's records are a ``memoryview`` of the request frame (no copy; the frame is an
immutable ``bytes``), and every length is checked against what remains before it is used, as
Kafka's generated parser does (``if (arrayLength > _readable.remaining()) throw``): the same
refusals as the generic path (InvalidRequestError, and the connection closes).

The layout is Kafka's ``ProduceRequest.json``: transactional_id (nullable string), acks
(int16), timeout_ms (int32), topic_data (each: name, or topic_id from v13; partition_data,
each: index (int32), records (nullable)); v9+ are flexible (compact arrays, strings and
records, a tagged-field section after every struct: Produce defines no tagged fields, so
their contents are skipped, as Kafka keeps unknown tagged fields and goes on). Bytes after the
body are ignored, as the generic path ignores them. ``tests/server/test_produce_request.py``
checks it against kio on the same bytes.
"""

from __future__ import annotations

import struct
import uuid
from datetime import timedelta

from ...errors import InvalidRequestError
from ..request_lengths import read_uvarint

__all__ = ["ProducePartition", "ProduceRequestBody", "ProduceTopic", "read_produce_request"]

_HEAD = struct.Struct(">hi")  # acks, timeout_ms
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ZERO_UUID = bytes(16)
#: The first version served (v0-v2 have no schema here: the connection closes, as Kafka's).
VERSION_MIN = 3


class ProducePartition:
    """One partition's data: ``index`` and ``records`` (a view of the request; None: null)."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview | None):
        self.index = index
        self.records = records


class ProduceTopic:
    """One topic's data: ``name`` (v3-v12; None from v13), ``topic_id`` (v13; None for the zero
    uuid, as kio reads it) and its ``partition_data``."""

    __slots__ = ("name", "topic_id", "partition_data")

    def __init__(self, name: str | None, topic_id: uuid.UUID | None,
                 partition_data: list[ProducePartition]):
        self.name = name
        self.topic_id = topic_id
        self.partition_data = partition_data


class ProduceRequestBody:
    """A decoded Produce request, with the attributes of kio's ``ProduceRequest`` that the
    handler reads (``timeout`` a ``timedelta``, as kio gives it, made when asked: making one
    per request was a third of this module's time) and ``timeout_ms``."""

    __slots__ = ("transactional_id", "acks", "timeout_ms", "topic_data")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: list[ProduceTopic]):
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data

    @property
    def timeout(self) -> timedelta:
        """The request's timeout as kio gives it."""
        return timedelta(milliseconds=self.timeout_ms)


def _bad(why: str) -> InvalidRequestError:
    return InvalidRequestError(f"API key 0: malformed request body: {why}")


def _compact_length(body: memoryview, pos: int, end: int) -> tuple[int, int]:
    """A compact length or count (the uvarint minus one: -1 is null) and the position after
    it; a one-byte uvarint (nearly all of them) without the general reader's loop."""
    if pos < end:
        first = body[pos]
        if first < 0x80:
            return first - 1, pos + 1
        if pos + 2 < end:
            second = body[pos + 1]
            if second < 0x80:  # two bytes: a record set under 16 KiB
                return ((second << 7) | (first & 0x7F)) - 1, pos + 2
            third = body[pos + 2]
            if third < 0x80:  # three bytes: under 2 MiB
                return ((third << 14) | ((second & 0x7F) << 7) | (first & 0x7F)) - 1, pos + 3
    value, pos = read_uvarint(body, pos, end, "Produce request")
    return value - 1, pos


def _length(body: memoryview, pos: int, end: int, flexible: bool,
            fixed: struct.Struct) -> tuple[int, int]:
    """A string's or bytes' length at ``pos`` (``-1``: null) and the position after it: a
    compact length in a flexible version, else the big-endian ``fixed`` one (int16 for
    strings, int32 for records)."""
    if flexible:
        return _compact_length(body, pos, end)
    if pos + fixed.size > end:
        raise _bad("the request ends inside a length")
    (length,) = fixed.unpack_from(body, pos)
    return length, pos + fixed.size


def _utf8(body: memoryview, pos: int, length: int) -> str:
    try:
        return str(body[pos:pos + length], "utf-8")
    except UnicodeDecodeError:
        raise _bad("a string that is not UTF-8") from None


def _string(body: memoryview, pos: int, length: int, end: int) -> tuple[str, int]:
    """The UTF-8 string of ``length`` bytes at ``pos`` and the position after it."""
    if length > end - pos:
        raise _bad(f"a length of {length} exceeds the {end - pos} bytes left")
    return _utf8(body, pos, length), pos + length


def _records(body: memoryview, pos: int, size: int, end: int) -> tuple[memoryview, int]:
    """The record set of ``size`` bytes at ``pos`` (a view) and the position after it."""
    if size > end - pos:
        raise _bad(f"a length of {size} exceeds the {end - pos} bytes left")
    return body[pos:pos + size], pos + size


def _acks_and_timeout(body: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    """``(acks, timeout_ms, position after them)``."""
    if pos + 6 > end:
        raise _bad("the request ends inside a field")
    acks, timeout_ms = _HEAD.unpack_from(body, pos)
    return acks, timeout_ms, pos + 6


def _skip_tagged_fields(body: memoryview, pos: int, end: int) -> int:
    """The position after a tagged-field section (every field skipped: Produce has none)."""
    if pos < end and body[pos] == 0:
        return pos + 1  # the usual empty section
    count, pos = read_uvarint(body, pos, end, "Produce request")
    if count > end - pos:
        raise _bad(f"{count} tagged fields in {end - pos} bytes")
    for _ in range(count):
        _tag, pos = read_uvarint(body, pos, end, "Produce request")
        size, pos = read_uvarint(body, pos, end, "Produce request")
        if size > end - pos:
            raise _bad(f"a tagged field of {size} bytes in {end - pos}")
        pos += size
    return pos


def read_produce_request(version: int, body: memoryview) -> ProduceRequestBody:
    """Decode a Produce request body of ``version`` (3..13). InvalidRequestError for bytes that
    do not hold one (a length past the end, a negative length that is not null, a null where
    the schema has none, a name that is not UTF-8, a version without a schema)."""
    if not VERSION_MIN <= version <= 13:
        raise InvalidRequestError(f"no schema for API key 0 version {version}")
    flexible = version >= 9
    by_id = version >= 13
    if flexible and not by_id:
        return _read_flexible_by_name(body)
    end = len(body)
    pos = 0
    # transactional_id: a nullable string.
    length, pos = _length(body, pos, end, flexible, _INT16)
    transactional_id: str | None = None
    if length < 0:
        if length != -1:
            raise _bad(f"a negative length {length}")
    else:
        transactional_id, pos = _string(body, pos, length, end)
    acks, timeout_ms, pos = _acks_and_timeout(body, pos, end)
    count, pos = _array_count(body, pos, end, flexible, "topic_data")
    topics: list[ProduceTopic] = []
    for _ in range(count):
        name: str | None = None
        topic_id: uuid.UUID | None = None
        if by_id:
            if pos + 16 > end:
                raise _bad("the request ends inside a field")
            raw_id = bytes(body[pos:pos + 16])
            if raw_id != _ZERO_UUID:
                topic_id = uuid.UUID(bytes=raw_id)
            pos += 16
        else:
            length, pos = _length(body, pos, end, flexible, _INT16)
            if length < 0:
                raise _bad(f"a topic name of length {length}")  # not nullable
            name, pos = _string(body, pos, length, end)
        partition_count, pos = _array_count(body, pos, end, flexible, "partition_data")
        partitions: list[ProducePartition] = []
        for _ in range(partition_count):
            if pos + 4 > end:
                raise _bad("the request ends inside a field")
            (index,) = _INT32.unpack_from(body, pos)
            pos += 4
            size, pos = _length(body, pos, end, flexible, _INT32)
            records: memoryview | None = None
            if size < 0:
                if size != -1:
                    raise _bad(f"a negative length {size}")
            else:
                records, pos = _records(body, pos, size, end)
            if flexible:
                pos = _skip_tagged_fields(body, pos, end)
            partitions.append(ProducePartition(index, records))
        if flexible:
            pos = _skip_tagged_fields(body, pos, end)
        topics.append(ProduceTopic(name, topic_id, partitions))
    if flexible:
        _skip_tagged_fields(body, pos, end)
    return ProduceRequestBody(transactional_id, acks, timeout_ms, topics)


def _read_flexible_by_name(body: memoryview) -> ProduceRequestBody:
    """:func:`read_produce_request` for v9-v12 (flexible, topics by name), its calls for the
    usual one-byte lengths and empty tagged-field sections written out (the broker's hot
    path; the same checks, the same refusals)."""
    end = len(body)
    length, pos = _compact_length(body, 0, end)
    transactional_id: str | None = None
    if length >= 0:
        transactional_id, pos = _string(body, pos, length, end)
    acks, timeout_ms, pos = _acks_and_timeout(body, pos, end)
    count, pos = _array_count(body, pos, end, True, "topic_data")
    topics: list[ProduceTopic] = []
    for _ in range(count):
        length, pos = _compact_length(body, pos, end)
        if length < 0:
            raise _bad(f"a topic name of length {length}")  # not nullable
        name, pos = _string(body, pos, length, end)
        partition_count, pos = _array_count(body, pos, end, True, "partition_data")
        partitions: list[ProducePartition] = []
        for _ in range(partition_count):
            if pos + 4 > end:
                raise _bad("the request ends inside a field")
            (index,) = _INT32.unpack_from(body, pos)
            size, pos = _compact_length(body, pos + 4, end)
            records: memoryview | None = None
            if size >= 0:
                records, pos = _records(body, pos, size, end)
            if pos < end and body[pos] == 0:
                pos += 1
            else:
                pos = _skip_tagged_fields(body, pos, end)
            partitions.append(ProducePartition(index, records))
        if pos < end and body[pos] == 0:
            pos += 1
        else:
            pos = _skip_tagged_fields(body, pos, end)
        topics.append(ProduceTopic(name, None, partitions))
    if not (pos < end and body[pos] == 0):
        _skip_tagged_fields(body, pos, end)
    return ProduceRequestBody(transactional_id, acks, timeout_ms, topics)


def _array_count(body: memoryview, pos: int, end: int, flexible: bool,
                 what: str) -> tuple[int, int]:
    """``(element count, position after the count)``; a null array is refused (Produce has
    none), and a count beyond the bytes left is a lie (each element takes at least one)."""
    if flexible:
        count, pos = _compact_length(body, pos, end)
    else:
        if pos + 4 > end:
            raise _bad("the request ends inside an array length")
        (count,) = _INT32.unpack_from(body, pos)
        pos += 4
    if count < 0:
        raise _bad(f"{what}: a null or negative array length")
    if count > end - pos:
        raise _bad(f"{what}: an array of {count} elements in {end - pos} bytes")
    return count, pos
