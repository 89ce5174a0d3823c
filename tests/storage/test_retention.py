"""Retention (Kafka's ``UnifiedLog``): by time, by size, by start offset; whole segments, oldest
first, never at or above the high watermark; the active-segment case; ``.deleted`` files and
``file.delete.delay.ms``. Every test runs on both backends."""

from __future__ import annotations

import os

from seglog import Log, LogConfig
from seglog.storage.retention import largest_timestamp_ms

DAY_MS = 86_400_000


def open_log(path, backend, **config):
    config.setdefault("file_delete_delay_ms", 1000)
    return Log.open(path, LogConfig(**config), backend=backend.name)


def fill(log, timestamps_per_segment):
    """One segment per entry: its records get the given timestamps; rolls between entries."""
    for timestamps in timestamps_per_segment:
        for ts in timestamps:
            log.append(b"v", timestamp_ms=ts)
        log.roll()


def deleted_files(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".deleted"))


def test_retention_by_time(tmp_path, backend):
    now = 100 * DAY_MS
    with open_log(tmp_path / "t-0", backend, retention_ms=DAY_MS) as log:
        fill(log, [[now - 3 * DAY_MS], [now - 2 * DAY_MS, now - 5 * DAY_MS],
                   [now - DAY_MS // 2], [now - 4 * DAY_MS]])
        log.append(b"active", timestamp_ms=now)
        bases = [s.base_offset for s in log.segments]
        # the largest timestamp decides (segment 2's old record does not matter), and the walk
        # stops at the first young segment even though an older one follows it
        assert log.apply_retention(now_ms=now) == bases[:2]
        assert log.start_offset == bases[2] == 3
        assert [r.offset for r in log.records()] == [3, 4, 5]
        assert log.end_offset == 6


def test_retention_time_boundary_is_strict(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, retention_ms=1000) as log:
        fill(log, [[5000]])
        log.append(b"x", timestamp_ms=9000)
        assert log.apply_retention(now_ms=6000) == []  # waited exactly retention.ms
        assert log.apply_retention(now_ms=6001) == [0]


def test_retention_disabled(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, retention_ms=-1) as log:
        fill(log, [[1], [2]])
        assert log.apply_retention(now_ms=10**13) == []


def test_retention_by_size(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, retention_ms=-1) as log:
        fill(log, [[1] * 3, [1] * 3, [1] * 3, [1] * 3])
        sizes = [s.size_bytes for s in log.segments]
        total = log.size_bytes
        # allow all but 1.5 segments' worth: exactly one whole segment must go
        log.update_config(log.config.replace(retention_bytes=total - sizes[0] - sizes[1] // 2))
        assert log.apply_retention(now_ms=0) == [0]
        log.update_config(log.config.replace(retention_bytes=log.size_bytes))
        assert log.apply_retention(now_ms=0) == []  # not larger than the limit
        log.update_config(log.config.replace(retention_bytes=0))
        deleted = log.apply_retention(now_ms=0)
        assert deleted == [3, 6, 9]  # everything, through the roll of an empty segment
        assert log.size_bytes == 0 and log.end_offset == 12


def test_retention_active_segment_rolls_first(tmp_path, backend):
    now = 10 * DAY_MS
    with open_log(tmp_path / "t-0", backend, retention_ms=DAY_MS) as log:
        log.append_batch([b"a", b"b", b"c"], timestamps_ms=now - 2 * DAY_MS)
        assert len(log.segments) == 1
        assert log.apply_retention(now_ms=now) == [0]
        assert (log.start_offset, log.end_offset, log.high_watermark) == (3, 3, 3)
        assert [s.base_offset for s in log.segments] == [3]
        assert log.segments[0].size_bytes == 0
        assert log.append(b"next", timestamp_ms=now) == 3  # the next append gets the old LEO
        # an empty active segment is never deleted
        assert log.apply_retention(now_ms=now + 10 * DAY_MS) == [3]
        assert log.apply_retention(now_ms=now + 20 * DAY_MS) == []
        assert len(log.segments) == 1 and log.end_offset == 4


def test_retention_never_at_or_above_high_watermark(tmp_path, backend):
    log = Log.open(tmp_path / "t-0", LogConfig(retention_ms=1), backend=backend.name,
                   auto_high_watermark=False)
    with log:
        fill(log, [[1, 1], [1, 1], [1, 1]])
        log.update_high_watermark(3)  # inside the second segment
        assert log.apply_retention(now_ms=10**6) == [0]
        log.update_high_watermark(4)  # exactly the third segment's base: second may go
        assert log.apply_retention(now_ms=10**6) == [2]
        assert log.apply_retention(now_ms=10**6) == []
        assert log.start_offset == 4


def test_start_offset_breach_and_compact_policy(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, cleanup_policy="compact", retention_ms=1) as log:
        for _segment in range(3):  # compacted topics take keyed records only
            log.append_batch([b"v", b"w"], keys=[b"k", b"l"], timestamps_ms=1)
            log.roll()
        assert log.apply_retention(now_ms=10**6) == []  # compact only: no time retention
        log.delete_records_before(5)  # removes the segments wholly below 5 at once
        assert [s.base_offset for s in log.segments] == [4, 6]
        assert log.start_offset == 5
        assert [r.offset for r in log.records()] == [5]


def test_deleted_files_wait_for_file_delete_delay(tmp_path, backend):
    d = tmp_path / "t-0"
    with open_log(d, backend, retention_ms=10, file_delete_delay_ms=5000) as log:
        fill(log, [[1], [2]])
        log.append(b"x", timestamp_ms=10**6)
        assert log.apply_retention(now_ms=1000) == [0, 1]
        pending = deleted_files(d)
        assert "00000000000000000000.log.deleted" in pending
        assert "00000000000000000001.log.deleted" in pending
        assert not os.path.exists(d / "00000000000000000000.log")
        assert log.delete_expired_files(now_ms=5999) == 0
        assert log.delete_expired_files(now_ms=6000) == 2
        assert deleted_files(d) == []


def test_leftover_deleted_files_removed_on_open(tmp_path, backend):
    d = tmp_path / "t-0"
    with open_log(d, backend, retention_ms=10, file_delete_delay_ms=60_000) as log:
        fill(log, [[1]])
        log.append(b"x", timestamp_ms=10**6)
        log.apply_retention(now_ms=1000)
        assert deleted_files(d)
    with open_log(d, backend) as log:
        assert deleted_files(d) == []
        assert "00000000000000000000.log.deleted" in log.recovery_report.removed_files
        assert log.start_offset == 1 and [r.offset for r in log.records()] == [1]


def test_start_offset_survives_reopen(tmp_path, backend):
    d = tmp_path / "t-0"
    with open_log(d, backend) as log:
        log.append_batch([b"a"] * 10, timestamps_ms=1)
        log.delete_records_before(4)
    with open_log(d, backend) as log:
        assert log.start_offset == 4
        assert [r.offset for r in log.records()] == list(range(4, 10))


def test_largest_timestamp_falls_back_to_mtime(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend) as log:
        log.append_raw(backend.encode_batch([b"a"], timestamps_ms=-1))
        segment = log.segments[0]
        assert segment.max_timestamp_ms == -1
        assert abs(largest_timestamp_ms(segment) - segment.last_modified_ms) == 0
