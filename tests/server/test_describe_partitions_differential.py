"""DescribeTopicPartitions (API 75 v0) against the real Kafka 4.4 broker: its cursor, the
partition limit (ResponsePartitionLimit, at least 1, at most ``max.request.partition.size.limit``),
unknown and illegal names, the INVALID_REQUEST answers to a bad cursor, an all-topics request,
and ``kafka-topics --describe`` (which uses this API in Kafka 4.x) run from the 4.4 jars
against both brokers with only the topic ids masked. The same raw requests go to
``seglog serve`` and, where java and the jars are present, to Kafka; both must give
:data:`EXPECTED`, which records what Kafka 4.4.0 answered."""

from __future__ import annotations

import os
import re
import time

import pytest

from seglog.server.apis.data_metadata import build
from test_data_differential import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WAIT_S = 30.0
TOOL_TIMEOUT_S = 60
TOPICS = {"dtp-a": 3, "dtp-b": 2, "dtp-c": 1}
NAMED = ("dtp-a", "dtp-b", "dtp-c")

# (name, request topics, limit, cursor) -> what the answer must be.
PROBES = {
    "named, default limit": (NAMED + ("dtp-missing", "bad name!", "dtp-a"), 2000, None),
    "limit 4 splits dtp-b": (NAMED, 4, None),
    "limit 3 ends at dtp-a": (NAMED, 3, None),
    "limit 0 is 1": (NAMED, 0, None),
    "cursor dtp-b/1": (NAMED, 2000, ("dtp-b", 1)),
    "cursor past the end": (NAMED, 2000, ("dtp-c", 5)),
    "cursor not named": (("dtp-a", "dtp-c"), 2000, ("dtp-b", 0)),
    "cursor negative": (NAMED, 2000, ("dtp-b", -1)),
    "all topics, cursor dtp-a/2": ((), 2, ("dtp-a", 2)),
    "all topics from dtp-c": ((), 2000, ("dtp-c", 0)),
}

_OPS = 3576  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
_UNSET = -2147483648  # topic_authorized_operations not filled


def _p(index):
    """A partition on the one broker (node 1): index, leader, replicas, ISR, ELR, last known
    ELR (both empty lists, not null), offline replicas."""
    return (index, 1, [1], [1], [], [], [])


def _t(name, *indexes):
    """A topic answered without error: error, name, non-zero id, internal, partitions, ops."""
    return (0, name, True, False, [_p(i) for i in indexes], _OPS)


def _bad_cursor(*names):
    return ([(42, name, False, False, [], _UNSET) for name in names], None)  # INVALID_REQUEST


EXPECTED = {
    # Named topics come back sorted, each once; unknown: UNKNOWN_TOPIC_OR_PARTITION (3), an
    # illegal name INVALID_TOPIC_EXCEPTION (17), both with their authorized operations.
    "named, default limit": ([(17, "bad name!", False, False, [], _OPS), _t("dtp-a", 0, 1, 2),
                              _t("dtp-b", 0, 1), _t("dtp-c", 0),
                              (3, "dtp-missing", False, False, [], _OPS)], None),
    "limit 4 splits dtp-b": ([_t("dtp-a", 0, 1, 2), _t("dtp-b", 0)], ("dtp-b", 1)),
    "limit 3 ends at dtp-a": ([_t("dtp-a", 0, 1, 2)], ("dtp-b", 0)),
    "limit 0 is 1": ([_t("dtp-a", 0)], ("dtp-a", 1)),
    "cursor dtp-b/1": ([_t("dtp-b", 1), _t("dtp-c", 0)], None),
    "cursor past the end": ([_t("dtp-c")], None),
    "cursor not named": _bad_cursor("dtp-a", "dtp-c"),
    "cursor negative": _bad_cursor("dtp-a", "dtp-b", "dtp-c"),
    "all topics, cursor dtp-a/2": ([_t("dtp-a", 2), _t("dtp-b", 0)], ("dtp-b", 1)),
    "all topics from dtp-c": ([_t("dtp-c", 0)], None),
}


def _answer(response):
    topics = [(int(t.error_code), t.name, t.topic_id is not None and t.topic_id.int != 0,
               t.is_internal,
               [(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes),
                 None if p.eligible_leader_replicas is None else list(p.eligible_leader_replicas),
                 None if p.last_known_elr is None else list(p.last_known_elr),
                 list(p.offline_replicas)) for p in t.partitions],
               t.topic_authorized_operations) for t in response.topics]
    cursor = response.next_cursor
    return topics, None if cursor is None else (cursor.topic_name, cursor.partition_index)


