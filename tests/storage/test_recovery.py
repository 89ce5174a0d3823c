"""Segment.recover on both backends: torn tails, garbage, broken indexes, one test per reason."""

from __future__ import annotations

import os

import pytest

from seglog import format as fmt
from seglog.errors import ViewsOutstandingError
from segment_helpers import batch, records, with_field

INTERVAL = 200


def _write_segment(backend, tmp_path, batches=10, base=0):
    segment = backend.Segment.open(str(tmp_path), base, create=True,
                                   index_interval_bytes=INTERVAL)
    raws = [batch(backend, 3, timestamp_ms=1000 + n) for n in range(batches)]
    for raw in raws:
        segment.append(raw)
    segment.close()
    return raws


def _open(backend, tmp_path, base=0):
    return backend.Segment.open(str(tmp_path), base, index_interval_bytes=INTERVAL)


def _log_path(tmp_path, base=0):
    return os.path.join(str(tmp_path), f"{base:020d}.log")


def _append_bytes(path, data):
    with open(path, "ab") as f:
        f.write(data)


def _assert_whole(backend, segment, batches):
    assert segment.next_offset == segment.base_offset + 3 * batches
    assert len(records(backend, segment.read(segment.base_offset, 1 << 30))) == 3 * batches
    for offset in range(segment.base_offset, segment.next_offset, 2):
        position, base, _ = segment.translate_offset(offset)
        assert base <= offset


def test_clean_segment_recovers_nothing_and_rebuilds_same_indexes(backend, tmp_path):
    _write_segment(backend, tmp_path)
    index_bytes = open(os.path.join(str(tmp_path), f"{0:020d}.index"), "rb").read()
    segment = _open(backend, tmp_path)
    result = segment.recover()
    assert result == (segment.size_bytes, 0, "", -1)
    segment.close()
    assert open(segment.index_path, "rb").read() == index_bytes


@pytest.mark.parametrize("cut", [1, 5, 16, 17, 30, 60, 61, 100])
def test_torn_tail(backend, tmp_path, cut):
    raws = _write_segment(backend, tmp_path)
    with open(_log_path(tmp_path), "r+b") as f:
        f.truncate(sum(map(len, raws)) - len(raws[-1]) + cut)
    segment = _open(backend, tmp_path)
    result = segment.recover()
    assert result.reason == fmt.REASON_TRUNCATED
    assert result.truncated_bytes == cut and result.position == result.valid_bytes
    _assert_whole(backend, segment, 9)


def test_zero_filled_tail_is_batch_too_small(backend, tmp_path):
    raws = _write_segment(backend, tmp_path)
    _append_bytes(_log_path(tmp_path), bytes(4096))  # a preallocated, never written tail
    segment = _open(backend, tmp_path)
    result = segment.recover()
    assert (result.reason, result.truncated_bytes) == (fmt.REASON_BATCH_TOO_SMALL, 4096)
    assert result.position == sum(map(len, raws))
    _assert_whole(backend, segment, 10)


def test_garbage_appended_to_log(backend, tmp_path):
    _write_segment(backend, tmp_path)
    _append_bytes(_log_path(tmp_path), os.urandom(1000))
    segment = _open(backend, tmp_path)
    result = segment.recover()
    assert result.truncated_bytes == 1000 and result.reason in fmt.CORRUPTION_REASONS
    _assert_whole(backend, segment, 10)


def test_garbage_appended_to_index(backend, tmp_path):
    _write_segment(backend, tmp_path)
    segment = _open(backend, tmp_path)
    segment.close()
    _append_bytes(segment.index_path, b"\x7f" * 13)
    segment = _open(backend, tmp_path)
    assert segment.indexes_need_rebuild
    assert segment.recover().truncated_bytes == 0
    assert not segment.indexes_need_rebuild
    assert os.path.getsize(segment.index_path) % 8 == 0
    segment.offset_index.sanity_check()
    _assert_whole(backend, segment, 10)


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_missing_index_rebuilt(backend, tmp_path, suffix):
    _write_segment(backend, tmp_path)
    path = os.path.join(str(tmp_path), f"{0:020d}{suffix}")
    expected = open(path, "rb").read()
    os.remove(path)
    segment = _open(backend, tmp_path)
    assert segment.indexes_need_rebuild
    segment.recover()
    segment.close()
    assert open(path, "rb").read() == expected
    _assert_whole(backend, _open(backend, tmp_path), 10)


def test_garbage_index_rebuilt(backend, tmp_path):
    _write_segment(backend, tmp_path)
    path = os.path.join(str(tmp_path), f"{0:020d}.index")
    expected = open(path, "rb").read()
    with open(path, "wb") as f:  # decreasing, nonsense entries
        f.write(fmt.OFFSET_INDEX_ENTRY.pack(900, 5) + fmt.OFFSET_INDEX_ENTRY.pack(3, 7))
    segment = _open(backend, tmp_path)
    assert segment.indexes_need_rebuild
    segment.recover()
    segment.close()
    assert open(path, "rb").read() == expected


