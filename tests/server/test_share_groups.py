"""Share groups (KIP-932) on ``seglog serve``: librdkafka's ShareConsumer members join and
share the partitions out (membership and assignment; fetching is ShareFetch's), the group
comes back from its ``__consumer_offsets`` records after a restart (members keep their ids,
epochs and assignments), a silent member is fenced after the session timeout, the records
are Kafka's bytes (``kafka-dump-log --offsets-decoder`` reads them), the assignor's
balance, and ``kafka-share-groups --list / --describe --members`` answer."""

from __future__ import annotations

import datetime
import re
import time
import uuid

import pytest
from confluent_kafka import ShareConsumer

from seglog.coordinator import share_assignor
from seglog.coordinator import share_group_records as rec

from test_admin_differential import Client

TOPIC = "shared"
PARTITIONS = 3
#: Bounded waits: this many rounds of ``PAUSE_S``.
ROUNDS = 100
PAUSE_S = 0.2


def _describe(c, group):
    return c.call(77, 1, group_ids=(group,), include_authorized_operations=False).groups[0]


def _counts(group_row):
    return sorted(sum(len(t.partitions) for t in m.assignment.topic_partitions)
                  for m in group_row.members)


def _heartbeat(c, group, member, epoch, topics=None):
    return c.call(76, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                  subscribed_topic_names=topics)


def _join_until_assigned(c, group, member, topics):
    """Join and heartbeat until the member holds a partition (bounded); its last answer."""
    r = _heartbeat(c, group, member, 0, topics)
    assert r.error_code == 0, r
    for _ in range(ROUNDS):
        if r.assignment is not None and r.assignment.topic_partitions:
            return r
        time.sleep(PAUSE_S)
        r = _heartbeat(c, group, member, r.member_epoch)
        assert r.error_code == 0, r
    raise AssertionError(f"never assigned: {r}")


#: A short session: a leave lost with a connection the broker closes (ShareFetch is another
#: module's) is made up for by the session timeout.
SHORT_SESSION = {"group.share.session.timeout.ms": "6000",
                 "group.share.min.session.timeout.ms": "6000"}
WAIT_S = 30


@pytest.mark.clients
def test_librdkafka_share_consumers_join_and_share_the_partitions(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data", config=SHORT_SESSION)
    broker.store.create_topic(TOPIC, PARTITIONS)
    c = Client(broker.bootstrap)
    consumers = []
    try:
        for _ in range(2):
            consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap,
                                      "group.id": "rk", "log_level": 0})
            consumer.subscribe([TOPIC])
            consumers.append(consumer)
        row = None
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for consumer in consumers:
                consumer.poll(0.1)
            row = _describe(c, "rk")
            if _counts(row) == [1, 2]:
                break
        assert row is not None and row.group_state == "Stable", row
        assert _counts(row) == [1, 2], row
        assert {m.member_epoch for m in row.members} == {row.group_epoch}
        assert all(tuple(m.subscribed_topic_names) == (TOPIC,) for m in row.members)
        consumers.pop().close()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            consumers[0].poll(0.1)
            row = _describe(c, "rk")
            if _counts(row) == [PARTITIONS]:
                break
        assert _counts(row) == [PARTITIONS], row
        consumers.pop().close()
        row = _describe(c, "rk")
        assert (row.group_state, len(row.members)) == ("Empty", 0)
    finally:
        for consumer in consumers:
            consumer.close()
        c.close()


def test_share_group_comes_back_after_a_restart(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, PARTITIONS)
    host, port = broker.bootstrap.split(":")
    c = Client(broker.bootstrap)
    member = str(uuid.uuid4())
    joined = _join_until_assigned(c, "rs", member, [TOPIC])
    before = _describe(c, "rs")
    c.close()
    broker.stop()
    broker = broker_factory(data_dir=tmp_path / "data", listen=(host, int(port)))
    c = Client(broker.bootstrap)
    try:
        after = _describe(c, "rs")
        assert (after.group_state, after.group_epoch, after.assignment_epoch) == \
            (before.group_state, before.group_epoch, before.assignment_epoch)
        assert [(m.member_id, m.member_epoch, m.client_id, list(m.subscribed_topic_names))
                for m in after.members] == \
            [(m.member_id, m.member_epoch, m.client_id, list(m.subscribed_topic_names))
             for m in before.members]
        # The member goes on with its epoch: not fenced, same partitions.
        r = _heartbeat(c, "rs", member, joined.member_epoch, [TOPIC])
        assert (r.error_code, r.member_epoch) == (0, joined.member_epoch), r
        assert sorted(r.assignment.topic_partitions[0].partitions) == list(range(PARTITIONS))
        r = _heartbeat(c, "rs", member, -1)
        assert (r.error_code, r.member_epoch) == (0, -1)
        r = c.call(42, 2, groups_names=("rs",))
        assert [(g.group_id, int(g.error_code)) for g in r.results] == [("rs", 0)]
    finally:
        c.close()


