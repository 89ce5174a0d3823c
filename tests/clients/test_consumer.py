"""Consumer groups: assignment, rebalance, poll, positions, commits in __consumer_offsets."""

from __future__ import annotations

import threading
import time

import pytest

from seglog.coordinator import offsets_schema
from seglog.coordinator.assignors import RangeAssignor
from seglog.clients.consumer import CommitFailedError, ConsumerRecord, OffsetAndMetadata
from seglog.errors import (
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    ReadOnlyError,
)
from seglog.store import Store, TopicPartition

TP = TopicPartition


def open_store(path, backend, partitions=2, **kwargs):
    return Store(path, backend=backend, offsets_topic_partitions=partitions, **kwargs)


@pytest.fixture
def store(tmp_path, backend):
    with open_store(tmp_path, backend) as s:
        yield s


def fill(store, topic, partitions, per_partition):
    """Create ``topic`` and write ``per_partition`` records ``<p>-<i>`` to each partition."""
    t = store.create_topic(topic, partitions=partitions)
    for p in range(partitions if per_partition else 0):
        t.log(p).append_batch([f"{p}-{i}".encode() for i in range(per_partition)])
    return t


def drain(consumer, max_records=1000):
    out = []
    while True:
        records = consumer.poll(max_records=max_records)
        if not records:
            return out
        out.extend(records)


# --- assignment and rebalance ----------------------------------------------------------------


def test_range_assignment_and_rebalance_on_join_and_leave(store):
    fill(store, "t", 6, 0)
    a = store.consumer("g", ["t"], client_id="a")
    assert a.assignment() == {TP("t", p) for p in range(6)}
    group = store.group("g")
    gen1 = group.generation_id
    b = store.consumer("g", ["t"], client_id="b")
    assert group.generation_id == gen1 + 1
    # Range: members in member-id order ("a-..." < "b-...") take contiguous runs.
    assert a.assignment() == {TP("t", p) for p in range(3)}
    assert b.assignment() == {TP("t", p) for p in range(3, 6)}
    assert group.assignment() == RangeAssignor.assign(
        {a.member_id: ["t"], b.member_id: ["t"]}, {"t": 6})
    a.close()
    assert group.generation_id == gen1 + 2
    assert b.assignment() == {TP("t", p) for p in range(6)}
    b.close()
    assert group.state == "Empty" and group.members() == []


def test_round_robin_assignment(store):
    fill(store, "x", 3, 0)
    fill(store, "y", 2, 0)
    consumers = [store.consumer("g", ["x", "y"], client_id=c,
                                partition_assignment_strategy="roundrobin") for c in "abc"]
    got = [sorted(c.assignment()) for c in consumers]
    assert got == [[TP("x", 0), TP("y", 0)], [TP("x", 1), TP("y", 1)], [TP("x", 2)]]


def test_group_protocol_must_match(store):
    fill(store, "t", 2, 0)
    store.consumer("g", ["t"])
    with pytest.raises(IllegalStateError):
        store.consumer("g", ["t"], partition_assignment_strategy="roundrobin")


def test_ten_members_six_partitions_four_idle_each_record_once(store):
    fill(store, "t", 6, 20)
    members = [store.consumer("g", ["t"], auto_offset_reset="earliest") for _ in range(10)]
    sizes = sorted(len(c.assignment()) for c in members)
    assert sizes == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    seen = []
    for _ in range(5):
        for c in members:
            seen += [(r.partition, r.offset) for r in c.poll(max_records=7)]
    assert sorted(seen) == [(p, i) for p in range(6) for i in range(20)]  # once each


def test_subscribing_to_a_topic_created_later(store):
    consumer = store.consumer("g", ["later"], auto_offset_reset="earliest")
    assert consumer.assignment() == set()
    fill(store, "later", 2, 3)
    assert consumer.assignment() == {TP("later", 0), TP("later", 1)}
    assert len(drain(consumer)) == 6


def test_idle_member_wakes_when_a_rebalance_gives_it_work(store):
    fill(store, "t", 1, 5)
    busy = store.consumer("g", ["t"], auto_offset_reset="earliest")
    idle = store.consumer("g", ["t"], auto_offset_reset="earliest")
    owner, waiter = (busy, idle) if busy.assignment() else (idle, busy)
    threading.Timer(0.05, owner.close).start()
    started = time.monotonic()
    records = waiter.poll(timeout_ms=5000)
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    assert time.monotonic() - started < 2


