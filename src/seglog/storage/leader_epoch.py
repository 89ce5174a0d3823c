"""A partition's leader epochs and where each began: Kafka 2.8's ``LeaderEpochFileCache`` over
the ``leader-epoch-checkpoint`` file (replication.md §3.6; KIP-101, KIP-279).

The cache is a map from leader epoch to the first offset written in that epoch, kept in epoch
order with epochs and start offsets both strictly increasing. It answers "where does epoch
*e* end?" (:meth:`LeaderEpochCache.end_offset_for`, what OffsetsForLeaderEpoch serves and a
follower truncates to) and "what is the latest epoch?" (what a follower asks about). It is
changed by four callers: a leader's appends and ``become_leader`` (:meth:`assign` at the log
end offset), a follower's appends (one :meth:`assign` per batch, at its base offset, with the
leader's stamped epoch), truncation (:meth:`truncate_from_end`), and a log start offset moving
up (:meth:`truncate_from_start`); a full reset :meth:`clear`-s it.

Persistence: every change rewrites the checkpoint durably (write-temp, fsync, rename, fsync
dir; :class:`~seglog.storage.checkpoints.LeaderEpochCheckpointFile`). Unlike Kafka, which
creates the file with every log, the file is written only when there is a change to record, so
a log that never took part in replication (the standalone store) has none. A file that cannot
be read (bad version, count or line, or an entry with a negative epoch or offset, which
Kafka's ``assign`` refuses with IllegalArgumentException) raises
:class:`~seglog.errors.CorruptCheckpointError` when the cache is loaded; entries that break
monotonicity are dropped on load exactly as :meth:`assign` drops them (Kafka loads through it).

Thread safety: one lock guards the entries; the owning Log calls the mutators under its own
lock, and readers (OffsetsForLeaderEpoch on the event loop) may call the queries from any
thread. ``log_end_offset`` is a callable read by :meth:`end_offset_for` for the latest epoch.

The partitionLeaderEpoch field a leader stamps on every batch it appends (bytes 12-15, outside
the CRC) is written by the segment itself (``Segment.append(partition_leader_epoch=)``).
"""

from __future__ import annotations

import bisect
import os
import threading
from typing import Any, Callable, Iterable

from .. import filenames
from ..errors import CorruptCheckpointError
from .checkpoints import EpochEntry, LeaderEpochCheckpointFile

__all__ = [
    "EpochEntry",
    "LeaderEpochCache",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
]

#: Kafka's ``OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH``: no epoch known.
UNDEFINED_EPOCH = -1
#: Kafka's ``OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET``: no end offset known.
UNDEFINED_EPOCH_OFFSET = -1

_EPOCH_MAX = 2**31 - 1
_OFFSET_MAX = 2**63 - 1


def _check_entry(epoch: int, start_offset: int) -> None:
    if not isinstance(epoch, int) or not isinstance(start_offset, int):
        raise TypeError(f"epoch and start_offset must be ints, got {epoch!r}, {start_offset!r}")
    if not (0 <= epoch <= _EPOCH_MAX and 0 <= start_offset <= _OFFSET_MAX):
        raise ValueError(f"invalid partition leader epoch entry (epoch={epoch}, "
                         f"start_offset={start_offset})")


