"""Metadata (API key 3, v0-v13): this broker, the cluster, and each topic's partitions, with
Kafka's answers for unknown, invalid and auto-created topics
(``KafkaApis.handleTopicMetadataRequest``, ``getTopicMetadata``, ``AutoTopicCreationManager``
in KRaft mode).

One broker is the whole cluster: it is every partition's leader (epoch
:data:`~seglog.server.apis.data_topics.LEADER_EPOCH`), only replica and only in-sync
replica, and the controller Kafka names (a KRaft broker answers a random alive broker).

Auto-creation. A topic named in the request that does not exist is created when the request
allows it (``allow_auto_topic_creation``, always for v1-v3) and the broker's
``auto.create.topics.enable`` is true, with ``num.partitions`` partitions and the default
configs. Kafka's KRaft broker forwards the creation to its controller and answers
UNKNOWN_TOPIC_OR_PARTITION for that topic in this response (clients retry their metadata);
this broker creates the topic at once but answers the same, so clients see what they see
against Kafka. An illegal name gets INVALID_TOPIC_EXCEPTION either way.

In a cluster (``zookeeper.connect``) the answer comes from the replica manager's metadata
cache (ZooKeeper, kept by watches), as Kafka 2.8's ``MetadataCache``: the live brokers, the
controller, each partition's leader, leader epoch, replicas, ISR and offline replicas
(LEADER_NOT_AVAILABLE with leader -1 while the leader is dead or the partition has no state
yet); an auto-created topic is written to ZooKeeper with ``default.replication.factor`` and
answered LEADER_NOT_AVAILABLE, as Kafka 2.8's ``KafkaApis.createTopic``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from ... import error_codes as codes
from ...cluster.seam import PartitionSeam
from ...cluster.zk_data import TopicAssignment
from ...types import TopicPartition
from ..context import RequestContext
from .data_topics import (
    partition_seam,
    response_entities,
    valid_topic_name,
)

__all__ = ["API_KEY", "VERSION_MIN", "VERSION_MAX", "handle_metadata", "build",
           "TOPIC_AUTHORIZED_OPERATIONS", "CLUSTER_AUTHORIZED_OPERATIONS"]

API_KEY = 3
VERSION_MIN = 0
VERSION_MAX = 13

#: Kafka's "not requested" value of the authorized-operations fields.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
#: What a Kafka broker without an authorizer answers when asked: every operation the
#: resource type supports (``AuthHelper.authorizedOperations``, ``AclEntry.supportedOperations``)
#: as a bit field of ``AclOperation`` codes. Topic: READ 3, WRITE 4, CREATE 5, DELETE 6,
#: ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
#: Cluster: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
#: ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << code for code in (5, 7, 8, 9, 10, 11, 12))

_ZERO_UUID = uuid.UUID(int=0)
_ZERO_MS = datetime.timedelta(0)  # kio's i32Timedelta fields take a timedelta
#: The topics Kafka calls internal (``Topic.isInternal``).
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
#: kio's Metadata response class of one version and its broker, topic and partition entities.
_EntityClasses = tuple[type, type, type, type]


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any) -> Any:
    """An instance of the kio entity ``cls`` from ``values``, leaving out the fields this
    version of the entity does not have (so one call serves every version)."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def _entity_classes(version: int) -> _EntityClasses:
    response, module = response_entities(API_KEY, version)
    return (response, module.MetadataResponseBroker, module.MetadataResponseTopic,
            module.MetadataResponsePartition)


def _error_entry(classes: _EntityClasses, error_code: int, name: str | None,
                 topic_id: uuid.UUID = _ZERO_UUID) -> Any:
    return build(classes[2], error_code=ErrorCode(error_code), name=name, topic_id=topic_id,
                 is_internal=name in _INTERNAL_TOPICS, partitions=(),
                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)




def _topic_entry(classes: _EntityClasses, cluster: PartitionSeam, assignment: TopicAssignment,
                 authorized_operations: int) -> Any:
    """One topic from the cluster's metadata (Kafka 2.8's ``MetadataCache
    .getPartitionMetadata``): per partition its leader, leader epoch, replicas, ISR and the
    replicas on dead brokers; LEADER_NOT_AVAILABLE (leader -1) while the leader is not a
    live broker or the controller has not given the partition a state yet."""
    partition_cls = classes[3]
    live = cluster.live_brokers
    partitions: list[Any] = []
    for index, replicas in sorted(assignment.partitions.items()):
        state = cluster.states.get(TopicPartition(assignment.topic, index))
        offline = tuple(r for r in replicas if r not in live)
        isr: tuple[int, ...]
        if state is None:
            code, leader, epoch, isr = codes.LEADER_NOT_AVAILABLE, -1, -1, ()
        else:
            leader, epoch, isr = state.leader, state.leader_epoch, tuple(state.isr)
            code = codes.NONE
            if leader not in live:
                code, leader = codes.LEADER_NOT_AVAILABLE, -1
        partitions.append(build(
            partition_cls, error_code=ErrorCode(code), partition_index=index,
            leader_id=leader, leader_epoch=epoch, replica_nodes=tuple(replicas),
            isr_nodes=isr, offline_replicas=offline))
    name = assignment.topic
    return build(classes[2], error_code=ErrorCode(codes.NONE), name=name,
                 topic_id=assignment.topic_id or _ZERO_UUID,
                 is_internal=name in _INTERNAL_TOPICS, partitions=tuple(partitions),
                 topic_authorized_operations=authorized_operations)


