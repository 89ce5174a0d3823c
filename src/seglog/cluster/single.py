"""A cluster of one: the :class:`~seglog.cluster.seam.PartitionSeam` of a broker without
ZooKeeper.

The broker is the only live broker, the controller, and the only replica and leader of every
partition, in leader epoch 0 since the partition was created (as a KRaft controller makes a new
partition's first leader: ``PartitionRegistration.leaderEpoch`` 0). Its metadata is the local
Store's topics. The ISR is this broker alone, so an acks=-1 append is acknowledged as soon as it
is written (the high watermark follows the log end offset), whatever the topic's
``min.insync.replicas``: Kafka 4.4 checks min(min.insync.replicas, replication factor), as the
real one-node Kafka answers.

The logs of a lone broker keep no leader-epoch cache (they are not replicated): the epoch
lookups answer as Kafka's ``LeaderEpochFileCache.endOffsetFor`` does over a cache holding one
entry, epoch 0 from the log start offset (:meth:`SingleReplica.end_offset_for_epoch`).

Used on the broker's event loop thread; topic creation and deletion run on worker threads
through ``run_blocking``.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterator, Mapping, Sequence

from .. import error_codes as codes
from .. import errors
from ..security.acl import AclBinding
from ..security.acl_file import AclFileStore
from ..security.acl_store import AclStore
from ..storage import checkpoints
from ..types import TopicPartition
from . import placement, reassignment, zk_data
from .coordinators import CoordinatorAnswer
from .placement import ManualAssignment
from .seam import LeadershipListener, PartitionSeam

log = logging.getLogger("seglog.cluster.single")

__all__ = ["SingleBroker", "SingleReplica", "LEADER_EPOCH", "UNDEFINED_EPOCH",
           "UNDEFINED_EPOCH_OFFSET"]

#: The leader epoch of every partition of a lone broker.
LEADER_EPOCH = 0
#: Kafka's ``LeaderEpochFileCache.UNDEFINED_EPOCH`` / ``UNDEFINED_EPOCH_OFFSET``.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

#: The internal topics the Store creates on first use, and its attribute for each one's count.
_INTERNAL_TOPIC_COUNTS = {"__consumer_offsets": "offsets_topic_partitions",
                          "__transaction_state": "transaction_state_partitions",
                          "__share_group_state": "share_state_partitions"}


@dataclass(slots=True, eq=False)
class SingleReplica:
    """The lone broker's replica of one partition: always the leader, epoch 0."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    log: Any
    leader_epoch: int = LEADER_EPOCH

    @property
    def is_leader(self) -> bool:
        """Always: the lone broker leads every partition."""
        return True

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as ``LeaderEpochFileCache.endOffsetFor`` answers over a
        cache holding only epoch 0: the log end offset for it, ``(-1, -1)`` for an undefined
        or later epoch (there is no earlier one)."""
        if epoch == LEADER_EPOCH:
            return LEADER_EPOCH, self.log.end_offset
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


class _States(Mapping[TopicPartition, zk_data.PartitionState]):
    """Every partition's state on a lone broker, computed on lookup from the Store."""

    def __init__(self, single: "SingleBroker"):
        self._single = single

    def __getitem__(self, tp: TopicPartition) -> zk_data.PartitionState:
        count = self._single.partition_count(tp.topic)
        if count is None or not 0 <= tp.partition < count:
            raise KeyError(tp)
        me = self._single.broker_id
        return zk_data.PartitionState(leader=me, leader_epoch=LEADER_EPOCH, isr=(me,),
                                      controller_epoch=0)

    def __iter__(self) -> Iterator[TopicPartition]:
        for name, assignment in self._single.assignments.items():
            for index in assignment.partitions:
                yield TopicPartition(name, index)

    def __len__(self) -> int:
        return sum(len(a.partitions) for a in self._single.assignments.values())


