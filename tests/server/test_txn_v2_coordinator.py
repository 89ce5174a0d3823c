"""The transaction coordinator's transactions v2 rules (KIP-890 part 2, Kafka's
``TransactionCoordinator.endTransaction`` with ``TransactionVersion.TV_2``), on an embedded
Store: the epoch bump at every EndTxn v5, the markers at the new epoch, the retry from the
epoch before (also after the store is opened again: the client transaction version is kept
in the ``__transaction_state`` records, version 1), the second EndTxn at the new epoch
(INVALID_TXN_STATE), a zombie at the old epoch fenced. The wire answers are compared with
Kafka 4.4 in test_txn_v2_differential.py.
"""

from __future__ import annotations

import pytest

from seglog.coordinator import txn_schema
from seglog.errors import InvalidProducerEpochError, InvalidTxnStateError, ProducerFencedError
from seglog.store import Store
from seglog.types import TopicPartition

TP0 = TopicPartition("t", 0)


def _markers(log):
    view = log.read(log.start_offset, max_offset=log.end_offset, max_bytes=1 << 20)
    return [(b.producer_id, b.producer_epoch, b.control_type() == 1)
            for b in log.backend.iter_batches(view.buffer) if b.is_control]


def _state_values(store):
    log = store.log(("__transaction_state", 0))
    return [txn_schema.decode_value(r.value) for r in log.records(
        log.start_offset, max_offset=log.end_offset) if r.value is not None]


def test_every_end_txn_v5_bumps_the_epoch_and_a_reload_keeps_the_rules(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1,
               transaction_state_partitions=1) as store:
        store.create_topic("t", 1)
        coordinator = store.transaction_coordinator()
        pid, epoch = coordinator.handle_init_producer_id("v2", timeout_ms=60000)
        coordinator.handle_add_partitions("v2", pid, epoch, [TP0], transaction_version=2)
        assert coordinator.handle_end_transaction("v2", pid, epoch, commit=True,
                                                  transaction_version=2) == (pid, epoch + 1)
        assert _markers(store.log(TP0)) == [(pid, epoch + 1, True)]
        # The client's retry (its answer lost) names the epoch before the bump.
        assert coordinator.handle_end_transaction("v2", pid, epoch, commit=True,
                                                  transaction_version=2) == (pid, epoch + 1)
        with pytest.raises(InvalidTxnStateError):  # nothing ongoing at the new epoch
            coordinator.handle_end_transaction("v2", pid, epoch + 1, commit=True,
                                               transaction_version=2)
        with pytest.raises(InvalidTxnStateError):  # the other outcome of the retry
            coordinator.handle_end_transaction("v2", pid, epoch, commit=False,
                                               transaction_version=2)
        written = _state_values(store)
        assert [(v.status, v.producer_epoch, v.client_transaction_version, v.version)
                for v in written[-2:]] == [
            (txn_schema.PREPARE_COMMIT, epoch + 1, 2, 1),
            (txn_schema.COMPLETE_COMMIT, epoch + 1, 2, 1)]

    with Store(tmp_path, backend=backend, offsets_topic_partitions=1,
               transaction_state_partitions=1) as store:
        coordinator = store.transaction_coordinator()
        # Still recognised as a retry by the coordinator that loaded the state.
        assert coordinator.handle_end_transaction("v2", pid, epoch, commit=True,
                                                  transaction_version=2) == (pid, epoch + 1)
        coordinator.handle_add_partitions("v2", pid, epoch + 1, [TP0], transaction_version=2)
        with pytest.raises(ProducerFencedError):  # a zombie of the old epoch
            coordinator.handle_end_transaction("v2", pid, epoch, commit=False,
                                               transaction_version=2)
        assert coordinator.handle_end_transaction("v2", pid, epoch + 1, commit=False,
                                                  transaction_version=2) == (pid, epoch + 2)
        assert _markers(store.log(TP0))[-1] == (pid, epoch + 2, False)


