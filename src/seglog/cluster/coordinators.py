"""Coordinators in a cluster: which internal partitions this broker coordinates, and when.

Kafka 2.8 places the group coordinator of a group on the leader of its ``__consumer_offsets``
partition (and the transaction coordinator of a transactional id on the leader of its
``__transaction_state`` partition). ``RequestHandlerHelper.onLeadershipChange`` tells the
coordinator when this broker becomes leader (``onElection(partition, leaderEpoch)``: load the
partition's state from the local replica of the log, answering COORDINATOR_LOAD_IN_PROGRESS
meanwhile) or stops leading (``onResignation(partition)``: drop it, answer NOT_COORDINATOR).

:class:`CoordinatorPartitions` is that glue for one internal topic: it listens to the
:class:`~seglog.cluster.replica_manager.ReplicaManager`'s leadership changes
(``add_leadership_listener``) and runs the caller's ``load(partition, leader_epoch)``
(a coroutine function) and ``unload(partition)`` (plain, on the loop), and answers
:meth:`~CoordinatorPartitions.error_for` for the request handlers: NONE, 14 or 16. It knows
nothing of groups or transactions; ``seglog.server.apis.groups`` gives it the loaders. Runs on
the broker's event loop only.

Placement and creation of the internal topics: :func:`coordinator_partition` (Kafka's
``partitionFor``: ``abs(javaHashCode(key)) % partitions``) and :func:`find_coordinator`
(``KafkaApis.handleFindCoordinatorRequest`` of 2.8: the partition's live leader, else
COORDINATOR_NOT_AVAILABLE, creating the topic in ZooKeeper on first use with the configured
replication factor; a factor larger than the live brokers fails the creation, as Kafka's
``INVALID_REPLICATION_FACTOR``, and the answer stays COORDINATOR_NOT_AVAILABLE).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Mapping, NamedTuple, Protocol

from .. import error_codes as codes
from .. import errors
from ..aio import cancel_and_wait
from ..types import TopicPartition
from .seam import LeadershipListener, PartitionSeam, Replica

__all__ = ["CoordinatorPartitions", "CoordinatorAnswer", "LeadershipSource",
           "coordinator_partition", "find_coordinator", "locate_coordinator",
           "TRANSACTION_STATE_TOPIC", "find_transaction_coordinator", "partition_in"]

log = logging.getLogger("seglog.cluster.coordinators")

_LOADING = "loading"
_LOADED = "loaded"


def coordinator_partition(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions`` (a group id or a transactional id)."""
    from ..coordinator.offsets_schema import offsets_partition_for_group

    return offsets_partition_for_group(key, partitions)


class CoordinatorAnswer(NamedTuple):
    """A FindCoordinator answer for one key: ``error_code`` (0 or 15), and on success the
    coordinator's ``node_id``, ``host`` and ``port``; ``error_message`` when the answer has
    its own (None: the error's default message)."""

    error_code: int
    node_id: int = -1
    host: str = ""
    port: int = -1
    error_message: str | None = None


async def find_coordinator(cluster: PartitionSeam, topic: str, key: str, *, partitions: int,
                           replication_factor: int, topic_config: Mapping[str, str]
                           ) -> CoordinatorAnswer:
    """FindCoordinator for ``key``, whose coordinator is the leader of ``topic``'s partition
    for it: the seam's answer (:meth:`~seglog.cluster.seam.PartitionSeam.find_coordinator`;
    a lone broker is every coordinator, a cluster member answers by
    :func:`locate_coordinator`)."""
    answer: CoordinatorAnswer = await cluster.find_coordinator(
        topic, key, partitions=partitions, replication_factor=replication_factor,
        topic_config=topic_config)
    return answer


