"""The Log checks offsets against what it knows about its segments (fuzz findings F1, F2, F3,
F6). A batch's base offset is outside its CRC, and whole batches can vanish from a ``.log``
without a byte going bad, so these are checks of the chain, not of the bytes:

* F1: a batch whose offsets reach the next segment's base offset (or the log end offset)
  is never handed out: CorruptSegmentError (``REASON_OFFSETS_OUTSIDE_SEGMENT``) at open, and
  at read time for a file changed after the open;

A writer's open after a clean shutdown opens no segment (issue 14, design.md §7): the checks
of F1 and F2 of an earlier segment, and F3 of the last (which then answers the checkpointed
end offset until it opens), run on its first use, which raises the same CorruptSegmentError
(or reports the same gap) the open raises otherwise; nothing is cut, and the next clean close
writes the marker again, so the next open refuses on first use again.
* F2: a non-last segment cut at a batch boundary is CorruptSegmentError
  (``REASON_SEGMENT_CUT``) when its indexes prove it, else a reported gap with a warning;
* F3: a log ending below its recovery point after a clean shutdown is CorruptSegmentError
  (``REASON_BELOW_RECOVERY_POINT``), also for a Store's ``__consumer_offsets``;
* F6: a log start offset checkpoint that cannot be a base offset is CorruptCheckpointError,
  and nothing is deleted.

Every test runs on both backends and builds its corruption by hand, as the fuzz reproducers do.
"""

from __future__ import annotations

import glob
import os
import shutil
import warnings

import pytest

import seglog
from seglog import Log, LogConfig
from seglog import format as fmt
from seglog.errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    CorruptSegmentError,
    PartitionOfflineError,
)

from segment_helpers import batch_starts, log_file



def six_batches(d, backend, *, close=True, timestamp_step_ms=1, **config):
    """Six two-record batches in segments of 300 bytes (bases 0 and 6); returns the bases.
    With ``timestamp_step_ms=0`` every timestamp is the same, so a segment's time index names
    its first batch only."""
    log = Log.open(d, LogConfig(segment_bytes=300, **config), backend=backend.name)
    for i in range(6):
        log.append_batch([b"a%d" % i, b"b%d" % i], timestamps_ms=1700000000000 + i * timestamp_step_ms)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    if close:
        log.close()
        return bases, None
    return bases, log


def open_and_use(d, backend, *, read_only):
    """Open the log at ``d`` and read all of it (a writer's open after a clean shutdown checks
    a non-last segment on its first use); the log is closed either way."""
    log = Log.open(d, backend=backend.name, read_only=read_only)
    with log:
        return [r.offset for r in log.records()]


def raise_last_base_offset(path):
    """Raise the base offset of the last batch of ``path`` (2 -> 0x6902 and so on)."""
    last = batch_starts(path)[-1]
    with open(path, "r+b") as f:
        f.seek(last + 6)
        f.write(b"\x69")
    return last


@pytest.mark.parametrize("read_only", [True, False])
def test_f1_raised_base_offset_in_non_last_segment_fails_the_open(tmp_path, backend, read_only):
    d = str(tmp_path / "t-0")
    bases, _ = six_batches(d, backend)
    assert bases == [0, 6]
    position = raise_last_base_offset(log_file(d))
    with pytest.raises(CorruptSegmentError) as info:
        open_and_use(d, backend, read_only=read_only)
    assert info.value.reason == fmt.REASON_OFFSETS_OUTSIDE_SEGMENT
    assert info.value.position == position
    assert info.value.base_offset == 0
    # Nothing was cut: a clean open after restoring the byte would find every record.


