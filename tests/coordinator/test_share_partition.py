"""The share-partition state machine (:mod:`seglog.coordinator.share_partition`), driven
directly: acquisition (whole batches, per offset, limits, gaps, read_committed), every
acknowledge type and its errors, lock expiry and renewal, member release, the start offset's
advance, persisting with rollback, the DLQ's ARCHIVING state, a persisted round trip, and a
bounded randomized run checking the invariants. The scenarios follow Kafka 4.4's
SharePartition semantics; the same behaviour through real share consumers is tests/kafka/share/.
"""

from __future__ import annotations

import random
import uuid

import pytest

from seglog import error_codes as codes
from seglog.coordinator.share_partition import (
    DLQ_CAUSE_CLIENT_REJECT,
    DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED,
    AckBatch,
    AcknowledgeType,
    AcquiredRecords,
    DlqBatch,
    FetchedBatch,
    RecordState,
    ShareAcquireMode,
    SharePartition,
    SharePartitionConfig,
    SharePartitionState,
    ShareState,
    StateBatch,
)
from seglog.errors import IllegalStateError

ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT
GAP = AcknowledgeType.GAP
RENEW = AcknowledgeType.RENEW
AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVING = RecordState.ARCHIVING
ARCHIVED = RecordState.ARCHIVED
TOPIC_ID = uuid.UUID("5c7d0b0e-38b9-4a43-9f3d-5d0bd1f1f0a1")


def make(persisted: ShareState | None = None, *, log_start_offset: int = 0,
         log_end_offset: int = 0, **config: object) -> SharePartition:
    config.setdefault("auto_offset_reset", "earliest")
    sp = SharePartition("g", "t", TOPIC_ID, 0, SharePartitionConfig(**config))  # type: ignore[arg-type]
    sp.initialize(persisted, log_start_offset=log_start_offset, log_end_offset=log_end_offset)
    return sp


def log(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    """A log read: one batch per (base, last)."""
    return [FetchedBatch(first, last) for first, last in ranges]


def ack(first: int, last: int, *types: int) -> AckBatch:
    return AckBatch(first, last, tuple(types))


def persist(sp: SharePartition, ok: bool = True) -> list[ShareState]:
    """Drain the pending writes, answering each with ``ok``."""
    written = []
    for _ in range(1000):
        state = sp.pending_write()
        if state is None:
            return written
        written.append(state)
        sp.write_done(ok)
    raise AssertionError("writes never drained")


def states(sp: SharePartition) -> list[tuple[int, int, RecordState, int, str]]:
    return sp.record_states()


class Coordinator:
    """What the share coordinator keeps of a partition: the writes merged offset by offset
    (a test-side stand-in for Kafka's PersisterStateBatchCombiner)."""

    def __init__(self) -> None:
        self.start_offset = -1
        self.offsets: dict[int, tuple[int, int]] = {}
        self.state_epoch = 0

    def write(self, state: ShareState) -> None:
        self.start_offset = state.start_offset
        for batch in state.batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                self.offsets[offset] = (batch.delivery_state, batch.delivery_count)
        self.offsets = {o: v for o, v in self.offsets.items() if o >= self.start_offset}

    def read(self) -> ShareState:
        batches: list[StateBatch] = []
        for offset in sorted(self.offsets):
            st, count = self.offsets[offset]
            last = batches[-1] if batches else None
            if last and last.last_offset == offset - 1 and last.delivery_state == st \
                    and last.delivery_count == count:
                batches[-1] = StateBatch(last.first_offset, offset, st, count)
            else:
                batches.append(StateBatch(offset, offset, st, count))
        return ShareState(self.state_epoch, self.start_offset, tuple(batches))


# --- acquisition ------------------------------------------------------------------------------


def test_fresh_records_are_acquired_as_one_batch_with_delivery_count_one():
    sp = make()
    assert sp.next_fetch_offset() == 0
    got = sp.acquire("m1", log((0, 4), (5, 9)), max_records=500, now_ms=0)
    assert got == [AcquiredRecords(0, 9, 1)]
    assert sp.cached_batch_count() == 1
    assert states(sp) == [(0, 9, ACQUIRED, 1, "m1")]
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 9, 10)
    assert sp.pending_write() is None  # acquisition is not persisted (as Kafka)
    assert sp.next_lock_deadline_ms() == 30000
    # The same offsets again: nothing is available.
    assert sp.acquire("m2", log((0, 4), (5, 9)), max_records=500, now_ms=1) == []


def test_batch_size_cuts_in_flight_batches_at_log_batch_boundaries():
    sp = make()
    got = sp.acquire("m1", log((0, 4), (5, 9), (10, 14)), max_records=500, batch_size=5,
                     now_ms=0)
    assert got == [AcquiredRecords(0, 4, 1), AcquiredRecords(5, 9, 1), AcquiredRecords(10, 14, 1)]
    assert sp.cached_batch_count() == 3


def test_max_records_still_takes_the_whole_log_batch_in_batch_optimized_mode():
    sp = make()
    got = sp.acquire("m1", log((0, 4), (5, 9)), max_records=3, now_ms=0)
    assert got == [AcquiredRecords(0, 4, 1)]
    assert sp.next_fetch_offset() == 5
    got = sp.acquire("m2", log((5, 9)), max_records=3, now_ms=0, fetch_offset=5)
    assert got == [AcquiredRecords(5, 9, 1)]


def test_record_limit_mode_acquires_exactly_max_records():
    sp = make()
    got = sp.acquire("m1", log((0, 9)), max_records=3, now_ms=0,
                     acquire_mode=ShareAcquireMode.RECORD_LIMIT)
    assert got == [AcquiredRecords(0, 2, 1)]
    assert states(sp)[:4] == [(0, 0, ACQUIRED, 1, "m1"), (1, 1, ACQUIRED, 1, "m1"),
                              (2, 2, ACQUIRED, 1, "m1"), (3, 3, AVAILABLE, 0, "")]
    assert sp.next_fetch_offset() == 3
    got = sp.acquire("m2", log((0, 9)), max_records=100, now_ms=0, fetch_offset=3,
                     acquire_mode=ShareAcquireMode.RECORD_LIMIT)
    assert got == [AcquiredRecords(3, 9, 1)]


