"""Opening a log after a clean or an unclean shutdown (Kafka's ``LogLoader``): recovery from the
recovery point, the cut at the first invalid byte, later segments deleted after a corrupt one,
index rebuilds, leftover ``.deleted``/``.cleaned``/``.swap`` files, the directory lock and
read-only followers. Every core test runs on both backends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from seglog import Log, LogConfig
from seglog import format as fmt
from seglog.errors import LogLockedError, ReadOnlyError

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


def open_log(path, backend, **config):
    return Log.open(path, LogConfig(**config), backend=backend.name)


def crash(log):
    """Abandon a writer as a killed process would: nothing flushed, trimmed or marked clean;
    the OS drops its directory lock."""
    log._dir_lock.close()
    log._closed = True


def log_file(d, base):
    return os.path.join(d, f"{base:020d}.log")


def values(log, start=0):
    return [(r.offset, r.value) for r in log.records(start)]


def filled(tmp_path, backend, n_segments=4, per_segment=3, **config):
    """A writer with ``n_segments`` full segments (+ an empty active one), then crashed."""
    d = str(tmp_path / "t-0")
    log = open_log(d, backend, **config)
    for s in range(n_segments):
        for i in range(per_segment):
            log.append(b"v%d" % (s * per_segment + i), timestamp_ms=1000 + s * per_segment + i)
        log.roll()
    return d, log


def run_python(code, timeout=60):
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)


# --- clean and unclean reopen ------------------------------------------------------------------


def test_clean_reopen_skips_recovery(tmp_path, backend):
    d, log = filled(tmp_path, backend)
    expected = values(log)
    log.close()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    with open_log(d, backend) as log:
        report = log.recovery_report
        assert report.clean_shutdown and report.recovered_segments == []
        assert not report.lost_data and report.rebuilt_indexes == []
        assert values(log) == expected
        assert log.recovery_point == log.end_offset == 12
        # the marker is gone while a writer has the log open
        assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
        assert log.append(b"more", timestamp_ms=1) == 12


def test_unclean_reopen_recovers_from_recovery_point(tmp_path, backend):
    d, log = filled(tmp_path, backend)
    log.flush()  # recovery point 12, persisted
    log.append(b"tail", timestamp_ms=1)
    expected = values(log)
    crash(log)
    with open_log(d, backend) as log:
        report = log.recovery_report
        assert not report.clean_shutdown
        assert report.recovered_segments == [12]  # only the segment holding the recovery point
        assert not report.lost_data
        assert values(log) == expected
        assert log.recovery_point == 12  # not advanced until the next flush


def test_unclean_reopen_without_checkpoint_recovers_everything(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=3)
    crash(log)
    with open_log(d, backend) as log:
        assert log.recovery_report.recovered_segments == [0, 3, 6, 9]
        assert [v for _, v in values(log)] == [b"v%d" % i for i in range(9)]


def test_unclean_shutdown_of_a_real_process(tmp_path, backend):
    d = str(tmp_path / "t-0")
    proc = run_python(f"""
        import os
        from seglog import Log, LogConfig
        log = Log.open({d!r}, LogConfig(segment_bytes=300), backend={backend.name!r})
        for i in range(30):
            log.append(b"v%d" % i, timestamp_ms=i)
        os._exit(3)  # killed: no close, no flush, no marker
    """)
    assert proc.returncode == 3, proc.stderr
    with open_log(d, backend, segment_bytes=300) as log:
        assert not log.recovery_report.clean_shutdown
        assert not log.recovery_report.lost_data
        assert [v for _, v in values(log)] == [b"v%d" % i for i in range(30)]


# --- cutting bad bytes ----------------------------------------------------------------------------


def test_garbage_appended_is_cut(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=2)
    log.append(b"last", timestamp_ms=1)
    expected = values(log)
    active = log.segments[-1].base_offset
    crash(log)
    size = os.path.getsize(log_file(d, active))
    with open(log_file(d, active), "ab") as f:
        f.write(os.urandom(100) + b"\x00" * 50)
    with open_log(d, backend) as log:
        (cut,) = log.recovery_report.truncations
        assert (cut.base_offset, cut.position, cut.truncated_bytes) == (active, size, 150)
        assert cut.reason in fmt.CORRUPTION_REASONS
        assert values(log) == expected
        assert log.append(b"after", timestamp_ms=1) == 7
    with open_log(d, backend) as log:
        assert values(log)[-1] == (7, b"after")


def test_torn_tail_is_cut(tmp_path, backend):
    d = str(tmp_path / "t-0")
    log = open_log(d, backend)
    log.append_batch([b"a"] * 3, timestamps_ms=1)
    log.append_batch([b"b" * 100] * 3, timestamps_ms=1)
    crash(log)
    path = log_file(d, 0)
    full = os.path.getsize(path)
    os.truncate(path, full - 100)
    with open_log(d, backend) as log:
        (cut,) = log.recovery_report.truncations
        assert cut.reason == fmt.REASON_TRUNCATED
        assert log.end_offset == 3 and values(log) == [(0, b"a"), (1, b"a"), (2, b"a")]
        assert log.append(b"c", timestamp_ms=1) == 3


def test_zero_filled_tail_is_cut(tmp_path, backend):
    d = str(tmp_path / "t-0")
    log = open_log(d, backend)
    log.append_batch([b"a"] * 3, timestamps_ms=1)
    crash(log)
    with open(log_file(d, 0), "ab") as f:
        f.write(b"\x00" * 4096)
    with open_log(d, backend) as log:
        (cut,) = log.recovery_report.truncations
        assert cut.reason == fmt.REASON_BATCH_TOO_SMALL and cut.truncated_bytes == 4096
        assert log.end_offset == 3


def test_corrupt_middle_segment_deletes_later_segments(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=4)
    crash(log)  # no checkpoint was written: recovery starts at the first segment
    path = log_file(d, 6)
    batch_bytes = os.path.getsize(path) // 3
    with open(path, "r+b") as f:  # flip a byte in the second batch's records
        f.seek(batch_bytes + fmt.RECORD_BATCH_OVERHEAD + 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with open_log(d, backend) as log:
        report = log.recovery_report
        (cut,) = report.truncations
        assert (cut.base_offset, cut.position, cut.reason) == (6, batch_bytes,
                                                              fmt.REASON_CRC_MISMATCH)
        assert report.deleted_segments == [9, 12]
        assert report.recovered_segments == [0, 3, 6]
        assert [s.base_offset for s in log.segments] == [0, 3, 6]
        assert log.end_offset == 7
        assert [o for o, _ in values(log)] == list(range(7))
        assert not os.path.exists(log_file(d, 9))
        assert log.append(b"x", timestamp_ms=1) == 7


def test_corruption_below_recovery_point_is_not_revalidated(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=2)
    log.flush()
    crash(log)
    with open(log_file(d, 0), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"\xff")
    with open_log(d, backend) as log:  # Kafka trusts everything below the recovery point
        assert log.recovery_report.recovered_segments == [6]
        assert not log.recovery_report.lost_data


# --- indexes ------------------------------------------------------------------------------------


def test_missing_indexes_are_rebuilt(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=3, per_segment=20, index_interval_bytes=100)
    expected = values(log)
    log.close()
    for name in os.listdir(d):
        if name.endswith((".index", ".timeindex")) and not name.startswith("000000000000000000"
                                                                          "20"):
            os.remove(os.path.join(d, name))
    with open_log(d, backend, index_interval_bytes=100) as log:
        assert log.recovery_report.clean_shutdown
        assert sorted(log.recovery_report.rebuilt_indexes) == [0, 40, 60]
        assert os.path.exists(os.path.join(d, f"{0:020d}.index"))
        assert log.segments[0].offset_index.entries > 0
        assert values(log) == expected
        assert log.offset_for_timestamp(1000 + 25) == 25
        assert next(log.records(33)).offset == 33


def test_corrupt_index_is_rebuilt(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=2, per_segment=20, index_interval_bytes=100)
    log.close()
    path = os.path.join(d, f"{0:020d}.index")
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")  # not a whole number of entries
    with open_log(d, backend, index_interval_bytes=100) as log:
        # After a clean shutdown a non-last segment is checked (and its indexes rebuilt) on
        # its first use, not by the open (design.md §7).
        assert log.recovery_report.rebuilt_indexes == []
        assert next(log.records(13)).offset == 13
        assert 0 in log.recovery_report.rebuilt_indexes


def test_orphan_index_files_are_deleted(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=1)
    log.close()
    for suffix in (".index", ".timeindex", ".txnindex"):
        open(os.path.join(d, f"{999:020d}{suffix}"), "wb").close()
    with open_log(d, backend) as log:
        assert sorted(log.recovery_report.removed_files) == [
            f"{999:020d}.index", f"{999:020d}.timeindex", f"{999:020d}.txnindex"]
        assert not any(n.startswith(f"{999:020d}") for n in os.listdir(d))


# --- leftover temporary files -------------------------------------------------------------------


def _segment_with(backend, d, base, batches, suffix):
    seg = backend.Segment.open(d, base, create=True, file_suffix=suffix)
    for offset, vals in batches:
        seg.append(backend.encode_batch(vals, timestamps_ms=1, base_offset=offset),
                   assign_offsets=False)
    seg.flush()
    seg.close()


def test_cleaned_files_are_discarded(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=2)
    expected = values(log)
    log.close()
    _segment_with(backend, d, 0, [(2, [b"compacted"])], ".cleaned")
    with open_log(d, backend) as log:
        assert f"{0:020d}.log.cleaned" in log.recovery_report.removed_files
        assert values(log) == expected
        assert not any(n.endswith(".cleaned") for n in os.listdir(d))


def test_swap_is_completed(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=3)  # [0..2] [3..5] [6..8] + active 9
    log.close()
    # a cleaner replaced segments 0 and 3 by one segment keeping offsets 1 and 4, then crashed
    # after renaming .cleaned to .swap, before deleting the old segments
    _segment_with(backend, d, 0, [(1, [b"one"]), (4, [b"four"])], ".swap")
    with open_log(d, backend) as log:
        report = log.recovery_report
        assert f"{0:020d}.log.swap" in report.completed_swaps
        assert f"{3:020d}.log" in report.removed_files
        assert [s.base_offset for s in log.segments] == [0, 6, 9]
        assert values(log) == [(1, b"one"), (4, b"four"), (6, b"v6"), (7, b"v7"), (8, b"v8")]
        assert 0 in report.rebuilt_indexes
    assert not any(n.endswith(".swap") for n in os.listdir(d))


def test_swap_at_or_above_cleaned_offset_is_discarded(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=3)
    expected = values(log)
    log.close()
    _segment_with(backend, d, 3, [(3, [b"x"])], ".cleaned")
    _segment_with(backend, d, 6, [(6, [b"y"])], ".swap")  # part of an unfinished split
    with open_log(d, backend) as log:
        assert values(log) == expected
        assert log.recovery_report.completed_swaps == []
    assert not any(n.endswith((".swap", ".cleaned")) for n in os.listdir(d))


def test_log_start_beyond_end_empties_the_log(tmp_path, backend):
    d, log = filled(tmp_path, backend, n_segments=2)
    log.close()
    with open(os.path.join(d, "log-start-offset-checkpoint"), "w") as f:
        f.write("0\n1\nt 0 50\n")
    with open_log(d, backend) as log:
        assert log.recovery_report.deleted_segments == [0, 3, 6]
        assert (log.start_offset, log.end_offset) == (50, 50)
        assert log.append(b"x", timestamp_ms=1) == 50


# --- one writer, read-only followers ------------------------------------------------------------


def test_second_writer_is_refused(tmp_path, backend):
    d = str(tmp_path / "t-0")
    log = open_log(d, backend)
    with pytest.raises(LogLockedError):
        open_log(d, backend)
    proc = run_python(f"""
        from seglog import Log
        from seglog.errors import LogLockedError
        try:
            Log.open({d!r}, backend={backend.name!r})
        except LogLockedError:
            raise SystemExit(7)
    """)
    assert proc.returncode == 7, proc.stderr
    log.close()
    open_log(d, backend).close()  # free again


def test_read_only_follower(tmp_path, backend):
    d = str(tmp_path / "t-0")
    with open_log(d, backend, segment_bytes=300, retention_ms=10) as writer:
        writer.append(b"first", timestamp_ms=1)
        reader = Log.open(d, backend=backend.name, read_only=True)
        with reader:
            assert values(reader) == [(0, b"first")]
            with pytest.raises(ReadOnlyError):
                reader.append(b"no")
            for i in range(1, 30):
                writer.append(b"v%d" % i, timestamp_ms=1)
            assert reader.end_offset == 1
            assert reader.refresh()
            assert reader.end_offset == 30 and len(reader.segments) == len(writer.segments)
            assert [o for o, _ in values(reader)] == list(range(30))
            writer.append(b"late", timestamp_ms=10**7)
            deleted = writer.apply_retention(now_ms=10**7)
            assert deleted
            reader.refresh()
            assert reader.start_offset == writer.start_offset > 0
            assert values(reader) == values(writer)
            assert values(reader)[-1] == (30, b"late")
        assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))  # writer still open


def test_read_only_never_sees_a_torn_batch(tmp_path, backend):
    d = str(tmp_path / "t-0")
    with open_log(d, backend) as writer:
        writer.append(b"a", timestamp_ms=1)
    batch = backend.encode_batch([b"b" * 200], timestamps_ms=1, base_offset=1)
    with Log.open(d, backend=backend.name, read_only=True) as reader:
        with open(log_file(d, 0), "ab") as f:
            f.write(batch[:150])  # a writer half way through its write
            f.flush()
            reader.refresh()
            assert reader.end_offset == 1 and values(reader) == [(0, b"a")]
            f.write(batch[150:])
        reader.refresh()
        assert values(reader) == [(0, b"a"), (1, b"b" * 200)]


def test_follower_in_another_process_sees_whole_batches(tmp_path, backend):
    """The writer appends and rolls in this process; a read-only follower in another process
    refreshes as fast as it can and checks every batch (CRC, contiguous offsets, values).

    The follower runs in a child process so that a crash there (a SIGBUS from reading a
    mapping of a file the writer shrank) fails this test instead of killing the test run.
    """
    d = str(tmp_path / "t-0")
    n_batches = 300
    log = open_log(d, backend, segment_bytes=2000)
    follower = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from seglog import Log
            seen = 0
            with Log.open({d!r}, backend={backend.name!r}, read_only=True) as reader:
                deadline = time.monotonic() + 60
                while seen < {2 * n_batches} and time.monotonic() < deadline:
                    reader.refresh()
                    while seen < reader.end_offset:
                        result = reader.read(seen)
                        for batch in reader.backend.iter_batches(result.buffer):
                            assert batch.is_valid()
                            for record in batch.records():
                                if record.offset >= seen:
                                    assert record.offset == seen, (record.offset, seen)
                                    assert record.value == b"%d" % seen
                                    seen += 1
            print(seen)
        """)], env=dict(os.environ, PYTHONPATH=SRC), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    with log:
        for i in range(n_batches):
            log.append_batch([b"%d" % (i * 2), b"%d" % (i * 2 + 1)], timestamps_ms=i)
            if i % 50 == 0:
                time.sleep(0.01)
        out, err = follower.communicate(timeout=90)
    assert follower.returncode == 0, (follower.returncode, err[-2000:])
    assert int(out) == 2 * n_batches
