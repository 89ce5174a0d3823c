"""A producer: records accumulate per partition and go to the Log as whole batches.

Kafka's producer (``RecordAccumulator`` + ``Sender``) in one process. :meth:`Producer.send`
picks the partition (an explicit one; else murmur2 of the key, as Kafka's default
partitioner; else, for a keyless record, the topic's sticky partition, or round robin when
asked), appends the record to that partition's open batch and returns a
:class:`SendFuture`. A batch is written with one ``Log.append_batch`` call (one encode, one
write) when

* adding the next record would take it past ``batch_size_bytes`` (the record starts a new
  batch; a record larger than that is a batch by itself), or it reached that size;
* it is ``linger_ms`` old (a background linger thread sleeps on a lock of its own until the
  earliest deadline of a batch still open, and takes the producer's lock only to write such a
  batch, so sends never wake it nor wait for it; with ``linger_ms=0`` every send writes at
  once);
* :meth:`Producer.flush` or :meth:`Producer.close` is called.

Sizes are estimated as Kafka's producer does before compression (61 bytes per batch, at most
21 bytes of overhead per record plus key, value and headers), so a compressed batch on disk
is smaller than ``batch_size_bytes``.

Records of one partition reach the log in ``send`` order: batches are written under the
producer's lock. A batch the topic refuses as larger than ``max.message.bytes`` is split in
halves and written in parts (Kafka's producer splits on MESSAGE_TOO_LARGE), so only a record
too large by itself fails. Other errors from the log fail the futures of the whole batch;
:meth:`Producer.flush` raises the first error since the previous flush.
:meth:`Producer.send_batch` is the batch-first path: many records, one RecordBatch per
partition, no per-record future.

**Retries.** A batch refused with a *retriable* error (``SeglogError.retriable``: the
acknowledgement timed out, not enough replicas after the append) is sent again, up to
``retries`` times, ``retry_backoff_ms`` apart, with the same base sequence. Whether the first
attempt was written is unknown to the producer: without idempotence a retry may write the
records twice (at-least-once); with it the log recognises the retry as a duplicate and returns
the original offsets (the article's idempotent producer). Retries block the producer's lock,
so batches of a partition are never reordered (Kafka's ``max.in.flight`` of 1). An idempotent
batch whose retries run out has an unknown outcome: the producer takes a new producer id
(non-transactional; Kafka's ``resetIdempotentProducerId``) or bumps its epoch at the next
abort (transactional; KIP-360), so its next sequences cannot collide with it.

:attr:`Producer.log_append` is the boundary between producer and log: the callable that
hands one batch to a Log, ``log_append(log, values, **fields) -> (first, last)``, where a
network client would sit between a Kafka producer and its broker. Tests replace it to lose
acknowledgements (the batch is written, then a retriable error says it was not) without
touching the Log.

**The broker side.** The producer reaches the broker only through
:class:`~seglog.broker_api.BrokerApi` (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, topic metadata and the partitions' Logs to append to in-process),
which the Store implements and the wire broker will; it imports no coordinator and not the
store.

**Transactions** (``transactional_id=...``, Kafka's ``transactional.id``): the producer is
idempotent and gets its producer id and epoch from the store's transaction coordinator
(:mod:`seglog.coordinator.transaction`, through ``BrokerApi.init_producer_id``) when it is
made: that is Kafka's ``initTransactions``, done
implicitly so a producer from :meth:`Store.producer <seglog.store.Store.producer>` is ready;
:meth:`Producer.init_transactions` is accepted afterwards and does nothing. Making it fences
any older producer with the same id and aborts that one's open transaction. Then
:meth:`~Producer.begin_transaction`, :meth:`~Producer.send` (the first record for a partition
adds the partition to the transaction at the coordinator before anything is written there),
:meth:`~Producer.send_offsets_to_transaction` (the consumer group's offsets, appended to
``__consumer_offsets`` as transactional records and applied when the transaction commits),
:meth:`~Producer.commit_transaction` (flush, then COMMIT markers to every partition touched)
or :meth:`~Producer.abort_transaction` (records still waiting are dropped, ABORT markers).
A fenced producer raises :class:`ProducerFencedError` from every call and must be closed.
:meth:`Producer.close` aborts a transaction still open, as Kafka's close does.

**The record path.** Open batches live in the backend's accumulator
(``<backend>.accumulator``, C in the native backend): a ``RecordBuffer`` per partition keeps
keys, values and timestamps as columns with Kafka's size estimate, and a batch goes to
``Log.append_batch`` in the ``(data, lengths)`` form, encoded once. The common case of
:meth:`send` (bytes or None key and value; no explicit partition, timestamp or headers; not
transactional; the sticky partitioner) is one call into the accumulator's ``Sender``: murmur2 or
the sticky partition, the producer's lock, the append, the future. Everything else runs the
full method below, which the Sender calls. The lock is the Sender's ``ReentrantLock`` (in C in
the native backend, taken there without a Python call; everything else here takes it with
``with``, as an RLock), and the future is the accumulator's ``SendFuture`` (a C object in the
native backend, made without ``__init__``; the records of one batch share one result object,
so completing a batch touches no future). :class:`SendFuture` here is the name both
backends' futures answer to with ``isinstance``. Topic metadata is cached per topic and looked up again
whenever a batch is opened, so a deleted or grown topic is seen at the next batch (Kafka's
producer sees it at its next metadata refresh).

Thread safety: a Producer may be shared by threads (as Kafka's is).
"""

from __future__ import annotations

import abc
import collections
import random
import threading
import time
import types
from typing import Any, Iterable, Mapping, Sequence, cast

from ..arguments import (
    as_offset_and_metadata,
    check_commit_offset,
    check_group_id,
    check_int_argument,
    check_optional_int_argument,
    check_transactional_id,
)
from .._backend import get_backend
from ..broker_api import BrokerApi
from ..errors import (
    IllegalStateError,
    InvalidArgumentError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTxnStateError,
    LogClosedError,
    ProducerFencedError,
    RecordTooLargeError,
    SeglogError,
    TransactionAbortedError,
    UnknownCompressionTypeError,
)
from ..format import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD
from ..storage.config import INT32_MAX
from ..storage.counters import PRODUCER_BYTES_SENT, PRODUCER_RECORDS_SENT, ClientCounters
from ..types import RecordMetadata, TopicPartition, as_topic_partition
from ..types import OffsetAndMetadata  # in the offsets of send_offsets_to_transaction
from .partitioner import (
    RoundRobinPartitioner,
    partitions_for_keys,
)

