"""Kafka's consumer group protocol (KIP-848, ``group.protocol=consumer``), as the wire
broker's group coordinator runs it.

The broker assigns (the clients do not): each member sends ConsumerGroupHeartbeat with its
subscription and the partitions it owns; the coordinator keeps

- the *group epoch*, bumped whenever a member joins, leaves, is fenced or changes its
  subscription, or the subscribed topics' partition counts change;
- the *target assignment* and its epoch: computed by the server-side assignor
  (:mod:`seglog.coordinator.consumer_assignors`) when the group epoch moves past it;
- per member its *member epoch* and its current assignment, reconciled towards the target
  as Kafka 4.x's ``CurrentAssignmentBuilder`` does: a member first gives up (revokes) what
  it must lose, staying at its epoch in ``UNREVOKED_PARTITIONS`` until its heartbeat no longer
  lists them; only then does it move to the target epoch and receive new partitions, and a
  partition still owned by another member (its *partition epoch* is set) is withheld
  (``UNRELEASED_PARTITIONS``) until that member released it. No partition is ever owned by
  two members.

Members are fenced when their session expires (``group.consumer.session.timeout.ms`` after
the last heartbeat) or when they keep partitions to revoke beyond their rebalance timeout.
Static members (``group.instance.id``) leave temporarily with epoch -2 and may be replaced
by a new member id with the same instance id.

Like :mod:`seglog.coordinator.classic_group` it knows nothing of sockets, threads or
asyncio: every call takes ``now_ms``; timers fire in :meth:`ConsumerGroupCoordinator.poll`
at :meth:`~ConsumerGroupCoordinator.next_deadline_ms`. Topics are named here; the wire's
topic ids are the caller's to translate. Not thread-safe: the broker's event loop calls it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from typing import Any, Callable, Mapping, NamedTuple

from .. import error_codes as codes
from . import consumer_group_protocol as protocol
from .classic_group import UpgradedGroup, UpgradedMember
from .consumer_assignors import ASSIGNORS, TargetAssignment

_log = logging.getLogger(__name__)

try:  # Kafka matches with RE2/J: RE2's syntax (a required dependency, google-re2)
    import re2
except ImportError:  # pragma: no cover - then Python's re (a superset of RE2's syntax)
    re2 = None


def _compile(regex: str) -> Any:
    """``regex`` compiled as RE2 (Python's ``re`` without google-re2); ValueError with the
    parser's reason when it is not valid."""
    if re2 is None:  # pragma: no cover
        try:
            return re.compile(regex)
        except re.error as exc:
            raise ValueError(str(exc)) from None
    options = re2.Options()
    options.log_errors = False  # the reason goes to the client, not to stderr
    try:
        return re2.compile(regex, options)
    except (re2.error, re.error) as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None

__all__ = ["ASSIGNING", "ClassicJoin", "ClassicJoinResult", "ConsumerGroupConfig", "ConsumerGroupCoordinator", "EMPTY",
           "HeartbeatRequest", "HeartbeatResult", "Member", "RECONCILING", "STABLE",
           "MEMBER_STABLE", "UNRELEASED_PARTITIONS", "UNREVOKED_PARTITIONS"]

# The group's states, by Kafka's names (ConsumerGroup.ConsumerGroupState).
EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"

# A member's reconciliation states (Kafka's MemberState).
MEMBER_STABLE = "STABLE"
UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: ``{topic name: frozenset(partitions)}``: one member's partitions.
Partitions = dict[str, frozenset[int]]


class ConsumerGroupConfig(NamedTuple):
    """The broker configs of the consumer group coordinator, by Kafka's names and defaults:
    ``group.consumer.session.timeout.ms`` (45000), ``group.consumer.heartbeat.interval.ms``
    (5000), ``group.consumer.max.size`` (unbounded), ``group.consumer.assignors`` (``uniform``,
    ``range``: the first is the default), ``group.consumer.migration.policy``
    (``bidirectional``)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    #: ``group.consumer.migration.policy``: which online conversions of groups with
    #: members are allowed (disabled, upgrade, downgrade, bidirectional).
    migration_policy: str = "bidirectional"

    def upgrade_enabled(self) -> bool:
        """Whether a classic group with members may become a consumer group."""
        return self.migration_policy in ("upgrade", "bidirectional")

    def downgrade_enabled(self) -> bool:
        """Whether a consumer group of classic members may become a classic group."""
        return self.migration_policy in ("downgrade", "bidirectional")


class HeartbeatRequest(NamedTuple):
    """A ConsumerGroupHeartbeat, topics by name (``owned``: None when not sent; topic ids
    the caller could not name are left out)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


class HeartbeatResult(NamedTuple):
    """A ConsumerGroupHeartbeat answer; ``assignment`` None when it is not sent."""

    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


class ClassicJoin(NamedTuple):
    """A classic member's JoinGroup to a consumer group with members."""

    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9


class ClassicJoinResult(NamedTuple):
    """Its answer: the generation is the member's epoch, the leader nobody (the coordinator
    assigns)."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_name: str | None = None


@dataclasses.dataclass
class Member:
    """One member of a consumer group, as Kafka's ``ConsumerGroupMember``."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: str = MEMBER_STABLE
    assigned: Partitions = dataclasses.field(default_factory=dict)
    pending_revocation: Partitions = dataclasses.field(default_factory=dict)
    #: When the session expires unless it heartbeats (ms since the epoch).
    session_deadline_ms: int = 0
    #: When it is fenced unless it revoked what it must (None: nothing to revoke).
    rebalance_deadline_ms: int | None = None
    #: ``{(topic, partition): the member epoch it was assigned at}``: a commit with an
    #: older epoch is accepted for the partitions it already had then.
    assigned_at: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    #: A classic member's JoinGroup protocols ``((name, metadata), ...)`` (Kafka's
    #: ``classicMemberMetadata``); None for a member of the consumer protocol.
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None
    #: A classic member's session timeout (its JoinGroup's).
    classic_session_timeout_ms: int = 0
    #: When a classic member told to rejoin is fenced unless it did (Kafka's join
    #: timeout), or, after its JoinGroup, unless it sent SyncGroup (sync timeout).
    classic_deadline_ms: int | None = None

    def uses_classic_protocol(self) -> bool:
        """Whether it joined with JoinGroup (a classic member of this consumer group)."""
        return self.classic_protocols is not None

    def subscription(self) -> tuple[tuple[str, ...], str | None]:
        """What the group epoch depends on: its topic names and regular expression."""
        return self.subscribed_topic_names, self.subscribed_topic_regex


@dataclasses.dataclass
class Group:
    """One consumer group: its epochs, members, target assignment and the epochs of the
    partitions its members own."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = dataclasses.field(default_factory=dict)
    target: TargetAssignment = dataclasses.field(default_factory=dict)
    #: ``{(topic, partition): member epoch}`` of every partition a member owns (assigned or
    #: pending revocation).
    partition_epochs: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    #: The subscribed topics' partition counts the target was computed on.
    subscription_metadata: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The group epoch before its last fencing (not stored): the generation of the classic
    #: group it becomes when the fenced member was its last of the consumer protocol.
    epoch_before_fence: int | None = None

    def state(self) -> str:
        """Kafka's group state: Empty, Assigning, Reconciling or Stable."""
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for member in self.members.values():
            if member.state != MEMBER_STABLE or member.member_epoch != self.assignment_epoch:
                return RECONCILING
        return STABLE

    def static_member(self, instance_id: str) -> Member | None:
        """The member with ``instance_id``, or None."""
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None


class _Refused(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message


def _union(a: Partitions, b: Partitions) -> Partitions:
    out = dict(a)
    for topic, parts in b.items():
        out[topic] = out.get(topic, frozenset()) | parts
    return out


def _is_subset(owned: Partitions, of: Partitions) -> bool:
    return all(parts <= of.get(topic, frozenset()) for topic, parts in owned.items())


class ConsumerGroupCoordinator:
    """The consumer groups of one broker (those of the ``__consumer_offsets`` partitions it
    coordinates). ``topics()`` returns ``{topic name: partition count}`` of the cluster's
    topics now (what subscriptions resolve against)."""

    def __init__(self, config: ConsumerGroupConfig, topics: Callable[[], Mapping[str, int]],
                 on_change: Callable[[str, Group | None], None] | None = None):
        self.config = config
        #: ``group_id -> the config that group runs with`` (a group's own session timeout
        #: and heartbeat interval, Kafka's group configs ``consumer.*``); None: ``config``.
        self.group_config: Callable[[str], ConsumerGroupConfig] | None = None
        self._topics = topics
        self._groups: dict[str, Group] = {}
        #: Called after a group changed (None: it is gone), for the records that keep it.
        self._on_change = on_change
        #: ``{regex: (the topics it was matched against, the matches)}``.
        self._regex_cache: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    def config_of(self, group_id: str) -> ConsumerGroupConfig:
        """The config group ``group_id`` runs with (Kafka's
        ``GroupMetadataManager.consumerGroupSessionTimeoutMs(groupId)`` and the like)."""
        return self.group_config(group_id) if self.group_config is not None else self.config

    def _changed(self, group_id: str) -> None:
        if self._on_change is not None:
            self._on_change(group_id, self._groups.get(group_id))

    def load(self, groups: Mapping[str, Group]) -> None:
        """Take back ``groups`` read from ``__consumer_offsets`` (this broker now
        coordinates them); their subscriptions resolve against today's topics."""
        for group_id, group in groups.items():
            group.subscription_metadata = self._subscription_metadata(group)
            self._groups[group_id] = group

    # --- reading ------------------------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer group here."""
        return group_id in self._groups

    def group(self, group_id: str) -> Group | None:
        """The group (read it, do not change it), or None."""
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        """Every consumer group's id, sorted."""
        return sorted(self._groups)

    def state(self, group_id: str) -> str | None:
        """The state of ``group_id`` (Empty, Assigning, Reconciling, Stable), None when it
        is not a consumer group here."""
        group = self._groups.get(group_id)
        return None if group is None else group.state()

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics the members of ``group_id`` subscribe to (empty: no such group)."""
        group = self._groups.get(group_id)
        if group is None:
            return set()
        return {t for m in group.members.values() for t in self._resolve(m)}

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        """Kafka's ``consumerGroupHeartbeat``: join (epoch 0), heartbeat, leave (-1, or -2 for
        a static member leaving for a while); the answer names the member's epoch and, when
        it changed or the request was a full one, its assignment."""
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH,
                                        LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                answer = self._leave(request, now_ms)
            else:
                answer = self._heartbeat(request, now_ms)
            self._changed(request.group_id)
            return answer
        except _Refused as refused:
            return HeartbeatResult(refused.code, refused.message)

    def _validate(self, request: HeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        def invalid(message: str) -> _Refused:
            return _Refused(codes.INVALID_REQUEST, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if request.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if request.api_version >= 1 and not request.member_id:
            raise invalid("MemberId can't be empty.")
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or any(request.owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and not request.subscribed_topic_regex:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                              "first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if request.subscribed_topic_regex:  # "" clears a regex (Kafka 4.x)
            try:
                _compile(request.subscribed_topic_regex)
            except ValueError as exc:
                raise _Refused(codes.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not "
                               f"a valid regular expression: {exc}.") from None
        if request.server_assignor is not None and \
                request.server_assignor not in self.config.assignors:
            raise _Refused(codes.UNSUPPORTED_ASSIGNOR,
                           f"ServerAssignor {request.server_assignor} is not supported. "
                           f"Supported assignors: {', '.join(self.config.assignors)}.")

    def _get_group(self, group_id: str, create: bool) -> Group:
        group = self._groups.get(group_id)
        if group is None:
            if not create:
                raise _Refused(codes.GROUP_ID_NOT_FOUND,
                               f"Consumer group {group_id} not found.")
            group = self._groups[group_id] = Group(group_id)
        return group

    def _leave(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        group = self._get_group(request.group_id, create=False)
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise _Refused(codes.UNKNOWN_MEMBER_ID,
                               f"Member {request.member_id} is not a member of group "
                               f"{group.group_id}.")
        else:
            member = self._static_member_checked(group, request)
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Not fenced: its partitions wait for it until its session expires.
                self._set_owned(group, member, member.assigned, {},
                                LEAVE_GROUP_STATIC_MEMBER_EPOCH)
                member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
                member.rebalance_deadline_ms = None
                return HeartbeatResult(codes.NONE, None, member.member_id,
                                       LEAVE_GROUP_STATIC_MEMBER_EPOCH, 0)
        self._fence(group, member)
        return HeartbeatResult(codes.NONE, None, request.member_id, request.member_epoch, 0)

    def _static_member_checked(self, group: Group, request: HeartbeatRequest) -> Member:
        assert request.instance_id is not None
        member = group.static_member(request.instance_id)
        if member is None:
            raise _Refused(codes.UNKNOWN_MEMBER_ID,
                           f"Instance id {request.instance_id} is unknown.")
        if member.member_id != request.member_id:
            raise _Refused(codes.FENCED_INSTANCE_ID,
                           f"Static member {request.member_id} with instance id "
                           f"{request.instance_id} is fenced by existing member "
                           f"{member.member_id}.")
        return member

    def _check_epoch(self, member: Member, received: int, owned: Partitions | None) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a member may lag one epoch
        behind only while what it owns is a subset of what it is assigned."""
        if received > member.member_epoch:
            raise _Refused(codes.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a greater member epoch ({received})"
                           f" than the one known by the group coordinator "
                           f"({member.member_epoch}). The member must abandon all its "
                           f"partitions and rejoin.")
        if received < member.member_epoch:
            if received != member.previous_member_epoch or owned is None or \
                    not _is_subset(owned, member.assigned):
                raise _Refused(codes.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a smaller member epoch "
                               f"({received}) than the one known by the group coordinator "
                               f"({member.member_epoch}). The member must abandon all its "
                               f"partitions and rejoin.")

    def _member_for(self, group: Group, request: HeartbeatRequest, new_ids: list[str]
                    ) -> Member:
        joining = request.member_epoch == 0
        member_id = request.member_id or str(uuid.uuid4())
        if request.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise _Refused(codes.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group "
                                   f"{group.group_id}.")
                self._check_size(group)
                member = Member(member_id)
                new_ids.append(member_id)
            else:
                self._check_epoch(member, request.member_epoch, request.owned)
            return member
        existing = group.static_member(request.instance_id)
        if joining:
            if existing is None:
                self._check_size(group)
                new_ids.append(member_id)
                return Member(member_id, instance_id=request.instance_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _Refused(codes.UNRELEASED_INSTANCE_ID,
                               f"Static member {member_id} with instance id "
                               f"{request.instance_id} cannot join the group because the "
                               f"instance id is owned by {existing.member_id} member.")
            # The new member id takes the old one's place and partitions.
            replaced = dataclasses.replace(existing, member_id=member_id, member_epoch=0,
                                           previous_member_epoch=0)
            del group.members[existing.member_id]
            if existing.member_id in group.target:
                group.target[member_id] = group.target.pop(existing.member_id)
            group.members[member_id] = replaced
            self._set_owned(group, replaced, replaced.assigned, replaced.pending_revocation, 0)
            return replaced
        member = self._static_member_checked(group, request._replace(member_id=member_id))
        self._check_epoch(member, request.member_epoch, request.owned)
        return member

    def _check_size(self, group: Group) -> None:
        if len(group.members) >= self.config.max_size:
            raise _Refused(codes.GROUP_MAX_SIZE_REACHED,
                           f"The consumer group has reached its maximum capacity of "
                           f"{self.config.max_size} members.")

    def _heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        joining = request.member_epoch == 0
        created = request.group_id not in self._groups
        group = self._get_group(request.group_id, create=joining)
        new_ids: list[str] = []
        try:
            member = self._member_for(group, request, new_ids)
        except _Refused:
            if created:
                del self._groups[request.group_id]
            raise
        # A new member starts with no subscription: joining with none bumps nothing.
        before_subscription = member.subscription()
        before_assigned = dict(member.assigned)
        before_epoch = member.member_epoch
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        member.client_id = request.client_id
        member.client_host = request.client_host
        group.members[member.member_id] = member
        # As Kafka 4.4: one epoch for the member's new subscription, one more when the
        # subscribed topics changed (a new group's first member gets epoch 2).
        if before_subscription != member.subscription():
            group.group_epoch += 1
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        self._reconcile(group, member, request.owned, now_ms)
        group_config = self.config_of(request.group_id)
        member.session_deadline_ms = now_ms + group_config.session_timeout_ms
        full = joining or (request.rebalance_timeout_ms != -1
                           and request.subscribed_topic_names is not None
                           and request.owned is not None)
        changed = member.assigned != before_assigned or (joining and before_epoch != 0)
        return HeartbeatResult(codes.NONE, None, member.member_id, member.member_epoch,
                               group_config.heartbeat_interval_ms,
                               dict(member.assigned) if full or changed else None)

    # --- assignment -------------------------------------------------------------------------

    def _resolve(self, member: Member) -> frozenset[str]:
        """The topics ``member`` subscribes to: its names, and the topics its regular
        expression matches whole (internal ones included, as Kafka's)."""
        names = frozenset(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self._matching(member.subscribed_topic_regex)
        return names

    def _matching(self, regex: str) -> frozenset[str]:
        topics = frozenset(self._topics())
        cached = self._regex_cache.get(regex)
        if cached is not None and cached[0] == topics:
            return cached[1]
        try:
            pattern = _compile(regex)
        except ValueError:
            matched: frozenset[str] = frozenset()
        else:
            # Kafka 4.4 matches internal topics too (franz-go's Test848RegexBrokerResolves).
            matched = frozenset(t for t in topics if pattern.fullmatch(t))
        if len(self._regex_cache) > 1000:  # bounded: one entry per regex in use
            self._regex_cache.clear()
        self._regex_cache[regex] = (topics, matched)
        return matched

    def _subscription_metadata(self, group: Group) -> dict[str, int]:
        """``{topic: partition count}`` of every topic subscribed to (-1: no such topic)."""
        topics = self._topics()
        wanted = {t for m in group.members.values() for t in self._resolve(m)}
        return {t: topics.get(t, -1) for t in sorted(wanted)}

    def preferred_assignor(self, group: Group) -> str:
        """The assignor of ``group``: the one most of its members ask for (the first
        configured one when none asks), as Kafka's ``ConsumerGroup.preferredServerAssignor``."""
        counts: dict[str, int] = {}
        for member in group.members.values():
            if member.server_assignor is not None:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return self.config.assignors[0]
        return max(sorted(counts), key=lambda name: counts[name])

    def _compute_target(self, group: Group) -> None:
        name = self.preferred_assignor(group)
        assign = ASSIGNORS[name]
        counts = {t: c for t, c in group.subscription_metadata.items() if c > 0}
        members = {m.member_id: self._resolve(m) & frozenset(counts)
                   for m in group.members.values()}
        group.target = assign(members, counts, group.target)
        group.assignment_epoch = group.group_epoch
        if _log.isEnabledFor(logging.INFO):
            _log.info("[GroupId %s] Computed a new target assignment for epoch %d with %r "
                      "assignor: %d members: %s", group.group_id, group.group_epoch, name,
                      len(members), ", ".join(sorted(members)))

    def _set_owned(self, group: Group, member: Member, assigned: Partitions,
                   pending: Partitions, epoch: int) -> None:
        """Replace ``member``'s partitions (and their partition epochs) with ``assigned`` and
        ``pending`` at member epoch ``epoch``."""
        for topic, parts in _union(member.assigned, member.pending_revocation).items():
            for p in parts:
                if group.partition_epochs.get((topic, p)) is not None:
                    del group.partition_epochs[(topic, p)]
        member.assigned = {t: ps for t, ps in assigned.items() if ps}
        member.pending_revocation = {t: ps for t, ps in pending.items() if ps}
        member.assigned_at = {(t, p): member.assigned_at.get((t, p), epoch)
                              for t, ps in member.assigned.items() for p in ps}
        for topic, parts in _union(member.assigned, member.pending_revocation).items():
            for p in parts:
                group.partition_epochs[(topic, p)] = epoch

    def _reconcile(self, group: Group, member: Member, owned: Partitions | None,
                   now_ms: int) -> None:
        """Kafka 4.x's ``CurrentAssignmentBuilder.build``."""
        target_epoch = group.assignment_epoch
        if member.state == MEMBER_STABLE and member.member_epoch == target_epoch:
            return
        if member.state == UNREVOKED_PARTITIONS:
            if self._owns_any(owned, member.pending_revocation):
                return
            self._next_assignment(group, member, member.member_epoch + 1, owned, now_ms)
        else:
            self._next_assignment(group, member, member.member_epoch, owned, now_ms)

    @staticmethod
    def _owns_any(owned: Partitions | None, revoked: Partitions) -> bool:
        if owned is None:
            return True
        return any(parts & revoked.get(topic, frozenset()) for topic, parts in owned.items())

    def _next_assignment(self, group: Group, member: Member, member_epoch: int,
                         owned: Partitions | None, now_ms: int) -> None:
        target_epoch = group.assignment_epoch
        target = group.target.get(member.member_id, {})
        assigned: Partitions = {}
        revoking: Partitions = {}
        pending: Partitions = {}
        unreleased = False
        for topic in sorted(set(target) | set(member.assigned)):
            wanted = target.get(topic, frozenset())
            current = member.assigned.get(topic, frozenset())
            keep = current & wanted
            assigned[topic] = keep
            revoking[topic] = current - keep
            free = set()
            for p in sorted(wanted - keep):
                if group.partition_epochs.get((topic, p)) is None:
                    free.add(p)
                else:
                    unreleased = True
            pending[topic] = frozenset(free)
        revoking = {t: ps for t, ps in revoking.items() if ps}
        pending = {t: ps for t, ps in pending.items() if ps}
        if revoking and self._owns_any(owned, revoking):
            # First the member gives up what it loses, staying at its epoch.
            self._move_epoch(member, member_epoch)
            member.state = UNREVOKED_PARTITIONS
            self._set_owned(group, member, assigned, revoking, member.member_epoch)
            member.rebalance_deadline_ms = now_ms + max(0, member.rebalance_timeout_ms)
            return
        member.rebalance_deadline_ms = None
        new_assigned = _union(assigned, pending)
        self._move_epoch(member, target_epoch)
        member.state = UNRELEASED_PARTITIONS if unreleased else MEMBER_STABLE
        self._set_owned(group, member, new_assigned, {}, target_epoch)

    @staticmethod
    def _move_epoch(member: Member, epoch: int) -> None:
        if member.member_epoch != epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = epoch

    # --- leaving, fencing, timers ----------------------------------------------------------

    def _fence(self, group: Group, member: Member) -> None:
        """Remove ``member`` (its partitions become free) and bump the group epoch."""
        self._set_owned(group, member, {}, {}, 0)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.subscription_metadata = self._subscription_metadata(group)
        group.epoch_before_fence = group.group_epoch
        group.group_epoch += 1
        _log.info("[GroupId %s] Member %s left the group (epoch now %d, %d members left)",
                  group.group_id, member.member_id, group.group_epoch, len(group.members))

    def poll(self, now_ms: int) -> list[tuple[str, str]]:
        """Fence the members whose session or rebalance timeout expired by ``now_ms``;
        returns ``[(group_id, member_id), ...]`` fenced."""
        fenced = []
        for group in list(self._groups.values()):
            for member in list(group.members.values()):
                rebalance = member.rebalance_deadline_ms
                classic = member.classic_deadline_ms
                if member.session_deadline_ms <= now_ms or \
                        (rebalance is not None and rebalance <= now_ms) or \
                        (classic is not None and classic <= now_ms):
                    self._fence(group, member)
                    fenced.append((group.group_id, member.member_id))
        for group_id in dict.fromkeys(g for g, _m in fenced):
            self._changed(group_id)
        return fenced

    def next_deadline_ms(self) -> int | None:
        """The earliest session or rebalance deadline, None without members."""
        deadlines = [d for g in self._groups.values() for m in g.members.values()
                     for d in (m.session_deadline_ms, m.rebalance_deadline_ms,
                               m.classic_deadline_ms) if d is not None]
        return min(deadlines) if deadlines else None

    # --- classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ---------------------

    def has_members(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer group here with members (a classic JoinGroup
        then joins it; an empty one becomes a classic group instead)."""
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)

    def classic_join(self, join: ClassicJoin, now_ms: int) -> ClassicJoinResult:
        """Kafka's ``classicGroupJoinToConsumerGroup``: the member's subscription, owned
        partitions and rack come from its first protocol's ConsumerProtocolSubscription; it
        is reconciled towards the target assignment like any member and answered at once
        with its member epoch as the generation (no leader: SyncGroup brings the
        coordinator's assignment)."""
        group = self._groups[join.group_id]
        unknown = not join.member_id
        member_id = join.member_id or str(uuid.uuid4())
        try:
            existing = (group.members.get(member_id) if join.instance_id is None
                        else group.static_member(join.instance_id))
            if existing is None:
                self._check_size(group)
            if join.protocol_type != "consumer" or not join.protocols or \
                    not self._supports_classic(group, member_id, join.protocols):
                raise _Refused(codes.INCONSISTENT_GROUP_PROTOCOL)
            if unknown and join.instance_id is None and join.api_version >= 4:
                return ClassicJoinResult(codes.MEMBER_ID_REQUIRED, member_id)
            try:
                subscription = protocol.decode_subscription(join.protocols[0][1])
            except (ValueError, UnicodeDecodeError):
                raise _Refused(codes.INCONSISTENT_GROUP_PROTOCOL) from None
            if existing is None:
                member = Member(member_id, instance_id=join.instance_id)
            elif existing.member_id == member_id:
                member = existing
                if not member.uses_classic_protocol():
                    raise _Refused(codes.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} does not use the classic protocol.")
            elif unknown:
                # A static member back with a new id takes the old one's place.
                member = dataclasses.replace(existing, member_id=member_id)
                del group.members[existing.member_id]
                if existing.member_id in group.target:
                    group.target[member_id] = group.target.pop(existing.member_id)
                group.members[member_id] = member
            else:
                raise _Refused(codes.FENCED_INSTANCE_ID)
        except _Refused as refused:
            return ClassicJoinResult(refused.code, member_id)
        before_subscription = member.subscription()
        if subscription.rack_id is not None:
            member.rack_id = subscription.rack_id
        # JoinGroup v0 has no rebalance timeout: Kafka takes the session timeout.
        member.rebalance_timeout_ms = join.rebalance_timeout_ms \
            if join.rebalance_timeout_ms != -1 else join.session_timeout_ms
        member.server_assignor = None
        member.subscribed_topic_names = tuple(sorted(set(subscription.topics)))
        member.subscribed_topic_regex = None
        member.client_id = join.client_id
        member.client_host = join.client_host
        member.classic_protocols = tuple(join.protocols)
        member.classic_session_timeout_ms = join.session_timeout_ms
        group.members[member.member_id] = member
        if before_subscription != member.subscription():
            group.group_epoch += 1
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        self._reconcile(group, member, dict(subscription.owned), now_ms)
        member.session_deadline_ms = now_ms + join.session_timeout_ms
        member.classic_deadline_ms = now_ms + max(0, member.rebalance_timeout_ms)
        self._changed(group.group_id)
        return ClassicJoinResult(codes.NONE, member.member_id, member.member_epoch,
                                 join.protocols[0][0])

    def adopt_classic(self, group_id: str, classic: UpgradedGroup, now_ms: int) -> None:
        """Kafka's ``ConsumerGroup.fromClassicGroup`` (online upgrade): the classic group's
        members become classic members of a consumer group at epoch = its generation, each
        keeping the partitions its last SyncGroup gave it (that is also the target); the
        joining member of the consumer protocol then bumps the epoch, and each classic
        member is told to rejoin on its next heartbeat. Metadata or an assignment that does
        not parse counts as no subscription or no partitions."""
        generation = classic.generation_id
        group = Group(group_id, group_epoch=generation, assignment_epoch=generation)
        known = self._topics()
        for old in classic.members:
            metadata = b""
            for name, raw in old.protocols:
                if name == classic.protocol or (classic.protocol is None and not metadata):
                    metadata = raw
            try:
                subscription = protocol.decode_subscription(metadata)
            except (ValueError, UnicodeDecodeError):
                subscription = protocol.Subscription(0, (), {}, None)
            try:
                assigned = protocol.decode_assignment(old.assignment)
            except (ValueError, UnicodeDecodeError):
                assigned = {}
            assigned = {t: ps for t, ps in assigned.items()
                        if t in known and ps and max(ps) < known[t] and min(ps) >= 0}
            member = Member(
                old.member_id, instance_id=old.group_instance_id, rack_id=subscription.rack_id,
                client_id=old.client_id, client_host=old.client_host,
                subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                rebalance_timeout_ms=old.rebalance_timeout_ms, member_epoch=generation,
                previous_member_epoch=generation,
                session_deadline_ms=now_ms + old.session_timeout_ms,
                classic_protocols=tuple(old.protocols),
                classic_session_timeout_ms=old.session_timeout_ms)
            group.members[member.member_id] = member
            group.target[member.member_id] = dict(assigned)
            self._set_owned(group, member, assigned, {}, generation)
        group.subscription_metadata = self._subscription_metadata(group)
        self._groups[group_id] = group
        self._changed(group_id)

    def take_for_downgrade(self, group_id: str, max_size: int) -> UpgradedGroup | None:
        """Kafka's online downgrade (``validateOnlineDowngradeWithFencedMember``,
        ``convertToClassicGroup``), once its last member of the consumer protocol left: a
        group of classic members only (at most ``max_size``, the classic groups' limit)
        leaves this coordinator (its records tombstoned); returns its epoch and members,
        each with its target assignment as a ConsumerProtocolAssignment. None, nothing
        changed: it may not be downgraded."""
        group = self._groups.get(group_id)
        if group is None or not group.members or len(group.members) > max_size or \
                not all(m.uses_classic_protocol() for m in group.members.values()):
            return None
        shared = None
        for member in group.members.values():
            names = {name for name, _ in member.classic_protocols or ()}
            shared = names if shared is None else shared & names
        if not shared:
            return None  # a classic group's members share a protocol
        members = []
        for member in group.members.values():
            assert member.classic_protocols is not None
            version = protocol.version_of(member.classic_protocols[0][1])
            members.append(UpgradedMember(
                member.member_id, member.instance_id, member.client_id, member.client_host,
                member.rebalance_timeout_ms, member.classic_session_timeout_ms,
                member.classic_protocols, protocol.encode_assignment(
                    group.target.get(member.member_id, {}), version)))
        del self._groups[group_id]
        self._changed(group_id)
        # Kafka converts before it removes the leaving member: the epoch without its bump.
        epoch = group.group_epoch if group.epoch_before_fence is None \
            else group.epoch_before_fence
        return UpgradedGroup(epoch, None, tuple(members))

    @staticmethod
    def _supports_classic(group: Group, member_id: str,
                          protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: the joining member shares a
        protocol name with every other classic member."""
        shared = {name for name, _ in protocols}
        for other in group.members.values():
            if other.member_id != member_id and other.classic_protocols is not None:
                shared &= {name for name, _ in other.classic_protocols}
        return bool(shared)

    def _classic_member(self, group_id: str, member_id: str, instance_id: str | None
                        ) -> tuple[Group, Member]:
        """Kafka's ``validateConsumerGroupMember`` and
        ``throwIfMemberDoesNotUseClassicProtocol``."""
        group = self._groups.get(group_id)
        if group is None:
            raise _Refused(codes.UNKNOWN_MEMBER_ID)
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                raise _Refused(codes.FENCED_INSTANCE_ID)
        if member is None or not member.uses_classic_protocol():
            raise _Refused(codes.UNKNOWN_MEMBER_ID)
        return group, member

    def classic_sync(self, group_id: str, member_id: str, instance_id: str | None,
                     generation_id: int, protocol_type: str | None, protocol_name: str | None,
                     now_ms: int) -> tuple[int, bytes]:
        """Kafka's ``classicGroupSyncToConsumerGroup``: ``(error code, the member's assigned
        partitions as a ConsumerProtocolAssignment)`` (its partitions still to revoke are
        left out: it gives them up and rejoins)."""
        try:
            group, member = self._classic_member(group_id, member_id, instance_id)
            if generation_id != member.member_epoch:
                raise _Refused(codes.ILLEGAL_GENERATION)
            assert member.classic_protocols is not None
            if (protocol_type is not None and protocol_type != "consumer") or \
                    (protocol_name is not None
                     and protocol_name != member.classic_protocols[0][0]):
                raise _Refused(codes.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and \
                    member.state != UNREVOKED_PARTITIONS:
                self._rejoin_by(member, now_ms)
                raise _Refused(codes.REBALANCE_IN_PROGRESS)
        except _Refused as refused:
            return refused.code, b""
        member.session_deadline_ms = now_ms + member.classic_session_timeout_ms
        member.classic_deadline_ms = None
        version = protocol.version_of(member.classic_protocols[0][1])
        return codes.NONE, protocol.encode_assignment(member.assigned, version)

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int, now_ms: int) -> int:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS when the
        member must rejoin (the group epoch moved past it, it has partitions to revoke, or
        partitions it waited for are free now)."""
        try:
            group, member = self._classic_member(group_id, member_id, instance_id)
            if generation_id != member.member_epoch:
                raise _Refused(codes.ILLEGAL_GENERATION)
        except _Refused as refused:
            return refused.code
        member.session_deadline_ms = now_ms + member.classic_session_timeout_ms
        if member.member_epoch < group.group_epoch or member.state == UNREVOKED_PARTITIONS \
                or (member.state == UNRELEASED_PARTITIONS
                    and not self._waiting_on_unreleased(group, member)):
            self._rejoin_by(member, now_ms)
            return codes.REBALANCE_IN_PROGRESS
        return codes.NONE

    @staticmethod
    def _rejoin_by(member: Member, now_ms: int) -> None:
        """Kafka's ``scheduleConsumerGroupJoinTimeoutIfAbsent``: a classic member told to
        rejoin must within its rebalance timeout."""
        if member.classic_deadline_ms is None:
            member.classic_deadline_ms = now_ms + max(0, member.rebalance_timeout_ms)

    @staticmethod
    def _waiting_on_unreleased(group: Group, member: Member) -> bool:
        for topic, parts in group.target.get(member.member_id, {}).items():
            mine = member.assigned.get(topic, frozenset())
            for p in parts - mine:
                if group.partition_epochs.get((topic, p)) is not None:
                    return True
        return False

    def classic_leave(self, group_id: str, members: list[tuple[str, str | None]]
                      ) -> list[int]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: each ``(member id, instance id)``
        leaves (its partitions become free); an error code per member."""
        out = []
        group = self._groups.get(group_id)
        for member_id, instance_id in members:
            if group is None:
                out.append(codes.UNKNOWN_MEMBER_ID)
                continue
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance_id)
                if member is not None and member_id and member.member_id != member_id:
                    out.append(codes.FENCED_INSTANCE_ID)
                    continue
            if member is None:
                out.append(codes.UNKNOWN_MEMBER_ID)
                continue
            self._fence(group, member)
            out.append(codes.NONE)
        self._changed(group_id)
        return out

    # --- offsets, deletion, loading -----------------------------------------------------

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int,
                               api_version: int, partitions: tuple[tuple[str, int], ...] = (),
                               transactional: bool = False) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: NONE, UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH, or UNSUPPORTED_VERSION (a member of this protocol committing with
        OffsetCommit below v9). A commit with a negative epoch is allowed only while the
        group has no members (the admin client, manual assignment). An older member epoch
        is accepted, as Kafka 4.4 does, when every committed partition is assigned to the
        member since that epoch or before (``partitions``: those committed)."""
        group = self._groups[group_id]
        if member_epoch < 0 and not group.members:
            return codes.NONE
        member = group.members.get(member_id)
        if member is None:
            return codes.UNKNOWN_MEMBER_ID
        if member.uses_classic_protocol():
            # Kafka: a classic member commits with its generation, its member epoch.
            return codes.NONE if member_epoch == member.member_epoch \
                else codes.ILLEGAL_GENERATION
        if not transactional and api_version < 9:
            return codes.UNSUPPORTED_VERSION
        if member_epoch > member.member_epoch or (member_epoch < member.member_epoch and not (
                partitions and all(member.assigned_at.get(tp, member_epoch + 1) <= member_epoch
                                   for tp in partitions))):
            return codes.STALE_MEMBER_EPOCH
        return codes.NONE

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetFetch`` (OffsetFetch v9+): NONE for the
        admin client (epoch -1, no member id), else UNKNOWN_MEMBER_ID or
        STALE_MEMBER_EPOCH."""
        group = self._groups[group_id]
        if member_epoch < 0 and not member_id:
            return codes.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return codes.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return codes.STALE_MEMBER_EPOCH
        return codes.NONE

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups: NONE (deleted), NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND."""
        group = self._groups.get(group_id)
        if group is None:
            return codes.GROUP_ID_NOT_FOUND
        if group.members:
            return codes.NON_EMPTY_GROUP
        del self._groups[group_id]
        self._changed(group_id)
        return codes.NONE

    def unload(self, group_id: str) -> None:
        """Forget ``group_id`` (this broker no longer coordinates it)."""
        self._groups.pop(group_id, None)

