"""Which segments retention may delete: Kafka's ``UnifiedLog.deletableSegments`` and its three
breach rules, as pure functions over a :class:`~seglog.storage.segments.SegmentMap`.

The Log decides *what* to delete here and does the deleting itself (roll first when the active
segment goes, rename to ``.deleted``, move the start offset). Rules (Kafka's ``UnifiedLog``):

* Deletion is whole segments only, walked oldest first, and it **stops at the first segment
  that is not deletable**: retention never opens a hole in the middle of a log.
* A segment is deletable only if the high watermark is at or above its upper bound (the next
  segment's base offset, or the log end offset for the last segment): nothing at or above the
  high watermark is ever deleted.
* The last segment is never deletable while it is empty (there must always be one segment, and
  deleting an empty active segment would achieve nothing).
* Time (``retention.ms``): deletable when ``now - largest timestamp > retention.ms``; the
  largest timestamp is the segment's max record timestamp, or its file's mtime when it has no
  timestamped record. Record order inside a segment does not matter. ``retention.ms < 0`` is
  unlimited.
* Size (``retention.bytes``): with ``diff = log size - retention.bytes``, delete oldest segments
  while ``diff - segment size >= 0``, subtracting each. ``retention.bytes < 0`` or a log
  smaller than it deletes nothing.
* Start offset: a segment is deletable when the next segment's base offset is <= the log start
  offset (everything in it is below the start, e.g. after ``delete_records_before``).
"""

from __future__ import annotations

from typing import Any, Callable

from .segments import SegmentMap

__all__ = [
    "deletable_segments",
    "largest_timestamp_ms",
    "retention_bytes_breached",
    "retention_ms_breached",
    "start_offset_breached",
]

#: ``predicate(segment, next_segment_or_None) -> bool``
Predicate = Callable[[Any, Any], bool]


def largest_timestamp_ms(segment: Any) -> int:
    """The timestamp retention.ms compares against: the segment's max record timestamp, or the
    ``.log`` file's mtime when no batch carried one (Kafka's ``LogSegment.largestTimestamp``)."""
    ts = segment.max_timestamp_ms
    return ts if ts >= 0 else segment.last_modified_ms


def deletable_segments(
    segment_map: SegmentMap,
    predicate: Predicate,
    *,
    high_watermark: int,
    end_offset: int,
) -> list[Any]:
    """The oldest run of segments that ``predicate`` allows and the high watermark covers.

    Walks oldest to newest and stops at the first segment where the high watermark is below
    its upper bound, the predicate is false, or it is the last segment and empty. The
    predicate is called in order and only until the walk stops, so it may keep state (the
    size rule does).
    """
    out: list[Any] = []
    segments = segment_map.segments
    for i, segment in enumerate(segments):
        next_segment = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = end_offset if next_segment is None else next_segment.base_offset
        if high_watermark < upper_bound:
            break
        if next_segment is None and segment.size_bytes == 0:
            break
        if not predicate(segment, next_segment):
            break
        out.append(segment)
    return out


def retention_ms_breached(retention_ms: int, now_ms: int) -> Predicate | None:
    """The retention.ms rule, or None when it is disabled (``retention_ms < 0``)."""
    if retention_ms < 0:
        return None

    def breached(segment: Any, _next: Any) -> bool:
        return now_ms - largest_timestamp_ms(segment) > retention_ms

    return breached


def retention_bytes_breached(retention_bytes: int, log_size_bytes: int) -> Predicate | None:
    """The retention.bytes rule, or None when it is disabled or the log is small enough.

    The returned predicate is stateful: it subtracts each segment it allows from the excess.
    """
    if retention_bytes < 0 or log_size_bytes < retention_bytes:
        return None
    excess = [log_size_bytes - retention_bytes]

    def breached(segment: Any, _next: Any) -> bool:
        if excess[0] - segment.size_bytes >= 0:
            excess[0] -= segment.size_bytes
            return True
        return False

    return breached


def start_offset_breached(log_start_offset: int) -> Predicate:
    """The log-start-offset rule: the whole segment lies below the log start offset."""

    def breached(_segment: Any, next_segment: Any) -> bool:
        return next_segment is not None and next_segment.base_offset <= log_start_offset

    return breached
