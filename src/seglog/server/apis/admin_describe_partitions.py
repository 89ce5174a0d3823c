"""DescribeTopicPartitions (API key 75, v0): each topic's partitions, a bounded number per
answer with a cursor to go on, as Kafka 4.4's ``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`` answer it (``kafka-topics
--describe`` and the Admin client's ``describeTopics`` use it from Kafka 3.8 on).

The topics asked (all, when the request names none) are taken in name order from the
cursor's topic on (the cursor's partition index for that topic, 0 for the others). The answer
holds at most ``min(max.request.partition.size.limit, ResponsePartitionLimit)`` partitions
(at least 1); when a topic does not fit, its answered part ends the response and
``NextCursor`` names the first partition left out; when the limit is reached exactly at a
topic's end, ``NextCursor`` names the next topic at partition 0.

Named topics the caller may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED with a zero topic id,
listed after the others (an all-topics request leaves them out); a named topic that does not
exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name). A cursor
whose topic is not among the named topics, or whose partition index is negative, is
INVALID_REQUEST for every named topic (Kafka's ``getErrorResponse``).

The partitions come from the cluster's metadata view (:class:`~seglog.cluster.seam
.PartitionSeam`): leader (-1 while it is not a live broker), leader epoch, replicas, ISR, the
replicas offline, and empty eligible-leader-replica lists (ELR, KIP-966, is a KRaft
controller's; a ZooKeeper-era cluster has none, which a new Kafka 4.4 partition's empty
lists also say).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from ... import error_codes as codes
from ...cluster.seam import PartitionSeam
from ...cluster.zk_data import TopicAssignment
from ...types import TopicPartition
from ..authorization import AclOperation, ResourceType, authorize, authorized_operations
from ..context import RequestContext
from ..registry import ApiHandler
from .admin_wire import NO_THROTTLE
from .data_topics import partition_seam, response_entities, valid_topic_name

__all__ = ["API_KEY", "HANDLERS", "PARTITIONS_MAX_DEFAULT", "describe_topic_partitions"]

API_KEY = 75
#: Kafka's default of ``max.request.partition.size.limit``.
PARTITIONS_MAX_DEFAULT = 2000
#: Kafka's "not set" value of ``topic_authorized_operations``.
_AUTHORIZED_OPERATIONS_UNSET = -2147483648
_ZERO_UUID = uuid.UUID(int=0)
#: The topics Kafka calls internal (``Topic.isInternal``).
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def _partitions(module: Any, cluster: PartitionSeam, assignment: TopicAssignment,
                start: int, count_max: int, listener_name: str) -> tuple[list[Any], int]:
    """The partition entries of ``assignment`` from index ``start``, at most ``count_max``,
    and the index of the first one left out (-1: none), as Kafka's
    ``getPartitionMetadataForDescribeTopicResponse`` (a leader without the request's
    listener is no leader: -1)."""
    live = cluster.live_brokers
    offline_here = cluster.offline_partitions()
    me = cluster.broker_id
    total = len(assignment.partitions)
    upper = min(total, start + count_max)
    entries = []
    for index in range(start, upper):
        replicas = assignment.partitions.get(index)
        if replicas is None:
            continue  # Kafka logs and skips an id its image lacks
        tp = TopicPartition(assignment.topic, index)
        state = cluster.states.get(tp)
        offline = [r for r in replicas if r not in live or (r == me and tp in offline_here)]
        if state is None:
            leader, epoch, isr = -1, -1, []
        else:
            leader, epoch, isr = state.leader, state.leader_epoch, list(state.isr)
            if leader not in live or (leader == me and tp in offline_here) \
                    or live[leader].address(listener_name) is None:
                leader = -1
        entries.append(module.DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode(codes.NONE), partition_index=index, leader_id=leader,
            leader_epoch=epoch, replica_nodes=tuple(replicas), isr_nodes=tuple(isr),
            eligible_leader_replicas=(), last_known_elr=(), offline_replicas=tuple(offline)))
    return entries, (upper if upper < total else -1)


def _topic(module: Any, error_code: int, name: str, *, topic_id: uuid.UUID = _ZERO_UUID,
           internal: bool = False, partitions: tuple[Any, ...] = (),
           operations: int = _AUTHORIZED_OPERATIONS_UNSET) -> Any:
    return module.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode(error_code), name=name, topic_id=topic_id, is_internal=internal,
        partitions=partitions, topic_authorized_operations=operations)


async def describe_topic_partitions(ctx: RequestContext, request: Any) -> Any:
    """Answer a DescribeTopicPartitions request (see the module docstring)."""
    response_cls, module = response_entities(API_KEY, ctx.api_version)
    cluster = partition_seam(ctx.broker)
    assignments = cluster.assignments
    named = [topic.name for topic in request.topics]
    fetch_all = not named
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    candidates = set(assignments) if fetch_all else set(named)
    topics = {name for name in candidates if name >= cursor_topic}
    if cursor is not None and ((not fetch_all and cursor.topic_name not in topics)
                               or cursor.partition_index < 0):
        # Kafka throws InvalidRequestException: every named topic gets its error.
        return response_cls(throttle_time=NO_THROTTLE, next_cursor=None, topics=tuple(
            _topic(module, codes.INVALID_REQUEST, name) for name in named))
    unauthorized = []
    authorized = []
    for name in sorted(topics):
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            authorized.append(name)
        elif not fetch_all:
            unauthorized.append(_topic(module, codes.TOPIC_AUTHORIZATION_FAILED, name))
    limit = int(ctx.broker.config.get("max.request.partition.size.limit",
                                      PARTITIONS_MAX_DEFAULT))
    remaining = max(min(limit, int(request.response_partition_limit)), 1)
    answered: list[Any] = []
    next_cursor = None
    for name in authorized:
        if remaining > 0:
            assignment = assignments.get(name)
            if assignment is not None:
                start = cursor.partition_index if cursor is not None and \
                    name == cursor_topic else 0
                partitions, next_index = _partitions(module, cluster, assignment, start,
                                                     remaining, ctx.listener_name)
                answered.append(_topic(
                    module, codes.NONE, name, topic_id=assignment.topic_id or _ZERO_UUID,
                    internal=name in _INTERNAL_TOPICS, partitions=tuple(partitions),
                    operations=authorized_operations(ctx, ResourceType.TOPIC, name)))
                if next_index != -1:
                    next_cursor = module.Cursor(topic_name=name, partition_index=next_index)
                    break
                remaining -= len(partitions)
            elif not fetch_all:
                code = codes.UNKNOWN_TOPIC_OR_PARTITION if valid_topic_name(name) \
                    else codes.INVALID_TOPIC_EXCEPTION
                answered.append(_topic(
                    module, code, name, internal=name in _INTERNAL_TOPICS,
                    operations=authorized_operations(ctx, ResourceType.TOPIC, name)))
        else:
            # The limit was reached at the previous topic's end: go on at this one.
            next_cursor = module.Cursor(topic_name=name, partition_index=0)
            break
    return response_cls(throttle_time=NO_THROTTLE, topics=tuple(answered + unauthorized),
                        next_cursor=next_cursor)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(API_KEY, 0, 0, describe_topic_partitions),
)
