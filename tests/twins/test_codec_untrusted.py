"""The codec treats every byte it decodes as untrusted (issue 8, the codec's part), on both twins.

* CRC32C is checked by default on every path that decodes records (``Batch.records``,
  ``columns``, ``record_at``, ``control_type`` and ``decode_columns``), once per Batch, with a
  ``check_crcs=False`` opt-out; whole-batch paths (``iter_batches``, header fields) do not hash.
* Offsets: a header whose last offset overflows an int64 is corrupt in both twins alike;
  ``check_offsets=True`` makes ``iter_batches``/``decode_columns`` require increasing offsets.
* Decompression is bounded for every codec (``max_decompressed_bytes``): bombs that declare or
  produce gigabytes fail with a typed error inside a process whose address space is capped, so
  a blow-up is a failed test, not a dead run.
* Bad arguments: one table, both twins, the same exception class, never an OverflowError.

Mutated and truncated batches are in ``test_codec_untrusted_mutation.py``.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

import seglog
from seglog import compression, format
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    SeglogError,
    UnsupportedCompressionError,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COMPRESSED = [
    pytest.param(name, id=name) for name in CODECS[1:]
]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
PURE = seglog.get_backend("pure")


def make_batch(area: bytes, record_count: int, **fields) -> bytes:
    """A v2 batch around a record area, with a correct CRC unless ``crc`` is given; header
    fields (``format.BATCH_HEADER_FIELDS`` names) may be overridden."""
    header = dict(
        base_offset=0, batch_length=49 + len(area), partition_leader_epoch=-1, magic=2,
        crc=0, attributes=0, last_offset_delta=max(record_count - 1, 0), base_timestamp=0,
        max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        records_count=record_count,
    )
    fix_crc = "crc" not in fields
    header.update(fields)
    batch = bytearray(
        format.BATCH_HEADER.pack(*(header[name] for name, _ in format.BATCH_HEADER_FIELDS)) + area
    )
    if fix_crc:
        struct.pack_into(">I", batch, format.CRC_POSITION, PURE.crc32c(batch[21:]))
    return bytes(batch)


def with_crc(raw) -> bytes:
    """``raw`` (one batch) with its CRC recomputed."""
    raw = bytearray(raw)
    struct.pack_into(">I", raw, format.CRC_POSITION, PURE.crc32c(raw[21:]))
    return bytes(raw)


def with_base_offset(raw, base_offset: int) -> bytes:
    """``raw`` (one batch) with another base offset: outside the CRC, so still valid."""
    raw = bytearray(raw)
    struct.pack_into(">q", raw, 0, base_offset)
    return bytes(raw)


def one_batch(backend, raw):
    (batch,) = list(backend.iter_batches(raw))
    return batch


def sample_batch(backend, codec="none", **kwargs) -> bytes:
    return backend.encode_batch(
        [b"value-%d" % i for i in range(5)], keys=[None, b"k1", None, b"k3", b"k4"],
        timestamps_ms=[10, 11, 12, 13, 14], headers=[[("h", b"x")], None, [], None, None],
        compression=codec, **kwargs,
    )


def flip_value_byte(raw: bytes) -> bytes:
    """``raw`` with one byte of the first value changed (inside the CRC, outside the header)."""
    raw = bytearray(raw)
    position = raw.index(b"value-0") + len(b"value-")
    raw[position] ^= 0x01
    return bytes(raw)


# --- 1. CRC32C on every path that decodes records ----------------------------------------------

DECODE_PATHS = {
    "records": lambda batch, **kw: [tuple(r) for r in batch.records(**kw)],
    "columns": lambda batch, **kw: [batch.columns(**kw).value(i) for i in range(5)],
    "record_at": lambda batch, **kw: tuple(batch.record_at(batch.base_offset, **kw)),
}


@pytest.mark.parametrize("path", list(DECODE_PATHS))
@pytest.mark.parametrize("codec", ["none", *COMPRESSED])
def test_decoders_check_the_crc_by_default(backend, path, codec):
    raw = sample_batch(backend, codec)
    assert DECODE_PATHS[path](one_batch(backend, raw))  # the untouched batch decodes
    bad = bytearray(raw)
    bad[-1] ^= 0x01  # inside the CRC (for a compressed batch, inside the stream)
    bad = bytes(bad)
    with pytest.raises(CorruptRecordError) as info:
        DECODE_PATHS[path](one_batch(backend, bad))
    assert (info.value.reason, info.value.position) == (format.REASON_CRC_MISMATCH, 0)
    with pytest.raises(CorruptRecordError) as info:
        DECODE_PATHS[path](one_batch(backend, bad), check_crcs=True)
    assert info.value.reason == format.REASON_CRC_MISMATCH


def test_a_changed_value_is_an_error_not_data(backend):
    # The symptom: a flipped bit in a record value came back as a changed value.
    raw = flip_value_byte(sample_batch(backend))
    for path in DECODE_PATHS.values():
        with pytest.raises(CorruptRecordError, match="crc"):
            path(one_batch(backend, raw))
    with pytest.raises(CorruptRecordError) as info:
        backend.decode_columns(raw)
    assert info.value.reason == format.REASON_CRC_MISMATCH
    # The opt-out decodes what is there (for bytes the caller verified otherwise).
    assert one_batch(backend, raw).records(check_crcs=False)[0].value == b"value-1"
    assert backend.decode_columns(raw, check_crcs=False).value(0) == b"value-1"
    assert one_batch(backend, raw).record_at(0, check_crcs=False).value == b"value-1"


def test_control_type_checks_the_crc(backend):
    raw = bytearray(backend.encode_control_batch(1, producer_id=7, producer_epoch=0,
                                                 timestamp_ms=5))
    raw[-2] ^= 0x01  # the marker's coordinator epoch (the last byte is the header count)
    with pytest.raises(CorruptRecordError) as info:
        one_batch(backend, bytes(raw)).control_type()
    assert info.value.reason == format.REASON_CRC_MISMATCH
    assert one_batch(backend, bytes(raw)).control_type(check_crcs=False) == 1


def test_decode_columns_checks_control_and_empty_batches_too(backend):
    data = sample_batch(backend, base_offset=0)
    marker = bytearray(backend.encode_control_batch(0, producer_id=1, producer_epoch=0,
                                                    base_offset=5, timestamp_ms=1))
    empty = bytearray(make_batch(b"", 0, base_offset=6, attributes=format.COMPRESSION_GZIP))
    assert len(backend.decode_columns(data + bytes(marker) + bytes(empty))) == 5
    marker[-1] ^= 0x01
    with pytest.raises(CorruptRecordError) as info:
        backend.decode_columns(data + bytes(marker) + bytes(empty))
    assert (info.value.reason, info.value.position) == (format.REASON_CRC_MISMATCH, len(data))
    empty[format.MAX_TIMESTAMP_POSITION] ^= 0x01
    with pytest.raises(CorruptRecordError) as info:
        backend.decode_columns(data + bytes(empty))
    assert info.value.position == len(data)
    assert len(backend.decode_columns(data + bytes(marker) + bytes(empty), check_crcs=False)) == 5
    batch = one_batch(backend, bytes(empty))
    with pytest.raises(CorruptRecordError):
        batch.records()
    assert batch.records(check_crcs=False) == []


def test_decode_columns_stops_checking_at_max_records(backend):
    # Batches past max_records are not decoded, so their CRC is not looked at.
    first, second = sample_batch(backend), flip_value_byte(sample_batch(backend, base_offset=5))
    assert len(backend.decode_columns(first + second, max_records=5)) == 5
    with pytest.raises(CorruptRecordError):
        backend.decode_columns(first + second, max_records=6)


def test_the_crc_is_computed_once_per_batch(backend):
    # Proven without a clock: after the first decode the bytes change under the Batch, and
    # the same Batch goes on trusting its verdict while a new Batch over them does not.
    buffer = bytearray(sample_batch(backend))
    batch = one_batch(backend, buffer)
    assert batch.record_at(1).value == b"value-1"
    buffer[buffer.index(b"value-3") + 6] ^= 0x01
    assert batch.record_at(3).value == b"value-2"  # the verdict was kept: value-3 flipped
    with pytest.raises(CorruptRecordError):
        one_batch(backend, buffer).record_at(3)
    # is_valid() always hashes (and refreshes the verdict the decoders use).
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError):
        batch.records()


def test_raw_paths_do_not_check_the_crc(backend):
    raw = flip_value_byte(sample_batch(backend))
    batch = one_batch(backend, raw)  # iter_batches serves the batch
    assert (batch.base_offset, batch.record_count, batch.next_offset) == (0, 5, 5)
    assert not batch.is_valid()
    assert backend.Batch(raw).record_count == 5


def test_threaded_decode_checks_every_crc(backend, monkeypatch):
    # decode_columns parses big buffers on two threads (native): the CRC of each batch is
    # checked there too, and the first bad batch in order is reported. The twin has one path;
    # it must give the same answers.
    threaded = backend.name == "native"
    if threaded:
        codec_module = sys.modules["seglog._native.codec"]
        monkeypatch.setattr(codec_module, "_THREADED_BYTES_MIN", 1)
        monkeypatch.setattr(codec_module, "_THREADED_CPUS", True)  # also on a 1-CPU runner,
        monkeypatch.setattr(codec_module, "_THREADED_LOAD_MAX", float("inf"))  # and a busy one
        before = codec_module._threaded_decode_count()
    batches = [sample_batch(backend, base_offset=5 * i) for i in range(12)]
    assert len(backend.decode_columns(b"".join(batches), check_offsets=True)) == 60
    if threaded:
        assert codec_module._threaded_decode_count() == before + 1
    for bad_index in (2, 10):  # one in each half
        bad = list(batches)
        bad[bad_index] = flip_value_byte(bad[bad_index])
        with pytest.raises(CorruptRecordError) as info:
            backend.decode_columns(b"".join(bad))
        assert info.value.reason == format.REASON_CRC_MISMATCH
        assert info.value.position == sum(len(b) for b in batches[:bad_index])
        assert len(backend.decode_columns(b"".join(bad), check_crcs=False)) == 60
    if threaded:  # the good buffers took the threaded path, the bad ones fell back
        assert codec_module._threaded_decode_count() == before + 3


# --- 2. Offsets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("base_offset, last_offset_delta", [
    (INT64_MAX, 0), (INT64_MAX - 1, 1), (INT64_MAX - 5, 2**31 - 1), (INT64_MIN, -1),
    (INT64_MIN + 3, -2**31),
])
def test_a_last_offset_outside_int64_is_corrupt(backend, base_offset, last_offset_delta):
    # Before, the twins read this header differently (native wrapped, pure did not).
    raw = make_batch(b"", 0, base_offset=base_offset, last_offset_delta=last_offset_delta)
    for read in (lambda: list(backend.iter_batches(raw)), lambda: backend.Batch(raw),
                 lambda: backend.decode_columns(raw)):
        with pytest.raises(CorruptRecordError) as info:
            read()
        assert (info.value.reason, info.value.position) == (
            format.REASON_BAD_LAST_OFFSET_DELTA, 0)


def test_the_largest_last_offset(backend):
    raw = make_batch(b"", 0, base_offset=INT64_MAX - 11, last_offset_delta=10)
    batch = one_batch(backend, raw)
    assert (batch.last_offset, batch.next_offset) == (INT64_MAX - 1, INT64_MAX)
    assert backend.encode_batch([b"a", b"b"], timestamps_ms=0, base_offset=INT64_MAX - 2)
    with pytest.raises(InvalidRecordError):
        backend.encode_batch([b"a", b"b"], timestamps_ms=0, base_offset=INT64_MAX - 1)


def test_check_offsets(backend):
    first = sample_batch(backend, base_offset=10)  # offsets 10..14
    after = sample_batch(backend, base_offset=15)
    again = sample_batch(backend, base_offset=14)  # overlaps the first
    assert len(list(backend.iter_batches(first + after, check_offsets=True))) == 2
    assert len(list(backend.iter_batches(first + again))) == 2  # off by default
    for read in (lambda data: list(backend.iter_batches(data, check_offsets=True)),
                 lambda data: backend.decode_columns(data, check_offsets=True)):
        with pytest.raises(CorruptRecordError) as info:
            read(first + again)
        assert (info.value.reason, info.value.position) == (
            format.REASON_OFFSETS_NOT_INCREASING, len(first))
    # The base offset is outside the CRC: a changed one is caught only this way.
    changed = with_base_offset(after, 3)
    assert one_batch(backend, changed).is_valid()
    with pytest.raises(CorruptRecordError, match="offsets must increase"):
        backend.decode_columns(first + changed, check_offsets=True)
    # A gap (compaction) is fine; a negative first base offset or last offset delta is not.
    assert len(backend.decode_columns(first + with_base_offset(after, 100),
                                      check_offsets=True)) == 10
    with pytest.raises(CorruptRecordError):
        list(backend.iter_batches(with_base_offset(first, -1), check_offsets=True))
    negative_delta = make_batch(b"", 0, base_offset=5, last_offset_delta=-1)
    assert len(list(backend.iter_batches(negative_delta))) == 1
    with pytest.raises(CorruptRecordError) as info:
        list(backend.iter_batches(negative_delta, check_offsets=True))
    assert info.value.reason == format.REASON_OFFSETS_NOT_INCREASING


def test_iter_batches_yields_the_batches_before_an_offset_error(backend):
    first, again = sample_batch(backend, base_offset=10), sample_batch(backend, base_offset=10)
    seen = []
    with pytest.raises(CorruptRecordError):
        for batch in backend.iter_batches(first + again, check_offsets=True):
            seen.append(batch.position)
    assert seen == [0]


# --- 3. Decompression limits ---------------------------------------------------------------------


def compressed_batch(codec: str, values, **fields) -> bytes:
    return PURE.encode_batch(values, timestamps_ms=0, compression=codec, **fields)


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("path", ["records", "columns", "record_at", "decode_columns"])
def test_max_decompressed_bytes(backend, codec, path):
    raw = compressed_batch(codec, [bytes(1000)] * 20)
    area_bytes = len(PURE.encode_batch([bytes(1000)] * 20, timestamps_ms=0)) - 61

    def decode(**kwargs):
        if path == "decode_columns":
            return backend.decode_columns(raw, **kwargs)
        batch = one_batch(backend, raw)
        if path == "record_at":
            return batch.record_at(3, **kwargs)
        return getattr(batch, path)(**kwargs)

    assert decode(max_decompressed_bytes=area_bytes) is not None
    with pytest.raises(CorruptRecordError) as info:
        decode(max_decompressed_bytes=area_bytes - 1)
    assert info.value.reason == format.REASON_DECOMPRESSED_TOO_LARGE
    assert info.value.position == 0
    with pytest.raises(CorruptRecordError):
        decode(max_decompressed_bytes=0)


def test_the_default_limit():
    assert compression.DECOMPRESSED_BYTES_MAX_DEFAULT == 64 * 1024 * 1024
    for function in (PURE.decode_columns, PURE.Batch.records, PURE.Batch.columns,
                     PURE.Batch.record_at, compression.decompress):
        import inspect
        default = inspect.signature(function).parameters["max_decompressed_bytes"].default
        assert default == compression.DECOMPRESSED_BYTES_MAX_DEFAULT


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_truncated_or_garbled_stream(backend, codec):
    area = compression.compress(format.COMPRESSION_IDS[codec],
                                PURE.encode_batch([b"x" * 300] * 4, timestamps_ms=0)[61:])
    for bad_area in (area[: len(area) // 2], b"\x00" * 40, area[:3]):
        raw = make_batch(bad_area, 4, attributes=format.COMPRESSION_IDS[codec])
        with pytest.raises(SeglogError) as info:
            one_batch(backend, raw).records()
        # A stream the codec rejects is REASON_BAD_COMPRESSION; one that ends early but
        # decodes (zstd cannot tell) leaves records missing, which the parser reports.
        assert (isinstance(info.value, CorruptRecordError)
                and info.value.reason == format.REASON_BAD_COMPRESSION) or isinstance(
            info.value, InvalidRecordError), info.value


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("declared", [3, 5, 0x7FFFFFFF])
def test_decoded_records_must_match_record_count(backend, codec, declared):
    raw = compressed_batch(codec, [b"a", b"b", b"c", b"d"])
    raw = with_crc(bytearray(raw[:57]) + struct.pack(">i", declared) + raw[61:])
    with pytest.raises(InvalidRecordError):
        one_batch(backend, raw).records()
    with pytest.raises(InvalidRecordError):
        backend.decode_columns(raw)


def _zstd_bomb(blocks: int, declared_bytes: int | None, *, window_log: int = 17) -> bytes:
    """A zstd frame of ``blocks`` RLE blocks of 128 KiB zeros (4 bytes each), whose header
    declares ``declared_bytes`` of content (None: no content size) and a 2**window_log window
    (written by hand: compressing a gigabyte of zeros to get it would take seconds)."""
    descriptor = bytes([0x00 if declared_bytes is None else 0xC0, (window_log - 10) << 3])
    header = struct.pack("<I", 0xFD2FB528) + descriptor + (
        b"" if declared_bytes is None else struct.pack("<Q", declared_bytes))
    rle = (131072 << 3) | (1 << 1)  # block size 128 KiB, type RLE
    middle = struct.pack("<I", rle)[:3] + b"\x00"
    last = struct.pack("<I", rle | 1)[:3] + b"\x00"
    return header + middle * (blocks - 1) + last


def _lz4_bomb(blocks: int, declared_bytes: int) -> bytes:
    """An lz4 frame of ``blocks`` independent 4 MiB blocks of zeros (~16 KiB each) whose
    header declares ``declared_bytes`` of content."""
    import lz4.block
    import xxhash

    block = lz4.block.compress(bytes(4 << 20), store_size=False)
    descriptor = bytes([0x40 | 0x20 | 0x08, 0x70]) + struct.pack("<Q", declared_bytes)
    header_checksum = (xxhash.xxh32(descriptor, seed=0).intdigest() >> 8) & 0xFF
    return (struct.pack("<I", 0x184D2204) + descriptor + bytes([header_checksum])
            + (struct.pack("<I", len(block)) + block) * blocks + b"\x00\x00\x00\x00")


def _gzip_bomb(mebibytes: int) -> bytes:
    """A gzip member of ``mebibytes`` MiB of zeros (~1 KiB per MiB): one deflated MiB after a
    full flush (which resets the dictionary, so every MiB deflates to the same bytes),
    repeated, then the end block and a correct trailer."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(1 << 20)
    piece = deflater.compress(zeros) + deflater.flush(zlib.Z_FULL_FLUSH)
    end = deflater.flush()
    crc = 0
    for _ in range(mebibytes):
        crc = zlib.crc32(zeros, crc)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + piece * mebibytes + end
            + struct.pack("<II", crc, (mebibytes << 20) & 0xFFFFFFFF))


