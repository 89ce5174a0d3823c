"""Kafka's admin APIs over the Store: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DeleteRecords, DescribeCluster,
DescribeLogDirs.

Each handler answers as Kafka 4.4's broker and controller do (``ControllerApis``,
``ReplicationControlManager``, ``ConfigurationControlManager``, ``ConfigHelper``,
``ReplicaManager``): the same error codes and, where a client shows them, the same messages.
This broker is one node: a replication factor above 1, or a replica on another node, is
INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT with Kafka's words.

Where seglog differs on purpose: internal topics (``__consumer_offsets``,
``__transaction_state``) cannot be deleted or grown (TOPIC_DELETION_DISABLED,
INVALID_PARTITIONS: the coordinators map groups and transactional ids to their partitions),
and dynamic broker configs must be names this broker knows (INVALID_CONFIG otherwise; Kafka
keeps unknown names). Dynamic broker configs and their persistence are
:mod:`seglog.server.apis.admin_configs`.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import uuid
from typing import Any, Iterable

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from ...errors import InvalidConfigError, OffsetOutOfRangeError, SeglogError
from ...storage import checkpoints
from ...storage.config import TOPIC_CONFIG_NAMES, LogConfig
from ..config import CONFIG_DEFS, BrokerConfig
from ..registry import ApiHandler
from . import admin_configs as cfg
from .admin_docs import TOPIC_CONFIG_DOCS

__all__ = ["HANDLERS", "start", "stop", "dynamic_configs", "topic_name_error"]

log = logging.getLogger("seglog.server.admin")

_EXT = __name__
_ZERO_UUID = uuid.UUID(int=0)
_NO_THROTTLE = datetime.timedelta(0)
#: Most partitions a topic may have: the Store's ``TOPIC_PARTITIONS_MAX`` (the server may not
#: import the store module, which loads the embedded clients; a test checks they agree).
TOPIC_PARTITIONS_MAX = 10000
#: Kafka's ``QuorumController.MAX_RECORDS_PER_USER_OP``: the most metadata records (one per
#: topic, config and partition) one CreateTopics may write, and the most partitions one
#: CreateTopics or CreatePartitions may ask for.
_RECORDS_PER_REQUEST_MAX = 10000
#: Partition counts above this are created on a worker thread (run_blocking).
_INLINE_PARTITIONS_MAX = 16

# Kafka's error codes (Errors.java) used here.
NONE, UNKNOWN_SERVER_ERROR, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 0, -1, 1, 3
INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS = 17, 36, 37
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG = 38, 39, 40
INVALID_REQUEST, POLICY_VIOLATION, TOPIC_DELETION_DISABLED, UNKNOWN_TOPIC_ID = 42, 44, 73, 100
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115
_INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details.")
_UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
_UNKNOWN_TOPIC_ID_MESSAGE = "This server does not host this topic ID."

# ConfigResource.Type ids.
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER = 2, 4, 8
# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}
#: The cluster operations an unsecured Kafka broker reports (no authorizer: all of them).
_CLUSTER_AUTHORIZED_OPERATIONS = 8096


class _Refused(Exception):
    """One resource's error: ``code`` and ``message`` go into its result."""

    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message


# --- building kio responses of any version --------------------------------------------------


def _classes(api_key: int, version: int) -> tuple[type, Any]:
    response = load_response_schema(api_key, version)
    return response, sys.modules[response.__module__]


def _make(cls: type, **values: Any) -> Any:
    """``cls(**values)`` keeping only the fields this version of ``cls`` has; error codes
    become kio's ErrorCode and throttle times timedeltas."""
    fields = cls.__dataclass_fields__
    kwargs = {}
    for name, value in values.items():
        f = fields.get(name)
        if f is None:
            continue
        kind = f.metadata.get("kafka_type")
        if kind == "error_code" and not isinstance(value, ErrorCode):
            value = ErrorCode(value)
        elif kind == "timedelta_i32" and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        kwargs[name] = value
    return cls(**kwargs)


def _code_of(exc: BaseException) -> int:
    code = getattr(exc, "kafka_error_code", UNKNOWN_SERVER_ERROR)
    try:
        ErrorCode(code)
    except ValueError:
        return UNKNOWN_SERVER_ERROR
    return code


# --- per-broker state -----------------------------------------------------------------------


async def start(state) -> None:
    """Load the persisted dynamic broker configs and make ``state.config`` the effective one
    (static configs under them); the store's topic defaults become the effective ones, and
    topics that override nothing follow them."""
    static = state.config if isinstance(state.config, BrokerConfig) else BrokerConfig(
        dict(getattr(state.config, "overrides", {})))
    dynamic = cfg.DynamicConfigs(state.store.path, static)
    state.extensions[_EXT] = dynamic
    state.config = dynamic.effective
    if not state.store.read_only:
        await state.run_blocking(_use_topic_defaults, state.store, dynamic,
                                 dynamic.effective.log_config())
        if not os.path.exists(dynamic.path):
            _save(state)  # a new cluster's dynamic defaults (see admin_configs)


async def stop(state) -> None:
    """Nothing to release: dynamic configs are written when they change."""


