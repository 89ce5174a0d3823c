"""Consumer groups of the new protocol (KIP-848, ``group.protocol=consumer``) through real
clients against ``seglog serve``: librdkafka (confluent-kafka) members consume, commit,
share the partitions when a second member joins and take them back when it leaves; the
admin client lists and describes the group; Kafka 4.4's Java consumer (a small program
compiled with ``javac`` at test time, ``java/ConsumerGroupMember.java``) and a librdkafka
member share one group. Sessions and heartbeats are short (the broker's min configs
lowered) so every wait is short; every wait is bounded."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from java_consumer_member import JavaMember, ask_to_close, compile_member, start_member

pytestmark = pytest.mark.clients

WAIT_S = 20.0
TOPIC = "kt"
PARTITIONS = 6
GROUP_CONFIG = {
    "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 300}


@pytest.fixture
def kip848_broker(broker_factory, tmp_path):
    """A broker with short consumer-group sessions and a 6-partition topic of 60 records."""
    broker = broker_factory(config=GROUP_CONFIG, data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(60):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    return broker


def _member(bootstrap: str, group: str, **config) -> Consumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": group,
                "group.protocol": "consumer", "auto.offset.reset": "earliest",
                "enable.auto.commit": False}
    settings.update(config)
    consumer = Consumer(settings)
    consumer.subscribe([TOPIC])
    return consumer


def _assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _poll_until(members: list[Consumer], done, seen: dict[int, int] | None = None) -> bool:
    """Poll every member until ``done()`` (bounded by WAIT_S); counts records by partition
    in ``seen``, and checks no partition is assigned to two members at any time."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for consumer in members:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None and seen is not None:
                seen[message.partition()] = seen.get(message.partition(), 0) + 1
                consumer.commit(message=message, asynchronous=False)
        owned = [_assigned(c) for c in members]
        assert sum(len(o) for o in owned) == len(set().union(*owned)), owned
        if done():
            return True
    return False


