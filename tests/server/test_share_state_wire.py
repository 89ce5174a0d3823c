"""InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState and ReadShareGroupStateSummary (83-87) against ``seglog serve``: the
conversation a share-partition's persister has with its share coordinator, Kafka's errors and
messages, CLUSTER_ACTION, FindCoordinator key type 2, the state kept across a restart, and the
broker's persister (the path the share fetch code uses)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from seglog import error_codes as codes
from seglog.coordinator.share_coordinator import ShareState, StateBatch
from seglog.coordinator.share_state_records import SHARE_STATE_TOPIC, coordinator_key
from seglog.server.share_persister import find_share_persister

from share_state_wire import (call, delete, find_share_coordinator, initialize,
                              partition_answer, read, summary, write)

SHARE = {"share.coordinator.state.topic.num.partitions": 3}


def _address(broker):
    host, port = broker.bootstrap.split(":")
    return host, int(port)


def _topic(broker, name="t", partitions=2) -> uuid.UUID:
    """Topic ``name`` made, and ``__share_group_state`` too (by a FindCoordinator, as a
    persister finds its coordinator first): its id."""
    broker.store.create_topic(name, partitions)
    topic_id = broker.store.topic(name).uuid
    call(_address(broker), find_share_coordinator(coordinator_key("g", topic_id, 0)))
    return topic_id


def test_not_coordinator_before_find_coordinator(broker_factory):
    """As Kafka: the share coordinator serves the partitions of ``__share_group_state``,
    which the first FindCoordinator makes; NOT_COORDINATOR before."""
    broker = broker_factory(config=SHARE)
    broker.store.create_topic("t", 1)
    tid = broker.store.topic("t").uuid
    answer = partition_answer(call(_address(broker), initialize("g", tid, 0, 0, 0)))
    assert (answer["error_code"], answer["error_message"]) == (
        codes.NOT_COORDINATOR,
        "Unable to initialize share group state: This is not the correct coordinator.")
    assert SHARE_STATE_TOPIC not in broker.store
    call(_address(broker), find_share_coordinator(coordinator_key("g", tid, 0)))
    assert broker.store.topic(SHARE_STATE_TOPIC).partitions == 3
    answer = partition_answer(call(_address(broker), initialize("g", tid, 0, 0, 0)))
    assert answer["error_code"] == 0


def test_ranges_served(broker_factory):
    broker = broker_factory(config=SHARE)
    ranges = {key: (low, high) for key, low, high in broker.api_ranges}
    assert {k: ranges[k] for k in (83, 84, 85, 86, 87)} == {
        83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1)}


def test_the_persister_conversation(broker_factory):
    broker = broker_factory(config=SHARE)
    address = _address(broker)
    tid = _topic(broker)
    # Never initialized.
    answer = partition_answer(call(address, read("g", tid, 0, 0)))
    assert (answer["error_code"], answer["error_message"]) == (
        codes.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")
    answer = partition_answer(call(address, summary("g", tid, 0)))
    assert answer == dict(partition=0, error_code=0, error_message=None, state_epoch=0,
                          leader_epoch=0, start_offset=-1, delivery_complete_count=-1)
    # Initialize, read (records leader epoch 3), write, read back.
    answer = partition_answer(call(address, initialize("g", tid, 0, 1, 10)))
    assert answer == dict(partition=0, error_code=0, error_message=None)
    answer = partition_answer(call(address, read("g", tid, 0, 3)))
    assert answer == dict(partition=0, error_code=0, error_message=None, state_epoch=1,
                          start_offset=10, state_batches=[])
    answer = partition_answer(call(address, write(
        "g", tid, 0, state_epoch=1, leader_epoch=3, start_offset=10,
        batches=[(10, 14, 2, 1), (15, 19, 0, 1)], delivery_complete_count=5)))
    assert answer == dict(partition=0, error_code=0, error_message=None)
    answer = partition_answer(call(address, read("g", tid, 0, 3)))
    assert answer["start_offset"] == 10 and answer["state_batches"] == [
        dict(first_offset=10, last_offset=14, delivery_state=2, delivery_count=1),
        dict(first_offset=15, last_offset=19, delivery_state=0, delivery_count=1)]
    answer = partition_answer(call(address, summary("g", tid, 0, version=0)))
    assert answer == dict(partition=0, error_code=0, error_message=None, state_epoch=1,
                          leader_epoch=3, start_offset=10)
    assert partition_answer(call(address, summary("g", tid, 0)))[
        "delivery_complete_count"] == 5
    # Fenced.
    answer = partition_answer(call(address, write(
        "g", tid, 0, state_epoch=1, leader_epoch=2, start_offset=10, version=0)))
    assert (answer["error_code"], answer["error_message"]) == (
        codes.FENCED_LEADER_EPOCH, codes.message(codes.FENCED_LEADER_EPOCH))
    answer = partition_answer(call(address, write(
        "g", tid, 0, state_epoch=0, leader_epoch=3, start_offset=10)))
    assert answer["error_code"] == codes.FENCED_STATE_EPOCH
    answer = partition_answer(call(address, initialize("g", tid, 0, 0, 10)))
    assert answer["error_code"] == codes.FENCED_STATE_EPOCH
    answer = partition_answer(call(address, read("g", tid, 0, 1)))
    assert answer["error_code"] == codes.FENCED_LEADER_EPOCH
    # Unknown topic, negative values.
    answer = partition_answer(call(address, initialize("g", uuid.uuid4(), 0, 0, 0)))
    assert answer["error_code"] == codes.UNKNOWN_TOPIC_OR_PARTITION
    answer = partition_answer(call(address, read("g", tid, 0, -1)))
    assert (answer["error_code"], answer["error_message"]) == (
        codes.INVALID_REQUEST, "The leader epoch cannot be a negative number.")
    # Delete, then nothing is there.
    assert partition_answer(call(address, delete("g", tid, 0)))["error_code"] == 0
    assert partition_answer(call(address, read("g", tid, 0, 3)))["error_code"] == \
        codes.INVALID_REQUEST
    assert partition_answer(call(address, delete("g", tid, 0)))["error_code"] == 0


def test_empty_requests_get_empty_answers(broker_factory):
    broker = broker_factory(config=SHARE)
    address = _address(broker)
    tid = _topic(broker)
    assert call(address, read("", tid, 0, 0)).results == ()
    m = type(read("g", tid, 0, 0))
    assert call(address, m(group_id="g", topics=())).results == ()


def test_cluster_action_is_required(broker_factory):
    broker = broker_factory(config={
        **SHARE, "authorizer.class.name":
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false"})
    address = _address(broker)
    tid = _topic(broker)
    for request in (initialize("g", tid, 0, 0, 0), read("g", tid, 0, 0),
                    write("g", tid, 0, state_epoch=0, leader_epoch=0, start_offset=0),
                    delete("g", tid, 0), summary("g", tid, 0)):
        answer = partition_answer(call(address, request))
        assert (answer["error_code"], answer["error_message"]) == (
            codes.CLUSTER_AUTHORIZATION_FAILED, codes.message(codes.CLUSTER_AUTHORIZATION_FAILED))


def test_find_coordinator_share_key(broker_factory):
    broker = broker_factory(config=SHARE)
    address = _address(broker)
    tid = _topic(broker)
    found = call(address, find_share_coordinator(coordinator_key("g", tid, 0))).coordinators
    assert [(c.error_code, c.node_id, c.port) for c in found] == [(0, broker.state.node_id,
                                                                   broker.port)]
    for bad in ("no-colons", "g:not-a-uuid:0", f"g:{coordinator_key('g', tid, 0)}x"):
        found = call(address, find_share_coordinator(bad)).coordinators
        assert found[0].error_code == codes.INVALID_REQUEST, bad
    # Key type 2 needs FindCoordinator v6 (KafkaApis: INVALID_REQUEST before).
    m = type(find_share_coordinator("x", version=5))
    found = call(address, m(key_type=2, coordinator_keys=(coordinator_key("g", tid, 0),)))
    assert found.coordinators[0].error_code == codes.INVALID_REQUEST


def test_state_survives_a_restart(broker_factory, tmp_path, backend):
    path = tmp_path / "data"
    broker = broker_factory(config=SHARE, data_dir=path, backend=backend)
    address = _address(broker)
    tid = _topic(broker)
    for group in ("a", "b"):
        assert partition_answer(call(address, initialize(group, tid, 1, 2, 7)))[
            "error_code"] == 0
        assert partition_answer(call(address, write(
            group, tid, 1, state_epoch=2, leader_epoch=4, start_offset=8,
            batches=[(8, 9, 4, 3)])))["error_code"] == 0
    before = [partition_answer(call(address, read(g, tid, 1, 4))) for g in "ab"]
    broker.stop()
    broker = broker_factory(config=SHARE, data_dir=path, backend=backend)
    address = _address(broker)
    assert [partition_answer(call(address, read(g, tid, 1, 4))) for g in "ab"] == before
    assert before[0]["state_batches"] == [
        dict(first_offset=8, last_offset=9, delivery_state=4, delivery_count=3)]
    assert partition_answer(call(address, read("a", tid, 1, 3)))["error_code"] == \
        codes.FENCED_LEADER_EPOCH


def test_the_broker_persister(broker_factory):
    """SharePersister, as the share fetch path calls it, on a lone broker (local)."""
    broker = broker_factory(config=SHARE)
    tid = _topic(broker)
    persister = find_share_persister(broker.state)
    assert persister is not None

    async def conversation():
        assert await persister.initialize_state("g", tid, 0, 0, 5) == 0
        assert await persister.write_state("g", tid, 0, ShareState(
            0, 5, (StateBatch(5, 6, 2, 1),), 1)) == 0
        code, state = await persister.read_state("g", tid, 0, 1)
        assert code == 0 and state.batches == (StateBatch(5, 6, 2, 1),)
        fenced = await persister.write_state("g", tid, 0, ShareState(0, 5, (), 0))
        assert fenced == codes.FENCED_LEADER_EPOCH
        summary_ = await persister.read_state_summary("g", tid, 0)
        assert (summary_.error_code, summary_.start_offset) == (0, 5)
        assert await persister.delete_state("g", tid, 0) == 0
        return True

    assert asyncio.run_coroutine_threadsafe(conversation(), broker.state.loop).result(30)
    assert broker.store.topic(SHARE_STATE_TOPIC).partitions == 3


def test_housekeeping_prunes_redundant_records(broker_factory, tmp_path):
    """Cold snapshots and pruning (Kafka's periodic jobs, fast here): the log start offset of
    ``__share_group_state`` moves past the records later snapshots made redundant, and the
    state reads back the same after a restart (loaded from what is left)."""
    config = {"share.coordinator.state.topic.num.partitions": 1,
              "share.coordinator.snapshot.update.records.per.snapshot": 2,
              "share.coordinator.state.topic.prune.interval.ms": 100,
              "share.coordinator.cold.partition.snapshot.interval.ms": 100}
    path = tmp_path / "data"
    broker = broker_factory(config=config, data_dir=path)
    address = _address(broker)
    tid = _topic(broker)
    assert partition_answer(call(address, initialize("g", tid, 0, 0, 0)))["error_code"] == 0
    for i in range(5):
        assert partition_answer(call(address, write(
            "g", tid, 0, state_epoch=0, leader_epoch=0, start_offset=i,
            batches=[(i, i + 3, 2, 1)])))["error_code"] == 0
    before = partition_answer(call(address, read("g", tid, 0, 0)))
    state_log = broker.store.topic(SHARE_STATE_TOPIC).log(0)
    deadline = time.monotonic() + 20
    while state_log.start_offset == 0:
        assert time.monotonic() < deadline, "__share_group_state-0 was not pruned"
        time.sleep(0.05)
    assert state_log.start_offset > 0
    broker.stop()
    broker = broker_factory(config=config, data_dir=path)
    assert partition_answer(call(_address(broker), read("g", tid, 0, 0))) == before


def test_the_state_of_a_deleted_topic_goes(broker_factory):
    broker = broker_factory(config=SHARE)
    address = _address(broker)
    tid = _topic(broker)
    assert partition_answer(call(address, initialize("g", tid, 0, 0, 0)))["error_code"] == 0
    share = broker.store.share_coordinator()
    assert share.share_partitions() == [("g", tid, 0)]
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics(["t"])["t"].result(30)
    deadline = time.monotonic() + 30
    while share.share_partitions():
        assert time.monotonic() < deadline, "the share state of t is still there"
        time.sleep(0.1)


def test_any_well_formed_request_gets_an_answer(broker_factory):
    """Odd values from the network (any int32 partition and epoch, any int64 offset, batches
    of any bounds, state and count): every request is answered with Kafka error codes, never
    a closed connection, and the state keeps loading (a restart reads it back)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    broker = broker_factory(config=SHARE)
    address = _address(broker)
    tid = _topic(broker)
    assert partition_answer(call(address, initialize("g", tid, 0, 0, 0)))["error_code"] == 0
    known = set(codes.BY_CODE)
    int32 = st.integers(-2**31, 2**31 - 1)
    int64 = st.integers(-2**63, 2**63 - 1)
    small = st.integers(-3, 40)
    batch = st.tuples(st.one_of(small, int64), st.one_of(small, int64),
                      st.integers(-128, 127), st.integers(-2**15, 2**15 - 1))

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(kind=st.sampled_from(["init", "read", "write", "delete", "summary"]),
           partition=st.one_of(st.integers(-1, 2), int32), epoch=st.one_of(small, int32),
           start=st.one_of(small, int64), batches=st.lists(batch, max_size=4),
           count=st.one_of(small, int32))
    def check(kind, partition, epoch, start, batches, count):
        request = {
            "init": lambda: initialize("g", tid, partition, epoch, start),
            "read": lambda: read("g", tid, partition, epoch),
            "write": lambda: write("g", tid, partition, state_epoch=epoch % 3,
                                   leader_epoch=epoch, start_offset=start, batches=batches,
                                   delivery_complete_count=count),
            "delete": lambda: delete("g", tid, partition),
            "summary": lambda: summary("g", tid, partition, epoch)}[kind]()
        for result in call(address, request).results:
            for answer in result.partitions:
                assert int(answer.error_code) in known

    check()
    broker.stop()
    broker = broker_factory(config=SHARE, data_dir=broker.store.path)
    answer = partition_answer(call(_address(broker), summary("g", tid, 0)))
    assert answer["error_code"] == 0


def _serve_share(data_dir):
    """``(process, port)``: a ``seglog serve`` subprocess over ``data_dir``, once listening
    (its output read by a thread, as test_robust_internal_topics does)."""
    import queue
    import threading

    from test_core_serve import LISTENING, START_TIMEOUT_S, _serve

    proc = _serve("--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
                  "--config", "share.coordinator.state.topic.num.partitions=2",
                  "--config", "offsets.topic.num.partitions=1")
    lines: queue.Queue = queue.Queue()

    def read_all() -> None:
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read_all, daemon=True).start()
    seen = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append(line)
        match = LISTENING.search(line)
        if match:
            return proc, int(match.group(1))
    proc.kill()
    proc.wait(10)
    raise AssertionError("seglog serve did not say it was listening:\n" + "".join(seen))


