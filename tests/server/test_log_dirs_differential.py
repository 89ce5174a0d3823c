"""Differential: AlterReplicaLogDirs (34), DescribeLogDirs (35), ``kafka-log-dirs``
(Kafka 4.4's ``org.apache.kafka.tools.LogDirsCommand``) and ``kafka-reassign-partitions``
with ``log_dirs`` against the real Kafka 4.4 broker and against seglog serve, each with one
log directory and with two (JBOD). Paths and sizes are masked; everything else must be
equal."""

from __future__ import annotations

import datetime
import json
import os
import time

import pytest

from seglog.bench.kafka import KafkaBroker, find_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 60
MOVE_S_MAX = 60


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


def test_alter_replica_log_dirs_and_kafka_log_dirs(kafka_shared, broker, tmp_path):
    # Kafka's side is the session's shared broker: the scenario reads back only its topic.
    mine = _scenario(broker.bootstrap, tmp_path)
    kafka = _scenario(kafka_shared.bootstrap, tmp_path)
    for ours, theirs in zip(mine, kafka):
        assert ours == theirs
    assert len(mine) == len(kafka)


@pytest.fixture(scope="module")
def real_kafka_two_dirs(tmp_path_factory):
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    run_dir = tmp_path_factory.mktemp("kafka2")
    dirs = (run_dir / "jbod" / "a", run_dir / "jbod" / "b")
    kafka = KafkaBroker(_REF, run_dir, extra_properties={
        "log.dirs": ",".join(str(d) for d in dirs)})
    kafka.format()
    kafka.start()
    try:
        yield kafka, dirs
    finally:
        kafka.stop()


def _where(c, topic):
    """``{partition: (dir basename, is_future)}`` rows of ``topic``, from DescribeLogDirs v4,
    and ``[(dir basename, error code)]`` of the dirs."""
    r = c.call(35, 4, topics=None)
    rows = sorted((t.name, p.partition_index, os.path.basename(d.log_dir), p.is_future_key)
                  for d in r.results for t in d.topics for p in t.partitions if t.name == topic)
    dirs = sorted((os.path.basename(d.log_dir), int(d.error_code), d.total_bytes > 0)
                  for d in r.results)
    return rows, dirs


