"""The fetch session cache's rules, as Kafka's ``FetchSessionTest`` checks them, on
:mod:`seglog.server.fetch_sessions` with a test clock: epochs, the shards and their id ranges,
eviction (stale first, then by privilege and size, never a young session by size), closing,
the topic-id rule; and the follower's side (:mod:`seglog.cluster.fetch_session_client`):
what an incremental request names and forgets, and how errors send it back to full.
(The wire behaviour, against Kafka 4.4: test_fetch_sessions_differential.py.)"""

from __future__ import annotations

import random

from seglog import error_codes as codes
from seglog.cluster.fetch_session_client import FetchSessionClient
from seglog.cluster.inter_broker import FetchPartitionRequest
from seglog.server.fetch_sessions import (MIN_EVICTION_MS, FetchManager, FetchSessionCacheShard,
                                          PartitionData, PartitionOutcome, next_epoch)
from seglog.types import TopicPartition


class Clock:
    def __init__(self):
        self.now_ms = 1_000_000

    def __call__(self):
        return self.now_ms


def _data(offset=0):
    return PartitionData(offset, -1, 1000, -1, -1)


def _outcome(hw=10, records=0, error=codes.NONE):
    return PartitionOutcome(error, hw, 0, records, False)


def _open(manager, n, *, follower=False, version=12):
    fetch_data = {("t", i): _data() for i in range(n)}
    context = manager.new_context(version, 0, 0, follower=follower, fetch_data=fetch_data,
                                  to_forget=())
    code, session_id, keys = context.respond([(k, _outcome()) for k in fetch_data])
    assert (code, keys) == (codes.NONE, None)
    return session_id


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1, -1)] == [1, 2, 1, -1]


