"""seglog.commands.wire, the tools' protocol client: ApiVersions, Metadata, FindCoordinator and
any kio request, against a seglog broker, a SASL_SSL seglog broker and real Kafka 4.4; and a
"broker" that answers garbage or nothing gives a typed error, not a traceback."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from seglog import Broker
from seglog.commands.wire import (GROUP_KEY_TYPE, WireClient,
                                  WireConnectionError, WireProtocolError, build)
from seglog.errors import InvalidConfigError

from kafka_waits import eventually

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from security_certs import have_openssl, make_ca  # noqa: E402

TOPIC = "wire-topic"
WAIT_S = 30.0


def _make_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    try:
        futures[name].result(WAIT_S)
    except Exception as exc:  # an existing topic (a shared Kafka broker) is fine
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise
    # A Kafka broker's metadata image shows the topic a moment after the controller's answer:
    # wait (bounded) until every partition has a leader, on either broker alike.
    eventually(lambda: admin.list_topics(name, timeout=WAIT_S).topics.get(name),
               lambda topic: topic is not None and topic.error is None
               and len(topic.partitions) == partitions
               and all(p.leader >= 0 for p in topic.partitions.values()))


def _metadata_and_coordinator(config: dict[str, str]) -> dict[str, object]:
    """What the client sees of a cluster with TOPIC (3 partitions), normalised."""
    with WireClient(config, timeout_ms=10_000) as client:
        versions = client.api_versions()
        assert versions[18][1] >= 3 and 3 in versions and 77 in versions
        metadata = client.metadata([TOPIC])
        topic = metadata.topics[TOPIC]
        assert topic.error_code == 0 and topic.topic_id is not None
        assert set(topic.leaders.values()) <= set(metadata.brokers)
        coordinator = client.find_coordinator("wire-group", GROUP_KEY_TYPE)
        assert coordinator in metadata.brokers
        # any request, to a broker by id: ListGroups through send()
        for _ in range(100):  # a fresh broker loads its offsets partitions first
            listed = client.send(16, lambda module, version: build(module.ListGroupsRequest),
                                 node_id=coordinator)
            if listed.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                break
            time.sleep(0.1)
        assert listed.error_code == 0
        return {"partitions": sorted(topic.leaders), "brokers": len(metadata.brokers),
                "every_topic": TOPIC in client.metadata().topics}


@pytest.mark.kafka
def test_wire_against_seglog_and_kafka_alike(seglog_bootstrap, kafka_bootstrap):
    seen = []
    for bootstrap in (seglog_bootstrap, kafka_bootstrap):
        _make_topic(bootstrap, TOPIC, 3)
        seen.append(_metadata_and_coordinator({"bootstrap.servers": bootstrap}))
    assert seen[0] == seen[1] == {"partitions": [0, 1, 2], "brokers": 1, "every_topic": True}


@pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")
def test_wire_over_sasl_ssl(tmp_path):
    ca = make_ca(tmp_path / "ca")
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            'user_alice="alice-secret";')
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0), config={
        "listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(ca.issue("b").pem_path), "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas})
    broker.start()
    try:
        config = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL",
                  "ssl.ca.location": str(ca.cert_path), "sasl.mechanism": "PLAIN",
                  "sasl.username": "alice", "sasl.password": "alice-secret"}
        with WireClient(config, timeout_ms=10_000) as client:
            assert client.find_coordinator("g") in client.metadata().brokers
        with pytest.raises(WireConnectionError, match="Invalid username or password"):
            with WireClient(config | {"sasl.password": "wrong"}, timeout_ms=10_000) as client:
                client.metadata()
        with pytest.raises(WireConnectionError):  # TLS without the CA: not trusted
            with WireClient({k: v for k, v in config.items() if k != "ssl.ca.location"},
                            timeout_ms=10_000) as client:
                client.metadata()
    finally:
        broker.stop()


def test_refused_settings_are_named():
    with pytest.raises(InvalidConfigError, match="GSSAPI"):
        WireClient({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "GSSAPI"})
    with pytest.raises(InvalidConfigError, match="security.protocol=FOO"):
        WireClient({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "FOO"})
    with pytest.raises(InvalidConfigError, match="ssl.ca.pem"):
        WireClient({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
                    "ssl.ca.pem": "x"})


class _FakeBroker:
    """A listener that answers every request with ``reply(request bytes)`` (None: silence)."""

    def __init__(self, reply):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(10)
        self.reply = reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            for _ in range(4):
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                answer = self.reply(data)
                if answer is not None:
                    conn.sendall(answer)

    def close(self) -> None:
        self.sock.close()
        self.thread.join(5)


def test_garbage_and_silence_are_typed_errors():
    def garbage(request: bytes) -> bytes:
        correlation = request[8:12]
        body = b"\x00\x00" + b"\xff\xff\xff\x7f" + b"junk"  # an array claiming 2**31 entries
        return (len(correlation + body)).to_bytes(4, "big") + correlation + body
    fake = _FakeBroker(garbage)
    try:
        with pytest.raises(WireProtocolError):
            with WireClient({"bootstrap.servers": fake.bootstrap}, timeout_ms=3000) as client:
                client.api_versions()
    finally:
        fake.close()
    wrong_id = _FakeBroker(lambda request: b"\x00\x00\x00\x06\x00\x00\x00\x63\x00\x00")
    try:
        with pytest.raises(WireProtocolError, match="correlation id 99"):
            with WireClient({"bootstrap.servers": wrong_id.bootstrap}, timeout_ms=3000) as c:
                c.api_versions()
    finally:
        wrong_id.close()
    silent = _FakeBroker(lambda request: None)
    try:
        with pytest.raises(WireConnectionError, match="within"):
            with WireClient({"bootstrap.servers": silent.bootstrap}, timeout_ms=500) as c:
                c.metadata()
    finally:
        silent.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wire_scram_login(seglog_broker_factory, tmp_path, mechanism):
    """SASL_PLAINTEXT with SCRAM: the two-round login of cluster.sasl_login, credentials made
    through AlterUserScramCredentials."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    scram = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
             'username="admin" password="admin-secret";')
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
             'username="admin" password="admin-secret" user_admin="admin-secret";')
    broker = seglog_broker_factory(config={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": f"PLAIN,{mechanism}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
        f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config": scram},
        data_dir=tmp_path / "data")
    base = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT"}
    admin = AdminClient(base | {"sasl.mechanism": "PLAIN", "sasl.username": "admin",
                                "sasl.password": "admin-secret"})
    kind = ScramMechanism.SCRAM_SHA_256 if mechanism.endswith("256") \
        else ScramMechanism.SCRAM_SHA_512
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(kind, 4096), b"bob-secret")]).values():
        future.result(WAIT_S)
    config = base | {"sasl.mechanism": mechanism, "sasl.username": "bob",
                     "sasl.password": "bob-secret"}
    with WireClient(config, timeout_ms=10_000) as client:
        assert client.find_coordinator("g") in client.metadata().brokers
    with pytest.raises(WireConnectionError, match="cannot log in"):
        with WireClient(config | {"sasl.password": "nope"}, timeout_ms=10_000) as client:
            client.metadata()
