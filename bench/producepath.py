"""The broker's Python path per Produce request, in-process, without sockets (issue 27):
user CPU microseconds per request of ``Connection.data_received`` -> frame dispatch -> the
Produce handler -> the Log -> the encoded response handed to a transport that only counts
the writes (the kernel's recv/send are not in it; the segment's pwritev is, as system time,
which is not counted). Five pipelined 16.5 KiB requests (Produce v9, acks=-1, one batch of 150
x 100 B records, as ``producewire.py``'s raw client) per ``data_received``, then one loop turn
(the flush), ``--iterations`` times per round; min / median / max over ``--rounds`` rounds
(the first one, cold, is dropped). Also the handler alone (``handle_produce_body`` called
directly) and ``Log.append_raw`` alone.

Run it from a checkout (``PYTHONPATH=src``) and from another one for before/after; the
figures move with the machine's load: compare runs made one after the other, alternating.

    PYTHONPATH=src python bench/producepath.py [--rounds 7] [--iterations 1600]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import io
import resource
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time


class _CountingTransport(asyncio.Transport):
    """Takes the responses and counts the writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.closing = False

    def write(self, data) -> None:  # noqa: ANN001 - asyncio's signature
        self.writes += 1

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name, default=None):  # noqa: ANN001, ANN201
        return ("127.0.0.1", 5555) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high=None, low=None) -> None:  # noqa: ANN001
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True


def produce_frame(topic: str, *, version: int = 9, acks: int = -1, records: int = 150,
                  record_bytes: int = 100) -> bytes:
    """One whole Produce request frame (size prefix included)."""
    from kio.serial import entity_writer

    from seglog._native import codec
    from seglog.schemas import load_request_schema

    batch = codec.encode_batch([b"x" * record_bytes] * records,
                               timestamps_ms=int(time.time() * 1000))
    cls = load_request_schema(0, version)
    mod = sys.modules[cls.__module__]
    request = cls(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=30),
                  topic_data=(mod.TopicProduceData(name=topic, partition_data=(
                      mod.PartitionProduceData(index=0, records=batch),)),))
    out = io.BytesIO()
    entity_writer(cls)(out, request)
    body = out.getvalue()
    header = struct.pack(">hhih", 0, version, 1, 3) + b"raw" + (b"\x00" if version >= 9 else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


@contextlib.asynccontextmanager
async def serving_broker(prefix: str, segment_bytes: int):
    """A ``Broker`` serving on loopback over a scratch directory, with topic ``t`` of one
    partition; yields its server (which a bench looks inside)."""
    from seglog.server.broker import Broker

    scratch = tempfile.mkdtemp(prefix=prefix)
    broker = Broker(scratch, "127.0.0.1:0", config={"log.segment.bytes": segment_bytes})
    try:
        await broker.serve()
        server = broker._server  # noqa: SLF001 - a bench looks inside
        assert server is not None and server.state is not None
        server.store.create_topic("t", 1)
        yield server
    finally:
        await broker.aclose()
        shutil.rmtree(scratch, ignore_errors=True)


def read_response(sock: socket.socket, pending: bytearray) -> bytes:
    """The next response frame's bytes (without its size) from ``sock``; ``pending`` holds
    what was read past the previous one (the raw clients of ``producewire.py`` and
    ``producecount.py``)."""
    while True:
        if len(pending) >= 4:
            (size,) = struct.unpack_from(">i", pending)
            if len(pending) >= 4 + size:
                body = bytes(pending[4:4 + size])
                del pending[:4 + size]
                return body
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise SystemExit("the broker closed the connection")
        pending.extend(chunk)


def _user_s() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def _summary(values: list[float]) -> str:
    return (f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}")


async def _main(args: argparse.Namespace) -> None:
    from seglog.server.apis import data_produce
    from seglog.server.connection import Connection
    from seglog.server.context import RequestContext
    from seglog.server import protocol

    async with serving_broker("producepath-", 256 * 1024 * 1024) as server:
        frame = produce_frame("t")
        pipelined = frame * 5
        connection = Connection(server, 1)
        transport = _CountingTransport()
        connection.connection_made(transport)
        per_request: list[float] = []
        for _ in range(args.rounds + 1):
            start = _user_s()
            for _ in range(args.iterations):
                connection.data_received(pipelined)
                await asyncio.sleep(0)  # the flush
            per_request.append((_user_s() - start) / (args.iterations * 5) * 1e6)
        per_request = per_request[1:]
        print(f"connection path, user us per request (min / median / max over {args.rounds}): "
              f"{_summary(per_request)}; responses written {transport.writes}")
        state = server.state
        header = protocol.parse_request_header(frame[4:], flexible=True)
        body = memoryview(frame[4:])[header.body_offset:]
        handler: list[float] = []
        calls = args.iterations * 5
        for _ in range(args.rounds + 1):
            start = _user_s()
            for _ in range(calls):
                ctx = RequestContext(0, 9, 1, "raw", 1, "127.0.0.1", 5555, state)
                coroutine = data_produce.handle_produce_body(ctx, body)
                try:
                    coroutine.send(None)
                except StopIteration:
                    pass
            handler.append((_user_s() - start) / calls * 1e6)
        print(f"handler alone, user us per request: {_summary(handler[1:])}")
        log = server.store.topic("t").log(0)
        request = data_produce.read_produce_request(9, body)
        _code, batch = data_produce.check_produce_records(
            request.topic_data[0].partition_data[0].records, 9)
        appends: list[float] = []
        for _ in range(args.rounds + 1):
            start = _user_s()
            for _ in range(calls):
                log.append_raw(batch)
            appends.append((_user_s() - start) / calls * 1e6)
        print(f"Log.append_raw alone, user us per batch: {_summary(appends[1:])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=1600,
                        help="data_received calls (5 requests each) per round")
    args = parser.parse_args()
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
