"""FindCoordinator and Kafka's classic consumer group protocol: JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups,
OffsetDelete.

The group state machine is :class:`~seglog.coordinator.classic_group.ClassicGroupCoordinator`
(no sockets, no asyncio); this module adapts it to the wire: it decodes kio requests into
its calls, parks a JoinGroup or SyncGroup on an asyncio future that the coordinator's
callback completes, and runs the coordinator's timers from one background task that sleeps
until :meth:`~seglog.coordinator.classic_group.ClassicGroupCoordinator.next_deadline_ms` or
until a handler wakes it (no polling loop). Committed offsets go to the Store
(``__consumer_offsets``, the same offsets seglog's embedded consumers see); membership records
too (:meth:`~seglog.store.Store.write_group_metadata`), and :func:`start` loads them back.

In a cluster (``zookeeper.connect``; docs/cluster.md §3.7) a broker coordinates only the
groups of the ``__consumer_offsets`` partitions it leads (Kafka 2.8): FindCoordinator names
the partition's leader, :class:`~seglog.cluster.coordinators.CoordinatorPartitions` loads a
partition's offsets and groups when this broker becomes its leader and drops them when it
stops, other groups answer NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while loading), and
commits and SyncGroup answers wait for the high watermark (acks=-1).

The coordinator lives in ``state.extensions["groups"]`` (a :class:`GroupsState`); other
handler modules reach it with :func:`coordinator` (the transaction handlers call its
``check_member`` for TxnOffsetCommit).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import typing
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, TypeVar

from ...schemas import load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from ... import error_codes as codes
from . import data_topics
from .data_topics import partition_seam
from .group_configs import group_configs
from ...cluster import coordinators as cluster_coordinators
from ...cluster.seam import AppendOrigin, AppendResult, CoordinatorPartitionsView, PartitionSeam
from ..authorization import (AclOperation, ResourceType, authorize, authorize_cluster,
                             authorized_operations, filter_authorized)
from ..context import BrokerState, RequestContext
from ..registry import ApiHandler
from ...coordinator import classic_group as cg
from ...coordinator import consumer_group as kg
from ...coordinator import consumer_group_records as kgr
from ...coordinator.classic_group_schema import (GroupMetadataValue,
                                                  decode_group_metadata_value,
                                                  encode_group_metadata_value)
from ...coordinator.offsets_schema import OFFSETS_TOPIC
from ...errors import (CommitFailedError, GroupMembershipError, IllegalStateError,
                       InvalidConfigError, SeglogError, StaleMemberEpochError,
                       UnknownMemberIdError)
from ...aio import cancel_and_wait, wait_event
from ...types import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from ...storage.log import Log
    from ...store import Store

__all__ = ["GroupType", "GroupsState", "HANDLERS", "TxnMembers", "commit_error",
           "coordinator", "coordinator_error", "expire_offsets", "find_groups_state", "ms",
           "response", "start", "stop", "txn_members"]

log = logging.getLogger(__name__)

_R = TypeVar("_R")

#: The fields of a kio entity by name, as :func:`_make` takes them (a nested entity's as a
#: list of such dicts).
_Fields = dict[str, Any]
#: How a response names a topic: by name, or (OffsetCommit and OffsetFetch v10+) by id.
_TopicKey = str | uuid.UUID
#: One partition's answer: ``(its topic's key, partition, *fields)``.
_Answer = tuple[Any, ...]

EXTENSION = "groups"
_OFFSETS_RETENTION_CHECK_MS_DEFAULT = 600_000

# Kafka error codes used here beyond the coordinator's.
_INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details.")


class GroupType(typing.Protocol):
    """Another kind of group (KIP-1071 streams groups, KIP-848 consumer groups) that shares
    group ids, committed offsets and ListGroups with the classic groups here: its handler
    module registers one in :attr:`GroupsState.group_types` at its start."""

    #: ListGroups' group type and protocol type of its groups (``"streams"``).
    group_type: str
    protocol_type: str

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is one of its groups."""

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """The error of an OffsetCommit into its group ``group_id`` (NONE: accepted)."""

    def listed_groups(self) -> list[tuple[str, str]]:
        """``[(group id, state)]`` of its groups."""

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of its group ``group_id``: NONE when dropped (its offsets are deleted
        next), else the error (NON_EMPTY_GROUP)."""


@dataclasses.dataclass(eq=False)
class GroupsState:
    """The groups module's state in one broker: the ``coordinator``, the timer task and the
    event that wakes it, and the configs read at start."""

    coordinator: cg.ClassicGroupCoordinator
    wake: asyncio.Event
    offset_metadata_max_bytes: int
    offsets_retention_ms: int
    offsets_retention_check_ms: int
    task: asyncio.Task[None] | None = None
    #: The ``__consumer_offsets`` partitions this broker coordinates (the seam's view: all of
    #: them on a lone broker, those it leads in a cluster); set by :func:`start`.
    partitions: CoordinatorPartitionsView | None = None
    offsets_commit_timeout_ms: int = 5000
    #: The last membership append per group (an :class:`~seglog.cluster.seam.AppendResult`),
    #: which SyncGroup waits to see replicated.
    written: dict[str, AppendResult] = dataclasses.field(default_factory=dict)
    #: The consumer groups (KIP-848; :mod:`seglog.server.apis.consumer_groups`), set by
    #: :func:`start`.
    consumer: kg.ConsumerGroupCoordinator | None = None
    #: The other group types served here (:class:`GroupType`), registered at their start.
    group_types: list[GroupType] = dataclasses.field(default_factory=list)


def find_groups_state(state: BrokerState) -> GroupsState | None:
    """The groups module's state in the broker ``state`` (None before :func:`start`)."""
    found: GroupsState | None = state.extensions.get(EXTENSION)
    return found


class TxnMembers:
    """The member checks of a TxnOffsetCommit (:mod:`seglog.server.apis.txn`), routed to the
    group's coordinator: the consumer group one (KIP-848: member epochs) for a consumer
    group, else the classic one."""

    def __init__(self, state: GroupsState):
        self._state = state

    def check_member(self, group_id: str, member_id: str, generation_id: int,
                     group_instance_id: str | None = None) -> None:
        """Return when the member may commit, else raise the typed error of Kafka's
        ``validateOffsetCommit(isTransactional=true)`` (its ``kafka_error_code``)."""
        consumer = self._state.consumer
        if consumer is None or not consumer.has_group(group_id):
            self._state.coordinator.check_member(group_id, member_id, generation_id,
                                                 group_instance_id)
            return
        error = consumer.validate_offset_commit(group_id, member_id, generation_id,
                                                api_version=9, transactional=True)
        refused: dict[int, type[GroupMembershipError]] = {
            codes.UNKNOWN_MEMBER_ID: UnknownMemberIdError,
            codes.STALE_MEMBER_EPOCH: StaleMemberEpochError}
        if error:
            raise refused.get(error, GroupMembershipError)(
                f"consumer group {group_id!r} refuses member {member_id!r} at epoch "
                f"{generation_id}")

    def ensure_group(self, group_id: str, now_ms: int) -> None:
        """Keep an unknown group as an empty classic one (a commit from outside any group);
        a consumer group stays what it is."""
        consumer = self._state.consumer
        if consumer is None or not consumer.has_group(group_id):
            self._state.coordinator.ensure_group(group_id, now_ms)


def txn_members(state: BrokerState) -> TxnMembers | None:
    """The TxnOffsetCommit member checks of the broker ``state`` (None before
    :func:`start`)."""
    found = find_groups_state(state)
    return None if found is None else TxnMembers(found)


def coordinator(state: BrokerState) -> cg.ClassicGroupCoordinator:
    """The classic group coordinator of the broker ``state`` (after :func:`start`)."""
    found = find_groups_state(state)
    assert found is not None, "the groups module was not started"
    return found.coordinator


# --- building kio responses ---------------------------------------------------------------


def _element_class(cls: type, name: str) -> type:
    element: type = typing.get_type_hints(cls)[name].__args__[0]
    return element


