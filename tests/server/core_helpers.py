"""Raw-socket helpers for the broker core's tests (tests/server/test_core_*.py): request
frames built by hand, response frames read back, all waits bounded by socket timeouts."""

from __future__ import annotations

import asyncio
import socket
import struct


def request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes = b"", *,
                  client_id: bytes | None = b"test", flexible: bool = False) -> bytes:
    """A whole request frame (size prefix included) with header v1, or v2 when ``flexible``."""
    if client_id is None:
        header = struct.pack(">hhih", api_key, api_version, correlation_id, -1)
    else:
        header = struct.pack(">hhih", api_key, api_version, correlation_id,
                             len(client_id)) + client_id
    if flexible:
        header += b"\x00"
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame (without its size) from ``sock``, or None when the broker closed
    the connection first. The socket's timeout bounds the wait."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    chunks = []
    while count:
        try:
            chunk = sock.recv(count)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def connect(broker, timeout_s: float = 10.0) -> socket.socket:
    """A plain TCP connection to ``broker`` with a receive timeout."""
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout_s)
    sock.settimeout(timeout_s)
    return sock


def run_on_broker_loop(broker, coro, timeout_s: float = 10.0):
    """Run ``coro`` on the broker's event loop thread and return its result."""
    return asyncio.run_coroutine_threadsafe(coro, broker.loop).result(timeout_s)