def create_topics(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, count, 1) for name, count in TOPICS.items()])
    for future in futures.values():
        future.result(WAIT_S)
    wire = Wire(bootstrap)
    try:  # Kafka creates partitions through its controller, asynchronously
        deadline = time.monotonic() + WAIT_S
        module = wire.module(75, 0)
        while time.monotonic() < deadline:
            response = wire.call(75, 0, topics=tuple(
                module.TopicRequest(name=n) for n in TOPICS), response_partition_limit=2000)
            if sum(len(t.partitions) for t in response.topics if t.error_code == 0) == 6:
                return
            time.sleep(0.1)
        raise AssertionError("topics never appeared")
    finally:
        wire.close()


def probe(bootstrap):
    """Every probe's answer, by name."""
    wire = Wire(bootstrap)
    module = wire.module(75, 0)
    out = {}
    try:
        for name, (topics, limit, cursor) in PROBES.items():
            response = wire.call(
                75, 0, topics=tuple(module.TopicRequest(name=t) for t in topics),
                response_partition_limit=limit,
                cursor=None if cursor is None else module.Cursor(topic_name=cursor[0],
                                                                 partition_index=cursor[1]))
            out[name] = _answer(response)
    finally:
        wire.close()
    return out


def _compare(got):
    assert {k: v for k, v in got.items() if v != EXPECTED.get(k)} == {}
    assert set(got) == set(EXPECTED)


def test_seglog_answers_as_kafka(broker):
    create_topics(broker.bootstrap)
    _compare(probe(broker.bootstrap))


def _kafka():
    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    return ref


@pytest.fixture(scope="module")
def kafka_with_topics(tmp_path_factory):
    """A real Kafka broker of this module's own (its all-topics probes list every topic, so
    not the session's shared one) with :data:`TOPICS` created; both Kafka tests read it."""
    from seglog.bench.kafka import KafkaBroker

    broker = KafkaBroker(_kafka(), tmp_path_factory.mktemp("kafka-dtp"))
    broker.format()
    broker.start()
    try:
        create_topics(broker.bootstrap)
        yield broker
    finally:
        broker.stop()


@pytest.mark.kafka
@pytest.mark.slow
def test_kafka_answers_as_recorded(kafka_with_topics):
    _compare(probe(kafka_with_topics.bootstrap))


def _describe(ref, bootstrap, run_dir, *args):
    """``kafka-topics --describe`` output with the topic ids masked."""
    done = ref.run_tool("org.apache.kafka.tools.TopicCommand",
                        ["--bootstrap-server", bootstrap, "--describe", *args],
                        run_dir=run_dir, timeout_s=TOOL_TIMEOUT_S)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return re.sub(r"TopicId: \S+", "TopicId: <id>", done.stdout)


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.kafka_tools  # a JVM per step: .ci/run runs it; the raw requests are compared
# by test_kafka_answers_as_recorded and test_seglog_answers_as_kafka
def test_kafka_topics_describe_gives_kafkas_output(kafka_with_topics, broker, tmp_path):
    ref = kafka_with_topics.ref
    create_topics(broker.bootstrap)
    outputs = {}
    for name, bootstrap in (("kafka", kafka_with_topics.bootstrap), ("seglog", broker.bootstrap)):
        outputs[name] = (
            _describe(ref, bootstrap, tmp_path, "--exclude-internal"),
            _describe(ref, bootstrap, tmp_path, "--topic", "dtp-b"),
            _describe(ref, bootstrap, tmp_path, "--topic", "dtp-.*",
                      "--partition-size-limit-per-response", "2"))
    assert "Elr: " in outputs["kafka"][0]  # Kafka 4.4's tool used DescribeTopicPartitions
    assert outputs["kafka"][0].count("\tPartition: ") == 6
    assert outputs["seglog"] == outputs["kafka"]


def test_topics_not_allowed_are_refused_or_hidden(broker_factory):
    # ANONYMOUS (every PLAINTEXT client) may describe what has no ACL; "dtp-c" has one, for
    # bob only: named, it is TOPIC_AUTHORIZATION_FAILED (zero id, after the others, as
    # KafkaApis lists it); in an all-topics request it is left out.
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    broker = broker_factory(config={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    create_topics(broker.bootstrap)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "dtp-c", ResourcePatternType.LITERAL, "User:bob",
                         "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(WAIT_S)
    wire = Wire(broker.bootstrap)
    module = wire.module(75, 0)
    try:
        named = _answer(wire.call(75, 0, topics=tuple(module.TopicRequest(name=t) for t in NAMED),
                                  response_partition_limit=2000, cursor=None))
        every = _answer(wire.call(75, 0, topics=(), response_partition_limit=2000, cursor=None))
    finally:
        wire.close()
    assert named == ([_t("dtp-a", 0, 1, 2), _t("dtp-b", 0, 1),
                      (29, "dtp-c", False, False, [], _UNSET)], None)
    assert [t[1] for t in every[0]] == ["dtp-a", "dtp-b"]
