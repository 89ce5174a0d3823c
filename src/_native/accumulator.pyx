# cython: boundscheck=False, wraparound=False, cdivision=True
"""The producer's record accumulator: Kafka's murmur2 and one partition's open batch, in C.

``murmur2(key)`` is Kafka's ``Utils.murmur2`` (seed 0x9747b28c, little-endian words, a signed
32-bit result); ``partition_for_key(key, n)`` is ``(murmur2(key) & 0x7fffffff) % n``, Kafka's
``BuiltInPartitioner.partitionForKey``.

:class:`RecordBuffer` holds the records of one open batch as columns: the values and the keys
concatenated into two growing C buffers with their lengths (-1: null) and one int64
timestamp per record, plus Kafka's size estimate of the batch before compression. One
:meth:`RecordBuffer.append` per record copies the bytes (no per-record Python object is kept);
:meth:`RecordBuffer.columns` hands a range of records to ``Log.append_batch`` in the
``(data, lengths)`` form ``encode_batch`` takes, so the batch is encoded once, in C.
The pure twin is :mod:`seglog.pure.accumulator`: same names, same columns, same bytes.

:class:`SendFuture` is the pending result of one ``Producer.send``, a C object made by the
:class:`Sender` without a Python ``__init__``; the futures of one batch share its
:class:`BatchResult` (the parts' first offsets and errors, one ``threading.Event``), so
completing a batch touches no future.

Not thread-safe, except the futures and batch results: the Producer calls the rest under its
lock.
"""

from cpython.buffer cimport PyBuffer_FillInfo
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint32_t
from cpython.pythread cimport (
    NOWAIT_LOCK, PY_LOCK_ACQUIRED, PY_LOCK_INTR, PyLockStatus, PyThread_allocate_lock,
    PyThread_acquire_lock, PyThread_free_lock, PyThread_release_lock, PyThread_type_lock,
)
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC, CLOCK_REALTIME
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy


cimport cython

from seglog.arguments import check_optional_int_argument as _check_optional_int_argument
from seglog.errors import InvalidRecordError as _InvalidRecordError
from seglog.format import MAX_RECORD_OVERHEAD as _MAX_RECORD_OVERHEAD
from seglog.format import RECORD_BATCH_OVERHEAD as _RECORD_BATCH_OVERHEAD
from seglog.types import RecordMetadata as _RecordMetadata
from threading import Event as _Event

cdef enum:
    MURMUR2_SEED = 0x9747b28c
    MURMUR2_M = 0x5bd1e995
    # Kafka's estimate per record: at most 21 bytes of overhead + the key, value and header
    # count varints (5 bytes each at most).
    VARINTS_BYTES = 15

cdef char* _EMPTY = b""  # what an empty column exports (never NULL)
cdef int64_t _RECORD_OVERHEAD = _MAX_RECORD_OVERHEAD + VARINTS_BYTES
cdef int64_t _BATCH_OVERHEAD = _RECORD_BATCH_OVERHEAD
cdef enum:
    # Most records in one batch (the Producer's BATCH_RECORDS_MAX).
    BATCH_RECORDS_MAX = 1 << 20


