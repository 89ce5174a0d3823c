"""Producer: batching by linger and size, partitioning as Kafka's default partitioner."""

from __future__ import annotations

import collections
import threading
import time

import pytest

from seglog.errors import (
    IllegalStateError,
    InvalidRecordError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from seglog.clients.partitioner import partition_for_key
from seglog.store import Store


@pytest.fixture
def store(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        yield s


def batches(log):
    """Every batch of ``log`` as (base_offset, record_count, compression)."""
    out = []
    offset = log.start_offset
    while offset < log.end_offset:
        result = log.read(offset)
        for batch in log.backend.iter_batches(result.buffer):
            out.append((batch.base_offset, batch.record_count, batch.compression))
        offset = result.next_offset
    return out


def test_linger_holds_records_until_flush(store):
    store.create_topic("t")
    producer = store.producer(linger_ms=60_000, batch_size_bytes=1 << 20)
    futures = [producer.send("t", f"v{i}".encode()) for i in range(10)]
    log = store.topic("t").log(0)
    assert log.end_offset == 0 and not futures[0].done()
    producer.flush()
    assert [f.result().offset for f in futures] == list(range(10))
    assert batches(log) == [(0, 10, "none")]
    assert [r.value for r in log.records()] == [f"v{i}".encode() for i in range(10)]


def test_linger_expiry_writes_in_background(store):
    store.create_topic("t")
    producer = store.producer(linger_ms=20, batch_size_bytes=1 << 20)
    started = time.monotonic()
    for i in range(3):
        producer.send("t", b"x", key=b"k")
    log = store.topic("t").log(0)
    assert log.wait_for_data(2, timeout_ms=5000)  # the sender writes without a flush
    assert time.monotonic() - started >= 0.015
    assert batches(log) == [(0, 3, "none")]
    producer.close()


def test_linger_writes_each_open_batch_past_stale_deadlines(store):
    """Batches written full leave stale deadlines behind; the linger thread skips them and
    still writes the batch left open (no flush), then sleeps and writes the next one."""
    store.create_topic("t")
    producer = store.producer(linger_ms=30, batch_size_bytes=400)
    log = store.topic("t").log(0)
    futures = [producer.send("t", b"v" * 50, key=b"k") for _ in range(20)]  # 5 batches
    for future in futures:
        future.result(timeout_ms=10_000)  # the last batch is not full: linger writes it
    assert [f.result().offset for f in futures] == list(range(20))
    counts = [count for _, count, _ in batches(log)]
    assert sum(counts) == 20 and len(counts) >= 5
    # The queue of deadlines is empty now: a new batch must wake the thread again.
    later = producer.send("t", b"w", key=b"k")
    assert later.result(timeout_ms=10_000).offset == 20
    producer.close()


def test_concurrent_sends_lose_no_record(store):
    """Threads sending at once while the linger thread writes expired batches: every record
    is written once, and each thread's records of a partition keep their order."""
    store.create_topic("t", partitions=3)
    producer = store.producer(linger_ms=1, batch_size_bytes=2000)
    per_thread = 1500
    futures: dict[int, list] = {}

    def send_many(thread_index: int) -> None:
        mine = futures[thread_index] = []
        for i in range(per_thread):
            key = None if i % 3 == 0 else b"k%d" % (i % 7)
            mine.append(producer.send("t", b"%d-%d" % (thread_index, i), key=key))

    threads = [threading.Thread(target=send_many, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    producer.flush()
    written = collections.Counter()
    for thread_index, mine in futures.items():
        last_offset: dict[int, int] = {}
        for future in mine:
            metadata = future.result(timeout_ms=10_000)
            assert metadata.offset > last_offset.get(metadata.partition, -1)
            last_offset[metadata.partition] = metadata.offset
            written[(metadata.partition, metadata.offset)] += 1
    assert len(written) == 4 * per_thread and set(written.values()) == {1}
    values = [r.value for p in range(3) for r in store.topic("t").log(p).records()]
    assert sorted(values) == sorted(b"%d-%d" % (t, i) for t in range(4) for i in range(per_thread))
    producer.close()


def test_batch_size_splits_batches(store):
    store.create_topic("t")
    producer = store.producer(linger_ms=60_000, batch_size_bytes=400)
    for i in range(40):
        producer.send("t", bytes(50), key=b"k")
    producer.flush()
    found = batches(store.topic("t").log(0))
    counts = [count for _, count, _ in found]
    assert sum(counts) == 40 and len(counts) > 5
    # Kafka's estimate: 61 bytes per batch + (21 + 15 + key + value) per record <= 400.
    per_record = 21 + 15 + 1 + 50
    assert all(61 + c * per_record <= 400 for c in counts[:-1])
    assert all(61 + (c + 1) * per_record > 400 for c in counts[:-1])  # each was full
    bases = [base for base, _, _ in found]
    assert bases == [sum(counts[:i]) for i in range(len(counts))]


def test_record_larger_than_batch_size_is_its_own_batch(store):
    store.create_topic("t")
    producer = store.producer(linger_ms=60_000, batch_size_bytes=100)
    producer.send("t", b"a")
    producer.send("t", bytes(500))
    producer.send("t", b"b")
    producer.flush()
    assert [c for _, c, _ in batches(store.topic("t").log(0))] == [1, 1, 1]


def test_linger_zero_writes_each_send(store):
    store.create_topic("t")
    producer = store.producer(linger_ms=0)
    assert producer.send("t", b"a").done()
    producer.send("t", b"b")
    assert [c for _, c, _ in batches(store.topic("t").log(0))] == [1, 1]


def test_keyed_records_follow_murmur2(store):
    store.create_topic("t", partitions=5)
    producer = store.producer(linger_ms=60_000)
    sent = collections.defaultdict(list)
    for i in range(300):
        key = f"user-{i % 37}".encode()
        future = producer.send("t", f"{i}".encode(), key=key)
        assert future.partition == partition_for_key(key, 5)
        sent[future.partition].append((key, f"{i}".encode()))
    producer.flush()
    topic = store.topic("t")
    for p in range(5):
        assert [(r.key, r.value) for r in topic.log(p).records()] == sent[p]  # order kept


def test_keyless_records_are_sticky(store):
    store.create_topic("t", partitions=4)
    producer = store.producer(linger_ms=60_000, batch_size_bytes=1000)
    partitions = [producer.send("t", bytes(100)).partition for _ in range(200)]
    producer.flush()
    runs = [len(list(g)) for _, g in __import__("itertools").groupby(partitions)]
    # A partition takes about a batch (1000 bytes = 7 records here) before the next draw,
    # which may repeat it: never a record at a time.
    assert max(runs) >= 7 and sum(1 for r in runs if r < 7) <= 1
    assert len(set(partitions)) > 1
    assert sum(store.topic("t").end_offsets().values()) == 200


def test_round_robin_partitioner(store):
    store.create_topic("t", partitions=3)
    producer = store.producer(linger_ms=0, partitioner="round_robin")
    assert [producer.send("t", b"v", key=b"same").partition for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def test_explicit_partition_headers_and_timestamps(store):
    store.create_topic("t", partitions=2)
    producer = store.producer(linger_ms=0)
    meta = producer.send("t", b"v", key=b"k", partition=1, timestamp_ms=1234,
                         headers=[("h", b"1"), ("n", None)]).result()
    assert (meta.topic, meta.partition, meta.offset, meta.timestamp_ms) == ("t", 1, 0, 1234)
    record = next(iter(store.topic("t").log(1).records()))
    assert (record.key, record.value, record.timestamp_ms) == (b"k", b"v", 1234)
    assert list(record.headers) == [("h", b"1"), ("n", None)]
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.send("t", b"v", partition=2)


@pytest.mark.parametrize("compression", ["gzip", "lz4"])
def test_compression_per_batch(store, compression):
    store.create_topic("t")
    producer = store.producer(linger_ms=60_000, compression=compression)
    for i in range(20):
        producer.send("t", b"abc" * 20)
    producer.flush()
    log = store.topic("t").log(0)
    assert batches(log) == [(0, 20, compression)]
    assert all(r.value == b"abc" * 20 for r in log.records())


def test_send_errors(store):
    store.create_topic("compacted", config={"cleanup.policy": "compact"})
    store.create_topic("t")
    producer = store.producer(linger_ms=0, max_request_bytes=1000)
    with pytest.raises(InvalidRecordError):
        producer.send("compacted", b"no key")
    producer.send("compacted", b"v", key=b"k")
    with pytest.raises(RecordTooLargeError):
        producer.send("t", bytes(2000))
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.send("nope", b"v")
    with pytest.raises(InvalidRecordError):
        producer.send("t", "text")
    producer.close()
    with pytest.raises(IllegalStateError):
        producer.send("t", b"v")


def test_batch_too_large_for_the_topic_is_split(store):
    store.create_topic("small", config={"max.message.bytes": "200"})
    producer = store.producer(linger_ms=60_000, batch_size_bytes=1 << 20)
    futures = [producer.send("small", bytes(100)) for _ in range(3)]
    producer.flush()  # 3 x 100 bytes do not fit 200 in one batch: written one by one
    assert [f.result().offset for f in futures] == [0, 1, 2]
    assert [c for _, c, _ in batches(store.topic("small").log(0))] == [1, 1, 1]


def test_record_too_large_for_the_topic_fails_alone(store):
    store.create_topic("small", config={"max.message.bytes": "200"})
    producer = store.producer(linger_ms=60_000, batch_size_bytes=1 << 20)
    futures = [producer.send("small", bytes(size)) for size in (10, 300, 10, 10)]
    with pytest.raises(RecordTooLargeError):
        producer.flush()
    with pytest.raises(RecordTooLargeError):
        futures[1].result()
    assert [futures[i].result().offset for i in (0, 2, 3)] == [0, 1, 2]  # order kept
    assert "failed" in repr(futures[1]) and "offset=1" in repr(futures[2])
    producer.flush()  # the error was reported once


def test_store_close_flushes_producers(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t")
        producer = store.producer(linger_ms=60_000)
        producer.send("t", b"pending")
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        assert [r.value for r in store.topic("t").log(0).records()] == [b"pending"]


def test_send_batch_spreads_by_key_in_one_batch_per_partition(store):
    store.create_topic("t", partitions=4)
    producer = store.producer(linger_ms=60_000)
    producer.send("t", b"first", key=b"user-0")  # waiting in an open batch
    keys = [f"user-{i % 9}".encode() for i in range(100)]
    values = [f"{i}".encode() for i in range(100)]
    written = producer.send_batch("t", values, keys)
    topic = store.topic("t")
    first_partition = partition_for_key(b"user-0", 4)
    for p in range(4):
        expected = [(k, v) for k, v in zip(keys, values) if partition_for_key(k, 4) == p]
        got = [(r.key, r.value) for r in topic.log(p).records()]
        if p == first_partition:
            assert got[0] == (b"user-0", b"first")  # order per partition kept
            got = got[1:]
        assert got == expected
        if expected:
            assert batches(topic.log(p))[-1][1] == len(expected)  # one batch
            assert written[p][1] - written[p][0] + 1 == len(expected)
    keyless = producer.send_batch("t", [b"a", b"b", b"c"])
    assert len(keyless) == 1 and list(keyless.values())[0][1] - list(keyless.values())[0][0] == 2
    assert producer.send_batch("t", [b"x"], partition=3) == {3: (topic.end_offsets()[3] - 1,) * 2}
    with pytest.raises(InvalidRecordError):
        producer.send_batch("t", [b"a"], keys=[b"k", b"l"])


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4"])
def test_kafka_python_reads_what_the_producer_wrote(store, compression):
    kafka_record = pytest.importorskip("kafka.record")
    store.create_topic("t", partitions=2)
    producer = store.producer(linger_ms=60_000, batch_size_bytes=500, compression=compression)
    sent = {0: [], 1: []}
    for i in range(60):
        key = f"k{i % 7}".encode()
        headers = [("i", str(i).encode())]
        future = producer.send("t", f"value-{i}".encode(), key=key, headers=headers)
        sent[future.partition].append((key, f"value-{i}".encode(), [("i", str(i).encode())]))
    producer.flush()
    for p in range(2):
        log = store.topic("t").log(p)
        with open(log.segments[0].log_path, "rb") as f:
            records = kafka_record.MemoryRecords(f.read())
        got, offsets = [], []
        while (batch := records.next_batch()) is not None:
            for record in batch:
                offsets.append(record.offset)
                got.append((record.key, record.value, list(record.headers)))
        assert got == sent[p] and offsets == list(range(len(sent[p])))


def test_bad_headers_fail_their_own_send(store):
    store.create_topic("t")
    producer = store.producer(linger_ms=60_000)
    good = producer.send("t", b"ok", headers=[("h", bytearray(b"v"))])
    for bad in ([("h", "text")], [(1, b"v")], [("only-key",)]):
        with pytest.raises(InvalidRecordError):
            producer.send("t", b"v", headers=bad)
    producer.flush()
    assert good.result().offset == 0
    assert list(next(iter(store.topic("t").log(0).records())).headers) == [("h", b"v")]


def test_deleted_topic_fails_pending_records(store):
    store.create_topic("t")
    producer = store.producer(linger_ms=60_000)
    future = producer.send("t", b"v")
    store.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.flush()
    with pytest.raises(UnknownTopicOrPartitionError):
        future.result(timeout_ms=1000)


def test_idempotent_producer_writes_ids_and_sequences(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t", partitions=2)
        producer = store.producer(linger_ms=60_000, batch_size_bytes=300, idempotent=True)
        other = store.producer(idempotent=True)
        assert producer.producer_id >= 0 and other.producer_id != producer.producer_id
        for i in range(20):
            producer.send("t", bytes(40), key=b"k", partition=i % 2)
        producer.flush()
        producer.send_batch("t", [b"a", b"b"], partition=0)
        first_id = producer.producer_id
        for p in range(2):
            log = store.topic("t").log(p)
            expected_sequence = 0
            offset = 0
            while offset < log.end_offset:
                result = log.read(offset)
                for batch in log.backend.iter_batches(result.buffer):
                    assert (batch.producer_id, batch.producer_epoch) == (first_id, 0)
                    assert batch.base_sequence == expected_sequence  # numbered per partition
                    expected_sequence += batch.record_count
                offset = result.next_offset
            assert expected_sequence == (12 if p == 0 else 10)
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        # Ids are unique across restarts (blocks reserved durably), so the log's producer
        # state never sees an old id start again at sequence 0.
        again = store.producer(idempotent=True)
        assert again.producer_id > max(first_id, other.producer_id)
        again.send("t", b"v", partition=0).result()
