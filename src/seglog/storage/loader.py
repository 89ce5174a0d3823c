"""Opening a partition directory: Kafka's ``LogLoader.load``, the path from files on disk to a
chain of segments that is safe to append to.

The log file is the only truth; indexes are derived and rebuilt whenever they are missing or
fail their sanity check. The steps, in Kafka's order (``LogLoader``):

1. **Temporary files** (``removeTempFilesAndCollectSwapFiles``): every ``*.deleted`` file is
   removed (its segment was already dropped from the log); every ``*.cleaned`` file is removed
   (a compaction that had not reached its swap step is abandoned, so the old segments stay);
   ``*.swap`` files at or above the lowest ``.cleaned`` offset are removed (an unfinished
   split); the other ``.swap`` files are kept.
2. **Swaps** are completed: the kept ``.log.swap`` segments cover ``[min swap base, max swap
   next offset)``; every ordinary segment file in that range is an old segment the swap
   replaces and is removed, then every ``.swap`` file is renamed to its final name. A crash at
   any point of the cleaner's ``.cleaned -> .swap -> final`` protocol therefore leaves either
   the old or the new data, never both or neither. Swapped-in segments get their indexes
   rebuilt.
3. **Segments** are opened in offset order. Index files without a ``.log`` are orphans and are
   removed. A segment whose ``.index`` or ``.timeindex`` is missing, or whose ``.index``,
   ``.timeindex`` or ``.txnindex`` fails its sanity check or names an offset the log does not
   hold, is recovered at once (its indexes, the transaction index included, are rebuilt from
   the log). Recovery cuts invalid bytes, so where step 4 would not run (a clean shutdown, or
   a segment below the recovery point) the segment must first read as valid to its end;
   otherwise the open raises ``CorruptSegmentError`` and cuts nothing.
4. **Recovery**, only after an unclean shutdown (no clean-shutdown marker): every segment from
   the one containing the recovery point to the end is validated batch by batch
   (``Segment.recover``: length, magic, CRC32C, offsets). The first invalid byte and everything
   after it in that segment is cut, and **every later segment is deleted** (data after a
   corrupt batch cannot be trusted to be contiguous), as Kafka's ``recoverLog`` does.
5. **Chain checks** (seglog's, not Kafka's; writer and read-only opens alike): a segment whose
   offsets reach the next segment's base offset (a raised base offset, outside the CRC), or
   that ends below the offsets its own synced indexes name while a later segment exists (its
   flushed tail was cut), is CorruptSegmentError; a gap without such proof in a log that is
   not compacted is reported (``missing_offsets``) with a warning. A log that ends below the
   checkpointed recovery point after a clean shutdown is CorruptSegmentError (Kafka silently
   takes the log end offset); after an unclean one it is reported with a warning.
6. If the last segment ends below the checkpointed log start offset, every segment is deleted;
   if no segment remains an empty one is created at the log start offset.

A read-only open changes nothing on disk: it skips steps 1, 2, 4 and 6, ignores temporary
files and opens the segments it finds read-only.

Recovering a segment is ``segment.recover()`` unless the caller passes
``SegmentOpeners.recover``: the Log does (:func:`recover_segment_and_txn_index`), to rebuild
the segment's ``.txnindex`` and producer state along with its indexes (Kafka's
``LogLoader.recoverSegment``). Producer state itself (snapshots, replay) is loaded after the
segments (:func:`load_producer_state`).

Everything removed or cut is recorded in a :class:`RecoveryReport`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from .. import filenames
from ..errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSegmentError,
    InvalidOffsetError,
    SeglogError,
)
from ..format import (
    REASON_BELOW_RECOVERY_POINT,
    REASON_CRC_MISMATCH,
    REASON_OFFSETS_NOT_INCREASING,
    REASON_OFFSETS_OUTSIDE_SEGMENT,
    REASON_SEGMENT_CUT,
    REASON_TRUNCATED,
)
from .local_log import LocalLog, batches_from
from .producer_state import ProducerStateManager, rebuild_producer_state
from .segments import SegmentMap
from .txnindex import TransactionIndex

__all__ = [
    "BASE_OFFSET_MAX",
    "LoadParams",
    "LoadResult",
    "LoadedPartition",
    "RecoveryReport",
    "SegmentOpeners",
    "Truncation",
    "check_log_start_offset",
    "load_producer_state",
    "load_segments",
    "open_partition",
    "recover_segment_and_txn_index",
]

#: ``open_segment(base_offset, *, create=False, file_suffix="") -> Segment``
OpenSegment = Callable[..., Any]
#: ``recover_segment(segment, earlier_segments) -> RecoveryResult`` (as ``Segment.recover``)
RecoverSegment = Callable[[Any, list], Any]


def _plain_recover(segment: Any, _earlier: list) -> Any:
    return segment.recover()


@dataclass(frozen=True)
class Truncation:
    """Bytes recovery cut from one segment: from ``position`` (the first invalid byte) to the
    end of the ``.log``, for ``reason`` (a ``seglog.format.REASON_*`` string)."""

    base_offset: int
    position: int
    truncated_bytes: int
    reason: str


#: The list fields of a :class:`RecoveryReport`, in order.
_REPORT_LISTS = ("recovered_segments", "truncations", "deleted_segments", "rebuilt_indexes",
                 "removed_files", "completed_swaps", "missing_offsets")


class RecoveryReport:
    """What opening a log found and changed (``Log.recovery_report``).

    * ``clean_shutdown``: the clean-shutdown marker was present, so recovery was skipped.
    * ``recovered_segments``: base offsets of the segments validated batch by batch.
    * ``truncations``: what was cut, one :class:`Truncation` per segment with invalid bytes.
    * ``deleted_segments``: base offsets of segments deleted because an earlier segment was
      corrupt, or because the log ended below its start offset.
    * ``rebuilt_indexes``: base offsets of segments whose indexes were missing or corrupt.
    * ``removed_files``: names of leftover files removed (``.deleted``, ``.cleaned``,
      unfinished ``.swap``, orphan indexes, old segments replaced by a completed swap).
    * ``completed_swaps``: names of ``.swap`` files renamed to their final names.
    * ``missing_offsets``: ``(from_offset, to_offset)`` ranges the log should hold and does
      not, found without proof enough to refuse the open (:func:`_check_chain`,
      :func:`_check_recovery_point`); each one also raised a RuntimeWarning.

    Each list is made on first use: the report of a clean open, kept by every Log, holds
    none (issue 14: 10,000 partitions' reports are 70,000 empty lists otherwise, which the
    garbage collector walks on every full pass). Keyword arguments of the same names set
    them; reports compare equal field by field.
    """

    __slots__ = ("clean_shutdown", *_REPORT_LISTS)

    clean_shutdown: bool
    recovered_segments: list[int]
    truncations: list[Truncation]
    deleted_segments: list[int]
    rebuilt_indexes: list[int]
    removed_files: list[str]
    completed_swaps: list[str]
    missing_offsets: list[tuple[int, int]]

    def __init__(self, clean_shutdown: bool = False, **lists: list) -> None:
        self.clean_shutdown = clean_shutdown
        for name, value in lists.items():
            if name not in _REPORT_LISTS:
                raise TypeError(f"RecoveryReport() got an unexpected keyword argument {name!r}")
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Called only for a list not made yet (an unset slot): make it now.
        if name in _REPORT_LISTS:
            value: list = []
            setattr(self, name, value)
            return value
        raise AttributeError(f"'RecoveryReport' object has no attribute {name!r}")

    def _peek(self, name: str) -> list | tuple:
        """The list ``name`` if it was made, else an empty tuple (makes nothing)."""
        try:
            return object.__getattribute__(self, name)
        except AttributeError:
            return ()

    def _fields(self) -> tuple:
        return (self.clean_shutdown, *(list(self._peek(name)) for name in _REPORT_LISTS))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecoveryReport):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it was

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in
                           zip(("clean_shutdown", *_REPORT_LISTS), self._fields()))
        return f"RecoveryReport({fields})"

    @property
    def truncated_bytes(self) -> int:
        """Total bytes cut from segment files by recovery (not counting deleted segments)."""
        return sum(t.truncated_bytes for t in self._peek("truncations"))

    @property
    def lost_data(self) -> bool:
        """True when recovery cut bytes or deleted segments, or offsets are missing."""
        peek = self._peek
        return bool(peek("truncations") or peek("deleted_segments") or peek("missing_offsets"))


@dataclass
class LoadResult:
    """Segments in offset order (the last is active) and the report of what loading did."""

    segments: list[Any]
    report: RecoveryReport


def _list(dir_path: str, names: list[str] | None = None) -> list[tuple[str, int, str, str]]:
    """Our segment-like files in ``dir_path`` as ``(name, offset, suffix, state_suffix)``;
    ``names``: its listing, made just now by the caller."""
    out = []
    for name in sorted(os.listdir(dir_path) if names is None else names):
        parsed = filenames.parse_segment_file(name)
        if parsed is not None:
            out.append((name, *parsed))
    return out


def _remove(dir_path: str, name: str, report: RecoveryReport) -> None:
    try:
        os.remove(os.path.join(dir_path, name))
    except FileNotFoundError:
        return
    report.removed_files.append(name)


def _remove_temp_files(dir_path: str, report: RecoveryReport,
                       listing: list[tuple[str, int, str, str]]) -> list[tuple[str, int, str]]:
    """Step 1 over ``listing`` (:func:`_list`); returns the ``.swap`` files to complete as
    ``(name, offset, suffix)``."""
    cleaned_offsets, swaps = [], []
    for name, offset, suffix, state in listing:
        if state == filenames.DELETED_SUFFIX:
            _remove(dir_path, name, report)
        elif state == filenames.CLEANED_SUFFIX:
            cleaned_offsets.append(offset)
            _remove(dir_path, name, report)
        elif state == filenames.SWAP_SUFFIX:
            swaps.append((name, offset, suffix))
    min_cleaned = min(cleaned_offsets, default=None)
    kept = []
    for name, offset, suffix in swaps:
        if min_cleaned is not None and offset >= min_cleaned:
            _remove(dir_path, name, report)  # part of a split that never finished
        else:
            kept.append((name, offset, suffix))
    return kept


def _complete_swaps(dir_path: str, swaps: list[tuple[str, int, str]], open_segment: OpenSegment,
                    report: RecoveryReport) -> set[int]:
    """Step 2; returns the base offsets of the swapped-in segments."""
    log_swaps = sorted(offset for _, offset, suffix in swaps if suffix == filenames.LOG_SUFFIX)
    if log_swaps:
        max_next_offset = log_swaps[0]
        for base in log_swaps:
            segment = open_segment(base, file_suffix=filenames.SWAP_SUFFIX)
            try:
                max_next_offset = max(max_next_offset, segment.next_offset)
            finally:
                segment.close()
        for name, offset, _suffix, state in _list(dir_path):
            if state == "" and log_swaps[0] <= offset < max_next_offset:
                _remove(dir_path, name, report)
    # List again: opening a swap segment may have created its missing index files.
    for name, _offset, _suffix, state in _list(dir_path):
        if state == filenames.SWAP_SUFFIX:
            final = name[: -len(filenames.SWAP_SUFFIX)]
            os.replace(os.path.join(dir_path, name), os.path.join(dir_path, final))
            report.completed_swaps.append(name)
    return set(log_swaps)


def _first_invalid(segment: Any) -> tuple[int, str] | None:
    """``(position, reason)`` of the first invalid byte of the segment's ``.log``, or None
    when it is valid batches from its first byte to its last (length, magic, CRC32C, base
    offsets increasing from the segment's base). Reads only: the check made before
    rebuilding the indexes of a segment whose bytes recovery may not cut."""
    end, previous_next = 0, segment.base_offset
    try:
        for batch in segment.batches():
            if batch.base_offset < previous_next:
                return end, REASON_OFFSETS_NOT_INCREASING
            if not batch.is_valid():
                return end, REASON_CRC_MISMATCH
            previous_next = batch.next_offset
            end += batch.size_bytes
    except CorruptRecordError as e:
        return end, e.reason
    return None if end == segment.size_bytes else (end, REASON_TRUNCATED)


def _open_checked(dir_path: str, base: int, open_segment: OpenSegment, force_rebuild: bool,
                  report: RecoveryReport, recover: RecoverSegment,
                  earlier: list, may_truncate: bool, cut_evidence: set[int],
                  next_base: int | None, compacted: bool,
                  probe_segment: OpenSegment | None,
                  indexed: bool | None = None,
                  txn_indexed: bool | None = None) -> tuple[Any, bool, bool]:
    """Step 3 for one segment: open it and rebuild its indexes when they cannot be trusted.

    Rebuilding runs the segment's recovery, which cuts invalid bytes; it may do so only
    where recovery after an unclean shutdown would (``may_truncate``). Elsewhere the
    segment is first checked without changes (:func:`_first_invalid`), and one with invalid
    bytes raises CorruptSegmentError naming it: its records stay on disk, untouched, rather
    than being cut without a crash to explain it (Kafka's rule: only what was not flushed
    before an unclean shutdown is truncated).

    The base offset goes into ``cut_evidence`` when the indexes, before any rebuild, name an
    offset or position the ``.log`` does not reach (:func:`_names_past_log`).

    ``indexed``: whether both index files exist, when the caller's listing says so (None:
    asked of the file system). ``txn_indexed``: whether its ``.txnindex`` exists, likewise
    (False: there is none to check; None: it is read, and a missing one holds nothing).

    Returns ``(segment, recovered, truncated)``: whether it was validated here, and whether
    that cut bytes.
    """
    if next_base is not None and probe_segment is not None:
        _probe(probe_segment, base, next_base, compacted)
    index_paths = (filenames.index_file(dir_path, base), filenames.time_index_file(dir_path, base))
    rebuild = force_rebuild or not (indexed if indexed is not None
                                    else all(os.path.exists(p) for p in index_paths))
    try:
        segment = open_segment(base)
    except (CorruptIndexError, CorruptRecordError, InvalidOffsetError):
        # An index pointing outside the log can fail the open itself: start from no index.
        for path in index_paths:
            if os.path.exists(path):
                os.remove(path)
        segment = open_segment(base)
        rebuild = True
    # The segment may know better (an index entry pointing past the log, for one).
    rebuild = rebuild or segment.indexes_need_rebuild
    if not rebuild or segment.indexes_need_rebuild:
        if _names_past_log(segment):
            cut_evidence.add(base)
    if next_base is not None:
        # Before anything is rebuilt: the indexes are the proof of a cut (_check_chain), and
        # a refused open must leave it for the next one.
        try:
            _check_pair(segment, next_base, compacted=compacted, cut_evidence=cut_evidence,
                        report=None)
        except BaseException:
            _close_all([segment])
            raise
    if not rebuild:
        try:
            segment.offset_index.sanity_check()
            segment.time_index.sanity_check()
            if txn_indexed is not False:
                TransactionIndex(dir_path, base).sanity_check()
            rebuild = _indexes_past_log(segment)
        except CorruptIndexError:
            rebuild = True
    if not rebuild:
        return segment, False, False
    invalid = None if may_truncate else _first_invalid(segment)
    if invalid is not None:
        path = segment.log_path
        try:
            segment.close()
        except SeglogError:
            # Segment.close writes a final time-index entry, which a stale index can refuse;
            # the error to report is the corruption below.
            pass
        raise CorruptSegmentError(
            f"segment {path} has indexes that must be rebuilt and invalid bytes at position "
            f"{invalid[0]} ({invalid[1]}), which only recovery after an unclean shutdown may "
            "cut; its files were left as they are", reason=invalid[1], position=invalid[0],
            path=path, base_offset=base)
    result = recover(segment, earlier)
    report.rebuilt_indexes.append(base)
    if result.truncated_bytes:
        report.truncations.append(
            Truncation(base, result.position, result.truncated_bytes, result.reason))
    return segment, True, result.truncated_bytes > 0


def _probe(probe_segment: OpenSegment, base: int, next_base: int, compacted: bool) -> None:
    """The errors of :func:`_check_pair` for the segment at ``base``, seen through a
    read-only open that changes no file. A writer's open resizes the indexes and drops
    entries past the log, and its close trims them: the proof of a cut would be gone after
    the first refused open, and the next open would only warn. Indexes a read-only open
    cannot even read prove nothing here (the writable open rebuilds them)."""
    try:
        probe = probe_segment(base)
    except (CorruptIndexError, CorruptRecordError, InvalidOffsetError):
        return
    try:
        evidence = {base} if _names_past_log(probe) else set()
        _check_pair(probe, next_base, compacted=compacted, cut_evidence=evidence, report=None)
    finally:
        _close_all([probe])


def _names_past_log(segment: Any) -> bool:
    """True when the segment's indexes (well-formed enough to have been opened) name an
    offset at or above its scanned ``next_offset`` or a position at or past the end of its
    ``.log``, or the segment found such an entry itself (``indexes_need_rebuild``). The
    indexes of a segment that has a later one were synced when it rolled, so this is proof
    that its ``.log`` lost batches afterwards. Never raises on bad index bytes (False)."""
    if segment.indexes_need_rebuild:
        return True
    try:
        next_offset = segment.next_offset
        offset_index = segment.offset_index
        if offset_index.entries:
            last_offset, last_position = offset_index.entry(offset_index.entries - 1)
            if last_offset >= next_offset or last_position >= segment.size_bytes:
                return True
        time_index = segment.time_index
        if time_index.entries and time_index.last_entry()[1] >= next_offset:
            return True
    except (CorruptIndexError, CorruptRecordError, InvalidOffsetError):
        return False
    return False


def _ends_at_a_batch(segment: Any) -> bool:
    """True when the segment's ``.log`` file ends exactly after its last readable batch (no
    torn or unparseable bytes after it, which the read path reports itself). The file size
    is asked of the file system: a read-only segment shows whole batches only."""
    try:
        file_bytes = os.path.getsize(segment.log_path)
        if segment.next_offset <= segment.base_offset:
            return file_bytes == 0
        last = segment.translate_offset(segment.next_offset - 1)
    except (CorruptRecordError, InvalidOffsetError, OSError):
        return False
    return last is not None and last[0] + last[2] == segment.size_bytes == file_bytes


def _first_position_reaching(segment: Any, bound: int) -> int:
    """Position in ``segment``'s ``.log`` of its first batch whose offsets reach ``bound``
    (the ``.log`` size if none can be found by a header walk)."""
    position = 0
    try:
        for batch in segment.batches():
            if batch.next_offset > bound:
                return position
            position += batch.size_bytes
    except CorruptRecordError:
        pass
    return position



def _check_loaded(segments: list, *, compacted: bool, cut_evidence: set, report: RecoveryReport,
                  recovery_point: int, clean_shutdown: bool,
                  deferred: frozenset[int] | set[int] = frozenset()) -> None:
    """The checks of a loaded segment chain, for reader and writer opens alike: the chain
    (:func:`_check_chain`) and the log end against the recovery point
    (:func:`_check_recovery_point`). Segments in ``deferred`` are checked on their first
    open instead (:func:`load_segments`)."""
    _check_chain(segments, compacted=compacted, cut_evidence=cut_evidence, report=report,
                 deferred=deferred)
    _check_recovery_point(segments, recovery_point=recovery_point,
                          clean_shutdown=clean_shutdown, report=report)


def _check_chain(segments: list, *, compacted: bool, cut_evidence: set[int],
                 report: RecoveryReport, deferred: frozenset[int] | set[int] = frozenset()) -> None:
    """Each segment's offsets must end where the next segment begins (Kafka rolls at the log
    end offset).

    * **Overlap** (a segment's scanned ``next_offset`` above the next segment's base offset):
      one of its batches has a raised base offset (outside the CRC): CorruptSegmentError
      (``REASON_OFFSETS_OUTSIDE_SEGMENT``) naming the segment and the batch's position.
      Nothing is cut: which of the overlapping offsets are right cannot be told.
    * **Gap** (``next_offset`` below the next base offset) with proof (the segment's own
      indexes, synced when it rolled, name offsets or positions past its ``.log``): batches
      flushed long ago were cut off. CorruptSegmentError (``REASON_SEGMENT_CUT``), after a
      clean shutdown or not, writer or reader: recovery after a crash cuts only unflushed
      bytes of the tail, and a segment that has a later one was flushed when it rolled, so
      this is not a torn write recovery may repair. The files are left as they are.
    * **Gap** without proof, in a log whose ``cleanup.policy`` does not include compact: the
      offsets may have been lost (a ``.log`` cut at a batch boundary after a segment too small
      for an offset-index entry), or the log may have been compacted before its policy
      changed to delete, which leaves gaps legitimately. Refusing the open would make such a
      log unopenable, so the range is recorded in ``report.missing_offsets`` with a
      RuntimeWarning instead: reported, never silent. In a compacted log gaps are normal.

    A gap in a segment whose bytes go on after its last readable batch (a torn or
    unparseable batch below its end) is left to the read path, which hands out the records
    before those bytes and then raises CorruptRecordError there (``REASON_TRUNCATED``,
    ``REASON_UNREADABLE_BATCH``); a writer's open has already refused or recovered it.
    """
    for segment, following in zip(segments, segments[1:]):
        if segment.base_offset in deferred:
            continue
        _check_pair(segment, following.base_offset, compacted=compacted,
                    cut_evidence=cut_evidence, report=report)


def _check_pair(segment: Any, next_base: int, *, compacted: bool, cut_evidence: set[int],
                report: RecoveryReport | None) -> None:
    """:func:`_check_chain` for one segment and the next segment's base offset; with
    ``report=None`` only the errors are checked (no gap is reported)."""
    next_offset = segment.next_offset
    if next_offset > next_base:
        position = _first_position_reaching(segment, next_base)
        raise CorruptSegmentError(
            f"segment {segment.log_path} holds offsets up to {next_offset - 1}, at or above "
            f"the next segment's base offset {next_base}: the batch at position "
            f"{position} has a corrupt base offset (outside the CRC); its files were left "
            "as they are", reason=REASON_OFFSETS_OUTSIDE_SEGMENT, position=position,
            path=segment.log_path, base_offset=segment.base_offset)
    if next_offset < next_base and _ends_at_a_batch(segment):
        if segment.base_offset in cut_evidence:
            raise CorruptSegmentError(
                f"segment {segment.log_path} ends at offset {next_offset} (position "
                f"{segment.size_bytes}) but its indexes, synced when it rolled, name later "
                f"offsets or positions and the next segment starts at {next_base}: "
                f"offsets {next_offset}..{next_base - 1} were flushed and are gone; its "
                "files were left as they are", reason=REASON_SEGMENT_CUT,
                position=segment.size_bytes, path=segment.log_path,
                base_offset=segment.base_offset)
        if not compacted and report is not None:
            report.missing_offsets.append((next_offset, next_base))
            warnings.warn(
                f"seglog: segment {segment.log_path} ends at offset {next_offset} and the "
                f"next segment starts at {next_base}: offsets {next_offset}.."
                f"{next_base - 1} are missing from a log that is not compacted (lost, "
                "or compacted before cleanup.policy changed)", RuntimeWarning, stacklevel=4)


def _check_recovery_point(segments: list, *, recovery_point: int, clean_shutdown: bool,
                          report: RecoveryReport) -> None:
    """The log must reach its checkpointed recovery point: everything below it was flushed.

    Kafka (``LogLoader.recoverLog``) takes the log end offset as the recovery point after a
    clean shutdown and ``min(checkpoint, log end)`` otherwise, silently; seglog is stricter.
    After a clean shutdown the checkpoint was written at close with the final log end offset,
    so a log ending below it lost flushed records (or the checkpoint is wrong; the segment is
    the likelier culprit and is what is named): CorruptSegmentError
    (``REASON_BELOW_RECOVERY_POINT``), nothing changed. After an unclean shutdown a
    truncation (``truncate_to``) that crashed before its checkpoint was saved leaves the same
    picture legitimately, so the range is reported in ``report.missing_offsets`` with a
    RuntimeWarning (unless recovery's own truncations and deletions already report it)."""
    if not segments:
        return
    last = segments[-1]
    end = last.next_offset
    if end >= recovery_point:
        return
    if clean_shutdown:
        raise CorruptSegmentError(
            f"the log ends at offset {end} ({last.log_path}, position {last.size_bytes}) "
            f"after a clean shutdown, below its checkpointed recovery point {recovery_point}: "
            f"offsets {end}..{recovery_point - 1} were flushed and are gone (or the "
            "recovery-point checkpoint is wrong); the files were left as they are",
            reason=REASON_BELOW_RECOVERY_POINT, position=last.size_bytes,
            path=last.log_path, base_offset=last.base_offset)
    if report._peek("truncations") or report._peek("deleted_segments"):
        return
    report.missing_offsets.append((end, recovery_point))
    warnings.warn(
        f"seglog: the log {os.path.dirname(last.log_path)} ends at offset {end}, below its "
        f"checkpointed recovery point {recovery_point}: offsets {end}..{recovery_point - 1} "
        "are missing (lost, or a truncation crashed before its checkpoint)",
        RuntimeWarning, stacklevel=4)


def _close_all(segments: list) -> None:
    for segment in segments:
        try:
            segment.close()
        except SeglogError:
            pass  # closing while failing: the first error is the one to raise


def _indexes_past_log(segment: Any) -> bool:
    """True when an index entry names an offset the ``.log`` does not hold (offset at or past
    ``next_offset``) or a position past its end: the log was cut (by hand, by a copy, by a
    file system) after the indexes were written. Kafka's sanity checks look at the index
    files alone; trusting such an entry made the time index refuse the final entry of the
    next close (its offset would go backwards), so ``close()`` failed and never wrote the
    clean-shutdown marker. The indexes are rebuilt from the log instead."""
    next_offset = segment.next_offset
    offset_index = segment.offset_index
    if offset_index.entries:
        last_offset, last_position = offset_index.entry(offset_index.entries - 1)
        if last_offset >= next_offset or not 0 <= last_position < segment.size_bytes:
            return True
    time_index = segment.time_index
    if time_index.entries:
        last_offset = time_index.last_entry()[1]
        if last_offset >= next_offset:
            return True
        # The segment's largest timestamp (from the index and the headers after the last
        # offset-index entry) must be at or after the index's last entry: a header whose
        # max timestamp was changed puts it earlier, and the final entry of the next roll or
        # close would go backwards.
        if 0 <= segment.offset_of_max_timestamp < last_offset:
            return True
    return False


class _FirstOpen:
    """The first open of a segment :func:`load_segments` deferred: ``first_open()`` runs
    :meth:`_DeferredChecks.open_earlier` (a segment with a later one at ``next_base``) or
    :meth:`_DeferredChecks.open_last` (the last, taken to end at ``log_end_offset``). One
    small object per segment rather than closures: a loaded idle partition is a few objects
    (issue 14: 10,000 of them are loaded at once, and the garbage collector walks every
    object they keep)."""

    __slots__ = ("checks", "base", "next_base", "log_end_offset")

    def __init__(self, checks: "_DeferredChecks", base: int, next_base: int | None,
                 log_end_offset: int | None = None):
        self.checks = checks
        self.base = base
        self.next_base = next_base
        self.log_end_offset = log_end_offset

    def __call__(self) -> Any:
        if self.next_base is None:
            assert self.log_end_offset is not None
            return self.checks.open_last(self.base, self.log_end_offset)
        return self.checks.open_earlier(self.base, self.next_base)


class _DeferredChecks:
    """Steps 3 and 5 of the segments :func:`load_segments` deferred (one per partition,
    shared by their :class:`_FirstOpen`)."""

    __slots__ = ("dir_path", "open_backend", "report", "recover", "segments", "compacted",
                 "probe_segment")

    def __init__(self, dir_path: str, open_backend: OpenSegment, report: RecoveryReport,
                 recover: RecoverSegment, segments: list, compacted: bool,
                 probe_segment: OpenSegment | None):
        self.dir_path = dir_path
        self.open_backend = open_backend
        self.report = report
        self.recover = recover
        self.segments = segments  # the loader's list: the chain as loaded
        self.compacted = compacted
        self.probe_segment = probe_segment

    def _open(self, base: int, following: int | None, evidence: set[int]) -> Any:
        earlier = [s for s in self.segments if s.base_offset < base and not s.closed]
        segment, _recovered, _truncated = _open_checked(
            self.dir_path, base, self.open_backend, False, self.report, self.recover, earlier,
            may_truncate=False, cut_evidence=evidence, next_base=following,
            compacted=self.compacted, probe_segment=self.probe_segment)
        return segment

    def open_earlier(self, base: int, following: int) -> Any:
        """The first open of the segment at ``base``, which has a later one at
        ``following``: step 3 and the chain checks of step 5, as an eager open."""
        evidence: set[int] = set()
        segment = self._open(base, following, evidence)
        try:
            _check_pair(segment, following, compacted=self.compacted, cut_evidence=evidence,
                        report=self.report)
        except BaseException:
            _close_all([segment])
            raise
        return segment

    def open_last(self, base: int, log_end_offset: int) -> Any:
        """The first open of the last segment, which the log took to end at
        ``log_end_offset``: step 3, then it must end exactly there (``load_segments``)."""
        segment = self._open(base, None, set())
        try:
            next_offset = segment.next_offset
            if next_offset < log_end_offset:
                raise CorruptSegmentError(
                    f"the log ends at offset {next_offset} ({segment.log_path}, position "
                    f"{segment.size_bytes}) after a clean shutdown, below its checkpointed "
                    f"recovery point {log_end_offset}: offsets {next_offset}.."
                    f"{log_end_offset - 1} were flushed and are gone (or the recovery-point "
                    "checkpoint is wrong); the files were left as they are",
                    reason=REASON_BELOW_RECOVERY_POINT, position=segment.size_bytes,
                    path=segment.log_path, base_offset=base)
            if next_offset > log_end_offset:
                position = _first_position_reaching(segment, log_end_offset)
                raise CorruptSegmentError(
                    f"segment {segment.log_path} holds offsets up to {next_offset - 1}, at or "
                    f"above the log end offset {log_end_offset} checkpointed at the clean "
                    f"shutdown: the batch at position {position} was not written by this "
                    "log or has a corrupt base offset (outside the CRC); its files were left "
                    "as they are", reason=REASON_OFFSETS_OUTSIDE_SEGMENT, position=position,
                    path=segment.log_path, base_offset=base)
        except BaseException:
            _close_all([segment])
            raise
        return segment


@dataclass(frozen=True, kw_only=True, slots=True)
class SegmentOpeners:
    """How :func:`load_segments` opens, recovers and creates a segment (the Log passes its
    :class:`~seglog.storage.local_log.LocalLog`'s); only ``open`` is required.

    ``open(base, create=False, file_suffix="")`` opens one segment with the log's settings.
    ``recover(segment, earlier_segments)`` recovers one segment (None: ``segment.recover()``);
    ``earlier_segments`` are the segments before it, already loaded. ``probe(base)`` opens a
    segment read-only (no file changed, not even by its close): a writer's open checks each
    segment that has a later one through it first (:func:`_probe`). ``create(base)`` makes the
    empty segment of a log left without one (None: ``open(base, create=True)``; the Log passes
    ``LocalLog.create_empty_segment``). ``lazy(base, first_open)`` with ``open_backend`` (the
    backend's own open) defers segments to their first use (lazy loading, below).
    """

    open: OpenSegment
    recover: RecoverSegment | None = None
    probe: OpenSegment | None = None
    create: Callable[[int], Any] | None = None
    open_backend: OpenSegment | None = None
    lazy: Callable[..., Any] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadParams:
    """What :func:`load_segments` loads: the partition directory, what the checkpoints say of
    it, and the log's settings.

    ``recovery_point`` and ``log_start_offset`` come from the checkpoints (0 when there are
    none); ``clean_shutdown``: the clean-shutdown marker was there. ``read_only``: change
    nothing on disk. ``compacted``: the log's cleanup.policy includes compact, so gaps between
    segments are normal. ``listing``: ``os.listdir(dir_path)`` made just now by the caller
    (who shares it with the producer state), instead of listing the directory again.
    ``log_end_offset``: the end offset the checkpoints promise (after a clean shutdown the
    recovery point, which the close that wrote the marker moved to the log end offset), or
    None when there is none (see lazy loading in :func:`load_segments`).
    """

    dir_path: str
    recovery_point: int
    log_start_offset: int
    clean_shutdown: bool
    read_only: bool = False
    compacted: bool = False
    listing: list[str] | None = None
    log_end_offset: int | None = None


@dataclass
class _Loading:
    """One writer's load in progress, passed from step to step of :func:`load_segments`."""

    params: LoadParams
    openers: SegmentOpeners
    report: RecoveryReport
    recover: RecoverSegment
    #: ``(name, offset, suffix)`` of the directory's segment files once step 2 is done.
    entries: list[tuple[str, int, str]] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)  # of the .log files, in order
    swapped: set[int] = field(default_factory=set)  # bases of segments a swap put in place
    indexed: dict[int, int] = field(default_factory=dict)  # base -> how many of .index, .timeindex
    txn_indexed: set[int] = field(default_factory=set)  # bases with a .txnindex
    deferred: set[int] = field(default_factory=set)  # bases opened on first use
    deferred_end: int | None = None  # the promised end, when the last segment is deferred
    segments: list = field(default_factory=list)
    checked: dict[int, bool] = field(default_factory=dict)  # recovered in step 3: truncated?
    cut_evidence: set[int] = field(default_factory=set)


