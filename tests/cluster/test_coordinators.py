"""The group coordinator in a cluster (Kafka 2.8, research R§4): FindCoordinator answers the
leader of the group's ``__consumer_offsets`` partition, the other brokers answer
NOT_COORDINATOR, commits are replicated (acks=-1) and survive the coordinator's broker, which a
consumer group follows to the new leader (R§6.5 S16).

Kafka's tests these come from: ``GroupCoordinatorTest`` / ``GroupMetadataManagerTest``
(NOT_COORDINATOR for a group whose partition is not owned here), ``ConsumerBounceTest.testConsumptionWithBrokerFailures``
(S16's shape), ``KafkaApisTest.testFindCoordinatorNotEnoughBrokersForOffsetsTopic``
(COORDINATOR_NOT_AVAILABLE while the internal topic cannot be created), and
``ProducerIdManagerTest`` (unique blocks across brokers).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import socket
import struct
import time
import typing

import pytest

import kio.index as kio_index
from kio.serial import entity_reader, entity_writer

import seglog
from seglog.cluster import coordinators
from seglog.types import TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

CLUSTER_CONFIG = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "replica.high.watermark.checkpoint.interval.ms": 1000,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}
WAIT_S = 30.0
OFFSETS = TopicPartition("__consumer_offsets", 0)


def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    """Poll ``condition`` every 50 ms until truthy (returned) or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


