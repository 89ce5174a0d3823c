"""Differential tests of the native codec against its pure-Python twin.

The twin (``seglog.pure.codec``) is the reference: for the same arguments the native
``encode_batch`` must return the same bytes, and for the same (possibly corrupted) bytes the
native decoders must return equal records and columns or raise the same exception type.
Also: the native format constants equal ``seglog.format``'s, and native CRC-32C (both its
SSE4.2 and its table path) equals the pure one.
"""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from seglog import errors, format
from seglog._native import _crc32c as ncrc
from seglog._native import codec as ncodec
from seglog.pure import codec as pcodec

# seglog.pure's __init__ rebinds the name ``crc32c`` to the function; import the module itself.
pcrc = importlib.import_module("seglog.pure.crc32c")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- constants -----------------------------------------------------------------------------------

def test_native_constants_equal_format():
    names = [
        name for name in dir(format)
        if name.isupper() and isinstance(getattr(format, name), int) and hasattr(ncodec, name)
    ]
    assert len(names) >= 30
    for name in names:
        assert getattr(ncodec, name) == getattr(format, name), name
    # every constant the native module exposes exists in seglog.format
    for name in ncodec._CONSTANTS:
        assert getattr(format, name) == getattr(ncodec, name), name


# --- CRC-32C -------------------------------------------------------------------------------------

def test_crc32c_known_vectors():
    assert ncrc.crc32c(b"123456789") == 0xE3069283
    assert ncrc.crc32c(b"") == 0
    assert ncrc.crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4
    assert ncrc.crc32c(b"\xff" * 32) == 0x62A8AB43


@SETTINGS
@given(data=st.binary(max_size=5000), split=st.integers(min_value=0, max_value=5000),
       offset=st.integers(min_value=0, max_value=15))
def test_crc32c_native_equals_pure(data, split, offset):
    split = min(split, len(data))
    expected = pcrc.crc32c(data)
    assert ncrc.crc32c(data) == expected
    # unaligned start, other buffer types, continuation
    padded = bytearray(offset) + bytearray(data)
    assert ncrc.crc32c(memoryview(padded)[offset:]) == expected
    assert ncrc.crc32c(data[split:], ncrc.crc32c(data[:split])) == expected
    assert ncrc.crc32c(np.frombuffer(data, dtype=np.uint8)) == expected


def test_crc32c_table_path_equals_hardware_path():
    data = os.urandom(3 * 8192 * 3 + 1000)
    hardware = ncrc.hardware_accelerated()
    try:
        expected = [ncrc.crc32c(data[i:]) for i in range(0, 64, 7)]
        ncrc._set_hardware(False)
        assert not ncrc.hardware_accelerated()
        assert [ncrc.crc32c(data[i:]) for i in range(0, 64, 7)] == expected
        assert ncrc.crc32c(data[:5000]) == pcrc.crc32c(data[:5000])
    finally:
        ncrc._set_hardware(hardware)


def test_crc32c_large_input_releases_gil_and_matches():
    data = os.urandom(1 << 20)
    assert ncrc.crc32c(bytearray(data)) == pcrc.crc32c(data[:1 << 20])


@pytest.mark.parametrize("bad_crc", [-1, 2**32])
def test_crc32c_bad_start_value(bad_crc):
    for module in (ncrc, pcrc):
        with pytest.raises(ValueError):
            module.crc32c(b"x", bad_crc)


def test_crc32c_rejects_non_buffers_and_strided_views():
    for module in (ncrc, pcrc):
        with pytest.raises(TypeError):
            module.crc32c("text")
        with pytest.raises(TypeError):
            module.crc32c(memoryview(bytes(range(10)))[::2])


# --- encode: same bytes ----------------------------------------------------------------------

def _payload(max_size):
    # Sizes around the varint steps (63/64, 8191/8192) matter for the length fields.
    return st.one_of(
        st.none(),
        st.binary(max_size=max_size),
        st.sampled_from([b"", b"x" * 63, b"y" * 64, b"z" * 200]),
    )


