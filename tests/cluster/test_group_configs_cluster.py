"""Group configs (ConfigResource GROUP = 32) in a ZooKeeper cluster: an
IncrementalAlterConfigs on a GROUP resource answered by one broker writes
``/config/groups/<group>`` and a ``/config/changes`` notification; every other broker takes
it (DescribeConfigs, ListConfigResources and the group coordinator's heartbeat interval
there follow), a removal reaches them too, and a restarted broker reads the znodes at
start."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from group_configs_scenario import DELETE, SET, inc, join  # noqa: E402
from test_admin_differential import Client  # noqa: E402
from test_client_metrics_cluster import two_brokers, wait_until  # noqa: E402,F401


def _configs(address: str) -> dict:
    """Every group that sets a config, as one broker describes it."""
    c = Client(address)
    try:
        r = c.call(74, 1, resource_types=(32,))
        d = c.m(32, 4)
        out = {}
        for x in r.config_resources:
            r2 = c.call(32, 4, resources=(d.DescribeConfigsResource(
                resource_type=32, resource_name=x.resource_name, configuration_keys=None),),
                include_synonyms=False, include_documentation=False)
            out[x.resource_name] = {e.name: e.value for e in r2.results[0].configs
                                    if e.config_source == 8}
        return out
    finally:
        c.close()


def _inc(address: str, group_id: str, *changes) -> list:
    c = Client(address)
    try:
        return [(code, message) for code, message, _t, _n in inc(c, group_id, *changes)]
    finally:
        c.close()


def test_group_configs_set_through_one_broker_are_seen_by_another(two_brokers, zk_client):
    cluster = two_brokers
    assert _inc(cluster.address(0), "g", ("consumer.heartbeat.interval.ms", SET, "7000"),
                ("share.auto.offset.reset", SET, "earliest")) == [(0, None)]
    data, _version = zk_client.get_data_and_version("/config/groups/g")
    assert json.loads(data) == {"version": 1, "config": {
        "consumer.heartbeat.interval.ms": "7000", "share.auto.offset.reset": "earliest"}}
    assert "groups/g" in set(zk_client.config_change_notifications().values())
    expected = {"g": {"consumer.heartbeat.interval.ms": "7000",
                      "share.auto.offset.reset": "earliest"}}
    wait_until(lambda: _configs(cluster.address(1)) == expected,
               "broker 1 to see the group configs made through broker 0")
    assert _configs(cluster.address(0)) == expected
    # The group's coordinator (whichever broker it is) gives a joining member the group's
    # heartbeat interval.
    for i in (0, 1):
        c = Client(cluster.address(i))
        try:
            code, interval_ms = join(c, "g")
        finally:
            c.close()
        if code == 0:
            assert interval_ms == 7000
            break
    else:
        raise AssertionError("neither broker coordinates group g")
    # Refused values are refused on a cluster as on a lone broker (nothing written).
    assert _inc(cluster.address(1), "g", ("share.delivery.count.limit", SET, "99")) == [
        (40, "share.delivery.count.limit must be in the range 2 to 10 inclusive.")]

    # Deleting every config through broker 1 ends the group's configs on broker 0.
    assert _inc(cluster.address(1), "g", ("consumer.heartbeat.interval.ms", DELETE, None),
                ("share.auto.offset.reset", DELETE, None)) == [(0, None)]
    wait_until(lambda: _configs(cluster.address(0)) == {},
               "broker 0 to drop the group's configs")

    # A restarted broker reads the znodes at start.
    cluster.stop(1)
    assert _inc(cluster.address(0), "late", ("share.isolation.level", SET,
                                              "read_committed")) == [(0, None)]
    cluster.start(1)
    wait_until(lambda: _configs(cluster.address(1)) == {
        "late": {"share.isolation.level": "read_committed"}},
        "the restarted broker to read the znodes")
