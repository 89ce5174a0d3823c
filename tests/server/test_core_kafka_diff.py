"""The core's answers to odd requests, byte for byte against the real Kafka 4.4 broker: the
same raw frames go to both, and each must be answered the same way or closed the same way.

The real broker is the session's shared one (``kafka_shared``, tests/conftest.py: these frames
read no state) from the Kafka jars ``ci/kafka-ref.sh`` caches; without java or the jars this
module skips (``SEGLOG_REQUIRE_KAFKA=1`` makes that a failure). ApiVersions' full list is
compared elsewhere (it differs by design: Kafka serves more APIs); here only its framing, its
error answers and the SASL entries are.
"""

from __future__ import annotations

import socket
import struct

import pytest
from seglog.schemas import load_response_schema
from kio.serial import entity_reader

from core_helpers import read_frame, request_frame

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


_SOFTWARE = _compact(b"seglog-test") + _compact(b"1.0") + b"\x00"

#: name -> a whole request frame. Each is sent on a fresh connection to both brokers.
CASES = {
    "api-versions-v127-unknown": request_frame(18, 127, 1, _SOFTWARE, flexible=True),
    "api-versions-v3-bad-software-name": request_frame(
        18, 3, 2, _compact(b"-bad") + _compact(b"1.0") + b"\x00", flexible=True),
    "api-versions-v3-truncated-body": request_frame(18, 3, 3, b"\x7f", flexible=True),
    "unknown-api-key": request_frame(30000, 0, 4),
    "broker-only-api-write-txn-markers": request_frame(27, 1, 5, b"\x00\x00\x00\x00",
                                                       flexible=True),
    "metadata-v99": request_frame(3, 99, 6, b"\x00", flexible=True),
    "produce-v0-removed": request_frame(0, 0, 7, b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"),
    "fetch-v3-removed": request_frame(1, 3, 8, b"\x00" * 40),
    "sasl-handshake-v0": request_frame(17, 0, 9, b"\x00\x05PLAIN"),
    "sasl-handshake-v1": request_frame(17, 1, 10, b"\x00\x05PLAIN"),
    "sasl-authenticate-v0": request_frame(36, 0, 11, b"\x00\x00\x00\x03abc"),
    "sasl-authenticate-v2": request_frame(36, 2, 12, b"\x04abc\x00", flexible=True),
    "negative-size": struct.pack(">i", -1) + b"\x00" * 8,
    "header-shorter-than-its-fields": struct.pack(">i", 3) + b"\x00\x12\x00",
    "client-id-past-the-end": struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 13, 50),
}


def _answer(port: int, frame: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.settimeout(30)
        sock.sendall(frame)
        response = read_frame(sock)
    return "closed" if response is None else response.hex()


def _all_ranges(port: int) -> dict[int, tuple[int, int]]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.settimeout(30)
        sock.sendall(request_frame(18, 4, 1, _SOFTWARE, flexible=True))
        frame = read_frame(sock)
    response, _ = entity_reader(load_response_schema(18, 4))(frame, 4)
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def _sasl_ranges(port: int) -> list[tuple[int, int, int]]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.settimeout(30)
        sock.sendall(request_frame(18, 4, 1, _SOFTWARE, flexible=True))
        frame = read_frame(sock)
    response, _ = entity_reader(load_response_schema(18, 4))(frame, 4)
    return [(k.api_key, k.min_version, k.max_version) for k in response.api_keys
            if k.api_key in (17, 18, 36)]


@pytest.fixture(scope="module")
def kafka_answers(kafka_shared):
    # The session's shared broker: these frames read no state (no topic, group or config).
    port = kafka_shared.port
    answers = {name: _answer(port, frame) for name, frame in CASES.items()}
    answers["sasl-ranges"] = _sasl_ranges(port)
    answers["ranges"] = _all_ranges(port)
    return answers


#: Answers that name the broker's own ApiVersions range (Kafka 4.4 serves v0-5, kio and so
#: seglog v0-4): compared with that one field masked.
_OWN_RANGE = {"api-versions-v127-unknown"}


def _mask_api_versions_max(answer: str) -> tuple:
    frame = bytes.fromhex(answer)
    response, _ = entity_reader(load_response_schema(18, 0))(frame, 4)
    return (frame[:4], response.error_code,
            [(k.api_key, k.min_version) for k in response.api_keys])


@pytest.mark.parametrize("name", sorted(CASES))
def test_answered_or_closed_as_kafka_does(kafka_answers, broker, name):
    answer = _answer(broker.port, CASES[name])
    if name in _OWN_RANGE:
        assert _mask_api_versions_max(answer) == _mask_api_versions_max(kafka_answers[name])
    else:
        assert answer == kafka_answers[name]


def test_sasl_apis_advertised_as_kafka_does(kafka_answers, broker):
    seglog = _sasl_ranges(broker.port)
    kafka = kafka_answers["sasl-ranges"]
    assert [r for r in seglog if r[0] != 18] == [r for r in kafka if r[0] != 18]


def test_every_advertised_range_is_within_kafkas(kafka_answers, broker):
    # Clients pick versions from the intersection of theirs and the broker's: advertising a
    # version Kafka 4.4 does not would send clients down paths no real broker takes.
    kafka = kafka_answers["ranges"]
    outside = {key: (low, high, kafka.get(key)) for key, (low, high)
               in _all_ranges(broker.port).items()
               if key not in kafka or not kafka[key][0] <= low <= high <= kafka[key][1]}
    assert outside == {}
