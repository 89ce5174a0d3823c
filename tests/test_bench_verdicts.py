"""The bench's verdicts (issue 27): every printed target has a verdict cell, each part
records the machine's load at its start and end, and a target missed on a busy machine says
so. No timed asserts: the figures are synthetic or whatever the machine measured."""

from __future__ import annotations

import json
import os

from seglog.bench import clients
from seglog.bench.load import BUSY_LOAD_PER_CPU, LoadSample, PartLoad, read_load
from seglog.bench.report import write_report
from seglog.bench.runner import Config, run_bench
from seglog.bench.stats import Figure
from seglog.bench.table import PartResult, Table, Target

QUIET = PartLoad(LoadSample(0.2, 2), LoadSample(0.4, 2))
BUSY = PartLoad(LoadSample(0.5, 2), LoadSample(3.14, 2))


def test_load_sample_busy_above_half_the_cpus():
    assert not LoadSample(2 * BUSY_LOAD_PER_CPU, 2).busy
    assert LoadSample(2 * BUSY_LOAD_PER_CPU + 0.01, 2).busy
    assert BUSY.busy and BUSY.peak_1m == 3.14 and not QUIET.busy
    assert BUSY.describe() == "load 0.50 -> 3.14 on 2 CPUs, busy"
    assert PartLoad(None).describe() == "load unknown"
    sample = read_load()
    if hasattr(os, "getloadavg"):
        assert sample is not None and sample.cpus == os.cpu_count() and sample.load_1m >= 0


def test_verdicts_met_missed_measured_and_under_load():
    assert Target("x", ">= 2x", 2.5, 2.0, load=BUSY).verdict == "met"
    assert Target("x", ">= 2x", 1.5, 2.0, load=QUIET).verdict == "MISSED"
    assert Target("x", ">= 2x", 1.5, 2.0).verdict == "MISSED"
    assert Target("x", ">= 2x", 1.5, 2.0, load=BUSY).verdict == "MISSED under load 3.1"
    assert Target("x", ">= 2x", 1.5, 2.0, judged=False, load=BUSY).verdict == "measured"
    assert Target("x", ">= 2x", 1.5, 2.0, load=BUSY).to_json()["verdict"] == \
        "MISSED under load 3.1"


def test_table_verdict_cells_follow_the_load_set_after_the_part():
    part = PartResult("p", "t")
    missed = Target("ratio", ">= 2x", 1.5, 2.0)
    part.targets.append(missed)
    table = Table("t", ["what", "verdict"])
    table.add("ratio", missed)
    part.tables.append(table)
    assert table.rows[0][1] == "MISSED"
    part.apply_load(BUSY)
    assert table.rows[0][1] == "MISSED under load 3.1"
    assert "MISSED under load 3.1" in part.to_markdown()
    assert "load 0.50 -> 3.14 on 2 CPUs, busy" in part.to_text()
    assert part.to_json()["load"]["end"] == {"load_1m": 3.14, "cpus": 2}
    assert len(part.tables) == 1  # every target was shown: no extra targets table


def test_targets_no_table_shows_get_a_targets_table():
    part = PartResult("broker", "t")
    part.targets += [Target("a: seglog / Kafka", ">= 1.0x Kafka", 1.2, 1.0),
                     Target("b: seglog / Kafka", ">= 1.0x Kafka", 0.5, 1.0)]
    part.apply_load(QUIET)
    table = part.tables[-1]
    assert table.columns == ["target", "measured", "goal", "verdict"]
    assert [row[3] for row in table.rows] == ["met", "MISSED"]
    assert table.rows[1][1] == "0.50x"


def _clients_part(rates: dict[str, list[float]]) -> PartResult:
    part = PartResult(clients.NAME, clients.TITLE)
    for op, values in rates.items():
        part.figures[op] = Figure(values, "records/s")
    return part


def test_clients_tables_give_every_target_a_verdict():
    part = _clients_part({"send_keyed": [2.5e6] * 3, "poll": [7e6] * 3,
                          "confluent_produce": [1e6] * 3, "confluent_consume": [1e6] * 3,
                          "end_to_end": [1e6] * 3})
    rates = clients._rates_table(part)
    part.tables.append(rates)
    clients._ratio_targets(part)
    part.apply_load(BUSY)
    assert len(part.tables) == 2  # every target is in one of the part's own tables
    assert rates.columns[-2:] == ["target", "verdict"]
    rate_verdicts = {row[0]: (row[2], row[3]) for row in rates.rows}
    assert rate_verdicts[clients.OPERATIONS["send_keyed"]] == (">= 2 M/s", "met")
    assert rate_verdicts[clients.OPERATIONS["poll"]] == (">= 8 M/s", "MISSED under load 3.1")
    assert rate_verdicts[clients.OPERATIONS["end_to_end"]] == ("-", "measured")
    ratios = part.tables[1]
    assert ratios.columns[-1] == "verdict"
    verdicts = {row[0]: row[-1] for row in ratios.rows}
    assert verdicts == {"send_keyed / confluent_produce": "met",
                        "poll / confluent_consume": "met"}


def test_results_json_records_each_parts_load(tmp_path):
    config = Config(mode="quick", only=("sendfile",), records=2_000, dir_path=str(tmp_path),
                    out_dir=str(tmp_path / "out"), charts=False, progress=False)
    run = run_bench(config)
    written = write_report(run, config.out_dir, charts=False)
    with open(written["json"], encoding="utf-8") as f:
        part = json.load(f)["parts"]["sendfile"]
    if hasattr(os, "getloadavg"):
        for when in ("start", "end"):
            assert part["load"][when]["cpus"] == os.cpu_count()
            assert part["load"][when]["load_1m"] >= 0
        assert isinstance(part["load"]["busy"], bool)
    for target in part["targets"]:
        assert target["verdict"].startswith(("met", "MISSED", "measured"))
    text = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert " CPUs" in text


def test_clients_primes_each_writer_untimed_before_timing_it(tmp_path, monkeypatch):
    """Every writing operation runs once untimed right before its timed run (PRIMED: on a VM
    with free page reporting the first writer after a pause pays the host's page faults), and
    only the timed run is a figure."""
    calls: list[str] = []

    def recording(op, fn):
        def call(ctx, values, keys):
            calls.append(op)
            return fn(ctx, values, keys)
        return call

    ops = {op: recording(op, clients._OPS[op])
           for op in ("send_keyed", "send_keyless", "core_end_to_end")}
    monkeypatch.setattr(clients, "_OPS", ops)
    config = Config(mode="quick", only=("clients",), records=2_000, dir_path=str(tmp_path),
                    out_dir=str(tmp_path / "out"), charts=False, progress=False)
    run = run_bench(config)
    runs = run.profile.runs
    assert calls == ["send_keyed", "send_keyed", "send_keyless", "send_keyless",
                     "core_end_to_end", "core_end_to_end"] * runs
    (part,) = run.parts
    for op in ops:
        assert len(part.figures[op].values) == runs
    assert clients.PRIMED <= set(clients.OPERATIONS)