header_pairs = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=12))), max_size=3
)


@st.composite
def batches(draw):
    n = draw(st.integers(min_value=1, max_value=40))
    values = draw(st.lists(_payload(300), min_size=n, max_size=n))
    keys = draw(st.one_of(st.none(), st.lists(_payload(20), min_size=n, max_size=n)))
    timestamps = draw(st.one_of(
        st.integers(min_value=-1, max_value=2**63 - 1),
        st.lists(st.one_of(st.integers(min_value=-1, max_value=2**41),
                           st.sampled_from([-1, 0, 2**63 - 1])), min_size=n, max_size=n),
    ))
    headers = draw(st.one_of(st.none(), st.lists(st.one_of(st.none(), header_pairs),
                                                 min_size=n, max_size=n)))
    kwargs = dict(
        base_offset=draw(st.one_of(st.just(0), st.integers(min_value=0, max_value=2**62))),
        compression=draw(st.sampled_from(CODECS)),
        timestamp_type=draw(st.sampled_from([0, 1])),
        producer_id=draw(st.integers(min_value=-1, max_value=2**63 - 1)),
        producer_epoch=draw(st.integers(min_value=-1, max_value=2**15 - 1)),
        base_sequence=draw(st.integers(min_value=-1, max_value=2**31 - 1)),
        is_transactional=draw(st.booleans()),
        partition_leader_epoch=draw(st.integers(min_value=-1, max_value=2**31 - 1)),
        delete_horizon_ms=draw(st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**50))),
    )
    if draw(st.booleans()):
        deltas = sorted(draw(st.sets(st.integers(min_value=0, max_value=2**31 - 2),
                                     min_size=n, max_size=n)))
        kwargs["offset_deltas"] = deltas
        kwargs["base_offset"] = draw(st.integers(min_value=0, max_value=2**40))
    return values, keys, timestamps, headers, kwargs


def _outcome(function, *args, **kwargs):
    try:
        return ("ok", function(*args, **kwargs))
    except errors.SeglogError as exc:
        return ("error", type(exc))
    except (TypeError, ValueError, OverflowError) as exc:
        return ("error", type(exc))


@SETTINGS
@given(batch=batches())
def test_encode_same_bytes_as_pure(batch):
    values, keys, timestamps, headers, kwargs = batch
    expected = _outcome(pcodec.encode_batch, values, keys, timestamps, headers, **kwargs)
    assert _outcome(ncodec.encode_batch, values, keys, timestamps, headers, **kwargs) == expected


@SETTINGS
@given(rows=st.integers(min_value=0, max_value=50), width=st.integers(min_value=0, max_value=300),
       codec=st.sampled_from(CODECS), data=st.data())
def test_encode_numpy_inputs_same_bytes_as_pure(rows, width, codec, data):
    rng = np.random.default_rng(rows * 1000 + width)
    matrix = rng.integers(0, 256, size=(rows, width), dtype=np.uint8)
    stamps = np.arange(rows, dtype=np.int64) * 7 + 1_700_000_000_000
    for form in (matrix, (matrix.tobytes(), np.full(rows, width, dtype=np.int32))):
        expected = _outcome(pcodec.encode_batch, form, None, stamps, compression=codec)
        assert _outcome(ncodec.encode_batch, form, None, stamps, compression=codec) == expected
    # (data, lengths) with nulls and varying lengths
    lengths = np.array(data.draw(st.lists(st.integers(min_value=-1, max_value=300),
                                          min_size=1, max_size=40)), dtype=np.int64)
    blob = os.urandom(int(np.clip(lengths, 0, None).sum()) + data.draw(st.integers(0, 5)))
    keys = (blob, lengths[::-1].copy())
    expected = _outcome(pcodec.encode_batch, (blob, lengths), keys, 5, compression=codec)
    assert _outcome(ncodec.encode_batch, (blob, lengths), keys, 5, compression=codec) == expected


