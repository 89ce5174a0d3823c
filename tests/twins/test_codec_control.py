"""End-transaction markers with a delete horizon, built by the codec on both backends.

The cleaner keeps a marker whose transaction has nothing left in the log, with a delete
horizon (attribute bit 6, base timestamp = horizon, the record's timestamp delta rewritten so
its absolute timestamp is kept), and drops it after the horizon. It used to frame that batch by
hand; ``encode_control_batch(..., delete_horizon_ms=...)`` must write exactly those bytes.
``_hand_framed_marker`` below is that hand-built code, frozen as the reference; the golden batch
is checked field by field (and its CRC against kafka-python's CRC-32C where installed).
"""

from __future__ import annotations

import struct

import pytest

import seglog
from seglog import format
from seglog.errors import InvalidRecordError, InvalidTimestampError
from seglog.pure.varint import encode_varint, encode_varlong
from seglog.storage import cleaner

# A COMMIT marker for producer 4242 epoch 7, coordinator epoch 11, at offset 50, leader epoch 3,
# record timestamp 1600000000000, kept with delete horizon 1600086400000 (one day later).
GOLDEN_MARKER_WITH_HORIZON = bytes.fromhex(
    # --- header, 61 bytes ---
    "0000000000000032"  # baseOffset 50
    "00000045"  # batchLength 69 = 81 - 12
    "00000003"  # partitionLeaderEpoch 3
    "02"  # magic 2
    "b59650e6"  # crc: CRC-32C of bytes 21..80 (checked against kafka-python's calc_crc32c)
    "0070"  # attributes: delete horizon (0x40) | control (0x20) | transactional (0x10)
    "00000000"  # lastOffsetDelta 0
    "000001748c94dc00"  # baseTimestamp 1600086400000: the delete horizon
    "00000174876e8000"  # maxTimestamp 1600000000000: the record's
    "0000000000001092"  # producerId 4242
    "0007"  # producerEpoch 7
    "ffffffff"  # baseSequence -1
    "00000001"  # recordsCount 1
    # --- the control record, 20 bytes ---
    "26"  # length varint 19
    "00"  # attributes
    "ffefb252"  # timestampDelta -86400000 (record timestamp - horizon)
    "00"  # offsetDelta 0
    "08" "00000001"  # keyLength 4: version 0, type 1 (COMMIT)
    "0c" "00000000000b"  # valueLength 6: version 0, coordinator epoch 11
    "00"  # headers count 0
)

_UINT32 = struct.Struct(">I")


def _hand_framed_marker(backend, batch, horizon_ms: int) -> bytes:
    """The cleaner's ``_marker_with_horizon`` as it was before the codec could build the batch
    (seglog.storage.cleaner, issue 9): kept verbatim as the reference."""
    (record,) = batch.records(check_crcs=False)
    body = bytearray(b"\x00")
    body += encode_varlong(record.timestamp_ms - horizon_ms)
    body += encode_varint(record.offset - batch.base_offset)
    for field_bytes in (record.key, record.value):
        body += encode_varint(len(field_bytes)) + field_bytes
    body += encode_varint(0)
    records = encode_varint(len(body)) + bytes(body)
    attributes = batch.attributes | format.DELETE_HORIZON_FLAG_MASK
    out = bytearray(format.BATCH_HEADER.pack(
        batch.base_offset, format.RECORD_BATCH_OVERHEAD - format.LOG_OVERHEAD + len(records),
        batch.partition_leader_epoch, format.MAGIC_V2, 0, attributes, batch.last_offset_delta,
        horizon_ms, batch.max_timestamp_ms, batch.producer_id, batch.producer_epoch,
        batch.base_sequence, 1))
    out += records
    crc = backend.crc32c(memoryview(out)[format.ATTRIBUTES_POSITION:])
    _UINT32.pack_into(out, format.CRC_POSITION, crc)
    return bytes(out)


def _only_batch(backend, raw):
    (batch,) = backend.iter_batches(raw)
    return batch


def _rebuilt_by_codec(backend, batch, horizon_ms: int) -> bytes:
    """One codec call from the kept marker's fields: what the cleaner does now."""
    (record,) = batch.records(check_crcs=False)
    _version, coordinator_epoch = format.END_TXN_MARKER_VALUE.unpack(record.value)
    return backend.encode_control_batch(
        batch.control_type(check_crcs=False), producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, coordinator_epoch=coordinator_epoch,
        base_offset=batch.base_offset, timestamp_ms=record.timestamp_ms,
        partition_leader_epoch=batch.partition_leader_epoch,
        timestamp_type=batch.timestamp_type, delete_horizon_ms=horizon_ms)


