"""Bringing an offline partition back: ``seglog recover`` (issue 23).

A partition whose files fail to load (a segment that lost flushed data, bytes that are not
valid where no recovery may cut them, a broken leader-epoch checkpoint) stays offline alone
(:meth:`LogManager.offline_partitions <seglog.log_manager.LogManager.offline_partitions>`):
nothing of it is cut at the open, because cutting flushed data silently is what Kafka's
recovery refuses to do after a clean shutdown too. Bringing it back is the operator's call,
made here with the broker stopped: :func:`recover_partition` truncates the partition to its
last valid offset as Kafka's unclean recovery does (``LogLoader.recoverLog``: every segment
validated batch by batch from the start, the first invalid byte and everything after it
cut, every later segment deleted), and also where the loader refuses a chain rather than
bytes (a segment whose flushed tail was cut while a later one exists, a batch whose offsets
reach the next segment): the segment is cut at the batch named and every later segment is
deleted. The data dir's checkpoints then say where the partition ends, so the next open
loads it clean. In a cluster the broker's followers fetch what was cut from the leader
again (their log end is below the leader's; the leader-epoch checks truncate any
divergence), as Kafka's replica fetcher does after a restart.

It works on the data directory's files (its writer lock held: LogLockedError while a broker
or Store has it open) and knows nothing of servers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import filenames, topic_registry
from .errors import CorruptCheckpointError, CorruptSegmentError, UnknownTopicOrPartitionError
from .storage import checkpoints
from .storage.config import LogConfig
from .storage.locking import DirectoryLock, check_unlocked
from .storage.log import Log

__all__ = ["RecoveryOutcome", "recover_partition"]


@dataclass
class RecoveryOutcome:
    """What :func:`recover_partition` did: the end offset the checkpoints promised
    (``promised_end``, None without one), the end offset now (``end_offset``), the files
    removed and the segments cut (``(path, size before, size after)``)."""

    promised_end: int | None
    end_offset: int = 0
    removed_files: list[str] = field(default_factory=list)
    cut_files: list[tuple[str, int, int]] = field(default_factory=list)


class _UncleanState:
    """The :class:`~seglog.storage.partition_state.PartitionState` of a recovery: no clean
    shutdown and recovery point 0 (every segment is validated from the start, as Kafka's
    unclean recovery validates from the recovery point), the checkpointed log start offset;
    what the Log saves is kept for the data dir's checkpoints."""

    def __init__(self, log_start_offset: int | None):
        self.log_start_offset = log_start_offset
        self.recovery_point: int | None = None

    def load(self) -> tuple[int | None, int | None, bool]:
        return 0, self.log_start_offset, False

    def begin_writing(self) -> None:
        pass  # the data dir's marker is the caller's

    def save(self, *, recovery_point: int, log_start_offset: int) -> None:
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset

    def mark_clean_shutdown(self) -> None:
        pass  # the data dir's marker is the caller's

    def load_failed(self, reason: str) -> None:
        pass  # every segment is opened eagerly here: the open raises instead


def _segment_bases(dir_path: str) -> list[int]:
    bases = []
    for name in os.listdir(dir_path):
        parsed = filenames.parse_segment_file(name)
        if parsed is not None and parsed[1] == filenames.LOG_SUFFIX and parsed[2] == "":
            bases.append(parsed[0])
    return sorted(bases)


def _cut_at(dir_path: str, exc: CorruptSegmentError, outcome: RecoveryOutcome) -> None:
    """Cut the segment ``exc`` names at the batch it names (its indexes go: rebuilt by the
    next open) and delete every later segment."""
    base = exc.base_offset
    if base < 0:
        raise exc  # names no segment: nothing to cut safely
    for later in [b for b in _segment_bases(dir_path) if b > base]:
        for path in filenames.segment_files(dir_path, later):
            if os.path.exists(path):
                os.remove(path)
                outcome.removed_files.append(path)
    log_path = exc.path or filenames.segment_files(dir_path, base)[0]
    size = os.path.getsize(log_path)
    if 0 <= exc.position < size:
        os.truncate(log_path, exc.position)
        outcome.cut_files.append((log_path, size, exc.position))
    for path in filenames.segment_files(dir_path, base):
        if path != log_path and os.path.exists(path):
            os.remove(path)
            outcome.removed_files.append(path)


def recover_partition(data_dir: str, topic: str, partition: int, *,
                      backend: str | None = None) -> RecoveryOutcome:
    """Truncate partition ``topic``-``partition`` of the data directory ``data_dir`` to its
    last valid offset (module docstring) and record its new end in the data dir's
    checkpoints (recovery point, log start offset, high watermark clamped to the end).
    A partition that loads whole keeps every record. Raises LogLockedError while the
    directory is open elsewhere, UnknownTopicOrPartitionError without such a partition."""
    lock = DirectoryLock(data_dir)
    try:
        dir_path = os.path.join(data_dir, filenames.partition_dir_name(topic, partition))
        if not os.path.isdir(dir_path):
            raise UnknownTopicOrPartitionError(f"no partition directory {dir_path}")
        check_unlocked(dir_path)
        key = (topic, partition)

        def cp(name: str) -> checkpoints.OffsetCheckpointFile:
            return checkpoints.OffsetCheckpointFile(os.path.join(data_dir, name))

        recovery_cp = cp(filenames.RECOVERY_POINT_CHECKPOINT)
        start_cp = cp(filenames.LOG_START_OFFSET_CHECKPOINT)
        hw_cp = cp(filenames.REPLICATION_OFFSET_CHECKPOINT)
        recovery_points, starts, high_watermarks = recovery_cp.read(), start_cp.read(), \
            hw_cp.read()
        outcome = RecoveryOutcome(promised_end=recovery_points.get(key))
        entry = topic_registry.read_registry(data_dir)[0].get(topic)
        config = entry["log_config"] if entry else LogConfig()
        state = _UncleanState(starts.get(key))
        # Each pass cuts at least one batch or removes a file: bounded by the directory.
        for _ in range(len(os.listdir(dir_path)) + 2):
            try:
                log = Log.open(dir_path, config=config, backend=backend, state=state,
                               lock_directory=False, create_directory=False)
                break
            except CorruptSegmentError as exc:
                _cut_at(dir_path, exc, outcome)
            except CorruptCheckpointError as exc:
                epochs = os.path.join(dir_path, filenames.LEADER_EPOCH_CHECKPOINT)
                if exc.path != epochs or not os.path.exists(epochs):
                    raise
                os.remove(epochs)  # the leader epochs are taken from the batches again
                outcome.removed_files.append(epochs)
        else:
            raise CorruptSegmentError(f"{dir_path} could not be recovered")
        with log:
            outcome.end_offset = log.end_offset
            start = log.start_offset
        recovery_points[key] = state.recovery_point if state.recovery_point is not None \
            else outcome.end_offset
        starts[key] = start
        if key in high_watermarks:
            high_watermarks[key] = min(high_watermarks[key], outcome.end_offset)
        recovery_cp.write(recovery_points)
        start_cp.write(starts)
        hw_cp.write(high_watermarks)
        return outcome
    finally:
        lock.close()
