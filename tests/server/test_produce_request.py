"""The hand-read Produce request (issue 27, the broker's CPU per record produced) against the
generic path (``protocol.read_request_body``: the length walk, then kio) on the same bytes,
every served version: the same fields, and a refusal wherever the generic path refuses."""

from __future__ import annotations

import struct
import uuid

import pytest

from seglog.errors import InvalidRequestError
from seglog.server import protocol
from seglog.server.apis.data_produce_request import read_produce_request

from produce_helpers import damaged_copies, produce_body

VERSIONS = range(3, 14)
ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def _generic(version: int, body: bytes):
    return protocol.read_request_body(0, version, body, 0)


def _flat(request) -> tuple:
    """The fields the handler reads, records as bytes."""
    return (request.transactional_id, int(request.acks), request.timeout,
            tuple((t.topic_id if hasattr(t, "topic_id") and t.topic_id is not None
                   else getattr(t, "name", None),
                   tuple((int(p.index), None if p.records is None else bytes(p.records))
                         for p in t.partition_data))
                  for t in request.topic_data))


def _cases(version: int):
    key = (lambda name: ID) if version >= 13 else (lambda name: name)
    batch = bytes(range(256)) * 3
    yield [(key("a"), [(0, batch)])], {}
    yield [(key("a"), [(0, batch), (1, None), (7, b"")]), (key("é-ü"), [(2, b"x" * 300)])], {}
    yield [], {"transactional_id": "txn-1", "acks": 1, "timeout_ms": 5}
    yield [(key("b"), [])], {"acks": 0, "timeout_ms": -1}
    yield [(key("c"), [(2**31 - 1, b"\x00" * 70_000)])], {"transactional_id": ""}
    if version >= 13:
        yield [(uuid.UUID(int=0), [(0, b"z")])], {}


@pytest.mark.parametrize("version", VERSIONS)
def test_hand_reading_is_the_generic_paths(version):
    for topics, options in _cases(version):
        body = produce_body(version, topics, **options)
        expected = _flat(_generic(version, body))
        got = read_produce_request(version, memoryview(body))
        assert _flat(got) == expected, (topics, options)
        # Bytes after the body are ignored by both.
        assert _flat(read_produce_request(version, memoryview(body + b"\x01\x02"))) \
            == expected
        # Records are views of the request, not copies.
        for topic in got.topic_data:
            for partition in topic.partition_data:
                assert partition.records is None or isinstance(partition.records, memoryview)


def _outcome(read, version: int, body: bytes):
    try:
        request = read(version, body)
    except InvalidRequestError:
        return "refused"
    if request.topic_data is None or any(t.partition_data is None for t in request.topic_data):
        # kio reads a null where the schema has a (non-nullable) array; the handler then
        # failed on it and the connection closed. Kafka's parser refuses it, as the hand
        # reader does.
        return "refused"
    return _flat(request)


def _hand(version: int, body: bytes):
    return read_produce_request(version, memoryview(body))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_refused_alike(version):
    body = produce_body(version, [("t" if version < 13 else ID, [(0, b"r" * 40), (1, None)])],
                        transactional_id="tx")
    for cut in range(len(body)):
        assert _outcome(_hand, version, body[:cut]) == _outcome(_generic, version, body[:cut]), cut


def _damaged_bodies(version: int, records: bytes, count: int = 600):
    """``count`` copies of one request body, each with 1-3 bytes overwritten (seeded)."""
    body = produce_body(version, [("topic", [(0, records), (1, None)]), ("u", [(3, b"s")])],
                        transactional_id="tx")
    return damaged_copies(body, version, count)


@pytest.mark.parametrize("version", [3, 5, 8])
def test_corrupted_bytes_are_read_or_refused_alike(version):
    # Non-flexible versions (no tagged fields, where the two differ on purpose: see below).
    for damaged in _damaged_bodies(version, b"r" * 30):
        assert _outcome(_hand, version, damaged) == _outcome(_generic, version, damaged), \
            damaged.hex()


@pytest.mark.parametrize("version", [9, 12])
def test_corrupted_flexible_bodies_are_read_or_refused_typed(version):
    # v9-v12 take the broker's hot reader (compact lengths of one to three bytes written
    # out): whatever the damage, a body is read or refused with InvalidRequestError, never
    # another exception, and what it reads stays inside the body.
    for damaged in _damaged_bodies(version, b"r" * 300):
        try:
            request = read_produce_request(version, memoryview(damaged))
        except InvalidRequestError:
            continue
        records = [p.records for t in request.topic_data for p in t.partition_data]
        assert sum(len(r) for r in records if r is not None) <= len(damaged)


@pytest.mark.parametrize("version", [3, 9])
def test_null_and_lying_counts_are_refused(version):
    flexible = version >= 9
    head = (b"\x00" if flexible else b"\xff\xff") + struct.pack(">hi", -1, 1000)
    null_topics = head + (b"\x00" if flexible else struct.pack(">i", -1))
    huge_topics = head + (b"\xff\xff\xff\xff\x0f" if flexible else struct.pack(">i", 2**31 - 1))
    for body in (null_topics, huge_topics, head, b""):
        with pytest.raises(InvalidRequestError):
            read_produce_request(version, memoryview(body + b"\x00"))


def test_unknown_tagged_fields_are_skipped_as_kafka_does():
    # Kafka's generated parser keeps an unknown tagged field and goes on; the hand reader
    # skips it (kio 0.6.5 refuses it, so the generic path closed the connection).
    plain = produce_body(9, [("t", [(0, b"abc")])])
    assert plain.endswith(b"\x00\x00\x00")  # partition, topic and request tag sections
    tagged = plain[:-1] + b"\x01\x05\x02hi"  # one tagged field (tag 5, 2 bytes) at the end
    assert _flat(read_produce_request(9, memoryview(tagged))) == _flat(_generic(9, plain))


@pytest.mark.parametrize("version", [0, 1, 2, 14])
def test_versions_without_a_schema_are_refused(version):
    with pytest.raises(InvalidRequestError):
        read_produce_request(version, memoryview(produce_body(3, [("t", [(0, b"x")])])))
