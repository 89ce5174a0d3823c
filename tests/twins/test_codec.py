"""The RecordBatch v2 codec on both backends: a hand-checked batch, round trips for every codec
and input form, header fields, columns, control batches, one test per error path, mutated and
truncated bytes, and a differential check that every backend writes the pure twin's bytes and
reads bad bytes the way it does."""

from __future__ import annotations

import struct
import time
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog
from seglog import format
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    SeglogError,
    UnsupportedCompressionError,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
HYPOTHESIS_SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# Every codec is always built in (their libraries are required dependencies, issue 24).
ALL_CODECS = [pytest.param(name, id=name) for name in CODECS]
AVAILABLE_CODECS = list(CODECS)


def only_batch(backend, raw):
    """The single batch in ``raw``."""
    batches = list(backend.iter_batches(raw))
    assert len(batches) == 1
    return batches[0]


def raw_batch(backend, record_area: bytes, record_count: int, **fields) -> bytes:
    """A v2 batch around a hand-made record area; header fields may be overridden; the CRC is
    correct unless ``crc`` is given."""
    header = dict(
        base_offset=0, batch_length=49 + len(record_area), partition_leader_epoch=-1, magic=2,
        crc=0, attributes=0, last_offset_delta=max(record_count - 1, 0), base_timestamp=0,
        max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        records_count=record_count,
    )
    fix_crc = "crc" not in fields
    header.update(fields)
    batch = bytearray(
        format.BATCH_HEADER.pack(*(header[name] for name, _ in format.BATCH_HEADER_FIELDS))
        + record_area
    )
    if fix_crc:
        struct.pack_into(">I", batch, format.CRC_POSITION, backend.crc32c(batch[21:]))
    return bytes(batch)


