"""Shutdown with long polls in flight: a Fetch waiting for data (max_wait far above the
broker's shutdown allowance for in-flight requests) is answered, empty, when the broker
stops, instead of being cut off without an answer (Kafka completes delayed fetches on
shutdown too)."""

from __future__ import annotations

import struct
import threading

from seglog.server.broker import SHUTDOWN_REQUESTS_TIMEOUT_S

from core_helpers import connect, read_frame, request_frame


def _fetch_v4(topic: str, max_wait_ms: int) -> bytes:
    name = topic.encode()
    return (struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0)
            + struct.pack(">ih", 1, len(name)) + name
            + struct.pack(">iiqi", 1, 0, 0, 1 << 20))


def test_a_waiting_fetch_is_answered_when_the_broker_stops(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data")
    broker.store.create_topic("t", partitions=1)
    max_wait_ms = int(SHUTDOWN_REQUESTS_TIMEOUT_S * 1000) * 6
    sock = connect(broker, timeout_s=SHUTDOWN_REQUESTS_TIMEOUT_S * 3)
    try:
        sock.sendall(request_frame(1, 4, 41, _fetch_v4("t", max_wait_ms)))
        # The fetch is parked: an ApiVersions behind it on the same connection would queue,
        # so ask on a second connection that the broker is up, then stop it.
        other = connect(broker)
        other.sendall(request_frame(18, 0, 1))
        assert read_frame(other) is not None
        other.close()
        stopper = threading.Thread(target=broker.stop)
        stopper.start()
        frame = read_frame(sock)
        stopper.join(SHUTDOWN_REQUESTS_TIMEOUT_S * 3)
        assert not stopper.is_alive()
    finally:
        sock.close()
    assert frame is not None, "the waiting fetch was cut off without an answer"
    correlation_id, _throttle_ms = struct.unpack(">ii", frame[:8])
    assert correlation_id == 41
