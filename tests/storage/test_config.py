"""LogConfig: Kafka's defaults, ranges, string parsing, round trips and cross-field rules."""

from __future__ import annotations

import dataclasses

import pytest

from seglog.storage.config import KAFKA_NAMES, TOPIC_CONFIG_NAMES, LogConfig
from seglog.errors import InvalidConfigError

LONG_MAX = 2**63 - 1

# Kafka's defaults (LogConfig.java, ServerLogConfigs.java).
KAFKA_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "flush.messages": str(LONG_MAX),
    "flush.ms": str(LONG_MAX),
    "file.delete.delay.ms": "60000",
    "min.cleanable.dirty.ratio": "0.5",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": str(LONG_MAX),
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": str(LONG_MAX),
    "message.timestamp.after.max.ms": "3600000",  # Kafka 4.4 (one hour)
    "cleanup.policy": "delete",
    "preallocate": "false",
    "compression.type": "producer",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "producer.id.expiration.ms": "86400000",
    "log.cleaner.dedupe.buffer.size": "134217728",
}


def test_defaults_are_kafkas():
    exported = LogConfig().to_kafka()
    for name, value in KAFKA_DEFAULTS.items():
        assert exported[name] == value, name


def test_default_object_fields():
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.cleanup_policy == frozenset({"delete"})
    assert c.deletion_enabled and not c.compaction_enabled
    assert c.cleaner_memory_bytes_max == 128 * 1024 * 1024
    assert c.compression_codec is None


def test_from_kafka_parses_strings_like_configdef():
    c = LogConfig.from_kafka({
        "retention.ms": " 1000 ",
        "segment.bytes": "+4096",
        "min.cleanable.dirty.ratio": "1e-1",
        "preallocate": "TRUE",
        "cleanup.policy": " compact , delete ",
        "message.timestamp.type": "LogAppendTime",
        "compression.type": "lz4",
    })
    assert c.retention_ms == 1000
    assert c.segment_bytes == 4096
    assert c.min_cleanable_dirty_ratio == pytest.approx(0.1)
    assert c.preallocate is True
    assert c.cleanup_policy == frozenset({"compact", "delete"})
    assert c.compaction_enabled and c.deletion_enabled
    assert c.compression_codec == "lz4"


def test_from_kafka_accepts_typed_values():
    c = LogConfig.from_kafka({"retention.ms": 5, "preallocate": True, "cleanup.policy": ["compact"]})
    assert (c.retention_ms, c.preallocate, c.cleanup_policy) == (5, True, frozenset({"compact"}))


@pytest.mark.parametrize("name,value", [
    ("segment.bytes", "1_000"),      # Python int() accepts it, Integer.parseInt does not
    ("segment.bytes", "1.0"),
    ("segment.bytes", "2147483648"),  # above Integer.MAX_VALUE
    ("retention.ms", "9223372036854775808"),
    ("retention.ms", ""),
    ("preallocate", "yes"),
    ("min.cleanable.dirty.ratio", "half"),
    ("min.cleanable.dirty.ratio", "NaN"),
    ("cleanup.policy", "compact,,delete"),
    ("cleanup.policy", "archive"),
    ("message.timestamp.type", "createtime"),
    ("compression.type", "brotli"),
])
def test_from_kafka_rejects_unparsable_values(name, value):
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
        LogConfig.from_kafka({name: value})


