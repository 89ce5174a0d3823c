"""Producer state of one partition: idempotence, transactions and ``.snapshot`` files.

This is Kafka's ``ProducerStateManager``, ``ProducerAppendInfo``, ``ProducerStateEntry`` and
``BatchMetadata`` (the Java classes under ``storage/.../log/``), with
Kafka's rules and Kafka's snapshot bytes.

The idea: for every producer id that wrote to the partition the log remembers its epoch, the
coordinator epoch of its last transaction marker, the time of its last write, the first offset
of its open transaction (if any) and the sequence/offset ranges of its last 5 batches. Before a
batch carrying a producer id is written, that memory answers three questions:

* is it a retry of one of the last 5 batches? Then it is not written again and the producer
  gets the original offsets (``ProducerStateManager.analyze_batches`` -> ``duplicate``);
* does it follow on? Same epoch: its first sequence must be the last one + 1 (wrapping from
  INT32_MAX to 0); a new epoch must start at 0; a lower epoch is fenced; a producer the log
  does not know (or whose epoch is -1) may start anywhere;
* does it open or close a transaction? The first transactional batch opens one at its base
  offset; a COMMIT/ABORT control batch closes it, and an abort becomes an entry of the
  segment's ``.txnindex`` (``seglog.storage.txnindex``).

The open transactions give the *first unstable offset*, and with the high watermark the *last
stable offset* (LSO) that read_committed readers stop at.

The state is derived from the log. A snapshot ``<offset>.snapshot`` records it as of
``offset`` (the state after every batch below ``offset``), so that opening a log replays only
the batches after the latest snapshot. Snapshot file, all big-endian (``ProducerSnapshot.json``,
version 1)::

    version int16 (1) | crc uint32 | count int32 | count x 46-byte entries:
    producer_id int64 | epoch int16 | last_sequence int32 | last_offset int64 |
    offset_delta int32 | timestamp int64 | coordinator_epoch int32 |
    current_txn_first_offset int64 (-1: none)

The CRC is CRC-32C over bytes 6..end (the count and the entries). Only each producer's last
batch is stored, so after a reload only that batch is recognised as a duplicate.

Vocabulary: *sequence* numbers count a producer's records per partition; *offset* is a record
number in the log; ``map_end_offset`` is the offset up to which the state has seen the log.

Thread-safety: none. The Log calls every mutating method under its own lock; values readers
need (LSO) should be published by the Log with its reader snapshot.

Differences from Kafka, written down: transaction markers follow the TV0/TV1 epoch rule (a
marker's epoch may equal the producer's; there is no TV2 epoch bump on markers); there is no
transaction verification (``VerificationStateEntry``); a snapshot with bytes after its last
entry is corrupt (Kafka ignores trailing bytes that its CRC covers); snapshot entries are
written sorted by producer id (Kafka writes hash-map order); snapshots are written with
write-temp, fsync, rename, fsync-dir (Kafka writes the final name in place and fsyncs).
The snapshot format suggests an entry is recreated only if ``LastOffset >= 0``; Kafka's
``readSnapshot`` recreates every entry and omits only the batch metadata when the last offset
is negative, which is what is done here.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
import time
from collections import deque
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from . import checkpoints
from ..errors import (
    CorruptSnapshotError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from ..filenames import DELETED_SUFFIX, SNAPSHOT_SUFFIX, snapshot_file
from ..format import (
    CONTROL_KEY,
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    END_TXN_MARKER_VALUE,
    INT32_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
)
from .txnindex import AbortedTxn, TransactionIndex

#: Batches remembered per producer for duplicate detection (``NUM_BATCHES_TO_RETAIN``).
NUM_BATCHES_TO_RETAIN = 5
#: ``producer.id.expiration.ms`` default (1 day).
PRODUCER_ID_EXPIRATION_MS_DEFAULT = 86_400_000
#: How often Kafka checks for expired producers (``producer.id.expiration.check.interval.ms``).
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000

# --- snapshot format (ProducerStateManager.writeSnapshot / readSnapshot) ------------------------
PRODUCER_SNAPSHOT_VERSION = 1
SNAPSHOT_VERSION = struct.Struct(">h")
SNAPSHOT_CRC = struct.Struct(">I")
SNAPSHOT_COUNT = struct.Struct(">i")
#: producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
#: current_txn_first_offset
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_CRC_POSITION = SNAPSHOT_VERSION.size  # 2
#: The CRC covers everything from here (the count) to the end of the file.
SNAPSHOT_CRC_START = SNAPSHOT_CRC_POSITION + SNAPSHOT_CRC.size  # 6
SNAPSHOT_ENTRIES_POSITION = SNAPSHOT_CRC_START + SNAPSHOT_COUNT.size  # 10
SNAPSHOT_ENTRY_BYTES = SNAPSHOT_ENTRY.size  # 46
assert SNAPSHOT_ENTRY_BYTES == 46 and SNAPSHOT_ENTRIES_POSITION == 10

_SNAPSHOT_NAME = re.compile(r"^(\d{20})" + re.escape(SNAPSHOT_SUFFIX) + "$")

# --- append origins (Kafka's AppendOrigin) -----------------------------------------------------
#: A producer's append: full checks, duplicates answered with the original offsets.
ORIGIN_CLIENT = "client"
#: Written by a coordinator (transaction markers, group offsets): epoch checks, no sequences.
ORIGIN_COORDINATOR = "coordinator"
#: Replication and log recovery/replay: no checks raise; the log is trusted.
ORIGIN_REPLICATION = "replication"
ORIGINS = (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION)


def _now_ms(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


# --- sequence arithmetic (DefaultRecordBatch.incrementSequence / decrementSequence) -------------


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past INT32_MAX to 0 (Kafka's ``incrementSequence``)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 to INT32_MAX (``decrementSequence``)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """True if ``next_sequence`` directly follows ``last_sequence`` (0 follows INT32_MAX)."""
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


# --- per-producer state ------------------------------------------------------------------------


class BatchMetadata(NamedTuple):
    """One remembered batch: its last sequence, last offset, ``offset_delta`` (last offset -
    first offset, also the sequence span) and max timestamp (ms). ``first_seq`` and
    ``first_offset`` are derived."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp_ms: int

    @property
    def first_seq(self) -> int:
        """The batch's base sequence (wrapping as Kafka's ``decrementSequence``)."""
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        """The batch's base offset."""
        return self.last_offset - self.offset_delta


