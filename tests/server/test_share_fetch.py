"""ShareFetch / ShareAcknowledge on ``seglog serve`` with librdkafka's ShareConsumer
(confluent-kafka 2.16): several members on one partition get every record once, a RELEASEd
record comes back with a higher delivery count, a REJECTed one never does, the records of a
member that stops polling come back to another once their acquisition locks expire, a
member's connection closing releases its records at once."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog import error_codes as codes
from seglog.server.share_partitions import find_share_partition_manager

try:
    from confluent_kafka import AcknowledgeType
except ImportError:  # pragma: no cover - older confluent-kafka
    AcknowledgeType = None

pytestmark = pytest.mark.clients

TOPIC = "q"
WAIT_S = 30.0
#: A short acquisition lock for the expiry tests (Kafka's lower bound is configurable).
LOCK_CONFIG = {"group.share.min.record.lock.duration.ms": 1000,
               "group.share.record.lock.duration.ms": 2000}


def _topic(broker, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)


def _produce(broker, count: int, start: int = 0, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def _consumer(broker, group: str, **config) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              **config})
    consumer.subscribe([TOPIC])
    return consumer


def _poll(consumer, timeout_s: float = 0.2) -> list:
    out = []
    for m in consumer.poll(timeout_s):
        assert m.error() is None, m.error()
        out.append(m)
    return out


def _initialized(broker, group: str) -> bool:
    """Whether the group's share partition of the topic is loaded on the broker (its start
    offset set by share.auto.offset.reset=latest: records produced after are delivered)."""
    manager = find_share_partition_manager(broker.state)
    if manager is None:
        return False
    return any(e.group_id == group and e.ready is not None and e.ready.done()
               and e.ready.result() == 0 for e in list(manager.entries.values()))


def _initialized_state(broker, group: str, topic_id, topic: str = "open") -> bool:
    """Whether the share coordinator holds the share partition's state (the group
    coordinator initialized it)."""
    from seglog.server.share_persister import find_share_persister
    import asyncio
    persister = find_share_persister(broker.state)
    if persister is None:
        return False
    from seglog.types import TopicPartition
    epoch = broker.state.cluster.leader_replica(TopicPartition(topic, 0)).leader_epoch
    code, _state = asyncio.run_coroutine_threadsafe(
        persister.read_state(group, topic_id, 0, epoch), broker.state.loop).result(10)
    return int(code) == 0


def _join(broker, consumers, group: str = "g") -> None:
    """Poll until the members joined and the share partition is initialized (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while not _initialized(broker, group):
        assert time.monotonic() < deadline, "the share partition never initialized"
        for consumer in consumers:
            assert _poll(consumer, 0.1) == []
    for _ in range(5):  # the others' first fetches
        for consumer in consumers:
            assert _poll(consumer, 0.1) == []


def test_members_of_one_partition_get_every_record_once(broker_factory):
    broker = broker_factory()
    _topic(broker)
    consumers = [_consumer(broker, "g") for _ in range(3)]
    try:
        _join(broker, consumers)
        _produce(broker, 300)
        seen: dict[int, int] = {}
        by_member = [0, 0, 0]
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 300 and time.monotonic() < deadline:
            for index, consumer in enumerate(consumers):
                for m in _poll(consumer, 0.05):
                    seen[m.offset()] = seen.get(m.offset(), 0) + 1
                    by_member[index] += 1
        assert sorted(seen) == list(range(300))
        assert set(seen.values()) == {1}, "a record delivered twice"
    finally:
        for consumer in consumers:
            consumer.close()


@pytest.mark.skipif(AcknowledgeType is None, reason="confluent-kafka without AcknowledgeType")
def test_release_redelivers_with_a_higher_count_and_reject_never(broker_factory):
    broker = broker_factory()
    _topic(broker)
    consumer = _consumer(broker, "g", **{"share.acknowledgement.mode": "explicit"})
    try:
        _join(broker, [consumer])
        _produce(broker, 4)
        deliveries: list[tuple[int, int]] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len({o for o, _ in deliveries}) < 4:
            for m in _poll(consumer):
                deliveries.append((m.offset(), m.delivery_count()))
                ack = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE,
                       2: AcknowledgeType.REJECT, 3: AcknowledgeType.ACCEPT}[m.offset()]
                if m.offset() == 1 and m.delivery_count() >= 2:
                    ack = AcknowledgeType.ACCEPT
                consumer.acknowledge(m, ack)
            consumer.commit_sync()
        # Offset 1 again, second delivery, once accepted nothing more.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (1, 2) not in deliveries:
            for m in _poll(consumer):
                deliveries.append((m.offset(), m.delivery_count()))
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            consumer.commit_sync()
        for _ in range(5):
            for m in _poll(consumer):
                deliveries.append((m.offset(), m.delivery_count()))
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            consumer.commit_sync()
        assert sorted(deliveries) == [(0, 1), (1, 1), (1, 2), (2, 1), (3, 1)]
    finally:
        consumer.close()


