"""Differential: classic consumer groups as Kafka times them. The same clients start together
against the real Kafka 4.4 broker and against seglog, both at Kafka's default
``group.initial.rebalance.delay.ms`` (3000) and ``group.max.size=3``, and end the same way:

- three librdkafka consumers started together (50 ms apart) share one generation (the first),
  and none has partitions revoked: the first rebalance of an empty group waits the initial
  delay, extended while new members keep arriving (Kafka's ``InitialDelayedJoin``), so the
  later joins land in it; DescribeGroups reports it preparing a rebalance with its three
  members meanwhile;
- a stable group of two, then a third member: the two rejoin and all three end in one new
  generation, each old member revoked once (eager protocol);
- a static member (``group.instance.id``) restarts within its session: no rebalance;
- raw requests (one connection per call, parked calls in threads) through the join phase:
  MEMBER_ID_REQUIRED, a fourth member refused (GROUP_MAX_SIZE_REACHED) while three wait in the
  initial rebalance, then in the stable group the leader rejoins, one follower rejoins when
  its heartbeat says REBALANCE_IN_PROGRESS and the other never does: the rebalance completes
  after the rebalance timeout without it (UNKNOWN_MEMBER_ID after); a full group refuses
  even a static member's replacement; refused or abandoned first joins leave Empty groups.

librdkafka's generation is read from its group metadata blob (see :func:`_generation`).
kafka-python 3.0 is not used here: its consumer sometimes rejoins right after a successful
SyncGroup (a client-side race, seen against both brokers), which makes its generation count
unfit for an exact comparison. Every wait is bounded in time.
"""

from __future__ import annotations

import datetime
import io
import os
import socket
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer as CConsumer
from confluent_kafka.admin import AdminClient, NewTopic as CNewTopic

from kio.serial import entity_reader, entity_writer

from seglog.bench.kafka import KafkaBroker, find_kafka
from seglog.schemas import load_request_schema, load_response_schema

from kafka_waits import eventually

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.clients]

