"""Which partition a record goes to: Kafka's producer partitioners, bit for bit.

A keyed record goes to ``to_positive(murmur2(key)) % num_partitions``
(``BuiltInPartitioner.partitionForKey``), so the same key lands on the same partition here and
in any Kafka client. ``murmur2`` is Kafka's ``Utils.murmur2``: MurmurHash2 with seed
``0x9747b28c`` over the key bytes, read as little-endian 32-bit words, returning a *signed*
32-bit int as Java does; ``to_positive`` clears the sign bit (``n & 0x7fffffff``), which is
not ``abs``. :func:`partitions_for_keys` does the same for many keys at once with numpy.

Keyless records use :class:`StickyPartitioner` (Kafka's ``BuiltInPartitioner``: stay on one
partition until about a batch worth of bytes went there, then move to a random one) or, if
asked, :class:`RoundRobinPartitioner` (Kafka's ``RoundRobinPartitioner``).
"""

from __future__ import annotations

import operator
import random
import threading
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
MURMUR2_R = 24
_MASK32 = 0xFFFFFFFF
#: Kafka's ``batch.size`` default: the bytes a sticky partition takes before switching.
STICKY_BATCH_BYTES_DEFAULT = 16384


def _signed32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2(data)``: a signed 32-bit int (-2**31 .. 2**31-1)."""
    data = bytes(data)
    length = len(data)
    m = MURMUR2_M
    h = (MURMUR2_SEED ^ length) & _MASK32
    words_end = length & ~3
    for i in range(0, words_end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & _MASK32
        k ^= k >> MURMUR2_R
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
    return _signed32(h)


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: ``number & 0x7fffffff`` (maps -1 to 2**31-1, not 1)."""
    return number & 0x7FFFFFFF


