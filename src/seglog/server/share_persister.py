"""The broker's share-group state persister (KIP-932): Kafka 4.4's ``DefaultStatePersister``.

Share-partitions (the share fetch path, the group coordinator's initialize and delete, the
offsets APIs) keep their state through :class:`SharePersister`: the five calls
``initialize_state``, ``read_state``, ``write_state``, ``delete_state`` and
``read_state_summary`` for one share-partition each. A call goes to the share coordinator
of the share-partition: the leader of its ``__share_group_state`` partition
(:func:`~seglog.coordinator.share_state_records.share_state_partition`, what FindCoordinator
key type 2 names):

* this broker leads it (a lone broker leads them all): the Store's
  :class:`~seglog.coordinator.share_coordinator.ShareCoordinator`, its record appended
  through the partition seam's one append as the partition's leader (acks=-1: Kafka's
  coordinator runtime waits for the ISR), the answer once replicated;
* another broker leads it: the InitializeShareGroupState (83 v0), ReadShareGroupState
  (84 v0), WriteShareGroupState (85 v1), DeleteShareGroupState (86 v0) or
  ReadShareGroupStateSummary (87 v1) request to that broker over the inter-broker listener.

As Kafka's ``PersisterStateManager``, a call answered COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (a leader moving, a partition loading) is
asked again after a backoff, a bounded number of times; the last answer is returned.

Everything runs on the broker's event loop. The wire side of the same coordinator is
:mod:`seglog.server.apis.share_state`, which creates the persister at start
(:func:`find_share_persister` gives it to other modules).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from typing import Any, Awaitable, Callable, Mapping, TypeVar

from kio.static.primitive import i8, i16, i32, i64

from .. import error_codes as codes
from ..cluster import coordinators as cluster_coordinators
from ..cluster.inter_broker import BrokerConnection, InterBrokerError
from ..cluster.peer_connections import PeerConnections
from ..cluster.seam import AppendOrigin, AppendResult, CoordinatorPartitionsView, PartitionSeam
from ..coordinator.share_coordinator import (ErrorCode, ShareCoordinator, ShareState,
                                             ShareStateSummary, StateBatch,
                                             runtime_error_code)
from ..coordinator.share_state_records import SHARE_STATE_TOPIC, coordinator_key
from ..errors import SeglogError
from ..schemas import load_request_schema
from ..types import TopicPartition

__all__ = ["EXTENSION", "SharePersister", "find_share_persister"]

log = logging.getLogger("seglog.server.share_persister")

#: The persister's key in ``BrokerState.extensions``.
EXTENSION = "share_persister"

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
#: The versions a broker sends (Kafka 4.4's latest).
VERSIONS = {INITIALIZE: 0, READ: 0, WRITE: 1, DELETE: 0, SUMMARY: 1}
_RETRIABLE = frozenset({codes.COORDINATOR_NOT_AVAILABLE, codes.NOT_COORDINATOR,
                        codes.COORDINATOR_LOAD_IN_PROGRESS})
_RESPONSE_BYTES_MAX = 16 * 1024 * 1024
_R = TypeVar("_R")


def find_share_persister(state: Any) -> "SharePersister | None":
    """The broker's persister (None until :mod:`seglog.server.apis.share_state` started)."""
    persister: SharePersister | None = state.extensions.get(EXTENSION)
    return persister


class _AppendRefused(SeglogError):
    """The seam did not append a share coordinator record (its error code)."""

    def __init__(self, code: int):
        super().__init__(f"{SHARE_STATE_TOPIC} append refused: {codes.BY_CODE[code].name}")
        self.kafka_error_code = code