def _make(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of kio entity ``cls`` from ``values`` (fields this version lacks are
    dropped; missing ones take their default or a zero value); nested entities are given
    as lists of dicts."""
    kwargs: dict[str, Any] = {}
    hints: dict[str, Any] | None = None
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        if f.name in values:
            value = values[f.name]
            if isinstance(value, list):
                element = _element_class(cls, f.name)
                if dataclasses.is_dataclass(element):
                    value = tuple(_make(element, item) for item in value)
                else:
                    value = tuple(value)
            elif isinstance(value, dict):  # one nested entity (nullable or not)
                hint = typing.get_type_hints(cls)[f.name]
                nested: type = next(a for a in (typing.get_args(hint) or (hint,))
                                    if isinstance(a, type) and dataclasses.is_dataclass(a))
                value = _make(nested, value)
        elif f.default is not dataclasses.MISSING:
            continue
        elif f.default_factory is not dataclasses.MISSING:
            continue
        else:
            if hints is None:
                hints = typing.get_type_hints(cls)
            value = _zero(hints[f.name], kafka_type)
        if kafka_type == "error_code":
            value = ErrorCode(int(value))
        elif kafka_type == "timedelta_i32" and not isinstance(value, datetime.timedelta):
            value = datetime.timedelta(milliseconds=int(value))
        kwargs[f.name] = value
    return cls(**kwargs)


def _zero(hint: Any, kafka_type: str | None) -> Any:
    if kafka_type == "error_code":
        return 0
    if kafka_type == "timedelta_i32":
        return datetime.timedelta(0)
    origin = typing.get_origin(hint)
    if origin is tuple:
        return ()
    if hint is bool:
        return False
    args = typing.get_args(hint)
    if type(None) in args:
        return None
    base = hint
    while hasattr(base, "__supertype__"):
        base = base.__supertype__
    if isinstance(base, type) and issubclass(base, str):
        return ""
    if isinstance(base, type) and issubclass(base, bytes):
        return b""
    return 0


def _response(ctx: RequestContext, values: Mapping[str, Any]) -> ResponsePayload:
    """kio's response of ``ctx``'s API and version with the fields ``values`` (see
    :func:`_make`)."""
    response: ResponsePayload = _make(load_response_schema(ctx.api_key, ctx.api_version),
                                      values)
    return response


def response(ctx: RequestContext, values: Mapping[str, Any]) -> ResponsePayload:
    """kio's response of ``ctx``'s API and version with the fields ``values``: missing
    fields take their default or zero, nested entities are given as dicts (lists of
    dicts)."""
    return _response(ctx, values)


def ms(value: Any) -> int:
    """Milliseconds of a kio ``timedelta_i32`` field (or of an int)."""
    return _ms(value)


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)


def _state(ctx: RequestContext) -> GroupsState:
    found: GroupsState = ctx.broker.extensions[EXTENSION]
    return found


def _now_ms(ctx: RequestContext) -> int:
    return ctx.broker.now_ms()


async def _parked(ctx: RequestContext, call: Callable[[Callable[[_R], None]], None]) -> _R:
    """Run ``call(done)`` and wait for the coordinator to call ``done(result)``."""
    future: asyncio.Future[_R] = ctx.broker.loop.create_future()

    def done(result: _R) -> None:
        if not future.done():
            future.set_result(result)

    call(done)
    _state(ctx).wake.set()  # the call may have scheduled a timer sooner than the task knows
    return await future


# --- FindCoordinator ----------------------------------------------------------------------


async def handle_find_coordinator(ctx: RequestContext, request: Any) -> ResponsePayload:
    """FindCoordinator v0-v6 for groups (key type 0), transactional ids (1) and
    share-partitions (2, from v6); other key types get INVALID_REQUEST. The seam answers: a lone broker coordinates everything; in a
    cluster a group's coordinator is the live leader of its ``__consumer_offsets`` partition (15 until there is
    one), a transactional id's the live leader of its ``__transaction_state`` partition
    (docs/cluster.md §3.7)."""
    key_type = getattr(request, "key_type", 0)
    cluster = partition_seam(ctx.broker)

    async def answer(key: str) -> _Fields:
        denied = _find_coordinator_denied(ctx, key_type, key)
        if denied:
            return dict(key=key, error_code=denied, node_id=-1, host="", port=-1,
                        error_message=codes.message(denied))
        if key_type not in (0, 1, 2):
            return dict(key=key, error_code=codes.INVALID_REQUEST, node_id=-1, host="", port=-1,
                        error_message=_INVALID_REQUEST_MESSAGE)
        if key_type == 2:  # a share-partition (seglog.server.apis.share_state)
            from . import share_state  # noqa: PLC0415 - sibling handler module

            found = await share_state.find_share_coordinator(ctx, key)
        elif key_type == 1:  # a transactional id (seglog.server.apis.txn, §3.7)
            found = await cluster_coordinators.find_transaction_coordinator(
                cluster, key, ctx.broker.config)
        else:
            found = await _find_group_coordinator(ctx, cluster, key)
        address: tuple[str, int] | None = None
        if not found.error_code:
            # The coordinator's endpoint on the listener the request came in on (Kafka:
            # COORDINATOR_NOT_AVAILABLE when that broker has no such listener).
            info = cluster.live_brokers.get(found.node_id)
            address = info.address(ctx.listener_name) if info is not None else None
        if found.error_code or address is None:
            code = found.error_code or codes.COORDINATOR_NOT_AVAILABLE
            message = codes.message(code) if found.error_message is None else found.error_message
            return dict(key=key, error_code=code, node_id=-1, host="",
                        port=-1, error_message=message if ctx.api_version >= 1 else None)
        # Kafka's message for success: the error's name before v4, empty from v4.
        return dict(key=key, error_code=codes.NONE, node_id=found.node_id, host=address[0],
                    port=address[1], error_message="" if ctx.api_version >= 4 else "NONE")

    if ctx.api_version >= 4:
        return _response(ctx, dict(coordinators=[
            await answer(k) for k in request.coordinator_keys]))
    return _response(ctx, await answer(request.key))


def _find_coordinator_denied(ctx: RequestContext, key_type: int, key: str) -> int:
    """KafkaApis.getCoordinator: DESCRIBE on the group / transactional id, else its
    authorization error (NONE when allowed)."""
    if key_type == 0 and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return codes.GROUP_AUTHORIZATION_FAILED
    if key_type == 1 and not authorize(ctx, AclOperation.DESCRIBE,
                                       ResourceType.TRANSACTIONAL_ID, key):
        return codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return codes.NONE


def _may_read_group(ctx: RequestContext, group_id: str) -> bool:
    """READ on the group: what JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetCommit
    need (GROUP_AUTHORIZATION_FAILED otherwise)."""
    return authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id)


async def _find_group_coordinator(ctx: RequestContext, cluster: PartitionSeam, group_id: str
                                  ) -> cluster_coordinators.CoordinatorAnswer:
    """A cluster member's FindCoordinator for a group (Kafka 2.8): the live leader of the
    group's ``__consumer_offsets`` partition, the topic created on first use with
    ``offsets.topic.num.partitions`` / ``offsets.topic.replication.factor``."""
    config = ctx.broker.config
    return await cluster_coordinators.find_coordinator(
        cluster, OFFSETS_TOPIC, group_id,
        partitions=int(config.get("offsets.topic.num.partitions", 50)),
        replication_factor=int(config.get("offsets.topic.replication.factor", 3)),
        topic_config={"cleanup.policy": "compact",
                      "segment.bytes": str(config.get("offsets.topic.segment.bytes",
                                                      104857600)),
                      "compression.type": "producer"})


def _group_partition(ctx: RequestContext, group_id: str) -> int | None:
    """The ``__consumer_offsets`` partition of ``group_id`` in the cluster (None: the topic
    does not exist yet)."""
    return _partition_in(partition_seam(ctx.broker), group_id)


def coordinator_error(ctx: RequestContext, group_id: str) -> int:
    """NONE when this broker coordinates ``group_id``: when it leads (and has loaded) the
    group's ``__consumer_offsets`` partition (a lone broker leads them all), else
    NOT_COORDINATOR (16), or COORDINATOR_LOAD_IN_PROGRESS (14) while it loads."""
    partitions = _state(ctx).partitions
    assert partitions is not None, "the groups module was not started"
    partition = _group_partition(ctx, group_id)
    if partition is None:
        return codes.NOT_COORDINATOR
    return partitions.error_for(partition)


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -----------------------------------------


def _embedded_members(ctx: RequestContext, group_id: str) -> bool:
    """Whether seglog's in-process consumers are members of ``group_id`` in the Store's
    embedded coordinator (then wire clients may not join it)."""
    store = ctx.broker.store
    try:
        return group_id in store.groups() and bool(store.group(group_id).members())
    except SeglogError:
        return False


async def handle_join_group(ctx: RequestContext, request: Any) -> ResponsePayload:
    """JoinGroup v0-v9 (MEMBER_ID_REQUIRED from v4, skip_assignment from v9)."""
    if not _may_read_group(ctx, request.group_id):
        return _response(ctx, dict(error_code=codes.GROUP_AUTHORIZATION_FAILED, member_id="",
                                   generation_id=-1,
                                   protocol_name=None if ctx.api_version >= 7 else "",
                                   leader="", members=[]))
    not_here = coordinator_error(ctx, request.group_id) if request.group_id else 0
    if not_here:
        return _response(ctx, dict(error_code=not_here, member_id=request.member_id,
                                   generation_id=-1,
                                   protocol_name=None if ctx.api_version >= 7 else "",
                                   leader="", members=[]))
    if request.group_id and (_embedded_members(ctx, request.group_id)
                             or _other_type(ctx, request.group_id) is not None):
        return _response(ctx, dict(error_code=codes.INCONSISTENT_GROUP_PROTOCOL,
                                   member_id=request.member_id, generation_id=-1,
                                   protocol_name=None, leader="", members=[]))
    consumer = _state(ctx).consumer
    if request.group_id and consumer is not None and consumer.has_members(request.group_id):
        # Kafka 4.x: a classic member joins a consumer group with members as one of them.
        return await _classic_join_to_consumer_group(ctx, request, consumer)
    if request.group_id and consumer is not None and consumer.has_group(request.group_id):
        # Kafka 4.x: an empty consumer group becomes a classic one (offline migration).
        consumer.delete_group(request.group_id)
    session_ms = _ms(request.session_timeout)
    rebalance_ms = _ms(getattr(request, "rebalance_timeout", -1))
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
    coord = _state(ctx).coordinator
    result: cg.JoinResult = await _parked(ctx, lambda done: coord.join_group(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        protocol_type=request.protocol_type, protocols=protocols,
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        api_version=ctx.api_version, now_ms=_now_ms(ctx), done=done))
    protocol_name = result.protocol_name
    if ctx.api_version < 7 and protocol_name is None:
        protocol_name = ""  # not nullable before v7
    return _response(ctx, dict(
        error_code=result.error_code, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name,
        leader=result.leader, skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[dict(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members]))


async def _await_group_write(ctx: RequestContext, group_id: str, last_write: Any) -> int:
    """Wait until the records ``group_id`` appended since ``last_write`` are replicated
    (Kafka answers once the group's records are stored, acks=-1); the error code."""
    state = _state(ctx)
    appended = state.written.get(group_id)
    if appended is None or appended is last_write:
        return codes.NONE
    waited = AppendResult(codes.NONE, appended=True, last_offset=appended.last_offset,
                          replica=appended.replica)
    await partition_seam(ctx.broker).wait_for_acks(
        (waited,), acks=-1, timeout_s=state.offsets_commit_timeout_ms / 1000)
    return commit_error(waited.error_code)


async def _classic_join_to_consumer_group(ctx: RequestContext, request: Any,
                                          consumer: kg.ConsumerGroupCoordinator
                                          ) -> ResponsePayload:
    """JoinGroup of a classic member to a consumer group with members (Kafka's
    ``classicGroupJoinToConsumerGroup``): no leader, the generation is its member epoch."""
    state = _state(ctx)
    last_write = state.written.get(request.group_id)
    result = consumer.classic_join(kg.ClassicJoin(
        group_id=request.group_id, member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=_ms(request.session_timeout),
        rebalance_timeout_ms=_ms(getattr(request, "rebalance_timeout", -1)),
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        api_version=ctx.api_version), _now_ms(ctx))
    state.wake.set()  # the session timer moved
    error = result.error_code or await _await_group_write(ctx, request.group_id, last_write)
    no_name = None if ctx.api_version >= 7 else ""
    if error:
        return _response(ctx, dict(error_code=error, member_id=result.member_id,
                                   generation_id=-1, protocol_name=no_name, leader="",
                                   members=[]))
    return _response(ctx, dict(
        error_code=codes.NONE, generation_id=result.generation_id, protocol_type="consumer",
        protocol_name=result.protocol_name, leader="", skip_assignment=False,
        member_id=result.member_id, members=[]))


async def handle_sync_group(ctx: RequestContext, request: Any) -> ResponsePayload:
    """SyncGroup v0-v5 (protocol type and name required and checked from v5)."""
    coord = _state(ctx).coordinator
    not_here = coordinator_error(ctx, request.group_id)
    if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        # Kafka's KafkaApis refuses a v5+ SyncGroup without them before the coordinator.
        not_here = codes.INCONSISTENT_GROUP_PROTOCOL
    elif not _may_read_group(ctx, request.group_id):
        # KafkaApis: after the protocol check, before the coordinator.
        not_here = codes.GROUP_AUTHORIZATION_FAILED
    if not_here:
        return _response(ctx, dict(error_code=not_here, assignment=b"", protocol_type=None,
                                   protocol_name=None))
    consumer = _state(ctx).consumer
    if consumer is not None and consumer.has_group(request.group_id):
        # A classic member of a consumer group: the coordinator's assignment.
        error, assignment = consumer.classic_sync(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id, getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None), _now_ms(ctx))
        _state(ctx).wake.set()
        if error:
            return _response(ctx, dict(error_code=error, assignment=b"", protocol_type=None,
                                       protocol_name=None))
        return _response(ctx, dict(error_code=codes.NONE, assignment=assignment,
                                   protocol_type=getattr(request, "protocol_type", None),
                                   protocol_name=getattr(request, "protocol_name", None)))
    result: cg.SyncResult = await _parked(ctx, lambda done: coord.sync_group(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        generation_id=request.generation_id,
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=[(a.member_id, bytes(a.assignment)) for a in request.assignments],
        now_ms=_now_ms(ctx), done=done))
    error = result.error_code
    state = _state(ctx)
    if error == 0:
        # Kafka's SyncGroup answers once the generation's assignment is stored (acks=-1):
        # wait for the group's last membership append to be replicated.
        appended = state.written.get(request.group_id)
        if appended is not None:
            waited = AppendResult(codes.NONE, appended=True, last_offset=appended.last_offset,
                                  replica=appended.replica)
            await partition_seam(ctx.broker).wait_for_acks(
                (waited,), acks=-1, timeout_s=state.offsets_commit_timeout_ms / 1000)
            error = commit_error(waited.error_code)
    if error:
        return _response(ctx, dict(error_code=error, assignment=b"", protocol_type=None,
                                   protocol_name=None))
    return _response(ctx, dict(error_code=result.error_code, assignment=result.assignment,
                               protocol_type=result.protocol_type,
                               protocol_name=result.protocol_name))


