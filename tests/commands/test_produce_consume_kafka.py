"""``seglog produce`` and ``seglog consume`` against a real Kafka 4.4 broker: the same
scenario, follow and kcat tests as test_produce_consume.py runs against a data directory and
a seglog broker, with the same expected answers."""

from __future__ import annotations

import shutil

import pytest

from test_produce_consume import Place, _compare, _follow_until_sigterm, _scenario, _with_kcat

pytestmark = pytest.mark.kafka


@pytest.fixture
def kafka_place(kafka_bootstrap, run_seglog) -> Place:
    return Place("kafka", ["-b", kafka_bootstrap], bootstrap=kafka_bootstrap, run=run_seglog)


def test_scenario_on_kafka(kafka_place):
    _compare(_scenario(kafka_place))


def test_follow_on_kafka_ends_on_sigterm(kafka_place):
    _follow_until_sigterm(kafka_place)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_and_seglog_on_kafka(kafka_place):
    _with_kcat(kafka_place)
