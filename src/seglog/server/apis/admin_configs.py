"""Config resources as Kafka's DescribeConfigs and the AlterConfigs APIs see them: a topic's
overrides over the broker's topic defaults, and the broker's dynamic configs (per broker and
cluster-wide default) over its static ones, persisted in the data directory.

Kafka keeps dynamic configs in its metadata log; seglog keeps them in
``<data dir>/seglog-broker-configs.json`` (replaced atomically), so that a restart keeps them.
A topic's overrides are what differs from the broker's topic defaults
(:meth:`BrokerConfig.log_config` of the effective config, which the Store holds as
``topic_config_defaults``), plus the overrides a client set explicitly that still hold (kept
by topic id in the same file: Kafka shows an override equal to the default as an override).

Config sources and types are Kafka's ``DescribeConfigsResponse.ConfigSource`` and
``ConfigType`` ids; the synonyms are Kafka's ``ServerTopicConfigSynonyms`` and
``DynamicBrokerConfig.brokerConfigSynonyms``, listed as ``ConfigHelper.configSynonyms`` lists
them.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping

from ...config_table import BROKER_CONFIGS, TOPIC_CONFIGS, topic_key
from ...configdef import BOTH, CLUSTER_WIDE, format_value, parse_value
from ...errors import CorruptCheckpointError, InvalidConfigError
from ...storage import checkpoints
from ...storage.config import TOPIC_CONFIG_NAMES, LogConfig
from ..config import CONFIG_DEFS, BrokerConfig

__all__ = ["CLUSTER_MIN_ISR", "DYNAMIC_BROKER_CONFIGS", "DYNAMIC_CONFIGS_FILE", "DynamicConfigs",
           "SOURCE_TOPIC", "SOURCE_DYNAMIC_BROKER", "SOURCE_DYNAMIC_DEFAULT", "SOURCE_STATIC",
           "SOURCE_DEFAULT", "TOPIC_BROKER_SYNONYMS", "broker_synonyms", "config_type_id",
           "format_value", "topic_config_from", "topic_config_kind", "topic_overrides",
           "topic_synonyms"]

#: The cluster-level dynamic default every Kafka 4.4 cluster has (see DynamicConfigs).
CLUSTER_MIN_ISR = "min.insync.replicas"
#: seglog's file of dynamic broker configs in the data directory.
DYNAMIC_CONFIGS_FILE = "seglog-broker-configs.json"
_FILE_VERSION = 0

# DescribeConfigsResponse.ConfigSource ids.
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC = 4
SOURCE_DEFAULT = 5

# DescribeConfigsResponse.ConfigType ids by ConfigDef kind.
_TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
             "list": 7, "class": 8, "password": 9}

#: Topic config -> its broker synonyms, highest priority first (the table's synonyms:
#: Kafka's ``ServerTopicConfigSynonyms``), for the topic configs seglog implements.
TOPIC_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    name: key.synonyms or ((name,) if key.scope == BOTH else ())
    for name, key in TOPIC_CONFIGS.items() if name in TOPIC_CONFIG_NAMES}

# DynamicBrokerConfig.brokerConfigSynonyms: the unit variants of one setting, which are the
# topic configs' synonym lists of more than one name (log.roll.ms, log.roll.hours, ...).
_UNIT_GROUPS = tuple(names for names in TOPIC_BROKER_SYNONYMS.values() if len(names) > 1)

#: Broker configs a client may change at run time: those seglog takes that Kafka lets a
#: client set per broker and as the cluster-wide default (the topic defaults, the
#: cleaner's, connection limits, thread counts: accepted, no effect). Kafka's per-broker-only
#: ones (listeners and their security map) cannot change while seglog runs.
DYNAMIC_BROKER_CONFIGS = frozenset(
    name for name, key in CONFIG_DEFS.items() if key.dynamic == CLUSTER_WIDE)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's ``brokerConfigSynonyms(name)``: the unit variants of a broker setting, finest
    first, or ``(name,)``."""
    for group in _UNIT_GROUPS:
        if name in group:
            return group
    return (name,)


def config_type_id(kind: str) -> int:
    """The ConfigType id of a ConfigDef kind (0, UNKNOWN, for others)."""
    return _TYPE_IDS.get(kind, 0)


def topic_config_kind(name: str) -> str:
    """The ConfigDef type of topic config ``name``."""
    return TOPIC_CONFIGS[name].type


