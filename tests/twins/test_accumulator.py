"""The producer's accumulator on both backends: Kafka's murmur2 (published vectors,
kafka-python), RecordBuffer (same columns, hence the same batch bytes, on both twins) and the
producer's futures (SendFuture over a BatchResult its batch shares)."""

from __future__ import annotations

import random
import threading
import time
import warnings

import numpy as np
import pytest

from seglog.errors import InvalidRecordError, RecordTooLargeError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's import-time noise
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# Kafka's UtilsTest.testMurmur2 (signed Java ints).
KAFKA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}
# Partitions of 1000 from Kafka's Java partitioner (kafka-python's test_partitioner.py).
JAVA_PARTITIONS_OF_1000 = {b"": 681, b"a": 524, b"ab": 434, b"abc": 107, b"123456789": 566,
                           b"\x00 ": 742}


@pytest.mark.parametrize("key,expected", sorted(KAFKA_MURMUR2_VECTORS.items()))
def test_kafka_murmur2_vectors(backend, key, expected):
    assert backend.accumulator.murmur2(key) == expected
    # any bytes-like input hashes its bytes
    assert backend.accumulator.murmur2(bytearray(key)) == expected
    assert backend.accumulator.murmur2(memoryview(key)) == expected


@pytest.mark.parametrize("key,expected", sorted(JAVA_PARTITIONS_OF_1000.items()))
def test_java_partitions(backend, key, expected):
    assert backend.accumulator.partition_for_key(key, 1000) == expected


def test_murmur2_equals_kafka_python(backend):
    rng = random.Random(13)
    keys = [rng.randbytes(rng.randrange(0, 70)) for _ in range(5_000)]
    ours = [backend.accumulator.murmur2(k) for k in keys]
    # kafka-python returns the unsigned 32-bit pattern; ours is Java's signed int.
    assert [h & 0xFFFFFFFF for h in ours] == [kafka_python_murmur2(k) for k in keys]
    assert all(-(2**31) <= h < 2**31 for h in ours)
    for n in (1, 6, 1000):
        assert [backend.accumulator.partition_for_key(k, n) for k in keys[:500]] == \
            [(kafka_python_murmur2(k) & 0x7FFFFFFF) % n for k in keys[:500]]


def test_partition_for_key_refuses_no_partitions(backend):
    with pytest.raises(ValueError):
        backend.accumulator.partition_for_key(b"k", 0)


def _records(count: int, seed: int):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 20))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 300))
        out.append((key, value, 1_700_000_000_000 + rng.randrange(-5, 1000)))
    return out


def test_record_buffer_columns_equal_on_both_twins_and_encode_the_same(native, pure):
    records = _records(700, seed=1)
    buffers = {}
    for be in (native, pure):
        buf = be.accumulator.RecordBuffer()
        for i, (key, value, ts) in enumerate(records):
            assert buf.append(key, value, ts, extra_bytes=i % 3) == i
        assert buf.record_count == len(buf) == len(records)
        buffers[be.name] = buf
    assert buffers["native"].size_bytes == buffers["pure"].size_bytes
    expected_size = 61 + sum(36 + len(k or b"") + len(v or b"") + i % 3
                             for i, (k, v, _) in enumerate(records))
    assert buffers["native"].size_bytes == expected_size
    for start, end in ((0, -1), (0, 1), (5, 5), (17, 400), (699, 700)):
        got = {name: buf.columns(start, end) for name, buf in buffers.items()}
        (nv, nk, nt), (pv, pk, pt) = got["native"], got["pure"]
        assert nv[0] == pv[0] and np.array_equal(nv[1], pv[1])
        assert nk[0] == pk[0] and np.array_equal(nk[1], pk[1])
        assert np.array_equal(nt, pt) and nt.dtype == pt.dtype == np.int64
        stop = len(records) if end < 0 else end
        want = records[start:stop]
        if not want:
            continue
        # The columns are the records: both codecs encode them to the bytes of the lists.
        for be in (native, pure):
            from_lists = be.encode_batch([v for _, v, _ in want], keys=[k for k, _, _ in want],
                                         timestamps_ms=[t for _, _, t in want], base_offset=9)
            assert be.encode_batch(nv, keys=nk, timestamps_ms=nt, base_offset=9) == from_lists
            assert be.encode_batch(pv, keys=pk, timestamps_ms=pt, base_offset=9) == from_lists


def test_record_buffer_keyless_has_no_key_column(backend):
    buf = backend.accumulator.RecordBuffer()
    buf.append(None, b"v", 1)
    buf.append(None, None, 2)
    values, keys, timestamps = buf.columns()
    assert keys is None and not buf.has_keys
    assert values[0] == b"v" and values[1].tolist() == [1, -1] and timestamps.tolist() == [1, 2]


