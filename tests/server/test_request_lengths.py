"""seglog.server.request_lengths: every length of a request body checked against the bytes
left before kio decodes it (kio 0.6.5 allocates a collection from its declared count, and a
huge count aborted the broker process). Valid requests pass: every request every client test
sends goes through the same check."""

from __future__ import annotations

import struct

import pytest
from seglog.schemas import load_request_schema

from seglog.errors import InvalidRequestError
from seglog.server import registry
from seglog.server.request_lengths import check_request, checker

METADATA = 3


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            return bytes(out + bytes([byte]))
        out.append(byte | 0x80)


def test_every_served_request_version_has_a_checker():
    handlers = registry.load_handlers(registry.load_modules())
    compiled = 0
    for handler in handlers.values():
        for version in range(handler.min_version, handler.max_version + 1):
            try:
                cls = load_request_schema(handler.api_key, version)
            except Exception:  # noqa: BLE001 - Produce v0-2: advertised, closed (Kafka 4.x)
                continue
            assert callable(checker(cls))
            compiled += 1
    assert compiled > 150


def test_valid_metadata_bodies_pass():
    # v4 (classic): topics null, allow_auto_topic_creation true.
    check_request(load_request_schema(METADATA, 4), struct.pack(">ib", -1, 1), 0)
    # v4 with one topic "t".
    check_request(load_request_schema(METADATA, 4),
                  struct.pack(">ih", 1, 1) + b"t" + b"\x01", 0)
    # v9 (flexible): one topic "t" (compact string, empty tags), auto-create, two booleans
    # of authorized operations, then the request's empty tagged fields.
    body = _uvarint(2) + _uvarint(2) + b"t" + b"\x00" + b"\x01\x00\x00" + b"\x00"
    check_request(load_request_schema(METADATA, 9), body, 0)


@pytest.mark.parametrize("version, body", [
    (9, _uvarint(2**32)),                                 # compact array of 2**32 - 1
    (4, struct.pack(">i", 2**31 - 1) + b"\x00" * 8),      # int32 count far past the end
    (4, struct.pack(">i", -2)),                           # negative, not the null marker
    (4, struct.pack(">ih", 1, 30000) + b"t"),             # string longer than what is left
    (9, _uvarint(2) + _uvarint(2**31)),                   # compact string too long
    (9, b"\x81\x82\x83\x84\x85\x86"),                     # varint longer than 5 bytes
    (9, b"\x01\x01\x00\x00\x01\x00\xff\x01"),             # a tagged field of 255 bytes in 0
    (4, b"\x00"),                                         # ends inside a length
])
def test_lengths_that_cannot_fit_are_invalid_requests(version, body):
    with pytest.raises(InvalidRequestError):
        check_request(load_request_schema(METADATA, version), body, 0)
