"""The classic group state machine, driven directly (no broker): joins, the initial delay,
syncs, heartbeats, session expiry, leaves, static members, limits and offset-commit checks."""

from __future__ import annotations

import itertools
import struct

import pytest

from seglog import error_codes as codes
from seglog.coordinator import classic_group as cg
from seglog.coordinator.classic_group_schema import (
    GroupMetadataValue, MemberMetadata, decode_group_metadata_value, encode_group_metadata_value)
from seglog.errors import (FencedInstanceIdError, IllegalGenerationError, SeglogError,
                           UnknownMemberIdError)

SESSION_MS = 1000
REBALANCE_MS = 5000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes for ``topics``."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Harness:
    """A coordinator, a clock and the results its callbacks delivered."""

    def __init__(self, write=None, **config):
        config.setdefault("initial_rebalance_delay_ms", 0)
        config.setdefault("min_session_timeout_ms", 10)
        self.written = []
        counter = itertools.count(1)
        self.coord = cg.ClassicGroupCoordinator(
            cg.ClassicGroupConfig(**config), write or (lambda g, v: self.written.append((g, v))),
            generate_id=lambda: f"u{next(counter)}")
        self.now = 1_000_000

    def advance(self, ms: int) -> None:
        self.now += ms
        self.coord.poll(self.now)

    def join(self, member_id="", *, client="c", instance=None, protocols=None, version=9,
             session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS, group="g") -> list:
        box = []
        self.coord.join_group(
            group_id=group, member_id=member_id, group_instance_id=instance, client_id=client,
            client_host="/127.0.0.1", protocol_type="consumer",
            protocols=protocols or [("range", subscription("t"))],
            session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
            api_version=version, now_ms=self.now, done=box.append)
        return box

    def join_new(self, client="c", **kwargs) -> list:
        """A dynamic member's two joins (MEMBER_ID_REQUIRED, then with the id)."""
        first = self.join(client=client, **kwargs)
        assert first[0].error_code == codes.MEMBER_ID_REQUIRED
        assert first[0].member_id.startswith(client + "-")
        return self.join(first[0].member_id, client=client, **kwargs)

    def sync(self, member_id, generation, assignments=(), *, instance=None, group="g",
             protocol_type=None, protocol_name=None) -> list:
        box = []
        self.coord.sync_group(group_id=group, member_id=member_id, group_instance_id=instance,
                              generation_id=generation, protocol_type=protocol_type,
                              protocol_name=protocol_name, assignments=list(assignments),
                              now_ms=self.now, done=box.append)
        return box

    def heartbeat(self, member_id, generation, *, instance=None, group="g") -> int:
        return self.coord.heartbeat(group_id=group, member_id=member_id,
                                    group_instance_id=instance, generation_id=generation,
                                    now_ms=self.now)

    def stable_pair(self):
        """Two members, synced: ``(leader id, follower id, generation)``."""
        a = self.join_new("a")
        b = self.join_new("b")
        self.advance(0)
        assert a and b and a[0].error_code == 0 and b[0].error_code == 0
        leader, follower = a[0].member_id, b[0].member_id
        generation = a[0].generation_id
        fs = self.sync(follower, generation)
        ls = self.sync(leader, generation, [(leader, b"LA"), (follower, b"FA")])
        assert ls[0].assignment == b"LA" and fs[0].assignment == b"FA"
        return leader, follower, generation


def test_member_id_required_then_join_completes_with_leader_and_members():
    h = Harness()
    a = h.join_new("a", protocols=[("range", b"ma")])
    assert a == []  # parked until the join phase completes
    h.advance(0)
    result = a[0]
    assert result.error_code == 0 and result.generation_id == 1
    assert result.leader == result.member_id
    assert result.protocol_name == "range" and result.protocol_type == "consumer"
    assert result.members == ((result.member_id, None, b"ma"),)
    assert h.coord.state("g") == cg.COMPLETING_REBALANCE


def test_old_versions_join_without_member_id_required():
    h = Harness()
    box = h.join(version=3)
    h.advance(0)
    assert box[0].error_code == 0 and box[0].member_id.startswith("c-")


