"""Kafka's leader election algorithms and replica placement (seglog.cluster.election).

Ported from Kafka 2.8.2: ``PartitionLeaderElectionAlgorithmsTest`` (one test each, same
inputs), ``AdminRackAwareTest.testReplicaAssignment``, and the ISR rules of
``Election.leaderForOffline`` / ``ReplicaStateMachine.doRemoveReplicasFromIsr`` exercised
through ``ControllerIntegrationTest``'s expectations (research R§2.3).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from seglog.cluster import election
from seglog.cluster.election import (
    NO_LEADER,
    LeaderAndIsr,
    assign_replicas_to_brokers,
    controlled_shutdown_leader,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    initial_leader_and_isr,
    offline_partition_leader,
    preferred_replica_leader,
    reassign_partition_leader,
    remove_replica_from_isr,
)
from seglog.errors import InvalidPartitionsError, InvalidReplicationFactorError

# --- PartitionLeaderElectionAlgorithmsTest --------------------------------------------------


def test_offline_partition_leader_election():
    """testOfflinePartitionLeaderElection."""
    assert offline_partition_leader([2, 4], [2, 4], {4}, unclean_enabled=False) == 4


def test_offline_last_isr_offline_unclean_disabled():
    """testOfflinePartitionLeaderElectionLastIsrOfflineUncleanLeaderElectionDisabled."""
    assert offline_partition_leader([2, 4], [2], {4}, unclean_enabled=False) is None
    result = elect_offline([2, 4], LeaderAndIsr(2, 3, (2,)), {4}, unclean_enabled=False)
    assert result.leader_and_isr is None and not result.unclean


def test_offline_last_isr_offline_unclean_enabled():
    """testOfflinePartitionLeaderElectionLastIsrOfflineUncleanLeaderElectionEnabled (the
    uncleanLeaderElectionRate mark is ElectionResult.unclean)."""
    assert offline_partition_leader([2, 4], [2], {4}, unclean_enabled=True) == 4
    result = elect_offline([2, 4], LeaderAndIsr(2, 3, (2,)), {4}, unclean_enabled=True)
    assert result.unclean
    assert result.leader_and_isr == LeaderAndIsr(4, 4, (4,))


def test_reassign_partition_leader_election():
    """testReassignPartitionLeaderElection."""
    assert reassign_partition_leader([2, 4], [2, 4], {4}) == 4


def test_reassign_partition_leader_election_with_no_live_isr():
    """testReassignPartitionLeaderElectionWithNoLiveIsr."""
    assert reassign_partition_leader([2, 4], [2], set()) is None


def test_reassign_partition_leader_election_with_empty_isr():
    """testReassignPartitionLeaderElectionWithEmptyIsr."""
    assert reassign_partition_leader([2, 4], [], {2}) is None


def test_preferred_replica_partition_leader_election():
    """testPreferredReplicaPartitionLeaderElection."""
    assert preferred_replica_leader([2, 4], [2, 4], {2, 4}) == 2


def test_preferred_replica_in_isr_not_live():
    """testPreferredReplicaPartitionLeaderElectionPreferredReplicaInIsrNotLive."""
    assert preferred_replica_leader([2, 4], [2], set()) is None


def test_preferred_replica_not_in_isr_live():
    """testPreferredReplicaPartitionLeaderElectionPreferredReplicaNotInIsrLive."""
    assert preferred_replica_leader([2, 4], [4], {2, 4}) is None


def test_preferred_replica_not_in_isr_not_live():
    """testPreferredReplicaPartitionLeaderElectionPreferredReplicaNotInIsrNotLive."""
    assert preferred_replica_leader([2, 4], [], set()) is None


def test_controlled_shutdown_partition_leader_election():
    """testControlledShutdownPartitionLeaderElection."""
    assert controlled_shutdown_leader([2, 4], [2, 4], {2, 4}, {2}) == 4


def test_controlled_shutdown_last_isr_shutting_down():
    """testControlledShutdownPartitionLeaderElectionLastIsrShuttingDown."""
    assert controlled_shutdown_leader([2, 4], [2], {2, 4}, {2}) is None


def test_controlled_shutdown_all_isr_simultaneously_shutdown():
    """testControlledShutdownPartitionLeaderElectionAllIsrSimultaneouslyShutdown."""
    assert controlled_shutdown_leader([2, 4], [2, 4], {2, 4}, {2, 4}) is None


# --- whole decisions: Election.scala and the ISR rules (R§2.3) ---------------------------


def test_offline_election_scans_assignment_order_not_isr_order():
    """The leader is the first live ISR member in *assignment* order (Kafka's
    ``assignment.find``), whatever order the ISR lists."""
    current = LeaderAndIsr(1, 5, (3, 2, 1))
    result = elect_offline([1, 2, 3], current, {2, 3}, unclean_enabled=False)
    assert result.leader_and_isr == LeaderAndIsr(2, 6, (3, 2))
    assert result.live_replicas == (2, 3)
    assert not result.unclean


def test_offline_election_new_isr_is_live_part_of_old_isr():
    """A clean election keeps only the live ISR members, in the ISR's order, epoch + 1; a
    live replica outside the ISR does not join it."""
    current = LeaderAndIsr(1, 0, (1, 2))
    result = elect_offline([1, 2, 3], current, {2, 3}, unclean_enabled=True)
    assert result.leader_and_isr == LeaderAndIsr(2, 1, (2,))
    assert not result.unclean


def test_offline_election_with_no_live_replica_even_unclean():
    """No live replica at all: no leader even with unclean election on."""
    result = elect_offline([1, 2], LeaderAndIsr(1, 2, (1, 2)), set(), unclean_enabled=True)
    assert result.leader_and_isr is None
    assert result.live_replicas == ()


def test_negative_control_ignore_isr_picks_first_live_replica():
    """``elect_most_recent`` (ignore_isr): the first live replica leads even though it is out
    of the ISR and unclean election is off, and the election claims to be clean: the
    deliberately broken rule."""
    current = LeaderAndIsr(NO_LEADER, 4, (1,))
    broken = elect_offline([2, 1], current, {1, 2}, unclean_enabled=False, ignore_isr=True)
    assert broken.leader_and_isr == LeaderAndIsr(2, 5, (2, 1))
    assert not broken.unclean
    assert elect_offline([2, 1], current, set(), unclean_enabled=False, ignore_isr=True) == (
        election.ElectionResult(None, ())
    )
    clean = elect_offline([2, 1], current, {1, 2}, unclean_enabled=False)
    assert clean.leader_and_isr == LeaderAndIsr(1, 5, (1,))


def test_preferred_election_keeps_isr_and_bumps_epoch():
    result = elect_preferred([2, 1], LeaderAndIsr(1, 3, (1, 2)), {1, 2})
    assert result.leader_and_isr == LeaderAndIsr(2, 4, (1, 2))
    assert elect_preferred([2, 1], LeaderAndIsr(1, 3, (1,)), {1, 2}).leader_and_isr is None


def test_controlled_shutdown_election_drops_shutting_down_brokers_from_isr():
    """ControllerIntegrationTest.testControlledShutdown's expectations: shutting down 2 of
    [0,1,2] leaves leader 0 and ISR [0,1]; shutting down the leader moves it."""
    result = elect_controlled_shutdown([0, 1, 2], LeaderAndIsr(0, 0, (0, 1, 2)), {0, 1, 2}, {2})
    assert result.leader_and_isr == LeaderAndIsr(0, 1, (0, 1))
    moved = elect_controlled_shutdown([0, 1, 2], LeaderAndIsr(0, 1, (0, 1)), {0, 1}, {0})
    assert moved.leader_and_isr == LeaderAndIsr(1, 2, (1,))
    stuck = elect_controlled_shutdown([0, 1, 2], LeaderAndIsr(0, 2, (0,)), {0}, {0})
    assert stuck.leader_and_isr is None


def test_reassign_election_uses_target_replicas():
    result = elect_reassign([4, 5, 1], LeaderAndIsr(1, 2, (1, 4, 5)), {1, 4, 5})
    assert result.leader_and_isr == LeaderAndIsr(4, 3, (1, 4, 5))


def test_new_partition_init():
    """testTopicCreation / testTopicCreationWithOfflineReplica: leader = first live replica,
    ISR = the live replicas, epoch 0; nothing when no replica is live."""
    assert initial_leader_and_isr([0], {0}) == LeaderAndIsr(0, 0, (0,))
    assert initial_leader_and_isr([1, 0], {0}) == LeaderAndIsr(0, 0, (0,))
    assert initial_leader_and_isr([3, 1, 2], {1, 2, 3}) == LeaderAndIsr(3, 0, (3, 1, 2))
    assert initial_leader_and_isr([1, 2], {0}) is None


def test_remove_dead_replica_from_isr():
    """doRemoveReplicasFromIsr: a dead follower leaves the ISR at epoch + 1, leader kept."""
    assert remove_replica_from_isr(LeaderAndIsr(1, 3, (1, 2, 3)), 2) == LeaderAndIsr(
        1, 4, (1, 3)
    )


def test_remove_dead_leader_from_isr():
    """A dead leader that was not replaced (no clean candidate) becomes NO_LEADER."""
    assert remove_replica_from_isr(LeaderAndIsr(2, 3, (2, 1)), 2) == LeaderAndIsr(
        NO_LEADER, 4, (1,)
    )


def test_remove_keeps_last_isr_member():
    """testLeaderAndIsrWhenEntireIsrOfflineAndUncleanLeaderElectionDisabled: the last ISR
    member is kept (leader -1, epoch + 1) so a clean election can wait for it."""
    assert remove_replica_from_isr(LeaderAndIsr(1, 0, (1,)), 1) == LeaderAndIsr(
        NO_LEADER, 1, (1,)
    )


def test_remove_replica_not_in_isr_is_no_change():
    assert remove_replica_from_isr(LeaderAndIsr(1, 3, (1,)), 2) is None


def test_election_then_removal_reaches_kafka_entire_isr_offline_state():
    """The controller's sequence on a lone ISR member's death with unclean off: the election
    fails, then removeReplicasFromIsr writes leader -1, ISR [dead], epoch + 1 (exactly
    ControllerIntegrationTest's expected state)."""
    state = LeaderAndIsr(1, 0, (1,))
    assert elect_offline([1], state, {0}, unclean_enabled=False).leader_and_isr is None
    assert remove_replica_from_isr(state, 1) == LeaderAndIsr(NO_LEADER, 1, (1,))


# --- AdminUtils.assignReplicasToBrokers (AdminRackAwareTest.testReplicaAssignment) ------------


def test_replica_assignment():
    """AdminRackAwareTest.testReplicaAssignment: RF 0 and RF > brokers are rejected with
    INVALID_REPLICATION_FACTOR; the fixed-start assignment matches Kafka's exactly."""
    brokers = [0, 1, 2, 3, 4]
    with pytest.raises(InvalidReplicationFactorError) as zero:
        assign_replicas_to_brokers(brokers, 10, 0)
    assert zero.value.kafka_error_code == 38
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 5"):
        assign_replicas_to_brokers(brokers, 10, 6)
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0) == expected


