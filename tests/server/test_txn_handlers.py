"""The transaction API handlers (seglog.server.apis.txn) called on a running broker's event
loop with kio requests, as the core calls them, over the broker's real Store.

The error codes asserted here were compared with a Kafka 4.4 broker answering the same
request sequence (tests/server/clients/test_clients_txn_wire.py runs that comparison).
"""

from __future__ import annotations

import datetime
import io
import struct
import sys
import time

import pytest
from seglog.schemas import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from seglog.server.apis import txn
from seglog.server.context import RequestContext
from seglog.types import TopicPartition

from core_helpers import run_on_broker_loop

TIMEOUT = datetime.timedelta(milliseconds=60000)


def call(broker, api_key: int, version: int, **fields):
    """Answer one request of ``api_key``/``version`` built from ``fields`` with the handler
    the broker advertises, on its loop; returns the kio response."""
    request = load_request_schema(api_key, version)(**fields)
    handler = {h.api_key: h for h in txn.HANDLERS}[api_key]
    assert handler.min_version <= version <= handler.max_version
    ctx = RequestContext(api_key, version, 1, "test", 1, "127.0.0.1", 1, broker.state)
    return run_on_broker_loop(broker, handler.handle(ctx, request))


def entity(api_key: int, version: int, name: str):
    """A nested kio request class of ``api_key``/``version`` by name."""
    return getattr(sys.modules[load_request_schema(api_key, version).__module__], name)


def init(broker, transactional_id, version=4, **fields):
    return call(broker, 22, version, transactional_id=transactional_id,
                transaction_timeout=fields.pop("timeout", TIMEOUT), **fields)


def add_partitions(broker, version, txn_id, pid, epoch, topics):
    topic = entity(24, version, "AddPartitionsToTxnTopic")
    response = call(broker, 24, version, v3_and_below_transactional_id=txn_id,
                    v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=tuple(topic(name=n, partitions=tuple(ps))
                                              for n, ps in topics.items()))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def txn_offset_commit(broker, version, txn_id, group, pid, epoch, offsets, **fields):
    topic = entity(28, version, "TxnOffsetCommitRequestTopic")
    part = entity(28, version, "TxnOffsetCommitRequestPartition")
    by_topic: dict = {}
    for (name, index), offset in offsets.items():
        by_topic.setdefault(name, []).append(
            part(partition_index=index, committed_offset=offset, committed_metadata="m"))
    response = call(broker, 28, version, transactional_id=txn_id, group_id=group,
                    producer_id=pid, producer_epoch=epoch,
                    topics=tuple(topic(name=n, partitions=tuple(ps))
                                 for n, ps in by_topic.items()), **fields)
    return {(t.name, p.partition_index): p.error_code for t in response.topics
            for p in t.partitions}


@pytest.fixture
def served(broker):
    broker.store.create_topic("t", 3)
    return broker


def test_init_producer_id_idempotent_transactional_and_bad_input(served):
    idem = init(served, None)
    assert (idem.error_code, idem.producer_epoch) == (ErrorCode.none, 0)
    first = init(served, "a")
    assert first.error_code == ErrorCode.none and first.producer_id != idem.producer_id
    again = init(served, "a", version=0)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    assert init(served, "a", timeout=datetime.timedelta(milliseconds=900001)).error_code \
        == ErrorCode.invalid_transaction_timeout
    assert init(served, "").error_code == ErrorCode.invalid_request
    # KIP-360 fields half given: INVALID_REQUEST, as Kafka's KafkaApis.
    assert init(served, "a", producer_id=first.producer_id).error_code \
        == ErrorCode.invalid_request
    # A stale epoch: PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH below.
    stale = dict(producer_id=first.producer_id, producer_epoch=0)
    assert init(served, "a", version=3, **stale).error_code == ErrorCode.invalid_producer_epoch
    assert init(served, "a", version=5, **stale).error_code == ErrorCode.producer_fenced
    bumped = init(served, "a", version=5, producer_id=first.producer_id, producer_epoch=1)
    assert (bumped.error_code, bumped.producer_epoch) == (ErrorCode.none, 2)


