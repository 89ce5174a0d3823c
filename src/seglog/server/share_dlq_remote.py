"""The share-group DLQ writer's requests to the broker that leads a DLQ partition (KIP-1191):
what Kafka 4.4's ``ShareGroupDLQStateManager`` sends on the broker's inter-broker client
when the DLQ partition is led elsewhere, and the two reads seglog adds for its
exactly-once bookkeeping (:mod:`seglog.server.share_dlq`).

- **Produce** (API 0) v13, Kafka's ``ApiKeys.PRODUCE.latestVersion()`` in 4.4: the DLQ topic
  by its topic id, one partition, one uncompressed batch, ``acks=-1``, ``timeout_ms``
  30000 (``coalesceProduceRequests``); the partition's error code is the answer.
- **ListOffsets** (API 2) v6: the partition's high watermark (as a consumer, replica id -1)
  and its log end offset (replica id -2, Kafka's debugging consumer: not a client request,
  so the answer is the end of the log).
- **Fetch** (API 1) v12 as a consumer (replica id -1): the partition's records from an
  offset up to its high watermark.

All three go over the broker's inter-broker listener, with its TLS and SASL settings
(:class:`~seglog.cluster.inter_broker.InterBrokerListener`, the seam's ``inter_broker`` and
``inter_broker_login``), on one :class:`~seglog.cluster.inter_broker.BrokerConnection` per
broker, one request at a time; a connection that fails is dropped and the error
(:class:`~seglog.cluster.inter_broker.InterBrokerError`) raised to the caller, which retries
as Kafka's DLQ writer does.
"""

from __future__ import annotations

import datetime
import sys
import uuid
from typing import Any, Callable, Iterator

from kio.static.primitive import Records, i16, i32

from .. import error_codes as codes
from .._backend import get_backend
from ..cluster.inter_broker import (LATEST_TIMESTAMP, FetchPartitionRequest,
                                    InterBrokerError)
from ..cluster.peer_connections import PeerConnections
from ..cluster.seam import PartitionSeam
from ..schemas import load_request_schema
from ..types import TopicPartition

__all__ = ["CONSUMER_REPLICA_ID", "DEBUG_REPLICA_ID", "PRODUCE_KEY", "PRODUCE_VERSION",
           "RemoteDlqPartitions"]

PRODUCE_KEY = 0
#: Kafka 4.4's latest Produce version (topics by id), what its DLQ writer sends.
PRODUCE_VERSION = 13
#: ListOffsets/Fetch replica ids: a consumer (reads to the high watermark) and Kafka's
#: debugging consumer (``ListOffsetsRequest.DEBUGGING_REPLICA_ID``: the log end offset).
CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2
#: The largest response accepted from another broker (a Fetch of ``max_bytes`` fits).
_RESPONSE_BYTES_MAX = 16 * 1024 * 1024
#: Bound on the Fetch rounds of one :meth:`RemoteDlqPartitions.read`.
_READ_ROUNDS_MAX = 10_000


