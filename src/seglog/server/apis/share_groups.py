"""The share group APIs of KIP-932: ShareGroupHeartbeat (76, v1) and ShareGroupDescribe
(77, v1), and share groups in ListGroups / DescribeGroups / DeleteGroups.

The group state machine is :class:`~seglog.coordinator.share_group.ShareGroupCoordinator`
(no sockets, no asyncio); this module adapts it to the wire, checks ACLs as Kafka 4.4's
``KafkaApis`` does (READ on the group, DESCRIBE on each subscribed topic), initializes the
state of newly assigned share-partitions through the share persister
(:mod:`seglog.server.share_persister`, as Kafka's ``GroupCoordinatorService.persisterInitialize``:
in the background, the partitions become assignable once initialized) and expires sessions
from one timer task.

A share group lives on the coordinator of its ``__consumer_offsets`` partition, as the
other groups do; after each change it is appended there as Kafka 4.4's records
(:mod:`seglog.coordinator.share_group_records`) and loaded back when this broker next
coordinates that partition. Other modules (ShareFetch) reach the groups through
:func:`find_share_groups_state`: :meth:`ShareGroupsState.is_member`, and
:class:`ShareGroupListener` calls when a member leaves or a group empties.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from typing import Any, Callable, Mapping, Protocol

from ... import error_codes as codes
from ...aio import cancel_and_wait, wait_event
from ...cluster.seam import AppendResult
from ...coordinator import share_group as sg
from ...coordinator import share_group_records as rec
from ...coordinator.offsets_schema import OFFSETS_TOPIC
from ...errors import InvalidConfigError, SeglogError
from ..authorization import AclOperation, ResourceType, authorize, authorized_operations, \
    filter_authorized
from ..context import BrokerState, RequestContext
from ..finalized_features import FINALIZED_FEATURES_KEY
from ..registry import ApiHandler
from ..share_persister import SharePersister, find_share_persister
from . import groups
from .data_topics import partition_seam
from .group_configs import broker_value, group_configs
from .group_records_log import GroupRecordsLog, offsets_partition

__all__ = ["HANDLERS", "ShareGroupListener", "ShareGroupType", "ShareGroupsState",
           "delete_share_state", "ensure_loaded", "find_share_groups_state",
           "initialize_share_state", "is_share_group", "other_group", "persist",
           "share_persister_of", "shares_enabled", "start", "stop", "topic_metadata"]

log = logging.getLogger(__name__)

EXTENSION = "share_groups"
#: Kafka's ``isMemberIdValid``: a member id is 1..36 characters.
_MAX_MEMBER_ID_CHARS = 36


class ShareGroupListener(Protocol):
    """Kafka's ``ShareGroupListener``: told when a member leaves (or is fenced) and when a
    group has no members left (the ShareFetch side releases that member's records)."""

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        """``member_id`` left share group ``group_id`` (or its session expired)."""

    def on_group_empty(self, group_id: str) -> None:
        """Share group ``group_id`` has no members now."""


@dataclasses.dataclass(eq=False)
class ShareGroupsState:
    """The module's state in one broker: the coordinator, the timer task and its wake-up
    event, the listeners, the persister calls under way."""

    coordinator: sg.ShareGroupCoordinator
    wake: asyncio.Event
    task: asyncio.Task[None] | None = None
    background: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)
    listeners: list[ShareGroupListener] = dataclasses.field(default_factory=list)
    #: What is in ``__consumer_offsets`` of each group: ``{group id: {key: value}}``.
    written: dict[str, dict[bytes, bytes | None]] = dataclasses.field(default_factory=dict)
    #: The ``__consumer_offsets`` partitions whose share groups are loaded here, with the
    #: leader epoch they were loaded in.
    loaded: dict[int, int | None] = dataclasses.field(default_factory=dict)
    #: The records' reader and writer over ``loaded`` and ``written`` (made at first use).
    records_log: GroupRecordsLog | None = None
    broker: BrokerState | None = None
    #: DescribeShareGroupOffsets' inter-broker client for the end offsets of partitions led
    #: elsewhere (created on first use; closed by :func:`stop`).
    remote_offsets: Any = None

    def add_listener(self, listener: ShareGroupListener) -> None:
        """Call ``listener`` on member leaves and empty groups from now on."""
        self.listeners.append(listener)

    def is_member(self, group_id: str, member_id: str) -> bool:
        """Whether ``member_id`` is a member of share group ``group_id`` here (ShareFetch
        and ShareAcknowledge check it)."""
        if self.broker is not None:
            ensure_loaded(self.broker, self, group_id)
        return self.coordinator.is_member(group_id, member_id)

    def group_ids(self) -> list[str]:
        """The share groups coordinated here."""
        return self.coordinator.group_ids()

    def _left(self, group_id: str, member_ids: list[str]) -> None:
        # ``on_group_empty`` only when the group here has no member left (Kafka's
        # ShareSessionCache calls ``onGroupEmpty`` when a group's member count reaches 0):
        # never for a group this broker does not hold (unloaded, deleted: state None).
        empty = self.coordinator.state(group_id) == sg.EMPTY
        for listener in list(self.listeners):
            try:
                for member_id in member_ids:
                    listener.on_member_leave(group_id, member_id)
                if empty:
                    listener.on_group_empty(group_id)
            except Exception:  # noqa: BLE001 - a listener's failure is not the group's
                log.exception("share group listener failed for %r", group_id)


