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
from .log_dirs import CLUSTER_METADATA_TOPIC, LogDir, LogDirs, copy_changed, fsync_files
from .log_dirs import delete_dir_name, file_bytes_are, future_dir_name
from .offline_partitions import OfflinePartitions
from .topic import Topic, as_config
from .storage import checkpoints
from .storage.config import LogConfig, check_int
from .storage.file_cache import FileCache
from .storage.locking import check_unlocked
from .storage.log import Log
from .topic_registry import (
    TOPIC_PARTITIONS_MAX,
    TOPICS_FILE,
    validate_topic_name,
)
from .types import TopicPartition

__all__ = ["LogManager", "ProducerIdBlocks", "Topic", "validate_topic_name", "delete_dir_name",
           "TOPICS_FILE", "TOPIC_PARTITIONS_MAX", "CLUSTER_METADATA_TOPIC",
           "CREATE_PARTITIONS_PER_HOLD"]

#: How many partitions of a new topic are made per hold of the metadata lock: about 10 ms of
#: work, the longest a creation keeps the broker's event loop from a topic lookup.
CREATE_PARTITIONS_PER_HOLD = 128
#: The pause between two such holds (see _create_partition_logs).
CREATE_PAUSE_S = 0.001


def _collision_key(name: str) -> str:
    # Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names.
    return name.replace(".", "_")


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
                manager.log_dirs.dir_of(self._tp).clean_shutdown)

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
                log_dir = manager.log_dirs.dir_of(self._tp)
                if manager._checkpoints_open and log_dir.failure is None:
                    log_dir.log_start_checkpoint.write(manager.log_dirs.entries_of(
                        log_dir, manager._log_start_offsets))

    def read_log_start_offset(self) -> int | None:
        """The checkpointed log start offset (a read-only follower re-reads it on refresh)."""
        offsets = self._manager.log_dirs.dir_of(self._tp).log_start_checkpoint.read()
        return offsets.get(self._tp)

    def mark_clean_shutdown(self) -> None:
        # Written once for the directory by LogManager.close, after every Log closed.
        pass


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
        #: The log dirs, ``path`` first, then ``extra_dirs`` (JBOD), and where each
        #: partition is (:class:`~seglog.log_dirs.LogDirs`).
        self.log_dirs = LogDirs([path, *extra_dirs], read_only=read_only)
        self.dirs = self.log_dirs.dirs
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

    def fail_dir(self, log_dir: LogDir, reason: str) -> list[TopicPartition]:
        """Take ``log_dir`` offline for ``reason`` (Kafka's ``LogManager.handleLogDirFailure``):
        its partitions go offline (:attr:`offline`; their Logs closed, best effort: the disk
        may refuse), its lock is released, nothing more is written to it; the other dirs
        serve on. Returns the partitions taken offline. Idempotent."""
        with self.lock:
            if log_dir.failure is not None:
                return []
            log_dir.failure = reason
            gone = self.log_dirs.partitions_in(log_dir)
            for tp in gone:
                self.offline.add(tp, f"log dir {log_dir.path} is offline: {reason}",
                                 log_dir_failed=True)
                topic = self._topics.get(tp.topic)
                if topic is None or tp.partition >= len(topic.logs):
                    continue
                log = topic.logs[tp.partition]
                if log is not None:
                    topic.with_log(tp.partition, None)
                    try:
                        log.close()
                    except Exception:  # noqa: BLE001 - the disk failed: closing may too
                        pass
            log_dir.release()
            return gone

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
            source = self.log_dirs.dir_of(tp)
            if source is destination or tp in self.log_dirs.moving:
                return False
            future = os.path.join(destination.path, future_dir_name(tp.topic, tp.partition))
            os.mkdir(future)
            self.log_dirs.moving[tp] = (destination, future)
        src = os.path.join(source.path, filenames.partition_dir_name(*tp))
        copied: dict[str, tuple[int, int]] = {}
        try:
            log.flush()
            copy_changed(src, future, copied)  # the bulk, while the Log serves
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
                    copy_changed(src, future, copied, final=True)
                    fsync_files(future)
                    target = os.path.join(destination.path, filenames.partition_dir_name(*tp))
                    os.rename(future, target)
                    # Durable before the source goes: a crash between leaves two copies
                    # (refused by name at the next open), never none.
                    checkpoints.fsync_dir(destination.path)
                    try:
                        deleted = os.path.join(source.path, delete_dir_name(*tp))
                        os.rename(src, deleted)
                    except BaseException:
                        os.rename(target, future)  # one copy only: the source's
                        raise
                    checkpoints.fsync_dir(source.path)
                except BaseException:
                    # The partition stays where it was: reopen it there.
                    topic.with_log(tp.partition, self._open_or_offline(
                        src, tp, topic.config, topic_id=None))
                    raise
                self.log_dirs.placement[tp] = destination
                del self.log_dirs.moving[tp]
                topic.with_log(tp.partition, self._open_or_offline(
                    target, tp, topic.config, topic_id=None))
                self.write_checkpoints()
        except BaseException:
            with self.lock:
                if self.log_dirs.moving.get(tp, (None, ""))[1] == future:
                    del self.log_dirs.moving[tp]
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
                        d = self.log_dirs.dir_of(TopicPartition(name, p))
                        failed.setdefault(id(d), (d, f"a write to {name}-{p} failed"))
            for d, reason in failed.values():
                self.fail_dir(d, reason)
            return [d for d, _reason in failed.values()]

    # --- opening ---------------------------------------------------------------------------

    def open(self, *, node_id: int, cluster_id: str | None,
             on_progress: Callable[[int, int], None] | None = None) -> None:
        """Open the directory: create it (a writer), take its writer lock, write a new
        ``meta.properties`` (``node_id``, ``cluster_id``) if it has none, read the checkpoints
        and the registry (restoring the producer-id blocks), remove leftover ``-delete``
        directories and open every topic found in the registry or on disk, calling
        ``on_progress(done, total)`` after each; a writer records topics found on disk only
        (Kafka's, or a crash's) in the registry. The clean-shutdown marker stays until
        :meth:`begin_writing`. On any error call :meth:`abort_open`.

        Several dirs (JBOD): :meth:`LogDirs.open <seglog.log_dirs.LogDirs.open>` and
        :meth:`~seglog.log_dirs.LogDirs.scan`. A partition the registry knows but no online
        dir holds is offline while a dir is offline (it may be there), else made anew."""
        self.meta = self.log_dirs.open(node_id=node_id, cluster_id=cluster_id)
        # Ids of the last block may have been handed out before a crash: the producer-id
        # manager starts after it (_read_registry restores it).
        registry = self._read_registry()
        found = self.log_dirs.scan()
        (self._recovery_points, self._log_start_offsets, self._high_watermarks,
         self._cleaner_offsets) = self.log_dirs.read_checkpoints()
        self.closed = False
        for done, name in enumerate(names := sorted(set(registry) | set(found)), 1):
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
            if on_progress is not None:
                on_progress(done, len(names))
        self._checkpoints_open = not self.read_only
        if not self.read_only and set(found) - set(registry):
            self.write_registry()  # adopt topics found on disk (e.g. made by Kafka)

    def begin_writing(self) -> None:
        """Remove the clean-shutdown marker (durably): from here on a crash makes the next
        open recover. Called once opening succeeded as a whole: an open that fails on corrupt
        bytes has written nothing, and the next open must not take it for a crash and cut
        what this one refused to."""
        for d in self.log_dirs.online():
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
        self.log_dirs.release()

    def _with_topic_defaults(self, name: str, overrides: Mapping[str, Any]) -> LogConfig:
        """A reopened topic's config: its recorded overrides over ``topic_config_defaults``."""
        try:
            return self.topic_config_defaults.replace(**overrides)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"topic {name!r}: its configs {dict(overrides)} do not "
                                     f"fit the broker's defaults: {e}") from None
    def _read_registry(self) -> dict[str, dict[str, Any]]:
        """The topics registry (:func:`~seglog.topic_registry.read_registry`) of the online
        dir that wrote it last (each online dir gets every write; one that was offline
        meanwhile holds an older one); restores the producer-id blocks from it."""
        topics, block_end = topic_registry.read_registry(self.log_dirs.newest_registry_dir())
        self._producer_ids.restore(block_end)
        return topics

    def write_registry(self, *, producer_id_block_end: int | None = None) -> None:
        """Replace ``seglog-topics.json`` (:func:`~seglog.topic_registry.write_registry`): every
        topic's id, partition count and the configs it sets over ``topic_config_defaults``,
        and ``producer_id_block_end`` (None: the producer-id blocks' current end)."""
        if producer_id_block_end is None:
            producer_id_block_end = self._producer_ids.block_end
        topics = {name: {"topic_id": t.topic_id, "partitions": t.partitions,
                         "config": topic_registry.overrides_of(t.config,
                                                               self.topic_config_defaults)}
                  for name, t in sorted(self._topics.items())}
        for d in self.log_dirs.online():
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
                if p not in found and tp not in self.log_dirs.placement and not self.read_only:
                    if len(self.log_dirs.online()) < len(self.dirs):
                        # It may be in the offline dir: never made anew elsewhere.
                        self.offline.add(tp, "in none of the online log dirs (one is "
                                             "offline)", log_dir_failed=True)
                        logs.append(None)
                        continue
                    self.log_dirs.placement[tp] = self.log_dirs.next_dir()
                dir_path = self.log_dirs.partition_path(tp)
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
                if expected and file_bytes_are(metadata.path, expected):
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
            if tp not in self.log_dirs.placement:
                continue
            found = checkpoints.PartitionMetadataFile(os.path.join(
                self.log_dirs.partition_path(tp), filenames.PARTITION_METADATA)).read()
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
                self.log_dirs.placement[TopicPartition(name, p)] = self.log_dirs.next_dir()
            dir_paths = [self.log_dirs.partition_path(TopicPartition(name, p)) for p in range(first, end)]
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
        """TopicExistsError when an online dir has a directory of one of ``partitions``."""
        for p in partitions:
            if self.log_dirs.exists(name, p):
                raise TopicExistsError(f"partition directory of '{name}' {p} already exists")

    def _remove_new_partitions(self, name: str, partitions: range) -> None:
        """Undo a failed creation of ``partitions`` of ``name``: remove the directories
        made and forget where they were placed."""
        with self.lock:
            for p in partitions:
                tp = TopicPartition(name, p)
                if tp in self.log_dirs.placement:
                    shutil.rmtree(self.log_dirs.partition_path(tp), ignore_errors=True)
                    del self.log_dirs.placement[tp]

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
            topic.deleted = True
            del self._topics[name]
            renamed = []
            touched: dict[int, LogDir] = {}
            for p, log in enumerate(topic.logs):
                if log is not None:
                    log.close()
                tp = TopicPartition(name, p)
                self.offline.discard(tp)
                log_dir = self.log_dirs.placement.pop(tp, None)
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
                                                       topic.uuid)
                with self.lock:
                    if self._topics.get(name) is not topic:  # deleted meanwhile
                        for log in new_logs:
                            log.close()
                        raise UnknownTopicOrPartitionError(f"topic {name!r} was deleted")
                    # A new list: a reader that took the old one keeps a consistent view.
                    topic.logs = [*topic.logs, *new_logs]
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
                            failed.append((self.log_dirs.dir_of(TopicPartition(name, p)),
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
            for d in self.log_dirs.online():
                d.replication_checkpoint.write(self.log_dirs.entries_of(d, high_watermarks))

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
        return self.log_dirs.write_checkpoints(
            self._recovery_points, self._log_start_offsets, self._high_watermarks,
            self._cleaner_offsets, live)

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
                            unclean.add(id(self.log_dirs.dir_of(TopicPartition(name, p))))
                        log.close()
                if not self.read_only:
                    self.write_checkpoints(from_logs=False)
                    # An offline log (a failed write) must be recovered at the next open, and the
                    # marker is the whole directory's: without it every log of the dir recovers
                    # from its recovery point (Kafka's restart after a log dir failure).
                    for d in self.log_dirs.online():
                        if id(d) not in unclean:
                            checkpoints.write_clean_shutdown_marker(d.path)
            finally:
                self.closed = True
                self._checkpoints_open = False
                self.log_dirs.release()

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
            found = self.log_dirs.scan()
            for name in sorted(set(self._topics) - set(found)):
                topic = self._topics.pop(name)
                topic.deleted = True
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
