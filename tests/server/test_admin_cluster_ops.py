"""ElectLeaders and the reassignment APIs on a lone broker, without a JVM: confluent-kafka's
``elect_leaders`` (librdkafka's request), the answers Kafka 4.4's one-node cluster gives
(test_admin_cluster_ops_differential.py compares them with the real broker), and the
authorizer's refusals (ALTER / DESCRIBE on CLUSTER)."""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka import ElectionType, KafkaException
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

from seglog import error_codes as codes

from test_admin_differential import Client

pytestmark = [pytest.mark.clients]

TIMEOUT = datetime.timedelta(seconds=10)
#: A bound on the admin client's answers, not a figure: librdkafka's first call on a new
#: AdminClient waits for its bootstrap, metadata and controller lookups, which took over 15 s
#: once in a full run on a loaded 2-core machine (3 s alone).
WAIT_S = 60
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _topic(broker, name, partitions):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=WAIT_S)
    return admin


def test_confluent_elect_leaders_on_a_lone_broker(broker):
    admin = _topic(broker, "e", 2)
    for election_type in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        result = admin.elect_leaders(election_type, [CTP("e", 0), CTP("e", 1), CTP("e", 7)]
                                     ).result(timeout=WAIT_S)
        errors = {(tp.topic, tp.partition): (None if err is None else err.code())
                  for tp, err in result.items()}
        assert errors == {("e", 0): codes.ELECTION_NOT_NEEDED,
                          ("e", 1): codes.ELECTION_NOT_NEEDED,
                          ("e", 7): codes.UNKNOWN_TOPIC_OR_PARTITION}
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=WAIT_S) == {}


def test_reassignments_on_a_lone_broker(broker):
    _topic(broker, "r", 1)
    c = Client(broker.bootstrap)
    try:
        node = c.call(60, 0, include_cluster_authorized_operations=False).brokers[0].broker_id
        ap = c.m(45, 1)

        def alter(replicas, allow=True):
            r = c.call(45, 1, timeout=TIMEOUT, allow_replication_factor_change=allow, topics=(
                ap.ReassignableTopic(name="r", partitions=(
                    ap.ReassignablePartition(partition_index=0, replicas=replicas),)),))
            return [(int(p.error_code), p.error_message) for t in r.responses
                    for p in t.partitions]

        assert alter((node,)) == [(codes.NONE, None)]
        assert alter((node, node + 1)) == [(
            codes.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
            f"broker {node + 1}, but no such broker is registered.")]
        assert alter(None) == [(codes.NO_REASSIGNMENT_IN_PROGRESS, None)]
        r = c.call(46, 0, timeout=TIMEOUT, topics=None)
        assert (int(r.error_code), r.topics) == (0, ())
    finally:
        c.close()


def test_the_authorizer_refuses_without_cluster_acls(broker_factory):
    broker = broker_factory(config={"authorizer.class.name": STANDARD_AUTHORIZER,
                                    "allow.everyone.if.no.acl.found": "false"})
    c = Client(broker.bootstrap)
    refused = codes.CLUSTER_AUTHORIZATION_FAILED
    try:
        el = c.m(43, 2)
        r = c.call(43, 2, election_type=0, timeout=TIMEOUT, topic_partitions=(
            el.TopicPartitions(topic="x", partitions=(0, 1)),))
        assert int(r.error_code) == refused
        assert [int(p.error_code) for t in r.replica_election_results
                for p in t.partition_result] == [refused, refused]
        ap = c.m(45, 0)
        r = c.call(45, 0, timeout=TIMEOUT, topics=(ap.ReassignableTopic(name="x", partitions=(
            ap.ReassignablePartition(partition_index=0, replicas=(1,)),)),))
        assert int(r.error_code) == refused
        assert [int(p.error_code) for t in r.responses for p in t.partitions] == [refused]
        r = c.call(46, 0, timeout=TIMEOUT, topics=None)
        assert int(r.error_code) == refused
    finally:
        c.close()
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": broker.bootstrap}).elect_leaders(
            ElectionType.PREFERRED, [CTP("x", 0)]).result(timeout=WAIT_S)
