"""``drop_mapped_pages``: a zero-copy read's pages leave this process's page tables, its bytes
stay correct (for the dropped view and every other view of them), small ranges are gathered
per mapping until they span 1 MiB, and any other buffer is left alone (issue 11: a broker serving Fetch from the segments' mappings kept every page it sent).

Residence is measured per mapping, from ``/proc/self/smaps`` (the Rss of the mappings of the
segment's ``.log``), so that the rest of the test process does not blur it; the asserts compare
directions with wide margins (all of a range's pages mapped after touching it, under an eighth
after the drop), never times.

Every test takes the ``backend`` fixture and runs on both twins.
"""

from __future__ import annotations

import mmap

import pytest

import seglog
from seglog import Log, LogConfig

from segment_helpers import mapping_rss_bytes

#: Records per batch and value size: batches of about 0.5 MiB (under max.message.bytes).
RECORDS_PER_BATCH = 5000
VALUE_BYTES = 100
BATCHES = 16  # about 8.4 MiB of log
PAGE_BYTES = mmap.PAGESIZE


def value(i: int) -> bytes:
    return i.to_bytes(8, "big") * (VALUE_BYTES // 8) + b"v" * (VALUE_BYTES % 8)


@pytest.fixture
def filled_log(tmp_path, backend):
    """A writer log of BATCHES batches in one segment, closed after the test."""
    log = Log.open(tmp_path / "t-0", LogConfig(), backend=backend.name)
    for b in range(BATCHES):
        first = b * RECORDS_PER_BATCH
        log.append_batch([value(first + i) for i in range(RECORDS_PER_BATCH)])
    try:
        yield log
    finally:
        log.close()


def read_all(log):
    """One read of the whole log (one segment) and the copy a socket send would make."""
    result = log.read(0, 64 << 20)
    assert result.next_offset == log.end_offset
    return result, bytes(result.buffer)


def page_span(start: int, end: int) -> int:
    return -(-end // PAGE_BYTES) * PAGE_BYTES - start // PAGE_BYTES * PAGE_BYTES


def test_a_read_range_leaves_the_page_tables(filled_log, backend):
    result, _copy = read_all(filled_log)
    size_bytes = result.size_bytes
    touched = mapping_rss_bytes(result.log_path)
    assert touched >= size_bytes * 3 // 4  # reading it mapped it: what the broker kept
    assert backend.drop_mapped_pages(result.buffer) == page_span(0, size_bytes)
    assert mapping_rss_bytes(result.log_path) < size_bytes // 8


def test_bytes_stay_correct_after_the_drop_for_every_view(filled_log, backend):
    result, copy = read_all(filled_log)
    other = filled_log.read(0, 64 << 20).buffer  # another reader's view of the same range
    assert backend.drop_mapped_pages(result.buffer) > 0
    assert mapping_rss_bytes(result.log_path) < result.size_bytes // 8
    assert bytes(other) == copy  # faulted back in from the page cache
    assert bytes(result.buffer) == copy
    assert mapping_rss_bytes(result.log_path) >= result.size_bytes * 3 // 4
    other.release()
    records = list(filled_log.records(0))
    assert [r.value for r in records] == [value(i) for i in range(BATCHES * RECORDS_PER_BATCH)]
    # Appends after a drop land and read back (they are written, never mapped).
    assert filled_log.append(b"after") == BATCHES * RECORDS_PER_BATCH
    assert [r.value for r in filled_log.records(BATCHES * RECORDS_PER_BATCH)] == [b"after"]


def test_a_slice_drops_its_own_pages_rounded_out(filled_log, backend):
    result, copy = read_all(filled_log)
    start, end = 3 * PAGE_BYTES + 100, 700 * PAGE_BYTES + 5
    assert backend.drop_mapped_pages(result.buffer[start:end]) == page_span(start, end)
    assert bytes(result.buffer) == copy


def test_small_ranges_are_gathered_and_dropped_together(filled_log, backend):
    result, copy = read_all(filled_log)
    quarter = 256 << 10  # four of them make the 1 MiB a mapping gathers before a drop
    for i in range(3):
        assert backend.drop_mapped_pages(result.buffer[i * quarter:(i + 1) * quarter]) == 0
    waiting = mapping_rss_bytes(result.log_path)
    assert waiting >= result.size_bytes * 3 // 4  # nothing dropped yet
    assert backend.drop_mapped_pages(result.buffer[3 * quarter:4 * quarter]) == 4 * quarter
    assert mapping_rss_bytes(result.log_path) <= waiting - 4 * quarter
    assert bytes(result.buffer) == copy


def test_a_range_far_from_the_gathered_one_drops_it_first(filled_log, backend):
    result, copy = read_all(filled_log)
    small = 100 << 10
    far = 6 << 20  # more than a 2 MiB block past the first range
    assert backend.drop_mapped_pages(result.buffer[:small]) == 0
    assert backend.drop_mapped_pages(result.buffer[far:far + small]) == small
    # The far range waits in turn: a range next to it completes 1 MiB and drops it.
    assert backend.drop_mapped_pages(result.buffer[far + small:far + (1 << 20)]) == 1 << 20
    assert bytes(result.buffer) == copy


def test_a_view_outliving_its_log_can_still_be_dropped(filled_log, backend):
    result, copy = read_all(filled_log)
    filled_log.close()
    assert backend.drop_mapped_pages(result.buffer) == page_span(0, result.size_bytes)
    assert mapping_rss_bytes(result.log_path) < result.size_bytes // 8
    assert bytes(result.buffer) == copy


def test_truncation_after_a_drop_works(filled_log, backend):
    result, _copy = read_all(filled_log)
    backend.drop_mapped_pages(result.buffer)
    result.buffer.release()
    filled_log.truncate_to(RECORDS_PER_BATCH)
    assert filled_log.end_offset == RECORDS_PER_BATCH
    assert [r.value for r in filled_log.records(RECORDS_PER_BATCH - 2)] == [
        value(RECORDS_PER_BATCH - 2), value(RECORDS_PER_BATCH - 1)]


def test_other_buffers_are_left_alone(tmp_path, filled_log, backend):
    result, copy = read_all(filled_log)
    released = filled_log.read(0, 1 << 20).buffer
    released.release()
    anonymous = mmap.mmap(-1, 4 * PAGE_BYTES, flags=mmap.MAP_PRIVATE)
    anonymous[:5] = b"keep!"
    own = bytearray(b"mine" * 4096)
    others = [
        b"bytes", bytearray(b"bytearray"), memoryview(b"a view of bytes"), memoryview(own),
        filled_log.read(filled_log.end_offset, 1 << 20).buffer,  # an empty read
        released,
        result.buffer[::2],  # not contiguous
        memoryview(anonymous),  # private memory, not a segment's: MADV_DONTNEED would zero it
        None, 42,
    ]
    for buffer in others:
        assert backend.drop_mapped_pages(buffer) == 0, buffer
    assert anonymous[:5] == b"keep!"
    assert own == bytearray(b"mine" * 4096)
    assert bytes(result.buffer) == copy
    other_backend = seglog.get_backend("pure" if backend.name == "native" else "native")
    assert other_backend.drop_mapped_pages(result.buffer) == 0  # not its view
    assert mapping_rss_bytes(result.log_path) >= result.size_bytes * 3 // 4


def test_a_readers_copy_is_left_alone(tmp_path, filled_log, backend):
    filled_log.flush()
    with Log.open(tmp_path / "t-0", backend=backend.name, read_only=True) as reader:
        result = reader.read(0, 64 << 20, max_offset=reader.end_offset)
        assert result.size_bytes > 0
        copy = bytes(result.buffer)
        assert backend.drop_mapped_pages(result.buffer) == 0  # pread bytes: nothing mapped
        assert bytes(result.buffer) == copy