def varint(value: int) -> bytes:
    """Zig-zag varint, written here independently of the code under test."""
    unsigned = ((value << 1) ^ (value >> 63)) & (2**64 - 1)
    out = bytearray()
    while unsigned > 0x7F:
        out.append(unsigned & 0x7F | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def record_bytes(body: bytes) -> bytes:
    return varint(len(body)) + body


def simple_body(*, key=None, value=b"v", headers=b"\x00", offset_delta=0) -> bytes:
    """A record body: attributes 0, timestamp delta 0, and the given fields."""
    body = b"\x00" + b"\x00" + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    return body + headers


# --- the hand-checked batch --------------------------------------------------------------------

# Two records at base offset 0. Record 0: null key, value "hello", header ("h1", "v");
# record 1: key "k", value "world", no headers. Timestamps 1600000000000 and ...005 ms.
GOLDEN_BATCH = bytes.fromhex(
    # --- header, 61 bytes ---
    "0000000000000000"  # baseOffset 0
    "0000004f"  # batchLength 79 = 91 - 12
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic 2
    "c3b2a5ae"  # crc: CRC-32C of bytes 21..90 (checked against kafka-python's calc_crc32c)
    "0000"  # attributes: no compression, CreateTime, not transactional, not control
    "00000001"  # lastOffsetDelta 1
    "00000174876e8000"  # baseTimestamp 1600000000000 (the first record's)
    "00000174876e8005"  # maxTimestamp 1600000000005
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # recordsCount 2
    # --- record 0, 17 bytes ---
    "20"  # length varint 16 (zig-zag: 32)
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "01"  # keyLength -1: null key
    "0a" "68656c6c6f"  # valueLength 5, "hello"
    "02"  # headers count 1
    "04" "6831"  # header key length 2, "h1"
    "02" "76"  # header value length 1, "v"
    # --- record 1, 13 bytes ---
    "18"  # length varint 12
    "00"  # attributes
    "0a"  # timestampDelta 5
    "02"  # offsetDelta 1
    "02" "6b"  # keyLength 1, "k"
    "0a" "776f726c64"  # valueLength 5, "world"
    "00"  # headers count 0
)
GOLDEN_RECORDS = [
    (0, 1600000000000, None, b"hello", (("h1", b"v"),)),
    (1, 1600000000005, b"k", b"world", ()),
]


def encode_golden(backend, **kwargs):
    return backend.encode_batch(
        [b"hello", b"world"],
        keys=[None, b"k"],
        timestamps_ms=[1600000000000, 1600000000005],
        headers=[[("h1", b"v")], []],
        **kwargs,
    )


def test_golden_batch_encodes_byte_for_byte(backend):
    assert len(GOLDEN_BATCH) == 91
    assert encode_golden(backend) == GOLDEN_BATCH


def test_golden_batch_crc_covers_attributes_to_end(backend):
    assert backend.crc32c(GOLDEN_BATCH[21:]) == 0xC3B2A5AE


def test_golden_batch_decodes(backend):
    batch = only_batch(backend, GOLDEN_BATCH)
    assert (batch.base_offset, batch.batch_length, batch.partition_leader_epoch) == (0, 79, -1)
    assert (batch.magic, batch.crc, batch.attributes) == (2, 0xC3B2A5AE, 0)
    assert (batch.last_offset_delta, batch.last_offset, batch.next_offset) == (1, 1, 2)
    assert (batch.base_timestamp_ms, batch.max_timestamp_ms) == (1600000000000, 1600000000005)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert (batch.record_count, batch.size_bytes, batch.position) == (2, 91, 0)
    assert (batch.compression, batch.compression_id, batch.timestamp_type) == ("none", 0, 0)
    assert not (batch.is_transactional or batch.is_control or batch.has_delete_horizon)
    assert (batch.delete_horizon_ms, batch.last_sequence) == (-1, -1)
    assert batch.is_valid()
    batch.ensure_valid()
    assert [tuple(r) for r in batch.records()] == GOLDEN_RECORDS


# --- round trips -------------------------------------------------------------------------------

MIXED_VALUES = [b"v0", None, b"", b"value three" * 20, bytes(range(256))]
MIXED_KEYS = [b"k0", b"k1", None, b"", None]
MIXED_HEADERS = [[("a", b"1"), ("b", None)], [], None, [("", b"")], [("ünï", b"x" * 300)]]
MIXED_TIMESTAMPS = [1_700_000_000_000, 1_700_000_000_500, 1_699_999_999_000, 0, -1]


def expected_records(base_offset, timestamps, keys, values, headers):
    return [
        (base_offset + i, timestamps[i], keys[i], values[i],
         tuple(tuple(h) for h in headers[i] or ()))
        for i in range(len(values))
    ]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_with_headers_and_nulls(backend, codec):
    raw = backend.encode_batch(
        MIXED_VALUES, keys=MIXED_KEYS, timestamps_ms=MIXED_TIMESTAMPS, headers=MIXED_HEADERS,
        base_offset=1000, compression=codec,
    )
    batch = only_batch(backend, raw)
    assert batch.compression == codec
    assert batch.compression_id == format.COMPRESSION_IDS[codec]
    assert batch.is_valid()
    assert batch.base_timestamp_ms == MIXED_TIMESTAMPS[0]
    assert batch.max_timestamp_ms == max(MIXED_TIMESTAMPS)
    assert batch.record_count == 5 and batch.last_offset == 1004
    assert [tuple(r) for r in batch.records()] == expected_records(
        1000, MIXED_TIMESTAMPS, MIXED_KEYS, MIXED_VALUES, MIXED_HEADERS
    )
    columns = batch.columns()
    assert len(columns) == 5
    assert columns.offsets.tolist() == list(range(1000, 1005))
    assert columns.timestamps_ms.tolist() == MIXED_TIMESTAMPS
    assert [columns.key(i) for i in range(5)] == MIXED_KEYS
    assert [columns.value(i) for i in range(5)] == MIXED_VALUES


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_encoding_is_deterministic(backend, codec):
    def encode():
        return backend.encode_batch(MIXED_VALUES, keys=MIXED_KEYS, timestamps_ms=5,
                                    compression=codec)

    assert encode() == encode()


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_numpy_2d_values(backend, codec):
    values = np.arange(5 * 16, dtype=np.uint8).reshape(5, 16)
    raw = backend.encode_batch(values, timestamps_ms=np.arange(5, dtype=np.int64),
                               compression=codec)
    records = only_batch(backend, raw).records()
    assert [r.value for r in records] == [row.tobytes() for row in values]
    assert [r.key for r in records] == [None] * 5
    assert [r.timestamp_ms for r in records] == [0, 1, 2, 3, 4]
    # The same bytes as the list form.
    assert raw == backend.encode_batch(
        [row.tobytes() for row in values], timestamps_ms=[0, 1, 2, 3, 4], compression=codec
    )


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_data_and_lengths_columns(backend, codec, dtype):
    values = [b"abc", None, b"", b"defgh"]
    keys = [None, b"k1", b"key2", None]
    value_data = b"".join(v for v in values if v)
    key_data = bytearray(b"".join(k for k in keys if k))
    value_lengths = np.array([-1 if v is None else len(v) for v in values], dtype=dtype)
    key_lengths = np.array([-1 if k is None else len(k) for k in keys], dtype=dtype)
    raw = backend.encode_batch(
        (value_data, value_lengths), keys=(key_data, key_lengths), timestamps_ms=7,
        compression=codec,
    )
    assert raw == backend.encode_batch(values, keys=keys, timestamps_ms=7, compression=codec)
    records = only_batch(backend, raw).records()
    assert [(r.key, r.value) for r in records] == list(zip(keys, values))


def test_data_and_lengths_may_leave_data_unused(backend):
    raw = backend.encode_batch((b"abcdef-unused", np.array([3, 3])), timestamps_ms=0)
    assert [r.value for r in only_batch(backend, raw).records()] == [b"abc", b"def"]


def test_bytes_like_inputs(backend):
    values = [bytearray(b"ba"), memoryview(b"mv"), np.frombuffer(b"np", dtype=np.uint8), b"by"]
    raw = backend.encode_batch(values, keys=[memoryview(b"xkx")[1:2], None, None, None],
                               timestamps_ms=0)
    records = only_batch(backend, raw).records()
    assert [r.value for r in records] == [b"ba", b"mv", b"np", b"by"]
    assert records[0].key == b"k"
    assert all(type(r.value) is bytes for r in records)


def test_wall_clock_is_read_once_per_batch(backend):
    before_ms = time.time_ns() // 1_000_000
    raw = backend.encode_batch([b"a"] * 50)
    after_ms = time.time_ns() // 1_000_000
    batch = only_batch(backend, raw)
    stamps = {r.timestamp_ms for r in batch.records()}
    assert len(stamps) == 1
    (stamp,) = stamps
    assert before_ms <= stamp <= after_ms
    assert batch.base_timestamp_ms == batch.max_timestamp_ms == stamp


def test_one_timestamp_for_every_record(backend):
    batch = only_batch(backend, backend.encode_batch([b"a", b"b"], timestamps_ms=42))
    assert [r.timestamp_ms for r in batch.records()] == [42, 42]


@HYPOTHESIS_SETTINGS
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=20)),
            st.one_of(st.none(), st.binary(max_size=60)),
            st.integers(-1, 2**45),
            st.lists(
                st.tuples(
                    st.text(st.characters(codec="utf-8"), max_size=6),
                    st.one_of(st.none(), st.binary(max_size=8)),
                ),
                max_size=3,
            ),
        ),
        min_size=1,
        max_size=12,
    ),
    codec=st.sampled_from(AVAILABLE_CODECS),
    base_offset=st.integers(0, 2**50),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1),
                       st.integers(-1, 2**31 - 1)),
)
def test_round_trip_property(backend, rows, codec, base_offset, producer):
    keys, values, stamps, headers = (list(column) for column in zip(*rows))
    producer_id, producer_epoch, base_sequence = producer
    raw = backend.encode_batch(
        values, keys=keys, timestamps_ms=stamps, headers=headers, base_offset=base_offset,
        compression=codec, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    batch = only_batch(backend, raw)
    assert batch.is_valid()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.max_timestamp_ms == max(stamps)
    assert [tuple(r) for r in batch.records()] == expected_records(
        base_offset, stamps, keys, values, headers
    )
    columns = backend.decode_columns(raw)
    assert [columns.value(i) for i in range(len(columns))] == values
    assert [columns.key(i) for i in range(len(columns))] == keys
    # Every backend writes the pure twin's bytes.
    assert raw == seglog.get_backend("pure").encode_batch(
        values, keys=keys, timestamps_ms=stamps, headers=headers, base_offset=base_offset,
        compression=codec, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


# --- header fields -----------------------------------------------------------------------------


def test_producer_fields_and_sequence_wrap(backend):
    raw = backend.encode_batch(
        [b"a", b"b", b"c"], timestamps_ms=0, producer_id=77, producer_epoch=3,
        base_sequence=2**31 - 2, is_transactional=True, partition_leader_epoch=9, base_offset=5,
    )
    batch = only_batch(backend, raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 2**31 - 2)
    assert batch.last_sequence == 0  # Kafka's incrementSequence wraps past INT32_MAX to 0
    assert batch.is_transactional and batch.attributes == format.TRANSACTIONAL_FLAG_MASK
    assert batch.partition_leader_epoch == 9
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (5, 7, 8)


def test_log_append_time(backend):
    raw = backend.encode_batch([b"a", b"b", b"c"], timestamps_ms=[10, 30, 20], timestamp_type=1)
    batch = only_batch(backend, raw)
    assert batch.timestamp_type == 1 and batch.attributes == format.TIMESTAMP_TYPE_MASK
    assert (batch.base_timestamp_ms, batch.max_timestamp_ms) == (10, 30)
    assert [r.timestamp_ms for r in batch.records()] == [30, 30, 30]
    assert batch.columns().timestamps_ms.tolist() == [30, 30, 30]


def test_delete_horizon(backend):
    raw = backend.encode_batch([b"a", None], timestamps_ms=[100, 200], delete_horizon_ms=5000)
    batch = only_batch(backend, raw)
    assert batch.has_delete_horizon and batch.attributes == format.DELETE_HORIZON_FLAG_MASK
    assert batch.base_timestamp_ms == batch.delete_horizon_ms == 5000
    assert batch.max_timestamp_ms == 200
    # The deltas are negative; absolute record timestamps are kept.
    assert [r.timestamp_ms for r in batch.records()] == [100, 200]


def test_offset_deltas_and_last_offset_delta(backend):
    raw = backend.encode_batch([b"a", b"b"], timestamps_ms=0, base_offset=100,
                               offset_deltas=np.array([2, 5]), last_offset_delta=9)
    batch = only_batch(backend, raw)
    assert (batch.last_offset_delta, batch.next_offset) == (9, 110)
    assert [r.offset for r in batch.records()] == [102, 105]


def test_batches_in_a_row(backend):
    raws = [
        backend.encode_batch([b"x"] * n, timestamps_ms=0, base_offset=10 * n) for n in (1, 2, 3)
    ]
    batches = list(backend.iter_batches(b"".join(raws)))
    assert [b.position for b in batches] == [0, len(raws[0]), len(raws[0]) + len(raws[1])]
    assert [b.size_bytes for b in batches] == [len(r) for r in raws]
    assert [(b.base_offset, b.last_offset) for b in batches] == [(10, 10), (20, 21), (30, 32)]


def test_iter_batches_accepts_buffer_types(backend):
    raw = GOLDEN_BATCH * 2
    for buffer in (raw, bytearray(raw), memoryview(raw), np.frombuffer(raw, dtype=np.uint8)):
        batches = list(backend.iter_batches(buffer))
        assert [b.position for b in batches] == [0, 91]
        assert [tuple(r) for r in batches[1].records()] == GOLDEN_RECORDS


def test_crc_does_not_cover_base_offset_or_leader_epoch(backend):
    raw = bytearray(GOLDEN_BATCH)
    struct.pack_into(">q", raw, format.BASE_OFFSET_POSITION, 12345)
    struct.pack_into(">i", raw, format.PARTITION_LEADER_EPOCH_POSITION, 7)
    batch = only_batch(backend, raw)
    assert batch.is_valid()
    assert [r.offset for r in batch.records()] == [12345, 12346]


# --- records -----------------------------------------------------------------------------------


def test_record_equality_iteration_and_repr(backend):
    record = only_batch(backend, GOLDEN_BATCH).records()[1]
    fields = GOLDEN_RECORDS[1]
    assert tuple(record) == fields
    assert (record.offset, record.timestamp_ms, record.key, record.value, record.headers) == fields
    names = ("offset", "timestamp_ms", "key", "value", "headers")
    assert record == SimpleNamespace(**dict(zip(names, fields)))
    assert record != SimpleNamespace(**dict(zip(names, (2,) + fields[1:])))
    assert record != fields  # a plain tuple has no attributes
    assert record == only_batch(backend, GOLDEN_BATCH).records()[1]
    assert hash(record) == hash(only_batch(backend, GOLDEN_BATCH).records()[1])
    assert "world" in repr(record)


# --- columns -----------------------------------------------------------------------------------


def test_columns_of_uncompressed_batches_point_into_the_buffer(backend):
    raw = GOLDEN_BATCH + backend.encode_batch([b"third"], keys=[b"k3"], timestamps_ms=9,
                                              base_offset=2)
    columns = backend.decode_columns(raw)
    assert len(columns) == 3
    assert columns.offsets.dtype == np.int64 and columns.timestamps_ms.dtype == np.int64
    assert columns.key_positions.dtype == np.int64 and columns.value_positions.dtype == np.int64
    assert columns.key_lengths.dtype == np.int32 and columns.value_lengths.dtype == np.int32
    assert columns.offsets.tolist() == [0, 1, 2]
    assert columns.timestamps_ms.tolist() == [1600000000000, 1600000000005, 9]
    data = memoryview(columns.data)
    assert data.readonly and bytes(data) == raw  # zero-copy: the input buffer itself
    # Positions are absolute in the buffer; nulls are (-1, -1).
    assert columns.key_lengths.tolist() == [-1, 1, 2]
    assert columns.key_positions[0] == -1
    assert columns.value_positions.tolist()[:2] == [67, 85]
    for i, value in enumerate([b"hello", b"world", b"third"]):
        position, length = int(columns.value_positions[i]), int(columns.value_lengths[i])
        assert raw[position : position + length] == value
        assert columns.value(i) == value
    assert columns.key(-1) == b"k3"
    with pytest.raises(IndexError):
        columns.value(3)


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c.values[0] != "none"])
def test_columns_with_a_compressed_batch_use_the_record_areas(backend, codec):
    compressed = backend.encode_batch([b"c0", None, b"c2"], keys=[b"x", b"y", None],
                                      timestamps_ms=3, base_offset=2, compression=codec)
    raw = GOLDEN_BATCH + compressed
    columns = backend.decode_columns(raw)
    assert isinstance(columns.data, bytes)
    # The uncompressed batch's record area (30 bytes) comes first, then the decompressed one.
    assert columns.data[:30] == GOLDEN_BATCH[61:]
    assert columns.value_positions.tolist()[:2] == [67 - 61, 85 - 61]
    assert [columns.value(i) for i in range(5)] == [b"hello", b"world", b"c0", None, b"c2"]
    assert [columns.key(i) for i in range(5)] == [None, b"k", b"x", b"y", None]
    assert columns.offsets.tolist() == [0, 1, 2, 3, 4]


