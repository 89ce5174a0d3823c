"""Log benchmarks: the cost of the Log layer over the segment, and retention over many segments.

Back of the envelope (the peer survey, on this 2-vCPU machine): one 1,000 x 100 B batch is ~110 KB;
writing it to the page cache costs ~0.1-0.2 ms, encoding it costs what the codec costs (native
~20-50 us, pure a few ms). Per batch the Log adds a lock, a 61-byte header peek, the roll
check and a snapshot publish: a few microseconds, so ``Log.append_batch`` should stay within
10% of encoding the same batch and calling ``Segment.append`` directly (issue 3). A
``Log.flush`` adds the two checkpoint files to the segment's fsync (~4 more fsyncs).

Idempotent appends (issue 5): the producer-state check is per batch, not per record: a
61-byte header peek, a dict lookup, a sequence comparison and one BatchMetadata appended
to a 5-deep deque, a few microseconds against the ~50+ us of encoding 1,000 records, so
idempotent ``append_batch`` should stay within 15% of the plain one (the issue's target).

Retention over 1,000 segments: deciding is a walk over segment attributes (~1 us each, ~1 ms);
deleting renames 3 files per segment (~10-20 us each on ext4) plus one checkpoint write (two
fsyncs), so ~50-100 ms for 1,000 segments, and removing the ``.deleted`` files about as much.

    PYTHONPATH=src python -m pytest bench/test_log.py --benchmark-only
"""

from __future__ import annotations

import itertools
import os
import shutil

import pytest

from conftest import need
from seglog import Log, LogConfig
from seglog.storage.checkpoints import write_clean_shutdown_marker

BATCHES = 64  # 64 x 110 KB ~ 7 MB
SEGMENTS = 1_000


def _backend(backend_name):
    be = need(backend_name, "encode_batch", "Segment", "iter_batches", "decode_columns")
    if not hasattr(be, "name"):
        pytest.skip(f"{backend_name} backend is only partly built")
    return be


def test_log_append_batch(benchmark, tmp_path, backend_name, values):
    """``Log.append_batch`` x 64 (encode + roll check + append, page cache only)."""
    be = _backend(backend_name)
    benchmark.group = f"append {BATCHES} batches of 1,000 x 100 B (page cache)"
    counter = itertools.count()
    opened = []

    def setup():
        log = Log.open(tmp_path / f"l{next(counter)}-0", backend=backend_name)
        opened.append(log)
        return (log,), {}

    def append(log):
        for _ in range(BATCHES):
            log.append_batch(values, timestamps_ms=1)

    benchmark.pedantic(append, setup=setup, rounds=7)
    benchmark.extra_info["records_per_round"] = BATCHES * len(values)
    assert be.name == backend_name and opened[0].end_offset == BATCHES * len(values)
    for log in opened:
        log.close()


def test_segment_append_same_batches(benchmark, tmp_path, backend_name, values):
    """The baseline: ``encode_batch`` + ``Segment.append`` x 64 (page cache only)."""
    be = _backend(backend_name)
    benchmark.group = f"append {BATCHES} batches of 1,000 x 100 B (page cache)"
    counter = itertools.count()
    opened = []

    def setup():
        path = tmp_path / f"s{next(counter)}"
        path.mkdir()
        opened.append(be.Segment.open(str(path), 0, create=True))
        return (opened[-1],), {}

    def append(segment):
        for _ in range(BATCHES):
            segment.append(be.encode_batch(values, timestamps_ms=1,
                                           base_offset=segment.next_offset))

    benchmark.pedantic(append, setup=setup, rounds=7)
    for segment in opened:
        segment.close()


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_log_append_batch_idempotent(benchmark, tmp_path, backend_name, values, idempotent):
    """``Log.append_batch`` x 64, plain vs with producer id/epoch/sequence (issue 5)."""
    _backend(backend_name)
    benchmark.group = f"idempotent vs plain append_batch, {BATCHES} x 1,000 x 100 B " \
                      f"({backend_name})"
    counter = itertools.count()
    opened = []

    def setup():
        log = Log.open(tmp_path / f"i{next(counter)}-0", backend=backend_name)
        opened.append(log)
        return (log,), {}

    def append(log):
        n = len(values)
        if idempotent:
            for i in range(BATCHES):
                log.append_batch(values, timestamps_ms=1, producer_id=1, producer_epoch=0,
                                 base_sequence=i * n)
        else:
            for _ in range(BATCHES):
                log.append_batch(values, timestamps_ms=1)

    benchmark.pedantic(append, setup=setup, rounds=9)
    benchmark.extra_info["records_per_round"] = BATCHES * len(values)
    assert opened[0].end_offset == BATCHES * len(values)
    for log in opened:
        log.close()


