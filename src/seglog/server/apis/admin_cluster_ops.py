"""ElectLeaders (43), AlterPartitionReassignments (45) and ListPartitionReassignments (46):
the cluster operations of ``kafka-leader-election`` and ``kafka-reassign-partitions``.

The handlers check the request (the topics and partitions that exist, Kafka 4.4's messages)
and leave the work to the partition seam (:mod:`seglog.cluster.seam`): a lone broker answers
as Kafka 4.4's one-node cluster does (every partition led by its only replica: ELECTION_NOT_NEEDED;
a reassignment to this broker alone is a no-op, to any other broker INVALID_REPLICA_ASSIGNMENT);
a ZooKeeper cluster's controller elects and reassigns as Kafka 2.8's does (KIP-460, KIP-455),
and a broker that is not the controller answers NOT_CONTROLLER, as Kafka 2.8 did: the admin
client sends these requests to the controller its metadata names.

Answers mirror the request, as Kafka 4.4's controller builds them (a topic or partition named
twice is answered twice). ElectLeaders with null partitions elects every partition and lists
every topic, with only the partitions whose answer is not ELECTION_NOT_NEEDED.

**Authorization** (Kafka's): ALTER on CLUSTER for ElectLeaders and
AlterPartitionReassignments, DESCRIBE on CLUSTER for ListPartitionReassignments; a refusal is
CLUSTER_AUTHORIZATION_FAILED at the top level and for every partition named.
"""

from __future__ import annotations

import datetime
from typing import Any

from ... import error_codes as codes
from ...types import TopicPartition
from ..authorization import AclOperation, authorize_cluster
from ..context import RequestContext
from ..registry import ApiHandler
from .admin_wire import NO_THROTTLE, make, response_classes
from .data_topics import partition_seam

__all__ = ["HANDLERS", "alter_partition_reassignments", "elect_leaders",
           "list_partition_reassignments"]

#: ElectLeaders' election types (Kafka's ``ElectionType``).
PREFERRED, UNCLEAN = 0, 1
#: The timeout a request of no timeout field (ElectLeaders v0 has one; all do) falls back to.
DEFAULT_TIMEOUT_MS = 60_000


def _timeout_s(request: Any) -> float:
    timeout = getattr(request, "timeout", None)
    if isinstance(timeout, datetime.timedelta):
        return max(0.0, timeout.total_seconds())
    return DEFAULT_TIMEOUT_MS / 1000


def _error(code: int, message: str | None = None) -> tuple[int, str | None]:
    return code, message


# --- ElectLeaders ------------------------------------------------------------------------------


def _elect_refusal(response_cls: Any, m: Any, named: Any, code: int, message: str) -> Any:
    """The whole request refused (Kafka's ``ElectLeadersRequest.getErrorResponse``): the
    top-level error and the same for every partition named."""
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=code,
                replica_election_results=tuple(
                    make(m.ReplicaElectionResult, topic=t.topic, partition_result=tuple(
                        make(m.PartitionResult, partition_id=p, error_code=code,
                             error_message=message) for p in t.partitions))
                    for t in named or ()))


async def elect_leaders(ctx: RequestContext, request: Any) -> Any:
    """ElectLeaders v0-2 (see the module docstring)."""
    version = ctx.api_version
    response_cls, m = response_classes(43, version)
    named = request.topic_partitions
    if not authorize_cluster(ctx, AclOperation.ALTER):
        refused = codes.CLUSTER_AUTHORIZATION_FAILED
        return _elect_refusal(response_cls, m, named, refused, codes.message(refused))
    election_type = getattr(request, "election_type", PREFERRED)
    if election_type not in (PREFERRED, UNCLEAN):
        return _elect_refusal(response_cls, m, named, codes.INVALID_REQUEST,
                              f"Unknown election type {election_type}")
    cluster = partition_seam(ctx.broker)
    assignments = cluster.assignments
    if named is None:
        asked = [(name, sorted(a.partitions)) for name, a in sorted(assignments.items())]
    else:
        asked = [(t.topic, list(t.partitions)) for t in named]
    existing = sorted({TopicPartition(name, p) for name, parts in asked
                       if name in assignments for p in parts
                       if p in assignments[name].partitions})
    outcome = (await cluster.elect_leaders(election_type, existing, timeout_s=_timeout_s(request))
               if existing else {})
    results = []
    for name, parts in asked:
        partition_results = []
        for p in parts:
            code: int
            message: str | None
            if name not in assignments:
                code, message = codes.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
            elif p not in assignments[name].partitions:
                code, message = (codes.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"No such partition as {name}-{p}")
            else:
                code, message = outcome.get(TopicPartition(name, p), (codes.UNKNOWN_SERVER_ERROR,
                                                                      None))
            if named is None and code == codes.ELECTION_NOT_NEEDED:
                continue  # an election of everything lists only what was (or failed) elected
            partition_results.append(make(m.PartitionResult, partition_id=p, error_code=code,
                                          error_message=message))
        results.append(make(m.ReplicaElectionResult, topic=name,
                            partition_result=tuple(partition_results)))
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=codes.NONE,
                replica_election_results=tuple(results))