@pytest.mark.parametrize("bad", ["text", 12, object()])
def test_record_buffer_refuses_non_bytes_and_keeps_nothing(backend, bad):
    buf = backend.accumulator.RecordBuffer()
    buf.append(b"k", b"v", 1)
    size = buf.size_bytes
    with pytest.raises(InvalidRecordError):
        buf.append(bad, b"v", 2)
    with pytest.raises(InvalidRecordError):
        buf.append(b"k", bad, 2)
    assert buf.record_count == 1 and buf.size_bytes == size
    values, keys, _ = buf.columns()
    assert values[0] == b"v" and keys[0] == b"k" and keys[1].tolist() == [1]


def test_record_buffer_takes_any_bytes_like(backend):
    buf = backend.accumulator.RecordBuffer()
    buf.append(bytearray(b"ka"), memoryview(b"xyz"), 1)
    buf.append(np.frombuffer(b"kb", dtype=np.uint8), b"", 2)
    values, keys, _ = buf.columns()
    assert values[0] == b"xyz" and values[1].tolist() == [3, 0]
    assert keys[0] == b"kakb" and keys[1].tolist() == [2, 2]


def test_record_buffer_range_checks(backend):
    buf = backend.accumulator.RecordBuffer()
    buf.append(b"k", b"v", 1)
    for start, end in ((2, 2), (1, 0), (0, 3), (-1, 1)):
        with pytest.raises(IndexError):
            buf.columns(start, end)
    with pytest.raises(OverflowError):
        buf.append(b"k", b"v", 1 << 63)


# --- the producer's futures: SendFuture over a shared BatchResult --------------------------------


def _futures(be, count: int, *, topic: str = "t", partition: int = 3):
    result = be.accumulator.BatchResult()
    futures = [be.accumulator.SendFuture(result, i, topic, partition, 1_000 + i)
               for i in range(count)]
    return result, futures


def test_futures_complete_with_their_offsets(backend):
    result, futures = _futures(backend, 3)
    assert not result.completed and not any(f.done() for f in futures)
    assert [repr(f) for f in futures] == ["SendFuture(t-3, pending)"] * 3
    result.complete([(0, 100, None)])
    assert result.completed and result.event.is_set() and all(f.done() for f in futures)
    metas = [f.result() for f in futures]
    assert [tuple(m) for m in metas] == [("t", 3, 100, 1000), ("t", 3, 101, 1001),
                                         ("t", 3, 102, 1002)]
    assert type(metas[0]).__name__ == "RecordMetadata"
    assert [f.offset for f in futures] == [100, 101, 102]
    assert (futures[1].topic, futures[1].partition, futures[1].timestamp_ms) == ("t", 3, 1001)
    assert repr(futures[2]) == "SendFuture(t-3, offset=102)"
    assert type(futures[0]).__name__ == "SendFuture"


def test_a_failed_part_fails_only_its_records(backend):
    """A batch split in parts: records 0..1 failed, 2..4 written at 50 (parts given out of
    order, as a split batch's may be)."""
    result, futures = _futures(backend, 5)
    error = RecordTooLargeError("too large")
    result.complete([(2, 50, None), (0, -1, error)])
    for f in futures[:2]:
        with pytest.raises(RecordTooLargeError) as raised:
            f.result(timeout_ms=0)
        assert raised.value is error and f.done()
        assert repr(f) == "SendFuture(t-3, failed)"
    assert [f.result().offset for f in futures[2:]] == [50, 51, 52]
    assert [result.error_of(i) for i in range(5)] == [error, error, None, None, None]
    with pytest.raises(RecordTooLargeError):
        result.offset_of(1)
    assert result.offset_of(4) == 52


def test_many_parts_find_their_part(backend):
    """A batch split down to single records (bisection over the parts' first indexes)."""
    result, futures = _futures(backend, 40)
    errors = {i: InvalidRecordError(f"record {i}") for i in range(0, 40, 7)}
    parts, offset = [], 0
    for i in range(40):
        if i in errors:
            parts.append((i, -1, errors[i]))
        else:
            parts.append((i, offset, None))
            offset += 1
    random.Random(3).shuffle(parts)
    result.complete(parts)
    offset = 0
    for i, f in enumerate(futures):
        if i in errors:
            with pytest.raises(InvalidRecordError) as raised:
                f.result()
            assert raised.value is errors[i]
        else:
            assert f.result().offset == offset
            offset += 1