def test_columns_max_records_cuts_after_whole_batches(backend):
    raw = b"".join(
        backend.encode_batch([b"%d" % (i + 4 * b) for i in range(4)], timestamps_ms=0,
                             base_offset=4 * b)
        for b in range(3)
    )
    assert backend.decode_columns(raw, max_records=6).offsets.tolist() == list(range(6))
    assert len(backend.decode_columns(raw, max_records=0)) == 0
    assert len(backend.decode_columns(raw, max_records=100)) == 12
    assert len(backend.decode_columns(raw)) == 12
    assert len(backend.decode_columns(b"")) == 0


def test_columns_skip_control_batches(backend):
    marker = backend.encode_control_batch(1, producer_id=5, producer_epoch=0, base_offset=2,
                                          timestamp_ms=0)
    tail = backend.encode_batch([b"after"], timestamps_ms=0, base_offset=3)
    columns = backend.decode_columns(GOLDEN_BATCH + marker + tail)
    assert columns.offsets.tolist() == [0, 1, 3]
    assert columns.value(2) == b"after"


# --- control batches ---------------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [0, 1])
def test_control_batch(backend, control_type):
    raw = backend.encode_control_batch(
        control_type, producer_id=4242, producer_epoch=7, coordinator_epoch=11, base_offset=50,
        timestamp_ms=1234, partition_leader_epoch=3,
    )
    assert len(raw) == format.END_TXN_MARKER_BATCH_BYTES == 78
    batch = only_batch(backend, raw)
    assert batch.is_control and batch.is_transactional
    assert batch.attributes == format.CONTROL_FLAG_MASK | format.TRANSACTIONAL_FLAG_MASK
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, -1)
    assert (batch.base_offset, batch.record_count, batch.batch_length) == (50, 1, 66)
    assert (batch.partition_leader_epoch, batch.compression) == (3, "none")
    assert batch.control_type() == control_type
    (record,) = batch.records()
    assert (record.offset, record.timestamp_ms, record.headers) == (50, 1234, ())
    assert format.CONTROL_KEY.unpack(record.key) == (0, control_type)
    assert format.END_TXN_MARKER_VALUE.unpack(record.value) == (0, 11)
    assert batch.is_valid()


