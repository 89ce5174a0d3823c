"""A cluster broker registers in ZooKeeper before it answers clients (Kafka's
``KafkaServer.startup``: bind, register, then process requests): the very first Metadata
answer a freshly started ``seglog serve --zookeeper`` gives lists the broker itself."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from seglog.cluster.local import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")
#: Bound on the broker's start (ZooKeeper session, Store, registration).
START_TIMEOUT_S = 60.0
#: Bound on the broker's clean stop.
STOP_TIMEOUT_S = 30.0


def _metadata_v1_request(correlation_id: int) -> bytes:
    """Metadata v1 for every topic (a null topic array), request header v1."""
    client_id = b"first-metadata"
    body = struct.pack(">hhih", 3, 1, correlation_id, len(client_id)) + client_id
    body += struct.pack(">i", -1)
    return struct.pack(">i", len(body)) + body


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def _brokers_of_metadata_v1(frame: bytes) -> dict[int, tuple[str, int]]:
    """``{node_id: (host, port)}`` from a Metadata v1 response (after the correlation id)."""
    (count,), at = struct.unpack_from(">i", frame, 4), 8
    brokers = {}
    for _ in range(count):
        node_id, host_len = struct.unpack_from(">ih", frame, at)
        at += 6
        host = frame[at:at + host_len].decode()
        at += host_len
        port, rack_len = struct.unpack_from(">ih", frame, at)
        at += 6 + max(rack_len, 0)
        brokers[node_id] = (host, port)
    return brokers


def _first_metadata(port: int, proc: subprocess.Popen) -> dict[int, tuple[str, int]]:
    """Connect in a tight loop (no pause: the earliest moment the port accepts) and return
    the brokers of the first Metadata answer on the first connection."""
    deadline = time.monotonic() + START_TIMEOUT_S
    attempts = 0
    while True:
        attempts += 1
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        except (ConnectionRefusedError, ConnectionResetError):
            if attempts % 1000 == 0:
                assert proc.poll() is None, "the broker exited before it accepted"
                assert time.monotonic() < deadline, "the broker never accepted"
            continue
        with sock:
            sock.settimeout(10)
            sock.sendall(_metadata_v1_request(correlation_id=1))
            size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
            frame = _recv_exactly(sock, size)
        assert struct.unpack_from(">i", frame)[0] == 1
        return _brokers_of_metadata_v1(frame)


def test_first_metadata_answer_of_a_fresh_cluster_broker_lists_itself(tmp_path, zk_connect):
    """Broker 0 of a new cluster, asked for Metadata the moment its port accepts: its answer
    names broker 0 at its advertised address (before the fix it answered with no broker at
    all: it served before its registration reached its metadata cache)."""
    port = free_port()
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, environ.get("PYTHONPATH")]))
    output = tmp_path / "broker.out"
    with open(output, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "seglog", "serve", "--broker-id", "0",
             "--zookeeper", zk_connect, "--listen", f"127.0.0.1:{port}",
             "--data-dir", str(tmp_path / "broker-0"), "--log-level", "WARNING",
             "--config", "zookeeper.session.timeout.ms=4000"],
            stdout=out, stderr=subprocess.STDOUT, env=environ)
    try:
        brokers = _first_metadata(port, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
    assert brokers == {0: ("127.0.0.1", port)}, output.read_text(errors="replace")[-3000:]
