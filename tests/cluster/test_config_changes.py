"""Config changes in a cluster reach every broker (issue 22, item 5): Kafka 2.x's config znodes
(``/config/topics/<t>``, ``/config/brokers/<id>``, ``/config/brokers/<default>``) and their
``/config/changes`` notifications (``AdminZkClient.changeConfigs``, ``DynamicConfigManager``,
``ZkNodeChangeNotificationListener``).

Kafka's tests these come from: ``ZkNodeChangeNotificationListenerTest`` (notifications in
order, purged after the expiration), ``DynamicConfigChangeTest`` (a topic config change and a
broker default reach the broker; a bad notification is skipped), ``MinIsrConfigTest``.

The first tests drive one :class:`ConfigChangeManager` over the session's real ZooKeeper; the
last two run three real ``seglog serve`` brokers (LocalCluster) and talk to one chosen broker at
a time with kafka-python's own request classes over a socket (a Kafka admin client picks the
broker of a topic resource itself; the issue's scenario needs one that is not the leader).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid

import pytest

from seglog.cluster import zk_data

#: Bound of one wait in these tests.
WAIT_S = 20.0


def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    """Poll ``condition`` every 50 ms until it is truthy (returned) or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


# --------------------------------------------------------------------- the znodes' bytes


def test_entity_paths_and_sequence_numbers():
    assert zk_data.broker_config_entity(None) == "<default>"
    assert zk_data.broker_config_entity(3) == "3"
    assert zk_data.entity_change_path("brokers", "<default>") == "brokers/<default>"
    assert zk_data.split_entity_change_path("users/u/clients/c") == ("users", "u/clients/c")
    for bad in ("topics", "/t", "topics/", ""):
        with pytest.raises(zk_data.ZkDataError):
            zk_data.split_entity_change_path(bad)
    assert zk_data.config_change_sequence("config_change_0000000042") == 42
    assert zk_data.config_change_sequence("isr_change_0000000042") is None
    assert zk_data.config_change_sequence("config_change_x") is None
    # Version 1 (older Kafka tools): entity_type topics or clients, and entity_name.
    assert zk_data.decode_config_change(
        b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"
    with pytest.raises(zk_data.ZkDataError):
        zk_data.decode_config_change(b'{"version":1,"entity_type":"brokers","entity_name":"1"}')


def test_set_entity_config_writes_the_znode_then_kafkas_notification(zk_client):
    """``changeEntityConfig``: the config znode in Kafka's version-1 JSON, then a sequential
    notification in the version-2 JSON naming ``<type>/<name>``."""
    path = zk_client.set_entity_config("brokers", "<default>", {"log.retention.ms": "1000"})
    assert path == "/config/changes/config_change_0000000000"
    assert zk_client.get_data_and_version("/config/brokers/<default>")[0] == (
        b'{"version":1,"config":{"log.retention.ms":"1000"}}')
    assert zk_client.get_data_and_version(path)[0] == (
        b'{"version":2,"entity_path":"brokers/<default>"}')
    zk_client.set_entity_config("topics", "t", {"min.insync.replicas": "3"})
    assert zk_client.entity_config("topics", "t") == {"min.insync.replicas": "3"}
    assert zk_client.entity_names("brokers") == ["<default>"]
    for entity_type, bad in (("brokers", "../x"), ("brokers", "1/2"), ("topics", "a/b"),
                             ("clients", "c")):
        with pytest.raises(Exception):
            zk_client.set_entity_config(entity_type, bad, {})
    assert zk_client.get_children(zk_data.CONFIG_CHANGES_PATH) == [
        "config_change_0000000000", "config_change_0000000001"]


# ------------------------------------------------------------- the manager, over real ZK


class Harness:
    """A :class:`ConfigChangeManager` for broker 1 on its own event loop thread, recording
    what its handlers were given. ``local_topics``: the topics "on this broker"."""

    def __init__(self, zk, *, change_expiration_ms: int = 15 * 60 * 1000, now_ms=None):
        import threading

        from seglog.cluster.config_changes import ConfigChangeManager

        self.zk = zk
        self.topics: list[tuple[str, dict]] = []
        self.layers: list[tuple[bool, dict]] = []
        self.local_topics: set[str] = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def on_topic(name, config):
            if name not in self.local_topics:
                return False
            self.topics.append((name, config))
            return True

        async def run_blocking(fn, *args):
            return await self.loop.run_in_executor(None, fn, *args)

        extra = {"now_ms": now_ms} if now_ms is not None else {}
        self.manager = ConfigChangeManager(
            zk=zk, broker_id=1, loop=self.loop, run_blocking=run_blocking,
            on_topic_config=on_topic, change_expiration_ms=change_expiration_ms, **extra)

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT_S)

    def start(self) -> "Harness":
        self.run(self.manager.start())
        self.run(self._listen())
        return self

    async def _listen(self):
        self.manager.add_broker_config_listener(
            lambda per_broker, values: self.layers.append((per_broker, values)))

    def close(self):
        self.run(self.manager.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def harness_factory(zk_client):
    made = []

    def make(**kwargs) -> Harness:
        harness = Harness(zk_client, **kwargs)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()


def test_notifications_are_processed_in_order_and_remembered(zk_client, harness_factory):
    """Each new notification makes the named entity's znode be read and handed on, in
    sequence order; broker layers reach the listener only for ``<default>`` and this broker's
    own id; the last sequence number processed is remembered (nothing is handed on twice)."""
    h = harness_factory()
    h.local_topics = {"a", "b"}
    h.start()
    assert h.manager.last_executed_change == -1 and h.topics == [] and h.layers == []
    zk_client.set_entity_config("topics", "a", {"retention.ms": "1"})
    zk_client.set_entity_config("topics", "b", {"retention.ms": "2"})
    zk_client.set_entity_config("brokers", "2", {"log.retention.ms": "5"})  # not ours
    zk_client.set_entity_config("brokers", "<default>", {"log.retention.ms": "6"})
    zk_client.set_entity_config("brokers", "1", {"log.retention.ms": "7"})
    wait_until(lambda: h.manager.last_executed_change == 4, "five notifications processed")
    assert h.topics == [("a", {"retention.ms": "1"}), ("b", {"retention.ms": "2"})]
    assert h.layers == [(False, {"log.retention.ms": "6"}), (True, {"log.retention.ms": "7"})]
    zk_client.set_entity_config("topics", "a", {"retention.ms": "3"})
    wait_until(lambda: h.manager.last_executed_change == 5, "the sixth")
    assert h.topics[2:] == [("a", {"retention.ms": "3"})]


def test_start_reads_every_config_znode_and_skips_what_it_covers(zk_client, harness_factory):
    """A (re)starting broker reads every topic and broker config znode (the values it may have
    missed while down), and does not process again the notifications that read covered."""
    zk_client.set_entity_config("topics", "a", {"retention.ms": "1"})
    zk_client.set_entity_config("topics", "a", {"retention.ms": "2"})
    zk_client.set_entity_config("brokers", "<default>", {"log.retention.ms": "6"})
    zk_client.set_entity_config("brokers", "1", {"log.retention.ms": "7"})
    h = harness_factory()
    h.local_topics = {"a"}
    h.start()
    assert h.topics == [("a", {"retention.ms": "2"})]
    assert sorted(h.layers) == [(False, {"log.retention.ms": "6"}),
                                (True, {"log.retention.ms": "7"})]
    assert h.manager.last_executed_change == 3


def test_a_bad_notification_is_skipped_and_the_next_processed(zk_client, harness_factory):
    """Bytes that are not a version-2 notification, or an entity path with no type, are
    logged and passed over (Kafka's listener logs and goes on)."""
    h = harness_factory()
    h.local_topics = {"a"}
    h.start()
    prefix = f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}"
    zk_client._kazoo.create(prefix, b"not json", sequence=True)
    zk_client._kazoo.create(prefix, b'{"version":2,"entity_path":"topics"}', sequence=True)
    zk_client._kazoo.create(prefix, b'{"version":2,"entity_path":"clients/c"}', sequence=True)
    zk_client.set_entity_config("topics", "a", {"retention.ms": "1"})
    wait_until(lambda: h.manager.last_executed_change == 3, "four notifications processed")
    assert h.topics == [("a", {"retention.ms": "1"})]