def test_crc_flip_in_the_middle_truncates_there(backend, tmp_path):
    raws = _write_segment(backend, tmp_path)
    position = sum(map(len, raws[:4])) + 70  # inside batch 4's records
    with open(_log_path(tmp_path), "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x10]))
    segment = _open(backend, tmp_path)
    result = segment.recover()
    assert result.reason == fmt.REASON_CRC_MISMATCH
    assert result.position == sum(map(len, raws[:4]))
    assert result.truncated_bytes == sum(map(len, raws[4:]))
    _assert_whole(backend, segment, 4)
    assert segment.offset_index.last_offset < 12 and segment.time_index.last_offset < 12


def test_recover_refuses_to_cut_under_a_live_view(backend, tmp_path):
    _write_segment(backend, tmp_path)
    _append_bytes(_log_path(tmp_path), bytes(100))
    segment = _open(backend, tmp_path)
    # The last batch, which ends where the zeros start. max_bytes 1: the read stops after it
    # without looking at the zeros (below a writer's end they are corruption until recover()).
    view = segment.read(25, 1)
    view_bytes = bytes(view)
    # The view ends before the cut; the native twin sees that, the pure one may not.
    try:
        segment.recover()
    except ViewsOutstandingError:
        assert backend.name == "pure"
    assert bytes(view) == view_bytes
    view.release()
    segment.recover()
    assert os.path.getsize(segment.log_path) == segment.size_bytes


# --- one test per reason ---------------------------------------------------------------------


def _recover_with_bad_last_batch(backend, tmp_path, bad):
    raws = _write_segment(backend, tmp_path, batches=3)
    _append_bytes(_log_path(tmp_path), bad)
    segment = _open(backend, tmp_path)
    result = segment.recover()
    assert result.position == sum(map(len, raws)) and result.truncated_bytes == len(bad)
    _assert_whole(backend, segment, 3)
    return result.reason


def _next(backend, **kwargs):
    return batch(backend, 3, base_offset=9, **kwargs)


def test_reason_batch_too_small(backend, tmp_path):
    bad = with_field(_next(backend), fmt.BATCH_LENGTH_POSITION, "i", 13, fix_crc=False)
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_BATCH_TOO_SMALL


def test_reason_batch_too_small_for_v2_header(backend, tmp_path):
    bad = with_field(_next(backend), fmt.BATCH_LENGTH_POSITION, "i", 30, fix_crc=False)
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_BATCH_TOO_SMALL


def test_reason_batch_too_large(backend, tmp_path):
    bad = with_field(_next(backend), fmt.BATCH_LENGTH_POSITION, "i", fmt.INT32_MAX,
                     fix_crc=False)
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_BATCH_TOO_LARGE


def test_reason_bad_magic(backend, tmp_path):
    bad = with_field(_next(backend), fmt.MAGIC_POSITION, "b", 1, fix_crc=False)
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_BAD_MAGIC


def test_reason_crc_mismatch(backend, tmp_path):
    bad = with_field(_next(backend), fmt.CRC_POSITION, "I", 12345, fix_crc=False)
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_CRC_MISMATCH


def test_reason_offsets_not_increasing(backend, tmp_path):
    bad = batch(backend, 3, base_offset=8)  # overlaps the previous batch (6..8)
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_OFFSETS_NOT_INCREASING


def test_reason_offsets_below_base_offset(backend, tmp_path):
    raws = _write_segment(backend, tmp_path, batches=0, base=100)
    assert raws == []
    _append_bytes(_log_path(tmp_path, 100), batch(backend, 3, base_offset=99))
    result = _open(backend, tmp_path, base=100).recover()
    assert (result.reason, result.position) == (fmt.REASON_OFFSETS_NOT_INCREASING, 0)


def test_reason_bad_last_offset_delta(backend, tmp_path):
    bad = with_field(_next(backend), fmt.LAST_OFFSET_DELTA_POSITION, "i", -2)
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_BAD_LAST_OFFSET_DELTA


def test_reason_bad_records(backend, tmp_path):
    bad = with_field(_next(backend), fmt.RECORDS_COUNT_POSITION, "i", 2)  # 3 records inside
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_BAD_RECORDS


def test_reason_truncated(backend, tmp_path):
    bad = _next(backend)[:-1]
    assert _recover_with_bad_last_batch(backend, tmp_path, bad) == fmt.REASON_TRUNCATED


def test_every_reason_has_a_test():
    tested = {fmt.REASON_BATCH_TOO_SMALL, fmt.REASON_BATCH_TOO_LARGE, fmt.REASON_BAD_MAGIC,
              fmt.REASON_CRC_MISMATCH, fmt.REASON_OFFSETS_NOT_INCREASING,
              fmt.REASON_BAD_LAST_OFFSET_DELTA, fmt.REASON_BAD_RECORDS, fmt.REASON_TRUNCATED}
    assert tested == set(fmt.CORRUPTION_REASONS)


def test_twins_recover_identically(native, pure, tmp_path):
    results = []
    for backend in (native, pure):
        directory = tmp_path / backend.name
        directory.mkdir()
        raws = _write_segment(native, directory, batches=12)
        with open(_log_path(directory), "r+b") as f:
            f.seek(sum(map(len, raws[:7])) + 40)
            f.write(b"\xff")
        results.append(_open(backend, directory).recover())
    assert results[0] == results[1]
    for name in os.listdir(tmp_path / "native"):
        assert (tmp_path / "native" / name).read_bytes() == (tmp_path / "pure" / name).read_bytes()
