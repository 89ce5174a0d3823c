"""BrokerConfig: Kafka's broker config names, defaults, parse rules and validation; the Java
properties format of ``server.properties``; the ``log.*`` settings as the topics' defaults."""

from __future__ import annotations

import pytest

from seglog import LogConfig
from seglog.errors import InvalidConfigError
from seglog.server.config import (CONFIG_DEFS, LOG_CONFIG_SYNONYMS, BrokerConfig,
                                  parse_config_args, parse_properties)
from seglog.storage.config import KAFKA_NAMES

HOUR_MS = 3600 * 1000

# Kafka 4.x's defaults (KafkaConfig, ServerLogConfigs, GroupCoordinatorConfig,
# TransactionStateManagerConfig, SocketServerConfigs), written out once more by hand.
KAFKA_DEFAULTS = {
    "num.partitions": 1, "default.replication.factor": 1, "auto.create.topics.enable": True,
    "delete.topic.enable": True, "log.retention.ms": 168 * HOUR_MS,
    "log.retention.bytes": -1, "log.segment.bytes": 1 << 30, "log.roll.ms": 168 * HOUR_MS,
    "log.cleanup.policy": ("delete",), "log.message.timestamp.type": "CreateTime",
    "compression.type": "producer", "message.max.bytes": 1048588, "min.insync.replicas": 1,
    "unclean.leader.election.enable": False, "socket.request.max.bytes": 104857600,
    "max.connections": 2**31 - 1, "connections.max.idle.ms": 600000,
    "queued.max.requests": 500, "fetch.max.bytes": 57671680,
    "group.initial.rebalance.delay.ms": 3000, "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000, "group.max.size": 2**31 - 1,
    "offsets.retention.minutes": 10080, "offsets.retention.check.interval.ms": 600000,
    "offsets.topic.num.partitions": 50, "offsets.topic.replication.factor": 3,
    "transaction.state.log.num.partitions": 50, "transaction.max.timeout.ms": 900000,
    "transactional.id.expiration.ms": 604800000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "producer.id.expiration.ms": 86400000, "log.flush.interval.messages": 2**63 - 1,
    "log.flush.interval.ms": 2**63 - 1, "log.retention.check.interval.ms": 300000,
    "zookeeper.connect": None, "broker.id": -1, "node.id": None, "advertised.listeners": None,
    "listeners": ("PLAINTEXT://:9092",), "log.dirs": ("/tmp/kafka-logs",),
    "add.partitions.to.txn.retry.backoff.ms": 20,
    "add.partitions.to.txn.retry.backoff.max.ms": 100,
}


@pytest.mark.parametrize("name", sorted(KAFKA_DEFAULTS))
def test_kafka_defaults(name):
    assert BrokerConfig()[name] == KAFKA_DEFAULTS[name]


def test_default_topic_config_is_kafkas():
    assert BrokerConfig().log_config() == LogConfig()
    assert BrokerConfig().node_id is None


def test_strings_parse_as_kafka_parses_them():
    config = BrokerConfig({"num.partitions": " 3 ", "auto.create.topics.enable": "FALSE",
                           "log.cleanup.policy": "compact , delete",
                           "log.cleaner.min.cleanable.ratio": "0.25",
                           "advertised.listeners": "PLAINTEXT://h:1,OTHER://g:2"})
    assert config["num.partitions"] == 3
    assert config["auto.create.topics.enable"] is False
    assert config["log.cleanup.policy"] == ("compact", "delete")
    assert config["log.cleaner.min.cleanable.ratio"] == 0.25
    assert config["advertised.listeners"] == ("PLAINTEXT://h:1", "OTHER://g:2")
    assert config.overrides["num.partitions"] == 3
    assert not config.is_default("num.partitions") and config.is_default("delete.topic.enable")


@pytest.mark.parametrize("name, value", [
    ("num.partitions", "0"), ("num.partitions", "1.5"), ("num.partitions", "2147483648"),
    ("num.partitions", True), ("auto.create.topics.enable", "yes"),
    ("log.cleanup.policy", "shred"), ("compression.type", "brotli"),
    ("log.message.timestamp.type", "Now"), ("queued.max.requests", 0),
    ("log.cleaner.min.cleanable.ratio", "2"), ("socket.request.max.bytes", "-1"),
    ("offsets.topic.replication.factor", "40000"), ("num.partitions", None),
    ("add.partitions.to.txn.retry.backoff.ms", "0"),
    ("add.partitions.to.txn.retry.backoff.max.ms", "-1"),
])
def test_bad_values_are_refused_naming_the_config(name, value):
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
        BrokerConfig({name: value})


def test_unknown_names_get_a_suggestion():
    with pytest.raises(InvalidConfigError, match="did you mean 'log.retention.hours'"):
        BrokerConfig({"log.retention.hour": "1"})
    with pytest.raises(InvalidConfigError, match="removed in Kafka 4.0"):
        BrokerConfig({"log.message.format.version": "3.0"})
    with pytest.raises(InvalidConfigError, match="Unknown broker config"):
        BrokerConfig({"retention.ms": "1"})  # a topic config, not a broker one


