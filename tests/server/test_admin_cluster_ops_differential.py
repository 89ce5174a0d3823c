"""Differential: ElectLeaders (43), AlterPartitionReassignments (45) and
ListPartitionReassignments (46) against the real Kafka 4.4 broker (one node) and a lone
``seglog serve``, the same requests byte for byte (kio over a socket) and the same answers back
(error codes and messages); then Kafka's own tools, ``kafka-leader-election`` and
``kafka-reassign-partitions`` (--generate, --execute, --verify, --list, --cancel) from the 4.4
jars, with the same output (but for the data directory each broker names)."""

from __future__ import annotations

import datetime
import json
import os
import re

import pytest

from seglog.bench.kafka import KafkaBroker, find_kafka

from test_admin_differential import Client, settle

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
TIMEOUT = datetime.timedelta(seconds=10)
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


def _rows(response, field, sub):
    """A response's per-topic results as plain tuples (codes as ints)."""
    return [(t.topic if hasattr(t, "topic") else t.name,
             [tuple(int(v) if k == "error_code" else v for k, v in (
                 (k, getattr(p, k)) for k in sub)) for p in getattr(t, field)])
            for t in (response.replica_election_results if hasattr(
                response, "replica_election_results") else response.responses)]


def scenario(bootstrap: str) -> list:
    """Every request of the comparison, on a fresh broker; returns what to compare."""
    c = Client(bootstrap)
    out: list = []
    node = c.call(60, 0, include_cluster_authorized_operations=False).brokers[0].broker_id
    other = node + 1
    ct = c.m(19, 7)
    r = c.call(19, 7, topics=(ct.CreatableTopic(name="t1", num_partitions=2,
                                                replication_factor=1, assignments=(),
                                                configs=()),),
               timeout=TIMEOUT, validate_only=False)
    out.append([(t.name, int(t.error_code)) for t in r.topics])
    settle(c, "t1", 2)
    election = ("partition_id", "error_code", "error_message")
    for version in (0, 1, 2):
        el = c.m(43, version)
        types = (0, 1) if version >= 1 else (0,)
        for election_type in types:
            fields = {"election_type": election_type} if version >= 1 else {}
            r = c.call(43, version, **fields, timeout=TIMEOUT, topic_partitions=(
                el.TopicPartitions(topic="t1", partitions=(0, 1, 5, 0, -1)),
                el.TopicPartitions(topic="nope", partitions=(0,)),
                el.TopicPartitions(topic="bad name!", partitions=(1,))))
            out.append((version, election_type, int(getattr(r, "error_code", 0)),
                        _rows(r, "partition_result", election)))
            r = c.call(43, version, **fields, timeout=TIMEOUT, topic_partitions=None)
            out.append((version, "all", _rows(r, "partition_result", election)))
    el = c.m(43, 2)
    r = c.call(43, 2, election_type=2, timeout=TIMEOUT,
               topic_partitions=(el.TopicPartitions(topic="t1", partitions=(0,)),))
    out.append(("type 2", int(r.error_code), _rows(r, "partition_result", election)))

    reassign = ("partition_index", "error_code", "error_message")
    for version in (0, 1):
        ap = c.m(45, version)
        P = ap.ReassignablePartition
        for allow in ((True, False) if version else (True,)):
            fields = {"allow_replication_factor_change": allow} if version else {}
            for replicas in ((node,), (node, other), (other,), None, (), (node, node), (-1,)):
                r = c.call(45, version, timeout=TIMEOUT, **fields, topics=(
                    ap.ReassignableTopic(name="t1", partitions=(
                        P(partition_index=0, replicas=replicas),)),))
                out.append((version, allow, replicas == (node,), int(r.error_code),
                            r.error_message, _rows(r, "partitions", reassign)))
        r = c.call(45, version, timeout=TIMEOUT, topics=(
            ap.ReassignableTopic(name="t1", partitions=(P(partition_index=0, replicas=(node,)),
                                                        P(partition_index=9,
                                                          replicas=(node,)))),
            ap.ReassignableTopic(name="nope", partitions=(P(partition_index=0, replicas=(node,)),
                                                          P(partition_index=1, replicas=None))),
            ap.ReassignableTopic(name="t1", partitions=(P(partition_index=-1,
                                                          replicas=(node,)),)),))
        out.append((version, int(r.error_code), _rows(r, "partitions", reassign)))
    lp = c.m(46, 0)
    for topics in (None, (lp.ListPartitionReassignmentsTopics(name="t1", partition_indexes=(0, 7)),
                          lp.ListPartitionReassignmentsTopics(name="nope",
                                                              partition_indexes=(0,)))):
        r = c.call(46, 0, timeout=TIMEOUT, topics=topics)
        out.append((int(r.error_code), r.error_message, [
            (t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
                      for p in t.partitions]) for t in r.topics]))
    c.close()
    return out