def topic_overrides(config: LogConfig, defaults: LogConfig) -> dict[str, str]:
    """The topic configs of ``config`` that differ from ``defaults`` (the topic's overrides),
    as Kafka names with string values."""
    mine = config.to_kafka(topic_only=True)
    base = defaults.to_kafka(topic_only=True)
    return {name: value for name, value in mine.items() if base.get(name) != value}


def topic_config_from(defaults: LogConfig, overrides: Mapping[str, Any]) -> LogConfig:
    """``defaults`` with ``overrides`` (topic config names, Kafka string values) applied.
    Raises :class:`InvalidConfigError` naming an unknown name (Kafka's ``Unknown topic config
    name``), a Kafka topic config seglog does not implement, or a bad value (in Kafka's
    words: :func:`seglog.configdef.parse_value`)."""
    for name, value in overrides.items():
        parse_value(topic_key(name, suggest=False), value)
    return LogConfig.from_kafka({**defaults.to_kafka(), **overrides})


class DynamicConfigs:
    """The broker's dynamic configs: ``per_broker`` and ``cluster_default`` (Kafka names to
    the strings a client set), over the static ``static`` :class:`BrokerConfig`, and the
    explicit topic overrides; persisted in :data:`DYNAMIC_CONFIGS_FILE` under ``data_dir``.
    Used on the event loop thread only."""

    def __init__(self, data_dir: str, static: BrokerConfig):
        self.path = os.path.join(data_dir, DYNAMIC_CONFIGS_FILE)
        self.static = static
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        #: Topic id -> the overrides a client set explicitly (an override equal to the
        #: broker's default is still one, as in Kafka), normalised as LogConfig writes them.
        self.topic_overrides: dict[str, dict[str, str]] = {}
        #: Client-metrics subscriptions (KIP-714): name -> the configs set (never empty).
        self.client_metrics: dict[str, dict[str, str]] = {}
        self._load()
        self.effective = self.merged(self.per_broker, self.cluster_default)

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            # A new cluster: Kafka 4.4's controller records a cluster-level
            # min.insync.replicas (the static value) when it bootstraps with ELR enabled,
            # and DescribeConfigs shows it as a dynamic default from then on.
            self.cluster_default = {
                CLUSTER_MIN_ISR: str(self.static[CLUSTER_MIN_ISR])}
            return
        except (ValueError, RecursionError) as e:
            raise CorruptCheckpointError(f"{self.path} is not valid JSON: {e}",
                                         path=self.path) from None

        def strings(key: str) -> dict[str, str]:
            value = data.get(key, {})
            if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                raise CorruptCheckpointError(f"{self.path}: {key} must map names to strings",
                                             path=self.path)
            return value

        if not isinstance(data, dict) or data.get("version") != _FILE_VERSION:
            raise CorruptCheckpointError(f"{self.path}: unknown format", path=self.path)
        self.per_broker = strings("broker")
        self.cluster_default = strings("cluster_default")
        explicit = data.get("topic_overrides", {})
        if not isinstance(explicit, dict):
            raise CorruptCheckpointError(f"{self.path}: topic_overrides must be an object",
                                         path=self.path)
        self.topic_overrides = {}
        for topic_id, overrides in explicit.items():
            if not isinstance(overrides, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in overrides.items()):
                raise CorruptCheckpointError(f"{self.path}: topic_overrides of {topic_id!r} "
                                             "must map names to strings", path=self.path)
            self.topic_overrides[str(topic_id)] = dict(overrides)
        subscriptions = data.get("client_metrics", {})
        if not isinstance(subscriptions, dict):
            raise CorruptCheckpointError(f"{self.path}: client_metrics must be an object",
                                         path=self.path)
        self.client_metrics = {}
        for name, values in subscriptions.items():
            if not isinstance(values, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
                raise CorruptCheckpointError(f"{self.path}: client_metrics of {name!r} "
                                             "must map names to strings", path=self.path)
            if values:
                self.client_metrics[str(name)] = dict(values)
        try:
            self.merged(self.per_broker, self.cluster_default)
        except InvalidConfigError as e:
            raise CorruptCheckpointError(f"{self.path}: {e}", path=self.path) from None

    def merged(self, per_broker: Mapping[str, str],
               cluster_default: Mapping[str, str]) -> BrokerConfig:
        """The effective :class:`BrokerConfig` for these dynamic layers over the static one
        (per broker wins over the cluster default, which wins over static). Raises
        :class:`InvalidConfigError` for an unknown name or a bad value."""
        return BrokerConfig({**self.static.given, **cluster_default, **per_broker})

    def save(self, live_topic_ids: set[str] | None = None) -> None:
        """Write the dynamic configs and the explicit topic overrides (of the topics in
        ``live_topic_ids`` when given) durably (write-temp, fsync, rename)."""
        if live_topic_ids is not None:
            self.topic_overrides = {k: v for k, v in self.topic_overrides.items()
                                    if k in live_topic_ids and v}
        text = json.dumps({"version": _FILE_VERSION, "broker": self.per_broker,
                           "cluster_default": self.cluster_default,
                           "topic_overrides": self.topic_overrides,
                           "client_metrics": self.client_metrics}, indent=1, sort_keys=True)
        checkpoints.atomic_write_bytes(self.path, (text + "\n").encode("utf-8"))

    def overrides_of(self, topic_id: str, config: LogConfig,
                     defaults: LogConfig) -> dict[str, str]:
        """The overrides of topic ``topic_id`` whose config is ``config``: every value that
        differs from ``defaults``, plus those set explicitly that still hold (a value changed
        by other means than the admin APIs ends an explicit override)."""
        current = config.to_kafka(topic_only=True)
        out = topic_overrides(config, defaults)
        for name, value in self.topic_overrides.get(topic_id, {}).items():
            if current.get(name) == value:
                out[name] = value
        return out

    def set_explicit(self, topic_id: str, config: LogConfig, names: Iterable[str]) -> None:
        """Record ``names`` as the explicit overrides of topic ``topic_id`` (with their values
        in ``config``); call :meth:`save` after."""
        current = config.to_kafka(topic_only=True)
        self.topic_overrides[topic_id] = {n: current[n] for n in names if n in current}

    def static_value(self, name: str) -> Any:
        """The static value of broker config ``name`` when it was set (not Kafka's default),
        else None."""
        overrides = self.static.overrides
        return overrides.get(name)

    def layers(self, name: str) -> list[tuple[Any, int]]:
        """``[(value, source), ...]`` of broker config ``name`` in Kafka's order: dynamic per
        broker, dynamic cluster default, static, Kafka's default (only the layers that have
        a value)."""
        out: list[tuple[Any, int]] = []
        if name in self.per_broker:
            out.append((self.per_broker[name], SOURCE_DYNAMIC_BROKER))
        if name in self.cluster_default:
            out.append((self.cluster_default[name], SOURCE_DYNAMIC_DEFAULT))
        static = self.static_value(name)
        if static is not None:
            out.append((static, SOURCE_STATIC))
        d = BROKER_CONFIGS.get(name)
        if d is not None and d.default is not None and d.has_default:
            # Kafka's default, also of the synonyms seglog does not take
            # (log.local.retention.ms), shown as Kafka shows them.
            out.append((d.default, SOURCE_DEFAULT))
        return out

    def synonyms(self, name: str, *, per_broker: bool = True) -> list[tuple[str, str | None, int]]:
        """Kafka's ``ConfigHelper.configSynonyms(name, brokerConfigSynonyms(name))``:
        ``[(synonym name, value, source)]``, by source then by synonym order, dropping those
        before ``name`` itself; with ``per_broker=False`` (the cluster-default resource) only
        the dynamic default ones."""
        names = broker_synonyms(name)
        out: list[tuple[str, str | None, int]] = []
        for source in (SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC,
                       SOURCE_DEFAULT):
            for synonym in names:
                for value, found in self.layers(synonym):
                    if found == source:
                        kind = BROKER_CONFIGS[synonym].type
                        out.append((synonym, value if isinstance(value, str)
                                    else format_value(kind, value), source))
        while out and out[0][0] != name:
            out.pop(0)
        if not per_broker:
            out = [s for s in out if s[2] == SOURCE_DYNAMIC_DEFAULT]
        return out


def topic_synonyms(dynamic: DynamicConfigs, name: str) -> list[tuple[str, str | None, int]]:
    """The broker synonyms of topic config ``name`` (Kafka lists those of its
    highest-priority broker synonym only)."""
    names = TOPIC_BROKER_SYNONYMS.get(name)
    if not names:
        return []
    return dynamic.synonyms(names[0])

