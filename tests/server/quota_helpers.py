"""A raw Kafka client for the quota tests: kio requests over one socket, a client id of the
test's choosing, and the response with the time it took."""

from __future__ import annotations

import socket
import struct
import sys
from io import BytesIO
from typing import Any

from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

SOCKET_TIMEOUT_S = 30


class RawClient:
    """One connection; ``call(api_key, version, **fields)`` sends kio's request and returns
    kio's response; ``m(api_key, version)`` is the request module (nested classes)."""

    def __init__(self, bootstrap: str, client_id: str = "quota-test"):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)
        self.client_id = client_id
        self.correlation_id = 0

    @staticmethod
    def m(api_key: int, version: int) -> Any:
        return sys.modules[load_request_schema(api_key, version).__module__]

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        req_cls = load_request_schema(api_key, version)
        header_cls = req_cls.__header_schema__
        self.correlation_id += 1
        header = {"request_api_key": api_key, "request_api_version": version,
                  "correlation_id": self.correlation_id}
        if "client_id" in header_cls.__dataclass_fields__:
            header["client_id"] = self.client_id
        buf = BytesIO()
        entity_writer(header_cls)(buf, header_cls(**header))
        entity_writer(req_cls)(buf, req_cls(**fields))
        body = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        size, = struct.unpack(">i", self._read(4))
        data = self._read(size)
        resp_cls = load_response_schema(api_key, version)
        _, offset = entity_reader(resp_cls.__header_schema__)(data, 0)
        value, _ = entity_reader(resp_cls)(data, offset)
        return value

    def _read(self, count: int) -> bytes:
        out = b""
        while len(out) < count:
            chunk = self.sock.recv(count - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def alter_quotas(client: RawClient, entries, *, validate_only: bool = False,
                 version: int = 1) -> list[tuple[tuple, int, str | None]]:
    """AlterClientQuotas of ``entries`` (``[(entity pairs, {key: value or None})]``): the
    results as ``[(sorted entity pairs, error code, message)]``, sorted."""
    m = client.m(49, version)
    request_entries = tuple(
        m.EntryData(entity=tuple(m.EntityData(entity_type=t, entity_name=n) for t, n in pairs),
                    ops=tuple(m.OpData(key=k, value=0.0 if v is None else float(v),
                                       remove=v is None) for k, v in ops.items()))
        for pairs, ops in entries)
    r = client.call(49, version, entries=request_entries, validate_only=validate_only)
    return sorted(((tuple(sorted((e.entity_type, e.entity_name or "<default>")
                                 for e in entry.entity)),
                    int(entry.error_code), entry.error_message) for entry in r.entries),
                  key=repr)


def describe_quotas(client: RawClient, components=(), *, strict: bool = False,
                    version: int = 1):
    """DescribeClientQuotas: ``(error code, message, sorted [(entity, {key: value})])``."""
    m = client.m(48, version)
    r = client.call(48, version, strict=strict, components=tuple(
        m.ComponentData(entity_type=t, match_type=mt, match=match)
        for t, mt, match in components))
    entries = None if r.entries is None else sorted(
        ((tuple(sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity)),
          {v.key: float(v.value) for v in entry.values}) for entry in r.entries), key=repr)
    return int(r.error_code), r.error_message, entries
