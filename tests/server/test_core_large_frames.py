"""Large requests that arrive over several reads (the connection's ``_start_frame`` /
``_fill_frame``: a request of 64 KiB or more is received into a buffer of its own size once a
quarter of it has arrived, and handed to its handler without a copy), on both storage
backends: whatever the split, the broker answers each request in order and stores every
record of every Produce exactly once, as when the request arrives in one piece.

The writes are paced (a short sleep after each) so that the broker reads them one at a time;
the answers and the log's records are the judge, whatever the kernel merged."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from core_helpers import connect, read_frame, request_frame, run_on_broker_loop
from produce_helpers import produce_v9_answer, produce_v9_frame
from seglog.server.connection import Connection

PRODUCE = 0
API_VERSIONS = 18
PACE_S = 0.02  # after each write: the broker reads it before the next arrives


def _produce_frame(correlation_id: int, values: list[bytes]) -> bytes:
    return produce_v9_frame(correlation_id, "t", values)


def _values(request: int, count: int, size_bytes: int) -> list[bytes]:
    return [f"{request:04d}-{index:06d}-".encode().ljust(size_bytes, b"v")
            for index in range(count)]


def _answer(frame: bytes) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of a Produce v9 answer for topic "t"."""
    return produce_v9_answer(frame, "t")


def _send_in_pieces(sock, data: bytes, cuts: list[int]) -> None:
    start = 0
    for cut in [*cuts, len(data)]:
        if cut > start:
            sock.sendall(data[start:cut])
            time.sleep(PACE_S)
        start = cut


def _stored_values(broker) -> list[bytes]:
    log = broker.store.topic("t").log(0)
    return [record.value for record in log.records()]


