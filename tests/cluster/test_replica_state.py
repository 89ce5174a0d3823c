"""The leader's replication decisions (seglog.cluster.replica_state), against Kafka's own tests.

Each test ports one of Kafka 2.8.2's PartitionTest, IsrExpirationTest or DelayedProduce rules
(named in its docstring) to the pure API: the log is its end offset, the clock is ``now_ms``,
the AlterIsr/ZooKeeper manager is the caller's ``isr_update_started`` / ``_succeeded`` /
``_failed``. Same scenarios, same expected answers.
"""

from __future__ import annotations

import pytest

from seglog import error_codes as codes
from seglog.cluster.replica_state import (
    UNKNOWN_OFFSET,
    FollowerState,
    LeaderReplicaState,
)

BROKER = 101                 # PartitionTest's brokerId
REMOTE = BROKER + 1
LAG_MS = 30_000              # Kafka's Defaults.ReplicaLagTimeMaxMs (2.8)
T0 = 1_700_000_000_000       # MockTime starts at the wall clock; any fixed value will do


def leader(isr, replicas, *, leader_end_offset, now_ms=T0, leader_epoch=5, zk_version=1,
           state=None):
    """A LeaderReplicaState after makeLeader (controller epoch 0, as PartitionTest)."""
    state = state or LeaderReplicaState(BROKER)
    state.make_leader(leader_epoch=leader_epoch, isr=isr, replicas=replicas,
                      zk_version=zk_version, controller_epoch=0,
                      leader_end_offset=leader_end_offset, now_ms=now_ms)
    return state


def fetch(state, replica_id, fetch_offset, *, leader_end_offset, now_ms):
    return state.update_follower_fetch_state(replica_id, fetch_offset=fetch_offset,
                                             leader_end_offset=leader_end_offset,
                                             now_ms=now_ms, follower_log_start_offset=0)


def hw_after(state, current_hw, *, leader_end_offset, now_ms, lag_ms=LAG_MS):
    """The Log's high watermark after Kafka's maybeIncrementLeaderHW."""
    new = state.maybe_increment_high_watermark(current_hw, leader_end_offset=leader_end_offset,
                                               now_ms=now_ms, lag_time_max_ms=lag_ms)
    return current_hw if new is None else new


# --- PartitionTest ----------------------------------------------------------------------------

def test_update_follower_fetch_state():
    """PartitionTest.testUpdateFollowerFetchState: makeLeader sets lastCaughtUpTimeMs of an ISR
    follower to now and its offsets to unknown; a fetch behind the leader keeps the time; a
    fetch at the leader's end offset sets it to the fetch time."""
    state = LeaderReplicaState(BROKER)
    assert state.make_leader(leader_epoch=5, isr=[BROKER, REMOTE], replicas=[BROKER, REMOTE],
                             zk_version=1, controller_epoch=0, leader_end_offset=6,
                             now_ms=T0) is True
    remote = state.follower(REMOTE)
    assert remote.last_caught_up_time_ms == T0
    assert remote.log_end_offset == UNKNOWN_OFFSET
    assert remote.log_start_offset == UNKNOWN_OFFSET

    assert fetch(state, REMOTE, 3, leader_end_offset=6, now_ms=T0 + 500)
    remote = state.follower(REMOTE)
    assert (remote.last_caught_up_time_ms, remote.log_end_offset, remote.log_start_offset) == \
        (T0, 3, 0)

    assert fetch(state, REMOTE, 6, leader_end_offset=6, now_ms=T0 + 1000)
    remote = state.follower(REMOTE)
    assert (remote.last_caught_up_time_ms, remote.log_end_offset, remote.log_start_offset) == \
        (T0 + 1000, 6, 0)