def test_control_batch_rejects_other_types(backend):
    with pytest.raises(InvalidRecordError):
        backend.encode_control_batch(2, producer_id=1, producer_epoch=0)


def test_control_type_of_a_data_batch(backend):
    with pytest.raises(InvalidRecordError):
        only_batch(backend, GOLDEN_BATCH).control_type()


def test_control_type_with_a_short_key(backend):
    area = record_bytes(simple_body(key=b"\x00\x00\x01", value=b""))
    raw = raw_batch(backend, area, 1, attributes=format.CONTROL_FLAG_MASK)
    with pytest.raises(InvalidRecordError):
        only_batch(backend, raw).control_type()


# --- errors: batch framing (CorruptRecordError with a fixed reason) ----------------------------


def test_bad_magic(backend):
    raw = bytearray(GOLDEN_BATCH)
    raw[format.MAGIC_POSITION] = 1
    with pytest.raises(CorruptRecordError) as info:
        list(backend.iter_batches(GOLDEN_BATCH + raw))
    assert info.value.reason == format.REASON_BAD_MAGIC
    assert info.value.position == 91


@pytest.mark.parametrize("batch_length", [-1, 0, 13])
def test_batch_length_below_kafka_minimum(backend, batch_length):
    raw = bytearray(GOLDEN_BATCH)
    struct.pack_into(">i", raw, format.BATCH_LENGTH_POSITION, batch_length)
    with pytest.raises(CorruptRecordError) as info:
        list(backend.iter_batches(raw))
    assert info.value.reason == format.REASON_BATCH_TOO_SMALL
    assert info.value.position == 0


