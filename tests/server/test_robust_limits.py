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
import threading
import time

from core_helpers import connect, read_frame, request_frame

FETCH, METADATA, CREATE_TOPICS, INIT_PRODUCER_ID, CREATE_PARTITIONS = 1, 3, 19, 22, 37
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


def _create_partitions_v1(name: str, count: int) -> bytes:
    """CreatePartitions v1's body: grow ``name`` to ``count``, no assignments; 60 s; not
    validate-only."""
    return (struct.pack(">i", 1) + _string(name) + struct.pack(">ii", count, -1)
            + struct.pack(">i?", 60_000, False))


def test_create_partitions_to_9999_leaves_other_clients_served(broker):
    broker.store.create_topic("probe")
    broker.store.create_topic("grow")
    big = request_frame(CREATE_PARTITIONS, 1, 1, _create_partitions_v1("grow", 9999))
    small = request_frame(METADATA, 4, 2, _metadata_v4(["probe"],
                                                       allow_auto_topic_creation=False))
    second_partition = os.path.join(broker.store.path, "grow-1")
    with connect(broker, BIG_REQUEST_TIMEOUT_S) as sock, \
            connect(broker, SMALL_REQUEST_TIMEOUT_S) as other:
        sock.sendall(big)
        _wait_until(lambda: os.path.isdir(second_partition) or _answered(sock),
                    SMALL_REQUEST_TIMEOUT_S)
        other.sendall(small)
        assert _metadata_v4_topics(read_frame(other)) == [("probe", 0)]
        # Answered while the new partitions are still being made (they are published all at
        # once at the end): before issue 23 the growth held the Store's lock throughout.
        assert broker.store.topic("grow").partitions == 1, \
            "the growth held up the other client"
        frame = read_frame(sock)
    # CreatePartitions v1's answer: throttle, then [(name, error code, message)].
    assert struct.unpack_from(">iii", frame, 0)[2] == 1
    (length,) = struct.unpack_from(">h", frame, 12)
    assert frame[14:14 + length] == b"grow"
    assert struct.unpack_from(">h", frame, 14 + length) == (0,)
    assert broker.store.topic("grow").partitions == 9999
    assert len(broker.store.topic("grow").end_offsets()) == 9999


def test_init_producer_id_storm_leaves_other_clients_served(broker):
    """20,000 pipelined InitProducerId requests (each writes a transaction state record) on
    one connection: another client's Metadata is answered before the storm is."""
    broker.store.create_topic("probe")
    storm = 20_000
    frames = b"".join(request_frame(INIT_PRODUCER_ID, 1, i, _string(f"txn-{i}")
                                    + struct.pack(">i", 60_000)) for i in range(storm))
    small = request_frame(METADATA, 4, 2, _metadata_v4(["probe"],
                                                       allow_auto_topic_creation=False))
    with connect(broker, BIG_REQUEST_TIMEOUT_S) as sock, \
            connect(broker, SMALL_REQUEST_TIMEOUT_S) as other:
        sender = threading.Thread(target=sock.sendall, args=(frames,), daemon=True)
        sender.start()
        first = read_frame(sock)  # the storm is being answered
        assert struct.unpack_from(">ih", first, 0) == (0, 0)
        other.sendall(small)
        assert _metadata_v4_topics(read_frame(other)) == [("probe", 0)]
        # Served while the storm still runs: a broker that answered a connection's pipelined
        # requests in one go (each a write under the Store's lock) held the other client.
        made = len(broker.store.transaction_coordinator().transactional_ids())
        assert made < storm, "the storm held up the other client"
        answered = 1
        while answered < storm:
            frame = read_frame(sock)
            # In order, each a new producer id (error code 0).
            assert struct.unpack_from(">ih", frame, 0) == (answered, 0)
            answered += 1
        sender.join(SMALL_REQUEST_TIMEOUT_S)


def _fetch_v4_everything(topic: str) -> bytes:
    """Fetch v4's body: partition 0 of ``topic`` from offset 0, 2**31-1 bytes asked overall
    and for the partition, no wait."""
    return (struct.pack(">iiiib", -1, 0, 1, 2**31 - 1, 0) + struct.pack(">i", 1)
            + _string(topic) + struct.pack(">iiqi", 1, 0, 0, 2**31 - 1))


def test_a_fetch_asking_for_2_gib_gets_at_most_fetch_max_bytes(broker_factory):
    """Kafka caps a Fetch at min(its max_bytes, fetch.max.bytes) whatever the client asks
    (``KafkaApis.handleFetchRequest``): 3 MiB of records, fetch.max.bytes 1 MiB."""
    cap = 1 << 20
    broker = broker_factory(fetch_max_bytes=cap)
    topic = broker.store.create_topic("t")
    for _ in range(30):
        topic.log(0).append_batch([b"x" * 1000] * 100)  # about 100 KiB a batch
    with connect(broker, SMALL_REQUEST_TIMEOUT_S) as sock:
        sock.sendall(request_frame(FETCH, 4, 1, _fetch_v4_everything("t")))
        frame = read_frame(sock)
    correlation_id, _throttle, topics = struct.unpack_from(">iii", frame, 0)
    assert (correlation_id, topics) == (1, 1)
    (name_bytes,) = struct.unpack_from(">h", frame, 12)
    position = 14 + name_bytes
    partitions, _index, error_code = struct.unpack_from(">iih", frame, position)
    assert (partitions, error_code) == (1, 0)
    position += 10 + 16  # high watermark, last stable offset
    (aborted,) = struct.unpack_from(">i", frame, position)
    position += 4 + max(aborted, 0) * 16
    (size_bytes,) = struct.unpack_from(">i", frame, position)
    assert cap // 2 < size_bytes <= cap
