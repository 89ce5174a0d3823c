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
against Kafka. An illegal name gets INVALID_TOPIC_EXCEPTION either way. Kafka's broker sends
every topic one request names as one CreateTopics, which its controller refuses whole above
10,000 partitions (or 10,000 metadata records: a topic record and one per partition): here
too, such a request creates nothing, the refusal is logged and each of its topics answered
UNKNOWN_TOPIC_OR_PARTITION (:func:`auto_creation_refusal`).

No request holds up the others: the body of a big request is decoded on a worker thread,
the answer built a bounded amount of work per event-loop turn (:data:`WORK_PER_TURN`), and a
big answer encoded on a worker thread (a request naming 4 million topics blocked the loop for
seconds before, issue 23).

In a cluster (``zookeeper.connect``) the answer comes from the replica manager's metadata
cache (ZooKeeper, kept by watches), as Kafka 2.8's ``MetadataCache``: the live brokers, the
controller, each partition's leader, leader epoch, replicas, ISR and offline replicas
(LEADER_NOT_AVAILABLE with leader -1 while the leader is dead or the partition has no state
yet); an auto-created topic is written to ZooKeeper with ``default.replication.factor`` and
answered LEADER_NOT_AVAILABLE, as Kafka 2.8's ``KafkaApis.createTopic``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import io
import logging
import struct
import uuid
from typing import Any, Callable

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from ... import error_codes as codes
from ...cluster.seam import PartitionSeam
from ...cluster.zk_data import TopicAssignment
from ...errors import InvalidRequestError
from ...types import TopicPartition
from .. import protocol
from ...security.acl import CLUSTER_NAME
from ..authorization import (AclOperation, ResourceType, authorize, authorize_cluster,
                             authorized_operations, authorizer_of)
from ..context import CloseConnection, RawResponse, RequestContext
from .admin_wire import RECORDS_PER_REQUEST_MAX
from .data_metadata_codec import MetadataAsk, read_metadata_request
from .data_topics import (
    partition_seam,
    response_entities,
    valid_topic_name,
)

__all__ = ["API_KEY", "VERSION_MIN", "VERSION_MAX", "handle_metadata", "build",
           "TOPIC_AUTHORIZED_OPERATIONS", "CLUSTER_AUTHORIZED_OPERATIONS",
           "auto_creation_refusal", "DECODE_INLINE_BYTES_MAX", "WORK_PER_TURN",
           "ENCODE_INLINE_WORK_MAX"]

log = logging.getLogger("seglog.server")
_INT32 = struct.Struct(">i")

API_KEY = 3
VERSION_MIN = 0
VERSION_MAX = 13

#: A request body longer than this is decoded on a worker thread (a Metadata request of
#: 12 MB names about 4 million topics: seconds of decoding), not on the event loop.
DECODE_INLINE_BYTES_MAX = 64 * 1024
#: Topics and partitions answered per event-loop turn before the handler lets the loop
#: serve other connections (a few milliseconds of work).
WORK_PER_TURN = 2000
#: An answer of more topics and partitions than this is encoded on a worker thread.
ENCODE_INLINE_WORK_MAX = 5000

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


