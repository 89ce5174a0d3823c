"""One partition log's configuration: Kafka's topic configs as an immutable, validated value.

:class:`LogConfig` has one field per topic config seglog implements, named in snake case
(``retention.ms`` -> ``retention_ms``), plus two broker-level settings seglog keeps per log
(``producer_id_expiration_ms``, ``cleaner_memory_bytes_max``). Each field's Kafka name,
type, default and validator come from the one config table (:mod:`seglog.config_table`), so
the defaults are Kafka 4.4's. Values are checked when the object is built, so a
``LogConfig`` that exists is valid; unknown names and out-of-range values raise
:class:`~seglog.errors.InvalidConfigError` naming the key (and, for a misspelt name, the
closest known one; a Kafka topic config seglog does not implement is refused by name).
``from_kafka`` parses Kafka's dotted names and string values with Kafka's own rules
(``ConfigDef.parseType``, :func:`seglog.configdef.parse_value`); ``to_kafka`` gives them back.

Thread safety: a ``LogConfig`` is frozen; share it freely. Changing a setting makes a new
object (:meth:`LogConfig.replace`).
"""

from __future__ import annotations

import dataclasses
import difflib
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..config_table import BROKER_CONFIGS, REMOVED, TOPIC_CONFIGS, not_implemented
from ..configdef import (
    BROKER, GZIP_LEVEL_DEFAULT, INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN,
    ConfigKey, format_value, parse_value,
)
from ..errors import InvalidConfigError

__all__ = ["CLEANUP_POLICIES", "CLEANUP_POLICY_COMPACT", "CLEANUP_POLICY_DELETE",
           "COMPRESSION_TYPES", "GZIP_LEVEL_DEFAULT", "INT16_MAX", "INT16_MIN", "INT32_MAX",
           "INT32_MIN", "INT64_MAX", "INT64_MIN", "KAFKA_NAMES", "KAFKA_NAME_OF", "LogConfig",
           "TIMESTAMP_TYPES", "TOPIC_CONFIG_NAMES", "check_int", "check_optional_int",
           "checked_now_ms"]

#: Values of ``cleanup.policy``.
CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
CLEANUP_POLICIES = frozenset({CLEANUP_POLICY_DELETE, CLEANUP_POLICY_COMPACT})
#: Values of ``message.timestamp.type``.
TIMESTAMP_TYPES = TOPIC_CONFIGS["message.timestamp.type"].choices
#: Values of ``compression.type`` (Kafka's ``BrokerCompressionType``); seglog also reads its
#: codec name ``none`` as ``uncompressed`` (the table's alias).
COMPRESSION_TYPES = TOPIC_CONFIGS["compression.type"].choices

# Kafka's compression level limits (GzipCompression, Lz4Compression, ZstdCompression).
LZ4_LEVEL_MIN, LZ4_LEVEL_MAX, LZ4_LEVEL_DEFAULT = 1, 17, 9
ZSTD_LEVEL_MIN, ZSTD_LEVEL_MAX, ZSTD_LEVEL_DEFAULT = -131072, 22, 3


def _cfg(kafka_name: str, *, broker: bool = False) -> Any:
    """A dataclass field for config ``kafka_name`` of the table: its default, and its
    ConfigKey as metadata (``broker``: a broker config the log keeps)."""
    key = (BROKER_CONFIGS if broker else TOPIC_CONFIGS)[kafka_name]
    assert key.implemented and (key.scope == BROKER) == broker, kafka_name
    default = key.default
    if key.type == "list":
        default = _to_field_value(key, default)
    return field(default=default, metadata={"kafka": kafka_name, "key": key, "broker": broker})


def _to_field_value(key: ConfigKey, value: tuple) -> Any:
    # cleanup.policy is a set of policies (order and repeats moot); other lists stay tuples.
    return frozenset(value) if key.choices is not None else value


