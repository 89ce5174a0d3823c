"""Store.create_partitions and Store.alter_topic_configs (the admin APIs' additions), on both
backends: the new partitions and configs are used at once, survive a reopen, and a refused
change changes nothing."""

from __future__ import annotations

import os

import pytest

from seglog import filenames
from seglog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    ReadOnlyError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage import checkpoints
from seglog.storage.config import LogConfig
from seglog.store import Store


def open_store(path, backend, **kwargs):
    return Store(path, backend=backend, offsets_topic_partitions=1, **kwargs)


def test_create_partitions_adds_logs_keeps_data_and_survives_reopen(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        topic = store.create_topic("t", 2, {"retention.ms": "5000"})
        topic.log(0).append(b"kept")
        store.create_partitions("t", 5)
        assert topic.partitions == 5 and store.topic("t").partitions == 5
        for p in (2, 3, 4):
            log = topic.log(p)
            assert log.end_offset == 0 and log.config.retention_ms == 5000
            assert log.partition_metadata_pending  # written by its first flush
        topic.log(4).append(b"new")
        topic.log(4).flush()
        meta = checkpoints.PartitionMetadataFile(os.path.join(
            tmp_path, filenames.partition_dir_name("t", 4), filenames.PARTITION_METADATA))
        assert checkpoints.uuid_to_kafka_str(meta.read()) == topic.topic_id
        # The partitioner spreads keys over the new count.
        assert {topic.partition_for(str(i).encode()) for i in range(200)} == set(range(5))
        topic_id = topic.topic_id
    with open_store(tmp_path, backend) as store:
        topic = store.topic("t")
        assert topic.partitions == 5 and topic.topic_id == topic_id
        assert [r.value for r in topic.log(0).records()] == [b"kept"]
        assert [r.value for r in topic.log(4).records()] == [b"new"]
        assert topic.log(3).config.retention_ms == 5000


def test_create_partitions_refusals_change_nothing(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", 3)
        with pytest.raises(InvalidPartitionsError, match="already has 3 partition"):
            store.create_partitions("t", 3)
        with pytest.raises(InvalidPartitionsError, match="2 would not be an increase"):
            store.create_partitions("t", 2)
        with pytest.raises(UnknownTopicOrPartitionError):
            store.create_partitions("nope", 4)
        with pytest.raises(ValueError):
            store.create_partitions("t", 10001)
        with pytest.raises(TypeError):
            store.create_partitions("t", "4")
        # A stray directory where a new partition goes: refused, nothing made.
        os.mkdir(os.path.join(tmp_path, filenames.partition_dir_name("t", 4)))
        with pytest.raises(TopicExistsError):
            store.create_partitions("t", 5)
        assert store.topic("t").partitions == 3
        assert not os.path.exists(os.path.join(tmp_path, filenames.partition_dir_name("t", 3)))
        os.rmdir(os.path.join(tmp_path, filenames.partition_dir_name("t", 4)))
    with open_store(tmp_path, backend) as store:
        assert store.topic("t").partitions == 3


def test_create_partitions_rebalances_a_subscribed_group(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", 1)
        consumer = store.consumer("g", ["t"], auto_offset_reset="earliest")
        consumer.poll(timeout_ms=0)
        assert {tp.partition for tp in consumer.assignment()} == {0}
        store.create_partitions("t", 3)
        consumer.poll(timeout_ms=0)
        assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
        consumer.close()


def test_alter_topic_configs_applies_at_once_and_survives_reopen(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("a", 2, {"retention.ms": "5000", "segment.bytes": "100000"})
        store.create_topic("b", 1)
        store.alter_topic_configs({"a": {"cleanup.policy": "compact"},
                                   "b": LogConfig(retention_ms=1234)})
        a, b = store.topic("a"), store.topic("b")
        # The whole config is replaced: retention.ms and segment.bytes went back to defaults.
        assert a.config == LogConfig.from_kafka({"cleanup.policy": "compact"})
        assert all(a.log(p).config.compaction_enabled for p in range(2))
        assert b.log(0).config.retention_ms == 1234
        assert store.alter_topic_config("a", {"retention.ms": "99"}).config.retention_ms == 99
    with open_store(tmp_path, backend) as store:
        assert store.topic("a").log(1).config.retention_ms == 99
        assert not store.topic("a").config.compaction_enabled
        assert store.topic("b").log(0).config.retention_ms == 1234


def test_alter_topic_configs_refusals_change_nothing(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("a", 1, {"retention.ms": "5000"})
        with pytest.raises(InvalidConfigError, match="foo.bar"):
            store.alter_topic_configs({"a": {"foo.bar": "1"}})
        with pytest.raises(InvalidConfigError, match="log.retention.ms"):
            store.alter_topic_configs({"a": {"log.retention.ms": "1"}})
        with pytest.raises(InvalidConfigError, match="retention.ms"):
            store.alter_topic_configs({"a": {"retention.ms": "-5"}})
        with pytest.raises(UnknownTopicOrPartitionError):
            store.alter_topic_configs({"a": {"retention.ms": "1"}, "nope": {}})
        assert store.topic("a").config.retention_ms == 5000
        assert store.topic("a").log(0).config.retention_ms == 5000


def test_read_only_store_refuses_admin_changes(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("a", 1)
        with Store(tmp_path, backend=backend, read_only=True) as reader:
            with pytest.raises(ReadOnlyError):
                reader.create_partitions("a", 2)
            with pytest.raises(ReadOnlyError):
                reader.alter_topic_configs({"a": {}})


def test_set_topic_config_defaults_applies_to_new_topics_only(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("old", 1)
        store.set_topic_config_defaults({"retention.ms": "1000"})
        assert store.create_topic("new", 1).config.retention_ms == 1000
        assert store.topic("old").config.retention_ms == LogConfig().retention_ms
        with pytest.raises(InvalidConfigError):
            store.set_topic_config_defaults({"retention.ms": "-5"})
        assert store.topic_config_defaults.retention_ms == 1000


def test_a_kafka_name_that_is_also_a_field_name_takes_kafka_strings(tmp_path, backend):
    # "preallocate" is a LogConfig field and a Kafka name: CreateTopics and AlterConfigs send
    # "true"; with topic defaults set, the registry's overrides go through the same path.
    with open_store(tmp_path, backend, topic_config_defaults={"retention.ms": "1000"}) as store:
        assert store.create_topic("p", 1, {"preallocate": "true"}).config.preallocate
        assert LogConfig().replace(preallocate=" TRUE ").preallocate
        with pytest.raises(InvalidConfigError, match="either true or false"):
            store.create_topic("q", 1, {"preallocate": "maybe"})
    with open_store(tmp_path, backend, topic_config_defaults={"retention.ms": "1000"}) as store:
        assert store.topic("p").config.preallocate
