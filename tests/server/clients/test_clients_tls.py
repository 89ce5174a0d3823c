"""Every client over TLS (issue 23): confluent-kafka, kafka-python, aiokafka, kcat and Kafka's
Java console producer and consumer produce and consume through an SSL listener of
``seglog serve`` (a broker in this process with a PLAINTEXT and an SSL listener, PEM stores
made with openssl by tests/security_certs.py), each trusting the test CA from a PEM file;
confluent-kafka also with a client certificate (mutual TLS), whose principal the broker
takes from its DN.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seglog import Broker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from security_certs import have_openssl, make_ca  # noqa: E402

pytestmark = pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")

WAIT_S = 30.0
COUNT = 10


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    """``(broker, certs)``: a broker with PLAINTEXT and SSL listeners (client auth
    requested), and the CA, broker and client certificates."""
    directory = tmp_path_factory.mktemp("tls")
    ca = make_ca(directory / "ca")
    certs = {"ca": ca, "broker": ca.issue("broker"),
             "client": ca.issue("client", subject="/O=seglog/CN=client")}
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
              "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs["broker"].pem_path),
              "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert_path),
              "ssl.client.auth": "requested", "offsets.topic.num.partitions": "1",
              "group.initial.rebalance.delay.ms": "0"}
    broker = Broker(directory / "data", listen=("127.0.0.1", 0), config=config)
    broker.start()
    yield broker, certs
    broker.stop()


def _values(prefix: str) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(COUNT)]


def test_confluent_kafka_mutual_tls(tls_broker):
    from confluent_kafka import Consumer, Producer

    broker, certs = tls_broker
    common = {"bootstrap.servers": broker.listener_bootstrap("SSL"), "security.protocol": "SSL",
              "ssl.ca.location": str(certs["ca"].cert_path),
              "ssl.certificate.location": str(certs["client"].cert_path),
              "ssl.key.location": str(certs["client"].key_path)}
    producer = Producer(common)
    for value in _values("ck"):
        producer.produce("tls-confluent", value)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer(common | {"group.id": "g-confluent", "auto.offset.reset": "earliest"})
    consumer.subscribe(["tls-confluent"])
    got: list[bytes] = []
    principals: set[str] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
            principals |= {str(c.security.principal)
                           for c in list(broker.server.connections.values())}
    finally:
        consumer.close()
    assert got == _values("ck")
    assert "User:CN=client,O=seglog" in principals


def test_kafka_python(tls_broker):
    from kafka import KafkaConsumer, KafkaProducer

    broker, certs = tls_broker
    common = {"bootstrap_servers": broker.listener_bootstrap("SSL"), "security_protocol": "SSL",
              "ssl_cafile": str(certs["ca"].cert_path)}
    producer = KafkaProducer(**common)
    for value in _values("kp"):
        producer.send("tls-kafka-python", value)
    producer.flush(WAIT_S)
    producer.close()
    consumer = KafkaConsumer("tls-kafka-python", group_id="g-kp", auto_offset_reset="earliest",
                             consumer_timeout_ms=int(WAIT_S * 1000), **common)
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == COUNT:
            break
    consumer.close()
    assert got == _values("kp")


def test_aiokafka(tls_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker, certs = tls_broker

    async def run() -> list[bytes]:
        context = create_ssl_context(cafile=str(certs["ca"].cert_path))
        common = {"bootstrap_servers": broker.listener_bootstrap("SSL"),
                  "security_protocol": "SSL", "ssl_context": context}
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            for value in _values("aio"):
                await producer.send_and_wait("tls-aiokafka", value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("tls-aiokafka", group_id="g-aio",
                                    auto_offset_reset="earliest", **common)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < COUNT:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), WAIT_S)
                for messages in batch.values():
                    got.extend(m.value for m in messages)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(asyncio.wait_for(run(), 2 * WAIT_S)) == _values("aio")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="needs kcat")
def test_kcat(tls_broker):
    broker, certs = tls_broker
    common = ["-b", broker.listener_bootstrap("SSL"), "-X", "security.protocol=SSL",
              "-X", f"ssl.ca.location={certs['ca'].cert_path}", "-t", "tls-kcat"]
    lines = "\n".join(v.decode() for v in _values("kcat")) + "\n"
    produced = subprocess.run(["kcat", "-P", *common], input=lines, capture_output=True,
                              text=True, timeout=WAIT_S, check=False)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-C", *common, "-o", "beginning", "-c", str(COUNT),
                               "-e"], capture_output=True, text=True, timeout=WAIT_S,
                              check=False)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [v.decode() for v in _values("kcat")]


def test_java_console_tools(tls_broker, tmp_path):
    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    broker, certs = tls_broker
    properties = tmp_path / "client.properties"
    # Kafka's own clients with a PEM truststore; the host name is checked (https).
    properties.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                          f"ssl.truststore.location={certs['ca'].cert_path}\n")
    bootstrap = broker.listener_bootstrap("SSL")
    lines = [v.decode() for v in _values("java")]
    # The producer reads its records from stdin (run_tool gives the tools none).
    produced = subprocess.run(
        ref.java_command("org.apache.kafka.tools.ConsoleProducer",
                         ["--bootstrap-server", bootstrap, "--topic", "tls-java",
                          "--command-config", str(properties)], run_dir=tmp_path),
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120,
        check=False)
    assert produced.returncode == 0, produced.stderr[-2000:]
    consumed = ref.run_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
                            ["--bootstrap-server", bootstrap, "--topic", "tls-java",
                             "--from-beginning", "--max-messages", str(COUNT),
                             "--timeout-ms", "30000", "--command-config", str(properties)],
                            run_dir=tmp_path, timeout_s=120)
    assert consumed.returncode == 0, consumed.stderr[-2000:]
    assert consumed.stdout.splitlines() == lines


def test_sasl_ssl_plain(tmp_path):
    """SASL_SSL: TLS first, then SASL PLAIN on the same listener (the SASL part is
    tests/server/test_security_sasl.py's); the principal is the SASL user, and a wrong
    password is refused as on SASL_PLAINTEXT."""
    from confluent_kafka import Producer

    ca = make_ca(tmp_path / "ca")
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            'user_alice="alice-secret";')
    config = {"listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
              "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.issue("b").pem_path),
              "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas}
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0), config=config)
    broker.start()
    try:
        common = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL",
                  "ssl.ca.location": str(ca.cert_path), "sasl.mechanism": "PLAIN",
                  "sasl.username": "alice", "sasl.password": "alice-secret"}
        producer = Producer(common)
        for value in _values("sasl-ssl"):
            producer.produce("sasl-ssl", value)
        assert producer.flush(WAIT_S) == 0
        seen = {(str(c.security.principal), c.security.security_protocol)
                for c in list(broker.server.connections.values())}
        assert ("User:alice", "SASL_SSL") in seen
        errors: list[str] = []
        wrong = Producer(common | {"sasl.password": "wrong",
                                   "error_cb": lambda error: errors.append(str(error))})
        deadline = time.monotonic() + WAIT_S
        while not any("Authentication failed" in e for e in errors) \
                and time.monotonic() < deadline:
            wrong.poll(0.2)
        assert any("Invalid username or password" in e for e in errors), errors
    finally:
        broker.stop()
