"""The streams group APIs of KIP-1071: StreamsGroupHeartbeat (88, v0-1),
StreamsGroupDescribe (89, v0-1) and StreamsGroupTopologyDescriptionUpdate (93, v0).

The group state machine is :class:`~seglog.coordinator.streams_group.StreamsGroupCoordinator`
(no sockets, no asyncio); this module adapts it to the wire, checks ACLs as Kafka 4.4's
``KafkaApis`` does, creates the internal topics (repartition and changelog topics) the
coordinator finds missing (as Kafka's ``KafkaApis.handleStreamsGroupHeartbeat`` does through
its topic creation manager: in the background, the member hears MISSING_INTERNAL_TOPICS
until they exist), and expires sessions from one timer task.

A streams group lives on the coordinator of its ``__consumer_offsets`` partition, as a classic
group does (:func:`seglog.server.apis.groups.coordinator_error` says whether this broker is
it). Its committed offsets are the group's offsets in the Store, committed through
OffsetCommit: ``seglog.server.apis.groups`` asks the :class:`StreamsGroupType` registered in
its ``GroupsState.group_types`` for a streams group's member epoch. After each change the
group is appended to its ``__consumer_offsets`` partition as Kafka 4.4's records
(:mod:`seglog.coordinator.streams_group_records`; the heartbeat is answered once they are
replicated) and loaded back when this broker next coordinates that partition (after a
restart, or when it becomes the partition's leader).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from typing import Any, Iterable, Mapping

from ... import error_codes as codes
from ...aio import cancel_and_wait, wait_event
from ...cluster.seam import AppendResult
from ...coordinator import streams_group as sg
from ...coordinator import streams_group_records as rec
from ...coordinator.offsets_schema import OFFSETS_TOPIC
from ...errors import InvalidConfigError, SeglogError, TopicExistsError
from ..authorization import AclOperation, ResourceType, authorize, authorize_cluster, \
    authorized_operations, filter_authorized
from ..context import BrokerState, RequestContext
from ..registry import ApiHandler
from . import admin_configs as cfg
from . import groups
from .admin_state import topic_defaults
from .admin_wire import broker_setting, make, response_classes
from .data_topics import partition_seam
from .group_records_log import GroupRecordsLog
from .group_configs import group_configs

__all__ = ["HANDLERS", "StreamsGroupType", "StreamsGroupsState", "find_streams_state",
           "is_streams_group", "start", "stop"]

log = logging.getLogger(__name__)

EXTENSION = "streams_groups"
_NO_THROTTLE = 0


@dataclasses.dataclass(eq=False)
class StreamsGroupsState:
    """The module's state in one broker: the coordinator, the timer task and its wake-up
    event, the internal topics being created."""

    coordinator: sg.StreamsGroupCoordinator
    wake: asyncio.Event
    task: asyncio.Task[None] | None = None
    creating: set[str] = dataclasses.field(default_factory=set)
    background: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)
    #: What is in ``__consumer_offsets`` of each group: ``{group id: {key: value}}``.
    written: dict[str, dict[bytes, bytes | None]] = dataclasses.field(default_factory=dict)
    #: The ``__consumer_offsets`` partitions whose streams groups are loaded here, with
    #: the leader epoch they were loaded in.
    loaded: dict[int, int | None] = dataclasses.field(default_factory=dict)
    #: The records' reader and writer over ``loaded`` and ``written`` (made at first use).
    records_log: GroupRecordsLog | None = None


def find_streams_state(state: BrokerState) -> StreamsGroupsState | None:
    """The module's state in broker ``state`` (None before :func:`start`)."""
    found: StreamsGroupsState | None = state.extensions.get(EXTENSION)
    return found


def is_streams_group(state: BrokerState, group_id: str) -> bool:
    """Whether ``group_id`` is a streams group on this broker."""
    found = find_streams_state(state)
    return found is not None and found.coordinator.has_group(group_id)


