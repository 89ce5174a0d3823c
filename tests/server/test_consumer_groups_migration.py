"""Online migration of consumer groups (Kafka 4.x): a classic member (JoinGroup, SyncGroup,
Heartbeat: ``group.protocol=classic``) joins a KIP-848 consumer group that has members and
takes part in the coordinator's assignment; through real clients against ``seglog serve``
(librdkafka in both protocols, kafka-python as the classic one). Sessions are short so every
wait is short; every wait is bounded."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer

from seglog.coordinator import consumer_group_protocol as protocol

pytestmark = pytest.mark.clients

WAIT_S = 30.0
TOPIC = "mt"
PARTITIONS = 6
GROUP_CONFIG = {
    "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 300}


@pytest.fixture
def broker(broker_factory, tmp_path):
    """A broker with short consumer-group sessions and a 6-partition topic of 60 records."""
    started = broker_factory(config=GROUP_CONFIG, data_dir=tmp_path / "data")
    started.store.create_topic(TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": started.bootstrap})
    for i in range(60):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    return started


def _librdkafka(bootstrap: str, group: str, group_protocol: str) -> Consumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": group,
                "group.protocol": group_protocol, "auto.offset.reset": "earliest",
                "enable.auto.commit": False}
    if group_protocol == "classic":
        settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    consumer = Consumer(settings)
    consumer.subscribe([TOPIC])
    return consumer


def _assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _poll_until(members: list[Consumer], done, seen: dict[int, int]) -> bool:
    """Poll every member until ``done()`` (bounded by WAIT_S); counts records by partition
    in ``seen`` (committing each), and checks no partition is assigned to two members at
    any time."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for consumer in members:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen[message.partition()] = seen.get(message.partition(), 0) + 1
                consumer.commit(message=message, asynchronous=False)
        owned = [_assigned(c) for c in members]
        assert sum(len(o) for o in owned) == len(set().union(*owned)), owned
        if done():
            return True
    return False


def test_classic_librdkafka_member_joins_a_consumer_group(broker):
    bootstrap = broker.bootstrap
    modern = _librdkafka(bootstrap, "mg", "consumer")
    classic = None
    try:
        seen: dict[int, int] = {}
        assert _poll_until([modern], lambda: len(_assigned(modern)) == PARTITIONS, seen)
        classic = _librdkafka(bootstrap, "mg", "classic")
        assert _poll_until([modern, classic], lambda: len(_assigned(modern)) == 3
                           and len(_assigned(classic)) == 3 and sum(seen.values()) == 60,
                           seen)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(WAIT_S)
        assert [(g.group_id, g.type.name) for g in listed.valid] == [("mg", "CONSUMER")]
        described = admin.describe_consumer_groups(["mg"])["mg"].result(WAIT_S)
        assert described.type.name == "CONSUMER"
        assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [3, 3]

        classic.close()
        classic = None
        assert _poll_until([modern], lambda: len(_assigned(modern)) == PARTITIONS, seen)
        # Every record once: each member started from the other's commits.
        assert seen == {p: 10 for p in range(PARTITIONS)}
    finally:
        modern.close()
        if classic is not None:
            classic.close()


def test_kafka_python_member_joins_a_consumer_group(broker):
    bootstrap = broker.bootstrap
    modern = _librdkafka(bootstrap, "mk", "consumer")
    old = None
    try:
        seen: dict[int, int] = {}
        assert _poll_until([modern], lambda: len(_assigned(modern)) == PARTITIONS, seen)
        old = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="mk",
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=6000, heartbeat_interval_ms=300,
                            consumer_timeout_ms=100)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for records in old.poll(timeout_ms=100).values():
                for record in records:
                    seen[record.partition] = seen.get(record.partition, 0) + 1
                old.commit()
            _poll_until([modern], lambda: True, seen)
            mine = {tp.partition for tp in old.assignment()}
            theirs = _assigned(modern)
            assert not mine & theirs, (mine, theirs)
            if len(mine) == 3 and len(theirs) == 3 and sum(seen.values()) == 60:
                break
        else:
            pytest.fail(f"no 3/3 split: {old.assignment()} {modern.assignment()} {seen}")
        assert seen == {p: 10 for p in range(PARTITIONS)}
    finally:
        modern.close()
        if old is not None:
            old.close()


