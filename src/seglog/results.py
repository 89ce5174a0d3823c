"""Result records shared by both backends' Segment (one definition, so the twins compare equal)."""

from __future__ import annotations

from typing import NamedTuple


class AppendResult(NamedTuple):
    """What ``Segment.append`` wrote: offsets ``first_offset..last_offset``; the largest batch
    max timestamp (-1 if none) and the last offset of the first batch that carried it; the
    ``position`` and ``size_bytes`` of the written range in the ``.log``; ``batch_count``."""

    first_offset: int
    last_offset: int
    max_timestamp_ms: int
    offset_of_max_timestamp: int
    position: int
    size_bytes: int
    batch_count: int


class RecoveryResult(NamedTuple):
    """What ``Segment.recover`` found: ``valid_bytes`` kept, ``truncated_bytes`` cut, the
    ``reason`` (``''`` when nothing was cut, else a ``seglog.format.REASON_*`` string) and the
    ``position`` of the first invalid byte (-1 when nothing was cut)."""

    valid_bytes: int
    truncated_bytes: int
    reason: str
    position: int