class Cluster:
    """In-process brokers (ids 0..size-1) over the test's ZooKeeper chroot."""

    def __init__(self, tmp_path, zk_connect: str, size: int, **config):
        self.tmp_path = tmp_path
        self.zk_connect = zk_connect
        self.config = dict(CLUSTER_CONFIG, **config)
        self.brokers: dict[int, seglog.Broker] = {}
        for broker_id in range(size):
            broker = seglog.Broker(tmp_path / f"broker-{broker_id}", listen=("127.0.0.1", 0),
                                   config=dict(self.config, **{
                                       "broker.id": broker_id,
                                       "zookeeper.connect": zk_connect}))
            broker.start()
            self.brokers[broker_id] = broker
        # Every broker registered and seen by every other (placement needs them live).
        wait_until(lambda: all(len(self.rm(b).live_brokers) == size for b in self.brokers),
                   f"{size} live brokers")

    def stop(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).stop()

    def close(self) -> None:
        for broker_id in list(self.brokers):
            self.stop(broker_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def rm(self, broker_id: int):
        return self.brokers[broker_id].state.cluster

    def on_loop(self, broker_id: int, fn):
        async def run():
            return fn()
        return asyncio.run_coroutine_threadsafe(
            run(), self.brokers[broker_id].loop).result(10)

    def leader_of(self, tp: TopicPartition) -> int | None:
        for broker_id in self.brokers:
            replica = self.rm(broker_id).partitions.get(tp)
            if replica is not None and replica.is_leader:
                return broker_id
        return None

    def wait_for_isr(self, tp: TopicPartition, size: int) -> int:
        def ready():
            leader = self.leader_of(tp)
            if leader is None or len(self.rm(leader).partitions[tp].isr) != size:
                return None
            return (leader,)
        return wait_until(ready, f"{tp} to have a leader and an ISR of {size}")[0]

    def address(self, broker_id: int) -> tuple[str, int]:
        host, port = self.brokers[broker_id].bootstrap.rsplit(":", 1)
        return host, int(port)


@pytest.fixture
def make_cluster(tmp_path, zk_connect):
    made = []

    def make(size: int, **config) -> Cluster:
        cluster = Cluster(tmp_path, zk_connect, size, **config)
        made.append(cluster)
        return cluster
    yield make
    for cluster in made:
        cluster.close()


# --- a raw client for single requests -------------------------------------------------------


def call(address, api_key: int, version: int, timeout_s: float = 15.0, **fields):
    """Send one kio request (``fields``) and return kio's decoded response."""
    request = kio_index.load_request_schema(api_key, version)(**fields)
    header_class = type(request).__header_schema__
    names = {f.name for f in dataclasses.fields(header_class)}
    header = dict(request_api_key=api_key, request_api_version=version, correlation_id=7)
    if "client_id" in names:
        header["client_id"] = "coordinators-test"
    buffer = io.BytesIO()
    entity_writer(header_class)(buffer, header_class(**header))
    entity_writer(type(request))(buffer, request)
    data = buffer.getvalue()
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        body = _exactly(sock, size)
    response_class = kio_index.load_response_schema(api_key, version)
    _, offset = entity_reader(response_class.__header_schema__)(body, 0)
    value, _ = entity_reader(response_class)(body, offset)
    return value


def _exactly(sock, count):
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        out += chunk
    return out


def _nested(api_key, version, *path):
    cls = kio_index.load_request_schema(api_key, version)
    for name in path:
        cls = typing.get_args(typing.get_type_hints(cls)[name])[0]
    return cls


def find_coordinator(address, group_id: str):
    """FindCoordinator v3 for a group: ``(error code, node id)``."""
    response = call(address, 10, 3, key=group_id, key_type=0)
    return int(response.error_code), int(response.node_id)


def offset_commit(address, group_id: str, topic: str, offset: int) -> int:
    """OffsetCommit v2 from outside the group (generation -1) of partition 0: its error."""
    partition = _nested(8, 2, "topics", "partitions")(
        partition_index=0, committed_offset=offset, committed_metadata="")
    topic_entry = _nested(8, 2, "topics")(name=topic, partitions=(partition,))
    response = call(address, 8, 2, group_id=group_id, generation_id_or_member_epoch=-1,
                    member_id="", retention_time=datetime.timedelta(milliseconds=-1),
                    topics=(topic_entry,))
    return int(response.topics[0].partitions[0].error_code)


def heartbeat(address, group_id: str) -> int:
    response = call(address, 12, 1, group_id=group_id, generation_id=1, member_id="m")
    return int(response.error_code)


# --- tests -----------------------------------------------------------------------------------


def test_coordinator_partition_is_kafkas_hash():
    """``Utils.abs(groupId.hashCode) % n`` (GroupMetadataManager.partitionFor): values a
    Kafka broker gives (Java's String.hashCode)."""
    # "group".hashCode() == 98629247; "".hashCode() == 0; "polygenelubricants" hashes to
    # Integer.MIN_VALUE, which Utils.abs maps to 0.
    assert coordinators.coordinator_partition("group", 50) == 98629247 % 50
    assert coordinators.coordinator_partition("", 50) == 0
    assert coordinators.coordinator_partition("polygenelubricants", 50) == 0


def test_find_coordinator_not_available_without_enough_brokers(make_cluster, zk_client):
    """Kafka 2.8: the offsets topic needs offsets.topic.replication.factor live brokers;
    until then nothing is created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE."""
    cluster = make_cluster(1, **{"offsets.topic.replication.factor": 3})
    address = cluster.address(0)
    assert find_coordinator(address, "g") == (15, -1)
    assert find_coordinator(address, "g") == (15, -1)
    assert zk_client.topic_assignment("__consumer_offsets") is None
    # A group of this broker's is not coordinated anywhere yet.
    assert heartbeat(address, "g") == 16


@pytest.mark.slow
def test_group_follows_the_offsets_leader(make_cluster, zk_client):
    """R§6.5 S16: a consumer group commits on an RF-3 cluster; the broker leading
    ``__consumer_offsets-0`` stops; FindCoordinator names the new leader, the committed
    offsets survive, and the group resumes from them (duplicates allowed, no gaps)."""
    cluster = make_cluster(3, **{"offsets.topic.replication.factor": 3,
                                 "default.replication.factor": 3})
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([confluent_kafka.admin.NewTopic("t", 1, 3)])
    futures["t"].result(20)
    cluster.wait_for_isr(TopicPartition("t", 0), 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": True})
    for i in range(200):
        producer.produce("t", value=str(i).encode())
    assert producer.flush(20) == 0

    consumer_config = {"bootstrap.servers": cluster.bootstrap, "group.id": "g",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False,
                       "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                       "topic.metadata.refresh.interval.ms": 1000}
    seen: list[int] = []

    def consume(consumer, count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        target = len(seen) + count
        while len(seen) < target:
            assert time.monotonic() < deadline, f"consumed {len(seen)} of {target}"
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            seen.append(int(message.value()))

    consumer = confluent_kafka.Consumer(consumer_config)
    try:
        consumer.subscribe(["t"])
        consume(consumer, 80)
        consumer.commit(asynchronous=False)
        committed_before = consumer.committed([confluent_kafka.TopicPartition("t", 0)], 10)
        first_commit = committed_before[0].offset
        assert first_commit == seen[-1] + 1

        coordinator = cluster.wait_for_isr(OFFSETS, 3)
        others = [b for b in cluster.brokers if b != coordinator]
        # Only the offsets leader coordinates: FindCoordinator from any broker names it, the
        # others answer NOT_COORDINATOR.
        for broker_id in cluster.brokers:
            assert find_coordinator(cluster.address(broker_id), "g") == (0, coordinator)
        assert offset_commit(cluster.address(others[0]), "g", "t", 1) == 16
        # The commit is replicated: every follower's log holds it below its high watermark.
        for broker_id in others:
            log_ = cluster.rm(broker_id).partitions[OFFSETS].log
            wait_until(lambda: cluster.on_loop(
                broker_id, lambda: log_.high_watermark >= log_.end_offset > 0),
                f"broker {broker_id}'s __consumer_offsets-0 to be replicated")

        cluster.stop(coordinator)
        new_coordinator = wait_until(lambda: _some(cluster.leader_of(OFFSETS)),
                                     "a new __consumer_offsets-0 leader")[0]
        assert new_coordinator != coordinator
        wait_until(lambda: find_coordinator(cluster.address(new_coordinator), "g")
                   == (0, new_coordinator), "FindCoordinator to name the new leader")
        # The same consumer carries on with the new coordinator and commits there.
        consume(consumer, 60)
        wait_until(lambda: _commit_ok(consumer), "a commit on the new coordinator")
        second_commit = seen[-1] + 1
    finally:
        consumer.close()

    # A new member resumes from the last commit: no gap, and the commit survived.
    consumer = confluent_kafka.Consumer(consumer_config)
    try:
        committed = consumer.committed([confluent_kafka.TopicPartition("t", 0)], 10)
        assert committed[0].offset == second_commit
        consumer.subscribe(["t"])
        resumed: list[int] = []
        deadline = time.monotonic() + WAIT_S
        while not resumed or resumed[-1] < 199:
            assert time.monotonic() < deadline, f"resumed {resumed[:3]}..."
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                resumed.append(int(message.value()))
        assert resumed[0] <= second_commit  # duplicates allowed, never a gap
        assert resumed == list(range(resumed[0], 200))
    finally:
        consumer.close()
    assert sorted(set(seen)) == list(range(len(set(seen))))


def _some(value):
    """``(value,)`` unless None (broker 0 is falsy for ``wait_until``)."""
    return None if value is None else (value,)


def _commit_ok(consumer) -> bool:
    try:
        consumer.commit(asynchronous=False)
        return True
    except confluent_kafka.KafkaException:
        return False


def test_producer_ids_unique_across_brokers(make_cluster, zk_client):
    """Producer ids come from ZooKeeper's /latest_producer_id_block: three brokers handing
    out ids never hand out the same one (ProducerIdManagerTest's two managers)."""
    cluster = make_cluster(3)
    ids = []
    for _round in range(3):
        for broker in cluster.brokers.values():
            ids.append(broker.state.store.init_producer_id()[0])
    assert len(set(ids)) == len(ids)
    block = zk_client.get_data_and_version("/latest_producer_id_block")[0]
    assert block is not None
