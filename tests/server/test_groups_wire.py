"""The group APIs byte for byte: one scripted conversation of raw requests (kio-encoded, one
TCP connection per call) played against ``seglog serve`` and, where Java and the Kafka jars
are present, against the real Kafka 4.4 broker; both must give the same error codes, states
and offsets (the expectations below are what Kafka answers)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import socket
import struct
import time
import typing
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTopicPartition

import kio.index as kio_index
from kio.serial import entity_reader, entity_writer

from seglog.server.apis import groups

from kafka_waits import eventually

TOPIC = "wire-t"


def _call(address, request, *, client_id="groups-wire", timeout_s=15.0):
    """Send ``request`` (a kio request entity) and return kio's decoded response."""
    header_class = type(request).__header_schema__
    fields = {f.name for f in dataclasses.fields(header_class)}
    header = dict(request_api_key=type(request).__api_key__,
                  request_api_version=type(request).__version__, correlation_id=7)
    if "client_id" in fields:
        header["client_id"] = client_id
    buffer = io.BytesIO()
    entity_writer(header_class)(buffer, header_class(**header))
    entity_writer(type(request))(buffer, request)
    data = buffer.getvalue()
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        body = _exactly(sock, size)
    response_class = kio_index.load_response_schema(type(request).__api_key__,
                                                    type(request).__version__)
    _, offset = entity_reader(response_class.__header_schema__)(body, 0)
    value, _ = entity_reader(response_class)(body, offset)
    return value


def _exactly(sock, count):
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        out += chunk
    return out


def _req(api_key, version, **fields):
    return kio_index.load_request_schema(api_key, version)(**fields)


def _nested(api_key, version, *path):
    cls = kio_index.load_request_schema(api_key, version)
    for name in path:
        hint = typing.get_type_hints(cls)[name]
        if typing.get_origin(hint) is not tuple:  # Optional[tuple[...]]
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        cls = typing.get_args(hint)[0]
    return cls


def _subscription(*topics):
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def _commit(address, group, generation, member, *, partition=0, offset=5, metadata=""):
    topic_class = _nested(8, 9, "topics")
    partition_class = _nested(8, 9, "topics", "partitions")
    response = _call(address, _req(
        8, 9, group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        group_instance_id=None, topics=(topic_class(name=TOPIC, partitions=(partition_class(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=metadata),)),)))
    return int(response.topics[0].partitions[0].error_code)


def wait_for_coordinator(address, timeout_s: float = 60.0) -> None:
    """Until the group coordinator answers (Kafka creates ``__consumer_offsets`` on the first
    FindCoordinator and answers COORDINATOR_NOT_AVAILABLE, then LOAD_IN_PROGRESS, meanwhile;
    clients retry, and so does this, bounded)."""
    deadline = time.monotonic() + timeout_s
    group_class = _nested(9, 8, "groups")
    while True:
        find = _call(address, _req(10, 6, key_type=0, coordinator_keys=("warm-up",)))
        if int(find.coordinators[0].error_code) == 0:
            fetched = _call(address, _req(9, 8, groups=(group_class(group_id="warm-up",
                                                                    topics=None),),
                                          require_stable=False))
            if int(fetched.groups[0].error_code) == 0:
                return
        assert time.monotonic() < deadline, "the group coordinator never became available"
        time.sleep(0.2)


