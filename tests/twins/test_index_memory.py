"""A preallocated index costs memory and disk only for the entries it holds (issue 14).

Every partition's active segment has two indexes preallocated to ``segment.index.bytes``
(10 MiB by default). Thousands of empty partitions are only affordable if an empty index
touches no page of its mapping and its file is sparse: these tests read the resident size of
the index's own mapping from ``/proc/self/smaps`` (Linux) and the blocks its file holds
(``st_blocks``). They assert memory and disk, not time.
"""

from __future__ import annotations

import math
import mmap
import os
import sys

import pytest

BASE = 1000
MAX_INDEX_BYTES = 10 * 1024 * 1024  # the default segment.index.bytes
PAGE_BYTES = mmap.PAGESIZE
KINDS = ["offset", "time"]
ENTRY_BYTES = {"offset": 8, "time": 12}

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux")
                                or not os.path.exists("/proc/self/smaps"),
                                reason="reads the mapping's Rss from /proc/self/smaps")


def _open(backend, kind, path, **kwargs):
    cls = backend.OffsetIndex if kind == "offset" else backend.TimeIndex
    return cls(str(path), BASE, **kwargs)


def _append(index, kind, count):
    """``count`` entries, one per slot, in order (never the skipped all-zero entry)."""
    for n in range(1, count + 1):
        if kind == "offset":
            index.append(BASE + n, 100 * n)
        else:
            index.maybe_append(10_000 + n, BASE + n)


def _mapping_rss_bytes(path):
    """Resident bytes of every mapping of ``path`` in this process, or None when the file is
    not mapped (a test that expects a mapping then fails instead of passing on nothing)."""
    target = os.path.realpath(path)
    total, found, current = 0, False, False
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split(None, 5)
            if not fields:
                continue
            if not fields[0].endswith(":"):  # a mapping's header: range perms offset dev inode path
                current = len(fields) == 6 and fields[5].rstrip("\n") == target
                found = found or current
            elif current and fields[0] == "Rss:":
                assert fields[2] == "kB"
                total += int(fields[1]) * 1024
    return total if found else None


def _pages(kind, count):
    return math.ceil(count * ENTRY_BYTES[kind] / PAGE_BYTES)


def _allocated_bytes(path):
    return os.stat(path).st_blocks * 512


@pytest.fixture
def sparse_dir(tmp_path):
    """``tmp_path``, skipped where the file system allocates blocks for a file grown by
    ftruncate (no sparse files: nothing to assert)."""
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.truncate(MAX_INDEX_BYTES)
    if _allocated_bytes(probe) >= MAX_INDEX_BYTES // 2:
        pytest.skip("this file system does not keep sparse files")
    probe.unlink()
    return tmp_path