def load_segments(params: LoadParams, openers: SegmentOpeners) -> LoadResult:
    """Open every segment of ``params.dir_path`` following Kafka's load sequence (module
    docstring), one named step each: :func:`_load_read_only` for a read-only open, else
    :func:`_clean_up_temp_files` (steps 1 and 2), :func:`_take_inventory`,
    :func:`_plan_lazy_segments`, :func:`_open_segments` (3),
    :func:`_recover_unclean_shutdown` (4), :func:`_check_loaded` (5) and
    :func:`_ensure_a_segment` (6).

    Returns the segments in offset order, never empty for a writer. Raises ``OSError`` from
    the file system. Bad bytes in segments recovery covers (unclean shutdown, from the
    recovery point) are cut and reported; a segment elsewhere whose indexes must be rebuilt
    and whose bytes are not all valid raises CorruptSegmentError (nothing is cut there). After
    the segments are loaded (and recovered), the chain is checked (:func:`_check_chain`:
    overlapping segments, and cut ones, are CorruptSegmentError) and the log must reach
    ``recovery_point`` (:func:`_check_recovery_point`); a read-only open checks both too. The
    Log resizes the active segment's indexes after loading.

    Lazy loading (issue 14): with ``openers.lazy`` and ``openers.open_backend``, a writer's
    open after a clean shutdown opens at most the last segment (none with
    ``params.log_end_offset``, below). Every earlier one whose ``.index`` and ``.timeindex``
    exist becomes ``lazy(base, first_open)``, an entry that opens no file until it is used;
    ``first_open()`` then runs this segment's step 3 and 5 exactly as an eager open would (the
    read-only probe, the index checks and a rebuild of a segment valid to its end, the chain
    checks against the next segment's base offset as loaded, a gap reported in the report with
    a warning) and raises CorruptSegmentError for a segment an eager open would have refused,
    from the first read or other use of that segment instead of from the open. Nothing else
    changes: after a clean shutdown step 4 does not run, and no file of such a segment is
    changed before its first open.

    With ``params.log_end_offset`` the last segment is deferred as well, when its indexes
    exist and it can hold that end (its base offset at or below it, the end at or above the
    log start offset): ``lazy(base, first_open, next_offset=log_end_offset)`` answers the end
    offset without opening a file, and its ``first_open()`` runs its step 3 and then checks
    that it really ends there: CorruptSegmentError (``REASON_BELOW_RECOVERY_POINT`` if it ends
    below, as :func:`_check_recovery_point` at open; ``REASON_OFFSETS_OUTSIDE_SEGMENT`` if it
    holds offsets at or past it) from its first use, nothing cut. Kafka opens the active
    segment at load (``readNextOffset`` reads its offset index and the ``.log`` after its last
    entry); seglog does not, so an idle partition costs no file open at all (docs/design.md §7).
    """
    report = RecoveryReport(clean_shutdown=params.clean_shutdown)
    if params.read_only:
        return _load_read_only(params, openers, report)
    loading = _Loading(params=params, openers=openers, report=report,
                       recover=openers.recover or _plain_recover)
    _clean_up_temp_files(loading)
    _take_inventory(loading)
    _plan_lazy_segments(loading)
    _open_segments(loading)
    if not params.clean_shutdown and loading.segments:
        _recover_unclean_shutdown(loading)
    try:
        _check_loaded(loading.segments, compacted=params.compacted,
                      cut_evidence=loading.cut_evidence, report=report,
                      recovery_point=params.recovery_point,
                      clean_shutdown=params.clean_shutdown, deferred=loading.deferred)
    except BaseException:
        _close_all(loading.segments)
        raise
    _ensure_a_segment(loading)
    return LoadResult(loading.segments, report)


