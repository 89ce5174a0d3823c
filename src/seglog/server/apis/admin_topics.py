"""CreateTopics, DeleteTopics and CreatePartitions (Kafka's ``ControllerApis`` and
``ReplicationControlManager``).

In a cluster (``zookeeper.connect``) CreateTopics is Kafka 2.8's ``ZkAdminManager
.createTopics``: the replication factor (-1: ``default.replication.factor``) is placed over
the live brokers by Kafka's rack-unaware assignment (INVALID_REPLICATION_FACTOR when there are
too few), or the request's manual assignment is checked against them; the topic is written to
ZooKeeper (assignment and ``/config/topics``) and answered once the controller initialised its
partitions, within the request's timeout. DeleteTopics asks the controller
(``/admin/delete_topics/<t>``) and answers once the topic is gone (REQUEST_TIMED_OUT after the
timeout); CreatePartitions writes the grown assignment (Kafka's placement from partition 0's
first replica, or the request's, checked) and answers once the new partitions have a leader."""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any, NamedTuple

from ... import error_codes as codes
from ...cluster.seam import PartitionSeam
from ...errors import InvalidConfigError, SeglogError
from ...storage.config import LogConfig
from ..authorization import (AclOperation, ResourceType, authorize_cluster,
                             filter_authorized)
from ..context import BrokerState, RequestContext
from ..quotas import MutationQuota, mutation_quota
from . import admin_configs as cfg
from .admin_config_apis import topic_config_entries
from .admin_state import topic_defaults
from .data_topics import partition_seam
from ...error_codes import (
    INVALID_CONFIG, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION, NONE, POLICY_VIOLATION, TOPIC_ALREADY_EXISTS,
    TOPIC_DELETION_DISABLED, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
)
from .admin_wire import (
    NO_THROTTLE, RECORDS_PER_REQUEST_MAX, Refused, TOPIC_PARTITIONS_MAX,
    UNKNOWN_TOPIC_ID_MESSAGE, UNKNOWN_TOPIC_MESSAGE, ZERO_UUID, broker_setting, code_of,
    duplicates, make, response_classes, topic_name_error,
)


#: The longest a cluster member's CreateTopics waits for the controller to initialise the
#: new partitions (the request's timeout_ms bounds it too).
CREATE_WAIT_S_MAX = 30.0
_log = logging.getLogger(__name__)

_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state",
                              "__share_group_state"})


#: ``ControllerApis``: the versions from which the controller mutation quota is strict
#: (THROTTLING_QUOTA_EXCEEDED); older ones are permissive (done, then throttled).
CREATE_TOPICS_STRICT_SINCE = 6
DELETE_TOPICS_STRICT_SINCE = 5
CREATE_PARTITIONS_STRICT_SINCE = 3


def _charge(quota: MutationQuota, partitions: int) -> None:
    """Count ``partitions`` against the client's ``controller_mutation_rate`` (Kafka's
    ``applyPartitionChangeQuota``), or Refused THROTTLING_QUOTA_EXCEEDED (strict quota)."""
    if not quota.record(partitions):
        # No message: Kafka's ApiError drops one that is only the error's default.
        raise Refused(codes.THROTTLING_QUOTA_EXCEEDED, None)


def _throttle(quota: MutationQuota) -> datetime.timedelta:
    """The response's throttle time from the mutation quota (the request quota's wrapper and
    the connection's KIP-219 mute take it from there)."""
    throttle_ms = quota.throttle_ms()
    return NO_THROTTLE if throttle_ms <= 0 else datetime.timedelta(milliseconds=throttle_ms)


# --- CreateTopics ---------------------------------------------------------------------------


class _Checked(NamedTuple):
    """A CreateTopics entry that passed the checks: the request's ``topic`` entry, its
    ``config``, the ``overrides`` the client set and its ``partition_count``."""

    topic: Any
    config: LogConfig
    overrides: dict[str, str]
    partition_count: int


