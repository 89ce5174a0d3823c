"""The bounded cache of open segment files (issue 14; design.md §7): segments open lazily, a
Store-wide cache closes the least recently used ones, and an evicted segment opens again on
its next use with the same bytes. Every test runs on both backends.

Eviction is forced two ways: a cache of one or two segments (every other segment's use closes
one), and ``FileCache.shrink()`` (close all that nothing holds, as a Store does after opening).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading

import pytest

import seglog
from seglog import Log, LogConfig
from seglog.storage.file_cache import MIN_OPEN_SEGMENTS, FileCache, default_max_open_segments

SRC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(seglog.__file__)))
CHILD_TIMEOUT_S = 120
TIMESTAMP_MS = 1_700_000_000_000
SMALL_SEGMENTS = LogConfig(segment_bytes=400, index_interval_bytes=1)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fill(log, batches, *, start=0):
    """``batches`` two-record batches with fixed timestamps; returns what was written."""
    values = []
    for i in range(start, start + batches):
        batch = [b"k%d-a" % i, b"k%d-b" % i]
        log.append_batch(batch, keys=[b"k%d" % (i % 3)] * 2,
                         timestamps_ms=[TIMESTAMP_MS + i] * 2)
        values.extend(batch)
    return values


def values_of(log, start=0):
    return [r.value for r in log.records(start)]


def open_log(path, backend, cache, config=SMALL_SEGMENTS):
    return Log.open(str(path), config, backend=backend.name, file_cache=cache)


# --- the bound -------------------------------------------------------------------------------


def test_a_log_of_many_segments_keeps_at_most_the_bound_open(tmp_path, backend):
    cache = FileCache(2)
    with open_log(tmp_path / "t-0", backend, cache) as log:
        written = fill(log, 40)
        assert len(log.segments) > 5
        assert cache.open_segments <= 2
        assert values_of(log) == written
        assert cache.open_segments <= 2
        assert cache.evictions > 0
    assert cache.open_segments == 0


def test_more_partitions_than_the_cache_allows(tmp_path, backend):
    partitions = 30
    with seglog.Store(tmp_path, backend=backend.name, offsets_topic_partitions=1,
                      max_open_segments=4) as store:
        assert store.file_cache.max_open_segments == 4
        topic = store.create_topic("t", partitions=partitions, config={"segment.bytes": "400"})
        before = open_fds()
        written = {p: fill(topic.log(p), 6) for p in range(partitions)}
        for p in range(partitions):
            assert values_of(topic.log(p)) == written[p]
        assert store.file_cache.open_segments <= 4
        held = 4 * backend.Segment.open_descriptors_max
        assert open_fds() <= before + held
    with seglog.Store(tmp_path, backend=backend.name, offsets_topic_partitions=1,
                      max_open_segments=4) as store:
        assert store.file_cache.open_segments == 0  # idle partitions hold no descriptor
        for p in range(partitions):
            assert values_of(store.topic("t").log(p)) == written[p]
        assert store.file_cache.open_segments <= 4


CHILD = textwrap.dedent("""
    import os, resource, sys
    sys.path.insert(0, {src!r})
    import seglog
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, hard))
    partitions = {partitions}
    with seglog.Store({path!r}, backend={backend!r}, offsets_topic_partitions=1) as store:
        topic = store.create_topic("t", partitions=partitions, config={{"segment.bytes": "100"}})
        for p in range(partitions):
            for i in range(3):
                topic.log(p).append(b"p%d-%d" % (p, i))
        for p in range(partitions):
            assert [r.value for r in topic.log(p).records()] == [
                b"p%d-%d" % (p, i) for i in range(3)], p
        print("bound", store.file_cache.max_open_segments, "segments",
              sum(len(topic.log(p).segments) for p in range(partitions)))
    with seglog.Store({path!r}, backend={backend!r}, offsets_topic_partitions=1) as store:
        for p in range(partitions):
            assert [r.value for r in store.topic("t").log(p).records()] == [
                b"p%d-%d" % (p, i) for i in range(3)], p
    print("ok")
