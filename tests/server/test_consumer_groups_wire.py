"""The consumer group protocol (KIP-848) on the wire: one scripted conversation of
ConsumerGroupHeartbeat, ConsumerGroupDescribe, OffsetCommit, OffsetFetch, ListGroups and
DescribeGroups requests, run against ``seglog serve`` and against real Kafka 4.4 (when its
jars are here): the transcripts must be equal. It walks the reconciliation of two members
(a partition reaches its new owner only after the old one revoked it), the member-epoch
errors, static membership, the OffsetCommit/OffsetFetch member-epoch checks and the
listings."""

from __future__ import annotations

import datetime
import os
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench.kafka import find_kafka
from seglog.schemas import load_request_schema

from test_groups_wire import _call, _nested

_REF, _WHY = find_kafka()
_REQUIRED = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")

TOPIC = "kcg"
GROUP = "kg"


def _hb(address, member_id, epoch, *, owned=None, names=(TOPIC,), rebalance_ms=30000,
        instance_id=None, assignor=None, topic_id=None, version=1, group=GROUP, regex=None):
    request_class = load_request_schema(68, version)
    tps = _nested(68, version, "topic_partitions")
    owned_field = None
    if owned is not None:
        owned_field = (tps(topic_id=topic_id, partitions=tuple(sorted(owned))),) if owned else ()
    request = request_class(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
        rack_id=None, rebalance_timeout=datetime.timedelta(milliseconds=rebalance_ms),
        subscribed_topic_names=names, subscribed_topic_regex=regex, server_assignor=assignor,
        topic_partitions=owned_field)
    response = _call(address, request)
    assignment = None
    if response.assignment is not None:
        assignment = sorted(p for t in response.assignment.topic_partitions
                            for p in t.partitions)
    return (int(response.error_code), response.member_epoch, assignment)


def _topic_id(address):
    request_class = load_request_schema(3, 12)
    topic = _nested(3, 12, "topics")
    response = _call(address, request_class(topics=(topic(name=TOPIC, topic_id=uuid.UUID(int=0)),),
                                            allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))
    return response.topics[0].topic_id


def _commit(address, member_id, epoch, version=9):
    request_class = load_request_schema(8, version)
    topic = _nested(8, version, "topics")
    partition = _nested(8, version, "topics", "partitions")
    response = _call(address, request_class(
        group_id=GROUP, generation_id_or_member_epoch=epoch, member_id=member_id,
        group_instance_id=None, topics=(topic(name=TOPIC, partitions=(partition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1,
            committed_metadata=""),)),)))
    return int(response.topics[0].partitions[0].error_code)


def _fetch(address, member_id, epoch):
    request_class = load_request_schema(9, 9)
    group = _nested(9, 9, "groups")
    topics = _nested(9, 9, "groups", "topics")
    response = _call(address, request_class(groups=(group(
        group_id=GROUP, member_id=member_id, member_epoch=epoch,
        topics=(topics(name=TOPIC, partition_indexes=(0,)),)),), require_stable=False))
    found = response.groups[0]
    offsets = [p.committed_offset for t in found.topics for p in t.partitions]
    return int(found.error_code), offsets


def _describe(address):
    request_class = load_request_schema(69, 1)
    response = _call(address, request_class(group_ids=(GROUP, "nope"),
                                            include_authorized_operations=False))
    group, unknown = response.groups
    members = sorted((m.member_epoch, sorted(p for t in m.assignment.topic_partitions
                                             for p in t.partitions),
                      m.instance_id, m.member_type) for m in group.members)
    return (int(group.error_code), group.group_state, group.group_epoch,
            group.assignment_epoch, group.assignor_name, members,
            int(unknown.error_code), unknown.error_message)


