"""The producer's accumulator on both backends: Kafka's murmur2 (published vectors,
kafka-python) and RecordBuffer (same columns, hence the same batch bytes, on both twins)."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from seglog.errors import InvalidRecordError

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


def test_consumer_records_equal_on_both_twins(native, pure):
    from seglog.types import ConsumerRecord
    raw = native.encode_batch([b"a", None, b"c"], keys=[None, b"k", b"k2"],
                              headers=[(), [("h", b"1"), ("n", None)], ()],
                              timestamps_ms=[5, 6, 7], base_offset=40)
    for be in (native, pure):
        batch = next(iter(be.iter_batches(raw)))
        got = be.accumulator.consumer_records(ConsumerRecord, "t", 3, batch.records(), 41)
        assert [type(r) for r in got] == [ConsumerRecord, ConsumerRecord]
        assert [tuple(r[:6]) + (tuple(r.headers),) for r in got] == [
            ("t", 3, 41, 6, b"k", None, (("h", b"1"), ("n", None))),
            ("t", 3, 42, 7, b"k2", b"c", ())]
        assert len(be.accumulator.consumer_records(ConsumerRecord, "t", 3, batch.records())) == 3
        with pytest.raises(TypeError):
            be.accumulator.consumer_records(tuple, "t", 3, batch.records())
