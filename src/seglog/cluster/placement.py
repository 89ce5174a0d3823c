"""Where a new topic's or a grown topic's partitions go: the request's manual assignment,
checked, or the cluster's placement; with Kafka's checks and messages word for word.

Two rule books, one per kind of cluster, chosen by the seam (never by a handler):

- a lone broker (:class:`~seglog.cluster.single.SingleBroker`) checks as Kafka 4.4's KRaft
  controller does on a one-node cluster (``ReplicationControlManager.createTopic``,
  ``validateManualPartitionAssignment``);
- a ZooKeeper cluster (:class:`~seglog.cluster.replica_manager.ReplicaManager`) checks as
  Kafka 2.8's ``ZkAdminManager.createTopics`` and ``AdminZkClient
  .validateReplicaAssignment``, and places replicas by Kafka's rack-unaware assignment.

A refusal is a :mod:`seglog.errors` exception whose ``kafka_error_code`` is the answer's.
Pure functions: no I/O, no state.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from .. import errors

__all__ = ["ManualAssignment", "single_topic_plan", "single_new_partitions_plan",
           "cluster_topic_plan", "cluster_new_partitions_plan"]

#: A request's manual assignment: ``(partition index, replica broker ids)`` per partition.
ManualAssignment = Sequence[tuple[int, Sequence[int]]]


def _check_single_replicas(broker_ids: Iterable[int], node_id: int) -> None:
    """Kafka's ``validateManualPartitionAssignment`` on a one-node cluster."""
    broker_ids = list(broker_ids)
    if not broker_ids:
        raise errors.InvalidReplicaAssignmentError(
            "The manual partition assignment includes an empty replica list.")
    seen = set()
    for broker_id in broker_ids:
        if broker_id != node_id:
            raise errors.InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.")
        if broker_id in seen:
            raise errors.InvalidReplicaAssignmentError(
                f"The manual partition assignment includes the broker {broker_id} more than "
                "once.")
        seen.add(broker_id)


def single_topic_plan(node_id: int, *, num_partitions: int, replication_factor: int,
                      manual: ManualAssignment | None, default_partitions: int,
                      default_replication_factor: int) -> dict[int, list[int]]:
    """A new topic's assignment on a lone broker (``num_partitions`` /
    ``replication_factor`` -1: the broker's defaults), or the refusal Kafka's KRaft
    controller answers."""
    if manual:
        if replication_factor != -1:
            raise errors.InvalidCreationRequestError(
                "A manual partition assignment was specified, but replication factor was not "
                "set to -1.")
        if num_partitions != -1:
            raise errors.InvalidCreationRequestError(
                "A manual partition assignment was specified, but numPartitions was not set "
                "to -1.")
        indexes = set()
        for index, broker_ids in manual:
            if index in indexes:
                raise errors.InvalidReplicaAssignmentError(
                    f"Found multiple manual partition assignments for partition {index}")
            _check_single_replicas(broker_ids, node_id)
            indexes.add(index)
        if indexes != set(range(len(indexes))):
            raise errors.InvalidReplicaAssignmentError(
                "partitions should be a consecutive 0-based integer sequence")
        return {i: [node_id] for i in range(len(indexes))}
    if replication_factor < -1 or replication_factor == 0:
        raise errors.InvalidReplicationFactorError(
            "Replication factor must be larger than 0, or -1 to use the default value.")
    if num_partitions < -1 or num_partitions == 0:
        raise errors.InvalidPartitionsError(
            "Number of partitions was set to an invalid non-positive value.")
    count = default_partitions if num_partitions == -1 else num_partitions
    factor = default_replication_factor if replication_factor == -1 else replication_factor
    if factor > 1:
        raise errors.InvalidReplicationFactorError(
            f"Unable to replicate the partition {factor} time(s): The target replication "
            f"factor of {factor} cannot be reached because only 1 broker(s) are registered "
            "or some brokers have all their log directories cordoned.")
    return {i: [node_id] for i in range(count)}