def test_in_flight_limit_stops_acquisition_until_records_complete():
    sp = make(max_in_flight_records=100)
    assert sp.acquire("m1", log((0, 99)), max_records=500, now_ms=0) == [
        AcquiredRecords(0, 99, 1)]
    assert not sp.can_acquire_records()
    assert sp.acquire("m2", log((100, 149)), max_records=500, now_ms=0) == []
    # Released records inside the in-flight window are still acquirable at the limit.
    assert sp.acknowledge("m1", [ack(0, 99, *([ACCEPT] * 10 + [RELEASE] * 90))], now_ms=1) == 0
    persist(sp)
    assert sp.start_offset == 10
    assert sp.can_acquire_records()  # next fetch offset 10 is inside the window
    got = sp.acquire("m2", log((0, 99), (100, 149)), max_records=500, now_ms=2,
                     fetch_offset=10)
    # Room for 10 more under the limit (in flight: 10..99), but the released records of a
    # split batch are all taken (Kafka limits a subset only in record_limit mode).
    assert got == [AcquiredRecords(10, 99, 2)]
    # Then 10 new records: the whole log batch holding them (batch_optimized).
    got = sp.acquire("m2", log((100, 149)), max_records=500, now_ms=2)
    assert got == [AcquiredRecords(100, 149, 1)]
    assert sp.num_in_flight_records() == 140


def test_acquire_before_the_start_offset_is_clipped():
    sp = make(log_start_offset=0, log_end_offset=20, auto_offset_reset="latest")
    assert sp.start_offset == 20
    assert sp.acquire("m1", log((10, 19)), max_records=100, now_ms=0) == []
    got = sp.acquire("m1", log((15, 24)), max_records=100, now_ms=0)
    assert got == [AcquiredRecords(20, 24, 1)]


def test_not_active_or_nothing_to_take_acquires_nothing():
    sp = SharePartition("g", "t", TOPIC_ID, 0, SharePartitionConfig())
    assert sp.acquire("m1", log((0, 4)), max_records=10, now_ms=0) == []
    sp = make()
    assert sp.acquire("m1", [], max_records=10, now_ms=0) == []
    assert sp.acquire("m1", log((0, 4)), max_records=0, now_ms=0) == []


# --- acknowledge ------------------------------------------------------------------------------


def test_accept_completes_the_batch_and_the_start_offset_moves_after_the_write():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 9, ACCEPT)], now_ms=1) == codes.NONE
    write = sp.pending_write()
    assert write == ShareState(0, 0, (StateBatch(0, 9, ACKNOWLEDGED, 1),), -1, 10)
    assert sp.last_write_seq == 1
    assert sp.start_offset == 0  # moves when the write completes
    assert sp.write_done(True) == 1
    assert (sp.start_offset, sp.end_offset, sp.cached_batch_count()) == (10, 10, 0)
    assert sp.next_fetch_offset() == 10
    assert sp.delivery_complete_count == 0
    assert sp.next_lock_deadline_ms() is None  # the lock went with the commit


def test_release_makes_records_available_again_with_their_delivery_count():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 9, RELEASE)], now_ms=1) == 0
    assert [w.batches for w in persist(sp)] == [(StateBatch(0, 9, AVAILABLE, 1),)]
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("m2", log((0, 9)), max_records=500, now_ms=2) == [
        AcquiredRecords(0, 9, 2)]


def test_reject_and_gap_archive():
    sp = make()
    sp.acquire("m1", log((0, 4), (5, 9)), max_records=500, batch_size=5, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 4, REJECT), ack(5, 9, GAP)], now_ms=1) == 0
    assert [w.batches for w in persist(sp)] == [
        (StateBatch(0, 4, ARCHIVED, 1), StateBatch(5, 9, ARCHIVED, 1))]
    assert sp.start_offset == 10


def test_per_offset_acknowledgement_splits_the_batch():
    sp = make()
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT, RELEASE, REJECT, ACCEPT, RELEASE)],
                          now_ms=1) == 0
    (write,) = persist(sp)
    assert write.batches == (StateBatch(0, 0, ACKNOWLEDGED, 1), StateBatch(1, 1, AVAILABLE, 1),
                             StateBatch(2, 2, ARCHIVED, 1), StateBatch(3, 3, ACKNOWLEDGED, 1),
                             StateBatch(4, 4, AVAILABLE, 1))
    assert sp.start_offset == 1
    assert sp.next_fetch_offset() == 1
    got = sp.acquire("m2", log((0, 4)), max_records=500, now_ms=2, fetch_offset=1)
    assert got == [AcquiredRecords(1, 1, 2), AcquiredRecords(4, 4, 2)]


def test_a_subrange_acknowledgement_splits_the_batch():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    assert sp.acknowledge("m1", [ack(2, 4, ACCEPT)], now_ms=1) == 0
    persist(sp)
    assert sp.start_offset == 0
    assert sp.acknowledge("m1", [ack(0, 1, ACCEPT), ack(5, 9, REJECT)], now_ms=1) == 0
    persist(sp)
    assert (sp.start_offset, sp.cached_batch_count()) == (10, 0)


def test_acknowledge_by_another_member_is_invalid_record_state_and_changes_nothing():
    sp = make()
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.acquire("m2", log((5, 9)), max_records=500, now_ms=0)
    # All or nothing: the first range is fine, the second is m2's.
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT), ack(5, 9, ACCEPT)],
                          now_ms=1) == codes.INVALID_RECORD_STATE
    assert sp.pending_write() is None
    assert states(sp) == [(0, 4, ACQUIRED, 1, "m1"), (5, 9, ACQUIRED, 1, "m2")]
    assert sp.delivery_complete_count == 0
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1) == 0


def test_acknowledge_errors():
    sp = make()
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 4, 7)], now_ms=1) == codes.INVALID_REQUEST
    assert sp.acknowledge("m1", [ack(3, 8, ACCEPT)], now_ms=1) == codes.INVALID_REQUEST
    assert sp.acknowledge("m1", [ack(20, 25, ACCEPT)], now_ms=1) == codes.INVALID_REQUEST
    sp2 = make(log_end_offset=10, auto_offset_reset="latest")
    sp2.acquire("m1", log((10, 14)), max_records=500, now_ms=0)
    # Offsets before every in-flight batch but at/after the start offset: not in the cache.
    sp3 = make()
    assert sp3.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1) == codes.INVALID_RECORD_STATE
    # Before the start offset: already done, silently accepted.
    assert sp2.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1) == 0
    assert sp2.pending_write() is None
    # Records nobody holds.
    sp.acknowledge("m1", [ack(0, 4, RELEASE)], now_ms=1)
    persist(sp)
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1) == codes.INVALID_RECORD_STATE
    # Per offset: an offset not acquired.
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=2)
    sp.acknowledge("m1", [ack(0, 0, ACCEPT)], now_ms=3)
    persist(sp)
    assert sp.acknowledge("m1", [ack(3, 3, ACCEPT)], now_ms=3) == 0
    persist(sp)
    assert sp.acknowledge("m1", [ack(2, 3, ACCEPT)], now_ms=3) == codes.INVALID_RECORD_STATE
    # Offsets before the start offset are skipped (done already).
    assert sp.acknowledge("m1", [ack(0, 2, ACCEPT)], now_ms=3) == 0