cdef int32_t _murmur2(const unsigned char* data, Py_ssize_t length) noexcept nogil:
    cdef uint32_t m = MURMUR2_M
    cdef uint32_t h = <uint32_t>MURMUR2_SEED ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i
    cdef Py_ssize_t words_end = length & ~(<Py_ssize_t>3)
    cdef Py_ssize_t tail = length & 3
    for i in range(0, words_end, 4):
        k = (<uint32_t>data[i] | (<uint32_t>data[i + 1] << 8) | (<uint32_t>data[i + 2] << 16)
             | (<uint32_t>data[i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    # Java's switch falls through 3 -> 2 -> 1; only case 1 multiplies.
    if tail == 3:
        h ^= <uint32_t>data[words_end + 2] << 16
    if tail >= 2:
        h ^= <uint32_t>data[words_end + 1] << 8
    if tail >= 1:
        h ^= <uint32_t>data[words_end]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


cdef inline int32_t _hash(object data) except? -1:
    cdef const unsigned char[::1] view
    if PyBytes_CheckExact(data):
        return _murmur2(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    view = memoryview(data).cast("B")
    if view.shape[0] == 0:
        return _murmur2(<const unsigned char*>b"", 0)
    return _murmur2(&view[0], view.shape[0])


def murmur2(data) -> int:
    """Kafka's ``Utils.murmur2(data)`` of any bytes-like ``data``: a signed 32-bit int."""
    return _hash(data)


def partition_for_key(key, Py_ssize_t num_partitions) -> int:
    """``(murmur2(key) & 0x7fffffff) % num_partitions``; ValueError for ``num_partitions < 1``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be an int >= 1, got {num_partitions}")
    return (<uint32_t>_hash(key) & 0x7fffffff) % <uint32_t>num_partitions


cdef inline int _grow(void** buf, Py_ssize_t* capacity, Py_ssize_t needed,
                      Py_ssize_t item_bytes) except -1:
    cdef Py_ssize_t new_capacity = capacity[0] * 2 if capacity[0] else 64
    cdef void* grown
    while new_capacity < needed:
        new_capacity *= 2
    grown = realloc(buf[0], new_capacity * item_bytes)
    if grown == NULL:
        raise MemoryError()
    buf[0] = grown
    capacity[0] = new_capacity
    return 0


cdef class _Column:
    """One byte column (values or keys): concatenated bytes plus start and length per record.

    It exports its bytes read-only (the buffer protocol) so that ``RecordBuffer.columns``
    hands them to ``encode_batch`` without a copy; while a view is exported it refuses to
    grow (a realloc would move the memory under the view)."""
    cdef char* data
    cdef Py_ssize_t data_bytes
    cdef Py_ssize_t data_capacity
    cdef Py_ssize_t exports

    def __dealloc__(self):
        free(self.data)

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        PyBuffer_FillInfo(buffer, self, self.data if self.data != NULL else _EMPTY,
                          self.data_bytes, 1, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* buffer):
        self.exports -= 1

    cdef inline int put(self, object item, const char* what) except -2:
        """Copy ``item`` (bytes-like or None); returns its length (-1 for None)."""
        cdef const unsigned char[::1] view
        cdef const char* source
        cdef Py_ssize_t length
        if item is None:
            return -1
        if PyBytes_CheckExact(item):
            source = PyBytes_AS_STRING(item)
            length = PyBytes_GET_SIZE(item)
        else:
            if isinstance(item, str):
                raise _InvalidRecordError(f"the record {what.decode()} must be bytes-like or "
                                         "None, got str (encode it first)")
            try:
                view = memoryview(item).cast("B")
            except TypeError:
                raise _InvalidRecordError(f"the record {what.decode()} must be bytes-like or "
                                         f"None, got {type(item).__name__}") from None
            length = view.shape[0]
            source = <const char*>&view[0] if length else NULL
        if self.data_bytes + length > self.data_capacity:
            if self.exports:
                raise BufferError("the batch's columns are exported (being encoded): the "
                                  "buffer cannot grow")
            _grow(<void**>&self.data, &self.data_capacity, self.data_bytes + length, 1)
        if length:
            memcpy(self.data + self.data_bytes, source, length)
        self.data_bytes += length
        return <int>length


cdef class RecordBuffer:
    """The records of one open batch as columns (see the module docstring).

    ``RecordBuffer()``; :meth:`append` adds a record, :attr:`record_count` and
    :attr:`size_bytes` (Kafka's producer estimate: 61 bytes per batch, plus per record 36
    bytes of overhead, the key, the value and ``extra_bytes`` for headers) tell when to close
    it, :meth:`columns` gives a range of records to encode. Not thread-safe.
    """
    cdef _Column _values
    cdef _Column _keys
    cdef int64_t* _lengths  # per record: value length, key length, timestamp, value/key start
    cdef Py_ssize_t _capacity
    cdef readonly Py_ssize_t record_count
    cdef readonly int64_t size_bytes
    cdef readonly bint has_keys
    cdef readonly bint sealed

    def __cinit__(self):
        self._values = _Column()
        self._keys = _Column()
        self.size_bytes = _BATCH_OVERHEAD

    def __dealloc__(self):
        free(self._lengths)

    def seal(self) -> None:
        """Close the buffer to appends (its batch is being written); :meth:`append` then
        raises ValueError."""
        self.sealed = True

    def append(self, key, value, int64_t timestamp_ms, int64_t extra_bytes=0) -> int:
        """Copy one record in; returns its index in the batch. ``key``/``value``: bytes-like
        or None (InvalidRecordError otherwise, nothing appended). ``extra_bytes``: the
        headers' share of the size estimate (the caller keeps the headers). ValueError once
        sealed."""
        return self._append(key, value, timestamp_ms, extra_bytes)

    cdef Py_ssize_t _append(self, key, value, int64_t timestamp_ms,
                            int64_t extra_bytes) except -1:
        cdef Py_ssize_t i = self.record_count
        if self.sealed:
            raise ValueError("the batch is sealed: it is being written")
        cdef Py_ssize_t value_start = self._values.data_bytes
        cdef Py_ssize_t key_start = self._keys.data_bytes
        cdef int value_length, key_length
        cdef int64_t* row
        if i >= self._capacity:
            _grow(<void**>&self._lengths, &self._capacity, i + 1, 5 * sizeof(int64_t))
        key_length = self._keys.put(key, b"key")
        try:
            value_length = self._values.put(value, b"value")
        except BaseException:
            self._keys.data_bytes = key_start
            raise
        row = self._lengths + 5 * i
        row[0] = value_length
        row[1] = key_length
        row[2] = timestamp_ms
        row[3] = value_start
        row[4] = key_start
        if key_length >= 0:
            self.has_keys = True
        self.size_bytes += (_RECORD_OVERHEAD + (value_length if value_length > 0 else 0)
                            + (key_length if key_length > 0 else 0) + extra_bytes)
        self.record_count = i + 1
        return i

    def columns(self, Py_ssize_t start=0, Py_ssize_t end=-1):
        """Records ``start .. end-1`` (end -1: all) as ``(values, keys, timestamps_ms)``:
        values and keys in the ``(data, lengths)`` form of ``encode_batch`` (keys None when
        every key in the buffer is null), timestamps an int64 array. The data are read-only
        memoryviews of the buffer's own memory (no copy); while one is alive an append that
        needs more room raises BufferError (the producer seals a batch before taking its
        columns)."""
        if end < 0:
            end = self.record_count
        if not 0 <= start <= end <= self.record_count:
            raise IndexError(f"records {start}..{end} of {self.record_count}")
        import numpy as _np  # on first use: the broker loads this module, not numpy
        table = _np.empty((end - start, 5), dtype=_np.int64)
        cdef int64_t[:, ::1] rows = table
        if end > start:
            memcpy(&rows[0, 0], self._lengths + 5 * start, (end - start) * 5 * sizeof(int64_t))
        values = (self._slice(self._values, start, end, 3, 0), table[:, 0].copy())
        keys = ((self._slice(self._keys, start, end, 4, 1), table[:, 1].copy())
                if self.has_keys else None)
        return values, keys, table[:, 2].copy()

    cdef object _slice(self, _Column column, Py_ssize_t start, Py_ssize_t end, int start_field,
                       int length_field):
        # A read-only view of the column's own memory, no copy: encode_batch reads the
        # records where append put them.
        cdef Py_ssize_t first, last
        if start == end:
            return b""
        first = self._lengths[5 * start + start_field]
        last = (self._lengths[5 * (end - 1) + start_field]
                + max(self._lengths[5 * (end - 1) + length_field], 0))
        return memoryview(column)[first:last]

    def __len__(self):
        return self.record_count


def _part_start(part):
    return part[0]


@cython.final
cdef class BatchResult:
    """The outcome of one batch, shared by its records' futures (one Event per batch, not
    per record). A batch is usually written whole; one the log refuses as too large is split
    and written in parts, so the outcome is a list of parts ``(first record index, first
    offset or -1, error or None)``, given once by :meth:`complete`. Thread-safe: the parts
    are set before the event, and never change afterwards."""
    cdef readonly object event
    cdef readonly bint completed
    cdef list _parts

    def __cinit__(self):
        self.event = _Event()
        self._parts = []

    def complete(self, parts) -> None:
        """Give the outcome (parts in any order) and wake every waiting future."""
        self._parts = sorted(parts, key=_part_start)
        self.completed = True
        self.event.set()

    cdef tuple _part(self, Py_ssize_t index):
        # bisect_right over the parts' first indexes, then the part before (as Python's
        # parts[i - 1], a -1 wraps to the last part).
        cdef list parts = self._parts
        cdef Py_ssize_t n = len(parts)
        cdef Py_ssize_t low = 0, high = n, middle
        if n == 1:
            return <tuple>parts[0]
        while low < high:
            middle = (low + high) // 2
            if index < <Py_ssize_t>(<tuple>parts[middle])[0]:
                high = middle
            else:
                low = middle + 1
        if n == 0:
            raise IndexError("the batch has no outcome yet")
        return <tuple>parts[low - 1 if low else n - 1]

    def offset_of(self, Py_ssize_t index) -> int:
        """The offset record ``index`` got; raises the error of its part."""
        cdef tuple part = self._part(index)
        if part[2] is not None:
            raise part[2]
        return <int64_t>part[1] + (index - <Py_ssize_t>part[0])

    def error_of(self, Py_ssize_t index):
        """The error that failed record ``index``, or None."""
        return self._part(index)[2]


@cython.final
@cython.freelist(64)
cdef class SendFuture:
    """The pending result of one ``Producer.send``.

    ``topic``, ``partition`` and ``timestamp_ms`` are known at once; :meth:`result` waits
    until the record's batch is written and returns its ``RecordMetadata``, or raises the
    error that failed the batch. Thread-safe. ``SendFuture(result, index, topic, partition,
    timestamp_ms)``: record ``index`` of the batch whose :class:`BatchResult` is ``result``.
    """
    cdef readonly object topic
    cdef readonly Py_ssize_t partition
    cdef readonly int64_t timestamp_ms
    cdef BatchResult _result
    cdef Py_ssize_t _index  # the record's position in its batch

    def __init__(self, BatchResult result not None, Py_ssize_t index, topic,
                 Py_ssize_t partition, int64_t timestamp_ms):
        self._result = result
        self._index = index
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
        cdef BatchResult result = self._result
        if timeout_ms is not None:
            timeout_ms = _check_optional_int_argument("timeout_ms", timeout_ms, minimum=0)
        if not result.completed:
            if not result.event.wait(None if timeout_ms is None else timeout_ms / 1000):
                raise TimeoutError(f"record to {self.topic}-{self.partition} not written "
                                   f"after {timeout_ms} ms")
        return _RecordMetadata(self.topic, self.partition, result.offset_of(self._index),
                               self.timestamp_ms)

    @property
    def offset(self):
        """The record's offset (waits for the batch, as :meth:`result`)."""
        return self.result().offset

    def __repr__(self):
        cdef BatchResult result = self._result
        state = ("pending" if not result.completed else "failed"
                 if result.error_of(self._index) else f"offset={result.offset_of(self._index)}")
        return f"SendFuture({self.topic}-{self.partition}, {state})"


cdef inline SendFuture _new_future(BatchResult result, Py_ssize_t index, object topic,
                                   Py_ssize_t partition, int64_t timestamp_ms):
    # tp_new straight from the freelist: no argument tuple, no __init__.
    cdef SendFuture future = SendFuture.__new__(SendFuture)
    future._result = result
    future._index = index
    future.topic = topic
    future.partition = partition
    future.timestamp_ms = timestamp_ms
    return future


cdef inline int64_t _now_ms() noexcept nogil:
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef class TopicSlots:
    """One topic as a :class:`Sender` sees it: the partition count, whether it is compacted,
    its TopicPartitions, the producer's open batch per partition (as last seen; a sealed
    buffer means it was written) and the sticky partition of keyless records (Kafka's
    BuiltInPartitioner: stay until about ``sticky_batch_bytes`` went there and the batch is
    full, or twice that regardless, then draw ``rng.getrandbits(31) % partitions``)."""
    cdef readonly object topic
    cdef readonly Py_ssize_t partitions
    cdef readonly bint compacted
    cdef readonly tuple tps
    cdef list batches
    cdef list buffers
    cdef list results
    cdef Py_ssize_t sticky
    cdef int64_t sticky_bytes
    cdef int64_t sticky_batch_bytes
    cdef object rng

    def __init__(self, topic, Py_ssize_t partitions, bint compacted, tuple tps, *,
                 int64_t sticky_batch_bytes, rng):
        self.topic = topic
        self.partitions = partitions
        self.compacted = compacted
        self.tps = tps
        self.batches = [None] * partitions
        self.buffers = [None] * partitions
        self.results = [None] * partitions
        self.sticky = -1
        self.sticky_batch_bytes = sticky_batch_bytes
        self.rng = rng

    def keyless_partition(self) -> int:
        """The sticky partition for the next keyless record (drawn when there is none)."""
        if self.sticky < 0:
            self.sticky = self.rng.getrandbits(31) % self.partitions
            self.sticky_bytes = 0
        return self.sticky

    def keyless_appended(self, int64_t appended_bytes, bint switch_allowed) -> None:
        """Count ``appended_bytes`` on the sticky partition; move on when it is time."""
        self._keyless_appended(appended_bytes, switch_allowed)

    cdef inline int _keyless_appended(self, int64_t appended_bytes,
                                      bint switch_allowed) except -1:
        if self.sticky < 0:
            return 0
        self.sticky_bytes += appended_bytes
        if ((self.sticky_bytes >= self.sticky_batch_bytes and switch_allowed)
                or self.sticky_bytes >= 2 * self.sticky_batch_bytes):
            self.sticky = self.rng.getrandbits(31) % self.partitions
            self.sticky_bytes = 0
        return 0


cdef extern from "pythread.h":
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock lock, long long microseconds,
                                             int intr_flag) nogil
    unsigned long _thread_ident "PyThread_get_thread_ident" () nogil


cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1


@cython.final
cdef class ReentrantLock:
    """A re-entrant lock in C, with ``threading.RLock``'s behaviour: the thread holding it may
    take it again and must release it as often; ``acquire(blocking=True, timeout=-1)``,
    ``release()`` (RuntimeError when the caller does not hold it), ``with lock:``, and the
    methods ``threading.Condition`` uses, so a Condition can wait on it.

    The producer's lock: the :class:`Sender` owns one (:attr:`Sender.lock`) and takes it in C
    with no method call; the producer's other methods and its linger thread take the same
    lock with ``with``. A blocked acquire releases the GIL and still runs signal handlers
    (KeyboardInterrupt). Thread-safe; owner, count and the rest change only under the GIL.

    **Parking.** The OS mutex is released only when a thread is blocked on it: a release
    with no thread waiting leaves the mutex taken but the lock free ("parked"), and the next
    acquire, by any thread, takes the lock without touching the mutex. Uncontended, as a
    producer used by one thread is, a send then costs no atomic operation on the mutex (a
    ``sem_trywait`` and a ``sem_post`` before). Every decision is made under the GIL, which
    a thread holds from its look at the state to its change of it.
    """
    cdef PyThread_type_lock _mutex
    cdef unsigned long _owner
    cdef Py_ssize_t _count
    cdef bint _held          # the mutex is taken: by the owner, or parked (count 0)
    cdef Py_ssize_t _waiters  # threads blocked on the mutex (or about to be)

    def __cinit__(self):
        self._mutex = PyThread_allocate_lock()
        if self._mutex == NULL:
            raise MemoryError()

    def __dealloc__(self):
        if self._mutex != NULL:
            if self._held:
                PyThread_release_lock(self._mutex)
            PyThread_free_lock(self._mutex)

    cdef inline int take(self) except -1:
        cdef unsigned long me = _thread_ident()
        if self._count:
            if self._owner == me:
                self._count += 1
                return 0
        elif self._held or PyThread_acquire_lock(self._mutex, NOWAIT_LOCK):
            self._held = True  # parked, or just taken: ours without waiting
            self._owner = me
            self._count = 1
            return 0
        self._block(-1)
        self._owner = me
        self._count = 1
        return 0

    cdef inline int give(self) except -1:
        if not self._count or self._owner != _thread_ident():
            raise RuntimeError("cannot release un-acquired lock")
        self._count -= 1
        if not self._count:
            self._owner = 0
            self._unpark()
        return 0

    cdef inline void _unpark(self) noexcept:
        # Free now: hand the mutex to a blocked thread, or keep it parked.
        if self._waiters:
            self._held = False
            PyThread_release_lock(self._mutex)

    cdef bint _block(self, long long timeout_us) except -1:
        # Wait as a counted waiter until the mutex is ours (True, and held) or timeout_us
        # passed (False; -1: no limit).
        cdef bint got
        self._waiters += 1
        try:
            got = self._wait(timeout_us)
        finally:
            self._waiters -= 1
        if got:
            self._held = True
        return got

    cdef bint _wait(self, long long timeout_us) except -1:
        # Block with the GIL released until the mutex is ours (True) or timeout_us passed
        # (False; -1: no limit). An interrupted wait runs the signal handlers, then goes on.
        cdef PyLockStatus status
        cdef long long remaining_us = timeout_us
        cdef int64_t deadline_ns = 0
        cdef timespec now
        if timeout_us > 0:
            clock_gettime(CLOCK_MONOTONIC, &now)
            deadline_ns = <int64_t>now.tv_sec * 1000000000 + now.tv_nsec + timeout_us * 1000
        while True:
            with nogil:
                status = PyThread_acquire_lock_timed(self._mutex, remaining_us, 1)
            if status == PY_LOCK_ACQUIRED:
                return True
            if status != PY_LOCK_INTR:
                return False
            PyErr_CheckSignals()
            if timeout_us > 0:
                clock_gettime(CLOCK_MONOTONIC, &now)
                remaining_us = (deadline_ns - (<int64_t>now.tv_sec * 1000000000
                                               + now.tv_nsec)) // 1000
                if remaining_us < 0:
                    remaining_us = 0

    def acquire(self, bint blocking=True, double timeout=-1) -> bool:
        """Take the lock (again, if this thread holds it): True once held; False when
        ``blocking`` is False and another thread holds it, or ``timeout`` seconds passed
        (-1: no limit). ValueError for a timeout with ``blocking=False`` or below 0 but -1."""
        cdef unsigned long me = _thread_ident()
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        if self._count:
            if self._owner == me:
                self._count += 1
                return True
        elif self._held or PyThread_acquire_lock(self._mutex, NOWAIT_LOCK):
            self._held = True
            self._owner = me
            self._count = 1
            return True
        if not blocking:
            return False
        if not self._block(-1 if timeout == -1 else <long long>(timeout * 1e6)):
            return False
        self._owner = me
        self._count = 1
        return True

    def release(self) -> None:
        """Give one hold back (the lock is free after as many releases as acquires);
        RuntimeError when this thread does not hold it."""
        self.give()

    def __enter__(self):
        self.take()
        return True

    def __exit__(self, exc_type, exc, traceback):
        self.give()

    # threading.Condition's protocol for a re-entrant lock (as _thread.RLock's).
    def _is_owned(self):
        return self._count > 0 and self._owner == _thread_ident()

    def _release_save(self):
        if not self._count:
            raise RuntimeError("cannot release un-acquired lock")
        state = (self._count, self._owner)
        self._count = 0
        self._owner = 0
        self._unpark()
        return state

    def _acquire_restore(self, state):
        cdef Py_ssize_t count = state[0]
        cdef unsigned long owner = state[1]
        if self._count or not (self._held or PyThread_acquire_lock(self._mutex, NOWAIT_LOCK)):
            self._block(-1)
        self._held = True
        self._owner = owner
        self._count = count

    def __repr__(self):
        return (f"<ReentrantLock {'locked' if self._count else 'unlocked'} owner={self._owner} "
                f"count={self._count}>")


cdef class Sender:
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
    cdef public bint enabled
    cdef public bint errors_pending
    cdef dict topics
    cdef readonly ReentrantLock lock
    cdef object fallback
    cdef object open_batch
    cdef object write
    cdef int64_t batch_size_bytes
    cdef int64_t max_request_bytes
    cdef bint linger_zero

    def __init__(self, *, fallback, open_batch, write,
                 int64_t batch_size_bytes, int64_t max_request_bytes, bint linger_zero):
        self.enabled = True
        self.topics = {}
        self.lock = ReentrantLock()
        self.fallback = fallback
        self.open_batch = open_batch
        self.write = write
        self.batch_size_bytes = batch_size_bytes
        self.max_request_bytes = max_request_bytes
        self.linger_zero = linger_zero

    def slots(self, topic: str):
        """The :class:`TopicSlots` of ``topic``, or None."""
        return self.topics.get(topic)

    def set_slots(self, topic: str, slots) -> None:
        """Register (or replace) ``topic``'s slots."""
        self.topics[topic] = slots

    def send(self, topic, value=None, key=None, *, partition=None, timestamp_ms=None,
             headers=None):
        """``Producer.send`` (see there); the common case in C, the rest via ``fallback``."""
        cdef TopicSlots slots
        cdef RecordBuffer buffer
        cdef BatchResult result
        cdef SendFuture future
        cdef Py_ssize_t p, index
        cdef int64_t record_bytes, now_ms
        cdef bint full
        if (not self.enabled or partition is not None or timestamp_ms is not None or headers
                or not (key is None or PyBytes_CheckExact(key))
                or not (value is None or PyBytes_CheckExact(value))):
            return self.fallback(topic, value, key, partition=partition,
                                 timestamp_ms=timestamp_ms, headers=headers)
        slots = self.topics.get(topic)
        if slots is None:
            return self.fallback(topic, value, key)
        record_bytes = _RECORD_OVERHEAD
        if key is not None:
            record_bytes += PyBytes_GET_SIZE(key)
        elif slots.compacted:
            return self.fallback(topic, value, key)  # raises InvalidRecordError
        if value is not None:
            record_bytes += PyBytes_GET_SIZE(value)
        if record_bytes + _BATCH_OVERHEAD > self.max_request_bytes:
            return self.fallback(topic, value, key)  # raises RecordTooLargeError
        now_ms = _now_ms()
        self.lock.take()
        try:
            if not self.enabled or self.errors_pending:
                return self.fallback(topic, value, key)
            if key is not None:
                p = (<uint32_t>_murmur2(<const unsigned char*>PyBytes_AS_STRING(key),
                                        PyBytes_GET_SIZE(key)) & 0x7fffffff) % \
                    <uint32_t>slots.partitions
            else:
                p = slots.keyless_partition()
            batch = slots.batches[p]
            buffer = slots.buffers[p]
            if batch is None or buffer.sealed:
                batch = self._open(slots, p)
                buffer = slots.buffers[p]
            if (buffer.size_bytes + record_bytes > self.batch_size_bytes
                    or buffer.record_count >= BATCH_RECORDS_MAX):
                self.write(batch)  # Kafka closes the full batch and opens a new one
                batch = self._open(slots, p)
                buffer = slots.buffers[p]
            result = slots.results[p]
            index = buffer._append(key, value, now_ms, 0)
            future = _new_future(result, index, topic, p, now_ms)
            full = buffer.size_bytes >= self.batch_size_bytes
            if key is None:
                slots._keyless_appended(record_bytes, full)
            if full or self.linger_zero:
                self.write(batch)
            return future
        finally:
            self.lock.give()

    cdef object _open(self, TopicSlots slots, Py_ssize_t p):
        batch = self.open_batch(slots.tps[p])
        slots.batches[p] = batch
        slots.buffers[p] = <RecordBuffer?>batch.buffer
        slots.results[p] = <BatchResult?>batch.result
        return batch
