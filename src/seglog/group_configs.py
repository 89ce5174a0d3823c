"""Group configs (ConfigResource type GROUP = 32, KIP-848 / KIP-932 / KIP-1071 / KIP-1191):
Kafka 4.4's ``GroupConfig`` table, its validation (``GroupConfig.validate``, the ranges
bounded by the broker's ``group.*.min/max`` configs), its clamping (``GroupConfig.evaluate``)
and the in-memory view every reader of a group's settings uses (:class:`GroupConfigsView`).

A group config overrides, for one group, a broker config (its *broker synonym*:
``share.record.lock.duration.ms`` <- ``group.share.record.lock.duration.ms``) or, for the few
without one (``share.auto.offset.reset``, ``share.isolation.level``,
``share.renew.acknowledge.enable``, ``errors.deadletterqueue.*``), ``GroupConfig``'s own
default. This module knows nothing of the server: the broker's values reach it through the
``broker_value`` function given to the view (the effective value of a broker config, typed).
How the configs are kept (a lone broker's data directory, a ZooKeeper cluster's
``/config/groups/<group>``) and answered on the wire is ``seglog.server.apis.group_configs``'s.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .configdef import BROKER, ConfigKey, format_value, parse_value
from .errors import InvalidConfigError

log = logging.getLogger("seglog.group_configs")

__all__ = ["GROUP_CONFIGS", "NO_EFFECT", "SHARE_PARTITION_FIELDS", "GroupConfigDef", "GroupConfigsView", "BrokerValue",
           "SHARE_AUTO_OFFSET_RESET_CHOICES", "broker_default", "check_auto_offset_reset",
           "normalized", "parse_iso8601_duration_ms", "validate"]

#: The effective value of a broker config, typed as its ConfigDef parses it.
BrokerValue = Callable[[str], Any]

#: The strategies ``share.auto.offset.reset`` takes (besides ``by_duration:<ISO8601>``).
SHARE_AUTO_OFFSET_RESET_CHOICES = ("earliest", "latest")

_JAVA_LONG_MAX = 2**63 - 1
# java.time.Duration.parse's grammar (case-insensitive; at least one part; "T" not alone).
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
    r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def parse_iso8601_duration_ms(text: str) -> int:
    """``java.time.Duration.parse(text)`` in milliseconds (fractions below a millisecond
    dropped). Raises ValueError when Java's parser would."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = m.group(7) or ""
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    if m.group(6) and m.group(6).startswith("-"):
        nanos = -nanos
    # Java's longs: a part or the total seconds beyond them is a parse error
    # (Math.multiplyExact / addExact).
    parts = (days * 86400, hours * 3600, minutes * 60, seconds)
    if any(abs(n) > _JAVA_LONG_MAX for n in (days, hours, minutes, seconds, *parts)) or \
            abs(sum(parts)) > _JAVA_LONG_MAX:
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    total_ns = sum(parts) * 10**9 + nanos
    # Floor division keeps the sign of a sub-millisecond duration (Duration.isNegative).
    return (sign * total_ns) // 10**6


