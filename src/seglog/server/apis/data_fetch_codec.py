"""The Fetch response body (API key 1, v4-v18) encoded by hand, so that each partition's record
set goes out as the zero-copy view of the segment file it was read from.

The body is a tuple of parts for :class:`~seglog.server.context.RawResponse`: runs of encoded
fields as ``bytes``, and between them each partition's records as the ``memoryview``
:meth:`Log.read <seglog.storage.log.Log.read>` returned. Nothing copies or decodes a record
set. The layout follows Kafka's ``FetchResponse.json``:

- v4-v6: throttle_time_ms, responses (topic name, partitions: index, error, high watermark,
  last stable offset, log start offset (v5+), aborted transactions, records);
- v7+: error_code and session_id after throttle_time_ms;
- v11+: preferred_read_replica before the records;
- v12+: flexible (compact arrays, strings and records, an empty tagged-field section after
  every struct; of the optional tagged fields only a partition's ``DivergingEpoch`` (tag 0)
  is sent, to a follower whose log diverged);
- v13+: the topic id (16 bytes) in place of its name.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NamedTuple, Sequence, cast

from .data_wire import INT32, array_length, string, uvarint

__all__ = ["PartitionResult", "encode_fetch_response", "fetch_body_bytes"]

_HEAD_V4 = struct.Struct(">i")  # throttle
_HEAD_V7 = struct.Struct(">ihi")  # throttle, error code, session id
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... log start offset
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_NO_PREFERRED_READ_REPLICA = INT32.pack(-1)
_DIVERGING = struct.Struct(">iq")  # epoch, end offset
_DIVERGING_TAG = b"\x01\x00" + bytes((_DIVERGING.size + 1,))  # 1 field, tag 0, its size


class PartitionResult(NamedTuple):
    """One partition of a Fetch response: ``aborted`` is a sequence of ``(producer_id,
    first_offset)`` or None (Kafka's null: read_uncommitted); ``records`` the record bytes
    (a memoryview of a segment, or ``b""``)."""

    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: Sequence[tuple[int, int]] | None
    records: bytes | memoryview
    #: ``(epoch, end offset)`` of Kafka's ``DivergingEpoch`` (v12+, tagged field 0) when a
    #: follower's last fetched epoch diverges from the leader's log; None: not sent.
    diverging_epoch: tuple[int, int] | None = None


def encode_fetch_response(version: int, *, throttle_time_ms: int, error_code: int,
                          session_id: int,
                          topics: Sequence[tuple[str | uuid.UUID | None,
                                                 Sequence[PartitionResult]]]
                          ) -> tuple[bytes | memoryview, ...]:
    """The body of a Fetch response of ``version`` (4..18) as a tuple of parts. ``topics`` is
    ``[(name or uuid.UUID, [PartitionResult, ...]), ...]``: a topic name for v4-v12, its id
    (``uuid.UUID``) for v13+."""
    flexible = version >= 12
    by_id = version >= 13
    parts: list[bytes | memoryview] = []
    out = bytearray()
    if version >= 7:
        out += _HEAD_V7.pack(throttle_time_ms, error_code, session_id)
    else:
        out += _HEAD_V4.pack(throttle_time_ms)
    out += array_length(len(topics), flexible)
    partition_struct = _PARTITION_V5 if version >= 5 else _PARTITION_V4
    for key, partitions in topics:
        if by_id:
            out += key.bytes if isinstance(key, uuid.UUID) else bytes(16)
        else:
            # v4-v12 name the topic: the key is the request's topic name then.
            out += string(cast(str, key), flexible)
        out += array_length(len(partitions), flexible)
        for p in partitions:
            if version >= 5:
                out += partition_struct.pack(p.partition, p.error_code, p.high_watermark,
                                             p.last_stable_offset, p.log_start_offset)
            else:
                out += partition_struct.pack(p.partition, p.error_code, p.high_watermark,
                                             p.last_stable_offset)
            aborted = p.aborted
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                out += array_length(len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out += b"\x00"
            if version >= 11:
                out += _NO_PREFERRED_READ_REPLICA
            records = p.records
            size_bytes = len(records)
            if flexible:
                out += uvarint(size_bytes + 1)
            else:
                out += INT32.pack(size_bytes)
            if size_bytes:
                parts.append(bytes(out))
                parts.append(records)
                out = bytearray()
            if flexible:
                diverging = p.diverging_epoch
                if diverging is None:
                    out += b"\x00"  # the partition's tagged fields: none
                else:
                    # One tagged field: tag 0, 13 bytes (epoch, end offset, no tags).
                    out += _DIVERGING_TAG + _DIVERGING.pack(*diverging) + b"\x00"
        if flexible:
            out += b"\x00"  # the topic's tagged fields
    if flexible:
        out += b"\x00"  # the response's tagged fields
    parts.append(bytes(out))
    return tuple(parts)


def fetch_body_bytes(parts: Sequence[Any]) -> bytes:
    """The parts joined (tests, and callers that need one buffer)."""
    return b"".join(bytes(part) for part in parts)
