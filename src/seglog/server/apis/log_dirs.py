"""AlterReplicaLogDirs (API 34, v1-2) as Kafka 4.4's ``ReplicaManager.alterReplicaLogDirs``
answers it on a broker with one log directory, which is what seglog serves (several entries
in ``log.dirs``, JBOD, are refused by name at start: not built).

Per partition, in Kafka's order: a topic name too long for the ``.future`` directory name
(``<topic>-<partition>.<uuid>-future`` over 255 bytes) is INVALID_TOPIC_EXCEPTION; a
destination that is not this broker's log directory (its absolute path, as DescribeLogDirs
reports it) is LOG_DIR_NOT_FOUND; a partition whose files failed to load is
KAFKA_STORAGE_ERROR; a partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION,
one this broker does not host (another broker's replica) REPLICA_NOT_AVAILABLE; a
partition hosted in the destination directory already is NONE (nothing to move, as Kafka
answers a move to the replica's current directory).

Authorization: ALTER on CLUSTER, else CLUSTER_AUTHORIZATION_FAILED for every partition.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from ... import error_codes as codes
from ...errors import SeglogError
from ...types import TopicPartition
from ..authorization import AclOperation, authorize_cluster
from ..context import RequestContext
from ..registry import ApiHandler
from .admin_wire import NO_THROTTLE, make, response_classes
from .data_topics import partition_seam

__all__ = ["FUTURE_DIR_NAME_BYTES_MAX", "HANDLERS", "alter_replica_log_dirs",
           "future_dir_name"]

#: The longest directory name (bytes) a file system takes: the ``.future`` name's bound.
FUTURE_DIR_NAME_BYTES_MAX = 255


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``UnifiedLog.logFutureDirName``: ``<topic>-<partition>.<uuid hex>-future``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}-future"


def _hosted(store: Any, topic: str) -> set[int]:
    """The partitions of ``topic`` whose logs this broker holds (none for an unknown topic)."""
    if topic not in store:
        return set()
    try:
        return {p for p, _log in store.topic(topic).open_logs()}
    except SeglogError:
        return set()  # deleted meanwhile


def _error(store: Any, seam: Any, log_dir: str, tp: TopicPartition, destination: str,
           offline: Any) -> int:
    if len(future_dir_name(tp.topic, tp.partition).encode("utf-8")) > FUTURE_DIR_NAME_BYTES_MAX:
        return codes.INVALID_TOPIC_EXCEPTION
    if destination != log_dir:
        return codes.LOG_DIR_NOT_FOUND
    if tp in offline:
        return codes.KAFKA_STORAGE_ERROR
    if tp.partition not in _hosted(store, tp.topic):
        count = seam.partition_count(tp.topic)
        if count is None or not 0 <= tp.partition < count:
            return codes.UNKNOWN_TOPIC_OR_PARTITION
        # Kafka keeps REPLICA_NOT_AVAILABLE here for compatibility (NotLeaderOrFollower).
        return codes.REPLICA_NOT_AVAILABLE
    return codes.NONE


async def alter_replica_log_dirs(ctx: RequestContext, request: Any) -> Any:
    """AlterReplicaLogDirs v1-2 (see the module docstring)."""
    state = ctx.broker
    store = state.store
    response_cls, m = response_classes(34, ctx.api_version)
    # Kafka reads the request as a map: a partition named twice takes its last directory.
    destinations: dict[TopicPartition, str] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for partition in topic.partitions:
                destinations[TopicPartition(topic.name, partition)] = log_dir.path
    allowed = authorize_cluster(ctx, AclOperation.ALTER)
    log_dir = os.path.abspath(store.path)
    offline = store.offline_partitions() if allowed else {}
    seam = partition_seam(state)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for tp, destination in destinations.items():
        code = (_error(store, seam, log_dir, tp, destination, offline) if allowed
                else codes.CLUSTER_AUTHORIZATION_FAILED)
        by_topic.setdefault(tp.topic, []).append((tp.partition, code))
    return make(response_cls, throttle_time=NO_THROTTLE, results=tuple(
        make(m.AlterReplicaLogDirTopicResult, topic_name=name, partitions=tuple(
            make(m.AlterReplicaLogDirPartitionResult, partition_index=p, error_code=code)
            for p, code in rows))
        for name, rows in by_topic.items()))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(34, 1, 2, alter_replica_log_dirs),
)
