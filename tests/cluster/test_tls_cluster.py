"""Brokers that talk to each other over TLS (issue 23): two in-process cluster brokers over the
session's ZooKeeper, each with a PLAINTEXT listener for clients and a TLS one for brokers
(``inter.broker.listener.name=SSL``, ``ssl.client.auth=required``: mutual TLS, each broker's
own certificate is its client certificate; and the same listener as SASL_SSL, where the
follower also logs in with PLAIN). A replicated topic is written with acks=all and
the follower's log ends equal to the leader's; each broker registered both endpoints in
ZooKeeper as Kafka writes them; the leader sees its follower as the principal of the
follower's certificate; clients on either listener are told that listener's endpoints.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

import seglog
from seglog.types import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from security_certs import have_openssl, make_ca  # noqa: E402

pytestmark = pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")

WAIT_S = 30.0
CLUSTER_CONFIG = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}


def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="broker" password="broker-secret" user_broker="broker-secret";')


@pytest.fixture(params=["SSL", "SASL_SSL"])
def tls_cluster(request, tmp_path, zk_connect):
    """Two brokers whose inter-broker listener (named SSL) is mutual TLS, or SASL_SSL (TLS,
    then a PLAIN login as the broker's own user)."""
    ca = make_ca(tmp_path / "ca")
    brokers: dict[int, seglog.Broker] = {}
    protocol = request.param
    sasl = {} if protocol == "SSL" else {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.ssl.plain.sasl.jaas.config": PLAIN_JAAS}
    try:
        for broker_id in (0, 1):
            cert = ca.issue(f"broker-{broker_id}")
            config = dict(CLUSTER_CONFIG, **{
                "broker.id": broker_id, "zookeeper.connect": zk_connect,
                "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                "inter.broker.listener.name": "SSL",
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(cert.pem_path),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert_path),
                "ssl.client.auth": "required", **sasl})
            broker = seglog.Broker(tmp_path / f"broker-{broker_id}",
                                   listen=("127.0.0.1", 0), config=config)
            broker.start()
            brokers[broker_id] = broker
        yield brokers, ca, protocol
    finally:
        for broker in reversed(list(brokers.values())):
            broker.stop()


def test_replication_over_mutual_tls(tls_cluster, zk_client):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers, ca, protocol = tls_cluster
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    # Registrations: both endpoints and the protocol map (Kafka's BrokerIdZNode), the
    # top-level host/port the PLAINTEXT one.
    for broker_id, broker in brokers.items():
        data, _version = zk_client.get_data_and_version(f"/brokers/ids/{broker_id}")
        registration = json.loads(data)
        ssl_host, ssl_port = broker.listener_address("SSL")
        assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}",
                                             f"SSL://{ssl_host}:{ssl_port}"]
        assert registration["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT", "SSL": protocol}
        assert (registration["host"], registration["port"]) == ("127.0.0.1", broker.port)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 2, "both brokers listed")
    admin.create_topics([NewTopic("replicated", 1, 2)])["replicated"].result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce("replicated", b"v%d" % i)
    assert producer.flush(WAIT_S) == 0
    tp = TopicPartition("replicated", 0)

    def replicas():
        return [b.state.cluster.partitions.get(tp) for b in brokers.values()]

    def caught_up():
        found = replicas()
        return all(r is not None and r.log.end_offset == 50 for r in found) and found
    found = wait_until(caught_up, "both replicas at offset 50")
    leader_index = next(i for i, r in enumerate(found) if r.is_leader)
    leader = list(brokers.values())[leader_index]
    follower_id = list(brokers)[1 - leader_index]
    # The follower fetches over the SSL listener with its own certificate (SASL_SSL: logged
    # in as the broker's user after the TLS handshake).
    inter_broker = [str(c.security.principal) for c in list(leader.server.connections.values())
                    if c.security.listener_name == "SSL"]
    assert (f"User:CN=broker-{follower_id},O=seglog" if protocol == "SSL"
            else "User:broker") in inter_broker
    # A client on the SSL listener is told the SSL endpoints.
    login = {} if protocol == "SSL" else {"sasl.mechanism": "PLAIN", "sasl.username": "broker",
                                          "sasl.password": "broker-secret"}
    over_tls = AdminClient({**login, "bootstrap.servers": list(brokers.values())[0]
                            .listener_bootstrap("SSL"), "security.protocol": protocol,
                            "ssl.ca.location": str(ca.cert_path),
                            "ssl.certificate.location": str(ca.issue("client").cert_path),
                            "ssl.key.location": str(ca.directory / "client.key")})
    listed = over_tls.list_topics(timeout=WAIT_S)
    assert sorted((b.host, b.port) for b in listed.brokers.values()) == sorted(
        b.listener_address("SSL") for b in brokers.values())
