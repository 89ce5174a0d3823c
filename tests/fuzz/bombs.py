"""Compression bombs: small batches whose record area inflates to gigabytes, one per codec.

Each is built in milliseconds by repeating one compressed piece (a zstd RLE block, a
full-flushed deflate block, an independent lz4 block, a snappy block) instead of compressing
gigabytes, plus streams that *declare* a huge output (a snappy length preamble, a zstd or lz4
content size) without holding it. Every batch has a valid CRC and a record count, so it
reaches the decompressor on every path. Reading or appending one must end in a typed error
after bounded memory.
"""

from __future__ import annotations

import struct
import zlib

from . import corpus, inputs

GIB = 1 << 30


def batch(codec_id: int, stream: bytes, *, record_count: int = 1) -> bytes:
    """A v2 batch at base offset 0 around ``stream`` with a correct CRC."""
    header = bytearray(61)
    struct.pack_into(">qiibIhiqqqhii", header, 0, 0, 49 + len(stream), -1, 2, 0, codec_id,
                     record_count - 1, corpus.T0_MS, corpus.T0_MS, -1, -1, -1, record_count)
    return inputs.fix_crc(bytes(header) + stream)


def zstd_rle(total_bytes: int) -> bytes:
    """A zstd frame of RLE blocks (4 bytes each, 128 KiB of output each), no content size."""
    block_max = 128 * 1024
    out = bytearray(b"\x28\xb5\x2f\xfd" + bytes([0x00, 0x38]))  # FHD 0, window 128 KiB
    remaining = total_bytes
    while remaining > 0:
        size = min(block_max, remaining)
        remaining -= size
        last = 1 if remaining == 0 else 0
        out += ((size << 3) | (1 << 1) | last).to_bytes(3, "little") + b"\x00"
    return bytes(out)


def gzip_repeat(total_bytes: int) -> bytes:
    """A gzip member whose deflate stream repeats one full-flushed 16 MiB-of-zeros block
    (no trailer: the decompressor must give up before it would check one)."""
    chunk = bytes(16 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    return head + block * max(0, total_bytes // len(chunk) - 1)


def lz4_repeat(total_bytes: int) -> bytes:
    """An lz4 frame of independent 4 MiB blocks of zeros, repeated."""
    import lz4.frame

    piece = 4 << 20
    frame = lz4.frame.compress(bytes(piece), block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                               block_linked=False, content_checksum=False, store_size=False)
    header_len = 7  # magic 4, FLG, BD, HC (no content size)
    (size,) = struct.unpack_from("<I", frame, header_len)
    block = frame[header_len:header_len + 4 + (size & 0x7FFFFFFF)]
    return frame[:header_len] + block * (total_bytes // piece) + b"\x00\x00\x00\x00"


def snappy_declared(declared_bytes: int) -> bytes:
    """The issue's 67-byte case: xerial framing around a raw block whose length preamble
    declares ``declared_bytes`` of output."""
    varint, v = bytearray(), declared_bytes
    while True:
        byte, v = v & 0x7F, v >> 7
        varint.append(byte | (0x80 if v else 0))
        if not v:
            break
    raw = bytes(varint) + b"\x00" * 8
    return b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(raw)) + raw


def snappy_repeat(total_bytes: int) -> bytes:
    """xerial blocks each holding 1 MiB of zeros, repeated."""
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(bytes(1 << 20)))
    block = struct.pack(">i", len(raw)) + raw
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + block * (total_bytes >> 20)


def zstd_declared(size: int) -> bytes:
    """A single-segment zstd frame declaring ``size`` bytes of content, holding one RLE
    block."""
    return (b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", size)
            + ((16 << 3) | (1 << 1) | 1).to_bytes(3, "little") + b"\x00")


def all_bombs() -> list[tuple[str, bytes]]:
    """``(name, batch bytes)``: every bomb, each under 1 MiB (Kafka's default
    max.message.bytes) so that append_raw must decompress it to judge it."""
    out = [
        ("zstd-rle-4GiB", batch(4, zstd_rle(4 * GIB))),
        ("zstd-rle-4GiB-maxcount", batch(4, zstd_rle(4 * GIB), record_count=2**31 - 1)),
        ("zstd-declares-2^64-1", batch(4, zstd_declared(2**64 - 1))),
        ("gzip-1GiB", batch(1, gzip_repeat(GIB))),
        ("lz4-192MiB", batch(3, lz4_repeat(192 << 20))),
        ("snappy-declares-4GiB", batch(2, snappy_declared(2**32 - 1))),
        ("snappy-declares-2GiB-raw", batch(2, snappy_declared(2**31)[16:])),
        ("snappy-16MiB", batch(2, snappy_repeat(16 << 20))),
    ]
    for name, raw in out:
        assert len(raw) < (1 << 20), (name, len(raw))
    return out
