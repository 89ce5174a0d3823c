"""What one Kafka config is, and Kafka's rules for reading and writing its values.

A :class:`ConfigKey` is one row of the config table (:mod:`seglog.config_table`): Kafka's name,
``ConfigDef`` type, default, validator, importance and documentation, plus what seglog needs
to know of it (topic or broker scope, the broker synonyms of a topic config, how it may be
changed at run time, whether seglog implements it). :func:`parse_value` reads a value as
Kafka's ``ConfigDef.parseType`` then the key's validator read it (a string, as in
``server.properties``, a CreateTopics request or ``kafka-configs.sh``; or a Python value, as
the Python API takes it) and :func:`format_value` writes one back as
``ConfigDef.convertToString`` does. Errors are :class:`~seglog.errors.InvalidConfigError` in
Kafka's words: ``Invalid value <value> for configuration <name>: <why>``.

This module is a leaf (it imports only :mod:`seglog.errors`), so that storage and the server
both read configs the one way. Everything here is immutable and thread-safe.
"""

from __future__ import annotations

import decimal
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .errors import InvalidConfigError

__all__ = [
    "ACCEPTED", "BOTH", "BROKER", "CLUSTER_WIDE", "GZIP_LEVEL_DEFAULT", "INT16_MAX",
    "INT16_MIN", "INT32_MAX", "INT32_MIN", "INT64_MAX", "INT64_MIN", "NO", "NO_DEFAULT",
    "PER_BROKER", "READ_ONLY", "TOPIC", "YES", "ConfigKey", "check_connection_overrides",
    "check_gzip_level", "parse_connection_overrides",
    "check_throttled_replicas", "format_value", "invalid_value", "java_double_string",
    "java_trim", "parse_value",
]

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_BOUNDS = {"short": (INT16_MIN, INT16_MAX), "int": (INT32_MIN, INT32_MAX),
           "long": (INT64_MIN, INT64_MAX)}

#: Scopes: a topic config, a broker config, or one name that is both (``compression.type``,
#: ``min.insync.replicas``: the broker's value is the topics' default).
TOPIC, BROKER, BOTH = "topic", "broker", "both"
#: Kafka's dynamic update modes of a broker config (``DynamicBrokerConfig``): set only in
#: ``server.properties``; also per broker at run time; also as the cluster-wide default.
READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"
#: Whether seglog implements a config: it acts on it; it accepts it and documents why it has
#: no effect here (a threaded or KRaft broker's setting); it refuses it by name.
YES, ACCEPTED, NO = "yes", "accepted", "no"


