"""Segment on both backends: append/read, offsets, limits, time lookups, sendfile, truncation,
read-only followers, lifecycle, and byte-identical files across the twins."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from seglog import format as fmt
from seglog.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    LogClosedError,
    ReadOnlyError,
    RecordTooLargeError,
    ViewsOutstandingError,
)
from segment_helpers import batch, records, with_field


def _segment(backend, tmp_path, base=0, **kwargs):
    kwargs.setdefault("index_interval_bytes", 200)
    return backend.Segment.open(str(tmp_path), base, create=True, **kwargs)


def _fill(backend, segment, batches=10, count=3, step=3):
    raws = [batch(backend, count, timestamp_ms=1000 + step * n) for n in range(batches)]
    for raw in raws:
        segment.append(raw)
    return raws


def test_append_read_round_trip(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=100)
    raw = batch(backend, 3)
    result = segment.append(raw)
    assert result == (100, 102, 1000, 102, 0, len(raw), 1)
    two = batch(backend, 2, timestamp_ms=2000) + batch(backend, 4, timestamp_ms=1500)
    result = segment.append(two)
    assert (result.first_offset, result.last_offset, result.batch_count) == (103, 108, 2)
    assert (result.max_timestamp_ms, result.offset_of_max_timestamp) == (2000, 104)
    assert segment.next_offset == 109 and segment.size_bytes == len(raw) + len(two)
    view = segment.read(100, 1 << 20)
    assert isinstance(view, memoryview) and view.readonly
    assert [r[0] for r in records(backend, view)] == list(range(100, 109))
    # Only the base offsets were patched; everything else is the caller's bytes.
    assert bytes(view[8:len(raw)]) == raw[8:]
    assert segment.max_timestamp_ms == 2000 and segment.offset_of_max_timestamp == 104
    assert segment.first_batch_timestamp_ms == 1000


def test_append_does_not_modify_callers_buffer(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=50)
    data = bytearray(batch(backend, 2) + batch(backend, 2))
    before = bytes(data)
    segment.append(data)
    assert bytes(data) == before


@pytest.mark.parametrize("edit, error, reason", [
    (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), CorruptRecordError, fmt.REASON_CRC_MISMATCH),
    (lambda raw: with_field(raw, fmt.MAGIC_POSITION, "b", 1, fix_crc=False), CorruptRecordError,
     fmt.REASON_BAD_MAGIC),
    (lambda raw: raw[:-5], CorruptRecordError, fmt.REASON_TRUNCATED),
    (lambda raw: with_field(raw, fmt.BATCH_LENGTH_POSITION, "i", 3, fix_crc=False),
     CorruptRecordError, fmt.REASON_BATCH_TOO_SMALL),
    (lambda raw: with_field(raw, fmt.LAST_OFFSET_DELTA_POSITION, "i", -1), CorruptRecordError,
     fmt.REASON_BAD_LAST_OFFSET_DELTA),
    (lambda raw: with_field(raw, fmt.RECORDS_COUNT_POSITION, "i", 2), CorruptRecordError,
     fmt.REASON_BAD_RECORDS),
])
def test_append_rejects_bad_batches_and_writes_nothing(backend, tmp_path, edit, error, reason):
    segment = _segment(backend, tmp_path)
    good = batch(backend, 3)
    with pytest.raises(error) as info:
        segment.append(good + edit(good))
    assert info.value.reason == reason and info.value.position == len(good)
    assert segment.size_bytes == 0 and segment.next_offset == 0
    assert os.path.getsize(segment.log_path) == 0


def test_append_record_too_large(backend, tmp_path):
    segment = _segment(backend, tmp_path, max_message_bytes=500)
    with pytest.raises(RecordTooLargeError):
        segment.append(batch(backend, 10, value_bytes=100))
    segment.append(batch(backend, 1, value_bytes=100))


def test_append_empty_is_an_error(backend, tmp_path):
    with pytest.raises(InvalidRecordError):
        _segment(backend, tmp_path).append(b"")


def test_append_without_assigning_offsets(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=10)
    segment.append(batch(backend, 2, base_offset=10) + batch(backend, 2, base_offset=20),
                   assign_offsets=False)
    assert segment.next_offset == 22
    with pytest.raises(InvalidOffsetError):
        segment.append(batch(backend, 1, base_offset=21), assign_offsets=False)
    with pytest.raises(InvalidOffsetError):  # not increasing inside one append
        segment.append(batch(backend, 2, base_offset=30) + batch(backend, 1, base_offset=31),
                       assign_offsets=False)
    assert segment.next_offset == 22


def test_read_from_inside_a_batch_returns_whole_batch(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=5, count=4)
    view = segment.read(9, 1)  # offset 9 is inside batch 8..11; min_one_batch
    assert [r[0] for r in records(backend, view)] == [8, 9, 10, 11]
    assert segment.translate_offset(9) == (2 * len(view), 8, len(view))
    assert segment.translate_offset(20) is None
    assert len(segment.read(20, 1 << 20)) == 0


def test_read_of_offset_in_gap_returns_next_batch(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    segment.append(batch(backend, 2, base_offset=0) + batch(backend, 2, base_offset=10),
                   assign_offsets=False)
    view = segment.read(5, 1)
    assert [r[0] for r in records(backend, view)] == [10, 11]


def test_max_bytes_and_min_one_batch(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    raws = _fill(backend, segment, batches=6)
    size = len(raws[0])
    assert len(segment.read(0, size * 3 + 5)) == size * 3  # whole batches only
    assert len(segment.read(0, size - 1)) == size  # at least one batch
    assert len(segment.read(0, size - 1, min_one_batch=False)) == 0
    assert segment.read_range(3, size * 2) == (size, size * 2)
    assert len(segment.read(0, 1 << 20, max_position=size * 2 + 10)) == size * 2
    assert len(segment.read(0, 1 << 20, max_position=size - 1)) == 0


def test_read_span_is_the_read_with_its_position_and_next_offset(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=100)
    raws = _fill(backend, segment, batches=6)  # 3 records a batch: offsets 100..117
    size = len(raws[0])
    for offset, max_bytes, kwargs in [(100, size * 3 + 5, {}), (104, size - 1, {}),
                                      (104, size - 1, {"min_one_batch": False}),
                                      (107, 1 << 20, {"max_position": size * 4 + 10}),
                                      (118, 1 << 20, {}), (0, size, {})]:
        view, position, next_offset = segment.read_span(offset, max_bytes, **kwargs)
        read = segment.read(offset, max_bytes, **kwargs)
        assert bytes(view) == bytes(read)
        if len(read):
            assert position == segment.translate_offset(offset)[0]
            assert next_offset == records(backend, read)[-1][0] + 1
        else:
            assert next_offset == offset
    view, position, next_offset = segment.read_span(104, size * 2)
    assert (position, len(view), next_offset) == (size, size * 2, 109)
    segment.flush()
    reader = backend.Segment.open(str(tmp_path), 100, read_only=True)
    view, position, next_offset = reader.read_span(103, 1 << 20)
    assert (position, len(view), next_offset) == (size, size * 5, 118)
    assert bytes(view) == bytes(segment.read(103, 1 << 20))
    reader.close()


def test_index_entries_follow_kafkas_rule(backend, tmp_path):
    segment = _segment(backend, tmp_path, index_interval_bytes=300)
    raws = _fill(backend, segment, batches=12)
    size = len(raws[0])
    # An entry for a batch when > 300 bytes were appended since the last one, checked before
    # the batch's own bytes are counted.
    expected, since = [], 0
    for n in range(12):
        if since > 300:
            expected.append((3 * n + 2, n * size))
            since = 0
        since += size
    index = segment.offset_index
    assert [index.entry(n) for n in range(index.entries)] == expected
    assert segment.time_index.entries == len(expected)


def test_reopen_finds_next_offset_and_max_timestamp(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=7)
    _fill(backend, segment, batches=9, step=-1)
    segment.close()
    reopened = backend.Segment.open(str(tmp_path), 7, index_interval_bytes=200)
    assert reopened.next_offset == 7 + 27 and not reopened.indexes_need_rebuild
    assert reopened.max_timestamp_ms == 1000 and reopened.offset_of_max_timestamp == 9
    assert reopened.first_batch_timestamp_ms == 1000
    assert len(records(backend, reopened.read(0, 1 << 20))) == 27


def test_time_lookups(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    for n in range(10):
        segment.append(batch(backend, 3, timestamp_ms=1000 + 10 * n, step_ms=2))
    assert segment.find_offset_by_timestamp(0) == (1000, 0)
    assert segment.find_offset_by_timestamp(1033) == (1034, 11)
    assert segment.find_offset_by_timestamp(1050, starting_offset=20) == (1064, 20)
    assert segment.find_offset_by_timestamp(2000) is None
    assert segment.time_index.lookup(1049)[0] <= 1049


def test_sendfile_to_socketpair(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    raws = _fill(backend, segment, batches=40, count=20)
    expected = bytes(segment.read(3, 5 * len(raws[0])))
    left, right = socket.socketpair()
    received = bytearray()

    def drain():
        while len(received) < len(expected):
            chunk = right.recv(65536)
            if not chunk:
                break
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        sent, next_offset = segment.sendfile(left, 3, 5 * len(raws[0]))
    finally:
        reader.join()
        left.close()
        right.close()
    assert sent == len(expected) == 5 * len(raws[0]) and next_offset == 100
    assert bytes(received) == expected


def test_sendfile_to_file(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=8)
    out_path = tmp_path / "out.bin"
    with open(out_path, "wb") as out:
        sent, next_offset = segment.sendfile(out.fileno(), 0, 1 << 20)
    assert out_path.read_bytes() == bytes(segment.read(0, 1 << 20))
    assert sent == segment.size_bytes and next_offset == 24
    with open(out_path, "wb") as out:
        assert segment.sendfile(out, 24, 1 << 20) == (0, 24)


def test_truncate_to(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    raws = _fill(backend, segment, batches=10)
    size = len(raws[0])
    assert segment.truncate_to(15) == 5 * size  # batch 15..17 and after
    assert segment.next_offset == 15 and segment.size_bytes == 5 * size
    assert segment.truncate_to(13) == 0  # inside batch 12..14: its base is below 13
    assert segment.offset_index.last_offset < 13
    assert segment.truncate_to(100) == 0
    segment.append(batch(backend, 3))
    assert [r[0] for r in records(backend, segment.read(12, 1 << 20))] == list(range(12, 18))
    assert segment.truncate_to(0) == 6 * size and segment.next_offset == 0
    assert segment.max_timestamp_ms == -1 and segment.first_batch_timestamp_ms == -1


def test_truncate_under_live_view_raises(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=10)
    view = segment.read(20, 1 << 20)
    with pytest.raises(ViewsOutstandingError):
        segment.truncate_to(9)
    assert segment.next_offset == 30  # nothing changed
    assert len(records(backend, view)) == 12  # batches 18..29
    view.release()
    assert segment.truncate_to(9) > 0


def test_views_outlive_close(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=3)
    view = segment.read(0, 1 << 20)
    segment.close()
    assert len(records(backend, view)) == 9


def test_views_stay_valid_across_remap(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=2)
    first = segment.read(0, 1 << 20)
    snapshot = bytes(first)
    for _ in range(50):
        segment.append(batch(backend, 50, value_bytes=1000))
    assert bytes(first) == snapshot
    assert len(records(backend, segment.read(6, 1))) == 50


def test_read_only_segment(backend, tmp_path):
    writer = _segment(backend, tmp_path)
    _fill(backend, writer, batches=4)
    reader = backend.Segment.open(str(tmp_path), 0, read_only=True)
    assert reader.next_offset == 12 and reader.read_only
    with pytest.raises(ReadOnlyError):
        reader.append(batch(backend, 1))
    with pytest.raises(ReadOnlyError):
        reader.truncate_to(0)
    raw = batch(backend, 3)
    writer.append(raw)
    with open(writer.log_path, "ab") as f:  # a torn write in progress: invisible
        f.write(batch(backend, 2)[:30])
    reader.refresh()
    assert reader.next_offset == 15 and reader.size_bytes == writer.size_bytes
    assert len(records(backend, reader.read(0, 1 << 20))) == 15


def test_closed_segment_raises(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    segment.close()
    segment.close()  # idempotent
    for call in (lambda: segment.append(batch(backend, 1)), lambda: segment.read(0, 100),
                 lambda: segment.truncate_to(0), lambda: segment.flush()):
        with pytest.raises(LogClosedError):
            call()


def test_roll_reason(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=10, max_index_bytes=48)
    assert segment.roll_reason(100, 10, 1000) is None
    raw = batch(backend, 1, value_bytes=200)
    segment.append(raw)
    assert segment.roll_reason(1000 - len(raw) + 1, 12, 1000) == "size"
    assert segment.roll_reason(10, 10 + fmt.INT32_MAX + 1, 1 << 30) == "offset_overflow"
    reason = None
    for _ in range(10):  # 6 offset-index slots; equal timestamps add one time-index entry
        reason = segment.roll_reason(len(raw), segment.next_offset, 1 << 30)
        if reason is not None:
            break
        segment.append(raw)
    assert reason == "offset_index_full"
    assert segment.offset_index.entries == 6 and segment.time_index.entries == 1


def test_on_become_inactive_trims_and_adds_final_time_entry(backend, tmp_path):
    segment = _segment(backend, tmp_path, index_interval_bytes=1 << 20)
    _fill(backend, segment, batches=3)
    segment.on_become_inactive()
    assert os.path.getsize(segment.index_path) == 0
    assert segment.time_index.last_entry() == (1006, 8)
    assert os.path.getsize(segment.time_index_path) == 12


def test_flush_rename_and_delete(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=3)
    segment.flush()
    segment.rename_suffix(".deleted")
    assert segment.log_path.endswith(".log.deleted") and os.path.exists(segment.log_path)
    assert len(records(backend, segment.read(0, 1 << 20))) == 9
    segment.delete()
    assert sorted(os.listdir(tmp_path)) == []


def test_create_refuses_existing_log(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    segment.append(batch(backend, 1))
    segment.close()
    with pytest.raises(FileExistsError):
        backend.Segment.open(str(tmp_path), 0, create=True)


def test_twins_write_identical_files(native, pure, tmp_path):
    pure_batches = [batch(pure, 1 + n % 7, value_bytes=10 + 13 * n, timestamp_ms=1000 + 7 * (n % 5))
                    for n in range(40)]
    for backend in (native, pure):
        directory = tmp_path / backend.name
        directory.mkdir()
        segment = backend.Segment.open(str(directory), 5, create=True, index_interval_bytes=250)
        for n in range(0, 40, 4):
            segment.append(b"".join(pure_batches[n:n + 4]))
        segment.truncate_to(60)
        segment.append(pure_batches[0])
        segment.close()
    for name in os.listdir(tmp_path / "native"):
        assert (tmp_path / "native" / name).read_bytes() == (tmp_path / "pure" / name).read_bytes(), name
    # Each backend reads the other's files.
    for backend, other in ((native, "pure"), (pure, "native")):
        segment = backend.Segment.open(str(tmp_path / other), 5, read_only=True)
        assert segment.next_offset > 60
        assert len(records(backend, segment.read(5, 1 << 30))) == segment.next_offset - 5


def test_empty_read_views_are_independent(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    segment.read(0, 100).release()  # empty: a fresh view each time, releasing it is harmless
    segment.append(batch(backend, 1))
    segment.read(5, 100).release()
    assert len(segment.read(0, 100)) > 0 and len(segment.read(5, 100)) == 0


# --- index preallocation: only new and active segments (Kafka's LogLoader, §2.5) -------------

_MIB10 = 10 * 1024 * 1024


def _index_sizes(segment):
    return os.path.getsize(segment.index_path), os.path.getsize(segment.time_index_path)


@pytest.mark.parametrize("interval", [200, 1 << 20])  # with entries / an empty offset index
def test_reopen_leaves_indexes_at_trimmed_size(backend, tmp_path, interval):
    segment = _segment(backend, tmp_path, index_interval_bytes=interval)
    assert _index_sizes(segment) == (_MIB10, _MIB10 - _MIB10 % 12)  # create preallocates
    _fill(backend, segment, batches=9)
    entries = segment.offset_index.entries
    segment.close()
    trimmed = _index_sizes(segment)
    assert trimmed == (8 * entries, os.path.getsize(segment.time_index_path))
    assert trimmed[0] == 0 if interval > 1000 else trimmed[0] > 0
    reopened = backend.Segment.open(str(tmp_path), 0, index_interval_bytes=interval)
    assert _index_sizes(reopened) == trimmed  # an old segment's indexes are not preallocated
    assert not reopened.indexes_need_rebuild
    assert reopened.offset_index.entries == entries
    assert reopened.next_offset == 27 and reopened.max_timestamp_ms == 1024
    assert reopened.read(13, 1 << 20) and reopened.translate_offset(13)[1] == 12
    assert reopened.find_offset_by_timestamp(1012) == (1012, 12)
    reopened.close()
    assert _index_sizes(reopened) == trimmed


def test_resize_indexes_preallocates_the_active_segment(backend, tmp_path):
    segment = _segment(backend, tmp_path, max_index_bytes=4000)
    _fill(backend, segment, batches=4)
    segment.close()
    reopened = backend.Segment.open(str(tmp_path), 0, index_interval_bytes=200,
                                    max_index_bytes=4000)
    assert reopened.offset_index.is_full()  # trimmed: no room until the Log resizes it
    assert reopened.roll_reason(100, reopened.next_offset, 1 << 30) == "offset_index_full"
    reopened.resize_indexes()
    assert _index_sizes(reopened) == (4000, 3996)
    assert not reopened.offset_index.is_full() and not reopened.time_index.is_full()
    assert reopened.roll_reason(100, reopened.next_offset, 1 << 30) is None
    for raw in [batch(backend, 3, timestamp_ms=2000 + n) for n in range(6)]:
        reopened.append(raw)
    reopened.close()
    # Same files as a segment written in one go.
    fresh_dir = tmp_path / "fresh"
    fresh_dir.mkdir()
    fresh = _segment(backend, fresh_dir, max_index_bytes=4000)
    _fill(backend, fresh, batches=4)
    for raw in [batch(backend, 3, timestamp_ms=2000 + n) for n in range(6)]:
        fresh.append(raw)
    fresh.close()
    for reopened_path, fresh_path in ((reopened.index_path, fresh.index_path),
                                      (reopened.time_index_path, fresh.time_index_path),
                                      (reopened.log_path, fresh.log_path)):
        with open(reopened_path, "rb") as a, open(fresh_path, "rb") as b:
            assert a.read() == b.read()


@pytest.mark.parametrize("missing", ["index", "time_index", "both"])
def test_missing_index_of_old_segment_is_rebuilt_by_recover(backend, tmp_path, missing):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=9)
    segment.close()
    originals = {}
    for path in (segment.index_path, segment.time_index_path):
        with open(path, "rb") as f:
            originals[path] = f.read()
    paths = {"index": [segment.index_path], "time_index": [segment.time_index_path],
             "both": [segment.index_path, segment.time_index_path]}[missing]
    for path in paths:
        os.remove(path)
    reopened = backend.Segment.open(str(tmp_path), 0, index_interval_bytes=200)
    assert reopened.indexes_need_rebuild
    for path in paths:
        assert os.path.getsize(path) == 0  # created empty, not preallocated
    result = reopened.recover()
    assert result.truncated_bytes == 0 and not reopened.indexes_need_rebuild
    assert reopened.offset_index.entries > 0
    for path, data in originals.items():
        with open(path, "rb") as f:
            assert f.read() == data  # rebuilt, trimmed, identical
    assert reopened.translate_offset(13)[1] == 12
    reopened.close()
    for path, data in originals.items():
        assert os.path.getsize(path) == len(data)


def test_truncate_to_on_reopened_segment(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    _fill(backend, segment, batches=9)
    segment.close()
    reopened = backend.Segment.open(str(tmp_path), 0, index_interval_bytes=200)
    assert reopened.truncate_to(15) > 0
    assert reopened.next_offset == 15 and reopened.max_timestamp_ms == 1012
    assert reopened.offset_index.last_offset < 15 and reopened.time_index.last_offset < 15
    assert _index_sizes(reopened) == (_MIB10, _MIB10 - _MIB10 % 12)  # resized, as Kafka
    reopened.append(batch(backend, 3, timestamp_ms=5000))
    assert reopened.next_offset == 18
    reopened.close()
    again = backend.Segment.open(str(tmp_path), 0, index_interval_bytes=200)
    assert not again.indexes_need_rebuild
    again.offset_index.sanity_check()
    again.time_index.sanity_check()
    assert again.time_index.last_entry() == (5000, 17)
    assert [r[0] for r in records(backend, again.read(0, 1 << 20))] == list(range(18))
    again.close()


def test_close_of_reopened_segment_adds_a_missing_final_time_entry(backend, tmp_path):
    segment = _segment(backend, tmp_path, index_interval_bytes=1 << 20)
    _fill(backend, segment, batches=3)
    segment.close()
    open(segment.time_index_path, "wb").close()  # empty (valid) time index, no final entry
    reopened = backend.Segment.open(str(tmp_path), 0, index_interval_bytes=1 << 20)
    assert reopened.time_index.max_entries == 0 and reopened.max_timestamp_ms == 1006
    reopened.close()  # must find a slot for (1006, 8) instead of raising IndexFullError
    assert os.path.getsize(reopened.time_index_path) == 12
    again = backend.Segment.open(str(tmp_path), 0, index_interval_bytes=1 << 20)
    assert again.time_index.last_entry() == (1006, 8)
    again.close()


def test_log_open_does_not_grow_old_segments_indexes(backend, tmp_path):
    from seglog import Log, LogConfig

    config = LogConfig(segment_bytes=100, index_interval_bytes=200)  # a batch a segment
    path = tmp_path / "t-0"
    with Log.open(path, config, backend=backend.name) as log:
        for i in range(200):
            log.append(b"v%03d" % i, timestamp_ms=1000 + i)
        assert len(log.segments) >= 200

    def index_files():
        return {name: os.path.getsize(path / name) for name in os.listdir(path)
                if name.endswith((".index", ".timeindex"))}

    before = index_files()
    assert len(before) >= 400 and max(before.values()) <= 12
    with Log.open(path, config, backend=backend.name) as log:
        active = log.segments[-1]
        after = index_files()
        active_files = {os.path.basename(active.index_path),
                        os.path.basename(active.time_index_path)}
        assert {n: s for n, s in after.items() if n not in active_files} == \
            {n: s for n, s in before.items() if n not in active_files}
        # Only the active segment's indexes are preallocated (Kafka's LogLoader), and only
        # before its first append (design.md §7: an idle partition's files are not touched).
        size = config.segment_index_bytes
        assert after[os.path.basename(active.index_path)] \
            == before[os.path.basename(active.index_path)]
        assert log.read(57, 1 << 20) is not None
        end = log.end_offset
        log.append(b"more", timestamp_ms=5000)
        assert log.end_offset == end + 1
        after = index_files()
        active = log.segments[-1]  # the append rolled (a batch a segment)
        active_files |= {os.path.basename(active.index_path),
                         os.path.basename(active.time_index_path)}
        assert after[os.path.basename(active.index_path)] == size - size % 8
        assert after[os.path.basename(active.time_index_path)] == size - size % 12
        assert {n: s for n, s in after.items() if n not in active_files} == \
            {n: s for n, s in before.items() if n not in active_files}
