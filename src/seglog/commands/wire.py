"""A small synchronous Kafka protocol client for the data tools: the requests librdkafka's
AdminClient does not offer (DescribeLogDirs, the share-group APIs 77/90/91/92, ...) sent as
kio entities over one connection per broker, with the tools' own connection settings.

:class:`WireClient` takes librdkafka's configuration (a
:class:`~seglog.commands.target.Target`'s ``client_config``): ``bootstrap.servers``,
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``ssl.ca.location``,
``ssl.certificate.location`` / ``ssl.key.location`` / ``ssl.key.password``,
``enable.ssl.certificate.verification``, ``ssl.endpoint.identification.algorithm``,
``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with ``sasl.username`` /
``sasl.password``, ``client.id`` and ``request.timeout.ms``. Any other security protocol,
mechanism or TLS setting (GSSAPI, OAUTHBEARER, inline PEM) is refused by name
(InvalidConfigError); settings that only concern producers or consumers are not its business.

The SASL login (SaslHandshake v1 + SaslAuthenticate v2, SCRAM's two rounds) is the broker's
own inter-broker client's (:func:`seglog.cluster.sasl_login.authenticate`), driven here on a
private event loop so that a tool calls plain functions. The framing is Kafka's: request
header v2 and response header v1 for a flexible version, v1 and v0 otherwise (OffsetDelete
has only v0; ApiVersions answers with header v0 always), written here because the
inter-broker connection frames flexible versions only. Each connection asks ApiVersions
first; :meth:`WireClient.send` picks the highest version both the broker and seglog's schemas
(:func:`seglog.schemas.load_request_schema`) have.

Every connect, login and round trip is bounded by ``request.timeout.ms`` (default 30 s, as
librdkafka). A response's lengths are checked against its bytes before kio decodes it
(:func:`seglog.server.request_lengths.checker`: kio's reader would size a collection from a
garbage count and abort); a broker that answers garbage, closes, or times out raises a
:class:`WireError` subclass, never a traceback of kio's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import ssl
import struct
import sys
import time
import uuid
from typing import Any, Callable, Coroutine, Mapping, NamedTuple, TypeVar

from kio.serial import entity_reader, entity_writer

from .. import error_codes as codes
from ..cluster.sasl_login import SaslLogin, authenticate
from ..errors import InvalidConfigError, InvalidRequestError, SeglogError
from ..schemas import SchemaNotFound, load_request_schema, load_response_schema
from ..server.request_lengths import checker, read_uvarint

__all__ = [
    "API_VERSIONS_KEY", "METADATA_KEY", "FIND_COORDINATOR_KEY", "GROUP_KEY_TYPE",
    "TRANSACTION_KEY_TYPE", "SHARE_KEY_TYPE", "WireError", "WireConnectionError",
    "WireProtocolError", "UnsupportedApiError", "KafkaResponseError", "BrokerAddress",
    "ClusterMetadata", "TopicMetadata", "WireClient", "build",
]

API_VERSIONS_KEY = 18
METADATA_KEY = 3
FIND_COORDINATOR_KEY = 10
#: FindCoordinator's key types (``CoordinatorType``): a group, a transactional id, a share
#: partition key ``group:topicId:partition``.
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
#: ApiVersions v3: the first flexible version (its response header is always v0).
_API_VERSIONS_VERSION = 3
_DEFAULT_TIMEOUT_MS = 30_000
#: The largest response frame accepted (librdkafka's receive.message.max.bytes default).
_MAX_RESPONSE_BYTES = 100_000_000
#: The pause between tries of a retriable error (librdkafka's retry.backoff.ms).
_RETRY_BACKOFF_S = 0.1
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_INT16 = struct.Struct(">h")
_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_INT32 = struct.Struct(">i")
# librdkafka TLS/SASL settings this client does not build: refused by name.
_REFUSED_SETTINGS = ("ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem", "ssl.keystore.location",
                     "ssl.crl.location", "ssl.engine.location", "sasl.kerberos.service.name",
                     "sasl.oauthbearer.method", "sasl.oauthbearer.config")

_T = TypeVar("_T")


class WireError(SeglogError):
    """A request of the tools' protocol client failed (the message says which and why)."""


class WireConnectionError(WireError):
    """A broker could not be reached, refused the TLS handshake or the login, closed the
    connection, or did not answer within the timeout."""


