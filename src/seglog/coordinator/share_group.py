"""The share groups of KIP-932 as Kafka 4.4's group coordinator keeps them
(``GroupMetadataManager``'s share-group parts, ``modern/share/ShareGroup*``).

A share group's members heartbeat (ShareGroupHeartbeat) with their subscribed topic names;
the group epoch is bumped when a subscription or the subscribed topics' metadata changes,
the target assignment is recomputed by the simple assignor
(:mod:`seglog.coordinator.share_assignor`, at most once per
``group.share.assignment.interval.ms``) and each member moves to it at its next heartbeat
(share-partitions are shared, so there is no revocation: the member takes the target at
once). Only share-partitions whose state is initialized are assigned: the coordinator keeps
Kafka's ShareGroupStatePartitionMetadata (initializing, initialized and deleting topics) and
answers each heartbeat with the partitions whose state the caller must initialize through the
persister (:meth:`ShareGroupCoordinator.heartbeat`'s ``initialize``), then hears the outcome
(:meth:`ShareGroupCoordinator.initialized` / :meth:`uninitialized`).

Members silent for the session timeout are fenced (:meth:`poll`). The group is kept as
Kafka's records (:meth:`records`, :mod:`seglog.coordinator.share_group_records`) and rebuilt
from them (:meth:`load_records`). Pure: no I/O, no asyncio, clock passed in.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from .. import error_codes as codes
from . import share_assignor
from . import share_group_records as rec

__all__ = ["EMPTY", "STABLE", "DEAD", "HeartbeatResult", "InitializeRequest", "MemberView",
           "GroupView", "ShareGroupConfig", "ShareGroupCoordinator", "ShareGroupError",
           "TopicMeta"]

EMPTY = "Empty"
STABLE = "Stable"
DEAD = "Dead"
#: MemberState.STABLE's id in the current-assignment record.
_MEMBER_STABLE = 0

#: ``{topic id: {partition, ...}}``.
Partitions = dict[uuid.UUID, set[int]]


@dataclass(frozen=True)
class TopicMeta:
    """A topic of the cluster as the coordinator sees it: its id and partition count."""

    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True)
class ShareGroupConfig:
    """The broker configs a share group uses (``group.share.*``); per-group overrides of
    the session timeout and heartbeat interval come through :attr:`group_config`."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200
    assignment_interval_ms: int = 1_000
    #: ``max(group.share.initialize.retry.interval.ms, offsets.commit.timeout.ms)``.
    initialize_retry_interval_ms: int = 30_000


@dataclass
class _Member:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = _MEMBER_STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    assigned: Partitions = field(default_factory=dict)
    deadline_ms: int = 0


@dataclass
class _Group:
    group_id: str
    epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    members: dict[str, _Member] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    #: ShareGroupStatePartitionMetadata: ``{topic id: (name, {partition}, timestamp)}``.
    initializing: dict[uuid.UUID, tuple[str, set[int], int]] = field(default_factory=dict)
    initialized: dict[uuid.UUID, tuple[str, set[int]]] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)
    has_state_metadata: bool = False
    #: Set when the group exists only in memory (a first heartbeat) until records keep it.
    persisted: bool = True


@dataclass(frozen=True)
class InitializeRequest:
    """Share-partitions whose state the persister must initialize (Kafka's
    ``InitializeShareGroupStateParameters``): ``offsets`` ``{topic id: {partition: start
    offset}}`` (-1: by the group's share.auto.offset.reset, 0: from the log start, else the
    offset AlterShareGroupOffsets set), each at ``state_epoch``."""

    group_id: str
    state_epoch: int
    offsets: Mapping[uuid.UUID, Mapping[int, int]]


@dataclass(frozen=True)
class HeartbeatResult:
    """A heartbeat's answer: the member's id and epoch, the heartbeat interval, the
    assignment to send (None: unchanged, not sent), and what to initialize."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Mapping[uuid.UUID, frozenset[int]] | None
    initialize: InitializeRequest | None = None


@dataclass(frozen=True)
class MemberView:
    """A member as ShareGroupDescribe shows it."""

    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assigned: Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class GroupView:
    """A share group as ShareGroupDescribe shows it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[MemberView, ...]


