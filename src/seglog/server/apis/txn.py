"""Producer ids and transactions over the wire: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeProducers, DescribeTransactions,
ListTransactions.

Each handler is Kafka's ``KafkaApis.handle*Request`` over the store's transaction coordinator
(:class:`~seglog.coordinator.transaction.TransactionCoordinator`, its ``handle_*`` methods,
which raise Kafka's distinct errors) and the partitions' producer state. The broker
finalizes ``transaction.version`` 2 (:mod:`seglog.features`), so Kafka 4.x clients use
transactions v2 (KIP-890): they send no AddPartitionsToTxn nor AddOffsetsToTxn (the
partition leader adds a partition when it verifies a Produce v12+, the group coordinator
the ``__consumer_offsets`` partition on a TxnOffsetCommit v5+: :func:`verify_produce_partitions`,
:func:`_add_offsets_partition`), and every EndTxn v5 bumps the producer epoch (the markers
carry the new epoch, the answer gives it to the client). Older clients (EndTxn up to v4)
keep their epoch and add partitions themselves; their first transactional batch in a
partition is verified with the coordinator (KIP-890 part 1,
``transaction.partition.verification.enable``): directly on a lone broker or when this
broker coordinates the id, else with AddPartitionsToTxn v5 over the inter-broker listener
(:meth:`~seglog.cluster.txn_markers.TxnMarkerSender.add_partitions_to_txn`).

Versions and why: InitProducerId 0-5 (v3 adds KIP-360's producer id and epoch, v4
PRODUCER_FENCED, v5 only a new error code), AddPartitionsToTxn 0-5, AddOffsetsToTxn 0-4,
EndTxn 0-5 (v5: transaction.version 2), WriteTxnMarkers 1-2 (v2 adds each marker's
transaction version), TxnOffsetCommit 0-6 (v5: the implicit add, v6: topic ids),
DescribeProducers 0, DescribeTransactions 0,
ListTransactions 0-1 (v2 filters ids by a regular expression that Kafka matches with RE2J in
linear time; Python's ``re`` backtracks, so a client's pattern could hold the event loop).
Below the version that introduced PRODUCER_FENCED (4 for InitProducerId, 2 for the others)
the error is answered as INVALID_PRODUCER_EPOCH, as Kafka does for old clients.

TxnOffsetCommit: the broker encodes the offset commit records and appends them to the
group's ``__consumer_offsets`` partition as a transactional batch of the producer (its
producer id and epoch), then holds them pending until the transaction's marker, all under
the coordinator's lock (``TransactionCoordinator.append_transactional_offsets``). One
difference from Kafka, visible in DescribeProducers only: Kafka's coordinator writes every
such batch with sequence 0 (its appends skip sequence checks); seglog continues the
producer's sequence in that partition, since its Log checks every producer batch. Member and
generation checks (v3+) go to the group coordinator of :mod:`seglog.server.apis.groups`
(``extensions["groups"].check_member``).

In a cluster (docs/cluster.md §3.7) a broker coordinates the transactional ids of the
``__transaction_state`` partitions it leads (others: NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS), answers its state writes once replicated, and delivers the
markers to each partition's leader through :class:`~seglog.cluster.txn_markers.TxnMarkerSender`
(WriteTxnMarkers, served here too); a standalone broker keeps the synchronous local path.

Every handler that writes markers or records calls ``appended.notify()`` so that
read_committed fetches waiting on an LSO wake. Timed-out transactions are aborted (their
producers fenced) by the core's maintenance task (``Store.abort_timed_out_transactions``);
this module's ``start`` hook runs the expiry of idle transactional ids
(``transactional.id.expiration.ms``). The check a Produce of a transactional batch needs
(Kafka's transaction verification) is ``TransactionCoordinator.verify_transactional_append``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import re
import sys
import types
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, TypeVar, cast

from ...schemas import load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64
from kio.static.protocol import ResponsePayload

from ... import error_codes as codes
from ...aio import cancel_and_wait
from ...arguments import OFFSET_METADATA_BYTES_MAX
from ...cluster import coordinators as cluster_coordinators
from ...cluster.seam import AppendOrigin, AppendResult, CoordinatorPartitionsView, PartitionSeam
from ...coordinator.offsets_schema import OFFSETS_TOPIC
from ...coordinator.transaction import TRANSACTION_TIMEOUT_MS_MAX, TransactionCoordinator
from ...coordinator.txn_schema import STATE_NAMES
from ...errors import ProducerFencedError, SeglogError
from ...types import OffsetAndMetadata, TopicPartition
from ..authorization import (AclOperation, ResourceType, authorize, authorize_by_resource_type,
                             authorize_cluster, filter_authorized)
from ..context import BrokerState, RequestContext
from ..registry import ApiHandler
from .data_topics import partition_seam, topic_ids

if TYPE_CHECKING:
    from ...cluster.txn_markers import TxnMarkerSender
    from .groups import TxnMembers
    from ...storage.log import Log
    from ...storage.producer_state import ProducerStateEntry
    from ...store import Store

__all__ = ["HANDLERS", "PRODUCE_ADDS_PARTITIONS_SINCE", "TRANSACTION_VERSION_2",
           "verification_enabled", "verify_produce_partitions"]

_T = TypeVar("_T")

log = logging.getLogger(__name__)

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 28, 61, 65, 66
WRITE_TXN_MARKERS = 27

NONE = ErrorCode(codes.NONE)
_NO_THROTTLE = datetime.timedelta(0)
_MS = datetime.timedelta(milliseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_KNOWN_STATES = frozenset(STATE_NAMES.values())

#: The first version of each API whose clients understand PRODUCER_FENCED (older ones get
#: INVALID_PRODUCER_EPOCH, as Kafka's KafkaApis answers them).
_PRODUCER_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2,
                          END_TXN: 2}


def _response_class(ctx: RequestContext, api_key: int) -> Callable[..., ResponsePayload]:
    """kio's response class of ``api_key`` at ``ctx``'s version: its fields differ from
    version to version, so they are given by keyword (the dataclass checks them)."""
    return load_response_schema(api_key, ctx.api_version)


def _code(ctx: RequestContext, error: BaseException) -> ErrorCode:
    """Kafka's error code for ``error`` raised while serving ``ctx``'s request."""
    if isinstance(error, ProducerFencedError) \
            and ctx.api_version < _PRODUCER_FENCED_SINCE.get(ctx.api_key, 0):
        return ErrorCode(codes.INVALID_PRODUCER_EPOCH)
    code = getattr(error, "kafka_error_code", -1)
    if not isinstance(error, SeglogError) or code is None or code < 0:
        log.warning("%s (api %d v%d): %r answered as UNKNOWN_SERVER_ERROR", ctx.client_id,
                    ctx.api_key, ctx.api_version, error)
        return ErrorCode(codes.UNKNOWN_SERVER_ERROR)
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode(codes.UNKNOWN_SERVER_ERROR)


def _ms(value: Any) -> int:
    """Milliseconds of a kio duration field (a timedelta) or a plain int."""
    if isinstance(value, datetime.timedelta):
        return value // _MS
    return int(value)


def _timestamp(ms: int) -> datetime.datetime:
    """kio's datetime for Kafka's int64 milliseconds (-1 included)."""
    return _EPOCH + datetime.timedelta(milliseconds=ms)


#: Kafka's internal topics (``Topic.INTERNAL_TOPICS``).
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state",
                              "__share_group_state"})

#: Kafka's legal topic names (``Topic.validate``: 1-249 of these characters, not "." or "..").
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _legal_topic_name(name: str) -> bool:
    return bool(_LEGAL_TOPIC_NAME.fullmatch(name)) and name not in (".", "..")


def _coordinator(ctx: RequestContext) -> TransactionCoordinator:
    coordinator: TransactionCoordinator = ctx.broker.store.transaction_coordinator()
    return coordinator


def _partition_exists(store: Store, topic: str, partition: int) -> bool:
    """Whether ``topic``-``partition`` exists (Kafka's ``metadataCache.contains``)."""
    try:
        return topic in store and 0 <= partition < store.topic(topic).partitions
    except SeglogError:
        return False


#: This module's key in ``BrokerState.extensions`` for its coordinator glue.
COORDINATION_EXTENSION = "txn_coordination"


class TxnCoordination:
    """The transaction coordinator's glue to the cluster: the ``__transaction_state``
    partitions it coordinates (``partitions``, the seam's view: all on a lone broker) and its
    marker sender (``sender``; None when this broker leads every partition and the
    coordinator writes its markers itself)."""

    def __init__(self, partitions: CoordinatorPartitionsView, sender: TxnMarkerSender | None):
        self.partitions = partitions
        self.sender = sender


def _txn_partition(ctx: RequestContext, transactional_id: str) -> int | None:
    return cluster_coordinators.partition_in(
        partition_seam(ctx.broker), cluster_coordinators.TRANSACTION_STATE_TOPIC,
        transactional_id)


def _txn_coordinator_error(ctx: RequestContext, transactional_id: str) -> int:
    """NONE when this broker coordinates ``transactional_id``: when it leads and loaded its
    ``__transaction_state`` partition (a lone broker leads them all), else NOT_COORDINATOR
    (16), or COORDINATOR_LOAD_IN_PROGRESS (14) while loading."""
    state: TxnCoordination | None = ctx.broker.extensions.get(COORDINATION_EXTENSION)
    assert state is not None, "the transactions module was not started"
    partition = _txn_partition(ctx, transactional_id)
    if partition is None:
        return codes.NOT_COORDINATOR
    return state.partitions.error_for(partition)


#: ``TransactionStateManager.appendTransactionToLog``'s mapping of an acks=-1 append's error.
_STATE_WRITE_ERRORS = {
    codes.UNKNOWN_TOPIC_OR_PARTITION: codes.COORDINATOR_NOT_AVAILABLE,
    codes.NOT_ENOUGH_REPLICAS: codes.COORDINATOR_NOT_AVAILABLE,
    codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND: codes.COORDINATOR_NOT_AVAILABLE,
    codes.REQUEST_TIMED_OUT: codes.COORDINATOR_NOT_AVAILABLE,
    codes.NOT_LEADER_OR_FOLLOWER: codes.NOT_COORDINATOR,
    codes.KAFKA_STORAGE_ERROR: codes.NOT_COORDINATOR,
}


def _state_partition(ctx: RequestContext, transactional_id: str) -> TopicPartition | None:
    """The ``__transaction_state`` partition of ``transactional_id`` (None: no such topic)."""
    partition = _txn_partition(ctx, transactional_id)
    return None if partition is None else TopicPartition(
        cluster_coordinators.TRANSACTION_STATE_TOPIC, partition)


def _state_write_error(code: int) -> int:
    return _STATE_WRITE_ERRORS.get(code, code)


def _write_state(ctx: RequestContext, transactional_id: str, write: Callable[[], _T]
                 ) -> tuple[_T | None, AppendResult]:
    """Run the coordinator's ``write`` (which appends to ``transactional_id``'s
    ``__transaction_state`` partition) through the seam's one append, acks=-1 (Kafka's
    ``appendTransactionToLog``): nothing runs unless this broker leads the partition with
    enough in-sync replicas. Returns what ``write`` returned (None when it did not run) and
    the append; what ``write`` raises propagates. Follow with :func:`_state_acks`."""
    tp = _state_partition(ctx, transactional_id)
    if tp is None:
        return None, AppendResult(codes.NOT_LEADER_OR_FOLLOWER)
    done: list[_T] = []

    def writer(log_: Log) -> int:
        done.append(write())
        return int(log_.end_offset) - 1

    result = partition_seam(ctx.broker).append_now(tp, writer, acks=-1,
                                                   origin=AppendOrigin.COORDINATOR)
    return (done[0] if done else None), result


async def _write_state_blocking(ctx: RequestContext, transactional_id: str, write: Callable[[], _T]
                                ) -> tuple[_T | None, int]:
    """:func:`_write_state` with ``write`` on a worker thread, then :func:`_state_acks`:
    what ``write`` returned and the error code to answer (NONE once replicated)."""
    tp = _state_partition(ctx, transactional_id)
    if tp is None:
        return None, codes.NOT_COORDINATOR
    done: list[_T] = []

    def writer(log_: Log) -> int:
        done.append(write())
        return int(log_.end_offset) - 1

    result = await partition_seam(ctx.broker).append(
        tp, writer, acks=-1, origin=AppendOrigin.COORDINATOR, timeout_s=_state_timeout_s(ctx),
        run_blocking=ctx.broker.run_blocking)
    return (done[0] if done else None), _state_write_error(result.error_code)


def _state_timeout_s(ctx: RequestContext) -> float:
    return int(ctx.broker.config.get("request.timeout.ms", _MARKER_ACKS_TIMEOUT_MS)) / 1000


async def _state_acks(ctx: RequestContext, result: AppendResult) -> int:
    """The coordinator answers once its ``__transaction_state`` write is replicated (Kafka
    appends it with acks=-1): NONE, or COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR as Kafka
    maps the append's error (at once on a lone broker: its ISR is itself)."""
    await partition_seam(ctx.broker).wait_for_acks((result,), acks=-1,
                                                   timeout_s=_state_timeout_s(ctx))
    return _state_write_error(result.error_code)


def _group_coordinator_error(ctx: RequestContext, group_id: str) -> int:
    """The group coordinator's gate (TxnOffsetCommit goes to the group's coordinator)."""
    from . import groups  # noqa: PLC0415 - sibling handler module

    return groups.coordinator_error(ctx, group_id)


# --- InitProducerId ------------------------------------------------------------------------


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's InitProducerId: a fresh producer id at epoch 0 for an idempotent producer (no
    transactional id), else the transaction coordinator's (see
    ``TransactionCoordinator.handle_init_producer_id``)."""
    response = _response_class(ctx, INIT_PRODUCER_ID)

    def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> ResponsePayload:
        return response(throttle_time=_NO_THROTTLE, error_code=error,
                        producer_id=i64(producer_id), producer_epoch=i16(epoch))

    transactional_id = request.transactional_id
    expected_id = getattr(request, "producer_id", -1)
    expected_epoch = getattr(request, "producer_epoch", -1)
    # KafkaApis: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster
    # or WRITE on some topic.
    if transactional_id is not None:
        if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         transactional_id):
            return answer(ErrorCode(codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    elif not authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE) and \
            not authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return answer(ErrorCode(codes.CLUSTER_AUTHORIZATION_FAILED))
    if (expected_id == -1) != (expected_epoch == -1):
        return answer(ErrorCode(codes.INVALID_REQUEST))
    store = ctx.broker.store
    if transactional_id is None:
        try:
            producer_id, epoch = await ctx.broker.run_blocking(store.init_producer_id)
        except Exception as error:  # noqa: BLE001 -- answered with its Kafka code
            return answer(_code(ctx, error))
        return answer(NONE, producer_id, epoch)
    if not transactional_id:
        return answer(ErrorCode(codes.INVALID_REQUEST))
    gate = _txn_coordinator_error(ctx, transactional_id)
    if gate:
        return answer(ErrorCode(gate))
    timeout_ms_max = ctx.broker.config.get("transaction.max.timeout.ms",
                                           TRANSACTION_TIMEOUT_MS_MAX)

    def init() -> tuple[int, int]:
        return _coordinator(ctx).handle_init_producer_id(
            transactional_id, timeout_ms=_ms(request.transaction_timeout),
            timeout_ms_max=timeout_ms_max, expected_producer_id=int(expected_id),
            expected_producer_epoch=int(expected_epoch))

    try:
        initialised, replicated = await _write_state_blocking(ctx, transactional_id, init)
    except Exception as error:  # noqa: BLE001 -- answered with its Kafka code
        # CONCURRENT_TRANSACTIONS: a fenced producer's transaction was just aborted.
        ctx.broker.appended.notify()
        return answer(_code(ctx, error))
    if replicated or initialised is None:
        return answer(ErrorCode(replicated or codes.NOT_COORDINATOR))
    producer_id, epoch = initialised
    return answer(NONE, producer_id, epoch)


# --- AddPartitionsToTxn, AddOffsetsToTxn -----------------------------------------------------


def _add_partitions_result(ctx: RequestContext, transactional_id: str, producer_id: int,
                           producer_epoch: int, partitions: list[TopicPartition],
                           verify_only: bool, *, from_broker: bool = False
                           ) -> dict[TopicPartition, ErrorCode]:
    """The error of each partition of one transaction of an AddPartitionsToTxn, as Kafka's
    handler: a client (v0-v3) may not add an internal topic's partitions
    (TOPIC_AUTHORIZATION_FAILED: Kafka leaves them out of the topics it authorizes; offsets
    join through AddOffsetsToTxn), unknown partitions fail the whole request (the others
    OPERATION_NOT_ATTEMPTED); else the coordinator's answer, the same for every partition
    (per partition when verifying)."""
    writable: set[str] | None = None
    if ctx.api_version < 4 and not from_broker:
        # A client's request: WRITE on the transactional id, then on each topic.
        if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         transactional_id or ""):
            return {tp: ErrorCode(codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    for tp in partitions}
        writable = filter_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                     (tp.topic for tp in partitions))
    if not transactional_id:
        return {tp: ErrorCode(codes.INVALID_REQUEST) for tp in partitions}
    # (A broker serving the data APIs without this module, tests' handler harness: the
    # store's coordinator is the only one.)
    started = COORDINATION_EXTENSION in ctx.broker.extensions or not from_broker
    gate = _txn_coordinator_error(ctx, transactional_id) if started else codes.NONE
    if gate:
        return {tp: ErrorCode(gate) for tp in partitions}
    store = ctx.broker.store
    refused = {tp: ErrorCode(codes.TOPIC_AUTHORIZATION_FAILED) for tp in partitions
               if writable is not None and (tp.topic in _INTERNAL_TOPICS
                                            or tp.topic not in writable)}
    refused.update({tp: ErrorCode(codes.UNKNOWN_TOPIC_OR_PARTITION) for tp in partitions
                    if tp not in refused
                    and not _partition_exists(store, tp.topic, tp.partition)})
    if refused:
        return {tp: refused.get(tp, ErrorCode(codes.OPERATION_NOT_ATTEMPTED)) for tp in partitions}
    coordinator = _coordinator(ctx)
    try:
        if verify_only:
            found = coordinator.verify_partitions(transactional_id, producer_id,
                                                  producer_epoch, partitions)
            return {tp: NONE if found[tp] else ErrorCode(codes.TRANSACTION_ABORTABLE)
                    for tp in partitions}
        # A broker's add (v4+, not verifying) is KIP-890 part 2's implicit add for a
        # transaction.version 2 producer (Kafka's AddPartitionsToTxnManager sends it so).
        version = TRANSACTION_VERSION_2 if from_broker or ctx.api_version >= 4 else None
        _done, appended = _write_state(
            ctx, transactional_id, lambda: coordinator.handle_add_partitions(
                transactional_id, producer_id, producer_epoch, partitions,
                transaction_version=version))
    except Exception as error:  # noqa: BLE001 -- answered with its Kafka code
        code = _code(ctx, error)
        return {tp: code for tp in partitions}
    if appended.error_code != codes.NONE:
        refused_code = ErrorCode(_state_write_error(appended.error_code))
        return {tp: refused_code for tp in partitions}
    return {tp: NONE for tp in partitions}


def _topic_results(module: types.ModuleType, errors: dict[TopicPartition, ErrorCode]
                   ) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(module.AddPartitionsToTxnPartitionResult(
            partition_index=i32(tp.partition), partition_error_code=code))
    return tuple(module.AddPartitionsToTxnTopicResult(name=topic,
                                                      results_by_partition=tuple(results))
                 for topic, results in by_topic.items())


def _partitions(topics: Iterable[Any]) -> list[TopicPartition]:
    """The distinct partitions of a request's topics, in request order."""
    seen: dict[TopicPartition, None] = {}
    for topic in topics:
        for partition in topic.partitions:
            seen.setdefault(TopicPartition(topic.name, int(partition)), None)
    return list(seen)


