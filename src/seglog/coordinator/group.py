"""The group coordinator of one consumer group, embedded: Kafka's classic group protocol.

Members join and leave, each change starts a new *generation* and recomputes the assignment
at once with the group's assignor (``range`` or ``roundrobin``,
:mod:`seglog.coordinator.assignors`). Inside a group each partition belongs to exactly one
member, so 10 members on 6 partitions leave 4 idle. A member that lost partitions in a
rebalance it has not seen yet cannot commit (:class:`~seglog.errors.CommitFailedError`, as
Kafka's ILLEGAL_GENERATION), so it never overwrites their new owner's progress. Committed
offsets live in :class:`~seglog.coordinator.offsets.OffsetsManager`.

Members talk to it through the store's broker interface (:mod:`seglog.broker_api`: join,
sync, leave, offset commit). Not here (yet): session timeouts and heartbeats (members live
as long as their Consumer object) and group metadata records in ``__consumer_offsets``.

No rebalance window, by choice: a join or leave completes the rebalance at once, as Kafka's
classic coordinator does at ``group.initial.rebalance.delay.ms=0`` with every member already
rejoined (the setting Kafka's own test harness uses). Kafka waits (the initial delay, the
join phase of a stable group) because remote members learn of a rebalance only at their next
heartbeat and must each send a JoinGroup; in-process members share this object, see the new
generation at their next poll and need no round trip, so a window would only make the
embedded API slower. That config and the join phase apply to the wire broker's classic
groups (:mod:`seglog.coordinator.classic_group`).

Broker-side state: it reaches storage only through
:class:`~seglog.coordinator.internal_topics.InternalTopics` and imports no client.
"""

from __future__ import annotations

import threading
import uuid
from typing import Iterable, Mapping, NamedTuple

from .assignors import get_assignor
from .internal_topics import InternalTopics
from .offsets import OffsetsManager
from ..arguments import check_commit_offset, check_group_id
from ..errors import CommitFailedError, IllegalStateError, SeglogError
from ..types import MemberAssignment, OffsetAndMetadata, TopicPartition, as_topic_partition

__all__ = ["ConsumerGroup", "GroupMember"]


class GroupMember(NamedTuple):
    """One member of a group: its id, client id, subscribed topics, assignor name and static
    instance id (Kafka's ``group.instance.id``, or None)."""

    member_id: str
    client_id: str
    topics: frozenset
    assignor: str
    group_instance_id: str | None


