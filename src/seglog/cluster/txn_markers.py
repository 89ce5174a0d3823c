"""The transaction coordinator's marker sender on a cluster member (Kafka 2.8's
``TransactionMarkerChannelManager``).

When a transaction ends (EndTxn, a fenced producer's abort, a timed-out transaction, or a
transaction a new coordinator loads in PrepareCommit / PrepareAbort), the coordinator writes
the Prepare state and hands the transaction to :meth:`TxnMarkerSender.send`. The sender
delivers one COMMIT / ABORT marker to every partition of the transaction, wherever its leader
is: a partition led here is appended to directly (``TransactionCoordinator.write_marker``)
and waited for as an acks=-1 append; the others get a WriteTxnMarkers request (API key 27,
v1) on a :class:`~seglog.cluster.inter_broker.BrokerConnection` to their current leader from
the replica manager's metadata. A partition is retried (bounded exponential backoff) until
its leader acknowledges it: no leader, a dead one, a connection failure, NOT_LEADER_OR_FOLLOWER
or any other retriable error; a partition whose topic left ZooKeeper is skipped (Kafka skips
deleted partitions). INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED means a newer
coordinator (or producer) took over: the sender gives up on the transaction and leaves it in
Prepare (Kafka's ``abortSending``). Once every partition acknowledged, the coordinator writes
CompleteCommit / CompleteAbort (``TransactionCoordinator.markers_written``). The sender also
gives up when this broker stops coordinating the transaction (the coordinator epoch it was
sent with is no longer the transactional id's): the new coordinator sends the markers again
when it loads the partition.

Runs on the broker's event loop; :meth:`send` may be called from any thread (it only
schedules). No store lock is held while waiting on the network: the blocking calls run in
the broker's executor and return before the sender awaits anything else.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, Protocol

from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v2.request import WritableTxnMarker, \
    WritableTxnMarkerTopic, WriteTxnMarkersRequest
from kio.schema.write_txn_markers.v2.response import WriteTxnMarkersResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from .. import error_codes as codes
from ..errors import SeglogError
from ..schemas import load_request_schema, load_response_schema
from ..types import TopicPartition
from ..aio import cancel_and_wait
from .inter_broker import InterBrokerError, InterBrokerListener
from .peer_connections import PeerConnections
from .sasl_login import SaslLogin
from .seam import AppendOrigin, AppendResult
from .zk_data import BrokerInfo, PartitionState, TopicAssignment
from ..log_limits import REPEATS

if TYPE_CHECKING:
    # The coordinator sits above the cluster layer: a name for the type checker only.
    from ..coordinator.transaction import TransactionCoordinator

__all__ = ["MarkerCluster", "TxnMarkerSender", "WRITE_TXN_MARKERS", "WRITE_TXN_MARKERS_VERSION",
           "encode_write_txn_markers", "decode_write_txn_markers"]

log = logging.getLogger("seglog.cluster.txn_markers")

WRITE_TXN_MARKERS = 27
#: The version sent (Kafka 4.4's coordinator sends v2: each marker names the transaction
#: version of its producer; v1 is the first flexible one): kio's ``v2`` classes.
WRITE_TXN_MARKERS_VERSION = 2

#: The errors after which a newer coordinator or producer owns the transaction.
_GIVE_UP = frozenset({codes.INVALID_PRODUCER_EPOCH, codes.TRANSACTION_COORDINATOR_FENCED})

_BACKOFF_MS_MIN = 50
_BACKOFF_MS_MAX = 1000
_RESPONSE_BYTES_MAX = 1 << 20


def encode_write_txn_markers(producer_id: int, producer_epoch: int, coordinator_epoch: int,
                             commit: bool, partitions: Iterable[TopicPartition], *,
                             transaction_version: int = 0) -> bytes:
    """The body of a WriteTxnMarkers v2 request with one marker for ``partitions``
    (``transaction_version``: the producer's, 2 when the coordinator bumped its epoch)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    entity = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer_id=ProducerId(i64(producer_id)), producer_epoch=i16(producer_epoch),
        transaction_result=bool(commit), coordinator_epoch=i32(coordinator_epoch),
        transaction_version=i8(transaction_version), topics=tuple(WritableTxnMarkerTopic(
            name=TopicName(topic), partition_indexes=tuple(i32(p) for p in sorted(ps)))
            for topic, ps in sorted(by_topic.items()))),))
    buffer = io.BytesIO()
    entity_writer(WriteTxnMarkersRequest)(buffer, entity)
    return buffer.getvalue()


