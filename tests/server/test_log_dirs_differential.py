"""Differential: AlterReplicaLogDirs (34) and ``kafka-log-dirs`` (Kafka 4.4's
``org.apache.kafka.tools.LogDirsCommand``) against the real Kafka 4.4 broker (one log
directory) and against seglog serve (which serves one: several are refused at start).
Paths and sizes are masked; everything else must be equal."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys

import pytest

from seglog.bench.kafka import KafkaBroker, find_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka"))
    kafka.format()
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _scenario(bootstrap: str, run_dir) -> list:
    from test_admin_differential import Client, settle

    c = Client(bootstrap)
    ct = c.m(19, 7)
    c.call(19, 7, topics=(ct.CreatableTopic(name="ld", num_partitions=2, replication_factor=1,
                                            assignments=(), configs=()),),
           timeout=datetime.timedelta(seconds=10), validate_only=False)
    settle(c, "ld", 2)
    described = c.call(35, 4, topics=None)
    log_dir = described.results[0].log_dir
    out: list = []
    long_topic = "t" * 240

    def move(version, *moves):
        m = c.m(34, version)
        r = c.call(34, version, dirs=tuple(
            m.AlterReplicaLogDir(path=path, topics=tuple(
                m.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics))
            for path, topics in moves))
        return sorted((t.topic_name, p.partition_index, int(p.error_code))
                      for t in r.results for p in t.partitions)

    for version in (1, 2):
        out.append(move(version, (log_dir, [("ld", (0, 1, 5)), ("nope", (0,)),
                                            (long_topic, (0,))])))
        out.append(move(version, ("/no/such/dir", [("ld", (0,))])))
        # A partition named twice goes to its last directory (Kafka reads a map).
        out.append(move(version, ("/no/such/dir", [("ld", (1,))]), (log_dir, [("ld", (1,))])))
    r = c.call(35, 4, topics=None)
    out.append(sorted((t.name, p.partition_index, p.is_future_key)
                      for d in r.results for t in d.topics for p in t.partitions
                      if t.name == "ld"))
    c.close()
    done = _REF.run_tool("org.apache.kafka.tools.LogDirsCommand",
                         ["--bootstrap-server", bootstrap, "--describe", "--topic-list", "ld"],
                         run_dir=run_dir, timeout_s=TOOL_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for broker in found["brokers"]:
        broker["broker"] = "<id>"
        for d in broker["logDirs"]:
            d["logDir"] = "<dir>"
            for p in d["partitions"]:
                p["size"] = "<size>"
            d["partitions"].sort(key=lambda p: p["partition"])
    out.append(found)
    return out


def test_alter_replica_log_dirs_and_kafka_log_dirs(real_kafka, broker, tmp_path):
    mine, kafka = _scenario(broker.bootstrap, tmp_path), _scenario(real_kafka.bootstrap, tmp_path)
    for ours, theirs in zip(mine, kafka):
        assert ours == theirs
    assert len(mine) == len(kafka)


def test_several_log_dirs_are_refused_by_name_at_start(tmp_path):
    """JBOD is not built: ``seglog serve`` with two entries in log.dirs does not start (never
    serves the first alone)."""
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(os.path.dirname(__file__), "..", "..", "src"),
         os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "seglog", "serve", "--config-file", str(props),
                           "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode != 0
    assert "log.dirs" in done.stderr and "several log directories (JBOD)" in done.stderr
    assert not (tmp_path / "a").exists()
