"""The embedded share consumer (KIP-932): one queue on the log shared by threads of a process.

Each test runs on both backends (the ``backend`` fixture). The share-partition state machine
and the share coordinator are the real ones the wire broker uses; the state is read back from
``__share_group_state`` after a reopen.
"""

from __future__ import annotations

import threading
import time

import pytest

import seglog
from seglog import AcknowledgeType, ShareConsumer
from seglog.errors import (
    IllegalStateError,
    InvalidConfigError,
    InvalidGroupIdError,
    InvalidRecordStateError,
    SeglogError,
)
from seglog.store import Store, TopicPartition

TP = TopicPartition("jobs", 0)


def open_store(path, backend):
    return Store(path, backend=backend, offsets_topic_partitions=1,
                 transaction_state_partitions=1)


def make_queue(store, records=10, partitions=1, **configs):
    # Kafka's broker bounds a group's lock duration to 15..60 s (GroupConfig's own floor is
    # 1 s); the lock-expiry tests wait 1 s.
    store.share_groups().alter_broker_configs({"group.share.min.record.lock.duration.ms": 1000})
    store.create_topic("jobs", partitions=partitions)
    log = store.log(("jobs", 0))
    if records:
        log.append_batch([b"job-%d" % i for i in range(records)])
    store.share_groups().alter_group_config(
        "workers", {"share.auto.offset.reset": "earliest", **configs})


def consumer(store, mode="explicit", **kwargs):
    c = ShareConsumer(store, "workers", share_acknowledgement_mode=mode, **kwargs)
    c.subscribe(["jobs"])
    return c


@pytest.fixture
def store(tmp_path, backend):
    with open_store(tmp_path, backend) as s:
        yield s


def test_implicit_mode_accepts_a_poll_at_the_next_poll(store):
    make_queue(store)
    c = consumer(store, mode="implicit")
    records = c.poll(1000)
    assert [(r.offset, r.value, r.delivery_count) for r in records] == \
        [(i, b"job-%d" % i, 1) for i in range(10)]
    with pytest.raises(IllegalStateError, match="Implicit acknowledgement"):
        c.acknowledge(records[0])
    assert c.poll(0) == []  # accepted the ten: none comes back
    c.close()
    with ShareConsumer(store, "workers") as again:
        again.subscribe(["jobs"])
        assert again.poll(50) == []


def test_explicit_mode_needs_every_record_acknowledged_before_the_next_poll(store):
    make_queue(store, records=3)
    c = consumer(store)
    records = c.poll(1000)
    c.acknowledge(records[0])
    with pytest.raises(IllegalStateError, match="must be acknowledged"):
        c.poll(0)
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        c.acknowledge(records[0])  # already acknowledged
    for r in records[1:]:
        c.acknowledge(r, AcknowledgeType.ACCEPT)
    assert c.commit_sync() == {TP: None}
    assert c.commit_sync() == {}  # nothing left to send
    assert c.poll(0) == []


def test_release_redelivers_with_delivery_count_plus_one(store):
    make_queue(store, records=2)
    a = consumer(store)
    first = a.poll(1000)
    a.acknowledge(first[0], AcknowledgeType.RELEASE)
    a.acknowledge(first[1], AcknowledgeType.ACCEPT)
    assert a.commit_sync() == {TP: None}
    b = consumer(store)
    again = b.poll(1000)
    assert [(r.offset, r.delivery_count) for r in again] == [(0, 2)]
    b.acknowledge(again[0])
    b.commit_sync()
    assert a.poll(0) == [] and b.poll(0) == []


def test_reject_archives_the_record(store):
    make_queue(store, records=3)
    c = consumer(store)
    records = c.poll(1000)
    c.acknowledge(records[0], AcknowledgeType.REJECT)
    c.acknowledge(records[1], AcknowledgeType.RELEASE)
    c.acknowledge(records[2], AcknowledgeType.ACCEPT)
    c.commit_sync()
    again = c.poll(1000)
    assert [(r.offset, r.delivery_count) for r in again] == [(1, 2)]  # 0 never again
    c.acknowledge(again[0])
    c.commit_sync()
    assert c.poll(0) == []


def test_delivery_count_limit_archives_after_the_last_delivery(store):
    make_queue(store, records=1, **{"share.delivery.count.limit": "3"})
    c = consumer(store)
    counts = []
    for _ in range(5):
        records = c.poll(200)
        if not records:
            break
        counts.append(records[0].delivery_count)
        c.acknowledge(records[0], AcknowledgeType.RELEASE)
        c.commit_sync()
    assert counts == [1, 2, 3]
    assert c.poll(50) == []


