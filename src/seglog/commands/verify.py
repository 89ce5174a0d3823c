"""``seglog dump --verify PATH ...``: check a partition directory or whole data directories
(every log dir of a JBOD broker named on the command line) without changing a byte.

Kafka's own tool does not verify; this is what seglog's loader and recovery would find, said
file by file instead of repaired. Per partition:

* every ``.log``: each batch's framing (length, magic: the reasons of
  :mod:`seglog.format`), its CRC32C, its offsets (above the segment's base offset, increasing
  from batch to batch, below the next segment's base offset), its records (decoded: the count
  in the header, offsets inside the batch's range and increasing, the header's max timestamp
  for CreateTime batches), and no partial batch at the end (a torn write);
* every ``.index`` entry: whole entries, offsets and positions increasing, the position a
  batch's start and that batch holding the entry's offset;
* every ``.timeindex`` entry: whole entries, timestamps increasing, offsets not decreasing,
  each naming a batch of the segment whose max timestamp is the entry's;
* every ``.txnindex`` entry: whole, version 0, its ABORT marker at its last offset in this
  segment, entries in offset order;
* producer ``.snapshot`` files (their CRC), ``partition.metadata``, the
  ``leader-epoch-checkpoint`` (epochs and start offsets increasing, none past the log end),
  index files without their ``.log``;

and per log dir: ``meta.properties``, the offset checkpoints (they parse; after a clean
shutdown no partition ends below its recovery point or high watermark; no log start offset
past the log end). Each problem is one ``path: what`` line (``--output json``: a list of
``{"path", "problem"}``); the exit code is 3 when there is any, 0 (with a summary) when none.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import filenames
from .. import format as fmt
from .._backend import default_backend
from ..errors import CorruptCheckpointError, CorruptIndexError, CorruptSnapshotError, SeglogError
from ..progress import progress
from ..storage.checkpoints import (
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    has_clean_shutdown_marker,
)
from ..storage.producer_state import read_snapshot
from .log_files import OFFSET_CHECKPOINTS, index_entries, read_batches, txn_index_entries
from .target import EXIT_OK, EXIT_PROBLEMS

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.[a-z]+)$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_INDEX_SUFFIXES = (filenames.INDEX_SUFFIX, filenames.TIME_INDEX_SUFFIX,
                   filenames.TXN_INDEX_SUFFIX)


@dataclass(frozen=True)
class Problem:
    """One problem: the file (or directory) and what is wrong with it."""

    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


@dataclass
class Verified:
    """What a verification looked at, and the problems it found."""

    problems: list[Problem] = field(default_factory=list)
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    bytes_read: int = 0


@dataclass
class _Segment:
    base_offset: int
    log_path: str
    batches: list[Any]
    size_bytes: int

    def holding(self, offset: int) -> Any | None:
        for batch in self.batches:
            if batch.base_offset <= offset <= batch.last_offset:
                return batch
        return None


def is_partition_dir(path: str) -> bool:
    """True when ``path`` holds a partition's files (a segment, a leader-epoch checkpoint or
    a ``partition.metadata``), rather than partition directories."""
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(_SEGMENT_FILE.match(n) for n in names) or \
        filenames.LEADER_EPOCH_CHECKPOINT in names or filenames.PARTITION_METADATA in names


class Verifier:
    """Checks directories; ``on_bytes(n)`` is told of every ``n`` bytes read (a progress
    bar's ``update``)."""

    def __init__(self, on_bytes: Callable[[int], None] | None = None) -> None:
        self.result = Verified()
        self._on_bytes = on_bytes
        self._backend = default_backend()

    def problem(self, path: str, what: str) -> None:
        """Record one problem."""
        self.result.problems.append(Problem(path, what))

    def _read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            data = f.read()
        self.result.bytes_read += len(data)
        if self._on_bytes is not None:
            self._on_bytes(len(data))
        return data

    # --- a log dir -------------------------------------------------------------------------

    def verify_path(self, path: str) -> None:
        """Verify a partition directory, a log dir (its own files and every partition
        directory in it) or one file (with the files beside it as context)."""
        if os.path.isfile(path):
            parent = os.path.dirname(path) or "."
            if is_partition_dir(parent):
                self.verify_partition(parent, only=os.path.basename(path))
            else:
                self.verify_log_dir(parent, only=os.path.basename(path))
        elif not os.path.isdir(path):
            self.problem(path, "no such file or directory")
        elif is_partition_dir(path):
            self.verify_partition(path)
        else:
            self.verify_log_dir(path)

    def verify_log_dir(self, path: str, only: str | None = None) -> None:
        """A log dir: ``meta.properties``, the offset checkpoints and every partition."""
        ends: dict[tuple[str, int], int] = {}
        if only is None:
            for name in sorted(os.listdir(path)):
                sub = os.path.join(path, name)
                found = _PARTITION_DIR.match(name)
                if not os.path.isdir(sub) or name.endswith(filenames.DELETE_DIR_SUFFIX) \
                        or not (found or is_partition_dir(sub)):
                    continue
                end = self.verify_partition(sub)
                if found and end is not None:
                    ends[(found.group(1), int(found.group(2)))] = end
        if only in (None, filenames.META_PROPERTIES) and \
                os.path.exists(os.path.join(path, filenames.META_PROPERTIES)):
            try:
                MetaProperties.read(path)
            except (CorruptCheckpointError, ValueError, UnicodeDecodeError) as exc:
                self.problem(os.path.join(path, filenames.META_PROPERTIES), str(exc))
        if only in (None, filenames.TOPICS_FILE):
            topics = os.path.join(path, filenames.TOPICS_FILE)
            if os.path.exists(topics):
                try:
                    json.loads(self._read(topics))
                except ValueError as exc:
                    self.problem(topics, f"not JSON: {exc}")
        self._offset_checkpoints(path, ends, only=only)

    def _offset_checkpoints(self, path: str, ends: dict[tuple[str, int], int], *,
                            only: str | None = None,
                            partition: tuple[str, int] | None = None) -> None:
        clean = has_clean_shutdown_marker(path)
        for name in OFFSET_CHECKPOINTS:
            file_path = os.path.join(path, name)
            if only not in (None, name) or not os.path.exists(file_path):
                continue
            try:
                offsets = OffsetCheckpointFile(file_path).read()
            except (CorruptCheckpointError, UnicodeDecodeError) as exc:
                self.problem(file_path, str(exc))
                continue
            if partition is not None and partition not in offsets and len(offsets) == 1:
                # A standalone Log's own checkpoint names its partition however it was opened.
                offsets = {partition: next(iter(offsets.values()))}
            for tp, offset in offsets.items():
                end = ends.get(tp)
                where = f"{tp[0]}-{tp[1]}"
                if offset < 0 and name != filenames.CLEANER_OFFSET_CHECKPOINT:
                    self.problem(file_path, f"{where}: negative offset {offset}")
                if end is None:
                    continue
                if name == filenames.LOG_START_OFFSET_CHECKPOINT and offset > end:
                    self.problem(file_path, f"{where}: log start offset {offset} is past the "
                                            f"log end offset {end}")
                elif clean and offset > end and name in (
                        filenames.RECOVERY_POINT_CHECKPOINT,
                        filenames.REPLICATION_OFFSET_CHECKPOINT):
                    what = ("recovery point" if name == filenames.RECOVERY_POINT_CHECKPOINT
                            else "high watermark")
                    self.problem(file_path, f"{where}: the log ends at {end}, below its "
                                            f"checkpointed {what} {offset} after a clean "
                                            f"shutdown ({fmt.REASON_BELOW_RECOVERY_POINT})")

    # --- a partition -----------------------------------------------------------------------

    def verify_partition(self, path: str, only: str | None = None) -> int | None:
        """Every file of one partition directory; its log end offset (None if no segment
        could be read)."""
        self.result.partitions += 1
        names = sorted(os.listdir(path))
        bases = sorted(int(m.group(1)) for m in map(_SEGMENT_FILE.match, names)
                       if m and m.group(2) == filenames.LOG_SUFFIX)
        segments: list[_Segment] = []
        for i, base in enumerate(bases):
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            segments.append(self._verify_log(path, base, next_base,
                                             check=only in (None, f"{base:020d}.log")))
        end = None
        for segment in reversed(segments):
            if segment.batches:
                end = segment.batches[-1].next_offset
                break
        if end is None and bases:
            end = bases[-1]
        for i, segment in enumerate(segments):
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            prefix = f"{segment.base_offset:020d}"
            if only in (None, prefix + filenames.INDEX_SUFFIX):
                self._verify_index(path, segment, next_base)
            if only in (None, prefix + filenames.TIME_INDEX_SUFFIX):
                self._verify_time_index(path, segment)
            if only in (None, prefix + filenames.TXN_INDEX_SUFFIX):
                self._verify_txn_index(path, segment, next_base)
        for name in names:
            found = _SEGMENT_FILE.match(name)
            file_path = os.path.join(path, name)
            if found and found.group(2) in _INDEX_SUFFIXES and only in (None, name) \
                    and int(found.group(1)) not in bases:
                self.problem(file_path, f"an index without its segment: no "
                                        f"{found.group(1)}{filenames.LOG_SUFFIX}")
            if found and found.group(2) == filenames.SNAPSHOT_SUFFIX and only in (None, name):
                try:
                    read_snapshot(file_path, crc32c=self._backend.crc32c)
                except CorruptSnapshotError as exc:
                    self.problem(file_path, str(exc))
        if only in (None, filenames.PARTITION_METADATA):
            self._verify_partition_metadata(path)
        if only in (None, filenames.LEADER_EPOCH_CHECKPOINT):
            self._verify_leader_epochs(path, end)
        found_tp = _PARTITION_DIR.match(os.path.basename(os.path.abspath(path)))
        tp = ((found_tp.group(1), int(found_tp.group(2))) if found_tp
              else (os.path.basename(os.path.abspath(path)), 0))
        self._offset_checkpoints(path, {tp: end} if end is not None else {}, only=only,
                                 partition=tp)
        return end

    def _verify_log(self, path: str, base: int, next_base: int | None, *,
                    check: bool) -> _Segment:
        log_path = os.path.join(path, f"{base:020d}{filenames.LOG_SUFFIX}")
        self.result.segments += 1
        data = self._read(log_path)
        batches, valid_bytes, error = read_batches(data)
        segment = _Segment(base, log_path, batches, len(data))
        self.result.batches += len(batches)
        if not check:
            return segment
        if error is not None:
            self.problem(log_path, f"position {error.position}: {error.reason} "
                                   f"({len(data) - error.position} bytes from there on are "
                                   f"not whole batches)")
        elif valid_bytes < len(data):
            self.problem(log_path, f"position {valid_bytes}: {fmt.REASON_TRUNCATED} "
                                   f"({len(data) - valid_bytes} bytes after the last whole "
                                   f"batch)")
        previous = None
        for batch in batches:
            where = (f"batch at position {batch.position} (offsets {batch.base_offset}.."
                     f"{batch.last_offset})")
            if not batch.is_valid():
                computed = self._backend.crc32c(memoryview(data)[
                    batch.position + fmt.ATTRIBUTES_POSITION:batch.position + batch.size_bytes])
                self.problem(log_path, f"{where}: {fmt.REASON_CRC_MISMATCH} (stored "
                                       f"{batch.crc}, computed {computed})")
            if batch.last_offset_delta < 0 or batch.record_count > batch.last_offset_delta + 1:
                self.problem(log_path, f"{where}: {fmt.REASON_BAD_LAST_OFFSET_DELTA}: "
                                       f"{batch.last_offset_delta} for {batch.record_count} "
                                       f"records")
            if batch.base_offset < base:
                self.problem(log_path, f"{where}: {fmt.REASON_OFFSETS_NOT_INCREASING}: below "
                                       f"the segment's base offset {base}")
            if previous is not None and batch.base_offset <= previous.last_offset:
                self.problem(log_path, f"{where}: {fmt.REASON_OFFSETS_NOT_INCREASING}: the "
                                       f"batch before ends at {previous.last_offset}")
            if next_base is not None and batch.last_offset >= next_base:
                self.problem(log_path, f"{where}: {fmt.REASON_OFFSETS_OUTSIDE_SEGMENT}: the "
                                       f"next segment starts at {next_base}")
            if batch.is_valid():
                self._verify_records(log_path, where, batch)
            previous = batch
        return segment

    def _verify_records(self, log_path: str, where: str, batch: Any) -> None:
        try:
            records = batch.records(check_crcs=False)
        except SeglogError as exc:
            self.problem(log_path, f"{where}: {fmt.REASON_BAD_RECORDS}: {exc}")
            return
        if len(records) != batch.record_count:
            self.problem(log_path, f"{where}: {fmt.REASON_BAD_RECORDS}: the header counts "
                                   f"{batch.record_count} records, {len(records)} inside")
        offsets = [r.offset for r in records]
        if any(b <= a for a, b in zip(offsets, offsets[1:])) or (offsets and (
                offsets[0] < batch.base_offset or offsets[-1] > batch.last_offset)):
            self.problem(log_path, f"{where}: {fmt.REASON_BAD_RECORDS}: record offsets "
                                   f"{offsets[0]}..{offsets[-1]} not increasing inside the "
                                   f"batch's range")
        if records and batch.timestamp_type == fmt.TIMESTAMP_TYPE_CREATE_TIME:
            highest = max(r.timestamp_ms for r in records)
            if highest != batch.max_timestamp_ms:
                self.problem(log_path, f"{where}: max timestamp {batch.max_timestamp_ms} in "
                                       f"the header, {highest} in the records")

    def _index_bytes(self, path: str, entry_bytes: int, kind: str) -> bytes | None:
        try:
            data = self._read(path)
        except FileNotFoundError:
            self.problem(path, f"missing: the segment has no {kind}")
            return None
        if len(data) % entry_bytes:
            self.problem(path, f"{len(data)} bytes, not a multiple of the {entry_bytes}-byte "
                               f"entry (a partial entry at the end)")
        return data

    def _verify_index(self, path: str, segment: _Segment, next_base: int | None) -> None:
        index_path = os.path.join(path, f"{segment.base_offset:020d}{filenames.INDEX_SUFFIX}")
        data = self._index_bytes(index_path, fmt.OFFSET_INDEX_ENTRY_BYTES, "offset index")
        if data is None:
            return
        by_position = {b.position: b for b in segment.batches}
        previous: tuple[int, int] | None = None
        for n, (relative, position) in enumerate(_entries(data, fmt.OFFSET_INDEX_ENTRY)):
            offset = segment.base_offset + relative
            what = f"entry {n} (offset {offset}, position {position})"
            if relative < 0 or position < 0:
                self.problem(index_path, f"{what}: negative relative offset or position")
            elif previous is not None and (offset <= previous[0] or position <= previous[1]):
                self.problem(index_path, f"{what}: not above the entry before (offset "
                                         f"{previous[0]}, position {previous[1]})")
            if next_base is not None and offset >= next_base:
                self.problem(index_path, f"{what}: offset at or past the next segment's base "
                                         f"{next_base}")
            batch = by_position.get(position)
            if batch is None:
                self.problem(index_path, f"{what}: no batch starts at position {position} of "
                                         f"{os.path.basename(segment.log_path)} "
                                         f"({segment.size_bytes} bytes)")
            elif not batch.base_offset <= offset <= batch.last_offset:
                self.problem(index_path, f"{what}: the batch at that position holds offsets "
                                         f"{batch.base_offset}..{batch.last_offset}")
            previous = (offset, position)

    def _verify_time_index(self, path: str, segment: _Segment) -> None:
        index_path = os.path.join(path, f"{segment.base_offset:020d}"
                                        f"{filenames.TIME_INDEX_SUFFIX}")
        data = self._index_bytes(index_path, fmt.TIME_INDEX_ENTRY_BYTES, "time index")
        if data is None:
            return
        previous: tuple[int, int] | None = None
        for n, (timestamp, relative) in enumerate(_entries(data, fmt.TIME_INDEX_ENTRY)):
            offset = segment.base_offset + relative
            what = f"entry {n} (timestamp {timestamp}, offset {offset})"
            if relative < 0:
                self.problem(index_path, f"{what}: negative relative offset")
            elif previous is not None and (timestamp <= previous[0] or offset < previous[1]):
                self.problem(index_path, f"{what}: not in order after the entry before "
                                         f"(timestamp {previous[0]}, offset {previous[1]})")
            batch = segment.holding(offset)
            if batch is None:
                self.problem(index_path, f"{what}: no batch of the segment holds offset "
                                         f"{offset}")
            elif batch.max_timestamp_ms != timestamp:
                self.problem(index_path, f"{what}: the batch holding it "
                                         f"({batch.base_offset}..{batch.last_offset}) has max "
                                         f"timestamp {batch.max_timestamp_ms}")
            previous = (timestamp, offset)

    def _verify_txn_index(self, path: str, segment: _Segment, next_base: int | None) -> None:
        index_path = os.path.join(path, f"{segment.base_offset:020d}"
                                        f"{filenames.TXN_INDEX_SUFFIX}")
        if not os.path.exists(index_path):
            return  # a segment without aborted transactions has none
        data = self._read(index_path)
        if len(data) % fmt.ABORTED_TXN_ENTRY_BYTES:
            self.problem(index_path, f"{len(data)} bytes, not a multiple of the "
                                     f"{fmt.ABORTED_TXN_ENTRY_BYTES}-byte entry")
        try:
            entries = txn_index_entries(data)
        except CorruptIndexError as exc:
            self.problem(index_path, str(exc))
            return
        previous = None
        for n, txn in enumerate(entries):
            what = (f"entry {n} (producer {txn.producer_id}, offsets {txn.first_offset}.."
                    f"{txn.last_offset})")
            if txn.first_offset > txn.last_offset:
                self.problem(index_path, f"{what}: first offset above last offset")
            if previous is not None and txn.last_offset <= previous.last_offset:
                self.problem(index_path, f"{what}: not after the entry before")
            if txn.last_offset < segment.base_offset or (
                    next_base is not None and txn.last_offset >= next_base):
                self.problem(index_path, f"{what}: its marker's offset is outside the segment")
            else:
                batch = segment.holding(txn.last_offset)
                if batch is None or not batch.is_control or batch.producer_id != \
                        txn.producer_id or _control_type(batch) != fmt.CONTROL_TYPE_ABORT:
                    self.problem(index_path, f"{what}: no ABORT marker of producer "
                                             f"{txn.producer_id} at offset {txn.last_offset}")
            previous = txn

    def _verify_partition_metadata(self, path: str) -> None:
        file_path = os.path.join(path, filenames.PARTITION_METADATA)
        try:
            PartitionMetadataFile(file_path).read()
        except (CorruptCheckpointError, UnicodeDecodeError) as exc:
            self.problem(file_path, str(exc))

    def _verify_leader_epochs(self, path: str, end: int | None) -> None:
        file_path = os.path.join(path, filenames.LEADER_EPOCH_CHECKPOINT)
        try:
            entries = LeaderEpochCheckpointFile(file_path).read()
        except (CorruptCheckpointError, UnicodeDecodeError) as exc:
            self.problem(file_path, str(exc))
            return
        previous = None
        for entry in entries:
            what = f"epoch {entry.epoch} start offset {entry.start_offset}"
            if entry.epoch < 0 or entry.start_offset < 0:
                self.problem(file_path, f"{what}: negative")
            if previous is not None and (entry.epoch <= previous.epoch
                                         or entry.start_offset < previous.start_offset):
                self.problem(file_path, f"{what}: not after epoch {previous.epoch} start "
                                        f"offset {previous.start_offset} (epochs and start "
                                        f"offsets must increase)")
            if end is not None and entry.start_offset > end:
                self.problem(file_path, f"{what}: past the log end offset {end}")
            previous = entry


def _entries(data: bytes, entry: Any) -> list[tuple[int, int]]:
    # A live segment's index files are preallocated (Kafka's and seglog's writers mmap them
    # at their full size): zero entries at the end are room, not entries.
    entries = index_entries(data, entry)
    while entries and entries[-1] == (0, 0):
        entries.pop()
    return entries


def _control_type(batch: Any) -> int:
    try:
        return int(batch.control_type(check_crcs=False))
    except SeglogError:
        return -1


def total_bytes(paths: list[str]) -> int:
    """The bytes under ``paths`` (a progress bar's total)."""
    total = 0
    for path in paths:
        if os.path.isfile(path):
            total += os.path.getsize(path)
            continue
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
    return total


def verify(paths: list[str], on_bytes: Callable[[int], None] | None = None) -> Verified:
    """Verify every path (see the module docstring)."""
    verifier = Verifier(on_bytes)
    for path in paths:
        try:
            verifier.verify_path(path)
        except OSError as exc:
            verifier.problem(path, f"cannot read: {exc}")
    return verifier.result


def run_verify(paths: list[str], *, as_json: bool) -> int:
    """``seglog dump --verify``: print the problems (or a summary) and return the exit code."""
    with progress("verifying", total=total_bytes(paths), unit="B", unit_scale=True) as bar:
        result = verify(paths, bar.update)
    if as_json:
        json.dump([{"path": p.path, "problem": p.what} for p in result.problems], sys.stdout)
        sys.stdout.write("\n")
    else:
        for problem in result.problems:
            print(problem)
    summary = (f"{result.partitions} partitions, {result.segments} segments, "
               f"{result.batches} batches, {result.bytes_read} bytes verified")
    if result.problems:
        print(f"seglog dump --verify: {len(result.problems)} problems ({summary})",
              file=sys.stderr)
        return EXIT_PROBLEMS
    if not as_json:
        print(f"no problem found: {summary}")
    return EXIT_OK