@pytest.mark.parametrize("batch_length", [14, 48])
def test_batch_length_shorter_than_a_v2_header(backend, batch_length):
    raw = bytearray(GOLDEN_BATCH)
    struct.pack_into(">i", raw, format.BATCH_LENGTH_POSITION, batch_length)
    with pytest.raises(CorruptRecordError) as info:
        list(backend.iter_batches(raw))
    assert info.value.reason == format.REASON_BATCH_TOO_SMALL


def test_batch_length_above_maximum(backend):
    assert len(list(backend.iter_batches(GOLDEN_BATCH, max_batch_bytes=79))) == 1
    with pytest.raises(CorruptRecordError) as info:
        list(backend.iter_batches(GOLDEN_BATCH, max_batch_bytes=78))
    assert info.value.reason == format.REASON_BATCH_TOO_LARGE


def test_crc_mismatch(backend):
    raw = bytearray(GOLDEN_BATCH)
    raw[-1] ^= 0x01
    batch = only_batch(backend, raw)  # the iterator does not check CRCs
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError) as info:
        batch.ensure_valid()
    assert info.value.reason == format.REASON_CRC_MISMATCH
    assert info.value.position == 0


def test_truncated_tail_stops_iteration_silently(backend):
    raw = GOLDEN_BATCH + GOLDEN_BATCH
    for cut in range(len(raw) + 1):
        expected = cut // len(GOLDEN_BATCH)
        assert len(list(backend.iter_batches(raw[:cut]))) == expected, cut
        assert len(backend.decode_columns(raw[:cut])) == 2 * expected