def test_result_times_out_while_the_batch_is_pending(backend):
    result, (future,) = _futures(backend, 1)
    with pytest.raises(TimeoutError, match="t-3 not written after 0 ms"):
        future.result(timeout_ms=0)
    with pytest.raises(TimeoutError):
        future.result(timeout_ms=5)
    assert not future.done()
    result.complete([(0, 7, None)])
    assert future.result(timeout_ms=0).offset == 7


@pytest.mark.parametrize("timeout_ms,error", [(-1, ValueError), (1.5, TypeError),
                                              (True, TypeError), ("1", TypeError)])
def test_result_refuses_a_bad_timeout(backend, timeout_ms, error):
    result, (future,) = _futures(backend, 1)
    result.complete([(0, 7, None)])
    with pytest.raises(error, match="timeout_ms"):
        future.result(timeout_ms=timeout_ms)


def test_result_wakes_when_another_thread_completes_the_batch(backend):
    result, futures = _futures(backend, 2)
    waiting = threading.Event()
    got = []

    def wait() -> None:
        waiting.set()
        got.append(futures[1].result(timeout_ms=60_000))

    thread = threading.Thread(target=wait)
    thread.start()
    assert waiting.wait(60)
    result.complete([(0, 10, None)])
    thread.join(60)
    assert not thread.is_alive() and got[0].offset == 11


def test_a_future_needs_a_batch_result(backend):
    with pytest.raises(TypeError):
        backend.accumulator.SendFuture(object(), 0, "t", 0, 0)


# --- the producer's lock: ReentrantLock (the Sender owns it) -------------------------------------


def _in_thread(function):
    out = []
    thread = threading.Thread(target=lambda: out.append(function()))
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    return out[0]


def test_lock_is_reentrant_for_its_holder_only(backend):
    lock = backend.accumulator.ReentrantLock()
    assert lock.acquire() and lock.acquire(timeout=1)
    assert _in_thread(lambda: lock.acquire(blocking=False)) is False
    assert _in_thread(lambda: lock.acquire(timeout=0.01)) is False
    lock.release()
    assert _in_thread(lambda: lock.acquire(blocking=False)) is False  # still held once
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()
    # Free now: another thread takes it (and still holds it when it ends).
    assert _in_thread(lambda: lock.acquire(blocking=False)) is True
    assert lock.acquire(blocking=False) is False
    with pytest.raises(RuntimeError):
        lock.release()  # held by the other thread, not this one


def test_lock_refuses_bad_timeouts(backend):
    lock = backend.accumulator.ReentrantLock()
    with pytest.raises(ValueError):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError):
        lock.acquire(timeout=-2)


def test_lock_with_statement_and_a_condition(backend):
    lock = backend.accumulator.ReentrantLock()
    with lock:
        with lock:
            assert _in_thread(lambda: lock.acquire(blocking=False)) is False
    assert _in_thread(lambda: lock.acquire(blocking=False) and (lock.release() or True))
    condition = threading.Condition(lock)
    ready = []

    def notify() -> None:
        with condition:
            ready.append(True)
            condition.notify()

    with lock:  # held twice: wait gives both holds back and takes both again
        with condition:
            thread = threading.Thread(target=notify)
            thread.start()
            assert condition.wait_for(lambda: ready, timeout=60)
        assert _in_thread(lambda: lock.acquire(blocking=False)) is False
    thread.join(60)
    with pytest.raises(RuntimeError):
        condition.wait(0)  # not held


def test_lock_excludes_under_contention(backend):
    """Threads taking the lock every way (with, acquire with and without blocking or a
    timeout, a Condition's wait) while others hold it: never two inside at once, and no
    hold lost (the native lock parks its mutex when no thread waits)."""
    lock = backend.accumulator.ReentrantLock()
    condition = threading.Condition(lock)
    inside = []
    entries = []

    def critical(thread_index: int) -> None:
        assert not inside
        inside.append(thread_index)
        time.sleep(0)  # let another thread run (and find the lock held)
        entries.append(thread_index)
        inside.pop()

    def work(thread_index: int) -> None:
        for i in range(300):
            way = (i + thread_index) % 4
            if way == 0:
                with lock:
                    with lock:
                        critical(thread_index)
            elif way == 1:
                while not lock.acquire(blocking=False):
                    time.sleep(0)
                critical(thread_index)
                lock.release()
            elif way == 2:
                assert lock.acquire(timeout=60)
                critical(thread_index)
                lock.release()
            else:
                with condition:
                    critical(thread_index)
                    condition.wait(0.0001)
                    critical(thread_index)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert len(entries) == 4 * (300 + 75) and not inside
    assert lock.acquire(blocking=False)  # free at the end
    lock.release()


