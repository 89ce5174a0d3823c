"""The share-group DLQ writer (:mod:`seglog.server.share_dlq`) in a ZooKeeper cluster: the DLQ
topic is created through ZooKeeper with the cluster's defaults; the broker leading the DLQ
partition writes through the seam's append, any other sends it a Produce request over the
inter-broker listener (acks=-1, Kafka's ``ShareGroupDLQStateManager``), with the DLQ topic's
configs read from the cluster (``max.message.bytes``, ``errors.deadletterqueue.group.enable``
of a topic it holds no replica of); a range written before is found at the leader (Fetch)
and not written again; the DLQ partition's leader stopped in the middle of a write: the
writer follows the new leader, nothing lost, nothing twice."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from seglog import errors
from seglog.server.share_dlq import (CLIENT_REJECT, DELIVERY_COUNT_EXCEEDED, ShareDlqManager,
                                     dlq_headers)
from seglog.types import TopicPartition

from test_coordinators import make_cluster, wait_until  # noqa: F401

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

GROUP = "g1"
DLQ = "dlq.g1"
DLQ_TP = TopicPartition(DLQ, 0)


def _groups(copy: bool):
    def lookup(group_id, name):
        return {"errors.deadletterqueue.topic.name": DLQ,
                "errors.deadletterqueue.copy.record.enable": str(copy).lower()}.get(name) \
            if group_id == GROUP else None
    return lookup


def _manager(cluster, broker_id, *, copy=True):
    return ShareDlqManager(cluster.brokers[broker_id].state, group_config=_groups(copy))


def _start(cluster, broker_id, manager, first, last, *, cause=CLIENT_REJECT, topic_id=None):
    broker = cluster.brokers[broker_id]
    return asyncio.run_coroutine_threadsafe(manager.enqueue(
        GROUP, TopicPartition("src", 0), topic_id or SRC_ID, first, last, 1, cause),
        broker.loop)


def _enqueue(cluster, broker_id, first, last, **kwargs):
    manager = _manager(cluster, broker_id, copy=kwargs.pop("copy", True))
    return _start(cluster, broker_id, manager, first, last, **kwargs).result(60)


SRC_ID = uuid.UUID(int=7)


def _produce_source(cluster, count):
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(count):
        producer.produce("src", key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0


def _dlq_records(cluster, broker_id, count):
    log = cluster.brokers[broker_id].store.topic(DLQ).log(0)
    wait_until(lambda: log.high_watermark >= count, f"{count} records in {DLQ}-0 on "
                                                    f"broker {broker_id}")
    return [(r.key, r.value, r.headers) for r in log.records(0, max_offset=log.end_offset)]


def test_dlq_auto_created_in_a_cluster(make_cluster):  # noqa: F811
    cluster = make_cluster(2, **{"errors.deadletterqueue.auto.create.topics.enable": "true",
                                 "default.replication.factor": 2})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("src", 1, 2)])["src"].result(30)
    _produce_source(cluster, 3)
    source_leader = cluster.wait_for_isr(TopicPartition("src", 0), 2)
    # Broker 0 creates dlq.g1 (one partition, RF 2, placed by the cluster); whichever
    # broker leads it, both brokers write to it.
    assert _enqueue(cluster, 0, 0, 0).written == 1
    dlq_leader = cluster.wait_for_isr(DLQ_TP, 2)
    assert _enqueue(cluster, 1, 1, 1).written == 1
    # The source record is copied by the broker that leads src-0 (it reads it there).
    expected = [(b"k%d" % o if source_leader == b else None,
                 b"v%d" % o if source_leader == b else None,
                 dlq_headers("src", 0, o, GROUP, 1, CLIENT_REJECT))
                for o, b in ((0, 0), (1, 1))]
    for broker_id in (dlq_leader, 1 - dlq_leader):  # on the leader, replicated
        assert _dlq_records(cluster, broker_id, 2) == expected


def test_dlq_partition_led_by_another_broker(make_cluster):  # noqa: F811
    cluster = make_cluster(2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # src-0 led by broker 0 (the share partition's broker), dlq.g1-0 by broker 1 alone; a
    # small max.message.bytes (the cluster's config of dlq.g1, from ZooKeeper) makes the
    # writer send several batches.
    futures = admin.create_topics([
        NewTopic("src", num_partitions=1, replica_assignment=[[0]]),
        NewTopic(DLQ, num_partitions=1, replica_assignment=[[1]],
                 config={"errors.deadletterqueue.group.enable": "true",
                         "max.message.bytes": "600"})])
    for future in futures.values():
        future.result(30)
    _produce_source(cluster, 5)
    wait_until(lambda: cluster.leader_of(DLQ_TP) == 1, "broker 1 leading dlq.g1-0")
    assert DLQ_TP not in cluster.rm(0).partitions  # no replica on broker 0
    result = _enqueue(cluster, 0, 0, 4, cause=DELIVERY_COUNT_EXCEEDED)
    assert (result.written, result.already_written, result.copied) == (5, 0, 5)
    expected = [(b"k%d" % o, b"v%d" % o,
                 dlq_headers("src", 0, o, GROUP, 1, DELIVERY_COUNT_EXCEEDED))
                for o in range(5)]
    assert _dlq_records(cluster, 1, 5) == expected
    log = cluster.brokers[1].store.topic(DLQ).log(0)
    batches = list(log.backend.iter_batches(log.read(0, 1 << 20).buffer))
    assert len(batches) > 1 and all(b.size_bytes <= 600 for b in batches)
    # The same range again (a broker restarted before the ARCHIVED state was written): a
    # new manager finds the exactly-once record in the data directory, reads dlq.g1-0 at
    # broker 1 (Fetch) and writes nothing twice.
    again = _enqueue(cluster, 0, 0, 4, cause=DELIVERY_COUNT_EXCEEDED)
    assert (again.written, again.already_written) == (0, 5)
    assert _dlq_records(cluster, 1, 5) == expected


def test_topic_config_overrides_are_the_clusters(make_cluster):  # noqa: F811
    # The seam reads a topic's overrides from ZooKeeper (what the DLQ writer falls back to
    # for a topic its Store does not hold yet): every broker sees the same.
    cluster = make_cluster(2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(DLQ, num_partitions=1, replica_assignment=[[1]], config={
        "errors.deadletterqueue.group.enable": "true",
        "max.message.bytes": "600"})])[DLQ].result(30)

    def overrides(broker_id, name):
        return asyncio.run_coroutine_threadsafe(
            cluster.rm(broker_id).topic_config_overrides(name),
            cluster.brokers[broker_id].loop).result(30)
    for broker_id in (0, 1):
        assert overrides(broker_id, DLQ) == {"errors.deadletterqueue.group.enable": "true",
                                             "max.message.bytes": "600"}
        assert overrides(broker_id, "nothing") == {}


def test_dlq_topic_not_enabled_refused_from_another_broker(make_cluster):  # noqa: F811
    cluster = make_cluster(2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic("src", num_partitions=1, replica_assignment=[[0]]),
                                   NewTopic(DLQ, num_partitions=1, replica_assignment=[[1]])])
    for future in futures.values():
        future.result(30)
    wait_until(lambda: cluster.leader_of(DLQ_TP) == 1, "broker 1 leading dlq.g1-0")
    with pytest.raises(errors.InvalidConfigError,
                       match="DLQ is not enabled on configured DLQ topic for share group: g1, "
                             "topic: dlq.g1."):
        _enqueue(cluster, 0, 0, 0)


def _write_while_the_leader_moves(cluster, move, prepare=lambda: None):
    """4000 DLQ records, one Produce each, written by broker 0 to dlq.g1-0 (replicas 1
    and 2, led by 1); ``move()`` once 10 of them are on broker 2. Every offset must be in
    the partition once, in order, with Kafka's headers, at broker 2 (the new leader)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # One DLQ record per batch (headers only, max.message.bytes 300): one Produce each.
    futures = admin.create_topics([
        NewTopic("src", num_partitions=1, replica_assignment=[[0]]),
        NewTopic(DLQ, num_partitions=1, replica_assignment=[[1, 2]],
                 config={"errors.deadletterqueue.group.enable": "true",
                         "max.message.bytes": "300"})])
    for future in futures.values():
        future.result(30)
    assert cluster.wait_for_isr(DLQ_TP, 2) == 1
    prepare()
    count = 4000
    manager = _manager(cluster, 0, copy=False)
    running = _start(cluster, 0, manager, 0, count - 1)
    log2 = cluster.brokers[2].store.topic(DLQ).log(0)
    wait_until(lambda: log2.end_offset >= 10, "10 DLQ records replicated to broker 2")
    assert not running.done()
    move()  # in the middle of the range
    assert log2.end_offset < count
    result = running.result(90)
    wait_until(lambda: cluster.leader_of(DLQ_TP) == 2, "broker 2 leading dlq.g1-0")
    records = _dlq_records(cluster, 2, count)
    assert records == [(None, None, dlq_headers("src", 0, o, GROUP, 1, CLIENT_REJECT))
                       for o in range(count)]
    assert result.written <= count
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline and log2.end_offset == count:
        time.sleep(0.1)  # nothing arrives later either
    assert log2.end_offset == count