def test_update_follower_fetch_state_unknown_replica():
    """PartitionTest.testGetReplica / ReplicaManager.updateFollowerFetchState: a broker that is
    not a remote replica (or the leader itself) is not recorded (False, nothing changes)."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=6)
    assert fetch(state, 999, 6, leader_end_offset=6, now_ms=T0) is False
    assert fetch(state, BROKER, 6, leader_end_offset=6, now_ms=T0) is False
    assert state.follower(999) is None
    assert state.follower(BROKER) is None


def test_maybe_shrink_isr():
    """PartitionTest.testMaybeShrinkIsr: right after makeLeader the follower counts as caught
    up; after replicaLagTimeMaxMs + 1 without a fetch the ISR shrinks to the leader, proposed
    but not committed, and the high watermark stays at 0."""
    leo = 10
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=leo)
    assert state.isr == (BROKER, REMOTE)
    assert hw_after(state, 0, leader_end_offset=leo, now_ms=T0) == 0

    assert state.isr_to_shrink(leader_end_offset=leo, now_ms=T0, lag_time_max_ms=LAG_MS) is None
    assert state.isr == (BROKER, REMOTE)

    now = T0 + LAG_MS + 1
    proposal = state.isr_to_shrink(leader_end_offset=leo, now_ms=now, lag_time_max_ms=LAG_MS)
    assert proposal == (BROKER,)
    assert state.isr_update_started(proposal)
    assert state.pending_isr == (BROKER,)
    assert state.isr == (BROKER, REMOTE)
    assert state.maximal_isr == (BROKER, REMOTE)
    assert hw_after(state, 0, leader_end_offset=leo, now_ms=now) == 0


def test_should_not_shrink_isr_if_previous_fetch_is_caught_up():
    """PartitionTest.testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp: a follower that reached
    the leader's end offset of its previous fetch is caught up as of that fetch, so new data
    appended meanwhile does not push it out even past the lag limit since makeLeader."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    hw = 0

    first_fetch_ms = T0 + 5000
    fetch(state, REMOTE, 5, leader_end_offset=10, now_ms=first_fetch_ms)
    hw = hw_after(state, hw, leader_end_offset=10, now_ms=first_fetch_ms)
    remote = state.follower(REMOTE)
    assert remote.last_caught_up_time_ms == T0
    assert hw == 5
    assert (remote.log_end_offset, remote.log_start_offset) == (5, 0)

    now = first_fetch_ms + 5001
    leo = 15  # seedLogData(5 more records)
    fetch(state, REMOTE, 10, leader_end_offset=leo, now_ms=now)
    hw = hw_after(state, hw, leader_end_offset=leo, now_ms=now)
    remote = state.follower(REMOTE)
    assert remote.last_caught_up_time_ms == first_fetch_ms
    assert hw == 10
    assert remote.log_end_offset == 10

    assert state.isr_to_shrink(leader_end_offset=leo, now_ms=now, lag_time_max_ms=LAG_MS) is None
    assert state.isr == (BROKER, REMOTE)
    assert not state.isr_update_in_flight


def test_should_not_shrink_isr_if_follower_caught_up_to_log_end():
    """PartitionTest.testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd: a follower at the
    leader's end offset is never out of sync, however long since it last fetched."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=T0)
    remote = state.follower(REMOTE)
    assert remote.last_caught_up_time_ms == T0
    assert hw_after(state, 0, leader_end_offset=10, now_ms=T0) == 10

    now = T0 + 30_001
    assert state.isr_to_shrink(leader_end_offset=10, now_ms=now, lag_time_max_ms=LAG_MS) is None
    assert state.isr == (BROKER, REMOTE)
    assert not state.isr_update_in_flight


def test_isr_not_shrunk_if_update_fails():
    """PartitionTest.testIsrNotShrunkIfUpdateFails: a shrink whose write fails
    (INVALID_UPDATE_VERSION) stays pending: the committed ISR keeps the follower, the high
    watermark does not move, and no further change is proposed."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    now = T0 + 30_001
    proposal = state.isr_to_shrink(leader_end_offset=10, now_ms=now, lag_time_max_ms=LAG_MS)
    assert state.isr_update_started(proposal)
    assert state.isr == (BROKER, REMOTE)
    assert hw_after(state, 0, leader_end_offset=10, now_ms=now) == 0

    state.isr_update_failed()
    assert state.isr_update_in_flight            # Kafka: isrState is still PendingShrinkIsr
    assert state.pending_isr == (BROKER,)
    assert state.isr == (BROKER, REMOTE)
    assert hw_after(state, 0, leader_end_offset=10, now_ms=now) == 0
    later = now + 10 * LAG_MS
    assert state.isr_to_shrink(leader_end_offset=10, now_ms=later, lag_time_max_ms=LAG_MS) is None
    assert state.out_of_sync_replicas(leader_end_offset=10, now_ms=later,
                                      lag_time_max_ms=LAG_MS) == frozenset()

    # Newer metadata (the controller's write that made the CAS fail) clears the pending change.
    leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10, leader_epoch=6,
           zk_version=3, now_ms=later, state=state)
    assert not state.isr_update_in_flight
    assert state.zk_version == 3


