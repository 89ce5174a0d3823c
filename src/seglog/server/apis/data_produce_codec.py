"""The Produce response body (API key 0, v3-v13) encoded by hand: the answer to every produce
request, where kio's entity classes cost more than the rest of the handler (building the
entities and writing them took ~60 µs of a ~120 µs one-record produce).

The layout follows Kafka's ``ProduceResponse.json``: responses (topic name, or its id from
v13; partitions: index, error code, base offset, log append time, log start offset (v5+),
record errors and error message (v8+)), then throttle_time_ms; v9+ are flexible (compact
arrays and strings, an empty tagged-field section after every struct: ``current_leader`` and
``node_endpoints`` are never sent, as they only name another leader).
"""

from __future__ import annotations

import struct
import uuid
from typing import Protocol, Sequence, Union, cast

from .data_wire import INT32, array_length, nullable_string, string

__all__ = ["PartitionOutcome", "RecordErrors", "TopicKey", "encode_produce_response"]

#: A topic as a Produce response names it: its name (v3-v12) or its id (v13; None: the zero
#: uuid, as kio reads it).
TopicKey = Union[str, uuid.UUID, None]
#: ``((record index, message), ...)``: the records of a batch Kafka names in its answer.
RecordErrors = tuple[tuple[int, str], ...]


class PartitionOutcome(Protocol):
    """One partition's answer as the encoder reads it."""

    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None
    record_errors: RecordErrors

_PARTITION_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... log start offset
_NO_THROTTLE = INT32.pack(0)
#: A v8+ partition's end without record errors or message: an empty array, a null string
#: (and, flexible, the partition's empty tagged fields).
_PLAIN_END = array_length(0, False) + nullable_string(None, False)
_PLAIN_END_FLEXIBLE = array_length(0, True) + nullable_string(None, True) + b"\x00"


def encode_produce_response(version: int,
                            answers: Sequence[tuple[TopicKey,
                                                    Sequence[tuple[int, PartitionOutcome]]]],
                            *, throttle_time_ms: int = 0) -> bytes:
    """The body of a Produce response of ``version`` (3..13). ``answers`` is ``[(topic name,
    or uuid.UUID for v13, [(partition index, outcome), ...]), ...]``; an outcome has
    ``error_code``, ``base_offset``, ``log_append_time_ms``, ``log_start_offset``,
    ``error_message`` (str or None) and ``record_errors`` (``[(batch index, message)]``);
    ``throttle_time_ms``: a quota's throttle time (0: none)."""
    flexible = version >= 9
    by_id = version >= 13
    out = bytearray(array_length(len(answers), flexible))
    for key, outcomes in answers:
        if by_id:
            out += key.bytes if isinstance(key, uuid.UUID) else bytes(16)
        else:
            # v3-v12 name the topic: the key is the request's topic name then.
            out += string(cast(str, key), flexible)
        out += array_length(len(outcomes), flexible)
        for index, o in outcomes:
            if version >= 5:
                out += _PARTITION_V5.pack(index, o.error_code, o.base_offset,
                                          o.log_append_time_ms, o.log_start_offset)
            else:
                out += _PARTITION_V3.pack(index, o.error_code, o.base_offset,
                                          o.log_append_time_ms)
            if version >= 8 and not o.record_errors and o.error_message is None:
                # The usual partition: no record errors, a null message (and its tags).
                out += _PLAIN_END_FLEXIBLE if flexible else _PLAIN_END
                continue
            if version >= 8:
                out += array_length(len(o.record_errors), flexible)
                for batch_index, message in o.record_errors:
                    out += INT32.pack(batch_index)
                    out += nullable_string(message, flexible)
                    if flexible:
                        out += b"\x00"
                out += nullable_string(o.error_message, flexible)
            if flexible:
                out += b"\x00"  # the partition's tagged fields
        if flexible:
            out += b"\x00"  # the topic's tagged fields
    out += INT32.pack(throttle_time_ms) if throttle_time_ms else _NO_THROTTLE
    if flexible:
        out += b"\x00"  # the response's tagged fields
    return bytes(out)