class TxnMetadata:
    """An open (or completed but not yet replicated) transaction: producer id, first offset,
    and the marker's offset once completed (``last_offset``, else None)."""

    __slots__ = ("producer_id", "first_offset", "last_offset")

    def __init__(self, producer_id: int, first_offset: int, last_offset: int | None = None):
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset

    def __repr__(self) -> str:
        return (f"TxnMetadata(producer_id={self.producer_id}, first_offset={self.first_offset}, "
                f"last_offset={self.last_offset})")


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker: ``last_offset`` is the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class LastRecord(NamedTuple):
    """For the cleaner: a producer's last data offset (None when the state holds no batch of
    it, e.g. only a marker since the reload) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


class ProducerStateEntry:
    """The state of one producer id (Kafka's ``ProducerStateEntry``).

    Attributes: ``producer_id``, ``producer_epoch`` (-1 unknown), ``coordinator_epoch`` (-1
    none), ``last_timestamp_ms`` (-1 none), ``current_txn_first_offset`` (None when no
    transaction is open) and ``batch_metadata``, a deque of at most 5 :class:`BatchMetadata`,
    oldest first.
    """

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp_ms",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, *, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp_ms: int = NO_TIMESTAMP,
                 current_txn_first_offset: int | None = None,
                 batch_metadata: Iterable[BatchMetadata] = ()):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp_ms = last_timestamp_ms
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batch_metadata, NUM_BATCHES_TO_RETAIN)

    @classmethod
    def empty(cls, producer_id: int) -> "ProducerStateEntry":
        """A producer the log knows nothing about: epoch -1, so any sequence is accepted."""
        return cls(producer_id)

    def with_no_batches(self) -> "ProducerStateEntry":
        """A copy with the same epochs, timestamp and open transaction but no batches (what an
        append starts from: Kafka's ``withProducerIdAndBatchMetadata(id, empty)``)."""
        return ProducerStateEntry(
            self.producer_id, producer_epoch=self.producer_epoch,
            coordinator_epoch=self.coordinator_epoch, last_timestamp_ms=self.last_timestamp_ms,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    @property
    def is_empty(self) -> bool:
        """True when no batch is remembered."""
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        """First sequence of the oldest remembered batch, or -1."""
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        """Last sequence of the newest remembered batch, or -1."""
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        """First offset of the oldest remembered batch, or -1."""
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        """Last offset of the newest remembered batch, or -1."""
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        """``offset_delta`` of the newest remembered batch, or 0."""
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """Take a new epoch (forgetting the batches of the old one); False if unchanged."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp_ms: int) -> None:
        """Remember a batch (dropping the oldest beyond 5) and its timestamp."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp_ms))
        self.last_timestamp_ms = timestamp_ms

    def update(self, next_entry: "ProducerStateEntry") -> None:
        """Fold in what one append produced (Kafka's ``update(ProducerStateEntry)``): its
        epoch (a new one forgets the old batches), its batches appended after ours, and its
        coordinator epoch, open transaction and timestamp."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.batch_metadata.extend(next_entry.batch_metadata)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp_ms = next_entry.last_timestamp_ms

    def end_transaction(self, producer_epoch: int, coordinator_epoch: int,
                        timestamp_ms: int) -> None:
        """A marker was written: take its epochs and time, close the transaction."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp_ms = timestamp_ms

    def find_duplicate_batch(self, batch: Any) -> BatchMetadata | None:
        """The remembered batch with ``batch``'s epoch and exactly its sequence range, or None."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch whose sequences are exactly ``first_seq..last_seq``, or None."""
        for metadata in self.batch_metadata:
            # last_seq first: first_seq is derived (wrapping arithmetic), on the append path
            if metadata.last_seq == last_seq and metadata.first_seq == first_seq:
                return metadata
        return None

    def copy(self) -> "ProducerStateEntry":
        """An independent copy."""
        entry = self.with_no_batches()
        entry.batch_metadata.extend(self.batch_metadata)
        return entry

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, coordinator_epoch={self.coordinator_epoch}, "
            f"last_timestamp_ms={self.last_timestamp_ms}, "
            f"current_txn_first_offset={self.current_txn_first_offset}, "
            f"batch_metadata={list(self.batch_metadata)})"
        )


# --- control markers -----------------------------------------------------------------------------


def parse_end_txn_marker(batch: Any) -> tuple[int, int, int] | None:
    """``(control_type, coordinator_epoch, timestamp_ms)`` of a control batch's marker, or
    None for a control batch without records (the cleaner empties markers whose transaction
    is gone). InvalidRecordError for a key or value Kafka would not parse
    (``ControlRecordType.parse``, ``EndTransactionMarker.deserialize``) or a control type other
    than ABORT/COMMIT."""
    if batch.record_count == 0:
        return None
    records = batch.records()
    if not records:
        return None
    record = records[0]
    key, value = record.key, record.value
    if key is None or len(key) < CONTROL_KEY.size:
        raise InvalidRecordError(
            f"control record key must be at least {CONTROL_KEY.size} bytes, got "
            f"{'null' if key is None else len(key)}")
    key_version, control_type = CONTROL_KEY.unpack_from(key)
    if key_version < 0:
        raise InvalidRecordError(f"invalid version found for control record: {key_version}")
    if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(f"invalid record type for end transaction marker: {control_type}")
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise InvalidRecordError(
            f"invalid value size found for end transaction marker: "
            f"{'null' if value is None else len(value)}")
    value_version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if value_version < 0:
        raise InvalidRecordError(
            f"invalid version found for end transaction marker: {value_version}")
    return control_type, coordinator_epoch, record.timestamp_ms


# --- validating one producer's batches ---------------------------------------------------------


class ProducerAppendInfo:
    """Checks one producer's batches of one append and accumulates the state they produce
    (Kafka's ``ProducerAppendInfo``). Built by :meth:`ProducerStateManager.prepare_update`;
    nothing changes in the manager until :meth:`ProducerStateManager.update` is called with it.

    ``append`` raises, for ``origin`` client (and coordinator where noted):
    InvalidProducerEpochError for an epoch below the producer's (also coordinator);
    OutOfOrderSequenceError for a new epoch not starting at 0 (unless the epoch is unknown) or
    a sequence that does not follow the last one (unless the epoch is unknown);
    InvalidTxnStateError for a non-transactional batch while a transaction is open;
    TransactionCoordinatorFencedError for a marker with a lower coordinator epoch (also
    coordinator). With origin replication nothing raises except InvalidTxnStateError (Kafka
    checks it for every origin).
    """

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry, origin: str):
        if origin not in ORIGINS:
            raise ValueError(f"origin must be one of {ORIGINS}, got {origin!r}")
        self.producer_id = producer_id
        self.origin = origin
        self.current_entry = current_entry
        self.updated_entry = current_entry.with_no_batches()
        self.updated_entry.producer_id = producer_id
        #: Transactions this append opened (the manager adds them to its ongoing set).
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if producer_epoch < current and self.origin != ORIGIN_REPLICATION:
            raise InvalidProducerEpochError(
                f"epoch of producer {self.producer_id} at offset {offset} is {producer_epoch}, "
                f"which is smaller than the last seen epoch {current}")

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated_entry, self.current_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset}: {producer_epoch} (request epoch), {first_seq} (seq. "
                    f"number), {updated.producer_epoch} (current producer epoch)")
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == current.producer_epoch:
            current_last_seq = current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # An unknown epoch (the producer's records were deleted by retention, or it expired)
        # accepts any sequence (KIP-360).
        if not (current.producer_epoch == NO_PRODUCER_EPOCH
                or in_sequence(current_last_seq, first_seq)):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {self.producer_id} at offset "
                f"{offset}: {first_seq} (incoming seq. number), {current_last_seq} (current end "
                f"sequence number)")

    def append(self, batch: Any, *, base_offset: int | None = None) -> CompletedTxn | None:
        """Check and take one batch of this producer; returns the transaction a marker
        completed (only for a non-empty transaction), else None. ``base_offset``: the offset
        the batch will be written at, when its header still holds the client's 0."""
        base = batch.base_offset if base_offset is None else base_offset
        if batch.is_control:
            marker = parse_end_txn_marker(batch)
            if marker is None:
                return None  # an emptied marker: its whole transaction was cleaned away
            control_type, coordinator_epoch, timestamp_ms = marker
            return self.append_end_txn_marker(
                control_type=control_type, coordinator_epoch=coordinator_epoch,
                producer_epoch=batch.producer_epoch, offset=base, timestamp_ms=timestamp_ms)
        self.append_data_batch(
            producer_epoch=batch.producer_epoch, first_seq=batch.base_sequence,
            last_seq=batch.last_sequence, last_timestamp_ms=batch.max_timestamp_ms,
            first_offset=base, last_offset=base + batch.last_offset_delta,
            is_transactional=batch.is_transactional)
        return None

    def append_data_batch(self, *, producer_epoch: int, first_seq: int, last_seq: int,
                          last_timestamp_ms: int, first_offset: int, last_offset: int,
                          is_transactional: bool) -> None:
        """Check and take a data batch (fields as in the batch header, offsets absolute)."""
        self._check_producer_epoch(producer_epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        updated = self.updated_entry
        updated.add_batch(producer_epoch, last_seq, last_offset, last_offset - first_offset,
                          last_timestamp_ms)
        if updated.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset}: its transaction from offset "
                f"{updated.current_txn_first_offset} is open")
        if updated.current_txn_first_offset is None and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, *, control_type: int, coordinator_epoch: int,
                              producer_epoch: int, offset: int,
                              timestamp_ms: int) -> CompletedTxn | None:
        """Check and take a COMMIT (1) or ABORT (0) marker written at ``offset``; returns the
        completed transaction, or None when no transaction was open (an empty transaction
        needs no txn-index entry and does not move the LSO)."""
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated_entry
        if updated.coordinator_epoch > coordinator_epoch and self.origin != ORIGIN_REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                f"{coordinator_epoch} (zombie), {updated.coordinator_epoch} (current)")
        completed = None
        if updated.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, updated.current_txn_first_offset, offset,
                                     control_type == CONTROL_TYPE_ABORT)
        updated.end_transaction(producer_epoch, coordinator_epoch, timestamp_ms)
        return completed

    def to_entry(self) -> ProducerStateEntry:
        """The state this append leads to (batches: only this append's)."""
        return self.updated_entry

    def __repr__(self) -> str:
        return (f"ProducerAppendInfo(producer_id={self.producer_id}, origin={self.origin}, "
                f"updated={self.updated_entry!r}, started={self.started_transactions})")


