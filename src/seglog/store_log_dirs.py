"""The data directories of a :class:`~seglog.store.Store` seen from outside (JBOD, several
``log.dirs``): which dir holds a partition, each dir's state, moving a partition between dirs
and taking a failed dir offline. A mixin of :class:`~seglog.store.Store` (its own surface, kept
apart so that store.py stays within its line budget); the work is
:class:`~seglog.log_manager.LogManager`'s and :mod:`seglog.log_dirs`'.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import TYPE_CHECKING

from .errors import KafkaStorageError, UnknownTopicOrPartitionError
from .log_dirs import LogDirState
from .types import TopicPartition

if TYPE_CHECKING:
    from .log_manager import LogManager

__all__ = ["StoreLogDirs"]


class StoreLogDirs:
    """The log-dir methods of :class:`~seglog.store.Store` (which sets ``_logs`` and
    ``_lock``)."""

    _logs: LogManager
    _lock: threading.RLock

    def log_dirs(self) -> list[LogDirState]:
        """Every data directory (``path`` first, then ``extra_log_dirs``): its path, why it is
        offline (None while it serves) and the partitions it holds, sorted."""
        with self._lock:
            return [LogDirState(d.path, d.failure, tuple(self._logs.log_dirs.partitions_in(d)))
                    for d in self._logs.dirs]

    def log_dir_of(self, tp: tuple[str, int]) -> str:
        """The data directory holding ``tp`` (UnknownTopicOrPartitionError: none)."""
        with self._lock:
            held = self._logs.log_dirs.placement.get(TopicPartition(*tp))
            if held is None:
                raise UnknownTopicOrPartitionError(f"no log dir holds {tp[0]}-{tp[1]}")
            return held.path

    def move_partition(self, tp: tuple[str, int], log_dir: str) -> bool:
        """Move ``tp`` to data directory ``log_dir`` (:meth:`LogManager.move_partition
        <seglog.log_manager.LogManager.move_partition>`; KafkaStorageError: not a dir of
        this store, or offline). Blocking. False: nothing to do."""
        wanted = os.path.abspath(log_dir)
        for d in self._logs.dirs:
            if os.path.abspath(d.path) == wanted:
                return self._logs.move_partition(TopicPartition(*tp), d)
        raise KafkaStorageError(errno.ENOENT, f"{log_dir} is not a log dir of this store")

    def moving_partitions(self) -> dict[TopicPartition, str]:
        """``{tp: the data directory it is being copied to}`` of the moves under way."""
        with self._lock:
            return {tp: d.path for tp, (d, _path) in self._logs.log_dirs.moving.items()}

    def check_log_dirs(self) -> list[str]:
        """Take offline each data directory where a partition's write failed (an I/O error,
        Kafka's log dir failure) with its partitions; returns their paths (one dir: none)."""
        if self._logs.read_only or len(self._logs.dirs) == 1:
            return []
        return [d.path for d in self._logs.check_dirs()]
