"""Coordinator records (``__consumer_offsets``, ``__share_group_state``) as the JSON Kafka's
generated ``*JsonConverter`` classes write, driven by the message schemas of
:mod:`seglog.commands.coordinator_messages` instead of code per record type.

Kafka's ``CoordinatorRecordSerde.deserialize``: a key is an int16 record type and the key
message's fields (read in the non-flexible encoding whatever the type); a value is an int16
version (checked against the value message's valid versions) and the value message read at
that version (flexible encoding from its flexible versions on: compact strings and arrays,
tagged fields). The JSON converter writes every field the version has, in schema order,
under its camelCase name; a tagged field only when it differs from its default (an absent
array or struct is empty, and so not written; a null one is written as ``null``); int64 as
a number, ``bytes`` as base64, ``uuid`` as Kafka's ``Uuid.toString``.

:func:`decode_record` gives ``(type, key node, version, value node or None)``; it raises
:class:`UnknownRecordType` for a record type the coordinator does not know and
:class:`RecordDecodeError` (Kafka's message text) for bytes that do not parse. A leaf over
the schema data: it knows nothing of files or the CLI.
"""

from __future__ import annotations

import base64
import struct
import uuid
from functools import lru_cache
from typing import Any

from ..storage.checkpoints import uuid_to_kafka_str
from .coordinator_messages import MESSAGES

__all__ = ["GROUP_COORDINATOR", "SHARE_COORDINATOR", "RecordDecodeError", "UnknownRecordType",
           "decode_record"]

#: The messages of Kafka's share coordinator (``__share_group_state``); every other message
#: of :data:`MESSAGES` is the group coordinator's (``__consumer_offsets``).
_SHARE_STATE_MESSAGES = ("ShareSnapshot", "ShareUpdate")

#: Kafka's ``readUnsignedVarint`` takes at most five bytes.
_UVARINT_BYTES_MAX = 5
_STRING_BYTES_MAX = 0x7FFF
_PRIMITIVE_SIZES = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"),
                    "uint16": struct.Struct(">H"), "int32": struct.Struct(">i"),
                    "uint32": struct.Struct(">I"), "int64": struct.Struct(">q"),
                    "float64": struct.Struct(">d")}
_ZERO_UUID = uuid.UUID(int=0)


class UnknownRecordType(Exception):
    """A record type the coordinator has no key/value messages for (Kafka's
    ``UnknownRecordTypeException``); ``record_type`` is the key's int16."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"Unknown record type {record_type}")
        self.record_type = record_type


class RecordDecodeError(Exception):
    """Bytes that do not parse; the text is Kafka's (what ``kafka-dump-log`` prints after
    ``Error at offset N, skipping.``)."""


class _Underflow(Exception):
    """Kafka's BufferUnderflowException, whose message is null."""


def _versions(spec: str) -> tuple[int, int]:
    """Kafka's version range text (``"0+"``, ``"1"``, ``"0-4"``, ``"none"``) as (low, high)."""
    if spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 0x7FFF)
    low, _, high = spec.partition("-")
    return (int(low), int(high or low))


def _in(spec: str | None, version: int) -> bool:
    if spec is None:
        return False
    low, high = _versions(spec)
    return low <= version <= high


def _camel(name: str) -> str:
    # Kafka's JSON converters: the field name with its first letter lower-cased.
    return name[:1].lower() + name[1:]


class _Registry:
    """One coordinator's messages: record type -> (key schema, value schema)."""

    def __init__(self, share_state: bool) -> None:
        self.by_type: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        for name, schema in MESSAGES.items():
            if schema["type"] != "coordinator-key":
                continue
            base = name[:-len("Key")]
            if (base in _SHARE_STATE_MESSAGES) != share_state:
                continue
            self.by_type[schema["apiKey"]] = (schema, MESSAGES[base + "Value"])


@lru_cache(maxsize=None)
def _registry(share_state: bool) -> _Registry:
    return _Registry(share_state)


#: Which coordinator's records to decode (arguments of :func:`decode_record`).
GROUP_COORDINATOR = False
SHARE_COORDINATOR = True


