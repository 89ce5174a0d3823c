"""``Segment.append(checked=True)`` on both backends: the caller (the Log) has checked each
batch's CRC32C and records, so the segment checks the framing only. Same files as the full
check, the framing errors still refused before anything is written, and the twins agree; the
Log's own appends still refuse every bad batch (its validator is the check the segment no
longer repeats)."""

from __future__ import annotations

import os
import struct

import pytest

from seglog import format as fmt
from seglog.errors import CorruptRecordError, InvalidOffsetError, InvalidRecordError, \
    RecordTooLargeError
from seglog.storage.config import LogConfig
from seglog.storage.log import Log
from segment_helpers import batch, recrc, with_field


def _segment(backend, path, base=0, **kwargs):
    os.makedirs(path, exist_ok=True)
    kwargs.setdefault("index_interval_bytes", 200)
    return backend.Segment.open(str(path), base, create=True, **kwargs)


def _batches(backend):
    return [batch(backend, 1 + n % 5, value_bytes=30 + 11 * n, timestamp_ms=1000 + n)
            for n in range(12)]


def test_checked_appends_write_the_same_files(backend, tmp_path):
    full = _segment(backend, tmp_path / "full", base=3)
    checked = _segment(backend, tmp_path / "checked", base=3)
    for n, raw in enumerate(_batches(backend)):
        data = [raw, raw] if n % 3 == 0 else raw
        epoch = n if n % 2 else None
        expected = full.append(data, partition_leader_epoch=epoch)
        assert checked.append(data, partition_leader_epoch=epoch, checked=True) == expected
    full.close()
    checked.close()
    for name in os.listdir(tmp_path / "full"):
        assert (tmp_path / "checked" / name).read_bytes() == \
            (tmp_path / "full" / name).read_bytes(), name


def test_twins_write_identical_files_when_checked(native, pure, tmp_path):
    for backend, name in ((native, "native"), (pure, "pure")):
        segment = _segment(backend, tmp_path / name, base=5)
        for raw in _batches(pure):
            segment.append(raw, partition_leader_epoch=2, checked=True)
        segment.close()
    names = sorted(os.listdir(tmp_path / "pure"))
    assert names == sorted(os.listdir(tmp_path / "native"))
    for name in names:
        assert (tmp_path / "native" / name).read_bytes() == \
            (tmp_path / "pure" / name).read_bytes(), name


def _framing_cases(backend):
    good = batch(backend, 3)
    return {
        "truncated": (good[:-1], CorruptRecordError, fmt.REASON_TRUNCATED),
        "bad_magic": (with_field(good, fmt.MAGIC_POSITION, "b", 1), CorruptRecordError,
                      fmt.REASON_BAD_MAGIC),
        "too_small": (with_field(good, fmt.BATCH_LENGTH_POSITION, "i", 10), CorruptRecordError,
                      fmt.REASON_BATCH_TOO_SMALL),
        "negative_delta": (with_field(good, fmt.LAST_OFFSET_DELTA_POSITION, "i", -1),
                           CorruptRecordError, fmt.REASON_BAD_LAST_OFFSET_DELTA),
        "too_large": (batch(backend, 20, value_bytes=100), RecordTooLargeError, None),
    }


@pytest.mark.parametrize("case", ["truncated", "bad_magic", "too_small", "negative_delta",
                                  "too_large"])
def test_checked_appends_still_check_the_framing(backend, tmp_path, case):
    bad, error, reason = _framing_cases(backend)[case]
    good = batch(backend, 3)
    segment = _segment(backend, tmp_path, max_message_bytes=1000)
    with pytest.raises(error) as info:
        segment.append([good, bad], checked=True)
    if reason is not None:
        assert info.value.reason == reason
        assert info.value.position == len(good)
    assert segment.size_bytes == 0 and os.path.getsize(segment.log_path) == 0
    segment.close()


def test_checked_appends_still_check_offsets(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=10)
    segment.append(batch(backend, 2, base_offset=10), assign_offsets=False, checked=True)
    with pytest.raises(InvalidOffsetError):
        segment.append(batch(backend, 2, base_offset=11), assign_offsets=False, checked=True)
    assert segment.next_offset == 12
    segment.close()


def test_checked_trusts_the_callers_crc_check_and_recovery_still_cuts(backend, tmp_path):
    """The contract, shown: with checked=True a changed value byte is not looked for (the
    caller promised it checked), where the full check refuses it; the segment's recovery
    checks every CRC again and cuts the batch."""
    good = batch(backend, 3)
    bad = bytearray(good)
    bad[-1] ^= 0x01  # inside the last record's value: covered by the CRC only
    full = _segment(backend, tmp_path / "full")
    with pytest.raises(CorruptRecordError) as info:
        full.append(bytes(bad))
    assert info.value.reason == fmt.REASON_CRC_MISMATCH
    full.close()
    segment = _segment(backend, tmp_path / "checked")
    segment.append(good, checked=True)
    segment.append(bytes(bad), checked=True)
    result = segment.recover()
    assert (result.reason, result.position) == (fmt.REASON_CRC_MISMATCH, len(good))
    assert segment.next_offset == 3
    segment.close()


def _records_area_cases(backend):
    """Batches whose CRC is right but whose records area is not what it claims: the
    segment's record-length walk refused them before; the Log's validator must."""
    raw = backend.encode_batch([b"a" * 10, b"b" * 10], timestamps_ms=5)
    trailing = bytearray(raw) + b"\x00\x00"  # bytes after the last record
    struct.pack_into(">i", trailing, fmt.BATCH_LENGTH_POSITION, len(trailing) - 12)
    overlong = bytearray(raw)
    overlong[fmt.RECORD_BATCH_OVERHEAD] = 0x7E  # the first record claims 63 bytes
    short = bytearray(raw)
    struct.pack_into(">i", short, fmt.RECORDS_COUNT_POSITION, 3)
    struct.pack_into(">i", short, fmt.LAST_OFFSET_DELTA_POSITION, 2)
    compressed = bytearray(backend.encode_batch([b"c" * 50] * 4, timestamps_ms=5,
                                                compression="lz4"))
    area = fmt.RECORD_BATCH_OVERHEAD
    compressed[area + 8:area + 16] = b"\xff" * 8  # inside the lz4 frame
    return {name: recrc(value) for name, value in (
        ("trailing", trailing), ("overlong", overlong), ("short", short),
        ("bad_lz4", compressed))}


@pytest.mark.parametrize("case", ["trailing", "overlong", "short", "bad_lz4"])
def test_log_refuses_a_bad_records_area_with_a_right_crc(backend, tmp_path, case):
    bad = _records_area_cases(backend)[case]
    assert backend.check_client_batch(bad, 0, 1 << 62, 1 << 20, False, -1) is None
    log = Log.open(str(tmp_path / "t-0"), LogConfig(), backend=backend.name)
    try:
        with pytest.raises((CorruptRecordError, InvalidRecordError)):
            log.append_raw(bad, now_ms=10)
        assert log.end_offset == 0 and log.size_bytes == 0  # nothing written
        good = backend.encode_batch([b"a"], timestamps_ms=5)
        assert log.append_raw(good, now_ms=10) == (0, 0)
    finally:
        log.close()