def conversation(address) -> dict:
    """Play the script against the broker at ``address``; returns what it answered."""
    wait_for_coordinator(address)
    seen: dict = {}
    find = _call(address, _req(10, 6, key_type=0, coordinator_keys=("g1", "g2")))
    seen["find"] = [int(c.error_code) for c in find.coordinators]
    seen["find_bad_type"] = int(_call(address, _req(10, 6, key_type=5, coordinator_keys=("g1",))
                                      ).coordinators[0].error_code)
    protocol = _nested(11, 9, "protocols")
    td = datetime.timedelta
    first = _call(address, _req(11, 9, group_id="wg", session_timeout=td(seconds=10),
                                rebalance_timeout=td(seconds=10), member_id="",
                                group_instance_id=None, protocol_type="consumer",
                                protocols=(protocol(name="range", metadata=_subscription(TOPIC)),),
                                reason=None))
    seen["join1"] = int(first.error_code)
    member = first.member_id
    seen["member_id_prefix"] = member.startswith("groups-wire-")
    joined = _call(address, _req(11, 9, group_id="wg", session_timeout=td(seconds=10),
                                 rebalance_timeout=td(seconds=10), member_id=member,
                                 group_instance_id=None, protocol_type="consumer",
                                 protocols=(protocol(name="range",
                                                     metadata=_subscription(TOPIC)),),
                                 reason=None))
    seen["join2"] = (int(joined.error_code), joined.generation_id, joined.leader == member,
                     joined.protocol_name, len(joined.members))
    generation = joined.generation_id
    bad_session = _call(address, _req(11, 9, group_id="wg", session_timeout=td(milliseconds=1),
                                      rebalance_timeout=td(seconds=10), member_id="",
                                      group_instance_id=None, protocol_type="consumer",
                                      protocols=(protocol(name="range", metadata=b""),),
                                      reason=None))
    seen["join_bad_session"] = int(bad_session.error_code)
    seen["commit_completing"] = _commit(address, "wg", generation, member)
    assignment = _nested(14, 5, "assignments")
    sync = _call(address, _req(14, 5, group_id="wg", generation_id=generation, member_id=member,
                               group_instance_id=None, protocol_type="consumer",
                               protocol_name="range",
                               assignments=(assignment(member_id=member, assignment=b"A1"),)))
    seen["sync"] = (int(sync.error_code), sync.assignment, sync.protocol_name)
    seen["sync_no_protocol"] = int(_call(address, _req(
        14, 5, group_id="wg", generation_id=generation, member_id=member,
        group_instance_id=None, protocol_type=None, protocol_name=None,
        assignments=())).error_code)
    heartbeat = lambda gen, mid: int(_call(address, _req(  # noqa: E731
        12, 4, group_id="wg", generation_id=gen, member_id=mid, group_instance_id=None)
    ).error_code)
    seen["heartbeat"] = (heartbeat(generation, member), heartbeat(generation + 1, member),
                         heartbeat(generation, "nobody"))
    seen["commit"] = (_commit(address, "wg", generation, member),
                      _commit(address, "wg", -1, ""),
                      _commit(address, "wg", generation + 1, member),
                      _commit(address, "wg", generation, member, metadata="m" * 5000),
                      _commit(address, "wg", generation, member, partition=99),
                      _commit(address, "none", 1, "m"))
    group_class = _nested(9, 8, "groups")
    fetched = _call(address, _req(9, 8, groups=(group_class(group_id="wg", topics=None),),
                                  require_stable=True)).groups[0]
    seen["fetch_all"] = [(t.name, p.partition_index, p.committed_offset, int(p.error_code))
                         for t in fetched.topics for p in t.partitions]
    topic_v1 = _nested(9, 1, "topics")
    fetched = _call(address, _req(9, 1, group_id="wg", topics=(topic_v1(
        name=TOPIC, partition_indexes=(0, 1)),)))
    seen["fetch_v1"] = [(p.partition_index, p.committed_offset) for p in fetched.topics[0].partitions]
    described = _call(address, _req(15, 5, groups=("wg",), include_authorized_operations=False)
                      ).groups[0]
    seen["describe"] = (described.group_state, described.protocol_type, described.protocol_data,
                        [(m.member_id == member, m.member_assignment, m.client_host)
                         for m in described.members])
    seen["list_stable"] = [g.group_id for g in _call(address, _req(
        16, 4, states_filter=("Stable",))).groups if g.group_id == "wg"]
    seen["list_empty"] = [g.group_id for g in _call(address, _req(
        16, 4, states_filter=("Empty",))).groups if g.group_id == "wg"]
    seen["delete_busy"] = int(_call(address, _req(42, 2, groups_names=("wg",))).results[0]
                              .error_code)
    delete_topic = _nested(47, 0, "topics")
    delete_partition = _nested(47, 0, "topics", "partitions")
    offset_delete = _call(address, _req(47, 0, group_id="wg", topics=(delete_topic(
        name=TOPIC, partitions=(delete_partition(partition_index=0),)),)))
    seen["offset_delete_subscribed"] = (int(offset_delete.error_code), [
        int(p.error_code) for t in offset_delete.topics for p in t.partitions])
    identity = _nested(13, 5, "members")
    left = _call(address, _req(13, 5, group_id="wg", members=(
        identity(member_id=member, group_instance_id=None, reason=None),
        identity(member_id="ghost", group_instance_id=None, reason=None))))
    seen["leave"] = (int(left.error_code), [int(m.error_code) for m in left.members])
    described = _call(address, _req(15, 5, groups=("wg",), include_authorized_operations=False)
                      ).groups[0]
    seen["describe_after_leave"] = (described.group_state, len(described.members))
    offset_delete = _call(address, _req(47, 0, group_id="wg", topics=(delete_topic(
        name=TOPIC, partitions=(delete_partition(partition_index=0),)),)))
    seen["offset_delete_empty"] = (int(offset_delete.error_code), [
        int(p.error_code) for t in offset_delete.topics for p in t.partitions])
    seen["delete"] = [int(r.error_code) for r in _call(address, _req(
        42, 2, groups_names=("wg", "wg", "never"))).results]
    described = _call(address, _req(15, 6, groups=("wg",), include_authorized_operations=False)
                      ).groups[0]
    seen["describe_deleted"] = (described.group_state, int(described.error_code))
    seen.update(_topic_id_versions(address))
    return seen


