"""Transactions through the Log (issue 5, storage half): transaction markers, the last stable
offset, read_committed reads, ``.txnindex`` files kept by appends, truncation and recovery,
and fencing (Kafka's ``UnifiedLogTest`` transaction tests)."""

from __future__ import annotations

import os

import pytest

from seglog import Log, LogConfig
from seglog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from seglog.storage.txnindex import AbortedTxn, TransactionIndex

P1, P2 = 7, 8


def open_log(path, backend, **kwargs):
    config = kwargs.pop("config", {})
    return Log.open(path, LogConfig(**config), backend=backend.name, **kwargs)


def crash(log):
    log._dir_lock.close()
    log._closed = True


class Producer:
    """Numbers one producer's batches (what the embedded producer will do)."""

    def __init__(self, log, pid, epoch=0):
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, *values, txn=True):
        first, last = self.log.append_batch(
            list(values), producer_id=self.pid, producer_epoch=self.epoch,
            base_sequence=self.seq, is_transactional=txn)
        self.seq += len(values)
        return first, last

    def end(self, commit, coordinator_epoch=0):
        return self.log.append_txn_marker(producer_id=self.pid, producer_epoch=self.epoch,
                                          coordinator_epoch=coordinator_epoch, commit=commit)


def values(log, **kwargs):
    return [r.value for r in log.records(**kwargs)]


