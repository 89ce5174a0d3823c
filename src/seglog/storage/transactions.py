"""read_committed at the batch level: which batches a transactional reader may see.

Two halves of Kafka's read_committed, kept together because they only make sense as a pair:

* the broker side, :func:`collect_aborted_transactions`: for a fetch of ``[fetch_offset,
  upper_bound_offset)`` (the upper bound is at most the LSO), the aborted transactions that
  overlap it, gathered from the ``.txnindex`` of the segment holding ``fetch_offset`` and the
  later ones until an index proves the list complete (``UnifiedLog.collectAbortedTransactions``);
* the consumer side, :func:`filter_committed_batches`: given the fetched batches and that
  list, drop the batches of aborted transactions and every control batch (Kafka's
  ``CompletedFetch.nextFetchedRecord``).

The consumer rule, step by step: the aborted transactions are taken in ``first_offset`` order;
before looking at a batch that carries a producer id, every aborted transaction whose
``first_offset <= batch.last_offset`` adds its producer to the *aborted set*; an ABORT marker of
a producer removes it from the set (its aborted transaction is over); a transactional data
batch whose producer is in the set is skipped. Control batches are never surfaced, and
non-transactional batches are always surfaced.

Thread-safety: the functions keep no state between calls.
"""

from __future__ import annotations

import heapq
from typing import Any, Iterable, Iterator

from ..errors import CorruptRecordError
from ..format import (
    CONTROL_TYPE_ABORT,
    NO_PRODUCER_ID,
    REASON_CRC_MISMATCH,
    REASON_OFFSETS_NOT_INCREASING,
)
from .txnindex import AbortedTxn, TransactionIndex

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


def is_abort_marker(batch: Any) -> bool:
    """True for a control batch whose first record is an ABORT marker (an emptied control
    batch is not)."""
    if not batch.is_control or batch.record_count == 0:
        return False
    return batch.control_type() == CONTROL_TYPE_ABORT


def collect_aborted_transactions(txn_indexes: Iterable[TransactionIndex], fetch_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``.

    ``txn_indexes``: the transaction indexes of the segment that holds ``fetch_offset`` (the
    floor segment) and of every later segment, in order; it is consumed lazily and only as far
    as needed (the search stops at the first index whose result is complete). Entries come in
    index order; duplicates cannot occur because an abort is indexed in one segment only.
    """
    found: list[AbortedTxn] = []
    for txn_index in txn_indexes:
        result = txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)
        found.extend(result.aborted_txns)
        if result.is_complete:
            break
    return found


def filter_committed_batches(batches: Iterable[Any],
                             aborted_txns: Iterable[AbortedTxn]) -> Iterator[Any]:
    """Yield the data batches a read_committed consumer returns records from, in order:
    batches of aborted transactions and all control batches are dropped (see the module
    docstring for the rule). ``aborted_txns``: what :func:`collect_aborted_transactions` (or a
    broker's fetch response) gave for the fetched range; only ``producer_id`` and
    ``first_offset`` are used. Markers' keys are parsed (InvalidRecordError for a bad one)."""
    pending = [(txn.first_offset, txn.producer_id) for txn in aborted_txns]
    heapq.heapify(pending)
    aborted_producers: set[int] = set()
    for batch in batches:
        producer_id = batch.producer_id
        if producer_id != NO_PRODUCER_ID:
            last_offset = batch.last_offset
            while pending and pending[0][0] <= last_offset:
                aborted_producers.add(heapq.heappop(pending)[1])
            if is_abort_marker(batch):
                aborted_producers.discard(producer_id)
            elif batch.is_transactional and producer_id in aborted_producers:
                continue
        if batch.is_control:
            continue
        yield batch


def checked_batches(batches: Iterable[Any], *, check_crcs: bool = True,
                    previous_next_offset: int = -1, where: str = "",
                    base_position: int = 0) -> Iterator[Any]:
    """``batches`` unchanged, each one checked before it is used (a consumer's
    ``check.crcs``, Kafka's ``CompletedFetch`` checking every batch, control batches
    included, before looking at it):

    * with ``check_crcs``, its CRC32C (``Batch.ensure_valid``): the producer id, the
      transactional and control bits and a marker's type decide what read_committed
      returns, so they are checked before :func:`filter_batches` reads them;
    * always, that its base offset is above the last offset of the batch before (the first
      batch is compared with ``previous_next_offset``, -1 for none): the base offset is
      outside the CRC, and a changed one would put records out of order without an error.

    CorruptRecordError (``REASON_CRC_MISMATCH`` / ``REASON_OFFSETS_NOT_INCREASING``) naming
    ``where`` and the batch's position (``base_position`` + its position in the buffer)."""
    previous_next = previous_next_offset
    for batch in batches:
        position = base_position + batch.position
        if batch.base_offset < previous_next:
            raise CorruptRecordError(
                f"batch at position {position} of {where or 'the read'} has base offset "
                f"{batch.base_offset}, not above the previous batch's last offset "
                f"{previous_next - 1}", reason=REASON_OFFSETS_NOT_INCREASING,
                position=position)
        if check_crcs and not batch.is_valid():  # the verdict is kept for records()
            raise batch_crc_error(batch, where, base_position)
        previous_next = batch.next_offset
        yield batch


def batch_crc_error(batch: Any, where: str | None, base_position: int = 0) -> CorruptRecordError:
    """The CorruptRecordError (``REASON_CRC_MISMATCH``) :func:`checked_batches` raises for
    ``batch`` failing its CRC32C, naming ``where`` and its position (``base_position`` + its
    position in the buffer), for a caller that checks batches in a loop of its own."""
    position = base_position + batch.position
    return CorruptRecordError(
        f"batch at position {position} of {where or 'the read'} (offsets "
        f"{batch.base_offset}..{batch.last_offset}) fails its CRC32C check",
        reason=REASON_CRC_MISMATCH, position=position)


def filter_batches(batches: Iterable[Any], aborted_txns: Iterable[AbortedTxn] | None, *,
                   isolation: str = READ_UNCOMMITTED) -> Iterator[Any]:
    """The data batches a consumer with ``isolation`` returns records from: read_uncommitted
    sees every data batch (aborted ones included), read_committed applies
    :func:`filter_committed_batches`. Control batches are never returned. ValueError for an
    unknown isolation level."""
    if isolation == READ_COMMITTED:
        return filter_committed_batches(batches, aborted_txns or ())
    if isolation != READ_UNCOMMITTED:
        raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}")
    return (batch for batch in batches if not batch.is_control)


def iter_records(batches: Iterable[Any], aborted_txns: Iterable[AbortedTxn] | None = None, *,
                 isolation: str = READ_UNCOMMITTED, start_offset: int = 0) -> Iterator[Any]:
    """The records a consumer at ``start_offset`` with ``isolation`` sees in ``batches``:
    records of the batches :func:`filter_batches` keeps, skipping offsets below
    ``start_offset`` (a fetch returns whole batches)."""
    for batch in filter_batches(batches, aborted_txns, isolation=isolation):
        if batch.last_offset < start_offset:
            continue
        for record in batch.records():
            if record.offset >= start_offset:
                yield record
