"""Every length in a request checked against the bytes that remain, before kio decodes it.

kio 0.6.5's native reader sizes a collection from its declared count before it reads the
elements: a Metadata request whose topics array claims 2**32 entries makes it ask for 32 GiB,
and the allocation failure aborts the whole broker process (SIGABRT), not just the request.
Kafka's generated parsers check every array count and every string/bytes length against what
is left of the request first (``if (arrayLength > _readable.remaining()) throw``) and close
the connection. This module does the same walk over kio's request classes, field by field in
wire order (the classes carry each field's Kafka type, nullability and tag), and raises
:class:`~seglog.errors.InvalidRequestError` on the first length that cannot fit, a negative
length that is not the null marker, or a varint that runs past the end. It decodes nothing:
kio does that afterwards, on bytes whose lengths are now known to be sane.

A checker is compiled once per request class (:func:`checker`) into nested closures, so a
check is a few Python calls per field.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from typing import Any, Callable, Union

from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, \
    classify_field, is_optional
from kio.static.protocol import Entity

from ..errors import InvalidRequestError

__all__ = ["RequestBytes", "check_request", "checker", "read_uvarint"]

#: The bytes of a request: indexing gives an int, ``struct.unpack_from`` reads them.
RequestBytes = Union[bytes, bytearray, memoryview]

#: (buffer, position, end) -> the position after the value.
Step = Callable[[RequestBytes, int, int], int]

_FIXED_BYTES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4,
    "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "timedelta_i64": 8,
    "datetime_i64": 8, "float64": 8, "uuid": 16,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _bad(why: str) -> InvalidRequestError:
    return InvalidRequestError(f"malformed request body: {why}")


def read_uvarint(buf: RequestBytes, pos: int, end: int,
                 where: str = "request body") -> tuple[int, int]:
    """``(value, position after it)`` of the unsigned varint at ``pos`` (Kafka's, at most 5
    bytes) of ``buf`` before ``end``; InvalidRequestError naming ``where`` when it runs past
    ``end`` or is longer than 5 bytes."""
    value = shift = 0
    for _ in range(5):
        if pos >= end:
            raise InvalidRequestError(f"malformed {where}: the request ends inside a varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise InvalidRequestError(f"malformed {where}: a varint longer than 5 bytes")




def _fixed(size: int) -> Step:
    def step(buf: RequestBytes, pos: int, end: int) -> int:
        pos += size
        if pos > end:
            raise _bad("the request ends inside a field")
        return pos
    return step


def _sized(flexible: bool, width: int) -> Step:
    """A string (``width`` 2) or bytes/records (``width`` 4) value: its length, then that
    many bytes; null allowed (Kafka's parser refuses null where the schema does not allow it,
    and kio does too, after this check)."""
    if flexible:
        def compact_step(buf: RequestBytes, pos: int, end: int) -> int:
            length, pos = read_uvarint(buf, pos, end)
            if length == 0:
                return pos
            pos += length - 1
            if pos > end:
                raise _bad(f"a length of {length - 1} exceeds the {end - pos + length - 1} "
                           "bytes left")
            return pos
        return compact_step
    unpack = (_INT16 if width == 2 else _INT32).unpack_from

    def step(buf: RequestBytes, pos: int, end: int) -> int:
        if pos + width > end:
            raise _bad("the request ends inside a length")
        length: int = unpack(buf, pos)[0]
        pos += width
        if length < 0:
            if length != -1:
                raise _bad(f"a negative length {length}")
            return pos
        if length > end - pos:
            raise _bad(f"a length of {length} exceeds the {end - pos} bytes left")
        return pos + length
    return step


def _array(flexible: bool, element: Step) -> Step:
    def walk(buf: RequestBytes, pos: int, end: int, count: int) -> int:
        if count > end - pos:
            raise _bad(f"an array of {count} elements in {end - pos} bytes")
        for _ in range(count):
            pos = element(buf, pos, end)
        return pos

    if flexible:
        def compact_step(buf: RequestBytes, pos: int, end: int) -> int:
            count, pos = read_uvarint(buf, pos, end)
            return pos if count == 0 else walk(buf, pos, end, count - 1)
        return compact_step

    def step(buf: RequestBytes, pos: int, end: int) -> int:
        if pos + 4 > end:
            raise _bad("the request ends inside an array length")
        (count,) = _INT32.unpack_from(buf, pos)
        pos += 4
        if count < 0:
            if count != -1:
                raise _bad(f"a negative array length {count}")
            return pos
        return walk(buf, pos, end, count)
    return step


def _primitive(kafka_type: str, flexible: bool) -> Step:
    if kafka_type in _FIXED_BYTES:
        return _fixed(_FIXED_BYTES[kafka_type])
    if kafka_type == "string":
        return _sized(flexible, 2)
    if kafka_type in ("bytes", "records"):
        return _sized(flexible, 4)
    raise TypeError(f"no length rule for Kafka type {kafka_type!r}")


def _nullable_struct(inner: Step) -> Step:
    # A nullable struct (DescribeTopicPartitions' Cursor) is an int8 marker first: negative
    # for null, else the struct follows (Kafka's generated readers; kio writes -1 and 1).
    def step(buf: RequestBytes, pos: int, end: int) -> int:
        if pos >= end:
            raise _bad("the request ends inside a field")
        marker = buf[pos]
        return pos + 1 if marker >= 0x80 else inner(buf, pos + 1, end)
    return step


def _field_step(field: dataclasses.Field[Any], flexible: bool) -> Step:
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        if "tag" not in field.metadata and is_optional(field):
            return _nullable_struct(checker(kind.type_))
        return checker(kind.type_)
    if isinstance(kind, EntityTupleField):
        return _array(flexible, checker(kind.type_))
    element = _primitive(field.metadata["kafka_type"], flexible)
    if isinstance(kind, PrimitiveTupleField):
        return _array(flexible, element)
    return element


@functools.lru_cache(maxsize=None)
def checker(entity_class: type[Entity]) -> Step:
    """The compiled check of one kio entity class: ``step(buffer, position, end)`` returns
    the position after the entity or raises InvalidRequestError. TypeError for a field type
    without a rule (a kio schema this module does not know)."""
    flexible = bool(entity_class.__flexible__)
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(entity_class):
        step = _field_step(field, flexible)
        if "tag" in field.metadata:
            tagged[int(field.metadata["tag"])] = step
        else:
            steps.append(step)

    def check(buf: RequestBytes, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        if flexible:
            count, pos = read_uvarint(buf, pos, end)
            if count > end - pos:
                raise _bad(f"{count} tagged fields in {end - pos} bytes")
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos, end)
                size, pos = read_uvarint(buf, pos, end)
                if size > end - pos:
                    raise _bad(f"a tagged field of {size} bytes in {end - pos}")
                known = tagged.get(tag)
                if known is not None:
                    known(buf, pos, pos + size)
                pos += size
        return pos

    return check


def check_request(request_class: type[Entity], buffer: RequestBytes, offset: int) -> None:
    """Check the request body of ``request_class`` at ``offset`` of ``buffer`` (to its end):
    InvalidRequestError unless every length fits in what remains."""
    checker(request_class)(buffer, offset, len(buffer))