def test_encode_other_bytes_like_values_same_bytes():
    values = [bytearray(b"ab"), memoryview(b"cde"), np.arange(6, dtype=np.int16), b"", None,
              np.frombuffer(b"xyz", dtype=np.uint8)]
    assert ncodec.encode_batch(values, timestamps_ms=1) == pcodec.encode_batch(values,
                                                                                timestamps_ms=1)


BAD_ENCODE_CALLS = [
    ((), {}),  # no values
    (([],), {}),
    ((None,), {}),
    (("abc",), {}),
    ((5,), {}),
    (([b"a", "b"],), {}),
    (([b"a", 3],), {}),
    (([memoryview(bytes(8))[::2]],), {}),
    (([b"a"], [b"k1", b"k2"]), {}),
    (([b"a"], None, [1, 2]), {}),
    (([b"a"], None, -2), {}),
    (([b"a"], None, 2**63), {}),
    (([b"a"], None, 1.5), {}),
    (([b"a"], None, ["x"]), {}),
    (([b"a"], None, np.array([-5])), {}),
    (([b"a", b"b"], None, np.array([1, -2])), {}),
    (([b"a"], None, 0, [[(b"k", b"v")]]), {}),
    (([b"a"], None, 0, [[("k", "v")]]), {}),
    (([b"a"], None, 0, [[("k",)]]), {}),
    (([b"a"], None, 0, "headers"), {}),
    (([b"a"], None, 0, [None, None]), {}),
    (([b"a"], None, 0, [5]), {}),
    (([b"a"], None, 0, [["\ud800"]]), {}),
    (([b"a"], None, 0, [[("\ud800", None)]]), {}),
    ((np.zeros((2, 3), dtype=np.int16),), {}),
    ((np.zeros((2, 3, 1), dtype=np.uint8),), {}),
    ((np.zeros((3, 2), dtype=np.uint8).T,), {}),
    ((np.zeros((0, 3), dtype=np.uint8),), {}),
    (((b"abc", np.array([2, 2])),), {}),
    (((b"abc", np.array([1, -2])),), {}),
    ((("abc", np.array([1])),), {}),
    (([b"a"],), {"compression": "brotli"}),
    (([b"a"],), {"compression": 7}),
    (([b"a"],), {"compression": True}),
    (([b"a"],), {"compression": "gzip", "compression_level": 99}),
    (([b"a"],), {"compression_level": 1}),
    (([b"a"],), {"base_offset": -1}),
    (([b"a", b"b"],), {"base_offset": 2**63 - 1}),
    (([b"a"],), {"base_offset": 1.0}),
    (([b"a"],), {"timestamp_type": 2}),
    (([b"a"],), {"producer_epoch": 2**15}),
    (([b"a"],), {"producer_id": 2**63}),
    (([b"a"],), {"base_sequence": -(2**31) - 1}),
    (([b"a"],), {"partition_leader_epoch": 2**31}),
    (([b"a"],), {"delete_horizon_ms": -2}),
    (([b"a"], None, 2**63 - 1), {"delete_horizon_ms": 0}),
    (([b"a"], None, [2**63 - 1]), {}),
    (([b"a", b"b"], None, [-1, 2**63 - 1]), {}),
    (([b"a", b"b"],), {"offset_deltas": [1, 1]}),
    (([b"a", b"b"],), {"offset_deltas": [0]}),
    (([b"a", b"b"],), {"offset_deltas": np.array([0.0, 1.0])}),
    (([b"a", b"b"],), {"offset_deltas": [0, 2**31]}),
    (([b"a", b"b"],), {"offset_deltas": 5}),
    (([b"a", b"b"],), {"offset_deltas": [0, 3], "last_offset_delta": 2}),
    (([b"a", b"b"],), {"last_offset_delta": 2**31}),
]


@pytest.mark.parametrize("args, kwargs", BAD_ENCODE_CALLS)
def test_encode_errors_match_pure(args, kwargs):
    expected = _outcome(pcodec.encode_batch, *args, **kwargs)
    assert _outcome(ncodec.encode_batch, *args, **kwargs) == expected