@dataclass(frozen=True)
class LogConfig:
    """Kafka's topic configuration for one partition log, validated, with Kafka's defaults.

    Field (Kafka name): default, range. Times are milliseconds, sizes bytes.

    * ``segment_bytes`` (segment.bytes): 1 GiB, >= 14 (Kafka 4.4: >= 1 MiB). A segment
      rolls at this size.
    * ``segment_ms`` (segment.ms): 7 days, >= 1. A segment rolls when its first record is
      this old.
    * ``segment_jitter_ms`` (segment.jitter.ms): 0, >= 0. Random amount subtracted from
      ``segment_ms`` per segment.
    * ``segment_index_bytes`` (segment.index.bytes): 10 MiB, >= 4. Maximum size of an offset or
      time index file.
    * ``index_interval_bytes`` (index.interval.bytes): 4096, >= 0. Bytes appended between
      index entries.
    * ``retention_ms`` (retention.ms): 7 days, >= -1; -1 keeps segments forever.
    * ``retention_bytes`` (retention.bytes): -1 (no size limit); any value below 0 is no limit.
    * ``flush_messages`` (flush.messages): 2**63-1, >= 1. Fsync after this many records.
    * ``flush_ms`` (flush.ms): 2**63-1, >= 0. Fsync when the last flush is this old.
    * ``file_delete_delay_ms`` (file.delete.delay.ms): 60000, >= 0. Delay before a deleted
      segment's files are removed.
    * ``min_cleanable_dirty_ratio`` (min.cleanable.dirty.ratio): 0.5, in [0, 1].
    * ``delete_retention_ms`` (delete.retention.ms): 1 day, >= 0. How long compaction keeps
      tombstones.
    * ``min_compaction_lag_ms`` (min.compaction.lag.ms): 0, >= 0, <= ``max_compaction_lag_ms``.
    * ``max_compaction_lag_ms`` (max.compaction.lag.ms): 2**63-1, >= 1.
    * ``max_message_bytes`` (max.message.bytes): 1048588 (1 MiB + 12), >= 0. Largest batch.
    * ``message_timestamp_type`` (message.timestamp.type): "CreateTime" or "LogAppendTime".
    * ``message_timestamp_before_max_ms`` / ``message_timestamp_after_max_ms``
      (message.timestamp.before.max.ms / after.max.ms): 2**63-1 / 3600000 (one hour), >= 0.
      Allowed distance of a CreateTime timestamp before / after the broker's clock (an
      append outside it raises InvalidTimestampError, as Kafka's LogValidator refuses it).
    * ``cleanup_policy`` (cleanup.policy): ``frozenset({"delete"})``; a subset of
      {"delete", "compact"}. Accepts "compact,delete", a list or a set. Empty means neither
      (Kafka 3.9 accepts an empty list too).
    * ``preallocate`` (preallocate): False. Preallocate the segment file at roll.
    * ``compression_type`` (compression.type): "producer" (keep the producer's codec),
      "uncompressed", "gzip", "snappy", "lz4" or "zstd". "none" is accepted as seglog's alias
      of "uncompressed" (Kafka rejects "none" here) and stored as "uncompressed".
    * ``compression_gzip_level`` (-1 or 1..9), ``compression_lz4_level`` (9, 1..17),
      ``compression_zstd_level`` (3, -131072..22): levels used when the log recompresses.
    * ``min_insync_replicas`` (min.insync.replicas): 1, >= 1.
    * ``unclean_leader_election_enable`` (unclean.leader.election.enable): False.
    * ``leader_replication_throttled_replicas`` / ``follower_replication_throttled_replicas``:
      empty tuple; "*" or "partition:broker" pairs. Kept for replication, not acted on yet.
    * ``remote_storage_enable`` (remote.storage.enable): False; True is rejected, as by a
      Kafka broker with tiered storage disabled. ``local_retention_ms`` and
      ``local_retention_bytes`` (-2, >= -2), ``remote_log_copy_disable`` and
      ``remote_log_delete_on_disable`` (False) are accepted and kept, with no effect.
    * ``errors_deadletterqueue_group_enable`` (errors.deadletterqueue.group.enable): False.
      Whether share groups may write their dead-letter records here (KIP-1191).
    * ``producer_id_expiration_ms`` (broker producer.id.expiration.ms): 1 day, >= 1. An idle
      producer id's state is dropped after this long.
    * ``cleaner_memory_bytes_max`` (broker log.cleaner.dedupe.buffer.size): 128 MiB,
      > 1 MiB (Kafka requires more than 1 MiB per cleaner thread). The compaction key map's
      budget.

    Build with ``LogConfig(retention_ms=1000)``, :meth:`from_kafka` or :meth:`from_dict`.
    Raises :class:`~seglog.errors.InvalidConfigError` for a value of the wrong type, out of
    range, or breaking a rule that spans fields (min compaction lag above max).
    """

    segment_bytes: int = _cfg("segment.bytes")
    segment_ms: int = _cfg("segment.ms")
    segment_jitter_ms: int = _cfg("segment.jitter.ms")
    segment_index_bytes: int = _cfg("segment.index.bytes")
    index_interval_bytes: int = _cfg("index.interval.bytes")
    retention_ms: int = _cfg("retention.ms")
    retention_bytes: int = _cfg("retention.bytes")
    flush_messages: int = _cfg("flush.messages")
    flush_ms: int = _cfg("flush.ms")
    file_delete_delay_ms: int = _cfg("file.delete.delay.ms")
    min_cleanable_dirty_ratio: float = _cfg("min.cleanable.dirty.ratio")
    delete_retention_ms: int = _cfg("delete.retention.ms")
    min_compaction_lag_ms: int = _cfg("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _cfg("max.compaction.lag.ms")
    max_message_bytes: int = _cfg("max.message.bytes")
    message_timestamp_type: str = _cfg("message.timestamp.type")
    message_timestamp_before_max_ms: int = _cfg("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _cfg("message.timestamp.after.max.ms")
    cleanup_policy: frozenset = _cfg("cleanup.policy")
    preallocate: bool = _cfg("preallocate")
    compression_type: str = _cfg("compression.type")
    compression_gzip_level: int = _cfg("compression.gzip.level")
    compression_lz4_level: int = _cfg("compression.lz4.level")
    compression_zstd_level: int = _cfg("compression.zstd.level")
    min_insync_replicas: int = _cfg("min.insync.replicas")
    unclean_leader_election_enable: bool = _cfg("unclean.leader.election.enable")
    leader_replication_throttled_replicas: tuple = _cfg("leader.replication.throttled.replicas")
    follower_replication_throttled_replicas: tuple = _cfg("follower.replication.throttled.replicas")
    remote_storage_enable: bool = _cfg("remote.storage.enable")
    local_retention_ms: int = _cfg("local.retention.ms")
    local_retention_bytes: int = _cfg("local.retention.bytes")
    remote_log_copy_disable: bool = _cfg("remote.log.copy.disable")
    remote_log_delete_on_disable: bool = _cfg("remote.log.delete.on.disable")
    errors_deadletterqueue_group_enable: bool = _cfg("errors.deadletterqueue.group.enable")
    producer_id_expiration_ms: int = _cfg("producer.id.expiration.ms", broker=True)
    cleaner_memory_bytes_max: int = _cfg("log.cleaner.dedupe.buffer.size", broker=True)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _validate(f, getattr(self, f.name)))
        _validate_cross_field(self)

    # --- building ---------------------------------------------------------------------------

    @classmethod
    def from_kafka(cls, configs: Mapping[str, Any]) -> "LogConfig":
        """Build from Kafka's dotted names (``{"retention.ms": "1000"}``); missing ones default.

        String values are parsed as Kafka's ``ConfigDef`` does: ints and longs are decimal
        integers (``Integer.parseInt``: optional sign, ASCII digits), doubles are decimal
        numbers, booleans are ``true``/``false`` in any case, lists are comma separated with
        surrounding whitespace ignored; strings are trimmed. Typed values (int, float, bool,
        list) are accepted as ConfigDef accepts them. Snake-case names are not accepted here
        (use :meth:`from_dict`). Raises :class:`InvalidConfigError` for unknown names,
        unparsable or out-of-range values.
        """
        kwargs = {}
        for name, raw in configs.items():
            f = _BY_KAFKA.get(name)
            if f is None:
                raise _unknown(name, _BY_KAFKA)
            kwargs[f.name] = _parse_kafka_value(f, raw)
        return cls(**kwargs)

    @classmethod
    def from_dict(cls, configs: Mapping[str, Any]) -> "LogConfig":
        """Build from a mapping whose keys are snake-case field names or Kafka dotted names.

        Snake-case keys take Python values (as the constructor); dotted keys take Kafka
        values (strings parsed as :meth:`from_kafka`). Naming one setting twice (once in each
        form) raises :class:`InvalidConfigError`, as do unknown names and bad values.
        """
        return cls(**_to_kwargs(configs))

    def replace(self, **changes: Any) -> "LogConfig":
        """A copy with ``changes`` applied (snake-case or dotted keys, as :meth:`from_dict`).

        The result is validated as a whole, so a change that breaks a cross-field rule raises
        :class:`InvalidConfigError`.
        """
        return dataclasses.replace(self, **_to_kwargs(changes))

    # --- reading back -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Every field by snake-case name, with its Python value."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_kafka(self, *, include_defaults: bool = True, topic_only: bool = False) -> dict[str, str]:
        """Kafka's dotted names with string values, as ``kafka-configs.sh`` would show them.

        ``include_defaults=False`` keeps only the settings that differ from Kafka's defaults
        (a topic's overrides). ``topic_only=True`` leaves out the broker-level settings
        (``producer.id.expiration.ms``, ``log.cleaner.dedupe.buffer.size``) that Kafka would
        reject as topic configs. ``LogConfig.from_kafka(c.to_kafka()) == c``.
        """
        out = {}
        for f in dataclasses.fields(self):
            if topic_only and f.metadata["broker"]:
                continue
            value = getattr(self, f.name)
            if not include_defaults and value == f.default:
                continue
            out[f.metadata["kafka"]] = _format_kafka_value(f, value)
        return out

    @property
    def compaction_enabled(self) -> bool:
        """Whether ``cleanup_policy`` contains "compact" (Kafka's ``LogConfig.compact``)."""
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def deletion_enabled(self) -> bool:
        """Whether ``cleanup_policy`` contains "delete": retention removes old segments."""
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def compression_codec(self) -> str | None:
        """The codec the log writes with ("none", "gzip", ...), or None for "producer"
        (keep each batch as the producer compressed it)."""
        if self.compression_type == "producer":
            return None
        return "none" if self.compression_type == "uncompressed" else self.compression_type


_FIELDS = {f.name: f for f in dataclasses.fields(LogConfig)}
_BY_KAFKA = {f.metadata["kafka"]: f for f in _FIELDS.values()}
#: Every Kafka dotted name LogConfig accepts.
KAFKA_NAMES = frozenset(_BY_KAFKA)
#: The dotted names that are Kafka topic configs (not broker-level settings).
TOPIC_CONFIG_NAMES = frozenset(n for n, f in _BY_KAFKA.items() if not f.metadata["broker"])
#: Snake-case field name -> Kafka dotted name.
KAFKA_NAME_OF = {name: f.metadata["kafka"] for name, f in _FIELDS.items()}
assert TOPIC_CONFIG_NAMES == {k.name for k in TOPIC_CONFIGS.values() if k.implemented}, \
    "LogConfig has a field for every topic config the table says seglog implements"


def _unknown(name: str, known: Iterable[str]) -> InvalidConfigError:
    """The error for an unknown name, suggesting the closest of ``known``; a Kafka topic
    config seglog does not implement, or one Kafka removed, says so."""
    if not isinstance(name, str):
        return InvalidConfigError(f"Configuration names are str, got {name!r}")
    if name in REMOVED:
        return InvalidConfigError(f"Unknown configuration {name!r}: {REMOVED[name]}")
    key = TOPIC_CONFIGS.get(name)
    if key is not None and not key.implemented:
        return not_implemented(key)
    known = list(known)
    if name in _FIELDS and name not in known:
        # A snake-case name where only dotted names are accepted (from_kafka).
        close = [KAFKA_NAME_OF[name]]
    else:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return InvalidConfigError(f"Unknown configuration {name!r}{hint}")


def _to_kwargs(configs: Mapping[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for name, value in configs.items():
        # "preallocate" is both a field and a Kafka name: a string value is Kafka's ("true").
        if name in _FIELDS and not (name in _BY_KAFKA and isinstance(value, str)):
            field_name = name
        elif name in _BY_KAFKA:
            field_name = _BY_KAFKA[name].name
            value = _parse_kafka_value(_BY_KAFKA[name], value)
        else:
            raise _unknown(name, [*_FIELDS, *_BY_KAFKA])
        if field_name in kwargs:
            raise InvalidConfigError(
                f"Configuration {KAFKA_NAME_OF[field_name]!r} given twice "
                f"(as {field_name!r} and {KAFKA_NAME_OF[field_name]!r})")
        kwargs[field_name] = value
    return kwargs


def _parse_kafka_value(f: dataclasses.Field, raw: Any) -> Any:
    """A Kafka config value (string or typed) -> the Python value of field ``f``."""
    key: ConfigKey = f.metadata["key"]
    value = parse_value(key, raw)
    return _to_field_value(key, value) if key.type == "list" else value


def _format_kafka_value(f: dataclasses.Field, value: Any) -> str:
    text = format_value(f.metadata["key"].type, value)
    assert text is not None, f.name
    return text


# --- validation ------------------------------------------------------------------------------


def check_int(name: str, value: Any, *, minimum: int = INT64_MIN,
              maximum: int = INT64_MAX) -> int:
    """The one check of every integer argument of the public Log, Store, Producer and
    Consumer methods (offsets, byte and record counts, timestamps, epochs, timeouts): returns
    ``value`` as a plain ``int``.

    Accepted: ``int`` and anything with ``__index__`` (numpy integers), but not ``bool``.
    Raises ``TypeError`` naming ``name`` for anything else (``1.5``, ``"3"``, ``None``, ``True``)
    and ``ValueError`` naming ``name`` for a value outside ``[minimum, maximum]`` (default: the
    int64 range every offset and timestamp of Kafka's format fits). Both backends get the same
    errors because the check happens here, before any value reaches native code: a huge
    integer (``2**70``) is a ``ValueError``, never an ``OverflowError`` from Cython.
    """
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = value.__index__()
    if value < minimum or value > maximum:
        raise ValueError(f"{name} must be in [{minimum}, {maximum}], got {value}")
    return value


def check_optional_int(name: str, value: Any, *, minimum: int = INT64_MIN,
                       maximum: int = INT64_MAX) -> int | None:
    """:func:`check_int` for an argument where None means "not given" (returned as None)."""
    if value is None:
        return None
    return check_int(name, value, minimum=minimum, maximum=maximum)



def checked_now_ms(now_ms: Any) -> int:
    """The ``now_ms`` argument of the Log's methods: :func:`check_int`'s int, or the wall clock
    in milliseconds since the epoch for None."""
    if now_ms is None:
        return int(time.time() * 1000)
    if type(now_ms) is int and INT64_MIN <= now_ms <= INT64_MAX:
        return now_ms  # the usual argument, without check_int's call (a request's hot path)
    return check_int("now_ms", now_ms)

def _validate(f: dataclasses.Field, value: Any) -> Any:
    """Check ``value``'s type and range for field ``f``; return it normalised."""
    key: ConfigKey = f.metadata["key"]
    value = parse_value(key, value, strings=False)
    return _to_field_value(key, value) if key.type == "list" else value


def _validate_cross_field(config: LogConfig) -> None:
    """The rules Kafka checks across fields (``LogConfig.validateValues`` and the
    ``remote.storage.enable`` checks of ``validateTopicLogConfigValues``)."""
    if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms "
            f"({config.min_compaction_lag_ms}) > max.compaction.lag.ms "
            f"({config.max_compaction_lag_ms})")
    if config.remote_storage_enable:
        # seglog has no tiered storage: it is a broker with remote.log.storage.system.enable
        # off, which is how Kafka words the refusal.
        raise InvalidConfigError(
            "Invalid value true for configuration remote.storage.enable: Tiered Storage "
            "functionality is disabled in the broker. Topic cannot be configured with remote "
            "log storage.")
