"""One partition's replication state on its leader, and every decision made from it: pure.

The leader's half of Kafka 2.8.2's ``Partition`` and ``Replica`` (research R§3.1, R§3.4,
R§3.5) without the log, the locks or the clock: the replica manager
(:mod:`seglog.cluster.replica_manager`) passes in the leader's log end offset, high watermark
and ``now_ms``, asks, and applies the answers (writes the ISR to ZooKeeper, moves the
``Log``'s high watermark, completes delayed produces). Nothing here does I/O, reads a clock or
logs. Not thread-safe: one owner (the broker's event loop) calls it.

What it keeps, per remote replica (``FollowerState``, Kafka's ``Replica``): the log end offset
the follower proved by its last fetch (-1 = unknown), its log start offset, and
``last_caught_up_time_ms``; per partition: leader epoch, zkVersion, controller epoch, the
assignment, the **committed** ISR (what ZooKeeper holds) and at most one ISR change in flight.

The rules, as Kafka has them:

- ``update_follower_fetch_state`` (``Replica.updateFetchState``): a fetch at offset >= the
  leader's end offset now makes the follower caught up now; a fetch at offset >= the leader's
  end offset *at the previous fetch* makes it caught up as of the previous fetch (so a
  follower stays in sync under a stream of small produces).
- ``high_watermark``: the minimum of the leader's end offset and the end offsets of every
  follower in the **maximal** ISR (committed plus a pending expansion) *or* caught up within
  ``lag_time_max_ms``. **The ``Log`` owns the high watermark** (it is persisted and also moved
  by the follower path); this module returns the candidate, which may be below the current
  value (even -1 while an ISR follower has not fetched since this broker became leader), and
  ``maybe_increment_high_watermark`` applies Kafka's only-forward rule
  (``Log.maybeIncrementHighWatermark``): it returns the new value or None.
- ``isr_to_shrink``: ISR followers whose end offset differs from the leader's and that have not
  been caught up for more than ``lag_time_max_ms`` (a follower at the leader's end offset is
  never out of sync). ``isr_to_expand``: a follower outside the ISR whose end offset is >= the
  high watermark **and** >= this leader epoch's start offset.
- One ISR change at a time (KIP-497's ``IsrState``): ``isr_update_started`` records the
  proposal; a pending expansion counts in the maximal ISR at once (a larger ISR only holds the
  high watermark back), a pending shrink does not shrink anything until
  ``isr_update_succeeded``. ``isr_update_failed`` leaves the proposal pending (Kafka gives up
  on INVALID_UPDATE_VERSION and waits for newer metadata, ``make_leader`` with a newer epoch);
  no further shrink or expand is proposed meanwhile.
- ``acks_all_result`` (``checkEnoughReplicasReachOffset``): wait until the high watermark
  reaches the required offset, then success, or NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) when
  the maximal ISR is smaller than ``min.insync.replicas``; NOT_LEADER_OR_FOLLOWER (6) once the
  broker is no longer leader. ``min_isr_check`` (``appendRecordsToLeader``): before an
  ``acks=all`` append, NOT_ENOUGH_REPLICAS (19) when the **committed** ISR is too small.

The call sequence on a follower's fetch (``ReplicaManager.updateFollowerFetchState``, only when
the read returned no error and no diverging epoch): ``update_follower_fetch_state``; then
``isr_to_expand`` (when it returns an ISR: ``isr_update_started`` and the ZooKeeper CAS); then,
if the follower's end offset changed, ``maybe_increment_high_watermark``; if that moved the
high watermark, try to complete the delayed produces and fetches.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from .. import error_codes as codes

UNKNOWN_OFFSET = -1
"""A follower's log end or start offset before its first fetch to this leader (Kafka's
``LogOffsetMetadata.UnknownOffsetMetadata`` and ``Log.UnknownOffset``)."""


class FollowerState(NamedTuple):
    """A snapshot of what the leader knows about one remote replica (Kafka's ``Replica``).

    ``log_end_offset`` and ``log_start_offset`` are -1 until the follower's first fetch to this
    leader. ``last_caught_up_time_ms`` is the latest time at which the follower's fetch offset
    was >= the leader's end offset (0: never). ``last_fetch_leader_end_offset`` and
    ``last_fetch_time_ms`` are the leader's end offset and the time at the previous fetch."""

    replica_id: int
    log_end_offset: int
    log_start_offset: int
    last_caught_up_time_ms: int
    last_fetch_leader_end_offset: int
    last_fetch_time_ms: int


class _Follower:
    """The mutable twin of :class:`FollowerState`, kept per remote replica."""

    __slots__ = ("replica_id", "log_end_offset", "log_start_offset", "last_caught_up_time_ms",
                 "last_fetch_leader_end_offset", "last_fetch_time_ms")

    def __init__(self, replica_id: int) -> None:
        # Kafka's Replica constructor: everything unknown or zero.
        self.replica_id = replica_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_caught_up_time_ms = 0
        self.last_fetch_leader_end_offset = 0
        self.last_fetch_time_ms = 0

    def update_fetch_state(self, fetch_offset: int, follower_log_start_offset: int,
                           fetch_time_ms: int, leader_end_offset: int) -> None:
        # Replica.updateFetchState, exactly.
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms,
                                              self.last_fetch_time_ms)
        self.log_start_offset = follower_log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def reset_last_caught_up_time(self, leader_end_offset: int, now_ms: int,
                                  last_caught_up_time_ms: int) -> None:
        # Replica.resetLastCaughtUpTime (makeLeader).
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms
        self.last_caught_up_time_ms = last_caught_up_time_ms

    def snapshot(self) -> FollowerState:
        return FollowerState(self.replica_id, self.log_end_offset, self.log_start_offset,
                             self.last_caught_up_time_ms, self.last_fetch_leader_end_offset,
                             self.last_fetch_time_ms)


