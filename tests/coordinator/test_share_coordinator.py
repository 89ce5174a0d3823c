"""The share coordinator (Kafka 4.4's ShareCoordinatorShard over ``__share_group_state``) of a
Store: the five operations with Kafka's fencing and errors, snapshots every N updates, the
batch combiner (PersisterStateBatchCombiner's cases), loading back after a reopen (both
backends), a partition that does not load, and the offsets below which records are
redundant."""

from __future__ import annotations

import time
import uuid

import pytest

import seglog
from seglog import error_codes as codes
from seglog.coordinator import share_state_records as r
from seglog.coordinator.share_coordinator import (ShareCoordinatorConfig, ShareState,
                                                  StateBatch, combine_state_batches)


def _b(first, last, state, count):
    return StateBatch(first, last, state, count)


# --- PersisterStateBatchCombiner ---------------------------------------------------------


@pytest.mark.parametrize("so_far, new, start, expected", [
    # nothing
    ([], [], 0, []),
    # pruned below the start offset, cut at it
    ([_b(100, 130, 0, 1)], [], 120, [_b(120, 130, 0, 1)]),
    ([_b(100, 110, 0, 1)], [_b(111, 130, 0, 1)], 120, [_b(120, 130, 0, 1)]),
    # -1: nothing pruned
    ([_b(100, 110, 0, 1)], [], -1, [_b(100, 110, 0, 1)]),
    # higher delivery count wins the overlap
    ([_b(100, 110, 0, 1)], [_b(105, 115, 2, 2)], 100,
     [_b(100, 104, 0, 1), _b(105, 115, 2, 2)]),
    # same count: higher state wins, the rest of the old batch stays
    ([_b(100, 110, 0, 1)], [_b(105, 108, 2, 1)], 100,
     [_b(100, 104, 0, 1), _b(105, 108, 2, 1), _b(109, 110, 0, 1)]),
    # a lower count loses whatever its order
    ([_b(100, 110, 2, 3)], [_b(105, 108, 0, 1)], 100, [_b(100, 110, 2, 3)]),
    # neighbours with the same state and count coalesce
    ([_b(100, 104, 0, 1)], [_b(105, 110, 0, 1)], 100, [_b(100, 110, 0, 1)]),
    # gaps stay gaps
    ([_b(100, 101, 0, 1)], [_b(105, 106, 4, 2)], 100, [_b(100, 101, 0, 1), _b(105, 106, 4, 2)]),
])
def test_combine_state_batches(so_far, new, start, expected):
    assert combine_state_batches(so_far, new, start) == expected


# --- the coordinator of a Store -----------------------------------------------------------


@pytest.fixture
def store(tmp_path, backend):
    s = seglog.Store(tmp_path / "data", backend=backend, offsets_topic_partitions=3)
    s.create_topic("t", 2)
    yield s
    s.close()


def _records(store):
    """``[(type, key, value or None)]`` of every record of ``__share_group_state``."""
    out = []
    topic = store.topic(r.SHARE_STATE_TOPIC)
    for p in range(topic.partitions):
        log = topic.log(p)
        for rec in log.records(start=log.start_offset, max_offset=log.end_offset):
            key = r.decode_key(bytes(rec.key))
            value = None if rec.value is None else r.decode_value(key.record_type,
                                                                  bytes(rec.value))
            out.append((key.record_type, key, value))
    return out


