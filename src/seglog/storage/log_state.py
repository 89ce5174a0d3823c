"""What a :class:`~seglog.storage.log.Log` says of its state, as a base class the Log
extends: where it is, its config and backend, its offsets, whether it is read-only, closed
or offline. Offline is either of two: a failed write (Kafka's ``LogDirFailureChannel``:
writes refused with KafkaStorageError until a reopen recovers the log) and a failed load
(issue 23: a segment whose first use failed the checks lazy loading deferred; writes refused
with PartitionOfflineError, nothing cut, until ``seglog recover`` truncates it), and the
check of the active segment that finds the second at once. The Log's own steps that take it offline
(``_went_offline``, ``_load_failed``) stay in :mod:`seglog.storage.log`.

The state this uses is declared below and provided by the Log (``seglog.storage.log``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..errors import CorruptRecordError
from .config import LogConfig
from .counters import (LOG_END_OFFSET, LOG_SEGMENTS, LOG_SIZE, LOG_START_OFFSET,
                       LogCounters, MsHistogram)
from .reads import LogView

if TYPE_CHECKING:
    from .._contract import Backend
    from .local_log import LocalLog

__all__ = ["LogState"]


class LogState:
    """What a Log says of its state (see the module docstring); not instantiated alone."""

    # Set by Log.open (seglog.storage.log).
    _lock: threading.RLock
    _view: LogView
    _dir: str
    _config: LogConfig
    _be: Backend
    _closed: bool
    _read_only: bool
    _failure: OSError | None
    _load_failure: CorruptRecordError | None
    _local: LocalLog
    #: Records and bytes appended and read (:mod:`seglog.storage.counters`).
    counters: LogCounters

    def metrics(self) -> dict[str, float]:
        """This log's counters and sizes by the broker's metric names (docs/metrics.md):
        records and bytes appended, bytes read, flushes (``..._count``) and their total
        time in ms (``..._sum``), size in bytes, start and end offsets, segments."""
        view = self._view
        out = self.counters.as_dict(self._local.flush_times)
        out.update({LOG_SIZE: float(sum(s.size_bytes for s in view.segments)),
                    LOG_START_OFFSET: float(view.start_offset),
                    LOG_END_OFFSET: float(view.end_offset),
                    LOG_SEGMENTS: float(len(view.segments))})
        return out

    @property
    def flush_times(self) -> MsHistogram:
        """The times (ms) of this log's flushes that synced anything."""
        return self._local.flush_times

    @property
    def dir_path(self) -> str:
        """The partition directory."""
        return self._dir

    @property
    def config(self) -> LogConfig:
        """The log's configuration (replace it with :meth:`update_config`)."""
        return self._config

    @property
    def backend(self) -> Backend:
        """The backend module this log uses."""
        return self._be

    @property
    def read_only(self) -> bool:
        """Whether the log was opened with ``read_only=True``."""
        return self._read_only

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def start_offset(self) -> int:
        """The log start offset: the first offset a read may ask for."""
        return self._view.start_offset

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next appended record gets."""
        return self._view.end_offset

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed; reads stop there by default."""
        return self._view.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset (LSO): the first offset of the earliest transaction that is
        open (or whose marker is not yet below the high watermark), capped by the high
        watermark; the high watermark when there is none. read_committed reads stop here."""
        return self._view.last_stable_offset

    @property
    def offline(self) -> bool:
        """Whether the log is offline: a failed write took it offline (:attr:`write_failed`:
        it refuses every write, KafkaStorageError, until a reopen recovers it; reads go on),
        or the first use of a segment failed the checks its open would have run
        (:attr:`load_failure`: every write is refused with PartitionOfflineError; nothing
        is cut, a reopen refuses it again until ``seglog recover`` truncates it)."""
        return self._failure is not None or self._load_failure is not None

    @property
    def write_failed(self) -> bool:
        """Whether a failed write took the log offline (a reopen recovers it)."""
        return self._failure is not None

    @property
    def load_failure(self) -> CorruptRecordError | None:
        """The load error that took the log offline on a segment's first use, or None."""
        return self._load_failure

    def check_active_segment(self) -> bool:
        """Run the checks lazy loading deferred for the active segment now (its first use
        would run them: :func:`~seglog.storage.loader.load_segments`), then close its files
        again; Kafka opens the active segment at load. A segment that lost flushed data takes
        the log offline here (:attr:`load_failure`) rather than on the first append. Returns
        whether the log is online (not offline since a load failure)."""
        with self._lock:
            if self._closed or self._read_only:
                return self._load_failure is None
            active: Any = self._view.segments.last()  # a LazySegment (file_cache)
            if active is not None:
                try:
                    active.run_deferred_checks()
                except CorruptRecordError:
                    pass  # _load_failed took the log offline
        if active is not None:
            active.release_files()
        return self._load_failure is None
