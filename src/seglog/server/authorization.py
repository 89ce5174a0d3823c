"""What each request needs to be allowed, and the calls handlers make to ask.

The rules are Kafka 4.4's ``KafkaApis`` (and ``ControllerApis`` for the APIs a KRaft broker
forwards), over the authorizer of :mod:`seglog.security.authorizer`: :data:`RULES` lists, per
API, the operation asked on which resource and the error a refusal gives and where (top
level, per group, per topic/partition, hidden), in one place to review against Kafka. The
handlers call the functions below where they decide, each as Kafka's ``AuthHelper`` does:

- :func:`authorize` (``authorize(ctx, AclOperation.READ, ResourceType.TOPIC, "t")``),
- :func:`authorize_cluster` (an operation on the one CLUSTER resource),
- :func:`filter_authorized` (``filterByAuthorized``: the names of a batch that are allowed),
- :func:`authorize_by_resource_type` (``authorizeByResourceType``),
- :func:`authorized_operations` (the bit field of ``*_authorized_operations`` answers).

Without an authorizer (``authorizer.class.name`` empty, the default) every call allows, as in
Kafka. The authorizer lives in ``BrokerState.extensions[AUTHORIZER_KEY]``, put there by the
ACL handler module's start hook (:mod:`seglog.server.apis.acls`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType

if TYPE_CHECKING:
    from ..security.authorizer import Authorizer
    from .context import BrokerState, RequestContext

__all__ = ["AUTHORIZER_KEY", "AclOperation", "RULES", "ResourceType", "authorize",
           "authorize_by_resource_type", "authorize_cluster", "authorized_operations",
           "authorizer_of", "filter_authorized", "rules_markdown"]

#: The key of the broker's :class:`~seglog.security.authorizer.Authorizer` in
#: ``BrokerState.extensions`` (absent or None: no authorization).
AUTHORIZER_KEY = "seglog.security.authorizer"


def authorizer_of(state: "BrokerState") -> "Authorizer | None":
    """The broker's authorizer, or None when it authorizes nothing."""
    authorizer: Authorizer | None = state.extensions.get(AUTHORIZER_KEY)
    return authorizer


def _caller(ctx: "RequestContext") -> tuple[str, str]:
    # Kafka matches ACLs on the base principal (a token login matches as its owner).
    return str(ctx.principal.without_token()), ctx.client_host


def authorize(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
              name: str) -> bool:
    """Whether the request's principal, from its host, may perform ``operation`` on the
    resource ``resource_type``/``name`` (always True without an authorizer)."""
    authorizer = authorizer_of(ctx.broker)
    if authorizer is None:
        return True
    principal, host = _caller(ctx)
    return authorizer.authorize(principal, host, operation, resource_type, name)


def authorize_cluster(ctx: "RequestContext", operation: AclOperation) -> bool:
    """:func:`authorize` on the CLUSTER resource (``kafka-cluster``)."""
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def filter_authorized(ctx: "RequestContext", operation: AclOperation,
                      resource_type: ResourceType, names: Iterable[str]) -> set[str]:
    """The distinct ``names`` on which the request may perform ``operation``."""
    names = set(names)
    authorizer = authorizer_of(ctx.broker)
    if authorizer is None:
        return names
    principal, host = _caller(ctx)
    return {name for name in names
            if authorizer.authorize(principal, host, operation, resource_type, name)}


