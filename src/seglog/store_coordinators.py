"""The coordinators of one :class:`~seglog.store.Store`, wired to its partitions.

A :class:`StoreCoordinators` owns the broker side that keeps its state in Kafka's internal
topics: the committed offsets (:class:`~seglog.coordinator.offsets.OffsetsManager`, in
``__consumer_offsets``), the embedded group coordinators
(:class:`~seglog.coordinator.group.ConsumerGroup`) and the transaction coordinator
(:class:`~seglog.coordinator.transaction.TransactionCoordinator`, in
``__transaction_state``, made on first use), with the producer-id blocks the Store hands in.
Each coordinator gets only :class:`InternalTopicsView`, the narrow
:class:`~seglog.coordinator.internal_topics.InternalTopics` view of the partitions
(:class:`~seglog.log_manager.LogManager`), never the Store or the manager itself.

Layers: this module knows the coordinators and the log manager; the log manager knows neither
it nor the coordinators; the Store wires both and is the only one that knows this module.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from .arguments import check_group_id
from .coordinator import offsets_schema
from .coordinator.group import ConsumerGroup
from .coordinator.offsets import OffsetsManager
from .coordinator.offsets_schema import OFFSETS_TOPIC
from .coordinator.producer_ids import ProducerIdManager
from .coordinator.share_coordinator import ShareCoordinator, ShareCoordinatorConfig
from .coordinator.share_state_records import SHARE_STATE_TOPIC
from .coordinator.transaction import TransactionCoordinator
from .coordinator.txn_schema import TRANSACTION_STATE_TOPIC
from .errors import CorruptRecordError, IllegalStateError, InvalidTopicError
from .log_manager import LogManager, Topic
from .storage.config import LogConfig, check_int, checked_now_ms
from .types import TopicPartition

logger = logging.getLogger("seglog.store_coordinators")

__all__ = ["INTERNAL_TOPIC_CONFIGS", "OFFSETS_TOPIC_CONFIG", "SHARE_STATE_TOPIC_CONFIG",
           "TRANSACTION_STATE_TOPIC_CONFIG", "InternalTopicsView", "StoreCoordinators"]

#: Configs of Kafka's ``__consumer_offsets`` (``offsets.topic.segment.bytes`` and the
#: ``cleanup.policy=compact`` the group coordinator sets).
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                        "compression.type": "producer"}
#: Configs of Kafka's ``__transaction_state`` (``transaction.state.log.segment.bytes``,
#: compacted, uncompressed as ``TransactionLog`` enforces).
TRANSACTION_STATE_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                                  "compression.type": "uncompressed"}
#: Configs of Kafka 4.4's ``__share_group_state``
#: (``ShareCoordinatorService.shareGroupStateTopicConfigs``): not compacted but kept forever
#: (``retention.ms=-1``), the share coordinator deleting the records its later snapshots
#: made redundant; ``share.coordinator.state.topic.segment.bytes``; ``min.insync.replicas``
#: is ``share.coordinator.state.topic.min.isr`` in a cluster.
SHARE_STATE_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1",
                            "segment.bytes": "104857600", "compression.type": "producer"}
#: The internal topics the store creates itself, with their configs.
INTERNAL_TOPIC_CONFIGS = {OFFSETS_TOPIC: OFFSETS_TOPIC_CONFIG,
                          TRANSACTION_STATE_TOPIC: TRANSACTION_STATE_TOPIC_CONFIG,
                          SHARE_STATE_TOPIC: SHARE_STATE_TOPIC_CONFIG}


class InternalTopicsView:
    """The :class:`~seglog.coordinator.internal_topics.InternalTopics` the coordinators get:
    the metadata lock, the internal topics (created on first use), partition Logs and counts,
    and the append signal; nothing else of the Store. Thread-safe as the log manager is."""

    def __init__(self, coordinators: "StoreCoordinators", logs: LogManager,
                 notify_appended: Callable[[], None]):
        self._coordinators = coordinators
        self._logs = logs
        self._notify_appended = notify_appended
        self.path = logs.path
        self.read_only = logs.read_only
        #: A cluster member's Store: its transaction coordinator completes only the
        #: partitions it leads (seglog.coordinator.transaction.complete_pending).
        self.replicated = logs.replicated

    @property
    def lock(self) -> threading.RLock:
        """The metadata lock (re-entrant), the log manager's."""
        return self._logs.lock

    def existing_topic(self, name: str) -> Topic | None:
        """Topic ``name`` if it exists now (nothing is created), else None."""
        return self._logs.existing_topic(name)

    def internal_topic(self, name: str) -> Topic:
        """Internal topic ``name``, created on first use
        (:meth:`StoreCoordinators.internal_topic`)."""
        return self._coordinators.internal_topic(name)

    def partition_log(self, tp: TopicPartition) -> Any:
        """The Log of ``tp``; UnknownTopicOrPartitionError if it does not exist."""
        return self._logs.topic(tp[0]).log(tp[1])

    def partition_counts(self) -> dict[str, int]:
        """``{topic: partition count}`` of every topic now."""
        return self._logs.partition_counts()

    def check_writable(self) -> None:
        """LogClosedError once closed, ReadOnlyError on a read-only store."""
        self._logs.check_writable()

    def notify_appended(self) -> None:
        """Records were appended: wake the consumers that wait for appends."""
        self._notify_appended()