@pytest.mark.parametrize("kwargs", [
    dict(control_type=1, producer_id=5, producer_epoch=2, coordinator_epoch=7, base_offset=9,
         timestamp_ms=11),
    dict(control_type=0, producer_id=5, producer_epoch=2, timestamp_ms=0),
    dict(control_type=2, producer_id=5, producer_epoch=2, timestamp_ms=0),
    dict(control_type=1, producer_id=5, producer_epoch=2**15, timestamp_ms=0),
    dict(control_type=1, producer_id=5, producer_epoch=2, coordinator_epoch=2**31,
         timestamp_ms=0),
])
def test_control_batch_same_as_pure(kwargs):
    control_type = kwargs.pop("control_type")
    expected = _outcome(pcodec.encode_control_batch, control_type, **kwargs)
    actual = _outcome(ncodec.encode_control_batch, control_type, **kwargs)
    assert actual == expected
    if expected[0] == "ok":
        assert len(actual[1]) == format.END_TXN_MARKER_BATCH_BYTES
        (batch,) = ncodec.iter_batches(actual[1])
        assert batch.control_type() == control_type and batch.is_valid()


# --- decode: same results for the same (corrupted) bytes -------------------------------------

BATCH_FIELDS = (
    "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp_ms", "max_timestamp_ms", "producer_id",
    "producer_epoch", "base_sequence", "record_count", "last_offset", "next_offset",
    "size_bytes", "position", "compression", "compression_id", "timestamp_type",
    "is_transactional", "is_control", "has_delete_horizon", "delete_horizon_ms",
    "last_sequence",
)


def _columns_tuple(columns):
    return (
        len(columns),
        columns.offsets.tolist(), columns.timestamps_ms.tolist(),
        columns.key_positions.tolist(), columns.key_lengths.tolist(),
        columns.value_positions.tolist(), columns.value_lengths.tolist(),
        bytes(columns.data),
        str(columns.offsets.dtype), str(columns.key_lengths.dtype),
        [columns.value(i) for i in range(len(columns))],
        [columns.key(i) for i in range(len(columns))],
    )


def _decode_everything(codec, data, max_records=None):
    """Everything the decoders produce for ``data``, as plain values; an exception ends it
    and is recorded by type (the rest is not compared)."""
    out = []
    try:
        for batch in codec.iter_batches(data, max_batch_bytes=1 << 20):
            out.append(tuple(getattr(batch, name) for name in BATCH_FIELDS))
            out.append(batch.is_valid())
            out.append(repr(batch))
            try:
                out.append([tuple(record) for record in batch.records()])
            except errors.SeglogError as exc:
                out.append(("records error", type(exc)))
            try:
                out.append(_columns_tuple(batch.columns()))
            except errors.SeglogError as exc:
                out.append(("columns error", type(exc)))
            if batch.is_control:
                try:
                    out.append(batch.control_type())
                except errors.SeglogError as exc:
                    out.append(("control error", type(exc)))
    except errors.SeglogError as exc:
        out.append(("iter error", type(exc), getattr(exc, "reason", None),
                    getattr(exc, "position", None)))
    try:
        out.append(_columns_tuple(codec.decode_columns(data, max_records=max_records)))
    except errors.SeglogError as exc:
        out.append(("decode_columns error", type(exc)))
    return out


