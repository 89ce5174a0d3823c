"""The bytes of ``__share_group_state`` records (ShareSnapshot, ShareUpdate) as Kafka 4.4 has
them, the placement of a share-partition's state, and Kafka's ``kafka-dump-log
--share-group-state-decoder`` reading a segment seglog's share coordinator wrote."""

from __future__ import annotations

import json
import os
import uuid

import pytest

import seglog
from seglog.bench.kafka import find_kafka
from seglog.coordinator import share_state_records as r
from seglog.coordinator.share_coordinator import ShareCoordinatorConfig
from seglog.coordinator.share_state_records import (ShareSnapshotValue, ShareState,
                                                    ShareUpdateValue, StateBatch)
from seglog.errors import CorruptRecordError

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def test_key_bytes():
    # int16 type, int16-length group, 16-byte uuid, int32 partition (not flexible).
    key = r.encode_key(r.SHARE_UPDATE, "g1", TOPIC_ID, 7)
    assert key == b"\x00\x01" + b"\x00\x02g1" + TOPIC_ID.bytes + b"\x00\x00\x00\x07"
    assert r.decode_key(key) == r.ShareStateKey(1, "g1", TOPIC_ID, 7)
    with pytest.raises(CorruptRecordError):
        r.decode_key(b"\x00\x02" + key[2:])  # not a share-coordinator record type
    with pytest.raises(CorruptRecordError):
        r.decode_key(key[:-1])


def test_snapshot_value_bytes():
    value = ShareSnapshotValue(1, 2, 3, 100, 1000, 2000, (StateBatch(100, 109, 2, 1),))
    raw = r.encode_snapshot_value(value)
    expected = (b"\x00\x00"  # version 0
                + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + (3).to_bytes(4, "big")
                + (100).to_bytes(8, "big") + (1000).to_bytes(8, "big")
                + (2000).to_bytes(8, "big")
                + b"\x02"  # compact array of one
                + (100).to_bytes(8, "big") + (109).to_bytes(8, "big") + b"\x02" + b"\x00\x01"
                + b"\x00"  # the batch's tagged fields
                + b"\x00")  # no tagged fields: DeliveryCompleteCount -1 is not written
    assert raw == expected
    assert r.decode_value(r.SHARE_SNAPSHOT, raw) == value
    # DeliveryCompleteCount (tag 0) when not -1.
    counted = ShareSnapshotValue(0, 0, 0, 5, 1, 1, (), 4)
    raw = r.encode_snapshot_value(counted)
    assert raw.endswith(b"\x01" + b"\x01\x00\x04" + b"\x00\x00\x00\x04")  # empty array, tag
    assert r.decode_value(r.SHARE_SNAPSHOT, raw) == counted


def test_update_value_round_trip_and_unknown_version():
    value = ShareUpdateValue(4, 5, -1, (StateBatch(1, 2, 0, 3), StateBatch(3, 3, 4, 5)), 9)
    raw = r.encode_update_value(value)
    assert r.decode_value(r.SHARE_UPDATE, raw) == value
    with pytest.raises(CorruptRecordError):
        r.decode_value(r.SHARE_UPDATE, b"\x00\x01" + raw[2:])
    with pytest.raises(CorruptRecordError):
        r.decode_value(r.SHARE_UPDATE, raw[:-3])


def test_placement_is_kafkas():
    # Kafka: Utils.abs(("g:" + topicId + ":0").hashCode()) % 50; the topic id printed as
    # Kafka prints a Uuid (base64url, no padding).
    assert r.coordinator_key("g", TOPIC_ID, 0) == "g:Dx4tPEtaaXiHlqW0w9Lh8A:0"
    text = "g:Dx4tPEtaaXiHlqW0w9Lh8A:0"
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    assert r.share_state_partition("g", TOPIC_ID, 0, 50) == abs(h) % 50
    with pytest.raises(ValueError):
        r.share_state_partition("g", TOPIC_ID, 0, 0)


def test_share_state_defaults():
    state = ShareState(1, 10, ())
    assert state.leader_epoch == -1 and state.delivery_complete_count == -1


_REF, _WHY = find_kafka()
_REQUIRED = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")