def test_a_member_that_stops_polling_loses_its_records_when_the_locks_expire(broker_factory):
    broker = broker_factory(config=LOCK_CONFIG)
    _topic(broker)
    stalled = _consumer(broker, "g", **{"share.acknowledgement.mode": "explicit"})
    other = None
    try:
        _join(broker, [stalled])
        _produce(broker, 10)
        held: list = []
        deadline = time.monotonic() + WAIT_S
        while not held and time.monotonic() < deadline:
            held = _poll(stalled)
        assert held, "the first member got nothing"
        held_offsets = sorted(m.offset() for m in held)
        # The other member comes only now (librdkafka prefetches for a member that is not
        # polled: it would hold records of its own meanwhile).
        other = _consumer(broker, "g")
        # The stalled member neither acknowledges nor polls: after the lock (2 s) the other
        # member gets those records, delivered a second time.
        again: dict[int, int] = {}
        deadline = time.monotonic() + WAIT_S
        while not set(held_offsets) <= set(again) and time.monotonic() < deadline:
            for m in _poll(other):
                if m.offset() in held_offsets:
                    again[m.offset()] = m.delivery_count()
        assert sorted(again) == held_offsets
        assert set(again.values()) == {2}
    finally:
        if other is not None:
            other.close()
        stalled.close()


def test_closing_a_member_releases_its_records_at_once(broker_factory):
    broker = broker_factory()  # 30 s locks: only the release can hand them on in time
    _topic(broker)
    first = _consumer(broker, "g", **{"share.acknowledgement.mode": "explicit"})
    second = None
    try:
        _join(broker, [first])
        _produce(broker, 5)
        held: list = []
        deadline = time.monotonic() + WAIT_S
        while not held and time.monotonic() < deadline:
            held = _poll(first)
        assert held
        offsets = sorted(m.offset() for m in held)
        second = _consumer(broker, "g")
        started = time.monotonic()
        first.close()  # nothing acknowledged: the session's close releases them
        got: dict[int, int] = {}
        while not set(offsets) <= set(got) and time.monotonic() < started + 20:
            got.update((m.offset(), m.delivery_count()) for m in _poll(second))
        assert sorted(got) == offsets
        assert set(got.values()) == {2}
    finally:
        if second is not None:
            second.close()


