"""Connection limits with real sockets (issue 23, "Quotas and limits"), as Kafka's
``ConnectionQuotas`` applies them: ``max.connections.per.ip.overrides`` (a connection over
the IP's count is closed), ``listener.name.<l>.max.connections`` (the next connection waits
unserved until a slot frees), ``max.connection.creation.rate`` (accepting is throttled: the
connections wait, then are served), the per-IP ``connection_creation_rate`` quota (a
throttled connection is closed after the throttle time), and the dynamic ones changed by
IncrementalAlterConfigs."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, ResourceType)

from core_helpers import connect, read_frame, request_frame
from quota_helpers import RawClient, alter_quotas

API_VERSIONS = 18
WAIT_S = 10.0


def _answered(sock, correlation_id: int) -> bool:
    """Whether ApiVersions on ``sock`` is answered (False: closed by the broker)."""
    sock.sendall(request_frame(API_VERSIONS, 0, correlation_id))
    frame = read_frame(sock)
    return frame is not None and struct.unpack_from(">i", frame) == (correlation_id,)


def _wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_per_ip_override_closes_the_connection_over_it(broker_factory):
    broker = broker_factory(max_connections_per_ip=100,
                            **{"max.connections.per.ip.overrides": "10.0.0.9:5,127.0.0.1:2"})
    with connect(broker) as first, connect(broker) as second:
        assert _answered(first, 1) and _answered(second, 2)
        with connect(broker) as third:
            assert not _answered(third, 3)  # over the override: closed at once
        assert _answered(first, 4)


def test_per_ip_zero_with_an_override_for_loopback(broker_factory):
    broker = broker_factory(max_connections_per_ip=0,
                            **{"max.connections.per.ip.overrides": "localhost:1"})
    with connect(broker) as first:
        assert _answered(first, 1)
        with connect(broker) as second:
            assert not _answered(second, 2)


def test_listener_max_connections_holds_the_next_connection(broker_factory):
    broker = broker_factory(**{"listener.name.plaintext.max.connections": 1})
    first = connect(broker)
    assert _answered(first, 1)
    second = connect(broker, timeout_s=0.5)
    second.sendall(request_frame(API_VERSIONS, 0, 2))
    with pytest.raises(TimeoutError):
        read_frame(second)  # waits for a slot of its listener
    assert broker.server.connection_quotas.waiting == 1
    first.close()
    second.settimeout(WAIT_S)
    try:
        frame = read_frame(second)
        assert frame is not None and struct.unpack_from(">i", frame) == (2,)
    finally:
        second.close()


def test_connection_creation_rate_throttles_accepting(broker_factory):
    # A window of 2 samples of 1 s: at 2 connections a second, about 2 connections go
    # through at once, the rest wait their turn and are then served.
    broker = broker_factory(**{"max.connection.creation.rate": 2, "quota.window.num": 2})
    socks = []
    try:
        started = time.monotonic()
        for _ in range(6):
            socks.append(connect(broker))
        _wait_until(lambda: broker.server.connection_quotas.waiting > 0,
                    "a connection held by the creation rate")
        for i, sock in enumerate(socks):
            assert _answered(sock, i)  # all served in the end
        # Six connections at two a second cannot all be accepted in the first second.
        assert time.monotonic() - started >= 1.0
        assert broker.server.connection_quotas.waiting == 0
    finally:
        for sock in socks:
            sock.close()


def test_ip_connection_creation_rate_closes_after_the_throttle_time(broker_factory):
    broker = broker_factory(**{"quota.window.num": 2})
    with RawClient(broker.bootstrap) as admin:
        assert alter_quotas(admin, [([("ip", "127.0.0.1")], {"connection_creation_rate": 1})]
                            ) == [((("ip", "127.0.0.1"),), 0, None)]
    closed = 0
    served = 0
    for i in range(6):
        with connect(broker) as sock:
            if _answered(sock, i):
                served += 1
            else:
                closed += 1
    assert served >= 1 and closed >= 1, (served, closed)
    # Removing the quota lets connections through again.
    time.sleep(2.1)  # the rate's samples (2 windows of 1 s) expire
    with RawClient(broker.bootstrap) as admin:
        alter_quotas(admin, [([("ip", "127.0.0.1")], {"connection_creation_rate": None})])
    for i in range(5):
        with connect(broker) as sock:
            assert _answered(sock, 100 + i)


def test_per_ip_overrides_are_dynamic(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, str(broker.state.node_id),
                              incremental_configs=[ConfigEntry(
                                  "max.connections.per.ip.overrides", "127.0.0.1:2",
                                  incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=WAIT_S)
    del admin
    assert broker.state.config["max.connections.per.ip.overrides"] == "127.0.0.1:2"
    _wait_until(lambda: not broker.server.connections, "the admin client's connection to go")
    with connect(broker) as first, connect(broker) as second:
        assert _answered(first, 1) and _answered(second, 2)
        with connect(broker) as third:
            assert not _answered(third, 3)
    # A value that does not parse is refused (Kafka's ConfigException).
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bad = ConfigResource(ResourceType.BROKER, str(broker.state.node_id),
                         incremental_configs=[ConfigEntry(
                             "max.connections.per.ip.overrides", "127.0.0.1",
                             incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception):
        admin.incremental_alter_configs([bad])[bad].result(timeout=WAIT_S)
    del admin