def test_replica_assignment_rejects_non_positive_partition_count():
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers([0, 1], 0, 1)


def test_replica_assignment_start_partition_id_numbers_from_there():
    """startPartitionId (AdminZkClient.addPartitions): partitions are numbered from there and
    the first replica rotates with the partition id; the follower shift restarts from the
    fixed start index (Kafka's loop only bumps it at multiples of the broker count)."""
    tail = assign_replicas_to_brokers(
        [0, 1, 2, 3, 4], 4, 3, fixed_start_index=0, start_partition_id=6
    )
    assert tail == {6: [1, 2, 3], 7: [2, 3, 4], 8: [3, 4, 0], 9: [4, 0, 1]}


def test_replica_assignment_seeded_is_deterministic_and_balanced():
    """With a seeded generator the placement repeats; every partition has distinct replicas
    and the preferred leaders are spread evenly (n partitions over n brokers: one each)."""
    brokers = [1, 2, 3]
    first = assign_replicas_to_brokers(brokers, 6, 3, rng=random.Random(7))
    assert first == assign_replicas_to_brokers(brokers, 6, 3, rng=random.Random(7))
    for replicas in first.values():
        assert len(set(replicas)) == 3
    assert Counter(replicas[0] for replicas in first.values()) == {1: 2, 2: 2, 3: 2}


def test_replica_assignment_single_broker():
    assert assign_replicas_to_brokers([7], 3, 1) == {0: [7], 1: [7], 2: [7]}