def dynamic_configs(state) -> cfg.DynamicConfigs:
    """The broker's :class:`~seglog.server.apis.admin_configs.DynamicConfigs` (made on first
    use when the ``start`` hook did not run, as in handler-level tests)."""
    dynamic = state.extensions.get(_EXT)
    if dynamic is None:
        static = state.config if isinstance(state.config, BrokerConfig) else BrokerConfig()
        dynamic = cfg.DynamicConfigs(state.store.path, static)
        state.extensions[_EXT] = dynamic
    return dynamic


def _topic_defaults(state):
    return dynamic_configs(state).effective.log_config()


def _config(state, name: str, default: Any) -> Any:
    try:
        return state.config[name]
    except KeyError:
        return default


def _overrides(state, topic) -> dict[str, str]:
    """Topic ``topic``'s overrides (see ``DynamicConfigs.overrides_of``)."""
    return dynamic_configs(state).overrides_of(topic.topic_id, topic.config,
                                               _topic_defaults(state))


def _save(state) -> None:
    """Persist the dynamic configs and the explicit overrides of the topics that exist."""
    store = state.store
    live = set()
    for name in store.topics():
        try:
            live.add(store.topic(name).topic_id)
        except SeglogError:
            continue
    dynamic_configs(state).save(live)


def _use_topic_defaults(store, dynamic, new_defaults) -> None:
    """Make ``new_defaults`` the store's topic defaults and give every topic them under its
    overrides, in one registry write."""
    old_defaults = store.topic_config_defaults
    store.set_topic_config_defaults(new_defaults)
    if new_defaults != old_defaults:
        _rebase_topics(store, dynamic, old_defaults, new_defaults)


def _rebase_topics(store, dynamic, old_defaults, new_defaults) -> None:
    """Give every topic ``new_defaults`` under its overrides (those relative to
    ``old_defaults``), in one registry write."""
    changes = {}
    for name in store.topics():
        topic = store.topic(name)
        overrides = dynamic.overrides_of(topic.topic_id, topic.config, old_defaults)
        new = new_defaults.replace(**overrides)
        if new != topic.config:
            changes[name] = new
    if changes:
        store.alter_topic_configs(changes)


# --- topic names ------------------------------------------------------------------------------


def topic_name_error(name: Any) -> str | None:
    """Kafka 4.4's ``Topic.validate`` message for an illegal topic name, or None."""
    if not isinstance(name, str) or not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > 249:
        return (f"Topic name is invalid: the length of '{name}' is longer than the max "
                "allowed length 249")
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def _duplicates(names: Iterable[Any]) -> set:
    seen, dups = set(), set()
    for name in names:
        (dups if name in seen else seen).add(name)
    return dups


