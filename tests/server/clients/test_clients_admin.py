"""confluent-kafka's AdminClient against Kafka and seglog alike: topic configs described and
altered, records deleted, the cluster described, and consumer groups listed, described,
their offsets listed, altered and deleted (with Kafka's errors for a group still in use)."""

from __future__ import annotations

import time

from clients_runner import (
    OP_TIMEOUT_S, Rec, admin, confluent_consume, confluent_produce, create_topic,
)
from kafka_waits import eventually

KW = {"request_timeout": OP_TIMEOUT_S}


def _error_name(future) -> str:
    from confluent_kafka import KafkaException
    try:
        future.result(timeout=OP_TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0].name()
    return "NO_ERROR"


def test_topic_configs_records_and_cluster(target, differential, unique):
    """DescribeConfigs of a topic created with one override (its value and source, and
    Kafka's defaults for others), IncrementalAlterConfigs set and delete, DeleteRecords
    refused on a compacted topic (POLICY_VIOLATION) and, once it is not, before offset 4 (the
    earliest offset and what a consumer reads from the beginning), DescribeCluster (one node,
    which is the controller the client sees) and DescribeTopics (a topic id, the node leads
    the partition, alone in its replicas and ISR)."""
    from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType, ConfigEntry, ConfigResource, OffsetSpec, ResourceType,
    )

    b = target.bootstrap
    client = admin(b)
    create_topic(b, unique, config={"retention.ms": "86400000"})
    resource = ConfigResource(ResourceType.TOPIC, unique)
    keys = ("retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes",
            "compression.type", "min.insync.replicas")

    def described():
        entries = client.describe_configs([resource], **KW)[resource].result(timeout=OP_TIMEOUT_S)
        return {k: (entries[k].value, entries[k].source) for k in keys}

    before = described()
    altered = _error_name(client.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, unique, incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "compact",
                        incremental_operation=AlterConfigOpType.SET)])], **KW)[resource])
    # Kafka applies a config change through its metadata log: describe until it shows (the
    # default retention back, compact set), bounded.
    after = eventually(described, lambda now: now["retention.ms"][1] != 1
                       and now["cleanup.policy"] == ("compact", 1), timeout_s=OP_TIMEOUT_S)
    # Its broker applies the new policy to the log after DescribeConfigs shows it: wait,
    # bounded, until a DeleteRecords up to offset 0 (which deletes nothing: the log is empty)
    # meets the compacted policy, so that the one below is not answered under the old one.
    start = TopicPartition(unique, 0, 0)
    eventually(lambda: _error_name(client.delete_records([start], **KW)[start]),
               lambda name: name == "POLICY_VIOLATION", timeout_s=OP_TIMEOUT_S)
    deadline = time.monotonic() + OP_TIMEOUT_S

    confluent_produce(b, unique, [Rec(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)])
    tp = TopicPartition(unique, 0, 4)
    on_compacted = _error_name(client.delete_records([tp], **KW)[tp])
    back = _error_name(client.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, unique, incremental_configs=[
            ConfigEntry("cleanup.policy", "delete",
                        incremental_operation=AlterConfigOpType.SET)])], **KW)[resource])
    eventually(described, lambda now: now["cleanup.policy"][0] == "delete",
               timeout_s=OP_TIMEOUT_S)
    # A broker applies a topic's new config to its log after DescribeConfigs shows it (Kafka's
    # brokers take it from the metadata log asynchronously): a DeleteRecords in between may
    # still meet the compacted policy, so it is retried until the deadline.
    while True:
        try:
            deleted = client.delete_records([tp], **KW)[tp].result(timeout=OP_TIMEOUT_S)
            break
        except KafkaException as e:
            if e.args[0].code() != KafkaError.POLICY_VIOLATION or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    earliest_tp = TopicPartition(unique, 0)
    earliest = client.list_offsets({earliest_tp: OffsetSpec.earliest()},
                                   **KW)[earliest_tp].result(timeout=OP_TIMEOUT_S).offset
    read = [s.offset for s in confluent_consume(b, unique)]
    cluster = client.describe_cluster(**KW).result(timeout=OP_TIMEOUT_S)
    topic_desc = client.describe_topics(TopicCollection([unique]), **KW)[unique].result(
        timeout=OP_TIMEOUT_S)
    described_topic = {
        "name": topic_desc.name, "internal": topic_desc.is_internal,
        "has id": topic_desc.topic_id is not None and str(topic_desc.topic_id) != "",
        "partitions": [(p.id, p.leader.id == cluster.nodes[0].id,
                        [r.id for r in p.replicas] == [cluster.nodes[0].id],
                        [r.id for r in p.isr] == [cluster.nodes[0].id])
                       for p in topic_desc.partitions]}
    result = {"before": before, "altered": altered, "after": after,
              "delete records of a compacted topic": on_compacted, "back to delete": back,
              "deleted low watermark": deleted.low_watermark, "earliest": earliest, "read": read,
              "nodes": len(cluster.nodes), "topic": described_topic,
              "controller is the node": cluster.controller is not None
              and cluster.controller.id == cluster.nodes[0].id}
    assert before["retention.ms"] == ("86400000", 1)         # DYNAMIC_TOPIC_CONFIG
    assert before["cleanup.policy"] == ("delete", 5)         # DEFAULT_CONFIG
    assert after["retention.ms"] == ("604800000", 5)
    assert after["cleanup.policy"] == ("compact", 1)
    assert (on_compacted, back) == ("POLICY_VIOLATION", "NO_ERROR")
    assert (result["deleted low watermark"], earliest, read) == (4, 4, list(range(4, 10)))
    assert result["nodes"] == 1 and result["controller is the node"]
    assert described_topic == {"name": unique, "internal": False, "has id": True,
                               "partitions": [(0, True, True, True)]}
    differential(result)


