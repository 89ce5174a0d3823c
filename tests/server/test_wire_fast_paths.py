"""``<backend>.wire``, the broker's request-header and Produce fast paths, on both backends:
what they read is what kio (an independent implementation of Kafka's protocol) wrote and what
the broker's full readers read; wherever the full readers refuse or read something else, the
fast paths decline (None), never disagree; the response they encode is kio's bytes."""

from __future__ import annotations

import datetime
import io
import struct
import uuid

import pytest
from kio.serial import entity_writer

from seglog.errors import InvalidRequestError
from seglog.schemas import load_response_schema
from seglog.server import protocol
from seglog.server.apis.data_produce_request import read_produce_request

from produce_helpers import damaged_copies, produce_body

VERSIONS = range(3, 14)
ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def _full(version: int, body: bytes):
    """The broker's full reader's answer, flattened as the fast path's tuple, or "refused",
    or "other" (a request that is not one topic of one partition)."""
    try:
        request = read_produce_request(version, memoryview(body))
    except InvalidRequestError:
        return "refused"
    if len(request.topic_data) != 1 or len(request.topic_data[0].partition_data) != 1:
        return "other"
    topic = request.topic_data[0]
    partition = topic.partition_data[0]
    return (request.transactional_id, request.acks, request.timeout_ms, topic.name,
            None if topic.topic_id is None else topic.topic_id.bytes, partition.index,
            None if partition.records is None else bytes(partition.records))


def _fast(backend, version: int, body: bytes):
    got = backend.wire.read_produce_single(version, body)
    if got is None:
        return None
    *head, records = got
    assert records is None or isinstance(records, memoryview)
    return (*head, None if records is None else bytes(records))


def _single_cases(version: int):
    key = (lambda name: ID) if version >= 13 else (lambda name: name)
    batch = bytes(range(256)) * 3
    yield [(key("a"), [(0, batch)])], {}
    yield [(key("é-ü"), [(7, None)])], {"transactional_id": "txn-1", "acks": 1,
                                         "timeout_ms": 5}
    yield [(key("c"), [(2**31 - 1, b"\x00" * 70_000)])], {"transactional_id": "",
                                                          "acks": 0, "timeout_ms": -1}
    yield [(key("d"), [(-3, b"")])], {"acks": -7}
    if version >= 13:
        yield [(uuid.UUID(int=0), [(0, b"z")])], {}


@pytest.mark.parametrize("version", VERSIONS)
def test_reads_what_kio_wrote_as_the_full_reader_does(backend, version):
    for topics, options in _single_cases(version):
        body = produce_body(version, topics, **options)
        expected = _full(version, body)
        assert expected not in ("refused", "other")
        assert _fast(backend, version, body) == expected, (topics, options)
        key, ((index, records),) = topics[0]
        assert expected[5] == index and expected[6] == records
        # Bytes after the body are ignored, as by the full reader.
        assert _fast(backend, version, body + b"\x01\x02") == expected


def test_reads_any_contiguous_buffer_by_bytes(backend):
    body = produce_body(9, [("t", [(0, b"r" * 40)])])
    padded = body + bytes(-len(body) % 4)  # a whole number of int32 items
    for buffer in (bytearray(body), memoryview(body), memoryview(padded).cast("i")):
        got = _fast(backend, 9, buffer)
        assert got is not None and got[6] == b"r" * 40, type(buffer)


@pytest.mark.parametrize("version", VERSIONS)
def test_declines_other_shapes(backend, version):
    key = (lambda name: ID) if version >= 13 else (lambda name: name)
    for topics in ([], [(key("a"), [])], [(key("a"), [(0, b"x"), (1, b"y")])],
                   [(key("a"), [(0, b"x")]), (key("b"), [(0, b"y")])]):
        body = produce_body(version, topics)
        assert _full(version, body) == "other"
        assert backend.wire.read_produce_single(version, body) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_declines(backend, version):
    body = produce_body(version, [("t" if version < 13 else ID, [(0, b"r" * 40)])],
                        transactional_id="tx")
    for cut in range(len(body)):
        assert backend.wire.read_produce_single(version, body[:cut]) is None, cut


@pytest.mark.parametrize("version", VERSIONS)
def test_damaged_bodies_are_declined_or_read_as_the_full_reader_reads_them(
        backend, native, version):
    body = produce_body(version, [("topic" if version < 13 else ID, [(0, b"r" * 300)])],
                        transactional_id="tx")
    read = 0
    for damaged in damaged_copies(body, version, 500):
        fast = _fast(backend, version, damaged)
        if fast is not None:
            read += 1
            assert fast == _full(version, damaged), damaged.hex()
        # The twins decline the same bodies.
        assert fast == _fast(native, version, damaged), damaged.hex()
    assert read > 0  # the damage is not always fatal: the comparison above ran


def test_declines_what_needs_the_full_reader(backend):
    plain = produce_body(9, [("t", [(0, b"abc")])])
    assert plain.endswith(b"\x00\x00\x00")  # partition, topic and request tag sections
    tagged = plain[:-1] + b"\x01\x05\x02hi"  # a tagged field the full reader skips
    assert _full(9, tagged) != "refused"
    assert backend.wire.read_produce_single(9, tagged) is None
    bad_name = produce_body(9, [("tt", [(0, b"abc")])]).replace(b"tt", b"t\xff")
    assert _full(9, bad_name) == "refused"
    assert backend.wire.read_produce_single(9, bad_name) is None
    for version in (0, 2, 14):
        assert backend.wire.read_produce_single(version, plain) is None


