"""Consumer groups through real clients against ``seglog serve``: confluent-kafka (librdkafka)
members joining, leaving and being killed (evicted by session timeout), ten consumers on six
partitions, at-least-once vs at-most-once commits, static membership, kafka-python and
aiokafka groups, the admin calls on groups, and a broker restart. Session timeouts are small
(the brokers allow 100 ms) so that every wait is short; every wait is bounded."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTopicPartition

from seglog.types import TopicPartition

pytestmark = pytest.mark.clients

SESSION_MS = 1000
WAIT_S = 20.0


@pytest.fixture
def group_broker(broker_factory, tmp_path):
    """A broker that accepts short sessions."""
    return broker_factory(data_dir=tmp_path / "data", group_min_session_timeout_ms=100)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(10) == 0


class Member:
    """A confluent-kafka consumer in a group, with the partitions it was last assigned."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config):
        settings = {"bootstrap.servers": bootstrap, "group.id": group,
                    "auto.offset.reset": "earliest", "enable.auto.commit": False,
                    "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 100,
                    "topic.metadata.refresh.interval.ms": 1000}
        settings.update(config)
        self.consumer = Consumer(settings)
        self.assigned: set = set()
        self.revocations = 0
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer, partitions):
        self.assigned = {p.partition for p in partitions}

    def _on_revoke(self, consumer, partitions):
        self.revocations += 1
        self.assigned = set()

    def poll(self, timeout_s: float = 0.05):
        message = self.consumer.poll(timeout_s)
        if message is not None and message.error():
            return None
        return message

    def close(self):
        self.consumer.close()


def poll_until(members, condition, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the group did not settle in time: " + repr(
            [sorted(m.assigned) for m in members])
        for member in members:
            member.poll(0.02)


def settled(members, partitions: int):
    def check():
        owned = [p for m in members for p in m.assigned]
        return sorted(owned) == list(range(partitions))
    return check


def test_members_join_leave_and_a_killed_one_is_evicted(group_broker, tmp_path):
    broker = group_broker
    broker.store.create_topic("t", partitions=6)
    a = Member(broker.bootstrap, "g", "t")
    b = Member(broker.bootstrap, "g", "t")
    try:
        poll_until([a, b], lambda: settled([a, b], 6)() and a.assigned and b.assigned)
        # A third member joins in another process, then is killed with SIGKILL: no LeaveGroup.
        script = textwrap.dedent(f"""
            import sys
            from confluent_kafka import Consumer
            c = Consumer({{"bootstrap.servers": "{broker.bootstrap}", "group.id": "g",
                          "session.timeout.ms": {SESSION_MS}, "heartbeat.interval.ms": 100}})
            got = []
            c.subscribe(["t"], on_assign=lambda _c, ps: got.extend(ps))
            while True:
                c.poll(0.05)
                if got:
                    print("ASSIGNED", flush=True)
                    got.clear()
        """)
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                 text=True)
        try:
            deadline = time.monotonic() + WAIT_S
            while True:
                a.poll(0.02)
                b.poll(0.02)
                os.set_blocking(child.stdout.fileno(), False)
                line = child.stdout.readline()
                if line.startswith("ASSIGNED"):
                    break
                assert child.poll() is None and time.monotonic() < deadline
            poll_until([a, b], lambda: len(a.assigned) + len(b.assigned) == 4)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        # The dead member's session ends; the two survivors share all six partitions again.
        poll_until([a, b], lambda: settled([a, b], 6)())
        # b leaves (LeaveGroup): a gets everything at once, without waiting for a timeout.
        b.close()
        b = None
        poll_until([a], lambda: a.assigned == set(range(6)), timeout_s=SESSION_MS / 1000 * 3)
        description = broker.state.extensions["groups"].coordinator.describe("g")
        assert description.state == "Stable" and len(description.members) == 1
    finally:
        a.close()
        if b is not None:
            b.close()


def test_ten_consumers_on_six_partitions_leave_four_idle(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data", group_min_session_timeout_ms=100,
                            group_initial_rebalance_delay_ms=300)
    broker.store.create_topic("t", partitions=6)
    members = [Member(broker.bootstrap, "ten", "t") for _ in range(10)]
    try:
        def ten_settled():
            coordinator = broker.state.extensions["groups"].coordinator
            description = coordinator.describe("ten")
            return (description is not None and description.state == "Stable"
                    and len(description.members) == 10 and settled(members, 6)())
        poll_until(members, ten_settled, timeout_s=30)
        assert sorted(len(m.assigned) for m in members) == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    finally:
        for member in members:
            member.close()


