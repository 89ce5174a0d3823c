"""The transaction index (``.txnindex``) and read_committed filtering at the batch level."""

from __future__ import annotations

import os
import struct

import pytest

from seglog.errors import CorruptIndexError, InvalidOffsetError
from seglog.filenames import txn_index_file
from seglog.format import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT
from seglog.storage.producer_state import ORIGIN_CLIENT, ORIGIN_COORDINATOR, ProducerStateManager
from seglog.storage.transactions import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    collect_aborted_transactions,
    filter_batches,
    filter_committed_batches,
    is_abort_marker,
    iter_records,
)
from seglog.storage.txnindex import AbortedTxn, TransactionIndex

TS = 1_700_000_000_000
PID, PID2 = 11, 22


# --- AbortedTxn ------------------------------------------------------------------------------------


def test_aborted_txn_bytes_match_a_hand_written_vector():
    txn = AbortedTxn(producer_id=5, first_offset=10, last_offset=20, last_stable_offset=21)
    expected = bytes.fromhex(
        "0000"  # version 0
        "0000000000000005"  # producer id
        "000000000000000a"  # first offset
        "0000000000000014"  # last offset
        "0000000000000015"  # last stable offset
    )
    assert txn.to_bytes() == expected and len(expected) == 34
    assert AbortedTxn.from_bytes(expected) == txn


def test_aborted_txn_rejects_other_versions_and_short_input():
    data = bytearray(AbortedTxn(1, 2, 3, 4).to_bytes())
    data[1] = 1
    with pytest.raises(CorruptIndexError):
        AbortedTxn.from_bytes(bytes(data))
    with pytest.raises(CorruptIndexError):
        AbortedTxn.from_bytes(b"\x00" * 33)


# --- TransactionIndex ----------------------------------------------------------------------------


def test_file_is_created_by_the_first_append(tmp_path):
    index = TransactionIndex(str(tmp_path), 100)
    assert index.path == txn_index_file(str(tmp_path), 100)
    assert not index.exists() and index.all_aborted_txns() == [] and index.last_offset is None
    index.append(AbortedTxn(1, 90, 105, 106))
    assert index.exists() and os.path.getsize(index.path) == 34
    index.close()


def test_append_requires_increasing_last_offset(tmp_path):
    index = TransactionIndex(str(tmp_path), 0)
    index.append(AbortedTxn(1, 0, 10, 11))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(2, 3, 10, 11))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(2, 3, 9, 11))
    index.append(AbortedTxn(2, 3, 11, 12))
    assert [t.last_offset for t in index] == [10, 11]
    index.close()
    # A reopened index remembers its last offset (Kafka would not).
    reopened = TransactionIndex(str(tmp_path), 0)
    assert reopened.last_offset == 11 and len(reopened) == 2
    with pytest.raises(InvalidOffsetError):
        reopened.append(AbortedTxn(3, 5, 11, 12))
    reopened.close()


def test_truncate_to_drops_entries_at_or_above_the_offset(tmp_path):
    index = TransactionIndex(str(tmp_path), 0)
    txns = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 1, 10, 11), AbortedTxn(3, 7, 15, 16)]
    for txn in txns:
        index.append(txn)
    index.truncate_to(16)
    assert index.all_aborted_txns() == txns
    index.truncate_to(10)
    assert index.all_aborted_txns() == txns[:1] and index.last_offset == 5
    assert os.path.getsize(index.path) == 34
    index.append(AbortedTxn(4, 8, 9, 10))  # order is checked against the new last offset
    index.truncate_to(0)
    assert index.all_aborted_txns() == [] and index.last_offset is None
    index.close()


def test_collect_aborted_txns_uses_kafkas_overlap_and_completion_rules(tmp_path):
    index = TransactionIndex(str(tmp_path), 0)
    # b was open from 5 when a aborted at 10, so a's LSO is 5.
    a = AbortedTxn(1, first_offset=0, last_offset=10, last_stable_offset=5)
    b = AbortedTxn(2, first_offset=5, last_offset=20, last_stable_offset=21)
    c = AbortedTxn(3, first_offset=25, last_offset=30, last_stable_offset=31)
    for txn in (a, b, c):
        index.append(txn)
    # Overlap: last_offset >= fetch_offset and first_offset < upper bound.
    assert index.collect_aborted_txns(11, 100) == ([b, c], False)
    assert index.collect_aborted_txns(0, 5) == ([a], True)  # a's LSO 5 >= 5: complete
    assert index.collect_aborted_txns(0, 6) == ([a, b], True)  # b's LSO 21 >= 6
    assert index.collect_aborted_txns(21, 25) == ([], True)  # c's LSO 31 >= 25
    assert index.collect_aborted_txns(21, 40) == ([c], False)
    index.close()


