"""Kafka's classic consumer group protocol, as the wire broker's group coordinator runs it.

Clients (librdkafka, kafka-python, aiokafka, Kafka's Java consumer) assign partitions
themselves: the coordinator only gathers the members (JoinGroup), picks a leader and a
protocol, hands the leader every member's metadata, and distributes the leader's assignment
(SyncGroup). Each group moves through Kafka's states (``GroupMetadataManager`` and
``ClassicGroup`` of Kafka 4.x's group-coordinator module; ``GroupCoordinator.scala`` of 3.x):

- ``Empty``: no members (a new group, or every member left); offsets may be committed from
  outside the group (generation -1);
- ``PreparingRebalance``: a join started a rebalance; members (re)join within the rebalance
  timeout, and a group leaving ``Empty`` first waits ``group.initial.rebalance.delay.ms``,
  extended by the same delay while new members keep arriving (Kafka's InitialDelayedJoin),
  up to the rebalance timeout;
- ``CompletingRebalance``: the generation was bumped and the join responses sent; the group
  waits for the leader's SyncGroup with the assignment;
- ``Stable``: assignments delivered; members heartbeat within their session timeout or are
  evicted, which starts a new rebalance;
- ``Dead``: deleted (DeleteGroups); a group in that state is no longer kept.

It knows nothing of sockets, threads or asyncio. Every operation takes ``now_ms``; a
response that must wait (a JoinGroup parked until the rebalance completes, a SyncGroup until
the leader syncs) is delivered later through the ``done`` callback the caller passes; timers
(the initial delay, rebalance timeouts, session and pending-sync expiry) are kept here and
fired by :meth:`ClassicGroupCoordinator.poll`, which the caller runs at
:meth:`~ClassicGroupCoordinator.next_deadline_ms`. Not thread-safe: one thread (the broker's
event loop) calls it.

Persistence goes through one callback, ``write_group_metadata(group_id, value)``: the
:class:`~seglog.coordinator.classic_group_schema.GroupMetadataValue` Kafka writes to
``__consumer_offsets`` when a first JoinGroup creates the group (an empty generation 0), when
a generation's assignment is stored (the leader's SyncGroup), when the group becomes empty,
and when a static member is replaced; None (a tombstone) when the group is deleted
(DeleteGroups, or the caller's offsets retention check for an empty group without offsets). :meth:`load` takes such a value back after a restart: the members come
back as they were and expire by session timeout unless they heartbeat. Committed offsets are
not kept here: the caller checks a commit with :meth:`validate_offset_commit` and stores it
in the store's offsets (``__consumer_offsets`` through
:class:`~seglog.coordinator.offsets.OffsetsManager`).

How it relates to the Store's embedded coordinator (:mod:`seglog.coordinator.group`, used by
seglog's in-process clients with server-side assignors): both see the same committed offsets
(one offsets map per store), but membership is separate. A group id that wire clients use is
a classic group here; the broker refuses a wire JoinGroup while in-process consumers are
members of the same id (and the embedded coordinator refuses commits from outside while they
are), so two coordinators never hand out the same partitions.
"""

from __future__ import annotations

import heapq
import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple, TypedDict

from .. import error_codes as codes
from .classic_group_schema import GroupMetadataValue, MemberMetadata
from ..errors import (FencedInstanceIdError, IllegalGenerationError, RebalanceInProgressError,
                      SeglogError, UnknownMemberIdError)

__all__ = [
    "COMPLETING_REBALANCE", "DEAD", "EMPTY", "PREPARING_REBALANCE", "STABLE",
    "ClassicGroupConfig", "ClassicGroupCoordinator", "GroupDescription", "JoinResult",
    "MemberDescription", "SyncResult", "UpgradedGroup", "UpgradedMember",
]

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

_log = logging.getLogger(__name__)

_ERROR_CLASSES: dict[int, type[SeglogError]] = {codes.ILLEGAL_GENERATION: IllegalGenerationError,
                  codes.UNKNOWN_MEMBER_ID: UnknownMemberIdError,
                  codes.FENCED_INSTANCE_ID: FencedInstanceIdError,
                  codes.REBALANCE_IN_PROGRESS: RebalanceInProgressError}

#: The states a rebalance may start from (Kafka's PreparingRebalance.validPreviousStates).
_CAN_REBALANCE = (STABLE, COMPLETING_REBALANCE, EMPTY)
CONSUMER_PROTOCOL_TYPE = "consumer"

#: A member's protocols: ``(name, metadata bytes)`` in its order of preference.
Protocols = list[tuple[str, bytes]]
#: A member as the leader's JoinGroup response lists it: ``(member_id, group_instance_id,
#: metadata of the selected protocol)``.
JoinedMember = tuple[str, "str | None", bytes]
#: Where a parked JoinGroup's answer goes (called once).
JoinDone = Callable[["JoinResult"], None]
#: Where a parked SyncGroup's answer goes (called once).
SyncDone = Callable[["SyncResult"], None]
#: A timer's key: ``("hb", group_id, member_id)``, ``("join", group_id)`` or
#: ``("sync", group_id)``.
_TimerKey = tuple[str, ...]


