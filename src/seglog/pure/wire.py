"""Kafka's request framing on the broker's hot path: the pure twin of ``src/_native/wire.pyx``
(the readable reference; same names, same answers).

Each reader is a *fast path*: it returns the fields of a well-formed request of the common
shape and None for anything else (a truncated or malformed frame, a client id or topic name
that is not UTF-8, a non-empty tagged-field section, a Produce request of several topics or
partitions). The caller's full parser then reads that request and gives its answer or its
refusal, so there is one source of the protocol's error rules; a fast path may decline, never
disagree.
"""

from __future__ import annotations

import struct
from typing import Any

from .varint import write_uvarint

__all__ = ["encode_produce_single", "frame_buffer", "read_produce_single",
           "read_request_header"]

_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... log start offset
_ZERO_ID = bytes(16)
_PRODUCE_VERSION_MIN = 3
_PRODUCE_VERSION_MAX = 13
_FIRST_FLEXIBLE_PRODUCE = 9
_FIRST_PRODUCE_BY_ID = 13
_DECLINE = -2  # a length that cannot be read: the reader returns None


def _utf8(data: memoryview, start: int, length: int) -> str | None:
    try:
        return str(data[start:start + length], "utf-8")
    except UnicodeDecodeError:
        return None


def _compact(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    """A compact length or count (uvarint minus one) and the position after it; -2 for a
    uvarint that is truncated or beyond an int32."""
    value = shift = 0
    while pos < end and shift <= 28:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value - 1, pos) if value <= 0x80000000 else (_DECLINE, pos)
        shift += 7
    return _DECLINE, pos


def _length(data: memoryview, pos: int, end: int, flexible: bool,
            fixed: struct.Struct) -> tuple[int, int]:
    """A string's or bytes' length (compact when ``flexible``, else ``fixed``); -2 when it
    cannot be read."""
    if flexible:
        return _compact(data, pos, end)
    if pos + fixed.size > end:
        return _DECLINE, pos
    (value,) = fixed.unpack_from(data, pos)
    return (value if value >= -1 else _DECLINE), pos + fixed.size


def read_request_header(frame: Any, flexible: bool
                        ) -> tuple[int, int, int, str | None, int] | None:
    """``(api_key, api_version, correlation_id, client_id, body_offset)`` of the request
    header at the start of ``frame`` (v2 when ``flexible``, with an empty tagged-field
    section; else v1); ``client_id`` None for a null one. None for any other frame: the
    caller's full parser reads it (and refuses what is malformed)."""
    data = memoryview(frame).cast("B")
    end = len(data)
    if end < _HEAD.size:
        return None
    api_key, api_version, correlation_id, length = _HEAD.unpack_from(data, 0)
    position = _HEAD.size
    client_id = None
    if length >= 0:
        if position + length > end:
            return None
        client_id = _utf8(data, position, length)
        if client_id is None:
            return None
        position += length
    elif length != -1:
        return None
    if flexible:
        if position >= end or data[position] != 0:
            return None
        position += 1
    return api_key, api_version, correlation_id, client_id, position