def test_threads_see_disjoint_acquisitions_and_every_record_is_acked_once(store):
    total = 3000
    store.create_topic("jobs", partitions=1)
    log = store.log(("jobs", 0))
    for start in range(0, total, 100):
        log.append_batch([b"%d" % i for i in range(start, start + 100)])
    store.share_groups().alter_group_config("workers", {"share.auto.offset.reset": "earliest"})
    seen: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []
    done = threading.Event()

    def work(index):
        try:
            with consumer(store, max_poll_records=50) as c:
                deadline = time.monotonic() + 30
                while not done.is_set() and time.monotonic() < deadline:
                    records = c.poll(100)
                    for r in records:
                        assert r.delivery_count == 1
                        assert int(r.value) == r.offset
                        seen[index].append(r.offset)
                        c.acknowledge(r)
                    results = c.commit_sync()
                    assert all(e is None for e in results.values()), results
                    if sum(map(len, seen)) >= total:
                        done.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    everything = [o for offsets in seen for o in offsets]
    assert sorted(everything) == list(range(total))  # each once: disjoint and complete


def test_members_acquire_disjoint_records_while_others_hold_theirs(store):
    store.create_topic("jobs", partitions=1)
    log = store.log(("jobs", 0))
    for start in range(0, 30, 10):
        log.append_batch([b"%d" % i for i in range(start, start + 10)])
    store.share_groups().alter_group_config("workers", {"share.auto.offset.reset": "earliest"})
    members = [consumer(store, max_poll_records=10) for _ in range(4)]
    held = [[r.offset for r in m.poll(1000)] for m in members]
    assert held[:3] == [list(range(0, 10)), list(range(10, 20)), list(range(20, 30))]
    assert held[3] == []  # everything is held by the first three


def test_lock_expiry_redelivers_a_stalled_members_records_to_another(store):
    make_queue(store, records=5, **{"share.record.lock.duration.ms": "1000"})
    stalled = consumer(store)
    held = stalled.poll(1000)
    assert [r.offset for r in held] == [0, 1, 2, 3, 4]
    other = consumer(store)
    started = time.monotonic()
    again = other.poll(5000)
    assert time.monotonic() - started >= 0.9  # not before the lock ran out
    assert [(r.offset, r.delivery_count) for r in again] == [(i, 2) for i in range(5)]
    # The stalled member's late acknowledgement is refused, typed.
    stalled.acknowledge(held[0])
    result = stalled.commit_sync()
    assert isinstance(result[TP], InvalidRecordStateError)
    assert result[TP].kafka_error_code == seglog.error_codes.INVALID_RECORD_STATE
    assert isinstance(result[TP], SeglogError)
    for r in again:
        other.acknowledge(r)
    assert other.commit_sync() == {TP: None}


def test_close_releases_what_the_member_holds(store):
    make_queue(store, records=4)
    a = consumer(store)
    held = a.poll(1000)
    a.acknowledge(held[0])
    a.close()  # sends the ACCEPT of 0, releases 1..3 at once
    b = consumer(store)
    assert [(r.offset, r.delivery_count) for r in b.poll(1000)] == [(1, 2), (2, 2), (3, 2)]


def test_by_duration_starts_at_the_first_record_that_new(store):
    store.create_topic("jobs", partitions=1)
    now_ms = int(time.time() * 1000)
    store.log(("jobs", 0)).append_batch([b"old", b"new"],
                                        timestamps_ms=[now_ms - 3_600_000, now_ms - 1000])
    store.share_groups().alter_group_config("w", {"share.auto.offset.reset": "by_duration:PT10M"})
    with ShareConsumer(store, "w") as c:
        c.subscribe(["jobs"])
        assert [r.value for r in c.poll(1000)] == [b"new"]


def test_group_config_changes_reach_loaded_partitions(store):
    make_queue(store, records=1)
    c = consumer(store)
    first = c.poll(1000)
    assert c.acquisition_lock_timeout_ms == 30000
    store.share_groups().alter_group_config("workers", {"share.record.lock.duration.ms": 1000})
    c.acknowledge(first[0], AcknowledgeType.RELEASE)
    c.commit_sync()
    assert c.acquisition_lock_timeout_ms == 1000
    again = c.poll(1000)  # acquired under the new 1 s lock
    assert [(r.offset, r.delivery_count) for r in again] == [(0, 2)]
    other = consumer(store)
    assert [(r.offset, r.delivery_count) for r in other.poll(5000)] == [(0, 3)]