_REF, _WHY = find_kafka()
#: Kafka's default, on both brokers (the bench's Kafka config and seglog's test config set 0).
INITIAL_DELAY_MS = 3000
PARTITIONS = 6
TOPIC = "t"
#: How long one scenario may take at most (the initial rebalance takes two delays, 6 s).
SCENARIO_S = 45.0
#: After the members agree, keep polling this long: a late rebalance would show up (members
#: heartbeat every 500 ms here; librdkafka's default 3 s is what hid it in issue 24).
QUIET_S = 2.0
HEARTBEAT_MS = 500
SESSION_MS = 10_000
#: On both brokers: the raw scenario's fourth member is refused.
MAX_SIZE = 3


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka"), extra_properties={
        "group.initial.rebalance.delay.ms": INITIAL_DELAY_MS, "group.max.size": MAX_SIZE})
    kafka.format()
    kafka.start()
    try:
        _create_topic(kafka.bootstrap)
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture
def seglog_broker(broker_factory):
    broker = broker_factory(group_initial_rebalance_delay_ms=INITIAL_DELAY_MS,
                            group_max_size=MAX_SIZE)
    _create_topic(broker.bootstrap)
    return broker


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([CNewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(30)


def _describe_state(bootstrap: str, group: str) -> tuple[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    return description.state.name, len(description.members)


# --- confluent-kafka (librdkafka) members, polled in turn by one thread ---------------------


def _generation(consumer: CConsumer) -> int:
    """The generation librdkafka's consumer is in, from its group metadata: an opaque blob
    to its API, ``CGMDv2:`` then the generation id (int32, host byte order) in librdkafka
    2.x; checked, so a change of format fails here rather than compares nonsense."""
    blob = consumer.consumer_group_metadata()
    assert isinstance(blob, bytes) and blob.startswith(b"CGMDv2:"), blob
    return int.from_bytes(blob[7:11], sys.byteorder, signed=True)


class _RdGroup:
    """librdkafka consumers of one group, polled in turn by the calling thread; per member
    ``[assignments, revocations, generation]`` (revocations of at least one partition; the
    generation of its last assignment) and the partitions it owns."""

    def __init__(self, bootstrap: str, group: str):
        self.bootstrap, self.group = bootstrap, group
        self.consumers: list[CConsumer | None] = []
        self.counts: list[list[int]] = []
        self.owned: list[set[int]] = []

    def add(self, name: str, instance_id: str | None = None) -> None:
        count: list[int] = [0, 0, -1]
        mine: set[int] = set()

        def on_assign(c, partitions):
            count[0] += 1
            count[2] = _generation(c)
            mine.update(p.partition for p in partitions)

        def on_revoke(_c, partitions):
            if partitions:
                count[1] += 1
            mine.difference_update(p.partition for p in partitions)

        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group,
                  "client.id": name, "enable.auto.commit": False,
                  "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": SESSION_MS}
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        consumer = CConsumer(config)
        consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
        self.consumers.append(consumer)
        self.counts.append(count)
        self.owned.append(mine)

    def poll(self, seconds: float) -> None:
        start = time.monotonic()
        while True:
            for consumer in self.consumers:
                if consumer is not None:
                    consumer.poll(0.01)
            if time.monotonic() - start >= seconds:
                return

    def settle(self, what: str) -> list[tuple[int, ...]]:
        """Poll until the live members own every partition, each at least one, and nothing
        changed for QUIET_S; then ``[(assignments, revocations, generation)]`` of every
        member."""
        deadline = time.monotonic() + SCENARIO_S
        quiet_since, last = None, None
        while True:
            assert time.monotonic() < deadline, f"{what}: {self.counts} {self.owned}"
            self.poll(0.02)
            now = [tuple(c) for c in self.counts]
            live = [o for c, o in zip(self.consumers, self.owned) if c is not None]
            agreed = (sorted(p for o in live for p in o) == list(range(PARTITIONS))
                      and all(live))
            if not agreed or now != last:
                quiet_since, last = (time.monotonic() if agreed else None), now
            elif time.monotonic() - quiet_since >= QUIET_S:
                return now

    def close(self, index: int) -> None:
        consumer, self.consumers[index] = self.consumers[index], None
        if consumer is not None:
            consumer.close()

    def close_all(self) -> None:
        for index in range(len(self.consumers)):
            self.close(index)


def start_together_confluent(bootstrap: str) -> dict:
    """Three librdkafka consumers started 50 ms apart; the group's state once all three
    joined (inside the initial delay: two delays in all, 6 s), and how each member ends."""
    group = "together-rdkafka"
    members = _RdGroup(bootstrap, group)
    try:
        for i in range(3):
            members.add(f"c{i}")
            members.poll(0.05)
        # The state once all three joined (or the group moved on): how soon they join
        # depends on how soon each finds the coordinator, not on the broker's join phase.
        # Until the first join reaches it the group is DEAD (a fresh Kafka broker makes its
        # __consumer_offsets first, seconds on a loaded machine) or EMPTY: not moved on yet.

        def during() -> tuple[str, int]:
            members.poll(0.1)
            return _describe_state(bootstrap, group)

        state = eventually(during, lambda d: d[1] == 3 or d[0] in ("COMPLETING_REBALANCING",
                                                                   "STABLE"),
                           timeout_s=SCENARIO_S)
        return {"during_delay": state, "members": members.settle("three members agree")}
    finally:
        members.close_all()


def third_joins_stable_group(bootstrap: str) -> dict:
    """A stable group of two librdkafka consumers, then a third."""
    members = _RdGroup(bootstrap, "third-rdkafka")
    try:
        members.add("c0")
        members.add("c1")
        two = members.settle("two members agree")
        members.add("c2")
        return {"two": two, "three": members.settle("three members agree"),
                "state": _describe_state(bootstrap, "third-rdkafka")}
    finally:
        members.close_all()


def static_member_restarts(bootstrap: str) -> dict:
    """Two static members (``group.instance.id``) start together; one is closed (a static
    member sends no LeaveGroup) and a new consumer with its instance id takes its place
    within the session timeout: no rebalance, the newcomer gets the old one's partitions,
    the other member is not revoked."""
    members = _RdGroup(bootstrap, "static-rdkafka")
    try:
        members.add("s0", instance_id="s0")
        members.poll(0.05)
        members.add("s1", instance_id="s1")
        before = members.settle("two static members agree")
        owned = sorted(members.owned[1])
        members.close(1)
        members.add("s1-again", instance_id="s1")
        after = members.settle("the restarted static member is back")
        return {"before": before, "after": after,
                "same_partitions": sorted(members.owned[2]) == owned,
                "state": _describe_state(bootstrap, "static-rdkafka")}
    finally:
        members.close_all()


# --- raw requests ---------------------------------------------------------------------------


def _call(bootstrap: str, api_key: int, version: int, **fields):
    """One request on its own connection (a parked JoinGroup blocks only its thread)."""
    request_class = load_request_schema(api_key, version)
    header_class = request_class.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_class)(buffer, header_class(
        request_api_key=api_key, request_api_version=version, correlation_id=1,
        client_id="timing"))
    entity_writer(request_class)(buffer, request_class(**fields))
    data = buffer.getvalue()
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=SCENARIO_S) as sock:
        sock.sendall(struct.pack(">i", len(data)) + data)
        size, = struct.unpack(">i", _read(sock, 4))
        body = _read(sock, size)
    response_class = load_response_schema(api_key, version)
    _, offset = entity_reader(response_class.__header_schema__)(body, 0)
    return entity_reader(response_class)(body, offset)[0]