def test_a_restart_redelivers_the_unacknowledged_records_with_their_counts(broker_factory,
                                                                            tmp_path):
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir=data_dir)
    _topic(broker)
    first = _consumer(broker, "g", **{"share.acknowledgement.mode": "explicit"})
    _join(broker, [first])
    _produce(broker, 10)
    held: list = []
    deadline = time.monotonic() + WAIT_S
    while len(held) < 10 and time.monotonic() < deadline:
        held += _poll(first)
    assert sorted(m.offset() for m in held) == list(range(10))
    for m in held:
        if m.offset() < 5:
            first.acknowledge(m, AcknowledgeType.ACCEPT)
        elif m.offset() == 5:
            first.acknowledge(m, AcknowledgeType.RELEASE)
        elif m.offset() == 6:
            first.acknowledge(m, AcknowledgeType.REJECT)
        # 7-9: still acquired when the broker stops
    first.commit_sync()
    broker.stop()
    first.close()
    broker = broker_factory(data_dir=data_dir)
    second = _consumer(broker, "g")
    try:
        got: dict[int, int] = {}
        deadline = time.monotonic() + WAIT_S
        while len(got) < 4 and time.monotonic() < deadline:
            got.update((m.offset(), m.delivery_count()) for m in _poll(second))
        for _ in range(5):  # nothing else comes
            got.update((m.offset(), m.delivery_count()) for m in _poll(second))
        # 5 was released, 7-9 released when the member's connection closed with the
        # broker (Kafka's disconnect listener): each now delivered a second time; 0-4
        # accepted and 6 rejected never come back.
        assert got == {5: 2, 7: 2, 8: 2, 9: 2}
    finally:
        second.close()