def _load_read_only(params: LoadParams, openers: SegmentOpeners,
                    report: RecoveryReport) -> LoadResult:
    """A read-only open: the segments found, opened read-only, and the checks of step 5;
    temporary files are ignored and nothing on disk changes."""
    bases = sorted(offset for _, offset, suffix, state in _list(params.dir_path, params.listing)
                   if suffix == filenames.LOG_SUFFIX and state == "")
    segments: list = []
    try:
        for base in bases:
            segments.append(openers.open(base))
        evidence = {s.base_offset for s in segments[:-1] if _names_past_log(s)}
        _check_loaded(segments, compacted=params.compacted, cut_evidence=evidence,
                      report=report, recovery_point=params.recovery_point,
                      clean_shutdown=params.clean_shutdown)
    except BaseException:
        _close_all(segments)
        raise
    return LoadResult(segments, report)


def _clean_up_temp_files(loading: _Loading) -> None:
    """Steps 1 and 2: remove temporary files (:func:`_remove_temp_files`), complete the kept
    swaps (:func:`_complete_swaps`), and list the directory again if anything changed; sets
    ``loading.entries`` (the segment files without a state suffix) and ``loading.swapped``."""
    dir_path, report = loading.params.dir_path, loading.report
    listing = _list(dir_path, loading.params.listing)
    swaps = _remove_temp_files(dir_path, report, listing)
    if swaps:
        loading.swapped = _complete_swaps(dir_path, swaps, loading.openers.open, report)
    if swaps or report._peek("removed_files"):
        listing = _list(dir_path)  # files were renamed or removed: list again
    loading.entries = [(name, offset, suffix) for name, offset, suffix, state in listing
                       if state == ""]


