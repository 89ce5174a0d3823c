"""Slow readers against ``seglog serve`` (issue 23): what clients that pipeline big Fetch
requests and do not read cost the broker's memory.

A topic of one partition is filled with ``--log-mib`` MiB of records (written through a Store
on the data dir before the broker starts), then ``python -m seglog serve`` runs over it.
``--clients`` raw sockets each send ``--fetches`` Fetch v4 requests (offset 0, max_bytes and
partition_max_bytes 2^31-1, so each answer holds ``fetch.max.bytes`` of records: 55 MiB by
default) and read nothing for ``--hold-s`` seconds, while the broker's ``/proc/<pid>/status``
(VmRSS, RssAnon, RssFile) is sampled and another client times ApiVersions and a small Fetch.
Then every slow client reads its responses and each is checked: correlation ids in request
order, the record set byte for byte the log file's first bytes (``--read-clients``: only the
first few read, the others close unread). Last, a client that reads at once fetches the whole
answer ``--fast-fetches`` times (the median seconds: what the write path costs a fast reader).

    python tools/slow_readers.py --clients 6 --fetches 20 --log-mib 108

Run it with ``PYTHONPATH`` set to the ``src`` of the tree to measure (the broker subprocess
inherits it). Prints one line per figure, in MiB.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from seglog.bench.broker import SeglogServe
from seglog.store import Store

TOPIC = "t"
FETCH_KEY, FETCH_VERSION = 1, 4
API_VERSIONS_KEY = 18
#: Records per appended batch and bytes per record: about 1 MiB a batch.
RECORDS_PER_BATCH, RECORD_BYTES = 1024, 1000
MIB = 1 << 20


def request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes) -> bytes:
    """A whole request frame (v1 header, client id ``slow``)."""
    header = struct.pack(">hhih", api_key, api_version, correlation_id, 4) + b"slow"
    return struct.pack(">i", len(header) + len(body)) + header + body


def fetch_v4(max_bytes: int) -> bytes:
    """A Fetch v4 body: partition 0 of TOPIC from offset 0, ``max_bytes`` overall and for the
    partition, no wait."""
    name = TOPIC.encode()
    return (struct.pack(">iiiib", -1, 0, 1, max_bytes, 0) + struct.pack(">ih", 1, len(name))
            + name + struct.pack(">iiqi", 1, 0, 0, max_bytes))


def read_exactly(sock: socket.socket, count: int) -> bytearray:
    """``count`` bytes from ``sock``; EOFError when it closes first."""
    out = bytearray(count)
    view = memoryview(out)
    got = 0
    while got < count:
        n = sock.recv_into(view[got:], count - got)
        if n == 0:
            raise EOFError(f"connection closed after {got} of {count} bytes")
        got += n
    return out


def read_frame(sock: socket.socket) -> bytearray:
    """One response frame, without its size."""
    (size,) = struct.unpack(">i", read_exactly(sock, 4))
    return read_exactly(sock, size)


def fetch_records(frame: bytearray) -> tuple[int, int, int]:
    """``(correlation id, position, size in bytes)`` of the record set of a Fetch v4 response
    for one partition."""
    correlation_id, _throttle, topics = struct.unpack_from(">iii", frame, 0)
    assert topics == 1, topics
    (name_bytes,) = struct.unpack_from(">h", frame, 12)
    position = 14 + name_bytes
    partitions, _index, error_code = struct.unpack_from(">iih", frame, position)
    assert partitions == 1 and error_code == 0, (partitions, error_code)
    position += 10 + 16  # high watermark, last stable offset
    (aborted,) = struct.unpack_from(">i", frame, position)
    position += 4 + max(aborted, 0) * 16
    (size_bytes,) = struct.unpack_from(">i", frame, position)
    position += 4
    assert position + size_bytes == len(frame), "bytes after the record set"
    return correlation_id, position, size_bytes


def proc_memory_bytes(pid: int) -> dict[str, int]:
    """``VmRSS``, ``RssAnon`` and ``RssFile`` of process ``pid`` in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) * 1024
    return out


