"""``seglog groups describe`` of a streams group next to Kafka 4.4's own
``kafka-streams-groups --describe --verbose`` (StreamsGroupCommand from the jars), on the same
broker and group (a running Kafka Streams 4.4 word count, tests/streams_app.py), on Kafka 4.4
and on a seglog broker: the offsets table (GROUP TOPIC PARTITION CURRENT-OFFSET LEADER-EPOCH
LOG-END-OFFSET OFFSET-LAG; seglog adds the owning MEMBER) has the same rows, and the members'
ASSIGNMENTS the same tasks. A JVM per tool run: marked ``kafka_tools``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench.kafka import KafkaBroker, find_kafka
from seglog.server.broker import Broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from streams_app import (ALL_TASKS, BATCH_1, KAFKA_ONLY_CONFIG, STREAMS_CONFIG,  # noqa: E402
                         App, _counts, _expected, _wait, compile_app)

pytestmark = [pytest.mark.kafka, pytest.mark.kafka_tools, pytest.mark.slow]

_REF, _WHY = find_kafka()
GROUP = "wordcount"
STREAMS_GROUPS_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
OFFSETS_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH",
                  "LOG-END-OFFSET", "OFFSET-LAG"]



@pytest.fixture(scope="module")
def app_classes(kafka_ref, tmp_path_factory) -> Path:
    return compile_app(kafka_ref, tmp_path_factory.mktemp("streams-app"))


def _offsets_rows(text: str) -> list[list[str]]:
    """The offsets table's header and rows, the first seven columns."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells[:7] == OFFSETS_HEADER)
    return [cells[:7] for cells in lines[start:] if cells[:1] in (["GROUP"], [GROUP])]


def _tables(run_seglog, kafka_ref, bootstrap: str, run_dir: Path) -> tuple[list, list]:
    """(Kafka's tool, seglog) on ``bootstrap``: the offsets rows and each member's tasks."""
    tool = kafka_ref.run_tool(STREAMS_GROUPS_COMMAND,
                              ["--bootstrap-server", bootstrap, "--describe", "--group", GROUP,
                               "--verbose"], run_dir=run_dir, timeout_s=120)
    assert tool.returncode == 0, (tool.stdout[-2000:], tool.stderr[-2000:])
    members = kafka_ref.run_tool(STREAMS_GROUPS_COMMAND,
                                 ["--bootstrap-server", bootstrap, "--describe", "--group",
                                  GROUP, "--members"], run_dir=run_dir, timeout_s=120)
    assert members.returncode == 0, (members.stdout[-2000:], members.stderr[-2000:])
    ran = run_seglog("groups", "describe", GROUP, "-b", bootstrap)
    assert ran.returncode == 0, ran.stderr
    kafka_tasks = sorted(line.split("ACTIVE:", 1)[1].strip() for line in
                         members.stdout.splitlines() if "ACTIVE:" in line)
    seglog_tasks = sorted(line.split("ACTIVE:", 1)[1].strip() for line in
                          ran.stdout.splitlines() if "ACTIVE:" in line)
    kafka_rows, seglog_rows = _offsets_rows(tool.stdout), _offsets_rows(ran.stdout)
    return ([kafka_rows[0], sorted(kafka_rows[1:]), kafka_tasks],
            [seglog_rows[0], seglog_rows[1:], seglog_tasks])


def _with_app(run_seglog, kafka_ref, classes: Path, bootstrap: str, run_dir: Path
              ) -> tuple[list, list]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("words", 2, 1), NewTopic("counts", 1, 1)],
                                      operation_timeout=30).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(BATCH_1):
        producer.produce("words", key=f"k{i}", value=line, partition=i % 2)
    assert producer.flush(30) == 0
    app = App(kafka_ref, classes, run_dir / "app", bootstrap, "host-a:7001")
    try:
        _wait("the instance running all four tasks",
              lambda: app.running() and app.tasks() == ALL_TASKS, [app])
        _wait("the first batch counted",
              lambda: _counts(bootstrap) == _expected(BATCH_1), [app], timeout_s=60)

        def settled() -> bool:
            ran = run_seglog("groups", "describe", GROUP, "-b", bootstrap, "-o", "json")
            rows = ran.json()["groups"][0]["offsets"] if ran.returncode == 0 else []
            return len(rows) == 4 and all(r["lag"] == 0 for r in rows)
        _wait("the commits caught up", settled, [app], timeout_s=30)
        return _tables(run_seglog, kafka_ref, bootstrap, run_dir / "tool")
    finally:
        app.stop()


def test_streams_describe_matches_kafka_streams_groups(run_seglog, kafka_ref, app_classes,
                                                       tmp_path):
    kafka = KafkaBroker(kafka_ref, tmp_path / "kafka",
                        extra_properties={**STREAMS_CONFIG, **KAFKA_ONLY_CONFIG})
    kafka.format()
    kafka.start()
    try:
        on_kafka = _with_app(run_seglog, kafka_ref, app_classes, kafka.bootstrap,
                             tmp_path / "on-kafka")
    finally:
        kafka.stop()
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0),
                    config={"offsets.topic.num.partitions": 1, **STREAMS_CONFIG})
    broker.start()
    try:
        on_seglog = _with_app(run_seglog, kafka_ref, app_classes, broker.bootstrap,
                              tmp_path / "on-seglog")
    finally:
        broker.stop()
    for kafka_tool, seglog in (on_kafka, on_seglog):
        assert kafka_tool == seglog
        assert kafka_tool[2] == ["0:[0,1]; 1:[0,1];"]
        assert len(kafka_tool[1]) == 4
    assert on_kafka == on_seglog
