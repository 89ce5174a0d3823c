"""OffsetIndex and TimeIndex on both backends: a bisect model, errors, reopen, trim, truncate."""

from __future__ import annotations

import bisect
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog import format as fmt
from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError

BASE = 1000


def _offset_index(backend, path, *, max_index_bytes=4096, writable=True, base=BASE):
    return backend.OffsetIndex(str(path), base, max_index_bytes=max_index_bytes,
                               writable=writable)


def _time_index(backend, path, *, max_index_bytes=4096, writable=True, base=BASE):
    return backend.TimeIndex(str(path), base, max_index_bytes=max_index_bytes,
                             writable=writable)


_steps = st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), min_size=0, max_size=300)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, probes=st.lists(st.integers(BASE - 5, BASE + 20000), max_size=40))
def test_offset_index_matches_bisect_model(backend, steps, probes):
    with tempfile.TemporaryDirectory() as tmp:
        index = _offset_index(backend, os.path.join(tmp, "a.index"), max_index_bytes=8 * 2000)
        offsets, positions = [], []
        offset, position = BASE, 0
        for offset_step, position_step in steps:
            offset += offset_step
            position += position_step
            index.append(offset, position)
            offsets.append(offset)
            positions.append(position)
        assert index.entries == len(offsets)
        for probe in probes + offsets:
            slot = bisect.bisect_right(offsets, probe) - 1
            expected = (offsets[slot], positions[slot]) if slot >= 0 else (BASE, 0)
            assert index.lookup(probe) == expected
        # Reopen untrimmed, then trimmed: the same entries.
        index.flush()
        reopened = _offset_index(backend, index.path, writable=False)
        assert reopened.entries == len(offsets)
        reopened.close()
        index.trim()
        index.close()
        reopened = _offset_index(backend, index.path)
        assert reopened.entries == len(offsets)
        assert [reopened.entry(n) for n in range(reopened.entries)] == list(zip(offsets, positions))
        reopened.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=300),
       probes=st.lists(st.integers(-5, 20000), max_size=40))
def test_time_index_matches_bisect_model(backend, steps, probes):
    with tempfile.TemporaryDirectory() as tmp:
        index = _time_index(backend, os.path.join(tmp, "a.timeindex"), max_index_bytes=12 * 2000)
        timestamps, offsets = [], []
        timestamp_ms, offset = 100, BASE
        for timestamp_step, offset_step in steps:
            timestamp_ms += timestamp_step
            offset += offset_step
            index.maybe_append(timestamp_ms, offset)
            if not timestamps or timestamp_ms > timestamps[-1]:  # Kafka: only larger ones
                timestamps.append(timestamp_ms)
                offsets.append(offset)
        assert index.entries == len(timestamps)
        assert index.last_entry() == ((timestamps[-1], offsets[-1]) if timestamps else (-1, BASE))
        for probe in probes + timestamps:
            slot = bisect.bisect_right(timestamps, probe) - 1
            expected = (timestamps[slot], offsets[slot]) if slot >= 0 else (-1, BASE)
            assert index.lookup(probe) == expected
        index.close()
        reopened = _time_index(backend, index.path, writable=False)
        assert reopened.entries == len(timestamps)
        reopened.close()


def test_warm_section_lookup_on_large_index(backend, tmp_path):
    # More entries than the 8 KiB warm section: lookups in the cold and the hot part.
    index = _offset_index(backend, tmp_path / "a.index", max_index_bytes=8 * 5000)
    for n in range(1, 4001):
        index.append(BASE + 3 * n, 10 * n)
    assert index.lookup(BASE + 2) == (BASE, 0)
    assert index.lookup(BASE + 3) == (BASE + 3, 10)
    assert index.lookup(BASE + 301) == (BASE + 300, 1000)
    assert index.lookup(BASE + 3 * 3990 + 1) == (BASE + 3 * 3990, 39900)
    assert index.lookup(10**12) == (BASE + 12000, 40000)


def test_offset_index_preallocates_rounded_down(backend, tmp_path):
    index = _offset_index(backend, tmp_path / "a.index", max_index_bytes=1003)
    assert os.path.getsize(index.path) == 1000 and index.max_entries == 125
    index.close()
    time_index = _time_index(backend, tmp_path / "a.timeindex", max_index_bytes=1003)
    assert os.path.getsize(time_index.path) == 996 and time_index.max_entries == 83
    time_index.close()


def test_offset_index_full(backend, tmp_path):
    index = _offset_index(backend, tmp_path / "a.index", max_index_bytes=8 * 3)
    for n in range(1, 4):
        index.append(BASE + n, n * 100)
    assert index.is_full()
    with pytest.raises(IndexFullError):
        index.append(BASE + 10, 1000)