def test_librdkafka_members_share_and_take_back(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    first = _member(bootstrap, "kg")
    second = None
    try:
        seen: dict[int, int] = {}
        assert _poll_until([first], lambda: sum(seen.values()) == 60, seen)
        assert _assigned(first) == set(range(PARTITIONS))
        second = _member(bootstrap, "kg")
        assert _poll_until([first, second],
                           lambda: len(_assigned(first)) == 3 and len(_assigned(second)) == 3)
        committed = first.committed([CTopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                    timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS

        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(WAIT_S)
        assert [(g.group_id, g.type.name, g.state.name) for g in listed.valid] == [
            ("kg", "CONSUMER", "STABLE")]
        described = admin.describe_consumer_groups(["kg"])["kg"].result(WAIT_S)
        assert described.type.name == "CONSUMER"
        assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [3, 3]

        second.close()
        second = None
        assert _poll_until([first], lambda: len(_assigned(first)) == PARTITIONS)
        # Nothing read twice: the second member started from the first one's commits.
        assert seen == {p: 10 for p in range(PARTITIONS)}
    finally:
        first.close()
        if second is not None:
            second.close()


def test_range_assignor_chosen_by_the_client(kip848_broker):
    bootstrap = kip848_broker.bootstrap
    members = [_member(bootstrap, "kr", **{"group.remote.assignor": "range"})
               for _ in range(2)]
    try:
        assert _poll_until(members, lambda: all(len(_assigned(c)) == 3 for c in members))
        # range gives each member a contiguous run.
        runs = sorted(sorted(_assigned(c)) for c in members)
        assert runs == [[0, 1, 2], [3, 4, 5]]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups(["kr"])["kr"].result(WAIT_S)
        assert described.partition_assignor == "range"
    finally:
        for consumer in members:
            consumer.close()


def test_unknown_remote_assignor_is_refused(kip848_broker):
    consumer = _member(kip848_broker.bootstrap, "ku", **{"group.remote.assignor": "nope"})
    try:
        deadline = time.monotonic() + WAIT_S
        error = None
        while error is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                error = message.error()
        # librdkafka: a fatal error naming Kafka's UNSUPPORTED_ASSIGNOR message.
        assert error is not None and error.name() == "_FATAL"
        assert "assignor or its version range is not supported" in error.str()
    finally:
        consumer.close()


# --- Kafka's Java consumer ----------------------------------------------------------------



@pytest.fixture(scope="module")
def java_member(tmp_path_factory):
    """``(java, classpath)`` to run ``ConsumerGroupMember`` (compiled here)."""
    return compile_member(tmp_path_factory.mktemp("java-member"))


@pytest.mark.kafka
@pytest.mark.slow
def test_java_consumer_and_librdkafka_in_one_group(kip848_broker, java_member):
    java, classpath = java_member
    bootstrap = kip848_broker.bootstrap
    process = start_member(java, classpath, bootstrap, "kj", TOPIC, 25)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(
        line.rstrip() for line in process.stdout), daemon=True)  # type: ignore[union-attr]
    reader.start()
    other = None
    try:
        deadline = time.monotonic() + WAIT_S
        while sum(line.startswith("RECORD") for line in lines) < 60 and \
                time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert sum(line.startswith("RECORD") for line in lines) == 60, lines[-20:]
        assert "ASSIGNED 0,1,2,3,4,5" in lines
        other = _member(bootstrap, "kj")
        assert _poll_until([other], lambda: len(_assigned(other)) == 3)
        deadline = time.monotonic() + WAIT_S
        while not any(line.startswith("REVOKED") for line in lines) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        revoked = next(line for line in lines if line.startswith("REVOKED"))
        assert {int(p) for p in revoked.split()[1].split(",")} == _assigned(other)
        other.close()
        other = None
        deadline = time.monotonic() + WAIT_S
        while lines.count("ASSIGNED 0,1,2,3,4,5") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lines.count("ASSIGNED 0,1,2,3,4,5") == 2, lines[-20:]
        ask_to_close(process)
        assert process.wait(60) == 0
        reader.join(10)
        assert lines[-1] == "CLOSED"
        # Each record once: the librdkafka member read nothing (no new records) and the
        # Java one never re-read what it had committed.
        assert sum(line.startswith("RECORD") for line in lines) == 60
    finally:
        if other is not None:
            other.close()
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_librdkafka_members_go_on_across_a_broker_restart(broker_factory, tmp_path):
    """The group comes back from its records: the members keep their ids and partitions
    (no rejoin, nothing owned twice), the committed offsets are kept, and they read what
    is produced after the restart."""
    broker = broker_factory(config=GROUP_CONFIG, data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, PARTITIONS)
    bootstrap = broker.bootstrap
    host, port = bootstrap.split(":")
    members = [_member(bootstrap, "kz") for _ in range(2)]
    try:
        assert _poll_until(members, lambda: all(len(_assigned(c)) == 3 for c in members))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        before = admin.describe_consumer_groups(["kz"])["kz"].result(WAIT_S)
        ids = sorted(m.member_id for m in before.members)
        broker.stop()
        broker = broker_factory(config=GROUP_CONFIG, data_dir=tmp_path / "data",
                                listen=(host, int(port)))
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(60):
            producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(10) == 0
        seen: dict[int, int] = {}
        assert _poll_until(members, lambda: sum(seen.values()) == 60, seen)
        assert seen == {p: 10 for p in range(PARTITIONS)}
        admin = AdminClient({"bootstrap.servers": bootstrap})  # none of the old connections
        after = admin.describe_consumer_groups(["kz"])["kz"].result(WAIT_S)
        assert sorted(m.member_id for m in after.members) == ids
        committed = members[0].committed(
            [CTopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS
    finally:
        for consumer in members:
            consumer.close()


def test_regular_expression_subscription_follows_new_topics(kip848_broker):
    """librdkafka sends a ``^`` subscription as SubscribedTopicRegex: the broker matches it
    (RE2, whole names) against the topics, and again when a topic is created or deleted."""
    bootstrap = kip848_broker.bootstrap
    kip848_broker.store.create_topic("other", 1)
    consumer = _member(bootstrap, "kx")
    consumer.subscribe(["^k[a-z]+$"])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        assert _poll_until([consumer], lambda: len(consumer.assignment()) == PARTITIONS)
        admin.create_topics([NewTopic("kz", 2, 1)])["kz"].result(WAIT_S)
        assert _poll_until([consumer], lambda: len(consumer.assignment()) == PARTITIONS + 2)
        assert {tp.topic for tp in consumer.assignment()} == {TOPIC, "kz"}
        described = admin.describe_consumer_groups(["kx"])["kx"].result(WAIT_S)
        assert len(described.members[0].assignment.topic_partitions) == PARTITIONS + 2
        admin.delete_topics(["kz"])["kz"].result(WAIT_S)
        assert _poll_until([consumer], lambda: len(consumer.assignment()) == PARTITIONS)
    finally:
        consumer.close()


def test_offline_migration_between_protocols(kip848_broker):
    """An empty classic group becomes a consumer group when a member of the new protocol
    joins (and back): the committed offsets carry over both ways; a classic member joins
    the consumer group while it has members (online migration)."""
    bootstrap = kip848_broker.bootstrap
    seen: dict[int, int] = {}
    classic = _member(bootstrap, "km", **{"group.protocol": "classic",
                                          "session.timeout.ms": 6000})
    try:
        assert _poll_until([classic], lambda: sum(seen.values()) == 20, seen)
    finally:
        classic.close()
    modern = _member(bootstrap, "km")
    try:
        assert _poll_until([modern], lambda: sum(seen.values()) == 60, seen)
        assert seen == {p: 10 for p in range(PARTITIONS)}  # resumed from the commits
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(WAIT_S)
        assert [(g.group_id, g.type.name) for g in listed.valid] == [("km", "CONSUMER")]
        # A classic member may join it now (online migration): it gets a share.
        joined = _member(bootstrap, "km", **{"group.protocol": "classic",
                                             "session.timeout.ms": 6000})
        try:
            assert _poll_until([modern, joined], lambda: len(_assigned(joined)) == 3)
        finally:
            joined.close()
    finally:
        modern.close()
    back = _member(bootstrap, "km", **{"group.protocol": "classic"})
    try:
        assert _poll_until([back], lambda: len(_assigned(back)) == PARTITIONS)
        committed = back.committed([CTopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                   timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS
    finally:
        back.close()


def test_transactional_offsets_of_a_consumer_group_member(kip848_broker):
    """A consume-transform-produce loop: the librdkafka member's group metadata (member id
    and epoch) goes with the offsets into the transaction (TxnOffsetCommit checks the member
    epoch of a consumer group); the offsets are committed when the transaction is."""
    bootstrap = kip848_broker.bootstrap
    kip848_broker.store.create_topic("kout", 1)
    consumer = _member(bootstrap, "ktx", **{"isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ktx-1"})
    try:
        producer.init_transactions(WAIT_S)
        assert _poll_until([consumer], lambda: len(_assigned(consumer)) == PARTITIONS)
        copied = 0
        deadline = time.monotonic() + WAIT_S
        while copied < 60 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            producer.begin_transaction()
            producer.produce("kout", value=message.value())
            producer.send_offsets_to_transaction(
                [CTopicPartition(message.topic(), message.partition(), message.offset() + 1)],
                consumer.consumer_group_metadata(), WAIT_S)
            producer.commit_transaction(WAIT_S)
            copied += 1
        assert copied == 60
        committed = consumer.committed([CTopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                       timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.slow
def test_java_consumer_goes_on_across_a_broker_restart(broker_factory, tmp_path, java_member):
    """Kafka 4.4's Java consumer with ``group.protocol=consumer`` through a restart of the
    broker (its group coordinator): it keeps its partitions, reads what is produced after the
    restart, and reads no record twice (its commits were kept)."""
    java, classpath = java_member
    broker = broker_factory(config=GROUP_CONFIG, data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, PARTITIONS)
    bootstrap = broker.bootstrap
    host, port = bootstrap.split(":")
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(60):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    member = JavaMember(java, classpath, bootstrap, "kr", TOPIC, 35)
    try:
        member.wait_for(lambda: len(member.records()) == 60
                        and "EPOCH" in " ".join(member.lines[-3:]),
                        "60 records read and committed", WAIT_S)
        assert "ASSIGNED 0,1,2,3,4,5" in member.lines
        broker.stop()
        broker = broker_factory(config=GROUP_CONFIG, data_dir=tmp_path / "data",
                                listen=(host, int(port)))
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(60, 120):
            producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(10) == 0
        member.wait_for(lambda: len(member.records()) >= 120,
                        "the records produced after the restart", WAIT_S)
        assert member.finish(60) == 0
        read = member.records()
        assert len(read) == len(set(read)) == 120, "a record read twice or missed"
        # The member kept its partitions (the group came back from its records): assigned
        # once, revoked only when it closed.
        assert member.events() == ["ASSIGNED 0,1,2,3,4,5", "REVOKED 0,1,2,3,4,5", "CLOSED"], \
            member.events()
    finally:
        member.kill()
