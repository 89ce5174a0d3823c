"""One connection's SASL exchange, as Kafka's ``SaslServerAuthenticator`` runs it.

A connection on a SASL listener starts unauthenticated (``ConnectionSecurity.authenticated``
False). Kafka's order, enforced by :func:`check_request` (the one check the connection makes
before it dispatches a request):

1. ApiVersions (any number) and one SaslHandshake, whose mechanism must be enabled (else
   UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes);
2. SaslAuthenticate requests carrying the mechanism's tokens until the exchange completes
   (the principal becomes ``User:<name>``) or fails (SASL_AUTHENTICATION_FAILED with Kafka's
   message, answered after ``connection.failed.authentication.delay.ms``, then the connection
   closes);
3. any request. With ``connections.max.reauth.ms`` the session expires: SaslAuthenticate
   v1+ tells the client its lifetime, a client re-authenticates on the same connection with
   the same mechanism and principal (KIP-368), and a request other than SaslHandshake after
   the expiry closes the connection.

Any other request before authentication completes closes the connection unanswered (Kafka's
``IllegalSaslStateException``: "Unexpected Kafka request of type ... during SASL
handshake"). Until then a request frame may not exceed ``sasl.server.max.receive.size``
(:func:`request_bytes_max`).

SaslHandshake v0 announces raw SASL tokens without Kafka headers (clients before Kafka 1.0);
no client here sends it (confluent-kafka, kafka-python, aiokafka and Kafka's own all use v1
and SaslAuthenticate), and seglog refuses it clearly (see :mod:`seglog.server.apis.sasl`).

Runs on the event loop thread only.
"""

from __future__ import annotations

import time
from typing import Callable

from ...errors import IllegalSaslStateError, SaslAuthenticationError
from ..principal import USER_TYPE, ConnectionSecurity, KafkaPrincipal
from ...sasl.plain import PlainServer
from ...sasl.scram import ScramFailure, ScramServer

__all__ = ["API_VERSIONS_KEY", "MIN_REAUTH_INTERVAL_MS", "SASL_AUTHENTICATE_KEY",
           "SASL_HANDSHAKE_KEY", "SaslSession", "check_request", "generic_failure_message",
           "request_bytes_max"]

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
#: Kafka's ``MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS``: a SaslHandshake sooner after the last
#: authentication is not a re-authentication (it is answered ILLEGAL_SASL_STATE).
MIN_REAUTH_INTERVAL_MS = 1000

#: The mechanism's server: PlainServer or ScramServer (``evaluate``, ``complete``,
#: ``authorization_id``, ``token_authenticated``, ``credential_expiry_ms``).
MechanismServer = PlainServer | ScramServer