def test_end_txn_below_v5_keeps_the_epoch(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t", 1)
        coordinator = store.transaction_coordinator()
        pid, epoch = coordinator.handle_init_producer_id("v1", timeout_ms=60000)
        coordinator.handle_add_partitions("v1", pid, epoch, [TP0])
        assert coordinator.handle_end_transaction("v1", pid, epoch, commit=True) == (pid, epoch)
        assert coordinator.handle_end_transaction("v1", pid, epoch, commit=True) == (pid, epoch)
        assert _markers(store.log(TP0)) == [(pid, epoch, True)]


def test_a_tv2_marker_must_carry_a_bumped_epoch(store_v2):
    store, coordinator, pid, epoch = store_v2
    store.log(TP0).append_batch([b"x"], producer_id=pid, producer_epoch=epoch,
                                base_sequence=0, is_transactional=True)
    with pytest.raises(InvalidProducerEpochError):  # Kafka: "<=" the last seen epoch
        coordinator.write_marker(TP0, producer_id=pid, producer_epoch=epoch,
                                 coordinator_epoch=0, commit=True, transaction_version=2)
    coordinator.write_marker(TP0, producer_id=pid, producer_epoch=epoch + 1,
                             coordinator_epoch=0, commit=True, transaction_version=2)
    # its retry (same epoch, no transaction open) is written again, harmlessly
    coordinator.write_marker(TP0, producer_id=pid, producer_epoch=epoch + 1,
                             coordinator_epoch=0, commit=True, transaction_version=2)
    assert _markers(store.log(TP0)) == [(pid, epoch + 1, True)] * 2


def test_a_tv1_marker_may_carry_the_batches_epoch(store_v2):
    store, coordinator, pid, epoch = store_v2
    store.log(TP0).append_batch([b"x"], producer_id=pid, producer_epoch=epoch,
                                base_sequence=0, is_transactional=True)
    coordinator.write_marker(TP0, producer_id=pid, producer_epoch=epoch,
                             coordinator_epoch=0, commit=True, transaction_version=1)
    assert _markers(store.log(TP0)) == [(pid, epoch, True)]


@pytest.fixture
def store_v2(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t", 1)
        coordinator = store.transaction_coordinator()
        pid, epoch = coordinator.handle_init_producer_id("m", timeout_ms=60000)
        yield store, coordinator, pid, epoch


def test_an_exhausted_epoch_moves_to_a_new_producer_id(tmp_path, backend):
    """EndTxn v5 at the last epoch (32766, Kafka's ``isProducerEpochExhausted``): the
    markers carry 32767, the id completes onto a new producer id at epoch 0, which the
    answer gives; the retry from the old producer id at its last epoch gets the same."""
    from seglog.coordinator.transaction import PRODUCER_EPOCH_MAX
    from seglog.coordinator.txn_schema import TransactionLogValue

    ongoing = TransactionLogValue(700, PRODUCER_EPOCH_MAX, 60000, txn_schema.ONGOING,
                                  (("t", 0),), 1000, 900, client_transaction_version=2,
                                  version=1)
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1,
               transaction_state_partitions=1) as store:
        store.create_topic("t", 1)
        store._coordinators.internal_topic("__transaction_state").log(0).append_batch(
            [txn_schema.encode_value(ongoing)], keys=[txn_schema.encode_key("x")])
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1,
               transaction_state_partitions=1) as store:
        coordinator = store.transaction_coordinator()
        new_id, new_epoch = coordinator.handle_end_transaction(
            "x", 700, PRODUCER_EPOCH_MAX, commit=True, transaction_version=2)
        assert new_id != 700 and new_epoch == 0
        assert _markers(store.log(TP0)) == [(700, PRODUCER_EPOCH_MAX + 1, True)]
        assert coordinator.handle_end_transaction(
            "x", 700, PRODUCER_EPOCH_MAX, commit=True, transaction_version=2) == (new_id, 0)
        with pytest.raises(InvalidTxnStateError):  # nothing ongoing for the new id
            coordinator.handle_end_transaction("x", new_id, 0, commit=True,
                                               transaction_version=2)