def test_consumer_group_admin(target, differential, unique):
    """A group with committed offsets and no members: listed (EMPTY), described, its offsets
    listed, altered, one deleted (OffsetDelete); while a member is in it, deleting the group
    is refused with NON_EMPTY_GROUP; once it left, the group is deleted; describing a group
    nobody made says DEAD."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

    b = target.bootstrap
    client = admin(b)
    create_topic(b, unique, 2)
    group = f"{unique}-g"
    c = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(unique, 0, 3), TopicPartition(unique, 1, 7)],
                 asynchronous=False)
    finally:
        c.close()

    def group_offsets():
        res = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], **KW)
        tps = res[group].result(timeout=OP_TIMEOUT_S).topic_partitions
        return sorted((tp.partition, tp.offset) for tp in tps if tp.topic == unique)

    listed = client.list_consumer_groups(**KW).result(timeout=OP_TIMEOUT_S)
    states = {g.group_id: g.state.name for g in listed.valid}
    desc = client.describe_consumer_groups([group], **KW)[group].result(timeout=OP_TIMEOUT_S)
    offsets_before = group_offsets()
    client.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(unique, 0, 5)])], **KW)[group].result(timeout=OP_TIMEOUT_S)
    offsets_altered = group_offsets()

    member = Consumer({"bootstrap.servers": b, "group.id": group, "session.timeout.ms": 6000,
                       "auto.offset.reset": "earliest"})
    try:
        member.subscribe([unique])
        for _ in range(100):  # up to 10 s for the assignment
            member.poll(0.1)
            if member.assignment():
                break
        non_empty = _error_name(client.delete_consumer_groups([group], **KW)[group])
    finally:
        member.close()
    deleted = _error_name(client.delete_consumer_groups([group], **KW)[group])
    gone = client.describe_consumer_groups([f"{unique}-nobody"],
                                           **KW)[f"{unique}-nobody"].result(timeout=OP_TIMEOUT_S)
    result = {"listed": states.get(group), "described": (desc.state.name, len(desc.members)),
              "offsets": offsets_before, "altered": offsets_altered,
              "delete while in use": non_empty, "delete": deleted,
              "unknown group": gone.state.name}
    assert result == {"listed": "EMPTY", "described": ("EMPTY", 0), "offsets": [(0, 3), (1, 7)],
                      "altered": [(0, 5), (1, 7)], "delete while in use": "NON_EMPTY_GROUP",
                      "delete": "NO_ERROR", "unknown group": "DEAD"}
    differential(result)
