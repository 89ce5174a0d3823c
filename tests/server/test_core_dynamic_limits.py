"""``max.connections`` changed at run time (IncrementalAlterConfigs on the broker, as
``kafka-configs --alter --entity-type brokers`` does) applies to the next connection."""

from __future__ import annotations

from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, ResourceType)

from core_helpers import connect, read_frame, request_frame


def _served(broker) -> bool:
    sock = connect(broker, timeout_s=5)
    try:
        sock.sendall(request_frame(18, 0, 3))
        return read_frame(sock) is not None
    finally:
        sock.close()


def test_max_connections_lowered_at_run_time_refuses_the_next_connection(broker):
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
        assert not _served(broker)  # two held already: the third is closed unanswered
    finally:
        for sock in held:
            sock.close()
