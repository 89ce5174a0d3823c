"""Idempotent producers through the Log (issue 5, storage half): duplicates of the last 5
batches answered with their original offsets and nothing written, Kafka's sequence and epoch
rules, and producer state that survives reopening (snapshots), crashes (replay), retention
and compaction (Kafka's ``UnifiedLogTest#testDuplicateAppends``)."""

from __future__ import annotations

import os

import pytest

from seglog import Log, LogConfig
from seglog.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
)
from seglog.format import INT32_MAX
from seglog.storage.producer_state import list_snapshot_offsets

PID = 1000


def open_log(path, backend, **config):
    return Log.open(path, LogConfig(**config), backend=backend.name)


def crash(log):
    """Abandon a writer as a killed process would (see test_log_recovery.crash)."""
    log._dir_lock.close()
    log._closed = True


def send(log, seq, n=2, *, epoch=0, pid=PID, now_ms=None, keys=None):
    """One idempotent batch of ``n`` records with sequences ``seq..seq+n-1``."""
    values = [b"v%d" % (seq + i) for i in range(n)]
    return log.append_batch(values, keys=keys, producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, now_ms=now_ms)


def client_batch(backend, seq, n=2, *, epoch=0, pid=PID):
    """The bytes a Kafka client sends: base offset 0, producer fields set."""
    return backend.encode_batch([b"r%d" % (seq + i) for i in range(n)], keys=None,
                                base_offset=0, producer_id=pid, producer_epoch=epoch,
                                base_sequence=seq)


def file_bytes(log):
    return sum(s.size_bytes for s in log.segments)


@pytest.mark.parametrize("api", ["append_batch", "append_raw"])
def test_duplicates_of_the_last_five_batches_return_original_offsets(tmp_path, backend, api):
    with open_log(tmp_path / "p-0", backend) as log:
        def put(seq):
            if api == "append_batch":
                return send(log, seq)
            return log.append_raw(client_batch(backend, seq))

        log.append(b"plain")  # offset 0, no producer
        originals = [put(seq) for seq in range(0, 12, 2)]  # 6 batches: seq 0..11
        assert originals[0] == (1, 2) and originals[-1] == (11, 12)
        end, size = log.end_offset, file_bytes(log)
        for i in range(1, 6):  # the last 5 batches
            assert put(2 * i) == originals[i]
        assert (log.end_offset, file_bytes(log)) == (end, size)  # nothing written
        with pytest.raises(OutOfOrderSequenceError):
            put(0)  # the 6th-oldest is no longer remembered
        assert put(12) == (13, 14)  # the next sequence still follows on
        assert [r.value for r in log.records(13)] == ([b"v12", b"v13"] if api == "append_batch"
                                                      else [b"r12", b"r13"])


def test_gap_and_partial_overlap_are_out_of_order(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        send(log, 0, 3)
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 4)  # gap
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 1, 3)  # overlap that is no duplicate
        assert send(log, 3) == (3, 4)