__all__ = ["Producer", "RecordMetadata", "SendFuture"]

#: Kafka's producer defaults (``linger.ms`` is 5 since Kafka 4.0, ``batch.size`` 16 KiB,
#: ``max.request.size`` 1 MiB).
LINGER_MS_DEFAULT = 5
BATCH_SIZE_BYTES_DEFAULT = 16384
MAX_REQUEST_BYTES_DEFAULT = 1024 * 1024
#: Most records in one batch (a limit on everything; Kafka has none but batch.size).
BATCH_RECORDS_MAX = 1 << 20
_COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
#: ``acks`` values accepted, and the number Kafka's producer turns each into (see
#: :class:`Producer`): on one broker 1 and all mean the same; 0 is refused.
_ACKS = {None: -1, "all": -1, -1: -1, "-1": -1, 1: 1, "1": 1}
#: Sequence numbers wrap past Integer.MAX_VALUE to 0 (Kafka's incrementSequence).
_SEQUENCE_MODULUS = 1 << 31
#: Sends of one batch after a retriable error (Kafka retries without a count limit until
#: ``delivery.timeout.ms``; a limit on everything) and the pause between them (Kafka's
#: ``retry.backoff.ms``).
RETRIES_DEFAULT = 10
RETRY_BACKOFF_MS_DEFAULT = 100
RETRIES_MAX = 1000
#: The linger thread's pause between tries of the producer's lock while sends hold it, and
#: the tries before it blocks on the lock (see Producer._write_expired).
_LINGER_RETRY_S = 0.0002
_LINGER_TRIES_MAX = 50
_NEVER = float("inf")
#: Transaction states of a transactional producer (Kafka's TransactionManager.State, the
#: ones an embedded producer can be in).
_READY = "READY"
_IN_TRANSACTION = "IN_TRANSACTION"
_ABORTABLE_ERROR = "ABORTABLE_ERROR"
_FENCED = "FENCED"


def append_to_log(log, values, **fields) -> tuple[int, int]:
    """The default :attr:`Producer.log_append`: ``log.append_batch(values, **fields)``."""
    return log.append_batch(values, **fields)



class SendFuture(abc.ABC):
    """The pending result of one :meth:`Producer.send`: the name users see (``isinstance``,
    annotations) for the backend accumulator's ``SendFuture`` (a C type in the native
    backend, made per record without a Python ``__init__``), which each Producer registers
    here as a virtual subclass.

    ``topic``, ``partition`` and ``timestamp_ms`` are known at once; ``result(timeout_ms=None)``
    waits until the record's batch is written and returns its :class:`RecordMetadata`, or
    raises the error that failed the batch (``TimeoutError`` when ``timeout_ms`` passes first;
    TypeError / ValueError for a non-integer or negative ``timeout_ms``); ``done()`` tells
    whether the batch was written (or failed); ``offset`` is ``result().offset``. The futures
    of one batch share one result object (its parts' first offsets and errors, one Event), so
    completing a batch touches no future. Thread-safe.
    """

    __slots__ = ()


class _Batch:
    """The open batch of one partition: its records in the backend's RecordBuffer (keys,
    values and timestamps as columns in C, with Kafka's size estimate), the headers (None
    until a record has some), its deadline and its result (the backend's BatchResult, which
    its records' futures share)."""

    __slots__ = ("tp", "buffer", "headers", "deadline", "result")

    def __init__(self, tp: TopicPartition, deadline: float, buffer: Any, result: Any):
        self.tp = tp
        self.buffer = buffer
        self.headers: list | None = None
        self.deadline = deadline
        self.result = result

    def add_headers(self, index: int, header_list: tuple) -> None:
        """Keep record ``index``'s headers (records before it without any get ``()``)."""
        if self.headers is None:
            if not header_list:
                return
            self.headers = [()] * index
        self.headers.append(header_list)

    def columns(self, start: int, end: int) -> tuple[Any, Any, Any, list | None]:
        """Records ``start .. end-1`` as ``(values, keys, timestamps_ms, headers)`` for
        ``Log.append_batch``."""
        values, keys, timestamps_ms = self.buffer.columns(start, end)
        return values, keys, timestamps_ms, \
            None if self.headers is None else self.headers[start:end]


#: Kafka's estimate of one record's overhead: 21 bytes + key, value and header-count varints.
_RECORD_OVERHEAD_BYTES = MAX_RECORD_OVERHEAD + 5 + 5 + 5


def _headers_size_bytes(headers) -> int:
    """Kafka's estimate of the headers' share of a record's size."""
    size = 0
    for header_key, header_value in headers:
        size += 10 + len(header_key.encode("utf-8")) + (len(header_value) if header_value else 0)
    return size