ADD_PARTITIONS_TO_TXN = 24
#: The version a partition leader sends (Kafka 4.4's AddPartitionsToTxnManager: v5, the
#: batched broker form that knows TRANSACTION_ABORTABLE).
ADD_PARTITIONS_TO_TXN_VERSION = 5


def encode_add_partitions_to_txn(transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: Iterable[TopicPartition], *,
                                 verify_only: bool) -> bytes:
    """The body of an AddPartitionsToTxn v5 request for one transaction."""
    module = _module_of(load_request_schema(ADD_PARTITIONS_TO_TXN,
                                            ADD_PARTITIONS_TO_TXN_VERSION))
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    entity = module.AddPartitionsToTxnRequest(
        transactions=(module.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=ProducerId(i64(producer_id)),
            producer_epoch=i16(producer_epoch), verify_only=verify_only,
            topics=tuple(module.AddPartitionsToTxnTopic(
                name=TopicName(topic), partitions=tuple(i32(p) for p in sorted(ps)))
                for topic, ps in sorted(by_topic.items()))),))
    buffer = io.BytesIO()
    entity_writer(module.AddPartitionsToTxnRequest)(buffer, entity)
    return buffer.getvalue()


def decode_add_partitions_to_txn(body: bytes, transactional_id: str) -> dict[TopicPartition, int]:
    """``{partition: error code}`` of ``transactional_id`` in an AddPartitionsToTxn v5
    response body (a top-level error: every partition of it). Raises InterBrokerError when
    it does not parse."""
    response_class = load_response_schema(ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_VERSION)
    try:
        decoded, _end = entity_reader(response_class)(body, 0)
        response: Any = decoded  # kio's v5 class; its fields are read by name below
    except Exception as exc:  # noqa: BLE001 - kio raises assorted errors on bad bytes
        raise InterBrokerError(f"AddPartitionsToTxn response does not parse: {exc}") from None
    top = int(response.error_code)
    answers: dict[TopicPartition, int] = {}
    for result in response.results_by_transaction:
        if result.transactional_id != transactional_id:
            continue
        for topic in result.topic_results:
            for partition in topic.results_by_partition:
                answers[TopicPartition(topic.name, int(partition.partition_index))] = \
                    top or int(partition.partition_error_code)
    return answers


def _module_of(schema: Any) -> Any:
    return sys.modules[schema.__module__]


def decode_write_txn_markers(body: bytes) -> dict[TopicPartition, int]:
    """``{partition: error code}`` of a WriteTxnMarkers v2 response body. Raises
    InterBrokerError when it does not parse."""
    try:
        entity, _end = entity_reader(WriteTxnMarkersResponse)(body, 0)
        return {TopicPartition(topic.name, int(p.partition_index)): int(p.error_code)
                for marker in entity.markers for topic in marker.topics
                for p in topic.partitions}
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: a typed error
        raise InterBrokerError(f"malformed WriteTxnMarkers response: {exc!r}") from None


class MarkerCluster(Protocol):
    """What the sender needs of the cluster: the
    :class:`~seglog.cluster.replica_manager.ReplicaManager` (which makes the sender, so it is
    described here rather than imported), with the seam's metadata and its one append
    (:class:`~seglog.cluster.seam.PartitionSeam`) and its event loop."""

    @property
    def broker_id(self) -> int:
        """This broker's id."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The broker's event loop."""

    @property
    def live_brokers(self) -> Mapping[int, BrokerInfo]:
        """The registered brokers by id."""

    @property
    def inter_broker(self) -> InterBrokerListener:
        """The listener brokers connect to each other on (and its TLS context)."""

    @property
    def inter_broker_login(self) -> SaslLogin | None:
        """The SASL login of connections to other brokers (None: no SASL)."""

    @property
    def assignments(self) -> Mapping[str, TopicAssignment]:
        """Every topic's replica assignment by name."""

    @property
    def states(self) -> Mapping[TopicPartition, PartitionState]:
        """Every partition's leader and ISR."""

    def leader_replica(self, tp: TopicPartition) -> Any | None:
        """This broker's replica of ``tp`` when it leads it, else None (the seam's)."""

    async def append(self, tp: TopicPartition, write: Callable[[Any], int | None], *,
                     acks: int, origin: AppendOrigin, timeout_s: float,
                     run_blocking: Callable[..., Any] | None = None) -> AppendResult:
        """The seam's one append (:meth:`~seglog.cluster.seam.PartitionSeam.append`)."""