def test_consumer_protocol_codec_round_trip():
    # A v1 subscription (kafka-python's shape without owned partitions: v0).
    raw = (b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x02mt" + b"\xff\xff\xff\xff"
           + b"\x00\x00\x00\x01" + b"\x00\x02mt" + b"\x00\x00\x00\x02"
           + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x04")
    decoded = protocol.decode_subscription(raw)
    assert decoded == protocol.Subscription(1, ("mt",), {"mt": frozenset({1, 4})}, None)
    assert protocol.encode_assignment({"mt": frozenset({2, 0})}, 1) == (
        b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x02mt" + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02" + b"\xff\xff\xff\xff")
    with pytest.raises(ValueError):
        protocol.decode_subscription(b"\x00\x01\x00\x00\x00\x05")


def _subscription(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    """A v1 ConsumerProtocolSubscription, written by hand as a Java consumer does."""
    def string(text: str) -> bytes:
        return len(text).to_bytes(2, "big") + text.encode()

    def ints(values: list[int]) -> bytes:
        return len(values).to_bytes(4, "big") + b"".join(v.to_bytes(4, "big") for v in values)

    out = b"\x00\x01" + len(topics).to_bytes(4, "big") + b"".join(string(t) for t in topics)
    out += b"\xff\xff\xff\xff" + len(owned).to_bytes(4, "big")
    return out + b"".join(string(t) + ints(ps) for t, ps in owned.items())


def test_classic_member_reconciles_and_is_stored():
    """The coordinator alone: a classic member joins a consumer group (MEMBER_ID_REQUIRED
    first), gets the partitions the consumer member gives up only after that member
    revoked them (REBALANCE_IN_PROGRESS on its heartbeat until then), commits with its
    generation, and its classic metadata survives the records."""
    import uuid

    from seglog import error_codes as codes
    from seglog.coordinator import consumer_group as kg
    from seglog.coordinator import consumer_group_records as kgr

    written: dict[str, kg.Group | None] = {}
    coordinator = kg.ConsumerGroupCoordinator(kg.ConsumerGroupConfig(), lambda: {"t": 4},
                                              lambda g, group: written.update({g: group}))
    first = coordinator.heartbeat(kg.HeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={}), 0)
    assert first.assignment == {"t": frozenset({0, 1, 2, 3})}
    join = kg.ClassicJoin("g", "", None, "consumer", (("range", _subscription(["t"], {})),),
                          session_timeout_ms=10000, rebalance_timeout_ms=30000, api_version=9)
    required = coordinator.classic_join(join, 1)
    assert required.error_code == codes.MEMBER_ID_REQUIRED
    joined = coordinator.classic_join(join._replace(member_id=required.member_id), 2)
    classic_id = joined.member_id
    assert (joined.error_code, joined.protocol_name) == (codes.NONE, "range")
    assert joined.generation_id == coordinator.group("g").group_epoch
    # Its partitions are still the consumer member's: it gets none yet, and is told to
    # rejoin once they are free.
    assert coordinator.classic_sync("g", classic_id, None, joined.generation_id, "consumer",
                                    "range", 3) == (codes.NONE, protocol.encode_assignment(
                                        {}, 1))
    assert coordinator.classic_heartbeat("g", classic_id, None, joined.generation_id - 1,
                                         4) == codes.ILLEGAL_GENERATION
    assert coordinator.classic_heartbeat("g", classic_id, None, joined.generation_id,
                                         4) == codes.NONE
    revoke = coordinator.heartbeat(kg.HeartbeatRequest("g", "m1", first.member_epoch,
                                                       owned={"t": frozenset(range(4))}), 5)
    kept = revoke.assignment["t"]
    assert len(kept) == 2
    coordinator.heartbeat(kg.HeartbeatRequest("g", "m1", revoke.member_epoch,
                                              owned={"t": kept}), 6)
    assert coordinator.classic_heartbeat("g", classic_id, None, joined.generation_id,
                                         7) == codes.REBALANCE_IN_PROGRESS
    rejoined = coordinator.classic_join(join._replace(member_id=classic_id), 8)
    error, assignment = coordinator.classic_sync("g", classic_id, None,
                                                 rejoined.generation_id, "consumer", "range", 9)
    assert (error, assignment) == (codes.NONE, protocol.encode_assignment(
        {"t": frozenset(range(4)) - kept}, 1))
    assert coordinator.validate_offset_commit("g", classic_id, rejoined.generation_id, 7) == 0
    assert coordinator.validate_offset_commit("g", classic_id, 99, 7) == codes.ILLEGAL_GENERATION

    group = written["g"]
    assert group is not None
    topic_id = uuid.uuid4()
    loaded = kgr.load_groups(kgr.group_records(group, {"t": topic_id}), {topic_id: "t"},
                             now_ms=10, session_timeout_ms=45000)["g"]
    member = loaded.members[classic_id]
    assert member.classic_protocols == (("range", _subscription(["t"], {})),)
    assert member.classic_session_timeout_ms == 10000
    assert member.session_deadline_ms == 10 + 10000
    assert not loaded.members["m1"].uses_classic_protocol()

    assert coordinator.classic_leave("g", [(classic_id, None), ("nobody", None)]) == [
        codes.NONE, codes.UNKNOWN_MEMBER_ID]
    assert set(coordinator.group("g").members) == {"m1"}


def test_classic_group_upgrades_when_a_consumer_member_joins(broker):
    """Online upgrade: a classic group (librdkafka, group.protocol=classic) with a member
    becomes a consumer group when a member of the consumer protocol joins; both share the
    partitions, never one twice, every record read once."""
    bootstrap = broker.bootstrap
    classic = _librdkafka(bootstrap, "up", "classic")
    modern = None
    try:
        seen: dict[int, int] = {}
        assert _poll_until([classic], lambda: len(_assigned(classic)) == PARTITIONS
                           and sum(seen.values()) >= 12, seen)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(WAIT_S)
        assert [(g.group_id, g.type.name) for g in listed.valid] == [("up", "CLASSIC")]
        modern = _librdkafka(bootstrap, "up", "consumer")
        assert _poll_until([classic, modern], lambda: len(_assigned(modern)) == 3
                           and len(_assigned(classic)) == 3 and sum(seen.values()) == 60,
                           seen)
        listed = admin.list_consumer_groups().result(WAIT_S)
        assert [(g.group_id, g.type.name) for g in listed.valid] == [("up", "CONSUMER")]
        assert seen == {p: 10 for p in range(PARTITIONS)}
    finally:
        classic.close()
        if modern is not None:
            modern.close()


def test_consumer_group_downgrades_when_the_last_consumer_member_leaves(broker):
    """Online downgrade: a classic member (librdkafka) joined a consumer group; when the
    member of the consumer protocol leaves, the group becomes a classic group again and the
    classic member, after its rebalance, owns every partition and reads on."""
    bootstrap = broker.bootstrap
    modern = _librdkafka(bootstrap, "down", "consumer")
    classic = None
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        seen: dict[int, int] = {}
        assert _poll_until([modern], lambda: len(_assigned(modern)) == PARTITIONS, seen)
        classic = _librdkafka(bootstrap, "down", "classic")
        assert _poll_until([modern, classic], lambda: len(_assigned(modern)) == 3
                           and len(_assigned(classic)) == 3, seen)
        modern.close()
        modern = None
        assert _poll_until([classic], lambda: len(_assigned(classic)) == PARTITIONS
                           and sum(seen.values()) == 60, seen)
        listed = admin.list_consumer_groups().result(WAIT_S)
        assert [(g.group_id, g.type.name, g.state.name) for g in listed.valid] == [
            ("down", "CLASSIC", "STABLE")]
        described = admin.describe_consumer_groups(["down"])["down"].result(WAIT_S)
        assert described.type.name == "CLASSIC" and len(described.members) == 1
        assert seen == {p: 10 for p in range(PARTITIONS)}
    finally:
        if modern is not None:
            modern.close()
        if classic is not None:
            classic.close()


@pytest.mark.parametrize("policy", ["upgrade", "disabled"])
def test_migration_policy_limits_the_conversions(broker_factory, tmp_path, policy):
    """``group.consumer.migration.policy``: without downgrade the group stays a consumer
    group of its classic member when the consumer member leaves; without upgrade a member
    of the consumer protocol may not join a classic group with members (Kafka:
    GROUP_ID_NOT_FOUND, fatal for librdkafka). A classic member joins a consumer group
    under every policy."""
    started = broker_factory(config=dict(GROUP_CONFIG, **{
        "group.consumer.migration.policy": policy}), data_dir=tmp_path / "data")
    started.store.create_topic(TOPIC, PARTITIONS)
    bootstrap = started.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    seen: dict[int, int] = {}
    modern = _librdkafka(bootstrap, "p", "consumer")
    classic = None
    try:
        assert _poll_until([modern], lambda: len(_assigned(modern)) == PARTITIONS, seen)
        classic = _librdkafka(bootstrap, "p", "classic")
        assert _poll_until([modern, classic], lambda: len(_assigned(classic)) == 3, seen)
        modern.close()
        modern = None
        assert _poll_until([classic], lambda: len(_assigned(classic)) == PARTITIONS, seen)
        listed = admin.list_consumer_groups().result(WAIT_S)
        assert [(g.group_id, g.type.name) for g in listed.valid] == [("p", "CONSUMER")]
    finally:
        if modern is not None:
            modern.close()
        if classic is not None:
            classic.close()
    old = _librdkafka(bootstrap, "q", "classic")
    try:
        assert _poll_until([old], lambda: len(_assigned(old)) == PARTITIONS, seen)
        joining = _librdkafka(bootstrap, "q", "consumer")
        try:
            deadline = time.monotonic() + WAIT_S
            error = None
            while error is None and not _assigned(joining) and time.monotonic() < deadline:
                old.poll(0.05)
                message = joining.poll(0.1)
                if message is not None and message.error() is not None:
                    error = message.error()
            if policy == "disabled":
                assert error is not None and "group id does not exist" in error.str()
            else:  # upgraded: the joining member gets partitions
                assert error is None and _assigned(joining)
        finally:
            joining.close()
    finally:
        old.close()


def test_fenced_consumer_member_downgrades_and_protocols_must_be_shared():
    """The coordinators alone: a classic member whose protocols share no name with the
    group's classic members is refused (INCONSISTENT_GROUP_PROTOCOL); when the consumer
    member's session expires, the remaining classic members become a classic group at the
    epoch before the fencing, rebalancing (their heartbeats: REBALANCE_IN_PROGRESS)."""
    from seglog import error_codes as codes
    from seglog.coordinator import classic_group as cg
    from seglog.coordinator import consumer_group as kg

    coordinator = kg.ConsumerGroupCoordinator(kg.ConsumerGroupConfig(), lambda: {"t": 4})
    coordinator.heartbeat(kg.HeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={}), 0)
    join = kg.ClassicJoin("g", "c1", None, "consumer", (("range", _subscription(["t"], {})),),
                          session_timeout_ms=60000, rebalance_timeout_ms=30000)
    joined = coordinator.classic_join(join, 1)
    assert joined.error_code == codes.NONE
    assert coordinator.classic_sync("g", "c1", None, joined.generation_id, None, None, 2)[0] \
        == codes.NONE
    other = join._replace(member_id="c2", protocols=(("roundrobin", _subscription(["t"], {})),))
    assert coordinator.classic_join(other, 2).error_code == codes.INCONSISTENT_GROUP_PROTOCOL
    epoch = coordinator.group("g").group_epoch
    assert coordinator.poll(45_001) == [("g", "m1")]  # its session expired
    downgraded = coordinator.take_for_downgrade("g", max_size=10)
    assert downgraded is not None and not coordinator.has_group("g")
    assert downgraded.generation_id == epoch
    assert [m.member_id for m in downgraded.members] == ["c1"]

    classic = cg.ClassicGroupCoordinator(cg.ClassicGroupConfig(initial_rebalance_delay_ms=0))
    assert classic.adopt_downgraded("g", downgraded, 45_002)
    assert classic.state("g") == cg.PREPARING_REBALANCE
    assert classic.heartbeat(group_id="g", member_id="c1", group_instance_id=None,
                             generation_id=epoch, now_ms=45_003) == codes.REBALANCE_IN_PROGRESS


