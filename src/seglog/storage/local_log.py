"""The segment chain of one partition directory (Kafka's ``LocalLog``).

Segments. The newest segment is *active*; appends go only there. Before an append the active
segment *rolls* (a new, empty segment starts at the end offset) when the append would make it
exceed ``segment_bytes``, when its first batch's timestamp is ``segment_ms`` (minus jitter)
older than the incoming batch's max timestamp (an empty segment never rolls on time; a segment
without timestamps uses its creation time), when either index is full, or when the incoming
last offset does not fit a 32-bit relative offset (:meth:`LocalLog.roll_reason`). The old
segment is then flushed (fsync), so the recovery point advances to the new base offset. The
invariant kept throughout: the active segment's next offset equals the log's end offset.

Durability. Appends reach the page cache. :meth:`LocalLog.flush` fsyncs the segments with
records at or above the recovery point (and their ``.txnindex``, and the directory when a
segment file was created) and moves the recovery point to the end offset: everything below it
is on disk.

Deleting. Segments leave the chain (retention, truncation, compaction's swap) by having their
files renamed ``.deleted``, with their ``.txnindex`` and the producer snapshot at their base;
the files are removed after ``file_delete_delay_ms`` (:meth:`LocalLog.delete_expired_files`,
Kafka's async delete), so reads in flight keep their mappings.

Not thread-safe: :class:`~seglog.storage.log.Log` owns one and calls it only under its lock,
and publishes :attr:`LocalLog.segments` to readers after every change. The producer state is
the Log's; the chain only asks it, through the ``retire_snapshot`` callable it is given, to
rename the snapshot at a deleted segment's base.
"""

from __future__ import annotations

import logging
import os
import random
import time
from typing import Any, Callable, Iterator

from .. import filenames
from .. import format as fmt
from .config import LogConfig
from .counters import MsHistogram
from .file_cache import FileCache, LazySegment, default_file_cache
from .segments import SegmentMap
from .txnindex import TransactionIndex

_log = logging.getLogger("seglog.storage.log")

__all__ = ["LocalLog", "batches_from", "max_segment_ms"]


def batches_from(segments: SegmentMap, offset: int) -> Iterator[Any]:
    """The Batch objects of ``segments`` in order, from the batch holding ``offset`` (or the
    first after it) to the end; what producer-state replay reads."""
    first = True
    for segment in segments.from_offset(offset):
        position = 0
        if first:
            first = False
            located = segment.translate_offset(offset)
            if located is None:
                continue
            position = located[0]
        yield from segment.batches(position)


def max_segment_ms(config: LogConfig) -> int:
    """The age at which the active segment rolls: ``segment_ms``, or ``max_compaction_lag_ms``
    when compaction is on and that is sooner (a segment must become cleanable in time)."""
    if config.compaction_enabled and config.max_compaction_lag_ms > 0:
        return min(config.max_compaction_lag_ms, config.segment_ms)
    return config.segment_ms


class _Retired:
    """A segment renamed ``.deleted`` with its transaction index and producer snapshot (the
    snapshot at its base, renamed ``.deleted`` too, or None); removed together later."""

    __slots__ = ("segment", "txn_index", "snapshot_path")

    def __init__(self, segment: Any, txn_index: TransactionIndex | None,
                 snapshot_path: str | None):
        self.segment = segment
        self.txn_index = txn_index
        self.snapshot_path = snapshot_path

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset

    def close(self) -> None:
        self.segment.close()
        if self.txn_index is not None:
            self.txn_index.close()

    def delete(self) -> None:
        self.segment.delete()
        if self.txn_index is not None:
            self.txn_index.delete()
        if self.snapshot_path is not None:
            try:
                os.remove(self.snapshot_path)
            except FileNotFoundError:
                pass


