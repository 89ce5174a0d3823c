"""Committed consumer offsets: the group coordinator's store, kept in ``__consumer_offsets``.

Commits (Kafka's ``OffsetCommit``) are one RecordBatch appended to the group's partition of
``__consumer_offsets`` (``abs(java hashCode(group)) % partitions``), one record per partition
with Kafka's key (version 1: group, topic, partition) and value (version 3: offset, leader
epoch, metadata, commit timestamp); :mod:`seglog.coordinator.offsets_schema` has the schema.
On open the store replays that topic, last value per key winning and tombstones deleting, so
commits survive a restart. A commit is in the page cache when :meth:`OffsetsManager.commit`
returns (as a Kafka commit with acks=all is in its replicas' page caches); ``Store.flush`` or a
clean close makes it durable.

Broker-side state: it reaches storage only through
:class:`~seglog.coordinator.internal_topics.InternalTopics` and imports no client.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Mapping

from . import consumer_group_records, offsets_schema, share_group_records, streams_group_records
from .internal_topics import InternalTopics, TopicLogs
from ..errors import CorruptRecordError, InvalidRecordError, ReadOnlyError
from ..format import CONTROL_TYPE_COMMIT, REASON_BAD_RECORDS
from ..storage.transactions import checked_batches
from ..types import OffsetAndMetadata, TopicPartition

__all__ = ["OffsetsManager"]

logger = logging.getLogger("seglog.coordinator.offsets")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class OffsetsManager:
    """Committed offsets of every group: an in-memory map backed by ``__consumer_offsets``.

    Loaded once when the store opens (if the topic exists); every commit appends one batch and
    then updates the map. Made empty by the store, which calls :meth:`reload` once the topic
    may hold commits. Thread-safe: the metadata lock of ``topics``.

    Transactional commits (a producer's ``send_offsets_to_transaction``, Kafka's
    TxnOffsetCommit) are appended by the producer as transactional batches with its producer
    id and epoch, and held *pending* per ``(offsets partition, producer id)``: they are not
    committed offsets yet. The COMMIT marker the transaction coordinator writes to that
    partition applies them, the ABORT marker drops them (:meth:`complete_transaction`; the
    loader does the same when it meets the markers on replay, and commits still pending at
    the end of the log stay pending). As Kafka's group coordinator, a pending commit applied
    on COMMIT replaces the current committed offset only if it was appended after it.
    """

    def __init__(self, topics: InternalTopics):
        self._topics = topics
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # (group, tp) -> offset of the batch that set the committed value (Kafka's
        # CommitRecordMetadataAndOffset.appendedBatchOffset).
        self._appended_at: dict[tuple[str, TopicPartition], int] = {}
        # (offsets partition, producer id) -> [(group, tp, value or None, batch offset)]
        self._pending: dict[tuple[int, int], list] = {}
        #: ``{partition: why}``: the ``__consumer_offsets`` partitions whose last load
        #: failed (their groups have no offsets here), with the partition, offset and reason.
        self.load_failures: dict[int, str] = {}

    def reload(self) -> None:
        """Forget everything and replay ``__consumer_offsets`` if it exists (on open, and
        when a read-only store follows its writer). A partition that cannot be loaded is
        left out and named in :attr:`load_failures` (see :meth:`_load`)."""
        with self._topics.lock:
            self._offsets = {}
            self._appended_at = {}
            self._pending = {}
            topic = self._topics.existing_topic(offsets_schema.OFFSETS_TOPIC)
            if topic is not None:
                self._load(topic)

    def load_partition(self, partition: int) -> None:
        """Forget the offsets of the groups of ``__consumer_offsets`` partition ``partition``
        and replay that partition alone (a cluster member that became its leader: Kafka's
        ``GroupMetadataManager.loadGroupsAndOffsets``; its log holds what the previous
        leader wrote). Nothing happens when the topic does not exist. Raises
        :class:`~seglog.errors.CorruptRecordError` naming the partition, offset and reason
        as :meth:`_load` says (the partition is then left empty and named in
        :attr:`load_failures` until a load of it succeeds)."""
        with self._topics.lock:
            self.unload_partition(partition)
            topic = self._topics.existing_topic(offsets_schema.OFFSETS_TOPIC)
            if topic is None or not 0 <= partition < topic.partitions:
                return
            self._load_or_fail(partition, topic)

    def _load_or_fail(self, partition: int, topic: TopicLogs) -> None:
        """Replay ``partition`` (its groups known nothing yet); on failure leave it empty,
        name it in :attr:`load_failures` and raise CorruptRecordError saying where."""
        at = [-1]  # the offset being loaded, for the message
        where = f"{offsets_schema.OFFSETS_TOPIC}-{partition}"
        try:
            # PartitionOfflineError (a CorruptRecordError) when its files failed to load: the
            # partition's groups are not served, as for records that do not load.
            partition_log = topic.log(partition)
            where = f"{where} ({partition_log.dir_path})"
            at[0] = partition_log.start_offset
            self._load_partition(partition, partition_log, at)
            self.load_failures.pop(partition, None)
            return
        except (CorruptRecordError, InvalidRecordError) as exc:
            why = (str(exc), getattr(exc, "reason", "") or REASON_BAD_RECORDS,
                   getattr(exc, "position", -1))
        # Raised outside the except: the loader's exception (whose frames hold views of the
        # log's pages, which would keep a truncation of the partition refused) is gone.
        self.unload_partition(partition)
        failure = CorruptRecordError(
            f"{where} cannot be loaded at offset {at[0]}: {why[0]}", reason=why[1],
            position=why[2])
        self.load_failures[partition] = str(failure)
        raise failure

    def unload_partition(self, partition: int) -> None:
        """Forget the committed and pending offsets of every group of ``__consumer_offsets``
        partition ``partition`` (a cluster member that stopped leading it: Kafka's
        ``GroupMetadataManager.removeGroupsForPartition``). The log is not touched."""
        with self._topics.lock:
            topic = self._topics.existing_topic(offsets_schema.OFFSETS_TOPIC)
            if topic is None:
                return
            count = topic.partitions
            for group_id in [g for g in self._offsets
                             if offsets_schema.offsets_partition_for_group(g, count) == partition]:
                for tp in list(self._offsets[group_id]):
                    self._appended_at.pop((group_id, tp), None)
                del self._offsets[group_id]
            for key in [k for k in self._pending if k[0] == partition]:
                del self._pending[key]
            self.load_failures.pop(partition, None)  # not ours to serve any more

    def _load(self, topic: TopicLogs) -> None:
        """Replay every partition of ``__consumer_offsets``.

        The bytes are untrusted: every batch's CRC32C is checked and base offsets must
        increase; a key or value that does not parse fails the partition, except keys of
        record types this module does not know, which are skipped (Kafka's loader skips
        them with a warning). A partition that fails is left empty and named in
        :attr:`load_failures` (partition, offset and reason) and logged; the others load.
        A corrupt batch skipped would silently roll a group's committed offset back, so
        its groups are not served at all (Kafka's coordinator does not serve a partition
        whose load failed either: the broker's coordinator partitions answer
        NOT_COORDINATOR for it)."""
        self.load_failures = {}
        for partition in range(topic.partitions):
            try:
                self._load_or_fail(partition, topic)
            except CorruptRecordError as exc:
                # The text only: the exception's frames hold views of the log's pages,
                # which must not outlive the load (a later truncation would be refused).
                logger.error("not serving the groups of %s-%d: %s",
                             offsets_schema.OFFSETS_TOPIC, partition, str(exc))

    def _load_partition(self, partition: int, log, at: list) -> None:
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
            if key.version in consumer_group_records.KEY_TYPES:
                return None  # a consumer group's record: the groups module loads those
            if key.version in streams_group_records.RECORD_TYPES:
                return None  # a streams group's record: the streams group coordinator's
            if key.version in share_group_records.RECORD_TYPES:
                return None  # a share group's record: the share group coordinator's
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
        with self._topics.lock:
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
        topic = self._topics.internal_topic(offsets_schema.OFFSETS_TOPIC)
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
        with self._topics.lock:
            pending = self._pending.setdefault((partition, producer_id), [])
            if any(entry[3] == appended_at for entry in pending):
                return
            pending.extend((group_id, tp, om._replace(commit_timestamp_ms=commit_timestamp_ms),
                            appended_at) for tp, om in offsets.items())

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transactional commit of ``group_id`` for ``tp`` waits for its marker."""
        with self._topics.lock:
            return any(entry[0] == group_id and entry[1] == tp
                       for entries in self._pending.values() for entry in entries)

    def groups(self) -> list[str]:
        """Ids of the groups with committed offsets, sorted."""
        with self._topics.lock:
            return sorted(self._offsets)

    def check_loaded(self, group_id: str) -> None:
        """CorruptRecordError (the load's own message: partition, offset, reason) when the
        ``__consumer_offsets`` partition of ``group_id`` failed to load: its offsets are
        unknown, and answering None or committing over them would roll them back
        silently."""
        if not self.load_failures:
            return
        with self._topics.lock:
            topic = self._topics.existing_topic(offsets_schema.OFFSETS_TOPIC)
            if topic is None:
                return
            why = self.load_failures.get(
                offsets_schema.offsets_partition_for_group(group_id, topic.partitions))
        if why is not None:
            raise CorruptRecordError(why, reason=REASON_BAD_RECORDS)

    def committed(self, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        """The committed offset of ``group_id`` for ``tp``, or None; CorruptRecordError
        when the group's partition could not be loaded (:meth:`check_loaded`)."""
        with self._topics.lock:
            self.check_loaded(group_id)
            return self._offsets.get(group_id, {}).get(tp)

    def all_committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """Every committed offset of ``group_id`` (a copy); CorruptRecordError as
        :meth:`committed`."""
        with self._topics.lock:
            self.check_loaded(group_id)
            return dict(self._offsets.get(group_id, {}))

    def commit(self, group_id: str,
               offsets: Mapping[TopicPartition, OffsetAndMetadata | None]) -> int:
        """Append one batch with a record per partition (None: a tombstone), then apply it;
        returns the offset after the batch (what a replicated commit waits for the high
        watermark to reach; -1 when ``offsets`` is empty and nothing was written). Caller
        holds the metadata lock and has validated the offsets. Raises ReadOnlyError on a
        read-only store, CorruptRecordError when the group's partition could not be loaded
        (:meth:`check_loaded`) and what the append raises."""
        if not offsets:
            return -1
        self.check_loaded(group_id)
        topics = self._topics
        if topics.read_only:
            raise ReadOnlyError(f"store {topics.path} is read-only: offsets cannot be committed")
        topic = topics.internal_topic(offsets_schema.OFFSETS_TOPIC)
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
        first, last = topic.log(partition).append_batch(values, keys=keys,
                                                         timestamps_ms=timestamps)
        topics.notify_appended()
        for tp, om in offsets.items():
            self._apply(group_id, tp, None if om is None else om._replace(
                commit_timestamp_ms=now), first)
        return last + 1

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


