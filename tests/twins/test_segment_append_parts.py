"""Segment.append of a list or tuple of parts (each whole batches), on both backends: the
same file, results and errors as appending the parts joined, and byte-identical twins."""

from __future__ import annotations

import os

import pytest

from seglog import format as fmt
from seglog.errors import (
    CorruptRecordError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidOffsetError,
    InvalidRecordError,
    RecordTooLargeError,
)
from segment_helpers import batch, records, with_field


def _segment(backend, path, base=0, **kwargs):
    os.makedirs(path, exist_ok=True)
    kwargs.setdefault("index_interval_bytes", 200)
    return backend.Segment.open(str(path), base, create=True, **kwargs)


def _parts(backend):
    raws = [batch(backend, 1 + n % 4, value_bytes=20 + 7 * n, timestamp_ms=1000 + 5 * (n % 3),
                  base_offset=0) for n in range(9)]
    # Mixed shapes: single batches, a joined pair, a bytearray and a memoryview.
    return [raws[0], raws[1] + raws[2], bytearray(raws[3]), memoryview(raws[4]),
            raws[5] + raws[6] + raws[7], raws[8]]


@pytest.mark.parametrize("container", [list, tuple])
def test_parts_append_as_if_joined(backend, tmp_path, container):
    parts = _parts(backend)
    joined = _segment(backend, tmp_path / "joined", base=7)
    split = _segment(backend, tmp_path / "split", base=7)
    joined.append(batch(backend, 2))
    split.append(batch(backend, 2))
    expected = joined.append(b"".join(bytes(p) for p in parts))
    before = [bytes(p) for p in parts]
    got = split.append(container(parts))
    assert got == expected
    assert [bytes(p) for p in parts] == before  # the caller's buffers are not modified
    joined.close()
    split.close()
    for name in os.listdir(tmp_path / "joined"):
        assert (tmp_path / "split" / name).read_bytes() == \
            (tmp_path / "joined" / name).read_bytes(), name
    segment = backend.Segment.open(str(tmp_path / "split"), 7, read_only=True)
    assert [r[0] for r in records(backend, segment.read(7, 1 << 20))] == \
        list(range(7, segment.next_offset))


def test_parts_without_assigning_offsets(backend, tmp_path):
    segment = _segment(backend, tmp_path, base=10)
    segment.append([batch(backend, 2, base_offset=10), batch(backend, 2, base_offset=20)],
                   assign_offsets=False)
    assert segment.next_offset == 22
    first = batch(backend, 2, base_offset=30)
    with pytest.raises(InvalidOffsetError, match=f"position {len(first)} "):  # across parts
        segment.append((first, batch(backend, 1, base_offset=31)), assign_offsets=False)
    assert segment.next_offset == 22