class LeaderReplicaState:
    """One partition's replication state on this broker while it leads it (see the module).

    Create one per partition hosted here (``LeaderReplicaState(local_broker_id)``; it starts as
    not leader), call :meth:`make_leader` for every newer leader epoch in which this broker
    leads and :meth:`resign` when it becomes a follower. Keeping the object across a
    follower period is allowed: the next :meth:`make_leader` then forgets the followers' end
    offsets, as Kafka does for a broker that was not leader. Not thread-safe.
    """

    def __init__(self, local_broker_id: int) -> None:
        """``local_broker_id``: this broker's id (never a remote replica of its own)."""
        self._local_broker_id = local_broker_id
        self._is_leader = False
        self._leader_epoch = -1
        self._zk_version = -1
        self._controller_epoch = -1
        self._leader_epoch_start_offset: int | None = None
        self._replicas: tuple[int, ...] = ()
        self._isr: tuple[int, ...] = ()
        # The ISR proposed by the change in flight (None: none in flight).
        self._pending_isr: tuple[int, ...] | None = None
        self._followers: dict[int, _Follower] = {}

    # --- becoming leader, resigning ---------------------------------------------------------

    def make_leader(self, *, leader_epoch: int, isr: Iterable[int], replicas: Iterable[int],
                    zk_version: int, controller_epoch: int, leader_end_offset: int,
                    now_ms: int) -> bool:
        """Lead the partition in ``leader_epoch`` (Kafka's ``Partition.makeLeader``).

        ``isr``, ``replicas``, ``zk_version``, ``controller_epoch`` come from the partition's
        ``state`` znode and assignment; ``leader_end_offset`` is the leader's log end offset
        now, which becomes this epoch's start offset (the caller also calls
        ``Log.become_leader(leader_epoch)``, Kafka's ``maybeAssignEpochStartOffset``). The
        committed ISR becomes ``isr`` and any pending ISR change is dropped. Every remote
        replica's ``last_caught_up_time_ms`` becomes ``now_ms`` if it is in ``isr``, else 0.
        If this broker was not already leader, every remote replica's end and start offsets
        become unknown (-1), so the high watermark does not advance until every ISR follower
        has fetched once. Returns True if this broker was not leader before (Kafka's
        ``isNewLeader``). The caller then calls :meth:`maybe_increment_high_watermark` (the
        ISR may be just the leader). Call it only for a leader epoch newer than the current
        one (Kafka ignores the others).
        """
        isr_tuple = tuple(isr)
        replicas_tuple = tuple(replicas)
        self._controller_epoch = controller_epoch
        self._update_assignment(replicas_tuple, isr_tuple)
        self._isr = isr_tuple
        self._pending_isr = None
        self._leader_epoch = leader_epoch
        self._leader_epoch_start_offset = leader_end_offset
        self._zk_version = zk_version
        isr_set = set(isr_tuple)
        for follower in self._followers.values():
            follower.reset_last_caught_up_time(
                leader_end_offset, now_ms, now_ms if follower.replica_id in isr_set else 0)
        is_new_leader = not self._is_leader
        if is_new_leader:
            self._is_leader = True
            for follower in self._followers.values():
                follower.update_fetch_state(UNKNOWN_OFFSET, UNKNOWN_OFFSET, 0, UNKNOWN_OFFSET)
        return is_new_leader

    def update_isr(self, isr: Iterable[int], *, zk_version: int) -> bool:
        """Take a committed ISR read from ZooKeeper at the **same** leader epoch and a newer
        ``zk_version`` (the answer to this leader's own write that was lost, or a write it
        lost to): the committed ISR and version are replaced and a pending change is dropped,
        while the followers' state and the epoch start offset are kept (Kafka's
        ``updateAssignmentAndIsr`` without ``makeLeader``'s resets, which belong to a new
        epoch). When ``isr`` is the pending proposal this is :meth:`isr_update_succeeded`.
        Returns False, changing nothing, when not leader or ``zk_version`` is not newer."""
        if not self._is_leader or zk_version <= self._zk_version:
            return False
        isr_tuple = tuple(isr)
        for replica_id in isr_tuple:
            if replica_id != self._local_broker_id and replica_id not in self._followers:
                self._followers[replica_id] = _Follower(replica_id)
        self._isr = isr_tuple
        self._zk_version = zk_version
        self._pending_isr = None
        return True

    def resign(self, *, leader_epoch: int | None = None) -> None:
        """Stop leading (Kafka's ``makeFollower`` on this state): the ISR view becomes empty,
        a pending ISR change is dropped, the epoch start offset is forgotten; from now on
        :meth:`acks_all_result` answers NOT_LEADER_OR_FOLLOWER and nothing is proposed.
        ``leader_epoch``: the new (follower's) epoch, recorded when given."""
        self._is_leader = False
        self._isr = ()
        self._pending_isr = None
        self._leader_epoch_start_offset = None
        if leader_epoch is not None:
            self._leader_epoch = leader_epoch

    def _update_assignment(self, replicas: tuple[int, ...], isr: tuple[int, ...]) -> None:
        # Kafka's updateAssignmentAndIsr: a remote replica per assigned broker, kept across
        # leader epochs. An ISR member missing from the assignment (bad metadata) is tracked
        # too, so every ISR member has a state and can be judged out of sync.
        remote_ids = [r for r in replicas if r != self._local_broker_id]
        remote_ids += [r for r in isr if r != self._local_broker_id and r not in remote_ids]
        for replica_id in remote_ids:
            if replica_id not in self._followers:
                self._followers[replica_id] = _Follower(replica_id)
        for replica_id in [r for r in self._followers if r not in remote_ids]:
            del self._followers[replica_id]
        self._replicas = replicas

    # --- what the state holds ---------------------------------------------------------------

    @property
    def local_broker_id(self) -> int:
        """This broker's id."""
        return self._local_broker_id

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition (since :meth:`make_leader`, until
        :meth:`resign`)."""
        return self._is_leader

    @property
    def leader_epoch(self) -> int:
        """The leader epoch of the last :meth:`make_leader` (-1 before any)."""
        return self._leader_epoch

    @property
    def zk_version(self) -> int:
        """The ``state`` znode's version this leader's next ISR write expects (-1 before any)."""
        return self._zk_version

    @property
    def controller_epoch(self) -> int:
        """The controller epoch that made this broker leader (written back with ISR changes)."""
        return self._controller_epoch

    @property
    def leader_epoch_start_offset(self) -> int | None:
        """The leader's log end offset when it became leader in this epoch (None: not leader)."""
        return self._leader_epoch_start_offset

    @property
    def replicas(self) -> tuple[int, ...]:
        """The assignment, in assignment order."""
        return self._replicas

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR: what ZooKeeper holds (Kafka's ``isrState.isr``)."""
        return self._isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus the members a pending change adds (Kafka's ``maximalIsr``):
        the set the high watermark and ``acks=all`` count. A pending shrink removes nobody."""
        if self._pending_isr is None:
            return self._isr
        return self._isr + tuple(r for r in self._pending_isr if r not in self._isr)

    @property
    def pending_isr(self) -> tuple[int, ...] | None:
        """The ISR proposed by the change in flight, or None (re-send it after a transient
        ZooKeeper error, Kafka's "Retrying" branch)."""
        return self._pending_isr

    @property
    def isr_update_in_flight(self) -> bool:
        """Whether an ISR change was started and neither succeeded nor was superseded by
        :meth:`make_leader` (Kafka's ``isInflight``)."""
        return self._pending_isr is not None

    @property
    def under_replicated(self) -> bool:
        """Leader and the committed ISR smaller than the assignment (Kafka's
        ``isUnderReplicated``)."""
        return self._is_leader and len(self._replicas) - len(self._isr) > 0

    def follower(self, replica_id: int) -> FollowerState | None:
        """A snapshot of a remote replica's state, None for a broker that is not one."""
        follower = self._followers.get(replica_id)
        return None if follower is None else follower.snapshot()

    def followers(self) -> tuple[FollowerState, ...]:
        """Snapshots of every remote replica, in no promised order."""
        return tuple(f.snapshot() for f in self._followers.values())

    # --- follower fetches -------------------------------------------------------------------

    def update_follower_fetch_state(self, replica_id: int, *, fetch_offset: int,
                                    leader_end_offset: int, now_ms: int,
                                    follower_log_start_offset: int) -> bool:
        """Record a follower's fetch (Kafka's ``Partition.updateFollowerFetchState``).

        ``fetch_offset``: the fetch's offset, which the follower proves it holds everything
        below; it becomes the follower's log end offset. ``leader_end_offset``: the leader's
        log end offset *before* the read (so appends after it do not keep a follower out of
        sync). ``now_ms``: the fetch's time. Applies the previous-fetch rule (module doc).
        Returns False, changing nothing, when ``replica_id`` is not a remote replica of the
        partition or this broker is not leader (Kafka then returns empty records). Call it
        only for a read without error and without a diverging epoch.
        """
        follower = self._followers.get(replica_id)
        if follower is None or not self._is_leader:
            return False
        follower.update_fetch_state(fetch_offset, follower_log_start_offset, now_ms,
                                    leader_end_offset)
        return True

    # --- high watermark ---------------------------------------------------------------------

    def high_watermark(self, *, leader_end_offset: int, now_ms: int,
                       lag_time_max_ms: int) -> int:
        """The high watermark the replicas allow now (Kafka's ``maybeIncrementLeaderHW``
        candidate): the minimum of ``leader_end_offset`` and the end offset of every remote
        replica that is in the maximal ISR or was caught up within ``lag_time_max_ms`` of
        ``now_ms``. May be below the current high watermark, and -1 while such a follower has
        not fetched from this leader; apply it with :meth:`maybe_increment_high_watermark`."""
        candidate = leader_end_offset
        maximal = self.maximal_isr
        for follower in self._followers.values():
            if follower.log_end_offset < candidate and (
                    now_ms - follower.last_caught_up_time_ms <= lag_time_max_ms
                    or follower.replica_id in maximal):
                candidate = follower.log_end_offset
        return candidate

    def maybe_increment_high_watermark(self, current_high_watermark: int, *,
                                       leader_end_offset: int, now_ms: int,
                                       lag_time_max_ms: int) -> int | None:
        """The new high watermark if :meth:`high_watermark` is above
        ``current_high_watermark``, else None: the high watermark only moves forward
        (``Log.maybeIncrementHighWatermark``). Kafka recomputes it on a leader append, a
        follower end offset change, an ISR change and on becoming leader; so should the
        caller, and on None leave the ``Log`` alone."""
        candidate = self.high_watermark(leader_end_offset=leader_end_offset, now_ms=now_ms,
                                        lag_time_max_ms=lag_time_max_ms)
        return candidate if candidate > current_high_watermark else None

    def low_watermark(self, *, leader_log_start_offset: int,
                      live_broker_ids: Iterable[int]) -> int:
        """The smallest log start offset over the leader and its live remote replicas
        (Kafka's ``lowWatermarkIfLeader``, which completes a DeleteRecords); -1 while a live
        follower has not fetched from this leader."""
        live = set(live_broker_ids)
        low = leader_log_start_offset
        for follower in self._followers.values():
            if follower.replica_id in live and follower.log_start_offset < low:
                low = follower.log_start_offset
        return low

    # --- ISR shrink and expand --------------------------------------------------------------

    def out_of_sync_replicas(self, *, leader_end_offset: int, now_ms: int,
                             lag_time_max_ms: int) -> frozenset[int]:
        """The committed ISR's followers that are out of sync (Kafka's
        ``getOutOfSyncReplicas``): end offset != ``leader_end_offset`` and not caught up for
        more than ``lag_time_max_ms`` (stuck or slow). Empty when an ISR change is in flight
        or this broker is not leader."""
        if not self._is_leader or self._pending_isr is not None:
            return frozenset()
        out: set[int] = set()
        for replica_id in self._isr:
            if replica_id == self._local_broker_id:
                continue
            follower = self._followers[replica_id]
            if (follower.log_end_offset != leader_end_offset
                    and now_ms - follower.last_caught_up_time_ms > lag_time_max_ms):
                out.add(replica_id)
        return frozenset(out)

    def isr_to_shrink(self, *, leader_end_offset: int, now_ms: int,
                      lag_time_max_ms: int) -> tuple[int, ...] | None:
        """The ISR to propose without the out-of-sync followers (committed order kept), or
        None when nobody is out of sync, a change is in flight or this broker is not leader
        (Kafka's ``maybeShrinkIsr``, run every ``lag_time_max_ms / 2``). The leader itself is
        never removed. To act: :meth:`isr_update_started`, then the ZooKeeper CAS."""
        out = self.out_of_sync_replicas(leader_end_offset=leader_end_offset, now_ms=now_ms,
                                        lag_time_max_ms=lag_time_max_ms)
        if not out:
            return None
        return tuple(r for r in self._isr if r not in out)

    def isr_to_expand(self, replica_id: int, *, high_watermark: int) -> tuple[int, ...] | None:
        """The ISR to propose with ``replica_id`` added at the end, or None (Kafka's
        ``maybeExpandIsr``).

        Only for a leader with no ISR change in flight and a remote replica outside the
        committed ISR whose end offset is >= ``high_watermark`` (the ``Log``'s current one)
        **and** >= :attr:`leader_epoch_start_offset`: a follower that has not reached this
        epoch could otherwise join, lead, and lose the committed records between the high
        watermark and the old leader's end offset. To act: :meth:`isr_update_started`.
        """
        if not self._is_leader or self._pending_isr is not None or replica_id in self._isr:
            return None
        follower = self._followers.get(replica_id)
        start = self._leader_epoch_start_offset
        if follower is None or start is None:
            return None
        end = follower.log_end_offset
        if end >= high_watermark and end >= start:
            return self._isr + (replica_id,)
        return None

    def isr_update_started(self, new_isr: Iterable[int]) -> bool:
        """Record that ``new_isr`` is being written (Kafka's ``expandIsr``/``shrinkIsr``).

        Returns False and changes nothing when a change is already in flight or this broker
        is not leader (Kafka ignores the second change). Members ``new_isr`` adds count in
        :attr:`maximal_isr` at once; members it removes stay in the ISR until
        :meth:`isr_update_succeeded`. The caller writes ``(leader, leader_epoch, new_isr,
        controller_epoch)`` with expected version :attr:`zk_version`.
        """
        if not self._is_leader or self._pending_isr is not None:
            return False
        self._pending_isr = tuple(new_isr)
        return True

    def isr_update_succeeded(self, new_isr: Iterable[int], new_zk_version: int) -> bool:
        """The write of the pending ISR succeeded at ``new_zk_version``: it becomes the
        committed ISR and the version the next write expects (Kafka's AlterIsr success).

        Returns False and changes nothing when the answer is stale: no change is in flight
        (a :meth:`make_leader` or :meth:`resign` came first), ``new_isr`` is not the pending
        proposal (as a set), or ``new_zk_version`` is older than :attr:`zk_version`.
        """
        proposed = self._pending_isr
        new_tuple = tuple(new_isr)
        if proposed is None or set(new_tuple) != set(proposed):
            return False
        if new_zk_version < self._zk_version:
            return False
        self._isr = new_tuple
        self._zk_version = new_zk_version
        self._pending_isr = None
        return True

    def isr_update_failed(self) -> None:
        """The write of the pending ISR failed for good (ZooKeeper BADVERSION, Kafka's
        INVALID_UPDATE_VERSION): the proposal stays pending, so no other change is proposed
        and a pending expansion keeps counting, until newer metadata arrives through
        :meth:`make_leader` (or :meth:`resign`). For a transient error (connection loss),
        re-send :attr:`pending_isr` instead of calling this."""
        # Kafka's handleAlterIsrResponse "Giving up": nothing to change, by design.
        return None

    # --- produce ----------------------------------------------------------------------------

    def min_isr_check(self, min_insync_replicas: int) -> int:
        """Before an ``acks=all`` append: NOT_ENOUGH_REPLICAS (19) when the committed ISR has
        fewer than ``min_insync_replicas`` members (nothing may be written then), else 0."""
        return codes.NOT_ENOUGH_REPLICAS if len(self._isr) < min_insync_replicas else codes.NONE

    def is_at_min_isr(self, min_insync_replicas: int) -> bool:
        """Leader and the committed ISR exactly ``min_insync_replicas`` big (Kafka's
        ``isAtMinIsr``: one more failure stops ``acks=all`` produces)."""
        return self._is_leader and len(self._isr) == min_insync_replicas

    def acks_all_result(self, required_offset: int, *, high_watermark: int,
                        min_insync_replicas: int) -> int | None:
        """Whether an ``acks=all`` produce waiting for ``required_offset`` (its last offset +
        1) can be answered (Kafka's ``checkEnoughReplicasReachOffset``): None to keep waiting;
        NOT_LEADER_OR_FOLLOWER (6) when this broker no longer leads; once ``high_watermark``
        >= ``required_offset``, 0, or NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) when the maximal ISR
        is smaller than ``min_insync_replicas`` (the records are written and committed). A
        partition this broker no longer hosts at all answers 6 too (the caller's case)."""
        if not self._is_leader:
            return codes.NOT_LEADER_OR_FOLLOWER
        if high_watermark >= required_offset:
            if min_insync_replicas <= len(self.maximal_isr):
                return codes.NONE
            return codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return None

    def update_replicas(self, replicas: Iterable[int]) -> None:
        """The partition's assignment changed under this leader (a reassignment's replica
        set grew or shrank: seglog's brokers read the assignment apart from the ``state``, so
        it may change within a leader epoch): the remote replicas tracked follow it, and a
        removed one cannot join the ISR again (Kafka's ``updateAssignmentAndIsr``)."""
        self._update_assignment(tuple(replicas), self._isr)