class RemoteDlqPartitions:
    """The DLQ writer's inter-broker client (see the module docstring). ``cluster``: the
    partition seam (its ``live_brokers``, ``inter_broker``, ``inter_broker_login``);
    ``request_timeout_ms`` bounds a connect and each round trip."""

    def __init__(self, cluster: PartitionSeam, *, request_timeout_ms: int = 30_000,
                 backend: Any = None):
        self._cluster = cluster
        self._request_timeout_ms = request_timeout_ms
        self._backend = get_backend(backend)
        self._peers = PeerConnections(cluster, purpose="share-dlq",
                                      request_timeout_ms=request_timeout_ms,
                                      max_response_bytes=_RESPONSE_BYTES_MAX)

    # --- the requests ----------------------------------------------------------------------

    async def produce(self, leader: int, tp: TopicPartition, topic_id: uuid.UUID,
                      batch: bytes, *, acks: int, timeout_ms: int) -> int:
        """Produce v13 of ``batch`` (one encoded record batch) to ``tp`` (topic ``topic_id``)
        at broker ``leader``: the partition's error code (UNKNOWN_SERVER_ERROR when the
        answer lacks it, as Kafka's handler treats an empty response)."""
        m = sys.modules[load_request_schema(PRODUCE_KEY, PRODUCE_VERSION).__module__]
        request = m.ProduceRequest(
            transactional_id=None, acks=i16(acks),
            timeout=datetime.timedelta(milliseconds=timeout_ms),
            topic_data=(m.TopicProduceData(topic_id=topic_id, partition_data=(
                m.PartitionProduceData(index=i32(tp.partition), records=Records(batch)),)),))
        response = await self._round_trip(leader, PRODUCE_KEY, PRODUCE_VERSION, request)
        for topic in response.responses:
            if topic.topic_id != topic_id:
                continue
            for answer in topic.partition_responses:
                if int(answer.index) == tp.partition:
                    return int(answer.error_code)
        return codes.UNKNOWN_SERVER_ERROR

    async def high_watermark(self, leader: int, tp: TopicPartition) -> int:
        """The high watermark of ``tp`` at broker ``leader`` (one ListOffsets LATEST as a
        consumer, read_uncommitted: Kafka's ``NetworkPartitionMetadataClient``); raises
        :class:`InterBrokerError` with the partition's error."""
        answer = await self._with_connection(leader, lambda conn: conn.list_offsets(
            replica_id=CONSUMER_REPLICA_ID, partitions={tp: (-1, LATEST_TIMESTAMP)}))
        listed_tp = answer.get(tp)
        if listed_tp is None or listed_tp.error_code != codes.NONE:
            raise _partition_error(tp, listed_tp.error_code if listed_tp is not None
                                   else codes.UNKNOWN_SERVER_ERROR)
        return int(listed_tp.offset)

    async def offsets(self, leader: int, tp: TopicPartition) -> tuple[int, int]:
        """``(high watermark, log end offset)`` of ``tp`` at broker ``leader`` (two
        ListOffsets); raises :class:`InterBrokerError` with the partition's error."""
        listed: list[int] = []
        for replica_id in (CONSUMER_REPLICA_ID, DEBUG_REPLICA_ID):
            answer = await self._with_connection(leader, lambda conn, r=replica_id: (
                conn.list_offsets(replica_id=r, partitions={tp: (-1, LATEST_TIMESTAMP)})))
            listed_tp = answer.get(tp)
            if listed_tp is None or listed_tp.error_code != codes.NONE:
                raise _partition_error(tp, listed_tp.error_code if listed_tp is not None
                                       else codes.UNKNOWN_SERVER_ERROR)
            listed.append(int(listed_tp.offset))
        return listed[0], listed[1]

    async def read(self, leader: int, tp: TopicPartition, from_offset: int,
                   visit: Callable[[Any], None], *, max_bytes: int = 1_048_576) -> int:
        """``visit(record)`` for every record of ``tp`` at broker ``leader`` from
        ``from_offset`` (or the log start, when later) up to the high watermark the last
        Fetch answered (consumer Fetches of ``max_bytes`` each; the records are not kept
        here); returns that high watermark. Raises :class:`InterBrokerError` with the
        partition's error."""
        offset = from_offset
        for _round in range(_READ_ROUNDS_MAX):
            partition = FetchPartitionRequest(
                current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=max_bytes)
            response = await self._with_connection(leader, lambda conn, p=partition: (
                conn.fetch(replica_id=CONSUMER_REPLICA_ID, max_wait_ms=0, min_bytes=0,
                           max_bytes=max_bytes, partitions={tp: p},
                           timeout_ms=self._request_timeout_ms)))
            answer = response.partitions.get(tp)
            code = response.error_code if answer is None else answer.error_code
            if code == codes.OFFSET_OUT_OF_RANGE and answer is not None \
                    and offset < answer.log_start_offset:
                offset = answer.log_start_offset  # retention removed the start: read on
                continue
            if answer is None or code != codes.NONE:
                raise _partition_error(tp, code or codes.UNKNOWN_SERVER_ERROR)
            high_watermark = int(answer.high_watermark)
            advanced = offset
            for record in self._records(answer.records):
                if record.offset >= offset:
                    visit(record)
                    advanced = record.offset + 1
            if advanced >= high_watermark or advanced == offset:
                return high_watermark
            offset = advanced
        raise InterBrokerError(f"reading {tp.topic}-{tp.partition} did not end")

    def _records(self, data: memoryview) -> Iterator[Any]:
        for batch in self._backend.iter_batches(data):
            if not batch.is_control:
                yield from batch.records()

    # --- connections -----------------------------------------------------------------------

    async def _round_trip(self, broker_id: int, api_key: int, version: int,
                          entity: Any) -> Any:
        return await self._with_connection(broker_id, lambda conn: self._peers.round_trip(
            conn, api_key, version, entity))

    async def _with_connection(self, broker_id: int, call: Any) -> Any:
        async with self._peers.lock(broker_id):
            try:
                return await call(await self._peers.connection(broker_id))
            except (InterBrokerError, OSError) as exc:
                self._peers.drop(broker_id)
                if isinstance(exc, InterBrokerError):
                    raise
                raise InterBrokerError(f"broker {broker_id}: {exc}") from None

    async def close(self) -> None:
        """Close the connections to other brokers."""
        self._peers.close()


def _partition_error(tp: TopicPartition, code: int) -> InterBrokerError:
    error = InterBrokerError(f"{tp.topic}-{tp.partition}: {codes.BY_CODE[code].name}"
                             if code in codes.BY_CODE else f"{tp.topic}-{tp.partition}: {code}")
    error.kafka_error_code = code
    return error