class StreamsGroupType:
    """The streams groups as :class:`seglog.server.apis.groups.GroupType`: what OffsetCommit
    and ListGroups ask of them."""

    group_type = "streams"
    protocol_type = "streams"

    def __init__(self, broker: BrokerState, found: StreamsGroupsState) -> None:
        self.broker = broker
        self.found = found
        self.coordinator = found.coordinator

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a streams group here."""
        _ensure_loaded(self.broker, self.found, group_id)
        return self.coordinator.has_group(group_id)

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """Kafka's ``StreamsGroup.validateOffsetCommit``: the member and its epoch."""
        return self.coordinator.validate_offset_commit(group_id, member_id, member_epoch)

    def listed_groups(self) -> list[tuple[str, str]]:
        """``[(group id, state)]`` of the streams groups here."""
        groups_state = groups.find_groups_state(self.broker)
        count = partition_seam(self.broker).partition_count(OFFSETS_TOPIC) or 0
        if groups_state is not None and groups_state.partitions is not None:
            for partition in range(count):
                if not groups_state.partitions.error_for(partition):
                    _load_partition(self.broker, self.found, partition)
        return [(g, self.coordinator.state(g) or sg.DEAD) for g in self.coordinator.group_ids()]

    def delete_group(self, group_id: str) -> int:
        """NON_EMPTY_GROUP while members are in; else the group is dropped (NONE) and its
        records tombstoned."""
        error = self.coordinator.delete_group(group_id)
        if not error:
            _persist(self.broker, self.found, group_id)
        return error


# --- the group in __consumer_offsets (Kafka's records) -----------------------------------


def _records_log(found: StreamsGroupsState) -> GroupRecordsLog:
    """The streams groups' records in ``__consumer_offsets`` (made once, over ``found``'s
    ``loaded`` and ``written``)."""
    if found.records_log is None:
        found.records_log = GroupRecordsLog(
            "streams", rec.decode_key, rec.decode_value, rec.StreamsRecord,
            lambda records, now_ms: found.coordinator.load_records(records, now_ms),
            lambda group_id: found.coordinator.records(group_id),
            loaded=found.loaded, written=found.written)
    return found.records_log


def _ensure_loaded(broker: BrokerState, found: StreamsGroupsState, group_id: str) -> None:
    """Load the streams groups of ``group_id``'s ``__consumer_offsets`` partition, once per
    leadership of it (Kafka's coordinator loads them when it becomes the leader)."""
    _records_log(found).ensure_loaded(broker, group_id)


def _load_partition(broker: BrokerState, found: StreamsGroupsState, partition: int) -> None:
    _records_log(found).load_partition(broker, partition)


def _persist(broker: BrokerState, found: StreamsGroupsState, group_id: str
             ) -> AppendResult | None:
    """Append what changed in the group to its ``__consumer_offsets`` partition, as Kafka's
    records (tombstones for what is gone); the append (None: nothing appended)."""
    return _records_log(found).persist(broker, group_id)


def _state(ctx: RequestContext) -> StreamsGroupsState:
    found = find_streams_state(ctx.broker)
    assert found is not None, "the streams_groups module was not started"
    return found


# --- StreamsGroupHeartbeat ---------------------------------------------------------------


def _tasks(entries: Any) -> dict[str, set[int]] | None:
    if entries is None:
        return None
    out: dict[str, set[int]] = {}
    for t in entries:
        out.setdefault(t.subtopology_id, set()).update(int(p) for p in t.partitions)
    return out


def _topic_info(t: Any) -> sg.TopicInfo:
    return sg.TopicInfo(t.name, int(t.partitions), int(t.replication_factor),
                        tuple((kv.key, kv.value) for kv in t.topic_configs))


def _topology(raw: Any) -> sg.Topology | None:
    if raw is None:
        return None
    return sg.Topology(int(raw.epoch), tuple(
        sg.Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
                       tuple(_topic_info(t) for t in s.state_changelog_topics),
                       tuple(s.repartition_sink_topics),
                       tuple(_topic_info(t) for t in s.repartition_source_topics))
        for s in raw.subtopologies))


def _topology_topics(topology: sg.Topology) -> list[str]:
    names: list[str] = []
    for s in topology.subtopologies:
        names += s.source_topics
        names += s.repartition_sink_topics
        names += [t.name for t in (*s.repartition_source_topics, *s.state_changelog_topics)]
    return list(dict.fromkeys(names))


def _millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)


def _offsets(entries: Any) -> list[tuple[str, int, int]] | None:
    if entries is None:
        return None
    return [(e.subtopology_id, int(e.partition), int(e.offset)) for e in entries]


