"""Compression of a batch's record area, shared by both backends so they write the same bytes.

Kafka compresses everything after the 61-byte header as one stream (docs/format.md, section 4).
This module maps codec ids to that stream format:

* gzip: a standard gzip member (zlib, mtime 0), level 1-9, default 6 (Deflater's default).
* lz4: Kafka's LZ4 frame: independent 64 KiB blocks, no block or content checksum, no content
  size, i.e. FLG 0x60 and BD 0x40. Level ``None`` uses the fast compressor, as Kafka does at its
  default level; 1-17 use the high-compression compressor.
* zstd: a standard zstd frame (``zstandard``), default level 3.
* snappy: the xerial framing Kafka's snappy-java writes (``cramjam``); raw snappy blocks are
  also read, as Kafka's clients do.

All four codecs are always available: Kafka accepts every one of them, so their libraries
(lz4, zstandard, cramjam) are required dependencies of seglog, not extras (issue 24).

Compression runs once per batch, so a call into these C libraries through Python costs little
next to the work; both twins call the same functions here so their output is byte-identical.

Decompression treats the stream as untrusted (it comes from disk or a client): no library is
asked to allocate what a frame header declares, output is produced in bounded pieces, and a
stream that expands past ``max_decompressed_bytes`` (default 64 MiB) is a
``CorruptRecordError`` after bounded memory (:func:`decompress`).
"""

from __future__ import annotations

import operator
import struct
import sys
import threading
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
    REASON_BAD_COMPRESSION,
    REASON_DECOMPRESSED_TOO_LARGE,
)

import cramjam as _cramjam
import lz4.frame as _lz4_frame
import zstandard as _zstd

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
#: Default of ``max_decompressed_bytes``: a record area that decompresses to more is refused
#: (a decompression bomb costs at most this much memory). 64 MiB is 64 times Kafka's default
#: ``max.message.bytes``; a caller whose batches are larger passes its own limit.
DECOMPRESSED_BYTES_MAX_DEFAULT = 64 * 1024 * 1024
#: Output is produced in pieces of at most this many bytes, so going over the limit is seen
#: within one piece.
_PIECE_BYTES_MAX = 256 * 1024