class WireProtocolError(WireError):
    """A broker answered bytes that are not the response asked for."""


class UnsupportedApiError(WireError):
    """Neither the broker nor seglog's schemas share a usable version of the API."""


class KafkaResponseError(WireError):
    """A response carried a Kafka error code: ``error_code`` and Kafka's ``error_name``."""

    def __init__(self, error_code: int, message: str | None = None, *, what: str = ""):
        self.error_code = error_code
        self.error_name = codes.name(error_code) if _known_code(error_code) \
            else f"UNKNOWN_ERROR_{error_code}"
        text = f"{self.error_name}: {message or _default_message(error_code)}"
        super().__init__(f"{what}: {text}" if what else text)


def _known_code(code: int) -> bool:
    try:
        codes.by_code(code)
    except (KeyError, ValueError, LookupError):
        return False
    return True


def _default_message(code: int) -> str:
    return codes.message(code) if _known_code(code) else "unknown error code"


class BrokerAddress(NamedTuple):
    """A broker of the cluster as Metadata lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None


class TopicMetadata(NamedTuple):
    """A topic as Metadata lists it: ``error_code`` (0: none), ``topic_id`` (a UUID string,
    None when the broker has none), ``leaders``: partition -> leader broker id (-1: none)."""

    name: str
    error_code: int
    topic_id: str | None
    leaders: dict[int, int]
    internal: bool


class ClusterMetadata(NamedTuple):
    """A Metadata answer: brokers by id, controller id, cluster id, topics by name."""

    brokers: dict[int, BrokerAddress]
    controller_id: int
    cluster_id: str | None
    topics: dict[str, TopicMetadata]


def build(entity_class: type[_T], **values: Any) -> _T:
    """An instance of a kio entity class with the ``values`` that class has fields for (the
    others dropped: a field a version lacks is not sent, as Kafka's generated writers skip
    fields outside their versions). A field without a default that ``values`` leaves out
    gets its type's zero (False, 0, empty string, empty array), as Kafka's generated
    ``*Data`` classes start."""
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(entity_class):  # type: ignore[arg-type]
        if field.name in values:
            kwargs[field.name] = values[field.name]
        elif field.default is dataclasses.MISSING \
                and field.default_factory is dataclasses.MISSING:
            kwargs[field.name] = _zero(field)
    return entity_class(**kwargs)


def _zero(field: "dataclasses.Field[Any]") -> Any:
    kafka_type = field.metadata.get("kafka_type", "")
    if "tuple" in str(field.type) or str(field.type).startswith("tuple"):
        return ()
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type in ("string", "bytes", "records"):
        return "" if kafka_type == "string" else b""
    return 0


def schema_module(api_key: int, version: int) -> Any:
    """The module holding the request class of ``api_key`` v``version`` and its nested
    entity classes (``MetadataRequestTopic`` ...)."""
    return sys.modules[load_request_schema(api_key, version).__module__]


def _split_servers(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise InvalidConfigError(f"bootstrap.servers: {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise InvalidConfigError("bootstrap.servers is empty")
    return out


def _tls_context(config: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.get("ssl.ca.location") or None)
    if config.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    if config.get("enable.ssl.certificate.verification", "true").lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = config.get("ssl.certificate.location")
    if cert:
        try:
            context.load_cert_chain(cert, config.get("ssl.key.location") or None,
                                    password=config.get("ssl.key.password") or None)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidConfigError(f"ssl.certificate.location {cert}: {exc}") from None
    elif config.get("ssl.key.location"):
        raise InvalidConfigError("ssl.key.location needs ssl.certificate.location")
    return context


class _Connection:
    """One connection to a broker: TLS and SASL done, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 client_id: str):
        self.reader = reader
        self.writer = writer
        self.client_id = client_id.encode("utf-8")
        self.correlation_id = 0
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int, *, ssl_context: ssl.SSLContext | None,
                   login: SaslLogin | None, client_id: str) -> "_Connection":
        reader, writer = await asyncio.open_connection(
            host, port, ssl=ssl_context, server_hostname=host if ssl_context else None)
        if login is not None:
            try:
                await authenticate(reader, writer, login, client_id=client_id)
            except BaseException:
                writer.close()
                raise
        return cls(reader, writer, client_id)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()

    async def round_trip(self, api_key: int, version: int, body: bytes, *,
                         flexible_request: bool, flexible_response: bool) -> bytes:
        """Send one request, return the response body (after its header)."""
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        header = (_HEAD.pack(api_key, version, self.correlation_id)
                  + _INT16.pack(len(self.client_id)) + self.client_id
                  + (b"\x00" if flexible_request else b""))
        self.writer.write(_INT32.pack(len(header) + len(body)) + header + body)
        await self.writer.drain()
        (size,) = _INT32.unpack(await self.reader.readexactly(_INT32.size))
        if size < _INT32.size or size > _MAX_RESPONSE_BYTES:
            raise WireProtocolError(f"response frame of {size} bytes")
        frame = await self.reader.readexactly(size)
        (got,) = _INT32.unpack_from(frame)
        if got != self.correlation_id:
            raise WireProtocolError(f"response correlation id {got}, expected "
                                    f"{self.correlation_id}")
        pos = _INT32.size
        if flexible_response:
            try:
                count, pos = read_uvarint(frame, pos, len(frame))
                for _ in range(count):
                    _tag, pos = read_uvarint(frame, pos, len(frame))
                    length, pos = read_uvarint(frame, pos, len(frame))
                    pos += length
            except InvalidRequestError as exc:
                raise WireProtocolError(f"malformed response header: {exc}") from None
            if pos > len(frame):
                raise WireProtocolError("malformed response header")
        return frame[pos:]


