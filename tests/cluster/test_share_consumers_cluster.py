"""Share groups (KIP-932) in a ZooKeeper cluster of three ``seglog serve`` processes (issue 25,
"Done when ... in a ZooKeeper cluster"): share consumers (two confluent-kafka ``ShareConsumer``
and one Kafka 4.4 Java ``KafkaShareConsumer``, scripted by ``tests/kafka/share``'s driver)
share a topic of one partition replicated three times; the partition's leader is killed
with SIGKILL in the middle (records still being produced), a follower takes over, and
consumption resumes there.

The checker over the recorded history (``share_driver.py``): every record has a confirmed
ACCEPT (none lost), no record is delivered again once its ACCEPT was confirmed (the share
partition's state was persisted in the replicated ``__share_group_state`` before the answer,
so the new leader knows it), and no record has two confirmed ACCEPTs. Records acquired but not
acknowledged on the dead leader come back on the new one.

Minutes: selected with ``-m cluster`` (CI's cluster step) or SEGLOG_CLUSTER_SCENARIOS=1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.scenario import ScenarioRun

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka" / "share"))
from share_driver import (  # noqa: E402
    ShareConsumerProcess, SlowProducer, check_accepted_exactly_once,
    check_no_delivery_after_ack, compile_java, confirmed_accepts, env_with_src, history,
    wait_until)

from seglog.bench.kafka import find_kafka  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType)

pytestmark = pytest.mark.cluster

SCENARIOS_ENV = "SEGLOG_CLUSTER_SCENARIOS"
TOPIC = "share-scenario"
#: FIRST records before the consumers start; once KILL_AFTER are accepted the rest (up to
#: RECORDS) are produced slowly while the leader is killed: the kill always comes mid-stream.
FIRST = 150
RECORDS = 600
KILL_AFTER = 80
WAIT_S = 120.0
RUN_S = 240


@pytest.fixture(autouse=True)
def _selected(request):
    if os.environ.get(SCENARIOS_ENV, "") not in ("", "0"):
        return
    if "cluster" in (request.config.option.markexpr or ""):
        return
    pytest.skip(f"the cluster scenarios take minutes: run them with -m cluster or "
                f"{SCENARIOS_ENV}=1")


def _java(tmp_path):
    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(why)
        pytest.skip(why)
    out = tmp_path / "java"
    out.mkdir()
    return compile_java(ref, out)


def test_share_consumers_follow_the_partition_leader(tmp_path, zk_connect, monkeypatch):
    java = _java(tmp_path)
    # The broker processes import this checkout.
    monkeypatch.setenv("PYTHONPATH", env_with_src()["PYTHONPATH"])
    run = ScenarioRun(tmp_path / "run", zk_connect, topic=TOPIC, partitions=1)
    consumers: list[ShareConsumerProcess] = []
    try:
        run.up(topic_config={"min.insync.replicas": 2})
        bootstrap = run.cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, "share-cluster", incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", "earliest",
                incremental_operation=AlterConfigOpType.SET)])], request_timeout=30)
        for future in futures.values():
            future.result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(FIRST):
            producer.produce(TOPIC, b"%06d" % i, partition=0)
        assert producer.flush(30) == 0
        consumers = [
            ShareConsumerProcess("confluent", None, bootstrap, "share-cluster", TOPIC, "c0",
                                 run_s=RUN_S, rules=["max-poll=10"]),
            ShareConsumerProcess("confluent", None, bootstrap, "share-cluster", TOPIC, "c1",
                                 run_s=RUN_S, rules=["max-poll=10"]),
            ShareConsumerProcess("java", java, bootstrap, "share-cluster", TOPIC, "j0",
                                 run_s=RUN_S, rules=["max-poll=10"]),
        ]

        def accepted():
            return set(confirmed_accepts(history(consumers)))

        def context():
            return {c.member: c.tail() for c in consumers}
        wait_until(lambda: len(accepted()) >= KILL_AFTER, f"{KILL_AFTER} records accepted",
                   WAIT_S, context)
        slow = SlowProducer(bootstrap, TOPIC, FIRST, RECORDS - FIRST, WAIT_S)
        slow.start()
        leader = run.leader(0)
        run.cluster.kill(leader)
        new_leader = run.wait_for("a new leader of the partition",
                                  lambda: (l := run.leader(0)) not in (-1, leader) and (l,))[0]
        assert new_leader != leader
        wanted = [(0, o) for o in range(RECORDS)]
        wait_until(lambda: set(wanted) <= accepted(), "every record accepted on the new leader",
                   WAIT_S, context)
        slow.join(WAIT_S)
    finally:
        for c in consumers:
            c.stop()
        run.close()
    assert slow.errors == [] and slow.unflushed == 0, slow.errors[:5]
    h = history(consumers)
    assert set(wanted) <= set(confirmed_accepts(h)), "a record was lost"
    assert check_no_delivery_after_ack(h) == []
    assert check_accepted_exactly_once(h, wanted) == []