async def handle_heartbeat(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Heartbeat v0-v4."""
    state = _state(ctx)
    if not _may_read_group(ctx, request.group_id):
        return _response(ctx, dict(error_code=codes.GROUP_AUTHORIZATION_FAILED))
    not_here = coordinator_error(ctx, request.group_id)
    if not_here:
        return _response(ctx, dict(error_code=not_here))
    if state.consumer is not None and state.consumer.has_group(request.group_id):
        error = state.consumer.classic_heartbeat(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id, _now_ms(ctx))
        state.wake.set()
        return _response(ctx, dict(error_code=error))
    error = state.coordinator.heartbeat(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        generation_id=request.generation_id, now_ms=_now_ms(ctx))
    state.wake.set()
    return _response(ctx, dict(error_code=error))


async def handle_leave_group(ctx: RequestContext, request: Any) -> ResponsePayload:
    """LeaveGroup v0-v5: one member (v0-v2) or a batch with an answer per member (v3+)."""
    state = _state(ctx)
    if not _may_read_group(ctx, request.group_id):
        return _response(ctx, dict(error_code=codes.GROUP_AUTHORIZATION_FAILED, members=[]))
    not_here = coordinator_error(ctx, request.group_id)
    if not_here:
        return _response(ctx, dict(error_code=not_here, members=[]))
    members: list[tuple[str, str | None]]
    if ctx.api_version < 3:
        members = [(request.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    if state.consumer is not None and state.consumer.has_group(request.group_id):
        error, member_codes = 0, state.consumer.classic_leave(request.group_id, members)
    else:
        error, member_codes = state.coordinator.leave_group(
            group_id=request.group_id, members=members, now_ms=_now_ms(ctx))
    state.wake.set()
    if ctx.api_version < 3:
        return _response(ctx, dict(error_code=error or (member_codes[0] if member_codes else 0)))
    return _response(ctx, dict(error_code=error, members=[
        dict(member_id=m, group_instance_id=i, error_code=c)
        for (m, i), c in zip(members, member_codes)]))


# --- offsets ------------------------------------------------------------------------------


def _partition_exists(store: Store, topic: str, partition: int) -> bool:
    try:
        return 0 <= partition < store.topic(topic).partitions
    except SeglogError:
        return False


def _request_topic(ctx: RequestContext, topic: Any) -> tuple[str | None, _TopicKey]:
    """``(topic name or None when unknown, the key the response names it by)``: the name
    before v10, the topic id from v10 (OffsetCommit and OffsetFetch)."""
    if ctx.api_version < 10:
        return topic.name, topic.name
    found = data_topics.topic_ids(ctx.broker).topic(topic.topic_id)
    return (None if found is None else found.name), topic.topic_id


def _topic_key(ctx: RequestContext, name: str) -> _TopicKey | None:
    """How a response names topic ``name``: itself before v10, its id from v10 (None when
    the topic is gone)."""
    if ctx.api_version < 10:
        return name
    found = data_topics.topic_or_none(ctx.broker.store, name)
    return None if found is None else data_topics.to_uuid(found.topic_id)


async def handle_offset_commit(ctx: RequestContext, request: Any) -> ResponsePayload:
    """OffsetCommit v2-v10 (topic ids from v10): generation/member checks, then one batch per
    group to ``__consumer_offsets``; per-partition OFFSET_METADATA_TOO_LARGE and
    UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for an unknown id)."""
    state = _state(ctx)
    store = ctx.broker.store
    coord = state.coordinator
    group_id = request.group_id
    now = _now_ms(ctx)
    generation = request.generation_id_or_member_epoch
    instance_id = getattr(request, "group_instance_id", None)
    # As Kafka's KafkaApis: partitions of unknown topics are answered first, and the group
    # is checked only when some partition is left.
    resolved = [(_request_topic(ctx, t), t) for t in request.topics]
    if not _may_read_group(ctx, group_id):
        return _response(ctx, dict(topics=_by_topic(ctx, [
            (key, p.partition_index, codes.GROUP_AUTHORIZATION_FAILED)
            for (_name, key), t in resolved for p in t.partitions],
            lambda p, c: dict(partition_index=p, error_code=c))))
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                 (name for (name, _key), _t in resolved if name is not None))
    unknown_topic = codes.UNKNOWN_TOPIC_ID if ctx.api_version >= 10 else codes.UNKNOWN_TOPIC_OR_PARTITION
    known = {(name, p.partition_index) for (name, _key), t in resolved for p in t.partitions
             if name is not None and name in readable
             and _partition_exists(store, name, p.partition_index)}
    other_type = _other_type(ctx, group_id)
    if not known:
        error = 0
    elif not group_id:
        error = codes.INVALID_GROUP_ID
    elif coordinator_error(ctx, group_id):
        error = coordinator_error(ctx, group_id)
    elif state.consumer is not None and state.consumer.has_group(group_id):
        error = state.consumer.validate_offset_commit(group_id, request.member_id, generation,
                                                      ctx.api_version, tuple(sorted(known)))
    elif other_type is not None:
        error = other_type.validate_offset_commit(group_id, request.member_id, generation)
    else:
        if not coord.has_group(group_id) and group_id in _offset_groups(store):
            coord.ensure_group(group_id, now)  # a group known by its offsets only
        error = coord.validate_offset_commit(group_id=group_id, member_id=request.member_id,
                                             group_instance_id=instance_id,
                                             generation_id=generation, now_ms=now,
                                             api_version=ctx.api_version)
    state.wake.set()
    answers: list[tuple[_TopicKey, int, int]] = []
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    keys: dict[TopicPartition, _TopicKey] = {}
    for (name, key), topic in resolved:
        for p in topic.partitions:
            metadata = p.committed_metadata or ""
            if name is not None and name not in readable:
                answers.append((key, p.partition_index, codes.TOPIC_AUTHORIZATION_FAILED))
            elif name is None or (name, p.partition_index) not in known:
                answers.append((key, p.partition_index,
                                unknown_topic if name is None else codes.UNKNOWN_TOPIC_OR_PARTITION))
            elif error:
                answers.append((key, p.partition_index, error))
            elif len(metadata) > state.offset_metadata_max_bytes:
                answers.append((key, p.partition_index, codes.OFFSET_METADATA_TOO_LARGE))
            else:
                answers.append((key, p.partition_index, 0))
                tp = TopicPartition(name, p.partition_index)
                keys[tp] = key
                offsets[tp] = OffsetAndMetadata(
                    p.committed_offset, metadata, getattr(p, "committed_leader_epoch", -1))
    if offsets:
        # The commit is appended with acks=-1 (Kafka's offsets.commit.required.acks) to the
        # group's partition, which this broker leads, through the seam's one append.
        failure = 0
        cluster = partition_seam(ctx.broker)
        partition = _group_partition(ctx, group_id)
        result = None

        def commit(log_: Log) -> int:
            store.offset_commit(group_id, member_id=None, generation_id=-1, offsets=offsets)
            return int(log_.end_offset) - 1

        try:
            if partition is None:
                failure = codes.NOT_COORDINATOR
            else:
                result = cluster.append_now(TopicPartition(OFFSETS_TOPIC, partition), commit,
                                            acks=-1, origin=AppendOrigin.COORDINATOR)
                failure = commit_error(result.error_code)
        except CommitFailedError:
            failure = codes.UNKNOWN_MEMBER_ID  # in-process members own this group id
        except SeglogError as exc:
            log.warning("offset commit of group %r failed: %s", group_id, exc)
            failure = codes.UNKNOWN_SERVER_ERROR
        if not failure and result is not None:
            await cluster.wait_for_acks((result,), acks=-1,
                                        timeout_s=state.offsets_commit_timeout_ms / 1000)
            failure = commit_error(result.error_code)
        if failure:
            failed = {(keys[tp], tp.partition) for tp in offsets}
            answers = [(t, p, failure if (t, p) in failed else c) for t, p, c in answers]
        else:
            if other_type is None and (state.consumer is None
                                       or not state.consumer.has_group(group_id)):
                coord.ensure_group(group_id, now)
            ctx.broker.appended.notify()
    return _response(ctx, dict(topics=_by_topic(ctx, answers, lambda p, c: dict(
        partition_index=p, error_code=c))))


def commit_error(code: int) -> int:
    """Kafka's ``GroupMetadataManager.storeOffsets`` mapping of an append's error:
    NOT_LEADER_OR_FOLLOWER / KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; NOT_ENOUGH_REPLICAS(_AFTER_
    APPEND) / UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE; others as they are."""
    if code in (6, 56):
        return codes.NOT_COORDINATOR
    if code in (19, 20, 3):
        return codes.COORDINATOR_NOT_AVAILABLE
    return code


def _by_topic(ctx: RequestContext, answers: Iterable[_Answer],
              partition_fields: Callable[..., _Fields]) -> list[_Fields]:
    """Per-partition answers ``(topic key, partition, *fields)`` grouped by topic, each topic
    named by ``name`` (or, v10+ of OffsetCommit/OffsetFetch, ``topic_id``)."""
    field = "topic_id" if ctx.api_version >= 10 and ctx.api_key in (8, 9) else "name"
    topics: dict[_TopicKey, list[_Fields]] = {}
    for topic, partition, *rest in answers:
        topics.setdefault(topic, []).append(partition_fields(partition, *rest))
    return [{field: key, "partitions": parts} for key, parts in topics.items()]


def _offset_groups(store: Store) -> set[str]:
    try:
        return set(store.groups())
    except SeglogError:
        return set()


def _fetch_group(ctx: RequestContext, group_id: str, topics: Iterable[Any] | None,
                 require_stable: bool, member: tuple[str | None, int] | None = None
                 ) -> tuple[int, list[_Fields]]:
    """``(error code, topics)`` of one group's OffsetFetch (``topics`` None: all its
    committed partitions)."""
    store = ctx.broker.store
    if not group_id and ctx.api_version >= 8:
        return codes.INVALID_GROUP_ID, []
    not_here = coordinator_error(ctx, group_id) if group_id else 0
    if not_here:
        # Kafka: the group-level error (v2+); v1 has none, so each partition carries it.
        unanswered = [] if topics is None or ctx.api_version >= 2 else [
            (t.name, p) for t in topics for p in getattr(t, "partition_indexes", ())]
        return not_here, _by_topic(ctx, [(name, p, -1, -1, "", not_here)
                                         for name, p in unanswered],
                                   lambda p, offset, epoch, metadata, error: dict(
                                       partition_index=p, committed_offset=offset,
                                       committed_leader_epoch=epoch, metadata=metadata,
                                       error_code=error))
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return codes.GROUP_AUTHORIZATION_FAILED, []
    consumer = _state(ctx).consumer
    if member is not None and consumer is not None and consumer.has_group(group_id):
        refused = consumer.validate_offset_fetch(group_id, member[0], member[1])
        if refused:
            return refused, []
    try:
        committed = store.group(group_id).committed_offsets() if group_id else {}
    except SeglogError:
        committed = {}
    wanted: list[tuple[_TopicKey, str | None, int]] = []  # (response key, name, partition)
    if topics is None:
        # Kafka hides the offsets of topics the caller may not DESCRIBE.
        describable = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        (tp.topic for tp in committed))
        for tp in sorted(committed):
            key = _topic_key(ctx, tp.topic)
            if key is not None and tp.topic in describable:  # v10+: a deleted topic has no id
                wanted.append((key, tp.topic, tp.partition))
    else:
        for t in topics:
            name, key = _request_topic(ctx, t)
            wanted += [(key, name, p) for p in getattr(t, "partition_indexes", ())]
        describable = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        (name for _k, name, _p in wanted if name is not None))
    answers = []
    for key, name, partition in wanted:
        if name is None:
            answers.append((key, partition, -1, -1, "", codes.UNKNOWN_TOPIC_ID))
            continue
        if name not in describable:
            answers.append((key, partition, -1, -1, "", codes.TOPIC_AUTHORIZATION_FAILED))
            continue
        tp = TopicPartition(name, partition)
        om = committed.get(tp)
        error = 0
        if require_stable and store.offset_commit_pending(group_id, tp):
            error = codes.UNSTABLE_OFFSET_COMMIT
            om = None
        if om is None:
            answers.append((key, partition, -1, -1, "", error))
        else:
            answers.append((key, partition, om.offset, om.leader_epoch, om.metadata, error))
    return 0, _by_topic(ctx, answers, lambda p, offset, epoch, metadata, error: dict(
        partition_index=p, committed_offset=offset, committed_leader_epoch=epoch,
        metadata=metadata, error_code=error))


async def handle_offset_fetch(ctx: RequestContext, request: Any) -> ResponsePayload:
    """OffsetFetch v1-v10 (topic ids from v10; all partitions of a group when topics is null, v2+; several
    groups per request, v8+; require_stable answers UNSTABLE_OFFSET_COMMIT for a partition
    with a transactional commit waiting for its marker, v7+)."""
    require_stable = getattr(request, "require_stable", False)
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            member = ((group.member_id, group.member_epoch) if ctx.api_version >= 9
                      else None)
            error, topics = _fetch_group(ctx, group.group_id, group.topics, require_stable,
                                         member)
            other_type = _other_type(ctx, group.group_id) if not error else None
            if other_type is not None and getattr(group, "member_id", None) is not None:
                # v9+: a member of a streams group fetches with its epoch.
                error = other_type.validate_offset_commit(
                    group.group_id, group.member_id, group.member_epoch)
                topics = topics if not error else []
            groups.append(dict(group_id=group.group_id, topics=topics, error_code=error))
        return _response(ctx, dict(groups=groups))
    error, topics = _fetch_group(ctx, request.group_id, request.topics, require_stable)
    return _response(ctx, dict(topics=topics, error_code=error))


# --- ListGroups, DescribeGroups, DeleteGroups, OffsetDelete -------------------------------


def _listed_groups(ctx: RequestContext) -> list[tuple[str, str, str, str]]:
    """``[(group id, protocol type, state, group type)]`` of every group: the consumer
    groups (type ``consumer``), the classic coordinator's, and the groups known only by
    committed offsets (Empty, no protocol type), both ``classic``."""
    coord = _state(ctx).coordinator
    consumer = _state(ctx).consumer
    listed: dict[str, tuple[str, str, str, str]] = {}
    if consumer is not None:
        for group_id in consumer.group_ids():
            listed[group_id] = (group_id, cg.CONSUMER_PROTOCOL_TYPE,
                                consumer.state(group_id) or kg.EMPTY, "consumer")
    for group_id in coord.group_ids():
        description = coord.describe(group_id)
        assert description is not None, "the coordinator describes each of its group ids"
        listed.setdefault(group_id, (group_id, description.protocol_type, description.state,
                                     "classic"))
    for group_id in _offset_groups(ctx.broker.store):
        listed.setdefault(group_id, (group_id, "", cg.EMPTY, "classic"))
    return [listed[g] for g in sorted(listed) if _other_type(ctx, g) is None]


def _other_type(ctx: RequestContext, group_id: str) -> GroupType | None:
    """The :class:`GroupType` whose group ``group_id`` is, None for a classic group."""
    for group_type in _state(ctx).group_types:
        if group_type.has_group(group_id):
            return group_type
    return None


async def handle_list_groups(ctx: RequestContext, request: Any) -> ResponsePayload:
    """ListGroups v0-v5 (states filter v4+, case-insensitive as Kafka's; types filter v5+:
    ``classic`` or ``consumer``)."""
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    groups = []
    # KafkaApis: every group with DESCRIBE on the cluster, else those the caller may DESCRIBE.
    every_group = authorize_cluster(ctx, AclOperation.DESCRIBE)
    for group_id, protocol_type, state, kind in _listed_groups(ctx):
        if types and kind not in types:
            continue
        if states and state.lower() not in states:
            continue
        if not every_group and not authorize(ctx, AclOperation.DESCRIBE,
                                             ResourceType.GROUP, group_id):
            continue
        groups.append(dict(group_id=group_id, protocol_type=protocol_type,
                           group_state=state, group_type=kind))
    for group_type in _state(ctx).group_types:
        if types and group_type.group_type not in types:
            continue
        for group_id, state in group_type.listed_groups():
            if states and state.lower() not in states:
                continue
            if not every_group and not authorize(ctx, AclOperation.DESCRIBE,
                                                 ResourceType.GROUP, group_id):
                continue
            groups.append(dict(group_id=group_id, protocol_type=group_type.protocol_type,
                               group_state=state, group_type=group_type.group_type))
    return _response(ctx, dict(error_code=codes.NONE, groups=groups))


async def handle_describe_groups(ctx: RequestContext, request: Any) -> ResponsePayload:
    """DescribeGroups v0-v6: state names exactly Kafka's; members with their metadata and
    assignment when Stable; an unknown group is ``Dead`` (v6+: GROUP_ID_NOT_FOUND)."""
    coord = _state(ctx).coordinator
    offset_groups = None
    described: list[dict[str, Any]] = []
    denied: list[dict[str, Any]] = []  # KafkaApis answers the refused groups first
    for group_id in request.groups:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            denied.append(dict(
                error_code=codes.GROUP_AUTHORIZATION_FAILED, group_id=group_id,
                group_state="", protocol_type="", protocol_data="", members=[],
                authorized_operations=-2147483648, error_message=None))
            continue
        not_here = coordinator_error(ctx, group_id)
        if not_here:
            described.append(dict(
                error_code=not_here, group_id=group_id, group_state="", protocol_type="",
                protocol_data="", members=[], authorized_operations=-2147483648,
                error_message=None))
            continue
        if _other_type(ctx, group_id) is not None:
            # Kafka 4.4: a group of another type is no classic group (Dead; v6+ an error).
            error = codes.GROUP_ID_NOT_FOUND if ctx.api_version >= 6 else 0
            described.append(dict(
                error_code=error, group_id=group_id, group_state=cg.DEAD, protocol_type="",
                protocol_data="", members=[], authorized_operations=-2147483648,
                error_message=(f"Group {group_id} is not a classic group." if error
                               else None)))
            continue
        consumer = _state(ctx).consumer
        description = coord.describe(group_id)
        # Kafka 4.4 describes only classic groups here: a consumer group is Dead.
        is_consumer = consumer is not None and consumer.has_group(group_id)
        if is_consumer:
            description = None
        if description is None and not is_consumer:
            if offset_groups is None:
                offset_groups = _offset_groups(ctx.broker.store)
            if group_id in offset_groups:
                description = cg.GroupDescription(group_id, cg.EMPTY, "", "", ())
        if description is None:
            error = codes.GROUP_ID_NOT_FOUND if ctx.api_version >= 6 else 0
            described.append(dict(
                error_code=error, group_id=group_id, group_state=cg.DEAD, protocol_type="",
                protocol_data="", members=[], authorized_operations=-2147483648,
                error_message=None if not error else (
                    f"Group {group_id} is not a classic group." if is_consumer
                    else f"Group {group_id} not found.")))
            continue
        described.append(dict(
            error_code=codes.NONE, group_id=group_id, group_state=description.state,
            protocol_type=description.protocol_type, protocol_data=description.protocol,
            authorized_operations=-2147483648, error_message=None,
            members=[dict(member_id=m.member_id, group_instance_id=m.group_instance_id,
                          client_id=m.client_id, client_host=m.client_host,
                          member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in description.members]))
    if ctx.api_version >= 3 and getattr(request, "include_authorized_operations", False):
        for group in described:  # KafkaApis: the groups answered without an error
            if group["error_code"] == codes.NONE:
                group["authorized_operations"] = authorized_operations(
                    ctx, ResourceType.GROUP, group["group_id"])
    return _response(ctx, dict(groups=denied + described))


async def handle_delete_groups(ctx: RequestContext, request: Any) -> ResponsePayload:
    """DeleteGroups v0-v3: NON_EMPTY_GROUP while members are in, GROUP_ID_NOT_FOUND for a
    group unknown here and without offsets; else its offsets and membership record are
    tombstoned. v3's per-group ErrorMessage stays null, as Kafka 4.4 leaves it for these
    errors."""
    coord = _state(ctx).coordinator
    store = ctx.broker.store
    results = []
    for group_id in dict.fromkeys(request.groups_names):  # Kafka answers a repeated id once
        if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            results.append(dict(group_id=group_id, error_code=codes.GROUP_AUTHORIZATION_FAILED))
            continue
        # The empty id is a group id like any other here (Kafka 4.x's GroupCoordinatorService
        # keeps it "for backwards compatibility": GROUP_ID_NOT_FOUND unless it has offsets).
        not_here = coordinator_error(ctx, group_id)
        if not_here:
            results.append(dict(group_id=group_id, error_code=not_here))
            continue
        consumer = _state(ctx).consumer
        if consumer is not None and consumer.has_group(group_id) and \
                consumer.state(group_id) != kg.EMPTY:
            results.append(dict(group_id=group_id, error_code=codes.NON_EMPTY_GROUP))
            continue
        if consumer is not None and consumer.has_group(group_id) and \
                group_id not in _offset_groups(store):
            consumer.delete_group(group_id)  # an empty consumer group without offsets
            results.append(dict(group_id=group_id, error_code=codes.NONE))
            continue
        known = coord.has_group(group_id) or group_id in _offset_groups(store)
        other_type = _other_type(ctx, group_id)
        if other_type is not None:
            # A share group's share-partition state goes first (Kafka's deleteShareGroups).
            delete_state = getattr(other_type, "delete_group_state", None)
            refused = await delete_state(group_id) if delete_state is not None else 0
            refused = refused or other_type.delete_group(group_id)  # dropped when empty
            if refused:
                results.append(dict(group_id=group_id, error_code=refused))
                continue
        if not known:  # (a group of another type without offsets is gone already)
            results.append(dict(group_id=group_id, error_code=codes.NONE if other_type
                                 is not None else codes.GROUP_ID_NOT_FOUND))
            continue
        if coord.has_group(group_id) and coord.state(group_id) != cg.EMPTY:
            results.append(dict(group_id=group_id, error_code=codes.NON_EMPTY_GROUP))
            continue
        try:
            store.delete_group(group_id)
        except IllegalStateError:
            results.append(dict(group_id=group_id, error_code=codes.NON_EMPTY_GROUP))
            continue
        except SeglogError as exc:
            log.warning("deleting group %r failed: %s", group_id, exc)
            results.append(dict(group_id=group_id, error_code=codes.UNKNOWN_SERVER_ERROR))
            continue
        if consumer is not None:
            consumer.delete_group(group_id)
        if coord.has_group(group_id):
            try:
                coord.delete_group(group_id)
            except (SeglogError, OSError) as exc:
                # The group is gone from memory and its offsets are tombstoned; without its
                # membership tombstone a restart brings it back empty, which is harmless.
                log.warning("group %r: its membership tombstone was not written: %s",
                            group_id, exc)
        ctx.broker.appended.notify()
        results.append(dict(group_id=group_id, error_code=codes.NONE))
    for result in results:
        if result["error_code"] == codes.NONE:
            log.info("Deleted group %s (its offsets and membership), by %s",
                     result["group_id"], ctx.principal)
    return _response(ctx, dict(results=results))


async def handle_offset_delete(ctx: RequestContext, request: Any) -> ResponsePayload:
    """OffsetDelete v0: GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for a
    non-consumer group with members, GROUP_SUBSCRIBED_TO_TOPIC per partition of a topic its
    members subscribe to; the others' offsets are tombstoned."""
    coord = _state(ctx).coordinator
    store = ctx.broker.store
    group_id = request.group_id
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _response(ctx, dict(error_code=codes.GROUP_AUTHORIZATION_FAILED, topics=[]))
    not_here = coordinator_error(ctx, group_id)
    if not_here:
        return _response(ctx, dict(error_code=not_here, topics=[]))
    if not coord.has_group(group_id) and group_id not in _offset_groups(store):
        return _response(ctx, dict(error_code=codes.GROUP_ID_NOT_FOUND, topics=[]))
    error = coord.offset_delete_error(group_id)
    if error:
        return _response(ctx, dict(error_code=error, topics=[]))
    subscribed = coord.subscribed_topics(group_id)
    # Kafka's isSubscribedToTopic: unknown subscriptions of a consumer group with members
    # count as every topic.
    every_topic = subscribed is None and coord.state(group_id) not in (None, cg.EMPTY)
    answers, doomed = [], []
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                 (t.name for t in request.topics))
    for topic in request.topics:
        for p in topic.partitions:
            if topic.name not in readable:
                answers.append((topic.name, p.partition_index, codes.TOPIC_AUTHORIZATION_FAILED))
            elif every_topic or topic.name in (subscribed or ()):
                answers.append((topic.name, p.partition_index, codes.GROUP_SUBSCRIBED_TO_TOPIC))
            else:
                answers.append((topic.name, p.partition_index, 0))
                doomed.append(TopicPartition(topic.name, p.partition_index))
    if doomed:
        committed = store.group(group_id).committed_offsets()
        doomed = [tp for tp in doomed if tp in committed]
        if doomed:
            try:
                store.group(group_id).delete_offsets(doomed)
            except IllegalStateError:
                answers = [(t, p, codes.GROUP_SUBSCRIBED_TO_TOPIC if TopicPartition(t, p) in doomed
                            else c) for t, p, c in answers]
            else:
                ctx.broker.appended.notify()
    return _response(ctx, dict(error_code=codes.NONE, topics=_by_topic(
        ctx, answers, lambda p, c: dict(partition_index=p, error_code=c))))