def _read(sock, count: int) -> bytes:
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        assert chunk, "the broker closed the connection"
        out += chunk
    return out


REBALANCE_TIMEOUT_MS = 4000


def _join(bootstrap: str, group: str, member_id: str, instance_id: str | None = None):
    protocol = sys.modules[load_request_schema(11, 5).__module__].JoinGroupRequestProtocol
    metadata = struct.pack(">hih", 0, 1, len(TOPIC)) + TOPIC.encode() + struct.pack(">i", -1)
    return _call(bootstrap, 11, 5, group_id=group,
                 session_timeout=datetime.timedelta(milliseconds=30_000),
                 rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_TIMEOUT_MS),
                 member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
                 protocols=(protocol(name="range", metadata=metadata),))


def _heartbeat(bootstrap: str, group: str, member_id: str, generation: int) -> int:
    return int(_call(bootstrap, 12, 3, group_id=group, generation_id=generation,
                     member_id=member_id, group_instance_id=None).error_code)


def _raw_describe(bootstrap: str, group: str) -> tuple[str, int]:
    described, = _call(bootstrap, 15, 5, groups=(group,),
                       include_authorized_operations=False).groups
    return described.group_state, len(described.members)


def _wait_for_coordinator(bootstrap: str, group: str) -> None:
    """Until the group's coordinator answers a join (Kafka creates ``__consumer_offsets`` on
    the first FindCoordinator, and answers COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS meanwhile; clients retry, so does this, bounded)."""
    deadline = time.monotonic() + SCENARIO_S
    while True:
        found = _call(bootstrap, 10, 3, key=group, key_type=0)
        if int(found.error_code) == 0 and int(_join(bootstrap, "warm-up", "").error_code) == 79:
            return
        assert time.monotonic() < deadline, "the group coordinator never became available"
        time.sleep(0.2)


