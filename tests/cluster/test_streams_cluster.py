"""Streams groups (KIP-1071) in a seglog ZooKeeper cluster: Kafka Streams 4.4's word count
(tests/streams_app.py) on three brokers, its group coordinated by the leader of its
``__consumer_offsets`` partition, its internal topics created through the controller with
the cluster's replication factor; two instances share the tasks, one leaves, the other takes
over, and the counts are exact, as on a lone broker and on Kafka 4.4
(tests/kafka/test_streams_groups_java.py). And a group whose coordinator's broker stops is
loaded by the next leader of its ``__consumer_offsets`` partition from the replicated
records: its member goes on with the same epoch and tasks.

Skips without java, javac, the Kafka jars or the kafka-streams jar (fails under
``SEGLOG_REQUIRE_KAFKA=1``).
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

import pytest

from seglog.bench.kafka import find_kafka

from test_coordinators import call, make_cluster, wait_until  # noqa: F401

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


def _m(api_key: int, version: int):
    from seglog.schemas import load_request_schema
    return sys.modules[load_request_schema(api_key, version).__module__]


def test_a_streams_group_moves_with_its_coordinator(make_cluster):  # noqa: F811
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = make_cluster(3, **{"offsets.topic.replication.factor": 3,
                                 "default.replication.factor": 3, **STREAMS_CONFIG})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("src", 2, 3)])["src"].result(30)
    m = _m(88, 0)
    topology = m.Topology(epoch=0, subtopologies=(m.Subtopology(
        subtopology_id="0", source_topics=("src",), source_topic_regex=(),
        state_changelog_topics=(), repartition_sink_topics=(), repartition_source_topics=(),
        copartition_groups=()),))

    def coordinator() -> int | None:
        for broker_id in list(cluster.brokers):
            found = call(cluster.address(broker_id), 10, 4, key_type=0,
                         coordinator_keys=("app",))
            (answer,) = found.coordinators
            if answer.error_code == 0 and answer.node_id in cluster.brokers:
                return int(answer.node_id)
        return None

    def beat(broker_id: int, epoch: int, active):
        return call(cluster.address(broker_id), 88, 0, group_id="app", member_id="m1",
                    member_epoch=epoch, endpoint_information_epoch=0, instance_id=None,
                    rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
                    topology=topology if epoch == 0 else None,
                    active_tasks=tuple(m.TaskIds(subtopology_id=s, partitions=ps)
                                       for s, ps in active),
                    standby_tasks=(), warmup_tasks=(),
                    process_id="p1" if epoch == 0 else None, user_endpoint=None,
                    client_tags=None, task_offsets=None, task_end_offsets=None,
                    shutdown_application=False)

    first = wait_until(lambda: [c for c in [coordinator()] if c is not None],
                       "the group's coordinator")[0]
    wait_until(lambda: beat(first, 0, []).error_code == 0, "the join")
    state = {"epoch": 1, "active": []}

    def assigned() -> bool:
        r = beat(first, state["epoch"], state["active"])
        assert r.error_code == 0, r
        state["epoch"] = r.member_epoch
        if r.active_tasks:
            state["active"] = [(t.subtopology_id, tuple(t.partitions)) for t in r.active_tasks]
        return bool(state["active"])

    wait_until(assigned, "the member's tasks")
    assert state["active"] == [("0", (0, 1))]
    cluster.stop(first)
    moved = wait_until(lambda: [c for c in [coordinator()] if c is not None and c != first],
                       "a new coordinator")
    second = moved[0]

    def goes_on():
        r = beat(second, state["epoch"], state["active"])
        return r if r.error_code == 0 else None

    r = wait_until(goes_on, "the member's heartbeat on the new coordinator")
    assert r.member_epoch == state["epoch"]
