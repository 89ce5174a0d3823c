"""Records as ``seglog produce`` reads them and ``seglog consume`` prints them.

Input (``seglog produce``):

* ``lines``: one record per line (the line ending ``\\n`` is not part of the value); with a
  key separator (kcat's ``-K``), the line's text up to the first separator is the key and the
  rest the value (a line without the separator is an error, as Kafka's console producer's
  ``parse.key``). Lines are bytes: any encoding passes through unchanged.
* ``json``: one JSON object per line, :func:`parse_json_line`'s fields.

Output (``seglog consume``):

* ``plain``: the value's bytes, one record per line (``null`` for a null value, as Kafka's
  console consumer prints it); with ``--print-key`` the key, the key separator, the value.
* ``json``: JSON lines, :func:`record_json`'s fields.
* a kcat format string (``-f``): :func:`compile_format`.

Binary data in JSON (both ways): ``"key"`` and ``"value"`` hold the bytes as text when they
are valid UTF-8. Bytes that are not (or every key and value with ``--binary base64``) are
written as ``"key_b64"`` / ``"value_b64"``, standard base64, and the text field is then left
out; ``null`` always means a null key or value (a tombstone). Header values follow the same
rule. The producer's JSON input takes either form.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..types import ConsumerRecord

__all__ = ["InputRecord", "OutputRecord", "RecordFormatError", "parse_line",
           "parse_json_line", "parse_header_option", "record_json", "plain_line",
           "compile_format", "decode_escapes", "BINARY_MODES"]

#: ``--binary`` choices: ``auto`` (text when valid UTF-8, else base64) or ``base64`` (always).
BINARY_MODES = ("auto", "base64")

Header = tuple[str, "bytes | None"]


class RecordFormatError(ValueError):
    """An input line that is not a record (the message says why; the caller adds where)."""


@dataclass
class InputRecord:
    """One record to produce; None fields take the command's defaults."""

    value: bytes | None
    key: bytes | None = None
    headers: list[Header] = field(default_factory=list)
    partition: int | None = None
    timestamp_ms: int | None = None


#: One consumed record, the same from the Store's consumer and from librdkafka's: the
#: embedded consumer's record type (its ``headers`` a tuple of ``(name, value)`` pairs).
OutputRecord = ConsumerRecord