def _take_inventory(loading: _Loading) -> None:
    """The segments' base offsets and which index files each has; index files without a
    ``.log`` are orphans and are removed (step 3's first part)."""
    entries = loading.entries
    bases = sorted({offset for _, offset, suffix in entries if suffix == filenames.LOG_SUFFIX})
    base_set = set(bases)
    for name, offset, suffix in entries:
        if suffix in (filenames.INDEX_SUFFIX, filenames.TIME_INDEX_SUFFIX,
                      filenames.TXN_INDEX_SUFFIX) and offset not in base_set:
            _remove(loading.params.dir_path, name, loading.report)
    for _name, offset, suffix in entries:
        if suffix in (filenames.INDEX_SUFFIX, filenames.TIME_INDEX_SUFFIX):
            loading.indexed[offset] = loading.indexed.get(offset, 0) + 1
        elif suffix == filenames.TXN_INDEX_SUFFIX:
            loading.txn_indexed.add(offset)
    loading.bases = bases


def _plan_lazy_segments(loading: _Loading) -> None:
    """Which segments open on first use (lazy loading, :func:`load_segments`): after a clean
    shutdown, each with both indexes that no swap put in place; the last one only when the
    checkpoints promise an end it can hold."""
    params, openers = loading.params, loading.openers
    bases, indexed = loading.bases, loading.indexed
    if openers.lazy is None or openers.open_backend is None or not params.clean_shutdown \
            or not bases:
        return
    swapped = loading.swapped
    loading.deferred = {b for b in bases[:-1] if indexed.get(b) == 2 and b not in swapped}
    last, log_end_offset = bases[-1], params.log_end_offset
    if (log_end_offset is not None and indexed.get(last) == 2 and last not in swapped
            and last <= log_end_offset and log_end_offset >= params.log_start_offset):
        loading.deferred.add(last)
        loading.deferred_end = log_end_offset


