"""The share-group DLQ writer (:mod:`seglog.server.share_dlq`) in a two-broker ZooKeeper
cluster: the DLQ topic is created through ZooKeeper with the cluster's defaults; the broker
leading the DLQ partition writes the records (acks=-1, replicated to both brokers); the other
refuses by name (writing to a DLQ partition another broker leads is not built)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from seglog import errors
from seglog.server.share_dlq import CLIENT_REJECT, ShareDlqManager, dlq_headers
from seglog.types import TopicPartition

from test_coordinators import make_cluster, wait_until  # noqa: F401

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

GROUP = "g1"


def _groups(group_id, name):
    return {"errors.deadletterqueue.topic.name": "dlq.g1",
            "errors.deadletterqueue.copy.record.enable": "true"}.get(name) \
        if group_id == GROUP else None


def _enqueue(cluster, broker_id, first, last):
    broker = cluster.brokers[broker_id]
    manager = ShareDlqManager(broker.state, group_config=_groups)
    return asyncio.run_coroutine_threadsafe(manager.enqueue(
        GROUP, TopicPartition("src", 0), uuid.uuid4(), first, last, 1, CLIENT_REJECT),
        broker.loop).result(30)


def test_dlq_in_a_cluster(make_cluster):  # noqa: F811
    cluster = make_cluster(2, **{"errors.deadletterqueue.auto.create.topics.enable": "true",
                                 "default.replication.factor": 2})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("src", 1, 2)])["src"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(3):
        producer.produce("src", key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    source_leader = cluster.wait_for_isr(TopicPartition("src", 0), 2)
    # Broker 0 creates dlq.g1 (one partition, RF 2, placed by the cluster): it writes when it
    # leads the DLQ partition, else refuses by name.
    try:
        first = _enqueue(cluster, 0, 0, 0)
    except errors.SeglogError as exc:
        assert "which this broker does not lead, is not built" in str(exc)
        first = None
    dlq_tp = TopicPartition("dlq.g1", 0)
    dlq_leader = cluster.wait_for_isr(dlq_tp, 2)
    assert (first is not None) == (dlq_leader == 0)
    follower = 1 - dlq_leader
    with pytest.raises(errors.SeglogError, match="which this broker does not lead, is not "
                                                 "built"):
        _enqueue(cluster, follower, 1, 1)
    assert _enqueue(cluster, dlq_leader, 2, 2).written == 1
    written = ([0] if first is not None else []) + [2]
    # The source record is copied when the writer also leads src-0 (it reads it there).
    copied = dlq_leader == source_leader
    expected = [(b"k%d" % o if copied else None, b"v%d" % o if copied else None,
                 dlq_headers("src", 0, o, GROUP, 1, CLIENT_REJECT)) for o in written]
    for broker_id in (dlq_leader, follower):  # on the leader, replicated to the follower
        log = cluster.brokers[broker_id].store.topic("dlq.g1").log(0)
        wait_until(lambda: log.end_offset == len(written), f"dlq.g1-0 on broker {broker_id}")
        records = list(log.records(0, len(written), max_offset=log.end_offset))
        assert [(r.key, r.value, r.headers) for r in records] == expected