class _NoDefault:
    """The default of a config Kafka requires (``ConfigDef.NO_DEFAULT_VALUE``)."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: Kafka has no default for this config (a required one: ``node.id``, ``process.roles``).
NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class ConfigKey:
    """One config: Kafka's ``ConfigKey`` plus seglog's facts about it.

    * ``name``, ``type`` (ConfigDef's: boolean, string, int, short, long, double, list,
      class, password), ``default`` (Kafka 4.4's, typed: a tuple for a list, None for null,
      :data:`NO_DEFAULT` when Kafka requires a value), ``importance`` (high, medium, low),
      ``doc`` (Kafka's documentation, as DescribeConfigs returns it).
    * The validator seglog applies: ``at_least``/``at_most`` (a Range), ``choices`` (a
      ValidString, or ValidList for a list), ``check`` (a function returning why a typed
      value is invalid, or None), ``aliases`` (values read as another, e.g. ``none`` for
      ``uncompressed``).
    * ``scope`` (:data:`TOPIC`, :data:`BROKER`, :data:`BOTH`); ``synonyms``: for a topic
      config, its broker synonyms, highest priority first (Kafka's
      ``ServerTopicConfigSynonyms``; a :data:`BOTH` entry is its own synonym).
    * ``dynamic``: Kafka's update mode of the broker config (:data:`READ_ONLY`,
      :data:`PER_BROKER`, :data:`CLUSTER_WIDE`).
    * ``support``: :data:`YES`, :data:`ACCEPTED` (no effect here, ``note`` says why) or
      :data:`NO` (refused by name). ``note``: what seglog does with it, where that is worth
      saying. ``kafka``: False for seglog's own configs (``zookeeper.connect``: Kafka 4.4
      has no ZooKeeper). ``internal``: Kafka's internal configs (not documented by Kafka).
    """

    name: str
    scope: str
    type: str
    default: Any
    importance: str
    doc: str
    synonyms: tuple[str, ...] = ()
    dynamic: str = READ_ONLY
    support: str = YES
    at_least: Any = None
    at_most: Any = None
    choices: Optional[tuple[str, ...]] = None
    check: Optional[Callable[[Any], Optional[str]]] = None
    aliases: tuple[tuple[str, str], ...] = ()
    note: str = ""
    kafka: bool = True
    internal: bool = False

    @property
    def has_default(self) -> bool:
        """Whether Kafka has a default for it (null counts as one)."""
        return self.default is not NO_DEFAULT

    @property
    def topic(self) -> bool:
        """Whether it is a topic config (scope topic or both)."""
        return self.scope in (TOPIC, BOTH)

    @property
    def broker(self) -> bool:
        """Whether it is a broker config (scope broker or both)."""
        return self.scope in (BROKER, BOTH)

    @property
    def implemented(self) -> bool:
        """Whether seglog takes it (acts on it, or accepts it with no effect)."""
        return self.support != NO

    @property
    def sensitive(self) -> bool:
        """Whether its value is secret (a password): DescribeConfigs shows null."""
        return self.type == "password"

    def validator_text(self) -> str:
        """The validator as Kafka's docs print it (``[1,...]``, ``[a, b]``), or ``""``."""
        if self.choices is not None:
            return "[" + ", ".join(self.choices) + "]"
        if self.check is not None:
            return _CHECK_TEXT.get(self.check, "")
        if self.at_least is None and self.at_most is None:
            return ""
        low = "" if self.at_least is None else f"{self.at_least:g}" \
            if isinstance(self.at_least, float) else str(self.at_least)
        if self.at_most is None:
            return f"[{low},...]"
        high = f"{self.at_most:g}" if isinstance(self.at_most, float) else str(self.at_most)
        return f"[{low},...,{high}]" if low else f"[...,{high}]"


# --- Kafka's string parsing (ConfigDef.parseType) ------------------------------------------

_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# Double.parseDouble's decimal form (FloatingDecimal); hexadecimal floats are not supported.
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))


def java_trim(text: str) -> str:
    """``String.trim()``: strips every char <= U+0020, not Python's Unicode whitespace."""
    return text.strip(_JAVA_WHITESPACE)


def invalid_value(key: ConfigKey, value: Any, why: str) -> InvalidConfigError:
    """Kafka's ``ConfigException`` for a bad value: ``Invalid value <value> for
    configuration <name>: <why>`` (the value as given, unquoted)."""
    shown = format_value(key.type, value) if not isinstance(value, str) else value
    return InvalidConfigError(f"Invalid value {shown} for configuration {key.name}: {why}")


