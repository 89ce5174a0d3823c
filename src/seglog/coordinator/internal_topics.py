"""What the coordinators need from storage, and nothing more: :class:`InternalTopics`.

The group and transaction coordinators keep their state in Kafka's internal topics
(``__consumer_offsets``, ``__transaction_state``) and check the partitions clients name. They
get both through this narrow Protocol, which the :class:`~seglog.store.Store` implements and
passes in (and the wire broker will, over the same Store): a coordinator never imports the
store or a client, and never touches their private state.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ..types import TopicPartition

__all__ = ["InternalTopics", "TopicLogs"]


class TopicLogs(Protocol):
    """One topic as a coordinator sees it: its ``name``, its partition count and each
    partition's :class:`~seglog.storage.log.Log` (the Store's ``Topic``)."""

    name: str

    @property
    def partitions(self) -> int:
        """The partition count."""
        ...

    def log(self, partition: int) -> Any:
        """The Log of ``partition``; UnknownTopicOrPartitionError out of range,
        LogClosedError once the topic is deleted or the store closed."""
        ...


class InternalTopics(Protocol):
    """Storage as the coordinators use it (implemented by the Store).

    ``lock`` serialises the metadata: every coordinator runs its transitions under it (lock
    order: this lock, then a Log's own). ``path`` names the data directory in messages;
    ``read_only`` says whether anything may be written.
    """

    path: str
    read_only: bool

    @property
    def lock(self) -> threading.RLock:
        """The metadata lock (re-entrant)."""
        ...

    def existing_topic(self, name: str) -> TopicLogs | None:
        """Topic ``name`` if it exists now (nothing is created), else None."""
        ...

    def internal_topic(self, name: str) -> TopicLogs:
        """Internal topic ``name`` (``__consumer_offsets`` or ``__transaction_state``),
        created with its partition count and config on first use, as Kafka creates them on
        the first FindCoordinator. Raises ReadOnlyError when it must be created read-only."""
        ...

    def partition_log(self, tp: TopicPartition) -> Any:
        """The Log of ``tp``; UnknownTopicOrPartitionError if it does not exist."""
        ...

    def partition_counts(self) -> dict[str, int]:
        """``{topic: partition count}`` of every topic now."""
        ...

    def check_writable(self) -> None:
        """Raise LogClosedError once closed, ReadOnlyError on a read-only store."""
        ...

    def notify_appended(self) -> None:
        """Records were appended (an offset commit, a transaction marker): wake the consumers
        that wait for appends."""
        ...
