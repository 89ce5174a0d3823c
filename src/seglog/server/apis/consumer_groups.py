"""Kafka's consumer group protocol on the wire (KIP-848): ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69).

The state machine is :class:`~seglog.coordinator.consumer_group.ConsumerGroupCoordinator`;
the groups module (:mod:`seglog.server.apis.groups`) creates it next to the classic
coordinator, runs its timers, drops its groups when this broker stops coordinating their
``__consumer_offsets`` partition, and routes OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups and DeleteGroups of a consumer group to it. This module adapts the two new
APIs: topic ids on the wire, names in the coordinator (the cluster's topic ids, as Metadata
answers them).
"""

from __future__ import annotations

import uuid
from typing import Any, Mapping

from kio.static.protocol import ResponsePayload

from ... import error_codes as codes
from ...coordinator import classic_group as cg
from ...coordinator import consumer_group as kg
from ...errors import SeglogError
from ..authorization import (AclOperation, ResourceType, authorize, authorized_operations,
                             filter_authorized)
from ..context import RequestContext
from ..registry import ApiHandler
from . import groups
from .data_topics import partition_seam
from ...cluster.seam import AppendResult

__all__ = ["HANDLERS", "handle_consumer_group_describe", "handle_consumer_group_heartbeat"]


def _topic_ids(ctx: RequestContext) -> dict[str, uuid.UUID]:
    return {name: a.topic_id for name, a in partition_seam(ctx.broker).assignments.items()
            if a.topic_id is not None}


def _named(ctx: RequestContext, owned: Any) -> kg.Partitions | None:
    """The request's ``topic_partitions`` by topic name (ids no topic has are dropped)."""
    if owned is None:
        return None
    names = {topic_id: name for name, topic_id in _topic_ids(ctx).items()}
    out: kg.Partitions = {}
    for topic in owned:
        name = names.get(topic.topic_id)
        if name is not None:
            out[name] = out.get(name, frozenset()) | frozenset(int(p) for p in topic.partitions)
    return out


def _with_ids(ids: Mapping[str, uuid.UUID], partitions: kg.Partitions,
              names: bool = False) -> list[dict[str, Any]]:
    out = []
    for topic in sorted(partitions):
        if topic in ids and partitions[topic]:
            entry: dict[str, Any] = dict(topic_id=ids[topic],
                                         partitions=sorted(partitions[topic]))
            if names:
                entry["topic_name"] = topic
            out.append(entry)
    return out


def _embedded_members(ctx: RequestContext, group_id: str) -> bool:
    """Whether seglog's in-process consumers are members of ``group_id`` (the Store's
    embedded coordinator hands out its partitions then)."""
    store = ctx.broker.store
    try:
        return group_id in store.groups() and bool(store.group(group_id).members())
    except SeglogError:
        return False


