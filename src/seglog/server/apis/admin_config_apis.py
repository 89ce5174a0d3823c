"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (Kafka's ``ConfigHelper`` and
``ConfigurationControlManager``): topics, this broker and the cluster default, this broker's
loggers, client-metrics subscriptions and group configs (``group_configs``)."""

from __future__ import annotations

import logging
from typing import Any, Callable, Collection, Sequence, TypedDict

from ... import error_codes as codes
from ...config_table import (BROKER_CONFIGS, DESCRIBED_AT_DEFAULT, DYNAMIC_ONLY, TOPIC_CONFIGS,
                             broker_key)
from ...errors import InvalidConfigError, SeglogError
from ...storage.config import TOPIC_CONFIG_NAMES, LogConfig
from ..config import CONFIG_DEFS
from ..authorization import AclOperation, ResourceType, authorize, authorize_cluster
from ..context import BrokerState, RequestContext
from . import admin_configs as cfg
from . import client_metrics_configs as cm
from . import group_configs as gc
from .admin_state import (
    dynamic_configs, save_configs, set_dynamic_layer, topic_defaults, topic_overrides_of,
)
from .admin_wire import (
    NO_THROTTLE, OP_APPEND, OP_DELETE, OP_NAMES, OP_SET, OP_SUBTRACT, RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC, Refused, code_of, make, response_classes,
    topic_name_error,
)
from .data_topics import partition_seam

_log = logging.getLogger(__name__)


# --- DescribeConfigs ------------------------------------------------------------------------


#: One synonym of a config: its name, its value (None when unset or sensitive) and its source.
Synonym = tuple[str, str | None, int]


class ConfigEntry(TypedDict):
    """One config as DescribeConfigs (and CreateTopics v5+) describe it: the fields of
    kio's ``DescribeConfigsResourceResult`` by their kio names."""

    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool
    synonyms: list[Synonym]
    config_type: int
    documentation: str | None


def topic_config_entries(state: BrokerState, topic_config: LogConfig,
                         overrides: Collection[str], *, synonyms: bool = False,
                         documentation: bool = False, keys: Collection[str] | None = None
                         ) -> list[ConfigEntry]:
    """Kafka's description of a topic's configs: ``[{name, value, read_only, config_source,
    is_sensitive, synonyms, config_type, documentation}]`` sorted by name."""
    dynamic = dynamic_configs(state)
    values = topic_config.to_kafka(topic_only=True)
    out: list[ConfigEntry] = []
    for name in sorted(TOPIC_CONFIG_NAMES):
        if keys and name not in keys:
            continue
        value = values[name]
        found: list[Synonym] = []
        if name in overrides:
            found.append((name, value, cfg.SOURCE_TOPIC))
        found += cfg.topic_synonyms(dynamic, name)
        out.append({"name": name, "value": value, "read_only": False,
                    "config_source": found[0][2] if found else cfg.SOURCE_DEFAULT,
                    "is_sensitive": False, "synonyms": found if synonyms else [],
                    "config_type": cfg.config_type_id(cfg.topic_config_kind(name)),
                    "documentation": TOPIC_CONFIGS[name].doc if documentation else None})
    return out


def broker_id_of(state: BrokerState, resource_name: str, *, describe: bool) -> bool:
    """Whether the broker resource names this broker (True) or the cluster default (False);
    Refused otherwise, in Kafka's words."""
    if not resource_name:
        return False
    try:
        broker_id = int(resource_name)
    except ValueError:
        raise Refused(codes.INVALID_REQUEST, f"Broker id must be an integer, but it is: "
                       f"{resource_name}") from None
    if broker_id != state.node_id:
        expected = f"{state.node_id} or empty string" if describe else f"{state.node_id}"
        raise Refused(codes.INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but "
                       f"received {resource_name}")
    return True