def test_offset_index_out_of_order(backend, tmp_path):
    index = _offset_index(backend, tmp_path / "a.index")
    index.append(BASE + 5, 100)
    with pytest.raises(InvalidOffsetError):
        index.append(BASE + 5, 200)
    with pytest.raises(InvalidOffsetError):
        index.append(BASE + 4, 200)


def test_offset_index_overflow(backend, tmp_path):
    index = _offset_index(backend, tmp_path / "a.index")
    with pytest.raises(InvalidOffsetError):
        index.append(BASE - 1, 100)
    with pytest.raises(InvalidOffsetError):
        index.append(BASE + fmt.INT32_MAX + 1, 100)
    with pytest.raises(InvalidOffsetError):
        index.append(BASE + 1, -1)
    index.append(BASE + fmt.INT32_MAX, 100)
    assert index.lookup(BASE + fmt.INT32_MAX) == (BASE + fmt.INT32_MAX, 100)


def test_time_index_full_reserves_last_slot(backend, tmp_path):
    index = _time_index(backend, tmp_path / "a.timeindex", max_index_bytes=12 * 3)
    index.maybe_append(10, BASE + 1)
    index.maybe_append(20, BASE + 2)
    assert index.is_full()
    with pytest.raises(IndexFullError):
        index.maybe_append(30, BASE + 3)
    index.maybe_append(30, BASE + 3, skip_full_check=True)  # the roll entry
    assert index.entries == 3
    with pytest.raises(IndexFullError):
        index.maybe_append(40, BASE + 4, skip_full_check=True)


def test_time_index_ignores_smaller_timestamps_and_rejects_older_offsets(backend, tmp_path):
    index = _time_index(backend, tmp_path / "a.timeindex")
    index.maybe_append(100, BASE + 5)
    index.maybe_append(100, BASE + 6)  # not larger: ignored
    assert index.entries == 1
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(200, BASE + 4)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(200, BASE + fmt.INT32_MAX + 1)


def test_offset_index_truncate_to(backend, tmp_path):
    index = _offset_index(backend, tmp_path / "a.index")
    for n in range(1, 11):
        index.append(BASE + 10 * n, 100 * n)
    index.truncate_to(BASE + 55)  # keeps entries <= 55 -> 10..50
    assert index.entries == 5 and index.last_offset == BASE + 50
    index.truncate_to(BASE + 50)  # entry == target is dropped
    assert index.entries == 4 and index.last_offset == BASE + 40
    index.truncate_to(BASE + 1000)  # past the end: nothing
    assert index.entries == 4
    index.close()
    reopened = _offset_index(backend, index.path)  # dropped slots were zeroed
    assert reopened.entries == 4
    reopened.truncate_to(BASE)
    assert reopened.entries == 0 and reopened.lookup(BASE + 30) == (BASE, 0)


def test_time_index_truncate_to(backend, tmp_path):
    index = _time_index(backend, tmp_path / "a.timeindex")
    for n in range(1, 11):
        index.maybe_append(1000 + n, BASE + 10 * n)
    index.truncate_to(BASE + 50)
    assert index.entries == 4 and index.last_entry() == (1004, BASE + 40)


def test_reset_and_resize(backend, tmp_path):
    index = _offset_index(backend, tmp_path / "a.index", max_index_bytes=800)
    for n in range(1, 11):
        index.append(BASE + n, n * 10)
    index.trim()
    assert os.path.getsize(index.path) == 80 and index.is_full()
    index.resize(1600)
    assert index.max_entries == 200 and index.entries == 10
    index.append(BASE + 11, 110)
    index.reset()
    assert index.entries == 0 and os.path.getsize(index.path) == 800


def test_reopen_counts_untrimmed_and_trimmed(backend, tmp_path):
    path = tmp_path / "a.index"
    index = _offset_index(backend, path)
    for n in range(1, 7):
        index.append(BASE + n, n * 50)
    index.close()  # not trimmed: a crash leaves the preallocated file
    assert os.path.getsize(path) == 4096
    index = _offset_index(backend, path)
    assert index.entries == 6 and index.max_entries == 512
    index.trim()
    index.close()
    assert os.path.getsize(path) == 48
    index = _offset_index(backend, path, writable=False)
    assert index.entries == 6 and index.lookup(BASE + 4) == (BASE + 4, 200)
    index.close()


def test_reader_reload_sees_writer_appends(backend, tmp_path):
    writer = _offset_index(backend, tmp_path / "a.index")
    writer.append(BASE + 1, 10)
    reader = _offset_index(backend, tmp_path / "a.index", writable=False)
    assert reader.entries == 1
    writer.append(BASE + 2, 20)
    reader.reload()
    assert reader.entries == 2 and reader.lookup(BASE + 9) == (BASE + 2, 20)
    writer.trim()
    reader.reload()
    assert reader.entries == 2 and reader.max_entries == 2