async def _auto_create(ctx: RequestContext, cluster: PartitionSeam, name: str) -> int:
    """Create topic ``name`` for a Metadata request that named it (``auto.create.topics
    .enable``): ``num.partitions`` partitions, ``default.replication.factor`` replicas; the
    error code to answer for it (the seam's: the client asks again)."""
    if not valid_topic_name(name):
        return codes.INVALID_TOPIC_EXCEPTION
    if name in _INTERNAL_TOPICS:
        return codes.UNKNOWN_TOPIC_OR_PARTITION  # the coordinators create their own
    config = ctx.broker.config
    return await cluster.auto_create_topic(
        name, partitions=int(config.get("num.partitions", 1)),
        replication_factor=int(config.get("default.replication.factor", 1)))


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    """Answer a Metadata request (see the module docstring) from the cluster's metadata
    view (:class:`~seglog.cluster.seam.PartitionSeam`)."""
    version = ctx.api_version
    broker = ctx.broker
    classes = _entity_classes(version)
    cluster = partition_seam(broker)
    response_cls, broker_cls = classes[0], classes[1]
    requested = request.topics
    all_topics = requested is None or (version == 0 and not requested)
    include_topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    topic_ops = TOPIC_AUTHORIZED_OPERATIONS if include_topic_ops else AUTHORIZED_OPERATIONS_OMITTED
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and getattr(request, "include_cluster_authorized_operations", False):
        cluster_ops = CLUSTER_AUTHORIZED_OPERATIONS
    assignments = cluster.assignments
    entries: list[Any] = []
    if all_topics:
        for topic_name in sorted(assignments):
            entries.append(_topic_entry(classes, cluster, assignments[topic_name], topic_ops))
    else:
        allow_create = (bool(getattr(request, "allow_auto_topic_creation", True))
                        and bool(broker.config.get("auto.create.topics.enable", True)))
        by_id = {a.topic_id: a for a in assignments.values() if a.topic_id is not None}
        seen: set[str] = set()
        for wanted in requested:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            if topic_id is not None and topic_id != _ZERO_UUID:
                if version < 12:
                    return _invalid_request(classes, request)
                assignment = by_id.get(topic_id)
                if assignment is None:
                    entries.append(_error_entry(classes, codes.UNKNOWN_TOPIC_ID, None, topic_id))
                elif assignment.topic not in seen:
                    seen.add(assignment.topic)
                    entries.append(_topic_entry(classes, cluster, assignment,
                                                        topic_ops))
                continue
            if name is None:
                if version < 12:
                    return _invalid_request(classes, request)
                entries.append(_error_entry(classes, codes.UNKNOWN_TOPIC_ID, None))
                continue
            if name in seen:
                continue
            seen.add(name)
            assignment = assignments.get(name)
            if assignment is not None:
                entries.append(_topic_entry(classes, cluster, assignment, topic_ops))
            elif allow_create:
                entries.append(_error_entry(classes,
                                            await _auto_create(ctx, cluster, name), name))
            else:
                code = codes.UNKNOWN_TOPIC_OR_PARTITION if valid_topic_name(name) \
                    else codes.INVALID_TOPIC_EXCEPTION
                entries.append(_error_entry(classes, code, name))
    brokers = tuple(build(broker_cls, node_id=info.broker_id, host=info.host, port=info.port,
                          rack=info.rack)
                    for _id, info in sorted(cluster.live_brokers.items()))
    controller_id = cluster.controller_id
    return build(response_cls, throttle_time=_ZERO_MS, brokers=brokers,
                 cluster_id=broker.cluster_id,
                 controller_id=-1 if controller_id is None else controller_id,
                 topics=tuple(entries), cluster_authorized_operations=cluster_ops,
                 error_code=ErrorCode(codes.NONE))


def _invalid_request(classes: _EntityClasses, request: Any) -> Any:
    """Kafka's ``MetadataRequest.getErrorResponse`` for an InvalidRequestException: every
    requested topic with INVALID_REQUEST (a null name as ""), no brokers."""
    topics = tuple(
        build(classes[2], error_code=ErrorCode(codes.INVALID_REQUEST),
              name=getattr(t, "name", None) or "", topic_id=getattr(t, "topic_id", None)
              or _ZERO_UUID, is_internal=False, partitions=(),
              topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for t in request.topics or ())
    return build(classes[0], throttle_time=_ZERO_MS, brokers=(), cluster_id=None,
                 controller_id=-1, topics=topics,
                 cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                 error_code=ErrorCode(codes.NONE))