def test_unknown_producer_accepts_any_sequence(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        assert send(log, 77) == (0, 1)
        assert send(log, 79) == (2, 3)


def test_epoch_bump(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        send(log, 0, epoch=0)
        send(log, 2, epoch=0)
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 4, epoch=1)  # a new epoch starts at sequence 0
        assert send(log, 0, epoch=1) == (4, 5)
        with pytest.raises(InvalidProducerEpochError):
            send(log, 4, epoch=0)  # fenced: the old epoch is gone
        # Batches of the old epoch are forgotten: its sequence 0 is no duplicate any more.
        assert send(log, 2, epoch=1) == (6, 7)
        assert log.producer_state.last_entry(PID).producer_epoch == 1


def test_sequence_wraps_at_int32_max(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        send(log, INT32_MAX - 1, 2)  # ends at INT32_MAX
        assert send(log, 0, 2) == (2, 3)
        assert send(log, 0, 2) == (2, 3)  # its retry is a duplicate
        # A batch whose sequences wrap inside it.
        log2_start = send(log, 2, 1)
        assert log2_start == (4, 4)


def test_producer_fields_are_checked(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        with pytest.raises(InvalidRecordError):
            log.append_batch([b"x"], producer_id=PID, producer_epoch=0, base_sequence=-1)
        with pytest.raises(InvalidRecordError):
            log.append_batch([b"x"], producer_epoch=0)
        with pytest.raises(InvalidRecordError):  # Kafka's LogValidator: pid without sequence
            log.append_raw(backend.encode_batch([b"x"], producer_id=PID, producer_epoch=0))
        assert log.end_offset == 0


def test_plain_appends_keep_the_map_end_offset_up(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        log.append_batch([b"a", b"b"])
        send(log, 0)
        log.append(b"c")
        assert log.producer_state.map_end_offset == log.end_offset == 5


def test_state_survives_a_clean_reopen(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend) as log:
        for seq in range(0, 10, 2):
            last = send(log, seq)
    assert os.path.exists(d / f"{10:020d}.snapshot")  # taken on close at the log end
    with open_log(d, backend) as log:
        assert log.producer_state.map_end_offset == 10
        assert send(log, 8) == last  # the last batch is remembered (snapshot: last batch only)
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 12)
        assert send(log, 10) == (10, 11)


def test_state_is_rebuilt_from_the_log_after_a_crash(tmp_path, backend):
    d = tmp_path / "p-0"
    log = open_log(d, backend, segment_bytes=300)
    originals = [send(log, seq) for seq in range(0, 20, 2)]
    assert len(log.segments) > 2
    crash(log)
    with open_log(d, backend, segment_bytes=300) as log:
        assert not log.recovery_report.clean_shutdown
        # The latest snapshot (at the active segment's base) plus the batches replayed after
        # it: the last batch is known (a snapshot keeps each producer's last batch only).
        assert log.producer_state.map_end_offset == 20
        assert send(log, 18) == originals[-1]
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 22)
        assert send(log, 20) == (20, 21)


def test_state_is_rebuilt_without_any_snapshot(tmp_path, backend):
    d = tmp_path / "p-0"
    log = open_log(d, backend, segment_bytes=300)
    originals = [send(log, seq) for seq in range(0, 20, 2)]
    crash(log)
    for offset in list_snapshot_offsets(d):
        os.remove(d / f"{offset:020d}.snapshot")
    with open_log(d, backend, segment_bytes=300) as log:
        # Recovering the active segment replays the whole log into a temporary state and
        # snapshots it at the log end (Kafka's recoverSegment); that snapshot is loaded.
        assert send(log, 18) == originals[-1]
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 14)
        assert send(log, 20) == (20, 21)


def test_corrupt_snapshot_is_deleted_and_an_older_one_used(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend, segment_bytes=300) as log:
        originals = [send(log, seq) for seq in range(0, 20, 2)]
    snapshots = list_snapshot_offsets(d)
    assert len(snapshots) >= 3 and snapshots[-1] == 20
    newest = d / f"{snapshots[-1]:020d}.snapshot"
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF  # CRC mismatch
    newest.write_bytes(bytes(data))
    with open_log(d, backend, segment_bytes=300) as log:
        assert log.recovery_report.clean_shutdown
        assert snapshots[-2] in list_snapshot_offsets(d)
        assert send(log, 18) == originals[-1]  # replayed from the older snapshot
        assert send(log, 20) == (20, 21)


def test_stray_snapshots_are_removed(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend, segment_bytes=300) as log:
        for seq in range(0, 20, 2):
            send(log, seq)
        bases = [s.base_offset for s in log.segments]
    stray = d / f"{bases[1] + 1:020d}.snapshot"
    stray.write_bytes((d / f"{bases[1]:020d}.snapshot").read_bytes())
    with open_log(d, backend, segment_bytes=300) as log:
        offsets = list_snapshot_offsets(d)
        assert bases[1] + 1 not in offsets
        assert set(offsets) <= set(bases) | {log.end_offset}


def test_snapshots_are_deleted_with_their_segments(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend, segment_bytes=300, retention_ms=1000,
                  file_delete_delay_ms=0) as log:
        for seq in range(0, 20, 2):
            send(log, seq, now_ms=1_000)
        bases = [s.base_offset for s in log.segments]
        assert set(bases[1:]) <= set(list_snapshot_offsets(d))
        deleted = log.apply_retention(now_ms=10_000)
        assert deleted == bases[:-1] or deleted == bases
        remaining = {s.base_offset for s in log.segments}
        assert set(list_snapshot_offsets(d)) <= remaining | {log.end_offset}
        assert not [n for n in os.listdir(d) if n.endswith(".deleted")]
        # The producer's state is kept (Kafka keeps it until it expires).
        assert send(log, 20, now_ms=10_000) == (20, 21)


def test_producers_expire(tmp_path, backend):
    d = tmp_path / "p-0"
    with Log.open(d, LogConfig(producer_id_expiration_ms=1000), backend=backend.name,
                  now_ms=0) as log:
        send(log, 0, now_ms=1_000)
        log.apply_retention(now_ms=2_000_000)
        assert log.producer_state.last_entry(PID) is None
        assert send(log, 50, now_ms=2_000_000) == (2, 3)  # unknown again: any sequence


def test_duplicates_detected_after_compaction(tmp_path, backend):
    d = tmp_path / "p-0"
    config = dict(segment_bytes=300, cleanup_policy="compact")
    with open_log(d, backend, **config) as log:
        originals = [send(log, seq, keys=[b"k", b"k"]) for seq in range(0, 20, 2)]
        log.append_batch([b"x"], keys=[b"k"])  # supersedes every keyed record
        log.roll()
        stats = log.compact(force=True)
        assert not stats.skipped and stats.records_dropped > 0
        assert send(log, 18, keys=[b"k", b"k"]) == originals[-1]
    with open_log(d, backend, **config) as log:
        assert send(log, 18, keys=[b"k", b"k"]) == originals[-1]
        assert send(log, 20, keys=[b"k", b"k"])[0] == log.end_offset - 2


def test_duplicates_detected_after_compaction_and_replay(tmp_path, backend):
    d = tmp_path / "p-0"
    config = dict(segment_bytes=300, cleanup_policy="compact")
    log = open_log(d, backend, **config)
    originals = [send(log, seq, keys=[b"k", b"k"]) for seq in range(0, 20, 2)]
    log.append_batch([b"x"], keys=[b"k"])
    log.roll()
    log.compact(force=True)
    crash(log)
    for offset in list_snapshot_offsets(d):
        os.remove(d / f"{offset:020d}.snapshot")
    with open_log(d, backend, **config) as log:
        # Rebuilt from the compacted log: the producer's last batch survived (emptied).
        assert send(log, 18, keys=[b"k", b"k"]) == originals[-1]


def test_truncation_rebuilds_producer_state(tmp_path, backend):
    d = tmp_path / "p-0"
    with open_log(d, backend, segment_bytes=300) as log:
        originals = [send(log, seq) for seq in range(0, 20, 2)]
        log.truncate_to(originals[6][0])  # batches 6.. are gone
        assert log.end_offset == 12
        assert set(list_snapshot_offsets(d)) <= {s.base_offset for s in log.segments} | {12}
        assert send(log, 10) == originals[5]  # still a duplicate
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 14)
        assert send(log, 12) == (12, 13)


def test_the_producer_state_knows_the_snapshot_files_a_reopen_leaves(tmp_path, backend):
    """The loader and the producer state share one listing of the directory (issue 14); where
    loading writes a snapshot itself (a segment rebuilt at open replays the log through a
    manager of its own, which snapshots at the segment's end) the directory is listed again,
    so the manager knows exactly the files on disk."""
    d = tmp_path / "p-0"
    with open_log(d, backend, segment_bytes=300) as log:
        for seq in range(0, 20, 2):
            send(log, seq)
        bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    with open_log(d, backend, segment_bytes=300) as log:  # clean, nothing changed
        assert log.producer_state.snapshot_offsets() == list_snapshot_offsets(d)
    # A middle segment without its .timeindex is opened and rebuilt by the clean open, whose
    # recovery snapshots at that segment's end (the next base offset), removed here first.
    os.remove(d / f"{bases[1]:020d}.timeindex")
    os.remove(d / f"{bases[2]:020d}.snapshot")
    with open_log(d, backend, segment_bytes=300) as log:
        assert log.recovery_report.clean_shutdown
        assert bases[2] in list_snapshot_offsets(d)
        assert log.producer_state.snapshot_offsets() == list_snapshot_offsets(d)
        assert send(log, 20) == (20, 21)
