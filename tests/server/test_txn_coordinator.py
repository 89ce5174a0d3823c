"""The transaction coordinator's Kafka entry points (``TransactionCoordinator.handle_*``,
``verify_partitions``, ``check_transactional_offsets``, ``list_transactions``), which the
wire broker answers with, against a real Store on both storage backends.

Each rule is Kafka's TransactionCoordinator (transaction.version 0/1 clients): the expected
errors were checked against a Kafka 4.4 broker with the same request sequences.
"""

from __future__ import annotations

import pytest

from seglog.coordinator import txn_schema
from seglog.coordinator.transaction import PRODUCER_EPOCH_MAX
from seglog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from seglog.store import Store
from seglog.types import OffsetAndMetadata, TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def store(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        s.create_topic("t", 2)
        yield s


def _markers(log):
    """(producer id, epoch, commit) of every control batch of ``log``."""
    found = []
    view = log.read(log.start_offset, max_offset=log.end_offset, max_bytes=1 << 20)
    for batch in log.backend.iter_batches(view.buffer):
        if batch.is_control:
            found.append((batch.producer_id, batch.producer_epoch, batch.control_type() == 1))
    return found


def test_new_id_gets_epoch_0_and_a_known_one_the_next_epoch(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    assert epoch == 0
    assert coordinator.handle_init_producer_id("a", timeout_ms=60000) == (pid, 1)
    with pytest.raises(InvalidTransactionTimeoutError):
        coordinator.handle_init_producer_id("a", timeout_ms=60001, timeout_ms_max=60000)
    with pytest.raises(InvalidTransactionTimeoutError):
        coordinator.handle_init_producer_id("a", timeout_ms=0)


def test_errors_name_the_mismatch(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    with pytest.raises(InvalidProducerIdMappingError):
        coordinator.handle_add_partitions("unknown", pid, epoch, [TP0])
    with pytest.raises(InvalidProducerIdMappingError):
        coordinator.handle_add_partitions("a", pid + 1, epoch, [TP0])
    with pytest.raises(ProducerFencedError):
        coordinator.handle_add_partitions("a", pid, epoch + 1, [TP0])
    with pytest.raises(InvalidTxnStateError):  # nothing ongoing
        coordinator.handle_end_transaction("a", pid, epoch, commit=True)
    with pytest.raises(InvalidTxnStateError):  # AddOffsetsToTxn did not come first
        coordinator.check_transactional_offsets("a", pid, epoch, TP0)
    with pytest.raises(InvalidProducerEpochError):
        coordinator.check_transactional_offsets("a", pid, epoch + 1, TP0)


def test_end_transaction_writes_markers_and_a_retry_succeeds(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    coordinator.handle_add_partitions("a", pid, epoch, [TP0, TP1])
    assert coordinator.verify_partitions("a", pid, epoch, [TP0, ("t", 5)]) == {
        TP0: True, TopicPartition("t", 5): False}
    coordinator.check_transactional_offsets("a", pid, epoch, TP1)
    assert coordinator.handle_end_transaction("a", pid, epoch, commit=True) == (pid, epoch)
    assert _markers(store.log(TP0)) == [(pid, epoch, True)]
    assert _markers(store.log(TP1)) == [(pid, epoch, True)]
    # The same EndTxn again (its answer was lost): NONE, nothing written.
    assert coordinator.handle_end_transaction("a", pid, epoch, commit=True) == (pid, epoch)
    assert len(_markers(store.log(TP0))) == 1
    with pytest.raises(InvalidTxnStateError):
        coordinator.handle_end_transaction("a", pid, epoch, commit=False)
    assert coordinator.describe("a").state == "CompleteCommit"


def test_init_with_a_transaction_ongoing_fences_aborts_then_answers_concurrent(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    coordinator.handle_add_partitions("a", pid, epoch, [TP0])
    with pytest.raises(ConcurrentTransactionsError):
        coordinator.handle_init_producer_id("a", timeout_ms=60000)
    # Fenced with epoch + 1, which the ABORT marker carries; the retry gets epoch + 2.
    assert _markers(store.log(TP0)) == [(pid, epoch + 1, False)]
    assert coordinator.describe("a").state == "CompleteAbort"
    assert coordinator.handle_init_producer_id("a", timeout_ms=60000) == (pid, epoch + 2)
    with pytest.raises(ProducerFencedError):  # the old producer
        coordinator.handle_end_transaction("a", pid, epoch, commit=True)


def test_kip360_bump_retry_and_fence(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    bumped = coordinator.handle_init_producer_id(
        "a", timeout_ms=60000, expected_producer_id=pid, expected_producer_epoch=epoch)
    assert bumped == (pid, epoch + 1)
    # The same request again (its answer was lost): the same epoch, no second bump.
    assert coordinator.handle_init_producer_id(
        "a", timeout_ms=60000, expected_producer_id=pid, expected_producer_epoch=epoch) == bumped
    with pytest.raises(ProducerFencedError):  # an epoch neither current nor just left
        coordinator.handle_init_producer_id(
            "a", timeout_ms=60000, expected_producer_id=pid, expected_producer_epoch=epoch + 7)
    with pytest.raises(ProducerFencedError):  # another producer id
        coordinator.handle_init_producer_id(
            "a", timeout_ms=60000, expected_producer_id=pid + 50, expected_producer_epoch=0)
    # A new producer (no expected epoch) forgets the previous epoch: the old retry is fenced.
    coordinator.handle_init_producer_id("a", timeout_ms=60000)
    with pytest.raises(ProducerFencedError):
        coordinator.handle_init_producer_id(
            "a", timeout_ms=60000, expected_producer_id=pid, expected_producer_epoch=epoch + 1)
    # An unknown id with an expected producer (it expired): a fresh producer id, epoch 0.
    fresh = coordinator.handle_init_producer_id(
        "b", timeout_ms=60000, expected_producer_id=pid, expected_producer_epoch=3)
    assert fresh[1] == 0 and fresh[0] != pid


def test_epoch_exhaustion_moves_to_a_new_producer_id(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        pid, _ = s.transaction_coordinator().handle_init_producer_id("a", timeout_ms=60000)
        # The id's state as a long-lived id gets there: its last usable epoch, recorded in
        # __transaction_state (the last value per key wins when the store loads it).
        s.log((txn_schema.TRANSACTION_STATE_TOPIC, 0)).append_batch(
            [txn_schema.encode_value(txn_schema.TransactionLogValue(
                pid, PRODUCER_EPOCH_MAX, 60000, txn_schema.COMPLETE_COMMIT, (), 1000))],
            keys=[txn_schema.encode_key("a")])
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        coordinator = s.transaction_coordinator()
        assert coordinator.describe("a").producer_epoch == PRODUCER_EPOCH_MAX
        new_pid, new_epoch = coordinator.handle_init_producer_id(
            "a", timeout_ms=60000, expected_producer_id=pid,
            expected_producer_epoch=PRODUCER_EPOCH_MAX)
        assert new_pid != pid and new_epoch == 0
        # A retry of that rotation names the old producer id at the exhausted epoch.
        assert coordinator.handle_init_producer_id(
            "a", timeout_ms=60000, expected_producer_id=pid,
            expected_producer_epoch=PRODUCER_EPOCH_MAX) == (new_pid, 0)
        # Without an expected producer: the next epoch of the new producer id.
        assert coordinator.handle_init_producer_id("a", timeout_ms=60000) == (new_pid, 1)


def test_timed_out_transaction_is_aborted_with_a_fencing_epoch(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=1000)
    coordinator.handle_add_partitions("a", pid, epoch, [TP0], now_ms=10_000)
    assert store.abort_timed_out_transactions(now_ms=10_500) == []
    assert store.abort_timed_out_transactions(now_ms=11_001) == ["a"]
    assert _markers(store.log(TP0)) == [(pid, epoch + 1, False)]
    assert store.log(TP0).last_stable_offset == store.log(TP0).end_offset
    with pytest.raises(ProducerFencedError):
        coordinator.handle_end_transaction("a", pid, epoch, commit=True)
    assert coordinator.describe("a").producer_epoch == epoch + 1


def test_list_transactions_filters(store):
    coordinator = store.transaction_coordinator()
    pa, ea = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    pb, eb = coordinator.handle_init_producer_id("b", timeout_ms=60000)
    coordinator.handle_add_partitions("b", pb, eb, [TP0], now_ms=5_000)

    def ids(**filters):
        return [d.transactional_id for d in coordinator.list_transactions(**filters)]

    assert ids() == ["a", "b"]
    assert ids(states=["Ongoing"]) == ["b"]
    assert ids(states=["Bogus"]) == []
    assert ids(producer_ids=[pa]) == ["a"]
    assert ids(states=["Ongoing"], duration_ms=1_000, now_ms=5_500) == []
    assert ids(states=["Ongoing"], duration_ms=1_000, now_ms=6_001) == ["b"]


def test_state_survives_a_reopen(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        s.create_topic("t", 2)
        coordinator = s.transaction_coordinator()
        pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
        coordinator.handle_add_partitions("a", pid, epoch, [TP0])
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        description = s.transaction_coordinator().describe("a")
        assert (description.producer_id, description.producer_epoch, description.state) == (
            pid, epoch, "Ongoing")
        s.transaction_coordinator().handle_end_transaction("a", pid, epoch, commit=False)
        assert _markers(s.log(TP0)) == [(pid, epoch, False)]


def test_transactional_offsets_are_appended_for_the_producer_and_held(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    offsets_tp = store.txn_offset_commit_records("g", {}).tp
    with pytest.raises(InvalidTxnStateError):  # the partition is not in the transaction
        coordinator.append_transactional_offsets("a", pid, epoch, "g",
                                                 {TP0: OffsetAndMetadata(3)})
    coordinator.handle_add_partitions("a", pid, epoch, [offsets_tp])
    assert coordinator.append_transactional_offsets(
        "a", pid, epoch, "g", {TP0: OffsetAndMetadata(3)}) == offsets_tp
    coordinator.append_transactional_offsets("a", pid, epoch, "g",
                                             {TP1: OffsetAndMetadata(8, "m")})
    entry = store.log(offsets_tp).producer_state.last_entry(pid)
    assert (entry.producer_epoch, entry.last_seq) == (epoch, 1)  # two batches: 0, then 1
    assert store.offset_fetch("g", TP0) is None and store.offset_commit_pending("g", TP0)
    coordinator.handle_end_transaction("a", pid, epoch, commit=True)
    assert store.offset_fetch("g", TP0).offset == 3
    committed = store.offset_fetch("g", TP1)
    assert (committed.offset, committed.metadata) == (8, "m")
    # The next transaction (same epoch, transaction.version 1) continues the sequence;
    # its aborted commit is dropped.
    coordinator.handle_add_partitions("a", pid, epoch, [offsets_tp])
    coordinator.append_transactional_offsets("a", pid, epoch, "g", {TP0: OffsetAndMetadata(99)})
    assert store.log(offsets_tp).producer_state.last_entry(pid).last_seq == 2
    coordinator.handle_end_transaction("a", pid, epoch, commit=False)
    assert store.offset_fetch("g", TP0).offset == 3
    assert not store.offset_commit_pending("g", TP0)


def test_verify_transactional_append(store):
    coordinator = store.transaction_coordinator()
    pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
    with pytest.raises(InvalidTxnStateError, match="not added to the transaction"):
        coordinator.verify_transactional_append("a", pid, epoch, TP0)
    coordinator.handle_add_partitions("a", pid, epoch, [TP0])
    coordinator.verify_transactional_append("a", pid, epoch, TP0)
    with pytest.raises(InvalidTxnStateError):
        coordinator.verify_transactional_append("a", pid, epoch, TP1)
    with pytest.raises(InvalidProducerEpochError):
        coordinator.verify_transactional_append("a", pid, epoch - 1, TP0)
    with pytest.raises(InvalidProducerIdMappingError):
        coordinator.verify_transactional_append("nobody", pid, epoch, TP0)


def test_idle_transactional_ids_expire(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        s.create_topic("t", 2)
        coordinator = s.transaction_coordinator()
        pid_a, epoch_a = coordinator.handle_init_producer_id("a", timeout_ms=60000,
                                                             now_ms=1_000)
        pid_b, epoch_b = coordinator.handle_init_producer_id("b", timeout_ms=60000,
                                                             now_ms=1_000)
        coordinator.handle_add_partitions("b", pid_b, epoch_b, [TP0], now_ms=1_000)
        assert coordinator.expire_transactional_ids(expiration_ms=5_000, now_ms=5_999) == []
        # "b" has a transaction ongoing: never expired while it is in flight.
        assert coordinator.expire_transactional_ids(expiration_ms=5_000, now_ms=6_000) == ["a"]
        assert coordinator.describe("a") is None
        with pytest.raises(InvalidProducerIdMappingError):
            coordinator.handle_add_partitions("a", pid_a, epoch_a, [TP0])
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        coordinator = s.transaction_coordinator()
        assert coordinator.describe("a") is None  # the tombstone is replayed
        assert coordinator.describe("b").state == "Ongoing"
        pid, epoch = coordinator.handle_init_producer_id("a", timeout_ms=60000)
        assert pid not in (pid_a, pid_b) and epoch == 0
