"""A segment checks base offsets as it walks batch headers (fuzz findings F4, F5).

A batch's base offset (bytes 0-7) lies outside its CRC, so every header walk of a segment
(translate_offset, read, read_range, read_record, sendfile, batches, find_offset_by_timestamp,
truncate_to) requires ``floor < base <= last``: each batch above the previous one of the walk,
the first at or above the segment's base offset, and from an index entry the walk must meet
the entry's offset before it passes it. A violation below the end is CorruptSegmentError
(``REASON_OFFSETS_NOT_INCREASING``) at the batch's position; recovery after an unclean
shutdown cuts there. Before these checks:

* F4: a batch whose base offset was lowered was skipped by a read of an offset inside it
  (``read(4)`` returned offsets 6..7: 4 and 5 vanished);
* F5: a segment whose first batch got base offset -2 lost that batch from ``records()``.

Every test runs on both backends and pokes the bytes by hand, as the fuzz reproducers do.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct

import pytest

from seglog import Log, LogConfig, get_backend
from seglog import format as fmt
from seglog.errors import CorruptRecordError, CorruptSegmentError

from segment_helpers import batch_starts, log_file

INT64_MAX = 2**63 - 1



def set_base_offset(path, position, base_offset):
    """Write ``base_offset`` into the batch at ``position`` (no CRC covers it)."""
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(struct.pack(">q", base_offset))


def four_batches(d, backend, **config):
    """Offsets 0..7 in four two-record batches of one segment; returns the batch positions."""
    with Log.open(d, LogConfig(**config), backend=backend_name(backend)) as log:
        for i in range(4):
            log.append_batch([b"a%d" % i, b"b%d" % i], timestamps_ms=1_700_000_000_000 + i)
    return batch_starts(log_file(d))


def backend_name(backend):
    return "pure" if backend.__name__.endswith("pure") else "native"


def expect_offsets_error(call, position, reasons=(fmt.REASON_OFFSETS_NOT_INCREASING,)):
    with pytest.raises(CorruptSegmentError) as info:
        call()
    assert info.value.reason in reasons
    assert info.value.position == position
    return info.value


# --- F4: a lowered base offset ----------------------------------------------------------------

@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("new_base", [0, 3, -5, INT64_MAX])
def test_f4_changed_base_offset_is_an_error_on_every_walk(backend, tmp_path, read_only, new_base):
    """Batch 3 (offsets 4..5) claims ``new_base``: lowered below or onto the previous batch,
    below the segment, or so high its last offset leaves int64. Every walk through it raises
    at its position; nothing is skipped."""
    d = str(tmp_path / "log")
    starts = four_batches(d, backend)
    bad = starts[2]
    set_base_offset(log_file(d), bad, new_base)
    segment = backend.Segment.open(d, 0, read_only=read_only)
    try:
        assert segment.next_offset == 8  # the batches after it still count
        if new_base != INT64_MAX:
            for offset in (4, 5):
                expect_offsets_error(lambda: segment.read(offset, 1 << 20), bad)
                expect_offsets_error(lambda: segment.translate_offset(offset), bad)
                expect_offsets_error(lambda: segment.read_range(offset, 1 << 20), bad)
                expect_offsets_error(lambda: segment.read_record(offset), bad)
            expect_offsets_error(lambda: segment.find_offset_by_timestamp(0, 4), bad)
        # A read that starts before the batch walks on into it.
        expect_offsets_error(lambda: segment.read(0, 1 << 20), bad)
        expect_offsets_error(lambda: segment.read(6, 1 << 20), bad)
        # The codec's own check (a last offset outside int64) may come first there.
        expect_offsets_error(lambda: list(segment.batches()), bad,
                             (fmt.REASON_OFFSETS_NOT_INCREASING, fmt.REASON_BAD_LAST_OFFSET_DELTA))
        a, b = socket.socketpair()
        try:
            expect_offsets_error(lambda: segment.sendfile(a, 0, 1 << 20), bad)
        finally:
            a.close()
            b.close()
        # The batches before it read as before.
        assert segment.read_record(3).value == b"b1"
        assert segment.translate_offset(2) == (starts[1], 2, starts[2] - starts[1])
        if not read_only:
            expect_offsets_error(lambda: segment.truncate_to(7), bad)
    finally:
        segment.close()


def test_f4_log_reads_raise_instead_of_skipping(backend, tmp_path):
    """The fuzz finding F4 at the Log level: ``read(4)``,
    ``read_columns(4)`` and ``records(4)`` used to return offsets 6..7."""
    d = str(tmp_path / "log")
    starts = four_batches(d, backend)
    set_base_offset(log_file(d), starts[2], 0)
    name = backend_name(backend)
    with pytest.raises(CorruptRecordError) as info:
        with Log.open(d, backend=name, read_only=True) as log:
            log.read(4)
            log.read_columns(4, 10)
            list(log.records(4))
    assert info.value.reason == fmt.REASON_OFFSETS_NOT_INCREASING


@pytest.mark.parametrize("read_only", [True, False])
def test_f4_lowered_batch_at_an_index_entry(backend, tmp_path, read_only):
    """With an index entry at every batch, a lookup of offset 5 lands on the entry (5, P) of
    the lowered batch itself, which still fits the entry (offsets 0..1 <= 5): the walk from
    there must not step over it to offsets 6..7."""
    d = str(tmp_path / "log")
    starts = four_batches(d, backend, index_interval_bytes=0)
    bad = starts[2]
    segment = backend.Segment.open(d, 0, read_only=True)
    try:
        assert (5, bad) in [segment.offset_index.entry(i)
                            for i in range(segment.offset_index.entries)]
    finally:
        segment.close()
    set_base_offset(log_file(d), bad, 0)
    segment = backend.Segment.open(d, 0, read_only=read_only)
    try:
        # Offset 4: the walk starts at the entry (3, batch 2) and meets the lowered batch.
        expect_offsets_error(lambda: segment.read(4, 1 << 20), bad)
        expect_offsets_error(lambda: segment.read_record(4), bad)
        # Offset 5: the walk starts at the lowered batch; the next one passes the entry's
        # offset 5 without any batch having reached it.
        expect_offsets_error(lambda: segment.read(5, 1 << 20), starts[3])
        expect_offsets_error(lambda: segment.read_record(5), starts[3])
        expect_offsets_error(lambda: segment.find_offset_by_timestamp(0, 5), starts[3])
        assert segment.read_record(7).value == b"b3"  # its own entry, after the bad batch
    finally:
        segment.close()


@pytest.mark.parametrize("read_only", [True, False])
def test_f4_lowered_last_batch_at_an_index_entry(backend, tmp_path, read_only):
    """The lowered batch is the last one and has an index entry (7, P): the index proves
    offsets up to 7 were written, so next_offset stays 8 and a read from the entry raises
    at P instead of finding nothing."""
    d = str(tmp_path / "log")
    starts = four_batches(d, backend, index_interval_bytes=0)
    set_base_offset(log_file(d), starts[3], 0)
    segment = backend.Segment.open(d, 0, read_only=read_only)
    try:
        assert segment.next_offset == 8
        for offset in (6, 7):
            expect_offsets_error(lambda: segment.read(offset, 1 << 20), starts[3])
        expect_offsets_error(lambda: segment.read(0, 1 << 20), starts[3])
        expect_offsets_error(lambda: list(segment.batches()), starts[3])
    finally:
        segment.close()


def test_f4_recovery_cuts_at_the_lowered_batch(backend, tmp_path):
    d = str(tmp_path / "log")
    starts = four_batches(d, backend)
    set_base_offset(log_file(d), starts[2], 0)
    segment = backend.Segment.open(d, 0)
    try:
        result = segment.recover()
        assert (result.truncated_bytes > 0, result.reason, segment.next_offset) == \
            (True, fmt.REASON_OFFSETS_NOT_INCREASING, 4)
        assert segment.size_bytes == starts[2]
    finally:
        segment.close()


# --- F5: a first batch below the segment's base offset ----------------------------------------

def two_segments(d, backend):
    """Six two-record batches in segments of 300 bytes; returns the base offsets [0, 6]."""
    with Log.open(d, LogConfig(segment_bytes=300), backend=backend_name(backend)) as log:
        for i in range(6):
            log.append_batch([b"a%d" % i, b"b%d" % i], timestamps_ms=1_700_000_000_000)
        return [s.base_offset for s in log.segments]


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("new_base", [-2, 0, 5])
def test_f5_first_batch_below_the_segment(backend, tmp_path, read_only, new_base):
    """The first batch of segment 6 claims ``new_base`` (below the segment's base offset):
    the Log's records() raises (before the fix it read offsets 0..5, 8..11)."""
    d = str(tmp_path / "log")
    bases = two_segments(d, backend)
    assert bases == [0, 6]
    set_base_offset(log_file(d, 6), 0, new_base)
    with Log.open(d, backend=backend_name(backend), read_only=read_only) as log:
        seen = []
        with pytest.raises(CorruptRecordError) as info:
            for record in log.records():
                seen.append(record.offset)
        assert info.value.reason == fmt.REASON_OFFSETS_NOT_INCREASING
        assert seen == [0, 1, 2, 3, 4, 5]
    segment = backend.Segment.open(d, 6, read_only=read_only)
    try:
        assert segment.next_offset == 12  # the batches after it still count
        for offset in (6, 7, 8):
            expect_offsets_error(lambda: segment.read(offset, 1 << 20), 0)
        expect_offsets_error(lambda: list(segment.batches()), 0)
    finally:
        segment.close()


def test_f5_recovery_cuts_the_segment_at_its_first_batch(backend, tmp_path):
    """Recovery (unclean shutdown) treats a base offset below the segment's as the first
    invalid byte, as it does for offsets not increasing."""
    d = str(tmp_path / "log")
    two_segments(d, backend)
    set_base_offset(log_file(d, 6), 0, -2)
    segment = backend.Segment.open(d, 6)
    try:
        result = segment.recover()
        assert (result.position, result.reason, segment.next_offset, segment.size_bytes) == \
            (0, fmt.REASON_OFFSETS_NOT_INCREASING, 6, 0)
    finally:
        segment.close()


def test_both_backends_agree(tmp_path):
    """The same poked files give the same errors (type, reason, position) on both twins."""
    outcomes = {}
    for name in ("native", "pure"):
        d = str(tmp_path / name)
        with Log.open(d, LogConfig(index_interval_bytes=0), backend=name) as log:
            for i in range(8):
                log.append_batch([b"x%d" % i] * (1 + i % 3), timestamps_ms=1000 + i)
        starts = batch_starts(log_file(d))
        results = []
        for k, new_base in ((3, 1), (5, -1), (7, INT64_MAX - 1), (1, 2)):
            shutil.copy(log_file(d), log_file(d) + ".orig")
            set_base_offset(log_file(d), starts[k], new_base)
            segment = get_backend(name).Segment.open(d, 0, read_only=True)
            try:
                row = [segment.next_offset]
                for offset in range(0, 18, 2):
                    try:
                        row.append(segment.translate_offset(offset))
                    except CorruptSegmentError as exc:
                        row.append((exc.reason, exc.position))
                results.append(row)
            finally:
                segment.close()
            shutil.copy(log_file(d) + ".orig", log_file(d))
        outcomes[name] = results
    assert outcomes["native"] == outcomes["pure"]


@pytest.mark.parametrize("read_only", [True, False])
def test_valid_segment_over_several_read_windows(backend, tmp_path, read_only):
    """A reader's batches() reads ~1 MiB windows; the walk's bounds go on across them (a
    valid segment reads whole), and a lowered batch in a later window is still caught."""
    d = str(tmp_path / "log")
    with Log.open(d, LogConfig(segment_bytes=1 << 30), backend=backend_name(backend)) as log:
        for i in range(300):
            log.append_batch([b"v" * 1000] * 5, timestamps_ms=1000 + i)
    segment = backend.Segment.open(d, 0, read_only=read_only)
    try:
        assert [b.base_offset for b in segment.batches()] == list(range(0, 1500, 5))
    finally:
        segment.close()
    starts = batch_starts(log_file(d))
    set_base_offset(log_file(d), starts[250], 5)
    segment = backend.Segment.open(d, 0, read_only=read_only)
    try:
        expect_offsets_error(lambda: list(segment.batches()), starts[250])
    finally:
        segment.close()
