"""Follower truncation by leader epoch (seglog.cluster.truncation), against Kafka's own tests.

AbstractFetcherThreadTest's logs are in-memory lists of one-record batches stamped with leader
epochs; here a log is the same data: the epoch of each record (``EpochLog``), with Kafka's
``LeaderEpochFileCache.endOffsetFor`` over its ``(epoch, start_offset)`` entries. The rounds
of OffsetsForLeaderEpoch / Fetch with ``DivergingEpoch`` that Kafka's fetcher thread runs are
replayed by small bounded loops over the pure functions (the fetcher's I/O is not under test).
"""

from __future__ import annotations

import pytest

from seglog.cluster.truncation import (
    OutOfRangeResolution,
    TruncationState,
    diverging_epoch,
    needs_leader_start_offset,
    offset_truncation_state,
    out_of_range_fetch_offset,
)
from seglog.cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from seglog.errors import OffsetOutOfRangeError

MAX_ROUNDS = 20  # every replay below is bounded


def cache_end_offset_for(entries, log_end_offset, requested):
    """LeaderEpochFileCache.endOffsetFor (R§3.6) over sorted (epoch, start_offset) entries."""
    if requested == -1:
        return (-1, -1)
    if entries and entries[-1][0] == requested:
        return (requested, log_end_offset)
    higher = next((e for e in entries if e[0] > requested), None)
    if higher is None:
        return (-1, -1)
    floor = [e for e in entries if e[0] <= requested]
    if not floor:
        return (requested, higher[1])
    return (floor[-1][0], higher[1])


class EpochLog:
    """A log as AbstractFetcherThreadTest's MockFetcherThread sees it: one record per offset
    from ``start_offset``, each with its batch's partitionLeaderEpoch, and a high watermark."""

    def __init__(self, epochs, *, start_offset=0, high_watermark=0):
        self.start_offset = start_offset
        self.epochs = list(epochs)
        self.high_watermark = high_watermark

    @property
    def end_offset(self):
        return self.start_offset + len(self.epochs)

    @property
    def entries(self):
        """The leader epoch cache: (epoch, start_offset) where each epoch begins."""
        out = []
        for i, epoch in enumerate(self.epochs):
            if not out or out[-1][0] != epoch:
                out.append((epoch, self.start_offset + i))
        return out

    @property
    def latest_epoch(self):
        return self.epochs[-1] if self.epochs else -1

    def end_offset_for(self, requested):
        return cache_end_offset_for(self.entries, self.end_offset, requested)

    def truncate_to(self, offset):
        if offset < self.end_offset:
            del self.epochs[max(offset - self.start_offset, 0):]
        self.high_watermark = min(self.high_watermark, self.end_offset)

    def truncate_fully_and_start_at(self, offset):
        self.epochs = []
        self.start_offset = offset
        self.high_watermark = offset

    def records(self):
        return [(self.start_offset + i, e) for i, e in enumerate(self.epochs)]


def truncate(follower, reply, breaks=NO_TEST_BREAKS):
    state = offset_truncation_state(reply, follower_end_offset_for=follower.end_offset_for,
                                    follower_log_end_offset=follower.end_offset,
                                    follower_high_watermark=follower.high_watermark,
                                    breaks=breaks)
    follower.truncate_to(state.offset)
    return state


def truncate_by_offsets_for_leader_epoch(follower, leader, breaks=NO_TEST_BREAKS):
    """The fetcher's Truncating state (no truncation on fetch): OffsetsForLeaderEpoch with the
    follower's latest epoch, truncate, again until complete. Returns the states."""
    states = []
    for _ in range(MAX_ROUNDS):
        states.append(truncate(follower, leader.end_offset_for(follower.latest_epoch), breaks))
        if states[-1].complete:
            return states
    raise AssertionError(f"truncation did not complete: {states}")


