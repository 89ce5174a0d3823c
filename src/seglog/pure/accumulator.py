"""The producer's record accumulator, pure Python: Kafka's murmur2 and one open batch.

The twin of ``src/_native/accumulator.pyx`` (same names, same results, same bytes once
encoded). ``murmur2(key)`` is Kafka's ``Utils.murmur2``: MurmurHash2 with seed ``0x9747b28c``
over the key read as little-endian 32-bit words, a *signed* 32-bit result as Java's;
``partition_for_key(key, n)`` is ``(murmur2(key) & 0x7fffffff) % n`` (Kafka's
``BuiltInPartitioner.partitionForKey``; ``& 0x7fffffff`` is ``Utils.toPositive``, not abs).

:class:`RecordBuffer` holds the records of one open batch as columns: values and keys
concatenated with their lengths (-1: null), one timestamp per record, and Kafka's size
estimate before compression. :meth:`RecordBuffer.columns` gives a range of records in the
``(data, lengths)`` form ``encode_batch`` takes. Not thread-safe (the Producer's lock guards it).

:class:`SendFuture` is the pending result of one ``Producer.send``; the futures of one batch
share its :class:`BatchResult` (the parts' first offsets and errors, one ``threading.Event``),
so completing a batch touches no future. Both are thread-safe.
"""

from __future__ import annotations

import _thread
import bisect
import threading
import time

import numpy as np

from ..arguments import check_optional_int_argument
from ..errors import InvalidRecordError
from ..format import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD
from ..types import RecordMetadata

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
#: Kafka's per-record estimate: 21 bytes of overhead + key, value and header-count varints.
_RECORD_OVERHEAD = MAX_RECORD_OVERHEAD + 15
#: Most records in one batch (the Producer's BATCH_RECORDS_MAX).
_BATCH_RECORDS_MAX = 1 << 20


