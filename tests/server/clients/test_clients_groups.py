"""Consumer groups through real clients, against Kafka and seglog alike: members of three
client libraries joining, leaving and being killed; ten consumers on six partitions leave four
idle; and the article's delivery example (commit after processing is at-least-once, commit
before is at-most-once) with a consumer killed between processing and commit."""

from __future__ import annotations

import asyncio
import time

import pytest

from clients_runner import (
    HEARTBEAT_INTERVAL_MS, OP_TIMEOUT_S, SESSION_TIMEOUT_MS, Member, Rec, admin, committed,
    confluent_produce, create_topic, describe_group, wait_assignments,
)

#: How long a rebalance may take (joins, a leave, a session expiry) before the test fails.
REBALANCE_S = 30.0


def test_members_join_leave_and_die(target, differential, unique):
    """A confluent-kafka, a kafka-python and an aiokafka member join one group on a
    six-partition topic (round-robin, the assignor all three share): 6, then 3+3, then 2+2+2;
    the kafka-python one leaves (LeaveGroup): 3+3; the aiokafka one is killed (no leave): once
    its session expires the last member holds all six."""
    b = target.bootstrap
    create_topic(b, unique, 6)
    group = f"{unique}-g"
    steps = []
    members: list[Member] = []
    try:
        a = Member(b, "group", "confluent", group, unique)
        members.append(a)
        steps.append(wait_assignments([a], [6], REBALANCE_S))
        m_b = Member(b, "group", "kafka-python", group, unique)
        members.append(m_b)
        steps.append(wait_assignments([a, m_b], [3, 3], REBALANCE_S))
        m_c = Member(b, "group", "aiokafka", group, unique)
        members.append(m_c)
        steps.append(wait_assignments([a, m_b, m_c], [2, 2, 2], REBALANCE_S))
        union = sorted(p for m in (a, m_b, m_c) for p in m.assigned)
        m_b.send("close")
        assert m_b.wait(REBALANCE_S) == 0, m_b.stderr_tail()
        steps.append(wait_assignments([a, m_c], [3, 3], REBALANCE_S))
        m_c.kill()
        steps.append(wait_assignments([a], [6], REBALANCE_S))
        described = describe_group(b, group)
        a.send("close")
        assert a.wait(REBALANCE_S) == 0, a.stderr_tail()
        after_leave = describe_group(b, group)
    finally:
        for m in members:
            m.stop()
    assert steps == [[6], [3, 3], [2, 2, 2], [3, 3], [6]]
    assert union == list(range(6))
    assert described == {"state": "STABLE", "assignor": "roundrobin", "members": 1,
                         "sizes": [6]}
    assert after_leave == {"state": "EMPTY", "assignor": "", "members": 0, "sizes": []}
    differential({"steps": steps, "described": described, "after_leave": after_leave})


def test_ten_consumers_on_six_partitions_leave_four_idle(target, differential, unique):
    """Ten aiokafka consumers in one group on six partitions: six hold one partition each,
    four hold none; every partition is held exactly once."""
    from aiokafka import AIOKafkaConsumer

    b = target.bootstrap
    create_topic(b, unique, 6)
    group = f"{unique}-g"

    async def run():
        consumers = [AIOKafkaConsumer(unique, bootstrap_servers=b, group_id=group,
                                      session_timeout_ms=max(SESSION_TIMEOUT_MS, 6000),
                                      heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                                      enable_auto_commit=False, auto_offset_reset="earliest")
                     for _ in range(10)]
        started = []
        try:
            for c in consumers:
                await asyncio.wait_for(c.start(), OP_TIMEOUT_S)
                started.append(c)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + REBALANCE_S
            while True:
                # getmany drives each consumer's rejoin after a rebalance.
                await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
                held = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
                flat = sorted(p for h in held for p in h)
                if flat == list(range(6)) and all(len(h) <= 1 for h in held):
                    described = describe_group(b, group)
                    if described["members"] == 10 and described["state"] == "STABLE":
                        return sorted(len(h) for h in held), described
                if loop.time() > deadline:
                    raise TimeoutError(f"assignments {held} after {REBALANCE_S} s")
                await asyncio.sleep(0.05)
        finally:
            await asyncio.gather(*(asyncio.wait_for(c.stop(), OP_TIMEOUT_S) for c in started),
                                 return_exceptions=True)

    sizes, described = asyncio.run(run())
    assert sizes == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    assert described == {"state": "STABLE", "assignor": "roundrobin", "members": 10,
                         "sizes": sizes}
    differential({"sizes": sizes, "described": described})


