"""CreateAcls, DescribeAcls and DeleteAcls bodies, mutated, against a broker with the
authorizer on (``User:ANONYMOUS`` a super user, so each body reaches the ACL code): every frame
is answered with its correlation id or closes its connection, no handler raises an unexpected
exception (logged), the broker keeps serving, and the ACL file it saved reads back.

Short: 1,500 bodies (seconds); long: 60,000."""

from __future__ import annotations

import io
import logging
import random
import socket
import struct

import pytest
from seglog.schemas import load_request_schema
from kio.serial import entity_writer

from seglog.security.acl_file import load_acls
from seglog.server.broker import Broker

from .mutate import mutate

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SOCKET_TIMEOUT_S = 10
#: Frames sent on one connection before a fresh one (a closed connection starts one early).
FRAMES_PER_CONNECTION = 50


def _seed_bodies() -> list[tuple[int, int, bytes]]:
    """Valid bodies of the three APIs at every version served: ``(key, version, body)``."""
    seeds = []
    for version in (1, 2, 3):
        for key, fields in (
                (30, lambda m: dict(creations=tuple(m.AclCreation(
                    resource_type=rt, resource_name=name, resource_pattern_type=pt,
                    principal="User:alice", host="*", operation=op, permission_type=perm)
                    for rt, name, pt, op, perm in ((2, "t", 3, 3, 3), (3, "g-", 4, 2, 2),
                                                   (4, "kafka-cluster", 3, 7, 3))))),
                (29, lambda m: dict(resource_type_filter=1, resource_name_filter=None,
                                    pattern_type_filter=2, principal_filter="User:alice",
                                    host_filter=None, operation=1, permission_type=1)),
                (31, lambda m: dict(filters=(m.DeleteAclsFilter(
                    resource_type_filter=2, resource_name_filter="t", pattern_type_filter=1,
                    principal_filter=None, host_filter="*", operation=1,
                    permission_type=1),)))):
            cls = load_request_schema(key, version)
            module = __import__(cls.__module__, fromlist=["_"])
            out = io.BytesIO()
            entity_writer(cls)(out, cls(**fields(module)))
            seeds.append((key, version, out.getvalue()))
    return seeds


def _frame(key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", key, version, correlation_id, 4) + b"fuzz"
    if load_request_schema(key, version).__flexible__:
        header += b"\x00"
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def _read_frame(sock: socket.socket) -> bytes | None:
    def exactly(count: int) -> bytes | None:
        chunks = []
        while count:
            try:
                chunk = sock.recv(count)
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    head = exactly(4)
    return None if head is None else exactly(struct.unpack(">i", head)[0])


def _in_acl_code(tb) -> bool:
    """Whether a traceback passes through the ACL handlers or the security package."""
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if path.endswith(("apis/acls.py", "server/authorization.py")) or "/security/" in path:
            return True
        tb = tb.tb_next
    return False


def _campaign(tmp_path, seed: int, total: int, caplog) -> None:
    rng = random.Random(seed)
    seeds = _seed_bodies()
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0), config={
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"})
    broker.start()
    caplog.set_level(logging.ERROR, logger="seglog")
    closed = answered = 0
    try:
        sent = 0
        while sent < total:
            sock = socket.create_connection(("127.0.0.1", broker.port),
                                            timeout=SOCKET_TIMEOUT_S)
            try:
                for _ in range(FRAMES_PER_CONNECTION):
                    if sent >= total:
                        break
                    key, version, body = rng.choice(seeds)
                    body = mutate(rng, body)[0] if rng.random() < 0.9 else body
                    sent += 1
                    sock.sendall(_frame(key, version, sent, body))
                    reply = _read_frame(sock)
                    if reply is None:
                        closed += 1
                        break
                    assert struct.unpack_from(">i", reply)[0] == sent, "answer out of order"
                    answered += 1
            finally:
                sock.close()
        # Only the ACL code's failures count here: the core's decoding of unknown tagged
        # fields (a KeyError in seglog.server.protocol, which closes the connection) is the
        # core's to answer.
        unexpected = [r for r in caplog.records if r.exc_info is not None
                      and _in_acl_code(r.exc_info[2])]
        assert not unexpected, f"a handler raised: {unexpected[0].getMessage()}"
        # Still serving, and the ACLs it saved read back.
        sock = socket.create_connection(("127.0.0.1", broker.port), timeout=SOCKET_TIMEOUT_S)
        try:
            sock.sendall(_frame(*seeds[1][:2], 0, seeds[1][2]))
            assert _read_frame(sock) is not None
        finally:
            sock.close()
    finally:
        broker.stop()
    load_acls(str(tmp_path / "data"))
    print(f"acl fuzz: seed {seed}, {sent} bodies, {answered} answered, {closed} closed")
    assert answered > 0


@pytest.mark.fuzz
def test_acl_bodies_short(tmp_path, fuzz_seed, caplog):
    _campaign(tmp_path, fuzz_seed, 1500, caplog)


@pytest.mark.fuzz_long
def test_acl_bodies_long(tmp_path, fuzz_seed, caplog):
    _campaign(tmp_path, fuzz_seed + 7919, 60_000, caplog)