def single_new_partitions_plan(node_id: int, *, current: int, count: int,
                               manual: Sequence[Sequence[int]] | None) -> dict[int, list[int]]:
    """The partitions that grow a lone broker's topic from ``current`` to ``count``
    (``manual``: the request's replica list per new partition, checked)."""
    for broker_ids in manual or ():
        _check_single_replicas(broker_ids, node_id)
    return {i: [node_id] for i in range(current, count)}


def cluster_topic_plan(live: Iterable[int], *, num_partitions: int, replication_factor: int,
                       manual: ManualAssignment | None, default_partitions: int,
                       default_replication_factor: int,
                       assign: Callable[[int, int], dict[int, list[int]]]
                       ) -> dict[int, list[int]]:
    """A new topic's assignment in a ZooKeeper cluster: the request's own, checked as Kafka
    2.8's ``ZkAdminManager.createTopics`` checks it against the ``live`` brokers, or
    ``assign(partitions, replication_factor)`` (Kafka's rack-unaware placement; -1: the
    broker's defaults)."""
    live = set(live)
    if manual:
        if replication_factor != -1 or num_partitions != -1:
            raise errors.InvalidCreationRequestError(
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.")
        assignment: dict[int, list[int]] = {}
        for index, broker_ids in manual:
            replicas = list(broker_ids)
            if index in assignment:
                raise errors.InvalidReplicaAssignmentError(
                    f"Found multiple manual partition assignments for partition {index}")
            if not replicas or len(set(replicas)) != len(replicas):
                raise errors.InvalidReplicaAssignmentError(
                    f"Duplicate replica assignment found: {replicas}" if replicas else
                    "The manual partition assignment includes an empty replica list.")
            unknown = [b for b in replicas if b not in live]
            if unknown:
                raise errors.InvalidReplicaAssignmentError(
                    "Unknown broker(s) in replica assignment: "
                    f"{', '.join(map(str, unknown))}.")
            assignment[index] = replicas
        if set(assignment) != set(range(len(assignment))):
            raise errors.InvalidReplicaAssignmentError(
                "partitions should be a consecutive 0-based integer sequence")
        if len({len(r) for r in assignment.values()}) > 1:
            raise errors.InvalidReplicaAssignmentError(
                "All partitions should have the same number of replicas")
        return assignment
    if replication_factor < -1 or replication_factor == 0:
        raise errors.InvalidReplicationFactorError(
            "Replication factor must be larger than 0, or -1 to use the default value.")
    if num_partitions < -1 or num_partitions == 0:
        raise errors.InvalidPartitionsError(
            "Number of partitions was set to an invalid non-positive value.")
    count = default_partitions if num_partitions == -1 else num_partitions
    factor = default_replication_factor if replication_factor == -1 else replication_factor
    return assign(count, factor)


def cluster_new_partitions_plan(live: Iterable[int], *, factor: int, current: int,
                                manual: Sequence[Sequence[int]] | None,
                                assign_new: Callable[[], dict[int, list[int]]]
                                ) -> dict[int, list[int]]:
    """The replicas of the partitions that grow a topic from ``current`` in a ZooKeeper
    cluster: the request's (checked against the ``live`` brokers and partition 0's replica
    count ``factor``, as Kafka 2.8's ``AdminZkClient.validateReplicaAssignment``) or
    ``assign_new()`` (Kafka's placement)."""
    if manual is None:
        return assign_new()
    live = set(live)
    added = {}
    for offset, broker_ids in enumerate(manual):
        replicas = list(broker_ids)
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignmentError(
                f"Duplicate brokers not allowed in replica assignment: {replicas}")
        if len(replicas) != factor:
            raise errors.InvalidReplicaAssignmentError(
                "Inconsistent replication factor between partitions, partition 0 has "
                f"{factor} while partitions [{current + offset}] have replication factors "
                f"[{len(replicas)}], respectively.")
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise errors.InvalidReplicaAssignmentError(
                "Unknown broker(s) in replica assignment: "
                f"{', '.join(map(str, unknown))}.")
        added[current + offset] = replicas
    return added