def fetch_round(follower, leader):
    """One Fetch v12 of one batch (MockFetcherThread fetches one batch at a time): the leader
    answers DivergingEpoch (the follower truncates) or the next record (appended)."""
    div = diverging_epoch(follower.latest_epoch, follower.end_offset, leader.end_offset_for,
                          log_start_offset=leader.start_offset)
    if div is not None:
        return truncate(follower, div)
    index = follower.end_offset - leader.start_offset
    if index < len(leader.epochs):
        follower.epochs.append(leader.epochs[index])
    follower.high_watermark = min(leader.high_watermark, follower.end_offset)
    return None


def replicate_until_equal(follower, leader):
    for _ in range(MAX_ROUNDS):
        if follower.records() == leader.records():
            return
        fetch_round(follower, leader)
    raise AssertionError(f"logs not reconciled: {follower.records()} != {leader.records()}")


def test_truncation():
    """AbstractFetcherThreadTest.testTruncation (truncateOnFetch = false): the follower's epochs
    0, 2, 4 against the leader's 1, 3, 5: two rounds the follower does not know the epoch the
    leader answers for (not complete), then epoch 0 ends at 0; after fetching, the logs are
    equal (start, end and high watermark too)."""
    follower = EpochLog([0, 2, 4], high_watermark=0)
    leader = EpochLog([1, 3, 5], high_watermark=2)
    states = truncate_by_offsets_for_leader_epoch(follower, leader)
    assert states == [TruncationState(2, False), TruncationState(1, False),
                      TruncationState(0, True)]
    replicate_until_equal(follower, leader)
    assert (follower.start_offset, follower.end_offset, follower.high_watermark) == \
        (leader.start_offset, leader.end_offset, leader.high_watermark)


def test_truncation_on_fetch():
    """AbstractFetcherThreadTest.testTruncation (truncateOnFetch = true): the same logs
    reconciled through DivergingEpoch answers alone."""
    follower = EpochLog([0, 2, 4], high_watermark=0)
    leader = EpochLog([1, 3, 5], high_watermark=2)
    assert fetch_round(follower, leader) == TruncationState(2, False)
    assert fetch_round(follower, leader) == TruncationState(1, False)
    assert fetch_round(follower, leader) == TruncationState(0, True)
    replicate_until_equal(follower, leader)
    assert follower.high_watermark == leader.high_watermark


def test_diverging_epochs():
    """AbstractFetcherThreadTest.testDivergingEpochs: the last record differs in epoch (4 on the
    follower, 5 on the leader); the leader answers DivergingEpoch (2, 2), the follower cuts
    the record and its last fetched epoch becomes 2, then 5 after fetching."""
    follower = EpochLog([0, 2, 4])
    leader = EpochLog([0, 2, 5], high_watermark=2)
    assert follower.latest_epoch == 4
    assert diverging_epoch(4, 3, leader.end_offset_for, log_start_offset=0) == (2, 2)
    assert fetch_round(follower, leader) == TruncationState(2, True)
    assert follower.latest_epoch == 2
    replicate_until_equal(follower, leader)
    assert follower.latest_epoch == 5


def test_no_divergence_when_epoch_and_offset_agree():
    """Partition.readRecords: a follower whose last fetched epoch the leader has, ending at or
    after the fetch offset, gets records (no DivergingEpoch)."""
    leader = EpochLog([0, 0, 2, 2, 2])
    assert diverging_epoch(0, 2, leader.end_offset_for, log_start_offset=0) is None
    assert diverging_epoch(2, 5, leader.end_offset_for, log_start_offset=0) is None
    assert diverging_epoch(2, 4, leader.end_offset_for, log_start_offset=0) is None
    # The follower holds epoch-0 records beyond where the leader's epoch 0 ends.
    assert diverging_epoch(0, 3, leader.end_offset_for, log_start_offset=0) == (0, 2)
    # The follower's epoch 1 was never the leader's: the largest epoch below it, and its end.
    assert diverging_epoch(1, 3, leader.end_offset_for, log_start_offset=0) == (0, 2)


