"""Kafka Streams 4.4 with the streams group protocol (KIP-1071, ``group.protocol=streams``)
against ``seglog serve`` and against Kafka 4.4 itself: the same scenario
(tests/streams_app.py: two instances share the tasks, one leaves, the other takes over,
``kafka-streams-groups --describe`` in between), the same answers.

Skips without java, javac, the Kafka jars or the kafka-streams jar (fails under
``SEGLOG_REQUIRE_KAFKA=1``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from seglog.bench.kafka import KafkaBroker
from seglog.server.broker import Broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from streams_app import (EXPECTED, KAFKA_ONLY_CONFIG, STREAMS_CONFIG,  # noqa: E402
                         compile_app, scenario)

pytestmark = [pytest.mark.kafka, pytest.mark.clients, pytest.mark.slow]


@pytest.fixture(scope="module")
def app_classes(kafka_ref, tmp_path_factory) -> Path:
    """The compiled app's class dir."""
    return compile_app(kafka_ref, tmp_path_factory.mktemp("streams-app"))


def test_kafka_streams_app_on_seglog(kafka_ref, app_classes, tmp_path):
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0),
                    config={"offsets.topic.num.partitions": 1, **STREAMS_CONFIG})
    broker.start()
    try:
        got = scenario(kafka_ref, app_classes, broker.bootstrap, tmp_path / "apps")
    finally:
        broker.stop()
    assert got == EXPECTED


def test_kafka_streams_app_on_kafka(kafka_ref, app_classes, tmp_path):
    kafka = KafkaBroker(kafka_ref, tmp_path / "kafka",
                        extra_properties={**STREAMS_CONFIG, **KAFKA_ONLY_CONFIG})
    kafka.format()
    kafka.start()
    try:
        got = scenario(kafka_ref, app_classes, kafka.bootstrap, tmp_path / "apps")
    finally:
        kafka.stop()
    assert got == EXPECTED