async def handle_streams_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    """StreamsGroupHeartbeat v0-v1: READ on the group; with a topology, DESCRIBE on its
    topics; then the coordinator's answer, and the missing internal topics created (CREATE on
    the cluster or on each topic, else a MISSING_INTERNAL_TOPICS status saying so)."""
    response_cls, m = response_classes(88, ctx.api_version)
    state = _state(ctx)

    def error(code: int, message: str | None = None) -> Any:
        return make(response_cls, throttle_time=_NO_THROTTLE, error_code=code,
                    error_message=message if message is not None else codes.message(code),
                    member_id=request.member_id, member_epoch=-1, heartbeat_interval=0,
                    acceptable_recovery_lag=0, task_offset_interval=0, status=None,
                    active_tasks=None, standby_tasks=None, warmup_tasks=None,
                    topology_description_required=False, endpoint_information_epoch=0,
                    partitions_by_user_endpoint=None)

    group_id = request.group_id
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return error(codes.GROUP_AUTHORIZATION_FAILED)
    not_here = groups.coordinator_error(ctx, group_id) if group_id else 0
    if not_here:
        return error(not_here)
    topology = _topology(request.topology)
    if topology is not None:
        names = _topology_topics(topology)
        allowed = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        denied = [n for n in names if n not in allowed]
        if denied:
            return error(codes.TOPIC_AUTHORIZATION_FAILED,
                         "Unauthorized to DESCRIBE on topics " + ", ".join(sorted(denied)) + ".")
    owned = None
    active = _tasks(request.active_tasks)
    standby = _tasks(request.standby_tasks)
    warmup = _tasks(request.warmup_tasks)
    if active is not None or standby is not None or warmup is not None:
        owned = (active or {}, standby or {}, warmup or {})
    endpoint = request.user_endpoint
    _ensure_loaded(ctx.broker, state, group_id)
    result = state.coordinator.heartbeat(
        group_id=group_id, member_id=request.member_id, member_epoch=int(request.member_epoch),
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=_millis(request.rebalance_timeout), topology=topology,
        owned=owned, process_id=request.process_id,
        user_endpoint=None if endpoint is None else (endpoint.host, int(endpoint.port)),
        client_tags=None if request.client_tags is None else [
            (kv.key, kv.value) for kv in request.client_tags],
        task_offsets=_offsets(request.task_offsets),
        task_end_offsets=_offsets(request.task_end_offsets),
        shutdown_application=bool(request.shutdown_application),
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        now_ms=ctx.broker.now_ms(),
        endpoint_information_epoch=int(request.endpoint_information_epoch))
    state.wake.set()
    appended = _persist(ctx.broker, state, group_id)
    if appended is not None:
        # As Kafka's coordinator: the answer once the records are replicated (acks=-1).
        groups_state = groups.find_groups_state(ctx.broker)
        timeout_ms = groups_state.offsets_commit_timeout_ms if groups_state else 5000
        await partition_seam(ctx.broker).wait_for_acks((appended,), acks=-1,
                                                      timeout_s=timeout_ms / 1000)
    if result.error_code:
        return error(result.error_code, result.error_message)
    statuses = list(result.statuses)
    if result.create_topics:
        refused = _create_internal_topics(ctx, state, result.create_topics)
        if refused:
            statuses.append((sg.STATUS_MISSING_INTERNAL_TOPICS,
                             "Unauthorized to CREATE on topics " + ", ".join(refused) + "."))
    config = state.coordinator.config_of(group_id)

    def topic_partitions(by_topic: dict[str, list[int]]) -> tuple[Any, ...]:
        return tuple(make(m.TopicPartition, topic=t, partitions=tuple(ps))
                     for t, ps in by_topic.items())

    def task_ids(tasks: dict[str, set[int]] | None) -> Any:
        if tasks is None:
            return None
        return tuple(make(m.TaskIds, subtopology_id=s, partitions=tuple(sorted(ps)))
                     for s, ps in sorted(tasks.items()))

    return make(response_cls, throttle_time=_NO_THROTTLE, error_code=codes.NONE,
                error_message=None, member_id=result.member_id,
                member_epoch=result.member_epoch,
                heartbeat_interval=config.heartbeat_interval_ms,
                acceptable_recovery_lag=config.acceptable_recovery_lag
                if ctx.api_version >= 1 else min(config.acceptable_recovery_lag, 2**31 - 1),
                task_offset_interval=config.task_offset_interval_ms,
                status=tuple(make(m.Status, status_code=code, status_detail=detail)
                             for code, detail in statuses),
                active_tasks=task_ids(result.active), standby_tasks=task_ids(result.standby),
                warmup_tasks=task_ids(result.warmup), topology_description_required=False,
                endpoint_information_epoch=result.endpoint_epoch,
                partitions_by_user_endpoint=None if result.partitions_by_endpoint is None
                else tuple(make(m.EndpointToPartitions,
                                user_endpoint=make(m.Endpoint, host=host, port=port),
                                active_partitions=topic_partitions(active),
                                standby_partitions=topic_partitions(standby))
                           for (host, port), active, standby in result.partitions_by_endpoint))


