"""The value types every layer above storage shares: where a record lives
(:class:`TopicPartition`), a record as a consumer sees it (:class:`ConsumerRecord`), a committed
offset (:class:`OffsetAndMetadata`), where a sent record was written (:class:`RecordMetadata`),
a group member's share of the partitions (:class:`MemberAssignment`), and the coercion of a
``(topic, partition)`` pair (:func:`as_topic_partition`) every layer checks its arguments with.

A leaf module: it imports only :mod:`seglog.errors` and the backend switch
(:mod:`seglog._backend`, whose native or pure ``ConsumerRecord`` this module names), so the store, the coordinators, the
clients and (next) the wire broker can all name these types without importing each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

from . import _backend
from .errors import InvalidArgumentTypeError

__all__ = ["ConsumerRecord", "MemberAssignment", "OffsetAndMetadata", "RecordMetadata",
           "ShareConsumerRecord",
           "TopicPartition", "as_topic_partition"]


class TopicPartition(NamedTuple):
    """A topic name and a partition number (Kafka's ``TopicPartition``)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ShareConsumerRecord(NamedTuple):
    """One record as a share consumer sees it: a :class:`ConsumerRecord`'s fields and its
    ``delivery_count``, how many times the share group has delivered it (1 the first time;
    Kafka's ``ConsumerRecord.deliveryCount()``)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    delivery_count: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next offset to read), its metadata string, the leader epoch
    (-1 unknown) and when it was committed (ms since the epoch)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    commit_timestamp_ms: int = -1


class RecordMetadata(NamedTuple):
    """Where a record was written: topic, partition, offset and its timestamp (ms)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class MemberAssignment(NamedTuple):
    """What a group member gets from its coordinator (Kafka's SyncGroup answer): the
    ``generation_id`` of the assignment, its ``partitions`` (a list, empty for an idle
    member), and ``owned_since``: ``{tp: generation since which this member has owned tp
    without a break}``, so a member that missed rebalances keeps a position only if it never
    lost the partition in between."""

    generation_id: int
    partitions: list
    owned_since: dict


def as_topic_partition(tp: Any) -> TopicPartition:
    """``tp`` as a :class:`TopicPartition`: one is returned as is, any other
    ``(topic, partition)`` pair is converted. Raises
    :class:`~seglog.errors.InvalidArgumentTypeError` (a TypeError) for anything that is not a
    pair. The names are not checked here: the store raises UnknownTopicOrPartitionError."""
    if isinstance(tp, TopicPartition):
        return tp
    try:
        topic, partition = tp
    except (TypeError, ValueError):
        raise InvalidArgumentTypeError(
            f"expected a (topic, partition) pair, got {tp!r}") from None
    return TopicPartition(topic, partition)


if TYPE_CHECKING:
    class ConsumerRecord:
        """One record as a consumer sees it: where it is (``topic``, ``partition``,
        ``offset``) and what it holds (``timestamp_ms``, ``key``, ``value``, ``headers``).

        ``key``/``value`` are ``bytes`` or None; ``headers`` a tuple of ``(str, bytes |
        None)`` pairs. The fields are read-only. At run time this name is the default
        backend's class (``seglog._native.codec.ConsumerRecord``, a native type without a
        cyclic-GC header, or its pure twin when the extension is not built or
        ``SEGLOG_BACKEND=pure``): one type in a process, which either backend's consumer
        returns.

        **Not a tuple subclass since issue 27** (it was a ``NamedTuple``): it keeps
        ``tuple(record)``, unpacking, ``record[i]`` and slices, ``len``, ``_fields``,
        ``_asdict()``, ``_replace(**fields)``, ``_make(iterable)``, class patterns
        (``__match_args__``), pickling, the NamedTuple's ``repr``, and equality, hash and
        order of the tuple of its fields (``record == (topic, partition, ...)`` still
        holds); ``isinstance(record, tuple)`` is now False and ``record + (x,)`` is gone
        (write ``(*record, x)``). Why: a poll makes thousands at once, and the tuple
        subclass's GC header, ``int`` object per offset and the young-generation
        collections they triggered cost half a poll's time over the core's scan.
        """

        _fields: tuple[str, ...]
        __match_args__ = ("topic", "partition", "offset", "timestamp_ms", "key", "value",
                          "headers")

        def __init__(self, topic: str, partition: int, offset: int, timestamp_ms: int,
                     key: bytes | None, value: bytes | None, headers: tuple) -> None: ...
        @property
        def topic(self) -> str: ...
        @property
        def partition(self) -> int: ...
        @property
        def offset(self) -> int: ...
        @property
        def timestamp_ms(self) -> int: ...
        @property
        def key(self) -> bytes | None: ...
        @property
        def value(self) -> bytes | None: ...
        @property
        def headers(self) -> tuple: ...
        @classmethod
        def _make(cls, iterable: Any) -> ConsumerRecord: ...
        def _asdict(self) -> dict[str, Any]: ...
        def _replace(self, **changes: Any) -> ConsumerRecord: ...
        def __len__(self) -> int: ...
        def __iter__(self) -> Iterator[Any]: ...
        def __getitem__(self, index: Any) -> Any: ...
        def __hash__(self) -> int: ...
else:
    def __getattr__(name: str) -> Any:
        # ConsumerRecord, resolved on first use rather than when this leaf loads: the
        # backends import modules that import this one (an import cycle at load time).
        if name == "ConsumerRecord":
            record_type = _backend.default_backend().ConsumerRecord
            globals()["ConsumerRecord"] = record_type
            return record_type
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: :class:`ConsumerRecord` at run time (the name this module resolves on first use): one
#: record as a consumer sees it: ``topic``, ``partition``, ``offset``, ``timestamp_ms``,
#: ``key``, ``value``, ``headers`` (read-only). It is the default backend's class
#: (``seglog._native.codec.ConsumerRecord``, or its pure twin ``seglog.pure.codec``'s when
#: the extension is not built or ``SEGLOG_BACKEND=pure``): one type in a process, so
#: ``isinstance(record, ConsumerRecord)`` holds for what either backend's consumer returns
#: (both build the type they are given). Tuple-like but not a tuple subclass since issue 27;
#: its docstring says what it keeps of the NamedTuple it was.
