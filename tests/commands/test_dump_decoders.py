"""``seglog dump --offsets-decoder`` / ``--share-group-state-decoder`` against Kafka 4.4's
``kafka-dump-log``: the coordinator records of a KIP-848 consumer group (confluent-kafka with
``group.protocol=consumer``, one member subscribed by name and one by regular expression) and
of a share group (confluent-kafka's ShareConsumer, records acknowledged and committed),
written by a real Kafka 4.4 broker and by a seglog broker, dumped by both tools and compared
line for line. The files are copied first (the coordinators keep appending).
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from seglog.coordinator.offsets_schema import offsets_partition_for_group

from test_dump import _assert_same, _both, _files, _kafka

RECORDS = 20
ADMIN_TIMEOUT_S = 20


def _make_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(ADMIN_TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2)
    assert producer.flush(ADMIN_TIMEOUT_S) == 0


def _consumer_group(bootstrap: str, topic: str, group: str, pattern: bool) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([f"^{topic}.*" if pattern else topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < RECORDS and time.monotonic() < deadline:
            got += len([m for m in consumer.consume(100, timeout=0.5) if m.error() is None])
        assert got == RECORDS
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _share_group(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]).values():
        future.result(ADMIN_TIMEOUT_S)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < RECORDS and time.monotonic() < deadline:
            for message in consumer.poll(0.5):
                if message.error() is None:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                    got += 1
            consumer.commit_sync(ADMIN_TIMEOUT_S)
        assert got == RECORDS
    finally:
        consumer.close()


def _copy_logs(sources: list[Path], into: Path) -> list[str]:
    copies = []
    for source in sources:
        target = into / source.name
        target.mkdir(parents=True, exist_ok=True)
        for log in _files(source, (".log",)):
            shutil.copyfile(log, target / Path(log).name)
            copies.append(str(target / Path(log).name))
    return copies


def _groups_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path: Path, bootstrap: str,
                                     data_dir: Path) -> tuple[str, str]:
    name = f"test_dump_dec_{uuid.uuid4().hex[:8]}"
    _make_topic(bootstrap, name)
    groups = [f"{name}-named", f"{name}-regex", f"{name}-share"]
    _consumer_group(bootstrap, name, groups[0], pattern=False)
    _consumer_group(bootstrap, name, groups[1], pattern=True)
    _share_group(bootstrap, name, groups[2])
    time.sleep(1.0)  # the share coordinator's and group coordinator's last writes
    count = len(list(data_dir.glob("__consumer_offsets-*")))
    offsets = sorted({data_dir / f"__consumer_offsets-{offsets_partition_for_group(g, count)}"
                      for g in groups})
    # every __share_group_state partition that has records (the share-partitions' keys
    # hash over them)
    state = sorted(p for p in data_dir.glob("__share_group_state-*")
                   if any(Path(f).stat().st_size for f in _files(p, (".log",))))
    assert state, "no share-group state was written"
    copies = tmp_path / "copies"
    offsets_logs = _copy_logs(offsets, copies)
    state_logs = _copy_logs(state, copies)
    kafka, ours = _both(ref, run_seglog, offsets_logs, ["--offsets-decoder"], tmp_path)
    _assert_same(kafka, ours, "--offsets-decoder")
    offsets_text = ours.stdout
    kafka, ours = _both(ref, run_seglog, state_logs, ["--share-group-state-decoder"], tmp_path)
    _assert_same(kafka, ours, "--share-group-state-decoder")
    return offsets_text, ours.stdout


def _record_types(text: str) -> set[int]:
    types = set()
    for line in text.splitlines():
        _, found, rest = line.partition('key: {"type":"')
        if found:
            types.add(int(rest.split('"', 1)[0]))
    return types


@pytest.mark.kafka
def test_kafka_written_group_records_decode_as_kafka_decodes_them(kafka_shared, run_seglog,
                                                                  tmp_path):
    """Kafka 4.4's own records of consumer (KIP-848, regex subscriptions too) and share
    groups: every type decoded, none unknown, every line Kafka's."""
    ref = _kafka()
    offsets, state = _groups_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path,
                                                      kafka_shared.bootstrap,
                                                      Path(kafka_shared.data_dir))
    assert "Unknown record type" not in offsets and "Error at offset" not in offsets
    # commits, consumer-group metadata/members/targets/assignments/regex, share groups'
    assert {1, 3, 5, 6, 7, 8, 16, 10, 11, 12, 13, 14, 15} <= _record_types(offsets)
    assert '"subscribedTopicRegex":"(^test_dump_dec_' in offsets
    assert {0} <= _record_types(state) and '"stateBatches":[' in state


@pytest.mark.kafka
def test_seglog_broker_written_group_records_decode_as_kafka_decodes_them(
        seglog_broker_factory, run_seglog, tmp_path):
    """The same groups on a seglog broker: its coordinators' records read by both tools."""
    ref = _kafka()
    data_dir = tmp_path / "seglog-data"
    broker = seglog_broker_factory(data_dir=data_dir)
    offsets, state = _groups_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path,
                                                      broker.bootstrap, data_dir)
    assert "Unknown record type" not in offsets
    assert {1, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15} <= _record_types(offsets)
    assert {0} <= _record_types(state)
