"""Streams groups (KIP-1071) in a seglog ZooKeeper cluster: Kafka Streams 4.4's word count
(tests/streams_app.py) on three brokers, its group coordinated by the leader of its
``__consumer_offsets`` partition, its internal topics created through the controller with
the cluster's replication factor; two instances share the tasks, one leaves, the other takes
over, and the counts are exact, as on a lone broker and on Kafka 4.4
(tests/kafka/test_streams_groups_java.py).

Skips without java, javac, the Kafka jars or the kafka-streams jar (fails under
``SEGLOG_REQUIRE_KAFKA=1``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from seglog.bench.kafka import find_kafka

from test_coordinators import make_cluster  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from streams_app import EXPECTED, STREAMS_CONFIG, compile_app, scenario  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.clients, pytest.mark.slow]

_REF, _WHY = find_kafka()


def test_kafka_streams_app_on_a_seglog_cluster(make_cluster, tmp_path):  # noqa: F811
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    classes = compile_app(_REF, tmp_path / "classes")
    cluster = make_cluster(3, **{"offsets.topic.replication.factor": 3,
                                 "default.replication.factor": 3, **STREAMS_CONFIG})
    got = scenario(_REF, classes, cluster.bootstrap, tmp_path / "apps", replication_factor=3)
    assert got == EXPECTED