def test_reopen_redelivers_exactly_the_unacknowledged_records(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        make_queue(store, records=10)
        c = consumer(store)
        records = c.poll(1000)
        for r in records[:5]:
            c.acknowledge(r)  # 0..4 done
        c.acknowledge(records[5], AcknowledgeType.RELEASE)  # 5 back, delivered once
        c.acknowledge(records[6], AcknowledgeType.REJECT)  # 6 archived
        assert c.commit_sync() == {TP: None}
        # 7..9 still acquired when the store closes (as in a crash: no leave).
    with open_store(tmp_path, backend) as store:
        store.share_groups().alter_group_config("workers",
                                                {"share.auto.offset.reset": "earliest"})
        c = consumer(store)
        again = c.poll(1000)
        # Kafka persists acknowledgements, not acquisitions: 5 was released after one
        # delivery (count 1 persisted, 2 now); 7..9 were never written (count 1 again).
        assert [(r.offset, r.delivery_count) for r in again] == \
            [(5, 2), (7, 1), (8, 1), (9, 1)]
        for r in again:
            c.acknowledge(r)
        assert c.commit_sync() == {TP: None}
    with open_store(tmp_path, backend) as store:
        with consumer(store) as c:
            assert c.poll(100) == []


def test_new_group_starts_at_latest_by_default(store):
    store.create_topic("jobs", partitions=1)
    store.log(("jobs", 0)).append_batch([b"old"])
    c = ShareConsumer(store, "fresh")
    c.subscribe(["jobs"])
    assert c.poll(50) == []
    store.log(("jobs", 0)).append_batch([b"new"])
    assert [r.value for r in c.poll(1000)] == [b"new"]


def test_every_partition_is_shared_by_every_member(store):
    store.create_topic("jobs", partitions=3)
    store.share_groups().alter_group_config("workers", {"share.auto.offset.reset": "earliest"})
    for p in range(3):
        store.log(("jobs", p)).append_batch([b"p%d" % p])
    a = consumer(store, mode="implicit")
    assert sorted(r.partition for r in a.poll(1000)) == [0, 1, 2]


def test_bad_arguments_and_states_are_typed(store):
    make_queue(store, records=1)
    with pytest.raises(InvalidGroupIdError):
        ShareConsumer(store, "")
    with pytest.raises(ValueError, match="implicit' or 'explicit"):
        ShareConsumer(store, "g", share_acknowledgement_mode="auto")
    c = ShareConsumer(store, "g")
    with pytest.raises(IllegalStateError, match="not subscribed"):
        c.poll(0)
    c.subscribe(["later"])  # as Kafka's: a topic made after the subscription is read
    assert c.poll(0) == []
    store.create_topic("later", partitions=1)
    store.log(("later", 0)).append_batch([b"x"])
    store.share_groups().alter_group_config("g", {"share.auto.offset.reset": "earliest"})
    assert [r.value for r in c.poll(1000)] == [b"x"]
    with pytest.raises(TypeError):
        c.subscribe("jobs")
    groups = store.share_groups()
    with pytest.raises(InvalidConfigError, match="share.session.timeout.ms"):
        groups.alter_group_config("g", {"share.session.timeout.ms": "50000"})  # not built
    with pytest.raises(InvalidConfigError):
        groups.alter_group_config("g", {"share.delivery.count.limit": "x"})
    # Kafka's bounds and messages (GroupConfig.validate).
    with pytest.raises(InvalidConfigError, match="must be in the range 2 to 10 inclusive"):
        groups.alter_group_config("g", {"share.delivery.count.limit": "11"})
    with pytest.raises(InvalidConfigError, match="share.auto.offset.reset"):
        groups.alter_group_config("g", {"share.auto.offset.reset": "sometime"})
    with pytest.raises(InvalidConfigError, match="not a broker config"):
        groups.alter_broker_configs({"log.retention.ms": 1})
    groups.alter_group_config("g", {"share.delivery.count.limit": "7"})
    assert groups.group_config("g")["share.delivery.count.limit"] == "7"
    assert groups.group_config("g")["share.record.lock.duration.ms"] == "30000"
    groups.alter_group_config("g", {"share.delivery.count.limit": None})
    assert groups.group_config("g")["share.delivery.count.limit"] == "5"
    c.close()
    with pytest.raises(IllegalStateError, match="closed"):
        c.poll(0)


def test_acknowledgement_commit_callback_gets_each_partitions_outcome(store):
    make_queue(store, records=2)
    c = consumer(store)
    got = []
    c.set_acknowledgement_commit_callback(lambda offsets, exc: got.append((offsets, exc)))
    for r in c.poll(1000):
        c.acknowledge(r)
    c.commit_async()
    assert got == [({TP: {0, 1}}, None)]


def test_read_committed_never_delivers_aborted_records(store):
    store.create_topic("jobs", partitions=1)
    store.share_groups().alter_group_config(
        "workers", {"share.auto.offset.reset": "earliest",
                    "share.isolation.level": "read_committed"})
    producer = store.producer(transactional_id="t")
    producer.begin_transaction()
    producer.send("jobs", b"aborted-1")
    producer.send("jobs", b"aborted-2")
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("jobs", b"committed")
    producer.commit_transaction()
    producer.close()
    c = consumer(store)
    records = c.poll(1000)
    assert [(r.offset, r.value) for r in records] == [(3, b"committed")]
    c.acknowledge(records[0])
    assert c.commit_sync() == {TP: None}  # with the markers' offsets acknowledged as gaps
    assert c.poll(100) == []


def test_a_corrupt_batch_is_rejected_and_raised(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        make_queue(store, records=0)
        log = store.log(("jobs", 0))
        log.append_batch([b"first-%d" % i for i in range(3)])
        log.append_batch([b"second"])
    segment = tmp_path / "jobs-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    at = data.index(b"first-1")
    data[at] ^= 0xFF  # inside the first batch's records: its CRC32C no longer matches
    segment.write_bytes(bytes(data))
    with open_store(tmp_path, backend) as store:
        store.share_groups().alter_group_config("workers",
                                                {"share.auto.offset.reset": "earliest"})
        c = consumer(store, max_poll_records=3)
        with pytest.raises(seglog.errors.CorruptRecordError):
            c.poll(1000)
        # Its three records were REJECTed (Kafka's client does the same): never again.
        records = c.poll(1000)
        assert [(r.offset, r.value) for r in records] == [(3, b"second")]


def test_renew_keeps_the_lock_and_the_next_poll_returns_the_record_again(store):
    make_queue(store, records=2, **{"share.record.lock.duration.ms": "1000"})
    c = consumer(store)
    first = c.poll(1000)
    time.sleep(0.6)
    c.acknowledge(first[0], AcknowledgeType.RENEW)  # a new 1 s lock from now
    c.acknowledge(first[1], AcknowledgeType.ACCEPT)
    assert c.commit_sync() == {TP: None}
    time.sleep(0.6)  # past the first lock's deadline, inside the renewed one
    other = consumer(store)
    assert other.poll(0) == []
    again = c.poll(0)  # the renewed record, not a new fetch
    assert [(r.offset, r.delivery_count) for r in again] == [(0, 1)]
    c.acknowledge(again[0])
    assert c.commit_sync() == {TP: None}
    assert other.poll(200) == [] and c.poll(0) == []


def test_a_read_only_store_has_no_share_groups(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        make_queue(store, records=1)
        with Store(tmp_path, backend=backend, read_only=True) as follower:
            with pytest.raises(seglog.errors.ReadOnlyError):
                ShareConsumer(follower, "workers")


def test_group_configs_survive_a_reopen_in_the_file_seglog_serve_keeps(tmp_path, backend):
    from seglog.group_configs_file import GROUP_CONFIGS_FILE, read_group_configs

    with open_store(tmp_path, backend) as store:
        store.share_groups().alter_group_config(
            "workers", {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": 3})
    assert read_group_configs(tmp_path) == {"workers": {"share.auto.offset.reset": "earliest",
                                                        "share.delivery.count.limit": "3"}}
    assert (tmp_path / GROUP_CONFIGS_FILE).is_file()
    with open_store(tmp_path, backend) as store:
        assert store.share_groups().group_config("workers")["share.delivery.count.limit"] == "3"
        store.create_topic("jobs", partitions=1)
        store.log(("jobs", 0)).append_batch([b"kept"])
        with consumer(store) as c:  # earliest, from the file: the record written before
            assert [r.value for r in c.poll(1000)] == [b"kept"]