def join_phase_raw(bootstrap: str) -> dict:
    """The join phase step by step (see the module docstring); what each step answered."""
    group, seen = "raw", {}
    pool = ThreadPoolExecutor(4)
    try:
        _wait_for_coordinator(bootstrap, group)
        first = [_join(bootstrap, group, "") for _ in range(3)]
        seen["member_id_required"] = [int(r.error_code) for r in first]
        ids = [r.member_id for r in first]
        parked = [pool.submit(_join, bootstrap, group, member_id) for member_id in ids]
        # Inside the initial delay: wait (bounded, not a fixed pause a loaded machine could
        # outrun) until all three parked joins reached the broker and wait in the join.
        eventually(lambda: _raw_describe(bootstrap, group), lambda d: d[1] == 3)
        seen["fourth"] = int(_join(bootstrap, group, "").error_code)
        seen["during_delay"] = _raw_describe(bootstrap, group)
        joined = [f.result(SCENARIO_S) for f in parked]
        generation = joined[0].generation_id
        leader = joined[0].leader
        seen["joined"] = sorted((int(r.error_code), r.generation_id, r.leader == leader,
                                 len(r.members)) for r in joined)
        # Everyone syncs (the leader with an empty assignment each): Stable.
        assignment = sys.modules[load_request_schema(14, 3).__module__].SyncGroupRequestAssignment
        syncs = [pool.submit(_call, bootstrap, 14, 3, group_id=group, generation_id=generation,
                             member_id=member_id, group_instance_id=None,
                             assignments=tuple(assignment(member_id=m, assignment=b"")
                                               for m in ids) if member_id == leader else ())
                 for member_id in ids]
        seen["synced"] = [int(f.result(SCENARIO_S).error_code) for f in syncs]
        seen["stable"] = _raw_describe(bootstrap, group)
        # The leader rejoins: a rebalance; one follower rejoins on its heartbeat's
        # REBALANCE_IN_PROGRESS, the other never does and is dropped after the timeout.
        follower, silent = [m for m in ids if m != leader]
        rejoin = pool.submit(_join, bootstrap, group, leader)
        deadline = time.monotonic() + SCENARIO_S
        while (code := _heartbeat(bootstrap, group, follower, generation)) == 0:
            assert time.monotonic() < deadline, "the leader's rejoin never started a rebalance"
            time.sleep(0.05)
        seen["follower_heartbeat"] = code
        seen["preparing"] = _raw_describe(bootstrap, group)
        follower_rejoin = pool.submit(_join, bootstrap, group, follower)
        rejoined = [rejoin.result(SCENARIO_S), follower_rejoin.result(SCENARIO_S)]
        seen["rejoined"] = sorted((int(r.error_code), r.generation_id - generation,
                                   r.leader == leader, len(r.members)) for r in rejoined)
        seen["silent_heartbeat"] = _heartbeat(bootstrap, group, silent, generation)
        seen["after"] = _raw_describe(bootstrap, group)
        return seen
    finally:
        pool.shutdown(wait=True)


# --- the comparisons ----------------------------------------------------------------------


def test_three_consumers_started_together_share_one_generation(real_kafka, seglog_broker):
    kafka = start_together_confluent(real_kafka.bootstrap)
    print('kafka:', kafka)  # shown when the seglog half fails
    seglog = start_together_confluent(seglog_broker.bootstrap)
    # (assignments, revocations, generation) per member: one of each, none, the first.
    assert kafka == {"during_delay": ("PREPARING_REBALANCING", 3), "members": [(1, 0, 1)] * 3}
    assert seglog == kafka


def test_a_third_member_joins_a_stable_group_of_two(real_kafka, seglog_broker):
    kafka = third_joins_stable_group(real_kafka.bootstrap)
    print('kafka:', kafka)  # shown when the seglog half fails
    seglog = third_joins_stable_group(seglog_broker.bootstrap)
    assert kafka == {"two": [(1, 0, 1), (1, 0, 1)],
                     "three": [(2, 1, 2), (2, 1, 2), (1, 0, 2)], "state": ("STABLE", 3)}
    assert seglog == kafka


def test_the_join_phase_with_raw_requests(real_kafka, seglog_broker):
    kafka = join_phase_raw(real_kafka.bootstrap)
    print('kafka:', kafka)  # shown when the seglog half fails
    seglog = join_phase_raw(seglog_broker.bootstrap)
    assert kafka == {
        "member_id_required": [79, 79, 79], "fourth": 81,  # GROUP_MAX_SIZE_REACHED
        "during_delay": ("PreparingRebalance", 3),
        "joined": [(0, 1, True, 0), (0, 1, True, 0), (0, 1, True, 3)],
        "synced": [0, 0, 0], "stable": ("Stable", 3),
        "follower_heartbeat": 27,  # REBALANCE_IN_PROGRESS
        "preparing": ("PreparingRebalance", 3),
        "rejoined": [(0, 1, True, 0), (0, 1, True, 2)],
        "silent_heartbeat": 25,  # UNKNOWN_MEMBER_ID: dropped by the join phase
        "after": ("CompletingRebalance", 2)}
    assert seglog == kafka


