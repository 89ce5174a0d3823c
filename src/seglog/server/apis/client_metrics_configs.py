"""Client-metrics config resources (KIP-714, resource type CLIENT_METRICS = 16): named
subscriptions of ``metrics``, ``interval.ms`` and ``match``, validated as Kafka 4.4's
``ClientMetricsConfigs`` validates them and described as its ``ConfigHelper`` describes them.

seglog keeps the subscriptions (DescribeConfigs, IncrementalAlterConfigs, ListConfigResources
and ``kafka-client-metrics`` see them) but pushes no telemetry: Kafka 4.4 does not advertise
GetTelemetrySubscriptions / PushTelemetry without a metrics reporter plugin, and neither does
seglog. A subscription exists while it has at least one config set; a lone broker keeps them
in its dynamic configs file (:class:`~seglog.server.apis.admin_configs.DynamicConfigs`), a
ZooKeeper cluster in ``/config/client-metrics/<name>`` (Kafka keeps them in KRaft only), which
every broker follows through its config change notifications.

``match`` patterns are Java regular expressions in Kafka; seglog checks them with Python's
``re``, which agrees on the common syntax.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ... import error_codes as codes
from ...configdef import BROKER, ConfigKey, format_value, parse_value
from ...errors import InvalidConfigError
from .admin_wire import Refused

__all__ = ["CLIENT_METRICS_KEYS", "INTERVAL_MS_MAX", "INTERVAL_MS_MIN", "MATCH_PARAMS",
           "RESOURCE_CLIENT_METRICS", "SOURCE_CLIENT_METRICS", "describe_entries",
           "validate"]

#: ConfigResource.Type.CLIENT_METRICS.
RESOURCE_CLIENT_METRICS = 16
#: DescribeConfigsResponse.ConfigSource.CLIENT_METRICS_CONFIG.
SOURCE_CLIENT_METRICS = 7
_SOURCE_DEFAULT = 5
#: The push interval's bounds (``ClientMetricsConfigs``): 100 ms to one hour.
INTERVAL_MS_MIN, INTERVAL_MS_MAX = 100, 3600 * 1000
#: The client properties a ``match`` pattern may name.
MATCH_PARAMS = frozenset({"client_instance_id", "client_id", "client_software_name",
                          "client_software_version", "client_source_address",
                          "client_source_port"})

#: Kafka's ``ClientMetricsConfigs`` config definitions, by name.
CLIENT_METRICS_KEYS: dict[str, ConfigKey] = {key.name: key for key in (
    ConfigKey(name="interval.ms", scope=BROKER, type="int", default=300000,
              importance="medium", doc="Metrics push interval in milliseconds"),
    ConfigKey(name="match", scope=BROKER, type="list", default=(), importance="medium",
              doc="Client match criteria"),
    ConfigKey(name="metrics", scope=BROKER, type="list", default=(), importance="medium",
              doc="Telemetry metric name prefix list"),
)}
_TYPE_IDS = {"int": 3, "list": 7}


def _check_pattern(pattern: str) -> None:
    # Java's String.split("=") drops trailing empty parts: "client_id=" has one part.
    parts = pattern.split("=")
    while parts and parts[-1] == "":
        parts.pop()
    bad = len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS
    if not bad:
        try:
            re.compile(parts[1].strip())
        except re.error:
            bad = True
    if bad:
        raise Refused(codes.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")


def validate(name: str, values: Mapping[str, str]) -> None:
    """Refuse subscription ``name`` with configs ``values`` (the whole set after the change)
    as Kafka 4.4 does: an empty name or an unknown key (INVALID_REQUEST), a value that does
    not parse (INVALID_CONFIG), a push interval out of bounds (INVALID_REQUEST), a bad
    ``match`` pattern (INVALID_CONFIG). Raises :class:`Refused`."""
    if not name:
        raise Refused(codes.INVALID_REQUEST, "Subscription name can't be empty")
    for key, value in values.items():
        spec = CLIENT_METRICS_KEYS.get(key)
        if spec is None:
            raise Refused(codes.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
        try:
            parse_value(spec, value)
        except InvalidConfigError as e:
            raise Refused(codes.INVALID_CONFIG, str(e)) from None
    if "interval.ms" in values:
        interval_ms = parse_value(CLIENT_METRICS_KEYS["interval.ms"], values["interval.ms"])
        if not INTERVAL_MS_MIN <= interval_ms <= INTERVAL_MS_MAX:
            raise Refused(codes.INVALID_REQUEST,
                          f"Invalid value {interval_ms} for interval.ms, interval must be "
                          f"between {INTERVAL_MS_MIN} and {INTERVAL_MS_MAX} (1 hour)")
    if "match" in values:
        for pattern in values["match"].split(","):
            _check_pattern(pattern)


def describe_entries(values: Mapping[str, str], *, synonyms: bool, documentation: bool,
                     keys: Any) -> list[Any]:
    """The DescribeConfigs entries of a subscription holding ``values`` (a subscription that
    does not exist is described by the defaults, as Kafka does), sorted by name."""
    out: list[Any] = []
    for name in sorted(CLIENT_METRICS_KEYS):
        if keys and name not in keys:
            continue
        spec = CLIENT_METRICS_KEYS[name]
        if name in values:
            value: str | None = values[name]
            source = SOURCE_CLIENT_METRICS
            found = [(name, value, source)]
        else:
            value, source, found = format_value(spec.type, spec.default), _SOURCE_DEFAULT, []
        out.append({"name": name, "value": value, "read_only": False,
                    "config_source": source, "is_sensitive": False,
                    "synonyms": found if synonyms else [],
                    "config_type": _TYPE_IDS[spec.type],
                    "documentation": spec.doc if documentation else None})
    return out
