"""Differential: the online migration of a group (Kafka 4.x) through real clients, against
the real Kafka 4.4 broker and ``seglog serve``: a classic librdkafka member's group becomes
a consumer group when a member of the consumer protocol joins, and a classic group again
when that member leaves; the group types, settled states and member counts seen are the
same on both, and every record is read once."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench.kafka import KafkaBroker, find_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.clients]

_REF, _WHY = find_kafka()
WAIT_S = 30.0
TOPIC = "mt"
PARTITIONS = 6
GROUP_CONFIG = {
    "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 300}


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    if _REF is None:
        import os
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka-migration"), extra_properties=dict(
        GROUP_CONFIG, **{"group.initial.rebalance.delay.ms": 0,
                         "offsets.topic.num.partitions": 1}))
    kafka.format()
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _consumer(bootstrap: str, group_protocol: str) -> Consumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": "mig",
                "group.protocol": group_protocol, "auto.offset.reset": "earliest",
                "enable.auto.commit": False}
    if group_protocol == "classic":
        settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    consumer = Consumer(settings)
    consumer.subscribe([TOPIC])
    return consumer


def _assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _poll_until(members: list[Consumer], done, seen: dict[int, int]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for consumer in members:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen[message.partition()] = seen.get(message.partition(), 0) + 1
                consumer.commit(message=message, asynchronous=False)
        owned = [_assigned(c) for c in members]
        assert sum(len(o) for o in owned) == len(set().union(*owned)), owned
        if done():
            return True
    return False


def _settled(admin: AdminClient, members: list[Consumer], seen: dict[int, int]
             ) -> tuple[str, str, int]:
    """``(type, state, member count)`` of the group once it is Stable (bounded: the last
    seen otherwise), the members polling meanwhile."""
    observed = ("", "", 0)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        _poll_until(members, lambda: True, seen)
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(WAIT_S).valid}
        group = listed.get("mig")
        if group is not None:
            described = admin.describe_consumer_groups(["mig"])["mig"].result(WAIT_S)
            observed = (group.type.name, described.state.name, len(described.members))
            if observed[1] == "STABLE" and observed[2] == len(members):
                break
    return observed


def _scenario(bootstrap: str) -> list[tuple[str, str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(60):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    seen: dict[int, int] = {}
    observed = []
    classic = _consumer(bootstrap, "classic")
    modern = None
    try:
        assert _poll_until([classic], lambda: len(_assigned(classic)) == PARTITIONS, seen)
        observed.append(_settled(admin, [classic], seen))
        modern = _consumer(bootstrap, "consumer")
        assert _poll_until([classic, modern], lambda: len(_assigned(modern)) == 3
                           and len(_assigned(classic)) == 3, seen)
        observed.append(_settled(admin, [classic, modern], seen))
        modern.close()
        modern = None
        assert _poll_until([classic], lambda: len(_assigned(classic)) == PARTITIONS
                           and sum(seen.values()) == 60, seen)
        observed.append(_settled(admin, [classic], seen))
    finally:
        classic.close()
        if modern is not None:
            modern.close()
    assert seen == {p: 10 for p in range(PARTITIONS)}
    return observed


def test_online_migration_matches_kafka(real_kafka, broker_factory, tmp_path):
    seglog_broker = broker_factory(config=GROUP_CONFIG, data_dir=tmp_path / "data")
    kafka_seen = _scenario(real_kafka.bootstrap)
    assert kafka_seen == [("CLASSIC", "STABLE", 1), ("CONSUMER", "STABLE", 2),
                          ("CLASSIC", "STABLE", 1)]
    assert _scenario(seglog_broker.bootstrap) == kafka_seen
