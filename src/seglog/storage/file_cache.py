"""A bound on open segment files: segments open lazily and a cache closes the least recently
used ones (issue 14; a database's table cache).

Every open segment holds descriptors (native: its ``.log``; pure: also one per mapping) and
mappings; a Store of 10,000 partitions of a few segments each would need more than the usual
open-files limit (and ``vm.max_map_count``). So a Log's chain holds :class:`LazySegment`
objects instead of the backend's Segments: each opens its backend Segment on first use and a
:class:`FileCache`, one per Store (or one per process for standalone Logs), closes the least
recently used open segments when more than ``max_open_segments`` are open. A closed
(*evicted*) segment remembers what the Log asks of it without reading (next offset, size,
timestamps) and opens again, transparently, on the next call that needs its files.

Rules:

* **Who may close what.** Every call into a segment runs under its Log's lock
  (design.md §5). The cache closes another Log's segment only after taking that Log's lock
  without waiting (``acquire(blocking=False)``); a busy Log's segments are skipped, so two Logs
  evicting each other's segments never wait on each other.
* **Views.** A segment with a live ``read()`` view (``Segment.views_outstanding()``) is never
  closed: its mapping must stay, and ``truncate_to`` must still see the view (the backend
  refuses to cut bytes a view maps). A generator over a segment's batches pins it while it
  runs. Pinned segments are skipped, so the bound is soft: it is exceeded by the segments
  pinned or busy at the time, never refused.
* **What closing costs.** ``Segment.close`` trims the indexes and syncs them (an msync of
  the index, half a millisecond or more even when nothing changed). The cache closes with
  ``Segment.release()`` instead: descriptor closed, mappings dropped, nothing trimmed,
  synced or written, the files left as a stopped process leaves them (which the next open
  reads, as after a crash: an index at its preallocated length counts its entries). A
  segment written since it was opened (``dirty``) is opened once more by :meth:`close`
  (the Log's) and closed properly then, so a clean shutdown leaves the same files as
  without the cache. A rolled segment only read since its roll (``on_become_inactive``
  trimmed and synced it: *settled*) is released by :meth:`LazySegment.close` too, as a
  proper close would change none of its bytes. An active segment is opened with its
  indexes as trimmed and given room (``resize_indexes``) only before its first append or
  index use, so an idle partition's active segment is never written to at all.
* **Choice of victim.** Second chance (CLOCK) over the open segments in opening order: a
  call sets ``used``; the sweep clears it and moves on, and closes the first segment not
  used since the last sweep, not pinned, without live views and whose Log is free.

The default bound is half the soft ``RLIMIT_NOFILE`` divided by the descriptors one open
segment holds (``Segment.open_descriptors_max``), at least :data:`MIN_OPEN_SEGMENTS`.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from typing import Any, Callable, Iterator

from .. import filenames

__all__ = [
    "MIN_OPEN_SEGMENTS",
    "FileCache",
    "LazySegment",
    "default_file_cache",
    "default_max_open_segments",
]

#: The smallest default bound: a Log needs a few segments open at once (a read across two
#: segments, a roll, the cleaner's group).
MIN_OPEN_SEGMENTS = 4


def default_max_open_segments(descriptors_per_segment: int = 1) -> int:
    """Half the soft ``RLIMIT_NOFILE`` over ``descriptors_per_segment`` (the backend's
    ``Segment.open_descriptors_max``), at least :data:`MIN_OPEN_SEGMENTS`: the other half
    is left to sockets, checkpoints and everything else in the process."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(MIN_OPEN_SEGMENTS, soft // 2 // max(1, descriptors_per_segment))