def find_share_groups_state(state: BrokerState) -> ShareGroupsState | None:
    """The module's state in broker ``state`` (None before :func:`start`)."""
    found: ShareGroupsState | None = state.extensions.get(EXTENSION)
    return found


def is_share_group(state: BrokerState, group_id: str) -> bool:
    """Whether ``group_id`` is a share group on this broker."""
    found = find_share_groups_state(state)
    return found is not None and found.coordinator.has_group(group_id)


def topic_metadata(broker: BrokerState) -> dict[str, sg.TopicMeta]:
    """The cluster's topics by name with their ids and partition counts."""
    return {name: sg.TopicMeta(a.topic_id, len(a.partitions))
            for name, a in partition_seam(broker).assignments.items()
            if a.topic_id is not None}


def share_persister_of(broker: BrokerState) -> SharePersister | None:
    """The broker's share persister (:mod:`seglog.server.share_persister`; None before it
    started)."""
    return find_share_persister(broker)


def shares_enabled(broker: BrokerState) -> bool:
    """Kafka's ``isShareGroupProtocolEnabled``: share.version >= 1 finalized."""
    finalized = broker.extensions.get(FINALIZED_FEATURES_KEY)
    if finalized is None:
        return True
    _epoch, levels = finalized.current()
    return int(levels.get("share.version", 0)) >= 1


class ShareGroupType:
    """The share groups as :class:`seglog.server.apis.groups.GroupType`: what OffsetCommit,
    ListGroups, DescribeGroups and DeleteGroups ask of them."""

    group_type = "share"
    protocol_type = "share"

    def __init__(self, broker: BrokerState, found: ShareGroupsState) -> None:
        self.broker = broker
        self.found = found
        self.coordinator = found.coordinator

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a share group here."""
        ensure_loaded(self.broker, self.found, group_id)
        return self.coordinator.has_group(group_id)

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """Kafka's ``ShareGroup.validateOffsetCommit``: a share group takes no commits."""
        return codes.GROUP_ID_NOT_FOUND

    def listed_groups(self) -> list[tuple[str, str]]:
        """``[(group id, state)]`` of the share groups here."""
        groups_state = groups.find_groups_state(self.broker)
        count = partition_seam(self.broker).partition_count(OFFSETS_TOPIC) or 0
        if groups_state is not None and groups_state.partitions is not None:
            for partition in range(count):
                if not groups_state.partitions.error_for(partition):
                    _load_partition(self.broker, self.found, partition)
        return [(g, self.coordinator.state(g) or sg.DEAD) for g in self.coordinator.group_ids()]

    async def delete_group_state(self, group_id: str) -> int:
        """Before DeleteGroups drops an empty share group: its share-partitions' state is
        deleted through the persister (Kafka's ``deleteShareGroups``); the first error, or
        NON_EMPTY_GROUP while members are in."""
        if self.coordinator.state(group_id) == sg.STABLE:
            return codes.NON_EMPTY_GROUP
        partitions = self.coordinator.state_partitions(group_id)
        if not partitions:
            return codes.NONE
        results = await delete_share_state(self.broker, group_id,
                                           {t: ps for t, (_n, ps) in partitions.items()})
        return next((code for code in results.values() if code), codes.NONE)

    def delete_group(self, group_id: str) -> int:
        """NON_EMPTY_GROUP while members are in; else the group is dropped (NONE) and its
        records tombstoned."""
        error = self.coordinator.delete_group(group_id)
        if not error:
            persist(self.broker, self.found, group_id)
        return error


