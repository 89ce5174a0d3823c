"""Kafka's ``kafka-consumer-groups`` (the Kafka 4.4 jars, ``seglog.bench.kafka``) against the
broker: ``--describe`` of a group with a member and lag, ``--reset-offsets --execute`` once it
is empty, ``--delete``; and Kafka's Java consumer in a group (``kafka-console-consumer
--group``). A JVM start per command costs 2-4 s here, so only these four run."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTopicPartition

from seglog.bench.kafka import find_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 60
GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"



def test_kafka_consumer_groups_describe_reset_delete(broker, kafka_ref, tmp_path):
    def tool(*args: str) -> str:
        done = kafka_ref.run_tool(GROUPS_COMMAND, ["--bootstrap-server", broker.bootstrap,
                                                   *args],
                                  run_dir=tmp_path, timeout_s=TOOL_TIMEOUT_S)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    broker.store.create_topic("t", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("t", value=b"x", partition=i % 2)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cg",
                         "client.id": "tool-test", "enable.auto.commit": False})
    assigned = []
    consumer.subscribe(["t"], on_assign=lambda _c, ps: assigned.extend(ps))
    try:
        deadline = time.monotonic() + 20
        while not assigned:
            assert time.monotonic() < deadline
            consumer.poll(0.05)
        consumer.commit(offsets=[CTopicPartition("t", 0, 2), CTopicPartition("t", 1, 3)],
                        asynchronous=False)
        out = tool("--describe", "--group", "cg")
        rows = re.findall(r"^cg\s+t\s+(\d)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+/127\.0\.0\.1\s+"
                          r"tool-test$", out, re.MULTILINE)
        assert sorted(row[:4] for row in rows) == [("0", "2", "5", "3"), ("1", "3", "5", "2")]
    finally:
        consumer.close()
    out = tool("--reset-offsets", "--group", "cg", "--topic", "t", "--to-earliest", "--execute")
    assert re.search(r"^cg\s+t\s+0\s+0$", out, re.MULTILINE)
    group = broker.store.group("cg")
    assert group.committed(("t", 0)) == 0 and group.committed(("t", 1)) == 0
    out = tool("--delete", "--group", "cg")
    assert "Deletion of requested consumer groups ('cg') was successful." in out
    assert broker.store.group("cg").committed_offsets() == {}


def test_java_console_consumer_in_a_group(broker, kafka_ref, tmp_path):
    """Kafka's Java consumer (``kafka-console-consumer --group``, the classic protocol by
    default) joins, reads every record, commits on close and leaves."""
    broker.store.create_topic("t", partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("t", value=b"r%d" % i, partition=i % 3)
    assert producer.flush(10) == 0
    done = kafka_ref.run_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
                              ["--bootstrap-server", broker.bootstrap, "--topic", "t",
                               "--group", "java-g", "--from-beginning", "--max-messages", "30",
                               "--timeout-ms", "30000"],
                              run_dir=tmp_path, timeout_s=TOOL_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(done.stdout.split()) == sorted("r%d" % i for i in range(30))
    committed = broker.store.group("java-g").committed_offsets()
    assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 10, 1: 10, 2: 10}
    description = broker.state.extensions["groups"].coordinator.describe("java-g")
    assert description.state == "Empty" and description.protocol_type == "consumer"