def check_auto_offset_reset(value: str) -> str | None:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy.Validator``: why ``value`` is not a share
    group's reset strategy (``earliest``, ``latest``, ``by_duration:<non-negative ISO8601>``,
    case as written), or None."""
    ok = value in SHARE_AUTO_OFFSET_RESET_CHOICES
    if not ok and value.startswith("by_duration:"):
        try:
            ok = parse_iso8601_duration_ms(value[len("by_duration:"):]) >= 0
        except ValueError:
            ok = False
    if ok:
        return None
    return ("Invalid value `" + value + "` for configuration share.auto.offset.reset. The "
            "value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.")


def _check_auto_offset_reset_key(value: Any) -> str | None:
    return check_auto_offset_reset(value)


@dataclass(frozen=True)
class GroupConfigDef:
    """One group config: ``key`` (Kafka's ConfigKey: name, type, GroupConfig default, doc,
    the ConfigDef validator), ``broker_synonym`` (the broker config whose value is the
    default, Kafka's ``GroupConfig.ALL_GROUP_CONFIG_SYNONYMS``; None: ``key.default``),
    ``internal`` (``ConfigDef.defineInternal``: described only when set), and the broker
    configs bounding it (``low_from`` / ``high_from``, Kafka's ``validateValues``)."""

    key: ConfigKey
    broker_synonym: str | None = None
    internal: bool = False
    low_from: str | None = None
    high_from: str | None = None

    @property
    def name(self) -> str:
        """The group config's name."""
        return self.key.name


def _def(name: str, kind: str, default: Any, doc: str, *, synonym: str | None = None,
         at_least: Any = None, internal: bool = False, low: str | None = None,
         high: str | None = None, choices: tuple[str, ...] | None = None,
         check: Callable[[Any], str | None] | None = None) -> GroupConfigDef:
    return GroupConfigDef(
        key=ConfigKey(name=name, scope=BROKER, type=kind, default=default,
                      importance="medium", doc=doc, at_least=at_least, choices=choices,
                      check=check, internal=internal),
        broker_synonym=synonym, internal=internal, low_from=low, high_from=high)


def _bounded(prefix: str, name: str, kind: str, default: Any, doc: str, *, at_least: int,
             bound: str, internal: bool = False) -> GroupConfigDef:
    """A config of ``prefix`` (consumer, share, streams) bounded by the broker's
    ``group.<prefix>.min.<bound>`` and ``group.<prefix>.max.<bound>``."""
    return _def(f"{prefix}.{name}", kind, default, doc, synonym=f"group.{prefix}.{name}",
                at_least=at_least, internal=internal, low=f"group.{prefix}.min.{bound}",
                high=f"group.{prefix}.max.{bound}")


_AUTO_OFFSET_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: "
    "automatically reset the offset to the earliest offset</li><li>latest: automatically "
    "reset the offset to the latest offset</li><li>by_duration:&lt;duration&gt;: "
    "automatically reset the offset to a configured duration from the current timestamp. "
    "&lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration "
    "is not allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>")
_ISOLATION_DOC = (
    "Controls how to read records written transactionally. If set to \"read_committed\", "
    "the share group will only deliver transactional records which have been committed. If "
    "set to \"read_uncommitted\", the share group will return all messages, even "
    "transactional messages which have been aborted. Non-transactional records will be "
    "returned unconditionally in either mode.")

#: Kafka 4.4's ``GroupConfig.CONFIG_DEF``, in its definition order (the order Kafka parses
#: and so reports the first bad value in).
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in (
    _bounded("consumer", "session.timeout.ms", "int", 45000,
             "The timeout to detect client failures when using the consumer group protocol.",
             at_least=1, bound="session.timeout.ms"),
    _bounded("consumer", "heartbeat.interval.ms", "int", 5000,
             "The heartbeat interval given to the members of a consumer group.",
             at_least=1, bound="heartbeat.interval.ms"),
    _bounded("consumer", "assignment.interval.ms", "int", 1000,
             "The interval between assignment updates for a consumer group.",
             at_least=0, bound="assignment.interval.ms"),
    _def("consumer.assignor.offload.enable", "boolean", True,
         "Whether to offload consumer group assignment to a group coordinator background "
         "thread.", synonym="group.consumer.assignor.offload.enable", internal=True),
    _bounded("share", "session.timeout.ms", "int", 45000,
             "The timeout to detect client failures when using the share group protocol.",
             at_least=1, bound="session.timeout.ms"),
    _bounded("share", "heartbeat.interval.ms", "int", 5000,
             "The heartbeat interval given to the members of a share group.",
             at_least=1, bound="heartbeat.interval.ms"),
    _bounded("share", "record.lock.duration.ms", "int", 30000,
             "The record acquisition lock duration in milliseconds for share groups.",
             at_least=1000, bound="record.lock.duration.ms"),
    _bounded("share", "delivery.count.limit", "int", 5,
             "The maximum number of delivery attempts for a record delivered to a share "
             "group.", at_least=2, bound="delivery.count.limit"),
    _bounded("share", "partition.max.record.locks", "int", 2000,
             "Share-group record lock limit per share-partition.", at_least=100,
             bound="partition.max.record.locks"),
    _def("share.auto.offset.reset", "string", "latest", _AUTO_OFFSET_RESET_DOC,
         check=_check_auto_offset_reset_key),
    _def("share.isolation.level", "string", "read_uncommitted", _ISOLATION_DOC,
         choices=("read_committed", "read_uncommitted")),
    _def("share.renew.acknowledge.enable", "boolean", True,
         "Whether the renew acknowledge type is enabled for the share group."),
    _bounded("share", "assignment.interval.ms", "int", 1000,
             "The interval between assignment updates for a share group.", at_least=0,
             bound="assignment.interval.ms"),
    _def("share.assignor.offload.enable", "boolean", True,
         "Whether to offload share group assignment to a group coordinator background "
         "thread.", synonym="group.share.assignor.offload.enable", internal=True),
    _bounded("streams", "session.timeout.ms", "int", 45000,
             "The timeout to detect client failures when using the streams group protocol.",
             at_least=1, bound="session.timeout.ms"),
    _bounded("streams", "heartbeat.interval.ms", "int", 5000,
             "The heartbeat interval given to the members.", at_least=1,
             bound="heartbeat.interval.ms"),
    _def("streams.num.standby.replicas", "int", 0,
         "The number of standby replicas for each task.",
         synonym="group.streams.num.standby.replicas", at_least=0,
         high="group.streams.max.standby.replicas"),
    _def("streams.initial.rebalance.delay.ms", "int", 3000,
         "The amount of time the group coordinator will wait for more streams clients to "
         "join a new group before performing the first rebalance. A longer delay means "
         "potentially fewer rebalances.", synonym="group.streams.initial.rebalance.delay.ms",
         at_least=0),
    _bounded("streams", "assignment.interval.ms", "int", 1000,
             "The interval between assignment updates for a streams group.", at_least=0,
             bound="assignment.interval.ms"),
    _def("streams.assignor.offload.enable", "boolean", True,
         "Whether to offload streams group assignment to a group coordinator background "
         "thread.", synonym="group.streams.assignor.offload.enable", internal=True),
    _def("streams.task.offset.interval.ms", "int", 60000,
         "The interval in which the warmup task changelog offsets on a client are updated "
         "on the broker. The offsets are sent with the next heartbeat after this time has "
         "passed.", synonym="group.streams.task.offset.interval.ms", at_least=1,
         internal=True, low="group.streams.min.task.offset.interval.ms"),
    _def("streams.num.warmup.replicas", "int", 2,
         "The maximum number of warmup task replicas.",
         synonym="group.streams.num.warmup.replicas", at_least=0, internal=True,
         high="group.streams.max.warmup.replicas"),
    _def("streams.rack.aware.assignment.tags", "list", (),
         "List of client tag keys used to distribute standby replicas across Kafka Streams "
         "instances. When configured, and the used broker-side assignor supports it, it "
         "will make a best-effort to distribute standby tasks over each client tag "
         "dimension.", synonym="group.streams.rack.aware.assignment.tags"),
    _def("streams.acceptable.recovery.lag", "long", 10000,
         "The maximum acceptable lag (number of offsets to catch up) for a client to be "
         "considered caught-up enough to receive an active task assignment.",
         synonym="group.streams.acceptable.recovery.lag", at_least=0, internal=True),
    _def("streams.assignor.name", "string", None,
         "The task assignor to use for this streams group, selected by short name from the "
         "assignors registered via the broker configuration group.streams.assignors. When "
         "unset, the group defaults to the first assignor configured in the broker's "
         "group.streams.assignors setting. Changing the assignor does not trigger a "
         "rebalance for the group; the new assignor takes effect on the next rebalance.",
         synonym="group.streams.assignors"),
    _def("errors.deadletterqueue.topic.name", "string", "",
         "The name of the topic to be used as the dead-letter queue (DLQ) topic for this "
         "share group. If blank (the default), the group does not have a DLQ topic."),
    _def("errors.deadletterqueue.copy.record.enable", "boolean", False,
         "When writing onto the dead-letter queue topic, whether to copy the original "
         "record onto the DLQ topic, or just write a record containing the context "
         "information headers."),
)}

