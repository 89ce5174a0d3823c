"""A cluster member's partitions: which it leads and which it follows, and the leader's duties.

:class:`ReplicaManager` is Kafka 2.8's ``ReplicaManager`` and ``Partition`` for a broker whose
decisions arrive by ZooKeeper watches instead of LeaderAndIsr requests (docs/cluster.md §1,
research R§2.4 "for seglog's watch-based phase 1"). It runs on the broker's event loop; the
blocking ZooKeeper calls go to worker threads and kazoo's watch callbacks only mark work and
wake the loop (``call_soon_threadsafe``), never call ZooKeeper themselves.

What it keeps:

- a metadata cache: the live brokers (``/brokers/ids``), the controller (``/controller``),
  every topic's assignment (``/brokers/topics/<t>``) and every partition's ``state``, all
  re-read when their watch fires; the Metadata API answers from it;
- the local topics: a topic in ZooKeeper is created in the Store with its partition count and
  config from ``/config/topics/<t>``, and deleted when its assignment disappears;
- one :class:`PartitionReplica` per partition whose assignment names this broker: on a state
  whose leader epoch is **strictly larger** than the one known (Kafka's
  ``becomeLeaderOrFollower`` check) it becomes leader (``Log.become_leader``, the fetcher
  stops, a fresh :class:`~seglog.cluster.replica_state.LeaderReplicaState`) or follower (the
  partition's delayed produces answer NOT_LEADER_OR_FOLLOWER, the fetcher gets the new leader
  and epoch and truncates first: on *every* epoch change, KAFKA-7164); a state of the same
  epoch with a newer zkVersion updates the leader's committed ISR (its own CAS, or a write it
  lost to);
- the leader's duties: follower fetch state, the high watermark (``Log.update_high_watermark``
  then ``notify`` wakes the broker's long polls), ISR shrink every
  ``replica.lag.time.max.ms / 2`` and expansion on a follower's fetch, each one a
  ``zk.update_isr`` CAS keeping the leader epoch and controller epoch of the state; until the
  write is confirmed the ISR change is pending (the high watermark is computed with the larger
  of the two sets; R§3.4); a BadVersion leaves it pending until the watch delivers the state
  that won, never assumed;
- the delayed produces of acks=-1 (:meth:`wait_acks_all`, Kafka's ``DelayedProduce``): they
  complete on a high watermark move, an ISR change, a leadership change or their timeout;
- the high watermark checkpoint every ``replica.high.watermark.checkpoint.interval.ms``.

Deviations from Kafka 2.8 (docs/cluster.md "Broker in cluster mode"): every partition of a
topic exists in the local Store (seglog's Store keeps whole topics), only the assigned ones
act as replicas; decisions come by watches, so there is no controller epoch check on
requests (each state read carries the epochs it fences with).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence, TypeVar

from .. import error_codes as codes
from .. import errors
from ..aio import wait_event
from ..security.acl import AclBinding
from ..security.acl_store import AclStore
from ..types import TopicPartition
from . import placement, zk_data
from .inter_broker import InterBrokerListener
from .placement import ManualAssignment
from .replication_quota import (ALL_REPLICAS, UNBOUNDED_BYTES_PER_S, ReplicationQuota,
                                throttled_partitions)
from .seam import LeadershipListener, PartitionSeam
from .sasl_login import inter_broker_login
from .test_breaks import NO_TEST_BREAKS, TestBreaks
from .truncation import diverging_epoch
from ..log_limits import REPEATS

if TYPE_CHECKING:
    from ..storage.log import Log
    from ..store import Store, Topic
    from .config_changes import ConfigChangeManager
    from .coordinators import CoordinatorAnswer, CoordinatorPartitions
    from .fetcher import ReplicaFetcherManager
    from .delegation_tokens import TokenZnodes
    from .scram_users import ZkCredentialStore
    from .zk_client import KafkaZkClient

#: What a call run by :meth:`ReplicaManager._blocking` returns.
_Result = TypeVar("_Result")
#: A part of the replica manager that :meth:`ReplicaManager.start` makes.
_Part = TypeVar("_Part")

__all__ = ["ReplicaManager", "PartitionReplica", "ROLE_LEADER", "ROLE_FOLLOWER", "ROLE_NONE"]

log = logging.getLogger("seglog.cluster.replica_manager")

ROLE_LEADER = "leader"
ROLE_FOLLOWER = "follower"
ROLE_NONE = "none"


#: How long :meth:`ReplicaManager.create_topic` waits for the controller to give every new
#: partition its first state (Kafka 2.8's CreateTopics waits in its purgatory up to the
#: request's timeout; the caller passes the smaller of the two).
CREATE_WAIT_S_DEFAULT = 10.0
#: Test-only: with ``test_breaks.expose_zk_session`` (``LocalCluster(session_hook=True)``) the
#: broker keeps its ZooKeeper session's id and password in :data:`SESSION_HOOK_FILE` of its
#: data directory, for ``LocalCluster.expire_session`` (docs/cluster.md §5.1).
SESSION_HOOK_FILE = "zookeeper-session.json"
#: Threads for the replica manager's blocking ZooKeeper calls (ISR writes of several
#: partitions and the metadata reads may wait on a lost connection at once).
ZK_THREADS = 4
#: Back-off after a failed ZooKeeper read in the metadata loop.
_RETRY_S = 0.5
#: How long ElectLeaders waits on the metadata loop between looks at an elected leader
#: (each look is bounded by the request's timeout).
METADATA_POLL_S = 0.2
#: The least time a request waits for its turn on the controller thread (a request with a
#: shorter timeout still gets the controller's answer when the queue is idle).
CONTROLLER_CALL_MIN_S = 5.0


class PartitionReplica:
    """This broker's replica of one partition: ``tp``, ``replicas`` (assignment order),
    ``role`` (leader / follower / none), the last ``state`` applied (leader, leader_epoch,
    isr, controller_epoch, zk_version), the Log, and on the leader its
    ``leader_state`` (:class:`~seglog.cluster.replica_state.LeaderReplicaState`). Used on the
    event loop thread only."""

    __slots__ = ("tp", "replicas", "role", "leader", "leader_epoch", "isr", "controller_epoch",
                 "zk_version", "leader_state", "log", "waiters", "topic_id")

    def __init__(self, tp: TopicPartition, replicas: tuple[int, ...], log_: Log,
                 topic_id: uuid.UUID | None, broker_id: int):
        from .replica_state import LeaderReplicaState

        self.tp = tp
        self.replicas = replicas
        self.role = ROLE_NONE
        self.leader = -1
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.controller_epoch = -1
        self.zk_version = -1
        #: The leader's bookkeeping (kept across follower periods, as Kafka's Partition).
        self.leader_state = LeaderReplicaState(broker_id)
        self.log = log_
        self.topic_id = topic_id
        #: Delayed produces: (required offset, future of the error code).
        self.waiters: list[tuple[int, asyncio.Future[int]]] = []

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition now."""
        return self.role == ROLE_LEADER

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` of the largest epoch <= ``epoch`` in the log's leader-epoch
        cache (``Partition.lastOffsetForLeaderEpoch``)."""
        return self.log.end_offset_for_epoch(epoch)

    def __repr__(self) -> str:
        return (f"PartitionReplica({self.tp.topic}-{self.tp.partition}, {self.role}, "
                f"leader={self.leader}, epoch={self.leader_epoch}, isr={list(self.isr)})")


class ReplicaManager(PartitionSeam):
    """A broker's replicas and its view of the cluster (see the module docstring).

    ``store``: the broker's Store (opened ``replicated=True``); ``zk``: a started
    :class:`~seglog.cluster.zk_client.KafkaZkClient`; ``broker_id``; ``config``: Kafka's
    broker configs by name (``replica.lag.time.max.ms``, ``replica.fetch.*``,
    ``replica.high.watermark.checkpoint.interval.ms``, ``num.partitions``...); ``loop``: the
    broker's event loop; ``notify``: called on the loop whenever records became readable
    (a high watermark moved) or a partition changed hands, so the broker's long polls
    re-read. ``test_breaks``: the negative controls and test hooks it honours (tests only,
    :mod:`seglog.cluster.test_breaks`). ``inter_broker``: the listener (and TLS context)
    followers and the transaction marker sender connect to other brokers on (default:
    PLAINTEXT). Every method runs on the loop thread.
    """

    def __init__(self, *, store: Store, zk: KafkaZkClient, broker_id: int,
                 config: Mapping[str, Any],
                 loop: asyncio.AbstractEventLoop, notify: Callable[[], None],
                 test_breaks: TestBreaks = NO_TEST_BREAKS,
                 inter_broker: InterBrokerListener | None = None):
        self.store = store
        self.inter_broker = inter_broker or InterBrokerListener()
        #: Offline partitions (files failed to load) already logged, logged once each.
        self._offline_logged: set[TopicPartition] = set()
        self.test_breaks = test_breaks
        self.zk = zk
        self.broker_id = broker_id
        #: ISR changes this broker wrote as a leader (IsrShrinksPerSec, IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.config = config
        self.loop = loop
        self._notify = notify
        self.lag_time_max_ms = int(config["replica.lag.time.max.ms"])
        #: The SASL login of this broker's connections to other brokers (None: its
        #: inter-broker listener does not use SASL; :mod:`.sasl_login`).
        self.inter_broker_login = inter_broker_login(config)
        self._scram_store: ZkCredentialStore | None = None
        self._token_znodes: TokenZnodes | None = None
        self.checkpoint_interval_ms = int(config["replica.high.watermark.checkpoint.interval.ms"])
        self.partitions: dict[TopicPartition, PartitionReplica] = {}
        # The metadata cache.
        self._live_brokers: dict[int, zk_data.BrokerInfo] = {}
        self._controller_id: int | None = None
        self._assignments: dict[str, zk_data.TopicAssignment] = {}
        self._states: dict[TopicPartition, zk_data.PartitionState] = {}
        # What the metadata loop has to re-read.
        self._dirty_brokers = True
        self._dirty_controller = True
        self._dirty_topics = True
        self._dirty_states: set[TopicPartition] = set()
        #: The ``/config/topics/<t>`` overrides each local topic was last given.
        self._topic_configs: dict[str, dict[str, str]] = {}
        #: Config znodes and their change notifications (started after the first metadata
        #: pass, so the local topics exist when it reads every topic's config).
        self.config_changes: ConfigChangeManager | None = None
        self._reregister = False
        self._wake = asyncio.Event()
        self._metadata_changed = asyncio.Event()
        self._watched_states: set[TopicPartition] = set()
        self._watched_topics: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._registration: zk_data.BrokerRegistration | None = None
        self._zk_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=ZK_THREADS, thread_name_prefix=f"seglog-zk-{broker_id}")
        #: The czxid of this broker's registration (Kafka's broker epoch); -1 before.
        self.broker_epoch = -1
        self.fetcher: ReplicaFetcherManager | None = None
        #: Leadership listeners (:meth:`add_leadership_listener`).
        self._leadership_listeners: list[LeadershipListener] = []

    # --- the metadata view (PartitionSeam) ------------------------------------------------

    @property
    def live_brokers(self) -> dict[int, zk_data.BrokerInfo]:
        """The live brokers (``/brokers/ids``) by id."""
        return self._live_brokers

    @property
    def controller_id(self) -> int | None:
        """The controller's broker id (``/controller``), None while there is none."""
        return self._controller_id

    @property
    def assignments(self) -> dict[str, zk_data.TopicAssignment]:
        """Every topic's assignment (``/brokers/topics/<t>``) by name."""
        return self._assignments

    @property
    def states(self) -> dict[TopicPartition, zk_data.PartitionState]:
        """Every known partition state (``.../partitions/<p>/state``)."""
        return self._states

    def notify_readable(self) -> None:
        """Wake the broker's long polls."""
        self._notify()

    def plan_topic(self, *, num_partitions: int, replication_factor: int,
                   manual: ManualAssignment | None, default_partitions: int,
                   default_replication_factor: int) -> dict[int, list[int]]:
        """See :meth:`PartitionSeam.plan_topic` (Kafka 2.8's checks and placement)."""
        return placement.cluster_topic_plan(
            self.live_brokers, num_partitions=num_partitions,
            replication_factor=replication_factor, manual=manual,
            default_partitions=default_partitions,
            default_replication_factor=default_replication_factor,
            assign=self.assign_replicas)

    def plan_new_partitions(self, name: str, *, current: int, count: int,
                            manual: Sequence[Sequence[int]] | None) -> dict[int, list[int]]:
        """See :meth:`PartitionSeam.plan_new_partitions` (Kafka 2.8's checks and
        placement)."""
        current_assignment = self.assignments.get(name)
        if current_assignment is None:
            raise errors.UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return placement.cluster_new_partitions_plan(
            self.live_brokers, factor=len(current_assignment.partitions[0]), current=current,
            manual=manual, assign_new=lambda: self.assign_new_partitions(name, count))

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Arm the watches, read the cluster's metadata, create the local topics, take up
        this broker's replicas, start the fetchers and the periodic tasks. Returns when the
        first metadata pass is done; :meth:`register` then makes the broker live."""
        from .fetcher import FetcherConfig, ReplicaFetcherManager

        self._start_replication_quotas()
        self.fetcher = ReplicaFetcherManager(
            broker_id=self.broker_id, loop=self.loop, resolve_broker=self._resolve_broker,
            config=FetcherConfig.from_kafka_config(self.config),
            on_high_watermark=self._on_follower_high_watermark, test_breaks=self.test_breaks,
            inter_broker=self.inter_broker, login=self.inter_broker_login,
            quota=self.follower_quota, is_throttled=self._follower_throttled)
        zk = self.zk
        await self._blocking(zk.watch_children, zk_data.BROKER_IDS_PATH,
                             self._on_brokers_changed)
        await self._blocking(zk.watch_children, zk_data.TOPICS_PATH, self._on_topics_changed)
        await self._blocking(zk.watch_data, zk_data.CONTROLLER_PATH,
                             self._on_controller_changed)
        await self._blocking(zk.add_session_listener, self._on_session_state)
        await self._refresh()
        from .config_changes import ConfigChangeManager

        self.config_changes = ConfigChangeManager(
            zk=zk, broker_id=self.broker_id, loop=self.loop, run_blocking=self._blocking,
            on_topic_config=self._take_topic_config)
        await self.config_changes.start()
        self.config_changes.add_broker_config_listener(self._take_replication_throttles)
        self._tasks = [
            self.loop.create_task(self._metadata_loop(), name="seglog-replica-metadata"),
            self.loop.create_task(self._isr_expiration_loop(), name="seglog-isr-expiration"),
            self.loop.create_task(self._checkpoint_loop(), name="seglog-hw-checkpoint"),
        ]

    def scram_credential_store(self) -> "ZkCredentialStore":
        """The cluster's SCRAM credentials (ZooKeeper's ``/config/users``,
        :mod:`.scram_users`), kept current by the config change notifications; made once,
        after :meth:`start` (the SASL module loads it)."""
        if self._scram_store is None:
            from .scram_users import ZkCredentialStore

            self._scram_store = ZkCredentialStore(self.zk, self._blocking)
            assert self.config_changes is not None, "start() first"
            self.config_changes.add_user_config_listener(self._scram_store.user_changed)
        return self._scram_store

    def delegation_token_znodes(self) -> "TokenZnodes":
        """The cluster's delegation token znodes (:mod:`.delegation_tokens`), made once
        (the token module reads and watches them)."""
        if self._token_znodes is None:
            from .delegation_tokens import TokenZnodes

            self._token_znodes = TokenZnodes(self.zk, self._blocking, self.loop)
        return self._token_znodes

    async def register(self, registration: zk_data.BrokerRegistration) -> None:
        """Register the broker (``registration``: a
        :class:`~seglog.cluster.zk_data.BrokerRegistration`, its advertised listener) so the
        controller counts it live; again after every new ZooKeeper session."""
        self._registration = registration
        self.broker_epoch = await self._blocking(self._register_blocking, registration)
        self._dirty_brokers = True
        self._wake.set()

    def _register_blocking(self, registration: zk_data.BrokerRegistration) -> int:
        broker_epoch = self.zk.register_broker(registration)
        if self.test_breaks.expose_zk_session:
            self._expose_session()
        return broker_epoch

    def _expose_session(self) -> None:
        """The test-only session hook (docs/cluster.md §5.1, never a config): the current
        ZooKeeper session's id and password in ``<data dir>/zookeeper-session.json``, written
        atomically, so a fault injector can expire exactly this session."""
        session_id, password = self.zk.session_id, self.zk.session_password
        if session_id is None or password is None:
            return
        path = os.path.join(self.store.path, SESSION_HOOK_FILE)
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump({"session_id": session_id, "password": password.hex()}, f)
        os.replace(temporary, path)

    def begin_shutdown(self) -> None:
        """The broker begins to shut down: the delayed produces answer
        NOT_LEADER_OR_FOLLOWER now (their clients go to the next leader)."""
        self._closing = True
        for replica in self.partitions.values():
            self._fail_waiters(replica, codes.NOT_LEADER_OR_FOLLOWER)

    async def stop(self) -> None:
        """Stop the periodic tasks and the fetchers; answer the delayed produces
        NOT_LEADER_OR_FOLLOWER; write the high watermark checkpoint. Idempotent."""
        self._closing = True
        self._wake.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks = []
        if self.config_changes is not None:
            await self.config_changes.stop()
        if self.fetcher is not None:
            await self.fetcher.close()
        for replica in self.partitions.values():
            self._fail_waiters(replica, codes.NOT_LEADER_OR_FOLLOWER)
        try:
            await self._blocking_store(self._checkpoint_high_watermarks)
        except Exception:  # noqa: BLE001 - the Store's close writes it again
            log.exception("high watermark checkpoint at shutdown failed")
        # ISR writes still waiting for ZooKeeper end with the session (closed next).
        self._zk_executor.shutdown(wait=False, cancel_futures=True)

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        """Tell ``listener`` of every leadership change of this broker's replicas (Kafka's
        ``onLeadershipChange`` callback, how the group and transaction coordinators follow
        their internal partitions): ``listener.on_become_leader(tp, leader_epoch)`` after this
        broker became leader of ``tp``, ``listener.on_become_follower(tp)`` after it stopped
        leading it (follower, or the replica removed). Called on the loop thread; a listener
        must not block, and what it raises is logged and ignored."""
        self._leadership_listeners.append(listener)

    @staticmethod
    def _started(part: _Part | None) -> _Part:
        """``part`` (the fetcher, the config manager), made by :meth:`start`."""
        assert part is not None, "ReplicaManager.start() first"
        return part

    def _tell_listeners(self, method: str, *args: Any) -> None:
        for listener in list(self._leadership_listeners):
            try:
                getattr(listener, method)(*args)
            except Exception:  # noqa: BLE001 - a listener must not stop a transition
                log.exception("broker %d: leadership listener %s failed", self.broker_id,
                              method)

    async def _blocking(self, fn: Callable[..., _Result], *args: Any) -> _Result:
        """A blocking ZooKeeper call on the replica manager's own threads: while ZooKeeper
        is away each call may wait up to the connection timeout, and must not starve the
        loop's default executor (the Store's work)."""
        return await self.loop.run_in_executor(self._zk_executor, fn, *args)

    async def _blocking_store(self, fn: Callable[..., _Result], *args: Any) -> _Result:
        """A blocking Store call on the loop's default executor."""
        return await self.loop.run_in_executor(None, fn, *args)

    # --- watches (kazoo's threads: mark and wake, nothing else) ---------------------------

    def _wake_threadsafe(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:
            pass  # the loop is closed: the broker is gone

    def _on_brokers_changed(self, *_args: Any) -> Any:
        self._dirty_brokers = True
        self._wake_threadsafe()
        return not self._closing

    def _on_topics_changed(self, *_args: Any) -> Any:
        self._dirty_topics = True
        self._wake_threadsafe()
        return not self._closing

    def _on_controller_changed(self, *_args: Any) -> Any:
        self._dirty_controller = True
        self._wake_threadsafe()
        return not self._closing

    def _state_watcher(self, tp: TopicPartition) -> Callable[..., Any]:
        def on_state(*_args: Any) -> Any:
            if self._closing or tp not in self._watched_states:
                return False  # kazoo's DataWatch stops on False
            self.loop.call_soon_threadsafe(self._mark_state_dirty, tp)
            return True
        return on_state

    def _mark_state_dirty(self, tp: TopicPartition) -> None:
        self._dirty_states.add(tp)
        self._wake.set()

    def _on_session_state(self, state: Any) -> None:
        name = str(getattr(state, "name", state)).upper()
        if "LOST" in name:
            # A new session needs a new registration (Kafka's ZK session expiry handler).
            self._reregister = True
        elif "CONNECTED" in name and self._reregister:
            self._wake_threadsafe()

    # --- the metadata loop -------------------------------------------------------------------

    async def _metadata_loop(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            try:
                await self._refresh()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - ZooKeeper away: retry after a pause
                REPEATS.log(log, logging.WARNING, "broker %d: reading the cluster metadata "
                            "failed; retrying", self.broker_id, exc_info=True)
                await asyncio.sleep(_RETRY_S)
                self._wake.set()

    async def _refresh(self) -> None:
        """One pass over what the watches marked: brokers, controller, topics, states."""
        zk = self.zk
        if self._reregister and self._registration is not None:
            self._reregister = False
            try:
                self.broker_epoch = await self._blocking(self._register_blocking,
                                                         self._registration)
            except Exception:
                self._reregister = True
                raise
            # A new session: read everything again (changes missed while it was away).
            self._dirty_brokers = self._dirty_controller = self._dirty_topics = True
            self._dirty_states.update(self._watched_states)
        if self._dirty_brokers:
            self._dirty_brokers = False
            self._live_brokers = dict(await self._blocking(self._read_live_brokers))
        if self._dirty_controller:
            self._dirty_controller = False
            self._controller_id = await self._blocking(zk.controller_id)
        if self._dirty_topics:
            self._dirty_topics = False
            assignments = dict(await self._blocking(self._read_assignments))
            await self._apply_assignments(assignments)
        if self._dirty_states:
            tps = [tp for tp in self._dirty_states if tp in self._watched_states]
            self._dirty_states.clear()
            if tps:
                states = await self._blocking(self._read_states, tps)
                for tp in tps:
                    state = states.get(tp)
                    if state is None:
                        continue
                    self.states[tp] = state
                    self._apply_state(tp, state)
        self._metadata_changed.set()
        self._metadata_changed = asyncio.Event()

    # Reads that survive a corrupt znode: one bad topic, broker or state is logged and left
    # out instead of stopping the metadata of every other (bad bytes from ZooKeeper get a
    # typed ZkDataError from zk_data; never a crash or a stalled loop).

    def _read_live_brokers(self) -> dict[int, zk_data.BrokerInfo]:
        try:
            return self.zk.live_brokers()
        except zk_data.ZkDataError:
            pass
        brokers = {}
        for child in self.zk.get_children(zk_data.BROKER_IDS_PATH):
            try:
                info = self.zk.broker(int(child))
            except (ValueError, zk_data.ZkDataError) as exc:
                log.warning("broker %d: ignoring registration %s: %s", self.broker_id, child, exc)
                continue
            if info is not None:
                brokers[info.broker_id] = info
        return dict(sorted(brokers.items()))

    def _read_assignments(self) -> dict[str, zk_data.TopicAssignment]:
        try:
            return self.zk.topic_assignments()
        except zk_data.ZkDataError:
            pass
        assignments = {}
        for topic in self.zk.topics():
            try:
                assignment = self.zk.topic_assignment(topic)
            except zk_data.ZkDataError as exc:
                log.warning("broker %d: ignoring topic %s: %s", self.broker_id, topic, exc)
                continue
            if assignment is not None:
                assignments[topic] = assignment
        return assignments

    def _read_states(self, tps: list[TopicPartition]
                     ) -> dict[TopicPartition, zk_data.PartitionState]:
        try:
            return self.zk.partition_states(tps)
        except zk_data.ZkDataError:
            pass
        states = {}
        for tp in tps:
            try:
                states.update(self.zk.partition_states([tp]))
            except zk_data.ZkDataError as exc:
                log.warning("broker %d: ignoring the state of %s-%d: %s", self.broker_id,
                            tp.topic, tp.partition, exc)
        return states

    async def _apply_assignments(self, assignments: dict[str, zk_data.TopicAssignment]
                                 ) -> None:
        """Create, grow or delete local topics after ``/brokers/topics`` changed; arm the
        state watches of new partitions."""
        store = self.store
        old = self.assignments
        self._assignments = assignments
        for name in [n for n in old if n not in assignments]:
            await self._remove_topic(name)
        for name, assignment in assignments.items():
            count = len(assignment.partitions)
            if name not in self._watched_topics:
                # Partitions added later change the topic's data, not /brokers/topics.
                self._watched_topics.add(name)
                await self._blocking(self.zk.watch_data, zk_data.topic_path(name),
                                     self._topic_watcher(name))
            try:
                topic = store.topic(name)
            except errors.UnknownTopicOrPartitionError:
                topic = None
            if topic is not None and assignment.topic_id is not None \
                    and _topic_uuid(topic) != assignment.topic_id and not topic.is_internal:
                # Deleted and created again while this broker was away (Kafka's
                # INCONSISTENT_TOPIC_ID): the local log belongs to the old topic.
                log.warning("broker %d: local topic %s has another topic id than the "
                            "cluster's; replacing it", self.broker_id, name)
                await self._remove_topic(name, keep_watch=True)
                topic = None
            if topic is None:
                config = await self._blocking(self.zk.topic_config, name)
                try:
                    await self._blocking_store(self._create_local_topic, name, count,
                                               config, assignment.topic_id)
                except errors.TopicExistsError:
                    pass
                except (errors.SeglogError, OSError, ValueError):
                    log.exception("broker %d: creating local topic %s failed", self.broker_id,
                                  name)
                    continue
            else:
                # A topic this broker had before it (re)started takes the cluster's config
                # from the config manager's first read of every /config/topics/<t>.
                if topic.partitions < count:
                    await self._blocking_store(store.create_partitions, name, count)
            for partition, assigned in sorted(assignment.partitions.items()):
                tp = TopicPartition(name, partition)
                replicas = tuple(assigned)
                if self.broker_id in replicas:
                    replica = self.partitions.get(tp)
                    if replica is None:
                        try:
                            local_log = store.topic(name).log(partition)
                        except errors.PartitionOfflineError as exc:
                            # Its files failed to load: not hosted here (no fetcher, no
                            # leadership) until `seglog recover` and a restart; the leader
                            # drops it from the ISR as a replica that stopped fetching. Its
                            # state is still watched below: this broker's Metadata names
                            # the partition's leader, as every broker's does.
                            if tp not in self._offline_logged:
                                self._offline_logged.add(tp)
                                log.error("broker %d: partition %s-%d is offline: %s",
                                          self.broker_id, name, partition, exc)
                        else:
                            self.partitions[tp] = PartitionReplica(
                                tp, replicas, local_log, assignment.topic_id, self.broker_id)
                    else:
                        if replica.replicas != replicas and replica.is_leader:
                            replica.leader_state.update_replicas(replicas)  # reassigned
                        replica.replicas = replicas
                elif tp in self.partitions:
                    removed = self.partitions.pop(tp)
                    self._stop_replica(removed)
                    self._delete_removed_replica(removed)
                if tp not in self._watched_states:
                    self._watched_states.add(tp)
                    self._dirty_states.add(tp)
                    await self._blocking(self.zk.watch_data, zk_data.partition_state_path(tp),
                                         self._state_watcher(tp))

    def _create_local_topic(self, name: str, count: int, config: Mapping[str, str],
                            topic_id: uuid.UUID | None) -> None:
        if name in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
            # Kafka's internal topics keep their own configs (compacted) under ZooKeeper's.
            self.store.create_internal_topic(name, count, config, topic_id=topic_id)
        else:
            self.store.create_topic(name, count, dict(config) if config else None,
                                    topic_id=topic_id)
        self._topic_configs[name] = dict(config or {})

    async def _take_topic_config(self, name: str, config: dict[str, str]) -> bool:
        """The config manager's topic handler (Kafka's ``TopicConfigHandler``): local topic
        ``name`` takes the overrides ``config`` of its ``/config/topics/<t>`` (its Logs use
        them at once) and the leader's delayed produces are checked again
        (``min.insync.replicas`` may have changed). False when the topic is not local (yet)."""
        if name not in self.assignments or name not in self.store:
            return False
        if config == self._topic_configs.get(name):
            return True
        try:
            await self._blocking_store(self.store.alter_topic_config, name, config)
        except errors.UnknownTopicOrPartitionError:
            return False
        except (errors.SeglogError, OSError) as exc:
            log.warning("broker %d: config %s of topic %s not applied: %s",
                        self.broker_id, config, name, exc)
            return True
        self._topic_configs[name] = dict(config)
        log.info("broker %d: topic %s config is now %s", self.broker_id, name, config)
        for replica in self.partitions.values():
            if replica.tp.topic == name and replica.is_leader:
                self._check_waiters(replica)
        return True

    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` topic ``topic``'s whole override set in the cluster: written to
        ``/config/topics/<t>``, then announced in ``/config/changes`` so every broker takes
        it (:mod:`~seglog.cluster.config_changes`). Returns once the znode is written; raises
        the ZooKeeper client's errors when it could not be (nothing is announced then)."""
        from .config_changes import write_entity_config

        await self._blocking(write_entity_config, self.zk, zk_data.CONFIG_TYPE_TOPIC, topic,
                             dict(configs))

    async def topic_config_overrides(self, topic: str) -> dict[str, str] | None:
        """The overrides in ``/config/topics/<t>`` (the seam's; empty when none are set)."""
        config: dict[str, str] = await self._blocking(self.zk.entity_config,
                                                      zk_data.CONFIG_TYPE_TOPIC, topic)
        return config

    async def alter_broker_configs(self, broker_id: int | None,
                                   configs: Mapping[str, str]) -> None:
        """Make ``configs`` the whole dynamic broker layer of broker ``broker_id``
        (``/config/brokers/<id>``) or, for None, of the cluster (``/config/brokers/<default>``),
        announced as :meth:`alter_topic_configs` does. Every broker's listeners
        (:meth:`add_broker_config_listener`) take it."""
        from .config_changes import write_entity_config

        await self._blocking(write_entity_config, self.zk, zk_data.CONFIG_TYPE_BROKER,
                             zk_data.broker_config_entity(broker_id), dict(configs))

    def acl_store(self, on_change: Callable[[frozenset[AclBinding]], None]) -> AclStore:
        """The cluster's ACLs in ZooKeeper, Kafka 2.x's layout (:mod:`.acl_changes`): the
        changes made through any broker reach ``on_change``."""
        from .acl_changes import ZkAclStore

        return ZkAclStore(zk=self.zk, loop=self.loop, run_blocking=self._blocking,
                          on_change=on_change)

    def add_broker_config_listener(self, listener: Callable[[bool, dict[str, str]], None]
                                   ) -> None:
        """Call ``listener(per_broker, values)`` on the loop whenever this broker's dynamic
        layer (``per_broker`` True) or the cluster default (False) changes in ZooKeeper, and
        at once for the layers already read (see
        :meth:`~seglog.cluster.config_changes.ConfigChangeManager.add_broker_config_listener`)."""
        self._started(self.config_changes).add_broker_config_listener(listener)

    @property
    def keeps_client_metrics(self) -> bool:
        """True: the subscriptions live in ZooKeeper (``/config/client-metrics/<name>``)."""
        return True

    async def alter_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        """Write subscription ``name``'s whole config set to ``/config/client-metrics/<name>``
        and announce it, as :meth:`alter_broker_configs` does."""
        from .config_changes import write_entity_config

        await self._blocking(write_entity_config, self.zk, zk_data.CONFIG_TYPE_CLIENT_METRICS,
                             name, dict(configs))

    def add_client_metrics_listener(self, listener: Callable[[str, dict[str, str]], None]
                                    ) -> None:
        """See :meth:`~seglog.cluster.config_changes.ConfigChangeManager.add_client_metrics_listener`."""
        self._started(self.config_changes).add_client_metrics_listener(listener)

    @property
    def keeps_group_configs(self) -> bool:
        """True: the group configs live in ZooKeeper (``/config/groups/<group id>``)."""
        return True

    async def alter_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Write group ``group_id``'s whole config set to ``/config/groups/<group id>`` and
        announce it, as :meth:`alter_broker_configs` does."""
        from .config_changes import write_entity_config

        await self._blocking(write_entity_config, self.zk, zk_data.CONFIG_TYPE_GROUP,
                             group_id, dict(configs))

    def add_group_config_listener(self, listener: Callable[[str, dict[str, str]], None]
                                  ) -> None:
        """See :meth:`~seglog.cluster.config_changes.ConfigChangeManager.add_group_config_listener`."""
        self._started(self.config_changes).add_group_config_listener(listener)

    @property
    def keeps_client_quotas(self) -> bool:
        """True: the client quota entities live in ZooKeeper (``/config/users|clients|ips``)."""
        return True

    async def alter_client_quota(self, entity: tuple[tuple[str, str | None], ...],
                                 changes: Mapping[str, str | None]) -> None:
        """Change client quota ``entity`` in ZooKeeper (read-modify-write of its znode, other
        keys kept) and announce it (:mod:`~seglog.cluster.client_quotas_zk`)."""
        from .client_quotas_zk import alter_entity

        await self._blocking(alter_entity, self.zk, entity, dict(changes))

    def add_client_quota_listener(
            self, listener: Callable[[tuple[tuple[str, str | None], ...], dict[str, float]],
                                     None]) -> None:
        """See :meth:`~seglog.cluster.config_changes.ConfigChangeManager.add_client_quota_listener`."""
        self._started(self.config_changes).add_client_quota_listener(listener)

    def _topic_watcher(self, name: str) -> Callable[..., Any]:
        def on_topic(*_args: Any) -> Any:
            if self._closing or name not in self._watched_topics:
                return False
            self._dirty_topics = True
            self._wake_threadsafe()
            return True
        return on_topic

    async def _remove_topic(self, name: str, *, keep_watch: bool = False) -> None:
        self._topic_configs.pop(name, None)
        for tp in [tp for tp in self.partitions if tp.topic == name]:
            self._stop_replica(self.partitions.pop(tp))
        if not keep_watch:
            self._watched_topics.discard(name)
            for tp in [tp for tp in self._watched_states if tp.topic == name]:
                self._watched_states.discard(tp)
                self.states.pop(tp, None)
        try:
            await self._blocking_store(self.store.delete_topic, name)
        except errors.UnknownTopicOrPartitionError:
            pass
        except (errors.SeglogError, OSError):
            log.exception("broker %d: deleting local topic %s failed", self.broker_id, name)
        self._notify()

    def _stop_replica(self, replica: PartitionReplica) -> None:
        if self.fetcher is not None:
            self.fetcher.remove_partitions([replica.tp])
        was_leader = replica.is_leader
        replica.role = ROLE_NONE
        replica.leader_state.resign()
        self._fail_waiters(replica, codes.NOT_LEADER_OR_FOLLOWER)
        if was_leader:
            self._tell_listeners("on_become_follower", replica.tp)

    # --- leader and follower transitions ----------------------------------------------------

    def _apply_state(self, tp: TopicPartition, state: zk_data.PartitionState) -> None:
        """Act on a partition's ``state`` znode as read (Kafka's ``becomeLeaderOrFollower``
        per partition, and the ISR updates a leader sees)."""
        replica = self.partitions.get(tp)
        if replica is None:
            return
        if state.leader_epoch > replica.leader_epoch:
            if state.leader == self.broker_id:
                self._make_leader(replica, state)
            else:
                self._make_follower(replica, state)
        elif state.leader_epoch == replica.leader_epoch and state.zk_version > replica.zk_version:
            # The same epoch, a newer version: an ISR change the leader made (ours, confirmed
            # by this read when the write's own answer was lost, or a write we lost to).
            if replica.is_leader and replica.leader_state.pending_isr is not None \
                    and set(replica.leader_state.pending_isr) == set(state.isr):
                self._count_isr_change(replica.isr, state.isr)  # our own write, confirmed
            replica.isr = tuple(state.isr)
            replica.zk_version = state.zk_version
            replica.controller_epoch = state.controller_epoch
            if replica.is_leader and state.leader == self.broker_id:
                replica.leader_state.update_isr(state.isr, zk_version=state.zk_version)
                self._maybe_increment_high_watermark(replica)
                self._check_waiters(replica)
        # An older epoch: a stale read; ignored (the watch brings the newer one).

    def _count_isr_change(self, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        """Count this leader's own ISR write that succeeded (Kafka marks IsrShrinksPerSec /
        IsrExpandsPerSec on AlterPartition's success; the controller's removals of a dead
        broker are not the leader's shrinks)."""
        if len(new) < len(old):
            self.isr_shrinks += 1
        elif len(new) > len(old):
            self.isr_expands += 1

    def _record_state(self, replica: PartitionReplica, state: zk_data.PartitionState) -> None:
        replica.leader = state.leader
        replica.leader_epoch = state.leader_epoch
        replica.isr = tuple(state.isr)
        replica.controller_epoch = state.controller_epoch
        replica.zk_version = state.zk_version

    def _make_leader(self, replica: PartitionReplica, state: zk_data.PartitionState) -> None:
        """``Partition.makeLeader``: the epoch start offset asserted in the epoch cache before
        any record of the new epoch, the followers' state reset, the high watermark maybe
        moved (the ISR may be this broker alone)."""
        self._started(self.fetcher).remove_partitions([replica.tp])
        self._record_state(replica, state)
        log_ = replica.log
        log_.become_leader(state.leader_epoch)
        replica.leader_state.make_leader(
            leader_epoch=state.leader_epoch, isr=replica.isr, replicas=replica.replicas,
            zk_version=state.zk_version, controller_epoch=state.controller_epoch,
            leader_end_offset=log_.end_offset, now_ms=_now_ms())
        replica.role = ROLE_LEADER
        log.info("broker %d: leader of %s-%d in epoch %d, ISR %s, end offset %d, high "
                 "watermark %d", self.broker_id, replica.tp.topic, replica.tp.partition,
                 state.leader_epoch, list(replica.isr), log_.end_offset, log_.high_watermark)
        self._maybe_increment_high_watermark(replica)
        self._check_waiters(replica)
        self._notify()
        self._tell_listeners("on_become_leader", replica.tp, state.leader_epoch)

    def _make_follower(self, replica: PartitionReplica, state: zk_data.PartitionState) -> None:
        """``Partition.makeFollower`` and ``ReplicaManager.makeFollowers``: the delayed
        produces answer NOT_LEADER_OR_FOLLOWER, the fetcher takes the partition to the new
        leader at the new epoch (truncating first, on every epoch change)."""
        from .fetcher import FetchTarget

        self._record_state(replica, state)
        was_leader = replica.is_leader
        replica.role = ROLE_FOLLOWER
        replica.leader_state.resign(leader_epoch=state.leader_epoch)
        self._fail_waiters(replica, codes.NOT_LEADER_OR_FOLLOWER)
        replica.log.become_follower()
        if state.leader >= 0:
            self._started(self.fetcher).add_partitions({replica.tp: FetchTarget(
                leader_id=state.leader, leader_epoch=state.leader_epoch, log=replica.log,
                topic_id=replica.topic_id)})
        else:
            self._started(self.fetcher).remove_partitions([replica.tp])
        log.info("broker %d: follower of %s-%d in epoch %d (leader %d), end offset %d, high "
                 "watermark %d", self.broker_id, replica.tp.topic, replica.tp.partition,
                 state.leader_epoch, state.leader, replica.log.end_offset,
                 replica.log.high_watermark)
        self._notify()
        if was_leader:
            self._tell_listeners("on_become_follower", replica.tp)

    def _resolve_broker(self, broker_id: int) -> tuple[str, int] | None:
        info = self.live_brokers.get(broker_id)
        if info is None:
            return None
        return self.inter_broker.address(info)

    def _on_follower_high_watermark(self, tp: TopicPartition, high_watermark: int) -> None:
        pass  # a follower's readers are none (consumers read from leaders)

    # --- the leader's data path ----------------------------------------------------------------

    def leader_replica(self, tp: TopicPartition) -> PartitionReplica | None:
        """The replica of ``tp`` when this broker leads it, else None."""
        replica = self.partitions.get(tp)
        return replica if replica is not None and replica.is_leader else None

    def check_leader_epoch(self, replica: PartitionReplica, current_leader_epoch: int) -> int:
        """Kafka's fencing of a request's ``CurrentLeaderEpoch`` (``Partition
        .localLogWithEpochOrThrow``): NONE for -1 or this leader's epoch,
        FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer. The negative control
        ``skip_epoch_check`` accepts any."""
        if current_leader_epoch == -1 or current_leader_epoch == replica.leader_epoch:
            return codes.NONE
        if self.test_breaks.enabled("skip_epoch_check"):
            return codes.NONE
        if current_leader_epoch < replica.leader_epoch:
            return codes.FENCED_LEADER_EPOCH
        return codes.UNKNOWN_LEADER_EPOCH

    def min_insync_replicas(self, replica: PartitionReplica) -> int:
        """The partition's ``min.insync.replicas`` (the topic config, else the broker's)."""
        return int(replica.log.config.min_insync_replicas)

    def check_acks_all_before_append(self, replica: PartitionReplica) -> int:
        """``Partition.appendRecordsToLeader``'s check for acks=-1: NOT_ENOUGH_REPLICAS when
        the committed ISR is smaller than ``min.insync.replicas`` (nothing is written)."""
        return replica.leader_state.min_isr_check(self.min_insync_replicas(replica))

    def after_leader_append(self, replica: PartitionReplica) -> None:
        """A leader append happened: the high watermark may move (an ISR of one)."""
        if replica.is_leader:
            self._maybe_increment_high_watermark(replica)

    async def wait_acks_all(self, replica: PartitionReplica, required_offset: int,
                            timeout_s: float) -> int:
        """Kafka's ``DelayedProduce`` for one partition of an acks=-1 produce whose last
        offset is ``required_offset - 1``: NONE once the high watermark reaches
        ``required_offset`` with the ISR at ``min.insync.replicas`` or more,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it meanwhile (the records
        stay), NOT_LEADER_OR_FOLLOWER when this broker stops leading, REQUEST_TIMED_OUT after
        ``timeout_s``. The negative control ``ack_on_append`` answers NONE at once."""
        code = self.acks_all_status(replica, required_offset)
        if code is not None:
            return code
        waiter = self.loop.create_future()
        entry = (required_offset, waiter)
        replica.waiters.append(entry)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), max(timeout_s, 0.0))
        except asyncio.TimeoutError:
            return codes.REQUEST_TIMED_OUT
        finally:
            try:
                replica.waiters.remove(entry)
            except ValueError:
                pass

    def acks_all_status(self, replica: PartitionReplica, required_offset: int) -> int | None:
        """NONE at once under the negative control ``ack_on_append``; else
        :meth:`_acks_all_status`."""
        if self.test_breaks.enabled("ack_on_append"):
            return codes.NONE
        return self._acks_all_status(replica, required_offset)

    def _acks_all_status(self, replica: PartitionReplica, required_offset: int) -> int | None:
        if not replica.is_leader or self._closing:
            return codes.NOT_LEADER_OR_FOLLOWER
        return replica.leader_state.acks_all_result(
            required_offset, high_watermark=replica.log.high_watermark,
            min_insync_replicas=self.min_insync_replicas(replica))

    def _check_waiters(self, replica: PartitionReplica) -> None:
        for required_offset, waiter in list(replica.waiters):
            if waiter.done():
                continue
            code = self._acks_all_status(replica, required_offset)
            if code is not None:
                waiter.set_result(code)

    def _fail_waiters(self, replica: PartitionReplica, code: int) -> None:
        for _required, waiter in list(replica.waiters):
            if not waiter.done():
                waiter.set_result(code)

    def diverging_epoch(self, replica: PartitionReplica, last_fetched_epoch: int,
                        fetch_offset: int) -> tuple[int, int] | None:
        """``Partition.readRecords``' divergence check of a follower's fetch (v12+):
        ``(epoch, end offset)`` to send as ``DivergingEpoch`` when the follower's last fetched
        epoch ends earlier here (or is unknown here) than its fetch offset; None when the
        follower's log agrees. The negative control ``skip_epoch_check`` serves the stale
        epoch: no ``DivergingEpoch`` ever (the follower keeps a tail the leader's log does
        not have)."""
        if self.test_breaks.enabled("skip_epoch_check"):
            return None
        log_ = replica.log
        return diverging_epoch(last_fetched_epoch, fetch_offset, log_.end_offset_for_epoch,
                               log_start_offset=log_.start_offset, breaks=self.test_breaks)

    def follower_fetched(self, replica: PartitionReplica, replica_id: int,
                         fetch_offset: int, leader_end_offset: int,
                         follower_log_start_offset: int) -> None:
        """``ReplicaManager.updateFollowerFetchState``: a follower asked for ``fetch_offset``
        (so it holds everything below; ``leader_end_offset``: the leader's before the read);
        the ISR may grow, the high watermark may move, the delayed produces may complete."""
        if not replica.is_leader:
            return
        state = replica.leader_state
        if not state.update_follower_fetch_state(
                replica_id, fetch_offset=fetch_offset, leader_end_offset=leader_end_offset,
                now_ms=_now_ms(), follower_log_start_offset=follower_log_start_offset):
            return
        self._maybe_expand_isr(replica, replica_id)
        self._maybe_increment_high_watermark(replica)

    def _maybe_increment_high_watermark(self, replica: PartitionReplica) -> None:
        log_ = replica.log
        try:
            new_hw = replica.leader_state.maybe_increment_high_watermark(
                log_.high_watermark, leader_end_offset=log_.end_offset, now_ms=_now_ms(),
                lag_time_max_ms=self.lag_time_max_ms)
            if new_hw is not None:
                log_.update_high_watermark(new_hw)
                self._notify()
        except errors.LogClosedError:
            return
        self._check_waiters(replica)

    # --- ISR changes (the leader's conditional writes) -------------------------------------------

    def _maybe_expand_isr(self, replica: PartitionReplica, replica_id: int) -> None:
        if replica_id in self.removing_replicas(replica.tp):
            return  # leaving by a reassignment: never back into the ISR (see the method)
        new_isr = replica.leader_state.isr_to_expand(
            replica_id, high_watermark=replica.log.high_watermark)
        if new_isr is not None:
            self._write_isr(replica, tuple(new_isr), "expand")

    async def _isr_expiration_loop(self) -> None:
        period_s = self.lag_time_max_ms / 2000
        while not self._closing:
            await asyncio.sleep(period_s)
            now_ms = _now_ms()
            for replica in list(self.partitions.values()):
                if not replica.is_leader:
                    continue
                try:
                    new_isr = replica.leader_state.isr_to_shrink(
                        leader_end_offset=replica.log.end_offset, now_ms=now_ms,
                        lag_time_max_ms=self.lag_time_max_ms)
                except errors.LogClosedError:
                    continue
                if new_isr is not None:
                    self._write_isr(replica, tuple(new_isr), "shrink")

    def _write_isr(self, replica: PartitionReplica, new_isr: tuple[int, ...], why: str) -> None:
        """Start the CAS of ``state`` with ``new_isr`` (leader, leader epoch and controller
        epoch unchanged); pending until it is confirmed."""
        if not replica.leader_state.isr_update_started(new_isr):
            return
        expected = replica.zk_version
        state = zk_data.PartitionState(leader=self.broker_id, leader_epoch=replica.leader_epoch,
                               isr=new_isr, controller_epoch=replica.controller_epoch,
                               zk_version=expected)
        log.info("broker %d: %s ISR of %s-%d from %s to %s (epoch %d, zkVersion %d)",
                 self.broker_id, why, replica.tp.topic, replica.tp.partition,
                 list(replica.isr), list(new_isr), replica.leader_epoch, expected)
        self.loop.create_task(self._isr_write(replica, state, expected))

    async def _isr_write(self, replica: PartitionReplica, state: zk_data.PartitionState,
                         expected: int) -> None:
        from .zk_client import BadVersionError

        tp = replica.tp
        try:
            version = await self._blocking(self.zk.update_isr, tp, state, expected)
        except BadVersionError:
            # Someone else (the controller, a newer leader) wrote the state: stay pending and
            # let the watch bring what won (never assume our write happened).
            log.info("broker %d: ISR write for %s-%d lost its CAS (zkVersion %d); waiting for "
                     "the state that won", self.broker_id, tp.topic, tp.partition, expected)
            replica.leader_state.isr_update_failed()
            self._mark_state_dirty(tp)
            return
        except Exception:  # noqa: BLE001 - ZooKeeper away: pending until the state is read
            # Whether it was written is unknown: the proposal stays pending and the state
            # read after the reconnection decides (the same epoch, a newer version).
            log.warning("broker %d: ISR write for %s-%d failed", self.broker_id, tp.topic,
                        tp.partition, exc_info=True)
            self._mark_state_dirty(tp)
            self.loop.create_task(self._retry_isr_write(replica, state, expected))
            return
        if replica.is_leader and replica.leader_epoch == state.leader_epoch \
                and replica.leader_state.isr_update_succeeded(state.isr, version):
            self._count_isr_change(replica.isr, state.isr)
            replica.isr = tuple(state.isr)
            replica.zk_version = version
            self._maybe_increment_high_watermark(replica)
            self._check_waiters(replica)

    async def _retry_isr_write(self, replica: PartitionReplica, state: zk_data.PartitionState,
                               expected: int) -> None:
        """After a write whose outcome is unknown (ZooKeeper away): when the state read since
        still has the version the write expected, nothing else will move this partition's
        ISR (no newer version arrives to settle the pending change), so the same CAS is sent
        again; a write that did land is recognised by ``update_isr`` as our own."""
        await asyncio.sleep(self.lag_time_max_ms / 2000)
        if (self._closing or not replica.is_leader
                or replica.leader_epoch != state.leader_epoch or replica.zk_version != expected
                or replica.leader_state.pending_isr != tuple(state.isr)):
            return  # settled by a newer state, a new epoch or a resignation
        await self._isr_write(replica, state, expected)

    # --- high watermark checkpoint -------------------------------------------------------------

    async def _checkpoint_loop(self) -> None:
        period_s = self.checkpoint_interval_ms / 1000
        while not self._closing:
            await asyncio.sleep(period_s)
            try:
                await self._blocking_store(self._checkpoint_high_watermarks)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - retried at the next tick
                log.exception("high watermark checkpoint failed")

    def _checkpoint_high_watermarks(self) -> None:
        self.store.checkpoint_high_watermarks()

    # --- metadata for the APIs -------------------------------------------------------------------

    async def wait_for_metadata(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the next pass of the metadata loop; whether one ran."""
        return await wait_event(self._metadata_changed, timeout_s)

    def assign_replicas(self, partitions: int, replication_factor: int
                        ) -> dict[int, list[int]]:
        """Kafka's rack-unaware placement (``AdminUtils.assignReplicasToBrokers``) of
        ``partitions`` partitions over the live brokers; raises
        :class:`~seglog.errors.InvalidReplicationFactorError` when ``replication_factor``
        exceeds them ("Replication factor: X larger than available brokers: Y.")."""
        from .election import assign_replicas_to_brokers

        return assign_replicas_to_brokers(sorted(self.live_brokers), partitions,
                                          replication_factor)

    def ensure_internal_topic(self, topic: str) -> None:
        """Nothing: an internal topic comes from ZooKeeper (FindCoordinator writes it)."""

    def coordinator_partitions(self, topic: str, *,
                               load: Callable[[int, int], Awaitable[None]],
                               unload: Callable[[int], None]) -> CoordinatorPartitions:
        """A :class:`~seglog.cluster.coordinators.CoordinatorPartitions` of ``topic``
        attached to this broker's leadership changes (see :meth:`PartitionSeam
        .coordinator_partitions`)."""
        from .coordinators import CoordinatorPartitions

        partitions = CoordinatorPartitions(topic, load=load, unload=unload)
        partitions.attach(self)
        return partitions

    def txn_marker_sender(self, coordinator: Any, *,
                          run_blocking: Callable[..., Awaitable[Any]],
                          request_timeout_ms: int, on_written: Callable[[], None]) -> Any:
        """A :class:`~seglog.cluster.txn_markers.TxnMarkerSender`: a transaction's
        partitions are led by any broker."""
        from .txn_markers import TxnMarkerSender

        return TxnMarkerSender(self, coordinator, run_blocking=run_blocking,
                               request_timeout_ms=request_timeout_ms, on_written=on_written)

    async def find_coordinator(self, topic: str, key: str, *, partitions: int,
                               replication_factor: int, topic_config: Mapping[str, str]
                               ) -> CoordinatorAnswer:
        """Kafka 2.8's FindCoordinator (:func:`~seglog.cluster.coordinators
        .locate_coordinator`): the live leader of ``topic``'s partition for ``key``."""
        from .coordinators import locate_coordinator

        return await locate_coordinator(self, topic, key, partitions=partitions,
                                        replication_factor=replication_factor,
                                        topic_config=topic_config)

    async def auto_create_topic(self, name: str, *, partitions: int,
                                replication_factor: int) -> int:
        """Kafka 2.8's ``KafkaApis.createTopic`` for a Metadata request: the topic is written
        to ZooKeeper, placed over the live brokers, and the answer is LEADER_NOT_AVAILABLE
        (the client asks again); a failure's own code (INVALID_REPLICATION_FACTOR with too
        few brokers)."""
        try:
            assignment = self.assign_replicas(partitions, replication_factor)
            await self.create_topic(name, assignment, None, {}, timeout_s=0)
            log.info("broker %d: auto-created topic %s with %d partitions, replication factor "
                     "%d (auto.create.topics.enable)", self.broker_id, name, partitions,
                     replication_factor)
        except errors.TopicExistsError:
            pass
        except (errors.SeglogError, OSError) as e:
            code = getattr(e, "kafka_error_code", -1)
            return code if isinstance(code, int) else -1
        return codes.LEADER_NOT_AVAILABLE

    async def delete_topic(self, name: str, *, timeout_s: float) -> bool:
        """Ask the controller to delete topic ``name`` (``/admin/delete_topics/<t>``) and wait
        up to ``timeout_s`` for its assignment to disappear (Kafka 2.8's
        ``DelayedDeleteTopics``); whether it did."""
        await self._blocking(self.zk.delete_topic_request, name)
        deadline = time.monotonic() + timeout_s
        while name in self.assignments:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if not await self.wait_for_metadata(min(remaining, 0.5)):
                self._dirty_topics = True
                self._wake.set()
        return True

    def assign_new_partitions(self, name: str, count: int) -> dict[int, list[int]]:
        """Kafka's placement of the partitions that grow topic ``name`` to ``count``
        (``AdminZkClient.createNewPartitionsAssignment``): as many replicas as partition 0,
        starting at the live broker of partition 0's first replica."""
        from .election import assign_replicas_to_brokers

        assignment = self.assignments[name].partitions
        first = list(assignment[0])
        brokers = sorted(self.live_brokers)
        start = next((i for i, b in enumerate(brokers) if b >= first[0]), 0)
        return assign_replicas_to_brokers(brokers, count - len(assignment), len(first),
                                          fixed_start_index=start,
                                          start_partition_id=len(assignment))

    async def add_partitions(self, name: str, added: Mapping[int, list[int]], *,
                             timeout_s: float) -> None:
        """Write topic ``name``'s assignment with the partitions ``added`` and wait up to
        ``timeout_s`` for the controller to give them a state. Raises
        :class:`~seglog.errors.UnknownTopicOrPartitionError` when the topic is gone."""
        current = self.assignments.get(name)
        if current is None:
            raise errors.UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        partitions = {p: list(r) for p, r in current.partitions.items()}
        partitions.update({p: list(r) for p, r in added.items()})
        assignment = zk_data.TopicAssignment(topic=name, topic_id=current.topic_id,
                                             partitions=partitions)
        await self._blocking(self.zk.set_topic_assignment, assignment)
        await self._wait_for_states(name, list(added), timeout_s)

    async def _wait_for_states(self, name: str, partitions: list[int], timeout_s: float) -> None:
        self._dirty_topics = True
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        tps = [TopicPartition(name, p) for p in partitions]
        while not all(tp in self.states for tp in tps):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if not await self.wait_for_metadata(min(remaining, 0.5)):
                # A state written after the watch was armed wakes us; else read once more.
                self._dirty_states.update(tp for tp in tps if tp in self._watched_states)
                self._dirty_topics = True
                self._wake.set()

    async def create_topic(self, name: str, assignment: Mapping[int, list[int]],
                           config: Any, overrides: Mapping[str, Any], *, timeout_s: float
                           ) -> uuid.UUID:
        """Write topic ``name`` with ``assignment`` (partition -> replicas) and its config
        ``overrides`` (``/config/topics/<t>``; ``config``, the full LogConfig, is what every
        broker derives from them) to ZooKeeper and wait up to ``timeout_s`` for the
        controller to give every partition its first state (Kafka 2.8 answers CreateTopics
        then). Returns the topic id. Raises :class:`~seglog.errors.TopicExistsError`; a
        timeout is not an error (the topic is created; the controller is late)."""
        del config
        topic_id = zk_data.new_topic_id()
        topic = zk_data.TopicAssignment(topic=name, topic_id=topic_id,
                                partitions={p: list(r) for p, r in assignment.items()})
        from .zk_client import NodeExistsError

        written = {k: str(v) for k, v in overrides.items() if v is not None}
        try:
            await self._blocking(self.zk.create_topic, topic, written)
        except NodeExistsError:
            raise errors.TopicExistsError(f"Topic '{name}' already exists.") from None
        await self._wait_for_states(name, list(assignment), timeout_s)
        return topic_id

    def finalized_features_store(self, on_change: Callable[[int, dict[str, int]], None]
                                 ) -> Any:
        """Kafka 2.8's ``/feature`` znode (:mod:`.features_zk`), watched: the changes made
        through any broker reach ``on_change(epoch, levels)``."""
        from .features_zk import ZkFeatureStore

        return ZkFeatureStore(zk=self.zk, loop=self.loop, run_blocking=self._blocking,
                              on_change=on_change)


    # --- leader elections and partition reassignments (through the controller) -------------

    def attach_controller(self, controller: Any) -> None:
        """This broker's :class:`~seglog.cluster.controller.Controller`: ElectLeaders and
        reassignments run on it when it is the active controller (Kafka 2.8's KafkaApis hands
        them to its own controller, which answers NOT_CONTROLLER unless active)."""
        self._controller = controller

    async def _on_controller(self, fn: Callable[[Any], _Result], timeout_s: float
                             ) -> tuple[bool, _Result | None]:
        """``fn(controller)`` run on the controller thread: ``(True, its result)``,
        ``(False, None)`` when this broker has no controller (yet), ``(True, None)`` when it did not run
        within ``timeout_s`` (at least :data:`CONTROLLER_CALL_MIN_S`: a busy queue)."""
        controller = getattr(self, "_controller", None)
        if controller is None:
            return False, None
        future = controller.submit(lambda: fn(controller))
        try:
            result: _Result = await asyncio.wait_for(
                asyncio.wrap_future(future), max(timeout_s, CONTROLLER_CALL_MIN_S))
        except asyncio.TimeoutError:
            return True, None
        return True, result

    async def elect_leaders(self, election_type: int, partitions: Sequence[TopicPartition], *,
                            timeout_s: float) -> dict[TopicPartition, tuple[int, str | None]]:
        """The controller's elections (NOT_CONTROLLER unless this broker is the active
        controller), then Kafka's ``DelayedElectLeader``: each elected partition answers
        NONE once this broker's metadata shows its new leader, REQUEST_TIMED_OUT after
        ``timeout_s``."""
        deadline_s = time.monotonic() + timeout_s
        ran, outcome = await self._on_controller(
            lambda controller: controller.elect_leaders(election_type, partitions), timeout_s)
        if outcome is None:
            code = codes.REQUEST_TIMED_OUT if ran else codes.NOT_CONTROLLER
            return {tp: (code, None) for tp in partitions}
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        expected: dict[TopicPartition, int] = {}
        for tp, (code, message, leader) in outcome.items():
            if code == codes.NONE:
                expected[tp] = leader
            else:
                results[tp] = (code, message)
        while expected:
            for tp, leader in list(expected.items()):
                state = self.states.get(tp)
                if state is not None and state.leader == leader:
                    results[tp] = (codes.NONE, None)
                    del expected[tp]
            remaining_s = deadline_s - time.monotonic()
            if not expected or remaining_s <= 0:
                break
            await self.wait_for_metadata(min(remaining_s, METADATA_POLL_S))
        for tp in expected:
            results[tp] = (codes.REQUEST_TIMED_OUT, None)
        return results

    async def alter_partition_reassignments(
            self, targets: Sequence[tuple[TopicPartition, tuple[int, ...] | None]], *,
            allow_replication_factor_change: bool, timeout_s: float
    ) -> list[tuple[int, str | None]]:
        """The controller's ``processApiPartitionReassignment`` (NOT_CONTROLLER unless this
        broker is the active controller): answered once the reassignment is written to
        ZooKeeper and started, not when it completes (ListPartitionReassignments follows)."""
        ran, outcome = await self._on_controller(
            lambda controller: controller.alter_reassignments(
                targets, allow_replication_factor_change=allow_replication_factor_change),
            timeout_s)
        if outcome is None:
            code = codes.REQUEST_TIMED_OUT if ran else codes.NOT_CONTROLLER
            return [(code, None)] * len(targets)
        return list(outcome)


    def removing_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """The replicas of ``tp`` a reassignment is removing (its assignment's
        ``removing_replicas``). The leader never adds one to the ISR: the controller's
        completion writes the ISR without them before the assignment without them, and
        this broker may read the two apart (Kafka's controller sends the target replica set
        to the leader first, for the same reason)."""
        assignment = self._assignments.get(tp.topic)
        if assignment is None:
            return ()
        return tuple(assignment.removing_replicas.get(tp.partition, ()))

    # --- replication throttles (KIP-73, :mod:`.replication_quota`) --------------------------

    def _start_replication_quotas(self) -> None:
        #: The leader's and the follower's replication throttles.
        self.leader_quota = ReplicationQuota("leader")
        self.follower_quota = ReplicationQuota("follower")
        #: The dynamic layers of the two rates: per broker (True) and cluster default (False).
        self._throttle_layers: dict[bool, dict[str, str]] = {}
        self._apply_throttle_rates()

    def _take_replication_throttles(self, per_broker: bool, values: dict[str, str]) -> None:
        """A dynamic broker layer changed (Kafka's ``BrokerConfigHandler``): the rates are
        this broker's own, else the cluster default's, else the static config's, else none."""
        self._throttle_layers[per_broker] = dict(values)
        self._apply_throttle_rates()

    def _apply_throttle_rates(self) -> None:
        for name, quota in (("leader.replication.throttled.rate", self.leader_quota),
                            ("follower.replication.throttled.rate", self.follower_quota)):
            value: Any = UNBOUNDED_BYTES_PER_S
            for layer in (self._throttle_layers.get(True, {}),
                          self._throttle_layers.get(False, {}), self.config):
                if layer.get(name) is not None:
                    value = layer[name]
                    break
            try:
                bound = int(value)
            except (TypeError, ValueError):
                log.warning("broker %d: ignoring %s=%r (not a long)", self.broker_id, name,
                            value)
                continue
            if bound != quota.bound_bytes_per_s:
                quota.update_bound(bound)
                log.info("broker %d: %s is now %d bytes/s", self.broker_id, name, bound)

    def _partition_throttled(self, tp: TopicPartition, leader_side: bool) -> bool:
        """Kafka's ``ReplicationQuotaManager.isThrottled``: the topic's throttled replicas
        list of that side names ``tp`` with this broker (or is ``*``)."""
        replica = self.partitions.get(tp)
        if replica is None:
            return False
        config = replica.log.config
        entries = (config.leader_replication_throttled_replicas if leader_side
                   else config.follower_replication_throttled_replicas)
        if not entries:
            return False
        named = throttled_partitions(tuple(entries), self.broker_id)
        return named == ALL_REPLICAS or tp.partition in named

    def _follower_throttled(self, tp: TopicPartition) -> bool:
        return self._partition_throttled(tp, leader_side=False)

    def leader_throttled(self, replica: PartitionReplica, replica_id: int) -> bool:
        """Kafka's ``shouldLeaderThrottle``: ``replica_id`` is not in the ISR, the partition
        is throttled on the leader side here, and the leader's quota is exceeded."""
        quota = self.leader_quota
        if not quota.bounded or replica_id in replica.isr:
            return False
        if not self._partition_throttled(replica.tp, leader_side=True):
            return False
        if quota.exceeded():
            quota.throttled_count += 1
            return True
        return False

    def leader_sent(self, replica: PartitionReplica, size_bytes: int) -> None:
        """Kafka's ``quotas.leader.record(sizeOfThrottledPartitions)``: the record bytes of
        throttled partitions sent to followers (in the ISR or not)."""
        if self._partition_throttled(replica.tp, leader_side=True):
            self.leader_quota.record(size_bytes)

    # --- replicas a reassignment removed (Kafka's StopReplica with delete) -----------------

    def _delete_removed_replica(self, replica: PartitionReplica) -> None:
        """This broker left ``replica``'s assignment (a completed reassignment): its records
        go as Kafka's ``StopReplica(deletePartition=true)`` deletes the log. seglog keeps
        every partition's directory on every broker (docs/cluster.md §6.1), so the log is
        emptied in place: every segment renamed ``.deleted`` and removed
        ``file.delete.delay.ms`` later (asynchronously, as Kafka's ``-delete`` directory),
        the epoch cache and producer state cleared. On the loop thread, as a follower's
        truncation: the fetcher no longer has the partition."""
        tp = replica.tp
        log_ = replica.log
        size_bytes = log_.size_bytes
        try:
            log_.truncate_fully_and_start_at(0)
        except (errors.SeglogError, OSError) as exc:
            log.warning("broker %d: deleting the removed replica %s-%d failed: %s",
                        self.broker_id, tp.topic, tp.partition, exc)
            return
        self.removed_replicas_deleted += 1
        log.info("broker %d: replica %s-%d removed by a reassignment; its log (%d bytes) is "
                 "deleted", self.broker_id, tp.topic, tp.partition, size_bytes)

    #: How many removed replicas' logs this broker deleted (a counter for tests and logs).
    removed_replicas_deleted = 0

    def hosts_partition(self, tp: TopicPartition) -> bool:
        """Whether this broker holds a replica of ``tp`` (it is in the partition's replicas,
        adding ones included): DescribeLogDirs lists those only, as Kafka's brokers list the
        logs they have."""
        assignment = self._assignments.get(tp.topic)
        if assignment is None:
            return True  # not (yet) in the cluster's metadata: listed as found
        return self.broker_id in assignment.partitions.get(tp.partition, ())


def _topic_uuid(topic: Topic) -> uuid.UUID | None:
    from ..storage import checkpoints

    try:
        return checkpoints.uuid_from_kafka_str(topic.topic_id)
    except (errors.SeglogError, ValueError, TypeError):
        return None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