def test_acknowledging_twice_while_the_write_is_pending_is_refused():
    sp = make()
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1) == 0
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1) == codes.INVALID_RECORD_STATE
    assert sp.pending_write_count() == 1


# --- delivery count limit ---------------------------------------------------------------------


def test_release_at_the_delivery_limit_archives():
    sp = make(delivery_count_limit=2)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 4, RELEASE)], now_ms=1)
    persist(sp)
    assert sp.acquire("m1", log((0, 4)), max_records=500, now_ms=2) == [
        AcquiredRecords(0, 4, 2)]
    sp.acknowledge("m1", [ack(0, 4, RELEASE)], now_ms=3)
    (write,) = persist(sp)
    assert write.batches == (StateBatch(0, 4, ARCHIVED, 2),)
    assert sp.start_offset == 5
    assert sp.acquire("m1", log((0, 4)), max_records=500, now_ms=4) == []


def test_throttled_delivery_near_the_limit():
    # limit 5: records delivered >= 3 times go out in halving groups; the last delivery alone.
    sp = make(delivery_count_limit=5)
    for attempt in range(1, 4):
        assert sp.acquire("m1", log((0, 7)), max_records=500, now_ms=0) == [
            AcquiredRecords(0, 7, attempt)]
        sp.acknowledge("m1", [ack(0, 7, RELEASE)], now_ms=0)
        persist(sp)
    # Delivered 3 times: 8 >> 1 = 4 records per fetch.
    assert sp.acquire("m1", log((0, 7)), max_records=500, now_ms=0) == [
        AcquiredRecords(0, 3, 4)]
    assert sp.acquire("m1", log((0, 7)), max_records=500, now_ms=0, fetch_offset=4) == [
        AcquiredRecords(4, 7, 4)]
    sp.acknowledge("m1", [ack(0, 7, RELEASE)], now_ms=0)
    persist(sp)
    # The fifth and last delivery: one record at a time.
    assert sp.acquire("m1", log((0, 7)), max_records=500, now_ms=0) == [
        AcquiredRecords(0, 0, 5)]
    assert sp.acquire("m1", log((0, 7)), max_records=500, now_ms=0, fetch_offset=1) == [
        AcquiredRecords(1, 1, 5)]


# --- locks ------------------------------------------------------------------------------------


def test_lock_expiry_returns_records_to_available():
    sp = make(record_lock_duration_ms=1000)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp.next_lock_deadline_ms() == 1000
    assert not sp.expire_locks(999)
    assert sp.expire_locks(1000)
    assert states(sp) == [(0, 4, AVAILABLE, 1, "")]
    (write,) = persist(sp)
    assert write.batches == (StateBatch(0, 4, AVAILABLE, 1),)
    assert sp.next_lock_deadline_ms() is None
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1001) == codes.INVALID_RECORD_STATE
    assert sp.acquire("m2", log((0, 4)), max_records=500, now_ms=1001) == [
        AcquiredRecords(0, 4, 2)]


def test_lock_expiry_at_the_limit_archives():
    sp = make(record_lock_duration_ms=10, delivery_count_limit=1)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp.expire_locks(10)
    assert [w.batches for w in persist(sp)] == [(StateBatch(0, 4, ARCHIVED, 1),)]
    assert sp.start_offset == 5


def test_per_offset_locks_expire_separately():
    sp = make(record_lock_duration_ms=100)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 1, RENEW)], now_ms=50)  # split; 0-1 renewed to 150
    assert sp.expire_locks(100)
    assert [s[2] for s in states(sp)] == [ACQUIRED, ACQUIRED, AVAILABLE, AVAILABLE, AVAILABLE]
    assert len(persist(sp)) == 3  # one write per expired lock, as Kafka's timer tasks
    assert sp.next_lock_deadline_ms() == 150
    assert sp.expire_locks(150)
    assert all(s[2] == AVAILABLE for s in states(sp))


def test_renew_extends_the_lock_and_can_be_disabled():
    sp = make(record_lock_duration_ms=1000)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 4, RENEW)], now_ms=900) == 0
    assert sp.pending_write() is None  # renewing is not persisted
    assert sp.next_lock_deadline_ms() == 1900
    assert not sp.expire_locks(1000)
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1500) == 0
    sp2 = make(renew_acknowledge_enable=False)
    sp2.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp2.acknowledge("m1", [ack(0, 4, RENEW)], now_ms=1) == codes.INVALID_RECORD_STATE


def test_release_acquired_records_of_a_member_that_left():
    sp = make()
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.acquire("m2", log((5, 9)), max_records=500, now_ms=0)
    sp.acquire("m1", log((10, 14)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(10, 11, ACCEPT)], now_ms=1)
    persist(sp)
    assert sp.release_acquired_records("m1", now_ms=2) == 0
    (write,) = persist(sp)
    assert write.batches == (StateBatch(0, 4, AVAILABLE, 1), StateBatch(12, 12, AVAILABLE, 1),
                             StateBatch(13, 13, AVAILABLE, 1), StateBatch(14, 14, AVAILABLE, 1))
    assert states(sp)[1] == (5, 9, ACQUIRED, 1, "m2")
    assert sp.next_fetch_offset() == 0


# --- persisting -------------------------------------------------------------------------------


def test_a_failed_write_rolls_the_acknowledgement_back():
    sp = make()
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1)
    assert sp.delivery_complete_count == 5
    assert sp.acquire("m2", log((0, 4)), max_records=500, now_ms=1) == []
    persist(sp, ok=False)
    assert states(sp) == [(0, 4, ACQUIRED, 1, "m1")]
    assert sp.delivery_complete_count == 0
    assert sp.start_offset == 0
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=2) == 0
    persist(sp)
    assert sp.start_offset == 5


def test_a_rollback_after_the_lock_ran_out_makes_records_available():
    sp = make(record_lock_duration_ms=100)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=50)
    assert not sp.expire_locks(100)  # the record is mid-transition: nothing to release
    persist(sp, ok=False)
    assert states(sp) == [(0, 4, AVAILABLE, 1, "")]
    assert sp.next_fetch_offset() == 0


