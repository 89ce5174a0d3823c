"""A classic group's life before and after its members, as Kafka 4.x keeps it: the first
JoinGroup (no member id) creates the group and stores it as an empty generation 0 even when
the join is refused or its member never comes back (``newEmptyGroupMetadataRecord``), so it is
listed ``Empty`` and survives a restart; the offsets retention check deletes an empty group
that has no offsets (``cleanupGroupMetadata``), and keeps one that has. Raw requests over
one connection each; the same first-join answers from real Kafka 4.4 are compared in
``test_groups_timing_differential.py``."""

from __future__ import annotations

import asyncio
import datetime
import io
import socket
import struct
import sys

from kio.serial import entity_reader, entity_writer

from seglog.schemas import load_request_schema, load_response_schema
from seglog.server.apis import groups

TOPIC = "t"
TIMEOUT_S = 15.0


def _call(port: int, api_key: int, version: int, **fields):
    request_class = load_request_schema(api_key, version)
    header_class = request_class.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_class)(buffer, header_class(
        request_api_key=api_key, request_api_version=version, correlation_id=1,
        client_id="lifecycle"))
    entity_writer(request_class)(buffer, request_class(**fields))
    data = buffer.getvalue()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(data)) + data)
        size, = struct.unpack(">i", _read(sock, 4))
        body = _read(sock, size)
    response_class = load_response_schema(api_key, version)
    _, offset = entity_reader(response_class.__header_schema__)(body, 0)
    return entity_reader(response_class)(body, offset)[0]


def _read(sock, count: int) -> bytes:
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        assert chunk, "the broker closed the connection"
        out += chunk
    return out


def first_join(port: int, group: str, protocol_type: str = "consumer") -> int:
    """A new member's first JoinGroup v5 (no member id): its error code."""
    protocol = sys.modules[load_request_schema(11, 5).__module__].JoinGroupRequestProtocol
    return int(_call(port, 11, 5, group_id=group,
                     session_timeout=datetime.timedelta(seconds=10),
                     rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                     group_instance_id=None, protocol_type=protocol_type,
                     protocols=(protocol(name="range", metadata=b""),)).error_code)


def listed(port: int) -> dict[str, str]:
    return {g.group_id: g.group_state for g in _call(port, 16, 4, states_filter=()).groups}


def described(port: int, group: str) -> str:
    return _call(port, 15, 5, groups=(group,),
                 include_authorized_operations=False).groups[0].group_state


def test_first_joins_create_empty_groups_that_the_retention_check_deletes(broker_factory,
                                                                          tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, partitions=1)
    assert first_join(broker.port, "refused", protocol_type="") == 23  # INCONSISTENT_...
    assert first_join(broker.port, "pending") == 79  # MEMBER_ID_REQUIRED, never back
    assert first_join(broker.port, "kept") == 79
    broker.store.group("kept").alter_offsets({(TOPIC, 0): 5})
    expected = {"refused": "Empty", "pending": "Empty", "kept": "Empty"}
    assert listed(broker.port) == expected
    # Stored as an empty generation: back after a restart.
    broker.stop()
    broker = broker_factory(data_dir=tmp_path / "data")
    assert listed(broker.port) == expected
    # The retention check: empty groups without offsets go, "kept" has offsets and stays.
    asyncio.run_coroutine_threadsafe(_expire(broker), broker.state.loop).result(TIMEOUT_S)
    assert listed(broker.port) == {"kept": "Empty"}
    assert described(broker.port, "refused") == "Dead"
    # The tombstones hold across a restart.
    broker.stop()
    broker = broker_factory(data_dir=tmp_path / "data")
    assert listed(broker.port) == {"kept": "Empty"}


async def _expire(broker) -> None:
    groups.expire_offsets(broker.state, broker.state.now_ms())
