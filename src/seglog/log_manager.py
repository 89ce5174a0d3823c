"""The partitions on disk of the data directories: Kafka's ``LogManager`` over ``log.dirs``.

A :class:`LogManager` owns what a Kafka broker keeps under its log dirs, laid out the same way
(the :mod:`seglog.store` docstring lists the files): the topics and their partitions' Logs,
the topics registry (``seglog-topics.json``, :mod:`seglog.topic_registry`, written to every
online dir), and per log dir (JBOD: several ``log.dirs`` entries, :class:`LogDir`) the four
offset checkpoints of the partitions it holds, ``meta.properties``, the clean-shutdown marker
and the directory's writer lock. Which dir holds a partition is found by scanning the dirs at
open; a new partition goes to the online dir holding the fewest (Kafka's ``nextLogDirs``). A
dir that fails (unreadable at open, or an I/O error on one of its partitions) takes its
partitions offline (:class:`~seglog.offline_partitions.OfflinePartitions`), not the others;
the open fails only when every dir failed (Kafka's rule);
it creates, grows, reconfigures and deletes topics, and runs the housekeeping Kafka's
LogManager runs on timers (retention, the cleaner, flushes, checkpoints) when it is called.

It knows nothing of groups, transactions or clients. Which topics are internal, and their
configs, are handed in (``internal_topic_configs``); the registry's ``producer_id_block_end``
is kept for the producer-id blocks (:class:`ProducerIdBlocks`) without knowing what they are.
Listeners the caller runs around metadata changes (groups rebalancing, offsets deleted with a
topic) are the :class:`~seglog.store.Store`'s business: every method here that changes the
topics leaves that to its caller, which holds :attr:`LogManager.lock` across both.
"""

from __future__ import annotations

import os
import errno
import shutil
import threading
import time
import uuid
import warnings
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from . import filenames, topic_registry
from ._backend import get_backend
from .clients.partitioner import partition_for_key
from .errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    KafkaStorageError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogClosedError,
    ReadOnlyError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from .offline_partitions import OfflinePartitions
from .storage import checkpoints
from .config_table import topic_key
from .storage.config import TOPIC_CONFIG_NAMES, LogConfig, check_int
from .storage.file_cache import FileCache
from .storage.locking import DirectoryLock, check_unlocked
from .storage.log import Log
from .topic_registry import (
    TOPIC_PARTITIONS_MAX,
    TOPICS_FILE,
    validate_topic_name,
)
from .types import TopicPartition

__all__ = ["LogManager", "LogDir", "ProducerIdBlocks", "FUTURE_DIR_SUFFIX", "future_dir_name", "Topic", "validate_topic_name", "delete_dir_name",
           "TOPICS_FILE", "TOPIC_PARTITIONS_MAX", "CLUSTER_METADATA_TOPIC",
           "CREATE_PARTITIONS_PER_HOLD"]

#: The KRaft metadata log's topic (Kafka's ``Topic.CLUSTER_METADATA_TOPIC_NAME``): its
#: ``__cluster_metadata-0`` directory in a Kafka log dir is the controller's Raft log, never a
#: topic partition (``LogManager.loadLogs`` skips it), so the scan skips it too.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
#: How many partitions of a new topic are made per hold of the metadata lock: about 10 ms of
#: work, the longest a creation keeps the broker's event loop from a topic lookup.
CREATE_PARTITIONS_PER_HOLD = 128
#: The pause between two such holds (see _create_partition_logs).
CREATE_PAUSE_S = 0.001


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``LocalLog.logDeleteDirName``: ``<topic>-<partition>.<uuid hex>-delete``, the
    topic cut short so that the name fits 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{filenames.DELETE_DIR_SUFFIX}"
    return topic[:min(len(topic), 255 - len(suffix))] + suffix


#: The suffix of a partition's copy being filled in another log dir (Kafka's
#: ``UnifiedLog.FutureDirSuffix``).
FUTURE_DIR_SUFFIX = "-future"


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``UnifiedLog.logFutureDirName``: ``<topic>-<partition>.<uuid hex>-future``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def _copy_changed(src: str, dst: str, copied: dict[str, tuple[int, int]]) -> None:
    """Make directory ``dst`` hold the files of ``src``: copy each file whose (size, mtime)
    differs from ``copied`` (what was copied of it before; updated), remove those gone from
    ``src``. Subdirectories are not part of a partition's directory and are skipped."""
    names = set()
    for entry in os.scandir(src):
        if not entry.is_file(follow_symlinks=False):
            continue
        names.add(entry.name)
        st = entry.stat(follow_symlinks=False)
        stamp = (st.st_size, st.st_mtime_ns)
        if copied.get(entry.name) != stamp:
            shutil.copyfile(entry.path, os.path.join(dst, entry.name))
            copied[entry.name] = stamp
    for name in set(copied) - names:
        os.remove(os.path.join(dst, name))
        del copied[name]


def _fsync_files(path: str) -> None:
    """fsync every file of directory ``path``, then the directory."""
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False):
            fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    checkpoints.fsync_dir(path)


def _collision_key(name: str) -> str:
    # Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names.
    return name.replace(".", "_")


def as_config(config: LogConfig | Mapping[str, Any] | None,
              defaults: LogConfig | None = None) -> LogConfig:
    """``config`` as a :class:`LogConfig`: a LogConfig as it is, a mapping of Kafka dotted
    names or snake-case names over ``defaults`` (None: Kafka's own defaults), None the
    defaults. InvalidConfigError for a dotted name that is not a topic config (Kafka's
    CreateTopics refuses broker settings and unknown names alike) or a bad value."""
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


class ProducerIdBlocks(Protocol):
    """The producer-id blocks as the registry keeps them (a
    :class:`~seglog.coordinator.producer_ids.ProducerIdManager`): the end of the last block
    handed out, written with every registry write, and restored from it when it is read."""

    @property
    def block_end(self) -> int:
        """The first id not reserved yet."""
        ...

    def restore(self, block_end: int) -> None:
        """Ids below ``block_end`` may have been handed out before: never hand them out."""
        ...