async def locate_coordinator(cluster: PartitionSeam, topic: str, key: str, *, partitions: int,
                             replication_factor: int, topic_config: Mapping[str, str]
                             ) -> CoordinatorAnswer:
    """Kafka 2.8's FindCoordinator for ``key`` on a cluster member (``cluster``: its
    ReplicaManager): the live leader of ``topic``'s partition for ``key``, else
    COORDINATOR_NOT_AVAILABLE. When ``topic`` does not exist yet it is created in ZooKeeper
    (``partitions`` partitions, ``replication_factor`` replicas over the live brokers,
    ``topic_config``) without waiting, and the answer is COORDINATOR_NOT_AVAILABLE (the client
    asks again)."""
    assignment = cluster.assignments.get(topic)
    if assignment is None:
        await _create_internal_topic(cluster, topic, partitions, replication_factor,
                                     topic_config)
        return CoordinatorAnswer(codes.COORDINATOR_NOT_AVAILABLE)
    tp = TopicPartition(topic, coordinator_partition(key, len(assignment.partitions)))
    state = cluster.states.get(tp)
    if state is None or state.leader < 0:
        return CoordinatorAnswer(codes.COORDINATOR_NOT_AVAILABLE)
    info = cluster.live_brokers.get(state.leader)
    if info is None:
        return CoordinatorAnswer(codes.COORDINATOR_NOT_AVAILABLE)
    return CoordinatorAnswer(codes.NONE, state.leader, info.host, info.port)


async def _create_internal_topic(cluster: PartitionSeam, topic: str, partitions: int,
                                 replication_factor: int, config: Mapping[str, str]) -> None:
    """``KafkaApis.createInternalTopic``: the topic written to ZooKeeper if enough brokers
    are live (else logged, as Kafka's INVALID_REPLICATION_FACTOR: nothing is created and
    FindCoordinator keeps answering COORDINATOR_NOT_AVAILABLE)."""
    try:
        assignment = cluster.assign_replicas(partitions, replication_factor)
    except errors.SeglogError as exc:
        log.warning("broker %d: cannot create %s yet: %s (raise the number of live brokers "
                    "or lower its replication factor)", cluster.broker_id, topic, exc)
        return
    try:
        await cluster.create_topic(topic, assignment, None, dict(config), timeout_s=0)
        log.info("broker %d: created %s (%d partitions, replication factor %d)",
                 cluster.broker_id, topic, partitions, replication_factor)
    except errors.TopicExistsError:
        pass  # another broker's FindCoordinator won the race


class LeadershipSource(Protocol):
    """What :meth:`CoordinatorPartitions.attach` follows: a cluster member's replicas of
    this broker (``partitions``) and their leadership changes (the
    :class:`~seglog.cluster.replica_manager.ReplicaManager`, which imports this module)."""

    @property
    def partitions(self) -> Mapping[TopicPartition, Replica]:
        """This broker's replicas by partition."""
        ...

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        """Call ``listener`` on every leadership change of a replica here."""
        ...