def test_initialize_read_write_delete(store):
    tid = store.topic("t").uuid
    share = store.share_coordinator()
    # Never initialized: read and write are INVALID_REQUEST with Kafka's messages; the
    # summary says nothing is there.
    code, state = share.read_state("g", tid, 0, 0)
    assert (code, state) == (codes.INVALID_REQUEST, None)
    assert code.message == "Read operation on uninitialized share partition not allowed."
    code = share.write_state("g", tid, 0, ShareState(0, 0, (), 0))
    assert code == codes.INVALID_REQUEST
    assert code.message == "Write operation on uninitialized share partition not allowed."
    assert tuple(share.read_state_summary("g", tid, 0)) == (0, -1, 0, 0, -1)

    assert share.initialize_state("g", tid, 0, 1, 100) == 0
    code, state = share.read_state("g", tid, 0, 5)
    assert code == 0 and state == ShareState(1, 100, (), 5, 0)
    assert share.write_state("g", tid, 0, ShareState(
        1, 100, (_b(100, 104, 2, 1), _b(105, 109, 0, 1)), 5, 5)) == 0
    assert share.write_state("g", tid, 0, ShareState(1, 105, (_b(105, 106, 4, 2),), 5, 7)) == 0
    code, state = share.read_state("g", tid, 0, 5)
    assert code == 0
    assert state == ShareState(1, 105, (_b(105, 106, 4, 2), _b(107, 109, 0, 1)), 5, 7)
    assert tuple(share.read_state_summary("g", tid, 0)) == (0, 105, 1, 5, 7)

    assert share.delete_state("g", tid, 0) == 0
    assert share.read_state("g", tid, 0, 5)[0] == codes.INVALID_REQUEST
    assert share.delete_state("g", tid, 0) == 0  # nothing there: no error, nothing written
    types = [(t, v is None) for t, _k, v in _records(store)]
    # init snapshot, leader-epoch update (read at 5), two updates, tombstone
    assert types == [(0, False), (1, False), (1, False), (1, False), (0, True)]


def test_fencing_and_invalid_requests(store):
    tid = store.topic("t").uuid
    share = store.share_coordinator()
    assert share.initialize_state("g", tid, 1, 3, 0) == 0
    assert share.read_state("g", tid, 1, 4)[0] == 0  # records leader epoch 4
    # older leader epoch: fenced on read and write
    assert share.read_state("g", tid, 1, 3)[0] == codes.FENCED_LEADER_EPOCH
    assert share.write_state("g", tid, 1, ShareState(3, 0, (), 3)) == codes.FENCED_LEADER_EPOCH
    # older state epoch: fenced on write and initialize
    assert share.write_state("g", tid, 1, ShareState(2, 0, (), 4)) == codes.FENCED_STATE_EPOCH
    assert share.initialize_state("g", tid, 1, 2, 0) == codes.FENCED_STATE_EPOCH
    # newer ones pass
    assert share.write_state("g", tid, 1, ShareState(3, 0, (_b(0, 0, 2, 1),), 6)) == 0
    # negative values: INVALID_REQUEST with Kafka's messages
    code = share.read_state("g", tid, 1, -1)[0]
    assert code == codes.INVALID_REQUEST
    assert code.message == "The leader epoch cannot be a negative number."
    code = share.write_state("g", tid, 1, ShareState(-1, 0, (), 6))
    assert (code, code.message) == (codes.INVALID_REQUEST,
                                    "The state epoch cannot be a negative number.")
    code = share.initialize_state("g", tid, -1, 0, 0)
    assert (code, code.message) == (codes.INVALID_REQUEST,
                                    "The partition id cannot be a negative number.")
    # unknown topic id, partition past the count
    assert share.initialize_state("g", uuid.uuid4(), 0, 0, 0) == codes.UNKNOWN_TOPIC_OR_PARTITION
    assert share.initialize_state("g", tid, 2, 0, 0) == codes.UNKNOWN_TOPIC_OR_PARTITION
    assert share.read_state_summary("g", uuid.uuid4(), 0).error_code == \
        codes.UNKNOWN_TOPIC_OR_PARTITION
    # re-initializing with a newer state epoch: a fresh snapshot, batches gone
    assert share.initialize_state("g", tid, 1, 4, 10) == 0
    code, state = share.read_state("g", tid, 1, 6)
    assert code == 0 and state.state_epoch == 4 and state.start_offset == 10
    assert state.batches == ()