def test_writes_complete_in_order():
    sp = make()
    sp.acquire("m1", log((0, 4), (5, 9)), max_records=500, batch_size=5, now_ms=0)
    sp.acknowledge("m1", [ack(0, 4, ACCEPT)], now_ms=1)
    first = sp.last_write_seq
    sp.acknowledge("m1", [ack(5, 9, ACCEPT)], now_ms=1)
    second = sp.last_write_seq
    assert sp.pending_write_count() == 2
    assert sp.pending_write().batches == (StateBatch(0, 4, ACKNOWLEDGED, 1),)
    assert sp.write_done(True) == first
    assert sp.start_offset == 5
    assert sp.pending_write().start_offset == 0  # the start offset of its own moment
    assert sp.write_done(True) == second
    assert sp.start_offset == 10
    with pytest.raises(IllegalStateError):
        sp.write_done(True)


# --- initialization and the persisted round trip --------------------------------------------


def test_auto_offset_reset():
    assert make(log_start_offset=3, log_end_offset=50, auto_offset_reset="latest").start_offset == 50
    assert make(log_start_offset=3, log_end_offset=50,
                auto_offset_reset="earliest").start_offset == 3
    sp = SharePartition("g", "t", TOPIC_ID, 0,
                        SharePartitionConfig(auto_offset_reset="by_duration:PT1H"))
    asked = []
    sp.initialize(None, log_start_offset=0, log_end_offset=100,
                  offset_for_reset=lambda s: asked.append(s) or 42)
    assert (asked, sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (
        ["by_duration:PT1H"], 42, 42, 42)
    sp = SharePartition("g", "t", TOPIC_ID, 0,
                        SharePartitionConfig(auto_offset_reset="by_duration:PT1H"))
    with pytest.raises(IllegalStateError):
        sp.initialize(None, log_start_offset=0, log_end_offset=100)
    assert sp.partition_state == SharePartitionState.FAILED
    # A persisted start offset of -1 (initialized, never written) also resets.
    assert make(ShareState(0, -1, ()), log_end_offset=7,
                auto_offset_reset="latest").start_offset == 7


def test_invalid_persisted_state_fails_the_load():
    with pytest.raises(IllegalStateError):
        make(ShareState(1, 10, (StateBatch(5, 9, AVAILABLE, 1),)))
    with pytest.raises(IllegalStateError):
        make(ShareState(1, 10, (StateBatch(12, 11, AVAILABLE, 1),)))


def test_load_from_persisted_state_with_gaps():
    persisted = ShareState(3, 5, (StateBatch(5, 9, AVAILABLE, 2),
                                  StateBatch(10, 14, ACKNOWLEDGED, 1),
                                  StateBatch(20, 24, ACQUIRED, 1)))
    sp = make(persisted)
    assert (sp.state_epoch, sp.start_offset, sp.end_offset) == (3, 5, 24)
    assert sp.delivery_complete_count == 5
    assert states(sp)[-1] == (20, 24, AVAILABLE, 1, "")  # nobody holds records after a load
    assert sp.next_fetch_offset() == 5
    got = sp.acquire("m1", log((5, 9), (10, 14), (15, 19), (20, 24), (25, 29)),
                     max_records=500, now_ms=0)
    # The gap 15-19 (never delivered) is acquired fresh; 25-29 are new.
    assert got == [AcquiredRecords(5, 9, 3), AcquiredRecords(15, 19, 1),
                   AcquiredRecords(20, 24, 2), AcquiredRecords(25, 29, 1)]


def test_load_trims_leading_completed_records():
    sp = make(ShareState(1, 0, (StateBatch(0, 9, ACKNOWLEDGED, 1),
                                StateBatch(10, 14, ARCHIVED, 3),
                                StateBatch(15, 19, AVAILABLE, 1))))
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (15, 19, 15)
    sp = make(ShareState(1, 0, (StateBatch(0, 9, ACKNOWLEDGED, 1),)))
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (10, 10, 10)


def test_persisted_round_trip():
    coordinator = Coordinator()
    sp = make(max_in_flight_records=1000)
    sp.acquire("m1", log((0, 9), (10, 19), (20, 29)), max_records=500, batch_size=10, now_ms=0)
    sp.acknowledge("m1", [ack(0, 9, ACCEPT), ack(10, 19, *([RELEASE, ACCEPT] * 5)),
                          ack(20, 29, RELEASE)], now_ms=1)
    for write in persist(sp):
        coordinator.write(write)
    sp.acquire("m2", log((10, 19), (20, 29)), max_records=500, now_ms=2, fetch_offset=10)
    sp.acknowledge("m2", [ack(20, 29, REJECT)], now_ms=3)
    for write in persist(sp):
        coordinator.write(write)
    before = [s[:4] for s in states(sp) if s[2] != ACQUIRED]
    reloaded = make(coordinator.read())
    after = [s[:4] for s in states(reloaded)]
    # What was persisted comes back; what m2 still held comes back AVAILABLE.
    assert reloaded.start_offset == coordinator.start_offset
    assert set(before) <= set(after) | {b for b in before if b[1] < reloaded.start_offset}
    for first, last, st, count in after:
        assert st in (AVAILABLE, ACKNOWLEDGED, ARCHIVED)
    assert reloaded.next_fetch_offset() == 10


# --- DLQ (KIP-1191) ---------------------------------------------------------------------------


def test_reject_goes_to_archiving_and_the_dlq_then_archived():
    sp = make(dlq_enabled=True)
    sp.acquire("m1", log((0, 4), (5, 9)), max_records=500, batch_size=5, now_ms=0)
    sp.acknowledge("m1", [ack(0, 4, REJECT), ack(5, 9, ACCEPT)], now_ms=1)
    assert sp.take_dlq_batches() == []  # not until the state is persisted
    (write,) = persist(sp)
    assert write.batches == (StateBatch(0, 4, ARCHIVING, 1), StateBatch(5, 9, ACKNOWLEDGED, 1))
    assert sp.start_offset == 0  # ARCHIVING is not terminal
    assert sp.take_dlq_batches() == [DlqBatch(0, 4, 1, DLQ_CAUSE_CLIENT_REJECT)]
    assert sp.take_dlq_batches() == []
    sp.archiving_done(0, 4)
    (write,) = persist(sp)
    assert write.batches == (StateBatch(0, 4, ARCHIVED, 1),)
    assert sp.start_offset == 10
    with pytest.raises(IllegalStateError):
        sp.archiving_done(0, 4)


def test_delivery_count_exceeded_goes_to_the_dlq():
    sp = make(dlq_enabled=True, delivery_count_limit=1, record_lock_duration_ms=10)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.expire_locks(10)
    assert states(sp) == [(0, 4, ARCHIVING, 1, "")]
    persist(sp)
    assert sp.take_dlq_batches() == [DlqBatch(0, 4, 1, DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED)]
    sp.acquire("m1", log((5, 9)), max_records=500, now_ms=11)
    sp.acknowledge("m1", [ack(5, 9, RELEASE)], now_ms=12)
    persist(sp)
    assert sp.take_dlq_batches() == [DlqBatch(5, 9, 1, DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED)]
    sp.archiving_done(5, 9)
    sp.archiving_done(0, 4)
    persist(sp)
    assert sp.start_offset == 10


def test_persisted_archiving_records_resume_their_dlq_write():
    sp = make(ShareState(1, 0, (StateBatch(0, 4, ARCHIVING, 2), StateBatch(5, 9, ARCHIVING, 5))),
              dlq_enabled=True)
    assert sp.take_dlq_batches() == [DlqBatch(0, 4, 2, DLQ_CAUSE_CLIENT_REJECT),
                                     DlqBatch(5, 9, 5, DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED)]
    sp.archiving_done(0, 4)
    sp.archiving_done(5, 9)
    persist(sp)
    assert sp.start_offset == 10


# --- read_committed -------------------------------------------------------------------------


def txn_log() -> list[FetchedBatch]:
    return [FetchedBatch(0, 2, producer_id=7, is_transactional=True),
            FetchedBatch(3, 3, producer_id=7, is_transactional=True, is_control=True,
                         is_abort_marker=True),
            FetchedBatch(4, 6),
            FetchedBatch(7, 8, producer_id=9, is_transactional=True)]


def test_read_committed_archives_aborted_transactions():
    sp = make(isolation_level="read_committed")
    got = sp.acquire("m1", txn_log(), max_records=500, batch_size=2, now_ms=0,
                     aborted_producer_ranges=[(7, 0, 3)])
    # In-flight batches 0-2, 3-6, 7-8 (cut at log batches once 2 records are reached); 0-2
    # were aborted: archived, not delivered. The ABORT marker (3) is acquired like any offset
    # (the client skips control records), as are 4-8.
    assert got == [AcquiredRecords(3, 6, 1), AcquiredRecords(7, 8, 1)]
    assert states(sp)[0] == (0, 2, ARCHIVED, 1, "")
    assert sp.acknowledge("m1", [ack(3, 8, ACCEPT)], now_ms=1) == 0
    persist(sp)
    assert sp.start_offset == 9


def test_read_uncommitted_delivers_aborted_transactions():
    sp = make()
    got = sp.acquire("m1", txn_log(), max_records=500, now_ms=0,
                     aborted_producer_ranges=[(7, 0, 3)])
    assert got == [AcquiredRecords(0, 8, 1)]


def test_read_committed_cuts_an_aborted_batch_out_of_the_middle():
    sp = make(isolation_level="read_committed")
    batches = [FetchedBatch(0, 1), FetchedBatch(2, 4, producer_id=3, is_transactional=True),
               FetchedBatch(5, 6)]
    got = sp.acquire("m1", batches, max_records=500, now_ms=0,
                     aborted_producer_ranges=[(3, 2)])
    assert got == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1)]
    assert [s[2] for s in states(sp)] == [ACQUIRED, ACQUIRED, ARCHIVED, ARCHIVED, ARCHIVED,
                                          ACQUIRED, ACQUIRED]