class Producer:
    """Writes records to a :class:`~seglog.store.Store` (any
    :class:`~seglog.broker_api.BrokerApi`) in batches (see the module docstring).

    ``Producer(store, linger_ms=5, batch_size_bytes=16384, compression="none",
    partitioner="sticky", max_request_bytes=1048576, idempotent=False)``; usually made by
    :meth:`Store.producer <seglog.store.Store.producer>`.

    * ``linger_ms``: how long a batch may wait for more records (0: write at every send).
    * ``batch_size_bytes``: estimated size at which a batch is written.
    * ``compression``: ``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd``, per batch.
    * ``partitioner``: ``"sticky"`` (Kafka's default: keyed records by murmur2, keyless ones
      stick to a partition for about a batch, then move) or ``"round_robin"`` (Kafka's
      RoundRobinPartitioner: every record, keyed or not, to the next partition).
    * ``max_request_bytes``: the largest record accepted by :meth:`send` (Kafka's
      ``max.request.size``); the topic's ``max.message.bytes`` is enforced by the log.
    * ``idempotent``: Kafka's ``enable.idempotence``: the producer gets a producer id
      unique in the data directory (epoch 0) and numbers its batches per partition (base
      sequences, wrapping at 2**31 as Kafka's), so every batch carries them and the log
      checks them (a retried batch is written once). Default: True with a
      ``transactional_id``, else False; False with a ``transactional_id`` is a ValueError.
    * ``retries``, ``retry_backoff_ms``: sends of a batch after a retriable error, and the
      pause between them (see the module docstring).
    * ``transactional_id``: Kafka's ``transactional.id``: makes a transactional producer
      (see the module docstring); ``transaction_timeout_ms`` (1..900000, default 60000) is
      how long a transaction may stay open before the coordinator aborts it
      (``Store.maintain``).
    * ``acks``: Kafka's ``acks``, what a write waits for before its future completes. One
      store is one broker with no replicas, and the producer appends to its Log in-process,
      so a batch is acknowledged once it is in the Log (the page cache; ``Store.flush``
      makes it durable):

      - ``"all"`` / ``-1`` (Kafka's default, and the default here, also for None): the
        leader and every in-sync replica have it. With no replicas that is the leader.
      - ``1``: the leader has it. On one broker the same as ``"all"``.
      - ``0`` (Kafka: fire-and-forget, offsets unknown, errors unreported) is refused: the
        embedded append always knows its offset and its errors, and hiding them would
        only lose information. Use 1 or ``"all"``.

      ``acks`` is kept as Kafka's number in :attr:`acks` (-1 or 1). An idempotent or
      transactional producer needs ``"all"``, as Kafka's (ConfigException there). Anything
      else is :class:`~seglog.errors.InvalidRequiredAcksError` (a ValueError,
      INVALID_REQUIRED_ACKS). Replication will give 1 and ``"all"`` their separate meanings.

    Bad arguments raise :mod:`seglog.errors` classes that are also the built-in ones:
    :class:`~seglog.errors.InvalidArgumentTypeError` (a TypeError, INVALID_REQUEST) for a
    non-integer number, :class:`~seglog.errors.InvalidArgumentError` (a ValueError,
    INVALID_REQUEST) for a value out of range or not allowed,
    :class:`~seglog.errors.UnknownCompressionTypeError` (a ValueError,
    UNSUPPORTED_COMPRESSION_TYPE), :class:`~seglog.errors.InvalidRequiredAcksError`,
    :class:`~seglog.errors.InvalidTransactionTimeoutError` (a ValueError,
    INVALID_TRANSACTION_TIMEOUT).

    ``producer_id`` and ``producer_epoch`` are -1 for a plain producer.
    """

    def __init__(self, store: BrokerApi, *, linger_ms: int = LINGER_MS_DEFAULT,
                 batch_size_bytes: int = BATCH_SIZE_BYTES_DEFAULT, compression: str = "none",
                 partitioner: str = "sticky", max_request_bytes: int = MAX_REQUEST_BYTES_DEFAULT,
                 idempotent: bool | None = None, acks: Any = None,
                 retries: int = RETRIES_DEFAULT,
                 retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
                 transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60_000):
        # Numbers: TypeError for a non-integer, ValueError out of range (config.check_int).
        linger_ms = check_int_argument("linger_ms", linger_ms, minimum=0)
        batch_size_bytes = check_int_argument("batch_size_bytes", batch_size_bytes, minimum=0)
        max_request_bytes = check_int_argument("max_request_bytes", max_request_bytes,
                                               minimum=1, maximum=INT32_MAX)
        transaction_timeout_ms = check_int_argument("transaction_timeout_ms",
                                                    transaction_timeout_ms, maximum=INT32_MAX)
        if compression not in _COMPRESSIONS:
            raise UnknownCompressionTypeError(f"compression must be one of {_COMPRESSIONS}, "
                                              f"got {compression!r}")
        if partitioner not in ("sticky", "round_robin"):
            raise InvalidArgumentError(f"partitioner must be 'sticky' or 'round_robin', got "
                                       f"{partitioner!r}")
        retries = check_int_argument("retries", retries, minimum=0, maximum=RETRIES_MAX)
        retry_backoff_ms = check_int_argument("retry_backoff_ms", retry_backoff_ms, minimum=0)
        acks_number = _check_acks(acks)
        if transactional_id is not None:
            check_transactional_id(transactional_id)
            if idempotent is False:
                raise InvalidArgumentError(
                    "a transactional producer is idempotent: idempotent=False cannot go with "
                    "a transactional_id (Kafka: ConfigException)")
            idempotent = True
        if idempotent and acks_number != -1:
            raise InvalidRequiredAcksError(
                f"an idempotent or transactional producer needs acks='all', got {acks!r} "
                "(Kafka: ConfigException, 'Must set acks to all')")
        self._broker = store
        # A batch is written in the (data, lengths) form, numpy arrays: import numpy here, so
        # the first batch written does not wait for it (some 40 ms) in the middle of sends.
        import numpy  # noqa: F401
        # The backend's accumulator (murmur2, the open-batch buffers): the store's backend.
        self._accumulator = get_backend(getattr(store, "backend", None)).accumulator
        SendFuture.register(self._accumulator.SendFuture)  # isinstance(future, SendFuture)
        self.linger_ms = linger_ms
        self.batch_size_bytes = batch_size_bytes
        self.compression = compression
        self.partitioner = partitioner
        self.max_request_bytes = max_request_bytes
        #: Kafka's number for ``acks``: -1 ("all") or 1 (see the class docstring).
        self.acks = acks_number
        self.idempotent = bool(idempotent)
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        #: The boundary between producer and log (see the module docstring).
        self.log_append = append_to_log
        # The common case of send in one call into the backend's accumulator (see send). Its
        # Sender owns the producer's lock (a re-entrant lock in C in the native backend):
        # taken there without a Python call, and here with `with` as any RLock.
        self._fast = self._accumulator.Sender(
            fallback=types.MethodType(Producer.send, self), open_batch=self._batch_for,
            write=self._write, batch_size_bytes=batch_size_bytes,
            max_request_bytes=max_request_bytes, linger_zero=linger_ms == 0)
        self._lock = self._fast.lock
        self._batches: dict[TopicPartition, _Batch] = {}
        # The linger thread's own state, under its own small lock (see _run_linger): the open
        # batches' deadlines in the order they were opened, and its wake-up. It never waits
        # on the producer's lock, so the sends never wake it or contend with it.
        self._linger_lock = threading.Lock()
        self._linger_wakeup = threading.Condition(self._linger_lock)
        self._linger_deadlines: collections.deque[tuple[float, _Batch]] = collections.deque()
        self._linger_wake_at = _NEVER  # when the linger thread wakes next (monotonic s)
        self._keyless: dict[str, Any] = {}  # topic -> Sticky/RoundRobin partitioner
        # Sticky partitions of keyless records are drawn from this (Kafka: a random int).
        self._sticky_rng = random.Random()
        self._errors: list[BaseException] = []
        self._closed = False
        # Records and batch bytes written (metrics(); docs/metrics.md), under the lock.
        self._counters = ClientCounters(PRODUCER_RECORDS_SENT, PRODUCER_BYTES_SENT)
        self._sender: threading.Thread | None = None
        self._sequences: dict[TopicPartition, int] = {}  # next base sequence per partition
        self._txn_state = _READY
        self._txn_partitions: set[TopicPartition] = set()  # added to the coordinator
        self._txn_error: BaseException | None = None  # why the transaction must abort
        self._epoch_bump_required = False  # a batch of this epoch has an unknown outcome
        self._fast.enabled = transactional_id is None and partitioner == "sticky"
        # The one-call send in the instance's place of the method (the method stays for the
        # records the Sender hands back).
        self.send = self._fast.send  # type: ignore[method-assign]
        if transactional_id is not None:
            # Kafka's initTransactions, implicit: fences older producers of the id.
            self.producer_id, self.producer_epoch = store.init_producer_id(
                transactional_id, transaction_timeout_ms=transaction_timeout_ms)
        elif self.idempotent:
            self.producer_id, self.producer_epoch = store.init_producer_id()
        else:
            self.producer_id = self.producer_epoch = -1

    # --- transactions ------------------------------------------------------------------------

    @property
    def _txn_id(self) -> str:
        """The transactional id, for the transaction calls (which run only when
        :attr:`transactional`)."""
        transactional_id = self.transactional_id
        assert transactional_id is not None
        return transactional_id

    @property
    def transactional(self) -> bool:
        """Whether this producer has a ``transactional_id``."""
        return self.transactional_id is not None

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (begun, not yet committed or aborted)."""
        return self._txn_state in (_IN_TRANSACTION, _ABORTABLE_ERROR)

    def _require_transactional(self, call: str) -> None:
        if not self.transactional:
            raise IllegalStateError(f"Transactional method {call} invoked on a "
                                    "non-transactional producer (no transactional_id)")
        if self._txn_state == _FENCED:
            raise ProducerFencedError(f"producer of transactional id {self.transactional_id!r} "
                                      "was fenced by a newer one; close it")
        if self._closed:
            raise IllegalStateError(f"Cannot call {call} after the producer is closed.")

    def _fenced(self, error: BaseException) -> ProducerFencedError:
        """Enter the fatal fenced state; returns the error to raise."""
        self._txn_state = _FENCED
        if isinstance(error, ProducerFencedError):
            return error
        fenced = ProducerFencedError(
            f"producer {self.producer_id} epoch {self.producer_epoch} of transactional id "
            f"{self.transactional_id!r} was fenced: {error}")
        fenced.__cause__ = error
        return fenced

    def _check_coordinator(self) -> None:
        """ProducerFencedError (and the fenced state) if a newer producer took the id."""
        try:
            self._broker.check_producer_epoch(
                self._txn_id, self.producer_id, self.producer_epoch)
        except ProducerFencedError as error:
            raise self._fenced(error) from None

    def init_transactions(self) -> None:
        """Kafka's ``initTransactions``. The store's producer did it when it was made
        (fencing older producers of the id), so this only checks the state: IllegalStateError
        for a producer without ``transactional_id``, ProducerFencedError once fenced."""
        with self._lock:
            self._require_transactional("init_transactions")

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until :meth:`commit_transaction` or
        :meth:`abort_transaction` become visible to read_committed consumers together, or
        never. Raises InvalidTxnStateError when one is already open, ProducerFencedError,
        IllegalStateError for a producer without ``transactional_id``."""
        with self._lock:
            self._require_transactional("begin_transaction")
            if self._txn_state != _READY:
                raise InvalidTxnStateError(
                    "Invalid transition attempted from state IN_TRANSACTION to state "
                    "IN_TRANSACTION: a transaction is already open")
            self._check_coordinator()
            self._txn_state = _IN_TRANSACTION
            self._txn_partitions = set()
            self._txn_error = None

    def _check_can_send(self) -> None:
        """For a transactional producer: a send needs an open, healthy transaction."""
        if self._txn_state == _IN_TRANSACTION:
            self._check_coordinator()
            return
        self._require_transactional("send")
        if self._txn_state == _ABORTABLE_ERROR:
            raise InvalidTxnStateError(
                "Cannot perform send because a previous request of the transaction failed: "
                "abort the transaction") from self._txn_error
        raise InvalidTxnStateError("Cannot perform a 'send' before completing a call to "
                                   "begin_transaction")

    def _add_to_transaction(self, tps) -> None:
        """Kafka's AddPartitionsToTxn for the partitions not yet in the transaction."""
        new = [tp for tp in tps if tp not in self._txn_partitions]
        if not new:
            return
        try:
            self._broker.add_partitions_to_txn(
                self._txn_id, self.producer_id, self.producer_epoch, new)
        except ProducerFencedError as error:
            raise self._fenced(error) from None
        self._txn_partitions.update(new)

    def send_offsets_to_transaction(
            self, offsets: Mapping[tuple[str, int], int | tuple[int, str] | OffsetAndMetadata],
            group_id: str) -> None:
        """Commit ``offsets`` (``{(topic, partition): offset}``, the *next* offsets to read;
        a value may also be ``(offset, metadata)`` or an OffsetAndMetadata) for consumer group
        ``group_id`` as part of the open transaction (Kafka's AddOffsetsToTxn +
        TxnOffsetCommit): the group's ``__consumer_offsets`` partition joins the transaction
        and the commit is appended there as a transactional batch of this producer. It
        becomes the group's committed offsets when the transaction commits, and is dropped
        if it aborts. Raises InvalidTxnStateError without an open transaction,
        ProducerFencedError, InvalidGroupIdError (a ValueError) for an empty group id,
        InvalidArgumentError / OffsetMetadataTooLargeError (ValueErrors) for a negative
        offset or long metadata, UnknownTopicOrPartitionError."""
        check_group_id(group_id)
        parsed = {}
        for tp, value in offsets.items():
            tp = as_topic_partition(tp)
            om = as_offset_and_metadata(value)
            check_commit_offset(tp, om)
            self._broker.topic(tp.topic).log(tp.partition)  # UnknownTopicOrPartitionError
            parsed[tp] = om
        with self._lock:
            self._check_can_send()
            if not parsed:
                return
            # Kafka's AddOffsetsToTxn, then TxnOffsetCommit (appended here, by the producer,
            # with its producer id and sequence: see BrokerApi).
            records = self._broker.txn_offset_commit_records(group_id, parsed)
            tp = records.tp
            if tp not in self._txn_partitions:
                try:
                    self._broker.add_offsets_to_txn(self._txn_id, self.producer_id,
                                                    self.producer_epoch, group_id)
                except ProducerFencedError as error:
                    raise self._fenced(error) from None
                self._txn_partitions.add(tp)
            log = self._broker.log(tp)
            try:
                first, _last = self._append(log, tp, records.values, keys=records.keys,
                                            timestamps_ms=records.timestamps_ms, headers=None)
            except SeglogError as error:
                self._note_txn_failure(error)
                raise
            self._broker.txn_offset_commit(group_id, self.producer_id, parsed,
                                           partition=tp.partition, base_offset=first,
                                           commit_timestamp_ms=records.timestamps_ms[0])
            self._broker.notify_appended()

    def _note_txn_failure(self, error: BaseException) -> None:
        """A write of the open transaction failed: it can only be aborted now."""
        if self.transactional and self._txn_state == _IN_TRANSACTION:
            self._txn_state = _ABORTABLE_ERROR
            self._txn_error = error

    def commit_transaction(self) -> None:
        """Flush the transaction's records, then have the coordinator write COMMIT markers
        to every partition it touched (``__consumer_offsets`` included): its records become
        visible to read_committed consumers and its offsets the group's committed offsets.
        Raises InvalidTxnStateError without an open transaction, or after a failed write (the
        transaction must then be aborted; a flush error is raised with it as the cause);
        ProducerFencedError."""
        with self._lock:
            self._require_transactional("commit_transaction")
            if self._txn_state == _READY:
                raise InvalidTxnStateError("Invalid transition attempted from state READY to "
                                           "state COMMITTING_TRANSACTION: no transaction is open")
            if self._txn_state == _IN_TRANSACTION:
                try:
                    self.flush()
                except ProducerFencedError:
                    raise
                except SeglogError as error:
                    self._note_txn_failure(error)
            if self._txn_state == _ABORTABLE_ERROR:
                raise InvalidTxnStateError(
                    "Cannot commit: a write of the transaction failed; abort it") \
                    from self._txn_error
            self._check_coordinator()
            if self._txn_partitions:
                try:
                    self._broker.end_txn(
                        self._txn_id, self.producer_id, self.producer_epoch,
                        commit=True)
                except ProducerFencedError as error:
                    raise self._fenced(error) from None
            self._txn_state = _READY
            self._txn_partitions = set()

    def abort_transaction(self) -> None:
        """Abort the open transaction: records still waiting in the producer are dropped
        (their futures fail with TransactionAbortedError), and the coordinator writes ABORT
        markers to every partition the transaction touched, so read_committed consumers
        never see its records and its offsets are never committed. Raises
        InvalidTxnStateError without an open transaction, ProducerFencedError."""
        with self._lock:
            self._require_transactional("abort_transaction")
            if self._txn_state == _READY:
                raise InvalidTxnStateError("Invalid transition attempted from state READY to "
                                           "state ABORTING_TRANSACTION: no transaction is open")
            self._drop_waiting(TransactionAbortedError(
                "Failing batch since transaction was aborted"))
            if self._txn_partitions:
                try:
                    producer_id, epoch = self._broker.end_txn(
                        self._txn_id, self.producer_id, self.producer_epoch,
                        commit=False, bump_epoch=self._epoch_bump_required)
                except ProducerFencedError as error:
                    raise self._fenced(error) from None
                if (producer_id, epoch) != (self.producer_id, self.producer_epoch):
                    self.producer_id, self.producer_epoch = producer_id, epoch
                    self._sequences.clear()  # a new epoch starts every partition at 0
                    self._epoch_bump_required = False
            self._txn_state = _READY
            self._txn_partitions = set()
            self._txn_error = None

    def _drop_waiting(self, error: BaseException) -> None:
        """Fail the batches not written yet without writing them."""
        for batch in list(self._batches.values()):
            batch.buffer.seal()
            batch.result.complete([(0, -1, error)])
        self._batches.clear()
        with self._linger_lock:
            self._linger_deadlines.clear()

    # --- sending ---------------------------------------------------------------------------

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: Iterable[tuple[str, bytes | None]] | None = None) -> SendFuture:
        """Queue one record for ``topic`` and return its :class:`SendFuture`.

        ``value``/``key``: bytes-like or None. ``partition``: explicit, else chosen by the
        partitioner. ``timestamp_ms``: CreateTime, default the wall clock now. ``headers``:
        ``(str, bytes | None)`` pairs. Raises :class:`UnknownTopicOrPartitionError`,
        :class:`RecordTooLargeError` (over ``max_request_bytes``), :class:`InvalidRecordError`
        (a keyless record for a compacted topic, a bad type), :class:`IllegalStateError` after
        :meth:`close`; TypeError for a non-integer ``partition`` / ``timestamp_ms``,
        ValueError for one outside int32 / int64.
        """
        if partition is not None:
            partition = check_int_argument("partition", partition, minimum=-(INT32_MAX + 1),
                                           maximum=INT32_MAX)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        else:
            timestamp_ms = check_int_argument("timestamp_ms", timestamp_ms)
        # bytes is the common case; anything else is checked (and copied) here.
        if key is not None and type(key) is not bytes:
            key = _as_bytes_or_none(key, "key")
        if value is not None and type(value) is not bytes:
            value = _as_bytes_or_none(value, "value")
        if headers:
            header_list = tuple(_as_header(h) for h in headers)
            headers_bytes = _headers_size_bytes(header_list)
        else:
            header_list, headers_bytes = (), 0
        record_bytes = (_RECORD_OVERHEAD_BYTES + headers_bytes + (len(key) if key else 0)
                        + (len(value) if value else 0))
        if record_bytes + RECORD_BATCH_OVERHEAD > self.max_request_bytes:
            raise RecordTooLargeError(
                f"The message is {record_bytes + RECORD_BATCH_OVERHEAD} bytes when serialized "
                f"which is larger than max_request_bytes ({self.max_request_bytes})")
        slots = self._fast.slots(topic)
        if slots is None:
            slots = self._topic_metadata(topic)  # UnknownTopicOrPartitionError
        topic_obj, num_partitions, tps = slots.topic, slots.partitions, slots.tps
        if key is None and slots.compacted:
            raise InvalidRecordError(f"Compacted topic {topic!r} cannot accept a record "
                                     "without a key")
        with self._lock:
            if self._closed:
                raise IllegalStateError("Cannot send after the producer is closed.")
            if self._errors:
                self._raise_if_sender_failed()
            transactional = self.transactional_id is not None
            if transactional:
                self._check_can_send()
            sticky = partition is None and key is None and self.partitioner == "sticky"
            if partition is None:
                if key is not None and self.partitioner == "sticky":
                    partition = self._accumulator.partition_for_key(key, num_partitions)
                else:
                    partition = self._choose_partition(topic_obj, key, slots)
                tp = tps[partition] if partition < len(tps) else TopicPartition(topic, partition)
            else:
                topic_obj.log(partition)  # UnknownTopicOrPartitionError when out of range
                tp = TopicPartition(topic, partition)
            if transactional:
                self._add_to_transaction([tp])
            batch = self._batches.get(tp)
            if batch is not None:
                buffer = batch.buffer
                if (buffer.size_bytes + record_bytes > self.batch_size_bytes
                        or buffer.record_count >= BATCH_RECORDS_MAX):
                    self._write(batch)  # Kafka closes the full batch and opens a new one
                    batch = None
            if batch is None:
                # A new batch looks the topic up again (deleted, more partitions): Kafka's
                # producer sees such changes at its next metadata refresh, this one at its
                # next batch of the topic.
                self._topic_metadata(topic)
                batch = self._open_batch(tp)
                buffer = batch.buffer
            index = buffer.append(key, value, timestamp_ms, headers_bytes)
            if header_list or batch.headers is not None:
                batch.add_headers(index, header_list)
            future = self._accumulator.SendFuture(batch.result, index, topic, partition,
                                                  timestamp_ms)
            full = buffer.size_bytes >= self.batch_size_bytes
            if sticky:
                slots.keyless_appended(record_bytes, full)
            if full or self.linger_ms == 0:
                self._write(batch)
            # The accumulator's SendFuture is registered as this module's (see SendFuture).
            return cast(SendFuture, future)

    def send_batch(self, topic: str, values: Iterable[bytes | bytearray | memoryview | None],
                   keys: Iterable[bytes | bytearray | memoryview | None] | None = None, *,
                   partition: int | None = None,
                   timestamps_ms: int | Sequence[int] | None = None
                   ) -> dict[int, tuple[int, int]]:
        """Write many records at once, with no per-record future: the batch-first path.

        ``values`` (and ``keys``, None or one per record) are sequences of bytes-like or None.
        Records are spread as :meth:`send` would (explicit ``partition``; else murmur2 of
        each key, computed for all keys at once; keyless records all go to the topic's
        current sticky partition, or round robin when asked) and each partition's share is
        appended at once as one RecordBatch, after any records already waiting there (order
        per partition is kept). ``timestamps_ms``: None (now), an int, or one per record.
        Returns ``{partition: (first_offset, last_offset)}``. Raises as :meth:`send`, and
        the log's errors directly (nothing of a failed partition's share is written).
        """
        values = [_as_bytes_or_none(v, "value") for v in values]
        count = len(values)
        if count == 0:
            return {}
        if keys is not None:
            keys = [_as_bytes_or_none(k, "key") for k in keys]
            if len(keys) != count:
                raise InvalidRecordError(f"{len(keys)} keys for {count} values")
        topic_obj = self._broker.topic(topic)
        if topic_obj.config.compaction_enabled and (keys is None or None in keys):
            raise InvalidRecordError(f"Compacted topic {topic!r} cannot accept a record "
                                     "without a key")
        if partition is not None:
            partition = check_int_argument("partition", partition, minimum=-(INT32_MAX + 1),
                                           maximum=INT32_MAX)
        if timestamps_ms is None:
            timestamps_ms = time.time_ns() // 1_000_000
        stamps: Sequence[int]
        if isinstance(timestamps_ms, (str, bytes)) or not hasattr(timestamps_ms, "__len__"):
            stamps = [check_int_argument("timestamps_ms", timestamps_ms)] * count
        else:
            stamps = cast(Sequence[int], timestamps_ms)  # a sequence: it has a length
            if len(stamps) != count:
                raise InvalidRecordError(f"{len(stamps)} timestamps for {count} values")
        with self._lock:
            if self._closed:
                raise IllegalStateError("Cannot send after the producer is closed.")
            if self.transactional:
                self._check_can_send()
            if partition is not None:
                topic_obj.log(partition)
                targets = [partition] * count
            elif self.partitioner == "round_robin" or keys is None or None in keys:
                targets = [self._choose_partition(topic_obj, None if keys is None else k)
                           for k in (keys or [None] * count)]
            else:
                targets = partitions_for_keys(keys, topic_obj.partitions).tolist()
            shares: dict[int, list[int]] = {}
            for i, p in enumerate(targets):
                shares.setdefault(p, []).append(i)
            if self.transactional:
                self._add_to_transaction([TopicPartition(topic, p) for p in sorted(shares)])
            out = {}
            for p, rows in sorted(shares.items()):
                tp = TopicPartition(topic, p)
                waiting = self._batches.get(tp)
                if waiting is not None:
                    error = self._write(waiting)
                    if error is not None:
                        self._note_error(error)
                share = [values[i] for i in rows]
                share_keys = None if keys is None else [keys[i] for i in rows]
                try:
                    out[p] = self._append(
                        self._broker.topic(topic).log(p), tp, share, keys=share_keys,
                        timestamps_ms=[stamps[i] for i in rows], headers=None)
                except SeglogError as error:
                    self._note_txn_failure(error)
                    raise
                self._counters.records += len(rows)
                # No accumulator here: the records' own bytes and the batch's overhead.
                self._counters.size_bytes += RECORD_BATCH_OVERHEAD + sum(
                    len(v) for v in share if v is not None) + (0 if share_keys is None else sum(
                        len(k) for k in share_keys if k is not None))
                self._broker.notify_appended()
            return out

    def _topic_metadata(self, topic: str) -> Any:
        """Look ``topic`` up at the broker (UnknownTopicOrPartitionError) and return its
        accumulator ``TopicSlots`` (partition count, compacted, TopicPartitions, sticky
        partition), made anew when the topic is new, was recreated or grew."""
        topic_obj = self._broker.topic(topic)
        num_partitions = topic_obj.partitions
        slots = self._fast.slots(topic)
        if slots is None or slots.topic is not topic_obj or slots.partitions != num_partitions:
            slots = self._accumulator.TopicSlots(
                topic_obj, num_partitions, topic_obj.config.compaction_enabled,
                tuple(TopicPartition(topic, p) for p in range(num_partitions)),
                sticky_batch_bytes=max(1, self.batch_size_bytes), rng=self._sticky_rng)
            self._fast.set_slots(topic, slots)
        return slots

    def _batch_for(self, tp: TopicPartition) -> _Batch:
        """The open batch of ``tp``, opened (after looking the topic up again) if none."""
        batch = self._batches.get(tp)
        if batch is None:
            self._topic_metadata(tp.topic)
            batch = self._open_batch(tp)
        return batch

    def _note_error(self, error: BaseException) -> None:
        """Keep a batch's error for the next flush (and a sender failure for the next send):
        the accumulator's Sender then hands sends to the full path, which raises them."""
        self._errors.append(error)
        self._fast.errors_pending = True

    def _choose_partition(self, topic, key, slots=None) -> int:
        if self.partitioner == "round_robin":
            chooser = self._keyless.get(topic.name)
            if chooser is None or chooser.num_partitions != topic.partitions:
                chooser = self._keyless[topic.name] = RoundRobinPartitioner(topic.partitions)
            return chooser.partition()
        if key is not None:
            return self._accumulator.partition_for_key(key, topic.partitions)
        if slots is None:
            slots = self._topic_metadata(topic.name)
        return slots.keyless_partition()

    def _open_batch(self, tp: TopicPartition) -> _Batch:
        deadline = time.monotonic() + self.linger_ms / 1000
        batch = self._batches[tp] = _Batch(tp, deadline, self._accumulator.RecordBuffer(),
                                           self._accumulator.BatchResult())
        if self.linger_ms > 0:
            self._ensure_sender()
            with self._linger_lock:
                # Batches open under the producer's lock with one linger_ms, so deadlines
                # arrive in order: the queue is its own deadline heap. The linger thread is
                # woken only when it sleeps past this deadline (no deadline at all): a wake
                # costs the sending thread a GIL hand-over.
                self._linger_deadlines.append((deadline, batch))
                if deadline < self._linger_wake_at:
                    self._linger_wakeup.notify()
        return batch

    # --- writing ---------------------------------------------------------------------------

    def _write(self, batch: _Batch) -> BaseException | None:
        """Append ``batch`` as one RecordBatch and complete its futures. Caller holds the
        lock. Returns the error that failed it, if any (also stored in the futures)."""
        batch.buffer.seal()  # the accumulator's Sender opens a new batch from now on
        if self._batches.get(batch.tp) is batch:
            del self._batches[batch.tp]
        deadlines = self._linger_deadlines
        # Drop the stale entries at the head (this batch's among them), so the linger thread's
        # next sleep is until a batch still open. Under the linger lock even to look: the
        # linger thread pops from the head under it, so an unlocked look could find the deque
        # emptied between its length and its head (IndexError). Once per batch, uncontended.
        with self._linger_lock:
            while deadlines and deadlines[0][1].buffer.sealed:
                deadlines.popleft()
        parts: list[tuple[int, int, BaseException | None]] = []
        todo = collections.deque([(0, batch.buffer.record_count)])  # record ranges, in order
        first_error: BaseException | None = None
        current = None  # the range being appended
        try:
            log = self._broker.topic(batch.tp.topic).log(batch.tp.partition)
            while todo:
                current = todo.popleft()
                start, end = current
                values, keys, timestamps_ms, headers = batch.columns(start, end)
                try:
                    first, _last = self._append(log, batch.tp, values, keys=keys,
                                                timestamps_ms=timestamps_ms, headers=headers)
                except RecordTooLargeError as error:
                    if end - start > 1:  # split in halves, left first: order is kept
                        middle = (start + end) // 2
                        todo.appendleft((middle, end))
                        todo.appendleft((start, middle))
                    else:
                        parts.append((start, -1, error))  # one record alone is too large
                        first_error = first_error or error
                    current = None
                    continue
                parts.append((start, first, None))
                current = None
                written = batch.buffer.record_count
                self._counters.records += end - start
                self._counters.size_bytes += batch.buffer.size_bytes * (end - start) // written
        except BaseException as error:
            # Fail this range and every range not written yet; never leave a future waiting.
            failed = ([current] if current is not None else []) + list(todo)
            parts.extend((start, -1, error) for start, _end in failed)
            batch.result.complete(parts)
            if isinstance(error, SeglogError):
                self._note_txn_failure(error)
                return error
            raise
        if first_error is not None:
            self._note_txn_failure(first_error)
        batch.result.complete(parts)
        if any(first >= 0 for _, first, _ in parts):
            self._broker.notify_appended()
        return first_error

    def _append(self, log, tp: TopicPartition, values: list, *, keys, timestamps_ms,
                headers) -> tuple[int, int]:
        """One batch through :attr:`log_append`, with the producer id and the partition's
        next base sequence when idempotent (the sequence moves only when the append
        succeeds), sent again after retriable errors (see the module docstring)."""
        fields: dict[str, Any] = dict(keys=keys, timestamps_ms=timestamps_ms, headers=headers,
                                      compression=self.compression)
        sequence = 0
        if self.idempotent:
            if self.transactional:
                self._check_coordinator()
            sequence = self._sequences.get(tp, 0)
            count = _record_count(values)
            fields.update(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                          base_sequence=sequence, is_transactional=self.transactional)
        attempt = 0
        while True:
            try:
                offsets = self.log_append(log, values, **fields)
                break
            except InvalidProducerEpochError as error:
                if self.transactional:  # markers of a newer epoch reached the partition
                    raise self._fenced(error) from None
                raise
            except SeglogError as error:
                if not error.retriable:
                    raise
                if attempt >= self.retries:
                    if self.idempotent:
                        self._unknown_outcome()
                    raise
                attempt += 1
                if self.retry_backoff_ms:
                    time.sleep(self.retry_backoff_ms / 1000)
        if self.idempotent:
            self._sequences[tp] = (sequence + count) % _SEQUENCE_MODULUS
        return offsets

    def _unknown_outcome(self) -> None:
        """A batch's retries ran out after retriable errors: it may be in the log. Its
        sequence must never be reused for other records, so a transactional producer bumps
        its epoch at the next abort and a plain idempotent one takes a new producer id."""
        if self.transactional:
            self._epoch_bump_required = True
        else:
            self.producer_id, self.producer_epoch = self._broker.init_producer_id()
            self._sequences.clear()

    def flush(self, timeout_ms: int | None = None) -> None:
        """Write every open batch now (records sent before the call are in the logs when it
        returns). Raises the first error that failed a batch since the last flush (the other
        batches are still written). ``timeout_ms`` is accepted for Kafka compatibility; the
        writes are synchronous (it is still checked: TypeError / ValueError as everywhere)."""
        check_optional_int_argument("timeout_ms", timeout_ms, minimum=0)
        with self._lock:
            errors, self._errors = self._errors, []
            self._fast.errors_pending = False
            for batch in list(self._batches.values()):
                error = self._write(batch)
                if error is not None:
                    errors.append(error)
            with self._linger_lock:
                self._linger_deadlines.clear()
        if errors:
            raise errors[0]

    def _raise_if_sender_failed(self) -> None:
        pending = [e for e in self._errors if not isinstance(e, SeglogError)]
        if pending:
            raise pending[0]

    # --- the sender thread (linger) ----------------------------------------------------------

    def _ensure_sender(self) -> None:
        if self._sender is None:
            self._sender = threading.Thread(target=self._run_linger, daemon=True,
                                            name=f"seglog-producer-linger-{id(self):x}")
            self._sender.start()

    def _run_linger(self) -> None:
        """The linger thread: sleeps on its own lock until the earliest deadline, drops
        the entries of batches written meanwhile (full, flushed) and takes the producer's
        lock only to write batches still open at their deadline."""
        while True:
            expired = self._next_expired()
            if expired is None:
                return
            self._write_expired(expired)

    def _next_expired(self) -> list[_Batch] | None:
        """Wait (on the linger lock only) until open batches reach their deadline and return
        them; None once the producer is closed."""
        deadlines = self._linger_deadlines
        with self._linger_wakeup:
            while not self._closed:
                # A sealed buffer was written (full, flushed, dropped): its entry is stale.
                while deadlines and deadlines[0][1].buffer.sealed:
                    deadlines.popleft()
                if not deadlines:
                    self._linger_wake_at = _NEVER
                    self._linger_wakeup.wait()
                    continue
                self._linger_wake_at = deadlines[0][0]
                wait_s = self._linger_wake_at - time.monotonic()
                if wait_s > 0:
                    self._linger_wakeup.wait(wait_s)
                    continue
                now = time.monotonic()
                expired = []
                while deadlines and deadlines[0][0] <= now:
                    batch = deadlines.popleft()[1]
                    if not batch.buffer.sealed:
                        expired.append(batch)
                if expired:
                    return expired
            return None

    def _write_expired(self, expired: list[_Batch]) -> None:
        """Write the batches the linger thread found expired, under the producer's lock.

        The lock is taken without blocking, retried after a short sleep: a thread blocked on
        it would be woken by every send's release (a futex call per record) while the
        sending thread takes it back first; holding the GIL while trying, this thread finds
        it free between two sends instead."""
        lock = self._lock
        tries = 0
        while not lock.acquire(blocking=False):
            if self._closed:
                return
            tries += 1
            if tries >= _LINGER_TRIES_MAX:  # held for long (a slow write): wait for it
                lock.acquire()
                break
            time.sleep(_LINGER_RETRY_S)
        try:
            if self._closed:
                return
            for batch in expired:
                if self._batches.get(batch.tp) is not batch:
                    continue  # written meanwhile (full, or flushed)
                try:
                    error = self._write(batch)
                except BaseException as exc:  # noqa: BLE001 - keep the linger thread alive
                    error = exc
                if error is not None:
                    self._note_error(error)
        finally:
            lock.release()

    # --- lifecycle ---------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Records and bytes written so far, by Kafka's producer metric names
        (``record-send-total``, ``byte-total``; docs/metrics.md)."""
        with self._lock:
            return self._counters.as_dict()

    def close(self, timeout_ms: int | None = None) -> None:
        """Flush open batches and stop the sender; later sends raise
        :class:`IllegalStateError`. Errors of batches written here fail their futures but are
        not raised (the store calls this on close). A transaction still open is aborted
        (its waiting records dropped); a fenced producer writes nothing. Idempotent.
        TypeError / ValueError for a non-integer or negative ``timeout_ms``."""
        check_optional_int_argument("timeout_ms", timeout_ms, minimum=0)
        with self._lock:
            if self._closed:
                return
            if self._txn_state == _FENCED:
                self._drop_waiting(ProducerFencedError("the producer was fenced"))
            elif self.in_transaction:
                try:
                    self.abort_transaction()  # Kafka's close aborts an open transaction
                except (SeglogError, LogClosedError):
                    self._drop_waiting(TransactionAbortedError("the producer was closed"))
            try:
                self.flush()
            except (SeglogError, LogClosedError):
                pass
            self._closed = True
            self._fast.enabled = False
            with self._linger_lock:
                self._linger_wakeup.notify_all()
            sender = self._sender
        if sender is not None and sender is not threading.current_thread():
            sender.join()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Producer(linger_ms={self.linger_ms}, batch_size_bytes={self.batch_size_bytes}, "
                f"compression={self.compression!r}, open_batches={len(self._batches)})")


def _record_count(values) -> int:
    """Records in a values column (a list, or the ``(data, lengths)`` form)."""
    if isinstance(values, tuple) and len(values) == 2 and hasattr(values[1], "dtype"):
        return len(values[1])
    return len(values)


def _check_acks(acks: Any) -> int:
    """Kafka's number for ``acks`` (-1 for "all", 1), or InvalidRequiredAcksError (see the
    Producer docstring for why 0 is refused)."""
    if not isinstance(acks, bool):
        try:
            number = _ACKS.get(acks)
        except TypeError:  # unhashable
            number = None
        if number is not None:
            return number
    if acks in (0, "0") and not isinstance(acks, bool):
        raise InvalidRequiredAcksError(
            "acks=0 (fire-and-forget) is not offered by the embedded producer: its append "
            "always knows the offset and the error, so use acks=1 or acks='all' (the same "
            "on one broker)")
    raise InvalidRequiredAcksError(f"acks must be 'all', -1 or 1, got {acks!r}")


def _as_bytes_or_none(data, what: str):
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        raise InvalidRecordError(f"the record {what} must be bytes-like or None, got str "
                                 "(encode it first)")
    try:
        return bytes(memoryview(data))
    except TypeError:
        raise InvalidRecordError(f"the record {what} must be bytes-like or None, got "
                                 f"{type(data).__name__}") from None


def _as_header(header) -> tuple[str, bytes | None]:
    """Check one header here, so a bad one fails its own send, not its whole batch later."""
    try:
        header_key, header_value = header
    except (TypeError, ValueError):
        raise InvalidRecordError(f"a header must be a (str, bytes | None) pair, got "
                                 f"{header!r}") from None
    if not isinstance(header_key, str):
        raise InvalidRecordError(f"a header key must be a str, got {header_key!r}")
    return header_key, _as_bytes_or_none(header_value, f"header {header_key!r} value")