async def delete_share_state(broker: BrokerState, group_id: str,
                             partitions: Mapping[uuid.UUID, frozenset[int]]
                             ) -> dict[tuple[uuid.UUID, int], int]:
    """Delete the persisted state of ``partitions`` of ``group_id`` (Kafka's
    ``persister.deleteState``); ``{(topic id, partition): error code}``."""
    persister = share_persister_of(broker)
    out: dict[tuple[uuid.UUID, int], int] = {}
    for topic_id, ps in partitions.items():
        for p in sorted(ps):
            if persister is None:
                out[(topic_id, p)] = codes.NONE
                continue
            try:
                out[(topic_id, p)] = int(await persister.delete_state(group_id, topic_id, p))
            except (SeglogError, OSError, asyncio.TimeoutError) as exc:
                log.warning("share group %r: deleting the state of %s-%d failed: %s",
                            group_id, topic_id, p, exc)
                out[(topic_id, p)] = codes.UNKNOWN_SERVER_ERROR
    return out


def _background(broker: BrokerState, found: ShareGroupsState, coro: Any) -> None:
    task = broker.loop.create_task(coro)
    found.background.add(task)
    task.add_done_callback(found.background.discard)


# --- the group in __consumer_offsets (Kafka's records) -----------------------------------


def _offsets_partition(broker: BrokerState, group_id: str) -> int | None:
    """The group's ``__consumer_offsets`` partition when this broker coordinates it."""
    return offsets_partition(broker, group_id)


def _records_log(found: ShareGroupsState) -> GroupRecordsLog:
    """The share groups' records in ``__consumer_offsets`` (made once, over ``found``'s
    ``loaded`` and ``written``)."""
    if found.records_log is None:
        found.records_log = GroupRecordsLog(
            "share", rec.decode_key, rec.decode_value, rec.ShareRecord,
            lambda records, now_ms: found.coordinator.load_records(records, now_ms),
            lambda group_id: found.coordinator.records(group_id),
            loaded=found.loaded, written=found.written)
    return found.records_log


def ensure_loaded(broker: BrokerState, found: ShareGroupsState, group_id: str) -> None:
    """Load the share groups of ``group_id``'s ``__consumer_offsets`` partition, once per
    leadership of it."""
    _records_log(found).ensure_loaded(broker, group_id)


def _load_partition(broker: BrokerState, found: ShareGroupsState, partition: int) -> None:
    _records_log(found).load_partition(broker, partition)


def persist(broker: BrokerState, found: ShareGroupsState, group_id: str
            ) -> AppendResult | None:
    """Append what changed in the group to its ``__consumer_offsets`` partition, as Kafka's
    records (tombstones for what is gone); the append (None: nothing appended)."""
    return _records_log(found).persist(broker, group_id)


def _state(ctx: RequestContext) -> ShareGroupsState:
    found = find_share_groups_state(ctx.broker)
    assert found is not None, "the share_groups module was not started"
    return found


def other_group(broker: BrokerState, group_id: str) -> bool:
    """Whether ``group_id`` is a group of another type (classic, consumer, streams) here."""
    groups_state = groups.find_groups_state(broker)
    if groups_state is None:
        return False
    if groups_state.coordinator.has_group(group_id):
        return True
    if groups_state.consumer is not None and groups_state.consumer.has_group(group_id):
        return True
    return any(t.has_group(group_id) for t in groups_state.group_types
               if not isinstance(t, ShareGroupType))


# --- ShareGroupHeartbeat ---------------------------------------------------------------


