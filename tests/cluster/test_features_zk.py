"""The finalized features of a ZooKeeper cluster in Kafka 2.8's ``/feature`` znode
(:class:`seglog.cluster.features_zk.ZkFeatureStore`) over the session's real ZooKeeper: the
znode's bytes are Kafka's ``FeatureZNode`` JSON, its version is the epoch, a write names the
version it read (a stale one loses), and another broker's store follows every change."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from seglog.cluster.features_store import FeatureEpochMismatch
from seglog.cluster.features_zk import FEATURE_PATH, ZkFeatureStore

WAIT_S = 20.0


def test_feature_znode_written_in_kafkas_layout_and_followed(zk_connect):
    from seglog.cluster.zk_client import KafkaZkClient

    loop = asyncio.new_event_loop()

    async def run_blocking(fn, *args):
        return await loop.run_in_executor(None, fn, *args)

    clients = [KafkaZkClient(zk_connect, session_timeout_ms=4000) for _ in range(2)]
    for client in clients:
        client.start()
    seen: list[tuple[int, dict[str, int]]] = []
    writer = ZkFeatureStore(zk=clients[0], loop=loop, run_blocking=run_blocking,
                            on_change=lambda epoch, levels: None)
    follower = ZkFeatureStore(zk=clients[1], loop=loop, run_blocking=run_blocking,
                              on_change=lambda epoch, levels: seen.append((epoch, levels)))
    try:
        assert loop.run_until_complete(writer.load()) is None
        assert loop.run_until_complete(follower.load()) is None
        assert loop.run_until_complete(writer.write({"transaction.version": 2}, None)) == 0
        data, version = clients[1].get_data_and_version(FEATURE_PATH)
        assert version == 0
        assert json.loads(data) == {"version": 1, "status": 1, "features": {
            "transaction.version": {"min_version_level": 2, "max_version_level": 2}}}
        assert loop.run_until_complete(
            writer.write({"transaction.version": 2, "group.version": 1}, 0)) == 1

        def followed(expected):
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                loop.run_until_complete(asyncio.sleep(0.05))
                if seen and seen[-1] == expected:
                    return
            pytest.fail(f"the follower never saw {expected}: {seen}")

        followed((1, {"transaction.version": 2, "group.version": 1}))
        # The follower's own write names the version it knows: a stale one loses.
        assert loop.run_until_complete(follower.load()) == (
            1, {"transaction.version": 2, "group.version": 1})
        assert loop.run_until_complete(writer.write({}, 1)) == 2
        with pytest.raises(FeatureEpochMismatch):
            loop.run_until_complete(follower.write({"group.version": 1}, 1))
        with pytest.raises(FeatureEpochMismatch):
            loop.run_until_complete(follower.write({"group.version": 1}, None))
        followed((2, {}))
        # A znode Kafka could not decode is ignored, not followed.
        clients[0].conditional_update_path(FEATURE_PATH, b"not json", 2)
        loop.run_until_complete(asyncio.sleep(0.3))
        assert seen[-1] == (2, {})
        assert loop.run_until_complete(follower.load()) is None and follower.epoch == 3
    finally:
        loop.run_until_complete(writer.stop())
        loop.run_until_complete(follower.stop())
        loop.close()
        for client in clients:
            client.close()


def _finalized_epoch(address: str) -> int:
    """ApiVersions v3's FinalizedFeaturesEpoch of the broker at ``address``."""
    import socket
    import struct

    from kio.serial import entity_reader

    from seglog.schemas import load_response_schema

    host, port = address.rsplit(":", 1)
    body = struct.pack(">hhih", 18, 3, 1, 1) + b"f" + b"\x00" + b"\x02t\x021\x00"
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        head = b""
        while len(head) < 4:
            head += sock.recv(4 - len(head))
        (size,) = struct.unpack(">i", head)
        frame = b""
        while len(frame) < size:
            chunk = sock.recv(size - len(frame))
            assert chunk, "closed by the broker"
            frame += chunk
    response, _ = entity_reader(load_response_schema(18, 3))(frame, 4)
    return int(response.finalized_features_epoch)


def test_every_broker_follows_the_feature_znode(tmp_path, zk_connect):
    from seglog.cluster.local import LocalCluster
    from seglog.cluster.zk_client import KafkaZkClient
    from seglog.feature_updates import encode_feature_znode

    configs = {"zookeeper.session.timeout.ms": 4000, "offsets.topic.num.partitions": 1,
               "transaction.state.log.num.partitions": 1}
    with LocalCluster(tmp_path, 2, zookeeper=zk_connect, broker_configs=configs) as cluster:
        zk = KafkaZkClient(zk_connect, session_timeout_ms=4000)
        zk.start()
        try:
            # What another broker (or Kafka 2.8's controller) writes: version 0, then 1, 2.
            zk.create_recursive(FEATURE_PATH, encode_feature_znode({}))
            for version in (0, 1):
                assert zk.conditional_update_path(FEATURE_PATH, encode_feature_znode({}),
                                                  version)[0]
            for index in (0, 1):
                deadline = time.monotonic() + WAIT_S
                while _finalized_epoch(cluster.address(index)) != 2:
                    assert time.monotonic() < deadline, f"broker {index} never saw epoch 2"
                    time.sleep(0.1)
        finally:
            zk.close()