def test_snapshot_every_n_updates(store):
    tid = store.topic("t").uuid
    share = store.share_coordinator()
    share.set_config(ShareCoordinatorConfig(state_topic_num_partitions=3,
                                            snapshot_update_records_per_snapshot=3))
    assert share.initialize_state("g", tid, 0, 0, 0) == 0
    for i in range(7):
        assert share.write_state("g", tid, 0, ShareState(0, 0, (_b(i, i, 2, 1),), 0)) == 0
    written = _records(store)
    assert [t for t, _k, _v in written] == [0, 1, 1, 1, 0, 1, 1, 1]
    snapshot = written[4][2]
    assert snapshot.snapshot_epoch == 1 and snapshot.batches == (_b(0, 3, 2, 1),)
    assert written[5][2].snapshot_epoch == 1  # updates name the snapshot they follow
    code, state = share.read_state("g", tid, 0, 0)
    assert state.batches == (_b(0, 6, 2, 1),)


def test_state_loads_back_after_reopen(tmp_path, backend):
    path = tmp_path / "data"
    with seglog.Store(path, backend=backend, offsets_topic_partitions=3) as s:
        s.create_topic("t", 2)
        tid = s.topic("t").uuid
        share = s.share_coordinator()
        share.set_config(ShareCoordinatorConfig(3, 2))
        for group in ("a", "b", "c"):
            assert share.initialize_state(group, tid, 1, 2, 50) == 0
            for i in range(5):
                assert share.write_state(group, tid, 1, ShareState(
                    2, 50 + i, (_b(50 + i, 60, 0, i + 1),), 1, i)) == 0
        assert share.delete_state("c", tid, 1) == 0
        # A write keeps the leader epoch recorded (0); a read records its own (1).
        assert share.read_state_summary("a", tid, 1).leader_epoch == 0
        states = {g: share.read_state(g, tid, 1, 1) for g in "ab"}
        before = {g: share.read_state_summary(g, tid, 1) for g in "abc"}
        assert before["a"].leader_epoch == 1 and before["c"].start_offset == -1
    with seglog.Store(path, backend=backend, offsets_topic_partitions=3) as s:
        share = s.share_coordinator()
        assert {g: share.read_state_summary(g, tid, 1) for g in "abc"} == before
        assert {g: share.read_state(g, tid, 1, 1) for g in "ab"} == states
        assert states["a"][1] == ShareState(2, 54, (_b(54, 60, 0, 5),), 1, 4)
        # the fencing state came back too
        assert share.write_state("a", tid, 1, ShareState(1, 54, (), 1)) == \
            codes.FENCED_STATE_EPOCH
        assert share.read_state("a", tid, 1, 0)[0] == codes.FENCED_LEADER_EPOCH


def test_a_partition_that_does_not_load_is_not_served(tmp_path):
    path = tmp_path / "data"
    with seglog.Store(path, offsets_topic_partitions=1) as s:
        s.create_topic("t", 1)
        tid = s.topic("t").uuid
        assert s.share_coordinator().initialize_state("g", tid, 0, 0, 0) == 0
        # A record whose value does not parse, as a hand-edited log might hold.
        key = r.encode_key(r.SHARE_UPDATE, "g", tid, 0)
        s.topic(r.SHARE_STATE_TOPIC).log(0).append_batch([b"\x00\x00\x01"], keys=[key])
    with seglog.Store(path, offsets_topic_partitions=1) as s:
        share = s.share_coordinator()
        assert 0 in share.load_failures and "offset 1" in share.load_failures[0]
        assert share.read_state("g", tid, 0, 0)[0] == codes.NOT_COORDINATOR


def test_last_redundant_offset(store):
    tid = store.topic("t").uuid
    share = store.share_coordinator()
    share.set_config(ShareCoordinatorConfig(3, 500))
    # Two groups whose state is in the same __share_group_state partition.
    a, b = [g for g in (f"g{i}" for i in range(100))
            if share.partition_for(g, tid, 0) == share.partition_for("g0", tid, 0)][:2]
    where = share.partition_for(a, tid, 0)
    assert share.initialize_state(a, tid, 0, 0, 0) == 0  # offset 0
    assert share.initialize_state(b, tid, 0, 0, 0) == 0  # offset 1
    assert share.last_redundant_offset(where) is None  # offset 0 is still needed
    assert share.write_state(a, tid, 0, ShareState(0, 0, (), 0)) == 0  # offset 2 (update)
    assert share.initialize_state(a, tid, 0, 1, 0) == 0  # offset 3: a's new snapshot
    assert share.last_redundant_offset(where) == 1  # b's snapshot at 1 is the oldest needed
    assert share.delete_state(b, tid, 0) == 0  # offset 4
    assert share.last_redundant_offset(where) == 3


