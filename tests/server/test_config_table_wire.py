"""The config table on the wire, through real clients against a running broker: Kafka 4.4's
``message.timestamp.after.max.ms`` (one hour) refuses a record stamped two hours ahead with
INVALID_TIMESTAMP on both storage backends; a Kafka config seglog does not implement is
refused by name in CreateTopics, AlterConfigs and IncrementalAlterConfigs (INVALID_CONFIG);
DescribeConfigs lists the broker configs the table says seglog takes, with Kafka's defaults."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from seglog.config_table import BROKER_CONFIGS, DESCRIBED_AT_DEFAULT, DYNAMIC_ONLY

TIMEOUT_S = 15
HOUR_MS = 3600 * 1000
INVALID_CONFIG = 40


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def _wait(futures: dict) -> dict:
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT_S)
        except KafkaException as e:
            out[key] = e.args[0]
    return out


def _produce(broker, topic: str, timestamp_ms: int):
    """The delivery error (None for success) of one record stamped ``timestamp_ms``."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 10000})
    outcome = []
    producer.produce(topic, b"v", timestamp=timestamp_ms,
                     on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert len(outcome) == 1
    return outcome[0]


def test_a_record_two_hours_ahead_is_refused(any_backend_broker):
    broker = any_backend_broker
    broker.store.create_topic("t", partitions=1)
    now_ms = int(time.time() * 1000)
    error = _produce(broker, "t", now_ms + 2 * HOUR_MS)
    assert error is not None and error.code() == KafkaError.INVALID_TIMESTAMP
    assert _produce(broker, "t", now_ms + HOUR_MS // 2) is None
    assert broker.store.topic("t").end_offsets() == {0: 1}


def test_unimplemented_topic_config_refused_by_name(broker):
    admin = _admin(broker)
    name = "max.decompressed.message.bytes"  # a Kafka 4.4 topic config seglog lacks
    done = _wait(admin.create_topics([NewTopic("c", 1, config={name: "1000"})],
                                     operation_timeout=10))
    assert done["c"].code() == INVALID_CONFIG and name in done["c"].str()
    assert "not implemented" in done["c"].str()
    broker.store.create_topic("t", partitions=1)
    resource = ConfigResource("topic", "t", incremental_configs=[
        ConfigEntry(name, "1000", incremental_operation=AlterConfigOpType.SET)])
    (error,) = _wait(admin.incremental_alter_configs([resource])).values()
    assert error.code() == INVALID_CONFIG and name in error.str()
    # An unknown name keeps Kafka's words.
    resource = ConfigResource("topic", "t", incremental_configs=[
        ConfigEntry("foo.bar", "1", incremental_operation=AlterConfigOpType.SET)])
    (error,) = _wait(admin.incremental_alter_configs([resource])).values()
    assert error.code() == INVALID_CONFIG and "Unknown topic config name: foo.bar" in error.str()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_unimplemented_broker_config_refused_by_name(broker):
    admin = _admin(broker)
    name = "log.cleaner.backoff.ms"  # dynamic in Kafka 4.4, not implemented by seglog
    assert not BROKER_CONFIGS[name].implemented
    resource = ConfigResource("broker", str(broker.state.node_id), incremental_configs=[
        ConfigEntry(name, "100", incremental_operation=AlterConfigOpType.SET)])
    (error,) = _wait(admin.incremental_alter_configs([resource])).values()
    assert error.code() == INVALID_CONFIG and name in error.str()
    assert "not implemented" in error.str()
    (error,) = _wait(admin.alter_configs([ConfigResource(
        "broker", str(broker.state.node_id), set_config={name: "100"})])).values()
    assert error.code() == INVALID_CONFIG and name in error.str()


def test_describe_lists_the_tables_broker_configs(broker):
    admin = _admin(broker)
    (configs,) = _wait(admin.describe_configs([ConfigResource(
        "broker", str(broker.state.node_id))])).values()
    # Kafka's dynamic-only configs (DynamicConfig.Broker) are listed only while set.
    # ... and Kafka's internal ones (ConfigDef.defineInternal) are not described at all.
    assert set(configs) == {k.name for k in BROKER_CONFIGS.values()
                            if k.implemented and not k.internal
                            and k.name not in DYNAMIC_ONLY} | DESCRIBED_AT_DEFAULT
    # A refused config listed at Kafka's default (config_table.DESCRIBE_RULE).
    rack = configs["broker.rack"]
    assert rack.value is None and rack.source == ConfigSource.DEFAULT_CONFIG.value
    after = configs["log.message.timestamp.after.max.ms"]
    assert after.value == "3600000"