# --- log start offset and gaps --------------------------------------------------------------


def test_log_start_offset_moving_archives_available_records():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 9, RELEASE)], now_ms=1)
    persist(sp)
    sp.update_log_start_offset(5)
    assert sp.start_offset == 5
    assert sp.next_fetch_offset() == 5
    sp.update_log_start_offset(3)  # never backwards
    assert sp.start_offset == 5
    got = sp.acquire("m1", log((5, 9)), max_records=500, now_ms=2)
    assert got == [AcquiredRecords(5, 9, 2)]
    empty = make()
    empty.update_log_start_offset(100)
    assert (empty.start_offset, empty.end_offset, empty.next_fetch_offset()) == (100, 100, 100)


def test_records_gone_from_the_log_are_archived_when_the_read_skips_them():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 9, RELEASE)], now_ms=1)
    persist(sp)
    # Compaction removed 0-4: the read from 0 starts at 5.
    got = sp.acquire("m2", log((5, 9)), max_records=500, now_ms=2, fetch_offset=0)
    assert got == [AcquiredRecords(5, 9, 2)]
    assert [s[2] for s in states(sp)[:5]] == [ARCHIVED] * 5


def test_acknowledge_across_a_moved_start_offset():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    sp.update_log_start_offset(5)
    assert sp.acknowledge("m1", [ack(0, 9, ACCEPT)], now_ms=1) == 0
    (write,) = persist(sp)
    assert [b.first_offset for b in write.batches] == [5, 6, 7, 8, 9]
    # As in Kafka, 0-4 (before the start offset, still ACQUIRED) hold the start offset back
    # until their lock runs out; then they are archived.
    assert sp.start_offset == 5
    assert sp.expire_locks(30000)
    persist(sp)
    assert sp.start_offset == 10
    assert sp.cached_batch_count() == 0


# --- many cycles ----------------------------------------------------------------------------


def check_invariants(sp: SharePartition, limit: int, previous_start: int, *,
                     exact_count: bool = True) -> None:
    seen: dict[int, str] = {}
    for first, last, st, count, member in states(sp):
        for offset in range(first, last + 1):
            assert offset not in seen, f"offset {offset} twice"
            seen[offset] = member
        if st == ACQUIRED:
            assert member, "acquired without an owner"
            assert 1 <= count <= limit
        else:
            assert member == ""
        if st == AVAILABLE:
            assert count < limit, "available at the delivery limit"
    assert sp.start_offset >= previous_start
    assert sp.end_offset >= sp.start_offset - 1
    # KIP-1226's count: the terminal records at or after the start offset.
    # (Kafka's count drifts when a failed write rolls back records whose lock ran out:
    # test_rollback_after_expiry_at_the_limit_archives_without_counting.)
    if exact_count:
        terminal = sum(1 for f, l, st, _c, _m in states(sp)
                       if st in (ACKNOWLEDGED, ARCHIVED)
                       for o in range(f, l + 1) if o >= sp.start_offset)
        assert sp.delivery_complete_count == terminal


