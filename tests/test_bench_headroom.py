"""``bench/headroom.py`` (issue 27, broker headroom): its replay generator is a valid producer
(a real ``seglog serve`` acknowledges its pre-encoded Produce requests and the log holds exactly
the records acknowledged, read back by a real confluent-kafka consumer's watermarks), and its
summary turns rounds into min/median/max. A few records for a fraction of a second; the
measurement itself runs from the command line (bench/results-issue27-headroom.md)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc (Linux)")

_PATH = Path(__file__).resolve().parents[1] / "bench" / "headroom.py"


def _headroom():
    spec = importlib.util.spec_from_file_location("bench_headroom", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_headroom"] = module
    spec.loader.exec_module(module)
    return module


def test_replay_generator_writes_exactly_what_the_broker_acknowledges(tmp_path):
    pytest.importorskip("confluent_kafka")
    from seglog.bench.broker import SeglogServe

    headroom = _headroom()
    server = SeglogServe(tmp_path / "data")
    server.start()
    try:
        leaders = headroom.create_topic(server.bootstrap, "hr", 2)
        assert sorted(leaders.split(",")) == [f"0={server.bootstrap}", f"1={server.bootstrap}"]
        row = headroom.run_step(None, bootstrap=server.bootstrap, leaders=leaders, topic="hr",
                                gens=1, record_bytes=100, acks="all", seconds=0.3,
                                max_records=20_000, gen_cpus=None,
                                broker_pids={"seglog": server.pid})
        assert row["failed"] == 0 and row["errors"] == []
        assert 0 < row["records"] <= 20_000
        assert headroom.end_offsets_sum(server.bootstrap, "hr", 2) == row["records"]
        # schedstat counts nanoseconds: the loop ran in the window (/proc/<pid>/stat counts
        # clock ticks of 10 ms, too coarse for these few records).
        assert row["main_thread_demand"]["seglog"] > 0
    finally:
        server.stop()


def test_summary_gives_min_median_max_per_target_and_step():
    headroom = _headroom()
    base = {"record_bytes": 100, "acks": "1", "gens": 2, "records_s": 1.0, "gen_cores": 0.1,
            "main_thread_demand": {"seglog": 0.9}, "broker_cpu_s_per_gb": 1.5,
            "load_1m": 3.0, "target": "seglog"}
    rows = [dict(base, mb_s=mb, broker_cores={"seglog": c})
            for mb, c in ((300.0, 0.5), (100.0, 0.2), (200.0, 0.4))]
    (summary,) = headroom.summarize(rows)
    assert summary["rounds"] == 3
    assert summary["mb_s"] == [100.0, 200.0, 300.0]
    assert summary["broker_cores"] == [0.2, 0.4, 0.5]
    assert "| seglog | 100 B | 1 | 2 | 3 | 200 (100..300)" in headroom.report_markdown(
        {"summary": [summary]})
