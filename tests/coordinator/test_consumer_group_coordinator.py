"""The consumer group coordinator (KIP-848) without sockets: what the wire tests cannot
reach quickly — session and rebalance timeouts, a static member's absence, the group size
limit, a member lagging one epoch, topics appearing, and the server-side assignors."""

from __future__ import annotations

import pytest

from seglog import error_codes as codes
from seglog.coordinator import consumer_group as kg
from seglog.coordinator.consumer_assignors import range_assign, uniform_assign

TOPICS = {"t": 4}


def _coordinator(**config):
    topics = dict(TOPICS)
    return kg.ConsumerGroupCoordinator(kg.ConsumerGroupConfig(**config), lambda: topics), topics


def _join(coord, member_id, now=0, **fields):
    fields.setdefault("subscribed_topic_names", ("t",))
    return coord.heartbeat(kg.HeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=1000,
        owned={}, **fields), now)


def _beat(coord, member_id, epoch, owned, now=0, **fields):
    return coord.heartbeat(kg.HeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=epoch, owned=owned, **fields), now)


def _parts(answer):
    return sorted(p for ps in (answer.assignment or {}).values() for p in ps)


def test_a_partition_moves_only_after_its_owner_revoked_it():
    coord, _ = _coordinator()
    first = _join(coord, "a")
    assert (first.member_epoch, _parts(first)) == (2, [0, 1, 2, 3])
    second = _join(coord, "b")
    assert (second.member_epoch, _parts(second)) == (3, [])
    revoke = _beat(coord, "a", 2, {"t": frozenset({0, 1, 2, 3})})
    assert revoke.member_epoch == 2 and len(_parts(revoke)) == 2
    assert coord.group("g").members["a"].state == kg.UNREVOKED_PARTITIONS
    waiting = _beat(coord, "b", 3, {})
    assert waiting.assignment is None
    assert coord.group("g").members["b"].state == kg.UNRELEASED_PARTITIONS
    assert coord.state("g") == kg.RECONCILING
    kept = frozenset(_parts(revoke))
    assert _beat(coord, "a", 2, {"t": kept}).member_epoch == 3
    given = _beat(coord, "b", 3, {})
    assert sorted(_parts(given) + list(kept)) == [0, 1, 2, 3]
    assert coord.state("g") == kg.STABLE


def test_the_previous_epoch_is_accepted_only_with_a_subset_of_the_assignment():
    coord, _ = _coordinator()
    _join(coord, "a")
    _join(coord, "b")
    revoke = _beat(coord, "a", 2, {"t": frozenset({0, 1, 2, 3})})
    kept = frozenset(_parts(revoke))
    assert _beat(coord, "a", 2, {"t": kept}).member_epoch == 3
    # A lost response: the member heartbeats at its previous epoch.
    assert _beat(coord, "a", 2, {"t": kept}).error_code == codes.NONE
    assert _beat(coord, "a", 2, {"t": frozenset({0, 1, 2, 3})}).error_code == \
        codes.FENCED_MEMBER_EPOCH


def test_session_timeout_fences_and_frees_the_partitions():
    coord, _ = _coordinator(session_timeout_ms=1000)
    _join(coord, "a", now=0)
    _join(coord, "b", now=0)
    assert coord.next_deadline_ms() == 1000
    for now in (400, 800, 1200):
        _beat(coord, "a", coord.group("g").members["a"].member_epoch,
              coord.group("g").members["a"].assigned, now=now)
    assert coord.poll(1100) == [("g", "b")]
    answer = _beat(coord, "a", coord.group("g").members["a"].member_epoch,
                   coord.group("g").members["a"].assigned, now=1300)
    assert _parts(answer) == [0, 1, 2, 3]
    assert coord.poll(2299) == []
    assert coord.poll(2300) == [("g", "a")]
    assert coord.state("g") == kg.EMPTY


