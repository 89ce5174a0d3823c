"""Differential: the same streams group requests (kio over a socket) to Kafka 4.4 and to
seglog serve, and the same answers: a join without a topology, a join that needs an internal
topic (MISSING_INTERNAL_TOPICS, then the tasks once the broker created it), fenced and
unknown members, StreamsGroupDescribe of the group and of an unknown one, ListGroups,
OffsetCommit and OffsetFetch with the member's epoch, a stale one and an unknown member,
DescribeGroups (v5: Dead; v6: GROUP_ID_NOT_FOUND, "not a classic group") and a classic
JoinGroup (INCONSISTENT_GROUP_PROTOCOL) on the streams group's id, the leave, DeleteGroups.
And, seglog alone, a group that survives a broker restart.

Known differences, left out: a heartbeat with a non-zero epoch for a group the coordinator
does not know is GROUP_ID_NOT_FOUND on Kafka (fatal for the Streams client) and
UNKNOWN_MEMBER_ID on seglog (its members rejoin; see seglog.coordinator.streams_group);
Kafka's first join answers group epoch 2 where seglog's answers 1 (the epochs are compared
from the join on).
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.serial import entity_reader, entity_writer

from seglog.bench.kafka import KafkaBroker
from seglog.schemas import load_request_schema, load_response_schema
from seglog.server.broker import Broker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CONFIG = {"group.streams.heartbeat.interval.ms": 500,
          "group.streams.min.heartbeat.interval.ms": 500}
WAIT_S = 30.0


class Client:
    """One connection; ``call(api_key, version, **fields)`` returns kio's response;
    ``m(api_key, version)`` is the request's module (its nested classes)."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    @staticmethod
    def m(api_key: int, version: int):
        return sys.modules[load_request_schema(api_key, version).__module__]

    def call(self, api_key: int, version: int, **fields):
        request_class = load_request_schema(api_key, version)
        header_class = request_class.__header_schema__
        self.correlation_id += 1
        header = {"request_api_key": api_key, "request_api_version": version,
                  "correlation_id": self.correlation_id}
        if "client_id" in header_class.__dataclass_fields__:
            header["client_id"] = "differential"
        buffer = io.BytesIO()
        entity_writer(header_class)(buffer, header_class(**header))
        entity_writer(request_class)(buffer, request_class(**fields))
        body = buffer.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        response_class = load_response_schema(api_key, version)
        _, offset = entity_reader(response_class.__header_schema__)(data, 0)
        value, _ = entity_reader(response_class)(data, offset)
        return value

    def _read(self, count: int) -> bytes:
        out = b""
        while len(out) < count:
            chunk = self.sock.recv(count - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def _tasks(entries) -> list | None:
    return None if entries is None else sorted(
        (t.subtopology_id, sorted(t.partitions)) for t in entries)


def scenario(bootstrap: str) -> list:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("src", 2, 1)])["src"].result(30)
    c = Client(bootstrap)
    m = c.m(88, 1)
    out: list = []

    def topology():
        changelog = m.TopicInfo(name="app-store-changelog", partitions=0,
                                replication_factor=-1, topic_configs=(
                                    m.KeyValue(key="cleanup.policy", value="compact"),))
        return m.Topology(epoch=0, subtopologies=(m.Subtopology(
            subtopology_id="0", source_topics=("src",), source_topic_regex=(),
            state_changelog_topics=(changelog,), repartition_sink_topics=(),
            repartition_source_topics=(), copartition_groups=()),))

    def beat(member: str, epoch: int, *, with_topology: bool = False, group: str = "app",
             rebalance_timeout_ms: int = 30000, owned=()):
        tasks = None if owned is None else tuple(
            m.TaskIds(subtopology_id=s, partitions=tuple(ps)) for s, ps in owned)
        return c.call(88, 1, group_id=group, member_id=member, member_epoch=epoch,
                      endpoint_information_epoch=0, instance_id=None, rack_id=None,
                      rebalance_timeout=datetime.timedelta(milliseconds=rebalance_timeout_ms),
                      topology=topology() if with_topology else None,
                      active_tasks=tasks, standby_tasks=() if tasks is not None else None,
                      warmup_tasks=() if tasks is not None else None,
                      process_id="process-1" if epoch == 0 else None, user_endpoint=None,
                      client_tags=None, task_offsets=None, task_end_offsets=None,
                      shutdown_application=False)

    def answer(r) -> tuple:
        return (int(r.error_code), r.error_message)

    # The group's coordinator, once __consumer_offsets exists (Kafka creates it on first use).
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = c.call(10, 4, key_type=0, coordinator_keys=("app",))
        if found.coordinators[0].error_code == 0:
            break
        time.sleep(0.3)
    # A first heartbeat without a topology, or without a rebalance timeout.
    out.append(("no topology", answer(beat("m1", 0))))
    out.append(("no rebalance timeout",
                answer(beat("m1", 0, with_topology=True, rebalance_timeout_ms=-1))))
    # The join: the changelog topic is missing until the broker creates it.
    deadline = time.monotonic() + WAIT_S
    r = beat("m1", 0, with_topology=True)
    while r.error_code in (14, 16) and time.monotonic() < deadline:  # Kafka: still loading
        time.sleep(0.3)
        r = beat("m1", 0, with_topology=True)
    joined_epoch = r.member_epoch
    out.append(("join", answer(r), joined_epoch > 0, [s.status_code for s in r.status or ()],
                _tasks(r.active_tasks), r.heartbeat_interval, r.acceptable_recovery_lag,
                r.task_offset_interval))
    epoch, active, epochs = r.member_epoch, [], []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        r = beat("m1", epoch, owned=active, with_topology=epoch == 0)
        assert r.error_code == 0, (r.error_message, r)
        epochs.append(r.member_epoch)
        epoch = r.member_epoch
        if r.active_tasks is not None:
            active = [(t.subtopology_id, list(t.partitions)) for t in r.active_tasks]
        if active and not r.status:
            break
        time.sleep(0.3)
    out.append(("assigned", epochs[-1] - joined_epoch, sorted(active),
                [s.status_code for s in r.status or ()]))
    topics = admin.list_topics(timeout=10).topics
    out.append(("changelog", len(topics["app-store-changelog"].partitions)))
    fenced = answer(beat("m1", epoch + 5, owned=active))
    out.append(("fenced", fenced[0], fenced[1].replace(f"({epoch + 5})", "(E+5)")
                .replace(f"({epoch})", "(E)")))
    out.append(("unknown member", answer(beat("nobody", epoch, owned=None))))
    # Describe: the group and an unknown one.
    d = c.call(89, 1, group_ids=("app", "nosuch"), include_authorized_operations=False,
               include_topology_description=False)
    app, nosuch = d.groups
    out.append(("describe", int(app.error_code), app.group_state,
                [(mb.member_id, mb.process_id, mb.is_classic,
                  _tasks(mb.assignment.active_tasks), _tasks(mb.target_assignment.active_tasks))
                 for mb in app.members],
                [(s.subtopology_id, s.source_topics,
                  [(t.name, t.partitions) for t in s.state_changelog_topics])
                 for s in app.topology.subtopologies],
                app.assignor_name))
    out.append(("describe unknown", int(nosuch.error_code), nosuch.error_message))
    listed = c.call(16, 5, states_filter=(), types_filter=())
    out.append(("list", sorted((g.group_id, g.protocol_type, g.group_state, g.group_type)
                               for g in listed.groups)))
    # Offsets committed by the member: its epoch, then a stale one.
    om = c.m(8, 9)

    def commit(member: str, member_epoch: int) -> list:
        r = c.call(8, 9, group_id="app", generation_id_or_member_epoch=member_epoch,
                   member_id=member, group_instance_id=None, topics=(om.OffsetCommitRequestTopic(
                       name="src", partitions=(om.OffsetCommitRequestPartition(
                           partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                           committed_metadata=""),)),))
        return [int(p.error_code) for t in r.topics for p in t.partitions]

    out.append(("commit", commit("m1", epoch), commit("m1", epoch - 1), commit("nobody", epoch)))
    fm = c.m(9, 9)

    def fetch(member, member_epoch) -> tuple:
        r = c.call(9, 9, groups=(fm.OffsetFetchRequestGroup(
            group_id="app", member_id=member, member_epoch=member_epoch, topics=(
                fm.OffsetFetchRequestTopics(name="src", partition_indexes=(0,)),)),),
            require_stable=False)
        (g,) = r.groups
        return (int(g.error_code), [(t.name, [(p.partition_index, p.committed_offset)
                                              for p in t.partitions]) for t in g.topics])

    out.append(("fetch", fetch("m1", epoch), fetch("m1", epoch - 1), fetch("nobody", epoch),
                fetch(None, -1)))
    # The classic APIs on the streams group's id.
    for version in (5, 6):
        described = c.call(15, version, groups=("app",), include_authorized_operations=False)
        (group,) = described.groups
        out.append(("describe classic", version, int(group.error_code),
                    getattr(group, "error_message", None),
                    group.group_state, group.protocol_type, len(group.members)))
    jm = c.m(11, 9)
    joined = c.call(11, 9, group_id="app", session_timeout=datetime.timedelta(seconds=10),
                    rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                    group_instance_id=None, protocol_type="consumer", protocols=(
                        jm.JoinGroupRequestProtocol(name="range", metadata=b""),),
                    reason=None)
    out.append(("join classic", int(joined.error_code)))
    # The leave, then DeleteGroups of the empty group.
    r = beat("m1", -1, owned=None)
    out.append(("leave", answer(r), r.member_epoch))
    deleted = c.call(42, 2, groups_names=("app",))
    out.append(("delete", [(g.group_id, int(g.error_code)) for g in deleted.results]))
    c.close()
    return out


