"""Listeners that differ across brokers (issue 23): a Metadata request on a listener the
partition's leader does not have answers that partition LISTENER_NOT_FOUND from v6 on and
LEADER_NOT_AVAILABLE before, with no leader, as Kafka's metadata cache does
(``errorUnavailableListeners``); the brokers list leaves that broker out."""

from __future__ import annotations

from kio.schema.metadata.v5.request import MetadataRequest as MetadataV5
from kio.schema.metadata.v5.request import MetadataRequestTopic as TopicV5
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as TopicV12
from kio.schema.types import TopicName

import seglog
from seglog import error_codes as codes
from seglog.types import TopicPartition

from test_broker_cluster import CLUSTER_CONFIG, wait_until

def test_a_leader_without_the_clients_listener_is_listener_not_found(tmp_path, zk_connect):
    two_listeners = {**CLUSTER_CONFIG, "zookeeper.connect": zk_connect, "broker.id": 0,
                     "listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
                     "inter.broker.listener.name": "PLAINTEXT"}
    one_listener = {**CLUSTER_CONFIG, "zookeeper.connect": zk_connect, "broker.id": 1}
    b0 = seglog.Broker(tmp_path / "b0", config=two_listeners).start()
    b1 = seglog.Broker(tmp_path / "b1", config=one_listener).start()
    try:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=b0.bootstrap)
        try:
            # Led by broker 1 (its only replica), which has no EXTRA listener.
            admin.create_topics([NewTopic("t", num_partitions=-1, replication_factor=-1,
                                          replica_assignments={0: [1]})])
        finally:
            admin.close()
        wait_until(lambda: b0.state.cluster.states.get(TopicPartition("t", 0)) is not None,
                   "broker 0 knows t-0's state")
        extra = b0.listener_bootstrap("EXTRA")
        answers = {}
        for version, request in (
                (12, MetadataV12(topics=(TopicV12(name=TopicName("t"), topic_id=None),),
                                 allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False)),
                (5, MetadataV5(topics=(TopicV5(name=TopicName("t")),),
                               allow_auto_topic_creation=False))):
            answers[version] = _raw_metadata(extra, request)
        for version, expected in ((12, codes.LISTENER_NOT_FOUND),
                                  (5, codes.LEADER_NOT_AVAILABLE)):
            response = answers[version]
            assert [b.node_id for b in response.brokers] == [0]
            (topic,) = response.topics
            (partition,) = topic.partitions
            assert partition.error_code == expected, version
            assert partition.leader_id == -1
        # On the listener both brokers have, the leader is named.
        response = _raw_metadata(b0.bootstrap, MetadataV12(
            topics=(TopicV12(name=TopicName("t"), topic_id=None),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert response.topics[0].partitions[0].leader_id == 1
        assert response.topics[0].partitions[0].error_code == codes.NONE
    finally:
        b1.stop()
        b0.stop()


def _raw_metadata(bootstrap: str, request):
    """One Metadata request over a socket, kio's response back."""
    import io
    import socket
    import struct

    from seglog.schemas import load_response_schema
    from kio.serial import entity_reader, entity_writer

    api_version = int(type(request).__module__.split(".v")[-1].split(".")[0])
    header_cls = type(request).__header_schema__
    buffer = io.BytesIO()
    fields = {"request_api_key": 3, "request_api_version": api_version, "correlation_id": 7}
    if "client_id" in header_cls.__dataclass_fields__:
        fields["client_id"] = "listener-test"
    entity_writer(header_cls)(buffer, header_cls(**fields))
    entity_writer(type(request))(buffer, request)
    payload = buffer.getvalue()
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read(sock, 4))[0]
        data = _read(sock, size)
    response_cls = load_response_schema(3, api_version)
    _header, offset = entity_reader(response_cls.__header_schema__)(data, 0)
    response, _size = entity_reader(response_cls)(data, offset)
    return response


def _read(sock, count: int) -> bytes:
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out