MARKERS = [
    # control_type, producer_id, producer_epoch, coordinator_epoch, base_offset, timestamp_ms,
    # partition_leader_epoch, horizon_ms
    (1, 4242, 7, 11, 50, 1_600_000_000_000, 3, 1_600_086_400_000),
    (0, 0, 0, 0, 0, 0, -1, 0),
    (0, 1, 2, -5, 7, 5, 0, 1_000),  # horizon after the record: positive delta
    (1, 2**63 - 1, 2**15 - 1, 2**31 - 1, 2**63 - 2, 2**40, 2**31 - 1, 2**40 - 1),
    (0, 9, 3, -(2**31), 123_456, 1_700_000_000_000, -(2**31), 1_700_000_000_000),
    (1, 77, 1, 4, 10**12, -1, 8, 2**62),  # no record timestamp (-1), a far horizon
]


@pytest.mark.parametrize("marker", MARKERS)
@pytest.mark.parametrize("timestamp_type", [0, 1])
def test_codec_writes_the_hand_framed_marker(backend, marker, timestamp_type):
    (control_type, producer_id, producer_epoch, coordinator_epoch, base_offset, timestamp_ms,
     leader_epoch, horizon_ms) = marker
    fields = dict(producer_id=producer_id, producer_epoch=producer_epoch,
                  coordinator_epoch=coordinator_epoch, base_offset=base_offset,
                  timestamp_ms=timestamp_ms, partition_leader_epoch=leader_epoch,
                  timestamp_type=timestamp_type)
    source = _only_batch(backend, backend.encode_control_batch(control_type, **fields))
    expected = _hand_framed_marker(backend, source, horizon_ms)
    written = backend.encode_control_batch(control_type, **fields, delete_horizon_ms=horizon_ms)
    assert written == expected
    assert _rebuilt_by_codec(backend, source, horizon_ms) == expected
    assert cleaner._marker_with_horizon(backend, source, horizon_ms) == expected
    assert written == seglog.get_backend("pure").encode_control_batch(
        control_type, **fields, delete_horizon_ms=horizon_ms)


def test_golden_marker_with_horizon(backend):
    written = backend.encode_control_batch(
        1, producer_id=4242, producer_epoch=7, coordinator_epoch=11, base_offset=50,
        timestamp_ms=1_600_000_000_000, partition_leader_epoch=3,
        delete_horizon_ms=1_600_086_400_000)
    assert written == GOLDEN_MARKER_WITH_HORIZON
    batch = _only_batch(backend, written)
    assert batch.is_control and batch.is_transactional and batch.has_delete_horizon
    assert batch.delete_horizon_ms == 1_600_086_400_000
    assert (batch.base_timestamp_ms, batch.max_timestamp_ms) == (1_600_086_400_000,
                                                                  1_600_000_000_000)
    assert batch.control_type() == format.CONTROL_TYPE_COMMIT
    (record,) = batch.records()
    assert (record.offset, record.timestamp_ms, record.headers) == (50, 1_600_000_000_000, ())
    assert format.END_TXN_MARKER_VALUE.unpack(record.value) == (0, 11)
    assert batch.is_valid()


def test_golden_marker_crc_is_kafkas():
    util = pytest.importorskip("kafka.record.util")
    crc = util.calc_crc32c(GOLDEN_MARKER_WITH_HORIZON[format.ATTRIBUTES_POSITION:])
    assert crc == _UINT32.unpack_from(GOLDEN_MARKER_WITH_HORIZON, format.CRC_POSITION)[0]


def test_no_horizon_is_the_plain_marker(backend):
    fields = dict(producer_id=5, producer_epoch=1, coordinator_epoch=2, base_offset=3,
                  timestamp_ms=4)
    plain = backend.encode_control_batch(0, **fields)
    assert backend.encode_control_batch(0, **fields, delete_horizon_ms=-1) == plain
    assert backend.encode_control_batch(0, **fields, timestamp_type=0) == plain
    assert len(plain) == format.END_TXN_MARKER_BATCH_BYTES
    assert not _only_batch(backend, plain).has_delete_horizon


@pytest.mark.parametrize("horizon, error", [
    (-2, InvalidRecordError), (2**63, InvalidRecordError), ("1", InvalidRecordError),
    (1.0, InvalidRecordError),
])
def test_bad_delete_horizon(backend, horizon, error):
    with pytest.raises(error):
        backend.encode_control_batch(1, producer_id=1, producer_epoch=0, timestamp_ms=0,
                                     delete_horizon_ms=horizon)


def test_timestamp_too_far_from_the_horizon(backend):
    with pytest.raises(InvalidTimestampError):
        backend.encode_control_batch(1, producer_id=1, producer_epoch=0,
                                     timestamp_ms=-(2**63), delete_horizon_ms=2**62)


@pytest.mark.parametrize("timestamp_type", [-1, 2, "0", None])
def test_bad_timestamp_type(backend, timestamp_type):
    with pytest.raises(InvalidRecordError):
        backend.encode_control_batch(1, producer_id=1, producer_epoch=0, timestamp_ms=0,
                                     timestamp_type=timestamp_type)
