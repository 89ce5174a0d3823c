"""A consumer group of the new protocol (KIP-848) in a ZooKeeper cluster: its coordinator is
the leader of its ``__consumer_offsets`` partition; when that broker stops, the new leader
loads the group from the replicated records and the librdkafka member goes on with the same
member id, its partitions and its committed offsets (no rejoin, no gap)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from seglog.types import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))  # the Java member helper
from java_consumer_member import JavaMember, compile_member  # noqa: E402
from test_coordinators import OFFSETS, WAIT_S, _some, find_coordinator, make_cluster, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

__all__ = ["make_cluster"]  # the fixture, imported for this module's tests

GROUP_CONFIG = {
    "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 10000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 500}


def _describe(admin):
    group = admin.describe_consumer_groups(["g"])["g"].result(WAIT_S)
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
            for m in group.members}


@pytest.mark.slow
def test_consumer_group_follows_the_offsets_leader(make_cluster, zk_client):
    cluster = make_cluster(3, **{"offsets.topic.replication.factor": 3,
                                 "default.replication.factor": 3}, **GROUP_CONFIG)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic("t", 2, 3)])["t"].result(20)
    for partition in range(2):
        cluster.wait_for_isr(TopicPartition("t", partition), 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                         "acks": "all"})
    for i in range(200):
        producer.produce("t", value=str(i).encode(), partition=i % 2)
    assert producer.flush(20) == 0

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": "g", "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen: list[int] = []

    def consume(count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        target = len(seen) + count
        while len(seen) < target:
            assert time.monotonic() < deadline, f"consumed {len(seen)} of {target}"
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            seen.append(int(message.value()))
            try:
                consumer.commit(message=message, asynchronous=False)
            except confluent_kafka.KafkaException:
                pass  # the coordinator is moving: the next commit covers it

    try:
        consumer.subscribe(["t"])
        consume(80)
        before = _describe(admin)
        assert list(before.values()) == [[0, 1]]
        coordinator = cluster.wait_for_isr(OFFSETS, 3)
        for broker_id in cluster.brokers:
            assert find_coordinator(cluster.address(broker_id), "g") == (0, coordinator)
        cluster.stop(coordinator)
        new_coordinator = wait_until(lambda: _some(cluster.leader_of(OFFSETS)),
                                     "a new __consumer_offsets-0 leader")[0]
        assert new_coordinator != coordinator
        consume(200 - len(set(seen)))
        # The new coordinator loaded the group: the same member, the same partitions.
        survivors = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert _describe(survivors) == before
        committed = consumer.committed([confluent_kafka.TopicPartition("t", p)
                                        for p in range(2)], 10)
        assert [tp.offset for tp in committed] == [100, 100]
    finally:
        consumer.close()
    assert sorted(set(seen)) == list(range(200))


@pytest.mark.slow
@pytest.mark.kafka
def test_java_consumer_follows_the_offsets_leader(make_cluster, zk_client, tmp_path):
    """Kafka 4.4's Java consumer (``group.protocol=consumer``) through a coordinator move:
    the broker leading ``__consumer_offsets`` stops, the new leader loads the group, and the
    member reads every record once, keeping its partitions (revoked only when it closes)."""
    java, classpath = compile_member(tmp_path)
    cluster = make_cluster(3, **{"offsets.topic.replication.factor": 3,
                                 "default.replication.factor": 3}, **GROUP_CONFIG)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic("t", 2, 3)])["t"].result(20)
    for partition in range(2):
        cluster.wait_for_isr(TopicPartition("t", partition), 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                         "acks": "all"})
    for i in range(100):
        producer.produce("t", value=str(i).encode(), partition=i % 2)
    assert producer.flush(20) == 0
    member = JavaMember(java, classpath, cluster.bootstrap, "gj", "t", 45)
    try:
        member.wait_for(lambda: len(member.records()) == 100
                        and "EPOCH" in " ".join(member.lines[-3:]),
                        "100 records read and committed", WAIT_S)
        coordinator = cluster.wait_for_isr(OFFSETS, 3)
        cluster.stop(coordinator)
        wait_until(lambda: _some(cluster.leader_of(OFFSETS)),
                   "a new __consumer_offsets-0 leader")
        for i in range(100, 200):
            producer.produce("t", value=str(i).encode(), partition=i % 2)
        assert producer.flush(30) == 0
        member.wait_for(lambda: len(member.records()) >= 200,
                        "the records produced after the move", WAIT_S)
        assert member.finish(90) == 0
        read = member.records()
        assert len(read) == len(set(read)) == 200, "a record read twice or missed"
        assert member.events() == ["ASSIGNED 0,1", "REVOKED 0,1", "CLOSED"], member.events()
    finally:
        member.kill()