# --- start, stop, timers -----------------------------------------------------------------


async def start(state: BrokerState) -> None:
    """Create the coordinator (configs from the broker's), load the membership records
    ``__consumer_offsets`` holds, and start the timer task."""
    config = state.config
    store = state.store
    group_config = cg.ClassicGroupConfig(
        initial_rebalance_delay_ms=int(config.get("group.initial.rebalance.delay.ms", 3000)),
        min_session_timeout_ms=int(config.get("group.min.session.timeout.ms", 6000)),
        max_session_timeout_ms=int(config.get("group.max.session.timeout.ms", 1_800_000)),
        max_size=int(config.get("group.max.size", 2**31 - 1)))

    cluster = partition_seam(state)

    # The last membership append per group, which the SyncGroup answers wait to see
    # replicated (acks=-1).
    written: dict[str, AppendResult] = {}

    def write(group_id: str, value: GroupMetadataValue | None) -> None:
        if getattr(store, "read_only", False):
            return
        # Only the leader of the group's partition appends (a follower's log is the leader's
        # copy); the group is dropped here when the leadership goes. acks=1 here: SyncGroup
        # waits for the replication (written).
        encoded = None if value is None else encode_group_metadata_value(value)
        partition = _partition_in(cluster, group_id)
        result = None if partition is None else cluster.append_now(
            TopicPartition(OFFSETS_TOPIC, partition),
            lambda _log: store.write_group_metadata(group_id, encoded),
            acks=1, origin=AppendOrigin.COORDINATOR)
        if result is None or not result.appended:
            raise SeglogError(f"group {group_id!r}: this broker does not lead its "
                              f"{OFFSETS_TOPIC} partition (NOT_COORDINATOR)")
        written[group_id] = result

    coord = cg.ClassicGroupCoordinator(group_config, write)

    # What each consumer group's records say now, so a change appends only its delta.
    consumer_records: dict[str, dict[bytes, bytes]] = {}

    def write_consumer(group_id: str, group: kg.Group | None) -> None:
        if getattr(store, "read_only", False):
            return
        ids = {name: a.topic_id for name, a in cluster.assignments.items()
               if a.topic_id is not None}
        now_records = {} if group is None else kgr.group_records(group, ids)
        before = consumer_records.get(group_id, {})
        records = kgr.ordered_delta(before, now_records)
        if not records:
            return
        partition = _partition_in(cluster, group_id)
        result = None if partition is None else cluster.append_now(
            TopicPartition(OFFSETS_TOPIC, partition),
            lambda _log: store.write_offsets_records(group_id, records),
            acks=1, origin=AppendOrigin.COORDINATOR)
        if result is None or not result.appended:
            log.warning("consumer group %r: its records were not written (this broker does "
                        "not lead its %s partition)", group_id, OFFSETS_TOPIC)
            return
        if now_records:
            consumer_records[group_id] = now_records
        else:
            consumer_records.pop(group_id, None)
        written[group_id] = result

    consumer = kg.ConsumerGroupCoordinator(_consumer_group_config(config), lambda: {
        name: len(a.partitions) for name, a in cluster.assignments.items()}, write_consumer)

    def groups_with_members() -> list[str]:
        # Called from the store's maintenance thread: sorted() and dict lookups run under
        # the GIL without switching, so the snapshot is consistent enough for expiry.
        return [g for g in coord.group_ids() if coord.state(g) not in (None, cg.EMPTY, cg.DEAD)
                ] + [g for g in consumer.group_ids() if consumer.state(g) != kg.EMPTY]

    store.add_active_groups_source(groups_with_members)
    groups_state = GroupsState(
        coordinator=coord, wake=asyncio.Event(),
        offset_metadata_max_bytes=int(config.get("offset.metadata.max.bytes", 4096)),
        offsets_retention_ms=int(config.get("offsets.retention.minutes", 10080)) * 60_000,
        offsets_retention_check_ms=int(config.get("offsets.retention.check.interval.ms",
                                                  _OFFSETS_RETENTION_CHECK_MS_DEFAULT)))
    groups_state.offsets_commit_timeout_ms = int(config.get("offsets.commit.timeout.ms", 5000))
    groups_state.written = written
    groups_state.consumer = consumer
    consumer.group_config = _per_group_consumer_config(state, consumer.config)
    state.extensions[EXTENSION] = groups_state
    # This broker coordinates the groups of the __consumer_offsets partitions it leads:
    # loaded when it becomes leader, dropped when it stops (Kafka's onLeadershipChange); the
    # others answer NOT_COORDINATOR. A lone broker leads them all and loads them here.

    async def load(partition: int, _leader_epoch: int) -> None:
        await state.run_blocking(store.load_offsets_partition, partition)
        records = await state.run_blocking(
            lambda: store.group_metadata_records(partition=partition))
        _load_records(coord, records, state.now_ms())
        raw = await state.run_blocking(store.offsets_records, partition, kgr.KEY_TYPES)
        names = {a.topic_id: name for name, a in cluster.assignments.items()
                 if a.topic_id is not None}
        try:
            loaded = kgr.load_groups(raw, names, state.now_ms(),
                                     consumer.config.session_timeout_ms)
        except SeglogError as exc:
            log.warning("%s partition %d: consumer group records do not parse (%s); its "
                        "consumer groups start empty", OFFSETS_TOPIC, partition, exc)
            loaded = {}
        ids = {name: topic_id for topic_id, name in names.items()}
        for group_id, group in loaded.items():
            consumer_records[group_id] = kgr.group_records(group, ids)
        consumer.load(loaded)
        groups_state.wake.set()

    def unload(partition: int) -> None:
        store.unload_offsets_partition(partition)
        for group_id in coord.group_ids():
            if _partition_in(cluster, group_id) == partition:
                coord.unload(group_id, codes.NOT_COORDINATOR)
        for group_id in consumer.group_ids():
            if _partition_in(cluster, group_id) == partition:
                consumer.unload(group_id)
                consumer_records.pop(group_id, None)
        for group_id in [g for g in written if _partition_in(cluster, g) == partition]:
            del written[group_id]

    groups_state.partitions = cluster.coordinator_partitions(OFFSETS_TOPIC, load=load,
                                                             unload=unload)
    await groups_state.partitions.start()
    groups_state.task = state.loop.create_task(_run_timers(state, groups_state))