def _invalid(request: Any) -> str | None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``: the INVALID_REQUEST message,
    None when the request is well formed."""
    def empty(value: str | None) -> bool:
        return value is not None and not value.strip()
    if empty(request.member_id):
        return "MemberId can't be empty."
    if empty(request.group_id):
        return "GroupId can't be empty."
    if empty(request.rack_id):
        return "RackId can't be empty."
    epoch = int(request.member_epoch)
    if epoch == 0:
        if not request.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
    elif epoch < -1:
        return "MemberEpoch is invalid."
    return None


async def handle_share_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    """ShareGroupHeartbeat v1: READ on the group, a valid member id, DESCRIBE on each
    subscribed topic; then the coordinator's answer. Newly subscribed share-partitions are
    initialized through the persister in the background."""
    state = _state(ctx)

    def error(code: int, message: str | None = None) -> Any:
        return groups.response(ctx, dict(error_code=code, error_message=message,
                                         member_id=None, member_epoch=0,
                                         heartbeat_interval=0, assignment=None))

    if not shares_enabled(ctx.broker):
        return error(codes.UNSUPPORTED_VERSION)
    group_id = request.group_id
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return error(codes.GROUP_AUTHORIZATION_FAILED)
    member_id = request.member_id
    if not member_id or len(member_id) > _MAX_MEMBER_ID_CHARS:
        # KafkaApis answers with getErrorResponse: the code alone, no message.
        return error(codes.INVALID_REQUEST)
    names = list(request.subscribed_topic_names or ())
    if names:
        allowed = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if len(set(allowed)) < len(set(names)):
            return error(codes.TOPIC_AUTHORIZATION_FAILED)
    invalid = _invalid(request)
    if invalid is not None:
        return error(codes.INVALID_REQUEST, invalid)
    not_here = groups.coordinator_error(ctx, group_id)
    if not_here:
        return error(not_here, codes.message(not_here))
    ensure_loaded(ctx.broker, state, group_id)
    if not state.coordinator.has_group(group_id) and other_group(ctx.broker, group_id):
        return error(codes.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    epoch = int(request.member_epoch)
    try:
        result = state.coordinator.heartbeat(
            group_id=group_id, member_id=member_id, member_epoch=epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=None if request.subscribed_topic_names is None else names,
            client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
            now_ms=ctx.broker.now_ms())
    except sg.ShareGroupError as exc:
        return error(exc.error_code, exc.message)
    state.wake.set()
    appended = persist(ctx.broker, state, group_id)
    if epoch == -1:
        state._left(group_id, [member_id])
    if appended is not None:
        # As Kafka's coordinator: the answer once the records are replicated (acks=-1).
        groups_state = groups.find_groups_state(ctx.broker)
        timeout_ms = groups_state.offsets_commit_timeout_ms if groups_state else 5000
        await partition_seam(ctx.broker).wait_for_acks((appended,), acks=-1,
                                                      timeout_s=timeout_ms / 1000)
    if result.initialize is not None:
        _background(ctx.broker, state, _initialize(ctx.broker, state, result.initialize))
    assignment = None
    if result.assignment is not None:
        assignment = dict(topic_partitions=[
            dict(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(result.assignment.items(), key=lambda e: str(e[0]))])
    return groups.response(ctx, dict(
        error_code=codes.NONE, error_message=None, member_id=result.member_id,
        member_epoch=result.member_epoch, heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment))


async def initialize_share_state(broker: BrokerState, found: ShareGroupsState,
                                 request: sg.InitializeRequest
                                 ) -> dict[tuple[uuid.UUID, int], int]:
    """Kafka's ``persisterInitialize``: initialize the share-partitions' state, then mark
    them initialized (or, on an error, no longer initializing, so a later heartbeat asks
    again) and persist the group's ShareGroupStatePartitionMetadata. ``{(topic id,
    partition): error code}``."""
    persister = share_persister_of(broker)
    results: dict[tuple[uuid.UUID, int], int] = {}
    for topic_id, offsets in request.offsets.items():
        for p, start_offset in sorted(offsets.items()):
            error = codes.NONE
            if persister is not None:
                try:
                    error = int(await persister.initialize_state(
                        request.group_id, topic_id, p, request.state_epoch, start_offset))
                except (SeglogError, OSError, asyncio.TimeoutError) as exc:
                    log.warning("share group %r: initializing %s-%d failed: %s",
                                request.group_id, topic_id, p, exc)
                    error = codes.UNKNOWN_SERVER_ERROR
            results[(topic_id, p)] = error
    partitions: dict[uuid.UUID, set[int]] = {}
    for (topic_id, p) in results:
        partitions.setdefault(topic_id, set()).add(p)
    if any(results.values()):
        # Kafka: one failed partition uninitializes the whole request.
        found.coordinator.uninitialized(request.group_id, partitions)
    else:
        found.coordinator.initialized(request.group_id, partitions)
    persist(broker, found, request.group_id)
    return results


async def _initialize(broker: BrokerState, found: ShareGroupsState,
                      request: sg.InitializeRequest) -> None:
    await initialize_share_state(broker, found, request)


# --- ShareGroupDescribe ----------------------------------------------------------------


async def handle_share_group_describe(ctx: RequestContext, request: Any) -> Any:
    """ShareGroupDescribe v1: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED);
    INVALID_GROUP_ID for the empty id; GROUP_ID_NOT_FOUND for a group that is not a share
    group here."""
    state = _state(ctx)

    def failed(group_id: str, code: int, message: str | None = None) -> dict[str, Any]:
        return dict(error_code=code, error_message=message, group_id=group_id,
                    group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                    members=[], authorized_operations=-2147483648)

    if not shares_enabled(ctx.broker):
        return groups.response(ctx, dict(groups=[
            failed(g, codes.UNSUPPORTED_VERSION) for g in request.group_ids]))
    denied = []  # KafkaApis answers the refused groups first, then the empty ids
    invalid = []
    described = []
    names = {meta.topic_id: name for name, meta in topic_metadata(ctx.broker).items()}
    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            denied.append(failed(group_id, codes.GROUP_AUTHORIZATION_FAILED))
            continue
        if not group_id:
            invalid.append(failed("", codes.INVALID_GROUP_ID))
            continue
        not_here = groups.coordinator_error(ctx, group_id)
        if not_here:
            described.append(failed(group_id, not_here))
            continue
        ensure_loaded(ctx.broker, state, group_id)
        view = state.coordinator.describe(group_id)
        if view is None:
            message = f"Group {group_id} is not a share group." \
                if other_group(ctx.broker, group_id) else f"Group {group_id} not found."
            described.append(failed(group_id, codes.GROUP_ID_NOT_FOUND, message))
            continue
        members = [dict(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            assignment=dict(topic_partitions=[
                dict(topic_id=t, topic_name=names[t], partitions=sorted(ps))
                for t, ps in sorted(m.assigned.items(), key=lambda e: str(e[0]))
                if t in names])) for m in view.members]
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id) \
            if request.include_authorized_operations else -2147483648
        described.append(dict(
            error_code=codes.NONE, error_message=None, group_id=group_id,
            group_state=view.state, group_epoch=view.group_epoch,
            assignment_epoch=view.assignment_epoch, assignor_name=view.assignor_name,
            members=members, authorized_operations=operations))
    return groups.response(ctx, dict(groups=denied + invalid + described))


# --- start, stop, timers -----------------------------------------------------------------


def _config(state: BrokerState) -> sg.ShareGroupConfig:
    """The ``group.share.*`` configs, checked as Kafka's ``GroupCoordinatorConfig``."""
    def get(name: str, default: int) -> int:
        return int(state.config.get(name, default))

    session = get("group.share.session.timeout.ms", 45_000)
    low_s = get("group.share.min.session.timeout.ms", 45_000)
    high_s = get("group.share.max.session.timeout.ms", 60_000)
    heartbeat = get("group.share.heartbeat.interval.ms", 5_000)
    low_h = get("group.share.min.heartbeat.interval.ms", 5_000)
    high_h = get("group.share.max.heartbeat.interval.ms", 15_000)
    checks = (
        (high_h >= low_h, "group.share.max.heartbeat.interval.ms must be greater than or "
         "equal to group.share.min.heartbeat.interval.ms"),
        (heartbeat >= low_h, "group.share.heartbeat.interval.ms must be greater than or "
         "equal to group.share.min.heartbeat.interval.ms"),
        (heartbeat <= high_h, "group.share.heartbeat.interval.ms must be less than or equal "
         "to group.share.max.heartbeat.interval.ms"),
        (high_s >= low_s, "group.share.max.session.timeout.ms must be greater than or equal "
         "to group.share.min.session.timeout.ms"),
        (session >= low_s, "group.share.session.timeout.ms must be greater than or equal to "
         "group.share.min.session.timeout.ms"),
        (session <= high_s, "group.share.session.timeout.ms must be less than or equal to "
         "group.share.max.session.timeout.ms"),
    )
    for ok, message in checks:
        if not ok:
            raise InvalidConfigError(message)
    retry = max(get("group.share.initialize.retry.interval.ms", 30_000),
                get("offsets.commit.timeout.ms", 5_000))
    return sg.ShareGroupConfig(
        session_timeout_ms=session, heartbeat_interval_ms=heartbeat,
        max_size=get("group.share.max.size", 200),
        assignment_interval_ms=get("group.share.assignment.interval.ms", 1_000),
        initialize_retry_interval_ms=retry)