class Topic:
    """One topic of a :class:`~seglog.store.Store`: its partitions' Logs, config and partitioner.

    ``name``, ``partitions`` (count), ``config`` (:class:`~seglog.storage.config.LogConfig`),
    ``topic_id`` (Kafka's base64url uuid text), ``is_internal``. Obtained from
    :meth:`Store.create_topic <seglog.store.Store.create_topic>` or :meth:`Store.topic
    <seglog.store.Store.topic>`; valid until the topic is deleted or the store closed (then
    :meth:`log` raises). Thread-safe: the partition list is replaced, never changed in place.
    """

    def __init__(self, manager: "LogManager", name: str, topic_id: uuid.UUID, config: LogConfig,
                 logs: Sequence[Log | None]):
        self._manager = manager
        self.name = name
        self.topic_id = checkpoints.uuid_to_kafka_str(topic_id)
        self._uuid = topic_id
        self.config = config
        self._logs = list(logs)  # None: a partition whose Log failed to open (offline)
        self._deleted = False

    @property
    def partitions(self) -> int:
        """The partition count."""
        return len(self._logs)

    @property
    def is_internal(self) -> bool:
        """Whether this is one of Kafka's internal topics (``__consumer_offsets``,
        ``__transaction_state``)."""
        return self.name in self._manager.internal_topic_configs

    def partition_for(self, key: bytes | bytearray | memoryview) -> int:
        """The partition Kafka's default partitioner picks for ``key`` (murmur2, positive,
        modulo the partition count), identical to Kafka's clients. TypeError for None (keyless
        records are spread by the producer's sticky partitioner)."""
        return partition_for_key(key, len(self._logs))

    def log(self, partition: int) -> Log:
        """The :class:`~seglog.storage.log.Log` of ``partition``. Raises
        :class:`UnknownTopicOrPartitionError` for a partition out of range,
        :class:`LogClosedError` once the topic was deleted or the store closed, and
        :class:`PartitionOfflineError` for a partition whose files failed to load."""
        if self._deleted or self._manager.closed:
            raise LogClosedError(f"topic {self.name!r} is closed or deleted")
        if isinstance(partition, bool) or not isinstance(partition, int) \
                or not 0 <= partition < len(self._logs):
            raise UnknownTopicOrPartitionError(
                f"topic {self.name!r} has no partition {partition!r} "
                f"(it has {len(self._logs)})")
        log = self._logs[partition]
        if log is None or log.load_failure is not None:
            raise self._manager.offline.error(TopicPartition(self.name, partition))
        return log

    def open_logs(self) -> list[tuple[int, Log]]:
        """``[(partition, Log)]`` of the partitions whose Log opened, in partition order."""
        return [(p, log) for p, log in enumerate(self._logs) if log is not None]

    def topic_partitions(self) -> list[TopicPartition]:
        """Every :class:`TopicPartition` of the topic, in partition order."""
        return [TopicPartition(self.name, p) for p in range(len(self._logs))]

    def end_offsets(self) -> dict[int, int]:
        """``{partition: end offset}`` (the offset the next record will get)."""
        return {p: log.end_offset for p, log in self.open_logs()}

    def start_offsets(self) -> dict[int, int]:
        """``{partition: log start offset}`` (the first offset still readable)."""
        return {p: log.start_offset for p, log in self.open_logs()}

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={len(self._logs)}, id={self.topic_id})"


class _DirPartitionState:
    """The :class:`~seglog.storage.partition_state.PartitionState` a LogManager hands each of
    its Logs: the recovery point and log start offset live in the data dir's shared
    checkpoint files, and one clean-shutdown marker covers the whole directory.

    A recovery point is kept in memory and written with every other partition's on
    :meth:`LogManager.flush`/:meth:`LogManager.close` (Kafka writes it every 60 s and on
    shutdown; a stale one only means more recovery work). A moved log start offset is written
    at once, so records removed by retention or DeleteRecords never reappear after a crash.
    """

    def __init__(self, manager: "LogManager", tp: TopicPartition):
        self._manager = manager
        self._tp = tp

    def load(self) -> tuple[int | None, int | None, bool]:
        manager = self._manager
        return (manager._recovery_points.get(self._tp),
                manager._log_start_offsets.get(self._tp),
                manager.dir_of(self._tp).clean_shutdown)

    def begin_writing(self) -> None:
        # The manager removes the directory's marker (durably) once every Log opened.
        pass

    def load_failed(self, reason: str) -> None:
        # Called by a Log under its own lock, from a read or an append: no metadata lock.
        self._manager.offline.add(self._tp, reason)

    def save(self, *, recovery_point: int, log_start_offset: int) -> None:
        # Called by a Log under its own lock: take only the checkpoint lock (never the
        # metadata lock, which is held while calling into Logs).
        manager = self._manager
        with manager._checkpoint_lock:
            manager._recovery_points[self._tp] = recovery_point
            if manager._log_start_offsets.get(self._tp) != log_start_offset:
                manager._log_start_offsets[self._tp] = log_start_offset
                log_dir = manager.dir_of(self._tp)
                if manager._checkpoints_open and log_dir.failure is None:
                    log_dir.log_start_checkpoint.write(manager._entries_of(
                        log_dir, manager._log_start_offsets))

    def read_log_start_offset(self) -> int | None:
        """The checkpointed log start offset (a read-only follower re-reads it on refresh)."""
        offsets = self._manager.dir_of(self._tp).log_start_checkpoint.read()
        return offsets.get(self._tp)

    def mark_clean_shutdown(self) -> None:
        # Written once for the directory by LogManager.close, after every Log closed.
        pass


class LogDir:
    """One ``log.dirs`` entry of a :class:`LogManager`: ``path``, its writer lock,
    ``meta.properties`` (``meta``), its four offset checkpoint files (Kafka keeps them per
    log dir, each naming the partitions of that dir only), whether it was shut down cleanly
    (``clean_shutdown``, its ``.kafka_cleanshutdown`` marker at open) and ``failure``: None
    while it serves, else why it is offline (its partitions are offline with it)."""

    def __init__(self, path: str):
        self.path = path
        self.lock: DirectoryLock | None = None
        self.meta: checkpoints.MetaProperties | None = None
        self.clean_shutdown = False
        self.failure: str | None = None

        def cp(name: str) -> checkpoints.OffsetCheckpointFile:
            return checkpoints.OffsetCheckpointFile(os.path.join(path, name))

        self.recovery_checkpoint = cp(filenames.RECOVERY_POINT_CHECKPOINT)
        self.log_start_checkpoint = cp(filenames.LOG_START_OFFSET_CHECKPOINT)
        self.replication_checkpoint = cp(filenames.REPLICATION_OFFSET_CHECKPOINT)
        self.cleaner_checkpoint = cp(filenames.CLEANER_OFFSET_CHECKPOINT)

    @property
    def online(self) -> bool:
        """Whether the dir serves (it has not failed)."""
        return self.failure is None

    def release(self) -> None:
        """Release the writer lock (idempotent; a failed disk's close error is ignored)."""
        if self.lock is not None:
            try:
                self.lock.close()
            except OSError:
                pass
            self.lock = None

    def __repr__(self) -> str:
        return f"LogDir({self.path!r}{'' if self.failure is None else ', offline'})"


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


