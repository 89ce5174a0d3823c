"""The admin APIs through confluent-kafka's AdminClient (librdkafka) against a running broker:
topics created with configs and validate_only, described, altered both ways, grown, deleted;
records deleted; the cluster described; dynamic broker configs kept across a restart."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

TIMEOUT_S = 15


def admin_client(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def wait(futures: dict) -> dict:
    """``{key: result or the KafkaError}`` of a dict of futures."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT_S)
        except KafkaException as e:
            out[key] = e.args[0]
    return out


def describe_topic(admin: AdminClient, name: str) -> dict:
    (configs,) = wait(admin.describe_configs([ConfigResource("topic", name)])).values()
    return configs


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_topics_through_the_admin_client(broker):
    admin = admin_client(broker)
    done = wait(admin.create_topics([
        NewTopic("t", num_partitions=2, replication_factor=1,
                 config={"retention.ms": "5000", "cleanup.policy": "compact"}),
        NewTopic("rf3", num_partitions=1, replication_factor=3),
        NewTopic("bad-config", num_partitions=1, config={"foo.bar": "1"})],
        operation_timeout=10))
    assert done["t"] is None
    assert done["rf3"].code() == 38 and "only 1 broker(s)" in done["rf3"].str()
    assert done["bad-config"].code() == 40
    done = wait(admin.create_topics([NewTopic("vo", num_partitions=4)], validate_only=True))
    assert done["vo"] is None
    assert "vo" not in broker.store and broker.store.topic("t").partitions == 2
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert "vo" not in metadata.topics and len(metadata.topics["t"].partitions) == 2
    assert wait(admin.create_topics([NewTopic("t", 1)]))["t"].code() == 36

    configs = describe_topic(admin, "t")
    assert configs["retention.ms"].value == "5000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].is_default

    res = ConfigResource("topic", "t", incremental_configs=[
        ConfigEntry("retention.ms", "7000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)])
    assert list(wait(admin.incremental_alter_configs([res])).values()) == [None]
    configs = describe_topic(admin, "t")
    assert configs["retention.ms"].value == "7000"
    assert configs["cleanup.policy"].value == "compact,delete"
    assert broker.store.topic("t").log(1).config.retention_ms == 7000

    # The legacy AlterConfigs replaces every override.
    res = ConfigResource("topic", "t", set_config={"segment.ms": "100000"})
    assert list(wait(admin.alter_configs([res])).values()) == [None]
    configs = describe_topic(admin, "t")
    assert configs["segment.ms"].value == "100000" and configs["retention.ms"].is_default

    assert wait(admin.create_partitions([NewPartitions("t", 5)]))["t"] is None
    assert broker.store.topic("t").partitions == 5
    assert len(admin.list_topics(timeout=TIMEOUT_S).topics["t"].partitions) == 5
    assert wait(admin.create_partitions([NewPartitions("t", 3)]))["t"].code() == 37

    assert wait(admin.delete_topics(["t", "nope"], operation_timeout=10))["t"] is None
    assert "t" not in broker.store
    assert "t" not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_delete_records_and_describe_cluster(broker):
    admin = admin_client(broker)
    assert wait(admin.create_topics([NewTopic("r", 1)]))["r"] is None
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("r", b"v%d" % i, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    done = wait(admin.delete_records([TopicPartition("r", 0, 4)]))
    (deleted,) = done.values()
    assert deleted.low_watermark == 4
    (beyond,) = wait(admin.delete_records([TopicPartition("r", 0, 50)])).values()
    assert beyond.code() == 1  # OFFSET_OUT_OF_RANGE
    assert broker.store.topic("r").log(0).start_offset == 4

    cluster = admin.describe_cluster().result(timeout=TIMEOUT_S)
    assert cluster.cluster_id == broker.state.cluster_id
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [
        (broker.state.node_id, "127.0.0.1", broker.port)]
    assert cluster.controller.id == broker.state.node_id


def test_dynamic_broker_config_through_the_client_survives_restart(broker_factory, tmp_path):
    data_dir = tmp_path / "data"
    first = broker_factory(data_dir=data_dir)
    admin = admin_client(first)
    assert wait(admin.create_topics([NewTopic("plain", 1)]))["plain"] is None
    node = str(first.state.node_id)
    # librdkafka refuses the cluster-default resource (""): the handler tests cover it.
    res = ConfigResource("broker", node, incremental_configs=[ConfigEntry(
        "log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    assert list(wait(admin.incremental_alter_configs([res])).values()) == [None]
    res = ConfigResource("broker", node, incremental_configs=[ConfigEntry(
        "num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    (refused,) = wait(admin.incremental_alter_configs([res])).values()
    assert refused.code() == 42 and "num.partitions" in refused.str()
    assert first.store.topic("plain").config.retention_ms == 3600000
    first.stop()

    second = broker_factory(data_dir=data_dir)
    admin = admin_client(second)
    (configs,) = wait(admin.describe_configs([ConfigResource("broker", node)])).values()
    entry = configs["log.retention.ms"]
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert configs["num.partitions"].is_read_only
    topic = describe_topic(admin, "plain")["retention.ms"]
    assert (topic.value, topic.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
