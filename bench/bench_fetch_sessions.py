"""What fetch sessions (KIP-227) save on an idle fetch of 1,000 partitions.

Not a test. Starts ``seglog serve`` (a subprocess, so its CPU time is its own), makes a topic
of ``--partitions`` partitions with one record each, and sends idle fetches (every partition
caught up, ``max_wait_ms`` 0) over one raw connection, at Fetch v12 (topic names) and v16
(topic ids), in two modes:

- ``sessionless``: full requests (session epoch -1), every partition named and answered;
- ``incremental``: one full request opens a session (epoch 0), then incremental requests
  (epochs 1, 2, ...) that name nothing and are answered with no partition.

Prints, per mode and version, the request and response bytes of one fetch (frames with
their headers and length prefixes) and the broker's CPU per fetch (user + system time of
the ``seglog serve`` process from ``/proc``, over ``--fetches`` fetches, divided).

    PYTHONPATH=src python bench/bench_fetch_sessions.py [--partitions 1000] [--fetches 200]
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid

from kio.serial import entity_reader, entity_writer

from seglog.schemas import load_request_schema, load_response_schema
from seglog.server.apis.data_metadata import build

TOPIC = "s"


class Wire:
    """One connection speaking Kafka's framing with kio's classes; counts frame bytes."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation_id = 0
        self.sent_bytes = 0
        self.received_bytes = 0

    def _recv(self, size_bytes: int) -> bytes:
        out = bytearray()
        while len(out) < size_bytes:
            chunk = self.sock.recv(size_bytes - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    def module(self, key: int, version: int):
        return __import__(load_request_schema(key, version).__module__, fromlist=["_"])

    def encode(self, key: int, version: int, **fields) -> bytes:
        cls = load_request_schema(key, version)
        self.correlation_id += 1
        head = struct.pack(">hhih", key, version, self.correlation_id, 5) + b"bench"
        if cls.__flexible__:
            head += b"\x00"
        body = io.BytesIO()
        entity_writer(cls)(body, build(cls, **fields))
        frame = head + body.getvalue()
        return struct.pack(">i", len(frame)) + frame

    def call_frame(self, key: int, version: int, frame: bytes):
        self.sock.sendall(frame)
        self.sent_bytes += len(frame)
        size = struct.unpack(">i", self._recv(4))[0]
        data = self._recv(size)
        self.received_bytes += 4 + size
        response_cls = load_response_schema(key, version)
        response, _ = entity_reader(response_cls)(
            memoryview(data), 4 + (1 if response_cls.__flexible__ else 0))
        return response

    def call(self, key: int, version: int, **fields):
        return self.call_frame(key, version, self.encode(key, version, **fields))


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _setup(w: Wire, partitions: int) -> uuid.UUID:
    m = w.module(19, 7)
    r = w.call(19, 7, topics=(build(m.CreatableTopic, name=TOPIC, num_partitions=partitions,
                                    replication_factor=1, assignments=(), configs=()),),
               timeout=datetime.timedelta(seconds=30), validate_only=False)
    assert int(r.topics[0].error_code) == 0, r
    topic_id = r.topics[0].topic_id
    from seglog import get_backend
    batch = get_backend("native").encode_batch([b"x" * 100], None, None, None, base_offset=0)
    m = w.module(0, 9)
    r = w.call(0, 9, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
               topic_data=(build(m.TopicProduceData, name=TOPIC, partition_data=tuple(
                   build(m.PartitionProduceData, index=p, records=batch)
                   for p in range(partitions))),))
    assert all(int(p.error_code) == 0 for t in r.responses for p in t.partition_responses)
    return topic_id


def _fetch_frame(w: Wire, version: int, topic_id: uuid.UUID, partitions: int, *,
                 session_id: int, epoch: int, named: bool) -> bytes:
    m = w.module(1, version)
    key = {"topic_id": topic_id} if version >= 13 else {"topic": TOPIC}
    topics = (build(m.FetchTopic, **key, partitions=tuple(build(
        m.FetchPartition, partition=p, fetch_offset=1, partition_max_bytes=1 << 20,
        current_leader_epoch=-1, log_start_offset=-1) for p in range(partitions))),) \
        if named else ()
    extra = {}
    if version >= 15:
        extra["replica_state"] = build(m.ReplicaState, replica_id=-1, replica_epoch=-1)
    return w.encode(1, version, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
                    max_bytes=50 << 20, isolation_level=0, session_id=session_id,
                    session_epoch=epoch, topics=topics, forgotten_topics_data=(),
                    rack_id="", **extra)


def _measure(w: Wire, pid: int, version: int, topic_id: uuid.UUID, partitions: int,
             fetches: int, mode: str) -> dict[str, float]:
    session_id, epoch = 0, -1
    if mode == "incremental":
        r = w.call_frame(1, version, _fetch_frame(w, version, topic_id, partitions,
                                                  session_id=0, epoch=0, named=True))
        assert int(r.error_code) == 0 and r.session_id > 0, r.error_code
        session_id, epoch = r.session_id, 1
    # Frames are made before the clock starts: the client's encoding is not measured.
    frames = []
    for i in range(fetches):
        frames.append(_fetch_frame(w, version, topic_id, partitions, session_id=session_id,
                                   epoch=epoch + i if mode == "incremental" else -1,
                                   named=mode == "sessionless"))
    sent, received = w.sent_bytes, w.received_bytes
    cpu0, wall0 = _cpu_s(pid), time.perf_counter()
    for frame in frames:
        r = w.call_frame(1, version, frame)
        assert int(r.error_code) == 0
        answered = sum(len(t.partitions) for t in r.responses)
        assert answered == (partitions if mode == "sessionless" else 0), answered
    cpu, wall = _cpu_s(pid) - cpu0, time.perf_counter() - wall0
    return {"request_bytes": (w.sent_bytes - sent) / fetches,
            "response_bytes": (w.received_bytes - received) / fetches,
            "broker_cpu_ms": cpu * 1000 / fetches, "wall_ms": wall * 1000 / fetches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--fetches", type=int, default=200)
    args = parser.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        env = dict(os.environ)
        broker = subprocess.Popen(
            [sys.executable, "-m", "seglog.cli", "serve", "--data-dir", data_dir,
             "--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"],
            env=env, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    w = Wire(port)
                    break
                except OSError:
                    if time.monotonic() > deadline or broker.poll() is not None:
                        raise
                    time.sleep(0.1)
            topic_id = _setup(w, args.partitions)
            print(f"idle fetches of {args.partitions} partitions, {args.fetches} each "
                  f"(per fetch):")
            print(f"{'version':>7} {'mode':>12} {'request B':>10} {'response B':>11} "
                  f"{'broker CPU ms':>14} {'wall ms':>8}")
            for version in (12, 16):
                for mode in ("sessionless", "incremental"):
                    got = _measure(w, broker.pid, version, topic_id, args.partitions,
                                   args.fetches, mode)
                    print(f"{version:>7} {mode:>12} {got['request_bytes']:>10.0f} "
                          f"{got['response_bytes']:>11.0f} {got['broker_cpu_ms']:>14.2f} "
                          f"{got['wall_ms']:>8.2f}")
        finally:
            broker.terminate()
            broker.wait(timeout=30)


if __name__ == "__main__":
    main()