def test_at_min_isr():
    """PartitionTest.testAtMinIsr: three replicas, ISR = [leader], min.insync.replicas 1: at
    min ISR (an acks=all produce is still accepted; with min ISR 2 it is refused, 19)."""
    state = LeaderReplicaState(BROKER)
    assert not state.is_at_min_isr(1)
    leader([BROKER], [BROKER, BROKER + 1, BROKER + 2], leader_end_offset=0, leader_epoch=8,
           state=state)
    assert state.is_at_min_isr(1)
    assert state.under_replicated
    assert state.min_isr_check(1) == 0
    assert state.min_isr_check(2) == codes.NOT_ENOUGH_REPLICAS


def test_follower_does_not_join_isr_until_caught_up_to_offset_within_current_leader_epoch():
    """PartitionTest.testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch:
    after leader -> follower -> leader, a follower at or above the high watermark but below the
    new epoch's start offset does not join; at the epoch start it does (pending: the committed
    ISR is unchanged, the maximal ISR has it, the proposal adds it)."""
    follower1, follower2 = BROKER + 1, BROKER + 2
    replicas = [BROKER, follower1, follower2]
    isr = [BROKER, follower2]
    state = LeaderReplicaState(BROKER)
    assert leader(isr, replicas, leader_end_offset=0, leader_epoch=8, state=state).isr == \
        (BROKER, follower2)
    hw = 0
    last_offset_of_first_batch = 1
    leo = 5  # batch1 (2 records) and batch2 (3 records)
    hw = hw_after(state, hw, leader_end_offset=leo, now_ms=T0)
    assert hw == 0

    fetch(state, follower2, 0, leader_end_offset=leo, now_ms=T0)
    hw = hw_after(state, hw, leader_end_offset=leo, now_ms=T0)
    fetch(state, follower2, last_offset_of_first_batch, leader_end_offset=leo, now_ms=T0)
    hw = hw_after(state, hw, leader_end_offset=leo, now_ms=T0)
    assert hw == last_offset_of_first_batch

    state.resign(leader_epoch=9)                                 # makeFollower, epoch 9
    assert state.make_leader(leader_epoch=10, isr=isr, replicas=replicas, zk_version=1,
                             controller_epoch=3, leader_end_offset=leo, now_ms=T0) is True
    epoch_start = leo
    assert state.leader_epoch_start_offset == epoch_start
    leo += 2                                                     # batch3

    for offset in (0, last_offset_of_first_batch):
        fetch(state, follower1, offset, leader_end_offset=leo, now_ms=T0)
        assert state.isr_to_expand(follower1, high_watermark=hw) is None
        hw = hw_after(state, hw, leader_end_offset=leo, now_ms=T0)
    assert state.isr == (BROKER, follower2)

    fetch(state, follower1, epoch_start, leader_end_offset=leo, now_ms=T0)
    proposal = state.isr_to_expand(follower1, high_watermark=hw)
    assert set(proposal) == {BROKER, follower1, follower2}
    assert state.isr_update_started(proposal)
    assert state.isr == (BROKER, follower2)
    assert set(state.maximal_isr) == {BROKER, follower1, follower2}


