"""Interop with kafka-python, an independent codec: it must parse every batch seglog writes,
and seglog must read every batch kafka-python's builder writes, field by field.

kafka-python (``kafka.record.default_records``) has its own varint, CRC-32C and compression
code, so agreement here is evidence that both sides implement Kafka's format, not merely the
same bug twice.
"""

from __future__ import annotations

import pytest


default_records = pytest.importorskip("kafka.record.default_records")
kafka_codec = pytest.importorskip("kafka.codec")

DefaultRecordBatch = default_records.DefaultRecordBatch
DefaultRecordBatchBuilder = default_records.DefaultRecordBatchBuilder

# seglog name -> (kafka-python codec id, is kafka-python able to use it here)
KAFKA_CODECS = {
    "none": (DefaultRecordBatch.CODEC_NONE, True),
    "gzip": (DefaultRecordBatch.CODEC_GZIP, kafka_codec.has_gzip()),
    "snappy": (DefaultRecordBatch.CODEC_SNAPPY, kafka_codec.has_snappy()),
    "lz4": (DefaultRecordBatch.CODEC_LZ4, kafka_codec.has_lz4()),
    "zstd": (DefaultRecordBatch.CODEC_ZSTD, kafka_codec.has_zstd()),
}


def codec_param(name):
    marks = []
    if not KAFKA_CODECS[name][1]:
        marks.append(pytest.mark.skip(reason=f"kafka-python cannot use {name} here"))
    return pytest.param(name, marks=marks, id=name)


CODECS = [codec_param(name) for name in ("none", "gzip", "lz4", "snappy", "zstd")]

# Compressible values so kafka-python's builder keeps the compressed form (it falls back to
# uncompressed when compression does not pay).
VALUES = [b"value-" * 20, None, b"", b"v" * 1000, bytes(range(256))]
KEYS = [b"key-0", None, b"", None, b"key-4"]
HEADERS = [[("trace", b"abc"), ("null", None)], [], [("ü", b"")], [], [("k", b"v" * 50)]]
TIMESTAMPS = [1_700_000_000_000, 1_700_000_000_900, 1_699_999_999_000, 1_700_000_000_900, 5]


def kafka_python_records(raw: bytes):
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()  # must come before iteration
    return batch, [
        (r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch
    ]


def expected(base_offset, timestamps):
    return [
        (base_offset + i, timestamps[i], KEYS[i], VALUES[i], tuple(tuple(h) for h in HEADERS[i]))
        for i in range(len(VALUES))
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(backend, codec):
    raw = backend.encode_batch(
        VALUES, keys=KEYS, timestamps_ms=TIMESTAMPS, headers=HEADERS, base_offset=4242,
        compression=codec, producer_id=99, producer_epoch=3, base_sequence=17,
        is_transactional=True, partition_leader_epoch=6,
    )
    batch, records = kafka_python_records(raw)
    assert batch.magic == 2
    assert batch.base_offset == 4242 and batch.last_offset_delta == 4
    assert batch.size_in_bytes == len(raw)
    assert batch.leader_epoch == 6
    assert batch.compression_type == KAFKA_CODECS[codec][0]
    assert batch.timestamp_type == 0
    assert batch.is_transactional and not batch.is_control_batch
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 3, 17)
    assert batch.last_sequence == 21
    assert batch.first_timestamp == TIMESTAMPS[0]
    assert batch.max_timestamp == max(TIMESTAMPS)
    assert batch.records_count == 5
    assert records == expected(4242, TIMESTAMPS)


def test_kafka_python_reads_log_append_time(backend):
    raw = backend.encode_batch([b"a", b"b"], timestamps_ms=[10, 20], timestamp_type=1)
    batch, records = kafka_python_records(raw)
    assert batch.timestamp_type == 1
    assert [r[1] for r in records] == [20, 20]


def build_with_kafka_python(codec: str, *, producer=(-1, -1, -1)) -> bytes:
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=KAFKA_CODECS[codec][0], is_transactional=False,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for offset, (key, value, headers, timestamp) in enumerate(
        zip(KEYS, VALUES, HEADERS, TIMESTAMPS)
    ):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches(backend, codec):
    raw = build_with_kafka_python(codec, producer=(7, 1, 100))
    (batch,) = backend.iter_batches(raw)
    assert batch.is_valid()
    assert batch.compression == codec  # kafka-python kept the compressed form
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (0, 4, 5)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 100)
    assert (batch.base_timestamp_ms, batch.max_timestamp_ms) == (TIMESTAMPS[0], max(TIMESTAMPS))
    assert [tuple(r) for r in batch.records()] == expected(0, TIMESTAMPS)
    columns = backend.decode_columns(raw)
    assert [columns.value(i) for i in range(len(columns))] == VALUES
    assert [columns.key(i) for i in range(len(columns))] == KEYS


def test_uncompressed_bytes_equal_kafka_python_builder(backend):
    # kafka-python writes partition leader epoch 0; everything else is the same choice.
    ours = backend.encode_batch(
        VALUES, keys=KEYS, timestamps_ms=TIMESTAMPS, headers=HEADERS, partition_leader_epoch=0
    )
    assert ours == build_with_kafka_python("none")


@pytest.mark.parametrize("control_type", [0, 1])
def test_kafka_python_sees_control_batches(backend, control_type):
    raw = backend.encode_control_batch(
        control_type, producer_id=12, producer_epoch=3, coordinator_epoch=8, base_offset=30,
        timestamp_ms=1000,
    )
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (12, 3, -1)
    assert batch.size_in_bytes == 78
    (record,) = list(batch)
    assert record.offset == 30 and record.timestamp == 1000
    assert record.key == bytes([0, 0, 0, control_type])
    assert record.value == bytes([0, 0, 0, 0, 0, 8])