def test_lso_with_interleaved_producers(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        a, b = Producer(log, P1), Producer(log, P2)
        log.append(b"plain")  # 0
        assert log.last_stable_offset == 1
        a.send(b"a1")  # 1: P1's transaction opens
        assert log.last_stable_offset == 1
        b.send(b"b1")  # 2: P2's too
        a.send(b"a2")  # 3
        assert log.last_stable_offset == 1
        assert a.end(commit=True) == 4
        assert log.last_stable_offset == 2  # P2's transaction is still open
        b.end(commit=False)  # 5
        assert log.last_stable_offset == log.end_offset == log.high_watermark == 6
        assert values(log, isolation="read_committed") == [b"plain", b"a1", b"a2"]
        assert values(log) == [b"plain", b"a1", b"b1", b"a2"]


def test_lso_is_capped_by_the_high_watermark(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend, auto_high_watermark=False) as log:
        a = Producer(log, P1)
        log.append_batch([b"x", b"y"])  # 0, 1
        a.send(b"t")  # 2
        a.end(commit=True)  # 3
        assert log.high_watermark == 0 and log.last_stable_offset == 0
        log.update_high_watermark(1)
        assert log.last_stable_offset == 1
        log.update_high_watermark(3)  # the transaction's data is replicated, the marker not
        assert log.last_stable_offset == 2
        assert values(log, isolation="read_committed") == [b"x", b"y"]
        log.update_high_watermark(4)
        assert log.last_stable_offset == 4
        assert values(log, isolation="read_committed") == [b"x", b"y", b"t"]


def test_read_committed_hides_an_aborted_transaction(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend) as log:
        a, b = Producer(log, P1), Producer(log, P2)
        a.send(b"a-ok")  # 0
        a.end(commit=True)  # 1
        b.send(b"b-bad1", b"b-bad2")  # 2, 3
        log.append(b"plain")  # 4
        b.send(b"b-bad3")  # 5
        assert b.end(commit=False) == 6
        a.send(b"a-ok2")  # 7
        a.end(commit=True)  # 8
        assert values(log) == [b"a-ok", b"b-bad1", b"b-bad2", b"plain", b"b-bad3", b"a-ok2"]
        assert values(log, isolation="read_committed") == [b"a-ok", b"plain", b"a-ok2"]
        result = log.read(0, isolation="read_committed")
        assert result.aborted_transactions == [AbortedTxn(P2, 2, 6, 7)]
        assert result.last_stable_offset == 9
        assert log.read(0).aborted_transactions is None
        assert log.read(7, isolation="read_committed").aborted_transactions == []
        assert log.aborted_transactions(3, 5) == [AbortedTxn(P2, 2, 6, 7)]
        cols = log.read_columns(0, 100, isolation="read_committed")
        assert [cols.value(i) for i in range(len(cols))] == [b"a-ok", b"plain", b"a-ok2"]
        assert list(cols.offsets) == [0, 4, 7]
        cols = log.read_columns(0, 100)
        assert len(cols) == 6  # control batches are never records
        # The abort is in the active segment's .txnindex (Kafka's file, 34-byte entries).
        assert TransactionIndex(d, 0).all_aborted_txns() == [AbortedTxn(P2, 2, 6, 7)]
        assert os.path.getsize(d / f"{0:020d}.txnindex") == 34


def test_read_committed_stops_at_an_open_transaction(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        a = Producer(log, P1)
        log.append(b"before")  # 0
        a.send(b"open")  # 1
        log.append(b"after")  # 2
        assert values(log, isolation="read_committed") == [b"before"]
        assert log.read(1, isolation="read_committed").buffer.nbytes == 0
        with open(os.devnull, "wb") as sink:
            assert log.sendfile(sink, 1, isolation="read_committed") == (0, 1)
            sent, nxt = log.sendfile(sink, 0, isolation="read_committed")
            assert nxt == 1 and sent > 0


def test_non_transactional_append_while_a_transaction_is_open_is_rejected(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        a = Producer(log, P1)
        a.send(b"t")
        end = log.end_offset
        with pytest.raises(InvalidTxnStateError):
            a.send(b"not-txn", txn=False)
        assert log.end_offset == end
        log.append(b"another writer without a producer id is fine")


def test_markers_are_fenced(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        a = Producer(log, P1, epoch=3)
        a.send(b"t")
        a.end(commit=True, coordinator_epoch=5)
        a.send(b"t2")
        with pytest.raises(TransactionCoordinatorFencedError):
            a.end(commit=True, coordinator_epoch=4)
        with pytest.raises(InvalidProducerEpochError):
            log.append_txn_marker(producer_id=P1, producer_epoch=2, coordinator_epoch=5,
                                  commit=False)
        # The coordinator fences the producer: an abort with a bumped epoch.
        log.append_txn_marker(producer_id=P1, producer_epoch=4, coordinator_epoch=5,
                              commit=False)
        with pytest.raises(InvalidProducerEpochError):
            a.send(b"zombie")
        assert log.last_stable_offset == log.end_offset


def test_state_and_open_transaction_survive_reopen(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend, config=dict(segment_bytes=400)) as log:
        a, b = Producer(log, P1), Producer(log, P2)
        for _ in range(4):
            a.send(b"a" * 20)
            a.end(commit=False)
        b.send(b"open")
        open_at = log.end_offset - 1
        log.append(b"tail")
    with open_log(d, backend, config=dict(segment_bytes=400)) as log:
        assert log.last_stable_offset == open_at
        assert values(log, isolation="read_committed") == []
        log.append_txn_marker(producer_id=P2, producer_epoch=0, coordinator_epoch=0,
                              commit=True)
        assert values(log, isolation="read_committed") == [b"open", b"tail"]


def test_recovery_rebuilds_the_txnindex(tmp_path, backend):
    d = tmp_path / "p-0"
    config = dict(segment_bytes=300)
    log = open_log(d, backend, config=config)
    a, b = Producer(log, P1), Producer(log, P2)
    for i in range(6):
        a.send(b"a%d" % i)
        b.send(b"b%d" % i)
        a.end(commit=bool(i % 2))
        b.end(commit=True)
    assert len(log.segments) > 2
    expected = {s.base_offset: TransactionIndex(d, s.base_offset).all_aborted_txns()
                for s in log.segments}
    assert sum(len(v) for v in expected.values()) == 3
    committed = values(log, isolation="read_committed")
    crash(log)
    first_base = min(expected)
    # Lose every .txnindex; corrupt one so that its sanity check fails.
    for name in os.listdir(d):
        if name.endswith(".txnindex"):
            os.remove(d / name)
    second = sorted(expected)[1]
    (d / f"{second:020d}.txnindex").write_bytes(
        AbortedTxn(P1, 0, second - 1, second).to_bytes())  # last offset below the base
    # An unclean open recovers from the recovery point (the active segment); the corrupt
    # index forces recovery of its own segment; the others come from a fresh check below.
    with open_log(d, backend, config=config) as log:
        assert second in log.recovery_report.rebuilt_indexes
        active = log.segments[-1].base_offset
        for base in (second, active):
            assert TransactionIndex(d, base).all_aborted_txns() == expected[base]
    # Everything recovered: remove the recovery point checkpoint and crash-reopen.
    with open_log(d, backend, config=config) as log:
        crash(log)
    for name in ("recovery-point-offset-checkpoint",):
        os.remove(d / name)
    for name in os.listdir(d):
        if name.endswith(".txnindex"):
            os.remove(d / name)
    with open_log(d, backend, config=config) as log:
        assert log.recovery_report.recovered_segments[0] == first_base
        for base, txns in expected.items():
            assert TransactionIndex(d, base).all_aborted_txns() == txns
        assert values(log, isolation="read_committed") == committed


def test_truncation_removes_aborts_and_reopens_transactions(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend, auto_high_watermark=False) as log:
        a = Producer(log, P1)
        a.send(b"x")  # 0
        a.end(commit=False)  # 1
        a.send(b"y")  # 2
        a.end(commit=True)  # 3
        log.update_high_watermark(4)
        log.truncate_to(3)  # the commit marker goes: the transaction at 2 is open again
        assert log.last_stable_offset == 2
        log.truncate_to(1)  # the abort marker goes too
        assert TransactionIndex(d, 0).all_aborted_txns() == []
        assert log.last_stable_offset == 0
        assert log.producer_state.ongoing_txns()[0].first_offset == 0


def test_retention_deletes_txn_indexes_with_their_segments(tmp_path, backend):
    d = tmp_path / "p-0"
    config = dict(segment_bytes=300, retention_bytes=0, file_delete_delay_ms=0)
    with open_log(d, backend, config=config) as log:
        a = Producer(log, P1)
        for _ in range(6):
            a.send(b"z" * 30)
            a.end(commit=False)
        with_index = [s.base_offset for s in log.segments
                      if os.path.exists(d / f"{s.base_offset:020d}.txnindex")]
        assert with_index
        log.apply_retention()
        left = {s.base_offset for s in log.segments}
        for name in os.listdir(d):
            if name.endswith(".txnindex"):
                assert int(name[:20]) in left
            assert not name.endswith(".deleted")


def test_kafka_python_parses_our_control_batches(tmp_path, backend):
    default_records = pytest.importorskip("kafka.record.default_records")
    with open_log(tmp_path / "p-0", backend) as log:
        a = Producer(log, P1, epoch=2)
        a.send(b"t")
        a.end(commit=True, coordinator_epoch=9)
        a.send(b"u")
        a.end(commit=False, coordinator_epoch=9)
        data = bytes(log.read(0).buffer)
    position, seen = 0, []
    while position < len(data):
        size = 12 + int.from_bytes(data[position + 8:position + 12], "big")
        batch = default_records.DefaultRecordBatch(data[position:position + size])
        assert batch.validate_crc()
        if batch.is_control_batch:
            (record,) = list(batch)
            assert batch.is_transactional and batch.producer_id == P1
            assert batch.producer_epoch == 2
            seen.append((record.key[2:4], record.value))
        position += size
    assert seen == [(b"\x00\x01", b"\x00\x00\x00\x00\x00\x09"),
                    (b"\x00\x00", b"\x00\x00\x00\x00\x00\x09")]


def test_read_only_follower_sees_the_lso(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend) as log:
        a = Producer(log, P1)
        log.append(b"x")
        a.send(b"t")
        with open_log(d, backend, read_only=True) as follower:
            assert follower.last_stable_offset == 1
            a.end(commit=False)
            follower.refresh()
            assert follower.last_stable_offset == 3
            assert values(follower, isolation="read_committed") == [b"x"]


def test_compaction_removes_aborted_data_and_markers_in_two_passes(tmp_path, backend):
    d = tmp_path / "p-0"
    now = 1_700_000_000_000
    config = LogConfig(cleanup_policy="compact", delete_retention_ms=1000)
    with Log.open(d, config, backend=backend.name, now_ms=now) as log:
        def send(pid, key, value):
            producer = producers[pid]
            log.append_batch([value], keys=[key], producer_id=pid, producer_epoch=0,
                             base_sequence=producer.seq, is_transactional=True, now_ms=now,
                             timestamps_ms=now)
            producer.seq += 1

        def end(pid, commit):
            log.append_txn_marker(producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                  commit=commit, now_ms=now)

        def next_pass(at_ms):
            log.append(b"z", key=b"k9", timestamp_ms=now, now_ms=now)
            log.roll(now_ms=now)
            stats = log.compact(now_ms=at_ms, force=True)
            assert not stats.skipped
            return {b.base_offset: b for s in log.segments for b in s.batches()}

        producers = {P1: Producer(log, P1), P2: Producer(log, P2)}
        send(P2, b"k5", b"bad")  # 0
        end(P2, commit=False)  # 1
        send(P1, b"k2", b"v1")  # 2
        end(P1, commit=True)  # 3
        send(P1, b"k2", b"v2")  # 4
        end(P1, commit=True)  # 5
        send(P2, b"k6", b"ok")  # 6
        end(P2, commit=True)  # 7
        log.append(b"plain", key=b"k8", now_ms=now)  # 8
        committed = values(log, isolation="read_committed")
        assert committed == [b"v1", b"v2", b"ok", b"plain"]

        batches = next_pass(now)
        assert 0 not in batches and 2 not in batches  # aborted; superseded key
        assert batches[1].is_control and not batches[1].has_delete_horizon
        assert batches[3].is_control  # its transaction's batch was seen in this pass
        # The kept abort marker's entry moved into the cleaned segment's .txnindex.
        assert TransactionIndex(d, 0).all_aborted_txns() == [AbortedTxn(P2, 0, 1, 2)]
        assert values(log, isolation="read_committed") == [b"v2", b"ok", b"plain", b"z"]

        batches = next_pass(now)  # nothing of either transaction is left: horizons
        assert batches[1].has_delete_horizon and batches[1].delete_horizon_ms == now + 1000
        assert batches[3].has_delete_horizon
        assert [r.timestamp_ms for r in batches[1].records()] == [now]
        assert batches[1].is_valid() and batches[1].control_type() == 0
        assert TransactionIndex(d, 0).all_aborted_txns() == []
        assert not batches[5].has_delete_horizon  # batch 4 of its transaction is still there

        batches = next_pass(now + 500)  # before the horizon: kept
        assert 1 in batches and 3 in batches
        batches = next_pass(now + 2000)  # after it: removed
        assert 1 not in batches and 3 not in batches and 5 in batches
        assert values(log, isolation="read_committed")[:3] == [b"v2", b"ok", b"plain"]
        # Both producers' last batches survived: their retries are still duplicates.
        assert log.append_batch([b"v2"], keys=[b"k2"], producer_id=P1, producer_epoch=0,
                                base_sequence=1, is_transactional=True, now_ms=now) == (4, 4)


def test_a_clean_open_checks_the_txnindex_its_listing_shows(tmp_path, backend):
    """After a clean shutdown the loader checks the ``.txnindex`` of a segment (on its first
    use: issue 14) when the directory listing shows one (a missing one holds nothing to
    check): a corrupt one has its segment rebuilt, with the aborts found again in its
    batches."""
    d = tmp_path / "p-0"
    with open_log(d, backend) as log:
        a, b = Producer(log, P1), Producer(log, P2)
        a.send(b"a")  # 0
        a.end(commit=True)  # 1
        log.roll()
        b.send(b"b")  # 2
        b.end(commit=False)  # 3
        active = log.segments[-1].base_offset
    assert active == 2
    assert TransactionIndex(d, 2).all_aborted_txns() == [AbortedTxn(P2, 2, 3, 4)]
    assert not os.path.exists(d / f"{0:020d}.txnindex")
    with open_log(d, backend) as log:  # clean, nothing to rebuild
        assert log.recovery_report.clean_shutdown
        assert log.recovery_report.rebuilt_indexes == []
    (d / f"{2:020d}.txnindex").write_bytes(AbortedTxn(P1, 0, 1, 2).to_bytes())  # below base
    with open_log(d, backend) as log:
        assert log.recovery_report.clean_shutdown
        assert values(log, isolation="read_committed") == [b"a"]
        assert log.recovery_report.rebuilt_indexes == [2]
    assert TransactionIndex(d, 2).all_aborted_txns() == [AbortedTxn(P2, 2, 3, 4)]


def test_a_read_committed_read_checks_a_deferred_segments_txnindex_first(tmp_path, backend):
    """A segment a clean open did not open yet (issue 14) has its ``.txnindex`` checked by
    its first open, and a read_committed read runs that open before it reads the index: a
    corrupt one (here naming P1's committed record as aborted) is rebuilt, never trusted."""
    d = tmp_path / "p-0"
    with open_log(d, backend) as log:
        a, b = Producer(log, P1), Producer(log, P2)
        a.send(b"a")  # 0
        a.end(commit=True)  # 1
        log.roll()
        b.send(b"b")  # 2
        b.end(commit=False)  # 3
        log.roll()
        a.send(b"c")  # 4
        a.end(commit=True)  # 5
    (d / f"{2:020d}.txnindex").write_bytes(AbortedTxn(P1, 0, 1, 2).to_bytes())  # below base
    with open_log(d, backend) as log:
        assert log.recovery_report.rebuilt_indexes == []  # not opened yet
        assert values(log, isolation="read_committed") == [b"a", b"c"]
        assert log.recovery_report.rebuilt_indexes == [2]
    assert TransactionIndex(d, 2).all_aborted_txns() == [AbortedTxn(P2, 2, 3, 4)]