class CoordinatorPartitions:
    """The partitions of internal topic ``topic`` this broker coordinates (see the module
    docstring). ``load(partition, leader_epoch)``: a coroutine function that loads the
    partition's state (it may run blocking work in an executor); ``unload(partition)``:
    drops it (plain, on the loop). Call :meth:`attach` once, on the loop."""

    def __init__(self, topic: str, *, load: Callable[[int, int], Awaitable[None]],
                 unload: Callable[[int], None]):
        self.topic = topic
        self._load = load
        self._unload = unload
        #: partition -> (status, leader epoch)
        self._status: dict[int, tuple[str, int]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._closed = False

    async def start(self) -> None:
        """Nothing to wait for: the loads of the partitions led at :meth:`attach` run as
        tasks, and their requests answer COORDINATOR_LOAD_IN_PROGRESS meanwhile."""

    def attach(self, cluster: LeadershipSource) -> None:
        """Listen to ``cluster``'s leadership changes and take up the partitions of
        ``topic`` it leads already; drop the state of those it does not (a restarted broker
        loaded its whole Store at open)."""
        cluster.add_leadership_listener(self)
        for tp, replica in sorted(cluster.partitions.items()):
            if tp.topic != self.topic:
                continue
            if replica.is_leader:
                self.on_become_leader(tp, replica.leader_epoch)
            else:
                self._safe_unload(tp.partition)

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """This broker leads ``tp`` in ``leader_epoch``: load its state (Kafka's
        ``onElection``); requests for it answer COORDINATOR_LOAD_IN_PROGRESS until done."""
        if tp.topic != self.topic or self._closed:
            return
        partition = tp.partition
        previous = self._tasks.pop(partition, None)
        if previous is not None:
            previous.cancel()
        self._status[partition] = (_LOADING, leader_epoch)
        self._tasks[partition] = asyncio.get_running_loop().create_task(
            self._run_load(partition, leader_epoch),
            name=f"seglog-load-{self.topic}-{partition}")

    async def _run_load(self, partition: int, leader_epoch: int) -> None:
        try:
            await self._load(partition, leader_epoch)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - Kafka logs a failed load; the partition is not served
            log.exception("loading %s-%d (epoch %d) failed; not coordinating it", self.topic,
                          partition, leader_epoch)
            if self._status.get(partition) == (_LOADING, leader_epoch):
                del self._status[partition]
                self._safe_unload(partition)
            return
        finally:
            task = self._tasks.get(partition)
            if task is asyncio.current_task():
                del self._tasks[partition]
        if self._status.get(partition) == (_LOADING, leader_epoch):
            self._status[partition] = (_LOADED, leader_epoch)
            log.info("coordinating %s-%d in epoch %d", self.topic, partition, leader_epoch)
        elif partition not in self._status:
            # Resigned while the load ran in a thread: what it loaded goes again.
            self._safe_unload(partition)

    def on_become_follower(self, tp: TopicPartition) -> None:
        """This broker stopped leading ``tp``: drop its state (Kafka's ``onResignation``);
        requests for it answer NOT_COORDINATOR."""
        if tp.topic != self.topic:
            return
        partition = tp.partition
        task = self._tasks.pop(partition, None)
        if task is not None:
            task.cancel()
        self._status.pop(partition, None)
        self._safe_unload(partition)
        log.info("no longer coordinating %s-%d", self.topic, partition)

    def _safe_unload(self, partition: int) -> None:
        try:
            self._unload(partition)
        except Exception:  # noqa: BLE001 - dropping state must not stop a transition
            log.exception("unloading %s-%d failed", self.topic, partition)

    def error_for(self, partition: int) -> int:
        """NONE when this broker coordinates ``partition`` (loaded), 14 while loading, 16
        when it does not lead it."""
        status = self._status.get(partition)
        if status is None:
            return codes.NOT_COORDINATOR
        return codes.NONE if status[0] == _LOADED else codes.COORDINATOR_LOAD_IN_PROGRESS

    def leader_epoch(self, partition: int) -> int | None:
        """The leader epoch this broker coordinates ``partition`` in (loaded or loading),
        or None (the transaction coordinator's epoch in Kafka)."""
        status = self._status.get(partition)
        return None if status is None else status[1]

    def owned_partitions(self) -> frozenset[int]:
        """The partitions loaded and served here."""
        return frozenset(p for p, (s, _e) in self._status.items() if s == _LOADED)

    async def close(self) -> None:
        """Cancel the loads in progress (the broker stops)."""
        self._closed = True
        tasks = list(self._tasks.values())
        self._tasks.clear()
        await cancel_and_wait(tasks)


#: Kafka's ``Topic.TRANSACTION_STATE_TOPIC_NAME``.
TRANSACTION_STATE_TOPIC = "__transaction_state"


async def find_transaction_coordinator(cluster: PartitionSeam, transactional_id: str,
                                       config: Mapping[str, Any]) -> CoordinatorAnswer:
    """Kafka 2.8's FindCoordinator for a transactional id (key type 1) on a cluster member:
    the live leader of its ``__transaction_state`` partition, the topic created on first use
    with ``transaction.state.log.num.partitions`` / ``transaction.state.log.replication.factor``
    and Kafka's internal config (``TransactionLog``: compacted, ``min.insync.replicas =
    transaction.state.log.min.isr``, no unclean election, uncompressed,
    ``transaction.state.log.segment.bytes``)."""
    return await find_coordinator(
        cluster, TRANSACTION_STATE_TOPIC, transactional_id,
        partitions=int(config.get("transaction.state.log.num.partitions", 50)),
        replication_factor=int(config.get("transaction.state.log.replication.factor", 3)),
        topic_config={"cleanup.policy": "compact",
                      "min.insync.replicas": str(config.get("transaction.state.log.min.isr", 2)),
                      "unclean.leader.election.enable": "false",
                      "compression.type": "uncompressed",
                      "segment.bytes": str(config.get("transaction.state.log.segment.bytes",
                                                      104857600))})


def partition_in(cluster: PartitionSeam, topic: str, key: str) -> int | None:
    """The partition of ``topic`` that coordinates ``key`` in the cluster's metadata (None
    while the topic does not exist in ZooKeeper)."""
    count = cluster.partition_count(topic)
    if not count:
        return None
    return coordinator_partition(key, count)
