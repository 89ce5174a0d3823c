"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2: SASL logins on a SASL listener,
and Kafka's ILLEGAL_SASL_STATE answers everywhere else.

On a SASL_PLAINTEXT (or SASL_SSL) listener these run the connection's exchange
(:mod:`seglog.server.sasl.authenticator`, which also says what order is enforced):
SaslHandshake picks an enabled mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
SaslAuthenticate carries its tokens. A failed login is answered SASL_AUTHENTICATION_FAILED
with Kafka's message after ``connection.failed.authentication.delay.ms`` and the connection
closes; an unknown user and a wrong password get the same answer. A SaslHandshake on an
authenticated connection re-authenticates it (KIP-368) when its session has a lifetime
(``connections.max.reauth.ms``) and the last re-authentication began over a second ago
(Kafka's rule); otherwise it is
answered as Kafka's ``KafkaApis`` answers it, ILLEGAL_SASL_STATE.

On a listener without SASL (PLAINTEXT, SSL), a Kafka broker answers both APIs with
ILLEGAL_SASL_STATE (34): the channel is already "authenticated" as ANONYMOUS.

SaslHandshake v0 (raw tokens without Kafka headers after it, clients before Kafka 1.0) is
refused: answered UNSUPPORTED_VERSION with the enabled mechanisms, then the connection closes
(no client here sends it).

Per-broker state (``state.extensions[__name__]``, :class:`SaslState`): the settings of each
SASL listener and the SCRAM credential store (the data directory's file; ZooKeeper's
``/config/users`` in a cluster). A failed login is logged once, at INFO, as Kafka logs it.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, NoReturn

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v0.response import (
    SaslAuthenticateResponse as AuthenticateResponseV0,
)
from kio.schema.sasl_authenticate.v1.response import (
    SaslAuthenticateResponse as AuthenticateResponseV1,
)
from kio.schema.sasl_authenticate.v2.response import (
    SaslAuthenticateResponse as AuthenticateResponseV2,
)
from kio.schema.sasl_handshake.v0.response import SaslHandshakeResponse as HandshakeResponseV0
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse as HandshakeResponseV1
from kio.static.primitive import i64Timedelta

from ... import error_codes as codes
from ...errors import SaslAuthenticationError
from ..context import BrokerState, CloseConnection, RequestContext
from ..listeners import parse_endpoints, parse_protocol_map
from ..registry import ApiHandler
from ..sasl.authenticator import (
    MIN_REAUTH_INTERVAL_MS, SASL_AUTHENTICATE_KEY, SASL_HANDSHAKE_KEY, SaslSession,
    generic_failure_message,
)
from ..sasl.credentials import CredentialStore, FileCredentialStore
from ...sasl.plain import PlainServer
from ...sasl.scram import ScramFailure, ScramServer, TokenLookup, mechanism_by_name
from ..sasl.settings import SASL_PROTOCOLS, ListenerSasl, listener_sasl

__all__ = ["AUTHENTICATE_MESSAGE", "HANDLERS", "SASL_AUTHENTICATE_KEY", "SASL_HANDSHAKE_KEY",
           "SaslState", "handle_sasl_authenticate", "handle_sasl_handshake", "sasl_state",
           "start"]

log = logging.getLogger("seglog.server.sasl")

#: Kafka's message with ILLEGAL_SASL_STATE on a SaslAuthenticate (KafkaApis).
AUTHENTICATE_MESSAGE = "SaslAuthenticate request received after successful authentication"

_ILLEGAL_SASL_STATE = ErrorCode(codes.ILLEGAL_SASL_STATE)
_NONE = ErrorCode(codes.NONE)
_ZERO = i64Timedelta.parse(datetime.timedelta(0))

#: The one SaslHandshake answer of each version on a listener without SASL.
_HANDSHAKE_RESPONSES: dict[int, HandshakeResponseV0 | HandshakeResponseV1] = {
    0: HandshakeResponseV0(error_code=_ILLEGAL_SASL_STATE, mechanisms=()),
    1: HandshakeResponseV1(error_code=_ILLEGAL_SASL_STATE, mechanisms=()),
}
_HANDSHAKE_CLASSES = {0: HandshakeResponseV0, 1: HandshakeResponseV1}
_AUTHENTICATE_CLASSES: dict[int, Any] = {0: AuthenticateResponseV0, 1: AuthenticateResponseV1,
                                         2: AuthenticateResponseV2}
#: The one SaslAuthenticate answer of each version on a listener without SASL.
_AUTHENTICATE_RESPONSES: dict[
    int, AuthenticateResponseV0 | AuthenticateResponseV1 | AuthenticateResponseV2] = {
    0: AuthenticateResponseV0(error_code=_ILLEGAL_SASL_STATE,
                              error_message=AUTHENTICATE_MESSAGE, auth_bytes=b""),
    1: AuthenticateResponseV1(error_code=_ILLEGAL_SASL_STATE,
                              error_message=AUTHENTICATE_MESSAGE, auth_bytes=b"",
                              session_lifetime=_ZERO),
    2: AuthenticateResponseV2(error_code=_ILLEGAL_SASL_STATE,
                              error_message=AUTHENTICATE_MESSAGE, auth_bytes=b"",
                              session_lifetime=_ZERO),
}


@dataclass(eq=False)
class SaslState:
    """A broker's SASL state: ``listeners`` (``{listener name: ListenerSasl}`` for each SASL
    listener), ``credentials`` (the SCRAM credential store) and ``token_lookup`` (delegation
    tokens' SCRAM credentials; None: tokens disabled)."""

    listeners: dict[str, ListenerSasl] = field(default_factory=dict)
    credentials: CredentialStore | None = None
    token_lookup: TokenLookup | None = None
    now_ms: Callable[[], int] = BrokerState.now_ms


def sasl_state(state: BrokerState) -> SaslState:
    """The broker's :class:`SaslState` (made by :func:`start`)."""
    found: SaslState = state.extensions[__name__]
    return found


def sasl_listener_names(config: Any) -> list[str]:
    """The listeners of ``config`` whose protocol is SASL_PLAINTEXT or SASL_SSL."""
    try:
        protocol_map = parse_protocol_map(config["listener.security.protocol.map"])
        endpoints = parse_endpoints(config["listeners"], protocol_map, config_name="listeners",
                                    distinct_ports=False)
    except Exception:  # noqa: BLE001 - checked (and refused) at construction already
        return []
    return [e.listener_name for e in endpoints if e.security_protocol in SASL_PROTOCOLS]


async def start(state: BrokerState) -> None:
    """Read each SASL listener's settings and open the SCRAM credential store (the data
    directory's file for a lone broker; a cluster member's seam provides ZooKeeper's).
    Raises InvalidConfigError / CorruptCredentialsError: the broker does not start."""
    sasl = SaslState()
    for name in sasl_listener_names(state.config):
        sasl.listeners[name] = listener_sasl(state.config, name)  # type: ignore[arg-type]
    # A cluster's seam keeps the credentials in ZooKeeper (Kafka's /config/users); a lone
    # broker's seam has none, and the data directory's file is used.
    provider = getattr(state.cluster, "scram_credential_store", None)
    if callable(provider):
        zk_store = provider()
        await zk_store.load()
        sasl.credentials = zk_store
    else:
        file_store = FileCredentialStore(state.store.path)
        await state.run_blocking(file_store.load)
        sasl.credentials = file_store
    state.extensions[__name__] = sasl


def _handshake(version: int, code: int, mechanisms: tuple[str, ...]) -> Any:
    return _HANDSHAKE_CLASSES[version](error_code=ErrorCode(code), mechanisms=mechanisms)


def _authenticate(version: int, *, code: int = codes.NONE, message: str | None = "",
                  auth_bytes: bytes = b"", lifetime_ms: int = 0) -> Any:
    cls = _AUTHENTICATE_CLASSES[version]
    values: dict[str, Any] = {"error_code": ErrorCode(code), "error_message": message,
                              "auth_bytes": auth_bytes}
    if version >= 1:
        values["session_lifetime"] = i64Timedelta.parse(
            datetime.timedelta(milliseconds=lifetime_ms))
    return cls(**values)


def _mechanism_server(sasl: SaslState, settings: ListenerSasl,
                      mechanism: str) -> PlainServer | ScramServer:
    if mechanism == "PLAIN":
        return PlainServer(settings.plain_users)
    scram = mechanism_by_name(mechanism)
    assert scram is not None and sasl.credentials is not None
    return ScramServer(scram, sasl.credentials.get, sasl.token_lookup)


async def _fail(ctx: RequestContext, settings: ListenerSasl, response: Any,
                reason: str) -> NoReturn:
    """Answer ``response`` after ``connection.failed.authentication.delay.ms``, then close
    (Kafka delays the close, and so the answer, of a failed authentication). Meanwhile the
    connection serves nothing more (its exchange is marked failed)."""
    session = ctx.security.authenticator
    if not isinstance(session, SaslSession):
        session = ctx.security.authenticator = SaslSession("", None)
    session.state = "failed"
    delay_ms = settings.failed_authentication_delay_ms
    if delay_ms > 0:
        await asyncio.sleep(delay_ms / 1000)
    raise CloseConnection(f"Failed authentication with {ctx.client_host} on listener "
                          f"{ctx.listener_name} with {session.mechanism or 'SASL'} ({reason})",
                          response=response)


async def handle_sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    """SaslHandshake v0-1 (see the module docstring)."""
    security = ctx.security
    if not security.uses_sasl:
        return _HANDSHAKE_RESPONSES[ctx.api_version]
    sasl = sasl_state(ctx.broker)
    settings = sasl.listeners[ctx.listener_name]
    mechanism = str(request.mechanism)
    previous = None
    if security.authenticated:
        session = security.authenticator
        last_reauth_ms = session.started_ms if isinstance(session, SaslSession) \
            and session.reauthenticating else None
        if security.session_expiry_ms is None or (
                last_reauth_ms is not None
                and sasl.now_ms() - last_reauth_ms < MIN_REAUTH_INTERVAL_MS):
            return _HANDSHAKE_RESPONSES[ctx.api_version]  # KafkaApis: not a re-authentication
        previous = security.principal
    if ctx.api_version == 0:
        await _fail(ctx, settings, _handshake(0, codes.UNSUPPORTED_VERSION, settings.mechanisms),
                    "SaslHandshake v0 (SASL tokens without Kafka request headers, clients "
                    "before Kafka 1.0) is not served; clients must use SaslHandshake v1")
    if mechanism not in settings.mechanisms:
        await _fail(ctx, settings,
                    _handshake(ctx.api_version, codes.UNSUPPORTED_SASL_MECHANISM,
                               settings.mechanisms),
                    f"Unsupported SASL mechanism {mechanism:.100}")
    if previous is not None and mechanism != security.sasl_mechanism:
        security.authenticator = SaslSession(
            mechanism, None, previous=previous,
            bad_mechanism_message=(f"SASL mechanism '{mechanism}' requested by client is not "
                                   "supported for re-authentication of mechanism "
                                   f"'{security.sasl_mechanism}'"))
    else:
        security.authenticator = SaslSession(
            mechanism, _mechanism_server(sasl, settings, mechanism), previous=previous)
    return _handshake(ctx.api_version, codes.NONE, settings.mechanisms)


async def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    """SaslAuthenticate v0-2 (see the module docstring)."""
    security = ctx.security
    session = security.authenticator
    if not security.uses_sasl or not isinstance(session, SaslSession) \
            or not session.in_progress:
        # The connection's check lets SaslAuthenticate through on a SASL listener only
        # during an exchange; anywhere else this is Kafka's KafkaApis answer.
        return _AUTHENTICATE_RESPONSES[ctx.api_version]
    sasl = sasl_state(ctx.broker)
    settings = sasl.listeners[ctx.listener_name]
    try:
        answer = session.evaluate(bytes(request.auth_bytes))
    except SaslAuthenticationError as exc:
        await _fail(ctx, settings, _authenticate(
            ctx.api_version, code=codes.SASL_AUTHENTICATION_FAILED, message=str(exc)),
            str(exc))
    except ScramFailure as exc:
        message = generic_failure_message(session.mechanism,
                                          reauthenticating=session.reauthenticating)
        await _fail(ctx, settings, _authenticate(
            ctx.api_version, code=codes.SASL_AUTHENTICATION_FAILED, message=message),
            f"{message}: {exc}")
    if not session.complete:
        return _authenticate(ctx.api_version, auth_bytes=answer)
    lifetime_ms = session.finish(security, settings.reauth_ms.get(session.mechanism, 0),
                                 sasl.now_ms)
    log.debug("connection %d from %s: authenticated as %s with %s", ctx.connection_id,
              ctx.client_host, security.principal, session.mechanism)
    return _authenticate(ctx.api_version, auth_bytes=answer, lifetime_ms=lifetime_ms)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(SASL_HANDSHAKE_KEY, 0, 1, handle_sasl_handshake),
    ApiHandler(SASL_AUTHENTICATE_KEY, 0, 2, handle_sasl_authenticate),
)
