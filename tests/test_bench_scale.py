"""The ``scale`` bench part (issue 14) on tiny sizes: its report's structure, its figures, and
that a budget, the RSS watch and a descriptor limit end a size with a reported step instead of
a hang or a crash. No Kafka here (the part's Kafka side is the ``kafka`` part's machinery)."""

from __future__ import annotations

import json
import os

import pytest

from seglog.bench import PART_ORDER, PART_TITLES, scale
from seglog.bench.progress import Progress
from seglog.bench.runner import PART_MODULES, BenchContext, Config
from seglog.cli import build_parser

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                                reason="the part reads /proc (Linux)")

TINY_PARTITIONS = 20
#: Far above what 20 partitions need: a bound against hangs, not a timing.
TINY_BUDGET_S = 120.0


def _context(tmp_path) -> BenchContext:
    config = Config(mode="quick", only=("scale",), progress=False, charts=False,
                    dir_path=str(tmp_path))
    workdir = tmp_path / "work"
    workdir.mkdir()
    return BenchContext(config, config.profile, workdir, Progress(enabled=False))


def test_scale_is_a_registered_part():
    assert "scale" in PART_ORDER and "scale" in PART_TITLES
    assert PART_MODULES["scale"] == "seglog.bench.scale"
    args = build_parser().parse_args(["bench", "--quick", "--only", "scale"])
    assert args.only == ("scale",)


def test_tiny_scale_run_reports_every_step(tmp_path):
    ctx = _context(tmp_path)
    result = scale.run_scale(ctx, (scale.ScaleSize(TINY_PARTITIONS, TINY_BUDGET_S),),
                             kafka=False)
    assert result.status == "ok"
    steps_table, targets_table = result.tables
    assert steps_table.columns[:4] == ["N", "step", "status", "wall s"]
    # A baseline row, then one row per step, every step finished.
    assert [row[1] for row in steps_table.rows] == \
        [scale.STEP_LABELS["baseline"]] + [scale.STEP_LABELS[s] for s in scale.STEPS]
    assert [row[2] for row in steps_table.rows] == ["ok"] * (1 + len(scale.STEPS))
    for name in scale.STEPS:
        key = f"seglog.{TINY_PARTITIONS}.{name}"
        assert result.figures[f"{key}.wall_s"].median > 0, name
        assert result.figures[f"{key}.rss_bytes"].median > 0, name
        assert result.figures[f"{key}.fds"].median > 0, name
    assert result.figures[f"seglog.{TINY_PARTITIONS}.peak_rss_bytes"].median > 0
    # Every partition is a directory with files in it, and they were open after create.
    assert result.figures[f"seglog.{TINY_PARTITIONS}.create.rss_growth_bytes"].median > 0
    assert result.params["backend"] in ("native", "pure")
    assert result.params["nofile"] > 0
    # The targets: the two at 10,000 are not measured at this size.
    labels = [row[0] for row in targets_table.rows]
    assert any(label.startswith("RSS per idle empty partition") for label in labels)
    assert [row[3] for row in targets_table.rows if "10,000" in row[0]] == ["not measured"] * 3
    assert len(result.targets) == 2  # RSS and descriptors per idle partition
    text = result.to_markdown()
    assert "create_topic(partitions=N)" in text and "reopen: Store(path)" in text
    json.dumps(result.to_json())
    # The stores went into the run's scratch dir and were removed.
    leftovers = [name for _, _, files in os.walk(ctx.workdir) for name in files]
    assert leftovers == []


def test_budget_cuts_the_running_step(tmp_path):
    # A zero budget and no grace: the parent kills the subprocess on its first look, before
    # any step reported, and says so instead of waiting.
    size = scale.measure_size(scale.ScaleSize(TINY_PARTITIONS, 0.0), base_dir=tmp_path,
                              kill_grace_s=0.0)
    assert size.steps[0]["step"] == "startup"
    assert size.steps[0]["status"] == scale.STATUS_CUT
    assert "time budget" in size.steps[0]["error"]
    assert [row["status"] for row in size.steps[1:]] == [scale.STATUS_NOT_RUN] * len(scale.STEPS)
    assert os.listdir(tmp_path) == []


