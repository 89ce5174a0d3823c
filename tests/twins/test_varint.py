"""Zig-zag varints and varlongs: Kafka's ByteUtilsTest table, and Kafka's reading rules.

The native varint helpers are ``cdef inline`` (no Python names), so on both backends the
table is checked through the codec: a record's offset delta is a varint and its timestamp
delta a varlong, at fixed positions in a small batch. The pure module is also tested directly.
"""

from __future__ import annotations

import struct

import pytest

from seglog.errors import InvalidRecordError
from seglog.format import BATCH_HEADER, CRC_POSITION

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# apache/kafka: clients/src/test/java/org/apache/kafka/common/utils/ByteUtilsTest.java,
# testVarintSerde: value -> encoding.
VARINT_TABLE = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (-8193, "818001"),
    (1048575, "feff7f"),
    (-1048576, "ffff7f"),
    (1048576, "80808001"),
    (-1048577, "81808001"),
    (134217727, "feffff7f"),
    (-134217728, "ffffff7f"),
    (134217728, "8080808001"),
    (-134217729, "8180808001"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]

# testVarlongSerde: the varint rows plus the longer ones.
VARLONG_TABLE = VARINT_TABLE + [
    (17179869183, "feffffff7f"),
    (-17179869184, "ffffffff7f"),
    (17179869184, "808080808001"),
    (-17179869185, "818080808001"),
    (2199023255551, "feffffffff7f"),
    (-2199023255552, "ffffffffff7f"),
    (2199023255552, "80808080808001"),
    (-2199023255553, "81808080808001"),
    (281474976710655, "feffffffffff7f"),
    (-281474976710656, "ffffffffffff7f"),
    (281474976710656, "8080808080808001"),
    (-281474976710657, "8180808080808001"),
    (36028797018963967, "feffffffffffff7f"),
    (-36028797018963968, "ffffffffffffff7f"),
    (36028797018963968, "808080808080808001"),
    (-36028797018963969, "818080808080808001"),
    (4611686018427387903, "feffffffffffffff7f"),
    (-4611686018427387904, "ffffffffffffffff7f"),
    (4611686018427387904, "80808080808080808001"),
    (-4611686018427387905, "81808080808080808001"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]

# Bytes of the first record of the batches below: body size 6, attributes, timestamp delta 0,
# offset delta 0, null key, empty value, no headers. The second record starts right after.
FIRST_RECORD = bytes([0x0C, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00])
SECOND_RECORD_POSITION = 61 + len(FIRST_RECORD)  # 68: its length varint (one byte here)


def batch_of(backend, record_area: bytes, record_count: int, *, base_offset: int = 0) -> bytes:
    """A v2 batch around a hand-made record area, with a correct CRC."""
    header = BATCH_HEADER.pack(
        base_offset, 49 + len(record_area), -1, 2, 0, 0, record_count - 1, 0, 0, -1, -1, -1,
        record_count,
    )
    batch = bytearray(header + record_area)
    struct.pack_into(">I", batch, CRC_POSITION, backend.crc32c(batch[21:]))
    return bytes(batch)


def record_with(offset_delta: bytes = b"\x00", timestamp_delta: bytes = b"\x00",
                key_length: bytes = b"\x01") -> bytes:
    """One record with the given raw varint fields, an empty value and no headers."""
    body = b"\x00" + timestamp_delta + offset_delta + key_length + b"\x00" + b"\x00"
    assert len(body) < 64  # so the length varint is the single byte 2 * len
    return bytes([2 * len(body)]) + body


# --- through the codec, on both backends -------------------------------------------------------


@pytest.mark.parametrize("value, encoding", [row for row in VARINT_TABLE if row[0] > 0])
def test_varint_table_as_offset_delta(backend, value, encoding):
    raw = backend.encode_batch([b"", b""], timestamps_ms=0, offset_deltas=[0, value])
    assert raw[61 : 61 + len(FIRST_RECORD)] == FIRST_RECORD
    # Second record: length, attributes, timestamp delta 0, then the offset delta.
    position = SECOND_RECORD_POSITION + 3
    assert raw[position : position + len(encoding) // 2].hex() == encoding
    batch = next(iter(backend.iter_batches(raw)))
    assert [r.offset for r in batch.records()] == [0, value]


@pytest.mark.parametrize("value, encoding", VARLONG_TABLE)
def test_varlong_table_as_timestamp_delta(backend, value, encoding):
    # Two valid timestamps (each -1 or >= 0) exactly ``value`` apart.
    first_ms = 0 if value >= 0 else INT64_MAX
    second_ms = first_ms + value
    raw = backend.encode_batch([b"", b""], timestamps_ms=[first_ms, second_ms])
    position = SECOND_RECORD_POSITION + 2
    assert raw[position : position + len(encoding) // 2].hex() == encoding
    batch = next(iter(backend.iter_batches(raw)))
    assert [r.timestamp_ms for r in batch.records()] == [first_ms, second_ms]


@pytest.mark.parametrize("value, encoding", VARINT_TABLE)
def test_varint_table_decodes(backend, value, encoding):
    # Offset delta (any int32; the base offset keeps the offset positive).
    base_offset = 2**40
    raw = batch_of(backend, record_with(offset_delta=bytes.fromhex(encoding)), 1,
                   base_offset=base_offset)
    (record,) = next(iter(backend.iter_batches(raw))).records()
    assert record.offset == base_offset + value
    assert record.key is None


@pytest.mark.parametrize("encoding", ["01", "03", "ffffffff0f", "81808001"])
def test_any_negative_key_length_is_null(backend, encoding):
    # Kafka's DefaultRecord.readFrom: keySize >= 0 reads a key, anything else is null.
    raw = batch_of(backend, record_with(key_length=bytes.fromhex(encoding)), 1)
    (record,) = next(iter(backend.iter_batches(raw))).records()
    assert record.key is None and record.value == b""


def test_non_canonical_varints_are_accepted(backend):
    # Zero written in three bytes: Kafka reads it, and so must we.
    raw = batch_of(backend, record_with(offset_delta=b"\x80\x80\x00"), 1)
    (record,) = next(iter(backend.iter_batches(raw))).records()
    assert record.offset == 0


@pytest.mark.parametrize(
    "encoding, value",
    [("feffffff7f", INT32_MAX), ("ffffffff7f", INT32_MIN), ("8080808070", 0)],
)
def test_fifth_byte_high_bits_are_dropped(backend, encoding, value):
    # Java's ``b << 28`` keeps only the low four bits of a varint's fifth byte.
    base_offset = 2**40
    raw = batch_of(backend, record_with(offset_delta=bytes.fromhex(encoding)), 1,
                   base_offset=base_offset)
    (record,) = next(iter(backend.iter_batches(raw))).records()
    assert record.offset == base_offset + value


def test_varint_longer_than_5_bytes_in_a_record(backend):
    # ByteUtilsTest.testInvalidVarint's bytes as an offset delta.
    raw = batch_of(backend, record_with(offset_delta=bytes.fromhex("ffffffffff01")), 1)
    with pytest.raises(InvalidRecordError):
        next(iter(backend.iter_batches(raw))).records()


def test_varlong_longer_than_10_bytes_in_a_record(backend):
    # ByteUtilsTest.testInvalidVarlong's bytes as a timestamp delta.
    raw = batch_of(backend, record_with(timestamp_delta=bytes.fromhex("ffffffffffffffffffff01")), 1)
    with pytest.raises(InvalidRecordError):
        next(iter(backend.iter_batches(raw))).records()


def test_varint_cut_by_the_end_of_the_record(backend):
    # The key length's continuation bit is set, but the record ends there.
    body = b"\x00\x00\x00\x81"
    raw = batch_of(backend, bytes([2 * len(body)]) + body, 1)
    with pytest.raises(InvalidRecordError):
        next(iter(backend.iter_batches(raw))).records()


# --- the pure module itself --------------------------------------------------------------------


@pytest.mark.parametrize("value, encoding", VARINT_TABLE)
def test_pure_varint_table(pure, value, encoding):
    from seglog.pure import varint

    assert varint.encode_varint(value).hex() == encoding
    assert varint.size_of_varint(value) == len(encoding) // 2
    data = bytes.fromhex(encoding) + b"\xaa"
    assert varint.read_varint(data, 0) == (value, len(encoding) // 2)


@pytest.mark.parametrize("value, encoding", VARLONG_TABLE)
def test_pure_varlong_table(pure, value, encoding):
    from seglog.pure import varint

    assert varint.encode_varlong(value).hex() == encoding
    assert varint.size_of_varlong(value) == len(encoding) // 2
    data = b"\xaa" + bytes.fromhex(encoding)
    assert varint.read_varlong(data, 1) == (value, 1 + len(encoding) // 2)


def test_pure_invalid_and_truncated(pure):
    from seglog.pure import varint

    with pytest.raises(InvalidRecordError, match="longer than 5"):
        varint.read_varint(bytes.fromhex("ffffffffff01"), 0)
    with pytest.raises(InvalidRecordError, match="longer than 10"):
        varint.read_varlong(bytes.fromhex("ffffffffffffffffffff01"), 0)
    with pytest.raises(InvalidRecordError, match="past the end"):
        varint.read_varint(b"\x80\x80", 0)
    with pytest.raises(InvalidRecordError, match="past the end"):
        varint.read_varint(b"\x02", 0, 0)  # end bounds the read, not len(data)
    with pytest.raises(ValueError):
        varint.encode_varint(INT32_MAX + 1)
    with pytest.raises(ValueError):
        varint.encode_varlong(INT64_MIN - 1)
