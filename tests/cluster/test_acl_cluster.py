"""ACLs in a ZooKeeper cluster (issue 23): Kafka 2.x's layout (``AclAuthorizer``, ``ZkData``:
``/kafka-acl/<ResourceType>/<name>``, ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``,
``/kafka-acl-changes/acl_changes_<seq>`` and ``/kafka-acl-extended-changes/acl_changes_<seq>``),
and ACLs created through one broker applying on another.

The first tests drive :class:`ZkAclStore` over the session's real ZooKeeper and read the
znodes' bytes; the last runs two real ``seglog serve`` brokers (LocalCluster) and talks to one
chosen broker at a time over a socket with kio's classes."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import struct
import sys
import time

import pytest
from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from seglog.cluster.acl_changes import (ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH,
                                        ZkAclStore, decode_acls, resource_path)
from seglog.security.acl import (AclBinding, AclOperation as Op, AclPermissionType as Perm,
                                 PatternType as Pat, ResourceType as Res)

WAIT_S = 20.0
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _wait_until(condition, what, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def test_acls_are_written_in_kafkas_layout_and_followed_by_another_store(zk_connect):
    from seglog.cluster.zk_client import KafkaZkClient

    read = KafkaZkClient(zk_connect, session_timeout_ms=4000)
    read.start()
    loop = asyncio.new_event_loop()
    seen: list[frozenset] = []

    async def run_blocking(fn, *args):
        return await loop.run_in_executor(None, fn, *args)

    writer_zk = KafkaZkClient(zk_connect, session_timeout_ms=4000)
    writer_zk.start()
    writer = ZkAclStore(zk=writer_zk, loop=loop, run_blocking=run_blocking,
                        on_change=lambda b: None)
    follower = ZkAclStore(zk=read, loop=loop, run_blocking=run_blocking, on_change=seen.append)
    literal = AclBinding(Res.TOPIC, "orders", Pat.LITERAL, "User:alice", "*", Op.READ,
                         Perm.ALLOW)
    cluster = AclBinding(Res.CLUSTER, "kafka-cluster", Pat.LITERAL, "User:ops", "10.0.0.1",
                         Op.CLUSTER_ACTION, Perm.DENY)
    prefixed = AclBinding(Res.TRANSACTIONAL_ID, "tx-", Pat.PREFIXED, "User:*", "*",
                          Op.WRITE, Perm.ALLOW)
    try:
        assert loop.run_until_complete(writer.start()) == frozenset()
        assert loop.run_until_complete(follower.start()) == frozenset()
        after = loop.run_until_complete(writer.apply([literal, cluster, prefixed], []))
        assert after == {literal, cluster, prefixed}

        data, _ = read.get_data_and_version("/kafka-acl/Topic/orders")
        assert json.loads(data) == {"version": 1, "acls": [{
            "principal": "User:alice", "permissionType": "Allow", "operation": "Read",
            "host": "*"}]}
        data, _ = read.get_data_and_version("/kafka-acl/Cluster/kafka-cluster")
        assert json.loads(data)["acls"] == [{"principal": "User:ops", "permissionType": "Deny",
                                             "operation": "ClusterAction",
                                             "host": "10.0.0.1"}]
        data, _ = read.get_data_and_version("/kafka-acl-extended/prefixed/TransactionalId/tx-")
        assert decode_acls((Res.TRANSACTIONAL_ID, Pat.PREFIXED, "tx-"), data) == {prefixed}
        literal_changes = read.get_children(ACL_CHANGES_PATH)
        assert len(literal_changes) == 2 and all(c.startswith("acl_changes_")
                                                 for c in literal_changes)
        payloads = {read.get_data_and_version(f"{ACL_CHANGES_PATH}/{c}")[0]
                    for c in literal_changes}
        assert payloads == {b"TOPIC:orders", b"CLUSTER:kafka-cluster"}
        (extended,) = read.get_children(EXTENDED_ACL_CHANGES_PATH)
        event = json.loads(read.get_data_and_version(f"{EXTENDED_ACL_CHANGES_PATH}/{extended}")[0])
        assert event == {"version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-",
                         "patternType": "PREFIXED"}

        def followed(expected):
            loop.run_until_complete(asyncio.sleep(0.05))
            return seen and seen[-1] == expected

        _wait_until(lambda: followed({literal, cluster, prefixed}), "the follower to see them")
        # Removing the last ACL of a pattern removes its znode.
        loop.run_until_complete(writer.apply([], [literal]))
        assert not read.path_exists(resource_path((Res.TOPIC, Pat.LITERAL, "orders")))
        _wait_until(lambda: followed({cluster, prefixed}), "the follower to see the removal")
    finally:
        loop.run_until_complete(writer.stop())
        loop.run_until_complete(follower.stop())
        loop.close()
        writer_zk.close()
        read.close()


class Wire:
    """One connection to one broker, speaking Kafka's framing with kio's classes."""

    def __init__(self, address: str):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        self.correlation_id = 0

    @staticmethod
    def m(key, version):
        return sys.modules[load_request_schema(key, version).__module__]

    def call(self, key, version, **fields):
        cls = load_request_schema(key, version)
        self.correlation_id += 1
        head = struct.pack(">hhih", key, version, self.correlation_id, 3) + b"acl"
        if cls.__flexible__:
            head += b"\x00"
        body = io.BytesIO()
        entity_writer(cls)(body, cls(**fields))
        frame = head + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", self._recv(4))
        data = self._recv(size)
        response_cls = load_response_schema(key, version)
        response, _ = entity_reader(response_cls)(
            memoryview(data), 4 + (1 if response_cls.__flexible__ else 0))
        return response

    def _recv(self, count):
        out = bytearray()
        while len(out) < count:
            chunk = self.sock.recv(count - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    def close(self):
        self.sock.close()


CLUSTER_CONFIGS = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "authorizer.class.name": STANDARD_AUTHORIZER,
    # Every client is User:ANONYMOUS until SASL is built: resources without ACLs (the
    # cluster itself, so the brokers' own follower fetches) stay open to it.
    "allow.everyone.if.no.acl.found": "true",
}


def test_acls_created_through_one_broker_apply_on_another(tmp_path, zk_connect):
    from seglog.cluster.local import LocalCluster

    with LocalCluster(tmp_path, 2, zookeeper=zk_connect,
                      broker_configs=CLUSTER_CONFIGS) as cluster:
        one, two = Wire(cluster.address(0)), Wire(cluster.address(1))
        try:
            ct = one.m(19, 7)
            r = one.call(19, 7, topics=tuple(ct.CreatableTopic(
                name=n, num_partitions=1, replication_factor=2, assignments=(), configs=())
                for n in ("open", "closed")), timeout=__import__("datetime").timedelta(
                    seconds=15), validate_only=False)
            assert [int(t.error_code) for t in r.topics] == [0, 0]
            ca = one.m(30, 3)
            r = one.call(30, 3, creations=(ca.AclCreation(
                resource_type=int(Res.TOPIC), resource_name="closed",
                resource_pattern_type=int(Pat.LITERAL), principal="User:bob", host="*",
                operation=int(Op.ALL), permission_type=int(Perm.ALLOW)),))
            assert [int(x.error_code) for x in r.results] == [0]

            mm = two.m(3, 12)

            def metadata_on_two():
                r = two.call(3, 12, topics=tuple(mm.MetadataRequestTopic(topic_id=None, name=n)
                                                 for n in ("open", "closed")),
                             allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)
                return {t.name: int(t.error_code) for t in r.topics}

            # Broker 2 learns the ACL from ZooKeeper: "closed" now has an ACL for bob only.
            _wait_until(lambda: metadata_on_two() == {"open": 0, "closed": 29},
                        "broker 2 to apply the ACL made through broker 1")
            r = two.call(29, 3, resource_type_filter=int(Res.ANY), resource_name_filter=None,
                         pattern_type_filter=int(Pat.ANY), principal_filter=None,
                         host_filter=None, operation=int(Op.ANY),
                         permission_type=int(Perm.ANY))
            assert [(x.resource_name, [a.principal for a in x.acls]) for x in r.resources] == \
                [("closed", ["User:bob"])]
            # Deleted through broker 2: broker 1 opens the topic again.
            dl = two.m(31, 3)
            r = two.call(31, 3, filters=(dl.DeleteAclsFilter(
                resource_type_filter=int(Res.TOPIC), resource_name_filter="closed",
                pattern_type_filter=int(Pat.LITERAL), principal_filter=None, host_filter=None,
                operation=int(Op.ANY), permission_type=int(Perm.ANY)),))
            assert [len(f.matching_acls) for f in r.filter_results] == [1]
            m1 = one.m(3, 12)

            def closed_on_one():
                r = one.call(3, 12, topics=(m1.MetadataRequestTopic(topic_id=None,
                                                                    name="closed"),),
                             allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)
                return int(r.topics[0].error_code)

            _wait_until(lambda: closed_on_one() == 0, "broker 1 to apply the deletion")
        finally:
            one.close()
            two.close()