def test_seglog_serve_keeps_the_state_across_a_restart(tmp_path):
    """The same conversation with ``seglog serve`` processes (the CLI's broker): the state
    written before a SIGTERM is read back by the next process over the same data dir."""
    import seglog

    data_dir = tmp_path / "data"
    with seglog.Store(data_dir, offsets_topic_partitions=1) as store:
        store.create_topic("t", 1)
        tid = store.topic("t").uuid
    proc, port = _serve_share(data_dir)
    try:
        address = ("127.0.0.1", port)
        found = call(address, find_share_coordinator(coordinator_key("g", tid, 0)))
        assert found.coordinators[0].error_code == 0
        assert partition_answer(call(address, initialize("g", tid, 0, 1, 5)))[
            "error_code"] == 0
        assert partition_answer(call(address, write(
            "g", tid, 0, state_epoch=1, leader_epoch=2, start_offset=5,
            batches=[(5, 9, 4, 5)])))["error_code"] == 0
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
    proc, port = _serve_share(data_dir)
    try:
        answer = partition_answer(call(("127.0.0.1", port), read("g", tid, 0, 2)))
        assert answer["error_code"] == 0 and answer["state_epoch"] == 1
        assert answer["state_batches"] == [
            dict(first_offset=5, last_offset=9, delivery_state=4, delivery_count=5)]
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