class SingleBroker(PartitionSeam):
    """The seam of a broker without ZooKeeper (see the module docstring).

    ``store``: the broker's Store; ``broker_id``, ``host``, ``port``: its id and advertised
    listener; ``endpoints``: every advertised listener as ``(name, host, port)`` (empty: the
    one listener ``host:port``); ``notify``: wakes the broker's long polls; ``run_blocking``: runs a blocking
    call on a worker thread; ``persist_overrides(topic_id, config, overrides)``: keeps a
    created topic's config overrides (the broker's dynamic config file)."""

    def __init__(self, *, store: Any, broker_id: int, host: str, port: int,
                 endpoints: tuple[tuple[str, str, int], ...] = (),
                 notify: Callable[[], None],
                 run_blocking: Callable[..., Awaitable[Any]],
                 persist_overrides: Callable[[str, Any, Mapping[str, Any]], None]
                 | None = None):
        self.store = store
        self.broker_id = broker_id
        self._info = zk_data.BrokerInfo(broker_id=broker_id, host=host, port=port, rack=None,
                                        epoch=0, endpoints=endpoints)
        self._notify = notify
        self._run_blocking = run_blocking
        self._persist_overrides = persist_overrides
        self._states = _States(self)
        self._names_by_id: dict[uuid.UUID, tuple[str, Any]] = {}

    # --- the metadata view -------------------------------------------------------------

    @property
    def live_brokers(self) -> Mapping[int, zk_data.BrokerInfo]:
        return {self.broker_id: self._info}

    @property
    def controller_id(self) -> int | None:
        return self.broker_id

    @property
    def assignments(self) -> Mapping[str, zk_data.TopicAssignment]:
        out = {}
        me = [self.broker_id]
        store = self.store
        for name in store.topics():
            try:
                topic = store.topic(name)
            except errors.SeglogError:
                continue  # deleted meanwhile
            out[name] = zk_data.TopicAssignment(
                topic=name, topic_id=_topic_uuid(topic),
                partitions={i: list(me) for i in range(topic.partitions)})
        return out

    @property
    def states(self) -> Mapping[TopicPartition, zk_data.PartitionState]:
        return self._states

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the local topic whose id is ``topic_id``, or None: a cached map,
        rebuilt from the Store only when an id is not found or names a topic that is gone
        (so a Fetch or Produce by id costs a dict lookup)."""
        if topic_id is None:
            return None
        known = self._names_by_id.get(topic_id)
        if known is not None and self._is_current(*known):
            return known[0]
        names: dict[uuid.UUID, tuple[str, Any]] = {}
        for other in self.store.topics():
            try:
                topic = self.store.topic(other)
            except errors.SeglogError:
                continue
            found = _topic_uuid(topic)
            if found is not None:
                names[found] = (other, topic)
        self._names_by_id = names
        known = names.get(topic_id)
        return None if known is None else known[0]

    def _is_current(self, name: str, topic: Any) -> bool:
        try:
            return self.store.topic(name) is topic
        except errors.SeglogError:
            return False

    def partition_count(self, name: str) -> int | None:
        """Topic ``name``'s partition count, None when the Store has no such topic; an
        internal topic has its configured count before it exists (the Store creates it on
        first use)."""
        try:
            return int(self.store.topic(name).partitions)
        except errors.SeglogError:
            attribute = _INTERNAL_TOPIC_COUNTS.get(name)
            return None if attribute is None else int(getattr(self.store, attribute))

    def internal_partitions(self, topic: str, default_count: int) -> int:
        count = self.partition_count(topic)
        return default_count if not count else count

    # --- the leader's data path ----------------------------------------------------------

    def leader_replica(self, tp: TopicPartition) -> SingleReplica | None:
        """The replica of ``tp`` (always led here), None when there is no such partition;
        an internal topic is created on first use, as the Store's coordinators do."""
        try:
            log_ = self._topic(tp.topic).log(tp.partition)
        except (errors.SeglogError, IndexError, ValueError):
            return None
        return SingleReplica(tp, (self.broker_id,), log_)

    def ensure_internal_topic(self, topic: str) -> None:
        """Create ``__consumer_offsets`` or ``__transaction_state`` with the Store's
        configured partition count unless it exists."""
        self._topic(topic)

    def _topic(self, name: str) -> Any:
        try:
            return self.store.topic(name)
        except errors.UnknownTopicOrPartitionError:
            count = self.partition_count(name)
            if name not in _INTERNAL_TOPIC_COUNTS or count is None:
                raise
        try:
            return self.store.create_internal_topic(name, count)
        except errors.TopicExistsError:
            return self.store.topic(name)  # made meanwhile by the Store's own first use

    def check_leader_epoch(self, replica: Any, current_leader_epoch: int) -> int:
        if current_leader_epoch == -1 or current_leader_epoch == LEADER_EPOCH:
            return codes.NONE
        if current_leader_epoch < LEADER_EPOCH:
            return codes.FENCED_LEADER_EPOCH
        return codes.UNKNOWN_LEADER_EPOCH

    def diverging_epoch(self, replica: Any, last_fetched_epoch: int,
                        fetch_offset: int) -> tuple[int, int] | None:
        return None  # there are no followers

    def follower_fetched(self, replica: Any, replica_id: int, fetch_offset: int,
                         leader_end_offset: int, follower_log_start_offset: int) -> None:
        return None  # there are no followers

    def check_acks_all_before_append(self, replica: Any) -> int:
        # Kafka 4.4's effective min ISR is min(min.insync.replicas, replication factor): one
        # here, which the ISR of this broker always meets.
        return codes.NONE

    def after_leader_append(self, replica: Any) -> None:
        return None  # the high watermark follows the log end offset by itself

    def acks_all_status(self, replica: Any, required_offset: int) -> int | None:
        return codes.NONE  # the ISR is this broker: written is replicated

    async def wait_acks_all(self, replica: Any, required_offset: int, timeout_s: float) -> int:
        return codes.NONE  # the ISR is this broker: written is replicated

    def notify_readable(self) -> None:
        self._notify()

    # --- topics ----------------------------------------------------------------------------

    def assign_replicas(self, partitions: int, replication_factor: int
                        ) -> dict[int, list[int]]:
        if replication_factor > 1:
            raise errors.InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                "1 broker(s) are registered or some brokers have all their log directories "
                "cordoned.")
        return {i: [self.broker_id] for i in range(partitions)}

    def plan_topic(self, *, num_partitions: int, replication_factor: int,
                   manual: ManualAssignment | None, default_partitions: int,
                   default_replication_factor: int) -> dict[int, list[int]]:
        return placement.single_topic_plan(
            self.broker_id, num_partitions=num_partitions,
            replication_factor=replication_factor, manual=manual,
            default_partitions=default_partitions,
            default_replication_factor=default_replication_factor)

    def plan_new_partitions(self, name: str, *, current: int, count: int,
                            manual: Sequence[Sequence[int]] | None) -> dict[int, list[int]]:
        return placement.single_new_partitions_plan(self.broker_id, current=current,
                                                    count=count, manual=manual)

    def assign_new_partitions(self, name: str, count: int) -> dict[int, list[int]]:
        current = self.partition_count(name) or 0
        return {i: [self.broker_id] for i in range(current, count)}

    async def create_topic(self, name: str, assignment: Mapping[int, list[int]],
                           config: Any, overrides: Mapping[str, Any], *,
                           timeout_s: float) -> uuid.UUID:
        # Always on a worker thread (issue 23): a small topic costs a registry write and an
        # fsync, and a CreateTopics of 550 topics of 16 partitions made on the event loop
        # held every other client for 7.6 s.
        made = await self._run_blocking(self.store.create_topic, name, len(assignment), config)
        if overrides and self._persist_overrides is not None:
            self._persist_overrides(made.topic_id, config, overrides)
        return checkpoints.uuid_from_kafka_str(made.topic_id)

    async def delete_topic(self, name: str, *, timeout_s: float) -> bool:
        await self._run_blocking(self.store.delete_topic, name)
        return True

    async def add_partitions(self, name: str, added: Mapping[int, list[int]], *,
                             timeout_s: float) -> None:
        current = self.partition_count(name)
        if current is None:
            raise errors.UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        await self._run_blocking(self.store.create_partitions, name, current + len(added))

    async def auto_create_topic(self, name: str, *, partitions: int,
                                replication_factor: int) -> int:
        # Kafka's KRaft broker answers UNKNOWN_TOPIC_OR_PARTITION while the topic it asked
        # the controller for is created (the client asks again).
        try:
            await self._run_blocking(self.store.create_topic, name, partitions)
            log.info("Auto-created topic %s with %d partitions (auto.create.topics.enable)",
                     name, partitions)
        except errors.TopicExistsError:
            pass  # created by another request meanwhile
        except errors.InvalidTopicError:
            return codes.INVALID_TOPIC_EXCEPTION  # collides with an existing topic once '.' and '_' unify
        except (errors.SeglogError, OSError):
            pass  # Kafka's metadata request does not see its controller's failures either
        return codes.UNKNOWN_TOPIC_OR_PARTITION

    # --- config changes ------------------------------------------------------------------

    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Nothing to tell: the handler applies the change to the only broker's Store."""

    async def alter_broker_configs(self, broker_id: int | None,
                                   configs: Mapping[str, str]) -> None:
        """Nothing to tell: the handler applies the layer to the only broker."""

    def acl_store(self, on_change: Callable[[frozenset[AclBinding]], None]) -> AclStore:
        """The ACL file of the data directory (nothing changes it but this broker, so
        ``on_change`` is never called)."""
        return AclFileStore(self.store.path, self._run_blocking)

    def add_broker_config_listener(self, listener: Callable[[bool, dict[str, str]], None]
                                   ) -> None:
        """Never called: the lone broker's dynamic layers are its own (its data directory's
        ``seglog-broker-configs.json``)."""

    # --- coordinators --------------------------------------------------------------------

    async def find_coordinator(self, topic: str, key: str, *, partitions: int,
                               replication_factor: int, topic_config: Mapping[str, str]
                               ) -> CoordinatorAnswer:
        """This broker coordinates everything (the Store creates the internal topic on
        first use, with its own partition count and config)."""
        return CoordinatorAnswer(codes.NONE, self.broker_id, self._info.host, self._info.port)

    def coordinator_partitions(self, topic: str, *,
                               load: Callable[[int, int], Awaitable[None]],
                               unload: Callable[[int], None]) -> "LocalCoordinatorPartitions":
        """Every partition of ``topic``, led here in epoch 0 for good: its ``start`` loads
        those that exist (a topic made later has nothing to load)."""
        del unload  # never called: the lone broker never stops leading
        return LocalCoordinatorPartitions(self, topic, load)

    def txn_marker_sender(self, coordinator: Any, *,
                          run_blocking: Callable[..., Awaitable[Any]],
                          request_timeout_ms: int, on_written: Callable[[], None]) -> Any:
        """None: this broker leads every partition of every transaction, so the coordinator
        writes its markers itself as the transaction ends."""
        return None

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        """The lone broker leads every partition from the start and forever: the listener is
        told nothing (a coordinator loads everything at start)."""
        del listener  # never told anything: leadership never changes here

    def finalized_features_store(self, on_change: Callable[[int, dict[str, int]], None]
                                 ) -> Any:
        """The finalized features file of the data directory
        (:class:`~seglog.cluster.features_store.FileFeatureStore`); nothing else changes it,
        so ``on_change`` is never called."""
        from .features_store import FileFeatureStore

        del on_change
        return FileFeatureStore(self.store.path, self._run_blocking)

    # --- leader elections and partition reassignments ------------------------------------

    async def elect_leaders(self, election_type: int, partitions: Sequence[TopicPartition], *,
                            timeout_s: float) -> dict[TopicPartition, tuple[int, str | None]]:
        """ELECTION_NOT_NEEDED for every partition: this broker, the only replica, leads it
        already (Kafka 4.4's one-node answer, for both election types)."""
        del election_type, timeout_s  # nothing to elect on a cluster of one
        return {tp: (codes.ELECTION_NOT_NEEDED, codes.message(codes.ELECTION_NOT_NEEDED))
                for tp in partitions}

    async def alter_partition_reassignments(
            self, targets: Sequence[tuple[TopicPartition, tuple[int, ...] | None]], *,
            allow_replication_factor_change: bool, timeout_s: float
    ) -> list[tuple[int, str | None]]:
        """Kafka 4.4's one-node answers: a target of this broker alone is a no-op success,
        any other broker INVALID_REPLICA_ASSIGNMENT (no such broker is registered); a
        cancellation NO_REASSIGNMENT_IN_PROGRESS (none is ever in progress)."""
        del timeout_s  # answered at once
        results: list[tuple[int, str | None]] = []
        for _tp, target in targets:
            if target is None:
                results.append((codes.NO_REASSIGNMENT_IN_PROGRESS, None))
                continue
            result = reassignment.check_lone_target(self.broker_id, target)
            if result[0] == codes.NONE:
                result = reassignment.check_replication_factor(
                    reassignment.ReplicaAssignment((self.broker_id,)), target,
                    allow_change=allow_replication_factor_change)
            results.append(result)
        return results