def _open_segments(loading: _Loading) -> None:
    """Step 3: open each segment in offset order (:func:`_open_checked`: its indexes checked,
    rebuilt when missing or failing; a segment step 4 would validate may be cut here), or
    make a lazy entry of a deferred one. Closes what it opened on any error."""
    params, openers, segments = loading.params, loading.openers, loading.segments
    checks = None
    if loading.deferred:
        assert openers.lazy is not None and openers.open_backend is not None
        checks = _DeferredChecks(params.dir_path, openers.open_backend, loading.report,
                                 loading.recover, segments, params.compacted, openers.probe)
    # Step 4 will validate (and may cut) the segments from the one holding the recovery point.
    bases = loading.bases
    recovery_floor = max((b for b in bases if b <= params.recovery_point), default=0)
    try:
        for base, following in zip(bases, [*bases[1:], None]):
            if base in loading.deferred:
                assert checks is not None and openers.lazy is not None
                if following is None:
                    segments.append(openers.lazy(
                        base, _FirstOpen(checks, base, None, loading.deferred_end),
                        next_offset=loading.deferred_end))
                else:
                    segments.append(openers.lazy(base, _FirstOpen(checks, base, following)))
                continue
            segment, recovered, truncated = _open_checked(
                params.dir_path, base, openers.open, base in loading.swapped, loading.report,
                loading.recover, segments,
                may_truncate=not params.clean_shutdown and base >= recovery_floor,
                cut_evidence=loading.cut_evidence, next_base=following,
                compacted=params.compacted, probe_segment=openers.probe,
                indexed=loading.indexed.get(base) == 2, txn_indexed=base in loading.txn_indexed)
            segments.append(segment)
            if recovered:
                loading.checked[base] = truncated
    except BaseException:
        _close_all(segments)
        raise


