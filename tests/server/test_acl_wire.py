"""The ACL APIs and the authorizer through real clients: confluent-kafka's ``create_acls`` /
``describe_acls`` / ``delete_acls``, the errors its producer and kafka-python's see, ACLs kept
across a restart, a corrupt ACL file refused at start, ``super.users``,
``allow.everyone.if.no.acl.found``, SECURITY_DISABLED without an authorizer, and Kafka's own
``kafka-acls`` tool (``org.apache.kafka.tools.AclCommand``) from the 4.4 jars.

Every client of a PLAINTEXT listener is ``User:ANONYMOUS`` until SASL is built, so the tests
that need an administrator make ANONYMOUS a super user, and those that need a refusal use
``allow.everyone.if.no.acl.found`` with ACLs naming someone else (see
test_acl_differential.py for the matrix against Kafka)."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from seglog.bench.kafka import find_kafka
from seglog.errors import CorruptCheckpointError
from seglog.security.acl_file import ACLS_FILE
from seglog.server.broker import Broker

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
WAIT_S = 15

pytestmark = [pytest.mark.clients]


def _admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _done(futures):
    return {k: f.result(timeout=WAIT_S) for k, f in futures.items()}


def _describe(admin, **kwargs):
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    return admin.describe_acls(everything, **kwargs).result(timeout=WAIT_S)


def _produce_error(bootstrap, topic):
    """The error confluent-kafka's producer reports for one record to ``topic``."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 8000,
                        "enable.idempotence": False})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(WAIT_S)
    assert len(errors) == 1
    return None if errors[0] is None else errors[0].code()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker):
    admin = _admin(broker)
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as failed:
        _done(admin.create_acls([binding]))
    assert failed.value.args[0].code() == KafkaError.SECURITY_DISABLED
    with pytest.raises(KafkaException) as failed:
        _done(admin.delete_acls([AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY)]))
    assert failed.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # (librdkafka reports DescribeAcls' SECURITY_DISABLED as an empty list.)
    assert _produce_error(broker.bootstrap, "open-topic") is None  # everything is allowed


def test_super_user_manages_acls_and_they_survive_a_restart(broker_factory, tmp_path):
    data_dir = tmp_path / "data"
    config = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
    broker = broker_factory(config, data_dir=data_dir)
    admin = _admin(broker)
    deny_all = AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:*", "*",
                          AclOperation.ALL, AclPermissionType.DENY)
    alice = AclBinding(ResourceType.TOPIC, "orders-", ResourcePatternType.PREFIXED,
                       "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    group = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice",
                       "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)
    _done(admin.create_acls([deny_all, alice, group]))
    assert set(_describe(admin)) == {deny_all, alice, group}
    # A super user passes even a DENY of everything to everyone.
    assert _produce_error(broker.bootstrap, "orders-1") is None
    broker.stop()

    broker = broker_factory(config, data_dir=data_dir)
    admin = _admin(broker)
    assert set(_describe(admin)) == {deny_all, alice, group}
    deleted = _done(admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "orders-x", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY)]))
    assert set(next(iter(deleted.values()))) == {deny_all, alice}
    assert set(_describe(admin)) == {group}


def test_a_corrupt_acl_file_stops_the_start(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / ACLS_FILE).write_text('{"version": 1, "acls": [{"name": 3}]}')
    broker = Broker(data_dir, listen=("127.0.0.1", 0),
                    config={"authorizer.class.name": STANDARD_AUTHORIZER})
    with pytest.raises(CorruptCheckpointError, match=ACLS_FILE):
        broker.start()
    broker.stop()


def test_allow_everyone_if_no_acl_found_and_the_clients_errors(broker_factory):
    broker = broker_factory({"authorizer.class.name": STANDARD_AUTHORIZER,
                             "allow.everyone.if.no.acl.found": "true"})
    admin = _admin(broker)
    # No ACL on the cluster: ANONYMOUS may create topics and ACLs.
    _done(admin.create_topics([NewTopic("open", 1, 1), NewTopic("bobs", 1, 1)]))
    _done(admin.create_acls([AclBinding(
        ResourceType.TOPIC, "bobs", ResourcePatternType.LITERAL, "User:bob", "*",
        AclOperation.ALL, AclPermissionType.ALLOW)]))
    assert _produce_error(broker.bootstrap, "open") is None
    # An ACL for someone else closes the topic to ANONYMOUS.
    assert _produce_error(broker.bootstrap, "bobs") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=8000,
                             max_block_ms=8000)
    try:
        producer.send("open", b"x").get(timeout=WAIT_S)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("bobs", b"x").get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)


_REF, _WHY = find_kafka()


@pytest.mark.kafka
def test_kafka_acls_tool_adds_lists_and_removes(broker_factory, tmp_path):
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    broker = broker_factory({"authorizer.class.name": STANDARD_AUTHORIZER,
                             "super.users": "User:ANONYMOUS"})

    def acls(*args):
        done = _REF.run_tool("org.apache.kafka.tools.AclCommand",
                             ["--bootstrap-server", broker.bootstrap, *args],
                             run_dir=tmp_path, timeout_s=60)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    acls("--add", "--allow-principal", "User:alice", "--operation", "Read",
         "--operation", "Describe", "--topic", "payments", "--resource-pattern-type",
         "prefixed", "--group", "billing")
    out = acls("--list", "--topic", "payments", "--resource-pattern-type", "prefixed")
    assert "User:alice" in out and "READ" in out and "PREFIXED" in out
    out = acls("--list")
    assert "billing" in out
    acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
         "--operation", "Describe", "--topic", "payments", "--resource-pattern-type",
         "prefixed", "--group", "billing")
    deadline = time.monotonic() + WAIT_S
    out = acls("--list")
    while "User:alice" in out and time.monotonic() < deadline:
        out = acls("--list")
    assert "User:alice" not in out