# --- AlterPartitionReassignments -----------------------------------------------------------------


async def alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    """AlterPartitionReassignments v0-1 (see the module docstring)."""
    version = ctx.api_version
    response_cls, m = response_classes(45, version)
    allow_change = bool(getattr(request, "allow_replication_factor_change", True))
    if not authorize_cluster(ctx, AclOperation.ALTER):
        refused = codes.CLUSTER_AUTHORIZATION_FAILED
        refusal = codes.message(refused)
        return make(response_cls, throttle_time=NO_THROTTLE, error_code=refused,
                    error_message=refusal, allow_replication_factor_change=allow_change,
                    responses=tuple(make(m.ReassignableTopicResponse, name=t.name,
                                         partitions=tuple(make(
                                             m.ReassignablePartitionResponse,
                                             partition_index=p.partition_index,
                                             error_code=refused, error_message=refusal)
                                             for p in t.partitions))
                                    for t in request.topics))
    cluster = partition_seam(ctx.broker)
    assignments = cluster.assignments
    answers: list[tuple[int, str | None] | None] = []
    targets: list[tuple[TopicPartition, tuple[int, ...] | None]] = []
    for topic in request.topics:
        for p in topic.partitions:
            assignment = assignments.get(topic.name)
            if assignment is None:
                answers.append(_error(codes.UNKNOWN_TOPIC_OR_PARTITION,
                                      f"Unable to find a topic named {topic.name}."))
            elif p.partition_index not in assignment.partitions:
                answers.append(_error(codes.UNKNOWN_TOPIC_OR_PARTITION,
                                      f"Unable to find partition {topic.name}:"
                                      f"{p.partition_index}."))
            else:
                answers.append(None)
                replicas = None if p.replicas is None else tuple(int(r) for r in p.replicas)
                targets.append((TopicPartition(topic.name, p.partition_index), replicas))
    outcome = iter(await cluster.alter_partition_reassignments(
        targets, allow_replication_factor_change=allow_change,
        timeout_s=_timeout_s(request)) if targets else [])
    responses = []
    index = 0
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code: int
            message: str | None
            answer = answers[index]
            index += 1
            code, message = answer if answer is not None else next(outcome)
            partitions.append(make(m.ReassignablePartitionResponse,
                                   partition_index=p.partition_index, error_code=code,
                                   error_message=message))
        responses.append(make(m.ReassignableTopicResponse, name=topic.name,
                              partitions=tuple(partitions)))
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=codes.NONE,
                error_message=None, allow_replication_factor_change=allow_change,
                responses=tuple(responses))


# --- ListPartitionReassignments ------------------------------------------------------------------


async def list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    """ListPartitionReassignments v0: the reassignments in progress, of the partitions named
    (null: all); partitions that are not being reassigned (or do not exist) are left out."""
    response_cls, m = response_classes(46, ctx.api_version)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        code = codes.CLUSTER_AUTHORIZATION_FAILED
        return make(response_cls, throttle_time=NO_THROTTLE, error_code=code,
                    error_message=codes.message(code), topics=tuple(
                        make(m.OngoingTopicReassignment, name=t.name, partitions=tuple(
                            make(m.OngoingPartitionReassignment, partition_index=p,
                                 replicas=(), adding_replicas=(), removing_replicas=())
                            for p in t.partition_indexes))
                        for t in request.topics or ()))
    ongoing = partition_seam(ctx.broker).partition_reassignments()
    if request.topics is None:
        wanted = sorted(ongoing)
    else:
        wanted = [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    by_topic: dict[str, list[Any]] = {}
    seen: set[TopicPartition] = set()
    for tp in wanted:
        if tp not in ongoing or tp in seen:
            continue
        seen.add(tp)
        replicas, adding, removing = ongoing[tp]
        by_topic.setdefault(tp.topic, []).append(make(
            m.OngoingPartitionReassignment, partition_index=tp.partition,
            replicas=tuple(replicas), adding_replicas=tuple(adding),
            removing_replicas=tuple(removing)))
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=codes.NONE,
                error_message=None, topics=tuple(
                    make(m.OngoingTopicReassignment, name=name, partitions=tuple(parts))
                    for name, parts in by_topic.items()))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(43, 0, 2, elect_leaders),
    ApiHandler(45, 0, 1, alter_partition_reassignments),
    ApiHandler(46, 0, 0, list_partition_reassignments),
)