class _BackendOpener:
    """``LocalLog.backend_opener()``: one object holding the open's settings (a closure
    would hold each in a cell of its own: more objects per idle partition)."""

    __slots__ = ("segment_open", "dir_path", "read_only", "index_interval_bytes",
                 "max_index_bytes", "max_message_bytes")

    def __init__(self, segment_open: Callable[..., Any], dir_path: str, read_only: bool,
                 index_interval_bytes: int, max_index_bytes: int, max_message_bytes: int):
        self.segment_open = segment_open
        self.dir_path = dir_path
        self.read_only = read_only
        self.index_interval_bytes = index_interval_bytes
        self.max_index_bytes = max_index_bytes
        self.max_message_bytes = max_message_bytes

    def __call__(self, base_offset: int, *, create: bool = False, file_suffix: str = "") -> Any:
        return self.segment_open(
            self.dir_path, base_offset, create=create, read_only=self.read_only,
            index_interval_bytes=self.index_interval_bytes,
            max_index_bytes=self.max_index_bytes, max_message_bytes=self.max_message_bytes,
            file_suffix=file_suffix)


class LocalLog:
    """The segments of one directory in offset order, their ``.txnindex`` files, creation
    times, the recovery point and the segments waiting for deletion.

    Not thread-safe: guarded by the owning Log's lock. ``retire_snapshot(base_offset)`` renames
    the producer snapshot at ``base_offset`` to ``.deleted`` and returns its path (or None);
    it is called for every segment that leaves the chain.

    The chain holds :class:`~seglog.storage.file_cache.LazySegment` objects, whose files
    ``file_cache`` (default: the process-wide one) may close while they are idle; ``lock`` is
    the owning Log's lock, which the cache takes (without waiting) before closing one.
    """

    def __init__(self, dir_path: str, config: LogConfig, backend: Any, *, read_only: bool,
                 now_ms: int, retire_snapshot: Callable[[int], str | None],
                 file_cache: FileCache | None = None, lock: Any = None):
        self.dir_path = dir_path
        self.backend = backend
        self.file_cache = (file_cache if file_cache is not None
                           else default_file_cache(backend.Segment.open_descriptors_max))
        self.lock = lock
        self.read_only = read_only
        self.config = config
        self._roll_ms = max_segment_ms(config)
        self._retire_snapshot = retire_snapshot
        #: The chain as the writer knows it (the Log publishes it to readers).
        self.segments = SegmentMap()
        #: The times (ms) of the flushes that synced anything (LogFlushRateAndTimeMs).
        self.flush_times = MsHistogram()
        #: Every record below this offset is on disk (fsynced).
        self.recovery_point = 0
        #: ``now_ms`` of the last flush (``flush_ms`` counts from it).
        self.last_flush_ms = now_ms
        self._created_ms: dict[int, int] = {}
        self._jitter_ms: dict[int, int] = {}
        self._pending_deletes: list[tuple[int, _Retired]] = []  # (deadline_ms, retired)
        self._txn_indexes: dict[int, TransactionIndex] = {}  # by segment base offset
        self._dir_dirty = False  # a segment file was created since the directory was fsynced
        self._opener: Callable[..., Any] | None = None  # backend_opener() for this config

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` for segments opened and rolls decided from now on."""
        self.config = config
        self._roll_ms = max_segment_ms(config)
        self._opener = None  # segments opened from now on get the new limits

    @property
    def size_bytes(self) -> int:
        """Total bytes of the segments' ``.log`` files."""
        return sum(segment.size_bytes for segment in self.segments)

    # --- opening segments ------------------------------------------------------------------------

    def backend_opener(self) -> Callable[..., Any]:
        """``open(base_offset, *, create=False, file_suffix="")``: the backend Segment opened
        with this log's index limits as they are now (a segment keeps them when the cache
        closes and reopens it) and its read-only mode. One object per config, shared by the
        segments opened under it (a closure per segment would be a dozen objects more per
        partition for the garbage collector to walk).

        The segment's own batch-size check is opened wide (INT32_MAX): ``max_message_bytes``
        is the Log's rule, checked where Kafka checks it (client batches, ``append_batch``),
        not on a follower's appends (Kafka's ``appendAsFollower`` ignores it:
        ``LogTest.testMessageSizeCheckInAppendAsFollower``), and a raised
        ``max.message.bytes`` applies at once, not from the next segment on."""
        opener = self._opener
        if opener is None:
            opener = self._opener = self._new_backend_opener()
        return opener

    def _new_backend_opener(self) -> Callable[..., Any]:
        config = self.config
        return _BackendOpener(self.backend.Segment.open, self.dir_path, self.read_only,
                              config.index_interval_bytes, config.segment_index_bytes,
                              fmt.INT32_MAX)

    def _note_dir_dirty(self) -> None:
        self._dir_dirty = True

    def note_file_created(self) -> None:
        """A file was created in the directory (the Log's ``partition.metadata``) whose entry
        the next :meth:`flush` must make durable with the segments' (one directory fsync)."""
        self._dir_dirty = True

    def has_unsynced(self, end_offset: int) -> bool:
        """Whether :meth:`flush` up to ``end_offset`` has anything to sync: records at or
        above the recovery point, or a directory entry created since the last flush."""
        return end_offset > self.recovery_point or self._dir_dirty

    def lazy_segment(self, base_offset: int, *, segment: Any = None, state: tuple | None = None,
                     create: bool = False, first_open: Callable[[], Any] | None = None,
                     file_suffix: str = "") -> LazySegment:
        """The chain's entry for the segment at ``base_offset`` (see
        :class:`~seglog.storage.file_cache.LazySegment` for the arguments)."""
        return LazySegment(self.file_cache, self.lock, self.backend_opener(), self.dir_path,
                           base_offset, read_only=self.read_only, file_suffix=file_suffix,
                           segment=segment, state=state, create=create, first_open=first_open,
                           on_create=self._note_dir_dirty if create else None)

    def deferred_segment(self, base_offset: int, first_open: Callable[[], Any], *,
                         next_offset: int | None = None) -> LazySegment:
        """A loaded segment the loader did not open (``SegmentOpeners.lazy`` of ``load_segments``):
        ``first_open()`` opens it and runs the loader's deferred checks; ``next_offset``,
        when known (the last segment after a clean shutdown), is answered until then."""
        state = None if next_offset is None else (next_offset, None, None, None, None)
        return self.lazy_segment(base_offset, first_open=first_open, state=state)

    def adopt(self, segment: Any) -> LazySegment:
        """``segment`` (an open backend Segment, e.g. the cleaner's) as a chain entry."""
        if isinstance(segment, LazySegment):
            return segment
        return self.lazy_segment(segment.base_offset, segment=segment)

    def open_segment(self, base_offset: int, *, create: bool = False,
                     file_suffix: str = "") -> LazySegment:
        """The segment at ``base_offset`` (created when ``create``), opened now with this
        log's index and message limits and its read-only mode (the cache may close its files
        later)."""
        if create:
            self._dir_dirty = True
        segment = self.backend_opener()(base_offset, create=create, file_suffix=file_suffix)
        return self.lazy_segment(base_offset, segment=segment)

    def create_empty_segment(self, base_offset: int) -> LazySegment:
        """A new, empty segment at ``base_offset`` (its files must not exist) that opens
        nothing and makes its files on first use (issue 14: an idle new partition holds no
        descriptor, and creating a topic makes no segment file). Its state is known (empty);
        the caller gives the active segment's indexes their room afterwards
        (``resize_indexes``, as after every load), applied before its first append. A crash
        before its files exist leaves a directory without a segment, which the loader fills
        with an empty one again; the directory is fsynced by the first flush after the files
        were made. Same files as ``open_segment(create=True)`` once written."""
        return self.lazy_segment(base_offset, create=True,
                                 state=(base_offset, 0, -1, -1, -1))

    def probe_segment(self, base_offset: int) -> Any:
        """The segment at ``base_offset`` opened read-only, whatever this log is: the loader
        looks at its indexes as they are on disk before a writable open changes them."""
        config = self.config
        return self.backend.Segment.open(
            self.dir_path, base_offset, read_only=True,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            max_message_bytes=config.max_message_bytes)

    def set_segments(self, segments: SegmentMap, *, now_ms: int) -> None:
        """Take ``segments`` (as loaded) as the chain, each created at ``now_ms``."""
        self.segments = segments
        for segment in segments:
            self.note_created(segment.base_offset, now_ms)

    def note_created(self, base_offset: int, now_ms: int) -> None:
        """Record the segment at ``base_offset`` as created at ``now_ms``, with its roll
        jitter (time-based roll of a segment without timestamps counts from here)."""
        self._created_ms[base_offset] = now_ms
        jitter_max_ms = min(self.config.segment_jitter_ms, self.config.segment_ms)
        self._jitter_ms[base_offset] = random.randrange(jitter_max_ms) if jitter_max_ms > 0 else 0

    def _fresh_segment(self, base_offset: int, now_ms: int) -> Any:
        for path in filenames.segment_files(self.dir_path, base_offset):
            if os.path.exists(path):  # Kafka: a leftover file with the new name is deleted
                os.remove(path)
        self.drop_txn_index(base_offset)
        segment = self.open_segment(base_offset, create=True)
        segment.note_room(self.config.segment_index_bytes)
        self.note_created(base_offset, now_ms)
        return segment

    # --- transaction indexes ---------------------------------------------------------------------

    def txn_index(self, base_offset: int) -> TransactionIndex:
        """The ``.txnindex`` of the segment at ``base_offset`` (opened once; created on its
        first append). A read-only log reopens it every time: the writer may append."""
        txn_index = self._txn_indexes.get(base_offset)
        if txn_index is None:
            segment = None if self.read_only else self.segments.get(base_offset)
            if segment is not None:
                # A segment the loader deferred has its .txnindex checked (and rebuilt if
                # corrupt) by its first open: run it before the index is read.
                segment.run_deferred_checks()
            txn_index = TransactionIndex(self.dir_path, base_offset)
            if not self.read_only:
                self._txn_indexes[base_offset] = txn_index
        return txn_index

    def drop_txn_index(self, base_offset: int) -> None:
        """Close and forget the cached ``.txnindex`` of ``base_offset`` (if any)."""
        txn_index = self._txn_indexes.pop(base_offset, None)
        if txn_index is not None:
            txn_index.close()

    # --- rolling and flushing --------------------------------------------------------------------

    def roll_reason(self, active: Any, *, size_bytes: int, record_count: int,
                    max_timestamp_ms: int, now_ms: int, end_offset: int) -> str | None:
        """Why ``active`` must roll before an append of ``size_bytes`` holding
        ``record_count`` records up to ``max_timestamp_ms`` at ``end_offset`` (the segment's
        reasons, or "time"), or None."""
        reason = active.roll_reason(size_bytes, end_offset + record_count - 1,
                                    self.config.segment_bytes)
        if reason is not None or active.size_bytes == 0:
            return reason  # an empty segment never rolls on time
        first_ms = active.first_batch_timestamp_ms
        if first_ms >= 0:
            waited_ms = max_timestamp_ms - first_ms
        else:
            waited_ms = now_ms - self._created_ms.get(active.base_offset, now_ms)
        if waited_ms > self._roll_ms - self._jitter_ms.get(active.base_offset, 0):
            return "time"
        return None

    def roll(self, end_offset: int, *, now_ms: int) -> bool:
        """Start a new, empty active segment at ``end_offset``; False (nothing done) when the
        active segment is already that. The old one becomes inactive (indexes trimmed)."""
        old = self.segments.active()
        if old.base_offset == end_offset and old.size_bytes == 0:
            return False
        old.on_become_inactive()
        self.segments = self.segments.with_segment(self._fresh_segment(end_offset, now_ms))
        if _log.isEnabledFor(logging.INFO):
            _log.info("[%s] Rolled new log segment at offset %d (the previous one, at %d, "
                      "holds %d bytes)", os.path.basename(self.dir_path), end_offset,
                      old.base_offset, old.size_bytes)
        return True

    def flush(self, end_offset: int, *, now_ms: int) -> None:
        """Fsync the segments from the recovery point (and their ``.txnindex``, and the
        directory if a segment was created), then move the recovery point to ``end_offset``."""
        if self.has_unsynced(end_offset):
            started_s = time.perf_counter()
            for segment in self.segments.from_offset(self.recovery_point):
                segment.flush()
                txn_index = self._txn_indexes.get(segment.base_offset)
                if txn_index is not None:
                    txn_index.flush()
            if self._dir_dirty:
                from .checkpoints import fsync_dir

                fsync_dir(self.dir_path)
                self._dir_dirty = False
            self.recovery_point = end_offset
            # Kafka's LogFlushStats times the fsyncs of a flush that syncs anything.
            self.flush_times.observe((time.perf_counter() - started_s) * 1000.0)
        self.last_flush_ms = now_ms

    # --- removing segments -----------------------------------------------------------------------

    def _retire(self, segments: list[Any], now_ms: int) -> None:
        """Rename segments' files to ``.deleted``, with their ``.txnindex`` and the producer
        snapshot at their base; they are removed after ``file_delete_delay_ms`` by
        :meth:`delete_expired_files` (Kafka's async delete, ``deleteProducerSnapshots``). The
        chain is not changed here."""
        deadline_ms = now_ms + self.config.file_delete_delay_ms
        for segment in segments:
            segment.rename_suffix(filenames.DELETED_SUFFIX)
            base = segment.base_offset
            txn_index = self._txn_indexes.pop(base, None) or TransactionIndex(self.dir_path, base)
            txn_index.close()
            txn_index.rename_suffix(filenames.DELETED_SUFFIX)
            retired = _Retired(segment, txn_index, self._retire_snapshot(base))
            self._pending_deletes.append((deadline_ms, retired))
            self._created_ms.pop(base, None)
            self._jitter_ms.pop(base, None)

    def delete_segments(self, segments: list[Any], *, now_ms: int) -> None:
        """Take ``segments`` out of the chain and retire them (retention)."""
        self.segments = self.segments.without(s.base_offset for s in segments)
        self._retire(segments, now_ms)

    def delete_expired_files(self, *, now_ms: int) -> int:
        """Remove the files of retired segments whose ``file_delete_delay_ms`` has passed;
        returns how many segments' files were removed."""
        due = [s for deadline_ms, s in self._pending_deletes if deadline_ms <= now_ms]
        if not due:
            return 0
        for retired in due:
            retired.delete()
        self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now_ms]
        return len(due)

    def truncate_fully(self, offset: int, *, now_ms: int) -> None:
        """Retire every segment and restart the chain with an empty one at ``offset``
        (Kafka's ``truncateFullyAndStartAt``); the recovery point is lowered to ``offset``."""
        self._retire(list(self.segments), now_ms)
        self.segments = SegmentMap([self._fresh_segment(offset, now_ms)])
        self.recovery_point = min(self.recovery_point, offset)

    def truncate_to(self, offset: int, *, now_ms: int) -> None:
        """Remove every batch at or above ``offset`` (``offset`` at or above the first base
        offset): the batch holding it and all after are cut from their segment, later
        segments retired; if the cut segment does not end at ``offset`` a new active segment
        starts there. ViewsOutstandingError (nothing changed) if a live view maps bytes to
        cut. The recovery point is lowered to ``offset``."""
        segments = self.segments
        keep = segments.floor(offset)
        assert keep is not None, (offset, segments.bases)  # offset is at or above the first base
        located = keep.translate_offset(offset)
        if located is not None:
            keep.truncate_to(located[1])  # drop the batch holding offset and all after
            keep.flush()  # make the cut durable before anything is appended after it
        self.txn_index(keep.base_offset).truncate_to(offset)
        later = [s for s in segments if s.base_offset > keep.base_offset]
        self._retire(later, now_ms)
        segments = segments.without(s.base_offset for s in later)
        if keep.next_offset != offset:
            # Keep "active next offset == end offset": the records between are gone.
            if keep.size_bytes == 0:
                self._retire([keep], now_ms)
                segments = segments.without([keep.base_offset])
            else:
                keep.on_become_inactive()
            segments = segments.with_segment(self._fresh_segment(offset, now_ms))
        else:
            keep.resize_indexes(self.config.segment_index_bytes)
        self.segments = segments
        self.recovery_point = min(self.recovery_point, offset)

    def replace_segments(self, new_segment: Any, old_segments: list[Any], *, now_ms: int,
                         new_txn_index: TransactionIndex | None = None,
                         old_txn_indexes: list | None = None) -> None:
        """Put ``new_segment`` in the chain in place of ``old_segments``, whose files (the
        ``.txnindex`` included) the cleaner already renamed ``.deleted``; they are removed
        after ``file_delete_delay_ms``, with the producer snapshots at the bases of the old
        segments the new one does not replace (Kafka's ``replaceSegments``).
        ``new_txn_index``: the new segment's transaction index; ``old_txn_indexes``: the old
        segments' (renamed)."""
        segments = self.segments.without(s.base_offset for s in old_segments)
        new_segment = self.adopt(new_segment)
        self.segments = segments.with_segment(new_segment)
        for segment in old_segments:
            self._txn_indexes.pop(segment.base_offset, None)
        if new_txn_index is not None:
            self._txn_indexes[new_segment.base_offset] = new_txn_index
        deadline_ms = now_ms + self.config.file_delete_delay_ms
        old_txn_indexes = old_txn_indexes or [None] * len(old_segments)
        for segment, txn_index in zip(old_segments, old_txn_indexes):
            snapshot = None
            if segment.base_offset != new_segment.base_offset:
                snapshot = self._retire_snapshot(segment.base_offset)
            self._pending_deletes.append((deadline_ms, _Retired(segment, txn_index, snapshot)))
            if segment.base_offset != new_segment.base_offset:
                self._created_ms.pop(segment.base_offset, None)
                self._jitter_ms.pop(segment.base_offset, None)

    # --- following a writer (read-only) ----------------------------------------------------------

    def follow(self, *, now_ms: int) -> list[Any] | None:
        """Read-only: bring the chain up to the directory (segments the writer rolled, and
        removed ones dropped); returns the segments no longer in the chain, for the caller to
        close once readers no longer see them, or None (chain unchanged) when no segment is
        left on disk."""
        segments = self.segments
        on_disk = set()
        for name in os.listdir(self.dir_path):
            parsed = filenames.parse_segment_file(name)
            if parsed is not None and parsed[1] == filenames.LOG_SUFFIX and parsed[2] == "":
                on_disk.add(parsed[0])
        known = set(segments.bases)
        gone = [s for s in segments if s.base_offset not in on_disk]
        segments = segments.without(s.base_offset for s in gone)
        last_known = max(known) if known else -1
        new_bases = sorted(b for b in on_disk - known if b > last_known)
        if new_bases and last_known in on_disk:
            # The writer rolled: the previously active segment got its last batches and
            # its indexes were trimmed (shrunk). Reopen it rather than refresh it, so no
            # mapping of the old, longer index file is read past the new end (SIGBUS).
            gone.append(segments.get(last_known))
            segments = segments.with_segment(self.open_segment(last_known))
        elif last_known in on_disk:
            last_segment = segments.get(last_known)
            assert last_segment is not None, last_known  # the last segment of the map we had
            last_segment.refresh()
        for base in new_bases:
            segments = segments.with_segment(self.open_segment(base))
            self.note_created(base, now_ms)
        if not segments:
            return None  # nothing on disk any more: keep the chain as it was
        self.segments = segments
        return gone

    def release_files(self) -> None:
        """Let the file cache's bound apply to every segment now: close the files of those
        nothing holds (an idle partition then holds no descriptor)."""
        for segment in self.segments:
            segment.release_files()

    def close(self) -> None:
        """Close every segment, cached ``.txnindex`` and retired segment (whose ``.deleted``
        files the next open removes)."""
        for segment in self.segments:
            segment.close()
        for txn_index in self._txn_indexes.values():
            txn_index.close()
        for _deadline_ms, retired in self._pending_deletes:
            retired.close()
        self._pending_deletes.clear()