def test_silent_member_is_fenced_after_the_session_timeout(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data", config={
        "group.share.session.timeout.ms": "1000", "group.share.min.session.timeout.ms": "1000",
        "group.share.heartbeat.interval.ms": "500",
        "group.share.min.heartbeat.interval.ms": "500"})
    broker.store.create_topic(TOPIC, 1)
    c = Client(broker.bootstrap)
    try:
        member = str(uuid.uuid4())
        r = _heartbeat(c, "ft", member, 0, [TOPIC])
        assert (r.error_code, r.heartbeat_interval) == (0, datetime.timedelta(milliseconds=500))
        row = _describe(c, "ft")
        for _ in range(ROUNDS):
            row = _describe(c, "ft")
            if not row.members:
                break
            time.sleep(PAUSE_S)
        assert (row.group_state, len(row.members)) == ("Empty", 0)
        r = _heartbeat(c, "ft", member, r.member_epoch)
        assert int(r.error_code) == 25  # UNKNOWN_MEMBER_ID
    finally:
        c.close()


def test_records_are_kafkas_bytes():
    topic_id = uuid.UUID("0c3a53cd-d615-4329-b22d-c19d49055084")
    values = {
        rec.GROUP_METADATA: dict(epoch=3, metadata_hash=-5),
        rec.MEMBER_METADATA: dict(rack_id=None, client_id="c", client_host="/h",
                                  subscribed_topic_names=("a", "b")),
        rec.TARGET_ASSIGNMENT_METADATA: dict(assignment_epoch=3,
                                             assignment_timestamp_ms=1234),
        rec.TARGET_ASSIGNMENT_MEMBER: dict(partitions={topic_id: (0, 2)}),
        rec.CURRENT_MEMBER_ASSIGNMENT: dict(member_epoch=3, previous_member_epoch=2, state=0,
                                            partitions={topic_id: (1,)}),
        rec.STATE_PARTITION_METADATA: dict(initializing={topic_id: ("t", (1,))},
                                           initialized={topic_id: ("t", (0,))},
                                           deleting={}),
    }
    for record_type, value in values.items():
        data = rec.encode_value(record_type, value)
        assert data is not None and data[:2] == b"\x00\x00"
        back = rec.decode_value(record_type, data)
        assert back == value, record_type
    key = rec.encode_key(rec.CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    assert key == b"\x00\x0e\x00\x01g\x00\x01m"
    assert rec.decode_key(key) == (14, "g", "m")
    assert rec.decode_key(b"\x00\x02\x00\x01g") is None  # an offset commit's key
    # ShareGroupMetadataValue v0: epoch 3, hash -5, no tags.
    assert rec.encode_value(rec.GROUP_METADATA, values[rec.GROUP_METADATA]) == \
        b"\x00\x00" + b"\x00\x00\x00\x03" + b"\xff" * 7 + b"\xfb" + b"\x00"


def test_simple_assignor_shares_partitions_and_members():
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    # More partitions than members: each partition once, counts balanced, sticky.
    got = share_assignor.assign({"m1": {a}, "m2": {a}}, {}, {a: {0, 1, 2, 3}})
    assert sorted(len(x[a]) for x in got.values()) == [2, 2]
    assert set().union(*(x[a] for x in got.values())) == {0, 1, 2, 3}
    again = share_assignor.assign({"m1": {a}, "m2": {a}}, got, {a: {0, 1, 2, 3}})
    assert again == got
    # More members than partitions: every member gets one, each partition shared.
    got = share_assignor.assign({f"m{i}": {a} for i in range(4)}, {}, {a: {0, 1}})
    assert all(len(x[a]) == 1 for x in got.values())
    assert sorted(p for x in got.values() for p in x[a]) == [0, 0, 1, 1]
    # Only the assignable (initialized) partitions are given out.
    got = share_assignor.assign({"m1": {a}}, {}, {a: {1}})
    assert got == {"m1": {a: {1}}}
    # Different subscriptions: topic by topic.
    got = share_assignor.assign({"m1": {a}, "m2": {a, b}}, {}, {a: {0, 1}, b: {0}})
    assert got["m2"][b] == {0} and b not in got["m1"]
    assert got["m1"][a] | got["m2"].get(a, set()) == {0, 1}


@pytest.mark.kafka
def test_kafka_share_groups_tool_lists_and_describes(broker, tmp_path):
    from seglog.bench.kafka import KafkaRef, find_kafka
    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    assert isinstance(ref, KafkaRef)
    broker.store.create_topic(TOPIC, PARTITIONS)
    c = Client(broker.bootstrap)
    member = str(uuid.uuid4())
    try:
        _join_until_assigned(c, "tool", member, [TOPIC])
        tool = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
        listed = ref.run_tool(tool, ["--bootstrap-server", broker.bootstrap, "--list"],
                              run_dir=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.split() == ["tool"]
        described = ref.run_tool(tool, ["--bootstrap-server", broker.bootstrap,
                                        "--describe", "--group", "tool", "--members"],
                                 run_dir=tmp_path)
        assert described.returncode == 0, described.stderr
        lines = [re.split(r"\s+", line.strip()) for line in described.stdout.splitlines()
                 if line.strip()]
        assert lines[0][:2] == ["GROUP", "CONSUMER-ID"], described.stdout
        assert lines[1][:2] == ["tool", member], described.stdout
        assert f"{TOPIC}:0,1,2" in described.stdout, described.stdout
        # The member leaves; then the offsets tools (AlterShareGroupOffsets,
        # DescribeShareGroupOffsets, DeleteShareGroupOffsets) and --delete (DeleteGroups).
        assert _heartbeat(c, "tool", member, -1).error_code == 0

        def run(*args):
            done = ref.run_tool(tool, ["--bootstrap-server", broker.bootstrap, *args],
                                run_dir=tmp_path)
            assert done.returncode == 0, done.stderr
            rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
            return rows[:1] + sorted(rows[1:])

        rows = run("--reset-offsets", "--to-earliest", "--group", "tool", "--topic", TOPIC,
                   "--execute")
        assert rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [
            ["tool", TOPIC, str(p), "0"] for p in range(PARTITIONS)]
        rows = run("--describe", "--group", "tool")
        assert rows == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]] + [
            ["tool", TOPIC, str(p), "0", "0"] for p in range(PARTITIONS)]
        assert run("--delete-offsets", "--group", "tool", "--topic", TOPIC) == [
            ["TOPIC", "STATUS"], [TOPIC, "Successful"]]
        assert run("--delete", "--group", "tool")[0][:3] == ["Deletion", "of", "requested"]
        assert run("--list") == []
    finally:
        c.close()


