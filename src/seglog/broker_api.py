"""The interface between the clients and the broker side: :class:`BrokerApi`.

A :class:`~seglog.clients.producer.Producer` or :class:`~seglog.clients.consumer.Consumer`
talks to the broker only through these methods, shaped like the Kafka requests it would send
(FindCoordinator, JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, OffsetFetch, InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, Metadata), plus in-process
access to a partition's Log for produce and fetch. The :class:`~seglog.store.Store`
implements it over its coordinators; the wire broker (``seglog serve``) will implement the
same methods on the server side, answering each failure with the ``kafka_error_code`` of the
:mod:`seglog.errors` class raised.

Two departures from the wire protocol, both because the embedded clients share a process with
the store: the producer appends its batches (transactional offset commits included) to the
Log itself, with its producer id and sequence numbers, so :meth:`BrokerApi.txn_offset_commit`
is split into encoding the records and registering the appended batch; and consumers wait for
appends on a counter (:meth:`BrokerApi.wait_for_appends`) instead of a Fetch long-poll.

Imports only leaves (types, errors), so the clients and the store both import it without a
cycle.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple, Protocol

from .types import MemberAssignment, OffsetAndMetadata, TopicPartition

__all__ = ["BrokerApi", "ShareGroupsApi", "TopicHandle", "TxnOffsetCommitRecords"]


class TxnOffsetCommitRecords(NamedTuple):
    """A transactional offset commit encoded for the producer to append in its transaction:
    the ``tp`` of the group's ``__consumer_offsets`` partition and one record per committed
    partition (``keys``, ``values``, ``timestamps_ms``, Kafka's offset-commit schema)."""

    tp: TopicPartition
    keys: list
    values: list
    timestamps_ms: list


class TopicHandle(Protocol):
    """One topic as a client sees it (Kafka's topic metadata plus the in-process Logs):
    ``name``, ``config`` (its :class:`~seglog.storage.config.LogConfig`),
    :attr:`partitions` and :meth:`log`."""

    name: str
    config: Any

    @property
    def partitions(self) -> int:
        """The partition count."""
        ...

    def log(self, partition: int) -> Any:
        """The Log of ``partition``; UnknownTopicOrPartitionError out of range,
        LogClosedError once the topic is deleted or the broker closed."""
        ...


class ShareGroupsApi(Protocol):
    """The broker side of share groups (KIP-932) as the embedded share consumer calls it:
    Kafka's ShareGroupHeartbeat (join/leave), ShareFetch and ShareAcknowledge, in-process
    (:class:`seglog.store_share_groups.EmbeddedShareGroups` implements it). Thread-safe."""

    def join(self, group_id: str, topics: Iterable[str], *, member_id: str | None = None) -> str:
        """Join ``group_id`` (or change this member's topics); returns the member id."""
        ...

    def leave(self, group_id: str, member_id: str) -> None:
        """Leave the group; the records the member holds go back to the queue."""
        ...

    def fetch(self, group_id: str, member_id: str, *, max_records: int,
              start_index: int = 0) -> list:
        """Acquire records: ``[(tp, batches, [(first_offset, last_offset,
        delivery_count), ...]), ...]``; empty when none is available now."""
        ...

    def acknowledge(self, group_id: str, member_id: str,
                    acks: Mapping[TopicPartition, Any]) -> dict[TopicPartition, int]:
        """Acknowledge ``{tp: [(first_offset, last_offset, types), ...]}``; returns each
        partition's Kafka error code."""
        ...

    def next_lock_deadline_ms(self, group_id: str) -> int | None:
        """The group's earliest acquisition-lock deadline (ms since the epoch), or None."""
        ...

    def group_config(self, group_id: str) -> dict[str, str]:
        """The group's effective share-group configs."""
        ...


class BrokerApi(Protocol):
    """What the embedded clients call on the broker side (see the module docstring).

    ``path`` names the broker's data directory in messages; ``read_only`` is True for a
    follower that cannot be written. Every method is thread-safe. Errors are
    :mod:`seglog.errors` classes, each with its Kafka error code.
    """

    path: str
    read_only: bool

    @property
    def closed(self) -> bool:
        """Whether the broker was closed (every call then raises LogClosedError)."""
        ...

    # --- metadata and partition access (Metadata, Produce, Fetch in-process) -------------------

    def topic(self, name: str) -> TopicHandle:
        """Topic ``name``; UnknownTopicOrPartitionError if it does not exist."""
        ...

    def log(self, tp: tuple[str, int]) -> Any:
        """The Log of ``tp`` (to append to or read from in-process);
        UnknownTopicOrPartitionError if it does not exist."""
        ...

    @property
    def append_count(self) -> int:
        """How many times :meth:`notify_appended` was called: read it before a fetch that
        may find nothing, then pass it to :meth:`wait_for_appends`."""
        ...

    def notify_appended(self) -> None:
        """Records were appended to some partition: wake the consumers waiting for any."""
        ...

    def wait_for_appends(self, append_count: int, timeout_s: float) -> None:
        """Block up to ``timeout_s`` seconds unless :attr:`append_count` moved past
        ``append_count`` (a fetch long-poll over every partition at once)."""
        ...

    def share_groups(self) -> ShareGroupsApi:
        """The broker's share groups (KIP-932), for the embedded share consumer. Raises
        ReadOnlyError on a read-only broker, LogClosedError."""
        ...

    # --- groups (FindCoordinator, JoinGroup, SyncGroup, LeaveGroup, OffsetCommit/Fetch) --------

    def find_coordinator(self, group_id: str) -> None:
        """Make sure ``group_id`` has a coordinator (Kafka's FindCoordinator). Raises
        InvalidGroupIdError (INVALID_GROUP_ID), LogClosedError."""
        ...

    def assignor_names(self) -> tuple[str, ...]:
        """The partition assignment strategies the group coordinator runs (``range``,
        ``roundrobin``): a JoinGroup with another is refused."""
        ...

    def join_group(self, group_id: str, *, member_id: str | None, client_id: str,
                   topics: frozenset, assignor: str, group_instance_id: str | None) -> str:
        """Kafka's JoinGroup: a new member (``member_id`` None) or a member changing its
        ``topics``; returns the member id. The group rebalances at once. Raises
        IllegalStateError (INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID)."""
        ...

    def sync_group(self, group_id: str, member_id: str) -> MemberAssignment | None:
        """Kafka's SyncGroup: the member's current assignment, or None when it is no longer
        a member."""
        ...

    def leave_group(self, group_id: str, member_id: str) -> None:
        """Kafka's LeaveGroup (no-op for an unknown member); the group rebalances."""
        ...

    def wait_for_rebalance(self, group_id: str, generation_id: int, timeout_s: float) -> None:
        """Block up to ``timeout_s`` seconds unless the group's generation is no longer
        ``generation_id`` (what a heartbeat answering REBALANCE_IN_PROGRESS tells a member)."""
        ...

    def offset_commit(self, group_id: str, *, member_id: str | None, generation_id: int,
                      offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Kafka's OffsetCommit of checked ``offsets`` (``member_id`` None: from outside the
        group, allowed only while it has no members). Raises CommitFailedError
        (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), ReadOnlyError."""
        ...

    def offset_fetch(self, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        """Kafka's OffsetFetch: the group's committed offset of ``tp``, or None."""
        ...

    def offset_commit_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction holds an offset commit of ``group_id`` for ``tp`` that its
        marker has not settled yet (Kafka's OffsetFetch with require_stable answers
        UNSTABLE_OFFSET_COMMIT then)."""
        ...

    # --- producer ids and transactions ---------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None = None, *,
                         transaction_timeout_ms: int = 60_000) -> tuple[int, int]:
        """Kafka's InitProducerId: ``(producer_id, epoch)``. Without ``transactional_id`` a
        producer id never used before in this broker, epoch 0; with one, the transaction
        coordinator's id and next epoch (fencing the previous producer of the id). Raises
        InvalidTransactionTimeoutError, ReadOnlyError."""
        ...

    def check_producer_epoch(self, transactional_id: str, producer_id: int,
                             producer_epoch: int) -> None:
        """ProducerFencedError unless ``(producer_id, producer_epoch)`` is the current
        producer of ``transactional_id`` (what every transactional request checks first)."""
        ...

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, partitions: Iterable[TopicPartition]) -> None:
        """Kafka's AddPartitionsToTxn. Raises ProducerFencedError,
        UnknownTopicOrPartitionError."""
        ...

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> TopicPartition:
        """Kafka's AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
        transaction; returns it. Raises ProducerFencedError."""
        ...

    def txn_offset_commit_records(self, group_id: str,
                                  offsets: Mapping[TopicPartition, OffsetAndMetadata]
                                  ) -> TxnOffsetCommitRecords:
        """First half of Kafka's TxnOffsetCommit: the records the producer appends, in its
        transaction, to the group's ``__consumer_offsets`` partition."""
        ...

    def txn_offset_commit(self, group_id: str, producer_id: int,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                          partition: int, base_offset: int, commit_timestamp_ms: int) -> None:
        """Second half of Kafka's TxnOffsetCommit: the producer appended those records at
        ``base_offset`` of ``__consumer_offsets`` partition ``partition``; they become the
        group's committed offsets when the transaction commits, and are dropped if it
        aborts."""
        ...

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                commit: bool, bump_epoch: bool = False) -> tuple[int, int]:
        """Kafka's EndTxn: COMMIT (``commit``) or ABORT markers to every partition of the
        transaction; returns the producer's ``(producer_id, epoch)`` (a new epoch with
        ``bump_epoch``, KIP-360). Raises ProducerFencedError, InvalidTxnStateError."""
        ...