def test_isr_expansion():
    """PartitionTest.testIsrExpansion: a follower behind the high watermark does not join; at
    or past it, the expansion is proposed (one update), counts in the maximal ISR only, and
    is committed when the write succeeds."""
    state = leader([BROKER], [BROKER, REMOTE], leader_end_offset=10)
    hw = hw_after(state, 0, leader_end_offset=10, now_ms=T0)
    assert hw == 10                    # the ISR is the leader alone
    assert state.follower(REMOTE).log_end_offset == UNKNOWN_OFFSET

    fetch(state, REMOTE, 3, leader_end_offset=6, now_ms=T0)
    assert state.isr_to_expand(REMOTE, high_watermark=hw) is None
    assert state.isr == (BROKER,)
    assert state.follower(REMOTE)[1:3] == (3, 0)

    fetch(state, REMOTE, 10, leader_end_offset=6, now_ms=T0)
    proposal = state.isr_to_expand(REMOTE, high_watermark=hw)
    assert proposal == (BROKER, REMOTE)
    assert state.isr_update_started(proposal)
    assert state.isr == (BROKER,)
    assert state.maximal_isr == (BROKER, REMOTE)

    assert state.isr_update_succeeded(proposal, 2)
    assert state.isr == (BROKER, REMOTE)
    assert state.zk_version == 2
    assert not state.isr_update_in_flight


def test_isr_not_expanded_if_update_fails():
    """PartitionTest.testIsrNotExpandedIfUpdateFails and testAlterIsrInvalidVersion /
    testAlterIsrUnknownTopic: the failed expansion stays pending; the committed ISR is
    unchanged and the maximal ISR still has the follower."""
    state = leader([BROKER], [BROKER, REMOTE], leader_end_offset=10)
    fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=T0)
    proposal = state.isr_to_expand(REMOTE, high_watermark=10)
    assert state.isr_update_started(proposal)
    assert state.isr == (BROKER,)
    assert state.maximal_isr == (BROKER, REMOTE)

    state.isr_update_failed()
    assert state.isr == (BROKER,)
    assert state.maximal_isr == (BROKER, REMOTE)
    assert state.isr_to_expand(REMOTE, high_watermark=10) is None


def test_alter_isr_unexpected_error_is_retried():
    """PartitionTest.testAlterIsrUnexpectedError: after a transient error Kafka re-sends the
    same proposal; here the caller re-sends ``pending_isr`` and it then commits."""
    state = leader([BROKER], [BROKER, REMOTE], leader_end_offset=10)
    fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=T0)
    state.isr_update_started(state.isr_to_expand(REMOTE, high_watermark=10))
    retry = state.pending_isr
    assert retry == (BROKER, REMOTE)
    assert state.isr == (BROKER,)
    assert state.isr_update_succeeded(retry, 2)
    assert state.isr == (BROKER, REMOTE)


def test_single_in_flight_alter_isr():
    """PartitionTest.testSingleInFlightAlterIsr: with an expansion in flight a shrink is not
    started (and nothing is proposed)."""
    f1, f2, f3 = BROKER + 1, BROKER + 2, BROKER + 3
    state = leader([BROKER, f1, f2], [BROKER, f1, f2, f3], leader_end_offset=10)
    assert state.isr_update_started((BROKER, f1, f2, f3))
    assert state.isr == (BROKER, f1, f2)
    assert state.maximal_isr == (BROKER, f1, f2, f3)
    assert state.isr_update_started((BROKER, f1, f2)) is False
    assert state.pending_isr == (BROKER, f1, f2, f3)
    far = T0 + 10 * LAG_MS
    assert state.isr_to_shrink(leader_end_offset=10, now_ms=far, lag_time_max_ms=LAG_MS) is None


def test_zk_isr_manager_callback_same_version_commits():
    """PartitionTest.testZkIsrManagerAsyncCallback: a successful write commits the ISR; a second
    expansion answered with the same zkVersion still leaves the in-flight state."""
    f1, f2, f3 = BROKER + 1, BROKER + 2, BROKER + 3
    state = leader([BROKER, f1, f2], [BROKER, f1, f2, f3], leader_end_offset=10)
    assert state.isr_update_started((BROKER, f1, f2, f3))
    assert state.isr_update_succeeded((BROKER, f1, f2, f3), 2)
    assert not state.isr_update_in_flight
    assert set(state.isr) == {BROKER, f1, f2, f3}
    assert state.isr_update_started((BROKER, f1, f2, f3))
    assert state.isr_update_succeeded((BROKER, f1, f2, f3), 2)
    assert not state.isr_update_in_flight