def _broker_config_entries(state: BrokerState, per_broker: bool, *, synonyms: bool,
                           documentation: bool, keys: Collection[str]) -> list[ConfigEntry]:
    """Kafka's ``createBrokerConfigEntry`` over every config (this broker) or the dynamic
    cluster defaults (the ``""`` resource)."""
    dynamic = dynamic_configs(state)
    effective = dynamic.effective
    # Every config seglog takes, and the refused ones whose Kafka default describes it
    # (config_table.DESCRIBE_RULE).
    names = sorted(set(CONFIG_DEFS) | DESCRIBED_AT_DEFAULT) if per_broker \
        else sorted(dynamic.cluster_default)
    out: list[ConfigEntry] = []
    for name in names:
        if keys and name not in keys:
            continue
        d = BROKER_CONFIGS.get(name)
        if d is not None and d.internal:
            continue  # Kafka's internal configs (ConfigDef.defineInternal) are not described
        kind = d.type if d is not None else "string"
        sensitive = d is not None and d.sensitive
        found = dynamic.synonyms(name, per_broker=per_broker)
        if name in DYNAMIC_ONLY:
            # Not in KafkaConfig's ConfigDef: Kafka lists one only while it is set, with no
            # default synonym.
            found = [f for f in found if f[2] != cfg.SOURCE_DEFAULT]
            if not found:
                continue
        if per_broker and name in ("node.id", "broker.id") and not found[1:]:
            # Not set: this broker's id is the data directory's (meta.properties).
            found = [(name, str(state.node_id), cfg.SOURCE_STATIC)]
        if per_broker:
            # Kafka shows the value as set (null for log.retention.ms when only the hours
            # are), not the value resolved from the other units.
            value = found[0][1] if found else cfg.format_value(
                kind, d.default if d is not None else effective.get(name))
        else:
            value = dynamic.cluster_default[name]
        out.append({"name": name, "value": None if sensitive else value,
                    "read_only": name not in cfg.DYNAMIC_BROKER_CONFIGS,
                    "config_source": found[0][2] if found else cfg.SOURCE_DEFAULT,
                    "is_sensitive": sensitive, "synonyms": found if synonyms else [],
                    "config_type": cfg.config_type_id(kind),
                    "documentation": (d.doc or d.note if d is not None else None)
                    if documentation else None})
    return out


# Kafka's log levels (Log4jController) and Python's.
_KAFKA_LEVELS = {"DEBUG": logging.DEBUG, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
                 "INFO": logging.INFO, "TRACE": 5, "WARN": logging.WARNING}
_LEVEL_NAMES = {level: name for name, level in _KAFKA_LEVELS.items()}


def _level_name(level: int) -> str:
    """The Kafka name of a Python level (the nearest Kafka level at or below it)."""
    return _LEVEL_NAMES.get(level) or max(
        ((lv, n) for lv, n in _LEVEL_NAMES.items() if lv <= level), default=(0, "TRACE"))[1]


def _loggers() -> dict[str, logging.Logger]:
    """The broker's loggers as Kafka's BROKER_LOGGER resource lists them: ``root`` and the
    ``seglog`` ones."""
    loggers = {"root": logging.getLogger()}
    for name in sorted(logging.root.manager.loggerDict):
        if name.startswith("seglog"):
            loggers[name] = logging.getLogger(name)
    return loggers


def _alter_loggers(state: BrokerState, resource: Any, validate_only: bool) -> None:
    """IncrementalAlterConfigs on BROKER_LOGGER (Kafka's ``ConfigAdminManager
    .validateLogLevelConfigs`` then ``Log4jController``): SET a level, DELETE to inherit the
    root's; not kept across restarts, as in Kafka."""
    try:
        int(resource.resource_name)
    except ValueError:
        raise Refused(codes.INVALID_REQUEST, "Node id must be an integer, but it is: "
                       f"{resource.resource_name}") from None
    broker_id_of(state, resource.resource_name, describe=False)
    loggers = _loggers()
    changes: list[tuple[logging.Logger, int]] = []
    for change in resource.configs:
        name, op, value = change.name, change.config_operation, change.value
        if op in (OP_APPEND, OP_SUBTRACT):
            raise Refused(codes.INVALID_REQUEST, f"{OP_NAMES[op]} operation is not allowed for the "
                           "BROKER_LOGGER resource")
        if op not in (OP_SET, OP_DELETE):
            raise Refused(codes.UNKNOWN_SERVER_ERROR)
        if name not in loggers:
            raise Refused(codes.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == OP_SET and (value or "") not in _KAFKA_LEVELS:
            raise Refused(codes.INVALID_CONFIG, f"Cannot set the log level of {name} to {value} as "
                           "it is not a supported log level. Valid log levels are "
                           f"{', '.join(_KAFKA_LEVELS)}")
        if op == OP_DELETE and name == "root":
            raise Refused(codes.INVALID_REQUEST, "Removing the log level of the root logger is "
                           "not allowed")
        changes.append((loggers[name], _KAFKA_LEVELS[value] if op == OP_SET else logging.NOTSET))
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)