def _listed(address):
    request_class = load_request_schema(16, 5)
    response = _call(address, request_class(states_filter=(), types_filter=("consumer",)))
    # only this test's group: the session's shared Kafka broker also holds other modules'
    # groups (tests/conftest.py's rules)
    consumer = [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                for g in response.groups if g.group_id == GROUP]
    response = _call(address, request_class(states_filter=(), types_filter=("classic",)))
    classic = [g.group_id for g in response.groups]
    return consumer, GROUP in classic


def _classic_describe(address):
    answers = []
    for version in (5, 6):
        request_class = load_request_schema(15, version)
        response = _call(address, request_class(groups=(GROUP,),
                                                include_authorized_operations=False))
        group = response.groups[0]
        answers.append((int(group.error_code), group.group_state, group.protocol_type,
                        group.protocol_data, len(group.members),
                        getattr(group, "error_message", None)))
    return answers


def _wait_for_coordinator(address):
    """FindCoordinator until the group's coordinator is ready (Kafka creates
    ``__consumer_offsets`` on the first one); bounded."""
    request_class = load_request_schema(10, 4)
    for _ in range(60):
        response = _call(address, request_class(key_type=0, coordinator_keys=(GROUP,)))
        if response.coordinators[0].error_code == 0:
            return
        time.sleep(0.5)
    raise AssertionError("no coordinator for the group in 30 s")


def conversation(address):
    """The transcript of the scripted conversation with the broker at ``address``."""
    _wait_for_coordinator(address)
    tid = _topic_id(address)
    seen = []
    epochs: dict[str, int] = {}
    owned: dict[str, list[int]] = {}

    def hb(label, member_id, epoch=None, *, full=True, **kwargs):
        if epoch is None:
            epoch = epochs.get(member_id, 0)
        if not full:
            kwargs.setdefault("names", None)
            kwargs.setdefault("rebalance_ms", -1)
        kwargs.setdefault("owned", owned.get(member_id, ()) if epoch > 0 else ())
        answer = _hb(address, member_id, epoch, topic_id=tid, **kwargs)
        if answer[0] == 0 and epoch >= 0:
            epochs[member_id] = answer[1]
            if answer[2] is not None:
                owned[member_id] = answer[2]
        seen.append((label, answer))
        return answer

    m1, m2 = "m1-aaaaaaaaaaaaaaaaaaaaa", "m2-bbbbbbbbbbbbbbbbbbbbb"
    hb("m1 joins", m1)
    hb("m2 joins: everything is m1's", m2)
    hb("m1 heartbeats: must revoke two", m1)
    hb("m2 waits for them", m2)
    hb("m1 revoked them", m1)
    hb("m2 gets them", m2)
    hb("m2 is stable", m2, full=False)
    hb("m1 is stable", m1, full=False)
    seen.append(("describe", _describe(address)))
    seen.append(("list", _listed(address)))
    seen.append(("describe groups", _classic_describe(address)))
    hb("epoch from the future", m1, epochs[m1] + 5)
    hb("unknown member", "m9-ccccccccccccccccccccc", 2)
    m5 = "m5-ddddddddddddddddddddd"
    hb("join without rebalance timeout", m5, 0, rebalance_ms=-1)
    hb("join with owned partitions", m5, 0, owned={1})
    hb("join without topics", m5, 0, names=None)
    hb("unknown assignor", m5, 0, assignor="nope")
    hb("invalid regular expression", m5, 0, names=None, regex="[a")
    hb("empty member id", "", 0)
    hb("bad epoch", m5, -3)
    seen.append(("commit stale epoch", _commit(address, m1, epochs[m1] - 1)))
    seen.append(("commit unknown member", _commit(address, "nobody", 2)))
    seen.append(("commit old version", _commit(address, m1, epochs[m1], 8)))
    seen.append(("commit", _commit(address, m1, epochs[m1])))
    seen.append(("fetch stale epoch", _fetch(address, m1, epochs[m1] - 1)))
    seen.append(("fetch", _fetch(address, m1, epochs[m1])))
    seen.append(("fetch as admin", _fetch(address, None, -1)))
    s1, s2 = "s1-eeeeeeeeeeeeeeeeeeeee", "s2-fffffffffffffffffffff"
    hb("static s1 joins", s1, 0, instance_id="i1")
    hb("another member with i1", s2, 0, instance_id="i1")
    hb("s1 leaves for a while", s1, -2, owned=None, names=None, instance_id="i1")
    hb("s2 takes i1's place", s2, 0, instance_id="i1")
    hb("s1 is fenced", s1, epochs[s1], instance_id="i1")
    hb("m2 leaves", m2, -1, owned=None, names=None)
    hb("m2 is gone", m2, epochs[m2])
    # A new group's first member gets epoch 2; one joining with no topics bumps nothing.
    hb("fresh group, unknown topic", "x1-ggggggggggggggggggggg", 0, names=("nosuch",),
       group="kg2")
    hb("fresh group, no topics", "x2-hhhhhhhhhhhhhhhhhhhhh", 0, names=(), group="kg2")
    return seen


