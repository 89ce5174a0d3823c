"""The read side of a :class:`~seglog.storage.log.Log`: its public read methods (``read``,
``aborted_transactions``, ``records``, ``read_columns``, ``sendfile``,
``offset_for_timestamp``, ``wait_for_data``) and ``refresh``, by which a read-only Log follows
its writer, as a base class the Log extends.

Kafka's UnifiedLog keeps reads and writes in one class; here the read half lives in its own
module so that ``log.py`` holds the write path (append, roll, flush) and stays readable
(retention, replication and the cleaner's hooks are base classes of their own). The state a read uses is declared below (annotations on
:class:`LogReads`) and set by the Log when it opens: the lock, the published
:class:`~seglog.storage.reads.LogView` snapshot, the backend and the segment chain (for the
transaction indexes). Reads never change any of it; :meth:`LogReads.refresh`, the one change
a read-only Log makes, publishes a new snapshot of what the writer did (under the lock, with
the Log's own steps declared below).

Threads. A read takes the current snapshot and reads segments bounded by it, so it sees only
whole batches that were fully appended. Because the Segment contract says segments are not
thread-safe, a read holds the log's lock while it calls into a segment (an index lookup and a
header scan; ``sendfile`` for as long as the kernel takes); decoding and copying happen after,
on the zero-copy views, without it. ``wait_for_data`` blocks on a condition the writer
signals; nothing polls.

Untrusted bytes (issue 8). The record-decoding readers (:meth:`Log.records`,
:meth:`Log.read_columns`) verify every batch's CRC32C by default (Kafka's consumer
``check.crcs``) and that base offsets increase batch to batch, also across reads; raw
whole-batch reads (:meth:`Log.read`, :meth:`Log.sendfile`) are served unverified, as Kafka's
broker serves fetches. Integer arguments are checked alike on both backends
(:func:`seglog.storage.config.check_int`: TypeError for a non-integer, ValueError out of range).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import ReadOnlyError
from .config import check_int, check_optional_int, checked_now_ms
from .counters import LogCounters
from .local_log import LocalLog, batches_from
from .partition_state import PartitionState
from .producer_state import ProducerStateManager
from .reads import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_BYTES_DEFAULT,
    LogReadResult,
    LogView,
    check_isolation,
    check_max_bytes,
    iter_records,
    offset_by_time,
    read_columns,
    read_in,
    sendfile_in,
)
from .transactions import READ_UNCOMMITTED, collect_aborted_transactions

__all__ = ["LogReads"]


class LogReads:
    """The read methods of a Log (see the module docstring); not instantiated on its own."""

    # Set by Log.open (seglog.storage.log) before the first read.
    _lock: threading.RLock
    _data_cond: threading.Condition
    _waiters: int  # threads in wait_for_data (appends notify only when there are some)
    _closed: bool
    _read_only: bool
    _view: LogView
    _be: Any
    _local: LocalLog
    counters: LogCounters  # bytes read (bytes_out)
    _psm: ProducerStateManager  # refresh only
    _state: PartitionState  # refresh only

    def _check_open(self) -> None:
        raise NotImplementedError  # Log's: LogClosedError once closed

    if TYPE_CHECKING:
        # The Log's steps (seglog.storage.log.Log) refresh uses, for the type checker only:
        # a stub here would shadow the Log's method for a base class after this one.
        def _refresh_unstable(self) -> None: ...
        def _publish(self, start: int, end: int, *,
                     high_watermark: int | None = None) -> None: ...

        @property
        def start_offset(self) -> int:
            """The log start offset (Log's property)."""

    # --- reading ---------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int = READ_BYTES_DEFAULT, *,
             max_offset: int | None = None, min_one_batch: bool = True,
             isolation: str = READ_UNCOMMITTED) -> LogReadResult:
        """Whole batches from the first batch holding ``offset`` or later, up to ``max_bytes``
        (at least one batch when ``min_one_batch``, even a larger one), from one segment.

        Reads stop at ``max_offset`` (default: the high watermark; pass ``log.end_offset`` to
        read uncommitted records as a follower does; it should be a batch boundary). An
        offset in a gap (compaction, truncation, retention) returns the next batch after it;
        the next segment is tried when one holds nothing at or after ``offset``. Raises
        OffsetOutOfRangeError for ``offset`` below the start offset or above the end offset;
        ``offset`` at or above ``max_offset`` returns an empty result. Thread-safe, lock-free
        (see module docstring); the buffer is zero-copy (see :class:`LogReadResult`).

        ``isolation="read_committed"`` (Kafka's FetchIsolation.TXN_COMMITTED) also stops at
        the last stable offset and fills ``aborted_transactions``; the batches themselves
        are returned whole, control and aborted ones included, as a broker's fetch returns
        them (filter with :func:`seglog.storage.transactions.filter_batches`). ValueError for an
        unknown isolation level.

        The bytes are not CRC-checked (Kafka's broker serves fetches unverified; the readers
        that decode records check), but bounded as :mod:`seglog.storage.reads` says
        (CorruptRecordError, CorruptSegmentError). TypeError for a non-integer ``offset``,
        ``max_bytes`` or ``max_offset``, ValueError for a negative ``max_bytes`` or a value
        outside int64; ``max_bytes`` above INT32_MAX reads as INT32_MAX.
        """
        self._check_open()
        offset = check_int("offset", offset)
        max_bytes = check_max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        committed = check_isolation(isolation)
        self._lock.acquire()
        try:
            view = self._view
            lso = view.last_stable_offset
            if committed:
                max_offset = lso if max_offset is None else min(max_offset, lso)
            segment, buffer, next_offset, position = read_in(
                view, offset, max_bytes=max_bytes, max_offset=max_offset,
                min_one_batch=min_one_batch)
            aborted: list | None = [] if committed else None
            if segment is None:
                return LogReadResult(
                    buffer=memoryview(b""), offset=offset, next_offset=offset, log_path=None,
                    position=0, size_bytes=0, high_watermark=view.high_watermark,
                    start_offset=view.start_offset, end_offset=view.end_offset,
                    last_stable_offset=lso, aborted_transactions=aborted)
            if committed:
                aborted = self._aborted_locked(view, offset, next_offset)
            self.counters.bytes_out += len(buffer)
        finally:
            self._lock.release()
        return LogReadResult(
            buffer=buffer, offset=offset, next_offset=next_offset, log_path=segment.log_path,
            position=position, size_bytes=len(buffer), high_watermark=view.high_watermark,
            start_offset=view.start_offset, end_offset=view.end_offset, last_stable_offset=lso,
            aborted_transactions=aborted)

    def aborted_transactions(self, offset: int, upper_bound_offset: int) -> list:
        """The aborted transactions (:class:`~seglog.storage.txnindex.AbortedTxn`) overlapping
        ``[offset, upper_bound_offset)``, from the ``.txnindex`` of the segment holding
        ``offset`` and the later ones (Kafka's ``collectAbortedTransactions``): what a broker
        sends with a read_committed fetch it answers with :meth:`sendfile`. TypeError /
        ValueError for non-integer or out-of-int64 offsets."""
        self._check_open()
        offset = check_int("offset", offset)
        upper_bound_offset = check_int("upper_bound_offset", upper_bound_offset)
        with self._lock:
            return self._aborted_locked(self._view, offset, upper_bound_offset)

    def _aborted_locked(self, view: LogView, offset: int, upper_bound_offset: int) -> list:
        if upper_bound_offset <= offset:
            return []
        writer = not self._read_only
        indexes = (self._local.txn_index(segment.base_offset)
                   for segment in view.segments.from_offset(offset))
        # A writer's cached index without entries has none on disk either: skip the read.
        return collect_aborted_transactions(
            (index for index in indexes if not (writer and index.last_offset is None)),
            offset, upper_bound_offset)

    def records(self, start: int = 0, end: int | None = None, *,
                max_offset: int | None = None, isolation: str = READ_UNCOMMITTED,
                check_crcs: bool = True) -> Iterator[Any]:
        """Iterate the records with ``start <= offset < end`` (``end`` default: the high
        watermark, or ``max_offset``), across segments and gaps, skipping control batches.
        ``isolation="read_committed"`` also stops at the last stable offset and skips the
        records of aborted transactions (as a Kafka consumer with that isolation level).

        ``start`` below the log start offset starts at the log start offset. Each record has
        ``offset, timestamp_ms, key, value, headers``. The iterator reads ahead one read
        (1 MiB) at a time and holds no lock between records. Raises OffsetOutOfRangeError if
        ``start`` is above the end offset; TypeError / ValueError for non-integer or
        out-of-int64 ``start``, ``end``, ``max_offset``.

        Untrusted bytes, checked while iterating (records before a bad batch are yielded
        first): CRC32C (``check_crcs=False`` skips it, as Kafka's ``check.crcs``) and base
        offsets increasing: CorruptRecordError (``REASON_CRC_MISMATCH``,
        ``REASON_OFFSETS_NOT_INCREASING``), as for a batch that cannot be parsed.
        """
        start = check_int("start", start)
        end = check_optional_int("end", end)
        max_offset = check_optional_int("max_offset", max_offset)
        check_isolation(isolation)
        return iter_records(self.read, self._be, offset=max(start, self.start_offset), end=end,
                            max_offset=max_offset, isolation=isolation,
                            check_crcs=bool(check_crcs))

    def read_columns(self, offset: int, max_records: int, *, max_bytes: int = READ_BYTES_DEFAULT,
                     max_offset: int | None = None, isolation: str = READ_UNCOMMITTED,
                     check_crcs: bool = True) -> Any:
        """Up to ``max_records`` records from ``offset`` as numpy columns (the backend's
        Columns: ``offsets``, ``timestamps_ms``, key/value positions and lengths into
        ``data``), with no per-record Python objects. Reads whole batches (at least one) from
        one segment, up to ``max_bytes``; records below ``offset`` are left out; control
        batches are skipped. Empty when nothing is readable (or ``max_records`` is 0).
        ``isolation="read_committed"`` stops at the last stable offset and leaves out aborted
        transactions' records. Raises OffsetOutOfRangeError as :meth:`read`; TypeError for
        non-integer arguments, ValueError for a negative ``max_records`` or ``max_bytes``.

        Every batch decoded has its CRC32C verified (``check_crcs=False`` skips it, Kafka's
        ``check.crcs``) and base offsets must increase batch to batch: CorruptRecordError
        (``REASON_CRC_MISMATCH``, ``REASON_OFFSETS_NOT_INCREASING``) otherwise."""
        offset = check_int("offset", offset)
        max_records = check_int("max_records", max_records, minimum=0)
        max_bytes = check_max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        return read_columns(self.read, self._be, offset=offset, max_records=max_records,
                            max_bytes=max_bytes, max_offset=max_offset, isolation=isolation,
                            check_crcs=bool(check_crcs))

    def sendfile(self, out: Any, offset: int, max_bytes: int = READ_BYTES_DEFAULT, *,
                 max_offset: int | None = None,
                 isolation: str = READ_UNCOMMITTED) -> tuple[int, int]:
        """Send whole batches from ``offset`` (as :meth:`read` would return them) to a socket
        or file descriptor with sendfile(2), zero-copy; returns ``(bytes_sent, next_offset)``.

        ``out`` is anything with ``fileno()`` or an int fd. Blocking descriptors are sent in
        full; for non-blocking ones BlockingIOError propagates. ``(0, offset)`` when nothing is
        readable. ``isolation="read_committed"`` stops at the last stable offset; the aborted
        transactions to send along come from :meth:`aborted_transactions` ``(offset,
        next_offset)``. Raises OffsetOutOfRangeError as :meth:`read`, TypeError / ValueError
        for bad ``offset``, ``max_bytes``, ``max_offset`` as :meth:`read`. Unverified bytes,
        as :meth:`read` (Kafka's broker sends them so)."""
        self._check_open()
        offset = check_int("offset", offset)
        max_bytes = check_max_bytes(max_bytes)
        max_offset = check_optional_int("max_offset", max_offset)
        committed = check_isolation(isolation)
        fd = out if isinstance(out, int) else out.fileno()
        self._lock.acquire()
        try:
            view = self._view
            if committed:
                lso = view.last_stable_offset
                max_offset = lso if max_offset is None else min(max_offset, lso)
            return sendfile_in(view, fd, offset, max_bytes=max_bytes, max_offset=max_offset)
        finally:
            self._lock.release()

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp_ms`` (Kafka's ListOffsets
        by time, through the time indexes), or None if no record is that new.

        Kafka's sentinels: -2 (earliest) gives the start offset, -1 (latest) the high
        watermark, -3 (max timestamp) the offset of the record with the largest timestamp.
        TypeError / ValueError for a non-integer or out-of-int64 ``timestamp_ms``.
        """
        self._check_open()
        timestamp_ms = check_int("timestamp_ms", timestamp_ms)
        view = self._view
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return view.start_offset
        if timestamp_ms == LATEST_TIMESTAMP:
            return view.high_watermark
        with self._lock:
            return offset_by_time(view, timestamp_ms)

    # --- waiting for data ------------------------------------------------------------------------

    def wait_for_data(self, offset: int, timeout_ms: int) -> bool:
        """Block until the high watermark is above ``offset`` (a record at ``offset`` is
        readable), the log is closed, or ``timeout_ms`` passes; returns whether data is there.

        Woken by appends, high-watermark updates, truncation and :meth:`refresh`; no polling.
        A read-only follower wakes only when something in this process calls ``refresh``.
        TypeError / ValueError for non-integer or out-of-int64 arguments.
        """
        offset = check_int("offset", offset)
        timeout_ms = check_int("timeout_ms", timeout_ms)
        deadline_s = time.monotonic() + max(timeout_ms, 0) / 1000.0
        with self._data_cond:
            self._waiters += 1
            try:
                while not self._closed and self._view.high_watermark <= offset:
                    remaining_s = deadline_s - time.monotonic()
                    if remaining_s <= 0:
                        break
                    self._data_cond.wait(remaining_s)
            finally:
                self._waiters -= 1
            return self._view.high_watermark > offset

    # --- following a writer (read-only) ----------------------------------------------------------

    def refresh(self) -> bool:
        """Read-only logs: pick up what the writer appended, rolled and deleted since the last
        refresh; returns whether the end or start offset changed. Only whole batches become
        visible. Segments the writer truncated are not followed (reopen then)."""
        with self._lock:
            self._check_open()
            if not self._read_only:
                raise ReadOnlyError("refresh() is for logs opened with read_only=True")
            view = self._view
            gone = self._local.follow(now_ms=checked_now_ms(None))
            if gone is None:
                return False
            segments = self._local.segments
            end = segments.active().next_offset
            if end > self._psm.map_end_offset:  # follow the writer's producer state
                self._psm.rebuild(batches_from(segments, self._psm.map_end_offset),
                                  end_offset=end)
                self._psm.on_high_watermark_updated(end)  # a follower's high watermark
                self._refresh_unstable()
            start_checkpoint = getattr(self._state, "read_log_start_offset", lambda: None)()
            start = max(segments.oldest().base_offset, start_checkpoint or 0, view.start_offset)
            end = segments.active().next_offset
            changed = (start, end) != (view.start_offset, view.end_offset)
            self._publish(min(start, end), end, high_watermark=end)
            for segment in gone:
                segment.close()
            if changed:
                self._data_cond.notify_all()
            return changed
