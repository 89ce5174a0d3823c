"""``Batch.record_summary``: the numpy-free pass the produce validation makes over a client
batch's records (count, offsets in order, timestamp range, first null key), equal on both
backends and equal to what the batch's Columns say."""

from __future__ import annotations

import pytest

import seglog

from test_codec import ALL_CODECS, only_batch, raw_batch, record_bytes, simple_body


def _summary_from_columns(batch):
    columns = batch.columns()
    count = len(columns)
    if not count:
        return 0, True, -1, -1, -1
    keyless = [i for i, n in enumerate(columns.key_lengths.tolist()) if n < 0]
    return (count, columns.offsets.tolist() == list(range(batch.base_offset,
                                                        batch.base_offset + count)),
            int(columns.timestamps_ms.min()), int(columns.timestamps_ms.max()),
            keyless[0] if keyless else -1)


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("keys", [None, "all", "some"])
def test_summary_matches_columns(backend, codec, keys):
    values = [b"v%d" % i for i in range(300)]
    key_list = None if keys is None else [
        (None if keys == "some" and i in (7, 8, 200) else b"k%d" % i) for i in range(300)]
    timestamps = [1_000 + (i * 7919) % 5000 for i in range(300)]
    raw = backend.encode_batch(values, keys=key_list, timestamps_ms=timestamps,
                               base_offset=42, compression=codec)
    batch = only_batch(backend, raw)
    summary = batch.record_summary()
    assert summary == _summary_from_columns(batch)
    expected_keyless = {None: 0, "all": -1, "some": 7}[keys]
    assert summary == (300, True, 1_000, max(timestamps), expected_keyless)


def test_summary_sees_offsets_out_of_order(backend):
    area = record_bytes(simple_body(offset_delta=0)) + record_bytes(simple_body(offset_delta=5))
    batch = only_batch(backend, raw_batch(backend, area, 2, last_offset_delta=1))
    count, in_order, *_ = batch.record_summary()
    assert (count, in_order) == (2, False)


def test_summary_raises_for_a_bad_crc(backend):
    area = record_bytes(simple_body())
    batch = only_batch(backend, raw_batch(backend, area, 1, crc=1))
    with pytest.raises(seglog.errors.CorruptRecordError):
        batch.record_summary()
    assert batch.record_summary(check_crcs=False)[0] == 1


def test_summary_is_the_same_on_both_backends():
    native, pure = seglog.get_backend("native"), seglog.get_backend("pure")
    codec = "lz4"
    raw = native.encode_batch([b"x" * 10] * 50, keys=[None] + [b"k"] * 49,
                              timestamps_ms=list(range(50, 0, -1)), compression=codec)
    assert only_batch(native, raw).record_summary() == only_batch(pure, raw).record_summary() \
        == (50, True, 1, 50, 0)