def murmur2(data) -> int:
    """Kafka's ``Utils.murmur2(data)`` of any bytes-like ``data``: a signed 32-bit int."""
    data = bytes(data)
    length = len(data)
    m = MURMUR2_M
    h = (MURMUR2_SEED ^ length) & _MASK32
    words_end = length & ~3
    for i in range(0, words_end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & _MASK32
        k ^= k >> 24
        k = (k * m) & _MASK32
        h = ((h * m) & _MASK32) ^ k
    tail = length & 3
    # Java's switch falls through: 3 -> 2 -> 1, and only case 1 multiplies.
    if tail == 3:
        h ^= data[words_end + 2] << 16
    if tail >= 2:
        h ^= data[words_end + 1] << 8
    if tail >= 1:
        h ^= data[words_end]
        h = (h * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key, num_partitions: int) -> int:
    """``(murmur2(key) & 0x7fffffff) % num_partitions``; ValueError for ``num_partitions < 1``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be an int >= 1, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def _as_bytes(item, what: str) -> bytes | None:
    if item is None or isinstance(item, bytes):
        return item
    if isinstance(item, str):
        raise InvalidRecordError(f"the record {what} must be bytes-like or None, got str "
                                 "(encode it first)")
    try:
        return memoryview(item).cast("B").tobytes()
    except TypeError:
        raise InvalidRecordError(f"the record {what} must be bytes-like or None, got "
                                 f"{type(item).__name__}") from None


class RecordBuffer:
    """The records of one open batch as columns (see the module docstring).

    :meth:`append` adds a record; :attr:`record_count` and :attr:`size_bytes` (Kafka's
    producer estimate: 61 bytes per batch, plus per record 36 bytes of overhead, the key, the
    value and ``extra_bytes`` for headers) tell when to close it; :meth:`columns` gives a
    range of records to encode. Not thread-safe.
    """

    def __init__(self) -> None:
        self._values: list[bytes | None] = []
        self._keys: list[bytes | None] = []
        self._timestamps_ms: list[int] = []
        self.size_bytes = RECORD_BATCH_OVERHEAD
        self.has_keys = False
        self.sealed = False

    def seal(self) -> None:
        """Close the buffer to appends (its batch is being written); :meth:`append` then
        raises ValueError."""
        self.sealed = True

    @property
    def record_count(self) -> int:
        """Records appended so far."""
        return len(self._values)

    def append(self, key, value, timestamp_ms: int, extra_bytes: int = 0) -> int:
        """Copy one record in; returns its index in the batch. ``key``/``value``: bytes-like
        or None (InvalidRecordError otherwise, nothing appended). ``extra_bytes``: the
        headers' share of the size estimate (the caller keeps the headers). ValueError once
        sealed."""
        if self.sealed:
            raise ValueError("the batch is sealed: it is being written")
        key = _as_bytes(key, "key")
        value = _as_bytes(value, "value")
        timestamp_ms = int(timestamp_ms)
        if not -(1 << 63) <= timestamp_ms < (1 << 63):
            raise OverflowError("timestamp_ms out of int64 range")
        self._values.append(value)
        self._keys.append(key)
        self._timestamps_ms.append(timestamp_ms)
        if key is not None:
            self.has_keys = True
        self.size_bytes += (_RECORD_OVERHEAD + (len(value) if value else 0)
                            + (len(key) if key else 0) + extra_bytes)
        return len(self._values) - 1

    def columns(self, start: int = 0, end: int = -1):
        """Records ``start .. end-1`` (end -1: all) as ``(values, keys, timestamps_ms)``:
        values and keys in the ``(data, lengths)`` form of ``encode_batch`` (keys None when
        every key in the buffer is null), timestamps an int64 array."""
        if end < 0:
            end = self.record_count
        if not 0 <= start <= end <= self.record_count:
            raise IndexError(f"records {start}..{end} of {self.record_count}")
        values = _column(self._values[start:end])
        keys = _column(self._keys[start:end]) if self.has_keys else None
        return values, keys, np.array(self._timestamps_ms[start:end], dtype=np.int64)

    def __len__(self) -> int:
        return len(self._values)


def _column(items: list[bytes | None]) -> tuple[bytes, np.ndarray]:
    lengths = np.array([-1 if item is None else len(item) for item in items], dtype=np.int64)
    return b"".join(item for item in items if item), lengths


class BatchResult:
    """The outcome of one batch, shared by its records' futures (one Event per batch, not
    per record). A batch is usually written whole; one the log refuses as too large is split
    and written in parts, so the outcome is a list of parts ``(first record index, first
    offset or -1, error or None)``, given once by :meth:`complete`. Thread-safe: the parts
    are set before the event, and never change afterwards."""

    __slots__ = ("event", "completed", "_parts", "_starts")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.completed = False
        self._parts: list[tuple[int, int, BaseException | None]] = []
        self._starts: list[int] = []

    def complete(self, parts) -> None:
        """Give the outcome (parts in any order) and wake every waiting future."""
        parts = sorted(parts, key=lambda part: part[0])
        self._starts = [part[0] for part in parts]
        self._parts = parts
        self.completed = True
        self.event.set()

    def _part(self, index: int) -> tuple[int, int, BaseException | None]:
        if not self._parts:
            raise IndexError("the batch has no outcome yet")
        return self._parts[bisect.bisect_right(self._starts, index) - 1]

    def offset_of(self, index: int) -> int:
        """The offset record ``index`` got; raises the error of its part."""
        start, first_offset, error = self._part(index)
        if error is not None:
            raise error
        return first_offset + (index - start)

    def error_of(self, index: int) -> BaseException | None:
        """The error that failed record ``index``, or None."""
        return self._part(index)[2]


class SendFuture:
    """The pending result of one ``Producer.send``.

    ``topic``, ``partition`` and ``timestamp_ms`` are known at once; :meth:`result` waits
    until the record's batch is written and returns its ``RecordMetadata``, or raises the
    error that failed the batch. Thread-safe. ``SendFuture(result, index, topic, partition,
    timestamp_ms)``: record ``index`` of the batch whose :class:`BatchResult` is ``result``.
    """

    __slots__ = ("topic", "partition", "timestamp_ms", "_result", "_index")

    def __init__(self, result: BatchResult, index: int, topic, partition: int,
                 timestamp_ms: int):
        if not isinstance(result, BatchResult):
            raise TypeError(f"result must be a BatchResult, got {type(result).__name__}")
        self._result = result
        self._index = index  # the record's position in its batch
        self.topic = topic
        self.partition = partition
        self.timestamp_ms = timestamp_ms

    def done(self) -> bool:
        """Whether the batch was written (or failed)."""
        return self._result.completed

    def result(self, timeout_ms=None):
        """Wait up to ``timeout_ms`` (None: until the batch is written, which the sender does
        within ``linger_ms``) and return the record's ``RecordMetadata``. Raises the batch's
        error, or ``TimeoutError``; TypeError / ValueError for a non-integer or negative
        ``timeout_ms``."""
        timeout_ms = check_optional_int_argument("timeout_ms", timeout_ms, minimum=0)
        result = self._result
        if not result.completed:
            if not result.event.wait(None if timeout_ms is None else timeout_ms / 1000):
                raise TimeoutError(f"record to {self.topic}-{self.partition} not written "
                                   f"after {timeout_ms} ms")
        return RecordMetadata(self.topic, self.partition, result.offset_of(self._index),
                              self.timestamp_ms)

    @property
    def offset(self) -> int:
        """The record's offset (waits for the batch, as :meth:`result`)."""
        return self.result().offset

    def __repr__(self) -> str:
        result = self._result
        state = ("pending" if not result.completed else "failed"
                 if result.error_of(self._index) else f"offset={result.offset_of(self._index)}")
        return f"SendFuture({self.topic}-{self.partition}, {state})"