def test_the_sender_owns_the_producers_lock(tmp_path, backend):
    from seglog.store import Store
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t")
        producer = store.producer(linger_ms=60_000)
        lock = producer.send.__self__.lock
        assert isinstance(lock, backend.accumulator.ReentrantLock)
        with lock:  # another thread's send waits for it
            sent = []
            thread = threading.Thread(target=lambda: sent.append(producer.send("t", b"v")))
            thread.start()
            thread.join(0.05)
            assert not sent
        thread.join(60)
        assert len(sent) == 1
        producer.close()


@pytest.mark.parametrize("compression", ["none", "lz4"])
@pytest.mark.parametrize("log_append_time", [False, True])
def test_batch_consumer_records_equal_records_on_both_twins(native, pure, compression,
                                                           log_append_time):
    """``Batch.consumer_records`` decodes ConsumerRecords straight from the bytes: the same
    tuples as ConsumerRecord(...) of ``records()``, on both backends."""
    from seglog.types import ConsumerRecord
    rng = random.Random(11)
    count = 50
    raw = native.encode_batch(
        [None if i % 9 == 0 else rng.randbytes(rng.randrange(30)) for i in range(count)],
        keys=[None if i % 4 == 0 else b"k%d" % i for i in range(count)],
        headers=[[("h", b"%d" % i), ("n", None)] if i % 5 == 0 else () for i in range(count)],
        timestamps_ms=[1_000 + i for i in range(count)], base_offset=100,
        compression=compression)
    if log_append_time:  # flip the timestamp type bit and fix the CRC, as a broker would
        from seglog.format import ATTRIBUTES_POSITION, CRC_POSITION, TIMESTAMP_TYPE_MASK
        data = bytearray(raw)
        data[ATTRIBUTES_POSITION + 1] |= TIMESTAMP_TYPE_MASK
        data[CRC_POSITION:CRC_POSITION + 4] = native.crc32c(
            bytes(data[CRC_POSITION + 4:])).to_bytes(4, "big")
        raw = bytes(data)
    expected = None
    for be in (native, pure):
        batch = next(iter(be.iter_batches(raw)))
        want = [ConsumerRecord("t", 2, r.offset, r.timestamp_ms, r.key, r.value, r.headers)
                for r in batch.records() if r.offset >= 120]
        got = batch.consumer_records(ConsumerRecord, "t", 2, 120)
        assert got == want and [type(r) for r in got] == [ConsumerRecord] * 30
        assert [tuple(r.headers) for r in got] == [tuple(r.headers) for r in want]
        assert len(batch.consumer_records(ConsumerRecord, "t", 2)) == count
        assert batch.consumer_records(ConsumerRecord, "t", 2, 1_000) == []
        with pytest.raises(TypeError):
            batch.consumer_records(tuple, "t", 2)
        expected = got if expected is None else expected
        assert got == expected


def test_batch_consumer_records_checks_every_record(native, pure):
    """A bad CRC, or a malformed record before ``min_offset``, fails as records() does."""
    from seglog.errors import CorruptRecordError
    from seglog.types import ConsumerRecord
    raw = bytearray(native.encode_batch([b"a", b"b", b"c"], base_offset=0))
    raw[-2] ^= 0xFF  # the last value (before its header count): the CRC no longer matches
    for be in (native, pure):
        batch = next(iter(be.iter_batches(bytes(raw))))
        with pytest.raises(CorruptRecordError):
            batch.consumer_records(ConsumerRecord, "t", 0, 2)
        # check_crcs=False decodes the changed byte, as records(check_crcs=False) does
        got = next(iter(be.iter_batches(bytes(raw)))).consumer_records(
            ConsumerRecord, "t", 0, 2, check_crcs=False)
        assert [r.value for r in got] == [bytes([ord("c") ^ 0xFF])]


def test_native_columns_are_views_of_the_buffer(native):
    """The native columns hand the buffer's own memory to encode_batch (no copy); while a
    view is alive the buffer refuses to grow (its memory would move under the view)."""
    buf = native.accumulator.RecordBuffer()
    buf.append(b"k", b"v" * 10, 1)
    values, keys, _ = buf.columns()
    assert isinstance(values[0], memoryview) and values[0].readonly
    assert values[0] == b"v" * 10 and keys[0] == b"k"
    with pytest.raises(BufferError):
        buf.append(b"k", b"w" * 4096, 2)  # needs more room than the column has
    assert buf.record_count == 1
    del values, keys
    assert buf.append(b"k", b"w" * 4096, 2) == 1  # views released: it grows again
    values, _, _ = buf.columns(1, 2)
    assert values[0] == b"w" * 4096