def _creation_config(state: BrokerState, topic: Any) -> tuple[LogConfig, dict[str, str]]:
    """The LogConfig of a topic to create, or Refused (Kafka's computeConfigChanges and
    incrementalAlterConfig validation)."""
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise Refused(INVALID_CONFIG,
                       "Null value not supported for topic configs: " + ",".join(nulls))
    overrides: dict[str, str] = {c.name: c.value for c in topic.configs}
    try:
        return cfg.topic_config_from(topic_defaults(state), overrides), overrides
    except InvalidConfigError as e:
        raise Refused(INVALID_CONFIG, str(e)) from None


def _assignment(state: BrokerState, cluster: PartitionSeam, topic: Any) -> dict[int, list[int]]:
    """The replica assignment of a topic to create (partition -> replicas): the request's own,
    checked, or the cluster's placement of the partition count and replication factor asked
    (-1: ``num.partitions``, ``default.replication.factor``); or Refused."""
    manual = [(a.partition_index, list(a.broker_ids)) for a in topic.assignments or ()]
    try:
        return cluster.plan_topic(
            num_partitions=topic.num_partitions, replication_factor=topic.replication_factor,
            manual=manual or None,
            default_partitions=broker_setting(state, "num.partitions", 1),
            default_replication_factor=broker_setting(state, "default.replication.factor", 1))
    except SeglogError as e:
        raise Refused(code_of(e), str(e)) from None


def _requested_partitions(state: BrokerState, topic: Any) -> int:
    if topic.assignments:
        return len(topic.assignments)
    if topic.num_partitions == -1:
        return int(broker_setting(state, "num.partitions", 1))
    return max(int(topic.num_partitions), 0)


