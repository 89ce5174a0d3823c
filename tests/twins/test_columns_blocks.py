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


def test_blocks_of_a_poll_over_partitions_are_reused():
    # A consumer's poll_columns returns one Columns per partition, and its caller keeps the
    # last poll's while the next poll's are made: 2 x 6 blocks live at once. Once the older
    # six are dropped, the next six decodes reuse their blocks instead of fresh memory.
    import tracemalloc

    native = seglog.get_backend("native")
    streams = [_stream(native, 30_000, value=bytes([65 + p]) * 100) for p in range(6)]
    older = [native.decode_columns(s) for s in streams]
    newer = [native.decode_columns(s) for s in streams]
    block_bytes = older[0].offsets.nbytes * 5  # 4 int64 + 2 int32 columns
    addresses = {c.offsets.ctypes.data for c in older + newer}
    assert len(addresses) == 12  # live columns never share a block
    del older
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        latest = [native.decode_columns(s) for s in streams]
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert grown - before < block_bytes  # no fresh block for any of the six
    for p, columns in enumerate(latest):
        assert (columns.offsets == np.arange(30_000)).all()
        assert columns.value(29_999) == bytes([65 + p]) * 100
    assert all((c.offsets == np.arange(30_000)).all() for c in newer)
