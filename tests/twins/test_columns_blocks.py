"""Native decode_columns reuses its large column blocks only when nothing references them:
live Columns are never overwritten, and a reused block gives the same columns as a fresh one
(and as the pure twin)."""

from __future__ import annotations

import numpy as np

import seglog


def _stream(backend, records, value=b"x" * 100):
    return b"".join(backend.encode_batch([value] * 1000, base_offset=i, timestamps_ms=i)
                    for i in range(0, records, 1000))


def test_live_columns_are_not_overwritten():
    native = seglog.get_backend("native")
    first = native.decode_columns(_stream(native, 40_000))
    second = native.decode_columns(_stream(native, 40_000, value=b"y" * 90))
    assert first.offsets.ctypes.data != second.offsets.ctypes.data
    assert (first.offsets == np.arange(40_000)).all()
    assert (first.value_lengths == 100).all() and (second.value_lengths == 90).all()


def test_reused_block_matches_pure():
    native, pure = seglog.get_backend("native"), seglog.get_backend("pure")
    stream = _stream(native, 30_000)
    native.decode_columns(stream)  # leaves a spare block behind
    native.decode_columns(_stream(native, 2_000))  # a small decode in between
    got, want = native.decode_columns(stream), pure.decode_columns(stream)
    for name in ("offsets", "timestamps_ms", "key_positions", "key_lengths",
                 "value_positions", "value_lengths"):
        assert (getattr(got, name) == getattr(want, name)).all(), name
    assert got.value(29_999) == want.value(29_999)