#: Kafka 4.4's transcript of :func:`conversation` (assignment computed at once:
#: ``group.consumer.assignment.interval.ms=0``, no offloading).
EXPECTED = [
    ('m1 joins', (0, 2, [0, 1, 2, 3])),
    ("m2 joins: everything is m1's", (0, 3, [])),
    ('m1 heartbeats: must revoke two', (0, 2, [0, 1])),
    ('m2 waits for them', (0, 3, [])),
    ('m1 revoked them', (0, 3, [0, 1])),
    ('m2 gets them', (0, 3, [2, 3])),
    ('m2 is stable', (0, 3, None)),
    ('m1 is stable', (0, 3, None)),
    ('describe', (0, 'Stable', 3, 3, 'uniform', [(3, [0, 1], None, 1), (3, [2, 3], None, 1)], 69, 'Group nope not found.')),
    ('list', ([('kg', 'consumer', 'Stable', 'consumer')], False)),
    ('describe groups', [(0, 'Dead', '', '', 0, None), (69, 'Dead', '', '', 0, 'Group kg is not a classic group.')]),
    ('epoch from the future', (110, 0, None)),
    ('unknown member', (25, 0, None)),
    ('join without rebalance timeout', (42, 0, None)),
    ('join with owned partitions', (42, 0, None)),
    ('join without topics', (42, 0, None)),
    ('unknown assignor', (112, 0, None)),
    ('invalid regular expression', (128, 0, None)),
    ('empty member id', (42, 0, None)),
    ('bad epoch', (42, 0, None)),
    ('commit stale epoch', 0),
    ('commit unknown member', 25),
    ('commit old version', 35),
    ('commit', 0),
    ('fetch stale epoch', (113, [])),
    ('fetch', (0, [5])),
    ('fetch as admin', (0, [5])),
    ('static s1 joins', (0, 4, [])),
    ('another member with i1', (111, 0, None)),
    ('s1 leaves for a while', (0, -2, None)),
    ("s2 takes i1's place", (0, 4, [])),
    ('s1 is fenced', (82, 0, None)),
    ('m2 leaves', (0, -1, None)),
    ('m2 is gone', (25, 0, None)),
    ('fresh group, unknown topic', (0, 2, [])),
    ('fresh group, no topics', (0, 2, [])),
]


def test_conversation_on_seglog(broker_factory, tmp_path):
    """seglog answers the conversation as Kafka 4.4 does (:data:`EXPECTED`)."""
    broker = broker_factory(data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, 4)
    host, port = broker.bootstrap.split(":")
    assert conversation((host, int(port))) == EXPECTED


@pytest.mark.kafka
def test_conversation_same_as_kafka(kafka_shared_groups):
    """The same conversation against Kafka 4.4 (the session's shared broker with its group
    settings, tests/conftest.py) gives :data:`EXPECTED`."""
    kafka = kafka_shared_groups
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 4, 1)]).values():
        future.result(30)
    # CreateTopics answers once the controller committed the topic; the group coordinator
    # learns of it from the broker's next metadata image, after the partitions are made (tens
    # of ms later on a busy shared broker): a member joining before that is assigned nothing.
    # A probe member of another group waits for it.
    host, port = kafka.bootstrap.split(":")
    _wait_until_the_coordinator_sees_the_topic((host, int(port)))
    assert conversation((host, int(port))) == EXPECTED