@pytest.mark.parametrize("seed", range(12))
def test_randomized_acquire_acknowledge_cycles(seed: int):
    rng = random.Random(seed)
    limit = rng.choice([2, 3, 5])
    dlq = seed % 2 == 1
    write_failure_rate = 0.1 if seed < 3 else 0.0
    sp = make(delivery_count_limit=limit, record_lock_duration_ms=50, max_in_flight_records=100,
              dlq_enabled=dlq)
    log_end = 400
    log_batches = []
    offset = 0
    while offset < log_end:
        size = rng.randint(1, 7)
        log_batches.append(FetchedBatch(offset, min(offset + size, log_end) - 1))
        offset += size
    members = ["a", "b", "c"]
    held: dict[str, set[int]] = {m: set() for m in members}
    now_ms = 0
    start = sp.start_offset

    def read_from(offset: int) -> list[FetchedBatch]:
        return [b for b in log_batches if b.last_offset >= offset][:20]

    for _ in range(600):
        now_ms += rng.randint(0, 20)
        member = rng.choice(members)
        action = rng.random()
        if action < 0.45:
            fetch_offset = sp.next_fetch_offset()
            batches = read_from(fetch_offset)
            got = sp.acquire(member, batches, max_records=rng.randint(1, 30), now_ms=now_ms,
                             fetch_offset=fetch_offset,
                             acquire_mode=rng.choice(list(ShareAcquireMode)))
            for r in got:
                assert r.delivery_count <= limit
                for o in range(r.first_offset, r.last_offset + 1):
                    for other in members:
                        assert o not in held[other], f"{o} acquired twice"
                    held[member].add(o)
        elif action < 0.85 and held[member]:
            offsets = sorted(held[member])
            first = rng.choice(offsets)
            last = first
            while last + 1 in held[member] and rng.random() < 0.8:
                last += 1
            if rng.random() < 0.5:
                types: tuple[int, ...] = (rng.choice([ACCEPT, RELEASE, REJECT]),)
            else:
                types = tuple(rng.choice([ACCEPT, RELEASE, REJECT, RENEW])
                              for _ in range(last - first + 1))
            error = sp.acknowledge(member, [AckBatch(first, last, types)], now_ms=now_ms)
            if error == 0 and not all(t == RENEW for t in types):
                for o in range(first, last + 1):
                    index = o - first if len(types) > 1 else 0
                    if types[index] != RENEW:
                        held[member].discard(o)
        elif action < 0.9:
            sp.release_acquired_records(member, now_ms=now_ms)
            held[member].clear()
        if sp.expire_locks(now_ms):
            # Expired offsets are nobody's now.
            owned = {o for f, l, st, _c, m in states(sp) if st == ACQUIRED
                     for o in range(f, l + 1)}
            for m in members:
                held[m] &= owned
        for _write in range(rng.randint(0, 3)):
            if sp.pending_write() is None:
                break
            sp.write_done(rng.random() >= write_failure_rate)
        # Writes that failed roll back to ACQUIRED: re-derive what each member holds.
        for m in members:
            held[m] = {o for f, l, st, _c, mem in states(sp) if st == ACQUIRED and mem == m
                       for o in range(f, l + 1)}
        for batch in sp.take_dlq_batches():
            sp.archiving_done(batch.first_offset, batch.last_offset)
        check_invariants(sp, limit, start, exact_count=write_failure_rate == 0)
        start = sp.start_offset

    # Drain: finish every write, then acknowledge everything until the log is consumed.
    for _ in range(2000):
        persist(sp)
        for batch in sp.take_dlq_batches():
            sp.archiving_done(batch.first_offset, batch.last_offset)
        persist(sp)
        if sp.start_offset >= log_end:
            break
        now_ms += 1000
        sp.expire_locks(now_ms)
        persist(sp)
        fetch_offset = sp.next_fetch_offset()
        batches = read_from(fetch_offset)
        for r in sp.acquire("a", batches, max_records=50, now_ms=now_ms,
                            fetch_offset=fetch_offset):
            assert sp.acknowledge("a", [AckBatch(r.first_offset, r.last_offset, (ACCEPT,))],
                                  now_ms=now_ms) == 0
        check_invariants(sp, limit, start, exact_count=write_failure_rate == 0)
        start = sp.start_offset
    assert sp.start_offset == log_end
    assert sp.cached_batch_count() == 0
    assert sp.delivery_complete_count == 0


# --- more of Kafka's scenarios ------------------------------------------------------------


def test_a_read_starting_inside_an_in_flight_batch_takes_only_the_requested_offsets():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 9, RELEASE)], now_ms=1)
    persist(sp)
    got = sp.acquire("m2", log((5, 9)), max_records=500, now_ms=2, fetch_offset=5)
    assert got == [AcquiredRecords(5, 9, 2)]
    assert [s[2] for s in states(sp)] == [AVAILABLE] * 5 + [ACQUIRED] * 5
    assert sp.next_fetch_offset() == 0


def test_a_log_batch_straddling_the_start_offset_after_everything_was_acknowledged():
    sp = make()
    sp.acquire("m1", log((0, 9)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 9, ACCEPT)], now_ms=1)
    persist(sp)
    assert sp.next_fetch_offset() == 10
    # The log hands back whole batches: one starting before the fetch offset.
    got = sp.acquire("m1", log((5, 14), (15, 19)), max_records=500, now_ms=2, fetch_offset=10)
    assert got == [AcquiredRecords(10, 19, 1)]


def test_release_at_the_limit_with_the_dlq_goes_archiving():
    sp = make(dlq_enabled=True, delivery_count_limit=1)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    assert sp.release_acquired_records("m1", now_ms=1) == 0
    (write,) = persist(sp)
    assert write.batches == (StateBatch(0, 4, ARCHIVING, 1),)
    assert sp.take_dlq_batches() == [DlqBatch(0, 4, 1, DLQ_CAUSE_DELIVERY_COUNT_EXCEEDED)]


def test_a_failed_partition_does_not_load_again():
    sp = SharePartition("g", "t", TOPIC_ID, 0, SharePartitionConfig())
    with pytest.raises(IllegalStateError):
        sp.initialize(ShareState(0, 10, (StateBatch(1, 2, AVAILABLE, 1),)), log_start_offset=0,
                      log_end_offset=0)
    with pytest.raises(IllegalStateError):
        sp.initialize(None, log_start_offset=0, log_end_offset=0)
    sp = make()
    sp.mark_fenced()
    assert sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0) == []


def test_parse_auto_offset_reset_follows_kafka():
    from seglog.coordinator.share_partition import (
        auto_offset_reset_timestamp_ms,
        parse_auto_offset_reset,
    )
    assert parse_auto_offset_reset("latest") == ("latest", None)
    assert parse_auto_offset_reset("earliest") == ("earliest", None)
    assert parse_auto_offset_reset("by_duration:PT1H") == ("by_duration", 3_600_000)
    assert parse_auto_offset_reset("by_duration:P1DT2H3M4.5S") == ("by_duration", 93_784_500)
    assert parse_auto_offset_reset("by_duration:pt1m") == ("by_duration", 60_000)
    assert auto_offset_reset_timestamp_ms("by_duration:PT10S", 100_000) == 90_000
    assert auto_offset_reset_timestamp_ms("latest", 100_000) is None
    for bad in ("none", "LATEST", "by_duration", "by_duration:", "by_duration:PT",
                "by_duration:-PT1H", "by_duration:1h"):
        with pytest.raises(ValueError):
            parse_auto_offset_reset(bad)


