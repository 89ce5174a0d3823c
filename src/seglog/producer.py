"""A producer: records accumulate per partition and go to the Log as whole batches.

Kafka's producer (``RecordAccumulator`` + ``Sender``) in one process. :meth:`Producer.send`
picks the partition (an explicit one; else murmur2 of the key, as Kafka's default
partitioner; else, for a keyless record, the topic's sticky partition, or round robin when
asked), appends the record to that partition's open batch and returns a
:class:`SendFuture`. A batch is written with one ``Log.append_batch`` call (one encode, one
write) when

* adding the next record would take it past ``batch_size_bytes`` (the record starts a new
  batch; a record larger than that is a batch by itself), or it reached that size;
* it is ``linger_ms`` old (a background sender thread wakes at the earliest deadline; with
  ``linger_ms=0`` every send writes at once);
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

Thread safety: a Producer may be shared by threads (as Kafka's is).
"""

from __future__ import annotations

import bisect
import collections
import heapq
import threading
import time
from typing import Any, Iterable, NamedTuple

from .errors import (
    IllegalStateError,
    InvalidRecordError,
    LogClosedError,
    RecordTooLargeError,
    SeglogError,
)
from .format import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD
from .partitioner import RoundRobinPartitioner, StickyPartitioner, partition_for_key
from .store import TopicPartition

__all__ = ["Producer", "RecordMetadata", "SendFuture"]

