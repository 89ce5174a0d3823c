"""A cluster broker's operator log (issue 26): ``--log-format json`` through ``LocalCluster``
(``seglog cluster up --log-format``), the brokers' start reported to ``on_progress``, and a
peer that is down logged once, not every second (seglog.log_limits)."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from seglog.cluster.local import LocalCluster

CLUSTER_MODE = all(importlib.util.find_spec(name) is not None for name in (
    "seglog.cluster.zk_client", "seglog.cluster.replica_manager"))
#: How long broker 1 stays down: several of the fetcher's 1 s backoffs.
DOWN_S = 6.0


def _records(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()
            if line.strip()]


@pytest.mark.skipif(not CLUSTER_MODE, reason="no cluster mode")
def test_json_logs_progress_and_a_down_peer_logged_once(tmp_path, zookeeper, zk_connect):
    from confluent_kafka.admin import AdminClient, NewTopic

    ready: list[tuple[int, int]] = []
    cluster = LocalCluster(tmp_path, 2, zookeeper=zk_connect, log_format="json",
                           broker_configs={"zookeeper.session.timeout.ms": 4000})
    cluster.up(on_progress=lambda done, total: ready.append((done, total)))
    try:
        assert ready == [(1, 2), (2, 2)]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("ops-cluster", 1, 2)])["ops-cluster"].result(timeout=30)
        log0 = cluster.brokers[0].log_path
        deadline = time.monotonic() + 30
        while not any("follower of ops-cluster-0" in r["message"] or "leader of ops-cluster-0"
                      in r["message"] for r in _records(log0)) and time.monotonic() < deadline:
            time.sleep(0.2)
        records = _records(log0)  # every line of the broker's log is JSON
        assert any(r["message"] == "Started with no partitions on disk" for r in records)
        # The follower's replica fetcher retries its leader, killed, every second.
        state = cluster.zookeeper_view()
        assert state is not None
        leader = next(p.leader for p in state.partitions if p.topic == "ops-cluster")
        follower = 1 - leader
        follower_log = cluster.brokers[follower].log_path
        cluster.kill(leader)
        time.sleep(DOWN_S)
        retries = [r["message"] for r in _records(follower_log)
                   if f"replica fetcher for broker {leader}:" in r["message"]]
        # Without the limit: one line per 1 s backoff, several by now. With it, each distinct
        # line once: the leader going away is at most three pieces of news in this window
        # (the connection lost, the reconnect refused, and once the leader's ZooKeeper session
        # has expired and the controller's metadata says so, the broker no longer known),
        # whichever of them come before the follower is elected leader itself.
        assert 1 <= len(retries) <= 3, retries
        assert len(set(retries)) == len(retries), retries
    finally:
        cluster.down()
