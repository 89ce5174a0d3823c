"""Kafka's own admin tools against the broker: ``kafka-topics`` (create with a config, alter
the partition count, describe) and ``kafka-configs`` (alter and describe a topic), run from
the Kafka 4.4 jars (``seglog.bench.kafka``), then ``kafka-consumer-groups --list`` and
``--describe`` of a group with committed offsets. A JVM start per command costs 1.5-4 s here,
so deleting and the broker's configs are left to test_admin_clients.py."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from seglog.bench.kafka import find_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 60



def test_kafka_topics_and_kafka_configs(broker, kafka_ref, tmp_path):
    def tool(main_class: str, *args: str) -> str:
        done = kafka_ref.run_tool(main_class, ["--bootstrap-server", broker.bootstrap, *args],
                                  run_dir=tmp_path, timeout_s=TOOL_TIMEOUT_S)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    topics = "org.apache.kafka.tools.TopicCommand"
    configs = "org.apache.kafka.tools.ConfigCommand"
    out = tool(topics, "--create", "--topic", "kt", "--partitions", "3",
               "--config", "retention.ms=5000")
    assert "Created topic kt." in out
    tool(topics, "--alter", "--topic", "kt", "--partitions", "5")
    assert broker.store.topic("kt").partitions == 5
    out = tool(configs, "--alter", "--entity-type", "topics", "--entity-name", "kt",
               "--add-config", "segment.ms=100000,cleanup.policy=[compact,delete]")
    assert "Completed updating config for topic kt." in out
    assert broker.store.topic("kt").log(4).config.segment_ms == 100000
    out = tool(topics, "--describe", "--topic", "kt")
    assert re.search(r"Topic: kt\tTopicId: \S+\tPartitionCount: 5\tReplicationFactor: 1\t"
                     r"Configs: (\S+)", out)
    configs_line = re.search(r"Configs: (\S+)", out).group(1)
    assert set(configs_line.split(",")) >= {"retention.ms=5000", "segment.ms=100000"}
    assert len(re.findall(r"Partition: \d\tLeader: 1\tReplicas: 1\tIsr: 1", out)) == 5
    out = tool(configs, "--describe", "--entity-type", "topics", "--entity-name", "kt")
    assert ("cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
            "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}") in out
    assert "retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000" in out

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        producer.produce("kt", b"v%d" % i, key=b"k%d" % i, partition=i % 2)  # compacted
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tools-group",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("kt", 0, 1), TopicPartition("kt", 1, 3)],
                        asynchronous=False)
    finally:
        consumer.close()
    groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    assert "tools-group" in tool(groups, "--list").split()
    out = tool(groups, "--describe", "--group", "tools-group")
    rows = {tuple(line.split()[:6]) for line in out.splitlines() if line.startswith("tools-group")}
    assert rows == {("tools-group", "kt", "0", "1", "3", "2"),
                    ("tools-group", "kt", "1", "3", "3", "0")}