def test_a_change_for_a_topic_not_yet_local_is_taken_once_it_is(zk_client, harness_factory):
    """A change that arrives before the topic exists on this broker (its creation read the
    znode just before the change) is given to it once it does."""
    h = harness_factory()
    h.start()
    zk_client.set_entity_config("topics", "late", {"retention.ms": "9"})
    wait_until(lambda: h.manager.last_executed_change == 0, "the notification processed")
    assert h.topics == []
    h.local_topics.add("late")
    wait_until(lambda: h.topics == [("late", {"retention.ms": "9"})], "the retry")


def test_processed_notifications_are_purged_after_the_expiration(zk_client, harness_factory):
    """``purgeObsoleteNotifications``: a processed notification created more than
    ``change_expiration_ms`` ago is deleted; younger ones stay."""
    clock = {"offset_ms": 0}
    h = harness_factory(change_expiration_ms=60_000,
                        now_ms=lambda: time.time_ns() // 1_000_000 + clock["offset_ms"])
    h.start()
    zk_client.set_entity_config("topics", "a", {"retention.ms": "1"})
    wait_until(lambda: h.manager.last_executed_change == 0, "the first notification")
    assert zk_client.get_children(zk_data.CONFIG_CHANGES_PATH) == ["config_change_0000000000"]
    clock["offset_ms"] = 120_000  # the first is now two minutes old
    zk_client.set_entity_config("topics", "a", {"retention.ms": "2"})
    wait_until(lambda: zk_client.get_children(zk_data.CONFIG_CHANGES_PATH) == [],
               "both purged (the second is processed before the purge, and 'old' too)")
    clock["offset_ms"] = 0
    zk_client.set_entity_config("topics", "a", {"retention.ms": "3"})
    wait_until(lambda: h.manager.last_executed_change == 2, "the third")
    time.sleep(0.3)
    assert zk_client.get_children(zk_data.CONFIG_CHANGES_PATH) == ["config_change_0000000002"]


def test_a_new_session_reads_every_config_znode_again(zk_connect, zk_client, harness_factory):
    """After its session expired (a notification may have been created and purged meanwhile)
    the manager reads the config znodes again: a value written with no notification at all
    reaches the handler only that way."""
    from seglog.cluster.zk_client import KafkaZkClient, expire_session

    h = harness_factory()
    h.local_topics = {"a"}
    h.start()
    writer = KafkaZkClient(zk_connect, session_timeout_ms=4000)
    writer.start()
    try:
        writer.create_recursive(zk_data.topic_config_path("a"),
                                zk_data.encode_entity_config({"retention.ms": "5"}))
    finally:
        writer.close()
    time.sleep(0.3)
    assert h.topics == []  # no notification: nothing to process
    expire_session(zk_connect, zk_client.session_id, zk_client.session_password)
    wait_until(lambda: h.topics == [("a", {"retention.ms": "5"})],
               "the read of every config znode after the new session")


# ------------------------------------------------- three `seglog serve` brokers, real clients


def kafka_call(address: str, request, response_cls):
    """Send one request (a kafka-python request object of a fixed version) to the broker at
    ``address`` and return its decoded response."""
    host, _, port = address.rpartition(":")
    request.with_header(correlation_id=7, client_id="test-config-changes")
    data = request.encode(header=True, framed=True)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(data)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        body = _recv(sock, size)
    return response_cls[request.API_VERSION].decode(body, header=True)


def _recv(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4


def incremental_alter(address: str, resource_type: int, name: str, configs: dict) -> tuple:
    """IncrementalAlterConfigs v1, SET each of ``configs``: ``(error_code, error_message)``."""
    from kafka.protocol.admin.configs import (
        IncrementalAlterConfigsRequest as Req, IncrementalAlterConfigsResponse as Resp,
    )

    v1 = Req[1]
    resource = v1.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[v1.AlterConfigsResource.AlterableConfig(name=k, config_operation=0, value=v)
                 for k, v in configs.items()])
    response = kafka_call(address, v1(resources=[resource], validate_only=False), Resp)
    (result,) = response.responses
    return result.error_code, result.error_message


def alter_legacy(address: str, resource_type: int, name: str, configs: dict) -> tuple:
    """AlterConfigs v1 (``configs`` replace the resource's whole set):
    ``(error_code, error_message)``."""
    from kafka.protocol.admin.configs import (
        AlterConfigsRequest as Req, AlterConfigsResponse as Resp,
    )

    v1 = Req[1]
    resource = v1.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[v1.AlterConfigsResource.AlterableConfig(name=k, value=v)
                 for k, v in configs.items()])
    response = kafka_call(address, v1(resources=[resource], validate_only=False), Resp)
    (result,) = response.responses
    return result.error_code, result.error_message


