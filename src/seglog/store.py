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
    of which exists here. Replaced atomically like the rest.
``__consumer_offsets-<n>/``
    committed consumer offsets, as records in Kafka's key/value schema in the compacted
    internal topic (see :mod:`seglog.coordinator.offsets`). Created on the first commit.
``__transaction_state-<n>/``
    the transaction coordinator's state (transactional id -> producer id, epoch, current
    transaction) in Kafka's key/value schema, in the compacted internal topic (see
    :mod:`seglog.coordinator.transaction`). Created when the first transactional producer starts.

Deleting a topic renames each partition directory to ``<topic>-<partition>.<uuid>-delete``
(Kafka's ``LocalLog.logDeleteDirName``), then removes it; a directory left with that suffix by
a crash is removed on the next open.

The Store wires the broker side: it owns the committed offsets
(:class:`~seglog.coordinator.offsets.OffsetsManager`), the group coordinators
(:class:`~seglog.coordinator.group.ConsumerGroup`), the producer-id blocks
(:class:`~seglog.coordinator.producer_ids.ProducerIdManager`) and the transaction coordinator,
handing each only the narrow :class:`~seglog.coordinator.internal_topics.InternalTopics` view of
itself. It implements :class:`~seglog.broker_api.BrokerApi`, the interface its Producers and
Consumers (and next the wire broker) call, and hands out those clients.

Thread safety: one lock guards the metadata (topics, groups, checkpoints); every Log locks
itself, so producers and consumers in several threads share one Store. One writer per data
directory, enforced with an OS lock on ``<dir>/.lock`` (a second one gets
:class:`~seglog.errors.LogLockedError`); any number of ``read_only=True`` Stores may follow it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import uuid
import warnings
import weakref
from typing import Any, Iterable, Mapping

from . import filenames
from .arguments import check_group_id
from .broker_api import TxnOffsetCommitRecords
from .storage import checkpoints
from ._backend import get_backend
from .storage.file_cache import FileCache
from .storage.locking import DirectoryLock, check_unlocked
from .storage.log import Log
from .types import MemberAssignment, OffsetAndMetadata, TopicPartition
from .config_table import topic_key
from .storage.config import TOPIC_CONFIG_NAMES, LogConfig, check_int, checked_now_ms
from .errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    IllegalStateError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogClosedError,
    ReadOnlyError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from .coordinator import offsets_schema
from .coordinator.assignors import ASSIGNORS
from .coordinator.group import ConsumerGroup
from .coordinator.offsets import OffsetsManager
from .coordinator.offsets_schema import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS_DEFAULT
from .coordinator.producer_ids import ProducerIdManager
from .coordinator.transaction import TRANSACTION_TIMEOUT_MS_DEFAULT, TransactionCoordinator
from .coordinator.txn_schema import TRANSACTION_STATE_TOPIC
from .clients.consumer import Consumer
from .clients.partitioner import partition_for_key
from .clients.producer import Producer

__all__ = ["Store", "Topic", "TopicPartition", "validate_topic_name", "TOPICS_FILE"]

#: seglog's record of topic ids, partition counts and config overrides (see module docstring).
TOPICS_FILE = filenames.TOPICS_FILE
TOPICS_FILE_VERSION = 0

#: Kafka's ``Topic.MAX_NAME_LENGTH``.
TOPIC_NAME_LENGTH_MAX = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
#: Most partitions one topic may have here (a limit on everything: each is a directory and
#: several open files).
TOPIC_PARTITIONS_MAX = 10000
#: Configs of Kafka's ``__consumer_offsets`` (``offsets.topic.segment.bytes`` and the
#: ``cleanup.policy=compact`` the group coordinator sets).
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                        "compression.type": "producer"}
#: Configs of Kafka's ``__transaction_state`` (``transaction.state.log.segment.bytes``,
#: compacted, uncompressed as ``TransactionLog`` enforces).
TRANSACTION_STATE_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                                  "compression.type": "uncompressed"}
#: The internal topics the store creates itself, with their configs.
INTERNAL_TOPIC_CONFIGS = {OFFSETS_TOPIC: OFFSETS_TOPIC_CONFIG,
                          TRANSACTION_STATE_TOPIC: TRANSACTION_STATE_TOPIC_CONFIG}
#: The KRaft metadata log's topic (Kafka's ``Topic.CLUSTER_METADATA_TOPIC_NAME``): its
#: ``__cluster_metadata-0`` directory in a Kafka log dir is the controller's Raft log, never a
#: topic partition (``LogManager.loadLogs`` skips it), so the scan skips it too.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
_DEFAULT_NODE_ID = 1
#: Kafka's ``offsets.retention.minutes`` (7 days) in milliseconds.
OFFSETS_RETENTION_MS_DEFAULT = 7 * 24 * 3600 * 1000



def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: raise :class:`InvalidTopicError` unless ``name`` is legal.

    Legal: 1 to 249 characters from ASCII letters, digits, ``.``, ``_`` and ``-``, and not
    ``.`` or ``..``.
    """
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than "
                                f"{TOPIC_NAME_LENGTH_MAX} characters, topic name: {name}")
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(f"Topic name \"{name}\" is illegal, it contains a character "
                                "other than ASCII alphanumerics, '.', '_' and '-'")


def _delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``LocalLog.logDeleteDirName``: ``<topic>-<partition>.<uuid hex>-delete``, the
    topic cut short so that the name fits 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{filenames.DELETE_DIR_SUFFIX}"
    return topic[:min(len(topic), 255 - len(suffix))] + suffix


def _collision_key(name: str) -> str:
    # Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names.
    return name.replace(".", "_")


def _as_config(config: LogConfig | Mapping[str, Any] | None,
               defaults: LogConfig | None = None) -> LogConfig:
    # ``defaults``: what names not given take (the Store's topic_config_defaults; None is
    # Kafka's own defaults).
    if config is None:
        return LogConfig() if defaults is None else defaults
    if isinstance(config, LogConfig):
        return config
    if not isinstance(config, Mapping):
        raise InvalidConfigError(f"config must be a LogConfig or a mapping, got "
                                 f"{type(config).__name__}")
    for name in config:
        if isinstance(name, str) and "." in name and name not in TOPIC_CONFIG_NAMES:
            # Kafka's CreateTopics refuses broker settings and unknown names alike; a Kafka
            # topic config seglog does not implement is refused by name.
            topic_key(name, suggest=False)
    if defaults is not None:
        return defaults.replace(**config)
    return LogConfig.from_dict(config)


def _overrides_of(config: LogConfig, defaults: LogConfig) -> dict[str, str]:
    """The Kafka names and values where ``config`` differs from ``defaults`` (what a topic
    sets itself; the registry keeps only these)."""
    base = defaults.to_kafka()
    return {name: value for name, value in config.to_kafka().items() if base.get(name) != value}


class Topic:
    """One topic of a :class:`Store`: its partitions' Logs, config and partitioner.

    ``name``, ``partitions`` (count), ``config`` (:class:`~seglog.storage.config.LogConfig`),
    ``topic_id`` (Kafka's base64url uuid text), ``is_internal``. Obtained from
    :meth:`Store.create_topic` or :meth:`Store.topic`; valid until the topic is deleted or the
    store closed (then :meth:`log` raises). Thread-safe.
    """

    def __init__(self, store: "Store", name: str, topic_id: uuid.UUID, config: LogConfig,
                 logs: list):
        self._store = store
        self.name = name
        self.topic_id = checkpoints.uuid_to_kafka_str(topic_id)
        self._uuid = topic_id
        self.config = config
        self._logs = logs
        self._deleted = False

    @property
    def partitions(self) -> int:
        """The partition count."""
        return len(self._logs)

    @property
    def is_internal(self) -> bool:
        """Whether this is one of Kafka's internal topics (``__consumer_offsets``,
        ``__transaction_state``)."""
        return self.name in INTERNAL_TOPIC_CONFIGS

    def partition_for(self, key: bytes | bytearray | memoryview) -> int:
        """The partition Kafka's default partitioner picks for ``key`` (murmur2, positive,
        modulo the partition count), identical to Kafka's clients. TypeError for None (keyless
        records are spread by the producer's sticky partitioner)."""
        return partition_for_key(key, len(self._logs))

    def log(self, partition: int):
        """The :class:`~seglog.storage.log.Log` of ``partition``. Raises
        :class:`UnknownTopicOrPartitionError` for a partition out of range, and
        :class:`LogClosedError` once the topic was deleted or the store closed."""
        if self._deleted or self._store._closed:
            raise LogClosedError(f"topic {self.name!r} is closed or deleted")
        if isinstance(partition, bool) or not isinstance(partition, int) \
                or not 0 <= partition < len(self._logs):
            raise UnknownTopicOrPartitionError(
                f"topic {self.name!r} has no partition {partition!r} "
                f"(it has {len(self._logs)})")
        return self._logs[partition]

    def topic_partitions(self) -> list[TopicPartition]:
        """Every :class:`TopicPartition` of the topic, in partition order."""
        return [TopicPartition(self.name, p) for p in range(len(self._logs))]

    def end_offsets(self) -> dict[int, int]:
        """``{partition: end offset}`` (the offset the next record will get)."""
        return {p: log.end_offset for p, log in enumerate(self._logs)}

    def start_offsets(self) -> dict[int, int]:
        """``{partition: log start offset}`` (the first offset still readable)."""
        return {p: log.start_offset for p, log in enumerate(self._logs)}

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={len(self._logs)}, id={self.topic_id})"


