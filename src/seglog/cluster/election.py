"""Kafka's partition leader election algorithms and replica placement, as pure functions.

This is the decision half of the ZooKeeper-era controller (Kafka 2.8.2's
``PartitionLeaderElectionAlgorithms`` in ``PartitionStateMachine.scala``, ``Election.scala``,
``ReplicaStateMachine.removeReplicasFromIsr`` and ``AdminUtils.assignReplicasToBrokers``); the
controller (:mod:`seglog.cluster.controller`) reads the inputs from ZooKeeper, calls these and
writes the results back with its fences. Nothing here does I/O or keeps state.

The rules (research R§2.3), all scanning the **assignment order** (its head is the preferred
replica), never "the most caught up" replica:

- *offline partition*: the first replica that is live and in the ISR; the new ISR is the live
  part of the old one. With no live ISR member, an **unclean** election (only when the topic or
  broker default allows it) takes the first live replica and the ISR becomes ``[leader]``.
  Otherwise there is no leader and the state is left alone.
- *new partition*: leader = the first live replica, ISR = every live replica, leader epoch 0.
- *preferred replica*: the assignment's head, only if it is live and in the ISR.
- *controlled shutdown*: the first live, in-ISR replica not shutting down; the ISR drops the
  shutting-down brokers.
- *reassignment*: the first replica of the target assignment that is live and in the ISR.
- *dead replica*: it leaves the ISR unless it is the last member (kept, so a clean election can
  wait for exactly that broker); if it led, the leader becomes ``NO_LEADER``.

Every decision that changes leader or ISR bumps the leader epoch by one
(``LeaderAndIsr.newLeaderAndIsr``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import AbstractSet, Iterable, Mapping, Sequence

from seglog.errors import InvalidPartitionsError, InvalidReplicationFactorError

NO_LEADER = -1
"""``state.leader`` when no replica can lead (Kafka's ``LeaderAndIsr.NoLeader``)."""

INITIAL_LEADER_EPOCH = 0
"""The leader epoch a new partition starts at (``LeaderAndIsr.initialLeaderEpoch``)."""


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR (Kafka's ``LeaderAndIsr`` without zkVersion,
    which belongs to the znode the controller reads and writes, not to the decision)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> "LeaderAndIsr":
        """The next state: ``leader`` and ``isr`` at ``leader_epoch + 1``."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr))


@dataclass(frozen=True)
class ElectionResult:
    """The outcome of one election (Kafka's ``ElectionResult``).

    ``leader_and_isr`` is None when no leader could be chosen (nothing is to be written);
    ``live_replicas`` are the replicas that would hear about it (assignment order);
    ``unclean`` is True when the leader came from outside the ISR (Kafka marks
    ``UncleanLeaderElectionsPerSec`` then)."""

    leader_and_isr: LeaderAndIsr | None
    live_replicas: tuple[int, ...]
    unclean: bool = False


# --- the four algorithms (PartitionLeaderElectionAlgorithms) --------------------------------


def offline_partition_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: AbstractSet[int],
    *,
    unclean_enabled: bool,
) -> int | None:
    """The leader for a partition whose leader is gone: the first replica in ``assignment``
    that is live and in ``isr``; failing that, when ``unclean_enabled``, the first live
    replica; else None (``offlinePartitionLeaderElection``)."""
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica
    return None


def reassign_partition_leader(
    reassignment: Sequence[int], isr: Sequence[int], live_replicas: AbstractSet[int]
) -> int | None:
    """The first replica of the target assignment that is live and in the ISR
    (``reassignPartitionLeaderElection``); None when there is none."""
    for replica in reassignment:
        if replica in live_replicas and replica in isr:
            return replica
    return None


def preferred_replica_leader(
    assignment: Sequence[int], isr: Sequence[int], live_replicas: AbstractSet[int]
) -> int | None:
    """The assignment's head when it is live and in the ISR, else None
    (``preferredReplicaPartitionLeaderElection``)."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: AbstractSet[int],
    shutting_down: AbstractSet[int],
) -> int | None:
    """The first replica in assignment order that is live, in the ISR and not shutting down
    (``controlledShutdownPartitionLeaderElection``); None when there is none."""
    for replica in assignment:
        if replica in live_replicas and replica in isr and replica not in shutting_down:
            return replica
    return None


# --- whole decisions (Election.scala, initializeLeaderAndIsrForPartitions, removeReplicasFromIsr)


def live_replicas(
    assignment: Sequence[int], live_brokers: AbstractSet[int] | Mapping[int, object]
) -> tuple[int, ...]:
    """The replicas of ``assignment`` whose brokers are in ``live_brokers`` (a set of ids or a
    mapping keyed by id), in assignment order."""
    return tuple(replica for replica in assignment if replica in live_brokers)


def elect_offline(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_brokers: AbstractSet[int],
    *,
    unclean_enabled: bool,
    ignore_isr: bool = False,
) -> ElectionResult:
    """Elect a leader for a new-leader-needed (offline or online) partition
    (``Election.leaderForOffline``).

    The new ISR is the live part of the old ISR when the leader came from it, else
    ``[leader]`` (unclean).

    ``ignore_isr`` is the test-only negative control ``elect_most_recent``: the first live
    replica leads whatever the ISR says, joined by the live ISR members, and the election is
    reported *clean* (a controller with this bug believes it is right), so a checker that
    excuses losses after unclean elections still has to catch it. Never set it otherwise."""
    live = live_replicas(assignment, live_brokers)
    live_set = frozenset(live)
    if ignore_isr:
        if not live:
            return ElectionResult(None, live)
        first = live[0]
        others = tuple(r for r in current.isr if r in live_set and r != first)
        return ElectionResult(current.new_leader_and_isr(first, (first,) + others), live)
    leader = offline_partition_leader(
        assignment, current.isr, live_set, unclean_enabled=unclean_enabled
    )
    if leader is None:
        return ElectionResult(None, live)
    if leader in current.isr:
        new_isr = tuple(replica for replica in current.isr if replica in live_set)
        unclean = False
    else:
        new_isr = (leader,)
        unclean = True
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), live, unclean)


