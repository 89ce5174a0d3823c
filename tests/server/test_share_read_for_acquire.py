"""The log read a ShareFetch acquires from (``share_partitions.read_for_acquire``) is the
read of ``max_bytes`` it replaces (one segment, whole batches, ``min_one_batch``), cut after
the batch holding the last offset the acquire may take: over batches of 1 to 7 records,
several segments, every start offset and bound, small and large ``max_bytes``, and both
isolation levels."""

from __future__ import annotations

import random

import pytest

from seglog.server.share_partitions import read_for_acquire
from seglog.storage.config import LogConfig
from seglog.storage.log import Log


def _log(tmp_path) -> Log:
    log = Log.open(tmp_path / "q-0", LogConfig(segment_bytes=2048))
    rng = random.Random(7)
    for _ in range(60):
        count = rng.randint(1, 7)
        log.append_batch([b"v" * rng.randint(1, 40) for _ in range(count)])
    return log


def _batch_ends(buffer) -> list[tuple[int, int]]:
    """``(end position, last offset)`` of each batch of ``buffer``."""
    view, out, position = memoryview(buffer), [], 0
    while position + 12 <= len(view):
        base = int.from_bytes(view[position:position + 8], "big", signed=True)
        length = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        delta = int.from_bytes(view[position + 23:position + 27], "big", signed=True)
        position += 12 + length
        out.append((position, base + delta))
    return out


def _expected(log: Log, offset: int, up_to: int, **read) -> bytes:
    buffer = log.read(offset, **read).buffer
    for end, last in _batch_ends(buffer):
        if last >= up_to:
            return bytes(buffer[:end])
    return bytes(buffer)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_the_bounded_read_is_the_full_read_cut_after_the_bound(tmp_path, isolation):
    log = _log(tmp_path)
    try:
        end = log.end_offset
        assert len(log.segments) > 2  # reads that stop at a segment's end are covered
        cases = 0
        for offset in range(0, end, 3):
            for wanted in (1, 2, 5, 13, 40, 500):
                for max_bytes in (1, 150, 1000, 1 << 20):
                    for min_one_batch in (True, False):
                        up_to = offset + wanted
                        got, aborted = read_for_acquire(
                            log, offset, up_to, max_bytes=max_bytes,
                            min_one_batch=min_one_batch, isolation=isolation)
                        want = _expected(log, offset, up_to, max_bytes=max_bytes,
                                         min_one_batch=min_one_batch, isolation=isolation)
                        assert bytes(got) == want, (offset, up_to, max_bytes, min_one_batch)
                        assert aborted == []
                        cases += 1
        assert cases > 1000
    finally:
        log.close()
