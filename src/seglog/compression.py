"""Compression of a batch's record area, shared by both backends so they write the same bytes.

Kafka compresses everything after the 61-byte header as one stream (kafka-format.md §1.4).
This module maps codec ids to that stream format:

* gzip: a standard gzip member (zlib, mtime 0), level 1-9, default 6 (Deflater's default).
* lz4: Kafka's LZ4 frame: independent 64 KiB blocks, no block or content checksum, no content
  size, i.e. FLG 0x60 and BD 0x40. Level ``None`` uses the fast compressor, as Kafka does at its
  default level; 1-17 use the high-compression compressor.
* zstd: a standard zstd frame (``zstandard``, the ``seglog[zstd]`` extra), default level 3.
* snappy: the xerial framing Kafka's snappy-java writes (``cramjam``, the ``seglog[snappy]``
  extra); raw snappy blocks are also read, as Kafka's clients do.

Compression runs once per batch, so a call into these C libraries through Python costs little
next to the work; both twins call the same functions here so their output is byte-identical.
"""

from __future__ import annotations

import struct
import zlib

from . import errors
from .format import (
    COMPRESSION_GZIP,
    COMPRESSION_IDS,
    COMPRESSION_LZ4,
    COMPRESSION_NAMES,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)

try:  # lz4 is a hard dependency, but give a typed error if the install is broken
    import lz4.frame as _lz4_frame
except ImportError:  # pragma: no cover - exercised only on a broken install
    _lz4_frame = None

try:
    import zstandard as _zstd
except ImportError:
    _zstd = None

try:
    import cramjam as _cramjam
except ImportError:
    _cramjam = None

GZIP_LEVEL_DEFAULT = 6
ZSTD_LEVEL_DEFAULT = 3
LEVEL_RANGES = {
    COMPRESSION_GZIP: (1, 9),
    COMPRESSION_LZ4: (1, 17),
    COMPRESSION_ZSTD: (-131072, 22),
}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version 1, compatible version 1
_XERIAL_BLOCK_BYTES = 32 * 1024
_BLOCK_LENGTH = struct.Struct(">i")
#: A decompressed record area larger than this is refused (guards against decompression bombs).
DECOMPRESSED_BYTES_MAX = 1 << 31


def codec_id(compression: str | int | None) -> int:
    """Codec id for a name (``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"``, ``"zstd"``) or id.

    Raises :class:`~seglog.errors.UnsupportedCompressionError` for anything else, and for
    snappy or zstd when their optional package is not installed.
    """
    if compression is None:
        return COMPRESSION_NONE
    if isinstance(compression, str):
        try:
            cid = COMPRESSION_IDS[compression.lower()]
        except KeyError:
            raise errors.UnsupportedCompressionError(
                f"unknown compression {compression!r}; expected one of {sorted(COMPRESSION_IDS)}"
            ) from None
    elif isinstance(compression, int) and not isinstance(compression, bool):
        if compression not in COMPRESSION_NAMES:
            raise errors.UnsupportedCompressionError(f"unknown compression type id {compression}")
        cid = compression
    else:
        raise errors.UnsupportedCompressionError(
            f"compression must be a name or codec id, not {type(compression).__name__}"
        )
    _require(cid)
    return cid


def is_available(compression: str | int) -> bool:
    """True if this install can encode and decode ``compression``."""
    try:
        codec_id(compression)
    except errors.UnsupportedCompressionError:
        return False
    return True


def _require(cid: int) -> None:
    missing = {
        COMPRESSION_LZ4: (_lz4_frame, "lz4"),
        COMPRESSION_ZSTD: (_zstd, "zstandard (pip install 'seglog[zstd]')"),
        COMPRESSION_SNAPPY: (_cramjam, "cramjam (pip install 'seglog[snappy]')"),
    }.get(cid)
    if missing is not None and missing[0] is None:
        raise errors.UnsupportedCompressionError(
            f"{COMPRESSION_NAMES[cid]} compression needs the package {missing[1]}"
        )


def check_level(cid: int, level: int | None) -> None:
    """Raise ``ValueError`` if ``level`` is outside Kafka's range for codec ``cid``."""
    if level is None:
        return
    low_high = LEVEL_RANGES.get(cid)
    if low_high is None:
        raise ValueError(f"{COMPRESSION_NAMES[cid]} compression takes no level")
    if not low_high[0] <= level <= low_high[1]:
        raise ValueError(
            f"{COMPRESSION_NAMES[cid]} level must be in [{low_high[0]}, {low_high[1]}], got {level}"
        )


def compress(cid: int, data, level: int | None = None) -> bytes:
    """Compress the record area ``data`` (any bytes-like) with codec ``cid`` at ``level``."""
    check_level(cid, level)
    if cid == COMPRESSION_LZ4:
        return _lz4_frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=_lz4_frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    if cid == COMPRESSION_GZIP:
        # wbits 31 = gzip wrapper; zlib writes mtime 0, so output is deterministic.
        compressor = zlib.compressobj(GZIP_LEVEL_DEFAULT if level is None else level, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if cid == COMPRESSION_ZSTD:
        _require(cid)
        compressor = _zstd.ZstdCompressor(level=ZSTD_LEVEL_DEFAULT if level is None else level)
        return compressor.compress(data)
    if cid == COMPRESSION_SNAPPY:
        _require(cid)
        return _snappy_xerial_encode(data)
    if cid == COMPRESSION_NONE:
        return bytes(data)
    raise errors.UnsupportedCompressionError(f"unknown compression type id {cid}")


def decompress(cid: int, data) -> bytes:
    """Decompress a record area compressed with codec ``cid``.

    Raises :class:`~seglog.errors.CorruptRecordError` if the stream is not valid for the codec.
    """
    try:
        if cid == COMPRESSION_LZ4:
            return _lz4_frame.decompress(data)
        if cid == COMPRESSION_GZIP:
            decompressor = zlib.decompressobj(47)  # 32 + 15: accept gzip or zlib headers
            out = decompressor.decompress(data, DECOMPRESSED_BYTES_MAX)
            if decompressor.unconsumed_tail:
                raise errors.CorruptRecordError("gzip stream expands past the size limit")
            return out
        if cid == COMPRESSION_ZSTD:
            _require(cid)
            decompressor = _zstd.ZstdDecompressor().decompressobj()
            return decompressor.decompress(bytes(data))
        if cid == COMPRESSION_SNAPPY:
            _require(cid)
            return _snappy_decode(data)
        if cid == COMPRESSION_NONE:
            return bytes(data)
    except errors.SeglogError:
        raise
    except Exception as exc:  # each library has its own error types
        raise errors.CorruptRecordError(
            f"cannot decompress {COMPRESSION_NAMES.get(cid, cid)} record area: {exc}"
        ) from exc
    raise errors.UnsupportedCompressionError(f"unknown compression type id {cid}")


def _snappy_xerial_encode(data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
        block = bytes(_cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decode(data) -> bytes:
    view = memoryview(data).cast("B")
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(_cramjam.snappy.decompress_raw(view))
    position, end, parts = _XERIAL_HEADER.size, len(view), []
    while position < end:
        if position + 4 > end:
            raise errors.CorruptRecordError("truncated xerial snappy block length")
        (length,) = _BLOCK_LENGTH.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > end:
            raise errors.CorruptRecordError("xerial snappy block runs past the record area")
        parts.append(bytes(_cramjam.snappy.decompress_raw(view[position : position + length])))
        position += length
    return b"".join(parts)