def _recover_unclean_shutdown(loading: _Loading) -> None:
    """Step 4, after an unclean shutdown: validate every segment from the one holding the
    recovery point (``recover``; those step 3 recovered already count as done); at the first
    one cut, delete every later segment (Kafka's ``recoverLog``)."""
    segments, report = loading.segments, loading.report
    first = 0
    for i, segment in enumerate(segments):  # the floor segment of the recovery point
        if segment.base_offset <= loading.params.recovery_point:
            first = i
    for i in range(first, len(segments)):
        segment = segments[i]
        report.recovered_segments.append(segment.base_offset)
        if segment.base_offset in loading.checked:  # validated in step 3 already
            truncated = loading.checked[segment.base_offset]
        else:
            result = loading.recover(segment, segments[:i])
            truncated = result.truncated_bytes > 0
            if truncated:
                report.truncations.append(Truncation(segment.base_offset, result.position,
                                                     result.truncated_bytes, result.reason))
        if truncated:
            for later in segments[i + 1:]:
                report.deleted_segments.append(later.base_offset)
                later.delete()
            del segments[i + 1:]
            break


def _ensure_a_segment(loading: _Loading) -> None:
    """Step 6: if the last segment ends below the log start offset every segment is deleted;
    a log left without a segment gets an empty one at the log start offset (files of that
    base offset listed at the start are removed first)."""
    params, openers, report = loading.params, loading.openers, loading.report
    log_start_offset = params.log_start_offset
    segments = loading.segments
    if segments and segments[-1].next_offset < log_start_offset:
        for segment in segments:
            report.deleted_segments.append(segment.base_offset)
            segment.delete()
        segments = loading.segments = []
    if segments:
        return
    leftovers = {name for name, offset, _suffix in loading.entries if offset == log_start_offset}
    for path in filenames.segment_files(params.dir_path, log_start_offset) if leftovers else ():
        if os.path.basename(path) in leftovers:  # listed at the start: may be gone
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
    segments.append(openers.create(log_start_offset) if openers.create is not None
                    else openers.open(log_start_offset, create=True))