def parse_value(key: ConfigKey, raw: Any, *, strings: bool = True) -> Any:
    """``raw`` read as a value of ``key`` and validated; returns the typed value (int, float,
    bool, str, a tuple of str for a list; None for null where the default is null).

    A string is parsed as Kafka parses it: ints and longs are decimal integers
    (``Integer.parseInt``: optional sign, ASCII digits) within their type's range, doubles
    decimal numbers (NaN refused: Kafka's Range lets it through, seglog does not), booleans
    ``true``/``false`` in any case, lists comma separated with surrounding whitespace
    ignored, and strings trimmed. A typed value is checked as ``ConfigDef`` checks one: an
    int (not a bool) for int/long/short, an int or float for double, a bool, a str, or a
    list/tuple/set of str for a list. Then ``at_least``/``at_most``, ``choices`` and
    ``check`` apply. ``strings=False`` takes typed values only (a string is refused for a
    number or a boolean: the Python API's constructor). Raises :class:`InvalidConfigError`
    in Kafka's words.
    """
    kind = key.type
    if not strings and isinstance(raw, str) and kind not in ("list", "string", "password",
                                                             "class"):
        raise invalid_value(key, raw, f"Expected a {_PYTHON_TYPES[kind]}, got str")
    if raw is None:
        if key.default is None:
            return None
        raise invalid_value(key, "null", "Value must be non-null")
    value: Any
    if kind in _BOUNDS:
        if isinstance(raw, str):
            text = java_trim(raw)
            if not _JAVA_INT.fullmatch(text):
                raise invalid_value(key, raw, f"Not a number of type {kind.upper()}")
            value = int(text)
        elif isinstance(raw, bool) or not hasattr(type(raw), "__index__"):
            raise invalid_value(key, raw, f"Expected value to be a {_BITS[kind]}-bit integer, "
                                          f"but it was a {type(raw).__name__}")
        else:
            value = raw.__index__()
        low, high = _BOUNDS[kind]
        if not low <= value <= high:
            raise invalid_value(key, raw, f"Not a number of type {kind.upper()}")
    elif kind == "double":
        if isinstance(raw, str):
            text = java_trim(raw)
            if not _JAVA_DOUBLE.fullmatch(text):
                raise invalid_value(key, raw, "Not a number of type DOUBLE")
            value = float(text.rstrip("fFdD").replace("Infinity", "inf"))
        elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise invalid_value(key, raw, "Expected value to be a double, but it was a "
                                          f"{type(raw).__name__}")
        else:
            value = float(raw)
        if math.isnan(value):
            raise invalid_value(key, raw, "Value must be a number, not NaN")
    elif kind == "boolean":
        if isinstance(raw, str):
            lowered = java_trim(raw).lower()
            if lowered not in ("true", "false"):
                raise invalid_value(key, raw, "Expected value to be either true or false")
            value = lowered == "true"
        elif isinstance(raw, bool):
            value = raw
        else:
            raise invalid_value(key, raw, "Expected value to be either true or false")
    elif kind == "list":
        if isinstance(raw, str):
            text = java_trim(raw)
            value = tuple(_LIST_SEPARATOR.split(text)) if text else ()
        elif isinstance(raw, (list, tuple, set, frozenset)):
            if not all(isinstance(item, str) for item in raw):
                raise invalid_value(key, ",".join(map(str, raw)),
                                    "Expected a comma separated list of strings")
            value = tuple(sorted(raw)) if isinstance(raw, (set, frozenset)) else tuple(raw)
        else:
            raise invalid_value(key, str(raw), "Expected a comma separated list")
        if key.choices is not None:
            for item in value:
                if item not in key.choices:
                    raise invalid_value(key, item,
                                        f"String must be one of: {', '.join(key.choices)}")
    else:  # string, password, class
        if not isinstance(raw, str):
            raise invalid_value(key, str(raw), "Expected value to be a string, but it was a "
                                               f"{type(raw).__name__}")
        value = java_trim(raw)
        value = dict(key.aliases).get(value, value)
        if key.choices is not None and value not in key.choices:
            raise invalid_value(key, raw, f"String must be one of: {', '.join(key.choices)}")
    if key.at_least is not None and value < key.at_least:
        raise invalid_value(key, raw, f"Value must be at least {_number(key.at_least)}")
    if key.at_most is not None and value > key.at_most:
        raise invalid_value(key, raw, f"Value must be no more than {_number(key.at_most)}")
    if key.check is not None:
        why = key.check(value)
        if why and key.check is check_throttled_replicas:
            # ThrottledReplicaListValidator: the parsed list shown, the name opens the reason.
            raise InvalidConfigError(f"Invalid value [{', '.join(value)}] for configuration "
                                     f"{key.name}: {key.name} {why}")
        if why:
            raise invalid_value(key, raw, why)
    return value