def test_stale_isr_update_answer_is_ignored():
    """Partition.handleAlterIsrResponse: an answer for a proposal that newer metadata replaced
    (or for another ISR, or an older zkVersion) changes nothing."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10, zk_version=4)
    assert state.isr_update_started((BROKER,))
    assert state.isr_update_succeeded((BROKER, REMOTE), 5) is False     # not the proposal
    assert state.isr_update_succeeded((BROKER,), 3) is False            # older version
    assert state.isr == (BROKER, REMOTE)
    leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10, leader_epoch=6,
           zk_version=7, state=state)
    assert state.isr_update_succeeded((BROKER,), 5) is False            # superseded
    assert state.isr == (BROKER, REMOTE)
    assert state.zk_version == 7


def test_make_leader_when_already_leader_keeps_follower_offsets():
    """Partition.makeLeader: a broker already leading keeps the followers' end offsets (only
    lastCaughtUpTimeMs is reset: now for ISR members, 0 for the others); one that was a
    follower in between forgets them (-1), so the high watermark waits for a fetch."""
    f2 = BROKER + 2
    state = leader([BROKER, REMOTE], [BROKER, REMOTE, f2], leader_end_offset=10)
    fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=T0)
    fetch(state, f2, 4, leader_end_offset=10, now_ms=T0)
    assert state.make_leader(leader_epoch=6, isr=[BROKER, REMOTE], replicas=[BROKER, REMOTE, f2],
                             zk_version=2, controller_epoch=0, leader_end_offset=12,
                             now_ms=T0 + 7) is False
    assert state.follower(REMOTE) == FollowerState(REMOTE, 10, 0, T0 + 7, 12, T0 + 7)
    assert state.follower(f2) == FollowerState(f2, 4, 0, 0, 12, T0 + 7)
    assert state.leader_epoch_start_offset == 12

    state.resign(leader_epoch=7)
    assert not state.is_leader and state.isr == () and state.leader_epoch_start_offset is None
    assert state.make_leader(leader_epoch=8, isr=[BROKER, REMOTE], replicas=[BROKER, REMOTE, f2],
                             zk_version=3, controller_epoch=0, leader_end_offset=12,
                             now_ms=T0 + 9) is True
    assert state.follower(REMOTE) == FollowerState(REMOTE, -1, -1, T0 + 9, -1, 0)
    assert state.high_watermark(leader_end_offset=12, now_ms=T0 + 9, lag_time_max_ms=LAG_MS) == -1


def test_assignment_change_adds_and_drops_remote_replicas():
    """Partition.updateAssignmentAndIsr: a remote replica per assigned broker; a broker that
    left the assignment is no longer tracked, a new one starts unknown."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=3)
    f3 = BROKER + 3
    leader([BROKER], [BROKER, f3], leader_end_offset=3, leader_epoch=6, state=state)
    assert state.follower(REMOTE) is None
    assert state.follower(f3).log_end_offset == UNKNOWN_OFFSET
    assert state.replicas == (BROKER, f3)


# --- high watermark (Partition.maybeIncrementLeaderHW) -----------------------------------------

def test_high_watermark_is_min_over_isr_and_only_moves_forward():
    """maybeIncrementLeaderHW: the minimum end offset over the leader and the ISR followers;
    Log.maybeIncrementHighWatermark never lowers it."""
    f2 = BROKER + 2
    state = leader([BROKER, REMOTE, f2], [BROKER, REMOTE, f2], leader_end_offset=0)
    fetch(state, REMOTE, 8, leader_end_offset=10, now_ms=T0)
    assert state.high_watermark(leader_end_offset=10, now_ms=T0, lag_time_max_ms=LAG_MS) == -1
    fetch(state, f2, 6, leader_end_offset=10, now_ms=T0)
    assert hw_after(state, 0, leader_end_offset=10, now_ms=T0) == 6
    assert state.maybe_increment_high_watermark(7, leader_end_offset=10, now_ms=T0,
                                                lag_time_max_ms=LAG_MS) is None
    fetch(state, f2, 10, leader_end_offset=10, now_ms=T0)
    assert hw_after(state, 6, leader_end_offset=10, now_ms=T0) == 8