#: The largest base offset a segment may have (a batch needs room for its next offset).
BASE_OFFSET_MAX = 2**63 - 2


def check_log_start_offset(start_checkpoint: int | None, *, dir_path: str, state: Any) -> int:
    """The checkpointed log start offset (0 for None), or CorruptCheckpointError when it cannot
    be a base offset. Kafka deletes every segment when the start is past the end; with a start
    that cannot be a base offset the log could then never be written again, so it is refused
    before anything is deleted. ``state`` names the file and the partition in the message."""
    if start_checkpoint is not None and not 0 <= start_checkpoint <= BASE_OFFSET_MAX:
        path = getattr(state, "log_start_offset_path",
                       f"the log start offset checkpoint of {dir_path}")
        partition = getattr(state, "topic_partition", os.path.basename(dir_path))
        raise CorruptCheckpointError(
            f"{path}: log start offset {start_checkpoint} of partition {partition} is not "
            f"a possible base offset (outside [0, {BASE_OFFSET_MAX}])", path=str(path))
    return start_checkpoint or 0


def load_producer_state(psm: ProducerStateManager, segments: SegmentMap, *, start_offset: int,
                        end_offset: int, clean_shutdown: bool, now_ms: int,
                        rescan_snapshots: bool = True) -> None:
    """Producer state after the segments are loaded (Kafka's LogLoader.load, then UnifiedLog's
    constructor): snapshots matching no segment go, the latest good one is loaded and the log
    replayed past it; the high watermark starts at ``end_offset``. ``rescan_snapshots=False``:
    ``psm`` still knows the directory's snapshots (nothing else wrote or removed one since it
    listed them), so the directory is not listed again."""
    if segments:
        psm.remove_stray_snapshots(segments.bases, rescan=rescan_snapshots)
        rebuild_producer_state(
            psm, segment_base_offsets=segments.bases, log_start_offset=start_offset,
            log_end_offset=end_offset,
            batches_from=lambda offset: batches_from(segments, offset),
            reload_from_clean_shutdown=clean_shutdown, now_ms=now_ms)
    psm.on_high_watermark_updated(end_offset)


def recover_segment_and_txn_index(segment: Any, earlier: list, *, dir_path: str,
                                  new_producer_state: Callable[[], ProducerStateManager],
                                  log_start_offset: int, now_ms: int) -> Any:
    """Kafka's ``LogLoader.recoverSegment``: validate ``segment`` and rebuild its indexes and
    its ``.txnindex``; returns what ``segment.recover()`` returns. The aborted transactions'
    last stable offsets need the producer state at the segment's base, so a temporary manager
    (``new_producer_state()``) is brought there first (from a snapshot, replaying ``earlier``
    segments), then fed every batch of the segment, and it snapshots the state at the
    segment's end."""
    base = segment.base_offset
    tmp = new_producer_state()
    chain = SegmentMap(list(earlier))
    rebuild_producer_state(
        tmp, segment_base_offsets=[*chain.bases, base],
        log_start_offset=min(log_start_offset, base), log_end_offset=base,
        batches_from=lambda offset: batches_from(chain, offset),
        reload_from_clean_shutdown=False, now_ms=now_ms)
    result = segment.recover()
    txn_path = filenames.txn_index_file(dir_path, base)
    if os.path.exists(txn_path):
        os.truncate(txn_path, 0)  # reset before reading: the old bytes may be corrupt
    txn_index = TransactionIndex(dir_path, base)
    try:
        for batch in segment.batches():
            tmp.recover_batch(batch, txn_index)
        txn_index.flush()
    finally:
        txn_index.close()
    tmp.take_snapshot()
    return result


class _RecoverSegment:
    """``open_partition``'s ``recover_segment(segment, earlier)``:
    :func:`recover_segment_and_txn_index`, counting the segments it recovered
    (``recovered``) and dropping the Log's cached ``.txnindex`` of the segment (rebuilt). An
    object, not a closure: fewer objects per loaded partition."""

    __slots__ = ("recovered", "dir_path", "new_producer_state", "log_start_offset", "now_ms",
                 "local")

    def __init__(self, dir_path: str, new_producer_state: Callable[..., ProducerStateManager],
                 log_start_offset: int, now_ms: int, local: LocalLog):
        self.recovered = 0
        self.dir_path = dir_path
        self.new_producer_state = new_producer_state
        self.log_start_offset = log_start_offset
        self.now_ms = now_ms
        self.local = local

    def __call__(self, segment: Any, earlier: list) -> Any:
        self.recovered += 1
        result = recover_segment_and_txn_index(
            segment, earlier, dir_path=self.dir_path,
            new_producer_state=self.new_producer_state,
            log_start_offset=self.log_start_offset, now_ms=self.now_ms)
        self.local.drop_txn_index(segment.base_offset)
        return result


