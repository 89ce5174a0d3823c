"""ShareFetch in a 3-broker ZooKeeper cluster: only a partition's leader serves it (a
follower answers NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint, as
Kafka's ``processShareFetchResponse``), and a share group goes on when the leader stops: the
new leader reads the share-partition state through the share coordinator, so the records
already acknowledged are not delivered again and the new ones are."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest

from seglog import error_codes as codes
from seglog.types import TopicPartition
from test_coordinators import WAIT_S, _some, call, make_cluster, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

__all__ = ["make_cluster"]  # the fixture, imported for this module's tests

TOPIC = "t"
TP = TopicPartition(TOPIC, 0)
SHARE_CONFIG = {"share.coordinator.state.topic.num.partitions": 1,
                "share.coordinator.state.topic.replication.factor": 3,
                "share.coordinator.state.topic.min.isr": 2,
                "offsets.topic.replication.factor": 3,
                "default.replication.factor": 3}


def _setup(make_cluster):
    cluster = make_cluster(3, **SHARE_CONFIG)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, 1, 3)])[TOPIC].result(20)
    topic_id = wait_until(lambda: _some(cluster.rm(0).assignments.get(TOPIC) and
                                        cluster.rm(0).assignments[TOPIC].topic_id),
                          "the topic id")[0]
    leader = cluster.wait_for_isr(TP, 3)
    return cluster, topic_id, leader


@pytest.mark.slow
def test_a_follower_answers_not_leader_with_the_current_leader(make_cluster):
    cluster, topic_id, leader = _setup(make_cluster)
    follower = next(b for b in cluster.brokers if b != leader)
    epoch = cluster.rm(leader).partitions[TP].leader_epoch
    # The follower names the leader from its metadata cache (the controller's UpdateMetadata),
    # which can reach it after it has fetched as a follower (LeaderAndIsr) and joined the ISR;
    # until then it answers -1 / -1, as Kafka's metadata cache does.
    def follower_names_the_leader() -> bool:
        state = cluster.rm(follower).states.get(TP)
        return state is not None and (state.leader, state.leader_epoch) == (leader, epoch)

    wait_until(follower_names_the_leader, "the follower's metadata to name the leader")
    fields = dict(group_id="g", member_id=str(uuid.uuid4()), share_session_epoch=0,
                  max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                  max_records=10, batch_size=10, forgotten_topics_data=())
    from test_coordinators import kio_index
    import sys
    m = sys.modules[kio_index.load_request_schema(78, 1).__module__]
    r = call(cluster.address(follower), 78, 1, topics=(m.FetchTopic(
        topic_id=topic_id, partitions=(m.FetchPartition(partition_index=0,
                                                        acknowledgement_batches=()),)),),
             **fields)
    assert int(r.error_code) == 0
    [topic] = r.responses
    [partition] = topic.partitions
    assert int(partition.error_code) == codes.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
        leader, epoch)
    host, port = cluster.address(leader)
    assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(leader, host, port)]


def _poll_until(consumer, count: int, timeout_s: float = WAIT_S) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.poll(0.2):
            assert message.error() is None, message.error()
            got.append((message.offset(), message.value()))
    return got


@pytest.mark.slow
def test_a_share_group_goes_on_when_the_leader_stops(make_cluster):
    cluster, _topic_id, leader = _setup(make_cluster)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = confluent_kafka.admin.ConfigResource(
        confluent_kafka.admin.ResourceType.GROUP, "g", incremental_configs=[
            confluent_kafka.admin.ConfigEntry(
                "share.auto.offset.reset", "earliest",
                incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(TOPIC, value=b"a%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap,
                                              "group.id": "g"})
    consumer.subscribe([TOPIC])
    try:
        first = _poll_until(consumer, 10)
        assert sorted(offset for offset, _ in first) == list(range(10))
        consumer.commit_sync()  # implicit mode: the ten are accepted
        # Wait for the state write to reach the replicas, then stop the leader.
        cluster.wait_for_isr(TP, 3)
        cluster.stop(leader)
        wait_until(lambda: cluster.leader_of(TP) is not None, "a new leader")
        for i in range(10):
            producer.produce(TOPIC, value=b"b%d" % i, partition=0)
        assert producer.flush(30) == 0
        second = _poll_until(consumer, 10, 60)
        for _ in range(10):
            second += _poll_until(consumer, 1, 0.2)
        assert sorted(value for _, value in second) == sorted(b"b%d" % i for i in range(10))
    finally:
        consumer.close()