def _snappy_xerial_bomb() -> bytes:
    """Xerial framing around one raw snappy block whose length preamble declares 4 GiB - 1."""
    block = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\x00" * 42
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


def test_bomb_builders_make_valid_streams():
    # The builders are checked on small sizes against the libraries, so the bombs below are
    # real streams (a bad bomb would be refused as garbage and prove nothing).
    import lz4.frame

    assert compression.decompress(format.COMPRESSION_GZIP, _gzip_bomb(3)) == bytes(3 << 20)
    assert lz4.frame.decompress(_lz4_bomb(2, 8 << 20)) == bytes(8 << 20)
    import zstandard

    frame = _zstd_bomb(3, 3 * 131072)
    assert zstandard.ZstdDecompressor().decompress(frame) == bytes(3 * 131072)
    frame = _zstd_bomb(3, None, window_log=27)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(frame) == bytes(
        3 * 131072)


BOMB_SCRIPT = textwrap.dedent('''
    import json, resource, sys
    import seglog
    from seglog.errors import CorruptRecordError
    be = seglog.get_backend(sys.argv[1])
    bombs = [(name, open(path, "rb").read()) for name, path in json.loads(sys.argv[2])]
    # Cap the address space only now (imports map a few hundred MiB of their own): a decoder
    # that believes a declared size or decompresses without a bound dies or raises here.
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # The three Batch paths share one Batch (its CRC is hashed once: the twin's CRC32C is slow).
    # records and decode_columns run at the default limit (64 MiB), the other two at 4 MiB
    # (each 64 MiB stop costs ~0.15 s, and the keyword is what they add).
    small = 4 << 20
    paths = {
        "records": lambda raw, batch: batch.records(),
        "columns": lambda raw, batch: batch.columns(max_decompressed_bytes=small),
        "record_at": lambda raw, batch: batch.record_at(0, max_decompressed_bytes=small),
        "decode_columns": lambda raw, batch: be.decode_columns(raw),
    }
    results = {}
    for name, raw in bombs:
        batch = next(iter(be.iter_batches(raw)))
        for path, decode in paths.items():
            try:
                decode(raw, batch)
                results[f"{name} {path}"] = "decoded"
            except CorruptRecordError as exc:
                results[f"{name} {path}"] = exc.reason
            except MemoryError:
                results[f"{name} {path}"] = "MemoryError"
    print(json.dumps(results))
''')