class ShareGroupError(Exception):
    """A heartbeat refused with Kafka's ``error_code`` and message."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _metadata_hash(names: Iterable[str], topics: Mapping[str, TopicMeta]) -> int:
    """A 64-bit hash of the subscribed topics' metadata (name, id, partition count): it
    changes when one is created, deleted, recreated or gains partitions (Kafka hashes the
    same facts, with racks, through Murmur3; only equality matters)."""
    parts = []
    for name in sorted(set(names)):
        meta = topics.get(name)
        if meta is not None:
            parts.append(f"{name}:{meta.topic_id}:{meta.partitions}")
    if not parts:
        return 0
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _frozen(partitions: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


class ShareGroupCoordinator:
    """The share groups of one broker's ``__consumer_offsets`` partitions (see the module).

    ``topics()`` gives the cluster's topics by name; ``group_config(group_id, name)`` a
    group-level config (``share.session.timeout.ms``, ``share.heartbeat.interval.ms``) or
    None for the broker default."""

    def __init__(self, config: ShareGroupConfig, topics: Callable[[], Mapping[str, TopicMeta]],
                 group_config: Callable[[str, str], int | None] | None = None) -> None:
        self.config = config
        self._topics = topics
        self._group_config = group_config
        self._groups: dict[str, _Group] = {}
        #: The live ``group.share.assignment.interval.ms`` (None: :attr:`config`'s).
        self.broker_assignment_interval_ms: Callable[[], int] | None = None

    # --- queries ---------------------------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a share group here."""
        return group_id in self._groups

    def group_ids(self) -> list[str]:
        """The share groups' ids, sorted."""
        return sorted(self._groups)

    def state(self, group_id: str) -> str | None:
        """``Empty`` / ``Stable`` (None: no such group)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        return STABLE if group.members else EMPTY

    def is_member(self, group_id: str, member_id: str) -> bool:
        """Whether ``member_id`` is a member of share group ``group_id``."""
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    def member_ids(self, group_id: str) -> list[str]:
        """The member ids of ``group_id`` (empty for an unknown group)."""
        group = self._groups.get(group_id)
        return [] if group is None else list(group.members)

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        """``{topic id: (name, partitions)}`` of the group's initialized share-partitions."""
        group = self._groups.get(group_id)
        if group is None:
            return {}
        return {t: (n, frozenset(ps)) for t, (n, ps) in group.initialized.items()}

    def state_partitions(self, group_id: str) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        """Initialized and initializing share-partitions: what a deletion must clear."""
        group = self._groups.get(group_id)
        if group is None:
            return {}
        out = {t: (n, set(ps)) for t, (n, ps) in group.initialized.items()}
        for t, (n, ps, _ts) in group.initializing.items():
            out.setdefault(t, (n, set()))[1].update(ps)
        return {t: (n, frozenset(ps)) for t, (n, ps) in out.items()}

    def describe(self, group_id: str) -> GroupView | None:
        """The group as ShareGroupDescribe shows it (None: no such group)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        return GroupView(
            group_id=group_id, state=STABLE if group.members else EMPTY,
            group_epoch=group.epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=share_assignor.NAME,
            members=tuple(MemberView(m.member_id, m.rack_id, m.member_epoch, m.client_id,
                                     m.client_host, m.subscribed, _frozen(m.assigned))
                          for m in group.members.values()))

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's ``share.session.timeout.ms`` (else the broker's)."""
        found = self._group_config(group_id, "share.session.timeout.ms") \
            if self._group_config else None
        return self.config.session_timeout_ms if found is None else found

    def assignment_interval_ms(self) -> int:
        """``group.share.assignment.interval.ms`` as it is now (a dynamic broker config)."""
        if self.broker_assignment_interval_ms is not None:
            return self.broker_assignment_interval_ms()
        return self.config.assignment_interval_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``share.heartbeat.interval.ms`` (else the broker's)."""
        found = self._group_config(group_id, "share.heartbeat.interval.ms") \
            if self._group_config else None
        return self.config.heartbeat_interval_ms if found is None else found

    def next_deadline_ms(self) -> int | None:
        """When the next member session expires (None: no members)."""
        deadlines = [m.deadline_ms for g in self._groups.values() for m in g.members.values()]
        return min(deadlines) if deadlines else None

    # --- heartbeat ---------------------------------------------------------------------------

    def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int,
                  rack_id: str | None, subscribed_topic_names: list[str] | None,
                  client_id: str, client_host: str, now_ms: int) -> HeartbeatResult:
        """Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` (a request already checked by
        the caller: ids not empty, epoch >= -1, topic names on a join). ShareGroupError for
        Kafka's refusals."""
        if member_epoch == -1:
            return self._leave(group_id, member_id)
        topics = self._topics()
        group = self._groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                raise ShareGroupError(codes.GROUP_ID_NOT_FOUND,
                                      f"Share group {group_id} not found.")
            # Kafka's ModernGroup starts at group epoch 1 and assignment epoch 1
            # (TargetAssignmentMetadata.INITIAL): the first join makes it 2.
            group = _Group(group_id, epoch=1, assignment_epoch=1, persisted=False)
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise ShareGroupError(
                codes.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum "
                f"capacity of {self.config.max_size} members.")
        member = group.members.get(member_id)
        if member is None:
            if member_epoch != 0:
                raise ShareGroupError(codes.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a "
                                      f"member of group {group_id}.")
            member = _Member(member_id)
        elif member_epoch != 0:
            if member_epoch > member.member_epoch:
                raise ShareGroupError(
                    codes.FENCED_MEMBER_EPOCH, "The share group member has a greater member "
                    f"epoch ({member_epoch}) than the one known by the group coordinator "
                    f"({member.member_epoch}). The member must abandon all its partitions and "
                    "rejoin.")
            if member_epoch < member.member_epoch and \
                    member_epoch != member.previous_member_epoch:
                raise ShareGroupError(
                    codes.FENCED_MEMBER_EPOCH, "The share group member has a smaller member "
                    f"epoch ({member_epoch}) than the one known by the group coordinator "
                    f"({member.member_epoch}), and it does not match the previous member "
                    f"epoch ({member.previous_member_epoch}). The member must abandon all its "
                    "partitions and rejoin.")
        old_assigned = {t: set(ps) for t, ps in member.assigned.items()}
        updated = replace(member, assigned={t: set(ps) for t, ps in member.assigned.items()},
                          rack_id=rack_id if rack_id is not None else member.rack_id,
                          subscribed=tuple(subscribed_topic_names)
                          if subscribed_topic_names is not None else member.subscribed,
                          client_id=client_id, client_host=client_host)
        bump = updated.subscribed != member.subscribed
        epoch = group.epoch
        if group.assignment_epoch >= epoch:
            bump |= self._initialized_assignment_pending(group)
        others = [m.subscribed for mid, m in group.members.items() if mid != member_id]
        subscribed_names = set(updated.subscribed).union(*others)
        metadata_hash = _metadata_hash(subscribed_names, topics)
        if metadata_hash != group.metadata_hash:
            bump = True
        if bump:
            epoch += 1
            group.epoch = epoch
            group.metadata_hash = metadata_hash
        group.members[member_id] = updated
        group.persisted = True
        self._groups[group_id] = group
        target_epoch, target = self._target(group, updated, now_ms, topics)
        if bump or not (updated.state == _MEMBER_STABLE
                        and updated.member_epoch == target_epoch):
            names = {meta.topic_id: name for name, meta in topics.items()}
            subscribed = set(updated.subscribed)
            filtered = {t: set(ps) for t, ps in target.items()
                        if names.get(t) in subscribed and ps}
            if target_epoch != updated.member_epoch:
                updated.previous_member_epoch = updated.member_epoch
                updated.member_epoch = target_epoch
                updated.state = _MEMBER_STABLE
                updated.assigned = filtered
            elif bump:
                updated.assigned = filtered
        updated.deadline_ms = now_ms + self.session_timeout_ms(group_id)
        send = member_epoch == 0 or subscribed_topic_names is not None or \
            updated.assigned != old_assigned
        return HeartbeatResult(
            member_id=member_id, member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group_id),
            assignment=_frozen(updated.assigned) if send else None,
            initialize=self._maybe_initialize(group, subscribed_names, topics, now_ms))

    def _target(self, group: _Group, member: _Member, now_ms: int,
                topics: Mapping[str, TopicMeta]) -> tuple[int, Partitions]:
        """Kafka's ``maybeUpdateTargetAssignment``: ``(target epoch, the member's target)``."""
        if group.assignment_epoch >= group.epoch:
            return group.assignment_epoch, group.target.get(member.member_id, {})
        found = self._group_config(group.group_id, "share.assignment.interval.ms") \
            if self._group_config else None
        interval = self.assignment_interval_ms() if found is None else found
        if group.assignment_timestamp_ms and interval and \
                now_ms < group.assignment_timestamp_ms + interval:
            return group.assignment_epoch, group.target.get(member.member_id, {})
        subscriptions = {mid: {topics[n].topic_id for n in m.subscribed if n in topics}
                         for mid, m in group.members.items()}
        assignable = {t: set(ps) for t, (_n, ps) in group.initialized.items()}
        group.target = {m: a for m, a in share_assignor.assign(
            subscriptions, group.target, assignable).items()}
        group.assignment_epoch = group.epoch
        group.assignment_timestamp_ms = now_ms
        return group.epoch, group.target.get(member.member_id, {})

    def _initialized_assignment_pending(self, group: _Group) -> bool:
        """Kafka's ``initializedAssignmentPending``: an initialized share-partition of a
        subscribed topic that the target assignment does not cover yet."""
        if not group.members or not group.initialized:
            return False
        names = {n for m in group.members.values() for n in m.subscribed}
        if not names:
            return False
        assigned: Partitions = {}
        for partitions in group.target.values():
            for t, ps in partitions.items():
                assigned.setdefault(t, set()).update(ps)
        return any(name in names and assigned.get(t) != ps
                   for t, (name, ps) in group.initialized.items())

    def _maybe_initialize(self, group: _Group, names: set[str],
                          topics: Mapping[str, TopicMeta], now_ms: int
                          ) -> InitializeRequest | None:
        """Kafka's ``maybeCreateInitializeShareGroupStateRequest``: the subscribed
        share-partitions neither initialized nor being initialized (recently), now marked
        initializing."""
        if not names:
            return None
        retry = self.config.initialize_retry_interval_ms
        known: dict[uuid.UUID, set[int]] = {t: set(ps) for t, (_n, ps) in
                                             group.initialized.items()}
        for t, (_n, ps, ts) in group.initializing.items():
            if now_ms - ts < retry:
                known.setdefault(t, set()).update(ps)
        wanted: dict[uuid.UUID, tuple[str, set[int]]] = {}
        for name in sorted(names):
            meta = topics.get(name)
            if meta is None:
                continue
            have = known.get(meta.topic_id, set())
            if not have or len(have) < meta.partitions:
                wanted[meta.topic_id] = (name, set(range(meta.partitions)) - have)
        if not wanted:
            return None
        already = set(group.initialized) | set(group.initializing)
        for t, (name, ps) in wanted.items():
            old = group.initializing.get(t)
            group.initializing[t] = (name, (old[1] if old else set()) | ps, now_ms)
            group.deleting.pop(t, None)
        group.has_state_metadata = True
        return InitializeRequest(group.group_id, group.epoch, {
            t: {p: 0 if t in already else -1 for p in ps} for t, (_n, ps) in wanted.items()})

    def initialized(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]]) -> None:
        """The persister initialized ``partitions``: Kafka's ``initializeShareGroupState``
        (initializing -> initialized)."""
        group = self._groups.get(group_id)
        if group is None or not partitions:
            return
        names = {meta.topic_id: name for name, meta in self._topics().items()}
        for t, ps in partitions.items():
            ps = set(ps)
            old = group.initialized.get(t)
            name = names.get(t, old[0] if old else "<UNKNOWN>")
            group.initialized[t] = (name, (old[1] if old else set()) | ps)
            pending = group.initializing.get(t)
            if pending is not None:
                left = pending[1] - ps
                if left:
                    group.initializing[t] = (pending[0], left, pending[2])
                else:
                    del group.initializing[t]
        group.has_state_metadata = True

    def uninitialized(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]]
                      ) -> None:
        """The persister failed to initialize ``partitions``: Kafka's
        ``uninitializeShareGroupState`` (dropped from initializing; a later heartbeat asks
        again)."""
        group = self._groups.get(group_id)
        if group is None:
            return
        for t, ps in partitions.items():
            pending = group.initializing.get(t)
            if pending is not None:
                left = pending[1] - set(ps)
                if left:
                    group.initializing[t] = (pending[0], left, pending[2])
                else:
                    del group.initializing[t]

    def forget_deleted_topics(self, live_topic_ids: set[uuid.UUID]) -> list[str]:
        """Kafka's ``maybeCleanupShareGroupState``: topics no longer in the cluster leave
        every group's initializing / initialized / deleting topics; the groups changed."""
        changed = []
        for group in self._groups.values():
            gone = [t for t in (*group.initializing, *group.initialized, *group.deleting)
                    if t not in live_topic_ids]
            if gone:
                for t in gone:
                    group.initializing.pop(t, None)
                    group.initialized.pop(t, None)
                    group.deleting.pop(t, None)
                changed.append(group.group_id)
        return changed

    def forget_partitions(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> None:
        """The share state of these topics was deleted (DeleteShareGroupOffsets): they are
        neither initialized nor initializing any more."""
        group = self._groups.get(group_id)
        if group is None:
            return
        for t in topic_ids:
            group.initialized.pop(t, None)
            group.initializing.pop(t, None)
            group.deleting.pop(t, None)

    # --- leave, fence, timers, delete -------------------------------------------------------

    def _leave(self, group_id: str, member_id: str) -> HeartbeatResult:
        group = self._groups.get(group_id)
        if group is None:
            raise ShareGroupError(codes.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if member_id not in group.members:
            raise ShareGroupError(codes.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a "
                                  f"member of group {group_id}.")
        self._fence(group, member_id)
        return HeartbeatResult(member_id=member_id, member_epoch=-1, heartbeat_interval_ms=0,
                               assignment=None)

    def _fence(self, group: _Group, member_id: str) -> None:
        """Kafka's ``shareGroupFenceMember``: the member's records go, the group epoch is
        bumped (and the assignment epoch with it when it was the last member)."""
        last = len(group.members) == 1
        del group.members[member_id]
        group.target.pop(member_id, None)
        group.metadata_hash = _metadata_hash(
            {n for m in group.members.values() for n in m.subscribed}, self._topics())
        group.epoch += 1
        if last:
            group.assignment_epoch = group.epoch
            group.assignment_timestamp_ms = 0

    def poll(self, now_ms: int) -> list[tuple[str, str]]:
        """Fence the members whose session expired; ``[(group id, member id)]`` fenced."""
        fenced = []
        for group in list(self._groups.values()):
            for member in list(group.members.values()):
                if member.deadline_ms <= now_ms:
                    self._fence(group, member.member_id)
                    fenced.append((group.group_id, member.member_id))
        return fenced

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups: NON_EMPTY_GROUP while members are in, else the group is dropped."""
        group = self._groups.get(group_id)
        if group is None:
            return codes.GROUP_ID_NOT_FOUND
        if group.members:
            return codes.NON_EMPTY_GROUP
        del self._groups[group_id]
        return codes.NONE

    def unload(self, group_ids: Iterable[str]) -> None:
        """Forget these groups (their ``__consumer_offsets`` partition moved away)."""
        for group_id in group_ids:
            self._groups.pop(group_id, None)

    # --- share-group offsets (AlterShareGroupOffsets, DeleteShareGroupOffsets) ---------------

    def alter_offsets(self, group_id: str,
                      topics: list[tuple[str, list[tuple[int, int]]]], now_ms: int
                      ) -> tuple[list[tuple[str, uuid.UUID | None, list[tuple[int, int]]]],
                                 InitializeRequest]:
        """Kafka's ``alterShareGroupOffsets``: the group (made when new) must be empty
        (NON_EMPTY_GROUP); each topic's known partitions become initializing at the given
        start offsets. ``([(topic, topic id or None, [(partition, error)])], what to
        initialize)``."""
        topic_meta = self._topics()
        group = self._groups.get(group_id)
        if group is None:
            group = _Group(group_id, epoch=1, assignment_epoch=1)
        if group.members:
            raise ShareGroupError(codes.NON_EMPTY_GROUP, codes.message(codes.NON_EMPTY_GROUP))
        rows: list[tuple[str, uuid.UUID | None, list[tuple[int, int]]]] = []
        offsets: dict[uuid.UUID, dict[int, int]] = {}
        for name, partitions in topics:
            meta = topic_meta.get(name)
            if meta is None:
                rows.append((name, None, [(p, codes.UNKNOWN_TOPIC_OR_PARTITION)
                                          for p, _o in partitions]))
                continue
            answers = []
            for p, offset in partitions:
                if p < meta.partitions:
                    answers.append((p, codes.NONE))
                    offsets.setdefault(meta.topic_id, {})[p] = offset
                else:
                    answers.append((p, codes.UNKNOWN_TOPIC_OR_PARTITION))
            rows.append((name, meta.topic_id, answers))
            known = {p for p, _o in partitions if p < meta.partitions}
            old = group.initializing.get(meta.topic_id)
            group.initializing[meta.topic_id] = (name, (old[1] if old else set()) | known,
                                                 now_ms)
            group.deleting.pop(meta.topic_id, None)
        group.has_state_metadata = True
        self._groups[group_id] = group
        return rows, InitializeRequest(group_id, group.epoch, offsets)

    def initiate_delete_offsets(self, group_id: str, topic_names: list[str]
                                ) -> tuple[list[tuple[str, int, str]],
                                           dict[uuid.UUID, tuple[str, frozenset[int]]]]:
        """Kafka's ``initiateDeleteShareGroupOffsets``: the share group must exist
        (GROUP_ID_NOT_FOUND) and be empty (NON_EMPTY_GROUP); its initialized topics named
        become deleting. ``([(topic, error, message)] for topics not deleted, {topic id:
        (name, partitions)} whose state to delete)``."""
        group = self._groups.get(group_id)
        if group is None:
            raise ShareGroupError(codes.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if group.members:
            raise ShareGroupError(codes.NON_EMPTY_GROUP, codes.message(codes.NON_EMPTY_GROUP))
        errors: list[tuple[str, int, str]] = []
        to_delete: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        if not group.has_state_metadata:
            return errors, to_delete
        topic_meta = self._topics()
        for name in topic_names:
            meta = topic_meta.get(name)
            if meta is None:
                errors.append((name, codes.UNKNOWN_TOPIC_OR_PARTITION,
                               codes.message(codes.UNKNOWN_TOPIC_OR_PARTITION)))
            elif meta.topic_id in group.initialized:
                _n, ps = group.initialized.pop(meta.topic_id)
                to_delete[meta.topic_id] = (name, frozenset(ps))
                group.deleting[meta.topic_id] = name
            elif meta.topic_id in group.deleting:
                to_delete[meta.topic_id] = (name, frozenset(range(meta.partitions)))
            else:
                errors.append((name, codes.UNKNOWN_TOPIC_OR_PARTITION,
                               "There is no offset information to delete."))
        return errors, to_delete

    def complete_delete_offsets(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> None:
        """Kafka's ``completeDeleteShareGroupOffsets``: these topics' state is deleted."""
        group = self._groups.get(group_id)
        if group is None:
            return
        for t in topic_ids:
            group.deleting.pop(t, None)

    # --- records ------------------------------------------------------------------------------

    def records(self, group_id: str) -> dict[bytes, bytes | None]:
        """The group as Kafka's records ``{key: value}`` (empty: no such group)."""
        group = self._groups.get(group_id)
        if group is None or not group.persisted:
            return {}
        out: dict[bytes, bytes | None] = {}

        def put(record_type: int, value: dict[str, Any], member_id: str | None = None) -> None:
            out[rec.encode_key(record_type, group_id, member_id)] = \
                rec.encode_value(record_type, value)
        put(rec.GROUP_METADATA, dict(epoch=group.epoch, metadata_hash=group.metadata_hash))
        put(rec.TARGET_ASSIGNMENT_METADATA, dict(
            assignment_epoch=group.assignment_epoch,
            assignment_timestamp_ms=group.assignment_timestamp_ms))
        for m in group.members.values():
            put(rec.MEMBER_METADATA, dict(rack_id=m.rack_id, client_id=m.client_id,
                                          client_host=m.client_host,
                                          subscribed_topic_names=m.subscribed), m.member_id)
            put(rec.TARGET_ASSIGNMENT_MEMBER, dict(partitions={
                t: tuple(ps) for t, ps in group.target.get(m.member_id, {}).items()}),
                m.member_id)
            put(rec.CURRENT_MEMBER_ASSIGNMENT, dict(
                member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                state=m.state, partitions={t: tuple(ps) for t, ps in m.assigned.items()}),
                m.member_id)
        if group.has_state_metadata:
            put(rec.STATE_PARTITION_METADATA, dict(
                initializing={t: (n, tuple(ps)) for t, (n, ps, _ts) in
                              group.initializing.items()},
                initialized={t: (n, tuple(ps)) for t, (n, ps) in group.initialized.items()},
                deleting=dict(group.deleting)))
        return out

    def load_records(self, records: Iterable[rec.ShareRecord], now_ms: int) -> list[str]:
        """Replay records (in log order) into groups, as Kafka's ``replay``; the ids of the
        groups loaded. Members get a full session from ``now_ms``."""
        state: dict[str, dict[tuple[int, str | None], dict[str, Any] | None]] = {}
        for r in records:
            state.setdefault(r.group_id, {})[(r.record_type, r.member_id)] = r.value
        loaded = []
        for group_id, entries in state.items():
            meta = entries.get((rec.GROUP_METADATA, None))
            spm = entries.get((rec.STATE_PARTITION_METADATA, None))
            if meta is None and spm is None:
                self._groups.pop(group_id, None)
                continue
            # Kafka's replay of either record makes the group (AlterShareGroupOffsets on a
            # new group writes only the state-partition metadata).
            group = _Group(group_id, epoch=1, assignment_epoch=1)
            if meta is not None:
                group.epoch, group.metadata_hash = meta["epoch"], meta["metadata_hash"]
            target_meta = entries.get((rec.TARGET_ASSIGNMENT_METADATA, None))
            if target_meta is not None:
                group.assignment_epoch = target_meta["assignment_epoch"]
                group.assignment_timestamp_ms = target_meta.get("assignment_timestamp_ms", 0)
            if spm is not None:
                group.has_state_metadata = True
                # As Kafka's replay: initializing partitions are stamped with the load time,
                # so a heartbeat asks for them again after the retry interval.
                group.initializing = {t: (n, set(ps), now_ms)
                                      for t, (n, ps) in spm["initializing"].items()}
                group.initialized = {t: (n, set(ps)) for t, (n, ps) in
                                     spm["initialized"].items()}
                group.deleting = dict(spm["deleting"])
            session = self.session_timeout_ms(group_id)
            for (record_type, member_id), value in entries.items():
                if member_id is None or value is None or record_type != rec.MEMBER_METADATA:
                    continue
                member = _Member(member_id, rack_id=value["rack_id"],
                                 client_id=value["client_id"],
                                 client_host=value["client_host"],
                                 subscribed=tuple(value["subscribed_topic_names"]),
                                 deadline_ms=now_ms + session)
                current = entries.get((rec.CURRENT_MEMBER_ASSIGNMENT, member_id))
                if current is not None:
                    member.member_epoch = current["member_epoch"]
                    member.previous_member_epoch = current["previous_member_epoch"]
                    member.state = current["state"]
                    member.assigned = {t: set(ps) for t, ps in current["partitions"].items()}
                group.members[member_id] = member
                target = entries.get((rec.TARGET_ASSIGNMENT_MEMBER, member_id))
                if target is not None:
                    group.target[member_id] = {t: set(ps)
                                               for t, ps in target["partitions"].items()}
            self._groups[group_id] = group
            loaded.append(group_id)
        return loaded