class ConsumerGroup:
    """The coordinator of one consumer group, embedded in a Store (Kafka's classic group
    protocol, with rebalances that complete at once).

    ``group_id``; ``generation_id`` (0 before the first member joins; +1 at every rebalance);
    ``protocol`` (the assignor's name, fixed while the group has members); ``leader_id``;
    ``state`` (``"Empty"`` or ``"Stable"``). :meth:`members`, :meth:`assignment`,
    :meth:`committed`. Members join and leave through the store's broker interface
    (``join_group``, ``sync_group``, ``leave_group``), which calls :meth:`join`,
    :meth:`member_assignment`, :meth:`leave`. Get it with
    :meth:`Store.group <seglog.store.Store.group>`. Thread-safe (the metadata lock of
    ``topics``).

    ``ConsumerGroup(topics, offsets, group_id)``: :class:`InternalTopics` for partition counts
    and logs, the :class:`OffsetsManager` of the store. Raises
    :class:`~seglog.errors.InvalidGroupIdError` (a ValueError) for an empty group id.
    """

    def __init__(self, topics: InternalTopics, offsets: OffsetsManager, group_id: str):
        check_group_id(group_id)
        self._topics = topics
        self._offsets = offsets
        self.group_id = group_id
        self.generation_id = 0
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self._members: dict[str, GroupMember] = {}
        self._assignment: dict[str, list[TopicPartition]] = {}
        # The generation since which each partition's current owner has owned it without a
        # break: a member that missed rebalances keeps its position only if it still is.
        self._owned_since: dict[TopicPartition, int] = {}
        self._partition_counts: dict[str, int] = {}
        self._changed = threading.Condition(topics.lock)

    @property
    def state(self) -> str:
        """``"Empty"`` without members, else ``"Stable"`` (rebalances complete at once)."""
        return "Stable" if self._members else "Empty"

    def members(self) -> list[str]:
        """Member ids, in the order the assignor sees them."""
        with self._topics.lock:
            return sorted(self._members)

    def assignment(self) -> dict[str, list[TopicPartition]]:
        """``{member_id: [TopicPartition, ...]}`` of the current generation (idle members
        have an empty list)."""
        with self._topics.lock:
            return {m: list(tps) for m, tps in self._assignment.items()}

    def committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset of ``tp``, or None."""
        om = self._offsets.committed(self.group_id, as_topic_partition(tp))
        return None if om is None else om.offset

    def committed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Every committed offset of the group."""
        return self._offsets.all_committed(self.group_id)

    def lag(self) -> dict[TopicPartition, int]:
        """``{tp: records behind}`` for every partition the group has a committed offset in:
        the high watermark minus the committed offset (what ``kafka-consumer-groups
        --describe`` shows as LAG)."""
        out = {}
        for tp, om in sorted(self.committed_offsets().items()):
            try:
                out[tp] = max(0, self._topics.partition_log(tp).high_watermark - om.offset)
            except SeglogError:
                continue  # the topic is gone
        return out

    # --- administration (Kafka's AdminClient group calls) ---------------------------------------

    def alter_offsets(self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata]) -> None:
        """Set committed offsets from outside the group (Kafka's ``alterConsumerGroupOffsets``):
        allowed only while the group has no members, else :class:`CommitFailedError`.
        Raises ``ValueError`` for a negative offset, UnknownTopicOrPartitionError."""
        parsed = {}
        for tp, value in offsets.items():
            tp = as_topic_partition(tp)
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            check_commit_offset(tp, om)
            self._topics.partition_log(tp)
            parsed[tp] = om
        self.commit_offsets(None, -1, parsed)

    def delete_offsets(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Delete committed offsets (tombstones; Kafka's ``deleteConsumerGroupOffsets``). Refused
        with :class:`IllegalStateError` for a partition of a topic a member subscribes to
        (Kafka: GROUP_SUBSCRIBED_TO_TOPIC)."""
        with self._topics.lock:
            tps = [as_topic_partition(tp) for tp in partitions]
            subscribed = {t for m in self._members.values() for t in m.topics}
            busy = sorted(tp for tp in tps if tp.topic in subscribed)
            if busy:
                raise IllegalStateError(f"group {self.group_id!r} is subscribed to the topics of "
                                        f"{busy} (GROUP_SUBSCRIBED_TO_TOPIC)")
            self._offsets.commit(self.group_id, {tp: None for tp in tps})

    # --- membership (Kafka's JoinGroup, SyncGroup, LeaveGroup) --------------------------------

    def join(self, client_id: str, topics: frozenset, assignor: str,
             group_instance_id: str | None) -> str:
        """A new member subscribed to ``topics`` with ``assignor``: returns its member id; the
        group rebalances at once. Raises IllegalStateError when the group runs another
        assignor (INCONSISTENT_GROUP_PROTOCOL) or ``group_instance_id`` is already a member
        (FENCED_INSTANCE_ID), :class:`~seglog.errors.UnknownAssignorError` for an assignor
        it does not know."""
        with self._topics.lock:
            if self._members and assignor != self.protocol:
                raise IllegalStateError(
                    f"group {self.group_id!r} uses the {self.protocol!r} assignor; a member "
                    f"asking for {assignor!r} cannot join (Kafka: INCONSISTENT_GROUP_PROTOCOL)")
            if group_instance_id is not None and any(
                    m.group_instance_id == group_instance_id for m in self._members.values()):
                raise IllegalStateError(f"group instance id {group_instance_id!r} is already a "
                                        f"member of {self.group_id!r} (Kafka: FENCED_INSTANCE_ID)")
            member_id = f"{client_id}-{uuid.uuid4()}"
            self._members[member_id] = GroupMember(member_id, client_id, topics, assignor,
                                               group_instance_id)
            self.protocol = assignor
            if self.leader_id is None:
                self.leader_id = member_id
            self._rebalance()
            return member_id

    def update_subscription(self, member_id: str, topics: frozenset) -> None:
        """Member ``member_id`` now subscribes to ``topics`` (Kafka's rejoin): the group
        rebalances if they changed. KeyError for an unknown member."""
        with self._topics.lock:
            member = self._members[member_id]
            if member.topics != topics:
                self._members[member_id] = member._replace(topics=topics)
                self._rebalance()

    def leave(self, member_id: str) -> None:
        """Member ``member_id`` leaves (a no-op for an unknown one); the group rebalances."""
        with self._topics.lock:
            if self._members.pop(member_id, None) is None:
                return
            if self.leader_id == member_id:
                self.leader_id = next(iter(self._members), None)
            if not self._members:
                self.protocol = None
            self._rebalance()

    def _rebalance(self) -> None:
        counts = self._topics.partition_counts()
        subscribed = {t for m in self._members.values() for t in m.topics}
        self._partition_counts = {t: counts[t] for t in subscribed if t in counts}
        self.generation_id += 1
        if self._members:
            protocol = self.protocol
            assert protocol is not None  # set by the first member's join
            assignor = get_assignor(protocol)
            raw = assignor.assign({m: sorted(v.topics) for m, v in self._members.items()},
                                  self._partition_counts,
                                  group_instance_ids={m: v.group_instance_id
                                                      for m, v in self._members.items()})
            assignment = {m: [TopicPartition(t, p) for t, p in tps] for m, tps in raw.items()}
        else:
            assignment = {}
        previous = {tp: m for m, tps in self._assignment.items() for tp in tps}
        self._owned_since = {
            tp: (self._owned_since.get(tp, self.generation_id) if previous.get(tp) == m
                 else self.generation_id)
            for m, tps in assignment.items() for tp in tps}
        self._assignment = assignment
        self._changed.notify_all()

    def on_metadata_change(self) -> None:
        """A topic was created or deleted: rebalance if a subscribed topic's partitions
        changed (Kafka's metadata-triggered rebalance)."""
        with self._topics.lock:
            if not self._members:
                return
            counts = self._topics.partition_counts()
            subscribed = {t for m in self._members.values() for t in m.topics}
            if {t: counts[t] for t in subscribed if t in counts} != self._partition_counts:
                self._rebalance()

    def member_assignment(self, member_id: str) -> MemberAssignment | None:
        """The current :class:`~seglog.types.MemberAssignment` of ``member_id`` (Kafka's
        SyncGroup answer), or None when it is not a member."""
        with self._topics.lock:
            if member_id not in self._members:
                return None
            tps = list(self._assignment.get(member_id, ()))
            return MemberAssignment(self.generation_id, tps,
                                    {tp: self._owned_since[tp] for tp in tps})

    def wait_for_change(self, generation_id: int, timeout_s: float) -> None:
        """Block up to ``timeout_s`` seconds unless the generation is no longer
        ``generation_id`` (a member with nothing to read waits for a rebalance here)."""
        with self._topics.lock:
            if self.generation_id == generation_id and timeout_s > 0:
                self._changed.wait(timeout_s)

    # --- commits --------------------------------------------------------------------------------

    def commit_offsets(self, member_id: str | None, generation_id: int,
                       offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Kafka's OffsetCommit of checked ``offsets``: from member ``member_id`` at
        ``generation_id``, or (``member_id`` None) from outside the group, allowed only while
        it has no members. Raises CommitFailedError (ILLEGAL_GENERATION /
        UNKNOWN_MEMBER_ID), ReadOnlyError."""
        with self._topics.lock:
            if member_id is None:
                if self._members:
                    raise CommitFailedError(
                        f"group {self.group_id!r} has active members; a consumer that is not "
                        "a member (manual assign) cannot commit for it (Kafka: UNKNOWN_MEMBER_ID)")
            elif member_id not in self._members or generation_id != self.generation_id:
                raise CommitFailedError(
                    f"commit for group {self.group_id!r} refused: generation {generation_id} "
                    f"is not the current one ({self.generation_id}) (ILLEGAL_GENERATION)")
            self._offsets.commit(self.group_id, offsets)

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, generation={self.generation_id}, "
                f"members={len(self._members)}, protocol={self.protocol!r})")