def _topic_id_versions(address) -> dict:
    """OffsetCommit and OffsetFetch v10 name topics by id (UNKNOWN_TOPIC_ID for others)."""
    metadata_topic = _nested(3, 12, "topics")
    metadata = _call(address, _req(3, 12, topics=(metadata_topic(topic_id=None, name=TOPIC),),
                                   allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False))
    topic_id = metadata.topics[0].topic_id
    commit_topic = _nested(8, 10, "topics")
    commit_partition = _nested(8, 10, "topics", "partitions")

    def commit(tid, partition=0):
        response = _call(address, _req(
            8, 10, group_id="wg10", generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=(commit_topic(topic_id=tid, partitions=(
                commit_partition(partition_index=partition, committed_offset=3,
                                 committed_leader_epoch=-1, committed_metadata="m"),)),)))
        return [(t.topic_id == tid, [(p.partition_index, int(p.error_code))
                                     for p in t.partitions]) for t in response.topics]

    group_class = _nested(9, 10, "groups")
    fetch_topic = _nested(9, 10, "groups", "topics")

    def fetch(topics):
        response = _call(address, _req(9, 10, groups=(group_class(
            group_id="wg10", member_id=None, member_epoch=-1, topics=topics),),
            require_stable=False))
        return [(int(g.error_code), [(t.topic_id == topic_id, [
            (p.partition_index, p.committed_offset, p.metadata, int(p.error_code))
            for p in t.partitions]) for t in g.topics]) for g in response.groups]

    return {"v10_commit": (commit(topic_id), commit(topic_id, 9), commit(uuid.uuid4())),
            "v10_fetch": (fetch(None), fetch((fetch_topic(topic_id=topic_id,
                                                          partition_indexes=(0, 1)),)),
                          fetch((fetch_topic(topic_id=uuid.uuid4(), partition_indexes=(0,)),)))}


EXPECTED = {
    "find": [0, 0],
    "find_bad_type": 42,
    "join1": 79,  # MEMBER_ID_REQUIRED
    "member_id_prefix": True,
    "join2": (0, 1, True, "range", 1),
    "join_bad_session": 26,  # INVALID_SESSION_TIMEOUT
    "commit_completing": 27,  # REBALANCE_IN_PROGRESS
    "sync": (0, b"A1", "range"),
    "sync_no_protocol": 23,
    "heartbeat": (0, 22, 25),
    "commit": (0, 25, 22, 12, 3, 69),
    "fetch_all": [(TOPIC, 0, 5, 0)],
    "fetch_v1": [(0, 5), (1, -1)],
    "describe": ("Stable", "consumer", "range", [(True, b"A1", "/127.0.0.1")]),
    "list_stable": ["wg"],
    "list_empty": [],
    "delete_busy": 68,  # NON_EMPTY_GROUP
    "offset_delete_subscribed": (0, [86]),  # GROUP_SUBSCRIBED_TO_TOPIC
    "leave": (0, [0, 25]),
    "describe_after_leave": ("Empty", 0),
    "offset_delete_empty": (0, [0]),
    "delete": [0, 69],  # a repeated id is answered once
    "describe_deleted": ("Dead", 69),
    "v10_commit": ([(True, [(0, 0)])], [(True, [(9, 3)])], [(True, [(0, 100)])]),
    "v10_fetch": ([(0, [(True, [(0, 3, "m", 0)])])],
                  [(0, [(True, [(0, 3, "m", 0), (1, -1, "", 0)])])],
                  [(0, [(False, [(0, -1, "", 100)])])]),
}


def test_group_conversation_on_seglog(broker):
    broker.store.create_topic(TOPIC, partitions=3)
    seen = conversation(("127.0.0.1", broker.port))
    assert seen == EXPECTED


@pytest.mark.kafka
@pytest.mark.slow
def test_group_conversation_on_kafka(kafka_shared_groups):
    """The same script against the real broker (the session's shared one with its group
    settings, tests/conftest.py): the expectations are Kafka's."""
    from confluent_kafka.admin import AdminClient, NewTopic
    kafka = kafka_shared_groups
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
        future.result(30)
    # Kafka's broker learns the topic a moment after its controller answered (seglog's
    # store.create_topic is done when it returns); the commits check it: wait, bounded.
    eventually(lambda: admin.list_topics(TOPIC, timeout=30).topics[TOPIC],
               lambda t: t.error is None and len(t.partitions) == 3)
    host, port = kafka.bootstrap.split(":")
    seen = conversation((host, int(port)))
    assert {k: v for k, v in seen.items() if v != EXPECTED[k]} == {}


