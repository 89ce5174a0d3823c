"""Compaction benchmark: one cleaning pass over a large log with 10% live keys.

Back of the envelope (this 2-vCPU machine): a pass reads the dirty section twice from the page
cache (the key map, then the copy; ~5-10 GB/s each, so ~0.2-0.4 s per GiB) and hashes every
key (XXH64 ~10 GB/s, a probe ~50-100 ns at this table size: ~0.3-0.5 s for 5 M keys). With
keys drawn at random, almost every 500-record batch keeps ~10% of its records, so almost every
batch is re-encoded: decoding 500 records to objects and encoding 50 again costs the codec
~50-100 us per batch, ~0.2-0.4 s per GiB in the native backend. Expect ~300-800 MB/s native,
and the pure twin 50-100x slower (its record decoding is Python). Memory: the key map is
``slots * 16`` bytes, at most ``cleaner_memory_bytes_max`` (sized down when the dirty section
has fewer offsets), plus one ~1 MiB write chunk and one batch's records: the peak traced
allocation must stay under ``cleaner_memory_bytes_max + 16 MiB``.

    PYTHONPATH=src python -m pytest bench/test_compaction.py --benchmark-only -s
    SEGLOG_BENCH_COMPACTION_MB=64 ...   # quick run (default 1024 for native)
    SEGLOG_BENCH_COMPACTION_PURE_MB=16  # the pure twin's log (default 16)
"""

from __future__ import annotations

import os
import shutil
import time
import tracemalloc

import numpy as np
import pytest

from conftest import need
from seglog import LogConfig
from seglog.storage.log import Log

MIB = 1 << 20
NATIVE_LOG_BYTES = int(os.environ.get("SEGLOG_BENCH_COMPACTION_MB", "1024")) * MIB
PURE_LOG_BYTES = int(os.environ.get("SEGLOG_BENCH_COMPACTION_PURE_MB", "16")) * MIB
RECORDS_PER_BATCH = 500
KEY_BYTES = 16
VALUE_BYTES = 200
LIVE_FRACTION = 0.10
MAP_BYTES_MAX = 128 * MIB
MEMORY_SLACK_BYTES = 16 * MIB
NOW_MS = 1_700_000_000_000


def _config() -> LogConfig:
    return LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                     segment_bytes=256 * MIB, cleaner_memory_bytes_max=MAP_BYTES_MAX,
                     file_delete_delay_ms=0)


def _build(path: str, backend_name: str, log_bytes: int) -> dict:
    """Append ~``log_bytes`` of 500-record batches whose keys are drawn from a key space of 10%
    of the record count; returns {key index: last offset} (the model)."""
    record_bytes = KEY_BYTES + VALUE_BYTES + 10  # + record framing
    records = log_bytes // record_bytes
    batches = max(1, records // RECORDS_PER_BATCH)
    records = batches * RECORDS_PER_BATCH
    key_count = max(1, int(records * LIVE_FRACTION))
    rng = np.random.default_rng(42)
    values = rng.integers(32, 127, size=(RECORDS_PER_BATCH, VALUE_BYTES), dtype=np.uint8)
    last = np.full(key_count, -1, dtype=np.int64)
    with Log.open(path, _config(), backend=backend_name, now_ms=NOW_MS) as log:
        for b in range(batches):
            ids = rng.integers(0, key_count, size=RECORDS_PER_BATCH)
            keys = np.frombuffer(
                "".join(f"{i:0{KEY_BYTES}d}" for i in ids).encode(), dtype=np.uint8
            ).reshape(RECORDS_PER_BATCH, KEY_BYTES)
            first, _ = log.append_batch(values, keys=keys, timestamps_ms=NOW_MS + b,
                                        now_ms=NOW_MS + b)
            last[ids] = first + np.arange(RECORDS_PER_BATCH)
        log.roll(now_ms=NOW_MS)
        log.append(b"tail", key=b"tail", timestamp_ms=NOW_MS)
    return {"records": records, "keys": int((last >= 0).sum()), "log_bytes": _dir_bytes(path)}


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
               if n.endswith(".log"))


@pytest.fixture(scope="module")
def built_logs(tmp_path_factory):
    """One source log per backend, built once; each measurement compacts a copy."""
    cache = {}

    def get(backend_name: str):
        if backend_name not in cache:
            path = str(tmp_path_factory.mktemp(f"compaction-{backend_name}") / "topic-0")
            size = NATIVE_LOG_BYTES if backend_name == "native" else PURE_LOG_BYTES
            info = _build(path, backend_name, size)
            cache[backend_name] = (path, info)
        return cache[backend_name]

    return get


def _compact_copy(source: str, target: str, backend_name: str, *, trace: bool):
    if os.path.exists(target):
        shutil.rmtree(target)
    shutil.copytree(source, target)
    with Log.open(target, _config(), backend=backend_name, now_ms=NOW_MS) as log:
        if trace:
            tracemalloc.start()
            tracemalloc.reset_peak()
        started = time.perf_counter()
        stats = log.compact(now_ms=NOW_MS + 1)
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] if trace else -1
        if trace:
            tracemalloc.stop()
        live = sum(1 for _ in log.records(0))
    return stats, seconds, peak, live


def test_compaction(benchmark, tmp_path, backend_name, built_logs):
    need(backend_name, "KeyMap", "Segment", "encode_batch")
    source, info = built_logs(backend_name)
    target = str(tmp_path / "topic-0")
    benchmark.group = "compaction, 10% live keys"
    result = {}

    def run():
        result["stats"], result["seconds"], _, result["live"] = _compact_copy(
            source, target, backend_name, trace=False)

    benchmark.pedantic(run, rounds=1, iterations=1)
    stats, seconds, live = result["stats"], result["seconds"], result["live"]
    assert not stats.skipped
    assert live == info["keys"] + 1  # one record per key, plus the active segment's tail
    # Memory, in a separate run: tracemalloc slows every Python allocation down.
    _, traced_seconds, peak, _ = _compact_copy(source, target, backend_name, trace=True)
    mb_per_s = info["log_bytes"] / 1e6 / seconds
    benchmark.extra_info.update(
        log_bytes=info["log_bytes"], records=info["records"], keys=info["keys"],
        seconds=seconds, mb_per_s=mb_per_s, records_per_s=info["records"] / seconds,
        peak_traced_bytes=peak, map_bytes=stats.map_slots * 16,
        bytes_written=stats.bytes_written, batches_rebuilt=stats.batches_rebuilt,
        batches_copied=stats.batches_copied, map_utilization=stats.map_utilization)
    print(f"\n{backend_name}: compacted {info['log_bytes'] / MIB:.0f} MiB "
          f"({info['records']:,} records, {info['keys']:,} keys) in {seconds:.2f} s = "
          f"{mb_per_s:.0f} MB/s, {info['records'] / seconds / 1e6:.2f} M records/s; "
          f"written {stats.bytes_written / MIB:.1f} MiB; key map {stats.map_slots * 16 / MIB:.1f}"
          f" MiB ({stats.map_utilization:.0%} full); peak traced memory {peak / MIB:.1f} MiB "
          f"(budget {MAP_BYTES_MAX / MIB:.0f} MiB + {MEMORY_SLACK_BYTES / MIB:.0f} MiB; "
          f"traced run {traced_seconds:.2f} s)")
    assert peak <= MAP_BYTES_MAX + MEMORY_SLACK_BYTES
    assert peak <= stats.map_slots * 16 + MEMORY_SLACK_BYTES