# --- poll and positions ----------------------------------------------------------------------


def test_poll_returns_records_in_order_with_positions(store):
    fill(store, "t", 2, 10)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    first = consumer.poll(max_records=4)
    assert len(first) == 4 and all(isinstance(r, ConsumerRecord) for r in first)
    records = first + drain(consumer)
    for p in range(2):
        mine = [r for r in records if r.partition == p]
        assert [r.offset for r in mine] == list(range(10))
        assert [r.value for r in mine] == [f"{p}-{i}".encode() for i in range(10)]
        assert consumer.position(("t", p)) == 10
    assert consumer.poll(timeout_ms=0) == []


def test_poll_waits_for_new_data(store):
    fill(store, "t", 1, 0)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    log = store.topic("t").log(0)
    threading.Timer(0.05, lambda: log.append(b"late")).start()
    started = time.monotonic()
    records = consumer.poll(timeout_ms=5000)
    assert [r.value for r in records] == [b"late"]
    assert time.monotonic() - started < 2


def test_poll_waits_across_partitions(store):
    fill(store, "t", 3, 0)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    producer = store.producer(linger_ms=0)
    threading.Timer(0.05, lambda: producer.send("t", b"late", partition=2)).start()
    records = consumer.poll(timeout_ms=5000)
    assert [(r.partition, r.value) for r in records] == [(2, b"late")]


def test_poll_timeout_with_nothing_to_read(store):
    fill(store, "t", 1, 0)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    started = time.monotonic()
    assert consumer.poll(timeout_ms=50) == []
    assert 0.04 <= time.monotonic() - started < 2


def test_seek_and_seek_to(store):
    fill(store, "t", 1, 10)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    tp = TP("t", 0)
    consumer.seek(tp, 7)
    assert [r.offset for r in consumer.poll()] == [7, 8, 9]
    consumer.seek_to_beginning()
    assert consumer.position(tp) == 0
    assert consumer.poll(max_records=2)[0].offset == 0
    consumer.seek_to_end([tp])
    assert consumer.position(tp) == 10 and consumer.poll() == []
    with pytest.raises(IllegalStateError):
        consumer.seek(TP("t", 5), 0)
    with pytest.raises(ValueError):
        consumer.seek(tp, -1)


def test_manual_assign_without_group(store):
    fill(store, "t", 2, 3)
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([("t", 1)])
    assert [r.value for r in consumer.poll()] == [b"1-0", b"1-1", b"1-2"]
    with pytest.raises(IllegalStateError):
        consumer.commit()
    with pytest.raises(ValueError):
        consumer.subscribe(["t"])


# --- auto_offset_reset -----------------------------------------------------------------------


def test_auto_offset_reset_variants(store):
    fill(store, "t", 1, 5)
    earliest = store.consumer("e", ["t"], auto_offset_reset="earliest")
    assert len(earliest.poll()) == 5
    latest = store.consumer("l", ["t"], auto_offset_reset="latest")
    assert latest.poll() == [] and latest.position(("t", 0)) == 5
    store.topic("t").log(0).append(b"new")
    assert [r.value for r in latest.poll()] == [b"new"]
    none = store.consumer("n", ["t"], auto_offset_reset="none")
    with pytest.raises(NoOffsetForPartitionError):
        none.poll()
    none.close()
    earliest.commit({("t", 0): 2})
    assert earliest.committed(("t", 0)) == 2
    earliest.close()
    # With a commit the policy is not needed.
    resumed = store.consumer("e", ["t"], auto_offset_reset="none")
    assert [r.offset for r in resumed.poll()] == [2, 3, 4, 5]


def test_committed_offset_out_of_range_is_reset(store):
    t = fill(store, "t", 1, 10)
    c = store.consumer("g", ["t"], auto_offset_reset="earliest")
    c.commit({("t", 0): 3})
    c.close()
    t.log(0).delete_records_before(6)
    c = store.consumer("g", ["t"], auto_offset_reset="earliest")
    assert c.poll()[0].offset == 6
    c.close()
    strict = store.consumer("g", ["t"], auto_offset_reset="none")
    with pytest.raises(OffsetOutOfRangeError):
        strict.poll()