def test_initial_delay_waits_and_is_extended_by_new_members():
    h = Harness(initial_rebalance_delay_ms=100)
    a = h.join_new("a")
    h.advance(50)
    b = h.join_new("b")  # a new member during the delay extends it once more
    h.advance(50)  # t=100: the first delay ends, extended
    assert a == [] and b == []
    h.advance(99)
    assert a == []
    h.advance(1)  # t=200
    assert a[0].error_code == 0 and b[0].error_code == 0
    assert a[0].generation_id == b[0].generation_id == 1
    leader = a[0].member_id
    assert len(a[0].members) == 2 and b[0].members == ()
    assert b[0].leader == leader


def test_initial_delay_capped_by_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=100)
    boxes = [h.join_new("m0", rebalance_ms=250)]
    for i in range(1, 10):  # a new member every 60 ms keeps asking for more time
        h.advance(60)
        boxes.append(h.join_new(f"m{i}", rebalance_ms=250))
        if boxes[0]:
            break
    assert boxes[0], "the initial rebalance never completed"
    assert h.now - 1_000_000 <= 400


def test_initial_delay_extensions_follow_kafkas_arithmetic():
    """Kafka's InitialDelayedJoin: the first wait is the delay; each extension (a new member
    arrived meanwhile) is min(delay, remaining) with remaining = rebalance timeout - delay,
    lowered by the previous wait each time; at 0 remaining the join completes whatever
    arrives. With delay 100 and rebalance timeout 250: waits of 100, 100 and 50, so the
    generation forms at exactly t=250 (real Kafka 4.4 at 3000/4000 forms it at 4 s)."""
    h = Harness(initial_rebalance_delay_ms=100)
    boxes = [h.join_new("m0", rebalance_ms=250)]
    arrivals = {50: "m1", 150: "m2", 220: "m3"}
    for t in range(1, 250):  # 1 ms steps: each timer fires at its deadline, as Kafka's
        h.advance(1)
        if t in arrivals:
            boxes.append(h.join_new(arrivals[t], rebalance_ms=250))
    assert len(boxes) == 4 and all(box == [] for box in boxes)
    h.advance(1)  # t=250
    assert [box[0].generation_id for box in boxes] == [1, 1, 1, 1]
    assert h.coord.state("g") == cg.COMPLETING_REBALANCE


def test_initial_delay_without_newcomers_is_one_delay():
    h = Harness(initial_rebalance_delay_ms=100)
    a = h.join_new("a")
    h.advance(99)
    assert a == [] and h.coord.state("g") == cg.PREPARING_REBALANCE
    h.advance(1)
    assert a[0].generation_id == 1


def test_protocol_selection_most_votes_among_common():
    h = Harness()
    a = h.join_new("a", protocols=[("range", b"1"), ("roundrobin", b"2")])
    b = h.join_new("b", protocols=[("roundrobin", b"3"), ("range", b"4")])
    c = h.join_new("c", protocols=[("roundrobin", b"5"), ("range", b"6"), ("sticky", b"7")])
    h.advance(0)
    assert a[0].protocol_name == b[0].protocol_name == c[0].protocol_name == "roundrobin"
    assert {m[2] for m in a[0].members} == {b"2", b"3", b"5"}  # the selected protocol's


def test_inconsistent_protocol_refused():
    h = Harness()
    h.join_new("a", protocols=[("range", b"")])
    h.advance(0)
    box = h.join(client="b", protocols=[("cooperative-sticky", b"")])
    assert box[0].error_code == codes.INCONSISTENT_GROUP_PROTOCOL


def test_sync_distributes_leader_assignment_and_stores_metadata():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    assert h.coord.state("g") == cg.STABLE
    group_id, value = h.written[-1]
    assert group_id == "g" and value.generation == generation and value.leader == leader
    assert {m.member_id: m.assignment for m in value.members} == {leader: b"LA",
                                                                  follower: b"FA"}
    # A member that lost its sync response gets the assignment again.
    assert h.sync(follower, generation)[0].assignment == b"FA"
    description = h.coord.describe("g")
    assert description.state == "Stable" and description.protocol == "range"
    assert {m.member_id: m.assignment for m in description.members}[leader] == b"LA"


