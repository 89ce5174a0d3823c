"""Log: appends, roll rules, reads across segments and gaps, client-batch validation,
timestamps, flush, high watermark, truncation, DeleteRecords, threads and long-poll.

Every test takes the ``backend`` fixture and runs on both twins.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import numpy as np
import pytest

from seglog import Log, LogConfig
from seglog import format as fmt
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")


def open_log(path, backend, **config):
    return Log.open(path, LogConfig(**config), backend=backend.name)


def patch(be, batch, position, st, value, *, fix_crc=True):
    """``batch`` with field ``st`` at ``position`` set to ``value`` (CRC recomputed)."""
    out = bytearray(batch)
    st.pack_into(out, position, value)
    if fix_crc:
        UINT32.pack_into(out, fmt.CRC_POSITION, be.crc32c(bytes(out[fmt.ATTRIBUTES_POSITION:])))
    return bytes(out)


def offsets_of(log, start=0):
    return [r.offset for r in log.records(start)]


# --- appends and reads -------------------------------------------------------------------------


def test_append_and_read_back(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend) as log:
        assert (log.start_offset, log.end_offset, log.high_watermark) == (0, 0, 0)
        assert log.append(b"v0", key=b"k0", timestamp_ms=1000, headers=[("h", b"x")]) == 0
        assert log.append_batch([b"v1", b"v2"], keys=[b"k1", None], timestamps_ms=[1001, 1002]) == (1, 2)
        assert log.append(None, key=b"tomb", timestamp_ms=1003) == 3
        assert (log.end_offset, log.high_watermark) == (4, 4)
        got = [tuple(r) for r in log.records()]
        assert got == [
            (0, 1000, b"k0", b"v0", (("h", b"x"),)),
            (1, 1001, b"k1", b"v1", ()),
            (2, 1002, None, b"v2", ()),
            (3, 1003, b"tomb", None, ()),
        ]
        assert [r.offset for r in log.records(2, 3)] == [2]
        assert log.size_bytes == sum(s.size_bytes for s in log.segments) > 0


def test_append_batch_numpy_and_compression(tmp_path, backend):
    values = np.frombuffer(b"abcdefgh" * 4, dtype=np.uint8).reshape(4, 8)
    with open_log(tmp_path / "t-0", backend) as log:
        assert log.append_batch(values, timestamps_ms=7) == (0, 3)
        assert log.append_batch([b"x" * 100] * 10, compression="lz4", timestamps_ms=8) == (4, 13)
        recs = list(log.records())
        assert [r.value for r in recs[:4]] == [b"abcdefgh"] * 4
        assert [r.value for r in recs[4:]] == [b"x" * 100] * 10
        batches = list(log.backend.iter_batches(log.read(4).buffer))
        assert batches[-1].compression == "lz4"


def test_read_result_is_file_range(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend) as log:
        for i in range(5):
            log.append_batch([b"v%d" % i] * 3, timestamps_ms=i)
        result = log.read(4, 1 << 20)
        assert result.offset == 4 and result.next_offset == 15
        with open(result.log_path, "rb") as f:
            f.seek(result.position)
            assert f.read(result.size_bytes) == bytes(result.buffer)
        assert result.position > 0  # offset 4 is in the second batch, which starts after the first
        first = next(iter(log.backend.iter_batches(result.buffer)))
        assert first.base_offset == 3  # a read inside a batch returns the whole batch
        assert log.read(15).buffer.nbytes == 0 and log.read(15).next_offset == 15


def test_read_out_of_range(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend) as log:
        log.append_batch([b"a"] * 10, timestamps_ms=1)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(11)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1)
        log.delete_records_before(5)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(4)
        assert offsets_of(log) == list(range(5, 10))


def test_reads_cross_segments(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_bytes=400) as log:
        for i in range(60):
            log.append(b"value-%03d" % i, timestamp_ms=1000 + i)
        assert len(log.segments) > 5
        assert offsets_of(log) == list(range(60))
        # A read stays in one segment; next_offset leads into the next one.
        offset, seen = 0, []
        while offset < log.end_offset:
            result = log.read(offset, 1 << 20)
            batches = list(log.backend.iter_batches(result.buffer))
            seen += [b.base_offset for b in batches]
            offset = result.next_offset
        assert seen == list(range(60))
        for offset in (0, 17, 59):
            assert next(log.records(offset)).offset == offset


def _write_raw_segment(backend, dir_path, base, batches_at):
    """A segment whose batches sit at given offsets (gaps, as compaction leaves them)."""
    seg = backend.Segment.open(dir_path, base, create=True)
    for offset, values in batches_at:
        seg.append(backend.encode_batch(values, timestamps_ms=offset, base_offset=offset),
                   assign_offsets=False)
    seg.close()


def test_reads_across_offset_gaps(tmp_path, backend):
    d = tmp_path / "t-0"
    d.mkdir()
    _write_raw_segment(backend, str(d), 0, [(0, [b"a", b"b"]), (10, [b"c"]), (20, [b"d", b"e"])])
    _write_raw_segment(backend, str(d), 100, [(100, [b"f"]), (150, [b"g"])])
    with open_log(d, backend) as log:
        assert (log.start_offset, log.end_offset) == (0, 151)
        assert offsets_of(log) == [0, 1, 10, 20, 21, 100, 150]
        assert next(log.records(5)).offset == 10  # in a gap: the next batch
        assert next(log.records(30)).offset == 100  # a gap between segments
        result = log.read(30)
        assert next(iter(log.backend.iter_batches(result.buffer))).base_offset == 100
        assert log.read(101).next_offset == 151
        a, b = socket.socketpair()
        with a, b:
            assert log.sendfile(a, 30, 1 << 20)[1] == 151  # batches 100 and 150
        cols = log.read_columns(12, 10)
        assert list(cols.offsets) == [20, 21]
        # appends continue after the last offset
        assert log.append(b"h", timestamp_ms=1) == 151


def test_read_columns(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend) as log:
        log.append_batch([b"v%d" % i for i in range(10)], keys=[b"k%d" % i for i in range(10)],
                         timestamps_ms=list(range(100, 110)))
        cols = log.read_columns(3, 4)
        assert list(cols.offsets) == [3, 4, 5, 6]
        assert list(cols.timestamps_ms) == [103, 104, 105, 106]
        assert [cols.value(i) for i in range(len(cols))] == [b"v3", b"v4", b"v5", b"v6"]
        assert cols.key(0) == b"k3"
        assert len(log.read_columns(0, 100)) == 10


def test_sendfile(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_bytes=300) as log:
        for i in range(20):
            log.append(b"x%02d" % i, timestamp_ms=i)
        a, b = socket.socketpair()
        with a, b:
            sent, nxt = log.sendfile(a, 5, 1 << 20)
            expected = log.read(5, 1 << 20)
            assert (sent, nxt) == (expected.size_bytes, expected.next_offset)
            assert b.recv(1 << 20) == bytes(expected.buffer)
        with open(tmp_path / "out", "wb") as f:
            sent, nxt = log.sendfile(f.fileno(), log.end_offset, 100)
            assert (sent, nxt) == (0, log.end_offset)


def test_offset_for_timestamp(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_bytes=300, index_interval_bytes=0) as log:
        for i in range(30):
            log.append(b"v", timestamp_ms=1000 + 10 * i)
        assert log.offset_for_timestamp(1000) == 0
        assert log.offset_for_timestamp(1001) == 1
        assert log.offset_for_timestamp(1150) == 15
        assert log.offset_for_timestamp(1290) == 29
        assert log.offset_for_timestamp(1291) is None
        assert log.offset_for_timestamp(-2) == 0
        assert log.offset_for_timestamp(-1) == 30
        assert log.offset_for_timestamp(-3) == 29


# --- roll ---------------------------------------------------------------------------------------


def test_roll_by_size(tmp_path, backend):
    batch_bytes = len(backend.encode_batch([b"x" * 50], timestamps_ms=1))
    with open_log(tmp_path / "t-0", backend, segment_bytes=batch_bytes * 3) as log:
        for i in range(10):
            log.append(b"x" * 50, timestamp_ms=1)
        assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
        assert all(s.size_bytes <= batch_bytes * 3 for s in log.segments)
        # the new base offset is the next offset: segments are contiguous
        assert [s.next_offset for s in log.segments[:-1]] == [3, 6, 9]
        with pytest.raises(RecordBatchTooLargeError):
            log.append_batch([b"y" * 50] * 10, timestamps_ms=1)


def test_roll_by_time_uses_first_batch_timestamp(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_ms=100) as log:
        log.append(b"a", timestamp_ms=1000)  # the first batch sets the roll base
        log.append(b"b", timestamp_ms=1100)  # waited exactly 100: not more than segment.ms
        log.append(b"c", timestamp_ms=500)  # old timestamps never roll
        assert len(log.segments) == 1
        log.append(b"d", timestamp_ms=1101)  # 101 > 100
        assert [s.base_offset for s in log.segments] == [0, 3]
        log.append(b"e", timestamp_ms=1150)
        log.append(b"f", timestamp_ms=1202)  # measured from the new segment's first batch (1101)
        assert [s.base_offset for s in log.segments] == [0, 3, 5]


def test_empty_segment_never_rolls_on_time(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_ms=1) as log:
        log.append(b"a", timestamp_ms=10**12)
        assert len(log.segments) == 1
        log.append(b"b", timestamp_ms=10**12 + 1)  # waited 1: not more than 1
        assert len(log.segments) == 1
        log.append(b"c", timestamp_ms=10**12 + 5)
        assert len(log.segments) == 2
        log.roll()  # the active segment is already empty after this? no: it holds offset 2
        assert len(log.segments) == 3
        log.roll()  # an empty active segment does not roll again
        assert len(log.segments) == 3


def test_roll_by_time_without_timestamps_uses_creation_time(tmp_path, backend):
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=100), backend=backend.name, now_ms=0)
    with log:
        raw = backend.encode_batch([b"a"], timestamps_ms=-1)
        log.append_raw(raw, now_ms=50)
        log.append_raw(raw, now_ms=100)
        assert len(log.segments) == 1
        log.append_raw(raw, now_ms=101)
        assert len(log.segments) == 2


def test_roll_when_index_full(tmp_path, backend):
    # 3 offset-index slots, 2 time-index slots (one reserved for the roll entry)
    with open_log(tmp_path / "t-0", backend, segment_index_bytes=24,
                  index_interval_bytes=0) as log:
        for i in range(12):
            log.append(b"v%d" % i, timestamp_ms=100 + i)
        assert len(log.segments) > 3
        for segment in log.segments:
            assert segment.offset_index.entries <= 3
            assert segment.time_index.entries <= 2
        assert offsets_of(log) == list(range(12))
        assert log.offset_for_timestamp(105) == 5


def test_roll_on_relative_offset_overflow(tmp_path, backend):
    d = tmp_path / "t-0"
    d.mkdir()
    near = fmt.INT32_MAX - 5
    _write_raw_segment(backend, str(d), 0, [(near, [b"a"])])
    with open_log(d, backend) as log:
        assert log.end_offset == near + 1
        first, last = log.append_batch([b"x"] * 3, timestamps_ms=1)
        assert (first, last) == (near + 1, near + 3) and len(log.segments) == 1
        first, last = log.append_batch([b"y"] * 10, timestamps_ms=1)  # last - 0 > INT32_MAX
        assert [s.base_offset for s in log.segments] == [0, near + 4]
        assert [r.offset for r in log.records(near)][:5] == [near, near + 1, near + 2, near + 3,
                                                             near + 4]


# --- append_raw (client batches) ---------------------------------------------------------------


def test_append_raw_assigns_offsets_and_keeps_bytes(tmp_path, backend):
    raw = backend.encode_batch([b"a", b"b"], keys=[b"k", b"l"], timestamps_ms=[5, 9],
                               producer_id=7, producer_epoch=1, base_sequence=0)
    raw2 = backend.encode_batch([b"c"], timestamps_ms=11, compression="gzip")
    data = raw + raw2
    before = bytes(data)
    with open_log(tmp_path / "t-0", backend) as log:
        log.append(b"first", timestamp_ms=1)
        assert log.append_raw(data) == (1, 3)
        assert data == before  # the caller's buffer is never modified
        stored = bytes(log.read(1).buffer)
        assert stored[8:len(raw)] == raw[8:]  # same bytes but the base offset
        assert INT64.unpack_from(stored, 0)[0] == 1
        assert INT64.unpack_from(stored, len(raw))[0] == 3
        assert [(r.offset, r.value) for r in log.records(1)] == [(1, b"a"), (2, b"b"), (3, b"c")]
        assert log.append_raw(bytearray(raw2)) == (4, 4)
        assert log.append_raw(memoryview(raw2)) == (5, 5)


@pytest.mark.parametrize("case", ["base_offset", "control", "count", "crc", "producer_seq",
                                  "trailing", "too_large", "empty", "magic"])
def test_append_raw_validation(tmp_path, backend, case):
    raw = backend.encode_batch([b"a", b"b", b"c"], timestamps_ms=5)
    expected = InvalidRecordError
    if case == "base_offset":
        bad = patch(backend, raw, fmt.BASE_OFFSET_POSITION, INT64, 5, fix_crc=False)
    elif case == "control":
        bad = backend.encode_control_batch(1, producer_id=1, producer_epoch=0)
    elif case == "count":
        bad = patch(backend, raw, fmt.RECORDS_COUNT_POSITION, INT32, 2)
    elif case == "crc":
        bad = bytearray(raw)
        bad[-1] ^= 0xFF
        bad, expected = bytes(bad), CorruptRecordError
    elif case == "producer_seq":
        bad = backend.encode_batch([b"a"], timestamps_ms=5, producer_id=3, producer_epoch=0,
                                   base_sequence=-1)
    elif case == "trailing":
        bad, expected = raw + raw[:30], CorruptRecordError
    elif case == "too_large":
        bad, expected = backend.encode_batch([b"z" * 2000], timestamps_ms=5), RecordTooLargeError
    elif case == "empty":
        bad = b""
    elif case == "magic":
        bad, expected = patch(backend, raw, fmt.MAGIC_POSITION, struct.Struct(">b"), 1,
                              fix_crc=False), CorruptRecordError
    with open_log(tmp_path / "t-0", backend, max_message_bytes=1000) as log:
        with pytest.raises(expected):
            log.append_raw(raw + bad if case == "count" else bad)
        assert log.end_offset == 0 and log.size_bytes == 0  # nothing written
        assert log.append_raw(raw) == (0, 2)


def test_append_raw_log_append_time(tmp_path, backend):
    raw = backend.encode_batch([b"a", b"b"], timestamps_ms=[5, 9])
    with open_log(tmp_path / "t-0", backend, message_timestamp_type="LogAppendTime") as log:
        log.append_raw(raw, now_ms=123456)
        batch = next(iter(log.backend.iter_batches(log.read(0).buffer)))
        assert batch.timestamp_type == fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME
        assert batch.max_timestamp_ms == 123456
        assert batch.is_valid()  # the CRC was recomputed
        assert [r.timestamp_ms for r in log.records()] == [123456, 123456]
        log.append_batch([b"c"], timestamps_ms=1, now_ms=777)
        assert [r.timestamp_ms for r in log.records(2)] == [777]


def test_append_raw_create_time_fixes_max_timestamp(tmp_path, backend):
    raw = backend.encode_batch([b"a", b"b"], timestamps_ms=[5, 9])
    lying = patch(backend, raw, fmt.MAX_TIMESTAMP_POSITION, INT64, 1)
    with open_log(tmp_path / "t-0", backend) as log:
        log.append_raw(lying)
        batch = next(iter(log.backend.iter_batches(log.read(0).buffer)))
        assert batch.max_timestamp_ms == 9 and batch.is_valid()
        assert log.segments[0].max_timestamp_ms == 9


def test_timestamp_bounds(tmp_path, backend):
    now = 10**12
    with open_log(tmp_path / "t-0", backend, message_timestamp_before_max_ms=1000,
                  message_timestamp_after_max_ms=10) as log:
        log.append(b"ok", timestamp_ms=now - 1000, now_ms=now)
        with pytest.raises(InvalidTimestampError):
            log.append(b"old", timestamp_ms=now - 1001, now_ms=now)
        with pytest.raises(InvalidTimestampError):
            log.append_batch([b"a", b"b"], timestamps_ms=[now, now + 11], now_ms=now)
        with pytest.raises(InvalidTimestampError):
            log.append_raw(backend.encode_batch([b"a"], timestamps_ms=now - 5000), now_ms=now)
        assert log.end_offset == 1


def test_max_message_bytes(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, max_message_bytes=200) as log:
        with pytest.raises(RecordTooLargeError):
            log.append(b"x" * 300, timestamp_ms=1)
        log.append(b"x" * 50, timestamp_ms=1)
        assert log.end_offset == 1


# --- flush and high watermark -------------------------------------------------------------------


def test_flush_advances_recovery_point_and_checkpoints(tmp_path, backend):
    d = tmp_path / "clicks-3"
    with open_log(d, backend) as log:
        log.append_batch([b"a"] * 5, timestamps_ms=1)
        assert log.recovery_point == 0
        log.flush()
        assert log.recovery_point == 5
        text = (d / "recovery-point-offset-checkpoint").read_text()
        assert text == "0\n1\nclicks 3 5\n"
        assert (d / "log-start-offset-checkpoint").read_text() == "0\n1\nclicks 3 0\n"


def test_flush_messages_and_flush_ms(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, flush_messages=3) as log:
        log.append(b"a", timestamp_ms=1)
        log.append(b"b", timestamp_ms=1)
        assert log.recovery_point == 0
        log.append(b"c", timestamp_ms=1)
        assert log.recovery_point == 3
    log = Log.open(tmp_path / "u-0", LogConfig(flush_ms=1000), backend=backend.name, now_ms=0)
    with log:
        log.append(b"a", timestamp_ms=1, now_ms=500)
        assert log.recovery_point == 0
        assert not log.maybe_flush(now_ms=900)
        assert log.maybe_flush(now_ms=1000)
        assert log.recovery_point == 1
        log.append(b"b", timestamp_ms=1, now_ms=1500)
        log.append(b"c", timestamp_ms=1, now_ms=2000)  # 1000 ms since the last flush
        assert log.recovery_point == 3


def test_roll_flushes_the_old_segment(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_bytes=200) as log:
        for _ in range(5):
            log.append(b"x" * 60, timestamp_ms=1)
        assert len(log.segments) > 1
        assert log.recovery_point >= log.segments[-1].base_offset


def test_high_watermark_manual(tmp_path, backend):
    log = Log.open(tmp_path / "t-0", backend=backend.name, auto_high_watermark=False)
    with log:
        log.append_batch([b"a"] * 3, timestamps_ms=1)
        log.append_batch([b"b"] * 3, timestamps_ms=1)
        assert (log.end_offset, log.high_watermark) == (6, 0)
        assert list(log.records()) == []
        assert log.update_high_watermark(3) == 3
        assert offsets_of(log) == [0, 1, 2]
        assert log.read(3).buffer.nbytes == 0  # between HW and LEO: empty, not an error
        assert len(list(log.records(0, max_offset=log.end_offset))) == 6  # a follower's read
        assert log.update_high_watermark(100) == 6
        with pytest.raises(OffsetOutOfRangeError):
            log.delete_records_before(7)


# --- truncation and DeleteRecords --------------------------------------------------------------


def test_truncate_to_batch_boundary_across_segments(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_bytes=300) as log:
        for i in range(20):
            log.append(b"v%02d" % i, timestamp_ms=i)
        n = len(log.segments)
        log.truncate_to(7)
        assert (log.end_offset, log.high_watermark) == (7, 7)
        assert offsets_of(log) == list(range(7))
        assert len(log.segments) < n
        assert log.append(b"new", timestamp_ms=1) == 7
        assert [r.value for r in log.records(6)] == [b"v06", b"new"]
        log.truncate_to(100)  # past the end: nothing happens
        assert log.end_offset == 8


def test_truncate_to_inside_a_batch_is_exact(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend) as log:
        log.append_batch([b"a"] * 5, timestamps_ms=1)
        log.append_batch([b"b"] * 5, timestamps_ms=1)
        log.truncate_to(7)
        assert log.end_offset == 7  # the batch holding 7 is gone whole: 5 and 6 with it
        assert offsets_of(log) == [0, 1, 2, 3, 4]
        assert log.append(b"c", timestamp_ms=1) == 7
        assert offsets_of(log) == [0, 1, 2, 3, 4, 7]
        log.truncate_to(2)
        assert log.end_offset == 2 and offsets_of(log) == []
        assert log.append(b"d", timestamp_ms=1) == 2


def test_truncate_below_first_segment(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_bytes=200) as log:
        for i in range(10):
            log.append(b"x" * 40, timestamp_ms=1)
        log.delete_records_before(9)
        log.apply_retention()
        first = log.segments[0].base_offset
        assert first > 0
        log.truncate_to(first - 1)
        assert (log.start_offset, log.end_offset, len(log.segments)) == (first - 1, first - 1, 1)
        assert log.append(b"y", timestamp_ms=1) == first - 1


def test_delete_records_before(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, segment_bytes=200) as log:
        for i in range(10):
            log.append(b"x" * 40, timestamp_ms=1)
        segments_before = len(log.segments)
        assert log.delete_records_before(6) == 6
        assert log.start_offset == 6
        assert offsets_of(log) == [6, 7, 8, 9]
        assert len(log.segments) < segments_before
        assert log.segments[0].base_offset <= 6
        assert log.delete_records_before(3) == 6  # never backwards
        with pytest.raises(OffsetOutOfRangeError):
            log.delete_records_before(11)
        assert log.delete_records_before(-1) == 10  # -1: the high watermark
        assert log.end_offset == 10 and list(log.records()) == []


# --- threads ------------------------------------------------------------------------------------


def test_wait_for_data_wakes_on_append(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend) as log:
        assert not log.wait_for_data(0, timeout_ms=20)
        woke = []

        def waiter():
            woke.append(log.wait_for_data(0, timeout_ms=10_000))
            woke.append(time.monotonic())

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.05)
        appended_at = time.monotonic()
        log.append(b"x", timestamp_ms=1)
        t.join(5)
        assert woke[0] is True and woke[1] - appended_at < 1.0
        assert log.wait_for_data(0, timeout_ms=0)


def test_wait_for_data_returns_on_close(tmp_path, backend):
    log = open_log(tmp_path / "t-0", backend)
    result = []
    t = threading.Thread(target=lambda: result.append(log.wait_for_data(0, 10_000)))
    t.start()
    time.sleep(0.05)
    log.close()
    t.join(5)
    assert result == [False]
    with pytest.raises(LogClosedError):
        log.append(b"x")


def test_concurrent_readers_see_whole_batches(tmp_path, backend):
    stop = threading.Event()
    errors = []
    with open_log(tmp_path / "t-0", backend, segment_bytes=4096) as log:

        def reader():
            try:
                while not stop.is_set():
                    expected = log.start_offset
                    for record in log.records(0):
                        assert record.offset == expected, (record.offset, expected)
                        assert record.value == b"%d" % record.offset
                        expected += 1
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for i in range(0, 600, 3):
            log.append_batch([b"%d" % (i + j) for j in range(3)], timestamps_ms=1)
        stop.set()
        for t in threads:
            t.join(10)
        assert not errors, errors
        assert log.end_offset == 600 and len(log.segments) > 3


@pytest.mark.parametrize("topic_codec, expected", [("gzip", "gzip"), ("uncompressed", "none"),
                                                    ("producer", "lz4")])
def test_append_raw_recompresses_to_topic_codec(tmp_path, backend, topic_codec, expected):
    # Kafka's broker re-encodes a produce request whose codec differs from the topic's
    # compression.type (unless it is "producer"), keeping records and producer fields.
    log = open_log(tmp_path / "t-0", backend, compression_type=topic_codec)
    raw = backend.encode_batch([b"a", None, b"c" * 300], keys=[b"k1", b"k2", None],
                               timestamps_ms=[5, 7, 6], headers=[(), [("h", b"x")], ()],
                               compression="lz4", producer_id=9, producer_epoch=1,
                               base_sequence=0)
    assert log.append_raw(raw) == (0, 2)
    [batch] = list(backend.iter_batches(log.read(0, 1 << 20).buffer))
    assert batch.compression == expected
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 0)
    assert [tuple(r) for r in batch.records()] == [
        (0, 5, b"k1", b"a", ()), (1, 7, b"k2", None, (("h", b"x"),)),
        (2, 6, None, b"c" * 300, ())]
    log.close()
