"""Slow readers (issue 23): clients that pipeline requests and do not read cost the broker a
bounded amount of memory, other clients are served meanwhile, and once a slow client reads it
gets every response intact and in request order.

A Fetch response's record sets are views of the mapped segments; the connection hands them to
the transport a chunk at a time, only while the transport holds nothing unsent, so a reader
that does not read leaves them views (no anonymous memory) and stops the connection reading
further requests. Responses that are copies (encoded bodies) stop it past
``RESPONSE_COPIED_BYTES_HELD_MAX``.

The first test runs ``seglog serve`` as a subprocess and reads its ``RssAnon`` from
``/proc/<pid>/status`` (the measure of ``tools/slow_readers.py``, smaller); the bound is
generous (the broker before this change held several responses' copies per connection, here
over 300 MiB) and no time is asserted: every wait is bounded. The others run the broker in this
process and look at the connection itself.
"""

from __future__ import annotations

import asyncio
import fcntl
import socket
import struct
import termios
import time
from pathlib import Path

import pytest

import seglog

from core_helpers import connect, read_frame, request_frame, run_on_broker_loop
from seglog.bench.broker import SeglogServe
from seglog.server import connection as connection_module
from seglog.server.context import RawResponse
from seglog.server.registry import ApiHandler
from seglog.store import Store

API_VERSIONS = 18
FETCH = 1
TEST_KEY = 1000  # an API key no Kafka API uses: the tests' own handlers
TOPIC = "t"
MIB = 1 << 20
WAIT_S = 30.0

#: The subprocess test: SLOW_CLIENTS clients, each pipelining FETCHES_EACH Fetches of the
#: whole LOG_MIB log (16 MiB answers), read nothing; the broker's anonymous memory may grow by
#: ANON_GROWTH_MAX_MIB meanwhile (about 0.3 MiB per connection is what it takes).
SLOW_CLIENTS = 4
FETCHES_EACH = 10
LOG_MIB = 16
ANON_GROWTH_MAX_MIB = 48


def _fetch_v4(max_bytes: int) -> bytes:
    name = TOPIC.encode()
    return (struct.pack(">iiiib", -1, 0, 1, max_bytes, 0) + struct.pack(">ih", 1, len(name))
            + name + struct.pack(">iiqi", 1, 0, 0, max_bytes))


def _records_of(frame: bytes) -> tuple[int, int, int]:
    """``(correlation id, position, size in bytes)`` of the record set of a Fetch v4 response
    for one partition."""
    correlation_id, _throttle, topics = struct.unpack_from(">iii", frame, 0)
    assert topics == 1
    (name_bytes,) = struct.unpack_from(">h", frame, 12)
    position = 14 + name_bytes
    partitions, _index, error_code = struct.unpack_from(">iih", frame, position)
    assert (partitions, error_code) == (1, 0)
    position += 10 + 16  # high watermark, last stable offset
    (aborted,) = struct.unpack_from(">i", frame, position)
    position += 4 + max(aborted, 0) * 16
    (size_bytes,) = struct.unpack_from(">i", frame, position)
    position += 4
    assert position + size_bytes == len(frame)
    return correlation_id, position, size_bytes


def _fill(log, log_bytes: int) -> None:
    value = b"v" * 1000
    written = 0
    while written < log_bytes:
        log.append_batch([value] * 1024)
        written += 1024 * 1000


def _anon_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/<pid>/status")


def _queued_bytes(sock: socket.socket) -> int:
    """Bytes waiting in ``sock``'s receive queue (FIONREAD)."""
    out = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return struct.unpack("i", out)[0]


def _wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {timeout_s} s")
        time.sleep(0.01)


