"""Retention of a :class:`~seglog.storage.log.Log`: its public methods that delete old data
(``apply_retention``, ``delete_records_before``, ``delete_expired_files``), as a base class the
Log extends (Kafka's ``UnifiedLog.deleteOldSegments`` and ``deleteRecordsOnLocalLog``). The
rules themselves (which segments a breach deletes) are pure functions in
:mod:`seglog.storage.retention`; the file renames and delayed deletes are
:class:`~seglog.storage.local_log.LocalLog`'s.

The state and the Log's own steps this uses are declared below and provided by the Log
(``seglog.storage.log``): its lock, snapshot, config, producer state and segment chain; to
roll, publish a snapshot and save the checkpoints.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from ..errors import OffsetOutOfRangeError
from .config import LogConfig, check_int, checked_now_ms
from .leader_epoch import LeaderEpochCache
from .local_log import LocalLog
from .producer_state import PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, ProducerStateManager
from .reads import LogView
from .retention import (
    deletable_segments,
    retention_bytes_breached,
    retention_ms_breached,
    start_offset_breached,
)

__all__ = ["LogRetention"]

_log = logging.getLogger("seglog.storage.log")

#: How often appends and retention drop expired producers (Kafka's
#: producer.id.expiration.check.interval.ms), counted from the open's ``now_ms``.
EXPIRATION_CHECK_MS = PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS



class LogRetention:
    """The retention methods of a Log (see the module docstring); not instantiated alone."""

    # Set by Log.open (seglog.storage.log).
    _lock: threading.RLock
    _view: LogView
    _config: LogConfig
    _psm: ProducerStateManager
    _local: LocalLog
    _epochs: LeaderEpochCache
    _last_expiration_ms: int

    if TYPE_CHECKING:
        # Log's property, for the type checker only (a stub would shadow it at run time).
        @property
        def size_bytes(self) -> int:
            """Total bytes of the segments' ``.log`` files."""

    # The Log's steps (seglog.storage.log.Log), declared here for the methods below.
    def _check_writable(self) -> None:
        raise NotImplementedError

    def _expire_producers(self, now_ms: int) -> list[int]:
        raise NotImplementedError

    def _roll_locked(self, now_ms: int) -> None:
        raise NotImplementedError

    def _refresh_unstable(self) -> None:
        raise NotImplementedError

    def _publish(self, start: int, end: int, *, high_watermark: int | None = None) -> None:
        raise NotImplementedError

    def _save_state(self) -> None:
        raise NotImplementedError

    def delete_expired_files(self, *, now_ms: int | None = None) -> int:
        """Remove the files of deleted segments whose ``file_delete_delay_ms`` has passed;
        returns how many segments' files were removed. Waits for reads in flight."""
        now_ms = checked_now_ms(now_ms)
        with self._lock:
            return self._local.delete_expired_files(now_ms=now_ms)

    # --- retention -------------------------------------------------------------------------------

    def apply_retention(self, *, now_ms: int | None = None) -> list[int]:
        """Delete old segments by Kafka's rules (:mod:`seglog.storage.retention`); returns the base
        offsets of the segments deleted.

        With ``cleanup_policy`` containing "delete": segments wholly below the start offset,
        then ``retention_bytes``, then ``retention_ms`` (by each segment's largest
        timestamp); otherwise only the start-offset rule. Whole segments, oldest first, never
        at or above the high watermark. When every segment goes, an empty segment is rolled
        first at the end offset, so the end offset is unchanged and the next append gets it.
        The start offset moves to the first remaining segment and is persisted. Files are
        renamed ``.deleted`` and removed after ``file_delete_delay_ms``; this call also
        removes those already due (:meth:`delete_expired_files`).
        """
        now_ms = checked_now_ms(now_ms)
        with self._lock:
            self._check_writable()
            if now_ms - self._last_expiration_ms >= EXPIRATION_CHECK_MS:
                self._expire_producers(now_ms)
            deleted = self._delete_segments(start_offset_breached(self._view.start_offset), now_ms,
                                            "below the log start offset")
            if self._config.deletion_enabled:
                predicate = retention_bytes_breached(self._config.retention_bytes, self.size_bytes)
                if predicate is not None:
                    deleted += self._delete_segments(predicate, now_ms, "retention size breach")
                predicate = retention_ms_breached(self._config.retention_ms, now_ms)
                if predicate is not None:
                    deleted += self._delete_segments(predicate, now_ms, "retention time breach")
            self.delete_expired_files(now_ms=now_ms)
            return deleted

    def _delete_segments(self, predicate: Any, now_ms: int, reason: str) -> list[int]:
        view = self._view
        doomed = deletable_segments(view.segments, predicate, high_watermark=view.high_watermark,
                                    end_offset=view.end_offset)
        if not doomed:
            return []
        if len(doomed) == len(view.segments):
            # There must always be a segment: roll an empty one at the end offset first.
            self._roll_locked(now_ms)
            if doomed[-1].base_offset == self._local.segments.active().base_offset:
                doomed = doomed[:-1]
            view = self._view
        self._local.delete_segments(doomed, now_ms=now_ms)
        _log.info("[%s] Deleting segments due to %s: %s", os.path.basename(self._local.dir_path),
                  reason, ", ".join(str(s.base_offset) for s in doomed))
        start = max(view.start_offset, self._local.segments.oldest().base_offset)
        self._epochs.truncate_from_start(start)  # Kafka's maybeIncrementLogStartOffset
        self._psm.on_log_start_offset_incremented(start)
        self._refresh_unstable()
        self._publish(start, view.end_offset)
        self._save_state()
        return [s.base_offset for s in doomed]

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (Kafka's DeleteRecords); returns the new
        start offset. Records below it become unreadable at once; whole segments below it are
        deleted (through ``.deleted``). ``offset`` -1 means the high watermark. Raises
        OffsetOutOfRangeError if ``offset`` is above the high watermark; TypeError / ValueError
        for a non-integer or out-of-int64 ``offset``."""
        offset = check_int("offset", offset)
        with self._lock:
            self._check_writable()
            view = self._view
            if offset == -1:
                offset = view.high_watermark
            if offset < 0 or offset > view.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: the high watermark is "
                    f"{view.high_watermark}")
            if offset > view.start_offset:
                self._epochs.truncate_from_start(offset)
                self._psm.on_log_start_offset_incremented(offset)
                self._refresh_unstable()
                self._publish(offset, view.end_offset)
                now_ms = checked_now_ms(None)
                self._delete_segments(start_offset_breached(offset), now_ms, "DeleteRecords")
                self._save_state()
            return self._view.start_offset