def generic_failure_message(mechanism: str, *, reauthenticating: bool) -> str:
    """Kafka's message for a failure whose detail it hides (a ``SaslException``: the user may
    not exist)."""
    what = "re-authentication" if reauthenticating else "authentication"
    return (f"Authentication failed during {what} due to invalid credentials with SASL "
            f"mechanism {mechanism}")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SaslSession:
    """One SASL exchange on a connection (kept in ``ConnectionSecurity.authenticator``):
    ``mechanism``, the mechanism's ``server`` (None when a re-authentication asked for
    another mechanism: ``bad_mechanism_message`` then), ``previous`` (the principal of the
    session being re-authenticated, or None) and ``state``: ``authenticate`` (tokens
    expected), ``complete`` or ``failed``. ``completed_ms`` is when it completed."""

    def __init__(self, mechanism: str, server: MechanismServer | None, *,
                 previous: KafkaPrincipal | None = None,
                 bad_mechanism_message: str | None = None):
        self.mechanism = mechanism
        self.server = server
        self.previous = previous
        self.bad_mechanism_message = bad_mechanism_message
        self.state = "authenticate"
        self.completed_ms: int | None = None

    @property
    def in_progress(self) -> bool:
        """Whether tokens are expected (SaslAuthenticate is the only request served)."""
        return self.state == "authenticate"

    @property
    def reauthenticating(self) -> bool:
        """Whether this exchange re-authenticates an authenticated connection."""
        return self.previous is not None

    def evaluate(self, token: bytes) -> bytes:
        """The mechanism's answer to ``token``. Raises SaslAuthenticationError (message for
        the client) or ScramFailure (detail for the log only); the session is ``failed``
        then."""
        try:
            if self.server is None:
                raise SaslAuthenticationError(self.bad_mechanism_message or "no mechanism")
            answer = self.server.evaluate(token)
            if self.server.complete and self.previous is not None:
                principal = self.principal()
                if principal.without_token() != self.previous.without_token():
                    raise SaslAuthenticationError(
                        "Cannot change principals during re-authentication from "
                        f"{self.previous.principal_type}.{self.previous.name}: "
                        f"{principal.principal_type}.{principal.name}")
        except (SaslAuthenticationError, ScramFailure):
            self.state = "failed"
            raise
        return answer

    @property
    def complete(self) -> bool:
        """Whether the mechanism's exchange succeeded."""
        return self.server is not None and self.server.complete

    def principal(self) -> KafkaPrincipal:
        """``User:<authorization id>`` of a completed exchange."""
        assert self.server is not None and self.server.authorization_id is not None
        return KafkaPrincipal(USER_TYPE, self.server.authorization_id,
                              token_authenticated=self.server.token_authenticated)

    def finish(self, security: ConnectionSecurity, reauth_ms: int,
               now_ms: Callable[[], int] = _now_ms) -> int:
        """Mark ``security`` authenticated as this exchange's principal; returns the session
        lifetime in ms to tell the client (Kafka's ``calcCompletionTimesAndReturnSession
        LifetimeMs``: ``connections.max.reauth.ms`` and the credential's expiry, the sooner;
        0 when neither applies, and the session never expires)."""
        assert self.server is not None
        now = now_ms()
        expiry = self.server.credential_expiry_ms
        lifetime_ms = 0
        if expiry is not None or reauth_ms > 0:
            if expiry is None:
                lifetime_ms = max(0, reauth_ms)
            elif reauth_ms <= 0:
                lifetime_ms = max(0, expiry - now)
            else:
                lifetime_ms = max(0, min(expiry - now, reauth_ms))
            security.session_expiry_ms = now + lifetime_ms
        else:
            security.session_expiry_ms = None
        security.principal = self.principal()
        security.sasl_mechanism = self.mechanism
        security.authenticated = True
        self.state = "complete"
        self.completed_ms = now
        return lifetime_ms


def check_request(security: ConnectionSecurity, api_key: int,
                  now_ms: Callable[[], int] = _now_ms) -> None:
    """Whether the connection may serve a request of ``api_key`` now (see the module
    docstring); raises IllegalSaslStateError with Kafka's message when it must close
    instead. Does nothing on a listener without SASL."""
    if not security.uses_sasl:
        return
    session = security.authenticator
    if isinstance(session, SaslSession) and session.state == "failed":
        raise IllegalSaslStateError("request after a failed SASL authentication")
    if isinstance(session, SaslSession) and session.in_progress:
        if api_key != SASL_AUTHENTICATE_KEY:
            raise IllegalSaslStateError(f"Unexpected Kafka request of type {_name(api_key)} "
                                        "during SASL authentication.")
        return
    if not security.authenticated:
        if api_key not in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY):
            raise IllegalSaslStateError(f"Unexpected Kafka request of type {_name(api_key)} "
                                        "during SASL handshake.")
        return
    expiry = security.session_expiry_ms
    if expiry is not None and now_ms() > expiry and api_key != SASL_HANDSHAKE_KEY:
        raise IllegalSaslStateError(f"SASL session of {security.principal} expired (after "
                                    "connections.max.reauth.ms or its token's expiry) and "
                                    "was not re-authenticated")


def request_bytes_max(security: ConnectionSecurity, *, authenticated_max: int,
                      unauthenticated_max: int) -> int:
    """The largest request frame the connection may read now: ``sasl.server.max.receive
    .size`` (``unauthenticated_max``) until its first authentication completes, then
    ``socket.request.max.bytes`` (``authenticated_max``)."""
    if security.uses_sasl and not security.authenticated:
        return min(authenticated_max, unauthenticated_max)
    return authenticated_max


def _name(api_key: int) -> str:
    """Kafka's ``ApiKeys`` name of ``api_key`` (``PRODUCE``)."""
    from kio.schema.index import api_key_map

    snake = api_key_map.get(api_key)
    return snake.upper() if snake else f"UNKNOWN({api_key})"
