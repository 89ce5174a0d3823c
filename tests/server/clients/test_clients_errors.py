"""Kafka's error codes as real clients meet them, against Kafka and seglog alike: topic
admin mistakes, a record too large, a fetch out of range, auto-created topics, a fenced
transactional producer. Each result is the error's name (librdkafka's or kafka-python's
error class), so the two brokers must answer with the same code."""

from __future__ import annotations

import pytest

from clients_runner import (
    OP_TIMEOUT_S, Rec, admin, confluent_consume, confluent_produce, create_topic,
)


def _error_name(future, timeout_s: float = OP_TIMEOUT_S) -> str:
    from confluent_kafka import KafkaException
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        return exc.args[0].name()
    return "NO_ERROR"


def test_topic_admin_errors(target, differential, unique):
    """CreateTopics of an existing topic, of zero partitions and of an illegal name;
    DeleteTopics of an unknown topic; CreatePartitions that would shrink a topic; each
    answered with Kafka's code (INVALID_TOPIC_EXCEPTION is 17, librdkafka's TOPIC_EXCEPTION),
    and the good requests succeed; validate-only creates nothing."""
    from confluent_kafka.admin import NewPartitions, NewTopic

    b = target.bootstrap
    client = admin(b)
    kw = {"request_timeout": OP_TIMEOUT_S, "operation_timeout": OP_TIMEOUT_S}
    seen = {}
    seen["create"] = _error_name(client.create_topics([NewTopic(unique, 2, 1)], **kw)[unique])
    seen["create again"] = _error_name(
        client.create_topics([NewTopic(unique, 2, 1)], **kw)[unique])
    seen["validate only"] = _error_name(client.create_topics(
        [NewTopic(f"{unique}-v", 3, 1)], validate_only=True, **kw)[f"{unique}-v"])
    seen["bad name"] = _error_name(
        client.create_topics([NewTopic("bad/name", 1, 1)], **kw)["bad/name"])
    seen["grow"] = _error_name(
        client.create_partitions([NewPartitions(unique, 4)], **kw)[unique])
    seen["shrink"] = _error_name(
        client.create_partitions([NewPartitions(unique, 3)], **kw)[unique])
    seen["delete unknown"] = _error_name(
        client.delete_topics([f"{unique}-missing"], **kw)[f"{unique}-missing"])
    seen["delete"] = _error_name(client.delete_topics([unique], **kw)[unique])
    validated = client.list_topics(timeout=10).topics.get(f"{unique}-v")
    seen["validate only created it"] = validated is not None and validated.error is None
    assert seen == {"create": "NO_ERROR", "create again": "TOPIC_ALREADY_EXISTS",
                    "validate only": "NO_ERROR", "bad name": "TOPIC_EXCEPTION",
                    "grow": "NO_ERROR", "shrink": "INVALID_PARTITIONS",
                    "delete unknown": "UNKNOWN_TOPIC_OR_PART", "delete": "NO_ERROR",
                    "validate only created it": False}
    differential(seen)


def test_record_too_large_and_fetch_out_of_range(target, differential, unique):
    """A record over the broker's message.max.bytes (the client's own limit raised) is refused
    with MSG_SIZE_TOO_LARGE; a consumer that starts past the end with no reset policy gets
    OFFSET_OUT_OF_RANGE (kafka-python's OffsetOutOfRangeError)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import OffsetOutOfRangeError

    b = target.bootstrap
    create_topic(b, unique)
    confluent_produce(b, unique, [Rec(b"k", b"small")] * 5)
    try:
        confluent_produce(b, unique, [Rec(b"k", b"x" * 1_100_000)],
                          **{"message.max.bytes": 2_000_000}, timeout_s=15)
        too_large = "NO_ERROR"
    except RuntimeError as exc:
        too_large = "MSG_SIZE_TOO_LARGE" if "MSG_SIZE_TOO_LARGE" in str(exc) else str(exc)
    c = KafkaConsumer(bootstrap_servers=b, auto_offset_reset="none", enable_auto_commit=False,
                      request_timeout_ms=15000)
    try:
        tp = TopicPartition(unique, 0)
        c.assign([tp])
        c.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError) as raised:
            for _ in range(50):  # bounded: one fetch answers OFFSET_OUT_OF_RANGE
                c.poll(timeout_ms=200)
        out_of_range = type(raised.value).__name__
        end = c.end_offsets([tp])[tp]
    finally:
        c.close()
    result = {"too large": too_large, "out of range": out_of_range, "end": end}
    assert result == {"too large": "MSG_SIZE_TOO_LARGE", "out of range": "OffsetOutOfRangeError",
                      "end": 5}
    differential(result)


def test_auto_created_topic(target, differential, unique):
    """Producing to a topic nobody created makes it (auto.create.topics.enable and
    num.partitions at Kafka's defaults: one partition); kafka-python's producer waits for it."""
    from kafka import KafkaProducer

    b = target.bootstrap
    p = KafkaProducer(bootstrap_servers=b, max_block_ms=15000, request_timeout_ms=15000)
    try:
        md = p.send(unique, key=b"k", value=b"v").get(timeout=OP_TIMEOUT_S)
        partitions = sorted(p.partitions_for(unique))
    finally:
        p.close(timeout=5)
    result = {"partition": md.partition, "offset": md.offset, "partitions": partitions}
    assert result == {"partition": 0, "offset": 0, "partitions": [0]}
    differential(result)


def test_fenced_transactional_producer(target, differential, unique):
    """A second producer with the same transactional.id fences the first: the first one's
    next transaction fails with the fatal _FENCED error, the second one's commits."""
    from confluent_kafka import KafkaException, Producer

    b = target.bootstrap
    create_topic(b, unique)
    conf = {"bootstrap.servers": b, "transactional.id": f"{unique}-tx",
            "transaction.timeout.ms": 60000}
    first = Producer(conf)
    first.init_transactions(OP_TIMEOUT_S)
    first.begin_transaction()
    first.produce(unique, b"first-1")
    assert first.flush(OP_TIMEOUT_S) == 0
    second = Producer(conf)
    second.init_transactions(OP_TIMEOUT_S)  # aborts the first one's open transaction
    second.begin_transaction()
    second.produce(unique, b"second-1")
    second.commit_transaction(OP_TIMEOUT_S)
    try:
        first.produce(unique, b"first-2")
        first.commit_transaction(OP_TIMEOUT_S)
        fenced = "NO_ERROR"
    except KafkaException as exc:
        err = exc.args[0]
        fenced = f"{err.name()} fatal={err.fatal()}"
    values = [s.value for s in confluent_consume(b, unique, isolation="read_committed")]
    result = {"first": fenced, "committed": values}
    assert result == {"first": "_FENCED fatal=True", "committed": [b"second-1"]}
    differential(result)