def _logger_entries(keys: Collection[str]) -> list[ConfigEntry]:
    loggers = _loggers()
    return [{"name": name, "value": _level_name(lg.getEffectiveLevel()),
             "read_only": False, "config_source": 6, "is_sensitive": False, "synonyms": [],
             "config_type": 2, "documentation": None}
            for name, lg in loggers.items() if not keys or name in keys]


def config_authorization_error(ctx: RequestContext, operation: AclOperation,
                               resource_type: int, name: str) -> int:
    """The error of a config resource the caller may not describe / alter (``operation``
    DESCRIBE_CONFIGS or ALTER_CONFIGS, Kafka's ``ConfigHelper`` and ``ControllerApis``: on
    the topic for a topic, on the group for a group, on the cluster for a broker or its
    loggers), NONE when allowed or for a resource type answered otherwise."""
    if resource_type == RESOURCE_TOPIC:
        allowed = authorize(ctx, operation, ResourceType.TOPIC, name)
        return codes.NONE if allowed else codes.TOPIC_AUTHORIZATION_FAILED
    if resource_type == gc.RESOURCE_GROUP:
        allowed = authorize(ctx, operation, ResourceType.GROUP, name)
        return codes.NONE if allowed else codes.GROUP_AUTHORIZATION_FAILED
    if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, cm.RESOURCE_CLIENT_METRICS):
        allowed = authorize_cluster(ctx, operation)
        return codes.NONE if allowed else codes.CLUSTER_AUTHORIZATION_FAILED
    return codes.NONE