def _consumer_group_config(config: Any) -> kg.ConsumerGroupConfig:
    """The consumer group coordinator's configs (Kafka's ``group.consumer.*``)."""
    assignors = config.get("group.consumer.assignors", "uniform,range")
    if isinstance(assignors, str):
        assignors = [a.strip() for a in assignors.split(",") if a.strip()]
    session_ms = int(config.get("group.consumer.session.timeout.ms", 45000))
    heartbeat_ms = int(config.get("group.consumer.heartbeat.interval.ms", 5000))
    # Kafka's GroupCoordinatorConfig refuses to start outside these bounds.
    for name, value, low, high in (
            ("group.consumer.session.timeout.ms", session_ms,
             int(config.get("group.consumer.min.session.timeout.ms", 45000)),
             int(config.get("group.consumer.max.session.timeout.ms", 60000))),
            ("group.consumer.heartbeat.interval.ms", heartbeat_ms,
             int(config.get("group.consumer.min.heartbeat.interval.ms", 5000)),
             int(config.get("group.consumer.max.heartbeat.interval.ms", 15000)))):
        if not low <= value <= high:
            raise InvalidConfigError(f"{name} ({value}) must be between its min ({low}) and "
                                     f"max ({high}) configs")
    if heartbeat_ms >= session_ms:
        raise InvalidConfigError("group.consumer.heartbeat.interval.ms must be less than "
                                 "group.consumer.session.timeout.ms")
    return kg.ConsumerGroupConfig(
        session_timeout_ms=session_ms, heartbeat_interval_ms=heartbeat_ms,
        max_size=int(config.get("group.consumer.max.size", 2**31 - 1)),
        assignors=tuple(assignors),
        migration_policy=str(config.get("group.consumer.migration.policy", "bidirectional")))