def decode_escapes(text: str) -> str:
    """kcat's escapes in a separator or format string: ``\\n``, ``\\t``, ``\\r``, ``\\0``,
    ``\\\\``; any other backslash stays as written."""
    out: list[str] = []
    i = 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in escapes:
            out.append(escapes[text[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_line(line: bytes, key_separator: bytes | None) -> InputRecord:
    """A ``lines`` input line (without its ``\\n``) -> an :class:`InputRecord`."""
    if key_separator is None:
        return InputRecord(value=line)
    key, sep, value = line.partition(key_separator)
    if not sep:
        raise RecordFormatError(f"no key separator {key_separator!r} in the line")
    return InputRecord(value=value, key=key)


def _bytes_field(obj: dict[str, Any], name: str) -> bytes | None:
    """``obj[name]`` (text, UTF-8 encoded) or ``obj[name + "_b64"]`` (base64) or None."""
    b64 = obj.get(f"{name}_b64")
    if b64 is not None:
        if name in obj:
            raise RecordFormatError(f'both "{name}" and "{name}_b64"')
        if not isinstance(b64, str):
            raise RecordFormatError(f'"{name}_b64" must be a base64 string')
        try:
            return base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RecordFormatError(f'"{name}_b64" is not base64: {exc}') from None
    text = obj.get(name)
    if text is None:
        return None
    if not isinstance(text, str):
        raise RecordFormatError(f'"{name}" must be a string or null, not {type(text).__name__}')
    return text.encode("utf-8")


def _json_headers(raw: Any) -> list[Header]:
    """Headers as ``{"k": "v"}``, ``[["k", "v"], ...]`` or ``[{"key": "k", "value": "v"}]``
    (``"value_b64"`` for binary values, as consume prints them)."""
    if raw is None:
        return []
    headers: list[Header] = []
    if isinstance(raw, dict):
        for name, value in raw.items():
            if value is not None and not isinstance(value, str):
                raise RecordFormatError(f"header {name!r}: value must be a string or null")
            headers.append((name, None if value is None else value.encode("utf-8")))
        return headers
    if not isinstance(raw, list):
        raise RecordFormatError('"headers" must be an object or a list')
    for item in raw:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
            value = item[1]
            if value is not None and not isinstance(value, str):
                raise RecordFormatError(f"header {item[0]!r}: value must be a string or null")
            headers.append((item[0], None if value is None else value.encode("utf-8")))
        elif isinstance(item, dict) and isinstance(item.get("key"), str):
            headers.append((item["key"], _bytes_field(item, "value")))
        else:
            raise RecordFormatError(f"a header must be [name, value] or "
                                    f'{{"key": name, "value": value}}, not {item!r}')
    return headers


_JSON_FIELDS = frozenset({"key", "key_b64", "value", "value_b64", "headers", "partition",
                          "timestamp"})
#: Fields ``seglog consume --format json`` prints that a producer has no use for: accepted
#: and ignored, so that consume's output can be produced again (copying records).
_CONSUMED_ONLY_FIELDS = frozenset({"topic", "offset"})


def parse_json_line(line: bytes) -> InputRecord:
    """A ``json`` input line -> an :class:`InputRecord`.

    ``{"key": str|null, "value": str|null, "headers": {k: v} | [[k, v], ...],
    "partition": int, "timestamp": ms}``; every field may be left out (a missing value is
    null); ``"key_b64"`` / ``"value_b64"`` carry binary data as base64. ``"topic"`` and
    ``"offset"`` (what ``seglog consume --format json`` adds) are ignored, so consume's output
    can be produced again; any other field is refused by name (a typo must not silently drop
    data)."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordFormatError("a JSON record must be an object")
    unknown = sorted(set(obj) - _JSON_FIELDS - _CONSUMED_ONLY_FIELDS)
    if unknown:
        raise RecordFormatError(f"unknown field {', '.join(map(repr, unknown))} (known: "
                                f"{', '.join(sorted(_JSON_FIELDS))})")
    partition = obj.get("partition")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)
                                  or partition < 0):
        raise RecordFormatError('"partition" must be an integer >= 0')
    timestamp = obj.get("timestamp")
    if timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool)
                                  or timestamp < 0):
        raise RecordFormatError('"timestamp" must be an integer >= 0 (ms since the epoch)')
    return InputRecord(value=_bytes_field(obj, "value"), key=_bytes_field(obj, "key"),
                       headers=_json_headers(obj.get("headers")), partition=partition,
                       timestamp_ms=timestamp)


def parse_header_option(text: str) -> Header:
    """``-H name=value`` -> ``(name, value bytes)``; ``name`` alone is a null value."""
    name, sep, value = text.partition("=")
    if not name:
        raise RecordFormatError(f"header {text!r}: expected NAME=VALUE")
    return name, value.encode("utf-8") if sep else None


def _put_bytes(out: dict[str, Any], name: str, data: bytes | None, binary: str) -> None:
    if data is None:
        out[name] = None
        return
    if binary == "auto":
        try:
            out[name] = data.decode("utf-8")
            return
        except UnicodeDecodeError:
            pass
    out[f"{name}_b64"] = base64.b64encode(data).decode("ascii")


def record_json(record: OutputRecord, binary: str = "auto") -> dict[str, Any]:
    """A consumed record as a JSON object: ``topic``, ``partition``, ``offset``,
    ``timestamp`` (ms), ``key``, ``value``, ``headers`` (a list of ``{"key": name,
    "value": text}``); binary data as the module docstring says."""
    out: dict[str, Any] = {"topic": record.topic, "partition": record.partition,
                           "offset": record.offset, "timestamp": record.timestamp_ms}
    _put_bytes(out, "key", record.key, binary)
    _put_bytes(out, "value", record.value, binary)
    headers = []
    for name, value in record.headers:
        header: dict[str, Any] = {"key": name}
        _put_bytes(header, "value", value, binary)
        headers.append(header)
    out["headers"] = headers
    return out


def plain_line(record: OutputRecord, *, print_key: bool, key_separator: bytes) -> bytes:
    """Kafka's console consumer's line (without its newline): the value, ``null`` for a null
    one; with ``print_key`` the key (``null`` when null), the separator, then the value."""
    value = b"null" if record.value is None else record.value
    if not print_key:
        return value
    key = b"null" if record.key is None else record.key
    return key + key_separator + value


def _headers_text(headers: Sequence[Header]) -> bytes:
    # kcat's %h: name=value pairs separated by commas; a null value prints as the name alone.
    return b",".join(name.encode("utf-8") + (b"" if value is None else b"=" + value)
                     for name, value in headers)


_FIELDS: dict[str, Callable[[OutputRecord], bytes]] = {
    "t": lambda r: r.topic.encode("utf-8"),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "k": lambda r: r.key or b"",
    "s": lambda r: r.value or b"",
    "K": lambda r: str(-1 if r.key is None else len(r.key)).encode(),
    "S": lambda r: str(-1 if r.value is None else len(r.value)).encode(),
    "T": lambda r: str(r.timestamp_ms).encode(),
    "h": lambda r: _headers_text(r.headers),
}


def compile_format(fmt: str) -> Callable[[OutputRecord], bytes]:
    """kcat's ``-f`` format string -> a function from a record to its bytes.

    ``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k`` key, ``%s`` value, ``%K`` key size,
    ``%S`` value size (-1 for null), ``%T`` timestamp (ms), ``%h`` headers (``k=v,k2=v2``),
    ``%%`` a percent sign; ``\\n``, ``\\t``, ``\\r``, ``\\0``, ``\\\\``. Nothing is added at
    the end (kcat's rule: put ``\\n`` in the format). An unknown ``%x`` is a
    :class:`RecordFormatError`."""
    text = decode_escapes(fmt)
    parts: list[bytes | Callable[[OutputRecord], bytes]] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "%":
            literal.append(ch)
            i += 1
            continue
        if i + 1 >= len(text):
            raise RecordFormatError("format string ends with a lone %")
        code = text[i + 1]
        i += 2
        if code == "%":
            literal.append("%")
            continue
        if code not in _FIELDS:
            raise RecordFormatError(f"unknown format field %{code} (known: "
                                    f"{' '.join('%' + c for c in _FIELDS)} %%)")
        if literal:
            parts.append("".join(literal).encode("utf-8"))
            literal = []
        parts.append(_FIELDS[code])
    if literal:
        parts.append("".join(literal).encode("utf-8"))

    def render(record: OutputRecord) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(record) for p in parts)

    return render
