"""Helpers shared by the segment and recovery tests: batch building and byte poking, and
the resident size of a segment's mapping."""

from __future__ import annotations

import os
import struct

import seglog
from seglog import format as fmt


def encoder(backend):
    """The backend's encode_batch (the pure one while the native codec is not built: both
    backends read each other's bytes, which the byte-identity test checks)."""
    return getattr(backend, "encode_batch", None) or seglog.get_backend("pure").encode_batch


def batch(backend, count=3, *, value_bytes=50, base_offset=0, timestamp_ms=1000, step_ms=0):
    """One uncompressed batch of ``count`` records with timestamps from ``timestamp_ms``."""
    values = [bytes([65 + i % 26]) * value_bytes for i in range(count)]
    timestamps = [timestamp_ms + i * step_ms for i in range(count)]
    return encoder(backend)(values, timestamps_ms=timestamps, base_offset=base_offset)


def recrc(raw: bytes | bytearray) -> bytes:
    """``raw`` (one batch) with its CRC32C recomputed after a header edit."""
    buf = bytearray(raw)
    crc = seglog.get_backend("pure").crc32c(bytes(buf[fmt.ATTRIBUTES_POSITION:]))
    struct.pack_into(">I", buf, fmt.CRC_POSITION, crc)
    return bytes(buf)


def with_field(raw: bytes, position: int, code: str, value, *, fix_crc=True) -> bytes:
    buf = bytearray(raw)
    struct.pack_into(">" + code, buf, position, value)
    return recrc(buf) if fix_crc else bytes(buf)


def records(backend, view):
    """(offset, timestamp_ms, value) of every record in ``view`` (decoded by the pure codec)."""
    out = []
    for b in seglog.get_backend("pure").iter_batches(bytes(view)):
        out.extend((r.offset, r.timestamp_ms, r.value) for r in b.records())
    return out


def log_file(d, base=0):
    """Path of the ``.log`` file of the segment with ``base`` offset in directory ``d``."""
    return os.path.join(d, f"{base:020d}.log")


def batch_starts(path):
    """Positions of the batches in a ``.log`` file (walked by their length fields)."""
    data = open(path, "rb").read()
    out, position = [], 0
    while position < len(data):
        out.append(position)
        position += 12 + int.from_bytes(data[position + 8:position + 12], "big")
    return out


def mapping_rss_bytes(path: str) -> int:
    """Resident bytes of this process's mappings of the file ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if fields and "-" in fields[0] and ":" not in fields[0]:
                inside = len(fields) >= 6 and fields[5] == path
            elif inside and fields and fields[0] == "Rss:":
                total += int(fields[1]) * 1024
    return total
