"""Kafka's on-disk format, defined once as data: header structs, field positions, attribute bits,
limits and the fixed corruption reason strings.

Both backends use these names; the native modules define the same constants as ``cdef enum``
and a test asserts that the two agree. Field positions are derived from the struct layouts,
never typed by hand. The prose version with a worked example is ``docs/format.md``; Kafka's
source for every fact is ``DefaultRecordBatch.java`` (Kafka's
``clients/src/main/java/org/apache/kafka/common/record/``).

Byte order is big-endian everywhere.
"""

from __future__ import annotations

import struct

# --- RecordBatch v2 header (61 bytes) -------------------------------------------------------
#: Field names and struct codes of the batch header, in order.
BATCH_HEADER_FIELDS = (
    ("base_offset", "q"),
    ("batch_length", "i"),
    ("partition_leader_epoch", "i"),
    ("magic", "b"),
    ("crc", "I"),
    ("attributes", "h"),
    ("last_offset_delta", "i"),
    ("base_timestamp", "q"),
    ("max_timestamp", "q"),
    ("producer_id", "q"),
    ("producer_epoch", "h"),
    ("base_sequence", "i"),
    ("records_count", "i"),
)
BATCH_HEADER = struct.Struct(">" + "".join(code for _, code in BATCH_HEADER_FIELDS))


def _field_positions() -> dict[str, int]:
    positions, position = {}, 0
    for name, code in BATCH_HEADER_FIELDS:
        positions[name] = position
        position += struct.calcsize(">" + code)
    return positions


_POS = _field_positions()
BASE_OFFSET_POSITION = _POS["base_offset"]  # 0
BATCH_LENGTH_POSITION = _POS["batch_length"]  # 8
PARTITION_LEADER_EPOCH_POSITION = _POS["partition_leader_epoch"]  # 12
MAGIC_POSITION = _POS["magic"]  # 16
CRC_POSITION = _POS["crc"]  # 17
ATTRIBUTES_POSITION = _POS["attributes"]  # 21: the CRC covers from here to the batch end
LAST_OFFSET_DELTA_POSITION = _POS["last_offset_delta"]  # 23
BASE_TIMESTAMP_POSITION = _POS["base_timestamp"]  # 27
MAX_TIMESTAMP_POSITION = _POS["max_timestamp"]  # 35
PRODUCER_ID_POSITION = _POS["producer_id"]  # 43
PRODUCER_EPOCH_POSITION = _POS["producer_epoch"]  # 51
BASE_SEQUENCE_POSITION = _POS["base_sequence"]  # 53
RECORDS_COUNT_POSITION = _POS["records_count"]  # 57
RECORD_BATCH_OVERHEAD = BATCH_HEADER.size  # 61
#: baseOffset + batchLength: the bytes in front of what batchLength counts.
LOG_OVERHEAD = BATCH_LENGTH_POSITION + 4  # 12
#: Bytes a reader needs to see the magic byte (``Records.HEADER_SIZE_UP_TO_MAGIC``).
HEADER_SIZE_UP_TO_MAGIC = MAGIC_POSITION + 1  # 17
#: Smallest batchLength Kafka accepts before calling a batch corrupt (``RECORD_OVERHEAD_V0``).
MIN_BATCH_LENGTH = 14
#: Largest size of one record's framing (length 5 + attributes 1 + ts delta 10 + offset delta 5).
MAX_RECORD_OVERHEAD = 21

assert RECORD_BATCH_OVERHEAD == 61 and LOG_OVERHEAD == 12 and ATTRIBUTES_POSITION == 21
assert RECORDS_COUNT_POSITION + 4 == RECORD_BATCH_OVERHEAD

MAGIC_V2 = 2

# --- Attribute bits (low byte of the int16) ---------------------------------------------------
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
#: Codec id -> name, Kafka's ``CompressionType``.
COMPRESSION_NAMES = {
    COMPRESSION_NONE: "none",
    COMPRESSION_GZIP: "gzip",
    COMPRESSION_SNAPPY: "snappy",
    COMPRESSION_LZ4: "lz4",
    COMPRESSION_ZSTD: "zstd",
}
COMPRESSION_IDS = {name: codec_id for codec_id, name in COMPRESSION_NAMES.items()}

TIMESTAMP_TYPE_CREATE_TIME = 0
TIMESTAMP_TYPE_LOG_APPEND_TIME = 1
TIMESTAMP_TYPE_NAMES = {
    TIMESTAMP_TYPE_CREATE_TIME: "CreateTime",
    TIMESTAMP_TYPE_LOG_APPEND_TIME: "LogAppendTime",
}

