"""Client-metrics subscriptions (KIP-714) in a ZooKeeper cluster: an IncrementalAlterConfigs
on a CLIENT_METRICS resource answered by one broker writes ``/config/client-metrics/<name>``
and a ``/config/changes`` notification; every other broker takes it (DescribeConfigs and
ListConfigResources there show it), a removal reaches them too, and a restarted broker reads
the znodes at start."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from test_admin_differential import Client  # noqa: E402

WAIT_S = 20.0
CLUSTER_CONFIGS = {
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}


def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except OSError:
            value = None  # a restarted broker not listening yet: try again
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


def _alter(address: str, name: str, *configs, op: int = 0) -> list:
    c = Client(address)
    try:
        m = c.m(44, 1)
        r = c.call(44, 1, resources=(m.AlterConfigsResource(
            resource_type=16, resource_name=name, configs=tuple(
                m.AlterableConfig(name=k, config_operation=op, value=v) for k, v in configs)),),
            validate_only=False)
        return [(int(x.error_code), x.error_message) for x in r.responses]
    finally:
        c.close()


def _subscriptions(address: str) -> dict:
    c = Client(address)
    try:
        names = [x.resource_name for x in c.call(74, 0).config_resources]
        d = c.m(32, 4)
        out = {}
        for name in names:
            r = c.call(32, 4, resources=(d.DescribeConfigsResource(
                resource_type=16, resource_name=name, configuration_keys=None),),
                include_synonyms=False, include_documentation=False)
            out[name] = {e.name: e.value for e in r.results[0].configs if e.config_source == 7}
        return out
    finally:
        c.close()


def test_a_subscription_set_through_one_broker_is_seen_by_another(two_brokers, zk_client):
    cluster = two_brokers
    assert _alter(cluster.address(0), "cm", ("interval.ms", "1000"),
                  ("metrics", "org.apache.kafka.producer.")) == [(0, None)]
    data, _version = zk_client.get_data_and_version("/config/client-metrics/cm")
    assert json.loads(data) == {"version": 1, "config": {
        "interval.ms": "1000", "metrics": "org.apache.kafka.producer."}}
    assert "client-metrics/cm" in set(zk_client.config_change_notifications().values())
    expected = {"cm": {"interval.ms": "1000", "metrics": "org.apache.kafka.producer."}}
    wait_until(lambda: _subscriptions(cluster.address(1)) == expected,
               "broker 1 to see the subscription made through broker 0")
    assert _subscriptions(cluster.address(0)) == expected
    # Refused values are refused on a cluster as on a lone broker (nothing written).
    assert _alter(cluster.address(1), "cm", ("interval.ms", "5"))[0][0] == 42

    # A removal of every config through broker 1 ends the subscription on broker 0.
    assert _alter(cluster.address(1), "cm", ("interval.ms", None), ("metrics", None),
                  op=1) == [(0, None)]
    wait_until(lambda: _subscriptions(cluster.address(0)) == {},
               "broker 0 to drop the subscription")

    # A restarted broker reads the znodes at start.
    cluster.stop(1)
    assert _alter(cluster.address(0), "late", ("match", "client_id=x")) == [(0, None)]
    cluster.start(1)
    wait_until(lambda: _subscriptions(cluster.address(1)) == {"late": {"match": "client_id=x"}},
               "the restarted broker to read the znodes")
