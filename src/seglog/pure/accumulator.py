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
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidRecordError
from ..format import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
#: Kafka's per-record estimate: 21 bytes of overhead + key, value and header-count varints.
_RECORD_OVERHEAD = MAX_RECORD_OVERHEAD + 15


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

    @property
    def record_count(self) -> int:
        """Records appended so far."""
        return len(self._values)

    def append(self, key, value, timestamp_ms: int, extra_bytes: int = 0) -> int:
        """Copy one record in; returns its index in the batch. ``key``/``value``: bytes-like
        or None (InvalidRecordError otherwise, nothing appended). ``extra_bytes``: the
        headers' share of the size estimate (the caller keeps the headers)."""
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