# --- errors: records (InvalidRecordError, Kafka's DefaultRecord.readFrom checks) ---------------


def decode_area(backend, area: bytes, record_count: int, **fields):
    return only_batch(backend, raw_batch(backend, area, record_count, **fields)).records()


def test_valid_hand_made_records(backend):
    area = record_bytes(simple_body(key=b"k")) + record_bytes(simple_body(offset_delta=1))
    assert [(r.offset, r.key, r.value) for r in decode_area(backend, area, 2)] == [
        (0, b"k", b"v"), (1, None, b"v")
    ]


def test_bad_varint(backend):
    body = b"\x00\x00" + b"\xff" * 5 + b"\x01" + b"\x01\x02v\x00"
    with pytest.raises(InvalidRecordError):
        decode_area(backend, record_bytes(body), 1)


def test_negative_header_count(backend):
    with pytest.raises(InvalidRecordError):
        decode_area(backend, record_bytes(simple_body(headers=varint(-1))), 1)


def test_header_count_above_remaining_bytes(backend):
    with pytest.raises(InvalidRecordError):
        decode_area(backend, record_bytes(simple_body(headers=varint(5) + b"\x02a\x00")), 1)


def test_null_header_key(backend):
    headers = varint(1) + varint(-1) + varint(1) + b"x"
    with pytest.raises(InvalidRecordError):
        decode_area(backend, record_bytes(simple_body(headers=headers)), 1)


def test_record_shorter_than_declared(backend):
    body = simple_body() + b"\x00"  # one byte the fields do not account for
    with pytest.raises(InvalidRecordError):
        decode_area(backend, record_bytes(body), 1)


def test_record_longer_than_declared(backend):
    body = simple_body(value=b"value")
    area = varint(len(body) - 2) + body
    with pytest.raises(InvalidRecordError):
        decode_area(backend, area, 1)


def test_record_size_past_the_area(backend):
    body = simple_body()
    with pytest.raises(InvalidRecordError):
        decode_area(backend, varint(len(body) + 10) + body, 1)


def test_leftover_bytes_after_the_declared_records(backend):
    area = record_bytes(simple_body()) + record_bytes(simple_body(offset_delta=1))
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        decode_area(backend, area, 1)


def test_premature_end_of_records(backend):
    area = record_bytes(simple_body()) + record_bytes(simple_body(offset_delta=1))
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        decode_area(backend, area, 3)


def test_negative_record_count(backend):
    with pytest.raises(InvalidRecordError):
        decode_area(backend, record_bytes(simple_body()), -1)


def test_huge_record_count_is_bounded_by_the_bytes(backend):
    with pytest.raises(InvalidRecordError):
        decode_area(backend, record_bytes(simple_body()), 2**31 - 1)


def test_empty_batch_has_no_records(backend):
    # Kafka's cleaner writes 61-byte empty batches that keep their compression bits.
    raw = raw_batch(backend, b"", 0, attributes=format.COMPRESSION_GZIP)
    batch = only_batch(backend, raw)
    assert batch.records() == [] and len(batch.columns()) == 0
    assert len(backend.decode_columns(raw)) == 0


