"""A partition moved between log dirs (AlterReplicaLogDirs) while a real producer writes to
it loses nothing and duplicates nothing, on both storage backends; the broker is
``seglog serve``'s with two entries in ``log.dirs``."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BACKENDS = ("native", "pure")  # as tests/server/conftest.py (not importable by name in a whole run)
from test_admin_differential import Client

WAIT_S_MAX = 60
MESSAGES_MAX = 100_000  # the producer's bound; it stops long before


def _wait(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S_MAX
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_move_between_log_dirs_under_produce_load_loses_nothing(broker_factory, tmp_path,
                                                                  backend):
    dirs = (tmp_path / "a", tmp_path / "b")
    broker = broker_factory(data_dir=dirs[0], backend=backend, config={
        "log.dirs": ",".join(str(d) for d in dirs), "log.segment.bytes": 16384})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("mv", 1, 1)])["mv"].result(timeout=30)
    assert broker.store.log_dir_of(("mv", 0)) == str(dirs[0])
    acked: list[int] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 1,
                             "batch.size": 2000})

        def delivered(err, msg) -> None:
            if err is None:
                acked.append(int(msg.value()))
            else:
                failed.append(str(err))

        for i in range(MESSAGES_MAX):
            if stop.is_set():
                break
            while True:
                try:
                    producer.produce("mv", str(i).encode(), partition=0, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            if i % 50 == 0:
                time.sleep(0.001)  # a steady load, not a flood
        assert producer.flush(WAIT_S_MAX) == 0

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        _wait(lambda: len(acked) >= 500, "the first acknowledgements")
        c = Client(broker.bootstrap)
        m = c.m(34, 2)
        r = c.call(34, 2, dirs=(m.AlterReplicaLogDir(path=str(dirs[1]), topics=(
            m.AlterReplicaLogDirTopic(name="mv", partitions=(0,)),)),))
        c.close()
        assert [p.error_code for t in r.results for p in t.partitions] == [0]
        _wait(lambda: broker.store.log_dir_of(("mv", 0)) == str(dirs[1]), "the move")
        moved_at = len(acked)
        _wait(lambda: len(acked) >= moved_at + 500, "acknowledgements after the move")
    finally:
        stop.set()
        writer.join(WAIT_S_MAX)
    assert not writer.is_alive()
    assert failed == []
    assert not (dirs[0] / "mv-0").exists()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["mv"])
    values: list[int] = []
    deadline = time.monotonic() + WAIT_S_MAX
    while len(values) < len(acked) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(int(msg.value()))
    consumer.close()
    # Every acknowledged record once, in the order produced (idempotence keeps the order).
    assert values == sorted(acked) == list(range(len(acked)))


def test_the_broker_stops_when_every_log_dir_failed(broker_factory, tmp_path):
    """Kafka's rule: a failed dir takes its partitions offline, the last one the broker."""
    import socket

    dirs = (tmp_path / "a", tmp_path / "b")
    broker = broker_factory(data_dir=dirs[0], config={
        "log.dirs": ",".join(str(d) for d in dirs), "log.retention.check.interval.ms": 50})
    broker.store.create_topic("t", 2)
    manager = broker.store._logs  # the storage's own failure path, as an I/O error takes it
    with pytest.warns(RuntimeWarning, match="offline"):
        manager.fail_dir(manager.dirs[1], "an I/O error")
    time.sleep(0.3)  # several maintenance rounds: one dir still serves
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5):
        pass
    assert broker.store.topic("t").log(0).append(b"x") == 0
    with pytest.warns(RuntimeWarning, match="offline"):
        manager.fail_dir(manager.dirs[0], "an I/O error")

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()
        except OSError:
            return True
        return False

    _wait(refused, "the broker to stop")
