"""Consumer groups inside one process: a coordinator per group, consumers that poll, and
committed offsets kept as records in ``__consumer_offsets``.

The model is Kafka's (the article's "offsets and consumer groups"): a consumer's *position* in
a partition is the offset of the next record it will read, one integer it owns; a *committed*
offset is that position written down for its group, so that whoever owns the partition next
starts there. Inside a group each partition belongs to exactly one member, so 10 members on
6 partitions leave 4 idle; a second group reads the same records with positions of its own.

:class:`ConsumerGroup` is the group coordinator of Kafka's classic protocol, embedded in the
:class:`~seglog.store.Store`: members join and leave, each change starts a new *generation*
and recomputes the assignment at once with the group's assignor (``range`` or ``roundrobin``,
:mod:`seglog.coordinator.assignors`). A :class:`Consumer` adopts its new assignment at its next
:meth:`~Consumer.poll` (or :meth:`~Consumer.assignment`, :meth:`~Consumer.commit`): partitions
it owned throughout keep their positions; partitions it gains start at the group's committed
offset, or at ``auto_offset_reset`` when there is none. A member that lost partitions in a
rebalance it has not seen yet cannot commit (:class:`CommitFailedError`, as Kafka's
ILLEGAL_GENERATION), so it never overwrites their new owner's progress. The network broker
that comes later coordinates across processes; this one coordinates threads of one process.

Commits (Kafka's ``OffsetCommit``) are one RecordBatch appended to the group's partition of
``__consumer_offsets`` (``abs(java hashCode(group)) % partitions``), one record per partition
with Kafka's key (version 1: group, topic, partition) and value (version 3: offset, leader
epoch, metadata, commit timestamp). On open the store replays that topic, last value per key
winning and tombstones deleting, so commits survive a restart. A commit is in the page cache
when :meth:`Consumer.commit` returns (as a Kafka commit with acks=all is in its replicas' page
caches); :meth:`Store.flush <seglog.store.Store.flush>` or a clean close makes it durable.

:meth:`Consumer.close` leaves the group *without committing*, as a crashed consumer would:
its partitions move to the remaining members, which resume from the last commit. Committing
after processing is therefore at-least-once (a crash repeats the records since the last
commit) and committing before processing is at-most-once (a crash loses the records claimed
but not processed); ``tests/test_article_examples.py`` replays the article's example.

Not here (yet): session timeouts and heartbeats (members live as long as their Consumer
object), group-metadata records (key version 2) in ``__consumer_offsets``, rebalance
listeners (a rebalance completes at once, so there is no revocation window to commit in)
and automatic commits.

Thread safety: the coordinator and the offsets are shared and locked (the store's metadata
lock); a :class:`Consumer` is used by one thread at a time, as Kafka's is.
"""

from __future__ import annotations

import itertools
import threading
import time
import warnings
import uuid
from typing import Any, Iterable, Mapping, NamedTuple

from ..coordinator import offsets_schema
from ..storage.transactions import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    checked_batches,
    filter_batches,
)
from ..coordinator.assignors import get_assignor
from ..storage.config import INT32_MAX, check_int
from ..errors import (
    CommitFailedError,
    IllegalStateError,
    LogClosedError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    CorruptRecordError,
    InvalidRecordError,
    ReadOnlyError,
    SeglogError,
)
from ..format import REASON_BAD_RECORDS
from ..types import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["CommitFailedError", "Consumer", "ConsumerGroup", "ConsumerRecord",
           "OffsetAndMetadata", "TopicPartition"]

#: Kafka's consumer defaults: ``max.poll.records`` 500, ``max.partition.fetch.bytes`` 1 MiB,
#: ``auto.offset.reset`` latest, ``partition.assignment.strategy`` range first.
MAX_POLL_RECORDS_DEFAULT = 500
MAX_PARTITION_FETCH_BYTES_DEFAULT = 1024 * 1024
AUTO_OFFSET_RESET_DEFAULT = "latest"
AUTO_OFFSET_RESETS = ("earliest", "latest", "none")
ASSIGNMENT_STRATEGY_DEFAULT = "range"
#: Longest wait of one poll round when several partitions are assigned and no Producer of this
#: store signals: appends made straight on a Log, or by another process, are seen within this.
_WAIT_SLICE_MS = 20
#: Largest metadata string of a commit (Kafka's ``offset.metadata.max.bytes``).
OFFSET_METADATA_BYTES_MAX = 4096

_client_ids = itertools.count(1)




def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _as_tp(tp: Any) -> TopicPartition:
    if isinstance(tp, TopicPartition):
        return tp
    try:
        topic, partition = tp
    except (TypeError, ValueError):
        raise TypeError(f"expected a (topic, partition) pair, got {tp!r}") from None
    return TopicPartition(topic, partition)


def _check_offset(tp: TopicPartition, om: OffsetAndMetadata) -> None:
    # ValueError for every bad offset, TypeError included: commit() has always said so.
    try:
        check_int(f"offset to commit for {tp}", om.offset, minimum=0)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    if len(om.metadata.encode("utf-8")) > OFFSET_METADATA_BYTES_MAX:
        raise ValueError(f"metadata for {tp} is longer than {OFFSET_METADATA_BYTES_MAX} bytes "
                         "(OFFSET_METADATA_TOO_LARGE)")


# --- committed offsets: the __consumer_offsets topic -------------------------------------------


