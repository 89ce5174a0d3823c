"""A short fuzz of the client quota API bodies (DescribeClientQuotas, AlterClientQuotas, both
versions) sent to a running broker: mutated request bodies from valid seeds. Each must be
answered (Kafka's error codes) or close that connection; the broker stays up and serves
another client after every case, and the quota table holds only entities Kafka's validation
lets through."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from io import BytesIO

import pytest
from seglog.schemas import load_request_schema
from kio.serial import entity_writer

from seglog.server import quotas as q
from seglog.server.broker import Broker

from . import mutate

pytestmark = pytest.mark.fuzz

CASES = 300
TIME_S_MAX = 60.0
SOCKET_TIMEOUT_S = 10.0


def _body(api_key: int, version: int, **fields) -> bytes:
    cls = load_request_schema(api_key, version)
    buf = BytesIO()
    entity_writer(cls)(buf, cls(**fields))
    return buf.getvalue()


def _seeds() -> list[tuple[int, int, bytes]]:
    seeds = []
    for version in (0, 1):
        a = __import__(load_request_schema(49, version).__module__, fromlist=["x"])
        d = __import__(load_request_schema(48, version).__module__, fromlist=["x"])
        seeds.append((49, version, _body(49, version, validate_only=False, entries=(
            a.EntryData(entity=(a.EntityData(entity_type="user", entity_name="u"),
                                a.EntityData(entity_type="client-id", entity_name=None)),
                        ops=(a.OpData(key="producer_byte_rate", value=1024.0, remove=False),
                             a.OpData(key="request_percentage", value=0.0, remove=True))),
            a.EntryData(entity=(a.EntityData(entity_type="ip", entity_name="10.1.2.3"),),
                        ops=(a.OpData(key="connection_creation_rate", value=5.0,
                                      remove=False),))))))
        seeds.append((48, version, _body(48, version, strict=True, components=(
            d.ComponentData(entity_type="user", match_type=0, match="u"),
            d.ComponentData(entity_type="client-id", match_type=1, match=None)))))
    return seeds


def _frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz"
    if version >= 1:  # both APIs are flexible from v1: header v2 has tagged fields
        header += b"\x00"
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def _exchange(port: int, frame: bytes) -> bytes | None:
    """The reply to ``frame`` on a new connection, None when the broker closed it."""
    try:
        return _exchange_once(port, frame)
    except (ConnectionResetError, BrokenPipeError):
        return None


def _exchange_once(port: int, frame: bytes) -> bytes | None:
    with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(frame)
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        (size,) = struct.unpack(">i", head)
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data


async def _drop_ip_quotas(state) -> None:
    table = q.quotas_of(state)
    for entity in [e for e in table.entities if e and e[0][0] == q.IP]:
        table.set_entity(entity, {})


def test_quota_api_bodies_fuzz(tmp_path, fuzz_seed):
    rng = random.Random(fuzz_seed)
    seeds = _seeds()
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0))
    broker.start()
    try:
        deadline = time.monotonic() + TIME_S_MAX
        answered = 0
        for case in range(CASES):
            if time.monotonic() > deadline:
                break
            api_key, version, body = rng.choice(seeds)
            data, what = mutate.mutate(rng, body)
            reply = _exchange(broker.port, _frame(api_key, version, case, data))
            if reply is not None:
                answered += 1
                assert struct.unpack_from(">i", reply)[0] == case, (case, what)
            # An IP quota the case set (a mutated entity may name 127.0.0.1 or every IP)
            # would throttle the check below: dropped, on the broker's loop.
            if q.quotas_of(broker.state).ip_rates:
                asyncio.run_coroutine_threadsafe(_drop_ip_quotas(broker.state),
                                                 broker.loop).result(SOCKET_TIMEOUT_S)
            # The broker serves another client after every case.
            alive = _exchange(broker.port, struct.pack(">i", 14) +
                              struct.pack(">hhih", 18, 0, 1_000_000 + case, 4) + b"fuzz")
            assert alive is not None, (case, what)
        assert answered > 0
        for entity, values in q.quotas_of(broker.state).entities.items():
            types = {t for t, _ in entity}
            assert types and types <= {q.USER, q.CLIENT_ID, q.IP}, entity
            assert all(name is None or name for _, name in entity), entity
            allowed = q.IP_QUOTA_TYPES if q.IP in types else q.USER_CLIENT_QUOTA_TYPES
            assert set(values) <= set(allowed), (entity, values)
            assert all(not v <= 0 for v in values.values()), (entity, values)
    finally:
        broker.stop()