def first_joins_raw(bootstrap: str) -> dict:
    """A refused first join (no protocol type) and a first join whose member never comes
    back: both groups stay, Empty (Kafka 4.x stores a new group at once)."""
    _wait_for_coordinator(bootstrap, "refused")
    protocol = sys.modules[load_request_schema(11, 5).__module__].JoinGroupRequestProtocol
    refused = _call(bootstrap, 11, 5, group_id="refused",
                    session_timeout=datetime.timedelta(seconds=10),
                    rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                    group_instance_id=None, protocol_type="",
                    protocols=(protocol(name="range", metadata=b""),))
    pending = _join(bootstrap, "abandoned", "")
    listed = {g.group_id: g.group_state
              for g in _call(bootstrap, 16, 4, states_filter=()).groups}
    return {"codes": (int(refused.error_code), int(pending.error_code)),
            "listed": {g: listed.get(g) for g in ("refused", "abandoned")},
            "described": [_raw_describe(bootstrap, g) for g in ("refused", "abandoned")]}


def test_first_joins_leave_empty_groups(real_kafka, seglog_broker):
    kafka = first_joins_raw(real_kafka.bootstrap)
    print('kafka:', kafka)  # shown when the seglog half fails
    seglog = first_joins_raw(seglog_broker.bootstrap)
    assert kafka == {"codes": (23, 79), "listed": {"refused": "Empty", "abandoned": "Empty"},
                     "described": [("Empty", 0), ("Empty", 0)]}
    assert seglog == kafka


def test_a_static_member_restarts_without_a_rebalance(real_kafka, seglog_broker):
    kafka = static_member_restarts(real_kafka.bootstrap)
    print('kafka:', kafka)  # shown when the seglog half fails
    seglog = static_member_restarts(seglog_broker.bootstrap)
    # The closed member's one revocation is its own, at close.
    assert kafka == {"before": [(1, 0, 1)] * 2, "after": [(1, 0, 1), (1, 1, 1), (1, 0, 1)],
                     "same_partitions": True, "state": ("STABLE", 2)}
    assert seglog == kafka


def full_static_group_raw(bootstrap: str) -> dict:
    """A group of ``group.max.size`` static members; a new consumer with one of their
    instance ids joins (a restart): Kafka checks the size before it looks at the instance
    id, so even the replacement is refused."""
    group, seen = "static-full", {}
    _wait_for_coordinator(bootstrap, group)
    with ThreadPoolExecutor(MAX_SIZE) as pool:
        parked = [pool.submit(_join, bootstrap, group, "", f"i{i}") for i in range(MAX_SIZE)]
        joined = [f.result(SCENARIO_S) for f in parked]
        seen["joined"] = sorted((int(r.error_code), r.generation_id) for r in joined)
        leader = joined[0].leader
        assignment = sys.modules[load_request_schema(14, 3).__module__].SyncGroupRequestAssignment
        syncs = [pool.submit(_call, bootstrap, 14, 3, group_id=group, generation_id=1,
                             member_id=r.member_id, group_instance_id=f"i{i}",
                             assignments=tuple(assignment(member_id=j.member_id, assignment=b"")
                                               for j in joined)
                             if r.member_id == leader else ())
                 for i, r in enumerate(joined)]
        seen["synced"] = [int(f.result(SCENARIO_S).error_code) for f in syncs]
    seen["replacement"] = int(_join(bootstrap, group, "", "i1").error_code)
    seen["after"] = _raw_describe(bootstrap, group)
    return seen


def test_a_full_group_refuses_even_a_static_replacement(real_kafka, seglog_broker):
    kafka = full_static_group_raw(real_kafka.bootstrap)
    print('kafka:', kafka)  # shown when the seglog half fails
    seglog = full_static_group_raw(seglog_broker.bootstrap)
    assert kafka == {"joined": [(0, 1)] * MAX_SIZE, "synced": [0] * MAX_SIZE,
                     "replacement": 81, "after": ("Stable", MAX_SIZE)}
    assert seglog == kafka
