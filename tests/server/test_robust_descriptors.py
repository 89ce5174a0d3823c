"""A ``seglog serve`` process that runs out of file descriptors (its RLIMIT_NOFILE lowered
from outside with prlimit, as a small ``ulimit -n`` would): failed accepts (EMFILE) leave the
connections in the listen backlog, accepted and served once descriptors are free (Kafka's
Acceptor also logs the failed accept and goes on); a topic created and written to at the limit
fails alone (with issue 14's lazy segments the create succeeds and appends that cannot open
a segment fail), is created whole or not at all, and keeps every acknowledged record. Every
wait is bounded (socket timeouts, deadlines, client timeouts).
"""

from __future__ import annotations

import resource
import socket
import struct
import time

import pytest

from seglog.bench import broker as bench
from seglog.bench.scale import open_fds

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.clients

#: Descriptors the broker may open beyond what it holds when the limit is lowered.
HEADROOM = 20
WAIT_S = 30.0


def _wait_for_log(server: bench.SeglogServe, text: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while text not in server.log_tail(400):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never logged:\n{server.log_tail(20)}")
        time.sleep(0.05)


def _answer(sock: socket.socket, correlation_id: int) -> bool:
    size = struct.unpack(">i", bench._recv_exactly(sock, 4))[0]
    return struct.unpack_from(">ih", bench._recv_exactly(sock, size)) == (correlation_id, 0)


def _produce_one_each(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """One record to each partition; ``{partition: offset}`` of those acknowledged."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "message.timeout.ms": 10_000, "retries": 0})
    acked: dict[int, int] = {}

    def report(err, msg) -> None:
        if err is None:
            acked[msg.partition()] = msg.offset()

    for partition in range(partitions):
        producer.produce(topic, b"r", partition=partition, on_delivery=report)
    producer.flush(WAIT_S)
    return acked


def test_out_of_descriptors_the_broker_carries_on(tmp_path):
    if not hasattr(resource, "prlimit"):
        pytest.skip("needs resource.prlimit (Linux)")
    server = bench.SeglogServe(tmp_path / "data")
    socks: list[socket.socket] = []
    try:
        server.start()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        low = open_fds(server.pid) + HEADROOM
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (low, hard))

        # More connections than descriptors: accept fails (EMFILE) for the ones past the
        # limit; they wait in the listen backlog.
        for index in range(HEADROOM + 10):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
            sock.settimeout(WAIT_S)
            socks.append(sock)
            frame = struct.pack(">hhih", 18, 0, index, 4) + b"test"
            sock.sendall(struct.pack(">i", len(frame)) + frame)
        _wait_for_log(server, "Too many open files")
        # Descriptors again: every connection is accepted and answered.
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (soft, hard))
        for index, sock in enumerate(socks):
            assert _answer(sock, index), index
        bench.close_all(socks)
        socks = []

        # A topic whose partitions need more descriptors than are left, created and written
        # to: whatever fails (the create, or appends when segments open lazily) fails alone;
        # the topic is created whole or not at all, and every acknowledged record is kept.
        deadline = time.monotonic() + WAIT_S
        while open_fds(server.pid) > low - HEADROOM and time.monotonic() < deadline:
            time.sleep(0.05)  # the closed connections' descriptors go
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (open_fds(server.pid) + 10, hard))
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        future = admin.create_topics([NewTopic("wide", 50, 1)], request_timeout=WAIT_S)["wide"]
        try:
            future.result(timeout=WAIT_S)
            created = True
        except confluent_kafka.KafkaException:
            created = False
        acked = _produce_one_each(server.bootstrap, "wide", 50) if created else {}
        assert bench.api_versions_ok("127.0.0.1", server.port, timeout_s=WAIT_S)
        dirs = len(list((tmp_path / "data").glob("wide-*")))
        assert dirs == (50 if created else 0)

        # With descriptors again: the topic is there (or is created now), whole, and
        # keeps what was acknowledged.
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (soft, hard))
        if not created:
            admin.create_topics([NewTopic("wide", 50, 1)],
                                request_timeout=WAIT_S)["wide"].result(timeout=WAIT_S)
        assert len(admin.list_topics(timeout=WAIT_S).topics["wide"].partitions) == 50
        assert _produce_one_each(server.bootstrap, "wide", 50) == \
            {p: (1 if p in acked else 0) for p in range(50)}
    finally:
        bench.close_all(socks)
        code = server.stop()
    assert code == 0, server.log_tail()