@pytest.mark.parametrize("order", ["commit-after", "commit-before"])
def test_commit_order_decides_delivery(target, differential, unique, tmp_path, order):
    """The article's example through a real consumer group: ten records m0..m9 read in
    batches of five; the consumer dies (SIGKILL) while handling m7, once; a new consumer of
    the group resumes from the committed offset. Commit after processing handles twelve with
    m5 and m6 twice (at-least-once); commit before handles seven and loses m7..m9
    (at-most-once)."""
    b = target.bootstrap
    create_topic(b, unique, 1)
    group = f"{unique}-g"
    confluent_produce(b, unique, [Rec(None, f"m{i}".encode()) for i in range(10)])
    handled_file = tmp_path / "handled.txt"
    runs = []
    for _ in range(2):
        m = Member(b, "delivery", group, unique, order, "m7", str(handled_file))
        try:
            runs.append(m.wait(REBALANCE_S + 30))
        finally:
            m.stop()
    handled = handled_file.read_text().split()
    dups = sorted({r for r in handled if handled.count(r) > 1})
    lost = [f"m{i}" for i in range(10) if f"m{i}" not in handled]
    final = committed(b, group, unique, 1)
    result = {"runs": runs, "handled": len(handled), "duplicates": dups, "lost": lost,
              "committed": final}
    if order == "commit-after":
        assert result == {"runs": [-9, 0], "handled": 12, "duplicates": ["m5", "m6"],
                          "lost": [], "committed": [10]}
    else:
        assert result == {"runs": [-9, 0], "handled": 7, "duplicates": [],
                          "lost": ["m7", "m8", "m9"], "committed": [10]}
    differential(result)


def test_static_member_replaced_without_rebalance(target, differential, unique):
    """Static membership (group.instance.id): two confluent-kafka members hold 3+3; a new
    process with the second one's instance id takes its place and its partitions without a
    rebalance (the first member is not reassigned), and the process it replaced is fenced
    (a fatal FENCED_INSTANCE_ID)."""
    b = target.bootstrap
    create_topic(b, unique, 6)
    group = f"{unique}-g"
    members: list[Member] = []
    slow = {"SEGLOG_MEMBER_SESSION_TIMEOUT_MS": "6000"}  # no eviction while being replaced
    try:
        a = Member(b, "group", "confluent", group, unique,
                   env={**slow, "SEGLOG_MEMBER_INSTANCE_ID": "a"})
        members.append(a)
        wait_assignments([a], [6], REBALANCE_S)
        first_b = Member(b, "group", "confluent", group, unique,
                         env={**slow, "SEGLOG_MEMBER_INSTANCE_ID": "b"})
        members.append(first_b)
        wait_assignments([a, first_b], [3, 3], REBALANCE_S)
        a_held = a.assigned
        b_held = first_b.assigned
        a.drain()
        a_assignments = a.assignments
        second_b = Member(b, "group", "confluent", group, unique,
                          env={**slow, "SEGLOG_MEMBER_INSTANCE_ID": "b"})
        members.append(second_b)
        wait_assignments([second_b], [3], REBALANCE_S)
        fenced = None
        deadline = time.monotonic() + REBALANCE_S
        while fenced is None and time.monotonic() < deadline:
            try:
                ev = first_b.next_event(0.2)
            except TimeoutError:
                continue
            if ev["event"] in ("fatal", "exit"):
                fenced = ev
        a.drain()
        described = describe_group(b, group)
    finally:
        for m in members:
            m.stop()
    result = {"b took over": second_b.assigned == b_held, "a kept": a.assigned == a_held,
              "a reassigned": a.assignments != a_assignments,
              "old b": fenced and fenced["event"],
              "fenced reason": fenced and "group.instance.id" in fenced.get("reason", ""),
              "described": described}
    assert result == {"b took over": True, "a kept": True, "a reassigned": False,
                      "old b": "fatal", "fenced reason": True,
                      "described": {"state": "STABLE", "assignor": "roundrobin",
                                    "members": 2, "sizes": [3, 3]}}
    differential(result)