@pytest.mark.parametrize("given, retention_ms", [
    ({"log.retention.hours": "2"}, 2 * HOUR_MS),
    ({"log.retention.minutes": "3", "log.retention.hours": "2"}, 3 * 60000),
    ({"log.retention.ms": "5", "log.retention.minutes": "3"}, 5),
    ({"log.retention.ms": "-1"}, -1),
    ({"log.retention.hours": "-1"}, -1),
])
def test_retention_units_resolve_as_kafka_does(given, retention_ms):
    config = BrokerConfig(given)
    assert config["log.retention.ms"] == retention_ms
    assert config.log_config().retention_ms == retention_ms


def test_roll_dirs_and_node_id_resolve():
    config = BrokerConfig({"log.roll.hours": "2", "log.dir": "/d", "broker.id": "4"})
    assert config["log.roll.ms"] == 2 * HOUR_MS
    assert config.log_config().segment_ms == 2 * HOUR_MS
    assert config["log.dirs"] == ("/d",)
    assert config.node_id == 4
    assert BrokerConfig({"node.id": "7", "broker.id": "4"}).node_id == 7
    assert BrokerConfig({"log.dirs": "/a", "log.dir": "/d"})["log.dirs"] == ("/a",)
    # Several data directories (JBOD) are served; one named twice is refused as Kafka does.
    assert BrokerConfig({"log.dirs": "/a,/b"})["log.dirs"] == ("/a", "/b")
    for name in ("log.dirs", "log.dir"):
        with pytest.raises(InvalidConfigError, match="Duplicate log directory found: /a, /a/"):
            BrokerConfig({name: "/a,/a/"})


def test_log_settings_become_the_topic_defaults():
    config = BrokerConfig({"log.segment.bytes": "1048576", "message.max.bytes": "2000",
                           "log.cleanup.policy": "compact", "compression.type": "zstd",
                           "log.message.timestamp.type": "LogAppendTime",
                           "log.flush.interval.messages": "10", "min.insync.replicas": "2",
                           "producer.id.expiration.ms": "1000"})
    log = config.log_config()
    assert (log.segment_bytes, log.max_message_bytes, log.cleanup_policy) == \
        (1048576, 2000, frozenset({"compact"}))
    assert (log.compression_type, log.message_timestamp_type, log.flush_messages) == \
        ("zstd", "LogAppendTime", 10)
    assert (log.min_insync_replicas, log.producer_id_expiration_ms) == (2, 1000)


def test_every_synonym_names_a_broker_config_and_a_log_config():
    for broker_name, topic_name in LOG_CONFIG_SYNONYMS.items():
        assert broker_name in CONFIG_DEFS
        assert topic_name in KAFKA_NAMES


def test_the_mapping_is_read_only_and_complete():
    config = BrokerConfig()
    assert set(config) == set(CONFIG_DEFS)
    assert len(config) == len(CONFIG_DEFS)
    with pytest.raises(TypeError):
        config["num.partitions"] = 2  # type: ignore[index]


def test_session_timeouts_must_be_ordered():
    with pytest.raises(InvalidConfigError):
        BrokerConfig({"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"})


def test_java_properties_syntax():
    text = "\n".join([
        "# a comment", "! another", "", "   ",
        "a=1", "b : 2", "c   3", "d\t=\t4 ",
        "e=first \\", "   second", "f\\=g=h", "i\\:j:k", "u=\\u0041\\tB",
        "empty=", "bare", "esc=back\\\\slash",
        "last=\\",
    ])
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4 ", "e": "first second", "f=g": "h", "i:j": "k",
        "u": "A\tB", "empty": "", "bare": "", "esc": "back\\slash", "last": "",
    }
    assert parse_properties("a=1\na=2") == {"a": "2"}
    with pytest.raises(InvalidConfigError, match="uxxxx"):
        parse_properties("bad=\\uZZZZ")


def test_config_args_and_sources_in_order():
    assert parse_config_args(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(InvalidConfigError, match="key=value"):
        parse_config_args(["novalue"])
    config = BrokerConfig.from_sources(file_text="num.partitions=2\ndelete.topic.enable=false",
                                       args=["num.partitions=3"],
                                       configs={"delete.topic.enable": True})
    assert (config["num.partitions"], config["delete.topic.enable"]) == (3, True)


def test_a_broker_gives_its_log_settings_to_new_topics(broker_factory):
    broker = broker_factory(log_retention_hours=1, log_segment_bytes=1 << 20)
    topic = broker.store.create_topic("t")
    assert (topic.config.retention_ms, topic.config.segment_bytes) == (HOUR_MS, 1 << 20)
    assert broker.state.config["log.retention.ms"] == HOUR_MS
    assert broker.store.offsets_retention_ms == 10080 * 60000
