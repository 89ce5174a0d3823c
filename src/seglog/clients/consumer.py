"""The consumer client: reads partitions alone or as a member of a consumer group.

The model is Kafka's (the article's "offsets and consumer groups"): a consumer's *position* in
a partition is the offset of the next record it will read, one integer it owns; a *committed*
offset is that position written down for its group, so that whoever owns the partition next
starts there. Inside a group each partition belongs to exactly one member, so 10 members on
6 partitions leave 4 idle; a second group reads the same records with positions of its own.

:class:`~seglog.coordinator.group.ConsumerGroup` is the group coordinator of Kafka's classic
protocol, embedded in the :class:`~seglog.store.Store`: members join and leave, each change
starts a new *generation* and recomputes the assignment at once with the group's assignor
(``range`` or ``roundrobin``). A :class:`Consumer` adopts its new assignment at its next
:meth:`~Consumer.poll` (or :meth:`~Consumer.assignment`, :meth:`~Consumer.commit`): partitions
it owned throughout keep their positions; partitions it gains start at the group's committed
offset, or at ``auto_offset_reset`` when there is none. A member that lost partitions in a
rebalance it has not seen yet cannot commit (:class:`CommitFailedError`, as Kafka's
ILLEGAL_GENERATION), so it never overwrites their new owner's progress. The network broker
that comes later coordinates across processes; this one coordinates threads of one process.

Commits (Kafka's ``OffsetCommit``) are records of ``__consumer_offsets``
(:mod:`seglog.coordinator.offsets`), so they survive a restart. A commit is in the page cache
when :meth:`Consumer.commit` returns (as a Kafka commit with acks=all is in its replicas' page
caches); :meth:`Store.flush <seglog.store.Store.flush>` or a clean close makes it durable.

The consumer talks to the broker side only through :class:`~seglog.broker_api.BrokerApi`
(FindCoordinator, JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, OffsetFetch, and the
partitions' Logs to fetch from in-process), which the Store implements and the wire broker
will; it imports no coordinator and not the store.

:meth:`Consumer.close` leaves the group *without committing*, as a crashed consumer would:
its partitions move to the remaining members, which resume from the last commit. Committing
after processing is therefore at-least-once (a crash repeats the records since the last
commit) and committing before processing is at-most-once (a crash loses the records claimed
but not processed); ``tests/test_article_examples.py`` replays the article's example.

Not here (yet): session timeouts and heartbeats (members live as long as their Consumer
object), rebalance listeners (a rebalance completes at once, so there is no revocation window
to commit in) and automatic commits.

Thread safety: a :class:`Consumer` is used by one thread at a time, as Kafka's is.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Iterable, Mapping

from ..arguments import (
    as_offset_and_metadata,
    check_commit_offset,
    check_int_argument,
)
from ..broker_api import BrokerApi
from ..errors import (
    CommitFailedError,
    CorruptRecordError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidGroupIdError,
    LogClosedError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    UnknownAssignorError,
)
from ..storage.config import INT32_MAX
from ..storage.counters import (CONSUMER_BYTES_CONSUMED, CONSUMER_RECORDS_CONSUMED,
                                ClientCounters)
from ..storage.transactions import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    batch_crc_error,
    checked_batches,
    filter_batches,
)
from ..types import ConsumerRecord, OffsetAndMetadata, TopicPartition, as_topic_partition

__all__ = ["CommitFailedError", "Consumer", "ConsumerRecord", "OffsetAndMetadata",
           "TopicPartition"]

#: Kafka's consumer defaults: ``max.poll.records`` 500, ``max.partition.fetch.bytes`` 1 MiB,
#: ``auto.offset.reset`` latest, ``partition.assignment.strategy`` range first.
MAX_POLL_RECORDS_DEFAULT = 500
MAX_PARTITION_FETCH_BYTES_DEFAULT = 1024 * 1024
AUTO_OFFSET_RESET_DEFAULT = "latest"
AUTO_OFFSET_RESETS = ("earliest", "latest", "none")
ASSIGNMENT_STRATEGY_DEFAULT = "range"
#: Longest wait of one poll round when several partitions are assigned and no Producer of this
#: store signals: appends made straight on a Log, or by another process, are seen within this.
_WAIT_SLICE_MS = 20

_client_ids = itertools.count(1)


# --- the consumer --------------------------------------------------------------------------------


class _PartitionState:
    """A consumer's state for one assigned partition: its position and what is left of the
    last read (Kafka's CompletedFetch): its data batches not decoded yet, and the decoded
    records of one batch not handed out yet. Batches are decoded as polls need records, so
    a poll makes only about ``max_records`` record objects (the next poll's objects reuse
    the memory the last poll's freed, still in the CPU's caches)."""

    __slots__ = ("position", "buffered", "buffered_index", "batches", "batch_index",
                 "read_start", "read_next_offset", "last_decoded")

    def __init__(self) -> None:
        self.position: int | None = None
        self.clear()

    def clear(self) -> None:
        """Forget what is left of the last read (after a seek)."""
        self.buffered: list = []  # decoded records of one batch, in order
        self.buffered_index = 0  # buffered[buffered_index:] are not handed out yet
        self.batches: list = []  # the read's data batches, checked, not decoded yet
        self.batch_index = 0  # batches[batch_index:] are not decoded yet
        self.read_start = 0  # the position the read started at (records below are skipped)
        self.read_next_offset = -1  # offset after the read
        self.last_decoded = -1  # offset of the last record decoded from the read (-1: none)

    @property
    def pending(self) -> bool:
        """Whether records of the last read may be left to hand out."""
        return self.buffered_index < len(self.buffered) or self.batch_index < len(self.batches)


class Consumer:
    """Reads records from a :class:`~seglog.store.Store` (any
    :class:`~seglog.broker_api.BrokerApi`), alone or as a group member.

    ``Consumer(store, group_id=None, *, auto_offset_reset="latest",
    partition_assignment_strategy="range", client_id=None, group_instance_id=None,
    max_poll_records=500, max_partition_fetch_bytes=1048576)``; usually made by
    :meth:`Store.consumer <seglog.store.Store.consumer>`.

    * ``group_id``: the group whose committed offsets it uses and, after :meth:`subscribe`,
      joins. None: no group (only :meth:`assign`; no commits).
    * ``auto_offset_reset``: where to start in a partition with no committed offset, or
      whose committed offset is out of the log's range: ``"earliest"`` (the log start
      offset), ``"latest"`` (the high watermark; Kafka's default) or ``"none"``
      (:class:`NoOffsetForPartitionError` / :class:`OffsetOutOfRangeError`).
    * ``partition_assignment_strategy``: ``"range"`` or ``"roundrobin"``.
    * ``isolation_level``: ``"read_uncommitted"`` (Kafka's default: every data record) or
      ``"read_committed"`` (stop at the last stable offset, leave out records of aborted
      transactions; "latest" and :meth:`end_offsets` mean the last stable offset; a
      partition whose group offset a transaction is committing is not started until that
      transaction ends, as KIP-447's stable offset fetch).
    * ``check_crcs``: verify the CRC32C of every batch before decoding its records (Kafka's
      ``check.crcs``, default True); a corrupt batch makes :meth:`poll` /
      :meth:`poll_columns` raise :class:`~seglog.errors.CorruptRecordError` without moving
      the position past it (as Kafka's consumer, :meth:`poll` first hands out the records
      of the same fetch before it, and raises at the next poll). Batches' base offsets are
      checked to increase either way.
    * ``max_poll_records`` and ``max_partition_fetch_bytes``: ints >= 1.

    Bad arguments raise :mod:`seglog.errors` classes that are also the built-in ones:
    :class:`~seglog.errors.InvalidArgumentTypeError` (a TypeError, INVALID_REQUEST) for a
    non-integer, :class:`~seglog.errors.InvalidArgumentError` (a ValueError,
    INVALID_REQUEST) for a value out of range or not allowed,
    :class:`~seglog.errors.InvalidGroupIdError` (a ValueError, INVALID_GROUP_ID) for an
    empty group id, :class:`~seglog.errors.UnknownAssignorError` (a KeyError,
    INCONSISTENT_GROUP_PROTOCOL) for an unknown assignment strategy.

    Not thread-safe: use each Consumer from one thread at a time (Kafka's rule).
    """

    def __init__(self, store: BrokerApi, group_id: str | None = None, *,
                 auto_offset_reset: str = AUTO_OFFSET_RESET_DEFAULT,
                 partition_assignment_strategy: str = ASSIGNMENT_STRATEGY_DEFAULT,
                 client_id: str | None = None, group_instance_id: str | None = None,
                 max_poll_records: int = MAX_POLL_RECORDS_DEFAULT,
                 max_partition_fetch_bytes: int = MAX_PARTITION_FETCH_BYTES_DEFAULT,
                 isolation_level: str = READ_UNCOMMITTED, check_crcs: bool = True):
        if isolation_level not in ISOLATION_LEVELS:
            raise InvalidArgumentError(f"isolation_level must be one of {ISOLATION_LEVELS}, "
                                       f"got {isolation_level!r}")
        if auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise InvalidArgumentError(f"auto_offset_reset must be one of "
                                       f"{AUTO_OFFSET_RESETS}, got {auto_offset_reset!r}")
        known = store.assignor_names()
        if partition_assignment_strategy not in known:
            raise UnknownAssignorError(f"unknown assignor {partition_assignment_strategy!r}; "
                                       f"known: {', '.join(known)}")
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise InvalidGroupIdError(f"group_id must be a non-empty str or None, got "
                                      f"{group_id!r}")
        max_poll_records = check_int_argument("max_poll_records", max_poll_records, minimum=1)
        max_partition_fetch_bytes = check_int_argument("max_partition_fetch_bytes",
                                              max_partition_fetch_bytes, minimum=1,
                                              maximum=INT32_MAX)
        self._broker = store
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.partition_assignment_strategy = partition_assignment_strategy
        self.client_id = client_id or f"consumer-{group_id or 'none'}-{next(_client_ids)}"
        self.group_instance_id = group_instance_id
        self.max_poll_records = max_poll_records
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = isolation_level
        self.check_crcs = bool(check_crcs)
        self._committed_only = isolation_level == READ_COMMITTED
        if group_id is not None:
            store.find_coordinator(group_id)  # LogClosedError on a closed store
        self._grouped = group_id is not None
        self._member_id: str | None = None
        self._generation_id = -1
        self._subscription: frozenset | None = None
        self._manual = False
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._paused: set[TopicPartition] = set()
        self._next_fetch = 0  # rotates the partition a poll starts with (fairness)
        self._closed = False
        # Records handed out and batch bytes read (metrics(); docs/metrics.md).
        self._counters = ClientCounters(CONSUMER_RECORDS_CONSUMED, CONSUMER_BYTES_CONSUMED)

    # --- subscription and assignment ------------------------------------------------------------

    @property
    def _group(self) -> str:
        """The group id, for the group calls (which run only when ``_grouped``)."""
        group_id = self.group_id
        assert group_id is not None
        return group_id

    @property
    def member_id(self) -> str | None:
        """The member id the group gave this consumer, or None when not a member."""
        return self._member_id

    @property
    def generation_id(self) -> int:
        """The group generation of the assignment this consumer holds (-1: none)."""
        return self._generation_id

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the group (or change this member's topics) for ``topics``; partitions come
        from the group's assignment, at the next poll. Raises ``ValueError`` without a
        group_id, :class:`IllegalStateError` after :meth:`assign` or :meth:`close`."""
        self._check_open()
        if isinstance(topics, str):
            raise InvalidArgumentTypeError(
                "topics must be a collection of topic names, not a str")
        if not self._grouped:
            raise InvalidGroupIdError("subscribe needs a group_id (Kafka: InvalidGroupIdException)")
        if self._manual:
            raise IllegalStateError("Subscription to topics, partitions and pattern are "
                                    "mutually exclusive (assign() was called)")
        topics = frozenset(topics)
        if not topics:
            self.unsubscribe()
            return
        self._subscription = topics
        # Kafka's JoinGroup: a new member, or a member rejoining with other topics.
        self._member_id = self._broker.join_group(
            self._group, member_id=self._member_id, client_id=self.client_id, topics=topics,
            assignor=self.partition_assignment_strategy,
            group_instance_id=self.group_instance_id)
        self._sync()

    def subscription(self) -> set[str]:
        """The subscribed topics (empty when not subscribed)."""
        return set(self._subscription or ())

    def unsubscribe(self) -> None:
        """Leave the group (without committing) and drop every partition, or clear a manual
        assignment."""
        if self._member_id is not None and self._grouped:
            self._broker.leave_group(self._group, self._member_id)
        self._member_id = None
        self._subscription = None
        self._manual = False
        self._generation_id = -1
        self._partitions.clear()
        self._paused.clear()

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Read exactly ``partitions`` (no group membership; commits are allowed only while
        the group has no members, as Kafka's standalone consumers). Positions of partitions
        kept are kept. Raises :class:`IllegalStateError` after :meth:`subscribe`,
        :class:`UnknownTopicOrPartitionError` for a partition that does not exist."""
        self._check_open()
        if self._subscription is not None:
            raise IllegalStateError("Subscription to topics, partitions and pattern are "
                                    "mutually exclusive (subscribe() was called)")
        tps = [as_topic_partition(tp) for tp in partitions]
        for tp in tps:
            self._broker.log(tp)
        self._manual = bool(tps)
        self._partitions = {tp: self._partitions.get(tp) or _PartitionState() for tp in tps}
        self._paused &= set(tps)

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now (after adopting a pending rebalance)."""
        self._check_open()
        self._sync()
        return set(self._partitions)

    def _sync(self) -> set[TopicPartition]:
        """Adopt the group's current assignment if the generation moved; returns the
        partitions taken away."""
        if self._member_id is None or not self._grouped:
            return set()
        current = self._broker.sync_group(self._group, self._member_id)
        if current is None:
            raise IllegalStateError(f"consumer {self.client_id} is no longer a member of "
                                    f"group {self.group_id!r}")
        generation_id, tps, owned_since = current
        if generation_id == self._generation_id:
            return set()
        # A partition kept its state only if this member owned it throughout: if it moved
        # away and back between two polls, another member may have read and committed it.
        kept = {tp for tp in tps if tp in self._partitions
                and owned_since[tp] <= self._generation_id}
        revoked = set(self._partitions) - kept
        self._partitions = {tp: self._partitions[tp] if tp in kept else _PartitionState()
                            for tp in tps}
        self._paused &= kept
        self._generation_id = generation_id
        return revoked

    # --- positions -------------------------------------------------------------------------------

    def _state(self, tp: Any) -> tuple[TopicPartition, _PartitionState]:
        tp = as_topic_partition(tp)
        state = self._partitions.get(tp)
        if state is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return tp, state

    def _readable_end(self, log) -> int:
        """Where reads stop: the high watermark, or the last stable offset (read_committed)."""
        return log.last_stable_offset if self._committed_only else log.high_watermark

    def _reset(self, tp: TopicPartition, log, *, out_of_range: int | None = None) -> int:
        if self.auto_offset_reset == "earliest":
            return log.start_offset
        if self.auto_offset_reset == "latest":
            return self._readable_end(log)
        if out_of_range is not None:
            raise OffsetOutOfRangeError(
                f"offset {out_of_range} of {tp} is out of range [{log.start_offset}, "
                f"{log.high_watermark}] and auto_offset_reset is 'none'")
        raise NoOffsetForPartitionError(
            f"Undefined offset with no reset policy for partition: {tp}")

    def _unstable_commit(self, tp: TopicPartition) -> bool:
        """read_committed members do not start a partition while a transaction holds an
        offset commit of their group for it (KIP-447's require_stable OffsetFetch, which
        answers UNSTABLE_OFFSET_COMMIT and makes the consumer retry): the committed offset
        is about to change, and starting from the old one would process records twice."""
        if not self._committed_only or not self._grouped:
            return False
        return self._broker.offset_commit_pending(self._group, tp)

    def _initial_position(self, tp: TopicPartition) -> int:
        log = self._broker.log(tp)
        committed = None
        if self._grouped:
            committed = self._broker.offset_fetch(self._group, tp)
        if committed is None:
            return self._reset(tp, log)
        if not log.start_offset <= committed.offset <= log.end_offset:
            return self._reset(tp, log, out_of_range=committed.offset)
        return committed.offset

    def position(self, tp: tuple[str, int]) -> int:
        """The offset of the next record this consumer will read from ``tp`` (looked up from
        the committed offset or ``auto_offset_reset`` if not known yet). Raises
        :class:`IllegalStateError` for a partition not assigned, and what the reset raises."""
        self._check_open()
        self._sync()
        tp, state = self._state(tp)
        if state.position is None:
            state.position = self._initial_position(tp)
        return state.position

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Read ``tp`` from ``offset`` at the next poll (an offset out of the log's range is
        reset by ``auto_offset_reset`` when fetched). Raises :class:`IllegalStateError` for a
        partition not assigned, ``ValueError`` for a negative or out-of-int64 offset,
        ``TypeError`` for one that is not an int."""
        self._check_open()
        self._sync()
        offset = check_int_argument("seek offset", offset, minimum=0)
        _tp, state = self._state(tp)
        state.position = offset
        state.clear()

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Seek ``partitions`` (default: all assigned) to their log start offsets."""
        self._seek_to(partitions, lambda log: log.start_offset)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Seek ``partitions`` (default: all assigned) to their high watermarks (last stable
        offsets for read_committed)."""
        self._seek_to(partitions, self._readable_end)

    def _seek_to(self, partitions, where) -> None:
        self._check_open()
        self._sync()
        tps = list(self._partitions) if partitions is None else [as_topic_partition(tp) for tp in partitions]
        for tp in tps:
            _tp, state = self._state(tp)
            state.position = where(self._broker.log(tp))
            state.clear()

    def beginning_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        """``{tp: log start offset}`` of any partitions (assigned or not)."""
        return {tp: self._broker.log(tp).start_offset for tp in map(as_topic_partition, partitions)}

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        """``{tp: high watermark}`` (last stable offset for read_committed) of any partitions:
        the position after the last readable record."""
        return {tp: self._readable_end(self._broker.log(tp)) for tp in map(as_topic_partition, partitions)}

    def pause(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Stop returning records of ``partitions`` (assigned ones) until :meth:`resume`;
        their positions stay (Kafka's ``pause``, for back-pressure). A rebalance that takes a
        partition away forgets its pause."""
        self._check_open()
        self._sync()
        for tp in map(as_topic_partition, partitions):
            self._state(tp)  # IllegalStateError when not assigned
            self._paused.add(tp)

    def resume(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Return records of ``partitions`` again."""
        self._check_open()
        self._paused.difference_update(map(as_topic_partition, partitions))

    def paused(self) -> set[TopicPartition]:
        """The paused partitions."""
        return set(self._paused)

    # --- polling ---------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Records handed out by :meth:`poll` / :meth:`poll_columns` and record batch bytes
        read so far, by Kafka's consumer metric names (``records-consumed-total``,
        ``bytes-consumed-total``; docs/metrics.md)."""
        return self._counters.as_dict()

    def poll(self, max_records: int | None = None, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Up to ``max_records`` (default ``max_poll_records``) records from the assigned
        partitions, in offset order within each partition, starting at each position; the
        positions move past them. Waits up to ``timeout_ms`` for records when none are
        readable, on conditions rather than by sleeping: with one partition, the Log's own
        (``Log.wait_for_data``); with several, the store's append counter, which Producers
        signal (appends made straight on a Log or by another process are seen within 20 ms);
        an idle member wakes when a rebalance gives it partitions. Adopts a pending rebalance
        first.

        Raises :class:`NoOffsetForPartitionError` / :class:`OffsetOutOfRangeError` with
        ``auto_offset_reset="none"``, :class:`IllegalStateError` after :meth:`close`,
        :class:`~seglog.errors.CorruptRecordError` for a batch that fails its CRC32C (unless
        ``check_crcs=False``) or whose base offset does not increase; TypeError / ValueError
        for a non-integer ``max_records`` / ``timeout_ms`` or ``max_records < 1``.
        """
        self._check_open()
        if max_records is None:
            max_records = self.max_poll_records
        max_records = check_int_argument("max_records", max_records, minimum=1)
        timeout_ms = check_int_argument("timeout_ms", timeout_ms)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            self._sync()
            data_seq = self._broker.append_count
            records = self._fetch(max_records)
            self._counters.records += len(records)
            remaining_s = deadline - time.monotonic()
            if records or remaining_s <= 0:
                return records
            self._wait(remaining_s, data_seq)

    def _fetchable(self) -> list[TopicPartition]:
        return [tp for tp in self._partitions if tp not in self._paused]

    def _fetch(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        tps = self._fetchable()
        if not tps:
            return out
        start = self._next_fetch % len(tps)
        self._next_fetch += 1
        for tp in tps[start:] + tps[:start]:
            if len(out) >= max_records:
                break
            self._fetch_partition(tp, self._partitions[tp], max_records - len(out), out)
        return out

    def _fetch_partition(self, tp: TopicPartition, state: _PartitionState, wanted: int,
                         out: list) -> None:
        log = self._broker.log(tp)
        if log.read_only:
            log.refresh()
        if state.position is None:
            if self._unstable_commit(tp):
                return
            state.position = self._initial_position(tp)
        if not state.pending:
            if state.position >= self._readable_end(log) and state.position <= log.end_offset:
                return
            try:
                result = log.read(state.position, self.max_partition_fetch_bytes,
                                  isolation=self.isolation_level)
            except OffsetOutOfRangeError:
                state.position = self._reset(tp, log, out_of_range=state.position)
                result = log.read(state.position, self.max_partition_fetch_bytes,
                                  isolation=self.isolation_level)
            state.clear()
            self._counters.size_bytes += len(result.buffer)
            state.read_start = state.position
            state.read_next_offset = result.next_offset
            # Control batches never, aborted transactions' batches not for read_committed.
            # Every batch, control ones included, is checked (CRC32C, offsets) here, before
            # its header is used; its records are decoded when a poll needs them.
            batches = state.batches
            position = state.position
            try:
                if self._committed_only:
                    for batch in filter_batches(
                            checked_batches(log.backend.iter_batches(result.buffer,
                                                                     check_offsets=True),
                                            check_crcs=self.check_crcs, where=result.log_path,
                                            base_position=result.position),
                            result.aborted_transactions, isolation=self.isolation_level):
                        if batch.last_offset >= position:
                            batches.append(batch)
                else:
                    # read_uncommitted: checked_batches and filter_batches in one loop, the
                    # same checks without two generator steps per batch (2-3 % of a poll's
                    # CPU with 170-record batches); iter_batches(check_offsets=True) checks
                    # the base offsets increase, as checked_batches does. The CRC comes
                    # before the control bit is believed: a flipped bit must not hide a batch.
                    check_crcs = self.check_crcs
                    for batch in log.backend.iter_batches(result.buffer, check_offsets=True):
                        if check_crcs and not batch.is_valid():
                            raise batch_crc_error(batch, result.log_path, result.position)
                        if not batch.is_control and batch.last_offset >= position:
                            batches.append(batch)
            except CorruptRecordError:
                if not batches:
                    raise  # the position stays before the corrupt batch
                # Kafka's consumer hands out the records before a corrupt batch first and
                # raises when the next fetch starts at it.
                state.read_next_offset = batches[-1].last_offset + 1
        self._hand_out(tp, state, wanted, out)

    def _hand_out(self, tp: TopicPartition, state: _PartitionState, wanted: int,
                  out: list) -> None:
        """Move up to ``wanted`` records of the last read into ``out``: the buffered ones,
        then whole batches decoded straight into ConsumerRecords by the backend (no
        per-record Python); a batch only partly wanted leaves the rest buffered."""
        topic, partition = tp
        batches = state.batches
        check_crcs = self.check_crcs
        last_offset = -1  # of the last record handed out here
        while wanted > 0:
            start = state.buffered_index
            buffered = state.buffered
            if start < len(buffered):
                # By index: slicing off the head each poll would be quadratic.
                taken = buffered[start:start + wanted]
                state.buffered_index = start + len(taken)
                out.extend(taken)
                wanted -= len(taken)
                last_offset = taken[-1].offset
                continue
            if state.batch_index >= len(batches):
                break
            batch = batches[state.batch_index]
            state.batch_index += 1
            try:
                records = batch.consumer_records(ConsumerRecord, topic, partition,
                                                 state.read_start, check_crcs=check_crcs)
            except CorruptRecordError:
                if state.last_decoded < 0:
                    raise  # nothing of this read decoded: the position stays before it
                # As above: the records before it first; the next fetch starts at it.
                state.read_next_offset = state.last_decoded + 1
                del batches[state.batch_index:]
                break
            if not records:
                continue
            state.last_decoded = records[-1].offset
            if len(records) <= wanted:
                out.extend(records)
                wanted -= len(records)
                last_offset = state.last_decoded
            else:
                state.buffered, state.buffered_index = records, 0
        if not state.pending:
            # The whole read consumed: continue after it (skips gaps and control batches).
            position = state.position
            assert position is not None  # the read was made from it
            state.position = max(position, state.read_next_offset)
            state.clear()
        elif last_offset >= 0:
            state.position = last_offset + 1

    def poll_columns(self, max_records: int | None = None, timeout_ms: int = 0) -> dict:
        """Like :meth:`poll`, but as numpy columns with no per-record Python objects:
        ``{TopicPartition: Columns}`` (the Log's ``read_columns`` result: ``offsets``,
        ``timestamps_ms``, key/value positions and lengths into ``data``; ``columns.key(i)``
        and ``columns.value(i)`` give one record's bytes). At most ``max_records`` records in
        all; whole batches are decoded, one read per partition. Positions move past the
        records returned. Raises as :meth:`poll`."""
        self._check_open()
        if max_records is None:
            max_records = self.max_poll_records
        max_records = check_int_argument("max_records", max_records, minimum=1)
        timeout_ms = check_int_argument("timeout_ms", timeout_ms)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            self._sync()
            data_seq = self._broker.append_count
            out = {}
            wanted = max_records
            tps = self._fetchable()
            start = self._next_fetch % len(tps) if tps else 0
            self._next_fetch += 1
            for tp in tps[start:] + tps[:start]:
                if wanted <= 0:
                    break
                columns = self._fetch_columns(tp, self._partitions[tp], wanted)
                if columns is not None:
                    out[tp] = columns
                    wanted -= len(columns)
                    self._counters.records += len(columns)
            remaining_s = deadline - time.monotonic()
            if out or remaining_s <= 0:
                return out
            self._wait(remaining_s, data_seq)

    def _fetch_columns(self, tp: TopicPartition, state: _PartitionState, wanted: int):
        log = self._broker.log(tp)
        if log.read_only:
            log.refresh()
        if state.position is None:
            if self._unstable_commit(tp):
                return None
            state.position = self._initial_position(tp)
        state.clear()  # records poll() decoded are re-read as columns from the position
        if log.start_offset <= state.position and state.position >= self._readable_end(log):
            return None
        try:
            columns = log.read_columns(state.position, wanted,
                                       max_bytes=self.max_partition_fetch_bytes,
                                       isolation=self.isolation_level,
                                       check_crcs=self.check_crcs)
        except OffsetOutOfRangeError:
            state.position = self._reset(tp, log, out_of_range=state.position)
            columns = log.read_columns(state.position, wanted,
                                       max_bytes=self.max_partition_fetch_bytes,
                                       isolation=self.isolation_level,
                                       check_crcs=self.check_crcs)
        if not len(columns):
            # Nothing readable at or after the position in the batches read (compacted away,
            # control or aborted batches): step over them.
            result = log.read(state.position, self.max_partition_fetch_bytes,
                              isolation=self.isolation_level)
            state.position = max(state.position, result.next_offset)
            return None
        state.position = int(columns.offsets[-1]) + 1
        # The batches read (uncompressed ones are ``data`` itself; compressed, their records).
        self._counters.size_bytes += len(columns.data)
        return columns

    def _wait(self, remaining_s: float, data_seq: int) -> None:
        """Block until a record may be readable, the group rebalances, or ``remaining_s``.

        ``data_seq`` is the store's append counter read before the fetch that found nothing,
        so an append in between is never missed."""
        waiting = []
        unstable = False
        for tp in self._fetchable():
            state = self._partitions[tp]
            if state.position is None and self._unstable_commit(tp):
                unstable = True  # waits for a transaction's marker, which Producers signal
                continue
            if state.position is None or state.pending:
                return  # something to look up or hand out: go round again
            waiting.append((self._broker.log(tp), state.position))
        if unstable:
            self._broker.wait_for_appends(data_seq, min(remaining_s, _WAIT_SLICE_MS / 1000))
            return
        if not waiting:
            if self._grouped and self._member_id is not None:
                self._broker.wait_for_rebalance(self._group, self._generation_id, remaining_s)
            else:
                self._broker.wait_for_appends(data_seq, remaining_s)
            return
        if len(waiting) == 1 and not waiting[0][0].read_only \
                and waiting[0][0].high_watermark <= waiting[0][1]:
            # (read_committed with records above the last stable offset waits below instead:
            # the Log's condition says "data", which is not yet readable.)
            log, position = waiting[0]
            log.wait_for_data(position, max(1, int(remaining_s * 1000)))
            return
        # Several partitions: a Log is waited on one at a time, so wait on the store's append
        # counter, which Producers of this store bump after every batch. Appends made straight
        # on a Log, or by another process (read-only followers), are seen at the next slice.
        self._broker.wait_for_appends(data_seq, min(remaining_s, _WAIT_SLICE_MS / 1000))

    # --- commits ---------------------------------------------------------------------------------

    def commit(self, offsets: Mapping[tuple[str, int], int | tuple[int, str] | OffsetAndMetadata]
               | None = None) -> None:
        """Commit, synchronously, the positions of every assigned partition (default) or the
        given ``{tp: offset}`` (an offset is the *next* record to read; a value may also be
        ``(offset, metadata)`` or an :class:`OffsetAndMetadata`).

        Raises :class:`CommitFailedError` if the group rebalanced and took partitions from
        this consumer since its last poll (nothing is committed), ``ValueError`` for a
        negative offset or metadata over 4096 bytes, :class:`IllegalStateError` without a
        group_id or after close, :class:`ReadOnlyError` on a read-only store.
        """
        self._check_open()
        if not self._grouped:
            raise IllegalStateError("commit needs a group_id (Kafka: InvalidGroupIdException)")
        revoked = self._sync()
        if revoked:
            raise CommitFailedError(
                f"Commit cannot be completed since the group {self.group_id!r} has rebalanced "
                f"and assigned {sorted(revoked)} to other members")
        if offsets is None:
            to_commit = {tp: OffsetAndMetadata(state.position)
                         for tp, state in self._partitions.items() if state.position is not None}
        else:
            to_commit = {}
            for tp, value in offsets.items():
                tp = as_topic_partition(tp)
                om = as_offset_and_metadata(value)
                check_commit_offset(tp, om)
                self._broker.topic(tp.topic).log(tp.partition)  # UnknownTopicOrPartitionError
                to_commit[tp] = om
        generation = self._generation_id if self._member_id is not None else -1
        self._broker.offset_commit(self._group, member_id=self._member_id,
                                  generation_id=generation, offsets=to_commit)

    def committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset of ``tp`` (any partition), or None."""
        self._check_open()
        if not self._grouped:
            return None
        om = self._broker.offset_fetch(self._group, as_topic_partition(tp))
        return None if om is None else om.offset

    # --- lifecycle -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        if self._broker.closed:
            raise LogClosedError(f"store {self._broker.path} is closed")

    def close(self) -> None:
        """Leave the group **without committing** (as a crash would): the group rebalances
        and the partitions' next owners resume from the last commit. Idempotent."""
        if self._closed:
            return
        if self._member_id is not None and self._grouped:
            self._broker.leave_group(self._group, self._member_id)
        self._member_id = None
        self._partitions = {}
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Consumer({self.client_id!r}, group={self.group_id!r}, "
                f"partitions={len(self._partitions)})")

