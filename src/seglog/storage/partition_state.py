"""Where a log keeps its recovery point, log start offset and clean-shutdown marker.

Kafka keeps these per data directory, not per partition: ``recovery-point-offset-checkpoint``
and ``log-start-offset-checkpoint`` in the log dir root hold one ``topic partition offset`` line
per partition, and one ``.kafka_cleanshutdown`` marker covers every partition
(as in Kafka's ``LogManager``). A :class:`~seglog.storage.log.Log` talks to them through the
small interface :class:`PartitionState`, so that:

* a **standalone Log** (opened on a bare partition directory) uses :class:`PartitionDirState`,
  which keeps Kafka-format checkpoint files with a single entry, and the marker, *inside the
  partition directory* (the choice documented here: a partition directory is then
  self-contained and can be moved, and the file format is still Kafka's);
* a **Store** passes its own implementation that reads and writes its entry in the data-dir
  files it shares with every other partition (and the one marker of the data dir).

Thread safety: the Log calls these methods under its writer lock; implementations need not lock.
"""

from __future__ import annotations

import os
from typing import Protocol

from . import checkpoints

from .. import filenames

__all__ = ["PartitionDirState", "PartitionState"]


class PartitionState(Protocol):
    """The durable per-partition bookkeeping a Log needs (all offsets are record offsets)."""

    def load(self) -> tuple[int | None, int | None, bool]:
        """``(recovery_point, log_start_offset, clean_shutdown)``; None for a value never
        written. Raises :class:`~seglog.errors.CorruptCheckpointError`."""

    def begin_writing(self) -> None:
        """A writer opened the log: durably forget the clean-shutdown marker, so that a crash
        from now on makes the next open recover."""

    def save(self, *, recovery_point: int, log_start_offset: int) -> None:
        """Persist both offsets (write-temp, fsync, rename, fsync dir)."""

    def mark_clean_shutdown(self) -> None:
        """Everything is flushed and saved: record that the next open may skip recovery."""

    def load_failed(self, reason: str) -> None:
        """The log went offline on a segment's first use, for ``reason`` (lazy loading: the
        checks its open would have run failed; :attr:`Log.load_failure
        <seglog.storage.log.Log.load_failure>`). Told once."""


class PartitionDirState:
    """:class:`PartitionState` in Kafka's file formats, kept in the partition directory itself.

    Files: ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` (version 0,
    one entry ``topic partition offset``; the topic and partition come from the directory name
    ``<topic>-<partition>``, else the whole name and partition 0), and ``.kafka_cleanshutdown``.
    On read the single entry is used whatever its key, so renaming the directory is harmless.
    Unchanged values are not rewritten.
    """

    def __init__(self, dir_path: str | os.PathLike):
        self.dir_path = os.fspath(dir_path)
        name = os.path.basename(os.path.abspath(self.dir_path))
        parsed = filenames.parse_partition_dir_name(name)
        if parsed is None or any(c.isspace() for c in parsed[0]):
            parsed = ("".join("_" if c.isspace() else c for c in name) or "log", 0)
        self.topic_partition = parsed
        self._recovery = checkpoints.OffsetCheckpointFile(
            os.path.join(self.dir_path, filenames.RECOVERY_POINT_CHECKPOINT))
        self._start = checkpoints.OffsetCheckpointFile(
            os.path.join(self.dir_path, filenames.LOG_START_OFFSET_CHECKPOINT))
        self._saved: tuple[int, int] | None = None

    @property
    def log_start_offset_path(self) -> str:
        """The ``log-start-offset-checkpoint`` file (named in CorruptCheckpointError)."""
        return os.path.join(self.dir_path, filenames.LOG_START_OFFSET_CHECKPOINT)

    @staticmethod
    def _single(offsets: dict) -> int | None:
        return next(iter(offsets.values())) if offsets else None

    def load(self) -> tuple[int | None, int | None, bool]:
        """See :meth:`PartitionState.load`."""
        recovery_point = self._single(self._recovery.read())
        log_start_offset = self._single(self._start.read())
        if recovery_point is not None and log_start_offset is not None:
            self._saved = (recovery_point, log_start_offset)
        return recovery_point, log_start_offset, checkpoints.has_clean_shutdown_marker(self.dir_path)

    def read_log_start_offset(self) -> int | None:
        """The checkpointed log start offset (a read-only follower re-reads it on refresh)."""
        return self._single(self._start.read())

    def begin_writing(self) -> None:
        """See :meth:`PartitionState.begin_writing`."""
        checkpoints.remove_clean_shutdown_marker(self.dir_path)

    def save(self, *, recovery_point: int, log_start_offset: int) -> None:
        """See :meth:`PartitionState.save`."""
        if self._saved is not None:
            if self._saved[0] != recovery_point:
                self._recovery.write({self.topic_partition: recovery_point})
            if self._saved[1] != log_start_offset:
                self._start.write({self.topic_partition: log_start_offset})
        else:
            self._recovery.write({self.topic_partition: recovery_point})
            self._start.write({self.topic_partition: log_start_offset})
        self._saved = (recovery_point, log_start_offset)

    def mark_clean_shutdown(self) -> None:
        """See :meth:`PartitionState.mark_clean_shutdown`."""
        checkpoints.write_clean_shutdown_marker(self.dir_path)

    def load_failed(self, reason: str) -> None:
        """See :meth:`PartitionState.load_failed`: nothing to keep (the Log says it)."""
