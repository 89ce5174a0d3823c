"""The floor under issue 27's produce-CPU target: the least a Python asyncio broker does to
take a producer's records (acks=all, one partition) and answer, run beside ``seglog serve``
and Kafka 4.4 under the same client by ``producewire.py --floor``.

The floor speaks just enough of Kafka's protocol for a librdkafka producer: ApiVersions
(v0-v3), Metadata v1 (every topic asked for exists, one partition led here) and Produce
(v3-v10, one topic of one partition). A Produce is read by seglog's native request-header
and one-partition readers (``seglog._native.wire``), its records written with one
``os.pwrite`` at the end of one file (the page cache, as seglog's segments and Kafka's), and
answered by seglog's native encoder; frames are split out of asyncio ``Protocol`` reads
with one copy of a frame that spans reads (seglog's connection copies those once too).

What it leaves out is all of seglog's own work per request: no CRC check and no record walk
(Kafka's LogValidator rules), no offset or leader-epoch stamp, no index entries, no producer
state, no log bookkeeping, metrics, quotas, ACL checks or acks=all waiting. So its CPU per
million records is what the interpreter's event loop and the kernel (socket reads, the
page-cache copy, the answer's loopback send) cost any Python broker on this design: if the
floor alone is above 0.35x Kafka's CPU, the target needs the network path itself out of
Python, not a faster seglog on it.

    python bench/producefloor.py --port 9099 --file /tmp/floor.log

Never a broker to use: it checks nothing it stores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from seglog import format as fmt
from seglog._native import wire
from seglog.bench.broker import SeglogServe, wait_ready
from seglog.server import protocol

#: API keys the floor answers (Fetch only advertised, see ADVERTISED).
PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
#: (api key, min version, max version) advertised: Produce v10 is what librdkafka 2.16 sends
#: seglog, so the floor reads the same requests. Fetch v4+ is advertised (never answered)
#: because librdkafka enables record batches (its MsgVer2 feature) only when the broker
#: lists Produce v3+ *and* Fetch v4+; without it a producer sends magic-0 message sets.
ADVERTISED = ((PRODUCE, 3, 10), (FETCH, 4, 12), (METADATA, 1, 1), (API_VERSIONS, 0, 3))
#: Kafka's UNSUPPORTED_VERSION error code.
UNSUPPORTED_VERSION = 35
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def api_versions_body(version: int,
                      ranges: tuple[tuple[int, int, int], ...] = ADVERTISED) -> bytes:
    """The ApiVersions answer's body for a request of ``version`` listing ``ranges`` (v0
    layout with UNSUPPORTED_VERSION above v3, as Kafka answers)."""
    if version > 3:
        return _I16.pack(UNSUPPORTED_VERSION) + _I32.pack(len(ranges)) + b"".join(
            struct.pack(">hhh", *entry) for entry in ranges)
    if version == 3:
        return (_I16.pack(0) + bytes([len(ranges) + 1])
                + b"".join(struct.pack(">hhhB", *entry, 0) for entry in ranges)
                + _I32.pack(0) + b"\x00")
    body = _I16.pack(0) + _I32.pack(len(ranges)) + b"".join(
        struct.pack(">hhh", *entry) for entry in ranges)
    return body + (_I32.pack(0) if version >= 1 else b"")


def metadata_v1_body(body: memoryview, host: str, port: int) -> bytes:
    """Metadata v1's answer: this broker (node 0), and each topic asked for with one
    partition it leads (none when the request asks for every topic)."""
    (count,) = _I32.unpack_from(body, 0)
    names: list[str] = []
    position = 4
    for _ in range(max(count, 0)):
        (length,) = _I16.unpack_from(body, position)
        names.append(bytes(body[position + 2:position + 2 + length]).decode("utf-8"))
        position += 2 + length
    out = [_I32.pack(1), _I32.pack(0), _string(host), _I32.pack(port), _I16.pack(-1),
           _I32.pack(0), _I32.pack(len(names))]
    for name in names:
        out += [_I16.pack(0), _string(name), b"\x00", _I32.pack(1),
                struct.pack(">hiiiiii", 0, 0, 0, 1, 0, 1, 0)]
    return b"".join(out)


class FloorState:
    """The floor's one file and the offsets it hands out, per topic name."""

    def __init__(self, path: Path, host: str, port: int):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.position_bytes = 0
        self.next_offsets: dict[str, int] = {}
        self.host = host
        self.port = port

    def produce(self, version: int, body: memoryview) -> bytes | None:
        """Write a one-partition Produce's records and return its answer's body (None for
        acks=0); ValueError for a request the floor does not read."""
        single = wire.read_produce_single(version, body)
        if single is None:
            raise ValueError("not a one-topic, one-partition Produce")
        _txn, acks, _timeout_ms, name, _topic_id, index, records = single
        if name is None:
            raise ValueError("a Produce by topic id (v13+): not advertised")
        if records is not None and len(records) > fmt.MAGIC_POSITION and \
                records[fmt.MAGIC_POSITION] != 2:
            raise ValueError("not a record batch (magic 2)")
        if records is not None and len(records) >= fmt.BATCH_LENGTH_POSITION + 4 and \
                _I32.unpack_from(records, fmt.BATCH_LENGTH_POSITION)[0] + 12 != len(records):
            raise ValueError("not exactly one record batch")  # offsets count the first
        base_offset = self.next_offsets.get(name, 0)
        if records is not None and len(records) > fmt.LAST_OFFSET_DELTA_POSITION + 4:
            (delta,) = _I32.unpack_from(records, fmt.LAST_OFFSET_DELTA_POSITION)
            self.next_offsets[name] = base_offset + delta + 1
            self.position_bytes += os.pwrite(self.fd, records, self.position_bytes)
        if acks == 0:
            return None
        return wire.encode_produce_single(version, name, index, 0, base_offset, -1, 0)


