"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's ``ScramSaslServer``
and ``ScramFormatter``.

A credential is what the broker keeps of a password (:class:`ScramCredential`): a salt, the
iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and ``ServerKey =
HMAC(SaltedPassword, "Server Key")`` with ``SaltedPassword = PBKDF2-HMAC(password, salt,
iterations)``; Kafka writes it as ``salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>`` (``ScramCredentialUtils.credentialToString``), the form kept in the data
directory and in ZooKeeper's ``/config/users/<user>``.

The exchange (:class:`ScramServer`): client-first ``n,[a=authzid],n=<saslname>,r=<nonce>
[,ext=value...]``; the server answers ``r=<client nonce><server nonce>,s=<salt>,i=<n>``
(Kafka's nonce: a random 130-bit integer in base 36); client-final ``c=<b64 gs2 header>,
r=<nonce>,p=<proof>``; the server checks the proof and answers ``v=<server signature>``.
The ``tokenauth=true`` extension asks for a delegation token's credential instead (KIP-48).
Errors carry Kafka's messages; those Kafka hides from the client (a SaslException) are raised
as :class:`ScramFailure` and answered with Kafka's generic message by the authenticator.

:class:`ScramClient` is the client side, for the broker's own inter-broker connections.

Not thread-safe (one exchange per connection, on the event loop); the functions are pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Callable

from ..errors import SaslAuthenticationError, SeglogError

__all__ = ["MECHANISMS", "MAX_ITERATIONS", "ScramClient", "ScramCredential", "ScramFailure",
           "ScramMechanism", "ScramServer", "TokenCredential", "credential_from_password",
           "credential_from_salted_password", "mechanism_by_name", "mechanism_by_type"]


class ScramFailure(SeglogError):
    """A SCRAM failure whose detail Kafka keeps from the client (its ``SaslException``): the
    client is told only Kafka's generic message; the detail is logged."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM mechanism: Kafka's ``name``, the hash (``hash_name`` for hashlib), its
    KIP-554 ``type`` (1, 2) and ``min_iterations`` (4096 for both)."""

    name: str
    hash_name: str
    type: int
    min_iterations: int = 4096

    def hmac(self, key: bytes, message: bytes) -> bytes:
        """HMAC of ``message`` under ``key`` with this mechanism's hash."""
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        """H(data)."""
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i): PBKDF2 with this hash (RFC 5802 section 2.2)."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
#: The SCRAM mechanisms by name.
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
#: Kafka's ``ScramControlManager.MAX_ITERATIONS``.
MAX_ITERATIONS = 16384


def mechanism_by_name(name: str) -> ScramMechanism | None:
    """The SCRAM mechanism named ``name`` (``SCRAM-SHA-256``), None for another."""
    return MECHANISMS.get(name)