def _group_configs(broker, group: str, **configs: str) -> None:
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value,
                    incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def test_group_configs_earliest_and_read_committed(broker_factory):
    broker = broker_factory()
    _topic(broker)
    _produce(broker, 2)  # before any member: only "earliest" delivers them
    for commit, values in ((False, [b"aborted-1", b"aborted-2"]), (True, [b"kept-1", b"kept-2"])):
        producer = Producer({"bootstrap.servers": broker.bootstrap,
                             "transactional.id": "tx", "linger.ms": 5})
        producer.init_transactions(30)
        producer.begin_transaction()
        for value in values:
            producer.produce(TOPIC, value=value, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    _group_configs(broker, "g", share_auto_offset_reset="earliest",
                   share_isolation_level="read_committed")
    consumer = _consumer(broker, "g")
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 4 and time.monotonic() < deadline:
            got += [m.value() for m in _poll(consumer)]
        for _ in range(5):
            got += [m.value() for m in _poll(consumer)]
        assert got == [b"v0", b"v1", b"kept-1", b"kept-2"]
    finally:
        consumer.close()


def test_share_fetch_and_acknowledge_check_read_on_group_and_topic(broker_factory):
    import datetime
    import uuid

    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    from test_admin_differential import Client

    broker = broker_factory({"authorizer.class.name":
                             "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                             "allow.everyone.if.no.acl.found": "true"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("open", 1, 1),
                                       NewTopic("closed", 1, 1)]).values():
        future.result(30)
    c = Client(broker.bootstrap)
    mm = c.m(3, 12)
    meta = c.call(3, 12, topics=tuple(mm.MetadataRequestTopic(topic_id=None, name=n)
                                      for n in ("open", "closed")),
                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    ids = {t.name: t.topic_id for t in meta.topics}
    names = {v: k for k, v in ids.items()}
    for future in admin.create_acls([AclBinding(
            kind, name, ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.ALL,
            AclPermissionType.ALLOW)
            for kind, name in ((ResourceType.TOPIC, "closed"),
                               (ResourceType.GROUP, "closed-group"))]).values():
        future.result(30)
    fm, am = c.m(78, 1), c.m(79, 1)
    member = str(uuid.uuid4())

    def fetch(group, epoch, topics, acks=False):
        return c.call(78, 1, group_id=group, member_id=member, share_session_epoch=epoch,
                      max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                      max_records=10, batch_size=10, forgotten_topics_data=(),
                      topics=tuple(fm.FetchTopic(topic_id=ids[t], partitions=(
                          fm.FetchPartition(partition_index=0, acknowledgement_batches=(
                              (fm.AcknowledgementBatch(first_offset=0, last_offset=0,
                                                       acknowledge_types=(1,)),)
                              if acks else ())),)) for t in topics))

    def ack(group, epoch, topics):
        return c.call(79, 1, group_id=group, member_id=member, share_session_epoch=epoch,
                      topics=tuple(am.AcknowledgeTopic(topic_id=ids[t], partitions=(
                          am.AcknowledgePartition(partition_index=0, acknowledgement_batches=(
                              am.AcknowledgementBatch(first_offset=0, last_offset=0,
                                                      acknowledge_types=(1,)),)),))
                          for t in topics))

    # The member joins (its partition's share state is initialized by the coordinator).
    deadline = time.monotonic() + WAIT_S
    epoch = 0
    while True:
        r = c.call(76, 1, group_id="g", member_id=member, member_epoch=epoch, rack_id=None,
                   subscribed_topic_names=("open",) if epoch == 0 else None)
        assert int(r.error_code) == 0, r
        epoch = r.member_epoch
        if r.assignment is not None and r.assignment.topic_partitions and _initialized_state(
                broker, "g", ids["open"]):
            break
        assert time.monotonic() < deadline, "never assigned"
        time.sleep(0.2)
    try:
        assert int(fetch("closed-group", 0, ["open"]).error_code) == \
            codes.GROUP_AUTHORIZATION_FAILED
        assert int(ack("closed-group", 1, ["open"]).error_code) == \
            codes.GROUP_AUTHORIZATION_FAILED
        r = fetch("g", 0, ["open", "closed"])
        assert int(r.error_code) == 0
        assert sorted((names[t.topic_id], int(p.error_code)) for t in r.responses
                      for p in t.partitions) == [
            ("closed", codes.TOPIC_AUTHORIZATION_FAILED), ("open", 0)]
        r = ack("g", 1, ["closed"])
        assert [(names[t.topic_id], int(p.error_code)) for t in r.responses
                for p in t.partitions] == [("closed", codes.TOPIC_AUTHORIZATION_FAILED)]
        r = fetch("g", 2, ["closed"], acks=True)
        assert [(names[t.topic_id], int(p.error_code), int(p.acknowledge_error_code))
                for t in r.responses for p in t.partitions] == [
            ("closed", codes.TOPIC_AUTHORIZATION_FAILED, codes.TOPIC_AUTHORIZATION_FAILED)]
    finally:
        c.close()


def test_a_full_share_session_cache_answers_limit_reached_after_the_wait(broker_factory):
    import datetime
    import uuid

    from test_admin_differential import Client

    broker = broker_factory({"group.share.max.share.sessions": 1})
    c = Client(broker.bootstrap)

    def open_session(member: str, wait_ms: int):
        return c.call(78, 1, group_id="g", member_id=member, share_session_epoch=0,
                      max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1,
                      max_bytes=1 << 20, max_records=10, batch_size=10, topics=(),
                      forgotten_topics_data=())

    try:
        first = str(uuid.uuid4())
        assert int(open_session(first, 0).error_code) == 0
        started = time.monotonic()
        r = open_session(str(uuid.uuid4()), 300)
        assert int(r.error_code) == codes.SHARE_SESSION_LIMIT_REACHED
        assert time.monotonic() - started >= 0.3
        assert int(open_session(first, 0).error_code) == 0  # its own session: replaced
    finally:
        c.close()


def test_a_share_fetch_over_the_consumer_byte_rate_is_answered_throttled(broker_factory):
    import datetime
    import uuid

    from quota_helpers import RawClient, alter_quotas
    USER, CLIENT = "user", "client-id"

    broker = broker_factory(quota_window_num=3)
    _topic(broker)
    with RawClient(broker.bootstrap, client_id="slow") as c:
        assert alter_quotas(c, [([(USER, "ANONYMOUS"), (CLIENT, "slow")],
                                 {"consumer_byte_rate": 1000})])[0][1] == 0
        mm = c.m(3, 12)
        topic_id = c.call(3, 12, topics=(mm.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                          allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False).topics[0].topic_id
        member = str(uuid.uuid4())
        deadline = time.monotonic() + WAIT_S
        epoch = 0
        while True:  # join: the share partition's state is initialized on assignment
            r = c.call(76, 1, group_id="g", member_id=member, member_epoch=epoch,
                       rack_id=None, subscribed_topic_names=(TOPIC,) if epoch == 0 else None)
            assert int(r.error_code) == 0, r
            epoch = r.member_epoch
            if r.assignment is not None and r.assignment.topic_partitions and \
                    _initialized_state(broker, "g", topic_id, TOPIC):
                break
            assert time.monotonic() < deadline, "never assigned"
            time.sleep(0.2)
        fm = c.m(78, 1)
        session_epoch = 0
        throttled = []
        acquired = 0
        for round_ in range(20):
            if round_ == 1:
                producer = Producer({"bootstrap.servers": broker.bootstrap})
                for _ in range(50):
                    producer.produce(TOPIC, value=b"x" * 1000, partition=0)
                assert producer.flush(30) == 0
            r = c.call(78, 1, group_id="g", member_id=member,
                       share_session_epoch=session_epoch,
                       max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
                       max_bytes=1 << 20, max_records=5, batch_size=5,
                       forgotten_topics_data=(),
                       topics=(fm.FetchTopic(topic_id=topic_id, partitions=(
                           fm.FetchPartition(partition_index=0, acknowledgement_batches=()),))
                               ,) if session_epoch == 0 else ())
            session_epoch += 1
            assert int(r.error_code) == 0
            throttle_ms = int(r.throttle_time.total_seconds() * 1000)
            if throttle_ms:
                throttled.append((throttle_ms, len(r.responses)))
                break
            acquired += sum(len(p.acquired_records) for t in r.responses for p in t.partitions)
        # The first answer with records is over the quota (5 KB against 1000 B/s): Kafka's
        # throttleResponse, the throttle time and no partitions (the records stay acquired
        # until their lock expires, as in Kafka).
        assert acquired == 0
        assert throttled and throttled[0][0] > 0 and throttled[0][1] == 0


def test_any_well_formed_share_request_is_answered_with_kafka_codes(broker_factory):
    """Seeded random ShareFetch / ShareAcknowledge requests (odd epochs, member ids,
    partitions, limits, acknowledgement batches of any range and type) after a member joined
    and records exist: every one is answered on the same connection, with error codes Kafka
    has."""
    import datetime
    import random
    import uuid

    from test_admin_differential import Client

    broker = broker_factory()
    _topic(broker)
    _produce(broker, 30)
    _group_configs(broker, "g", share_auto_offset_reset="earliest")
    c = Client(broker.bootstrap)
    mm = c.m(3, 12)
    topic_id = c.call(3, 12, topics=(mm.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                      allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False).topics[0].topic_id
    member = str(uuid.uuid4())
    deadline = time.monotonic() + WAIT_S
    epoch = 0
    while True:
        r = c.call(76, 1, group_id="g", member_id=member, member_epoch=epoch, rack_id=None,
                   subscribed_topic_names=(TOPIC,) if epoch == 0 else None)
        epoch = r.member_epoch
        if r.assignment is not None and r.assignment.topic_partitions and \
                _initialized_state(broker, "g", topic_id, TOPIC):
            break
        assert time.monotonic() < deadline, "never assigned"
        time.sleep(0.2)
    known = {code for code in vars(codes).values() if isinstance(code, int)}
    rng = random.Random(932)
    topic_ids = [topic_id, topic_id, uuid.UUID(int=5)]
    try:
        for _ in range(150):
            version = rng.choice((1, 2))
            api = rng.choice((78, 79))
            m = c.m(api, version)
            who = rng.choice((member, member, "", "x" * 40, str(uuid.uuid4())))
            session_epoch = rng.choice((-1, 0, 0, 1, 2, 3, rng.randint(-5, 2**31 - 1)))

            def batches():
                out = []
                for _ in range(rng.randint(0, 3)):
                    first = rng.randint(-2, 40)
                    last = first + rng.randint(-1, 5)
                    types = tuple(rng.randint(-1, 5) for _ in range(
                        rng.choice((1, max(last - first + 1, 0), 2))))
                    out.append(m.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                      acknowledge_types=types))
                return tuple(out)

            if api == 78:
                fields = dict(
                    group_id=rng.choice(("g", "g", None, "other")), member_id=who,
                    share_session_epoch=session_epoch,
                    max_wait=datetime.timedelta(milliseconds=rng.choice((0, 0, 50))),
                    min_bytes=rng.choice((0, 1, 1 << 30)), max_bytes=rng.choice((0, 1, 1 << 20)),
                    max_records=rng.choice((-1, 0, 1, 500)), batch_size=rng.choice((0, 1, 500)),
                    topics=tuple(m.FetchTopic(topic_id=rng.choice(topic_ids), partitions=tuple(
                        m.FetchPartition(partition_index=rng.choice((0, 0, 1, -1)),
                                         acknowledgement_batches=batches())
                        for _ in range(rng.randint(0, 2)))) for _ in range(rng.randint(0, 2))),
                    forgotten_topics_data=tuple(m.ForgottenTopic(
                        topic_id=rng.choice(topic_ids), partitions=(rng.choice((0, 3)),))
                        for _ in range(rng.randint(0, 1))))
                if version >= 2:
                    fields.update(is_renew_ack=rng.random() < 0.2,
                                  share_acquire_mode=rng.choice((0, 0, 1, 3)))
            else:
                fields = dict(
                    group_id=rng.choice(("g", "g", None)), member_id=who,
                    share_session_epoch=session_epoch,
                    topics=tuple(m.AcknowledgeTopic(topic_id=rng.choice(topic_ids),
                                                    partitions=tuple(m.AcknowledgePartition(
                                                        partition_index=rng.choice((0, 2)),
                                                        acknowledgement_batches=batches())
                                                        for _ in range(rng.randint(0, 2))))
                                 for _ in range(rng.randint(0, 2))))
                if version >= 2:
                    fields["is_renew_ack"] = rng.random() < 0.2
            r = c.call(api, version, **fields)
            assert int(r.error_code) in known
            for t in r.responses:
                for p in t.partitions:
                    assert int(p.error_code) in known
                    assert int(getattr(p, "acknowledge_error_code", 0)) in known
    finally:
        c.close()


def test_share_version_zero_turns_share_fetch_off(broker_factory):
    import datetime
    import uuid

    from test_admin_differential import Client

    broker = broker_factory()
    c = Client(broker.bootstrap)

    def open_session(member: str):
        return c.call(78, 1, group_id="g", member_id=member, share_session_epoch=0,
                      max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                      max_records=10, batch_size=10, topics=(), forgotten_topics_data=())

    try:
        member = str(uuid.uuid4())
        assert int(open_session(member).error_code) == 0
        m = c.m(57, 1)
        r = c.call(57, 1, timeout=datetime.timedelta(seconds=10), feature_updates=(
            m.FeatureUpdateKey(feature="share.version", max_version_level=0, upgrade_type=2),),
            validate_only=False)
        assert int(r.error_code) == 0, r
        deadline = time.monotonic() + WAIT_S
        while int(open_session(member).error_code) != codes.UNSUPPORTED_VERSION:
            assert time.monotonic() < deadline, "share.version 0 never took effect"
            time.sleep(0.1)
        r = c.call(79, 1, group_id="g", member_id=member, share_session_epoch=1, topics=())
        assert int(r.error_code) == codes.UNSUPPORTED_VERSION
        manager = find_share_partition_manager(broker.state)
        assert manager is not None and len(manager.sessions) == 0
    finally:
        c.close()


def test_a_served_store_refuses_embedded_share_consumers(any_backend_broker):
    """The broker keeps the share-partitions of the Store it serves: an embedded share
    consumer over the same Store would be a second state machine handing a record to two
    members at once, so the Store refuses it by name."""
    from seglog.errors import IllegalStateError
    any_backend_broker.store.create_topic("served-queue", 1)
    with pytest.raises(IllegalStateError, match="seglog broker serves this Store"):
        any_backend_broker.store.share_consumer("g", ["served-queue"])