class ClassicGroupConfig(NamedTuple):
    """The broker configs of the classic coordinator, by Kafka's names and defaults:
    ``group.initial.rebalance.delay.ms`` (3000), ``group.min.session.timeout.ms`` (6000),
    ``group.max.session.timeout.ms`` (1800000), ``group.max.size`` (unbounded), and the
    timeout of a new member's parked JoinGroup (Kafka's 5 minutes)."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = 300_000


class JoinResult(NamedTuple):
    """A JoinGroup response: ``members`` is ``[(member_id, group_instance_id, metadata)]``,
    filled for the leader only."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    """A SyncGroup response: the member's assignment bytes."""

    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class UpgradedMember(NamedTuple):
    """A member of a classic group that became a consumer group (online upgrade)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


class UpgradedGroup(NamedTuple):
    """A classic group that became a consumer group: its generation, selected protocol
    and members."""

    generation_id: int
    protocol: str | None
    members: tuple[UpgradedMember, ...]


class MemberDescription(NamedTuple):
    """One member as DescribeGroups shows it (``metadata``: of the selected protocol)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupDescription(NamedTuple):
    """A group as DescribeGroups and ListGroups show it."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]


class _JoinRequest(TypedDict):
    """What a JoinGroup says of its member, kept on the member it adds or updates."""

    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int


@dataclass(eq=False)
class _Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_done: JoinDone | None = None
    sync_done: SyncDone | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise AssertionError("a member votes only among protocols it supports")

    def has_satisfied_heartbeat(self) -> bool:
        # Kafka's ClassicGroupMember.hasSatisfiedHeartbeat: a member parked in a join or a
        # sync is alive by definition, except a new one (its join may never complete).
        if self.is_new:
            return False
        return self.join_done is not None or self.sync_done is not None


@dataclass(eq=False)
class _Group:
    group_id: str
    state: str = EMPTY
    previous_state: str = EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    #: member id -> member, in join order
    members: dict[str, _Member] = field(default_factory=dict)
    #: instance id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False

    def transition(self, state: str, now_ms: int) -> None:
        self.previous_state, self.state = self.state, state
        self.state_timestamp_ms = now_ms

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_done is not None)

    def all_joined(self) -> bool:
        return self.awaiting_join() == len(self.members) and not self.pending_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports(self, protocol_type: str, names: set[str]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        return any(self._support_count(name) == len(self.members) for name in names)

    def _support_count(self, name: str) -> int:
        return sum(1 for m in self.members.values() if any(n == name for n, _ in m.protocols))

    def select_protocol(self) -> str:
        # Kafka's ClassicGroup.selectProtocol: among the protocols every member supports, each
        # member votes for its most preferred; the most votes wins (ties: first counted).
        candidates = {name for name, _ in next(iter(self.members.values())).protocols
                      if self._support_count(name) == len(self.members)}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def add(self, member: _Member) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> int:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return codes.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return codes.FENCED_INSTANCE_ID
        return codes.NONE if member_id in self.members else codes.UNKNOWN_MEMBER_ID

    def member_list(self) -> tuple[JoinedMember, ...]:
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol))
                     for m in self.members.values())


class ClassicGroupCoordinator:
    """Every classic group of one broker (see the module docstring).

    ``ClassicGroupCoordinator(config, write_group_metadata)``: a :class:`ClassicGroupConfig`
    and the persistence callback ``write_group_metadata(group_id, GroupMetadataValue | None)``
    (it may raise: a failed store of an assignment is answered to the members with
    UNKNOWN_SERVER_ERROR and the group rebalances, as Kafka does after a failed append).
    ``generate_id`` makes the uuid part of new member ids (tests pass a counter).
    """

    def __init__(self, config: ClassicGroupConfig = ClassicGroupConfig(),
                 write_group_metadata: Callable[[str, GroupMetadataValue | None], None] | None = None,
                 *, generate_id: Callable[[], str] = lambda: str(uuid.uuid4())):
        self.config = config
        self._write = write_group_metadata or (lambda group_id, value: None)
        self._generate_id = generate_id
        self._groups: dict[str, _Group] = {}
        #: Generations begun (Kafka's group-completed-rebalance-count; docs/metrics.md).
        self.completed_rebalances = 0
        # key -> (deadline, seq, fn)
        self._timers: dict[_TimerKey, tuple[int, int, Callable[[int], None]]] = {}
        self._heap: list[tuple[int, int, _TimerKey]] = []
        self._seq = 0

    # --- timers ---------------------------------------------------------------------------

    def _schedule(self, key: _TimerKey, deadline_ms: int, fn: Callable[[int], None]) -> None:
        self._seq += 1
        self._timers[key] = (deadline_ms, self._seq, fn)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))
        if len(self._heap) > 4 * len(self._timers) + 64:
            # Every heartbeat reschedules its member's timer: drop the stale entries so the
            # heap stays proportional to the live timers.
            self._heap = [(d, q, k) for k, (d, q, _) in self._timers.items()]
            heapq.heapify(self._heap)

    def _cancel(self, key: _TimerKey) -> None:
        self._timers.pop(key, None)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`poll` next has work (ms since the epoch), or None without timers."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            timer = self._timers.get(key)
            if timer is not None and timer[1] == seq:
                return deadline
            heapq.heappop(self._heap)  # cancelled or rescheduled
        return None

    def poll(self, now_ms: int) -> int:
        """Fire every timer due at ``now_ms`` (rebalance completions, session expiries);
        returns how many fired. Timers a firing one schedules for ``now_ms`` or earlier fire
        in the same call; the loop is bounded by the timers present."""
        fired = 0
        budget = 4 * (len(self._timers) + 1)  # each timer may reschedule a few others
        while self._heap and budget > 0:
            deadline, seq, key = self._heap[0]
            timer = self._timers.get(key)
            if timer is None or timer[1] != seq:
                heapq.heappop(self._heap)
                continue
            if deadline > now_ms:
                break
            heapq.heappop(self._heap)
            del self._timers[key]
            timer[2](now_ms)
            fired += 1
            budget -= 1
        return fired

    # --- reading ---------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        """Ids of the groups this coordinator keeps, sorted."""
        return sorted(self._groups)

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a classic group here (with members or not)."""
        return group_id in self._groups

    def describe(self, group_id: str) -> GroupDescription | None:
        """``group_id`` as DescribeGroups shows it, or None when unknown. Members' metadata
        and assignments are shown only in ``Stable`` (Kafka: the assignment of other states
        is not final)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        members = []
        for m in group.members.values():
            show = group.state == STABLE
            members.append(MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(group.protocol) if show else b"",
                m.assignment if show else b""))
        protocol = group.protocol or "" if group.state == STABLE else ""
        return GroupDescription(group_id, group.state, group.protocol_type or "", protocol,
                                tuple(members))

    def state(self, group_id: str) -> str | None:
        """The state name of ``group_id``, or None when unknown."""
        group = self._groups.get(group_id)
        return None if group is None else group.state

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """The topics the members of a ``consumer``-protocol group subscribe to (parsed from
        their metadata, Kafka's ConsumerProtocol v0 prefix), or None when unknown (not a
        ``consumer`` group, or metadata that does not parse: then, as in Kafka, a member-ful
        consumer group counts as subscribed to every topic)."""
        group = self._groups.get(group_id)
        if group is None or group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for member in group.members.values():
            parsed = _subscription_topics(member.metadata(group.protocol))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def state_timestamp_ms(self, group_id: str) -> int:
        """When ``group_id`` entered its state (-1 when unknown or loaded without it)."""
        group = self._groups.get(group_id)
        return -1 if group is None else group.state_timestamp_ms

    # --- JoinGroup -------------------------------------------------------------------------

    def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                   client_id: str, client_host: str, protocol_type: str, protocols: Protocols,
                   session_timeout_ms: int, rebalance_timeout_ms: int, api_version: int,
                   now_ms: int, done: JoinDone) -> None:
        """Kafka's JoinGroup. ``protocols`` is ``[(name, metadata bytes)]`` in the member's
        preference order; ``rebalance_timeout_ms`` is -1 before v1 (the session timeout is
        used); ``api_version`` decides MEMBER_ID_REQUIRED (v4+). ``done(JoinResult)`` is
        called once, now or when the rebalance completes.

        A join with no member id creates an unknown group, which stays (``Empty`` at least,
        even when this join is refused) and is stored at once as an empty generation 0, as
        Kafka 4.x's ``newEmptyGroupMetadataRecord``; an empty group without offsets goes at
        the offsets retention check (the caller's, :meth:`delete_group`)."""
        created = bool(group_id) and member_id == "" and group_id not in self._groups
        self._join_group(group_id=group_id, member_id=member_id,
                         group_instance_id=group_instance_id, client_id=client_id,
                         client_host=client_host, protocol_type=protocol_type,
                         protocols=protocols, session_timeout_ms=session_timeout_ms,
                         rebalance_timeout_ms=rebalance_timeout_ms, api_version=api_version,
                         now_ms=now_ms, done=done)
        group = self._groups.get(group_id)
        if created and group is not None:
            # A failed store is only logged by Kafka too (the group then lives in memory
            # until a restart or the retention check).
            try:
                self._write(group_id, GroupMetadataValue(
                    group.protocol_type or "", 0, None, None, (), group.state_timestamp_ms))
            except Exception:  # noqa: BLE001 - not the joining member's error
                pass

    def _join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                    client_id: str, client_host: str, protocol_type: str,
                    protocols: Protocols, session_timeout_ms: int, rebalance_timeout_ms: int,
                    api_version: int, now_ms: int, done: JoinDone) -> None:
        if not group_id:
            return done(JoinResult(codes.INVALID_GROUP_ID, member_id))
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return done(JoinResult(codes.INVALID_SESSION_TIMEOUT, member_id))
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        unknown = member_id == ""
        group = self._groups.get(group_id)
        if group is None:
            if not unknown:
                return done(JoinResult(codes.UNKNOWN_MEMBER_ID, member_id))
            group = self._groups[group_id] = _Group(group_id, state_timestamp_ms=now_ms)
        if not self._accept_joining(group, member_id):
            group.remove(member_id)
            self._cancel(("hb", group_id, member_id))
            done(JoinResult(codes.GROUP_MAX_SIZE_REACHED, ""))
            return self._maybe_complete_join(group, now_ms)
        names = {name for name, _ in protocols}
        if not group.supports(protocol_type, names):
            return done(JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL,
                                   "" if unknown else member_id))
        request = _JoinRequest(group_instance_id=group_instance_id, client_id=client_id,
                               client_host=client_host, protocol_type=protocol_type,
                               protocols=list(protocols), session_timeout_ms=session_timeout_ms,
                               rebalance_timeout_ms=rebalance_timeout_ms)
        if unknown:
            new_id = f"{group_instance_id if group_instance_id is not None else client_id}-" \
                     f"{self._generate_id()}"
            if group_instance_id is not None:
                existing = group.static_members.get(group_instance_id)
                if existing is not None:
                    return self._replace_static_member(group, existing, new_id, request,
                                                       api_version, now_ms, done)
                return self._add_member(group, new_id, request, now_ms, done)
            if api_version >= 4:
                group.pending_join.add(new_id)
                self._schedule(("hb", group_id, new_id), now_ms + session_timeout_ms,
                               lambda now: self._expire_heartbeat(group_id, new_id, now))
                return done(JoinResult(codes.MEMBER_ID_REQUIRED, new_id))
            return self._add_member(group, new_id, request, now_ms, done)
        if member_id in group.pending_join:
            return self._add_member(group, member_id, request, now_ms, done)
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return done(JoinResult(error, member_id))
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            return self._update_member(group, member, request, now_ms, done)
        if group.state == COMPLETING_REBALANCE:
            if member.protocols == list(protocols):
                # The member lost the join response: send it again.
                return done(self._join_response(group, member_id))
            return self._update_member(group, member, request, now_ms, done)
        if group.state == STABLE:
            if group.leader_id == member_id or member.protocols != list(protocols):
                return self._update_member(group, member, request, now_ms, done)
            return done(JoinResult(codes.NONE, member_id, group.generation_id, group.protocol_type,
                                   group.protocol, group.leader_id or ""))
        done(JoinResult(codes.UNKNOWN_MEMBER_ID, member_id))  # Empty: reset and rejoin

    def _accept_joining(self, group: _Group, member_id: str) -> bool:
        if group.state == EMPTY:
            return True
        if group.state == PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return ((member is not None and member.join_done is not None)
                    or group.awaiting_join() < self.config.max_size)
        return member_id in group.members or len(group.members) < self.config.max_size

    def _join_response(self, group: _Group, member_id: str, *, skip: bool = False) -> JoinResult:
        members = group.member_list() if group.leader_id == member_id else ()
        return JoinResult(codes.NONE, member_id, group.generation_id, group.protocol_type,
                          group.protocol, group.leader_id or "", members, skip)

    def _add_member(self, group: _Group, member_id: str, request: _JoinRequest, now_ms: int,
                    done: JoinDone) -> None:
        member = _Member(member_id, request["group_instance_id"], request["client_id"],
                         request["client_host"], request["rebalance_timeout_ms"],
                         request["session_timeout_ms"], request["protocol_type"],
                         request["protocols"], join_done=done, is_new=True)
        if group.state == PREPARING_REBALANCE and group.previous_state == EMPTY:
            group.new_member_added = True  # the initial delay may be extended
        group.add(member)
        self._schedule_heartbeat(group, member, now_ms, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_member(self, group: _Group, member: _Member, request: _JoinRequest,
                       now_ms: int, done: JoinDone) -> None:
        member.protocols = request["protocols"]
        member.rebalance_timeout_ms = request["rebalance_timeout_ms"]
        member.session_timeout_ms = request["session_timeout_ms"]
        member.join_done = done  # a second parked join replaces the first, as in Kafka
        self._maybe_prepare_rebalance(group, now_ms)

    def _replace_static_member(self, group: _Group, old_id: str, new_id: str,
                               request: _JoinRequest, api_version: int, now_ms: int,
                               done: JoinDone) -> None:
        current_leader = group.leader_id or ""
        old = group.members.pop(old_id)
        instance_id = old.group_instance_id
        assert instance_id is not None, "only a static member is replaced"
        # Fence whoever still waits under the old member id.
        if old.join_done is not None:
            fenced_join, old.join_done = old.join_done, None
            fenced_join(JoinResult(codes.FENCED_INSTANCE_ID, old_id))
        if old.sync_done is not None:
            fenced_sync, old.sync_done = old.sync_done, None
            fenced_sync(SyncResult(codes.FENCED_INSTANCE_ID))
        self._cancel(("hb", group.group_id, old_id))
        member = _Member(new_id, old.group_instance_id, old.client_id, old.client_host,
                         old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                         old.protocols, old.assignment)
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        group.pending_sync.discard(old_id)
        self._schedule_heartbeat(group, member, now_ms)
        old_protocols = member.protocols
        member.protocols = request["protocols"]
        member.rebalance_timeout_ms = request["rebalance_timeout_ms"]
        member.session_timeout_ms = request["session_timeout_ms"]
        member.join_done = done
        if group.state == STABLE:
            if (group.protocol or "") == group.select_protocol():
                # Kafka: the selected protocol stays, so no rebalance; persist the new id.
                try:
                    self._write(group.group_id, self._metadata_value(group))
                except Exception:
                    member.join_done = None
                    member.protocols = old_protocols
                    del group.members[new_id]
                    group.members[old_id] = old
                    group.static_members[instance_id] = old_id
                    if group.leader_id == new_id:
                        group.leader_id = old_id
                    self._schedule_heartbeat(group, old, now_ms)
                    return done(JoinResult(codes.UNKNOWN_SERVER_ERROR, ""))
                member.join_done = None
                is_leader = group.leader_id == new_id
                if api_version >= 9:
                    return done(self._join_response(group, new_id, skip=is_leader))
                # Before v9 a replaced leader must not act as leader (it would assign anew):
                # Kafka names the leader as it was before the replacement, so the member
                # takes itself for a follower and just syncs.
                return done(JoinResult(codes.NONE, new_id, group.generation_id, group.protocol_type,
                                       group.protocol, current_leader))
            return self._maybe_prepare_rebalance(group, now_ms)
        if group.state == COMPLETING_REBALANCE:
            return self._prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)

    # --- the rebalance ---------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: _Group, now_ms: int) -> None:
        if group.state in _CAN_REBALANCE:
            self._prepare_rebalance(group, now_ms)
        else:
            self._maybe_complete_join(group, now_ms)

    def _prepare_rebalance(self, group: _Group, now_ms: int) -> None:
        if group.state == COMPLETING_REBALANCE:
            self._propagate_assignment(group, codes.REBALANCE_IN_PROGRESS, now_ms, reset=True)
        group.pending_sync.clear()
        self._cancel(("sync", group.group_id))
        initial = group.state == EMPTY
        _log.info("Preparing to rebalance group %s in state %s with old generation %d "
                  "(%d members)", group.group_id, group.state, group.generation_id,
                  len(group.members))
        group.transition(PREPARING_REBALANCE, now_ms)
        gid = group.group_id
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule(("join", gid), now_ms + delay,
                           lambda now: self._initial_join_due(gid, delay, remaining, now))
            return
        if group.all_joined():
            return self._complete_join(group, now_ms)
        self._schedule(("join", gid), now_ms + group.rebalance_timeout_ms(),
                       lambda now: self._join_due(gid, now))

    def _initial_join_due(self, group_id: str, delay_ms: int, remaining_ms: int,
                          now_ms: int) -> None:
        # Kafka's InitialDelayedJoin: while new members keep arriving, wait another delay
        # (at most the rebalance timeout in all).
        group = self._groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self._schedule(("join", group_id), now_ms + new_delay,
                           lambda now: self._initial_join_due(group_id, new_delay,
                                                              new_remaining, now))
            return
        self._complete_join(group, now_ms)

    def _join_due(self, group_id: str, now_ms: int) -> None:
        group = self._groups.get(group_id)
        if group is not None:
            self._complete_join(group, now_ms)

    def _maybe_complete_join(self, group: _Group, now_ms: int) -> None:
        if (group.state == PREPARING_REBALANCE and group.previous_state != EMPTY
                and group.all_joined()):
            self._complete_join(group, now_ms)

    def _complete_join(self, group: _Group, now_ms: int) -> None:
        gid = group.group_id
        self._cancel(("join", gid))
        for member in [m for m in group.members.values()
                       if m.join_done is None and m.group_instance_id is None]:
            group.remove(member.member_id)
            self._cancel(("hb", gid, member.member_id))
        if group.state == DEAD:
            return
        if group.members and not self._elect_joined_leader(group):
            # Nobody rejoined: wait another rebalance timeout for session expiry to act.
            self._schedule(("join", gid), now_ms + group.rebalance_timeout_ms(),
                           lambda now: self._join_due(gid, now))
            return
        group.generation_id += 1
        self.completed_rebalances += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol = None
            group.transition(EMPTY, now_ms)
            _log.info("Group %s with generation %d is now empty", gid, group.generation_id)
            self._write_quietly(group)
            return
        group.protocol = group.select_protocol()
        group.transition(COMPLETING_REBALANCE, now_ms)
        if _log.isEnabledFor(logging.INFO):
            _log.info("Stabilized group %s generation %d (protocol type %s, protocol %s) with "
                      "%d members: %s", gid, group.generation_id, group.protocol_type,
                      group.protocol, len(group.members), ", ".join(sorted(group.members)))
        for member in list(group.members.values()):
            done, member.join_done = member.join_done, None
            if done is not None:
                done(self._join_response(group, member.member_id))
            self._schedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        self._schedule(("sync", gid), now_ms + group.rebalance_timeout_ms(),
                       lambda now: self._sync_due(gid, generation, now))

    def _elect_joined_leader(self, group: _Group) -> bool:
        leader = group.members.get(group.leader_id) if group.leader_id else None
        if leader is not None and leader.join_done is not None:
            return True
        for member in group.members.values():
            if member.join_done is not None:
                group.leader_id = member.member_id
                return True
        return False

    def _sync_due(self, group_id: str, generation_id: int, now_ms: int) -> None:
        # Members that got their join response but never synced are removed (Kafka's
        # expirePendingSync), and the group rebalances without them.
        group = self._groups.get(group_id)
        if group is None or group.generation_id != generation_id:
            return
        if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync:
            for member_id in list(group.pending_sync):
                group.remove(member_id)
                self._cancel(("hb", group_id, member_id))
            self._prepare_rebalance(group, now_ms)

    def _schedule_heartbeat(self, group: _Group, member: _Member, now_ms: int,
                            timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._schedule(("hb", gid, mid), now_ms + timeout,
                       lambda now: self._expire_heartbeat(gid, mid, now))

    def _expire_heartbeat(self, group_id: str, member_id: str, now_ms: int) -> None:
        group = self._groups.get(group_id)
        if group is None:
            return
        if member_id in group.pending_join:
            group.pending_join.discard(member_id)
            if group.state == PREPARING_REBALANCE and group.all_joined():
                self._complete_join(group, now_ms)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._remove_member(group, member, now_ms)

    def _remove_member(self, group: _Group, member: _Member, now_ms: int) -> None:
        if member.join_done is not None:
            done, member.join_done = member.join_done, None
            done(JoinResult(codes.UNKNOWN_MEMBER_ID, ""))
        group.remove(member.member_id)
        self._cancel(("hb", group.group_id, member.member_id))
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now_ms)
        elif group.state == PREPARING_REBALANCE and group.all_joined():
            self._complete_join(group, now_ms)

    # --- SyncGroup -------------------------------------------------------------------------

    def sync_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                   generation_id: int, protocol_type: str | None, protocol_name: str | None,
                   assignments: Iterable[tuple[str, bytes]], now_ms: int,
                   done: SyncDone) -> None:
        """Kafka's SyncGroup. The leader's ``assignments`` (``[(member_id, bytes)]``) are
        stored (``write_group_metadata``) and sent to every member; followers wait for them.
        ``protocol_type`` / ``protocol_name`` (v5+, else None) must match the group's."""
        if not group_id:
            return done(SyncResult(codes.INVALID_GROUP_ID))
        group = self._groups.get(group_id)
        if group is None or group.state == EMPTY:
            return done(SyncResult(codes.UNKNOWN_MEMBER_ID))
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return done(SyncResult(error))
        if generation_id != group.generation_id:
            return done(SyncResult(codes.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol):
            return done(SyncResult(codes.INCONSISTENT_GROUP_PROTOCOL))
        if group.state == PREPARING_REBALANCE:
            return done(SyncResult(codes.REBALANCE_IN_PROGRESS))
        member = group.members[member_id]
        if group.state == COMPLETING_REBALANCE:
            member.sync_done = done
            self._sync_received(group, member_id)
            if group.leader_id != member_id:
                return None
            given = {mid: bytes(data) for mid, data in assignments}
            assignment = {mid: given.get(mid, b"") for mid in group.members}
            for mid, data in assignment.items():
                group.members[mid].assignment = data
            try:
                self._write(group_id, self._metadata_value(group))
            except Exception:
                self._propagate_assignment(group, codes.UNKNOWN_SERVER_ERROR, now_ms, reset=True)
                return self._maybe_prepare_rebalance(group, now_ms)
            self._propagate_assignment(group, codes.NONE, now_ms)
            group.transition(STABLE, now_ms)
            return None
        # Stable: the member lost its sync response; send its assignment again.
        self._sync_received(group, member_id)
        done(SyncResult(codes.NONE, member.assignment, group.protocol_type, group.protocol))

    def _sync_received(self, group: _Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel(("sync", group.group_id))

    def _propagate_assignment(self, group: _Group, error: int, now_ms: int, *,
                              reset: bool = False) -> None:
        for member in group.members.values():
            if reset:
                member.assignment = b""
            done, member.sync_done = member.sync_done, None
            if done is not None:
                if error == codes.NONE:
                    done(SyncResult(codes.NONE, member.assignment, group.protocol_type,
                                    group.protocol))
                else:
                    done(SyncResult(error))
                self._schedule_heartbeat(group, member, now_ms)

    # --- Heartbeat, LeaveGroup -------------------------------------------------------------

    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int, now_ms: int) -> int:
        """Kafka's Heartbeat: the error code (REBALANCE_IN_PROGRESS tells the member to
        rejoin). Resets the member's session timer."""
        if not group_id:
            return codes.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        if group is None:
            return codes.UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return codes.ILLEGAL_GENERATION
        if group.state == EMPTY:
            return codes.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id], now_ms)
        return codes.REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else codes.NONE

    def leave_group(self, *, group_id: str, members: Iterable[tuple[str, str | None]],
                    now_ms: int) -> tuple[int, list[int]]:
        """Kafka's LeaveGroup of ``members`` (``[(member_id, group_instance_id)]``; an empty
        member id with an instance id removes that static member, as the admin client does):
        ``(error code, [error code per member])``."""
        members = list(members)
        if not group_id:
            return codes.INVALID_GROUP_ID, []
        group = self._groups.get(group_id)
        if group is None:
            return codes.NONE, [codes.UNKNOWN_MEMBER_ID] * len(members)
        member_codes = []
        left = 0
        for member_id, instance_id in members:
            if member_id == "":
                target = group.static_members.get(instance_id) if instance_id else None
                if target is None:
                    member_codes.append(codes.UNKNOWN_MEMBER_ID)
                    continue
            elif member_id in group.pending_join:
                group.pending_join.discard(member_id)
                self._cancel(("hb", group_id, member_id))
                member_codes.append(codes.NONE)
                left += 1  # Kafka counts it as a leave (a Stable group rebalances)
                continue
            else:
                error = group.validate_member(member_id, instance_id)
                if error:
                    member_codes.append(error)
                    continue
                target = member_id
            member = group.members[target]
            self._cancel(("hb", group_id, target))
            if member.join_done is not None:
                done, member.join_done = member.join_done, None
                done(JoinResult(codes.UNKNOWN_MEMBER_ID, ""))
            group.remove(target)
            member_codes.append(codes.NONE)
            left += 1
        if left:
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance(group, now_ms)
            elif group.state == PREPARING_REBALANCE:
                self._maybe_complete_join(group, now_ms)
        return codes.NONE, member_codes

    # --- offsets, deletion -----------------------------------------------------------------

    def validate_offset_commit(self, *, group_id: str, member_id: str,
                               group_instance_id: str | None, generation_id: int,
                               now_ms: int, api_version: int = 9,
                               transactional: bool = False) -> int:
        """The error code of an OffsetCommit (or, ``transactional``, a TxnOffsetCommit) by
        this member at this generation, 0 when it may commit (Kafka's
        ``ClassicGroup.validateOffsetCommit``): a commit from outside the group (generation
        -1, no member id) is allowed for an unknown or empty group only; a member's commit
        needs its current generation and, not transactional, a group not in
        CompletingRebalance. A valid member's commit keeps its session alive. An unknown group
        with generation >= 0: GROUP_ID_NOT_FOUND from OffsetCommit v9, else
        ILLEGAL_GENERATION. A commit from outside creates the (simple) group, as Kafka's
        does: call :meth:`ensure_group` once it is stored."""
        group = self._groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return codes.NONE
            return codes.GROUP_ID_NOT_FOUND if api_version >= 9 and not transactional \
                else codes.ILLEGAL_GENERATION
        if generation_id < 0 and group.state == EMPTY:
            return codes.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return codes.ILLEGAL_GENERATION
        elif not transactional and group.state != EMPTY:
            return codes.UNKNOWN_MEMBER_ID
        if not transactional and group.state == COMPLETING_REBALANCE:
            return codes.REBALANCE_IN_PROGRESS
        if not transactional and group.state in (STABLE, PREPARING_REBALANCE) \
                and member_id in group.members:
            self._schedule_heartbeat(group, group.members[member_id], now_ms)
        return codes.NONE

    def ensure_group(self, group_id: str, now_ms: int) -> None:
        """Keep ``group_id`` as an empty (simple) group if it is unknown: a group whose only
        state is committed offsets (a commit from outside any group, or offsets found on
        load), as Kafka's ``getOrMaybeCreateClassicGroup``."""
        if group_id and group_id not in self._groups:
            self._groups[group_id] = _Group(group_id, state_timestamp_ms=now_ms)

    def check_member(self, group_id: str, member_id: str, generation_id: int,
                     group_instance_id: str | None = None) -> None:
        """The generation/member check of a TxnOffsetCommit (Kafka's
        ``validateOffsetCommit(isTransactional=true)``): returns when the commit may go on,
        else raises :class:`~seglog.errors.IllegalGenerationError`,
        :class:`~seglog.errors.UnknownMemberIdError` or
        :class:`~seglog.errors.FencedInstanceIdError` (each carries its Kafka code)."""
        error = self.validate_offset_commit(group_id=group_id, member_id=member_id,
                                            group_instance_id=group_instance_id,
                                            generation_id=generation_id, now_ms=0,
                                            transactional=True)
        if error:
            raise _ERROR_CLASSES[error](
                f"group {group_id!r} refuses member {member_id!r} "
                f"(instance {group_instance_id!r}) at generation {generation_id}")

    def delete_group(self, group_id: str) -> int:
        """Kafka's DeleteGroups for one group: NON_EMPTY_GROUP while it has members, else it
        is forgotten (state Dead) and its membership record tombstoned; NONE. The caller
        deletes its offsets. An unknown group: GROUP_ID_NOT_FOUND."""
        group = self._groups.get(group_id)
        if group is None:
            return codes.GROUP_ID_NOT_FOUND
        if group.state != EMPTY:
            return codes.NON_EMPTY_GROUP
        group.transition(DEAD, group.state_timestamp_ms)
        del self._groups[group_id]
        for key in [k for k in self._timers if k[1] == group_id]:
            self._cancel(key)
        self._write(group_id, None)
        return codes.NONE

    def offset_delete_error(self, group_id: str) -> int:
        """The group-level error of an OffsetDelete (Kafka's ``validateOffsetDelete``):
        NON_EMPTY_GROUP for a group with members that does not run the ``consumer``
        protocol (partitions of subscribed topics are refused per partition by the
        caller, GROUP_SUBSCRIBED_TO_TOPIC, using :meth:`subscribed_topics`)."""
        group = self._groups.get(group_id)
        if group is None or group.state == EMPTY:
            return codes.NONE
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            return codes.NONE
        return codes.NON_EMPTY_GROUP

    def check_consistency(self) -> None:
        """Raise AssertionError if a group breaks an invariant of the state machine (a
        leader that is not a member, a member parked in a join after the join phase, ...):
        for tests and debugging; cheap enough to call after every step of a model test."""
        for group in self._groups.values():
            assert group.state in (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE), \
                group.state
            if group.members:
                assert group.leader_id in group.members, (group.group_id, group.leader_id)
            else:
                assert group.leader_id is None, group.group_id
                assert group.state in (EMPTY, PREPARING_REBALANCE), group.state
            assert group.pending_sync <= set(group.members), group.group_id
            assert not group.pending_join & set(group.members), group.group_id
            for instance, member_id in group.static_members.items():
                assert group.members[member_id].group_instance_id == instance, instance
            if group.state in (COMPLETING_REBALANCE, STABLE):
                assert group.protocol is not None, group.group_id
                assert all(m.join_done is None for m in group.members.values()), group.group_id

    # --- persistence -----------------------------------------------------------------------

    def _metadata_value(self, group: _Group) -> GroupMetadataValue:
        members = tuple(MemberMetadata(m.member_id, m.client_id, m.client_host,
                                       m.session_timeout_ms, m.metadata(group.protocol),
                                       m.assignment, m.rebalance_timeout_ms,
                                       m.group_instance_id)
                        for m in group.members.values())
        return GroupMetadataValue(group.protocol_type or "", group.generation_id,
                                  group.protocol, group.leader_id, members,
                                  group.state_timestamp_ms)

    def _write_quietly(self, group: _Group) -> None:
        # The empty generation's record: if it is lost, the previous one comes back on a
        # restart and its members expire; Kafka only logs this failure too.
        try:
            self._write(group.group_id, self._metadata_value(group))
        except Exception:  # noqa: BLE001 - a failed store is not the members' error here
            pass

    def load(self, group_id: str, value: GroupMetadataValue | None, now_ms: int) -> None:
        """Take back a group's last membership record after a restart (None: deleted).
        Members come back with their assignment, in ``Stable``, and must heartbeat within
        their session timeout or are evicted (then the group rebalances)."""
        self._groups.pop(group_id, None)
        for key in [k for k in self._timers if k[1] == group_id]:
            self._cancel(key)
        if value is None:
            return
        group = _Group(group_id, state=STABLE if value.members else EMPTY,
                       state_timestamp_ms=value.current_state_timestamp_ms,
                       generation_id=value.generation,
                       protocol_type=value.protocol_type or None,
                       protocol=value.protocol, leader_id=value.leader)
        for m in value.members:
            member = _Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             m.rebalance_timeout_ms if m.rebalance_timeout_ms >= 0
                             else m.session_timeout_ms, m.session_timeout_ms,
                             value.protocol_type, [(value.protocol or "", m.subscription)],
                             m.assignment)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        self._groups[group_id] = group
        for member in group.members.values():
            self._schedule_heartbeat(group, member, now_ms)


    def take_for_upgrade(self, group_id: str, max_size: int) -> UpgradedGroup | None:
        """Kafka's online upgrade (``validateOnlineUpgrade``, ``convertToConsumerGroup``):
        a group with members of the ``consumer`` protocol type and at most ``max_size``
        members leaves this coordinator for the consumer group coordinator. Its members'
        parked JoinGroup and SyncGroup answer REBALANCE_IN_PROGRESS, its record is
        tombstoned; returns its generation and members (None, nothing changed: it may not
        be upgraded)."""
        group = self._groups.get(group_id)
        if group is None or not group.members or \
                group.protocol_type != CONSUMER_PROTOCOL_TYPE or len(group.members) > max_size:
            return None
        upgraded = UpgradedGroup(group.generation_id, group.protocol, tuple(
            UpgradedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                           m.rebalance_timeout_ms, m.session_timeout_ms, tuple(m.protocols),
                           m.assignment) for m in group.members.values()))
        self.unload(group_id, codes.REBALANCE_IN_PROGRESS)
        self._write(group_id, None)
        return upgraded

    def adopt_downgraded(self, group_id: str, downgraded: UpgradedGroup, now_ms: int) -> bool:
        """Kafka's online downgrade (``ClassicGroup.fromConsumerGroup``): the classic
        members of a consumer group whose last member of the consumer protocol left become
        this classic group, ``Stable`` at the consumer group's epoch with the assignments
        given, stored, then rebalancing at once (each member is told to rejoin). False,
        nothing changed: the id is taken here or the members share no protocol."""
        if group_id in self._groups or not downgraded.members:
            return False
        group = _Group(group_id, state=STABLE, state_timestamp_ms=now_ms,
                       generation_id=downgraded.generation_id,
                       protocol_type=CONSUMER_PROTOCOL_TYPE)
        for m in downgraded.members:
            group.add(_Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.rebalance_timeout_ms, m.session_timeout_ms,
                              CONSUMER_PROTOCOL_TYPE, list(m.protocols), m.assignment))
        if not any(group._support_count(name) == len(group.members)
                   for name, _ in downgraded.members[0].protocols):
            return False
        group.protocol = group.select_protocol()
        self._groups[group_id] = group
        self._write_quietly(group)
        for member in group.members.values():
            self._schedule_heartbeat(group, member, now_ms)
        self._prepare_rebalance(group, now_ms)
        return True

    def unload(self, group_id: str, error_code: int = codes.NOT_COORDINATOR) -> None:
        """Forget group ``group_id`` (a cluster member stopped leading its
        ``__consumer_offsets`` partition: Kafka's ``onGroupUnloaded``): its timers go, and
        the members' parked JoinGroup and SyncGroup answer ``error_code`` (NOT_COORDINATOR:
        the clients look for the new coordinator). Nothing is written."""
        group = self._groups.pop(group_id, None)
        for key in [k for k in self._timers if k[1] == group_id]:
            self._cancel(key)
        if group is None:
            return
        for member in group.members.values():
            if member.join_done is not None:
                join_done, member.join_done = member.join_done, None
                join_done(JoinResult(error_code, member.member_id))
            if member.sync_done is not None:
                sync_done, member.sync_done = member.sync_done, None
                sync_done(SyncResult(error_code))


def _subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: v0 is the prefix of all:
    int16 version, int32 count, int16-length strings), or None when it does not parse."""
    data = bytes(metadata)
    try:
        if len(data) < 6:
            return None
        position = 2
        count = int.from_bytes(data[position:position + 4], "big", signed=True)
        position += 4
        if count < 0 or count > len(data):
            return None
        topics = set()
        for _ in range(count):
            if position + 2 > len(data):
                return None
            length = int.from_bytes(data[position:position + 2], "big", signed=True)
            position += 2
            if length < 0 or position + length > len(data):
                return None
            topics.add(data[position:position + length].decode("utf-8"))
            position += length
        return topics
    except (UnicodeDecodeError, ValueError):
        return None
