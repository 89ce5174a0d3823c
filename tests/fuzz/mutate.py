"""Byte and text mutations for the fuzz harness: deterministic, described, replayable.

Every mutation is a function ``(rng, data, fields) -> (new_data, description)``: ``rng`` is a
``random.Random`` (so a seed reproduces the case), ``data`` the bytes to damage and
``fields`` the ``(position, size_bytes)`` of the file's integer header fields (lengths,
offsets, counts, positions) that the integer-boundary mutation aims at. The description is
a short string (``"bitflip@70^0x08"``) printed with a failure so that a person can see what
was done without replaying it.

:func:`mutate` picks one to three mutations; :func:`mutate_text` adds token-aware mutations
for the text files (checkpoints, ``meta.properties``, ``partition.metadata``) and
:func:`mutate_json` type swaps for the topics registry.
"""

from __future__ import annotations

import json
import random
import re
import struct

__all__ = ["MUTATORS", "mutate", "mutate_text", "mutate_json", "boundary_values"]

_PACK = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}


def boundary_values(size_bytes: int, data_len: int) -> list[int]:
    """Signed/unsigned edge values of a ``size_bytes`` big-endian field, plus small values that
    sit on Kafka's format limits (12, 14, 17, 49, 61: overhead, minimum lengths, header size)
    and the buffer's own length around it."""
    bits = 8 * size_bytes
    umax = (1 << bits) - 1
    smax = (1 << (bits - 1)) - 1
    values = {0, 1, 2, umax, umax - 1, smax, smax + 1, smax - 1, smax + 2,
              12, 13, 14, 16, 17, 48, 49, 60, 61, 62, 0x7F, 0x80, 0xFF,
              data_len, data_len - 1, data_len + 1, data_len - 12, data_len - 11}
    return sorted(v & umax for v in values)


def _region(rng: random.Random, n: int, max_len: int = 64) -> tuple[int, int]:
    if n == 0:
        return 0, 0
    start = rng.randrange(n)
    length = min(n - start, rng.choice((1, 2, 4, 8, rng.randrange(1, max_len + 1))))
    return start, length


def bitflip(rng, data, fields):
    if not data:
        return data, "bitflip(empty)"
    out = bytearray(data)
    done = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        i = rng.randrange(len(out))
        bit = 1 << rng.randrange(8)
        out[i] ^= bit
        done.append(f"{i}^{bit:#04x}")
    return bytes(out), "bitflip@" + ",".join(done)


def overwrite(rng, data, fields):
    if not data:
        return data, "overwrite(empty)"
    out = bytearray(data)
    done = []
    for _ in range(rng.choice((1, 1, 2, 4))):
        i = rng.randrange(len(out))
        out[i] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        done.append(f"{i}={out[i]:#04x}")
    return bytes(out), "overwrite@" + ",".join(done)


def garbage(rng, data, fields):
    start, length = _region(rng, len(data), 256)
    junk = rng.randbytes(length)
    return data[:start] + junk + data[start + length:], f"garbage@{start}+{length}"


def zero(rng, data, fields):
    start, length = _region(rng, len(data), 512)
    return data[:start] + bytes(length) + data[start + length:], f"zero@{start}+{length}"


def truncate(rng, data, fields):
    n = len(data)
    if n == 0:
        return data, "truncate(empty)"
    choices = [rng.randrange(n), n - 1, n - rng.randrange(1, min(n, 80) + 1)]
    choices += [p for p, _s in fields if p < n]  # cut exactly at a field (often a boundary)
    at = max(0, rng.choice(choices))
    return data[:at], f"truncate@{at}/{n}"


def append(rng, data, fields):
    length = rng.choice((1, 4, 12, 17, 61, rng.randrange(1, 300)))
    kind = rng.choice(("zero", "random", "copy"))
    if kind == "zero":
        tail = bytes(length)
    elif kind == "random" or not data:
        tail = rng.randbytes(length)
    else:
        start = rng.randrange(len(data))
        tail = data[start:start + length]
    return data + tail, f"append-{kind}+{len(tail)}"


def duplicate(rng, data, fields):
    if not data:
        return data, "duplicate(empty)"
    start, length = _region(rng, len(data), 512)
    chunk = data[start:start + length]
    at = rng.randrange(len(data) + 1)
    return data[:at] + chunk + data[at:], f"duplicate@{start}+{length}->{at}"