def elect_preferred(
    assignment: Sequence[int], current: LeaderAndIsr, live_brokers: AbstractSet[int]
) -> ElectionResult:
    """Move leadership to the preferred replica, ISR unchanged
    (``Election.leaderForPreferredReplica``); no leader when the head is dead or out of the
    ISR."""
    live = live_replicas(assignment, live_brokers)
    leader = preferred_replica_leader(assignment, current.isr, frozenset(live))
    if leader is None:
        return ElectionResult(None, tuple(assignment))
    return ElectionResult(current.new_leader_and_isr(leader, current.isr), tuple(assignment))


def elect_controlled_shutdown(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_or_shutting_down: AbstractSet[int],
    shutting_down: AbstractSet[int],
) -> ElectionResult:
    """Move leadership off shutting-down brokers (``Election.leaderForControlledShutdown``):
    the new ISR drops every shutting-down broker."""
    live = live_replicas(assignment, live_or_shutting_down)
    leader = controlled_shutdown_leader(assignment, current.isr, frozenset(live), shutting_down)
    if leader is None:
        return ElectionResult(None, live)
    new_isr = tuple(replica for replica in current.isr if replica not in shutting_down)
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), live)


def elect_reassign(
    target_replicas: Sequence[int], current: LeaderAndIsr, live_brokers: AbstractSet[int]
) -> ElectionResult:
    """Leader for a partition being reassigned, ISR unchanged
    (``Election.leaderForReassign``)."""
    live = live_replicas(target_replicas, live_brokers)
    leader = reassign_partition_leader(target_replicas, current.isr, frozenset(live))
    if leader is None:
        return ElectionResult(None, tuple(target_replicas))
    return ElectionResult(
        current.new_leader_and_isr(leader, current.isr), tuple(target_replicas)
    )


def initial_leader_and_isr(
    assignment: Sequence[int], live_brokers: AbstractSet[int]
) -> LeaderAndIsr | None:
    """A new partition's first state: leader = the first live replica, ISR = all live
    replicas, epoch 0 (``initializeLeaderAndIsrForPartitions``); None when no replica is
    live (the partition stays New until a broker of it registers)."""
    live = live_replicas(assignment, live_brokers)
    if not live:
        return None
    return LeaderAndIsr(live[0], INITIAL_LEADER_EPOCH, live)


def remove_replica_from_isr(current: LeaderAndIsr, replica_id: int) -> LeaderAndIsr | None:
    """The state after ``replica_id`` went offline (``doRemoveReplicasFromIsr``): it leaves the
    ISR unless it is the last member (kept, so a clean election can wait for it), the leader
    becomes ``NO_LEADER`` if it led, and the epoch goes up by one. None when the replica is
    not in the ISR (nothing to write)."""
    if replica_id not in current.isr:
        return None
    new_leader = NO_LEADER if current.leader == replica_id else current.leader
    new_isr: tuple[int, ...]
    if len(current.isr) == 1:
        new_isr = current.isr
    else:
        new_isr = tuple(replica for replica in current.isr if replica != replica_id)
    return current.new_leader_and_isr(new_leader, new_isr)


# --- replica placement for new topics (AdminUtils.assignReplicasToBrokers, rack-unaware) ----


def _replica_index(
    first_replica_index: int, second_replica_shift: int, replica_index: int, broker_count: int
) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (broker_count - 1)
    return (first_replica_index + shift) % broker_count


def assign_replicas_to_brokers(
    broker_ids: Sequence[int],
    partition_count: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's rack-unaware replica placement: partition -> replicas, preferred leader first.

    ``broker_ids`` in the order Kafka passes them (sorted by id). The first replica of
    partition ``p`` is broker ``(p + start) % n``; the followers are shifted by a per-round
    amount so replicas spread evenly. ``fixed_start_index >= 0`` fixes both the start index and
    the initial shift (deterministic, as Kafka's tests use it); otherwise both are drawn from
    ``rng`` (a ``random.Random``; the module's generator when None). ``start_partition_id``
    numbers the partitions from there (adding partitions to a topic).

    Raises InvalidPartitionsError when ``partition_count <= 0`` and
    InvalidReplicationFactorError when ``replication_factor <= 0`` or larger than the number
    of brokers."""
    if partition_count <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(broker_ids):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(broker_ids)}."
        )
    brokers = list(broker_ids)
    broker_count = len(brokers)
    draw = rng if rng is not None else random
    start_index = fixed_start_index if fixed_start_index >= 0 else draw.randrange(broker_count)
    next_replica_shift = (
        fixed_start_index if fixed_start_index >= 0 else draw.randrange(broker_count)
    )
    current_partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(partition_count):
        if current_partition_id > 0 and current_partition_id % broker_count == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % broker_count
        replicas = [brokers[first_replica_index]]
        for j in range(replication_factor - 1):
            replicas.append(
                brokers[_replica_index(first_replica_index, next_replica_shift, j, broker_count)]
            )
        assignment[current_partition_id] = replicas
        current_partition_id += 1
    return assignment

