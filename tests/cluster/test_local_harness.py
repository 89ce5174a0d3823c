"""The cluster harness end to end on one real broker process, before any replication: the
workload's real clients record a history the checker passes, and a real loss on disk (the
tail of a log cut on a stopped broker, R§6.2's "lost unflushed data") is caught as lost-write
and committed-read-lost; the network-fault primitive (a namespace with nft drop rules) drops
what it should and nothing else."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from harness import checker, faults, workload
from harness.history import History, load
from seglog.bench.broker import SeglogServe

TOPIC = "harness"
PARTITIONS = [0, 1, 2]
#: Sends per run: enough for several batches per partition, small enough for ~3 s.
SENDS = 300


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1,
                 config: dict | None = None, timeout_s: float = 20.0) -> None:
    """CreateTopics through confluent-kafka's admin client, bounded."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication,
                                            config=config or {})],
                                  operation_timeout=timeout_s, request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout=timeout_s)


def run_workload(history: History, bootstrap: str, sends: int = SENDS,
                 client: str = "confluent") -> None:
    values = workload.Values()
    consumer = workload.Consumer(history, bootstrap, TOPIC, PARTITIONS, duration_s=30)
    producer_class = {"confluent": workload.Producer,
                      "kafka-python": workload.KafkaPythonProducer}[client]
    producer = producer_class(history, bootstrap, TOPIC, PARTITIONS, values,
                              count=sends, duration_s=20, interval_s=0.002)
    consumer.start()
    producer.start()
    producer.join(timeout=60)
    deadline = time.monotonic() + 10
    while consumer.polled < producer.outcomes["ok"] and time.monotonic() < deadline:
        time.sleep(0.05)
    consumer.stop()
    consumer.join(timeout=30)
    assert not producer.is_alive() and not consumer.is_alive()
    assert producer.error is None and consumer.error is None
    assert producer.outcomes == {"ok": sends, "fail": 0, "info": 0}, producer.errors


@pytest.fixture
def broker(tmp_path):
    serve = SeglogServe(tmp_path / "data")
    serve.start()
    try:
        yield serve
    finally:
        serve.stop()


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_clean_run_passes_the_checker(tmp_path, broker, client):
    create_topic(broker.bootstrap, TOPIC, len(PARTITIONS))
    with History(tmp_path / "history.jsonl") as history:
        run_workload(history, broker.bootstrap, client=client)
        counts = workload.final_read(history, broker.bootstrap, TOPIC, PARTITIONS)
        assert sum(counts.values()) == SENDS
        broker.stop()
        workload.read_replicas(history, {0: str(broker.data_dir)}, TOPIC,
                               {p: [0] for p in PARTITIONS})
    events = load(tmp_path / "history.jsonl")
    result = checker.check(events)
    assert result.valid, result.summary()
    assert result.notes == [], result.summary()
    replicas = [e for e in events if e["f"] == "replica"]
    assert len(replicas) == len(PARTITIONS)
    for replica in replicas:  # the files hold every record the final read saw, in order
        final = next(e for e in events if e["f"] == "final-read"
                     and e["partition"] == replica["partition"])
        assert replica["log_end_offset"] == len(final["records"])
        assert replica["batches"][0][0] == 0


def test_a_log_tail_cut_on_disk_is_caught(tmp_path, broker):
    """The harness's own negative control on a real broker: records acknowledged and polled,
    then cut from the log of the stopped broker, must show up as lost-write and
    committed-read-lost (and nothing else)."""
    create_topic(broker.bootstrap, TOPIC, len(PARTITIONS))
    history = History(tmp_path / "history.jsonl")
    run_workload(history, broker.bootstrap)
    broker.stop()
    # One batch: under load librdkafka may have put all of partition 0's records in one or
    # two batches (seen in CI), and cutting the last batch is the fault either way.
    cut_from = faults.cut_log_tail(broker.data_dir, TOPIC, 0, batches=1)
    broker.start()
    workload.final_read(history, broker.bootstrap, TOPIC, PARTITIONS)
    history.close()
    result = checker.check(history.events)
    assert result.kinds() == {"lost-write", "committed-read-lost"}, result.summary()
    lost = result.of_kind("lost-write")
    assert {a.partition for a in lost} == {0}
    assert min(a.offset for a in lost) == cut_from