class LeaderEpochCache:
    """The leader epoch cache of one partition (see the module docstring).

    Construct with :meth:`load`. ``path`` None keeps the entries in memory only (tests, and a
    read-only log, which never writes).
    """

    def __init__(self, log_end_offset: Callable[[], int], *, path: str | None = None,
                 entries: Iterable[EpochEntry] = (), file_exists: bool | None = None):
        """A cache written to the checkpoint at ``path`` holding ``entries`` (each taken as
        :meth:`assign` would take it, without writing). ``file_exists``: whether ``path``
        exists, when the caller knows (None: asked when it matters). ValueError for a
        negative epoch or offset."""
        self._log_end_offset = log_end_offset
        self._path = path
        # Made on the first write: a Store opens thousands of logs, most never write one
        # (issue 14: reopen cost).
        self._checkpoint: LeaderEpochCheckpointFile | None = None
        self._lock = threading.Lock()
        self._epochs: list[int] = []  # increasing
        self._starts: list[int] = []  # increasing, parallel to _epochs
        self._file_exists = file_exists if path is not None else False
        for entry in entries:
            _check_entry(entry.epoch, entry.start_offset)
            self._assign_locked(entry.epoch, entry.start_offset)

    @classmethod
    def load(cls, dir_path: str | os.PathLike, log_end_offset: Callable[[], int], *,
             read_only: bool = False, exists: bool | None = None) -> "LeaderEpochCache":
        """The cache of the partition directory ``dir_path``, from its
        ``leader-epoch-checkpoint`` (empty when the file is missing). ``read_only``: never
        write the file. ``exists``: whether the file is there, when the caller's directory
        listing says so (False: nothing is read; None: it is read if present). Raises
        CorruptCheckpointError for a file that cannot be read or holds a negative epoch or
        offset; OSError from the OS."""
        path = os.path.join(os.fspath(dir_path), filenames.LEADER_EPOCH_CHECKPOINT)
        written = None if read_only else path
        if exists is False:
            return cls(log_end_offset, path=written, file_exists=False)
        entries = LeaderEpochCheckpointFile(path).read()
        for entry in entries:
            if entry.epoch < 0 or entry.start_offset < 0:
                raise CorruptCheckpointError(
                    f"{path}: invalid partition leader epoch entry (epoch={entry.epoch}, "
                    f"start_offset={entry.start_offset})", path=path,
                    line=f"{entry.epoch} {entry.start_offset}")
        return cls(log_end_offset, path=written, entries=entries)

    # --- queries ---------------------------------------------------------------------------------

    @property
    def path(self) -> str | None:
        """The checkpoint file written on every change, or None (kept in memory only)."""
        return self._path

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """Every ``EpochEntry(epoch, start_offset)``, in increasing epoch order."""
        with self._lock:
            return tuple(EpochEntry(e, s) for e, s in zip(self._epochs, self._starts))

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The entry of the latest epoch, or None when empty."""
        with self._lock:
            return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The entry of the earliest epoch, or None when empty."""
        with self._lock:
            return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    @property
    def latest_epoch(self) -> int:
        """The latest epoch with an entry; ``UNDEFINED_EPOCH`` (-1) when empty."""
        with self._lock:
            return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def previous_epoch(self) -> int:
        """The epoch before the latest one; ``UNDEFINED_EPOCH`` (-1) when there is none."""
        with self._lock:
            return self._epochs[-2] if len(self._epochs) >= 2 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for ``requested_epoch`` (Kafka's ``endOffsetFor``): the
        largest epoch <= the requested one and where it ends, the start offset of the next
        epoch, or the log end offset when the latest epoch is asked for.

        ``(-1, -1)`` when ``requested_epoch`` is -1 (UNDEFINED_EPOCH), when the cache is empty
        and when it is above every epoch cached. Below the earliest epoch (KIP-279, apache/kafka
        PR #5678) the answer is ``(requested_epoch, start of the earliest epoch)``: the data
        before it is gone, and a follower must start there."""
        with self._lock:
            epochs = self._epochs
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epochs and epochs[-1] == requested_epoch:
                return requested_epoch, self._log_end_offset()
            higher = bisect.bisect_right(epochs, requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, self._starts[0]
            return epochs[higher - 1], self._starts[higher]

    # --- changes ---------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` began at ``start_offset`` (Kafka's ``assign``); returns whether
        the cache changed (and the file was rewritten).

        A no-op unless ``epoch`` differs from the latest epoch or ``start_offset`` is below its
        start (an epoch's start is never moved up). Before the entry is added, the trailing
        entries with an epoch >= ``epoch`` or a start offset >= ``start_offset`` are removed,
        so epochs and start offsets stay strictly increasing. TypeError / ValueError for a
        non-integer, negative or out-of-range epoch or offset."""
        _check_entry(epoch, start_offset)
        with self._lock:
            if not self._assign_locked(epoch, start_offset):
                return False
            self._flush_locked()
            return True

    def assign_recovered(self, batches: Iterable[Any]) -> None:
        """After recovery validated ``batches`` (an unclean shutdown): every batch whose
        partitionLeaderEpoch is above the latest epoch is assigned (Kafka's
        ``LogSegment.recover``), so a crash between a batch's write and its cache write loses
        no entry. Only for a log that keeps a cache file: a standalone log writes none."""
        for batch in batches:  # bounded by the caller's log
            epoch = batch.partition_leader_epoch
            if epoch >= 0 and epoch > self.latest_epoch:
                self.assign(epoch, batch.base_offset)

    def _assign_locked(self, epoch: int, start_offset: int) -> bool:
        epochs, starts = self._epochs, self._starts
        if epochs and epoch == epochs[-1] and start_offset >= starts[-1]:
            return False
        # maybeTruncateNonMonotonicEntries
        while epochs and (epochs[-1] >= epoch or starts[-1] >= start_offset):
            epochs.pop()
            starts.pop()
        epochs.append(epoch)
        starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove every entry starting at or above ``end_offset`` (Kafka's
        ``truncateFromEnd``: the log was truncated to ``end_offset``); a negative
        ``end_offset`` is ignored. Returns whether the cache changed."""
        with self._lock:
            starts = self._starts
            if end_offset < 0 or not starts or starts[-1] < end_offset:
                return False
            while starts and starts[-1] >= end_offset:
                starts.pop()
                self._epochs.pop()
            self._flush_locked()
            return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop the entries wholly below the new log start ``start_offset`` and move the last
        entry starting at or below it to start there (Kafka's ``truncateFromStart``; an entry
        at exactly ``start_offset`` stays). A negative ``start_offset`` is ignored. Returns
        whether the cache changed (Kafka rewrites the file even when the kept entry already
        started there; seglog writes only a change)."""
        with self._lock:
            epochs, starts = self._epochs, self._starts
            removed = bisect.bisect_right(starts, start_offset)
            if removed == 0:
                return False
            if removed == 1 and starts[0] == start_offset:
                return False
            kept_epoch = epochs[removed - 1]
            del epochs[:removed]
            del starts[:removed]
            epochs.insert(0, kept_epoch)
            starts.insert(0, start_offset)
            self._flush_locked()
            return True

    def clear(self) -> None:
        """Remove every entry and persist that (Kafka's ``clearAndFlush``; a missing file
        stays missing)."""
        with self._lock:
            if not self._epochs:
                if self._file_exists is None and self._path is not None:
                    self._file_exists = os.path.exists(self._path)
                if not self._file_exists:
                    return
            self._epochs.clear()
            self._starts.clear()
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._path is None:
            return
        if self._checkpoint is None:
            self._checkpoint = LeaderEpochCheckpointFile(self._path)
        self._checkpoint.write(EpochEntry(e, s) for e, s in zip(self._epochs, self._starts))
        self._file_exists = True

    def __repr__(self) -> str:
        pairs = ", ".join(f"{e}:{s}" for e, s in zip(self._epochs, self._starts))
        return f"LeaderEpochCache({pairs})"
