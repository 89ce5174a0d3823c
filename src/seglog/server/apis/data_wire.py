"""Kafka's primitive wire encodings that the data APIs' hand-written response encoders share:
unsigned varints, strings and arrays in their classic (int16 / int32 length) and compact
(flexible versions: unsigned varint of length + 1) forms (Kafka's ``ByteBufferAccessor`` and
the generated ``write`` methods)."""

from __future__ import annotations

import struct

__all__ = ["INT16", "INT32", "INT64", "uvarint", "string", "nullable_string", "array_length"]

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

#: The single-byte varints, precomputed (lengths and counts are nearly always below 128).
_SMALL = tuple(bytes((n,)) for n in range(128))


def uvarint(value: int) -> bytes:
    """An unsigned varint (``ByteUtils.writeUnsignedVarint``); ``value`` >= 0."""
    if value < 128:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(text: str, flexible: bool) -> bytes:
    """A non-null string: int16 length (classic) or uvarint length + 1 (compact), UTF-8."""
    raw = text.encode("utf-8")
    if flexible:
        return uvarint(len(raw) + 1) + raw
    return INT16.pack(len(raw)) + raw


def nullable_string(text: str | None, flexible: bool) -> bytes:
    """A nullable string: null is length -1 (classic) or 0 (compact)."""
    if text is None:
        return b"\x00" if flexible else b"\xff\xff"
    return string(text, flexible)


def array_length(count: int, flexible: bool) -> bytes:
    """An array's element count: int32 (classic) or uvarint count + 1 (compact)."""
    return uvarint(count + 1) if flexible else INT32.pack(count)