class SharePersister:
    """The share-group state persister of one broker (see the module docstring).

    ``SharePersister(cluster, coordinator, partitions, ...)``: ``cluster`` the partition
    seam, ``coordinator`` the Store's share coordinator (its appends are routed through the
    seam from now on), ``partitions`` which ``__share_group_state`` partitions this broker
    coordinates; ``write_timeout_ms`` (``share.coordinator.write.timeout.ms``) bounds the
    wait for the ISR, ``request_timeout_ms`` a request to another broker,
    ``max_attempts`` / ``backoff_ms`` the retries; ``replication_factor`` and
    ``topic_config`` make ``__share_group_state`` in a cluster that has none yet;
    ``serve_all`` False (a cluster member): the coordinator serves only the partitions
    loaded as their leader."""

    def __init__(self, cluster: PartitionSeam, coordinator: ShareCoordinator,
                 partitions: CoordinatorPartitionsView, *, write_timeout_ms: int = 5000,
                 request_timeout_ms: int = 30_000, max_attempts: int = 5,
                 backoff_ms: int = 100, replication_factor: int = 3,
                 topic_config: Mapping[str, str] | None = None, serve_all: bool = True):
        self.cluster = cluster
        self.coordinator = coordinator
        self.partitions = partitions
        self._write_timeout_s = write_timeout_ms / 1000
        self._request_timeout_ms = request_timeout_ms
        self._max_attempts = max(1, max_attempts)
        self._backoff_s = backoff_ms / 1000
        #: ``share.coordinator.state.topic.replication.factor`` and the configs of
        #: ``__share_group_state`` when a cluster member creates it.
        self.replication_factor = replication_factor
        self.topic_config = dict(topic_config or {})
        self._appends: list[AppendResult] = []
        self._peers = PeerConnections(cluster, purpose="share-persister",
                                      request_timeout_ms=request_timeout_ms,
                                      max_response_bytes=_RESPONSE_BYTES_MAX)
        coordinator.set_appender(self._append, serve_all=serve_all)

    # --- where a share-partition's coordinator is ---------------------------------------------

    def state_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        """The ``__share_group_state`` partition of the share-partition in the cluster's
        metadata (None: the topic does not exist yet)."""
        return cluster_coordinators.partition_in(
            self.cluster, SHARE_STATE_TOPIC, coordinator_key(group_id, topic_id, partition))

    def coordinator_error(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """NONE when this broker coordinates the share-partition (it leads and has loaded
        its ``__share_group_state`` partition), COORDINATOR_LOAD_IN_PROGRESS while it loads,
        NOT_COORDINATOR otherwise."""
        where = self.state_partition(group_id, topic_id, partition)
        if where is None:
            return codes.NOT_COORDINATOR
        return self.partitions.error_for(where)

    # --- the five calls -------------------------------------------------------------------------

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode:
        """InitializeShareGroupState of one share-partition: its error code."""
        return await self._call(
            group_id, topic_id, partition,
            lambda c: c.initialize_state(group_id, topic_id, partition, state_epoch,
                                         start_offset),
            lambda conn: self._remote_initialize(conn, group_id, topic_id, partition,
                                                 state_epoch, start_offset),
            lambda code: code, int)

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        """ReadShareGroupState of one share-partition: ``(error, state or None)``."""
        return await self._call(
            group_id, topic_id, partition,
            lambda c: c.read_state(group_id, topic_id, partition, leader_epoch),
            lambda conn: self._remote_read(conn, group_id, topic_id, partition, leader_epoch),
            lambda code: (code, None), lambda answer: int(answer[0]))

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: ShareState) -> ErrorCode:
        """WriteShareGroupState of one share-partition: its error code."""
        return await self._call(
            group_id, topic_id, partition,
            lambda c: c.write_state(group_id, topic_id, partition, state),
            lambda conn: self._remote_write(conn, group_id, topic_id, partition, state),
            lambda code: code, int)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int
                           ) -> ErrorCode:
        """DeleteShareGroupState of one share-partition: its error code."""
        return await self._call(
            group_id, topic_id, partition,
            lambda c: c.delete_state(group_id, topic_id, partition),
            lambda conn: self._remote_delete(conn, group_id, topic_id, partition),
            lambda code: code, int)

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int = -1) -> ShareStateSummary:
        """ReadShareGroupStateSummary of one share-partition."""
        return await self._call(
            group_id, topic_id, partition,
            lambda c: c.read_state_summary(group_id, topic_id, partition, leader_epoch),
            lambda conn: self._remote_summary(conn, group_id, topic_id, partition,
                                              leader_epoch),
            ShareStateSummary, lambda answer: int(answer.error_code))

    # --- routing --------------------------------------------------------------------------------

    async def _call(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    local: Callable[[ShareCoordinator], _R],
                    remote: Callable[[BrokerConnection], Awaitable[_R]],
                    error: Callable[[ErrorCode], _R], code_of: Callable[[_R], int]) -> _R:
        answer = error(ErrorCode(codes.COORDINATOR_NOT_AVAILABLE,
                                 codes.message(codes.COORDINATOR_NOT_AVAILABLE)))
        for attempt in range(self._max_attempts):
            if attempt:
                await asyncio.sleep(self._backoff_s * 2 ** (attempt - 1))
            where = self.state_partition(group_id, topic_id, partition)
            if where is None:
                # Kafka's FindCoordinator makes the topic then answers
                # COORDINATOR_NOT_AVAILABLE; the next attempt finds it.
                await self._ensure_topic(group_id, topic_id, partition)
                continue
            gate = self.partitions.error_for(where)
            if gate == codes.NONE:
                answer = await self.local(local, error)
            elif gate == codes.COORDINATOR_LOAD_IN_PROGRESS:
                answer = error(_error(gate))
            else:
                leader = self._leader(where)
                if leader is None:
                    answer = error(_error(codes.COORDINATOR_NOT_AVAILABLE))
                else:
                    answer = await self._send(leader, remote, error)
            if code_of(answer) not in _RETRIABLE:
                return answer
        return answer

    async def local(self, op: Callable[[ShareCoordinator], _R],
                    error: Callable[[ErrorCode], _R]) -> _R:
        """Run ``op`` on this broker's coordinator (it leads the partition) and wait for
        its appends to reach the ISR: the op's answer, or the append's error as Kafka's
        coordinator runtime maps it."""
        self._appends = []
        try:
            answer = op(self.coordinator)
        finally:
            appends, self._appends = self._appends, []
        await self.cluster.wait_for_acks(appends, acks=-1, timeout_s=self._write_timeout_s)
        for result in appends:
            if result.error_code != codes.NONE:
                return error(_error(runtime_error_code(result.error_code)))
        return answer

    def _append(self, partition: int, batch: list[tuple[bytes, bytes | None]]) -> int:
        """The coordinator's appender: the seam's one append as the partition's leader."""
        first = [-1]

        def write(partition_log: Any) -> int:
            now = time.time_ns() // 1_000_000
            start, last = partition_log.append_batch(
                [v for _k, v in batch], keys=[k for k, _v in batch],
                timestamps_ms=[now] * len(batch),
                compression=self.coordinator.config.compression)
            first[0] = int(start)
            return int(last)

        result = self.cluster.append_now(TopicPartition(SHARE_STATE_TOPIC, partition), write,
                                         acks=-1, origin=AppendOrigin.COORDINATOR)
        if not result.appended:
            raise _AppendRefused(result.error_code or codes.UNKNOWN_SERVER_ERROR)
        self._appends.append(result)
        return first[0]

    async def _ensure_topic(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        config = self.coordinator.config
        await cluster_coordinators.find_coordinator(
            self.cluster, SHARE_STATE_TOPIC, coordinator_key(group_id, topic_id, partition),
            partitions=config.state_topic_num_partitions,
            replication_factor=self.replication_factor, topic_config=self.topic_config)

    def _leader(self, where: int) -> int | None:
        state = self.cluster.states.get(TopicPartition(SHARE_STATE_TOPIC, where))
        if state is None or state.leader < 0 or state.leader not in self.cluster.live_brokers:
            return None
        return int(state.leader)

    # --- to another broker ----------------------------------------------------------------------

    async def _send(self, leader: int, remote: Callable[[BrokerConnection], Awaitable[_R]],
                    error: Callable[[ErrorCode], _R]) -> _R:
        async with self._peers.lock(leader):
            try:
                connection = await self._peers.connection(leader)
                return await remote(connection)
            except (InterBrokerError, SeglogError, OSError) as exc:
                log.info("share state request to broker %d failed (%s)", leader, exc)
                self._peers.drop(leader)
                return error(_error(codes.COORDINATOR_NOT_AVAILABLE))

    async def close(self) -> None:
        """Close the connections to other brokers."""
        self._peers.close()

    async def _round_trip(self, conn: BrokerConnection, api_key: int, entity: Any) -> Any:
        return await self._peers.round_trip(conn, api_key, VERSIONS[api_key], entity)

    @staticmethod
    def _first_partition(response: Any) -> Any:
        for result in response.results:
            for answer in result.partitions:
                return answer
        raise InterBrokerError("a share state response without the partition asked for")

    async def _remote_initialize(self, conn: BrokerConnection, group_id: str,
                                 topic_id: uuid.UUID, partition: int, state_epoch: int,
                                 start_offset: int) -> ErrorCode:
        m = _module(INITIALIZE)
        request = m.InitializeShareGroupStateRequest(group_id=group_id, topics=(
            m.InitializeStateData(topic_id=topic_id, partitions=(m.PartitionData(
                partition=i32(partition), state_epoch=i32(state_epoch),
                start_offset=i64(start_offset)),)),))
        answer = self._first_partition(await self._round_trip(conn, INITIALIZE, request))
        return ErrorCode(int(answer.error_code), answer.error_message)

    async def _remote_read(self, conn: BrokerConnection, group_id: str, topic_id: uuid.UUID,
                           partition: int, leader_epoch: int
                           ) -> tuple[ErrorCode, ShareState | None]:
        m = _module(READ)
        request = m.ReadShareGroupStateRequest(group_id=group_id, topics=(
            m.ReadStateData(topic_id=topic_id, partitions=(m.PartitionData(
                partition=i32(partition), leader_epoch=i32(leader_epoch)),)),))
        answer = self._first_partition(await self._round_trip(conn, READ, request))
        code = ErrorCode(int(answer.error_code), answer.error_message)
        if code:
            return code, None
        return code, ShareState(
            int(answer.state_epoch), int(answer.start_offset),
            tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                             int(b.delivery_count)) for b in answer.state_batches),
            leader_epoch)

    async def _remote_write(self, conn: BrokerConnection, group_id: str, topic_id: uuid.UUID,
                            partition: int, state: ShareState) -> ErrorCode:
        m = _module(WRITE)
        request = m.WriteShareGroupStateRequest(group_id=group_id, topics=(
            m.WriteStateData(topic_id=topic_id, partitions=(m.PartitionData(
                partition=i32(partition), state_epoch=i32(state.state_epoch),
                leader_epoch=i32(state.leader_epoch), start_offset=i64(state.start_offset),
                delivery_complete_count=i32(state.delivery_complete_count),
                state_batches=tuple(m.StateBatch(
                    first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                    delivery_state=i8(b.delivery_state), delivery_count=i16(b.delivery_count))
                    for b in state.batches)),)),))
        answer = self._first_partition(await self._round_trip(conn, WRITE, request))
        return ErrorCode(int(answer.error_code), answer.error_message)

    async def _remote_delete(self, conn: BrokerConnection, group_id: str, topic_id: uuid.UUID,
                             partition: int) -> ErrorCode:
        m = _module(DELETE)
        request = m.DeleteShareGroupStateRequest(group_id=group_id, topics=(
            m.DeleteStateData(topic_id=topic_id, partitions=(m.PartitionData(
                partition=i32(partition)),)),))
        answer = self._first_partition(await self._round_trip(conn, DELETE, request))
        return ErrorCode(int(answer.error_code), answer.error_message)

    async def _remote_summary(self, conn: BrokerConnection, group_id: str, topic_id: uuid.UUID,
                              partition: int, leader_epoch: int) -> ShareStateSummary:
        m = _module(SUMMARY)
        request = m.ReadShareGroupStateSummaryRequest(group_id=group_id, topics=(
            m.ReadStateSummaryData(topic_id=topic_id, partitions=(m.PartitionData(
                partition=i32(partition), leader_epoch=i32(leader_epoch)),)),))
        answer = self._first_partition(await self._round_trip(conn, SUMMARY, request))
        return ShareStateSummary(ErrorCode(int(answer.error_code), answer.error_message),
                                 int(answer.start_offset), int(answer.state_epoch),
                                 int(answer.leader_epoch), int(answer.delivery_complete_count))


def _module(api_key: int) -> Any:
    return sys.modules[load_request_schema(api_key, VERSIONS[api_key]).__module__]


def _error(code: int) -> ErrorCode:
    return ErrorCode(code, codes.message(code))
