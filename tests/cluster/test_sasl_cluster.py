"""SASL in a ZooKeeper cluster (issue 23): two in-process brokers whose one listener, also the
inter-broker one, is SASL_PLAINTEXT. Followers fetch over it, logging in as the broker's own
user (PLAIN, then SCRAM-SHA-512 with credentials made through AlterUserScramCredentials and
kept in ZooKeeper's ``/config/users/<user>``, Kafka's layout, beside another module's keys);
a credential made through one broker logs in at the other (the change notification); a wrong
inter-broker password is a follower that never catches up, not an open door."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion

import seglog
from seglog.types import TopicPartition

from test_broker_cluster import CLUSTER_CONFIG, wait_until

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="broker" password="broker-secret" user_broker="broker-secret" '
              'user_alice="alice-secret";')


def _scram_jaas(password: str) -> str:
    return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="broker" password="{password}";')


def _config(mechanism: str, scram_password: str = "broker-512") -> dict:
    return {**CLUSTER_CONFIG,
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": mechanism,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                _scram_jaas(scram_password)}


def _client(bootstrap: str, mechanism="PLAIN", user="alice", password="alice-secret"):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


class SaslCluster:
    def __init__(self, tmp_path, zk_connect):
        self.tmp_path, self.zk_connect = tmp_path, zk_connect
        self.brokers: dict[int, seglog.Broker] = {}

    def start(self, broker_id: int, config: dict) -> seglog.Broker:
        broker = seglog.Broker(self.tmp_path / f"b{broker_id}", listen=("127.0.0.1", 0),
                               config={**config, "broker.id": broker_id,
                                       "zookeeper.connect": self.zk_connect})
        broker.start()
        self.brokers[broker_id] = broker
        return broker

    def stop(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def rm(self, broker_id):
        return self.brokers[broker_id].state.cluster

    def isr(self, tp):
        for broker_id in self.brokers:
            replica = self.rm(broker_id).partitions.get(tp)
            if replica is not None and replica.is_leader:
                return set(replica.isr)
        return set()

    def ends(self, tp):
        return {b.store.topic(tp.topic).log(tp.partition).end_offset
                for b in self.brokers.values()}


@pytest.fixture
def sasl_cluster(tmp_path, zk_connect):
    cluster = SaslCluster(tmp_path, zk_connect)
    try:
        yield cluster
    finally:
        for broker_id in list(cluster.brokers):
            cluster.stop(broker_id)


def test_replication_over_sasl_plain_then_scram(sasl_cluster, zk_client):
    cluster = sasl_cluster
    for broker_id in (0, 1):
        cluster.start(broker_id, _config("PLAIN"))
    wait_until(lambda: all(len(cluster.rm(b).live_brokers) == 2 for b in cluster.brokers),
               "both brokers to see each other")
    admin = AdminClient(_client(cluster.bootstrap))
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic("r", 1, 2)], request_timeout=15)["r"].result(20)
    tp = TopicPartition("r", 0)
    wait_until(lambda: cluster.isr(tp) == {0, 1}, "the ISR to hold both brokers")
    from confluent_kafka import Producer

    producer = Producer({**_client(cluster.bootstrap), "acks": "all"})
    for i in range(10):
        producer.produce("r", b"v%d" % i)
    assert producer.flush(20) == 0
    wait_until(lambda: cluster.ends(tp) == {10}, "both replicas to hold the 10 records")

    # Another module's key in the broker user's znode survives the SCRAM write.
    zk_client.create_recursive("/config/users/broker", json.dumps(
        {"version": 1, "config": {"producer_byte_rate": "1024"}}).encode())
    admin0 = AdminClient(_client(cluster.brokers[0].bootstrap))
    futures = admin0.alter_user_scram_credentials([
        UserScramCredentialUpsertion("broker", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_512, 4096), b"broker-512"),
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_512, 4096), b"alice-512")])
    for future in futures.values():
        future.result(20)
    data, _ = zk_client.get_data_and_version("/config/users/broker")
    stored = json.loads(data)["config"]
    assert stored["producer_byte_rate"] == "1024"
    assert stored["SCRAM-SHA-512"].startswith("salt=") and "iterations=4096" in \
        stored["SCRAM-SHA-512"]
    # Made through broker 0, it logs in at broker 1 (the notification reached it).
    wait_until(lambda: _logs_in(cluster.brokers[1].bootstrap, "alice", "alice-512"),
               "alice's SCRAM login to work at broker 1")

    # Broker 1 restarts logging in with SCRAM-SHA-512 between brokers; it catches up.
    cluster.stop(1)
    for i in range(10, 15):
        producer.produce("r", b"v%d" % i)
    assert producer.flush(20) == 0
    cluster.start(1, _config("SCRAM-SHA-512"))
    wait_until(lambda: cluster.ends(tp) == {15}, "the SCRAM follower to catch up")
    wait_until(lambda: cluster.isr(tp) == {0, 1}, "it to rejoin the ISR")

    # With a wrong inter-broker password it is refused, and never catches up.
    cluster.stop(1)
    producer.produce("r", b"late")
    assert producer.flush(20) == 0
    cluster.start(1, _config("SCRAM-SHA-512", scram_password="wrong"))
    wait_until(lambda: cluster.isr(tp) == {0}, "the refused follower to leave the ISR")
    time.sleep(0.5)
    assert cluster.brokers[1].store.topic("r").log(0).end_offset == 15
    assert cluster.brokers[0].store.topic("r").log(0).end_offset == 16


def _logs_in(bootstrap: str, user: str, password: str) -> bool:
    errors = []
    admin = AdminClient({**_client(bootstrap, "SCRAM-SHA-512", user, password),
                         "error_cb": errors.append})
    try:
        admin.list_topics(timeout=3)
    except Exception:  # noqa: BLE001 - not yet
        return False
    return not errors


def test_zk_credentials_corrupt_is_a_typed_error_and_other_keys_survive(zk_client):
    import asyncio

    from seglog.cluster.scram_users import ZkCredentialStore
    from seglog.cluster.zk_data import sanitize
    from seglog.errors import CorruptCredentialsError
    from seglog.sasl.scram import MECHANISMS, credential_from_password

    async def blocking(fn, *args):
        return fn(*args)

    store = ZkCredentialStore(zk_client, blocking)
    credential = credential_from_password(MECHANISMS["SCRAM-SHA-256"], "pw", 4096)
    zk_client.create_recursive("/config/users/" + sanitize("a*b"), json.dumps(
        {"version": 1, "config": {"consumer_byte_rate": "5"}}).encode())
    asyncio.run(store.alter([("a*b", "SCRAM-SHA-256", credential)]))
    data, _ = zk_client.get_data_and_version("/config/users/a%2Ab")
    assert json.loads(data)["config"] == {"consumer_byte_rate": "5",
                                          "SCRAM-SHA-256": credential.to_kafka()}
    notifications = zk_client.config_change_notifications()
    assert "users/a%2Ab" in notifications.values()
    asyncio.run(store.alter([("a*b", "SCRAM-SHA-256", None)]))
    data, _ = zk_client.get_data_and_version("/config/users/a%2Ab")
    assert json.loads(data)["config"] == {"consumer_byte_rate": "5"}
    fresh = ZkCredentialStore(zk_client, blocking)
    asyncio.run(fresh.load())
    assert fresh.users() == {}
    zk_client.create_recursive("/config/users/bad", json.dumps(
        {"version": 1, "config": {"SCRAM-SHA-512": "salt=!!"}}).encode())
    with pytest.raises(CorruptCredentialsError, match="/config/users/bad"):
        asyncio.run(fresh.load())


def test_delegation_tokens_in_zookeeper(sasl_cluster, zk_client):
    """A token made through broker 0 is a znode in Kafka 2.x's layout and logs in at broker 1
    (the change notification); expired through broker 1, broker 0 refuses it too."""
    import base64
    import datetime
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
    from sasl_helpers import RawClient

    from seglog.sasl.scram import MECHANISMS, ScramClient

    cluster = sasl_cluster
    config = {**_config("PLAIN"), "delegation.token.secret.key": "cluster-secret"}
    for broker_id in (0, 1):
        cluster.start(broker_id, config)

    def admin(broker_id):
        client = RawClient(cluster.brokers[broker_id].bootstrap)
        assert client.login("PLAIN", "alice", "alice-secret")[-1].error_code == 0
        return client

    def token_login(broker_id, token_id, hmac_bytes):
        client = RawClient(cluster.brokers[broker_id].bootstrap)
        if client.handshake("SCRAM-SHA-512").error_code != 0:
            return False
        scram = ScramClient(MECHANISMS["SCRAM-SHA-512"], token_id,
                            base64.b64encode(hmac_bytes).decode(),
                            extensions={"tokenauth": "true"})
        first = client.authenticate(scram.first())
        if first.error_code != 0:
            return False
        return client.authenticate(scram.final(first.auth_bytes)).error_code == 0

    created = admin(0).call(38, 3, owner_principal_type=None, owner_principal_name=None,
                            renewers=(), max_lifetime=datetime.timedelta(milliseconds=-1))
    assert created.error_code == 0
    data, _ = zk_client.get_data_and_version(f"/delegation_token/tokens/{created.token_id}")
    document = json.loads(data)
    assert document["owner"] == "User:alice" and document["tokenId"] == created.token_id
    assert "hmac" not in document
    wait_until(lambda: token_login(1, created.token_id, created.hmac),
               "the token to log in at broker 1")
    expired = admin(1).call(40, 2, hmac=created.hmac,
                            expiry_time_period=datetime.timedelta(milliseconds=-1))
    assert expired.error_code == 0
    wait_until(lambda: not token_login(0, created.token_id, created.hmac),
               "broker 0 to refuse the expired token")
    assert not zk_client.path_exists(f"/delegation_token/tokens/{created.token_id}")


def test_seglog_format_writes_a_first_user_a_running_cluster_takes(sasl_cluster, zk_client):
    """``seglog format --zookeeper``: the first SCRAM user of a cluster goes to
    ``/config/users/<user>`` with its notification; a running broker logs it in at once, and
    a quota key already in the znode survives."""
    from seglog.cli import main

    broker = sasl_cluster.start(0, _config("PLAIN"))
    zk_client.create_recursive("/config/users/carol",
                               b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
    assert main(["format", "--zookeeper", sasl_cluster.zk_connect, "--add-scram",
                 "SCRAM-SHA-512=[name=carol,password=carol-secret]"]) == 0
    data, _ = zk_client.get_data_and_version("/config/users/carol")
    config = json.loads(data)["config"]
    assert config["producer_byte_rate"] == "1024"
    assert config["SCRAM-SHA-512"].startswith("salt=")
    admin = AdminClient(_client(broker.bootstrap, "SCRAM-SHA-512", "carol", "carol-secret"))
    deadline = time.monotonic() + 20
    while True:
        try:
            metadata = admin.list_topics(timeout=5)
            break
        except Exception:  # the notification may still be on its way
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert metadata.brokers
