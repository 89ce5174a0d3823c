"""The cleaner's offset map: record key -> latest offset, in a fixed amount of memory.

This is Kafka's ``SkimpyOffsetMap`` with a 64-bit hash instead of MD5:
an open-addressing hash table of ``(hash, offset)`` slots held in two numpy arrays (a
``uint64`` array of key hashes and an ``int64`` array of offsets, 16 bytes per slot) sized once
from ``memory_bytes_max`` and never grown. The cleaner fills it from the dirty section of a log
(``put``/``put_batch_keys``) and then asks, for every record it recopies, whether the record is
the latest for its key (``get``).

Design (identical in ``seglog._native.keymap``; a test compares the two tables slot by slot):

* **Hash**: XXH64 (seed 0) of the key bytes, ``xxhash.xxh64_intdigest`` here, a small C
  implementation (``src/_native/xxh64.h``) in the native twin.
* **Collisions**: only the hash is stored, never the key, so two different keys with the same
  64-bit hash are treated as one key; the older record of the two would be dropped. Kafka
  accepts the same risk with MD5 (a 128-bit hash): with n keys the chance of any collision is
  about ``n**2 / 2**65`` (for the 5 million keys a 128 MiB map holds, about 7e-7).
* **Slots**: the largest prime <= ``memory_bytes_max // 16``, so that double hashing visits
  every slot. An empty slot has offset -1 (offsets are never negative), so any hash value,
  0 included, is a valid key hash.
* **Probing**: double hashing. Probe ``i`` looks at ``(h % slots + i * step) % slots`` with
  ``step = 1 + (h >> 32) % (slots - 1)``: unlike Kafka's linear tail it does not cluster at
  the 0.9 load factor (about 2.6 probes for a hit and 10 for a miss on average).
* **Capacity**: at most ``max_entries = slots * 9 // 10`` keys (Kafka's
  ``log.cleaner.io.buffer.load.factor`` of 0.9). ``put`` of a *new* key into a map holding
  ``max_entries`` keys returns False and changes nothing; updating a key already present always
  succeeds. The cleaner stops building the map at the first False (a partial map: it cleans
  up to ``latest_offset`` and the next pass continues), so every pass makes progress as long as
  ``max_entries >= 1``, which the constructor requires.

Not thread-safe: one cleaner pass owns one map.
"""

from __future__ import annotations

import numpy as np
import xxhash

from ..errors import CorruptRecordError
from ..format import CONTROL_FLAG_MASK, REASON_TRUNCATED, RECORD_BATCH_OVERHEAD

#: Bytes of memory one slot takes: a uint64 hash and an int64 offset.
SLOT_BYTES = 16
#: Kafka's dedupe buffer load factor, as the integer fraction the map fills up to.
LOAD_FACTOR_NUMERATOR = 9
LOAD_FACTOR_DENOMINATOR = 10
#: Offset stored in an empty slot.
EMPTY_OFFSET = -1

_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)  # deterministic below 3.3e24


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for any n < 3.3e24 (all slot counts)."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def slots_for_memory(memory_bytes_max: int) -> int:
    """Slot count of a map given ``memory_bytes_max`` bytes: the largest prime <=
    ``memory_bytes_max // 16`` (0 when there is none, i.e. fewer than 32 bytes)."""
    n = int(memory_bytes_max) // SLOT_BYTES
    while n >= 2 and not _is_prime(n):  # prime gaps below 2**64 are < 1600: bounded
        n -= 1
    return n if n >= 2 else 0


def max_entries_for_slots(slots: int) -> int:
    """How many keys a map of ``slots`` slots holds: ``slots * 0.9`` rounded down."""
    return slots * LOAD_FACTOR_NUMERATOR // LOAD_FACTOR_DENOMINATOR


def key_hash(key) -> int:
    """The 64-bit hash the map stores for ``key`` (any bytes-like): XXH64, seed 0."""
    return xxhash.xxh64_intdigest(key)


