"""The broker: a :class:`~seglog.store.Store` served over Kafka's wire protocol.

:class:`Broker` is what users start (``seglog serve``, ``seglog.Broker(...)``, the pytest
plugin). It opens the Store over the data directory, binds its listener (so the port, and
the address it advertises, are known), builds the :class:`~seglog.server.context.BrokerState`
its handlers share, calls the handler modules' ``start`` hooks, in a cluster registers in
ZooKeeper and starts its controller, and only then accepts connections (Kafka's
``KafkaServer.startup``: the socket server is bound first, requests are processed last, so a
client never meets a broker that is missing from its own cluster's metadata). On shutdown it
answers the requests in flight, calls the ``stop`` hooks and closes the Store cleanly
(flushed, checkpoints and the clean-shutdown marker written).

Two ways to run it:

- ``start()`` / ``stop()`` (or ``with Broker(...) as broker:``): the broker runs its own event
  loop on a thread of its own; ``start`` returns once it is listening;
- ``await broker.serve()`` / ``await broker.aclose()`` (or ``async with``): on the caller's
  running loop; ``serve_forever()`` waits until it is closed.

The :class:`Server` is the per-loop part: the listeners (one socket each; an SSL listener's
connections first finish their TLS handshake, :mod:`seglog.server.tls`), the connections
(:mod:`seglog.server.connection`), ApiVersions, and the background tasks (maintenance,
idle-connection expiry).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import socket
import ssl
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .. import error_codes as codes
from .. import features
from .._backend import get_backend
from ..errors import InvalidConfigError
from ..aio import wait_event
from ..cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from ..store import Store
from . import protocol, quotas, recovery_log, registry, stacks
from .config import BrokerConfig
from .connection import RESPONSE_BYTES_HELD_MAX, Connection
from .connection_quotas import ConnectionQuotas
from .context import AppendNotifier, BrokerState
from .finalized_features import FINALIZED_FEATURES_KEY, FinalizedFeatures
from .listeners import Endpoint, Listeners, broker_listeners, is_loopback
from .metrics_export import MetricsExporter
from .principal import ConnectionSecurity
from .sasl.settings import SASL_PROTOCOLS
from . import tls

if TYPE_CHECKING:
    from ..cluster.controller import Controller
    from ..cluster.inter_broker import InterBrokerListener
    from ..cluster.replica_manager import ReplicaManager
    from ..cluster.zk_client import KafkaZkClient

__all__ = ["Broker", "Server", "parse_listen"]

log = logging.getLogger("seglog.server")


#: Schema versions imported per turn of the event loop while the broker loads them.
SCHEMAS_PER_TURN = 1


def _log_schema_failure(future: asyncio.Future[None]) -> None:
    """The background schema import's done callback: a failure is logged (requests of the
    versions it did not reach import their schemas when they come)."""
    if not future.cancelled() and future.exception() is not None:
        log.error("importing the advertised API schemas failed: %s", future.exception())

#: The address a broker listens on when neither ``listen`` nor ``listeners`` says.
LISTEN_DEFAULT = ("127.0.0.1", 9092)
#: How often the log dirs are checked for a write that failed (several log.dirs: JBOD).
LOG_DIR_CHECK_INTERVAL_S = 1.0
#: How long shutdown waits for requests in flight (a long-polling Fetch waits at most its
#: max_wait_ms, Kafka's default 500 ms; a JoinGroup its rebalance timeout) before cancelling.
SHUTDOWN_REQUESTS_TIMEOUT_S = 10.0
#: How long shutdown waits for answered connections to flush their writes.
SHUTDOWN_WRITES_TIMEOUT_S = 5.0
#: How long a cluster broker waits, after registering, for its own metadata cache to list it
#: (one ZooKeeper read, normally milliseconds) before it accepts clients all the same.
REGISTRATION_VISIBLE_TIMEOUT_S = 10.0


def parse_listen(value: object) -> tuple[str, int]:
    """``("host", port)`` from a ``(host, port)`` pair, ``"host:port"``, ``"[v6]:port"`` or a
    Kafka listener ``"PLAINTEXT://host:port"`` (an empty host is every interface, 0.0.0.0).
    Raises InvalidConfigError for anything else, or a port outside 0..65535."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        host, port = value
    elif isinstance(value, str):
        text = value.strip()
        if "://" in text:
            text = text.split("://", 1)[1]
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise InvalidConfigError(f"listen address {value!r} is not host:port")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        try:
            port = int(port_text)
        except ValueError:
            raise InvalidConfigError(f"listen address {value!r}: bad port") from None
    else:
        raise InvalidConfigError(f"listen address {value!r} is not (host, port) or host:port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidConfigError(f"listen port {port!r} outside 0..65535")
    if not isinstance(host, str):
        raise InvalidConfigError(f"listen host {host!r} is not a str")
    return (host or "0.0.0.0", port)


def _advertised(listeners: Listeners, listener_name: str, host: str, port: int
                ) -> tuple[str, int]:
    """What Metadata tells clients of listener ``listener_name``: its
    ``advertised.listeners`` entry, else the address bound (a wildcard: this host's
    canonical name, as Kafka)."""
    endpoint = listeners.advertised_by_name.get(listener_name)
    if endpoint is not None:
        # An empty advertised host is the canonical host name, as for a wildcard listener
        # (advertising 0.0.0.0 itself was refused with the config).
        return (endpoint.host or socket.getfqdn()), endpoint.port
    if host in ("0.0.0.0", "::", ""):
        # Kafka advertises the canonical host name of a wildcard listener.
        return socket.getfqdn(), port
    return host, port


#: What an SSL listener needs: its server context and its principal mapper.
TlsSetup = tuple[ssl.SSLContext, tls.PrincipalMapper]


def tls_setups(config: BrokerConfig, listeners: Listeners) -> dict[str, TlsSetup]:
    """The TLS setup of every listener that speaks TLS (SSL, SASL_SSL), by listener name.
    InvalidConfigError, naming the setting, for a key, store or protocol seglog cannot use."""
    setups: dict[str, TlsSetup] = {}
    for endpoint in listeners.broker:
        if ConnectionSecurity(endpoint.listener_name, endpoint.security_protocol).uses_tls:
            name = endpoint.listener_name
            setups[name] = (tls.server_context(config, name), tls.PrincipalMapper(
                config.listener_value(name, "ssl.principal.mapping.rules")))
    return setups


class _TlsAcceptor(asyncio.Protocol):
    """A connection on a TLS listener until its handshake is done: reading is paused at
    once (the ClientHello waits in the socket), and :meth:`Server._handshake` runs the
    handshake (``loop.start_tls``, bounded by ``ssl_handshake_timeout_s``), then hands the
    TLS transport to a :class:`Connection`. Bytes never reach this protocol itself."""

    def __init__(self, server: "Server", endpoint: Endpoint):
        self.server = server
        self.endpoint = endpoint

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()
        self.server.begin_handshake(self.endpoint, transport)

    def data_received(self, data: bytes) -> None:
        raise AssertionError("reading is paused until start_tls takes the transport")


class _AfterHandshake(asyncio.Protocol):
    """The TLS transport's protocol from the handshake's end until the handshake task hands
    it to its :class:`Connection` (asyncio delivers the first decrypted bytes in the same
    loop turn as the handshake's end, before the task resumes): keeps those bytes (one
    read, at most the TLS layer's buffer) and whether the peer went away."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.eof = False
        self.lost = False

    def data_received(self, data: bytes) -> None:
        self.received.append(data)

    def eof_received(self) -> bool:
        self.eof = True
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


def _handshake_failure(exc: BaseException, timeout_s: float) -> str:
    """Why a TLS handshake failed, in words (asyncio's timeout carries no message)."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or (
            isinstance(exc, ConnectionAbortedError) and "taking longer" in str(exc)):
        return f"no handshake within {timeout_s:g} s"
    reason = getattr(exc, "reason", None)
    return f"{reason or type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Server:
    """The broker on one event loop: listener, connections, handlers, background tasks.
    Made by :class:`Broker`; every method runs on ``loop``'s thread."""

    def __init__(self, *, store: Store, config: BrokerConfig, loop: asyncio.AbstractEventLoop,
                 cluster: Callable[[BrokerState], ReplicaManager] | None = None,
                 test_breaks: TestBreaks = NO_TEST_BREAKS,
                 tls_by_listener: Mapping[str, TlsSetup] | None = None,
                 on_every_log_dir_offline: Callable[[], object] | None = None):
        self.store = store
        # The wire broker keeps the share-partitions (server/share_partitions.py): embedded
        # share consumers of the same Store would be a second state machine over them.
        store.serve_share_groups_elsewhere(
            "a seglog broker serves this Store: its share consumers connect to the broker "
            "(any Kafka share consumer), not through Store.share_consumer")
        #: Called once when every log dir went offline (Kafka halts the broker then).
        self._on_every_log_dir_offline = on_every_log_dir_offline
        self.test_breaks = test_breaks
        #: ``drop_mapped_pages(buffer)`` of the store's backend: a connection calls it on each
        #: view it has written (a Fetch response's zero-copy record sets), so that the segment
        #: pages sent leave the broker's page tables (see connection.py).
        self.drop_mapped_pages = get_backend(store.backend).drop_mapped_pages
        #: ``cluster(state) -> ReplicaManager`` for a cluster member (zookeeper.connect), else
        #: None: made and started once the BrokerState exists, before the handlers' start
        #: hooks and before the listener accepts (no request is ever served standalone;
        #: :class:`Broker` registers it in ZooKeeper before :meth:`start_serving`).
        self._cluster_factory = cluster
        self.replica_manager: ReplicaManager | None = None
        self.config = config
        #: The checked listeners (InvalidConfigError for one seglog cannot serve).
        self.listeners = broker_listeners(config)
        #: Each TLS listener's context and principal mapper (InvalidConfigError for a bad
        #: setting); given by the Broker, which checked them before opening the store.
        self.tls_by_listener: Mapping[str, TlsSetup] = (
            tls_by_listener if tls_by_listener is not None
            else tls_setups(config, self.listeners))
        #: How long a TLS handshake may take before its connection is closed.
        self.ssl_handshake_timeout_s = tls.SSL_HANDSHAKE_TIMEOUT_S
        self.loop = loop
        self.modules: list[ModuleType] = registry.load_modules()
        # Every handler under the request quota (request_percentage, quotas.py).
        self.handlers = quotas.apply_request_quota(registry.load_handlers(self.modules))
        if protocol.API_VERSIONS_KEY in self.handlers:
            raise ValueError("ApiVersions is answered by the core; no module may serve it")
        self.request_bytes_max: int = config["socket.request.max.bytes"]
        self.queued_requests_max: int = config["queued.max.requests"]
        self.sasl_receive_bytes_max: int = config["sasl.server.max.receive.size"]
        self._config_at_start: Mapping[str, Any] = config
        self.idle_ms_max: int = config["connections.max.idle.ms"]
        #: See connection.RESPONSE_BYTES_HELD_MAX.
        self.held_response_bytes_max: int = max(RESPONSE_BYTES_HELD_MAX,
                                                config["fetch.max.bytes"])
        # None: leave the OS's autotuned socket buffers (Kafka sets 100 KiB; only a setting
        # given explicitly is applied here).
        self.socket_buffer_bytes: dict[int, int | None] = {
            option: None if config.is_default(name) or config[name] < 0 else config[name]
            for option, name in ((socket.SO_SNDBUF, "socket.send.buffer.bytes"),
                                 (socket.SO_RCVBUF, "socket.receive.buffer.bytes"))}
        self.connections: dict[int, Connection] = {}
        self._connection_quotas: ConnectionQuotas | None = None
        self.in_flight = 0
        self._drained: asyncio.Event | None = None
        self._next_connection_id = 0
        self._listener: asyncio.base_events.Server | None = None  # the first listener's
        #: The bound socket servers by listener name, in the order of ``listeners``.
        self._listeners_bound: dict[str, asyncio.base_events.Server] = {}
        #: The address each listener is bound to, by listener name.
        self.bound_addresses: dict[str, tuple[str, int]] = {}
        self._handshakes: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._maintenance_job: asyncio.Future[Any] | None = None
        self.state: BrokerState | None = None
        self._ranges = sorted([(h.api_key, h.min_version, h.max_version)
                               for h in self.handlers.values()]
                              + [(protocol.API_VERSIONS_KEY, protocol.API_VERSIONS_VERSION_MIN,
                                  protocol.API_VERSIONS_VERSION_MAX)])
        #: Every advertised schema imported (:func:`protocol.iter_schema_loads`), started by
        #: :meth:`start_serving` as a task of this loop that yields between versions:
        #: importing the ~1,600 kio modules takes ~0.6 s of CPU, which would otherwise come
        #: before the first answer (start to ready was 1.0 s with it, 0.3 s without). A
        #: request before it is done imports its own schema (cached; a failed import is not
        #: cached: it fails that request only). Not on another thread: a thread importing
        #: modules is where faulthandler's all-threads dump from its C signal handler
        #: crashed the process (SIGUSR1 now dumps from a Python-level handler, under the
        #: GIL: see ``seglog.cli``); one thread also keeps the imports off the GIL's path.
        self._schemas_loading: asyncio.Task[None] | None = None
        self._api_versions_bodies: dict[int, bytes] = {}
        #: The cluster's finalized features (KIP-584) as ApiVersions v3+ reports them:
        #: ``(epoch, {name: level})``; a new cluster's defaults until
        #: :meth:`set_finalized_features` says otherwise.
        self.finalized_features: tuple[int, dict[str, int]] = (
            0, features.default_finalized_levels())
        self._started_modules: list[ModuleType] = []

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind every broker listener (the first at ``host:port``, the others at their
        ``listeners`` address), build the BrokerState, start the replica manager (a cluster
        member) and run the modules' start hooks; returns the first listener's bound
        ``(host, port)``. The listeners do not accept yet (a client's connection is
        refused): :meth:`start_serving` opens them."""
        endpoints: list[tuple[str, str, str, int]] = []
        for index, endpoint in enumerate(self.listeners.broker):
            bind_host, bind_port = ((host, port) if index == 0
                                    else (endpoint.host or "0.0.0.0", endpoint.port))
            name = endpoint.listener_name
            bound_server = await self.loop.create_server(
                self._protocol_factory(endpoint), bind_host, bind_port, reuse_address=True,
                backlog=self.config["socket.listen.backlog.size"], start_serving=False)
            self._listeners_bound[name] = bound_server
            if self._listener is None:
                self._listener = bound_server
            bound = bound_server.sockets[0].getsockname()
            self.bound_addresses[name] = (str(bound[0]), int(bound[1]))
            if endpoint.security_protocol == "PLAINTEXT":
                self._warn_if_exposed(name, bound_server, int(bound[1]))
            adv_host, adv_port = _advertised(self.listeners, name, bind_host, int(bound[1]))
            endpoints.append((name, endpoint.security_protocol, adv_host, adv_port))
        bound_host, bound_port = self.bound_addresses[self.listeners.broker[0].listener_name]
        _first, _protocol, adv_host, adv_port = endpoints[0]
        meta = self.store.meta
        assert meta is not None, "an open store has its meta.properties"
        # A ZooKeeper-era (version 0) meta.properties may lack either id: the state then
        # holds None, as it always did (not fixed here: a typing change only).
        self.state = BrokerState(
            store=self.store, config=self.config,
            node_id=meta.node_id,  # type: ignore[arg-type]  # None: see above
            cluster_id=meta.cluster_id,  # type: ignore[arg-type]  # None: see above
            host=adv_host, port=adv_port, loop=self.loop,
            appended=AppendNotifier(self.loop), test_breaks=self.test_breaks,
            endpoints=tuple(endpoints))
        # The finalized features ApiVersions advertises, for the UpdateFeatures handler and
        # the cluster's /feature watch (admin_features' start loads what the cluster holds).
        self.state.extensions[FINALIZED_FEATURES_KEY] = FinalizedFeatures(
            lambda: self.finalized_features, self.set_finalized_features)
        if self._cluster_factory is not None:
            # A cluster member's seam; a lone broker's state made its own (a cluster of one).
            replica_manager = self._cluster_factory(self.state)
            self.replica_manager = replica_manager
            self.state.cluster = replica_manager
            await replica_manager.start()
        for module in self.modules:
            hook = getattr(module, "start", None)
            if hook is not None:
                await hook(self.state)
            self._started_modules.append(module)
        self._tasks.append(self.loop.create_task(self._maintain_forever()))
        self._tasks.append(self.loop.create_task(self._check_partitions()))
        if self.idle_ms_max >= 0:
            self._tasks.append(self.loop.create_task(self._expire_idle_forever()))
        return bound_host, bound_port

    def _warn_if_exposed(self, listener_name: str, bound_server: asyncio.base_events.Server,
                         port: int) -> None:
        """Log a warning when a PLAINTEXT listener is bound beyond loopback: anyone who can
        reach it is served unauthenticated and unencrypted."""
        exposed = sorted({str(sock.getsockname()[0]) for sock in bound_server.sockets
                          if not is_loopback(str(sock.getsockname()[0]))})
        if exposed:
            log.warning("PLAINTEXT listener %s bound to %s port %d, not a loopback address: "
                        "it neither encrypts nor authenticates, so anyone who can reach it "
                        "can read, write and delete every topic (use an SSL or SASL_PLAINTEXT "
                        "listener, bind 127.0.0.1 or firewall the port)",
                        listener_name, ", ".join(exposed), port)

    async def start_serving(self) -> None:
        """Accept connections (after :meth:`start`, and in a cluster after the broker
        registered: Kafka's ``startProcessingRequests``)."""
        assert self._listener is not None, "start() first"
        for bound_server in self._listeners_bound.values():
            await bound_server.start_serving()
        if self._schemas_loading is None:
            self._schemas_loading = self.loop.create_task(self._load_schemas())
            self._schemas_loading.add_done_callback(_log_schema_failure)

    async def _load_schemas(self) -> None:
        """Import every advertised schema, one version per turn of the loop (well under a
        millisecond each: requests are answered between turns; 8 per turn put the first
        answer at 0.45 s after start instead of 0.31 s)."""
        for count, _ in enumerate(protocol.iter_schema_loads(self._ranges), 1):
            if count % SCHEMAS_PER_TURN == 0:
                await asyncio.sleep(0)

    async def wait_schemas_loaded(self) -> None:
        """Return once every advertised request and response schema is imported (after
        which no request imports a module: running out of descriptors cannot fail one);
        raises what the loading raised (RuntimeError naming an advertised version kio has
        no schema for)."""
        assert self._schemas_loading is not None, "start_serving() first"
        await asyncio.shield(self._schemas_loading)

    async def close(self) -> None:
        """Stop accepting, answer what was read, close connections, stop background tasks,
        run the modules' stop hooks (in reverse order). The Store stays open (the Broker
        closes it)."""
        for bound_server in self._listeners_bound.values():
            bound_server.close()
        for handshake in list(self._handshakes):
            handshake.cancel()  # start_tls closes its transport
        if self._connection_quotas is not None:
            self._connection_quotas.close_waiting()  # held, never served: closed now
        # Long-polling fetches answer now instead of holding the shutdown for their max wait.
        if self.state is not None:
            self.state.closing = True
            self.state.appended.notify()
        if self.replica_manager is not None:
            # Delayed acks=-1 produces answer NOT_LEADER_OR_FOLLOWER now (the client finds
            # the next leader) instead of holding the shutdown for their timeout.
            self.replica_manager.begin_shutdown()
        for connection in list(self.connections.values()):
            connection.close_when_answered()
        if self.in_flight:
            self._drained = asyncio.Event()
            if not await wait_event(self._drained, SHUTDOWN_REQUESTS_TIMEOUT_S):
                log.warning("shutdown: %d requests still in flight after %.0f s; cancelling",
                            self.in_flight, SHUTDOWN_REQUESTS_TIMEOUT_S)
        waits = [c.closed for c in self.connections.values()]
        for connection in list(self.connections.values()):
            if connection.pending_requests:
                connection.abort()
        if waits:
            done, pending = await asyncio.wait(waits, timeout=SHUTDOWN_WRITES_TIMEOUT_S)
            for connection in list(self.connections.values()):
                connection.abort()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        if self._schemas_loading is not None and not self._schemas_loading.done():
            self._schemas_loading.cancel()
            await asyncio.wait([self._schemas_loading])
        job = self._maintenance_job
        if job is not None and not job.done():
            try:
                await job
            except Exception:
                log.exception("maintenance round failed during shutdown")
        for bound_server in self._listeners_bound.values():
            await bound_server.wait_closed()
        for module in reversed(self._started_modules):
            hook = getattr(module, "stop", None)
            if hook is not None:
                try:
                    await hook(self.state)
                except Exception:
                    log.exception("stop hook of %s failed", module.__name__)
        self._started_modules.clear()
        if self.replica_manager is not None:
            try:
                await self.replica_manager.stop()
            except Exception:
                log.exception("stopping the replica manager failed")

    # --- connections ---------------------------------------------------------------------

    def _protocol_factory(self, endpoint: Endpoint) -> Callable[[], asyncio.Protocol]:
        """What accepts a connection on ``endpoint``: a :class:`Connection` knowing its
        listener, or on a TLS listener a :class:`_TlsAcceptor` that makes one after the
        handshake."""
        if endpoint.listener_name in self.tls_by_listener:
            return lambda: _TlsAcceptor(self, endpoint)
        return lambda: self._new_connection(endpoint)

    def _new_connection(self, endpoint: Endpoint) -> Connection:
        self._next_connection_id += 1
        return Connection(self, self._next_connection_id, ConnectionSecurity(
            listener_name=endpoint.listener_name,
            security_protocol=endpoint.security_protocol,
            authenticated=endpoint.security_protocol not in SASL_PROTOCOLS))

    def begin_handshake(self, endpoint: Endpoint, transport: asyncio.Transport) -> None:
        """Run the TLS handshake of a connection accepted on ``endpoint`` (its reading is
        paused) as a task of its own. Handshakes in progress count toward
        ``max.connections``: a flood of connections that never finish one is bounded too."""
        # The broker-wide bound; the per-listener and per-IP ones apply once the handshake
        # is done (connection_quotas.py admits the Connection).
        connections_max: int = self._live_config()["max.connections"]
        if len(self.connections) + len(self._handshakes) >= connections_max:
            peer = transport.get_extra_info("peername")
            log.warning("connection from %s on listener %s refused: max.connections=%d "
                        "reached (TLS handshakes in progress included)", peer,
                        endpoint.listener_name, connections_max)
            transport.abort()
            return
        task = self.loop.create_task(self._handshake(endpoint, transport))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, endpoint: Endpoint, transport: asyncio.Transport) -> None:
        """The TLS handshake, bounded by :attr:`ssl_handshake_timeout_s`; then the
        connection's principal (the client certificate's mapped DN, or ANONYMOUS) and its
        :class:`Connection`. A failed handshake (a plaintext client, an untrusted or expired
        certificate, no certificate where one is required, a client that says nothing) is
        one log line and a closed socket: Kafka's "Failed authentication ... (SSL handshake
        failed)"."""
        name = endpoint.listener_name
        context, mapper = self.tls_by_listener[name]
        peer = transport.get_extra_info("peername")
        where = (f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2
                 else str(peer))
        waiting = _AfterHandshake()
        try:
            tls_transport = await self.loop.start_tls(
                transport, waiting, context, server_side=True,
                ssl_handshake_timeout=self.ssl_handshake_timeout_s)
        except asyncio.CancelledError:
            transport.abort()
            raise
        except (OSError, ssl.SSLError, EOFError, asyncio.TimeoutError) as exc:
            log.info("Failed authentication with %s on listener %s (SSL handshake failed): %s",
                     where, name, _handshake_failure(exc, self.ssl_handshake_timeout_s))
            transport.abort()
            return
        if tls_transport is None or waiting.lost:  # the peer went away as it ended
            transport.abort()
            return
        connection = self._new_connection(endpoint)
        try:
            # Before the connection reads its first request: every request's context
            # carries the principal of the certificate.
            connection.security.principal = tls.peer_principal(
                tls_transport.get_extra_info("ssl_object"), mapper)
        except (LookupError, ValueError) as exc:
            log.info("Failed authentication with %s on listener %s (client certificate): %s",
                     where, name, exc)
            tls_transport.abort()
            return
        log.debug("connection %d from %s on listener %s: %s, principal %s",
                  connection.connection_id, where, name,
                  tls_transport.get_extra_info("ssl_object").version(),
                  connection.security.principal)
        tls_transport.set_protocol(connection)
        connection.connection_made(tls_transport)
        for data in waiting.received:
            if tls_transport.is_closing():
                break
            connection.data_received(data)
        if waiting.eof and not tls_transport.is_closing():
            if not connection.eof_received():
                tls_transport.close()

    def _live_config(self) -> Any:
        """The broker config now (dynamic configs change ``state.config``)."""
        return self.state.config if self.state is not None else self._config_at_start

    @property
    def connection_quotas(self) -> ConnectionQuotas:
        """The connection limits (made at the first accept: the live config and the client
        quotas' IP rates are the state's)."""
        if self._connection_quotas is None:
            state = self.state

            def ip_rate(host: str) -> float | None:
                if state is None:
                    return None
                return quotas.quotas_of(state).ip_connection_rate(host)

            listeners = self._config_at_start.get("listeners") or ()
            if isinstance(listeners, str):
                listeners = listeners.split(",")
            names = frozenset(str(entry).split("://", 1)[0].strip().upper()
                              for entry in listeners if "://" in str(entry))
            self._connection_quotas = ConnectionQuotas(
                loop=self.loop, config=self._live_config, ip_rate=ip_rate,
                register=self._register,
                inter_broker_listener=self.listeners.inter_broker_listener_name,
                listener_names=names)
        return self._connection_quotas

    def admit(self, connection: Connection) -> bool:
        """A new connection: admitted, held until a connection slot or the creation rate
        allows it, or refused (False: the caller closes it); see connection_quotas.py."""
        return self.connection_quotas.admit(connection)

    def _register(self, connection: Connection) -> None:
        self.connections[connection.connection_id] = connection

    def forget(self, connection: Connection) -> None:
        """A connection was lost: drop it from the tables (a held one from the queue)."""
        if self.connections.pop(connection.connection_id, None) is not None:
            self.connection_quotas.released(connection)
            if self.state is not None:
                for listener in self.state.connection_closed_listeners:
                    listener(connection.connection_id)

    def request_finished(self) -> None:
        """A request was answered or dropped; wakes a shutdown waiting for the last one."""
        if self.in_flight == 0 and self._drained is not None:
            self._drained.set()

    # --- ApiVersions -----------------------------------------------------------------------

    def answer_api_versions(self, header: protocol.RequestHeader, frame: bytes
                            ) -> tuple[bytes | bytearray | memoryview, ...]:
        """The whole response frame (as parts) of an ApiVersions request: the served ranges;
        UNSUPPORTED_VERSION in the v0 format with ApiVersions' own range for a version this
        broker does not know; INVALID_REQUEST for a v3+ client software name or version that
        breaks KIP-511's pattern. Raises InvalidRequestError for a body that does not decode
        (the connection is closed, as Kafka does)."""
        version = header.api_version
        if not protocol.API_VERSIONS_VERSION_MIN <= version <= protocol.API_VERSIONS_VERSION_MAX:
            body = protocol.api_versions_response(
                0, [(protocol.API_VERSIONS_KEY, protocol.API_VERSIONS_VERSION_MIN,
                     protocol.API_VERSIONS_VERSION_MAX)],
                error_code=codes.UNSUPPORTED_VERSION)
        else:
            request = protocol.read_request_body(protocol.API_VERSIONS_KEY, version, frame,
                                                 header.body_offset)
            if version >= 3 and not protocol.valid_client_software(
                    request.client_software_name, request.client_software_version):
                body = protocol.api_versions_response(
                    version, [], error_code=codes.INVALID_REQUEST)
            else:
                cached = self._api_versions_bodies.get(version)
                if cached is None:
                    epoch, levels = self.finalized_features
                    cached = self._api_versions_bodies[version] = \
                        protocol.api_versions_response(
                            version, self._ranges,
                            supported_features=features.supported_ranges(),
                            finalized_features=features.finalized_ranges(levels),
                            finalized_features_epoch=epoch)
                body = cached
        return tuple(protocol.encode_response(header.correlation_id, flexible=False,
                                              body_parts=(body,)))

    @property
    def api_ranges(self) -> list[tuple[int, int, int]]:
        """``[(api_key, min_version, max_version), ...]`` as ApiVersions advertises them."""
        return list(self._ranges)

    def set_finalized_features(self, epoch: int, levels: dict[str, int]) -> None:
        """Advertise finalized features ``levels`` at ``epoch`` from the next ApiVersions on
        (the cached response bodies are dropped)."""
        self.finalized_features = (epoch, dict(levels))
        self._api_versions_bodies.clear()

    # --- background tasks ------------------------------------------------------------------

    async def _expire_idle_forever(self) -> None:
        idle_s = self.idle_ms_max / 1000
        period_s = max(0.01, min(idle_s / 4, 1.0))
        while True:
            await asyncio.sleep(period_s)
            now = time.monotonic()
            for connection in list(self.connections.values()):
                if connection.pending_requests == 0 and now - connection.last_active_s > idle_s:
                    log.info("connection %d from %s:%d idle for more than %d ms "
                             "(connections.max.idle.ms); closing", connection.connection_id,
                             connection.client_host, connection.client_port, self.idle_ms_max)
                    connection.close_when_answered()

    async def _check_partitions(self) -> None:
        """Right after the start, on a worker: check every partition's active segment, which
        lazy loading opens on first use only (Kafka opens it at load), so that a partition
        whose flushed data is gone is offline from the start rather than from its first
        append; the Store warns of each offline partition once, with its reason (the serve
        command logs warnings). Logs how many are offline and how to bring them back."""
        assert self.state is not None
        try:
            offline = await self.state.run_blocking(self.store.check_active_segments)
        except Exception:  # noqa: BLE001 - a check that fails must not stop the broker
            log.exception("checking the partitions' active segments failed")
            return
        if offline:
            log.error("%d partition(s) offline: their files failed to load (reasons above); "
                      "they answer KAFKA_STORAGE_ERROR until `seglog recover --data-dir %s "
                      "--topic T --partition P` truncates each to its last valid offset and "
                      "the broker restarts", offline, self.store.path)

    def _every_log_dir_offline(self) -> bool:
        """Whether every log dir failed (the maintenance round takes a dir whose writes
        failed offline); then the broker stops, as Kafka's LogDirFailureHandler halts it."""
        dirs = self.store.log_dirs()
        if not dirs or any(d.failure is None for d in dirs):
            return False
        log.error("every log dir is offline (%s): the broker stops",
                  "; ".join(f"{d.path}: {d.failure}" for d in dirs))
        if self._on_every_log_dir_offline is not None:
            self._on_every_log_dir_offline()
        return True

    async def _maintain_forever(self) -> None:
        """Kafka's timers as one loop: :meth:`Store.maintain` (retention, compaction,
        flush.ms, offset expiry, checkpoints) every ``log.retention.check.interval.ms``;
        offset expiry (``offsets.retention.minutes``) also every
        ``offsets.retention.check.interval.ms``; timed-out transactions aborted every
        ``transaction.abort.timed.out.transaction.cleanup.interval.ms``. Each runs on a
        worker thread; a failure is logged and retried at the next tick."""
        config = self.config
        store = self.store
        jobs: list[tuple[float, str, Callable[[], object]]] = [
            (config["log.retention.check.interval.ms"] / 1000, "retention",
             lambda: store.maintain()),
            (config["offsets.retention.check.interval.ms"] / 1000, "offset expiry",
             lambda: store.expire_offsets()),
            (config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000,
             "transaction timeouts", lambda: store.abort_timed_out_transactions()),
            # A dir where a write failed goes offline with its partitions soon after, not at
            # the next retention round (Kafka's LogDirFailureChannel acts at once).
            # Each partition that goes offline is logged then, with why.
            (LOG_DIR_CHECK_INTERVAL_S, "log dir check", recovery_log.OfflineWatch(store).check),
        ]
        now = time.monotonic()
        due = [now + period for period, _, _ in jobs]
        while True:
            next_due = min(due)
            await asyncio.sleep(max(0.0, next_due - time.monotonic()))
            for i, (period, name, job) in enumerate(jobs):
                if due[i] <= time.monotonic():
                    self._maintenance_job = self.loop.run_in_executor(None, job)
                    try:
                        # Shielded: a shutdown waits for a round in progress (close()) rather
                        # than leave it running beside Store.close on its worker thread.
                        await asyncio.shield(self._maintenance_job)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("maintenance (%s) failed", name)
                    due[i] = time.monotonic() + period
                    if self._every_log_dir_offline():
                        return
                    if self.state is not None:
                        # Retention or an aborted transaction can move start offsets / LSOs.
                        self.state.appended.notify()


class Broker:
    """A Kafka-protocol broker over a :class:`~seglog.store.Store` in ``data_dir``.

    ``listen``: ``(host, port)`` or ``"host:port"``; port 0 picks a free port (see
    :attr:`port`). None: the first of ``config["listeners"]`` when given, else
    ``127.0.0.1:9092``. ``config``: Kafka broker config names to values (a mapping, or a
    :class:`~seglog.server.config.BrokerConfig`); ``backend``: the Store's backend
    (``"native"``, ``"pure"``, None for the default). ``test_breaks``: negative controls and
    test hooks (:class:`~seglog.cluster.test_breaks.TestBreaks`; tests only, never set in
    production: each one puts a known bug back). ``metrics_listen``: ``(host, port)`` or
    ``"host:port"`` to serve Prometheus metrics on (port 0 picks a free port: see
    :attr:`metrics_address`; docs/metrics.md); None serves none. ``on_open_progress(done,
    total)``: the progress of opening the data dir's topics (recovery after a crash can take
    long).

    Raises :class:`~seglog.errors.InvalidConfigError` for bad settings (at construction; a
    listener seglog cannot serve as configured among them: :mod:`seglog.server.listeners`) and
    the Store's errors (``LogLockedError`` when another writer holds the directory) or
    ``OSError`` (address in use) from :meth:`start` / :meth:`serve`. Not reusable after it
    was closed. The methods are not thread-safe against each other; call them from one thread.
    """

    def __init__(self, data_dir: str | os.PathLike[str], listen: object = None,
                 config: Mapping[str, Any] | BrokerConfig | None = None,
                 backend: str | None = None,
                 test_breaks: TestBreaks = NO_TEST_BREAKS,
                 metrics_listen: object = None,
                 on_open_progress: Callable[[int, int], None] | None = None):
        self.data_dir = os.fspath(data_dir)
        self._metrics_listen = None if metrics_listen is None else parse_listen(metrics_listen)
        self._metrics: MetricsExporter | None = None
        #: ``on_progress(done, total)`` of opening (recovering) the data dir's topics, called
        #: from the worker thread that opens the Store (``seglog serve`` draws a bar).
        self.on_open_progress = on_open_progress
        self._stop_task: asyncio.Task[None] | None = None  # _stop_soon's
        self.test_breaks = test_breaks
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig(config)
        # Refused here, before the data directory is touched: a listener seglog cannot serve
        # as configured (SASL_*: not built yet) is never served as PLAINTEXT, and a TLS
        # listener's keys and stores are loaded (a bad one is refused now, not at a client).
        listeners = broker_listeners(self.config)
        self._tls_by_listener = tls_setups(self.config, listeners)
        if listen is None:
            listen = (listeners.served.text if not self.config.is_default("listeners")
                      else LISTEN_DEFAULT)
        self._listen = parse_listen(listen)
        if self.config.cluster_mode and self.config.node_id is None:
            raise InvalidConfigError("broker.id must be set (0 or more) when "
                                     "zookeeper.connect is: it names this broker in the cluster")
        self.backend = backend
        # The inter-broker client side (a TLS client context: a bad store is refused now).
        self._inter_broker = (self._inter_broker_listener() if self.config.cluster_mode
                              else None)
        self._zk: KafkaZkClient | None = None
        self._controller: Controller | None = None
        self._store: Store | None = None
        self._server: Server | None = None
        self._bound: tuple[str, int] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed: asyncio.Event | None = None
        self._state = "new"  # new -> serving -> closed

    # --- properties ------------------------------------------------------------------------

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """``(host, port)`` the Prometheus endpoint is bound to (``http://host:port/metrics``),
        None when the broker serves no metrics."""
        exporter = self._metrics
        return None if exporter is None else exporter.address

    def _controller_active(self) -> bool:
        """Whether this broker is the active controller (a lone broker is its own)."""
        if not self.config.cluster_mode:
            return True
        controller = self._controller
        return controller is not None and controller.active

    @property
    def host(self) -> str:
        """The advertised host (what Metadata tells clients)."""
        return self._broker_state().host

    @property
    def port(self) -> int:
        """The port listened on (the one picked when asked for 0)."""
        return self._bound_address()[1]

    @property
    def bootstrap(self) -> str:
        """``"host:port"`` for a client's ``bootstrap.servers`` (the listen host; a wildcard
        listener gives 127.0.0.1)."""
        host, port = self._bound_address()
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def listener_address(self, listener_name: str) -> tuple[str, int]:
        """``(host, port)`` listener ``listener_name`` (``"SSL"``, any case) is bound to (a
        wildcard listener gives 127.0.0.1, as :attr:`bootstrap`). KeyError for a listener
        the broker does not serve."""
        host, port = self._serving().bound_addresses[listener_name.upper()]
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return host, port

    def listener_bootstrap(self, listener_name: str) -> str:
        """``"host:port"`` of :meth:`listener_address`, for a client's bootstrap.servers."""
        host, port = self.listener_address(listener_name)
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def listener_names(self) -> list[str]:
        """The names of the listeners served, in the order of ``listeners``."""
        return list(self._serving().bound_addresses)

    @property
    def store(self) -> Store:
        """The Store served (open while the broker serves)."""
        if self._store is None:
            raise RuntimeError("the broker is not started")
        return self._store

    @property
    def state(self) -> BrokerState:
        """The BrokerState its handlers share."""
        return self._broker_state()

    @property
    def api_ranges(self) -> list[tuple[int, int, int]]:
        """``[(api_key, min_version, max_version), ...]``: what ApiVersions advertises."""
        return self._serving().api_ranges

    @property
    def server(self) -> Server:
        """The :class:`Server` (listener, connections, handler table ``server.handlers``)."""
        return self._serving()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the broker runs on."""
        self._serving()
        assert self._loop is not None
        return self._loop

    def _serving(self) -> Server:
        if self._server is None or self._bound is None or self._server.state is None:
            raise RuntimeError("the broker is not serving")
        return self._server

    def _broker_state(self) -> BrokerState:
        state = self._serving().state
        assert state is not None
        return state

    def _bound_address(self) -> tuple[str, int]:
        self._serving()
        assert self._bound is not None
        return self._bound

    # --- asyncio use -------------------------------------------------------------------------

    async def serve(self) -> "Broker":
        """Open the Store and start serving on the running loop; returns once listening (a
        cluster member: once registered in ZooKeeper and listed in its own metadata, so that
        its first answer to a client already names it)."""
        if self._state != "new":
            raise RuntimeError(f"broker is {self._state}; a Broker serves once")
        self._state = "starting"
        loop = asyncio.get_running_loop()
        self._loop = loop
        config = self.config
        self.test_breaks.warn_if_any(f"broker in {self.data_dir}")
        try:
            cluster_id = None
            if config.cluster_mode:
                cluster_id = await loop.run_in_executor(None, self._connect_zookeeper)
            store = await loop.run_in_executor(None, self._open_store, cluster_id)
            self._store = store
            self._server = Server(store=store, config=config, loop=loop,
                                  cluster=self._make_replica_manager
                                  if config.cluster_mode else None,
                                  test_breaks=self.test_breaks,
                                  tls_by_listener=self._tls_by_listener,
                                  on_every_log_dir_offline=self._stop_soon)
            self._bound = await self._server.start(*self._listen)
            if config.cluster_mode:
                # Registered before any client is answered (Kafka's KafkaServer.startup order).
                await self._join_cluster()
            if self._metrics_listen is not None:
                state = self._server.state
                assert state is not None, "Server.start made it"
                self._metrics = MetricsExporter(state, *self._metrics_listen,
                                                controller_active=self._controller_active)
                self._metrics.start()
            await self._server.start_serving()
        except BaseException:
            await self._close_after_failed_start()
            raise
        self._closed = asyncio.Event()
        self._state = "serving"
        log.debug("seglog broker listening on %s (data dir %s, %d topics)", self.bootstrap,
                 self.data_dir, len(self._store.topics()))
        return self

    def _open_store(self, cluster_id: str | None = None) -> Store:
        config = self.config
        node_id = config.node_id
        extra: dict[str, Any] = {}
        if cluster_id is not None:
            # A cluster member's logs keep their high watermark apart from their end
            # (restored from replication-offset-checkpoint) and stamp leader epochs.
            extra = {"replicated": True, "cluster_id": cluster_id}
        store = Store(self.data_dir, backend=self.backend, extra_log_dirs=self._extra_log_dirs(),
                      offsets_topic_partitions=config["offsets.topic.num.partitions"],
                      transaction_state_partitions=config["transaction.state.log.num.partitions"],
                      share_state_partitions=config[
                          "share.coordinator.state.topic.num.partitions"],
                      node_id=1 if node_id is None else node_id,
                      topic_config_defaults=config.log_config(),
                      offsets_retention_ms=config["offsets.retention.minutes"] * 60000,
                      on_progress=self.on_open_progress, **extra)
        meta = store.meta
        assert meta is not None, "an open store has its meta.properties"
        if node_id is not None and meta.node_id != node_id:
            stored = meta.node_id
            store.close()
            raise InvalidConfigError(f"Stored node id {stored} doesn't match previous node id "
                                     f"{node_id} (node.id / broker.id) in {self.data_dir}")
        if cluster_id is not None and meta.cluster_id != cluster_id:
            stored_cluster_id = meta.cluster_id
            store.close()
            # Kafka's InconsistentClusterIdException, word for word.
            raise InvalidConfigError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId "
                f"Some({stored_cluster_id}) in "
                f"meta.properties ({self.data_dir}). The broker is trying to join the wrong "
                "cluster. Configured zookeeper.connect may be wrong.")
        recovery_log.log_open_reports(store)
        return store

    def _extra_log_dirs(self) -> list[str]:
        """The ``log.dirs`` entries after the first (JBOD) when the data dir is that first
        entry (a ``--data-dir`` of its own serves that dir alone)."""
        config = self.config
        if config.is_default("log.dirs") and config.is_default("log.dir"):
            return []
        dirs = list(config["log.dirs"])
        if os.path.abspath(dirs[0]) != os.path.abspath(self.data_dir):
            return []
        return dirs[1:]

    # --- cluster membership (zookeeper.connect) -------------------------------------------------

    def _connect_zookeeper(self) -> str:
        """Connect to ZooKeeper, create Kafka's persistent paths, return the cluster id (made
        by the first broker). Blocking."""
        from ..cluster.zk_client import KafkaZkClient

        config = self.config
        session_ms = config["zookeeper.session.timeout.ms"]
        connection_ms = config["zookeeper.connection.timeout.ms"] or session_ms
        zk = KafkaZkClient(config["zookeeper.connect"], session_timeout_ms=session_ms,
                           connection_timeout_ms=connection_ms)
        self._zk = zk
        zk.start()
        zk.ensure_persistent_paths()
        return zk.get_or_create_cluster_id()

    def _make_replica_manager(self, state: BrokerState) -> ReplicaManager:
        from ..cluster.replica_manager import ReplicaManager

        zk, broker_id = self._zk, state.node_id
        assert zk is not None, "_connect_zookeeper() first"

        def claim_block() -> tuple[int, int]:
            block = zk.allocate_producer_id_block(broker_id)
            return block.start, block.end

        # Producer ids unique over the cluster (idempotence across a leader change).
        state.store.use_cluster_producer_id_blocks(claim_block)
        return ReplicaManager(store=state.store, zk=zk, broker_id=state.node_id,
                              config=self.config, loop=state.loop,
                              notify=state.appended.notify, test_breaks=self.test_breaks,
                              inter_broker=self._inter_broker)

    def _inter_broker_listener(self) -> InterBrokerListener:
        """How this broker connects to the others: ``inter.broker.listener.name``, with a
        client TLS context when that listener speaks TLS (its own keystore is the client
        certificate: brokers authenticate to each other)."""
        from ..cluster.inter_broker import InterBrokerListener

        listeners = broker_listeners(self.config)
        name = listeners.inter_broker_listener_name
        endpoint = listeners.endpoint(name)
        protocol = endpoint.security_protocol if endpoint is not None else "PLAINTEXT"
        context = (tls.client_context(self.config, name)
                   if ConnectionSecurity(name, protocol).uses_tls else None)
        return InterBrokerListener(listener_name=name, ssl_context=context)

    async def _join_cluster(self) -> None:
        """Register this broker (its advertised listener, known once the listener is bound)
        and wait until its own metadata cache lists it, then run for controller (Kafka's
        ``KafkaServer.startup`` order); the caller accepts clients after."""
        from ..cluster.controller import Controller
        from ..cluster.zk_data import BrokerRegistration

        server = self._serving()
        state = self._broker_state()
        replica_manager = server.replica_manager
        assert replica_manager is not None, "a cluster member's server has its replica manager"
        await replica_manager.register(
            BrokerRegistration(broker_id=state.node_id, host=state.host, port=state.port,
                               endpoints=state.endpoints))
        deadline_s = time.monotonic() + REGISTRATION_VISIBLE_TIMEOUT_S
        while state.node_id not in replica_manager.live_brokers:
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                log.warning("broker %d: registered, but its metadata cache did not list it "
                            "within %.0f s; serving anyway", state.node_id,
                            REGISTRATION_VISIBLE_TIMEOUT_S)
                break
            await replica_manager.wait_for_metadata(remaining_s)
        rebalance = self.config["auto.leader.rebalance.enable"]
        assert self._zk is not None, "_connect_zookeeper() first"
        controller = Controller(
            self._zk, state.node_id,
            default_unclean=self.config["unclean.leader.election.enable"],
            leader_imbalance_check_interval_ms=(
                self.config["leader.imbalance.check.interval.seconds"] * 1000
                if rebalance else None),
            leader_imbalance_per_broker_percentage=self.config[
                "leader.imbalance.per.broker.percentage"],
            test_breaks=self.test_breaks)
        self._controller = controller
        replica_manager.attach_controller(controller)  # ElectLeaders, reassignments
        await state.run_blocking(controller.start)
        log.info("broker %d joined cluster %s (ZooKeeper %s) as %s:%d", state.node_id,
                 state.cluster_id, self.config["zookeeper.connect"], state.host, state.port)

    def _leave_cluster(self) -> None:
        """Stop the controller and close the ZooKeeper session (the registration, an
        ephemeral znode, disappears at once). Blocking; idempotent."""
        controller, self._controller = self._controller, None
        if controller is not None:
            try:
                controller.stop()
            except Exception:
                log.exception("stopping the controller failed")
        zk, self._zk = self._zk, None
        if zk is not None:
            try:
                zk.close()
            except Exception:
                log.exception("closing the ZooKeeper session failed")

    async def _close_after_failed_start(self) -> None:
        self._state = "closed"
        if self._metrics is not None:
            await self._metrics.stop()
        if self._server is not None:
            try:
                await self._server.close()
            except Exception:
                log.exception("closing after a failed start")
        await asyncio.get_running_loop().run_in_executor(None, self._leave_cluster)
        if self._store is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._store.close)

    async def serve_forever(self) -> None:
        """:meth:`serve` if not serving yet, then wait until :meth:`aclose`."""
        if self._state == "new":
            await self.serve()
        if self._closed is not None:
            await self._closed.wait()

    def _stop_soon(self) -> None:
        """Begin :meth:`aclose` on the broker's loop (every log dir went offline)."""
        self._stop_task = asyncio.get_running_loop().create_task(self.aclose())

    async def aclose(self) -> None:
        """Shut down on the broker's loop: stop accepting, answer the requests in flight,
        close connections, run the stop hooks, close the Store (flush, checkpoints,
        clean-shutdown marker). Idempotent."""
        if self._state != "serving":
            return
        self._state = "closing"
        server, closed, store = self._server, self._closed, self._store
        assert server is not None and closed is not None and store is not None
        loop = asyncio.get_running_loop()
        try:
            if self._metrics is not None:
                await self._metrics.stop()
            await server.close()
        finally:
            try:
                await loop.run_in_executor(None, self._leave_cluster)
            finally:
                await loop.run_in_executor(None, store.close)
            self._state = "closed"
            closed.set()

    async def __aenter__(self) -> "Broker":
        return await self.serve()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    # --- its own thread ----------------------------------------------------------------------

    def start(self) -> "Broker":
        """Run the broker on an event loop of its own thread; returns once it listens
        (raising what a failed start raised)."""
        if self._state != "new":
            raise RuntimeError(f"broker is {self._state}; a Broker serves once")
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.serve())
            except BaseException as exc:  # handed to start()'s caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"seglog-broker-{id(self):x}",
                                        daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        # An embedded broker is ready once no request can need an import (see
        # Server.wait_schemas_loaded; `seglog serve` answers before that).
        server = self._server
        assert server is not None, "serve() made it"
        try:
            asyncio.run_coroutine_threadsafe(server.wait_schemas_loaded(), loop).result()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Shut down (see :meth:`aclose`) and end the thread started by :meth:`start`.
        Idempotent. ``timeout_s`` bounds the wait for the shutdown and for the thread; a
        shutdown that outlasts it raises TimeoutError naming where the broker's tasks and
        threads wait (:mod:`seglog.server.stacks`)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if threading.current_thread() is thread:
            raise RuntimeError("Broker.stop() called on the broker's own event loop thread "
                               "(from a handler?): use 'await broker.aclose()' there")
        if thread.is_alive() and not loop.is_closed():
            future = asyncio.run_coroutine_threadsafe(self.aclose(), loop)
            try:
                future.result(timeout_s)
            except concurrent.futures.TimeoutError:
                raise TimeoutError(
                    f"Broker.stop(): the shutdown did not finish within {timeout_s} s; its "
                    f"tasks:\n{stacks.task_stacks(loop)}threads:\n{stacks.thread_stacks()}"
                ) from None
            finally:
                loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        self._thread = None

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.bootstrap if self._state == "serving" else self._state
        return f"Broker({self.data_dir!r}, {where})"

