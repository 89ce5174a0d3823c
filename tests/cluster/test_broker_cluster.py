"""Three in-process brokers in cluster mode (``zookeeper.connect``) over the session's real
ZooKeeper: a replicated topic end to end with real clients (confluent-kafka, kafka-python).

Kafka's tests these come from: ``ReplicationTest`` / ``LogRecoveryTest`` (replicas end equal,
the high watermark), ``MinIsrConfigTest`` and ``ProduceRequestTest``'s NOT_ENOUGH_REPLICAS,
``UncleanLeaderElectionTest.verifyUncleanLeaderElectionDisabled``'s clean failover half (the
new leader comes from the ISR and the client follows it).
"""

from __future__ import annotations

import os
import struct
import time
import uuid

import pytest

import seglog
from seglog import format as fmt
from seglog.cluster.test_breaks import NO_TEST_BREAKS
from seglog.types import TopicPartition

#: Short timeouts for the tests (docs/cluster.md; ZooKeeper's tickTime is 500 ms).
CLUSTER_CONFIG = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "replica.high.watermark.checkpoint.interval.ms": 1000,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}
WAIT_S = 20.0


def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    """Poll ``condition`` every 50 ms until it is truthy (returned) or ``timeout_s`` passes
    (a failure naming ``what``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


class Cluster:
    """Three brokers (ids 0, 1, 2), each with its own data dir, on 127.0.0.1 free ports."""

    def __init__(self, tmp_path, zk_connect: str, size: int = 3, backend=None,
                 test_breaks=NO_TEST_BREAKS, **config):
        self.tmp_path = tmp_path
        self.zk_connect = zk_connect
        self.backend = backend
        self.test_breaks = test_breaks
        self.config = dict(CLUSTER_CONFIG, **config)
        self.brokers: dict[int, seglog.Broker] = {}
        for broker_id in range(size):
            self.start(broker_id)

    def start(self, broker_id: int, zk_connect: str | None = None) -> seglog.Broker:
        """Start broker ``broker_id`` (``zk_connect``: its own ZooKeeper address, e.g. a
        relay's; default the cluster's)."""
        broker = seglog.Broker(self.tmp_path / f"broker-{broker_id}", listen=("127.0.0.1", 0),
                               config=dict(self.config, **{
                                   "broker.id": broker_id,
                                   "zookeeper.connect": zk_connect or self.zk_connect}),
                               backend=self.backend, test_breaks=self.test_breaks)
        broker.start()
        self.brokers[broker_id] = broker
        return broker

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

    def call(self, broker_id: int, fn):
        """Run ``fn()`` on broker ``broker_id``'s event loop (its replica state lives there)."""
        import asyncio

        async def run():
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.brokers[broker_id].loop).result(10)

    def leader_of_among(self, tp: TopicPartition, broker_ids) -> int | None:
        """The broker of ``broker_ids`` that leads ``tp`` now, or None."""
        for broker_id in broker_ids:
            replica = self.rm(broker_id).partitions.get(tp)
            if replica is not None and replica.is_leader:
                return broker_id
        return None

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The broker that leads ``tp`` now (its replica manager says so), or None."""
        for broker_id in self.brokers:
            replica = self.rm(broker_id).partitions.get(tp)
            if replica is not None and replica.is_leader:
                return broker_id
        return None

    def wait_for_isr(self, tp: TopicPartition, size: int) -> int:
        """Wait until ``tp`` has a leader here whose committed ISR has ``size`` members;
        returns the leader's id."""
        def ready():
            leader = self.leader_of(tp)
            if leader is None:
                return None
            replica = self.rm(leader).partitions[tp]
            return (leader,) if len(replica.isr) == size else None  # broker 0 is falsy
        return wait_until(ready, f"{tp} to have a leader and an ISR of {size}")[0]

    def wait_replicas_caught_up(self, tp: TopicPartition) -> None:
        """Wait until every running broker's replica of ``tp`` has the leader's end offset
        and high watermark."""
        def same():
            leader = self.leader_of(tp)
            if leader is None:
                return False
            logs = [b.store.topic(tp.topic).log(tp.partition) for b in self.brokers.values()]
            ends = {log.end_offset for log in logs}
            hws = {log.high_watermark for log in logs}
            return len(ends) == 1 and hws == ends
        wait_until(same, f"every replica of {tp} to reach the leader's end and HW")


