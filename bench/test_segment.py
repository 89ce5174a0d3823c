"""Segment micro-benchmarks: append, read and sendfile against plain-file baselines.

Back of the envelope (the peer survey, on this 2-vCPU machine): buffered 1 MiB writes into new
page-cache pages run at 0.6-0.9 GB/s with an fsync at the end, ~1-1.7 ms per MiB (only a few
hundred us when the pages are reused); page-cache reads 17 GB/s (~60 us per MiB); sendfile to a
loopback reader ~2 GB/s. So appending one 1,000-record batch (110 KB) should cost ~0.1-0.2 ms
and stay >= 80% of a 1 MiB ``os.write`` of the same bytes (issue 2); a zero-copy
``Segment.read`` of a batch is index lookup + header scan, ~1 us; a sparse-index random read
that decodes the batch costs its decode (~0.25 ms in the pure twin's class, ~20-50 us native).
"""

from __future__ import annotations

import os
import random
import socket
import threading

import pytest

from conftest import need

BATCHES = 64  # 64 x 110 KB ~ 7 MB per segment


@pytest.fixture
def batches(backend_name, values):
    be = need(backend_name, "encode_batch", "Segment")
    return be, [be.encode_batch(values, base_offset=0)] * BATCHES


def test_append(benchmark, tmp_path, batches):
    be, raw = batches
    benchmark.group = f"append {BATCHES} batches + fsync"
    counter = iter(range(10**9))

    def setup():
        path = tmp_path / f"s{next(counter)}"
        path.mkdir()
        return (be.Segment.open(str(path), 0, create=True),), {}

    def append(segment):
        for batch in raw:
            segment.append(batch)
        segment.flush()
        segment.close()

    benchmark.pedantic(append, setup=setup, rounds=5)


def test_append_baseline_1mib_writes(benchmark, tmp_path, values):
    data = b"".join([b"\0" * 110_000] * BATCHES)
    benchmark.group = f"append {BATCHES} batches + fsync"
    counter = iter(range(10**9))

    def write():
        fd = os.open(tmp_path / f"f{next(counter)}", os.O_WRONLY | os.O_CREAT, 0o644)
        view = memoryview(data)
        for start in range(0, len(view), 1 << 20):
            os.write(fd, view[start:start + (1 << 20)])
        os.fsync(fd)
        os.close(fd)

    benchmark.pedantic(write, rounds=5)


@pytest.fixture
def segment(tmp_path, batches):
    be, raw = batches
    seg = be.Segment.open(str(tmp_path), 0, create=True)
    for batch in raw:
        seg.append(batch)
    seg.flush()
    yield be, seg
    seg.close()


def test_read_random_batch(benchmark, segment):
    be, seg = segment
    offsets = [random.Random(42).randrange(seg.next_offset) for _ in range(1000)]
    benchmark.group = "1,000 random offsets -> batch view"

    def reads():
        for offset in offsets:
            seg.read(offset, 1)

    benchmark(reads)


def test_read_random_record_columns(benchmark, segment):
    be, seg = segment
    if not hasattr(be, "decode_columns"):
        pytest.skip("decode_columns not built")
    offsets = [random.Random(42).randrange(seg.next_offset) for _ in range(100)]
    benchmark.group = "100 random offsets -> record value"

    def reads():
        for offset in offsets:
            cols = be.decode_columns(seg.read(offset, 1))
            cols.value(offset - int(cols.offsets[0]))

    benchmark(reads)


def _drain(sock: socket.socket, expected: int) -> None:
    buffer = bytearray(1 << 20)
    got = 0
    while got < expected:
        n = sock.recv_into(buffer)
        if not n:
            break
        got += n


def test_sendfile(benchmark, segment):
    be, seg = segment
    benchmark.group = "segment -> loopback socket"
    size = seg.size_bytes

    def send():
        a, b = socket.socketpair()
        reader = threading.Thread(target=_drain, args=(b, size))
        reader.start()
        offset = 0
        while offset < seg.next_offset:
            _, offset = seg.sendfile(a.fileno(), offset, size)
        reader.join(timeout=60)
        a.close()
        b.close()

    benchmark.pedantic(send, rounds=5)


def test_sendfile_bare(benchmark, segment):
    be, seg = segment
    benchmark.group = "segment -> loopback socket"
    size = seg.size_bytes

    def send():
        a, b = socket.socketpair()
        reader = threading.Thread(target=_drain, args=(b, size))
        reader.start()
        fd = os.open(str(seg.log_path), os.O_RDONLY)
        position = 0
        while position < size:
            position += os.sendfile(a.fileno(), fd, position, size - position)
        os.close(fd)
        reader.join(timeout=60)
        a.close()
        b.close()

    benchmark.pedantic(send, rounds=5)