@pytest.fixture(scope="module")
def bomb_files(tmp_path_factory):
    """Batches around decompression bombs, written to files for the capped subprocess: the
    issue's cases, a 32 KiB zstd frame of zeros (1 GiB out, 4 GiB declared), an lz4 frame
    (1 GiB out, 1 TiB declared), a 1 GiB gzip member, and a 67-byte snappy batch declaring
    4 GiB (a raw block; and the same in xerial framing)."""
    bombs = {
        "zstd": (_zstd_bomb(8192, 1 << 32), "zstd"),
        # No content size and zstd's largest default window (128 MiB), which the decoder
        # does allocate: still inside the cap, and stopped at the limit.
        "zstd-window": (_zstd_bomb(8192, None, window_log=27), "zstd"),
        "lz4": (_lz4_bomb(256, 1 << 40), "lz4"),
        "gzip": (_gzip_bomb(1024), "gzip"),
        "snappy-raw": (bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00]), "snappy"),
        "snappy-xerial": (_snappy_xerial_bomb(), "snappy"),
    }
    directory = tmp_path_factory.mktemp("bombs")
    files = []
    for name, (area, codec) in bombs.items():
        raw = make_batch(area, 1, attributes=format.COMPRESSION_IDS[codec])
        if name == "snappy-raw":
            assert len(raw) == 67
        path = directory / f"{name}.batch"
        path.write_bytes(raw)
        files.append((name, str(path)))
    return files


