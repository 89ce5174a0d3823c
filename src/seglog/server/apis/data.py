"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata: the data path."""

from __future__ import annotations

from ..registry import ApiHandler

HANDLERS: tuple[ApiHandler, ...] = ()