def _consume_with_crash(bootstrap: str, group: str, *, commit_first: bool, crash_at: int,
                        processed: list) -> None:
    """Process records of partition 0 one by one, committing each offset after
    (at-least-once) or before (at-most-once) processing it; "crash" (close without any
    further commit) at record ``crash_at``: after its commit, before its processing."""
    member = Member(bootstrap, group, "t")
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            assert time.monotonic() < deadline
            message = member.poll(0.05)
            if message is None:
                continue
            offset = message.offset()
            commit = [CTopicPartition("t", 0, offset + 1)]
            if commit_first:
                member.consumer.commit(offsets=commit, asynchronous=False)
                if offset == crash_at:
                    return
                processed.append(offset)
            else:
                if offset == crash_at:
                    return  # processed up to here, the last few not committed yet
                processed.append(offset)
                if offset % 3 == 2:  # commit every third record
                    member.consumer.commit(offsets=commit, asynchronous=False)
    finally:
        member.close()


def _consume_rest(bootstrap: str, group: str, total: int, processed: list) -> None:
    member = Member(bootstrap, group, "t")
    try:
        deadline = time.monotonic() + WAIT_S
        while not processed or processed[-1] < total - 1:
            assert time.monotonic() < deadline
            message = member.poll(0.05)
            if message is not None:
                processed.append(message.offset())
    finally:
        member.close()


def test_commit_after_processing_is_at_least_once(group_broker):
    broker = group_broker
    broker.store.create_topic("t", partitions=1)
    produce(broker.bootstrap, "t", 20, 1)
    processed: list = []
    _consume_with_crash(broker.bootstrap, "alo", commit_first=False, crash_at=10,
                        processed=processed)
    assert processed == list(range(10))
    assert broker.store.group("alo").committed(("t", 0)) == 9  # 9 was never committed
    _consume_rest(broker.bootstrap, "alo", 20, processed)
    assert set(processed) == set(range(20))  # nothing lost
    assert processed.count(9) == 2  # record 9 processed twice


def test_commit_before_processing_is_at_most_once(group_broker):
    broker = group_broker
    broker.store.create_topic("t", partitions=1)
    produce(broker.bootstrap, "t", 20, 1)
    processed: list = []
    _consume_with_crash(broker.bootstrap, "amo", commit_first=True, crash_at=10,
                        processed=processed)
    assert broker.store.group("amo").committed(("t", 0)) == 11
    _consume_rest(broker.bootstrap, "amo", 20, processed)
    assert 10 not in processed  # lost: committed, never processed
    assert sorted(processed) == [i for i in range(20) if i != 10]  # no duplicates


def test_static_member_restart_keeps_its_partitions_without_rebalance(group_broker):
    broker = group_broker
    broker.store.create_topic("t", partitions=4)
    coordinator = broker.state.extensions["groups"].coordinator
    session = {"session.timeout.ms": 6000}
    a = Member(broker.bootstrap, "static", "t", **{"group.instance.id": "a"}, **session)
    b = Member(broker.bootstrap, "static", "t", **{"group.instance.id": "b"}, **session)
    try:
        poll_until([a, b], lambda: settled([a, b], 4)() and a.assigned and b.assigned)
        b_partitions = set(b.assigned)
        revocations_before = a.revocations
        old_ids = {m.member_id for m in coordinator.describe("static").members}
        b.close()  # a static member's close sends no LeaveGroup: its partitions stay reserved
        b = Member(broker.bootstrap, "static", "t", **{"group.instance.id": "b"}, **session)
        poll_until([a, b], lambda: b.assigned == b_partitions)
        description = coordinator.describe("static")
        assert description.state == "Stable"
        new_ids = {m.member_id for m in description.members}
        assert len(new_ids) == 2 and new_ids != old_ids  # b has a new member id
        assert a.revocations == revocations_before  # a never gave up its partitions
    finally:
        a.close()
        if b is not None:
            b.close()


def test_kafka_python_group_consumes_and_commits(group_broker):
    from kafka import KafkaConsumer

    broker = group_broker
    broker.store.create_topic("t", partitions=4)
    produce(broker.bootstrap, "t", 40, 4)
    consumers = [KafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="kp",
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100,
                               consumer_timeout_ms=100)
                 for _ in range(2)]
    try:
        seen = set()
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 40:
            assert time.monotonic() < deadline, len(seen)
            for consumer in consumers:
                for tp, records in consumer.poll(timeout_ms=50).items():
                    seen.update((tp.partition, r.offset) for r in records)
                    consumer.commit()
        assert len(seen) == 40
        committed = broker.store.group("kp").committed_offsets()
        assert {tp: om.offset for tp, om in committed.items()} == {
            TopicPartition("t", p): 10 for p in range(4)}
    finally:
        for consumer in consumers:
            consumer.close()


