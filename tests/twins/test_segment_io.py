"""Segment I/O details on both backends: the file size is exactly the appended bytes while
disk blocks may be reserved past EOF (native), the reservation is given back on roll and
close, and flush() syncs only the .log while roll and close leave the indexes synced."""

from __future__ import annotations

import os

BLOCK_SLACK_BYTES = 1 << 20  # file systems may keep a little more than the size (metadata)


def _append_some(backend, segment, batches=20):
    for n in range(batches):
        segment.append(backend.encode_batch([b"x" * 100] * 200, timestamps_ms=1000 + n))


def test_file_size_is_appended_bytes(backend, tmp_path):
    segment = backend.Segment.open(str(tmp_path), 0, create=True)
    _append_some(backend, segment)
    assert os.stat(segment.log_path).st_size == segment.size_bytes
    segment.flush()
    assert os.stat(segment.log_path).st_size == segment.size_bytes
    segment.close()


def test_reservation_given_back_on_close_and_roll(backend, tmp_path):
    for roll in (False, True):
        path = tmp_path / f"roll-{roll}"
        path.mkdir()
        segment = backend.Segment.open(str(path), 0, create=True)
        _append_some(backend, segment)
        if roll:
            segment.on_become_inactive()
        else:
            segment.close()
        st = os.stat(segment.log_path)
        assert st.st_size == segment.size_bytes
        assert st.st_blocks * 512 <= st.st_size + BLOCK_SLACK_BYTES
        if roll:
            segment.close()


def test_reopen_after_flush_without_close(backend, tmp_path):
    # A writer that flushed but never closed (a crash after flush): the .log is complete and
    # the (unsynced but present) indexes still open; recovery rebuilds them anyway.
    segment = backend.Segment.open(str(tmp_path), 0, create=True)
    _append_some(backend, segment)
    segment.flush()
    size, next_offset = segment.size_bytes, segment.next_offset
    reader = backend.Segment.open(str(tmp_path), 0, read_only=True)
    assert (reader.size_bytes, reader.next_offset) == (size, next_offset)
    reader.close()
    segment.close()
    again = backend.Segment.open(str(tmp_path), 0)
    assert again.recover().truncated_bytes == 0
    assert again.next_offset == next_offset
    again.close()


def test_a_small_active_segment_reserves_little_disk(backend, tmp_path):
    """The reservation past EOF grows with the segment (64 KiB, doubling, up to 16 MiB): an
    active segment holding a few records must not hold 16 MiB of disk, or 10,000 partitions
    would reserve 160 GB (issue 14). The .log's blocks stay within 128 KiB of its size."""
    segment = backend.Segment.open(str(tmp_path), 0, create=True)
    segment.append(backend.encode_batch([b"x" * 100] * 10, timestamps_ms=1000))
    segment.flush()
    st = os.stat(segment.log_path)
    assert st.st_blocks * 512 <= st.st_size + (128 << 10)
    _append_some(backend, segment, batches=100)  # ~2.3 MB: reserved steps grow, still bounded
    st = os.stat(segment.log_path)
    assert st.st_blocks * 512 <= 2 * st.st_size + (128 << 10)
    segment.close()