def _group_config_reader(state: BrokerState) -> Callable[[str, str], int | None]:
    """``(group id, name) -> int | None``: a group-level config the group sets
    (``share.session.timeout.ms``, ``share.heartbeat.interval.ms``; Kafka's
    ``GroupConfigManager``), clamped into the broker's bounds; None for the broker default."""
    view = group_configs(state)

    def read(group_id: str, name: str) -> int | None:
        if name not in view.get(group_id):
            return None
        return int(view.value(group_id, name))
    return read


async def start(state: BrokerState) -> None:
    """Create the coordinator, register the share GroupType and start the timer task."""
    coordinator = sg.ShareGroupCoordinator(_config(state), lambda: topic_metadata(state),
                                           _group_config_reader(state))
    coordinator.broker_assignment_interval_ms = lambda: int(
        broker_value(state, "group.share.assignment.interval.ms"))
    found = ShareGroupsState(coordinator=coordinator, wake=asyncio.Event(), broker=state)
    state.extensions[EXTENSION] = found
    groups_state = groups.find_groups_state(state)
    assert groups_state is not None, "the groups module starts before this one"
    groups_state.group_types.append(ShareGroupType(state, found))
    found.task = state.loop.create_task(_run_timers(state, found))


async def stop(state: BrokerState) -> None:
    """Stop the timer task and the persister calls under way."""
    found = find_share_groups_state(state)
    if found is None:
        return
    await cancel_and_wait([t for t in (found.task, *found.background) if t is not None])
    if found.remote_offsets is not None:
        await found.remote_offsets.close()
        found.remote_offsets = None