def test_classic_member_told_to_rejoin_is_fenced_after_its_rebalance_timeout():
    """Kafka's join timeout: a classic member answered REBALANCE_IN_PROGRESS that keeps
    heartbeating but never rejoins is fenced once its rebalance timeout passed (its
    partitions go to the others); one that rejoins and syncs in time stays."""
    from seglog import error_codes as codes
    from seglog.coordinator import consumer_group as kg

    coordinator = kg.ConsumerGroupCoordinator(kg.ConsumerGroupConfig(), lambda: {"t": 4})
    coordinator.heartbeat(kg.HeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={}), 0)
    join = kg.ClassicJoin("g", "c1", None, "consumer", (("range", _subscription(["t"], {})),),
                          session_timeout_ms=60000, rebalance_timeout_ms=1000)
    joined = coordinator.classic_join(join, 0)
    assert coordinator.classic_sync("g", "c1", None, joined.generation_id, None, None, 10)[0] \
        == codes.NONE
    # A third member bumps the epoch: c1 must rejoin.
    coordinator.heartbeat(kg.HeartbeatRequest(
        "g", "m2", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={}), 20)
    assert coordinator.classic_heartbeat("g", "c1", None, joined.generation_id, 100) == \
        codes.REBALANCE_IN_PROGRESS
    assert coordinator.poll(1099) == []
    assert coordinator.classic_heartbeat("g", "c1", None, joined.generation_id, 1000) == \
        codes.REBALANCE_IN_PROGRESS  # the deadline stays the first one's
    assert coordinator.poll(1100) == [("g", "c1")]
    assert set(coordinator.group("g").members) == {"m1", "m2"}