_BITS = {"short": 16, "int": 32, "long": 64}
_PYTHON_TYPES = {"short": "int", "int": "int", "long": "int", "double": "float",
                 "boolean": "bool"}


def _number(value: Any) -> str:
    # Range's message prints Java's Number.toString: 0.0 for a double bound.
    return repr(value) if isinstance(value, float) else str(value)


def format_value(kind: str, value: Any) -> Optional[str]:
    """A typed value as Kafka's ``ConfigDef.convertToString`` writes it (None for null;
    lists comma separated, a set of them sorted; doubles as Java prints them)."""
    if value is None or value is NO_DEFAULT:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    # Items as text: a bad value being reported (a list of numbers from a damaged file) must
    # become the message of a typed error, not a TypeError here.
    if isinstance(value, (set, frozenset)):
        return ",".join(sorted(str(item) for item in value))
    if isinstance(value, (tuple, list)):
        return ",".join(str(item) for item in value)
    if isinstance(value, float):
        return java_double_string(value)
    return str(value)


def java_double_string(value: float) -> str:
    """``Double.toString``: plain decimals for 1e-3 <= |value| < 1e7 (``0.5``, ``1.0``),
    else computerized scientific notation (``1.7976931348623157E308``), with the shortest
    digits that read back as ``value`` (as Java 19+ and Python's ``repr`` choose them)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    shortest = decimal.Decimal(repr(abs(value))).as_tuple()
    exponent = shortest.exponent
    assert isinstance(exponent, int)
    point = len(shortest.digits) + exponent - 1  # the power of ten of the first digit
    digits = "".join(map(str, shortest.digits)).lstrip("0").rstrip("0") or "0"
    if -3 <= point < 7:
        if point >= 0:
            whole, fraction = digits[:point + 1].ljust(point + 1, "0"), digits[point + 1:]
        else:
            whole, fraction = "0", "0" * (-point - 1) + digits
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point}"


# --- validators that are not a range or a list of choices ----------------------------------

GZIP_LEVEL_DEFAULT = -1  # java.util.zip.Deflater.DEFAULT_COMPRESSION


def check_gzip_level(value: int) -> Optional[str]:
    """``GzipCompression.LevelValidator``: -1 (Deflater's default level) or 1..9."""
    if value == GZIP_LEVEL_DEFAULT or 1 <= value <= 9:
        return None
    return "Value must be between 1 and 9, or -1 (the default level)"


_THROTTLED_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")


def check_throttled_replicas(value: tuple[str, ...]) -> Optional[str]:
    """``ThrottledReplicaListValidator``: ``*`` alone, or partitionId:brokerId pairs."""
    if "".join(value) == "*" or all(_THROTTLED_ENTRY.fullmatch(s.strip()) for s in value):
        return None
    return ("must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")


def parse_connection_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...`` (Kafka's
    ``parseCsvMap``; entries trimmed, empty ones skipped) as ``{host: count}``; ValueError
    for an entry without a ``:`` or with a count that is not a non-negative int."""
    overrides: dict[str, int] = {}
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host, count = host.strip(), count.strip()
        if not sep or not host or not count.lstrip("-").isdigit():
            raise ValueError(f"Invalid entry {entry!r}: expected host:count")
        if not _VALID_HOST.fullmatch(host):
            # KafkaConfig: Utils.validHostPattern
            raise ValueError(f"max.connections.per.ip.overrides contains invalid addresses : "
                             f"{host}")
        number = int(count)
        if not 0 <= number <= 2**31 - 1:
            raise ValueError(f"Invalid connection count {count} for {host}")
        overrides[host] = number
    return overrides


def check_connection_overrides(value: str) -> Optional[str]:
    """``max.connections.per.ip.overrides`` parses (:func:`parse_connection_overrides`)."""
    try:
        parse_connection_overrides(value or "")
    except ValueError as exc:
        return str(exc)
    return None


_CHECK_TEXT = {
    check_gzip_level: "[1,...,9] or -1",
    check_throttled_replicas: "[partitionId]:[brokerId],[partitionId]:[brokerId],... or *",
}
