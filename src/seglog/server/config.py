"""The broker's configuration: Kafka's broker config names, defaults, types and parse rules.

:class:`BrokerConfig` is a read-only mapping from Kafka's broker config names
(``num.partitions``, ``log.retention.ms``, ``socket.request.max.bytes``, ...) to typed values
(int, bool, str, float, tuple for lists, None where Kafka's default is null), built from what a
user gives (``--config key=value``, a ``server.properties`` file, or a dict in Python) over
Kafka's defaults (``KafkaConfig``, ``ServerLogConfigs``, ``GroupCoordinatorConfig``,
``TransactionStateManagerConfig``, ``SocketServerConfigs``). Strings are parsed as Kafka's
``ConfigDef.parseType`` parses them; values are range-checked as ``ConfigDef`` validators do;
an unknown name is an :class:`~seglog.errors.InvalidConfigError` naming the closest known one.

Three settings come in several units, resolved as Kafka's ``KafkaConfig`` does, and the
mapping gives the resolved value under the finest name: ``log.retention.ms`` (else
``log.retention.minutes`` else ``log.retention.hours``), ``log.roll.ms`` (else
``log.roll.hours``), ``log.roll.jitter.ms`` (else ``log.roll.jitter.hours``); ``log.dirs``
(else ``log.dir``) likewise; :attr:`BrokerConfig.node_id` is ``node.id`` else ``broker.id``.
The ``log.*`` topic defaults become :meth:`BrokerConfig.log_config`, the
:class:`~seglog.storage.config.LogConfig` new topics get.

Some names are accepted so that Kafka's sample ``server.properties`` loads, and have no effect
here (threads, KRaft quorum): their entries say so (``effective=False``). ``zookeeper.connect``
makes the broker a member of a cluster (:mod:`seglog.cluster`); the ``replica.*`` and
``zookeeper.*`` settings act then.

Thread safety: a BrokerConfig is immutable.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

from ..errors import InvalidConfigError
from ..storage.config import INT32_MAX, INT64_MAX, LogConfig

__all__ = ["BrokerConfig", "ConfigDef", "CONFIG_DEFS", "LOG_CONFIG_SYNONYMS",
           "config_table_markdown", "parse_properties", "parse_config_args"]

_INT, _LONG, _SHORT, _DOUBLE, _BOOLEAN, _STRING, _LIST, _PASSWORD = (
    "int", "long", "short", "double", "boolean", "string", "list", "password")
_BOUNDS = {_INT: (-(2**31), INT32_MAX), _LONG: (-(2**63), INT64_MAX), _SHORT: (-(2**15), 2**15 - 1)}
_DEFAULT_LOG = LogConfig()


@dataclass(frozen=True)
class ConfigDef:
    """One broker config: Kafka ``name``, ConfigDef ``kind`` (int, long, short, double,
    boolean, string, list, password), Kafka's ``default`` (typed; None is Kafka's null),
    the allowed range ``at_least``/``at_most`` or ``choices``, ``doc``, and ``effective``:
    False when seglog accepts the name and ignores it (a setting of a multi-node or threaded
    Kafka broker)."""

    name: str
    kind: str
    default: Any
    doc: str
    at_least: Any = None
    at_most: Any = None
    choices: tuple | None = None
    effective: bool = True


def _d(name, kind, default, doc, **kw) -> ConfigDef:
    return ConfigDef(name, kind, default, doc, **kw)


_HOUR_MS = 3600 * 1000
#: Every broker config this broker accepts, by Kafka name.
CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in (
    # --- identity and listeners
    _d("broker.id", _INT, -1, "The broker's id (-1: node.id, else 1)."),
    _d("node.id", _INT, -1, "The node id (KRaft's name for broker.id; -1: broker.id)."),
    _d("listeners", _LIST, ("PLAINTEXT://:9092",),
       "Where to listen, as name://host:port; the first PLAINTEXT listener is used when the "
       "broker is not given a listen address."),
    _d("advertised.listeners", _LIST, None,
       "The address given to clients in Metadata; null: the listen address."),
    _d("listener.security.protocol.map", _STRING,
       "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", "Accepted; only PLAINTEXT is served.",
       effective=False),
    _d("inter.broker.listener.name", _STRING, None, "Accepted, unused (one node).",
       effective=False),
    _d("controller.listener.names", _STRING, None, "Accepted, unused (no KRaft quorum).",
       effective=False),
    _d("process.roles", _LIST, (), "Accepted, unused (no KRaft quorum).", effective=False),
    _d("controller.quorum.voters", _LIST, (), "Accepted, unused.", effective=False),
    _d("controller.quorum.bootstrap.servers", _LIST, (), "Accepted, unused.", effective=False),
    _d("zookeeper.connect", _STRING, None,
       "ZooKeeper's host:port[,host:port...][/chroot]: when set the broker is a member of "
       "the cluster kept there (docs/cluster.md); null: a single-node broker."),
    _d("zookeeper.session.timeout.ms", _INT, 18000,
       "The ZooKeeper session timeout: a broker silent this long is dead to the cluster.",
       at_least=1),
    _d("zookeeper.connection.timeout.ms", _INT, None,
       "How long the broker waits to connect to ZooKeeper at start (null: "
       "zookeeper.session.timeout.ms).", at_least=1),
    # --- topics
    _d("num.partitions", _INT, 1, "Partitions of an auto-created topic.", at_least=1),
    _d("default.replication.factor", _INT, 1,
       "Replication factor of a topic created without one (auto-created, or -1 in "
       "CreateTopics); a single-node broker refuses more than 1.", at_least=1),
    _d("auto.create.topics.enable", _BOOLEAN, True,
       "Create a topic on Metadata or Produce for a name that does not exist."),
    _d("delete.topic.enable", _BOOLEAN, True, "Allow DeleteTopics."),
    # --- log directories and the log.* topic defaults
    _d("log.dirs", _LIST, None, "The data directories (null: log.dir); the broker serves one."),
    _d("log.dir", _STRING, "/tmp/kafka-logs", "The data directory when log.dirs is null."),
    _d("log.retention.ms", _LONG, None,
       "Retention time (null: log.retention.minutes); -1 keeps forever.", at_least=-1),
    _d("log.retention.minutes", _INT, None, "Retention time in minutes (null: hours).",
       at_least=-1),
    _d("log.retention.hours", _INT, 168, "Retention time in hours.", at_least=-1),
    _d("log.retention.bytes", _LONG, -1, "Retention size per partition; -1: no limit."),
    _d("log.segment.bytes", _INT, _DEFAULT_LOG.segment_bytes, "Segment size.", at_least=14),
    _d("log.roll.ms", _LONG, None, "Roll a segment this old (null: log.roll.hours).",
       at_least=1),
    _d("log.roll.hours", _INT, 168, "Roll a segment this many hours old.", at_least=1),
    _d("log.roll.jitter.ms", _LONG, None, "Roll jitter (null: log.roll.jitter.hours).",
       at_least=0),
    _d("log.roll.jitter.hours", _INT, 0, "Roll jitter in hours.", at_least=0),
    _d("log.index.size.max.bytes", _INT, _DEFAULT_LOG.segment_index_bytes,
       "Largest offset or time index.", at_least=4),
    _d("log.index.interval.bytes", _INT, _DEFAULT_LOG.index_interval_bytes,
       "Bytes between index entries.", at_least=0),
    _d("log.flush.interval.messages", _LONG, INT64_MAX, "Fsync after this many records.",
       at_least=1),
    _d("log.flush.interval.ms", _LONG, None,
       "Fsync when the last flush is this old (null: log.flush.scheduler.interval.ms)."),
    _d("log.flush.scheduler.interval.ms", _LONG, INT64_MAX, "See log.flush.interval.ms."),
    _d("log.retention.check.interval.ms", _LONG, 300000,
       "How often retention, compaction and flush.ms run.", at_least=1),
    _d("log.segment.delete.delay.ms", _LONG, _DEFAULT_LOG.file_delete_delay_ms,
       "Delay before a deleted segment's files are removed.", at_least=0),
    _d("log.cleanup.policy", _LIST, ("delete",), "delete and/or compact.",
       choices=("compact", "delete")),
    _d("log.cleaner.enable", _BOOLEAN, True,
       "Accepted; compaction runs in the maintenance task for compacted topics.",
       effective=False),
    _d("log.cleaner.threads", _INT, 1, "Accepted; compaction runs on the maintenance task.",
       at_least=0, effective=False),
    _d("log.cleaner.dedupe.buffer.size", _LONG, _DEFAULT_LOG.cleaner_memory_bytes_max,
       "Compaction key map budget.", at_least=1024 * 1024 + 1),
    _d("log.cleaner.delete.retention.ms", _LONG, _DEFAULT_LOG.delete_retention_ms,
       "How long compaction keeps tombstones.", at_least=0),
    _d("log.cleaner.min.compaction.lag.ms", _LONG, 0, "Minimum compaction lag.", at_least=0),
    _d("log.cleaner.max.compaction.lag.ms", _LONG, INT64_MAX, "Maximum compaction lag.",
       at_least=1),
    _d("log.cleaner.min.cleanable.ratio", _DOUBLE, 0.5, "Dirty ratio that triggers compaction.",
       at_least=0.0, at_most=1.0),
    _d("log.preallocate", _BOOLEAN, False, "Preallocate segment files."),
    _d("log.message.timestamp.type", _STRING, "CreateTime", "CreateTime or LogAppendTime.",
       choices=("CreateTime", "LogAppendTime")),
    _d("log.message.timestamp.before.max.ms", _LONG,
       _DEFAULT_LOG.message_timestamp_before_max_ms,
       "Largest distance of a CreateTime timestamp before the broker's clock.", at_least=0),
    _d("log.message.timestamp.after.max.ms", _LONG, _DEFAULT_LOG.message_timestamp_after_max_ms,
       "Largest distance of a CreateTime timestamp after the broker's clock.", at_least=0),
    _d("compression.type", _STRING, "producer", "The codec topics store with.",
       choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _d("compression.gzip.level", _INT, _DEFAULT_LOG.compression_gzip_level, "gzip level."),
    _d("compression.lz4.level", _INT, _DEFAULT_LOG.compression_lz4_level, "lz4 level.",
       at_least=1, at_most=17),
    _d("compression.zstd.level", _INT, _DEFAULT_LOG.compression_zstd_level, "zstd level.",
       at_least=-131072, at_most=22),
    _d("message.max.bytes", _INT, _DEFAULT_LOG.max_message_bytes, "Largest record batch.",
       at_least=0),
    _d("min.insync.replicas", _INT, 1, "acks=all needs this many in-sync replicas "
       "(in a cluster: NOT_ENOUGH_REPLICAS below it).", at_least=1),
    _d("unclean.leader.election.enable", _BOOLEAN, False,
       "In a cluster, elect a replica outside the ISR when no ISR replica is alive "
       "(committed records may be lost)."),
    _d("num.recovery.threads.per.data.dir", _INT, 2, "Accepted; recovery is sequential.",
       at_least=1, effective=False),
    # --- sockets and requests
    _d("socket.request.max.bytes", _INT, 104857600,
       "Largest request frame; a larger (or negative) size closes the connection.",
       at_least=1),
    _d("socket.send.buffer.bytes", _INT, 102400,
       "SO_SNDBUF of connections, applied when set (unset or -1: the OS's autotuned size)."),
    _d("socket.receive.buffer.bytes", _INT, 102400,
       "SO_RCVBUF of connections, applied when set (unset or -1: the OS's autotuned size)."),
    _d("socket.listen.backlog.size", _INT, 50, "The listen backlog.", at_least=1),
    _d("max.connections", _INT, INT32_MAX,
       "Most client connections at once; more are closed when accepted.", at_least=0),
    _d("max.connections.per.ip", _INT, INT32_MAX,
       "Most connections from one address; more are closed when accepted.", at_least=0),
    _d("connections.max.idle.ms", _LONG, 600000,
       "Close a connection with no request in flight that was idle this long."),
    _d("queued.max.requests", _INT, 500,
       "Requests read from one connection and not yet answered before the broker stops "
       "reading it (back-pressure).", at_least=1),
    _d("num.network.threads", _INT, 3, "Accepted; one event loop serves every connection.",
       at_least=1, effective=False),
    _d("num.io.threads", _INT, 8, "Accepted; handlers run on the event loop.", at_least=1,
       effective=False),
    _d("fetch.max.bytes", _INT, 57671680, "Largest Fetch response.", at_least=1024),
    # --- replication (a cluster member: zookeeper.connect set)
    _d("replica.lag.time.max.ms", _LONG, 30000,
       "A follower that has not caught up with its leader's log end for this long leaves the "
       "ISR (checked every half of it).", at_least=1),
    _d("replica.fetch.wait.max.ms", _INT, 500,
       "The longest a follower's fetch waits at its leader for records.", at_least=0),
    _d("replica.fetch.min.bytes", _INT, 1,
       "Bytes a follower's fetch waits for before its leader answers.", at_least=0),
    _d("replica.fetch.max.bytes", _INT, 1048576,
       "Bytes a follower fetches per partition (at least one batch).", at_least=0),
    _d("replica.fetch.response.max.bytes", _INT, 10485760,
       "Bytes a follower fetches per request (at least one batch).", at_least=0),
    _d("replica.fetch.backoff.ms", _INT, 1000,
       "A follower waits this long after a failed fetch before the next.", at_least=0),
    _d("replica.socket.timeout.ms", _INT, 30000,
       "A follower's bound on connecting to its leader and on each request's round trip.",
       at_least=1),
    _d("replica.high.watermark.checkpoint.interval.ms", _LONG, 5000,
       "How often the high watermarks are written to replication-offset-checkpoint.",
       at_least=1),
    # --- groups
    _d("group.initial.rebalance.delay.ms", _INT, 3000,
       "Wait this long for more members before the first rebalance of an empty group."),
    _d("group.min.session.timeout.ms", _INT, 6000, "Smallest session timeout allowed."),
    _d("group.max.session.timeout.ms", _INT, 1800000, "Largest session timeout allowed."),
    _d("group.max.size", _INT, INT32_MAX, "Most members of a group.", at_least=1),
    _d("offsets.retention.minutes", _INT, 10080,
       "Committed offsets of an empty group expire after this long.", at_least=1),
    _d("offsets.retention.check.interval.ms", _LONG, 600000,
       "How often expired offsets are removed.", at_least=1),
    _d("offsets.topic.num.partitions", _INT, 50, "Partitions of __consumer_offsets.",
       at_least=1),
    _d("offsets.topic.replication.factor", _SHORT, 3,
       "Replication factor of __consumer_offsets in a cluster (group coordinators in a "
       "cluster are not served yet).", at_least=1, effective=False),
    _d("offsets.topic.segment.bytes", _INT, 104857600, "Segment size of __consumer_offsets.",
       at_least=1, effective=False),
    _d("offsets.commit.timeout.ms", _INT, 5000, "Accepted; commits are written at once.",
       at_least=1, effective=False),
    _d("offset.metadata.max.bytes", _INT, 4096, "Largest commit metadata string."),
    # --- transactions and producer ids
    _d("transaction.state.log.num.partitions", _INT, 50, "Partitions of __transaction_state.",
       at_least=1),
    _d("transaction.state.log.replication.factor", _SHORT, 3,
       "Replication factor of __transaction_state in a cluster (transaction coordinators in "
       "a cluster are not served yet).", at_least=1, effective=False),
    _d("transaction.state.log.min.isr", _INT, 2,
       "min.insync.replicas of __transaction_state in a cluster (not served yet).",
       at_least=1, effective=False),
    _d("transaction.state.log.segment.bytes", _INT, 104857600,
       "Segment size of __transaction_state.", at_least=1, effective=False),
    _d("transaction.max.timeout.ms", _INT, 900000, "Largest transaction timeout a producer "
       "may ask for.", at_least=1),
    _d("transactional.id.expiration.ms", _INT, 604800000,
       "A transactional id idle this long is forgotten.", at_least=1),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", _INT, 10000,
       "How often transactions past their timeout are aborted.", at_least=1),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", _INT, 3600000,
       "How often expired transactional ids are removed.", at_least=1, effective=False),
    _d("producer.id.expiration.ms", _INT, 86400000,
       "An idle producer id's state is dropped after this long.", at_least=1),
    _d("producer.id.expiration.check.interval.ms", _INT, 600000,
       "Accepted; idle producer ids are dropped as their partitions are written and "
       "maintained.", at_least=1, effective=False),
    # --- misc
    _d("auto.leader.rebalance.enable", _BOOLEAN, True,
       "In a cluster the controller moves leadership back to each partition's preferred "
       "replica when a broker's share of non-preferred leaders passes "
       "leader.imbalance.per.broker.percentage (checked every "
       "leader.imbalance.check.interval.seconds)."),
    _d("leader.imbalance.check.interval.seconds", _LONG, 300,
       "How often the controller checks the leader imbalance (auto.leader.rebalance.enable).",
       at_least=1),
    _d("leader.imbalance.per.broker.percentage", _INT, 10,
       "The share of a broker's partitions led elsewhere above which the controller "
       "rebalances.", at_least=0, at_most=100),
    _d("group.coordinator.rebalance.protocols", _LIST, ("classic", "consumer", "streams"),
       "Accepted; the classic protocol is served.", effective=False),
    _d("share.coordinator.state.topic.replication.factor", _SHORT, 3, "Accepted.",
       effective=False),
    _d("share.coordinator.state.topic.min.isr", _SHORT, 2, "Accepted.", effective=False),
)}

#: Broker config name -> the topic config (:class:`LogConfig` Kafka name) it is the default of
#: (Kafka's ``ServerTopicConfigSynonyms``). The retention and roll names are resolved first.
LOG_CONFIG_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.bytes": "retention.bytes",
    "log.retention.ms": "retention.ms",
    "message.max.bytes": "max.message.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleanup.policy": "cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "log.preallocate": "preallocate",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "producer.id.expiration.ms": "producer.id.expiration.ms",
    "log.cleaner.dedupe.buffer.size": "log.cleaner.dedupe.buffer.size",
}

# Kafka names removed in 4.0 that old server.properties files still carry: say why.
_REMOVED = {
    "log.message.format.version": "removed in Kafka 4.0 (RecordBatch v2 only)",
    "inter.broker.protocol.version": "removed in Kafka 4.0",
    "log.message.timestamp.difference.max.ms": "removed in Kafka 4.0; use "
    "log.message.timestamp.before.max.ms and log.message.timestamp.after.max.ms",
    "log.message.downconversion.enable": "removed in Kafka 4.0",
}

_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def _unknown(name: Any) -> InvalidConfigError:
    if not isinstance(name, str):
        return InvalidConfigError(f"Broker config names are str, got {name!r}")
    if name in _REMOVED:
        return InvalidConfigError(f"Unknown broker config {name!r}: {_REMOVED[name]}")
    close = difflib.get_close_matches(name, list(CONFIG_DEFS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return InvalidConfigError(f"Unknown broker config {name!r}{hint}")


def _parse(d: ConfigDef, raw: Any) -> Any:
    """ConfigDef.parseType for one value: a string is parsed, a typed value checked."""
    def bad(why: str) -> InvalidConfigError:
        return InvalidConfigError(f"Invalid value {raw!r} for configuration {d.name}: {why}")

    value: Any
    if raw is None:
        if d.default is None:
            return None
        raise bad("must not be null")
    kind = d.kind
    if kind in (_INT, _LONG, _SHORT):
        if isinstance(raw, str):
            text = raw.strip()
            if not _JAVA_INT.fullmatch(text):
                raise bad(f"Not a number of type {kind.upper()}")
            value = int(text)
        elif isinstance(raw, bool) or not isinstance(raw, int):
            raise bad(f"Expected value to be a {kind} number")
        else:
            value = int(raw)
        lo, hi = _BOUNDS[kind]
        if not lo <= value <= hi:
            raise bad(f"Not a number of type {kind.upper()}")
    elif kind == _DOUBLE:
        if isinstance(raw, str):
            text = raw.strip()
            if not _JAVA_DOUBLE.fullmatch(text):
                raise bad("Not a number of type DOUBLE")
            value = float(text.rstrip("fFdD").replace("Infinity", "inf"))
        elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise bad("Expected value to be a double")
        else:
            value = float(raw)
    elif kind == _BOOLEAN:
        if isinstance(raw, str):
            text = raw.strip().lower()
            if text not in ("true", "false"):
                raise bad("Expected value to be either true or false")
            value = text == "true"
        elif isinstance(raw, bool):
            value = raw
        else:
            raise bad("Expected value to be either true or false")
    elif kind == _LIST:
        if isinstance(raw, str):
            text = raw.strip()
            value = tuple(_LIST_SEPARATOR.split(text)) if text else ()
        elif isinstance(raw, (list, tuple, set, frozenset)) and all(
                isinstance(v, str) for v in raw):
            value = tuple(v.strip() for v in raw)
        else:
            raise bad("Expected a comma separated list")
        if d.choices is not None:
            for item in value:
                if item not in d.choices:
                    raise bad(f"String must be one of: {', '.join(d.choices)}")
        return value
    else:  # string, password
        if not isinstance(raw, str):
            raise bad("Expected value to be a string")
        value = raw.strip()
        if d.choices is not None and value not in d.choices:
            raise bad(f"String must be one of: {', '.join(d.choices)}")
        return value
    if d.at_least is not None and value < d.at_least:
        raise bad(f"Value must be at least {d.at_least}")
    if d.at_most is not None and value > d.at_most:
        raise bad(f"Value must be no more than {d.at_most}")
    return value


class BrokerConfig(Mapping[str, Any]):
    """Kafka's broker configs by name with typed values: ``BrokerConfig({"num.partitions":
    "3"})`` (strings parsed as Kafka parses them, typed values accepted), Kafka's defaults for
    the rest. Raises :class:`~seglog.errors.InvalidConfigError` for an unknown name (with the
    closest known name) or a bad value, and when ``log.retention.*``/``log.roll.*`` resolve to
    an invalid :class:`LogConfig`.

    ``config[name]`` is the effective value (see the module docstring for the names resolved
    from several units); :attr:`overrides` is what was given, typed.
    """

    def __init__(self, configs: Mapping[str, Any] | None = None):
        overrides: dict[str, Any] = {}
        for name, raw in (configs or {}).items():
            d = CONFIG_DEFS.get(name)
            if d is None:
                raise _unknown(name)
            overrides[name] = _parse(d, raw)
        self._overrides = overrides
        values = {name: d.default for name, d in CONFIG_DEFS.items()}
        values.update(overrides)
        values["log.retention.ms"] = _first(
            values["log.retention.ms"],
            None if values["log.retention.minutes"] is None
            else values["log.retention.minutes"] * 60000,
            values["log.retention.hours"] * _HOUR_MS)
        if values["log.retention.ms"] < -1:
            # Kafka: a negative retention in any unit means "forever".
            values["log.retention.ms"] = -1
        values["log.roll.ms"] = _first(values["log.roll.ms"], values["log.roll.hours"] * _HOUR_MS)
        values["log.roll.jitter.ms"] = _first(values["log.roll.jitter.ms"],
                                              values["log.roll.jitter.hours"] * _HOUR_MS)
        values["log.dirs"] = _first(values["log.dirs"], (values["log.dir"],))
        values["log.flush.interval.ms"] = _first(values["log.flush.interval.ms"],
                                                 values["log.flush.scheduler.interval.ms"])
        if values["replica.fetch.wait.max.ms"] > values["replica.lag.time.max.ms"]:
            # KafkaConfig.validateValues: a follower's long poll must not outlast the lag
            # that takes it out of the ISR.
            raise InvalidConfigError("replica.fetch.wait.max.ms should always be less than or "
                                     "equal to replica.lag.time.max.ms to prevent frequent "
                                     "changes in ISR")
        if values["replica.socket.timeout.ms"] < values["replica.fetch.wait.max.ms"]:
            raise InvalidConfigError("replica.socket.timeout.ms should always be at least "
                                     "replica.fetch.wait.max.ms to prevent unnecessary socket "
                                     "timeouts")
        if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
            raise InvalidConfigError("group.min.session.timeout.ms must not be above "
                                     "group.max.session.timeout.ms")
        self._values = values
        self._log_config = self._make_log_config()

    @classmethod
    def from_sources(cls, *, file_text: str | None = None,
                     args: Iterable[str] = (), configs: Mapping[str, Any] | None = None
                     ) -> "BrokerConfig":
        """Build from a ``server.properties`` text (``file_text``), then ``key=value``
        ``args`` (``--config``), then ``configs``; later sources win."""
        merged: dict[str, Any] = {}
        if file_text is not None:
            merged.update(parse_properties(file_text))
        merged.update(parse_config_args(args))
        merged.update(configs or {})
        return cls(merged)

    def _make_log_config(self) -> LogConfig:
        topic = {topic_name: _to_log_value(self._values[broker_name])
                 for broker_name, topic_name in LOG_CONFIG_SYNONYMS.items()
                 if not self.is_default(broker_name)}
        try:
            return LogConfig.from_kafka(topic)
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"broker log defaults: {exc}") from None

    def log_config(self) -> LogConfig:
        """The :class:`LogConfig` a new topic gets before its own overrides: Kafka's topic
        defaults as this broker's ``log.*`` (and synonym) settings set them."""
        return self._log_config

    @property
    def overrides(self) -> dict[str, Any]:
        """The settings given (typed), without defaults."""
        return dict(self._overrides)

    @property
    def cluster_mode(self) -> bool:
        """Whether the broker is a cluster member (``zookeeper.connect`` set)."""
        return bool(self._values["zookeeper.connect"])

    @property
    def node_id(self) -> int | None:
        """``node.id``, else ``broker.id``, else None (unset: the data directory's)."""
        for name in ("node.id", "broker.id"):
            if self._values[name] >= 0:
                return self._values[name]
        return None

    def is_default(self, name: str) -> bool:
        """Whether ``name`` was left at Kafka's default."""
        if name not in CONFIG_DEFS:
            raise _unknown(name)
        return name not in self._overrides and not any(
            n in self._overrides for n in _RESOLVED.get(name, ()))

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"BrokerConfig({self._overrides!r})"