def test_log_flush(benchmark, tmp_path, backend_name, values):
    """``Log.flush`` after 64 batches: segment fsync plus the two checkpoint files
    (write-temp, fsync, rename, fsync dir each): expect the segment's fsync + ~4 fsyncs."""
    be = _backend(backend_name)
    benchmark.group = f"fsync after {BATCHES} batches"
    counter = itertools.count()
    raw = be.encode_batch(values, timestamps_ms=1)

    def setup():
        log = Log.open(tmp_path / f"f{next(counter)}-0", backend=backend_name)
        for _ in range(BATCHES):
            log.append_raw(raw)
        return (log,), {}

    benchmark.pedantic(lambda log: log.flush(), setup=setup, rounds=5)


def test_segment_flush(benchmark, tmp_path, backend_name, values):
    """The baseline: ``Segment.flush`` after the same 64 batches."""
    be = _backend(backend_name)
    benchmark.group = f"fsync after {BATCHES} batches"
    counter = itertools.count()
    raw = be.encode_batch(values, timestamps_ms=1)

    def setup():
        path = tmp_path / f"g{next(counter)}"
        path.mkdir()
        segment = be.Segment.open(str(path), 0, create=True)
        for _ in range(BATCHES):
            segment.append(raw)
        return (segment,), {}

    benchmark.pedantic(lambda segment: segment.flush(), setup=setup, rounds=5)


def test_log_append_raw(benchmark, tmp_path, backend_name, values):
    """``Log.append_raw`` of client batches: LogValidator checks (records decoded once)."""
    be = _backend(backend_name)
    raw = be.encode_batch(values, timestamps_ms=1)
    benchmark.group = f"append_raw {BATCHES} client batches + fsync"
    counter = itertools.count()

    def setup():
        return (Log.open(tmp_path / f"r{next(counter)}-0", backend=backend_name),), {}

    def append(log):
        for _ in range(BATCHES):
            log.append_raw(raw)
        log.flush()
        log.close()

    benchmark.pedantic(append, setup=setup, rounds=5)


@pytest.fixture
def many_segments(tmp_path, backend_name):
    """A closed log of 1,000 one-batch segments (written through the backend, marked clean)."""
    be = _backend(backend_name)
    template = tmp_path / "template-0"
    template.mkdir()
    for i in range(SEGMENTS):
        segment = be.Segment.open(str(template), i * 10, create=True)
        segment.append(be.encode_batch([b"x" * 100] * 10, timestamps_ms=1000 + i,
                                       base_offset=i * 10))
        segment.close()
    write_clean_shutdown_marker(str(template))
    return be, template


def test_retention_check_1000_segments(benchmark, tmp_path, backend_name, many_segments):
    """``apply_retention`` when nothing is due: the walk and the three rules."""
    _be, template = many_segments
    config = LogConfig(retention_ms=10**12, segment_bytes=1 << 20)
    with Log.open(template, config, backend=backend_name) as log:
        assert len(log.segments) == SEGMENTS
        benchmark.group = f"retention over {SEGMENTS} segments"
        result = benchmark(log.apply_retention, now_ms=10_000)
        assert result == []


def test_retention_delete_1000_segments(benchmark, tmp_path, backend_name, many_segments):
    """``apply_retention`` deleting all 1,000 segments (roll, renames to ``.deleted``, start
    offset checkpoint) and then removing their files."""
    _be, template = many_segments
    config = LogConfig(retention_ms=1, segment_bytes=1 << 20, file_delete_delay_ms=0)
    counter = itertools.count()
    benchmark.group = f"retention over {SEGMENTS} segments"

    def setup():
        path = tmp_path / f"copy{next(counter)}-0"
        shutil.copytree(template, path)
        return (Log.open(path, config, backend=backend_name),), {}

    def delete_all(log):
        deleted = log.apply_retention(now_ms=10**7)
        assert len(deleted) == SEGMENTS and log.end_offset == SEGMENTS * 10
        log.close()

    benchmark.pedantic(delete_all, setup=setup, rounds=3)
    remaining = [n for n in os.listdir(tmp_path / "copy0-0") if n.endswith(".log")]
    assert remaining == [f"{SEGMENTS * 10:020d}.log"]
