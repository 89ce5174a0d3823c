"""The broker's configuration: Kafka's broker configs by name, read from what a user gives.

:class:`BrokerConfig` is a read-only mapping from Kafka's broker config names
(``num.partitions``, ``log.retention.ms``, ``socket.request.max.bytes``, ...) to typed values
(int, bool, str, float, tuple for lists, None where Kafka's default is null or Kafka has
none), built from what a user gives (``--config key=value``, a ``server.properties`` file, or
a dict in Python) over Kafka 4.4's defaults. Every name, type, default and validator comes
from the one config table (:mod:`seglog.config_table`); strings are parsed as Kafka's
``ConfigDef.parseType`` parses them (:func:`seglog.configdef.parse_value`). An unknown name
is an :class:`~seglog.errors.InvalidConfigError` naming the closest known one, and a Kafka
broker config seglog does not implement is refused by name (``seglog serve`` does not start).

Three settings come in several units, resolved as Kafka's ``KafkaConfig`` does, and the
mapping gives the resolved value under the finest name: ``log.retention.ms`` (else
``log.retention.minutes`` else ``log.retention.hours``), ``log.roll.ms`` (else
``log.roll.hours``), ``log.roll.jitter.ms`` (else ``log.roll.jitter.hours``); ``log.dirs``
(else ``log.dir``) likewise; :attr:`BrokerConfig.node_id` is ``node.id`` else ``broker.id``.
The topic configs' broker synonyms (the ``log.*`` settings, ``message.max.bytes``, ...)
become :meth:`BrokerConfig.log_config`, the :class:`~seglog.storage.config.LogConfig` new
topics get.

Some names are accepted so that Kafka's sample ``server.properties`` loads, and have no effect
here (threads, KRaft quorum): their table entries say so (``support=ACCEPTED``).
``zookeeper.connect`` (seglog's own, as Kafka 3.x had it) makes the broker a member of a
cluster (:mod:`seglog.cluster`); the ``replica.*`` and ``zookeeper.*`` settings act then.

Thread safety: a BrokerConfig is immutable.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from ..config_table import BROKER_CONFIGS, TOPIC_CONFIGS, broker_key
from ..configdef import BOTH, ConfigKey, format_value, parse_value
from ..errors import InvalidConfigError
from ..storage.config import KAFKA_NAMES, TOPIC_CONFIG_NAMES, LogConfig

__all__ = ["BrokerConfig", "CONFIG_DEFS", "LISTENER_PREFIX", "LOG_CONFIG_SYNONYMS",
           "MECHANISM_PREFIXED", "parse_properties", "parse_config_args"]

_HOUR_MS = 3600 * 1000

#: The broker configs this broker takes (implemented, or accepted with no effect), by Kafka
#: name: the table's broker rows (:data:`seglog.config_table.BROKER_CONFIGS`) seglog takes.
CONFIG_DEFS: dict[str, ConfigKey] = {
    name: key for name, key in sorted(BROKER_CONFIGS.items()) if key.implemented}


def _log_config_synonyms() -> dict[str, str]:
    out = {}
    for key in TOPIC_CONFIGS.values():
        if key.name not in TOPIC_CONFIG_NAMES:
            continue
        synonym = key.synonyms[0] if key.synonyms else key.name if key.scope == BOTH else None
        if synonym is not None and synonym in CONFIG_DEFS:
            out[synonym] = key.name
    # The two broker settings a LogConfig keeps under their broker names.
    out.update({name: name for name in KAFKA_NAMES - TOPIC_CONFIG_NAMES})
    return out


#: Broker config name -> the LogConfig Kafka name it is the default of (the highest-priority
#: synonym of each topic config, from the table; the retention and roll names are resolved
#: first).
LOG_CONFIG_SYNONYMS: dict[str, str] = _log_config_synonyms()


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
        listener_overrides: dict[tuple[str, str | None, str], Any] = {}
        given_prefixed: dict[str, Any] = {}
        for name, raw in (configs or {}).items():
            if isinstance(name, str) and name.startswith(LISTENER_PREFIX):
                listener, mechanism, base = _split_listener_name(name)
                try:
                    listener_overrides[(listener, mechanism, base)] = parse_value(
                        broker_key(base), raw)
                except InvalidConfigError as exc:
                    raise InvalidConfigError(f"{name}: {exc}") from None
                given_prefixed[name] = listener_overrides[(listener, mechanism, base)]
                continue
            overrides[name] = parse_value(broker_key(name), raw)
        self._overrides = overrides
        self._listener_overrides = listener_overrides
        self._given_prefixed = given_prefixed
        values: dict[str, Any] = {name: d.default if d.has_default else None
                                  for name, d in CONFIG_DEFS.items()}
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
        values["log.dirs"] = _first(values["log.dirs"], values["log.dir"])
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
        if values["max.connections.per.ip"] == 0 and not str(
                values["max.connections.per.ip.overrides"] or "").strip():
            raise InvalidConfigError("max.connections.per.ip can be set to zero only if "
                                     "max.connections.per.ip.overrides property is set.")
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
        topic = {topic_name: format_value(CONFIG_DEFS[broker_name].type,
                                          self._values[broker_name])
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
        """The settings given (typed), without defaults (nor listener-prefixed ones:
        :attr:`listener_overrides`)."""
        return dict(self._overrides)

    @property
    def given(self) -> dict[str, Any]:
        """Every setting given (typed) by the name it was given under, listener-prefixed ones
        included: ``BrokerConfig(config.given)`` is the same config."""
        return {**self._overrides, **self._given_prefixed}

    @property
    def listener_overrides(self) -> dict[tuple[str, str | None, str], Any]:
        """The listener-prefixed settings given, ``{(listener, mechanism, name): value}``:
        ``listener.name.sasl_ssl.ssl.client.auth`` is ``("SASL_SSL", None,
        "ssl.client.auth")``, ``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config`` is
        ``("SASL_SSL", "SCRAM-SHA-256", "sasl.jaas.config")``."""
        return dict(self._listener_overrides)

    def listener_value(self, listener_name: str, name: str, mechanism: str | None = None
                       ) -> Any:
        """``name`` as listener ``listener_name`` sees it, as Kafka's
        ``ListenerName.configPrefix`` lookups: ``listener.name.<listener>.<mechanism>.<name>``
        (with a ``mechanism``), else ``listener.name.<listener>.<name>``, else the broker's
        ``name``."""
        listener = listener_name.upper()
        if mechanism is not None:
            with_mechanism = (listener, mechanism.upper(), name)
            if with_mechanism in self._listener_overrides:
                return self._listener_overrides[with_mechanism]
        plain: tuple[str, str | None, str] = (listener, None, name)
        if plain in self._listener_overrides:
            return self._listener_overrides[plain]
        return self._values[name]

    def has_listener_value(self, listener_name: str, name: str,
                           mechanism: str | None = None) -> bool:
        """Whether :meth:`listener_value` finds a listener-prefixed setting (not the
        broker-wide one)."""
        listener = listener_name.upper()
        return ((listener, mechanism.upper() if mechanism else None, name)
                in self._listener_overrides)

    @property
    def cluster_mode(self) -> bool:
        """Whether the broker is a cluster member (``zookeeper.connect`` set)."""
        return bool(self._values["zookeeper.connect"])

    @property
    def node_id(self) -> int | None:
        """``node.id``, else ``broker.id``, else None (unset: the data directory's)."""
        for name in ("node.id", "broker.id"):
            value: int | None = self._values[name]
            if value is not None and value >= 0:
                return value
        return None

    def is_default(self, name: str) -> bool:
        """Whether ``name`` was left at Kafka's default."""
        if name not in CONFIG_DEFS:
            broker_key(name)  # raises: unknown or not implemented
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


# Names whose value is resolved from others (the name, then the coarser units): the topic
# configs' synonym lists of more than one name in the table (log.retention.ms, log.roll.ms,
# log.roll.jitter.ms, log.flush.interval.ms).
_RESOLVED = {key.synonyms[0]: key.synonyms for key in TOPIC_CONFIGS.values()
             if len(key.synonyms) > 1 and key.implemented}
assert set(_RESOLVED) == {"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms",
                          "log.flush.interval.ms"}, "BrokerConfig resolves these four"


#: Kafka's ``ListenerName.configPrefix``: ``listener.name.<listener name, lower case>.``.
LISTENER_PREFIX = "listener.name."
#: The configs Kafka also takes prefixed by a SASL mechanism after the listener
#: (``listener.name.<listener>.<mechanism>.<name>``, KIP-146/KIP-86).
MECHANISM_PREFIXED = frozenset({"sasl.jaas.config", "sasl.server.callback.handler.class",
                                "sasl.login.callback.handler.class", "sasl.login.class"})


def _split_listener_name(name: str) -> tuple[str, str | None, str]:
    """``listener.name.<listener>[.<mechanism>].<config>`` -> ``(LISTENER, MECHANISM or None,
    config)``; InvalidConfigError for a name with no listener or no config after it."""
    rest = name[len(LISTENER_PREFIX):]
    listener, _, base = rest.partition(".")
    if not listener or not base:
        raise InvalidConfigError(f"{name}: a listener-prefixed config is "
                                 "listener.name.<listener>.<config>")
    if base not in BROKER_CONFIGS:
        mechanism, _, after = base.partition(".")
        if after in MECHANISM_PREFIXED and mechanism:
            return listener.upper(), mechanism.upper(), after
    return listener.upper(), None, base


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


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