def _check_replicas(broker_ids: Iterable[int], node_id: int) -> None:
    """Kafka's ``validateManualPartitionAssignment`` on a one-node cluster."""
    broker_ids = list(broker_ids)
    if not broker_ids:
        raise _Refused(INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes an empty replica list.")
    seen = set()
    for broker_id in broker_ids:
        if broker_id != node_id:
            raise _Refused(INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes broker {broker_id}, but "
                           "no such broker is registered.")
        if broker_id in seen:
            raise _Refused(INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes the broker {broker_id} "
                           "more than once.")
        seen.add(broker_id)


# --- CreateTopics ---------------------------------------------------------------------------


def _topic_config_entries(state, topic_config, overrides, *, synonyms: bool = False,
                          documentation: bool = False, keys=None) -> list[dict]:
    """Kafka's description of a topic's configs: ``[{name, value, read_only, config_source,
    is_sensitive, synonyms, config_type, documentation}]`` sorted by name."""
    dynamic = dynamic_configs(state)
    values = topic_config.to_kafka(topic_only=True)
    out = []
    for name in sorted(TOPIC_CONFIG_NAMES):
        if keys and name not in keys:
            continue
        value = values[name]
        found = []
        if name in overrides:
            found.append((name, value, cfg.SOURCE_TOPIC))
        found += cfg.topic_synonyms(dynamic, name)
        out.append({"name": name, "value": value, "read_only": False,
                    "config_source": found[0][2] if found else cfg.SOURCE_DEFAULT,
                    "is_sensitive": False, "synonyms": found if synonyms else [],
                    "config_type": cfg.config_type_id(cfg.topic_config_kind(name)),
                    "documentation": TOPIC_CONFIG_DOCS.get(name) if documentation else None})
    return out


def _creation_config(state, topic) -> Any:
    """The LogConfig of a topic to create, or _Refused (Kafka's computeConfigChanges and
    incrementalAlterConfig validation)."""
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise _Refused(INVALID_CONFIG,
                       "Null value not supported for topic configs: " + ",".join(nulls))
    overrides = {c.name: c.value for c in topic.configs}
    try:
        return cfg.topic_config_from(_topic_defaults(state), overrides), overrides
    except InvalidConfigError as e:
        raise _Refused(INVALID_CONFIG, str(e)) from None


def _creation_count(state, topic) -> int:
    """The partition count of a topic to create, or _Refused (Kafka's createTopic checks)."""
    node_id = state.node_id
    if topic.assignments:
        if topic.replication_factor != -1:
            raise _Refused(INVALID_REQUEST, "A manual partition assignment was specified, but "
                           "replication factor was not set to -1.")
        if topic.num_partitions != -1:
            raise _Refused(INVALID_REQUEST, "A manual partition assignment was specified, but "
                           "numPartitions was not set to -1.")
        indexes = set()
        for assignment in topic.assignments:
            if assignment.partition_index in indexes:
                raise _Refused(INVALID_REPLICA_ASSIGNMENT,
                               "Found multiple manual partition assignments for partition "
                               f"{assignment.partition_index}")
            _check_replicas(assignment.broker_ids, node_id)
            indexes.add(assignment.partition_index)
        if indexes != set(range(len(indexes))):
            raise _Refused(INVALID_REPLICA_ASSIGNMENT,
                           "partitions should be a consecutive 0-based integer sequence")
        count = len(indexes)
    elif topic.replication_factor < -1 or topic.replication_factor == 0:
        raise _Refused(INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, "
                       "or -1 to use the default value.")
    elif topic.num_partitions < -1 or topic.num_partitions == 0:
        raise _Refused(INVALID_PARTITIONS,
                       "Number of partitions was set to an invalid non-positive value.")
    else:
        count = (_config(state, "num.partitions", 1) if topic.num_partitions == -1
                 else topic.num_partitions)
        factor = (_config(state, "default.replication.factor", 1)
                  if topic.replication_factor == -1 else topic.replication_factor)
        if factor > 1:
            raise _Refused(INVALID_REPLICATION_FACTOR,
                           f"Unable to replicate the partition {factor} time(s): The target "
                           f"replication factor of {factor} cannot be reached because only 1 "
                           "broker(s) are registered or some brokers have all their log "
                           "directories cordoned.")
    return count


def _requested_partitions(state, topic) -> int:
    if topic.assignments:
        return len(topic.assignments)
    if topic.num_partitions == -1:
        return _config(state, "num.partitions", 1)
    return max(topic.num_partitions, 0)


async def create_topics(ctx, request) -> Any:
    """CreateTopics v2-v7 (Kafka's ``ReplicationControlManager.createTopics``): every topic
    is checked first; then, unless ``validate_only``, the valid ones are created."""
    state = ctx.broker
    store = state.store
    response_cls, m = _classes(19, ctx.api_version)
    config_cls = getattr(m, "CreatableTopicConfigs", None)  # v5+

    def failed(name, code, message):
        # None is Kafka's zero uuid on the wire (kio reads the zero uuid back as None).
        return _make(m.CreatableTopicResult, name=name, topic_id=None, error_code=code,
                     error_message=message, topic_config_error_code=0, num_partitions=-1,
                     replication_factor=-1, configs=())

    names = list(dict.fromkeys(t.name for t in request.topics))  # Kafka answers a name once
    if sum(_requested_partitions(state, t) for t in request.topics) > _RECORDS_PER_REQUEST_MAX:
        # Kafka 4.4 refuses the whole request before looking at any topic.
        return _make(response_cls, throttle_time=_NO_THROTTLE, topics=tuple(
            failed(n, POLICY_VIOLATION, "Excessively large number of partitions per request.")
            for n in names))
    dups = _duplicates(t.name for t in request.topics)
    existing = set(store.topics())
    checked: dict[str, Any] = {}  # name -> (topic, config, overrides, count) or _Refused
    for topic in request.topics:
        name = topic.name
        if name in checked:
            continue
        try:
            if name in dups:
                raise _Refused(INVALID_REQUEST, "Duplicate topic name.")
            why = topic_name_error(name)
            if why:
                raise _Refused(INVALID_TOPIC_EXCEPTION, why)
            if name in existing:
                raise _Refused(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            key = name.replace(".", "_")
            for other in existing:
                if other.replace(".", "_") == key:
                    raise _Refused(INVALID_TOPIC_EXCEPTION,
                                   f"Topic '{name}' collides with existing topic: {other}")
            config, overrides = _creation_config(state, topic)
            checked[name] = (topic, config, overrides, _creation_count(state, topic))
        except _Refused as e:
            checked[name] = e
    # Kafka's controller writes one record per topic, per config and per partition, and
    # refuses a request that needs more than it writes in one batch.
    records = sum(1 + len(c[0].configs) + c[3] for c in checked.values()
                  if not isinstance(c, _Refused))
    if records > _RECORDS_PER_REQUEST_MAX:
        return _make(response_cls, throttle_time=_NO_THROTTLE, topics=tuple(
            failed(n, POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
            for n in names))
    results = []
    for name in names:
        c = checked[name]
        try:
            if isinstance(c, _Refused):
                raise c
            topic, config, overrides, count = c
            if count > TOPIC_PARTITIONS_MAX:
                raise _Refused(INVALID_PARTITIONS, f"seglog topics have at most "
                               f"{TOPIC_PARTITIONS_MAX} partitions")
            if request.validate_only:
                topic_id = uuid.uuid4()  # as Kafka, which draws the id before validate_only
            else:
                try:
                    if count > _INLINE_PARTITIONS_MAX:
                        made = await state.run_blocking(store.create_topic, name, count, config)
                    else:
                        made = store.create_topic(name, count, config)
                except (SeglogError, ValueError, TypeError) as e:
                    raise _Refused(_code_of(e), str(e)) from None
                topic_id = checkpoints.uuid_from_kafka_str(made.topic_id)
                if overrides:
                    dynamic_configs(state).set_explicit(made.topic_id, config, overrides)
                    _save(state)
            entries = (_topic_config_entries(state, config, overrides)
                       if config_cls is not None else [])
            results.append(_make(
                m.CreatableTopicResult, name=name, topic_id=topic_id, error_code=NONE,
                error_message=None, topic_config_error_code=0, num_partitions=count,
                replication_factor=1,
                configs=tuple(_make(config_cls, **e) for e in entries)))
        except _Refused as e:
            results.append(failed(name, e.code, e.message))
    return _make(response_cls, throttle_time=_NO_THROTTLE, topics=tuple(results))


# --- DeleteTopics ---------------------------------------------------------------------------


def _topic_ids(store) -> dict[uuid.UUID, str]:
    out = {}
    for name in store.topics():
        try:
            out[checkpoints.uuid_from_kafka_str(store.topic(name).topic_id)] = name
        except SeglogError:
            continue  # deleted meanwhile
    return out


async def delete_topics(ctx, request) -> Any:
    """DeleteTopics v1-v6, by name and (v6+) by topic id (Kafka's ``ControllerApis
    .deleteTopics``)."""
    state = ctx.broker
    store = state.store
    response_cls, m = _classes(20, ctx.api_version)
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id if t.topic_id not in (None, _ZERO_UUID) else None)
                  for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    # Kafka counts repeats among the entries that name exactly one of the two.
    if not _config(state, "delete.topic.enable", True):
        # Kafka refuses the whole request first (INVALID_REQUEST before v3).
        code = TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else INVALID_REQUEST
        return _make(response_cls, throttle_time=_NO_THROTTLE, responses=tuple(
            _make(m.DeletableTopicResult, name=n, topic_id=i, error_code=code,
                  error_message="Topic deletion is disabled.") for n, i in wanted))
    dups = _duplicates(n for n, i in wanted if n is not None and i is None)
    dup_ids = _duplicates(i for n, i in wanted if i is not None and n is None)
    ids = _topic_ids(store)
    names_to_ids = {n: i for i, n in ids.items()}
    results = []
    reported = set()
    for name, topic_id in wanted:
        try:
            if name in dups or topic_id in dup_ids:
                if (name, topic_id) in reported:
                    continue  # Kafka answers a repeated name once
                reported.add((name, topic_id))
            if name is not None and topic_id is not None:
                raise _Refused(INVALID_REQUEST, "You may not specify both topic name and "
                               "topic id.")
            if name is None and topic_id is None:
                raise _Refused(INVALID_REQUEST, "Neither topic name nor id were specified.")
            if name in dups or topic_id in dup_ids:
                raise _Refused(INVALID_REQUEST, "Duplicate topic name." if name is not None
                               else "Duplicate topic id.")
            if topic_id is not None:
                name = ids.get(topic_id)
                if name is None:
                    raise _Refused(UNKNOWN_TOPIC_ID, _UNKNOWN_TOPIC_ID_MESSAGE)
            elif name not in names_to_ids:
                raise _Refused(UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC_MESSAGE)
            topic_id = names_to_ids[name]
            if store.topic(name).is_internal:
                raise _Refused(TOPIC_DELETION_DISABLED,
                               f"seglog keeps its internal topic {name}: it cannot be deleted")
            try:
                await state.run_blocking(store.delete_topic, name)
            except SeglogError as e:
                raise _Refused(_code_of(e), str(e)) from None
            results.append(_make(m.DeletableTopicResult, name=name, topic_id=topic_id,
                                 error_code=NONE, error_message=None))
        except _Refused as e:
            results.append(_make(m.DeletableTopicResult, name=name,
                                 topic_id=topic_id, error_code=e.code,
                                 error_message=e.message))
    return _make(response_cls, throttle_time=_NO_THROTTLE, responses=tuple(results))


# --- CreatePartitions -----------------------------------------------------------------------


def _partition_counts(store) -> dict[str, int]:
    out = {}
    for name in store.topics():
        try:
            out[name] = store.topic(name).partitions
        except SeglogError:
            continue  # deleted meanwhile
    return out


async def create_partitions(ctx, request) -> Any:
    """CreatePartitions v0-v3 (Kafka's ``ReplicationControlManager.createPartitions``):
    increase only, manual assignments on this node, validate_only."""
    state = ctx.broker
    store = state.store
    response_cls, m = _classes(37, ctx.api_version)
    dups = _duplicates(t.name for t in request.topics)
    counts = _partition_counts(store)
    added = sum(t.count - counts[t.name] for t in request.topics if t.name in counts)
    if added > _RECORDS_PER_REQUEST_MAX:
        # Kafka 4.4 refuses the whole request before looking at any topic.
        return _make(response_cls, throttle_time=_NO_THROTTLE, results=tuple(
            _make(m.CreatePartitionsTopicResult, name=t.name, error_code=POLICY_VIOLATION,
                  error_message="Excessively large number of additional partitions per "
                  "request.") for t in request.topics))
    results = []
    for wanted in request.topics:
        name = wanted.name
        try:
            if name in dups:
                raise _Refused(INVALID_REQUEST, "Duplicate topic name.")
            if name not in store:
                raise _Refused(UNKNOWN_TOPIC_OR_PARTITION)
            topic = store.topic(name)
            current = topic.partitions
            count = wanted.count
            if count < current:
                raise _Refused(INVALID_PARTITIONS, f"The topic {name} currently has {current} "
                               f"partition(s); {count} would not be an increase.")
            if count == current:
                raise _Refused(INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            if count > TOPIC_PARTITIONS_MAX:
                raise _Refused(INVALID_PARTITIONS, f"seglog topics have at most "
                               f"{TOPIC_PARTITIONS_MAX} partitions")
            if wanted.assignments is not None:
                if len(wanted.assignments) != count - current:
                    raise _Refused(INVALID_REPLICA_ASSIGNMENT,
                                   f"Attempted to add {count - current} additional partition(s)"
                                   f", but only {len(wanted.assignments)} assignment(s) were "
                                   "specified.")
                for assignment in wanted.assignments:
                    _check_replicas(assignment.broker_ids, state.node_id)
            if topic.is_internal:
                raise _Refused(INVALID_PARTITIONS, f"seglog does not add partitions to its "
                               f"internal topic {name}")
            if not request.validate_only:
                try:
                    await state.run_blocking(store.create_partitions, name, count)
                except (SeglogError, ValueError) as e:
                    raise _Refused(_code_of(e), str(e)) from None
            results.append(_make(m.CreatePartitionsTopicResult, name=name, error_code=NONE,
                                 error_message=None))
        except _Refused as e:
            results.append(_make(m.CreatePartitionsTopicResult, name=name, error_code=e.code,
                                 error_message=e.message))
    return _make(response_cls, throttle_time=_NO_THROTTLE, results=tuple(results))


# --- DescribeConfigs ------------------------------------------------------------------------


def _broker_id_of(state, resource_name: str, *, describe: bool) -> bool:
    """Whether the broker resource names this broker (True) or the cluster default (False);
    _Refused otherwise, in Kafka's words."""
    if not resource_name:
        return False
    try:
        broker_id = int(resource_name)
    except ValueError:
        raise _Refused(INVALID_REQUEST, f"Broker id must be an integer, but it is: "
                       f"{resource_name}") from None
    if broker_id != state.node_id:
        expected = f"{state.node_id} or empty string" if describe else f"{state.node_id}"
        raise _Refused(INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but "
                       f"received {resource_name}")
    return True


def _broker_config_entries(state, per_broker: bool, *, synonyms: bool,
                           documentation: bool, keys) -> list[dict]:
    """Kafka's ``createBrokerConfigEntry`` over every config (this broker) or the dynamic
    cluster defaults (the ``""`` resource)."""
    dynamic = dynamic_configs(state)
    effective = dynamic.effective
    names = sorted(CONFIG_DEFS) if per_broker else sorted(dynamic.cluster_default)
    out = []
    for name in names:
        if keys and name not in keys:
            continue
        d = CONFIG_DEFS.get(name)
        kind = d.kind if d is not None else "string"
        sensitive = kind == "password"
        found = dynamic.synonyms(name, per_broker=per_broker)
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
                    "documentation": (d.doc if d is not None else None) if documentation
                    else None})
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


def _alter_loggers(state, resource, validate_only: bool) -> None:
    """IncrementalAlterConfigs on BROKER_LOGGER (Kafka's ``ConfigAdminManager
    .validateLogLevelConfigs`` then ``Log4jController``): SET a level, DELETE to inherit the
    root's; not kept across restarts, as in Kafka."""
    try:
        int(resource.resource_name)
    except ValueError:
        raise _Refused(INVALID_REQUEST, "Node id must be an integer, but it is: "
                       f"{resource.resource_name}") from None
    _broker_id_of(state, resource.resource_name, describe=False)
    loggers = _loggers()
    changes = []
    for change in resource.configs:
        name, op, value = change.name, change.config_operation, change.value
        if op in (OP_APPEND, OP_SUBTRACT):
            raise _Refused(INVALID_REQUEST, f"{_OP_NAMES[op]} operation is not allowed for the "
                           "BROKER_LOGGER resource")
        if op not in (OP_SET, OP_DELETE):
            raise _Refused(UNKNOWN_SERVER_ERROR)
        if name not in loggers:
            raise _Refused(INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == OP_SET and (value or "") not in _KAFKA_LEVELS:
            raise _Refused(INVALID_CONFIG, f"Cannot set the log level of {name} to {value} as "
                           "it is not a supported log level. Valid log levels are "
                           f"{', '.join(_KAFKA_LEVELS)}")
        if op == OP_DELETE and name == "root":
            raise _Refused(INVALID_REQUEST, "Removing the log level of the root logger is "
                           "not allowed")
        changes.append((loggers[name], _KAFKA_LEVELS[value] if op == OP_SET else logging.NOTSET))
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)


def _logger_entries(keys) -> list[dict]:
    loggers = _loggers()
    return [{"name": name, "value": _level_name(lg.getEffectiveLevel()),
             "read_only": False, "config_source": 6, "is_sensitive": False, "synonyms": [],
             "config_type": 2, "documentation": None}
            for name, lg in loggers.items() if not keys or name in keys]


async def describe_configs(ctx, request) -> Any:
    """DescribeConfigs v1-v4 for topics, this broker, the cluster default (``""``) and this
    broker's loggers (Kafka's ``ConfigHelper.describeConfigs``)."""
    state = ctx.broker
    store = state.store
    response_cls, m = _classes(32, ctx.api_version)
    known = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER)
    if any(r.resource_type not in known for r in request.resources):
        # Kafka fails the whole request on a resource type it cannot authorize.
        return _make(response_cls, throttle_time=_NO_THROTTLE, results=tuple(
            _make(m.DescribeConfigsResult, error_code=INVALID_REQUEST,
                  error_message=_INVALID_REQUEST_MESSAGE, resource_type=r.resource_type,
                  resource_name=r.resource_name, configs=())
            for r in request.resources))
    synonyms = bool(request.include_synonyms)
    documentation = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        keys = set(resource.configuration_keys or ())
        try:
            if resource.resource_type == RESOURCE_TOPIC:
                why = topic_name_error(resource.resource_name)
                if why:
                    raise _Refused(INVALID_TOPIC_EXCEPTION, why)
                if resource.resource_name not in store:
                    raise _Refused(UNKNOWN_TOPIC_OR_PARTITION, "")
                topic = store.topic(resource.resource_name)
                config = topic.config
                overrides = _overrides(state, topic)
                entries = _topic_config_entries(state, config, overrides, synonyms=synonyms,
                                                documentation=documentation, keys=keys)
            elif resource.resource_type == RESOURCE_BROKER:
                per_broker = _broker_id_of(state, resource.resource_name, describe=True)
                entries = _broker_config_entries(state, per_broker, synonyms=synonyms,
                                                 documentation=documentation, keys=keys)
            else:
                if not resource.resource_name:
                    raise _Refused(INVALID_REQUEST, "Broker id must not be empty")
                _broker_id_of(state, resource.resource_name, describe=False)
                entries = _logger_entries(keys)
            configs = tuple(_make(m.DescribeConfigsResourceResult, **{
                **e, "synonyms": tuple(_make(m.DescribeConfigsSynonym, name=n, value=v,
                                             source=s) for n, v, s in e["synonyms"])})
                for e in entries)
            results.append(_make(m.DescribeConfigsResult, error_code=NONE, error_message=None,
                                 resource_type=resource.resource_type,
                                 resource_name=resource.resource_name, configs=configs))
        except _Refused as e:
            results.append(_make(m.DescribeConfigsResult, error_code=e.code,
                                 error_message=e.message, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name, configs=()))
    return _make(response_cls, throttle_time=_NO_THROTTLE, results=tuple(results))