async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any
                                          ) -> ResponsePayload:
    """ConsumerGroupHeartbeat v0-v1 (v1: the client makes its member id)."""
    state = groups.find_groups_state(ctx.broker)
    assert state is not None and state.consumer is not None, "the groups module was not started"
    group_id = request.group_id

    def refused(code: int, message: str | None = None) -> ResponsePayload:
        return groups.response(ctx, dict(error_code=code, error_message=message,
                                         member_id=None, member_epoch=0,
                                         heartbeat_interval=0, assignment=None))

    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return refused(codes.GROUP_AUTHORIZATION_FAILED)
    names = set(request.subscribed_topic_names or ())
    if names and len(filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                       names)) < len(names):
        # KafkaApis: clients may not learn of topics they may not DESCRIBE.
        return refused(codes.TOPIC_AUTHORIZATION_FAILED)
    if group_id:
        not_here = groups.coordinator_error(ctx, group_id)
        if not_here:
            return refused(not_here)
        classic = state.coordinator
        if _embedded_members(ctx, group_id) or any(
                t.has_group(group_id) for t in state.group_types):
            # seglog's in-process consumers in the Store's embedded coordinator, or a group
            # of another type (streams, share).
            return refused(codes.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if classic.has_group(group_id) and classic.state(group_id) not in (cg.EMPTY, cg.DEAD):
            # Kafka 4.x's online upgrade (when group.consumer.migration.policy allows it):
            # a joining member makes a classic group of the consumer protocol type a
            # consumer group whose classic members rejoin.
            upgraded = None
            if request.member_epoch == 0 and state.consumer.config.upgrade_enabled():
                upgraded = classic.take_for_upgrade(group_id, state.consumer.config.max_size)
            if upgraded is None:
                return refused(codes.GROUP_ID_NOT_FOUND,
                               f"Group {group_id} is not a consumer group.")
            state.consumer.adopt_classic(group_id, upgraded, ctx.broker.now_ms())
    last_write = state.written.get(group_id)
    answer = state.consumer.heartbeat(kg.HeartbeatRequest(
        group_id=group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=groups.ms(request.rebalance_timeout),
        subscribed_topic_names=(None if request.subscribed_topic_names is None
                                else tuple(request.subscribed_topic_names)),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor, owned=_named(ctx, request.topic_partitions),
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        api_version=ctx.api_version), ctx.broker.now_ms())
    state.wake.set()  # the session timer moved
    if answer.error_code:
        return refused(answer.error_code, answer.error_message)
    appended = state.written.get(group_id)
    if appended is not None and appended is not last_write:
        # Kafka answers once the group's records are stored (acks=-1).
        waited = AppendResult(codes.NONE, appended=True, last_offset=appended.last_offset,
                              replica=appended.replica)
        await partition_seam(ctx.broker).wait_for_acks(
            (waited,), acks=-1, timeout_s=state.offsets_commit_timeout_ms / 1000)
        failed = groups.commit_error(waited.error_code)
        if failed:
            return refused(failed)
    if request.member_epoch == kg.LEAVE_GROUP_MEMBER_EPOCH and \
            groups.maybe_downgrade(state, group_id, ctx.broker.now_ms()):
        pass  # its classic members are a classic group now
    elif group_id and state.coordinator.has_group(group_id):
        # An empty classic group of this id became this consumer group (Kafka's offline
        # migration): the classic one is gone.
        state.coordinator.delete_group(group_id)
    assignment = None
    if answer.assignment is not None:
        assignment = dict(topic_partitions=_with_ids(_topic_ids(ctx), answer.assignment))
    return groups.response(ctx, dict(
        error_code=codes.NONE, error_message=None, member_id=answer.member_id,
        member_epoch=answer.member_epoch, heartbeat_interval=answer.heartbeat_interval_ms,
        assignment=assignment))


async def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> ResponsePayload:
    """ConsumerGroupDescribe v0-v1: each group's epochs, assignor and members with their
    current and target assignments; GROUP_ID_NOT_FOUND for an unknown group or one that is
    not a consumer group."""
    state = groups.find_groups_state(ctx.broker)
    assert state is not None and state.consumer is not None, "the groups module was not started"
    ids = _topic_ids(ctx)
    described = []
    for group_id in request.group_ids:
        empty: dict[str, Any] = dict(group_id=group_id, group_state="", group_epoch=0,
                                     assignment_epoch=0, assignor_name="", members=[],
                                     authorized_operations=-2147483648)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(dict(empty, error_code=codes.GROUP_AUTHORIZATION_FAILED,
                                  error_message=None))
            continue
        not_here = groups.coordinator_error(ctx, group_id)
        if not_here:
            described.append(dict(empty, error_code=not_here, error_message=None))
            continue
        group = state.consumer.group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a consumer group."
                       if state.coordinator.has_group(group_id) or any(
                           t.has_group(group_id) for t in state.group_types) else
                       f"Group {group_id} not found.")
            described.append(dict(empty, error_code=codes.GROUP_ID_NOT_FOUND,
                                  error_message=message, group_state="Dead"))
            continue
        members = []
        for member in group.members.values():
            members.append(dict(
                member_id=member.member_id, instance_id=member.instance_id,
                rack_id=member.rack_id, member_epoch=member.member_epoch,
                client_id=member.client_id, client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignment=dict(topic_partitions=_with_ids(ids, member.assigned, names=True)),
                target_assignment=dict(topic_partitions=_with_ids(
                    ids, group.target.get(member.member_id, {}), names=True)),
                member_type=0 if member.uses_classic_protocol() else 1))
        operations = -2147483648
        if request.include_authorized_operations:
            operations = authorized_operations(ctx, ResourceType.GROUP, group_id)
        described.append(dict(
            error_code=codes.NONE, error_message=None, group_id=group_id,
            group_state=group.state(), group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=state.consumer.preferred_assignor(group), members=members,
            authorized_operations=operations))
    return groups.response(ctx, dict(groups=described))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(68, 0, 1, handle_consumer_group_heartbeat),
    ApiHandler(69, 0, 1, handle_consumer_group_describe),
)