def authorize_by_resource_type(ctx: "RequestContext", operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    """Whether the request may perform ``operation`` on some resource of ``resource_type``."""
    authorizer = authorizer_of(ctx.broker)
    if authorizer is None:
        return True
    principal, host = _caller(ctx)
    return authorizer.authorize_by_resource_type(principal, host, operation, resource_type)


def authorized_operations(ctx: "RequestContext", resource_type: ResourceType,
                          name: str) -> int:
    """The ``authorized_operations`` bit field of ``resource_type``/``name`` for the request
    (every operation the type supports without an authorizer)."""
    authorizer = authorizer_of(ctx.broker)
    if authorizer is None:
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            bits |= 1 << int(operation)
        return bits
    principal, host = _caller(ctx)
    return authorizer.authorized_operations(principal, host, resource_type, name)


#: ``(API, what is asked, the refusal)`` per API served, as Kafka 4.4's ``KafkaApis`` and
#: ``ControllerApis`` check it (the handlers make these calls; ``docs/security.md`` shows
#: this table).
RULES: tuple[tuple[str, str, str], ...] = (
    ("Produce", "WRITE on TRANSACTIONAL_ID (transactional batches); WRITE on each TOPIC",
     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition; TOPIC_AUTHORIZATION_FAILED "
     "per partition"),
    ("Fetch", "consumer: READ on each TOPIC; follower (replica_id >= 0): CLUSTER_ACTION on "
     "CLUSTER", "TOPIC_AUTHORIZATION_FAILED per partition"),
    ("ListOffsets", "DESCRIBE on each TOPIC", "TOPIC_AUTHORIZATION_FAILED per partition"),
    ("OffsetForLeaderEpoch", "CLUSTER_ACTION on CLUSTER, else DESCRIBE on each TOPIC",
     "TOPIC_AUTHORIZATION_FAILED per partition"),
    ("Metadata", "DESCRIBE on each TOPIC named; auto-creation: CREATE on CLUSTER or on the "
     "TOPIC; authorized operations: DESCRIBE on CLUSTER",
     "TOPIC_AUTHORIZATION_FAILED per topic named (an all-topics request hides them)"),
    ("OffsetCommit", "READ on GROUP; READ on each TOPIC",
     "GROUP_AUTHORIZATION_FAILED for every partition; TOPIC_AUTHORIZATION_FAILED per "
     "partition"),
    ("OffsetFetch", "DESCRIBE on GROUP; DESCRIBE on each TOPIC",
     "GROUP_AUTHORIZATION_FAILED per group; TOPIC_AUTHORIZATION_FAILED per partition "
     "named (unauthorized topics hidden when all are asked)"),
    ("FindCoordinator", "DESCRIBE on GROUP / TRANSACTIONAL_ID; share-partition keys "
     "(type 2): CLUSTER_ACTION on CLUSTER",
     "GROUP_AUTHORIZATION_FAILED / TRANSACTIONAL_ID_AUTHORIZATION_FAILED / "
     "CLUSTER_AUTHORIZATION_FAILED per key"),
    ("JoinGroup, SyncGroup, Heartbeat, LeaveGroup", "READ on GROUP",
     "GROUP_AUTHORIZATION_FAILED"),
    ("DescribeGroups", "DESCRIBE on GROUP", "GROUP_AUTHORIZATION_FAILED per group"),
    ("ConsumerGroupHeartbeat", "READ on GROUP; DESCRIBE on each subscribed TOPIC",
     "GROUP_AUTHORIZATION_FAILED; TOPIC_AUTHORIZATION_FAILED"),
    ("ConsumerGroupDescribe", "DESCRIBE on GROUP", "GROUP_AUTHORIZATION_FAILED per group"),
    ("ListGroups", "DESCRIBE on CLUSTER, else DESCRIBE on each GROUP",
     "groups not allowed are left out"),
    ("DeleteGroups", "DELETE on GROUP", "GROUP_AUTHORIZATION_FAILED per group"),
    ("StreamsGroupHeartbeat", "READ on GROUP; DESCRIBE on each TOPIC of the topology; "
     "creating internal topics: CREATE on CLUSTER or on the TOPIC",
     "GROUP_AUTHORIZATION_FAILED / TOPIC_AUTHORIZATION_FAILED; topics it may not create: "
     "a MISSING_INTERNAL_TOPICS status"),
    ("StreamsGroupDescribe", "DESCRIBE on GROUP", "GROUP_AUTHORIZATION_FAILED per group"),
    ("StreamsGroupTopologyDescriptionUpdate", "READ on GROUP", "GROUP_AUTHORIZATION_FAILED"),
    ("ShareGroupHeartbeat", "READ on GROUP; DESCRIBE on each subscribed TOPIC",
     "GROUP_AUTHORIZATION_FAILED; TOPIC_AUTHORIZATION_FAILED"),
    ("ShareGroupDescribe", "DESCRIBE on GROUP", "GROUP_AUTHORIZATION_FAILED per group"),
    ("DescribeShareGroupOffsets", "DESCRIBE on GROUP; DESCRIBE on each TOPIC",
     "GROUP_AUTHORIZATION_FAILED per group; TOPIC_AUTHORIZATION_FAILED per partition named "
     "(unauthorized topics left out when all are asked)"),
    ("AlterShareGroupOffsets", "READ on GROUP; READ on each TOPIC",
     "GROUP_AUTHORIZATION_FAILED; TOPIC_AUTHORIZATION_FAILED per partition"),
    ("DeleteShareGroupOffsets", "DELETE on GROUP; READ on each TOPIC",
     "GROUP_AUTHORIZATION_FAILED; TOPIC_AUTHORIZATION_FAILED per topic"),
    ("ShareFetch, ShareAcknowledge", "READ on GROUP; READ on each TOPIC",
     "GROUP_AUTHORIZATION_FAILED (top level); TOPIC_AUTHORIZATION_FAILED per partition"),
    ("OffsetDelete", "DELETE on GROUP; READ on each TOPIC",
     "GROUP_AUTHORIZATION_FAILED; TOPIC_AUTHORIZATION_FAILED per partition"),
    ("CreateTopics", "CREATE on CLUSTER or on the TOPIC; DESCRIBE_CONFIGS on the TOPIC for "
     "its configs in the answer", "TOPIC_AUTHORIZATION_FAILED per topic (and as "
     "topic_config_error_code)"),
    ("DeleteTopics", "DELETE on the TOPIC (DESCRIBE too when named by id)",
     "TOPIC_AUTHORIZATION_FAILED per topic"),
    ("CreatePartitions", "ALTER on the TOPIC", "TOPIC_AUTHORIZATION_FAILED per topic"),
    ("DeleteRecords", "DELETE on each TOPIC", "TOPIC_AUTHORIZATION_FAILED per partition"),
    ("DescribeConfigs", "DESCRIBE_CONFIGS on the TOPIC / on the GROUP / on CLUSTER (broker, "
     "logger and client-metrics resources)",
     "TOPIC_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED "
     "per resource"),
    ("AlterConfigs, IncrementalAlterConfigs", "ALTER_CONFIGS on the TOPIC / on the GROUP / on "
     "CLUSTER", "TOPIC_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED / "
     "CLUSTER_AUTHORIZATION_FAILED per resource"),
    ("DescribeLogDirs", "DESCRIBE on CLUSTER", "CLUSTER_AUTHORIZATION_FAILED (top level)"),
    ("AlterReplicaLogDirs", "ALTER on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED per partition"),
    ("ListConfigResources", "DESCRIBE_CONFIGS on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED (top level)"),
    ("DescribeCluster", "authorized operations: DESCRIBE on CLUSTER",
     "cluster_authorized_operations 0"),
    ("DescribeTopicPartitions", "DESCRIBE on each TOPIC",
     "TOPIC_AUTHORIZATION_FAILED per topic named (an all-topics request hides them)"),
    ("UpdateFeatures", "ALTER on CLUSTER", "CLUSTER_AUTHORIZATION_FAILED (top level)"),
    ("InitProducerId", "with a transactional id: WRITE on TRANSACTIONAL_ID; without: "
     "IDEMPOTENT_WRITE on CLUSTER or WRITE on some TOPIC",
     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED"),
    ("AddPartitionsToTxn (v0-3)", "WRITE on TRANSACTIONAL_ID; WRITE on each TOPIC",
     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED per partition; TOPIC_AUTHORIZATION_FAILED per "
     "partition, the others OPERATION_NOT_ATTEMPTED"),
    ("AddPartitionsToTxn (v4+, brokers)", "CLUSTER_ACTION on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED"),
    ("AddOffsetsToTxn", "WRITE on TRANSACTIONAL_ID; READ on GROUP",
     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED"),
    ("EndTxn", "WRITE on TRANSACTIONAL_ID", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    ("TxnOffsetCommit", "WRITE on TRANSACTIONAL_ID; READ on GROUP; READ on each TOPIC",
     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED for every "
     "partition; TOPIC_AUTHORIZATION_FAILED per partition"),
    ("WriteTxnMarkers", "CLUSTER_ACTION on CLUSTER", "CLUSTER_AUTHORIZATION_FAILED"),
    ("InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, "
     "DeleteShareGroupState, ReadShareGroupStateSummary", "CLUSTER_ACTION on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED per partition"),
    ("DescribeProducers", "READ on each TOPIC", "TOPIC_AUTHORIZATION_FAILED per partition"),
    ("DescribeTransactions", "DESCRIBE on TRANSACTIONAL_ID (and its topics' DESCRIBE)",
     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED per id"),
    ("ListTransactions", "DESCRIBE on each TRANSACTIONAL_ID",
     "transactions not allowed are left out"),
    ("DescribeUserScramCredentials", "DESCRIBE on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED (top level)"),
    ("AlterUserScramCredentials", "ALTER on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED per user"),
    ("ElectLeaders", "ALTER on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED (top level and per partition)"),
    ("AlterPartitionReassignments", "ALTER on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED (top level and per partition)"),
    ("ListPartitionReassignments", "DESCRIBE on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED (top level)"),
    ("DescribeAcls", "DESCRIBE on CLUSTER", "CLUSTER_AUTHORIZATION_FAILED"),
    ("CreateAcls, DeleteAcls", "ALTER on CLUSTER",
     "CLUSTER_AUTHORIZATION_FAILED per creation / filter"),
    ("inter-broker (LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown)",
     "CLUSTER_ACTION on CLUSTER", "CLUSTER_AUTHORIZATION_FAILED"),
)


def rules_markdown() -> str:
    """:data:`RULES` as the Markdown table ``docs/security.md`` carries."""
    lines = ["| API | Needs | When refused |", "|---|---|---|"]
    for api, needs, refusal in RULES:
        lines.append(f"| {api} | {needs} | {refusal} |")
    return "\n".join(lines) + "\n"
