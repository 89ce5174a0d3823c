"""The hand-read Metadata request (big requests, issue 23) against kio's reading of the same
bytes, every version: the same topics (deduplicated alike), flags, and refusals."""

from __future__ import annotations

import io
import random
import uuid

import pytest
from seglog.schemas import load_request_schema
from kio.serial import entity_writer

from seglog.errors import InvalidRequestError
from seglog.server.apis.data_metadata import _decode as kio_decode  # the small-body path
from seglog.server.apis.data_metadata import build
from seglog.server.apis.data_metadata_codec import read_metadata_request

VERSIONS = range(0, 14)
ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def _body(version: int, topics, **flags) -> bytes:
    cls = load_request_schema(3, version)
    mod = __import__(cls.__module__, fromlist=["_"])
    wanted = None if topics is None else tuple(
        build(mod.MetadataRequestTopic, name=name, topic_id=topic_id)
        for topic_id, name in topics)
    values = {"allow_auto_topic_creation": True, "include_cluster_authorized_operations": False,
              "include_topic_authorized_operations": False, **flags}
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, build(cls, topics=wanted, **values))
    return buffer.getvalue()


def _cases(version: int):
    yield [(None, "a"), (None, "b"), (None, "a"), (None, "é-ü"), (None, "b")], {}
    yield [], {}
    if version >= 1:
        yield None, {}
    if version >= 4:
        yield [(None, "x")], {"allow_auto_topic_creation": False}
    if version >= 8:
        yield [(None, "x")], {"include_topic_authorized_operations": True,
                              "include_cluster_authorized_operations": True}
    if version >= 10:
        yield [(ID, None), (ID, None), (None, "n"), (ID, "n"), (None, "n")], {}


@pytest.mark.parametrize("version", VERSIONS)
def test_hand_reading_is_kios(version):
    for topics, flags in _cases(version):
        if version >= 10 and topics is not None:
            topics = [(topic_id or uuid.UUID(int=0), name) for topic_id, name in topics]
        body = _body(version, topics, **flags)
        expected = kio_decode(version, memoryview(body))
        assert read_metadata_request(version, memoryview(body)) == expected, (topics, flags)
        # Bytes after the body are ignored by both.
        assert read_metadata_request(version, memoryview(body + b"\x01\x02")) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_refused(version):
    body = _body(version, [(uuid.UUID(int=0), "topic")] if version >= 10 else [(None, "topic")],
                 allow_auto_topic_creation=True)
    for cut in range(len(body)):
        with pytest.raises(InvalidRequestError):
            read_metadata_request(version, memoryview(body[:cut]))


def test_counts_and_lengths_are_checked_before_use():
    for body in (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x00\x00\x00\x01\xff\xfe"):
        with pytest.raises(InvalidRequestError):
            read_metadata_request(4, memoryview(body + b"\x00" * 8))
    with pytest.raises(InvalidRequestError, match="UTF-8"):
        read_metadata_request(4, memoryview(b"\x00\x00\x00\x01\x00\x01\xff\x01"))
    with pytest.raises(InvalidRequestError):  # v0 topics are not nullable
        read_metadata_request(0, memoryview(b"\xff\xff\xff\xff"))


@pytest.mark.fuzz
@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_bodies_are_refused_or_read_as_kio_reads_them(version):
    rng = random.Random(23_000 + version)
    topics = [(uuid.UUID(int=0) if version >= 10 else None, n) for n in ("a", "bb", "a")]
    if version >= 10:
        topics.append((ID, None))
    seed = _body(version, topics)
    for _ in range(2000):
        body = bytearray(seed)
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.randrange(256)
        if rng.random() < 0.3:
            del body[rng.randrange(len(body)):]
        try:
            ours = read_metadata_request(version, memoryview(bytes(body)))
        except InvalidRequestError:
            continue  # refused (kio may take some of these; never the other way round)
        try:
            theirs = kio_decode(version, memoryview(bytes(body)))
        except InvalidRequestError:
            pytest.fail(f"read bytes kio refuses: {bytes(body)!r}")
        assert ours == theirs, bytes(body)


@pytest.mark.parametrize("version", VERSIONS)
def test_sliced_answer_is_kios_encoding(version):
    """A big answer is encoded in slices on a worker (issue 23): byte for byte what kio
    writes for the whole response, whatever the version, with topics answered in full,
    errors kept as (code, name, operations) tuples and more topics than one slice."""
    from seglog import error_codes as codes
    from seglog.server import protocol
    from seglog.server.apis import data_metadata as dm

    classes = dm._entity_classes(version)
    broker = build(classes[1], node_id=1, host="127.0.0.1", port=9092, rack=None)
    partition = build(classes[3], error_code=dm.ErrorCode(codes.NONE), partition_index=0,
                      leader_id=1, leader_epoch=0, replica_nodes=(1,), isr_nodes=(1,),
                      offline_replicas=())
    full = build(classes[2], error_code=dm.ErrorCode(codes.NONE), name="t", topic_id=ID,
                 is_internal=False, partitions=(partition,),
                 topic_authorized_operations=dm.AUTHORIZED_OPERATIONS_OMITTED)
    omitted = dm.AUTHORIZED_OPERATIONS_OMITTED
    entries = [full] + [(codes.UNKNOWN_TOPIC_OR_PARTITION, f"u{i}", omitted)
                        for i in range(dm.WORK_PER_TURN + 5)] + [
        (codes.INVALID_TOPIC_EXCEPTION, "bad name", 0b1000), full]
    for cluster_id in ("c", None):
        head = {"throttle_time": dm._ZERO_MS, "brokers": (broker,), "cluster_id": cluster_id,
                "controller_id": 1, "cluster_authorized_operations": -2**31,
                "error_code": dm.ErrorCode(codes.NONE)}
        whole = protocol.encode_body(build(classes[0], topics=tuple(
            dm._entity(classes, e) for e in entries), **head))
        assert b"".join(dm._encode_in_slices(classes, head, entries)) == whole
        assert b"".join(dm._encode_in_slices(classes, head, [])) == protocol.encode_body(
            build(classes[0], topics=(), **head))
