"""KeyMap, the cleaner's offset map: a dict model, the full-map rule, the hash, batches, and the
two twins filling their tables slot for slot."""

from __future__ import annotations

import importlib
import os
import random

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import seglog
from seglog import format as fmt
from seglog.errors import CorruptRecordError


def keymap_module(backend):
    return importlib.import_module(backend.__name__ + ".keymap")


# --- hash -------------------------------------------------------------------------------------


def test_key_hash_is_xxh64_for_every_length_class(backend):
    km = keymap_module(backend)
    rng = random.Random(7)
    for length in list(range(0, 70)) + [127, 128, 1000, 4099]:
        for _ in range(8):
            key = rng.randbytes(length)
            assert km.key_hash(key) == xxhash.xxh64_intdigest(key), length


def test_key_hash_accepts_any_buffer(backend):
    km = keymap_module(backend)
    key = b"user-42"
    expected = xxhash.xxh64_intdigest(key)
    assert km.key_hash(bytearray(key)) == expected
    assert km.key_hash(memoryview(b"xxuser-42")[2:]) == expected
    assert km.key_hash(np.frombuffer(key, dtype=np.uint8)) == expected


def test_native_constants_match_format(native):
    km = importlib.import_module("seglog._native.keymap")
    assert km.HEADER_POSITIONS == {
        "batch_length": fmt.BATCH_LENGTH_POSITION,
        "magic": fmt.MAGIC_POSITION,
        "attributes": fmt.ATTRIBUTES_POSITION,
        "base_timestamp": fmt.BASE_TIMESTAMP_POSITION,
        "records_count": fmt.RECORDS_COUNT_POSITION,
        "overhead": fmt.RECORD_BATCH_OVERHEAD,
        "control_flag": fmt.CONTROL_FLAG_MASK,
        "delete_horizon_flag": fmt.DELETE_HORIZON_FLAG_MASK,
    }
    pk = importlib.import_module("seglog.pure.keymap")
    for name in ("SLOT_BYTES", "LOAD_FACTOR_NUMERATOR", "LOAD_FACTOR_DENOMINATOR", "EMPTY_OFFSET"):
        assert getattr(km, name) == getattr(pk, name), name


# --- sizing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("memory", [32, 33, 47, 48, 160, 1000, 4096, 1 << 20, 128 << 20])
def test_slots_are_the_largest_prime_that_fits(backend, memory):
    km = keymap_module(backend)
    slots = km.slots_for_memory(memory)
    assert 2 <= slots <= memory // 16
    assert all(slots % d for d in range(2, min(slots, 2000)) if d * d <= slots)
    m = backend.KeyMap(memory)
    assert m.slots == slots and m.max_entries == slots * 9 // 10
    assert m.hashes.nbytes + m.offsets.nbytes == slots * 16 <= memory


def test_default_kafka_budget(backend):
    m = backend.KeyMap(128 * 1024 * 1024)
    assert 8_388_000 < m.slots <= 8_388_608  # 16 bytes/slot instead of Kafka's 24
    assert m.max_entries == m.slots * 9 // 10


@pytest.mark.parametrize("memory", [0, 16, 31])
def test_too_small_is_an_error(backend, memory):
    with pytest.raises(ValueError):
        backend.KeyMap(memory)


# --- behaviour --------------------------------------------------------------------------------


def test_put_get_update(backend):
    m = backend.KeyMap(4096)
    assert m.get(b"a") == -1 and m.latest_offset == -1 and m.size == 0
    assert m.put(b"a", 3) and m.put(b"b", 4) and m.put(b"a", 7)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (7, 4, -1)
    assert m.size == len(m) == 2 and m.latest_offset == 7
    assert m.put(b"", 8) and m.get(b"") == 8  # the empty key is a key
    m.update_latest_offset(100)
    assert m.latest_offset == 100
    with pytest.raises(ValueError):
        m.put(b"x", -1)


