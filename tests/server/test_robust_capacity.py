"""Capacity of one ``seglog serve`` process (issue 11): 1,000 idle client connections held,
1,000 partitions on one broker. What they cost (descriptors, RSS, seconds) is measured in
``seglog bench --only broker`` (its capacity table, the same functions as here); these tests
check that they work: every connection is served, a real client is served meanwhile, every
partition takes and gives back its record (the client checks each), and the broker stops
cleanly over them.

The broker runs as a subprocess (``python -m seglog serve``), so its descriptors are its own;
this process holds the client ends and raises its RLIMIT_NOFILE soft limit for them (skipped
when the hard limit is too low). Every wait is bounded (socket timeouts, client timeouts).
"""

from __future__ import annotations

import resource
import time

import pytest

from seglog.bench import broker as bench
from seglog.bench.scale import nofile_limit_of, open_fds

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.clients

CONNECTIONS = 1_000
PARTITIONS = 1_000
WAIT_S = 60.0


@pytest.fixture
def nofile_for_connections():
    """This process's RLIMIT_NOFILE soft limit raised for CONNECTIONS client sockets (and
    the broker it starts inherits it), restored after."""
    needed = CONNECTIONS + 200
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {needed}")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    try:
        yield needed
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _roundtrip(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Produce ``count`` records (acks=all) and consume them back; the values read."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, b"r%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_thousand_idle_client_connections_are_held_and_served(tmp_path,
                                                                 nofile_for_connections):
    server = bench.SeglogServe(tmp_path / "data", config={"num.partitions": "1"})
    socks: list = []
    try:
        server.start()
        limit = nofile_limit_of(server.pid)
        if limit is not None and limit < nofile_for_connections:
            pytest.skip(f"the broker's RLIMIT_NOFILE {limit} < {nofile_for_connections}")
        socks = bench.hold_connections("127.0.0.1", server.port, CONNECTIONS)
        # The broker holds a descriptor for each (a fact of the kernel, not a timing).
        assert open_fds(server.pid) >= CONNECTIONS
        # A real client is served meanwhile...
        assert _roundtrip(server.bootstrap, "busy", 200) == [b"r%d" % i for i in range(200)]
        # ...and every idle connection still is.
        assert bench.served_count(socks) == CONNECTIONS
    finally:
        bench.close_all(socks)
        code = server.stop()
    assert code == 0, server.log_tail()


@pytest.mark.slow  # the clean stop flushes and closes 1,000 logs: 5-15 s on a busy machine
def test_a_thousand_partitions_created_produced_to_and_consumed_through_a_client(tmp_path):
    server = bench.SeglogServe(tmp_path / "data")
    try:
        server.start()
        limit = nofile_limit_of(server.pid)
        if limit is not None and limit < 2 * PARTITIONS + 200:
            pytest.skip(f"the broker's RLIMIT_NOFILE {limit} < {2 * PARTITIONS + 200}")
        out = bench.run_client("partitions", server.bootstrap, "wide", partitions=PARTITIONS,
                               timeout_s=WAIT_S)
        assert "error" not in out, out
        assert out["partitions"] == PARTITIONS
        # Served as before with them all open.
        assert bench.api_versions_ok("127.0.0.1", server.port)
    finally:
        code = server.stop(timeout_s=WAIT_S)
    assert code == 0, server.log_tail()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert len(list((tmp_path / "data").glob("wide-*"))) == PARTITIONS
