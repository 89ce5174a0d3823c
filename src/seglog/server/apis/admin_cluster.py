"""DeleteRecords, DescribeCluster and DescribeLogDirs: the one node's records, identity and
data directory (Kafka's ``ReplicaManager.deleteRecords``, ``describeLogDirs`` and the
broker's DescribeCluster).

In a cluster (``zookeeper.connect``) DescribeCluster lists the live brokers and the controller
from ZooKeeper, and DeleteRecords is served by each partition's leader only
(NOT_LEADER_OR_FOLLOWER elsewhere); it answers after the leader's own log start moved, without
Kafka 2.8's wait for the followers' (``DelayedDeleteRecords``): they follow the leader's log
start on their next fetch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ... import error_codes as codes
from ...errors import OffsetOutOfRangeError, SeglogError
from ...types import TopicPartition
from ...security.acl import CLUSTER_NAME
from ..authorization import (AclOperation, ResourceType, authorize_cluster,
                             authorized_operations, filter_authorized)
from ..context import RequestContext
from ...error_codes import (
    MISMATCHED_ENDPOINT_TYPE, NONE, OFFSET_OUT_OF_RANGE, POLICY_VIOLATION,
    UNSUPPORTED_ENDPOINT_TYPE,
)
from .admin_wire import (
    NO_THROTTLE, code_of, make, response_classes,
)
from .data_topics import partition_seam
from .log_dirs import describe_log_dirs_results

if TYPE_CHECKING:
    from ...store import Store


# --- DeleteRecords --------------------------------------------------------------------------


def _delete_records(store: Store, topics: Iterable[Any], refused: dict[tuple[str, int], int]
                    ) -> list[tuple[str, list[tuple[int, int, int]]]]:
    # Kafka reads the request into a map by partition: a partition named twice is answered
    # once, for the last offset given.
    wanted: dict[str, dict[int, int]] = {}
    for topic in topics:
        for part in topic.partitions:
            wanted.setdefault(topic.name, {})[part.partition_index] = part.offset
    out: list[tuple[str, list[tuple[int, int, int]]]] = []
    for name, partitions in wanted.items():
        rows: list[tuple[int, int, int]] = []
        for partition, offset in partitions.items():
            code = refused.get((name, partition))
            if code is not None:
                rows.append((partition, -1, code))
                continue
            try:
                log_ = store.topic(name).log(partition)
                if not log_.config.deletion_enabled:
                    # Kafka's Partition.deleteRecordsOnLeader: "Records of partition ... can
                    # not be deleted due to the configured policy".
                    rows.append((partition, -1, POLICY_VIOLATION))
                    continue
                low = log_.delete_records_before(offset)
                rows.append((partition, low, NONE))
            except OffsetOutOfRangeError:
                rows.append((partition, -1, OFFSET_OUT_OF_RANGE))
            except (SeglogError, ValueError, TypeError) as e:
                rows.append((partition, -1, code_of(e)))
        out.append((name, rows))
    return out


async def delete_records(ctx: RequestContext, request: Any) -> Any:
    """DeleteRecords v0-v2 (Kafka's ``ReplicaManager.deleteRecords``): the log start offset
    moves up to ``offset`` (-1: the high watermark); the answer's ``low_watermark`` is the
    new log start offset, -1 with an error."""
    response_cls, m = response_classes(21, ctx.api_version)
    cluster = partition_seam(ctx.broker)
    # Only the leader deletes (its followers follow its log start); Kafka's
    # getPartitionOrException: a partition the metadata does not have is unknown.
    refused: dict[tuple[str, int], int] = {}
    deletable = filter_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC,
                                  (t.name for t in request.topics))
    for topic in request.topics:
        count = cluster.partition_count(topic.name)
        for part in topic.partitions:
            index = part.partition_index
            if topic.name not in deletable:
                refused[(topic.name, index)] = codes.TOPIC_AUTHORIZATION_FAILED
            elif count is None or not 0 <= index < count:
                refused[(topic.name, index)] = codes.UNKNOWN_TOPIC_OR_PARTITION
            elif cluster.leader_replica(TopicPartition(topic.name, index)) is None:
                refused[(topic.name, index)] = codes.NOT_LEADER_OR_FOLLOWER
    done = await ctx.broker.run_blocking(_delete_records, ctx.broker.store, request.topics,
                                         refused)
    # A fetch waiting below the new log start offset answers OFFSET_OUT_OF_RANGE now.
    ctx.broker.appended.notify()
    return make(response_cls, throttle_time=NO_THROTTLE, topics=tuple(
        make(m.DeleteRecordsTopicResult, name=name, partitions=tuple(
            make(m.DeleteRecordsPartitionResult, partition_index=p, low_watermark=low,
                  error_code=code) for p, low, code in rows))
        for name, rows in done))


# --- DescribeCluster ------------------------------------------------------------------------


async def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    """DescribeCluster v0-v2: this node is the only broker and the controller."""
    state = ctx.broker
    response_cls, m = response_classes(60, ctx.api_version)
    endpoint_type = getattr(request, "endpoint_type", 1)
    if endpoint_type != 1:
        code, message = ((MISMATCHED_ENDPOINT_TYPE, "The request was sent to an endpoint of "
                          "type BROKER, but we wanted an endpoint of type CONTROLLER")
                         if endpoint_type == 2 else
                         (UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint_type}"))
        return make(response_cls, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, endpoint_type=1, cluster_id="", controller_id=-1,
                     brokers=(), cluster_authorized_operations=-2**31)
    cluster = partition_seam(state)
    # The endpoints of the listener the request came in on, as Metadata's.
    addresses = ((info, info.address(ctx.listener_name))
                 for _id, info in sorted(cluster.live_brokers.items()))
    brokers = tuple(make(m.DescribeClusterBroker, broker_id=info.broker_id, host=address[0],
                         port=address[1], rack=info.rack, is_fenced=False)
                    for info, address in addresses if address is not None)
    controller_id = -1 if cluster.controller_id is None else cluster.controller_id
    operations = -2**31
    if request.include_cluster_authorized_operations:
        operations = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME) \
            if authorize_cluster(ctx, AclOperation.DESCRIBE) else 0
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=NONE, error_message=None,
                 endpoint_type=1, cluster_id=state.cluster_id, controller_id=controller_id,
                 brokers=brokers, cluster_authorized_operations=operations)


# --- DescribeLogDirs ------------------------------------------------------------------------


async def describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    """DescribeLogDirs v1-v5: every log dir (:func:`~seglog.server.apis.log_dirs.
    describe_log_dirs_results`: its partitions' sizes, future logs of moves under way, the
    volume's total and usable bytes; KAFKA_STORAGE_ERROR for an offline dir or a partition
    whose files failed to load). In a cluster only the partitions this broker holds a
    replica of are listed (the seam's ``hosts_partition``)."""
    state = ctx.broker
    store = state.store
    response_cls, m = response_classes(35, ctx.api_version)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return make(response_cls, throttle_time=NO_THROTTLE,
                    error_code=codes.CLUSTER_AUTHORIZATION_FAILED, results=())
    # In a cluster a broker lists the replicas it holds (not the empty directories of the
    # others' partitions, nor a replica a reassignment removed).
    cluster = partition_seam(state)
    hosted = {tp for log_dir in store.log_dirs() for tp in log_dir.partitions
              if cluster.hosts_partition(tp)}
    results = await state.run_blocking(describe_log_dirs_results, store, request.topics, m,
                                       hosted)
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=NONE,
                results=tuple(results))