def test_unknown_compression_id_in_a_batch(backend):
    raw = raw_batch(backend, record_bytes(simple_body()), 1, attributes=5)
    batch = only_batch(backend, raw)
    assert batch.compression_id == 5
    with pytest.raises(UnsupportedCompressionError):
        batch.records()


def test_corrupt_compressed_stream(backend):
    raw = raw_batch(backend, b"not a gzip stream", 1, attributes=format.COMPRESSION_GZIP)
    with pytest.raises(CorruptRecordError):
        only_batch(backend, raw).records()


# --- errors: encoding --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, message",
    [
        ([b"a", b"b", b"c", 3], "value of record 3 is int"),
        ([b"a", "text"], "value of record 1 is str"),
        ([1.5], "value of record 0 is float"),
    ],
)
def test_values_that_are_not_bytes_like(backend, values, message):
    with pytest.raises(InvalidRecordError, match=message):
        backend.encode_batch(values, timestamps_ms=0)


def test_keys_that_are_not_bytes_like(backend):
    with pytest.raises(InvalidRecordError, match="key of record 1 is str"):
        backend.encode_batch([b"a", b"b"], keys=[b"k", "k"], timestamps_ms=0)


@pytest.mark.parametrize("values", ["text", 5])
def test_values_that_are_not_a_column(backend, values):
    with pytest.raises(InvalidRecordError):
        backend.encode_batch(values, timestamps_ms=0)


def test_non_contiguous_value(backend):
    with pytest.raises(InvalidRecordError):
        backend.encode_batch([np.arange(10, dtype=np.uint8)[::2]], timestamps_ms=0)


def test_empty_batch_is_refused(backend):
    with pytest.raises(InvalidRecordError):
        backend.encode_batch([], timestamps_ms=0)
    with pytest.raises(InvalidRecordError):
        backend.encode_batch(np.zeros((0, 4), dtype=np.uint8), timestamps_ms=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(keys=[b"k"]),
        dict(timestamps_ms=[1, 2, 3]),
        dict(headers=[[]]),
    ],
    ids=["keys", "timestamps", "headers"],
)
def test_column_length_mismatch(backend, kwargs):
    kwargs.setdefault("timestamps_ms", 0)
    with pytest.raises(InvalidRecordError):
        backend.encode_batch([b"a", b"b"], **kwargs)


@pytest.mark.parametrize(
    "headers",
    [
        [[(b"bytes-key", b"v")]],
        [[(None, b"v")]],
        [[("k", "str-value")]],
        [[("k",)]],
        [[("\ud800", b"v")]],  # a lone surrogate cannot be UTF-8
    ],
    ids=["bytes-key", "null-key", "str-value", "not-a-pair", "surrogate"],
)
def test_bad_headers(backend, headers):
    with pytest.raises(InvalidRecordError):
        backend.encode_batch([b"a"], timestamps_ms=0, headers=headers)


@pytest.mark.parametrize(
    "column",
    [
        np.zeros((2, 3), dtype=np.int32),
        np.zeros((3, 2), dtype=np.uint8).T,
        np.zeros((2, 2, 2), dtype=np.uint8),
        (b"abc", np.array([2, 2])),
        (b"abc", np.array([1, -2])),
    ],
    ids=["int32", "fortran", "3-d", "lengths-past-data", "length-below-minus-1"],
)
def test_bad_numpy_columns(backend, column):
    with pytest.raises(InvalidRecordError):
        backend.encode_batch(column, timestamps_ms=0)


@pytest.mark.parametrize("timestamps", [[-2], ["soon"], [1.5], [2**63]])
def test_bad_timestamps(backend, timestamps):
    with pytest.raises(InvalidTimestampError):
        backend.encode_batch([b"a"], timestamps_ms=timestamps)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(base_offset=-1),
        dict(producer_epoch=2**15),
        dict(base_sequence=2**31),
        dict(partition_leader_epoch=-(2**31) - 1),
        dict(timestamp_type=2),
        dict(offset_deltas=[1, 1]),
        dict(offset_deltas=[0, 1], last_offset_delta=0),
    ],
)
def test_header_fields_out_of_range(backend, kwargs):
    with pytest.raises(InvalidRecordError):
        backend.encode_batch([b"a", b"b"], timestamps_ms=0, **kwargs)


@pytest.mark.parametrize("codec", ["brotli", 7, "NONE-ish"])
def test_unknown_compression(backend, codec):
    with pytest.raises(UnsupportedCompressionError):
        backend.encode_batch([b"a"], timestamps_ms=0, compression=codec)