# --- commits ---------------------------------------------------------------------------------


def test_commit_survives_restart_and_uses_kafka_schema(tmp_path, backend):
    with open_store(tmp_path, backend, partitions=3) as store:
        fill(store, "t", 2, 10)
        c = store.consumer("fraud", ["t"], auto_offset_reset="earliest")
        c.poll(max_records=15)
        c.commit()
        positions = {tp: c.position(tp) for tp in c.assignment()}
        c.commit({("t", 1): (4, "checkpoint")})
        positions[TP("t", 1)] = 4
    with open_store(tmp_path, backend, partitions=3) as store:
        group = store.group("fraud")
        assert {tp: om.offset for tp, om in group.committed_offsets().items()} == positions
        assert group.committed_offsets()[TP("t", 1)].metadata == "checkpoint"
        assert store.groups() == ["fraud"]
        c = store.consumer("fraud", ["t"], auto_offset_reset="none")
        assert {tp: c.position(tp) for tp in c.assignment()} == positions
        # The records are Kafka's: key v1 (group, topic, partition), value v3.
        offsets_topic = store.topic("__consumer_offsets")
        assert offsets_topic.partitions == 3
        assert offsets_topic.config.cleanup_policy == frozenset({"compact"})
        p = offsets_schema.offsets_partition_for_group("fraud", 3)
        records = list(offsets_topic.log(p).records())
        assert len(records) == 3
        key = offsets_schema.decode_key(records[-1].key)
        value = offsets_schema.decode_offset_commit_value(records[-1].value)
        assert key == offsets_schema.OffsetCommitKey("fraud", "t", 1, version=1)
        assert (value.version, value.offset, value.metadata) == (3, 4, "checkpoint")
        assert records[-1].key.startswith(b"\x00\x01\x00\x05fraud\x00\x01t")


def test_default_offsets_topic_has_50_partitions(tmp_path, backend):
    with Store(tmp_path, backend=backend) as store:
        assert store.offsets_topic_partitions == 50
        assert "__consumer_offsets" not in store.topics()  # made by the first commit
        fill(store, "t", 1, 1)
        c = store.consumer("g", ["t"], auto_offset_reset="earliest")
        c.poll()
        c.commit()
        assert store.topic("__consumer_offsets").partitions == 50
        p = offsets_schema.offsets_partition_for_group("g", 50)
        assert store.topic("__consumer_offsets").end_offsets()[p] == 1


def test_existing_offsets_topic_keeps_its_partition_count(tmp_path, backend):
    with open_store(tmp_path, backend, partitions=3) as store:
        fill(store, "t", 1, 1)
        store.consumer("g", ["t"], auto_offset_reset="earliest").commit({("t", 0): 1})
    with open_store(tmp_path, backend, partitions=7) as store:
        assert store.topic("__consumer_offsets").partitions == 3
        assert store.group("g").committed(("t", 0)) == 1


