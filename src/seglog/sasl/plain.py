"""SASL/PLAIN (RFC 4616) on the server side, as Kafka's ``PlainSaslServer``.

The client's one token is ``[authzid] NUL authcid NUL passwd``; the password is checked
against the listener's users (``user_<name>`` options of its ``PlainLoginModule``), in
constant time, and an unknown user fails with exactly the message of a wrong password.

Not thread-safe (one per connection, on the event loop).
"""

from __future__ import annotations

import hmac
from typing import Mapping

from ..errors import SaslAuthenticationError

__all__ = ["INVALID_CREDENTIALS_MESSAGE", "PlainServer"]

#: PlainSaslServer's message for an unknown user or a wrong password.
INVALID_CREDENTIALS_MESSAGE = "Authentication failed: Invalid username or password"
#: A password compared against an unknown user's, so that both take the same time.
_NO_PASSWORD = b"\x00" * 32


class PlainServer:
    """One PLAIN exchange against ``users`` (``{name: password}``); :meth:`evaluate` takes the
    client's token. ``complete`` and ``authorization_id`` (the user name) once it succeeded."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]):
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None
        #: When the credential expires (ms), None: never (a delegation token's; not PLAIN).
        self.credential_expiry_ms: int | None = None
        self.token_authenticated = False

    def evaluate(self, token: bytes) -> bytes:
        """Check the token; returns the (empty) answer. Raises SaslAuthenticationError with
        Kafka's message for a malformed token or bad credentials."""
        if self.complete:
            raise SaslAuthenticationError("Unexpected challenge in Sasl server state COMPLETE")
        text = bytes(token).decode("utf-8", errors="replace")
        parts = text.split("\x00", 3)
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        given = password.encode("utf-8")
        ok = hmac.compare_digest(given, expected.encode("utf-8") if expected is not None
                                 else _NO_PASSWORD) and expected is not None
        if not ok:
            raise SaslAuthenticationError(INVALID_CREDENTIALS_MESSAGE)
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


def client_token(username: str, password: str) -> bytes:
    """The PLAIN token a client sends (the broker's own inter-broker login)."""
    return b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")