def test_compression_level_out_of_range(backend):
    with pytest.raises(ValueError):
        backend.encode_batch([b"a"], timestamps_ms=0, compression="gzip", compression_level=10)


# --- mutated bytes: never anything but a SeglogError, and the same outcome as the twin --------


def outcome(backend, data) -> list:
    """Everything a reader can learn from ``data``, with SeglogErrors as (type, reason)."""

    def error(exc):
        return ("error", type(exc).__name__, getattr(exc, "reason", None))

    def columns_key(columns):
        return (
            columns.offsets.tolist(), columns.timestamps_ms.tolist(),
            columns.key_positions.tolist(), columns.key_lengths.tolist(),
            columns.value_positions.tolist(), columns.value_lengths.tolist(),
            [columns.key(i) for i in range(len(columns))],
            [columns.value(i) for i in range(len(columns))],
        )

    result = []
    try:
        for batch in backend.iter_batches(data):
            entry = [
                batch.base_offset, batch.batch_length, batch.partition_leader_epoch, batch.magic,
                batch.crc, batch.attributes, batch.last_offset_delta, batch.base_timestamp_ms,
                batch.max_timestamp_ms, batch.producer_id, batch.producer_epoch,
                batch.base_sequence, batch.record_count, batch.position, batch.size_bytes,
                batch.compression, batch.compression_id, batch.timestamp_type, batch.is_control,
                batch.is_transactional, batch.delete_horizon_ms, batch.last_sequence,
                batch.is_valid(),
            ]
            for step in (
                lambda: [tuple(r) for r in batch.records()],
                lambda: columns_key(batch.columns()),
                lambda: batch.control_type() if batch.is_control else None,
            ):
                try:
                    entry.append(step())
                except SeglogError as exc:
                    entry.append(error(exc))
            result.append(entry)
    except SeglogError as exc:
        result.append(error(exc))
    try:
        result.append(columns_key(backend.decode_columns(data)))
    except SeglogError as exc:
        result.append(error(exc))
    return result


MUTATION_SOURCES = {
    "golden": GOLDEN_BATCH,
    "gzip": seglog.get_backend("pure").encode_batch(
        [b"aaaa", None], keys=[None, b"kk"], timestamps_ms=[5, 3], headers=[[("h", None)], []],
        compression="gzip",
    ),
    "control": seglog.get_backend("pure").encode_control_batch(
        0, producer_id=1, producer_epoch=2, timestamp_ms=9
    ),
}


@pytest.mark.parametrize("source", list(MUTATION_SOURCES))
def test_mutated_bytes(backend, source):
    pure = seglog.get_backend("pure")
    original = MUTATION_SOURCES[source]
    for position in range(len(original)):
        for flip in (0x01, 0x80, 0xFF):
            data = bytearray(original)
            data[position] ^= flip
            data = bytes(data)
            got = outcome(backend, data)  # any non-Seglog exception fails the test here
            assert got == outcome(pure, data), (position, flip)


def test_truncated_bytes(backend):
    pure = seglog.get_backend("pure")
    raw = MUTATION_SOURCES["gzip"] + GOLDEN_BATCH
    for cut in range(len(raw)):
        data = raw[:cut]
        assert outcome(backend, data) == outcome(pure, data), cut


# --- differential: the same bytes as the pure twin ---------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_same_bytes_as_the_pure_twin(backend, codec):
    pure = seglog.get_backend("pure")
    cases = [
        dict(values=MIXED_VALUES, keys=MIXED_KEYS, timestamps_ms=MIXED_TIMESTAMPS,
             headers=MIXED_HEADERS, base_offset=2**40),
        dict(values=[b"x" * 100_000, b"y"], timestamps_ms=[5, 4], timestamp_type=1,
             producer_id=9, producer_epoch=1, base_sequence=2**31 - 1, is_transactional=True),
        dict(values=[None], keys=[b"gone"], timestamps_ms=0, delete_horizon_ms=86_400_000,
             partition_leader_epoch=12),
        dict(values=np.full((3, 7), 65, dtype=np.uint8), timestamps_ms=1,
             offset_deltas=[1, 4, 6], last_offset_delta=8),
    ]
    for case in cases:
        case = dict(case, compression=codec)
        values = case.pop("values")
        assert backend.encode_batch(values, **case) == pure.encode_batch(values, **case)
    assert backend.encode_control_batch(
        1, producer_id=3, producer_epoch=4, coordinator_epoch=5, base_offset=6, timestamp_ms=7,
    ) == pure.encode_control_batch(
        1, producer_id=3, producer_epoch=4, coordinator_epoch=5, base_offset=6, timestamp_ms=7,
    )