def _topic_uuid(topic: Any) -> uuid.UUID | None:
    try:
        return checkpoints.uuid_from_kafka_str(topic.topic_id)
    except (errors.SeglogError, ValueError, TypeError):
        return None


class LocalCoordinatorPartitions:
    """A lone broker's :class:`~seglog.cluster.seam.CoordinatorPartitionsView`: every
    partition of ``topic`` is led here in epoch 0, from :meth:`start` (which loads the ones
    that exist, in order) to the end; a partition whose load fails stays offline alone
    (:attr:`failed`)."""

    def __init__(self, single: SingleBroker, topic: str,
                 load: Callable[[int, int], Awaitable[None]]):
        self._single = single
        self.topic = topic
        self._load = load
        #: ``{partition: why}``: the partitions whose load failed at start. Kafka's
        #: ``CoordinatorRuntime`` moves such a partition to FAILED and answers
        #: NOT_COORDINATOR for it; nothing loads it again until the broker restarts (after
        #: the operator repaired its log, see docs/server.md).
        self.failed: dict[int, str] = {}

    async def start(self) -> None:
        """Load every partition of the topic that exists now (the Store read them at open;
        the coordinator's own state, such as a classic group's members, comes from here).
        A partition whose load raises is logged with the reason (its partition, offset and
        what is wrong) and left out; the others load and the broker serves."""
        try:
            count = int(self._single.store.topic(self.topic).partitions)
        except errors.SeglogError:
            return  # not made yet: nothing to load
        for partition in range(count):
            try:
                await self._load(partition, LEADER_EPOCH)
            except Exception as exc:  # noqa: BLE001 - one bad partition must not stop the broker
                self.failed[partition] = f"{type(exc).__name__}: {exc}"
                log.error("loading %s-%d failed; not coordinating it (NOT_COORDINATOR) "
                          "until its log is repaired and the broker restarts: %s",
                          self.topic, partition, self.failed[partition])

    def error_for(self, partition: int) -> int:
        """NONE: every partition is served here, except one whose load failed
        (NOT_COORDINATOR, as Kafka answers for a FAILED coordinator partition)."""
        return codes.NOT_COORDINATOR if partition in self.failed else codes.NONE

    def leader_epoch(self, partition: int) -> int | None:
        """0: the one epoch of a lone broker."""
        return LEADER_EPOCH

    def owned_partitions(self) -> frozenset[int]:
        """Every partition of the topic (its configured count before it exists) but those
        whose load failed."""
        return frozenset(range(self._single.partition_count(self.topic) or 0)) \
            - self.failed.keys()

    async def close(self) -> None:
        """Nothing to stop."""