def test_full_map_refuses_new_keys_but_updates_old_ones(backend):
    m = backend.KeyMap(48 * 16)  # 47 slots (prime), 42 entries
    assert m.slots == 47 and m.max_entries == 42
    for i in range(42):
        assert m.put(b"k%d" % i, i)
    assert m.size == 42 and m.utilization == pytest.approx(42 / 47)
    assert not m.put(b"new", 100)
    assert m.get(b"new") == -1 and m.size == 42 and m.latest_offset == 41
    assert m.put(b"k5", 101) and m.get(b"k5") == 101 and m.latest_offset == 101
    for i in range(42):
        assert m.get(b"k%d" % i) == (101 if i == 5 else i)


def test_clear(backend):
    m = backend.KeyMap(1024)
    for i in range(20):
        m.put(b"%d" % i, i)
    m.clear()
    assert m.size == 0 and m.latest_offset == -1 and m.get(b"3") == -1
    assert (m.offsets == -1).all() and (m.hashes == 0).all()
    assert m.put(b"3", 9) and m.get(b"3") == 9


def test_hash_zero_key_is_not_empty(backend):
    # The empty marker is offset -1, so a key hash of any value works: force one to hash 0
    # through put_hash and check it is found, distinct from absent keys.
    m = backend.KeyMap(1024)
    assert m.put_hash(0, 5)
    assert m.size == 1 and int(m.offsets[0]) == 5 and int(m.hashes[0]) == 0


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.binary(max_size=6), st.integers(min_value=0, max_value=2**40)),
        max_size=300,
    ),
    memory=st.sampled_from([32, 64, 200, 1024, 16384]),
)
def test_model_against_dict(ops, memory):
    """Both twins against a dict with the same capacity rule, and against each other."""
    for name in seglog.BACKEND_NAMES if not os.environ.get("SEGLOG_BACKEND") else (
        os.environ["SEGLOG_BACKEND"],
    ):
        m = seglog.get_backend(name).KeyMap(memory)
        model: dict[bytes, int] = {}
        latest = -1
        for key, offset in ops:
            expect = key in model or len(model) < m.max_entries
            assert m.put(key, offset) == expect
            if expect:
                model[key] = offset
                latest = offset
            assert m.size == len(model) and m.latest_offset == latest
        for key, _ in ops:
            assert m.get(key) == model.get(key, -1)
        assert m.get(b"never-put-1234567") == model.get(b"never-put-1234567", -1)


def test_twins_fill_identical_tables(native, pure):
    rng = random.Random(3)
    a, b = native.KeyMap(1 << 15), pure.KeyMap(1 << 15)
    for i in range(3000):
        key = rng.randbytes(rng.randint(0, 40))
        assert a.put(key, i) == b.put(key, i)
    assert a.size == b.size and a.lookups == b.lookups and a.probes == b.probes
    assert np.array_equal(a.hashes, b.hashes) and np.array_equal(a.offsets, b.offsets)


def test_probe_counts_stay_small_at_full_load(backend):
    m = backend.KeyMap(1 << 16)
    for i in range(m.max_entries):
        assert m.put(b"key-%d" % i, i)
    probes_per_put = m.probes / m.lookups
    assert probes_per_put < 3.0  # double hashing: ~1.6 on average when filling to 0.9


# --- batches ----------------------------------------------------------------------------------


def _batch(backend, keys, *, base_offset=0, compression="none", **kwargs):
    values = [b"v" * (i % 7) for i in range(len(keys))]
    return backend.encode_batch(values, keys=keys, timestamps_ms=1000, base_offset=base_offset,
                                compression=compression, **kwargs)


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4"])
def test_put_batch_keys(backend, compression):
    keys = [b"a", None, b"b", b"a", None, b"c" * 300]
    raw = _batch(backend, keys, base_offset=10, compression=compression)
    m = backend.KeyMap(4096)
    assert m.put_batch_keys(raw) is True
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c" * 300)) == (13, 12, 15)
    assert m.size == 3 and m.latest_offset == 15
    m2 = backend.KeyMap(4096)
    assert m2.put_batch_keys(raw + b"trailing bytes", start_offset=13)
    assert (m2.get(b"a"), m2.get(b"b"), m2.get(b"c" * 300)) == (13, -1, 15)


def test_put_batch_keys_stops_when_full(backend):
    m = backend.KeyMap(48 * 16)  # 42 entries
    keys = [b"k%d" % i for i in range(50)]
    assert m.put_batch_keys(_batch(backend, keys, base_offset=100)) is False
    assert m.size == 42 and m.latest_offset == 141
    assert m.get(b"k41") == 141 and m.get(b"k42") == -1