class TopicSlots:
    """One topic as a :class:`Sender` sees it: the partition count, whether it is compacted,
    its TopicPartitions, the producer's open batch per partition (as last seen; a sealed
    buffer means it was written) and the sticky partition of keyless records (Kafka's
    BuiltInPartitioner: stay until about ``sticky_batch_bytes`` went there and the batch is
    full, or twice that regardless, then draw ``rng.getrandbits(31) % partitions``)."""

    def __init__(self, topic, partitions: int, compacted: bool, tps: tuple, *,
                 sticky_batch_bytes: int, rng):
        self.topic = topic
        self.partitions = partitions
        self.compacted = compacted
        self.tps = tps
        self.batches: list = [None] * partitions
        self._sticky = -1
        self._sticky_bytes = 0
        self._sticky_batch_bytes = sticky_batch_bytes
        self._rng = rng

    def keyless_partition(self) -> int:
        """The sticky partition for the next keyless record (drawn when there is none)."""
        if self._sticky < 0:
            self._sticky = self._rng.getrandbits(31) % self.partitions
            self._sticky_bytes = 0
        return self._sticky

    def keyless_appended(self, appended_bytes: int, switch_allowed: bool) -> None:
        """Count ``appended_bytes`` on the sticky partition; move on when it is time."""
        if self._sticky < 0:
            return
        self._sticky_bytes += appended_bytes
        if (self._sticky_bytes >= self._sticky_batch_bytes and switch_allowed) \
                or self._sticky_bytes >= 2 * self._sticky_batch_bytes:
            self._sticky = self._rng.getrandbits(31) % self.partitions
            self._sticky_bytes = 0


class ReentrantLock(_thread.RLock):  # type: ignore[misc]  # final in typeshed, not in CPython
    """A re-entrant lock with ``threading.RLock``'s behaviour (this twin *is* the C RLock of
    CPython's ``_thread``): the thread holding it may take it again and must release it as
    often; ``acquire(blocking=True, timeout=-1)``, ``release()`` (RuntimeError when the caller
    does not hold it), ``with lock:``, and what ``threading.Condition`` uses. The producer's
    lock: the :class:`Sender` owns one (:attr:`Sender.lock`). Thread-safe."""

    __slots__ = ()