def test_sanity_check(backend, tmp_path):
    path = tmp_path / "a.index"
    index = _offset_index(backend, path)
    index.append(BASE + 1, 10)
    index.trim()
    index.sanity_check()
    index.close()
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")  # garbage: length no longer a multiple of 8
    index = _offset_index(backend, path)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()
    time_path = tmp_path / "a.timeindex"
    with open(time_path, "wb") as f:  # decreasing timestamps
        f.write(fmt.TIME_INDEX_ENTRY.pack(50, 1) + fmt.TIME_INDEX_ENTRY.pack(40, 2))
    time_index = _time_index(backend, time_path)
    with pytest.raises(CorruptIndexError):
        time_index.sanity_check()


def test_indexes_write_identical_bytes(native, pure, tmp_path):
    for backend in (native, pure):
        index = _offset_index(backend, tmp_path / f"{backend.name}.index")
        time_index = _time_index(backend, tmp_path / f"{backend.name}.timeindex")
        for n in range(1, 100):
            index.append(BASE + 7 * n, 33 * n)
            time_index.maybe_append(5000 + (n // 2) * 3, BASE + 7 * n)
        index.truncate_to(BASE + 7 * 90)
        time_index.truncate_to(BASE + 7 * 80)
        index.trim()
        time_index.trim()
        index.close()
        time_index.close()
    for suffix in ("index", "timeindex"):
        assert (tmp_path / f"native.{suffix}").read_bytes() == (tmp_path / f"pure.{suffix}").read_bytes()


def test_reader_survives_writer_trim(backend, tmp_path):
    # Readers copy entries instead of mapping: a writer's trim (on roll) must not SIGBUS them.
    writer = _offset_index(backend, tmp_path / "a.index", max_index_bytes=1 << 20)
    for n in range(1, 50):
        writer.append(BASE + n, n * 10)
    reader = _offset_index(backend, tmp_path / "a.index", writable=False)
    writer.trim()
    writer.close()
    assert reader.entries == 49 and reader.lookup(BASE + 1000) == (BASE + 49, 490)
    reader.reload()
    assert reader.entries == 49 and reader.max_entries == 49


def _first_zero_slot_by_reading(data, entry_bytes):
    """The counting rule read probe by probe (the reference): binary search for the first
    all-zero slot of ``data``, reading every probe (whole slots only)."""
    lo, hi = 0, len(data) // entry_bytes
    while lo < hi:
        mid = (lo + hi) >> 1
        if data[mid * entry_bytes:(mid + 1) * entry_bytes].count(0) == entry_bytes:
            hi = mid
        else:
            lo = mid + 1
    return lo


_PAGE_KINDS = st.sampled_from(["hole", "zeros", "entries", "random"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pages=st.lists(_PAGE_KINDS, min_size=1, max_size=10), tail_bytes=st.integers(0, 23),
       seed=st.integers(0, 2**32 - 1))
def test_count_skipping_holes_matches_reading_every_probe(backend, pages, tail_bytes, seed):
    """Counting on open skips probes that lie in a hole of a sparse file (they read as zeros):
    writers and readers still count what reading every probe counts, on any bytes: holes,
    written zeros, entries, garbage with zero slots inside, slots across a page edge."""
    import random
    rng = random.Random(seed)
    page_bytes = 4096
    size = len(pages) * page_bytes + tail_bytes
    with tempfile.TemporaryDirectory() as tmp:
        for kind, entry_bytes, cls in (("index", 8, backend.OffsetIndex),
                                       ("timeindex", 12, backend.TimeIndex)):
            path = os.path.join(tmp, f"a.{kind}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(fd, size)
                for n, page in enumerate(pages):
                    if page == "zeros":
                        os.pwrite(fd, bytes(page_bytes), n * page_bytes)
                    elif page == "entries":
                        os.pwrite(fd, bytes(rng.randrange(1, 256) for _ in range(page_bytes)),
                                  n * page_bytes)
                    elif page == "random":
                        chunk = bytearray(rng.randrange(256) for _ in range(page_bytes))
                        for _ in range(rng.randrange(4)):  # zero slots inside
                            start = rng.randrange(page_bytes)
                            chunk[start:start + entry_bytes] = bytes(entry_bytes)
                        os.pwrite(fd, bytes(chunk[:page_bytes]), n * page_bytes)
            finally:
                os.close(fd)
            with open(path, "rb") as f:
                expected = _first_zero_slot_by_reading(f.read(), entry_bytes)
            writer = cls(path, BASE, preallocate=False)
            reader = cls(path, BASE, writable=False)
            assert (writer.entries, reader.entries) == (expected, expected)
            writer.reload()
            reader.reload()
            assert (writer.entries, reader.entries) == (expected, expected)
            reader.close()
            writer.close()
