"""What a request handler sees: :class:`RequestContext` (the request's header and where it
came from) and :class:`BrokerState` (the broker it runs in), plus :class:`RawResponse` and the
:class:`AppendNotifier` that fetch long-polls wait on.

Every handler runs on the broker's event loop thread. Store calls are thread-safe and fast
enough to make there (an append, a read); anything that may block for long (creating many
partitions, fsync of many files) goes through :meth:`BrokerState.run_blocking`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, TypeVar, Union

if TYPE_CHECKING:
    from .._contract import WireModule
    from ..cluster.seam import PartitionSeam
    from ..store import Store

from .._backend import get_backend
from ..cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from .metrics import BrokerMetrics
from .principal import ANONYMOUS, ConnectionSecurity, KafkaPrincipal

__all__ = ["ANONYMOUS", "AppendNotifier", "BrokerState", "BytesLike", "CloseConnection",
           "ConnectionSecurity", "KafkaPrincipal", "RawResponse", "RequestContext"]

#: What a call run by :meth:`BrokerState.run_blocking` returns.
_Result = TypeVar("_Result")

#: One part of a response: bytes, or a memoryview of a segment file (sent without a copy).
BytesLike = Union[bytes, bytearray, memoryview]


class CloseConnection(Exception):
    """Raised by a handler to close its connection without an answer where Kafka does so on
    purpose (e.g. a failed Produce with acks=0); logged at info, without a traceback, unlike
    an unexpected exception. With a ``response`` (a failed SASL login), that answer is sent
    first, then the connection closes."""

    def __init__(self, message: str = "", response: Any = None):
        super().__init__(message)
        self.response = response


class RawResponse(NamedTuple):
    """A response body a handler encoded itself: ``parts`` are bytes-like objects written in
    order after the response header (memoryviews of segment files are sent without a copy).
    ``throttle_time_ms``: the throttle time the body tells the client (a quota's, KIP-219):
    the connection reads nothing more from that client for that long. No ``parts`` is no
    response at all, with the throttle (a Produce with acks=0 over its quota)."""

    parts: tuple[BytesLike, ...]
    throttle_time_ms: int = 0


class AppendNotifier:
    """A counter of "something was appended or became readable" events and the coroutines
    waiting for the next one (a Fetch long-poll). Used on the event loop thread only; other
    threads call :meth:`notify_threadsafe`."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._count = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def count(self) -> int:
        """How many times :meth:`notify` was called: read it before a fetch that may find
        nothing, then pass it to :meth:`wait`."""
        return self._count

    def notify(self) -> None:
        """Wake every waiter (records were appended, a high watermark or an LSO moved)."""
        self._count += 1
        if not self._waiters:
            return  # the usual case on a produce: no long poll waits (no list to swap)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def notify_threadsafe(self) -> None:
        """:meth:`notify` from a thread other than the event loop's."""
        self._loop.call_soon_threadsafe(self.notify)

    async def wait(self, count: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds unless :attr:`count` moved past ``count``; returns
        whether it did."""
        if self._count != count:
            return True
        if timeout_s <= 0:
            return False
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            if not waiter.done():
                waiter.cancel()
        return self._count != count


@dataclass(eq=False)
class BrokerState:
    """One running broker, as its handlers see it.

    ``store`` (the :class:`~seglog.store.Store`), ``config`` (Kafka's broker configs by their
    Kafka names, typed values: :class:`~seglog.server.config.BrokerConfig`), ``node_id``,
    ``cluster_id``, the advertised ``host`` and ``port``, the event ``loop``, ``appended``
    (the :class:`AppendNotifier`), ``cluster`` (the partition seam), ``extensions``:
    per-module state that a handler module creates in its ``start`` hook under its module
    name, and ``test_breaks``: the negative controls the broker was started with (tests only;
    :mod:`seglog.cluster.test_breaks`).
    """

    store: Store
    config: Mapping[str, Any]
    node_id: int
    cluster_id: str
    host: str
    port: int
    loop: asyncio.AbstractEventLoop
    appended: AppendNotifier
    extensions: dict[str, Any] = field(default_factory=dict)
    #: Set when the broker begins to shut down: long polls answer at once.
    closing: bool = False
    test_breaks: TestBreaks = NO_TEST_BREAKS
    #: Every listener the broker serves, as advertised: ``(listener name, security protocol,
    #: host, port)`` in the order of ``listeners`` (``host``/``port`` are the first's). Empty:
    #: the one PLAINTEXT listener ``host:port``.
    endpoints: tuple[tuple[str, str, str, int], ...] = ()
    #: The partition seam (:class:`~seglog.cluster.seam.PartitionSeam`): the cluster as every
    #: handler sees it, a :class:`~seglog.cluster.single.SingleBroker` for a lone broker, the
    #: :class:`~seglog.cluster.replica_manager.ReplicaManager` in a ZooKeeper cluster (given
    #: by the broker before any handler's start hook runs); a lone broker's by default.
    cluster: "PartitionSeam" = field(default=None)  # type: ignore[assignment]
    #: Called with a connection's id once it closed (Kafka's ``ConnectionDisconnectListener``:
    #: share sessions end with their connection).
    connection_closed_listeners: list[Callable[[int], None]] = field(default_factory=list)
    #: The request path's counters (docs/metrics.md; served by ``--metrics-listen``).
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    #: The store's backend's fast paths for the usual request header and Produce request
    #: (:class:`seglog._contract.WireModule`): the connection and the Produce handler read
    #: with them first, their full parsers read what they decline.
    wire: "WireModule" = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.wire = get_backend(self.store.backend).wire
        if self.cluster is None:
            # A lone broker is a cluster of one: the same seam, with local metadata.
            self.cluster = _single_broker(self)

    async def run_blocking(self, fn: Callable[..., _Result], *args: Any) -> _Result:
        """Run ``fn(*args)`` on a worker thread and return its result (for store calls that
        may block the event loop for long)."""
        return await self.loop.run_in_executor(None, fn, *args)

    @staticmethod
    def now_ms() -> int:
        """Wall-clock milliseconds (Kafka's timestamps)."""
        return time.time_ns() // 1_000_000


@dataclass(eq=False, slots=True)
class RequestContext:
    """One request: ``api_key``, ``api_version``, ``correlation_id``, ``client_id`` (None when
    the client sent none), the connection it came on (``connection_id``, ``client_host``,
    ``client_port``), the ``broker`` (:class:`BrokerState`) and ``security``: the
    connection's :class:`~seglog.server.principal.ConnectionSecurity` (listener, security
    protocol, principal; the SASL handlers change it). A context made without a connection
    (tests) gets an anonymous PLAINTEXT one."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection_id: int
    client_host: str
    client_port: int
    broker: BrokerState
    security: ConnectionSecurity = field(default_factory=ConnectionSecurity)

    @property
    def principal(self) -> KafkaPrincipal:
        """The principal of the request's connection (``User:ANONYMOUS`` unless
        authenticated)."""
        return self.security.principal

    @property
    def listener_name(self) -> str:
        """The listener the request came in on (normalised: ``PLAINTEXT``)."""
        return self.security.listener_name


def _single_broker(state: BrokerState) -> "PartitionSeam":
    """The :class:`~seglog.cluster.single.SingleBroker` seam of a broker without ZooKeeper."""
    from ..cluster.single import SingleBroker

    def persist_overrides(topic_id: str, config: Any, overrides: Any) -> None:
        # A lone broker keeps a created topic's overrides in its dynamic config file.
        from .apis import admin_state

        admin_state.dynamic_configs(state).set_explicit(topic_id, config, overrides)
        admin_state.save_configs(state)

    return SingleBroker(store=state.store, broker_id=state.node_id, host=state.host,
                        port=state.port,
                        endpoints=tuple((name, host, port)
                                        for name, _protocol, host, port in state.endpoints),
                        notify=state.appended.notify,
                        run_blocking=state.run_blocking, persist_overrides=persist_overrides)
