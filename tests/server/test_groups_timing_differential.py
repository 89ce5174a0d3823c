"""Differential: classic consumer groups as Kafka times them. The same real clients start
together against the real Kafka 4.4 broker and against seglog, both at Kafka's default
``group.initial.rebalance.delay.ms`` (3000), and end the same way:

- three consumers started together (50 ms apart) share one generation (the first), and none
  has partitions revoked: the first rebalance of an empty group waits the initial delay,
  extended while new members keep arriving (Kafka's ``InitialDelayedJoin``), so the later
  joins land in it; DescribeGroups reports the group ``PreparingRebalance`` with its three
  members meanwhile;
- a stable group of two, then a third member: the two rejoin and all three end in one new
  generation, each old member revoked once (eager protocol);
- raw requests (one connection per call, parked calls in threads) through the join phase with
  ``group.max.size=3``: MEMBER_ID_REQUIRED, a fourth member refused (GROUP_MAX_SIZE_REACHED)
  while three wait in the initial rebalance, then in the stable group the leader rejoins, one
  follower rejoins when its heartbeat says REBALANCE_IN_PROGRESS and the other never does:
  the rebalance completes after the rebalance timeout without it (UNKNOWN_MEMBER_ID after).

Generations are read from kafka-python (``KafkaConsumer.group_metadata()``); confluent-kafka
(librdkafka) does not show them, so for it the rebalance callbacks are compared (how many
assignments and revocations each member saw). Every wait is bounded in time.
"""

from __future__ import annotations

import datetime
import io
import os
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer as CConsumer
from confluent_kafka.admin import AdminClient, NewTopic as CNewTopic
from kafka import ConsumerRebalanceListener, KafkaConsumer

from kio.serial import entity_reader, entity_writer

from seglog.bench.kafka import KafkaBroker, find_kafka
from seglog.schemas import load_request_schema, load_response_schema

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


# --- kafka-python members, one thread each ------------------------------------------------


class _Listener(ConsumerRebalanceListener):
    def __init__(self):
        self.revocations = 0  # revocations of at least one partition
        self.assignments = 0
        self.owned: set[int] = set()

    def on_partitions_revoked(self, revoked):
        if revoked:
            self.revocations += 1
        self.owned -= {p.partition for p in revoked}

    def on_partitions_assigned(self, assigned):
        self.assignments += 1
        self.owned |= {p.partition for p in assigned}


class _PyMember:
    """A kafka-python consumer polling in its own thread until :meth:`stop`."""

    def __init__(self, bootstrap: str, group: str, name: str):
        self.listener = _Listener()
        self.generation = -1
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, client_id=name,
            heartbeat_interval_ms=HEARTBEAT_MS, session_timeout_ms=SESSION_MS,
            enable_auto_commit=False)
        self._consumer.subscribe([TOPIC], listener=self.listener)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            while not self._stop.is_set():
                self._consumer.poll(100)
                self.generation = self._consumer.group_metadata().generation_id
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def outcome(self) -> tuple[int, int]:
        return self.generation, self.listener.revocations

    def stop(self):
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def _settled(members, expected_generation=None) -> bool:
    generations = {m.generation for m in members}
    owned = [m.listener.owned for m in members]
    return (len(generations) == 1 and min(generations) > 0
            and (expected_generation is None or generations == {expected_generation})
            and sorted(p for o in owned for p in o) == list(range(PARTITIONS)))


def _wait(predicate, members, what: str) -> None:
    deadline = time.monotonic() + SCENARIO_S
    while not predicate():
        for m in members:
            assert m.error is None, m.error
        assert time.monotonic() < deadline, f"{what}: not within {SCENARIO_S} s"
        time.sleep(0.05)


def _quiet(members) -> list[tuple[int, int]]:
    """Poll on for QUIET_S; what each member ended in must not change meanwhile."""
    before = [m.outcome() for m in members]
    time.sleep(QUIET_S)
    after = [m.outcome() for m in members]
    assert after == before, f"a rebalance after the members agreed: {before} -> {after}"
    return after