@st.composite
def stream_and_mutation(draw):
    parts = []
    for index in range(draw(st.integers(min_value=1, max_value=3))):
        n = draw(st.integers(min_value=1, max_value=6))
        values = draw(st.lists(_payload(80), min_size=n, max_size=n))
        keys = draw(st.one_of(st.none(), st.lists(_payload(8), min_size=n, max_size=n)))
        headers = draw(st.one_of(st.none(), st.lists(header_pairs, min_size=n, max_size=n)))
        stamps = draw(st.lists(st.integers(min_value=-1, max_value=2**40), min_size=n,
                               max_size=n))
        if draw(st.integers(0, 5)) == 0:
            parts.append(pcodec.encode_control_batch(draw(st.sampled_from([0, 1])),
                                                     producer_id=3, producer_epoch=1,
                                                     base_offset=index * 10, timestamp_ms=5))
            continue
        parts.append(pcodec.encode_batch(
            values, keys, stamps, headers, base_offset=index * 10,
            compression=draw(st.sampled_from(CODECS)),
            timestamp_type=draw(st.sampled_from([0, 1])),
            delete_horizon_ms=draw(st.sampled_from([-1, 1000])),
        ))
    data = bytearray(b"".join(parts))
    mutations = draw(st.lists(
        st.tuples(st.sampled_from(["set", "xor", "cut", "insert", "delete"]),
                  st.integers(min_value=0, max_value=len(data) - 1),
                  st.integers(min_value=0, max_value=255)),
        max_size=4,
    ))
    for kind, position, byte in mutations:
        position = min(position, len(data) - 1) if data else 0
        if not data:
            break
        if kind == "set":
            data[position] = byte
        elif kind == "xor":
            data[position] ^= 1 << (byte % 8)
        elif kind == "cut":
            del data[position:]
        elif kind == "insert":
            data[position:position] = bytes([byte])
        else:
            del data[position]
    max_records = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=12)))
    return bytes(data), max_records


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=stream_and_mutation())
def test_decode_mutated_bytes_same_as_pure(case):
    data, max_records = case
    assert _decode_everything(ncodec, data, max_records) == _decode_everything(
        pcodec, data, max_records)