@pytest.mark.parametrize("split", [
    pytest.param("quarter-first", id="a-quarter-or-more-in-the-first-read"),
    pytest.param("small-first", id="small-reads-until-a-quarter"),
    pytest.param("size-prefix-cut", id="cut-inside-the-size-prefix"),
])
def test_a_large_produce_over_several_reads_is_stored_once(any_backend_broker, split):
    broker = any_backend_broker
    broker.store.create_topic("t", 1)
    values = _values(1, 3000, 100)  # ~330 KB: well over the 64 KiB of the frame path
    frame = _produce_frame(5, values)
    cuts = {"quarter-first": [len(frame) // 3, len(frame) // 3 * 2],
            "small-first": list(range(10_000, len(frame), 10_000)),
            "size-prefix-cut": [2, 3, len(frame) // 2]}[split]
    with connect(broker) as sock:
        _send_in_pieces(sock, frame, cuts)
        answer = read_frame(sock)
    assert answer is not None
    assert _answer(answer) == (5, 0, 0)
    assert _stored_values(broker) == values


def test_pipelined_large_and_small_requests_split_anywhere_are_answered_in_order(
        any_backend_broker):
    broker = any_backend_broker
    broker.store.create_topic("t", 1)
    sizes = [2500, 1, 900, 3000, 40]  # records of 100 B: large and small Produce requests
    batches = [_values(request, count, 100) for request, count in enumerate(sizes)]
    frames = []
    for request, values in enumerate(batches):
        frames.append(_produce_frame(100 + request, values))
        frames.append(request_frame(API_VERSIONS, 0, 200 + request))
    stream = b"".join(frames)
    # Cuts that land inside frames, between them, and with the end of one large request in
    # the same read as the next requests.
    cuts = sorted({4, 70_000, 250_100, 251_000, 300_007, len(stream) - 200_000,
                   len(stream) - 90_001, len(stream) - 10})
    with connect(broker) as sock:
        _send_in_pieces(sock, stream, [cut for cut in cuts if 0 < cut < len(stream)])
        offset = 0
        for request, values in enumerate(batches):
            produced = read_frame(sock)
            assert produced is not None
            assert _answer(produced) == (100 + request, 0, offset)
            offset += len(values)
            versions = read_frame(sock)
            assert versions is not None
            assert struct.unpack_from(">ih", versions, 0) == (200 + request, 0)
    assert _stored_values(broker) == [value for values in batches for value in values]


def test_a_client_that_stops_inside_a_large_request_leaves_the_broker_serving(
        any_backend_broker):
    """The part of a large request already received is dropped with its connection; nothing
    of it is stored, and other clients are served."""
    broker = any_backend_broker
    broker.store.create_topic("t", 1)
    frame = _produce_frame(7, _values(1, 3000, 100))
    with connect(broker) as sock:
        _send_in_pieces(sock, frame[:len(frame) // 2], [len(frame) // 4])
    with connect(broker) as sock:
        small = _produce_frame(8, _values(2, 10, 100))
        sock.sendall(small)
        answer = read_frame(sock)
    assert answer is not None
    assert _answer(answer) == (8, 0, 0)
    assert _stored_values(broker) == _values(2, 10, 100)


def test_a_large_request_whose_body_does_not_decode_closes_only_its_connection(
        any_backend_broker):
    """A 200 KB request of an API the broker serves, received over several reads, whose body
    is not a request: its connection closes (as for a small one, Kafka's answer to a body
    that does not parse) and nothing is stored; other clients are served."""
    broker = any_backend_broker
    broker.store.create_topic("t", 1)
    garbage = request_frame(PRODUCE, 9, 3, b"\xff" * 200_000, flexible=True)
    with connect(broker) as sock:
        _send_in_pieces(sock, garbage, [60_000, 120_000])
        assert read_frame(sock) is None
    with connect(broker) as sock:
        sock.sendall(_produce_frame(4, _values(3, 5, 100)))
        answer = read_frame(sock)
    assert answer is not None
    assert _answer(answer) == (4, 0, 0)
    assert _stored_values(broker) == _values(3, 5, 100)


class _TakingTransport(asyncio.Transport):
    """A transport that keeps what it is handed, and delivers whatever the test passes to the
    protocol whether reading is paused or not (as asyncio's selector transport does with a
    read the loop had already scheduled when the protocol paused it)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closing = False

    def write(self, data) -> None:  # noqa: ANN001 - asyncio's signature
        self.written += data

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


def test_a_large_request_completed_under_back_pressure_waits_then_is_answered(
        any_backend_broker):
    """The last part of a large request delivered after the connection stopped reading (its
    client does not take its answers: writing paused) waits with the other held frames and is
    answered once writing resumes, in order, stored once."""
    broker = any_backend_broker
    broker.store.create_topic("t", 1)
    values = _values(1, 3000, 100)
    frame = _produce_frame(9, values)

    log = broker.store.topic("t").log(0)

    async def scenario() -> tuple[int, bytes, bytes]:
        connection = Connection(broker.server, 10_001)
        transport = _TakingTransport()
        connection.connection_made(transport)
        connection.data_received(frame[:len(frame) // 2])  # the large-frame path starts
        connection.pause_writing()  # the client stops taking answers: reading pauses
        connection.data_received(frame[len(frame) // 2:])  # a read already scheduled
        end_while_held = log.end_offset  # not handled while it must wait
        held = bytes(transport.written)
        connection.resume_writing()
        await asyncio.sleep(0)  # a flush the resumption scheduled, if any
        answered = bytes(transport.written)
        connection.connection_lost(None)
        return end_while_held, held, answered

    end_while_held, held, answered = run_on_broker_loop(broker, scenario())
    assert (end_while_held, held) == (0, b"")
    (size,) = struct.unpack_from(">i", answered)
    assert len(answered) == 4 + size
    assert _answer(answered[4:]) == (9, 0, 0)
    assert _stored_values(broker) == values


METADATA = 3


def _metadata_frame(correlation_id: int, topics: int) -> bytes:
    """A Metadata v4 request naming ``topics`` topics that do not exist (28 B each),
    without auto-creation."""
    names = [f"no-such-topic-{index:012d}".encode() for index in range(topics)]
    body = struct.pack(">i", len(names)) + b"".join(
        struct.pack(">h", len(name)) + name for name in names) + b"\x00"
    return request_frame(METADATA, 4, correlation_id, body)


@pytest.mark.parametrize("split", ["whole", "pieces"])
def test_a_large_request_of_a_decoded_api_is_answered_however_it_arrives(
        any_backend_broker, split):
    """An 84 KB Metadata request (an API whose body is decoded, not read in place): read in
    one piece (its frame a view of the read) or over several reads (the large-frame path,
    a buffer of its own size), it is decoded and answered, as Kafka answers it: every topic
    UNKNOWN_TOPIC_OR_PARTITION (3), and the connection goes on."""
    frame = _metadata_frame(11, 3000)
    assert len(frame) > 80_000
    with connect(any_backend_broker) as sock:
        if split == "whole":
            sock.sendall(frame)
        else:
            _send_in_pieces(sock, frame, [30_000, 60_000])
        answer = read_frame(sock)
        assert answer is not None
        (correlation_id,) = struct.unpack_from(">i", answer)
        assert correlation_id == 11
        # each topic: error code 3, then its name (int16 length 26)
        assert answer.count(b"\x00\x03\x00\x1ano-such-topic-") == 3000
        sock.sendall(request_frame(API_VERSIONS, 0, 12))
        versions = read_frame(sock)
        assert versions is not None
        assert struct.unpack_from(">ih", versions) == (12, 0)