# --- AlterConfigs and IncrementalAlterConfigs -----------------------------------------------


def _list_items(value: str | None) -> list[str]:
    if not value:
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def _incremental(current: dict[str, str], effective: dict[str, str], changes, *,
                 is_list, append_error) -> dict[str, str]:
    """Apply IncrementalAlterConfigs ``changes`` (name, op, value) to ``current`` (the
    overrides), with ``effective`` the values an APPEND/SUBTRACT starts from when no override
    exists. Returns the new overrides or raises _Refused."""
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise _Refused(INVALID_REQUEST, "Error due to duplicate config keys")
    out = dict(current)
    for change in changes:
        name, op, value = change.name, change.config_operation, change.value
        if op not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise _Refused(UNKNOWN_SERVER_ERROR)
        if op != OP_DELETE and value is None:
            raise _Refused(INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == OP_SET:
            out[name] = value
        elif op == OP_DELETE:
            out.pop(name, None)
        else:
            if not is_list(name):
                raise _Refused(INVALID_CONFIG, append_error(name, op))
            items = _list_items(out.get(name, effective.get(name)))
            if op == OP_APPEND:
                items += [v for v in _list_items(value) if v not in items]
            else:
                drop = set(_list_items(value))
                items = [v for v in items if v not in drop]
            out[name] = ",".join(items)
    return out


def _alter_topic(state, name: str, new_overrides: dict[str, str], validate_only: bool) -> None:
    store = state.store
    if topic_name_error(name) or name not in store:
        raise _Refused(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    try:
        config = cfg.topic_config_from(_topic_defaults(state), new_overrides)
    except InvalidConfigError as e:
        raise _Refused(INVALID_CONFIG, str(e)) from None
    if not validate_only:
        try:
            store.alter_topic_configs({name: config})
            topic = store.topic(name)
        except SeglogError as e:
            raise _Refused(_code_of(e), str(e)) from None
        dynamic_configs(state).set_explicit(topic.topic_id, config, new_overrides)
        _save(state)


def _alter_broker(state, resource_name: str, new_values: dict[str, str],
                  validate_only: bool) -> None:
    """Replace one dynamic layer (this broker's, or the cluster default for ``""``) with
    ``new_values``; topics follow a changed topic default; persisted."""
    dynamic = dynamic_configs(state)
    per_broker = _broker_id_of(state, resource_name, describe=False)
    old_layer = dynamic.per_broker if per_broker else dynamic.cluster_default
    changed = {n for n in set(old_layer) | set(new_values)
               if old_layer.get(n) != new_values.get(n)}
    unknown = sorted(n for n in changed if n not in CONFIG_DEFS)
    if unknown:
        raise _Refused(INVALID_CONFIG, f"Unknown broker config {unknown[0]!r}")
    static_only = sorted(n for n in changed if n not in cfg.DYNAMIC_BROKER_CONFIGS)
    if static_only:
        raise _Refused(INVALID_REQUEST, "Cannot update these configs dynamically: "
                       f"[{', '.join(static_only)}]")
    if not per_broker and cfg.CLUSTER_MIN_ISR not in new_values:
        raise _Refused(INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed "
                       "while ELR is enabled.")
    layers = ((new_values, dynamic.cluster_default) if per_broker
              else (dynamic.per_broker, new_values))
    try:
        effective = dynamic.merged(*layers)
    except InvalidConfigError as e:
        raise _Refused(INVALID_REQUEST, str(e)) from None
    if validate_only or not changed:
        return
    if per_broker:
        dynamic.per_broker = dict(new_values)
    else:
        dynamic.cluster_default = dict(new_values)
    dynamic.effective = effective
    state.config = effective
    _use_topic_defaults(state.store, dynamic, effective.log_config())
    _save(state)


def _is_list_topic_config(name: str) -> bool:
    return name in TOPIC_CONFIG_NAMES and cfg.topic_config_kind(name) == "list"


def _is_list_broker_config(name: str) -> bool:
    d = CONFIG_DEFS.get(name)
    return d is not None and d.kind == "list"


async def incremental_alter_configs(ctx, request) -> Any:
    """IncrementalAlterConfigs v0-v1 (SET, DELETE, APPEND, SUBTRACT) on topics and on this
    broker or the cluster default (Kafka's ``ConfigurationControlManager``)."""
    state = ctx.broker
    response_cls, m = _classes(44, ctx.api_version)
    results = []
    for resource in request.resources:
        try:
            if resource.resource_type == RESOURCE_TOPIC:
                name = resource.resource_name
                if topic_name_error(name) or name not in state.store:
                    raise _Refused(UNKNOWN_TOPIC_OR_PARTITION,
                                   f"The topic '{name}' does not exist.")
                topic = state.store.topic(name)
                config = topic.config
                current = _overrides(state, topic)
                new = _incremental(
                    current, config.to_kafka(topic_only=True), resource.configs,
                    is_list=_is_list_topic_config,
                    append_error=lambda n, op: (f"Unknown topic config name: {n}"
                                                if n not in TOPIC_CONFIG_NAMES else
                                                f"Can't {_OP_NAMES[op]} to key {n} because "
                                                "its type is not LIST."))
                _alter_topic(state, name, new, request.validate_only)
            elif resource.resource_type == RESOURCE_BROKER:
                dynamic = dynamic_configs(state)
                per_broker = _broker_id_of(state, resource.resource_name, describe=False)
                current = dynamic.per_broker if per_broker else dynamic.cluster_default
                effective = {n: cfg.format_value(CONFIG_DEFS[n].kind, v)
                             for n, v in dynamic.effective.items()}
                new = _incremental(
                    current, effective, resource.configs, is_list=_is_list_broker_config,
                    append_error=lambda n, op: ("Config value append is not allowed for config "
                                                f"key: {n}" if op == OP_APPEND else
                                                "Config value subtract is not allowed for "
                                                f"config key: {n}"))
                _alter_broker(state, resource.resource_name, new, request.validate_only)
            elif resource.resource_type == RESOURCE_BROKER_LOGGER:
                _alter_loggers(state, resource, request.validate_only)
            else:
                raise _Refused(INVALID_REQUEST,
                               f"Unsupported resource type: {resource.resource_type}")
            results.append(_make(m.AlterConfigsResourceResponse, error_code=NONE,
                                 error_message=None, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
        except _Refused as e:
            results.append(_make(m.AlterConfigsResourceResponse, error_code=e.code,
                                 error_message=e.message, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
    return _make(response_cls, throttle_time=_NO_THROTTLE, responses=tuple(results))


async def alter_configs(ctx, request) -> Any:
    """AlterConfigs v0-v2, the legacy API: the given configs replace the resource's whole
    override set (a topic's) or dynamic layer (the broker's)."""
    state = ctx.broker
    response_cls, m = _classes(33, ctx.api_version)
    results = []
    for resource in request.resources:
        try:
            names = [c.name for c in resource.configs]
            if len(set(names)) != len(names):
                raise _Refused(INVALID_REQUEST, "Error due to duplicate config keys")
            nulls = [c.name for c in resource.configs if c.value is None]
            if nulls:
                raise _Refused(INVALID_REQUEST, f"Null value not supported for : {nulls[0]}")
            values = {c.name: c.value for c in resource.configs}
            if resource.resource_type == RESOURCE_TOPIC:
                _alter_topic(state, resource.resource_name, values, request.validate_only)
            elif resource.resource_type == RESOURCE_BROKER:
                _alter_broker(state, resource.resource_name, values, request.validate_only)
            else:
                raise _Refused(INVALID_REQUEST,
                               f"Unsupported resource type: {resource.resource_type}")
            results.append(_make(m.AlterConfigsResourceResponse, error_code=NONE,
                                 error_message=None, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
        except _Refused as e:
            results.append(_make(m.AlterConfigsResourceResponse, error_code=e.code,
                                 error_message=e.message, resource_type=resource.resource_type,
                                 resource_name=resource.resource_name))
    return _make(response_cls, throttle_time=_NO_THROTTLE, responses=tuple(results))


# --- DeleteRecords --------------------------------------------------------------------------


def _delete_records(store, topics) -> list[tuple[str, list[tuple[int, int, int]]]]:
    # Kafka reads the request into a map by partition: a partition named twice is answered
    # once, for the last offset given.
    wanted: dict[str, dict[int, int]] = {}
    for topic in topics:
        for part in topic.partitions:
            wanted.setdefault(topic.name, {})[part.partition_index] = part.offset
    out = []
    for name, partitions in wanted.items():
        rows = []
        for partition, offset in partitions.items():
            try:
                log_ = store.topic(name).log(partition)
                if not log_.config.deletion_enabled:
                    # Kafka's Partition.deleteRecordsOnLeader: "Records of partition ... can
                    # not be deleted due to the configured policy".
                    rows.append((partition, -1, POLICY_VIOLATION))
                    continue
                low = log_.delete_records_before(offset)
                rows.append((partition, low, NONE))
            except OffsetOutOfRangeError:
                rows.append((partition, -1, OFFSET_OUT_OF_RANGE))
            except (SeglogError, ValueError, TypeError) as e:
                rows.append((partition, -1, _code_of(e)))
        out.append((name, rows))
    return out


async def delete_records(ctx, request) -> Any:
    """DeleteRecords v0-v2 (Kafka's ``ReplicaManager.deleteRecords``): the log start offset
    moves up to ``offset`` (-1: the high watermark); the answer's ``low_watermark`` is the
    new log start offset, -1 with an error."""
    response_cls, m = _classes(21, ctx.api_version)
    done = await ctx.broker.run_blocking(_delete_records, ctx.broker.store, request.topics)
    return _make(response_cls, throttle_time=_NO_THROTTLE, topics=tuple(
        _make(m.DeleteRecordsTopicResult, name=name, partitions=tuple(
            _make(m.DeleteRecordsPartitionResult, partition_index=p, low_watermark=low,
                  error_code=code) for p, low, code in rows))
        for name, rows in done))


# --- DescribeCluster ------------------------------------------------------------------------


async def describe_cluster(ctx, request) -> Any:
    """DescribeCluster v0-v2: this node is the only broker and the controller."""
    state = ctx.broker
    response_cls, m = _classes(60, ctx.api_version)
    endpoint_type = getattr(request, "endpoint_type", 1)
    if endpoint_type != 1:
        code, message = ((MISMATCHED_ENDPOINT_TYPE, "The request was sent to an endpoint of "
                          "type BROKER, but we wanted an endpoint of type CONTROLLER")
                         if endpoint_type == 2 else
                         (UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint_type}"))
        return _make(response_cls, throttle_time=_NO_THROTTLE, error_code=code,
                     error_message=message, endpoint_type=1, cluster_id="", controller_id=-1,
                     brokers=(), cluster_authorized_operations=-2**31)
    broker = _make(m.DescribeClusterBroker, broker_id=state.node_id, host=state.host,
                   port=state.port, rack=None, is_fenced=False)
    operations = (_CLUSTER_AUTHORIZED_OPERATIONS if request.include_cluster_authorized_operations
                  else -2**31)
    return _make(response_cls, throttle_time=_NO_THROTTLE, error_code=NONE, error_message=None,
                 endpoint_type=1, cluster_id=state.cluster_id, controller_id=state.node_id,
                 brokers=(broker,), cluster_authorized_operations=operations)


# --- DescribeLogDirs ------------------------------------------------------------------------


def _log_dir_topics(store, wanted) -> list[tuple[str, list[tuple[int, int]]]]:
    if wanted is None:
        wanted_map = {name: None for name in store.topics()}
    else:
        wanted_map = {}
        for t in wanted:
            wanted_map.setdefault(t.topic, set()).update(t.partitions)
    out = []
    for name, partitions in wanted_map.items():
        if name not in store:
            continue
        try:
            topic = store.topic(name)
            rows = [(p, topic.log(p).size_bytes) for p in range(topic.partitions)
                    if partitions is None or p in partitions]
        except SeglogError:
            continue  # deleted meanwhile
        if rows:
            out.append((name, rows))
    return out


async def describe_log_dirs(ctx, request) -> Any:
    """DescribeLogDirs v1-v5: the one data directory, each partition's size in bytes,
    offset_lag 0, no future logs, the volume's total and usable bytes (v4+)."""
    state = ctx.broker
    store = state.store
    response_cls, m = _classes(35, ctx.api_version)
    topics = await state.run_blocking(_log_dir_topics, store, request.topics)
    st = os.statvfs(store.path)
    result = _make(m.DescribeLogDirsResult, error_code=NONE,
                   log_dir=os.path.abspath(store.path), topics=tuple(
                       _make(m.DescribeLogDirsTopic, name=name, partitions=tuple(
                           _make(m.DescribeLogDirsPartition, partition_index=p,
                                 partition_size=size, offset_lag=0, is_future_key=False)
                           for p, size in rows))
                       for name, rows in topics),
                   total_bytes=st.f_blocks * st.f_frsize, usable_bytes=st.f_bavail * st.f_frsize,
                   is_cordoned=False)
    return _make(response_cls, throttle_time=_NO_THROTTLE, error_code=NONE, results=(result,))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(19, 2, 7, create_topics),
    ApiHandler(20, 1, 6, delete_topics),
    ApiHandler(21, 0, 2, delete_records),
    ApiHandler(32, 1, 4, describe_configs),
    ApiHandler(33, 0, 2, alter_configs),
    ApiHandler(35, 1, 5, describe_log_dirs),
    ApiHandler(37, 0, 3, create_partitions),
    ApiHandler(44, 0, 1, incremental_alter_configs),
    ApiHandler(60, 0, 2, describe_cluster),
)
