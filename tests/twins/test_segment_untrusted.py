"""Untrusted bytes under a Segment, both backends: index entries that lie (random bytes,
negative positions, positions inside a batch, stale entries past a cut .log), batch headers
that cannot be parsed below the segment's end, CRCs on point reads, and a read-only reader
that never maps the .log. Each symptom of issue 8 (segment and index part) has a test here;
every one of them failed (crash, struct.error, hidden records or a failed close) before the
fix. Rule: never a crash, never hidden data, only typed errors."""

from __future__ import annotations

import os
import random
import struct

import pytest

import seglog
from seglog import format as fmt
from seglog.errors import CorruptRecordError, CorruptSegmentError, SeglogError
from segment_helpers import batch

INTERVAL = 200  # bytes between index entries: many entries for few batches
BATCHES = 30
COUNT = 3       # records per batch


def _write(backend, tmp_path, batches=BATCHES):
    """A closed segment of ``batches`` batches of COUNT records; returns the batch bytes."""
    segment = backend.Segment.open(str(tmp_path), 0, create=True,
                                   index_interval_bytes=INTERVAL)
    raws = [batch(backend, COUNT, timestamp_ms=1000 + 10 * n, step_ms=1)
            for n in range(batches)]
    for raw in raws:
        segment.append(raw)
    segment.close()
    return raws


def _open(backend, tmp_path, **kwargs):
    return backend.Segment.open(str(tmp_path), 0, index_interval_bytes=INTERVAL, **kwargs)


def _path(tmp_path, suffix):
    return os.path.join(str(tmp_path), f"{0:020d}{suffix}")


def _poke(path, position, data):
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def _entries(tmp_path):
    """The offset index's entries as ``[(relative_offset, position)]``."""
    with open(_path(tmp_path, ".index"), "rb") as f:
        data = f.read()
    return [struct.unpack_from(">ii", data, n) for n in range(0, len(data), 8)]


def _all_records(segment, next_offset):
    """(offset, value) of every record, read batch by batch with read() from offset 0."""
    out, offset = [], 0
    pure = seglog.get_backend("pure")
    while offset < next_offset:
        view = segment.read(offset, 1 << 20)
        data = bytes(view)
        assert data, f"read({offset}) returned nothing below next_offset {next_offset}"
        for b in pure.iter_batches(data):
            out.extend((r.offset, r.value) for r in b.records() if r.offset >= offset)
            offset = b.next_offset
    return out


def _expected(raws):
    pure = seglog.get_backend("pure")
    out, offset = [], 0
    for raw in raws:
        (only,) = pure.iter_batches(raw)
        for r in only.records():
            out.append((offset, r.value))
            offset += 1
    return out


# --- index entries are untrusted -------------------------------------------------------------


@pytest.mark.parametrize("read_only", [False, True])
def test_negative_position_in_last_index_entry(backend, tmp_path, read_only):
    """Was: segfault (native) / struct.error (pure) on open or read."""
    raws = _write(backend, tmp_path)
    entries = _entries(tmp_path)
    assert len(entries) >= 3
    last = len(entries) - 1
    _poke(_path(tmp_path, ".index"), last * 8 + 4, struct.pack(">i", -5000))
    segment = _open(backend, tmp_path, read_only=read_only)
    assert segment.indexes_need_rebuild
    assert segment.next_offset == BATCHES * COUNT
    assert _all_records(segment, segment.next_offset) == _expected(raws)
    segment.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_negative_position_in_a_middle_entry(backend, tmp_path, read_only):
    """A read whose lookup lands on an entry with a negative position (read-only log):
    was a segfault / struct.error; the entry fails the open check and is never used."""
    raws = _write(backend, tmp_path)
    middle = len(_entries(tmp_path)) // 2
    _poke(_path(tmp_path, ".index"), middle * 8 + 4, struct.pack(">i", -1))
    segment = _open(backend, tmp_path, read_only=read_only)
    assert _all_records(segment, segment.next_offset) == _expected(raws)
    segment.close()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("read_only", [False, True])
