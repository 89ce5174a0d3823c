"""Client quotas in a ZooKeeper cluster (issue 23): an AlterClientQuotas answered by one broker
writes Kafka 2.x's znodes (``/config/clients/<c>``, ``/config/users/<u>``,
``/config/users/<u>/clients/<c>``, ``/config/ips/<ip>``) and a ``/config/changes``
notification, and every other broker takes it (DescribeClientQuotas there shows it, and its
quota managers apply it). A user's znode keeps what else it holds (SCRAM credentials): only
the quota keys are changed, and they are the only ones described."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from seglog.cluster import zk_data

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from quota_helpers import RawClient, alter_quotas, describe_quotas  # noqa: E402

WAIT_S = 20.0
SCRAM = "salt=c2FsdA==,stored_key=a2V5,server_key=c2s=,iterations=4096"
CLUSTER_CONFIGS = {
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
        time.sleep(0.1)


@pytest.fixture
def two_brokers(tmp_path, zk_connect):
    from seglog.cluster.local import LocalCluster

    with LocalCluster(tmp_path, 2, zookeeper=zk_connect,
                      broker_configs=CLUSTER_CONFIGS) as cluster:
        yield cluster


def _znode(zk_client, path: str) -> dict | None:
    data, _version = zk_client.get_data_and_version(path)
    return None if data is None else json.loads(data)


def test_a_quota_altered_through_one_broker_applies_on_another(two_brokers, zk_client):
    cluster = two_brokers
    # Another writer's key in the user's znode (SASL/SCRAM keeps credentials there).
    zk_client.create_recursive("/config/users/alice", zk_data.encode_entity_config(
        {"SCRAM-SHA-256": SCRAM}))
    with RawClient(cluster.address(0)) as c:
        assert alter_quotas(c, [
            ([("client-id", "c1")], {"producer_byte_rate": 1024}),
            ([("user", "alice")], {"consumer_byte_rate": 2048, "request_percentage": 12.5}),
            ([("user", "alice"), ("client-id", "c 1*")], {"producer_byte_rate": 64}),
            ([("user", None)], {"producer_byte_rate": 10}),
            ([("ip", "127.0.0.9")], {"connection_creation_rate": 7}),
        ]) == sorted([((("client-id", "c1"),), 0, None),
                      ((("user", "alice"),), 0, None),
                      ((("client-id", "c 1*"), ("user", "alice")), 0, None),
                      ((("user", "<default>"),), 0, None),
                      ((("ip", "127.0.0.9"),), 0, None)], key=repr)
    expected = sorted([
        ((("client-id", "c1"),), {"producer_byte_rate": 1024.0}),
        ((("user", "alice"),), {"consumer_byte_rate": 2048.0, "request_percentage": 12.5}),
        ((("client-id", "c 1*"), ("user", "alice")), {"producer_byte_rate": 64.0}),
        ((("user", "<default>"),), {"producer_byte_rate": 10.0}),
        ((("ip", "127.0.0.9"),), {"connection_creation_rate": 7.0}),
    ], key=repr)
    with RawClient(cluster.address(1)) as other:
        wait_until(lambda: describe_quotas(other)[2] == expected,
                   "broker 1 to describe the quotas set through broker 0")
    # Kafka 2.x's znodes: sanitized names, string values, the user's other keys kept.
    assert _znode(zk_client, "/config/clients/c1") == {
        "version": 1, "config": {"producer_byte_rate": "1024"}}
    assert _znode(zk_client, "/config/users/alice")["config"] == {
        "SCRAM-SHA-256": SCRAM, "consumer_byte_rate": "2048", "request_percentage": "12.5"}
    assert _znode(zk_client, "/config/users/alice/clients/c%201%2A")["config"] == {
        "producer_byte_rate": "64"}
    assert _znode(zk_client, "/config/users/<default>")["config"] == {
        "producer_byte_rate": "10"}
    assert _znode(zk_client, "/config/ips/127.0.0.9")["config"] == {
        "connection_creation_rate": "7"}
    changes = set(zk_client.config_change_notifications().values())
    assert {"clients/c1", "users/alice", "users/alice/clients/c%201%2A", "users/<default>",
            "ips/127.0.0.9"} <= changes

    # A removal through broker 1 reaches broker 0; the SCRAM key stays.
    with RawClient(cluster.address(1)) as c:
        assert alter_quotas(c, [([("user", "alice")], {"consumer_byte_rate": None,
                                                       "request_percentage": None})]) == [
            ((("user", "alice"),), 0, None)]
    assert _znode(zk_client, "/config/users/alice")["config"] == {"SCRAM-SHA-256": SCRAM}
    with RawClient(cluster.address(0)) as first:
        wait_until(lambda: (("user", "alice"),) not in
                   [entity for entity, _ in describe_quotas(first)[2]],
                   "broker 0 to drop alice's quotas")

    # A restarted broker reads every quota znode at start.
    cluster.stop(1)
    with RawClient(cluster.address(0)) as c:
        assert alter_quotas(c, [([("client-id", "late")], {"consumer_byte_rate": 5})])[0][1] == 0
    cluster.start(1)
    with RawClient(cluster.address(1)) as other:
        wait_until(lambda: ((("client-id", "late"),), {"consumer_byte_rate": 5.0})
                   in describe_quotas(other)[2], "the restarted broker to read the znodes")


def test_entity_znodes_and_change_paths_are_kafkas():
    from seglog.cluster import client_quotas_zk as zk_quotas

    # Kafka's Sanitizer: URL encoding with * as %2A and space as %20.
    assert zk_data.sanitize("a b*c/d~é") == "a%20b%2Ac%2Fd%7E%C3%A9"
    assert zk_data.desanitize("a%20b%2Ac%2Fd%7E%C3%A9") == "a b*c/d~é"
    cases = [
        ((("user", "alice"),), "users/alice"),
        ((("user", None),), "users/<default>"),
        ((("user", "a/b"), ("client-id", None)), "users/a%2Fb/clients/<default>"),
        ((("client-id", "c 1"),), "clients/c%201"),
        ((("ip", "10.0.0.1"),), "ips/10.0.0.1"),
        ((("ip", None),), "ips/<default>"),
    ]
    for entity, path in cases:
        assert zk_quotas.entity_znode(entity) == path
        entity_type, _, name = path.partition("/")
        assert zk_quotas.entity_of_change(entity_type, name) == entity
    for entity_type, name in (("users", ""), ("users", "a/b"), ("users", "a/clients/"),
                              ("users", "a/clients/b/c"), ("clients", "a/b"), ("groups", "g")):
        assert zk_quotas.entity_of_change(entity_type, name) is None
    with pytest.raises(ValueError):
        zk_quotas.entity_znode((("ip", "1.2.3.4"), ("user", "u")))