class _StorePartitionState:
    """The :class:`~seglog.storage.partition_state.PartitionState` a Store hands each of its Logs:
    the recovery point and log start offset live in the data dir's shared checkpoint files,
    and one clean-shutdown marker covers the whole directory.

    A recovery point is kept in memory and written with every other partition's on
    :meth:`Store.flush`/:meth:`Store.close` (Kafka writes it every 60 s and on shutdown; a
    stale one only means more recovery work). A moved log start offset is written at once,
    so records removed by retention or DeleteRecords never reappear after a crash.
    """

    def __init__(self, store: "Store", tp: TopicPartition):
        self._store = store
        self._tp = tp

    def load(self) -> tuple[int | None, int | None, bool]:
        store = self._store
        return (store._recovery_points.get(self._tp), store._log_start_offsets.get(self._tp),
                store._clean_shutdown)

    def begin_writing(self) -> None:
        # The Store removed the directory's marker (durably) before opening any Log.
        pass

    def save(self, *, recovery_point: int, log_start_offset: int) -> None:
        # Called by a Log under its own lock: take only the checkpoint lock (never the
        # store's metadata lock, which is held while calling into Logs).
        store = self._store
        with store._checkpoint_lock:
            store._recovery_points[self._tp] = recovery_point
            if store._log_start_offsets.get(self._tp) != log_start_offset:
                store._log_start_offsets[self._tp] = log_start_offset
                if store._checkpoints_open:
                    store._log_start_checkpoint.write(
                        dict(sorted(store._log_start_offsets.items())))

    def read_log_start_offset(self) -> int | None:
        """The checkpointed log start offset (a read-only follower re-reads it on refresh)."""
        offsets = self._store._log_start_checkpoint.read()
        return offsets.get(self._tp)

    def mark_clean_shutdown(self) -> None:
        # Written once for the directory by Store.close, after every Log closed.
        pass


class _InternalTopicsView:
    """The :class:`~seglog.coordinator.internal_topics.InternalTopics` a Store hands its
    coordinators: its metadata lock, its internal topics (created on first use), partition
    Logs and counts, and the append signal; nothing else of the Store."""

    def __init__(self, store: "Store"):
        self._store = store
        self.path = store.path
        self.read_only = store.read_only
        #: A cluster member's Store: its transaction coordinator completes only the
        #: partitions it leads (seglog.coordinator.transaction.complete_pending).
        self.replicated = store.replicated

    @property
    def lock(self) -> threading.RLock:
        return self._store._lock

    def existing_topic(self, name: str) -> "Topic | None":
        with self._store._lock:
            return self._store._topics.get(name)

    def internal_topic(self, name: str) -> "Topic":
        return self._store._internal_topic(name)

    def partition_log(self, tp: TopicPartition) -> Any:
        return self._store.topic(tp[0]).log(tp[1])

    def partition_counts(self) -> dict[str, int]:
        return self._store._partition_counts()

    def check_writable(self) -> None:
        self._store._check_writable()

    def notify_appended(self) -> None:
        self._store.notify_appended()


_INT64_MAX = 2**63 - 1