@pytest.fixture
def make_cluster(tmp_path, zk_connect):
    """``make_cluster(**config)``: three running brokers that see each other (stopped after
    the test)."""
    made = []

    def make(backend=None, **config) -> Cluster:
        c = Cluster(tmp_path, zk_connect, backend=backend, **config)
        made.append(c)
        wait_until(lambda: all(len(c.rm(b).live_brokers) == 3 for b in c.brokers),
                   "every broker to see three live brokers")
        return c
    try:
        yield make
    finally:
        for c in made:
            c.close()


@pytest.fixture
def cluster(make_cluster):
    return make_cluster()


def create_topic(cluster: Cluster, name: str, partitions: int = 1, replication_factor: int = 3,
                 config: dict | None = None) -> None:
    """CreateTopics through confluent-kafka's admin client (the real client's request)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor,
                                            config=config or {})], request_timeout=15)
    futures[name].result(timeout=20)


def batches_of(log) -> list[tuple[int, int, int, int]]:
    """``[(base offset, last offset, crc, partition leader epoch), ...]`` of every batch of a
    running Log, read to its end offset as a follower reads."""
    out = []
    offset = log.start_offset
    end = log.end_offset
    while offset < end:
        result = log.read(offset, max_bytes=1 << 20, max_offset=end)
        data = bytes(result.buffer)
        if not data:
            break
        position = 0
        while position + fmt.RECORD_BATCH_OVERHEAD <= len(data):
            base, length = struct.unpack_from(">qi", data, position)
            epoch = struct.unpack_from(">i", data, position + fmt.PARTITION_LEADER_EPOCH_POSITION)[0]
            crc = struct.unpack_from(">I", data, position + fmt.CRC_POSITION)[0]
            delta = struct.unpack_from(">i", data, position + fmt.LAST_OFFSET_DELTA_POSITION)[0]
            out.append((base, base + delta, crc, epoch))
            position += fmt.LOG_OVERHEAD + length
            offset = base + delta + 1
    return out


def produce_confluent(bootstrap: str, topic: str, values: list[bytes], **extra) -> list:
    """Send ``values`` with confluent-kafka, acks=all; the delivery errors (None: delivered)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 20000, **extra})
    outcomes: list = []
    for value in values:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda err, msg: outcomes.append(err))
        producer.poll(0)
    left = producer.flush(30)
    assert left == 0, f"{left} messages not delivered"
    return outcomes


def consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = WAIT_S) -> list:
    """Every value of partition 0 from the start, with confluent-kafka (assigned, no group)."""
    from confluent_kafka import Consumer, TopicPartition as CTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([CTP(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_rf3_acks_all_replicas_identical(make_cluster, backend):
    """An RF-3 topic written acks=all by confluent-kafka and kafka-python: every replica's
    log ends with the same batches (base offset, last offset, CRC) and the leader's epoch
    stamped in each; Metadata shows the leader, replicas and ISR; the ISR stays whole.
    Both storage backends."""
    cluster = make_cluster(backend=backend)
    create_topic(cluster, "rf3")
    tp = TopicPartition("rf3", 0)
    leader = cluster.wait_for_isr(tp, 3)
    outcomes = produce_confluent(cluster.bootstrap, "rf3", [b"c%d" % i for i in range(200)])
    assert outcomes == [None] * 200

    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        futures = [producer.send("rf3", b"k%d" % i, partition=0) for i in range(50)]
        producer.flush(30)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(10)
    assert offsets == sorted(offsets) and len(set(offsets)) == 50

    cluster.wait_replicas_caught_up(tp)
    epoch = cluster.rm(leader).partitions[tp].leader_epoch
    lists = {b: batches_of(broker.store.topic("rf3").log(0))
             for b, broker in cluster.brokers.items()}
    reference = lists[leader]
    assert reference and reference[-1][1] == 249
    assert {e for *_rest, e in reference} == {epoch}
    for broker_id, batches in lists.items():
        assert batches == reference, f"broker {broker_id}'s log differs from the leader's"
    assert len(cluster.rm(leader).partitions[tp].isr) == 3

    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("rf3",
                                                                               timeout=10)
    partition = metadata.topics["rf3"].partitions[0]
    assert partition.leader == leader
    assert sorted(partition.replicas) == [0, 1, 2] and sorted(partition.isrs) == [0, 1, 2]
    assert sorted(metadata.brokers) == [0, 1, 2]
    assert consume_all(cluster.bootstrap, "rf3", 250)[-1] == b"k49"

    # Every replica checkpoints its high watermark (replica.high.watermark.checkpoint
    # .interval.ms, 1 s here) without a flush.
    from seglog.storage.checkpoints import OffsetCheckpointFile

    def checkpointed() -> bool:
        return all(OffsetCheckpointFile(os.path.join(b.store.path,
                                                     "replication-offset-checkpoint"))
                   .read().get(("rf3", 0)) == 250 for b in cluster.brokers.values())
    wait_until(checkpointed, "every replica's replication-offset-checkpoint to hold HW 250")


def test_high_watermark_hides_what_followers_do_not_have(make_cluster):
    """Records the followers have not fetched stay above the leader's high watermark:
    consumers do not see them and ListOffsets latest stops below them; once the followers
    fetch again the high watermark passes them and they are readable. (A long
    replica.lag.time.max.ms keeps the idle followers in the ISR meanwhile.)"""
    cluster = make_cluster(**{"replica.lag.time.max.ms": 60000})
    create_topic(cluster, "hw")
    tp = TopicPartition("hw", 0)
    leader = cluster.wait_for_isr(tp, 3)
    assert produce_confluent(cluster.bootstrap, "hw", [b"a", b"b"]) == [None, None]
    cluster.wait_replicas_caught_up(tp)
    followers = [b for b in cluster.brokers if b != leader]
    targets = {}
    for b in followers:
        rm = cluster.rm(b)
        targets[b] = rm.fetcher.fetch_state(tp)
        cluster.call(b, lambda rm=rm: rm.fetcher.remove_partitions([tp]))
    assert produce_confluent(cluster.bootstrap, "hw", [b"c"], acks="1") == [None]
    log = cluster.brokers[leader].store.topic("hw").log(0)
    assert log.end_offset == 3 and log.high_watermark == 2
    assert consume_all(cluster.bootstrap, "hw", 3, timeout_s=2.0) == [b"a", b"b"]
    from confluent_kafka import Consumer, TopicPartition as CTP

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "hw-g"})
    try:
        low, high = consumer.get_watermark_offsets(CTP("hw", 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, 2)

    from seglog.cluster.fetcher import FetchTarget

    for b in followers:
        rm = cluster.rm(b)
        replica = rm.partitions[tp]
        cluster.call(b, lambda rm=rm, replica=replica: rm.fetcher.add_partitions({
            tp: FetchTarget(leader_id=leader, leader_epoch=replica.leader_epoch,
                            log=replica.log, topic_id=replica.topic_id)}))
    wait_until(lambda: log.high_watermark == 3, "the high watermark to pass the record")
    assert consume_all(cluster.bootstrap, "hw", 3) == [b"a", b"b", b"c"]


def _produce_kafka_python(bootstrap: str, topic: str, value: bytes):
    """One acks=all send without retries; the exception it failed with, or None."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0,
                             request_timeout_ms=10000)
    try:
        future = producer.send(topic, value, partition=0)
        producer.flush(20)
        try:
            future.get(timeout=20)
            return None
        except Exception as exc:  # noqa: BLE001 - the error is the result
            return exc
    finally:
        producer.close(10)


def test_min_isr_2_one_broker_down_writes_continue_two_down_not_enough_replicas(cluster):
    """min.insync.replicas=2, RF 3: with one follower stopped the ISR shrinks and acks=all
    writes carry on; with both followers stopped the leader answers NOT_ENOUGH_REPLICAS (19)
    and writes nothing; a follower restarted catches up, rejoins the ISR (the leader's
    expansion) and writes resume."""
    create_topic(cluster, "minisr", config={"min.insync.replicas": "2"})
    tp = TopicPartition("minisr", 0)
    leader = cluster.wait_for_isr(tp, 3)
    followers = [b for b in sorted(cluster.brokers) if b != leader]
    assert produce_confluent(cluster.bootstrap, "minisr", [b"1"]) == [None]
    cluster.stop(followers[0])
    leader = cluster.wait_for_isr(tp, 2)
    assert _produce_kafka_python(cluster.bootstrap, "minisr", b"2") is None
    cluster.stop(followers[1])
    leader = cluster.wait_for_isr(tp, 1)
    log = cluster.brokers[leader].store.topic("minisr").log(0)
    end_before = log.end_offset
    error = _produce_kafka_python(cluster.bootstrap, "minisr", b"3")
    from kafka.errors import NotEnoughReplicasError

    assert isinstance(error, NotEnoughReplicasError), repr(error)
    assert log.end_offset == end_before  # nothing written

    # A follower returns: it catches up, the leader adds it to the ISR, writes resume.
    cluster.start(followers[0])
    assert cluster.wait_for_isr(tp, 2) == leader
    assert _produce_kafka_python(cluster.bootstrap, "minisr", b"4") is None
    cluster.wait_replicas_caught_up(tp)
    assert batches_of(cluster.brokers[followers[0]].store.topic("minisr").log(0)) \
        == batches_of(log)


def test_leader_stop_elects_a_new_leader_and_the_client_follows(cluster):
    """The leader stops: the controller elects the first live ISR replica, the producer
    (confluent-kafka, retrying) follows the new leader, and every acknowledged record is
    on it and readable."""
    create_topic(cluster, "failover", config={"min.insync.replicas": "2"})
    tp = TopicPartition("failover", 0)
    old_leader = cluster.wait_for_isr(tp, 3)
    first = [b"before-%d" % i for i in range(20)]
    assert produce_confluent(cluster.bootstrap, "failover", first) == [None] * 20
    cluster.wait_replicas_caught_up(tp)
    old_epoch = cluster.rm(old_leader).partitions[tp].leader_epoch
    cluster.stop(old_leader)
    new_leader = cluster.wait_for_isr(tp, 2)
    assert new_leader != old_leader
    assert cluster.rm(new_leader).partitions[tp].leader_epoch > old_epoch
    second = [b"after-%d" % i for i in range(20)]
    assert produce_confluent(cluster.bootstrap, "failover", second) == [None] * 20
    assert consume_all(cluster.bootstrap, "failover", 40) == first + second


def test_create_partitions_and_delete_topic_through_the_controller(cluster):
    """CreatePartitions writes the grown assignment (Kafka's placement) and answers once the
    new partition has a leader, which every broker then hosts; DescribeCluster lists the
    three brokers and the controller; DeleteTopics asks the controller and answers once the
    topic is gone from every broker's metadata and Store."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    create_topic(cluster, "grow", partitions=1, replication_factor=2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions("grow", 3)], request_timeout=15)["grow"].result(20)
    for p in range(3):
        cluster.wait_for_isr(TopicPartition("grow", p), 2)
    for broker_id in cluster.brokers:
        assert len(cluster.rm(broker_id).assignments["grow"].partitions) == 3
    replicas = {p: tuple(r) for p, r in cluster.rm(0).assignments["grow"].partitions.items()}
    assert all(len(set(r)) == 2 for r in replicas.values())

    described = admin.describe_cluster(request_timeout=10).result(20)
    assert sorted(node.id for node in described.nodes) == [0, 1, 2]
    assert described.controller.id == cluster.rm(0).controller_id

    admin.delete_topics(["grow"], request_timeout=15)["grow"].result(20)
    wait_until(lambda: all("grow" not in b.store.topics() for b in cluster.brokers.values()),
               "every broker to drop the deleted topic")
    assert all("grow" not in cluster.rm(b).assignments for b in cluster.brokers)


def test_create_topic_refuses_a_replication_factor_above_the_live_brokers(cluster):
    """Kafka 2.8's AdminUtils: INVALID_REPLICATION_FACTOR (38), "Replication factor: 4
    larger than available brokers: 3.", and nothing is written."""
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as failure:
        create_topic(cluster, "too-wide", replication_factor=4)
    error = failure.value.args[0]
    assert error.code() == 38, error
    assert "larger than available brokers: 3" in error.str()
    assert "too-wide" not in cluster.rm(0).assignments


def test_a_data_dir_of_another_cluster_fails_the_start(tmp_path, zk_connect, zookeeper):
    """The cluster id comes from ZooKeeper; a data dir whose meta.properties names another
    cluster refuses to join (Kafka's InconsistentClusterIdException)."""
    config = dict(CLUSTER_CONFIG, **{"broker.id": 0, "zookeeper.connect": zk_connect})
    seglog.Broker(tmp_path / "b0", listen=("127.0.0.1", 0), config=config).start().stop()
    other = dict(config, **{"zookeeper.connect": f"{zookeeper.connect}/seglog-other-"
                                                  f"{uuid.uuid4().hex[:8]}"})
    with pytest.raises(seglog.errors.InvalidConfigError, match="doesn't match stored clusterId"):
        seglog.Broker(tmp_path / "b0", listen=("127.0.0.1", 0), config=other).start()


def test_an_expired_session_re_registers_and_the_replica_rejoins_the_isr(cluster):
    """A follower's ZooKeeper session expires (R§1.4's fault): its registration vanishes, the
    controller drops it from the ISR; the broker connects with a new session, registers again
    (Kafka's session-expiry handler), catches up and the leader takes it back into the ISR."""
    from seglog.cluster.zk_client import expire_session

    create_topic(cluster, "expiry")
    tp = TopicPartition("expiry", 0)
    leader = cluster.wait_for_isr(tp, 3)
    follower = next(b for b in sorted(cluster.brokers) if b != leader)
    zk = cluster.rm(follower).zk
    old_session = zk.session_id
    expire_session(cluster.zk_connect, old_session, zk.session_password)
    wait_until(lambda: zk.session_id != old_session and zk.registered_session_id == zk.session_id,
               "the follower to register again with a new session")
    assert produce_confluent(cluster.bootstrap, "expiry", [b"x"]) == [None]
    wait_until(lambda: follower in cluster.rm(leader).partitions[tp].isr
               and len(cluster.rm(leader).partitions[tp].isr) == 3,
               "the follower back in the ISR")
    cluster.wait_replicas_caught_up(tp)


def test_metadata_auto_creates_with_the_default_replication_factor(make_cluster):
    """A producer's Metadata request for a missing topic creates it in ZooKeeper with
    num.partitions and default.replication.factor (Kafka 2.8's KafkaApis.createTopic,
    answered LEADER_NOT_AVAILABLE until the leader is known); the produce then succeeds."""
    cluster = make_cluster(**{"default.replication.factor": 2, "num.partitions": 2})
    assert produce_confluent(cluster.bootstrap, "auto-made", [b"a"]) == [None]
    assignment = cluster.rm(0).assignments["auto-made"]
    assert sorted(assignment.partitions) == [0, 1]
    assert all(len(set(r)) == 2 for r in assignment.partitions.values())


def test_cluster_settings_are_checked_before_anything_starts(tmp_path):
    """zookeeper.connect needs broker.id; replica.fetch.wait.max.ms may not exceed
    replica.lag.time.max.ms (KafkaConfig.validateValues). Both refused at construction."""
    with pytest.raises(seglog.errors.InvalidConfigError, match="broker.id must be set"):
        seglog.Broker(tmp_path / "b", config={"zookeeper.connect": "127.0.0.1:1"})
    with pytest.raises(seglog.errors.InvalidConfigError, match="replica.fetch.wait.max.ms"):
        seglog.Broker(tmp_path / "b", config={"replica.fetch.wait.max.ms": 5000,
                                              "replica.lag.time.max.ms": 3000})
    assert not (tmp_path / "b").exists()


def test_a_topic_config_change_in_zookeeper_reaches_every_broker(cluster, zk_client):
    """A config change announced in ZooKeeper (``/config/topics/<t>`` and a
    ``/config/changes`` notification, as Kafka 2.8's ``kafka-configs --zookeeper`` writes
    it) reaches every broker's topic: min.insync.replicas=3 with one follower stopped
    refuses acks=all writes (19); set back to 2, they succeed."""
    create_topic(cluster, "reconf")
    tp = TopicPartition("reconf", 0)
    leader = cluster.wait_for_isr(tp, 3)
    zk_client.set_topic_config("reconf", {"min.insync.replicas": "3"})
    wait_until(lambda: all(b.store.topic("reconf").log(0).config.min_insync_replicas == 3
                           for b in cluster.brokers.values()),
               "every broker to take min.insync.replicas=3")
    cluster.stop(next(b for b in sorted(cluster.brokers) if b != leader))
    leader = cluster.wait_for_isr(tp, 2)
    from kafka.errors import NotEnoughReplicasError

    assert isinstance(_produce_kafka_python(cluster.bootstrap, "reconf", b"no"),
                      NotEnoughReplicasError)
    zk_client.set_topic_config("reconf", {"min.insync.replicas": "2"})
    wait_until(lambda: cluster.brokers[leader].store.topic("reconf").log(0)
               .config.min_insync_replicas == 2, "the leader to take min.insync.replicas=2")
    assert _produce_kafka_python(cluster.bootstrap, "reconf", b"yes") is None


@pytest.mark.slow
def test_a_leader_cut_off_from_zookeeper_cannot_acknowledge_acks_all_and_truncates(
        tmp_path, zk_connect):
    """The zombie leader (R§3.5): broker 0 leads, then loses ZooKeeper (a black-hole relay on
    its connection alone) but keeps serving. Its session expires, the controller elects
    broker 1 from the ISR and the followers move. An acks=-1 write sent to the zombie then is
    never acknowledged (its ISR shrink cannot be written, its followers are gone); once the
    partition heals it learns the new epoch, becomes a follower and truncates the
    unacknowledged record: every replica ends with the same batches."""
    sys_path_harness()
    from harness.faults import Relay

    host, _, rest = zk_connect.partition(":")
    port, _, chroot = rest.partition("/")
    relay = Relay((host, int(port)))
    cluster = Cluster(tmp_path, zk_connect, size=0)
    try:
        cluster.start(1)
        cluster.start(2)
        wait_until(lambda: cluster.rm(1).controller_id is not None, "a controller")
        cluster.start(0, zk_connect=f"{relay.address}/{chroot}")
        wait_until(lambda: all(len(cluster.rm(b).live_brokers) == 3 for b in cluster.brokers),
                   "every broker to see three live brokers")
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.create_topics([NewTopic("zombie", num_partitions=-1, replication_factor=-1,
                                          replica_assignments={0: [0, 1, 2]},
                                          topic_configs={"min.insync.replicas": "2"})],
                                timeout_ms=15000)
        finally:
            admin.close()
        tp = TopicPartition("zombie", 0)
        assert cluster.wait_for_isr(tp, 3) == 0
        zombie = cluster.brokers[0]
        assert produce_to(zombie, "zombie", b"committed") == 0
        cluster.wait_replicas_caught_up(tp)
        old_epoch = cluster.rm(0).partitions[tp].leader_epoch

        relay.block()
        wait_until(lambda: cluster.leader_of_among(tp, (1, 2)) == 1
                   and cluster.rm(2).fetcher.fetch_state(tp) is not None
                   and cluster.rm(2).fetcher.fetch_state(tp).leader_id == 1,
                   "broker 1 to lead and broker 2 to follow it", timeout_s=30)
        assert cluster.rm(0).partitions[tp].is_leader  # the zombie still believes it leads
        assert produce_to(zombie, "zombie", b"zombie-write", timeout_ms=3000) != 0
        zombie_log = zombie.store.topic("zombie").log(0)
        assert zombie_log.end_offset == 2 and zombie_log.high_watermark == 1

        relay.heal()
        wait_until(lambda: not cluster.rm(0).partitions[tp].is_leader
                   and cluster.rm(0).partitions[tp].leader_epoch > old_epoch,
                   "the old leader to learn the new epoch", timeout_s=30)
        assert produce_to(cluster.brokers[1], "zombie", b"after") == 0
        cluster.wait_replicas_caught_up(tp)
        lists = {b: batches_of(broker.store.topic("zombie").log(0))
                 for b, broker in cluster.brokers.items()}
        assert lists[0] == lists[1] == lists[2]
        assert [base for base, *_ in lists[1]] == [0, 1]  # the zombie's record is gone
    finally:
        cluster.close()
        relay.close()


def sys_path_harness() -> None:
    """Make ``tests/cluster`` importable for its ``harness`` package."""
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)


def produce_to(broker, topic: str, value: bytes, *, timeout_ms: int = 10000) -> int:
    """A raw acks=-1 Produce of one record to ``broker`` itself; its error code."""
    from test_replica_manager import call, _module

    batch = seglog.get_backend("native").encode_batch([value],
                                                      timestamps_ms=[int(time.time() * 1000)])
    m = _module(0, 9)
    import datetime

    request = m.ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(m.TopicProduceData(name=topic, partition_data=(
            m.PartitionProduceData(index=0, records=batch),)),))
    response = call(broker, 0, 9, request, timeout_s=timeout_ms / 1000 + 10)
    return int(response.responses[0].partition_responses[0].error_code)
