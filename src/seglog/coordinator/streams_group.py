"""The streams group protocol (KIP-1071) as Kafka 4.4's group coordinator serves it: members
of a Kafka Streams application join with their topology, the coordinator checks the topology
against the cluster's topics, says which internal topics are missing, assigns tasks
(:mod:`.streams_group_assignor`) and reconciles each member to its target with member
epochs (tasks are revoked before they are given to another member).

No sockets, no asyncio, no storage: :class:`StreamsGroupCoordinator` takes each heartbeat
as plain values and returns a :class:`HeartbeatResult`; the caller (the handler module
``seglog.server.apis.streams_groups``) answers the wire, creates the missing internal topics
and runs :meth:`StreamsGroupCoordinator.poll` for session timeouts. Topic partition counts
come from the ``partition_count(topic)`` callable it is given.

What Kafka does and this does not (yet): source topic regular expressions match with
Python's ``re`` (Kafka: RE2/J), copartitioning is not enforced beyond equal counts of the
repartition topics Streams names, no warm-up tasks, no rack-aware assignment, static
membership (``group.instance.id``) is taken as a dynamic member. The group's state is given
as Kafka's ``__consumer_offsets`` records (:meth:`StreamsGroupCoordinator.records`) and taken
back from them (:meth:`StreamsGroupCoordinator.load_records`); the caller writes and reads
them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from .. import error_codes as codes
from . import streams_group_records as rec
from .streams_group_assignor import AssignorMember, Task, assign_tasks

__all__ = ["EMPTY", "NOT_READY", "ASSIGNING", "RECONCILING", "STABLE", "DEAD",
           "HeartbeatResult", "MemberView", "StreamsGroupConfig", "StreamsGroupCoordinator",
           "Subtopology", "TopicInfo", "Topology", "STATUS_MISSING_SOURCE_TOPICS",
           "STATUS_INCORRECTLY_PARTITIONED_TOPICS", "STATUS_MISSING_INTERNAL_TOPICS",
           "STATUS_SHUTDOWN_APPLICATION", "STATUS_STALE_TOPOLOGY"]

# Kafka's StreamsGroup.StreamsGroupState names (as ListGroups and StreamsGroupDescribe say).
EMPTY = "Empty"
NOT_READY = "NotReady"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"
DEAD = "Dead"

# StreamsGroupHeartbeatResponse.Status codes (Kafka 4.4's clients jar).
STATUS_STALE_TOPOLOGY = 0
STATUS_MISSING_SOURCE_TOPICS = 1
STATUS_INCORRECTLY_PARTITIONED_TOPICS = 2
STATUS_MISSING_INTERNAL_TOPICS = 3
STATUS_SHUTDOWN_APPLICATION = 4

# Member states of Kafka's streams MemberState, and their values in its records.
_STABLE = "STABLE"
_UNREVOKED = "UNREVOKED_TASKS"
_UNRELEASED = "UNRELEASED_TASKS"
_STATE_VALUES = {_STABLE: 1, _UNREVOKED: 2, _UNRELEASED: 3}

#: Tasks by kind: ``{subtopology id: {partition, ...}}`` for active, standby, warm-up.
Tasks = tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]]]


def _empty_tasks() -> Tasks:
    return ({}, {}, {})


def _flat(by_subtopology: Mapping[str, Iterable[int]]) -> set[Task]:
    return {(s, p) for s, ps in by_subtopology.items() for p in ps}


def _nest(tasks: Iterable[Task]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return out


@dataclass(frozen=True)
class TopicInfo:
    """An internal topic of a topology: its name, partition count (0: derived), replication
    factor (0: the broker's default) and topic configs."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    """One subtopology as the member sends it."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()


@dataclass(frozen=True)
class Topology:
    """A streams application's topology: its epoch and subtopologies."""

    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True)
