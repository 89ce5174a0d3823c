"""One partition log's configuration: Kafka's topic configs as an immutable, validated value.

:class:`LogConfig` has one field per Kafka topic config, named in snake case
(``retention.ms`` -> ``retention_ms``), with Kafka's default, type and allowed range
(``storage/.../log/LogConfig.java``, ``TopicConfig.java``, ``ServerLogConfigs.java``), plus two
broker-level settings seglog keeps per log (``producer_id_expiration_ms``,
``cleaner_memory_bytes_max``). Values are checked when the object is built, so a ``LogConfig``
that exists is valid; unknown names and out-of-range values raise
:class:`~seglog.errors.InvalidConfigError` naming the key (and, for a misspelt name, the closest
known one). ``from_kafka`` parses Kafka's dotted names and string values with Kafka's own
rules (``ConfigDef.parseType``); ``to_kafka`` gives them back.

Thread safety: a ``LogConfig`` is frozen; share it freely. Changing a setting makes a new
object (:meth:`LogConfig.replace`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import time
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..errors import InvalidConfigError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1

#: Values of ``cleanup.policy``.
CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
CLEANUP_POLICIES = frozenset({CLEANUP_POLICY_DELETE, CLEANUP_POLICY_COMPACT})
#: Values of ``message.timestamp.type``.
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
#: Values of ``compression.type`` (Kafka's ``BrokerCompressionType``), plus seglog's alias
#: ``none`` for ``uncompressed`` (the codec name); the alias is stored as ``uncompressed``.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_COMPRESSION_ALIASES = {"none": "uncompressed"}

# Kafka's compression level limits (GzipCompression, Lz4Compression, ZstdCompression).
GZIP_LEVEL_DEFAULT = -1  # java.util.zip.Deflater.DEFAULT_COMPRESSION
LZ4_LEVEL_MIN, LZ4_LEVEL_MAX, LZ4_LEVEL_DEFAULT = 1, 17, 9
ZSTD_LEVEL_MIN, ZSTD_LEVEL_MAX, ZSTD_LEVEL_DEFAULT = -131072, 22, 3

_MIB = 1024 * 1024

# ConfigDef's value types.
_INT, _LONG, _DOUBLE, _BOOLEAN, _STRING, _LIST = "int", "long", "double", "boolean", "string", "list"


def _cfg(kafka_name: str, kind: str, default: Any, *, at_least=None, at_most=None,
         choices=None, broker: bool = False, check=None) -> Any:
    """A dataclass field carrying its Kafka name, ConfigDef type and range as metadata."""
    if kind == _INT:
        at_least = INT32_MIN if at_least is None else at_least
        at_most = INT32_MAX if at_most is None else at_most
    elif kind == _LONG:
        at_least = INT64_MIN if at_least is None else at_least
        at_most = INT64_MAX if at_most is None else at_most
    meta = {"kafka": kafka_name, "kind": kind, "at_least": at_least, "at_most": at_most,
            "choices": choices, "broker": broker, "check": check}
    return field(default=default, metadata=meta)


def _check_gzip_level(value: int) -> str | None:
    # GzipCompression.LevelValidator: Deflater.DEFAULT_COMPRESSION (-1) or 1..9.
    if value == GZIP_LEVEL_DEFAULT or 1 <= value <= 9:
        return None
    return "Value must be between 1 and 9, or -1 (the default level)"


_THROTTLED_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")


def _check_throttled_replicas(value: tuple[str, ...]) -> str | None:
    # ThrottledReplicaListValidator: "*" alone, or partitionId:brokerId pairs.
    if "".join(value) == "*" or all(_THROTTLED_ENTRY.fullmatch(s.strip()) for s in value):
        return None
    return "Must be the wildcard (*) or a list of partitionId:brokerId pairs"


@dataclass(frozen=True)
class LogConfig:
    """Kafka's topic configuration for one partition log, validated, with Kafka's defaults.

    Field (Kafka name): default, range. Times are milliseconds, sizes bytes.

    * ``segment_bytes`` (segment.bytes): 1 GiB, >= 14. A segment rolls at this size.
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
      (message.timestamp.before.max.ms / after.max.ms): 2**63-1, >= 0. Allowed distance of a
      CreateTime timestamp before / after the broker's clock.
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
    * ``producer_id_expiration_ms`` (broker producer.id.expiration.ms): 1 day, >= 1. An idle
      producer id's state is dropped after this long.
    * ``cleaner_memory_bytes_max`` (broker log.cleaner.dedupe.buffer.size): 128 MiB,
      > 1 MiB (Kafka requires more than 1 MiB per cleaner thread). The compaction key map's
      budget.

    Build with ``LogConfig(retention_ms=1000)``, :meth:`from_kafka` or :meth:`from_dict`.
    Raises :class:`~seglog.errors.InvalidConfigError` for a value of the wrong type, out of
    range, or breaking a rule that spans fields (min compaction lag above max).
    """

    segment_bytes: int = _cfg("segment.bytes", _INT, 1024 * _MIB, at_least=14)
    segment_ms: int = _cfg("segment.ms", _LONG, 7 * 24 * 3600 * 1000, at_least=1)
    segment_jitter_ms: int = _cfg("segment.jitter.ms", _LONG, 0, at_least=0)
    segment_index_bytes: int = _cfg("segment.index.bytes", _INT, 10 * _MIB, at_least=4)
    index_interval_bytes: int = _cfg("index.interval.bytes", _INT, 4096, at_least=0)
    retention_ms: int = _cfg("retention.ms", _LONG, 7 * 24 * 3600 * 1000, at_least=-1)
    retention_bytes: int = _cfg("retention.bytes", _LONG, -1)
    flush_messages: int = _cfg("flush.messages", _LONG, INT64_MAX, at_least=1)
    flush_ms: int = _cfg("flush.ms", _LONG, INT64_MAX, at_least=0)
    file_delete_delay_ms: int = _cfg("file.delete.delay.ms", _LONG, 60000, at_least=0)
    min_cleanable_dirty_ratio: float = _cfg("min.cleanable.dirty.ratio", _DOUBLE, 0.5,
                                            at_least=0.0, at_most=1.0)
    delete_retention_ms: int = _cfg("delete.retention.ms", _LONG, 86400000, at_least=0)
    min_compaction_lag_ms: int = _cfg("min.compaction.lag.ms", _LONG, 0, at_least=0)
    max_compaction_lag_ms: int = _cfg("max.compaction.lag.ms", _LONG, INT64_MAX, at_least=1)
    max_message_bytes: int = _cfg("max.message.bytes", _INT, _MIB + 12, at_least=0)
    message_timestamp_type: str = _cfg("message.timestamp.type", _STRING, "CreateTime",
                                       choices=TIMESTAMP_TYPES)
    message_timestamp_before_max_ms: int = _cfg("message.timestamp.before.max.ms", _LONG,
                                                INT64_MAX, at_least=0)
    message_timestamp_after_max_ms: int = _cfg("message.timestamp.after.max.ms", _LONG,
                                               INT64_MAX, at_least=0)
    cleanup_policy: frozenset = _cfg("cleanup.policy", _LIST, frozenset({CLEANUP_POLICY_DELETE}),
                                     choices=tuple(sorted(CLEANUP_POLICIES)))
    preallocate: bool = _cfg("preallocate", _BOOLEAN, False)
    compression_type: str = _cfg("compression.type", _STRING, "producer",
                                 choices=COMPRESSION_TYPES)
    compression_gzip_level: int = _cfg("compression.gzip.level", _INT, GZIP_LEVEL_DEFAULT,
                                       check=_check_gzip_level)
    compression_lz4_level: int = _cfg("compression.lz4.level", _INT, LZ4_LEVEL_DEFAULT,
                                      at_least=LZ4_LEVEL_MIN, at_most=LZ4_LEVEL_MAX)
    compression_zstd_level: int = _cfg("compression.zstd.level", _INT, ZSTD_LEVEL_DEFAULT,
                                       at_least=ZSTD_LEVEL_MIN, at_most=ZSTD_LEVEL_MAX)
    min_insync_replicas: int = _cfg("min.insync.replicas", _INT, 1, at_least=1)
    unclean_leader_election_enable: bool = _cfg("unclean.leader.election.enable", _BOOLEAN, False)
    leader_replication_throttled_replicas: tuple = _cfg(
        "leader.replication.throttled.replicas", _LIST, (), check=_check_throttled_replicas)
    follower_replication_throttled_replicas: tuple = _cfg(
        "follower.replication.throttled.replicas", _LIST, (), check=_check_throttled_replicas)
    remote_storage_enable: bool = _cfg("remote.storage.enable", _BOOLEAN, False)
    local_retention_ms: int = _cfg("local.retention.ms", _LONG, -2, at_least=-2)
    local_retention_bytes: int = _cfg("local.retention.bytes", _LONG, -2, at_least=-2)
    remote_log_copy_disable: bool = _cfg("remote.log.copy.disable", _BOOLEAN, False)
    remote_log_delete_on_disable: bool = _cfg("remote.log.delete.on.disable", _BOOLEAN, False)
    producer_id_expiration_ms: int = _cfg("producer.id.expiration.ms", _INT, 86400000,
                                          at_least=1, broker=True)
    cleaner_memory_bytes_max: int = _cfg("log.cleaner.dedupe.buffer.size", _LONG, 128 * _MIB,
                                         at_least=_MIB + 1, broker=True)

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

# Topic configs of older Kafka versions that Kafka 4.0 removed; named so the error says why.
_REMOVED = {
    "message.format.version": "removed in Kafka 4.0; seglog writes RecordBatch v2 (magic 2) only",
    "message.timestamp.difference.max.ms": "removed in Kafka 4.0; use "
    "message.timestamp.before.max.ms and message.timestamp.after.max.ms",
    "message.downconversion.enable": "removed in Kafka 4.0; seglog never down-converts",
}


def _unknown(name: str, known: Iterable[str]) -> InvalidConfigError:
    """The error for an unknown name, suggesting the closest of ``known``."""
    if not isinstance(name, str):
        return InvalidConfigError(f"Configuration names are str, got {name!r}")
    if name in _REMOVED:
        return InvalidConfigError(f"Unknown configuration {name!r}: {_REMOVED[name]}")
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


# --- Kafka's string parsing (ConfigDef.parseType) ------------------------------------------------

_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# Double.parseDouble's decimal form (FloatingDecimal); hexadecimal floats are not supported.
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def _bad(f: dataclasses.Field, value: Any, why: str) -> InvalidConfigError:
    return InvalidConfigError(
        f"Invalid value {value!r} for configuration {f.metadata['kafka']}: {why}")


def _java_trim(text: str) -> str:
    # String.trim() strips every char <= U+0020, not Python's Unicode whitespace.
    return text.strip("".join(chr(c) for c in range(0x21)))


def _parse_kafka_value(f: dataclasses.Field, raw: Any) -> Any:
    """A Kafka config value (string or typed) -> the Python value of field ``f``."""
    kind = f.metadata["kind"]
    if not isinstance(raw, str):
        if kind == _LIST and isinstance(raw, (list, tuple, set, frozenset)):
            return raw
        if kind == _DOUBLE and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        return raw  # typed value: the constructor checks its type
    text = _java_trim(raw)
    if kind in (_INT, _LONG):
        if not _JAVA_INT.fullmatch(text):
            raise _bad(f, raw, f"Expected value to be a {'32' if kind == _INT else '64'}-bit "
                               "integer, but it was a string that is not one")
        value = int(text)
        lo, hi = (INT32_MIN, INT32_MAX) if kind == _INT else (INT64_MIN, INT64_MAX)
        if not lo <= value <= hi:
            raise _bad(f, raw, f"Not a number of type {kind.upper()}")
        return value
    if kind == _DOUBLE:
        if not _JAVA_DOUBLE.fullmatch(text):
            raise _bad(f, raw, "Not a number of type DOUBLE")
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    if kind == _BOOLEAN:
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise _bad(f, raw, "Expected value to be either true or false")
        return lowered == "true"
    if kind == _LIST:
        return () if not text else tuple(_LIST_SEPARATOR.split(text))
    return text


def _format_kafka_value(f: dataclasses.Field, value: Any) -> str:
    kind = f.metadata["kind"]
    if kind == _BOOLEAN:
        return "true" if value else "false"
    if kind == _LIST:
        return ",".join(sorted(value)) if isinstance(value, frozenset) else ",".join(value)
    if kind == _DOUBLE:
        return repr(float(value))
    return str(value)


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
    return check_int("now_ms", now_ms)

def _validate(f: dataclasses.Field, value: Any) -> Any:
    """Check ``value``'s type and range for field ``f``; return it normalised."""
    meta = f.metadata
    kind = meta["kind"]
    if kind in (_INT, _LONG):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(f, value, f"Expected an int, got {type(value).__name__}")
        value = int(value)
    elif kind == _DOUBLE:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(f, value, f"Expected a float, got {type(value).__name__}")
        value = float(value)
        if math.isnan(value):
            # Kafka's Range validator lets NaN through (every comparison is false); we don't.
            raise _bad(f, value, "Value must be a number, not NaN")
    elif kind == _BOOLEAN:
        if not isinstance(value, bool):
            raise _bad(f, value, f"Expected a bool, got {type(value).__name__}")
    elif kind == _STRING:
        if not isinstance(value, str):
            raise _bad(f, value, f"Expected a str, got {type(value).__name__}")
        value = _COMPRESSION_ALIASES.get(value, value) if f.name == "compression_type" else value
    elif kind == _LIST:
        value = _validate_list(f, value)

    at_least, at_most = meta["at_least"], meta["at_most"]
    if at_least is not None and value < at_least:
        raise _bad(f, value, f"Value must be at least {at_least}")
    if at_most is not None and value > at_most:
        raise _bad(f, value, f"Value must be no more than {at_most}")
    choices = meta["choices"]
    if choices is not None and kind == _STRING and value not in choices:
        raise _bad(f, value, f"String must be one of: {', '.join(choices)}")
    if meta["check"] is not None:
        why = meta["check"](value)
        if why:
            raise _bad(f, value, why)
    return value


def _validate_list(f: dataclasses.Field, value: Any) -> Any:
    if isinstance(value, str):
        text = _java_trim(value)
        items: Iterable[Any] = () if not text else _LIST_SEPARATOR.split(text)
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        raise _bad(f, value, f"Expected a list or a comma-separated str, got {type(value).__name__}")
    items = tuple(items)
    for item in items:
        if not isinstance(item, str):
            raise _bad(f, value, f"Expected list items to be str, got {type(item).__name__}")
    choices = f.metadata["choices"]
    if choices is not None:
        for item in items:
            if item not in choices:
                raise _bad(f, value, f"String must be one of: {', '.join(choices)}")
        return frozenset(items)  # cleanup.policy: a set of policies, order and repeats moot
    return items


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