def _unauthorized_entry(classes: _EntityClasses, name: str | None,
                        topic_id: uuid.UUID = _ZERO_UUID, internal: bool = False) -> Any:
    """TOPIC_AUTHORIZATION_FAILED for a topic as Kafka answers it (no partitions, not
    internal unless refused for creation)."""
    return build(classes[2], error_code=ErrorCode(codes.TOPIC_AUTHORIZATION_FAILED), name=name,
                 topic_id=topic_id, is_internal=internal, partitions=(),
                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _error_entry(classes: _EntityClasses, error_code: int, name: str | None,
                 topic_id: uuid.UUID = _ZERO_UUID,
                 authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> Any:
    return build(classes[2], error_code=ErrorCode(error_code), name=name, topic_id=topic_id,
                 is_internal=name in _INTERNAL_TOPICS, partitions=(),
                 topic_authorized_operations=authorized_operations)




def _topic_entry(classes: _EntityClasses, cluster: PartitionSeam, assignment: TopicAssignment,
                 authorized_operations: int, listener_name: str, version: int) -> Any:
    """One topic from the cluster's metadata (Kafka 2.8's ``MetadataCache
    .getPartitionMetadata``): per partition its leader, leader epoch, replicas, ISR and the
    replicas on dead brokers; LEADER_NOT_AVAILABLE (leader -1) while the leader is not a
    live broker or the controller has not given the partition a state yet; a live leader
    without the request's listener (``listener_name``) is LISTENER_NOT_FOUND from Metadata
    v6 on (``errorUnavailableListeners``), LEADER_NOT_AVAILABLE before, leader -1."""
    partition_cls = classes[3]
    live = cluster.live_brokers
    offline_here = cluster.offline_partitions()
    me = cluster.broker_id
    partitions: list[Any] = []
    for index, replicas in sorted(assignment.partitions.items()):
        tp = TopicPartition(assignment.topic, index)
        state = cluster.states.get(tp)
        # A replica whose files failed to load here is offline, as Kafka's KRaft metadata
        # cache counts a replica in an offline log dir (isReplicaInOfflineDir).
        offline = tuple(r for r in replicas
                        if r not in live or (r == me and tp in offline_here))
        isr: tuple[int, ...]
        if state is None:
            code, leader, epoch, isr = codes.LEADER_NOT_AVAILABLE, -1, -1, ()
        else:
            leader, epoch, isr = state.leader, state.leader_epoch, tuple(state.isr)
            code = codes.NONE
            if leader not in live or (leader == me and tp in offline_here):
                # Kafka's controller takes leadership from a replica in an offline log dir
                # (no other replica: no leader), and Metadata answers LEADER_NOT_AVAILABLE.
                code, leader = codes.LEADER_NOT_AVAILABLE, -1
            elif live[leader].address(listener_name) is None:
                # A leader without the client's listener (listeners differ across brokers):
                # no node to name, as Kafka's Node.noNode().
                code = codes.LISTENER_NOT_FOUND if version >= 6 else codes.LEADER_NOT_AVAILABLE
                leader, epoch, isr = -1, -1, ()
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
    config = ctx.broker.config
    return await cluster.auto_create_topic(
        name, partitions=int(config.get("num.partitions", 1)),
        replication_factor=int(config.get("default.replication.factor", 1)))


def auto_creation_refusal(topic_count: int, partitions_each: int) -> str | None:
    """Why Kafka 4.4's controller refuses to auto-create ``topic_count`` topics of
    ``partitions_each`` partitions asked by one Metadata request, or None: the broker sends
    them as one CreateTopics, which ``ReplicationControlManager.createTopics`` refuses whole
    (POLICY_VIOLATION, nothing created) above :data:`RECORDS_PER_REQUEST_MAX` partitions,
    or above as many metadata records (a topic record and one per partition each)."""
    if topic_count * partitions_each > RECORDS_PER_REQUEST_MAX:
        return "Excessively large number of partitions per request."
    if topic_count * (1 + partitions_each) > RECORDS_PER_REQUEST_MAX:
        return "Unable to perform excessively large batch operation."
    return None


class _Turns:
    """A bound on the work one handler does per event-loop turn: :meth:`spend` yields to the
    loop (other connections are served) each time :data:`WORK_PER_TURN` units were spent."""

    __slots__ = ("_spent",)

    def __init__(self) -> None:
        self._spent = 0

    async def spend(self, units: int) -> None:
        """Count ``units`` of work (a topic, a partition); yield when a turn's worth is done."""
        self._spent += units
        if self._spent >= WORK_PER_TURN:
            self._spent = 0
            await asyncio.sleep(0)


def _decode(version: int, body: memoryview) -> MetadataAsk:
    """What a small request asks, decoded with kio (its topics deduplicated as
    :func:`read_metadata_request` does for a big one)."""
    request = protocol.read_request_body(API_KEY, version, body, 0)
    topics: list[tuple[uuid.UUID | None, str | None]] | None = None
    if request.topics is not None:
        topics = []
        seen: set[str] = set()
        for wanted in request.topics:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", None)
            if topic_id == _ZERO_UUID:
                topic_id = None  # asked by name (MetadataAsk)
            if name is not None and topic_id is None:
                if name in seen:
                    continue
                seen.add(name)
            topics.append((topic_id, name))
    return MetadataAsk(
        topics, bool(getattr(request, "allow_auto_topic_creation", True)),
        bool(getattr(request, "include_cluster_authorized_operations", False)),
        bool(getattr(request, "include_topic_authorized_operations", False)))


async def handle_metadata(ctx: RequestContext, body: memoryview) -> Any:
    """Answer a Metadata request (see the module docstring) from the cluster's metadata
    view (:class:`~seglog.cluster.seam.PartitionSeam`). ``body`` is the request's bytes: a
    big one is decoded on a worker thread, the answer is built :data:`WORK_PER_TURN` topics
    and partitions per loop turn, and a big answer encoded on a worker thread, so that a
    request naming millions of topics does not hold up every other connection."""
    version = ctx.api_version
    broker = ctx.broker
    try:
        if len(body) > DECODE_INLINE_BYTES_MAX:
            # Read by hand on a worker thread: kio's millions of entities would hold up the
            # loop even there (data_metadata_codec).
            request = await broker.run_blocking(read_metadata_request, version, body)
        else:
            request = _decode(version, body)
    except InvalidRequestError as exc:
        raise CloseConnection(str(exc)) from None  # as any body that does not decode
    classes = _entity_classes(version)
    cluster = partition_seam(broker)
    response_cls, broker_cls = classes[0], classes[1]
    requested = request.topics
    all_topics = requested is None or (version == 0 and not requested)
    with_topic_ops = bool(request.include_topic_authorized_operations)

    def topic_ops(name: str) -> int:
        return authorized_operations(ctx, ResourceType.TOPIC, name) if with_topic_ops \
            else AUTHORIZED_OPERATIONS_OMITTED

    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME) \
            if authorize_cluster(ctx, AclOperation.DESCRIBE) else 0
    # KafkaApis: topics the caller may not DESCRIBE are hidden from an all-topics answer
    # and TOPIC_AUTHORIZATION_FAILED when named; creating one needs CREATE (cluster/topic).
    authorizing = authorizer_of(broker) is not None

    def describable(name: str) -> bool:
        return not authorizing or authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            name)

    may_create_any = None  # CREATE on the cluster, asked once when needed
    assignments = cluster.assignments
    turns = _Turns()
    entries: list[Any] = []
    work = 0  # topics and partitions answered: how big the answer is
    if all_topics:
        for topic_name in sorted(assignments):
            if not describable(topic_name):
                continue
            every = assignments[topic_name]
            entries.append(_topic_entry(classes, cluster, every, topic_ops(topic_name),
                                        ctx.listener_name, version))
            work += 1 + len(every.partitions)
            await turns.spend(1 + len(every.partitions))
    else:
        allow_create = (request.allow_auto_topic_creation
                        and bool(broker.config.get("auto.create.topics.enable", True)))
        by_id = {a.topic_id: a for a in assignments.values() if a.topic_id is not None}
        seen: set[str] = set()
        to_create: dict[str, int] = {}  # name -> its index in entries
        for topic_id, name in requested or ():
            await turns.spend(1)
            if topic_id is not None:
                if version < 12:
                    return _invalid_request(classes, requested or [])
                assignment = by_id.get(topic_id)
                if assignment is None:
                    entries.append(_error_entry(classes, codes.UNKNOWN_TOPIC_ID, None, topic_id))
                elif not describable(assignment.topic):
                    entries.append(_unauthorized_entry(classes, None, topic_id))
                elif assignment.topic not in seen:
                    seen.add(assignment.topic)
                    entries.append(_topic_entry(classes, cluster, assignment,
                                                topic_ops(assignment.topic),
                                                ctx.listener_name, version))
                    await turns.spend(len(assignment.partitions))
                    work += len(assignment.partitions)
                work += 1
                continue
            if name is None:
                if version < 12:
                    return _invalid_request(classes, requested or [])
                entries.append(_error_entry(classes, codes.UNKNOWN_TOPIC_ID, None))
                work += 1
                continue
            if name in seen:
                continue  # Kafka answers a topic once (its request's topics are a set)
            seen.add(name)
            work += 1
            assignment = assignments.get(name)
            if not describable(name):
                entries.append(_unauthorized_entry(classes, name))
                continue
            if assignment is None and allow_create:
                if may_create_any is None:
                    may_create_any = authorize_cluster(ctx, AclOperation.CREATE)
                if not may_create_any and not authorize(ctx, AclOperation.CREATE,
                                                        ResourceType.TOPIC, name):
                    entries.append(_unauthorized_entry(classes, name,
                                                       internal=name in _INTERNAL_TOPICS))
                    continue
            if assignment is not None:
                entries.append(_topic_entry(classes, cluster, assignment, topic_ops(name),
                                            ctx.listener_name, version))
                await turns.spend(len(assignment.partitions))
                work += len(assignment.partitions)
            elif not valid_topic_name(name):
                entries.append((codes.INVALID_TOPIC_EXCEPTION, name, topic_ops(name)))
            elif allow_create and name not in _INTERNAL_TOPICS:
                to_create[name] = len(entries)
                entries.append(None)  # filled below, once the whole set is known
            else:
                # Not allowed to create, or an internal topic (the coordinators make their own).
                entries.append((codes.UNKNOWN_TOPIC_OR_PARTITION, name, topic_ops(name)))
        await _create_named(ctx, cluster, classes, entries, to_create, turns, topic_ops)
    # The endpoints of the listener the request came in on (Kafka's MetadataCache
    # .getAliveBrokerNodes(listenerName)): a broker without that listener is left out.
    addresses = ((info, info.address(ctx.listener_name))
                 for _id, info in sorted(cluster.live_brokers.items()))
    brokers = tuple(build(broker_cls, node_id=info.broker_id, host=address[0],
                          port=address[1], rack=info.rack)
                    for info, address in addresses if address is not None)
    controller_id = cluster.controller_id
    head = {"throttle_time": _ZERO_MS, "brokers": brokers, "cluster_id": broker.cluster_id,
            "controller_id": -1 if controller_id is None else controller_id,
            "cluster_authorized_operations": cluster_ops, "error_code": ErrorCode(codes.NONE)}
    if work > ENCODE_INLINE_WORK_MAX:
        return RawResponse(await broker.run_blocking(_encode_in_slices, classes, head, entries))
    return build(response_cls, topics=tuple(_entity(classes, e) for e in entries), **head)


