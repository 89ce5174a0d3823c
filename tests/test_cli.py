"""Smoke tests of the ``seglog`` command line and ``seglog bench``'s machinery.

The bench runs here on tiny sizes (``--quick --records``) and only fast parts; what is checked
is the plumbing: option parsing, part selection, the results files, JSON on stdout, figures
with at least 3 runs, and that the scratch data directory is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seglog import cli
from seglog.bench.stats import Figure, fmt_rate, fmt_ratio, ratio_figure, si
from seglog.bench.table import Table, Target

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_parse_parts_orders_and_validates():
    assert cli.parse_parts("peers,article") == ("article", "peers")
    assert cli.parse_parts(" limits ") == ("limits",)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown part nope"):
        cli.parse_parts("article,nope")


def test_bench_options_parse():
    args = cli.build_parser().parse_args(
        ["bench", "--quick", "--only", "article", "--records", "1_000", "--record-bytes", "50",
         "--runs", "4", "--dir", "x", "--json", "--out", "o"])
    assert (args.mode, args.only, args.records, args.record_bytes, args.runs) == (
        "quick", ("article",), 1000, 50, 4)
    assert (args.dir_path, args.json_stdout, args.out_dir) == ("x", True, "o")


@pytest.mark.parametrize("argv", [
    ["bench", "--quick", "--full"],
    ["bench", "--runs", "2"],
    ["bench", "--records", "0"],
    ["bench", "--record-bytes", "4"],
    ["bench", "--only", "bogus"],
])
def test_bench_rejects_bad_options(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(argv)
    assert exc.value.code == 2


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "bench" in capsys.readouterr().out


def test_figures_and_ratios():
    a, b = Figure([4.0, 2.0, 3.0], "records/s"), Figure([2.0, 1.0, 1.0], "records/s")
    ratio = ratio_figure(a, b)
    assert ratio.values == [2.0, 2.0, 3.0] and ratio.median == 2.0
    assert si(3_343_755) == "3.34 M" and si(45_307) == "45.3 k"
    assert fmt_rate(Figure([1e6, 2e6, 3e6])) == "2 M (1..3 M)"
    assert fmt_ratio(ratio) == "2.00x (2.00..3.00x)"


def test_table_and_target_render():
    table = Table("t", ["name", "value"])
    table.add("a", "1.5 M")
    assert "1.5 M" in table.to_text() and "| a | 1.5 M |" in table.to_markdown()
    assert Target("x", ">= 2x", 2.5, 2.0).verdict == "met"
    assert Target("x", ">= 2x", 1.5, 2.0).verdict == "MISSED"


def _run_bench(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "seglog", "bench", "--quick", "--dir", str(tmp_path / "data"),
         "--out", str(tmp_path / "out"), "--no-charts", *extra],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def test_bench_quick_limits_writes_results(tmp_path):
    done = _run_bench(tmp_path, "--only", "limits", "--records", "2000")
    assert done.returncode == 0, done.stderr
    assert "== limits:" in done.stdout and "write ceiling" in done.stdout
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    limits = results["parts"]["limits"]
    assert limits["status"] == "ok"
    for figure in limits["figures"].values():
        assert len(figure["runs"]) >= 3
        assert figure["min"] <= figure["median"] <= figure["max"]
    assert results["limits"]["values"]["write_ceiling_bytes_per_s"] > 0
    assert "## limits" in (tmp_path / "out" / "results.md").read_text()
    # The scratch directory under --dir is removed afterwards.
    assert os.listdir(tmp_path / "data") == []


def test_bench_json_stdout_article(tmp_path):
    done = _run_bench(tmp_path, "--only", "article", "--records", "2000", "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    article = results["parts"]["article"]
    assert article["status"] == "ok"
    assert len(article["figures"]["buffered.write_penalty"]["runs"]) >= 3
    assert any("pwrite" in note for note in article["notes"])
    assert results["config"]["only"] == ["article"]
