"""AlterReplicaLogDirs (API 34, v1-2) and DescribeLogDirs' results (API 35) over the broker's
log dirs (``log.dirs``, several: JBOD), as Kafka 4.4's ``ReplicaManager.alterReplicaLogDirs``
and ``describeLogDirs`` answer them.

AlterReplicaLogDirs, per partition in Kafka's order: a topic name too long for the
``.future`` directory name (``<topic>-<partition>.<uuid>-future`` over 255 bytes) is
INVALID_TOPIC_EXCEPTION; a destination that is not one of this broker's log dirs (its
absolute path, as DescribeLogDirs reports it) is LOG_DIR_NOT_FOUND; an offline destination
dir, or a partition whose files failed to load (or whose dir is offline), is
KAFKA_STORAGE_ERROR; a partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION, one
this broker does not host (another broker's replica) REPLICA_NOT_AVAILABLE; a partition to
move while a log dir is offline is KAFKA_STORAGE_ERROR (Kafka creates no future log then);
otherwise NONE, and the move runs on a worker (:meth:`Store.move_partition
<seglog.store.Store.move_partition>`: a ``-future`` copy filled while the partition serves,
then swapped in), which DescribeLogDirs shows as the partition's future log in the
destination (``is_future_key``) until it is done. A partition already in the destination, or
being moved, is NONE with nothing started. (Kafka stops a move under way for a new
destination; seglog finishes the first move, and a second request moves it on.)

Authorization: ALTER on CLUSTER, else CLUSTER_AUTHORIZATION_FAILED for every partition.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Container, Iterable

from ... import error_codes as codes
from ...errors import SeglogError
from ...filenames import partition_dir_name
from ...log_manager import future_dir_name
from ...types import TopicPartition
from ..authorization import AclOperation, authorize_cluster
from ..context import RequestContext
from ..registry import ApiHandler
from .admin_wire import NO_THROTTLE, make, response_classes
from .data_topics import partition_seam

__all__ = ["FUTURE_DIR_NAME_BYTES_MAX", "HANDLERS", "alter_replica_log_dirs",
           "describe_log_dirs_results", "future_dir_name"]

log = logging.getLogger(__name__)

#: The longest directory name (bytes) a file system takes: the ``.future`` name's bound.
FUTURE_DIR_NAME_BYTES_MAX = 255
#: DescribeLogDirs' total/usable bytes of a dir it cannot read (Kafka's
#: ``DescribeLogDirsResponse.UNKNOWN_VOLUME_BYTES``).
UNKNOWN_VOLUME_BYTES = -1


def _hosted(store: Any, topic: str) -> set[int]:
    """The partitions of ``topic`` whose logs this broker holds (none for an unknown topic)."""
    if topic not in store:
        return set()
    try:
        return {p for p, _log in store.topic(topic).open_logs()}
    except SeglogError:
        return set()  # deleted meanwhile


def _error(store: Any, seam: Any, dirs: dict[str, Any], tp: TopicPartition, destination: str,
           offline: Any) -> int:
    if len(future_dir_name(tp.topic, tp.partition).encode("utf-8")) > FUTURE_DIR_NAME_BYTES_MAX:
        return codes.INVALID_TOPIC_EXCEPTION
    state = dirs.get(destination)
    if state is None:
        return codes.LOG_DIR_NOT_FOUND
    if state.failure is not None or tp in offline:
        return codes.KAFKA_STORAGE_ERROR
    if tp.partition not in _hosted(store, tp.topic):
        count = seam.partition_count(tp.topic)
        if count is None or not 0 <= tp.partition < count:
            return codes.UNKNOWN_TOPIC_OR_PARTITION
        # Kafka keeps REPLICA_NOT_AVAILABLE here for compatibility (NotLeaderOrFollower).
        return codes.REPLICA_NOT_AVAILABLE
    if os.path.abspath(store.log_dir_of(tp)) != destination and any(
            d.failure is not None for d in dirs.values()):
        return codes.KAFKA_STORAGE_ERROR  # no future log while a dir is offline (Kafka)
    return codes.NONE


def _start_move(ctx: RequestContext, tp: TopicPartition, destination: str) -> None:
    """Run the move on a worker; its failure is logged (the partition stays where it was)."""
    state = ctx.broker

    def done(future: Any) -> None:
        exc = None if future.cancelled() else future.exception()
        if exc is not None:
            log.warning("moving %s-%d to %s failed, it stays where it was: %s",
                        tp.topic, tp.partition, destination, exc)

    state.loop.run_in_executor(None, state.store.move_partition, tp,
                               destination).add_done_callback(done)


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
    dirs = {os.path.abspath(d.path): d for d in store.log_dirs()}
    offline = store.offline_partitions() if allowed else {}
    seam = partition_seam(state)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for tp, destination in destinations.items():
        code = (_error(store, seam, dirs, tp, destination, offline) if allowed
                else codes.CLUSTER_AUTHORIZATION_FAILED)
        if code == codes.NONE and os.path.abspath(store.log_dir_of(tp)) != destination:
            _start_move(ctx, tp, dirs[destination].path)
        by_topic.setdefault(tp.topic, []).append((tp.partition, code))
    return make(response_cls, throttle_time=NO_THROTTLE, results=tuple(
        make(m.AlterReplicaLogDirTopicResult, topic_name=name, partitions=tuple(
            make(m.AlterReplicaLogDirPartitionResult, partition_index=p, error_code=code)
            for p, code in rows))
        for name, rows in by_topic.items()))


def _future_size_bytes(path: str) -> int:
    """The bytes of the files copied so far into a ``-future`` directory."""
    try:
        return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
    except OSError:
        return 0


def describe_log_dirs_results(store: Any, wanted: Iterable[Any] | None, m: Any,
                              hosted: Container[TopicPartition]) -> list[Any]:
    """DescribeLogDirs' results (blocking: run on a worker): one per log dir, as Kafka's
    ``ReplicaManager.describeLogDirs``: an online dir with its partitions (size, offset lag
    0; a partition being moved there also as its future log, ``is_future_key``, with the
    bytes copied so far and its lag) and its volume's total and usable bytes; an offline
    dir with KAFKA_STORAGE_ERROR and nothing else. A partition whose files failed to load
    in an online dir (seglog fails one partition where Kafka fails its whole dir) is left
    out of its dir and answered as a log dir of its own with KAFKA_STORAGE_ERROR: Kafka's
    AdminClient, kafka-log-dirs and confluent-kafka read it as a failed disk. Only the
    partitions in ``hosted`` are listed (in a cluster, those this broker holds a replica
    of)."""
    wanted_map: dict[str, set[int] | None] | None = None
    if wanted is not None:
        wanted_map = {}
        for t in wanted:
            wanted_map[t.topic] = (wanted_map.get(t.topic) or set()) | set(t.partitions)

    def is_wanted(tp: TopicPartition) -> bool:
        if tp not in hosted:
            return False
        if wanted_map is None:
            return True
        partitions = wanted_map.get(tp.topic, ())
        return partitions is None or tp.partition in partitions

    offline = store.offline_partitions()
    moving = {tp: os.path.abspath(path) for tp, path in store.moving_partitions().items()}
    results = []
    failed_partitions: set[TopicPartition] = set()
    for state in store.log_dirs():
        path = os.path.abspath(state.path)
        if state.failure is not None:
            failed_partitions.update(state.partitions)
            results.append(make(m.DescribeLogDirsResult, error_code=codes.KAFKA_STORAGE_ERROR,
                                log_dir=path, topics=(), total_bytes=UNKNOWN_VOLUME_BYTES,
                                usable_bytes=UNKNOWN_VOLUME_BYTES, is_cordoned=False))
            continue
        rows: dict[str, list[Any]] = {}
        for tp in state.partitions:
            if tp in offline or not is_wanted(tp):
                continue
            try:
                log_ = store.topic(tp.topic).log(tp.partition)
                size = log_.size_bytes
            except SeglogError:
                continue  # deleted or gone offline meanwhile
            rows.setdefault(tp.topic, []).append(make(
                m.DescribeLogDirsPartition, partition_index=tp.partition, partition_size=size,
                offset_lag=0, is_future_key=False))
        for tp, destination in sorted(moving.items()):
            if destination != path or not is_wanted(tp):
                continue
            futures = [e.path for e in os.scandir(path)
                       if e.name.startswith(f"{tp.topic}-{tp.partition}.")
                       and e.name.endswith("-future")] if os.path.isdir(path) else []
            rows.setdefault(tp.topic, []).append(make(
                m.DescribeLogDirsPartition, partition_index=tp.partition,
                partition_size=sum(_future_size_bytes(f) for f in futures), offset_lag=0,
                is_future_key=True))
        try:
            st = os.statvfs(path)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = UNKNOWN_VOLUME_BYTES
        results.append(make(m.DescribeLogDirsResult, error_code=codes.NONE, log_dir=path,
                            topics=tuple(make(m.DescribeLogDirsTopic, name=name,
                                              partitions=tuple(parts))
                                         for name, parts in sorted(rows.items())),
                            total_bytes=total, usable_bytes=usable, is_cordoned=False))
    for tp in sorted(offline):
        if tp in failed_partitions:
            continue  # answered by its dir
        try:
            where = store.log_dir_of(tp)
        except SeglogError:
            if failed_partitions or any(d.failure is not None for d in store.log_dirs()):
                continue  # in no online dir: the offline dir answers for it
            where = store.path
        results.append(make(m.DescribeLogDirsResult, error_code=codes.KAFKA_STORAGE_ERROR,
                            log_dir=os.path.abspath(os.path.join(
                                where, partition_dir_name(tp.topic, tp.partition))),
                            topics=(), total_bytes=UNKNOWN_VOLUME_BYTES,
                            usable_bytes=UNKNOWN_VOLUME_BYTES, is_cordoned=False))
    return results


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(34, 1, 2, alter_replica_log_dirs),
)