class FileCache:
    """The open segments of a Store (or of every standalone Log of a process), at most
    ``max_open_segments`` of them beyond those pinned or busy (module docstring).
    Thread-safe. ``max_open_segments`` None: :func:`default_max_open_segments` of
    ``descriptors_per_segment``. ValueError below 1."""

    def __init__(self, max_open_segments: int | None = None, *,
                 descriptors_per_segment: int = 1):
        if max_open_segments is None:
            max_open_segments = default_max_open_segments(descriptors_per_segment)
        if isinstance(max_open_segments, bool) or not isinstance(max_open_segments, int):
            raise TypeError(f"max_open_segments must be an int, got {max_open_segments!r}")
        if max_open_segments < 1:
            raise ValueError(f"max_open_segments must be >= 1, got {max_open_segments}")
        self._max = max_open_segments
        self._lock = threading.Lock()
        self._open: OrderedDict[LazySegment, None] = OrderedDict()  # oldest opening first
        #: How many segments were closed to stay within the bound.
        self.evictions = 0

    @property
    def max_open_segments(self) -> int:
        """The bound on open segments."""
        return self._max

    @property
    def open_segments(self) -> int:
        """How many segments are open now."""
        return len(self._open)

    def opened(self, segment: "LazySegment") -> None:
        """Count ``segment`` as open (it just opened its files) and close others if over the
        bound (never ``segment`` itself)."""
        with self._lock:
            self._open[segment] = None
            if len(self._open) > self._max:
                self._evict(segment)

    def closed(self, segment: "LazySegment") -> None:
        """``segment`` closed its files (closed, deleted or evicted)."""
        with self._lock:
            self._open.pop(segment, None)

    def shrink(self) -> int:
        """Close every open segment that can be closed now (not pinned, no live views, its
        Log free); returns how many were closed. What a Store does after loading its
        partitions, so idle ones hold no descriptor."""
        with self._lock:
            closed = 0
            for segment in list(self._open):
                if segment._try_release():
                    del self._open[segment]
                    closed += 1
            return closed

    def _evict(self, keep: "LazySegment") -> None:
        # Second chance over the open segments in opening order; bounded, so a cache full of
        # pinned or busy segments stays over the bound instead of spinning.
        budget = 2 * len(self._open) + 2
        open_ = self._open
        while len(open_) > self._max and budget > 0:
            budget -= 1
            victim = next(iter(open_))
            if victim is keep or victim.used:
                victim.used = False
                open_.move_to_end(victim)
            elif victim._try_release():
                del open_[victim]
                self.evictions += 1
            else:
                open_.move_to_end(victim)


_default_cache: FileCache | None = None
_default_lock = threading.Lock()


def default_file_cache(descriptors_per_segment: int = 1) -> FileCache:
    """The process-wide cache of standalone Logs (a Store has its own), made on first use
    with the default bound of ``descriptors_per_segment`` (the first caller's)."""
    global _default_cache
    with _default_lock:
        if _default_cache is None:
            _default_cache = FileCache(descriptors_per_segment=descriptors_per_segment)
        return _default_cache


#: ``open(base_offset, *, create, file_suffix) -> backend Segment``
OpenBackend = Callable[..., Any]
#: ``first_open() -> backend Segment``: the first open of a segment the loader did not open
#: (it runs the loader's checks of that segment and raises to refuse it).
FirstOpen = Callable[[], Any]