def swap(rng, data, fields):
    n = len(data)
    if n < 4:
        return data, "swap(short)"
    length = rng.randrange(1, max(2, min(n // 2, 256)))
    a = rng.randrange(0, n - 2 * length + 1)
    b = rng.randrange(a + length, n - length + 1)
    out = data[:a] + data[b:b + length] + data[a + length:b] + data[a:a + length] + data[b + length:]
    return out, f"swap@{a},{b}+{length}"


def int_boundary(rng, data, fields):
    usable = [(p, s) for p, s in fields if p + s <= len(data)]
    if not usable:
        return overwrite(rng, data, fields)
    position, size = rng.choice(usable)
    value = rng.choice(boundary_values(size, len(data)))
    out = bytearray(data)
    struct.pack_into(_PACK[size], out, position, value)
    return bytes(out), f"int@{position}:{size}={value:#x}"


MUTATORS = {
    "bitflip": bitflip, "overwrite": overwrite, "garbage": garbage, "zero": zero,
    "truncate": truncate, "append": append, "duplicate": duplicate, "swap": swap,
    "int": int_boundary,
}
# Header fields are where the dangerous bugs live: weight the boundary mutation up.
_WEIGHTED = [*MUTATORS.values(), int_boundary, int_boundary, bitflip]


def mutate(rng: random.Random, data: bytes, fields=(), *, count: int | None = None,
           only: str | None = None) -> tuple[bytes, str]:
    """Apply one to three random mutations (``count`` to force; ``only`` names one mutator)."""
    steps = []
    for _ in range(count or rng.choice((1, 1, 1, 2, 3))):
        fn = MUTATORS[only] if only else rng.choice(_WEIGHTED)
        data, what = fn(rng, data, fields)
        steps.append(what)
    return data, " ".join(steps)


# --- text files -----------------------------------------------------------------------------

_NUMBER = re.compile(rb"-?\d+")
_ODD_NUMBERS = [b"-1", b"0", b"-0", b"2147483647", b"2147483648", b"-2147483649",
                b"9223372036854775807", b"9223372036854775808", b"-9223372036854775809",
                b"18446744073709551616", b"99999999999999999999999999999", b"1e3", b"0x10",
                b"1.5", b"NaN", b"", b" ", b"+5", b"\xd9\xa3"]  # last: ARABIC-INDIC DIGIT THREE


def mutate_text(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Token-aware damage to a line-oriented text file, or else a byte mutation."""
    kind = rng.choice(("number", "number", "line-drop", "line-dup", "line-swap", "junk-line",
                       "bad-utf8", "crlf", "bytes", "bytes"))
    lines = data.split(b"\n")
    if kind == "number":
        matches = list(_NUMBER.finditer(data))
        if matches:
            m = rng.choice(matches)
            new = rng.choice(_ODD_NUMBERS)
            return data[:m.start()] + new + data[m.end():], f"number@{m.start()}={new!r}"
    elif kind == "line-drop" and len(lines) > 1:
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + lines[i + 1:]), f"line-drop@{i}"
    elif kind == "line-dup" and lines:
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i + 1] + lines[i:]), f"line-dup@{i}"
    elif kind == "line-swap" and len(lines) > 2:
        i, j = sorted(rng.sample(range(len(lines)), 2))
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines), f"line-swap@{i},{j}"
    elif kind == "junk-line":
        i = rng.randrange(len(lines) + 1)
        junk = rng.choice((b"x", b"a b c d e", b"t 0", b"t -1 5", b"=", b"\x00" * 5,
                           b"version=99", b"t\t0\t5", rng.randbytes(12)))
        return b"\n".join(lines[:i] + [junk] + lines[i:]), f"junk-line@{i}={junk!r}"
    elif kind == "bad-utf8":
        i = rng.randrange(len(data) + 1)
        return data[:i] + b"\xff\xfe\xc3" + data[i:], f"bad-utf8@{i}"
    elif kind == "crlf":
        return data.replace(b"\n", b"\r\n"), "crlf"
    return mutate(rng, data)


_JSON_ODD = [None, True, False, 0, -1, 1.5, 2**63, -(2**63) - 1, 10**30, "", "x", "-1",
             [], [1], {}, {"a": 1}, "00000000-0000-0000-0000-000000000000", "AAAAAAAAAAAAAAAAAAAAAA"]


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def mutate_json(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Replace one value of a JSON document by a value of another type (or delete a key),
    else fall back to the text mutations."""
    try:
        doc = json.loads(data)
    except ValueError:
        return mutate_text(rng, data)
    paths = [p for p in _paths(doc) if p]
    if not paths or rng.random() < 0.25:
        return mutate_text(rng, data)
    path = rng.choice(paths)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[path[-1]]
        what = f"json-del{list(path)}"
    else:
        value = rng.choice(_JSON_ODD)
        parent[path[-1]] = value
        what = f"json{list(path)}={value!r}"
    return json.dumps(doc).encode(), what
