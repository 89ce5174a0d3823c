"""``max.connections`` changed at run time (IncrementalAlterConfigs on the broker, as
``kafka-configs --alter --entity-type brokers`` does) applies to the next connection, which
waits unserved (Kafka's acceptor waits for a slot)."""

from __future__ import annotations

from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, ResourceType)

from core_helpers import connect, read_frame, request_frame


def _served(broker, timeout_s: float = 5) -> bool:
    sock = connect(broker, timeout_s=timeout_s)
    try:
        sock.sendall(request_frame(18, 0, 3))
        return read_frame(sock) is not None
    except TimeoutError:
        return False  # held unanswered (Kafka's acceptor waits for a slot)
    finally:
        sock.close()


def test_max_connections_lowered_at_run_time_holds_the_next_connection(broker):
    held = [connect(broker) for _ in range(2)]
    try:
        assert _served(broker)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, str(broker.state.node_id),
                                  incremental_configs=[ConfigEntry(
                                      "max.connections", "2",
                                      incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=10)
        del admin  # its own connection closes
        assert broker.state.config["max.connections"] == 2
        assert not _served(broker, timeout_s=1)  # two held already: the third waits
    finally:
        for sock in held:
            sock.close()