def test_rebalance_timeout_fences_a_member_that_keeps_revoked_partitions():
    coord, _ = _coordinator()
    _join(coord, "a", now=0)
    _join(coord, "b", now=0)
    _beat(coord, "a", 2, {"t": frozenset({0, 1, 2, 3})}, now=10)  # told to revoke two
    assert coord.group("g").members["a"].rebalance_deadline_ms == 1010
    _beat(coord, "a", 2, {"t": frozenset({0, 1, 2, 3})}, now=500)  # still holds them
    assert coord.poll(1009) == []
    assert coord.poll(1010) == [("g", "a")]
    assert _parts(_beat(coord, "b", 3, {}, now=1020)) == [0, 1, 2, 3]


def test_a_static_member_away_keeps_its_partitions_until_its_session_ends():
    coord, _ = _coordinator(session_timeout_ms=1000)
    first = _join(coord, "s1", instance_id="i1")
    away = _beat(coord, "s1", -2, None, now=100, instance_id="i1")
    assert (away.error_code, away.member_epoch) == (codes.NONE, -2)
    assert _join(coord, "x", now=200).assignment == {}  # nothing free for another member
    back = _join(coord, "s2", now=300, instance_id="i1")
    # s2 takes s1's place with the partitions s1 keeps in the new target (x gets the rest).
    assert len(_parts(back)) == 2 and set(_parts(back)) <= set(_parts(first))
    assert "s1" not in coord.group("g").members


def test_group_max_size():
    coord, _ = _coordinator(max_size=1)
    _join(coord, "a")
    assert _join(coord, "b").error_code == codes.GROUP_MAX_SIZE_REACHED
    assert _beat(coord, "a", 2, {"t": frozenset({0, 1, 2, 3})}).error_code == codes.NONE


def test_new_partitions_bump_the_group_epoch():
    coord, topics = _coordinator()
    assert _join(coord, "a").member_epoch == 2
    topics["t"] = 6
    answer = _beat(coord, "a", 2, {"t": frozenset({0, 1, 2, 3})})
    assert (answer.member_epoch, _parts(answer)) == (3, [0, 1, 2, 3, 4, 5])


def test_offset_commit_epochs():
    coord, _ = _coordinator()
    _join(coord, "a")
    assert coord.validate_offset_commit("g", "a", 2, 9, (("t", 0),)) == codes.NONE
    assert coord.validate_offset_commit("g", "a", 3, 9, (("t", 0),)) == \
        codes.STALE_MEMBER_EPOCH
    assert coord.validate_offset_commit("g", "a", 2, 8, (("t", 0),)) == \
        codes.UNSUPPORTED_VERSION
    assert coord.validate_offset_commit("g", "z", 2, 9, (("t", 0),)) == \
        codes.UNKNOWN_MEMBER_ID
    assert coord.validate_offset_commit("g", "", -1, 9, (("t", 0),)) == \
        codes.UNKNOWN_MEMBER_ID  # the group has members


@pytest.mark.parametrize("assign", [uniform_assign, range_assign])
def test_assignors_balance_and_cover(assign):
    members = {f"m{i}": frozenset({"a", "b"}) for i in range(3)}
    out = assign(members, {"a": 4, "b": 3}, {})
    counts = sorted(sum(len(ps) for ps in parts.values()) for parts in out.values())
    owned = [(t, p) for parts in out.values() for t, ps in parts.items() for p in ps]
    assert sorted(owned) == [("a", p) for p in range(4)] + [("b", p) for p in range(3)]
    assert counts[-1] - counts[0] <= (1 if assign is uniform_assign else 2)


def test_uniform_is_sticky():
    members = {"m0": frozenset({"t"}), "m1": frozenset({"t"})}
    before = uniform_assign(members, {"t": 6}, {})
    members["m2"] = frozenset({"t"})
    after = uniform_assign(members, {"t": 6}, before)
    for member in ("m0", "m1"):
        assert after[member]["t"] <= before[member]["t"]
    assert [len(after[m]["t"]) for m in sorted(after)] == [2, 2, 2]


def test_uniform_with_different_subscriptions():
    members = {"m0": frozenset({"a"}), "m1": frozenset({"a", "b"})}
    out = uniform_assign(members, {"a": 2, "b": 2}, {})
    assert out["m0"] == {"a": frozenset({0, 1})} or len(out["m0"].get("a", ())) >= 1
    owned = sorted((t, p) for parts in out.values() for t, ps in parts.items() for p in ps)
    assert owned == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert "b" not in out["m0"]