def test_tombstones_delete_committed_offsets(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        fill(store, "gone", 1, 3)
        fill(store, "kept", 1, 3)
        c = store.consumer("g", ["gone", "kept"], auto_offset_reset="earliest")
        drain(c)
        c.commit()
        c.close()
        store.delete_topic("gone")  # Kafka's coordinator deletes the topic's offsets
        assert store.group("g").committed(("gone", 0)) is None
    with open_store(tmp_path, backend) as store:
        assert store.group("g").committed_offsets() == {
            TP("kept", 0): store.group("g").committed_offsets()[TP("kept", 0)]}
        assert store.group("g").committed(("kept", 0)) == 3
        assert store.group("g").committed(("gone", 0)) is None


def test_close_without_commit_moves_partitions_to_last_commit(store):
    fill(store, "t", 2, 10)
    a = store.consumer("g", ["t"], auto_offset_reset="earliest", client_id="a")
    b = store.consumer("g", ["t"], auto_offset_reset="earliest", client_id="b")
    assert a.assignment() == {TP("t", 0)} and b.assignment() == {TP("t", 1)}
    got = a.poll(max_records=5)
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
    a.commit()  # 5
    assert [r.offset for r in a.poll(max_records=3)] == [5, 6, 7]
    a.close()  # crash-like: 5..7 handled but not committed
    assert b.assignment() == {TP("t", 0), TP("t", 1)}
    resumed = [r for r in drain(b) if r.partition == 0]
    assert [r.offset for r in resumed] == [5, 6, 7, 8, 9]
    assert store.group("g").committed(("t", 0)) == 5  # close committed nothing


def test_commit_after_losing_partitions_fails(store):
    fill(store, "t", 2, 4)
    a = store.consumer("g", ["t"], auto_offset_reset="earliest", client_id="a")
    a.poll()
    store.consumer("g", ["t"], auto_offset_reset="earliest", client_id="b")
    with pytest.raises(CommitFailedError):
        a.commit()
    assert a.assignment() == {TP("t", 0)}
    assert store.group("g").committed(("t", 1)) is None
    a.commit()  # the new generation: allowed
    assert store.group("g").committed(("t", 0)) == 4


def test_commit_validation(store):
    fill(store, "t", 1, 1)
    c = store.consumer("g", ["t"])
    with pytest.raises(ValueError):
        c.commit({("t", 0): -1})
    with pytest.raises(ValueError):
        c.commit({("t", 0): OffsetAndMetadata(0, "x" * 5000)})
    c.close()
    with pytest.raises(IllegalStateError):
        c.poll()
    c.close()  # idempotent


def test_second_group_rereads_everything(store):
    fill(store, "t", 3, 4)
    first = store.consumer("one", ["t"], auto_offset_reset="earliest")
    assert len(drain(first)) == 12
    first.commit()
    second = store.consumer("two", ["t"], auto_offset_reset="earliest")
    assert len(drain(second)) == 12
    assert store.group("two").committed(("t", 0)) is None


def test_read_only_store_follows_a_writer(tmp_path, backend):
    with open_store(tmp_path, backend) as writer:
        fill(writer, "t", 1, 2)
        with open_store(tmp_path, backend, read_only=True) as reader:
            consumer = reader.consumer(None, auto_offset_reset="earliest")
            consumer.assign([("t", 0)])
            assert [r.offset for r in consumer.poll()] == [0, 1]
            producer = writer.producer(linger_ms=0)
            threading.Timer(0.05, lambda: producer.send("t", b"late")).start()
            assert [r.value for r in consumer.poll(timeout_ms=5000)] == [b"late"]
            fill(writer, "new", 2, 1)
            assert "new" not in reader.topics()
            assert reader.refresh()
            assert reader.topic("new").end_offsets() == {0: 1, 1: 1}
            writer.delete_topic("new")
            assert reader.refresh() and "new" not in reader.topics()
            with pytest.raises(ReadOnlyError):
                writer.refresh()


def test_compacted_offsets_topic_keeps_the_last_commit_per_key(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        fill(store, "t", 2, 50)
        store._coordinators.internal_topic("__consumer_offsets")  # made now so that its config can be tightened for the test
        offsets_log = store.topic("__consumer_offsets").log(0)
        offsets_log.update_config(offsets_log.config.replace(segment_bytes=1024))
        c = store.consumer("g", ["t"], auto_offset_reset="earliest")
        for _ in range(40):
            c.poll(max_records=2)
            c.commit()
        c.commit({("t", 1): 7})
        expected = {tp: om.offset for tp, om in store.group("g").committed_offsets().items()}
        before = offsets_log.end_offset
        stats = store.compact()
        assert TopicPartition("__consumer_offsets", 0) in stats
        kept = list(offsets_log.records())
        assert len(kept) < before and offsets_log.end_offset == before  # offsets not renumbered
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        got = {tp: om.offset for tp, om in store.group("g").committed_offsets().items()}
        assert got == expected and got[TopicPartition("t", 1)] == 7


def test_partition_that_moved_away_and_back_restarts_from_the_commit(store):
    fill(store, "t", 2, 10)
    a = store.consumer("g", ["t"], auto_offset_reset="earliest", client_id="a")
    a.seek(("t", 0), 3)  # as if a had read 0..2 of partition 0, committing nothing
    b = store.consumer("g", ["t"], auto_offset_reset="earliest", client_id="0b")  # sorts first
    # Between a's polls: partition 0 goes to b, b reads and commits it, then b leaves.
    assert b.assignment() == {TP("t", 0)}
    assert len(drain(b)) == 10
    b.commit()
    b.close()
    # a owns both partitions again; its old position 3 of partition 0 is stale.
    assert a.position(("t", 0)) == 10


def test_poll_columns_hands_out_numpy_columns(store):
    fill(store, "t", 2, 30)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    first = consumer.poll(max_records=5)  # per-record poll, then columns from the position
    got: dict = {}
    for r in first:
        got.setdefault(TP(r.topic, r.partition), []).append(r.offset)
    total = len(first)
    while True:
        columns = consumer.poll_columns(max_records=16)
        if not columns:
            break
        assert sum(len(c) for c in columns.values()) <= 16
        for tp, c in columns.items():
            assert c.offsets.dtype.kind == "i"
            got.setdefault(tp, []).extend(int(o) for o in c.offsets)
            assert c.value(0) == f"{tp.partition}-{int(c.offsets[0])}".encode()
            total += len(c)
    assert total == 60
    assert got == {TP("t", 0): list(range(30)), TP("t", 1): list(range(30))}
    assert consumer.position(("t", 0)) == 30
    producer = store.producer(linger_ms=0)
    threading.Timer(0.05, lambda: producer.send("t", b"late", partition=0)).start()
    late = consumer.poll_columns(timeout_ms=5000)
    assert [int(o) for o in late[TP("t", 0)].offsets] == [30]


def test_poll_columns_of_an_8_mib_fetch_takes_the_two_thread_decode(store, monkeypatch):
    # A read of max_partition_fetch_bytes 8 MiB is whole batches, a little under 8 MiB: the
    # native decode's two-thread path must still take it (forced on here whatever the CPUs
    # and the load; the twin has one path), and the columns are the same as poll's records.
    import sys

    topic = store.create_topic("big", partitions=1)
    values = [b"%07d" % i + b"v" * 93 for i in range(80_000)]  # ~8.9 MiB of batches
    for i in range(0, len(values), 1000):
        topic.log(0).append_batch(values[i:i + 1000])
    native = store.backend == "native"
    if native:
        codec = sys.modules["seglog._native.codec"]
        monkeypatch.setattr(codec, "_THREADED_CPUS", True)
        monkeypatch.setattr(codec, "_THREADED_LOAD_MAX", float("inf"))
        before = codec._threaded_decode_count()
    consumer = store.consumer(auto_offset_reset="earliest",
                              max_partition_fetch_bytes=8 << 20)
    consumer.assign([("big", 0)])
    columns = consumer.poll_columns(max_records=1 << 20)[TP("big", 0)]
    assert 60_000 < len(columns) < 80_000  # one read: under 8 MiB
    if native:
        assert codec._threaded_decode_count() == before + 1
    n = len(columns)
    assert [int(o) for o in columns.offsets] == list(range(n))
    assert [columns.value(i) for i in (0, n // 2, n - 1)] == [values[0], values[n // 2],
                                                              values[n - 1]]
    assert consumer.position(("big", 0)) == n


def test_expire_offsets_of_empty_groups(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        fill(store, "t", 1, 3)
        old = store.consumer("old", ["t"], auto_offset_reset="earliest")
        old.commit({("t", 0): 1})
        old.close()
        live = store.consumer("live", ["t"], auto_offset_reset="earliest")
        live.commit({("t", 0): 2})
        now = int(time.time() * 1000)
        assert store.expire_offsets(now_ms=now, retention_ms=60_000) == {}
        removed = store.expire_offsets(now_ms=now + 120_000, retention_ms=60_000)
        assert removed == {"old": [TP("t", 0)]}  # the live group keeps its offsets
        assert store.group("old").committed(("t", 0)) is None
        assert store.group("live").committed(("t", 0)) == 2
    with open_store(tmp_path, backend) as store:
        assert store.groups() == ["live"]


def test_small_polls_walk_one_read_in_order(store):
    t = store.create_topic("t")
    t.log(0).append_batch([str(i).encode() for i in range(500)])  # one batch, one read
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    offsets = []
    for _ in range(60):
        offsets += [r.offset for r in consumer.poll(max_records=4)]
        if len(offsets) == 100:
            consumer.seek(("t", 0), 400)  # a seek drops what the read decoded
    assert offsets == list(range(100)) + list(range(400, 500))
    assert consumer.position(("t", 0)) == 500


def test_polls_decode_a_read_batch_by_batch(store):
    """A read's batches are decoded as polls need them: polls of sizes that split batches,
    a seek into the middle of a read, appends after the read and poll_columns in between
    still give every record once, in order, from the position."""
    t = store.create_topic("t")
    log = t.log(0)
    for b in range(40):
        log.append_batch([b"%d" % (b * 7 + i) for i in range(7)])  # 7 records per batch
    consumer = store.consumer(auto_offset_reset="earliest", max_partition_fetch_bytes=1 << 20)
    consumer.assign([("t", 0)])
    got = []
    for size in (3, 5, 7, 1, 11, 2):
        got += [int(r.value) for r in consumer.poll(max_records=size)]
    assert got == list(range(29)) and consumer.position(("t", 0)) == 29
    consumer.seek(("t", 0), 100)  # inside the read the consumer holds
    assert [int(r.value) for r in consumer.poll(max_records=4)] == [100, 101, 102, 103]
    columns = consumer.poll_columns(max_records=3)[TP("t", 0)]
    assert columns.offsets.tolist() == [104, 105, 106]
    log.append_batch([b"%d" % i for i in range(280, 290)])  # after the read
    rest = []
    while len(rest) < 290 - 107:
        rest += [int(r.value) for r in consumer.poll(max_records=13)]
    assert rest == list(range(107, 290)) and consumer.position(("t", 0)) == 290
    assert consumer.poll(max_records=5) == []


def test_poll_across_partitions_sees_direct_log_appends(store):
    fill(store, "t", 3, 0)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    log = store.topic("t").log(1)
    threading.Timer(0.05, lambda: log.append(b"direct")).start()  # no Producer to signal
    started = time.monotonic()
    records = consumer.poll(timeout_ms=5000)
    assert [(r.partition, r.value) for r in records] == [(1, b"direct")]
    assert time.monotonic() - started < 2


def test_group_administration(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        fill(store, "t", 2, 5)
        group = store.group("g")
        group.alter_offsets({("t", 0): 3, ("t", 1): OffsetAndMetadata(4, "set by admin")})
        member = store.consumer("g", ["t"], auto_offset_reset="none")
        assert {tp: member.position(tp) for tp in member.assignment()} == {TP("t", 0): 3,
                                                                           TP("t", 1): 4}
        with pytest.raises(CommitFailedError):
            group.alter_offsets({("t", 0): 0})  # not while the group has members
        with pytest.raises(IllegalStateError):
            group.delete_offsets([("t", 0)])
        with pytest.raises(IllegalStateError):
            store.delete_group("g")
        member.close()
        group.delete_offsets([("t", 0)])
        assert group.committed(("t", 0)) is None and group.committed(("t", 1)) == 4
        store.delete_group("g")
        assert store.groups() == []
    with open_store(tmp_path, backend) as store:
        assert store.groups() == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_membership_never_loses_a_record(store, seed):
    """A model test: members join, poll, commit after handling and die (close without
    commit) at random. At every step each partition has exactly one owner, a member only
    gets records of partitions it owns, and in the end every record was handled (at least
    once: process-then-commit)."""
    import random

    rng = random.Random(seed)
    fill(store, "t", 4, 25)
    everything = {(p, i) for p in range(4) for i in range(25)}
    group = store.group("g")
    members, handled = [], []
    for _ in range(300):
        action = rng.random()
        if action < 0.15 and len(members) < 6 or not members:
            members.append(store.consumer("g", ["t"], auto_offset_reset="earliest"))
        elif action < 0.25 and len(members) > 1:
            members.pop(rng.randrange(len(members))).close()  # dies: no commit
        else:
            member = rng.choice(members)
            records = member.poll(max_records=rng.randint(1, 7))
            owned = member.assignment()
            assert all(TP(r.topic, r.partition) in owned for r in records)
            handled += [(r.partition, r.offset) for r in records]
            if records and rng.random() < 0.6:
                try:
                    member.commit()
                except CommitFailedError:
                    pass  # lost partitions meanwhile: their new owner re-reads them
        owners = [tp for tps in group.assignment().values() for tp in tps]
        assert sorted(owners) == [TP("t", p) for p in range(4)]  # each exactly once
    last = store.consumer("g", ["t"], auto_offset_reset="earliest")
    for member in members:
        member.close()
    handled += [(r.partition, r.offset) for r in drain(last)]
    assert set(handled) == everything  # nothing lost


def test_read_committed_skips_aborted_and_stops_at_the_last_stable_offset(store):
    log = store.create_topic("t").log(0)
    log.append_batch([b"a", b"b"])  # 0, 1
    log.append_batch([b"c", b"d"], producer_id=7, producer_epoch=0, base_sequence=0,
                     is_transactional=True)  # 2, 3: open transaction
    committed = store.consumer("rc", ["t"], auto_offset_reset="earliest",
                               isolation_level="read_committed")
    uncommitted = store.consumer("ru", ["t"], auto_offset_reset="earliest")
    assert [r.value for r in uncommitted.poll()] == [b"a", b"b", b"c", b"d"]
    assert [r.value for r in committed.poll()] == [b"a", b"b"]
    assert committed.end_offsets([("t", 0)]) == {TP("t", 0): 2}  # the last stable offset
    started = time.monotonic()
    assert committed.poll(timeout_ms=100) == []  # waits for the transaction to end
    assert time.monotonic() - started >= 0.09
    log.append_txn_marker(producer_id=7, producer_epoch=0, coordinator_epoch=0, commit=False)
    log.append_batch([b"e"], producer_id=8, producer_epoch=0, base_sequence=0,
                     is_transactional=True)  # 5
    log.append_txn_marker(producer_id=8, producer_epoch=0, coordinator_epoch=0, commit=True)
    log.append_batch([b"f"])  # 7
    assert [(r.offset, r.value) for r in committed.poll()] == [(5, b"e"), (7, b"f")]
    assert committed.position(("t", 0)) == 8
    assert [r.value for r in uncommitted.poll()] == [b"e", b"f"]
    columns = store.consumer("rc-columns", ["t"], auto_offset_reset="earliest",
                             isolation_level="read_committed")
    seen = []
    while batch := columns.poll_columns(max_records=2):
        seen += [int(o) for c in batch.values() for o in c.offsets]
    assert seen == [0, 1, 5, 7]
    latest = store.consumer("rc-latest", ["t"], isolation_level="read_committed")
    assert latest.position(("t", 0)) == 8
    with pytest.raises(ValueError):
        store.consumer("x", isolation_level="serializable")


def test_pause_resume_and_lag(store):
    fill(store, "t", 2, 5)
    consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
    assert consumer.position(("t", 0)) == 0
    consumer.pause([("t", 0)])
    assert consumer.paused() == {TP("t", 0)}
    assert {r.partition for r in drain(consumer)} == {1}
    assert consumer.poll(timeout_ms=20) == []
    consumer.commit()  # the paused partition's position (0) is committed too
    assert store.group("g").lag() == {TP("t", 0): 5, TP("t", 1): 0}
    consumer.commit({("t", 0): 1})
    assert store.group("g").lag() == {TP("t", 0): 4, TP("t", 1): 0}
    consumer.resume([("t", 0)])
    assert [r.offset for r in drain(consumer)] == [0, 1, 2, 3, 4]  # position kept while paused
    with pytest.raises(IllegalStateError):
        consumer.pause([("t", 9)])


def test_static_members_come_first_and_are_unique(store):
    fill(store, "t", 2, 0)
    dynamic = store.consumer("g", ["t"], client_id="a")
    static = store.consumer("g", ["t"], client_id="z", group_instance_id="instance-1")
    # Kafka orders static members (by instance id) before dynamic ones (by member id).
    assert static.assignment() == {TP("t", 0)} and dynamic.assignment() == {TP("t", 1)}
    with pytest.raises(IllegalStateError):
        store.consumer("g", ["t"], group_instance_id="instance-1")