class StreamsGroupConfig:
    """The ``group.streams.*`` configs the coordinator uses."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    task_offset_interval_ms: int = 60_000
    max_size: int = 2**31 - 1


@dataclass
class _Member:
    member_id: str
    process_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    instance_id: str | None = None
    rack_id: str | None = None
    topology_epoch: int = -1
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = _STABLE
    assigned: Tasks = field(default_factory=_empty_tasks)
    pending_revocation: Tasks = field(default_factory=_empty_tasks)
    session_deadline_ms: int = 0
    #: When a member asked to revoke tasks must have done it (its rebalance timeout); -1:
    #: nothing asked.
    revocation_deadline_ms: int = -1
    task_offsets: tuple[tuple[str, int, int], ...] = ()
    task_end_offsets: tuple[tuple[str, int, int], ...] = ()


@dataclass
class _Group:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    #: ``{subtopology id: task count}`` once the topology is checked against the topics.
    task_counts: dict[str, int] | None = None
    #: The topic partition counts the configuration was computed from.
    metadata: tuple[tuple[str, int | None], ...] = ()
    statuses: list[tuple[int, str]] = field(default_factory=list)
    missing_internal: dict[str, TopicInfo] = field(default_factory=dict)
    #: The partition count of each internal topic, once the topology is checked.
    internal_partitions: dict[str, int] = field(default_factory=dict)
    members: dict[str, _Member] = field(default_factory=dict)
    target: dict[str, Tasks] = field(default_factory=dict)
    topology_description: object | None = None
    shutdown_requested: bool = False
    #: Bumped when where the members' tasks are (or their endpoints) changes.
    endpoint_epoch: int = 0
    endpoint_signature: object = None


@dataclass(frozen=True)
class HeartbeatResult:
    """What a StreamsGroupHeartbeat is answered: an error (``error_code`` non-zero, with
    ``error_message``), or the member's epoch, its tasks and the group's statuses; plus
    ``create_topics``: the internal topics the caller should create (name ->
    :class:`TopicInfo` with the partition count to create)."""

    error_code: int = codes.NONE
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    active: dict[str, set[int]] | None = None
    standby: dict[str, set[int]] | None = None
    warmup: dict[str, set[int]] | None = None
    statuses: tuple[tuple[int, str], ...] = ()
    create_topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    #: The group's endpoint information epoch, and (when the member's differs) where each
    #: member with a user endpoint has its partitions: ``[((host, port), {topic:
    #: partitions} active, {topic: partitions} standby)]`` (Kafka's IQ metadata).
    endpoint_epoch: int = 0
    partitions_by_endpoint: list[tuple[tuple[str, int], dict[str, list[int]],
                                       dict[str, list[int]]]] | None = None


@dataclass(frozen=True)
class MemberView:
    """One member, as StreamsGroupDescribe shows it."""

    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]
    task_offsets: tuple[tuple[str, int, int], ...]
    task_end_offsets: tuple[tuple[str, int, int], ...]
    assigned: Tasks
    target: Tasks


@dataclass(frozen=True)
class GroupView:
    """One group, as StreamsGroupDescribe shows it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    topology: Topology | None
    members: tuple[MemberView, ...]
    topology_description: object | None