def test_cold_partitions_get_snapshots(store):
    tid = store.topic("t").uuid
    share = store.share_coordinator()
    a, b = [g for g in (f"g{i}" for i in range(100))
            if share.partition_for(g, tid, 0) == share.partition_for("g0", tid, 0)][:2]
    where = share.partition_for(a, tid, 0)
    assert share.initialize_state(a, tid, 0, 0, 0) == 0
    assert share.initialize_state(b, tid, 0, 0, 0) == 0
    assert share.write_state(a, tid, 0, ShareState(0, 0, (_b(0, 4, 2, 1),), 0)) == 0
    # Not cold for an hour: nothing written.
    assert share.snapshot_cold_partitions(where, 3_600_000) == 0
    assert len(_records(store)) == 3
    time.sleep(0.005)
    assert share.snapshot_cold_partitions(where, 0) == 0
    written = _records(store)[3:]
    assert sorted(k.group_id for _t, k, _v in written) == sorted([a, b])
    assert all(t == r.SHARE_SNAPSHOT and v.snapshot_epoch == 1 for t, _k, v in written)
    snapshot_a = next(v for _t, k, v in written if k.group_id == a)
    assert snapshot_a.batches == (_b(0, 4, 2, 1),)
    assert snapshot_a.write_timestamp_ms > snapshot_a.create_timestamp_ms
    # Everything was cold-snapshotted already: Kafka skips the partition.
    assert share.snapshot_cold_partitions(where, 0) == 0
    assert len(_records(store)) == 5
    # Every record before the last snapshots is redundant now.
    assert share.last_redundant_offset(where) == 3


def test_deleting_a_topic_deletes_its_share_state(store):
    tid = store.topic("t").uuid
    store.create_topic("u", 1)
    other = store.topic("u").uuid
    share = store.share_coordinator()
    assert share.initialize_state("g", tid, 0, 0, 0) == 0
    assert share.initialize_state("g", other, 0, 0, 0) == 0
    store.delete_topic("t")
    assert share.share_partitions() == [("g", other, 0)]
    tombstones = [k for t, k, v in _records(store) if v is None]
    assert [(k.group_id, k.topic_id, k.partition) for k in tombstones] == [("g", tid, 0)]


def test_inverted_batches_as_kafka(store):
    """A batch whose first offset is above its last: alone it is kept as sent (Kafka's
    combiner returns a single batch untouched); met by the sweep, the write fails with
    UNKNOWN_SERVER_ERROR and nothing is written (Kafka's combiner fails on it too)."""
    tid = store.topic("t").uuid
    share = store.share_coordinator()
    assert share.initialize_state("g", tid, 0, 0, 0) == 0
    assert share.write_state("g", tid, 0, ShareState(0, 0, (_b(10, 5, 2, 1),), 0)) == 0
    assert share.read_state("g", tid, 0, 0)[1].batches == (_b(10, 5, 2, 1),)
    before = len(_records(store))
    code = share.write_state("g", tid, 0, ShareState(0, 0, (_b(10, 5, 2, 1), _b(3, 4, 0, 1)),
                                                     0))
    assert code == codes.UNKNOWN_SERVER_ERROR
    assert code.message.startswith("Unable to write share group state: ")
    assert len(_records(store)) == before
    # Kafka's answer to a covering batch of the same priority (the inverted one's end
    # cancels it for a while): kept as Kafka keeps it.
    assert share.write_state("g", tid, 0, ShareState(0, 0, (_b(0, 20, 2, 1),), 0)) == 0
    assert share.read_state("g", tid, 0, 0)[1].batches == (_b(0, 5, 2, 1), _b(10, 20, 2, 1))
    with pytest.raises(ValueError):
        combine_state_batches([_b(10, 5, 2, 1)], [_b(3, 4, 0, 1)], 0)