def _create_internal_topics(ctx: RequestContext, state: StreamsGroupsState,
                            wanted: Mapping[str, sg.TopicInfo]) -> list[str]:
    """Start creating the ``wanted`` internal topics the caller may CREATE (on the cluster
    or each topic); the names it may not, sorted."""
    names = sorted(wanted)
    creatable = set(names) if authorize_cluster(ctx, AclOperation.CREATE) else \
        filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    for name in names:
        if name in creatable and name not in state.creating:
            state.creating.add(name)
            task = ctx.broker.loop.create_task(_create_topic(ctx.broker, state, wanted[name]))
            state.background.add(task)
            task.add_done_callback(state.background.discard)
    return [n for n in names if n not in creatable]


async def _create_topic(broker: BrokerState, state: StreamsGroupsState,
                        topic: sg.TopicInfo) -> None:
    cluster = partition_seam(broker)
    try:
        overrides = dict(topic.configs)
        config = cfg.topic_config_from(topic_defaults(broker), overrides)
        assignment = cluster.plan_topic(
            num_partitions=topic.partitions,
            replication_factor=topic.replication_factor or -1, manual=None,
            default_partitions=broker_setting(broker, "num.partitions", 1),
            default_replication_factor=broker_setting(broker, "default.replication.factor", 1))
        await cluster.create_topic(topic.name, assignment, config, overrides, timeout_s=30.0)
    except TopicExistsError:
        pass  # created meanwhile (by another member's heartbeat, or by hand)
    except (SeglogError, InvalidConfigError, ValueError, OSError) as exc:
        # The members keep hearing MISSING_INTERNAL_TOPICS; the next heartbeat tries again.
        log.warning("streams group internal topic %r: creation failed: %s", topic.name, exc)
    finally:
        state.creating.discard(topic.name)
        state.wake.set()


# --- StreamsGroupDescribe ----------------------------------------------------------------