def test_offsets_committed_by_one_client_read_by_the_others(target, differential, unique):
    """OffsetCommit and OffsetFetch as each client speaks them (manual assignment, so no
    generation): kafka-python commits with metadata, confluent-kafka and aiokafka read it;
    aiokafka commits, the others read it; confluent-kafka commits with metadata, kafka-python
    reads offset and metadata (confluent-kafka reads only its own metadata correctly)."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATopicPartition
    from aiokafka.structs import OffsetAndMetadata as AOffsetAndMetadata
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    from kafka.structs import OffsetAndMetadata

    b = target.bootstrap
    create_topic(b, unique, 2)
    group = f"{unique}-g"
    kp = KafkaConsumer(bootstrap_servers=b, group_id=group, enable_auto_commit=False,
                       request_timeout_ms=15000)
    cf = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    ktps = [KTopicPartition(unique, p) for p in range(2)]

    async def aio(commit=None):
        c = AIOKafkaConsumer(bootstrap_servers=b, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=15000)
        await asyncio.wait_for(c.start(), OP_TIMEOUT_S)
        try:
            tps = [ATopicPartition(unique, p) for p in range(2)]
            c.assign(tps)
            if commit:
                offsets = {ATopicPartition(unique, p): AOffsetAndMetadata(o, m)
                           for p, (o, m) in commit.items()}
                await asyncio.wait_for(c.commit(offsets), OP_TIMEOUT_S)
            return [await asyncio.wait_for(c.committed(tp), OP_TIMEOUT_S) for tp in tps]
        finally:
            await asyncio.wait_for(c.stop(), OP_TIMEOUT_S)

    def by_kafka_python():
        out = []
        for tp in ktps:
            found = kp.committed(tp, metadata=True, timeout_ms=15000)
            out.append((found.offset, found.metadata) if found is not None else None)
        return out

    def by_confluent(with_metadata=False):
        # confluent-kafka reads committed metadata as a C string: what other clients wrote
        # (no terminating NUL) comes back with whatever bytes follow it in memory, so only
        # its own metadata is compared.
        return [(tp.offset, tp.metadata) if with_metadata else tp.offset
                for tp in cf.committed([TopicPartition(unique, p) for p in range(2)],
                                       timeout=15)]

    try:
        kp.assign(ktps)
        kp.commit({ktps[0]: OffsetAndMetadata(3, "from kafka-python", -1),
                   ktps[1]: OffsetAndMetadata(5, "", -1)}, timeout_ms=15000)
        step1 = {"confluent": by_confluent(), "aiokafka": asyncio.run(aio())}
        after_aio = asyncio.run(aio({0: (8, "from aiokafka")}))
        step2 = {"confluent": by_confluent(), "kafka-python": by_kafka_python(),
                 "aiokafka": after_aio}
        cf.commit(offsets=[TopicPartition(unique, 1, 9, metadata="from confluent")],
                  asynchronous=False)
        step3 = {"kafka-python": by_kafka_python(), "confluent": by_confluent()[0],
                 "confluent's own": by_confluent(with_metadata=True)[1]}
    finally:
        kp.close()
        cf.close()
    result = {"step1": step1, "step2": step2, "step3": step3}
    # A client quirk, the same on either broker: librdkafka commits its metadata with the C
    # string's terminating NUL.
    assert result == {
        "step1": {"confluent": [3, 5], "aiokafka": [3, 5]},
        "step2": {"confluent": [8, 5], "kafka-python": [(8, "from aiokafka"), (5, "")],
                  "aiokafka": [8, 5]},
        "step3": {"kafka-python": [(8, "from aiokafka"), (9, "from confluent\x00")],
                  "confluent": 8, "confluent's own": (9, "from confluent")}}
    differential(result)


def test_range_over_two_topics_follows_new_partitions(target, differential, unique):
    """Two confluent-kafka members with the range assignor on two topics (2 and 3
    partitions): each topic's partitions split in member order; CreatePartitions takes the
    first topic to 4 and, once the members' metadata shows it, the group rebalances over all
    seven."""
    from confluent_kafka.admin import NewPartitions

    b = target.bootstrap
    t1, t2 = f"{unique}-a", f"{unique}-b"
    create_topic(b, t1, 2)
    create_topic(b, t2, 3)
    group = f"{unique}-g"
    env = {"SEGLOG_MEMBER_ASSIGNOR": "range", "SEGLOG_MEMBER_METADATA_REFRESH_MS": "300"}
    members: list[Member] = []
    try:
        for _ in range(2):
            members.append(Member(b, "group", "confluent", group, f"{t1},{t2}", env=env))
        before = wait_assignments(members, [2, 3], REBALANCE_S)
        pairs_before = sorted(p for m in members for p in m.assigned_pairs)
        client = admin(b)
        client.create_partitions([NewPartitions(t1, 4)], request_timeout=OP_TIMEOUT_S)[
            t1].result(timeout=OP_TIMEOUT_S)
        after = wait_assignments(members, [3, 4], REBALANCE_S)
        pairs_after = sorted(p for m in members for p in m.assigned_pairs)
        described = describe_group(b, group)
    finally:
        for m in members:
            m.stop()
    result = {"before": before, "after": after, "pairs before": pairs_before,
              "pairs after": pairs_after, "described": described}
    want_before = [f"{t1}:{p}" for p in range(2)] + [f"{t2}:{p}" for p in range(3)]
    want_after = [f"{t1}:{p}" for p in range(4)] + [f"{t2}:{p}" for p in range(3)]
    assert pairs_before == sorted(want_before)
    assert pairs_after == sorted(want_after)
    assert described == {"state": "STABLE", "assignor": "range", "members": 2,
                         "sizes": [3, 4]}
    differential(result)