def read_produce_single(version: int, body: Any) -> tuple[
        str | None, int, int, str | None, bytes | None, int, memoryview | None] | None:
    """``(transactional_id, acks, timeout_ms, topic_name, topic_id, partition, records)`` of a
    Produce request body of ``version`` (3..13) that names one topic with one partition, every
    tagged-field section empty: ``topic_name`` None from v13, ``topic_id`` the 16 bytes of the
    topic's id from v13 (None for the zero uuid, and before v13), ``records`` a view of
    ``body`` (None when null). None for any other body: the caller's full reader reads it."""
    if not _PRODUCE_VERSION_MIN <= version <= _PRODUCE_VERSION_MAX:
        return None
    flexible = version >= _FIRST_FLEXIBLE_PRODUCE
    data = memoryview(body).cast("B")
    end = len(data)
    length, pos = _length(data, 0, end, flexible, _INT16)
    if length == _DECLINE:
        return None
    transactional_id = None
    if length >= 0:
        if length > end - pos:
            return None
        transactional_id = _utf8(data, pos, length)
        if transactional_id is None:
            return None
        pos += length
    if pos + _ACKS_TIMEOUT.size > end:
        return None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(data, pos)
    pos += _ACKS_TIMEOUT.size
    count, pos = _length(data, pos, end, flexible, _INT32)
    if count != 1:
        return None
    name = topic_id = None
    if version >= _FIRST_PRODUCE_BY_ID:
        if pos + 16 > end:
            return None
        raw_id = bytes(data[pos:pos + 16])
        topic_id = raw_id if raw_id != _ZERO_ID else None
        pos += 16
    else:
        length, pos = _length(data, pos, end, flexible, _INT16)
        if length < 0 or length > end - pos:
            return None
        name = _utf8(data, pos, length)
        if name is None:
            return None
        pos += length
    count, pos = _length(data, pos, end, flexible, _INT32)
    if count != 1 or pos + 4 > end:
        return None
    (index,) = _INT32.unpack_from(data, pos)
    size, pos = _length(data, pos + 4, end, flexible, _INT32)
    if size == _DECLINE or size > end - pos:
        return None
    records = None
    if size >= 0:
        records = data[pos:pos + size]
        pos += size
    # The partition's, the topic's and the request's tagged fields: all empty.
    if flexible and bytes(data[pos:pos + 3]) != b"\x00\x00\x00":
        return None
    return transactional_id, acks, timeout_ms, name, topic_id, index, records


def encode_produce_single(version: int, topic: Any, partition: int, error_code: int,
                          base_offset: int, log_append_time_ms: int,
                          log_start_offset: int) -> bytes:
    """The body of a Produce response of ``version`` (3..13) with one topic of one partition
    and no throttle: ``topic`` its name (v3-v12; str) or its id's 16 bytes (v13; None for the
    zero uuid); the partition's ``error_code``, ``base_offset``, ``log_append_time_ms`` and
    (v5+) ``log_start_offset``, an empty record-errors array and a null error message (v8+).
    The same bytes as the general encoder's for that answer."""
    if not _PRODUCE_VERSION_MIN <= version <= _PRODUCE_VERSION_MAX:
        raise ValueError(f"no Produce response version {version}")
    flexible = version >= _FIRST_FLEXIBLE_PRODUCE
    one = b"\x02" if flexible else _INT32.pack(1)  # an array of one element
    out = bytearray(one)
    if version >= _FIRST_PRODUCE_BY_ID:
        topic_id = _ZERO_ID if topic is None else bytes(topic)
        if len(topic_id) != 16:
            raise ValueError("a topic id is 16 bytes")
        out += topic_id
    else:
        if not isinstance(topic, str):
            raise TypeError(f"a topic name is a str, not {type(topic).__name__}")
        name = topic.encode("utf-8")
        if len(name) > 0x7FFF:
            raise ValueError("a topic name longer than 32767 bytes")
        if flexible:
            write_uvarint(out, len(name) + 1)  # a compact string's length
        else:
            out += _INT16.pack(len(name))
        out += name
    out += one
    if version >= 5:
        out += _PARTITION_V5.pack(partition, error_code, base_offset, log_append_time_ms,
                                  log_start_offset)
    else:
        out += _PARTITION_V3.pack(partition, error_code, base_offset, log_append_time_ms)
    if version >= 8:
        # An empty record-errors array and a null message (flexible: then the partition's
        # and the topic's empty tagged fields).
        out += b"\x01\x00\x00\x00" if flexible else b"\x00\x00\x00\x00\xff\xff"
    out += b"\x00\x00\x00\x00"  # throttle_time_ms
    if flexible:
        out += b"\x00"  # the response's tagged fields
    return bytes(out)


def frame_buffer(size_bytes: int) -> bytearray:
    """A bytearray of ``size_bytes`` for a request the connection fills as it arrives (zeroed
    here; the native one is not, its contents undefined until written). ValueError for a
    negative size."""
    if size_bytes < 0:
        raise ValueError(f"negative frame size {size_bytes}")
    return bytearray(size_bytes)