def _check_partition_count(num_partitions: int) -> None:
    # operator.index accepts int and numpy's integers without importing numpy: the broker
    # and the store load this module, and numpy alone is ~14 MiB of a broker's memory.
    try:
        valid = not isinstance(num_partitions, bool) and operator.index(num_partitions) >= 1
    except TypeError:
        valid = False
    if not valid:
        raise ValueError(f"num_partitions must be an int >= 1, got {num_partitions!r}")


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null ``key``.

    ``to_positive(murmur2(key)) % num_partitions``. An empty key is a key (it hashes); a
    ``None`` key has no hash partition: use :class:`StickyPartitioner`. Raises ValueError for
    ``num_partitions < 1`` and TypeError for ``key=None``.
    """
    _check_partition_count(num_partitions)
    if key is None:
        raise TypeError("a None key has no hash partition; use StickyPartitioner")
    return to_positive(murmur2(key)) % num_partitions


def _as_data_and_lengths(keys) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    # (data, lengths): a 2-tuple whose second item is not itself a key (a key is bytes-like).
    if isinstance(keys, tuple) and len(keys) == 2 and keys[1] is not None \
            and not isinstance(keys[1], (bytes, bytearray, memoryview)):
        data, lengths = keys
        data = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) \
            else data.reshape(-1).view(np.uint8)
        lengths = np.asarray(lengths, dtype=np.int64)
    else:
        if any(k is None for k in keys):
            raise TypeError("a None key has no hash partition; use StickyPartitioner")
        lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
        data = np.frombuffer(b"".join(bytes(k) for k in keys), dtype=np.uint8)
    if lengths.ndim != 1 or (lengths < 0).any() or int(lengths.sum()) > data.size:
        raise ValueError("lengths must be >= 0 and sum to at most the data size")
    return data, lengths


def murmur2_many(keys: Sequence[bytes] | tuple[object, Sequence[int]]) -> np.ndarray:
    """``murmur2`` of many keys at once: an int32 array, element ``i`` = ``murmur2(keys[i])``.

    ``keys`` is a sequence of bytes-like keys, or ``(data, lengths)``: the keys concatenated in
    one buffer (bytes, or any uint8 buffer or numpy array) and their lengths, so no per-key
    objects are needed. Works a 4-byte word column at a time over all keys still that long,
    so the cost is about (longest key / 4) numpy passes. Raises TypeError for a None key.
    """
    import numpy as np

    data, lengths = _as_data_and_lengths(keys)
    count = lengths.size
    if count == 0:
        return np.zeros(0, dtype=np.int32)
    starts = np.zeros(count, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    # Longest keys first, so the keys that still have word w are a prefix of the order.
    order = np.argsort(-lengths, kind="stable")
    lengths_s, starts_s = lengths[order], starts[order]
    words_s = lengths_s // 4
    m = np.uint32(MURMUR2_M)
    with np.errstate(over="ignore"):
        h = (np.uint32(MURMUR2_SEED) ^ lengths_s.astype(np.uint32)).astype(np.uint32)
        # active_counts[w]: how many keys have more than w whole words (a prefix of order).
        max_words = int(words_s[0])
        active_counts = _prefix_counts(words_s, max_words)
        for w in range(max_words):
            n = int(active_counts[w])
            base = starts_s[:n] + 4 * w
            k = (data[base].astype(np.uint32)
                 | (data[base + 1].astype(np.uint32) << np.uint32(8))
                 | (data[base + 2].astype(np.uint32) << np.uint32(16))
                 | (data[base + 3].astype(np.uint32) << np.uint32(24)))
            k = k * m
            k ^= k >> np.uint32(MURMUR2_R)
            k = k * m
            h[:n] = (h[:n] * m) ^ k
        tails = lengths_s & 3
        tail_base = starts_s + (lengths_s & ~3)
        for offset, shift in ((2, 16), (1, 8), (0, 0)):
            rows = np.nonzero(tails > offset)[0]
            if rows.size:
                h[rows] ^= data[tail_base[rows] + offset].astype(np.uint32) << np.uint32(shift)
        rows = np.nonzero(tails >= 1)[0]
        h[rows] = h[rows] * m
        h ^= h >> np.uint32(13)
        h = h * m
        h ^= h >> np.uint32(15)
    out = np.empty(count, dtype=np.uint32)
    out[order] = h
    return out.view(np.int32)


def _prefix_counts(words_sorted_desc: np.ndarray, max_words: int) -> np.ndarray:
    """For w in 0..max_words-1, how many entries of the descending array exceed w."""
    import numpy as np

    ascending = words_sorted_desc[::-1]
    return ascending.size - np.searchsorted(ascending, np.arange(max_words), side="right")


def partitions_for_keys(keys, num_partitions: int) -> np.ndarray:
    """:func:`partition_for_key` for many keys (same forms as :func:`murmur2_many`): int32."""
    import numpy as np

    _check_partition_count(num_partitions)
    hashes = murmur2_many(keys).view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (hashes % np.uint32(num_partitions)).astype(np.int32)


class StickyPartitioner:
    """Kafka's partitioner for keyless records (``BuiltInPartitioner``, KIP-794): sticky.

    All keyless records of one topic go to the current sticky partition; after at least
    ``sticky_batch_bytes`` (Kafka: ``batch.size``, 16384) went to it *and* the caller allows
    a switch (its batch is full or sent), or after twice that regardless, the next partition
    is drawn at random (``to_positive(random int) % partitions``) from ``available``
    partitions if any were given, else from all. The draw may repeat the same partition, as
    in Kafka. Adaptive (load-weighted) choice is not implemented.

    Use one instance per topic. Thread-safe: a lock guards the state.
    """

    def __init__(self, num_partitions: int, *, sticky_batch_bytes: int = STICKY_BATCH_BYTES_DEFAULT,
                 rng: random.Random | None = None):
        """``rng`` makes the draws reproducible in tests; default: a fresh ``random.Random``."""
        _check_partition_count(num_partitions)
        if sticky_batch_bytes < 1:
            raise ValueError(f"sticky_batch_bytes must be >= 1, got {sticky_batch_bytes}")
        self.num_partitions = num_partitions
        self.sticky_batch_bytes = sticky_batch_bytes
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._current: int | None = None
        self._produced_bytes = 0

    def partition(self, available: Sequence[int] | None = None) -> int:
        """The partition for the next keyless record (draws one if there is none yet)."""
        with self._lock:
            if self._current is None:
                self._current = self._next_partition(available)
                self._produced_bytes = 0
            return self._current

    def record_appended(self, appended_bytes: int, *, switch_allowed: bool = True,
                        available: Sequence[int] | None = None) -> None:
        """Count ``appended_bytes`` written to the sticky partition and maybe move on.

        ``switch_allowed`` is Kafka's ``enableSwitch``: pass False while the partition's batch
        is neither full nor sent, so that a switch does not leave a small fractional batch.
        """
        with self._lock:
            if self._current is None:
                return
            self._produced_bytes += appended_bytes
            if (self._produced_bytes >= self.sticky_batch_bytes and switch_allowed) \
                    or self._produced_bytes >= 2 * self.sticky_batch_bytes:
                self._current = self._next_partition(available)
                self._produced_bytes = 0

    def _next_partition(self, available: Sequence[int] | None) -> int:
        draw = self._rng.getrandbits(31)  # Utils.toPositive(nextInt())
        if available:
            return int(available[draw % len(available)])
        return draw % self.num_partitions


class RoundRobinPartitioner:
    """Kafka's ``RoundRobinPartitioner``: every record, keyed or not, to the next partition.

    A counter starting at 0 picks ``available[counter % len(available)]`` when ``available``
    partitions are given, else ``counter % num_partitions``. Keys are ignored, so records of
    one key spread over partitions. Thread-safe.
    """

    def __init__(self, num_partitions: int):
        """Start at partition 0 of ``num_partitions``."""
        _check_partition_count(num_partitions)
        self.num_partitions = num_partitions
        self._counter = 0
        self._lock = threading.Lock()

    def partition(self, available: Sequence[int] | None = None) -> int:
        """The partition for the next record."""
        with self._lock:
            value = to_positive(self._counter)
            self._counter = (self._counter + 1) & 0xFFFFFFFF  # an int32 counter wraps
        if available:
            return int(available[value % len(available)])
        return value % self.num_partitions