def test_f1_raised_base_offset_after_open_is_never_served(tmp_path, backend):
    d = str(tmp_path / "t-0")
    six_batches(d, backend)
    with Log.open(d, backend=backend.name, read_only=True) as log:
        raise_last_base_offset(log_file(d))  # changed under an open reader
        seen = []
        with pytest.raises(CorruptSegmentError) as info:
            for record in log.records():
                seen.append(record.offset)
        assert seen == [0, 1, 2, 3]  # the records before the bad batch, then the error
        assert info.value.reason == fmt.REASON_OFFSETS_OUTSIDE_SEGMENT
        assert list(log.read_columns(0, 100).offsets) == [0, 1, 2, 3]
        with pytest.raises(CorruptSegmentError):
            log.read_columns(4, 100)
        with pytest.raises(CorruptSegmentError):
            log.read(4)
        result = log.read(0)
        assert [b.last_offset for b in backend.iter_batches(result.buffer)] == [1, 3]
        assert result.next_offset == 4


def test_f1_consumer_never_polls_offsets_above_the_log_end(tmp_path, backend):
    d = str(tmp_path / "store")
    store = seglog.Store(d, backend=backend.name, offsets_topic_partitions=1)
    store.create_topic("t", config={"segment.bytes": "300"})
    producer = store.producer(linger_ms=0)
    for i in range(12):
        producer.send("t", b"v%d" % i, key=b"k", partition=0)
    producer.close()
    store.close()
    first = sorted(glob.glob(os.path.join(d, "t-0", "*.log")))[0]
    last = batch_starts(first)[-1]
    with open(first, "r+b") as f:
        f.seek(last + 4)
        byte = f.read(1)[0]
        f.seek(last + 4)
        f.write(bytes([byte ^ 0x80]))  # base offset += 2**31
    with seglog.Store(d, backend=backend.name, offsets_topic_partitions=1) as store:
        # The first segment of t-0 is opened, and checked, by its first read.
        consumer = store.consumer(group_id=None, auto_offset_reset="earliest")
        consumer.assign([("t", 0)])
        with pytest.raises(CorruptSegmentError) as info:
            for _ in range(10):
                consumer.poll(timeout_ms=100)
        consumer.close()
    assert info.value.reason == fmt.REASON_OFFSETS_OUTSIDE_SEGMENT


@pytest.mark.parametrize("shutdown", ["clean", "unclean"])
@pytest.mark.parametrize("read_only", [True, False])
def test_f2_non_last_segment_cut_with_index_proof_fails_the_open(tmp_path, backend, shutdown,
                                                                  read_only):
    d = str(tmp_path / "t-0")
    # index_interval_bytes=1: an offset-index entry per batch, synced when the segment rolled.
    bases, log = six_batches(d, backend, close=False, index_interval_bytes=1)
    src = d
    if shutdown == "unclean":
        src = str(tmp_path / "copy-0")
        shutil.copytree(d, src)
    log.close()
    path = log_file(src)
    kept = batch_starts(path)[1]
    os.truncate(path, kept)  # keep only the first batch of segment 0
    for _ in range(2):  # the refused open left the proof for the next one
        with pytest.raises(CorruptSegmentError) as info:
            open_and_use(src, backend, read_only=read_only)
        assert info.value.reason == fmt.REASON_SEGMENT_CUT
        assert info.value.base_offset == 0
        assert os.path.getsize(path) == kept  # nothing cut


@pytest.mark.parametrize("read_only", [True, False])
def test_f2_non_last_segment_cut_without_proof_is_reported(tmp_path, backend, read_only):
    d = str(tmp_path / "t-0")
    # Equal timestamps and no offset-index entry: nothing in the indexes names offsets 2..5.
    six_batches(d, backend, timestamp_step_ms=0)
    path = log_file(d)
    os.truncate(path, batch_starts(path)[1])
    with pytest.warns(RuntimeWarning, match="offsets 2..5 are missing"):
        # read-only: at open; a writer after a clean shutdown: at the first use of segment 0
        log = Log.open(d, backend=backend.name, read_only=read_only)
        assert [r.offset for r in log.records()] == [0, 1, 6, 7, 8, 9, 10, 11]
    with log:
        assert log.recovery_report.missing_offsets == [(2, 6)]
        assert log.recovery_report.lost_data


