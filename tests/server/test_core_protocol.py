"""The broker core's protocol handling over raw sockets: ApiVersions at every version (and
Kafka's answers to unknown versions), request and response headers, pipelining and response
order, and what closes a connection (unknown API keys, bad versions, malformed headers)."""

from __future__ import annotations

import asyncio
import struct

import pytest
from seglog.schemas import load_response_schema
from kio.serial import entity_reader

from core_helpers import connect, read_frame, request_frame
from seglog import error_codes as codes
from seglog import features
from seglog.server import protocol
from seglog.server.registry import ApiHandler

API_VERSIONS = 18


def _decode_api_versions(version: int, frame: bytes):
    """(correlation id, kio ApiVersionsResponse) of a response frame (header v0)."""
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    value, size = entity_reader(load_response_schema(API_VERSIONS, version))(frame, 4)
    assert 4 + size == len(frame)
    return correlation_id, value


def _api_versions_body(version: int) -> bytes:
    # v3+ carry the client software name and version (compact strings) and tagged fields.
    if version >= 5:  # v5 adds the cluster id (null: a client) and node id (-1)
        return _compact(b"seglog") + _compact(b"1.0") + b"\x00" + b"\xff\xff\xff\xff" + b"\x00"
    if version >= 3:
        return _compact(b"seglog") + _compact(b"1.0") + b"\x00"
    return b""


def _compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


@pytest.mark.parametrize("version", range(0, 6))
def test_api_versions_every_version_lists_what_the_registry_serves(broker, version):
    with connect(broker) as sock:
        sock.sendall(request_frame(API_VERSIONS, version, 7, _api_versions_body(version),
                                   flexible=version >= 3))
        correlation_id, response = _decode_api_versions(version, read_frame(sock))
    assert correlation_id == 7
    assert response.error_code == 0
    served = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert served == broker.api_ranges
    assert (API_VERSIONS, 0, 5) in served
    handlers = broker.server.handlers
    assert {k for k, _, _ in served} == set(handlers) | {API_VERSIONS}
    for key, low, high in served:
        if key != API_VERSIONS:
            assert (low, high) == (handlers[key].min_version, handlers[key].max_version)
    if version >= 3:  # the features seglog builds, finalized at a new cluster's levels
        epoch, levels = broker.server.finalized_features
        assert response.finalized_features_epoch == epoch
        assert {f.name: (f.min_version_level, f.max_version_level)
                for f in response.finalized_features} == features.finalized_ranges(levels)
        assert {f.name: (f.min_version, f.max_version) for f in response.supported_features} \
            == {name: span for name, span in features.supported_ranges().items()
                if version >= 4 or span[0] >= 1}


@pytest.mark.parametrize("version", [6, 9, 127])
def test_api_versions_unknown_version_answered_in_v0_with_unsupported_version(broker, version):
    # KIP-511: header v2 (the client sends its newest), answer v0 with ApiVersions' range.
    with connect(broker) as sock:
        sock.sendall(request_frame(API_VERSIONS, version, 11, _api_versions_body(3),
                                   flexible=True))
        correlation_id, response = _decode_api_versions(0, read_frame(sock))
        assert correlation_id == 11
        assert response.error_code == codes.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == \
            [(API_VERSIONS, 0, 5)]
        # The connection stays usable: the client retries at a version we know.
        sock.sendall(request_frame(API_VERSIONS, 3, 12, _api_versions_body(3), flexible=True))
        correlation_id, response = _decode_api_versions(3, read_frame(sock))
        assert (correlation_id, response.error_code) == (12, 0)


def test_api_versions_bad_client_software_name_is_invalid_request(broker):
    with connect(broker) as sock:
        body = _compact(b"-x") + _compact(b"1.0") + b"\x00"
        sock.sendall(request_frame(API_VERSIONS, 3, 5, body, flexible=True))
        correlation_id, response = _decode_api_versions(3, read_frame(sock))
    assert (correlation_id, response.error_code) == (5, codes.INVALID_REQUEST)
    assert response.api_keys == ()


def test_pipelined_requests_are_answered_in_order(broker):
    frames = b"".join(request_frame(API_VERSIONS, i % 3, 100 + i) for i in range(50))
    with connect(broker) as sock:
        sock.sendall(frames)
        for i in range(50):
            correlation_id, response = _decode_api_versions(i % 3, read_frame(sock))
            assert (correlation_id, response.error_code) == (100 + i, 0)


def test_a_frame_split_across_many_writes(broker):
    frame = request_frame(API_VERSIONS, 2, 9)
    with connect(broker) as sock:
        for i in range(len(frame)):
            sock.sendall(frame[i:i + 1])
        correlation_id, response = _decode_api_versions(2, read_frame(sock))
    assert (correlation_id, response.error_code) == (9, 0)


def test_null_client_id_is_accepted(broker):
    with connect(broker) as sock:
        sock.sendall(request_frame(API_VERSIONS, 1, 3, client_id=None))
        assert _decode_api_versions(1, read_frame(sock))[0] == 3


