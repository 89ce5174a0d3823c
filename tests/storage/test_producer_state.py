"""Producer state: Kafka's idempotence and transaction rules, snapshots, expiration, LSO.

Tests that touch batches take the ``backend`` fixture. ``ModelLog`` plays the part the Log
will play: analyze the append before writing (client batches still have base offset 0), answer
duplicates with their original offsets, write, then apply; it keeps every batch it "wrote",
re-encoded at its real offsets, for replay tests.
"""

from __future__ import annotations

import os
import struct

import pytest

from seglog.errors import (
    CorruptSnapshotError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from seglog.filenames import snapshot_file
from seglog.format import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, INT32_MAX
from seglog.storage.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    ORIGIN_COORDINATOR,
    ORIGIN_REPLICATION,
    BatchMetadata,
    CompletedTxn,
    LastRecord,
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    decrement_sequence,
    encode_snapshot,
    increment_sequence,
    list_snapshot_offsets,
    rebuild_producer_state,
)
from seglog.storage.txnindex import AbortedTxn, TransactionIndex

PID, PID2 = 1000, 2000
TS = 1_700_000_000_000  # a fixed "now" for records and the clock
DAY_MS = 86_400_000


def one_batch(backend, raw):
    (batch,) = list(backend.iter_batches(raw))
    return batch