""")


def test_more_segments_than_the_open_files_limit_allows(tmp_path, backend):
    """A process whose RLIMIT_NOFILE is 32 writes, reads and reopens a Store of 40
    partitions of 3 segments each, with the default bound (half the limit)."""
    code = CHILD.format(src=SRC_DIR, limit=32, partitions=40, path=str(tmp_path / "store"),
                        backend=backend.name)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=CHILD_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    bound, segments = done.stdout.split()[1], int(done.stdout.split()[3])
    assert int(bound) == max(MIN_OPEN_SEGMENTS, 32 // 2 // backend.Segment.open_descriptors_max)
    assert segments >= 120 > 32
    assert done.stdout.split()[-1] == "ok"


def test_default_bound_is_half_the_soft_limit_over_descriptors_per_segment():
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert default_max_open_segments(1) == max(MIN_OPEN_SEGMENTS, soft // 2)
    assert default_max_open_segments(4) == max(MIN_OPEN_SEGMENTS, soft // 8)
    with pytest.raises(ValueError):
        FileCache(0)
    with pytest.raises(TypeError):
        FileCache(2.5)


# --- views and reopening -----------------------------------------------------------------------


def test_a_segment_with_a_live_view_is_not_evicted(tmp_path, backend):
    cache = FileCache(1)
    with open_log(tmp_path / "t-0", backend, cache) as log:
        written = fill(log, 20)
        first = log.segments[0]
        result = log.read(0)
        view = result.buffer
        expected = bytes(view)
        assert first.is_open
        assert values_of(log, start=log.segments[-1].base_offset)  # opens the last segment
        assert cache.shrink() >= 0
        assert first.is_open == first.views_outstanding()
        if backend.name == "native" or first.views_outstanding():
            assert first.is_open  # the view pins it
        assert bytes(view) == expected  # still mapped
        del result
        view.release()
        cache.shrink()
        assert not first.is_open
        assert bytes(log.read(0).buffer) == expected  # opened again: the same bytes
        assert values_of(log) == written


def test_an_evicted_segment_reopens_with_the_same_bytes_and_offsets(tmp_path, backend):
    cache = FileCache(100)
    with open_log(tmp_path / "t-0", backend, cache) as log:
        written = fill(log, 30)
        reads = [bytes(log.read(s.base_offset).buffer) for s in log.segments]
        times = [log.offset_for_timestamp(TIMESTAMP_MS + i) for i in range(0, 30, 7)]
        assert cache.shrink() == len(log.segments) > 1
        assert not any(s.is_open for s in log.segments)
        assert log.end_offset == 60  # known without opening
        assert [bytes(log.read(s.base_offset).buffer) for s in log.segments] == reads
        assert [log.offset_for_timestamp(TIMESTAMP_MS + i) for i in range(0, 30, 7)] == times
        assert values_of(log) == written
        cache.shrink()
        written += fill(log, 3, start=30)  # the evicted active segment takes appends again
        assert values_of(log) == written


def test_a_clean_close_with_evicted_segments_leaves_the_files_of_a_log_without_eviction(
        tmp_path, backend):
    """The evicted active segment is closed properly by Log.close: trimmed indexes, the final
    time-index entry; every file equals the one of a log whose segments stayed open."""
    dirs = {}
    for name, bound in (("evicted", 1), ("open", 1000)):
        cache = FileCache(bound)
        d = tmp_path / name / "t-0"
        with open_log(d, backend, cache) as log:
            fill(log, 12)
            log.segments[0].release_files()
            fill(log, 12, start=12)
            cache.shrink()
        assert cache.open_segments == 0
        dirs[name] = d
    names = sorted(os.listdir(dirs["open"]))
    assert names == sorted(os.listdir(dirs["evicted"]))
    for name in names:
        assert (dirs["open"] / name).read_bytes() == (dirs["evicted"] / name).read_bytes(), name
    with open_log(dirs["evicted"], backend, FileCache(2)) as log:
        assert len(values_of(log)) == 48


def test_a_rolled_segment_only_read_since_closes_with_the_files_of_a_proper_close(
        tmp_path, backend):
    """A segment rolled (trimmed, final time entry, synced) and only read since is released
    at close instead of closed (no msync of two unchanged mappings): its files equal those of
    a log whose every segment is closed properly (here: the index objects handed out, which
    forces a proper close). A rolled segment cut by ``truncate_to`` becomes active again and
    is closed properly."""
    dirs = {}
    for name in ("released", "closed", "cut"):
        cache = FileCache(1000)
        d = tmp_path / name / "t-0"
        with open_log(d, backend, cache) as log:
            written = fill(log, 24)
            assert len(log.segments) > 3
            assert values_of(log) == written  # reads of every segment
            log.offset_for_timestamp(TIMESTAMP_MS + 3)
            if name == "closed":
                for segment in log.segments:
                    assert segment.offset_index is not None
            if name == "cut":
                log.truncate_to(log.segments[1].base_offset + 2)
                fill(log, 2, start=100)
        dirs[name] = d
    names = sorted(os.listdir(dirs["closed"]))
    assert names == sorted(os.listdir(dirs["released"]))
    for name in names:
        assert (dirs["closed"] / name).read_bytes() == (dirs["released"] / name).read_bytes(), name
    for name in os.listdir(dirs["cut"]):  # every index trimmed to its entries
        if name.endswith((".index", ".timeindex")):
            data = (dirs["cut"] / name).read_bytes()
            entry_bytes = 8 if name.endswith(".index") else 12
            assert len(data) % entry_bytes == 0, name
            assert not data.endswith(bytes(entry_bytes)) or len(data) == 0, name
    for name, d in dirs.items():
        with open_log(d, backend, FileCache(2)) as log:
            assert log.recovery_report.clean_shutdown
            assert not log.recovery_report.rebuilt_indexes, name
            assert len(values_of(log)) == log.end_offset == (48 if name != "cut" else
                                                             log.end_offset)


# --- what the log does to evicted segments -----------------------------------------------------


def test_retention_deletes_evicted_segments(tmp_path, backend):
    cache = FileCache(2)
    config = LogConfig(segment_bytes=400, retention_bytes=2000, file_delete_delay_ms=0)
    with open_log(tmp_path / "t-0", backend, cache, config) as log:
        written = fill(log, 30)
        cache.shrink()
        deleted = log.apply_retention()
        assert deleted and log.start_offset > 0
        log.delete_expired_files()
        assert not any(name.endswith(".deleted") for name in os.listdir(log.dir_path))
        assert values_of(log, log.start_offset) == written[log.start_offset:]
        assert cache.open_segments <= 2


def test_delete_records_before_and_truncate_evicted_segments(tmp_path, backend):
    cache = FileCache(2)
    with open_log(tmp_path / "t-0", backend, cache) as log:
        written = fill(log, 30)
        cache.shrink()
        log.delete_records_before(10)
        cache.shrink()
        log.truncate_to(40)
        assert log.end_offset == 40
        assert values_of(log, 10) == written[10:40]
        written = written[:40] + fill(log, 2, start=100)
        cache.shrink()
    with open_log(tmp_path / "t-0", backend, FileCache(2)) as log:
        assert values_of(log, 10) == written[10:]


def test_compaction_of_evicted_segments(tmp_path, backend):
    cache = FileCache(2)
    config = LogConfig(segment_bytes=400, cleanup_policy="compact")
    with open_log(tmp_path / "t-0", backend, cache, config) as log:
        fill(log, 30)
        cache.shrink()
        log.compact(force=True)
        latest = {}
        for record in log.records():
            latest[record.key] = record.value
        assert latest == {b"k0": b"k27-b", b"k1": b"k28-b", b"k2": b"k29-b"}
        assert cache.open_segments <= 2


def test_delete_topic_with_evicted_segments(tmp_path, backend):
    with seglog.Store(tmp_path, backend=backend.name, offsets_topic_partitions=1,
                      max_open_segments=2) as store:
        topic = store.create_topic("t", partitions=3, config={"segment.bytes": "400"})
        for p in range(3):
            fill(topic.log(p), 10)
        store.file_cache.shrink()
        store.delete_topic("t")
        assert not any(name.startswith("t-") for name in os.listdir(tmp_path))
        assert store.file_cache.open_segments == 0


def test_a_new_partition_holds_no_descriptor_and_no_segment_file(tmp_path, backend):
    with seglog.Store(tmp_path, backend=backend.name, offsets_topic_partitions=1) as store:
        before = open_fds()
        opened = store.file_cache.open_segments
        topic = store.create_topic("t", partitions=20)
        assert open_fds() == before
        assert store.file_cache.open_segments == opened
        # No file at all: partition.metadata waits for the first flush (design.md §6.1).
        assert sorted(os.listdir(tmp_path / "t-0")) == []
        assert topic.log(0).end_offset == 0
        topic.log(0).append(b"v")
        assert "00000000000000000000.log" in os.listdir(tmp_path / "t-0")
        assert [r.value for r in topic.log(0).records()] == [b"v"]


def test_logs_on_two_threads_evict_each_others_segments(tmp_path, backend):
    """Each thread's appends close the other Log's segments (a cache of two): no deadlock,
    nothing lost."""
    cache = FileCache(2)
    logs = [open_log(tmp_path / f"t-{i}", backend, cache) for i in range(2)]
    errors = []

    def work(log):
        try:
            for i in range(60):
                log.append(b"v%d" % i, timestamp_ms=TIMESTAMP_MS + i)
                assert next(log.records(i // 2)).value == b"v%d" % (i // 2)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(log,)) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    for log in logs:
        assert values_of(log) == [b"v%d" % i for i in range(60)]
        log.close()


# --- opening a partition after a clean shutdown: no segment opened (issue 14) ------------------


class RecordingCache(FileCache):
    """A real FileCache that also records the base offset of every segment opened through it
    (what the load opened, and when)."""

    def __init__(self, max_open_segments=1000):
        super().__init__(max_open_segments)
        self.opened_bases = []

    def opened(self, segment):
        self.opened_bases.append(segment.base_offset)
        super().opened(segment)


def three_segments(d, backend):
    """A cleanly closed log of 3 segments (bases 0, 4, 8) with 13 records; returns the bases."""
    with open_log(d, backend, FileCache(1000), LogConfig()) as log:
        for i in range(3):
            fill(log, 2, start=2 * i)
            if i < 2:
                log.roll()
        log.append_batch([b"tail"], timestamps_ms=[TIMESTAMP_MS + 99])
        return [s.base_offset for s in log.segments]


def segment_files(d):
    return {name: (d / name).read_bytes() for name in sorted(os.listdir(d))
            if name.endswith((".log", ".index", ".timeindex", ".txnindex", ".snapshot"))}


def test_a_clean_reopen_opens_no_segment_and_answers_as_an_eager_open(tmp_path, backend):
    """After a clean shutdown a writer's open opens no segment, not even the last: the end
    offset comes from the recovery point the close checkpointed (its producer snapshot
    agreeing). It answers end offset, high watermark, start offset, size, reads and appends
    as an open that loaded the last segment (the same directory with the newest producer
    snapshot removed, which makes the loader open it), and after the same appends and a
    close the two directories hold byte-identical segment files."""
    bases = three_segments(tmp_path / "made" / "t-0", backend)
    assert bases == [0, 4, 8]
    lazy_dir, eager_dir = tmp_path / "lazy" / "t-0", tmp_path / "eager" / "t-0"
    for d in (lazy_dir, eager_dir):
        shutil.copytree(tmp_path / "made" / "t-0", d)
    os.remove(eager_dir / f"{13:020d}.snapshot")  # the snapshot the close took at the end
    logs = {}
    caches = {"lazy": RecordingCache(), "eager": RecordingCache()}
    for name, d in (("lazy", lazy_dir), ("eager", eager_dir)):
        logs[name] = open_log(d, backend, caches[name], LogConfig())
    assert caches["lazy"].opened_bases == []
    assert caches["eager"].opened_bases == [8]
    lazy, eager = logs["lazy"], logs["eager"]
    try:
        assert lazy.recovery_report.clean_shutdown and eager.recovery_report.clean_shutdown
        for attribute in ("start_offset", "end_offset", "high_watermark", "last_stable_offset",
                          "recovery_point", "size_bytes"):
            assert getattr(lazy, attribute) == getattr(eager, attribute), attribute
        assert lazy.end_offset == 13
        assert caches["lazy"].opened_bases == []  # answered without opening a segment
        assert values_of(lazy, 4) == values_of(eager, 4)
        assert lazy.offset_for_timestamp(TIMESTAMP_MS + 99) == 12
        for log in (lazy, eager):
            fill(log, 3, start=50)
            log.append_batch([b"x"] * 3, timestamps_ms=[TIMESTAMP_MS + 200] * 3)
            log.roll()
            fill(log, 1, start=60)
        assert values_of(lazy) == values_of(eager)
        assert lazy.end_offset == eager.end_offset == 24
    finally:
        for log in logs.values():
            log.close()
    assert segment_files(lazy_dir) == segment_files(eager_dir)


def test_a_clean_reopen_defers_the_last_segment_only_when_its_end_is_known(tmp_path, backend):
    """The last segment is opened at load when the checkpoints do not promise its end: after
    an unclean shutdown (every segment from the recovery point is recovered, at open), and
    when the newest producer snapshot disagrees with the recovery point (another writer
    since)."""
    made = tmp_path / "made" / "t-0"
    three_segments(made, backend)
    unclean = tmp_path / "unclean" / "t-0"
    shutil.copytree(made, unclean)
    os.remove(unclean / ".kafka_cleanshutdown")
    cache = RecordingCache()
    with open_log(unclean, backend, cache, LogConfig()) as log:
        assert not log.recovery_report.clean_shutdown
        assert log.recovery_report.recovered_segments == [8]
        assert 8 in cache.opened_bases
        assert log.end_offset == 13
    moved = tmp_path / "moved" / "t-0"
    shutil.copytree(made, moved)
    os.rename(moved / f"{13:020d}.snapshot", moved / f"{16:020d}.snapshot")
    cache = RecordingCache()
    with open_log(moved, backend, cache, LogConfig()) as log:
        # The newest snapshot (16) is not the recovery point (13): the last segment is
        # opened at load, which finds the end itself.
        assert cache.opened_bases == [8]
        assert log.end_offset == 13


def test_an_unclean_reopen_recovers_the_last_segment_at_open(tmp_path, backend):
    """Unclean shutdown: full recovery at open, as before issue 14 (a torn tail is cut and
    reported by the open itself)."""
    made = tmp_path / "t-0"
    three_segments(made, backend)
    os.remove(made / ".kafka_cleanshutdown")
    with open(made / f"{8:020d}.log", "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x00")  # a torn batch header
    with open_log(made, backend, RecordingCache(), LogConfig()) as log:
        (cut,) = log.recovery_report.truncations
        assert cut.base_offset == 8 and cut.truncated_bytes == 11
        assert log.end_offset == 13
        assert values_of(log)[-1] == b"tail"


def test_a_store_reopens_its_partitions_without_opening_a_segment(tmp_path, backend):
    """A Store after a clean shutdown: every partition answers its end offsets, reads and
    appends as one reopened after an unclean shutdown (which opens and recovers the last
    segments), and after the same appends both data dirs hold the same segment files."""
    made = tmp_path / "made"
    with seglog.Store(made, backend=backend.name, offsets_topic_partitions=1) as store:
        topic = store.create_topic("t", partitions=4)
        for p in range(4):
            for i in range(3):
                fill(topic.log(p), 1, start=10 * p + i)
                topic.log(p).roll()
            fill(topic.log(p), p, start=10 * p + 5)
    clean, unclean = tmp_path / "clean", tmp_path / "unclean"
    shutil.copytree(made, clean)
    shutil.copytree(made, unclean)
    os.remove(unclean / ".kafka_cleanshutdown")
    stores = [seglog.Store(d, backend=backend.name, offsets_topic_partitions=1)
              for d in (clean, unclean)]
    try:
        topics = [s.topic("t") for s in stores]
        assert topics[0].end_offsets() == topics[1].end_offsets() == {0: 6, 1: 8, 2: 10,
                                                                      3: 12}
        for p in range(4):
            logs = [t.log(p) for t in topics]
            assert logs[0].high_watermark == logs[1].high_watermark
            assert values_of(logs[0]) == values_of(logs[1])
            for log in logs:
                fill(log, 2, start=100 + p)
    finally:
        for s in stores:
            s.close()
    for p in range(4):
        assert segment_files(clean / f"t-{p}") == segment_files(unclean / f"t-{p}"), p


def test_a_segments_log_path_follows_its_file_suffix(tmp_path, backend):
    # The path is kept per suffix (every read reports it): a rename must show at once, on
    # an open segment and on one the cache closed.
    cache = FileCache(2)
    with open_log(tmp_path / "t-0", backend, cache) as log:
        fill(log, 40)
        segment = list(log.segments)[0]
        first = segment.log_path
        assert os.path.exists(first)
        segment.rename_suffix(".deleted")
        assert segment.log_path == first + ".deleted"
        assert os.path.exists(segment.log_path) and not os.path.exists(first)
        cache.shrink()
        segment.rename_suffix("")
        assert segment.log_path == first and os.path.exists(first)
        assert len(values_of(log)) == 80
