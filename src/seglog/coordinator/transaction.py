"""The transaction coordinator, embedded in a Store: transactional ids, epochs and markers.

Kafka's ``TransactionCoordinator`` in one process. Each transactional id maps to a producer id
and an epoch and to the state of its current transaction (Kafka's ``TransactionMetadata``);
every change of that state is first written as a record of the compacted internal topic
``__transaction_state`` (:mod:`seglog.coordinator.txn_schema`, Kafka's key/value schema; partition
``abs(hashCode(transactional id)) % n``), then applied in memory. On open the store replays the
topic, last value per key winning, so ids and epochs are never handed out twice across
restarts. Why a topic and not a small file: it is what Kafka keeps, so a broker adopting the
directory (or kafka tools) reads the same state; it is appended to, never rewritten, so a
transition costs one small append; and the cleaner already compacts it. The epoch bump of
:meth:`init_producer_id` is flushed (fsync) before the epoch is handed out; the other
transitions are in the page cache when they return, as consumer offset commits are.

The transitions (``txn_schema`` states):

* :meth:`init_producer_id` (InitProducerId): a new id gets a fresh producer id (from the
  :class:`~seglog.coordinator.producer_ids.ProducerIdManager`) and epoch 0. A known id has its
  epoch bumped, which fences the producer that held it; if that producer left a transaction
  Ongoing, the coordinator first bumps the epoch once to fence it and aborts the transaction
  with that epoch (PrepareAbort, ABORT markers to every partition it touched, CompleteAbort),
  then bumps again for the new producer, as Kafka's coordinator does (the client's retried
  InitProducerId). At epoch 32766 the id moves to a new producer id with epoch 0 (Kafka's
  epoch exhaustion).
* :meth:`add_partitions` (AddPartitionsToTxn / AddOffsetsToTxn): the partitions are recorded
  (state Ongoing) *before* the producer writes to them, so a crash leaves the coordinator
  knowing where markers must go.
* :meth:`end_transaction` (EndTxn): PrepareCommit / PrepareAbort, then a COMMIT / ABORT
  control batch to every partition of the transaction (``Log.append_txn_marker``,
  coordinator epoch 0: there is one coordinator), then CompleteCommit / CompleteAbort. A
  marker written to a ``__consumer_offsets`` partition makes the group coordinator apply (or
  drop) the producer's pending transactional offset commits, as Kafka's does on the marker.
* On open, a transaction found in PrepareCommit / PrepareAbort (the process died while
  writing markers) is completed: its markers are written again (a second marker for a closed
  transaction is harmless). One found Ongoing stays open until a new producer initialises
  the id or :meth:`abort_timed_out` aborts it after ``transaction.timeout.ms``.

A directory written by Kafka 4.x (``transaction.version`` 2) holds ``TransactionLogValue``
version 1 records; they load like version 0 ones. Their ``next_producer_id`` and client
transaction version decide how a pending transaction completes (Kafka's
``TransactionMetadata.prepareComplete``) and are written back, in version 1, until a seglog
producer initialises the id; every state seglog starts is written in version 0 until a
``transaction.version`` 2 client's partition add or EndTxn v5 sets the client transaction
version (then version 1, as Kafka writes it). For those clients :meth:`handle_end_transaction`
bumps the epoch at every commit and abort (KIP-890 part 2): the Prepare state and the
markers carry the new epoch, the epoch before is remembered so a retried EndTxn is
recognised (also after a load: see ``_TxnMetadata``).

A stale producer (lower epoch, or an older producer id of the id) gets
:class:`~seglog.errors.ProducerFencedError` from every call. The markers also fence it at the
log: its later batches carry an epoch below the partition's and are refused.

Thread safety: every method runs under the store's metadata lock (lock order: store, then
Logs), so producers in several threads share one coordinator.

Broker-side state: it reaches storage only through
:class:`~seglog.coordinator.internal_topics.InternalTopics` and imports no client.
"""

from __future__ import annotations

import logging
import warnings
from typing import Iterable, NamedTuple

from . import txn_schema
from .internal_topics import InternalTopics, TopicLogs
from .offsets import OffsetsManager
from .producer_ids import ProducerIdManager
from ..arguments import TRANSACTIONAL_ID_BYTES_MAX, check_transactional_id  # noqa: F401 (re-exported)
from ..errors import (
    ConcurrentTransactionsError,
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    SeglogError,
    UnknownTopicOrPartitionError,
)
from ..storage.config import checked_now_ms
from ..storage.producer_state import increment_sequence
from ..format import REASON_BAD_RECORDS
from .offsets_schema import OFFSETS_TOPIC
from ..types import OffsetAndMetadata, TopicPartition

__all__ = ["TRANSACTIONAL_ID_BYTES_MAX", "TransactionCoordinator", "TransactionDescription",
           "check_transactional_id"]

logger = logging.getLogger("seglog.coordinator.transaction")

#: Kafka's ``transaction.timeout.ms`` default (producer side) and the broker's
#: ``transaction.max.timeout.ms`` (15 minutes).
TRANSACTION_TIMEOUT_MS_DEFAULT = 60_000
TRANSACTION_TIMEOUT_MS_MAX = 15 * 60_000
#: The last epoch an id keeps its producer id for (``Short.MaxValue - 1``); the next bump
#: takes a new producer id at epoch 0.
PRODUCER_EPOCH_MAX = 32767 - 1
#: The coordinator epoch markers carry (one coordinator, never moved).
COORDINATOR_EPOCH = 0
#: The first ``transaction.version`` whose clients get a new epoch from every EndTxn
#: (Kafka's ``TransactionVersion.supportsEpochBump``).
_TRANSACTION_VERSION_EPOCH_BUMP = 2
#: The states a transaction.version 2 EndTxn leaves behind (its epoch bumped).
_ENDED_OR_ENDING = frozenset({txn_schema.PREPARE_COMMIT, txn_schema.PREPARE_ABORT,
                              txn_schema.COMPLETE_COMMIT, txn_schema.COMPLETE_ABORT})


