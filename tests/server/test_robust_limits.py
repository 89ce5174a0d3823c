"""Limits before work (issue 23): no request stalls every other client, and auto-creation is
bounded per request as Kafka 4.4 bounds it.

Each test is a real second client on a raw socket beside the big request's: a Metadata
request naming hundreds of thousands of topics, a CreateTopics of 9,999 partitions. What is
checked is behaviour, never a timing: the second client's request is answered while the big
one is still running (its answer not yet sent, its topic not yet created), and the big one is
answered correctly after. Every wait is bounded by socket timeouts generous enough for a
loaded 2-core machine; the stall figures themselves are in the report of issue 23.
"""

from __future__ import annotations

import os
import select
import struct
import time

from core_helpers import connect, read_frame, request_frame

METADATA, CREATE_TOPICS = 3, 19
#: Generous bounds (a loaded 2-core machine): the big requests take seconds there.
BIG_REQUEST_TIMEOUT_S = 180.0
SMALL_REQUEST_TIMEOUT_S = 60.0


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _metadata_v4(names: list[str], *, allow_auto_topic_creation: bool) -> bytes:
    """Metadata v4's body (topics, allow_auto_topic_creation), built by hand: the test's own
    encoding of many topics stays fast."""
    return (struct.pack(">i", len(names)) + b"".join(_string(n) for n in names)
            + struct.pack(">?", allow_auto_topic_creation))


