"""The replication side of a :class:`~seglog.storage.log.Log`: its leader epochs, the follower's
append, the high watermark a replica manager moves, and truncation, as a base class the Log
extends (Kafka's ``UnifiedLog.appendAsFollower``, ``maybeAssignEpochStartOffset``,
``updateHighWatermark``, ``truncateTo`` and ``truncateFullyAndStartAt``; docs/cluster.md §3.1).

The log keeps the partition's leader epoch cache (:mod:`seglog.storage.leader_epoch`,
``leader-epoch-checkpoint``): :meth:`LogReplication.become_leader` records the new epoch at the
end offset and makes every append stamp it into the batches (partitionLeaderEpoch, outside the
CRC; the stamping is in ``seglog.storage.log``, where every append is written);
:meth:`LogReplication.append_as_follower` writes a leader's batches unchanged, offsets and
epochs included, and records their epochs; truncation cuts the cache from the end, a moving
log start (retention) from the start. A log that never leads nor follows (the standalone
store) stamps nothing and writes no cache file; it may still truncate.

The state and the Log's own steps this uses are declared below and provided by the Log
(``seglog.storage.log``): its lock and condition, snapshot, config, producer state, segment
chain and epoch cache; to roll, flush, publish a snapshot and take itself offline.

Threads. Every method takes the Log's writer lock (:meth:`LogReplication.leader_epoch_cache`
queries take the cache's own); the follower's batch checks run before it, on the caller's
bytes only.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .. import format as fmt
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from .config import INT32_MAX, LogConfig, check_int, checked_now_ms
from .leader_epoch import LeaderEpochCache
from .loader import BASE_OFFSET_MAX
from .local_log import LocalLog, batches_from
from .log_retention import EXPIRATION_CHECK_MS
from .producer_state import ORIGIN_REPLICATION, ProducerStateManager, rebuild_producer_state
from .reads import LogView

__all__ = ["LogReplication"]


class LogReplication:
    """The replication methods of a Log (see the module docstring); not instantiated alone.

    Thread-safe: each method holds the Log's writer lock while it changes anything; the
    follower's batch checks run on the caller's bytes before the lock is taken.
    """

    # Set by Log.open (seglog.storage.log).
    _lock: threading.RLock
    _data_cond: threading.Condition
    _waiters: int
    _view: LogView
    _config: LogConfig
    _be: Any
    _psm: ProducerStateManager
    _local: LocalLog
    _epochs: LeaderEpochCache
    _leader_epoch: int | None
    _auto_hw: bool
    _first_unstable: int | None
    _last_expiration_ms: int

    if TYPE_CHECKING:
        # The Log's steps (seglog.storage.log.Log), declared for the type checker only: a
        # stub here would shadow the Log's method for a base class after this one.
        def _check_open(self) -> None: ...
        def _check_writable(self) -> None: ...
        def _expire_producers(self, now_ms: int) -> list[int]: ...
        def _roll_locked(self, now_ms: int, base_offset: int | None = None) -> None: ...
        def _flush_locked(self, now_ms: int, *, checkpoint: bool) -> None: ...
        def _refresh_unstable(self) -> None: ...
        def _went_offline(self, exc: OSError) -> KafkaStorageError: ...
        def _apply_producer_state(self, analysis: Any, active: Any,
                                  end_offset: int) -> bool: ...
        def _publish(self, start: int, end: int, *,
                     high_watermark: int | None = None) -> None: ...

    # --- leader epochs (replication; seglog.storage.leader_epoch) ----------------------------------

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The partition's :class:`~seglog.storage.leader_epoch.LeaderEpochCache` (queries from
        any thread; the log makes every change). A read-only log holds it as loaded at open
        (:meth:`refresh` does not reread it)."""
        return self._epochs

    @property
    def latest_epoch(self) -> int:
        """The latest leader epoch in the cache; -1 when it is empty."""
        return self._epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` of the largest cached epoch <= ``epoch`` (Kafka's
        ``endOffsetForEpoch``; replication.md §3.6): where it ends is the start of the next
        epoch, or the log end offset for the latest one. ``(-1, -1)`` when undefined (``epoch``
        -1, an empty cache, or an epoch above every cached one); below the earliest epoch,
        ``(epoch, start of the earliest)``. What OffsetsForLeaderEpoch answers."""
        return self._epochs.end_offset_for(epoch)

    @property
    def leader_epoch(self) -> int | None:
        """The epoch this log stamps on every append (set by :meth:`become_leader`), or None:
        appends keep the batch's own partitionLeaderEpoch and leave the cache alone, as the
        standalone store always did."""
        return self._leader_epoch

    def become_leader(self, leader_epoch: int) -> None:
        """Lead in ``leader_epoch`` (Kafka's ``Partition.makeLeader``): the epoch cache gets
        ``(leader_epoch, end_offset)`` (``maybeAssignEpochStartOffset``; KIP-279: a later epoch
        starting at the same offset replaces an empty one), and from now on every append
        (:meth:`append`, :meth:`append_batch`, :meth:`append_raw`,
        :meth:`append_txn_marker`) writes ``leader_epoch`` into each batch's
        partitionLeaderEpoch (bytes 12-15, outside the CRC) and records it in the cache at the
        batch's base offset. TypeError / ValueError unless an int in [0, 2**31 - 1];
        ReadOnlyError, LogClosedError."""
        leader_epoch = check_int("leader_epoch", leader_epoch, minimum=0, maximum=INT32_MAX)
        with self._lock:
            self._check_writable()
            self._leader_epoch = leader_epoch
            self._epochs.assign(leader_epoch, self._view.end_offset)

    def become_follower(self) -> None:
        """Stop stamping (Kafka's ``makeFollower``): :attr:`leader_epoch` becomes None; the
        cache is kept (a follower's appends, :meth:`append_as_follower`, record the leader's
        epochs in it)."""
        with self._lock:
            self._check_open()
            self._leader_epoch = None

    # --- the follower's append ------------------------------------------------------------------

    def append_as_follower(self, data: Any, *,
                           now_ms: int | None = None) -> tuple[int, int]:
        """Append a leader's batches as they are (Kafka's ``Log.appendAsFollower``): offsets,
        partition leader epochs, timestamps, producer fields and CRCs kept byte for byte;
        returns ``(first_offset, last_offset)`` of what was written, ``(-1, -1)`` when
        ``data`` holds no whole batch (nothing written).

        ``data``: RecordBatch v2 batches as a leader's read returns them (a partial batch at
        the end, which a fetch response may carry, is ignored as Kafka's follower ignores
        it). Checked before anything is written (Kafka's ``analyzeAndValidateRecords``;
        nothing is written on any error): contiguous batches of magic 2 with valid CRCs and
        structure (CorruptRecordError); offsets strictly increasing from batch to batch
        (OffsetsOutOfOrderError); the first offset at or above the end offset, gaps allowed
        (a compacted leader's log has them), else UnexpectedAppendOffsetError, except on an
        empty log (start == end) whose end falls inside the append: the log then restarts at
        the first offset (:meth:`truncate_fully_and_start_at`; Kafka's
        ``Partition.appendRecordsToFollowerOrFutureReplica``, after a DeleteRecords left the
        leader's start inside a batch); the whole set at most ``segment_bytes``
        (RecordBatchTooLargeError; ``max_message_bytes`` is not checked: the leader took the
        batch, as Kafka's follower does); offsets spanning more than 2**31 (no
        segment holds them: InvalidRecordError); producer state with replication origin (no
        sequence or epoch checks; InvalidTxnStateError as Kafka raises it). The one change a
        refused append may leave: when the append needed a roll, the new empty segment stays
        if the segment's own check of the records area then refuses a batch whose CRC is
        valid (bytes no leader writes; offsets and data are unchanged).

        After the write the epoch cache records each batch's partitionLeaderEpoch at its base
        offset (KIP-101); a batch with none (-1, written by a log that never led) clears the
        cache, as Kafka does for a batch of magic < 2 (truncation falls back to the high
        watermark). The end offset becomes the last batch's last offset + 1; the high
        watermark is the caller's (:meth:`update_high_watermark`), or follows the end with
        ``auto_high_watermark=True``. The caller's buffer is never modified. Thread-safe.
        """
        self._check_writable()
        now_ms = checked_now_ms(now_ms)
        buffer = memoryview(data)
        if buffer.ndim != 1 or buffer.format not in ("B", "b", "c"):
            buffer = buffer.cast("B")
        batches, size_bytes, max_timestamp_ms = self._check_follower_batches(buffer)
        if not batches:
            return -1, -1
        if size_bytes > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {size_bytes} bytes is larger than segment.bytes "
                f"({self._config.segment_bytes})")
        first_offset, last_offset = batches[0].base_offset, batches[-1].last_offset
        if last_offset - first_offset > INT32_MAX:
            # No segment can hold it (offsets relative to a base are 32-bit); refused before
            # a roll would start one (Kafka: LogSegmentOffsetOverflowException).
            raise InvalidRecordError(
                f"offsets {first_offset}..{last_offset} of a follower append span more than "
                f"one segment can hold ({INT32_MAX + 1} offsets)")
        with self._lock:
            self._check_writable()
            view = self._view
            if first_offset < view.end_offset:
                if view.end_offset == view.start_offset and last_offset >= view.end_offset:
                    self._truncate_fully_locked(first_offset, now_ms)
                    self._flush_locked(now_ms, checkpoint=True)
                    view = self._view
                else:
                    raise UnexpectedAppendOffsetError(
                        f"first offset {first_offset} of a follower append is below the log "
                        f"end offset {view.end_offset} (log start {view.start_offset})",
                        first_offset=first_offset, last_offset=last_offset)
            return self._append_follower_locked(buffer[:size_bytes], batches, view,
                                                size_bytes=size_bytes,
                                                max_timestamp_ms=max_timestamp_ms,
                                                now_ms=now_ms)

    def _check_follower_batches(self, buffer: memoryview) -> tuple[list, int, int]:
        """``(batches, size_bytes, max_timestamp_ms)`` of the whole batches at the start of
        ``buffer`` (see :meth:`append_as_follower` for the checks); no lock needed."""
        batches: list = []
        consumed_bytes, previous_last, max_timestamp_ms = 0, -1, -1
        for batch in self._be.iter_batches(buffer):
            position = batch.position
            if position != consumed_bytes:
                raise CorruptRecordError("batches are not contiguous",
                                         reason=fmt.REASON_BAD_RECORDS, position=consumed_bytes)
            batch.ensure_valid()  # CorruptRecordError(REASON_CRC_MISMATCH)
            if batch.last_offset_delta < 0:
                raise CorruptRecordError(
                    f"batch at position {position} has a negative last offset delta",
                    reason=fmt.REASON_BAD_LAST_OFFSET_DELTA, position=position)
            if batch.base_offset <= previous_last:
                raise OffsetsOutOfOrderError(
                    f"out of order offsets in a follower append: batch at position {position} "
                    f"starts at {batch.base_offset}, after a batch ending at {previous_last}")
            previous_last = batch.last_offset
            max_timestamp_ms = max(max_timestamp_ms, batch.max_timestamp_ms)
            consumed_bytes = position + batch.size_bytes
            batches.append(batch)
        return batches, consumed_bytes, max_timestamp_ms

    def _append_follower_locked(self, data: Any, batches: list, view: LogView, *,
                                size_bytes: int, max_timestamp_ms: int,
                                now_ms: int) -> tuple[int, int]:
        psm = self._psm
        local = self._local
        end = view.end_offset
        first_offset, last_offset = batches[0].base_offset, batches[-1].last_offset
        if now_ms - self._last_expiration_ms >= EXPIRATION_CHECK_MS:
            self._expire_producers(now_ms)
        if local.roll_reason(local.segments.active(), size_bytes=size_bytes,
                             record_count=last_offset - end + 1,
                             max_timestamp_ms=max_timestamp_ms, now_ms=now_ms,
                             end_offset=end) is not None:
            self._roll_locked(now_ms, base_offset=max(first_offset, end))
        active = local.segments.active()
        analysis = None
        if any(batch.producer_id >= 0 for batch in batches):
            analysis = psm.analyze_batches(batches, origin=ORIGIN_REPLICATION)
        result = active.append(data, assign_offsets=False)
        assert (result.first_offset, result.last_offset) == (first_offset, last_offset), (
            result.first_offset, result.last_offset, first_offset, last_offset)
        end_offset = last_offset + 1
        try:
            # Kafka assigns before the write; after it, a refused write leaves no entry.
            epochs = self._epochs
            for batch in batches:
                epoch = batch.partition_leader_epoch
                if epoch >= 0:
                    epochs.assign(epoch, batch.base_offset)
                else:
                    epochs.clear()
            if self._apply_producer_state(analysis, active, end_offset):
                if self._auto_hw:
                    psm.on_high_watermark_updated(end_offset)
                self._first_unstable = psm.first_unstable_offset()
        except OSError as exc:  # the .txnindex or the epoch checkpoint: see _went_offline
            raise self._went_offline(exc) from exc
        self._publish(view.start_offset, end_offset)
        if (end_offset - local.recovery_point >= self._config.flush_messages
                or now_ms - local.last_flush_ms >= self._config.flush_ms):
            self._flush_locked(now_ms, checkpoint=False)
        if self._waiters:
            self._data_cond.notify_all()
        return first_offset, last_offset

    # --- the high watermark ----------------------------------------------------------------------

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to ``[start_offset, end_offset]``; returns it.

        For a replicated log opened with ``auto_high_watermark=False``; with the default the
        next append moves it back to the end offset. Wakes ``wait_for_data`` waiters.
        TypeError / ValueError for a non-integer or out-of-int64 ``offset``."""
        offset = check_int("offset", offset)
        with self._lock:
            self._check_open()
            view = self._view
            high_watermark = min(max(offset, view.start_offset), view.end_offset)
            self._psm.on_high_watermark_updated(high_watermark)
            self._refresh_unstable()
            self._publish(view.start_offset, view.end_offset, high_watermark=high_watermark)
            self._data_cond.notify_all()
            return high_watermark

    # --- truncation ------------------------------------------------------------------------------

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> None:
        """Remove every record at or above ``offset``: afterwards ``end_offset == offset`` and
        the next append gets ``offset`` (Kafka's ``truncateTo``, used by a follower).

        A batch holding ``offset`` is removed whole (Kafka truncates at batch boundaries; a
        follower's target always is one). Later segments go through ``.deleted``; an offset
        below the first segment empties the log and restarts it at ``offset`` (the start
        offset moves there). The high watermark and recovery point are lowered to ``offset``
        if above; the start offset to ``offset`` if above. No-op when ``offset >=
        end_offset``, except that the leader epoch cache loses its entries starting at or
        above the end offset (Kafka: an entry a leader assigned before appending anything);
        otherwise its entries starting at or above ``offset`` go. Waits for reads in flight.
        Raises ValueError for a negative offset, ViewsOutstandingError if a live memoryview
        maps bytes to cut (nothing changes then).
        """
        offset = check_int("offset", offset, minimum=0)  # TypeError / ValueError
        now_ms = checked_now_ms(now_ms)
        with self._lock:
            self._check_writable()
            view = self._view
            if offset >= view.end_offset:
                # Kafka's truncateTo: the cache may hold an entry at the end from a leader
                # that became leader and appended nothing before another took over.
                self._epochs.truncate_from_end(view.end_offset)
                return
            self._truncate_locked(view, offset, now_ms)
            self._data_cond.notify_all()

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Remove every record and restart the log empty at ``offset`` (Kafka's
        ``truncateFullyAndStartAt``: a follower whose fetch offset is out of the leader's
        range, or whose first fetched batch starts below its empty log's start): start, end
        and high watermark become ``offset``, the epoch cache and producer state are cleared,
        the segments go through ``.deleted``. ``offset`` may be above the end offset.
        TypeError / ValueError for a non-integer or out-of-range ``offset``; ReadOnlyError,
        LogClosedError."""
        offset = check_int("offset", offset, minimum=0, maximum=BASE_OFFSET_MAX)
        now_ms = checked_now_ms(now_ms)
        with self._lock:
            self._check_writable()
            self._truncate_fully_locked(offset, now_ms)
            self._flush_locked(now_ms, checkpoint=True)
            self._data_cond.notify_all()

    def _truncate_fully_locked(self, offset: int, now_ms: int) -> None:
        self._local.truncate_fully(offset, now_ms=now_ms)
        self._psm.truncate_fully_and_start_at(offset)
        self._epochs.clear()
        self._refresh_unstable()
        self._publish(offset, offset, high_watermark=offset)

    def _truncate_locked(self, view: LogView, offset: int, now_ms: int) -> None:
        psm = self._psm
        local = self._local
        if offset < view.segments.oldest().base_offset:
            self._truncate_fully_locked(offset, now_ms)  # UnifiedLog.truncateFullyAndStartAt
        else:
            local.truncate_to(offset, now_ms=now_ms)
            self._epochs.truncate_from_end(offset)
            segments = local.segments
            start = min(view.start_offset, offset)
            # Kafka's UnifiedLog.truncateTo: snapshots above the new end go and the state is
            # reloaded from the latest one left, replaying the log after it.
            rebuild_producer_state(
                psm, segment_base_offsets=segments.bases, log_start_offset=start,
                log_end_offset=offset, batches_from=lambda o: batches_from(segments, o),
                reload_from_clean_shutdown=False, now_ms=now_ms)
            psm.on_high_watermark_updated(min(view.high_watermark, offset))
            self._refresh_unstable()
            self._publish(start, offset, high_watermark=min(view.high_watermark, offset))
        # Kafka checkpoints recovery points right after a truncation: a stale, higher
        # recovery point would skip validating what is appended next.
        self._flush_locked(now_ms, checkpoint=True)