def _entity(classes: _EntityClasses, entry: Any) -> Any:
    """A topic entry of ``entries`` as kio's entity: an error answered by name is kept as a
    ``(code, name, authorized operations)`` tuple until its slice is encoded (the collector
    does not track a tuple of ints and a str; millions of entities it does track made every
    full collection walk them all)."""
    if isinstance(entry, tuple):
        return _error_entry(classes, entry[0], entry[1], authorized_operations=entry[2])
    return entry


def _encode_in_slices(classes: _EntityClasses, head: dict[str, Any],
                      entries: list[Any]) -> tuple[bytes, ...]:
    """The response body, encoded on a worker thread: the fields around the topics array as
    kio writes them (:func:`response_frame_around_topics`), and the topics
    :data:`WORK_PER_TURN` at a time, each slice's entities made, written and dropped (they
    die young, where a million kept at once made the collector's full passes long)."""
    prefix, suffix, count = response_frame_around_topics(classes, head, len(entries))
    write: Callable[[io.BytesIO, Any], None] = entity_writer(classes[2])
    parts = [prefix + count]
    for start in range(0, len(entries), WORK_PER_TURN):
        buffer = io.BytesIO()
        for entry in entries[start:start + WORK_PER_TURN]:
            write(buffer, _entity(classes, entry))
        parts.append(buffer.getvalue())
    parts.append(suffix)
    return tuple(parts)