def test_aiokafka_group_consumes_and_commits(group_broker):
    from aiokafka import AIOKafkaConsumer

    broker = group_broker
    broker.store.create_topic("t", partitions=2)
    produce(broker.bootstrap, "t", 10, 2)

    async def run():
        consumer = AIOKafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="aio",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100)
        await consumer.start()
        try:
            seen = 0
            while seen < 10:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=100), WAIT_S)
                seen += sum(len(records) for records in batches.values())
            await consumer.commit()
            return seen, await consumer.committed(
                __import__("aiokafka").TopicPartition("t", 0))
        finally:
            await consumer.stop()

    seen, committed = asyncio.run(asyncio.wait_for(run(), WAIT_S * 2))
    assert seen == 10 and committed == 5


def test_admin_calls_on_groups(group_broker):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    broker = group_broker
    broker.store.create_topic("t", partitions=2)
    produce(broker.bootstrap, "t", 4, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    member = Member(broker.bootstrap, "adm", "t")
    try:
        poll_until([member], lambda: member.assigned == {0, 1})
        member.consumer.commit(offsets=[CTopicPartition("t", 0, 2)], asynchronous=False)
        listed = admin.list_consumer_groups(
            states={ConsumerGroupState.STABLE}).result(WAIT_S)
        assert [g.group_id for g in listed.valid] == ["adm"]
        described = admin.describe_consumer_groups(["adm"])["adm"].result(WAIT_S)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        assert {p.partition for p in described.members[0].assignment.topic_partitions} == {0, 1}
        offsets = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("adm")])["adm"].result(WAIT_S)
        assert {(p.partition, p.offset) for p in offsets.topic_partitions} == {(0, 2)}
        busy = admin.delete_consumer_groups(["adm"])["adm"]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            busy.result(WAIT_S)
    finally:
        member.close()
    # Empty now: offsets may be set from outside, then the group deleted.
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "adm", [CTopicPartition("t", 1, 3)])])["adm"].result(WAIT_S)
    assert broker.store.group("adm").committed(("t", 1)) == 3
    listed = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(WAIT_S)
    assert [g.group_id for g in listed.valid] == ["adm"]
    admin.delete_consumer_groups(["adm"])["adm"].result(WAIT_S)
    assert broker.store.group("adm").committed_offsets() == {}
    assert admin.list_consumer_groups().result(WAIT_S).valid == []


@pytest.mark.parametrize("backend", ["native", "pure"])
def test_restart_keeps_offsets_and_group_then_members_expire(broker_factory, tmp_path, backend):
    data = tmp_path / "data"
    broker = broker_factory(data_dir=data, group_min_session_timeout_ms=100, backend=backend)
    broker.store.create_topic("t", partitions=2)
    member = Member(broker.bootstrap, "rs", "t")
    try:
        poll_until([member], lambda: member.assigned == {0, 1})
        member.consumer.commit(offsets=[CTopicPartition("t", 1, 7)], asynchronous=False)
        broker.stop()
    finally:
        member.consumer.close()  # the broker is gone: no LeaveGroup reaches it
    again = broker_factory(data_dir=data, group_min_session_timeout_ms=100, backend=backend)
    coordinator = again.state.extensions["groups"].coordinator
    description = coordinator.describe("rs")
    assert description.state == "Stable" and len(description.members) == 1
    assert again.store.group("rs").committed(("t", 1)) == 7
    deadline = time.monotonic() + WAIT_S
    while coordinator.state("rs") != "Empty":  # nobody heartbeats: the member expires
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert again.store.group("rs").committed(("t", 1)) == 7


def test_broker_restart_under_a_running_consumer_keeps_its_membership(broker_factory,
                                                                      tmp_path):
    """The membership record brings the group back as it was: the consumer, still running,
    heartbeats with its old member id and generation and keeps its partitions (no
    rebalance), as against a restarted Kafka broker."""
    data = tmp_path / "data"
    broker = broker_factory(data_dir=data, group_min_session_timeout_ms=100)
    port = broker.port
    broker.store.create_topic("t", partitions=2)
    member = Member(broker.bootstrap, "keep", "t", **{"session.timeout.ms": 1500})
    try:
        poll_until([member], lambda: member.assigned == {0, 1})
        before = broker.state.extensions["groups"].coordinator.describe("keep").members
        broker.stop()
        again = broker_factory(data_dir=data, listen=("127.0.0.1", port),
                               group_min_session_timeout_ms=100)
        coordinator = again.state.extensions["groups"].coordinator
        assert coordinator.describe("keep").members == before
        end = time.monotonic() + 2.5  # longer than the session: heartbeats must have come
        while time.monotonic() < end:
            member.poll(0.05)
        description = coordinator.describe("keep")
        assert description.state == "Stable"
        assert [m.member_id for m in description.members] == [m.member_id for m in before]
        assert member.revocations == 0 and member.assigned == {0, 1}
    finally:
        member.close()
