"""Mutated and truncated batches through every decoder of both twins (issue 8, the codec's part).

For a set of valid buffers (every compression, headers and null fields, a control batch, an
empty batch that keeps its codec bits, LogAppendTime, a compacted batch with offset gaps, two
batches in a row) every byte is flipped three ways, random bytes are written over random
places, and the buffer is cut at every length. Each result goes through every reader, with
and without the CRC check: the native twin must reach exactly the pure twin's outcome
(the same records, or the same ``SeglogError`` class and reason at the same step), and no
other exception may escape (a ``struct.error``, ``IndexError``, ``zlib.error``, an lz4 or
zstd error, an ``OverflowError``... fails the test where it is raised).
"""

from __future__ import annotations

import random

import pytest

import seglog
from seglog.errors import SeglogError

from test_codec_untrusted import make_batch

PURE = seglog.get_backend("pure")
#: Mutations rarely decompress to much, but a limit well below the default keeps a run fast
#: whatever a mutated stream declares (the default is exercised in test_codec_untrusted.py).
LIMIT_BYTES = 1 << 20
#: record_at is asked for at most this many offsets per batch (a mutated header may claim 2**31).
RECORD_AT_OFFSETS_MAX = 6


def _sources() -> dict:
    values = [b"", None, b"v" * 70, bytes(range(40))]
    keys = [b"k0", None, b"", b"key-3"]
    headers = [[("h", b"x"), ("", None)], None, [], [("\u00e9t\u00e9", b"")]]
    sources = {}
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        sources[codec] = PURE.encode_batch(
            values, keys=keys, timestamps_ms=[5, 3, 9, 1], headers=headers,
            compression=codec, base_offset=7, producer_id=11, producer_epoch=2,
            base_sequence=4,
        )
    sources["control"] = PURE.encode_control_batch(
        0, producer_id=1, producer_epoch=2, coordinator_epoch=3, base_offset=20, timestamp_ms=9
    )
    sources["empty gzip"] = make_batch(b"", 0, base_offset=3, attributes=1)
    sources["log append time, compacted"] = PURE.encode_batch(
        [b"a", None, b"ccc"], timestamps_ms=[1, 2, 3], timestamp_type=1,
        offset_deltas=[0, 4, 9], last_offset_delta=12, delete_horizon_ms=100, base_offset=40,
    )
    sources["two batches"] = PURE.encode_batch(
        [b"x", b"y"], timestamps_ms=0, base_offset=0
    ) + PURE.encode_batch([b"z" * 30], timestamps_ms=0, base_offset=2,
                          compression="lz4")
    return sources


SOURCES = _sources()


def _error(exc: SeglogError) -> tuple:
    return ("error", type(exc).__name__, getattr(exc, "reason", None),
            getattr(exc, "position", None))


def _attempt(step):
    try:
        return step()
    except SeglogError as exc:
        return _error(exc)


def _columns_key(columns) -> tuple:
    return (
        columns.offsets.tolist(), columns.timestamps_ms.tolist(), columns.key_lengths.tolist(),
        columns.value_lengths.tolist(),
        [columns.key(i) for i in range(len(columns))],
        [columns.value(i) for i in range(len(columns))],
    )


def outcome(backend, data: bytes, check_crcs: bool) -> list:
    """Everything every reader makes of ``data``, SeglogErrors as (class, reason, position)."""
    options = dict(check_crcs=check_crcs, max_decompressed_bytes=LIMIT_BYTES)
    result = []
    try:
        for batch in backend.iter_batches(data, check_offsets=True):
            entry = [
                batch.position, batch.base_offset, batch.batch_length, batch.crc,
                batch.attributes, batch.last_offset_delta, batch.base_timestamp_ms,
                batch.max_timestamp_ms, batch.record_count, batch.last_offset,
                batch.next_offset, batch.last_sequence, batch.compression, batch.is_control,
            ]
            entry.append(_attempt(lambda: [tuple(r) for r in batch.records(**options)]))
            entry.append(_attempt(lambda: _columns_key(batch.columns(**options))))
            count = min(max(batch.record_count, 0), RECORD_AT_OFFSETS_MAX)
            for offset in [batch.base_offset - 1, *range(batch.base_offset,
                                                         batch.base_offset + count + 1)]:
                entry.append(_attempt(
                    lambda: (lambda r: r if r is None else tuple(r))(
                        batch.record_at(offset, **options))))
            if batch.is_control:
                entry.append(_attempt(lambda: batch.control_type(check_crcs=check_crcs)))
            entry.append(batch.is_valid())
            result.append(entry)
    except SeglogError as exc:
        result.append(_error(exc))
    result.append(_attempt(lambda: _columns_key(backend.decode_columns(data, **options))))
    result.append(_attempt(lambda: _columns_key(
        backend.decode_columns(data, check_offsets=True, max_records=2, **options))))
    return result


def _assert_twins_agree(backend, data: bytes, check_crcs: bool, where) -> None:
    got = outcome(backend, data, check_crcs)  # any non-Seglog exception fails the test here
    if backend is not PURE:  # the twin against itself would only double the time
        assert got == outcome(PURE, data, check_crcs), where


@pytest.mark.fuzz
@pytest.mark.parametrize("source", list(SOURCES))
def test_every_byte_flipped(backend, source):
    original = SOURCES[source]
    assert outcome(PURE, original, True)[-2][0] != "error"  # the source itself is valid
    for position in range(len(original)):
        for flip in (0x01, 0x80, 0xFF):
            data = bytearray(original)
            data[position] ^= flip
            # With the CRC check most flips end at the CRC; without it every parser path is
            # reached. Both must agree.
            _assert_twins_agree(backend, bytes(data), False, (position, flip))
            if flip == 0xFF:
                _assert_twins_agree(backend, bytes(data), True, (position, flip))


@pytest.mark.fuzz
@pytest.mark.parametrize("source", list(SOURCES))
def test_random_bytes(backend, source):
    original = SOURCES[source]
    rng = random.Random(f"seglog codec mutation {source}")  # deterministic: failures repeat
    for trial in range(120):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(data))
            length = rng.choice([1, 1, 2, 4, 8])
            data[position : position + length] = bytes(
                rng.randrange(256) for _ in range(length))[: len(data) - position]
        _assert_twins_agree(backend, bytes(data), rng.random() < 0.5, trial)


@pytest.mark.fuzz
@pytest.mark.parametrize("source", list(SOURCES))
def test_cut_at_every_length(backend, source):
    original = SOURCES[source] + SOURCES["none"]
    for cut in range(len(original)):
        _assert_twins_agree(backend, original[:cut], False, cut)
        _assert_twins_agree(backend, original[:cut], True, cut)


@pytest.mark.fuzz
@pytest.mark.parametrize("source", [name for name in SOURCES if name != "two batches"])
def test_cut_record_area_with_a_correct_crc(backend, source):
    # A batch whose record area was cut and whose length and CRC were then fixed passes the
    # CRC check: the records decoder (or the decompressor) must still refuse it, typed.
    original = SOURCES[source]
    for cut in range(61, len(original)):
        data = bytearray(original[:cut])
        data[8:12] = (cut - 12).to_bytes(4, "big")
        data[17:21] = PURE.crc32c(data[21:]).to_bytes(4, "big")
        result = outcome(backend, bytes(data), True)
        if backend is not PURE:
            assert result == outcome(PURE, bytes(data), True), cut
        if cut < len(original):
            assert result[0][14][0] == "error", (cut, result[0])  # records() refused it