async def handle_streams_group_describe(ctx: RequestContext, request: Any) -> Any:
    """StreamsGroupDescribe v0-v1: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED);
    GROUP_ID_NOT_FOUND for a group that is not a streams group here."""
    response_cls, m = response_classes(89, ctx.api_version)
    state = _state(ctx)
    described = []
    with_description = bool(getattr(request, "include_topology_description", False))

    def failed(group_id: str, code: int, message: str | None = None) -> Any:
        return make(m.DescribedGroup, error_code=code,
                    error_message=message if message is not None else codes.message(code),
                    group_id=group_id, group_state="", group_epoch=-1, assignment_epoch=-1,
                    topology=None, members=(), authorized_operations=-2**31,
                    topology_description=None, topology_description_status=0,
                    assignor_name=None)

    def task_ids(tasks: dict[str, set[int]]) -> tuple[Any, ...]:
        return tuple(make(m.TaskIds, subtopology_id=s, partitions=tuple(sorted(ps)))
                     for s, ps in sorted(tasks.items()))

    def assignment(tasks: sg.Tasks) -> Any:
        return make(m.Assignment, active_tasks=task_ids(tasks[0]),
                    standby_tasks=task_ids(tasks[1]), warmup_tasks=task_ids(tasks[2]))

    def topic_info(t: sg.TopicInfo) -> Any:
        return make(m.TopicInfo, name=t.name, partitions=t.partitions,
                    replication_factor=t.replication_factor,
                    topic_configs=tuple(make(m.KeyValue, key=k, value=v)
                                        for k, v in t.configs))

    def offsets(entries: Iterable[tuple[str, int, int]]) -> tuple[Any, ...]:
        return tuple(make(m.TaskOffset, subtopology_id=s, partition=p, offset=o)
                     for s, p, o in entries)

    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(failed(group_id, codes.GROUP_AUTHORIZATION_FAILED))
            continue
        not_here = groups.coordinator_error(ctx, group_id)
        if not_here:
            described.append(failed(group_id, not_here))
            continue
        _ensure_loaded(ctx.broker, state, group_id)
        view = state.coordinator.describe(group_id)
        if view is None:
            described.append(failed(group_id, codes.GROUP_ID_NOT_FOUND,
                                    f"Group {group_id} not found."))
            continue
        topology = None if view.topology is None else make(
            m.Topology, epoch=view.topology.epoch, subtopologies=tuple(
                make(m.Subtopology, subtopology_id=s.subtopology_id,
                     source_topics=s.source_topics,
                     repartition_sink_topics=s.repartition_sink_topics,
                     state_changelog_topics=tuple(topic_info(t)
                                                  for t in s.state_changelog_topics),
                     repartition_source_topics=tuple(topic_info(t)
                                                     for t in s.repartition_source_topics))
                for s in view.topology.subtopologies))
        members = tuple(make(
            m.Member, member_id=v.member_id, member_epoch=v.member_epoch,
            instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
            client_host=v.client_host, topology_epoch=v.topology_epoch,
            process_id=v.process_id,
            user_endpoint=None if v.user_endpoint is None else make(
                m.Endpoint, host=v.user_endpoint[0], port=v.user_endpoint[1]),
            client_tags=tuple(make(m.KeyValue, key=k, value=val) for k, val in v.client_tags),
            task_offsets=offsets(v.task_offsets), task_end_offsets=offsets(v.task_end_offsets),
            assignment=assignment(v.assigned), target_assignment=assignment(v.target),
            is_classic=False) for v in view.members)
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id) \
            if request.include_authorized_operations else -2**31
        described.append(make(
            m.DescribedGroup, error_code=codes.NONE, error_message=None, group_id=group_id,
            group_state=view.state, group_epoch=view.group_epoch,
            assignment_epoch=view.assignment_epoch, topology=topology, members=members,
            authorized_operations=operations,
            topology_description=view.topology_description if with_description else None,
            topology_description_status=0, assignor_name="sticky"))
    return make(response_cls, throttle_time=_NO_THROTTLE, groups=tuple(described))


# --- StreamsGroupTopologyDescriptionUpdate -----------------------------------------------


async def handle_topology_description_update(ctx: RequestContext, request: Any) -> Any:
    """StreamsGroupTopologyDescriptionUpdate v0: READ on the group; the description is
    kept for StreamsGroupDescribe v1."""
    response_cls, _m = response_classes(93, ctx.api_version)

    def answer(code: int) -> Any:
        return make(response_cls, throttle_time=_NO_THROTTLE, error_code=code,
                    error_message=None if code == codes.NONE else codes.message(code))

    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return answer(codes.GROUP_AUTHORIZATION_FAILED)
    not_here = groups.coordinator_error(ctx, request.group_id)
    if not_here:
        return answer(not_here)
    _ensure_loaded(ctx.broker, _state(ctx), request.group_id)
    return answer(_state(ctx).coordinator.set_topology_description(
        request.group_id, request.member_id, request.topology_description))


# --- start, stop, timers -----------------------------------------------------------------


#: The streams group configs (``GroupConfig``) the coordinator applies per group, by the
#: ``StreamsGroupConfig`` field each overrides.
_GROUP_CONFIG_FIELDS = {
    "streams.session.timeout.ms": "session_timeout_ms",
    "streams.heartbeat.interval.ms": "heartbeat_interval_ms",
    "streams.num.standby.replicas": "num_standby_replicas",
    "streams.acceptable.recovery.lag": "acceptable_recovery_lag",
    "streams.task.offset.interval.ms": "task_offset_interval_ms",
}