def _wait_until_the_coordinator_sees_the_topic(address, timeout_s=30.0):
    """Until a member of the group ``<GROUP>-probe`` is assigned every partition of TOPIC
    (each try a new member, which leaves at once)."""
    _wait_for_coordinator(address)
    deadline = time.monotonic() + timeout_s
    for attempt in range(1_000):
        probe = f"p{attempt % 10}-" + "z" * 21
        error, _epoch, assignment = _hb(address, probe, 0, owned=(), group=GROUP + "-probe")
        if error == 0:
            _hb(address, probe, -1, group=GROUP + "-probe", names=None, rebalance_ms=-1)
        if error == 0 and assignment == [0, 1, 2, 3]:
            return
        assert time.monotonic() < deadline, \
            f"Kafka's coordinator did not see {TOPIC} in time: {(error, assignment)}"
        time.sleep(0.1)


def _members(address):
    """``{member id: (member epoch, partitions)}`` of the group, by ConsumerGroupDescribe."""
    request_class = load_request_schema(69, 1)
    response = _call(address, request_class(group_ids=(GROUP,),
                                            include_authorized_operations=False))
    return {m.member_id: (m.member_epoch, sorted(p for t in m.assignment.topic_partitions
                                                 for p in t.partitions))
            for m in response.groups[0].members}


def test_a_group_survives_a_restart(broker_factory, tmp_path):
    """The group's records in ``__consumer_offsets`` bring it back as it was: the same
    epochs, members and assignments; a member goes on at its epoch, without rejoining."""
    broker = broker_factory(data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, 4)
    host, port = broker.bootstrap.split(":")
    address = (host, int(port))
    conversation(address)
    before = (_describe(address), _members(address))
    broker.stop()
    broker_factory(data_dir=tmp_path / "data", listen=address)
    _wait_for_coordinator(address)
    assert (_describe(address), _members(address)) == before
    epoch, owned = before[1]["m1-aaaaaaaaaaaaaaaaaaaaa"]
    answer = _hb(address, "m1-aaaaaaaaaaaaaaaaaaaaa", epoch, owned=set(owned), names=None,
                 rebalance_ms=-1, topic_id=_topic_id(address))
    # Accepted at its epoch (not fenced, no rejoin); the target moved on since m2 left.
    assert answer[0] == 0 and answer[1] >= epoch
    assert _fetch(address, None, -1) == (0, [5])


@pytest.mark.kafka
def test_kafka_dump_log_decodes_the_records(broker_factory, tmp_path):
    """Kafka 4.4's ``kafka-dump-log --offsets-decoder`` reads seglog's consumer group
    records as its own: every record type, the tombstones, the assignment epochs."""
    if _REF is None:
        if _REQUIRED:
            pytest.fail(_WHY)
        pytest.skip(_WHY)
    broker = broker_factory(data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, 4)
    host, port = broker.bootstrap.split(":")
    conversation((host, int(port)))
    broker.stop()
    files = sorted((tmp_path / "data").glob("**/__consumer_offsets-0/*.log"))
    assert files
    done = _REF.run_tool(_REF.dump_log_class, [
        "--offsets-decoder", "--files", ",".join(str(f) for f in files)],
        run_dir=tmp_path / "run", timeout_s=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "Exception" not in out and "Failed" not in out, out[-2000:]
    for record_type in (3, 5, 6, 7, 8):
        assert f'key: {{"type":"{record_type}","data":{{"groupId":"kg"' in out
    assert '"subscribedTopicNames":["kcg"]' in out
    assert '"partitions":[0,1,2,3],"assignmentEpochs":[2,2,2,2]' in out
    assert 'payload: <DELETE>' in out
