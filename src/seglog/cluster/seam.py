"""The partition seam: what every request handler asks of "the cluster", whatever its size.

A lone ``seglog serve`` is a cluster of one. The handlers of :mod:`seglog.server.apis` never
ask which mode they run in: they see one :class:`PartitionSeam`, made once per broker:

- :class:`~seglog.cluster.single.SingleBroker` for a broker without ``zookeeper.connect``: it
  is the controller and the only replica of every partition, leader in epoch 0, and its
  metadata is the local Store's (Kafka's single-node KRaft broker answers the same way);
- :class:`~seglog.cluster.replica_manager.ReplicaManager` for a cluster member: the metadata
  is ZooKeeper's and partitions have leaders, followers and an ISR (Kafka 2.8).

What a handler uses (Redpanda's ``partition_proxy``, Kafka's ``MetadataCache`` and
``ReplicaManager``):

- the **metadata view**: :attr:`live_brokers`, :attr:`controller_id`, :attr:`assignments`
  (topic -> :class:`~seglog.cluster.zk_data.TopicAssignment`), :attr:`states` (partition ->
  :class:`~seglog.cluster.zk_data.PartitionState`), :meth:`topic_name` by id;
- the **leader's data path**: :meth:`leader_replica`, :meth:`check_leader_epoch`,
  :meth:`diverging_epoch`, :meth:`follower_fetched`;
- **one append**: :meth:`append` is the only way records reach a partition's leader log
  (Kafka's ``ReplicaManager.appendRecords``): client produce, the group coordinator's
  offsets and group metadata, the transaction coordinator's state and its markers. It checks
  leadership and ``min.insync.replicas`` (acks=-1) before writing, lets the high watermark
  move after, and for acks=-1 waits until the high watermark covers the records (Kafka's
  ``DelayedProduce``); in a cluster of one that is at once;
- the **topic lifecycle**: :meth:`create_topic`, :meth:`delete_topic`,
  :meth:`add_partitions`, :meth:`auto_create_topic`, replica placement
  (:meth:`plan_topic`, :meth:`plan_new_partitions`, :meth:`assign_replicas`);
- **leadership listeners** (:meth:`add_leadership_listener`): how the coordinators follow
  the internal partitions this broker leads;
- **config changes** (:meth:`alter_topic_configs`, :meth:`alter_broker_configs`,
  :meth:`add_broker_config_listener`): how a config change made through this broker reaches
  every broker (a cluster of one has no other broker to tell).

Everything runs on the broker's event loop thread unless a method says otherwise.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Protocol, Sequence

from .. import error_codes as codes
from ..security.acl import AclBinding
from ..security.acl_store import AclStore
from ..types import TopicPartition
from . import zk_data
from .placement import ManualAssignment

__all__ = ["AppendOrigin", "AppendResult", "CoordinatorPartitionsView", "LeadershipListener",
           "PartitionSeam", "Replica"]



class AppendOrigin(enum.Enum):
    """Who appends (Kafka's ``AppendOrigin``): a client's Produce, a coordinator's own
    records (offsets, group metadata, transaction state), or a transaction marker."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    MARKER = "marker"


class Replica(Protocol):
    """This broker's replica of one partition as a handler sees it: ``tp``, the assignment's
    ``replicas``, ``leader_epoch``, ``is_leader`` and the partition's ``log``
    (:class:`~seglog.storage.log.Log`)."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    leader_epoch: int
    log: Any

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition now."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` of the largest epoch <= ``epoch`` this leader knows
        (OffsetForLeaderEpoch's answer)."""
        ...


class CoordinatorPartitionsView(Protocol):
    """Which partitions of an internal topic a coordinator serves here (Kafka's
    ``onLeadershipChange`` bookkeeping; :class:`~seglog.cluster.coordinators
    .CoordinatorPartitions` in a cluster)."""

    async def start(self) -> None:
        """Return once the partitions this broker leads at start are loaded (or loading)."""
        ...

    def error_for(self, partition: int) -> int:
        """NONE when ``partition`` is loaded here, COORDINATOR_LOAD_IN_PROGRESS while it
        loads, NOT_COORDINATOR when another broker leads it."""
        ...

    def leader_epoch(self, partition: int) -> int | None:
        """The leader epoch ``partition`` is served in (the coordinator epoch), or None."""
        ...

    def owned_partitions(self) -> frozenset[int]:
        """The partitions loaded and served here."""
        ...

    async def close(self) -> None:
        """Stop following leadership (the broker stops)."""
        ...


class LeadershipListener(Protocol):
    """Told of every leadership change of this broker's replicas (Kafka's
    ``onLeadershipChange``)."""

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """This broker became leader of ``tp`` in ``leader_epoch``."""
        ...

    def on_become_follower(self, tp: TopicPartition) -> None:
        """This broker stopped leading ``tp``."""
        ...


@dataclass(slots=True)
class AppendResult:
    """What :meth:`PartitionSeam.append` did: ``error_code`` (Kafka's; NONE when the
    records were appended and acknowledged as ``acks`` asks), ``appended`` (whether the
    writer wrote; an acks=-1 wait may still fail after it: the records stay, as in Kafka),
    ``last_offset`` (the writer's last offset, -1 when nothing was written) and the
    ``replica`` written to (None when this broker does not lead the partition)."""

    error_code: int
    appended: bool = False
    last_offset: int = -1
    replica: Any = None


#: A writer: appends to the leader's Log it is given and returns the last offset written,
#: or None when it refused on its own (its reason is its own to record). What it raises
#: propagates to the caller of :meth:`PartitionSeam.append`.
Writer = Callable[[Any], "int | None"]


def _NOT_YET(_log: Any) -> None:
    """The writer of :meth:`PartitionSeam.append`'s checks when the real one runs on a worker
    thread afterwards: writes nothing."""
    return None


class PartitionSeam(abc.ABC):
    """The cluster as a handler sees it (see the module docstring). Subclasses give the
    metadata view, the leader's primitives and the topic lifecycle; :meth:`append` is
    written here, once, over those primitives."""

    #: This broker's id.
    broker_id: int
    #: This broker's :class:`~seglog.store.Store` (its partitions on disk).
    store: Any

    # --- the metadata view -------------------------------------------------------------

    @property
    @abc.abstractmethod
    def live_brokers(self) -> Mapping[int, zk_data.BrokerInfo]:
        """The live brokers by id (their advertised listener)."""

    @property
    @abc.abstractmethod
    def controller_id(self) -> int | None:
        """The active controller's broker id, None while there is none."""

    @property
    @abc.abstractmethod
    def assignments(self) -> Mapping[str, zk_data.TopicAssignment]:
        """Every topic's replica assignment by name (the internal topics once they exist)."""

    @property
    @abc.abstractmethod
    def states(self) -> Mapping[TopicPartition, zk_data.PartitionState]:
        """Every partition's leader, leader epoch and ISR (absent: no state yet)."""

    def partition_count(self, name: str) -> int | None:
        """Topic ``name``'s partition count, None when the cluster has no such topic."""
        assignment = self.assignments.get(name)
        return None if assignment is None else len(assignment.partitions)

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic whose id is ``topic_id``, or None."""
        if topic_id is None:
            return None
        for name, assignment in self.assignments.items():
            if assignment.topic_id == topic_id:
                return name
        return None

    def offline_partitions(self) -> Mapping[TopicPartition, str]:
        """``{tp: reason}`` of this broker's partitions whose files failed to load (the
        Store's :meth:`~seglog.store.Store.offline_partitions`): Metadata answers each with
        this broker as an offline replica and no leader (LEADER_NOT_AVAILABLE), as Kafka's
        metadata cache answers a partition in an offline log dir."""
        offline: Mapping[TopicPartition, str] = self.store.offline_partitions()
        return offline

    def no_replica_error(self, tp: TopicPartition) -> int:
        """The error for a request to ``tp`` when :meth:`leader_replica` is None:
        KAFKA_STORAGE_ERROR when its files failed to load here (Kafka's
        ``ReplicaManager.getPartitionOrException`` for an offline partition), else
        NOT_LEADER_OR_FOLLOWER."""
        if tp in self.offline_partitions():
            return codes.KAFKA_STORAGE_ERROR
        return codes.NOT_LEADER_OR_FOLLOWER

    # --- the leader's data path ----------------------------------------------------------

    @abc.abstractmethod
    def leader_replica(self, tp: TopicPartition) -> Any | None:
        """This broker's :class:`Replica` of ``tp`` when it leads it, else None."""

    @abc.abstractmethod
    def check_leader_epoch(self, replica: Any, current_leader_epoch: int) -> int:
        """Kafka's fencing of a request's ``CurrentLeaderEpoch`` (``Partition
        .localLogWithEpochOrThrow``): NONE for -1 or the leader's epoch,
        FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer."""

    @abc.abstractmethod
    def diverging_epoch(self, replica: Any, last_fetched_epoch: int,
                        fetch_offset: int) -> tuple[int, int] | None:
        """A follower fetch's ``DivergingEpoch`` (epoch, end offset), or None."""

    @abc.abstractmethod
    def follower_fetched(self, replica: Any, replica_id: int, fetch_offset: int,
                         leader_end_offset: int, follower_log_start_offset: int) -> None:
        """A follower's fetch reached the leader (the ISR and high watermark may move)."""

    def hosts_partition(self, tp: TopicPartition) -> bool:
        """Whether this broker holds a replica of ``tp`` (DescribeLogDirs lists those); a
        lone broker holds every partition."""
        return True

    def leader_throttled(self, replica: Any, replica_id: int) -> bool:
        """Whether a fetch of follower ``replica_id`` gets no records of ``replica`` now (the
        leader's replication throttle, :mod:`.replication_quota`); never on a lone broker."""
        return False

    def leader_sent(self, replica: Any, size_bytes: int) -> None:
        """A follower's fetch answer carried ``size_bytes`` of ``replica``'s records (counted
        by the leader's replication throttle when the partition is throttled)."""

    @abc.abstractmethod
    def check_acks_all_before_append(self, replica: Any) -> int:
        """NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas`` (an
        acks=-1 append writes nothing then), else NONE."""

    @abc.abstractmethod
    def after_leader_append(self, replica: Any) -> None:
        """A leader append happened: the high watermark may move."""

    @abc.abstractmethod
    def acks_all_status(self, replica: Any, required_offset: int) -> int | None:
        """Kafka's ``DelayedProduce.tryComplete`` for one partition: the outcome of an
        acks=-1 append ending before ``required_offset`` when it is decided now (NONE: the
        high watermark covers it with enough in-sync replicas; NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        NOT_LEADER_OR_FOLLOWER), None while it must wait."""

    @abc.abstractmethod
    async def wait_acks_all(self, replica: Any, required_offset: int, timeout_s: float) -> int:
        """Kafka's ``DelayedProduce`` for one partition: NONE once the high watermark
        reaches ``required_offset`` with enough in-sync replicas, else its error code
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT)."""

    @abc.abstractmethod
    def notify_readable(self) -> None:
        """Wake the broker's long polls (records appended, a high watermark moved)."""

    # --- the one append ------------------------------------------------------------------

    def append_now(self, tp: TopicPartition, write: Writer, *, acks: int,
                   origin: AppendOrigin) -> AppendResult:
        """The one append, without its acks=-1 wait: NOT_LEADER_OR_FOLLOWER when this
        broker does not lead ``tp``; for acks=-1 NOT_ENOUGH_REPLICAS when the ISR is below
        ``min.insync.replicas`` (nothing is written); else ``write(log)`` on the leader's
        Log, after which the high watermark may move and long polls wake. What ``write``
        raises propagates. Follow with :meth:`wait_for_acks` for acks=-1 (a request's
        partitions are appended first, in order, then waited for together, as Kafka's
        ``DelayedProduce`` covers a whole request)."""
        del origin  # every origin is checked alike (Kafka checks coordinators' writes too)
        replica = self.leader_replica(tp)
        if replica is None:
            return AppendResult(self.no_replica_error(tp))
        if acks == -1:
            code = self.check_acks_all_before_append(replica)
            if code != codes.NONE:
                return AppendResult(code, replica=replica)
        last_offset = write(replica.log)
        return self._appended(replica, last_offset)

    def _appended(self, replica: Any, last_offset: int | None) -> AppendResult:
        if last_offset is None:
            return AppendResult(codes.NONE, replica=replica)
        self.after_leader_append(replica)
        self.notify_readable()
        return AppendResult(codes.NONE, appended=True, last_offset=last_offset,
                            replica=replica)

    def try_complete_acks(self, results: Sequence[AppendResult]) -> bool:
        """The first ``tryComplete`` of Kafka's ``DelayedProduce`` (``tryCompleteElseWatch``),
        before anything waits: each acks=-1 appended result whose outcome is decided now
        (:meth:`acks_all_status`) gets it as its ``error_code``; True when none is left to
        wait for (:meth:`wait_for_acks` would return at once), False at the first that must
        wait. Synchronous: a request whose acks are met on append is answered without a
        wait."""
        for result in results:
            if result.appended and result.error_code == codes.NONE:
                code = self.acks_all_status(result.replica, result.last_offset + 1)
                if code is None:
                    return False
                result.error_code = code
        return True

    async def wait_for_acks(self, results: Sequence[AppendResult], *, acks: int,
                            timeout_s: float) -> None:
        """For acks=-1: wait (together, up to ``timeout_s``) until the high watermark covers
        every appended result's records and set each one's ``error_code`` to the wait's
        outcome (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT: the records stay, as in Kafka). Nothing to do for acks 0 or 1."""
        if acks != -1 or self.try_complete_acks(results):
            return
        waiting = [r for r in results if r.appended and r.error_code == codes.NONE]
        if not waiting:
            return
        if len(waiting) == 1:
            result = waiting[0]
            result.error_code = await self.wait_acks_all(result.replica, result.last_offset + 1,
                                                         timeout_s)
            return
        outcomes = await asyncio.gather(*(
            self.wait_acks_all(r.replica, r.last_offset + 1, timeout_s) for r in waiting))
        for result, code in zip(waiting, outcomes):
            result.error_code = code

    async def append(self, tp: TopicPartition, write: Writer, *, acks: int,
                     origin: AppendOrigin, timeout_s: float,
                     run_blocking: Callable[..., Any] | None = None) -> AppendResult:
        """:meth:`append_now` then :meth:`wait_for_acks` for one partition; with
        ``run_blocking`` the writer runs on a worker thread (``await run_blocking(write,
        log)``: a transaction marker's fsyncs), the checks and what follows on the loop."""
        if run_blocking is None:
            result = self.append_now(tp, write, acks=acks, origin=origin)
        else:
            result = self.append_now(tp, _NOT_YET, acks=acks, origin=origin)
            if result.error_code == codes.NONE:
                result = self._appended(result.replica,
                                        await run_blocking(write, result.replica.log))
        await self.wait_for_acks((result,), acks=acks, timeout_s=timeout_s)
        return result

    # --- topics ----------------------------------------------------------------------------

    @abc.abstractmethod
    def assign_replicas(self, partitions: int, replication_factor: int
                        ) -> dict[int, list[int]]:
        """The placement of a new topic's ``partitions`` over the live brokers; raises
        :class:`~seglog.errors.InvalidReplicationFactorError` when ``replication_factor``
        exceeds what this cluster can hold."""

    @abc.abstractmethod
    def plan_topic(self, *, num_partitions: int, replication_factor: int,
                   manual: ManualAssignment | None, default_partitions: int,
                   default_replication_factor: int) -> dict[int, list[int]]:
        """A new topic's assignment (partition -> replicas) for a CreateTopics entry: its
        manual assignment checked, or this cluster's placement (-1: the defaults). Raises
        the :mod:`seglog.errors` class of Kafka's refusal (:mod:`.placement`)."""

    @abc.abstractmethod
    def plan_new_partitions(self, name: str, *, current: int, count: int,
                            manual: Sequence[Sequence[int]] | None) -> dict[int, list[int]]:
        """The partitions that grow topic ``name`` from ``current`` to ``count``
        (partition -> replicas): the request's ``manual`` replica lists checked, or this
        cluster's placement. Raises as :meth:`plan_topic`."""

    @abc.abstractmethod
    def assign_new_partitions(self, name: str, count: int) -> dict[int, list[int]]:
        """The placement of the partitions that grow topic ``name`` to ``count``."""

    @abc.abstractmethod
    async def create_topic(self, name: str, assignment: Mapping[int, list[int]],
                           config: Any, overrides: Mapping[str, Any], *,
                           timeout_s: float) -> uuid.UUID:
        """Create topic ``name`` with ``assignment`` (partition -> replicas), its full
        ``config`` (a :class:`~seglog.storage.config.LogConfig`) and the ``overrides`` a
        client set; returns its topic id. Raises
        :class:`~seglog.errors.TopicExistsError` and the Store's errors."""

    @abc.abstractmethod
    async def delete_topic(self, name: str, *, timeout_s: float) -> bool:
        """Delete topic ``name``; whether it is gone within ``timeout_s``."""

    @abc.abstractmethod
    async def add_partitions(self, name: str, added: Mapping[int, list[int]], *,
                             timeout_s: float) -> None:
        """Grow topic ``name`` by the partitions ``added`` (partition -> replicas)."""

    @abc.abstractmethod
    async def auto_create_topic(self, name: str, *, partitions: int,
                                replication_factor: int) -> int:
        """Create topic ``name`` for a Metadata request that named it (``auto.create
        .topics.enable``); returns the error code the Metadata answer carries for it
        (the client asks again)."""

    # --- coordinators --------------------------------------------------------------------

    @abc.abstractmethod
    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        """Tell ``listener`` of every leadership change of this broker's replicas."""

    @abc.abstractmethod
    async def find_coordinator(self, topic: str, key: str, *, partitions: int,
                               replication_factor: int, topic_config: Mapping[str, str]
                               ) -> Any:
        """FindCoordinator for ``key`` (a group id or a transactional id), whose coordinator
        leads ``topic``'s partition for it: a
        :class:`~seglog.cluster.coordinators.CoordinatorAnswer`. ``partitions``,
        ``replication_factor`` and ``topic_config``: how ``topic`` is created on first use."""

    @abc.abstractmethod
    def coordinator_partitions(self, topic: str, *,
                               load: Callable[[int, int], Awaitable[None]],
                               unload: Callable[[int], None]) -> CoordinatorPartitionsView:
        """The partitions of internal topic ``topic`` a coordinator serves here, following
        their leadership: ``load(partition, leader_epoch)`` when this broker becomes a
        partition's leader, ``unload(partition)`` when it stops. Await the view's ``start``
        before serving (a lone broker leads every partition: it loads them all there)."""

    @abc.abstractmethod
    def txn_marker_sender(self, coordinator: Any, *,
                          run_blocking: Callable[..., Awaitable[Any]],
                          request_timeout_ms: int, on_written: Callable[[], None]) -> Any:
        """How the transaction ``coordinator``'s markers reach the partitions' leaders: a
        :class:`~seglog.cluster.txn_markers.TxnMarkerSender` when they may be other brokers,
        None when this broker leads them all (the coordinator then writes them itself)."""

    @abc.abstractmethod
    def ensure_internal_topic(self, topic: str) -> None:
        """Make internal topic ``topic`` here if this broker is the one that makes it on
        first use (a lone broker, as its Store's coordinators do); a cluster member's comes
        from ZooKeeper (FindCoordinator writes it there), so it does nothing."""

    def internal_partitions(self, topic: str, default_count: int) -> int:
        """How many partitions internal topic ``topic`` has (``default_count`` before it
        exists: the broker's ``offsets.topic.num.partitions`` or
        ``transaction.state.log.num.partitions``)."""
        assignment = self.assignments.get(topic)
        if assignment is not None and assignment.partitions:
            return len(assignment.partitions)
        return default_count

    # --- config changes ------------------------------------------------------------------

    @abc.abstractmethod
    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` (Kafka names, string values) the whole override set of topic
        ``topic`` for the cluster, before the handler applies it to this broker; returns once
        that is durable (in a ZooKeeper cluster: ``/config/topics/<t>`` written, then the
        change announced so every broker takes it). Raises :class:`~seglog.errors.SeglogError`
        when it could not be made (nothing changed)."""

    async def topic_config_overrides(self, topic: str) -> dict[str, str] | None:
        """The cluster's config overrides of topic ``topic`` (Kafka names, string values;
        Kafka's ``MetadataCache.topicConfig``), for a topic this broker may hold no replica
        of; None when only this broker's Store knows them (a cluster of one: every topic is
        there). A ZooKeeper cluster reads ``/config/topics/<t>``."""
        return None

    @abc.abstractmethod
    async def alter_broker_configs(self, broker_id: int | None,
                                   configs: Mapping[str, str]) -> None:
        """Make ``configs`` the whole dynamic broker layer of broker ``broker_id``, or of the
        cluster default for None, as :meth:`alter_topic_configs` does."""

    @abc.abstractmethod
    def acl_store(self, on_change: Callable[[frozenset[AclBinding]], None]) -> AclStore:
        """Where this broker keeps its ACLs (:class:`~seglog.security.acl_store.AclStore`):
        a lone broker's data directory, a cluster's ZooKeeper (whose changes made through
        other brokers reach ``on_change``, on the loop, as the whole new set)."""

    @abc.abstractmethod
    def add_broker_config_listener(self, listener: Callable[[bool, dict[str, str]], None]
                                   ) -> None:
        """Call ``listener(per_broker, values)`` on the loop whenever the cluster holds a new
        dynamic layer for this broker (``per_broker`` True) or for the cluster default
        (False), made through any broker, and at once for the layers it already holds."""

    # --- client-metrics subscriptions (not abstract: a cluster of one keeps them itself) ---

    @property
    def keeps_client_metrics(self) -> bool:
        """Whether the cluster holds the client-metrics subscriptions (a ZooKeeper cluster's
        ``/config/client-metrics``); False for a lone broker, whose config handlers keep
        them in its data directory."""
        return False

    async def alter_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the whole config set of client-metrics subscription ``name`` for
        the cluster (empty: none); every broker's client-metrics listeners take it. Only
        when :attr:`keeps_client_metrics`."""
        raise NotImplementedError("a lone broker keeps its client-metrics subscriptions itself")

    def add_client_metrics_listener(self, listener: Callable[[str, dict[str, str]], None]
                                    ) -> None:
        """Call ``listener(name, configs)`` on the loop whenever the cluster holds a new config
        set for a client-metrics subscription (empty: gone), and at once for those it holds.
        Only when :attr:`keeps_client_metrics`."""
        raise NotImplementedError("a lone broker keeps its client-metrics subscriptions itself")

    # --- group configs (not abstract: a cluster of one keeps them itself) ---------------

    @property
    def keeps_group_configs(self) -> bool:
        """Whether the cluster holds the group configs (a ZooKeeper cluster's
        ``/config/groups``); False for a lone broker, which keeps them in its data
        directory (``seglog.server.apis.group_configs``)."""
        return False

    async def alter_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the whole config set of group ``group_id`` for the cluster (empty:
        none); every broker's group config listeners take it. Only when
        :attr:`keeps_group_configs`."""
        raise NotImplementedError("a lone broker keeps its group configs itself")

    def add_group_config_listener(self, listener: Callable[[str, dict[str, str]], None]
                                  ) -> None:
        """Call ``listener(group_id, configs)`` on the loop whenever the cluster holds a new
        config set for a group (empty: none), and at once for those it holds. Only when
        :attr:`keeps_group_configs`."""
        raise NotImplementedError("a lone broker keeps its group configs itself")

    # --- client quotas (not abstract: a cluster of one keeps them in its data directory) ---

    @property
    def keeps_client_quotas(self) -> bool:
        """Whether the cluster holds the client quota entities (a ZooKeeper cluster's
        ``/config/users|clients|ips``); False for a lone broker, whose quota handlers keep
        them in its data directory."""
        return False

    async def alter_client_quota(self, entity: tuple[tuple[str, str | None], ...],
                                 changes: Mapping[str, str | None]) -> None:
        """Set (a value) or remove (None) the quota keys ``changes`` names of client quota
        ``entity`` for the whole cluster, keeping its other keys; every broker's client quota
        listeners take it. Only when :attr:`keeps_client_quotas`."""
        raise NotImplementedError("a lone broker keeps its client quotas itself")

    def add_client_quota_listener(
            self, listener: Callable[[tuple[tuple[str, str | None], ...], dict[str, float]],
                                     None]) -> None:
        """Call ``listener(entity, values)`` on the loop whenever the cluster holds new
        values for a client quota entity (and at once for those it holds). Only when
        :attr:`keeps_client_quotas`."""
        raise NotImplementedError("a lone broker keeps its client quotas itself")

    # --- finalized features (KIP-584; not abstract: added after the other stores) ---------

    def finalized_features_store(self, on_change: Callable[[int, dict[str, int]], None]
                                 ) -> Any:
        """Where the cluster keeps its finalized feature levels
        (:class:`~seglog.cluster.features_store.FinalizedFeaturesStore`): a lone broker's
        data directory, a ZooKeeper cluster's ``/feature`` znode (whose changes made through
        other brokers reach ``on_change(epoch, levels)`` on the loop)."""
        raise NotImplementedError("this seam keeps no finalized features")

    # --- leader elections and partition reassignments (ElectLeaders, KIP-455) ----------------
    # Added last so that the seam's other sections stay as they were (merge-friendly).

    @abc.abstractmethod
    async def elect_leaders(self, election_type: int, partitions: Sequence[TopicPartition], *,
                            timeout_s: float) -> dict[TopicPartition, tuple[int, str | None]]:
        """ElectLeaders for ``partitions`` (each one a partition the cluster has):
        ``election_type`` 0 (PREFERRED: the first replica, when it is live and in the ISR) or
        1 (UNCLEAN: a live replica for a partition without a live leader, the ISR first).
        Returns ``(error code, message)`` per partition: NONE once the elected leader is
        in the metadata (waited for up to ``timeout_s``), ELECTION_NOT_NEEDED,
        PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, NOT_CONTROLLER
        (this broker is not the controller: the admin client asks the controller),
        REQUEST_TIMED_OUT."""

    @abc.abstractmethod
    async def alter_partition_reassignments(
            self, targets: Sequence[tuple[TopicPartition, tuple[int, ...] | None]], *,
            allow_replication_factor_change: bool, timeout_s: float
    ) -> list[tuple[int, str | None]]:
        """AlterPartitionReassignments (KIP-455) for existing partitions: each target is a
        new replica list, or None to cancel the partition's reassignment. Returns
        ``(error code, message)`` per target, in order: NONE once the reassignment is
        started (or cancelled), INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR
        (the size changes and ``allow_replication_factor_change`` is false),
        NO_REASSIGNMENT_IN_PROGRESS (a cancellation with nothing to cancel),
        NOT_CONTROLLER."""

    def partition_reassignments(self) -> dict[TopicPartition, tuple[list[int], list[int],
                                                                     list[int]]]:
        """The reassignments in progress (ListPartitionReassignments):
        ``{tp: (replicas, adding, removing)}``, from the assignments' ``adding_replicas`` /
        ``removing_replicas`` (a lone broker never has any)."""
        ongoing: dict[TopicPartition, tuple[list[int], list[int], list[int]]] = {}
        for name, assignment in self.assignments.items():
            for index in sorted(set(assignment.adding_replicas)
                                | set(assignment.removing_replicas)):
                adding = list(assignment.adding_replicas.get(index, ()))
                removing = list(assignment.removing_replicas.get(index, ()))
                if adding or removing:
                    ongoing[TopicPartition(name, index)] = (
                        list(assignment.partitions.get(index, ())), adding, removing)
        return ongoing