def test_many_per_record_acknowledgements_advance_the_start_offset_record_by_record():
    sp = make()
    sp.acquire("m1", log((0, 499)), max_records=500, now_ms=0)
    for offset in range(500):
        assert sp.acknowledge("m1", [ack(offset, offset, ACCEPT)], now_ms=1) == 0
        persist(sp)
        assert sp.start_offset == min(offset + 1, 500)
    assert sp.cached_batch_count() == 0


def test_malformed_acknowledgement_batches_are_invalid_request():
    sp = make()
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    for bad in (ack(4, 0, ACCEPT), ack(0, 4), ack(0, 4, ACCEPT, ACCEPT)):
        assert sp.acknowledge("m1", [bad], now_ms=1) == codes.INVALID_REQUEST
    assert states(sp) == [(0, 4, ACQUIRED, 1, "m1")]


@pytest.mark.parametrize("backend", ["native", "pure"])
def test_fetched_batches_from_the_codec(backend: str):
    from seglog._backend import get_backend
    from seglog.format import CONTROL_TYPE_ABORT
    codec = get_backend(backend).codec
    data = codec.encode_batch([b"v1", b"v2"], base_offset=5, producer_id=9, producer_epoch=0,
                              base_sequence=0, is_transactional=True)
    marker = codec.encode_control_batch(CONTROL_TYPE_ABORT, producer_id=9, producer_epoch=0,
                                        base_offset=7)
    batches = [FetchedBatch.of(b) for b in codec.iter_batches(bytes(data) + bytes(marker))]
    assert batches == [FetchedBatch(5, 6, 9, True, False, False),
                       FetchedBatch(7, 7, 9, True, True, True)]


def test_a_gap_before_the_first_persisted_batch_is_delivered_first():
    sp = make(ShareState(1, 0, (StateBatch(5, 9, ACKNOWLEDGED, 1),
                                StateBatch(12, 14, AVAILABLE, 2))))
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 14, 0)
    got = sp.acquire("m1", log((0, 9), (10, 14)), max_records=500, now_ms=0)
    assert got == [AcquiredRecords(0, 4, 1), AcquiredRecords(10, 11, 1),
                   AcquiredRecords(12, 14, 3)]
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT), ack(10, 14, ACCEPT)], now_ms=1) == 0
    persist(sp)
    assert sp.next_fetch_offset() == 15
    got = sp.acquire("m1", log((15, 19)), max_records=500, now_ms=2)
    assert got == [AcquiredRecords(15, 19, 1)]
    sp.acknowledge("m1", [ack(15, 19, ACCEPT)], now_ms=3)
    persist(sp)
    assert (sp.start_offset, sp.cached_batch_count()) == (20, 0)


def test_max_records_inside_a_persisted_gap():
    sp = make(ShareState(1, 0, (StateBatch(10, 14, AVAILABLE, 1),)))
    got = sp.acquire("m1", log((0, 2), (3, 5), (6, 9), (10, 14)), max_records=4, now_ms=0)
    # Whole log batches up to 4 records: 0-2 then 3-5 (the batch holding offset 3).
    assert got == [AcquiredRecords(0, 5, 1)]
    assert sp.next_fetch_offset() == 6
    got = sp.acquire("m2", log((6, 9), (10, 14)), max_records=100, now_ms=0, fetch_offset=6)
    assert got == [AcquiredRecords(6, 9, 1), AcquiredRecords(10, 14, 2)]


def test_rollback_after_expiry_at_the_limit_archives_without_counting():
    # Kafka's InFlightState.completeStateTransition(false) after the lock ran out: ARCHIVED at
    # the delivery limit (even with the DLQ), and rollbackOrProcessStateUpdates does not count
    # it in deliveryCompleteCount. Ported as is.
    sp = make(delivery_count_limit=1, record_lock_duration_ms=10, dlq_enabled=True)
    sp.acquire("m1", log((0, 4)), max_records=500, now_ms=0)
    sp.acknowledge("m1", [ack(0, 4, RELEASE)], now_ms=5)
    assert not sp.expire_locks(10)
    persist(sp, ok=False)
    assert states(sp) == [(0, 4, ARCHIVED, 1, "")]
    assert sp.take_dlq_batches() == []
    assert sp.delivery_complete_count == 0


