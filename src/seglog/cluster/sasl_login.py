"""The broker's own SASL login on its inter-broker connections (a follower's fetches, the
transaction coordinator's markers), as Kafka's inter-broker clients log in.

When ``inter.broker.listener.name`` names a SASL_PLAINTEXT (or SASL_SSL) listener, every
connection a broker opens to another broker first logs in with
``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and the
``username``/``password`` of that listener's JAAS config for the mechanism
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``), as Kafka does:
SaslHandshake v1, then SaslAuthenticate v2 carrying the mechanism's tokens
(:mod:`seglog.sasl`). The server side checks the login like any client's; a SCRAM login needs
the broker's user to have credentials (``kafka-configs --alter --add-config
'SCRAM-SHA-256=[password=...]' --entity-type users --entity-name <broker user>``, as in
Kafka).

The two requests are framed and their responses decoded here, by hand and bounds-checked
(SaslHandshake has no flexible version, unlike the requests of :mod:`.inter_broker`).

Re-authentication (KIP-368) is not done by this client: when the receiving broker sets
``connections.max.reauth.ms``, the connection is closed at its first request after the
session's lifetime, and the fetcher (or marker sender) connects and logs in again.

Runs on the event loop; one login per connection, before its first request.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, Mapping, NamedTuple

from ..errors import SaslAuthenticationError
from ..sasl.jaas import single_login_module
from ..sasl.plain import client_token
from ..sasl.scram import ScramClient, mechanism_by_name

__all__ = ["RESPONSE_BYTES_MAX", "SaslLogin", "authenticate", "inter_broker_login"]

_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_SASL_HANDSHAKE_KEY = 17
_SASL_AUTHENTICATE_KEY = 36
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
#: The largest login response frame read (Kafka's answers are a few hundred bytes).
RESPONSE_BYTES_MAX = 64 * 1024


class SaslLogin(NamedTuple):
    """The broker's inter-broker login: ``mechanism``, ``username``, ``password``."""

    mechanism: str
    username: str
    password: str


def inter_broker_login(config: Mapping[str, Any]) -> SaslLogin | None:
    """The login of a broker whose inter-broker listener uses SASL (None otherwise), from its
    config (a :class:`~seglog.server.config.BrokerConfig`: its ``listener_value`` finds the
    listener-prefixed JAAS config). The server checked these settings at start."""
    listener = str(config["inter.broker.listener.name"] or "PLAINTEXT").strip().upper()
    protocols = {name: name for name in ("PLAINTEXT", "SSL", *_SASL_PROTOCOLS)}
    for entry in str(config["listener.security.protocol.map"] or "").split(","):
        name, _, protocol = entry.strip().rpartition(":")
        if name:
            protocols[name.strip().upper()] = protocol.strip().upper()
    if protocols.get(listener) not in _SASL_PROTOCOLS:
        return None
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
    listener_value = getattr(config, "listener_value")
    module = single_login_module(
        str(listener_value(listener, "sasl.jaas.config", mechanism=mechanism)),
        config_name=f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config")
    return SaslLogin(mechanism, module.username or "", module.password or "")


class _Response:
    """A bounds-checked cursor over a response body."""

    def __init__(self, frame: bytes):
        self.frame = frame
        self.pos = 0

    def take(self, count: int) -> bytes:
        if count < 0 or self.pos + count > len(self.frame):
            raise SaslAuthenticationError("malformed SASL response from the broker")
        start, self.pos = self.pos, self.pos + count
        return self.frame[start:self.pos]

    def int16(self) -> int:
        value: int = _INT16.unpack(self.take(2))[0]
        return value

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise SaslAuthenticationError("malformed SASL response from the broker")


def _frame(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes, *,
           flexible: bool) -> bytes:
    raw_client = client_id.encode("utf-8")
    header = _HEAD.pack(api_key, version, correlation_id) + _INT16.pack(len(raw_client)) \
        + raw_client + (b"\x00" if flexible else b"")
    return _SIZE.pack(len(header) + len(body)) + header + body


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


async def _round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      frame: bytes, correlation_id: int, *, flexible: bool) -> _Response:
    writer.write(frame)
    await writer.drain()
    (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
    if size < 4 or size > RESPONSE_BYTES_MAX:
        raise SaslAuthenticationError(f"SASL response frame of {size} bytes")
    response = _Response(await reader.readexactly(size))
    if struct.unpack(">i", response.take(4))[0] != correlation_id:
        raise SaslAuthenticationError("SASL response with a wrong correlation id")
    if flexible:
        for _ in range(response.uvarint()):  # response header v1's tagged fields
            response.uvarint()
            response.take(response.uvarint())
    return response


async def authenticate(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       login: SaslLogin, *, client_id: str) -> None:
    """Log in on a fresh connection (see the module docstring). Raises
    SaslAuthenticationError with the broker's message when the login is refused; OSError /
    IncompleteReadError when the connection breaks (the caller bounds the time)."""
    mechanism = login.mechanism
    name = mechanism.encode("utf-8")
    handshake = await _round_trip(reader, writer, _frame(
        _SASL_HANDSHAKE_KEY, 1, 1, client_id, _INT16.pack(len(name)) + name, flexible=False),
        1, flexible=False)
    code = handshake.int16()
    if code != 0:
        raise SaslAuthenticationError(f"SaslHandshake for {mechanism} refused with error "
                                      f"code {code}")
    scram = mechanism_by_name(mechanism)
    client = ScramClient(scram, login.username, login.password) if scram is not None else None
    token = client.first() if client is not None else client_token(login.username,
                                                                    login.password)
    correlation_id = 1
    for _ in range(3):  # PLAIN: one token; SCRAM: two
        correlation_id += 1
        body = _uvarint(len(token) + 1) + token + b"\x00"  # compact bytes, no tagged fields
        answer = await _round_trip(reader, writer, _frame(
            _SASL_AUTHENTICATE_KEY, 2, correlation_id, client_id, body, flexible=True),
            correlation_id, flexible=True)
        code = answer.int16()
        message_length = answer.uvarint() - 1
        message = answer.take(message_length).decode("utf-8", "replace") \
            if message_length >= 0 else ""
        auth_bytes = answer.take(answer.uvarint() - 1)
        answer.take(_INT64.size)  # session_lifetime_ms: re-authentication is not done here
        if code != 0:
            raise SaslAuthenticationError(f"inter-broker SASL login as {login.username!r} "
                                          f"with {mechanism} failed: {message}")
        if client is None:
            return
        if token.startswith(b"n,"):
            token = client.final(auth_bytes)
        else:
            client.verify(auth_bytes)
            return
    raise SaslAuthenticationError("SASL exchange did not complete")