#: The group configs seglog keeps, validates and describes but does not act on: its group
#: coordinators compute an assignment at once (no assignment interval, no background
#: thread), and its streams groups have one assignor, no warm-up tasks, no rack tags and no
#: initial rebalance delay.
NO_EFFECT = frozenset({
    "consumer.assignment.interval.ms", "consumer.assignor.offload.enable",
    "share.assignment.interval.ms", "share.assignor.offload.enable",
    "streams.assignment.interval.ms", "streams.assignor.offload.enable",
    "streams.initial.rebalance.delay.ms", "streams.assignor.name",
    "streams.rack.aware.assignment.tags", "streams.num.warmup.replicas"})

#: The share group configs a share partition runs with, by the ``SharePartitionConfig``
#: field each gives (share-design.md).
SHARE_PARTITION_FIELDS = {
    "share.record.lock.duration.ms": "record_lock_duration_ms",
    "share.delivery.count.limit": "delivery_count_limit",
    "share.partition.max.record.locks": "max_in_flight_records",
    "share.auto.offset.reset": "auto_offset_reset",
    "share.isolation.level": "isolation_level",
    "share.renew.acknowledge.enable": "renew_acknowledge_enable",
}

#: Kafka's ``validateValues`` order: the order in which a bound is checked (and reported).
_BOUND_ORDER = ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
                "consumer.assignment.interval.ms", "share.heartbeat.interval.ms",
                "share.session.timeout.ms", "share.record.lock.duration.ms",
                "share.delivery.count.limit", "share.partition.max.record.locks",
                "share.assignment.interval.ms", "streams.heartbeat.interval.ms",
                "streams.session.timeout.ms", "streams.num.standby.replicas",
                "streams.assignment.interval.ms", "streams.task.offset.interval.ms",
                "streams.num.warmup.replicas")
