"""Index entries are untrusted input (issue 8): ``sanity_check`` rejects every entry a valid
index cannot hold, on both backends, with one test per rule; time lookups over equal
timestamps (allowed: they are non-decreasing) return the first entry, so a scan from it
misses no record with that timestamp."""

from __future__ import annotations

import struct

import pytest

from seglog.errors import CorruptIndexError

BASE = 100


def _offset_index(backend, tmp_path, entries):
    path = str(tmp_path / "x.index")
    with open(path, "wb") as f:
        for relative_offset, position in entries:
            f.write(struct.pack(">ii", relative_offset, position))
    return backend.OffsetIndex(path, BASE, writable=False)


def _time_index(backend, tmp_path, entries):
    path = str(tmp_path / "x.timeindex")
    with open(path, "wb") as f:
        for timestamp_ms, relative_offset in entries:
            f.write(struct.pack(">qi", timestamp_ms, relative_offset))
    return backend.TimeIndex(path, BASE, writable=False)


GOOD_OFFSET = [(3, 100), (7, 250), (12, 400)]
BAD_OFFSET = {
    "negative relative offset": [(-3, 100), (7, 250)],
    "relative offsets not increasing": [(7, 100), (7, 250)],
    "relative offsets decreasing": [(9, 100), (7, 250)],
    "negative position": [(3, -100), (7, 250)],
    "positions not increasing": [(3, 250), (7, 250)],
    "positions decreasing": [(3, 250), (7, 100)],
}


def test_valid_offset_index_passes(backend, tmp_path):
    index = _offset_index(backend, tmp_path, GOOD_OFFSET)
    index.sanity_check()
    index.sanity_check(log_size_bytes=401)


@pytest.mark.parametrize("rule", sorted(BAD_OFFSET))
def test_offset_index_rule(backend, tmp_path, rule):
    index = _offset_index(backend, tmp_path, BAD_OFFSET[rule])
    with pytest.raises(CorruptIndexError):
        index.sanity_check()


@pytest.mark.parametrize("log_size_bytes", [0, 100, 400])
def test_offset_index_position_inside_the_log(backend, tmp_path, log_size_bytes):
    """A position at or past the .log size points at no batch (a .log cut behind the
    index's back): the index fails its check."""
    index = _offset_index(backend, tmp_path, GOOD_OFFSET)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size_bytes=log_size_bytes)


GOOD_TIME = [(1000, 3), (1000, 5), (2000, 5), (3000, 9)]
BAD_TIME = {
    "timestamps decreasing": [(2000, 3), (1000, 5)],
    "timestamp below -1": [(-5, 3), (1000, 5)],
    "offsets decreasing": [(1000, 5), (2000, 3)],
    "negative relative offset": [(1000, -1), (2000, 3)],
}


def test_valid_time_index_passes(backend, tmp_path):
    index = _time_index(backend, tmp_path, GOOD_TIME)
    index.sanity_check()
    index.sanity_check(next_offset=BASE + 10)


@pytest.mark.parametrize("rule", sorted(BAD_TIME))
def test_time_index_rule(backend, tmp_path, rule):
    index = _time_index(backend, tmp_path, BAD_TIME[rule])
    with pytest.raises(CorruptIndexError):
        index.sanity_check()


def test_time_index_offset_below_next_offset(backend, tmp_path):
    """An entry at or past the segment's next offset is stale (a .log cut behind the index's
    back); trusting it would fail the final time-index entry on close."""
    index = _time_index(backend, tmp_path, GOOD_TIME)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(next_offset=BASE + 9)


def test_time_lookup_returns_the_first_of_equal_timestamps(backend, tmp_path):
    entries = [(500, 1)] + [(1000, n) for n in range(2, 40)] + [(2000, 50)]
    index = _time_index(backend, tmp_path, entries)
    index.sanity_check()
    assert index.lookup(1000) == (1000, BASE + 2)
    assert index.lookup(1500) == (1000, BASE + 2)
    assert index.lookup(999) == (500, BASE + 1)
    assert index.lookup(2000) == (2000, BASE + 50)
    assert index.lookup(2**70) == (2000, BASE + 50)
    assert index.lookup(-2**70) == (-1, BASE)