def _header(api_key: int, version: int, correlation_id: int, client_id: bytes | None,
            tags: bytes | None) -> bytes:
    client = struct.pack(">h", -1) if client_id is None else (
        struct.pack(">h", len(client_id)) + client_id)
    return struct.pack(">hhi", api_key, version, correlation_id) + client + (tags or b"")


@pytest.mark.parametrize("flexible", [False, True])
def test_request_header_as_the_full_parser(backend, flexible):
    tags = b"\x00" if flexible else None
    for api_key, version, correlation_id, client_id in (
            (0, 9, 1, b"raw"), (3, 12, -5, None), (18, 3, 2**31 - 1, b""),
            (1, 17, 7, "client-é".encode())):
        frame = _header(api_key, version, correlation_id, client_id, tags) + b"body"
        expected = protocol.parse_request_header(frame, flexible=flexible)
        assert backend.wire.read_request_header(frame, flexible) == tuple(expected)
        assert backend.wire.read_request_header(memoryview(frame), flexible) \
            == tuple(expected)
        for cut in range(len(frame) - 4):  # the header cut short anywhere
            assert backend.wire.read_request_header(frame[:cut], flexible) is None, cut


def test_request_header_declines_what_needs_the_full_parser(backend):
    with_tag = _header(0, 9, 1, b"raw", b"\x01\x00\x01x")
    assert protocol.parse_request_header(with_tag, flexible=True).body_offset == len(with_tag)
    assert backend.wire.read_request_header(with_tag, True) is None
    for frame in (_header(0, 9, 1, b"r\xffw", b"\x00"),
                  struct.pack(">hhih", 0, 9, 1, -2) + b"\x00"):
        with pytest.raises(InvalidRequestError):
            protocol.parse_request_header(frame, flexible=True)
        assert backend.wire.read_request_header(frame, True) is None


def _kio_response(version: int, topic, partition: int, error_code: int, base_offset: int,
                  append_time_ms: int, log_start_offset: int) -> bytes:
    cls = load_response_schema(0, version)
    mod = __import__(cls.__module__, fromlist=["_"])
    from kio.schema.errors import ErrorCode

    fields = {"index": partition, "error_code": ErrorCode(error_code),
              "base_offset": base_offset}
    if version >= 2:
        fields["log_append_time"] = datetime.datetime.fromtimestamp(
            append_time_ms / 1000, datetime.timezone.utc) if append_time_ms != -1 else None
    if version >= 5:
        fields["log_start_offset"] = log_start_offset
    if version >= 8:
        fields["record_errors"] = ()
        fields["error_message"] = None
    part = mod.PartitionProduceResponse(**fields)
    key = {"topic_id": topic} if version >= 13 else {"name": topic}
    response = cls(responses=(mod.TopicProduceResponse(**key, partition_responses=(part,)),),
                   throttle_time=datetime.timedelta(0))
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, response)
    return buffer.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
def test_response_is_kios_bytes(backend, version):
    for topic, partition, error_code, base, append_ms, start in (
            ("t", 0, 0, 5, -1, 0), ("é-ü" * 40, 2**31 - 1, 6, -1, -1, -1),
            ("x", 3, 0, 2**62, 1_765_000_000_123, 17)):
        if version >= 13:
            key_kio, key_ours = ID, ID.bytes
        else:
            key_kio = key_ours = topic
        expected = _kio_response(version, key_kio, partition, error_code, base, append_ms,
                                 start)
        assert backend.wire.encode_produce_single(
            version, key_ours, partition, error_code, base, append_ms, start) == expected
    if version >= 13:
        assert backend.wire.encode_produce_single(version, None, 0, 0, 1, -1, 0) \
            == _kio_response(version, uuid.UUID(int=0), 0, 0, 1, -1, 0)


def test_response_refusals(backend):
    with pytest.raises(ValueError):
        backend.wire.encode_produce_single(2, "t", 0, 0, 0, -1, 0)
    with pytest.raises(ValueError):
        backend.wire.encode_produce_single(13, b"short", 0, 0, 0, -1, 0)
    with pytest.raises(TypeError):
        backend.wire.encode_produce_single(9, b"t", 0, 0, 0, -1, 0)


@pytest.mark.parametrize("size_bytes", [0, 1, 65_536, 3 * 1024 * 1024 + 7])
def test_frame_buffer_is_a_bytearray_of_the_size_asked_that_takes_what_is_written(
        backend, size_bytes):
    frame = backend.wire.frame_buffer(size_bytes)
    assert type(frame) is bytearray
    assert len(frame) == size_bytes
    data = bytes(range(256)) * (size_bytes // 256) + bytes(size_bytes % 256)
    frame[:] = data  # the connection writes every byte before it reads one
    assert frame == data
    assert len(frame) == size_bytes


def test_frame_buffer_refuses_a_negative_size(backend):
    with pytest.raises(ValueError):
        backend.wire.frame_buffer(-1)
    with pytest.raises((OverflowError, TypeError)):
        backend.wire.frame_buffer(2 ** 70)