def test_wire_join_refused_while_in_process_consumers_are_members(broker):
    """One group id, two coordinators: while seglog's embedded consumers are members, a wire
    JoinGroup is refused (INCONSISTENT_GROUP_PROTOCOL) so partitions are never handed out
    twice; committed offsets are shared."""
    broker.store.create_topic(TOPIC, partitions=1)
    address = ("127.0.0.1", broker.port)
    embedded = broker.store.consumer(group_id="mixed", topics=[TOPIC])
    protocol = _nested(11, 9, "protocols")
    join = _req(11, 9, group_id="mixed", session_timeout=datetime.timedelta(seconds=10),
                rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                group_instance_id=None, protocol_type="consumer",
                protocols=(protocol(name="range", metadata=_subscription(TOPIC)),), reason=None)
    try:
        assert int(_call(address, join).error_code) == 23
        # A commit from outside is refused too while the embedded group has members.
        assert _commit(address, "mixed", -1, "") == 25
    finally:
        embedded.close()
    assert int(_call(address, join).error_code) == 79  # free for wire clients now
    assert _commit(address, "mixed", -1, "", offset=4) == 0
    assert broker.store.group("mixed").committed((TOPIC, 0)) == 4


def test_offsets_expire_only_for_groups_without_members(broker):
    """Kafka's rule (KIP-211): a group with members keeps its offsets however old; an empty
    classic group's expire ``offsets.retention.minutes`` after it became empty; a group
    known only by its commits, that long after each commit."""
    broker.store.create_topic(TOPIC, partitions=1)
    address = ("127.0.0.1", broker.port)
    protocol = _nested(11, 9, "protocols")

    def join(member):
        return _call(address, _req(11, 9, group_id="live", session_timeout=datetime.timedelta(
            seconds=30), rebalance_timeout=datetime.timedelta(seconds=30), member_id=member,
            group_instance_id=None, protocol_type="consumer",
            protocols=(protocol(name="range", metadata=_subscription(TOPIC)),), reason=None))

    joined = join(join("").member_id)
    assignment = _nested(14, 5, "assignments")
    _call(address, _req(14, 5, group_id="live", generation_id=joined.generation_id,
                        member_id=joined.member_id, group_instance_id=None,
                        protocol_type="consumer", protocol_name="range",
                        assignments=(assignment(member_id=joined.member_id, assignment=b""),)))
    assert _commit(address, "live", joined.generation_id, joined.member_id) == 0
    assert _commit(address, "simple", -1, "") == 0
    retention_ms = broker.state.extensions["groups"].offsets_retention_ms

    def expire(after_ms):
        async def run():
            groups.expire_offsets(broker.state, broker.state.now_ms() + after_ms)
        asyncio.run_coroutine_threadsafe(run(), broker.state.loop).result(10)

    expire(retention_ms - 60_000)
    assert broker.store.group("simple").committed((TOPIC, 0)) == 5  # not old enough yet
    expire(retention_ms + 60_000)
    assert broker.store.group("simple").committed((TOPIC, 0)) is None
    assert broker.store.group("live").committed((TOPIC, 0)) == 5  # members: kept
    identity = _nested(13, 5, "members")
    _call(address, _req(13, 5, group_id="live", members=(
        identity(member_id=joined.member_id, group_instance_id=None, reason=None),)))
    expire(retention_ms - 60_000)
    assert broker.store.group("live").committed((TOPIC, 0)) == 5
    expire(retention_ms + 60_000)
    assert broker.store.group("live").committed((TOPIC, 0)) is None


def test_require_stable_waits_for_a_transactional_commit(broker):
    """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition whose
    transactional commit (a producer's send_offsets_to_transaction) awaits its marker, and
    the offset once the transaction commits."""
    broker.store.create_topic(TOPIC, partitions=1)
    address = ("127.0.0.1", broker.port)
    assert _commit(address, "txg", -1, "", offset=1) == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-1"})
    producer.init_transactions(20)
    producer.begin_transaction()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txg"})
    try:
        producer.send_offsets_to_transaction([CTopicPartition(TOPIC, 0, 9)],
                                             consumer.consumer_group_metadata(), 20)
        group_class = _nested(9, 8, "groups")
        topic_class = _nested(9, 8, "groups", "topics")

        def fetch(stable):
            response = _call(address, _req(9, 8, groups=(group_class(
                group_id="txg", topics=(topic_class(name=TOPIC, partition_indexes=(0,)),)),),
                require_stable=stable))
            partition = response.groups[0].topics[0].partitions[0]
            return partition.committed_offset, int(partition.error_code)

        assert fetch(True) == (-1, 88)  # UNSTABLE_OFFSET_COMMIT
        assert fetch(False) == (1, 0)
        producer.commit_transaction(20)
        assert fetch(True) == (9, 0)
    finally:
        consumer.close()