def test_put_batch_keys_skips_control_batches(backend):
    raw = backend.encode_control_batch(1, producer_id=7, producer_epoch=0, base_offset=5)
    m = backend.KeyMap(1024)
    assert m.put_batch_keys(raw) is True and m.size == 0


def test_put_batch_keys_matches_put(native, pure):
    rng = random.Random(11)
    keys = [rng.choice([None, rng.randbytes(rng.randint(0, 30))]) for _ in range(500)]
    raw = _batch(pure, keys, base_offset=1000)
    maps = [be.KeyMap(1 << 14) for be in (native, pure)]
    for m in maps:
        assert m.put_batch_keys(raw)
    ref = pure.KeyMap(1 << 14)
    for i, key in enumerate(keys):
        if key is not None:
            ref.put(key, 1000 + i)
    for m in maps:
        assert np.array_equal(m.offsets, ref.offsets) and np.array_equal(m.hashes, ref.hashes)


def test_put_batch_keys_truncated(backend):
    raw = _batch(backend, [b"a", b"b"])
    m = backend.KeyMap(1024)
    for cut in (0, 10, 60, len(raw) - 1):
        with pytest.raises(CorruptRecordError) as info:
            m.put_batch_keys(raw[:cut])
        assert info.value.reason == fmt.REASON_TRUNCATED


def test_retain_mask(backend):
    m = backend.KeyMap(4096)
    # dirty section: a@1 b@2 c@3 (tombstone) ; latest offset 3
    for key, offset in ((b"a", 1), (b"b", 2), (b"c", 3)):
        m.put(key, offset)
    raw = backend.encode_batch(
        [b"old-a", b"x", b"b", None, b"late"], keys=[b"a", None, b"b", b"c", b"a"],
        timestamps_ms=1000, base_offset=0, offset_deltas=[0, 1, 2, 3, 5],
    )
    mask, kept, tombstone = m.retain_mask(raw, now_ms=0)
    # a@0 is older than a@1; keyless dropped; b@2 latest; c@3 tombstone kept (no horizon);
    # a@5 is past the map's latest offset.
    assert mask.tolist() == [False, False, True, True, True]
    assert kept == 3 and tombstone is True and mask.dtype == np.bool_


def test_retain_mask_delete_horizon(backend):
    m = backend.KeyMap(4096)
    m.put(b"k", 0)
    raw = backend.encode_batch([None], keys=[b"k"], timestamps_ms=5, delete_horizon_ms=1000)
    assert m.retain_mask(raw, now_ms=999)[0].tolist() == [True]
    mask, kept, _ = m.retain_mask(raw, now_ms=1000)  # horizon passed: the tombstone goes
    assert mask.tolist() == [False] and kept == 0
    raw_value = backend.encode_batch([b"v"], keys=[b"k"], timestamps_ms=5, delete_horizon_ms=1000)
    assert m.retain_mask(raw_value, now_ms=10**12)[1] == 1


def test_retain_mask_control_batch_keeps_all(backend):
    raw = backend.encode_control_batch(0, producer_id=3, producer_epoch=1, base_offset=9)
    mask, kept, tombstone = backend.KeyMap(1024).retain_mask(raw, now_ms=0)
    assert mask.tolist() == [True] and kept == 1 and tombstone is False


def test_retain_mask_twins_agree(native, pure):
    rng = random.Random(5)
    keys = [rng.choice([None, b"k%d" % rng.randint(0, 50)]) for _ in range(400)]
    values = [rng.choice([None, b"v"]) for _ in range(400)]
    maps = [be.KeyMap(1 << 12) for be in (native, pure)]
    for m in maps:
        for i, key in enumerate(keys[:300]):
            if key is not None:
                m.put(key, i)
    for compression in ("none", "lz4"):
        for horizon in (-1, 50):
            raw = pure.encode_batch(values, keys=keys, timestamps_ms=1, compression=compression,
                                    delete_horizon_ms=horizon)
            a, b = (m.retain_mask(raw, now_ms=100) for m in maps)
            assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]