@pytest.mark.parametrize("field,bad,good", [
    ("segment_bytes", 13, 14),
    ("segment_ms", 0, 1),
    ("segment_jitter_ms", -1, 0),
    ("segment_index_bytes", 3, 4),
    ("index_interval_bytes", -1, 0),
    ("retention_ms", -2, -1),
    ("flush_messages", 0, 1),
    ("flush_ms", -1, 0),
    ("file_delete_delay_ms", -1, 0),
    ("min_cleanable_dirty_ratio", 1.01, 1.0),
    ("min_cleanable_dirty_ratio", -0.01, 0.0),
    ("delete_retention_ms", -1, 0),
    ("min_compaction_lag_ms", -1, 0),
    ("max_compaction_lag_ms", 0, 1),
    ("max_message_bytes", -1, 0),
    ("min_insync_replicas", 0, 1),
    ("compression_gzip_level", 0, 9),
    ("compression_gzip_level", 10, -1),
    ("compression_lz4_level", 18, 17),
    ("compression_zstd_level", 23, 22),
    ("local_retention_ms", -3, -2),
    ("producer_id_expiration_ms", 0, 1),
    ("cleaner_memory_bytes_max", 1024 * 1024, 1024 * 1024 + 1),
    ("segment_bytes", 2**31, 2**31 - 1),
    ("retention_ms", 2**63, 2**63 - 1),
])
def test_range_limits(field, bad, good):
    assert getattr(LogConfig(**{field: good}), field) == good
    with pytest.raises(InvalidConfigError, match="Invalid value"):
        LogConfig(**{field: bad})


def test_retention_bytes_has_no_lower_bound():
    assert LogConfig(retention_bytes=-5).retention_bytes == -5


@pytest.mark.parametrize("field,value", [
    ("retention_ms", "1000"), ("retention_ms", 1.5), ("retention_ms", True),
    ("preallocate", 1), ("min_cleanable_dirty_ratio", "0.5"), ("compression_type", None),
    ("cleanup_policy", 5), ("cleanup_policy", [1]),
])
def test_wrong_python_types_rejected(field, value):
    with pytest.raises(InvalidConfigError):
        LogConfig(**{field: value})


def test_unknown_names_suggest_the_closest():
    with pytest.raises(InvalidConfigError, match="did you mean 'retention.ms'"):
        LogConfig.from_kafka({"retention.mss": "1"})
    with pytest.raises(InvalidConfigError, match="did you mean 'retention.ms'"):
        LogConfig.from_kafka({"retention_ms": "1"})  # from_kafka takes dotted names only
    with pytest.raises(InvalidConfigError, match="did you mean 'segment_bytes'"):
        LogConfig.from_dict({"segment_byte": 1})
    with pytest.raises(InvalidConfigError, match="'no.such.thing'"):
        LogConfig.from_dict({"no.such.thing": 1})
    with pytest.raises(TypeError):
        LogConfig(segment_byte=1)  # the constructor is a plain dataclass constructor


def test_removed_kafka_configs_say_why():
    with pytest.raises(InvalidConfigError, match="removed in Kafka 4.0"):
        LogConfig.from_kafka({"message.format.version": "3.0"})


def test_from_dict_accepts_both_forms_but_not_twice():
    c = LogConfig.from_dict({"retention.ms": "10", "segment_bytes": 1024})
    assert (c.retention_ms, c.segment_bytes) == (10, 1024)
    with pytest.raises(InvalidConfigError, match="given twice"):
        LogConfig.from_dict({"retention.ms": "10", "retention_ms": 10})


def test_round_trips():
    c = LogConfig(retention_ms=-1, cleanup_policy="compact,delete", min_cleanable_dirty_ratio=0.25,
                  compression_type="zstd", preallocate=True,
                  leader_replication_throttled_replicas=("0:1", "1:2"))
    assert LogConfig.from_kafka(c.to_kafka()) == c
    assert LogConfig.from_dict(c.to_dict()) == c
    assert LogConfig(**c.to_dict()) == c
    assert c.to_kafka()["cleanup.policy"] == "compact,delete"
    assert c.to_kafka()["leader.replication.throttled.replicas"] == "0:1,1:2"


def test_to_kafka_overrides_and_topic_only():
    c = LogConfig(retention_ms=1000, cleaner_memory_bytes_max=64 << 20)
    assert c.to_kafka(include_defaults=False) == {
        "retention.ms": "1000", "log.cleaner.dedupe.buffer.size": str(64 << 20)}
    assert c.to_kafka(include_defaults=False, topic_only=True) == {"retention.ms": "1000"}
    assert set(c.to_kafka(topic_only=True)) == TOPIC_CONFIG_NAMES
    assert set(c.to_kafka()) == KAFKA_NAMES


