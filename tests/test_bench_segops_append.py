"""The bench's appenders (seglog.bench.segops): grouped, synced and two-thread appends write the
same batches as one append per batch (the same sizes, offsets and values; the encoder stamps
the wall clock, so timestamps differ), on both backends, and the two-thread one raises a
writer's error in the caller."""

from __future__ import annotations

import os

import pytest

from seglog.bench import segops
from seglog.bench.data import load_backend, make_values
from seglog.errors import RecordTooLargeError

VALUES = make_values(5_000, 100)


def _batches(be, directory, append) -> list[tuple[int, int, list[tuple[int, bytes]]]]:
    """Each batch of the written .log as (size, base offset, [(offset, value)])."""
    os.makedirs(directory)
    segment = segops.open_segment(be, directory, create=True)
    try:
        append(segment)
        path = segment.log_path
    finally:
        segment.close()
    with open(path, "rb") as f:
        data = f.read()
    out = []
    for batch in be.need("iter_batches")(data):
        out.append((batch.size_bytes, batch.base_offset,
                    [(r.offset, bytes(r.value)) for r in batch.records()]))
    assert sum(size for size, _, _ in out) == len(data)
    return out


@pytest.mark.parametrize("name", ["native", "pure"])
def test_every_appender_writes_the_same_file(name, tmp_path):
    be = load_backend(name)
    values = VALUES if name == "native" else VALUES[:1_500]
    expected = _batches(be, tmp_path / "per-batch", lambda s: segops.append_values(
        be, s, values, 100, None, group_bytes=0))
    variants = {
        "grouped": lambda s: segops.append_values(be, s, values, 100, None, group_bytes=30_000),
        "sync-bytes": lambda s: segops.append_values(be, s, values, 100, None,
                                                     sync_every_bytes=20_000),
        "sync-records": lambda s: segops.append_values(be, s, values, 100, 700),
        "threaded": lambda s: segops.append_values_threaded(be, s, values, 100,
                                                            group_bytes=30_000),
        "threaded-sync": lambda s: segops.append_values_threaded(
            be, s, values, 100, sync_every_bytes=20_000, group_bytes=30_000),
    }
    for variant, append in variants.items():
        assert _batches(be, tmp_path / variant, append) == expected, variant


@pytest.mark.parametrize("name", ["native", "pure"])
def test_threaded_appender_raises_the_writers_error(name, tmp_path):
    be = load_backend(name)
    segment = be.need("Segment").open(str(tmp_path), 0, create=True, max_message_bytes=5_000)
    try:
        with pytest.raises(RecordTooLargeError):
            segops.append_values_threaded(be, segment, VALUES[:2_000], 100, group_bytes=1)
        assert segment.size_bytes == 0 and segment.next_offset == 0
    finally:
        segment.close()
