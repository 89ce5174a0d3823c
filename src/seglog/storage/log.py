"""One partition's log: a chain of segments in one directory, with Kafka's rules for appending,
reading, flushing, recovering, truncating and retention (Kafka's ``UnifiedLog``; kafka-format.md
§2.6, §3, §4). The parts: the segment chain (roll, flush, truncate, delete; the rules of
rolling and the recovery point) is :mod:`seglog.storage.local_log`; the checks on client
batches :mod:`seglog.storage.validator`; the reader snapshot and the segment walk of a read,
with their checks of untrusted bytes, :mod:`seglog.storage.reads`; the read methods Log
inherits :mod:`seglog.storage.log_reads` and the retention methods
:mod:`seglog.storage.log_retention`; opening and recovery
:mod:`seglog.storage.loader`; where the recovery point and log start offset are kept
:mod:`seglog.storage.partition_state`.

Offsets. The log holds the records ``[start_offset, end_offset)``. ``end_offset`` (Kafka's log
end offset, LEO) is the offset the next record gets. ``high_watermark`` is a separate value:
the offset below which records count as committed. Until replication exists it follows the end
offset after every append (``auto_high_watermark=True``); a replicated log moves it itself with
:meth:`Log.update_high_watermark`. Consumer-facing reads stop at the high watermark, retention
never deletes at or above it, and ``delete_records_before`` may not pass it.

Durability. Appends reach the page cache; :meth:`Log.flush`, the ``flush_messages`` /
``flush_ms`` checks and a roll fdatasync the unflushed segments and move the recovery point;
close writes the clean-shutdown marker (docs/design.md §6 has the rule event by event).

Producers and transactions (kafka-format.md §6; :mod:`seglog.storage.producer_state`). Batches
carrying a producer id are checked against the producer state after the roll and before the
write (a retry of one of the producer's last 5 batches writes nothing and returns the original
offsets); after the write the state takes the batches, an ABORT marker adds an entry to the
active segment's ``.txnindex``, and the *last stable offset* is published with the reader
snapshot. The state is snapshotted at every roll and on close, loaded on open, rebuilt by
truncation; idle producers expire (checked at most every 10 minutes of ``now_ms``, on append
and retention). ``isolation="read_committed"`` reads stop at the last stable offset;
:meth:`Log.read` then lists the overlapping aborted transactions, and the record-level readers
skip aborted and control batches.

Threads. All mutating methods serialise on one lock; reads take an immutable snapshot and
are the business of :mod:`seglog.storage.log_reads` (the read methods Log inherits).

Processes. A writer holds an exclusive lock on the directory (:mod:`seglog.storage.locking`); a
second writer gets :class:`~seglog.errors.LogLockedError`. ``read_only=True`` opens without the
lock, never changes a file, and :meth:`Log.refresh` follows the writer.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import TYPE_CHECKING, Any, ContextManager

from .. import format as fmt
from .._backend import get_backend
from ..errors import (
    InvalidRecordError,
    LogClosedError,
    ReadOnlyError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from .config import (
    INT16_MAX,
    INT32_MAX,
    LogConfig,
    check_int,
    check_optional_int,
    checked_now_ms,
)
from .file_cache import FileCache
from .loader import RecoveryReport, open_partition
from .local_log import batches_from
from .log_reads import LogReads
from .log_retention import EXPIRATION_CHECK_MS, LogRetention
from .locking import DirectoryLock, check_unlocked
from .partition_state import PartitionDirState, PartitionState
from .producer_state import (
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ProducerStateManager,
    rebuild_producer_state,
)
from .reads import LogReadResult, LogView, position_of
from .txnindex import TransactionIndex
from .validator import (
    check_marker_fields,
    require_keys,
    validate_client_batches,
    validate_timestamps,
)

if TYPE_CHECKING:
    from .._contract import Backend, Segment

__all__ = ["Log", "LogConfig", "LogReadResult", "RecoveryReport"]

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Log(LogReads, LogRetention):
    """One partition directory: segments, roll, reads, flush, recovery, truncation, retention.

    Open with :meth:`Log.open`; use as a context manager or call :meth:`close`. See the module
    docstring for the offsets, the threading model and the durability rules.
    """

    # --- opening and closing ---------------------------------------------------------------------

    def __init__(self, *_args: Any, **_kwargs: Any):
        raise TypeError("use Log.open(path, ...)")

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        config: LogConfig | None = None,
        *,
        backend: str | None = None,
        read_only: bool = False,
        now_ms: int | None = None,
        state: PartitionState | None = None,
        auto_high_watermark: bool = True,
        lock_directory: bool = True,
        file_cache: FileCache | None = None,
    ) -> "Log":
        """Open (creating if needed, unless ``read_only``) the partition directory ``path``.

        ``config`` defaults to ``LogConfig()`` (Kafka's defaults). ``backend`` is "native",
        "pure" or None (the default backend). A writer takes the directory lock
        (:class:`LogLockedError` if another writer holds it), removes the clean-shutdown
        marker, and loads the segments by Kafka's rules (:mod:`seglog.storage.loader`): temporary
        files resolved, missing or corrupt indexes rebuilt and, after an unclean shutdown,
        every segment from the recovery point validated and cut at the first invalid byte;
        what it did is in :attr:`recovery_report`. ``read_only=True`` takes no lock and
        changes nothing (``FileNotFoundError`` if the directory does not exist). ``state``
        replaces where the recovery point, log start offset and clean-shutdown marker are kept
        (default: :class:`~seglog.storage.partition_state.PartitionDirState`, files in ``path``).
        ``auto_high_watermark=False`` leaves the high watermark to
        :meth:`update_high_watermark` (replication); it starts at the end offset either way.
        ``now_ms`` is the clock for segment creation times (time-based roll of segments
        without timestamps). ``lock_directory=False`` is for a caller that holds a lock
        covering ``path`` already (a Store holds its data directory's and checks the partition
        directory with :func:`~seglog.storage.locking.check_unlocked`): the writer then takes
        no lock and no descriptor of its own; a standalone writer, which locks ``path``, also
        refuses a parent directory locked by a Store.

        ``file_cache`` bounds the segment files open at once
        (:class:`~seglog.storage.file_cache.FileCache`; a Store passes its own, default: one
        per process): segments open on first use and the least recently used are closed when
        more are open, so an idle partition holds no descriptor (design.md §7).
        """
        log = object.__new__(cls)
        log._init(os.fspath(path), config or LogConfig(), backend, read_only,
                  checked_now_ms(now_ms), state, auto_high_watermark, lock_directory,
                  file_cache)
        return log

    def _init(self, dir_path: str, config: LogConfig, backend: str | None, read_only: bool,
              now_ms: int, state: PartitionState | None, auto_high_watermark: bool,
              lock_directory: bool, file_cache: FileCache | None = None) -> None:
        self._file_cache = file_cache
        self._dir = dir_path
        self._config = config
        self._be = get_backend(backend)
        self._read_only = read_only
        self._auto_hw = auto_high_watermark
        self._lock = threading.RLock()
        self._data_cond = threading.Condition(self._lock)
        self._waiters = 0  # threads in wait_for_data (appends notify only when there are some)
        self._closed = False
        self._dir_lock: DirectoryLock | None = None
        self._state = state if state is not None else PartitionDirState(dir_path)
        self._first_unstable: int | None = None  # published in the LogView
        self._last_expiration_ms = now_ms
        self._cleaner_checkpoint: int | None = None
        if read_only:
            if not os.path.isdir(dir_path):
                raise FileNotFoundError(dir_path)
        else:
            os.makedirs(dir_path, exist_ok=True)
            if lock_directory:
                self._dir_lock = DirectoryLock(dir_path)
                try:
                    check_unlocked(os.path.dirname(os.path.abspath(dir_path)))
                except BaseException:
                    self._dir_lock.close()
                    raise
        try:
            self._load(now_ms)
        except BaseException:
            if self._dir_lock is not None:
                self._dir_lock.close()
            raise

    def _load(self, now_ms: int) -> None:
        loaded = open_partition(self._dir, self._config, self._be, read_only=self._read_only,
                                state=self._state, now_ms=now_ms,
                                new_producer_state=self._new_producer_state,
                                file_cache=self._file_cache, lock=self._lock)
        self._psm, self._local = loaded.producer_state, loaded.local_log
        self.recovery_report: RecoveryReport = loaded.report
        self._first_unstable = loaded.producer_state.first_unstable_offset()
        self._publish(loaded.start_offset, loaded.end_offset, high_watermark=loaded.end_offset)

    def _new_producer_state(self, listing: list[str] | None = None) -> ProducerStateManager:
        return ProducerStateManager(
            self._dir, producer_id_expiration_ms=self._config.producer_id_expiration_ms,
            backend=self._be, read_only=self._read_only, listing=listing)

    def close(self) -> None:
        """Flush, persist the checkpoints, write the clean-shutdown marker, release the lock.

        Waits for reads in flight. Memoryviews handed out stay valid. Idempotent. Segments
        waiting for deletion keep their ``.deleted`` files, which the next open removes.
        """
        with self._lock:
            if self._closed:
                return
            try:
                if not self._read_only:
                    self._flush_locked(checked_now_ms(None), checkpoint=True)
                    # Kafka's UnifiedLog.close: a snapshot at the log end, so the next open
                    # reads no batch to rebuild producer state.
                    self._psm.update_map_end_offset(self._view.end_offset)
                    self._psm.take_snapshot()
                self._local.close()
                if not self._read_only:
                    self._state.mark_clean_shutdown()
            finally:
                self._closed = True
                if self._dir_lock is not None:
                    self._dir_lock.close()
                self._data_cond.notify_all()

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        view = self._view
        mode = "read-only" if self._read_only else "writer"
        return (f"Log({self._dir!r}, {mode}, backend={self._be.name}, start={view.start_offset}, "
                f"end={view.end_offset}, hw={view.high_watermark}, segments={len(view.segments)})")

    # --- properties ------------------------------------------------------------------------------

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
    def producer_state(self) -> ProducerStateManager:
        """The partition's :class:`~seglog.storage.producer_state.ProducerStateManager` (idempotence
        and transactions). Read-only use, under no lock: the log owns and mutates it."""
        return self._psm

    @property
    def recovery_point(self) -> int:
        """Every record below this offset is known to be on disk (fsynced)."""
        return self._local.recovery_point

    @property
    def size_bytes(self) -> int:
        """Total bytes of the segments' ``.log`` files."""
        return sum(segment.size_bytes for segment in self._view.segments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The segments in offset order (the last is active). Read-only use: the log owns them."""
        return self._view.segments.segments

    @property
    def active_segment(self) -> Segment:
        """The segment appends go to."""
        return self._view.segments.last()

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (Kafka's dynamic topic config update). Segments that
        exist keep their index sizes; new segments use the new values."""
        with self._lock:
            self._config = config
            self._local.update_config(config)

    # --- internal state --------------------------------------------------------------------------

    def _publish(self, start: int, end: int, *, high_watermark: int | None = None) -> None:
        """Publish a new reader snapshot of the segment chain; ``high_watermark`` None keeps
        (clamped) the old one."""
        segments = self._local.segments
        active = segments.last()
        end_position = active.size_bytes if active is not None else 0
        if high_watermark is None:
            old = self._view
            high_watermark = end if self._auto_hw else min(max(old.high_watermark, start), end)
        if high_watermark == end:
            hw_base = active.base_offset if active is not None else end
            hw_position = end_position
        else:
            hw_base, hw_position = position_of(segments, high_watermark)
        self._view = LogView(segments, start, end, end_position, high_watermark, hw_base,
                             hw_position, self._first_unstable)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self._dir} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(f"log {self._dir} was opened read-only")

    # --- appending -------------------------------------------------------------------------------

    def append(self, value: Any, key: Any = None, timestamp_ms: int | None = None,
               headers: Any = (), *, now_ms: int | None = None) -> int:
        """Append one record as its own batch; returns its offset. See :meth:`append_batch`
        (``timestamp_ms`` is checked as its scalar ``timestamps_ms``)."""
        timestamp_ms = check_optional_int("timestamp_ms", timestamp_ms)
        first, _last = self.append_batch(
            [value], keys=None if key is None else [key], timestamps_ms=timestamp_ms,
            headers=[tuple(headers)] if headers else None, now_ms=now_ms)
        return first

    def append_batch(self, values: Any, keys: Any = None, timestamps_ms: Any = None,
                     headers: Any = None, *, compression: str = "none",
                     now_ms: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
                     base_sequence: int = -1,
                     is_transactional: bool = False) -> tuple[int, int]:
        """Encode ``values`` as one RecordBatch v2 and append it; returns ``(first, last)``
        offsets.

        Idempotent and transactional producers pass ``producer_id``, ``producer_epoch`` and
        ``base_sequence`` (all >= 0, else InvalidRecordError) and ``is_transactional``; the
        batch is then checked against the producer state as a client append
        (:meth:`append_raw`): a retry of one of the producer's last 5 batches writes nothing
        and returns the original offsets; OutOfOrderSequenceError, InvalidProducerEpochError,
        InvalidTxnStateError as Kafka raises them.

        values/keys/timestamps_ms/headers as ``encode_batch`` takes them (lists of
        bytes-like, 2-D uint8 arrays, ``(data, lengths)`` pairs). ``timestamps_ms`` None means
        ``now_ms`` (default: the wall clock) for every record. With
        ``message_timestamp_type="LogAppendTime"`` every record gets ``now_ms`` and the batch
        says LogAppendTime. ``compression`` is the codec unless the config's
        ``compression_type`` names one. Raises RecordTooLargeError (batch larger than
        ``max_message_bytes``), RecordBatchTooLargeError (larger than ``segment_bytes``),
        InvalidTimestampError (CreateTime outside ``message_timestamp_before/after_max_ms``),
        InvalidRecordError / UnsupportedCompressionError from the encoder, LogClosedError,
        ReadOnlyError. Integer arguments are checked first (:func:`~seglog.storage.config.check_int`):
        TypeError for a non-integer ``now_ms``, ``producer_id``, ``producer_epoch``,
        ``base_sequence`` or scalar ``timestamps_ms``; ValueError outside int64 (int16 for the
        epoch, int32 for the sequence). Thread-safe; encoding happens outside the writer lock.
        """
        self._check_writable()
        producer_id = check_int("producer_id", producer_id)
        producer_epoch = check_int("producer_epoch", producer_epoch, minimum=-(INT16_MAX + 1),
                                   maximum=INT16_MAX)
        base_sequence = check_int("base_sequence", base_sequence, minimum=-(INT32_MAX + 1),
                                  maximum=INT32_MAX)
        if timestamps_ms is not None and (isinstance(timestamps_ms, (str, bytes))
                                          or not hasattr(timestamps_ms, "__len__")):
            timestamps_ms = check_int("timestamps_ms", timestamps_ms)
        config = self._config
        require_keys(keys, config=config)  # a compacted topic rejects keyless records
        now_ms = checked_now_ms(now_ms)
        log_append_time = config.message_timestamp_type == "LogAppendTime"
        if log_append_time or timestamps_ms is None:
            timestamps_ms = now_ms
        else:
            validate_timestamps(timestamps_ms, config=config, now_ms=now_ms)
        codec = config.compression_codec or compression
        if producer_id >= 0:
            if producer_epoch < 0 or base_sequence < 0:
                raise InvalidRecordError(
                    f"a batch of producer {producer_id} needs a producer epoch and a base "
                    f"sequence >= 0, got {producer_epoch} and {base_sequence}")
        elif is_transactional or producer_epoch >= 0 or base_sequence >= 0:
            raise InvalidRecordError(
                "producer_epoch, base_sequence and is_transactional need a producer_id >= 0")
        # Encode outside the writer lock at the offset the batch will most likely get; if
        # another writer gets there first the segment patches the base offset (8 bytes that
        # the CRC does not cover).
        raw = self._be.encode_batch(
            values, keys, timestamps_ms, headers, base_offset=self._view.end_offset,
            compression=codec,
            timestamp_type=fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME if log_append_time
            else fmt.TIMESTAMP_TYPE_CREATE_TIME,
            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
            is_transactional=is_transactional)
        size_bytes = len(raw)
        if size_bytes > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {size_bytes} bytes is larger than max.message.bytes "
                f"({config.max_message_bytes})")
        return self._append_encoded(
            raw, size_bytes=size_bytes,
            record_count=_INT32.unpack_from(raw, fmt.LAST_OFFSET_DELTA_POSITION)[0] + 1,
            max_timestamp_ms=_INT64.unpack_from(raw, fmt.MAX_TIMESTAMP_POSITION)[0],
            now_ms=now_ms, batches=list(self._be.iter_batches(raw)) if producer_id >= 0 else None)

    def append_txn_marker(self, *, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool,
                          now_ms: int | None = None) -> int:
        """Write a transaction marker, a COMMIT (``commit=True``) or ABORT control batch, for
        ``producer_id`` (what Kafka's transaction coordinator sends with WriteTxnMarkers);
        returns its offset.

        The producer's open transaction (if any) is closed: a commit makes its records
        visible to read_committed readers once the marker is below the high watermark; an
        abort is recorded in the active segment's ``.txnindex`` and its records are hidden
        from them. A marker without an open transaction is written all the same (Kafka).
        Raises InvalidProducerEpochError for an epoch below the producer's,
        TransactionCoordinatorFencedError for a coordinator epoch below the last marker's,
        InvalidRecordError for a negative producer id or epoch, LogClosedError, ReadOnlyError.
        The marker's timestamp is ``now_ms`` (default: the wall clock). TypeError /
        ValueError for non-integer or out-of-range arguments (epochs int16, coordinator epoch
        int32; :func:`~seglog.storage.config.check_int`). Thread-safe.
        """
        self._check_writable()
        producer_id, producer_epoch, coordinator_epoch = check_marker_fields(
            producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch)
        now_ms = checked_now_ms(now_ms)
        control_type = fmt.CONTROL_TYPE_COMMIT if commit else fmt.CONTROL_TYPE_ABORT
        raw = self._be.encode_control_batch(
            control_type, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, base_offset=self._view.end_offset,
            timestamp_ms=now_ms)
        first, _last = self._append_encoded(
            raw, size_bytes=len(raw), record_count=1, max_timestamp_ms=now_ms, now_ms=now_ms,
            batches=list(self._be.iter_batches(raw)), origin=ORIGIN_COORDINATOR)
        return first

    def append_raw(self, data: Any, *, now_ms: int | None = None) -> tuple[int, int]:
        """Append client-built batches (a produce request's records); returns ``(first,
        last)`` offsets of the whole set.

        Validates as Kafka's LogValidator does for client appends
        (:mod:`seglog.storage.validator` lists the rules and their errors:
        CorruptRecordError, RecordTooLargeError, RecordBatchTooLargeError, InvalidRecordError,
        InvalidTimestampError), then assigns offsets and writes the client's bytes unchanged
        except for the base offsets and, where Kafka rewrites them, the max timestamp,
        timestamp type and CRC (with LogAppendTime records then read with ``now_ms``), or
        re-encoded with the topic's ``compression_type`` codec when it names another. The
        caller's buffer is never modified. Thread-safe.

        Batches with a producer id are checked against the producer state (Kafka's
        ``analyzeAndValidateProducerState``): a retry of one of the producer's last 5 batches
        (same epoch, same sequence range) writes nothing and returns the original ``(first,
        last)`` offsets; an older duplicate, a gap or a new epoch not starting at sequence 0
        raises OutOfOrderSequenceError; a lower epoch InvalidProducerEpochError; a
        non-transactional batch while the producer's transaction is open InvalidTxnStateError.
        """
        self._check_writable()
        now_ms = checked_now_ms(now_ms)
        buffer = memoryview(data)
        if buffer.ndim != 1 or buffer.format not in ("B", "b", "c"):
            buffer = buffer.cast("B")
        valid = validate_client_batches(buffer, backend=self._be, config=self._config,
                                        now_ms=now_ms)
        return self._append_encoded(
            valid.data, size_bytes=valid.size_bytes, record_count=valid.record_count,
            max_timestamp_ms=valid.max_timestamp_ms, now_ms=now_ms, batches=valid.batches)

    def _append_encoded(self, data: Any, *, size_bytes: int, record_count: int,
                        max_timestamp_ms: int, now_ms: int, batches: list | None = None,
                        origin: str = ORIGIN_CLIENT) -> tuple[int, int]:
        """Roll if needed, check ``batches`` (the Batch objects of ``data`` when any carries a
        producer id, else None) against the producer state, write ``data`` (whole batches,
        offsets assigned by the segment) and update the producer state (Kafka's
        ``UnifiedLog.append``). A duplicate writes nothing and returns the original offsets."""
        if size_bytes > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {size_bytes} bytes is larger than segment.bytes "
                f"({self._config.segment_bytes})")
        with self._lock:
            self._check_writable()
            config = self._config
            view = self._view
            psm = self._psm
            local = self._local
            if now_ms - self._last_expiration_ms >= EXPIRATION_CHECK_MS:
                self._expire_producers(now_ms)
            segments = view.segments
            if local.roll_reason(segments.last(), size_bytes=size_bytes,
                                 record_count=record_count, max_timestamp_ms=max_timestamp_ms,
                                 now_ms=now_ms, end_offset=view.end_offset) is not None:
                self._roll_locked(now_ms)
                segments = local.segments
            active = segments.last()
            analysis = None
            if batches is not None:
                analysis = psm.analyze_batches(batches, first_offset=view.end_offset,
                                               origin=origin)
                if analysis.duplicate is not None:
                    duplicate = analysis.duplicate
                    return duplicate.first_offset, duplicate.last_offset
            result = active.append(data)
            end_offset = result.last_offset + 1
            assert result.first_offset == view.end_offset, (result.first_offset, view.end_offset)
            if analysis is None:
                psm.update_map_end_offset(end_offset)
            else:
                txn_index = (local.txn_index(active.base_offset) if analysis.completed_txns
                             else None)
                psm.apply_append(analysis, end_offset=end_offset, txn_index=txn_index)
                if analysis.completed_txns or any(
                        info.started_transactions for info in analysis.append_infos.values()):
                    if self._auto_hw:
                        psm.on_high_watermark_updated(end_offset)
                    self._first_unstable = psm.first_unstable_offset()
            if self._auto_hw:  # the hot path of _publish
                end_position = active.size_bytes
                self._view = LogView(segments, view.start_offset, end_offset, end_position,
                                     end_offset, active.base_offset, end_position,
                                     self._first_unstable)
            else:
                self._publish(view.start_offset, end_offset)
            if (end_offset - local.recovery_point >= config.flush_messages
                    or now_ms - local.last_flush_ms >= config.flush_ms):
                self._flush_locked(now_ms, checkpoint=False)
            if self._waiters:
                self._data_cond.notify_all()
            return result.first_offset, result.last_offset

    # --- rolling ---------------------------------------------------------------------------------

    def roll(self, *, now_ms: int | None = None) -> Any:
        """Start a new, empty active segment at the end offset (unless the active segment is
        already empty); returns the active segment. Flushes the old one."""
        with self._lock:
            self._check_writable()
            self._roll_locked(checked_now_ms(now_ms))
            return self._view.segments.last()

    def _refresh_unstable(self) -> None:
        """Recompute the first unstable offset after the producer state changed (publish
        follows)."""
        self._first_unstable = self._psm.first_unstable_offset()

    def _expire_producers(self, now_ms: int) -> list[int]:
        """Drop producers idle for ``producer_id_expiration_ms`` without an open transaction
        (Kafka checks every 10 minutes; callers bound the rate)."""
        self._last_expiration_ms = now_ms
        return self._psm.remove_expired_producers(now_ms)

    def _roll_locked(self, now_ms: int) -> None:
        view = self._view
        if not self._local.roll(view.end_offset, now_ms=now_ms):
            return
        self._publish(view.start_offset, view.end_offset)
        # Kafka's UnifiedLog.roll: a producer snapshot at every new segment's base.
        self._psm.update_map_end_offset(view.end_offset)
        self._psm.take_snapshot()
        # Kafka flushes up to the new base offset after a roll (asynchronously there); doing it
        # here keeps recovery after a crash to the active segment.
        self._flush_locked(now_ms, checkpoint=False)

    # --- flushing --------------------------------------------------------------------------------

    def flush(self, *, now_ms: int | None = None) -> None:
        """Fsync every segment with records at or above the recovery point, move the
        recovery point to the end offset and persist it (and the log start offset)."""
        with self._lock:
            self._check_writable()
            self._flush_locked(checked_now_ms(now_ms), checkpoint=True)

    def maybe_flush(self, *, now_ms: int | None = None) -> bool:
        """Flush if ``flush_ms`` has passed since the last flush and records are unflushed
        (the periodic check Kafka's log flusher makes); returns whether it flushed."""
        with self._lock:
            self._check_writable()
            now_ms = checked_now_ms(now_ms)
            if (self._view.end_offset > self._local.recovery_point
                    and now_ms - self._local.last_flush_ms >= self._config.flush_ms):
                self._flush_locked(now_ms, checkpoint=False)
                return True
            return False

    def _flush_locked(self, now_ms: int, *, checkpoint: bool) -> None:
        self._local.flush(self._view.end_offset, now_ms=now_ms)
        if checkpoint:
            self._save_state()

    def _save_state(self) -> None:
        self._state.save(recovery_point=self._local.recovery_point,
                         log_start_offset=self._view.start_offset)

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
        end_offset``. Waits for reads in flight. Raises ValueError for a negative offset,
        ViewsOutstandingError if a live memoryview maps bytes to cut (nothing changes then).
        """
        offset = check_int("offset", offset, minimum=0)  # TypeError / ValueError
        now_ms = checked_now_ms(now_ms)
        with self._lock:
            self._check_writable()
            view = self._view
            if offset >= view.end_offset:
                return
            self._truncate_locked(view, offset, now_ms)
            self._data_cond.notify_all()

    def _truncate_locked(self, view: LogView, offset: int, now_ms: int) -> None:
        psm = self._psm
        local = self._local
        if offset < view.segments.first().base_offset:
            # UnifiedLog.truncateFullyAndStartAt
            local.truncate_fully(offset, now_ms=now_ms)
            psm.truncate_fully_and_start_at(offset)
            self._refresh_unstable()
            self._publish(offset, offset, high_watermark=offset)
        else:
            local.truncate_to(offset, now_ms=now_ms)
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
        from .cleaner import clean_log

        now_ms = None if now_ms is None else checked_now_ms(now_ms)
        with self._lock:
            self._check_writable()
            return clean_log(self, now_ms, force=force)

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
            end = segments.last().next_offset
            if end > self._psm.map_end_offset:  # follow the writer's producer state
                self._psm.rebuild(batches_from(segments, self._psm.map_end_offset),
                                  end_offset=end)
                self._psm.on_high_watermark_updated(end)  # a follower's high watermark
                self._refresh_unstable()
            start_checkpoint = getattr(self._state, "read_log_start_offset", lambda: None)()
            start = max(segments.first().base_offset, start_checkpoint or 0, view.start_offset)
            end = segments.last().next_offset
            changed = (start, end) != (view.start_offset, view.end_offset)
            self._publish(min(start, end), end, high_watermark=end)
            for segment in gone:
                segment.close()
            if changed:
                self._data_cond.notify_all()
            return changed
