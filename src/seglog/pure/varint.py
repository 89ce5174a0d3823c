"""Zig-zag varints and varlongs, exactly as Kafka's ``ByteUtils`` writes and reads them.

A record's lengths, deltas and counts are signed integers stored zig-zag encoded
(``(v << 1) ^ (v >> 31)``, so small negative numbers stay small) as unsigned LEB128: seven
bits per byte, least significant group first, the high bit set on every byte but the last.
A *varint* holds an int32 and takes 1-5 bytes; a *varlong* holds an int64 and takes 1-10.

Reading follows ``ByteUtils.readVarint``/``readVarlong`` to the bit: a varint whose fifth
byte still has the continuation bit (or a varlong whose tenth does) is an
:class:`~seglog.errors.InvalidRecordError`, and the bits of the last byte that do not fit the
32 (64) bit word are dropped, as Java's shift does. Running off the end of the buffer is also
an InvalidRecordError (Kafka's BufferUnderflowException inside a record).
"""

from __future__ import annotations

from ..errors import InvalidRecordError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
VARINT_BYTES_MAX = 5
VARLONG_BYTES_MAX = 10
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def zigzag32(value: int) -> int:
    """The unsigned zig-zag form of an int32 ``value`` (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...)."""
    return ((value << 1) ^ (value >> 31)) & _MASK32


def zigzag64(value: int) -> int:
    """The unsigned zig-zag form of an int64 ``value``."""
    return ((value << 1) ^ (value >> 63)) & _MASK64


def write_uvarint(out: bytearray, unsigned: int) -> None:
    """Append the unsigned varint (Kafka's ``ByteUtils.writeUnsignedVarint``) of ``unsigned``
    (>= 0) to ``out``: a compact length's encoding."""
    while unsigned > 0x7F:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)


def write_varint(out: bytearray, value: int) -> None:
    """Append the varint of the int32 ``value`` to ``out``. ValueError if out of int32 range."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    write_uvarint(out, zigzag32(value))


def write_varlong(out: bytearray, value: int) -> None:
    """Append the varlong of the int64 ``value`` to ``out``. ValueError if out of int64 range."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")
    write_uvarint(out, zigzag64(value))


def encode_varint(value: int) -> bytes:
    """The varint bytes of the int32 ``value`` (1-5 bytes). ValueError if out of range."""
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """The varlong bytes of the int64 ``value`` (1-10 bytes). ValueError if out of range."""
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def size_of_varint(value: int) -> int:
    """How many bytes ``write_varint(value)`` appends (Kafka's ``ByteUtils.sizeOfVarint``)."""
    return max(1, (zigzag32(value).bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    """How many bytes ``write_varlong(value)`` appends (``ByteUtils.sizeOfVarlong``)."""
    return max(1, (zigzag64(value).bit_length() + 6) // 7)


def _read_unsigned(data, position: int, end: int, bytes_max: int, what: str) -> tuple[int, int]:
    unsigned, shift = 0, 0
    for index in range(position, min(end, position + bytes_max)):
        byte = data[index]
        unsigned |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return unsigned, index + 1
        shift += 7
    if end - position >= bytes_max:
        raise InvalidRecordError(f"{what} is longer than {bytes_max} bytes at position {position}")
    raise InvalidRecordError(f"{what} runs past the end of the buffer at position {position}")


def read_varint(data, position: int, end: int | None = None) -> tuple[int, int]:
    """Read a varint from ``data[position:end]``; returns ``(value, position after it)``.

    ``data`` is anything indexable by int giving bytes as ints (bytes, bytearray, memoryview
    of format "B"); ``end`` defaults to ``len(data)``. Raises InvalidRecordError when the
    varint is longer than 5 bytes or the bytes run out before its last byte.
    """
    if end is None:
        end = len(data)
    unsigned, position = _read_unsigned(data, position, end, VARINT_BYTES_MAX, "varint")
    unsigned &= _MASK32  # Java's int shift drops the fifth byte's high bits
    return (unsigned >> 1) ^ -(unsigned & 1), position


def read_varlong(data, position: int, end: int | None = None) -> tuple[int, int]:
    """Read a varlong from ``data[position:end]``; returns ``(value, position after it)``.

    Raises InvalidRecordError when it is longer than 10 bytes or runs past ``end``.
    """
    if end is None:
        end = len(data)
    unsigned, position = _read_unsigned(data, position, end, VARLONG_BYTES_MAX, "varlong")
    unsigned &= _MASK64
    return (unsigned >> 1) ^ -(unsigned & 1), position