def test_f2_gap_in_a_compacted_log_is_normal(tmp_path, backend):
    d = str(tmp_path / "t-0")
    six_batches(d, backend, timestamp_step_ms=0)  # reopened below as a compacted log
    path = log_file(d)
    os.truncate(path, batch_starts(path)[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Log.open(d, LogConfig(cleanup_policy="compact"), backend=backend.name) as log:
            assert log.recovery_report.missing_offsets == []
            assert [r.offset for r in log.records()] == [0, 1, 6, 7, 8, 9, 10, 11]


def test_f3_last_segment_cut_after_clean_close_fails_the_read_only_open(tmp_path, backend):
    d = str(tmp_path / "t-0")
    bases, _ = six_batches(d, backend)
    path = log_file(d, bases[-1])
    os.truncate(path, batch_starts(path)[1])
    for _ in range(2):  # a read-only open changes nothing: it refuses again
        with pytest.raises(CorruptSegmentError) as info:
            Log.open(d, backend=backend.name, read_only=True)
        assert info.value.reason == fmt.REASON_BELOW_RECOVERY_POINT
        assert info.value.base_offset == bases[-1]


@pytest.mark.parametrize("use", ["append", "read", "truncate"])
def test_f3_last_segment_cut_after_clean_close_fails_its_first_use(tmp_path, backend, use):
    """A writer defers the last segment after a clean shutdown (issue 14): the open answers
    the checkpointed end, the first use of the segment refuses with the error an eager open
    raised, nothing is written or cut, and a clean close keeps the next open refusing."""
    d = str(tmp_path / "t-0")
    bases, _ = six_batches(d, backend)
    path = log_file(d, bases[-1])
    os.truncate(path, batch_starts(path)[1])
    cut = open(path, "rb").read()
    log = Log.open(d, backend=backend.name)
    assert log.end_offset == 12  # the checkpointed end: the segment is not open yet
    with pytest.raises(CorruptRecordError) as info:
        if use == "append":
            log.append(b"more")
        elif use == "read":
            log.read(bases[-1])
        else:
            log.truncate_to(bases[-1] + 1)
    # An append is refused as the offline log refuses it (issue 23: KAFKA_STORAGE_ERROR on
    # the wire, not CORRUPT_MESSAGE), the segment's error as its cause.
    failure = info.value if use != "append" else info.value.__cause__
    assert isinstance(failure, CorruptSegmentError)
    assert isinstance(info.value, PartitionOfflineError if use == "append"
                      else CorruptSegmentError)
    assert failure.reason == fmt.REASON_BELOW_RECOVERY_POINT
    assert failure.base_offset == bases[-1]
    assert log.offline and log.load_failure is failure
    with pytest.raises(PartitionOfflineError):  # and every later write: the log is offline
        log.append(b"more")
    assert [r.offset for r in log.records(0, end=bases[-1])] == list(range(bases[-1]))
    log.close()
    assert open(path, "rb").read() == cut
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    # Checking the segment rebuilt its indexes (they named the cut offsets) and its
    # producer snapshot, so the next open no longer trusts the checkpointed end and
    # refuses at once, as an eager open does; still nothing is cut.
    with pytest.raises(CorruptSegmentError) as info:
        open_and_use(d, backend, read_only=False)
    assert info.value.reason == fmt.REASON_BELOW_RECOVERY_POINT
    assert open(path, "rb").read() == cut


def test_f3_last_segment_holding_offsets_past_the_checkpointed_end(tmp_path, backend):
    """The other way round (F1 for the last segment): after a clean shutdown the last
    segment holds offsets at or past the end its close checkpointed (a batch's base offset
    raised outside the CRC). The deferred first open refuses with
    REASON_OFFSETS_OUTSIDE_SEGMENT, naming the batch, and cuts nothing."""
    d = str(tmp_path / "t-0")
    bases, _ = six_batches(d, backend)
    path = log_file(d, bases[-1])
    position = raise_last_base_offset(path)
    changed = open(path, "rb").read()
    with Log.open(d, backend=backend.name) as log:
        assert log.end_offset == 12
        with pytest.raises(PartitionOfflineError) as info:
            log.append(b"more")  # refused as the offline log refuses it (issue 23)
        failure = info.value.__cause__
        assert isinstance(failure, CorruptSegmentError)
        assert failure.reason == info.value.reason == fmt.REASON_OFFSETS_OUTSIDE_SEGMENT
        assert failure.base_offset == bases[-1]
        assert failure.position == position
    assert open(path, "rb").read() == changed


def test_f3_last_segment_below_recovery_point_after_crash_is_reported(tmp_path, backend):
    d = str(tmp_path / "t-0")
    bases, log = six_batches(d, backend, close=False)
    src = str(tmp_path / "copy-0")
    shutil.copytree(d, src)  # flushed, recovery point checkpointed at 12, no marker
    log.close()
    path = log_file(src, bases[-1])
    os.truncate(path, batch_starts(path)[1])
    with pytest.warns(RuntimeWarning, match="below its checkpointed recovery point 12"):
        log = Log.open(src, backend=backend.name)
    with log:
        assert log.recovery_report.missing_offsets == [(8, 12)]
        assert log.end_offset == 8
        assert log.recovery_point == 8


def test_f3_store_consumer_offsets_cut_after_clean_close_fails(tmp_path, backend):
    d = str(tmp_path / "store")
    store = seglog.Store(d, backend=backend.name, offsets_topic_partitions=1)
    store.create_topic("t")
    consumer = store.consumer("g")
    consumer.assign([("t", 0)])
    consumer.commit({("t", 0): 3})
    consumer.commit({("t", 0): 7})
    consumer.close()
    store.close()
    path = sorted(glob.glob(os.path.join(d, "__consumer_offsets-0", "*.log")))[-1]
    os.truncate(path, batch_starts(path)[-1])  # the commit of 7 is gone
    # A read-only open refuses it; a writer's open takes the partition offline alone (issue
    # 23): its groups are not served (load_failures), the other topics are, nothing is cut.
    with pytest.raises(CorruptRecordError) as info:
        seglog.Store(d, backend=backend.name, read_only=True, offsets_topic_partitions=1)
    assert info.value.reason == fmt.REASON_BELOW_RECOVERY_POINT
    size = os.path.getsize(path)
    for round_ in range(2):
        with pytest.warns(RuntimeWarning, match="__consumer_offsets-0 is offline"):
            store = seglog.Store(d, backend=backend.name, offsets_topic_partitions=1)
        with store:
            offline = store.offline_partitions()
            assert list(offline) == [("__consumer_offsets", 0)]
            assert "below its checkpointed recovery point" in offline[("__consumer_offsets", 0)]
            with pytest.raises(PartitionOfflineError):
                store.topic("__consumer_offsets").log(0)
            assert store.topic("t").log(0).append_batch([b"x"]) == (round_, round_)
        assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))  # refused again
        assert os.path.getsize(path) == size


@pytest.mark.parametrize("value", [2**63 - 1, -5])
def test_f6_impossible_log_start_offset_checkpoint_deletes_nothing(tmp_path, backend, value):
    d = str(tmp_path / "t-0")
    with Log.open(d, backend=backend.name) as log:
        log.append_batch([b"a", b"b"])
    p = os.path.join(d, "log-start-offset-checkpoint")
    lines = open(p).read().split("\n")
    lines[2] = lines[2].rsplit(" ", 1)[0] + f" {value}"
    open(p, "w").write("\n".join(lines))
    before = sorted(os.listdir(d))
    with pytest.raises(CorruptCheckpointError) as info:
        Log.open(d, backend=backend.name)
    assert info.value.path == p
    assert "t-0" in str(info.value)
    assert sorted(os.listdir(d)) == before
    assert os.path.getsize(log_file(d)) > 0
