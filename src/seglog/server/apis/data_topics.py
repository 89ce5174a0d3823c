"""How the data APIs see topics: lookups by name and by id, Kafka's error codes for what a
lookup or a partition operation raises, and the one leader epoch of a single-node broker.

Kafka's topic ids travel as 16 raw bytes on the wire (``uuid.UUID`` in kio) and as base64url
text in seglog's :class:`~seglog.store.Topic` (``topic_id``, Kafka's ``Uuid.toString``).
:class:`TopicIds` maps ids to topics for Fetch v13+, Produce v13 and Metadata v12+, rebuilt
from the store only when an id is not found or its topic is gone, so a fetch by id costs one
dict lookup.

Leader epochs. A lone broker is every partition's only replica and leader since the partition
was created, in epoch :data:`LEADER_EPOCH` (0), as a KRaft controller makes a new partition's
first leader; the fencing and epoch lookups are the seam's
(:class:`~seglog.cluster.single.SingleBroker`, the replica manager in a cluster).
"""

from __future__ import annotations

import functools
import re
import sys
import uuid
from typing import TYPE_CHECKING, Any

from ...schemas import load_response_schema

from ... import error_codes as codes
from ... import errors
from ...cluster.seam import PartitionSeam
from ...storage import checkpoints
from .broker_view import BrokerView

if TYPE_CHECKING:
    from ...store import Store, Topic

__all__ = [
    "LEADER_EPOCH", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "TopicIds", "error_code_for",
    "to_uuid", "topic_ids",
    "topic_or_none", "EXTENSION_KEY", "partition_seam",
    "valid_topic_name", "response_entities",
    "gone_or_storage_error",
]


#: Every partition's leader epoch on this broker (see the module docstring).
LEADER_EPOCH = 0
#: Kafka's ``LeaderEpochFileCache.UNDEFINED_EPOCH`` / ``UNDEFINED_EPOCH_OFFSET``.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

_ZERO_UUID = uuid.UUID(int=0)


#: Kafka's ``Topic.validate``: 1-249 characters of ASCII letters, digits, '.', '_', '-', and
#: not "." or ".." (the server may not import seglog.store, whose check this mirrors).
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def valid_topic_name(name: str) -> bool:
    """Whether ``name`` is a legal Kafka topic name (``Topic.validate``)."""
    return bool(_LEGAL_TOPIC_NAME.fullmatch(name)) and name not in (".", "..")


def error_code_for(exc: BaseException) -> int:
    """Kafka's error code for an exception a store or Log call raised: the
    ``kafka_error_code`` of a :class:`~seglog.errors.SeglogError` (UNKNOWN_SERVER_ERROR, -1,
    where Kafka has none), KAFKA_STORAGE_ERROR for an ``OSError`` (Kafka's answer when a log
    dir fails), UNKNOWN_SERVER_ERROR for anything else."""
    if isinstance(exc, errors.SeglogError):
        return int(getattr(exc, "kafka_error_code", codes.UNKNOWN_SERVER_ERROR))
    if isinstance(exc, OSError):
        return codes.KAFKA_STORAGE_ERROR
    return codes.UNKNOWN_SERVER_ERROR


@functools.lru_cache(maxsize=None)
def response_entities(api_key: int, version: int) -> tuple[type, Any]:
    """kio's response class of ``api_key`` at ``version`` and the module holding its nested
    entity classes, looked up once (kio resolves them by name, which costs microseconds)."""
    response = load_response_schema(api_key, version)
    return response, sys.modules[response.__module__]


def gone_or_storage_error(store: Store, topic: Topic | None, exc: BaseException) -> int:
    """The error code for ``exc`` raised by a partition of ``topic``: a closed Log of a topic
    that was deleted meanwhile is UNKNOWN_TOPIC_OR_PARTITION (what Kafka answers once the
    topic is gone), anything else :func:`error_code_for`."""
    if isinstance(exc, errors.LogClosedError) and topic is not None:
        try:
            if store.topic(topic.name) is not topic:
                return codes.UNKNOWN_TOPIC_OR_PARTITION
        except errors.UnknownTopicOrPartitionError:
            return codes.UNKNOWN_TOPIC_OR_PARTITION
        except errors.SeglogError:
            pass
    return error_code_for(exc)


def to_uuid(topic_id: str) -> uuid.UUID:
    """A :class:`~seglog.store.Topic`'s base64url ``topic_id`` as the ``uuid.UUID`` kio
    writes."""
    return checkpoints.uuid_from_kafka_str(topic_id)


#: The key of the data APIs' state in ``BrokerState.extensions``.
EXTENSION_KEY = "seglog.server.apis.data"


def partition_seam(broker: BrokerView) -> PartitionSeam:
    """The broker's :class:`~seglog.cluster.seam.PartitionSeam`: the cluster as every handler
    sees it, whether the broker runs alone or in a ZooKeeper cluster."""
    return broker.cluster


class TopicIds:
    """Topic id -> :class:`~seglog.store.Topic`: the id is the cluster's (what Metadata
    answers, the seam's :meth:`~seglog.cluster.seam.PartitionSeam.topic_name`), mapped to the
    local topic of the same name."""

    def __init__(self, store: Store, cluster: PartitionSeam):
        self._store = store
        self._cluster = cluster

    def topic(self, topic_id: uuid.UUID | None) -> Topic | None:
        """The local topic whose cluster topic id is ``topic_id``, or None (unknown, or the
        zero uuid)."""
        if topic_id is None or topic_id == _ZERO_UUID:
            return None
        return topic_or_none(self._store, self._cluster.topic_name(topic_id))


def topic_ids(broker: BrokerView) -> TopicIds:
    """The broker's :class:`TopicIds`, made on first use (kept in ``broker.extensions``)."""
    ids: TopicIds | None = broker.extensions.get(EXTENSION_KEY)
    if ids is None:
        ids = broker.extensions[EXTENSION_KEY] = TopicIds(broker.store, broker.cluster)
    return ids


def topic_or_none(store: Store, name: str | None) -> Topic | None:
    """The store's topic ``name``, or None when it has none (or ``name`` is None)."""
    if name is None:
        return None
    try:
        return store.topic(name)
    except errors.UnknownTopicOrPartitionError:
        return None