class TransactionDescription(NamedTuple):
    """One transactional id's state, as Kafka's DescribeTransactions shows it: ``state`` is
    the state name (``"Empty"``, ``"Ongoing"``, ``"CompleteCommit"``, ...); ``partitions``
    the sorted partitions of the current (or last) transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    partitions: tuple[TopicPartition, ...]
    timeout_ms: int
    start_timestamp_ms: int
    last_update_timestamp_ms: int


class _TxnMetadata:
    """Kafka's ``TransactionMetadata``: mutable, guarded by the store lock.

    ``previous_producer_id``, ``next_producer_id`` and ``client_transaction_version`` come
    from a version 1 value written by a Kafka coordinator at ``transaction.version`` 2
    (defaults otherwise): they are kept, and written back in version 1, until a seglog
    producer initialises the id, so a pending Kafka transaction seglog completes ends as
    Kafka's would (see :meth:`TransactionCoordinator._complete`)."""

    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "timeout_ms", "status",
                 "partitions", "start_ms", "last_update_ms", "previous_producer_id",
                 "next_producer_id", "client_transaction_version", "last_producer_epoch",
                 "rotated_from_producer_id")

    def __init__(self, transactional_id: str, value: txn_schema.TransactionLogValue):
        self.transactional_id = transactional_id
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.timeout_ms = value.timeout_ms
        self.status = value.status
        self.partitions = {TopicPartition(t, p) for t, p in value.partitions}
        self.start_ms = value.start_timestamp_ms
        self.last_update_ms = value.last_update_timestamp_ms
        self.previous_producer_id = value.previous_producer_id
        self.next_producer_id = value.next_producer_id
        self.client_transaction_version = value.client_transaction_version
        # In memory only, as Kafka's TransactionMetadata.lastProducerEpoch and (for seglog's
        # own rotations) previousProducerId: what a KIP-360 retry of InitProducerId is
        # recognised by (handle_init_producer_id). -1 after a load.
        self.last_producer_epoch = -1
        self.rotated_from_producer_id = -1
        if self.client_transaction_version >= _TRANSACTION_VERSION_EPOCH_BUMP \
                and self.status in _ENDED_OR_ENDING and self.producer_epoch > 0:
            # A transaction.version 2 EndTxn bumped the epoch: its retry (from the epoch
            # before) must still be recognised by the coordinator that loads this state.
            self.last_producer_epoch = self.producer_epoch - 1

    def to_value(self) -> txn_schema.TransactionLogValue:
        """The value to write: version 0 (what seglog writes, see :mod:`seglog.coordinator.txn_schema`)
        unless Kafka's version 1 fields are still set, then version 1 with them."""
        partitions = () if self.status == txn_schema.EMPTY else tuple(sorted(self.partitions))
        flexible = (self.previous_producer_id, self.next_producer_id,
                    self.client_transaction_version) != (-1, -1, 0)
        return txn_schema.TransactionLogValue(
            self.producer_id, self.producer_epoch, self.timeout_ms, self.status, partitions,
            self.last_update_ms, self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
            version=txn_schema.FLEXIBLE_VALUE_VERSION if flexible else txn_schema.VALUE_VERSION)

    def describe(self) -> TransactionDescription:
        return TransactionDescription(
            self.transactional_id, self.producer_id, self.producer_epoch,
            txn_schema.STATE_NAMES[self.status], tuple(sorted(self.partitions)),
            self.timeout_ms, self.start_ms, self.last_update_ms)