class TxnMarkerSender:
    """Delivers a cluster member's transaction markers (see the module docstring).

    ``cluster``: the :class:`~seglog.cluster.replica_manager.ReplicaManager`;
    ``coordinator``: the store's TransactionCoordinator; ``run_blocking``: the broker's
    executor call; ``request_timeout_ms`` bounds a request and an acks=-1 wait."""

    def __init__(self, cluster: MarkerCluster, coordinator: TransactionCoordinator, *,
                 run_blocking: Callable[..., Awaitable[Any]], request_timeout_ms: int = 30_000,
                 on_written: Callable[[], None] | None = None):
        self._cluster = cluster
        self._coordinator = coordinator
        self._run_blocking = run_blocking
        self._timeout_ms = int(request_timeout_ms)
        self._on_written = on_written
        self._loop = cluster.loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._peers = PeerConnections(cluster, purpose="txn-markers",
                                      request_timeout_ms=self._timeout_ms,
                                      max_response_bytes=_RESPONSE_BYTES_MAX)
        self._locks: dict[int, asyncio.Lock] = {}
        self._closed = False

    # --- called by the coordinator, under the store lock, from any thread ---------------------

    def send(self, transactional_id: str, producer_id: int, producer_epoch: int,
             coordinator_epoch: int, commit: bool,
             partitions: tuple[TopicPartition, ...], transaction_version: int = 0) -> None:
        """Schedule the delivery of one transaction's markers (returns at once)."""
        self._loop.call_soon_threadsafe(
            self._start, transactional_id, producer_id, producer_epoch, coordinator_epoch,
            commit, partitions, transaction_version)

    def _start(self, *args: Any) -> None:
        if self._closed:
            return
        task = self._loop.create_task(self._deliver(*args),
                                      name=f"seglog-txn-markers-{args[0]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- delivery ----------------------------------------------------------------------------

    def _still_ours(self, transactional_id: str, coordinator_epoch: int) -> bool:
        return (self._coordinator.describe(transactional_id) is not None
                and self._coordinator.coordinator_epoch(transactional_id) == coordinator_epoch)

    async def _deliver(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int, commit: bool,
                       partitions: tuple[TopicPartition, ...],
                       transaction_version: int = 0) -> None:
        remaining = set(partitions)
        backoff_ms = _BACKOFF_MS_MIN
        try:
            while remaining:
                if self._closed or not self._still_ours(transactional_id, coordinator_epoch):
                    log.info("markers of %r (coordinator epoch %d) no longer sent here",
                             transactional_id, coordinator_epoch)
                    return
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in sorted(remaining):
                    if tp.topic not in self._cluster.assignments:
                        remaining.discard(tp)  # deleted: Kafka skips it
                        continue
                    state = self._cluster.states.get(tp)
                    if state is None or state.leader < 0 \
                            or state.leader not in self._cluster.live_brokers:
                        continue  # no leader now: retried below
                    by_leader.setdefault(state.leader, []).append(tp)
                try:
                    results = await asyncio.gather(*(
                        self._send_to(leader, tps, producer_id, producer_epoch,
                                      coordinator_epoch, commit, transaction_version)
                        for leader, tps in by_leader.items()))
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - logged; the round is tried again
                    REPEATS.log(log, logging.ERROR, "sending the markers of %r failed; "
                                "retrying", transactional_id, exc_info=True)
                    results = []
                for answers in results:
                    for tp, code in answers.items():
                        if code == codes.NONE:
                            remaining.discard(tp)
                        elif code in _GIVE_UP:
                            log.warning("marker of %r for %s answered %d: a newer coordinator "
                                        "or producer owns it; not sent from here",
                                        transactional_id, tp, code)
                            return
                if remaining:
                    await asyncio.sleep(backoff_ms / 1000)
                    backoff_ms = min(backoff_ms * 2, _BACKOFF_MS_MAX)
            await self._run_blocking(self._coordinator.markers_written, transactional_id,
                                     producer_id, producer_epoch, commit)
            if self._on_written is not None:
                self._on_written()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a new coordinator (or a reload) sends them again
            log.exception("delivering the markers of %r failed", transactional_id)

    async def _send_to(self, leader: int, tps: list[TopicPartition], producer_id: int,
                       producer_epoch: int, coordinator_epoch: int,
                       commit: bool, transaction_version: int = 0) -> dict[TopicPartition, int]:
        """Each partition's error code (UNKNOWN_SERVER_ERROR: not answered, retried)."""
        if leader == self._cluster.broker_id:
            return {tp: await self._append_local(tp, producer_id, producer_epoch,
                                                 coordinator_epoch, commit, transaction_version)
                    for tp in tps}
        body = encode_write_txn_markers(producer_id, producer_epoch, coordinator_epoch,
                                        commit, tps, transaction_version=transaction_version)
        lock = self._locks.setdefault(leader, asyncio.Lock())
        async with lock:
            try:
                connection = await self._peers.connection(leader)
                _frame, reader = await connection.request(
                    WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body, self._timeout_ms)
                answers = decode_write_txn_markers(bytes(reader.buf[reader.pos:reader.end]))
            except (InterBrokerError, SeglogError, OSError) as exc:
                REPEATS.info(log, "WriteTxnMarkers to broker %d failed (%s); retrying", leader,
                             exc)
                self._peers.drop(leader)
                return {tp: codes.UNKNOWN_SERVER_ERROR for tp in tps}
        return {tp: answers.get(tp, codes.UNKNOWN_SERVER_ERROR) for tp in tps}

    async def add_partitions_to_txn(self, transactional_id: str, producer_id: int,
                                    producer_epoch: int, partitions: Iterable[TopicPartition],
                                    *, coordinator_tp: TopicPartition,
                                    verify_only: bool) -> dict[TopicPartition, int]:
        """A partition leader's AddPartitionsToTxn v5 to the transaction coordinator, the
        leader of ``coordinator_tp`` (Kafka's ``AddPartitionsToTxnManager``): with
        ``verify_only`` whether each partition is in the producer's ongoing transaction
        (KIP-890 part 1), without it the partitions added (part 2's implicit add for a
        ``transaction.version`` 2 producer). Each partition's error code; one that cannot be
        asked (no live leader, lost connection) answers COORDINATOR_NOT_AVAILABLE /
        NETWORK_EXCEPTION for all, as Kafka's manager does."""
        tps = list(partitions)
        state = self._cluster.states.get(coordinator_tp)
        if state is None or state.leader < 0 or state.leader not in self._cluster.live_brokers:
            return {tp: codes.COORDINATOR_NOT_AVAILABLE for tp in tps}
        body = encode_add_partitions_to_txn(transactional_id, producer_id, producer_epoch, tps,
                                            verify_only=verify_only)
        lock = self._locks.setdefault(state.leader, asyncio.Lock())
        async with lock:
            try:
                connection = await self._peers.connection(state.leader)
                _frame, reader = await connection.request(
                    ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_VERSION, body, self._timeout_ms)
                answers = decode_add_partitions_to_txn(
                    bytes(reader.buf[reader.pos:reader.end]), transactional_id)
            except (InterBrokerError, SeglogError, OSError) as exc:
                REPEATS.info(log, "AddPartitionsToTxn to broker %d failed (%s)", state.leader,
                             exc)
                self._peers.drop(state.leader)
                return {tp: codes.NETWORK_EXCEPTION for tp in tps}
        return {tp: answers.get(tp, codes.UNKNOWN_SERVER_ERROR) for tp in tps}

    async def _append_local(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            transaction_version: int = 0) -> int:
        """This broker leads ``tp``: the marker appended through the seam's one append and
        waited for as acks=-1 (NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS: nothing
        written, retried)."""
        def write(_log: Any) -> int:
            offset: int = self._coordinator.write_marker(
                tp, producer_id=producer_id, producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch, commit=commit,
                transaction_version=transaction_version)
            return offset

        try:
            result = await self._cluster.append(
                tp, write, acks=-1, origin=AppendOrigin.MARKER,
                timeout_s=self._timeout_ms / 1000, run_blocking=self._run_blocking)
        except SeglogError as exc:
            code = exc.kafka_error_code
            return code if code > codes.NONE else codes.UNKNOWN_SERVER_ERROR
        if result.appended and self._on_written is not None:
            self._on_written()
        return result.error_code

    async def close(self) -> None:
        """Stop every delivery and close the connections (the broker stops; the next
        coordinator of each partition sends the markers again)."""
        self._closed = True
        await cancel_and_wait(list(self._tasks))
        self._peers.close()