def describe(address: str, resource_type: int, name: str) -> dict:
    """DescribeConfigs v1 of one resource: ``{name: (value, config_source)}``."""
    from kafka.protocol.admin.configs import (
        DescribeConfigsRequest as Req, DescribeConfigsResponse as Resp,
    )

    v1 = Req[1]
    resource = v1.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                          configuration_keys=None)
    response = kafka_call(address, v1(resources=[resource], include_synonyms=False), Resp)
    (result,) = response.results
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


CLUSTER_CONFIGS = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}


@pytest.fixture
def local_cluster(tmp_path, zk_connect):
    from seglog.cluster.local import LocalCluster

    with LocalCluster(tmp_path, 3, zookeeper=zk_connect,
                      broker_configs=CLUSTER_CONFIGS) as cluster:
        yield cluster


def _isr(cluster, topic: str) -> list[int] | None:
    state = cluster.partition_state(topic, 0)
    return None if state is None else sorted(state["isr"])


def _acks_all_producer(bootstrap: str):
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0,
                         request_timeout_ms=10000, linger_ms=0)


def _send(producer, topic: str, value: bytes):
    """One acks=all send: None when acknowledged, else the exception it failed with."""
    future = producer.send(topic, value, partition=0)
    producer.flush(WAIT_S)
    try:
        future.get(timeout=WAIT_S)
        return None
    except Exception as exc:  # noqa: BLE001 - the error is the result
        return exc