class AppendAnalysis(NamedTuple):
    """What :meth:`ProducerStateManager.analyze_batches` found in one append.

    ``duplicate``: the remembered batch the append repeats (write nothing; answer with
    ``duplicate.first_offset, duplicate.last_offset``), else None. ``append_infos``: producer id
    -> :class:`ProducerAppendInfo`, to hand to :meth:`ProducerStateManager.apply_append` after
    the write. ``completed_txns``: transactions the append's markers close, in offset order.
    """

    duplicate: BatchMetadata | None
    append_infos: dict
    completed_txns: list


# --- snapshots -----------------------------------------------------------------------------------


def _default_crc32c() -> Callable[..., int]:
    from .._backend import default_backend

    return default_backend().crc32c


def encode_snapshot(entries: Iterable[ProducerStateEntry], *,
                    crc32c: Callable[..., int] | None = None) -> bytes:
    """The bytes of a ``.snapshot`` holding ``entries`` (sorted by producer id). ``crc32c``:
    a backend's ``crc32c`` (default: the default backend's)."""
    crc32c = crc32c or _default_crc32c()

    ordered = sorted(entries, key=lambda entry: entry.producer_id)
    out = bytearray(SNAPSHOT_ENTRIES_POSITION + SNAPSHOT_ENTRY_BYTES * len(ordered))
    SNAPSHOT_VERSION.pack_into(out, 0, PRODUCER_SNAPSHOT_VERSION)
    SNAPSHOT_COUNT.pack_into(out, SNAPSHOT_CRC_START, len(ordered))
    position = SNAPSHOT_ENTRIES_POSITION
    for entry in ordered:
        txn_first = entry.current_txn_first_offset
        SNAPSHOT_ENTRY.pack_into(
            out, position, entry.producer_id, entry.producer_epoch, entry.last_seq,
            entry.last_data_offset, entry.last_offset_delta, entry.last_timestamp_ms,
            entry.coordinator_epoch, -1 if txn_first is None else txn_first)
        position += SNAPSHOT_ENTRY_BYTES
    SNAPSHOT_CRC.pack_into(out, SNAPSHOT_CRC_POSITION, crc32c(memoryview(out)[SNAPSHOT_CRC_START:]))
    return bytes(out)


