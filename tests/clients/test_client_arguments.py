"""Producer ``acks`` and the error classes bad client arguments raise (seglog.errors, each
also the built-in exception and with the Kafka error code a broker would answer with)."""

from __future__ import annotations

import pytest

from seglog import errors
from seglog.store import Store


@pytest.fixture
def store(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as s:
        s.create_topic("t")
        yield s


@pytest.mark.parametrize("acks, number", [(None, -1), ("all", -1), (-1, -1), ("-1", -1),
                                          (1, 1), ("1", 1)])
def test_single_broker_acks_are_accepted(store, acks, number):
    producer = store.producer(acks=acks, linger_ms=0)
    assert producer.acks == number
    assert producer.send("t", b"v").result().offset >= 0  # acknowledged with its offset
    producer.close()


@pytest.mark.parametrize("acks", [0, "0"])
def test_fire_and_forget_is_refused_with_a_reason(store, acks):
    with pytest.raises(errors.InvalidRequiredAcksError, match="fire-and-forget"):
        store.producer(acks=acks)


@pytest.mark.parametrize("acks", [2, -2, "ALL", "leader", True, 1.5, [1]])
def test_other_acks_are_invalid_required_acks(store, acks):
    with pytest.raises(errors.InvalidRequiredAcksError) as info:
        store.producer(acks=acks)
    assert isinstance(info.value, ValueError)
    assert info.value.kafka_error_code == 21  # INVALID_REQUIRED_ACKS


def test_idempotence_needs_acks_all(store):
    with pytest.raises(errors.InvalidRequiredAcksError, match="acks='all'"):
        store.producer(idempotent=True, acks=1)
    with pytest.raises(errors.InvalidRequiredAcksError):
        store.producer(transactional_id="x", acks=1)
    assert store.producer(idempotent=True, acks="all").acks == -1


@pytest.mark.parametrize("kwargs, error, builtin, code", [
    ({"linger_ms": 1.5}, errors.InvalidArgumentTypeError, TypeError, 42),
    ({"linger_ms": -1}, errors.InvalidArgumentError, ValueError, 42),
    ({"compression": "brotli"}, errors.UnknownCompressionTypeError, ValueError, 76),
    ({"partitioner": "random"}, errors.InvalidArgumentError, ValueError, 42),
    ({"transactional_id": ""}, errors.InvalidArgumentError, ValueError, 42),
    ({"transactional_id": "x", "idempotent": False}, errors.InvalidArgumentError,
     ValueError, 42),
    ({"transactional_id": "x", "transaction_timeout_ms": 0},
     errors.InvalidTransactionTimeoutError, ValueError, 50),
])
def test_producer_argument_errors(store, kwargs, error, builtin, code):
    with pytest.raises(error) as info:
        store.producer(**kwargs)
    assert isinstance(info.value, builtin) and isinstance(info.value, errors.SeglogError)
    assert info.value.kafka_error_code == code


def test_producer_call_argument_errors(store):
    producer = store.producer(transactional_id="x")
    with pytest.raises(errors.InvalidArgumentTypeError):
        producer.send("t", b"v", partition="0")
    producer.begin_transaction()
    with pytest.raises(errors.InvalidGroupIdError) as info:
        producer.send_offsets_to_transaction({("t", 0): 1}, "")
    assert info.value.kafka_error_code == 24
    with pytest.raises(errors.OffsetMetadataTooLargeError) as info:
        producer.send_offsets_to_transaction({("t", 0): (1, "m" * 4097)}, "g")
    assert isinstance(info.value, ValueError) and info.value.kafka_error_code == 12
    with pytest.raises(errors.InvalidArgumentError):
        producer.send_offsets_to_transaction({("t", 0): -1}, "g")
    with pytest.raises(errors.InvalidArgumentTypeError):
        producer.send_offsets_to_transaction({"t": 1}, "g")
    producer.abort_transaction()


@pytest.mark.parametrize("kwargs, error, builtin, code", [
    ({"group_id": ""}, errors.InvalidGroupIdError, ValueError, 24),
    ({"auto_offset_reset": "middle"}, errors.InvalidArgumentError, ValueError, 42),
    ({"isolation_level": "dirty"}, errors.InvalidArgumentError, ValueError, 42),
    ({"partition_assignment_strategy": "sticky"}, errors.UnknownAssignorError, KeyError, 23),
    ({"max_poll_records": 0}, errors.InvalidArgumentError, ValueError, 42),
    ({"max_partition_fetch_bytes": "1"}, errors.InvalidArgumentTypeError, TypeError, 42),
])
def test_consumer_argument_errors(store, kwargs, error, builtin, code):
    with pytest.raises(error) as info:
        store.consumer(**kwargs)
    assert isinstance(info.value, builtin) and isinstance(info.value, errors.SeglogError)
    assert info.value.kafka_error_code == code


def test_consumer_call_argument_errors(store):
    consumer = store.consumer("g")
    with pytest.raises(errors.InvalidArgumentTypeError):
        consumer.subscribe("t")
    with pytest.raises(errors.InvalidArgumentError):
        consumer.commit({("t", 0): -5})
    with pytest.raises(errors.InvalidArgumentTypeError):
        consumer.poll(timeout_ms=0.5)
    lone = store.consumer()
    with pytest.raises(errors.InvalidGroupIdError):
        lone.subscribe(["t"])
    with pytest.raises(errors.InvalidArgumentTypeError):
        lone.assign([3])
    with pytest.raises(errors.InvalidGroupIdError):
        store.group("")
