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
    broker.store.create_topic(name, partitions)
    return broker.store.topic(name).uuid


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