def _bystander_fetch(port: int, log_head: bytes) -> None:
    """ApiVersions, then a Fetch of at most 1 MiB, on a fresh connection; checked."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.settimeout(WAIT_S)
        sock.sendall(request_frame(API_VERSIONS, 0, 1))
        frame = read_frame(sock)
        assert frame is not None and struct.unpack_from(">ih", frame) == (1, 0)
        sock.sendall(request_frame(FETCH, 4, 2, _fetch_v4(MIB)))
        frame = read_frame(sock)
        assert frame is not None
        correlation_id, position, size_bytes = _records_of(frame)
        assert correlation_id == 2 and 0 < size_bytes <= len(log_head)
        assert frame[position:] == log_head[:size_bytes]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["native", "pure"])
def test_slow_readers_of_big_fetches_pin_no_anonymous_memory(tmp_path, backend, monkeypatch):
    # The broker subprocess runs this tree's code, not whatever seglog is installed.
    monkeypatch.setenv("PYTHONPATH", str(Path(seglog.__file__).resolve().parent.parent))
    data_dir = tmp_path / "data"
    with Store(data_dir, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic(TOPIC, partitions=1)
        _fill(store.topic(TOPIC).log(0), LOG_MIB * MIB)
    (log_path,) = (data_dir / f"{TOPIC}-0").glob("*.log")
    log_bytes = log_path.read_bytes()
    server = SeglogServe(data_dir, backend=backend,
                         config={"offsets.topic.num.partitions": "1"})
    socks: list[socket.socket] = []
    try:
        server.start()
        pid = server.pid
        _bystander_fetch(server.port, log_bytes)  # the handlers' first run, the heap warm
        before = _anon_bytes(pid)
        frames = b"".join(request_frame(FETCH, 4, i, _fetch_v4(2**31 - 1))
                          for i in range(FETCHES_EACH))
        for _ in range(SLOW_CLIENTS):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
            sock.settimeout(WAIT_S)
            sock.sendall(frames)
            socks.append(sock)
        # The broker has answered (and written what it writes at once) when bytes wait in
        # every slow client's receive queue; then its memory is looked at a few times, while
        # another client is served.
        _wait_until(lambda: all(_queued_bytes(sock) > 0 for sock in socks),
                    "responses written to every slow client")
        peak = before
        for _ in range(5):
            _bystander_fetch(server.port, log_bytes)
            peak = max(peak, _anon_bytes(pid))
            time.sleep(0.1)
        assert peak - before < ANON_GROWTH_MAX_MIB * MIB, \
            f"anonymous memory grew by {(peak - before) / MIB:.0f} MiB"
        # Every slow client now reads all it asked for: in order, each the log's bytes.
        expected: bytes | None = None
        for sock in socks:
            for i in range(FETCHES_EACH):
                frame = read_frame(sock)
                assert frame is not None, f"response {i} missing"
                correlation_id, position, size_bytes = _records_of(frame)
                assert correlation_id == i
                assert size_bytes > LOG_MIB * MIB * 9 // 10  # the whole log: 16 MiB
                if expected is None:
                    expected = log_bytes[:size_bytes]
                assert frame.startswith(expected, position)  # compared in place
        _bystander_fetch(server.port, log_bytes)
    finally:
        for sock in socks:
            sock.close()
        server.stop()


def test_a_slow_reader_holds_its_fetch_as_views_and_stops_reading(broker_factory):
    # Small socket buffers, so the socket takes little of an 8 MiB answer.
    broker = broker_factory(socket_send_buffer_bytes=64 * 1024)
    broker.store.create_topic(TOPIC, partitions=1)
    _fill(broker.store.topic(TOPIC).log(0), 8 * MIB)
    fetches = 6
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(WAIT_S)
    sock.connect(("127.0.0.1", broker.port))
    try:
        sock.sendall(b"".join(request_frame(FETCH, 4, i, _fetch_v4(2**31 - 1))
                              for i in range(fetches)))
        _wait_until(lambda: _queued_bytes(sock) > 0, "the first response's bytes")
        (connection,) = broker.server.connections.values()

        async def look() -> tuple[int, int, int, bool]:
            for _ in range(20):
                await asyncio.sleep(0)
            transport = connection.transport
            return (connection.unsent_response_bytes, transport.get_write_buffer_size(),
                    connection.held_copied_response_bytes, transport.is_reading())

        unsent, in_transport, copied, reading = run_on_broker_loop(broker, look())
        # The answers wait as views of the segment, not copies: what the transport holds is
        # one chunk at most, and the connection reads no more requests meanwhile.
        assert unsent > 8 * MIB
        assert in_transport <= connection_module.RESPONSE_WRITE_CHUNK_BYTES
        assert copied < 64 * 1024
        assert not reading
        log_head = bytes(broker.store.topic(TOPIC).log(0).read(0, 16 * MIB).buffer)
        for i in range(fetches):
            frame = read_frame(sock)
            assert frame is not None
            correlation_id, position, size_bytes = _records_of(frame)
            assert correlation_id == i and size_bytes > 7 * MIB
            assert frame[position:] == log_head[:size_bytes]
        _wait_until(lambda: connection.unsent_response_bytes == 0, "everything sent")
    finally:
        sock.close()


def test_copied_responses_stop_reading_past_their_bound(broker_factory):
    # Answers of 1 MiB that are copies (encoded bytes), pipelined by a client that does not
    # read: dispatching stops once about RESPONSE_COPIED_BYTES_HELD_MAX of them wait, far
    # below the 64 MiB that views of segments may.
    broker = broker_factory(socket_send_buffer_bytes=64 * 1024)
    started: list[int] = []

    async def handle(ctx, body):
        started.append(ctx.correlation_id)
        return RawResponse((b"%08d" % ctx.correlation_id * (MIB // 8),))

    broker.server.handlers[TEST_KEY] = ApiHandler(TEST_KEY, 0, 0, handle, raw_request=True)
    requests = 40
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(WAIT_S)
    sock.connect(("127.0.0.1", broker.port))
    try:
        sock.sendall(b"".join(request_frame(TEST_KEY, 0, i) for i in range(requests)))
        _wait_until(lambda: _queued_bytes(sock) > 0, "the first response's bytes")
        (connection,) = broker.server.connections.values()

        async def settle() -> bool:
            for _ in range(20):
                await asyncio.sleep(0.01)
            return connection.transport.is_reading()

        reading = run_on_broker_loop(broker, settle())
        bound_mib = connection_module.RESPONSE_COPIED_BYTES_HELD_MAX // MIB
        # The bound, one response over it, and what the socket buffers took.
        assert len(started) <= bound_mib + 4, started
        assert not reading
        for i in range(requests):
            frame = read_frame(sock)
            assert frame == struct.pack(">i", i) + b"%08d" % i * (MIB // 8)
        assert started == list(range(requests))
    finally:
        sock.close()