def test_sanity_check(tmp_path):
    index = TransactionIndex(str(tmp_path), 100)
    index.append(AbortedTxn(1, 50, 100, 101))
    index.sanity_check()
    index.close()
    with open(index.path, "ab") as f:
        f.write(AbortedTxn(2, 60, 99 + 10, 110).to_bytes()[:20])  # torn tail
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    os.makedirs(tmp_path / "b")
    below = TransactionIndex(str(tmp_path / "b"), 100)
    below.append(AbortedTxn(1, 50, 99, 100))
    with pytest.raises(CorruptIndexError):
        below.sanity_check()
    below.close()


def test_partial_tail_is_ignored_by_readers_and_overwritten_by_append(tmp_path):
    index = TransactionIndex(str(tmp_path), 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.close()
    with open(index.path, "ab") as f:
        f.write(b"\x00" * 10)
    reopened = TransactionIndex(str(tmp_path), 0)
    assert reopened.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
    reopened.append(AbortedTxn(2, 1, 7, 8))
    assert os.path.getsize(reopened.path) == 68
    assert reopened.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 1, 7, 8)]
    reopened.close()


def test_reset_flush_rename_delete(tmp_path):
    index = TransactionIndex(str(tmp_path), 7, file_suffix=".cleaned")
    assert index.path.endswith("00000000000000000007.txnindex.cleaned")
    index.append(AbortedTxn(1, 0, 9, 10))
    index.flush()
    index.rename_suffix(".swap")
    assert index.path.endswith(".txnindex.swap") and os.path.exists(index.path)
    index.rename_suffix("")
    assert os.listdir(tmp_path) == ["00000000000000000007.txnindex"]
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 9, 10)]
    index.append(AbortedTxn(1, 0, 11, 12))  # still writable after the renames
    index.reset()
    assert index.exists() and os.path.getsize(index.path) == 0 and index.last_offset is None
    assert index.delete() is True
    assert index.delete() is False and os.listdir(tmp_path) == []
    # Renaming an index whose file does not exist yet just moves the name.
    fresh = TransactionIndex(str(tmp_path), 8, file_suffix=".cleaned")
    fresh.rename_suffix("")
    fresh.append(AbortedTxn(1, 0, 9, 10))
    assert os.listdir(tmp_path) == ["00000000000000000008.txnindex"]
    fresh.close()


