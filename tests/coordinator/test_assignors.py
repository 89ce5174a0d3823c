"""Kafka's range and round-robin assignors: worked examples and kafka-python as a peer."""

from __future__ import annotations

import random
import warnings

import pytest

from seglog.coordinator.assignors import (
    ASSIGNORS,
    RangeAssignor,
    RoundRobinAssignor,
    get_assignor,
    java_string_key,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.coordinator.assignors.range import RangePartitionAssignor as KpRange
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KpRoundRobin


def test_range_javadoc_example():
    # RangeAssignor's javadoc: C0, C1 on t0, t1 with 3 partitions each.
    got = RangeAssignor.assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert got == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
                   "C1": [("t0", 2), ("t1", 2)]}


def test_round_robin_javadoc_examples():
    # Same subscriptions: partitions dealt alternately.
    got = RoundRobinAssignor.assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert got == {"C0": [("t0", 0), ("t0", 2), ("t1", 1)],
                   "C1": [("t0", 1), ("t1", 0), ("t1", 2)]}
    # RoundRobinAssignor's javadoc: C0 on t0; C1 on t0, t1; C2 on t0, t1, t2 (1, 2, 3 partitions).
    got = RoundRobinAssignor.assign({"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]},
                                    {"t0": 1, "t1": 2, "t2": 3})
    assert got == {"C0": [("t0", 0)], "C1": [("t1", 0)],
                   "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]}


def test_ten_members_on_six_partitions_leave_four_idle():
    members = {f"m{i}": ["t"] for i in range(10)}
    for assignor in (RangeAssignor, RoundRobinAssignor):
        got = assignor.assign(members, {"t": 6})
        assert len(got) == 10
        assert sum(1 for parts in got.values() if not parts) == 4
        assert sorted(p for parts in got.values() for p in parts) == [("t", p) for p in range(6)]
    # Range: the first six in sorted member order get one each.
    got = RangeAssignor.assign(members, {"t": 6})
    assert [m for m, parts in got.items() if parts] == ["m0", "m1", "m2", "m3", "m4", "m5"]


def test_range_extra_partitions_go_to_the_first_members():
    got = RangeAssignor.assign({"b": ["t"], "a": ["t"], "c": ["t"]}, {"t": 8})
    assert got == {"a": [("t", 0), ("t", 1), ("t", 2)], "b": [("t", 3), ("t", 4), ("t", 5)],
                   "c": [("t", 6), ("t", 7)]}
    assert list(got) == ["a", "b", "c"]


def test_static_members_come_first_by_instance_id():
    subs = {"zz-dynamic": ["t"], "member-1": ["t"], "member-2": ["t"]}
    got = RangeAssignor.assign(subs, {"t": 3},
                               group_instance_ids={"member-1": "i-b", "member-2": "i-a"})
    assert got == {"member-2": [("t", 0)], "member-1": [("t", 1)], "zz-dynamic": [("t", 2)]}


def test_java_string_order():
    # U+FF5E sorts after U+1F600 in Python (code points) but before it in Java (UTF-16 units:
    # 0xFF5E > 0xD83D). Both assignors use Java's order.
    a, b = "\uff5e", "\U0001f600"
    assert a < b and java_string_key(a) > java_string_key(b)
    got = RangeAssignor.assign({a: ["t"], b: ["t"]}, {"t": 1})
    assert got[b] == [("t", 0)] and got[a] == []


def test_unknown_and_empty_topics_are_skipped():
    got = RangeAssignor.assign({"a": ["t", "gone", "empty"], "b": []}, {"t": 1, "empty": 0})
    assert got == {"a": [("t", 0)], "b": []}
    got = RoundRobinAssignor.assign({"a": ["t", "gone", "empty"], "b": []}, {"t": 1, "empty": 0})
    assert got == {"a": [("t", 0)], "b": []}
    assert RangeAssignor.assign({}, {"t": 3}) == {}


def test_input_checks():
    with pytest.raises(TypeError):
        RangeAssignor.assign({"a": "topic"}, {"topic": 1})
    with pytest.raises(ValueError):
        RoundRobinAssignor.assign({"a": ["t"]}, {"t": -1})


def test_registry():
    assert get_assignor("range") is RangeAssignor
    assert get_assignor("roundrobin") is RoundRobinAssignor
    assert set(ASSIGNORS) == {"range", "roundrobin"}
    with pytest.raises(KeyError):
        get_assignor("sticky")


class _Cluster:
    def __init__(self, partitions_per_topic):
        self._p = partitions_per_topic

    def partitions_for_topic(self, topic):
        count = self._p.get(topic)
        return None if count is None else set(range(count))


class _Member:
    def __init__(self, member_id, topics):
        self.member_id, self.group_instance_id = member_id, None
        self.metadata = type("Md", (), {"topics": list(topics)})()


def _kafka_python(assignor, subscriptions, partitions_per_topic):
    members = [_Member(m, ts) for m, ts in subscriptions.items()]
    raw = assignor.assign(_Cluster(partitions_per_topic), members)
    return {m: sorted((t, p) for t, ps in a.assigned_partitions for p in ps) for m, a in raw.items()}


@pytest.mark.parametrize("ours,theirs", [(RangeAssignor, KpRange), (RoundRobinAssignor, KpRoundRobin)])
def test_equal_to_kafka_python_on_random_groups(ours, theirs):
    # kafka-python 3.0.12's round robin crashes when a member must be skipped (it rebinds
    # member_id to a (instance id, member id) tuple), so it is compared on uniform
    # subscriptions only; the javadoc example above covers skipping.
    rng = random.Random(7)
    for _ in range(300):
        topics = [f"topic-{i}" for i in range(rng.randrange(1, 5))]
        partitions = {t: rng.randrange(1, 13) for t in topics}
        uniform = ours is RoundRobinAssignor
        members = {f"consumer-{rng.randrange(10**6)}":
                   topics if uniform else rng.sample(topics, rng.randrange(1, len(topics) + 1))
                   for _ in range(rng.randrange(1, 12))}
        assert ours.assign(members, partitions) == _kafka_python(theirs, members, partitions)