#: Kafka's producer defaults (``linger.ms`` is 5 since Kafka 4.0, ``batch.size`` 16 KiB,
#: ``max.request.size`` 1 MiB).
LINGER_MS_DEFAULT = 5
BATCH_SIZE_BYTES_DEFAULT = 16384
MAX_REQUEST_BYTES_DEFAULT = 1024 * 1024
#: Most records in one batch (a limit on everything; Kafka has none but batch.size).
BATCH_RECORDS_MAX = 1 << 20
_COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Sequence numbers wrap past Integer.MAX_VALUE to 0 (Kafka's incrementSequence).
_SEQUENCE_MODULUS = 1 << 31


class RecordMetadata(NamedTuple):
    """Where a record was written: topic, partition, offset and its timestamp (ms)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class _BatchResult:
    """The outcome of one batch, shared by its records' futures (one Event per batch, not
    per record). A batch is usually written whole; one the log refuses as too large is split
    and written in parts (Kafka's producer splits on MESSAGE_TOO_LARGE), so the outcome is a
    list of parts: ``(first record index, first offset or -1, error or None)``."""

    __slots__ = ("event", "parts", "_starts")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.parts: list[tuple[int, int, BaseException | None]] = []
        self._starts: list[int] = []

    def complete(self, parts: list[tuple[int, int, BaseException | None]]) -> None:
        self.parts = sorted(parts, key=lambda part: part[0])
        self._starts = [part[0] for part in self.parts]
        self.event.set()

    def offset_of(self, index: int) -> int:
        """The offset record ``index`` got; raises the error of its part."""
        start, first_offset, error = self.parts[bisect.bisect_right(self._starts, index) - 1]
        if error is not None:
            raise error
        return first_offset + (index - start)

    def error_of(self, index: int) -> BaseException | None:
        """The error that failed record ``index``, or None."""
        return self.parts[bisect.bisect_right(self._starts, index) - 1][2]


class SendFuture:
    """The pending result of one :meth:`Producer.send`.

    ``topic`` and ``partition`` are known at once; :meth:`result` waits until the record's
    batch is written and returns its :class:`RecordMetadata`, or raises the error that failed
    the batch. Thread-safe.
    """

    __slots__ = ("topic", "partition", "timestamp_ms", "_batch", "_index")

    def __init__(self, batch: _BatchResult, index: int, topic: str, partition: int,
                 timestamp_ms: int):
        self.topic = topic
        self.partition = partition
        self.timestamp_ms = timestamp_ms
        self._batch = batch
        self._index = index  # the record's position in its batch

    def done(self) -> bool:
        """Whether the batch was written (or failed)."""
        return self._batch.event.is_set()

    def result(self, timeout_ms: int | None = None) -> RecordMetadata:
        """Wait up to ``timeout_ms`` (None: until the batch is written, which the sender does
        within ``linger_ms``) and return the record's :class:`RecordMetadata`. Raises the
        batch's error, or ``TimeoutError``."""
        batch = self._batch
        if not batch.event.wait(None if timeout_ms is None else timeout_ms / 1000):
            raise TimeoutError(f"record to {self.topic}-{self.partition} not written after "
                               f"{timeout_ms} ms")
        return RecordMetadata(self.topic, self.partition, batch.offset_of(self._index),
                              self.timestamp_ms)

    @property
    def offset(self) -> int:
        """The record's offset (waits for the batch, as :meth:`result`)."""
        return self.result().offset

    def __repr__(self) -> str:
        batch = self._batch
        state = ("pending" if not batch.event.is_set() else "failed"
                 if batch.error_of(self._index) else f"offset={batch.offset_of(self._index)}")
        return f"SendFuture({self.topic}-{self.partition}, {state})"


class _Batch:
    """The open batch of one partition: column lists, the estimated size, its result."""

    __slots__ = ("tp", "values", "keys", "timestamps_ms", "headers", "has_keys", "has_headers",
                 "size_bytes", "deadline", "result")

    def __init__(self, tp: TopicPartition, deadline: float):
        self.tp = tp
        self.values: list = []
        self.keys: list = []
        self.timestamps_ms: list[int] = []
        self.headers: list = []
        self.has_keys = False
        self.has_headers = False
        self.size_bytes = RECORD_BATCH_OVERHEAD
        self.deadline = deadline
        self.result = _BatchResult()


def _record_size_bytes(key, value, headers) -> int:
    """Kafka's upper-bound estimate of one record's size in a batch (before compression)."""
    size = MAX_RECORD_OVERHEAD + 5 + 5 + 5  # + key, value and header-count varints
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for header_key, header_value in headers:
        size += 10 + len(header_key.encode("utf-8")) + (len(header_value) if header_value else 0)
    return size


class Producer:
    """Writes records to a :class:`~seglog.store.Store` in batches (see the module docstring).

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
      checks them (a retried batch would be written once). Within one process nothing is
      retried, so this buys the format and the checks, not extra safety.
    """

    def __init__(self, store, *, linger_ms: int = LINGER_MS_DEFAULT,
                 batch_size_bytes: int = BATCH_SIZE_BYTES_DEFAULT, compression: str = "none",
                 partitioner: str = "sticky", max_request_bytes: int = MAX_REQUEST_BYTES_DEFAULT,
                 idempotent: bool = False, acks: Any = None):
        if isinstance(linger_ms, bool) or not isinstance(linger_ms, int) or linger_ms < 0:
            raise ValueError(f"linger_ms must be an int >= 0, got {linger_ms!r}")
        if isinstance(batch_size_bytes, bool) or not isinstance(batch_size_bytes, int) \
                or batch_size_bytes < 0:
            raise ValueError(f"batch_size_bytes must be an int >= 0, got {batch_size_bytes!r}")
        if compression not in _COMPRESSIONS:
            raise ValueError(f"compression must be one of {_COMPRESSIONS}, got {compression!r}")
        if partitioner not in ("sticky", "round_robin"):
            raise ValueError(f"partitioner must be 'sticky' or 'round_robin', got {partitioner!r}")
        if max_request_bytes < 1:
            raise ValueError(f"max_request_bytes must be >= 1, got {max_request_bytes!r}")
        self._store = store
        self.linger_ms = linger_ms
        self.batch_size_bytes = batch_size_bytes
        self.compression = compression
        self.partitioner = partitioner
        self.max_request_bytes = max_request_bytes
        self.idempotent = bool(idempotent)
        self._lock = threading.RLock()
        self._wakeup = threading.Condition(self._lock)
        self._batches: dict[TopicPartition, _Batch] = {}
        self._deadlines: list[tuple[float, int, TopicPartition]] = []  # heap
        self._deadline_seq = 0
        self._keyless: dict[str, Any] = {}  # topic -> Sticky/RoundRobin partitioner
        self._errors: list[BaseException] = []
        self._closed = False
        self._sender: threading.Thread | None = None
        self.producer_id = store._allocate_producer_id() if self.idempotent else -1
        self.producer_epoch = 0 if self.idempotent else -1
        self._sequences: dict[TopicPartition, int] = {}  # next base sequence per partition

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
        :meth:`close`.
        """
        key = _as_bytes_or_none(key, "key")
        value = _as_bytes_or_none(value, "value")
        header_list = tuple(_as_header(h) for h in headers) if headers else ()
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        record_bytes = _record_size_bytes(key, value, header_list)
        if record_bytes + RECORD_BATCH_OVERHEAD > self.max_request_bytes:
            raise RecordTooLargeError(
                f"The message is {record_bytes + RECORD_BATCH_OVERHEAD} bytes when serialized "
                f"which is larger than max_request_bytes ({self.max_request_bytes})")
        topic_obj = self._store.topic(topic)  # UnknownTopicOrPartitionError
        if key is None and topic_obj.config.compaction_enabled:
            raise InvalidRecordError(f"Compacted topic {topic!r} cannot accept a record "
                                     "without a key")
        with self._lock:
            if self._closed:
                raise IllegalStateError("Cannot send after the producer is closed.")
            self._raise_if_sender_failed()
            sticky = partition is None and key is None and self.partitioner == "sticky"
            if partition is None:
                partition = self._choose_partition(topic_obj, key)
            else:
                topic_obj.log(partition)  # UnknownTopicOrPartitionError when out of range
            tp = TopicPartition(topic, partition)
            batch = self._batches.get(tp)
            if batch is not None and (batch.size_bytes + record_bytes > self.batch_size_bytes
                                      or len(batch.values) >= BATCH_RECORDS_MAX):
                self._write(batch)  # Kafka closes the full batch and opens a new one
                batch = None
            if batch is None:
                batch = self._open_batch(tp)
            future = SendFuture(batch.result, len(batch.values), topic, partition, timestamp_ms)
            batch.values.append(value)
            batch.keys.append(key)
            batch.timestamps_ms.append(timestamp_ms)
            batch.headers.append(header_list)
            batch.has_keys |= key is not None
            batch.has_headers |= bool(header_list)
            batch.size_bytes += record_bytes
            full = batch.size_bytes >= self.batch_size_bytes
            if sticky:
                self._keyless[topic].record_appended(record_bytes, switch_allowed=full)
            if full or self.linger_ms == 0:
                self._write(batch)
            return future

    def send_batch(self, topic: str, values, keys=None, *, partition: int | None = None,
                   timestamps_ms=None) -> dict[int, tuple[int, int]]:
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
        from .partitioner import partitions_for_keys

        values = [_as_bytes_or_none(v, "value") for v in values]
        count = len(values)
        if count == 0:
            return {}
        if keys is not None:
            keys = [_as_bytes_or_none(k, "key") for k in keys]
            if len(keys) != count:
                raise InvalidRecordError(f"{len(keys)} keys for {count} values")
        topic_obj = self._store.topic(topic)
        if topic_obj.config.compaction_enabled and (keys is None or None in keys):
            raise InvalidRecordError(f"Compacted topic {topic!r} cannot accept a record "
                                     "without a key")
        if timestamps_ms is None:
            timestamps_ms = time.time_ns() // 1_000_000
        if isinstance(timestamps_ms, int):
            timestamps_ms = [timestamps_ms] * count
        elif len(timestamps_ms) != count:
            raise InvalidRecordError(f"{len(timestamps_ms)} timestamps for {count} values")
        with self._lock:
            if self._closed:
                raise IllegalStateError("Cannot send after the producer is closed.")
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
            out = {}
            for p, rows in sorted(shares.items()):
                tp = TopicPartition(topic, p)
                waiting = self._batches.get(tp)
                if waiting is not None:
                    error = self._write(waiting)
                    if error is not None:
                        self._errors.append(error)
                out[p] = self._append(
                    self._store.topic(topic).log(p), tp, [values[i] for i in rows],
                    keys=None if keys is None else [keys[i] for i in rows],
                    timestamps_ms=[timestamps_ms[i] for i in rows], headers=None)
                self._store._notify_data()
            return out

    def _choose_partition(self, topic, key) -> int:
        if self.partitioner == "round_robin":
            chooser = self._keyless.get(topic.name)
            if chooser is None or chooser.num_partitions != topic.partitions:
                chooser = self._keyless[topic.name] = RoundRobinPartitioner(topic.partitions)
            return chooser.partition()
        if key is not None:
            return partition_for_key(key, topic.partitions)
        chooser = self._keyless.get(topic.name)
        if chooser is None or chooser.num_partitions != topic.partitions:
            chooser = self._keyless[topic.name] = StickyPartitioner(
                topic.partitions, sticky_batch_bytes=max(1, self.batch_size_bytes))
        return chooser.partition()

    def _open_batch(self, tp: TopicPartition) -> _Batch:
        deadline = time.monotonic() + self.linger_ms / 1000
        batch = self._batches[tp] = _Batch(tp, deadline)
        if self.linger_ms > 0:
            self._deadline_seq += 1
            heapq.heappush(self._deadlines, (deadline, self._deadline_seq, tp))
            self._ensure_sender()
            self._wakeup.notify()
        return batch

    # --- writing ---------------------------------------------------------------------------

    def _write(self, batch: _Batch) -> BaseException | None:
        """Append ``batch`` as one RecordBatch and complete its futures. Caller holds the
        lock. Returns the error that failed it, if any (also stored in the futures)."""
        if self._batches.get(batch.tp) is batch:
            del self._batches[batch.tp]
        parts: list[tuple[int, int, BaseException | None]] = []
        todo = collections.deque([(0, len(batch.values))])  # record ranges, in order
        first_error: BaseException | None = None
        current = None  # the range being appended
        try:
            log = self._store.topic(batch.tp.topic).log(batch.tp.partition)
            while todo:
                current = todo.popleft()
                start, end = current
                try:
                    first, _last = self._append(
                        log, batch.tp, batch.values[start:end],
                        keys=batch.keys[start:end] if batch.has_keys else None,
                        timestamps_ms=batch.timestamps_ms[start:end],
                        headers=batch.headers[start:end] if batch.has_headers else None)
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
        except BaseException as error:
            # Fail this range and every range not written yet; never leave a future waiting.
            failed = ([current] if current is not None else []) + list(todo)
            parts.extend((start, -1, error) for start, _end in failed)
            batch.result.complete(parts)
            if isinstance(error, SeglogError):
                return error
            raise
        batch.result.complete(parts)
        if any(first >= 0 for _, first, _ in parts):
            self._store._notify_data()
        return first_error

    def _append(self, log, tp: TopicPartition, values: list, *, keys, timestamps_ms,
                headers) -> tuple[int, int]:
        """One ``Log.append_batch``, with the producer id and the partition's next base
        sequence when idempotent (the sequence moves only when the append succeeds)."""
        if not self.idempotent:
            return log.append_batch(values, keys=keys, timestamps_ms=timestamps_ms,
                                    headers=headers, compression=self.compression)
        sequence = self._sequences.get(tp, 0)
        offsets = log.append_batch(values, keys=keys, timestamps_ms=timestamps_ms,
                                   headers=headers, compression=self.compression,
                                   producer_id=self.producer_id,
                                   producer_epoch=self.producer_epoch, base_sequence=sequence)
        self._sequences[tp] = (sequence + len(values)) % _SEQUENCE_MODULUS
        return offsets

    def flush(self, timeout_ms: int | None = None) -> None:
        """Write every open batch now (records sent before the call are in the logs when it
        returns). Raises the first error that failed a batch since the last flush (the other
        batches are still written). ``timeout_ms`` is accepted for Kafka compatibility; the
        writes are synchronous."""
        with self._lock:
            errors, self._errors = self._errors, []
            for batch in list(self._batches.values()):
                error = self._write(batch)
                if error is not None:
                    errors.append(error)
            self._deadlines.clear()
        if errors:
            raise errors[0]

    def _raise_if_sender_failed(self) -> None:
        pending = [e for e in self._errors if not isinstance(e, SeglogError)]
        if pending:
            raise pending[0]

    # --- the sender thread (linger) ----------------------------------------------------------

    def _ensure_sender(self) -> None:
        if self._sender is None:
            self._sender = threading.Thread(target=self._run_sender, daemon=True,
                                            name=f"seglog-producer-sender-{id(self):x}")
            self._sender.start()

    def _run_sender(self) -> None:
        with self._lock:
            while not self._closed:
                if not self._deadlines:
                    self._wakeup.wait()
                    continue
                deadline, _, tp = self._deadlines[0]
                now = time.monotonic()
                if deadline > now:
                    self._wakeup.wait(deadline - now)
                    continue
                heapq.heappop(self._deadlines)
                batch = self._batches.get(tp)
                if batch is None or batch.deadline != deadline:
                    continue  # written already (full, or flushed); a newer one has its own entry
                try:
                    error = self._write(batch)
                except BaseException as exc:  # noqa: BLE001 - keep the sender alive
                    error = exc
                if error is not None:
                    self._errors.append(error)

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self, timeout_ms: int | None = None) -> None:
        """Flush open batches and stop the sender; later sends raise
        :class:`IllegalStateError`. Errors of batches written here fail their futures but are
        not raised (the store calls this on close). Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            except (SeglogError, LogClosedError):
                pass
            self._closed = True
            self._wakeup.notify_all()
            sender = self._sender
        if sender is not None and sender is not threading.current_thread():
            sender.join()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Producer(linger_ms={self.linger_ms}, batch_size_bytes={self.batch_size_bytes}, "
                f"compression={self.compression!r}, open_batches={len(self._batches)})")


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