async def create_topics(ctx: RequestContext, request: Any) -> Any:
    """CreateTopics v2-v7 (Kafka's ``ReplicationControlManager.createTopics``): every topic
    is checked first; then, unless ``validate_only``, the valid ones are created."""
    state = ctx.broker
    response_cls, m = response_classes(19, ctx.api_version)
    config_cls = getattr(m, "CreatableTopicConfigs", None)  # v5+

    def failed(name: str, code: int, message: str | None) -> Any:
        # None is Kafka's zero uuid on the wire (kio reads the zero uuid back as None).
        return make(m.CreatableTopicResult, name=name, topic_id=None, error_code=code,
                     error_message=message, topic_config_error_code=codes.NONE, num_partitions=-1,
                     replication_factor=-1, configs=())

    names = list(dict.fromkeys(t.name for t in request.topics))  # Kafka answers a name once
    if sum(_requested_partitions(state, t) for t in request.topics) > RECORDS_PER_REQUEST_MAX:
        # Kafka 4.4 refuses the whole request before looking at any topic.
        return make(response_cls, throttle_time=NO_THROTTLE, topics=tuple(
            failed(n, POLICY_VIOLATION, "Excessively large number of partitions per request.")
            for n in names))
    dups = duplicates(t.name for t in request.topics)
    cluster = partition_seam(state)
    # The cluster's topics (in a ZooKeeper cluster a local one may still be on its way).
    existing = set(cluster.assignments)
    assignments: dict[str, dict[int, list[int]]] = {}
    checked: dict[str, _Checked | Refused] = {}
    # ControllerApis: CREATE on the cluster or on each topic; DESCRIBE_CONFIGS on a topic
    # for its configs in the answer.
    creatable = set(names) if authorize_cluster(ctx, AclOperation.CREATE) else \
        filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    describable = filter_authorized(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                    names)
    for topic in request.topics:
        name = topic.name
        if name in checked:
            continue
        try:
            if name in dups:
                raise Refused(INVALID_REQUEST, "Duplicate topic name.")
            if name not in creatable:
                raise Refused(codes.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            why = topic_name_error(name)
            if why:
                raise Refused(INVALID_TOPIC_EXCEPTION, why)
            if name in existing:
                raise Refused(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            key = name.replace(".", "_")
            for other in existing:
                if other.replace(".", "_") == key:
                    raise Refused(INVALID_TOPIC_EXCEPTION,
                                   f"Topic '{name}' collides with existing topic: {other}")
            config, overrides = _creation_config(state, topic)
            assignment = _assignment(state, cluster, topic)
            assignments[name] = assignment
            checked[name] = _Checked(topic, config, overrides, len(assignment))
        except Refused as e:
            checked[name] = e
    # Kafka's controller writes one record per topic, per config and per partition, and
    # refuses a request that needs more than it writes in one batch.
    records = sum(1 + len(c.topic.configs) + c.partition_count for c in checked.values()
                  if not isinstance(c, Refused))
    if records > RECORDS_PER_REQUEST_MAX:
        return make(response_cls, throttle_time=NO_THROTTLE, topics=tuple(
            failed(n, POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
            for n in names))
    results: list[Any] = []
    quota = mutation_quota(ctx, CREATE_TOPICS_STRICT_SINCE)
    for name in names:
        c = checked[name]
        try:
            if isinstance(c, Refused):
                raise c
            topic, config, overrides, count = c
            if count > TOPIC_PARTITIONS_MAX:
                raise Refused(INVALID_PARTITIONS, f"seglog topics have at most "
                               f"{TOPIC_PARTITIONS_MAX} partitions")
            factor = len(assignments[name][0])
            _charge(quota, count)  # Kafka's controller counts validate_only too
            if request.validate_only:
                topic_id = uuid.uuid4()  # as Kafka, which draws the id before validate_only
            else:
                # In a ZooKeeper cluster: written there, answered once the controller gave
                # every partition its leader (bounded by the request's timeout).
                wait_s = min(max(request.timeout.total_seconds(), 0.0), CREATE_WAIT_S_MAX)
                try:
                    topic_id = await cluster.create_topic(name, assignments[name], config,
                                                          overrides, timeout_s=wait_s)
                except (SeglogError, ValueError, TypeError, OSError) as e:
                    # OSError: out of descriptors or disk; the store rolled the topic back.
                    raise Refused(code_of(e), str(e)) from None
                _log.info("Created topic %s (id %s) with %d partitions, replication factor "
                          "%d, configs %s, by %s", name, topic_id, count, factor,
                          dict(overrides) or "{}", ctx.principal)
            entries = (topic_config_entries(state, config, overrides)
                       if config_cls is not None and name in describable else [])
            results.append(make(
                m.CreatableTopicResult, name=name, topic_id=topic_id, error_code=NONE,
                error_message=None, topic_config_error_code=codes.NONE if name in describable
                else codes.TOPIC_AUTHORIZATION_FAILED, num_partitions=count,
                replication_factor=factor,
                configs=tuple(make(config_cls, **e) for e in entries)
                if config_cls is not None else ()))
        except Refused as e:
            results.append(failed(name, e.code, e.message))
    return make(response_cls, throttle_time=_throttle(quota), topics=tuple(results))


# --- DeleteTopics ---------------------------------------------------------------------------


async def delete_topics(ctx: RequestContext, request: Any) -> Any:
    """DeleteTopics v1-v6, by name and (v6+) by topic id (Kafka's ``ControllerApis
    .deleteTopics``)."""
    state = ctx.broker
    response_cls, m = response_classes(20, ctx.api_version)
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id if t.topic_id not in (None, ZERO_UUID) else None)
                  for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    # Kafka counts repeats among the entries that name exactly one of the two.
    if not broker_setting(state, "delete.topic.enable", True):
        # Kafka refuses the whole request first (INVALID_REQUEST before v3).
        code = TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else INVALID_REQUEST
        return make(response_cls, throttle_time=NO_THROTTLE, responses=tuple(
            make(m.DeletableTopicResult, name=n, topic_id=i, error_code=code,
                  error_message="Topic deletion is disabled.") for n, i in wanted))
    cluster = partition_seam(state)
    dups = duplicates(n for n, i in wanted if n is not None and i is None)
    dup_ids = duplicates(i for n, i in wanted if i is not None and n is None)
    # The cluster's topics and ids (ZooKeeper's in a cluster, not this broker's local ones).
    ids = {a.topic_id: n for n, a in cluster.assignments.items() if a.topic_id is not None}
    names_to_ids = {n: i for i, n in ids.items()}
    # ControllerApis: DELETE on the cluster, else DESCRIBE and DELETE on each topic.
    every_topic = authorize_cluster(ctx, AclOperation.DELETE)
    asked = {n for n, _i in wanted if n is not None} | {
        ids[i] for _n, i in wanted if i is not None and i in ids}
    may_describe = asked if every_topic else filter_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, asked)
    may_delete = asked if every_topic else filter_authorized(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, asked)
    results: list[Any] = []
    quota = mutation_quota(ctx, DELETE_TOPICS_STRICT_SINCE)
    reported: set[tuple[str | None, uuid.UUID | None]] = set()
    for name, topic_id in wanted:
        try:
            if name in dups or topic_id in dup_ids:
                if (name, topic_id) in reported:
                    continue  # Kafka answers a repeated name once
                reported.add((name, topic_id))
            if name is not None and topic_id is not None:
                raise Refused(INVALID_REQUEST, "You may not specify both topic name and "
                               "topic id.")
            if name is None and topic_id is None:
                raise Refused(INVALID_REQUEST, "Neither topic name nor id were specified.")
            if name in dups or topic_id in dup_ids:
                raise Refused(INVALID_REQUEST, "Duplicate topic name." if name is not None
                               else "Duplicate topic id.")
            denied = codes.message(codes.TOPIC_AUTHORIZATION_FAILED)
            if topic_id is not None:
                found = ids.get(topic_id)
                if found is None:
                    raise Refused(UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID_MESSAGE)
                if found not in may_delete:
                    # The name is told only to who may DESCRIBE the topic.
                    name = found if found in may_describe else None
                    raise Refused(codes.TOPIC_AUTHORIZATION_FAILED, denied)
                name = found
            elif name not in may_describe:
                raise Refused(codes.TOPIC_AUTHORIZATION_FAILED, denied)
            elif name not in names_to_ids:
                raise Refused(UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
            elif name not in may_delete:
                raise Refused(codes.TOPIC_AUTHORIZATION_FAILED, denied)
            topic_id = names_to_ids[name]
            if name in _INTERNAL_TOPICS:
                raise Refused(TOPIC_DELETION_DISABLED,
                               f"seglog keeps its internal topic {name}: it cannot be deleted")
            _charge(quota, len(cluster.assignments[name].partitions))
            # In a ZooKeeper cluster: /admin/delete_topics/<t> for the controller, answered
            # once the topic is gone from the metadata (REQUEST_TIMED_OUT after the timeout).
            wait_s = min(max(request.timeout.total_seconds(), 0.0), CREATE_WAIT_S_MAX)
            try:
                deleted = await cluster.delete_topic(name, timeout_s=wait_s)
            except (SeglogError, OSError) as e:
                raise Refused(code_of(e), str(e)) from None
            if not deleted:
                raise Refused(codes.REQUEST_TIMED_OUT, None)
            _log.info("Deleted topic %s (id %s), by %s", name, topic_id, ctx.principal)
            results.append(make(m.DeletableTopicResult, name=name, topic_id=topic_id,
                                 error_code=NONE, error_message=None))
        except Refused as e:
            results.append(make(m.DeletableTopicResult, name=name,
                                 topic_id=topic_id, error_code=e.code,
                                 error_message=e.message))
    # Fetches waiting on a deleted topic answer now (Kafka completes its delayed fetches).
    ctx.broker.appended.notify()
    return make(response_cls, throttle_time=_throttle(quota), responses=tuple(results))


# --- CreatePartitions -----------------------------------------------------------------------


async def create_partitions(ctx: RequestContext, request: Any) -> Any:
    """CreatePartitions v0-v3 (Kafka's ``ReplicationControlManager.createPartitions``):
    increase only, manual assignments on this node, validate_only."""
    state = ctx.broker
    response_cls, m = response_classes(37, ctx.api_version)
    cluster = partition_seam(state)
    dups = duplicates(t.name for t in request.topics)
    counts = {n: len(a.partitions) for n, a in cluster.assignments.items()}
    added = sum(t.count - counts[t.name] for t in request.topics if t.name in counts)
    if added > RECORDS_PER_REQUEST_MAX:
        # Kafka 4.4 refuses the whole request before looking at any topic.
        return make(response_cls, throttle_time=NO_THROTTLE, results=tuple(
            make(m.CreatePartitionsTopicResult, name=t.name, error_code=POLICY_VIOLATION,
                  error_message="Excessively large number of additional partitions per "
                  "request.") for t in request.topics))
    results: list[Any] = []
    quota = mutation_quota(ctx, CREATE_PARTITIONS_STRICT_SINCE)
    alterable = filter_authorized(ctx, AclOperation.ALTER, ResourceType.TOPIC,
                                  (t.name for t in request.topics))
    for wanted in request.topics:
        name = wanted.name
        try:
            if name in dups:
                raise Refused(INVALID_REQUEST, "Duplicate topic name.")
            if name not in alterable:
                raise Refused(codes.TOPIC_AUTHORIZATION_FAILED)
            if name not in counts:
                raise Refused(UNKNOWN_TOPIC_OR_PARTITION)
            current = counts[name]
            count = wanted.count
            if count < current:
                raise Refused(INVALID_PARTITIONS, f"The topic {name} currently has {current} "
                               f"partition(s); {count} would not be an increase.")
            if count == current:
                raise Refused(INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            if count > TOPIC_PARTITIONS_MAX:
                raise Refused(INVALID_PARTITIONS, f"seglog topics have at most "
                               f"{TOPIC_PARTITIONS_MAX} partitions")
            if wanted.assignments is not None:
                if len(wanted.assignments) != count - current:
                    raise Refused(INVALID_REPLICA_ASSIGNMENT,
                                   f"Attempted to add {count - current} additional partition(s)"
                                   f", but only {len(wanted.assignments)} assignment(s) were "
                                   "specified.")
            if name in _INTERNAL_TOPICS:
                raise Refused(INVALID_PARTITIONS, f"seglog does not add partitions to its "
                               f"internal topic {name}")
            manual = (None if wanted.assignments is None
                      else [list(a.broker_ids) for a in wanted.assignments])
            try:
                new_partitions = cluster.plan_new_partitions(name, current=current, count=count,
                                                             manual=manual)
            except SeglogError as e:
                raise Refused(code_of(e), str(e)) from None
            _charge(quota, count - current)
            if not request.validate_only:
                wait_s = min(max(request.timeout.total_seconds(), 0.0), CREATE_WAIT_S_MAX)
                try:
                    await cluster.add_partitions(name, new_partitions, timeout_s=wait_s)
                except (SeglogError, ValueError, OSError) as e:
                    raise Refused(code_of(e), str(e)) from None
                _log.info("Added partitions to topic %s: %d -> %d, by %s", name, current,
                          count, ctx.principal)
            results.append(make(m.CreatePartitionsTopicResult, name=name, error_code=NONE,
                                 error_message=None))
        except Refused as e:
            results.append(make(m.CreatePartitionsTopicResult, name=name, error_code=e.code,
                                 error_message=e.message))
    ctx.broker.appended.notify()
    return make(response_cls, throttle_time=_throttle(quota), results=tuple(results))