#: (session timeout, heartbeat interval) pairs: the session must be the longer.
_SESSION_PAIRS = tuple((f"{p}.session.timeout.ms", f"{p}.heartbeat.interval.ms")
                       for p in ("consumer", "share", "streams"))


def broker_default(name: str, broker_value: BrokerValue) -> Any:
    """The value group config ``name`` has for a group that does not set it (typed): its
    broker synonym's effective value (``streams.assignor.name``: the first of
    ``group.streams.assignors``), else GroupConfig's default (Kafka's
    ``extractGroupConfigMap``)."""
    d = GROUP_CONFIGS[name]
    if d.broker_synonym is None:
        return d.key.default
    value = broker_value(d.broker_synonym)
    if name == "streams.assignor.name":
        return value[0] if value else None
    return value


def validate(values: Mapping[str, str | None], broker_value: BrokerValue) -> dict[str, Any]:
    """Kafka 4.4's ``GroupConfig.validate`` of a group's whole config set ``values`` (after
    the change): unknown names, duplicate rack tags, types and ConfigDef validators (in
    definition order), the broker's bounds, session timeouts above heartbeat intervals, a DLQ
    topic not starting with ``__``. Returns the typed values; raises
    :class:`InvalidConfigError` with Kafka's message (INVALID_CONFIG on the wire)."""
    for name in values:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    tags = values.get("streams.rack.aware.assignment.tags")
    if tags is not None:
        trimmed = tags.strip()
        raw_tags = re.split(r"\s*,\s*", trimmed) if trimmed else []
        if len(set(raw_tags)) != len(raw_tags):
            raise InvalidConfigError(
                "streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    parsed: dict[str, Any] = {}
    for name, d in GROUP_CONFIGS.items():
        if name in values:
            parsed[name] = parse_value(d.key, values[name])
    for name in _BOUND_ORDER:
        if name not in parsed:
            continue
        d = GROUP_CONFIGS[name]
        value = parsed[name]
        low = broker_value(d.low_from) if d.low_from else None
        high = broker_value(d.high_from) if d.high_from else None
        if low is not None and high is not None:
            if not low <= value <= high:
                raise InvalidConfigError(f"{name} must be in the range {low} to {high} "
                                         "inclusive.")
        elif high is not None and value > high:
            raise InvalidConfigError(f"{name} must be less than or equal to {high}")
        elif low is not None and value < low:
            raise InvalidConfigError(f"{name} must be greater than or equal to {low}")
    if "streams.assignor.name" in parsed:
        registered = list(broker_value("group.streams.assignors"))
        if parsed["streams.assignor.name"] not in registered:
            raise InvalidConfigError(
                f"streams.assignor.name '{parsed['streams.assignor.name']}' is not a "
                f"registered task assignor. Registered assignors are: "
                f"[{', '.join(registered)}].")
    for session, heartbeat in _SESSION_PAIRS:
        if session in parsed or heartbeat in parsed:
            s = parsed.get(session, broker_default(session, broker_value))
            h = parsed.get(heartbeat, broker_default(heartbeat, broker_value))
            if s <= h:
                raise InvalidConfigError(f"{session} must be greater than {heartbeat}")
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.startswith("__"):
        raise InvalidConfigError(
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    return parsed


def normalized(values: Mapping[str, str]) -> dict[str, str]:
    """``values`` (valid) as Kafka describes them: each parsed and written back
    (``" 20000 "`` -> ``"20000"``, ``FALSE`` -> ``false``)."""
    out: dict[str, str] = {}
    for name, raw in values.items():
        d = GROUP_CONFIGS[name]
        text = format_value(d.key.type, parse_value(d.key, raw))
        out[name] = "" if text is None else text
    return out


class GroupConfigsView:
    """The group configs a broker holds (group id -> the configs set, normalized strings,
    never empty) and what they make of each config: the group's value clamped into the
    broker's current bounds (Kafka's ``GroupConfig.evaluate``), else the broker's default.
    Listeners learn of every change (called with the group id). Used on one thread (the
    broker's event loop)."""

    def __init__(self, broker_value: BrokerValue,
                 configs: Mapping[str, Mapping[str, str]] | None = None):
        self._broker_value = broker_value
        self._configs: dict[str, dict[str, str]] = {
            g: dict(v) for g, v in (configs or {}).items() if v}
        self._listeners: list[Callable[[str], None]] = []

    def group_ids(self) -> list[str]:
        """The groups that have at least one config set, sorted."""
        return sorted(self._configs)

    def get(self, group_id: str) -> Mapping[str, str]:
        """Only the configs group ``group_id`` sets (a copy; empty when none)."""
        return dict(self._configs.get(group_id, {}))

    def all(self) -> dict[str, dict[str, str]]:
        """Every group's set configs (a copy)."""
        return {g: dict(v) for g, v in self._configs.items()}

    def value(self, group_id: str, name: str) -> Any:
        """The typed value group ``group_id`` runs with for config ``name``: its own (an int
        clamped into the broker's bounds as they are now), else the broker's default."""
        d = GROUP_CONFIGS[name]
        raw = self._configs.get(group_id, {}).get(name)
        if raw is None:
            return broker_default(name, self._broker_value)
        value = parse_value(d.key, raw)
        if d.low_from:
            value = max(value, self._broker_value(d.low_from))
        if d.high_from:
            value = min(value, self._broker_value(d.high_from))
        return value

    def effective(self, group_id: str, name: str) -> str:
        """:meth:`value` as Kafka writes it (``""`` for null)."""
        text = format_value(GROUP_CONFIGS[name].key.type, self.value(group_id, name))
        return "" if text is None else text

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(group_id)`` after each change of a group's configs."""
        self._listeners.append(listener)

    def replace(self, group_id: str, values: Mapping[str, str]) -> bool:
        """Make ``values`` the whole config set of ``group_id`` (empty: none) and tell the
        listeners; False (no one told) when nothing changed."""
        current = self._configs.get(group_id, {})
        if dict(values) == current:
            return False
        if values:
            self._configs[group_id] = dict(values)
        else:
            self._configs.pop(group_id, None)
        for listener in list(self._listeners):
            try:
                listener(group_id)
            except Exception:  # noqa: BLE001 - one reader's failure must not stop the others
                log.exception("group configs listener failed for group %s", group_id)
        return True

    def replace_all(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Make ``configs`` every group's config set (groups absent lose theirs)."""
        groups: Iterable[str] = set(self._configs) | set(configs)
        for group_id in sorted(groups):
            self.replace(group_id, configs.get(group_id, {}))

    def share_partition_settings(self, group_id: str) -> dict[str, Any]:
        """What a share group's partitions run with, by the field names of
        ``coordinator.share_partition.SharePartitionConfig`` (see
        :data:`SHARE_PARTITION_FIELDS`), plus ``dlq_topic_name`` (``""``: none) and
        ``dlq_copy_record``."""
        out = {field: self.value(group_id, name)
               for name, field in SHARE_PARTITION_FIELDS.items()}
        out["dlq_topic_name"] = self.value(group_id, "errors.deadletterqueue.topic.name")
        out["dlq_copy_record"] = self.value(group_id,
                                            "errors.deadletterqueue.copy.record.enable")
        return out