class _Reader:
    def __init__(self, data: bytes, structs: dict[str, list[dict[str, Any]]]) -> None:
        self.data = data
        self.position = 0
        self.structs = structs

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > len(self.data):
            raise _Underflow()
        chunk = self.data[self.position:self.position + count]
        self.position += count
        return chunk

    def take_array(self, count: int) -> bytes:
        # Kafka's ByteBufferAccessor.readArray (strings and bytes): its own message
        left = len(self.data) - self.position
        if count > left:
            raise RecordDecodeError(f"Error reading byte array of {count} byte(s): only "
                                    f"{left} byte(s) available")
        return self.take(count)

    def fixed(self, kind: str) -> Any:
        fmt = _PRIMITIVE_SIZES[kind]
        return fmt.unpack(self.take(fmt.size))[0]

    def uvarint(self) -> int:
        value = 0
        for i in range(_UVARINT_BYTES_MAX):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return value - (1 << 32) if value & 0x80000000 else value
        raise RecordDecodeError("Varint is too long, the most significant bit in the 5th byte "
                                "is set, converted value: "
                                f"{value & 0xFFFFFFFF:x}")

    def length(self, flexible: bool, long_form: bool) -> int:
        if flexible:
            return self.uvarint() - 1
        return int(self.fixed("int32" if long_form else "int16"))

    # --- one value of a field ----------------------------------------------------------------

    def value(self, field: dict[str, Any], kind: str, version: int, flexible: bool,
              tagged: bool = False) -> Any:
        name = _camel(field["name"])
        nullable = _in(field.get("nullableVersions"), version)
        if kind.startswith("[]"):
            count = self.length(flexible, long_form=True)
            if count < 0:
                if not nullable:
                    raise RecordDecodeError(f"non-nullable field {name} was serialized as null")
                return None
            if count > len(self.data) - self.position:
                raise RecordDecodeError(f"Tried to allocate a collection of size {count}, but "
                                        f"there are only {len(self.data) - self.position} "
                                        f"bytes remaining.")
            item = {**field, "nullableVersions": None}
            return [self.value(item, kind[2:], version, flexible) for _ in range(count)]
        if kind in _PRIMITIVE_SIZES:
            return self.fixed(kind)
        if kind == "bool":
            return self.take(1)[0] != 0
        if kind == "uuid":
            return uuid_to_kafka_str(uuid.UUID(bytes=self.take(16)))
        if kind == "string":
            length = self.length(flexible, long_form=False)
            if length < 0:
                if not nullable:
                    raise RecordDecodeError(f"non-nullable field {name} was serialized as null")
                return None
            if length > _STRING_BYTES_MAX:
                raise RecordDecodeError(f"string field {name} had invalid length {length}")
            return self.take_array(length).decode("utf-8", errors="replace")
        if kind == "bytes":
            length = self.length(flexible, long_form=True)
            if length < 0:
                if not nullable:
                    raise RecordDecodeError(f"non-nullable field {name} was serialized as null")
                return None
            return base64.b64encode(self.take_array(length)).decode("ascii")
        # a struct: a nullable one is preceded by its presence (an int8, or in a tagged
        # field an unsigned varint; not positive: null)
        if nullable:
            present = self.uvarint() > 0 if tagged else self.fixed("int8") >= 0
            if not present:
                return None
        return self.message(self.struct_fields(field, kind), version, flexible)

    def struct_fields(self, field: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        fields = field.get("fields")
        if fields is None:
            fields = self.structs[kind]
        return list(fields)

    # --- a message or struct -----------------------------------------------------------------

    def message(self, fields: list[dict[str, Any]], version: int, flexible: bool,
                key: bool = False) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for field in fields:
            if not key and not _in(field["versions"], version):
                continue
            if flexible and _in(field.get("taggedVersions"), version):
                values[field["name"]] = self.default(field, version)
                continue
            values[field["name"]] = self.value(field, field["type"], version, flexible)
        if flexible:
            by_tag = {f["tag"]: f for f in fields
                      if _in(f.get("taggedVersions"), version) and _in(f["versions"], version)}
            count = self.uvarint()
            if count > len(self.data) - self.position:
                raise RecordDecodeError(f"Tried to read {count} tagged fields, but there are "
                                        f"only {len(self.data) - self.position} bytes "
                                        f"remaining.")
            for _ in range(count):
                tag = self.uvarint()
                size = self.uvarint()
                known = by_tag.get(tag)
                if known is None:
                    self.take(size)  # an unknown tagged field: kept by Kafka, never printed
                    continue
                values[known["name"]] = self.value(known, known["type"], version, True,
                                                   tagged=True)
        return self.node(fields, values, version, flexible, key)

    def default(self, field: dict[str, Any], version: int) -> Any:
        """A field's value when absent: the schema's default, where a JSON ``null`` default of
        an array or struct means empty (as Kafka's generated constructors do) and the text
        ``"null"`` means null."""
        kind = field["type"]
        given = field.get("default")
        if given == "null":
            return None
        if kind.startswith("[]"):
            return []
        if kind in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            return int(given) if given not in (None, "") else 0
        if kind == "float64":
            return float(given) if given not in (None, "") else 0.0
        if kind == "bool":
            return str(given).lower() == "true"
        if kind == "string":
            return given if isinstance(given, str) else ""
        if kind == "uuid":
            return uuid_to_kafka_str(_ZERO_UUID)
        if kind == "bytes":
            return ""
        fields = self.struct_fields(field, kind)
        return self.node(fields, {f["name"]: self.default(f, version) for f in fields
                                  if _in(f["versions"], version)}, version, True, False)

    def node(self, fields: list[dict[str, Any]], values: dict[str, Any], version: int,
             flexible: bool, key: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in fields:
            name = field["name"]
            if name not in values:
                continue
            value = values[name]
            if flexible and not key and _in(field.get("taggedVersions"), version):
                default = self.default(field, version)
                kind = field["type"]
                if kind.startswith("[]") or kind not in _SCALARS:
                    # arrays and structs: written when null or not the empty default
                    if value is not None and value == default:
                        continue
                elif value == default:
                    continue
            out[_camel(name)] = value
        return out


_SCALARS = frozenset(_PRIMITIVE_SIZES) | {"bool", "uuid", "string", "bytes"}


def _structs(schema: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for struct_schema in schema.get("commonStructs", ()):
        out[struct_schema["name"]] = struct_schema["fields"]

    def walk(fields: list[dict[str, Any]]) -> None:
        for field in fields:
            if "fields" in field:
                out[field["type"].removeprefix("[]")] = field["fields"]
                walk(field["fields"])
    walk(schema["fields"])
    return out


def _wrap(version: int, what: str, exc: Exception) -> RecordDecodeError:
    why = "null" if isinstance(exc, _Underflow) else str(exc)
    return RecordDecodeError(f"Could not read record with version {version} from {what}'s "
                             f"buffer due to: {why}.")


def decode_record(coordinator: bool, key: bytes,
                  value: bytes | None) -> tuple[int, dict[str, Any], int, dict[str, Any] | None]:
    """``(record type, key JSON node, value version, value JSON node)`` of one coordinator
    record (``coordinator``: :data:`GROUP_COORDINATOR` or :data:`SHARE_COORDINATOR`); the
    value node is None for a tombstone (and its version -1)."""
    registry = _registry(coordinator)
    if len(key) < 2:
        raise RecordDecodeError("Could not read version from key's buffer.")
    record_type = struct.unpack_from(">h", key)[0]
    schemas = registry.by_type.get(record_type)
    if schemas is None:
        raise UnknownRecordType(record_type)
    key_schema, value_schema = schemas
    reader = _Reader(key[2:], _structs(key_schema))
    try:
        key_node = reader.message(key_schema["fields"], record_type, False, key=True)
    except (_Underflow, RecordDecodeError) as exc:
        raise _wrap(record_type, "key", exc) from None
    if value is None:
        return record_type, key_node, -1, None
    if len(value) < 2:
        raise RecordDecodeError("Could not read version from value's buffer.")
    version = struct.unpack_from(">h", value)[0]
    if not _in(value_schema["validVersions"], version):
        raise RecordDecodeError(f"Found an unknown record version {version} for "
                                f"{record_type} type")
    reader = _Reader(value[2:], _structs(value_schema))
    try:
        value_node = reader.message(value_schema["fields"], version,
                                    _in(value_schema["flexibleVersions"], version))
    except (_Underflow, RecordDecodeError) as exc:
        raise _wrap(version, "value", exc) from None
    return record_type, key_node, version, value_node