def _per_group_consumer_config(state: BrokerState, base: kg.ConsumerGroupConfig
                               ) -> Callable[[str], kg.ConsumerGroupConfig]:
    """``group_id -> its config``: the group configs ``consumer.session.timeout.ms`` and
    ``consumer.heartbeat.interval.ms`` it sets (clamped into the broker's bounds), else the
    broker's (Kafka's ``GroupMetadataManager.consumerGroupSessionTimeoutMs(groupId)``)."""
    view = group_configs(state)

    def config_of(group_id: str) -> kg.ConsumerGroupConfig:
        own = view.get(group_id)
        if not own:
            return base
        session_ms, heartbeat_ms = base.session_timeout_ms, base.heartbeat_interval_ms
        if "consumer.session.timeout.ms" in own:
            session_ms = int(view.value(group_id, "consumer.session.timeout.ms"))
        if "consumer.heartbeat.interval.ms" in own:
            heartbeat_ms = int(view.value(group_id, "consumer.heartbeat.interval.ms"))
        return base._replace(session_timeout_ms=session_ms, heartbeat_interval_ms=heartbeat_ms)

    return config_of


def _partition_in(cluster: PartitionSeam, group_id: str) -> int | None:
    return cluster_coordinators.partition_in(cluster, OFFSETS_TOPIC, group_id)


