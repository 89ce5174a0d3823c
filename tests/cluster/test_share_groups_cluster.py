"""Share groups (KIP-932) in a seglog ZooKeeper cluster: a share group is coordinated by the
leader of its ``__consumer_offsets`` partition, its share-partitions' state is initialized
through the share coordinators (``__share_group_state``), and when the coordinator's broker
stops, the next leader loads the group from the replicated records: its member goes on with
the same epoch and partitions."""

from __future__ import annotations

import sys
import uuid

import pytest

from test_coordinators import call, make_cluster, wait_until  # noqa: F401

pytestmark = [pytest.mark.slow]


def _m(api_key: int, version: int):
    from seglog.schemas import load_request_schema
    return sys.modules[load_request_schema(api_key, version).__module__]


def test_a_share_group_moves_with_its_coordinator(make_cluster):  # noqa: F811
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = make_cluster(3, **{"offsets.topic.replication.factor": 3,
                                 "default.replication.factor": 3})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("src", 2, 3)])["src"].result(30)
    member = str(uuid.uuid4())

    def coordinator() -> int | None:
        for broker_id in list(cluster.brokers):
            found = call(cluster.address(broker_id), 10, 4, key_type=0,
                         coordinator_keys=("sq",))
            (answer,) = found.coordinators
            if answer.error_code == 0 and answer.node_id in cluster.brokers:
                return int(answer.node_id)
        return None

    def beat(broker_id: int, epoch: int, topics=None):
        return call(cluster.address(broker_id), 76, 1, group_id="sq", member_id=member,
                    member_epoch=epoch, rack_id=None, subscribed_topic_names=topics)

    first = wait_until(lambda: [c for c in [coordinator()] if c is not None],
                       "the group's coordinator")[0]
    wait_until(lambda: beat(first, 0, ["src"]).error_code == 0, "the join")
    state = {"epoch": 2, "partitions": []}

    def assigned() -> bool:
        r = beat(first, state["epoch"])
        assert r.error_code == 0, r
        state["epoch"] = r.member_epoch
        if r.assignment is not None and r.assignment.topic_partitions:
            state["partitions"] = sorted(r.assignment.topic_partitions[0].partitions)
        return bool(state["partitions"])

    wait_until(assigned, "the member's partitions")
    assert state["partitions"] == [0, 1]
    cluster.stop(first)
    second = wait_until(lambda: [c for c in [coordinator()] if c is not None and c != first],
                        "a new coordinator")[0]

    def goes_on():
        r = beat(second, state["epoch"], ["src"])
        return r if r.error_code == 0 else None

    r = wait_until(goes_on, "the member's heartbeat on the new coordinator")
    assert r.member_epoch == state["epoch"]
    assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1]
    d = call(cluster.address(second), 77, 1, group_ids=("sq",),
             include_authorized_operations=False)
    assert [(g.group_state, len(g.members)) for g in d.groups] == [("Stable", 1)]