class KeyMap:
    """A fixed-size map from record key to offset (see the module docstring).

    ``KeyMap(memory_bytes_max)`` allocates ``slots * 16`` bytes (<= ``memory_bytes_max``) at
    once. Raises ValueError when ``memory_bytes_max`` is too small to hold one key (fewer than
    32 bytes). Attributes: ``memory_bytes_max``, ``slots``, ``max_entries``, ``size`` (keys
    held), ``latest_offset`` (the last offset put, or forced by ``update_latest_offset``; -1
    when none), ``lookups`` and ``probes`` (counters for the collision rate, reset by
    ``clear``), ``hashes`` and ``offsets`` (the numpy arrays themselves; read them, never
    write them). Not thread-safe.
    """

    def __init__(self, memory_bytes_max: int):
        slots = slots_for_memory(memory_bytes_max)
        if slots < 2 or max_entries_for_slots(slots) < 1:
            raise ValueError(
                f"memory_bytes_max={memory_bytes_max} is too small for a key map: "
                f"at least {2 * SLOT_BYTES} bytes are needed"
            )
        self.memory_bytes_max = int(memory_bytes_max)
        self.slots = slots
        self.max_entries = max_entries_for_slots(slots)
        self.hashes = np.zeros(slots, dtype=np.uint64)
        self.offsets = np.full(slots, EMPTY_OFFSET, dtype=np.int64)
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    # --- the table -------------------------------------------------------------------------

    def _find(self, h: int) -> int:
        """Slot holding hash ``h``, or the first empty slot of its probe sequence."""
        slots = self.slots
        position = h % slots
        step = 1 + (h >> 32) % (slots - 1)
        hashes, offsets = self.hashes, self.offsets
        self.lookups += 1
        for _ in range(slots):  # load <= 0.9: an empty slot is always reached
            if offsets[position] == EMPTY_OFFSET or int(hashes[position]) == h:
                return position
            self.probes += 1
            position += step
            if position >= slots:
                position -= slots
        raise AssertionError("key map has no empty slot")  # pragma: no cover

    def put_hash(self, h: int, offset: int) -> bool:
        """``put`` for a key whose hash is ``h`` (see ``key_hash``)."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        position = self._find(h)
        if self.offsets[position] == EMPTY_OFFSET:
            if self.size >= self.max_entries:
                return False
            self.hashes[position] = h
            self.size += 1
        self.offsets[position] = offset
        self.latest_offset = offset
        return True

    def put(self, key, offset: int) -> bool:
        """Record ``offset`` as the latest offset of ``key`` (bytes-like).

        Returns True when stored (a new key, or an update of one present; ``latest_offset``
        becomes ``offset``), False when ``key`` is new and the map already holds
        ``max_entries`` keys (nothing changes). Raises ValueError for a negative offset.
        """
        return self.put_hash(key_hash(key), offset)

    def get(self, key) -> int:
        """The offset stored for ``key`` (bytes-like), or -1 when it is absent."""
        return int(self.offsets[self._find(key_hash(key))])

    def update_latest_offset(self, offset: int) -> None:
        """Force ``latest_offset`` (the cleaner moves it past batches and offset gaps)."""
        self.latest_offset = offset

    def clear(self) -> None:
        """Empty the map (keeps its memory); resets ``latest_offset`` and the counters."""
        self.hashes.fill(0)
        self.offsets.fill(EMPTY_OFFSET)
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    @property
    def utilization(self) -> float:
        """``size / slots``: how full the table is (at most 0.9)."""
        return self.size / self.slots

    def __len__(self) -> int:
        return self.size

    # --- batches ---------------------------------------------------------------------------

    def put_batch_keys(self, data, *, start_offset: int = 0) -> bool:
        """Put every keyed record with ``offset >= start_offset`` of the batch at the start of
        ``data`` (bytes-like holding at least one whole RecordBatch v2; bytes after the first
        batch are ignored), in offset order.

        Control batches put nothing; keyless records are skipped; compressed batches are
        decompressed. Returns True when every such record was put, False when the map filled
        on the way (``latest_offset`` is then the offset of the last record put, so the caller
        can stop exactly there). Does not move ``latest_offset`` past the batch: the cleaner
        does that with ``update_latest_offset``. Raises CorruptRecordError for a truncated
        batch or malformed records (and whatever the codec raises for bad record bytes).
        """
        from .codec import iter_batches  # the codec imports numpy-heavy helpers lazily

        view = memoryview(data).cast("B")
        batch = next(iter(iter_batches(view)), None)
        if batch is None or view.nbytes < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                "put_batch_keys: data does not hold a whole batch", reason=REASON_TRUNCATED,
                position=0,
            )
        if batch.attributes & CONTROL_FLAG_MASK:
            return True
        for record in batch.records():
            if record.key is not None and record.offset >= start_offset:
                if not self.put_hash(key_hash(record.key), record.offset):
                    return False
        return True

    def retain_mask(self, data, *, now_ms: int):
        """Which records of the batch at the start of ``data`` the cleaner keeps (Kafka's
        ``Cleaner.shouldRetainRecord``), given this map of the dirty
        section. Returns ``(mask, kept_count, tombstone_kept)``: ``mask`` a numpy bool array,
        one entry per record in offset order.

        A record is kept when its offset is past ``latest_offset`` (beyond the map); else a
        keyless record is dropped; else it is kept iff its offset >= ``get(key)`` (the latest
        for its key) and it has a value, or it is a tombstone and the batch has no delete
        horizon yet or ``now_ms`` < the horizon. ``tombstone_kept`` says whether a kept
        record is a tombstone (the cleaner then sets the batch's delete horizon if it has none).
        Control batches keep every record. Raises CorruptRecordError like ``put_batch_keys``.
        """
        from .codec import iter_batches

        view = memoryview(data).cast("B")
        batch = next(iter(iter_batches(view)), None)
        if batch is None or view.nbytes < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                "retain_mask: data does not hold a whole batch", reason=REASON_TRUNCATED,
                position=0,
            )
        records = batch.records()
        mask = np.ones(len(records), dtype=np.bool_)
        if batch.attributes & CONTROL_FLAG_MASK:
            return mask, len(records), False
        horizon_ms = batch.delete_horizon_ms if batch.has_delete_horizon else -1
        kept, tombstone_kept = 0, False
        for i, record in enumerate(records):
            if record.offset > self.latest_offset:
                keep = True
            elif record.key is None:
                keep = False
            else:
                keep = record.offset >= self.get(record.key) and (
                    record.value is not None or horizon_ms < 0 or now_ms < horizon_ms
                )
            mask[i] = keep
            if keep:
                kept += 1
                tombstone_kept = tombstone_kept or record.value is None
        return mask, kept, tombstone_kept