async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's AddPartitionsToTxn: v0-v3 one transaction (the producer's), v4+ a batch of
    transactions, each added or, with ``verify_only``, checked."""
    response = _response_class(ctx, ADD_PARTITIONS_TO_TXN)
    module = sys.modules[response.__module__]
    if ctx.api_version < 4:
        errors = _add_partitions_result(
            ctx, request.v3_and_below_transactional_id, int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            _partitions(request.v3_and_below_topics), False)
        errors = await _replicated_partitions(ctx, request.v3_and_below_transactional_id,
                                              errors)
        return response(throttle_time=_NO_THROTTLE,
                        results_by_topic_v3_and_below=_topic_results(module, errors))
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        # v4+ comes from brokers only (KafkaApis: authorizeClusterOperation).
        return response(throttle_time=_NO_THROTTLE,
                        error_code=ErrorCode(codes.CLUSTER_AUTHORIZATION_FAILED),
                        results_by_transaction=())
    results = []
    for transaction in request.transactions:
        errors = _add_partitions_result(
            ctx, transaction.transactional_id, int(transaction.producer_id),
            int(transaction.producer_epoch), _partitions(transaction.topics),
            transaction.verify_only)
        if not transaction.verify_only:
            errors = await _replicated_partitions(ctx, transaction.transactional_id, errors)
        results.append(module.AddPartitionsToTxnResult(
            transactional_id=transaction.transactional_id,
            topic_results=_topic_results(module, errors)))
    return response(throttle_time=_NO_THROTTLE, error_code=NONE,
                    results_by_transaction=tuple(results))


async def _replicated_partitions(ctx: RequestContext, transactional_id: str,
                                 errors: dict[TopicPartition, ErrorCode]
                                 ) -> dict[TopicPartition, ErrorCode]:
    """A successful AddPartitionsToTxn answers once its state write is replicated."""
    if not errors or any(code != NONE for code in errors.values()):
        return errors
    replicated = await _state_replicated(ctx, transactional_id)
    if replicated:
        return {tp: ErrorCode(replicated) for tp in errors}
    return errors


async def _state_replicated(ctx: RequestContext, transactional_id: str) -> int:
    """Wait until ``transactional_id``'s ``__transaction_state`` partition is replicated up
    to its end (the write :func:`_write_state` made): :func:`_state_acks` of it."""
    tp = _state_partition(ctx, transactional_id)
    replica = None if tp is None else partition_seam(ctx.broker).leader_replica(tp)
    if replica is None:
        return codes.NOT_COORDINATOR
    return await _state_acks(ctx, AppendResult(codes.NONE, appended=True,
                                               last_offset=int(replica.log.end_offset) - 1,
                                               replica=replica))


def _offsets_partition(store: Store, group_id: str) -> TopicPartition:
    """The group's ``__consumer_offsets`` partition (the topic is made on first use)."""
    tp: TopicPartition = store.txn_offset_commit_records(group_id, {}).tp
    return tp