def test_rss_cap_cuts_the_running_step(tmp_path):
    # A cap of 1 byte: the first RSS sample is above it.
    size = scale.measure_size(scale.ScaleSize(TINY_PARTITIONS, TINY_BUDGET_S),
                              base_dir=tmp_path, rss_cap=1)
    cut = [row for row in size.steps if row["status"] == scale.STATUS_CUT]
    assert len(cut) == 1 and "RSS cap" in cut[0]["error"]
    assert cut[0]["rss_after"] > 1
    assert os.listdir(tmp_path) == []


def test_descriptor_limit_is_reported_not_a_crash(tmp_path):
    # 100 partitions of 3 segments under a hard limit of 64 descriptors: the Store's file
    # cache (half the limit) keeps every step within it (before it, the create failed with
    # EMFILE, reported as the step's error).
    size = scale.measure_size(scale.ScaleSize(100, TINY_BUDGET_S), base_dir=tmp_path,
                              nofile_hard=64)
    assert size.nofile == {"soft_before": 64, "soft": 64, "hard": 64}
    assert [row["status"] for row in size.steps] == [scale.STATUS_OK] * len(size.steps), \
        size.steps
    assert max(row["fds_after"] for row in size.steps) < 64


def _size(partitions: int, steps: list[dict]) -> scale.SizeResult:
    result = scale.SizeResult(partitions, 10.0, baseline={"rss_bytes": 30 << 20,
                                                          "vm_bytes": 1 << 30, "fds": 5})
    result.steps = steps
    return result


def _ok(step: str, *, wall_s: float, rss_before: int, rss_after: int, fds_before: int,
        fds_after: int) -> dict:
    return {"step": step, "status": scale.STATUS_OK, "done": None, "error": "",
            "wall_s": wall_s, "cpu_s": wall_s, "rss_before": rss_before,
            "rss_after": rss_after, "vm_after": 1 << 30, "fds_before": fds_before,
            "fds_after": fds_after}


def test_targets_verdicts_from_figures():
    from seglog.bench.table import PartResult

    kib, mib = 1 << 10, 1 << 20
    # 1,000 partitions: created in 0.5 s at 8 KiB and no descriptor each (all met);
    # 10,000: create cut by the budget, so its targets are missed.
    small = _size(1_000, [_ok("create", wall_s=0.5, rss_before=30 * mib,
                              rss_after=30 * mib + 1_000 * 8 * kib, fds_before=5,
                              fds_after=5)])
    large = _size(10_000, [
        {"step": "create", "status": scale.STATUS_CUT, "done": 2_500, "wall_s": 30.0,
         "error": "killed at the time budget", "rss_after": 900 * mib, "rss_before": 30 * mib,
         "fds_before": 5, "fds_after": 5005, "vm_after": 1 << 30, "cpu_s": None}])
    scale._fill_not_run(large)
    part = PartResult("scale", "t")
    table = scale._targets_table(part, [small, large])
    verdicts = {row[0]: row[3] for row in table.rows}
    assert verdicts["create_topic(1,000 partitions)"] == "met"
    assert verdicts["create_topic(10,000 partitions)"] == "MISSED"
    assert verdicts["RSS per idle empty partition (create of 1,000)"] == "met"
    assert verdicts["descriptors per idle empty partition (create of 1,000)"] == "met"
    assert verdicts["reopen 10,000 partitions (3 segments each)"] == "MISSED"
    measured = {row[0]: row[1] for row in table.rows}
    assert "2,500/10,000 partitions done" in measured["create_topic(10,000 partitions)"]
    assert measured["reopen 10,000 partitions (3 segments each)"] == "not run"
    assert [t.met for t in part.targets].count(True) == 3
    # The steps table shows per-partition figures over the partitions a cut step got through.
    steps = scale._steps_table([large])
    cut_row = next(row for row in steps.rows if row[1] == scale.STEP_LABELS["create"])
    assert cut_row[2].startswith("CUT") and cut_row[4] == "12.000"  # 30 s / 2,500


def test_record_values_name_their_place():
    value = scale.record_value(12, 1, 3, 100)
    assert len(value) == 100 and value.startswith(b"p00000012 a01 r03 ")
    assert scale.record_value(12, 1, 3, 8) == b"p00000012 a01 r03 "  # never cut below the head
