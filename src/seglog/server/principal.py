"""Who sent a request: Kafka's ``KafkaPrincipal`` and the security facts of its connection.

Kafka names every client by a principal, ``<type>:<name>`` (``User:alice``): ``User:ANONYMOUS``
on a PLAINTEXT listener (and an SSL one without a client certificate), the SASL user name on a
SASL listener, the certificate's distinguished name mapped by ``ssl.principal.mapping.rules``
on an SSL listener with client authentication. Authorization (ACLs), quotas and logs key on it.

:class:`ConnectionSecurity` is what a connection knows of itself: the listener it came in on,
that listener's security protocol, its principal (changed once by a successful SASL
authentication or by the TLS handshake's client certificate) and the SASL mechanism used.
Every :class:`~seglog.server.context.RequestContext` carries the principal and listener of
the request's connection.

A leaf of the server; immutable values (ConnectionSecurity is mutated by its connection only,
on the event loop thread).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "ConnectionSecurity", "KafkaPrincipal", "USER_TYPE"]

#: Kafka's ``KafkaPrincipal.USER_TYPE``.
USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Kafka's principal: ``principal_type`` (``"User"``) and ``name``; ``str()`` is Kafka's
    ``User:alice`` form, :meth:`parse` reads it back. ``token_authenticated`` marks a
    principal that logged in with a delegation token (Kafka's ``tokenAuthenticated``: such a
    principal may not create or renew tokens)."""

    principal_type: str
    name: str
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """``"User:alice"`` -> KafkaPrincipal("User", "alice"), as Kafka's
        ``SecurityUtils.parseKafkaPrincipal``; ValueError without a ``:`` or with an empty
        type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"Expected a string in format principalType:principalName but "
                             f"got {text}")
        return cls(principal_type, name)

    def without_token(self) -> "KafkaPrincipal":
        """The same principal, with ``token_authenticated`` dropped (ACL matching ignores it)."""
        return KafkaPrincipal(self.principal_type, self.name) if self.token_authenticated \
            else self


#: Kafka's ``KafkaPrincipal.ANONYMOUS``: every client of a PLAINTEXT listener.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


@dataclass(eq=False, slots=True)
class ConnectionSecurity:
    """The security facts of one connection: ``listener_name`` (normalised, ``PLAINTEXT``),
    ``security_protocol`` (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``),
    ``principal``, ``authenticated`` (False on a SASL listener until SaslAuthenticate
    succeeded: only ApiVersions, SaslHandshake and SaslAuthenticate are served before),
    ``sasl_mechanism`` (the one chosen by SaslHandshake), ``session_expiry_ms`` (wall clock ms
    at which a SASL session must re-authenticate, ``connections.max.reauth.ms``; None: never)
    and ``authenticator``: the SASL exchange in progress (the SASL module's object; None
    outside one)."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    authenticated: bool = True
    sasl_mechanism: str | None = None
    session_expiry_ms: int | None = None
    authenticator: object | None = None

    @property
    def uses_sasl(self) -> bool:
        """Whether the listener authenticates with SASL."""
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_tls(self) -> bool:
        """Whether the listener speaks TLS."""
        return self.security_protocol in ("SSL", "SASL_SSL")