class LoadedPartition(NamedTuple):
    """What :func:`open_partition` loaded: the producer state, the segment chain, the
    recovery report and the log's start and end offsets."""

    producer_state: ProducerStateManager
    local_log: LocalLog
    report: RecoveryReport
    start_offset: int
    end_offset: int


class _ReportingFirstOpen:
    """A deferred segment's ``first_open`` that tells ``on_failure`` of the CorruptRecordError
    its deferred checks raise (then raises it): the Log goes offline on the first use of a
    segment its open would have refused (:func:`open_partition`'s ``on_load_failure``)."""

    __slots__ = ("first_open", "on_failure")

    def __init__(self, first_open: Callable[[], Any],
                 on_failure: Callable[[CorruptRecordError], None]):
        self.first_open = first_open
        self.on_failure = on_failure

    def __call__(self) -> Any:
        try:
            return self.first_open()
        except CorruptRecordError as exc:
            self.on_failure(exc)
            raise


class _ReportingLazy:
    """``SegmentOpeners.lazy`` whose segments report a failed first open (see above)."""

    __slots__ = ("lazy", "on_failure")

    def __init__(self, lazy: Callable[..., Any],
                 on_failure: Callable[[CorruptRecordError], None]):
        self.lazy = lazy
        self.on_failure = on_failure

    def __call__(self, base: int, first_open: Callable[[], Any], **kwargs: Any) -> Any:
        return self.lazy(base, _ReportingFirstOpen(first_open, self.on_failure), **kwargs)


def open_partition(dir_path: str, config: Any, backend: Any, *, read_only: bool, state: Any,
                   now_ms: int,
                   new_producer_state: Callable[..., ProducerStateManager],
                   file_cache: Any = None, lock: Any = None,
                   listing: list[str] | None = None,
                   on_load_failure: Callable[[CorruptRecordError], None] | None = None,
                   ) -> LoadedPartition:
    """Load a partition directory for :meth:`Log.open <seglog.storage.log.Log.open>`
    (Kafka's ``LogLoader.load``): the checkpoints from ``state`` (a
    :class:`~seglog.storage.partition_state.PartitionState`), the segments by
    :func:`load_segments`' rules with segment recovery after an unclean shutdown, the
    producer state, the recovery point; a writer forgets the clean-shutdown marker once
    loading succeeded and gives the active segment's indexes room again (applied before its
    first append). The segments are :class:`~seglog.storage.file_cache.LazySegment` entries
    of ``file_cache`` (guarded by ``lock``, the Log's); after a clean shutdown none is opened
    when the checkpointed recovery point and the newest producer snapshot agree on the end
    offset, else only the last (:func:`load_segments`), and once loaded every file is closed
    again, so an idle partition holds no descriptor until it is read or written.
    ``listing``: the directory's names, listed just now by the caller (None: listed here).
    ``on_load_failure(exc)``: told when the first use of a deferred segment fails the checks
    its open would have run (a CorruptRecordError, raised on after the call)."""
    recovery_point, start_checkpoint, clean = state.load()
    start_checkpoint = check_log_start_offset(start_checkpoint, dir_path=dir_path,
                                              state=state)
    # One listing for the segment loader and the producer state (they listed it thrice).
    if listing is None:
        listing = os.listdir(dir_path)
    psm = new_producer_state(listing)
    local = LocalLog(
        dir_path, config, backend, read_only=read_only, now_ms=now_ms,
        retire_snapshot=psm.remove_and_mark_snapshot_for_deletion, file_cache=file_cache,
        lock=lock)
    # Its count says whether a file the producer state listed may have changed behind its
    # back: a segment recovery snapshots through a manager of its own.
    recover_segment = _RecoverSegment(dir_path, new_producer_state, start_checkpoint, now_ms,
                                      local)
    # After a clean shutdown the recovery point is the log end offset (the close that wrote
    # the marker flushed to the end, checkpointed it and took a producer snapshot there): the
    # last segment need not be opened to know it (load_segments checks it on first use). Only
    # when the newest snapshot agrees: another writer since (a standalone Log on a Store's
    # partition keeps its own checkpoints) moved it.
    log_end_offset = recovery_point if (
        clean and not read_only and recovery_point is not None
        and psm.latest_snapshot_offset() == recovery_point) else None
    result = load_segments(
        LoadParams(dir_path=dir_path,
                   recovery_point=recovery_point if recovery_point is not None else 0,
                   log_start_offset=start_checkpoint, clean_shutdown=clean,
                   read_only=read_only, compacted=config.compaction_enabled, listing=listing,
                   log_end_offset=log_end_offset),
        SegmentOpeners(open=local.open_segment, recover=recover_segment, probe=local.probe_segment,
                       create=local.create_empty_segment, open_backend=local.backend_opener(),
                       lazy=local.deferred_segment if on_load_failure is None
                       else _ReportingLazy(local.deferred_segment, on_load_failure)))
    if not read_only:
        # Forget the clean-shutdown marker only once loading succeeded: an open that
        # fails on corruption has cut nothing, and the next open must not take it for
        # a crash and cut what this one refused to (loading before this point only
        # rebuilds derived files and finishes renames, which a crash cannot tear).
        state.begin_writing()
    report = result.report
    segments = SegmentMap(result.segments)
    local.set_segments(segments, now_ms=now_ms)
    end = segments.active().next_offset if segments else start_checkpoint
    first_base = segments.oldest().base_offset if segments else start_checkpoint
    start = max(start_checkpoint, first_base)
    # After a clean shutdown where loading removed, renamed and recovered nothing, the
    # snapshots are those listed above (the psm's own deletions keep its list current).
    unchanged = (clean and not recover_segment.recovered
                 and not report._peek("removed_files")
                 and not report._peek("completed_swaps")
                 and not report._peek("deleted_segments"))
    load_producer_state(psm, segments, start_offset=start, end_offset=end,
                        clean_shutdown=clean, now_ms=now_ms, rescan_snapshots=not unchanged)
    # LogLoader: after a clean shutdown everything is on disk; otherwise what recovery
    # validated is not flushed yet, so the recovery point stays where it was.
    local.recovery_point = end if clean else min(recovery_point or 0, end)
    local.last_flush_ms = now_ms
    if not read_only:
        active = segments.active()
        # Kafka resizes the active segment's indexes to segment.index.bytes after loading:
        # they were trimmed on close and must have room for new entries.
        active.resize_indexes(config.segment_index_bytes)
        if report.lost_data or report._peek("removed_files"):
            state.save(recovery_point=local.recovery_point, log_start_offset=start)
    local.release_files()
    return LoadedPartition(psm, local, report, start, end)