class FloorConnection(asyncio.Protocol):
    """One client: frames split out of the reads, each answered in the same turn."""

    #: What ApiVersions lists (a floor that answers more lists more).
    advertised = ADVERTISED

    def __init__(self, state: FloorState):
        self.state = state
        self.pending = bytearray()
        self.transport: asyncio.Transport | None = None
        #: Answers of the read being handled, written together at its end.
        self.answers: list[bytes] = []
        #: True while an answer is being sent outside the transport (the fetch floor's
        #: sendfile): the frames after it wait in ``pending``.
        self.held = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        pending = self.pending
        if pending:
            pending += data
            source: bytes | bytearray = pending
        else:
            source = data
        view = memoryview(source)
        end = len(source)
        position = 0
        answers = self.answers
        while end - position >= 4 and not self.held:
            (size,) = _I32.unpack_from(view, position)
            if end - position - 4 < size:
                break
            answer = self.answer(view[position + 4:position + 4 + size])
            if answer is not None:
                answers.append(answer)
            position += 4 + size
        view.release()
        if pending:
            del pending[:position]
        elif position < end:
            pending += memoryview(data)[position:]  # one copy of the rest
        if answers:
            assert self.transport is not None
            self.transport.write(b"".join(answers))
            answers.clear()

    def answer(self, frame: memoryview) -> bytes | None:
        """The framed answer to one request frame (None for acks=0)."""
        api_key, version = _I16.unpack_from(frame, 0)[0], _I16.unpack_from(frame, 2)[0]
        header = wire.read_request_header(frame, protocol.is_flexible_request(api_key, version))
        if header is None:
            raise ValueError(f"unreadable request header (api {api_key} v{version})")
        correlation_id, body_offset = header[2], header[4]
        body = frame[body_offset:]
        if api_key == PRODUCE:
            out = self.state.produce(version, body)
            if out is None:
                return None
        elif api_key == METADATA and version == 1:
            out = metadata_v1_body(body, self.state.host, self.state.port)
        elif api_key == API_VERSIONS:
            out = api_versions_body(version, self.advertised)
        else:
            raise ValueError(f"the floor does not answer api {api_key} v{version}")
        return b"".join(protocol.encode_response(
            correlation_id, flexible=protocol.is_flexible_response(api_key, version),
            body_parts=(out,)))


class FloorServe(SeglogServe):
    """The floor in a subprocess of its own on 127.0.0.1 and a free port, its records in
    ``<data_dir>/floor.log``: ``SeglogServe``'s ``bootstrap``, ``pid``, ``stop`` and
    ``kill``, with the floor started instead of ``seglog serve``."""

    def command(self) -> list[str]:
        """The floor's script and its arguments."""
        return [__file__, "--port", str(self.port), "--file", str(self.data_dir / "floor.log")]

    def start(self) -> float:
        """Launch and wait until ApiVersions is answered; the seconds that took."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, *self.command()],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.start_s = wait_ready("127.0.0.1", self.port, self.process, t0)
        return self.start_s


def arguments(description: str) -> argparse.ArgumentParser:
    """A floor's command line: ``--host``, ``--port`` and ``--file``."""
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", required=True, help="where the records go")
    return parser


def serve(host: str, port: int, connection: Callable[[], asyncio.Protocol]) -> None:
    """Serve ``connection()`` per client on ``host:port`` until interrupted."""
    async def forever() -> None:
        server = await asyncio.get_running_loop().create_server(connection, host, port)
        async with server:
            await server.serve_forever()
    try:
        asyncio.run(forever())
    except KeyboardInterrupt:
        sys.exit(0)


def main() -> None:
    """``--port`` and ``--file``: serve the floor."""
    args = arguments(__doc__).parse_args()
    state = FloorState(Path(args.file), args.host, args.port)
    serve(args.host, args.port, lambda: FloorConnection(state))


if __name__ == "__main__":
    main()