def test_streams_group_requests_answer_as_kafka_does(kafka_ref, tmp_path):
    kafka = KafkaBroker(kafka_ref, tmp_path / "kafka", extra_properties={
        **CONFIG, "group.streams.initial.rebalance.delay.ms": 0})
    kafka.format()
    kafka.start()
    try:
        expected = scenario(kafka.bootstrap)
    finally:
        kafka.stop()
    broker = Broker(tmp_path / "seglog", listen=("127.0.0.1", 0),
                    config={"offsets.topic.num.partitions": 1, **CONFIG})
    broker.start()
    try:
        got = scenario(broker.bootstrap)
    finally:
        broker.stop()
    for want, have in zip(expected, got):
        assert have == want
    assert len(got) == len(expected)


def test_a_streams_group_survives_a_restart(tmp_path):
    """seglog alone: the group is written to ``__consumer_offsets`` in Kafka's records and
    loaded back by the next broker on the same data dir: the member keeps its epoch and its
    tasks, and its next heartbeat goes on from there."""
    config = {"offsets.topic.num.partitions": 1, **CONFIG}
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0), config=config)
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("src", 2, 1)])["src"].result(30)
        c = Client(broker.bootstrap)
        m = c.m(88, 1)
        c.call(10, 4, key_type=0, coordinator_keys=("app",))
        changelog = m.TopicInfo(name="app-store-changelog", partitions=0,
                                replication_factor=-1, topic_configs=())
        topology = m.Topology(epoch=0, subtopologies=(m.Subtopology(
            subtopology_id="0", source_topics=("src",), source_topic_regex=(),
            state_changelog_topics=(changelog,), repartition_sink_topics=(),
            repartition_source_topics=(), copartition_groups=()),))

        def beat(client, epoch, active):
            return client.call(88, 1, group_id="app", member_id="m1", member_epoch=epoch,
                               endpoint_information_epoch=0, instance_id=None, rack_id=None,
                               rebalance_timeout=datetime.timedelta(seconds=30),
                               topology=topology if epoch == 0 else None,
                               active_tasks=tuple(m.TaskIds(subtopology_id=s, partitions=ps)
                                                  for s, ps in active),
                               standby_tasks=(), warmup_tasks=(),
                               process_id="p1" if epoch == 0 else None, user_endpoint=None,
                               client_tags=None, task_offsets=None, task_end_offsets=None,
                               shutdown_application=False)

        r = beat(c, 0, [])
        epoch, active = r.member_epoch, []
        deadline = time.monotonic() + WAIT_S
        while not active and time.monotonic() < deadline:
            time.sleep(0.2)
            r = beat(c, epoch, active)
            epoch = r.member_epoch
            if r.active_tasks:
                active = [(t.subtopology_id, tuple(t.partitions)) for t in r.active_tasks]
        assert active == [("0", (0, 1))]

        def describe(client):
            (g,) = client.call(89, 1, group_ids=("app",), include_authorized_operations=False,
                               include_topology_description=False).groups
            return (int(g.error_code), g.group_state, g.group_epoch, g.assignment_epoch,
                    g.topology.epoch, [(s.subtopology_id, s.source_topics)
                                       for s in g.topology.subtopologies],
                    [(mb.member_id, mb.member_epoch, mb.process_id,
                      _tasks(mb.assignment.active_tasks),
                      _tasks(mb.target_assignment.active_tasks)) for mb in g.members])

        before = describe(c)
        c.close()
    finally:
        broker.stop()
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0), config=config)
    broker.start()
    try:
        c = Client(broker.bootstrap)
        assert describe(c) == before
        r = beat(c, epoch, active)
        assert (int(r.error_code), r.member_epoch) == (0, epoch)
        listed = c.call(16, 5, states_filter=(), types_filter=("streams",))
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("app", "Stable")]
        c.close()
    finally:
        broker.stop()
