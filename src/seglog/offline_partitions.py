"""The partitions of the data directories whose files failed to load (issue 23), or whose
log dir failed (JBOD).

A :class:`~seglog.log_manager.LogManager` keeps one :class:`OfflinePartitions`: a partition
whose Log failed to open, or whose segment failed the checks lazy loading deferred to its
first use, is recorded here with its reason and warned of once; it stays offline alone
(reads and writes raise :class:`~seglog.errors.PartitionOfflineError`, Kafka's
KAFKA_STORAGE_ERROR) until ``seglog recover`` (:mod:`seglog.partition_recovery`) truncates it
and the store reopens. It knows nothing of servers: the broker decides what to answer.
"""

from __future__ import annotations

import threading
import warnings

from .errors import PartitionOfflineError
from .types import TopicPartition

__all__ = ["OfflinePartitions"]


class OfflinePartitions:
    """``{tp: reason}`` of the offline partitions. Thread-safe: a Log reports from under its
    own lock, so this lock is taken last and nothing is called while holding it; the map is
    replaced, never changed in place, so a read needs no lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: dict[TopicPartition, str] = {}

    def add(self, tp: TopicPartition, reason: str, *, log_dir_failed: bool = False) -> None:
        """Record ``tp`` offline for ``reason`` and warn of it (RuntimeWarning) the first
        time; a partition already offline keeps its first reason. ``log_dir_failed``: it is
        offline with its whole log dir (JBOD), which a restart with the disk back recovers,
        not ``seglog recover``."""
        with self._lock:
            if tp in self._reasons:
                return
            self._reasons = {**self._reasons, tp: reason}
        if log_dir_failed:
            warnings.warn(f"seglog: partition {tp.topic}-{tp.partition} is offline with its "
                          f"log dir ({reason})", RuntimeWarning, stacklevel=3)
            return
        warnings.warn(f"seglog: partition {tp.topic}-{tp.partition} is offline, its files "
                      f"failed to load ({reason}); `seglog recover` truncates it to its last "
                      "valid offset", RuntimeWarning, stacklevel=3)

    def discard(self, tp: TopicPartition) -> None:
        """Forget ``tp`` (its topic was deleted)."""
        if tp in self._reasons:
            with self._lock:
                self._reasons = {k: v for k, v in self._reasons.items() if k != tp}

    def reasons(self) -> dict[TopicPartition, str]:
        """A copy of ``{tp: reason}``; costs nothing while there is none."""
        return dict(self._reasons)

    def __len__(self) -> int:
        return len(self._reasons)

    def error(self, tp: TopicPartition) -> PartitionOfflineError:
        """The error a use of offline partition ``tp`` raises."""
        reason = self._reasons.get(tp, "its files failed to load")
        return PartitionOfflineError(f"partition {tp.topic}-{tp.partition} is offline: {reason}",
                                     topic=tp.topic, partition=tp.partition, reason=reason)