def _two_dirs_scenario(bootstrap: str, dirs, run_dir) -> list:
    from test_admin_differential import Client, settle

    c = Client(bootstrap)
    ct = c.m(19, 7)
    c.call(19, 7, topics=(ct.CreatableTopic(name="jb", num_partitions=4, replication_factor=1,
                                            assignments=(), configs=()),),
           timeout=datetime.timedelta(seconds=10), validate_only=False)
    settle(c, "jb", 4)
    out: list = []
    rows, described = _where(c, "jb")
    out.append(described)
    # Placement: the dir holding the fewest partitions, one at a time (2 and 2).
    held = {d: [p for _t, p, where, _f in rows if where == d] for d in ("a", "b")}
    out.append(sorted(len(v) for v in held.values()))
    here = {p: where for _t, p, where, _f in rows}
    other = {"a": str(dirs[1]), "b": str(dirs[0])}

    def move(version, *moves):
        m = c.m(34, version)
        r = c.call(34, version, dirs=tuple(
            m.AlterReplicaLogDir(path=path, topics=tuple(
                m.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics))
            for path, topics in moves))
        return sorted((t.topic_name, p.partition_index, int(p.error_code))
                      for t in r.results for p in t.partitions)

    out.append(move(2, (other[here[0]], [("jb", (0,))]),
                    (str(dirs[0] if here[1] == "a" else dirs[1]), [("jb", (1,))]),
                    ("/no/such/dir", [("jb", (2,))])))
    deadline = time.monotonic() + MOVE_S_MAX
    while True:
        rows, _ = _where(c, "jb")
        if [(p, w, f) for _t, p, w, f in rows if p == 0] == [
                (0, os.path.basename(other[here[0]]), False)]:
            break
        assert time.monotonic() < deadline, rows
        time.sleep(0.1)
    out.append("moved")
    c.close()
    # kafka-reassign-partitions --reassignment-json-file with log_dirs: partition 2 to its
    # other dir (the replica stays on this broker).
    broker_id = json.loads(_REF.run_tool(
        "org.apache.kafka.tools.LogDirsCommand",
        ["--bootstrap-server", bootstrap, "--describe", "--topic-list", "jb"],
        run_dir=run_dir, timeout_s=TOOL_TIMEOUT_S).stdout.strip().splitlines()[-1]
    )["brokers"][0]["broker"]
    plan = run_dir / f"plan-{broker_id}-{time.monotonic_ns()}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "jb", "partition": 2, "replicas": [broker_id],
         "log_dirs": [other[here[2]]]}]}), encoding="utf-8")
    for action in ("--execute", "--verify"):
        deadline = time.monotonic() + MOVE_S_MAX
        while True:
            done = _REF.run_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                                 ["--bootstrap-server", bootstrap, action,
                                  "--reassignment-json-file", str(plan)],
                                 run_dir=run_dir, timeout_s=TOOL_TIMEOUT_S)
            text = done.stdout.replace(other[here[2]], "<to>")
            if action == "--execute" or "is still in progress" not in text:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        out.append((action, done.returncode,
                    [line for line in text.splitlines() if "Current partition replica" not in
                     line and not line.startswith("{")]))
    done = _REF.run_tool("org.apache.kafka.tools.LogDirsCommand",
                         ["--bootstrap-server", bootstrap, "--describe", "--topic-list", "jb"],
                         run_dir=run_dir, timeout_s=TOOL_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for broker in found["brokers"]:
        broker["broker"] = "<id>"
        for d in broker["logDirs"]:
            d["logDir"] = os.path.basename(d["logDir"])
            for p in d["partitions"]:
                p["size"] = "<size>"
            d["partitions"].sort(key=lambda p: p["partition"])
            # Which dir each partition went to first depends on tie-breaking: named by
            # where it is relative to where it was.
            for p in d["partitions"]:
                p["moved"] = here[int(p["partition"].rsplit("-", 1)[1])] != d["logDir"]
            d["logDir"] = "<dir>"
        broker["logDirs"].sort(key=lambda d: [p["partition"] for p in d["partitions"]])
    out.append(found)
    return out


def test_two_log_dirs_describe_move_and_reassign(real_kafka_two_dirs, broker_factory, tmp_path):
    """Kafka 4.4 and seglog serve, each with two log dirs: placement, DescribeLogDirs,
    AlterReplicaLogDirs (a move completes), ``kafka-reassign-partitions`` with ``log_dirs``
    and ``kafka-log-dirs --describe``."""
    kafka, kafka_dirs = real_kafka_two_dirs
    mine_dirs = (tmp_path / "jbod" / "a", tmp_path / "jbod" / "b")
    broker = broker_factory(data_dir=mine_dirs[0],
                            log_dirs=",".join(str(d) for d in mine_dirs))
    mine = _two_dirs_scenario(broker.bootstrap, mine_dirs, tmp_path)
    theirs = _two_dirs_scenario(kafka.bootstrap, kafka_dirs, tmp_path)
    for ours, reference in zip(mine, theirs):
        assert ours == reference
    assert len(mine) == len(theirs)


def _failed_dir_scenario(bootstrap: str, restart, dirs) -> list:
    """Two partitions, one per dir; the second dir's disk fails (its path becomes a file)
    across a restart: the broker serves on, that dir answers KAFKA_STORAGE_ERROR and so do
    produces to its partition; the other partition takes records."""
    from test_admin_differential import Client, settle

    c = Client(bootstrap)
    ct = c.m(19, 7)
    c.call(19, 7, topics=(ct.CreatableTopic(name="fd", num_partitions=2, replication_factor=1,
                                            assignments=(), configs=()),),
           timeout=datetime.timedelta(seconds=10), validate_only=False)
    settle(c, "fd", 2)
    rows, _ = _where(c, "fd")
    c.close()
    in_b = [p for _t, p, where, _f in rows if where == "b"]
    assert len(in_b) == 1
    bootstrap = restart(lambda: _fail(dirs[1]))
    c = Client(bootstrap)
    out: list = []
    deadline = time.monotonic() + MOVE_S_MAX
    while True:
        rows, described = _where(c, "fd")
        if [r for r in rows if r[2] == "a"]:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    out.append(described)
    # Which partition went to which dir first depends on tie-breaking: not compared.
    out.append(sorted(where for _t, _p, where, _f in rows))
    c.close()
    return out


def _fail(path) -> None:
    """The disk of ``path`` fails: its directory is set aside and a file takes its place."""
    os.rename(path, str(path) + ".failed")
    with open(path, "wb") as f:
        f.write(b"not a directory")


def test_a_failed_log_dir_takes_only_its_partitions_offline(tmp_path_factory, broker_factory,
                                                           tmp_path):
    if _REF is None:
        pytest.skip(_WHY)
    run_dir = tmp_path_factory.mktemp("kafka-failed-dir")
    kafka_dirs = (run_dir / "jbod" / "a", run_dir / "jbod" / "b")
    kafka = KafkaBroker(_REF, run_dir, extra_properties={
        "log.dirs": ",".join(str(d) for d in kafka_dirs)})
    kafka.format()
    kafka.start()
    try:
        def restart_kafka(between):
            kafka.stop()
            between()
            kafka.start()
            return kafka.bootstrap

        theirs = _failed_dir_scenario(kafka.bootstrap, restart_kafka, kafka_dirs)
    finally:
        kafka.stop()
    mine_dirs = (tmp_path / "jbod" / "a", tmp_path / "jbod" / "b")
    config = {"log.dirs": ",".join(str(d) for d in mine_dirs)}
    brokers = [broker_factory(data_dir=mine_dirs[0], config=config)]

    def restart_mine(between):
        brokers[-1].stop()
        between()
        with pytest.warns(RuntimeWarning, match="offline"):
            brokers.append(broker_factory(data_dir=mine_dirs[0], config=config))
        return brokers[-1].bootstrap

    mine = _failed_dir_scenario(brokers[0].bootstrap, restart_mine, mine_dirs)
    assert mine == theirs