def test_high_watermark_waits_for_recently_caught_up_non_isr_follower():
    """maybeIncrementLeaderHW: a follower outside the ISR that was caught up within
    replicaLagTimeMaxMs holds the high watermark back (so it can join); once it has lagged
    longer, it no longer does."""
    state = leader([BROKER], [BROKER, REMOTE], leader_end_offset=10)
    fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=T0)    # caught up at T0
    fetch(state, REMOTE, 10, leader_end_offset=14, now_ms=T0 + 1)
    assert state.high_watermark(leader_end_offset=14, now_ms=T0 + 1, lag_time_max_ms=LAG_MS) == 10
    late = T0 + LAG_MS + 1
    assert state.high_watermark(leader_end_offset=14, now_ms=late, lag_time_max_ms=LAG_MS) == 14


def test_high_watermark_with_pending_expansion_counts_new_member():
    """KIP-497 (Partition.maybeIncrementLeaderHW with maximalIsr): a pending expansion counts
    at once, even after the joiner's lag time has passed; a failed one keeps counting."""
    state = leader([BROKER], [BROKER, REMOTE], leader_end_offset=10)
    fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=T0)
    state.isr_update_started(state.isr_to_expand(REMOTE, high_watermark=10))
    fetch(state, REMOTE, 12, leader_end_offset=20, now_ms=T0 + 1)
    late = T0 + 5 * LAG_MS
    assert state.high_watermark(leader_end_offset=20, now_ms=late, lag_time_max_ms=LAG_MS) == 12
    state.isr_update_failed()
    assert state.high_watermark(leader_end_offset=20, now_ms=late, lag_time_max_ms=LAG_MS) == 12


def test_high_watermark_with_pending_shrink_keeps_old_member_until_committed():
    """Partition.shrinkIsr: a shrink is never assumed to succeed; the removed follower holds the
    high watermark until the write commits, then the high watermark advances."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    fetch(state, REMOTE, 4, leader_end_offset=10, now_ms=T0)
    now = T0 + LAG_MS + 1
    proposal = state.isr_to_shrink(leader_end_offset=10, now_ms=now, lag_time_max_ms=LAG_MS)
    assert proposal == (BROKER,)
    state.isr_update_started(proposal)
    assert hw_after(state, 4, leader_end_offset=10, now_ms=now) == 4
    assert state.isr_update_succeeded(proposal, 2)
    assert hw_after(state, 4, leader_end_offset=10, now_ms=now) == 10


def test_low_watermark():
    """Partition.lowWatermarkIfLeader: the smallest log start offset over the leader and its
    live remote replicas (dead ones do not hold DeleteRecords back)."""
    f2 = BROKER + 2
    state = leader([BROKER, REMOTE, f2], [BROKER, REMOTE, f2], leader_end_offset=10)
    state.update_follower_fetch_state(REMOTE, fetch_offset=10, leader_end_offset=10, now_ms=T0,
                                      follower_log_start_offset=3)
    assert state.low_watermark(leader_log_start_offset=5, live_broker_ids=[BROKER, REMOTE]) == 3
    assert state.low_watermark(leader_log_start_offset=5,
                               live_broker_ids=[BROKER, REMOTE, f2]) == -1
    assert state.low_watermark(leader_log_start_offset=2, live_broker_ids=[REMOTE]) == 2


# --- acks=all (DelayedProduce / checkEnoughReplicasReachOffset) --------------------------------

def test_acks_all_waits_for_high_watermark():
    """Partition.checkEnoughReplicasReachOffset: not complete until the high watermark reaches
    the required offset; then NONE."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    assert state.acks_all_result(11, high_watermark=10, min_insync_replicas=2) is None
    assert state.acks_all_result(11, high_watermark=11, min_insync_replicas=2) == 0
    assert state.acks_all_result(11, high_watermark=15, min_insync_replicas=1) == 0