class WireClient:
    """Kafka requests to the brokers of ``config`` (librdkafka's names, see the module
    docstring), one connection per broker made on first use. Use as a context manager or
    call :meth:`close`. Not thread-safe."""

    def __init__(self, config: Mapping[str, str], *, timeout_ms: int | None = None,
                 client_id: str | None = None):
        protocol = config.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in _SECURITY_PROTOCOLS:
            raise InvalidConfigError(f"security.protocol={protocol} is not supported here "
                                     f"(only {', '.join(_SECURITY_PROTOCOLS)})")
        for name in _REFUSED_SETTINGS:
            if config.get(name):
                raise InvalidConfigError(f"{name} is not supported by seglog's protocol "
                                         "client: use the file settings (ssl.*.location)")
        self._servers = _split_servers(config.get("bootstrap.servers", ""))
        self._ssl = _tls_context(config) if protocol in ("SSL", "SASL_SSL") else None
        self._login: SaslLogin | None = None
        if protocol.startswith("SASL_"):
            mechanism = config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))
            if mechanism.upper() not in _MECHANISMS:
                raise InvalidConfigError(f"sasl.mechanism={mechanism} is not supported here "
                                         f"(only {', '.join(_MECHANISMS)})")
            if "sasl.username" not in config or "sasl.password" not in config:
                raise InvalidConfigError(f"{protocol} needs sasl.username and sasl.password")
            self._login = SaslLogin(mechanism.upper(), config["sasl.username"],
                                    config["sasl.password"])
        if timeout_ms is None:
            try:
                timeout_ms = int(config.get("request.timeout.ms", _DEFAULT_TIMEOUT_MS))
            except ValueError:
                raise InvalidConfigError("request.timeout.ms is not an integer") from None
        #: Bounds every connect, login and round trip.
        self.timeout_ms = timeout_ms
        self._client_id = client_id or config.get("client.id") or "seglog-tools"
        self._loop = asyncio.new_event_loop()
        self._connections: dict[int, _Connection] = {}
        self._versions: dict[int, dict[int, tuple[int, int]]] = {}
        self._brokers: dict[int, BrokerAddress] = {}

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection and the event loop (idempotent)."""
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if not self._loop.is_closed():
            # let the transports finish closing before the loop goes
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    # -- connections --------------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, _T], what: str) -> _T:
        try:
            return self._loop.run_until_complete(
                asyncio.wait_for(coroutine, self.timeout_ms / 1000.0 * 2))
        except asyncio.TimeoutError:
            raise WireConnectionError(f"{what}: no answer within {self.timeout_ms} ms") \
                from None
        except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
            raise WireConnectionError(f"{what}: {exc!r}") from None

    def _connect(self, host: str, port: int) -> _Connection:
        try:
            return self._run(_Connection.open(host, port, ssl_context=self._ssl,
                                              login=self._login, client_id=self._client_id),
                             f"cannot connect to {host}:{port}")
        except WireError:
            raise
        except SeglogError as exc:  # the SASL login refused (SaslAuthenticationError)
            raise WireConnectionError(f"cannot log in to {host}:{port}: {exc}") from None

    def _connection(self, node_id: int) -> _Connection:
        """The connection to broker ``node_id`` (-1: the first bootstrap server that
        answers)."""
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if node_id == -1:
            failures = []
            for host, port in self._servers:
                try:
                    conn = self._connect(host, port)
                    break
                except WireConnectionError as exc:
                    failures.append(str(exc))
            else:
                raise WireConnectionError("no bootstrap server answers: " + "; ".join(failures))
        else:
            address = self._brokers.get(node_id)
            if address is None:
                self.metadata()
                address = self._brokers.get(node_id)
            if address is None:
                raise WireConnectionError(f"broker {node_id} is not in the cluster's metadata")
            conn = self._connect(address.host, address.port)
        self._connections[node_id] = conn
        self._versions[node_id] = self._api_versions(conn, node_id)
        return conn

    def _api_versions(self, conn: _Connection, node_id: int) -> dict[int, tuple[int, int]]:
        entity = build(load_request_schema(API_VERSIONS_KEY, _API_VERSIONS_VERSION),
                       client_software_name="seglog", client_software_version="1")
        # ApiVersions' response header is v0 whatever the version (a client that does not
        # know the broker's versions yet must read it).
        body = self._round_trip(conn, node_id, API_VERSIONS_KEY, _API_VERSIONS_VERSION,
                                _encode(entity), flexible_response=False)
        if len(body) >= 2 and _INT16.unpack_from(body)[0] == codes.UNSUPPORTED_VERSION:
            raise UnsupportedApiError(f"broker {node_id} does not speak ApiVersions "
                                      f"v{_API_VERSIONS_VERSION} (Kafka before 2.4)")
        response = _decode(API_VERSIONS_KEY, _API_VERSIONS_VERSION, body)
        if response.error_code:
            raise KafkaResponseError(response.error_code, what="ApiVersions")
        return {int(k.api_key): (int(k.min_version), int(k.max_version))
                for k in response.api_keys}

    # -- requests -----------------------------------------------------------------------

    def api_versions(self, node_id: int = -1) -> dict[int, tuple[int, int]]:
        """The broker's ApiVersions answer: ``{api_key: (min, max)}``."""
        self._connection(node_id)
        return dict(self._versions[node_id])

    def version(self, api_key: int, node_id: int = -1, *, min_version: int = 0,
                max_version: int | None = None) -> int:
        """The highest version of ``api_key`` in the broker's range, seglog's schemas and
        ``[min_version, max_version]``; UnsupportedApiError when there is none."""
        self._connection(node_id)
        span = self._versions[node_id].get(api_key)
        if span is None:
            raise UnsupportedApiError(f"broker {node_id if node_id >= 0 else 'bootstrap'} "
                                      f"does not support API key {api_key}")
        low = max(span[0], min_version)
        high = span[1] if max_version is None else min(span[1], max_version)
        for version in range(high, low - 1, -1):
            try:
                load_request_schema(api_key, version)
                load_response_schema(api_key, version)
            except SchemaNotFound:
                continue
            return version
        raise UnsupportedApiError(f"API key {api_key}: the broker's versions {span[0]}.."
                                  f"{span[1]} and seglog's schemas have none in common")

    def send(self, api_key: int, make: Callable[[Any, int], Any], *, node_id: int = -1,
             min_version: int = 0, max_version: int | None = None) -> Any:
        """Send a request to broker ``node_id`` (-1: a bootstrap server) at the version
        :meth:`version` picks: ``make(module, version)`` builds the kio request from the
        schema module (:func:`schema_module`; :func:`build` fills what the version has).
        Returns the decoded kio response (its error codes are the caller's to read)."""
        version = self.version(api_key, node_id, min_version=min_version,
                               max_version=max_version)
        entity = make(schema_module(api_key, version), version)
        return self.send_entity(api_key, version, entity, node_id=node_id)

    def send_entity(self, api_key: int, version: int, entity: Any, *, node_id: int = -1) -> Any:
        """Send the kio request ``entity`` (``api_key`` v``version``) to broker ``node_id``
        and return the decoded response."""
        conn = self._connection(node_id)
        flexible = bool(type(entity).__flexible__)
        body = self._round_trip(conn, node_id, api_key, version, _encode(entity),
                                flexible_request=flexible, flexible_response=flexible)
        return _decode(api_key, version, body)

    def _round_trip(self, conn: _Connection, node_id: int, api_key: int, version: int,
                    body: bytes, *, flexible_request: bool = True,
                    flexible_response: bool = True) -> bytes:
        where = f"API key {api_key} v{version} to broker " \
            f"{node_id if node_id >= 0 else 'bootstrap'}"
        try:
            return self._run(conn.round_trip(api_key, version, body,
                                             flexible_request=flexible_request,
                                             flexible_response=flexible_response), where)
        except WireError as exc:
            # the connection is out of step with the broker: the next request reconnects
            conn.close()
            self._connections.pop(node_id, None)
            if isinstance(exc, WireProtocolError):
                raise WireProtocolError(f"{where}: {exc}") from None
            raise

    def metadata(self, topics: list[str] | None = None) -> ClusterMetadata:
        """Metadata of the cluster and of ``topics`` (None: every topic); remembers the
        brokers' addresses for :meth:`send` to a broker id."""
        def make(module: Any, version: int) -> Any:
            names = None if topics is None else tuple(
                build(module.MetadataRequestTopic, name=t) for t in topics)
            return build(module.MetadataRequest, topics=names,
                         allow_auto_topic_creation=False)
        response = self.send(METADATA_KEY, make)
        brokers = {int(b.node_id): BrokerAddress(int(b.node_id), b.host, int(b.port), b.rack)
                   for b in response.brokers}
        self._brokers.update(brokers)
        out: dict[str, TopicMetadata] = {}
        for topic in response.topics:
            topic_id = getattr(topic, "topic_id", None)
            out[topic.name] = TopicMetadata(
                topic.name, int(topic.error_code),
                None if topic_id is None or topic_id.int == 0 else str(topic_id),
                {int(p.partition_index): int(p.leader_id) for p in topic.partitions},
                bool(topic.is_internal))
        return ClusterMetadata(brokers, int(response.controller_id),
                               getattr(response, "cluster_id", None), out)

    def find_coordinator(self, key: str, key_type: int = GROUP_KEY_TYPE) -> int:
        """The broker id of the coordinator of ``key`` (a group id with
        :data:`GROUP_KEY_TYPE`; ``group:topicId:partition`` with :data:`SHARE_KEY_TYPE`);
        KafkaResponseError when the broker answers an error (COORDINATOR_NOT_AVAILABLE ...)."""
        def make(module: Any, version: int) -> Any:
            return build(module.FindCoordinatorRequest, key=key, key_type=key_type,
                         coordinator_keys=(key,))
        # A fresh cluster answers COORDINATOR_NOT_AVAILABLE until its offsets topic exists:
        # retried, as Kafka's clients do, within the timeout.
        deadline = time.monotonic() + self.timeout_ms / 1000.0
        while True:
            response = self.send(FIND_COORDINATOR_KEY, make, min_version=3)
            coordinators = getattr(response, "coordinators", None)
            entry = coordinators[0] if coordinators else response
            if not (entry.error_code and codes.is_retriable(int(entry.error_code))
                    and time.monotonic() < deadline):
                break
            time.sleep(_RETRY_BACKOFF_S)
        if entry.error_code:
            raise KafkaResponseError(int(entry.error_code), entry.error_message,
                                     what=f"FindCoordinator {key}")
        node_id = int(entry.node_id)
        self._brokers.setdefault(node_id, BrokerAddress(node_id, entry.host, int(entry.port),
                                                        None))
        return node_id


def _encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _decode(api_key: int, version: int, body: bytes) -> Any:
    response_class = load_response_schema(api_key, version)
    what = f"API key {api_key} v{version} response"
    try:
        checker(response_class)(body, 0, len(body))
    except InvalidRequestError as exc:
        raise WireProtocolError(f"malformed {what}: {exc}") from None
    except TypeError:
        # a field type the length check has no rule for (record sets): kio reads it as is
        pass
    try:
        response, _end = entity_reader(response_class)(body, 0)
    except Exception as exc:  # noqa: BLE001 - kio raises assorted errors on bad bytes
        raise WireProtocolError(f"malformed {what}: {exc!r}") from None
    return response
