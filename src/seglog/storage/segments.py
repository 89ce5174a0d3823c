"""The ordered map of a log's segments, keyed by base offset (Kafka's ``LogSegments``).

A log is a chain of segments sorted by base offset; the segment holding an offset is the one
with the greatest base offset <= it (a *floor* lookup, ``bisect``). Offsets may have gaps
(compaction, truncation, retention), so "holding" means "the only segment that could".

A :class:`SegmentMap` is immutable: every change (roll, deletion, truncation, replacement)
builds a new map and the Log publishes it with one attribute store. A reader therefore takes
one reference and walks a consistent chain without a lock, while the writer replaces the map
under it. Copying a list of a few thousand entries per roll costs microseconds.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any, Iterable, Iterator

if TYPE_CHECKING:
    from .._contract import Segment

__all__ = ["SegmentMap"]


class SegmentMap:
    """An immutable, sorted ``base_offset -> segment`` map.

    Segments are any objects with an int ``base_offset``. Lookups are O(log n); ``with_*``
    methods return a new map. Thread-safe because nothing in it changes.
    """

    __slots__ = ("_bases", "_segments")

    def __init__(self, segments: Iterable[Any] = ()):
        ordered = sorted(segments, key=lambda s: s.base_offset)
        bases = [s.base_offset for s in ordered]
        for i in range(1, len(bases)):
            if bases[i] == bases[i - 1]:
                raise ValueError(f"two segments with base offset {bases[i]}")
        self._bases = tuple(bases)
        self._segments = tuple(ordered)

    # --- size and iteration -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._segments)

    def __bool__(self) -> bool:
        return bool(self._segments)

    @property
    def bases(self) -> tuple[int, ...]:
        """Base offsets, ascending."""
        return self._bases

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Segments, ascending by base offset."""
        return self._segments

    def first(self) -> Segment | None:
        """The oldest segment, or None when the map is empty."""
        return self._segments[0] if self._segments else None

    def last(self) -> Segment | None:
        """The newest (active) segment, or None when the map is empty."""
        return self._segments[-1] if self._segments else None

    def oldest(self) -> Segment:
        """The oldest segment: as :meth:`active`, for a loaded log (IndexError when empty)."""
        return self._segments[0]

    def active(self) -> Segment:
        """The newest segment, where appends go: the map of a loaded log always holds one
        (its loader makes an empty one for a new log), so an empty map here is a bug
        (IndexError), never a state to serve on."""
        return self._segments[-1]

    # --- lookups ------------------------------------------------------------------------------

    def get(self, base_offset: int) -> Any | None:
        """The segment whose base offset is exactly ``base_offset``, or None."""
        i = bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return self._segments[i]
        return None

    def floor_index(self, offset: int) -> int:
        """Position in the map of the segment with the greatest base <= ``offset``, or -1."""
        return bisect_right(self._bases, offset) - 1

    def floor(self, offset: int) -> Any | None:
        """The segment with the greatest base offset <= ``offset`` (the one that may hold it)."""
        i = self.floor_index(offset)
        return self._segments[i] if i >= 0 else None

    def higher(self, base_offset: int) -> Any | None:
        """The first segment whose base offset is > ``base_offset``, or None."""
        i = bisect_right(self._bases, base_offset)
        return self._segments[i] if i < len(self._segments) else None

    def next_base(self, segment: Any) -> int | None:
        """Base offset of the segment after ``segment``, or None for the last one."""
        nxt = self.higher(segment.base_offset)
        return None if nxt is None else nxt.base_offset

    def from_offset(self, offset: int) -> tuple[Any, ...]:
        """Segments from the one holding ``offset`` (its floor) to the end, ascending.

        Like Kafka's ``LogSegments.values(from, MAX)``, this includes the floor segment; when
        ``offset`` is below every base it is every segment.
        """
        return self._segments[max(self.floor_index(offset), 0):]

    # --- building new maps --------------------------------------------------------------------

    def with_segment(self, segment: Any) -> "SegmentMap":
        """A new map with ``segment`` added, replacing any segment with the same base."""
        kept = [s for s in self._segments if s.base_offset != segment.base_offset]
        kept.append(segment)
        return SegmentMap(kept)

    def without(self, base_offsets: Iterable[int]) -> "SegmentMap":
        """A new map without the segments at ``base_offsets`` (absent ones are ignored)."""
        drop = set(base_offsets)
        return SegmentMap(s for s in self._segments if s.base_offset not in drop)

    def __repr__(self) -> str:
        return f"SegmentMap(bases={list(self._bases)!r})"
