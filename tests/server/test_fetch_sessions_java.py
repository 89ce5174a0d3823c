"""Fetch sessions with a real client that uses them: Kafka 4.4's Java consumer (its
``FetchSessionHandler``: a full fetch, then incremental ones) reads 50 partitions of
``seglog serve`` through data produced before and while it runs; the broker's session
counters show that its fetches after the first were incremental, in one session of all 50
partitions (which the consumer closes, with epoch -1, when it ends)."""

from __future__ import annotations

import subprocess
import time

import pytest

PARTITIONS = 50
PER_ROUND = 2  # records per partition per round
WAIT_S = 60.0


def _produce(bootstrap, topic, round_index):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in range(PARTITIONS):
        for i in range(PER_ROUND):
            producer.produce(topic, value=f"r{round_index}-p{partition}-{i}".encode(),
                             partition=partition)
    assert producer.flush(30) == 0


@pytest.mark.kafka
@pytest.mark.slow  # a JVM consumer starts in a few seconds
def test_java_consumer_reads_50_partitions_through_one_incremental_session(broker, tmp_path):
    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    topic = "many"
    broker.store.create_topic(topic, PARTITIONS)
    _produce(broker.bootstrap, topic, 0)
    total = PARTITIONS * PER_ROUND * 2
    cmd = ref.java_command(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
         "--max-messages", str(total), "--timeout-ms", "30000",
         "--command-property", "fetch.max.wait.ms=100"], run_dir=tmp_path)
    consumer = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    manager = None
    try:
        # Wait (bounded) until the consumer fetches incrementally, then produce the second
        # round: it must reach the consumer through the session.
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and consumer.poll() is None:
            manager = broker.state.extensions.get("seglog.server.fetch_sessions")
            if manager is not None and manager.counts["incremental"] >= 3:
                break
            time.sleep(0.2)
        assert manager is not None and manager.counts["incremental"] >= 3, \
            consumer.stderr.read() if consumer.poll() is not None else "no incremental fetch"
        incremental_before = manager.counts["incremental"]
        # (read now: the consumer closes its session when it ends)
        sizes = [len(s.partitions) for shard in manager.shards for s in shard.sessions.values()]
        _produce(broker.bootstrap, topic, 1)
        out, err = consumer.communicate(timeout=WAIT_S)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(timeout=10)
    assert consumer.returncode == 0, err[-2000:]
    want = {f"r{r}-p{p}-{i}" for r in range(2) for p in range(PARTITIONS)
            for i in range(PER_ROUND)}
    assert sorted(out.splitlines()) == sorted(want)
    counts = manager.counts
    # One full fetch opened the session (a rejoin may open one more); the rest incremental.
    assert 1 <= counts["full"] <= 3 and counts["error"] == 0
    assert counts["incremental"] > incremental_before
    assert PARTITIONS in sizes
