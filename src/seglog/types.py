"""The value types every layer above storage shares: where a record lives
(:class:`TopicPartition`), a record as a consumer sees it (:class:`ConsumerRecord`), a committed
offset (:class:`OffsetAndMetadata`) and where a sent record was written (:class:`RecordMetadata`).

A leaf module: it imports nothing of seglog's, so the store, the coordinators, the clients and
(next) the wire broker can all name these types without importing each other.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ConsumerRecord", "OffsetAndMetadata", "RecordMetadata", "TopicPartition"]


class TopicPartition(NamedTuple):
    """A topic name and a partition number (Kafka's ``TopicPartition``)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ConsumerRecord(NamedTuple):
    """One record as a consumer sees it: where it is (topic, partition, offset) and what it
    holds (``timestamp_ms``, ``key``, ``value``, ``headers``)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple


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