@pytest.mark.kafka
def test_kafka_dump_log_decodes_the_records(broker_factory, tmp_path):
    """Kafka 4.4's ``kafka-dump-log --offsets-decoder`` reads seglog's share group records
    as its own: every record type (10-15) and the tombstones of a member that left."""
    from seglog.bench.kafka import find_kafka
    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    broker = broker_factory(data_dir=tmp_path / "data")
    broker.store.create_topic(TOPIC, PARTITIONS)
    c = Client(broker.bootstrap)
    member = str(uuid.uuid4())
    r = _join_until_assigned(c, "dl", member, [TOPIC])
    _join_until_assigned(c, "dl", str(uuid.uuid4()), [TOPIC])
    assert _heartbeat(c, "dl", member, -1).error_code == 0
    c.close()
    broker.stop()
    files = sorted((tmp_path / "data").glob("**/__consumer_offsets-*/*.log"))
    done = ref.run_tool(ref.dump_log_class, [
        "--offsets-decoder", "--files", ",".join(str(f) for f in files)],
        run_dir=tmp_path / "run", timeout_s=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "Exception" not in out and "Failed" not in out, out[-2000:]
    for record_type in (10, 11, 12, 13, 14, 15):
        assert f'key: {{"type":"{record_type}","data":{{"groupId":"dl"' in out, record_type
    assert '"subscribedTopicNames":["shared"]' in out
    assert f'"memberEpoch":{r.member_epoch}' in out
    assert '"initializedTopics":[{"topicId":' in out
    assert '"topicName":"shared","partitions":[0,1,2]' in out
    assert 'payload: <DELETE>' in out


def test_group_configs_set_the_session_and_heartbeat(broker):
    """``share.heartbeat.interval.ms`` / ``share.session.timeout.ms`` set on the group (the
    GROUP config resource) win over the broker's defaults."""
    broker.store.create_topic(TOPIC, 1)
    c = Client(broker.bootstrap)
    try:
        m = c.m(44, 1)
        r = c.call(44, 1, validate_only=False, resources=(m.AlterConfigsResource(
            resource_type=32, resource_name="gc", configs=(
                m.AlterableConfig(name="share.heartbeat.interval.ms", config_operation=0,
                                  value="7000"),)),))
        assert [int(x.error_code) for x in r.responses] == [0], r
        r = _heartbeat(c, "gc", str(uuid.uuid4()), 0, [TOPIC])
        assert (r.error_code, r.heartbeat_interval) == (0, datetime.timedelta(seconds=7))
        r = _heartbeat(c, "other", str(uuid.uuid4()), 0, [TOPIC])
        assert (r.error_code, r.heartbeat_interval) == (0, datetime.timedelta(seconds=5))
    finally:
        c.close()


class _Recorder:
    """A ShareGroupListener that records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        self.calls.append(("leave", group_id, member_id))

    def on_group_empty(self, group_id: str) -> None:
        self.calls.append(("empty", group_id))


def test_listeners_hear_leaves_and_empty_groups(broker):
    """The interface ShareFetch uses: ``is_member``, and the listener calls when a member
    leaves (or is fenced) and when the group empties."""
    from seglog.server.apis.share_groups import find_share_groups_state
    found = find_share_groups_state(broker.state)
    assert found is not None
    recorder = _Recorder()
    found.add_listener(recorder)
    broker.store.create_topic(TOPIC, 1)
    c = Client(broker.bootstrap)
    try:
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        ra = _heartbeat(c, "ls", a, 0, [TOPIC])
        rb = _heartbeat(c, "ls", b, 0, [TOPIC])
        assert found.is_member("ls", a) and found.is_member("ls", b)
        assert not found.is_member("ls", "nobody") and not found.is_member("nope", a)
        assert "ls" in found.group_ids()
        assert _heartbeat(c, "ls", a, -1).error_code == 0
        assert recorder.calls == [("leave", "ls", a)]
        assert not found.is_member("ls", a)
        assert _heartbeat(c, "ls", b, -1).error_code == 0
        assert recorder.calls == [("leave", "ls", a), ("leave", "ls", b), ("empty", "ls")]
        assert ra.error_code == rb.error_code == 0
    finally:
        c.close()


def test_group_empty_only_for_an_empty_group(broker):
    """``on_group_empty`` fires only when the group has no member left: not for a group this
    broker no longer holds (its ``__consumer_offsets`` partition moved away), as Kafka's
    ``onGroupEmpty`` fires only when the group's member count reaches 0."""
    from seglog.server.apis.share_groups import find_share_groups_state
    found = find_share_groups_state(broker.state)
    assert found is not None
    recorder = _Recorder()
    found.add_listener(recorder)
    broker.store.create_topic(TOPIC, 1)
    c = Client(broker.bootstrap)
    try:
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        assert _heartbeat(c, "ge", a, 0, [TOPIC]).error_code == 0
        assert _heartbeat(c, "ge", b, 0, [TOPIC]).error_code == 0
        # The session timer fences a member of a group unloaded meanwhile: a leave, no empty.
        found.coordinator.unload(["ge"])
        found._left("ge", [a])
        assert recorder.calls == [("leave", "ge", a)]
    finally:
        c.close()


def test_deleted_topic_leaves_the_share_state_metadata(broker):
    """A deleted subscribed topic leaves the group's initialized topics (Kafka's
    ``maybeCleanupShareGroupState``); recreated, it is initialized and assigned afresh."""
    broker.store.create_topic(TOPIC, 2)
    c = Client(broker.bootstrap)
    try:
        member = str(uuid.uuid4())
        r = _join_until_assigned(c, "dt", member, [TOPIC])
        old_id = r.assignment.topic_partitions[0].topic_id
        r = c.call(20, 6, topics=(c.m(20, 6).DeleteTopicState(name=TOPIC, topic_id=uuid.UUID(
            int=0)),), timeout=datetime.timedelta(seconds=10))
        assert [int(t.error_code) for t in r.responses] == [0]
        broker.store.create_topic(TOPIC, 3)
        epoch = None
        got = None
        for _ in range(ROUNDS):
            time.sleep(PAUSE_S)
            r = _heartbeat(c, "dt", member, epoch if epoch is not None else 0,
                           None if epoch is not None else [TOPIC])
            assert r.error_code == 0, r
            epoch = r.member_epoch
            if r.assignment is not None and r.assignment.topic_partitions and \
                    r.assignment.topic_partitions[0].topic_id != old_id:
                got = r.assignment.topic_partitions[0]
                if len(got.partitions) == 3:
                    break
        assert got is not None and sorted(got.partitions) == [0, 1, 2], r
        # The group settles: no epoch bump at every heartbeat.
        r1 = _heartbeat(c, "dt", member, epoch)
        time.sleep(1.2)
        r2 = _heartbeat(c, "dt", member, r1.member_epoch)
        assert r1.member_epoch == r2.member_epoch == epoch
    finally:
        c.close()


def test_group_share_max_size(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data", config={"group.share.max.size": "1"})
    broker.store.create_topic(TOPIC, 1)
    c = Client(broker.bootstrap)
    try:
        first = str(uuid.uuid4())
        assert _heartbeat(c, "ms", first, 0, [TOPIC]).error_code == 0
        r = _heartbeat(c, "ms", str(uuid.uuid4()), 0, [TOPIC])
        assert (int(r.error_code), r.error_message) == (
            81, "The share group has reached its maximum capacity of 1 members.")
        r = _heartbeat(c, "ms", first, 0, [TOPIC])  # a member already in may rejoin
        assert r.error_code == 0
    finally:
        c.close()


@pytest.mark.kafka
def test_java_share_consumer_joins_and_is_assigned(broker, tmp_path):
    """Kafka 4.4's Java KafkaShareConsumer (through ``kafka-console-share-consumer``) joins
    the share group and is assigned every partition (membership only; its fetches are
    ShareFetch's)."""
    import subprocess

    from seglog.bench.kafka import find_kafka
    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    broker.store.create_topic(TOPIC, PARTITIONS)
    c = Client(broker.bootstrap)
    cmd = ref.java_command("org.apache.kafka.tools.consumer.ConsoleShareConsumer", [
        "--bootstrap-server", broker.bootstrap, "--topic", TOPIC, "--group", "java",
        "--timeout-ms", "60000"], run_dir=tmp_path)
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        row = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            row = _describe(c, "java")
            if row.error_code == 0 and _counts(row) == [PARTITIONS]:
                break
            time.sleep(PAUSE_S)
        assert row is not None and _counts(row) == [PARTITIONS], row
        (member,) = row.members
        assert (member.client_id, list(member.subscribed_topic_names)) == \
            ("console-share-consumer", [TOPIC])
        assert member.member_epoch == row.group_epoch == row.assignment_epoch
    finally:
        process.kill()
        process.wait(30)
        c.close()


def test_assignment_interval_is_a_dynamic_broker_config(broker):
    """``group.share.assignment.interval.ms`` (cluster-wide dynamic): with a long interval a
    second member waits for the next recomputation; set to 0, it is assigned at once."""
    broker.store.create_topic(TOPIC, 2)
    c = Client(broker.bootstrap)
    try:
        m = c.m(44, 1)

        def set_interval(value: str) -> None:
            r = c.call(44, 1, validate_only=False, resources=(m.AlterConfigsResource(
                resource_type=4, resource_name="", configs=(m.AlterableConfig(
                    name="group.share.assignment.interval.ms", config_operation=0,
                    value=value),)),))
            assert [int(x.error_code) for x in r.responses] == [0], r

        first = _join_until_assigned(c, "ai", str(uuid.uuid4()), [TOPIC])
        set_interval("600000")
        time.sleep(1.2)  # past the default second since the last computation
        second = _heartbeat(c, "ai", str(uuid.uuid4()), 0, [TOPIC])
        assert second.error_code == 0 and not second.assignment.topic_partitions
        set_interval("0")
        r = _heartbeat(c, "ai", second.member_id, second.member_epoch)
        assert r.error_code == 0 and r.member_epoch > first.member_epoch
        assert sum(len(t.partitions) for t in r.assignment.topic_partitions) == 1, r
    finally:
        c.close()
