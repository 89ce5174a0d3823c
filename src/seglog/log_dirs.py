"""Where a :class:`~seglog.log_manager.LogManager`'s partitions live: its log dirs (Kafka's
``log.dirs``, several: JBOD).

:class:`LogDirs` keeps the dirs (:class:`LogDir`: path, writer lock, ``meta.properties``,
the four offset checkpoint files of the partitions it holds, its clean-shutdown state, and
why it failed), which dir holds each partition (:attr:`LogDirs.placement`, found by scanning
at open, chosen by :meth:`LogDirs.next_dir` for a new one: the online dir holding the
fewest, Kafka's ``nextLogDirs``) and the moves under way (:attr:`LogDirs.moving`, each a
``<topic>-<partition>.<uuid>-future`` copy in its destination). A dir that cannot be made,
locked, read or scanned at open is offline, the others open; when every dir failed the
open fails (Kafka's rule). It knows nothing of topics' Logs: the LogManager does.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from typing import Any, Mapping, NamedTuple

from . import filenames
from .errors import CorruptCheckpointError, InvalidTopicError, KafkaStorageError
from .storage import checkpoints
from .storage.locking import DirectoryLock
from .topic_registry import TOPICS_FILE, validate_topic_name
from .types import TopicPartition

__all__ = ["CLUSTER_METADATA_TOPIC", "FUTURE_DIR_SUFFIX", "LogDir", "LogDirState", "LogDirs", "copy_changed",
           "delete_dir_name", "file_bytes_are", "fsync_files", "future_dir_name"]

#: The KRaft metadata log's topic (Kafka's ``Topic.CLUSTER_METADATA_TOPIC_NAME``): its
#: ``__cluster_metadata-0`` directory in a Kafka log dir is the controller's Raft log, never a
#: topic partition (``LogManager.loadLogs`` skips it), so the scan skips it too.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
#: The suffix of a partition's copy being filled in another log dir (Kafka's
#: ``UnifiedLog.FutureDirSuffix``).
FUTURE_DIR_SUFFIX = "-future"


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``UnifiedLog.logFutureDirName``: ``<topic>-<partition>.<uuid hex>-future``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``LocalLog.logDeleteDirName``: ``<topic>-<partition>.<uuid hex>-delete``, the
    topic cut short so that the name fits 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{filenames.DELETE_DIR_SUFFIX}"
    return topic[:min(len(topic), 255 - len(suffix))] + suffix


def file_bytes_are(path: str, expected: bytes) -> bool:
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


def copy_changed(src: str, dst: str, copied: dict[str, tuple[int, int]], *,
                 final: bool = False) -> None:
    """Make directory ``dst`` hold the files of ``src``: copy each file whose (size, mtime)
    differs from ``copied`` (what was copied of it before; updated), remove those gone from
    ``src``. ``final`` (the files no longer change) copies again every file but the
    ``.log`` segments whose stamp is unchanged: an index is written through a mapping,
    which may leave its size and mtime as they were, while a segment only grows (or is
    replaced by a rename, a new mtime). Subdirectories are not a partition's and are
    skipped."""
    names = set()
    for entry in os.scandir(src):
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            stamp = (st.st_size, st.st_mtime_ns)
            if copied.get(entry.name) != stamp or (
                    final and not entry.name.endswith(filenames.LOG_SUFFIX)):
                shutil.copyfile(entry.path, os.path.join(dst, entry.name))
                copied[entry.name] = stamp
        except FileNotFoundError:
            continue  # removed meanwhile (retention, a roll's cleanup): gone from dst below
        names.add(entry.name)
    for name in set(copied) - names:
        os.remove(os.path.join(dst, name))
        del copied[name]


def fsync_files(path: str) -> None:
    """fsync every file of directory ``path``, then the directory."""
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False):
            fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    checkpoints.fsync_dir(path)


class LogDirState(NamedTuple):
    """One data directory of a :class:`~seglog.store.Store` (:meth:`Store.log_dirs
    <seglog.store.Store.log_dirs>`)."""

    #: The directory, as given.
    path: str
    #: Why it is offline (its partitions with it); None while it serves.
    failure: str | None
    #: The partitions it holds, sorted.
    partitions: tuple[TopicPartition, ...]


class LogDir:
    """One ``log.dirs`` entry: ``path``, its writer lock, ``meta.properties`` (``meta``), its
    four offset checkpoint files (Kafka keeps them per log dir, each naming the partitions
    of that dir only), whether it was shut down cleanly (``clean_shutdown``, its
    ``.kafka_cleanshutdown`` marker at open) and ``failure``: None while it serves, else why
    it is offline (its partitions are offline with it)."""

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

    def fail(self, reason: str) -> None:
        """Mark the dir offline for ``reason`` and release its lock."""
        self.failure = reason
        self.release()

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


class LogDirs:
    """The log dirs of a LogManager, ``paths`` in ``log.dirs`` order (see the module
    docstring). Not locked: the LogManager calls it under its metadata lock."""

    def __init__(self, paths: list[str], *, read_only: bool):
        self.dirs = [LogDir(d) for d in dict.fromkeys(paths)]
        self.read_only = read_only
        #: Which dir holds each partition (scanned at open; placed at creation).
        self.placement: dict[TopicPartition, LogDir] = {}
        #: The partitions being moved to another dir: ``{tp: (the dir, the -future path)}``.
        self.moving: dict[TopicPartition, tuple[LogDir, str]] = {}

    @property
    def several(self) -> bool:
        """Whether there is more than one dir (one dir's errors are raised as they are)."""
        return len(self.dirs) > 1

    def dir_of(self, tp: TopicPartition) -> LogDir:
        """The dir holding partition ``tp`` (the first dir for one not placed)."""
        return self.placement.get(tp, self.dirs[0])

    def partition_path(self, tp: TopicPartition) -> str:
        """The directory of partition ``tp`` in the dir holding it."""
        return os.path.join(self.dir_of(tp).path, filenames.partition_dir_name(*tp))

    def online(self) -> list[LogDir]:
        """The dirs that serve, in ``log.dirs`` order."""
        return [d for d in self.dirs if d.failure is None]

    def partitions_in(self, log_dir: LogDir) -> list[TopicPartition]:
        """The partitions ``log_dir`` holds, sorted."""
        return sorted(tp for tp, d in self.placement.items() if d is log_dir)

    def next_dir(self) -> LogDir:
        """Kafka's ``LogManager.nextLogDirs``: the online dir holding the fewest partitions
        (the first of them in ``log.dirs`` order). KafkaStorageError when none is online."""
        online = self.online()
        if not online:
            raise KafkaStorageError(errno.EIO, "every log dir is offline")
        counts = {id(d): 0 for d in online}
        for d in self.placement.values():
            if id(d) in counts:
                counts[id(d)] += 1
        return min(online, key=lambda d: counts[id(d)])

    def entries_of(self, log_dir: LogDir, offsets: Mapping[Any, int]) -> dict[Any, int]:
        """The entries of ``offsets`` (keyed by ``(topic, partition)``) of partitions
        ``log_dir`` holds, sorted: what its checkpoint file names."""
        placement = self.placement
        return {k: v for k, v in sorted(offsets.items())
                if placement.get(TopicPartition(k[0], k[1])) is log_dir}

    def exists(self, name: str, partition: int) -> bool:
        """Whether an online dir has a directory of partition ``partition`` of ``name``."""
        return any(os.path.exists(os.path.join(d.path, filenames.partition_dir_name(
            name, partition))) for d in self.online())

    def _check_any_online(self) -> None:
        if not self.online():
            raise KafkaStorageError(errno.EIO, "every log dir failed: " + "; ".join(
                f"{d.path}: {d.failure}" for d in self.dirs))

    # --- opening ---------------------------------------------------------------------------

    def open(self, *, node_id: int, cluster_id: str | None) -> checkpoints.MetaProperties | None:
        """Make (a writer), lock and read each dir's ``meta.properties`` and clean-shutdown
        marker; a dir that fails (an OSError) is offline. A writer gives a dir without
        ``meta.properties`` one (the others' cluster and node id, else ``cluster_id`` /
        ``node_id``; a directory id of its own). Returns the first dir's meta.
        KafkaStorageError when every dir failed; CorruptCheckpointError when two dirs name
        different clusters or nodes."""
        for log_dir in self.dirs:
            try:
                self._open_dir(log_dir)
            except OSError as exc:
                if not self.several:
                    raise  # one dir: its error, as before JBOD
                log_dir.fail(f"{type(exc).__name__}: {exc}")
        self._check_any_online()
        with_meta = [d for d in self.online() if d.meta is not None]
        first = with_meta[0].meta if with_meta else None
        for d in with_meta[1:]:
            meta = d.meta
            assert meta is not None and first is not None
            if (meta.cluster_id, meta.node_id) != (first.cluster_id, first.node_id):
                raise CorruptCheckpointError(
                    f"{d.path}/meta.properties names cluster {meta.cluster_id} and node "
                    f"{meta.node_id}, {with_meta[0].path} cluster {first.cluster_id} and node "
                    f"{first.node_id}: the dirs belong to different brokers", path=d.path)
        if not self.read_only:
            for d in self.online():
                if d.meta is None:
                    d.meta = checkpoints.MetaProperties(
                        version=1, cluster_id=first.cluster_id if first else (
                            cluster_id or checkpoints.uuid_to_kafka_str(
                                checkpoints.new_kafka_uuid())),
                        node_id=first.node_id if first else node_id,
                        directory_id=checkpoints.new_kafka_uuid())
                    d.meta.write(d.path)
                    first = first or d.meta
        return next((d.meta for d in self.online() if d.meta is not None), None)

    def _open_dir(self, log_dir: LogDir) -> None:
        if self.read_only:
            if not os.path.isdir(log_dir.path):
                raise FileNotFoundError(f"no data directory at {log_dir.path}")
        else:
            os.makedirs(log_dir.path, exist_ok=True)
            log_dir.lock = DirectoryLock(log_dir.path)
        log_dir.meta = checkpoints.MetaProperties.read(log_dir.path)
        log_dir.clean_shutdown = checkpoints.has_clean_shutdown_marker(log_dir.path)

    def newest_registry_dir(self) -> str:
        """The online dir whose topics registry was written last (each online dir gets
        every write; one that was offline meanwhile holds an older one)."""
        newest, newest_ns = self.online()[0].path, -1
        for d in self.online():
            try:
                mtime_ns = os.stat(os.path.join(d.path, TOPICS_FILE)).st_mtime_ns
            except OSError:
                continue
            if mtime_ns > newest_ns:
                newest, newest_ns = d.path, mtime_ns
        return newest

    def read_checkpoints(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int],
                                        dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """The recovery points, log start offsets, high watermarks and cleaner offsets of
        every online dir's files, keeping of each file the entries of the partitions that dir
        holds (a stale entry of a partition moved elsewhere is not)."""
        recovery: dict[TopicPartition, int] = {}
        start: dict[TopicPartition, int] = {}
        high: dict[tuple[str, int], int] = {}
        cleaner: dict[tuple[str, int], int] = {}
        for d in self.online():
            mine = set(self.partitions_in(d))
            for file, out, as_tp in ((d.recovery_checkpoint, recovery, True),
                                     (d.log_start_checkpoint, start, True),
                                     (d.replication_checkpoint, high, False),
                                     (d.cleaner_checkpoint, cleaner, False)):
                for k, v in file.read().items():
                    if TopicPartition(*k) in mine:
                        out[TopicPartition(*k) if as_tp else k] = v  # type: ignore[index]
        return recovery, start, high, cleaner

    def scan(self) -> dict[str, list[int]]:
        """``{topic: [partitions]}`` of the partition directories of every online dir, and
        :attr:`placement` set to where each is (a dir that cannot be scanned is offline);
        leftover ``-delete`` and ``-future`` directories are removed (a writer only: a
        ``-future`` dir is a move a stop interrupted, not resumed). Kafka's KRaft metadata
        log (:data:`CLUSTER_METADATA_TOPIC`) is not a topic and is left alone. A partition
        in two dirs is CorruptCheckpointError (Kafka refuses to start the same way)."""
        found: dict[str, list[int]] = {}
        placement: dict[TopicPartition, LogDir] = {}
        for log_dir in self.online():
            try:
                here = self._scan_one(log_dir.path)
            except OSError as exc:
                if not self.several:
                    raise
                log_dir.fail(f"{type(exc).__name__}: {exc}")
                continue
            for topic, partitions in here.items():
                for p in partitions:
                    tp = TopicPartition(topic, p)
                    other = placement.get(tp)
                    if other is not None:
                        # Kafka's LogManager.loadLog: "Duplicate log directories ... found".
                        raise CorruptCheckpointError(
                            f"duplicate log directories for {topic}-{p} are found in both "
                            f"{other.path} and {log_dir.path}: delete the one of the dir "
                            "known to have failed recently", path=log_dir.path)
                    placement[tp] = log_dir
                    found.setdefault(topic, []).append(p)
        self._check_any_online()
        self.placement = placement
        return found

    def _scan_one(self, path: str) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name.endswith((filenames.DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                if not self.read_only:
                    shutil.rmtree(entry.path, ignore_errors=True)
                continue
            parsed = filenames.parse_partition_dir_name(entry.name)
            if parsed is None:
                continue  # -stray, or not ours
            topic, partition = parsed
            if topic == CLUSTER_METADATA_TOPIC:
                continue
            try:
                validate_topic_name(topic)
            except InvalidTopicError:
                continue
            found.setdefault(topic, []).append(partition)
        return found

    def write_checkpoints(self, recovery: Mapping[Any, int], start: Mapping[Any, int],
                          high: Mapping[Any, int], cleaner: Mapping[Any, int],
                          live: set[tuple[str, int]]) -> list[tuple[LogDir, str]]:
        """Write each online dir's four checkpoint files with the entries of the ``live``
        partitions it holds. Returns the dirs whose disk refused, with why (several dirs:
        the caller takes them offline; one dir: its OSError is raised)."""
        failed = []
        for d in self.online():
            try:
                for file, offsets in ((d.recovery_checkpoint, recovery),
                                      (d.log_start_checkpoint, start),
                                      (d.replication_checkpoint, high),
                                      (d.cleaner_checkpoint, cleaner)):
                    file.write({tp: v for tp, v in self.entries_of(d, offsets).items()
                                if tp in live})
            except OSError as exc:
                if not self.several:
                    raise
                failed.append((d, f"writing its checkpoints failed: {exc}"))
        return failed

    def release(self) -> None:
        """Release every dir's writer lock."""
        for d in self.dirs:
            d.release()