def decode_snapshot(data: bytes, *, path: str = "<bytes>",
                    crc32c: Callable[..., int] | None = None) -> list[ProducerStateEntry]:
    """The entries of a ``.snapshot``'s bytes. CorruptSnapshotError for fewer than 10 bytes,
    a version other than 1, a negative count, a size that is not ``10 + 46 * count``, or a CRC
    mismatch. An entry with ``last_offset < 0`` comes back without batch metadata."""
    crc32c = crc32c or _default_crc32c()

    if len(data) < SNAPSHOT_ENTRIES_POSITION:
        raise CorruptSnapshotError(
            f"snapshot {path} failed schema validation: {len(data)} bytes, the header alone "
            f"needs {SNAPSHOT_ENTRIES_POSITION}")
    (version,) = SNAPSHOT_VERSION.unpack_from(data, 0)
    (count,) = SNAPSHOT_COUNT.unpack_from(data, SNAPSHOT_CRC_START)
    if count < 0 or len(data) != SNAPSHOT_ENTRIES_POSITION + SNAPSHOT_ENTRY_BYTES * count:
        raise CorruptSnapshotError(
            f"snapshot {path} failed schema validation: {len(data)} bytes for {count} entries")
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot {path} contained an unknown file version {version}")
    (stored_crc,) = SNAPSHOT_CRC.unpack_from(data, SNAPSHOT_CRC_POSITION)
    computed_crc = crc32c(memoryview(data)[SNAPSHOT_CRC_START:])
    if stored_crc != computed_crc:
        raise CorruptSnapshotError(
            f"snapshot {path} is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. "
            f"Computed crc: {computed_crc}")
    entries = []
    for (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp_ms, coordinator_epoch,
         txn_first) in SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[SNAPSHOT_ENTRIES_POSITION:]):
        batches = ([BatchMetadata(last_seq, last_offset, offset_delta, timestamp_ms)]
                   if last_offset >= 0 else [])
        entries.append(ProducerStateEntry(
            producer_id, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
            last_timestamp_ms=timestamp_ms,
            current_txn_first_offset=txn_first if txn_first >= 0 else None,
            batch_metadata=batches))
    return entries


def read_snapshot(path: str | os.PathLike, *,
                  crc32c: Callable[..., int] | None = None) -> list[ProducerStateEntry]:
    """Read and check one snapshot file (see :func:`decode_snapshot`). OSError propagates."""
    with open(path, "rb") as f:
        data = f.read()
    return decode_snapshot(data, path=os.fspath(path), crc32c=crc32c)


def write_snapshot(path: str | os.PathLike, entries: Iterable[ProducerStateEntry], *,
                   sync: bool = True, crc32c: Callable[..., int] | None = None) -> None:
    """Write a snapshot atomically: ``<path>.tmp``, fsync, rename, fsync the directory (with
    ``sync=False`` the two fsyncs are skipped; the rename still makes it all-or-nothing)."""
    data = encode_snapshot(entries, crc32c=crc32c)
    if sync:
        checkpoints.atomic_write_bytes(path, data)
        return
    tmp_path = os.fspath(path) + ".tmp"
    with open(tmp_path, "wb") as f:
        f.write(data)
    os.replace(tmp_path, path)