def test_last_fetched_offset_validation():
    """PartitionTest.testLastFetchedOffsetValidation: the leader's epochs 0@0, 3@2, 4@8, 7@13,
    9@14 and its own epoch 10 asserted at 17 (makeLeader); then the log start moved to 5 and
    to 10 (the cache truncated from the start)."""
    entries = [(0, 0), (3, 2), (4, 8), (7, 13), (9, 14), (10, 17)]
    log_start = 0

    def read(last_fetched_epoch, fetch_offset):
        return diverging_epoch(last_fetched_epoch, fetch_offset,
                               lambda epoch: cache_end_offset_for(entries, 17, epoch),
                               log_start_offset=log_start)

    assert read(2, 5) == (0, 2)
    assert read(0, 4) == (0, 2)
    assert read(6, 6) == (4, 13)
    assert read(5, 9) == (4, 13)
    assert read(10, 18) == (10, 17)
    assert read(0, 2) is None
    assert read(7, 14) is None
    assert read(9, 17) is None
    assert read(10, 17) is None
    with pytest.raises(OffsetOutOfRangeError):   # an epoch larger than any the leader knows
        read(11, 5)

    entries = [(3, 5), (4, 8), (7, 13), (9, 14), (10, 17)]   # log start 5, mid epoch 3
    log_start = 5
    assert read(2, 8) == (2, 5)
    assert read(0, 5) is None
    assert read(3, 5) is None
    with pytest.raises(OffsetOutOfRangeError):
        read(0, 0)

    entries = [(4, 10), (7, 13), (9, 14), (10, 17)]           # log start 10
    log_start = 10
    with pytest.raises(OffsetOutOfRangeError):   # diverging, but below the log start
        read(5, 6)
    with pytest.raises(OffsetOutOfRangeError):   # not diverging, below the log start
        read(3, 6)


def test_diverging_epoch_absent_field():
    """FetchRequest.PartitionData: LastFetchedEpoch -1 (absent, or a follower with no epochs)
    means no divergence check."""
    leader = EpochLog([3, 3])

    def never(epoch):
        raise AssertionError("no lookup without a last fetched epoch")

    assert diverging_epoch(-1, 7, never, log_start_offset=0) is None
    assert diverging_epoch(-1, 0, leader.end_offset_for, log_start_offset=0) is None


def test_diverging_epoch_offset_out_of_range():
    """Partition.readRecords: OffsetOutOfRangeException when the leader cannot place the last
    fetched epoch ((-1, -1)) and when the fetch offset is below the log start, whether or not
    the epochs diverge."""
    with pytest.raises(OffsetOutOfRangeError):
        diverging_epoch(4, 3, lambda epoch: (-1, -1), log_start_offset=0)
    leader = EpochLog([4], start_offset=2)
    with pytest.raises(OffsetOutOfRangeError):
        diverging_epoch(0, 1, leader.end_offset_for, log_start_offset=leader.start_offset)
    assert OffsetOutOfRangeError.kafka_error_code == 1


def test_truncate_to_high_watermark_if_leader_epoch_info_not_available():
    """AbstractFetcherThreadTest.testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable /
    getOffsetTruncationState's first fallback: the leader answers an undefined end offset; the
    follower truncates to its high watermark (its initial fetch offset), complete."""
    follower = EpochLog([0, 2, 4], high_watermark=2)
    assert truncate(follower, (-1, -1)) == TruncationState(2, True)
    assert follower.end_offset == 2
    assert truncate(EpochLog([0, 2, 4], high_watermark=2), (5, -1)) == TruncationState(2, True)


def test_truncate_to_leader_offset_for_v0_reply():
    """getOffsetTruncationState: an OffsetsForLeaderEpoch v0 reply (no epoch) truncates to
    min(leader's offset, follower's end offset), complete."""
    assert truncate(EpochLog([0, 0, 0, 0]), (-1, 2)) == TruncationState(2, True)
    assert truncate(EpochLog([0, 0]), (-1, 9)) == TruncationState(2, True)


def test_truncate_when_follower_tracks_no_epoch_at_or_below_the_leaders():
    """getOffsetTruncationState, endOffsetForEpoch None: the follower's epochs all start above
    the leader's answer (it tracked none that low): min(leader's offset, follower's end)."""
    follower = EpochLog([5, 5, 6, 6], start_offset=10)
    assert follower.end_offset_for(3) == (3, 10)  # KIP-279: below the earliest epoch

    def untracked(epoch):
        return (-1, -1)

    state = offset_truncation_state((3, 12), follower_end_offset_for=untracked,
                                    follower_log_end_offset=14, follower_high_watermark=11)
    assert state == TruncationState(12, True)
    state = offset_truncation_state((3, 20), follower_end_offset_for=untracked,
                                    follower_log_end_offset=14, follower_high_watermark=11)
    assert state == TruncationState(14, True)


