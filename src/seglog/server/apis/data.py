"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata: the data path.

The handler table of the data APIs; each API lives in its own module:
:mod:`.data_metadata` (Metadata), :mod:`.data_produce` (Produce), :mod:`.data_fetch` with
:mod:`.data_fetch_codec` (Fetch, its response encoded by hand around zero-copy record sets),
:mod:`.data_offsets` (ListOffsets, OffsetForLeaderEpoch), and :mod:`.data_topics` for what
they share (topic lookups by name and id, error codes, the leader epoch). The version ranges
are those both kio and Apache Kafka 4.4 serve.
"""

from __future__ import annotations

from ..context import BrokerState
from ..registry import ApiHandler
from . import data_fetch, data_metadata, data_offsets, data_produce
from .data_topics import EXTENSION_KEY, TopicIds

__all__ = ["HANDLERS", "start", "stop"]

HANDLERS: tuple[ApiHandler, ...] = (
    # Raw: the request body is read by hand (data_produce_request), the records not copied.
    ApiHandler(data_produce.API_KEY, data_produce.VERSION_MIN, data_produce.VERSION_MAX,
               data_produce.handle_produce_body, raw_request=True),
    ApiHandler(data_fetch.API_KEY, data_fetch.VERSION_MIN, data_fetch.VERSION_MAX,
               data_fetch.handle_fetch),
    ApiHandler(data_offsets.LIST_OFFSETS_KEY, data_offsets.LIST_OFFSETS_VERSION_MIN,
               data_offsets.LIST_OFFSETS_VERSION_MAX, data_offsets.handle_list_offsets),
    # Raw: a big request is decoded on a worker thread, not on the loop (data_metadata).
    ApiHandler(data_metadata.API_KEY, data_metadata.VERSION_MIN, data_metadata.VERSION_MAX,
               data_metadata.handle_metadata, raw_request=True),
    ApiHandler(data_offsets.OFFSET_FOR_LEADER_EPOCH_KEY,
               data_offsets.OFFSET_FOR_LEADER_EPOCH_VERSION_MIN,
               data_offsets.OFFSET_FOR_LEADER_EPOCH_VERSION_MAX,
               data_offsets.handle_offset_for_leader_epoch),
)


async def start(state: BrokerState) -> None:
    """Make the data APIs' per-broker state: the topic-id map (``state.extensions``)."""
    state.extensions[EXTENSION_KEY] = TopicIds(state.store, state.cluster)


async def stop(state: BrokerState) -> None:
    """Drop the per-broker state."""
    state.extensions.pop(EXTENSION_KEY, None)