def test_version_other_than_zero_is_rejected(tmp_path):
    index = TransactionIndex(str(tmp_path), 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.close()
    with open(index.path, "r+b") as f:
        f.write(struct.pack(">h", 1))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(str(tmp_path), 0)


def test_collect_aborted_transactions_across_segments(tmp_path):
    seg0 = TransactionIndex(str(tmp_path), 0)
    seg1 = TransactionIndex(str(tmp_path), 100)
    seg2 = TransactionIndex(str(tmp_path), 200)
    seg0.append(AbortedTxn(1, 10, 50, 40))  # another txn open from 40 when it aborted
    seg1.append(AbortedTxn(2, 40, 150, 151))
    seg2.append(AbortedTxn(3, 160, 250, 251))
    searched = []

    def indexes():
        for index in (seg0, seg1, seg2):
            searched.append(index.base_offset)
            yield index

    # Upper bound 120: seg0's entry (LSO 40) does not prove completeness, seg1's (151) does.
    assert collect_aborted_transactions(indexes(), 20, 120) == [
        AbortedTxn(1, 10, 50, 40), AbortedTxn(2, 40, 150, 151)]
    assert searched == [0, 100]
    assert collect_aborted_transactions([seg0, seg1, seg2], 0, 300) == [
        AbortedTxn(1, 10, 50, 40), AbortedTxn(2, 40, 150, 151), AbortedTxn(3, 160, 250, 251)]
    assert collect_aborted_transactions([seg1, seg2], 151, 155) == []
    for index in (seg0, seg1, seg2):
        index.close()


# --- read_committed filtering -----------------------------------------------------------------------


class Writer:
    """Writes batches at consecutive offsets through the producer state manager, the way the
    Log will (client data analysed at first_offset, markers from the coordinator)."""

    def __init__(self, backend, dir_path):
        self.backend = backend
        self.psm = ProducerStateManager(str(dir_path), backend=backend)
        self.txn_index = TransactionIndex(str(dir_path), 0)
        self.raw = bytearray()
        self.end = 0
        self.seqs = {}

    def data(self, value, *, pid=-1, txn=False):
        seq = self.seqs.get(pid, 0) if pid >= 0 else -1
        raw = self.backend.encode_batch(
            [value], timestamps_ms=TS, base_offset=self.end, producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, is_transactional=txn)
        if pid >= 0:
            self.seqs[pid] = seq + 1
        self._write(raw, ORIGIN_CLIENT)

    def end_txn(self, control_type, *, pid):
        raw = self.backend.encode_control_batch(control_type, producer_id=pid, producer_epoch=0,
                                                base_offset=self.end, timestamp_ms=TS)
        self._write(raw, ORIGIN_COORDINATOR)

    def _write(self, raw, origin):
        (batch,) = list(self.backend.iter_batches(raw))
        analysis = self.psm.analyze_batches([batch], origin=origin)
        assert analysis.duplicate is None
        self.raw += raw
        self.end = batch.next_offset
        self.psm.apply_append(analysis, end_offset=self.end, txn_index=self.txn_index)

    def batches(self):
        return list(self.backend.iter_batches(bytes(self.raw)))


def _values(batches):
    return [rec.value for batch in batches for rec in batch.records()]


def test_read_committed_hides_an_aborted_transaction(backend, tmp_path):
    w = Writer(backend, tmp_path)
    w.data(b"plain-1")  # 0
    w.data(b"txn-a1", pid=PID, txn=True)  # 1
    w.data(b"txn-a2", pid=PID, txn=True)  # 2
    w.end_txn(CONTROL_TYPE_ABORT, pid=PID)  # 3
    w.data(b"plain-2")  # 4
    w.data(b"txn-b1", pid=PID, txn=True)  # 5
    w.end_txn(CONTROL_TYPE_COMMIT, pid=PID)  # 6
    w.psm.on_high_watermark_updated(w.end)
    aborted = collect_aborted_transactions([w.txn_index], 0, w.psm.last_stable_offset(w.end))
    assert aborted == [AbortedTxn(PID, 1, 3, 4)]
    batches = w.batches()
    assert _values(filter_batches(batches, aborted, isolation=READ_UNCOMMITTED)) == [
        b"plain-1", b"txn-a1", b"txn-a2", b"plain-2", b"txn-b1"]
    assert _values(filter_batches(batches, aborted, isolation=READ_COMMITTED)) == [
        b"plain-1", b"plain-2", b"txn-b1"]
    assert [r.offset for r in iter_records(batches, aborted, isolation=READ_COMMITTED,
                                           start_offset=2)] == [4, 5]
    with pytest.raises(ValueError):
        list(filter_batches(batches, aborted, isolation="snapshot"))


def test_read_committed_with_interleaved_producers(backend, tmp_path):
    w = Writer(backend, tmp_path)
    w.data(b"a1", pid=PID, txn=True)  # 0
    w.data(b"b1", pid=PID2, txn=True)  # 1
    w.data(b"a2", pid=PID, txn=True)  # 2
    w.data(b"x", pid=PID2 + 1)  # 3: idempotent, not transactional
    w.end_txn(CONTROL_TYPE_COMMIT, pid=PID2)  # 4
    w.data(b"a3", pid=PID, txn=True)  # 5
    w.end_txn(CONTROL_TYPE_ABORT, pid=PID)  # 6
    w.data(b"a4", pid=PID, txn=True)  # 7: PID's next transaction, committed
    w.end_txn(CONTROL_TYPE_COMMIT, pid=PID)  # 8
    w.psm.on_high_watermark_updated(w.end)
    assert w.psm.last_stable_offset(w.end) == w.end
    aborted = collect_aborted_transactions([w.txn_index], 0, w.end)
    assert aborted == [AbortedTxn(PID, 0, 6, 7)]
    assert _values(filter_committed_batches(w.batches(), aborted)) == [b"b1", b"x", b"a4"]
    # Starting the fetch mid-way still hides the rest of the aborted transaction.
    tail = [b for b in w.batches() if b.last_offset >= 2]
    aborted_tail = collect_aborted_transactions([w.txn_index], 2, w.end)
    assert _values(filter_committed_batches(tail, aborted_tail)) == [b"b1", b"x", b"a4"][1:]


def test_lso_caps_an_open_transaction(backend, tmp_path):
    w = Writer(backend, tmp_path)
    w.data(b"p0")  # 0
    w.data(b"t1", pid=PID, txn=True)  # 1 (open)
    w.data(b"p2")  # 2
    lso = w.psm.last_stable_offset(w.end)
    assert lso == 1
    visible = [b for b in w.batches() if b.base_offset < lso]
    assert _values(filter_batches(visible, [], isolation=READ_COMMITTED)) == [b"p0"]


def test_control_batches_are_never_surfaced(backend, tmp_path):
    w = Writer(backend, tmp_path)
    w.data(b"t", pid=PID, txn=True)
    w.end_txn(CONTROL_TYPE_COMMIT, pid=PID)
    batches = w.batches()
    assert [is_abort_marker(b) for b in batches] == [False, False]
    assert _values(filter_batches(batches, None)) == [b"t"]
    assert _values(filter_batches(batches, [], isolation=READ_COMMITTED)) == [b"t"]