class StoreCoordinators:
    """The committed offsets, group coordinators and transaction coordinator of one Store
    (see the module docstring).

    ``StoreCoordinators(logs, producer_ids, notify_appended=..., offsets_topic_partitions=...,
    transaction_state_partitions=...)``: ``logs`` the Store's partitions, ``producer_ids`` its
    producer-id blocks, ``notify_appended`` wakes the consumers waiting for appends, the
    partition counts are those the internal topics are created with.

    Thread safety: every method runs under the log manager's metadata lock
    (``logs.lock``, re-entrant), which the coordinators take for their own transitions too
    (lock order: that lock, then a Log's own). Thread-safe.
    """

    def __init__(self, logs: LogManager, producer_ids: ProducerIdManager, *,
                 notify_appended: Callable[[], None], offsets_topic_partitions: int,
                 transaction_state_partitions: int, share_state_partitions: int | None = None):
        self._logs = logs
        self._lock = logs.lock
        self.producer_ids = producer_ids
        self.offsets_topic_partitions = offsets_topic_partitions
        self.transaction_state_partitions = transaction_state_partitions
        self.share_state_partitions = (offsets_topic_partitions if share_state_partitions is None
                                       else share_state_partitions)
        # What the coordinators see of the store (they never get the Store itself).
        self._internal = InternalTopicsView(self, logs, notify_appended)
        self.offsets = OffsetsManager(self._internal)  # loaded by open
        self._groups: dict[str, ConsumerGroup] = {}
        # Callables naming groups with members outside this store's embedded coordinator
        # (the wire broker's classic groups): see add_active_groups_source.
        self._active_group_sources: list[Callable[[], Any]] = []
        self._coordinator: TransactionCoordinator | None = None  # made on first use
        self._share: ShareCoordinator | None = None  # made on first use or at open
        self._names_by_id: dict[Any, str] | None = None  # topic uuid -> name, made on use

    def open(self) -> TransactionCoordinator | None:
        """Reload the committed offsets and, on a writer, the transaction coordinator's state
        (after the offsets: completing a transaction a crash left half-written applies its
        pending offset commits). Returns the coordinator whose ``complete_pending`` the Store
        runs once the clean-shutdown marker is gone, or None."""
        logs = self._logs
        if OFFSETS_TOPIC in logs:
            self.offsets.reload()  # reload committed offsets now
        if SHARE_STATE_TOPIC in logs:
            share = self.share_coordinator()
            # Loaded now, so that a bad record is seen at open (not at first use).
            for partition in range(self._logs.topic(SHARE_STATE_TOPIC).partitions):
                try:
                    share.load(partition)
                except CorruptRecordError as exc:
                    logger.error("%s", exc)  # that partition is not served (load_failures)
        coordinator = None
        if TRANSACTION_STATE_TOPIC in logs and not logs.read_only:
            with self._lock:
                coordinator = self._coordinator = TransactionCoordinator(
                    self._internal, self.producer_ids, self.offsets, complete_pending=False)
        return coordinator

    # --- internal topics -------------------------------------------------------------------

    def internal_topic(self, name: str) -> Topic:
        """Internal topic ``name``, created on first use (Kafka creates ``__consumer_offsets``
        on the first FindCoordinator, ``__transaction_state`` on the first for a
        transactional id) with ``offsets_topic_partitions`` or
        ``transaction_state_partitions`` partitions. InvalidTopicError for another name."""
        if name == OFFSETS_TOPIC:
            partitions = self.offsets_topic_partitions
        elif name == TRANSACTION_STATE_TOPIC:
            partitions = self.transaction_state_partitions
        elif name == SHARE_STATE_TOPIC:
            partitions = self.share_state_partitions
        else:
            raise InvalidTopicError(f"{name!r} is not an internal topic")
        with self._lock:
            topic = self._logs.existing_topic(name)
            if topic is None:
                topic = self._logs.create_topic(
                    name, partitions, LogConfig.from_kafka(INTERNAL_TOPIC_CONFIGS[name]))
                self.on_metadata_change()
            return topic

    def group_offsets_partition(self, group_id: str) -> TopicPartition:
        """The ``__consumer_offsets`` partition of ``group_id`` (the topic made if needed)."""
        topic = self.internal_topic(OFFSETS_TOPIC)
        return TopicPartition(topic.name, offsets_schema.offsets_partition_for_group(
            group_id, topic.partitions))

    # --- transactions ----------------------------------------------------------------------

    def transaction_coordinator(self) -> TransactionCoordinator:
        """The transaction coordinator, made on first use. ReadOnlyError, LogClosedError."""
        with self._lock:
            self._logs.check_writable()
            if self._coordinator is None:
                self._coordinator = TransactionCoordinator(self._internal, self.producer_ids,
                                                           self.offsets)
            return self._coordinator

    def abort_timed_out_transactions(self, *, now_ms: int | None = None) -> list[str]:
        """See :meth:`Store.abort_timed_out_transactions
        <seglog.store.Store.abort_timed_out_transactions>`."""
        with self._lock:
            self._logs.check_writable()
            if TRANSACTION_STATE_TOPIC not in self._logs:
                return []
            return self.transaction_coordinator().abort_timed_out(now_ms=now_ms)

    # --- share groups (KIP-932) -----------------------------------------------------------

    def share_coordinator(self) -> ShareCoordinator:
        """The share coordinator of the store (its state in ``__share_group_state``, made on
        first use): made on first use, serving every partition of ``__share_group_state``
        (each loaded from its log on first use; a Store opened on a directory that has the
        topic loads them all at open). LogClosedError once closed."""
        with self._lock:
            self._logs.check_open()
            if self._share is None:
                self._share = ShareCoordinator(
                    self._internal,
                    config=ShareCoordinatorConfig(
                        state_topic_num_partitions=self.share_state_partitions),
                    topic_partition_count=self._partition_count_of)
            return self._share

    def _partition_count_of(self, topic_id: Any) -> int | None:
        """The partition count of the topic with Kafka uuid ``topic_id``, None if none
        (by a map of topic ids to names, made again after a metadata change)."""
        with self._lock:
            names = self._names_by_id
            if names is None:
                names = {}
                for each in self._logs.partition_counts():
                    topic = self._logs.existing_topic(each)
                    if topic is not None:
                        names[topic.uuid] = each
                self._names_by_id = names
            found = names.get(topic_id)
            topic = None if found is None else self._logs.existing_topic(found)
            if topic is None or topic.uuid != topic_id:
                return None
            return int(topic.partitions)

    # --- groups ----------------------------------------------------------------------------

    def group(self, group_id: str) -> ConsumerGroup:
        """See :meth:`Store.group <seglog.store.Store.group>`."""
        with self._lock:
            self._logs.check_open()
            group = self._groups.get(group_id)
            if group is None:
                group = ConsumerGroup(self._internal, self.offsets, group_id)
                self._groups[group_id] = group
            return group

    def existing_group(self, group_id: str) -> ConsumerGroup | None:
        """The coordinator of ``group_id`` if one was made, else None (open or not)."""
        with self._lock:
            return self._groups.get(group_id)

    def delete_group(self, group_id: str) -> None:
        """See :meth:`Store.delete_group <seglog.store.Store.delete_group>`."""
        with self._lock:
            self._logs.check_writable()
            group = self._groups.get(group_id)
            if group is not None and group.members():
                raise IllegalStateError(f"The group {group_id!r} is not empty (NON_EMPTY_GROUP)")
            if OFFSETS_TOPIC in self._logs:
                doomed = {tp: None for tp in self.offsets.all_committed(group_id)}
                self.offsets.commit(group_id, doomed)
            self._groups.pop(group_id, None)

    def groups(self) -> list[str]:
        """See :meth:`Store.groups <seglog.store.Store.groups>`."""
        with self._lock:
            self._logs.check_open()
            ids = {g for g, group in self._groups.items() if group.members()}
            ids |= set(self.offsets.groups())
            return sorted(ids)

    def on_metadata_change(self) -> None:
        """Topics were created, grown or deleted: groups subscribed to them rebalance, the
        share-group state of deleted topics goes."""
        for group in list(self._groups.values()):
            group.on_metadata_change()
        self._names_by_id = None
        if self._share is not None:
            self._share.on_topics_changed()

    def add_active_groups_source(self, source: Callable[[], Any]) -> None:
        """See :meth:`Store.add_active_groups_source
        <seglog.store.Store.add_active_groups_source>`."""
        if not callable(source):
            raise TypeError(f"source must be callable, got {type(source).__name__}")
        with self._lock:
            self._active_group_sources.append(source)

    def groups_active_elsewhere(self) -> set[str]:
        """The ids of groups with members outside the embedded coordinator."""
        active: set[str] = set()
        for source in list(self._active_group_sources):
            active.update(source())
        return active

    def expire_offsets(self, *, now_ms: int | None, retention_ms: int) -> dict[str, Any]:
        """See :meth:`Store.expire_offsets <seglog.store.Store.expire_offsets>`
        (``retention_ms`` given, not None)."""
        now = checked_now_ms(now_ms)
        with self._lock:
            self._logs.check_writable()
            if OFFSETS_TOPIC not in self._logs:
                return {}
            active = {g for g, group in self._groups.items() if group.members()}
            active |= self.groups_active_elsewhere()
            retention_ms = check_int("retention_ms", retention_ms, minimum=0)
            return self.offsets.expire(now, retention_ms, active)

    # --- classic groups' membership records (the wire broker's group coordinator) ----------

    def write_group_metadata(self, group_id: str, value: bytes | None, *,
                             timestamp_ms: int | None = None) -> int:
        """See :meth:`Store.write_group_metadata <seglog.store.Store.write_group_metadata>`;
        the caller wakes the consumers waiting for appends."""
        check_group_id(group_id)
        now = checked_now_ms(timestamp_ms)
        with self._lock:
            self._logs.check_writable()
            tp = self.group_offsets_partition(group_id)
            key = offsets_schema.encode_key(offsets_schema.GroupMetadataKey(group_id))
            first, _last = self._logs.topic(tp.topic).log(tp.partition).append_batch(
                [value], keys=[key], timestamps_ms=[now])
        return first

    def write_offsets_records(self, group_id: str,
                              records: list[tuple[bytes, bytes | None]], *,
                              timestamp_ms: int | None = None) -> int:
        """See :meth:`Store.write_offsets_records
        <seglog.store.Store.write_offsets_records>`; the caller wakes the consumers."""
        check_group_id(group_id)
        now = checked_now_ms(timestamp_ms)
        with self._lock:
            self._logs.check_writable()
            tp = self.group_offsets_partition(group_id)
            first, _last = self._logs.topic(tp.topic).log(tp.partition).append_batch(
                [value for _key, value in records], keys=[key for key, _value in records],
                timestamps_ms=[now] * len(records))
        return first

    def offsets_records(self, partition: int, key_versions: frozenset[int]
                        ) -> dict[bytes, bytes | None]:
        """See :meth:`Store.offsets_records <seglog.store.Store.offsets_records>`."""
        with self._lock:
            self._logs.check_open()
            topic = self._logs.existing_topic(OFFSETS_TOPIC)
            if topic is None or not 0 <= partition < topic.partitions:
                return {}
            log = topic.log(partition)
        found: dict[bytes, bytes | None] = {}
        for record in log.records(start=log.start_offset, max_offset=log.end_offset):
            key = record.key
            if key is None or len(key) < 2 or int.from_bytes(bytes(key[:2]), "big",
                                                            signed=True) not in key_versions:
                continue
            found[bytes(key)] = None if record.value is None else bytes(record.value)
        return found

    def group_metadata_records(self, *, partition: int | None = None
                               ) -> dict[str, bytes | None]:
        """See :meth:`Store.group_metadata_records
        <seglog.store.Store.group_metadata_records>`."""
        with self._lock:
            self._logs.check_open()
            topic = self._logs.existing_topic(OFFSETS_TOPIC)
            if topic is None:
                logs = []
            elif partition is None:
                logs = [topic.log(p) for p in range(topic.partitions)]
            else:
                logs = [topic.log(partition)] if 0 <= partition < topic.partitions else []
        found: dict[str, bytes | None] = {}
        for log in logs:
            for record in log.records(start=log.start_offset, max_offset=log.end_offset):
                if record.key is None:
                    continue
                try:
                    key = offsets_schema.decode_key(record.key)
                except CorruptRecordError:
                    continue
                if isinstance(key, offsets_schema.GroupMetadataKey):
                    found[key.group] = None if record.value is None else bytes(record.value)
        return found