def test_truncate_to_min_of_leader_follower_and_end_offset():
    """getOffsetTruncationState, same epoch: min(leader's end, follower's end for the epoch,
    follower's LEO); a truncation below the follower's high watermark is legal."""
    follower = EpochLog([0, 0, 1, 1, 1], high_watermark=4)
    # The leader's epoch 1 ended at 3; the follower has epoch-1 records up to 5.
    assert truncate(follower, (1, 3)) == TruncationState(3, True)
    assert follower.end_offset == 3
    # The leader has more of the epoch than the follower: nothing to cut.
    follower = EpochLog([0, 0, 1])
    assert truncate(follower, (1, 9)) == TruncationState(3, True)
    # The follower's epoch 0 ends where its epoch 1 starts, before the leader's epoch-0 end.
    follower = EpochLog([0, 0, 1, 1])
    assert truncate(follower, (0, 3)) == TruncationState(2, True)


def test_follower_fetch_out_of_range_high():
    """AbstractFetcherThreadTest.testFollowerFetchOutOfRangeHigh: the leader's log was emptied
    (an unclean election): its end offset 0 is below the follower's 3; truncate to 0 and fetch
    from 0."""
    assert not needs_leader_start_offset(follower_end_offset=3, leader_end_offset=0)
    resolution = out_of_range_fetch_offset(follower_end_offset=3, leader_end_offset=0,
                                           leader_start_offset=None)
    assert resolution == OutOfRangeResolution(fetch_offset=0, truncate_to=0)
    follower = EpochLog([0, 2, 4], high_watermark=0)
    follower.truncate_to(resolution.truncate_to)
    assert (follower.end_offset, follower.start_offset, follower.high_watermark) == (0, 0, 0)


def test_follower_fetch_out_of_range_low():
    """AbstractFetcherThreadTest.testFollowerFetchOutOfRangeLow: the follower (end 1) is behind
    the leader's log start (2): the truncate-on-fetch check answers OFFSET_OUT_OF_RANGE, the
    follower empties its log and starts at 2, and then replicates to an equal log."""
    follower = EpochLog([0], high_watermark=0)
    leader = EpochLog([4], start_offset=2, high_watermark=2)
    with pytest.raises(OffsetOutOfRangeError):
        fetch_round(follower, leader)
    assert needs_leader_start_offset(follower_end_offset=1, leader_end_offset=3)
    resolution = out_of_range_fetch_offset(follower_end_offset=1, leader_end_offset=3,
                                           leader_start_offset=2)
    assert resolution == OutOfRangeResolution(fetch_offset=2, start_at=2)
    follower.truncate_fully_and_start_at(resolution.start_at)
    assert (follower.start_offset, follower.records()) == (2, [])
    replicate_until_equal(follower, leader)
    assert (follower.start_offset, follower.end_offset, follower.high_watermark) == \
        (leader.start_offset, leader.end_offset, leader.high_watermark)


def test_out_of_range_between_leader_start_and_end_keeps_log():
    """fetchOffsetAndTruncate's second case: the leader's start is at or below the follower's
    end and its end at or above: fetch from the follower's end, cut nothing."""
    assert out_of_range_fetch_offset(follower_end_offset=5, leader_end_offset=9,
                                     leader_start_offset=2) == OutOfRangeResolution(5)
    assert out_of_range_fetch_offset(follower_end_offset=5, leader_end_offset=5,
                                     leader_start_offset=5) == OutOfRangeResolution(5)
    with pytest.raises(ValueError):
        out_of_range_fetch_offset(follower_end_offset=5, leader_end_offset=9,
                                  leader_start_offset=None)


# --- KIP-101's scenarios, and the negative control that brings them back -----------------------