def test_dlq_leader_stopped_in_the_middle(make_cluster):  # noqa: F811
    # The writer's connection to broker 1 breaks (no answer): it waits Kafka's backoff,
    # finds broker 2 leading, reads dlq.g1-0 there and sends what is not there yet.
    cluster = make_cluster(3)
    _write_while_the_leader_moves(cluster, lambda: cluster.stop(1))


def test_dlq_leader_moved_in_the_middle(make_cluster):  # noqa: F811
    # Broker 1 stays up and answers NOT_LEADER_OR_FOLLOWER once broker 2 is elected
    # (a reassignment to [2, 1] and a preferred election through the controller).
    cluster = make_cluster(3)

    controller = cluster.rm(0).controller_id
    rm = cluster.rm(controller)

    def on_controller(coroutine):
        return asyncio.run_coroutine_threadsafe(
            coroutine, cluster.brokers[controller].loop).result(30)

    def prepare():  # broker 2 becomes the preferred replica; broker 1 still leads
        answers = on_controller(rm.alter_partition_reassignments(
            [(DLQ_TP, (2, 1))], allow_replication_factor_change=False, timeout_s=10))
        assert answers == [(0, None)]
        wait_until(lambda: rm.assignments[DLQ].partitions[0] == [2, 1], "[2, 1]")
        assert cluster.leader_of(DLQ_TP) == 1

    def move():
        elected = on_controller(rm.elect_leaders(0, [DLQ_TP], timeout_s=10))
        assert elected[DLQ_TP][0] == 0
        assert 1 in cluster.brokers  # the old leader is up
    _write_while_the_leader_moves(cluster, move, prepare)


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="broker" password="broker-secret" user_broker="broker-secret";')


def test_dlq_produce_over_a_sasl_inter_broker_listener(make_cluster):  # noqa: F811
    # The inter-broker listener is SASL_PLAINTEXT with an authorizer: the writer's Produce
    # logs in as the broker's own user (a super user, as Kafka's inter-broker principal
    # usually is) and is authorized as it.
    cluster = make_cluster(2, **{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker"})
    client = {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "PLAIN", "sasl.username": "broker",
              "sasl.password": "broker-secret"}
    admin = AdminClient(client)
    futures = admin.create_topics([
        NewTopic("src", num_partitions=1, replica_assignment=[[0]]),
        NewTopic(DLQ, num_partitions=1, replica_assignment=[[1, 0]],
                 config={"errors.deadletterqueue.group.enable": "true"})])
    for future in futures.values():
        future.result(30)
    producer = Producer(client)
    producer.produce("src", key=b"k0", value=b"v0", partition=0)
    assert producer.flush(30) == 0
    assert cluster.wait_for_isr(DLQ_TP, 2) == 1
    assert _enqueue(cluster, 0, 0, 0).written == 1
    assert _dlq_records(cluster, 1, 1) == [
        (b"k0", b"v0", dlq_headers("src", 0, 0, GROUP, 1, CLIENT_REJECT))]