def _describe_state(bootstrap: str, group: str) -> tuple[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    return description.state.name, len(description.members)


def start_together_kafka_python(bootstrap: str) -> dict:
    group = "together-py"
    members = []
    try:
        for i in range(3):
            members.append(_PyMember(bootstrap, group, f"m{i}"))
            time.sleep(0.05)
        time.sleep(1.0)  # well inside the initial delay (two delays in all: 6 s)
        during = _describe_state(bootstrap, group)
        _wait(lambda: _settled(members), members, "three members agree")
        return {"during_delay": during, "members": _quiet(members)}
    finally:
        for m in members:
            m.stop()


def third_joins_stable_group(bootstrap: str) -> dict:
    group = "third-py"
    members = []
    try:
        for i in range(2):
            members.append(_PyMember(bootstrap, group, f"m{i}"))
        _wait(lambda: _settled(members), members, "two members agree")
        two = _quiet(members)
        generation = members[0].generation
        members.append(_PyMember(bootstrap, group, "m2"))
        _wait(lambda: _settled(members, generation + 1), members,
              "three members agree on the next generation")
        return {"two": two, "three": _quiet(members),
                "after": _describe_state(bootstrap, group)}
    finally:
        for m in members:
            m.stop()


# --- confluent-kafka (librdkafka) members, polled in turn by one thread ---------------------


def start_together_confluent(bootstrap: str) -> list[tuple[int, int]]:
    """Three librdkafka consumers started 50 ms apart; per member ``(assignments,
    revocations)`` once all partitions are owned and nothing changed for QUIET_S."""
    group = "together-rdkafka"
    consumers, counts, owned = [], [], []
    try:
        for i in range(3):
            count = [0, 0]
            mine: set[int] = set()

            def on_assign(_c, partitions, count=count, mine=mine):
                count[0] += 1
                mine.update(p.partition for p in partitions)

            def on_revoke(_c, partitions, count=count, mine=mine):
                if partitions:
                    count[1] += 1
                mine.difference_update(p.partition for p in partitions)

            consumer = CConsumer({
                "bootstrap.servers": bootstrap, "group.id": group, "client.id": f"c{i}",
                "enable.auto.commit": False, "heartbeat.interval.ms": HEARTBEAT_MS,
                "session.timeout.ms": SESSION_MS})
            consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
            consumers.append(consumer)
            counts.append(count)
            owned.append(mine)
            start = time.monotonic()
            while time.monotonic() - start < 0.05:
                for c in consumers:
                    c.poll(0.01)
        deadline = time.monotonic() + SCENARIO_S
        quiet_since, last = None, None
        while True:
            assert time.monotonic() < deadline, f"members did not agree: {counts} {owned}"
            for c in consumers:
                c.poll(0.02)
            now = [tuple(c) for c in counts]
            agreed = (sorted(p for o in owned for p in o) == list(range(PARTITIONS))
                      and all(owned))
            if not agreed or now != last:
                quiet_since, last = (time.monotonic() if agreed else None), now
            elif time.monotonic() - quiet_since >= QUIET_S:
                return now
    finally:
        for c in consumers:
            c.close()


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


def _join(bootstrap: str, group: str, member_id: str):
    protocol = sys.modules[load_request_schema(11, 5).__module__].JoinGroupRequestProtocol
    metadata = struct.pack(">hih", 0, 1, len(TOPIC)) + TOPIC.encode() + struct.pack(">i", -1)
    return _call(bootstrap, 11, 5, group_id=group,
                 session_timeout=datetime.timedelta(milliseconds=30_000),
                 rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_TIMEOUT_MS),
                 member_id=member_id, group_instance_id=None, protocol_type="consumer",
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
        time.sleep(1.0)  # inside the initial delay: all three wait in the join
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
    kafka = start_together_kafka_python(real_kafka.bootstrap)
    seglog = start_together_kafka_python(seglog_broker.bootstrap)
    assert kafka == {"during_delay": ("PREPARING_REBALANCING", 3), "members": [(1, 0)] * 3}
    assert seglog == kafka


def test_three_librdkafka_consumers_started_together_rebalance_once(real_kafka,
                                                                    seglog_broker):
    kafka = start_together_confluent(real_kafka.bootstrap)
    seglog = start_together_confluent(seglog_broker.bootstrap)
    assert kafka == [(1, 0)] * 3
    assert seglog == kafka


def test_a_third_member_joins_a_stable_group_of_two(real_kafka, seglog_broker):
    kafka = third_joins_stable_group(real_kafka.bootstrap)
    seglog = third_joins_stable_group(seglog_broker.bootstrap)
    assert kafka == {"two": [(1, 0), (1, 0)], "three": [(2, 1), (2, 1), (2, 0)],
                     "after": ("STABLE", 3)}
    assert seglog == kafka


def test_the_join_phase_with_raw_requests(real_kafka, seglog_broker):
    kafka = join_phase_raw(real_kafka.bootstrap)
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
    seglog = first_joins_raw(seglog_broker.bootstrap)
    assert kafka == {"codes": (23, 79), "listed": {"refused": "Empty", "abandoned": "Empty"},
                     "described": [("Empty", 0), ("Empty", 0)]}
    assert seglog == kafka
