"""``seglog topics describe`` against a three-broker seglog cluster (docs/cli.md): each
partition's leader, replicas and ISR as the brokers hold them, and its size on disk taken from
the broker that holds it (one DescribeLogDirs per broker). A topic of replication factor 1
puts each partition on one broker only, so a size read from the wrong broker (or only from
the bootstrap broker) would be missing or 0."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from confluent_kafka import Producer

from seglog.types import TopicPartition

from test_broker_cluster import create_topic, make_cluster, wait_until  # noqa: F401 - a fixture

SRC_DIR = pathlib.Path(__file__).resolve().parents[2] / "src"
TOPIC = "tool-sizes"
#: Records produced to each partition: different counts, so different sizes.
RECORDS = {0: 5, 1: 40, 2: 120}


def seglog_tool(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m seglog ARGS`` with this checkout's ``src`` first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", "seglog", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def test_describe_reads_each_partitions_size_from_its_broker(make_cluster):
    cluster = make_cluster()
    create_topic(cluster, TOPIC, partitions=3, replication_factor=1)
    leaders = {p: cluster.wait_for_isr(TopicPartition(TOPIC, p), 1) for p in RECORDS}
    # Kafka's assignment spreads the partitions over the brokers, one each here.
    assert sorted(leaders.values()) == [0, 1, 2]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 20000})
    outcomes: list = []
    for partition, count in RECORDS.items():
        for n in range(count):
            producer.produce(TOPIC, b"r%05d" % n, partition=partition,
                             on_delivery=lambda err, msg: outcomes.append(err))
    assert producer.flush(30) == 0
    assert outcomes == [None] * sum(RECORDS.values())

    def sizes_on_disk() -> dict[int, int]:
        return {p: cluster.brokers[leaders[p]].store.topic(TOPIC).log(p).size_bytes
                for p in RECORDS}
    wait_until(lambda: all(sizes_on_disk().values()), "every partition to have bytes")
    expected = sizes_on_disk()
    assert len(set(expected.values())) == 3

    # Bootstrap from one broker only: the tool must still ask the other two.
    ran = seglog_tool("topics", "describe", TOPIC, "-b", cluster.brokers[0].bootstrap,
                      "-o", "json")
    assert ran.returncode == 0, ran.stderr
    (topic,) = json.loads(ran.stdout)["topics"]
    described = {p["partition"]: p for p in topic["partitions"]}
    assert set(described) == set(RECORDS)
    for partition, row in described.items():
        assert row["leader"] == leaders[partition]
        assert row["replicas"] == [leaders[partition]]
        assert row["isr"] == [leaders[partition]]
        assert row["size_bytes"] == expected[partition], partition

    # The plain text: one line per partition with its size, as kafka-topics plus "Size".
    ran = seglog_tool("topics", "describe", TOPIC, "-b", cluster.brokers[1].bootstrap)
    assert ran.returncode == 0, ran.stderr
    for partition, size in expected.items():
        line = next(line for line in ran.stdout.splitlines()
                    if f"Partition: {partition}\t" in line)
        assert f"Leader: {leaders[partition]}" in line and f"Size: {size}" in line, line