class TransactionCoordinator:
    """The coordinator of a writable :class:`~seglog.store.Store` (see the module docstring).
    Made by the store with its :class:`InternalTopics`, producer ids and committed offsets
    (a COMMIT marker on ``__consumer_offsets`` applies pending transactional commits there);
    replays ``__transaction_state`` if it exists and completes transactions left
    half-completed by a crash."""

    def __init__(self, topics: InternalTopics, producer_ids: ProducerIdManager,
                 offsets: OffsetsManager, *, complete_pending: bool = True):
        """Load ``__transaction_state`` (if it exists) and, with ``complete_pending``,
        complete the transactions a crash left between their markers (which writes);
        without, the caller calls :meth:`complete_pending` once it may write. Raises
        CorruptRecordError when the topic cannot be loaded (see ``_load``)."""
        self._topics = topics
        self._producer_ids = producer_ids
        self._offsets = offsets
        self._txns: dict[str, _TxnMetadata] = {}
        #: A cluster member's coordinator epoch per ``__transaction_state`` partition (the
        #: partition's leader epoch, :meth:`load_partition`); absent: COORDINATOR_EPOCH.
        self._coordinator_epochs: dict[int, int] = {}
        #: A cluster member's marker sender (:meth:`set_marker_sender`); None: the markers
        #: are appended to the local logs synchronously (standalone broker, embedded Store).
        self._marker_sender = None
        #: Transactional ids whose markers the sender is delivering (state PrepareX).
        self._markers_in_flight: set[str] = set()
        #: ``{partition: why}``: the ``__transaction_state`` partitions whose last load
        #: failed (their transactional ids are not known here), with offset and reason.
        self.load_failures: dict[int, str] = {}
        with topics.lock:
            topic = topics.existing_topic(txn_schema.TRANSACTION_STATE_TOPIC)
            if topic is not None:
                self._load(topic)
        if complete_pending:
            self.complete_pending()

    def complete_pending(self) -> None:
        """Write the markers of every transaction left in PrepareCommit / PrepareAbort
        (Kafka's coordinator does so when it loads a partition)."""
        if getattr(self._topics, "replicated", False) and self._marker_sender is None:
            # A cluster member's Store at open: only the leader of a partition completes
            # its transactions, once it loaded it (the marker sender is set then).
            return
        with self._topics.lock:
            for metadata in list(self._txns.values()):
                if metadata.status in (txn_schema.PREPARE_COMMIT, txn_schema.PREPARE_ABORT):
                    self._complete(metadata, metadata.status == txn_schema.PREPARE_COMMIT,
                                   checked_now_ms(None))

    # --- persistence ---------------------------------------------------------------------------

    def _load(self, topic: TopicLogs) -> None:
        """Replay ``__transaction_state``. The bytes are untrusted: CRC32C checked and base
        offsets increasing (``Log.records``), keys and values parsed with their checks, as
        Kafka's ``TransactionStateManager`` loads: a key of an unknown version is skipped with
        a warning; a null key, a value of an unknown version or anything else that does not
        parse raises :class:`~seglog.errors.CorruptRecordError` naming the partition and offset
        (Kafka's TransactionStateManager fails the partition's load): skipping it could
        bring back a transaction's older state silently. At open the failure is the
        partition's alone: its transactional ids are left out, it is named in
        :attr:`load_failures` and logged, and the other partitions load (the broker's
        coordinator partitions answer NOT_COORDINATOR for it)."""
        for partition in range(topic.partitions):
            try:
                self._load_partition(partition, topic.log(partition))
            except CorruptRecordError as exc:  # its files or its records (PartitionOffline...)
                self._forget_partition(partition, topic.partitions)
                self.load_failures[partition] = str(exc)
                # The text only: the exception's frames hold views of the log's pages.
                logger.error("not serving the transactional ids of %s-%d: %s",
                             txn_schema.TRANSACTION_STATE_TOPIC, partition, str(exc))

    def _load_partition(self, partition: int, log) -> None:
        """Replay one partition of ``__transaction_state`` (see :meth:`_load`).

        The error is raised outside the ``except``, with the record loop in another frame:
        neither its context nor its traceback then holds the records, which are views of
        the log's pages (a truncation of the partition would be refused while they live)."""
        at = [log.start_offset]  # the offset being loaded, for the message
        try:
            self._replay_partition(partition, log, at)
            return
        except (CorruptRecordError, InvalidRecordError) as exc:
            why = (str(exc), getattr(exc, "reason", "") or REASON_BAD_RECORDS,
                   getattr(exc, "position", -1))
        raise CorruptRecordError(
            f"{txn_schema.TRANSACTION_STATE_TOPIC}-{partition} ({log.dir_path}) cannot "
            f"be loaded after offset {at[0]}: {why[0]}", reason=why[1], position=why[2])

    def _replay_partition(self, partition: int, log, at: list) -> None:
        for record in log.records(log.start_offset, max_offset=log.end_offset,
                                  check_crcs=True):
            at[0] = record.offset
            if record.key is None:  # Kafka: require(record.hasKey, ...)
                raise CorruptRecordError("Transaction state log's key should not be "
                                         "null", reason=REASON_BAD_RECORDS)
            version = txn_schema.key_version(record.key)
            if version != txn_schema.KEY_VERSION:
                # Kafka's TransactionStateManager: "Unknown message key with
                # version ... Ignoring it" (a record of a newer broker).
                warnings.warn(
                    f"seglog: {txn_schema.TRANSACTION_STATE_TOPIC}-{partition} offset "
                    f"{record.offset}: unknown message key with version {version}; "
                    "ignoring it", RuntimeWarning, stacklevel=3)
                continue
            transactional_id = txn_schema.decode_key(record.key)
            value = txn_schema.decode_value(record.value)
            if value is None:
                self._txns.pop(transactional_id, None)
            else:
                self._txns[transactional_id] = _TxnMetadata(transactional_id, value)

    def load_partition(self, partition: int, *, coordinator_epoch: int = COORDINATOR_EPOCH
                       ) -> None:
        """Forget the transactional ids of ``__transaction_state`` partition ``partition`` and
        replay that partition alone (a cluster member that became its leader: Kafka's
        ``TransactionStateManager.loadTransactionsForTxnTopicPartition``); the markers of its
        transactions carry ``coordinator_epoch`` from now on (Kafka: the partition's leader
        epoch). Transactions found in PrepareCommit / PrepareAbort are not completed here
        (:meth:`complete_pending` does). Nothing is loaded when the topic does not exist.
        Raises CorruptRecordError as :meth:`_load` says (the partition is then left empty)."""
        with self._topics.lock:
            self.unload_partition(partition)
            self._coordinator_epochs[partition] = coordinator_epoch
            topic = self._topics.existing_topic(txn_schema.TRANSACTION_STATE_TOPIC)
            if topic is None or not 0 <= partition < topic.partitions:
                return
            try:
                self._load_partition(partition, topic.log(partition))
            except CorruptRecordError as exc:
                self.unload_partition(partition)
                self.load_failures[partition] = str(exc)
                raise
            self.load_failures.pop(partition, None)

    def unload_partition(self, partition: int) -> None:
        """Forget the transactional ids of ``__transaction_state`` partition ``partition``
        (a cluster member that stopped leading it: Kafka's
        ``removeTransactionsForTxnTopicPartition``); the log is not touched."""
        with self._topics.lock:
            self._coordinator_epochs.pop(partition, None)
            self.load_failures.pop(partition, None)  # not ours to serve any more
            topic = self._topics.existing_topic(txn_schema.TRANSACTION_STATE_TOPIC)
            if topic is None:
                return
            self._forget_partition(partition, topic.partitions)

    def _forget_partition(self, partition: int, count: int) -> None:
        """Drop the transactional ids of ``partition`` (of ``count``) from memory."""
        for transactional_id in [
                t for t in self._txns
                if txn_schema.partition_for_transactional_id(t, count) == partition]:
            del self._txns[transactional_id]
            self._markers_in_flight.discard(transactional_id)

    # --- a cluster member's markers (seglog.cluster.txn_markers) -------------------------------

    def set_marker_sender(self, sender) -> None:
        """Deliver the markers through ``sender`` from now on (a cluster member: the data
        partitions are led by any broker). ``sender.send(transactional_id, producer_id,
        producer_epoch, coordinator_epoch, commit, partitions)`` is called under the store
        lock and must only schedule the delivery; once every partition acknowledged it the
        sender calls :meth:`markers_written`. Until then the transaction stays in
        PrepareCommit / PrepareAbort (Kafka's ``TransactionMarkerChannelManager``): EndTxn
        is answered after the Prepare state is written, and a new InitProducerId or
        AddPartitionsToTxn gets CONCURRENT_TRANSACTIONS meanwhile."""
        with self._topics.lock:
            self._marker_sender = sender

    def write_marker(self, tp: TopicPartition, *, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int, commit: bool, transaction_version: int = 0,
                     now_ms: int | None = None) -> int:
        """Append one marker to the local log of ``tp`` (WriteTxnMarkers on the partition's
        leader, or a coordinator's own partition) and, on ``__consumer_offsets``, apply or
        drop the producer's pending offset commits there. Returns the marker's offset.
        Raises what ``Log.append_txn_marker`` raises (TransactionCoordinatorFencedError for
        an older coordinator epoch) and UnknownTopicOrPartitionError; for a
        ``transaction_version`` 2 marker (WriteTxnMarkers v2) InvalidProducerEpochError
        unless its epoch is above the producer's in this partition (Kafka's
        ``ProducerAppendInfo.checkProducerEpoch``: the coordinator bumped it), except the
        retry of a marker already written (the same epoch, no transaction open)."""
        tp = TopicPartition(*tp)
        with self._topics.lock:
            self._topics.check_writable()
            log = self._topics.partition_log(tp)
            if transaction_version >= _TRANSACTION_VERSION_EPOCH_BUMP:
                entry = log.producer_state.last_entry(producer_id)
                current = -1 if entry is None else entry.producer_epoch
                retry = entry is not None and producer_epoch == current and (
                    entry.current_txn_first_offset is None or producer_epoch == 32767)
                if producer_epoch <= current and not retry:
                    raise InvalidProducerEpochError(
                        f"Epoch of producer {producer_id} at offset {log.end_offset} in "
                        f"{tp.topic}-{tp.partition} is {producer_epoch}, which is <= the "
                        f"last seen epoch {current} (TV{transaction_version})")
            offset = log.append_txn_marker(
                producer_id=producer_id, producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch, commit=commit, now_ms=now_ms)
            if tp.topic == OFFSETS_TOPIC:
                self._offsets.complete_transaction(tp.partition, producer_id, commit=commit,
                                                   marker_offset=offset)
        self._topics.notify_appended()
        return offset

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool, *, now_ms: int | None = None) -> bool:
        """Every marker the sender was given for ``transactional_id``'s transaction was
        acknowledged: write CompleteCommit / CompleteAbort (Kafka's
        ``TxnMarkerCompletion``). Nothing happens (False) when the id is no longer in that
        Prepare state with that producer (the partition moved to another coordinator)."""
        now = checked_now_ms(now_ms)
        with self._topics.lock:
            self._markers_in_flight.discard(transactional_id)
            metadata = self._txns.get(transactional_id)
            prepared = txn_schema.PREPARE_COMMIT if commit else txn_schema.PREPARE_ABORT
            if metadata is None or metadata.status != prepared \
                    or metadata.producer_id != producer_id \
                    or metadata.producer_epoch != producer_epoch:
                return False
            self._topics.check_writable()
            self._finish(metadata, commit, now)
            return True

    def marker_partitions_in_flight(self) -> frozenset[str]:
        """The transactional ids whose markers are being delivered (tests, diagnostics)."""
        with self._topics.lock:
            return frozenset(self._markers_in_flight)

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The coordinator epoch the markers of ``transactional_id``'s transactions carry."""
        topic = self._topics.existing_topic(txn_schema.TRANSACTION_STATE_TOPIC)
        if topic is None or not self._coordinator_epochs:
            return COORDINATOR_EPOCH
        partition = txn_schema.partition_for_transactional_id(transactional_id,
                                                              topic.partitions)
        return self._coordinator_epochs.get(partition, COORDINATOR_EPOCH)

    def _write(self, metadata: _TxnMetadata, *, durable: bool = False) -> None:
        """Append the state of ``metadata`` to its ``__transaction_state`` partition
        (``durable``: and fsync it)."""
        topic = self._topics.internal_topic(txn_schema.TRANSACTION_STATE_TOPIC)
        partition = txn_schema.partition_for_transactional_id(metadata.transactional_id,
                                                              topic.partitions)
        log = topic.log(partition)
        log.append_batch([txn_schema.encode_value(metadata.to_value())],
                         keys=[txn_schema.encode_key(metadata.transactional_id)],
                         timestamps_ms=[metadata.last_update_ms])
        if durable:
            log.flush()

    # --- queries -------------------------------------------------------------------------------

    def _loaded_txn(self, transactional_id: str) -> _TxnMetadata | None:
        """The metadata of ``transactional_id`` or None; CorruptRecordError (the load's own
        message) when its ``__transaction_state`` partition failed to load: its state is
        unknown, and starting it afresh could bring back an older producer epoch."""
        if self.load_failures:
            topic = self._topics.existing_topic(txn_schema.TRANSACTION_STATE_TOPIC)
            if topic is not None:
                why = self.load_failures.get(txn_schema.partition_for_transactional_id(
                    transactional_id, topic.partitions))
                if why is not None:
                    raise CorruptRecordError(why, reason=REASON_BAD_RECORDS)
        return self._txns.get(transactional_id)

    def describe(self, transactional_id: str) -> TransactionDescription | None:
        """The state of ``transactional_id``, or None if it was never initialised."""
        with self._topics.lock:
            metadata = self._loaded_txn(transactional_id)
            return None if metadata is None else metadata.describe()

    def transactional_ids(self) -> list[str]:
        """Every known transactional id, sorted (Kafka's ListTransactions)."""
        with self._topics.lock:
            return sorted(self._txns)

    def _current(self, transactional_id: str, producer_id: int,
                 producer_epoch: int) -> _TxnMetadata:
        metadata = self._loaded_txn(transactional_id)
        if metadata is None or metadata.producer_id != producer_id \
                or metadata.producer_epoch != producer_epoch:
            now = ("unknown" if metadata is None else
                   f"producer id {metadata.producer_id} epoch {metadata.producer_epoch}")
            raise ProducerFencedError(
                f"There is a newer producer with the same transactionalId "
                f"{transactional_id!r} ({now}) which fences the current one (producer id "
                f"{producer_id} epoch {producer_epoch})")
        return metadata

    def check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> None:
        """Raise :class:`ProducerFencedError` unless ``(producer_id, producer_epoch)`` is the
        current producer of ``transactional_id``."""
        with self._topics.lock:
            self._current(transactional_id, producer_id, producer_epoch)

    # --- transitions ---------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, *,
                         timeout_ms: int = TRANSACTION_TIMEOUT_MS_DEFAULT,
                         now_ms: int | None = None) -> tuple[int, int]:
        """Kafka's InitProducerId for ``transactional_id``: returns ``(producer_id, epoch)``
        for the new producer, fencing the previous one and aborting its open transaction
        (see the module docstring). ValueError for a bad id or a timeout outside
        1..900000 ms (Kafka: INVALID_TRANSACTION_TIMEOUT)."""
        check_transactional_id(transactional_id)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) \
                or not 1 <= timeout_ms <= TRANSACTION_TIMEOUT_MS_MAX:
            raise InvalidTransactionTimeoutError(
                f"transaction timeout must be in 1..{TRANSACTION_TIMEOUT_MS_MAX} ms, got "
                f"{timeout_ms!r} (INVALID_TRANSACTION_TIMEOUT)")
        now = checked_now_ms(now_ms)
        with self._topics.lock:
            self._topics.check_writable()
            metadata = self._loaded_txn(transactional_id)
            if metadata is None:
                metadata = _TxnMetadata(transactional_id, txn_schema.TransactionLogValue(
                    self._producer_ids.allocate(), 0, timeout_ms, txn_schema.EMPTY, (), now))
            else:
                if metadata.status in (txn_schema.PREPARE_COMMIT, txn_schema.PREPARE_ABORT):
                    self._complete(metadata, metadata.status == txn_schema.PREPARE_COMMIT, now)
                if metadata.status == txn_schema.ONGOING:
                    self._fence_and_abort(metadata, now)
                self._bump_epoch(metadata)
                metadata.status = txn_schema.EMPTY
                metadata.partitions = set()
                # A seglog producer now holds the id: seglog's epoch rules (no bump per
                # EndTxn, transaction.version 0/1), so Kafka's version 1 fields go.
                metadata.previous_producer_id = metadata.next_producer_id = -1
                metadata.client_transaction_version = 0
                metadata.timeout_ms = timeout_ms
                metadata.start_ms = -1
                metadata.last_update_ms = now
            self._write(metadata, durable=True)
            self._txns[transactional_id] = metadata
            return metadata.producer_id, metadata.producer_epoch

    def _bump_epoch(self, metadata: _TxnMetadata) -> None:
        # A bump by a new producer (or a fence) forgets the epoch a KIP-360 retry could name.
        metadata.last_producer_epoch = -1
        if metadata.producer_epoch >= PRODUCER_EPOCH_MAX:
            metadata.producer_id = self._producer_ids.allocate()
            metadata.producer_epoch = 0
        else:
            metadata.producer_epoch += 1

    def _fence_and_abort(self, metadata: _TxnMetadata, now_ms: int) -> None:
        """Fence the producer of an Ongoing transaction and abort it with the bumped epoch
        (Kafka's PrepareEpochFence, then an abort the coordinator starts itself)."""
        if metadata.producer_epoch < PRODUCER_EPOCH_MAX + 1:
            metadata.producer_epoch += 1
        metadata.last_producer_epoch = -1
        self._complete(metadata, False, now_ms)

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]], *,
                       now_ms: int | None = None) -> None:
        """Kafka's AddPartitionsToTxn: record ``partitions`` in the producer's transaction
        (starting it: state Ongoing) before it writes there. Raises ProducerFencedError,
        UnknownTopicOrPartitionError."""
        now = checked_now_ms(now_ms)
        with self._topics.lock:
            self._topics.check_writable()
            metadata = self._current(transactional_id, producer_id, producer_epoch)
            tps = set()
            for tp in partitions:
                tp = TopicPartition(*tp)
                self._topics.partition_log(tp)  # UnknownTopicOrPartitionError
                tps.add(tp)
            if metadata.status == txn_schema.ONGOING and tps <= metadata.partitions:
                return
            if metadata.status != txn_schema.ONGOING:
                metadata.status = txn_schema.ONGOING
                metadata.partitions = set()
                metadata.start_ms = now
            metadata.partitions |= tps
            metadata.last_update_ms = now
            self._write(metadata)

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                        commit: bool, bump_epoch: bool = False,
                        now_ms: int | None = None) -> tuple[int, int]:
        """Kafka's EndTxn: write the markers of the producer's Ongoing transaction (COMMIT
        when ``commit``, else ABORT) and complete it. ``bump_epoch`` (aborts only: KIP-360,
        after a batch with an unknown outcome) gives the producer the next epoch, so its
        sequences start again at 0. Returns the producer's ``(producer_id, epoch)``.
        Raises ProducerFencedError, InvalidTxnStateError when no transaction is Ongoing."""
        now = checked_now_ms(now_ms)
        with self._topics.lock:
            self._topics.check_writable()
            metadata = self._current(transactional_id, producer_id, producer_epoch)
            if metadata.status != txn_schema.ONGOING:
                raise InvalidTxnStateError(
                    f"transactional id {transactional_id!r} has no ongoing transaction to "
                    f"{'commit' if commit else 'abort'} (state "
                    f"{txn_schema.STATE_NAMES[metadata.status]})")
            self._complete(metadata, commit, now)
            if bump_epoch and not commit:
                self._bump_epoch(metadata)
                metadata.status = txn_schema.EMPTY
                metadata.partitions = set()
                metadata.start_ms = -1
                self._write(metadata, durable=True)
            return metadata.producer_id, metadata.producer_epoch

    def _complete(self, metadata: _TxnMetadata, commit: bool, now_ms: int, *,
                  bump_epoch: bool = False, next_producer_id: int = -1) -> None:
        """PrepareCommit/PrepareAbort, markers to every partition, CompleteCommit/Abort.
        ``bump_epoch`` (an EndTxn of a ``transaction.version`` 2 client, Kafka's
        ``prepareAbortOrCommit``): the Prepare state takes the next epoch (the epoch before
        is remembered for a retry) and ``next_producer_id`` when that epoch is the last.
        The markers carry the id's producer id and (bumped) epoch; a transaction with a
        ``next_producer_id`` then moves to that id at epoch 0, as Kafka's completion does."""
        if bump_epoch:
            metadata.last_producer_epoch = metadata.producer_epoch
            metadata.producer_epoch += 1
            metadata.next_producer_id = next_producer_id
            metadata.client_transaction_version = _TRANSACTION_VERSION_EPOCH_BUMP
        if self._marker_sender is not None and metadata.partitions:
            # A cluster member: the markers go to each partition's leader asynchronously
            # (a transaction with no partition, a version 2 client's empty abort, has none
            # to send: it completes at once, as Kafka's ``noPartitionAdded``).
            if metadata.transactional_id in self._markers_in_flight:
                return  # already being delivered
            prepared = txn_schema.PREPARE_COMMIT if commit else txn_schema.PREPARE_ABORT
            if metadata.status != prepared:
                metadata.status = prepared
                metadata.last_update_ms = now_ms
                self._write(metadata)
            self._markers_in_flight.add(metadata.transactional_id)
            self._marker_sender.send(
                metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
                self.coordinator_epoch(metadata.transactional_id), commit,
                tuple(sorted(metadata.partitions)), metadata.client_transaction_version)
            return
        metadata.status = txn_schema.PREPARE_COMMIT if commit else txn_schema.PREPARE_ABORT
        metadata.last_update_ms = now_ms
        self._write(metadata)
        for tp in sorted(metadata.partitions):
            try:
                log = self._topics.partition_log(tp)
            except UnknownTopicOrPartitionError:
                continue  # deleted since: Kafka's coordinator skips unknown partitions
            offset = log.append_txn_marker(
                producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
                coordinator_epoch=self.coordinator_epoch(metadata.transactional_id),
                commit=commit, now_ms=now_ms)
            if tp.topic == OFFSETS_TOPIC:
                self._offsets.complete_transaction(
                    tp.partition, metadata.producer_id, commit=commit, marker_offset=offset)
        self._topics.notify_appended()
        self._finish(metadata, commit, now_ms)

    def _finish(self, metadata: _TxnMetadata, commit: bool, now_ms: int) -> None:
        """CompleteCommit / CompleteAbort after every marker was written."""
        metadata.last_update_ms = now_ms
        metadata.status = txn_schema.COMPLETE_COMMIT if commit else txn_schema.COMPLETE_ABORT
        if metadata.client_transaction_version >= _TRANSACTION_VERSION_EPOCH_BUMP \
                and metadata.next_producer_id != -1:
            # Kafka's TransactionMetadata.prepareComplete: a transaction.version 2 client
            # whose epoch ran out was already given its next producer id, at epoch 0.
            metadata.rotated_from_producer_id = metadata.producer_id  # a retry names it
            metadata.producer_id = metadata.next_producer_id
            metadata.producer_epoch = 0
            metadata.last_producer_epoch = -1
        metadata.next_producer_id = -1
        self._write(metadata)

    def abort_timed_out(self, *, now_ms: int | None = None) -> list[str]:
        """Abort every transaction Ongoing for longer than its timeout, fencing its producer
        (Kafka's ``abortTimedOutTransactions``, which a broker runs every
        ``transaction.abort.timed.out.transaction.cleanup.interval.ms``). Returns the
        transactional ids aborted."""
        now = checked_now_ms(now_ms)
        aborted = []
        with self._topics.lock:
            self._topics.check_writable()
            for transactional_id, metadata in sorted(self._txns.items()):
                if metadata.status == txn_schema.ONGOING \
                        and metadata.start_ms + metadata.timeout_ms <= now:
                    try:
                        self._fence_and_abort(metadata, now)
                    except SeglogError:
                        continue  # try again at the next round
                    aborted.append(transactional_id)
        return aborted

    # --- Kafka's TransactionCoordinator.handle* with its exact errors (the wire broker's) ----
    #
    # The methods above serve the embedded producer, which only needs "fenced or not". A
    # client over the wire acts on Kafka's distinct errors (INVALID_PRODUCER_ID_MAPPING
    # starts a new producer id, CONCURRENT_TRANSACTIONS is retried, a retried EndTxn of a
    # completed transaction succeeds), so the broker calls these, which follow Kafka's
    # TransactionCoordinator (transaction.version 0/1 clients) rule for rule.

    def _kafka_current(self, transactional_id: str, producer_id: int,
                       producer_epoch: int) -> _TxnMetadata:
        """The id's metadata if ``(producer_id, producer_epoch)`` is its current producer;
        else InvalidProducerIdMappingError (unknown id, other producer id) or
        ProducerFencedError (other epoch), as Kafka checks. Caller holds the lock."""
        metadata = self._loaded_txn(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} is not mapped to producer id "
                f"{producer_id}" + ("" if metadata is None else
                                    f" (its producer id is {metadata.producer_id})"))
        if metadata.producer_epoch != producer_epoch:
            raise ProducerFencedError(
                f"There is a newer producer with the same transactionalId "
                f"{transactional_id!r} (epoch {metadata.producer_epoch}) which fences the "
                f"current one (producer id {producer_id} epoch {producer_epoch})")
        return metadata

    def handle_init_producer_id(self, transactional_id: str, *, timeout_ms: int,
                                timeout_ms_max: int = TRANSACTION_TIMEOUT_MS_MAX,
                                expected_producer_id: int = -1,
                                expected_producer_epoch: int = -1,
                                now_ms: int | None = None) -> tuple[int, int]:
        """Kafka's ``handleInitProducerId`` for a transactional id; returns ``(producer_id,
        epoch)``.

        ``timeout_ms`` outside ``1..timeout_ms_max`` (``transaction.max.timeout.ms``):
        InvalidTransactionTimeoutError. Without an expected producer (both -1): a new id gets
        a fresh producer id at epoch 0, a known one the next epoch (fencing the producer that
        held it). With one (KIP-360, InitProducerId v3+): ProducerFencedError unless it is
        the id's current producer id (or the one it rotated from at an exhausted epoch); then
        the epoch is bumped if the expected epoch is the current one, the current epoch is
        returned again if it is the epoch just bumped from (a retry whose answer was lost),
        else ProducerFencedError. An exhausted epoch (>= 32766) moves to a new producer id at
        epoch 0. If the id has a transaction Ongoing, its producer is fenced (epoch + 1) and
        the transaction aborted (ABORT markers written), and ConcurrentTransactionsError is
        raised: the client retries, as with Kafka, and then gets the next epoch. The new state
        is flushed before the epoch is returned."""
        check_transactional_id(transactional_id)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) \
                or not 0 < timeout_ms <= timeout_ms_max:
            raise InvalidTransactionTimeoutError(
                f"transaction timeout must be in 1..{timeout_ms_max} ms "
                f"(transaction.max.timeout.ms), got {timeout_ms!r}")
        expected = None if (expected_producer_id, expected_producer_epoch) == (-1, -1) \
            else (expected_producer_id, expected_producer_epoch)
        now = checked_now_ms(now_ms)
        with self._topics.lock:
            self._topics.check_writable()
            metadata = self._loaded_txn(transactional_id)
            if metadata is None:  # Kafka: created with epoch -1, bumped to 0 below
                metadata = _TxnMetadata(transactional_id, txn_schema.TransactionLogValue(
                    self._producer_ids.allocate(), -1, timeout_ms, txn_schema.EMPTY, (), now))
            if expected is not None and not (
                    metadata.producer_epoch == -1 or expected[0] == metadata.producer_id
                    or (expected[0] == metadata.rotated_from_producer_id
                        and expected[1] >= PRODUCER_EPOCH_MAX)):
                raise ProducerFencedError(
                    f"producer id {expected[0]} epoch {expected[1]} is not the current "
                    f"producer of transactional id {transactional_id!r} (producer id "
                    f"{metadata.producer_id} epoch {metadata.producer_epoch})")
            if metadata.status in (txn_schema.PREPARE_COMMIT, txn_schema.PREPARE_ABORT):
                self._complete(metadata, metadata.status == txn_schema.PREPARE_COMMIT, now)
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} was completing a transaction")
            if metadata.status == txn_schema.ONGOING:
                self._fence_and_abort(metadata, now)
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} had a transaction ongoing: its "
                    f"producer was fenced and the transaction aborted; retry")
            if metadata.producer_epoch >= PRODUCER_EPOCH_MAX and (
                    expected is None or expected[1] == metadata.producer_epoch):
                # Kafka's prepareProducerIdRotation.
                metadata.rotated_from_producer_id = metadata.producer_id
                last_epoch = metadata.producer_epoch if expected is not None else -1
                metadata.producer_id = self._producer_ids.allocate()
                metadata.producer_epoch = 0
                metadata.last_producer_epoch = last_epoch
            elif expected is None:
                metadata.producer_epoch += 1
                metadata.last_producer_epoch = -1
            elif metadata.producer_epoch == -1 or expected[1] == metadata.producer_epoch:
                metadata.last_producer_epoch = metadata.producer_epoch
                metadata.producer_epoch += 1
            elif expected[1] != metadata.last_producer_epoch:
                raise ProducerFencedError(
                    f"expected producer epoch {expected[1]} of transactional id "
                    f"{transactional_id!r} is neither its current epoch "
                    f"{metadata.producer_epoch} nor the previous one "
                    f"{metadata.last_producer_epoch}")
            # (else: a retry of the bump whose answer was lost: the same epoch again)
            metadata.status = txn_schema.EMPTY
            metadata.partitions = set()
            metadata.previous_producer_id = metadata.next_producer_id = -1
            metadata.client_transaction_version = 0
            metadata.timeout_ms = timeout_ms
            metadata.start_ms = -1
            metadata.last_update_ms = now
            self._write(metadata, durable=True)
            self._txns[transactional_id] = metadata
            return metadata.producer_id, metadata.producer_epoch

    def handle_add_partitions(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, partitions: Iterable[tuple[str, int]], *,
                              transaction_version: int | None = None,
                              now_ms: int | None = None) -> None:
        """Kafka's ``handleAddPartitionsToTransaction`` (AddPartitionsToTxn, AddOffsetsToTxn):
        InvalidProducerIdMappingError, ProducerFencedError (see ``_kafka_current``),
        ConcurrentTransactionsError while a transaction completes; then as
        :meth:`add_partitions` (UnknownTopicOrPartitionError for a partition that does not
        exist: the broker checks them first)."""
        with self._topics.lock:
            metadata = self._kafka_current(transactional_id, producer_id, producer_epoch)
            if metadata.status in (txn_schema.PREPARE_COMMIT, txn_schema.PREPARE_ABORT):
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} is completing a transaction")
            if transaction_version is not None:
                # The partition leader adding a partition for a version 2 client (Kafka's
                # prepareAddPartitions with its clientTransactionVersion): kept in the
                # state written, so a coordinator that loads it knows its epoch rules.
                metadata.client_transaction_version = transaction_version
            self.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                now_ms=now_ms)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, bool]:
        """Kafka's ``handleVerifyPartitionsInTransaction`` (AddPartitionsToTxn v4+ with
        VerifyOnly): ``{partition: whether it is in the producer's transaction}``.
        InvalidProducerIdMappingError, ProducerFencedError, ConcurrentTransactionsError as
        :meth:`handle_add_partitions`."""
        with self._topics.lock:
            metadata = self._kafka_current(transactional_id, producer_id, producer_epoch)
            if metadata.status in (txn_schema.PREPARE_COMMIT, txn_schema.PREPARE_ABORT):
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} is completing a transaction")
            ongoing = metadata.status == txn_schema.ONGOING
            return {TopicPartition(*tp): ongoing and TopicPartition(*tp) in metadata.partitions
                    for tp in partitions}

    def handle_end_transaction(self, transactional_id: str, producer_id: int,
                               producer_epoch: int, *, commit: bool, transaction_version: int = 0,
                               now_ms: int | None = None) -> tuple[int, int]:
        """Kafka's ``handleEndTransaction``: ``transaction_version`` is the client's (2 for
        EndTxn v5, KIP-890 part 2; else 0). Returns ``(producer_id, epoch)`` the client
        continues with: for a ``transaction.version`` 2 client the epoch after the bump every
        commit or abort makes (a new producer id at epoch 0 once the epoch is exhausted).

        InvalidProducerIdMappingError for an unknown id or another producer id;
        ProducerFencedError for another epoch. An id whose last EndTxn came from a version 2
        client checks the epoch as Kafka does: an Ongoing transaction needs the current
        epoch, while a Complete state is only a retry of that EndTxn (the epoch
        before the bump; after an exhausted epoch, the previous producer id at its last
        epoch). An Ongoing transaction gets its markers and completes; a retry of the EndTxn
        that completed it (same outcome) succeeds again without writing (the current
        producer id and epoch answered); the same outcome still being written is
        ConcurrentTransactionsError, and so is any EndTxn of the producer, whatever its
        epoch and outcome, while a version 2 transaction's markers are written (Kafka 4.4).
        A version 2 client's abort that is not a retry, in
        state Empty (or, after an EndTxn of a version 2 client, CompleteCommit or
        CompleteAbort), aborts an empty transaction: its epoch is bumped, no marker is
        written (Kafka 4.4). Anything else is InvalidTxnStateError."""
        now = checked_now_ms(now_ms)
        bump = transaction_version >= _TRANSACTION_VERSION_EPOCH_BUMP
        with self._topics.lock:
            self._topics.check_writable()
            metadata = self._loaded_txn(transactional_id)
            if metadata is None:
                raise InvalidProducerIdMappingError(
                    f"transactional id {transactional_id!r} is not mapped to producer id "
                    f"{producer_id}")
            status = metadata.status
            bumped_before = metadata.client_transaction_version >= \
                _TRANSACTION_VERSION_EPOCH_BUMP
            retry_on_bump = bumped_before and metadata.last_producer_epoch >= 0 \
                and producer_epoch == metadata.last_producer_epoch
            retry_on_overflow = bumped_before and producer_id in (
                metadata.previous_producer_id, metadata.rotated_from_producer_id) \
                and producer_epoch == PRODUCER_EPOCH_MAX and metadata.producer_epoch == 0
            if not bumped_before or status in (txn_schema.ONGOING, txn_schema.EMPTY,
                                               txn_schema.DEAD):
                valid_epoch = producer_epoch == metadata.producer_epoch
            else:  # Complete states (Kafka 4.4: the current epoch too, then INVALID_TXN_STATE
                # below); Prepare states answer CONCURRENT_TRANSACTIONS before the epoch counts
                valid_epoch = retry_on_bump or retry_on_overflow \
                    or producer_epoch == metadata.producer_epoch
            if metadata.producer_id != producer_id and not retry_on_overflow:
                raise InvalidProducerIdMappingError(
                    f"transactional id {transactional_id!r} is not mapped to producer id "
                    f"{producer_id} (its producer id is {metadata.producer_id})")
            if bumped_before and status in (txn_schema.PREPARE_COMMIT, txn_schema.PREPARE_ABORT):
                # Kafka 4.4 answers any EndTxn of the producer while a version 2 transaction's
                # markers are being written with CONCURRENT_TRANSACTIONS, whatever its epoch
                # (measured on the wire: the bumped epoch, the one before, the one after,
                # commit or abort), so that the client retries once the state is complete.
                # The bumped epoch is what a client sends when it aborts the next transaction
                # at once (franz-go, after a TxnOffsetCommit answered CONCURRENT_TRANSACTIONS):
                # PRODUCER_FENCED there would be fatal to it.
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} is completing its transaction "
                    f"(state {txn_schema.STATE_NAMES[status]})")
            if not valid_epoch:
                raise ProducerFencedError(
                    f"There is a newer producer with the same transactionalId "
                    f"{transactional_id!r} (epoch {metadata.producer_epoch}) which fences the "
                    f"current one (producer id {producer_id} epoch {producer_epoch})")
            if status == txn_schema.ONGOING:
                next_producer_id = self._producer_ids.allocate() \
                    if bump and metadata.producer_epoch >= PRODUCER_EPOCH_MAX else -1
                self._complete(metadata, commit, now, bump_epoch=bump,
                               next_producer_id=next_producer_id)
                if metadata.next_producer_id != -1:  # still delivering (a cluster member)
                    return metadata.next_producer_id, 0
            elif status == (txn_schema.COMPLETE_COMMIT if commit else txn_schema.COMPLETE_ABORT) \
                    and (not bumped_before or retry_on_bump or retry_on_overflow):
                pass  # a retry: Kafka answers NONE with the current producer id and epoch
            elif status == (txn_schema.PREPARE_COMMIT if commit else txn_schema.PREPARE_ABORT):
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} is completing its transaction")
            elif bump and not commit and not (retry_on_bump or retry_on_overflow) and (
                    status == txn_schema.EMPTY or (
                        bumped_before and status in (txn_schema.COMPLETE_COMMIT,
                                                     txn_schema.COMPLETE_ABORT))):
                # Kafka 4.4 (KIP-890 part 2): a version 2 client may abort a transaction with
                # nothing in it at its current epoch (a retry from the epoch before the bump
                # only repeats that EndTxn's outcome: above, or the error below), which bumps
                # its epoch like any other. Such a client aborts whenever a transaction's
                # produces were attempted and none succeeded, since a Produce v12 may have
                # added its partition before its append failed (franz-go does).
                metadata.partitions = set()
                next_producer_id = self._producer_ids.allocate() \
                    if metadata.producer_epoch >= PRODUCER_EPOCH_MAX else -1
                self._complete(metadata, False, now, bump_epoch=True,
                               next_producer_id=next_producer_id)
            else:
                raise InvalidTxnStateError(
                    f"transactional id {transactional_id!r} has no ongoing transaction to "
                    f"{'commit' if commit else 'abort'} (state "
                    f"{txn_schema.STATE_NAMES[status]})")
            return metadata.producer_id, metadata.producer_epoch

    def verify_transactional_append(self, transactional_id: str, producer_id: int,
                                    producer_epoch: int, tp: TopicPartition) -> None:
        """Kafka's transaction verification of an append (``transaction.partition.
        verification.enable``, what ``AddPartitionsToTxnManager`` answers a
        transaction.version 0/1 client) before a transactional batch of the producer is
        written to ``tp``: InvalidProducerIdMappingError for an unknown id or another producer
        id, InvalidProducerEpochError for another epoch, InvalidTxnStateError ("Partition was
        not added to the transaction") unless ``tp`` is in the producer's Ongoing transaction.
        Without it a batch written to a partition the coordinator does not know gets no
        marker and holds that partition's last stable offset for ever (a hanging
        transaction). Kafka verifies the first batch of a transaction in each partition
        (when the partition has no transaction of the producer open); a Produce handler calls
        this then, with the request's transactional id."""
        with self._topics.lock:
            try:
                metadata = self._kafka_current(transactional_id, producer_id, producer_epoch)
            except ProducerFencedError as error:
                raise InvalidProducerEpochError(str(error)) from None
            if metadata.status != txn_schema.ONGOING or tp not in metadata.partitions:
                raise InvalidTxnStateError(
                    f"Partition was not added to the transaction ({tp.topic}-{tp.partition}, "
                    f"transactional id {transactional_id!r})")

    def check_transactional_offsets(self, transactional_id: str, producer_id: int,
                                    producer_epoch: int, tp: TopicPartition) -> None:
        """What Kafka's broker checks before it appends a TxnOffsetCommit's records to the
        group's ``__consumer_offsets`` partition ``tp``: :meth:`verify_transactional_append`
        (so AddOffsetsToTxn must come first: InvalidTxnStateError)."""
        self.verify_transactional_append(transactional_id, producer_id, producer_epoch,
                                         TopicPartition(*tp))

    def list_transactions(self, *, states: Iterable[str] = (),
                          producer_ids: Iterable[int] = (), duration_ms: int = -1,
                          now_ms: int | None = None) -> list[TransactionDescription]:
        """Kafka's ``listTransactionStates``: every known id (sorted) whose state name is in
        ``states`` and whose producer id is in ``producer_ids`` (an empty filter takes all),
        and, with ``duration_ms >= 0``, whose transaction started more than ``duration_ms``
        before ``now_ms``. Unknown state names simply match nothing (the broker reports them)."""
        states = set(states)
        producer_ids = set(producer_ids)
        now = checked_now_ms(now_ms)
        found = []
        with self._topics.lock:
            for transactional_id in sorted(self._txns):
                metadata = self._txns[transactional_id]
                if metadata.status == txn_schema.DEAD:
                    continue
                if producer_ids and metadata.producer_id not in producer_ids:
                    continue
                if states and txn_schema.STATE_NAMES[metadata.status] not in states:
                    continue
                if duration_ms >= 0 and now - metadata.start_ms <= duration_ms:
                    continue
                found.append(metadata.describe())
        return found

    def append_transactional_offsets(self, transactional_id: str, producer_id: int,
                                     producer_epoch: int, group_id: str,
                                     offsets: dict[TopicPartition, OffsetAndMetadata], *,
                                     verify: bool = True) -> TopicPartition:
        """Kafka's TxnOffsetCommit write, as the broker does it for a producer: under one lock
        (so no EndTxn can complete the transaction in between), :meth:`check_transactional_offsets`,
        then the commit records appended to the group's ``__consumer_offsets`` partition as a
        transactional batch of the producer, then held pending until the transaction's
        marker. The batch's sequence continues the producer's last one in that partition at
        this epoch (0 at a new epoch): Kafka's coordinator appends without sequence checks,
        seglog's Log checks every producer batch, so a second commit in one transaction must
        not look like a retry of the first. Returns the partition. Raises what
        :meth:`check_transactional_offsets` and ``Log.append_batch`` raise. ``verify=False``:
        no check with this coordinator (a cluster member's group coordinator, whose
        transaction coordinator is usually another broker: Kafka 2.8 does not check)."""
        with self._topics.lock:
            self._topics.check_writable()
            partition, keys, values, timestamps = self._offsets.transactional_records(
                group_id, offsets)
            tp = TopicPartition(OFFSETS_TOPIC, partition)
            if verify:
                self.check_transactional_offsets(transactional_id, producer_id,
                                                 producer_epoch, tp)
            log = self._topics.partition_log(tp)
            entry = log.producer_state.last_entry(producer_id)
            if entry is not None and entry.producer_epoch == producer_epoch \
                    and entry.last_seq >= 0:
                sequence = increment_sequence(entry.last_seq, 1)
            else:
                sequence = 0
            first, _last = log.append_batch(values, keys=keys, timestamps_ms=timestamps,
                                            producer_id=producer_id,
                                            producer_epoch=producer_epoch,
                                            base_sequence=sequence, is_transactional=True)
            self._offsets.add_pending(partition, producer_id, group_id, offsets, first,
                                      timestamps[0])
        self._topics.notify_appended()
        return tp

    def expire_transactional_ids(self, *, expiration_ms: int,
                                 now_ms: int | None = None) -> list[str]:
        """Kafka's ``removeExpiredTransactionalIds`` (``transactional.id.expiration.ms``):
        every id with no transaction in flight (Empty, CompleteCommit, CompleteAbort) whose
        state last changed ``expiration_ms`` or more before ``now_ms`` is forgotten: a
        tombstone for its key goes to ``__transaction_state`` (the cleaner then drops its
        records), then it leaves memory. A producer that initialises it later gets a new
        producer id at epoch 0; its old producer gets INVALID_PRODUCER_ID_MAPPING. Returns
        the ids expired, sorted."""
        now = checked_now_ms(now_ms)
        expired = []
        with self._topics.lock:
            self._topics.check_writable()
            for transactional_id, metadata in sorted(self._txns.items()):
                if metadata.status in (txn_schema.EMPTY, txn_schema.COMPLETE_COMMIT,
                                       txn_schema.COMPLETE_ABORT) \
                        and metadata.last_update_ms <= now - expiration_ms:
                    topic = self._topics.internal_topic(txn_schema.TRANSACTION_STATE_TOPIC)
                    log = topic.log(txn_schema.partition_for_transactional_id(
                        transactional_id, topic.partitions))
                    log.append_batch([None], keys=[txn_schema.encode_key(transactional_id)],
                                     timestamps_ms=[now])
                    del self._txns[transactional_id]
                    expired.append(transactional_id)
        return expired
