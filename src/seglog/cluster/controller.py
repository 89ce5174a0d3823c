"""The ZooKeeper-era controller: one elected broker decides every partition's leader and ISR.

Kafka 2.8.2's ``KafkaController`` with its partition and replica state machines, reduced to
what reaches ZooKeeper (research R§2, docs/cluster.md "Controller"). Every broker runs one
:class:`Controller`; the one whose :meth:`KafkaZkClient.try_elect_controller` wins the
``/controller`` + ``/controller_epoch`` ``multi`` is *active* and is the only writer of
elections. Its decisions reach the brokers through the ``state`` znodes they watch (R bottom
line 3), not through LeaderAndIsr/UpdateMetadata requests.

**One thread.** All controller work runs on one thread that drains an event queue (Kafka's
``ControllerEventManager``). ZooKeeper watch callbacks and the session listener run on kazoo's
threads; they only put an event on the queue (never block, never call ZooKeeper: kazoo #355).
Watches registered while active carry a *generation*; after a resignation their events are
dropped and their kazoo recipes are told to stop.

**What the active controller does** (the event that triggers it in brackets):

- on winning the election (``onControllerFailover``): read live brokers, topics, assignments
  and partition states; remove replicas on dead brokers from ISRs; create ``state`` for new
  partitions; elect leaders for offline ones; carry out pending topic deletions.
- ``/brokers/ids`` children: a new broker -> elect the offline and new partitions (an unclean
  election happens here when the topic allows it); a dead broker -> elect for the partitions
  it led, then remove it from the other ISRs (keeping the last member, epoch + 1); a bounced
  broker (same id, larger broker epoch = czxid) -> failure, then startup.
- ``/brokers/topics`` children and each topic's data: new topics or partitions -> ``state``
  created (leader = first live replica, ISR = live replicas, epoch 0).
- ``/admin/delete_topics`` children: the topic's ``state``/``partitions``/assignment and
  config znodes are deleted, then the request; brokers drop their logs when the assignment
  disappears.
- ``/config/changes`` children: a topic config may have turned unclean election on -> elect
  the offline partitions again.
- ``/admin/preferred_replica_election`` data: preferred elections for the listed partitions,
  then the request is deleted; with ``leader_imbalance_check_interval_ms`` the same strategy
  runs periodically for imbalanced brokers (Kafka's auto leader rebalance).

**Fencing.** Every write is wrapped by the client in ``check(/controller_epoch, zkVersion)``
(R§1.3.2); each ``state`` write is a zkVersion CAS, re-read and retried on BADVERSION (a
leader's own ISR write won the race); a ``state`` last written by a newer controller epoch is
never overwritten. A failed epoch check (:class:`ControllerMovedError`), a lost session or a
``/controller`` that names another broker makes this controller resign: it drops all state
and its watches go quiet. State is always re-read from ZooKeeper before an election (R§2.3).

**Observability.** One log line per decision (logger ``seglog.cluster.controller``, INFO),
``key=value`` so scripts can parse it, e.g.::

    controller 1: ELECTION partition=t-0 leader=2 leader_epoch=3 isr=2,3 controller_epoch=1 type=clean

and the same facts as a dict to ``on_event`` (see :meth:`Controller.__init__`).

Negative control: with ``elect_most_recent`` in the controller's ``test_breaks``
(:mod:`seglog.cluster.test_breaks`; tests only) every offline election ignores the ISR and
picks the first live replica, reporting it as clean
(:func:`seglog.cluster.election.elect_offline`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, TypeVar

from seglog import error_codes as codes
from seglog.cluster.reassignment import (
    ReplicaAssignment,
    check_cluster_target,
    check_replication_factor,
    reassignment_complete,
)

from seglog.cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from seglog.cluster.election import (
    NO_LEADER,
    LeaderAndIsr,
    elect_offline,
    elect_preferred,
    elect_reassign,
    initial_leader_and_isr,
    remove_replica_from_isr,
)
from seglog.cluster.zk_client import BadVersionError, ControllerMovedError, KafkaZkClient, \
    NodeExistsError, Watch
from seglog.cluster.zk_data import (
    ZkDataError,
    decode_preferred_replica_election,
    decode_reassign_partitions,
    decode_topic,
    encode_reassign_partitions,
    partition_state_path,
    REASSIGN_PARTITIONS_PATH,
    BROKER_IDS_PATH,
    CONFIG_CHANGES_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    TOPICS_PATH,
    PartitionState,
    TopicAssignment,
    topic_path,
)
from seglog.errors import InvalidTopicError
from seglog.types import TopicPartition
from seglog.log_limits import REPEATS

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: ElectLeaders' election types (Kafka's ``ElectionType``).
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1

UNCLEAN_CONFIG = "unclean.leader.election.enable"
"""The topic config (and broker default) that allows unclean leader election."""

STATE_WRITE_ATTEMPTS_MAX = 20
"""Read-decide-CAS rounds per batch before giving up until the next retry tick (Kafka loops
without a bound; a leader's ISR writes make a few rounds normal, twenty mean trouble)."""

RETRY_BACKOFF_MS = 1000
"""After a failed event (a ZooKeeper error other than a moved controller) or an unfinished
batch, the active controller re-reads everything and redoes the work this long later."""

AUTO_REBALANCE_FIRST_DELAY_MS = 5000
"""Kafka's first leader-imbalance check after becoming controller
(``scheduleAutoLeaderRebalanceTask(delay = 5, SECONDS)``), or the interval when shorter;
later ones every ``leader_imbalance_check_interval_ms``."""

STOP_TIMEOUT_MS = 10_000
"""How long :meth:`Controller.stop` waits for the controller thread."""

# Partition states of Kafka's PartitionStateMachine that matter without reassignment.
_NEW = "new"
_ONLINE = "online"
_OFFLINE = "offline"
_UNREADABLE = "unreadable"  # a state znode that is not Kafka's JSON: never written over


@dataclass
class _Event:
    kind: str
    generation: int = -1
    topic: str = ""
    call: Callable[[], None] | None = None
    partition: int = -1
    done: threading.Event | None = None


@dataclass
class _Context:
    """What the active controller knows (Kafka's ``ControllerContext``); controller thread
    only. ``leadership`` caches the last ``state`` read or written per partition."""

    live_brokers: dict[int, int] = field(default_factory=dict)  # id -> broker epoch
    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    leadership: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    partition_states: dict[TopicPartition, str] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp.topic, {}).get(tp.partition, ())

    def all_partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(topic, partition)
            for topic, parts in sorted(self.assignments.items())
            for partition in sorted(parts)
        ]

    def remove_topic(self, topic: str) -> None:
        parts = self.assignments.pop(topic, {})
        for partition in parts:
            tp = TopicPartition(topic, partition)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
        self.topics_to_delete.discard(topic)


def _leader_and_isr(state: PartitionState) -> LeaderAndIsr:
    return LeaderAndIsr(state.leader, state.leader_epoch, tuple(state.isr))


