"""Moving file bytes to a reader process over loopback TCP, timed on both sides.

A reader runs as a separate Python process (so the two ends use both cores, as a consumer on
the same machine would): for each transfer it connects to the bench's listening socket on
127.0.0.1, ``recv_into`` a page-aligned 1 MiB buffer until it has the expected byte count,
sends one acknowledgement byte and reports its own wall and CPU seconds for the transfer as a
JSON line. The sender's clock runs from the first byte sent to the acknowledgement, so a
transfer counts as done when the reader has every byte; its CPU time is this thread's
``RUSAGE_THREAD`` over the same span.

Traffic stays on 127.0.0.1, the number of transfers is bounded by the caller and every socket
operation has a timeout (:data:`SOCKET_TIMEOUT_S`).
"""

from __future__ import annotations

import json
import mmap
import os
import resource
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

#: Timeout of every socket operation on either side (bounds a stuck transfer).
SOCKET_TIMEOUT_S = 120.0
#: Size of the sender's read()+sendall() buffer and of the reader's recv_into buffer.
CHUNK_BYTES = 1 << 20

_READER_SOURCE = r"""
import json, mmap, resource, socket, sys, time
port, chunk_bytes, timeout_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
buffer = mmap.mmap(-1, chunk_bytes)          # page-aligned receive buffer
view = memoryview(buffer)
for line in sys.stdin:
    if line.strip() == "quit":
        break
    expected = int(line)
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    got = 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    while got < expected:
        n = sock.recv_into(view, min(chunk_bytes, expected - got))
        if n == 0:
            break
        got += n
    wall_s = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    sock.sendall(b"!")
    sock.close()
    print(json.dumps({"bytes": got, "wall_s": wall_s,
                      "cpu_user_s": r1.ru_utime - r0.ru_utime,
                      "cpu_sys_s": r1.ru_stime - r0.ru_stime}), flush=True)
"""


@dataclass
class Transfer:
    """One timed transfer: bytes moved, sender wall/CPU seconds, reader wall/CPU seconds."""

    bytes_moved: int
    wall_s: float
    sender_cpu_s: float
    reader_cpu_s: float
    reader_wall_s: float

    @property
    def bytes_per_s(self) -> float:
        """Throughput as the sender saw it (first byte sent to the reader's ack)."""
        return self.bytes_moved / self.wall_s

    @property
    def sender_cpu_s_per_gb(self) -> float:
        """Sender CPU seconds per 10^9 bytes moved."""
        return self.sender_cpu_s / (self.bytes_moved / 1e9)

    @property
    def reader_cpu_s_per_gb(self) -> float:
        """Reader CPU seconds per 10^9 bytes received."""
        return self.reader_cpu_s / (self.bytes_moved / 1e9)


def thread_cpu_s() -> float:
    """CPU seconds (user + system) of the calling thread (falls back to the process)."""
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class LoopbackReader:
    """A reader process plus the listening socket it connects to; a context manager.

    ``transfer(size_bytes, send)`` runs one transfer: ``send(sock)`` must write exactly
    ``size_bytes`` bytes to the connected socket. Returns a :class:`Transfer`.
    """

    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.listener.settimeout(SOCKET_TIMEOUT_S)
        port = self.listener.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-c", _READER_SOURCE, str(port), str(CHUNK_BYTES),
             str(SOCKET_TIMEOUT_S)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __enter__(self) -> "LoopbackReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def transfer(self, size_bytes: int, send: Callable[[socket.socket], None]) -> Transfer:
        """Move ``size_bytes`` with ``send`` and time both ends."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{size_bytes}\n")
        self.process.stdin.flush()
        conn, _ = self.listener.accept()
        # sendfile(2) needs a blocking socket, so the bound is the kernel's send/receive
        # timeouts rather than Python's (which would make the socket non-blocking).
        conn.setblocking(True)
        timeval = struct.pack("ll", int(SOCKET_TIMEOUT_S), 0)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        try:
            cpu0 = thread_cpu_s()
            t0 = time.perf_counter()
            send(conn)
            ack = conn.recv(1)
            wall_s = time.perf_counter() - t0
            sender_cpu_s = thread_cpu_s() - cpu0
        finally:
            conn.close()
        line = self.process.stdout.readline()
        if ack != b"!" or not line:
            raise RuntimeError("loopback reader did not acknowledge the transfer")
        report = json.loads(line)
        if report["bytes"] != size_bytes:
            raise RuntimeError(f"reader got {report['bytes']} of {size_bytes} bytes")
        return Transfer(size_bytes, wall_s, sender_cpu_s,
                        report["cpu_user_s"] + report["cpu_sys_s"], report["wall_s"])

    def close(self) -> None:
        """Stop the reader process (politely, then by its pid) and close the listener."""
        try:
            if self.process.poll() is None and self.process.stdin is not None:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
                self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.process.kill()
            self.process.wait(timeout=10)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.listener.close()


def send_with_sendfile(path: str, size_bytes: int) -> Callable[[socket.socket], None]:
    """A ``send`` that moves ``path``'s first ``size_bytes`` with a bare ``os.sendfile`` loop."""
    def send(sock: socket.socket) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            out_fd, position = sock.fileno(), 0
            while position < size_bytes:
                sent = os.sendfile(out_fd, fd, position, size_bytes - position)
                if sent == 0:
                    raise RuntimeError("sendfile sent 0 bytes before the end")
                position += sent
        finally:
            os.close(fd)
    return send


def send_with_read_sendall(path: str, size_bytes: int) -> Callable[[socket.socket], None]:
    """A ``send`` that reads 1 MiB at a time into a page-aligned buffer and ``sendall``s it."""
    buffer = mmap.mmap(-1, CHUNK_BYTES)
    view = memoryview(buffer)

    def send(sock: socket.socket) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            remaining = size_bytes
            while remaining > 0:
                n = os.readv(fd, [view[:min(CHUNK_BYTES, remaining)]])
                if n == 0:
                    raise RuntimeError("file ended early")
                sock.sendall(view[:n])
                remaining -= n
        finally:
            os.close(fd)
    return send


def write_file(path: str, size_bytes: int, fill: bytes) -> None:
    """Write ``size_bytes`` (``fill`` repeated) to ``path`` in 1 MiB writes, fsync'd."""
    chunk = (fill * (CHUNK_BYTES // max(1, len(fill)) + 1))[:CHUNK_BYTES]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        remaining = size_bytes
        while remaining > 0:
            remaining -= os.write(fd, chunk[:min(CHUNK_BYTES, remaining)])
        os.fsync(fd)
    finally:
        os.close(fd)


def warm(path: str) -> None:
    """Read ``path`` once so its pages are in the page cache."""
    buffer = mmap.mmap(-1, CHUNK_BYTES)
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.readv(fd, [buffer]):
            pass
    finally:
        os.close(fd)
        buffer.close()