def test_random_bytes_over_index_starts(backend, tmp_path, seed, read_only):
    """Random bytes over the first bytes of both indexes: open and reads raise nothing
    untyped, and every record is still read (the entries are checked or ignored)."""
    raws = _write(backend, tmp_path)
    rng = random.Random(seed)
    for suffix in (".index", ".timeindex"):
        size = os.path.getsize(_path(tmp_path, suffix))
        _poke(_path(tmp_path, suffix), 0, rng.randbytes(min(size, rng.choice([8, 24, 64, 4096]))))
    segment = _open(backend, tmp_path, read_only=read_only)
    assert segment.next_offset == BATCHES * COUNT
    assert _all_records(segment, segment.next_offset) == _expected(raws)
    for offset in range(0, BATCHES * COUNT, 7):
        found = segment.translate_offset(offset)
        assert found is not None and found[1] <= offset
    segment.find_offset_by_timestamp(1000)
    segment.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_index_entry_inside_a_batch_falls_back(backend, tmp_path, read_only):
    """An entry whose position lands inside a batch (positions still increasing): was
    read() returning nothing below the high watermark, forever."""
    raws = _write(backend, tmp_path)
    entries = _entries(tmp_path)
    relative, position = entries[0]
    _poke(_path(tmp_path, ".index"), 4, struct.pack(">i", position + 10))
    segment = _open(backend, tmp_path, read_only=read_only)
    view = segment.read(relative, 1 << 20)
    assert len(view) > 0
    (first,) = list(seglog.get_backend("pure").iter_batches(bytes(view)))[:1]
    assert first.base_offset <= relative <= first.last_offset
    assert _all_records(segment, segment.next_offset) == _expected(raws)
    segment.close()


def test_index_entry_at_a_later_batch_falls_back(backend, tmp_path):
    """An entry at a real batch start whose offsets are above the entry's offset would
    skip records; it is not used."""
    raws = _write(backend, tmp_path)
    entries = _entries(tmp_path)
    relative0, _ = entries[0]
    _, later_position = entries[2]
    _poke(_path(tmp_path, ".index"), 4, struct.pack(">i", later_position - 1))
    _poke(_path(tmp_path, ".index"), 12, struct.pack(">i", later_position))
    segment = _open(backend, tmp_path, read_only=True)
    assert _all_records(segment, segment.next_offset) == _expected(raws)
    segment.close()