def test_min_insync_replicas_raised_through_a_follower_reaches_the_leader(
        local_cluster, zk_client):
    """The issue's scenario: RF 3, min.insync.replicas=2, one follower stopped (ISR 2);
    IncrementalAlterConfigs min.insync.replicas=3 through the *other follower* answers success,
    and within a second the leader refuses acks=all writes with NOT_ENOUGH_REPLICAS;
    ZooKeeper's ``/config/topics/<t>`` holds 3. The value survives a restart of the leader,
    and a change made while it was down (retention.ms, through the follower) is there too
    when it is back: it reads the config znodes at start."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.errors import NotEnoughReplicasAfterAppendError, NotEnoughReplicasError

    cluster, topic = local_cluster, f"minisr-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, 1, 3,
                                            config={"min.insync.replicas": "2"})])
    futures[topic].result(WAIT_S)
    del admin, futures  # its threads would go on calling the brokers after the test
    wait_until(lambda: _isr(cluster, topic) == [0, 1, 2], "an ISR of three")
    leader = cluster.partition_state(topic, 0)["leader"]
    stopped, other = [b for b in sorted(cluster.brokers) if b != leader]
    cluster.stop(stopped)
    wait_until(lambda: _isr(cluster, topic) == sorted([leader, other]), "an ISR of two")

    producer = _acks_all_producer(cluster.bootstrap_servers)
    try:
        # ISR 2 >= min.insync.replicas 2: writes are acknowledged (and the producer knows
        # the leader, so the next sends go straight to it).
        wait_until(lambda: _send(producer, topic, b"before") is None,
                   "an acks=all write with ISR 2 >= min.insync.replicas 2")
        assert incremental_alter(cluster.address(other), RESOURCE_TOPIC, topic,
                                 {"min.insync.replicas": "3"}) == (0, None)
        answered = time.monotonic()
        outcome = _send(producer, topic, b"after")
        # Until the leader has taken the change a write is acknowledged, or, when the change
        # lands while it waits for its followers, NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's
        # DelayedProduce checks min.insync.replicas again).
        while isinstance(outcome, (type(None), NotEnoughReplicasAfterAppendError)) \
                and time.monotonic() - answered < 1.0:
            outcome = _send(producer, topic, b"after")
        assert isinstance(outcome, NotEnoughReplicasError), (
            f"the leader still took acks=all writes {time.monotonic() - answered:.2f} s "
            f"after the change: {outcome!r}")
    finally:
        producer.close(10)
    assert zk_client.topic_config(topic) == {"min.insync.replicas": "3"}
    assert describe(cluster.address(leader), RESOURCE_TOPIC, topic)[
        "min.insync.replicas"][0] == "3"

    cluster.stop(leader)
    assert incremental_alter(cluster.address(other), RESOURCE_TOPIC, topic,
                             {"retention.ms": "4321000"}) == (0, None)
    assert zk_client.topic_config(topic) == {"min.insync.replicas": "3",
                                             "retention.ms": "4321000"}
    cluster.start(leader)
    seen = describe(cluster.address(leader), RESOURCE_TOPIC, topic)
    assert seen["min.insync.replicas"][0] == "3"
    assert seen["retention.ms"][0] == "4321000"


def test_a_dynamic_broker_default_reaches_every_broker(local_cluster, zk_client):
    """IncrementalAlterConfigs of the cluster default (the ``""`` broker resource) through
    broker 0 writes ``/config/brokers/<default>`` and every broker takes it: its own broker
    resource shows the value as a dynamic default (source 3) and a topic without an
    override follows it on every broker. A per-broker value (``/config/brokers/1``, sent to
    broker 1) reaches broker 1 only. A legacy AlterConfigs of a topic through broker 2
    reaches broker 0."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster, topic = local_cluster, f"dflt-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(WAIT_S)
    del admin  # its threads would go on calling the brokers after the test
    assert incremental_alter(cluster.address(0), RESOURCE_BROKER, "",
                             {"log.retention.ms": "7654000"}) == (0, None)
    for broker_id in sorted(cluster.brokers):
        address = cluster.address(broker_id)
        wait_until(lambda: describe(address, RESOURCE_BROKER, str(broker_id)).get(
            "log.retention.ms") == ("7654000", 3), f"broker {broker_id} to take the default")
        wait_until(lambda: describe(address, RESOURCE_TOPIC, topic)["retention.ms"][0]
                   == "7654000", f"the topic on broker {broker_id} to follow the default")
    assert zk_client.entity_config("brokers", "<default>")["log.retention.ms"] == "7654000"
    assert incremental_alter(cluster.address(1), RESOURCE_BROKER, "1",
                             {"log.retention.ms": "1111000"}) == (0, None)
    assert zk_client.entity_config("brokers", "1") == {"log.retention.ms": "1111000"}
    assert describe(cluster.address(1), RESOURCE_BROKER, "1")["log.retention.ms"] == (
        "1111000", 2)
    time.sleep(0.5)
    assert describe(cluster.address(2), RESOURCE_BROKER, "2")["log.retention.ms"] == (
        "7654000", 3)
    # The legacy AlterConfigs (the whole override set) takes the same path.
    assert alter_legacy(cluster.address(2), RESOURCE_TOPIC, topic,
                        {"segment.bytes": "2097152"}) == (0, None)
    assert zk_client.topic_config(topic) == {"segment.bytes": "2097152"}
    wait_until(lambda: describe(cluster.address(0), RESOURCE_TOPIC, topic)["segment.bytes"][0]
               == "2097152", "broker 0 to take the topic's new segment.bytes")
