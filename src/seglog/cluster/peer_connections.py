"""Connections from this broker to the other brokers of its cluster, for the broker's own
requests to them (the share persister's ReadShareGroupState and friends, the share-group DLQ
writer's Produce, ListOffsets and Fetch): one cached connection per broker over the
inter-broker listener (its TLS and SASL login), one request at a time on each, and kio's
encoding of the request and decoding of the answer.

A connection is made again when the broker's address changed or the connection closed; one
that failed (lost, timed out, or answered bytes that do not parse) is dropped so that the
next request reconnects.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

from kio.serial import entity_reader, entity_writer

from ..schemas import load_response_schema
from .inter_broker import BrokerConnection, InterBrokerError
from .seam import PartitionSeam

__all__ = ["PeerConnections"]


class PeerConnections:
    """This broker's connections to its peers. ``cluster``: the partition seam, or any view
    of it with ``broker_id``, ``live_brokers``, the ``inter_broker`` listener and
    ``inter_broker_login`` (the transaction marker sender's); ``purpose``
    names the connections in their client id (``broker-<id>-<purpose>``);
    ``request_timeout_ms`` bounds a connect and each round trip; ``max_response_bytes`` an
    answer."""

    def __init__(self, cluster: "PartitionSeam | Any", *, purpose: str, request_timeout_ms: int,
                 max_response_bytes: int):
        self._cluster = cluster
        self._purpose = purpose
        self.request_timeout_ms = request_timeout_ms
        self._max_response_bytes = max_response_bytes
        self._connections: dict[int, tuple[tuple[str, int], BrokerConnection]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def lock(self, broker_id: int) -> asyncio.Lock:
        """The lock that keeps one request at a time on the connection to ``broker_id``."""
        return self._locks.setdefault(broker_id, asyncio.Lock())

    async def connection(self, broker_id: int) -> BrokerConnection:
        """The connection to ``broker_id`` (made when missing, closed or moved). Raises
        :class:`~seglog.cluster.inter_broker.InterBrokerError` when the broker is not live
        or has no inter-broker listener; the listener's errors (OSError, InterBrokerError)
        when the connect fails."""
        cluster: Any = self._cluster
        info = cluster.live_brokers.get(broker_id)
        listener = getattr(cluster, "inter_broker", None)
        if info is None or listener is None:
            raise InterBrokerError(f"broker {broker_id} cannot be reached")
        address = listener.address(info)
        if address is None:
            raise InterBrokerError(f"broker {broker_id} has no {listener.listener_name} "
                                   "listener")
        cached = self._connections.get(broker_id)
        if cached is not None and cached[0] == address and not cached[1].closed:
            return cached[1]
        self.drop(broker_id)
        connection: BrokerConnection = await listener.connect(
            address[0], address[1], client_id=f"broker-{cluster.broker_id}-{self._purpose}",
            timeout_ms=self.request_timeout_ms, max_response_bytes=self._max_response_bytes,
            login=getattr(cluster, "inter_broker_login", None))
        self._connections[broker_id] = (address, connection)
        return connection

    async def round_trip(self, conn: BrokerConnection, api_key: int, version: int,
                         entity: Any) -> Any:
        """Send ``entity`` (a kio request) as ``api_key`` v``version`` on ``conn`` and give
        the decoded answer. Raises InterBrokerError when the answer does not parse, and the
        connection's errors."""
        buffer = io.BytesIO()
        entity_writer(type(entity))(buffer, entity)
        _frame, reader = await conn.request(api_key, version, buffer.getvalue(),
                                            self.request_timeout_ms)
        body = bytes(reader.buf[reader.pos:reader.end])
        try:
            response, _end = entity_reader(load_response_schema(api_key, version))(body, 0)
        except Exception as exc:  # noqa: BLE001 - kio raises assorted errors on bad bytes
            raise InterBrokerError(f"API {api_key} response does not parse: {exc}") from None
        return response

    def drop(self, broker_id: int) -> None:
        """Close and forget the connection to ``broker_id`` (the next request reconnects)."""
        cached = self._connections.pop(broker_id, None)
        if cached is not None:
            cached[1].close()

    def close(self) -> None:
        """Close every connection."""
        for broker_id in list(self._connections):
            self.drop(broker_id)