def _config(state: BrokerState) -> sg.StreamsGroupConfig:
    """The ``group.streams.*`` configs, checked as Kafka's ``GroupCoordinatorConfig``."""
    def get(name: str, default: int) -> int:
        return int(state.config.get(name, default))

    session = get("group.streams.session.timeout.ms", 45_000)
    heartbeat = get("group.streams.heartbeat.interval.ms", 5_000)
    standby = get("group.streams.num.standby.replicas", 0)
    bounds = (("group.streams.session.timeout.ms", session,
               get("group.streams.min.session.timeout.ms", 45_000),
               get("group.streams.max.session.timeout.ms", 60_000)),
              ("group.streams.heartbeat.interval.ms", heartbeat,
               get("group.streams.min.heartbeat.interval.ms", 5_000),
               get("group.streams.max.heartbeat.interval.ms", 15_000)),
              ("group.streams.num.standby.replicas", standby, 0,
               get("group.streams.max.standby.replicas", 2)))
    for name, value, low, high in bounds:
        if not low <= value <= high:
            raise InvalidConfigError(f"{name} must be between {low} and {high}, not {value}")
    if heartbeat >= session:
        raise InvalidConfigError("group.streams.heartbeat.interval.ms must be less than "
                                 "group.streams.session.timeout.ms")
    return sg.StreamsGroupConfig(
        session_timeout_ms=session, heartbeat_interval_ms=heartbeat,
        num_standby_replicas=standby,
        acceptable_recovery_lag=get("group.streams.acceptable.recovery.lag", 10_000),
        task_offset_interval_ms=get("group.streams.task.offset.interval.ms", 60_000),
        max_size=get("group.streams.max.size", 2**31 - 1))


async def start(state: BrokerState) -> None:
    """Create the coordinator and start its timer task."""
    cluster = partition_seam(state)
    coordinator = sg.StreamsGroupCoordinator(
        _config(state), cluster.partition_count, lambda: list(cluster.assignments))
    base = coordinator.config
    view = group_configs(state)

    def group_config(group_id: str) -> sg.StreamsGroupConfig:
        # Kafka's GroupMetadataManager.streamsGroup*(groupId): the group's own, else the
        # broker's.
        own = view.get(group_id)
        if not own:
            return base
        changes = {field: int(view.value(group_id, name))
                   for name, field in _GROUP_CONFIG_FIELDS.items() if name in own}
        return dataclasses.replace(base, **changes) if changes else base

    coordinator.group_config = group_config
    found = StreamsGroupsState(coordinator=coordinator, wake=asyncio.Event())
    state.extensions[EXTENSION] = found
    groups_state = groups.find_groups_state(state)
    assert groups_state is not None, "the groups module starts before this one"
    groups_state.group_types.append(StreamsGroupType(state, found))
    found.task = state.loop.create_task(_run_timers(state, found))


async def stop(state: BrokerState) -> None:
    """Stop the timer task and the topic creations under way."""
    found = find_streams_state(state)
    if found is None:
        return
    await cancel_and_wait([t for t in (found.task, *found.background) if t is not None])


async def _run_timers(state: BrokerState, found: StreamsGroupsState) -> None:
    """Expire sessions when due, and forget the groups of partitions this broker no longer
    coordinates; sleeps in between (woken by the handlers)."""
    coordinator = found.coordinator
    while True:
        now = state.now_ms()
        try:
            for group_id, member_id in coordinator.poll(now):
                log.info("streams group %r: member %r removed (session or rebalance "
                         "timeout)", group_id, member_id)
                _persist(state, found, group_id)
            coordinator.unload(_records_log(found).forget_unowned(
                state, coordinator.group_ids()))
        except Exception:  # noqa: BLE001 - the timers must keep running
            log.exception("streams group coordinator timers failed")
        deadline = coordinator.next_deadline_ms()
        found.wake.clear()
        wait_s = 5.0 if deadline is None else min(5.0, max(0.0, (deadline - now) / 1000))
        await wait_event(found.wake, wait_s)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(88, 0, 1, handle_streams_group_heartbeat),
    ApiHandler(89, 0, 1, handle_streams_group_describe),
    ApiHandler(93, 0, 0, handle_topology_description_update),
)
