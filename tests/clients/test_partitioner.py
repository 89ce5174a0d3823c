"""Kafka's murmur2 and partitioners: published vectors, kafka-python, numpy twin."""

from __future__ import annotations

import random
from collections import Counter

import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's import-time noise
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from seglog.clients.partitioner import (
    RoundRobinPartitioner,
    StickyPartitioner,
    murmur2,
    murmur2_many,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

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


@pytest.fixture(scope="module")
def random_keys():
    rng = random.Random(20241025)
    return [rng.randbytes(rng.randrange(0, 64)) for _ in range(100_000)]


@pytest.mark.parametrize("key,expected", sorted(KAFKA_MURMUR2_VECTORS.items()))
def test_kafka_murmur2_vectors(key, expected):
    assert murmur2(key) == expected
    assert murmur2_many([key])[0] == expected


@pytest.mark.parametrize("key,expected", sorted(JAVA_PARTITIONS_OF_1000.items()))
def test_java_partitions(key, expected):
    assert partition_for_key(key, 1000) == expected


def test_equal_to_kafka_python_for_100k_random_keys(random_keys):
    # kafka-python returns the unsigned 32-bit pattern; ours is Java's signed int.
    ours = [murmur2(k) for k in random_keys[:20_000]]
    assert [h & 0xFFFFFFFF for h in ours] == [kafka_python_murmur2(k) for k in random_keys[:20_000]]
    vectorised = murmur2_many(random_keys)
    expected = np.array([kafka_python_murmur2(k) for k in random_keys], dtype=np.uint32)
    assert np.array_equal(vectorised.view(np.uint32), expected)
    assert all(-(2**31) <= int(h) < 2**31 for h in vectorised[:1000])


@pytest.mark.parametrize("num_partitions", [1, 3, 6, 50, 1000])
def test_partitions_equal_kafka_python_default_partitioner(random_keys, num_partitions):
    expected = [(kafka_python_murmur2(k) & 0x7FFFFFFF) % num_partitions for k in random_keys[:5000]]
    assert [partition_for_key(k, num_partitions) for k in random_keys[:5000]] == expected
    got = partitions_for_keys(random_keys, num_partitions)
    assert got.dtype == np.int32
    assert got[:5000].tolist() == expected


def test_vectorised_data_and_lengths_form(random_keys):
    keys = random_keys[:2000]
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lengths = [len(k) for k in keys]
    assert np.array_equal(murmur2_many((data, lengths)), murmur2_many(keys))
    assert np.array_equal(murmur2_many((b"".join(keys), np.array(lengths))), murmur2_many(keys))
    assert murmur2_many([]).shape == (0,)
    assert murmur2_many((b"ab", b"cd")).tolist() == [murmur2(b"ab"), murmur2(b"cd")]  # two keys
    with pytest.raises(ValueError):
        murmur2_many((b"abc", [2, 2]))
    with pytest.raises(TypeError):
        murmur2_many([b"a", None])


def test_to_positive_is_not_abs():
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_partition_for_key_arguments():
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
    with pytest.raises(TypeError):
        partition_for_key(None, 3)  # type: ignore[arg-type]
    assert partition_for_key(bytearray(b"abc"), 1000) == partition_for_key(memoryview(b"abc"), 1000)


def test_sticky_partitioner_sticks_then_moves():
    p = StickyPartitioner(6, sticky_batch_bytes=100, rng=random.Random(1))
    first = p.partition()
    for _ in range(9):
        p.record_appended(10)
        if _ < 8:
            assert p.partition() == first
    p.record_appended(10)  # 100 bytes reached and switching allowed: a new draw
    chosen = [p.partition()]
    for _ in range(200):
        p.record_appended(100)
        chosen.append(p.partition())
    assert set(chosen) == set(range(6))  # random draws reach every partition


def test_sticky_partitioner_waits_for_the_batch_but_not_past_twice():
    p = StickyPartitioner(1000, sticky_batch_bytes=100, rng=random.Random(2))
    first = p.partition()
    p.record_appended(150, switch_allowed=False)
    assert p.partition() == first  # batch not ready: stay
    p.record_appended(49, switch_allowed=False)
    assert p.partition() == first
    p.record_appended(1, switch_allowed=False)  # 200 = 2 x batch: switch regardless
    assert p._produced_bytes == 0


def test_sticky_partitioner_uses_available_partitions():
    p = StickyPartitioner(10, sticky_batch_bytes=1, rng=random.Random(3))
    seen = set()
    for _ in range(100):
        seen.add(p.partition(available=[2, 5]))
        p.record_appended(1, available=[2, 5])
    assert seen == {2, 5}


def test_round_robin_partitioner():
    p = RoundRobinPartitioner(3)
    assert [p.partition() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    p = RoundRobinPartitioner(3)
    assert [p.partition(available=[4, 9]) for _ in range(4)] == [4, 9, 4, 9]
    p = RoundRobinPartitioner(5)
    counts = Counter(p.partition() for _ in range(1000))
    assert set(counts.values()) == {200}
