"""A data directory of topics: Kafka's log dir, embedded in one process.

A :class:`Store` is what a Kafka broker keeps under one ``log.dirs`` entry, laid out the same
way, so a broker could adopt the directory and Kafka tools read it:

``<topic>-<partition>/``
    one :class:`~seglog.storage.log.Log` per partition, with its ``partition.metadata`` (the topic id).
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``
    Kafka's text checkpoints, one ``topic partition offset`` line per partition, gathered from
    the Logs and replaced atomically (write-temp, fsync, rename, fsync dir) on
    :meth:`Store.flush` and :meth:`Store.close`.
``meta.properties``
    the directory's identity (version 1: ``cluster.id``, ``node.id``, ``directory.id``).
``.kafka_cleanshutdown``
    written last by :meth:`Store.close`; its presence lets the next open skip recovery.
``seglog-topics.json``
    seglog's own file (Kafka ignores files it does not know in a log dir): each topic's id,
    partition count and config overrides, and the end of the last block of producer ids
    handed out. A Kafka broker keeps these in its metadata log (KRaft) or ZooKeeper, neither
    of which exists here. Replaced atomically like the rest (:mod:`seglog.topic_registry`).
``__consumer_offsets-<n>/``
    committed consumer offsets, as records in Kafka's key/value schema in the compacted
    internal topic (see :mod:`seglog.coordinator.offsets`). Created on the first commit.
``__transaction_state-<n>/``
    the transaction coordinator's state (transactional id -> producer id, epoch, current
    transaction) in Kafka's key/value schema, in the compacted internal topic (see
    :mod:`seglog.coordinator.transaction`). Created when the first transactional producer starts.

Several data directories (JBOD: ``extra_log_dirs``) each hold the files above for their
partitions (:mod:`seglog.log_dirs`; the registry is written to each).

Deleting a topic renames each partition directory to ``<topic>-<partition>.<uuid>-delete``
(Kafka's ``LocalLog.logDeleteDirName``), then removes it; a directory left with that suffix by
a crash is removed on the next open.

The Store is the front of two rooms and the wiring between them:

- :class:`~seglog.log_manager.LogManager` (:mod:`seglog.log_manager`): the partitions on
  disk. Topics, the registry, the checkpoints, the directory lock, opening and recovering the
  Logs, retention, the cleaner and flushes (Kafka's ``LogManager``). It knows nothing of
  groups, transactions or clients.
- :class:`~seglog.store_coordinators.StoreCoordinators` (:mod:`seglog.store_coordinators`):
  the committed offsets (:class:`~seglog.coordinator.offsets.OffsetsManager`), the group
  coordinators (:class:`~seglog.coordinator.group.ConsumerGroup`) and the transaction
  coordinator, each handed only the narrow
  :class:`~seglog.coordinator.internal_topics.InternalTopics` view of the partitions.

The Store makes the producer-id blocks (:class:`~seglog.coordinator.producer_ids.ProducerIdManager`,
recorded in the registry), opens both rooms in the order recovery needs, implements
:class:`~seglog.broker_api.BrokerApi` (the interface its Producers and Consumers call) by
delegating to them, and hands out those clients. Layers point one way: store ->
store_coordinators -> log_manager -> storage.

Thread safety: one lock guards the metadata (topics, groups, checkpoints), shared by both
rooms; every Log locks itself, so producers and consumers in several threads share one Store.
One writer per data directory, enforced with an OS lock on ``<dir>/.lock`` (a second one gets
:class:`~seglog.errors.LogLockedError`); any number of ``read_only=True`` Stores may follow it.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from typing import Any, Callable, Iterable, Mapping, Sequence

from .arguments import check_group_id
from .broker_api import TxnOffsetCommitRecords
from .clients.consumer import Consumer
from .clients.producer import Producer
from .coordinator.assignors import ASSIGNORS
from .coordinator.group import ConsumerGroup
from .coordinator.offsets_schema import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS_DEFAULT
from .coordinator.producer_ids import ProducerIdManager
from .coordinator.transaction import (
    TRANSACTION_TIMEOUT_MS_DEFAULT,
    TransactionCoordinator,
    TransactionDescription,
)
from .errors import IllegalStateError, InvalidTopicError
from .log_dirs import LogDirState
from .store_log_dirs import StoreLogDirs
from .store_share_groups import StoreShareGroups
from .log_manager import (
    CLUSTER_METADATA_TOPIC,
    TOPIC_PARTITIONS_MAX,
    TOPICS_FILE,
    LogManager,
    Topic,
    as_config,
    validate_topic_name,
)
from .storage import checkpoints
from .storage.config import LogConfig, check_int, checked_now_ms
from .storage.file_cache import FileCache
from .storage.log import Log
from .store_coordinators import INTERNAL_TOPIC_CONFIGS, StoreCoordinators
from .types import MemberAssignment, OffsetAndMetadata, TopicPartition

__all__ = ["Store", "LogDirState", "Topic", "TopicPartition", "validate_topic_name",
           "TOPICS_FILE", "TOPIC_PARTITIONS_MAX", "CLUSTER_METADATA_TOPIC"]

_DEFAULT_NODE_ID = 1
#: Kafka's ``offsets.retention.minutes`` (7 days) in milliseconds.
OFFSETS_RETENTION_MS_DEFAULT = 7 * 24 * 3600 * 1000


class Store(StoreLogDirs, StoreShareGroups):
    """A Kafka log directory of topics, embedded: ``Store(path, backend=None, read_only=False)``.

    Opens (creating if needed, unless ``read_only``) the data directory ``path``; takes the
    directory's writer lock (:class:`~seglog.errors.LogLockedError` if another writer holds
    it); removes leftover ``-delete`` directories; opens every partition's Log, recovering
    them after an unclean shutdown; reloads committed consumer offsets. ``backend`` is
    ``"native"``, ``"pure"`` or None (the default backend) and is used for every Log.
    ``offsets_topic_partitions`` is the partition count of ``__consumer_offsets`` when this
    store creates it (Kafka's ``offsets.topic.num.partitions``, 50); an existing one keeps its
    count. ``transaction_state_partitions`` is the same for ``__transaction_state`` (Kafka's
    ``transaction.state.log.num.partitions``, 50); None takes ``offsets_topic_partitions``,
    so a store made small for tests stays small; ``share_state_partitions`` likewise for
    ``__share_group_state`` (Kafka's ``share.coordinator.state.topic.num.partitions``, 50).
    ``max_open_segments`` bounds the segment
    files open at once over all partitions (:attr:`file_cache`; default: half the soft
    RLIMIT_NOFILE over the descriptors one open segment holds; design.md §7): segments open
    on first use and idle ones are closed, so a Store may hold more partitions than the
    process may open files. ``node_id`` and ``cluster_id`` go to a new
    ``meta.properties``. Reopens the transaction coordinator's state (``__transaction_state``)
    and completes transactions a crash left between their markers.

    ``topic_config_defaults`` (a :class:`LogConfig` or a mapping as :meth:`create_topic`
    takes; None: Kafka's defaults) is what a topic's unset configs take, as a Kafka broker's
    ``log.*`` settings are its topics' defaults: a new topic's config is these defaults with
    its own settings over them, the registry keeps only the settings that differ from them,
    and a topic reopened under other defaults follows the new ones where it set nothing.
    ``offsets_retention_ms`` (Kafka's ``offsets.retention.minutes``, 7 days) is the default
    retention of :meth:`expire_offsets` and :meth:`maintain`.

    ``replicated=True`` (a broker of a cluster, docs/cluster.md §3.1): every partition's Log
    is opened with ``auto_high_watermark=False``, its high watermark restored from
    ``replication-offset-checkpoint`` (0 when absent) clamped to its offsets, so a restarted
    replica exposes nothing it did not know committed; the replica manager moves it
    (``Log.update_high_watermark``), and flush and close write the high watermarks back to
    that file as they always do. Without it every high watermark follows its end offset.

    ``extra_log_dirs``: more data directories after ``path`` (JBOD; :meth:`log_dirs`).
    ``on_progress(done, total)``: called after each topic opened (recovered) at the open.

    Use as a context manager, or call :meth:`close`. Thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str], backend: Any = None,
                 read_only: bool = False, *,
                 offsets_topic_partitions: int = OFFSETS_TOPIC_PARTITIONS_DEFAULT,
                 transaction_state_partitions: int | None = None,
                 share_state_partitions: int | None = None,
                 node_id: int = _DEFAULT_NODE_ID, cluster_id: str | None = None,
                 topic_config_defaults: LogConfig | Mapping[str, Any] | None = None,
                 offsets_retention_ms: int = OFFSETS_RETENTION_MS_DEFAULT,
                 max_open_segments: int | None = None, replicated: bool = False,
                 extra_log_dirs: Sequence[str | os.PathLike[str]] = (),
                 on_progress: Callable[[int, int], None] | None = None):
        # topic_config_defaults and offsets_retention_ms: see the class docstring.
        config_defaults = as_config(topic_config_defaults)
        self.offsets_retention_ms = check_int("offsets_retention_ms", offsets_retention_ms,
                                              minimum=1)
        if transaction_state_partitions is None:
            transaction_state_partitions = offsets_topic_partitions
        # TypeError for a non-integer, ValueError out of 1..TOPIC_PARTITIONS_MAX (check_int).
        offsets_topic_partitions = check_int("offsets_topic_partitions",
                                             offsets_topic_partitions, minimum=1,
                                             maximum=TOPIC_PARTITIONS_MAX)
        transaction_state_partitions = check_int("transaction_state_partitions",
                                                 transaction_state_partitions, minimum=1,
                                                 maximum=TOPIC_PARTITIONS_MAX)
        if share_state_partitions is None:
            share_state_partitions = offsets_topic_partitions
        share_state_partitions = check_int("share_state_partitions", share_state_partitions,
                                           minimum=1, maximum=TOPIC_PARTITIONS_MAX)
        node_id = check_int("node_id", node_id, minimum=0, maximum=2**31 - 1)
        self.path = os.fspath(path)
        self.read_only = bool(read_only)
        self.replicated = bool(replicated)
        self.backend = backend if backend is None or isinstance(backend, str) else backend.name
        self._lock = threading.RLock()  # the metadata lock, shared by both rooms
        # Bumped by Producers after every append, so a consumer of several partitions can
        # wait for any of them on one condition (a Log's own condition covers one partition).
        self._data_cond = threading.Condition(threading.Lock())
        self._data_seq = 0
        # The blocks are recorded in the registry, which the log manager keeps.
        self._producer_ids = ProducerIdManager(self._persist_producer_id_block_end,
                                               lock=self._lock)
        self._logs = LogManager(
            self.path, backend=self.backend, read_only=self.read_only, lock=self._lock,
            producer_ids=self._producer_ids, internal_topic_configs=INTERNAL_TOPIC_CONFIGS,
            replicated=self.replicated, topic_config_defaults=config_defaults,
            max_open_segments=max_open_segments,
            extra_dirs=[os.fspath(d) for d in extra_log_dirs])
        self._coordinators = StoreCoordinators(
            self._logs, self._producer_ids, notify_appended=self.notify_appended,
            offsets_topic_partitions=offsets_topic_partitions,
            transaction_state_partitions=transaction_state_partitions,
            share_state_partitions=share_state_partitions)
        self._producers: weakref.WeakSet[Producer] = weakref.WeakSet()
        self._consumers: weakref.WeakSet[Consumer] = weakref.WeakSet()
        try:
            self._open(node_id=node_id, cluster_id=cluster_id, on_progress=on_progress)
        except BaseException:
            self._logs.abort_open()
            raise

    def _open(self, *, node_id: int, cluster_id: str | None,
              on_progress: Callable[[int, int], None] | None) -> None:
        self._logs.open(node_id=node_id, cluster_id=cluster_id, on_progress=on_progress)
        coordinator = self._coordinators.open()
        if not self.read_only:
            # From here on a crash must make the next open recover. Not earlier: an open
            # that fails on corrupt bytes (a Log, __consumer_offsets, __transaction_state)
            # has written nothing, and the next open must not take it for a crash and cut
            # what this one refused to.
            self._logs.begin_writing()
        if coordinator is not None:
            coordinator.complete_pending()

    def _persist_producer_id_block_end(self, block_end: int) -> None:
        """The producer-id manager's callback: record a new block durably (the registry)."""
        self._logs.write_registry(producer_id_block_end=block_end)

    # --- the data directory (seglog.log_manager) -------------------------------------------

    @property
    def meta(self) -> checkpoints.MetaProperties | None:
        """The directory's ``meta.properties`` (None: a read-only store of a directory that
        has none)."""
        return self._logs.meta

    @property
    def file_cache(self) -> FileCache:
        """The :class:`~seglog.storage.file_cache.FileCache` bounding the segment files open
        at once over every partition (``max_open_segments``)."""
        return self._logs.file_cache

    @property
    def offsets_topic_partitions(self) -> int:
        """The partition count ``__consumer_offsets`` is created with."""
        return self._coordinators.offsets_topic_partitions

    @property
    def transaction_state_partitions(self) -> int:
        """The partition count ``__transaction_state`` is created with."""
        return self._coordinators.transaction_state_partitions

    @property
    def share_state_partitions(self) -> int:
        """The partition count ``__share_group_state`` is created with."""
        return self._coordinators.share_state_partitions

    @property
    def topic_config_defaults(self) -> LogConfig:
        """What a topic's unset configs take (see the class docstring); replace it with
        :meth:`set_topic_config_defaults`."""
        return self._logs.topic_config_defaults

    def create_topic(self, name: str, partitions: int = 1,
                     config: LogConfig | Mapping[str, Any] | None = None, *,
                     topic_id: uuid.UUID | None = None) -> Topic:
        """Create topic ``name`` with ``partitions`` partitions and ``config`` (a
        :class:`LogConfig`, or a mapping of Kafka dotted names with string or typed values, or
        snake-case names: see ``LogConfig.from_dict``).

        Creates ``<name>-<p>/`` for each partition and records the topic, with its id, in
        ``seglog-topics.json``; each partition writes its ``partition.metadata`` (the topic
        id) with its first flush, before any of its records is durable (Kafka writes it
        lazily too). Raises :class:`InvalidTopicError` for an illegal name,
        an internal one (``__consumer_offsets``) or one that collides with an existing topic
        once ``.`` and ``_`` are unified (Kafka's rule); :class:`TopicExistsError`;
        :class:`InvalidConfigError` for unknown names or bad values; ``ValueError`` for a
        partition count outside 1..10000, ``TypeError`` for one that is not an int;
        :class:`ReadOnlyError`.

        ``topic_id``: the topic's id (a cluster's, from ZooKeeper: every replica's
        ``partition.metadata`` names the same); None makes a new random one. TypeError unless a
        ``uuid.UUID``; ValueError for Kafka's reserved ids (zero, and the metadata topic's).
        """
        validate_topic_name(name)
        if name in INTERNAL_TOPIC_CONFIGS:
            raise InvalidTopicError(f"{name} is an internal topic; the store creates it")
        if topic_id is not None:
            if not isinstance(topic_id, uuid.UUID):
                raise TypeError(f"topic_id must be a uuid.UUID, got {type(topic_id).__name__}")
            if topic_id in (checkpoints.ZERO_UUID, checkpoints.METADATA_TOPIC_ID):
                raise ValueError(f"topic_id {topic_id} is reserved by Kafka")
        return self._create_topic(name, partitions, config, topic_id=topic_id)

    def create_internal_topic(self, name: str, partitions: int,
                              config: Mapping[str, Any] | None = None, *,
                              topic_id: uuid.UUID | None = None) -> Topic:
        """Create internal topic ``name`` (``__consumer_offsets`` or ``__transaction_state``)
        as a cluster decided it: ``partitions`` partitions, its internal config overridden by
        ``config`` (ZooKeeper's ``/config/topics``), ``topic_id`` (ZooKeeper's). A
        standalone store creates them itself on first use instead. Raises
        :class:`InvalidTopicError` for another name, :class:`TopicExistsError`,
        :class:`ReadOnlyError`."""
        if name not in INTERNAL_TOPIC_CONFIGS:
            raise InvalidTopicError(f"{name!r} is not an internal topic")
        merged = {**INTERNAL_TOPIC_CONFIGS[name], **dict(config or {})}
        return self._create_topic(name, partitions, LogConfig.from_kafka(merged),
                                  topic_id=topic_id)

    def _create_topic(self, name: str, partitions: int, config: Any, *,
                      topic_id: uuid.UUID | None = None) -> Topic:
        # Not under the metadata lock here: the LogManager takes it in short holds while it
        # makes the partitions, and runs the listeners in the same hold that publishes the
        # topic (a big topic must not hold every other Store user for its whole creation).
        return self._logs.create_topic(name, partitions, config, topic_id=topic_id,
                                       on_created=self._coordinators.on_metadata_change)

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name`` and its data, as Kafka does: close its Logs, rename each
        partition directory to ``<topic>-<partition>.<uuid>-delete``, drop it from the
        checkpoints and the registry, then remove the directories. Committed offsets of its
        partitions are deleted (tombstones in ``__consumer_offsets``) and groups subscribed to
        it rebalance. Raises :class:`UnknownTopicOrPartitionError`, :class:`InvalidTopicError`
        for ``__consumer_offsets``, :class:`ReadOnlyError`."""
        with self._lock:
            topic = self._logs.topic_to_delete(name)
            self._coordinators.offsets.delete_topic_offsets(name)
            renamed = self._logs.delete_topic(topic)
            self._coordinators.on_metadata_change()
        self._logs.remove_deleted_dirs(renamed)

    def topics(self) -> list[str]:
        """Names of every topic, internal ones included, sorted."""
        return self._logs.topics()

    def topic(self, name: str) -> Topic:
        """The :class:`Topic` ``name``; :class:`UnknownTopicOrPartitionError` if absent."""
        return self._logs.topic(name)

    def __contains__(self, name: str) -> bool:
        return name in self._logs

    def log(self, tp: tuple[str, int]) -> Log:
        """The Log of ``(topic, partition)``."""
        return self.topic(tp[0]).log(tp[1])

    def create_partitions(self, name: str, count: int) -> Topic:
        """Grow topic ``name`` to ``count`` partitions (Kafka's CreatePartitions); returns the
        :class:`Topic`, whose :attr:`~Topic.partitions` and partitioner use the new count at
        once. Existing partitions keep their data; groups subscribed to the topic rebalance.

        Durable as :meth:`create_topic`: the new directories are made, each new Log writes its
        ``partition.metadata`` (the topic's id) with its first flush, and the registry is
        replaced (its data-dir fsync makes the new entries durable). A crash before the registry write leaves
        directories the next open adopts (the count is the highest directory found).

        Raises :class:`UnknownTopicOrPartitionError`; :class:`InvalidPartitionsError` when
        ``count`` is not above the current count; ``ValueError`` above
        :data:`TOPIC_PARTITIONS_MAX`, ``TypeError`` for a non-integer; :class:`TopicExistsError`
        when a directory of a new partition already exists; :class:`ReadOnlyError`.
        """
        # Not under the metadata lock: the LogManager holds it briefly per chunk of partitions
        # and runs the listeners in the hold that publishes the new count (_create_topic).
        return self._logs.create_partitions(name, count,
                                            on_created=self._coordinators.on_metadata_change)

    def alter_topic_configs(self, configs: Mapping[str, LogConfig | Mapping[str, Any]]) -> None:
        """Replace the config of each topic named in ``configs`` (Kafka's AlterConfigs and
        IncrementalAlterConfigs on topics, the dynamic topic config update): each value is a
        whole :class:`LogConfig` or a mapping as :meth:`create_topic` takes (names not given
        take the store's ``topic_config_defaults``, Kafka's defaults unless set). Every
        config is validated before any is applied; then each
        partition's Log uses the new one at once (``Log.update_config``: segments that exist
        keep their index sizes) and the registry is replaced once, atomically, so a restart
        keeps the change. Internal topics may be altered too, as in Kafka.

        Raises :class:`UnknownTopicOrPartitionError`, :class:`InvalidConfigError` (unknown
        names, broker settings given as dotted names, bad values), :class:`ReadOnlyError`;
        nothing is changed when any of these is raised.
        """
        self._logs.alter_topic_configs(configs)

    def alter_topic_config(self, name: str, config: LogConfig | Mapping[str, Any]) -> Topic:
        """:meth:`alter_topic_configs` for one topic; returns its :class:`Topic`."""
        self.alter_topic_configs({name: config})
        return self.topic(name)

    def set_topic_config_defaults(self, defaults: LogConfig | Mapping[str, Any]) -> None:
        """Replace ``topic_config_defaults`` (a dynamic change of the broker's ``log.*``
        defaults): topics created from now on take them, and the registry keeps the settings
        that differ from them. Existing topics keep their configs (the caller moves those
        that set nothing with :meth:`alter_topic_configs`). Raises InvalidConfigError."""
        self._logs.set_topic_config_defaults(defaults)

    def refresh(self) -> bool:
        """Read-only stores: follow the writer. Picks up topics created since the store
        opened (their ``seglog-topics.json`` entry and partition directories) and calls
        ``Log.refresh`` on every partition (new batches and segments, retention); topics the
        writer deleted are dropped. Returns whether anything changed. Raises
        :class:`ReadOnlyError` on a writer (it already sees everything)."""
        with self._lock:
            changed = self._logs.refresh()
            if changed:
                if OFFSETS_TOPIC in self._logs:
                    self._coordinators.offsets.reload()  # replay the writer's commits
                self._coordinators.on_metadata_change()
            return changed

    # --- the broker interface (seglog.broker_api.BrokerApi, what the clients call) ---------

    @property
    def append_count(self) -> int:
        """How many times :meth:`notify_appended` was called (see ``BrokerApi``)."""
        return self._data_seq

    def notify_appended(self) -> None:
        """Records were appended through this store: wake consumers waiting for any."""
        with self._data_cond:
            self._data_seq += 1
            self._data_cond.notify_all()

    def wait_for_appends(self, append_count: int, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` seconds unless :attr:`append_count` moved past
        ``append_count``."""
        with self._data_cond:
            if self._data_seq == append_count and timeout_s > 0:
                self._data_cond.wait(timeout_s)

    def find_coordinator(self, group_id: str) -> None:
        """Kafka's FindCoordinator for a group: makes its coordinator (see :meth:`group`).
        Raises InvalidGroupIdError, LogClosedError."""
        check_group_id(group_id)
        self.group(group_id)

    def assignor_names(self) -> tuple[str, ...]:
        """The assignors the group coordinators run, sorted (``range``, ``roundrobin``)."""
        return tuple(sorted(ASSIGNORS))

    def join_group(self, group_id: str, *, member_id: str | None, client_id: str,
                   topics: frozenset[str], assignor: str, group_instance_id: str | None) -> str:
        """Kafka's JoinGroup (see ``BrokerApi.join_group``)."""
        if group_id in self._coordinators.groups_active_elsewhere():
            # Two coordinators must not both own one group's generations and assignment.
            raise IllegalStateError(f"group {group_id!r} has members of the wire broker's "
                                    "classic protocol; an in-process consumer cannot join it")
        group = self.group(group_id)
        if member_id is None:
            return group.join(client_id, topics, assignor, group_instance_id)
        group.update_subscription(member_id, topics)
        return member_id

    def sync_group(self, group_id: str, member_id: str) -> MemberAssignment | None:
        """Kafka's SyncGroup: the member's assignment, or None when it is not a member."""
        return self.group(group_id).member_assignment(member_id)

    def leave_group(self, group_id: str, member_id: str) -> None:
        """Kafka's LeaveGroup. Works on a closed store too (a consumer closing after it)."""
        group = self._coordinators.existing_group(group_id)
        if group is not None:
            group.leave(member_id)

    def wait_for_rebalance(self, group_id: str, generation_id: int, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` seconds for the group to leave ``generation_id``."""
        self.group(group_id).wait_for_change(generation_id, timeout_s)

    def offset_commit(self, group_id: str, *, member_id: str | None, generation_id: int,
                      offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Kafka's OffsetCommit (see ``BrokerApi.offset_commit``)."""
        self.group(group_id).commit_offsets(member_id, generation_id, offsets)

    def offset_fetch(self, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        """Kafka's OffsetFetch: the committed offset of ``group_id`` for ``tp``, or None."""
        return self._coordinators.offsets.committed(group_id, tp)

    def offset_commit_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transactional commit of ``group_id`` for ``tp`` awaits its marker."""
        return self._coordinators.offsets.has_pending(group_id, tp)

    def init_producer_id(self, transactional_id: str | None = None, *,
                         transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS_DEFAULT
                         ) -> tuple[int, int]:
        """Kafka's InitProducerId. Without ``transactional_id``: a producer id never used
        before in this data directory (blocks of 1000 recorded durably in the topics registry
        before their ids are handed out, so ids stay unique across restarts and crashes),
        epoch 0. With one: the transaction coordinator's (see ``BrokerApi``). Raises
        ReadOnlyError, LogClosedError."""
        if transactional_id is not None:
            return self.transaction_coordinator().init_producer_id(
                transactional_id, timeout_ms=transaction_timeout_ms)
        with self._lock:
            self._logs.check_writable()
            return self._producer_ids.allocate(), 0

    def check_producer_epoch(self, transactional_id: str, producer_id: int,
                             producer_epoch: int) -> None:
        """ProducerFencedError unless the producer is the current one of the id."""
        self.transaction_coordinator().check_producer(transactional_id, producer_id,
                                                      producer_epoch)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, partitions: Iterable[TopicPartition]) -> None:
        """Kafka's AddPartitionsToTxn."""
        self.transaction_coordinator().add_partitions(transactional_id, producer_id,
                                                      producer_epoch, partitions)

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> TopicPartition:
        """Kafka's AddOffsetsToTxn: adds the group's ``__consumer_offsets`` partition to the
        transaction and returns it."""
        tp = self._coordinators.group_offsets_partition(check_group_id(group_id))
        self.add_partitions_to_txn(transactional_id, producer_id, producer_epoch, [tp])
        return tp

    def txn_offset_commit_records(self, group_id: str,
                                  offsets: Mapping[TopicPartition, OffsetAndMetadata]
                                  ) -> TxnOffsetCommitRecords:
        """The records of a transactional offset commit (see ``BrokerApi``)."""
        partition, keys, values, timestamps = \
            self._coordinators.offsets.transactional_records(group_id, offsets)
        return TxnOffsetCommitRecords(TopicPartition(OFFSETS_TOPIC, partition), keys, values,
                                      timestamps)

    def txn_offset_commit(self, group_id: str, producer_id: int,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                          partition: int, base_offset: int, commit_timestamp_ms: int) -> None:
        """Hold an appended transactional offset commit until its marker."""
        self._coordinators.offsets.add_pending(partition, producer_id, group_id, offsets,
                                               base_offset, commit_timestamp_ms)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                commit: bool, bump_epoch: bool = False) -> tuple[int, int]:
        """Kafka's EndTxn (see ``BrokerApi.end_txn``)."""
        return self.transaction_coordinator().end_transaction(
            transactional_id, producer_id, producer_epoch, commit=commit, bump_epoch=bump_epoch)

    # --- coordinators (seglog.store_coordinators) ------------------------------------------

    def transaction_coordinator(self) -> TransactionCoordinator:
        """The store's :class:`~seglog.coordinator.transaction.TransactionCoordinator`
        (made on first use), whose ``handle_*`` methods the wire broker calls for Kafka's
        exact transaction errors. Raises ReadOnlyError, LogClosedError."""
        return self._coordinators.transaction_coordinator()

    def describe_transaction(self, transactional_id: str) -> TransactionDescription | None:
        """The coordinator's state of ``transactional_id`` (Kafka's DescribeTransactions):
        a :class:`~seglog.coordinator.transaction.TransactionDescription` (producer id, epoch, state
        name, partitions, timeout, times), or None if no producer ever initialised it.
        Raises ReadOnlyError."""
        return self.transaction_coordinator().describe(transactional_id)

    def use_cluster_producer_id_blocks(self, claim_block: Any) -> None:
        """Hand out producer ids from blocks ``claim_block() -> (first id, last id)`` claims
        (a cluster member: ZooKeeper's ``/latest_producer_id_block``) instead of the blocks
        recorded in this data directory (:meth:`ProducerIdManager.use_cluster_blocks`)."""
        self._producer_ids.use_cluster_blocks(claim_block)

    def group(self, group_id: str) -> ConsumerGroup:
        """The :class:`~seglog.coordinator.group.ConsumerGroup` coordinator of ``group_id``
        (created empty if it has no members yet). Raises InvalidGroupIdError (a ValueError)
        for an empty group id, LogClosedError."""
        return self._coordinators.group(group_id)

    def delete_group(self, group_id: str) -> None:
        """Delete a group's committed offsets (Kafka's DeleteGroups). Refused with
        :class:`IllegalStateError` while the group has members (NON_EMPTY_GROUP)."""
        self._coordinators.delete_group(group_id)

    def groups(self) -> list[str]:
        """Ids of the groups with members or committed offsets, sorted."""
        return self._coordinators.groups()

    def add_active_groups_source(self, source: Any) -> None:
        """Register ``source``, a thread-safe callable returning the ids of groups that have
        members outside the embedded coordinator (the wire broker's classic groups):
        :meth:`expire_offsets` keeps their offsets, as Kafka keeps those of a group with
        members, and :meth:`join_group` refuses an in-process consumer joining one."""
        self._coordinators.add_active_groups_source(source)

    def write_group_metadata(self, group_id: str, value: bytes | None, *,
                             timestamp_ms: int | None = None) -> int:
        """Append a classic group's membership record (key: Kafka's GroupMetadataKey of
        ``group_id``; ``value``: an encoded GroupMetadataValue, or None for the tombstone
        that deletes the group) to the group's ``__consumer_offsets`` partition, creating
        the topic on first use; returns its offset. The offsets loader ignores these records;
        :meth:`group_metadata_records` reads them back. Raises InvalidGroupIdError,
        ReadOnlyError, LogClosedError and what the append raises."""
        first = self._coordinators.write_group_metadata(group_id, value,
                                                        timestamp_ms=timestamp_ms)
        self.notify_appended()
        return first

    def group_metadata_records(self, *, partition: int | None = None
                               ) -> dict[str, bytes | None]:
        """``{group_id: value bytes or None}``: the last membership record of each group in
        ``__consumer_offsets`` (None: its tombstone), in log order; empty when the topic does
        not exist. ``partition``: that partition's records only (a cluster member loading
        the partition it now leads). Records are CRC-checked as read (CorruptRecordError); a
        key that does not parse is skipped as the offsets loader skips it."""
        return self._coordinators.group_metadata_records(partition=partition)

    def write_offsets_records(self, group_id: str,
                              records: list[tuple[bytes, bytes | None]], *,
                              timestamp_ms: int | None = None) -> int:
        """Append ``records`` (``(key, value or None)`` pairs, already encoded: a consumer
        group's records, :mod:`seglog.coordinator.consumer_group_records`) as one batch to
        group ``group_id``'s ``__consumer_offsets`` partition; returns the first offset.
        Raises InvalidGroupIdError, ReadOnlyError, LogClosedError and what the append
        raises."""
        first = self._coordinators.write_offsets_records(group_id, records,
                                                         timestamp_ms=timestamp_ms)
        self.notify_appended()
        return first

    def offsets_records(self, partition: int, key_versions: frozenset[int]
                        ) -> dict[bytes, bytes | None]:
        """``{key: value or None}``: the last record of each key in ``__consumer_offsets``
        partition ``partition`` whose key version (its first int16) is one of
        ``key_versions``, in log order (None: a tombstone); empty when there is no such
        partition."""
        return self._coordinators.offsets_records(partition, key_versions)

    def load_offsets_partition(self, partition: int) -> None:
        """Replay ``__consumer_offsets`` partition ``partition`` into the committed offsets,
        replacing what was known of its groups (a cluster member that became the partition's
        leader: :meth:`OffsetsManager.load_partition`). Raises CorruptRecordError."""
        self._coordinators.offsets.load_partition(partition)

    def unload_offsets_partition(self, partition: int) -> None:
        """Forget the committed offsets of the groups of ``__consumer_offsets`` partition
        ``partition`` (a cluster member that does not lead it:
        :meth:`OffsetsManager.unload_partition`); its log is untouched."""
        self._coordinators.offsets.unload_partition(partition)

    # --- clients ---------------------------------------------------------------------------

    def producer(self, **kwargs: Any) -> Producer:
        """A :class:`~seglog.clients.producer.Producer` writing to this store; keyword arguments as
        its constructor (``linger_ms``, ``batch_size_bytes``, ``compression``,
        ``idempotent``, ``transactional_id``, ...). Producers still open are flushed and
        closed by :meth:`close` (a transaction still open is aborted, as Kafka's close does)."""
        with self._lock:
            self._logs.check_writable()
            producer = Producer(self, **kwargs)
            self._producers.add(producer)
            return producer

    def consumer(self, group_id: str | None = None, topics: Iterable[str] | None = None,
                 **kwargs: Any) -> Consumer:
        """A :class:`~seglog.clients.consumer.Consumer` in group ``group_id`` (None: no group, no
        commits), subscribed to ``topics`` if given; keyword arguments as its constructor
        (``auto_offset_reset``, ``partition_assignment_strategy``, ...). Consumers still open
        are closed (without committing) by :meth:`close`."""
        with self._lock:
            self._logs.check_open()
            consumer = Consumer(self, group_id=group_id, **kwargs)
            self._consumers.add(consumer)
        if topics is not None:
            consumer.subscribe(topics)
        return consumer

    # --- housekeeping (Kafka's LogManager tasks and cleaner threads, run when called) -------

    def apply_retention(self, *, now_ms: int | None = None) -> dict[TopicPartition, list[int]]:
        """Run ``Log.apply_retention`` on every partition (Kafka's retention check, which a
        broker runs every ``log.retention.check.interval.ms``); returns ``{tp: base offsets
        of deleted segments}`` for the partitions that lost any. Raises ReadOnlyError."""
        return self._logs.apply_retention(now_ms=now_ms)

    def compact(self, *, now_ms: int | None = None) -> dict[TopicPartition, Any]:
        """One cleaner pass (``Log.compact``) on every partition whose ``cleanup.policy``
        contains "compact", ``__consumer_offsets`` included (Kafka's cleaner threads); returns
        ``{tp: CleanerStats}`` of the partitions that were cleaned. The cleaner checkpoints are
        written to ``cleaner-offset-checkpoint`` at the next flush or close.

        A partition whose pass meets a corrupt batch (:class:`CorruptRecordError`: bad CRC32C,
        offsets out of order) is left as it was and is not cleaned again until the store is
        reopened, as Kafka's cleaner marks it uncleanable; the error is kept in
        :attr:`uncleanable_partitions` and a warning is issued. The other partitions are
        cleaned."""
        return self._logs.compact(now_ms=now_ms)

    @property
    def uncleanable_partitions(self) -> dict[TopicPartition, Exception]:
        """``{tp: error}`` of the partitions :meth:`compact` stopped cleaning because their
        log holds a corrupt batch (Kafka's uncleanable partitions); empty normally. A copy."""
        return self._logs.uncleanable_partitions

    def check_active_segments(self) -> int:
        """Check every partition's active segment now (lazy loading checks it on first
        use; Kafka opens it at load): one whose flushed data is gone goes offline now, not
        on its first append. Returns how many partitions are offline."""
        logs = self._logs
        if logs.read_only:
            return len(logs.offline)
        self.check_log_dirs()
        for _tp, log in logs.writable_logs():  # no metadata lock held while a Log checks
            if logs.closed:
                break
            log.check_active_segment()
        return len(logs.offline)

    def offline_partitions(self) -> dict[TopicPartition, str]:
        """``{tp: reason}`` of the partitions whose files failed to load (at the open, or on a
        segment's first use): they stay offline alone, reads and writes raise
        :class:`~seglog.errors.PartitionOfflineError`, every other partition serves.
        ``seglog recover`` (with the store closed) truncates one to its last valid offset;
        the next open brings it back. Empty normally."""
        return self._logs.offline.reasons()

    def expire_offsets(self, *, now_ms: int | None = None,
                       retention_ms: int | None = None) -> dict[str, Any]:
        """Delete (with tombstones) the committed offsets that are ``retention_ms`` old (None:
        the store's ``offsets_retention_ms``), of groups that have no members (Kafka's
        ``offsets.retention.minutes``, 7 days, checked by the coordinator every
        ``offsets.retention.check.interval.ms``). Returns ``{group_id:
        [TopicPartition, ...]}`` of what was removed. Raises ReadOnlyError."""
        return self._coordinators.expire_offsets(
            now_ms=now_ms,
            retention_ms=self.offsets_retention_ms if retention_ms is None else retention_ms)

    def abort_timed_out_transactions(self, *, now_ms: int | None = None) -> list[str]:
        """Abort the transactions open longer than their producer's ``transaction_timeout_ms``
        and fence those producers (Kafka's coordinator does this every 10 s); returns their
        transactional ids. Raises ReadOnlyError."""
        return self._coordinators.abort_timed_out_transactions(now_ms=now_ms)

    def maintain(self, *, now_ms: int | None = None) -> dict[str, Any]:
        """One round of the periodic work a Kafka broker's LogManager, cleaner and group
        coordinator do on timers, for callers that run it on their own schedule: retention
        (:meth:`apply_retention`, which also removes ``.deleted`` files that are due),
        compaction (:meth:`compact`), ``flush.ms`` flushes (``Log.maybe_flush``), expiry of
        committed offsets (:meth:`expire_offsets`), aborting transactions open longer than
        their timeout (:meth:`abort_timed_out_transactions`), then the four checkpoints.
        Returns ``{"retention": ..., "compaction": ..., "flushed": [tp, ...],
        "expired_offsets": ..., "aborted_transactions": [transactional id, ...]}``. Raises
        ReadOnlyError."""
        now = checked_now_ms(now_ms)
        self.check_log_dirs()
        report: dict[str, Any] = {
            "retention": self.apply_retention(now_ms=now),
            "compaction": self.compact(now_ms=now),
            "flushed": [tp for tp, log in self._logs.writable_logs()
                        if log.maybe_flush(now_ms=now)],
            "expired_offsets": self.expire_offsets(now_ms=now),
            "aborted_transactions": self.abort_timed_out_transactions(now_ms=now),
        }
        with self._lock:
            self._logs.check_writable()
            self._logs.write_checkpoints()
        return report

    # --- durability ------------------------------------------------------------------------

    def flush(self) -> None:
        """Flush every partition (Log.flush: fdatasync of the .log files from each recovery
        point, fsync of their .txnindex; the recovery points advance) and write the four
        offset checkpoints. Raises :class:`ReadOnlyError`."""
        self._logs.flush()

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` with every partition's high watermark now,
        and nothing else (no flush, no other checkpoint): Kafka's
        ``ReplicaManager.checkpointHighWatermarks``, which a cluster member runs every
        ``replica.high.watermark.checkpoint.interval.ms``. Raises :class:`ReadOnlyError`."""
        self._logs.checkpoint_high_watermarks()

    def close(self) -> None:
        """Flush and close open producers, close open consumers (leaving their groups without
        committing), flush and close every Log, write the checkpoints and, last, the
        clean-shutdown marker; release the directory lock. Idempotent."""
        with self._lock:
            if self._logs.closed:
                return
            producers = list(self._producers)
            consumers = list(self._consumers)
        for producer in producers:
            producer.close()
        for consumer in consumers:
            consumer.close()
        with self._lock:
            self._logs.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._logs.closed

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("read-only" if self.read_only else "open")
        return f"Store({self.path!r}, {state}, topics={len(self._logs.partition_counts())})"