class Sender:
    """The common case of ``Producer.send`` in one call: a bytes (or None) key and value, no
    explicit partition, timestamp or headers, a topic the producer has seen. It hashes the key
    (or takes the sticky partition), appends the record to the partition's open batch under
    :attr:`lock`, and returns its :class:`SendFuture`. Everything else (and every error) goes
    to ``fallback``, the producer's full send. :attr:`lock` is a :class:`ReentrantLock` the
    Sender owns and the producer uses as its lock (its other methods and its linger thread
    take it with ``with``), so the one-call path takes it with no Python call.

    ``hooks``: the producer's ``open_batch(tp) -> batch`` (the open batch of ``tp``, opened
    if none; a batch has ``buffer``, a :class:`RecordBuffer`, and ``result``, a
    :class:`BatchResult`), and ``write(batch)``. The future is a :class:`SendFuture`.
    ``enabled`` False sends everything to the fallback (closed, transactional, round robin);
    ``errors_pending`` True (the producer holds errors the full send must check and raise)
    sends the records to the fallback under the lock.
    """

    def __init__(self, *, fallback, open_batch, write,
                 batch_size_bytes: int, max_request_bytes: int, linger_zero: bool):
        self.enabled = True
        self.errors_pending = False
        self._topics: dict = {}
        self.lock = ReentrantLock()
        self._fallback = fallback
        self._open_batch = open_batch
        self._write = write
        self._batch_size_bytes = batch_size_bytes
        self._max_request_bytes = max_request_bytes
        self._linger_zero = linger_zero

    def slots(self, topic: str):
        """The :class:`TopicSlots` of ``topic``, or None."""
        return self._topics.get(topic)

    def set_slots(self, topic: str, slots) -> None:
        """Register (or replace) ``topic``'s slots."""
        self._topics[topic] = slots

    def send(self, topic, value=None, key=None, *, partition=None, timestamp_ms=None,
             headers=None):
        """``Producer.send`` (see there); the common case here, the rest via ``fallback``."""
        if (not self.enabled or partition is not None or timestamp_ms is not None or headers
                or not (key is None or type(key) is bytes)
                or not (value is None or type(value) is bytes)):
            return self._fallback(topic, value, key, partition=partition,
                                  timestamp_ms=timestamp_ms, headers=headers)
        slots = self._topics.get(topic)
        if slots is None:
            return self._fallback(topic, value, key)
        record_bytes = _RECORD_OVERHEAD
        if key is not None:
            record_bytes += len(key)
        elif slots.compacted:
            return self._fallback(topic, value, key)  # raises InvalidRecordError
        if value is not None:
            record_bytes += len(value)
        if record_bytes + RECORD_BATCH_OVERHEAD > self._max_request_bytes:
            return self._fallback(topic, value, key)  # raises RecordTooLargeError
        now_ms = time.time_ns() // 1_000_000
        with self.lock:
            if not self.enabled or self.errors_pending:
                return self._fallback(topic, value, key)
            if key is not None:
                p = partition_for_key(key, slots.partitions)
            else:
                p = slots.keyless_partition()
            batch = slots.batches[p]
            if batch is None or batch.buffer.sealed:
                batch = self._open(slots, p)
            buffer = batch.buffer
            if (buffer.size_bytes + record_bytes > self._batch_size_bytes
                    or buffer.record_count >= _BATCH_RECORDS_MAX):
                self._write(batch)  # Kafka closes the full batch and opens a new one
                batch = self._open(slots, p)
                buffer = batch.buffer
            index = buffer.append(key, value, now_ms)
            future = SendFuture(batch.result, index, topic, p, now_ms)
            full = buffer.size_bytes >= self._batch_size_bytes
            if key is None:
                slots.keyless_appended(record_bytes, full)
            if full or self._linger_zero:
                self._write(batch)
            return future

    def _open(self, slots: TopicSlots, p: int):
        batch = slots.batches[p] = self._open_batch(slots.tps[p])
        return batch
