"""One partition's log: a chain of segments in one directory, with Kafka's rules for appending,
reading, flushing, recovering, truncating and retention (Kafka's ``UnifiedLog``).
The parts: the segment chain (roll, flush, truncate, delete; the rules of
rolling and the recovery point) is :mod:`seglog.storage.local_log`; the checks on client
batches :mod:`seglog.storage.validator`; the reader snapshot and the segment walk of a read,
with their checks of untrusted bytes, :mod:`seglog.storage.reads`; the read methods Log
inherits :mod:`seglog.storage.log_reads`, the retention methods
:mod:`seglog.storage.log_retention`, the replication methods (leader epochs, the follower's
append, the high watermark, truncation) :mod:`seglog.storage.log_replication` and the
cleaner's hooks :mod:`seglog.storage.log_cleaning`; opening and recovery
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
close writes the clean-shutdown marker (docs/design.md §6 has the rule event by event). A log
opened with a ``topic_id`` and no ``partition.metadata`` writes that file with its first flush
that syncs anything, before the flush's data (Kafka's lazy ``PartitionMetadataFile``).

Producers and transactions (:mod:`seglog.storage.producer_state`). Batches
carrying a producer id are checked against the producer state after the roll and before the
write (a retry of one of the producer's last 5 batches writes nothing and returns the original
offsets); after the write the state takes the batches, an ABORT marker adds an entry to the
active segment's ``.txnindex``, and the *last stable offset* is published with the reader
snapshot. The state is snapshotted at every roll and on close, loaded on open, rebuilt by
truncation; idle producers expire (checked at most every 10 minutes of ``now_ms``, on append
and retention). ``isolation="read_committed"`` reads stop at the last stable offset;
:meth:`Log.read` then lists the overlapping aborted transactions, and the record-level readers
skip aborted and control batches.

Replication (issue 12; docs/cluster.md §3.1): the leader epoch cache, the follower's append,
the high watermark and truncation are :mod:`seglog.storage.log_replication`'s; a leader's
appends here stamp its epoch into each batch.

Threads. All mutating methods serialise on one lock; reads take an immutable snapshot and
are the business of :mod:`seglog.storage.log_reads` (the read methods Log inherits).

Processes. A writer holds an exclusive lock on the directory (:mod:`seglog.storage.locking`); a
second writer gets :class:`~seglog.errors.LogLockedError`. ``read_only=True`` opens without the
lock, never changes a file, and :meth:`Log.refresh` follows the writer.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import uuid
from typing import TYPE_CHECKING, Any

from .. import filenames
from .. import format as fmt
from .._backend import get_backend
from ..errors import (
    CorruptRecordError,
    KafkaStorageError,
    PartitionOfflineError,
    ReadOnlyError,
    InvalidRecordError,
    LogClosedError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from .checkpoints import ZERO_UUID, PartitionMetadataFile, topic_id_to_record
from .counters import LogCounters
from .config import (
    INT16_MAX,
    INT32_MAX,
    LogConfig,
    check_int,
    check_optional_int,
    checked_now_ms,
)
from .file_cache import FileCache
from .leader_epoch import LeaderEpochCache
from .loader import RecoveryReport, open_partition
from .local_log import batches_from
from .log_cleaning import LogCleaning
from .log_reads import LogReads
from .log_replication import LogReplication
from .log_retention import EXPIRATION_CHECK_MS, LogRetention
from .log_state import LogState
from .locking import DirectoryLock, check_unlocked
from .partition_state import PartitionDirState, PartitionState
from .producer_state import (
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ProducerStateManager,
)
from .reads import LogReadResult, LogView, position_of
from .validator import (
    check_marker_fields,
    require_keys,
    validate_client_batches,
    validate_timestamps,
)

if TYPE_CHECKING:
    from .._contract import Segment

__all__ = ["Log", "LogConfig", "LogReadResult", "RecoveryReport"]

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Log(LogState, LogReads, LogRetention, LogReplication, LogCleaning):
    """One partition directory: segments, roll, reads, flush, recovery, truncation, retention.

    Open with :meth:`Log.open`; use as a context manager or call :meth:`close`. See the module
    docstring for the offsets, the threading model (thread-safe) and the durability rules, and
    for the base classes that hold the reads, retention, replication and the cleaner's hooks.
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
        high_watermark: int | None = None,
        create_directory: bool = True,
        topic_id: uuid.UUID | None = None,
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
        :meth:`update_high_watermark` (replication): it then starts at ``high_watermark``
        (the value a replicated store kept in ``replication-offset-checkpoint``; None counts
        as 0) clamped to ``[start_offset, end_offset]``, never at the end offset, so a
        restarted replica exposes nothing that was not known committed. With the default
        ``auto_high_watermark=True`` it starts at the end offset and ``high_watermark`` is
        ignored. The leader epoch cache (``leader-epoch-checkpoint``, :attr:`leader_epoch_cache`)
        is loaded and cut to the loaded offsets (Kafka's ``truncateFromEnd(LEO)`` and
        ``truncateFromStart(logStartOffset)``); a corrupt one is CorruptCheckpointError.
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

        ``create_directory=False`` is for a caller that made ``path`` just before (a Store
        makes a new topic's directories in one batch): the open makes no ``mkdir`` call of its
        own, and a missing directory is ``FileNotFoundError``.

        ``topic_id`` (a writer only; ignored when ``read_only``): the partition's topic id, to
        be recorded in ``partition.metadata`` (Kafka's ``PartitionMetadataFile.record``). When
        the directory has that file already it must name ``topic_id``
        (:class:`CorruptCheckpointError` otherwise: Kafka's InconsistentTopicIdException) and
        nothing is written. Otherwise the file is written lazily, as Kafka's
        ``maybeFlushMetadataFile`` writes it: by the first flush that syncs anything (an
        explicit or automatic flush, the one after a roll or a truncation, or :meth:`close`),
        before that flush's data, atomically (temp file fsynced, renamed), and made durable
        by the same directory fsync as the flush's new segment files; so the file exists on
        disk before any record of the partition is durable, and a partition that never holds
        a record never gets one (a Store keeps the id in its registry). None: the Log leaves
        ``partition.metadata`` alone. TypeError unless a ``uuid.UUID``; ValueError for the
        zero uuid.
        """
        if high_watermark is not None:
            high_watermark = check_int("high_watermark", high_watermark)
        if topic_id is not None:
            if not isinstance(topic_id, uuid.UUID):
                raise TypeError(f"topic_id must be a uuid.UUID, got {type(topic_id).__name__}")
            if topic_id == ZERO_UUID:
                raise ValueError("the zero uuid is not a topic id")
        log = object.__new__(cls)
        log._init(os.fspath(path), config or LogConfig(), backend, read_only,
                  checked_now_ms(now_ms), state, auto_high_watermark, lock_directory,
                  file_cache, high_watermark=high_watermark, create_directory=create_directory,
                  topic_id=None if read_only else topic_id)
        return log

    def _init(self, dir_path: str, config: LogConfig, backend: str | None, read_only: bool,
              now_ms: int, state: PartitionState | None, auto_high_watermark: bool,
              lock_directory: bool, file_cache: FileCache | None = None, *,
              high_watermark: int | None = None, create_directory: bool = True,
              topic_id: uuid.UUID | None = None) -> None:
        self._file_cache = file_cache
        self._dir = dir_path
        self._config = config
        self._be = get_backend(backend)
        self._read_only = read_only
        self._auto_hw = auto_high_watermark
        self._lock = threading.RLock()
        self._data_cond = threading.Condition(self._lock)
        self._waiters = 0  # threads in wait_for_data (appends notify only when there are some)
        self.counters = LogCounters()
        self._closed = False
        # The OSError that took this log offline (see _went_offline); None while it is not.
        self._failure: OSError | None = None
        # The load error of a segment whose first use failed the checks its open would have
        # run (see _load_failed); None while there is none.
        self._load_failure: CorruptRecordError | None = None
        self._dir_lock: DirectoryLock | None = None
        self._state = state if state is not None else PartitionDirState(dir_path)
        self._first_unstable: int | None = None  # published in the LogView
        self._last_expiration_ms = now_ms
        self._cleaner_checkpoint: int | None = None
        self._leader_epoch: int | None = None  # stamped on appends while set (become_leader)
        # The topic id partition.metadata must get, until the first flush writes it (Kafka's
        # PartitionMetadataFile.dirtyTopicIdOpt); set by _load when the file is missing.
        self._pending_topic_id: uuid.UUID | None = None
        if read_only:
            if not os.path.isdir(dir_path):
                raise FileNotFoundError(dir_path)
        else:
            if create_directory:
                os.makedirs(dir_path, exist_ok=True)
            if lock_directory:
                self._dir_lock = DirectoryLock(dir_path)
                try:
                    check_unlocked(os.path.dirname(os.path.abspath(dir_path)))
                except BaseException:
                    self._dir_lock.close()
                    raise
        try:
            self._load(now_ms, high_watermark, topic_id)
        except BaseException:
            if self._dir_lock is not None:
                self._dir_lock.close()
            raise

    def _load(self, now_ms: int, high_watermark: int | None = None,
              topic_id: uuid.UUID | None = None) -> None:
        # One listing, shared with the loader: most logs have no epoch file to read.
        listing = os.listdir(self._dir)
        if topic_id is not None:
            # Kafka's UnifiedLog.initializeTopicId; a missing file is written by the first
            # flush that syncs anything (_write_partition_metadata).
            self._pending_topic_id = topic_id_to_record(
                self._dir, topic_id, exists=filenames.PARTITION_METADATA in listing)
        # Read before the partition is loaded: a corrupt file then fails the open before the
        # loader forgets the clean-shutdown marker.
        epochs_kept = filenames.LEADER_EPOCH_CHECKPOINT in listing
        self._epochs = LeaderEpochCache.load(
            self._dir, self._log_end_offset, read_only=self._read_only, exists=epochs_kept)
        loaded = open_partition(self._dir, self._config, self._be, read_only=self._read_only,
                                state=self._state, now_ms=now_ms,
                                new_producer_state=self._new_producer_state,
                                file_cache=self._file_cache, lock=self._lock, listing=listing,
                                on_load_failure=self._load_failed)
        self._psm, self._local = loaded.producer_state, loaded.local_log
        self.recovery_report: RecoveryReport = loaded.report
        start, end = loaded.start_offset, loaded.end_offset
        if not self._read_only:
            report = loaded.report
            if epochs_kept and report.recovered_segments:
                self._epochs.assign_recovered(
                    batches_from(self._local.segments, min(report.recovered_segments)))
            # Kafka's Log constructor: entries past the loaded end (a crash after the cache
            # was written, before the batch) and before the start go.
            self._epochs.truncate_from_end(end)
            self._epochs.truncate_from_start(start)
        self._first_unstable = loaded.producer_state.first_unstable_offset()
        if self._auto_hw:
            high_watermark = end
        else:
            high_watermark = min(max(high_watermark or 0, start), end)
            self._psm.on_high_watermark_updated(high_watermark)
        self._publish(start, end, high_watermark=high_watermark)

    def _log_end_offset(self) -> int:
        return self._view.end_offset

    def _write_partition_metadata(self) -> None:
        """Write the pending ``partition.metadata`` (temp file fsynced, renamed); the flush
        that calls this fsyncs the directory after its segments, which makes the file's entry
        durable before the recovery point moves (Kafka: ``maybeFlushMetadataFile`` before an
        append, so "any log data can be recovered with the correct topic ID")."""
        topic_id = self._pending_topic_id
        assert topic_id is not None
        PartitionMetadataFile(os.path.join(self._dir, filenames.PARTITION_METADATA)).write(
            topic_id, sync_dir=False)
        self._local.note_file_created()
        self._pending_topic_id = None

    @property
    def partition_metadata_pending(self) -> bool:
        """Whether ``partition.metadata`` still waits for the first flush that syncs anything
        (``topic_id`` given to :meth:`open`, the file missing, nothing flushed since)."""
        return self._pending_topic_id is not None

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
                # An offline log (see _went_offline) is closed as after a crash: no flush, no
                # producer snapshot, no clean-shutdown mark, so the next open recovers it.
                # A log offline since a segment failed to load closes as before: the
                # marker keeps the next open refusing it rather than cutting it.
                writable = not self._read_only and self._failure is None
                if writable:
                    self._flush_locked(checked_now_ms(None), checkpoint=True)
                    # Kafka's UnifiedLog.close: a snapshot at the log end, so the next open
                    # reads no batch to rebuild producer state.
                    self._psm.update_map_end_offset(self._view.end_offset)
                    self._psm.take_snapshot()
                self._local.close()
                if writable:
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
        return self._view.segments.active()

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
        load_failure = self._load_failure
        if load_failure is not None:
            raise self._offline_error(load_failure)
        failure = self._failure
        if failure is not None:
            raise KafkaStorageError(
                failure.errno or errno.EIO,
                f"log {self._dir} is offline since a write failed after its batch reached the "
                f"segment ({failure}); reopen it (the Store: restart) to recover it")

    def _offline_error(self, load_failure: CorruptRecordError) -> PartitionOfflineError:
        """The error a write to a log offline since ``load_failure`` raises."""
        return PartitionOfflineError(
            f"log {self._dir} is offline since a segment failed to load ({load_failure}); "
            "truncate it to its last valid offset (seglog recover) to bring it back",
            reason=load_failure.reason, position=load_failure.position)

    def _load_failed(self, exc: CorruptRecordError) -> None:
        """A deferred segment's first use failed the checks of its open (lazy loading,
        :func:`~seglog.storage.loader.load_segments`): the log goes offline as if its open
        had refused it (writes refused; :attr:`offline`), nothing is cut."""
        if self._load_failure is None:
            self._load_failure = exc
            self._state.load_failed(f"{type(exc).__name__}: {exc}")

    def _went_offline(self, exc: OSError) -> KafkaStorageError:
        """Take the log offline after ``exc`` failed a write whose batch was already in the
        active segment: the state after it (producer state, ``.txnindex``, the published end
        offset) no longer matches the file, so every later write is refused with
        KafkaStorageError until a reopen recovers the segment from the recovery point (Kafka's
        LogDirFailureChannel takes the log directory offline the same way). Reads go on
        below the published end, which the failed write never moved. Returns the error to
        raise."""
        self._failure = exc
        return KafkaStorageError(
            exc.errno or errno.EIO,
            f"log {self._dir}: a write failed after its batch reached the segment ({exc}); "
            f"the log is offline until it is reopened")

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
            is_transactional=is_transactional, partition_leader_epoch=self._stamp_epoch())
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
            timestamp_ms=now_ms, partition_leader_epoch=self._stamp_epoch())
        first, _last = self._append_encoded(
            raw, size_bytes=len(raw), record_count=1, max_timestamp_ms=now_ms, now_ms=now_ms,
            batches=list(self._be.iter_batches(raw)), origin=ORIGIN_COORDINATOR)
        return first

    def append_raw(self, data: Any, *, now_ms: int | None = None,
                   partition_leader_epoch: int | None = None) -> tuple[int, int]:
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

        The batches get the leader's epoch in their partitionLeaderEpoch field when this Log
        leads (:meth:`become_leader`), else ``partition_leader_epoch`` if given (a lone
        broker's 0); the segment writes it, the caller's bytes unchanged and uncopied."""
        self._check_writable()
        now_ms = checked_now_ms(now_ms)
        buffer = memoryview(data)
        if buffer.ndim != 1 or buffer.format not in ("B", "b", "c"):
            buffer = buffer.cast("B")
        valid = validate_client_batches(buffer, backend=self._be, config=self._config,
                                        now_ms=now_ms)
        return self._append_encoded(
            valid.data, size_bytes=valid.size_bytes, record_count=valid.record_count,
            max_timestamp_ms=valid.max_timestamp_ms, now_ms=now_ms, batches=valid.batches,
            stamp_epoch=partition_leader_epoch)

    def _apply_producer_state(self, analysis: Any, active: Any, end_offset: int) -> bool:
        """After a write ending at ``end_offset`` to ``active``: apply the producer state
        ``analysis`` of its batches (their transactions' aborts go to the segment's
        ``.txnindex``) or, with none (no batch carried a producer id), only move the state's
        end; True when there was an analysis. OSError from the ``.txnindex``."""
        psm = self._psm
        if analysis is None:
            psm.update_map_end_offset(end_offset)
            return False
        txn_index = (self._local.txn_index(active.base_offset) if analysis.completed_txns
                     else None)
        psm.apply_append(analysis, end_offset=end_offset, txn_index=txn_index)
        return True

    def _stamp_epoch(self) -> int:
        """The partitionLeaderEpoch to encode a batch with (-1 when not leading); the writer
        lock re-stamps if the epoch changed meanwhile."""
        epoch = self._leader_epoch
        return fmt.NO_PARTITION_LEADER_EPOCH if epoch is None else epoch

    def _append_encoded(self, data: Any, *, size_bytes: int, record_count: int,
                        max_timestamp_ms: int, now_ms: int, batches: list | None = None,
                        origin: str = ORIGIN_CLIENT,
                        stamp_epoch: int | None = None) -> tuple[int, int]:
        """:meth:`_append_checked`; the segment that failed its first open on this append
        (lazy loading) refuses it as the offline log does (PartitionOfflineError, Kafka's
        KAFKA_STORAGE_ERROR), not as a corrupt batch of the client's."""
        try:
            return self._append_checked(
                data, size_bytes=size_bytes, record_count=record_count,
                max_timestamp_ms=max_timestamp_ms, now_ms=now_ms, batches=batches,
                origin=origin, stamp_epoch=stamp_epoch)
        except CorruptRecordError as exc:
            if exc is not self._load_failure:
                raise
            raise self._offline_error(exc) from exc

    def _append_checked(self, data: Any, *, size_bytes: int, record_count: int,
                        max_timestamp_ms: int, now_ms: int, batches: list | None = None,
                        origin: str = ORIGIN_CLIENT,
                        stamp_epoch: int | None = None) -> tuple[int, int]:
        """Roll if needed, check ``batches`` (the Batch objects of ``data`` when any carries a
        producer id, else None) against the producer state, write ``data`` (checked batches;
        offsets and the leader's epoch, else ``stamp_epoch``, set by the segment) and update
        the producer state (Kafka's ``UnifiedLog.append``). A duplicate writes nothing and
        returns the original offsets."""
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
            if local.roll_reason(segments.active(), size_bytes=size_bytes,
                                 record_count=record_count, max_timestamp_ms=max_timestamp_ms,
                                 now_ms=now_ms, end_offset=view.end_offset) is not None:
                self._roll_locked(now_ms)
                segments = local.segments
            active = segments.active()
            analysis = None
            if batches is not None:
                analysis = psm.analyze_batches(batches, first_offset=view.end_offset,
                                               origin=origin)
                if analysis.duplicate is not None:
                    duplicate = analysis.duplicate
                    return duplicate.first_offset, duplicate.last_offset
            epoch = self._leader_epoch
            # A leader's append carries its epoch (Kafka's LogValidator stamps it); checked:
            # by validate_client_batches, or encoded here (the segment checks the framing).
            result = active.append(data, partition_leader_epoch=stamp_epoch if epoch is None
                                   else epoch, checked=True)
            end_offset = result.last_offset + 1
            self.counters.records_in += record_count
            self.counters.bytes_in += size_bytes
            assert result.first_offset == view.end_offset, (result.first_offset, view.end_offset)
            try:
                if epoch is not None:
                    # Kafka assigns before the write; after it, a refused write leaves no entry.
                    self._epochs.assign(epoch, result.first_offset)
                if self._apply_producer_state(analysis, active, end_offset) \
                        and analysis is not None and (analysis.completed_txns or any(
                            info.started_transactions
                            for info in analysis.append_infos.values())):
                    if self._auto_hw:
                        psm.on_high_watermark_updated(end_offset)
                    self._first_unstable = psm.first_unstable_offset()
            except OSError as exc:  # the .txnindex or the epoch checkpoint: see _went_offline
                raise self._went_offline(exc) from exc
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
            return self._view.segments.active()

    def _refresh_unstable(self) -> None:
        """Recompute the first unstable offset after the producer state changed (publish
        follows)."""
        self._first_unstable = self._psm.first_unstable_offset()

    def _expire_producers(self, now_ms: int) -> list[int]:
        """Drop producers idle for ``producer_id_expiration_ms`` without an open transaction
        (Kafka checks every 10 minutes; callers bound the rate)."""
        self._last_expiration_ms = now_ms
        return self._psm.remove_expired_producers(now_ms)

    def _roll_locked(self, now_ms: int, base_offset: int | None = None) -> None:
        """Roll to a new segment at the end offset, or at ``base_offset`` (above it: a
        follower's append whose first offset leaves a gap, Kafka's ``maybeRoll`` at
        ``firstOrLastOffsetOfFirstBatch``)."""
        view = self._view
        base = view.end_offset if base_offset is None else base_offset
        if not self._local.roll(base, now_ms=now_ms):
            return
        self._publish(view.start_offset, view.end_offset)
        # Kafka's UnifiedLog.roll: a producer snapshot at every new segment's base.
        self._psm.update_map_end_offset(base)
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
        if self._pending_topic_id is not None and self._local.has_unsynced(self._view.end_offset):
            self._write_partition_metadata()
        self._local.flush(self._view.end_offset, now_ms=now_ms)
        if checkpoint:
            self._save_state()

    def _save_state(self) -> None:
        self._state.save(recovery_point=self._local.recovery_point,
                         log_start_offset=self._view.start_offset)