def test_acks_all_not_enough_replicas_after_append():
    """checkEnoughReplicasReachOffset: the ISR shrank while the produce waited; once committed
    the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND (20), judged on the maximal ISR (a pending
    expansion counts)."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    proposal = state.isr_to_shrink(leader_end_offset=10, now_ms=T0 + LAG_MS + 1,
                                   lag_time_max_ms=LAG_MS)
    state.isr_update_started(proposal)
    assert state.acks_all_result(11, high_watermark=11, min_insync_replicas=2) == 0
    state.isr_update_succeeded(proposal, 2)
    assert state.acks_all_result(11, high_watermark=10, min_insync_replicas=2) is None
    assert state.acks_all_result(11, high_watermark=11, min_insync_replicas=2) == \
        codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert state.min_isr_check(2) == codes.NOT_ENOUGH_REPLICAS
    fetch(state, REMOTE, 11, leader_end_offset=11, now_ms=T0 + LAG_MS + 2)
    state.isr_update_started(state.isr_to_expand(REMOTE, high_watermark=11))
    assert state.acks_all_result(11, high_watermark=11, min_insync_replicas=2) == 0
    assert state.min_isr_check(2) == codes.NOT_ENOUGH_REPLICAS      # the committed ISR decides


def test_acks_all_not_leader():
    """DelayedProduce case A / checkEnoughReplicasReachOffset without a leader log: a broker
    that no longer leads answers NOT_LEADER_OR_FOLLOWER (6), whatever the high watermark."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    state.resign(leader_epoch=6)
    assert state.acks_all_result(5, high_watermark=10, min_insync_replicas=1) == \
        codes.NOT_LEADER_OR_FOLLOWER
    assert LeaderReplicaState(BROKER).acks_all_result(
        5, high_watermark=10, min_insync_replicas=1) == codes.NOT_LEADER_OR_FOLLOWER


def test_nothing_proposed_when_not_leader():
    """Partition.maybeShrinkIsr / maybeExpandIsr need a leader log: a resigned state proposes
    no ISR change and records no fetch."""
    state = leader([BROKER, REMOTE], [BROKER, REMOTE], leader_end_offset=10)
    state.resign()
    far = T0 + 10 * LAG_MS
    assert state.isr_to_shrink(leader_end_offset=10, now_ms=far, lag_time_max_ms=LAG_MS) is None
    assert state.isr_to_expand(REMOTE, high_watermark=0) is None
    assert state.isr_update_started((BROKER,)) is False
    assert fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=far) is False


# --- IsrExpirationTest (replicaLagTimeMaxMs = 100, leader end offset 20) -----------------------

ISR_LAG_MS = 100
ISR_LEO = 20
ISR_BROKERS = (0, 1)   # TestUtils.createBrokerConfigs(2): the leader is broker 0


def all_in_isr(now_ms):
    """IsrExpirationTest.getPartitionWithAllReplicasInIsr: both brokers in the ISR, the
    follower's lastCaughtUpTime set to now by a fetch at 0 with the leader's end offset 0."""
    state = LeaderReplicaState(0)
    state.make_leader(leader_epoch=0, isr=ISR_BROKERS, replicas=ISR_BROKERS, zk_version=0,
                      controller_epoch=0, leader_end_offset=ISR_LEO, now_ms=now_ms)
    fetch(state, 1, 0, leader_end_offset=0, now_ms=now_ms)
    assert state.isr == ISR_BROKERS
    return state


def out_of_sync(state, now_ms):
    return state.out_of_sync_replicas(leader_end_offset=ISR_LEO, now_ms=now_ms,
                                      lag_time_max_ms=ISR_LAG_MS)