def _registry_entry(path: str, name: Any, entry: Any) -> dict:
    """One topic of the registry at ``path``, checked: a valid topic name, ``partitions`` an
    int in [0, TOPIC_PARTITIONS_MAX], ``topic_id`` None or a Kafka uuid string, ``config`` a
    mapping of str to JSON scalars or lists that :meth:`LogConfig.from_kafka` accepts.
    Returns the entry with ``config`` parsed to a :class:`LogConfig` under ``"log_config"``.
    CorruptCheckpointError naming the file, the topic and the field otherwise."""
    def bad(why: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{path}: topic {name!r}: {why}", path=path)

    if not isinstance(name, str):
        raise bad("the topic name is not a string")
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        raise bad(str(e)) from None
    if not isinstance(entry, dict):
        raise bad(f"the entry must be an object, got {type(entry).__name__}")
    partitions = entry.get("partitions", 0)
    if isinstance(partitions, bool) or not isinstance(partitions, int) \
            or not 0 <= partitions <= TOPIC_PARTITIONS_MAX:
        raise bad(f"partitions must be an int in [0, {TOPIC_PARTITIONS_MAX}], got "
                  f"{partitions!r}")
    topic_id = entry.get("topic_id")
    if topic_id is not None:
        if not isinstance(topic_id, str):
            raise bad(f"topic_id must be a string, got {type(topic_id).__name__}")
        try:
            checkpoints.uuid_from_kafka_str(topic_id)
        except (ValueError, CorruptCheckpointError) as e:
            raise bad(f"topic_id {topic_id!r} is not a Kafka uuid: {e}") from None
    config = entry.get("config", {})
    if not isinstance(config, dict):
        raise bad(f"config must be an object, got {type(config).__name__}")
    try:
        log_config = LogConfig.from_kafka(config)
    except InvalidConfigError as e:
        raise bad(f"config: {e}") from None
    return {**entry, "partitions": partitions, "log_config": log_config}


def _file_bytes_are(path: str, expected: bytes) -> bool:
    """Whether the file at ``path`` holds exactly ``expected`` (False when it is missing or
    differs: the caller then reads it the slow way, with its errors). One read of a small
    file, without a file object."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.read(fd, len(expected) + 1) == expected
    except OSError:
        return False
    finally:
        os.close(fd)


class Store:
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
    so a store made small for tests stays small. ``max_open_segments`` bounds the segment
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

    Use as a context manager, or call :meth:`close`. Thread-safe.
    """

    def __init__(self, path: str | os.PathLike, backend: Any = None, read_only: bool = False, *,
                 offsets_topic_partitions: int = OFFSETS_TOPIC_PARTITIONS_DEFAULT,
                 transaction_state_partitions: int | None = None,
                 node_id: int = _DEFAULT_NODE_ID, cluster_id: str | None = None,
                 topic_config_defaults: LogConfig | Mapping[str, Any] | None = None,
                 offsets_retention_ms: int = OFFSETS_RETENTION_MS_DEFAULT,
                 max_open_segments: int | None = None, replicated: bool = False):
        # topic_config_defaults and offsets_retention_ms: see the class docstring.
        self.topic_config_defaults = _as_config(topic_config_defaults)
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
        node_id = check_int("node_id", node_id, minimum=0, maximum=2**31 - 1)
        self.path = os.fspath(path)
        self.read_only = bool(read_only)
        self.replicated = bool(replicated)
        self.backend = backend if backend is None or isinstance(backend, str) else backend.name
        # Issue 14: the segment files open at once, over every partition (design.md §7).
        self.file_cache = FileCache(
            max_open_segments,
            descriptors_per_segment=get_backend(self.backend).Segment.open_descriptors_max)
        self.offsets_topic_partitions = offsets_topic_partitions
        self.transaction_state_partitions = transaction_state_partitions
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()  # the offset maps below and their files
        # Bumped by Producers after every append, so a consumer of several partitions can
        # wait for any of them on one condition (a Log's own condition covers one partition).
        self._data_cond = threading.Condition(threading.Lock())
        self._data_seq = 0
        self._producer_ids = ProducerIdManager(self._persist_producer_id_block_end,
                                               lock=self._lock)
        # What the coordinators see of this store (they never get the Store itself).
        self._internal = _InternalTopicsView(self)
        self._closed = True  # until fully open
        self._dir_lock = None
        self._topics: dict[str, Topic] = {}
        self._recovery_points: dict[TopicPartition, int] = {}
        self._log_start_offsets: dict[TopicPartition, int] = {}
        self._clean_shutdown = False
        self._checkpoints_open = False
        self._high_watermarks: dict[tuple[str, int], int] = {}
        self._cleaner_offsets: dict[tuple[str, int], int] = {}
        self._producers: "weakref.WeakSet" = weakref.WeakSet()
        self._consumers: "weakref.WeakSet" = weakref.WeakSet()
        self._groups: dict = {}
        # Callables naming groups with members outside this store's embedded coordinator
        # (the wire broker's classic groups): see add_active_groups_source.
        self._active_group_sources: list = []
        self._uncleanable: dict[TopicPartition, Exception] = {}  # see compact()
        self._offsets = OffsetsManager(self._internal)  # loaded by _open
        self._coordinator: TransactionCoordinator | None = None  # made on first use
        def cp(name: str) -> checkpoints.OffsetCheckpointFile:
            return checkpoints.OffsetCheckpointFile(os.path.join(self.path, name))

        self._recovery_checkpoint = cp(filenames.RECOVERY_POINT_CHECKPOINT)
        self._log_start_checkpoint = cp(filenames.LOG_START_OFFSET_CHECKPOINT)
        self._replication_checkpoint = cp(filenames.REPLICATION_OFFSET_CHECKPOINT)
        self._cleaner_checkpoint = cp(filenames.CLEANER_OFFSET_CHECKPOINT)
        try:
            self._open(node_id=node_id, cluster_id=cluster_id)
        except BaseException:
            self._abort_open()
            raise

    # --- opening ---------------------------------------------------------------------------

    def _open(self, *, node_id: int, cluster_id: str | None) -> None:
        if self.read_only:
            if not os.path.isdir(self.path):
                raise FileNotFoundError(f"no data directory at {self.path}")
        else:
            os.makedirs(self.path, exist_ok=True)
            self._dir_lock = DirectoryLock(self.path)
        self.meta = checkpoints.MetaProperties.read(self.path)
        if self.meta is None and not self.read_only:
            self.meta = checkpoints.MetaProperties(
                version=1, cluster_id=cluster_id or checkpoints.uuid_to_kafka_str(
                    checkpoints.new_kafka_uuid()),
                node_id=node_id, directory_id=checkpoints.new_kafka_uuid())
            self.meta.write(self.path)
        self._recovery_points = {TopicPartition(*k): v
                                 for k, v in self._recovery_checkpoint.read().items()}
        self._log_start_offsets = {TopicPartition(*k): v
                                   for k, v in self._log_start_checkpoint.read().items()}
        self._high_watermarks = self._replication_checkpoint.read()
        self._cleaner_offsets = self._cleaner_checkpoint.read()
        self._clean_shutdown = checkpoints.has_clean_shutdown_marker(self.path)
        # Ids of the last block may have been handed out before a crash: the producer-id
        # manager starts after it (_read_registry restores it).
        registry = self._read_registry()
        found = self._scan_partition_dirs()
        self._closed = False
        for name in sorted(set(registry) | set(found)):
            if self.read_only and name not in found:
                continue  # the writer is deleting it
            entry = registry.get(name, {})
            partitions = max(entry.get("partitions", 0), max(found.get(name, [-1])) + 1)
            topic_id = entry.get("topic_id")
            if entry:
                config = entry["log_config"]
                if self.topic_config_defaults != LogConfig():
                    config = self._with_topic_defaults(name, entry.get("config", {}))
            elif name in INTERNAL_TOPIC_CONFIGS:
                config = LogConfig.from_kafka(INTERNAL_TOPIC_CONFIGS[name])
            else:
                config = self.topic_config_defaults
            self._topics[name] = self._open_topic(
                name, partitions, config,
                checkpoints.uuid_from_kafka_str(topic_id) if topic_id else None, create=False,
                found=found.get(name, ()))
        self._checkpoints_open = not self.read_only
        if not self.read_only and set(found) - set(registry):
            self._write_registry()  # adopt topics found on disk (e.g. made by Kafka)
        if OFFSETS_TOPIC in self._topics:
            self._offsets.reload()  # reload committed offsets now
        coordinator = None
        if TRANSACTION_STATE_TOPIC in self._topics and not self.read_only:
            # Reload transactional ids after the offsets (completing a transaction a crash
            # left half-written applies its pending offset commits).
            with self._lock:
                coordinator = self._coordinator = TransactionCoordinator(
                    self._internal, self._producer_ids, self._offsets, complete_pending=False)
        if not self.read_only:
            # From here on a crash must make the next open recover. Not earlier: an open
            # that fails on corrupt bytes (a Log, __consumer_offsets, __transaction_state)
            # has written nothing, and the next open must not take it for a crash and cut
            # what this one refused to.
            checkpoints.remove_clean_shutdown_marker(self.path)
        if coordinator is not None:
            coordinator.complete_pending()

    def _abort_open(self) -> None:
        for topic in self._topics.values():
            for log in topic._logs:
                try:
                    log.close()
                except Exception:  # noqa: BLE001 - best effort while failing to open
                    pass
        self._topics.clear()
        self._closed = True
        if self._dir_lock is not None:
            self._dir_lock.close()
            self._dir_lock = None

    def _scan_partition_dirs(self) -> dict[str, list[int]]:
        """``{topic: [partitions]}`` of the partition directories; leftover ``-delete``
        directories are removed (a writer only). Kafka's KRaft metadata log
        (:data:`CLUSTER_METADATA_TOPIC`) is not a topic and is left alone."""
        found: dict[str, list[int]] = {}
        for entry in sorted(os.scandir(self.path), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name.endswith(filenames.DELETE_DIR_SUFFIX):
                if not self.read_only:
                    shutil.rmtree(entry.path, ignore_errors=True)
                continue
            parsed = filenames.parse_partition_dir_name(entry.name)
            if parsed is None:
                continue  # -future, -stray, or not ours
            topic, partition = parsed
            if topic == CLUSTER_METADATA_TOPIC:
                continue
            try:
                validate_topic_name(topic)
            except InvalidTopicError:
                continue
            found.setdefault(topic, []).append(partition)
        return found

    def _read_registry(self) -> dict[str, dict]:
        """The topics registry, every field checked: CorruptCheckpointError naming the file and
        the field for anything else (wrong JSON types included), never a stray TypeError."""
        path = os.path.join(self.path, TOPICS_FILE)
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            return {}
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            raise CorruptCheckpointError(f"{path} is not valid JSON: {e}", path=path) from None
        if not isinstance(data, dict) or data.get("version") != TOPICS_FILE_VERSION \
                or isinstance(data.get("version"), bool) \
                or not isinstance(data.get("topics"), dict):
            raise CorruptCheckpointError(f"{path}: unknown format", path=path)
        block_end = data.get("producer_id_block_end", 0)
        if isinstance(block_end, bool) or not isinstance(block_end, int) \
                or not 0 <= block_end <= _INT64_MAX:
            raise CorruptCheckpointError(
                f"{path}: producer_id_block_end must be an int in [0, {_INT64_MAX}], got "
                f"{block_end!r}", path=path)
        topics = {name: _registry_entry(path, name, entry)
                  for name, entry in data["topics"].items()}
        self._producer_ids.restore(block_end)
        return topics

    def _persist_producer_id_block_end(self, block_end: int) -> None:
        """The producer-id manager's callback: record a new block durably (the registry)."""
        self._write_registry(producer_id_block_end=block_end)

    def _write_registry(self, *, producer_id_block_end: int | None = None) -> None:
        if producer_id_block_end is None:
            producer_id_block_end = self._producer_ids.block_end
        topics = {name: {"topic_id": t.topic_id, "partitions": t.partitions,
                         "config": _overrides_of(t.config, self.topic_config_defaults)}
                  for name, t in sorted(self._topics.items())}
        text = json.dumps({"version": TOPICS_FILE_VERSION, "topics": topics,
                           "producer_id_block_end": producer_id_block_end},
                          indent=1, sort_keys=True)
        checkpoints.atomic_write_bytes(os.path.join(self.path, TOPICS_FILE),
                                       (text + "\n").encode("utf-8"))

    def _open_topic(self, name: str, partitions: int, config: LogConfig,
                    topic_id: uuid.UUID | None, *, create: bool,
                    found: Iterable[int] = ()) -> Topic:
        if create:
            assert topic_id is not None
            return Topic(self, name, topic_id, config,
                         self._create_partition_logs(name, partitions, config, topic_id))
        if topic_id is None and not self.read_only:
            # A topic found on disk but not in the registry (made by Kafka, or a crash during
            # create_topic): take its id from whichever partition recorded one, so that the
            # partitions missing partition.metadata get that id, not a new one.
            topic_id = self._found_topic_id(name, partitions)
        logs: list = []
        found = set(found)  # partitions whose directory the scan saw: no mkdir, no isdir
        expected: bytes | None = None  # partition.metadata's bytes for topic_id, as written
        try:
            for p in range(partitions):
                tp = TopicPartition(name, p)
                dir_path = os.path.join(self.path, filenames.partition_dir_name(name, p))
                if p in found:
                    pass
                elif not self.read_only:
                    os.makedirs(dir_path, exist_ok=True)
                elif not os.path.isdir(dir_path):
                    raise UnknownTopicOrPartitionError(f"partition directory {dir_path} is missing")
                metadata = checkpoints.PartitionMetadataFile(
                    os.path.join(dir_path, filenames.PARTITION_METADATA))
                if topic_id is not None and expected is None:
                    try:
                        expected = checkpoints.PartitionMetadataFile.encode(topic_id)
                    except ValueError:  # the zero uuid, which no file may name: read each
                        expected = b""
                if expected and _file_bytes_are(metadata.path, expected):
                    # The file of every partition of a topic holds the same bytes: compared,
                    # not parsed again (issue 14: 10,000 partitions are opened at once).
                    found_id = topic_id
                else:
                    found_id = metadata.read()
                if found_id is not None and topic_id is not None and found_id != topic_id:
                    # Kafka: InconsistentTopicIdException; the partition belongs elsewhere.
                    raise CorruptCheckpointError(
                        f"{metadata.path} names topic id "
                        f"{checkpoints.uuid_to_kafka_str(found_id)}, but topic {name!r} has id "
                        f"{checkpoints.uuid_to_kafka_str(topic_id)}", path=metadata.path)
                topic_id = topic_id or found_id
                pending_id = None
                if found_id is None and not self.read_only:
                    # The Log writes the file with its first flush (Log.open's topic_id, as
                    # at creation): a partition that never gets a record writes none, and a
                    # reopen writes nothing. The id is durable in the registry meanwhile
                    # (adopted topics are registered below, in _open).
                    topic_id = pending_id = topic_id or checkpoints.new_kafka_uuid()
                if not self.read_only:
                    check_unlocked(dir_path)  # no standalone writer has it (locking.py)
                logs.append(self._open_partition_log(dir_path, tp, config, topic_id=pending_id))
        except BaseException:
            for log in logs:
                log.close()
            raise
        return Topic(self, name, topic_id or checkpoints.new_kafka_uuid(), config, logs)

    def _open_partition_log(self, dir_path: str, tp: TopicPartition, config: LogConfig, *,
                            topic_id: uuid.UUID | None = None) -> Log:
        """One partition's Log, under this Store's data-dir lock (no lock of its own), with its
        cleaner checkpoint (Kafka's cleaner reads it from the log dir; the Log keeps it).
        The directory exists (made or found by the caller: no second ``mkdir``). ``topic_id``:
        the Log writes ``partition.metadata`` naming it with its first flush (None: the file
        is there already, or the store is read-only)."""
        replicated = {}
        if self.replicated:
            replicated = dict(auto_high_watermark=False,
                              high_watermark=self._high_watermarks.get((tp[0], tp[1])))
        log = Log.open(dir_path, config=config, backend=self.backend, read_only=self.read_only,
                       state=_StorePartitionState(self, tp), lock_directory=False,
                       file_cache=self.file_cache, create_directory=False, topic_id=topic_id,
                       **replicated)
        cleaner_offset = self._cleaner_offsets.get(tp)
        if cleaner_offset is not None:
            log.cleaner_checkpoint = cleaner_offset
        return log

    def _found_topic_id(self, name: str, partitions: int) -> uuid.UUID | None:
        """The topic id in the first ``partition.metadata`` of ``name`` that has one."""
        for p in range(partitions):
            found = checkpoints.PartitionMetadataFile(os.path.join(
                self.path, filenames.partition_dir_name(name, p),
                filenames.PARTITION_METADATA)).read()
            if found is not None:
                return found
        return None

    def _create_partition_logs(self, name: str, partitions: int, config: LogConfig,
                               topic_id: uuid.UUID) -> list:
        """Create the directories of a new topic and open their Logs (design.md §6.1, "Topic
        creation"): every directory is made (one ``mkdir`` each, and no file in it); each Log
        is opened with the topic id to record, which it writes to ``partition.metadata`` with
        its first flush, before any record of it is durable (Kafka's lazy
        ``PartitionMetadataFile``), and its first segment's entry (no file until first use).
        The data dir, which holds the new directories' entries, is fsynced once by the
        registry write that follows, which also makes the topic id durable. Linear in
        ``partitions``: nothing here reads or rewrites another partition's files."""
        dir_paths = [os.path.join(self.path, filenames.partition_dir_name(name, p))
                     for p in range(partitions)]
        for dir_path in dir_paths:
            os.mkdir(dir_path)
        logs: list = []
        try:
            for p, dir_path in enumerate(dir_paths):
                tp = TopicPartition(name, p)
                log = self._open_partition_log(dir_path, tp, config, topic_id=topic_id)
                logs.append(log)
                with self._checkpoint_lock:
                    # The start the Log began at, known as saved: its first flush or close
                    # then rewrites the shared log-start checkpoint only if the start moved,
                    # not once per new partition (all partitions each time: quadratic).
                    # The next Store.flush/close writes the entry with every other one.
                    self._log_start_offsets.setdefault(tp, log.start_offset)
        except BaseException:
            for log in logs:
                log.close()
            raise
        return logs

    # --- topics ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"store {self.path} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"store {self.path} was opened read-only")

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

    def _create_topic(self, name: str, partitions: int, config, *,
                      topic_id: uuid.UUID | None = None) -> Topic:
        # TypeError for a non-integer, ValueError out of 1..TOPIC_PARTITIONS_MAX (check_int).
        partitions = check_int("partitions", partitions, minimum=1, maximum=TOPIC_PARTITIONS_MAX)
        log_config = _as_config(config, self.topic_config_defaults)
        with self._lock:
            self._check_writable()
            if name in self._topics:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            for existing in self._topics:
                if _collision_key(existing) == _collision_key(name):
                    raise InvalidTopicError(f"Topic '{name}' collides with existing topic: "
                                            f"{existing}")
            for p in range(partitions):
                if os.path.exists(os.path.join(self.path, filenames.partition_dir_name(name, p))):
                    raise TopicExistsError(f"partition directory of '{name}' {p} already exists")
            try:
                topic = self._open_topic(name, partitions, log_config,
                                         topic_id or checkpoints.new_kafka_uuid(), create=True)
            except BaseException:
                for p in range(partitions):
                    shutil.rmtree(os.path.join(self.path, filenames.partition_dir_name(name, p)),
                                  ignore_errors=True)
                raise
            self._topics[name] = topic
            self._write_registry()
            self._on_metadata_change()
            return topic

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name`` and its data, as Kafka does: close its Logs, rename each
        partition directory to ``<topic>-<partition>.<uuid>-delete``, drop it from the
        checkpoints and the registry, then remove the directories. Committed offsets of its
        partitions are deleted (tombstones in ``__consumer_offsets``) and groups subscribed to
        it rebalance. Raises :class:`UnknownTopicOrPartitionError`, :class:`InvalidTopicError`
        for ``__consumer_offsets``, :class:`ReadOnlyError`."""
        with self._lock:
            self._check_writable()
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if topic.is_internal:
                raise InvalidTopicError(f"{name} is an internal topic and cannot be deleted")
            self._offsets.delete_topic_offsets(name)
            topic._deleted = True
            del self._topics[name]
            renamed = []
            for p, log in enumerate(topic._logs):
                log.close()
                src = os.path.join(self.path, filenames.partition_dir_name(name, p))
                dst = os.path.join(self.path, _delete_dir_name(name, p))
                os.rename(src, dst)
                renamed.append(dst)
                tp = TopicPartition(name, p)
                with self._checkpoint_lock:
                    self._recovery_points.pop(tp, None)
                    self._log_start_offsets.pop(tp, None)
            checkpoints.fsync_dir(self.path)
            self._write_registry()
            self._write_checkpoints()
            self._on_metadata_change()
        for path in renamed:
            shutil.rmtree(path, ignore_errors=True)

    def topics(self) -> list[str]:
        """Names of every topic, internal ones included, sorted."""
        with self._lock:
            self._check_open()
            return sorted(self._topics)

    def topic(self, name: str) -> Topic:
        """The :class:`Topic` ``name``; :class:`UnknownTopicOrPartitionError` if absent."""
        with self._lock:
            self._check_open()
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            return topic

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._topics

    def log(self, tp: tuple[str, int]):
        """The Log of ``(topic, partition)``."""
        return self.topic(tp[0]).log(tp[1])

    def _partition_counts(self) -> dict[str, int]:
        with self._lock:
            return {name: t.partitions for name, t in self._topics.items()}

    def _offsets_topic(self) -> Topic:
        """``__consumer_offsets``, created on first use (Kafka creates it on the first
        FindCoordinator) with ``offsets_topic_partitions`` partitions."""
        with self._lock:
            topic = self._topics.get(OFFSETS_TOPIC)
            if topic is None:
                topic = self._create_topic(OFFSETS_TOPIC, self.offsets_topic_partitions,
                                           LogConfig.from_kafka(OFFSETS_TOPIC_CONFIG))
            return topic

    def _transaction_state_topic(self) -> Topic:
        """``__transaction_state``, created on first use (Kafka creates it on the first
        FindCoordinator for a transactional id) with ``transaction_state_partitions``."""
        with self._lock:
            topic = self._topics.get(TRANSACTION_STATE_TOPIC)
            if topic is None:
                topic = self._create_topic(TRANSACTION_STATE_TOPIC,
                                           self.transaction_state_partitions,
                                           LogConfig.from_kafka(TRANSACTION_STATE_TOPIC_CONFIG))
            return topic

    def _internal_topic(self, name: str) -> Topic:
        if name == OFFSETS_TOPIC:
            return self._offsets_topic()
        if name == TRANSACTION_STATE_TOPIC:
            return self._transaction_state_topic()
        raise InvalidTopicError(f"{name!r} is not an internal topic")

    def _txn_coordinator(self) -> TransactionCoordinator:
        with self._lock:
            self._check_writable()
            if self._coordinator is None:
                self._coordinator = TransactionCoordinator(self._internal, self._producer_ids,
                                                           self._offsets)
            return self._coordinator

    def describe_transaction(self, transactional_id: str):
        """The coordinator's state of ``transactional_id`` (Kafka's DescribeTransactions):
        a :class:`~seglog.coordinator.transaction.TransactionDescription` (producer id, epoch, state
        name, partitions, timeout, times), or None if no producer ever initialised it.
        Raises ReadOnlyError."""
        return self._txn_coordinator().describe(transactional_id)

    def _on_metadata_change(self) -> None:
        for group in list(self._groups.values()):
            group.on_metadata_change()

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
                   topics: frozenset, assignor: str, group_instance_id: str | None) -> str:
        """Kafka's JoinGroup (see ``BrokerApi.join_group``)."""
        if group_id in self._groups_active_elsewhere():
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
        with self._lock:
            group = self._groups.get(group_id)
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
        return self._offsets.committed(group_id, tp)

    def offset_commit_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transactional commit of ``group_id`` for ``tp`` awaits its marker."""
        return self._offsets.has_pending(group_id, tp)

    def init_producer_id(self, transactional_id: str | None = None, *,
                         transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS_DEFAULT
                         ) -> tuple[int, int]:
        """Kafka's InitProducerId. Without ``transactional_id``: a producer id never used
        before in this data directory (blocks of 1000 recorded durably in the topics registry
        before their ids are handed out, so ids stay unique across restarts and crashes),
        epoch 0. With one: the transaction coordinator's (see ``BrokerApi``). Raises
        ReadOnlyError, LogClosedError."""
        if transactional_id is not None:
            return self._txn_coordinator().init_producer_id(
                transactional_id, timeout_ms=transaction_timeout_ms)
        with self._lock:
            self._check_writable()
            return self._producer_ids.allocate(), 0

    def check_producer_epoch(self, transactional_id: str, producer_id: int,
                             producer_epoch: int) -> None:
        """ProducerFencedError unless the producer is the current one of the id."""
        self._txn_coordinator().check_producer(transactional_id, producer_id, producer_epoch)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, partitions: Iterable[TopicPartition]) -> None:
        """Kafka's AddPartitionsToTxn."""
        self._txn_coordinator().add_partitions(transactional_id, producer_id, producer_epoch,
                                               partitions)

    def _group_offsets_partition(self, group_id: str) -> TopicPartition:
        topic = self._offsets_topic()
        return TopicPartition(topic.name, offsets_schema.offsets_partition_for_group(
            group_id, topic.partitions))

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> TopicPartition:
        """Kafka's AddOffsetsToTxn: adds the group's ``__consumer_offsets`` partition to the
        transaction and returns it."""
        tp = self._group_offsets_partition(check_group_id(group_id))
        self.add_partitions_to_txn(transactional_id, producer_id, producer_epoch, [tp])
        return tp

    def txn_offset_commit_records(self, group_id: str,
                                  offsets: Mapping[TopicPartition, OffsetAndMetadata]
                                  ) -> TxnOffsetCommitRecords:
        """The records of a transactional offset commit (see ``BrokerApi``)."""
        partition, keys, values, timestamps = self._offsets.transactional_records(
            group_id, offsets)
        return TxnOffsetCommitRecords(TopicPartition(OFFSETS_TOPIC, partition), keys, values,
                                      timestamps)

    def txn_offset_commit(self, group_id: str, producer_id: int,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                          partition: int, base_offset: int, commit_timestamp_ms: int) -> None:
        """Hold an appended transactional offset commit until its marker."""
        self._offsets.add_pending(partition, producer_id, group_id, offsets, base_offset,
                                  commit_timestamp_ms)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                commit: bool, bump_epoch: bool = False) -> tuple[int, int]:
        """Kafka's EndTxn (see ``BrokerApi.end_txn``)."""
        return self._txn_coordinator().end_transaction(
            transactional_id, producer_id, producer_epoch, commit=commit, bump_epoch=bump_epoch)

    # --- txn: the wire broker's transaction APIs (seglog.server.apis.txn) ------------------

    def transaction_coordinator(self) -> TransactionCoordinator:
        """The store's :class:`~seglog.coordinator.transaction.TransactionCoordinator`
        (made on first use), whose ``handle_*`` methods the wire broker calls for Kafka's
        exact transaction errors. Raises ReadOnlyError, LogClosedError."""
        return self._txn_coordinator()

    # --- clients ---------------------------------------------------------------------------

    def producer(self, **kwargs):
        """A :class:`~seglog.clients.producer.Producer` writing to this store; keyword arguments as
        its constructor (``linger_ms``, ``batch_size_bytes``, ``compression``,
        ``idempotent``, ``transactional_id``, ...). Producers still open are flushed and
        closed by :meth:`close` (a transaction still open is aborted, as Kafka's close does)."""
        with self._lock:
            self._check_writable()
            producer = Producer(self, **kwargs)
            self._producers.add(producer)
            return producer


    def consumer(self, group_id: str | None = None, topics: Iterable[str] | None = None, **kwargs):
        """A :class:`~seglog.clients.consumer.Consumer` in group ``group_id`` (None: no group, no
        commits), subscribed to ``topics`` if given; keyword arguments as its constructor
        (``auto_offset_reset``, ``partition_assignment_strategy``, ...). Consumers still open
        are closed (without committing) by :meth:`close`."""
        with self._lock:
            self._check_open()
            consumer = Consumer(self, group_id=group_id, **kwargs)
            self._consumers.add(consumer)
        if topics is not None:
            consumer.subscribe(topics)
        return consumer

    def group(self, group_id: str):
        """The :class:`~seglog.coordinator.group.ConsumerGroup` coordinator of ``group_id``
        (created empty if it has no members yet). Raises InvalidGroupIdError (a ValueError)
        for an empty group id, LogClosedError."""
        with self._lock:
            self._check_open()
            group = self._groups.get(group_id)
            if group is None:
                group = ConsumerGroup(self._internal, self._offsets, group_id)
                self._groups[group_id] = group
            return group

    def delete_group(self, group_id: str) -> None:
        """Delete a group's committed offsets (Kafka's DeleteGroups). Refused with
        :class:`IllegalStateError` while the group has members (NON_EMPTY_GROUP)."""
        with self._lock:
            self._check_writable()
            group = self._groups.get(group_id)
            if group is not None and group.members():
                raise IllegalStateError(f"The group {group_id!r} is not empty (NON_EMPTY_GROUP)")
            if OFFSETS_TOPIC in self._topics:
                doomed = {tp: None for tp in self._offsets.all_committed(group_id)}
                self._offsets.commit(group_id, doomed)
            self._groups.pop(group_id, None)

    def groups(self) -> list[str]:
        """Ids of the groups with members or committed offsets, sorted."""
        with self._lock:
            self._check_open()
            ids = {g for g, group in self._groups.items() if group.members()}
            ids |= set(self._offsets.groups())
            return sorted(ids)

    def refresh(self) -> bool:
        """Read-only stores: follow the writer. Picks up topics created since the store
        opened (their ``seglog-topics.json`` entry and partition directories) and calls
        ``Log.refresh`` on every partition (new batches and segments, retention); topics the
        writer deleted are dropped. Returns whether anything changed. Raises
        :class:`ReadOnlyError` on a writer (it already sees everything)."""
        with self._lock:
            self._check_open()
            if not self.read_only:
                raise ReadOnlyError("refresh() is for stores opened with read_only=True")
            changed = False
            registry = self._read_registry()
            found = self._scan_partition_dirs()
            for name in sorted(set(self._topics) - set(found)):
                topic = self._topics.pop(name)
                topic._deleted = True
                for log in topic._logs:
                    log.close()
                changed = True
            for name, topic in self._topics.items():
                for log in topic._logs:
                    changed |= log.refresh()
            for name in sorted(set(found) - set(self._topics)):
                entry = registry.get(name)
                if entry is None or len(found[name]) < entry.get("partitions", 0):
                    continue  # the writer is still creating it
                topic_id = entry.get("topic_id")
                self._topics[name] = self._open_topic(
                    name, entry["partitions"], entry["log_config"],
                    checkpoints.uuid_from_kafka_str(topic_id) if topic_id else None,
                    create=False)
                changed = True
            if changed:
                if OFFSETS_TOPIC in self._topics:
                    self._offsets.reload()  # replay the writer's commits
                self._on_metadata_change()
            return changed

    # --- admin (issue 11: the wire broker's CreatePartitions and config changes) -----------

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
        count = check_int("count", count, minimum=1, maximum=TOPIC_PARTITIONS_MAX)
        with self._lock:
            self._check_writable()
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            current = topic.partitions
            if count <= current:
                raise InvalidPartitionsError(
                    f"Topic already has {current} partition(s)." if count == current else
                    f"The topic {name} currently has {current} partition(s); {count} would "
                    "not be an increase.")
            for p in range(current, count):
                if os.path.exists(os.path.join(self.path, filenames.partition_dir_name(name, p))):
                    raise TopicExistsError(f"partition directory of '{name}' {p} already exists")
            try:
                new_logs = self._add_partition_logs(name, current, count, topic.config,
                                                    topic._uuid)
            except BaseException:
                for p in range(current, count):
                    shutil.rmtree(os.path.join(self.path, filenames.partition_dir_name(name, p)),
                                  ignore_errors=True)
                raise
            # A new list, not an in-place extend: a reader that took the old list keeps a
            # consistent view of the partitions it counted.
            topic._logs = topic._logs + new_logs
            self._write_registry()
            self._on_metadata_change()
            return topic

    def _add_partition_logs(self, name: str, first: int, end: int, config: LogConfig,
                            topic_id: uuid.UUID) -> list:
        """The Logs of partitions ``first..end-1`` of an existing topic, made as
        :meth:`_create_partition_logs` makes a new topic's (directories, then each Log, which
        writes ``partition.metadata`` with its first flush)."""
        dir_paths = [os.path.join(self.path, filenames.partition_dir_name(name, p))
                     for p in range(first, end)]
        for dir_path in dir_paths:
            os.mkdir(dir_path)
        logs: list = []
        try:
            for p, dir_path in zip(range(first, end), dir_paths):
                tp = TopicPartition(name, p)
                log = self._open_partition_log(dir_path, tp, config, topic_id=topic_id)
                logs.append(log)
                with self._checkpoint_lock:
                    self._log_start_offsets.setdefault(tp, log.start_offset)
        except BaseException:
            for log in logs:
                log.close()
            raise
        return logs

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
        parsed = {name: _as_config(config, self.topic_config_defaults)
                  for name, config in configs.items()}
        with self._lock:
            self._check_writable()
            for name in parsed:
                if name not in self._topics:
                    raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            for name, config in parsed.items():
                topic = self._topics[name]
                topic.config = config
                for log in topic._logs:
                    log.update_config(config)
            if parsed:
                self._write_registry()

    def alter_topic_config(self, name: str, config: LogConfig | Mapping[str, Any]) -> Topic:
        """:meth:`alter_topic_configs` for one topic; returns its :class:`Topic`."""
        self.alter_topic_configs({name: config})
        return self.topic(name)

    def set_topic_config_defaults(self, defaults: LogConfig | Mapping[str, Any]) -> None:
        """Replace ``topic_config_defaults`` (a dynamic change of the broker's ``log.*``
        defaults): topics created from now on take them, and the registry keeps the settings
        that differ from them. Existing topics keep their configs (the caller moves those
        that set nothing with :meth:`alter_topic_configs`). Raises InvalidConfigError."""
        defaults = _as_config(defaults)
        with self._lock:
            self.topic_config_defaults = defaults

    # --- groups (issue 11: the wire broker's classic group coordinator) ---------------------

    def write_group_metadata(self, group_id: str, value: bytes | None, *,
                             timestamp_ms: int | None = None) -> int:
        """Append a classic group's membership record (key: Kafka's GroupMetadataKey of
        ``group_id``; ``value``: an encoded GroupMetadataValue, or None for the tombstone
        that deletes the group) to the group's ``__consumer_offsets`` partition, creating
        the topic on first use; returns its offset. The offsets loader ignores these records;
        :meth:`group_metadata_records` reads them back. Raises InvalidGroupIdError,
        ReadOnlyError, LogClosedError and what the append raises."""
        check_group_id(group_id)
        now = checked_now_ms(timestamp_ms)
        with self._lock:
            self._check_writable()
            tp = self._group_offsets_partition(group_id)
            first, _last = self._topics[tp.topic].log(tp.partition).append_batch(
                [value], keys=[offsets_schema.encode_key(offsets_schema.GroupMetadataKey(group_id))],
                timestamps_ms=[now])
        self.notify_appended()
        return first

    def group_metadata_records(self, *, partition: int | None = None
                               ) -> dict[str, bytes | None]:
        """``{group_id: value bytes or None}``: the last membership record of each group in
        ``__consumer_offsets`` (None: its tombstone), in log order; empty when the topic does
        not exist. ``partition``: that partition's records only (a cluster member loading
        the partition it now leads). Records are CRC-checked as read (CorruptRecordError); a
        key that does not parse is skipped as the offsets loader skips it."""
        with self._lock:
            self._check_open()
            topic = self._topics.get(OFFSETS_TOPIC)
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

    def load_offsets_partition(self, partition: int) -> None:
        """Replay ``__consumer_offsets`` partition ``partition`` into the committed offsets,
        replacing what was known of its groups (a cluster member that became the partition's
        leader: :meth:`OffsetsManager.load_partition`). Raises CorruptRecordError."""
        self._offsets.load_partition(partition)

    def unload_offsets_partition(self, partition: int) -> None:
        """Forget the committed offsets of the groups of ``__consumer_offsets`` partition
        ``partition`` (a cluster member that does not lead it:
        :meth:`OffsetsManager.unload_partition`); its log is untouched."""
        self._offsets.unload_partition(partition)

    # --- server core (issue 11: broker-level topic defaults) ----------------------------------

    def _with_topic_defaults(self, name: str, overrides: Mapping[str, Any]) -> LogConfig:
        """A reopened topic's config: its recorded overrides over ``topic_config_defaults``."""
        try:
            return self.topic_config_defaults.replace(**overrides)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"topic {name!r}: its configs {dict(overrides)} do not "
                                     f"fit the broker's defaults: {e}") from None

    # --- housekeeping (Kafka's LogManager tasks and cleaner threads, run when called) -------

    def _writable_logs(self):
        # Offline logs (a failed write: Log.offline) refuse every write until a reopen
        # recovers them; the periodic work leaves them out rather than fail on each.
        with self._lock:
            self._check_writable()
            return [(TopicPartition(n, p), log) for n, t in sorted(self._topics.items())
                    for p, log in enumerate(t._logs) if not log.offline]

    def apply_retention(self, *, now_ms: int | None = None) -> dict[TopicPartition, list[int]]:
        """Run ``Log.apply_retention`` on every partition (Kafka's retention check, which a
        broker runs every ``log.retention.check.interval.ms``); returns ``{tp: base offsets
        of deleted segments}`` for the partitions that lost any. Raises ReadOnlyError."""
        out = {}
        for tp, log in self._writable_logs():
            deleted = log.apply_retention(now_ms=now_ms)
            if deleted:
                out[tp] = deleted
        return out

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
        out = {}
        for tp, log in self._writable_logs():
            if log.config.compaction_enabled and tp not in self._uncleanable:
                try:
                    stats = log.compact(now_ms=now_ms)
                except CorruptRecordError as e:
                    self._uncleanable[tp] = e
                    warnings.warn(f"seglog: compaction of {tp.topic}-{tp.partition} stopped "
                                  f"and will not be retried until the store reopens: {e}",
                                  RuntimeWarning, stacklevel=2)
                    continue
                if not stats.skipped:
                    out[tp] = stats
        return out

    @property
    def uncleanable_partitions(self) -> dict[TopicPartition, Exception]:
        """``{tp: error}`` of the partitions :meth:`compact` stopped cleaning because their
        log holds a corrupt batch (Kafka's uncleanable partitions); empty normally. A copy."""
        return dict(self._uncleanable)

    def expire_offsets(self, *, now_ms: int | None = None,
                       retention_ms: int | None = None) -> dict:
        """Delete (with tombstones) the committed offsets that are ``retention_ms`` old (None:
        the store's ``offsets_retention_ms``), of groups that have no members (Kafka's
        ``offsets.retention.minutes``, 7 days, checked by the coordinator every
        ``offsets.retention.check.interval.ms``). Returns ``{group_id:
        [TopicPartition, ...]}`` of what was removed. Raises ReadOnlyError."""
        now = checked_now_ms(now_ms)
        with self._lock:
            self._check_writable()
            if OFFSETS_TOPIC not in self._topics:
                return {}
            active = {g for g, group in self._groups.items() if group.members()}
            active |= self._groups_active_elsewhere()
            if retention_ms is None:
                retention_ms = self.offsets_retention_ms
            retention_ms = check_int("retention_ms", retention_ms, minimum=0)
            return self._offsets.expire(now, retention_ms, active)

    def add_active_groups_source(self, source) -> None:
        """Register ``source``, a thread-safe callable returning the ids of groups that have
        members outside the embedded coordinator (the wire broker's classic groups):
        :meth:`expire_offsets` keeps their offsets, as Kafka keeps those of a group with
        members, and :meth:`join_group` refuses an in-process consumer joining one."""
        if not callable(source):
            raise TypeError(f"source must be callable, got {type(source).__name__}")
        with self._lock:
            self._active_group_sources.append(source)

    def _groups_active_elsewhere(self) -> set[str]:
        active: set[str] = set()
        for source in list(self._active_group_sources):
            active.update(source())
        return active

    def abort_timed_out_transactions(self, *, now_ms: int | None = None) -> list[str]:
        """Abort the transactions open longer than their producer's ``transaction_timeout_ms``
        and fence those producers (Kafka's coordinator does this every 10 s); returns their
        transactional ids. Raises ReadOnlyError."""
        with self._lock:
            self._check_writable()
            if TRANSACTION_STATE_TOPIC not in self._topics:
                return []
            return self._txn_coordinator().abort_timed_out(now_ms=now_ms)

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
        report: dict[str, Any] = {
            "retention": self.apply_retention(now_ms=now),
            "compaction": self.compact(now_ms=now),
            "flushed": [tp for tp, log in self._writable_logs() if log.maybe_flush(now_ms=now)],
            "expired_offsets": self.expire_offsets(now_ms=now),
            "aborted_transactions": self.abort_timed_out_transactions(now_ms=now),
        }
        with self._lock:
            self._check_writable()
            self._write_checkpoints()
        return report

    # --- durability ------------------------------------------------------------------------

    def flush(self) -> None:
        """Flush every partition (Log.flush: fdatasync of the .log files from each recovery
        point, fsync of their .txnindex; the recovery points advance) and write the four
        offset checkpoints. Raises :class:`ReadOnlyError`."""
        with self._lock:
            self._check_writable()
            for topic in self._topics.values():
                for log in topic._logs:
                    if not log.offline:  # recovered at the next open instead
                        log.flush()
            self._write_checkpoints()

    def use_cluster_producer_id_blocks(self, claim_block) -> None:
        """Hand out producer ids from blocks ``claim_block() -> (first id, last id)`` claims
        (a cluster member: ZooKeeper's ``/latest_producer_id_block``) instead of the blocks
        recorded in this data directory (:meth:`ProducerIdManager.use_cluster_blocks`)."""
        self._producer_ids.use_cluster_blocks(claim_block)

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` with every partition's high watermark now,
        and nothing else (no flush, no other checkpoint): Kafka's
        ``ReplicaManager.checkpointHighWatermarks``, which a cluster member runs every
        ``replica.high.watermark.checkpoint.interval.ms``. Raises :class:`ReadOnlyError`."""
        with self._lock:
            self._check_writable()
            high_watermarks = self._gather("high_watermark")
        with self._checkpoint_lock:
            self._high_watermarks = high_watermarks
            self._replication_checkpoint.write(high_watermarks)

    def _gather(self, attribute: str) -> dict[tuple[str, int], int]:
        out = {}
        for name, topic in sorted(self._topics.items()):
            for p, log in enumerate(topic._logs):
                value = getattr(log, attribute, None)
                if value is not None:
                    out[(name, p)] = value
        return out

    def _write_checkpoints(self, *, from_logs: bool = True) -> None:
        """Write the four data-dir checkpoints. ``from_logs`` reads the live Logs first; after
        they are closed the values they saved last are written. Lock order: the metadata lock
        (held by the caller), then Logs' locks, then the checkpoint lock; property reads of a
        Log take no lock."""
        with self._checkpoint_lock:
            self._write_checkpoints_locked(from_logs)

    def _write_checkpoints_locked(self, from_logs: bool) -> None:
        if from_logs:
            for name, topic in self._topics.items():
                for p, log in enumerate(topic._logs):
                    tp = TopicPartition(name, p)
                    recovery_point = getattr(log, "recovery_point", None)
                    if recovery_point is not None:
                        self._recovery_points[tp] = recovery_point
                    self._log_start_offsets[tp] = log.start_offset
            self._high_watermarks = self._gather("high_watermark")
            self._cleaner_offsets = self._gather("cleaner_checkpoint")
        live = {(n, p) for n, t in self._topics.items() for p in range(t.partitions)}
        self._recovery_checkpoint.write(
            {tp: v for tp, v in sorted(self._recovery_points.items()) if tp in live})
        self._log_start_checkpoint.write(
            {tp: v for tp, v in sorted(self._log_start_offsets.items()) if tp in live})
        self._replication_checkpoint.write(
            {tp: v for tp, v in self._high_watermarks.items() if tp in live})
        self._cleaner_checkpoint.write(
            {tp: v for tp, v in self._cleaner_offsets.items() if tp in live})

    def close(self) -> None:
        """Flush and close open producers, close open consumers (leaving their groups without
        committing), flush and close every Log, write the checkpoints and, last, the
        clean-shutdown marker; release the directory lock. Idempotent."""
        with self._lock:
            if self._closed:
                return
            producers = list(self._producers)
            consumers = list(self._consumers)
        for producer in producers:
            producer.close()
        for consumer in consumers:
            consumer.close()
        with self._lock:
            if self._closed:
                return
            try:
                if not self.read_only:
                    self._high_watermarks = self._gather("high_watermark")
                    self._cleaner_offsets = self._gather("cleaner_checkpoint")
                # Each Log flushes and saves its recovery point and start offset on close.
                offline = False
                for topic in self._topics.values():
                    for log in topic._logs:
                        offline = offline or log.offline
                        log.close()
                if not self.read_only:
                    self._write_checkpoints(from_logs=False)
                    # An offline log (a failed write) must be recovered at the next open, and
                    # the marker is the whole directory's: without it every log recovers
                    # from its recovery point (Kafka's restart after a log dir failure).
                    if not offline:
                        checkpoints.write_clean_shutdown_marker(self.path)
            finally:
                self._closed = True
                self._checkpoints_open = False
                if self._dir_lock is not None:
                    self._dir_lock.close()
                    self._dir_lock = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self.read_only else "open")
        return f"Store({self.path!r}, {state}, topics={len(self._topics)})"