class Controller:
    """The controller module of one broker (see the module docstring).

    Thread-safety: :meth:`start`, :meth:`stop`, :meth:`run_on_controller_thread` and the
    properties may be called from any thread; everything else runs on the controller thread.
    """

    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        *,
        default_unclean: bool = False,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        leader_imbalance_check_interval_ms: int | None = None,
        leader_imbalance_per_broker_percentage: int = 10,
        test_breaks: TestBreaks = NO_TEST_BREAKS,
    ) -> None:
        """``zk``: this broker's started :class:`seglog.cluster.zk_client.KafkaZkClient` (its
        session is the controller's session). ``default_unclean``: the broker default of
        ``unclean.leader.election.enable`` (a topic's own config overrides it).

        ``on_event(event)`` is called on the controller thread with a dict for every decision;
        ``event["kind"]`` is one of ``"elected"`` (``controller_epoch``), ``"resigned"``,
        ``"election"`` (``partition``, ``leader``, ``leader_epoch``, ``isr``,
        ``controller_epoch``, ``type``: ``"new"``/``"clean"``/``"unclean"``),
        ``"no_leader"`` (``partition``, ``isr``: no replica may lead),
        ``"isr_removal"`` (``partition``, ``replica``, ``leader``, ``leader_epoch``, ``isr``,
        ``controller_epoch``), ``"topic_deleted"`` (``topic``) and ``"brokers"`` (``live``,
        ``new``, ``dead``, ``bounced``). It must not block; its exceptions are logged and
        ignored.

        ``leader_imbalance_check_interval_ms``: Kafka's ``auto.leader.rebalance.enable`` with
        ``leader.imbalance.check.interval.seconds`` (300 s there): when set, the active
        controller checks 5 s after winning (or sooner: the interval) and then at this
        interval, and for every live
        broker whose share of partitions led elsewhere than at their preferred replica (the
        assignment's head) exceeds ``leader_imbalance_per_broker_percentage`` moves them
        back where the preferred replica is in the ISR (``type=preferred``). None: off.

        ``test_breaks``: the negative controls it honours (``elect_most_recent``; tests
        only, :mod:`seglog.cluster.test_breaks`)."""
        self._zk = zk
        self._test_breaks = test_breaks
        self.broker_id = broker_id
        self._default_unclean = default_unclean
        self._on_event = on_event
        self._retry_backoff_s = retry_backoff_ms / 1000.0
        self._queue: queue.Queue[_Event] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._stop_requested = threading.Event()
        # Written on the controller thread, read anywhere (single attribute reads).
        self._active_controller_id = -1
        self._epoch = 0
        self._epoch_zk_version = -1
        self._ctx: _Context | None = None
        self._generation = 0
        self._retry_at: float | None = None
        self._imbalance_check_s = (
            None
            if leader_imbalance_check_interval_ms is None
            else leader_imbalance_check_interval_ms / 1000.0
        )
        self._imbalance_ratio_max = leader_imbalance_per_broker_percentage / 100.0
        self._rebalance_at: float | None = None
        self._lost_session = False
        # Sessions lost so far (counted on kazoo's thread when it reports LOST) and how many
        # had been lost when the current term's election began. Kafka blocks the new session
        # until its Expire event has run; kazoo does not wait for its listeners, so an
        # election queued before the loss can win on the new session before the loss's
        # "expire" is processed, and that expire must then leave the new term alone.
        self._sessions_lost = 0
        self._term_sessions_lost = -1
        self._topic_watch_tokens: dict[str, object] = {}
        # The running watches of this term (stopped on resignation) and of each topic
        # (stopped when it goes), so kazoo does not keep calling into a finished term.
        self._term_watches: list[Watch] = []
        self._topic_watches: dict[str, Watch] = {}
        self._controller_watch: Watch | None = None
        # Reassignments in progress (RS, AR, RR) and their ISR watches; controller thread.
        self._reassigning: dict[TopicPartition, ReplicaAssignment] = {}
        self._reassignment_watches: dict[TopicPartition, Watch] = {}

    # --- public -----------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether this broker is the active controller (it won the last election it saw and
        has not resigned)."""
        return self._active_controller_id == self.broker_id and self._ctx is not None

    @property
    def epoch(self) -> int:
        """The controller epoch this broker won with (0 before it ever won)."""
        return self._epoch

    @property
    def epoch_zk_version(self) -> int:
        """The zkVersion of ``/controller_epoch`` that fences this controller's writes (-1
        before it ever won)."""
        return self._epoch_zk_version

    def start(self) -> None:
        """Start the controller thread and join the election (returns at once)."""
        if self._thread is not None:
            raise RuntimeError("controller already started")
        self._thread = threading.Thread(
            target=self._run, name=f"controller-{self.broker_id}", daemon=True
        )
        self._thread.start()
        self._zk.add_session_listener(self._on_session_state)
        self._controller_watch = self._zk.watch_data(CONTROLLER_PATH, self._on_controller_node)
        self._put(_Event("startup"))

    def stop(self, timeout_ms: int = STOP_TIMEOUT_MS) -> None:
        """Resign (deleting ``/controller`` when active, so another broker takes over at once)
        and end the controller thread. Idempotent. The ZooKeeper client stays open (it is
        the broker's)."""
        self._stopping = True
        self._stop_requested.set()
        thread = self._thread
        if thread is None:
            return
        self._zk.remove_session_listener(self._on_session_state)
        if self._controller_watch is not None:
            self._controller_watch.stop()
        self._put(_Event("shutdown"))
        thread.join(timeout_ms / 1000.0)
        if thread.is_alive():
            _log.error("controller %d: thread did not stop within %d ms", self.broker_id,
                       timeout_ms)

    def run_on_controller_thread(self, fn: Callable[[], None]) -> threading.Event:
        """Queue ``fn`` behind the pending events (Kafka's tests' ``MockEvent``); returns an
        event set once it ran. For tests and tools: ``fn`` may block the controller."""
        done = threading.Event()
        self._put(_Event("call", call=fn, done=done))
        return done

    # --- kazoo-thread callbacks: enqueue only ------------------------------------------------

    def _put(self, event: _Event) -> None:
        self._queue.put(event)

    def _on_session_state(self, state: Any) -> None:
        name = str(getattr(state, "value", state)).upper()
        if self._stopping:
            return
        if name.endswith("LOST"):
            self._lost_session = True
            self._sessions_lost += 1
            self._put(_Event("expire", generation=self._sessions_lost))
        elif name.endswith("CONNECTED"):
            if self._lost_session:
                self._lost_session = False
                self._put(_Event("reelect"))
            else:
                self._put(_Event("resync"))

    def _on_controller_node(self, *_args: Any) -> bool:
        if self._stopping:
            return False
        self._put(_Event("reelect"))
        return True

    def _watcher(self, kind: str, generation: int, topic: str = "") -> Callable[..., bool]:
        def fire(*_args: Any) -> bool:
            if self._stopping or generation != self._generation:
                return False  # a kazoo recipe stops watching when its function says False
            if topic and self._topic_watch_tokens.get(topic) is not token:
                return False
            self._put(_Event(kind, generation=generation, topic=topic))
            return True

        token = object()
        if topic:
            self._topic_watch_tokens[topic] = token
        return fire

    # --- the controller thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            due = [at for at in (self._retry_at, self._rebalance_at) if at is not None]
            timeout = min(due) - now if due else None
            if timeout is not None and timeout <= 0:
                # A timer is due: it goes before the queue, so a busy queue cannot starve it.
                if self._retry_at is not None and self._retry_at <= now:
                    event = _Event("retry")
                else:
                    event = _Event("auto_rebalance")
            else:
                try:
                    event = self._queue.get(timeout=timeout)
                except queue.Empty:
                    continue  # the next round runs the timer that is now due
            if event.kind == "shutdown":
                self._shutdown()
                return
            self._process(event)

    def _process(self, event: _Event) -> None:
        try:
            if event.kind == "call":
                try:
                    assert event.call is not None
                    event.call()
                finally:
                    assert event.done is not None
                    event.done.set()
            elif event.kind in ("startup", "reelect"):
                self._maybe_resign()
                self._elect()
            elif event.kind == "expire":
                if self.active and event.generation <= self._term_sessions_lost:
                    _log.info("controller %d: session loss %d came before the election of "
                              "epoch %d (won on a later session); staying controller",
                              self.broker_id, event.generation, self._epoch)
                else:
                    self._active_controller_id = -1
                    self._resign()
            elif event.kind == "auto_rebalance":
                self._rebalance_at = None
                if self.active and self._imbalance_check_s is not None:
                    self._rebalance_at = time.monotonic() + self._imbalance_check_s
                    self._check_and_trigger_auto_leader_rebalance()
            elif event.kind in ("retry", "resync"):
                self._retry_at = None
                if self.active:
                    self._resync()
                else:  # an election that failed on a ZooKeeper error is run again
                    self._maybe_resign()
                    self._elect()
            elif event.generation != self._generation or not self.active:
                return  # an event of a resigned term
            elif event.kind == "broker_change":
                self._process_broker_change()
            elif event.kind == "topic_change":
                self._process_topic_change()
            elif event.kind == "partition_modifications":
                self._process_partition_modifications(event.topic)
            elif event.kind == "topic_deletion":
                self._process_topic_deletion()
            elif event.kind == "config_change":
                self._trigger_online_partition_state_change()
            elif event.kind == "preferred_replica_election":
                self._process_preferred_replica_election()
            elif event.kind == "reassignment_isr_change":
                self._process_reassignment_isr_change(
                    TopicPartition(event.topic, event.partition))
            elif event.kind == "reassign_partitions":
                self._process_zk_reassign_partitions()
            else:  # pragma: no cover - a programming error
                raise AssertionError(f"unknown controller event {event.kind}")
        except ControllerMovedError as exc:
            _log.info("controller %d: controller moved while processing %s (%s); resigning",
                      self.broker_id, event.kind, exc)
            self._active_controller_id = -1
            self._resign()
            self._put(_Event("reelect"))
        except Exception:  # noqa: BLE001 - the controller thread must survive ZooKeeper errors
            _log.exception("controller %d: error while processing %s", self.broker_id,
                           event.kind)
            if not self._stopping:
                self._schedule_retry()

    def _schedule_retry(self) -> None:
        if self._retry_at is None:
            self._retry_at = time.monotonic() + self._retry_backoff_s

    def _emit(self, kind: str, **fields: Any) -> None:
        text = " ".join(f"{key}={_fmt(value)}" for key, value in fields.items())
        _log.info("controller %d: %s %s", self.broker_id, kind.upper(), text)
        if self._on_event is not None:
            try:
                self._on_event({"kind": kind, "broker_id": self.broker_id, **fields})
            except Exception:  # noqa: BLE001 - an observer must not break the controller
                _log.exception("controller %d: on_event hook failed", self.broker_id)

    # --- election of the controller (KafkaController.elect / maybeResign) --------------------

    def _maybe_resign(self) -> None:
        was_active = self.active
        current = self._zk.controller_id()
        self._active_controller_id = -1 if current is None else current
        if was_active and not self.active:
            self._resign()

    def _elect(self) -> None:
        if self._stopping:
            return
        if self._active_controller_id == self.broker_id and self._ctx is None:
            self._move_own_controller_node()
        if self._active_controller_id != -1:
            return
        sessions_lost = self._sessions_lost
        won = self._zk.try_elect_controller(self.broker_id)
        if won is None:
            self._maybe_resign()
            return
        epoch, epoch_zk_version = won
        self._epoch, self._epoch_zk_version = epoch, epoch_zk_version
        self._term_sessions_lost = sessions_lost
        self._active_controller_id = self.broker_id
        self._emit("elected", controller_epoch=epoch, epoch_zk_version=epoch_zk_version)
        try:
            self._on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception:
            # Kafka's triggerControllerMove: give the role up so another broker can try. The
            # pause keeps a persistent fault (ZooKeeper unreachable, bad znode data) from
            # turning into an election loop that burns an epoch per round.
            _log.exception("controller %d: error while becoming controller; moving it",
                           self.broker_id)
            self._active_controller_id = -1
            self._resign()
            self._stop_requested.wait(self._retry_backoff_s)
            self._delete_controller_node()

    def _move_own_controller_node(self) -> None:
        # ``/controller`` names this broker but it serves no term: a term it resigned while
        # its node lived on (a session loss reported after an election that had already won
        # on the new session). Left alone, no broker would ever be elected again, this one
        # included (Kafka's elect() stops at any /controller). The node is this term's own
        # when /controller_epoch is still at the zkVersion this broker's last win wrote (each
        # /controller is created in one multi with an epoch bump): delete it, fenced by that
        # zkVersion, and run for a new epoch. Any other owner (a broker of this id before a
        # restart, whose session has yet to expire) is waited out, as Kafka does.
        if self._epoch_zk_version < 0:
            return
        _log.info("controller %d: /controller is this broker's from epoch %d, which it no "
                  "longer serves; moving it", self.broker_id, self._epoch)
        self._delete_controller_node()
        self._maybe_resign()  # reads /controller again (no term here: nothing to resign)

    def _delete_controller_node(self) -> None:
        try:
            self._zk.delete_controller(controller_epoch_zk_version=self._epoch_zk_version)
        except ControllerMovedError:
            pass

    def _stop_watches(self) -> None:
        for watch in self._term_watches + list(self._topic_watches.values()):
            watch.stop()
        self._term_watches.clear()
        self._topic_watches.clear()
        self._topic_watch_tokens.clear()

    def _forget_topic_watch(self, topic: str) -> None:
        self._topic_watch_tokens.pop(topic, None)
        watch = self._topic_watches.pop(topic, None)
        if watch is not None:
            watch.stop()

    def _resign(self) -> None:
        self._generation += 1  # watches of the old term go quiet
        self._stop_watches()
        for watch in self._reassignment_watches.values():
            watch.stop()
        self._reassignment_watches.clear()
        self._reassigning.clear()
        self._retry_at = None
        self._rebalance_at = None
        if self._ctx is not None:
            self._ctx = None
            self._emit("resigned", controller_epoch=self._epoch)

    def _shutdown(self) -> None:
        try:
            if self.active:
                self._active_controller_id = -1
                self._resign()
                self._delete_controller_node()
            else:
                self._resign()
        except Exception:  # noqa: BLE001 - stopping must finish
            _log.exception("controller %d: error while stopping", self.broker_id)

    # --- becoming controller (onControllerFailover) ------------------------------------------

    def _on_controller_failover(self) -> None:
        self._generation += 1
        generation = self._generation
        self._stop_watches()
        ctx = _Context()
        self._ctx = ctx
        # Watches first, then the reads (Kafka's order: no change is missed in between).
        zk = self._zk
        zk.ensure_persistent_paths()  # the watched paths exist (every broker creates them)
        for path, kind in (
            (BROKER_IDS_PATH, "broker_change"),
            (TOPICS_PATH, "topic_change"),
            (DELETE_TOPICS_PATH, "topic_deletion"),
            (CONFIG_CHANGES_PATH, "config_change"),
        ):
            self._term_watches.append(zk.watch_children(path, self._watcher(kind, generation)))
        # Fires now too: a request left from an earlier term is served after the startup.
        self._term_watches.append(zk.watch_data(
            PREFERRED_REPLICA_ELECTION_PATH,
            self._watcher("preferred_replica_election", generation)))
        ctx.live_brokers = {bid: info.epoch for bid, info in zk.live_brokers().items()}
        for topic, assignment in self._read_assignments().items():
            self._add_topic(topic, assignment.partitions)
        states = self._read_states(ctx.all_partitions())
        ctx.leadership.update(states)
        ctx.topics_to_delete.update(
            t for t in zk.topic_deletion_requests() if t in ctx.assignments
        )
        # ReplicaStateMachine.startup: replicas on dead brokers leave their ISRs.
        offline_replicas: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            if tp not in ctx.leadership or tp.topic in ctx.topics_to_delete:
                continue
            for replica in ctx.replicas(tp):
                if replica not in ctx.live_brokers:
                    offline_replicas.setdefault(replica, []).append(tp)
        for replica in sorted(offline_replicas):
            self._remove_replica_from_isr(replica, offline_replicas[replica])
        # PartitionStateMachine.startup: initializePartitionState, then elect.
        for tp in ctx.all_partitions():
            ctx.partition_states[tp] = self._classify(tp)
        self._trigger_online_partition_state_change()
        self._process_topic_deletion()
        self._resume_reassignments(generation)
        if self._imbalance_check_s is not None:
            first_s = min(AUTO_REBALANCE_FIRST_DELAY_MS / 1000.0, self._imbalance_check_s)
            self._rebalance_at = time.monotonic() + first_s

    def _classify(self, tp: TopicPartition) -> str:
        assert self._ctx is not None
        state = self._ctx.leadership.get(tp)
        if state is None:
            return _NEW
        return _ONLINE if state.leader in self._ctx.live_brokers else _OFFLINE

    def _add_topic(self, topic: str,
                   partitions: Mapping[int, Iterable[int]]) -> list[TopicPartition]:
        """Record a topic's assignment (new partitions only) and watch its znode; returns the
        partitions that were not known."""
        ctx = self._ctx
        assert ctx is not None
        known = ctx.assignments.setdefault(topic, {})
        added = []
        for partition, replicas in sorted(partitions.items()):
            if partition not in known:
                known[partition] = tuple(replicas)
                added.append(TopicPartition(topic, partition))
        if topic not in self._topic_watch_tokens:
            self._topic_watches[topic] = self._zk.watch_data(
                topic_path(topic),
                self._watcher("partition_modifications", self._generation, topic),
            )
        return added

    # --- reads that survive a bad znode ------------------------------------------------------

    def _read_assignments(self) -> dict[str, TopicAssignment]:
        """Every topic's assignment; a topic whose znode is not Kafka's JSON (or whose name is
        not a topic name) is logged and left out instead of stopping the controller."""
        try:
            return self._zk.topic_assignments()
        except (ZkDataError, InvalidTopicError):
            pass
        assignments = {}
        for topic in self._zk.topics():
            try:
                assignment = self._zk.topic_assignment(topic)
            except (ZkDataError, InvalidTopicError) as exc:
                _log.error("controller %d: topic %s skipped: %s", self.broker_id, topic, exc)
                continue
            if assignment is not None:
                assignments[topic] = assignment
        return assignments

    def _read_states(self, tps: list[TopicPartition]) -> dict[TopicPartition, PartitionState]:
        """The ``state`` of each partition that has a readable one; a corrupt ``state`` is
        logged and left out (its partition is neither initialised nor elected)."""
        try:
            return self._zk.partition_states(tps)
        except (ZkDataError, InvalidTopicError):
            pass
        states = {}
        for tp in tps:
            try:
                states.update(self._zk.partition_states([tp]))
            except (ZkDataError, InvalidTopicError) as exc:
                _log.error("controller %d: state of %s skipped: %s", self.broker_id, tp, exc)
        return states

    def _resync(self) -> None:
        """Re-read everything and redo what a missed or failed event would have done
        (idempotent: every step compares ZooKeeper with the context)."""
        self._process_broker_change()
        self._process_topic_change()
        self._process_topic_deletion()
        self._trigger_online_partition_state_change()

    # --- brokers (processBrokerChange, onBrokerStartup, onBrokerFailure) ---------------------

    def _process_broker_change(self) -> None:
        ctx = self._ctx
        assert ctx is not None
        current = {bid: info.epoch for bid, info in self._zk.live_brokers().items()}
        known = ctx.live_brokers
        new = sorted(current.keys() - known.keys())
        dead = sorted(known.keys() - current.keys())
        bounced = sorted(b for b in current.keys() & known.keys() if current[b] > known[b])
        if not (new or dead or bounced):
            return
        self._emit("brokers", live=sorted(current), new=new, dead=dead, bounced=bounced)
        if new:
            for bid in new:
                known[bid] = current[bid]
            self._on_broker_startup(new)
        if bounced:
            for bid in bounced:
                del known[bid]
            self._on_broker_failure(bounced)
            for bid in bounced:
                known[bid] = current[bid]
            self._on_broker_startup(bounced)
        if dead:
            for bid in dead:
                del known[bid]
            self._on_broker_failure(dead)

    def _on_broker_startup(self, brokers: list[int]) -> None:
        # The new brokers learn their partitions from ZooKeeper themselves (no LeaderAndIsr);
        # what is left is to give offline and new partitions a leader.
        self._trigger_online_partition_state_change()

    def _on_broker_failure(self, dead: list[int]) -> None:
        ctx = self._ctx
        assert ctx is not None
        # onReplicasBecomeOffline: partitions whose leader is gone go Offline and are elected...
        for tp, state in ctx.leadership.items():
            if tp.topic in ctx.topics_to_delete:
                continue
            if state.leader not in ctx.live_brokers:
                ctx.partition_states[tp] = _OFFLINE
        self._trigger_online_partition_state_change()
        # ...then the dead replicas leave the ISRs they are still in (OfflineReplica).
        for replica in dead:
            tps = [
                tp
                for tp in ctx.all_partitions()
                if replica in ctx.replicas(tp)
                and tp in ctx.leadership
                and tp.topic not in ctx.topics_to_delete
            ]
            if tps:
                self._remove_replica_from_isr(replica, tps)

    # --- partitions (PartitionStateMachine) --------------------------------------------------

    def _trigger_online_partition_state_change(self) -> None:
        ctx = self._ctx
        assert ctx is not None
        tps = [
            tp
            for tp, state in ctx.partition_states.items()
            if state in (_NEW, _OFFLINE) and tp.topic not in ctx.topics_to_delete
        ]
        self._handle_online(sorted(tps))

    def _handle_online(self, tps: list[TopicPartition]) -> None:
        ctx = self._ctx
        assert ctx is not None
        new = [tp for tp in tps if ctx.partition_states.get(tp) == _NEW]
        to_elect = [tp for tp in tps if ctx.partition_states.get(tp) in (_OFFLINE, _ONLINE)]
        if new:
            self._initialize_leader_and_isr(new)
        if to_elect:
            self._elect_leaders(to_elect)

    def _initialize_leader_and_isr(self, tps: list[TopicPartition]) -> None:
        """New partitions: create ``state`` (first live replica leads, ISR = live replicas,
        epoch 0) with the controller-epoch check (``initializeLeaderAndIsrForPartitions``)."""
        ctx = self._ctx
        assert ctx is not None
        to_create: dict[TopicPartition, PartitionState] = {}
        for tp in tps:
            decision = initial_leader_and_isr(ctx.replicas(tp), ctx.live_brokers.keys())
            if decision is None:
                _log.warning("controller %d: new partition %s has no live replica among %s; "
                             "it waits for one", self.broker_id, tp, list(ctx.replicas(tp)))
                continue
            to_create[tp] = PartitionState(
                leader=decision.leader,
                leader_epoch=decision.leader_epoch,
                isr=decision.isr,
                controller_epoch=self._epoch,
                zk_version=0,
            )
        if not to_create:
            return
        results = self._zk.create_partition_states(
            to_create, controller_epoch_zk_version=self._epoch_zk_version
        )
        exists = []
        for tp, state in to_create.items():
            result = results.get(tp) if isinstance(results, dict) else None
            if isinstance(result, NodeExistsError):
                exists.append(tp)
                continue
            if isinstance(result, Exception):
                _log.error("controller %d: creating the state of %s failed: %r",
                           self.broker_id, tp, result)
                continue
            ctx.leadership[tp] = state
            ctx.partition_states[tp] = _ONLINE
            self._emit_election(tp, state, "new")
        if exists:
            # Written by an earlier term of ours or another controller: adopt what is there.
            found = self._read_states(exists)
            for tp in exists:
                if tp in found:
                    ctx.leadership[tp] = found[tp]
                    ctx.partition_states[tp] = self._classify(tp)
                else:  # there but not Kafka's JSON: left alone, not retried for ever
                    ctx.partition_states[tp] = _UNREADABLE
            self._schedule_retry()

    def _unclean_allowed(self, topic: str, cache: dict[str, bool]) -> bool:
        if topic not in cache:
            value = self._zk.topic_config(topic).get(UNCLEAN_CONFIG)
            if value is None:
                cache[topic] = self._default_unclean
            else:
                cache[topic] = value.strip().lower() == "true"
        return cache[topic]

    def _elect_leaders(self, tps: list[TopicPartition], *, preferred: bool = False) -> None:
        """``electLeaderForPartitions`` with the offline strategy (or, with ``preferred``, the
        preferred-replica one): re-read, decide, CAS; the partitions whose CAS lost are read
        and decided again."""
        remaining = tps
        for _ in range(STATE_WRITE_ATTEMPTS_MAX):
            if not remaining:
                return
            remaining = self._do_elect_leaders(remaining, preferred=preferred)
        if remaining:
            REPEATS.warning(_log, "controller %d: elections for %s still conflicting after %d "
                            "rounds; retrying later", self.broker_id,
                            [str(tp) for tp in remaining], STATE_WRITE_ATTEMPTS_MAX)
            self._schedule_retry()

    def _do_elect_leaders(
        self, tps: list[TopicPartition], *, preferred: bool = False
    ) -> list[TopicPartition]:
        ctx = self._ctx
        assert ctx is not None
        current = self._read_states(tps)
        unclean_cache: dict[str, bool] = {}
        ignore_isr = self._test_breaks.enabled("elect_most_recent")
        decisions: dict[TopicPartition, tuple[PartitionState, str]] = {}
        for tp in tps:
            state = current.get(tp)
            if state is None:
                _log.error("controller %d: no state for %s; election skipped",
                           self.broker_id, tp)
                continue
            if state.controller_epoch > self._epoch:
                _log.error("controller %d: state of %s written by controller epoch %d > %d; "
                           "election aborted", self.broker_id, tp, state.controller_epoch,
                           self._epoch)
                continue
            ctx.leadership[tp] = state
            replicas = ctx.replicas(tp)
            live = ctx.live_brokers.keys()
            if preferred:
                if not replicas or state.leader == replicas[0]:
                    continue  # already there
                choice = elect_preferred(replicas, _leader_and_isr(state), live)
                if choice.leader_and_isr is not None:
                    decisions[tp] = (self._next_state(choice.leader_and_isr, state), "preferred")
                continue
            if state.leader in live:
                # Led by a live broker after all (the cache was older than ZooKeeper): nothing
                # to elect, and no epoch to burn.
                ctx.partition_states[tp] = _ONLINE
                continue
            has_live_isr = any(r in live for r in state.isr)
            unclean = False if has_live_isr else self._unclean_allowed(tp.topic, unclean_cache)
            result = elect_offline(
                replicas, _leader_and_isr(state), live, unclean_enabled=unclean,
                ignore_isr=ignore_isr,
            )
            if result.leader_and_isr is None:
                _log.info("controller %d: partition %s offline: no live replica in its ISR %s "
                          "(live replicas %s, unclean election %s)", self.broker_id, tp,
                          list(state.isr), list(result.live_replicas),
                          "allowed" if unclean else "not allowed")
                self._emit("no_leader", partition=str(tp), isr=list(state.isr),
                           live_replicas=list(result.live_replicas))
                continue
            decisions[tp] = (
                self._next_state(result.leader_and_isr, state),
                "unclean" if result.unclean else "clean",
            )
        if not decisions:
            return []
        results = self._zk.set_partition_states(
            {tp: state for tp, (state, _) in decisions.items()},
            controller_epoch_zk_version=self._epoch_zk_version,
        )
        retry = []
        for tp, (state, kind) in decisions.items():
            outcome = results.get(tp)
            if isinstance(outcome, BadVersionError):
                retry.append(tp)
            elif isinstance(outcome, Exception) or outcome is None:
                _log.error("controller %d: writing the election of %s failed: %r",
                           self.broker_id, tp, outcome)
            else:
                written = dataclasses.replace(state, zk_version=outcome)
                ctx.leadership[tp] = written
                ctx.partition_states[tp] = _ONLINE
                before = current[tp]
                _log.info("controller %d: partition %s online: leader %d -> %d, leader epoch "
                          "%d -> %d, ISR %s -> %s (%s election)", self.broker_id, tp,
                          before.leader, written.leader, before.leader_epoch,
                          written.leader_epoch, list(before.isr), list(written.isr), kind)
                self._emit_election(tp, written, kind)
        return retry

    def _next_state(self, decision: LeaderAndIsr, read: PartitionState) -> PartitionState:
        """The ``state`` to CAS over ``read``: the decision, this controller's epoch, the
        version just read."""
        return PartitionState(
            leader=decision.leader,
            leader_epoch=decision.leader_epoch,
            isr=decision.isr,
            controller_epoch=self._epoch,
            zk_version=read.zk_version,
        )

    def _emit_election(self, tp: TopicPartition, state: PartitionState, kind: str) -> None:
        self._emit("election", partition=str(tp), leader=state.leader,
                   leader_epoch=state.leader_epoch, isr=list(state.isr),
                   controller_epoch=state.controller_epoch, type=kind)

    def _process_preferred_replica_election(self) -> None:
        """``/admin/preferred_replica_election`` (Kafka's ZK-triggered
        ``processReplicaLeaderElection``): a preferred election for each listed partition
        that exists and is not being deleted, then the request is deleted (epoch-checked),
        whatever the outcome. A request that is not Kafka's JSON is logged and deleted."""
        ctx = self._ctx
        assert ctx is not None
        data, version = self._zk.get_data_and_version(PREFERRED_REPLICA_ELECTION_PATH)
        if version < 0:
            return  # no request
        try:
            requested = decode_preferred_replica_election(data)
        except ZkDataError as exc:
            _log.error("controller %d: bad preferred replica election request: %s",
                       self.broker_id, exc)
            requested = []
        tps = sorted(
            {
                TopicPartition(tp.topic, tp.partition)
                for tp in requested
                if ctx.replicas(TopicPartition(tp.topic, tp.partition))
                and tp.topic not in ctx.topics_to_delete
            }
        )
        if tps:
            self._elect_leaders(tps, preferred=True)
        self._zk.delete_recursive(
            PREFERRED_REPLICA_ELECTION_PATH,
            controller_epoch_zk_version=self._epoch_zk_version,
        )

    def _check_and_trigger_auto_leader_rebalance(self) -> None:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: per preferred broker, the share of
        its partitions led elsewhere; above the limit (and the broker live), preferred
        elections for those (the ISR is checked on the state re-read)."""
        ctx = self._ctx
        assert ctx is not None
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            replicas = ctx.replicas(tp)
            if replicas and tp.topic not in ctx.topics_to_delete:
                by_preferred.setdefault(replicas[0], []).append(tp)
        candidates: list[TopicPartition] = []
        for broker, tps in sorted(by_preferred.items()):
            elsewhere = [
                tp for tp in tps if tp in ctx.leadership and ctx.leadership[tp].leader != broker
            ]
            ratio = len(elsewhere) / len(tps)
            if ratio > self._imbalance_ratio_max and broker in ctx.live_brokers:
                candidates.extend(elsewhere)
        if candidates:
            _log.info("controller %d: leader imbalance: preferred elections for %d partitions",
                      self.broker_id, len(candidates))
            self._elect_leaders(sorted(candidates), preferred=True)

    # --- replicas (ReplicaStateMachine.removeReplicasFromIsr) --------------------------------

    def _remove_replica_from_isr(self, replica: int, tps: list[TopicPartition]) -> None:
        remaining = tps
        for _ in range(STATE_WRITE_ATTEMPTS_MAX):
            if not remaining:
                return
            remaining = self._do_remove_replica_from_isr(replica, remaining)
        if remaining:
            REPEATS.warning(_log, "controller %d: removing %d from the ISR of %s still "
                            "conflicting; retrying later", self.broker_id, replica,
                            [str(tp) for tp in remaining])
            self._schedule_retry()

    def _do_remove_replica_from_isr(
        self, replica: int, tps: list[TopicPartition]
    ) -> list[TopicPartition]:
        ctx = self._ctx
        assert ctx is not None
        current = self._read_states(tps)
        updates: dict[TopicPartition, PartitionState] = {}
        for tp in tps:
            state = current.get(tp)
            if state is None:
                continue
            if state.controller_epoch > self._epoch:
                _log.error("controller %d: state of %s written by controller epoch %d > %d; "
                           "ISR removal aborted", self.broker_id, tp, state.controller_epoch,
                           self._epoch)
                continue
            ctx.leadership[tp] = state
            decision = remove_replica_from_isr(_leader_and_isr(state), replica)
            if decision is None:
                continue
            updates[tp] = PartitionState(
                leader=decision.leader,
                leader_epoch=decision.leader_epoch,
                isr=decision.isr,
                controller_epoch=self._epoch,
                zk_version=state.zk_version,
            )
        if not updates:
            return []
        results = self._zk.set_partition_states(
            updates, controller_epoch_zk_version=self._epoch_zk_version
        )
        retry = []
        for tp, state in updates.items():
            result = results.get(tp)
            if isinstance(result, BadVersionError):
                retry.append(tp)
            elif isinstance(result, Exception) or result is None:
                _log.error("controller %d: removing %d from the ISR of %s failed: %r",
                           self.broker_id, replica, tp, result)
            else:
                written = dataclasses.replace(state, zk_version=result)
                ctx.leadership[tp] = written
                if written.leader == NO_LEADER:
                    ctx.partition_states[tp] = _OFFLINE
                self._emit("isr_removal", partition=str(tp), replica=replica,
                           leader=written.leader, leader_epoch=written.leader_epoch,
                           isr=list(written.isr), controller_epoch=written.controller_epoch)
        return retry

    # --- topics (processTopicChange, processPartitionModifications, processTopicDeletion) ---

    def _process_topic_change(self) -> None:
        ctx = self._ctx
        assert ctx is not None
        assignments = self._read_assignments()
        for topic in sorted(ctx.assignments.keys() - assignments.keys()):
            ctx.remove_topic(topic)
            self._forget_topic_watch(topic)
        added: list[TopicPartition] = []
        for topic in sorted(assignments):
            if topic in ctx.topics_to_delete:
                continue
            added.extend(self._add_topic(topic, assignments[topic].partitions))
        if added:
            self._on_new_partition_creation(added)

    def _process_partition_modifications(self, topic: str) -> None:
        ctx = self._ctx
        assert ctx is not None
        try:
            assignment = self._zk.topic_assignment(topic)
        except (ZkDataError, InvalidTopicError) as exc:
            _log.error("controller %d: topic %s skipped: %s", self.broker_id, topic, exc)
            return
        if assignment is None or topic not in ctx.assignments:
            return  # deleted, or not yet seen by a topic change (which will add it whole)
        if topic in ctx.topics_to_delete:
            _log.warning("controller %d: partitions added to %s while it is being deleted are "
                         "ignored", self.broker_id, topic)
            return
        added = self._add_topic(topic, assignment.partitions)
        if added:
            self._on_new_partition_creation(added)

    def _on_new_partition_creation(self, tps: list[TopicPartition]) -> None:
        ctx = self._ctx
        assert ctx is not None
        for tp in tps:
            ctx.partition_states[tp] = _NEW
        self._handle_online(tps)

    def _process_topic_deletion(self) -> None:
        """Kafka's TopicDeletionManager without StopReplica: no broker has to confirm, so a
        requested topic's znodes go at once (state, partitions, assignment, config, then the
        request); brokers drop the logs of topics whose assignment disappeared."""
        ctx = self._ctx
        assert ctx is not None
        requested = set(self._zk.topic_deletion_requests())
        for topic in sorted(requested):
            if topic in ctx.assignments:
                ctx.topics_to_delete.add(topic)
                self._zk.delete_topic_znodes(
                    topic, controller_epoch_zk_version=self._epoch_zk_version
                )
                ctx.remove_topic(topic)
                self._forget_topic_watch(topic)
                self._emit("topic_deleted", topic=topic, controller_epoch=self._epoch)
            else:
                _log.warning("controller %d: ignoring the deletion of unknown topic %s",
                             self.broker_id, topic)
            self._zk.delete_topic_deletion_request(
                topic, controller_epoch_zk_version=self._epoch_zk_version
            )


    # --- admin requests: ElectLeaders (KIP-460) and reassignments (KIP-455) ---------------

    def submit(self, fn: Callable[[], _T]) -> "concurrent.futures.Future[_T]":
        """Run ``fn`` on the controller thread behind the pending events; its result (or
        exception) in the returned future. Any thread. A controller that stops first leaves
        the future pending: wait with a timeout."""
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)
                raise  # a moved controller still resigns

        self._put(_Event("call", call=call, done=threading.Event()))
        return future

    def elect_leaders(self, election_type: int, tps: Iterable[TopicPartition]
                      ) -> dict[TopicPartition, tuple[int, str | None, int]]:
        """Kafka's ``processReplicaLeaderElection`` for the admin client (controller thread,
        through :meth:`submit`): ``{tp: (error code, message, elected leader or -1)}``.
        NOT_CONTROLLER for all when this broker is not the active controller."""
        tps = list(dict.fromkeys(tps))
        if not self.active:
            return {tp: (codes.NOT_CONTROLLER, None, NO_LEADER) for tp in tps}
        ctx = self._ctx
        assert ctx is not None
        results: dict[TopicPartition, tuple[int, str | None, int]] = {}
        candidates: list[TopicPartition] = []
        current = self._read_states([tp for tp in tps if ctx.replicas(tp)])
        for tp in tps:
            replicas = ctx.replicas(tp)
            state = current.get(tp)
            if not replicas or state is None:
                results[tp] = (codes.UNKNOWN_TOPIC_OR_PARTITION,
                               "The partition does not exist.", NO_LEADER)
            elif tp.topic in ctx.topics_to_delete:
                results[tp] = (codes.INVALID_TOPIC_EXCEPTION, "The topic is being deleted",
                               NO_LEADER)
            elif (state.leader == replicas[0] if election_type == ELECTION_PREFERRED
                  else state.leader != NO_LEADER and state.leader in ctx.live_brokers):
                results[tp] = (codes.ELECTION_NOT_NEEDED,
                               codes.message(codes.ELECTION_NOT_NEEDED), NO_LEADER)
            else:
                candidates.append(tp)
        remaining = candidates
        for _ in range(STATE_WRITE_ATTEMPTS_MAX):
            if not remaining:
                break
            remaining = self._admin_elect_round(election_type, remaining, results)
        for tp in remaining:
            results[tp] = (codes.NOT_CONTROLLER if not self.active else
                           codes.UNKNOWN_SERVER_ERROR, "The election kept losing its write.",
                           NO_LEADER)
        return results

    def _admin_elect_round(self, election_type: int, tps: list[TopicPartition],
                           results: dict[TopicPartition, tuple[int, str | None, int]]
                           ) -> list[TopicPartition]:
        ctx = self._ctx
        assert ctx is not None
        current = self._read_states(tps)
        live = frozenset(ctx.live_brokers)
        decisions: dict[TopicPartition, PartitionState] = {}
        for tp in tps:
            state = current.get(tp)
            replicas = ctx.replicas(tp)
            if state is None or not replicas:
                results[tp] = (codes.UNKNOWN_TOPIC_OR_PARTITION,
                               "The partition does not exist.", NO_LEADER)
                continue
            if election_type == ELECTION_PREFERRED:
                choice = elect_preferred(replicas, _leader_and_isr(state), live)
                failed = (codes.PREFERRED_LEADER_NOT_AVAILABLE,
                          f"Failed to elect leader for partition {tp} under strategy "
                          "PreferredReplicaPartitionLeaderElectionStrategy")
            else:
                choice = elect_offline(replicas, _leader_and_isr(state), live,
                                       unclean_enabled=True)
                failed = (codes.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                          f"Failed to elect leader for partition {tp} under strategy "
                          "OfflinePartitionLeaderElectionStrategy(true)")
            if choice.leader_and_isr is None:
                results[tp] = (*failed, NO_LEADER)
                continue
            decisions[tp] = self._next_state(choice.leader_and_isr, state)
        if not decisions:
            return []
        written = self._zk.set_partition_states(
            decisions, controller_epoch_zk_version=self._epoch_zk_version)
        retry = []
        kind = "preferred" if election_type == ELECTION_PREFERRED else "admin_unclean"
        for tp, state in decisions.items():
            outcome = written.get(tp)
            if isinstance(outcome, BadVersionError):
                retry.append(tp)
            elif isinstance(outcome, Exception) or outcome is None:
                results[tp] = (codes.UNKNOWN_SERVER_ERROR, repr(outcome), NO_LEADER)
            else:
                state = dataclasses.replace(state, zk_version=outcome)
                ctx.leadership[tp] = state
                ctx.partition_states[tp] = _ONLINE
                self._emit_election(tp, state, kind)
                results[tp] = (codes.NONE, None, state.leader)
        return retry

    def alter_reassignments(self, targets: Iterable[tuple[TopicPartition,
                                                          tuple[int, ...] | None]], *,
                            allow_replication_factor_change: bool = True
                            ) -> list[tuple[int, str | None]]:
        """Kafka's ``processApiPartitionReassignment`` (controller thread, through
        :meth:`submit`): per target, in order, ``(error code, message)``; a target None
        cancels. NOT_CONTROLLER for all when this broker is not the active controller."""
        targets = list(targets)
        if not self.active:
            return [(codes.NOT_CONTROLLER, None)] * len(targets)
        ctx = self._ctx
        assert ctx is not None
        results: list[tuple[int, str | None]] = []
        for tp, target in targets:
            replicas = ctx.replicas(tp)
            if not replicas or tp.topic in ctx.topics_to_delete:
                results.append((codes.UNKNOWN_TOPIC_OR_PARTITION,
                                "The partition does not exist."))
                continue
            current = self._reassigning.get(tp) or ReplicaAssignment(replicas)
            if target is None:
                if not current.reassigning:
                    results.append((codes.NO_REASSIGNMENT_IN_PROGRESS, None))
                    continue
                new = current.cancelled()
            else:
                check = check_cluster_target(current, target, ctx.live_brokers)
                if check[0] == codes.NONE:
                    check = check_replication_factor(
                        current, target, allow_change=allow_replication_factor_change)
                if check[0] != codes.NONE:
                    results.append(check)
                    continue
                new = current.reassign_to(target)
            self._on_partition_reassignment(tp, new)
            results.append((codes.NONE, None))
        return results

    def _write_assignment(self, tp: TopicPartition, new: ReplicaAssignment) -> None:
        """U1/B6: ``/brokers/topics/<t>`` with the partition's RS, AR and RR (the topic's
        other partitions as ZooKeeper has them)."""
        ctx = self._ctx
        assert ctx is not None
        for _ in range(STATE_WRITE_ATTEMPTS_MAX):
            data, version = self._zk.get_data_and_version(topic_path(tp.topic))
            if version < 0:
                raise ZkDataError(f"topic {tp.topic} has no assignment")
            topic = decode_topic(tp.topic, data)
            partitions = dict(topic.partitions)
            adding = dict(topic.adding_replicas)
            removing = dict(topic.removing_replicas)
            partitions[tp.partition] = list(new.replicas)
            for table, value in ((adding, new.adding), (removing, new.removing)):
                if value:
                    table[tp.partition] = list(value)
                else:
                    table.pop(tp.partition, None)
            try:
                self._zk.set_topic_assignment(
                    dataclasses.replace(topic, partitions=partitions, adding_replicas=adding,
                                        removing_replicas=removing),
                    expected_zk_version=version)
            except BadVersionError:
                continue
            ctx.assignments.setdefault(tp.topic, {})[tp.partition] = new.replicas
            return
        raise ZkDataError(f"the assignment of {tp.topic} kept changing")

    def _on_partition_reassignment(self, tp: TopicPartition, new: ReplicaAssignment) -> None:
        """Kafka's ``onPartitionReassignment``: phase U (the new RS/AR/RR written; replicas
        no longer wanted leave the ISR), then phase A (leader epoch bumped so every replica
        of RS reads its new role; the ISR watched) or phase B (complete: leader moved into
        TRS if needed, ISR = ISR & TRS, RS = TRS written)."""
        ctx = self._ctx
        assert ctx is not None
        old_replicas = ctx.replicas(tp)
        old = self._reassigning.get(tp) or ReplicaAssignment(old_replicas)
        if old != new:
            self._write_assignment(tp, new)
            self._emit("reassignment", partition=str(tp), replicas=list(new.replicas),
                       adding=list(new.adding), removing=list(new.removing),
                       controller_epoch=self._epoch)
        if new.reassigning:
            self._reassigning[tp] = new
            self._watch_reassignment(tp)
        else:
            self._reassigning.pop(tp, None)
        unneeded = [r for r in old.replicas if r not in new.replicas]
        state = self._read_states([tp]).get(tp)
        if state is None:
            return
        if new.reassigning and not reassignment_complete(new, state.isr):
            # A1: a new leader epoch (same leader, ISR without the unneeded replicas) makes
            # every replica of RS take its role again; A2 happens on the brokers, which host
            # the replicas the assignment names.
            isr = tuple(r for r in state.isr if r not in unneeded) or state.isr
            self._write_reassignment_state(tp, state, state.leader, isr)
            return
        self._complete_reassignment(tp, new, state)

    def _complete_reassignment(self, tp: TopicPartition, new: ReplicaAssignment,
                               state: PartitionState) -> None:
        """Phase B: B3 (leader into TRS when it is not there or not live, else a new epoch),
        B4 (ISR = ISR & TRS), B6 (RS = TRS, AR = RR = []), B7 (``/admin/reassign_partitions``
        loses the partition)."""
        ctx = self._ctx
        assert ctx is not None
        target = new.target
        leader = state.leader
        if leader not in target or leader not in ctx.live_brokers:
            choice = elect_reassign(target, _leader_and_isr(state), frozenset(ctx.live_brokers))
            if choice.leader_and_isr is None:
                _log.warning("controller %d: reassignment of %s: no live in-sync replica of "
                             "%s to lead; waiting", self.broker_id, tp, list(target))
                return
            leader = choice.leader_and_isr.leader
        isr = tuple(r for r in state.isr if r in target) or (leader,)
        if not self._write_reassignment_state(tp, state, leader, isr):
            return
        self._reassigning.pop(tp, None)
        self._write_assignment(tp, ReplicaAssignment(target))
        self._emit("reassignment_complete", partition=str(tp), replicas=list(target),
                   leader=leader, isr=list(isr), controller_epoch=self._epoch)
        self._remove_from_zk_reassign_request(tp)
        watch = self._reassignment_watches.pop(tp, None)
        if watch is not None:
            watch.stop()

    def _write_reassignment_state(self, tp: TopicPartition, state: PartitionState,
                                  leader: int, isr: tuple[int, ...]) -> bool:
        """CAS the partition's state to ``leader``/``isr`` at the next leader epoch; False
        when it lost the race (the ISR watch brings the partition back)."""
        ctx = self._ctx
        assert ctx is not None
        if state.controller_epoch > self._epoch:
            return False
        decision = LeaderAndIsr(leader, state.leader_epoch + 1, isr)
        written = self._zk.set_partition_states(
            {tp: self._next_state(decision, state)},
            controller_epoch_zk_version=self._epoch_zk_version).get(tp)
        if isinstance(written, BadVersionError):
            self._put(_Event("reassignment_isr_change", generation=self._generation,
                             topic=tp.topic, partition=tp.partition))
            return False
        if isinstance(written, Exception) or written is None:
            _log.error("controller %d: reassignment state of %s not written: %r",
                       self.broker_id, tp, written)
            self._schedule_retry()
            return False
        new_state = dataclasses.replace(self._next_state(decision, state), zk_version=written)
        ctx.leadership[tp] = new_state
        self._emit_election(tp, new_state, "reassign")
        return True

    def _watch_reassignment(self, tp: TopicPartition) -> None:
        """The ISR of a reassigning partition (Kafka's ``PartitionReassignmentIsrChange
        Handler``): each change of its ``state`` checks whether it completed."""
        if tp in self._reassignment_watches:
            return
        generation = self._generation

        def fire(*_args: Any) -> bool:
            if self._stopping or generation != self._generation:
                return False
            self._put(_Event("reassignment_isr_change", generation=generation,
                             topic=tp.topic, partition=tp.partition))
            return True

        self._reassignment_watches[tp] = self._zk.watch_data(partition_state_path(tp), fire)

    def _process_reassignment_isr_change(self, tp: TopicPartition) -> None:
        new = self._reassigning.get(tp)
        if new is None:
            return
        ctx = self._ctx
        assert ctx is not None
        if not ctx.replicas(tp):  # the topic was deleted meanwhile: nothing to complete
            self._reassigning.pop(tp, None)
            watch = self._reassignment_watches.pop(tp, None)
            if watch is not None:
                watch.stop()
            return
        state = self._read_states([tp]).get(tp)
        if state is not None and reassignment_complete(new, state.isr):
            self._complete_reassignment(tp, new, state)

    def _resume_reassignments(self, generation: int) -> None:
        """On failover: the reassignments ZooKeeper holds (``adding_replicas`` /
        ``removing_replicas``) continue, and ``/admin/reassign_partitions`` is watched."""
        for watch in self._reassignment_watches.values():
            watch.stop()
        self._reassignment_watches.clear()
        self._reassigning.clear()
        for topic, assignment in self._read_assignments().items():
            for partition in sorted(set(assignment.adding_replicas)
                                    | set(assignment.removing_replicas)):
                tp = TopicPartition(topic, partition)
                current = ReplicaAssignment(
                    tuple(assignment.partitions.get(partition, ())),
                    tuple(assignment.adding_replicas.get(partition, ())),
                    tuple(assignment.removing_replicas.get(partition, ())))
                if current.reassigning and current.replicas:
                    self._reassigning[tp] = current
                    self._on_partition_reassignment(tp, current)
        self._term_watches.append(self._zk.watch_data(
            REASSIGN_PARTITIONS_PATH, self._watcher("reassign_partitions", generation)))

    def _process_zk_reassign_partitions(self) -> None:
        """``/admin/reassign_partitions`` (the pre-KIP-455 path, Kafka's
        ``processZkPartitionReassignment``): each listed partition is reassigned as through
        the API; the ones refused leave the request at once, the others when they
        complete, and the znode goes when it is empty."""
        data, version = self._zk.get_data_and_version(REASSIGN_PARTITIONS_PATH)
        if version < 0:
            return
        try:
            requested = decode_reassign_partitions(data)
        except ZkDataError as exc:
            _log.error("controller %d: bad reassignment request: %s", self.broker_id, exc)
            self._zk.delete_recursive(REASSIGN_PARTITIONS_PATH,
                                      controller_epoch_zk_version=self._epoch_zk_version)
            return
        pending = [tp for tp in requested
                   if self._reassigning.get(tp) is None
                   or list(self._reassigning[tp].target) != requested[tp]]
        outcomes = self.alter_reassignments(
            [(tp, tuple(requested[tp])) for tp in pending])
        refused = [tp for tp, (code, _) in zip(pending, outcomes) if code != codes.NONE]
        for tp in refused:
            self._remove_from_zk_reassign_request(tp)

    def _remove_from_zk_reassign_request(self, tp: TopicPartition) -> None:
        """B7: drop ``tp`` from ``/admin/reassign_partitions``; the znode goes once empty."""
        data, version = self._zk.get_data_and_version(REASSIGN_PARTITIONS_PATH)
        if version < 0:
            return
        try:
            requested = decode_reassign_partitions(data)
        except ZkDataError:
            return
        if tp not in requested:
            return
        del requested[tp]
        if not requested:
            self._zk.delete_recursive(REASSIGN_PARTITIONS_PATH,
                                      controller_epoch_zk_version=self._epoch_zk_version)
        else:
            try:
                self._zk.conditional_update_path(
                    REASSIGN_PARTITIONS_PATH, encode_reassign_partitions(requested), version)
            except BadVersionError:
                pass  # a new request replaced it: its own event reads it


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
