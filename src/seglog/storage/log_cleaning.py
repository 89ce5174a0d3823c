"""The cleaner's hooks into a :class:`~seglog.storage.log.Log`: one compaction pass, the cleaner
checkpoint, the writer lock held for a pass, the transaction indexes and the swap of cleaned
segments into the chain, as a base class the Log extends (Kafka's ``UnifiedLog.replaceSegments``
and what ``LogCleaner`` asks of a log). The cleaning itself (which records survive, the
``.cleaned -> .swap -> final`` renames) is :mod:`seglog.storage.cleaner`'s.

The state and the Log's own steps this uses are declared below and provided by the Log
(``seglog.storage.log``).

Threads. A pass holds the Log's writer lock (:meth:`LogCleaning.cleaning`): appends and other
changes wait, reads do not (they hold a snapshot, and a replaced segment's files are removed
only after ``file_delete_delay_ms``).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any, ContextManager, cast

from .config import checked_now_ms
from .local_log import LocalLog
from .reads import LogView
from .txnindex import TransactionIndex

_log = logging.getLogger("seglog.storage.cleaner")

__all__ = ["LogCleaning"]


class LogCleaning:
    """The compaction methods of a Log (see the module docstring); not instantiated alone.

    Thread-safe: a pass and :meth:`replace_segments` hold the Log's writer lock; the checkpoint
    is a plain attribute the Store reads without it.
    """

    # Set by Log.open (seglog.storage.log).
    _lock: threading.RLock
    _view: LogView
    _local: LocalLog
    _cleaner_checkpoint: int | None

    if TYPE_CHECKING:
        # The Log's steps (seglog.storage.log.Log), for the type checker only.
        def _check_writable(self) -> None: ...
        def _publish(self, start: int, end: int, *,
                     high_watermark: int | None = None) -> None: ...

    # --- compaction (seglog.storage.cleaner) ------------------------------------------------------

    def compact(self, *, now_ms: int | None = None, force: bool = False) -> Any:
        """One compaction pass by Kafka's cleaner rules (:func:`seglog.storage.cleaner.clean_log`);
        returns its :class:`~seglog.storage.cleaner.CleanerStats` (``stats.skipped`` says why nothing
        was done: cleanup.policy without "compact", nothing dirty, or the dirty ratio not above
        ``min_cleanable_dirty_ratio`` and max.compaction.lag.ms not reached). ``force`` cleans
        regardless of policy and ratio. Holds the writer lock for the pass (appends wait, reads
        do not). Raises ReadOnlyError / LogClosedError, CorruptRecordError for a corrupt batch
        in what it reads (the pass stops; nothing it had not swapped in changes), TypeError /
        ValueError for a non-integer or out-of-int64 ``now_ms``."""
        from .cleaner import CleanableLog, clean_log

        now_ms = None if now_ms is None else checked_now_ms(now_ms)
        with self._lock:
            self._check_writable()
            # The Log this is a part of is the CleanableLog (its segments, offsets, ...).
            stats = clean_log(cast(CleanableLog, self), now_ms, force=force)
        if not stats.skipped:
            # Kafka's LogCleaner logs each log it cleaned with its figures.
            _log.info("[%s] Compacted offsets [%d, %d): %d segments, %d -> %d bytes, %d records "
                      "kept, %d removed, in %.0f ms", os.path.basename(self._local.dir_path),
                      stats.first_dirty_offset, stats.first_uncleanable_offset,
                      stats.segments_cleaned, stats.bytes_read, stats.bytes_written,
                      stats.records_kept, stats.records_dropped, stats.duration_ms)
        return stats

    @property
    def cleaner_checkpoint(self) -> int | None:
        """The cleaner checkpoint: the first offset the next compaction treats as dirty (None
        before the first pass). A Store gathers it into ``cleaner-offset-checkpoint``."""
        return self._cleaner_checkpoint

    @cleaner_checkpoint.setter
    def cleaner_checkpoint(self, offset: int | None) -> None:
        self._cleaner_checkpoint = offset

    def cleaning(self) -> ContextManager[Any]:
        """A context manager holding the writer lock (re-entrant) for a compaction pass: appends
        and other changes wait, reads do not (:func:`seglog.storage.cleaner.clean_log`)."""
        return self._lock

    def txn_index(self, base_offset: int) -> TransactionIndex:
        """The log's own :class:`~seglog.storage.txnindex.TransactionIndex` of the segment at
        ``base_offset`` (cached by a writer, so the cleaner's renames reach the object the log
        appends to). Call with :meth:`cleaning` held."""
        return self._local.txn_index(base_offset)

    def replace_segments(self, new_segment: Any, old_segments: list[Any], *, now_ms: int,
                         new_txn_index: TransactionIndex | None = None,
                         old_txn_indexes: list | None = None) -> None:
        """Publish the chain with ``new_segment`` in place of ``old_segments`` (the cleaner
        already renamed their files, ``.txnindex`` included, to ``.deleted``); their files
        are removed after ``file_delete_delay_ms`` like retention's, with the producer
        snapshots at the bases of the old segments the new one does not replace
        (``UnifiedLog.replaceSegments``, :meth:`LocalLog.replace_segments
        <seglog.storage.local_log.LocalLog.replace_segments>`). ``new_txn_index``: the new
        segment's transaction index; ``old_txn_indexes``: the old segments' (renamed). End
        and start offsets are unchanged."""
        with self._lock:
            view = self._view
            self._local.replace_segments(new_segment, list(old_segments), now_ms=now_ms,
                                         new_txn_index=new_txn_index,
                                         old_txn_indexes=old_txn_indexes)
            self._publish(view.start_offset, view.end_offset)
