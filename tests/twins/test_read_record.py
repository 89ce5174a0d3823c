"""Point reads: ``Batch.record_at``, ``Segment.read_record`` and ``Segment.read_value`` on both backends, against the
model (``records()``), with gaps, compression, headers, control batches, LogAppendTime, the
native in-batch checkpoints (dense batches of >= 64 records) and malformed framing."""

from __future__ import annotations

import random

import pytest

import seglog
from seglog.errors import CorruptSegmentError, InvalidRecordError

from segment_helpers import recrc

COMPRESSIONS = ["none", "gzip", "lz4"]


def _values(n, seed=1):
    rng = random.Random(seed)
    return [None if rng.random() < 0.05 else rng.randbytes(rng.randrange(0, 300))
            for _ in range(n)]


def _segment(backend, tmp_path, **kwargs):
    return backend.Segment.open(str(tmp_path), 0, create=True, **kwargs)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_read_record_equals_records(backend, tmp_path, compression):
    segment = _segment(backend, tmp_path)
    values = _values(700)
    keys = [None if i % 3 == 0 else b"k%d" % i for i in range(700)]
    headers = [[("h", b"v"), ("n", None)] if i % 11 == 0 else [] for i in range(700)]
    for start in range(0, 700, 100 if compression != "none" else 350):
        stop = start + (100 if compression != "none" else 350)
        segment.append(backend.encode_batch(values[start:stop], keys=keys[start:stop],
                                            headers=headers[start:stop],
                                            timestamps_ms=list(range(start, stop)),
                                            compression=compression))
    expected = [r for b in segment.batches() for r in b.records()]
    order = list(range(700))
    random.Random(3).shuffle(order)
    for offset in order + order[:50]:  # a second read of a batch uses its checkpoints
        assert segment.read_record(offset) == expected[offset]
    for offset in (-1, 700, 701, 10**12):
        assert segment.read_record(offset) is None
    segment.close()