def data_batch(backend, *, pid=PID, epoch=0, seq=0, count=1, base_offset=0, txn=False, ts=TS):
    raw = backend.encode_batch(
        [b"v%d" % i for i in range(count)], timestamps_ms=ts, base_offset=base_offset,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    return one_batch(backend, raw)


def marker(backend, control_type, *, pid=PID, epoch=0, coordinator_epoch=0, base_offset=0, ts=TS):
    raw = backend.encode_control_batch(
        control_type, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
        base_offset=base_offset, timestamp_ms=ts)
    return one_batch(backend, raw)


class ModelLog:
    """The append protocol the Log follows, over a list of batches."""

    def __init__(self, backend, dir_path, **manager_kwargs):
        self.backend = backend
        self.dir_path = str(dir_path)
        self.psm = ProducerStateManager(self.dir_path, backend=backend, **manager_kwargs)
        self.batches = []  # at their real offsets
        self.end = 0
        self.txn_index = TransactionIndex(self.dir_path, 0)

    def append(self, *, pid=PID, epoch=0, seq=0, count=1, txn=False, ts=TS, plain=False):
        """Append one client batch; returns (first, last) offsets (the original ones for a
        duplicate)."""
        kwargs = dict(count=count, ts=ts)
        if not plain:
            kwargs.update(pid=pid, epoch=epoch, seq=seq, txn=txn)
        else:
            kwargs.update(pid=-1, epoch=-1, seq=-1)
        client = data_batch(self.backend, base_offset=0, **kwargs)
        analysis = self.psm.analyze_batches([client], first_offset=self.end)
        if analysis.duplicate is not None:
            return analysis.duplicate.first_offset, analysis.duplicate.last_offset
        return self._write(data_batch(self.backend, base_offset=self.end, **kwargs), analysis)

    def end_txn(self, control_type, *, pid=PID, epoch=0, coordinator_epoch=0, ts=TS):
        batch = marker(self.backend, control_type, pid=pid, epoch=epoch,
                       coordinator_epoch=coordinator_epoch, base_offset=self.end, ts=ts)
        analysis = self.psm.analyze_batches([batch], origin=ORIGIN_COORDINATOR)
        return self._write(batch, analysis)

    def _write(self, batch, analysis):
        first = self.end
        self.batches.append(batch)
        self.end = batch.next_offset
        self.psm.apply_append(analysis, end_offset=self.end, txn_index=self.txn_index)
        return first, batch.last_offset


# --- sequence arithmetic -------------------------------------------------------------------------


def test_sequence_arithmetic_wraps_at_int32_max():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(8, 3) == 5
    assert decrement_sequence(0, 1) == INT32_MAX
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert BatchMetadata(last_seq=1, last_offset=10, offset_delta=3, timestamp_ms=0).first_seq == INT32_MAX - 1
    assert BatchMetadata(last_seq=1, last_offset=10, offset_delta=3, timestamp_ms=0).first_offset == 7


# --- duplicates ----------------------------------------------------------------------------------


def test_duplicates_of_each_of_the_last_five_batches_return_original_offsets(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    originals = []
    seq = 0
    for i in range(7):
        count = i + 1
        originals.append((seq, count, log.append(seq=seq, count=count)))
        seq += count
    end = log.end
    for seq, count, offsets in originals[-NUM_BATCHES_TO_RETAIN:]:
        assert log.append(seq=seq, count=count) == offsets
    assert log.end == end  # nothing was written
    # The 6th-oldest (and anything older) is no longer remembered: out of order.
    for seq, count, _ in originals[:-NUM_BATCHES_TO_RETAIN]:
        with pytest.raises(OutOfOrderSequenceError):
            log.append(seq=seq, count=count)
    assert log.end == end


def test_duplicate_needs_the_same_epoch_and_exact_range(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(seq=0, count=3)
    log.append(seq=3, count=3)
    with pytest.raises(OutOfOrderSequenceError):  # partial overlap with [3, 5]
        log.append(seq=4, count=2)
    with pytest.raises(OutOfOrderSequenceError):  # overlaps both
        log.append(seq=2, count=3)
    with pytest.raises(OutOfOrderSequenceError):  # same first sequence, other length
        log.append(seq=3, count=2)
    with pytest.raises(OutOfOrderSequenceError):  # a gap
        log.append(seq=7, count=1)
    assert log.append(seq=6, count=1) == (6, 6)


def test_duplicate_anywhere_in_a_multi_batch_append_writes_nothing(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(seq=0, count=2)  # offsets 0..1
    fresh = data_batch(backend, seq=2, count=1)
    dup = data_batch(backend, seq=0, count=2)
    analysis = log.psm.analyze_batches([fresh, dup], first_offset=log.end)
    assert analysis.duplicate == BatchMetadata(1, 1, 1, TS)
    assert analysis.append_infos == {} and analysis.completed_txns == []


def test_batches_of_one_producer_in_one_append_are_checked_in_order(backend, tmp_path):
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    first = data_batch(backend, seq=0, count=2)
    second = data_batch(backend, seq=2, count=3)
    analysis = psm.analyze_batches([first, second], first_offset=10)
    psm.apply_append(analysis, end_offset=15)
    entry = psm.last_entry(PID)
    assert list(entry.batch_metadata) == [BatchMetadata(1, 11, 1, TS), BatchMetadata(4, 14, 2, TS)]
    with pytest.raises(OutOfOrderSequenceError):
        psm.analyze_batches([data_batch(backend, seq=5), data_batch(backend, seq=7)], first_offset=15)
    # An analysis changes nothing until applied.
    psm.analyze_batches([data_batch(backend, seq=5)], first_offset=15)
    assert psm.last_entry(PID).last_seq == 4 and psm.map_end_offset == 15


def test_batches_without_producer_id_are_ignored(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    assert log.append(plain=True, count=3) == (0, 2)
    assert log.psm.producer_id_count == 0
    assert log.psm.map_end_offset == 3


# --- epochs ----------------------------------------------------------------------------------------


def test_epoch_bump_must_start_at_sequence_zero(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(epoch=0, seq=0, count=2)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(epoch=1, seq=2)
    assert log.append(epoch=1, seq=0) == (2, 2)
    entry = log.psm.last_entry(PID)
    assert entry.producer_epoch == 1
    assert list(entry.batch_metadata) == [BatchMetadata(0, 2, 0, TS)]  # old epoch forgotten
    # The old epoch's batch is no longer a duplicate: its epoch is fenced.
    with pytest.raises(InvalidProducerEpochError):
        log.append(epoch=0, seq=0, count=2)


def test_lower_epoch_is_rejected_for_data_and_markers(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(epoch=5, seq=0, txn=True)
    with pytest.raises(InvalidProducerEpochError):
        log.append(epoch=4, seq=1, txn=True)
    with pytest.raises(InvalidProducerEpochError):
        log.end_txn(CONTROL_TYPE_COMMIT, epoch=4)
    # Replication trusts the leader: no error.
    psm = log.psm
    info = psm.prepare_update(PID, ORIGIN_REPLICATION)
    info.append(data_batch(backend, epoch=4, seq=9, txn=True, base_offset=log.end))


def test_unknown_producer_accepts_any_sequence(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    assert log.append(pid=PID, epoch=3, seq=1234) == (0, 0)
    assert log.append(pid=PID, epoch=3, seq=1235) == (1, 1)
    # A known producer whose epoch is unknown (-1) also accepts anything.
    entry = ProducerStateEntry(PID2, producer_epoch=-1,
                               batch_metadata=[BatchMetadata(10, 0, 0, TS)])
    log.psm.load_producer_entry(entry)
    assert log.append(pid=PID2, epoch=-1, seq=77) == (2, 2)


def test_known_producer_with_no_batches_must_continue_from_zero(backend, tmp_path):
    # After a reload from a snapshot taken when the producer only had a marker, its epoch is
    # known and its last sequence is -1: the next batch of that epoch must be sequence 0.
    log = ModelLog(backend, tmp_path)
    log.psm.load_producer_entry(ProducerStateEntry(PID, producer_epoch=2))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(epoch=2, seq=5)
    assert log.append(epoch=2, seq=0) == (0, 0)


# --- wrap-around -------------------------------------------------------------------------------


def test_sequence_wraps_at_int32_max(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(seq=INT32_MAX - 4, count=3)  # sequences MAX-4 .. MAX-2
    log.append(seq=INT32_MAX - 1, count=3)  # MAX-1, MAX, 0
    assert log.psm.last_entry(PID).last_seq == 0
    # Its duplicate is recognised across the wrap.
    assert log.append(seq=INT32_MAX - 1, count=3) == (3, 5)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(seq=2)
    assert log.append(seq=1) == (6, 6)
    # A batch ending exactly at MAX is followed by 0.
    log2 = ModelLog(backend, tmp_path / "two")
    os.makedirs(log2.dir_path, exist_ok=True)
    log2.append(seq=INT32_MAX - 1, count=2)
    with pytest.raises(OutOfOrderSequenceError):
        log2.append(seq=1)
    assert log2.append(seq=0) == (2, 2)


# --- transactions ------------------------------------------------------------------------------


def test_transaction_opens_closes_and_indexes_aborts(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    psm = log.psm
    log.append(seq=0, count=2, txn=True)  # 0..1
    assert psm.last_entry(PID).current_txn_first_offset == 0
    assert [(t.producer_id, t.first_offset) for t in psm.ongoing_txns()] == [(PID, 0)]
    log.append(seq=2, txn=True)  # 2
    log.end_txn(CONTROL_TYPE_ABORT, coordinator_epoch=3)  # marker at 3
    assert psm.ongoing_txns() == []
    entry = psm.last_entry(PID)
    assert entry.current_txn_first_offset is None and entry.coordinator_epoch == 3
    assert log.txn_index.all_aborted_txns() == [AbortedTxn(PID, 0, 3, 4)]
    # Sequences continue after the marker.
    log.append(seq=3, txn=True)  # 4
    log.end_txn(CONTROL_TYPE_COMMIT, coordinator_epoch=3)  # 5, not indexed
    assert log.txn_index.all_aborted_txns() == [AbortedTxn(PID, 0, 3, 4)]
    assert psm.last_entry(PID).last_seq == 3


def test_marker_without_open_transaction_completes_nothing(backend, tmp_path):
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    analysis = psm.analyze_batches([marker(backend, CONTROL_TYPE_ABORT, base_offset=0)],
                                   origin=ORIGIN_COORDINATOR)
    assert analysis.completed_txns == []
    assert psm.apply_append(analysis, end_offset=1) == []
    assert psm.last_entry(PID).producer_epoch == 0


def test_marker_completes_the_transaction(backend, tmp_path):
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    psm.apply_append(psm.analyze_batches([data_batch(backend, txn=True, count=2)], first_offset=7),
                     end_offset=9)
    analysis = psm.analyze_batches([marker(backend, CONTROL_TYPE_COMMIT, base_offset=9)],
                                   origin=ORIGIN_COORDINATOR)
    assert analysis.completed_txns == [CompletedTxn(PID, 7, 9, False)]


def test_non_transactional_batch_while_transaction_open_is_rejected(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(seq=0, txn=True)
    with pytest.raises(InvalidTxnStateError):
        log.append(seq=1, txn=False)
    log.end_txn(CONTROL_TYPE_COMMIT)
    assert log.append(seq=1, txn=False) == (2, 2)


def test_marker_with_older_coordinator_epoch_is_fenced(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(seq=0, txn=True)
    log.end_txn(CONTROL_TYPE_COMMIT, coordinator_epoch=5)
    log.append(seq=1, txn=True)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.end_txn(CONTROL_TYPE_ABORT, coordinator_epoch=4)
    log.end_txn(CONTROL_TYPE_ABORT, coordinator_epoch=5)


def test_emptied_control_batch_is_ignored(backend, tmp_path):
    # The cleaner empties a marker whose transaction is gone (count 0): nothing to complete.
    raw = bytearray(backend.encode_control_batch(CONTROL_TYPE_ABORT, producer_id=PID,
                                                 producer_epoch=0, timestamp_ms=TS))
    header = 61
    struct.pack_into(">i", raw, 8, header - 12)  # batch length: header only
    struct.pack_into(">i", raw, 57, 0)  # record count 0
    raw = bytes(raw[:header])
    batch = one_batch(backend, raw)
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    info = psm.prepare_update(PID, ORIGIN_REPLICATION)
    assert info.append(batch) is None


def test_bad_marker_value_is_invalid_record(backend, tmp_path):
    # A control batch whose value is too short for an end-transaction marker.
    raw = backend.encode_batch([b"\x00"], keys=[struct.pack(">hh", 0, CONTROL_TYPE_ABORT)],
                               timestamps_ms=TS, producer_id=PID, producer_epoch=0,
                               base_sequence=0, is_transactional=True)
    raw = bytearray(raw)
    attributes = struct.unpack_from(">h", raw, 21)[0] | 0x20
    struct.pack_into(">h", raw, 21, attributes)
    # A valid CRC over the changed attributes: the value is what is bad here (records()
    # checks the CRC by default since issue 8).
    struct.pack_into(">I", raw, 17, backend.crc32c(bytes(raw[21:])))
    batch = one_batch(backend, bytes(raw))
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    with pytest.raises(InvalidRecordError):
        psm.prepare_update(PID, ORIGIN_COORDINATOR).append(batch)


def test_complete_unknown_transaction_is_illegal(tmp_path, backend):
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    with pytest.raises(IllegalStateError):
        psm.complete_txn(CompletedTxn(PID, 0, 1, True))


# --- last stable offset --------------------------------------------------------------------------


def test_lso_with_interleaved_producers(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    psm = log.psm
    log.append(plain=True)  # 0
    log.append(pid=PID, seq=0, txn=True)  # 1: PID's txn starts
    log.append(plain=True)  # 2
    log.append(pid=PID2, seq=0, txn=True)  # 3: PID2's txn starts
    log.append(pid=PID, seq=1, txn=True)  # 4
    hw = log.end
    assert psm.first_unstable_offset() == 1
    assert psm.last_stable_offset(hw) == 1
    assert psm.last_stable_offset(0) == 0  # capped by the high watermark
    log.end_txn(CONTROL_TYPE_ABORT, pid=PID)  # 5
    # The abort's own LSO is PID2's open transaction.
    assert log.txn_index.all_aborted_txns() == [AbortedTxn(PID, 1, 5, 3)]
    # Completed but the marker is not below the high watermark yet: still unstable at 1.
    assert psm.first_unstable_offset() == 1
    psm.on_high_watermark_updated(5)
    assert psm.first_unstable_offset() == 1
    psm.on_high_watermark_updated(6)
    assert psm.first_unstable_offset() == 3
    assert psm.last_stable_offset(6) == 3
    assert psm.last_stable_offset(6, log_start_offset=4) == 4
    log.end_txn(CONTROL_TYPE_COMMIT, pid=PID2)  # 6
    psm.on_high_watermark_updated(7)
    assert psm.first_unstable_offset() is None
    assert psm.last_stable_offset(7) == 7
    assert psm.first_undecided_offset() is None


def test_txn_last_stable_offset_ignores_own_producer(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(pid=PID, seq=0, txn=True)  # 0
    log.end_txn(CONTROL_TYPE_ABORT, pid=PID)  # 1
    assert log.txn_index.all_aborted_txns() == [AbortedTxn(PID, 0, 1, 2)]


# --- expiration -------------------------------------------------------------------------------------


def test_producers_expire_unless_a_transaction_is_open(backend, tmp_path):
    log = ModelLog(backend, tmp_path, producer_id_expiration_ms=DAY_MS)
    psm = log.psm
    log.append(pid=PID, seq=0, ts=TS)
    log.append(pid=PID2, seq=0, ts=TS, txn=True)
    assert psm.remove_expired_producers(TS + DAY_MS - 1) == []
    assert psm.remove_expired_producers(TS + DAY_MS) == [PID]
    assert psm.last_entry(PID) is None and psm.last_entry(PID2) is not None
    assert psm.remove_expired_producers(TS + 10 * DAY_MS) == []
    # An expired producer is unknown again: any sequence.
    assert log.append(pid=PID, seq=500, ts=TS + DAY_MS) == (2, 2)


def test_expired_producers_are_not_loaded_from_a_snapshot(backend, tmp_path):
    log = ModelLog(backend, tmp_path, producer_id_expiration_ms=DAY_MS)
    log.append(pid=PID, seq=0, ts=TS)
    log.append(pid=PID2, seq=0, ts=TS + DAY_MS)
    log.psm.take_snapshot()
    psm = ProducerStateManager(str(tmp_path), producer_id_expiration_ms=DAY_MS, backend=backend)
    psm.load(0, now_ms=TS + DAY_MS + 1)
    assert set(psm.active_producers) == {PID2}


# --- snapshots ---------------------------------------------------------------------------------------


def _snapshot_vector():
    """A hand-written snapshot: two producers (one with an open transaction, one with no
    batch), version 1, count 2, entries sorted by producer id."""
    header_tail = bytes.fromhex("00000002")  # count
    entry_a = bytes.fromhex(
        "0000000000000007"  # producer id 7
        "0003"  # epoch 3
        "0000002a"  # last sequence 42
        "0000000000000064"  # last offset 100
        "00000004"  # offset delta 4
        "0000018bcfe56800"  # timestamp 1700000000000
        "00000002"  # coordinator epoch 2
        "ffffffffffffffff"  # no open transaction
    )
    entry_b = bytes.fromhex(
        "0000000000000009"  # producer id 9
        "0000"  # epoch 0
        "ffffffff"  # last sequence -1 (no batch)
        "ffffffffffffffff"  # last offset -1
        "00000000"  # offset delta 0
        "ffffffffffffffff"  # timestamp -1
        "ffffffff"  # coordinator epoch -1
        "0000000000000060"  # open transaction from offset 96
    )
    return header_tail + entry_a + entry_b


def test_snapshot_bytes_match_a_hand_written_vector(backend):
    entries = [
        ProducerStateEntry(9, producer_epoch=0, current_txn_first_offset=96),
        ProducerStateEntry(7, producer_epoch=3, coordinator_epoch=2, last_timestamp_ms=TS,
                           batch_metadata=[BatchMetadata(42, 100, 4, TS)]),
    ]
    body = _snapshot_vector()
    expected = bytes.fromhex("0001") + struct.pack(">I", backend.crc32c(body)) + body
    assert len(expected) == 10 + 2 * 46
    data = encode_snapshot(entries, crc32c=backend.crc32c)
    assert data == expected
    # The CRC itself, pinned (CRC-32C of bytes 6..end).
    assert data[2:6] == bytes.fromhex("694219b2")  # bitwise CRC-32C, computed by hand
    decoded = decode_snapshot(data, crc32c=backend.crc32c)
    assert decoded == sorted(entries, key=lambda e: e.producer_id)


def test_snapshot_round_trip_keeps_last_batch_only(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    for i in range(3):
        log.append(pid=PID, seq=i * 2, count=2, ts=TS + i)
    log.append(pid=PID2, epoch=4, seq=0, txn=True, ts=TS + 10)
    path = log.psm.take_snapshot()
    assert path == snapshot_file(str(tmp_path), log.end)
    assert os.path.getsize(path) == 10 + 2 * 46
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(path)]  # no .tmp left behind
    assert log.psm.take_snapshot() is None  # nothing new since
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    assert psm.load(0, now_ms=TS) == log.end
    assert psm.map_end_offset == log.end
    a = psm.last_entry(PID)
    assert list(a.batch_metadata) == [BatchMetadata(5, 5, 1, TS + 2)]
    assert a.last_timestamp_ms == TS + 2
    b = psm.last_entry(PID2)
    assert b.producer_epoch == 4 and b.current_txn_first_offset == 6
    assert [t.first_offset for t in psm.ongoing_txns()] == [6]
    # Only the last batch is remembered after a reload: it is still a duplicate ...
    client = data_batch(backend, seq=4, count=2)
    assert psm.analyze_batches([client], first_offset=7).duplicate == BatchMetadata(5, 5, 1, TS + 2)
    # ... an older one is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        psm.analyze_batches([data_batch(backend, seq=2, count=2)], first_offset=7)


def test_snapshots_are_identical_across_backends(native, pure, tmp_path):
    entries = [ProducerStateEntry(i, producer_epoch=i % 3, last_timestamp_ms=TS + i,
                                  batch_metadata=[BatchMetadata(i, i * 10, 1, TS + i)])
               for i in range(20)]
    assert encode_snapshot(entries, crc32c=native.crc32c) == encode_snapshot(entries, crc32c=pure.crc32c)


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("damage", ["crc", "version", "short", "trailing", "count"])
def test_corrupt_snapshot_is_deleted_and_an_older_one_used(backend, tmp_path, damage):
    log = ModelLog(backend, tmp_path)
    log.append(seq=0)
    log.psm.take_snapshot()  # at 1
    log.append(seq=1)
    newer = log.psm.take_snapshot()  # at 2
    data = bytearray(open(newer, "rb").read())
    if damage == "crc":
        data[20] ^= 0x01
    elif damage == "version":
        data[1] = 2
    elif damage == "short":
        data = data[:30]
    elif damage == "trailing":
        data += b"\x00"
    elif damage == "count":
        struct.pack_into(">i", data, 6, 5)
    _write(newer, bytes(data))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data), crc32c=backend.crc32c)
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    assert psm.load(0, now_ms=TS) == 1
    assert not os.path.exists(newer)
    assert psm.snapshot_offsets() == [1]
    assert psm.last_entry(PID).last_seq == 0


def test_load_without_snapshots_starts_at_log_start(backend, tmp_path):
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    _write(snapshot_file(str(tmp_path), 5), b"garbage")
    psm2 = ProducerStateManager(str(tmp_path), backend=backend)
    assert psm2.load(3, now_ms=TS) is None
    assert psm2.map_end_offset == 3 and psm2.snapshot_offsets() == []
    assert psm.is_empty


def test_snapshot_listing_ignores_temp_and_deleted_files(tmp_path):
    for name in ("00000000000000000005.snapshot", "00000000000000000006.snapshot.tmp",
                 "00000000000000000007.snapshot.deleted", "00000000000000000008.log", "x.snapshot"):
        _write(tmp_path / name, b"")
    assert list_snapshot_offsets(str(tmp_path)) == [5]


def _touch_snapshots(dir_path, offsets):
    for offset in offsets:
        _write(snapshot_file(str(dir_path), offset), b"")


def test_remove_stray_snapshots_keeps_the_largest_stray_above_the_segments(backend, tmp_path):
    _touch_snapshots(tmp_path, [0, 5, 10, 12, 15, 20, 25])
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    removed = psm.remove_stray_snapshots([0, 10, 20])
    assert sorted(removed) == [5, 12, 15]
    assert list_snapshot_offsets(str(tmp_path)) == [0, 10, 20, 25]
    assert psm.snapshot_offsets() == [0, 10, 20, 25]


def test_remove_stray_snapshots_drops_a_largest_stray_below_the_last_segment(backend, tmp_path):
    _touch_snapshots(tmp_path, [3, 7, 10])
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    assert sorted(psm.remove_stray_snapshots([0, 10, 20])) == [3, 7]
    assert list_snapshot_offsets(str(tmp_path)) == [10]


def test_remove_stray_snapshots_without_segments_keeps_the_largest(backend, tmp_path):
    _touch_snapshots(tmp_path, [3, 7])
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    assert psm.remove_stray_snapshots([]) == [3]
    assert psm.snapshot_offsets() == [7]


def test_snapshot_deletion_helpers(backend, tmp_path):
    _touch_snapshots(tmp_path, [1, 4, 8, 12])
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    assert psm.delete_snapshots_below(8) == [1, 4]
    assert psm.snapshot_offsets() == [8, 12]
    marked = psm.remove_and_mark_snapshot_for_deletion(8)
    assert marked == snapshot_file(str(tmp_path), 8) + ".deleted" and os.path.exists(marked)
    assert psm.remove_and_mark_snapshot_for_deletion(8) is None
    assert psm.remove_snapshot(12) is True
    assert psm.snapshot_offsets() == [] and list_snapshot_offsets(str(tmp_path)) == []


def test_truncate_and_reload_deletes_out_of_range_snapshots(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    snaps = []
    for seq in range(6):
        log.append(seq=seq)
        log.psm.take_snapshot()
        snaps.append(log.end)
    assert log.psm.snapshot_offsets() == [1, 2, 3, 4, 5, 6]
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    psm.truncate_and_reload(2, 4, now_ms=TS)  # keep (2, 4]
    assert psm.snapshot_offsets() == [3, 4]
    assert list_snapshot_offsets(str(tmp_path)) == [3, 4]
    assert psm.map_end_offset == 4 and psm.last_entry(PID).last_seq == 3
    # Same end offset: no reload, only the log start moves.
    psm.truncate_and_reload(3, 4, now_ms=TS)
    assert psm.snapshot_offsets() == [4] and psm.last_entry(PID).last_seq == 3


def test_truncate_fully_and_start_at(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(seq=0, txn=True)
    log.psm.take_snapshot()
    log.psm.truncate_fully_and_start_at(50)
    assert log.psm.is_empty and log.psm.ongoing_txns() == []
    assert log.psm.map_end_offset == 50 and log.psm.snapshot_offsets() == []
    assert list_snapshot_offsets(str(tmp_path)) == []


def test_on_log_start_offset_incremented(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(seq=0, txn=True)  # 0
    log.end_txn(CONTROL_TYPE_COMMIT)  # 1
    assert log.psm.first_unstable_offset() == 0  # unreplicated
    log.psm.on_log_start_offset_incremented(2)
    assert log.psm.first_unstable_offset() is None
    log.psm.on_log_start_offset_incremented(10)
    assert log.psm.map_end_offset == 10


# --- replay and recovery --------------------------------------------------------------------------


def _build_history(log):
    """Idempotent, transactional and plain appends of two producers, commits and aborts."""
    log.append(pid=PID, seq=0, count=3)  # 0..2
    log.append(plain=True)  # 3
    log.append(pid=PID2, epoch=1, seq=0, txn=True)  # 4
    log.append(pid=PID, seq=3, count=2)  # 5..6
    log.append(pid=PID2, epoch=1, seq=1, count=2, txn=True)  # 7..8
    log.end_txn(CONTROL_TYPE_ABORT, pid=PID2, epoch=1, coordinator_epoch=1)  # 9
    log.append(pid=PID2, epoch=1, seq=3, txn=True)  # 10
    log.append(pid=PID, seq=5)  # 11
    log.end_txn(CONTROL_TYPE_COMMIT, pid=PID2, epoch=1, coordinator_epoch=1)  # 12
    log.append(pid=PID2, epoch=1, seq=4, txn=True)  # 13 (left open)
    log.append(pid=PID, epoch=1, seq=0)  # 14


def _state(psm):
    return ({pid: (e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset,
                   list(e.batch_metadata)) for pid, e in psm.active_producers.items()},
            [(t.producer_id, t.first_offset) for t in psm.ongoing_txns()],
            psm.map_end_offset)


def test_rebuild_replays_to_the_same_state(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    _build_history(log)
    replayed = ProducerStateManager(str(tmp_path / "x"), backend=backend)
    assert replayed.rebuild(log.batches) == len(log.batches)
    assert _state(replayed) == _state(log.psm)
    assert replayed.first_unstable_offset() == log.psm.first_unstable_offset()


def test_recover_batch_rebuilds_the_txn_index(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    _build_history(log)
    assert log.txn_index.all_aborted_txns() == [AbortedTxn(PID2, 4, 9, 10)]
    os.makedirs(tmp_path / "r")
    index = TransactionIndex(str(tmp_path / "r"), 0)
    recovered = ProducerStateManager(str(tmp_path / "r"), backend=backend)
    aborted = [recovered.recover_batch(batch, index) for batch in log.batches]
    assert [a for a in aborted if a] == [AbortedTxn(PID2, 4, 9, 10)]
    assert index.all_aborted_txns() == log.txn_index.all_aborted_txns()
    assert _state(recovered) == _state(log.psm)


def test_rebuild_producer_state_from_snapshot_and_log(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(pid=PID, seq=0, count=3)  # 0..2
    log.psm.take_snapshot()  # at 3
    _build_history_tail = [
        dict(pid=PID2, epoch=1, seq=0, txn=True),  # 3
        dict(pid=PID, seq=3, count=2),  # 4..5
        dict(plain=True),  # 6
        dict(pid=PID, seq=5),  # 7
    ]
    for kwargs in _build_history_tail:
        log.append(**kwargs)
    bases = [0, 4, 6]  # three "segments"

    def batches_from(offset):
        return (b for b in log.batches if b.last_offset >= offset)

    psm = ProducerStateManager(str(tmp_path), backend=backend)
    rebuild_producer_state(psm, segment_base_offsets=bases, log_start_offset=0,
                           log_end_offset=log.end, batches_from=batches_from,
                           reload_from_clean_shutdown=False, now_ms=TS)
    assert _state(psm) == _state(log.psm)
    # Snapshots: the loaded one, the bases of the last two segments, and the log end.
    assert psm.snapshot_offsets() == [3, 4, 6, 8]
    at4 = ProducerStateManager(str(tmp_path), backend=backend)
    at4.truncate_and_reload(0, 4, now_ms=TS)  # drops 6 and 8, loads 4
    assert at4.map_end_offset == 4
    assert at4.last_entry(PID).last_seq == 2  # state before segment 4
    assert at4.last_entry(PID2).current_txn_first_offset == 3


def test_rebuild_producer_state_after_clean_shutdown_without_snapshots(backend, tmp_path):
    psm = ProducerStateManager(str(tmp_path), backend=backend)

    def batches_from(offset):
        raise AssertionError("a clean shutdown without snapshots reads nothing")

    rebuild_producer_state(psm, segment_base_offsets=[0, 10, 20], log_start_offset=0,
                           log_end_offset=25, batches_from=batches_from,
                           reload_from_clean_shutdown=True, now_ms=TS)
    assert psm.snapshot_offsets() == [10, 20, 25]
    assert decode_snapshot(open(snapshot_file(str(tmp_path), 25), "rb").read(),
                           crc32c=backend.crc32c) == []


def test_rebuild_producer_state_stops_at_log_end(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    for seq in range(5):
        log.append(seq=seq)
    psm = ProducerStateManager(str(tmp_path), backend=backend)
    rebuild_producer_state(psm, segment_base_offsets=[0], log_start_offset=0, log_end_offset=3,
                           batches_from=lambda offset: iter(log.batches),
                           reload_from_clean_shutdown=False, now_ms=TS)
    assert psm.last_entry(PID).last_seq == 2 and psm.map_end_offset == 3
    assert psm.snapshot_offsets() == [3]


# --- the cleaner's view -----------------------------------------------------------------------------


def test_last_records_of_active_producers(backend, tmp_path):
    log = ModelLog(backend, tmp_path)
    log.append(pid=PID, epoch=2, seq=0, count=2)  # 0..1
    log.psm.load_producer_entry(ProducerStateEntry(PID2, producer_epoch=7))
    assert log.psm.last_records_of_active_producers() == {
        PID: LastRecord(1, 2), PID2: LastRecord(None, 7)}