async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
    transaction (the coordinator's AddPartitionsToTxn for that one partition)."""
    response = _response_class(ctx, ADD_OFFSETS_TO_TXN)
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                     request.transactional_id):
        return response(throttle_time=_NO_THROTTLE,
                        error_code=ErrorCode(codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return response(throttle_time=_NO_THROTTLE,
                        error_code=ErrorCode(codes.GROUP_AUTHORIZATION_FAILED))
    if not request.transactional_id:
        return response(throttle_time=_NO_THROTTLE, error_code=ErrorCode(codes.INVALID_REQUEST))
    gate = _txn_coordinator_error(ctx, request.transactional_id)
    if gate:
        return response(throttle_time=_NO_THROTTLE, error_code=ErrorCode(gate))
    try:
        # The group's __consumer_offsets partition (the cluster's partition count; Kafka's
        # offsets.topic.num.partitions until the topic exists).
        cluster = partition_seam(ctx.broker)
        cluster.ensure_internal_topic(OFFSETS_TOPIC)
        count = cluster.internal_partitions(
            OFFSETS_TOPIC, int(ctx.broker.config.get("offsets.topic.num.partitions", 50)))
        partition = cluster_coordinators.coordinator_partition(request.group_id, count)
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        _done, appended = _write_state(
            ctx, request.transactional_id, lambda: _coordinator(ctx).handle_add_partitions(
                request.transactional_id, int(request.producer_id),
                int(request.producer_epoch), [tp]))
    except Exception as error:  # noqa: BLE001 -- answered with its Kafka code
        return response(throttle_time=_NO_THROTTLE, error_code=_code(ctx, error))
    replicated = await _state_acks(ctx, appended)
    return response(throttle_time=_NO_THROTTLE, error_code=ErrorCode(replicated))


# --- EndTxn -------------------------------------------------------------------------------


#: The first EndTxn version of a ``transaction.version`` 2 client (KafkaApis: "If the request
#: is version 5, we know the client supports transaction version 2").
_END_TXN_TV2_SINCE = 5
#: The transaction.version of those clients.
TRANSACTION_VERSION_2 = 2


async def handle_end_txn(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's EndTxn: COMMIT or ABORT markers to every partition of the producer's
    transaction (``__consumer_offsets`` included, which applies or drops its offset commits),
    then read_committed fetches are woken. v5 (a ``transaction.version`` 2 client, KIP-890
    part 2): the coordinator bumps the producer's epoch at every commit or abort, the
    markers carry the new epoch and the answer gives the producer id and epoch to continue
    with (-1 / -1 with an error, as Kafka)."""
    response = _response_class(ctx, END_TXN)

    def answer(error: int, producer_id: int = -1, epoch: int = -1) -> ResponsePayload:
        if ctx.api_version >= _END_TXN_TV2_SINCE:
            return response(throttle_time=_NO_THROTTLE, error_code=ErrorCode(error),
                            producer_id=i64(producer_id), producer_epoch=i16(epoch))
        return response(throttle_time=_NO_THROTTLE, error_code=ErrorCode(error))

    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                     request.transactional_id):
        return answer(codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not request.transactional_id:
        return answer(codes.INVALID_REQUEST)
    gate = _txn_coordinator_error(ctx, request.transactional_id)
    if gate:
        return answer(gate)
    transaction_version = TRANSACTION_VERSION_2 \
        if ctx.api_version >= _END_TXN_TV2_SINCE else 0

    def end() -> tuple[int, int]:
        return _coordinator(ctx).handle_end_transaction(
            request.transactional_id, int(request.producer_id), int(request.producer_epoch),
            commit=bool(request.committed), transaction_version=transaction_version)

    try:
        ended, replicated = await _write_state_blocking(ctx, request.transactional_id, end)
    except Exception as error:  # noqa: BLE001 -- answered with its Kafka code
        return answer(_code(ctx, error))
    finally:
        ctx.broker.appended.notify()
    if replicated or ended is None:
        return answer(replicated or codes.NOT_COORDINATOR)
    return answer(codes.NONE, *ended)


# --- a partition leader's verification of transactional appends (KIP-890) -----------------

#: Produce v12+ comes from a ``transaction.version`` 2 producer, which sends no
#: AddPartitionsToTxn: the leader adds the partition (Kafka's ``addPartition`` operation);
#: v11 understands TRANSACTION_ABORTABLE (``genericErrorSupported``); older clients get
#: INVALID_TXN_STATE instead (``defaultError``).
PRODUCE_ADDS_PARTITIONS_SINCE = 12
_PRODUCE_ABORTABLE_SINCE = 11

#: The coordinator's answers a leader turns into a retriable NOT_ENOUGH_REPLICAS for the
#: producer (Kafka's ReplicaManager: it triggers no metadata refresh).
_RETRIABLE_VERIFICATION_ERRORS = frozenset({
    codes.CONCURRENT_TRANSACTIONS, codes.NETWORK_EXCEPTION, codes.COORDINATOR_LOAD_IN_PROGRESS,
    codes.COORDINATOR_NOT_AVAILABLE, codes.NOT_COORDINATOR})


def verification_enabled(ctx: RequestContext) -> bool:
    """``transaction.partition.verification.enable`` (Kafka's default true)."""
    value = ctx.broker.config.get("transaction.partition.verification.enable", True)
    return value if isinstance(value, bool) else str(value).lower() == "true"


def _produce_error(code: int, produce_version: int) -> tuple[int, str | None]:
    """What the producer gets for the coordinator's answer ``code`` about one partition
    (Kafka's AddPartitionsToTxnManager, then ReplicaManager): ``(error code, message)``."""
    if code == codes.PRODUCER_FENCED:
        code = codes.INVALID_PRODUCER_EPOCH
    elif code == codes.TRANSACTION_ABORTABLE and produce_version < _PRODUCE_ABORTABLE_SINCE:
        code = codes.INVALID_TXN_STATE
    if code == codes.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _RETRIABLE_VERIFICATION_ERRORS:
        name = codes.name(code)
        return codes.NOT_ENOUGH_REPLICAS, ("Unable to verify the partition has been added to "
                                           f"the transaction. Underlying error: {name}")
    if code == codes.UNKNOWN_PRODUCER_ID:
        return codes.OUT_OF_ORDER_SEQUENCE_NUMBER, None
    return code, None


async def verify_produce_partitions(ctx: RequestContext, transactional_id: str,
                                    producer_id: int, producer_epoch: int,
                                    partitions: list[TopicPartition]
                                    ) -> dict[TopicPartition, tuple[int, str | None]]:
    """A partition leader's check, before it appends a Produce's transactional batches
    to ``partitions`` (those where the producer has no transaction open at that epoch), that
    they are in the producer's ongoing transaction (KIP-890 part 1, Kafka's
    ``AddPartitionsToTxnManager``, when ``transaction.partition.verification.enable``); from
    a ``transaction.version`` 2 producer (Produce v12+) the partitions are added to it
    instead (part 2). The transaction coordinator is asked directly when this broker is it
    (a lone broker always), else with AddPartitionsToTxn v5 (``verify_only`` for part 1).
    Returns the partitions refused: ``{partition: (error code, message)}``, as Kafka answers
    the producer."""
    adds = ctx.api_version >= PRODUCE_ADDS_PARTITIONS_SINCE
    if not partitions or not (adds or verification_enabled(ctx)):
        return {}
    answers = await _ask_coordinator(ctx, transactional_id, producer_id, producer_epoch,
                                     partitions, verify_only=not adds)
    if adds:
        answers = await _retry_concurrent_adds(ctx, transactional_id, producer_id,
                                               producer_epoch, answers)
    refused: dict[TopicPartition, tuple[int, str | None]] = {}
    for tp, code in answers.items():
        if code != codes.NONE:
            refused[tp] = _produce_error(code, ctx.api_version)
    return refused


async def _retry_concurrent_adds(ctx: RequestContext, transactional_id: str, producer_id: int,
                                 producer_epoch: int, answers: dict[TopicPartition, int]
                                 ) -> dict[TopicPartition, int]:
    """Kafka 4.4's server-side retry of an add (Produce v12+) the coordinator answered
    CONCURRENT_TRANSACTIONS, the previous transaction's markers still being written: asked
    again every ``add.partitions.to.txn.retry.backoff.ms`` while less than
    ``add.partitions.to.txn.retry.backoff.max.ms`` has passed since the first answer, then
    what the last answer says (NOT_ENOUGH_REPLICAS to the producer). A client that starts
    its next transaction at once after a commit mostly gets NONE a few tens of milliseconds
    later instead of an error and its own backoff (measured on Kafka 4.4: NONE after
    25-35 ms)."""
    config = ctx.broker.config
    backoff_s = int(config.get("add.partitions.to.txn.retry.backoff.ms", 20)) / 1000.0
    max_s = int(config.get("add.partitions.to.txn.retry.backoff.max.ms", 100)) / 1000.0
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + max_s
    answers = dict(answers)
    while True:
        waiting = [tp for tp, code in answers.items() if code == codes.CONCURRENT_TRANSACTIONS]
        if not waiting or loop.time() + backoff_s > give_up_at:
            return answers
        await asyncio.sleep(backoff_s)
        answers.update(await _ask_coordinator(ctx, transactional_id, producer_id,
                                              producer_epoch, waiting, verify_only=False))


async def _ask_coordinator(ctx: RequestContext, transactional_id: str, producer_id: int,
                           producer_epoch: int, partitions: list[TopicPartition], *,
                           verify_only: bool) -> dict[TopicPartition, int]:
    """The coordinator's answer per partition to an AddPartitionsToTxn (v5, a broker's)
    for one transaction: this broker's own coordinator through the same checks as the
    request's handler, or the coordinator broker over the inter-broker listener."""
    state_tp = _state_partition(ctx, transactional_id)
    if state_tp is None:
        return {tp: codes.COORDINATOR_NOT_AVAILABLE for tp in partitions}
    cluster = partition_seam(ctx.broker)
    if cluster.leader_replica(state_tp) is not None:
        errors = _add_partitions_result(ctx, transactional_id, producer_id, producer_epoch,
                                        partitions, verify_only, from_broker=True)
        if not verify_only:
            errors = await _replicated_partitions(ctx, transactional_id, errors)
        return {tp: int(code) for tp, code in errors.items()}
    coordination: TxnCoordination | None = ctx.broker.extensions.get(COORDINATION_EXTENSION)
    if coordination is None or coordination.sender is None:
        return {tp: codes.COORDINATOR_NOT_AVAILABLE for tp in partitions}
    return await coordination.sender.add_partitions_to_txn(
        transactional_id, producer_id, producer_epoch, partitions, coordinator_tp=state_tp,
        verify_only=verify_only)


# --- TxnOffsetCommit ------------------------------------------------------------------------


def _group_coordinator(ctx: RequestContext) -> TxnMembers | None:
    """The group coordinators' member checks (:mod:`seglog.server.apis.groups`: the
    classic coordinator, or the consumer group one for a KIP-848 group), or None when no
    groups module runs."""
    from . import groups  # noqa: PLC0415 - sibling handler module

    return groups.txn_members(ctx.broker)


async def _append_txn_offsets_replicated(ctx: RequestContext, request: Any,
                                         offsets: dict[TopicPartition, OffsetAndMetadata]
                                         ) -> ErrorCode:
    """:func:`_append_txn_offsets` through the seam's one append to the group's
    ``__consumer_offsets`` partition, acks=-1 (Kafka's TxnOffsetCommit appends as the group
    coordinator's commits do): NONE once replicated, else the append's error as Kafka's
    ``GroupMetadataManager`` maps it (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
    from . import groups  # noqa: PLC0415 - sibling handler module

    cluster = partition_seam(ctx.broker)
    tp = _offsets_partition(ctx.broker.store, request.group_id)

    def writer(log_: Log) -> int:
        _append_txn_offsets(ctx, request, offsets)
        return int(log_.end_offset) - 1

    result = cluster.append_now(tp, writer, acks=-1, origin=AppendOrigin.COORDINATOR)
    if result.appended:
        await cluster.wait_for_acks((result,), acks=-1, timeout_s=_state_timeout_s(ctx))
    return ErrorCode(groups.commit_error(result.error_code))


def _append_txn_offsets(ctx: RequestContext, request: Any,
                        offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
    """Check the producer's transaction (Kafka's verification comes first), then the group
    member (v3+), then append the commit records to the group's ``__consumer_offsets``
    partition as a transactional batch of the producer, held pending until the marker
    (``TransactionCoordinator.append_transactional_offsets``, which checks the transaction
    again under its lock). Raises the typed error to answer with."""
    store = ctx.broker.store
    coordinator = _coordinator(ctx)
    producer_id, producer_epoch = int(request.producer_id), int(request.producer_epoch)
    # The group coordinator asks the transaction coordinator when it is this broker; another
    # broker's would have to be asked over the network (Kafka 2.8 does not verify at all).
    verify = _txn_coordinator_error(ctx, request.transactional_id) == codes.NONE
    if verify:
        coordinator.check_transactional_offsets(request.transactional_id, producer_id,
                                                producer_epoch,
                                                _offsets_partition(store, request.group_id))
    group_coordinator = _group_coordinator(ctx)
    if group_coordinator is not None:  # generation / member checks (-1 / "" / None below v3)
        group_coordinator.check_member(request.group_id, getattr(request, "member_id", ""),
                                       int(getattr(request, "generation_id", -1)),
                                       getattr(request, "group_instance_id", None))
    coordinator.append_transactional_offsets(request.transactional_id, producer_id,
                                             producer_epoch, request.group_id, offsets,
                                             verify=verify)
    # A commit from outside any group makes the (simple, empty) group, as Kafka's
    # getOrMaybeCreateClassicGroup: a later commit naming a member then gets
    # UNKNOWN_MEMBER_ID, not ILLEGAL_GENERATION.
    if group_coordinator is not None:
        group_coordinator.ensure_group(request.group_id, ctx.broker.now_ms())


#: TxnOffsetCommit v5+ comes from a ``transaction.version`` 2 producer, which sends no
#: AddOffsetsToTxn: the group's ``__consumer_offsets`` partition is added to the
#: transaction by the broker (KIP-890 part 2); v6 names topics by id.
_TXN_OFFSET_COMMIT_ADDS_SINCE = 5
_TXN_OFFSET_COMMIT_BY_ID_SINCE = 6


async def _add_offsets_partition(ctx: RequestContext, request: Any) -> int:
    """Before a TxnOffsetCommit's records are appended: v5+ adds the group's
    ``__consumer_offsets`` partition to the producer's transaction; below v5, when the
    transaction coordinator is another broker, it verifies the partition is in it (this
    broker's own coordinator is checked under its lock at the append). The error code to
    answer every partition with, or NONE."""
    adds = ctx.api_version >= _TXN_OFFSET_COMMIT_ADDS_SINCE
    local = _txn_coordinator_error(ctx, request.transactional_id) == codes.NONE
    if not adds and (local or not verification_enabled(ctx)):
        return codes.NONE
    tp = _offsets_partition(ctx.broker.store, request.group_id)
    answers = await _ask_coordinator(ctx, request.transactional_id, int(request.producer_id),
                                     int(request.producer_epoch), [tp], verify_only=not adds)
    code = answers.get(tp, codes.UNKNOWN_SERVER_ERROR)
    if code == codes.PRODUCER_FENCED:
        return codes.INVALID_PRODUCER_EPOCH
    if code == codes.TRANSACTION_ABORTABLE and not adds:
        return codes.INVALID_TXN_STATE
    return code


async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's TxnOffsetCommit (up to v6): per partition UNKNOWN_TOPIC_OR_PARTITION
    (UNKNOWN_TOPIC_ID for v6's topic ids), OFFSET_METADATA_TOO_LARGE, or the request's error
    (INVALID_GROUP_ID, INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE
    without AddOffsetsToTxn below v5, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
    FENCED_INSTANCE_ID from the group); else NONE, the offsets pending until the transaction
    ends. v5+: the group's ``__consumer_offsets`` partition joins the transaction first
    (:func:`_add_offsets_partition`)."""
    response = _response_class(ctx, TXN_OFFSET_COMMIT)
    module = sys.modules[response.__module__]
    store = ctx.broker.store
    by_id = ctx.api_version >= _TXN_OFFSET_COMMIT_BY_ID_SINCE
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    keys: dict[TopicPartition, Any] = {}  # the request's topic key (name, or v6's id)
    names: list[tuple[Any, Any, str | None]] = []
    for topic in request.topics:
        if by_id:
            found = topic_ids(ctx.broker).topic(topic.topic_id)
            names.append((topic, topic.topic_id, None if found is None else found.name))
        else:
            names.append((topic, topic.name, topic.name))
    # KafkaApis: WRITE on the transactional id, READ on the group (every partition gets the
    # error), READ on each topic (per partition).
    denied = codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id) \
        else codes.GROUP_AUTHORIZATION_FAILED if not authorize(
            ctx, AclOperation.READ, ResourceType.GROUP, request.group_id) else codes.NONE
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                 (name for _t, _k, name in names if name is not None))
    for topic, key, name in names:
        for partition in topic.partitions:
            tp = TopicPartition(name if name is not None else str(key),
                                int(partition.partition_index))
            keys[tp] = key
            metadata = partition.committed_metadata or ""
            if denied:
                errors[tp] = ErrorCode(denied)
            elif name is None:
                errors[tp] = ErrorCode(codes.UNKNOWN_TOPIC_ID)
            elif name not in readable:
                errors[tp] = ErrorCode(codes.TOPIC_AUTHORIZATION_FAILED)
            elif not _partition_exists(store, tp.topic, tp.partition):
                errors[tp] = ErrorCode(codes.UNKNOWN_TOPIC_OR_PARTITION)
            elif len(metadata.encode("utf-8")) > OFFSET_METADATA_BYTES_MAX:
                errors[tp] = ErrorCode(codes.OFFSET_METADATA_TOO_LARGE)
            else:
                errors[tp] = NONE
                offsets[tp] = OffsetAndMetadata(
                    int(partition.committed_offset), metadata,
                    int(getattr(partition, "committed_leader_epoch", -1)))
    if offsets:
        gate = _group_coordinator_error(ctx, request.group_id) if request.group_id else 0
        if not request.group_id:
            code = ErrorCode(codes.INVALID_GROUP_ID)
        elif gate:
            code = ErrorCode(gate)
        else:
            try:
                added = await _add_offsets_partition(ctx, request)
                code = ErrorCode(added) if added else \
                    await _append_txn_offsets_replicated(ctx, request, offsets)
            except Exception as error:  # noqa: BLE001 -- answered with its Kafka code
                code = _code(ctx, error)
            finally:
                ctx.broker.appended.notify()
        for tp in offsets:
            errors[tp] = code
    by_topic: dict[Any, list[Any]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(keys[tp], []).append(module.TxnOffsetCommitResponsePartition(
            partition_index=i32(tp.partition), error_code=code))
    if by_id:
        return response(throttle_time=_NO_THROTTLE, topics=tuple(
            module.TxnOffsetCommitResponseTopic(topic_id=key, partitions=tuple(partitions))
            for key, partitions in by_topic.items()))
    return response(throttle_time=_NO_THROTTLE, topics=tuple(
        module.TxnOffsetCommitResponseTopic(name=name, partitions=tuple(partitions))
        for name, partitions in by_topic.items()))


# --- DescribeProducers, DescribeTransactions, ListTransactions ------------------------------


async def handle_describe_producers(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's DescribeProducers: each partition's active producers from its producer state
    (id, epoch, last sequence, last timestamp, coordinator epoch, first offset of the open
    transaction or -1)."""
    response = _response_class(ctx, DESCRIBE_PRODUCERS)
    module = sys.modules[response.__module__]
    store = ctx.broker.store
    topics: list[Any] = []
    for topic in request.topics:
        if not _legal_topic_name(topic.name):
            topic_error = ErrorCode(codes.INVALID_TOPIC_EXCEPTION)
        elif not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name):
            topic_error = ErrorCode(codes.TOPIC_AUTHORIZATION_FAILED)
        elif topic.name not in store:
            topic_error = ErrorCode(codes.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            topic_error = NONE
        partitions: list[Any] = []
        for index in topic.partition_indexes:
            index = int(index)
            error = topic_error
            if error == NONE and not _partition_exists(store, topic.name, index):
                error = ErrorCode(codes.UNKNOWN_TOPIC_OR_PARTITION)
            producers: tuple[Any, ...] = ()
            if error == NONE:
                try:
                    state = store.log((topic.name, index)).producer_state
                    # .copy() of the proxy is the dict's copy: atomic under the GIL while
                    # an append on another thread adds a producer. The cast: the property
                    # is declared a Mapping but is a MappingProxyType (which has .copy()).
                    entries = cast("types.MappingProxyType[int, ProducerStateEntry]",
                                   state.active_producers).copy()
                    producers = tuple(module.ProducerState(
                        producer_id=i64(pid), producer_epoch=i32(entry.producer_epoch),
                        last_sequence=i32(entry.last_seq),
                        last_timestamp=i64(entry.last_timestamp_ms),
                        coordinator_epoch=i32(entry.coordinator_epoch),
                        current_txn_start_offset=i64(
                            -1 if entry.current_txn_first_offset is None
                            else entry.current_txn_first_offset))
                        for pid, entry in sorted(entries.items()))
                except SeglogError as failure:
                    error = _code(ctx, failure)
            partitions.append(module.PartitionResponse(
                partition_index=i32(index), error_code=error, error_message=None,
                active_producers=producers))
        topics.append(module.TopicResponse(name=topic.name, partitions=tuple(partitions)))
    return response(throttle_time=_NO_THROTTLE, topics=tuple(topics))


_IN_FLIGHT_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


async def handle_describe_transactions(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's DescribeTransactions: each id's state, producer id and epoch, timeout, start
    time and the partitions of its transaction in flight (Kafka clears them when one
    completes); TRANSACTIONAL_ID_NOT_FOUND for an id never initialised, INVALID_REQUEST for
    an empty one."""
    response = _response_class(ctx, DESCRIBE_TRANSACTIONS)
    module = sys.modules[response.__module__]
    try:
        coordinator = _coordinator(ctx)
    except SeglogError:  # a store that cannot serve (closing): Kafka's inactive coordinator
        coordinator = None
    states: list[Any] = []
    for transactional_id in request.transactional_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                         transactional_id):
            states.append(module.TransactionState(
                error_code=ErrorCode(codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                transactional_id=transactional_id, transaction_state="",
                transaction_timeout=datetime.timedelta(0), transaction_start_time=_EPOCH,
                producer_id=i64(0), producer_epoch=i16(0), topics=()))
            continue
        gate = _txn_coordinator_error(ctx, transactional_id) if transactional_id else 0
        description = coordinator.describe(transactional_id) \
            if transactional_id and coordinator is not None and not gate else None
        if gate:
            states.append(module.TransactionState(
                error_code=ErrorCode(gate), transactional_id=transactional_id,
                transaction_state="", transaction_timeout=datetime.timedelta(0),
                transaction_start_time=_EPOCH, producer_id=i64(0), producer_epoch=i16(0),
                topics=()))
            continue
        if description is None:
            states.append(module.TransactionState(
                error_code=(ErrorCode(codes.INVALID_REQUEST) if not transactional_id
                            else ErrorCode(codes.COORDINATOR_NOT_AVAILABLE) if coordinator is None
                            else ErrorCode(codes.TRANSACTIONAL_ID_NOT_FOUND)),
                transactional_id=transactional_id, transaction_state="",
                transaction_timeout=datetime.timedelta(0), transaction_start_time=_EPOCH,
                producer_id=i64(0), producer_epoch=i16(0), topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        if description.state in _IN_FLIGHT_STATES:
            for tp in description.partitions:  # only topics the caller may DESCRIBE
                if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
        states.append(module.TransactionState(
            error_code=NONE, transactional_id=transactional_id,
            transaction_state=description.state,
            transaction_timeout=datetime.timedelta(milliseconds=description.timeout_ms),
            transaction_start_time=_timestamp(description.start_timestamp_ms),
            producer_id=i64(description.producer_id),
            producer_epoch=i16(description.producer_epoch),
            topics=tuple(module.TopicData(topic=topic, partitions=tuple(i32(p) for p in ps))
                         for topic, ps in by_topic.items())))
    return response(throttle_time=_NO_THROTTLE, transaction_states=tuple(states))


async def handle_list_transactions(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's ListTransactions: every transactional id matching the state, producer id,
    (v1) duration and (v2) transactional id pattern filters; state names Kafka does not know
    are listed in ``unknown_state_filters``. The pattern is a regular expression the whole id
    must match (Java's ``Matcher.matches``; Python's ``re`` stands in for ``java.util.regex``,
    which agrees on the common syntax); a null or empty pattern takes every id, one that does
    not compile is INVALID_REGULAR_EXPRESSION, as Kafka 4.4 answers."""
    response = _response_class(ctx, LIST_TRANSACTIONS)
    module = sys.modules[response.__module__]
    states = list(request.state_filters)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    pattern: re.Pattern[str] | None = None
    if pattern_text:
        try:
            pattern = re.compile(pattern_text)
        except (re.error, RecursionError, OverflowError):
            return response(throttle_time=_NO_THROTTLE,
                            error_code=ErrorCode(codes.INVALID_REGULAR_EXPRESSION),
                            unknown_state_filters=(), transaction_states=())
    try:
        found = _coordinator(ctx).list_transactions(
            states=states, producer_ids=[int(pid) for pid in request.producer_id_filters],
            duration_ms=int(getattr(request, "duration_filter", -1)))
    except SeglogError:  # a store that cannot serve (closing): Kafka's inactive coordinator
        return response(throttle_time=_NO_THROTTLE,
                        error_code=ErrorCode(codes.COORDINATOR_NOT_AVAILABLE),
                        unknown_state_filters=(), transaction_states=())
    return response(
        throttle_time=_NO_THROTTLE, error_code=NONE,
        unknown_state_filters=tuple(s for s in states if s not in _KNOWN_STATES),
        transaction_states=tuple(module.TransactionState(
            transactional_id=d.transactional_id, producer_id=i64(d.producer_id),
            transaction_state=d.state) for d in found
            if (pattern is None or pattern.fullmatch(d.transactional_id) is not None)
            and authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                         d.transactional_id)))


# --- WriteTxnMarkers ------------------------------------------------------------------------

#: Kafka's ``request.timeout.ms`` default, what a leader waits for its followers to copy a
#: marker (Kafka appends WriteTxnMarkers' markers with acks=-1 and that timeout).
_MARKER_ACKS_TIMEOUT_MS = 30_000


async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> ResponsePayload:
    """Kafka's WriteTxnMarkers (v1-v2, what a transaction coordinator sends each partition's
    leader): every marker appended to each of its partitions
    (``TransactionCoordinator.write_marker``: a ``__consumer_offsets`` partition applies or
    drops the producer's pending offset commits), per partition UNKNOWN_TOPIC_OR_PARTITION,
    INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED (a coordinator epoch below the
    partition's last marker's). A cluster member serves only the partitions it leads
    (NOT_LEADER_OR_FOLLOWER otherwise) and answers once the markers are replicated (acks=-1:
    NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ... as a produce)."""
    response = _response_class(ctx, WRITE_TXN_MARKERS)
    module = sys.modules[response.__module__]
    store = ctx.broker.store
    cluster = partition_seam(ctx.broker)
    timeout_ms = int(ctx.broker.config.get("request.timeout.ms", _MARKER_ACKS_TIMEOUT_MS))
    results: list[tuple[Any, dict[TopicPartition, int]]] = []
    appends: list[tuple[dict[TopicPartition, int], TopicPartition,
                        Awaitable[AppendResult]]] = []
    # KafkaApis: ALTER on the cluster, else CLUSTER_ACTION (every partition refused).
    refused = not authorize_cluster(ctx, AclOperation.ALTER) and \
        not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    for marker in request.markers:
        if refused:
            results.append((marker, {
                TopicPartition(topic.name, int(index)): codes.CLUSTER_AUTHORIZATION_FAILED
                for topic in marker.topics for index in topic.partition_indexes}))
            continue
        answered: dict[TopicPartition, int] = {}
        for topic in marker.topics:
            for index in topic.partition_indexes:
                tp = TopicPartition(topic.name, int(index))
                if tp in answered:
                    continue
                if not _partition_exists(store, tp.topic, tp.partition):
                    answered[tp] = ErrorCode(codes.UNKNOWN_TOPIC_OR_PARTITION)
                    continue

                def write(log: Log, tp: TopicPartition = tp, marker: Any = marker) -> int:
                    del log  # the coordinator writes the marker to the partition's leader log
                    return _coordinator(ctx).write_marker(
                        tp, producer_id=int(marker.producer_id),
                        producer_epoch=int(marker.producer_epoch),
                        coordinator_epoch=int(marker.coordinator_epoch),
                        commit=bool(marker.transaction_result),
                        transaction_version=int(getattr(marker, "transaction_version", 0)))

                # The one append (acks=-1: an ISR below min.insync.replicas refuses before
                # writing); the marker's write and fsyncs run on a worker thread.
                answered[tp] = NONE
                appends.append((answered, tp, cluster.append(
                    tp, write, acks=-1, origin=AppendOrigin.MARKER,
                    timeout_s=timeout_ms / 1000, run_blocking=ctx.broker.run_blocking)))
        results.append((marker, answered))
    if appends:
        outcomes = await asyncio.gather(*(append for _c, _tp, append in appends),
                                        return_exceptions=True)
        for (answered, tp, _append), outcome in zip(appends, outcomes):
            if isinstance(outcome, BaseException):
                answered[tp] = _code(ctx, outcome)
            else:
                answered[tp] = ErrorCode(outcome.error_code)
    ctx.broker.appended.notify()
    answers: list[Any] = []
    for marker, answered in results:
        by_topic: dict[str, list[Any]] = {}
        for tp, code in answered.items():
            by_topic.setdefault(tp.topic, []).append(module.WritableTxnMarkerPartitionResult(
                partition_index=i32(tp.partition), error_code=ErrorCode(code)))
        answers.append(module.WritableTxnMarkerResult(
            producer_id=marker.producer_id,
            topics=tuple(module.WritableTxnMarkerTopicResult(name=name,
                                                             partitions=tuple(parts))
                         for name, parts in by_topic.items())))
    return response(markers=tuple(answers))


# --- transactional id expiration ----------------------------------------------------------

#: This module's key in ``BrokerState.extensions``: its timer task.
EXTENSION = "txn"


async def start(state: BrokerState) -> None:
    """Start the timer that forgets idle transactional ids: every
    ``transaction.remove.expired.transaction.cleanup.interval.ms``, the ids with no
    transaction in flight unchanged for ``transactional.id.expiration.ms`` (Kafka's
    TransactionStateManager; timed-out transactions are aborted by the core's maintenance
    task, ``Store.abort_timed_out_transactions``)."""
    config = state.config
    interval_s = int(config.get("transaction.remove.expired.transaction.cleanup.interval.ms",
                                3_600_000)) / 1000
    expiration_ms = int(config.get("transactional.id.expiration.ms", 604_800_000))
    state.extensions[EXTENSION] = state.loop.create_task(
        _expire_ids_forever(state, interval_s, expiration_ms))
    await _start_coordination(state, partition_seam(state))


async def _start_coordination(state: BrokerState, cluster: PartitionSeam) -> None:
    """This broker coordinates the transactional ids of the ``__transaction_state``
    partitions it leads (Kafka's ``onLeadershipChange``; a lone broker leads them all):
    loaded with the partition's leader epoch as coordinator epoch, then the transactions
    found in PrepareCommit / PrepareAbort get their markers again; the markers go through the
    seam's marker sender (None on a lone broker: the coordinator writes them itself)."""
    store = state.store
    coordinator = await state.run_blocking(store.transaction_coordinator)
    sender = cluster.txn_marker_sender(
        coordinator, run_blocking=state.run_blocking,
        request_timeout_ms=int(state.config.get("request.timeout.ms",
                                                _MARKER_ACKS_TIMEOUT_MS)),
        on_written=state.appended.notify)
    if sender is not None:
        coordinator.set_marker_sender(sender)

    async def load(partition: int, leader_epoch: int) -> None:
        await state.run_blocking(
            lambda: coordinator.load_partition(partition, coordinator_epoch=leader_epoch))
        await state.run_blocking(coordinator.complete_pending)

    def unload(partition: int) -> None:
        coordinator.unload_partition(partition)

    partitions = cluster.coordinator_partitions(
        cluster_coordinators.TRANSACTION_STATE_TOPIC, load=load, unload=unload)
    state.extensions[COORDINATION_EXTENSION] = TxnCoordination(partitions, sender)
    await partitions.start()


async def stop(state: BrokerState) -> None:
    """Stop the timer (the coordinator's state is in ``__transaction_state`` already), the
    loads and the marker sender."""
    coordination = state.extensions.pop(COORDINATION_EXTENSION, None)
    if coordination is not None:
        await coordination.partitions.close()
        if coordination.sender is not None:
            await coordination.sender.close()
    task = state.extensions.pop(EXTENSION, None)
    if task is None:
        return
    await cancel_and_wait([task])  # bounded: see seglog.aio


async def _expire_ids_forever(state: BrokerState, interval_s: float, expiration_ms: int) -> None:
    def expire() -> list[str]:
        coordinator: TransactionCoordinator = state.store.transaction_coordinator()
        return coordinator.expire_transactional_ids(
            expiration_ms=expiration_ms)

    while True:
        await asyncio.sleep(interval_s)
        try:
            expired = await state.run_blocking(expire)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 -- logged; the next round tries again
            log.exception("expiring transactional ids failed")
            continue
        if expired:
            log.info("transactional ids expired after %d ms idle: %s", expiration_ms,
                     ", ".join(expired))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(INIT_PRODUCER_ID, 0, 5, handle_init_producer_id),
    ApiHandler(ADD_PARTITIONS_TO_TXN, 0, 5, handle_add_partitions_to_txn),
    ApiHandler(ADD_OFFSETS_TO_TXN, 0, 4, handle_add_offsets_to_txn),
    ApiHandler(END_TXN, 0, 5, handle_end_txn),
    ApiHandler(WRITE_TXN_MARKERS, 1, 2, handle_write_txn_markers),
    ApiHandler(TXN_OFFSET_COMMIT, 0, 6, handle_txn_offset_commit),
    ApiHandler(DESCRIBE_PRODUCERS, 0, 0, handle_describe_producers),
    ApiHandler(DESCRIBE_TRANSACTIONS, 0, 0, handle_describe_transactions),
    ApiHandler(LIST_TRANSACTIONS, 0, 2, handle_list_transactions),
)
