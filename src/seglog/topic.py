"""One topic of a :class:`~seglog.store.Store`: its partitions' Logs, config and partitioner
(:class:`Topic`), owned by a :class:`~seglog.log_manager.LogManager`."""

from __future__ import annotations

import uuid
from typing import Any, Mapping, Protocol, Sequence

from .clients.partitioner import partition_for_key
from .config_table import topic_key
from .errors import (
    InvalidConfigError,
    LogClosedError,
    PartitionOfflineError,
    UnknownTopicOrPartitionError,
)
from .storage import checkpoints
from .storage.config import TOPIC_CONFIG_NAMES, LogConfig
from .storage.log import Log
from .types import TopicPartition

__all__ = ["Topic", "TopicOwner", "as_config"]


def as_config(config: LogConfig | Mapping[str, Any] | None,
              defaults: LogConfig | None = None) -> LogConfig:
    """``config`` as a :class:`LogConfig`: a LogConfig as it is, a mapping of Kafka dotted
    names or snake-case names over ``defaults`` (None: Kafka's own defaults), None the
    defaults. InvalidConfigError for a dotted name that is not a topic config (Kafka's
    CreateTopics refuses broker settings and unknown names alike) or a bad value."""
    if config is None:
        return LogConfig() if defaults is None else defaults
    if isinstance(config, LogConfig):
        return config
    if not isinstance(config, Mapping):
        raise InvalidConfigError(f"config must be a LogConfig or a mapping, got "
                                 f"{type(config).__name__}")
    for name in config:
        if isinstance(name, str) and "." in name and name not in TOPIC_CONFIG_NAMES:
            # Kafka's CreateTopics refuses broker settings and unknown names alike; a Kafka
            # topic config seglog does not implement is refused by name.
            topic_key(name, suggest=False)
    if defaults is not None:
        return defaults.replace(**config)
    return LogConfig.from_dict(config)


class _OfflineErrors(Protocol):
    def error(self, tp: TopicPartition) -> PartitionOfflineError:
        ...


class TopicOwner(Protocol):
    """What a :class:`Topic` asks of its owner (a LogManager)."""

    @property
    def closed(self) -> bool:
        """Whether the owner was closed."""
        ...

    @property
    def offline(self) -> _OfflineErrors:
        """The offline partitions (the error a use of one raises)."""
        ...

    @property
    def internal_topic_configs(self) -> Mapping[str, Mapping[str, str]]:
        """The internal topics' configs, by name."""
        ...


class Topic:
    """One topic of a :class:`~seglog.store.Store`: its partitions' Logs, config and partitioner.

    ``name``, ``partitions`` (count), ``config`` (:class:`~seglog.storage.config.LogConfig`),
    ``topic_id`` (Kafka's base64url uuid text), ``is_internal``. Obtained from
    :meth:`Store.create_topic <seglog.store.Store.create_topic>` or :meth:`Store.topic
    <seglog.store.Store.topic>`; valid until the topic is deleted or the store closed (then
    :meth:`log` raises). Thread-safe: the partition list is replaced, never changed in place.
    """

    def __init__(self, manager: TopicOwner, name: str, topic_id: uuid.UUID, config: LogConfig,
                 logs: Sequence[Log | None]):
        self._manager = manager
        self.name = name
        self.topic_id = checkpoints.uuid_to_kafka_str(topic_id)
        #: The topic id as a uuid.
        self.uuid = topic_id
        self.config = config
        #: The partitions' Logs (None: offline); the owner replaces the list, never changes
        #: it in place, so a reader that took it keeps a consistent view.
        self.logs: list[Log | None] = list(logs)
        #: Set by the owner when the topic is deleted (:meth:`log` raises from then on).
        self.deleted = False

    def with_log(self, partition: int, log: Log | None) -> None:
        """Replace the Log of ``partition`` (a new list; see :attr:`logs`)."""
        self.logs = [log if i == partition else other for i, other in enumerate(self.logs)]

    @property
    def partitions(self) -> int:
        """The partition count."""
        return len(self.logs)

    @property
    def is_internal(self) -> bool:
        """Whether this is one of Kafka's internal topics (``__consumer_offsets``,
        ``__transaction_state``)."""
        return self.name in self._manager.internal_topic_configs

    def partition_for(self, key: bytes | bytearray | memoryview) -> int:
        """The partition Kafka's default partitioner picks for ``key`` (murmur2, positive,
        modulo the partition count), identical to Kafka's clients. TypeError for None (keyless
        records are spread by the producer's sticky partitioner)."""
        return partition_for_key(key, len(self.logs))

    def log(self, partition: int) -> Log:
        """The :class:`~seglog.storage.log.Log` of ``partition``. Raises
        :class:`UnknownTopicOrPartitionError` for a partition out of range,
        :class:`LogClosedError` once the topic was deleted or the store closed, and
        :class:`PartitionOfflineError` for a partition whose files failed to load."""
        if self.deleted or self._manager.closed:
            raise LogClosedError(f"topic {self.name!r} is closed or deleted")
        if isinstance(partition, bool) or not isinstance(partition, int) \
                or not 0 <= partition < len(self.logs):
            raise UnknownTopicOrPartitionError(
                f"topic {self.name!r} has no partition {partition!r} "
                f"(it has {len(self.logs)})")
        log = self.logs[partition]
        if log is None or log.load_failure is not None:
            raise self._manager.offline.error(TopicPartition(self.name, partition))
        return log

    def open_logs(self) -> list[tuple[int, Log]]:
        """``[(partition, Log)]`` of the partitions whose Log opened, in partition order."""
        return [(p, log) for p, log in enumerate(self.logs) if log is not None]

    def topic_partitions(self) -> list[TopicPartition]:
        """Every :class:`TopicPartition` of the topic, in partition order."""
        return [TopicPartition(self.name, p) for p in range(len(self.logs))]

    def end_offsets(self) -> dict[int, int]:
        """``{partition: end offset}`` (the offset the next record will get)."""
        return {p: log.end_offset for p, log in self.open_logs()}

    def start_offsets(self) -> dict[int, int]:
        """``{partition: log start offset}`` (the first offset still readable)."""
        return {p: log.start_offset for p, log in self.open_logs()}

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={len(self.logs)}, id={self.topic_id})"
