"""The share group coordinator without a broker (Kafka's GroupMetadataManager share-group
rules): epochs, fencing, the initialize-then-assign flow, added partitions initialized from
offset 0, records round trip, session expiry."""

from __future__ import annotations

import uuid

import pytest

from seglog import error_codes as codes
from seglog.coordinator import share_group as sg
from seglog.coordinator import share_group_records as rec

T1 = uuid.UUID(int=11)


def _coordinator(topics):
    return sg.ShareGroupCoordinator(sg.ShareGroupConfig(assignment_interval_ms=0),
                                    lambda: topics)


def _beat(c, member, epoch, topics=None, now_ms=1000):
    return c.heartbeat(group_id="g", member_id=member, member_epoch=epoch, rack_id=None,
                       subscribed_topic_names=topics, client_id="c", client_host="/h",
                       now_ms=now_ms)


def test_join_initialize_then_assign():
    topics = {"t": sg.TopicMeta(T1, 2)}
    c = _coordinator(topics)
    r = _beat(c, "m", 0, ["t"])
    assert (r.member_epoch, dict(r.assignment or {})) == (2, {})
    assert r.initialize is not None
    assert r.initialize.offsets == {T1: {0: -1, 1: -1}} and r.initialize.state_epoch == 2
    # Asked once: the next heartbeat does not ask again while it is under way.
    assert _beat(c, "m", 2).initialize is None
    c.initialized("g", {T1: {0, 1}})
    r = _beat(c, "m", 2)
    assert r.member_epoch == 3 and r.assignment == {T1: frozenset({0, 1})}
    # More partitions: only the new one, from offset 0 (the topic is known).
    topics["t"] = sg.TopicMeta(T1, 3)
    r = _beat(c, "m", 3)
    assert r.initialize is not None and r.initialize.offsets == {T1: {2: 0}}


def test_failed_initialization_is_asked_again():
    c = _coordinator({"t": sg.TopicMeta(T1, 1)})
    r = _beat(c, "m", 0, ["t"])
    assert r.initialize is not None
    c.uninitialized("g", {T1: {0}})
    assert _beat(c, "m", r.member_epoch).initialize is not None


def test_epoch_checks():
    c = _coordinator({"t": sg.TopicMeta(T1, 1)})
    r = _beat(c, "m", 0, ["t"])
    with pytest.raises(sg.ShareGroupError) as info:
        _beat(c, "m", r.member_epoch + 1)
    assert info.value.error_code == codes.FENCED_MEMBER_EPOCH
    c.initialized("g", {T1: {0}})
    r2 = _beat(c, "m", r.member_epoch)
    assert r2.member_epoch == r.member_epoch + 1
    assert _beat(c, "m", r.member_epoch).member_epoch == r2.member_epoch  # the previous epoch
    with pytest.raises(sg.ShareGroupError) as info:
        _beat(c, "m", r.member_epoch - 1)
    assert info.value.error_code == codes.FENCED_MEMBER_EPOCH
    with pytest.raises(sg.ShareGroupError) as info:
        _beat(c, "x", 1)
    assert info.value.error_code == codes.UNKNOWN_MEMBER_ID
    with pytest.raises(sg.ShareGroupError) as info:
        c.heartbeat(group_id="nope", member_id="m", member_epoch=1, rack_id=None,
                    subscribed_topic_names=None, client_id="", client_host="", now_ms=0)
    assert info.value.error_code == codes.GROUP_ID_NOT_FOUND


def test_records_round_trip_and_session_expiry():
    topics = {"t": sg.TopicMeta(T1, 2)}
    c = _coordinator(topics)
    r = _beat(c, "m", 0, ["t"], now_ms=1000)
    c.initialized("g", {T1: {0, 1}})
    r = _beat(c, "m", r.member_epoch, now_ms=1000)
    written = c.records("g")
    loaded = _coordinator(topics)
    records = []
    for key, value in written.items():
        record_type, group_id, member_id = rec.decode_key(key)
        records.append(rec.ShareRecord(record_type, group_id, member_id,
                                       rec.decode_value(record_type, value)))
    assert loaded.load_records(records, now_ms=5000) == ["g"]
    assert loaded.describe("g") == c.describe("g")
    assert loaded.records("g") == written
    assert loaded.poll(5000 + 44_999) == []
    assert loaded.poll(5000 + 45_000) == [("g", "m")]
    assert loaded.state("g") == sg.EMPTY
