"""The argument checks the clients and the coordinators share, raising :mod:`seglog.errors`.

Every bad argument of a Producer, a Consumer, a group or the transaction coordinator is one of
:class:`~seglog.errors.InvalidArgumentError` (also a ``ValueError``) or
:class:`~seglog.errors.InvalidArgumentTypeError` (also a ``TypeError``), or a subclass naming
Kafka's error code (INVALID_GROUP_ID, OFFSET_METADATA_TOO_LARGE, ...), so the wire broker can
answer every failure with a Kafka error code and Python callers can still catch the built-in
types. The integer checks are :func:`seglog.storage.config.check_int`'s, with its messages.

Imports only leaves (errors, types) and ``storage.config``; the clients and the coordinators
import it, never the other way round.
"""

from __future__ import annotations

from typing import Any

from .errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidGroupIdError,
    OffsetMetadataTooLargeError,
)
from .storage.config import INT64_MAX, INT64_MIN, check_int
from .types import OffsetAndMetadata, TopicPartition

__all__ = ["OFFSET_METADATA_BYTES_MAX", "TRANSACTIONAL_ID_BYTES_MAX", "as_offset_and_metadata",
           "check_commit_offset", "check_group_id", "check_int_argument",
           "check_optional_int_argument", "check_transactional_id"]

#: Largest metadata string of a commit (Kafka's ``offset.metadata.max.bytes``).
OFFSET_METADATA_BYTES_MAX = 4096
#: Longest transactional id (Kafka: a string field, 32767 bytes).
TRANSACTIONAL_ID_BYTES_MAX = 0x7FFF


def check_int_argument(name: str, value: Any, *, minimum: int = INT64_MIN,
                       maximum: int = INT64_MAX) -> int:
    """:func:`~seglog.storage.config.check_int` (``value`` as a plain int, ``__index__``
    accepted, bool refused) raising :class:`InvalidArgumentTypeError` for a non-integer and
    :class:`InvalidArgumentError` for a value outside ``[minimum, maximum]``."""
    try:
        return check_int(name, value, minimum=minimum, maximum=maximum)
    except TypeError as exc:
        raise InvalidArgumentTypeError(str(exc)) from None
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None


def check_optional_int_argument(name: str, value: Any, *, minimum: int = INT64_MIN,
                                maximum: int = INT64_MAX) -> int | None:
    """:func:`check_int_argument` for an argument where None means "not given"."""
    if value is None:
        return None
    return check_int_argument(name, value, minimum=minimum, maximum=maximum)


def check_group_id(group_id: Any) -> str:
    """``group_id`` if it is a non-empty str, else :class:`InvalidGroupIdError`
    (INVALID_GROUP_ID, also a ValueError)."""
    if not isinstance(group_id, str) or not group_id:
        raise InvalidGroupIdError(f"group_id must be a non-empty str, got {group_id!r}")
    return group_id


def check_transactional_id(transactional_id: Any) -> str:
    """``transactional_id`` if it is a non-empty str that fits Kafka's string field (32767
    bytes of UTF-8), else :class:`InvalidArgumentError` (a ValueError)."""
    if not isinstance(transactional_id, str) or not transactional_id:
        raise InvalidArgumentError(
            f"transactional_id must be a non-empty str, got {transactional_id!r}")
    if len(transactional_id.encode("utf-8")) > TRANSACTIONAL_ID_BYTES_MAX:
        raise InvalidArgumentError(
            f"transactional_id is longer than {TRANSACTIONAL_ID_BYTES_MAX} bytes")
    return transactional_id


def as_offset_and_metadata(value: Any) -> OffsetAndMetadata:
    """A commit's value as an :class:`OffsetAndMetadata`: one is returned as is, an
    ``(offset, metadata)`` tuple or a bare offset is converted (not checked: see
    :func:`check_commit_offset`)."""
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, tuple):
        return OffsetAndMetadata(value[0], value[1])
    return OffsetAndMetadata(value)


def check_commit_offset(tp: TopicPartition, om: OffsetAndMetadata) -> None:
    """Check an offset to commit for ``tp``: :class:`InvalidArgumentError` (a ValueError)
    for an offset that is negative, out of int64 or not an int (a ValueError for a wrong
    type too: commit has always said so), :class:`OffsetMetadataTooLargeError` for metadata
    over :data:`OFFSET_METADATA_BYTES_MAX` bytes."""
    try:
        check_int(f"offset to commit for {tp}", om.offset, minimum=0)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(str(exc)) from None
    if len(om.metadata.encode("utf-8")) > OFFSET_METADATA_BYTES_MAX:
        raise OffsetMetadataTooLargeError(
            f"metadata for {tp} is longer than {OFFSET_METADATA_BYTES_MAX} bytes "
            "(OFFSET_METADATA_TOO_LARGE)")