# Names whose value is resolved from others (the name, then the coarser units).
_RESOLVED = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


def _to_log_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- Java properties and --config ---------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterator[str]:
    """java.util.Properties' logical lines: comments and blank lines dropped, a line ending
    in an odd number of backslashes continued on the next (its leading whitespace dropped)."""
    pending: str | None = None
    for physical in text.splitlines():
        line = physical.lstrip(" \t\f") if pending is not None else physical.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            n = text[i + 1]
            if n == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2:i + 6], 16)))
                except ValueError:
                    raise InvalidConfigError(f"Malformed \\uxxxx encoding in {text!r}") from None
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        if c == "\\":
            i += 1  # a lone trailing backslash is dropped, as Properties.load does
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text (``server.properties``) as ``java.util.Properties.load``:
    ``#`` and ``!`` comment lines, ``key=value``, ``key:value`` or ``key value``, backslash
    escapes (``\\t``, ``\\n``, ``\\uXXXX``, escaped separators), a trailing backslash
    continuing the line. Later keys win. Values are the raw strings."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        key_end = len(line)
        value_start = len(line)
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:":
                key_end = i
                value_start = i + 1
                break
            if c in " \t\f":
                key_end = i
                j = i
                while j < len(line) and line[j] in " \t\f":
                    j += 1
                if j < len(line) and line[j] in "=:":
                    j += 1
                value_start = j
                break
            i += 1
        key = _unescape(line[:key_end])
        value = _unescape(line[value_start:].lstrip(" \t\f"))
        out[key] = value
    return out


