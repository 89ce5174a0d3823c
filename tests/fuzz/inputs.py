"""Parser inputs, generated from ``(seed, index)`` alone so any one can be replayed.

:func:`codec_input` returns a :class:`CodecInput`: the bytes, how they were made, and
``known``: for every valid seed batch, its CRC-covered bytes mapped to its records relative
to its base offset. A decoded batch whose covered bytes are known must decode to exactly those
records; one whose bytes are unknown must at least have a valid CRC (else corrupt bytes were
served as data).

The mix: plain mutations of seed batches (every mutator, header fields aimed at); mutations
followed by a CRC fix-up (so the damage reaches the record parser and the decompressors
instead of stopping at the CRC check); the compressed stream of a batch replaced by a
mutated or hostile stream, CRC fixed; and random garbage.
"""

from __future__ import annotations

import random
import struct
from typing import NamedTuple

import seglog

from . import corpus, mutate

_SEEDS: list | None = None
_KNOWN: dict | None = None


class CodecInput(NamedTuple):
    data: bytes
    how: str
    known: dict


def _crc32c():
    return seglog.get_backend("native").crc32c


def fix_crc(data: bytes, position: int = 0) -> bytes:
    """Recompute the CRC of the batch at ``position`` over its declared length (if it fits)."""
    if len(data) < position + 61:
        return data
    (length,) = struct.unpack_from(">i", data, position + 8)
    end = min(len(data), position + 12 + max(length, 9))
    out = bytearray(data)
    struct.pack_into(">I", out, position + 17, _crc32c()(bytes(out[position + 21:end])))
    return bytes(out)


def seeds() -> tuple[list, dict]:
    """The seed buffers and the ``known`` map (covered bytes -> relative records)."""
    global _SEEDS, _KNOWN
    if _SEEDS is None:
        pure = seglog.get_backend("pure")
        _SEEDS = corpus.codec_seeds()
        _KNOWN = {}
        for _name, raw in _SEEDS:
            for batch in pure.iter_batches(raw):
                start = batch.position
                covered = bytes(raw[start + 21:start + batch.size_bytes])
                _KNOWN[covered] = relative_records(batch.records(), batch.base_offset)
    return _SEEDS, _KNOWN


def relative_records(records, base_offset: int) -> list:
    out = []
    for r in records:
        headers = tuple((k, None if v is None else bytes(v)) for k, v in (r.headers or ()))
        out.append(((r.offset - base_offset) & (2**64 - 1), r.timestamp_ms,
                    None if r.key is None else bytes(r.key),
                    None if r.value is None else bytes(r.value), headers))
    return out


def _hostile_stream(rng: random.Random, codec_id: int) -> tuple[bytes, str]:
    """A compressed stream that lies: huge declared sizes, truncated frames, junk."""
    if codec_id == 2:  # snappy: raw (varint length preamble) or xerial framing
        declared = rng.choice((2**32 - 1, 2**31, 1 << 30, 100))
        varint = bytearray()
        v = declared
        while True:
            byte, v = v & 0x7F, v >> 7
            varint.append(byte | (0x80 if v else 0))
            if not v:
                break
        raw = bytes(varint) + b"\x00" + rng.randbytes(rng.randrange(0, 20))
        if rng.random() < 0.5:
            block = raw
            return (b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block))
                    + block), f"snappy-xerial-declares-{declared}"
        return raw, f"snappy-raw-declares-{declared}"
    if codec_id == 3:  # lz4 frame with a content size field
        size = rng.choice((2**64 - 1, 2**40, 1 << 31))
        flg = 0x68  # version 01, block independence, content size
        header = bytes([flg, 0x70]) + struct.pack("<Q", size)
        return b"\x04\x22\x4d\x18" + header + b"\x00" + rng.randbytes(rng.randrange(0, 30)), \
            f"lz4-declares-{size}"
    if codec_id == 4:  # zstd frame header declaring a huge content size
        size = rng.choice((2**64 - 1, 2**40, 1 << 32))
        return (b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", size)
                + rng.randbytes(rng.randrange(0, 30))), f"zstd-declares-{size}"
    # gzip: a header then junk
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + rng.randbytes(rng.randrange(0, 40)), \
        "gzip-junk"


def codec_input(seed: int, index: int) -> CodecInput:
    """The ``index``-th input of run ``seed``."""
    seed_list, known = seeds()
    rng = random.Random(f"codec:{seed}:{index}")
    roll = rng.random()
    if roll < 0.04:
        data = rng.randbytes(rng.choice((0, 1, 16, 17, 60, 61, 62, rng.randrange(200))))
        return CodecInput(data, "random", known)
    name, raw = rng.choice(seed_list)
    if roll < 0.10:
        # A valid header (with a fitting length) over random record bytes, CRC fixed.
        body = rng.randbytes(rng.randrange(0, 120))
        header = bytearray(raw[:61])
        struct.pack_into(">i", header, 8, 49 + len(body))
        struct.pack_into(">i", header, 57, rng.choice((0, 1, 2, 5, 1000, 2**31 - 1, -1)))
        header[22] = rng.choice((0, 0, 1, 2, 3, 4, 5, 7))  # low attribute byte: codec
        return CodecInput(fix_crc(bytes(header) + body), f"{name}: random body", known)
    if roll < 0.22 and len(raw) > 61:
        # The record area (or compressed stream) replaced, CRC fixed.
        codec_id = raw[22] & 7
        if codec_id and rng.random() < 0.5:
            stream, how = _hostile_stream(rng, codec_id)
        else:
            stream, how = mutate.mutate(rng, raw[61:], ())
        data = bytearray(raw[:61] + stream)
        struct.pack_into(">i", data, 8, len(data) - 12)
        return CodecInput(fix_crc(bytes(data)), f"{name}: area {how}", known)
    data, how = mutate.mutate(rng, raw, corpus.batch_fields(raw))
    if roll < 0.50:
        return CodecInput(fix_crc(data), f"{name}: {how} +crc", known)
    return CodecInput(data, f"{name}: {how}", known)