def snapshot_offsets_of(names: Iterable[str]) -> list[int]:
    """Offsets of the ``<20 digits>.snapshot`` names among ``names`` (a directory listing,
    shared with the segment loader), ascending; as :func:`list_snapshot_offsets`, except that
    a directory named like a snapshot would count (none is ever made)."""
    offsets = []
    for name in names:
        match = name.endswith(SNAPSHOT_SUFFIX) and _SNAPSHOT_NAME.match(name)
        if match:
            offsets.append(int(match.group(1)))
    offsets.sort()
    return offsets


def list_snapshot_offsets(dir_path: str | os.PathLike) -> list[int]:
    """Offsets of the ``<20 digits>.snapshot`` files in ``dir_path``, ascending (``.tmp`` and
    ``.deleted`` files are not snapshots)."""
    offsets = []
    try:
        # scandir: the entry's type comes with the listing (no stat per snapshot file).
        with os.scandir(os.fspath(dir_path)) as entries:
            for entry in entries:
                match = _SNAPSHOT_NAME.match(entry.name)
                if match and entry.is_file():
                    offsets.append(int(match.group(1)))
    except FileNotFoundError:
        return []
    offsets.sort()
    return offsets


# --- the manager ---------------------------------------------------------------------------------


@dataclass
class _Snapshots:
    """Sorted offsets of the snapshot files the manager knows about."""

    offsets: list

    def add(self, offset: int) -> None:
        index = bisect.bisect_left(self.offsets, offset)
        if index == len(self.offsets) or self.offsets[index] != offset:
            self.offsets.insert(index, offset)

    def discard(self, offset: int) -> bool:
        index = bisect.bisect_left(self.offsets, offset)
        if index < len(self.offsets) and self.offsets[index] == offset:
            del self.offsets[index]
            return True
        return False