def fill_log(data_dir: Path, log_bytes: int, backend: str | None) -> Path:
    """Write about ``log_bytes`` of records to partition 0 of TOPIC; its .log file's path."""
    value = b"v" * RECORD_BYTES
    with Store(data_dir, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic(TOPIC, partitions=1)
        log = store.topic(TOPIC).log(0)
        written = 0
        while written < log_bytes:
            log.append_batch([value] * RECORDS_PER_BATCH)
            written += RECORDS_PER_BATCH * RECORD_BYTES
        log.flush()
    (path,) = sorted((data_dir / f"{TOPIC}-0").glob("*.log"))
    return path


def bystander_round_trip_s(port: int) -> float:
    """Seconds for ApiVersions then a Fetch of at most 1 MiB on a fresh connection."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request_frame(API_VERSIONS_KEY, 0, 1, b""))
        read_frame(sock)
        sock.sendall(request_frame(FETCH_KEY, FETCH_VERSION, 2, fetch_v4(MIB)))
        correlation_id, _position, size_bytes = fetch_records(read_frame(sock))
        assert correlation_id == 2 and size_bytes > 0
    return time.perf_counter() - t0


def fast_fetch_s(port: int, fetches: int) -> list[float]:
    """Seconds for each of ``fetches`` whole-answer Fetches by a client that reads each
    answer at once (one after the other on one connection)."""
    out: list[float] = []
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        for i in range(fetches):
            t0 = time.perf_counter()
            sock.sendall(request_frame(FETCH_KEY, FETCH_VERSION, i, fetch_v4(2**31 - 1)))
            correlation_id, _position, _size_bytes = fetch_records(read_frame(sock))
            out.append(time.perf_counter() - t0)
            assert correlation_id == i
    return out


def run(*, clients: int, fetches: int, log_mib: int, hold_s: float, backend: str | None,
        scratch: Path, read_clients: int | None = None,
        fast_fetches: int = 0) -> dict[str, float]:
    """One run; the figures (MiB, seconds, counts). The first ``read_clients`` slow clients
    (None: all) read and check their responses at the end; the others close unread."""
    data_dir = scratch / "data"
    log_path = fill_log(data_dir, log_mib * MIB, backend)
    log_bytes = log_path.read_bytes()
    server = SeglogServe(data_dir, backend=backend)
    server.start()
    socks: list[socket.socket] = []
    figures: dict[str, float] = {}
    try:
        pid = server.pid
        assert pid is not None
        bystander_round_trip_s(server.port)  # warm: the handlers' first run, the heap
        before = proc_memory_bytes(pid)
        frames = b"".join(request_frame(FETCH_KEY, FETCH_VERSION, i, fetch_v4(2**31 - 1))
                          for i in range(fetches))
        for _ in range(clients):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
            sock.sendall(frames)
            socks.append(sock)
        peak = dict(before)
        round_trips: list[float] = []
        deadline = time.monotonic() + hold_s
        while time.monotonic() < deadline:
            now = proc_memory_bytes(pid)
            for key, value in now.items():
                peak[key] = max(peak[key], value)
            round_trips.append(bystander_round_trip_s(server.port))
            time.sleep(0.1)
        held = proc_memory_bytes(pid)
        # Every slow client reads now: every response, in order, intact.
        size_bytes: int | None = None
        expected = b""
        for sock in socks[:read_clients]:
            for i in range(fetches):
                frame = read_frame(sock)
                correlation_id, position, records_bytes = fetch_records(frame)
                assert correlation_id == i, (correlation_id, i)
                if size_bytes is None:
                    size_bytes = records_bytes
                    expected = log_bytes[:size_bytes]
                # startswith compares in place (memcmp), without a copy of the record set.
                assert records_bytes == size_bytes and frame.startswith(expected, position), \
                    "a record set differs from the log's bytes"
        after = proc_memory_bytes(pid)
        fast = sorted(fast_fetch_s(server.port, fast_fetches))
        figures.update({
            "response_mib": (size_bytes or 0) / MIB,
            "responses_checked": len(socks[:read_clients]) * fetches,
            "before_rss_mib": before["VmRSS"] / MIB, "before_anon_mib": before["RssAnon"] / MIB,
            "peak_rss_mib": peak["VmRSS"] / MIB, "peak_anon_mib": peak["RssAnon"] / MIB,
            "peak_file_mib": peak["RssFile"] / MIB,
            "held_rss_mib": held["VmRSS"] / MIB, "held_anon_mib": held["RssAnon"] / MIB,
            "anon_growth_mib": (peak["RssAnon"] - before["RssAnon"]) / MIB,
            "after_read_anon_mib": after["RssAnon"] / MIB,
            "bystander_round_trips": len(round_trips),
            "bystander_max_s": max(round_trips) if round_trips else float("nan"),
            "fast_reader_median_s": fast[len(fast) // 2] if fast else float("nan"),
        })
    finally:
        for sock in socks:
            sock.close()
        server.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run once, print the figures."""
    parser = argparse.ArgumentParser(description="Slow readers against seglog serve (issue 23).")
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--fetches", type=int, default=20, help="pipelined per client")
    parser.add_argument("--log-mib", type=int, default=108)
    parser.add_argument("--hold-s", type=float, default=5.0,
                        help="seconds the clients read nothing")
    parser.add_argument("--backend", choices=("native", "pure"), default=None)
    parser.add_argument("--read-clients", type=int, default=None,
                        help="how many slow clients read and check at the end (default: all)")
    parser.add_argument("--fast-fetches", type=int, default=10,
                        help="then whole-answer Fetches by a client that reads at once (timed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="slow-readers-") as scratch:
        figures = run(clients=args.clients, fetches=args.fetches, log_mib=args.log_mib,
                      hold_s=args.hold_s, backend=args.backend, scratch=Path(scratch),
                      read_clients=args.read_clients, fast_fetches=args.fast_fetches)
    for key, value in figures.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
