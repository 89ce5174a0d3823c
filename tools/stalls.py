"""Big requests against ``seglog serve`` (issue 23): how long another client waits while one
client sends work the broker must do in bulk.

A ``python -m seglog serve`` runs over a fresh data dir (``socket.request.max.bytes`` raised
to ``--max-request-mib`` so a 100 MB request is read). A bystander client sends a small
Produce (acks=1, one record) and a small Fetch alternately on one connection, about every
2 ms, and times each round trip. Meanwhile an attacker on another connection runs one case:

- ``metadata``: ``--repeat`` Metadata v1 requests naming ``--metadata-mib`` MiB of distinct
  unknown topic names (auto-creation on, as by default);
- ``create_topics``: ``--repeat`` CreateTopics v2 requests, one topic of ``--partitions``
  partitions each;
- ``create_partitions``: ``--repeat`` topics of one partition grown by CreatePartitions v1
  to ``--partitions`` partitions each;
- ``init_producer_id``: ``--init-requests`` InitProducerId v1 requests for distinct
  transactional ids, ``--window`` in flight.

Prints, per case, the attack's seconds and the bystander's round trips during it: count,
p50, p99 and max in milliseconds (the issue's bar: p99 under 100 ms).

    PYTHONPATH=src python tools/stalls.py --cases metadata,create_topics,create_partitions,init_producer_id

Run it with ``PYTHONPATH`` set to the ``src`` of the tree to measure (the broker subprocess
inherits it).
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from seglog import get_backend
from seglog.bench.broker import SeglogServe

TOPIC = "probe"
PRODUCE, FETCH, METADATA, CREATE_TOPICS, INIT_PRODUCER_ID, CREATE_PARTITIONS = 0, 1, 3, 19, 22, 37
MIB = 1 << 20
CASES = ("metadata", "create_topics", "create_partitions", "init_producer_id")


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes) -> bytes:
    """A whole request frame (v1 header, client id ``stall``)."""
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + _string("stall")
    return struct.pack(">i", len(header) + len(body)) + header + body


def read_exactly(sock: socket.socket, count: int) -> bytearray:
    """``count`` bytes from ``sock``; EOFError when it closes first."""
    out = bytearray(count)
    view = memoryview(out)
    got = 0
    while got < count:
        n = sock.recv_into(view[got:], min(count - got, 4 * MIB))
        if n == 0:
            raise EOFError(f"connection closed after {got} of {count} bytes")
        got += n
    return out


def read_frame(sock: socket.socket) -> bytearray:
    """One response frame (its correlation id first)."""
    (size,) = struct.unpack(">i", read_exactly(sock, 4))
    return read_exactly(sock, size)


def produce_v3(batch: bytes) -> bytes:
    """Produce v3: acks=1, one batch to partition 0 of TOPIC."""
    return (struct.pack(">hhi", -1, 1, 5000) + struct.pack(">i", 1) + _string(TOPIC)
            + struct.pack(">ii", 1, 0) + struct.pack(">i", len(batch)) + batch)


def fetch_v4() -> bytes:
    """Fetch v4: partition 0 of TOPIC from offset 0, 1 KiB, no wait."""
    return (struct.pack(">iiiib", -1, 0, 1, 1024, 0) + struct.pack(">i", 1) + _string(TOPIC)
            + struct.pack(">iiqi", 1, 0, 0, 1024))


def metadata_v1(names: int, name_bytes: int, prefix: str) -> bytes:
    """Metadata v1 naming ``names`` distinct topics of ``name_bytes`` bytes each."""
    width = name_bytes - len(prefix)
    parts = [struct.pack(">i", names)]
    head = struct.pack(">h", name_bytes)
    parts.extend(head + f"{prefix}{i:0{width}d}".encode() for i in range(names))
    return b"".join(parts)


def create_topics_v2(name: str, partitions: int) -> bytes:
    """CreateTopics v2: one topic, replication factor 1, no assignments or configs."""
    return (struct.pack(">i", 1) + _string(name) + struct.pack(">ihii", partitions, 1, 0, 0)
            + struct.pack(">ib", 60000, 0))


def create_partitions_v1(name: str, count: int) -> bytes:
    """CreatePartitions v1: grow ``name`` to ``count`` partitions, no assignments."""
    return (struct.pack(">i", 1) + _string(name) + struct.pack(">ii", count, -1)
            + struct.pack(">ib", 60000, 0))


def init_producer_id_v1(transactional_id: str) -> bytes:
    """InitProducerId v1 for ``transactional_id`` (a 60 s transaction timeout)."""
    return _string(transactional_id) + struct.pack(">i", 60000)


def call(sock: socket.socket, api_key: int, version: int, correlation_id: int,
         body: bytes) -> bytearray:
    """Send one request and read its response frame."""
    sock.sendall(request_frame(api_key, version, correlation_id, body))
    frame = read_frame(sock)
    assert struct.unpack_from(">i", frame)[0] == correlation_id
    return frame


class Bystander(threading.Thread):
    """Produce and Fetch round trips on one connection until stopped; each timed with the
    monotonic clock it started at."""

    def __init__(self, port: int, batch: bytes):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.batch = batch
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        produce, fetch = produce_v3(self.batch), fetch_v4()
        i = 0
        try:
            while not self.stop_event.is_set():
                key, version, body = (PRODUCE, 3, produce) if i % 2 == 0 else (FETCH, 4, fetch)
                t0 = time.monotonic()
                call(self.sock, key, version, i, body)
                self.samples.append((t0, time.monotonic() - t0))
                i += 1
                time.sleep(0.002)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            self.error = exc
        finally:
            self.sock.close()


def _attack(case: str, port: int, args: argparse.Namespace) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        if case == "metadata":
            names = args.metadata_mib * MIB // (2 + args.name_bytes)
            for r in range(args.repeat):
                call(sock, METADATA, 1, r, metadata_v1(names, args.name_bytes, f"m{r}-"))
        elif case == "create_topics":
            for r in range(args.repeat):
                call(sock, CREATE_TOPICS, 2, r, create_topics_v2(f"big-{r}", args.partitions))
        elif case == "create_partitions":
            for r in range(args.repeat):
                call(sock, CREATE_TOPICS, 2, 2 * r, create_topics_v2(f"grow-{r}", 1))
                call(sock, CREATE_PARTITIONS, 1, 2 * r + 1,
                     create_partitions_v1(f"grow-{r}", args.partitions))
        elif case == "init_producer_id":
            sent = received = 0
            total, window = args.init_requests, args.window
            while received < total:
                while sent < total and sent - received < window:
                    sock.sendall(request_frame(INIT_PRODUCER_ID, 1, sent,
                                               init_producer_id_v1(f"txn-{sent}")))
                    sent += 1
                read_frame(sock)
                received += 1
        else:
            raise ValueError(case)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_case(case: str, args: argparse.Namespace, scratch: Path) -> dict[str, float]:
    """One case against a fresh broker; the figures."""
    data_dir = scratch / f"data-{case}"
    config = {"socket.request.max.bytes": str(args.max_request_mib * MIB),
              "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "4",
              "num.partitions": "1"}
    server = SeglogServe(data_dir, backend=args.backend, config=config)
    server.start()
    try:
        batch = bytes(get_backend(args.backend).encode_batch([b"x" * 100], [None], None, None,
                                                            base_offset=0))
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
            call(sock, CREATE_TOPICS, 2, 0, create_topics_v2(TOPIC, 1))
        bystander = Bystander(server.port, batch)
        bystander.start()
        time.sleep(0.5)  # warm
        t0 = time.monotonic()
        _attack(case, server.port, args)
        t1 = time.monotonic()
        time.sleep(0.2)
        bystander.stop_event.set()
        bystander.join(120)
        if bystander.error is not None:
            raise bystander.error
        during = [s * 1000 for start, s in bystander.samples if t0 <= start <= t1]
        # A round trip that started before and was still running when the attack began
        # counts too: it waited on the attack.
        during += [s * 1000 for start, s in bystander.samples if start < t0 < start + s]
        return {"attack_s": t1 - t0, "round_trips": len(during),
                "p50_ms": _percentile(during, 0.5) if during else float("nan"),
                "p99_ms": _percentile(during, 0.99) if during else float("nan"),
                "max_ms": max(during) if during else float("nan")}
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run each case, print its figures."""
    parser = argparse.ArgumentParser(description="Big requests against seglog serve "
                                     "(issue 23): another client's latency meanwhile.")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--metadata-mib", type=int, default=100)
    parser.add_argument("--name-bytes", type=int, default=24)
    parser.add_argument("--partitions", type=int, default=9999)
    parser.add_argument("--init-requests", type=int, default=20000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--max-request-mib", type=int, default=200)
    parser.add_argument("--backend", choices=("native", "pure"), default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stalls-") as scratch:
        for case in args.cases.split(","):
            figures = run_case(case, args, Path(scratch))
            print(case + ": " + ", ".join(
                f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in figures.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