def test_sync_errors():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    assert h.sync(leader, generation + 1)[0].error_code == codes.ILLEGAL_GENERATION
    assert h.sync("nobody", generation)[0].error_code == codes.UNKNOWN_MEMBER_ID
    assert h.sync(leader, generation, protocol_type="connect")[0].error_code == \
        codes.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(leader, generation, protocol_name="roundrobin")[0].error_code == \
        codes.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(leader, generation, group="other")[0].error_code == codes.UNKNOWN_MEMBER_ID


def test_heartbeat_answers_and_rebalance_in_progress():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    assert h.heartbeat(leader, generation) == 0
    assert h.heartbeat(leader, generation - 1) == codes.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", generation) == codes.UNKNOWN_MEMBER_ID
    assert h.heartbeat(leader, generation, group="none") == codes.UNKNOWN_MEMBER_ID
    c = h.join_new("c")  # a new member: the group rebalances
    assert h.coord.state("g") == cg.PREPARING_REBALANCE
    assert h.heartbeat(follower, generation) == codes.REBALANCE_IN_PROGRESS
    a = h.join(leader)
    b = h.join(follower)
    assert a[0].generation_id == b[0].generation_id == c[0].generation_id == generation + 1


def test_session_timeout_evicts_a_silent_member():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    h.advance(SESSION_MS // 2)
    assert h.heartbeat(leader, generation) == 0  # the follower says nothing
    assert h.coord.state("g") == cg.STABLE
    h.advance(SESSION_MS // 2)  # the follower's session ends
    assert h.coord.state("g") == cg.PREPARING_REBALANCE
    assert [m.member_id for m in h.coord.describe("g").members] == [leader]
    assert h.heartbeat(leader, generation) == codes.REBALANCE_IN_PROGRESS
    box = h.join(leader)
    assert box[0].generation_id == generation + 1 and len(box[0].members) == 1
    # The evicted member's calls are refused; it must join again.
    assert h.heartbeat(follower, generation) == codes.UNKNOWN_MEMBER_ID


def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    h.join(leader, rebalance_ms=300)  # leader rejoins: rebalance; the follower is stuck
    h.heartbeat(follower, generation)
    h.advance(299)
    assert h.coord.state("g") == cg.PREPARING_REBALANCE
    h.heartbeat(leader, generation)
    h.advance(REBALANCE_MS)  # the group's rebalance timeout is the largest of its members
    assert h.coord.state("g") == cg.COMPLETING_REBALANCE
    assert [m.member_id for m in h.coord.describe("g").members] == [leader]


def test_member_that_never_syncs_is_removed():
    h = Harness()
    a = h.join_new("a", rebalance_ms=300)
    b = h.join_new("b", rebalance_ms=300)
    h.advance(0)
    leader, follower = a[0].member_id, b[0].member_id
    h.sync(leader, 1, [(leader, b"x"), (follower, b"y")])
    h.advance(299)
    assert h.coord.state("g") == cg.STABLE  # the follower has not synced yet
    h.heartbeat(leader, 1)
    h.advance(1)
    assert follower not in [m.member_id for m in h.coord.describe("g").members]
    assert h.coord.state("g") == cg.PREPARING_REBALANCE


def test_leave_group_batch_answers_per_member():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    error, member_codes = h.coord.leave_group(group_id="g", members=[(follower, None), ("x", None),
                                                              ("", "no-such-instance")],
                                       now_ms=h.now)
    assert error == 0 and member_codes == [0, codes.UNKNOWN_MEMBER_ID, codes.UNKNOWN_MEMBER_ID]
    assert h.coord.state("g") == cg.PREPARING_REBALANCE
    box = h.join(leader)
    assert box[0].generation_id == generation + 1
    error, member_codes = h.coord.leave_group(group_id="g", members=[(leader, None)], now_ms=h.now)
    assert member_codes == [0]
    assert h.coord.state("g") == cg.EMPTY
    assert h.written[-1][1].members == ()  # the empty generation is stored
    assert h.coord.leave_group(group_id="none", members=[("m", None)], now_ms=h.now) == \
        (0, [codes.UNKNOWN_MEMBER_ID])


def test_static_member_rejoin_replaces_member_id_without_rebalance():
    h = Harness()
    a = h.join(client="a", instance="ia")
    b = h.join(client="b", instance="ib")
    h.advance(0)
    assert a[0].member_id.startswith("ia-")
    leader, old_b, generation = a[0].member_id, b[0].member_id, a[0].generation_id
    h.sync(old_b, generation)
    h.sync(leader, generation, [(leader, b"LA"), (old_b, b"FA")])
    # The process of "ib" restarts: it joins with no member id.
    again = h.join(client="b", instance="ib")
    new_b = again[0].member_id
    assert again[0].error_code == 0 and new_b != old_b
    assert again[0].generation_id == generation  # no rebalance
    assert h.coord.state("g") == cg.STABLE
    assert h.sync(new_b, generation, instance="ib")[0].assignment == b"FA"
    assert h.heartbeat(old_b, generation, instance="ib") == codes.FENCED_INSTANCE_ID
    assert h.heartbeat(new_b, generation, instance="ib") == 0
    assert h.written[-1][1].members[1].member_id == new_b
    # A static member that is gone past its session timeout is evicted as any other.
    h.advance(SESSION_MS // 2)
    assert h.heartbeat(leader, generation, instance="ia") == 0
    h.advance(SESSION_MS // 2)
    assert h.coord.state("g") == cg.PREPARING_REBALANCE


def test_static_leave_by_instance_id():
    h = Harness()
    a = h.join(client="a", instance="ia")
    h.advance(0)
    h.sync(a[0].member_id, 1, [(a[0].member_id, b"")])
    assert h.coord.leave_group(group_id="g", members=[("", "ia")], now_ms=h.now) == (0, [0])
    assert h.coord.state("g") == cg.EMPTY


def test_group_max_size_and_session_timeout_bounds():
    h = Harness(max_size=1, max_session_timeout_ms=5000)
    h.join_new("a")
    h.advance(0)
    assert h.join(client="b")[0].error_code == codes.GROUP_MAX_SIZE_REACHED
    assert h.join(client="c", session_ms=5)[0].error_code == codes.INVALID_SESSION_TIMEOUT
    assert h.join(client="c", session_ms=5001)[0].error_code == codes.INVALID_SESSION_TIMEOUT
    assert h.join(client="c", group="")[0].error_code == codes.INVALID_GROUP_ID
    assert h.join("m-1", group="fresh")[0].error_code == codes.UNKNOWN_MEMBER_ID


def test_pending_member_expires():
    h = Harness()
    first = h.join(client="a")
    assert first[0].error_code == codes.MEMBER_ID_REQUIRED
    h.advance(SESSION_MS)
    # The id was forgotten: joining with it is now an unknown member.
    assert h.join(first[0].member_id, client="a")[0].error_code == codes.UNKNOWN_MEMBER_ID


def test_offset_commit_checks():
    h = Harness()
    check = h.coord.validate_offset_commit
    assert check(group_id="simple", member_id="", group_instance_id=None, generation_id=-1,
                 now_ms=h.now) == 0
    assert check(group_id="none", member_id="m", group_instance_id=None, generation_id=1,
                 now_ms=h.now) == codes.GROUP_ID_NOT_FOUND
    assert check(group_id="none", member_id="m", group_instance_id=None, generation_id=1,
                 now_ms=h.now, api_version=8) == codes.ILLEGAL_GENERATION
    a = h.join_new("a")
    h.advance(0)
    member = a[0].member_id
    # CompletingRebalance: a member's commit must wait for its assignment.
    assert check(group_id="g", member_id=member, group_instance_id=None, generation_id=1,
                 now_ms=h.now) == codes.REBALANCE_IN_PROGRESS
    h.sync(member, 1, [(member, b"")])
    assert check(group_id="g", member_id=member, group_instance_id=None, generation_id=1,
                 now_ms=h.now) == 0
    assert check(group_id="g", member_id=member, group_instance_id=None, generation_id=0,
                 now_ms=h.now) == codes.ILLEGAL_GENERATION
    assert check(group_id="g", member_id="x", group_instance_id=None, generation_id=1,
                 now_ms=h.now) == codes.UNKNOWN_MEMBER_ID
    # From outside the group while it has members: refused.
    assert check(group_id="g", member_id="", group_instance_id=None, generation_id=-1,
                 now_ms=h.now) == codes.UNKNOWN_MEMBER_ID


def test_check_member_raises_typed_errors():
    h = Harness()
    a = h.join(client="a", instance="ia")
    h.advance(0)
    member = a[0].member_id
    h.coord.check_member("g", member, 1, "ia")  # transactional: CompletingRebalance is fine
    with pytest.raises(IllegalGenerationError) as info:
        h.coord.check_member("g", member, 7, "ia")
    assert info.value.kafka_error_code == 22
    with pytest.raises(UnknownMemberIdError):
        h.coord.check_member("g", "nobody", 1)
    with pytest.raises(FencedInstanceIdError):
        h.coord.check_member("g", "old-id", 1, "ia")
    with pytest.raises(IllegalGenerationError):
        h.coord.check_member("unknown-group", "m", 1)
    h.coord.check_member("unknown-group", "", -1)
    assert issubclass(IllegalGenerationError, SeglogError)


def test_delete_group_and_offset_delete_errors():
    h = Harness()
    h.stable_pair()
    assert h.coord.delete_group("g") == codes.NON_EMPTY_GROUP
    assert h.coord.delete_group("nope") == codes.GROUP_ID_NOT_FOUND
    assert h.coord.offset_delete_error("g") == 0  # consumer protocol: per partition
    assert h.coord.subscribed_topics("g") == {"t"}
    h.coord.ensure_group("simple", h.now)
    assert h.coord.state("simple") == cg.EMPTY
    assert h.coord.delete_group("simple") == 0
    assert not h.coord.has_group("simple") and h.written[-1] == ("simple", None)


def test_load_restores_members_that_then_expire():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    value = decode_group_metadata_value(encode_group_metadata_value(h.written[-1][1]))
    fresh = Harness()
    fresh.coord.load("g", value, fresh.now)
    assert fresh.coord.state("g") == cg.STABLE
    assert fresh.heartbeat(leader, generation) == 0
    assert fresh.sync(follower, generation)[0].assignment == b"FA"
    fresh.advance(SESSION_MS)  # nobody heartbeats any more: both expire
    fresh.advance(REBALANCE_MS)
    assert fresh.coord.state("g") == cg.EMPTY
    assert fresh.coord.describe("g").members == ()


def test_schema_round_trip_every_version():
    value = GroupMetadataValue("consumer", 3, "range", "m1", (
        MemberMetadata("m1", "c", "/127.0.0.1", 10000, b"sub", b"asg", 30000, "i1"),), 123)
    for version in (3, 4):
        copy = GroupMetadataValue(**{**value.__dict__, "version": version})
        assert decode_group_metadata_value(encode_group_metadata_value(copy)) == copy
    for version in (0, 1, 2):
        copy = GroupMetadataValue(**{**value.__dict__, "version": version})
        decoded = decode_group_metadata_value(encode_group_metadata_value(copy))
        assert decoded.members[0].assignment == b"asg" and decoded.leader == "m1"
    assert decode_group_metadata_value(None) is None


@pytest.mark.parametrize("data", [b"", b"\x00\x09", b"\x00\x03\x00\x08consumer",
                                  b"\x00\x03\x00\x01c\x00\x00\x00\x01\xff\xff\xff\xff"
                                  b"\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff\xff\xff"])
def test_schema_rejects_bad_bytes(data):
    with pytest.raises(SeglogError):
        decode_group_metadata_value(data)


def test_next_deadline_and_poll_are_bounded():
    h = Harness(initial_rebalance_delay_ms=100)
    assert h.coord.next_deadline_ms() is None
    h.join_new("a")
    deadline = h.coord.next_deadline_ms()
    assert deadline is not None and deadline <= h.now + 100
    assert h.coord.poll(h.now) == 0
    assert h.coord.poll(deadline) >= 1


def test_replaced_static_leader_is_told_the_old_leader_before_v9():
    """Kafka names the leader as it was before the replacement in a pre-v9 answer, so the
    restarted leader syncs as a follower instead of assigning with an empty member list."""
    for version, expect_skip in ((5, False), (9, True)):
        h = Harness()
        a = h.join(client="a", instance="ia", version=version)
        h.advance(0)
        old = a[0].member_id
        h.sync(old, 1, [(old, b"LA")])
        again = h.join(client="a", instance="ia", version=version)[0]
        assert again.error_code == 0 and again.member_id != old
        if version < 9:
            assert again.leader == old and again.members == ()
        else:
            assert again.leader == again.member_id and again.skip_assignment is expect_skip
            assert len(again.members) == 1
        assert h.sync(again.member_id, 1, instance="ia")[0].assignment == b"LA"
        assert h.coord.state("g") == cg.STABLE


@pytest.mark.parametrize("metadata", [b"", b"\x00\x00\x00\x00\x00\x02\x00\x01t",
                                      b"\x00\x00\xff\xff\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00"])
def test_unparsable_subscription_is_unknown(metadata):
    h = Harness()
    h.join_new("a", protocols=[("range", metadata)])
    h.advance(0)
    assert h.coord.subscribed_topics("g") is None


@pytest.mark.parametrize("seed", range(8))
def test_random_operations_keep_the_model_consistent(seed):
    """Random joins, syncs, heartbeats, leaves and clock steps (bounded): every response
    comes at most once per request, and the group's invariants hold after each step."""
    import random

    rng = random.Random(seed)
    h = Harness(initial_rebalance_delay_ms=rng.choice([0, 50]), max_size=rng.choice([3, 100]))
    known: dict[str, tuple] = {}  # member id -> (instance id, last generation seen)
    boxes: list[list] = []
    for _ in range(300):
        action = rng.random()
        instance = rng.choice([None, None, "i1", "i2"])
        if action < 0.25:
            member = rng.choice([""] + list(known))
            box = h.join(member, client=rng.choice(["a", "b"]), instance=instance,
                         version=rng.choice([3, 5, 9]), rebalance_ms=rng.choice([200, 400]),
                         protocols=rng.choice([[("range", subscription("t"))],
                                               [("roundrobin", b""), ("range", b"")]]))
            boxes.append(box)
        elif action < 0.45 and known:
            member = rng.choice(list(known))
            generation = rng.choice([known[member][1], known[member][1] + 1])
            boxes.append(h.sync(member, generation, [(m, b"x") for m in known],
                                instance=known[member][0]))
        elif action < 0.65 and known:
            member = rng.choice(list(known))
            h.heartbeat(member, known[member][1], instance=known[member][0])
        elif action < 0.72 and known:
            member = rng.choice(list(known))
            h.coord.leave_group(group_id="g", members=[(member, known[member][0])],
                                now_ms=h.now)
        else:
            h.advance(rng.choice([0, 10, 100, 400, SESSION_MS]))
        for box in boxes:
            assert len(box) <= 1
            if box and isinstance(box[0], cg.JoinResult) and box[0].member_id:
                known[box[0].member_id] = (None if not box[0].member_id.startswith("i")
                                           else box[0].member_id.split("-")[0],
                                           box[0].generation_id)
        h.coord.check_consistency()


def test_heartbeats_do_not_grow_the_timer_heap_without_bound():
    h = Harness()
    leader, follower, generation = h.stable_pair()
    for _ in range(5000):
        assert h.heartbeat(leader, generation) == 0
    assert len(h.coord._heap) < 200  # noqa: SLF001 - the bound is the point of the test
    assert h.coord.next_deadline_ms() is not None


def test_failed_store_of_the_assignment_is_answered_and_rebalances():
    def failing(group_id, value):  # what the store raises when the disk is full
        raise OSError(28, "No space left on device")

    h = Harness(write=failing)
    a = h.join_new("a")
    h.advance(0)
    member = a[0].member_id
    box = h.sync(member, 1, [(member, b"x")])
    assert box[0].error_code == codes.UNKNOWN_SERVER_ERROR
    assert h.coord.state("g") == cg.PREPARING_REBALANCE