def test_sessions_go_round_robin_over_eight_shards_with_their_id_ranges():
    manager = FetchManager(16, clock_ms=Clock(), rng=random.Random(1))
    ids = [_open(manager, 1) for _ in range(8)]
    id_range = (2**31 - 1) // 8
    assert sorted(i // id_range for i in ids) == list(range(8))
    assert all(i > 0 for i in ids) and manager.size() == 8
    # Each shard holds slots // 8 = 2: the next eight fill them, the ninth round is refused
    # (every session is young, and as large as the new one, so none is evictable by size).
    assert all(_open(manager, 1) > 0 for _ in range(8))
    assert _open(manager, 1) == 0 and manager.size() == 16


def test_incremental_answers_only_what_changed_and_epochs_are_checked():
    manager = FetchManager(8, clock_ms=Clock())
    sid = _open(manager, 3)
    context = manager.new_context(12, sid, 1, follower=False, fetch_data={}, to_forget=())
    assert context.kind == "incremental"
    assert [k for k, _ in context.partitions()] == [("t", 0), ("t", 1), ("t", 2)]
    outcomes = [(("t", 0), _outcome()), (("t", 1), _outcome(records=5)),
                (("t", 2), _outcome(hw=11))]
    assert context.respond(outcomes) == (codes.NONE, sid, {("t", 1), ("t", 2)})
    # The partition that returned records moved to the end (Kafka's rotation).
    context = manager.new_context(12, sid, 2, follower=False, fetch_data={}, to_forget=())
    assert [k for k, _ in context.partitions()] == [("t", 0), ("t", 2), ("t", 1)]
    # An error is always sent, and resets the cached high watermark: sent again after.
    assert context.respond([(("t", 0), _outcome(error=codes.NOT_LEADER_OR_FOLLOWER))]) == \
        (codes.NONE, sid, {("t", 0)})
    context = manager.new_context(12, sid, 3, follower=False, fetch_data={}, to_forget=())
    assert context.respond([(("t", 0), _outcome())])[2] == {("t", 0)}
    for epoch in (3, 5):
        assert manager.new_context(12, sid, epoch, follower=False, fetch_data={},
                                   to_forget=()).error_code == codes.INVALID_FETCH_SESSION_EPOCH
    assert manager.new_context(13, sid, 4, follower=False, fetch_data={},
                               to_forget=()).error_code == codes.FETCH_SESSION_TOPIC_ID_ERROR
    assert manager.new_context(12, sid + 1, 4, follower=False, fetch_data={},
                               to_forget=()).error_code == codes.FETCH_SESSION_ID_NOT_FOUND


def test_a_duplicate_request_of_one_epoch_is_refused_at_answer_time():
    manager = FetchManager(8, clock_ms=Clock())
    sid = _open(manager, 1)
    first = manager.new_context(12, sid, 1, follower=False, fetch_data={}, to_forget=())
    # A second request of the next epoch comes before the first is answered.
    manager.new_context(12, sid, 2, follower=False, fetch_data={}, to_forget=())
    assert first.respond([(("t", 0), _outcome())]) == \
        (codes.INVALID_FETCH_SESSION_EPOCH, sid, set())
    assert first.throttled() == (codes.INVALID_FETCH_SESSION_EPOCH, sid)


def test_full_request_closes_the_named_session_and_epoch_minus_one_opens_none():
    manager = FetchManager(8, clock_ms=Clock())
    sid = _open(manager, 1)
    context = manager.new_context(12, sid, -1, follower=False, fetch_data={("t", 0): _data()},
                                  to_forget=())
    assert context.kind == "sessionless" and manager.session(sid) is None
    assert context.respond([(("t", 0), _outcome())]) == (codes.NONE, 0, None)
    # A full request that is throttled opens no session.
    context = manager.new_context(12, 0, 0, follower=False, fetch_data={("t", 0): _data()},
                                  to_forget=())
    assert context.throttled() == (codes.NONE, 0) and manager.size() == 0


def _shard(clock, max_entries=2):
    return FetchSessionCacheShard(max_entries, MIN_EVICTION_MS, rng=random.Random(2))


def _create(shard, clock, size, privileged=False):
    from seglog.server.fetch_sessions import CachedPartition
    partitions = {("t", i): CachedPartition(_data()) for i in range(size)}
    return shard.maybe_create(clock(), privileged, size, False, partitions)


def test_eviction_stale_first_then_larger_sessions_evict_older_smaller_ones():
    clock = Clock()
    shard = _shard(clock)
    a = _create(shard, clock, 3)
    clock.now_ms += 10
    b = _create(shard, clock, 5)
    # Full, and both young: a larger new session evicts nothing (not evictable yet).
    assert _create(shard, clock, 10) == 0
    # Once older than the eviction time without being touched: the least recently used
    # session is stale and goes first, whatever the sizes.
    clock.now_ms += MIN_EVICTION_MS + 1
    c = _create(shard, clock, 1)
    assert c and shard.get(a) is None and shard.get(b) is not None
    # Used now, b is not stale; it is older than the eviction time, so evictable by any
    # new session at least as large; c is young.
    shard.touch(shard.get(b), clock())
    shard.touch(shard.get(c), clock())
    assert _create(shard, clock, 4) == 0  # smaller than b (5), c is young: nothing to evict
    d = _create(shard, clock, 6)
    assert d and shard.get(b) is None and shard.evictions == 2


def test_privileged_sessions_evict_unprivileged_young_ones_but_not_the_reverse():
    clock = Clock()
    shard = _shard(clock, max_entries=1)
    consumer = _create(shard, clock, 100)
    follower = _create(shard, clock, 1, privileged=True)
    assert follower and shard.get(consumer) is None
    # A young privileged session is evictable by nobody, whatever its size.
    assert _create(shard, clock, 1000) == 0
    assert _create(shard, clock, 1000, privileged=True) == 0


def test_follower_client_sends_full_then_only_changes_and_recovers_from_errors():
    client = FetchSessionClient()
    tp0, tp1, tp2 = (TopicPartition("t", i) for i in range(3))

    def req(offset):
        return FetchPartitionRequest(offset, 0, 1000, 1, 1)

    plan = client.build({tp0: req(0), tp1: req(0)})
    assert (plan.session_id, plan.session_epoch, plan.full) == (0, 0, True)
    assert client.handle_response(plan, codes.NONE, 42, {tp0: None, tp1: None})
    plan = client.build({tp0: req(5), tp1: req(0), tp2: req(0)})
    assert (plan.session_id, plan.session_epoch, plan.full) == (42, 1, False)
    assert set(plan.partitions) == {tp0, tp2} and plan.forgotten == ()
    assert client.handle_response(plan, codes.NONE, 42, {tp0: None})
    plan = client.build({tp0: req(5), tp2: req(0)})
    assert plan.partitions == {} and plan.forgotten == (tp1,) and plan.session_epoch == 2
    # An answer naming a partition outside the session is refused: the next is full and
    # closes the session (epoch 0 with its id).
    assert not client.handle_response(plan, codes.NONE, 42, {tp1: None})
    plan = client.build({tp0: req(5)})
    assert (plan.session_id, plan.session_epoch, plan.full) == (42, 0, True)
    assert client.handle_response(plan, codes.NONE, 43, {tp0: None})
    plan = client.build({tp0: req(5)})
    assert not client.handle_response(plan, codes.INVALID_FETCH_SESSION_EPOCH, 0, {})
    plan = client.build({tp0: req(5)})
    assert (plan.session_id, plan.session_epoch, plan.full) == (43, 0, True)
    assert client.handle_response(plan, codes.NONE, 44, {tp0: None})
    # A request lost on the way: the next is full, closing the session.
    client.handle_error()
    assert client.build({tp0: req(5)})[:2] == (44, 0)
    # A full answer without a session id: full requests go on (asking for a session).
    plan = client.build({tp0: req(5)})
    assert client.handle_response(plan, codes.NONE, 0, {tp0: None})
    assert client.build({tp0: req(5)})[:2] == (0, 0)
    plan = client.build({tp0: req(5)})
    assert client.handle_response(plan, codes.NONE, 50, {tp0: None})
    plan = client.build({tp0: req(5)})
    assert not client.handle_response(plan, codes.FETCH_SESSION_ID_NOT_FOUND, 0, {})
    assert client.build({tp0: req(5)})[:3] == (0, 0, {tp0: req(5)})