async def describe_configs(ctx: RequestContext, request: Any) -> Any:
    """DescribeConfigs v1-v4 for topics, this broker, the cluster default (``""``) and this
    broker's loggers (Kafka's ``ConfigHelper.describeConfigs``)."""
    state = ctx.broker
    store = state.store
    response_cls, m = response_classes(32, ctx.api_version)
    known = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, cm.RESOURCE_CLIENT_METRICS,
             gc.RESOURCE_GROUP)
    if any(r.resource_type not in known for r in request.resources):
        # Kafka fails the whole request on a resource type it cannot authorize.
        return make(response_cls, throttle_time=NO_THROTTLE, results=tuple(
            make(m.DescribeConfigsResult, error_code=codes.INVALID_REQUEST,
                  error_message=codes.message(codes.INVALID_REQUEST), resource_type=r.resource_type,
                  resource_name=r.resource_name, configs=())
            for r in request.resources))
    synonyms = bool(request.include_synonyms)
    documentation = bool(getattr(request, "include_documentation", False))
    results: list[Any] = []
    unauthorized: list[Any] = []
    for resource in request.resources:
        keys = set(resource.configuration_keys or ())
        try:
            denied = config_authorization_error(ctx, AclOperation.DESCRIBE_CONFIGS,
                                                resource.resource_type, resource.resource_name)
            if denied:
                # ConfigHelper answers the unauthorized resources after the others.
                unauthorized.append(make(
                    m.DescribeConfigsResult, error_code=denied,
                    error_message=codes.message(denied), resource_type=resource.resource_type,
                    resource_name=resource.resource_name, configs=()))
                continue
            if resource.resource_type == RESOURCE_TOPIC:
                why = topic_name_error(resource.resource_name)
                if why:
                    raise Refused(codes.INVALID_TOPIC_EXCEPTION, why)
                if resource.resource_name not in store:
                    raise Refused(codes.UNKNOWN_TOPIC_OR_PARTITION, "")
                topic = store.topic(resource.resource_name)
                config = topic.config
                overrides = topic_overrides_of(state, topic)
                entries = topic_config_entries(state, config, overrides, synonyms=synonyms,
                                                documentation=documentation, keys=keys)
            elif resource.resource_type == RESOURCE_BROKER:
                per_broker = broker_id_of(state, resource.resource_name, describe=True)
                entries = _broker_config_entries(state, per_broker, synonyms=synonyms,
                                                 documentation=documentation, keys=keys)
            elif resource.resource_type == cm.RESOURCE_CLIENT_METRICS:
                if not resource.resource_name:
                    raise Refused(codes.INVALID_REQUEST,
                                  "Client metrics subscription name must not be empty")
                values = dynamic_configs(state).client_metrics.get(resource.resource_name, {})
                entries = cm.describe_entries(values, synonyms=synonyms,
                                              documentation=documentation, keys=keys)
            elif resource.resource_type == gc.RESOURCE_GROUP:
                entries = gc.describe_entries(state, resource.resource_name, synonyms=synonyms,
                                              documentation=documentation, keys=keys)
            else:
                if not resource.resource_name:
                    raise Refused(codes.INVALID_REQUEST, "Broker id must not be empty")
                broker_id_of(state, resource.resource_name, describe=False)
                entries = _logger_entries(keys)
            configs = tuple(make(m.DescribeConfigsResourceResult, **{
                **e, "synonyms": tuple(make(m.DescribeConfigsSynonym, name=n, value=v,
                                             source=s) for n, v, s in e["synonyms"])})
                for e in entries)
            # Kafka answers a client-metrics or group resource with an empty message, others
            # with null.
            ok_message = "" if resource.resource_type in (cm.RESOURCE_CLIENT_METRICS,
                                                          gc.RESOURCE_GROUP) else None
            results.append(make(m.DescribeConfigsResult, error_code=codes.NONE,
                                error_message=ok_message,
                                 resource_type=resource.resource_type,
                                 resource_name=resource.resource_name, configs=configs))
        except Refused as e:
            results.append(make(m.DescribeConfigsResult, error_code=e.code,
                                 error_message=e.message, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name, configs=()))
    return make(response_cls, throttle_time=NO_THROTTLE, results=tuple(results + unauthorized))


# --- AlterConfigs and IncrementalAlterConfigs -----------------------------------------------