def codec_id(compression: str | int | None) -> int:
    """Codec id for a name (``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"``, ``"zstd"``) or id.

    Raises :class:`~seglog.errors.UnsupportedCompressionError` for anything else.
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
    return cid


def is_available(compression: str | int) -> bool:
    """True if ``compression`` names a codec Kafka defines (every one of them is built in:
    their libraries are required dependencies)."""
    try:
        codec_id(compression)
    except errors.UnsupportedCompressionError:
        return False
    return True


def check_level(cid: int, level) -> int | None:
    """``level`` checked for codec ``cid`` and returned as an int (None stays None).

    Raises TypeError unless ``level`` is None or an int, and ValueError if it is outside
    Kafka's range for the codec (gzip 1-9, lz4 1-17, zstd -131072..22) or the codec takes no
    level.
    """
    if level is None:
        return None
    try:
        level = operator.index(level)
    except TypeError:
        raise TypeError(
            f"compression level must be an int or None, not {type(level).__name__}"
        ) from None
    low_high = LEVEL_RANGES.get(cid)
    if low_high is None:
        raise ValueError(f"{COMPRESSION_NAMES[cid]} compression takes no level")
    if not low_high[0] <= level <= low_high[1]:
        raise ValueError(
            f"{COMPRESSION_NAMES[cid]} level must be in [{low_high[0]}, {low_high[1]}], got {level}"
        )
    return level


def compress(cid: int, data, level: int | None = None) -> bytes:
    """Compress the record area ``data`` (any bytes-like) with codec ``cid`` at ``level``
    (checked by :func:`check_level`)."""
    level = check_level(cid, level)
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
        zstd_compressor = _zstd.ZstdCompressor(
            level=ZSTD_LEVEL_DEFAULT if level is None else level)
        return zstd_compressor.compress(data)
    if cid == COMPRESSION_SNAPPY:
        return _snappy_xerial_encode(data)
    if cid == COMPRESSION_NONE:
        return bytes(data)
    raise errors.UnsupportedCompressionError(f"unknown compression type id {cid}")


def check_max_decompressed_bytes(max_decompressed_bytes) -> int:
    """``max_decompressed_bytes`` as an int, checked: TypeError unless it is an int
    (``operator.index``), ValueError when negative. Ints above ``sys.maxsize`` mean no
    practical limit and are clamped to it (both twins then agree, and the native twin can
    hold it in a C size)."""
    try:
        limit = operator.index(max_decompressed_bytes)
    except TypeError:
        raise TypeError(
            "max_decompressed_bytes must be an int, not "
            f"{type(max_decompressed_bytes).__name__}"
        ) from None
    if limit < 0:
        raise ValueError(f"max_decompressed_bytes must be >= 0, got {limit}")
    return min(limit, sys.maxsize)


def decompress(
    cid: int,
    data,
    *,
    max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    position: int = -1,
) -> bytes:
    """Decompress a record area (any bytes-like ``data``) compressed with codec ``cid``.

    Every byte of ``data`` is untrusted, so no codec is asked to allocate what a header
    declares (a zstd or lz4 frame's content size, a snappy block's length preamble): each
    stream is decompressed piece by piece, and decompression stops as soon as the output
    exceeds ``max_decompressed_bytes`` (default :data:`DECOMPRESSED_BYTES_MAX_DEFAULT`,
    64 MiB). The memory used is then that limit plus one piece (at most 256 KiB; for zstd
    also the frame's window, which zstd caps at 128 MiB) whatever the input declares.

    One stream is read: one gzip member, one lz4 frame, one zstd frame, or the xerial
    snappy blocks up to the end of ``data`` (or one raw snappy block). Bytes after the end of
    a gzip, lz4 or zstd stream are ignored, as before. A gzip or lz4 stream that stops before
    its end marker is an error; a truncated zstd frame yields the bytes it holds (zstd's
    streaming reader cannot tell), and the record parser then reports the missing records.

    Raises :class:`~seglog.errors.CorruptRecordError` with reason
    ``REASON_DECOMPRESSED_TOO_LARGE`` when the output would exceed the limit and
    ``REASON_BAD_COMPRESSION`` for a stream the codec rejects (``position`` is put on the
    error); :class:`~seglog.errors.UnsupportedCompressionError` for an unknown codec id;
    TypeError/ValueError for a bad
    ``max_decompressed_bytes`` (see :func:`check_max_decompressed_bytes`).
    """
    limit = check_max_decompressed_bytes(max_decompressed_bytes)
    if cid == COMPRESSION_NONE:
        if len(memoryview(data).cast("B")) > limit:
            raise _too_large(cid, limit, position)
        return bytes(data)
    if cid not in COMPRESSION_NAMES:
        raise errors.UnsupportedCompressionError(f"unknown compression type id {cid}")
    try:
        if cid == COMPRESSION_LZ4:
            return _lz4_decompress(data, limit, position)
        if cid == COMPRESSION_GZIP:
            return _gzip_decompress(data, limit, position)
        if cid == COMPRESSION_ZSTD:
            return _zstd_decompress(data, limit, position)
        return _snappy_decode(data, limit, position)
    except errors.SeglogError:
        raise
    except MemoryError:
        # With every allocation bounded by the limit, running out of memory says something
        # about the machine (or a limit the caller set too high), not about the bytes.
        raise
    except Exception as exc:  # each library has its own error types
        raise errors.CorruptRecordError(
            f"cannot decompress {COMPRESSION_NAMES[cid]} record area: {exc}",
            reason=REASON_BAD_COMPRESSION, position=position,
        ) from exc


def _too_large(cid: int, limit: int, position: int) -> errors.CorruptRecordError:
    return errors.CorruptRecordError(
        f"{COMPRESSION_NAMES.get(cid, cid)} record area at position {position} decompresses "
        f"to more than {limit} bytes (max_decompressed_bytes)",
        reason=REASON_DECOMPRESSED_TOO_LARGE, position=position,
    )


def _truncated(cid: int, position: int) -> errors.CorruptRecordError:
    return errors.CorruptRecordError(
        f"{COMPRESSION_NAMES[cid]} record area at position {position} ends before its stream does",
        reason=REASON_BAD_COMPRESSION, position=position,
    )


def _piece_bytes(limit: int, total: int) -> int:
    # The next piece of output to ask for: at most one byte past the limit (so going over it
    # is seen without producing more), and never more than _PIECE_BYTES_MAX at once.
    return min(limit + 1 - total, _PIECE_BYTES_MAX)


def _gzip_decompress(data, limit: int, position: int) -> bytes:
    # zlib grows its output buffer as it goes (it never sizes it from the stream); max_length
    # stops it one byte past the limit.
    decompressor = zlib.decompressobj(47)  # 32 + 15: accept gzip or zlib headers
    out = decompressor.decompress(data, min(limit + 1, sys.maxsize))
    if len(out) > limit:
        raise _too_large(COMPRESSION_GZIP, limit, position)
    if not decompressor.eof:
        raise _truncated(COMPRESSION_GZIP, position)
    return out


def _lz4_decompress(data, limit: int, position: int) -> bytes:
    # lz4.frame.decompress() sizes its output from the frame's content-size field; the
    # incremental decompressor with max_length allocates only what it is asked for.
    decompressor = _lz4_frame.LZ4FrameDecompressor()
    pieces, total = [], 0
    piece = decompressor.decompress(data, max_length=_piece_bytes(limit, total))
    # Bounded: each turn adds output (total grows to at most limit + 1) or ends the loop.
    while True:
        pieces.append(piece)
        total += len(piece)
        if total > limit:
            raise _too_large(COMPRESSION_LZ4, limit, position)
        if decompressor.eof:
            break
        if decompressor.needs_input:
            raise _truncated(COMPRESSION_LZ4, position)
        piece = decompressor.decompress(b"", max_length=_piece_bytes(limit, total))
        if not piece and not decompressor.eof:
            raise _truncated(COMPRESSION_LZ4, position)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


_zstd_state = threading.local()


def _zstd_decompressor():
    # A ZstdDecompressor may not be used by two threads at once; making one costs ~30 us
    # (its context), a third of a 100 KB decode, so each thread keeps its own.
    decompressor = getattr(_zstd_state, "decompressor", None)
    if decompressor is None:
        decompressor = _zstd_state.decompressor = _zstd.ZstdDecompressor()
    return decompressor


def _zstd_decompress(data, limit: int, position: int) -> bytes:
    # ZstdDecompressor.decompress() allocates the frame's declared content size and a
    # decompressobj() returns all output at once; read_to_iter yields pieces of at most
    # write_size bytes and decodes nothing more until asked, so the loop can stop at the limit.
    pieces, total = [], 0
    reader = _zstd_decompressor().read_to_iter(
        data, read_size=_PIECE_BYTES_MAX, write_size=_PIECE_BYTES_MAX
    )
    try:
        for piece in reader:  # bounded: stops one piece past the limit
            pieces.append(piece)
            total += len(piece)
            if total > limit:
                raise _too_large(COMPRESSION_ZSTD, limit, position)
    finally:
        # The reader holds a buffer export of ``data`` until it is freed; when we stop early it
        # is not exhausted, and the traceback would keep it (and the export) alive. The native
        # codec's ``data`` is a memoryview over a batch that it must release right after.
        del reader
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _snappy_xerial_encode(data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
        block = bytes(_cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_block(block, limit: int, total: int, position: int) -> bytes:
    # A raw snappy block starts with its uncompressed length (a varint up to 2**32 - 1) and
    # the decoder allocates that much: check it against what the limit leaves first.
    declared = _cramjam.snappy.decompress_raw_len(block)
    if declared > limit - total:
        raise _too_large(COMPRESSION_SNAPPY, limit, position)
    return bytes(_cramjam.snappy.decompress_raw(block))


def _snappy_decode(data, limit: int, position: int) -> bytes:
    view = memoryview(data).cast("B")
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return _snappy_block(view, limit, 0, position)
    if len(view) < _XERIAL_HEADER.size:
        raise _truncated(COMPRESSION_SNAPPY, position)
    position_in_area, end, parts, total = _XERIAL_HEADER.size, len(view), [], 0
    # Bounded: each turn moves past a 4-byte length and its block, or raises.
    while position_in_area < end:
        if position_in_area + 4 > end:
            raise errors.CorruptRecordError(
                "truncated xerial snappy block length",
                reason=REASON_BAD_COMPRESSION, position=position,
            )
        (length,) = _BLOCK_LENGTH.unpack_from(view, position_in_area)
        position_in_area += 4
        if length < 0 or position_in_area + length > end:
            raise errors.CorruptRecordError(
                "xerial snappy block runs past the record area",
                reason=REASON_BAD_COMPRESSION, position=position,
            )
        part = _snappy_block(view[position_in_area : position_in_area + length], limit, total,
                             position)
        parts.append(part)
        total += len(part)
        position_in_area += length
    return b"".join(parts)