def test_empty_parts_are_an_error(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    for data in ([], (), [b""], [b"", bytearray()]):
        with pytest.raises(InvalidRecordError):
            segment.append(data)
    assert segment.size_bytes == 0


def test_bad_batch_in_a_later_part_writes_nothing(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    good = batch(backend, 3)
    bad = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(CorruptRecordError) as info:
        segment.append([good, good, b"", bad])
    assert info.value.reason == fmt.REASON_CRC_MISMATCH
    assert info.value.position == 2 * len(good)
    assert segment.size_bytes == 0 and os.path.getsize(segment.log_path) == 0


def test_a_batch_may_not_span_parts(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    good = batch(backend, 3)
    with pytest.raises(CorruptRecordError) as info:
        segment.append([good + good[:30], good[30:]])
    assert info.value.reason == fmt.REASON_TRUNCATED and info.value.position == len(good)
    assert segment.size_bytes == 0


def test_parts_record_too_large_names_the_joined_position(backend, tmp_path):
    segment = _segment(backend, tmp_path, max_message_bytes=500)
    small = batch(backend, 1, value_bytes=100)
    with pytest.raises(RecordTooLargeError, match=f"position {len(small)} "):
        segment.append([small, batch(backend, 10, value_bytes=100)])
    assert segment.size_bytes == 0


def test_parts_reject_non_buffers(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    with pytest.raises(TypeError):
        segment.append([batch(backend, 1), "not bytes"])
    assert segment.size_bytes == 0


def test_twins_write_identical_files_from_parts(native, pure, tmp_path):
    raws = [batch(pure, 1 + n % 5, value_bytes=10 + 11 * n, timestamp_ms=1000 + 3 * (n % 4))
            for n in range(30)]
    # Batches 7-9 already carry the offsets they get: unpatched runs between patched ones.
    offset = 3
    for n in range(30):
        if n in (7, 8, 9):
            raws[n] = with_field(raws[n], fmt.BASE_OFFSET_POSITION, "q", offset)
        offset += 1 + n % 5
    raws[7:9] = [raws[7] + raws[8], b""]
    for backend in (native, pure):
        segment = _segment(backend, tmp_path / backend.name, base=3, index_interval_bytes=150)
        for n in range(0, 30, 6):
            segment.append(raws[n:n + 6])
        segment.close()
    for name in os.listdir(tmp_path / "native"):
        assert (tmp_path / "native" / name).read_bytes() == \
            (tmp_path / "pure" / name).read_bytes(), name


@pytest.mark.parametrize("assign_offsets", [True, False])
def test_partition_leader_epoch_is_stamped_without_touching_the_callers_bytes(
        backend, native, tmp_path, assign_offsets):
    """``append(..., partition_leader_epoch=e)`` writes what appending the batches with
    ``e`` in bytes 12-15 writes (a leader's stamp, outside the CRC), for every batch of every
    part, mixed epochs and already-stamped batches included; the caller's buffers unchanged;
    the twins' files byte-identical."""
    def parts(epochs, base):
        out, offset = [], base
        for n, epoch in enumerate(epochs):
            raw = backend.encode_batch([b"v%d" % i for i in range(1 + n % 3)],
                                       timestamps_ms=100 + n, base_offset=offset,
                                       partition_leader_epoch=epoch)
            out.append(raw)
            offset += 1 + n % 3
        return out

    epochs = [-1, 5, 9, 9, 0]
    given = parts(epochs, 4)
    before = [bytes(p) for p in given]
    stamped = parts([9] * len(epochs), 4)
    expected = _segment(backend, tmp_path / "expected", base=4)
    expected.append(stamped, assign_offsets=assign_offsets)
    for name, be in (("got", backend), ("native", native)):
        segment = _segment(be, tmp_path / name, base=4)
        result = segment.append([given[0] + given[1], bytearray(given[2]),
                                 memoryview(given[3]), given[4]],
                                assign_offsets=assign_offsets, partition_leader_epoch=9)
        assert result.first_offset == 4 and segment.next_offset == 4 + sum(
            1 + n % 3 for n in range(len(epochs)))
        segment.close()
    expected.close()
    assert [bytes(p) for p in given] == before
    for name in os.listdir(tmp_path / "expected"):
        for other in ("got", "native"):
            assert (tmp_path / other / name).read_bytes() == \
                (tmp_path / "expected" / name).read_bytes(), (other, name)
    segment = backend.Segment.open(str(tmp_path / "got"), 4, read_only=True)
    read = list(backend.iter_batches(segment.read(4, 1 << 20)))
    assert [b.partition_leader_epoch for b in read] == [9] * len(epochs)
    assert all(b.is_valid() for b in read)


def test_partition_leader_epoch_argument_is_checked(backend, tmp_path):
    segment = _segment(backend, tmp_path)
    for bad, error in ((2**31, InvalidArgumentError), (-(2**31) - 1, InvalidArgumentError),
                       ("1", InvalidArgumentTypeError), (1.0, InvalidArgumentTypeError)):
        with pytest.raises(error):
            segment.append(batch(backend, 1), partition_leader_epoch=bad)
    assert segment.size_bytes == 0