def test_add_partitions_errors_per_partition(served):
    r = init(served, "a")
    pid, epoch = r.producer_id, r.producer_epoch
    assert add_partitions(served, 3, "a", pid, epoch, {"t": [0, 1, 7], "nope": [0]}) == {
        ("t", 0): ErrorCode.operation_not_attempted, ("t", 1): ErrorCode.operation_not_attempted,
        ("t", 7): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition}
    # An internal topic is not the client's to add (offsets join with AddOffsetsToTxn).
    assert add_partitions(served, 3, "a", pid, epoch, {"__consumer_offsets": [0], "t": [0]}) \
        == {("__consumer_offsets", 0): ErrorCode.topic_authorization_failed,
            ("t", 0): ErrorCode.operation_not_attempted}
    assert set(add_partitions(served, 3, "a", pid, epoch, {"t": [0, 1]}).values()) \
        == {ErrorCode.none}
    assert set(add_partitions(served, 1, "a", pid, epoch + 1, {"t": [2]}).values()) \
        == {ErrorCode.invalid_producer_epoch}
    assert set(add_partitions(served, 2, "a", pid, epoch + 1, {"t": [2]}).values()) \
        == {ErrorCode.producer_fenced}
    assert set(add_partitions(served, 3, "a", pid + 1, epoch, {"t": [2]}).values()) \
        == {ErrorCode.invalid_producer_id_mapping}
    assert set(add_partitions(served, 0, "", pid, epoch, {"t": [2]}).values()) \
        == {ErrorCode.invalid_request}
    # v4+: a batch of transactions, verified or added.
    transaction = entity(24, 5, "AddPartitionsToTxnTransaction")
    topic = entity(24, 5, "AddPartitionsToTxnTopic")
    response = call(served, 24, 5, transactions=(
        transaction(transactional_id="a", producer_id=pid, producer_epoch=epoch,
                    verify_only=True, topics=(topic(name="t", partitions=(0, 2)),)),
        transaction(transactional_id="zz", producer_id=pid, producer_epoch=epoch,
                    verify_only=False, topics=(topic(name="t", partitions=(0,)),))))
    assert response.error_code == ErrorCode.none
    found = {(r.transactional_id, p.partition_index): p.partition_error_code
             for r in response.results_by_transaction for t in r.topic_results
             for p in t.results_by_partition}
    assert found == {("a", 0): ErrorCode.none, ("a", 2): ErrorCode.transaction_abortable,
                     ("zz", 0): ErrorCode.invalid_producer_id_mapping}


def test_offsets_commit_with_the_transaction_only(served):
    store = served.store
    r = init(served, "a")
    pid, epoch = r.producer_id, r.producer_epoch
    offsets = {("t", 0): 5, ("t", 1): 9}
    assert set(txn_offset_commit(served, 3, "a", "g", pid, epoch, offsets).values()) \
        == {ErrorCode.invalid_txn_state}  # no AddOffsetsToTxn yet
    assert call(served, 25, 1, transactional_id="a", producer_id=pid, producer_epoch=epoch + 1,
                group_id="g").error_code == ErrorCode.invalid_producer_epoch
    assert call(served, 25, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
                group_id="g").error_code == ErrorCode.none
    assert set(txn_offset_commit(served, 3, "a", "g", pid, epoch + 1, offsets).values()) \
        == {ErrorCode.invalid_producer_epoch}
    assert txn_offset_commit(served, 0, "a", "g", pid, epoch, {("t", 0): 5, ("x", 0): 1}) \
        == {("t", 0): ErrorCode.none, ("x", 0): ErrorCode.unknown_topic_or_partition}
    assert set(txn_offset_commit(served, 3, "a", "g", pid, epoch, {("t", 1): 9}).values()) \
        == {ErrorCode.none}
    assert set(txn_offset_commit(served, 3, "a", "", pid, epoch, {("t", 1): 9}).values()) \
        == {ErrorCode.invalid_group_id}
    # A generation for a group that never had one: ILLEGAL_GENERATION; once a commit from
    # outside made "g" a (simple) group, a member it does not have: UNKNOWN_MEMBER_ID.
    assert set(txn_offset_commit(served, 3, "a", "g2", pid, epoch, {("t", 1): 9},
                                 generation_id=4, member_id="m").values()) \
        == {ErrorCode.illegal_generation}
    assert set(txn_offset_commit(served, 3, "a", "g", pid, epoch, {("t", 1): 9},
                                 generation_id=4, member_id="m").values()) \
        == {ErrorCode.unknown_member_id}
    # Pending until the marker: the broker's transactional batch of the producer.
    assert store.offset_fetch("g", TopicPartition("t", 0)) is None
    assert store.offset_commit_pending("g", TopicPartition("t", 0))
    count = served.state.appended.count
    assert call(served, 26, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
                committed=True).error_code == ErrorCode.none
    assert served.state.appended.count > count  # read_committed fetches woken
    assert store.offset_fetch("g", TopicPartition("t", 0)).offset == 5
    assert store.offset_fetch("g", TopicPartition("t", 1)).offset == 9
    # A retried EndTxn succeeds; the other outcome is INVALID_TXN_STATE.
    assert call(served, 26, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
                committed=True).error_code == ErrorCode.none
    assert call(served, 26, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
                committed=False).error_code == ErrorCode.invalid_txn_state
    assert call(served, 26, 1, transactional_id="a", producer_id=pid, producer_epoch=epoch + 3,
                committed=True).error_code == ErrorCode.invalid_producer_epoch


def test_aborted_offsets_are_dropped(served):
    r = init(served, "a")
    pid, epoch = r.producer_id, r.producer_epoch
    call(served, 25, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
         group_id="g")
    assert set(txn_offset_commit(served, 3, "a", "g", pid, epoch, {("t", 2): 3}).values()) \
        == {ErrorCode.none}
    assert call(served, 26, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
                committed=False).error_code == ErrorCode.none
    assert served.store.offset_fetch("g", TopicPartition("t", 2)) is None
    assert not served.store.offset_commit_pending("g", TopicPartition("t", 2))