def test_cluster_ops_answer_as_kafka_does(real_kafka, broker):
    expected = scenario(real_kafka.bootstrap)
    got = scenario(broker.bootstrap)
    for step, (mine, kafkas) in enumerate(zip(got, expected)):
        assert mine == kafkas, f"step {step}"
    assert len(got) == len(expected)


def tools_scenario(bootstrap: str, run_dir) -> list[tuple[int, str]]:
    """kafka-leader-election and kafka-reassign-partitions, each step's exit code and its
    output with the data directory masked."""
    run_dir.mkdir(exist_ok=True)
    c = Client(bootstrap)
    node = c.call(60, 0, include_cluster_authorized_operations=False).brokers[0].broker_id
    ct = c.m(19, 7)
    c.call(19, 7, topics=(ct.CreatableTopic(name="t1", num_partitions=2, replication_factor=1,
                                            assignments=(), configs=()),),
           timeout=TIMEOUT, validate_only=False)
    settle(c, "t1", 2)
    c.close()
    steps = []

    def tool(main_class, *args):
        done = _REF.run_tool(main_class, ["--bootstrap-server", bootstrap, *args],
                             run_dir=run_dir, timeout_s=TOOL_TIMEOUT_S)
        text = re.sub(r'"log_dirs":\["[^"]*"', '"log_dirs":["DIR"', done.stdout)
        steps.append((done.returncode, text.strip()))

    election = "org.apache.kafka.tools.LeaderElectionCommand"
    reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    tool(election, "--election-type", "preferred", "--all-topic-partitions")
    tool(election, "--election-type", "unclean", "--topic", "t1", "--partition", "0")
    (run_dir / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"topic": "t1"}]}))
    tool(reassign, "--generate", "--topics-to-move-json-file", str(run_dir / "topics.json"),
         "--broker-list", str(node))
    plan = run_dir / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t1", "partition": 0, "replicas": [node], "log_dirs": ["any"]}]}))
    tool(reassign, "--execute", "--reassignment-json-file", str(plan))
    tool(reassign, "--verify", "--reassignment-json-file", str(plan))
    tool(reassign, "--list")
    tool(reassign, "--cancel", "--reassignment-json-file", str(plan))
    return steps


# A JVM per step (minutes on the 2-core machine): run by .ci/run with -m kafka_tools; the
# requests these tools send are compared raw by test_cluster_ops_answer_as_kafka_does.
@pytest.mark.kafka_tools
def test_leader_election_and_reassign_tools_as_against_kafka(real_kafka, broker, tmp_path):
    expected = tools_scenario(real_kafka.bootstrap, tmp_path / "kafka")
    got = tools_scenario(broker.bootstrap, tmp_path / "seglog")
    assert got == expected
    assert expected[3][0] == 0 and "Successfully started partition reassignment for t1-0" \
        in expected[3][1]
    assert "Reassignment of partition t1-0 is completed." in got[4][1]