class ProducerStateManager:
    """Producer state of the partition in ``dir_path`` (Kafka's ``ProducerStateManager``).

    ``ProducerStateManager(dir_path, *, producer_id_expiration_ms=86400000, backend=None,
    read_only=False)`` starts empty with ``map_end_offset`` 0 and learns the snapshot files
    present in ``dir_path``; call :meth:`truncate_and_reload` (or
    :func:`rebuild_producer_state`) to load them. ``backend`` (a backend module; default: the
    default backend) supplies the CRC32C of snapshot files. ``read_only=True`` (a read-only
    Log following a writer) never changes a file: snapshots are read but not written, and a
    corrupt one is skipped, not deleted.

    The append path is :meth:`analyze_batches` before writing and :meth:`apply_append` after;
    recovery uses :meth:`recover_batch` per batch, and replay :meth:`rebuild`. Not thread-safe
    (the Log serialises calls). Methods that depend on the clock take ``now_ms`` (default: the
    wall clock). OSError from file operations propagates.
    """

    def __init__(self, dir_path: str | os.PathLike, *,
                 producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS_DEFAULT,
                 backend: Any = None, read_only: bool = False,
                 listing: Iterable[str] | None = None):
        if backend is None:
            from .._backend import default_backend

            backend = default_backend()
        self._crc32c = backend.crc32c
        if producer_id_expiration_ms < 1:
            raise ValueError(
                f"producer_id_expiration_ms must be >= 1, got {producer_id_expiration_ms}")
        self.dir_path = os.fspath(dir_path)
        self.read_only = read_only
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # open transactions, by first offset
        self._ongoing_txns: dict[int, TxnMetadata] = {}
        # completed transactions whose markers are not yet below the high watermark
        self._unreplicated_txns: dict[int, TxnMetadata] = {}
        # ``listing``: the directory's names, listed just now by the caller (the loader lists
        # once for itself and for this manager).
        self._snapshots = _Snapshots(list_snapshot_offsets(self.dir_path) if listing is None
                                     else snapshot_offsets_of(listing))
        self._last_map_offset = 0
        self._last_snap_offset = 0

    # --- reading the state ----------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The offset up to which (exclusive) the state reflects the log."""
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        """Set :attr:`map_end_offset` (after every append, roll or replay step)."""
        self._last_map_offset = offset

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Producer id -> entry (read-only view; the entries themselves are live)."""
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        """How many producer ids the state holds."""
        return len(self._producers)

    @property
    def is_empty(self) -> bool:
        """No producers and no unreplicated transactions."""
        return not self._producers and not self._unreplicated_txns

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The state of ``producer_id``, or None."""
        return self._producers.get(producer_id)

    def ongoing_txns(self) -> list[TxnMetadata]:
        """The open transactions, by first offset."""
        return [self._ongoing_txns[offset] for offset in sorted(self._ongoing_txns)]

    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest open transaction, or None."""
        return min(self._ongoing_txns) if self._ongoing_txns else None

    def first_unstable_offset(self) -> int | None:
        """The earliest first offset of an open transaction or of a completed one whose marker
        is not yet below the high watermark; None when there is none."""
        candidates = [offset for offsets in (self._ongoing_txns, self._unreplicated_txns)
                      for offset in offsets]
        return min(candidates) if candidates else None

    def last_stable_offset(self, high_watermark: int, *, log_start_offset: int = 0) -> int:
        """The log's LSO: the first unstable offset (never below ``log_start_offset``) if it is
        below ``high_watermark``, else ``high_watermark`` (``UnifiedLog.lastStableOffset``)."""
        first_unstable = self.first_unstable_offset()
        if first_unstable is not None:
            first_unstable = max(first_unstable, log_start_offset)
            if first_unstable < high_watermark:
                return first_unstable
        return high_watermark

    def txn_last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """The LSO right after ``completed_txn`` completes, for its ``.txnindex`` entry: the
        first offset of the earliest open transaction of another producer, else the marker's
        offset + 1 (Kafka's ``lastStableOffset(CompletedTxn)``). Call before
        :meth:`complete_txn`."""
        for offset in sorted(self._ongoing_txns):
            txn = self._ongoing_txns[offset]
            if txn.producer_id != completed_txn.producer_id:
                return txn.first_offset
        return completed_txn.last_offset + 1

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        """For the cleaner: producer id -> :class:`LastRecord`. The cleaner keeps the batch
        holding each ``last_data_offset`` (emptied if need be) so duplicates are still
        detected after compaction."""
        return {
            producer_id: LastRecord(entry.last_data_offset if entry.last_data_offset >= 0 else None,
                                    entry.producer_epoch)
            for producer_id, entry in self._producers.items()
        }

    # --- the append path -----------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: str = ORIGIN_CLIENT) -> ProducerAppendInfo:
        """A :class:`ProducerAppendInfo` starting from the producer's current state."""
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def analyze_batches(self, batches: Iterable[Any], *, first_offset: int | None = None,
                        origin: str = ORIGIN_CLIENT) -> AppendAnalysis:
        """Check the batches of one append before it is written (Kafka's
        ``analyzeAndValidateProducerState``); changes nothing.

        ``batches``: Batch objects in append order. ``first_offset``: the offset the first
        batch will get when the log assigns offsets (client appends: each batch then starts
        where the previous one ended, ``last_offset_delta + 1`` later); None when the headers
        already hold the final offsets (replication, replay). Batches without a producer id
        are skipped. For origin client a data batch that repeats one of its producer's last 5
        batches (same epoch, same first and last sequence) ends the analysis:
        ``duplicate`` is set and nothing may be written. Raises the errors of
        :class:`ProducerAppendInfo`.
        """
        append_infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        next_offset = first_offset
        for batch in batches:
            if next_offset is None:
                base = batch.base_offset
            else:
                base, next_offset = next_offset, next_offset + batch.last_offset_delta + 1
            producer_id = batch.producer_id
            if producer_id == NO_PRODUCER_ID:
                continue
            if origin == ORIGIN_CLIENT and not batch.is_control:
                entry = self._producers.get(producer_id)
                duplicate = entry.find_duplicate_batch(batch) if entry is not None else None
                if duplicate is not None:
                    return AppendAnalysis(duplicate, {}, [])
            info = append_infos.get(producer_id)
            if info is None:
                info = append_infos[producer_id] = self.prepare_update(producer_id, origin)
            completed_txn = info.append(batch, base_offset=base)
            if completed_txn is not None:
                completed.append(completed_txn)
        return AppendAnalysis(None, append_infos, completed)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Fold an append's state into the map and register the transactions it opened."""
        producer_id = append_info.producer_id
        if producer_id == NO_PRODUCER_ID:
            raise ValueError(f"invalid producer id {producer_id} passed to update")
        updated = append_info.to_entry()
        current = self._producers.get(producer_id)
        if current is not None:
            current.update(updated)
        else:
            self._producers[producer_id] = updated
        for txn in append_info.started_transactions:
            self._ongoing_txns[txn.first_offset] = txn

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        """Move a transaction from open to completed-but-unreplicated (it leaves the first
        unstable offset once the high watermark passes its marker). IllegalStateError if it
        was not open."""
        txn = self._ongoing_txns.pop(completed_txn.first_offset, None)
        if txn is None:
            raise IllegalStateError(
                f"attempted to complete transaction {completed_txn} which was not started")
        txn.last_offset = completed_txn.last_offset
        self._unreplicated_txns[completed_txn.first_offset] = txn

    def apply_append(self, analysis: AppendAnalysis, *, end_offset: int,
                     txn_index: TransactionIndex | None = None) -> list[AbortedTxn]:
        """After the append was written: update the producers, append an entry to
        ``txn_index`` (the segment that received the markers) for every aborted transaction,
        complete the transactions, and set :attr:`map_end_offset` to ``end_offset`` (the log
        end offset after the append). Returns the aborted-transaction entries (written to
        ``txn_index`` when one is given)."""
        assert analysis.duplicate is None, "a duplicate append writes nothing"
        for info in analysis.append_infos.values():
            self.update(info)
        aborted = self._complete_txns(analysis.completed_txns, txn_index)
        self.update_map_end_offset(end_offset)
        return aborted

    def _complete_txns(self, completed_txns: Iterable[CompletedTxn],
                       txn_index: TransactionIndex | None) -> list[AbortedTxn]:
        aborted = []
        for completed_txn in completed_txns:
            if completed_txn.is_aborted:
                entry = AbortedTxn(completed_txn.producer_id, completed_txn.first_offset,
                                   completed_txn.last_offset,
                                   self.txn_last_stable_offset(completed_txn))
                if txn_index is not None:
                    txn_index.append(entry)
                aborted.append(entry)
            self.complete_txn(completed_txn)
        return aborted

    def recover_batch(self, batch: Any,
                      txn_index: TransactionIndex | None = None) -> AbortedTxn | None:
        """Take one batch during segment recovery (Kafka's ``LogSegment.updateProducerState``):
        no checks raise, an abort is appended to ``txn_index`` (the recovered segment's, after
        its ``reset()``), and :attr:`map_end_offset` moves past the batch."""
        aborted = None
        if batch.producer_id != NO_PRODUCER_ID:
            info = self.prepare_update(batch.producer_id, ORIGIN_REPLICATION)
            completed_txn = info.append(batch)
            self.update(info)
            if completed_txn is not None:
                entries = self._complete_txns([completed_txn], txn_index)
                aborted = entries[0] if entries else None
        self.update_map_end_offset(batch.next_offset)
        return aborted

    def rebuild(self, batches: Iterable[Any], *, end_offset: int | None = None) -> int:
        """Replay batches read from the log (Kafka's ``loadProducersFromRecords``): no checks
        raise and the ``.txnindex`` is not touched (recovery keeps it). :attr:`map_end_offset`
        becomes ``end_offset`` if given, else the end of the last batch replayed (if any).
        Streams: batches are not kept. Returns the number of batches seen."""
        replay = _Replay(self)
        count, last_next_offset = 0, None
        for batch in batches:
            count += 1
            last_next_offset = batch.next_offset
            replay.feed(batch)
        replay.finish()
        if end_offset is not None:
            self.update_map_end_offset(end_offset)
        elif last_next_offset is not None:
            self.update_map_end_offset(last_next_offset)
        return count

    # --- watermarks, log start, expiration -----------------------------------------------------

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose markers are below ``high_watermark``."""
        self._remove_unreplicated_txns(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """After retention or delete_records moved the log start: forget completed
        transactions below it and move :attr:`map_end_offset` up to it if behind."""
        self._remove_unreplicated_txns(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    def _remove_unreplicated_txns(self, offset: int) -> None:
        for first_offset in [first for first, txn in self._unreplicated_txns.items()
                             if txn.last_offset is not None and txn.last_offset < offset]:
            del self._unreplicated_txns[first_offset]

    def is_producer_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """No open transaction and idle for at least ``producer_id_expiration_ms``."""
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp_ms >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Drop the expired producers (Kafka runs this every 10 minutes); returns their ids."""
        now = _now_ms(now_ms)
        expired = [pid for pid, entry in self._producers.items()
                   if self.is_producer_expired(entry, now)]
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    # --- snapshots -----------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files the manager knows about, ascending."""
        return list(self._snapshots.offsets)

    def latest_snapshot_offset(self) -> int | None:
        """Offset of the newest snapshot, or None."""
        return self._snapshots.offsets[-1] if self._snapshots.offsets else None

    def oldest_snapshot_offset(self) -> int | None:
        """Offset of the oldest snapshot, or None."""
        return self._snapshots.offsets[0] if self._snapshots.offsets else None

    def snapshot_path(self, offset: int) -> str:
        """Path of the snapshot at ``offset`` (it may not exist)."""
        return snapshot_file(self.dir_path, offset)

    def take_snapshot(self, *, sync: bool = True) -> str | None:
        """Write ``<map_end_offset>.snapshot`` unless one at or beyond it was already taken;
        returns its path, or None when nothing was written."""
        if self._last_map_offset <= self._last_snap_offset or self.read_only:
            return None
        path = self.snapshot_path(self._last_map_offset)
        write_snapshot(path, self._producers.values(), sync=sync, crc32c=self._crc32c)
        self._snapshots.add(self._last_map_offset)
        self._last_snap_offset = self._last_map_offset
        return path

    def _delete_snapshot(self, offset: int) -> bool:
        self._snapshots.discard(offset)
        if self.read_only:
            return False
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            return False
        return True

    def remove_snapshot(self, offset: int) -> bool:
        """Delete the snapshot at ``offset`` now; True if a file was deleted."""
        return self._delete_snapshot(offset)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> str | None:
        """Forget the snapshot at ``offset`` and rename it ``<name>.deleted`` (deleted with its
        segment's files later); returns the new path, or None if there was no such file."""
        self._snapshots.discard(offset)
        if self.read_only:
            return None
        path = self.snapshot_path(offset)
        try:
            os.replace(path, path + DELETED_SUFFIX)
        except FileNotFoundError:
            return None
        return path + DELETED_SUFFIX

    def delete_snapshots_below(self, offset: int) -> list[int]:
        """Delete every snapshot at an offset below ``offset``; returns their offsets."""
        removed = [snap for snap in self._snapshots.offsets if snap < offset]
        for snap in removed:
            self._delete_snapshot(snap)
        return removed

    def remove_straddling(self, log_start_offset: int, log_end_offset: int) -> list[int]:
        """Delete the snapshots outside ``(log_start_offset, log_end_offset]`` (Kafka's rule in
        ``truncateAndReload``: above the end, or at or below the start); returns their offsets."""
        removed = [snap for snap in self._snapshots.offsets
                   if snap > log_end_offset or snap <= log_start_offset]
        for snap in removed:
            self._delete_snapshot(snap)
        return removed

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int], *,
                               rescan: bool = True) -> list[int]:
        """Rescan the directory and delete every snapshot whose offset is no segment's base
        offset, except the largest such stray when it lies above every base offset (the
        snapshot a clean shutdown takes at the log end). Returns the deleted offsets.
        ``rescan=False``: the snapshots this manager knows are the directory's (it listed
        them itself and nothing else wrote or removed one since), so it does not list again."""
        bases = set(segment_base_offsets)
        max_base = max(bases) if bases else None
        if rescan:
            self._snapshots = _Snapshots(list_snapshot_offsets(self.dir_path))
        removed, latest_stray = [], None
        for offset in list(self._snapshots.offsets):
            if offset in bases:
                continue
            if latest_stray is not None:
                self._delete_snapshot(latest_stray)
                removed.append(latest_stray)
            latest_stray = offset
        if latest_stray is not None and max_base is not None and latest_stray < max_base:
            self._delete_snapshot(latest_stray)
            removed.append(latest_stray)
        return removed

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        """Put ``entry`` into the state as is (and its open transaction, if any): what loading
        a snapshot does per entry; also for tests."""
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(
                entry.producer_id, entry.current_txn_first_offset)

    def load(self, log_start_offset: int, *, now_ms: int | None = None) -> int | None:
        """Replace the state with the latest snapshot's (Kafka's ``loadFromSnapshot``),
        leaving out producers expired at ``now_ms``. A corrupt snapshot
        (CorruptSnapshotError) is deleted and the next older one tried. Returns the offset of
        the snapshot loaded (then :attr:`map_end_offset`), or None when there was none (then
        :attr:`map_end_offset` is ``log_start_offset``)."""
        now = _now_ms(now_ms)
        self._clear()
        while self._snapshots.offsets:
            offset = self._snapshots.offsets[-1]
            try:
                entries = read_snapshot(self.snapshot_path(offset), crc32c=self._crc32c)
            except (CorruptSnapshotError, FileNotFoundError):
                self._delete_snapshot(offset)
                continue
            for entry in entries:
                if not self.is_producer_expired(entry, now):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            return offset
        self._last_snap_offset = self._last_map_offset = log_start_offset
        return None

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, *,
                            now_ms: int | None = None) -> None:
        """Fit the state to a log holding ``[log_start_offset, log_end_offset)``: delete the
        snapshots outside ``(log_start_offset, log_end_offset]``; then, unless the state
        already ends at ``log_end_offset``, reload from the latest remaining snapshot (the
        caller replays the log from :attr:`map_end_offset`). Assumes ``log_end_offset`` is not
        above the high watermark (unreplicated transactions are dropped)."""
        self.remove_straddling(log_start_offset, log_end_offset)
        if log_end_offset != self._last_map_offset:
            self.load(log_start_offset, now_ms=now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot; the state now ends at ``offset``."""
        self._clear()
        for snap in list(self._snapshots.offsets):
            self._delete_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def __repr__(self) -> str:
        return (f"<ProducerStateManager {self.dir_path} producers={len(self._producers)} "
                f"ongoing={len(self._ongoing_txns)} map_end_offset={self._last_map_offset}>")


# --- loading a log -------------------------------------------------------------------------------


class _Replay:
    """Accumulates replayed batches per producer (one ProducerAppendInfo each, as Kafka's
    ``loadProducersFromRecords``) and folds them into the manager on :meth:`finish`."""

    def __init__(self, manager: ProducerStateManager):
        self._manager = manager
        self._infos: dict[int, ProducerAppendInfo] = {}
        self._completed: list[CompletedTxn] = []

    def feed(self, batch: Any) -> None:
        producer_id = batch.producer_id
        if producer_id == NO_PRODUCER_ID:
            return
        info = self._infos.get(producer_id)
        if info is None:
            info = self._infos[producer_id] = self._manager.prepare_update(
                producer_id, ORIGIN_REPLICATION)
        completed_txn = info.append(batch)
        if completed_txn is not None:
            self._completed.append(completed_txn)

    def finish(self) -> None:
        for info in self._infos.values():
            self._manager.update(info)
        for completed_txn in self._completed:
            self._manager.complete_txn(completed_txn)
        self._infos, self._completed = {}, []


def rebuild_producer_state(
    manager: ProducerStateManager,
    *,
    segment_base_offsets: Iterable[int],
    log_start_offset: int,
    log_end_offset: int,
    batches_from: Callable[[int], Iterable[Any]],
    reload_from_clean_shutdown: bool,
    now_ms: int | None = None,
) -> None:
    """Bring ``manager`` to ``log_end_offset`` as a log opens or truncates (Kafka's
    ``UnifiedLog.rebuildProducerState``).

    ``batches_from(offset)`` yields the log's Batch objects in order from the batch containing
    ``offset`` (to the end of the log or beyond ``log_end_offset``; batches at or past
    ``log_end_offset`` are not read further). Without any snapshot after a clean shutdown,
    empty snapshots are written at the bases of the last two segments and at
    ``log_end_offset`` and nothing is read. Otherwise the latest in-range snapshot is loaded
    (:meth:`ProducerStateManager.truncate_and_reload`), the batches from its offset are
    replayed segment by segment (a snapshot is taken at the base of each of the last two
    segments as it is reached, holding the state before that segment), and a final snapshot is
    taken at ``log_end_offset``. Raises what ``batches_from`` raises (CorruptRecordError).
    """
    bases = sorted(set(segment_base_offsets))
    to_snapshot = set(bases[-2:])
    if manager.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for offset in sorted(to_snapshot | {log_end_offset}):
            manager.update_map_end_offset(offset)
            manager.take_snapshot()
        return
    is_empty_before = manager.is_empty and manager.map_end_offset >= log_end_offset
    manager.truncate_and_reload(log_start_offset, log_end_offset, now_ms=now_ms)
    if log_end_offset > manager.map_end_offset and not is_empty_before:
        start = manager.map_end_offset
        # The segments overlapping [start, log_end_offset), from the one containing start.
        first = max(bisect.bisect_right(bases, start) - 1, 0)
        in_range = [base for base in bases[first:] if base < log_end_offset]
        replay = _Replay(manager)
        index = -1

        def enter_segments_up_to(offset: int | None) -> None:
            # Finish the segment being replayed and enter every segment whose base is <=
            # offset (all remaining ones when offset is None), Kafka's per-segment prologue.
            nonlocal index
            while index + 1 < len(in_range) and (offset is None or in_range[index + 1] <= offset):
                replay.finish()
                index += 1
                base = in_range[index]
                manager.update_map_end_offset(max(manager.map_end_offset, base, log_start_offset))
                if base in to_snapshot:
                    manager.take_snapshot()

        enter_segments_up_to(start)
        for batch in batches_from(start):
            if batch.base_offset >= log_end_offset:
                break
            if batch.last_offset < start:
                continue
            enter_segments_up_to(batch.base_offset)
            replay.feed(batch)
        enter_segments_up_to(None)
        replay.finish()
    manager.update_map_end_offset(log_end_offset)
    manager.take_snapshot()