class StreamsGroupError(Exception):
    """A heartbeat refused with Kafka's ``error_code``."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class StreamsGroupCoordinator:
    """The streams groups of one broker (those of the ``__consumer_offsets`` partitions it
    coordinates). ``partition_count(topic)``: the topic's partition count, None when it does
    not exist; ``topic_names()``: every topic (for source topic patterns)."""

    def __init__(self, config: StreamsGroupConfig,
                 partition_count: Callable[[str], int | None],
                 topic_names: Callable[[], Iterable[str]]) -> None:
        self.config = config
        #: ``group_id -> the config that group runs with`` (Kafka's group configs
        #: ``streams.*``); None: ``config`` for every group.
        self.group_config: Callable[[str], StreamsGroupConfig] | None = None
        self._partition_count = partition_count
        self._topic_names = topic_names
        self._groups: dict[str, _Group] = {}

    # --- queries ------------------------------------------------------------------------

    def config_of(self, group_id: str) -> StreamsGroupConfig:
        """The config group ``group_id`` runs with (its group configs over the broker's)."""
        return self.group_config(group_id) if self.group_config is not None else self.config

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a streams group here."""
        return group_id in self._groups

    def group_ids(self) -> list[str]:
        """The streams groups' ids, sorted."""
        return sorted(self._groups)

    def state(self, group_id: str) -> str | None:
        """The group's state name (Kafka's), None for an unknown group."""
        group = self._groups.get(group_id)
        return None if group is None else self._state(group)

    def _state(self, group: _Group) -> str:
        if not group.members:
            return EMPTY
        if group.task_counts is None:
            return NOT_READY
        if group.assignment_epoch != group.group_epoch:
            return ASSIGNING
        if any(m.member_epoch != group.assignment_epoch or m.state != _STABLE
               for m in group.members.values()):
            return RECONCILING
        return STABLE

    def describe(self, group_id: str) -> GroupView | None:
        """The group as StreamsGroupDescribe shows it (None: not a streams group here)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        members = tuple(
            MemberView(m.member_id, m.member_epoch, m.instance_id, m.rack_id, m.client_id,
                       m.client_host, m.topology_epoch, m.process_id, m.user_endpoint,
                       m.client_tags, m.task_offsets, m.task_end_offsets, m.assigned,
                       group.target.get(m.member_id, _empty_tasks()))
            for m in sorted(group.members.values(), key=lambda m: m.member_id))
        topology = group.topology
        if topology is not None and group.internal_partitions:
            # As Kafka describes it: the internal topics with their configured counts.
            counts = group.internal_partitions

            def configured(t: TopicInfo) -> TopicInfo:
                return replace(t, partitions=counts.get(t.name, t.partitions))

            topology = replace(topology, subtopologies=tuple(
                replace(s, state_changelog_topics=tuple(map(configured,
                                                            s.state_changelog_topics)),
                        repartition_source_topics=tuple(map(configured,
                                                            s.repartition_source_topics)))
                for s in topology.subtopologies))
        return GroupView(group_id, self._state(group), group.group_epoch,
                         group.assignment_epoch, topology, members,
                         group.topology_description)

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """Kafka's ``StreamsGroup.validateOffsetCommit``: NONE, UNKNOWN_MEMBER_ID or
        STALE_MEMBER_EPOCH. An admin commit (no member id, epoch -1) is allowed while the
        group is empty."""
        group = self._groups.get(group_id)
        if group is None:
            return codes.GROUP_ID_NOT_FOUND
        if not member_id and member_epoch < 0:
            return codes.NONE if not group.members else codes.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return codes.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return codes.STALE_MEMBER_EPOCH
        return codes.NONE

    def next_deadline_ms(self) -> int | None:
        """The earliest session deadline, None with no members."""
        deadlines = [m.session_deadline_ms for g in self._groups.values()
                     for m in g.members.values()]
        deadlines += [m.revocation_deadline_ms for g in self._groups.values()
                      for m in g.members.values() if m.state == _UNREVOKED]
        return min(deadlines) if deadlines else None

    # --- records (Kafka's, in __consumer_offsets) ------------------------------------------

    def records(self, group_id: str) -> dict[bytes, bytes | None]:
        """The group as Kafka's ``__consumer_offsets`` records, ``{key: value}`` (empty for
        a group not here): its metadata, topology, target assignment, and per member its
        metadata, target and current assignment (:mod:`.streams_group_records`)."""
        group = self._groups.get(group_id)
        if group is None:
            return {}
        out: dict[bytes, bytes | None] = {}

        def put(record_type: int, member_id: str | None, value: dict[str, Any]) -> None:
            out[rec.encode_key(record_type, group_id, member_id)] = rec.encode_value(
                record_type, value)

        put(rec.GROUP_METADATA, None, {"epoch": group.group_epoch, "metadata_hash": 0})
        if group.topology is not None:
            put(rec.TOPOLOGY, None, {"epoch": group.topology.epoch, "subtopologies": [
                {"subtopology_id": s.subtopology_id, "source_topics": s.source_topics,
                 "source_topic_regex": s.source_topic_regex,
                 "state_changelog_topics": [_topic_fields(t) for t in s.state_changelog_topics],
                 "repartition_sink_topics": s.repartition_sink_topics,
                 "repartition_source_topics": [_topic_fields(t)
                                               for t in s.repartition_source_topics]}
                for s in group.topology.subtopologies]})
        put(rec.TARGET_ASSIGNMENT_METADATA, None, {"assignment_epoch": group.assignment_epoch})
        for member_id, target in group.target.items():
            put(rec.TARGET_ASSIGNMENT_MEMBER, member_id, _task_fields(target))
        for m in group.members.values():
            put(rec.MEMBER_METADATA, m.member_id, {
                "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
                "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "topology_epoch": m.topology_epoch, "process_id": m.process_id,
                "user_endpoint": m.user_endpoint, "client_tags": m.client_tags})
            current = _task_fields(m.assigned)
            pending = _task_fields(m.pending_revocation)
            put(rec.CURRENT_MEMBER_ASSIGNMENT, m.member_id, {
                "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
                "state": _STATE_VALUES[m.state], **current,
                **{f"{kind}_pending_revocation": tasks for kind, tasks in pending.items()}})
        return out

    def load_records(self, records: Iterable[rec.StreamsRecord], now_ms: int) -> list[str]:
        """Take back the groups of ``records`` (read from ``__consumer_offsets`` in log
        order; a tombstone deletes); their members' sessions start again at ``now_ms``. The
        group ids loaded."""
        latest: dict[tuple[int, str, str | None], dict[str, Any] | None] = {}
        for r in records:
            latest[(r.record_type, r.group_id, r.member_id)] = r.value
        by_group: dict[str, dict[tuple[int, str | None], dict[str, Any]]] = {}
        for (record_type, group_id, member_id), value in latest.items():
            if value is not None:
                by_group.setdefault(group_id, {})[(record_type, member_id)] = value
        loaded = []
        states = {v: k for k, v in _STATE_VALUES.items()}
        for group_id, parts in by_group.items():
            meta = parts.get((rec.GROUP_METADATA, None))
            if meta is None:
                continue  # deleted (its metadata tombstoned), or not all there
            group = _Group(group_id, group_epoch=int(meta["epoch"]))
            target_meta = parts.get((rec.TARGET_ASSIGNMENT_METADATA, None))
            if target_meta is not None:
                group.assignment_epoch = int(target_meta["assignment_epoch"])
            topology = parts.get((rec.TOPOLOGY, None))
            if topology is not None:
                group.topology = Topology(int(topology["epoch"]), tuple(
                    Subtopology(s["subtopology_id"], tuple(s["source_topics"]),
                                tuple(s["source_topic_regex"]),
                                tuple(TopicInfo(*t) for t in s["state_changelog_topics"]),
                                tuple(s["repartition_sink_topics"]),
                                tuple(TopicInfo(*t) for t in s["repartition_source_topics"]))
                    for s in topology["subtopologies"]))
            for (record_type, member_id), value in parts.items():
                if member_id is None:
                    continue
                if record_type == rec.TARGET_ASSIGNMENT_MEMBER:
                    group.target[member_id] = _tasks_of(value)
                elif record_type == rec.MEMBER_METADATA:
                    v = value
                    current = parts.get((rec.CURRENT_MEMBER_ASSIGNMENT, member_id), {})
                    member = _Member(
                        member_id=member_id, process_id=str(v["process_id"]),
                        client_id=str(v["client_id"]), client_host=str(v["client_host"]),
                        rebalance_timeout_ms=int(v["rebalance_timeout_ms"]),
                        instance_id=v["instance_id"], rack_id=v["rack_id"],
                        topology_epoch=int(v["topology_epoch"]),
                        user_endpoint=v["user_endpoint"],
                        client_tags=tuple(v["client_tags"]))
                    if current:
                        member.member_epoch = int(current["member_epoch"])
                        member.previous_member_epoch = int(current["previous_member_epoch"])
                        member.state = states.get(int(current["state"]), _STABLE)
                        member.assigned = _tasks_of(current)
                        member.pending_revocation = _tasks_of(current, "_pending_revocation")
                        if member.state == _UNREVOKED:
                            member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
                    member.session_deadline_ms = (now_ms
                                                  + self.config_of(group_id).session_timeout_ms)
                    group.members[member_id] = member
            self._groups[group_id] = group
            self._configure(group)  # the task counts, without a new epoch
            loaded.append(group_id)
        return loaded

    # --- changes -----------------------------------------------------------------------

    def poll(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove the members whose session expired, or that did not revoke the tasks asked
        within their rebalance timeout; ``[(group id, member id)]`` removed."""
        removed = []
        for group in self._groups.values():
            for member in list(group.members.values()):
                if member.session_deadline_ms <= now_ms or (
                        member.state == _UNREVOKED
                        and 0 <= member.revocation_deadline_ms <= now_ms):
                    self._remove_member(group, member.member_id)
                    removed.append((group.group_id, member.member_id))
        return removed

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a streams group: NONE when it is empty (it is dropped),
        NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when unknown."""
        group = self._groups.get(group_id)
        if group is None:
            return codes.GROUP_ID_NOT_FOUND
        if group.members:
            return codes.NON_EMPTY_GROUP
        del self._groups[group_id]
        return codes.NONE

    def unload(self, group_ids: Iterable[str]) -> None:
        """Forget ``group_ids`` (this broker stopped coordinating them)."""
        for group_id in group_ids:
            self._groups.pop(group_id, None)

    def set_topology_description(self, group_id: str, member_id: str,
                                 description: object) -> int:
        """StreamsGroupTopologyDescriptionUpdate: keep the description; NONE, or
        GROUP_ID_NOT_FOUND / UNKNOWN_MEMBER_ID."""
        group = self._groups.get(group_id)
        if group is None:
            return codes.GROUP_ID_NOT_FOUND
        if member_id not in group.members:
            return codes.UNKNOWN_MEMBER_ID
        group.topology_description = description
        return codes.NONE

    def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int,
                  instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                  topology: Topology | None, owned: Tasks | None, process_id: str | None,
                  user_endpoint: tuple[str, int] | None,
                  client_tags: Sequence[tuple[str, str]] | None,
                  task_offsets: Sequence[tuple[str, int, int]] | None,
                  task_end_offsets: Sequence[tuple[str, int, int]] | None,
                  shutdown_application: bool, client_id: str, client_host: str,
                  now_ms: int, endpoint_information_epoch: int = -1) -> HeartbeatResult:
        """One StreamsGroupHeartbeat (Kafka's ``GroupMetadataManager.streamsGroupHeartbeat``):
        a join (epoch 0, with the topology), a heartbeat, or a leave (epoch -1, -2)."""
        try:
            result = self._heartbeat(
                group_id, member_id, member_epoch, instance_id, rack_id,
                rebalance_timeout_ms, topology, owned, process_id, user_endpoint,
                client_tags, task_offsets, task_end_offsets, shutdown_application,
                client_id, client_host, now_ms)
            group = self._groups.get(group_id)
            if result.member_epoch < 0 or group is None:
                return result
            self._update_endpoints(group)
            return replace(result, endpoint_epoch=group.endpoint_epoch,
                           partitions_by_endpoint=None
                           if endpoint_information_epoch == group.endpoint_epoch
                           else self._partitions_by_endpoint(group))
        except StreamsGroupError as exc:
            return HeartbeatResult(error_code=exc.error_code, error_message=exc.message,
                                   member_id=member_id)

    def _heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                   instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                   topology: Topology | None, owned: Tasks | None, process_id: str | None,
                   user_endpoint: tuple[str, int] | None,
                   client_tags: Sequence[tuple[str, str]] | None,
                   task_offsets: Sequence[tuple[str, int, int]] | None,
                   task_end_offsets: Sequence[tuple[str, int, int]] | None,
                   shutdown_application: bool, client_id: str, client_host: str,
                   now_ms: int) -> HeartbeatResult:
        _validate(group_id, member_id, member_epoch, rebalance_timeout_ms, topology,
                  owned, process_id)
        if member_epoch in (-1, -2):
            group = self._groups.get(group_id)
            if group is not None and member_id in group.members:
                self._remove_member(group, member_id)
            elif group is None or member_id not in group.members:
                raise StreamsGroupError(codes.UNKNOWN_MEMBER_ID,
                                        f"Member {member_id} is not a member of group "
                                        f"{group_id}.")
            return HeartbeatResult(member_id=member_id, member_epoch=member_epoch)
        group = self._groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                # Kafka says GROUP_ID_NOT_FOUND here, which the Streams client takes as
                # fatal; a group lost anyway (deleted, or its last records not replicated
                # before its coordinator moved) is better rejoined: its members are told
                # UNKNOWN_MEMBER_ID and join again with epoch 0.
                raise StreamsGroupError(codes.UNKNOWN_MEMBER_ID,
                                        f"Member {member_id} is not a member of group "
                                        f"{group_id}.")
            group = self._groups[group_id] = _Group(group_id)
        member = group.members.get(member_id)
        bump = False
        if member is None:
            if member_epoch != 0:
                raise StreamsGroupError(codes.UNKNOWN_MEMBER_ID,
                                        f"Member {member_id} is not a member of group "
                                        f"{group_id}.")
            if len(group.members) >= self.config.max_size:
                raise StreamsGroupError(codes.GROUP_MAX_SIZE_REACHED,
                                        f"The streams group has reached its maximum "
                                        f"capacity of {self.config.max_size} members.")
            assert process_id is not None  # _validate
            member = _Member(member_id=member_id, process_id=process_id, client_id=client_id,
                             client_host=client_host,
                             rebalance_timeout_ms=rebalance_timeout_ms)
            group.members[member_id] = member
            bump = True
        elif member_epoch == 0:
            # A rejoin with epoch 0: the member lost its tasks; it starts over.
            member.assigned = _empty_tasks()
            member.pending_revocation = _empty_tasks()
            member.state = _STABLE
            member.member_epoch = 0
        elif member_epoch != member.member_epoch:
            if not (member_epoch == member.previous_member_epoch and owned is not None
                    and _flat(owned[0]) <= _flat(member.assigned[0])):
                raise StreamsGroupError(codes.FENCED_MEMBER_EPOCH,
                                        f"The streams group member has a smaller member epoch "
                                        f"({member_epoch}) than the one known by the group "
                                        f"coordinator ({member.member_epoch}). The member "
                                        f"must abandon all its partitions and rejoin."
                                        if member_epoch < member.member_epoch else
                                        f"The streams group member has a greater member epoch "
                                        f"({member_epoch}) than the one known by the group "
                                        f"coordinator ({member.member_epoch}). The member "
                                        f"must abandon all its partitions and rejoin.")
        member.session_deadline_ms = now_ms + self.config_of(group_id).session_timeout_ms
        if process_id is not None:
            member.process_id = process_id
        if rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if instance_id is not None:
            member.instance_id = instance_id
        if rack_id is not None:
            member.rack_id = rack_id
        if user_endpoint is not None:
            member.user_endpoint = user_endpoint
        if client_tags is not None:
            member.client_tags = tuple(client_tags)
        if task_offsets is not None:
            member.task_offsets = tuple(task_offsets)
        if task_end_offsets is not None:
            member.task_end_offsets = tuple(task_end_offsets)
        if shutdown_application:
            group.shutdown_requested = True
        if topology is not None:
            member.topology_epoch = topology.epoch
            if group.topology is None or (topology.epoch > group.topology.epoch
                                          and topology != group.topology):
                group.topology = topology
                group.metadata = ()  # configured again below
                bump = True
        create = self._configure(group)
        if create is None:
            bump = True  # the topics changed: a new assignment
            create = dict(group.missing_internal)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            # Also while the topology is not ready: the target is then empty, and the
            # member still moves to the group's epoch (as Kafka's).
            self._assign(group)
        previous_epoch = member.member_epoch
        self._reconcile(group, member, owned, now_ms)
        if member.member_epoch != previous_epoch:
            member.previous_member_epoch = previous_epoch
        statuses = list(group.statuses)
        if group.shutdown_requested:
            statuses.append((STATUS_SHUTDOWN_APPLICATION,
                             "A KafkaStreams instance encountered a fatal error and requested "
                             "a shutdown for the entire application."))
        if member.topology_epoch < (group.topology.epoch if group.topology else -1):
            statuses.append((STATUS_STALE_TOPOLOGY,
                             "The member's topology epoch "
                             f"{member.topology_epoch} is behind the group's "
                             f"{group.topology.epoch if group.topology else -1}."))
        active, standby, warmup = member.assigned
        return HeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                               active=active, standby=standby, warmup=warmup,
                               statuses=tuple(statuses), create_topics=create)

    def _update_endpoints(self, group: _Group) -> None:
        """Bump the group's endpoint information epoch when a member's endpoint or tasks
        changed since the last heartbeat of any member."""
        signature = sorted((m.member_id, m.user_endpoint, _flat(m.assigned[0]),
                            _flat(m.assigned[1])) for m in group.members.values()
                           if m.user_endpoint is not None)
        if signature != group.endpoint_signature:
            group.endpoint_signature = signature
            group.endpoint_epoch += 1

    def _partitions_by_endpoint(self, group: _Group) -> list[tuple[
            tuple[str, int], dict[str, list[int]], dict[str, list[int]]]]:
        """Kafka's ``EndpointToPartitionsManager``: per member with an endpoint, the
        partitions of its active and standby tasks' source topics."""
        sources: dict[str, list[str]] = {}
        if group.topology is not None:
            for s in group.topology.subtopologies:
                sources[s.subtopology_id] = [*s.source_topics,
                                             *(t.name for t in s.repartition_source_topics)]
        counts = dict(group.metadata)

        def partitions(tasks: dict[str, set[int]]) -> dict[str, list[int]]:
            out: dict[str, set[int]] = {}
            for subtopology, ps in tasks.items():
                for topic in sources.get(subtopology, ()):
                    count = counts.get(topic) or 0
                    out.setdefault(topic, set()).update(p for p in ps if p < count)
            return {t: sorted(ps) for t, ps in sorted(out.items()) if ps}

        return [(m.user_endpoint, partitions(m.assigned[0]), partitions(m.assigned[1]))
                for m in sorted(group.members.values(), key=lambda m: m.member_id)
                if m.user_endpoint is not None]

    def _remove_member(self, group: _Group, member_id: str) -> None:
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        group.group_epoch += 1
        if group.members:
            # The others move towards the new target at their own next heartbeat (a
            # member's epoch changes only in an answer to it).
            self._assign(group)

    def _configure(self, group: _Group) -> dict[str, TopicInfo] | None:
        """Check the group's topology against the topics (Kafka's
        ``InternalTopicManager.configureTopics``); the internal topics to create, or None
        when the configuration changed (then the caller bumps the group epoch)."""
        topology = group.topology
        if topology is None:
            return {}
        names = set(self._topic_names()) if any(
            s.source_topic_regex for s in topology.subtopologies) else set()
        involved: list[str] = []
        sources: dict[str, list[str]] = {}
        for s in topology.subtopologies:
            topics = list(s.source_topics)
            for pattern in s.source_topic_regex:
                try:
                    compiled = re.compile(pattern)
                except re.error:
                    continue
                topics += sorted(n for n in names if compiled.fullmatch(n))
            sources[s.subtopology_id] = topics
            involved += topics
            involved += [t.name for t in s.repartition_source_topics]
            involved += [t.name for t in s.state_changelog_topics]
        metadata = tuple((t, self._partition_count(t)) for t in sorted(set(involved)))
        if metadata == group.metadata:
            return dict(group.missing_internal)
        group.metadata = metadata
        counts = dict(metadata)
        internal = {t.name for s in topology.subtopologies
                    for t in (*s.repartition_source_topics, *s.state_changelog_topics)}
        missing_sources = sorted({t for ts in sources.values() for t in ts
                                  if counts.get(t) is None and t not in internal})
        old_counts = group.task_counts
        group.statuses = []
        group.missing_internal = {}
        if missing_sources:
            group.task_counts = None
            group.statuses = [(STATUS_MISSING_SOURCE_TOPICS,
                               f"Source topics {', '.join(missing_sources)} are missing.")]
            return None if old_counts is not None else {}
        # Repartition topics without a count take the largest count of the source topics
        # of the subtopology that writes them, until nothing changes.
        repartition: dict[str, int] = {}
        for s in topology.subtopologies:
            for t in s.repartition_source_topics:
                if t.partitions > 0:
                    repartition[t.name] = t.partitions
        for _round in range(len(topology.subtopologies) + 1):
            changed = False
            for s in topology.subtopologies:
                upstream = [counts.get(t) or 0 for t in sources[s.subtopology_id]
                            if t not in repartition] + [
                    repartition.get(t.name, 0) for t in s.repartition_source_topics]
                best = max(upstream, default=0)
                for sink in s.repartition_sink_topics:
                    if best > 0 and repartition.get(sink, 0) == 0:
                        repartition[sink] = best
                        changed = True
            if not changed:
                break
        task_counts: dict[str, int] = {}
        wanted: dict[str, TopicInfo] = {}
        for s in topology.subtopologies:
            n = max([counts.get(t) or 0 for t in sources[s.subtopology_id]
                     if t not in internal]
                    + [repartition.get(t.name, 0) for t in s.repartition_source_topics],
                    default=0)
            task_counts[s.subtopology_id] = n
            for t in s.repartition_source_topics:
                wanted[t.name] = replace(t, partitions=repartition.get(t.name, n))
            for t in s.state_changelog_topics:
                wanted[t.name] = replace(t, partitions=n)
        group.internal_partitions = {name: t.partitions for name, t in wanted.items()}
        wrong = sorted(name for name, t in wanted.items()
                       if counts.get(name) is not None and counts[name] != t.partitions)
        missing = {name: t for name, t in wanted.items()
                   if counts.get(name) is None and t.partitions > 0}
        if wrong:
            group.statuses = [(STATUS_INCORRECTLY_PARTITIONED_TOPICS,
                               f"Internal topics {', '.join(wrong)} have a wrong partition "
                               "count.")]
            group.task_counts = None
        elif missing:
            group.statuses = [(STATUS_MISSING_INTERNAL_TOPICS,
                               f"Internal topics are missing: {sorted(missing)}")]
            group.missing_internal = missing
            group.task_counts = None
        else:
            group.task_counts = task_counts
        if group.task_counts != old_counts:
            return None
        return dict(group.missing_internal)

    def _assign(self, group: _Group) -> None:
        """A new target assignment at the group epoch (Kafka's TargetAssignmentBuilder with
        the sticky assignor)."""
        members = [AssignorMember(m.member_id, m.process_id,
                                  frozenset(_flat(group.target.get(m.member_id,
                                                                   _empty_tasks())[0])),
                                  frozenset(_flat(group.target.get(m.member_id,
                                                                   _empty_tasks())[1])))
                   for m in group.members.values()]
        assignment = assign_tasks(members, group.task_counts or {},
                                  self.config_of(group.group_id).num_standby_replicas)
        group.target = {member_id: (_nest(a.active), _nest(a.standby), _nest(a.warmup))
                        for member_id, a in assignment.items()}
        group.assignment_epoch = group.group_epoch

    def _reconcile(self, group: _Group, member: _Member, owned: Tasks | None,
                   now_ms: int) -> None:
        """Kafka's streams ``CurrentAssignmentBuilder.build``: move the member towards its
        target, revoking before assigning."""
        target = group.target.get(member.member_id, _empty_tasks())
        if member.state == _STABLE:
            if member.member_epoch == group.assignment_epoch:
                return
            self._next(group, member, member.member_epoch, target, owned, now_ms)
        elif member.state == _UNREVOKED:
            pending = [_flat(k) for k in member.pending_revocation]
            if owned is None or any(_flat(o) & p for o, p in zip(owned, pending)):
                return
            self._next(group, member, member.member_epoch + 1, target, owned, now_ms)
        else:  # UNRELEASED_TASKS
            self._next(group, member, member.member_epoch, target, owned, now_ms)

    def _next(self, group: _Group, member: _Member, epoch: int, target: Tasks,
              owned: Tasks | None, now_ms: int) -> None:
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        active_owner: dict[Task, str] = {}
        standby_procs: dict[Task, set[str]] = {}
        for m in others:
            for task in _flat(m.assigned[0]) | _flat(m.pending_revocation[0]):
                active_owner[task] = m.process_id
            for kind in (1, 2):
                for task in _flat(m.assigned[kind]) | _flat(m.pending_revocation[kind]):
                    standby_procs.setdefault(task, set()).add(m.process_id)
        me = member.process_id

        def unreleased(kind: int, task: Task) -> bool:
            if kind == 0:
                return task in active_owner or me in standby_procs.get(task, set())
            return active_owner.get(task) == me or me in standby_procs.get(task, set())

        keep: list[set[Task]] = []
        revoke: list[set[Task]] = []
        add: list[set[Task]] = []
        has_unreleased = False
        for kind in range(3):
            current = _flat(member.assigned[kind])
            wanted = _flat(target[kind])
            kept = current & wanted
            pending_add = wanted - kept
            blocked = {t for t in pending_add if unreleased(kind, t)}
            has_unreleased |= bool(blocked)
            keep.append(kept)
            revoke.append(current - kept)
            add.append(pending_add - blocked)
        owned_flat = None if owned is None else [_flat(o) for o in owned]
        to_revoke = any(revoke) and (owned_flat is None or any(
            o & r for o, r in zip(owned_flat, revoke)))
        if to_revoke:
            if member.state != _UNREVOKED:
                member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
            member.state = _UNREVOKED
            member.member_epoch = epoch
            member.assigned = (_nest(keep[0]), _nest(keep[1]), _nest(keep[2]))
            member.pending_revocation = (_nest(revoke[0]), _nest(revoke[1]), _nest(revoke[2]))
            return
        member.state = _UNRELEASED if has_unreleased else _STABLE
        member.member_epoch = group.assignment_epoch
        member.assigned = tuple(_nest(k | a) for k, a in zip(keep, add))  # type: ignore[assignment]
        member.pending_revocation = _empty_tasks()


def _topic_fields(t: TopicInfo) -> rec.TopicInfoFields:
    return (t.name, t.partitions, t.replication_factor, t.configs)


def _task_fields(tasks: Tasks) -> dict[str, rec.TaskList]:
    return {kind: tuple((s, tuple(sorted(ps))) for s, ps in sorted(by_kind.items()) if ps)
            for kind, by_kind in zip(("active", "standby", "warmup"), tasks)}


def _tasks_of(value: Mapping[str, Any], suffix: str = "") -> Tasks:
    def kind(name: str) -> dict[str, set[int]]:
        return {s: set(ps) for s, ps in value.get(name + suffix, ())}
    return (kind("active"), kind("standby"), kind("warmup"))


def _validate(group_id: str, member_id: str, member_epoch: int, rebalance_timeout_ms: int,
              topology: Topology | None, owned: Tasks | None, process_id: str | None) -> None:
    """Kafka's ``throwIfStreamsGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST."""
    def bad(message: str) -> StreamsGroupError:
        return StreamsGroupError(codes.INVALID_REQUEST, message)

    if not group_id.strip():
        raise bad("GroupId can't be empty.")
    if not member_id.strip():
        raise bad("MemberId can't be empty.")
    if member_epoch == 0:
        if rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if topology is None:
            raise bad("Topology must be non-null when (re-)joining.")
        if owned is None:
            raise bad("ActiveTasks, StandbyTasks and WarmupTasks must be non-null in first "
                      "request.")
        if any(owned):
            raise bad("ActiveTasks, StandbyTasks and WarmupTasks must be empty when "
                      "(re-)joining.")
        if process_id is None or not process_id.strip():
            raise bad("ProcessId can't be empty.")
    elif member_epoch < -2:
        raise bad(f"MemberEpoch is {member_epoch}, but must be greater than or equal to -2.")