@SETTINGS
@given(data=st.binary(max_size=200))
def test_decode_random_bytes_same_as_pure(data):
    # A valid-looking frame around random record bytes reaches the record parser.
    header = bytearray(pcodec.encode_batch([b"x"], timestamps_ms=0)[:61])
    header[8:12] = (49 + len(data)).to_bytes(4, "big")
    header[57:61] = (len(data) // 7 + 1).to_bytes(4, "big")
    framed = bytes(header) + data
    for candidate in (framed, data):
        assert _decode_everything(ncodec, candidate) == _decode_everything(pcodec, candidate)


@pytest.mark.parametrize("position", [-1, 0, 5, 78, 79, 1000])
def test_batch_constructor_same_as_pure(position):
    raw = pcodec.encode_control_batch(1, producer_id=1, producer_epoch=0, timestamp_ms=0)
    for buffer in (raw, raw + raw[:30], raw[:40]):
        native = _outcome(lambda: repr(ncodec.Batch(buffer, position)))
        pure = _outcome(lambda: repr(pcodec.Batch(buffer, position)))
        assert native == pure


def test_records_are_fast_type_with_twin_semantics():
    raw = ncodec.encode_batch([b"v"], [b"k"], 5, [[("h", b"1"), ("g", None)]], base_offset=3)
    (record,) = next(iter(ncodec.iter_batches(raw))).records()
    (twin,) = next(iter(pcodec.iter_batches(raw))).records()
    assert record == twin and twin == record and not (record != twin)
    assert hash(record) == hash(twin)
    assert tuple(record) == (3, 5, b"k", b"v", (("h", b"1"), ("g", None)))
    assert repr(record) == repr(twin)
    assert ncodec.Record(3, 5, b"k", b"v", (("h", b"1"), ("g", None))) == record
    assert record != ncodec.Record(4, 5, b"k", b"v", ())
    assert (record == 5) is False
    import pickle
    assert pickle.loads(pickle.dumps(record)) == record


def test_columns_of_a_large_stream_match_pure():
    values = [os.urandom(i % 300) if i % 11 else None for i in range(2000)]
    keys = [str(i).encode() if i % 3 else None for i in range(2000)]
    stream = b"".join(
        pcodec.encode_batch(values[i:i + 500], keys[i:i + 500], list(range(i, i + 500)),
                            base_offset=i, compression="none" if i % 1000 else "lz4")
        for i in range(0, 2000, 500)
    )
    for max_records in (None, 0, 1, 499, 500, 501, 1999, 5000):
        assert _columns_tuple(ncodec.decode_columns(stream, max_records=max_records)) == \
            _columns_tuple(pcodec.decode_columns(stream, max_records=max_records))
    plain = b"".join(ncodec.encode_batch(values[i:i + 500], base_offset=i, timestamps_ms=9)
                     for i in range(0, 2000, 500))
    columns = ncodec.decode_columns(bytearray(plain))
    assert columns.offsets.tolist() == list(range(2000))
    assert columns.data.readonly and bytes(columns.data) == plain
    assert [columns.value(i) for i in range(2000)] == values


@pytest.mark.parametrize("codec", CODECS)
def test_numpy_and_list_inputs_give_the_same_batch(codec):
    matrix = np.arange(3000, dtype=np.uint32).astype(np.uint8).reshape(100, 30)
    rows = [bytes(row) for row in matrix]
    expected = ncodec.encode_batch(rows, timestamps_ms=7, compression=codec)
    assert ncodec.encode_batch(matrix, timestamps_ms=7, compression=codec) == expected
    assert ncodec.encode_batch((matrix.tobytes(), np.full(100, 30)), timestamps_ms=7,
                               compression=codec) == expected
    assert ncodec.encode_batch(rows, timestamps_ms=np.full(100, 7), compression=codec) == expected


def test_wall_clock_is_read_once_per_batch():
    import time
    before = time.time_ns() // 1_000_000
    raw = ncodec.encode_batch([b"a"] * 1000)
    after = time.time_ns() // 1_000_000
    (batch,) = ncodec.iter_batches(raw)
    stamps = {record.timestamp_ms for record in batch.records()}
    assert len(stamps) == 1 and before <= stamps.pop() <= after
    assert batch.base_timestamp_ms == batch.max_timestamp_ms


def test_batch_keeps_the_buffer_exported():
    data = bytearray(ncodec.encode_batch([b"a"], timestamps_ms=0))
    (batch,) = ncodec.iter_batches(data)
    with pytest.raises(BufferError):
        data.extend(b"x")
    del batch
    data.extend(b"x")


# --- decode_columns on two threads -----------------------------------------------------------------

def _threaded_stream(compress_index=None):
    """16 batches (varied shapes: keys, headers, LogAppendTime, offset gaps) with control
    batches and an empty-value batch between them; ~120 KB."""
    parts, offset = [], 0
    for index in range(16):
        n = 40 + 13 * index
        values = [os.urandom((i * 7 + index) % 300) if (i + index) % 9 else None
                  for i in range(n)]
        keys = [str(i).encode() if i % 3 else None for i in range(n)] if index % 2 else None
        headers = [(("h", b"x"),) if i % 5 == 0 else () for i in range(n)] if index % 4 == 1 \
            else None
        deltas = [2 * i for i in range(n)] if index % 5 == 3 else None
        parts.append(ncodec.encode_batch(
            values, keys, [1000 + i for i in range(n)], headers, base_offset=offset,
            timestamp_type=1 if index % 6 == 2 else 0, offset_deltas=deltas,
            compression="lz4" if index == compress_index else "none"))
        offset += 2 * n
        if index % 3 == 1:
            parts.append(ncodec.encode_control_batch(index % 2, producer_id=7, producer_epoch=0,
                                                     base_offset=offset, timestamp_ms=5))
            offset += 1
    return b"".join(parts)


def _decode_both_ways(monkeypatch, stream, **kwargs):
    """decode_columns with the threaded path forced (threshold just below the stream's size)
    and with it off: each a _columns_tuple or ("error", type, str); plus whether the forced
    call took the threaded path."""
    results = []
    monkeypatch.setattr(ncodec, "_THREADED_CPUS", True)  # also on a 1-CPU runner,
    monkeypatch.setattr(ncodec, "_THREADED_LOAD_MAX", float("inf"))  # and a busy one
    for threshold in (len(stream) - 1, 1 << 62):
        monkeypatch.setattr(ncodec, "_THREADED_BYTES_MIN", threshold)
        before = ncodec._threaded_decode_count()
        try:
            results.append(_columns_tuple(ncodec.decode_columns(stream, **kwargs)))
        except errors.SeglogError as exc:
            results.append(("error", type(exc), str(exc), getattr(exc, "reason", None),
                            getattr(exc, "position", None)))
        results.append(ncodec._threaded_decode_count() > before)
    threaded, took_threaded, single, took_single = results
    assert not took_single
    return threaded, single, took_threaded


def _pure_columns(stream, **kwargs):
    try:
        return _columns_tuple(pcodec.decode_columns(stream, **kwargs))
    except errors.SeglogError as exc:
        return ("error", type(exc), str(exc), getattr(exc, "reason", None),
                getattr(exc, "position", None))


def test_threaded_decode_columns_equals_single_threaded_and_pure(monkeypatch):
    stream = _threaded_stream()
    assert ncodec._THREADED_BYTES_MIN == 4 << 20 and ncodec._THREADED_BATCHES_MIN == 8
    threaded, single, took = _decode_both_ways(monkeypatch, stream)
    assert took
    assert threaded == single == _pure_columns(stream)
    assert threaded[0] == sum(b.record_count for b in ncodec.iter_batches(stream)
                              if not b.is_control)
    # one byte short of the threshold: single-threaded
    monkeypatch.setattr(ncodec, "_THREADED_BYTES_MIN", len(stream) + 1)
    before = ncodec._threaded_decode_count()
    assert _columns_tuple(ncodec.decode_columns(stream)) == single
    assert ncodec._threaded_decode_count() == before
    # a torn tail is invisible either way; a bytearray and a memoryview work as bytes does
    for data in (stream + stream[:100], bytearray(stream), memoryview(stream)):
        threaded, single, took = _decode_both_ways(monkeypatch, data)
        assert took and threaded == single == _pure_columns(bytes(data))


def test_threaded_decode_columns_max_records(monkeypatch):
    stream = _threaded_stream()
    total = _columns_tuple(ncodec.decode_columns(stream))[0]
    for max_records in (0, 1, total // 2, total - 1, total, total + 1, 10 * total):
        threaded, single, took = _decode_both_ways(monkeypatch, stream,
                                                   max_records=max_records)
        assert took == (max_records >= total), max_records
        assert threaded == single == _pure_columns(stream, max_records=max_records)


def test_threaded_decode_columns_falls_back(monkeypatch):
    # a compressed batch, or too few batches: single-threaded, same result
    stream = _threaded_stream(compress_index=12)
    threaded, single, took = _decode_both_ways(monkeypatch, stream)
    assert not took and threaded == single == _pure_columns(stream)
    short = b"".join(ncodec.encode_batch([b"v"] * 100, base_offset=100 * i) for i in range(7))
    threaded, single, took = _decode_both_ways(monkeypatch, short)
    assert not took and threaded == single == _pure_columns(short)
    monkeypatch.setattr(ncodec, "_THREADED_BATCHES_MIN", 2)
    threaded, single, took = _decode_both_ways(monkeypatch, short)
    assert took and threaded == single == _pure_columns(short)


def _batch_positions(stream):
    return [(b.position, b.record_count) for b in ncodec.iter_batches(stream) if not b.is_control]


@pytest.mark.parametrize("where", ["second", "first+second", "last"])
@pytest.mark.parametrize("damage", ["record length", "count+1", "count-1", "negative count",
                                    "huge count", "bad magic", "small batch length"])
def test_threaded_decode_columns_errors_match_single_threaded(monkeypatch, where, damage):
    stream = bytearray(_threaded_stream())
    positions = _batch_positions(stream)
    targets = {"second": [12], "first+second": [2, 12], "last": [len(positions) - 1]}[where]
    for target in targets:
        position, count = positions[target]
        if damage == "record length":
            # the first record's length varint of a batch -> a negative record length
            stream[position + format.RECORD_BATCH_OVERHEAD] = 0x01
        elif damage in ("count+1", "count-1", "negative count", "huge count"):
            new = {"count+1": count + 1, "count-1": count - 1, "negative count": -3,
                   "huge count": 2**31 - 1}[damage]
            stream[position + 57:position + 61] = new.to_bytes(4, "big", signed=True)
        elif damage == "bad magic":
            stream[position + format.MAGIC_POSITION] = 1
        else:
            stream[position + 8:position + 12] = (20).to_bytes(4, "big")
    stream = bytes(stream)
    threaded, single, took = _decode_both_ways(monkeypatch, stream)
    assert not took
    assert threaded == single
    assert threaded[0] == "error"
    pure = _pure_columns(stream)
    assert pure[0] == "error" and pure[1] is threaded[1] and pure[3:] == threaded[3:]


# --- batch_record_at (what seglog._native.segment cimports) --------------------------------

def _cimported_function(module, name, *argtypes):
    """The C function ``name`` that ``module`` exports to cimporting modules (Cython's own
    ``__pyx_capi__`` table, filled from the module's .pxd), callable from ctypes."""
    import ctypes

    entry = module.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    # PYFUNCTYPE keeps the GIL held and turns a NULL return into the exception that was set.
    return ctypes.PYFUNCTYPE(ctypes.py_object, *argtypes)(
        get_pointer(entry, get_name(entry)))


def test_batch_record_at_checks_the_crc_when_asked():
    import ctypes

    raw = bytearray(pcodec.encode_batch([b"a", b"bb", b"ccc"], timestamps_ms=7, base_offset=10))
    buffer = ctypes.create_string_buffer(bytes(raw), len(raw))
    record_at = _cimported_function(
        ncodec, "batch_record_at",
        ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int64, ctypes.c_ssize_t, ctypes.c_int,
        ctypes.c_ssize_t)
    address = ctypes.addressof(buffer)
    assert tuple(record_at(address, len(raw), 11, -1, 1, 1 << 20)) == (11, 7, None, b"bb", ())
    assert tuple(record_at(address, len(raw), 12, -1, 1, 1 << 20)) == (12, 7, None, b"ccc", ())
    assert record_at(address, len(raw), 13, -1, 1, 1 << 20) is None
    buffer[len(raw) - 2] = b"x"  # "ccc" -> "ccx" (before the header count): a CRC mismatch
    with pytest.raises(errors.CorruptRecordError) as info:
        record_at(address, len(raw), 11, -1, 1, 1 << 20)
    assert (info.value.reason, info.value.position) == (format.REASON_CRC_MISMATCH, 0)
    assert record_at(address, len(raw), 12, -1, 0, 1 << 20).value == b"ccx"


def test_threaded_decode_columns_not_on_a_busy_machine(monkeypatch):
    # A load average at or above _THREADED_LOAD_MAX (or one usable CPU) keeps the decode on
    # the calling thread: a worker there would wait for a core. Same columns either way.
    stream = _threaded_stream()
    monkeypatch.setattr(ncodec, "_THREADED_BYTES_MIN", 1)
    want = _columns_tuple(ncodec.decode_columns(stream))
    for cpus, load_max in ((True, -1.0), (False, float("inf"))):
        monkeypatch.setattr(ncodec, "_THREADED_CPUS", cpus)
        monkeypatch.setattr(ncodec, "_THREADED_LOAD_MAX", load_max)
        before = ncodec._threaded_decode_count()
        assert _columns_tuple(ncodec.decode_columns(stream)) == want
        assert ncodec._threaded_decode_count() == before
    monkeypatch.setattr(ncodec, "_THREADED_CPUS", True)
    monkeypatch.setattr(ncodec, "_THREADED_LOAD_MAX", float("inf"))
    before = ncodec._threaded_decode_count()
    assert _columns_tuple(ncodec.decode_columns(stream)) == want
    assert ncodec._threaded_decode_count() == before + 1