class _OffsetsManager:
    """Committed offsets of every group: an in-memory map backed by ``__consumer_offsets``.

    Loaded once when the store opens (if the topic exists); every commit appends one batch and
    then updates the map. Locked by the store's metadata lock.

    Transactional commits (a producer's ``send_offsets_to_transaction``, Kafka's
    TxnOffsetCommit) are appended by the producer as transactional batches with its producer
    id and epoch, and held *pending* per ``(offsets partition, producer id)``: they are not
    committed offsets yet. The COMMIT marker the transaction coordinator writes to that
    partition applies them, the ABORT marker drops them (:meth:`complete_transaction`; the
    loader does the same when it meets the markers on replay, and commits still pending at
    the end of the log stay pending). As Kafka's group coordinator, a pending commit applied
    on COMMIT replaces the current committed offset only if it was appended after it.
    """

    def __init__(self, store):
        self._store = store
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # (group, tp) -> offset of the batch that set the committed value (Kafka's
        # CommitRecordMetadataAndOffset.appendedBatchOffset).
        self._appended_at: dict[tuple[str, TopicPartition], int] = {}
        # (offsets partition, producer id) -> [(group, tp, value or None, batch offset)]
        self._pending: dict[tuple[int, int], list] = {}
        with store._lock:
            if offsets_schema.OFFSETS_TOPIC in store._topics:
                self._load(store._topics[offsets_schema.OFFSETS_TOPIC])

    def _load(self, topic) -> None:
        """Replay every partition of ``__consumer_offsets``.

        The bytes are untrusted: every batch's CRC32C is checked and base offsets must
        increase; a key or value that does not parse raises, except keys of record types
        this module does not know, which are skipped (Kafka's loader skips them with a
        warning). Anything else raises :class:`~seglog.errors.CorruptRecordError` naming the
        partition and offset: a corrupt batch skipped would silently roll a group's committed
        offset back, so the store does not open (Kafka's coordinator does not serve a
        partition whose load failed either)."""
        for partition in range(topic.partitions):
            log = topic.log(partition)
            at = [log.start_offset]  # the offset being loaded, for the message
            try:
                self._load_partition(partition, log, at)
            except (CorruptRecordError, InvalidRecordError) as exc:
                raise CorruptRecordError(
                    f"{offsets_schema.OFFSETS_TOPIC}-{partition} ({log.dir_path}) cannot be "
                    f"loaded at offset {at[0]}: {exc}", reason=getattr(exc, "reason", "") or REASON_BAD_RECORDS,
                    position=getattr(exc, "position", -1)) from exc

    def _load_partition(self, partition: int, log, at: list) -> None:
        from ..format import CONTROL_TYPE_COMMIT
        offset, end = log.start_offset, log.end_offset
        previous_next = -1
        while offset < end:
            result = log.read(offset, max_offset=end)
            if result.next_offset <= offset:
                break
            # CRC32C (control batches included) and increasing base offsets, across reads.
            batches = checked_batches(log.backend.iter_batches(result.buffer, check_offsets=True),
                                      previous_next_offset=previous_next,
                                      where=result.log_path, base_position=result.position)
            for batch in batches:
                at[0] = batch.base_offset
                if batch.last_offset < offset:
                    continue
                if batch.is_control:
                    if batch.record_count and batch.producer_id >= 0:
                        self.complete_transaction(
                            partition, batch.producer_id,
                            commit=batch.control_type() == CONTROL_TYPE_COMMIT,
                            marker_offset=batch.base_offset)
                    continue
                entries = []
                for record in batch.records(check_crcs=False):  # checked above
                    entry = self._parse(
                        record.key, record.value,
                        f"{offsets_schema.OFFSETS_TOPIC}-{partition} offset {record.offset}")
                    if entry is not None:
                        entries.append(entry)
                if batch.is_transactional:
                    self._pending.setdefault((partition, batch.producer_id), []).extend(
                        (group, tp, om, batch.base_offset) for group, tp, om in entries)
                else:
                    for group, tp, om in entries:
                        self._apply(group, tp, om, batch.base_offset)
            previous_next = offset = result.next_offset

    @staticmethod
    def _parse(key_bytes, value_bytes, where: str = ""):
        """``(group, tp, OffsetAndMetadata or None)`` of an offset-commit record, else None,
        as Kafka's ``GroupMetadataManager`` loads: a null key is an error
        (CorruptRecordError; Kafka's ``require(record.hasKey)``), a key of an unknown
        version is skipped with a warning, group metadata is not ours to apply."""
        if key_bytes is None:
            raise CorruptRecordError("Group metadata/offset entry key should not be null",
                                     reason=REASON_BAD_RECORDS)
        key = offsets_schema.decode_key(key_bytes)
        if isinstance(key, offsets_schema.UnknownKey):
            warnings.warn(f"seglog: {where}: unknown message key with version {key.version} "
                          "while loading offsets and group metadata; ignoring it",
                          RuntimeWarning, stacklevel=2)
            return None
        if not isinstance(key, offsets_schema.OffsetCommitKey):
            return None  # group metadata: not ours to apply
        value = offsets_schema.decode_offset_commit_value(value_bytes)
        om = None if value is None else OffsetAndMetadata(
            value.offset, value.metadata, value.leader_epoch, value.commit_timestamp_ms)
        return key.group, TopicPartition(key.topic, key.partition), om

    def _apply(self, group_id: str, tp: TopicPartition, om: OffsetAndMetadata | None,
               appended_at: int) -> None:
        group = self._offsets.setdefault(group_id, {})
        if om is None:
            group.pop(tp, None)
            self._appended_at.pop((group_id, tp), None)
        else:
            group[tp] = om
            self._appended_at[(group_id, tp)] = appended_at
        if not group:
            del self._offsets[group_id]

    def complete_transaction(self, partition: int, producer_id: int, *, commit: bool,
                             marker_offset: int) -> None:
        """A COMMIT (``commit``) or ABORT marker of ``producer_id`` was written at
        ``marker_offset`` of offsets partition ``partition``: apply or drop its pending
        transactional commits there (Kafka's ``GroupMetadata.completePendingTxnOffsetCommit``)."""
        with self._store._lock:
            pending = self._pending.pop((partition, producer_id), ())
            if not commit:
                return
            for group_id, tp, om, appended_at in pending:
                current = self._appended_at.get((group_id, tp))
                if current is None or current < appended_at:
                    self._apply(group_id, tp, om, appended_at)

    def transactional_records(self, group_id: str,
                              offsets: Mapping[TopicPartition, OffsetAndMetadata]):
        """``(offsets partition, keys, values, timestamps_ms)`` of a transactional commit of
        ``offsets`` for ``group_id``, for the producer to append in its transaction."""
        topic = self._store._offsets_topic()
        partition = offsets_schema.offsets_partition_for_group(group_id, topic.partitions)
        now = _now_ms()
        keys, values = [], []
        for tp, om in offsets.items():
            key, value = offsets_schema.offset_commit_record(
                group_id, tp.topic, tp.partition, om.offset, commit_timestamp_ms=now,
                leader_epoch=om.leader_epoch, metadata=om.metadata)
            keys.append(key)
            values.append(value)
        return partition, keys, values, [now] * len(keys)

    def add_pending(self, partition: int, producer_id: int, group_id: str,
                    offsets: Mapping[TopicPartition, OffsetAndMetadata], appended_at: int,
                    commit_timestamp_ms: int) -> None:
        """Hold a transactional commit the producer appended at ``appended_at`` until its
        transaction's marker (a retried append of the same batch adds nothing twice)."""
        with self._store._lock:
            pending = self._pending.setdefault((partition, producer_id), [])
            if any(entry[3] == appended_at for entry in pending):
                return
            pending.extend((group_id, tp, om._replace(commit_timestamp_ms=commit_timestamp_ms),
                            appended_at) for tp, om in offsets.items())

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transactional commit of ``group_id`` for ``tp`` waits for its marker."""
        with self._store._lock:
            return any(entry[0] == group_id and entry[1] == tp
                       for entries in self._pending.values() for entry in entries)

    def groups(self) -> list[str]:
        with self._store._lock:
            return sorted(self._offsets)

    def committed(self, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        with self._store._lock:
            return self._offsets.get(group_id, {}).get(tp)

    def all_committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        with self._store._lock:
            return dict(self._offsets.get(group_id, {}))

    def commit(self, group_id: str,
               offsets: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
        """Append one batch with a record per partition (None: a tombstone), then apply it.
        Caller holds the store lock and has validated the offsets."""
        if not offsets:
            return
        store = self._store
        if store.read_only:
            raise ReadOnlyError(f"store {store.path} is read-only: offsets cannot be committed")
        topic = store._offsets_topic()
        partition = offsets_schema.offsets_partition_for_group(group_id, topic.partitions)
        keys, values, timestamps = [], [], []
        now = _now_ms()
        for tp, om in offsets.items():
            if om is None:
                key, value = offsets_schema.offset_tombstone(group_id, tp.topic, tp.partition)
            else:
                key, value = offsets_schema.offset_commit_record(
                    group_id, tp.topic, tp.partition, om.offset, commit_timestamp_ms=now,
                    leader_epoch=om.leader_epoch, metadata=om.metadata)
            keys.append(key)
            values.append(value)
            timestamps.append(now)
        first, _last = topic.log(partition).append_batch(values, keys=keys,
                                                          timestamps_ms=timestamps)
        store._notify_data()
        for tp, om in offsets.items():
            self._apply(group_id, tp, None if om is None else om._replace(
                commit_timestamp_ms=now), first)

    def expire(self, now_ms: int, retention_ms: int, active_groups: set[str]) -> dict:
        """Tombstone the commits older than ``retention_ms`` of groups without members
        (Kafka's offsets expiration); returns ``{group: [TopicPartition, ...]}`` removed."""
        removed = {}
        for group_id, offsets in list(self._offsets.items()):
            if group_id in active_groups:
                continue
            doomed = {tp: None for tp, om in offsets.items()
                      if om.commit_timestamp_ms + retention_ms <= now_ms}
            if doomed:
                self.commit(group_id, doomed)
                removed[group_id] = sorted(doomed)
        return removed

    def delete_topic_offsets(self, topic_name: str) -> None:
        """Tombstone every group's committed offsets of ``topic_name`` (Kafka's coordinator
        does this when a topic is deleted)."""
        for group_id, offsets in list(self._offsets.items()):
            doomed = {tp: None for tp in offsets if tp.topic == topic_name}
            if doomed:
                self.commit(group_id, doomed)


# --- the coordinator -----------------------------------------------------------------------------


class _Member(NamedTuple):
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
    :meth:`committed`. Members join and leave through :class:`Consumer`. Get it with
    :meth:`Store.group <seglog.store.Store.group>`. Thread-safe (the store's lock).
    """

    def __init__(self, store, group_id: str):
        if not isinstance(group_id, str) or not group_id:
            raise ValueError(f"group_id must be a non-empty str, got {group_id!r}")
        self._store = store
        self.group_id = group_id
        self.generation_id = 0
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self._members: dict[str, _Member] = {}
        self._assignment: dict[str, list[TopicPartition]] = {}
        # The generation since which each partition's current owner has owned it without a
        # break: a member that missed rebalances keeps its position only if it still is.
        self._owned_since: dict[TopicPartition, int] = {}
        self._partition_counts: dict[str, int] = {}
        self._changed = threading.Condition(store._lock)

    @property
    def state(self) -> str:
        """``"Empty"`` without members, else ``"Stable"`` (rebalances complete at once)."""
        return "Stable" if self._members else "Empty"

    def members(self) -> list[str]:
        """Member ids, in the order the assignor sees them."""
        with self._store._lock:
            return sorted(self._members)

    def assignment(self) -> dict[str, list[TopicPartition]]:
        """``{member_id: [TopicPartition, ...]}`` of the current generation (idle members
        have an empty list)."""
        with self._store._lock:
            return {m: list(tps) for m, tps in self._assignment.items()}

    def committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset of ``tp``, or None."""
        om = self._store._offsets_manager().committed(self.group_id, _as_tp(tp))
        return None if om is None else om.offset

    def committed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Every committed offset of the group."""
        return self._store._offsets_manager().all_committed(self.group_id)

    def lag(self) -> dict[TopicPartition, int]:
        """``{tp: records behind}`` for every partition the group has a committed offset in:
        the high watermark minus the committed offset (what ``kafka-consumer-groups
        --describe`` shows as LAG)."""
        out = {}
        for tp, om in sorted(self.committed_offsets().items()):
            try:
                out[tp] = max(0, self._store.log(tp).high_watermark - om.offset)
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
            tp = _as_tp(tp)
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            _check_offset(tp, om)
            self._store.log(tp)
            parsed[tp] = om
        self._commit(None, -1, parsed)

    def delete_offsets(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Delete committed offsets (tombstones; Kafka's ``deleteConsumerGroupOffsets``). Refused
        with :class:`IllegalStateError` for a partition of a topic a member subscribes to
        (Kafka: GROUP_SUBSCRIBED_TO_TOPIC)."""
        with self._store._lock:
            tps = [_as_tp(tp) for tp in partitions]
            subscribed = {t for m in self._members.values() for t in m.topics}
            busy = sorted(tp for tp in tps if tp.topic in subscribed)
            if busy:
                raise IllegalStateError(f"group {self.group_id!r} is subscribed to the topics of "
                                        f"{busy} (GROUP_SUBSCRIBED_TO_TOPIC)")
            self._store._offsets_manager().commit(self.group_id, {tp: None for tp in tps})

    # --- membership (called by Consumer) ------------------------------------------------------

    def _join(self, client_id: str, topics: frozenset, assignor: str,
              group_instance_id: str | None) -> str:
        with self._store._lock:
            if self._members and assignor != self.protocol:
                raise IllegalStateError(
                    f"group {self.group_id!r} uses the {self.protocol!r} assignor; a member "
                    f"asking for {assignor!r} cannot join (Kafka: INCONSISTENT_GROUP_PROTOCOL)")
            if group_instance_id is not None and any(
                    m.group_instance_id == group_instance_id for m in self._members.values()):
                raise IllegalStateError(f"group instance id {group_instance_id!r} is already a "
                                        f"member of {self.group_id!r} (Kafka: FENCED_INSTANCE_ID)")
            member_id = f"{client_id}-{uuid.uuid4()}"
            self._members[member_id] = _Member(member_id, client_id, topics, assignor,
                                               group_instance_id)
            self.protocol = assignor
            if self.leader_id is None:
                self.leader_id = member_id
            self._rebalance()
            return member_id

    def _update_subscription(self, member_id: str, topics: frozenset) -> None:
        with self._store._lock:
            member = self._members[member_id]
            if member.topics != topics:
                self._members[member_id] = member._replace(topics=topics)
                self._rebalance()

    def _leave(self, member_id: str) -> None:
        with self._store._lock:
            if self._members.pop(member_id, None) is None:
                return
            if self.leader_id == member_id:
                self.leader_id = next(iter(self._members), None)
            if not self._members:
                self.protocol = None
            self._rebalance()

    def _rebalance(self) -> None:
        counts = self._store._partition_counts()
        subscribed = {t for m in self._members.values() for t in m.topics}
        self._partition_counts = {t: counts[t] for t in subscribed if t in counts}
        self.generation_id += 1
        if self._members:
            assignor = get_assignor(self.protocol)
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

    def _on_metadata_change(self) -> None:
        """A topic was created or deleted: rebalance if a subscribed topic's partitions
        changed (Kafka's metadata-triggered rebalance)."""
        with self._store._lock:
            if not self._members:
                return
            counts = self._store._partition_counts()
            subscribed = {t for m in self._members.values() for t in m.topics}
            if {t: counts[t] for t in subscribed if t in counts} != self._partition_counts:
                self._rebalance()

    def _member_assignment(self, member_id: str
                           ) -> tuple[int, list[TopicPartition], dict[TopicPartition, int]] | None:
        """``(generation, partitions, {tp: generation since which the member owns it})``."""
        with self._store._lock:
            if member_id not in self._members:
                return None
            tps = list(self._assignment.get(member_id, ()))
            return self.generation_id, tps, {tp: self._owned_since[tp] for tp in tps}

    def _wait_for_change(self, generation_id: int, timeout_s: float) -> None:
        with self._store._lock:
            if self.generation_id == generation_id and timeout_s > 0:
                self._changed.wait(timeout_s)

    # --- commits --------------------------------------------------------------------------------

    def _commit(self, member_id: str | None, generation_id: int,
                offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        with self._store._lock:
            if member_id is None:
                if self._members:
                    raise CommitFailedError(
                        f"group {self.group_id!r} has active members; a consumer that is not "
                        "a member (manual assign) cannot commit for it (Kafka: UNKNOWN_MEMBER_ID)")
            elif member_id not in self._members or generation_id != self.generation_id:
                raise CommitFailedError(
                    f"commit for group {self.group_id!r} refused: generation {generation_id} "
                    f"is not the current one ({self.generation_id}) (ILLEGAL_GENERATION)")
            self._store._offsets_manager().commit(self.group_id, offsets)

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, generation={self.generation_id}, "
                f"members={len(self._members)}, protocol={self.protocol!r})")


# --- the consumer --------------------------------------------------------------------------------


class _PartitionState:
    """A consumer's state for one assigned partition: its position and decoded records of
    the last read not yet returned (Kafka's CompletedFetch)."""

    __slots__ = ("position", "buffered", "buffered_index", "buffered_next_offset")

    def __init__(self) -> None:
        self.position: int | None = None
        self.buffered: list = []  # decoded records of the last read, in order
        self.buffered_index = 0  # buffered[buffered_index:] are not handed out yet
        self.buffered_next_offset = -1  # offset after the read the buffer came from

    def clear(self) -> None:
        """Forget the buffered records (after a seek)."""
        self.buffered = []
        self.buffered_index = 0


class Consumer:
    """Reads records from a :class:`~seglog.store.Store`, alone or as a group member.

    ``Consumer(store, group_id=None, *, auto_offset_reset="latest",
    partition_assignment_strategy="range", client_id=None, group_instance_id=None,
    max_poll_records=500, max_partition_fetch_bytes=1048576)``; usually made by
    :meth:`Store.consumer <seglog.store.Store.consumer>`.

    * ``group_id``: the group whose committed offsets it uses and, after :meth:`subscribe`,
      joins. None: no group (only :meth:`assign`; no commits).
    * ``auto_offset_reset``: where to start in a partition with no committed offset, or
      whose committed offset is out of the log's range: ``"earliest"`` (the log start
      offset), ``"latest"`` (the high watermark; Kafka's default) or ``"none"``
      (:class:`NoOffsetForPartitionError` / :class:`OffsetOutOfRangeError`).
    * ``partition_assignment_strategy``: ``"range"`` or ``"roundrobin"``.
    * ``isolation_level``: ``"read_uncommitted"`` (Kafka's default: every data record) or
      ``"read_committed"`` (stop at the last stable offset, leave out records of aborted
      transactions; "latest" and :meth:`end_offsets` mean the last stable offset; a
      partition whose group offset a transaction is committing is not started until that
      transaction ends, as KIP-447's stable offset fetch).
    * ``check_crcs``: verify the CRC32C of every batch before decoding its records (Kafka's
      ``check.crcs``, default True); a corrupt batch makes :meth:`poll` /
      :meth:`poll_columns` raise :class:`~seglog.errors.CorruptRecordError` without moving
      the position past it (as Kafka's consumer, :meth:`poll` first hands out the records
      of the same fetch before it, and raises at the next poll). Batches' base offsets are
      checked to increase either way.
    * ``max_poll_records`` and ``max_partition_fetch_bytes``: ints >= 1 (TypeError for
      non-integers, ValueError out of range, as every numeric argument of this class).

    Not thread-safe: use each Consumer from one thread at a time (Kafka's rule).
    """

    def __init__(self, store, group_id: str | None = None, *,
                 auto_offset_reset: str = AUTO_OFFSET_RESET_DEFAULT,
                 partition_assignment_strategy: str = ASSIGNMENT_STRATEGY_DEFAULT,
                 client_id: str | None = None, group_instance_id: str | None = None,
                 max_poll_records: int = MAX_POLL_RECORDS_DEFAULT,
                 max_partition_fetch_bytes: int = MAX_PARTITION_FETCH_BYTES_DEFAULT,
                 isolation_level: str = READ_UNCOMMITTED, check_crcs: bool = True):
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}, got "
                             f"{isolation_level!r}")
        if auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise ValueError(f"auto_offset_reset must be one of {AUTO_OFFSET_RESETS}, got "
                             f"{auto_offset_reset!r}")
        get_assignor(partition_assignment_strategy)  # KeyError for an unknown one
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise ValueError(f"group_id must be a non-empty str or None, got {group_id!r}")
        max_poll_records = check_int("max_poll_records", max_poll_records, minimum=1)
        max_partition_fetch_bytes = check_int("max_partition_fetch_bytes",
                                              max_partition_fetch_bytes, minimum=1,
                                              maximum=INT32_MAX)
        self._store = store
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.partition_assignment_strategy = partition_assignment_strategy
        self.client_id = client_id or f"consumer-{group_id or 'none'}-{next(_client_ids)}"
        self.group_instance_id = group_instance_id
        self.max_poll_records = max_poll_records
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = isolation_level
        self.check_crcs = bool(check_crcs)
        self._committed_only = isolation_level == READ_COMMITTED
        self._group = store.group(group_id) if group_id is not None else None
        self._member_id: str | None = None
        self._generation_id = -1
        self._subscription: frozenset | None = None
        self._manual = False
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._paused: set[TopicPartition] = set()
        self._next_fetch = 0  # rotates the partition a poll starts with (fairness)
        self._closed = False

    # --- subscription and assignment ------------------------------------------------------------

    @property
    def member_id(self) -> str | None:
        """The member id the group gave this consumer, or None when not a member."""
        return self._member_id

    @property
    def generation_id(self) -> int:
        """The group generation of the assignment this consumer holds (-1: none)."""
        return self._generation_id

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the group (or change this member's topics) for ``topics``; partitions come
        from the group's assignment, at the next poll. Raises ``ValueError`` without a
        group_id, :class:`IllegalStateError` after :meth:`assign` or :meth:`close`."""
        self._check_open()
        if isinstance(topics, str):
            raise TypeError("topics must be a collection of topic names, not a str")
        if self._group is None:
            raise ValueError("subscribe needs a group_id (Kafka: InvalidGroupIdException)")
        if self._manual:
            raise IllegalStateError("Subscription to topics, partitions and pattern are "
                                    "mutually exclusive (assign() was called)")
        topics = frozenset(topics)
        if not topics:
            self.unsubscribe()
            return
        self._subscription = topics
        if self._member_id is None:
            self._member_id = self._group._join(self.client_id, topics,
                                                self.partition_assignment_strategy,
                                                self.group_instance_id)
        else:
            self._group._update_subscription(self._member_id, topics)
        self._sync()

    def subscription(self) -> set[str]:
        """The subscribed topics (empty when not subscribed)."""
        return set(self._subscription or ())

    def unsubscribe(self) -> None:
        """Leave the group (without committing) and drop every partition, or clear a manual
        assignment."""
        if self._member_id is not None and self._group is not None:
            self._group._leave(self._member_id)
        self._member_id = None
        self._subscription = None
        self._manual = False
        self._generation_id = -1
        self._partitions.clear()
        self._paused.clear()

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Read exactly ``partitions`` (no group membership; commits are allowed only while
        the group has no members, as Kafka's standalone consumers). Positions of partitions
        kept are kept. Raises :class:`IllegalStateError` after :meth:`subscribe`,
        :class:`UnknownTopicOrPartitionError` for a partition that does not exist."""
        self._check_open()
        if self._subscription is not None:
            raise IllegalStateError("Subscription to topics, partitions and pattern are "
                                    "mutually exclusive (subscribe() was called)")
        tps = [_as_tp(tp) for tp in partitions]
        for tp in tps:
            self._store.log(tp)
        self._manual = bool(tps)
        self._partitions = {tp: self._partitions.get(tp) or _PartitionState() for tp in tps}
        self._paused &= set(tps)

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now (after adopting a pending rebalance)."""
        self._check_open()
        self._sync()
        return set(self._partitions)

    def _sync(self) -> set[TopicPartition]:
        """Adopt the group's current assignment if the generation moved; returns the
        partitions taken away."""
        if self._member_id is None or self._group is None:
            return set()
        current = self._group._member_assignment(self._member_id)
        if current is None:
            raise IllegalStateError(f"consumer {self.client_id} is no longer a member of "
                                    f"group {self.group_id!r}")
        generation_id, tps, owned_since = current
        if generation_id == self._generation_id:
            return set()
        # A partition kept its state only if this member owned it throughout: if it moved
        # away and back between two polls, another member may have read and committed it.
        kept = {tp for tp in tps if tp in self._partitions
                and owned_since[tp] <= self._generation_id}
        revoked = set(self._partitions) - kept
        self._partitions = {tp: self._partitions[tp] if tp in kept else _PartitionState()
                            for tp in tps}
        self._paused &= kept
        self._generation_id = generation_id
        return revoked

    # --- positions -------------------------------------------------------------------------------

    def _state(self, tp: Any) -> tuple[TopicPartition, _PartitionState]:
        tp = _as_tp(tp)
        state = self._partitions.get(tp)
        if state is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return tp, state

    def _readable_end(self, log) -> int:
        """Where reads stop: the high watermark, or the last stable offset (read_committed)."""
        return log.last_stable_offset if self._committed_only else log.high_watermark

    def _reset(self, tp: TopicPartition, log, *, out_of_range: int | None = None) -> int:
        if self.auto_offset_reset == "earliest":
            return log.start_offset
        if self.auto_offset_reset == "latest":
            return self._readable_end(log)
        if out_of_range is not None:
            raise OffsetOutOfRangeError(
                f"offset {out_of_range} of {tp} is out of range [{log.start_offset}, "
                f"{log.high_watermark}] and auto_offset_reset is 'none'")
        raise NoOffsetForPartitionError(
            f"Undefined offset with no reset policy for partition: {tp}")

    def _unstable_commit(self, tp: TopicPartition) -> bool:
        """read_committed members do not start a partition while a transaction holds an
        offset commit of their group for it (KIP-447's require_stable OffsetFetch, which
        answers UNSTABLE_OFFSET_COMMIT and makes the consumer retry): the committed offset
        is about to change, and starting from the old one would process records twice."""
        if not self._committed_only or self._group is None \
                or self._store._offsets is None:
            return False
        return self._store._offsets.has_pending(self.group_id, tp)

    def _initial_position(self, tp: TopicPartition) -> int:
        log = self._store.log(tp)
        committed = None
        if self._group is not None:
            committed = self._store._offsets_manager().committed(self.group_id, tp)
        if committed is None:
            return self._reset(tp, log)
        if not log.start_offset <= committed.offset <= log.end_offset:
            return self._reset(tp, log, out_of_range=committed.offset)
        return committed.offset

    def position(self, tp: tuple[str, int]) -> int:
        """The offset of the next record this consumer will read from ``tp`` (looked up from
        the committed offset or ``auto_offset_reset`` if not known yet). Raises
        :class:`IllegalStateError` for a partition not assigned, and what the reset raises."""
        self._check_open()
        self._sync()
        tp, state = self._state(tp)
        if state.position is None:
            state.position = self._initial_position(tp)
        return state.position

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Read ``tp`` from ``offset`` at the next poll (an offset out of the log's range is
        reset by ``auto_offset_reset`` when fetched). Raises :class:`IllegalStateError` for a
        partition not assigned, ``ValueError`` for a negative or out-of-int64 offset,
        ``TypeError`` for one that is not an int."""
        self._check_open()
        self._sync()
        offset = check_int("seek offset", offset, minimum=0)
        _tp, state = self._state(tp)
        state.position = offset
        state.clear()

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Seek ``partitions`` (default: all assigned) to their log start offsets."""
        self._seek_to(partitions, lambda log: log.start_offset)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Seek ``partitions`` (default: all assigned) to their high watermarks (last stable
        offsets for read_committed)."""
        self._seek_to(partitions, self._readable_end)

    def _seek_to(self, partitions, where) -> None:
        self._check_open()
        self._sync()
        tps = list(self._partitions) if partitions is None else [_as_tp(tp) for tp in partitions]
        for tp in tps:
            _tp, state = self._state(tp)
            state.position = where(self._store.log(tp))
            state.clear()

    def beginning_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        """``{tp: log start offset}`` of any partitions (assigned or not)."""
        return {tp: self._store.log(tp).start_offset for tp in map(_as_tp, partitions)}

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        """``{tp: high watermark}`` (last stable offset for read_committed) of any partitions:
        the position after the last readable record."""
        return {tp: self._readable_end(self._store.log(tp)) for tp in map(_as_tp, partitions)}

    def pause(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Stop returning records of ``partitions`` (assigned ones) until :meth:`resume`;
        their positions stay (Kafka's ``pause``, for back-pressure). A rebalance that takes a
        partition away forgets its pause."""
        self._check_open()
        self._sync()
        for tp in map(_as_tp, partitions):
            self._state(tp)  # IllegalStateError when not assigned
            self._paused.add(tp)

    def resume(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Return records of ``partitions`` again."""
        self._check_open()
        self._paused.difference_update(map(_as_tp, partitions))

    def paused(self) -> set[TopicPartition]:
        """The paused partitions."""
        return set(self._paused)

    # --- polling ---------------------------------------------------------------------------------

    def poll(self, max_records: int | None = None, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Up to ``max_records`` (default ``max_poll_records``) records from the assigned
        partitions, in offset order within each partition, starting at each position; the
        positions move past them. Waits up to ``timeout_ms`` for records when none are
        readable, on conditions rather than by sleeping: with one partition, the Log's own
        (``Log.wait_for_data``); with several, the store's append counter, which Producers
        signal (appends made straight on a Log or by another process are seen within 20 ms);
        an idle member wakes when a rebalance gives it partitions. Adopts a pending rebalance
        first.

        Raises :class:`NoOffsetForPartitionError` / :class:`OffsetOutOfRangeError` with
        ``auto_offset_reset="none"``, :class:`IllegalStateError` after :meth:`close`,
        :class:`~seglog.errors.CorruptRecordError` for a batch that fails its CRC32C (unless
        ``check_crcs=False``) or whose base offset does not increase; TypeError / ValueError
        for a non-integer ``max_records`` / ``timeout_ms`` or ``max_records < 1``.
        """
        self._check_open()
        if max_records is None:
            max_records = self.max_poll_records
        max_records = check_int("max_records", max_records, minimum=1)
        timeout_ms = check_int("timeout_ms", timeout_ms)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            self._sync()
            data_seq = self._store._data_seq
            records = self._fetch(max_records)
            remaining_s = deadline - time.monotonic()
            if records or remaining_s <= 0:
                return records
            self._wait(remaining_s, data_seq)

    def _fetchable(self) -> list[TopicPartition]:
        return [tp for tp in self._partitions if tp not in self._paused]

    def _fetch(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        tps = self._fetchable()
        if not tps:
            return out
        start = self._next_fetch % len(tps)
        self._next_fetch += 1
        for tp in tps[start:] + tps[:start]:
            if len(out) >= max_records:
                break
            self._fetch_partition(tp, self._partitions[tp], max_records - len(out), out)
        return out

    def _fetch_partition(self, tp: TopicPartition, state: _PartitionState, wanted: int,
                         out: list) -> None:
        log = self._store.log(tp)
        if log.read_only:
            log.refresh()
        if state.position is None:
            if self._unstable_commit(tp):
                return
            state.position = self._initial_position(tp)
        if not state.buffered:
            if state.position >= self._readable_end(log) and state.position <= log.end_offset:
                return
            try:
                result = log.read(state.position, self.max_partition_fetch_bytes,
                                  isolation=self.isolation_level)
            except OffsetOutOfRangeError:
                state.position = self._reset(tp, log, out_of_range=state.position)
                result = log.read(state.position, self.max_partition_fetch_bytes,
                                  isolation=self.isolation_level)
            records = []
            # Control batches never, aborted transactions' batches not for read_committed.
            # Every batch, control ones included, is checked before its header is used.
            batches = checked_batches(log.backend.iter_batches(result.buffer, check_offsets=True),
                                      check_crcs=self.check_crcs, where=result.log_path,
                                      base_position=result.position)
            next_offset = result.next_offset
            try:
                for batch in filter_batches(batches, result.aborted_transactions,
                                            isolation=self.isolation_level):
                    if batch.last_offset < state.position:
                        continue
                    records.extend(r for r in batch.records(check_crcs=self.check_crcs)
                                   if r.offset >= state.position)
            except CorruptRecordError:
                if not records:
                    raise  # the position stays before the corrupt batch
                # Kafka's consumer hands out the records before a corrupt batch first and
                # raises when the next fetch starts at it.
                next_offset = records[-1].offset + 1
            state.buffered, state.buffered_index = records, 0
            state.buffered_next_offset = next_offset
            if not records:
                # Only control batches or compacted-away offsets: step over them.
                state.position = max(state.position, result.next_offset)
                return
        # Hand out from the buffer by index: slicing off its head each poll would make
        # small max_records quadratic in the records of one read.
        start = state.buffered_index
        taken = state.buffered[start:start + wanted]
        state.buffered_index = start + len(taken)
        topic, partition = tp
        out.extend(ConsumerRecord(topic, partition, r.offset, r.timestamp_ms, r.key, r.value,
                                  r.headers) for r in taken)
        if state.buffered_index >= len(state.buffered):
            # The whole read consumed: continue after it (skips gaps and control batches).
            state.buffered = []
            state.buffered_index = 0
            state.position = state.buffered_next_offset
        else:
            state.position = taken[-1].offset + 1

    def poll_columns(self, max_records: int | None = None, timeout_ms: int = 0) -> dict:
        """Like :meth:`poll`, but as numpy columns with no per-record Python objects:
        ``{TopicPartition: Columns}`` (the Log's ``read_columns`` result: ``offsets``,
        ``timestamps_ms``, key/value positions and lengths into ``data``; ``columns.key(i)``
        and ``columns.value(i)`` give one record's bytes). At most ``max_records`` records in
        all; whole batches are decoded, one read per partition. Positions move past the
        records returned. Raises as :meth:`poll`."""
        self._check_open()
        if max_records is None:
            max_records = self.max_poll_records
        max_records = check_int("max_records", max_records, minimum=1)
        timeout_ms = check_int("timeout_ms", timeout_ms)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            self._sync()
            data_seq = self._store._data_seq
            out = {}
            wanted = max_records
            tps = self._fetchable()
            start = self._next_fetch % len(tps) if tps else 0
            self._next_fetch += 1
            for tp in tps[start:] + tps[:start]:
                if wanted <= 0:
                    break
                columns = self._fetch_columns(tp, self._partitions[tp], wanted)
                if columns is not None:
                    out[tp] = columns
                    wanted -= len(columns)
            remaining_s = deadline - time.monotonic()
            if out or remaining_s <= 0:
                return out
            self._wait(remaining_s, data_seq)

    def _fetch_columns(self, tp: TopicPartition, state: _PartitionState, wanted: int):
        log = self._store.log(tp)
        if log.read_only:
            log.refresh()
        if state.position is None:
            if self._unstable_commit(tp):
                return None
            state.position = self._initial_position(tp)
        state.clear()  # records poll() decoded are re-read as columns from the position
        if log.start_offset <= state.position and state.position >= self._readable_end(log):
            return None
        try:
            columns = log.read_columns(state.position, wanted,
                                       max_bytes=self.max_partition_fetch_bytes,
                                       isolation=self.isolation_level,
                                       check_crcs=self.check_crcs)
        except OffsetOutOfRangeError:
            state.position = self._reset(tp, log, out_of_range=state.position)
            columns = log.read_columns(state.position, wanted,
                                       max_bytes=self.max_partition_fetch_bytes,
                                       isolation=self.isolation_level,
                                       check_crcs=self.check_crcs)
        if not len(columns):
            # Nothing readable at or after the position in the batches read (compacted away,
            # control or aborted batches): step over them.
            result = log.read(state.position, self.max_partition_fetch_bytes,
                              isolation=self.isolation_level)
            state.position = max(state.position, result.next_offset)
            return None
        state.position = int(columns.offsets[-1]) + 1
        return columns

    def _wait(self, remaining_s: float, data_seq: int) -> None:
        """Block until a record may be readable, the group rebalances, or ``remaining_s``.

        ``data_seq`` is the store's append counter read before the fetch that found nothing,
        so an append in between is never missed."""
        waiting = []
        unstable = False
        for tp in self._fetchable():
            state = self._partitions[tp]
            if state.position is None and self._unstable_commit(tp):
                unstable = True  # waits for a transaction's marker, which Producers signal
                continue
            if state.position is None or state.buffered:
                return  # something to look up or hand out: go round again
            waiting.append((self._store.log(tp), state.position))
        if unstable:
            self._store._wait_for_data(data_seq, min(remaining_s, _WAIT_SLICE_MS / 1000))
            return
        if not waiting:
            if self._group is not None and self._member_id is not None:
                self._group._wait_for_change(self._generation_id, remaining_s)
            else:
                self._store._wait_for_data(data_seq, remaining_s)
            return
        if len(waiting) == 1 and not waiting[0][0].read_only \
                and waiting[0][0].high_watermark <= waiting[0][1]:
            # (read_committed with records above the last stable offset waits below instead:
            # the Log's condition says "data", which is not yet readable.)
            log, position = waiting[0]
            log.wait_for_data(position, max(1, int(remaining_s * 1000)))
            return
        # Several partitions: a Log is waited on one at a time, so wait on the store's append
        # counter, which Producers of this store bump after every batch. Appends made straight
        # on a Log, or by another process (read-only followers), are seen at the next slice.
        self._store._wait_for_data(data_seq, min(remaining_s, _WAIT_SLICE_MS / 1000))

    # --- commits ---------------------------------------------------------------------------------

    def commit(self, offsets: Mapping[tuple[str, int], int | tuple[int, str] | OffsetAndMetadata]
               | None = None) -> None:
        """Commit, synchronously, the positions of every assigned partition (default) or the
        given ``{tp: offset}`` (an offset is the *next* record to read; a value may also be
        ``(offset, metadata)`` or an :class:`OffsetAndMetadata`).

        Raises :class:`CommitFailedError` if the group rebalanced and took partitions from
        this consumer since its last poll (nothing is committed), ``ValueError`` for a
        negative offset or metadata over 4096 bytes, :class:`IllegalStateError` without a
        group_id or after close, :class:`ReadOnlyError` on a read-only store.
        """
        self._check_open()
        if self._group is None:
            raise IllegalStateError("commit needs a group_id (Kafka: InvalidGroupIdException)")
        revoked = self._sync()
        if revoked:
            raise CommitFailedError(
                f"Commit cannot be completed since the group {self.group_id!r} has rebalanced "
                f"and assigned {sorted(revoked)} to other members")
        if offsets is None:
            to_commit = {tp: OffsetAndMetadata(state.position)
                         for tp, state in self._partitions.items() if state.position is not None}
        else:
            to_commit = {}
            for tp, value in offsets.items():
                tp = _as_tp(tp)
                if isinstance(value, OffsetAndMetadata):
                    om = value
                elif isinstance(value, tuple):
                    om = OffsetAndMetadata(value[0], value[1])
                else:
                    om = OffsetAndMetadata(value)
                _check_offset(tp, om)
                self._store.topic(tp.topic).log(tp.partition)  # UnknownTopicOrPartitionError
                to_commit[tp] = om
        generation = self._generation_id if self._member_id is not None else -1
        self._group._commit(self._member_id, generation, to_commit)

    def committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset of ``tp`` (any partition), or None."""
        self._check_open()
        if self._group is None:
            return None
        return self._group.committed(tp)

    # --- lifecycle -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        if self._store.closed:
            raise LogClosedError(f"store {self._store.path} is closed")

    def close(self) -> None:
        """Leave the group **without committing** (as a crash would): the group rebalances
        and the partitions' next owners resume from the last commit. Idempotent."""
        if self._closed:
            return
        if self._member_id is not None and self._group is not None:
            self._group._leave(self._member_id)
        self._member_id = None
        self._partitions = {}
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Consumer({self.client_id!r}, group={self.group_id!r}, "
                f"partitions={len(self._partitions)})")

