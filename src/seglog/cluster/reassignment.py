"""Partition reassignments (KIP-455) as Kafka 2.8's ZooKeeper controller keeps them: the
replica sets of a reassigning partition, the checks of a request, and when it is complete.

A partition's assignment in ``/brokers/topics/<t>`` carries, while it is reassigned,
``replicas`` = RS (target first, then the original replicas that are leaving),
``adding_replicas`` = AR (target - original) and ``removing_replicas`` = RR (original -
target); ORS, the original set, is RS - AR, which is why RS is only set to the target at the
very end (Kafka's ``ReplicaAssignment.reassignTo``, ``KafkaController
.onPartitionReassignment``, phase U, A and B). Pure functions: no I/O, no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from .. import error_codes as codes

__all__ = ["ReplicaAssignment", "check_cluster_target", "check_lone_target",
           "check_replication_factor", "reassignment_complete"]


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition's ``replicas`` (RS), ``adding`` (AR) and ``removing`` (RR)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment (RS - AR)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas after it (RS - RR)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def reassigning(self) -> bool:
        """Whether a reassignment is in progress."""
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> "ReplicaAssignment":
        """Kafka's ``reassignTo``: RS = TRS + ORS (without repeats), AR = RS - ORS,
        RR = RS - TRS; a new reassignment replaces one in progress (from the same ORS)."""
        origin = self.origin
        full = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def cancelled(self) -> "ReplicaAssignment":
        """Back to ORS (a cancellation: Kafka cannot restore the original order when the
        target overlapped it, nor can seglog)."""
        return ReplicaAssignment(self.origin)


def check_cluster_target(current: ReplicaAssignment, target: Sequence[int],
                         live: Iterable[int]) -> tuple[int, str | None]:
    """Kafka 2.8's ``validateReplicas`` of a reassignment's target: NONE, or
    INVALID_REPLICA_ASSIGNMENT with its message."""
    replicas = list(target)
    shown = "List(" + ", ".join(map(str, replicas)) + ")"
    if not replicas:
        return (codes.INVALID_REPLICA_ASSIGNMENT,
                "Empty replica list specified in partition reassignment.")
    if len(set(replicas)) != len(replicas):
        return (codes.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica ids in partition reassignment replica list: {shown}")
    if any(r < 0 for r in replicas):
        return codes.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {shown}"
    live_ids = set(live)
    adding = current.reassign_to(replicas).adding
    if not set(adding) <= live_ids:
        return (codes.INVALID_REPLICA_ASSIGNMENT,
                "Replica assignment has brokers that are not alive. Replica list: "
                f"Vector({', '.join(map(str, adding))}), live broker list: "
                f"Set({', '.join(map(str, sorted(live_ids)))})")
    return codes.NONE, None


def check_lone_target(node_id: int, target: Sequence[int]) -> tuple[int, str | None]:
    """Kafka 4.4's ``validateManualPartitionAssignment`` of a reassignment's target on a
    one-node cluster (its only registered broker is ``node_id``)."""
    replicas = list(target)
    if not replicas:
        return (codes.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for broker_id in replicas:
        if broker_id != node_id:
            return (codes.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker_id}, but no "
                    "such broker is registered.")
        if broker_id in seen:
            return (codes.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker_id} more "
                    "than once.")
        seen.add(broker_id)
    return codes.NONE, None


def check_replication_factor(current: ReplicaAssignment, target: Sequence[int], *,
                             allow_change: bool) -> tuple[int, str | None]:
    """KIP-860: with ``allow_change`` false, INVALID_REPLICATION_FACTOR when the target's size
    differs from the partition's current target's (Kafka 4.4's message), else NONE."""
    size = len(current.target)
    if not allow_change and len(target) != size:
        return (codes.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {size} to {len(target)}")
    return codes.NONE, None


def reassignment_complete(assignment: ReplicaAssignment, isr: Iterable[int]) -> bool:
    """Kafka's ``isReassignmentComplete``: every target replica is in the ISR."""
    return set(assignment.target) <= set(isr)