def response_frame_around_topics(classes: _EntityClasses, head: dict[str, Any],
                                 topics: int) -> tuple[bytes, bytes, bytes]:
    """``(prefix, suffix, count)``: a Metadata response body with ``head``'s fields and
    ``topics`` topics is ``prefix + count + <the topics, each as kio writes one> + suffix``.
    Found from kio's own encoding of the response with no topic and with one: the bytes they
    share before and after the array (whose count is a compact uvarint in a flexible
    version, an int32 otherwise)."""
    response_cls = classes[0]
    probe = _error_entry(classes, codes.UNKNOWN_TOPIC_OR_PARTITION, "p")
    empty = protocol.encode_body(build(response_cls, topics=(), **head))
    one = protocol.encode_body(build(response_cls, topics=(probe,), **head))
    buffer = io.BytesIO()
    entity_writer(classes[2])(buffer, probe)
    encoded = buffer.getvalue()
    for empty_count, count in ((b"\x00\x00\x00\x00", _INT32.pack(topics)),
                               (b"\x01", _uvarint(topics + 1))):
        width = len(empty_count)
        for suffix_bytes in range(len(empty) - width + 1):
            at = len(empty) - width - suffix_bytes
            suffix = empty[at + width:]
            if (empty[at:at + width] == empty_count and one[:at] == empty[:at]
                    and one[at + width:at + width + len(encoded)] == encoded
                    and one[at + width + len(encoded):] == suffix):
                return empty[:at], suffix, count
    raise AssertionError("the topics array of a Metadata response was not found")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