def _metadata_v4_topics(frame: bytes) -> list[tuple[str, int]]:
    """``[(name, error_code), ...]`` of a Metadata v4 response frame."""
    pos = 4 + 4  # correlation id, throttle_time_ms
    (brokers,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    for _ in range(brokers):
        pos += 4  # node id
        (length,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + length + 4  # host, port
        (length,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(length, 0)  # rack
    (length,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + max(length, 0) + 4  # cluster id, controller id
    (count,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    topics = []
    for _ in range(count):
        error_code, length = struct.unpack_from(">hh", frame, pos)
        pos += 4
        name = frame[pos:pos + length].decode()
        pos += length + 1  # is_internal
        (partitions,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        for _ in range(partitions):
            pos += 2 + 4 + 4  # error code, index, leader
            for _ in range(2):  # replicas, isr
                (n,) = struct.unpack_from(">i", frame, pos)
                pos += 4 + 4 * n
        topics.append((name, error_code))
    return topics


def _answered(sock) -> bool:
    """Whether the broker has written anything back on ``sock`` yet (no wait)."""
    return bool(select.select([sock], [], [], 0)[0])


def _wait_until(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.002)


def test_metadata_naming_many_topics_leaves_other_clients_served(broker):
    broker.store.create_topic("probe")
    names = [f"missing-{i:06d}" for i in range(300_000)]
    big = request_frame(METADATA, 4, 1, _metadata_v4(names + names[:1000],
                                                     allow_auto_topic_creation=False))
    small = request_frame(METADATA, 4, 2, _metadata_v4(["probe"],
                                                       allow_auto_topic_creation=False))
    with connect(broker, BIG_REQUEST_TIMEOUT_S) as sock, \
            connect(broker, SMALL_REQUEST_TIMEOUT_S) as other:
        sock.sendall(big)
        # Once the broker works on the big request (or, before issue 23, has answered it):
        _wait_until(lambda: broker.server.in_flight > 0 or _answered(sock),
                    SMALL_REQUEST_TIMEOUT_S)
        other.sendall(small)
        assert _metadata_v4_topics(read_frame(other)) == [("probe", 0)]
        # Served while the big one runs: before issue 23 the loop decoded, built and encoded
        # the big answer in one go, and the other client waited for all of it.
        assert not _answered(sock), "the big request held up the other client"
        topics = _metadata_v4_topics(read_frame(sock))
    # Every topic answered once (duplicates dropped), nothing created.
    assert topics == [(name, 3) for name in names]
    assert broker.store.topics() == ["probe"]


def _create_topics_v4(name: str, partitions: int) -> bytes:
    """CreateTopics v4's body: one topic, ``partitions`` partitions, replication factor 1,
    no assignments, no configs; timeout 60 s; not validate-only."""
    return (struct.pack(">i", 1) + _string(name) + struct.pack(">ihii", partitions, 1, 0, 0)
            + struct.pack(">i?", 60_000, False))


def test_create_topics_of_9999_partitions_leaves_other_clients_served(broker):
    broker.store.create_topic("probe")
    big = request_frame(CREATE_TOPICS, 4, 1, _create_topics_v4("big", 9999))
    small = request_frame(METADATA, 4, 2, _metadata_v4(["probe"],
                                                       allow_auto_topic_creation=False))
    first_partition = os.path.join(broker.store.path, "big-0")
    with connect(broker, BIG_REQUEST_TIMEOUT_S) as sock, \
            connect(broker, SMALL_REQUEST_TIMEOUT_S) as other:
        sock.sendall(big)
        _wait_until(lambda: os.path.isdir(first_partition) or _answered(sock),
                    SMALL_REQUEST_TIMEOUT_S)
        other.sendall(small)
        assert _metadata_v4_topics(read_frame(other)) == [("probe", 0)]
        # Answered while the partitions are still being made: before issue 23 the creation
        # held the Store's lock throughout, and the other client's lookup waited for it.
        assert "big" not in broker.store.topics(), "the creation held up the other client"
        frame = read_frame(sock)
    # CreateTopics v4's answer: throttle, then [(name, error code, message)].
    assert struct.unpack_from(">iii", frame, 0)[2] == 1
    (length,) = struct.unpack_from(">h", frame, 12)
    assert frame[14:14 + length] == b"big"
    assert struct.unpack_from(">h", frame, 14 + length) == (0,)
    assert broker.store.topic("big").partitions == 9999


def test_create_topics_of_many_small_topics_leaves_other_clients_served(broker):
    broker.store.create_topic("probe")
    names = [f"small-{i:03d}" for i in range(200)]
    body = (struct.pack(">i", len(names))
            + b"".join(_string(n) + struct.pack(">ihii", 16, 1, 0, 0) for n in names)
            + struct.pack(">i?", 60_000, False))
    small = request_frame(METADATA, 4, 2, _metadata_v4(["probe"],
                                                       allow_auto_topic_creation=False))
    first_partition = os.path.join(broker.store.path, "small-000-0")
    with connect(broker, BIG_REQUEST_TIMEOUT_S) as sock, \
            connect(broker, SMALL_REQUEST_TIMEOUT_S) as other:
        sock.sendall(request_frame(CREATE_TOPICS, 4, 1, body))
        _wait_until(lambda: os.path.isdir(first_partition) or _answered(sock),
                    SMALL_REQUEST_TIMEOUT_S)
        other.sendall(small)
        assert _metadata_v4_topics(read_frame(other)) == [("probe", 0)]
        # Before issue 23 topics of 16 partitions or fewer were made on the event loop, one
        # after the other: the other client waited for all 200.
        assert len(broker.store.topics()) < 1 + len(names), "the creation held up the other"
        frame = read_frame(sock)
    assert struct.unpack_from(">iii", frame, 0)[2] == len(names)
    assert sorted(broker.store.topics()) == sorted(names + ["probe"])


def test_metadata_auto_creation_over_kafkas_bound_creates_nothing(broker_factory, caplog):
    broker = broker_factory(num_partitions=1)
    names = [f"auto-{i:05d}" for i in range(20_000)]
    with connect(broker, BIG_REQUEST_TIMEOUT_S) as sock:
        sock.sendall(request_frame(METADATA, 4, 1, _metadata_v4(
            names, allow_auto_topic_creation=True)))
        topics = _metadata_v4_topics(read_frame(sock))
        # Kafka's broker answers what it asked the controller for UNKNOWN_TOPIC_OR_PARTITION.
        assert topics == [(name, 3) for name in names]
        assert broker.store.topics() == []
        assert "Excessively large number of partitions per request" in caplog.text
        # A request within the bound creates its topics.
        sock.sendall(request_frame(METADATA, 4, 2, _metadata_v4(
            ["one", "two", "one"], allow_auto_topic_creation=True)))
        assert _metadata_v4_topics(read_frame(sock)) == [("one", 3), ("two", 3)]
    assert broker.store.topics() == ["one", "two"]