class LazySegment:
    """One segment of a chain, its backend Segment opened on demand and closed by the
    :class:`FileCache` when others need the room (module docstring). Implements the backend
    Segment's interface (``seglog._contract.Segment``) by forwarding; not thread-safe (the
    Log's lock, ``lock``, covers every call, and the cache takes it before closing).

    ``open_backend(base_offset, create=..., file_suffix=...)`` opens the backend Segment with
    the log's settings. ``segment``: an already open backend Segment to adopt. ``state``: what
    an unopened segment answers without reading, ``(next_offset, size_bytes,
    max_timestamp_ms, offset_of_max_timestamp, first_batch_timestamp_ms)`` (an empty segment
    made by the Log; the loader's last segment knows only its next offset, the others None
    until it opens), or None (read on first need). ``create``: the files do not exist yet
    (made by the first open, which then calls ``on_create()``). ``first_open()``, when given,
    makes the first open instead of ``open_backend`` (the loader's checks, deferred).
    """

    __slots__ = ("_cache", "_lock", "_open_backend", "_segment", "_state", "_create",
                 "_first_open", "_on_create", "_room_bytes", "_room_pending", "_pins",
                 "_closed", "_unsynced", "_dirty", "_settled",
                 "_need_rebuild", "dir_path", "base_offset", "read_only", "file_suffix",
                 "used", "_log_path_of", "__weakref__")

    def __init__(self, cache: FileCache, lock: Any, open_backend: OpenBackend, dir_path: str,
                 base_offset: int, *, read_only: bool, file_suffix: str = "",
                 segment: Any = None, state: tuple | None = None, create: bool = False,
                 first_open: FirstOpen | None = None,
                 on_create: Callable[[], None] | None = None):
        self._cache = cache
        self._lock = lock
        self._open_backend = open_backend
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.read_only = read_only
        self.file_suffix = file_suffix if segment is None else segment.file_suffix
        self._log_path_of: tuple[str, str] | None = None
        self._segment = None
        self._state = state
        self._create = create
        self._first_open = first_open
        self._on_create = on_create
        self._room_bytes: int | None = None   # index room this (active) segment was given
        self._room_pending = False            # ... and must get again before writing
        self._pins = 0
        self._closed = False
        self._unsynced = False                # appended or cut since the last fdatasync
        self._dirty = False                   # written since it was last closed properly
        # Rolled (trimmed, final time entry, synced) and not written or handed out since, in
        # the same opening: a proper close would change nothing, so close() only releases.
        self._settled = False
        self._need_rebuild = False
        #: Set by every call; the cache's sweep clears it (second chance).
        self.used = True
        if segment is not None:
            self._segment = segment
            cache.opened(self)

    # --- opening and closing files ---------------------------------------------------------

    def _open(self) -> Any:
        """The backend Segment, opened now if it is not (the cache may close another)."""
        segment = self._segment
        if segment is not None:
            self.used = True
            return segment
        if self._closed:
            from ..errors import LogClosedError

            raise LogClosedError(f"segment {self.log_path} is closed")
        first_open = self._first_open
        self._settled = False
        if first_open is not None:
            segment = first_open()
            self._first_open = None
        else:
            segment = self._open_backend(self.base_offset, create=self._create,
                                         file_suffix=self.file_suffix)
            if self._create:
                self._create = False
                if self._on_create is not None:
                    self._on_create()
        self._segment = segment
        self.used = True
        self._cache.opened(self)
        return segment

    def _with_room(self) -> Any:
        """The backend Segment, with the index room it was given (applied now if pending)."""
        segment = self._open()
        if self._room_pending:
            self._room_pending = False
            self._dirty = True
            self._settled = False
            segment.resize_indexes(self._room_bytes)
        return segment

    def _writable(self) -> Any:
        """:meth:`_with_room`, about to be written (closed properly by :meth:`close`)."""
        segment = self._with_room()
        self._dirty = True
        self._settled = False
        return segment

    def release_files(self) -> bool:
        """Close the backend Segment if nothing holds it (no pin, no live view) and its Log's
        lock is free; it opens again on next use. True when closed now."""
        if self._try_release():
            self._cache.closed(self)
            return True
        return False

    def _try_release(self) -> bool:
        """:meth:`release_files` without telling the cache (the cache's own sweep)."""
        if self._segment is None or self._pins:
            return False
        lock = self._lock
        if lock is not None and not lock.acquire(blocking=False):
            return False
        try:
            segment = self._segment
            if segment is None or self._pins or segment.views_outstanding():
                return False
            self._state = (segment.next_offset, segment.size_bytes, segment.max_timestamp_ms,
                           segment.offset_of_max_timestamp, segment.first_batch_timestamp_ms)
            self._need_rebuild = segment.indexes_need_rebuild
            self._segment = None
            # Not trimmed: the indexes keep the room they had (the next open maps them at
            # their length). A dirty segment is closed properly by close().
            segment.release()
            return True
        finally:
            if lock is not None:
                lock.release()

    def run_deferred_checks(self) -> None:
        """Open the segment now if its first open still has the loader's deferred checks to
        run (``first_open``): what must happen before a file of the segment besides its
        own three is trusted (its ``.txnindex``, which those checks verify and rebuild).
        Raises what that open raises."""
        if self._first_open is not None and self._segment is None:
            self._open()

    @property
    def is_open(self) -> bool:
        """Whether the backend Segment (its descriptors and mappings) is open now."""
        return self._segment is not None

    # --- what an unopened segment knows ------------------------------------------------------

    def _known(self, i: int) -> Any:
        segment = self._segment
        if segment is None and self._state is not None:
            return self._state[i]
        return None

    @property
    def next_offset(self) -> int:
        """Last offset + 1 (the base offset when empty)."""
        segment = self._segment
        if segment is None:
            if self._state is not None:
                return self._state[0]
            segment = self._open()
        return segment.next_offset

    @property
    def size_bytes(self) -> int:
        """Bytes of the ``.log``."""
        segment = self._segment
        if segment is None:
            state = self._state
            if state is not None and state[1] is not None:
                return state[1]
            if not self.read_only and not self._create:
                # Loaded after a clean shutdown and never opened: the file's size, without
                # opening it (a writer's .log ends at its last whole batch; the backend's
                # size is the file's). Nothing writes it until it is opened: kept.
                size_bytes = os.stat(self.log_path).st_size
                if state is not None:
                    self._state = (state[0], size_bytes, *state[2:])
                return size_bytes
            segment = self._open()
        return segment.size_bytes

    @property
    def max_timestamp_ms(self) -> int:
        """The largest batch max timestamp (-1 when none)."""
        known = self._known(2)
        return self._open().max_timestamp_ms if known is None else known

    @property
    def offset_of_max_timestamp(self) -> int:
        """The offset of the record holding ``max_timestamp_ms``."""
        known = self._known(3)
        return self._open().offset_of_max_timestamp if known is None else known

    @property
    def first_batch_timestamp_ms(self) -> int:
        """Max timestamp of the first batch (-1 when empty)."""
        known = self._known(4)
        return self._open().first_batch_timestamp_ms if known is None else known

    @property
    def last_modified_ms(self) -> int:
        """The ``.log`` file's modification time, ms since the epoch."""
        if self._create:
            self._open()  # its files are made on first open
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (an evicted segment is not closed: it opens again)."""
        return self._closed

    @property
    def indexes_need_rebuild(self) -> bool:
        """The backend's flag (its indexes failed their check on open)."""
        segment = self._segment
        return segment.indexes_need_rebuild if segment is not None else self._need_rebuild

    @indexes_need_rebuild.setter
    def indexes_need_rebuild(self, value: bool) -> None:
        self._need_rebuild = bool(value)
        self._settled = False
        self._open().indexes_need_rebuild = value

    def _path(self, suffix: str) -> str:
        return os.path.join(self.dir_path, filenames.offset_prefix(self.base_offset) + suffix
                            + self.file_suffix)

    @property
    def log_path(self) -> str:
        """Path of the ``.log`` file (with the current file suffix)."""
        # Every read reports it (LogReadResult.log_path): kept per file suffix, the only
        # part of the path that changes (a rename to .deleted / .cleaned / .swap).
        cached = self._log_path_of
        if cached is not None and cached[0] == self.file_suffix:
            return cached[1]
        path = self._path(filenames.LOG_SUFFIX)
        self._log_path_of = (self.file_suffix, path)
        return path

    @property
    def index_path(self) -> str:
        """Path of the ``.index`` file."""
        return self._path(filenames.INDEX_SUFFIX)

    @property
    def time_index_path(self) -> str:
        """Path of the ``.timeindex`` file."""
        return self._path(filenames.TIME_INDEX_SUFFIX)

    @property
    def index_interval_bytes(self) -> int:
        """Bytes between index entries."""
        return self._open().index_interval_bytes

    @property
    def max_index_bytes(self) -> int:
        """The index size given at open."""
        return self._open().max_index_bytes

    @property
    def max_message_bytes(self) -> int:
        """The largest batch accepted."""
        return self._open().max_message_bytes

    @property
    def offset_index(self) -> Any:
        """The backend's offset index (the segment opened, with its room if it has any)."""
        self._settled = False  # the caller may write through it
        return (self._open() if self.read_only else self._with_room()).offset_index

    @property
    def time_index(self) -> Any:
        """The backend's time index (as :attr:`offset_index`)."""
        self._settled = False
        return (self._open() if self.read_only else self._with_room()).time_index

    # --- forwarded calls ---------------------------------------------------------------------

    def append(self, data: Any, *, assign_offsets: bool = True,
               partition_leader_epoch: int | None = None, checked: bool = False) -> Any:
        """``Segment.append``; gives the indexes their room first."""
        segment = self._segment
        if segment is None or self._room_pending or not self._dirty:
            segment = self._writable()
        else:
            self.used = True
        result = segment.append(data, assign_offsets=assign_offsets,
                                partition_leader_epoch=partition_leader_epoch, checked=checked)
        self._unsynced = True
        return result

    def roll_reason(self, incoming_bytes: int, incoming_last_offset: int,
                    segment_bytes: int) -> str | None:
        """``Segment.roll_reason`` (with the room the next append will have)."""
        segment = self._segment
        if segment is None or self._room_pending:
            segment = self._open() if self.read_only else self._with_room()
        return segment.roll_reason(incoming_bytes, incoming_last_offset, segment_bytes)

    def translate_offset(self, offset: int) -> Any:
        """``Segment.translate_offset``."""
        segment = self._segment
        if segment is None:
            segment = self._open()
        return segment.translate_offset(offset)

    def read(self, offset: int, max_bytes: int, *, max_position: int | None = None,
             min_one_batch: bool = True) -> Any:
        """``Segment.read`` (a live view keeps the segment open: see the module docstring)."""
        segment = self._segment
        if segment is None:
            segment = self._open()
        else:
            self.used = True
        return segment.read(offset, max_bytes, max_position=max_position,
                            min_one_batch=min_one_batch)

    def read_span(self, offset: int, max_bytes: int, *, max_position: int | None = None,
                  min_one_batch: bool = True) -> Any:
        """``Segment.read_span`` (a live view keeps the segment open, as :meth:`read`)."""
        segment = self._segment
        if segment is None:
            segment = self._open()
        else:
            self.used = True
        return segment.read_span(offset, max_bytes, max_position=max_position,
                                 min_one_batch=min_one_batch)

    def read_record(self, offset: int, *, check_crcs: bool = True) -> Any:
        """``Segment.read_record``."""
        segment = self._segment
        if segment is None:
            segment = self._open()
        else:
            self.used = True
        return segment.read_record(offset, check_crcs=check_crcs)

    def read_value(self, offset: int, default: Any = None, *, check_crcs: bool = True) -> Any:
        """``Segment.read_value``."""
        segment = self._segment
        if segment is None:
            segment = self._open()
        else:
            self.used = True
        return segment.read_value(offset, default, check_crcs=check_crcs)

    def read_range(self, offset: int, max_bytes: int, *, max_position: int | None = None,
                   min_one_batch: bool = True) -> tuple[int, int]:
        """``Segment.read_range``."""
        segment = self._segment
        if segment is None:
            segment = self._open()
        else:
            self.used = True
        return segment.read_range(offset, max_bytes, max_position=max_position,
                                  min_one_batch=min_one_batch)

    def sendfile(self, out_fd: int, offset: int, max_bytes: int, *,
                 max_position: int | None = None) -> tuple[int, int]:
        """``Segment.sendfile``."""
        segment = self._segment
        if segment is None:
            segment = self._open()
        else:
            self.used = True
        return segment.sendfile(out_fd, offset, max_bytes, max_position=max_position)

    def batches(self, start_position: int = 0) -> Iterator[Any]:
        """``Segment.batches``; the segment is pinned (never evicted) while it runs."""
        segment = self._open()
        self._pins += 1
        try:
            yield from segment.batches(start_position)
        finally:
            self._pins -= 1

    def find_offset_by_timestamp(self, timestamp_ms: int, starting_offset: int = 0) -> Any:
        """``Segment.find_offset_by_timestamp``."""
        return self._open().find_offset_by_timestamp(timestamp_ms, starting_offset)

    def truncate_to(self, offset: int) -> int:
        """``Segment.truncate_to``."""
        self._dirty = True
        self._settled = False
        removed = self._open().truncate_to(offset)
        self._unsynced = True
        return removed

    def recover(self) -> Any:
        """``Segment.recover``."""
        self._dirty = True
        self._settled = False
        result = self._open().recover()
        self._unsynced = True
        return result

    def resize_indexes(self, max_index_bytes: int | None = None) -> None:
        """Give the indexes room for appends: applied before the next append or index use,
        so an idle active segment's files are not touched (module docstring)."""
        if max_index_bytes is None:
            max_index_bytes = self.max_index_bytes
        self._settled = False
        self._room_bytes = max_index_bytes
        self._room_pending = True

    def note_room(self, max_index_bytes: int) -> None:
        """The open indexes already have room for ``max_index_bytes`` (a segment just created
        with it): given back after the cache closed and reopened the segment."""
        self._room_bytes = max_index_bytes
        self._room_pending = self._segment is None

    def on_become_inactive(self) -> None:
        """``Segment.on_become_inactive`` (the segment rolled: no room any more)."""
        segment = self._writable()
        segment.on_become_inactive()
        self._room_bytes = None
        self._room_pending = False
        self._dirty = False  # trimmed and synced: what a close would do
        self._settled = True

    def flush(self) -> None:
        """``Segment.flush`` (fdatasync of the ``.log``); an evicted segment with unsynced
        bytes is synced through a descriptor of its own, a clean one needs nothing."""
        segment = self._segment
        if segment is not None:
            segment.flush()
        elif self._closed:
            from ..errors import LogClosedError

            raise LogClosedError(f"segment {self.log_path} is closed")
        elif self.read_only:
            from ..errors import ReadOnlyError

            raise ReadOnlyError(f"segment {self.log_path} was opened read-only")
        elif self._unsynced:
            fd = os.open(self.log_path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        self._unsynced = False

    def refresh(self) -> None:
        """``Segment.refresh`` (read-only); an unopened segment reads afresh when opened."""
        if self._segment is not None:
            self._segment.refresh()
        else:
            self._state = None

    def views_outstanding(self) -> bool:
        """``Segment.views_outstanding`` (False when the files are not open)."""
        segment = self._segment
        return segment is not None and segment.views_outstanding()

    def close(self) -> None:
        """Close the files for good (``Segment.close``); a segment the cache released while
        dirty is opened once more to be closed properly (trimmed indexes, the final
        time-index entry, synced). A segment rolled and only read since
        (``on_become_inactive`` did what a close does) is released instead: the same files,
        without the msync of two unchanged mappings. Idempotent."""
        if self._closed:
            return
        self._closed = True
        segment, self._segment = self._segment, None
        if segment is not None:
            self._cache.closed(self)
            if self._settled and not self._dirty and not self.read_only:
                segment.release()
                return
        elif self._dirty and not self.read_only:
            segment = self._open_backend(self.base_offset, file_suffix=self.file_suffix)
        if segment is not None:
            segment.close()

    def delete(self) -> None:
        """Close and remove the segment's files (missing ones are ignored)."""
        segment = self._segment
        self._closed = True
        self._segment = None
        if segment is not None:
            self._cache.closed(self)
            segment.delete()
            return
        for path in (self.log_path, self.index_path, self.time_index_path):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename every file from the current suffix to ``new_suffix``."""
        segment = self._segment
        if segment is not None:
            segment.rename_suffix(new_suffix)
            self.file_suffix = new_suffix
            return
        old = (self.log_path, self.index_path, self.time_index_path)
        self.file_suffix = new_suffix
        for src, dst in zip(old, (self.log_path, self.index_path, self.time_index_path)):
            if os.path.exists(src):
                os.replace(src, dst)

    def __enter__(self) -> "LazySegment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "open" if self._segment is not None else ("closed" if self._closed else "lazy")
        return f"LazySegment({self.log_path!r}, base_offset={self.base_offset}, {state})"