def parse_config_args(args: Iterable[str]) -> dict[str, str]:
    """``["num.partitions=3", ...]`` (the ``--config`` arguments) -> ``{name: value}``;
    InvalidConfigError for an argument without ``=``."""
    out: dict[str, str] = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if not sep or not name.strip():
            raise InvalidConfigError(f"--config takes key=value, got {arg!r}")
        out[name.strip()] = value
    return out


def _format_default(d: ConfigDef) -> str:
    value = d.default
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value) if value else '""'
    if value == INT32_MAX:
        return "2147483647"
    if value == INT64_MAX:
        return "9223372036854775807"
    return str(value)


def config_table_markdown() -> str:
    """The Markdown table of every broker config :class:`BrokerConfig` accepts (name, type,
    Kafka's default, what it does here) that ``docs/server.md`` carries (a test keeps the
    two equal)."""
    lines = ["| Name | Type | Default | Effect |", "|---|---|---|---|"]
    for name in sorted(CONFIG_DEFS):
        d = CONFIG_DEFS[name]
        effect = d.doc if d.effective else f"{d.doc} (no effect here)"
        if name in LOG_CONFIG_SYNONYMS:
            effect += f" Default of topic config `{LOG_CONFIG_SYNONYMS[name]}`."
        effect = effect.replace("|", "\\|")
        lines.append(f"| `{name}` | {d.kind} | `{_format_default(d)}` | {effect} |")
    return "\n".join(lines) + "\n"