def test_init_while_ongoing_answers_concurrent_then_the_next_epoch(served):
    r = init(served, "a")
    pid, epoch = r.producer_id, r.producer_epoch
    add_partitions(served, 3, "a", pid, epoch, {"t": [0]})
    assert init(served, "a").error_code == ErrorCode.concurrent_transactions
    retry = init(served, "a")
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) \
        == (ErrorCode.none, pid, epoch + 2)


def test_describe_and_list_transactions(served):
    r = init(served, "a")
    pid, epoch = r.producer_id, r.producer_epoch
    init(served, "b")
    add_partitions(served, 3, "a", pid, epoch, {"t": [2, 0]})
    response = call(served, 65, 0, transactional_ids=("a", "b", "nope", ""))
    states = {s.transactional_id: s for s in response.transaction_states}
    a = states["a"]
    assert (a.error_code, a.transaction_state, a.producer_id, a.producer_epoch) \
        == (ErrorCode.none, "Ongoing", pid, epoch)
    assert a.transaction_timeout == TIMEOUT
    assert [(t.topic, sorted(t.partitions)) for t in a.topics] == [("t", [0, 2])]
    assert (states["b"].transaction_state, states["b"].topics) == ("Empty", ())
    # No transaction started: Kafka's start time -1, which the response must encode (kio's
    # writer takes the datetime 1 ms before the epoch; its reader refuses negative ones).
    out = io.BytesIO()
    entity_writer(type(response))(out, response)
    assert struct.pack(">q", -1) in out.getvalue()
    assert states["nope"].error_code == ErrorCode.transactional_id_not_found
    assert states[""].error_code == ErrorCode.invalid_request
    listed = call(served, 66, 1, state_filters=("Ongoing", "Bogus"), producer_id_filters=(),
                  duration_filter=-1)
    assert listed.unknown_state_filters == ("Bogus",)
    assert [(s.transactional_id, s.producer_id, s.transaction_state)
            for s in listed.transaction_states] == [("a", pid, "Ongoing")]
    everyone = call(served, 66, 0, state_filters=(), producer_id_filters=())
    assert sorted(s.transactional_id for s in everyone.transaction_states) == ["a", "b"]
    long_ones = call(served, 66, 1, state_filters=("Ongoing",), producer_id_filters=(),
                     duration_filter=3_600_000)
    assert long_ones.transaction_states == ()
    call(served, 26, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
         committed=True)
    done = call(served, 65, 0, transactional_ids=("a",)).transaction_states[0]
    assert (done.transaction_state, done.topics) == ("CompleteCommit", ())


def test_describe_producers(served):
    store = served.store
    r = init(served, "a")
    pid, epoch = r.producer_id, r.producer_epoch
    add_partitions(served, 3, "a", pid, epoch, {"t": [1]})
    first, _ = store.log(("t", 1)).append_batch(
        [b"x", b"y"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
        is_transactional=True)
    request_topic = entity(61, 0, "TopicRequest")
    response = call(served, 61, 0, topics=(
        request_topic(name="t", partition_indexes=(0, 1, 9)),
        request_topic(name="nope", partition_indexes=(0,)),
        request_topic(name="bad/name", partition_indexes=(0,))))
    found = {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}
    assert found[("t", 0)].error_code == ErrorCode.none
    assert found[("t", 0)].active_producers == ()
    (state,) = found[("t", 1)].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence,
            state.current_txn_start_offset) == (pid, epoch, 1, first)
    assert state.last_timestamp > 0
    assert found[("t", 9)].error_code == ErrorCode.unknown_topic_or_partition
    assert found[("nope", 0)].error_code == ErrorCode.unknown_topic_or_partition
    assert found[("bad/name", 0)].error_code == ErrorCode.invalid_topic_exception
    call(served, 26, 3, transactional_id="a", producer_id=pid, producer_epoch=epoch,
         committed=False)
    response = call(served, 61, 0, topics=(request_topic(name="t", partition_indexes=(1,)),))
    (state,) = response.topics[0].partitions[0].active_producers
    assert (state.current_txn_start_offset, state.coordinator_epoch) == (-1, 0)


def test_idle_transactional_ids_are_forgotten(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data", config={
        "transactional.id.expiration.ms": 100,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 50})
    first = init(broker, "idle")
    assert first.error_code == ErrorCode.none
    deadline = time.monotonic() + 10
    while broker.store.transaction_coordinator().describe("idle") is not None:
        assert time.monotonic() < deadline, "the idle id was never expired"
        time.sleep(0.05)
    states = call(broker, 65, 0, transactional_ids=("idle",)).transaction_states
    assert states[0].error_code == ErrorCode.transactional_id_not_found
    again = init(broker, "idle")
    assert again.error_code == ErrorCode.none and again.producer_epoch == 0
    assert again.producer_id != first.producer_id
