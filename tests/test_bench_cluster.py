"""The ``cluster`` bench part (issue 12): its registration, how it turns a producer's history
and the log's leader epochs into the failover figure, the Kafka KRaft nodes' configuration,
and the part itself in a tiny mode on a real local cluster (ZooKeeper + 3 ``seglog serve``
processes, confluent-kafka clients): every row present, ratios computed, no failed row. The
Kafka cluster runs in ``seglog bench --only cluster`` (standard mode), not here."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from seglog.bench import PART_ORDER, PART_TITLES
from seglog.bench import cluster as part
from seglog.bench.kafka import KafkaRef
from seglog.bench.runner import PART_MODULES, Config, run_bench
from seglog.bench.table import STATUS_OK
from seglog.cli import build_parser

REQUIRE_ZOOKEEPER = os.environ.get("SEGLOG_REQUIRE_ZOOKEEPER", "") not in ("", "0")


def test_cluster_is_a_registered_part_after_clients():
    assert PART_ORDER[PART_ORDER.index("clients") + 1] == "cluster"
    assert "cluster" in PART_TITLES
    assert PART_MODULES["cluster"] == "seglog.bench.cluster"
    assert build_parser().parse_args(["bench", "--quick", "--only", "cluster"]).only == (
        "cluster",)


def test_epoch_of_finds_the_run_holding_an_offset():
    runs = [[0, 0], [3, 10], [4, 25]]
    assert part.epoch_of(runs, 0) == 0
    assert part.epoch_of(runs, 9) == 0
    assert part.epoch_of(runs, 10) == 3
    assert part.epoch_of(runs, 24) == 3
    assert part.epoch_of(runs, 1_000) == 4
    assert part.epoch_of([[2, 5]], 4) is None


def test_failover_is_the_first_ack_written_under_the_new_epoch():
    kill_t = 100.0
    rows = [  # [seq, sent_t, ack_t, offset, error]
        [0, 99.0, 99.1, 0, None],
        [1, 99.5, 99.6, 1, None],
        # Answered by the old leader just before it died, read by the client after the kill.
        [2, 99.9, 100.001, 2, None],
        [3, 99.95, 101.0, -1, "Local: Message timed out"],
        # Retried onto the new leader: the first write under epoch 1.
        [4, 99.99, 106.5, 3, None],
        [5, 100.2, 106.6, 4, None],
    ]
    out = part.failover_figures(rows, kill_t, [[0, 0], [1, 3]])
    assert out["failover_s"] == pytest.approx(6.5)
    assert out["last_old_ack_s"] == pytest.approx(0.001)
    assert (out["epoch_before"], out["epoch_after"]) == (0, 1)
    assert (out["acked_before"], out["acked_after"], out["failed"]) == (2, 2, 1)


def test_failover_without_a_new_epoch_or_an_early_ack_is_an_error():
    rows = [[0, 99.0, 99.1, 0, None], [1, 99.5, 101.0, 1, None]]
    # Everything acknowledged after the kill is still epoch 0: no failover happened.
    assert "error" in part.failover_figures(rows, 100.0, [[0, 0]])
    # Nothing acknowledged before the kill: no baseline epoch.
    assert "error" in part.failover_figures(rows, 99.0, [[0, 0], [1, 1]])


def _properties(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        assert key not in out, f"{key} set twice in {path}"
        out[key] = value
    return out


def test_kafka_cluster_nodes_share_the_voters_and_own_ports_and_dirs(tmp_path):
    # Only files are written here (no JVM runs): a KafkaRef is the java path and the lib dir.
    ref = KafkaRef("java", tmp_path / "lib", "4.4.0")
    kafka = part.KafkaCluster(ref, tmp_path / "k", 3, session_timeout_ms=6000)
    props = {node.node_id: _properties(node.properties_path) for node in kafka.nodes}
    assert set(props) == {0, 1, 2, part.KAFKA_CONTROLLER_ID}
    voters = {p["controller.quorum.voters"] for p in props.values()}
    assert voters == {f"{part.KAFKA_CONTROLLER_ID}@127.0.0.1:{kafka.controller.controller_port}"}
    assert props[part.KAFKA_CONTROLLER_ID]["process.roles"] == "controller"
    assert all(props[i]["process.roles"] == "broker" for i in range(3))
    assert all(p["broker.session.timeout.ms"] == "6000" for p in props.values())
    ports = [kafka.controller.controller_port] + [b.port for b in kafka.brokers.values()]
    assert len(set(ports)) == 4
    assert len({p["log.dirs"] for p in props.values()}) == 4
    assert kafka.bootstrap_without(1) == ",".join(
        kafka.brokers[i].bootstrap for i in (0, 2))


@pytest.mark.slow
def test_the_part_in_a_tiny_mode_fills_every_row(tmp_path):
    pytest.importorskip("confluent_kafka")
    from seglog.cluster.zookeeper import ZooKeeperNotInstalledError, find_zookeeper

    try:
        find_zookeeper()
    except ZooKeeperNotInstalledError as exc:
        if REQUIRE_ZOOKEEPER:
            pytest.fail(f"SEGLOG_REQUIRE_ZOOKEEPER=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))
    config = Config(mode="quick", only=("cluster",), records=2_000, dir_path=str(tmp_path),
                    out_dir=str(tmp_path / "out"), charts=False, progress=False)
    bench = run_bench(config)
    [result] = bench.parts
    assert result.status == STATUS_OK, result.reason
    assert not [n for n in result.notes if "failed" in n], result.notes
    tables = {t.title.split(",")[0].split(":")[0]: t for t in result.tables}
    tput = tables["produce throughput"]
    [row] = [r for r in tput.rows if r[0] == "confluent-kafka producer"]
    rf1, rf3, ratio = row[1:4]
    assert re.fullmatch(r"[\d.]+( [kM])?", rf1) and re.fullmatch(r"[\d.]+( [kM])?", rf3), row
    assert re.fullmatch(r"[\d.]+x", ratio), row
    figures = result.figures
    assert figures["seglog.ck.rf3_over_rf1"].median == pytest.approx(
        figures["seglog.ck.rf3"].median / figures["seglog.ck.rf1"].median)
    fail = tables["failover"]
    cells = {r[0]: r[1] for r in fail.rows}
    for label in ("first acknowledged write on the new leader, s",
                  "Metadata names the new leader, s"):
        assert re.fullmatch(r"[\d.]+", cells[label]), (label, cells[label])
    # The first acknowledgement counted came from a newer leader epoch than the warm-up's.
    assert figures["seglog.failover.epoch_after"].median > \
        figures["seglog.failover.epoch_before"].median
    assert not any(cell.startswith("failed") for t in result.tables for r in t.rows
                   for cell in r)
