"""__consumer_offsets keys and values in Kafka's schema: byte vectors, versions, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError, InvalidRecordError
from seglog.coordinator.offsets_schema import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_key,
    decode_offset_commit_value,
    encode_key,
    encode_offset_commit_value,
    java_abs,
    java_string_hash,
    offset_commit_record,
    offset_tombstone,
    offsets_partition_for_group,
)

# Written out by hand from OffsetCommitKey.json / OffsetCommitValue.json.
KEY_G_T_0 = bytes.fromhex(
    "0001"          # key version 1: OffsetCommitKey
    "0001" "67"     # group "g"
    "0001" "74"     # topic "t"
    "00000000"      # partition 0
)
VALUE_V3 = bytes.fromhex(
    "0003"                  # value version 3
    "0000000000000005"      # offset 5
    "ffffffff"              # leader epoch -1
    "0002" "6d64"           # metadata "md"
    "00000000000003e8"      # commit timestamp 1000
)
VALUE_V4 = bytes.fromhex(
    "0004"                  # value version 4 (flexible)
    "0000000000000005"      # offset 5
    "00000007"              # leader epoch 7
    "03" "6d64"             # compact string "md": uvarint length + 1
    "00000000000003e8"      # commit timestamp 1000
    "01" "00" "02" "abcd"   # one tagged field: tag 0, 2 bytes
)
GROUP_KEY = bytes.fromhex("0002" "0003" "677270")  # GroupMetadataKey v2, group "grp"


def test_key_byte_vector():
    assert encode_key(OffsetCommitKey("g", "t", 0)) == KEY_G_T_0
    assert decode_key(KEY_G_T_0) == OffsetCommitKey("g", "t", 0, version=1)


def test_value_v3_byte_vector():
    value = OffsetCommitValue(offset=5, commit_timestamp_ms=1000, metadata="md")
    assert encode_offset_commit_value(value) == VALUE_V3
    assert decode_offset_commit_value(VALUE_V3) == value


def test_value_v4_byte_vector():
    value = decode_offset_commit_value(VALUE_V4)
    assert value == OffsetCommitValue(offset=5, commit_timestamp_ms=1000, leader_epoch=7,
                                      metadata="md", version=4,
                                      tagged_fields=((0, b"\xab\xcd"),))
    assert encode_offset_commit_value(value) == VALUE_V4


def test_group_metadata_key():
    assert encode_key(GroupMetadataKey("grp")) == GROUP_KEY
    assert decode_key(GROUP_KEY) == GroupMetadataKey("grp")


def test_key_version_0_reads_as_offset_commit():
    data = b"\x00\x00" + KEY_G_T_0[2:]
    assert decode_key(data) == OffsetCommitKey("g", "t", 0, version=0)
    assert encode_key(OffsetCommitKey("g", "t", 0, version=0)) == data


def test_newer_record_types_are_unknown_keys():
    assert decode_key(b"\x00\x03\x00\x01x") == UnknownKey(3, b"\x00\x01x")


@pytest.mark.parametrize("version,layout", [
    (0, ">hq" "h2s" "q"),
    (1, ">hq" "h2s" "qq"),
    (2, ">hq" "h2s" "q"),
    (3, ">hqi" "h2s" "q"),
])
def test_value_versions_layout(version, layout):
    value = OffsetCommitValue(offset=9, commit_timestamp_ms=77, leader_epoch=4, metadata="ab",
                              expire_timestamp_ms=88, version=version)
    fields = [version, 9] + ([4] if version >= 3 else []) + [2, b"ab", 77] \
        + ([88] if version == 1 else [])
    data = struct.pack(layout, *fields)
    assert encode_offset_commit_value(value) == data
    back = decode_offset_commit_value(data)
    # Fields a version lacks come back as their defaults (Kafka drops ignorable fields).
    assert back.leader_epoch == (4 if version >= 3 else -1)
    assert back.expire_timestamp_ms == (88 if version == 1 else -1)
    assert (back.offset, back.metadata, back.commit_timestamp_ms, back.version) == (9, "ab", 77, version)


def test_tombstone():
    key, value = offset_tombstone("g", "t", 0)
    assert key == KEY_G_T_0 and value is None
    assert decode_offset_commit_value(None) is None


def test_offset_commit_record_uses_kafkas_versions():
    key, value = offset_commit_record("g", "t", 0, 5, commit_timestamp_ms=1000, metadata="md")
    assert (key, value) == (KEY_G_T_0, VALUE_V3)


def test_trailing_bytes_are_ignored_like_kafka():
    assert decode_offset_commit_value(VALUE_V3 + b"\x00\x00") == decode_offset_commit_value(VALUE_V3)


@pytest.mark.parametrize("data", [
    b"", b"\x00", KEY_G_T_0[:-1], b"\x00\x01\x00\x05gg", b"\x00\x01\xff\xff",
    b"\x00\x01\x00\x01\xff\x00\x01t\x00\x00\x00\x00",
])
def test_bad_keys(data):
    with pytest.raises(CorruptRecordError) as info:
        decode_key(data)
    assert info.value.reason == "invalid records"


@pytest.mark.parametrize("data", [
    b"", VALUE_V3[:-1], b"\x00\x05" + VALUE_V3[2:], b"\xff\xff" + VALUE_V3[2:],
    VALUE_V4[:-1], VALUE_V4[:14] + b"\x00" + VALUE_V4[17:],  # compact null metadata
])
def test_bad_values(data):
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(data)


def test_encode_limits():
    with pytest.raises(InvalidRecordError):
        encode_key(OffsetCommitKey("g" * 0x8000, "t", 0))
    with pytest.raises(ValueError):
        encode_offset_commit_value(OffsetCommitValue(offset=1, commit_timestamp_ms=1, version=5))
    with pytest.raises(ValueError):
        encode_key(OffsetCommitKey("g", "t", 0, version=2))


text = st.text(max_size=50)


@given(text, text, st.integers(-(2**31), 2**31 - 1))
def test_key_round_trip(group, topic, partition):
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1),
       st.integers(-(2**31), 2**31 - 1), text, st.sampled_from([0, 1, 2, 3, 4]))
def test_value_round_trip(offset, ts, epoch, metadata, version):
    value = OffsetCommitValue(offset=offset, commit_timestamp_ms=ts,
                              leader_epoch=epoch if version >= 3 else -1, metadata=metadata,
                              expire_timestamp_ms=ts if version == 1 else -1, version=version)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # two UTF-16 units
    assert java_abs(-(2**31)) == 0 and java_abs(-5) == 5


def test_offsets_partition_for_group():
    assert offsets_partition_for_group("polygenelubricants") == 0  # Utils.abs(MIN_VALUE) = 0
    assert offsets_partition_for_group("hello") == 99162322 % 50
    assert offsets_partition_for_group("hello", 7) == 99162322 % 7
    # A negative hashCode takes abs (not & 0x7fffffff as murmur2 partitioning does).
    negative = next(g for g in (f"group-{i}" for i in range(1000)) if java_string_hash(g) < 0)
    assert offsets_partition_for_group(negative) == (-java_string_hash(negative)) % 50
    with pytest.raises(ValueError):
        offsets_partition_for_group("g", 0)


@pytest.mark.parametrize("version", [-1, -32768, 3, 32767])
def test_unknown_key_versions_negative_included_are_unknown_keys(version):
    """Kafka's readMessageKey returns UnknownKey for every version it does not know, so the
    loader skips the record (with a warning) instead of failing: negative versions too."""
    key = decode_key(struct.pack(">h", version) + b"rest")
    assert key == UnknownKey(version, b"rest")