@pytest.mark.parametrize("seed", range(12))
def test_randomized_with_reloads_compaction_aborts_and_log_start_moves(seed: int):
    """As above, on a log with holes (compaction) and aborted transactions read
    read_committed, with the log start moving and the partition reloaded from its persisted
    writes now and then (a new leader: nobody holds anything after a load)."""
    rng = random.Random(1000 + seed)
    limit = rng.choice([2, 3, 5])
    config = dict(delivery_count_limit=limit, record_lock_duration_ms=40,
                  max_in_flight_records=100, isolation_level="read_committed",
                  dlq_enabled=seed % 2 == 1)
    coordinator = Coordinator()
    log_end = 300
    log_batches: list[FetchedBatch] = []
    aborted: list[tuple[int, int]] = []
    offset = 0
    pid = 100
    while offset < log_end:
        size = rng.randint(1, 6)
        last = min(offset + size, log_end) - 1
        kind = rng.random()
        if kind < 0.15:
            pid += 1
            log_batches.append(FetchedBatch(offset, last, pid, True))
            if rng.random() < 0.5 and last + 1 < log_end:
                aborted.append((pid, offset))
                log_batches.append(FetchedBatch(last + 1, last + 1, pid, True, True, True))
                last += 1
        elif kind < 0.25:
            pass  # compacted away: a hole in the log
        else:
            log_batches.append(FetchedBatch(offset, last))
        offset = last + 1

    def read_from(offset: int) -> list[FetchedBatch]:
        return [b for b in log_batches if b.last_offset >= offset][:15]

    def reload() -> SharePartition:
        sp = SharePartition("g", "t", TOPIC_ID, 0,
                            SharePartitionConfig(auto_offset_reset="earliest", **config))
        sp.initialize(coordinator.read() if coordinator.start_offset >= 0 else None,
                      log_start_offset=0, log_end_offset=log_end)
        return sp

    def drain_writes(sp: SharePartition) -> None:
        for _ in range(100):
            for batch in sp.take_dlq_batches():
                sp.archiving_done(batch.first_offset, batch.last_offset)
            state = sp.pending_write()
            if state is None:
                return
            coordinator.write(state)
            sp.write_done(True)

    sp = reload()
    members = ["a", "b"]
    now_ms = 0
    start = sp.start_offset
    log_start = 0
    aborted_offsets = {o for b in log_batches if b.is_transactional and not b.is_control
                       and (b.producer_id, b.base_offset) in aborted
                       for o in range(b.base_offset, b.last_offset + 1)}
    for _ in range(400):
        now_ms += rng.randint(0, 15)
        member = rng.choice(members)
        action = rng.random()
        if action < 0.5:
            fetch_offset = sp.next_fetch_offset()
            batches = [b for b in read_from(fetch_offset) if b.last_offset >= log_start]
            busy = {o for f, l, st, _c, _m in states(sp) if st != AVAILABLE
                    for o in range(f, l + 1)}
            got = sp.acquire(member, batches, max_records=rng.randint(1, 25), now_ms=now_ms,
                             fetch_offset=fetch_offset, aborted_producer_ranges=aborted)
            for r in got:
                assert r.delivery_count <= limit
                for o in range(r.first_offset, r.last_offset + 1):
                    assert o not in aborted_offsets, f"aborted record {o} delivered"
                    assert o not in busy, f"{o} acquired while not available"
        elif action < 0.85:
            held = [(f, l) for f, l, st, _c, m in states(sp) if st == ACQUIRED and m == member]
            if held:
                first, last = rng.choice(held)
                ack_type = rng.choice([ACCEPT, RELEASE, REJECT, GAP])
                assert sp.acknowledge(member, [AckBatch(first, last, (ack_type,))],
                                      now_ms=now_ms) == 0
        elif action < 0.9:
            log_start = min(log_end, log_start + rng.randint(0, 10))
            sp.update_log_start_offset(log_start)
        elif action < 0.95:
            drain_writes(sp)
            acknowledged = {o for f, l, st, _c, _m in states(sp) if st == ACKNOWLEDGED
                            for o in range(f, l + 1)}
            sp = reload()
            # The persisted start offset is the one of the last write (Kafka writes it with
            # the next change), and archiving aborted or vanished records is not written:
            # a reload may start lower, but acknowledged records stay acknowledged.
            for f, l, st, _c, _m in states(sp):
                for o in range(f, l + 1):
                    assert o not in acknowledged or st == ACKNOWLEDGED
            assert not acknowledged or sp.start_offset > min(acknowledged) \
                or all(st == ACKNOWLEDGED for f, l, st, _c, _m in states(sp)
                       if f <= min(acknowledged) <= l)
            sp.update_log_start_offset(log_start)  # a fetch out of range would do it
            start = sp.start_offset
        else:
            sp.release_acquired_records(member, now_ms=now_ms)
        sp.expire_locks(now_ms)
        drain_writes(sp)
        # Kafka's delivery-complete count also counts records archived below a moved start
        # offset (archiveRecords counts all it archives): not exact here.
        check_invariants(sp, limit, start, exact_count=False)
        start = sp.start_offset

    for _ in range(3000):
        drain_writes(sp)
        if sp.start_offset >= log_end:
            break
        now_ms += 100
        sp.expire_locks(now_ms)
        drain_writes(sp)
        fetch_offset = sp.next_fetch_offset()
        batches = read_from(fetch_offset)
        if not batches:
            # Only holes left: the log's end moved the start offset (as a fetch answering
            # OFFSET_OUT_OF_RANGE would).
            sp.update_log_start_offset(log_end)
            continue
        for r in sp.acquire("a", batches, max_records=50, now_ms=now_ms,
                            fetch_offset=fetch_offset, aborted_producer_ranges=aborted):
            assert sp.acknowledge("a", [AckBatch(r.first_offset, r.last_offset, (ACCEPT,))],
                                  now_ms=now_ms) == 0
        check_invariants(sp, limit, start, exact_count=False)
        start = sp.start_offset
    assert sp.start_offset >= log_end
    assert all(st in (ACKNOWLEDGED, ARCHIVED) for _f, _l, st, _c, _m in states(sp))


def test_config_from_group_configs_by_kafka_names():
    values = {"share.record.lock.duration.ms": "15000", "share.delivery.count.limit": "3",
              "share.partition.max.record.locks": "500", "share.auto.offset.reset": "earliest",
              "share.isolation.level": "read_committed",
              "share.renew.acknowledge.enable": "false",
              "errors.deadletterqueue.topic.name": "dlq"}
    config = SharePartitionConfig.from_group_configs(values.get)
    assert config == SharePartitionConfig(15000, 3, 500, "earliest", "read_committed", True,
                                          False)
    assert not SharePartitionConfig.from_group_configs(values.get, dlq_allowed=False).dlq_enabled
    assert SharePartitionConfig.from_group_configs({}.get) == SharePartitionConfig()
    with pytest.raises(ValueError):
        SharePartitionConfig.from_group_configs({"share.auto.offset.reset": "none"}.get)


@pytest.mark.parametrize("seed", range(3))
def test_any_acknowledgement_is_an_error_code_never_an_exception(seed: int):
    rng = random.Random(seed)
    sp = make(dlq_enabled=seed == 1, record_lock_duration_ms=20)
    now_ms = 0
    for _ in range(400):
        now_ms += rng.randint(0, 10)
        fetch_offset = sp.next_fetch_offset()
        if rng.random() < 0.3:
            sp.acquire(rng.choice("ab"), log((fetch_offset, fetch_offset + rng.randint(0, 9))),
                       max_records=rng.randint(1, 20), now_ms=now_ms)
        first = rng.choice([-5, 0, rng.randint(0, 200), 2**62])
        last = first + rng.choice([-3, 0, rng.randint(0, 30), 2**40])
        width = last - first + 1
        if rng.random() < 0.5 or not 0 < width <= 64:
            types: tuple[int, ...] = (rng.randint(-2, 6),) if rng.random() < 0.9 else ()
        else:
            types = tuple(rng.randint(-1, 5) for _ in range(width))
        code = sp.acknowledge(rng.choice("ab"), [AckBatch(first, last, types)], now_ms=now_ms)
        assert code in (codes.NONE, codes.INVALID_REQUEST, codes.INVALID_RECORD_STATE,
                        codes.UNKNOWN_SERVER_ERROR)
        sp.expire_locks(now_ms)
        persist(sp, ok=rng.random() < 0.8)
        for batch in sp.take_dlq_batches():
            sp.archiving_done(batch.first_offset, batch.last_offset)