def _load_records(coord: cg.ClassicGroupCoordinator, records: Mapping[str, bytes | None],
                  now_ms: int) -> None:
    """Take back the membership records read from ``__consumer_offsets``."""
    for group_id, raw in records.items():
        try:
            value = decode_group_metadata_value(raw)
        except SeglogError as exc:
            log.warning("group %r: its membership record does not parse (%s); the group "
                        "starts empty", group_id, exc)
            value = None
        coord.load(group_id, value, now_ms)


async def stop(state: BrokerState) -> None:
    """Stop the timer task (the groups' state is in ``__consumer_offsets`` already)."""
    groups_state = find_groups_state(state)
    if groups_state is not None and groups_state.partitions is not None:
        await groups_state.partitions.close()  # None: stopped before its start finished
    if groups_state is None or groups_state.task is None:
        return
    # Bounded: the shutdown must not hang on a task that missed its cancellation.
    await cancel_and_wait([groups_state.task])


def maybe_downgrade(groups_state: GroupsState, group_id: str, now_ms: int) -> bool:
    """Kafka 4.x's online downgrade (when group.consumer.migration.policy allows it): a
    consumer group whose members of the consumer protocol are
    gone and whose classic members remain becomes a classic group, which rebalances.
    Whether it did."""
    consumer = groups_state.consumer
    if consumer is None or not consumer.config.downgrade_enabled():
        return False
    downgraded = consumer.take_for_downgrade(group_id,
                                             groups_state.coordinator.config.max_size)
    if downgraded is None:
        return False
    if not groups_state.coordinator.adopt_downgraded(group_id, downgraded, now_ms):
        # Not expected (the id is free, the members share a protocol): they rejoin.
        log.warning("consumer group %r could not become a classic group", group_id)
        return False
    groups_state.wake.set()
    return True