def _list_items(value: str | None) -> list[str]:
    if not value:
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def _incremental(current: dict[str, str], effective: dict[str, str], changes: Sequence[Any], *,
                 is_list: Callable[[str], bool], append_error: Callable[[str, int], str]
                 ) -> dict[str, str]:
    """Apply IncrementalAlterConfigs ``changes`` (name, op, value) to ``current`` (the
    overrides), with ``effective`` the values an APPEND/SUBTRACT starts from when no override
    exists. Returns the new overrides or raises Refused."""
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise Refused(codes.INVALID_REQUEST, "Error due to duplicate config keys")
    out = dict(current)
    for change in changes:
        name, op, value = change.name, change.config_operation, change.value
        if op not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise Refused(codes.UNKNOWN_SERVER_ERROR)
        if op != OP_DELETE and value is None:
            raise Refused(codes.INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == OP_SET:
            out[name] = value
        elif op == OP_DELETE:
            out.pop(name, None)
        else:
            if not is_list(name):
                raise Refused(codes.INVALID_CONFIG, append_error(name, op))
            items = _list_items(out.get(name, effective.get(name)))
            if op == OP_APPEND:
                items += [v for v in _list_items(value) if v not in items]
            else:
                drop = set(_list_items(value))
                items = [v for v in items if v not in drop]
            out[name] = ",".join(items)
    return out


def _alter_topic(state: BrokerState, name: str, new_overrides: dict[str, str],
                 validate_only: bool) -> None:
    store = state.store
    if topic_name_error(name) or name not in store:
        raise Refused(codes.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    try:
        config = cfg.topic_config_from(topic_defaults(state), new_overrides)
    except InvalidConfigError as e:
        raise Refused(codes.INVALID_CONFIG, str(e)) from None
    if not validate_only:
        try:
            store.alter_topic_configs({name: config})
            topic = store.topic(name)
        except SeglogError as e:
            raise Refused(code_of(e), str(e)) from None
        dynamic_configs(state).set_explicit(topic.topic_id, config, new_overrides)
        save_configs(state)


def _alter_broker(state: BrokerState, resource_name: str, new_values: dict[str, str],
                  validate_only: bool) -> None:
    """Replace one dynamic layer (this broker's, or the cluster default for ``""``) with
    ``new_values``; topics follow a changed topic default; persisted."""
    dynamic = dynamic_configs(state)
    per_broker = broker_id_of(state, resource_name, describe=False)
    old_layer = dynamic.per_broker if per_broker else dynamic.cluster_default
    changed = {n for n in set(old_layer) | set(new_values)
               if old_layer.get(n) != new_values.get(n)}
    for name in sorted(changed):
        try:
            broker_key(name)  # unknown, or a Kafka config seglog does not implement
        except InvalidConfigError as e:
            raise Refused(codes.INVALID_CONFIG, str(e)) from None
    static_only = sorted(n for n in changed if n not in cfg.DYNAMIC_BROKER_CONFIGS)
    if static_only:
        raise Refused(codes.INVALID_REQUEST, "Cannot update these configs dynamically: "
                       f"[{', '.join(static_only)}]")
    if not per_broker and cfg.CLUSTER_MIN_ISR not in new_values:
        raise Refused(codes.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed "
                       "while ELR is enabled.")
    layers = ((new_values, dynamic.cluster_default) if per_broker
              else (dynamic.per_broker, new_values))
    try:
        effective = dynamic.merged(*layers)
    except InvalidConfigError as e:
        raise Refused(codes.INVALID_REQUEST, str(e)) from None
    if validate_only or not changed:
        return
    set_dynamic_layer(state, per_broker=per_broker, values=new_values, effective=effective)


async def _alter(state: BrokerState, resource_type: int, resource_name: str, values: dict[str, str],
                 validate_only: bool) -> None:
    """Validate ``values`` (a topic's whole override set, or a whole dynamic broker layer),
    then, unless only validating, make them the cluster's (the seam: a ZooKeeper cluster
    writes the config znode and announces it, ``AdminZkClient.changeConfigs``, and every
    broker takes it from there) and this broker's. The answer waits for the cluster's write;
    a failed write changes nothing. Raises Refused."""
    alter = _alter_topic if resource_type == RESOURCE_TOPIC else _alter_broker
    alter(state, resource_name, values, True)
    if validate_only:
        return
    seam = partition_seam(state)
    try:
        if resource_type == RESOURCE_TOPIC:
            await seam.alter_topic_configs(resource_name, values)
        else:
            await seam.alter_broker_configs(state.node_id if resource_name else None, values)
    except SeglogError as e:
        raise Refused(code_of(e), str(e)) from None
    before = _values_now(state, resource_type, resource_name)
    alter(state, resource_name, values, False)
    changed = sorted(n for n in set(before) | set(values) if before.get(n) != values.get(n))
    if changed:
        what = (f"topic {resource_name}" if resource_type == RESOURCE_TOPIC else
                f"broker {resource_name}" if resource_name else "the cluster's brokers")
        _log.info("Configs of %s changed: %s", what, ", ".join(
            f"{n} (deleted)" if n not in values else f"{n}=[hidden]" if _sensitive(n)
            else f"{n}={values[n]}" for n in changed))


def _sensitive(name: str) -> bool:
    # Passwords and JAAS texts never reach a log line (Kafka masks them too).
    d = BROKER_CONFIGS.get(name)
    return d.sensitive if d is not None else "password" in name or "jaas" in name


def _values_now(state: BrokerState, resource_type: int, resource_name: str) -> dict[str, str]:
    """The overrides (topic) or dynamic layer (broker) before a change, for its log line."""
    if resource_type == RESOURCE_TOPIC:
        try:
            return topic_overrides_of(state, state.store.topic(resource_name))
        except (SeglogError, KeyError):
            return {}
    dynamic = dynamic_configs(state)
    layer = dynamic.per_broker if resource_name else dynamic.cluster_default
    return {n: str(v) for n, v in layer.items()}


async def _alter_client_metrics(state: BrokerState, resource: Any, validate_only: bool
                                ) -> None:
    """IncrementalAlterConfigs on a client-metrics subscription (Kafka's
    ``ClientMetricsConfigs.validate`` over the whole resulting set; no APPEND/SUBTRACT, as
    Kafka treats none of its keys as a list there); a subscription left with no config is
    gone. A lone broker keeps them in its dynamic configs file; a ZooKeeper cluster in
    ``/config/client-metrics/<name>``, which every broker reads (the seam)."""
    seam = partition_seam(state)
    dynamic = dynamic_configs(state)
    name = resource.resource_name
    current = dynamic.client_metrics.get(name, {})
    new = _incremental(current, current, resource.configs, is_list=lambda _n: False,
                       append_error=lambda n, op: (f"Can't {OP_NAMES[op]} to key {n} because "
                                                   "its type is not LIST."))
    cm.validate(name, new)
    if validate_only or new == current:
        return
    if seam.keeps_client_metrics:
        try:
            await seam.alter_client_metrics(name, new)
        except (SeglogError, ValueError) as e:
            raise Refused(code_of(e) if isinstance(e, SeglogError) else codes.INVALID_REQUEST,
                          str(e)) from None
        # The cluster's listener takes it too; set here so that this broker's next
        # describe sees the change at once.
        take_client_metrics(state, name, new)
        return
    if new:
        dynamic.client_metrics[name] = new
    else:
        dynamic.client_metrics.pop(name, None)
    save_configs(state)


async def _alter_group(state: BrokerState, resource: Any, validate_only: bool) -> None:
    """IncrementalAlterConfigs on a group's configs: the changes applied to its set, then
    ``group_configs.alter`` (Kafka's controller knows no group config as a list: APPEND and
    SUBTRACT are refused for every key)."""
    current = dict(gc.group_configs(state).get(resource.resource_name))
    new = _incremental(current, current, resource.configs, is_list=lambda _n: False,
                       append_error=lambda n, op: (f"Can't {OP_NAMES[op]} to key {n} because "
                                                   "its type is not LIST."))
    await gc.alter(state, resource.resource_name, new, validate_only)


def take_client_metrics(state: BrokerState, name: str, values: dict[str, str]) -> None:
    """Client-metrics subscription ``name`` as the cluster now holds it (empty: gone); a
    cluster's subscriptions live in ZooKeeper, not in this broker's file."""
    dynamic = dynamic_configs(state)
    if values:
        dynamic.client_metrics[name] = dict(values)
    else:
        dynamic.client_metrics.pop(name, None)


def _is_list_topic_config(name: str) -> bool:
    return name in TOPIC_CONFIG_NAMES and cfg.topic_config_kind(name) == "list"


def _is_list_broker_config(name: str) -> bool:
    d = CONFIG_DEFS.get(name)
    return d is not None and d.type == "list"


async def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    """IncrementalAlterConfigs v0-v1 (SET, DELETE, APPEND, SUBTRACT) on topics and on this
    broker or the cluster default (Kafka's ``ConfigurationControlManager``)."""
    state = ctx.broker
    response_cls, m = response_classes(44, ctx.api_version)
    results: list[Any] = []
    for resource in request.resources:
        try:
            denied = config_authorization_error(ctx, AclOperation.ALTER_CONFIGS,
                                                resource.resource_type, resource.resource_name)
            if denied:
                raise Refused(denied, None if resource.resource_type == RESOURCE_BROKER_LOGGER
                              else codes.message(denied))
            if resource.resource_type == RESOURCE_TOPIC:
                name = resource.resource_name
                if topic_name_error(name) or name not in state.store:
                    raise Refused(codes.UNKNOWN_TOPIC_OR_PARTITION,
                                   f"The topic '{name}' does not exist.")
                topic = state.store.topic(name)
                config = topic.config
                current = topic_overrides_of(state, topic)
                new = _incremental(
                    current, config.to_kafka(topic_only=True), resource.configs,
                    is_list=_is_list_topic_config,
                    append_error=lambda n, op: (f"Unknown topic config name: {n}"
                                                if n not in TOPIC_CONFIG_NAMES else
                                                f"Can't {OP_NAMES[op]} to key {n} because "
                                                "its type is not LIST."))
                await _alter(state, RESOURCE_TOPIC, name, new, request.validate_only)
            elif resource.resource_type == RESOURCE_BROKER:
                dynamic = dynamic_configs(state)
                per_broker = broker_id_of(state, resource.resource_name, describe=False)
                current = dynamic.per_broker if per_broker else dynamic.cluster_default
                effective = {n: text for n, v in dynamic.effective.items()
                             if (text := cfg.format_value(CONFIG_DEFS[n].type, v)) is not None}
                new = _incremental(
                    current, effective, resource.configs, is_list=_is_list_broker_config,
                    append_error=lambda n, op: ("Config value append is not allowed for config "
                                                f"key: {n}" if op == OP_APPEND else
                                                "Config value subtract is not allowed for "
                                                f"config key: {n}"))
                await _alter(state, RESOURCE_BROKER, resource.resource_name, new,
                             request.validate_only)
            elif resource.resource_type == RESOURCE_BROKER_LOGGER:
                _alter_loggers(state, resource, request.validate_only)
            elif resource.resource_type == cm.RESOURCE_CLIENT_METRICS:
                await _alter_client_metrics(state, resource, request.validate_only)
            elif resource.resource_type == gc.RESOURCE_GROUP:
                await _alter_group(state, resource, request.validate_only)
            else:
                raise Refused(codes.INVALID_REQUEST,
                               f"Unsupported resource type: {resource.resource_type}")
            results.append(make(m.AlterConfigsResourceResponse, error_code=codes.NONE,
                                 error_message=None, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
        except Refused as e:
            results.append(make(m.AlterConfigsResourceResponse, error_code=e.code,
                                 error_message=e.message, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
    return make(response_cls, throttle_time=NO_THROTTLE, responses=tuple(results))


async def alter_configs(ctx: RequestContext, request: Any) -> Any:
    """AlterConfigs v0-v2, the legacy API: the given configs replace the resource's whole
    override set (a topic's) or dynamic layer (the broker's)."""
    state = ctx.broker
    response_cls, m = response_classes(33, ctx.api_version)
    results: list[Any] = []
    for resource in request.resources:
        try:
            denied = config_authorization_error(ctx, AclOperation.ALTER_CONFIGS,
                                                resource.resource_type, resource.resource_name)
            if denied:
                raise Refused(denied, codes.message(denied))
            names = [c.name for c in resource.configs]
            if len(set(names)) != len(names):
                raise Refused(codes.INVALID_REQUEST, "Error due to duplicate config keys")
            nulls = [c.name for c in resource.configs if c.value is None]
            if nulls:
                raise Refused(codes.INVALID_REQUEST, f"Null value not supported for : {nulls[0]}")
            values = {c.name: c.value for c in resource.configs}
            if resource.resource_type in (RESOURCE_TOPIC, RESOURCE_BROKER):
                await _alter(state, resource.resource_type, resource.resource_name, values,
                             request.validate_only)
            elif resource.resource_type == gc.RESOURCE_GROUP:
                await gc.alter(state, resource.resource_name, values, request.validate_only)
            else:
                raise Refused(codes.INVALID_REQUEST,
                               f"Unsupported resource type: {resource.resource_type}")
            results.append(make(m.AlterConfigsResourceResponse, error_code=codes.NONE,
                                 error_message=None, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
        except Refused as e:
            results.append(make(m.AlterConfigsResourceResponse, error_code=e.code,
                                 error_message=e.message, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
    return make(response_cls, throttle_time=NO_THROTTLE, responses=tuple(results))
