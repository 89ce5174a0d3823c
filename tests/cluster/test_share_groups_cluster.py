"""Share groups (KIP-932) in a seglog ZooKeeper cluster: a share group is coordinated by the
leader of its ``__consumer_offsets`` partition, its share-partitions' state is initialized
through the share coordinators (``__share_group_state``), and when the coordinator's broker
stops, the next leader loads the group from the replicated records: its member goes on with
the same epoch and partitions."""

from __future__ import annotations

import sys
import time
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


def test_describe_share_group_offsets_lag_from_the_partition_leaders(make_cluster):  # noqa: F811
    """DescribeShareGroupOffsets v1's lag of a partition this broker has no replica of: the
    end offset comes from the partition's leader (Kafka's ``NetworkPartitionMetadataClient``,
    ListOffsets over the inter-broker listener), not NOT_LEADER_OR_FOLLOWER."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = make_cluster(3, **{"offsets.topic.replication.factor": 3,
                                 "default.replication.factor": 3})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("lag", 3, 1)])["lag"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for p in range(3):
        for i in range(p + 1):
            producer.produce("lag", value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0
    leaders = {p.id: p.leader for p in admin.list_topics("lag", timeout=10)
               .topics["lag"].partitions.values()}
    assert set(leaders.values()) == set(cluster.brokers), leaders  # both brokers lead some

    def coordinator() -> int | None:
        for broker_id in list(cluster.brokers):
            found = call(cluster.address(broker_id), 10, 4, key_type=0,
                         coordinator_keys=("lg",))
            (answer,) = found.coordinators
            if answer.error_code == 0 and answer.node_id in cluster.brokers:
                return int(answer.node_id)
        return None

    where = wait_until(lambda: [c for c in [coordinator()] if c is not None],
                       "the group's coordinator")[0]
    m91 = _m(91, 0)

    last = []

    def altered():
        r = call(cluster.address(where), 91, 0, group_id="lg", topics=(
            m91.AlterShareGroupOffsetsRequestTopic(topic_name="lag", partitions=tuple(
                m91.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=0)
                for p in range(3))),))
        last[:] = [r]
        return r.error_code == 0 and all(
            q.error_code == 0 for t in r.responses for q in t.partitions)

    for _ in range(60):
        if altered():
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the group's start offsets: {last}")
    m90 = _m(90, 1)
    r = call(cluster.address(where), 90, 1, groups=(m90.DescribeShareGroupOffsetsRequestGroup(
        group_id="lg", topics=(m90.DescribeShareGroupOffsetsRequestTopic(
            topic_name="lag", partitions=(0, 1, 2)),)),))
    (group,) = r.groups
    assert group.error_code == 0, group
    rows = sorted((q.partition_index, q.error_code, q.start_offset, q.lag)
                  for t in group.topics for q in t.partitions)
    assert rows == [(p, 0, 0, p + 1) for p in range(3)], (where, leaders, rows)