@linux_only
@pytest.mark.parametrize("kind", KINDS)
def test_empty_index_touches_no_page(backend, tmp_path, kind):
    """Open (new, and untrimmed after a crash), reset, resize, reload, trim and the Log's
    resize of a reopened active segment: an empty 10 MiB index has nothing resident."""
    path = tmp_path / f"a.{kind}"
    index = _open(backend, kind, path)
    assert index.entries == 0
    assert _mapping_rss_bytes(path) == 0
    index.close()
    assert _mapping_rss_bytes(path) is None
    index = _open(backend, kind, path)  # untrimmed, as a crash leaves it
    assert index.entries == 0 and index.max_entries == MAX_INDEX_BYTES // ENTRY_BYTES[kind]
    assert _mapping_rss_bytes(path) == 0
    index.reset()
    assert _mapping_rss_bytes(path) == 0
    index.resize(MAX_INDEX_BYTES // 2)
    assert _mapping_rss_bytes(path) == 0
    index.resize(MAX_INDEX_BYTES)
    assert _mapping_rss_bytes(path) == 0
    index.reload()
    assert _mapping_rss_bytes(path) == 0
    index.trim()
    index.close()
    index = _open(backend, kind, path, preallocate=False)  # a segment reopening it
    index.resize(MAX_INDEX_BYTES)  # the Log's resize of the active segment's indexes
    assert index.entries == 0 and _mapping_rss_bytes(path) == 0
    index.close()


@linux_only
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("count", [1, 700, 5000])
def test_entries_touch_only_their_pages(backend, tmp_path, kind, count):
    """N entries keep about N * entry_bytes / page_bytes pages resident: appended, counted
    on reopen (a binary search), truncated; reset drops them all."""
    path = tmp_path / f"a.{kind}"
    pages = _pages(kind, count)
    index = _open(backend, kind, path)
    _append(index, kind, count)
    assert pages * PAGE_BYTES <= _mapping_rss_bytes(path) <= (pages + 1) * PAGE_BYTES
    index.close()  # untrimmed: reopening counts the entries
    index = _open(backend, kind, path)
    assert index.entries == count
    # The binary search reads O(log n) slots; the kernel may map cached neighbours of a
    # faulting page (fault-around), but only pages that hold entries are ever cached.
    assert _mapping_rss_bytes(path) <= pages * PAGE_BYTES
    index.truncate_to(BASE + count // 2 + 1)  # zeroes the slots of the cut entries only
    assert index.entries == count // 2
    assert _mapping_rss_bytes(path) <= (pages + 1) * PAGE_BYTES
    index.reset()
    assert index.entries == 0 and _mapping_rss_bytes(path) == 0
    index.close()


@pytest.mark.parametrize("kind", KINDS)
def test_preallocated_index_is_sparse(backend, sparse_dir, kind):
    """A preallocated index holds no block until entries are written, also after a reopen;
    then the blocks of its entries' pages and of the reservation ahead of them (no further
    ahead than the entries reach: see seglog.pure.index, "Disk"); reset gives them back."""
    path = sparse_dir / f"a.{kind}"
    index = _open(backend, kind, path)
    index.flush()
    assert os.stat(path).st_size == MAX_INDEX_BYTES - MAX_INDEX_BYTES % ENTRY_BYTES[kind]
    assert _allocated_bytes(path) <= PAGE_BYTES
    index.close()
    index = _open(backend, kind, path)  # untrimmed, as a crash leaves it
    index.flush()
    assert index.entries == 0 and _allocated_bytes(path) <= PAGE_BYTES
    _append(index, kind, 3000)
    index.flush()
    written_bytes = _pages(kind, 3000) * PAGE_BYTES
    assert written_bytes <= index.reserved_bytes <= 2 * written_bytes
    assert written_bytes <= _allocated_bytes(path) <= index.reserved_bytes + PAGE_BYTES
    index.close()
    index = _open(backend, kind, path)
    assert index.entries == 3000
    index.reset()
    index.flush()
    assert index.entries == 0 and _allocated_bytes(path) <= PAGE_BYTES
    assert os.stat(path).st_size == MAX_INDEX_BYTES - MAX_INDEX_BYTES % ENTRY_BYTES[kind]
    index.close()


@linux_only
def test_new_segment_touches_no_index_page(backend, tmp_path):
    """A new (empty) segment, as every partition's first: opening it (counting, checking the
    indexes against the .log, loading its tail state) leaves its 10 MiB indexes untouched."""
    segment = backend.Segment.open(str(tmp_path), 0, create=True)
    try:
        for path in (segment.index_path, segment.time_index_path):
            assert os.stat(path).st_size >= MAX_INDEX_BYTES - 12
            assert _mapping_rss_bytes(path) == 0
    finally:
        segment.close()


@linux_only
@pytest.mark.parametrize("kind", KINDS)
def test_reserving_disk_blocks_touches_no_page(backend, sparse_dir, kind):
    """The disk reservation ahead of the entries (seglog.pure.index, "Disk") takes blocks,
    never pages: an index that reserved 1 MiB still has only its entries' pages resident."""
    path = sparse_dir / f"a.{kind}"
    index = _open(backend, kind, path)
    index.reserve((1 << 20) // ENTRY_BYTES[kind])
    assert index.reserved_bytes >= 1 << 20
    assert _mapping_rss_bytes(path) == 0
    assert index.reserved_bytes <= _allocated_bytes(path) <= index.reserved_bytes + PAGE_BYTES
    _append(index, kind, 700)
    pages = _pages(kind, 700)
    assert pages * PAGE_BYTES <= _mapping_rss_bytes(path) <= (pages + 1) * PAGE_BYTES
    index.close()