def test_replace_validates_and_accepts_dotted_names():
    c = LogConfig()
    d = c.replace(retention_ms=5, **{"segment.bytes": "2048"})
    assert (d.retention_ms, d.segment_bytes) == (5, 2048)
    assert c.retention_ms == 604800000  # the original is unchanged
    with pytest.raises(InvalidConfigError):
        c.replace(segment_bytes=1)


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LogConfig().retention_ms = 5  # type: ignore[misc]


def test_cross_field_compaction_lags():
    LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=10)
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms"):
        LogConfig(min_compaction_lag_ms=11, max_compaction_lag_ms=10)
    with pytest.raises(InvalidConfigError):
        LogConfig(max_compaction_lag_ms=10).replace(min_compaction_lag_ms=11)


def test_remote_storage_is_refused_like_a_broker_without_tiered_storage():
    with pytest.raises(InvalidConfigError, match="Tiered Storage"):
        LogConfig.from_kafka({"remote.storage.enable": "true"})


def test_cleanup_policy_forms():
    assert LogConfig(cleanup_policy=["compact"]).cleanup_policy == frozenset({"compact"})
    assert LogConfig(cleanup_policy="delete,compact") == LogConfig(cleanup_policy="compact,delete")
    assert LogConfig(cleanup_policy="").cleanup_policy == frozenset()  # Kafka 3.9 accepts it
    with pytest.raises(InvalidConfigError):
        LogConfig(cleanup_policy=("compact", "archive"))


def test_compression_none_is_an_alias_of_uncompressed():
    c = LogConfig(compression_type="none")
    assert c.compression_type == "uncompressed"
    assert c.compression_codec == "none"
    assert c.to_kafka()["compression.type"] == "uncompressed"


def test_throttled_replicas_validation():
    assert LogConfig.from_kafka({"follower.replication.throttled.replicas": "*"}) \
        .follower_replication_throttled_replicas == ("*",)
    with pytest.raises(InvalidConfigError):
        LogConfig.from_kafka({"follower.replication.throttled.replicas": "0-1"})


def test_hashable():
    assert hash(LogConfig()) == hash(LogConfig())


def test_kafka_topic_configs_seglog_lacks_are_refused_by_name():
    # Kafka 4.4 has it; seglog's LogConfig does not: refused, naming it, not "unknown".
    with pytest.raises(InvalidConfigError, match="max.decompressed.message.bytes is not "
                                                 "implemented by seglog"):
        LogConfig.from_kafka({"max.decompressed.message.bytes": "1000"})
    with pytest.raises(InvalidConfigError, match="remote.copy.lag.ms is not implemented"):
        LogConfig.from_dict({"remote.copy.lag.ms": "10"})


def test_every_field_is_a_row_of_the_config_table():
    from seglog.config_table import BROKER_CONFIGS, TOPIC_CONFIGS
    c = LogConfig()
    for name, value in c.to_kafka().items():
        key = TOPIC_CONFIGS.get(name) or BROKER_CONFIGS[name]
        assert key.implemented
        assert value == LogConfig.from_kafka({name: value}).to_kafka()[name]
    assert {n for n, k in TOPIC_CONFIGS.items() if k.implemented} == TOPIC_CONFIG_NAMES


@pytest.mark.parametrize("name", ["segment.bytes", "cleanup.policy", "min.cleanable.dirty.ratio",
                                  "preallocate", "message.timestamp.type"])
@pytest.mark.parametrize("value", [[1], [None], [1.5], {"a": 1}, frozenset({1, 2}), [[1]]])
def test_any_json_shape_of_a_value_is_a_typed_error(name, value):
    # What a damaged seglog-topics.json can hold (found by the long fuzz run: a list of
    # numbers for segment.bytes raised TypeError while its error message was written).
    with pytest.raises(InvalidConfigError):
        LogConfig.from_kafka({name: value})