@pytest.mark.parametrize("frame", [
    pytest.param(request_frame(30000, 0, 1), id="unknown-api-key"),
    pytest.param(request_frame(-1, 0, 1), id="negative-api-key"),
    pytest.param(struct.pack(">i", 3) + b"\x00\x12\x00", id="truncated-header"),
    pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 1, 50),
                 id="client-id-past-end"),
    pytest.param(struct.pack(">i", 12) + struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe",
                 id="client-id-not-utf8"),
    pytest.param(request_frame(API_VERSIONS, 3, 1, b"\x7f", flexible=True), id="body-truncated"),
])
def test_bad_requests_close_the_connection_and_others_carry_on(broker, frame):
    with connect(broker) as bystander, connect(broker) as sock:
        sock.sendall(frame)
        assert read_frame(sock) is None
        bystander.sendall(request_frame(API_VERSIONS, 0, 2))
        assert _decode_api_versions(0, read_frame(bystander))[0] == 2


def test_bytes_after_the_body_are_ignored_as_kafka_does(broker):
    """Kafka's parser reads a request's fields and ignores what follows (Kafka 4.4 answers
    ApiVersions v0 + b"extra"; librdkafka 2.16 sends Metadata v13 for all topics with three
    bytes more than the schema has): answered, the connection stays open."""
    with connect(broker) as sock:
        sock.sendall(request_frame(API_VERSIONS, 0, 1, b"extra"))
        assert _decode_api_versions(0, read_frame(sock))[0] == 1
        sock.sendall(request_frame(API_VERSIONS, 0, 2))
        assert _decode_api_versions(0, read_frame(sock))[0] == 2


def test_served_api_outside_its_versions_closes_the_connection(broker):
    async def handle(ctx, request):
        return None

    broker.server.handlers[1000] = ApiHandler(1000, 2, 3, handle, raw_request=True)
    with connect(broker) as sock:
        sock.sendall(request_frame(1000, 4, 1))
        assert read_frame(sock) is None


def test_handlers_finishing_out_of_order_are_answered_in_request_order(broker):
    # A raw handler whose first request waits for the second: the second finishes first,
    # yet the responses go out in request order.
    release = {}

    async def handle(ctx, body):
        if ctx.correlation_id == 1:
            release[1] = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(release[1], 10)
        else:
            release[1].set_result(None)
        return __import__("seglog.server.context", fromlist=["RawResponse"]).RawResponse(
            (bytes(body),))

    broker.server.handlers[1000] = ApiHandler(1000, 0, 0, handle, raw_request=True)
    with connect(broker) as sock:
        sock.sendall(request_frame(1000, 0, 1, b"first") + request_frame(1000, 0, 2, b"second"))
        assert read_frame(sock) == struct.pack(">i", 1) + b"first"
        assert read_frame(sock) == struct.pack(">i", 2) + b"second"


def test_a_handler_returning_none_sends_nothing_and_keeps_order(broker):
    from seglog.server.context import RawResponse

    async def handle(ctx, body):
        return None if body == b"quiet" else RawResponse((b"ok",))

    broker.server.handlers[1000] = ApiHandler(1000, 0, 0, handle, raw_request=True)
    with connect(broker) as sock:
        sock.sendall(request_frame(1000, 0, 1, b"quiet") + request_frame(1000, 0, 2, b"loud"))
        assert read_frame(sock) == struct.pack(">i", 2) + b"ok"


def test_a_failing_handler_closes_only_its_connection(broker):
    async def handle(ctx, body):
        raise RuntimeError("handler bug")

    broker.server.handlers[1000] = ApiHandler(1000, 0, 0, handle, raw_request=True)
    with connect(broker) as bystander, connect(broker) as sock:
        sock.sendall(request_frame(1000, 0, 1))
        assert read_frame(sock) is None
        bystander.sendall(request_frame(API_VERSIONS, 0, 2))
        assert _decode_api_versions(0, read_frame(bystander))[0] == 2


def test_flexible_response_header_has_tagged_fields(broker):
    # A kio response of a flexible version gets response header v1 (a tag count byte).
    from seglog.schemas import load_request_schema, load_response_schema
    from kio.schema.errors import ErrorCode
    import datetime

    cls = load_response_schema(12, 4)  # HeartbeatResponse v4 (flexible)

    async def handle(ctx, request):
        assert type(request) is load_request_schema(12, 4)
        return cls(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none)

    broker.server.handlers[12] = ApiHandler(12, 4, 4, handle)
    body = _compact(b"g") + struct.pack(">i", 1) + _compact(b"m") + b"\x00" + b"\x00"
    with connect(broker) as sock:
        sock.sendall(request_frame(12, 4, 77, body, flexible=True))
        frame = read_frame(sock)
    assert frame[:5] == struct.pack(">i", 77) + b"\x00"
    assert frame[5:] == protocol.encode_body(cls(throttle_time=datetime.timedelta(0),
                                                 error_code=ErrorCode.none))


def test_an_unknown_tagged_field_is_a_typed_refusal():
    """kio's reader does not know a tagged field Kafka would keep as unknown: the request is
    refused with InvalidRequestError (one log line, the connection closed), never a KeyError
    escaping the dispatch (found by the ACL fuzz run)."""
    import struct

    from seglog.errors import InvalidRequestError
    from seglog.server import protocol

    header = struct.pack(">hhih", 3, 12, 1, -1) + b"\x00"
    # Metadata v12: topics null, allow auto-creation, no topic operations, then one tagged
    # field of tag 99 holding one byte.
    frame = header + b"\x00\x01\x00" + b"\x01\x63\x01\x00"
    parsed = protocol.parse_request_header(frame, flexible=True)
    with pytest.raises(InvalidRequestError, match="tagged field"):
        protocol.read_request_body(3, 12, frame, parsed.body_offset)