def test_read_record_gaps_and_control(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    # A compacted-style batch: offsets 0, 2, 5, ... (deltas with gaps), then a batch after a
    # gap between batches, then a commit marker.
    deltas = [i * 3 for i in range(100)]
    values = [b"v%d" % d for d in deltas]
    segment.append(backend.encode_batch(values, offset_deltas=deltas, timestamps_ms=5,
                                        last_offset_delta=400))
    segment.append(backend.encode_batch([b"x", b"y"], base_offset=1000, timestamps_ms=7),
                   assign_offsets=False)
    segment.append(backend.encode_control_batch(1, producer_id=9, producer_epoch=0))
    for offset in range(401):
        record = segment.read_record(offset)
        if offset % 3 == 0 and offset < 300:
            assert record.offset == offset and record.value == b"v%d" % offset
        else:
            assert record is None
    assert segment.read_record(999) is None
    assert segment.read_record(1001).value == b"y"
    assert segment.read_record(1002) is None  # the commit marker
    assert segment.next_offset == 1003
    segment.close()


def test_read_record_log_append_time(backend):
    raw = backend.encode_batch([b"a"] * 80, timestamps_ms=10, timestamp_type=1)
    (batch,) = backend.iter_batches(raw)
    assert batch.record_at(79).timestamp_ms == batch.max_timestamp_ms
    assert batch.record_at(80) is None


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_record_at_matches_records_on_both_twins(compression):
    native, pure = seglog.get_backend("native"), seglog.get_backend("pure")
    raw = pure.encode_batch(_values(90, seed=5), keys=[b"k"] * 90, timestamps_ms=1,
                            headers=[[("a", b"b")]] * 90, compression=compression)
    for be in (native, pure):
        (batch,) = be.iter_batches(raw)
        records = batch.records()
        assert [batch.record_at(r.offset) for r in records] == records
        assert batch.record_at(-1) is None and batch.record_at(90) is None


def _corrupt_first_length(backend, raw):
    """The batch with its first record's length varint replaced by a 6-byte varint, and the
    CRC of the (unchanged-length) batch recomputed, so that decoders that check CRCs first
    still reach the framing check."""
    data = bytearray(raw)
    bad = bytes(data[:61]) + b"\xff\xff\xff\xff\xff\x01" + bytes(data[62:])
    size = len(raw)
    return recrc(bad[:size]) + bad[size:]


def test_record_at_bad_framing_same_error(backend):
    native, pure = seglog.get_backend("native"), seglog.get_backend("pure")
    raw = pure.encode_batch([b"abc"] * 70, timestamps_ms=1)
    bad = _corrupt_first_length(pure, raw)
    messages = []
    for be in (native, pure):
        (batch,) = be.iter_batches(bad)
        with pytest.raises(InvalidRecordError) as info:
            batch.record_at(30)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_read_record_after_truncate(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    segment.append(backend.encode_batch([b"a%d" % i for i in range(100)], timestamps_ms=1))
    segment.append(backend.encode_batch([b"b%d" % i for i in range(100)], timestamps_ms=1))
    assert segment.read_record(150).value == b"b50"
    segment.truncate_to(100)
    assert segment.read_record(150) is None
    segment.append(backend.encode_batch([b"c%d" % i for i in range(120)], timestamps_ms=1))
    assert segment.read_record(150).value == b"c50"
    assert segment.read_record(219).value == b"c119"
    segment.close()


@pytest.mark.parametrize("timestamp_type", [0, 1])
def test_read_record_again_from_remembered_batches(backend, tmp_path, timestamp_type):
    # Every batch at an index entry (interval 1 B): the native twin's second read of a batch
    # takes its header from the entry its first read left; both twins return the model's
    # records, read once, twice and in random order, for CreateTime and LogAppendTime.
    segment = _segment(backend, tmp_path, index_interval_bytes=1)
    values = _values(600, seed=5)
    for start in range(0, 600, 100):
        segment.append(backend.encode_batch(values[start:start + 100],
                                            timestamps_ms=list(range(start, start + 100)),
                                            timestamp_type=timestamp_type))
    expected = [r for b in segment.batches() for r in b.records()]
    order = list(range(600)) * 3
    random.Random(7).shuffle(order)
    for offset in order:
        assert segment.read_record(offset) == expected[offset]
    segment.close()


def test_read_record_checks_crc_once_asked(backend, tmp_path):
    # A batch read without the CRC check first (its header remembered) is still checked by
    # the first read that asks for it: a corrupt value byte is a CRC mismatch then.
    segment = _segment(backend, tmp_path, index_interval_bytes=1)
    segment.append(backend.encode_batch([b"v%03d" % i for i in range(100)], timestamps_ms=1))
    with open(segment.log_path, "r+b") as f:
        data = f.read()
        at = data.index(b"v050")
        f.seek(at)
        f.write(b"X")
    for _ in range(2):
        assert segment.read_record(50, check_crcs=False).value == b"X050"
    for _ in range(2):
        with pytest.raises(CorruptSegmentError) as info:
            segment.read_record(50)
        assert info.value.reason == seglog.format.REASON_CRC_MISMATCH
    segment.close()


def test_read_record_many_remembered_batches_then_truncate(backend, tmp_path):
    # More remembered batches than the native table's first size (1,024 slots, grown at half
    # full): every read still finds its own batch, and after a cut the new bytes are read.
    segment = _segment(backend, tmp_path, index_interval_bytes=1)
    for b in range(1200):
        segment.append(backend.encode_batch([b"%d:%d" % (b, i) for i in range(64)],
                                            timestamps_ms=b))
    order = [b * 64 + (b * 7) % 64 for b in range(1200)]
    random.Random(11).shuffle(order)
    for offset in order + order:
        record = segment.read_record(offset)
        assert record.value == b"%d:%d" % (offset // 64, offset % 64)
        assert record.timestamp_ms == offset // 64
    segment.truncate_to(600 * 64)
    segment.append(backend.encode_batch([b"new%d" % i for i in range(64)], timestamps_ms=5))
    assert segment.read_record(600 * 64 + 3).value == b"new3"
    assert segment.read_record(601 * 64 + 3) is None
    assert segment.read_record(599 * 64 + 3).value == b"599:3"
    segment.close()


MISSING = object()


def _check_read_value(segment, offsets):
    # read_value answers read_record's record's value, or the default when there is none;
    # read before and after read_record (the native twin's first and remembered paths).
    for offset in offsets:
        first = segment.read_value(offset, MISSING)
        record = segment.read_record(offset)
        assert first == (MISSING if record is None else record.value)
        assert segment.read_value(offset, MISSING) == first
        assert segment.read_value(offset) == (None if record is None else record.value)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_read_value_equals_read_record(backend, tmp_path, compression):
    segment = _segment(backend, tmp_path, index_interval_bytes=1)
    values = _values(700, seed=9)  # some null values: None, not the default
    for start in range(0, 700, 100):
        segment.append(backend.encode_batch(values[start:start + 100],
                                            timestamps_ms=list(range(start, start + 100)),
                                            compression=compression))
    deltas = [i * 3 for i in range(100)]  # gaps inside a batch, then a commit marker
    segment.append(backend.encode_batch([b"g%d" % d for d in deltas], base_offset=700,
                                        offset_deltas=deltas, timestamps_ms=5,
                                        last_offset_delta=400), assign_offsets=False)
    segment.append(backend.encode_control_batch(1, producer_id=9, producer_epoch=0))
    order = list(range(1102))
    random.Random(13).shuffle(order)
    _check_read_value(segment, order + [-1, 1102, 10**12, 2**70, -2**70])
    assert segment.read_value(3, check_crcs=False) == values[3]
    assert [segment.read_value(o) for o in range(700)] == values
    segment.close()
    reader = backend.Segment.open(str(tmp_path), 0, read_only=True)
    _check_read_value(reader, order[:200] + [1102])
    reader.close()


def test_read_value_checks_crc_once_asked(backend, tmp_path):
    segment = _segment(backend, tmp_path, index_interval_bytes=1)
    segment.append(backend.encode_batch([b"v%03d" % i for i in range(100)], timestamps_ms=1))
    with open(segment.log_path, "r+b") as f:
        data = f.read()
        at = data.index(b"v050")
        f.seek(at)
        f.write(b"X")
    for _ in range(2):
        assert segment.read_value(50, check_crcs=False) == b"X050"
    for _ in range(2):
        with pytest.raises(CorruptSegmentError) as info:
            segment.read_value(50)
        assert info.value.reason == seglog.format.REASON_CRC_MISMATCH
    segment.close()
    with pytest.raises(seglog.errors.LogClosedError):
        segment.read_value(50)