async def _run_timers(state: BrokerState, found: ShareGroupsState) -> None:
    """Fence members whose session expired, and forget the groups of partitions this broker
    no longer coordinates; sleeps in between (woken by the handlers)."""
    coordinator = found.coordinator
    while True:
        now = state.now_ms()
        try:
            fenced: dict[str, list[str]] = {}
            for group_id, member_id in coordinator.poll(now):
                log.info("share group %r: member %r fenced (session expired)", group_id,
                         member_id)
                fenced.setdefault(group_id, []).append(member_id)
            for group_id, member_ids in fenced.items():
                persist(state, found, group_id)
                found._left(group_id, member_ids)
            live = {meta.topic_id for meta in topic_metadata(state).values()}
            for group_id in coordinator.forget_deleted_topics(live):
                persist(state, found, group_id)
            coordinator.unload(_records_log(found).forget_unowned(
                state, coordinator.group_ids()))
        except Exception:  # noqa: BLE001 - the timers must keep running
            log.exception("share group coordinator timers failed")
        deadline = coordinator.next_deadline_ms()
        found.wake.clear()
        wait_s = 5.0 if deadline is None else min(5.0, max(0.0, (deadline - now) / 1000))
        await wait_event(found.wake, wait_s)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(76, 1, 1, handle_share_group_heartbeat),
    ApiHandler(77, 1, 1, handle_share_group_describe),
)