def kip101_high_watermark_truncation():
    """KIP-101 scenario 1: B holds m1, m2 (epoch 0) but its high watermark (1) lags the
    leader's by one fetch; A (leader, LEO 2, HW 2: m2 committed) answers B's epoch query."""
    leader_a = EpochLog([0, 0], high_watermark=2)
    follower_b = EpochLog([0, 0], high_watermark=1)
    return leader_a, follower_b


def kip101_divergence():
    """KIP-101 scenario 2: A holds m1, m2 (epoch 0); B, leader in epoch 1 after both crashed,
    wrote m3 at offset 1. A's high watermark (2) covers offset 1."""
    returning_a = EpochLog([0, 0], high_watermark=2)
    leader_b = EpochLog([0, 1], high_watermark=2)
    return leader_b, returning_a


def test_kip101_committed_record_kept():
    """KIP-101 scenario 1 with epochs: B keeps the committed m2 (truncation offset 2, not its
    high watermark 1)."""
    leader_a, follower_b = kip101_high_watermark_truncation()
    assert truncate_by_offsets_for_leader_epoch(follower_b, leader_a) == \
        [TruncationState(2, True)]
    assert follower_b.records() == leader_a.records()


def test_kip101_divergence_repaired():
    """KIP-101 scenario 2 with epochs: A cuts m2 at 1 (where B's epoch 0 ends) and fetches m3:
    the logs agree."""
    leader_b, returning_a = kip101_divergence()
    assert truncate_by_offsets_for_leader_epoch(returning_a, leader_b) == \
        [TruncationState(1, True)]
    replicate_until_equal(returning_a, leader_b)
    assert returning_a.records() == leader_b.records()


def test_truncate_to_hw_negative_control():
    """The test break truncate_to_hw (pre-KIP-101): the follower truncates to its high
    watermark whatever the leader says, which loses scenario 1's committed m2 and leaves
    scenario 2's logs diverged at offset 1."""
    breaks = TestBreaks.of("truncate_to_hw")
    leader_a, follower_b = kip101_high_watermark_truncation()
    assert truncate_by_offsets_for_leader_epoch(follower_b, leader_a, breaks) == \
        [TruncationState(1, True)]
    assert follower_b.records() == [(0, 0)]                    # m2 gone on B

    leader_b, returning_a = kip101_divergence()
    assert truncate_by_offsets_for_leader_epoch(returning_a, leader_b, breaks) == \
        [TruncationState(2, True)]
    assert returning_a.records() != leader_b.records()         # same offset, other record
    assert returning_a.end_offset == leader_b.end_offset       # nothing left to fetch
    # ... and the leader reports no divergence either (pre-KIP-101 leaders knew no epochs).
    assert diverging_epoch(0, 2, leader_b.end_offset_for, log_start_offset=0,
                           breaks=breaks) is None

    other = TestBreaks.of("ack_on_append")   # another flag: the rule holds
    leader_a, follower_b = kip101_high_watermark_truncation()
    assert truncate_by_offsets_for_leader_epoch(follower_b, leader_a, other) == \
        [TruncationState(2, True)]
    assert diverging_epoch(0, 2, leader_b.end_offset_for, log_start_offset=0,
                           breaks=other) == (0, 1)


def test_epoch_log_end_offset_for_matches_kafka_cache():
    """The test's own end_offset_for is LeaderEpochFileCache.endOffsetFor (R§3.6): latest ->
    LEO; between -> (floor epoch, next start); below the first -> (requested, first start);
    above the latest or -1 -> (-1, -1)."""
    log = EpochLog([1, 1, 3, 3, 3, 6], start_offset=10)
    assert log.entries == [(1, 10), (3, 12), (6, 15)]
    assert log.end_offset_for(6) == (6, 16)
    assert log.end_offset_for(3) == (3, 15)
    assert log.end_offset_for(4) == (3, 15)
    assert log.end_offset_for(2) == (1, 12)
    assert log.end_offset_for(0) == (0, 10)
    assert log.end_offset_for(7) == (-1, -1)
    assert log.end_offset_for(-1) == (-1, -1)