async def _run_timers(state: BrokerState, groups_state: GroupsState) -> None:
    """Fire the coordinator's timers when due, and expire old offsets of empty groups every
    ``offsets.retention.check.interval.ms``; sleeps in between (woken by handlers)."""
    coord = groups_state.coordinator
    consumer = groups_state.consumer
    assert consumer is not None, "started with the groups module"
    next_expiry_ms = state.now_ms() + groups_state.offsets_retention_check_ms
    while True:
        now = state.now_ms()
        try:
            coord.poll(now)
            for group_id in dict.fromkeys(g for g, _m in consumer.poll(now)):
                maybe_downgrade(groups_state, group_id, now)
            if now >= next_expiry_ms:
                next_expiry_ms = now + groups_state.offsets_retention_check_ms
                expire_offsets(state, now)
        except Exception:  # noqa: BLE001 - the timers must keep running
            log.exception("group coordinator timers failed")
        deadlines = [d for d in (coord.next_deadline_ms(), consumer.next_deadline_ms())
                     if d is not None]
        deadline = min(deadlines) if deadlines else None
        wait_until = next_expiry_ms if deadline is None else min(deadline, next_expiry_ms)
        groups_state.wake.clear()
        # wait_event, not asyncio.wait_for: a stop's cancel racing a handler's wake must
        # end this task (wait_for swallowed it on 3.11 and the broker's shutdown hung).
        await wait_event(groups_state.wake, max(0.0, (wait_until - state.now_ms()) / 1000))


def expire_offsets(state: BrokerState, now_ms: int) -> None:
    """Kafka's offsets expiration for groups without members: the offsets of an empty
    classic group expire ``offsets.retention.minutes`` after it became empty; those of a
    group known only by its offsets, that long after each commit. Groups with members keep
    theirs. An empty classic group left without offsets is then deleted. Runs on the event loop thread (the timer task calls it every
    ``offsets.retention.check.interval.ms``)."""
    groups_state: GroupsState = state.extensions[EXTENSION]
    store = state.store
    if getattr(store, "read_only", False):
        return
    coord = groups_state.coordinator
    retention = groups_state.offsets_retention_ms
    for group_id in sorted(_offset_groups(store)):
        group_state = coord.state(group_id)
        if group_state not in (None, cg.EMPTY):
            continue
        consumer = groups_state.consumer
        if consumer is not None and consumer.state(group_id) not in (None, kg.EMPTY):
            continue
        empty_since = coord.state_timestamp_ms(group_id) if group_state == cg.EMPTY else -1
        try:
            group = store.group(group_id)
            if group.members():
                continue
            doomed = [tp for tp, om in group.committed_offsets().items()
                      if (empty_since if empty_since >= 0 else om.commit_timestamp_ms)
                      + retention <= now_ms]
            if doomed:
                group.delete_offsets(doomed)
        except SeglogError as exc:
            log.warning("expiring offsets of group %r failed: %s", group_id, exc)
    # Kafka's cleanupGroupMetadata: an empty classic group with no offsets left is deleted
    # (tombstoned), e.g. one a refused or abandoned first JoinGroup created.
    with_offsets = _offset_groups(store)
    for group_id in coord.group_ids():
        if coord.state(group_id) == cg.EMPTY and group_id not in with_offsets:
            coord.delete_group(group_id)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(10, 0, 6, handle_find_coordinator),
    ApiHandler(11, 0, 9, handle_join_group),
    ApiHandler(14, 0, 5, handle_sync_group),
    ApiHandler(12, 0, 4, handle_heartbeat),
    ApiHandler(13, 0, 5, handle_leave_group),
    ApiHandler(8, 2, 10, handle_offset_commit),
    ApiHandler(9, 1, 10, handle_offset_fetch),
    ApiHandler(16, 0, 5, handle_list_groups),
    ApiHandler(15, 0, 6, handle_describe_groups),
    ApiHandler(42, 0, 3, handle_delete_groups),
    ApiHandler(47, 0, 0, handle_offset_delete),
)
