"""Helpers of the SASL tests: a broker config with a SASL_PLAINTEXT listener, and a raw
client that speaks SaslHandshake / SaslAuthenticate with kio over a socket (the same bytes to
seglog and to Kafka 4.4)."""

from __future__ import annotations

import socket
import struct
import sys
from io import BytesIO

from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from seglog.sasl.plain import client_token
from seglog.sasl.scram import MECHANISMS, ScramClient

SOCKET_TIMEOUT_S = 15
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')
ALL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def sasl_properties(listener: str = "SASL_PLAINTEXT", mechanisms=ALL_MECHANISMS,
                    plain_jaas: str = PLAIN_JAAS) -> dict[str, str]:
    """Kafka's settings of a SASL listener named ``listener`` (not ``listeners`` itself)."""
    prefix = f"listener.name.{listener.lower()}"
    props = {"sasl.enabled.mechanisms": ",".join(mechanisms)}
    for mechanism in mechanisms:
        props[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = (
            plain_jaas if mechanism == "PLAIN" else SCRAM_JAAS)
    return props


def sasl_broker_config(**extra) -> dict[str, str]:
    """A seglog broker with one SASL_PLAINTEXT listener and every mechanism."""
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN", **sasl_properties(), **extra}


class RawClient:
    """One connection: ``call(api_key, version, **fields)`` sends kio's request and returns
    kio's response, or None when the broker closed the connection instead."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    @staticmethod
    def m(api_key, version):
        return sys.modules[load_request_schema(api_key, version).__module__]

    def send(self, api_key, version, **fields) -> None:
        req_cls = load_request_schema(api_key, version)
        header_cls = req_cls.__header_schema__
        self.correlation_id += 1
        header = {"request_api_key": api_key, "request_api_version": version,
                  "correlation_id": self.correlation_id}
        if "client_id" in header_cls.__dataclass_fields__:
            header["client_id"] = "sasl-test"
        buf = BytesIO()
        entity_writer(header_cls)(buf, header_cls(**header))
        entity_writer(req_cls)(buf, req_cls(**fields))
        body = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def receive(self, api_key, version):
        head = self._read(4)
        if head is None:
            return None
        size, = struct.unpack(">i", head)
        data = self._read(size)
        if data is None:
            return None
        resp_cls = load_response_schema(api_key, version)
        _, offset = entity_reader(resp_cls.__header_schema__)(data, 0)
        value, _ = entity_reader(resp_cls)(data, offset)
        return value

    def call(self, api_key, version, **fields):
        try:
            self.send(api_key, version, **fields)
        except OSError:
            return None
        return self.receive(api_key, version)

    def error_code(self, api_key, version, **fields) -> int | None:
        """Send a request and return only the error code at the start of its response body
        (kio's reader refuses the -1 timestamps Kafka's error answers carry)."""
        self.send(api_key, version, **fields)
        head = self._read(4)
        if head is None:
            return None
        data = self._read(struct.unpack(">i", head)[0])
        resp_cls = load_response_schema(api_key, version)
        _, offset = entity_reader(resp_cls.__header_schema__)(data, 0)
        return struct.unpack_from(">h", data, offset)[0]

    def is_closed(self) -> bool:
        """Whether the broker closed the connection (reads EOF within the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def _read(self, count):
        chunks = []
        while count:
            try:
                chunk = self.sock.recv(count)
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    # --- SASL ------------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int = 1):
        return self.call(17, version, mechanism=mechanism)

    def authenticate(self, token: bytes, version: int = 2):
        return self.call(36, version, auth_bytes=token)

    def login(self, mechanism: str, user: str, password: str, version: int = 2):
        """Handshake then the mechanism's exchange; returns the list of SaslAuthenticate
        responses (the last one failed, or completed the login), or the handshake's
        response when it failed; None entries when the connection was closed."""
        handshake = self.handshake(mechanism)
        if handshake is None or handshake.error_code != 0:
            return [handshake]
        if mechanism == "PLAIN":
            return [self.authenticate(client_token(user, password), version)]
        client = ScramClient(MECHANISMS[mechanism], user, password)
        first = self.authenticate(client.first(), version)
        if first is None or first.error_code != 0:
            return [first]
        final = self.authenticate(client.final(first.auth_bytes), version)
        if final is not None and final.error_code == 0:
            client.verify(final.auth_bytes)
        return [first, final]


def scram_upsertion(module, user: str, mechanism_type: int, password: str,
                    iterations: int = 4096, salt: bytes = b"salt-0123456789"):
    """A KIP-554 upsertion as clients build it (the salted password)."""
    from seglog.sasl.scram import mechanism_by_type

    mechanism = mechanism_by_type(mechanism_type)
    hash_name = mechanism.hash_name if mechanism is not None else "sha256"
    import hashlib
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, max(iterations, 1))
    return module.ScramCredentialUpsertion(name=user, mechanism=mechanism_type,
                                           iterations=iterations, salt=salt,
                                           salted_password=salted)
