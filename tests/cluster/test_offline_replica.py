"""Issue 23 in a ZooKeeper cluster: a follower whose replica's files fail to load stays up,
does not host that replica (the leader drops it from the ISR), and after ``seglog recover``
and a restart fetches what was cut from the leader and rejoins the ISR. Two brokers, RF 2,
real clients (confluent-kafka)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import seglog
from seglog.cluster.local import LocalCluster

from test_local import needs_cluster_mode

SRC = str(Path(__file__).resolve().parents[2] / "src")
RECORDS = 30
WAIT_S = 60


def _wait(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _produce(bootstrap: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list = []
    for value in values:
        producer.produce("t", value, partition=0,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
        producer.flush(30)  # one batch per record: the follower's segment has many
    assert producer.flush(30) == 0 and not errors, errors


def _batch_starts(path: str) -> list[int]:
    data = open(path, "rb").read()
    starts, pos = [], 0
    while pos + 12 <= len(data):
        starts.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return starts


def _records(data_dir: str) -> list[bytes]:
    with seglog.Store(data_dir, read_only=True) as store:
        return [r.value for r in store.topic("t").log(0).records()]


@needs_cluster_mode
def test_an_offline_follower_replica_is_recovered_and_fetches_again(tmp_path, zookeeper,
                                                                     zk_connect):
    from confluent_kafka.admin import AdminClient, NewTopic

    with LocalCluster(tmp_path, 2, zookeeper=zk_connect,
                      broker_configs={"zookeeper.session.timeout.ms": 4000,
                                      "replica.lag.time.max.ms": 3000}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic("t", 1, 2)]).values():
            future.result(timeout=30)
        state = _wait(lambda: cluster.partition_state("t", 0), "t-0 has a state")
        _wait(lambda: len((cluster.partition_state("t", 0) or {}).get("isr", [])) == 2,
              "both replicas in sync")
        _produce(cluster.bootstrap_servers, [b"v%d" % i for i in range(RECORDS)])
        leader = state["leader"]
        follower = 1 - leader
        follower_dir = cluster.brokers[follower].data_dir
        _wait(lambda: len(glob.glob(os.path.join(follower_dir, "t-0", "*.log"))) > 0,
              "the follower has a segment")
        time.sleep(1)  # the follower fetched everything (acks=all)
        assert cluster.stop(follower) == 0
        # The follower loses its last five flushed batches, and its epoch checkpoint breaks.
        log_path = sorted(glob.glob(os.path.join(follower_dir, "t-0", "*.log")))[-1]
        os.truncate(log_path, _batch_starts(log_path)[-5])
        with open(os.path.join(follower_dir, "t-0", "leader-epoch-checkpoint"), "w") as f:
            f.write("0\n1\ngarbage\n")
        cluster.start(follower)
        # Up, registered, but not hosting the replica: the leader drops it from the ISR.
        _wait(lambda: (cluster.partition_state("t", 0) or {}).get("isr") == [leader],
              "the leader shrinks the ISR to itself")
        # The broker whose replica is offline still names the partition's leader in its
        # Metadata (every broker knows every partition's state, as Kafka's metadata cache),
        # with itself among the offline replicas.
        follower_admin = AdminClient({"bootstrap.servers": cluster.address(follower)})
        _wait(lambda: follower_admin.list_topics("t", timeout=10).topics["t"]
              .partitions[0].leader == leader, "the offline broker names the leader")
        _produce(cluster.bootstrap_servers, [b"w%d" % i for i in range(5)])
        output = Path(cluster.brokers[follower].log_path).read_text()
        assert "t-0 is offline" in output
        assert cluster.stop(follower) == 0

        result = subprocess.run(
            [sys.executable, "-m", "seglog", "recover", "--data-dir", follower_dir,
             "--topic", "t", "--partition", "0"], capture_output=True, text=True,
            timeout=120, env={**os.environ, "PYTHONPATH": SRC})
        assert result.returncode == 0, result.stderr
        assert f"t-0: ends at offset {RECORDS - 5}" in result.stdout

        cluster.start(follower)
        _wait(lambda: sorted((cluster.partition_state("t", 0) or {}).get("isr", []))
              == [0, 1], "the recovered follower rejoins the ISR")
        assert cluster.stop(follower) == 0
        expected = [b"v%d" % i for i in range(RECORDS)] + [b"w%d" % i for i in range(5)]
        assert _records(follower_dir) == expected