async def _create_named(ctx: RequestContext, cluster: PartitionSeam, classes: _EntityClasses,
                        entries: list[Any], to_create: dict[str, int], turns: _Turns,
                        topic_ops: Callable[[str], int]) -> None:
    """Auto-create the topics of ``to_create`` (name -> its slot in ``entries``, answered
    with ``topic_ops(name)`` as their authorized operations) and fill
    their slots: all of them, or none when Kafka's controller would refuse the lot
    (:func:`auto_creation_refusal`; logged, each answered UNKNOWN_TOPIC_OR_PARTITION as
    Kafka's broker answers a creation it forwarded)."""
    if not to_create:
        return
    partitions_each = int(ctx.broker.config.get("num.partitions", 1))
    refusal = auto_creation_refusal(len(to_create), partitions_each)
    if refusal is not None:
        log.warning("Metadata request from %s (client %s) names %d unknown topics to "
                    "auto-create, %d partitions each: none created (%s, POLICY_VIOLATION, as "
                    "Kafka's controller refuses more than %d per request)", ctx.client_host,
                    ctx.client_id, len(to_create), partitions_each, refusal,
                    RECORDS_PER_REQUEST_MAX)
    for name, slot in to_create.items():
        code = codes.UNKNOWN_TOPIC_OR_PARTITION
        if refusal is None:
            code = await _auto_create(ctx, cluster, name)
        entries[slot] = (code, name, topic_ops(name))
        await turns.spend(1)


def _invalid_request(classes: _EntityClasses,
                     topics: list[tuple[uuid.UUID | None, str | None]]) -> Any:
    """Kafka's ``MetadataRequest.getErrorResponse`` for an InvalidRequestException: every
    requested topic with INVALID_REQUEST (a null name as ""), no brokers."""
    entries = tuple(
        build(classes[2], error_code=ErrorCode(codes.INVALID_REQUEST), name=name or "",
              topic_id=topic_id or _ZERO_UUID, is_internal=False, partitions=(),
              topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for topic_id, name in topics)
    return build(classes[0], throttle_time=_ZERO_MS, brokers=(), cluster_id=None,
                 controller_id=-1, topics=entries,
                 cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                 error_code=ErrorCode(codes.NONE))