# --- "No value" sentinels (RecordBatch.java) --------------------------------------------------
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# --- Control records (ControlRecordType.java, EndTransactionMarker.java) ----------------------
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
CONTROL_KEY = struct.Struct(">hh")  # version (0), type
END_TXN_MARKER_VALUE = struct.Struct(">hi")  # version (0), coordinator epoch
CONTROL_RECORD_VERSION = 0
#: A commit or abort marker batch: 61-byte header + one 17-byte record.
END_TXN_MARKER_BATCH_BYTES = 78

# --- Index files (OffsetIndex.java, TimeIndex.java) -------------------------------------------
OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
OFFSET_INDEX_ENTRY_BYTES = OFFSET_INDEX_ENTRY.size  # 8
TIME_INDEX_ENTRY_BYTES = TIME_INDEX_ENTRY.size  # 12
#: Lookups first binary-search the last 8 KiB of entries (AbstractIndex.warmEntries).
INDEX_WARM_SECTION_BYTES = 8192

# --- Transaction index (AbortedTxn.java) ------------------------------------------------------
ABORTED_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable
ABORTED_TXN_ENTRY_BYTES = ABORTED_TXN_ENTRY.size  # 34

# --- Limits -----------------------------------------------------------------------------------
#: Segment positions are int32 in the offset index.
SEGMENT_BYTES_MAX = INT32_MAX
#: Kafka's default ``max.message.bytes`` (1 MiB + LOG_OVERHEAD).
MAX_MESSAGE_BYTES_DEFAULT = 1024 * 1024 + LOG_OVERHEAD

# --- Fixed corruption reasons (CorruptRecordError.reason) -------------------------------------
REASON_BATCH_TOO_SMALL = "batch length below minimum"
REASON_BATCH_TOO_LARGE = "batch length above maximum"
REASON_BAD_MAGIC = "unsupported magic"
REASON_CRC_MISMATCH = "crc mismatch"
REASON_OFFSETS_NOT_INCREASING = "offsets not increasing"
REASON_BAD_LAST_OFFSET_DELTA = "last offset delta out of range"
REASON_BAD_RECORDS = "invalid records"
REASON_TRUNCATED = "truncated batch"
#: Every reason string, for tests that want one test per reason.
CORRUPTION_REASONS = (
    REASON_BATCH_TOO_SMALL,
    REASON_BATCH_TOO_LARGE,
    REASON_BAD_MAGIC,
    REASON_CRC_MISMATCH,
    REASON_OFFSETS_NOT_INCREASING,
    REASON_BAD_LAST_OFFSET_DELTA,
    REASON_BAD_RECORDS,
    REASON_TRUNCATED,
)
#: A Log read found no readable batch in a segment whose offsets say it holds one (raised by
#: the Log, never a recovery result, so not in CORRUPTION_REASONS).
REASON_UNREADABLE_BATCH = "no readable batch below the end of the segment"

# --- Fixed reasons of the record decoders (CorruptRecordError.reason) ---------------------------
# Not in CORRUPTION_REASONS: those are the reasons a segment scan (recovery) reports; these are
# raised by the codec when it decompresses or decodes a batch's records.
#: A compressed record area decompresses to more than ``max_decompressed_bytes``.
REASON_DECOMPRESSED_TOO_LARGE = "decompressed size above limit"
#: A compressed record area the codec cannot decompress (bad or truncated stream).
REASON_BAD_COMPRESSION = "invalid compressed stream"
#: The reasons above, for tests that want one test per reason.
DECODE_CORRUPTION_REASONS = (REASON_DECOMPRESSED_TOO_LARGE, REASON_BAD_COMPRESSION)

# --- Fixed reasons of the Log's checks across segments (CorruptRecordError.reason) -------------
# Raised by the Log and its loader, which know where each segment's offsets must end; not
# segment-scan (recovery) results, so not in CORRUPTION_REASONS.
#: A batch of a segment holds offsets at or above the next segment's base offset (or, in the
#: last segment, at or above the log end offset): its base offset, outside the CRC, was raised.
REASON_OFFSETS_OUTSIDE_SEGMENT = "offsets outside the segment"
#: A segment that has a later one ends below the offsets its own indexes (synced when it
#: rolled) name: its ``.log`` lost batches after they were flushed.
REASON_SEGMENT_CUT = "segment ends below its indexes"
#: After a clean shutdown the log ends below the checkpointed recovery point: records that
#: were flushed (and checkpointed as flushed) are gone.
REASON_BELOW_RECOVERY_POINT = "log ends below the recovery point"