def test_isr_expiration_for_stuck_followers():
    """IsrExpirationTest.testIsrExpirationForStuckFollowers: a follower one behind that stops
    fetching is out of sync after replicaLagTimeMaxMs."""
    now = T0
    state = all_in_isr(now)
    fetch(state, 1, ISR_LEO - 1, leader_end_offset=ISR_LEO, now_ms=now)
    assert out_of_sync(state, now) == frozenset()
    now += 150
    assert out_of_sync(state, now) == {1}
    assert state.isr_to_shrink(leader_end_offset=ISR_LEO, now_ms=now,
                               lag_time_max_ms=ISR_LAG_MS) == (0,)


def test_isr_expiration_if_no_fetch_request_made():
    """IsrExpirationTest.testIsrExpirationIfNoFetchRequestMade: a follower that never fetches
    is out of sync after replicaLagTimeMaxMs."""
    state = all_in_isr(T0)
    assert out_of_sync(state, T0 + 150) == {1}


def test_isr_expiration_for_slow_followers():
    """IsrExpirationTest.testIsrExpirationForSlowFollowers: a follower that keeps fetching but
    never reaches the end offset falls out after replicaLagTimeMaxMs; one fetch at the end
    offset brings it back in sync."""
    now = T0
    state = all_in_isr(now)
    fetch(state, 1, ISR_LEO - 2, leader_end_offset=ISR_LEO, now_ms=now)
    assert out_of_sync(state, now) == frozenset()
    now += 75
    fetch(state, 1, ISR_LEO - 1, leader_end_offset=ISR_LEO, now_ms=now)
    assert out_of_sync(state, now) == frozenset()
    now += 75
    assert out_of_sync(state, now) == {1}
    fetch(state, 1, ISR_LEO, leader_end_offset=ISR_LEO, now_ms=now)
    assert out_of_sync(state, now) == frozenset()


def test_isr_expiration_for_caught_up_followers():
    """IsrExpirationTest.testIsrExpirationForCaughtUpFollowers: a follower at the leader's end
    offset is not out of sync however long it has not fetched."""
    now = T0
    state = all_in_isr(now)
    fetch(state, 1, ISR_LEO, leader_end_offset=ISR_LEO, now_ms=now)
    assert out_of_sync(state, now) == frozenset()
    assert out_of_sync(state, now + 150) == frozenset()


@pytest.mark.parametrize("lag_ms", [ISR_LAG_MS - 1, ISR_LAG_MS, ISR_LAG_MS + 1])
def test_out_of_sync_boundary_is_strictly_greater(lag_ms):
    """Partition.isFollowerOutOfSync: out of sync only when more than replicaLagTimeMaxMs passed
    (``>``, not ``>=``); the high watermark's caught-up clause uses ``<=``."""
    state = all_in_isr(T0)
    assert (out_of_sync(state, T0 + lag_ms) == {1}) == (lag_ms > ISR_LAG_MS)


def test_update_isr_at_same_epoch_keeps_follower_state():
    """Partition.updateAssignmentAndIsr without makeLeader's resets: a committed ISR read at the
    same leader epoch and a newer zkVersion (our own write whose answer was lost) replaces the
    ISR and drops the pending change, keeping the followers' times and the epoch start."""
    f2 = BROKER + 2
    state = leader([BROKER, REMOTE, f2], [BROKER, REMOTE, f2], leader_end_offset=10,
                   zk_version=4)
    fetch(state, REMOTE, 10, leader_end_offset=10, now_ms=T0 + 3)
    before = state.follower(REMOTE)
    proposal = state.isr_to_shrink(leader_end_offset=12, now_ms=T0 + LAG_MS + 1,
                                   lag_time_max_ms=LAG_MS)
    assert proposal == (BROKER, REMOTE)
    state.isr_update_started(proposal)
    assert state.update_isr((BROKER, REMOTE), zk_version=4) is False    # not newer
    assert state.update_isr((BROKER, REMOTE), zk_version=5) is True
    assert (state.isr, state.zk_version, state.isr_update_in_flight) == \
        ((BROKER, REMOTE), 5, False)
    assert state.follower(REMOTE) == before
    assert state.leader_epoch_start_offset == 10
    state.resign()
    assert state.update_isr((BROKER,), zk_version=9) is False