def test_cut_log_tail_refuses_more_batches_than_there_are(tmp_path, broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(TOPIC, b"1", partition=0)
    assert producer.flush(20) == 0
    broker.stop()
    with pytest.raises(ValueError, match="fewer than"):
        faults.cut_log_tail(broker.data_dir, TOPIC, 0, batches=2)


NETWORK_UNAVAILABLE = faults.network_faults_available()


@pytest.mark.skipif(NETWORK_UNAVAILABLE is not None, reason=str(NETWORK_UNAVAILABLE))
def test_network_namespace_drops_one_direction_only():
    """A one-way nft drop from 127.0.0.12 to 127.0.0.11 inside a private namespace: that
    connection times out, the same server stays reachable from 127.0.0.13, and heal lets
    127.0.0.12 through again."""
    server = ("import socket, sys, time\n"
              "s = socket.socket(); s.bind(('127.0.0.11', 7000)); s.listen(16)\n"
              "print('ready', flush=True)\n"
              "end = time.monotonic() + 30\n"
              "s.settimeout(1)\n"
              "while time.monotonic() < end:\n"
              "    try:\n"
              "        c, _ = s.accept(); c.close()\n"
              "    except OSError:\n"
              "        pass\n")
    client = ("import socket, sys\n"
              "c = socket.socket(); c.bind((sys.argv[1], 0)); c.settimeout(1.5)\n"
              "try:\n"
              "    c.connect(('127.0.0.11', 7000)); print('connected')\n"
              "except OSError as e:\n"
              "    print('failed', type(e).__name__)\n")
    with faults.NetworkNamespace() as namespace:
        listener = subprocess.Popen(namespace.exec_prefix() + [sys.executable, "-c", server],
                                    stdout=subprocess.PIPE, text=True)
        try:
            assert listener.stdout.readline().strip() == "ready"

            def connect(source: str) -> str:
                return subprocess.run(namespace.exec_prefix() + [sys.executable, "-c", client,
                                                                 source],
                                      capture_output=True, text=True, timeout=20).stdout.strip()

            assert connect("127.0.0.12") == "connected"
            namespace.drop("127.0.0.12", "127.0.0.11")
            assert connect("127.0.0.12").startswith("failed")
            assert connect("127.0.0.13") == "connected"
            namespace.heal()
            assert connect("127.0.0.12") == "connected"
        finally:
            listener.kill()
            listener.wait(timeout=10)


def test_relay_forwards_holds_while_blocked_and_delivers_after_heal():
    """The fault relay: bytes pass both ways; blocked, a connection stays open and nothing
    comes through (in either direction) until heal, when the held bytes arrive in order."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server, \
            faults.Relay(server.getsockname()) as relay:
        client = socket.create_connection(("127.0.0.1", relay.port), timeout=10)
        upstream, _ = server.accept()
        upstream.settimeout(10)
        try:
            client.sendall(b"ping")
            assert upstream.recv(16) == b"ping"
            upstream.sendall(b"pong")
            assert client.recv(16) == b"pong"

            relay.block()
            client.sendall(b"held-1")
            upstream.sendall(b"held-2")
            for sock in (client, upstream):
                sock.settimeout(0.5)
                with pytest.raises(socket.timeout):
                    sock.recv(16)
                sock.settimeout(10)
            relay.heal()
            assert upstream.recv(16) == b"held-1"
            assert client.recv(16) == b"held-2"
        finally:
            client.close()
            upstream.close()