@pytest.mark.kafka
def test_kafka_dump_log_decodes_a_segment_seglog_wrote(tmp_path, backend):
    """Kafka 4.4's ``kafka-dump-log --share-group-state-decoder`` reads seglog's snapshots,
    updates and tombstone as its own records (every field as written)."""
    if _REF is None:
        if _REQUIRED:
            pytest.fail(_WHY)
        pytest.skip(_WHY)
    store = seglog.Store(tmp_path / "data", backend=backend, offsets_topic_partitions=1)
    store.create_topic("t", 1)
    topic_id = store.topic("t").uuid
    share = store.share_coordinator()
    assert share.initialize_state("g", topic_id, 0, 3, 10) == 0
    assert share.write_state("g", topic_id, 0, ShareState(
        3, 10, (StateBatch(10, 14, 2, 1), StateBatch(15, 15, 4, 5)), 2, 6)) == 0
    # The rest in zstd batches (share.coordinator.state.topic.compression.codec=4).
    share.set_config(ShareCoordinatorConfig(1, 500, "zstd"))
    assert share.initialize_state("g2", topic_id, 0, 0, -1) == 0
    assert share.delete_state("g2", topic_id, 0) == 0
    store.close()
    files = sorted((tmp_path / "data").glob("__share_group_state-0/*.log"))
    assert files
    done = _REF.run_tool(_REF.dump_log_class, [
        "--share-group-state-decoder", "--files", ",".join(str(f) for f in files)],
        run_dir=tmp_path / "run", timeout_s=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "Exception" not in out and "Failed" not in out and "Unknown" not in out, out[-3000:]
    keys, payloads = [], []
    for line in out.splitlines():
        if " key: " in line and " payload: " in line:
            key_text = line.split(" key: ", 1)[1].split(" payload: ", 1)[0]
            payload_text = line.split(" payload: ", 1)[1]
            keys.append(json.loads(key_text))
            payloads.append(None if payload_text == "<DELETE>" else json.loads(payload_text))
    tid = r.coordinator_key("g", topic_id, 0).split(":")[1]
    assert [k["type"] for k in keys] == ["0", "1", "0", "0"]
    assert keys[0]["data"] == {"groupId": "g", "topicId": tid, "partition": 0}
    snapshot = payloads[0]["data"]
    assert payloads[0]["version"] == "0"
    assert snapshot["snapshotEpoch"] == 0 and snapshot["stateEpoch"] == 3
    assert snapshot["leaderEpoch"] == 0 and snapshot["startOffset"] == 10
    assert snapshot["deliveryCompleteCount"] == 0 and snapshot["stateBatches"] == []
    assert snapshot["createTimestamp"] == snapshot["writeTimestamp"] > 0
    update = payloads[1]["data"]
    assert update["snapshotEpoch"] == 0 and update["leaderEpoch"] == 0
    assert update["startOffset"] == 10 and update["deliveryCompleteCount"] == 6
    assert update["stateBatches"] == [
        {"firstOffset": 10, "lastOffset": 14, "deliveryState": 2, "deliveryCount": 1},
        {"firstOffset": 15, "lastOffset": 15, "deliveryState": 4, "deliveryCount": 5}]
    assert "deliveryCompleteCount" not in payloads[2]["data"] or \
        payloads[2]["data"]["deliveryCompleteCount"] == -1
    assert keys[3]["data"]["groupId"] == "g2" and payloads[3] is None
    assert "compresscodec: zstd" in out


def test_internal_records_of_share_group_state():
    """What the admin client may produce to ``__share_group_state``: records the share
    coordinator loads back, in the partition that holds their share-partition."""
    from types import SimpleNamespace

    from seglog.coordinator.internal_records import internal_record_errors

    home = r.share_state_partition("g", TOPIC_ID, 0, 3)
    key = r.encode_key(r.SHARE_SNAPSHOT, "g", TOPIC_ID, 0)
    good = r.encode_snapshot_value(ShareSnapshotValue(0, 0, 0, 0, 1, 1, ()))
    update_key = r.encode_key(r.SHARE_UPDATE, "g", TOPIC_ID, 0)
    records = [SimpleNamespace(key=key, value=good),
               SimpleNamespace(key=key, value=None),  # a tombstone
               SimpleNamespace(key=b"\x00\x07whatever", value=b"x"),  # unknown type: skipped
               SimpleNamespace(key=key, value=b"\x00\x00\x01"),  # does not parse
               SimpleNamespace(key=update_key, value=None),  # no update tombstones
               SimpleNamespace(key=None, value=good)]
    bad = internal_record_errors(r.SHARE_STATE_TOPIC, home, 3, records)
    assert [index for index, _why in bad] == [3, 4, 5]
    elsewhere = internal_record_errors(r.SHARE_STATE_TOPIC, (home + 1) % 3, 3, records[:1])
    assert elsewhere and "belongs to partition" in elsewhere[0][1]
