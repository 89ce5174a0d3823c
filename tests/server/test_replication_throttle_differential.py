"""The replication throttle configs (KIP-73) through confluent-kafka's admin client, the same
calls against a lone seglog broker and a real Kafka 4.4 broker: Kafka's dynamic-only broker
configs (``DynamicConfig.Broker``) are listed by DescribeConfigs only while set, as
DYNAMIC_BROKER_CONFIG with themselves as the only synonym; bad values are refused in Kafka's
words; ``kafka-reassign-partitions --verify``'s DELETEs (the two rates and
``replica.alter.log.dirs.io.max.bytes.per.second``) succeed; the topic lists are validated as
Kafka's ``ThrottledReplicaListValidator``."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)

from seglog.bench.kafka import KafkaBroker, find_kafka

from kafka_waits import eventually

pytestmark = pytest.mark.kafka

_REF, _WHY = find_kafka()
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
         "replica.alter.log.dirs.io.max.bytes.per.second")


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka"))
    kafka.format()
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _script(bootstrap: str, broker_id: str, topic: str) -> list:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    out: list = []

    def describe():
        resource = ConfigResource("BROKER", broker_id)
        entries = admin.describe_configs([resource])[resource].result(timeout=20)
        return sorted((name, e.value, int(e.source), e.is_read_only, e.is_sensitive,
                       [(s.name, s.value, int(s.source)) for s in e.synonyms.values()])
                      for name, e in entries.items() if name in RATES)

    def alter(resource_type, name, ops):
        resource = ConfigResource(resource_type, name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=(
                AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET))
            for key, value in ops.items()])
        try:
            admin.incremental_alter_configs([resource])[resource].result(timeout=20)
            return "ok"
        except KafkaException as e:
            err = e.args[0]
            return (err.name(), err.str())

    out.append(("unset", describe()))
    out.append(alter("BROKER", broker_id, {"leader.replication.throttled.rate": "1000",
                                           "follower.replication.throttled.rate": "2000"}))
    out.append(("set", eventually(describe, lambda d: len(d) == 2)))
    for bad in ("-5", "abc"):
        out.append((bad, alter("BROKER", broker_id,
                               {"leader.replication.throttled.rate": bad})))
    out.append(alter("BROKER", broker_id, {name: None for name in RATES}))
    out.append(("deleted", eventually(describe, lambda d: not d)))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=20)
    last_set = None
    for value in ("0:1,1:2", "*", "0:1, 1:2", "bad", ""):
        answer = alter("TOPIC", topic, {"leader.replication.throttled.replicas": value})
        out.append((value, answer))
        if answer == "ok":
            last_set = value

    def describe_topic():
        resource = ConfigResource("TOPIC", topic)
        try:
            entries = admin.describe_configs([resource])[resource].result(timeout=20)
        except KafkaException as e:
            return e.args[0].name()
        return sorted((name, e.value, int(e.source)) for name, e in entries.items()
                      if "throttled.replicas" in name)

    # The broker's image (which DescribeConfigs reads) learns the topic and the last accepted
    # value a moment after the controller's answers: describe again, bounded, until it shows.
    out.append(eventually(describe_topic, lambda rows: not isinstance(rows, str) and (
        "leader.replication.throttled.replicas", last_set) in [row[:2] for row in rows]))
    return out


def test_throttle_configs_answer_as_kafka(broker, real_kafka):
    ours = _script(broker.bootstrap, str(broker.state.node_id), "thr")
    theirs = _script(real_kafka.bootstrap, "1", "thr")
    assert ours == theirs