@pytest.mark.slow
def test_decompression_bombs_fail_in_bounded_memory(backend, bomb_files):
    files = bomb_files
    limit_bytes = 512 << 20
    done = subprocess.run(
        [sys.executable, "-c", BOMB_SCRIPT, backend.name, json.dumps(files), str(limit_bytes)],
        capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(seglog.__file__).parents[1])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert results and set(results.values()) == {format.REASON_DECOMPRESSED_TOO_LARGE}, results


# --- 4. Bad arguments: one behaviour in both twins ----------------------------------------------

RAW = PURE.encode_batch([b"a", b"b"], timestamps_ms=0)
GZIP_RAW = PURE.encode_batch([b"a", b"b"], timestamps_ms=0, compression="gzip")


def _batch(be, raw=RAW):
    return next(iter(be.iter_batches(raw)))


# (id, call, expected exception class or None for "returns")
BAD_ARGUMENTS = [
    # iter_batches
    ("iter max_batch_bytes -1", lambda be: be.iter_batches(RAW, max_batch_bytes=-1), ValueError),
    ("iter max_batch_bytes 1.5", lambda be: be.iter_batches(RAW, max_batch_bytes=1.5), TypeError),
    ("iter max_batch_bytes '9'", lambda be: be.iter_batches(RAW, max_batch_bytes="9"), TypeError),
    ("iter max_batch_bytes 2**70", lambda be: list(be.iter_batches(RAW, max_batch_bytes=2**70)),
     None),
    ("iter max_batch_bytes 0", lambda be: list(be.iter_batches(RAW, max_batch_bytes=0)),
     CorruptRecordError),
    ("iter buffer str", lambda be: be.iter_batches("abc"), TypeError),
    ("iter buffer None", lambda be: be.iter_batches(None), TypeError),
    ("iter buffer int", lambda be: be.iter_batches(5), TypeError),
    # decode_columns
    ("columns max_records -1", lambda be: be.decode_columns(RAW, max_records=-1), ValueError),
    ("columns max_records 1.5", lambda be: be.decode_columns(RAW, max_records=1.5), TypeError),
    ("columns max_records '1'", lambda be: be.decode_columns(RAW, max_records="1"), TypeError),
    ("columns max_records 2**70", lambda be: be.decode_columns(RAW, max_records=2**70), None),
    ("columns max_records -2**70", lambda be: be.decode_columns(RAW, max_records=-2**70),
     ValueError),
    ("columns max_decompressed -1",
     lambda be: be.decode_columns(GZIP_RAW, max_decompressed_bytes=-1), ValueError),
    ("columns max_decompressed 1.5",
     lambda be: be.decode_columns(GZIP_RAW, max_decompressed_bytes=1.5), TypeError),
    ("columns max_decompressed 2**70",
     lambda be: be.decode_columns(GZIP_RAW, max_decompressed_bytes=2**70), None),
    ("columns max_decompressed None",
     lambda be: be.decode_columns(GZIP_RAW, max_decompressed_bytes=None), TypeError),
    ("columns buffer list", lambda be: be.decode_columns([1, 2]), TypeError),
    # Batch(...)
    ("Batch position 1.5", lambda be: be.Batch(RAW, 1.5), TypeError),
    ("Batch position 2**70", lambda be: be.Batch(RAW, 2**70), ValueError),
    ("Batch position -2**70", lambda be: be.Batch(RAW, -2**70), ValueError),
    ("Batch position -1", lambda be: be.Batch(RAW, -1), ValueError),
    ("Batch position '0'", lambda be: be.Batch(RAW, "0"), TypeError),
    ("Batch position np.int64", lambda be: be.Batch(RAW, np.int64(0)), None),
    ("Batch position end", lambda be: be.Batch(RAW, len(RAW)), CorruptRecordError),
    ("Batch buffer str", lambda be: be.Batch("x" * 80), TypeError),
    # Batch.record_at and the decoders' keywords
    ("record_at 1.5", lambda be: _batch(be).record_at(1.5), TypeError),
    ("record_at 0.0", lambda be: _batch(be).record_at(0.0), TypeError),
    ("record_at '1'", lambda be: _batch(be).record_at("1"), TypeError),
    ("record_at None", lambda be: _batch(be).record_at(None), TypeError),
    ("record_at 2**70", lambda be: _batch(be).record_at(2**70), None),
    ("record_at -2**70", lambda be: _batch(be).record_at(-2**70), None),
    ("record_at -1", lambda be: _batch(be).record_at(-1), None),
    ("record_at np.int64", lambda be: _batch(be).record_at(np.int64(1)), None),
    ("record_at max_decompressed -5",
     lambda be: _batch(be, GZIP_RAW).record_at(0, max_decompressed_bytes=-5), ValueError),
    ("records max_decompressed 2.0",
     lambda be: _batch(be, GZIP_RAW).records(max_decompressed_bytes=2.0), TypeError),
    ("columns() max_decompressed '1'",
     lambda be: _batch(be, GZIP_RAW).columns(max_decompressed_bytes="1"), TypeError),
    ("records max_decompressed 2**70",
     lambda be: _batch(be, GZIP_RAW).records(max_decompressed_bytes=2**70), None),
    # crc32c
    ("crc32c crc -1", lambda be: be.crc32c(b"x", -1), ValueError),
    ("crc32c crc 2**32", lambda be: be.crc32c(b"x", 2**32), ValueError),
    ("crc32c crc 2**70", lambda be: be.crc32c(b"x", 2**70), ValueError),
    ("crc32c crc 1.5", lambda be: be.crc32c(b"x", 1.5), TypeError),
    ("crc32c data str", lambda be: be.crc32c("x"), TypeError),
    ("crc32c data int", lambda be: be.crc32c(5), TypeError),
    ("crc32c data None", lambda be: be.crc32c(None), TypeError),
    # encode_batch numbers
    ("encode base_offset -1", lambda be: be.encode_batch([b"a"], timestamps_ms=0, base_offset=-1),
     InvalidRecordError),
    ("encode base_offset 1.5",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, base_offset=1.5), InvalidRecordError),
    ("encode base_offset 2**70",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, base_offset=2**70), InvalidRecordError),
    ("encode base_offset INT64_MAX",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, base_offset=INT64_MAX),
     InvalidRecordError),
    ("encode base_offset '0'",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, base_offset="0"), InvalidRecordError),
    ("encode timestamp -2", lambda be: be.encode_batch([b"a"], timestamps_ms=-2),
     InvalidTimestampError),
    ("encode timestamp 1.5", lambda be: be.encode_batch([b"a"], timestamps_ms=1.5),
     InvalidTimestampError),
    ("encode timestamp 2**70", lambda be: be.encode_batch([b"a"], timestamps_ms=2**70),
     InvalidTimestampError),
    ("encode timestamps [2**70]", lambda be: be.encode_batch([b"a"], timestamps_ms=[2**70]),
     InvalidTimestampError),
    ("encode timestamps float array",
     lambda be: be.encode_batch([b"a"], timestamps_ms=np.array([1.5])), InvalidTimestampError),
    ("encode timestamps huge uint64 array",
     lambda be: be.encode_batch([b"a"], timestamps_ms=np.array([2**64 - 1], dtype=np.uint64)),
     InvalidTimestampError),
    ("encode timestamp_type 1.0",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, timestamp_type=1.0), InvalidRecordError),
    ("encode timestamp_type 2**70",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, timestamp_type=2**70),
     InvalidRecordError),
    ("encode timestamp_type np.int8(1)",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, timestamp_type=np.int8(1)), None),
    ("encode producer_id 2**70",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, producer_id=2**70), InvalidRecordError),
    ("encode producer_epoch 1.5",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, producer_epoch=1.5), InvalidRecordError),
    ("encode base_sequence -2**70",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, base_sequence=-2**70),
     InvalidRecordError),
    ("encode partition_leader_epoch 2**31",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, partition_leader_epoch=2**31),
     InvalidRecordError),
    ("encode delete_horizon_ms -2",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, delete_horizon_ms=-2),
     InvalidRecordError),
    ("encode offset_deltas [1.5]",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, offset_deltas=[1.5]), InvalidRecordError),
    ("encode offset_deltas [-1]",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, offset_deltas=[-1]), InvalidRecordError),
    ("encode offset_deltas [2**70]",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, offset_deltas=[2**70]),
     InvalidRecordError),
    ("encode offset_deltas huge uint64",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0,
                                offset_deltas=np.array([2**64 - 1], dtype=np.uint64)),
     InvalidRecordError),
    ("encode last_offset_delta 2**70",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, last_offset_delta=2**70),
     InvalidRecordError),
    ("encode last_offset_delta 0.5",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, last_offset_delta=0.5),
     InvalidRecordError),
    ("encode compression_level 1.5",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, compression="gzip",
                                compression_level=1.5), TypeError),
    ("encode compression_level '3'",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, compression="gzip",
                                compression_level="3"), TypeError),
    ("encode compression_level 2**70",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, compression="gzip",
                                compression_level=2**70), ValueError),
    ("encode compression_level lz4 -1",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, compression="lz4",
                                compression_level=-1), ValueError),
    ("encode compression 1.0",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, compression=1.0),
     UnsupportedCompressionError),
    ("encode compression 2**70",
     lambda be: be.encode_batch([b"a"], timestamps_ms=0, compression=2**70),
     UnsupportedCompressionError),
    # encode_batch columns
    ("encode (data, float lengths)",
     lambda be: be.encode_batch((b"abc", np.array([1.5, 1.5])), timestamps_ms=0),
     InvalidRecordError),
    ("encode (data, bool lengths)",
     lambda be: be.encode_batch((b"abc", np.array([True, True])), timestamps_ms=0),
     InvalidRecordError),
    ("encode (data, 2-D lengths)",
     lambda be: be.encode_batch((b"abc", np.array([[1, 2]])), timestamps_ms=0),
     InvalidRecordError),
    ("encode (data, huge uint64 lengths)",
     lambda be: be.encode_batch((b"abc", np.array([1, 2**64 - 1], dtype=np.uint64)),
                                timestamps_ms=0), InvalidRecordError),
    ("encode (data, lengths below -1)",
     lambda be: be.encode_batch((b"abc", np.array([-2])), timestamps_ms=0), InvalidRecordError),
    ("encode (data, lengths past the data)",
     lambda be: be.encode_batch((b"abc", np.array([2, 2])), timestamps_ms=0), InvalidRecordError),
    ("encode (str data, lengths)",
     lambda be: be.encode_batch(("abc", np.array([1])), timestamps_ms=0), InvalidRecordError),
    ("encode (data, list lengths)",
     lambda be: be.encode_batch((b"abc", [1, 2]), timestamps_ms=0), InvalidRecordError),
    ("encode values 1.5", lambda be: be.encode_batch(1.5, timestamps_ms=0), InvalidRecordError),
    ("encode values [1.5]", lambda be: be.encode_batch([1.5], timestamps_ms=0), InvalidRecordError),
    ("encode float 2-D values",
     lambda be: be.encode_batch(np.zeros((2, 2)), timestamps_ms=0), InvalidRecordError),
    ("encode keys int", lambda be: be.encode_batch([b"a"], keys=3, timestamps_ms=0),
     InvalidRecordError),
    # encode_control_batch
    ("control type 1.0",
     lambda be: be.encode_control_batch(1.0, producer_id=1, producer_epoch=1, timestamp_ms=0),
     InvalidRecordError),
    ("control type 1.5",
     lambda be: be.encode_control_batch(1.5, producer_id=1, producer_epoch=1, timestamp_ms=0),
     InvalidRecordError),
    ("control type 2**70",
     lambda be: be.encode_control_batch(2**70, producer_id=1, producer_epoch=1, timestamp_ms=0),
     InvalidRecordError),
    ("control type '1'",
     lambda be: be.encode_control_batch("1", producer_id=1, producer_epoch=1, timestamp_ms=0),
     InvalidRecordError),
    ("control type np.int16(1)",
     lambda be: be.encode_control_batch(np.int16(1), producer_id=1, producer_epoch=1,
                                        timestamp_ms=0), None),
    ("control producer_id 1.5",
     lambda be: be.encode_control_batch(1, producer_id=1.5, producer_epoch=1, timestamp_ms=0),
     InvalidRecordError),
    ("control producer_epoch 2**70",
     lambda be: be.encode_control_batch(1, producer_id=1, producer_epoch=2**70, timestamp_ms=0),
     InvalidRecordError),
    ("control timestamp 1.5",
     lambda be: be.encode_control_batch(1, producer_id=1, producer_epoch=1, timestamp_ms=1.5),
     InvalidTimestampError),
    ("control coordinator_epoch 2**70",
     lambda be: be.encode_control_batch(1, producer_id=1, producer_epoch=1,
                                        coordinator_epoch=2**70, timestamp_ms=0),
     InvalidRecordError),
    ("control base_offset -1",
     lambda be: be.encode_control_batch(1, producer_id=1, producer_epoch=1, base_offset=-1,
                                        timestamp_ms=0), InvalidRecordError),
]


def _normalise(entry):
    return pytest.param(*entry, id=entry[0])


def _outcome(call, be):
    try:
        result = call(be)
        if hasattr(result, "__next__"):
            result = list(result)
    except Exception as exc:  # the class is what is compared
        return type(exc)
    return None


@pytest.mark.parametrize("name, call, expected", [_normalise(e) for e in BAD_ARGUMENTS])
def test_bad_arguments_raise_the_same_class_in_both_twins(backend, name, call, expected):
    got, twin = _outcome(call, backend), _outcome(call, PURE)
    assert got is twin, f"{name}: {backend.name} {got}, pure {twin}"
    assert got is expected, f"{name}: {got}, documented {expected}"
    assert got is not OverflowError


def test_the_table_covers_every_public_function():
    names = " ".join(entry[0] for entry in BAD_ARGUMENTS)
    for function in ("iter", "columns", "Batch", "record_at", "crc32c", "encode", "control"):
        assert function in names