class LogManager:
    """The topics and partition Logs of one data directory, with its registry, checkpoints and
    writer lock (see the module docstring); made and opened by a :class:`~seglog.store.Store`.

    ``LogManager(path, backend=..., read_only=..., lock=..., producer_ids=...,
    internal_topic_configs=..., replicated=..., topic_config_defaults=...,
    max_open_segments=...)`` binds the directory; :meth:`open` opens it (taking the writer
    lock, recovering the Logs) and :meth:`close` closes it. The arguments mean what the Store's
    of the same names mean. ``internal_topic_configs``: ``{name: Kafka configs}`` of the
    internal topics, which :meth:`create_topic` refuses, :meth:`delete_topic` keeps and a scan
    that finds one without a registry entry opens with that config.

    Thread safety: ``lock`` (the caller's, re-entrant: the Store's metadata lock, which its
    coordinators share) guards the topics; every method takes it. The checkpoint maps and
    their files have a lock of their own, taken last (lock order: the metadata lock, a Log's
    lock, the checkpoint lock), because a Log saves its checkpoints under its own lock. Every
    Log locks itself. Property reads of a Log take no lock.
    """

    def __init__(self, path: str, *, backend: str | None, read_only: bool,
                 lock: threading.RLock, producer_ids: ProducerIdBlocks,
                 internal_topic_configs: Mapping[str, Mapping[str, str]],
                 replicated: bool = False, topic_config_defaults: LogConfig | None = None,
                 max_open_segments: int | None = None, extra_dirs: Sequence[str] = ()):
        self.path = path
        #: Every log dir, ``path`` first, then ``extra_dirs`` (JBOD), in ``log.dirs`` order.
        self.dirs = [LogDir(d) for d in dict.fromkeys([path, *extra_dirs])]
        #: Which dir holds each partition (scanned at open; placed at creation).
        self._dir_of: dict[TopicPartition, LogDir] = {}
        #: The partitions being moved to another dir: ``{tp: (the dir, the -future path)}``.
        self._moving: dict[TopicPartition, tuple[LogDir, str]] = {}
        self.read_only = read_only
        self.replicated = replicated
        self.backend = backend
        self.lock = lock
        self.internal_topic_configs = internal_topic_configs
        self.topic_config_defaults = (LogConfig() if topic_config_defaults is None
                                      else topic_config_defaults)
        # Issue 14: the segment files open at once, over every partition (design.md §7).
        self.file_cache = FileCache(
            max_open_segments,
            descriptors_per_segment=get_backend(backend).Segment.open_descriptors_max)
        self._producer_ids = producer_ids
        self._checkpoint_lock = threading.Lock()  # the offset maps below and their files
        self.closed = True  # until fully open
        self.meta: checkpoints.MetaProperties | None = None
        self._topics: dict[str, Topic] = {}
        #: Names reserved by a create_topic whose partitions are being made (see there).
        self._creating: set[str] = set()
        self._recovery_points: dict[TopicPartition, int] = {}
        self._log_start_offsets: dict[TopicPartition, int] = {}
        self._checkpoints_open = False
        self._high_watermarks: dict[tuple[str, int], int] = {}
        self._cleaner_offsets: dict[tuple[str, int], int] = {}
        self._uncleanable: dict[TopicPartition, Exception] = {}  # see compact()
        #: The partitions whose files failed to load (_open_or_offline, load_failed).
        self.offline = OfflinePartitions()

    # --- the log dirs ----------------------------------------------------------------------

    def dir_of(self, tp: TopicPartition) -> LogDir:
        """The :class:`LogDir` holding partition ``tp`` (the first dir for one not placed)."""
        return self._dir_of.get(tp, self.dirs[0])

    def partition_path(self, tp: TopicPartition) -> str:
        """The directory of partition ``tp`` in the log dir holding it."""
        return os.path.join(self.dir_of(tp).path, filenames.partition_dir_name(*tp))

    def partition_dirs(self) -> dict[TopicPartition, LogDir]:
        """``{tp: the LogDir holding it}`` (a copy)."""
        return dict(self._dir_of)

    def online_dirs(self) -> list[LogDir]:
        """The dirs that serve, in ``log.dirs`` order."""
        return [d for d in self.dirs if d.failure is None]

    def partitions_in(self, log_dir: LogDir) -> list[TopicPartition]:
        """The partitions ``log_dir`` holds, sorted."""
        return sorted(tp for tp, d in self._dir_of.items() if d is log_dir)

    def _next_dir(self) -> LogDir:
        """Kafka's ``LogManager.nextLogDirs``: the online dir holding the fewest partitions
        (the first of them in ``log.dirs`` order). KafkaStorageError when none is online."""
        online = self.online_dirs()
        if not online:
            raise KafkaStorageError(errno.EIO, "every log dir is offline")
        counts = {id(d): 0 for d in online}
        for d in self._dir_of.values():
            if id(d) in counts:
                counts[id(d)] += 1
        return min(online, key=lambda d: counts[id(d)])

    def _entries_of(self, log_dir: LogDir, offsets: Mapping[Any, int]) -> dict[Any, int]:
        """The entries of ``offsets`` (keyed by ``(topic, partition)``) of partitions
        ``log_dir`` holds, sorted: what its checkpoint file names."""
        dir_of = self._dir_of
        return {k: v for k, v in sorted(offsets.items())
                if dir_of.get(TopicPartition(k[0], k[1])) is log_dir}

    def fail_dir(self, log_dir: LogDir, reason: str) -> list[TopicPartition]:
        """Take ``log_dir`` offline for ``reason`` (Kafka's ``LogManager.handleLogDirFailure``):
        its partitions go offline (:attr:`offline`; their Logs closed, best effort: the disk
        may refuse), its lock is released, nothing more is written to it; the other dirs
        serve on. Returns the partitions taken offline. Idempotent."""
        with self.lock:
            if log_dir.failure is not None:
                return []
            log_dir.failure = reason
            gone = self.partitions_in(log_dir)
            for tp in gone:
                self.offline.add(tp, f"log dir {log_dir.path} is offline: {reason}")
                topic = self._topics.get(tp.topic)
                if topic is None or tp.partition >= len(topic._logs):
                    continue
                log = topic._logs[tp.partition]
                if log is not None:
                    topic._logs = [None if i == tp.partition else other
                                   for i, other in enumerate(topic._logs)]
                    try:
                        log.close()
                    except Exception:  # noqa: BLE001 - the disk failed: closing may too
                        pass
            log_dir.release()
            return gone

    def moving(self) -> dict[TopicPartition, LogDir]:
        """``{tp: the dir it is being copied to}`` of the moves under way (Kafka's future
        logs)."""
        return {tp: d for tp, (d, _path) in self._moving.items()}

    def move_partition(self, tp: TopicPartition, destination: LogDir) -> bool:
        """Move partition ``tp`` to log dir ``destination`` (Kafka's AlterReplicaLogDirs and
        ReplicaAlterLogDirsThread, done by copying): its files are copied into
        ``<topic>-<partition>.<uuid>-future`` in ``destination`` while the Log serves; then,
        under :attr:`lock`, the Log is closed (an append meanwhile fails with LogClosedError,
        KAFKA_STORAGE_ERROR, which clients retry; none acknowledged is lost: the close
        flushes it before the last copy), the files changed since are copied again and
        fsynced, the copy renamed to the partition's name and the old directory to
        ``-delete`` (Kafka's order: a crash between the two renames leaves two copies, which
        the next open refuses by name), and the Log reopened from the copy. Blocking: run it
        on a worker. Returns False when there was nothing to do (already there, or a move of
        it is under way); raises UnknownTopicOrPartitionError, PartitionOfflineError
        (offline), KafkaStorageError (``destination`` offline), or the OSError of a copy
        that failed (the copy removed, the partition where it was)."""
        with self.lock:
            self.check_writable()
            topic = self._topics.get(tp.topic)
            if topic is None or not 0 <= tp.partition < topic.partitions:
                raise UnknownTopicOrPartitionError(f"no partition {tp.topic}-{tp.partition}")
            if destination.failure is not None:
                raise KafkaStorageError(errno.EIO, f"log dir {destination.path} is offline")
            log = topic.log(tp.partition)  # PartitionOfflineError when offline
            source = self.dir_of(tp)
            if source is destination or tp in self._moving:
                return False
            future = os.path.join(destination.path, future_dir_name(tp.topic, tp.partition))
            os.mkdir(future)
            self._moving[tp] = (destination, future)
        src = os.path.join(source.path, filenames.partition_dir_name(*tp))
        copied: dict[str, tuple[int, int]] = {}
        try:
            log.flush()
            _copy_changed(src, future, copied)  # the bulk, while the Log serves
            with self.lock:
                if self._topics.get(tp.topic) is not topic or self.closed:
                    raise UnknownTopicOrPartitionError(f"{tp.topic} was deleted meanwhile")
                log = topic.log(tp.partition)
                high_watermark = getattr(log, "high_watermark", None)
                if self.replicated and high_watermark is not None:
                    self._high_watermarks[(tp.topic, tp.partition)] = high_watermark
                cleaner = getattr(log, "cleaner_checkpoint", None)
                if cleaner is not None:
                    self._cleaner_offsets[(tp.topic, tp.partition)] = cleaner
                log.close()  # flushes; saves its recovery point and start offset
                try:
                    _copy_changed(src, future, copied)
                    _fsync_files(future)
                    target = os.path.join(destination.path, filenames.partition_dir_name(*tp))
                    os.rename(future, target)
                    checkpoints.fsync_dir(destination.path)
                except BaseException:
                    # The partition stays where it was: reopen it there.
                    topic._logs = [self._open_or_offline(src, tp, topic.config, topic_id=None)
                                   if i == tp.partition else other
                                   for i, other in enumerate(topic._logs)]
                    raise
                deleted = os.path.join(source.path, delete_dir_name(*tp))
                os.rename(src, deleted)
                checkpoints.fsync_dir(source.path)
                self._dir_of[tp] = destination
                del self._moving[tp]
                topic._logs = [self._open_or_offline(target, tp, topic.config, topic_id=None)
                               if i == tp.partition else other
                               for i, other in enumerate(topic._logs)]
                self.write_checkpoints()
        except BaseException:
            with self.lock:
                if self._moving.get(tp, (None, ""))[1] == future:
                    del self._moving[tp]
            shutil.rmtree(future, ignore_errors=True)
            raise
        shutil.rmtree(deleted, ignore_errors=True)
        return True

    def check_dirs(self) -> list[LogDir]:
        """Take offline every dir one of whose partitions' writes failed (an I/O error: the
        Log went offline, Kafka's LogDirFailureChannel). Returns the dirs taken offline now."""
        with self.lock:
            failed: dict[int, tuple[LogDir, str]] = {}
            for name, topic in self._topics.items():
                for p, log in topic.open_logs():
                    if log.write_failed:
                        d = self.dir_of(TopicPartition(name, p))
                        failed.setdefault(id(d), (d, f"a write to {name}-{p} failed"))
            for d, reason in failed.values():
                self.fail_dir(d, reason)
            return [d for d, _reason in failed.values()]

    # --- opening ---------------------------------------------------------------------------

    def open(self, *, node_id: int, cluster_id: str | None) -> None:
        """Open the directory: create it (a writer), take its writer lock, write a new
        ``meta.properties`` (``node_id``, ``cluster_id``) if it has none, read the checkpoints
        and the registry (restoring the producer-id blocks), remove leftover ``-delete``
        directories and open every topic found in the registry or on disk; a writer records
        topics found on disk only (made by Kafka, or a crash) in the registry. The
        clean-shutdown marker stays until :meth:`begin_writing`. On any error call
        :meth:`abort_open`.

        Several dirs (JBOD): each gets its own lock and ``meta.properties`` (one cluster id
        and node id, a directory id each); a dir that cannot be made, locked, read or
        scanned (an OSError) is offline (:meth:`fail_dir`) and the others open; when every
        dir failed the open fails with KafkaStorageError. A partition found in two dirs is
        CorruptCheckpointError (Kafka refuses to start the same way). A partition the
        registry knows but no online dir holds is offline while a dir is offline (it may be
        there), else made anew in the dir :meth:`_next_dir` picks."""
        for log_dir in self.dirs:
            try:
                self._open_dir(log_dir)
            except OSError as exc:
                if len(self.dirs) == 1:
                    raise  # one dir: its error, as before JBOD
                log_dir.failure = f"{type(exc).__name__}: {exc}"
                log_dir.release()
        online = self.online_dirs()
        if not online:
            raise KafkaStorageError(errno.EIO, "every log dir failed: " + "; ".join(
                f"{d.path}: {d.failure}" for d in self.dirs))
        with_meta = [d for d in online if d.meta is not None]
        for d in with_meta[1:]:
            meta, first_meta = d.meta, with_meta[0].meta
            assert meta is not None and first_meta is not None
            if (meta.cluster_id, meta.node_id) != (first_meta.cluster_id, first_meta.node_id):
                raise CorruptCheckpointError(
                    f"{d.path}/meta.properties names cluster {meta.cluster_id} and node "
                    f"{meta.node_id}, {with_meta[0].path} cluster {first_meta.cluster_id} and "
                    f"node {first_meta.node_id}: the dirs belong to different brokers",
                    path=d.path)
        if not self.read_only:
            first = with_meta[0].meta if with_meta else None
            for d in online:
                if d.meta is None:
                    d.meta = checkpoints.MetaProperties(
                        version=1, cluster_id=first.cluster_id if first else (
                            cluster_id or checkpoints.uuid_to_kafka_str(
                                checkpoints.new_kafka_uuid())),
                        node_id=first.node_id if first else node_id,
                        directory_id=checkpoints.new_kafka_uuid())
                    d.meta.write(d.path)
                    first = first or d.meta
        self.meta = next((d.meta for d in online if d.meta is not None), None)
        # Ids of the last block may have been handed out before a crash: the producer-id
        # manager starts after it (_read_registry restores it).
        registry = self._read_registry()
        found = self._scan_partition_dirs()
        self._read_checkpoints()
        self.closed = False
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
            elif name in self.internal_topic_configs:
                config = LogConfig.from_kafka(self.internal_topic_configs[name])
            else:
                config = self.topic_config_defaults
            self._topics[name] = self._open_topic(
                name, partitions, config,
                checkpoints.uuid_from_kafka_str(topic_id) if topic_id else None,
                found=found.get(name, ()))
        self._checkpoints_open = not self.read_only
        if not self.read_only and set(found) - set(registry):
            self.write_registry()  # adopt topics found on disk (e.g. made by Kafka)

    def _open_dir(self, log_dir: LogDir) -> None:
        """Make (a writer), lock and read one dir's ``meta.properties`` and clean-shutdown
        marker. OSError when the disk refuses (the caller takes the dir offline)."""
        if self.read_only:
            if not os.path.isdir(log_dir.path):
                raise FileNotFoundError(f"no data directory at {log_dir.path}")
        else:
            os.makedirs(log_dir.path, exist_ok=True)
            log_dir.lock = DirectoryLock(log_dir.path)
        log_dir.meta = checkpoints.MetaProperties.read(log_dir.path)
        log_dir.clean_shutdown = checkpoints.has_clean_shutdown_marker(log_dir.path)

    def _read_checkpoints(self) -> None:
        """Read every online dir's checkpoints, keeping of each file the entries of the
        partitions that dir holds (a stale entry of a partition moved elsewhere is not)."""
        self._recovery_points, self._log_start_offsets = {}, {}
        self._high_watermarks, self._cleaner_offsets = {}, {}
        for d in self.online_dirs():
            mine = {tp for tp, holder in self._dir_of.items() if holder is d}
            for k, v in d.recovery_checkpoint.read().items():
                if TopicPartition(*k) in mine:
                    self._recovery_points[TopicPartition(*k)] = v
            for k, v in d.log_start_checkpoint.read().items():
                if TopicPartition(*k) in mine:
                    self._log_start_offsets[TopicPartition(*k)] = v
            for k, v in d.replication_checkpoint.read().items():
                if TopicPartition(*k) in mine:
                    self._high_watermarks[k] = v
            for k, v in d.cleaner_checkpoint.read().items():
                if TopicPartition(*k) in mine:
                    self._cleaner_offsets[k] = v

    def begin_writing(self) -> None:
        """Remove the clean-shutdown marker (durably): from here on a crash makes the next
        open recover. Called once opening succeeded as a whole: an open that fails on corrupt
        bytes has written nothing, and the next open must not take it for a crash and cut
        what this one refused to."""
        for d in self.online_dirs():
            checkpoints.remove_clean_shutdown_marker(d.path)

    def abort_open(self) -> None:
        """Close what a failed :meth:`open` opened and release the writer lock."""
        for topic in self._topics.values():
            for _p, log in topic.open_logs():
                try:
                    log.close()
                except Exception:  # noqa: BLE001 - best effort while failing to open
                    pass
        self._topics.clear()
        self.closed = True
        for d in self.dirs:
            d.release()

    def _with_topic_defaults(self, name: str, overrides: Mapping[str, Any]) -> LogConfig:
        """A reopened topic's config: its recorded overrides over ``topic_config_defaults``."""
        try:
            return self.topic_config_defaults.replace(**overrides)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"topic {name!r}: its configs {dict(overrides)} do not "
                                     f"fit the broker's defaults: {e}") from None
    def _scan_partition_dirs(self) -> dict[str, list[int]]:
        """``{topic: [partitions]}`` of the partition directories of every online dir, and
        :attr:`_dir_of` set to where each is (a dir that cannot be scanned is offline);
        leftover ``-delete`` directories are removed (a writer only). Kafka's KRaft metadata
        log (:data:`CLUSTER_METADATA_TOPIC`) is not a topic and is left alone."""
        found: dict[str, list[int]] = {}
        dir_of: dict[TopicPartition, LogDir] = {}
        for log_dir in self.online_dirs():
            try:
                here = self._scan_one_dir(log_dir.path)
            except OSError as exc:
                if len(self.dirs) == 1:
                    raise
                log_dir.failure = f"{type(exc).__name__}: {exc}"
                log_dir.release()
                continue
            for topic, partitions in here.items():
                for p in partitions:
                    tp = TopicPartition(topic, p)
                    other = dir_of.get(tp)
                    if other is not None:
                        # Kafka's LogManager.loadLog: "Duplicate log directories ... found".
                        raise CorruptCheckpointError(
                            f"duplicate log directories for {topic}-{p} are found in both "
                            f"{other.path} and {log_dir.path}: delete the one of the dir "
                            "known to have failed recently", path=log_dir.path)
                    dir_of[tp] = log_dir
                    found.setdefault(topic, []).append(p)
        if not self.online_dirs():
            raise KafkaStorageError(errno.EIO, "every log dir failed: " + "; ".join(
                f"{d.path}: {d.failure}" for d in self.dirs))
        self._dir_of = dir_of
        return found

    def _scan_one_dir(self, path: str) -> dict[str, list[int]]:
        """``{topic: [partitions]}`` of the partition directories in log dir ``path``."""
        found: dict[str, list[int]] = {}
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name.endswith((filenames.DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                # A -future dir is a move a stop interrupted: the partition stays where it
                # was (the move is not resumed), its copy is dropped.
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

    def _read_registry(self) -> dict[str, dict[str, Any]]:
        """The topics registry (:func:`~seglog.topic_registry.read_registry`) of the online
        dir that wrote it last (each online dir gets every write; one that was offline
        meanwhile holds an older one); restores the producer-id blocks from it."""
        newest, newest_ns = self.online_dirs()[0].path, -1
        for d in self.online_dirs():
            try:
                mtime_ns = os.stat(os.path.join(d.path, TOPICS_FILE)).st_mtime_ns
            except OSError:
                continue
            if mtime_ns > newest_ns:
                newest, newest_ns = d.path, mtime_ns
        topics, block_end = topic_registry.read_registry(newest)
        self._producer_ids.restore(block_end)
        return topics

    def write_registry(self, *, producer_id_block_end: int | None = None) -> None:
        """Replace ``seglog-topics.json`` (:func:`~seglog.topic_registry.write_registry`):
        every topic's id, partition count and the configs it sets over
        ``topic_config_defaults``, and ``producer_id_block_end`` (None: the producer-id
        blocks' current end)."""
        if producer_id_block_end is None:
            producer_id_block_end = self._producer_ids.block_end
        topics = {name: {"topic_id": t.topic_id, "partitions": t.partitions,
                         "config": topic_registry.overrides_of(t.config,
                                                               self.topic_config_defaults)}
                  for name, t in sorted(self._topics.items())}
        for d in self.online_dirs():
            topic_registry.write_registry(d.path, topics,
                                          producer_id_block_end=producer_id_block_end)

    def _open_topic(self, name: str, partitions: int, config: LogConfig,
                    topic_id: uuid.UUID | None, *, found: Iterable[int] = ()) -> Topic:
        if topic_id is None and not self.read_only:
            # A topic found on disk but not in the registry (made by Kafka, or a crash during
            # create_topic): take its id from whichever partition recorded one, so that the
            # partitions missing partition.metadata get that id, not a new one.
            topic_id = self._found_topic_id(name, partitions)
        logs: list[Log | None] = []
        found = set(found)  # partitions whose directory the scan saw: no mkdir, no isdir
        expected: bytes | None = None  # partition.metadata's bytes for topic_id, as written
        try:
            for p in range(partitions):
                tp = TopicPartition(name, p)
                if p not in found and tp not in self._dir_of and not self.read_only:
                    if len(self.online_dirs()) < len(self.dirs):
                        # It may be in the offline dir: never made anew elsewhere.
                        self.offline.add(tp, "not found in the online log dirs (one is "
                                             "offline)")
                        logs.append(None)
                        continue
                    self._dir_of[tp] = self._next_dir()
                dir_path = self.partition_path(tp)
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
                    # (adopted topics are registered below, in open).
                    topic_id = pending_id = topic_id or checkpoints.new_kafka_uuid()
                if not self.read_only:
                    check_unlocked(dir_path)  # no standalone writer has it (locking.py)
                logs.append(self._open_or_offline(dir_path, tp, config, topic_id=pending_id))
        except BaseException:
            for log in logs:
                if log is not None:
                    log.close()
            raise
        return Topic(self, name, topic_id or checkpoints.new_kafka_uuid(), config, logs)

    def _open_or_offline(self, dir_path: str, tp: TopicPartition, config: LogConfig, *,
                         topic_id: uuid.UUID | None) -> Log | None:
        """:meth:`_open_partition_log`, or on a writer None for a partition whose files fail
        to load (recorded in :attr:`offline`; nothing of it changed, its checkpoint entries
        kept): Kafka takes the log dir holding it offline and serves the others."""
        try:
            return self._open_partition_log(dir_path, tp, config, topic_id=topic_id)
        except (CorruptRecordError, CorruptCheckpointError) as exc:
            if self.read_only:
                raise
            reason = f"{type(exc).__name__}: {exc}"
        self.offline.add(tp, reason)
        return None

    def _open_partition_log(self, dir_path: str, tp: TopicPartition, config: LogConfig, *,
                            topic_id: uuid.UUID | None = None) -> Log:
        """One partition's Log, under this data dir's lock (no lock of its own), with its
        cleaner checkpoint (Kafka's cleaner reads it from the log dir; the Log keeps it).
        The directory exists (made or found by the caller: no second ``mkdir``). ``topic_id``:
        the Log writes ``partition.metadata`` naming it with its first flush (None: the file
        is there already, or the store is read-only)."""
        # A replicated log's high watermark is the replica manager's, from the checkpoint.
        high_watermark = self._high_watermarks.get((tp[0], tp[1])) if self.replicated else None
        log = Log.open(dir_path, config=config, backend=self.backend, read_only=self.read_only,
                       state=_DirPartitionState(self, tp), lock_directory=False,
                       file_cache=self.file_cache, create_directory=False, topic_id=topic_id,
                       auto_high_watermark=not self.replicated, high_watermark=high_watermark)
        cleaner_offset = self._cleaner_offsets.get(tp)
        if cleaner_offset is not None:
            log.cleaner_checkpoint = cleaner_offset
        return log

    def _found_topic_id(self, name: str, partitions: int) -> uuid.UUID | None:
        """The topic id in the first ``partition.metadata`` of ``name`` that has one."""
        for p in range(partitions):
            tp = TopicPartition(name, p)
            if tp not in self._dir_of:
                continue
            found = checkpoints.PartitionMetadataFile(os.path.join(
                self.partition_path(tp), filenames.PARTITION_METADATA)).read()
            if found is not None:
                return found
        return None

    def _create_partition_logs(self, name: str, first: int, end: int, config: LogConfig,
                               topic_id: uuid.UUID) -> list[Log]:
        """Create the directories of partitions ``first..end-1`` of topic ``name`` (new, or
        grown) and open their Logs (design.md §6.1, "Topic creation"): every directory is
        made (one ``mkdir`` each); each Log is opened with the topic id, which it writes to
        ``partition.metadata`` with its first flush (Kafka's lazy ``PartitionMetadataFile``).
        The registry write that follows fsyncs the data dir (the new entries, the topic id).
        Linear in the partitions made: no other partition's files are read or rewritten.

        The metadata lock is taken for :data:`CREATE_PARTITIONS_PER_HOLD` partitions at a
        time and let go between (issue 23): 10,000 partitions would otherwise hold every
        other user of the Store (the broker's event loop) for the whole creation. The caller
        reserved ``name``; LogClosedError when the Store closes meanwhile (the Logs made are
        closed)."""
        logs: list[Log] = []
        with self.lock:
            # Each partition in the dir with the fewest (Kafka's nextLogDirs, one at a time).
            for p in range(first, end):
                self._dir_of[TopicPartition(name, p)] = self._next_dir()
            dir_paths = [self.partition_path(TopicPartition(name, p)) for p in range(first, end)]
        # Every directory before any file (a crash in between leaves directories the next
        # open completes, never a partition with files and no sibling directories), outside
        # the lock: the caller reserved the name, and a mkdir touches no shared state.
        for dir_path in dir_paths:
            os.mkdir(dir_path)
        try:
            for start in range(first, end, CREATE_PARTITIONS_PER_HOLD):
                if start != first:
                    # A lock is not fair: released and taken straight back, a thread waiting
                    # for it (the event loop) may never get it. A pause hands it over.
                    time.sleep(CREATE_PAUSE_S)
                with self.lock:
                    self.check_writable()
                    stop = min(start + CREATE_PARTITIONS_PER_HOLD, end)
                    self._open_new_logs(name, range(start, stop),
                                        dir_paths[start - first:stop - first], config,
                                        topic_id, logs)
        except BaseException:
            for log in logs:
                log.close()
            raise
        return logs

    def _open_new_logs(self, name: str, partitions: range, dir_paths: Sequence[str],
                       config: LogConfig, topic_id: uuid.UUID, logs: list[Log]) -> None:
        """Open the Logs of new ``partitions`` of topic ``name`` in their (made, empty)
        ``dir_paths``, appending each to ``logs`` as it opens (the caller closes them on
        failure)."""
        for p, dir_path in zip(partitions, dir_paths):
            tp = TopicPartition(name, p)
            log = self._open_partition_log(dir_path, tp, config, topic_id=topic_id)
            logs.append(log)
            with self._checkpoint_lock:
                # The start the Log began at, known as saved: its first flush or close then
                # rewrites the shared log-start checkpoint only if the start moved, not once
                # per new partition (all partitions each time: quadratic). The next
                # flush/close writes the entry with every other one.
                self._log_start_offsets.setdefault(tp, log.start_offset)

    # --- topics ----------------------------------------------------------------------------

    def check_open(self) -> None:
        """LogClosedError once closed."""
        if self.closed:
            raise LogClosedError(f"store {self.path} is closed")

    def check_writable(self) -> None:
        """LogClosedError once closed, ReadOnlyError on a read-only directory."""
        self.check_open()
        if self.read_only:
            raise ReadOnlyError(f"store {self.path} was opened read-only")

    def create_topic(self, name: str, partitions: int, config: Any, *,
                     topic_id: uuid.UUID | None = None,
                     on_created: Callable[[], None] | None = None) -> Topic:
        """Create topic ``name`` (see :meth:`Store.create_topic
        <seglog.store.Store.create_topic>`, which checks the name and ``topic_id`` first; an
        internal topic's config is the caller's): its directories, Logs and registry entry.
        The name is reserved under :attr:`lock`, the partitions made in chunks that each hold
        it briefly (:meth:`_create_partition_logs`), and the topic published, registry
        written and ``on_created`` (the caller's metadata listeners) run in one last hold:
        nobody sees the topic before all its partitions exist."""
        # TypeError for a non-integer, ValueError out of 1..TOPIC_PARTITIONS_MAX (check_int).
        partitions = check_int("partitions", partitions, minimum=1, maximum=TOPIC_PARTITIONS_MAX)
        log_config = as_config(config, self.topic_config_defaults)
        with self.lock:
            self.check_writable()
            for existing in (*self._topics, *self._creating):
                if existing == name:
                    raise TopicExistsError(f"Topic '{name}' already exists.")
                if _collision_key(existing) == _collision_key(name):
                    raise InvalidTopicError(f"Topic '{name}' collides with existing topic: "
                                            f"{existing}")
            self._check_no_partition_dirs(name, range(partitions))
            self._creating.add(name)
        try:
            topic_id = topic_id or checkpoints.new_kafka_uuid()
            try:
                logs = self._create_partition_logs(name, 0, partitions, log_config, topic_id)
                with self.lock:
                    try:
                        self.check_writable()
                    except BaseException:
                        for log in logs:
                            log.close()
                        raise
                    topic = Topic(self, name, topic_id, log_config, logs)
                    self._topics[name] = topic
                    self._creating.discard(name)
                    self.write_registry()
                    if on_created is not None:
                        on_created()
                    return topic
            except BaseException:
                if name not in self._topics:
                    self._remove_new_partitions(name, range(partitions))
                raise
        finally:
            with self.lock:
                self._creating.discard(name)

    def _check_no_partition_dirs(self, name: str, partitions: range) -> None:
        """TopicExistsError when a directory of one of ``partitions`` of ``name`` is in an
        online log dir already."""
        for p in partitions:
            for d in self.online_dirs():
                if os.path.exists(os.path.join(d.path, filenames.partition_dir_name(name, p))):
                    raise TopicExistsError(f"partition directory of '{name}' {p} already exists")

    def _remove_new_partitions(self, name: str, partitions: range) -> None:
        """Undo a failed creation of ``partitions`` of ``name``: remove the directories
        made and forget where they were placed."""
        with self.lock:
            for p in partitions:
                tp = TopicPartition(name, p)
                if tp in self._dir_of:
                    shutil.rmtree(self.partition_path(tp), ignore_errors=True)
                    del self._dir_of[tp]

    def topic_to_delete(self, name: str) -> Topic:
        """Topic ``name``, checked for :meth:`delete_topic`: UnknownTopicOrPartitionError,
        InvalidTopicError for an internal topic, ReadOnlyError, LogClosedError."""
        with self.lock:
            self.check_writable()
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if topic.is_internal:
                raise InvalidTopicError(f"{name} is an internal topic and cannot be deleted")
            return topic

    def delete_topic(self, topic: Topic) -> list[str]:
        """Delete ``topic`` (from :meth:`topic_to_delete`, under the same hold of
        :attr:`lock`) as Kafka does: close its Logs, rename each partition directory to
        ``<topic>-<partition>.<uuid>-delete``, drop it from the checkpoints and the registry.
        Returns the renamed directories, which the caller removes with
        :meth:`remove_deleted_dirs` after releasing the lock."""
        name = topic.name
        with self.lock:
            topic._deleted = True
            del self._topics[name]
            renamed = []
            touched: dict[int, LogDir] = {}
            for p, log in enumerate(topic._logs):
                if log is not None:
                    log.close()
                tp = TopicPartition(name, p)
                self.offline.discard(tp)
                log_dir = self._dir_of.pop(tp, None)
                if log_dir is not None and log_dir.failure is None:
                    # A partition of an offline dir is left there (the disk refuses).
                    src = os.path.join(log_dir.path, filenames.partition_dir_name(name, p))
                    dst = os.path.join(log_dir.path, delete_dir_name(name, p))
                    os.rename(src, dst)
                    renamed.append(dst)
                    touched[id(log_dir)] = log_dir
                with self._checkpoint_lock:
                    self._recovery_points.pop(tp, None)
                    self._log_start_offsets.pop(tp, None)
            for log_dir in touched.values():
                checkpoints.fsync_dir(log_dir.path)
            self.write_registry()
            self.write_checkpoints()
            return renamed

    @staticmethod
    def remove_deleted_dirs(paths: Iterable[str]) -> None:
        """Remove the ``-delete`` directories :meth:`delete_topic` renamed (best effort: the
        next open removes what is left)."""
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)

    def topics(self) -> list[str]:
        """Names of every topic, internal ones included, sorted."""
        with self.lock:
            self.check_open()
            return sorted(self._topics)

    def topic(self, name: str) -> Topic:
        """The :class:`Topic` ``name``; :class:`UnknownTopicOrPartitionError` if absent."""
        with self.lock:
            self.check_open()
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            return topic

    def existing_topic(self, name: str) -> Topic | None:
        """Topic ``name`` if it exists now, else None (no check that the manager is open)."""
        with self.lock:
            return self._topics.get(name)

    def __contains__(self, name: str) -> bool:
        with self.lock:
            return name in self._topics

    def partition_counts(self) -> dict[str, int]:
        """``{topic: partition count}`` of every topic now."""
        with self.lock:
            return {name: t.partitions for name, t in self._topics.items()}

    # --- admin (the wire broker's CreatePartitions and config changes) ---------------------

    def create_partitions(self, name: str, count: int, *,
                          on_created: Callable[[], None] | None = None) -> Topic:
        """Grow topic ``name`` to ``count`` partitions (see :meth:`Store.create_partitions
        <seglog.store.Store.create_partitions>` for the rules and errors). As
        :meth:`create_topic`: the topic is reserved under :attr:`lock`, the new partitions
        made in short holds of it (:meth:`_create_partition_logs`), and published, the
        registry written and ``on_created`` run in one last hold; a second growth of the
        topic meanwhile is InvalidPartitionsError, a deletion meanwhile undoes this one."""
        count = check_int("count", count, minimum=1, maximum=TOPIC_PARTITIONS_MAX)
        with self.lock:
            self.check_writable()
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            current = topic.partitions
            if count <= current:
                raise InvalidPartitionsError(
                    f"Topic already has {current} partition(s)." if count == current else
                    f"The topic {name} currently has {current} partition(s); {count} would "
                    "not be an increase.")
            if name in self._creating:  # grown by another request now
                raise InvalidPartitionsError(f"Topic {name} is being grown already.")
            self._check_no_partition_dirs(name, range(current, count))
            self._creating.add(name)
        try:
            try:
                new_logs = self._create_partition_logs(name, current, count, topic.config,
                                                       topic._uuid)
                with self.lock:
                    if self._topics.get(name) is not topic:  # deleted meanwhile
                        for log in new_logs:
                            log.close()
                        raise UnknownTopicOrPartitionError(f"topic {name!r} was deleted")
                    # A new list: a reader that took the old one keeps a consistent view.
                    topic._logs = [*topic._logs, *new_logs]
                    self.write_registry()
                    if on_created is not None:
                        on_created()
                    return topic
            except BaseException:
                if topic.partitions < count:
                    self._remove_new_partitions(name, range(current, count))
                raise
        finally:
            with self.lock:
                self._creating.discard(name)

    def alter_topic_configs(self, configs: Mapping[str, LogConfig | Mapping[str, Any]]) -> None:
        """Replace the config of each topic named in ``configs`` (see
        :meth:`Store.alter_topic_configs <seglog.store.Store.alter_topic_configs>`)."""
        parsed = {name: as_config(config, self.topic_config_defaults)
                  for name, config in configs.items()}
        with self.lock:
            self.check_writable()
            for name in parsed:
                if name not in self._topics:
                    raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            for name, config in parsed.items():
                topic = self._topics[name]
                topic.config = config
                for _p, log in topic.open_logs():
                    log.update_config(config)
            if parsed:
                self.write_registry()

    def set_topic_config_defaults(self, defaults: LogConfig | Mapping[str, Any]) -> None:
        """Replace ``topic_config_defaults`` (see :meth:`Store.set_topic_config_defaults
        <seglog.store.Store.set_topic_config_defaults>`). Raises InvalidConfigError."""
        defaults = as_config(defaults)
        with self.lock:
            self.topic_config_defaults = defaults

    # --- housekeeping (Kafka's LogManager tasks and cleaner threads, run when called) -------

    def writable_logs(self) -> list[tuple[TopicPartition, Log]]:
        """``[(tp, Log)]`` of every partition that takes writes, in topic order. Offline logs
        (a failed write: Log.offline) refuse every write until a reopen recovers them; the
        periodic work leaves them out rather than fail on each. Raises ReadOnlyError."""
        with self.lock:
            self.check_writable()
            return [(TopicPartition(n, p), log) for n, t in sorted(self._topics.items())
                    for p, log in t.open_logs() if not log.offline]

    def apply_retention(self, *, now_ms: int | None = None) -> dict[TopicPartition, list[int]]:
        """See :meth:`Store.apply_retention <seglog.store.Store.apply_retention>`."""
        out = {}
        for tp, log in self.writable_logs():
            deleted = log.apply_retention(now_ms=now_ms)
            if deleted:
                out[tp] = deleted
        return out

    def compact(self, *, now_ms: int | None = None) -> dict[TopicPartition, Any]:
        """See :meth:`Store.compact <seglog.store.Store.compact>`."""
        out = {}
        for tp, log in self.writable_logs():
            if log.config.compaction_enabled and tp not in self._uncleanable:
                try:
                    stats = log.compact(now_ms=now_ms)
                except CorruptRecordError as e:
                    self._uncleanable[tp] = e
                    warnings.warn(f"seglog: compaction of {tp.topic}-{tp.partition} stopped "
                                  f"and will not be retried until the store reopens: {e}",
                                  RuntimeWarning, stacklevel=3)
                    continue
                if not stats.skipped:
                    out[tp] = stats
        return out

    @property
    def uncleanable_partitions(self) -> dict[TopicPartition, Exception]:
        """``{tp: error}`` of the partitions :meth:`compact` stopped cleaning (a copy)."""
        return dict(self._uncleanable)

    # --- durability ------------------------------------------------------------------------

    def flush(self) -> None:
        """See :meth:`Store.flush <seglog.store.Store.flush>`."""
        with self.lock:
            self.check_writable()
            failed: list[tuple[LogDir, str]] = []
            for name, topic in self._topics.items():
                for p, log in topic.open_logs():
                    if not log.offline:  # recovered at the next open instead
                        try:
                            log.flush()
                        except OSError as exc:
                            if len(self.dirs) == 1:
                                raise
                            failed.append((self.dir_of(TopicPartition(name, p)),
                                           f"flushing {name}-{p} failed: {exc}"))
            for log_dir, reason in failed:  # the dir's partitions go offline, not the rest
                self.fail_dir(log_dir, reason)
            self.write_checkpoints()

    def checkpoint_high_watermarks(self) -> None:
        """See :meth:`Store.checkpoint_high_watermarks
        <seglog.store.Store.checkpoint_high_watermarks>`."""
        with self.lock:
            self.check_writable()
            high_watermarks = self._gather("high_watermark")
        with self._checkpoint_lock:
            self._high_watermarks = high_watermarks
            for d in self.online_dirs():
                d.replication_checkpoint.write(self._entries_of(d, high_watermarks))

    def _gather(self, attribute: str) -> dict[tuple[str, int], int]:
        out = {}
        for name, topic in sorted(self._topics.items()):
            for p, log in topic.open_logs():
                value = getattr(log, attribute, None)
                if value is not None:
                    out[(name, p)] = value
        return out

    def write_checkpoints(self, *, from_logs: bool = True) -> None:
        """Write the four data-dir checkpoints. ``from_logs`` reads the live Logs first; after
        they are closed the values they saved last are written. Lock order: the metadata lock
        (held by the caller), then Logs' locks, then the checkpoint lock; property reads of a
        Log take no lock."""
        with self._checkpoint_lock:
            failed = self._write_checkpoints_locked(from_logs)
        for log_dir, reason in failed:  # after the checkpoint lock: closing Logs takes it
            self.fail_dir(log_dir, reason)

    def _write_checkpoints_locked(self, from_logs: bool) -> list[tuple[LogDir, str]]:
        """Write the checkpoints; returns the dirs whose disk refused, with why (several
        dirs: the caller takes them offline; one dir: its OSError is raised)."""
        if from_logs:
            for name, topic in self._topics.items():
                for p, log in topic.open_logs():
                    tp = TopicPartition(name, p)
                    recovery_point = getattr(log, "recovery_point", None)
                    if recovery_point is not None:
                        self._recovery_points[tp] = recovery_point
                    self._log_start_offsets[tp] = log.start_offset
            self._high_watermarks = self._gather("high_watermark")
            self._cleaner_offsets = self._gather("cleaner_checkpoint")
        live = {(n, p) for n, t in self._topics.items() for p in range(t.partitions)}
        failed = []
        for d in self.online_dirs():
            # Each dir's files name the live partitions it holds (Kafka's per-dir files).
            try:
                for file, offsets in ((d.recovery_checkpoint, self._recovery_points),
                                      (d.log_start_checkpoint, self._log_start_offsets),
                                      (d.replication_checkpoint, self._high_watermarks),
                                      (d.cleaner_checkpoint, self._cleaner_offsets)):
                    file.write({tp: v for tp, v in self._entries_of(d, offsets).items()
                                if tp in live})
            except OSError as exc:
                if len(self.dirs) == 1:
                    raise
                failed.append((d, f"writing its checkpoints failed: {exc}"))
        return failed

    def close(self) -> None:
        """Close every Log (each flushes and saves its recovery point and start offset), write
        the checkpoints and, last, the clean-shutdown marker (none when a Log is offline: the
        next open recovers it); release the writer lock. Idempotent. The caller holds
        :attr:`lock`."""
        with self.lock:
            if self.closed:
                return
            try:
                if not self.read_only:
                    self._high_watermarks = self._gather("high_watermark")
                    self._cleaner_offsets = self._gather("cleaner_checkpoint")
                # Each Log flushes and saves its recovery point and start offset on close.
                unclean: set[int] = set()  # the dirs holding an offline log
                for name, topic in self._topics.items():
                    for p, log in topic.open_logs():
                        if log.write_failed:
                            unclean.add(id(self.dir_of(TopicPartition(name, p))))
                        log.close()
                if not self.read_only:
                    self.write_checkpoints(from_logs=False)
                    # An offline log (a failed write) must be recovered at the next open, and
                    # the marker is the whole directory's: without it every log of the dir
                    # recovers from its recovery point (Kafka's restart after a log dir
                    # failure).
                    for d in self.online_dirs():
                        if id(d) not in unclean:
                            checkpoints.write_clean_shutdown_marker(d.path)
            finally:
                self.closed = True
                self._checkpoints_open = False
                for d in self.dirs:
                    d.release()

    # --- following a writer (read-only) ----------------------------------------------------

    def refresh(self) -> bool:
        """Read-only: follow the writer (see :meth:`Store.refresh
        <seglog.store.Store.refresh>`, which reloads the offsets and runs the metadata
        listeners when this returns True). Returns whether anything changed."""
        with self.lock:
            self.check_open()
            if not self.read_only:
                raise ReadOnlyError("refresh() is for stores opened with read_only=True")
            changed = False
            registry = self._read_registry()
            found = self._scan_partition_dirs()
            for name in sorted(set(self._topics) - set(found)):
                topic = self._topics.pop(name)
                topic._deleted = True
                for _p, log in topic.open_logs():
                    log.close()
                changed = True
            for name, topic in self._topics.items():
                for _p, log in topic.open_logs():
                    changed |= log.refresh()
            for name in sorted(set(found) - set(self._topics)):
                entry = registry.get(name)
                if entry is None or len(found[name]) < entry.get("partitions", 0):
                    continue  # the writer is still creating it
                topic_id = entry.get("topic_id")
                self._topics[name] = self._open_topic(
                    name, entry["partitions"], entry["log_config"],
                    checkpoints.uuid_from_kafka_str(topic_id) if topic_id else None)
                changed = True
            return changed

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("read-only" if self.read_only else "open")
        return f"LogManager({self.path!r}, {state}, topics={len(self._topics)})"
