"""``seglog groups``' text tables next to Kafka 4.4's own ``kafka-consumer-groups``
(ConsumerGroupCommand from the jars) on the same real Kafka broker and group: the
``--describe`` offsets table and the ``--reset-offsets`` dry-run table have the same columns
and rows. A JVM start per tool run costs seconds here, so only two run."""

from __future__ import annotations

import os
import re
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench.kafka import find_kafka

from kafka_waits import group_configs_shown

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 60
WAIT_S = 30
GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"



def _rows(text: str, first_column: str) -> list[list[str]]:
    """The rows of the whitespace-aligned offsets table (first cell ``first_column``), its
    header (``GROUP TOPIC ...``) included."""
    return [line.split() for line in text.splitlines()
            if line.split()[:2] == ["GROUP", "TOPIC"] or line.split()[:1] == [first_column]]


def test_describe_and_reset_tables_match_kafka_consumer_groups(run_seglog, kafka_shared_groups,
                                                               kafka_ref, tmp_path):
    bootstrap = kafka_shared_groups.bootstrap
    topic, group = f"test-groups-tools-{os.getpid()}", f"test-groups-tools-g-{os.getpid()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(10):
        producer.produce(topic, b"x", partition=n % 2)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": "tools-test", "enable.auto.commit": False})
    assigned: list = []
    consumer.subscribe([topic], on_assign=lambda _c, ps: assigned.extend(ps))

    def both(kafka_args: list[str], seglog_args: list[str]) -> tuple[list, list]:
        done = kafka_ref.run_tool(GROUPS_COMMAND, ["--bootstrap-server", bootstrap,
                                                   *kafka_args],
                                  run_dir=tmp_path, timeout_s=TOOL_TIMEOUT_S)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
        ran = run_seglog("groups", *seglog_args, "-b", bootstrap)
        assert ran.returncode == 0, ran.stderr
        return _rows(done.stdout, group), _rows(ran.stdout, group)

    try:
        deadline = time.monotonic() + WAIT_S
        while not assigned:
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.05)
        consumer.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 3)],
                        asynchronous=False)
        kafka_rows, seglog_rows = both(["--describe", "--group", group],
                                       ["describe", group])
        assert len(kafka_rows) == 3 and kafka_rows[0] == seglog_rows[0]
        assert sorted(kafka_rows[1:]) == sorted(seglog_rows[1:])
        assert re.fullmatch(r"/127\.0\.0\.1", kafka_rows[1][7])
    finally:
        consumer.close()
    kafka_rows, seglog_rows = both(
        ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run"],
        ["reset-offsets", group, "--topic", topic, "--to-earliest"])
    assert kafka_rows[0] == seglog_rows[0]  # Kafka lists the rows in no set order
    assert sorted(kafka_rows[1:]) == seglog_rows[1:]
    assert [row[3] for row in seglog_rows[1:]] == ["0", "0"]


SHARE_GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def test_share_describe_table_matches_kafka_share_groups(run_seglog, kafka_shared_groups,
                                                         kafka_ref, tmp_path):
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    bootstrap = kafka_shared_groups.bootstrap
    topic = f"test-groups-tools-s-{os.getpid()}"
    group = f"test-groups-tools-sg-{os.getpid()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(WAIT_S)
    for future in admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", "earliest",
                incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(WAIT_S)
    # The broker's image applies the config a moment after the answer: before the consumer
    # joins, wait (bounded) until it shows.
    group_configs_shown(admin, group, {"share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(10):
        producer.produce(topic, b"x", partition=n % 2)
    assert producer.flush(WAIT_S) == 0
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got = 0
    try:
        deadline = time.monotonic() + WAIT_S
        while got < 10:
            assert time.monotonic() < deadline, "share records"
            got += sum(1 for m in consumer.poll(0.2) if m.error() is None)
        consumer.commit_sync(WAIT_S)
    finally:
        consumer.close()
    done = kafka_ref.run_tool(SHARE_GROUPS_COMMAND, ["--bootstrap-server", bootstrap,
                                                     "--describe", "--group", group],
                              run_dir=tmp_path, timeout_s=TOOL_TIMEOUT_S)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    ran = run_seglog("groups", "describe", group, "-b", bootstrap)
    assert ran.returncode == 0, ran.stderr
    kafka_rows, seglog_rows = _rows(done.stdout, group), _rows(ran.stdout, group)
    assert len(kafka_rows) == 3 and kafka_rows[0] == seglog_rows[0]
    assert sorted(kafka_rows[1:]) == seglog_rows[1:]