def mechanism_by_type(type_: int) -> ScramMechanism | None:
    """The SCRAM mechanism of KIP-554's ``type`` (1: SHA-256, 2: SHA-512), None for 0
    (UNKNOWN) or another."""
    return next((m for m in MECHANISMS.values() if m.type == type_), None)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps of a SCRAM password: ``salt``, ``stored_key``, ``server_key``,
    ``iterations``. :meth:`to_kafka` / :meth:`from_kafka` are Kafka's string form."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        """``salt=...,stored_key=...,server_key=...,iterations=...`` (Kafka's
        ``ScramCredentialUtils.credentialToString``)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka(cls, text: str) -> "ScramCredential":
        """Parse :meth:`to_kafka`'s form; ValueError when it does not parse."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError("Credentials not valid: SCRAM credential needs salt, stored_key, "
                             "server_key and iterations")
        try:
            iterations = int(fields["iterations"])
            decode = base64.b64decode
            return cls(decode(fields["salt"], validate=True),
                       decode(fields["stored_key"], validate=True),
                       decode(fields["server_key"], validate=True), iterations)
        except (ValueError, binascii.Error) as exc:
            raise ValueError(f"Credentials not valid: {exc}") from None


@dataclass(frozen=True, slots=True)
class TokenCredential:
    """A delegation token's SCRAM credential and what a login with it yields: the token's
    ``owner`` (the principal's name) and its ``expiry_ms``."""

    credential: ScramCredential
    owner: str
    expiry_ms: int


def credential_from_salted_password(mechanism: ScramMechanism, *, salt: bytes,
                                    salted_password: bytes, iterations: int
                                    ) -> ScramCredential:
    """The credential of a salted password (KIP-554's upsertion carries the salted password,
    not the password)."""
    client_key = mechanism.hmac(salted_password, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key),
                           mechanism.hmac(salted_password, b"Server Key"), iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, iterations: int,
                             salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (Kafka's ``ScramFormatter.generateCredential``: a
    random salt, the 130-bit base-36 string's bytes, unless ``salt`` is given)."""
    salt = salt if salt is not None else _random_string().encode("ascii")
    return credential_from_salted_password(
        mechanism, salt=salt, salted_password=mechanism.salted_password(password, salt,
                                                                        iterations),
        iterations=iterations)


def _random_string() -> str:
    """Kafka's ``secureRandomString``: ``new BigInteger(130, random).toString(36)``."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while True:
        value, digit = divmod(value, 36)
        out.append(digits[digit])
        if value == 0:
            return "".join(reversed(out))


# Kafka's ScramMessages patterns (Java's [\x01-\x7F&&[^,]] is written out here).
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE})(?:{_EXTENSIONS})),"
    rf"p=(?P<proof>{_B64})")
_SERVER_FIRST = re.compile(rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),"
                           rf"i=(?P<iterations>[0-9]+)(?:{_EXTENSIONS})")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE}))|(?:v=(?P<signature>{_B64}))(?:{_EXTENSIONS})")
#: A bound on one SCRAM message (characters): far above any real one.
MESSAGE_CHARS_MAX = 64 * 1024


def username_of(saslname: str) -> str:
    """Kafka's ``ScramFormatter.username``: ``=2C`` -> ``,``, ``=3D`` -> ``=``; ScramFailure
    for any other ``=``."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ScramFailure(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


def saslname_of(username: str) -> str:
    """The inverse of :func:`username_of`."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _text(message: bytes) -> str:
    if len(message) > MESSAGE_CHARS_MAX:
        raise ScramFailure("SCRAM message too long")
    return bytes(message).decode("utf-8", errors="replace")


#: ``lookup(user, mechanism)``: the user's credential, None when there is none.
CredentialLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]
#: ``lookup(token_id, mechanism)``: a delegation token's credential, None when unknown.
TokenLookup = Callable[[str, ScramMechanism], "TokenCredential | None"]


class ScramServer:
    """One SCRAM exchange of ``mechanism`` on the server side, as Kafka's ``ScramSaslServer``:
    :meth:`evaluate` takes each client message and returns the answer. ``lookup`` finds a
    user's credential, ``token_lookup`` a delegation token's (None: tokens disabled).
    ``complete``, ``authorization_id``, ``token_authenticated`` and ``credential_expiry_ms``
    once it succeeded. Raises :class:`ScramFailure` (detail hidden from the client) or
    SaslAuthenticationError (Kafka's message shown)."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup,
                 token_lookup: TokenLookup | None = None):
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._state = "client-first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.complete = False
        self.authorization_id: str | None = None
        self.token_authenticated = False
        self.credential_expiry_ms: int | None = None

    def evaluate(self, message: bytes) -> bytes:
        """The answer to the client's next message (see the class docstring)."""
        try:
            if self._state == "client-first":
                return self._client_first(_text(message))
            if self._state == "client-final":
                return self._client_final(_text(message))
            raise ScramFailure(f"Unexpected challenge in Sasl server state {self._state}")
        except (ScramFailure, SaslAuthenticationError):
            self._state = "failed"
            self._credential = None
            raise

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise ScramFailure(f"Invalid SCRAM client first message format: {text:.200}")
        username = username_of(match["saslname"])
        extensions = dict(part.split("=", 1) for part in match["extensions"].split(",")
                          if part)
        if extensions.get("tokenauth", "").lower() == "true":
            token = self._token_lookup(username, self.mechanism) \
                if self._token_lookup is not None else None
            if token is None:
                raise ScramFailure(f"Token Authentication failed: Invalid tokenId : {username}")
            credential: ScramCredential | None = token.credential
            self.authorization_id = token.owner
            self.credential_expiry_ms = token.expiry_ms
            self.token_authenticated = True
        else:
            credential = self._lookup(username, self.mechanism)
            self.authorization_id = username
        if credential is None:
            raise ScramFailure("Authentication failed: Invalid user credentials")
        authzid = match["authzid"]
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise ScramFailure(f"Iterations {credential.iterations} is less than the minimum "
                               f"{self.mechanism.min_iterations} for {self.mechanism.name}")
        self._credential = credential
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + _random_string()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "client-final"
        return self._server_first.encode("utf-8")

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise ScramFailure(f"Invalid SCRAM client final message format: {text:.200}")
        if not match["nonce"].endswith(self._nonce):
            # Kafka checks endsWith, not equality: librdkafka before 1.x (kcat here) sends
            # its own nonce again in front of the combined one, and Kafka accepts it.
            raise ScramFailure("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 match["without_proof"])).encode("utf-8")
        proof = base64.b64decode(match["proof"])
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise ScramFailure("Invalid client credentials")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one SCRAM exchange (the broker's inter-broker login): :meth:`first`
    then :meth:`final` with the server's first message, then :meth:`verify` with its final
    one. ``extensions`` go in the first message (``tokenauth=true``). Raises
    SaslAuthenticationError when the server's messages are malformed or its signature is
    wrong."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str,
                 extensions: dict[str, str] | None = None):
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._nonce = _random_string()
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._first_bare = f"n={saslname_of(username)},r={self._nonce}{ext}"
        self._auth_message = b""
        self._server_key = b""

    def first(self) -> bytes:
        """The client-first message."""
        return b"n,," + self._first_bare.encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        """The client-final message answering ``server_first``."""
        text = _text(server_first)
        match = _SERVER_FIRST.fullmatch(text)
        if match is None or not match["nonce"].startswith(self._nonce):
            raise SaslAuthenticationError(f"Invalid SCRAM server first message: {text:.200}")
        iterations = int(match["iterations"])
        if iterations < self.mechanism.min_iterations:
            raise SaslAuthenticationError(f"Invalid SCRAM server first message: iterations "
                                          f"{iterations} below the minimum")
        salt = base64.b64decode(match["salt"])
        salted = self.mechanism.salted_password(self._password, salt, iterations)
        without_proof = f"c=biws,r={match['nonce']}"
        self._auth_message = ",".join((self._first_bare, text, without_proof)).encode("utf-8")
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_key = self.mechanism.hmac(salted, b"Server Key")
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode("utf-8")

    def verify(self, server_final: bytes) -> None:
        """Check the server's signature."""
        text = _text(server_final)
        match = _SERVER_FINAL.fullmatch(text)
        if match is None or match["signature"] is None:
            raise SaslAuthenticationError(f"SCRAM authentication failed: {text:.200}")
        expected = self.mechanism.hmac(self._server_key, self._auth_message)
        if not hmac.compare_digest(base64.b64decode(match["signature"]), expected):
            raise SaslAuthenticationError("Invalid server signature in SCRAM server final "
                                          "message")