def test_log_cut_at_a_batch_boundary_then_append_and_close(backend, tmp_path):
    """Symptom 5, segment part: a .log cut at a batch boundary behind the indexes' back
    leaves stale time-index entries past next_offset. They are not trusted (the Log
    rebuilds: indexes_need_rebuild), and one more append then close() succeeds (was:
    InvalidOffsetError from the final time-index entry, so the Log never wrote its
    clean-shutdown marker)."""
    _write(backend, tmp_path)
    reader = _open(backend, tmp_path, read_only=True)
    cut = reader.translate_offset(BATCHES * COUNT // 2)[0]
    reader.close()
    os.truncate(_path(tmp_path, ".log"), cut)
    segment = _open(backend, tmp_path)
    assert segment.indexes_need_rebuild
    assert segment.next_offset == BATCHES * COUNT // 2
    segment.resize_indexes()
    segment.append(batch(backend, 1, timestamp_ms=1_000_000))
    segment.close()
    reopened = _open(backend, tmp_path)
    assert reopened.next_offset == BATCHES * COUNT // 2 + 1
    assert reopened.max_timestamp_ms == 1_000_000
    reopened.close()


def test_index_entry_at_the_log_end_is_not_trusted(backend, tmp_path):
    """An entry whose position equals the .log size (a cut exactly there) points at no
    batch: next_offset must come from the batches, not from the entry."""
    _write(backend, tmp_path)
    entries = _entries(tmp_path)
    relative, position = entries[-1]
    os.truncate(_path(tmp_path, ".log"), position)
    segment = _open(backend, tmp_path)
    assert segment.indexes_need_rebuild
    assert segment.next_offset <= relative - COUNT + 1
    segment.recover()
    assert not segment.indexes_need_rebuild
    segment.close()


def test_time_index_with_a_future_offset_is_not_trusted(backend, tmp_path):
    _write(backend, tmp_path)
    with open(_path(tmp_path, ".timeindex"), "rb") as f:
        data = f.read()
    last = len(data) // 12 - 1
    _poke(_path(tmp_path, ".timeindex"), last * 12 + 8, struct.pack(">i", 10_000))
    segment = _open(backend, tmp_path, read_only=True)
    assert segment.max_timestamp_ms == 1000 + 10 * (BATCHES - 1) + COUNT - 1
    assert segment.find_offset_by_timestamp(1000 + 10 * 5) == (1050, 5 * COUNT)
    segment.close()


# --- batch headers below the end are corruption, never end of data ------------------------


def _corrupt_batch(backend, tmp_path, kind):
    """Close a segment, then damage the header of batch 10 of 30; returns (position, raws)."""
    raws = _write(backend, tmp_path)
    position = sum(map(len, raws[:10]))
    if kind == "length_zero":
        _poke(_path(tmp_path, ".log"), position + 8, struct.pack(">i", 0))
    elif kind == "length_small":
        _poke(_path(tmp_path, ".log"), position + 8, struct.pack(">i", 30))
    elif kind == "bad_magic":
        _poke(_path(tmp_path, ".log"), position + fmt.MAGIC_POSITION, b"\x07")
    elif kind == "zeroed_region":
        _poke(_path(tmp_path, ".log"), position, bytes(len(raws[10]) + len(raws[11])))
    elif kind == "length_huge":
        _poke(_path(tmp_path, ".log"), position + 8, struct.pack(">i", 0x7FFF0000))
    return position, raws


KINDS = {
    "length_zero": fmt.REASON_BATCH_TOO_SMALL,
    "length_small": fmt.REASON_BATCH_TOO_SMALL,
    "bad_magic": fmt.REASON_BAD_MAGIC,
    "zeroed_region": fmt.REASON_BATCH_TOO_SMALL,
    "length_huge": fmt.REASON_TRUNCATED,
}


def _check_error(info, segment, position, kind):
    error = info.value
    assert isinstance(error, CorruptRecordError)
    assert error.position == position
    assert error.reason == KINDS[kind]
    assert error.path == segment.log_path and error.base_offset == 0


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("read_only", [False, True])
def test_unparseable_header_below_the_end_is_corruption(backend, tmp_path, kind, read_only):
    """Was: read()/records read it as the end of the segment (210 of 300 records)."""
    position, raws = _corrupt_batch(backend, tmp_path, kind)
    segment = _open(backend, tmp_path, read_only=read_only)
    offset_after = 10 * COUNT  # the damaged batch: its lookup must scan into it
    with pytest.raises(CorruptSegmentError) as info:
        _all_records(segment, BATCHES * COUNT)
    _check_error(info, segment, position, kind)
    with pytest.raises(CorruptSegmentError) as info:
        segment.read(offset_after, 1 << 20)
    _check_error(info, segment, position, kind)
    with pytest.raises(CorruptSegmentError) as info:
        segment.read_record(offset_after)
    _check_error(info, segment, position, kind)
    with pytest.raises(CorruptSegmentError) as info:
        list(segment.batches())
    _check_error(info, segment, position, kind)
    # What comes before it still reads.
    assert segment.read_record(COUNT * 9).offset == COUNT * 9
    assert len(segment.read(0, 1)) == len(raws[0])
    segment.close()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_only_recover_cuts_at_the_bad_header(backend, tmp_path, kind):
    position, _ = _corrupt_batch(backend, tmp_path, kind)
    segment = _open(backend, tmp_path)
    result = segment.recover()
    assert result.position == position and result.truncated_bytes > 0
    assert segment.next_offset == 10 * COUNT
    assert len(_all_records(segment, segment.next_offset)) == 10 * COUNT
    segment.close()


def test_log_records_raise_instead_of_stopping(backend, tmp_path):
    """Log level (issue 8): a zeroed region in a flushed segment of a cleanly closed log
    was 'end of segment': records() returned fewer records and read() jumped ahead."""
    config = seglog.LogConfig(index_interval_bytes=INTERVAL)
    log = seglog.Log.open(str(tmp_path), config, backend=backend.name)
    for n in range(300):
        log.append(b"v%d" % n)
    log.close()
    segment = backend.Segment.open(str(tmp_path), 0, read_only=True)
    position = segment.translate_offset(210)[0]
    segment.close()
    _poke(_path(tmp_path, ".log"), position, bytes(200))
    log = seglog.Log.open(str(tmp_path), config, backend=backend.name)
    try:
        with pytest.raises(CorruptRecordError):
            list(log.records())
        with pytest.raises(CorruptRecordError):
            log.read(210)
    finally:
        log.close()


# --- CRCs on point reads ------------------------------------------------------------------


@pytest.mark.parametrize("read_only", [False, True])
def test_read_record_checks_the_crc(backend, tmp_path, read_only):
    raws = _write(backend, tmp_path)
    position = sum(map(len, raws[:5]))
    flip = position + len(raws[5]) - 5  # inside the last record's value
    with open(_path(tmp_path, ".log"), "r+b") as f:
        f.seek(flip)
        byte = f.read(1)
        f.seek(flip)
        f.write(bytes([byte[0] ^ 0x01]))
    segment = _open(backend, tmp_path, read_only=read_only)
    offset = 5 * COUNT + COUNT - 1
    for _ in range(2):  # once computed, the failure is not cached as a success
        with pytest.raises(CorruptRecordError) as info:
            segment.read_record(offset)
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        assert info.value.position == position
        with pytest.raises(CorruptRecordError) as info:
            segment.read_value(offset)  # the value-only read checks the same CRC
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        assert info.value.position == position
    changed = segment.read_record(offset, check_crcs=False)
    assert changed is not None and changed.offset == offset
    assert segment.read_record(offset - COUNT).offset == offset - COUNT  # other batches fine
    segment.close()


# --- a reader never maps the .log ---------------------------------------------------------


def _mapped_paths():
    with open("/proc/self/maps") as f:
        return f.read()


def test_read_only_segment_maps_nothing(backend, tmp_path):
    _write(backend, tmp_path)
    segment = _open(backend, tmp_path, read_only=True)
    data = bytes(segment.read(0, 1 << 20))
    assert data and isinstance(segment.read(0, 1 << 20), memoryview)
    segment.read_record(7)
    batches = list(segment.batches())
    assert len(batches) == BATCHES
    segment.refresh()
    maps = _mapped_paths()
    for suffix in (".log", ".index", ".timeindex"):
        assert _path(tmp_path, suffix) not in maps
    del batches
    segment.close()


def test_writer_point_reads_unmap_with_the_segment(backend, tmp_path):
    # The native writer's point reads use a mapping of their own (random access); it goes
    # when the segment closes, as the read() mapping does once its views are released.
    raws = _write(backend, tmp_path)
    segment = _open(backend, tmp_path)
    values = [segment.read_value(offset) for offset in range(0, BATCHES * COUNT, 7)]
    assert values == [segment.read_record(offset).value
                      for offset in range(0, BATCHES * COUNT, 7)]
    segment.truncate_to(3 * COUNT)  # a cut below the mapped bytes: reads stop at the end
    assert segment.read_value(3 * COUNT, "none") == "none"
    assert segment.read_value(3 * COUNT - 1) == segment.read_record(3 * COUNT - 1).value
    segment.append(raws[5])
    assert segment.read_value(3 * COUNT) == segment.read_record(3 * COUNT).value
    segment.close()
    assert _path(tmp_path, ".log") not in _mapped_paths()


def test_read_only_reader_survives_a_truncation(backend, tmp_path):
    """In one process: a writer truncates while a reader holds its state; the reader's
    reads see fewer bytes (never a fault), and refresh() catches up."""
    raws = _write(backend, tmp_path)
    reader = _open(backend, tmp_path, read_only=True)
    writer = _open(backend, tmp_path)
    writer.truncate_to(5 * COUNT)
    # Its state still says 30 batches: the reads past the cut find the file shorter.
    assert len(reader.read(20 * COUNT, 1 << 20)) == 0
    assert len(reader.read(0, 1 << 30)) == sum(map(len, raws[:5]))
    reader.refresh()
    assert reader.next_offset == 5 * COUNT
    assert len(_all_records(reader, reader.next_offset)) == 5 * COUNT
    assert sum(map(len, raws[:5])) == reader.size_bytes
    writer.close()
    reader.close()


def test_errors_are_typed(backend, tmp_path):
    """CorruptSegmentError is a CorruptRecordError and a SeglogError."""
    assert issubclass(CorruptSegmentError, CorruptRecordError)
    assert issubclass(CorruptSegmentError, SeglogError)


UNCLEAN_WRITER = """
import os, sys
import seglog
log = seglog.Log.open(sys.argv[1], seglog.LogConfig(index_interval_bytes=200),
                      backend=sys.argv[2])
for n in range(300):
    log.append(b"value-%d" % n, timestamp_ms=1000 + n)
log.flush()
os._exit(0)  # no close: an unclean shutdown, untrimmed (preallocated) indexes
"""


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("cover", ["start", "all_entries"])
def test_log_open_after_unclean_shutdown_with_random_index_bytes(backend, tmp_path, seed,
                                                                 cover):
    """Issue 8: random bytes over the start of the .index/.timeindex of a log that was not
    closed cleanly made Log.open segfault (native) or raise struct.error (pure): the tail
    scan trusted the last entry's position ("all_entries" covers the last entry too, with
    a negative position, which is what crashed)."""
    import subprocess
    import sys
    path = str(tmp_path / "p-0")
    subprocess.run([sys.executable, "-c", UNCLEAN_WRITER, path, backend.name], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    rng = random.Random(seed)
    for suffix, entry_bytes in ((".index", 8), (".timeindex", 12)):
        index_path = os.path.join(path, f"{0:020d}{suffix}")
        if cover == "start":
            _poke(index_path, 0, rng.randbytes(rng.choice([16, 256])))
            continue
        with open(index_path, "rb") as f:
            data = f.read()
        used = len(data.rstrip(b"\0")) + entry_bytes - 1
        used -= used % entry_bytes  # every entry up to the last non-zero one
        garbage = bytearray(rng.randbytes(used))
        garbage[used - 4 if suffix == ".index" else used - 12] |= 0x80  # last one negative
        _poke(index_path, 0, bytes(garbage))
    log = seglog.Log.open(path, seglog.LogConfig(index_interval_bytes=200),
                          backend=backend.name)
    try:
        assert log.end_offset == 300
        assert [r.value for r in log.records()] == [b"value-%d" % n for n in range(300)]
        assert log.offset_for_timestamp(1150) is not None
    finally:
        log.close()
    for read_only in (True, False):  # and the files left behind are sound
        log = seglog.Log.open(path, backend=backend.name, read_only=read_only)
        assert len(list(log.records())) == 300
        log.close()


def test_reader_refresh_after_truncate_and_rewrite(backend, tmp_path):
    """The writer cuts and writes different batches at the same positions: after refresh()
    the reader sees the new bytes (its pread chunk, last batch and CRC caches are dropped)."""
    _write(backend, tmp_path)
    reader = _open(backend, tmp_path, read_only=True)
    old = reader.read_record(6 * COUNT).value
    writer = _open(backend, tmp_path)
    writer.truncate_to(5 * COUNT)
    for n in range(10):
        writer.append(backend.encode_batch([b"new-%d-%d" % (n, k) for k in range(COUNT)],
                                           timestamps_ms=[5000 + n] * COUNT))
    reader.refresh()
    assert reader.next_offset == 15 * COUNT
    new = reader.read_record(6 * COUNT).value
    assert new == b"new-1-0" and new != old
    assert reader.find_offset_by_timestamp(5003) == (5003, 8 * COUNT)
    assert _all_records(reader, reader.next_offset)[-1] == (15 * COUNT - 1, b"new-9-2")
    writer.close()
    reader.close()


def test_reader_distrusting_an_index_trusts_it_again_once_rebuilt(backend, tmp_path):
    raws = _write(backend, tmp_path)
    last = len(_entries(tmp_path)) - 1
    _poke(_path(tmp_path, ".index"), last * 8 + 4, struct.pack(">i", -1))
    reader = _open(backend, tmp_path, read_only=True)
    writer = _open(backend, tmp_path)
    assert writer.indexes_need_rebuild
    writer.recover()
    writer.close()
    reader.refresh()
    assert _all_records(reader, reader.next_offset) == _expected(raws)
    assert reader.translate_offset(20 * COUNT)[1] == 20 * COUNT
    reader.close()
