"""Log, the storage half of replication (issue 12): leader epoch stamping (``become_leader``),
follower appends (``append_as_follower``), the epoch cache kept by every change of the log,
``truncate_fully_and_start_at``, and the KIP-101 / KIP-279 scenarios at the Log level.

Every test takes the ``backend`` fixture and runs on both twins; the copy tests also run the
leader on one backend and the follower on the other and compare the files byte for byte.

Kafka 2.8.2 tests these come from (named in each test): ``LogTest``
(``testAppendBelowExpectedOffsetThrowsException``,
``testAppendEmptyLogBelowLogStartOffsetThrowsException``,
``testAppendWithOutOfOrderOffsetsThrowsException``,
``testLeaderEpochCacheClearedAfterDowngradeInAppendedMessages``,
``testTruncateToEndOffsetClearsEpochCache``, ``testProducerIdMapTruncateFullyAndStartAt``,
``testLogRecoversForLeaderEpoch``, ``testMessageSizeCheckInAppendAsFollower``,
``testDuplicateAppendToFollower``), ``PartitionTest`` (``testMakeLeaderUpdatesEpochCache``,
``testAppendRecordsAsFollowerBelowLogStartOffset``,
``testUseCheckpointToInitializeHighWatermark``, ``testMonotonicOffsetsAfterLeaderChange``) and
``EpochDrivenReplicationProtocolAcceptanceTest`` (``logsShouldNotDivergeOnUncleanLeaderElections``,
``offsetsShouldNotGoBackwards``, ``shouldSurviveFastLeaderChange``) reduced to two Logs and the
truncation rule of replication.md §3.2.
"""

from __future__ import annotations

import os
import struct

import pytest

import seglog
from seglog import Log, LogConfig, filenames
from seglog import format as fmt
from seglog.errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    OffsetsOutOfOrderError,
    ReadOnlyError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from seglog.storage.checkpoints import EpochEntry

INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
NOW_MS = 1_700_000_000_000
E = EpochEntry


def open_log(path, backend, *, auto_hw=False, **config):
    name = backend if isinstance(backend, str) else backend.name
    return Log.open(path, LogConfig(**config), backend=name, auto_high_watermark=auto_hw,
                    now_ms=NOW_MS)


def batch(be, base_offset, count=1, *, epoch=0, ts=NOW_MS, **kwargs):
    return be.encode_batch([b"v%d" % (base_offset + i) for i in range(count)],
                           timestamps_ms=ts, base_offset=base_offset,
                           partition_leader_epoch=epoch, **kwargs)


def copy_all(leader, follower, *, max_bytes=1 << 20):
    """What a replica fetcher does: read the leader from the follower's end offset up to the
    leader's end offset and append what comes back, until caught up (bounded)."""
    for _ in range(10_000):
        if follower.end_offset >= leader.end_offset:
            return
        result = leader.read(follower.end_offset, max_bytes, max_offset=leader.end_offset)
        try:
            assert result.size_bytes > 0
            follower.append_as_follower(result.buffer, now_ms=NOW_MS)
        finally:
            result.buffer.release()
    raise AssertionError("follower did not catch up")


def dir_files(path):
    out = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".deleted") or name == ".lock":
            continue
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


def stamped_epochs(log):
    return [(b.base_offset, b.partition_leader_epoch)
            for segment in log.segments for b in segment.batches()]


def write_leader_history(leader, be):
    """Appends through every leader path, over three epochs and several segments."""
    leader.become_leader(0)
    for i in range(20):
        leader.append(b"x" * 100, key=b"k%d" % i, timestamp_ms=NOW_MS + i, now_ms=NOW_MS)
    leader.append_batch([b"p0", b"p1"], timestamps_ms=NOW_MS, producer_id=7, producer_epoch=0,
                        base_sequence=0, now_ms=NOW_MS)
    leader.become_leader(3)
    client = be.encode_batch([b"c0", b"c1", b"c2"], timestamps_ms=NOW_MS)  # epoch -1 inside
    leader.append_raw(client, now_ms=NOW_MS)
    leader.append_batch([b"t0"], timestamps_ms=NOW_MS, producer_id=8, producer_epoch=1,
                        base_sequence=0, is_transactional=True, now_ms=NOW_MS)
    leader.append_txn_marker(producer_id=8, producer_epoch=1, coordinator_epoch=0,
                             commit=False, now_ms=NOW_MS)
    leader.become_leader(4)
    leader.become_leader(6)  # nothing appended in epoch 4: 6 replaces it (same start)
    for i in range(20):
        leader.append_batch([b"y" * 80, b"z" * 80], timestamps_ms=NOW_MS + 100 + i,
                            now_ms=NOW_MS)


# --- leader: stamping and the cache ---------------------------------------------------------


def test_standalone_log_stamps_nothing_and_writes_no_epoch_file(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend, auto_hw=True) as log:
        assert log.leader_epoch is None
        client = backend.encode_batch([b"a"], timestamps_ms=NOW_MS, partition_leader_epoch=9)
        log.append_raw(client, now_ms=NOW_MS)
        log.append(b"b", now_ms=NOW_MS)
        assert stamped_epochs(log) == [(0, 9), (1, fmt.NO_PARTITION_LEADER_EPOCH)]
        assert log.latest_epoch == -1 and log.leader_epoch_cache.entries == ()
        assert log.end_offset_for_epoch(0) == (-1, -1)
    assert not os.path.exists(tmp_path / "p-0" / filenames.LEADER_EPOCH_CHECKPOINT)


def test_append_raw_stamps_the_given_epoch_unless_leading(tmp_path, backend):
    # A lone broker's Produce: the Log does not lead, the handler gives epoch 0 (a single
    # Kafka node's); a leading Log stamps its own epoch whatever is given. No epoch entry
    # and no checkpoint without leadership, and the client's bytes are never modified.
    with open_log(tmp_path / "p-0", backend, auto_hw=True) as log:
        client = backend.encode_batch([b"a", b"b"], timestamps_ms=NOW_MS,
                                      partition_leader_epoch=-1)
        before = bytes(client)
        log.append_raw(client, now_ms=NOW_MS, partition_leader_epoch=0)
        assert bytes(client) == before
        log.append_raw(client, now_ms=NOW_MS)
        assert stamped_epochs(log) == [(0, 0), (2, -1)]
        assert log.leader_epoch_cache.entries == ()
        log.become_leader(3)
        log.append_raw(client, now_ms=NOW_MS, partition_leader_epoch=0)
        assert stamped_epochs(log)[-1] == (4, 3)
        assert all(b.is_valid() for s in log.segments for b in s.batches())


def test_become_leader_stamps_every_append_path(tmp_path, backend):
    # PartitionTest.testMakeLeaderUpdatesEpochCache, and LogValidator's stamping.
    with open_log(tmp_path / "p-0", backend) as log:
        log.append(b"before", now_ms=NOW_MS)
        log.become_leader(4)
        assert log.leader_epoch == 4
        assert log.leader_epoch_cache.entries == (E(4, 1),)
        log.append(b"a", now_ms=NOW_MS)
        log.append_batch([b"b", b"c"], now_ms=NOW_MS)
        client = backend.encode_batch([b"d"], timestamps_ms=NOW_MS, partition_leader_epoch=0)
        log.append_raw(client, now_ms=NOW_MS)
        assert client[12:16] == INT32.pack(0)  # the caller's buffer is never modified
        log.append_txn_marker(producer_id=1, producer_epoch=0, coordinator_epoch=0,
                              commit=True, now_ms=NOW_MS)
        log.become_leader(5)
        log.append(b"e", now_ms=NOW_MS)
        assert stamped_epochs(log) == [(0, -1), (1, 4), (2, 4), (4, 4), (5, 4), (6, 5)]
        assert all(b.is_valid() for s in log.segments for b in s.batches())  # outside the CRC
        assert log.leader_epoch_cache.entries == (E(4, 1), E(5, 6))
        assert log.latest_epoch == 5
        assert log.end_offset_for_epoch(4) == (4, 6)
        assert log.end_offset_for_epoch(5) == (5, 7)
        assert log.end_offset_for_epoch(3) == (3, 1)  # KIP-279: below the earliest
        assert log.end_offset_for_epoch(6) == (-1, -1)
        log.become_follower()
        assert log.leader_epoch is None
        log.append(b"f", now_ms=NOW_MS)
        assert stamped_epochs(log)[-1] == (7, -1)
        assert log.leader_epoch_cache.entries == (E(4, 1), E(5, 6))
    with open_log(tmp_path / "p-0", backend) as log:
        assert log.leader_epoch is None  # not persisted: the cluster says who leads
        assert log.leader_epoch_cache.entries == (E(4, 1), E(5, 6))


def test_become_leader_checks_its_argument(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        for bad in (-1, 2**31):
            with pytest.raises(ValueError):
                log.become_leader(bad)
        with pytest.raises(TypeError):
            log.become_leader("1")
        assert log.leader_epoch is None
    with Log.open(tmp_path / "p-0", backend=backend.name, read_only=True) as reader:
        with pytest.raises(ReadOnlyError):
            reader.become_leader(1)


# --- follower: copies -------------------------------------------------------------------------


@pytest.mark.parametrize("follower_backend", seglog.BACKEND_NAMES)
def test_follower_copy_is_byte_identical(tmp_path, backend, follower_backend):
    config = dict(segment_bytes=1500, index_interval_bytes=200)
    leader = open_log(tmp_path / "leader" / "t-0", backend, **config)
    follower = open_log(tmp_path / "follower" / "t-0", follower_backend, **config)
    try:
        write_leader_history(leader, backend)
        copy_all(leader, follower, max_bytes=700)  # several fetches per segment
        assert follower.end_offset == leader.end_offset
        assert len(leader.segments) >= 3
        assert [s.base_offset for s in follower.segments] == \
            [s.base_offset for s in leader.segments]
        assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
        assert leader.leader_epoch_cache.entries == (E(0, 0), E(3, 22), E(6, 27))
        assert follower.latest_epoch == 6 and follower.leader_epoch is None
        assert dict(follower.producer_state.active_producers) == \
            dict(leader.producer_state.active_producers)
        assert follower.high_watermark == 0  # the caller moves a follower's
    finally:
        leader.close()
        follower.close()
    leader_files = dir_files(tmp_path / "leader" / "t-0")
    follower_files = dir_files(tmp_path / "follower" / "t-0")
    assert sorted(leader_files) == sorted(follower_files)
    assert any(name.endswith(".txnindex") for name in leader_files)
    assert any(name.endswith(".snapshot") for name in leader_files)
    for name, data in leader_files.items():
        assert follower_files[name] == data, name


def test_follower_copy_in_one_fetch_per_batch(tmp_path, backend):
    leader = open_log(tmp_path / "leader" / "t-0", backend)
    follower = open_log(tmp_path / "follower" / "t-0", backend)
    with leader, follower:
        write_leader_history(leader, backend)
        copy_all(leader, follower, max_bytes=1)  # min_one_batch: one batch a fetch
        assert stamped_epochs(follower) == stamped_epochs(leader)
        follower.update_high_watermark(leader.end_offset)
        assert [r.value for r in follower.records()] == [r.value for r in leader.records(
            max_offset=leader.end_offset)]


def test_gaps_are_kept(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend, auto_hw=True) as log:
        # An empty log at 0 takes a first batch at 5 (a compacted leader's first offsets
        # are gone), then another after a gap.
        assert log.append_as_follower(batch(backend, 5, 3, epoch=1)) == (5, 7)
        assert log.append_as_follower(batch(backend, 20, 2, epoch=1)
                                      + batch(backend, 30, 1, epoch=2)) == (20, 30)
        assert log.start_offset == 0 and log.end_offset == 31
        assert [r.offset for r in log.records()] == [5, 6, 7, 20, 21, 30]
        assert log.leader_epoch_cache.entries == (E(1, 5), E(2, 30))
        with pytest.raises(UnexpectedAppendOffsetError) as info:
            log.append_as_follower(batch(backend, 30, 1, epoch=2))
        assert (info.value.first_offset, info.value.last_offset) == (30, 30)


def test_gap_past_a_relative_offset_rolls_at_the_first_offset(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend, auto_hw=True) as log:
        log.append_as_follower(batch(backend, 0, 1))
        far = 2**31 + 10
        assert log.append_as_follower(batch(backend, far, 2)) == (far, far + 1)
        assert [s.base_offset for s in log.segments] == [0, far]  # Kafka's maybeRoll
        assert [r.offset for r in log.records()] == [0, far, far + 1]
    with open_log(tmp_path / "p-0", backend, auto_hw=True) as log:
        assert log.end_offset == 2**31 + 12


def test_a_batch_without_an_epoch_clears_the_cache(tmp_path, backend):
    # LogTest.testLeaderEpochCacheClearedAfterDowngradeInAppendedMessages: Kafka clears it for
    # a magic < 2 batch; seglog's logs are v2 only, and a batch no leader stamped is the
    # same case (truncation falls back to the high watermark).
    with open_log(tmp_path / "p-0", backend) as log:
        log.append_as_follower(batch(backend, 0, 2, epoch=3))
        assert log.leader_epoch_cache.entries == (E(3, 0),)
        log.append_as_follower(batch(backend, 2, 1, epoch=-1))
        assert log.leader_epoch_cache.entries == ()
        log.append_as_follower(batch(backend, 3, 1, epoch=5))
        assert log.leader_epoch_cache.entries == (E(5, 3),)
        assert log.end_offset_for_epoch(3) == (3, 3)


def test_empty_log_below_its_start_restarts_at_the_first_offset(tmp_path, backend):
    # PartitionTest.testAppendRecordsAsFollowerBelowLogStartOffset: the leader's start fell
    # inside a batch (DeleteRecords); the follower's empty log started there.
    with open_log(tmp_path / "p-0", backend) as log:
        log.truncate_fully_and_start_at(12)
        assert (log.start_offset, log.end_offset) == (12, 12)
        assert log.append_as_follower(batch(backend, 10, 5, epoch=2)) == (10, 14)
        assert (log.start_offset, log.end_offset, log.high_watermark) == (10, 15, 10)
        assert [s.base_offset for s in log.segments] == [10]
        assert log.leader_epoch_cache.entries == (E(2, 10),)
        # Not empty any more: below the end is refused
        # (LogTest.testAppendBelowExpectedOffsetThrowsException).
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(batch(backend, 14, 2, epoch=2))
    with open_log(tmp_path / "p-1", backend) as log:
        log.truncate_fully_and_start_at(12)
        # A batch wholly below the empty log's end: LogTest
        # testAppendEmptyLogBelowLogStartOffsetThrowsException.
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(batch(backend, 5, 3))
        assert (log.start_offset, log.end_offset) == (12, 12)


def _state(log):
    return (log.start_offset, log.end_offset, log.high_watermark, log.size_bytes,
            log.leader_epoch_cache.entries, [s.base_offset for s in log.segments])


def _corrupt_crc(data):
    out = bytearray(data)
    out[-1] ^= 0x55
    return bytes(out)


def _bad_records_area(be, data):
    # An uncompressed batch whose record length varints do not tile the area: structure is
    # wrong, the CRC (recomputed) is right.
    out = bytearray(data)
    out[fmt.RECORD_BATCH_OVERHEAD] = 0x7E  # first record's length: 63
    crc = be.crc32c(bytes(out[fmt.ATTRIBUTES_POSITION:]))
    UINT32.pack_into(out, fmt.CRC_POSITION, crc)
    return bytes(out)


def test_bad_input_is_typed_and_writes_nothing(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend, segment_bytes=4096,
                  max_message_bytes=1024) as log:
        log.append_as_follower(batch(backend, 0, 2, epoch=1))
        before = _state(log)
        good = batch(backend, 2, 2, epoch=2)
        cases = [
            (CorruptRecordError, _corrupt_crc(good)),
            (CorruptRecordError, good + _corrupt_crc(batch(backend, 4, 1, epoch=2))),
            (CorruptRecordError, _bad_records_area(backend, good)),
            (CorruptRecordError, good[:16] + b"\x01" + good[17:]),  # magic 1
            (OffsetsOutOfOrderError, good + batch(backend, 3, 1, epoch=2)),
            (OffsetsOutOfOrderError, good + good),
            (UnexpectedAppendOffsetError, batch(backend, 1, 3, epoch=2)),
            (RecordBatchTooLargeError, b"".join(
                backend.encode_batch([b"x" * 900], timestamps_ms=NOW_MS, base_offset=2 + i)
                for i in range(5))),
        ]
        for error, data in cases:
            with pytest.raises(error):
                log.append_as_follower(data, now_ms=NOW_MS)
            assert _state(log) == before, error
        assert log.append_as_follower(b"", now_ms=NOW_MS) == (-1, -1)
        assert log.append_as_follower(good[:30], now_ms=NOW_MS) == (-1, -1)  # partial only
        assert _state(log) == before
        # A partial batch after whole ones is ignored, as Kafka's follower ignores it.
        assert log.append_as_follower(good + good[:40], now_ms=NOW_MS) == (2, 3)
        assert log.end_offset == 4
        assert log.leader_epoch_cache.entries == (E(1, 0), E(2, 2))
    with open_log(tmp_path / "p-0", backend) as log:
        assert log.end_offset == 4
        assert log.leader_epoch_cache.entries == (E(1, 0), E(2, 2))


def test_follower_does_not_check_max_message_bytes(tmp_path, backend):
    # LogTest.testMessageSizeCheckInAppendAsFollower: the leader accepted the batch; a
    # follower refusing it would stall replication for good.
    with open_log(tmp_path / "p-0", backend, max_message_bytes=100) as log:
        big = backend.encode_batch(
            [b"x" * 300], timestamps_ms=NOW_MS, base_offset=0)
        assert log.append_as_follower(big) == (0, 0)
        with pytest.raises(RecordTooLargeError):  # a leader's append checks it
            log.append(b"x" * 300, now_ms=NOW_MS)


def test_raised_max_message_bytes_applies_at_once(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend, max_message_bytes=200) as log:
        log.append(b"a", now_ms=NOW_MS)
        with pytest.raises(RecordTooLargeError):
            log.append(b"x" * 500, now_ms=NOW_MS)
        log.update_config(LogConfig(max_message_bytes=1000))
        assert log.append(b"x" * 500, now_ms=NOW_MS) == 1  # the active segment takes it
        assert len(log.segments) == 1


def test_follower_producer_state_has_replication_origin(tmp_path, backend):
    # LogTest.testDuplicateAppendToFollower: no sequence checks on a follower.
    with open_log(tmp_path / "p-0", backend, auto_hw=True) as log:
        # Sequences a client append would refuse (a gap, then an older epoch) are taken.
        log.append_as_follower(batch(backend, 0, 2, producer_id=5, producer_epoch=3,
                                     base_sequence=10))
        log.append_as_follower(batch(backend, 2, 1, producer_id=5, producer_epoch=2,
                                     base_sequence=0))
        entry = log.producer_state.active_producers[5]
        assert entry.last_data_offset == 2
        # The same sequences again at new offsets: a duplicate for a client, taken here.
        log.append_as_follower(batch(backend, 3, 1, producer_id=5, producer_epoch=2,
                                     base_sequence=0))
        assert log.producer_state.active_producers[5].last_data_offset == 3
        assert log.producer_state.map_end_offset == 4


# --- truncation and the cache -----------------------------------------------------------------


def _three_epochs(log, be):
    log.append_as_follower(batch(be, 0, 10, epoch=0))
    log.append_as_follower(batch(be, 10, 10, epoch=2))
    log.append_as_follower(batch(be, 20, 10, epoch=5))


def test_truncate_to_truncates_the_cache_from_the_end(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend) as log:
        _three_epochs(log, backend)
        assert log.leader_epoch_cache.entries == (E(0, 0), E(2, 10), E(5, 20))
        assert log.end_offset_for_epoch(2) == (2, 20)
        log.truncate_to(20)
        assert log.leader_epoch_cache.entries == (E(0, 0), E(2, 10))
        assert log.end_offset_for_epoch(2) == (2, 20)  # the latest epoch ends at the end
        log.truncate_to(10)
        assert log.leader_epoch_cache.entries == (E(0, 0),)
        # LogTest.testTruncateToEndOffsetClearsEpochCache: truncating at or past the end
        # still drops an entry at the end (a leader elected that appended nothing).
        log.become_leader(7)
        assert log.leader_epoch_cache.entries == (E(0, 0), E(7, 10))
        log.become_follower()
        log.truncate_to(10)
        assert log.leader_epoch_cache.entries == (E(0, 0),)
    with open_log(tmp_path / "p-0", backend) as log:
        assert log.leader_epoch_cache.entries == (E(0, 0),)


def test_truncate_fully_and_start_at(tmp_path, backend):
    # LogTest.testProducerIdMapTruncateFullyAndStartAt, with the epoch cache
    with open_log(tmp_path / "p-0", backend) as log:
        _three_epochs(log, backend)
        log.update_high_watermark(25)
        log.truncate_fully_and_start_at(100)
        assert (log.start_offset, log.end_offset, log.high_watermark) == (100, 100, 100)
        assert log.leader_epoch_cache.entries == ()
        assert log.append_as_follower(batch(backend, 100, 1, epoch=6)) == (100, 100)
        with pytest.raises(ValueError):
            log.truncate_fully_and_start_at(-1)
    with open(tmp_path / "p-0" / filenames.LEADER_EPOCH_CHECKPOINT, "rb") as f:
        assert f.read() == b"0\n1\n6 100\n"
    with open_log(tmp_path / "p-0", backend) as log:
        assert (log.start_offset, log.end_offset) == (100, 101)
        assert [s.base_offset for s in log.segments] == [100]


def test_start_offset_moves_truncate_the_cache_from_the_start(tmp_path, backend):
    with open_log(tmp_path / "p-0", backend, segment_bytes=200) as log:
        for base, epoch in ((0, 0), (3, 0), (6, 2), (9, 2), (12, 5), (15, 5)):
            log.append_as_follower(batch(backend, base, 3, epoch=epoch))
        assert log.leader_epoch_cache.entries == (E(0, 0), E(2, 6), E(5, 12))
        log.update_high_watermark(18)
        log.delete_records_before(7)
        assert log.leader_epoch_cache.entries == (E(2, 7), E(5, 12))
        log.update_config(LogConfig(segment_bytes=200, retention_bytes=1))
        log.apply_retention(now_ms=NOW_MS)
        assert log.start_offset == log.segments[0].base_offset == 12
        assert log.leader_epoch_cache.entries == (E(5, 12),)


def test_reopen_cuts_the_cache_to_the_loaded_offsets(tmp_path, backend):
    # LogTest.testLogRecoversForLeaderEpoch: entries past the log end (the cache was
    # written, the batch was not) go at open; entries before the start move up.
    path = tmp_path / "p-0"
    with open_log(path, backend) as log:
        _three_epochs(log, backend)
    with open(path / filenames.LEADER_EPOCH_CHECKPOINT, "w") as f:
        f.write("0\n5\n0 0\n2 10\n5 20\n8 30\n9 40\n")
    with open_log(path, backend) as log:
        assert log.leader_epoch_cache.entries == (E(0, 0), E(2, 10), E(5, 20))
        log.update_high_watermark(30)
        log.delete_records_before(12)
    with open(path / filenames.LEADER_EPOCH_CHECKPOINT, "w") as f:
        f.write("0\n3\n0 0\n2 10\n5 20\n")  # as if the start move's write was lost
    with open_log(path, backend) as log:
        assert log.leader_epoch_cache.entries == (E(2, 12), E(5, 20))


def test_corrupt_epoch_checkpoint_fails_the_open_and_changes_nothing(tmp_path, backend):
    path = tmp_path / "p-0"
    with open_log(path, backend) as log:
        _three_epochs(log, backend)
    with open(path / filenames.LEADER_EPOCH_CHECKPOINT, "w") as f:
        f.write("0\n2\n0 0\n")
    before = dir_files(path)
    with pytest.raises(CorruptCheckpointError):
        open_log(path, backend)
    assert dir_files(path) == before  # the clean-shutdown marker is still there


# --- the KIP-101 and KIP-279 scenarios, two Logs --------------------------------------------


def follower_truncation_offset(follower, leader):
    """The follower's truncation offset by leader epoch (replication.md §3.2, KIP-279): ask the
    leader where the follower's latest epoch ends; if the leader answers for an older epoch,
    the follower's own end of that epoch bounds it too."""
    epoch, end_offset = leader.end_offset_for_epoch(follower.latest_epoch)
    if epoch == -1:
        return follower.high_watermark  # no epochs: the pre-KIP-101 rule
    if epoch != follower.latest_epoch:
        _own_epoch, own_end = follower.end_offset_for_epoch(epoch)
        end_offset = min(end_offset, own_end)
    return min(end_offset, follower.end_offset)


def test_kip101_hw_truncation_would_lose_an_acknowledged_write(tmp_path, backend):
    # Scenario 1: B holds m1, m2 but its high watermark (one fetch behind) says 1. B restarts,
    # A dies, B leads. By epochs B keeps m2; by the high watermark it would not.
    a = open_log(tmp_path / "a" / "t-0", backend)
    b = open_log(tmp_path / "b" / "t-0", backend)
    with a:
        a.become_leader(0)
        a.append(b"m1", now_ms=NOW_MS)
        a.append(b"m2", now_ms=NOW_MS)
        copy_all(a, b)
        a.update_high_watermark(2)  # acks=all answered for m2
        b.update_high_watermark(1)
        b.close()
    b = Log.open(tmp_path / "b" / "t-0", backend=backend.name, auto_high_watermark=False,
                 high_watermark=1)
    with b:
        assert (b.end_offset, b.high_watermark, b.latest_epoch) == (2, 1, 0)
        b.become_leader(1)
        assert b.leader_epoch_cache.entries == (E(0, 0), E(1, 2))
        b.update_high_watermark(b.end_offset)
        assert [r.value for r in b.records()] == [b"m1", b"m2"]


def test_kip101_replicas_do_not_diverge(tmp_path, backend):
    # Scenario 2 (EpochDrivenReplicationProtocolAcceptanceTest.logsShouldNotDiverge...): A
    # has m1, m2 in epoch 0; B lost m2 in a crash, leads in epoch 1 and writes m3 at offset 1.
    # A returns as a follower: truncation by epoch drops m2, and the logs end identical.
    a = open_log(tmp_path / "a" / "t-0", backend)
    b = open_log(tmp_path / "b" / "t-0", backend)
    with a, b:
        a.become_leader(0)
        a.append(b"m1", now_ms=NOW_MS)
        copy_all(a, b)
        a.append(b"m2", now_ms=NOW_MS)
        b.become_leader(1)
        b.append(b"m3", now_ms=NOW_MS)
        a.become_follower()
        offset = follower_truncation_offset(a, b)
        assert b.end_offset_for_epoch(0) == (0, 1) and offset == 1
        a.truncate_to(offset)
        copy_all(b, a)
        assert a.leader_epoch_cache.entries == b.leader_epoch_cache.entries == \
            (E(0, 0), E(1, 1))
        assert [r.value for r in a.records(max_offset=a.end_offset)] == [b"m1", b"m3"]
        assert bytes(a.read(0, max_offset=a.end_offset).buffer) == \
            bytes(b.read(0, max_offset=b.end_offset).buffer)


def test_kip279_fast_leader_change_truncates_to_the_common_epoch(tmp_path, backend):
    # shouldSurviveFastLeaderChange: A led epoch 1 briefly and wrote m at offset 2 that B
    # never saw; B leads epoch 2 from offset 2. B answers A's epoch 1 with (0, 2): the epoch
    # it has, and A truncates at its own end of epoch 0 bounded by that.
    a = open_log(tmp_path / "a" / "t-0", backend)
    b = open_log(tmp_path / "b" / "t-0", backend)
    with a, b:
        a.become_leader(0)
        a.append(b"m0", now_ms=NOW_MS)
        a.append(b"m1", now_ms=NOW_MS)
        copy_all(a, b)
        a.become_leader(1)
        a.append(b"lost", now_ms=NOW_MS)
        b.become_leader(2)
        b.append(b"n2", now_ms=NOW_MS)
        b.append(b"n3", now_ms=NOW_MS)
        a.become_follower()
        assert b.end_offset_for_epoch(1) == (0, 2)
        a.truncate_to(follower_truncation_offset(a, b))
        assert a.end_offset == 2 and a.leader_epoch_cache.entries == (E(0, 0),)
        copy_all(b, a)
        assert [r.value for r in a.records(max_offset=a.end_offset)] == \
            [b"m0", b"m1", b"n2", b"n3"]
        assert a.leader_epoch_cache.entries == (E(0, 0), E(2, 2))


def test_offsets_do_not_go_backwards_after_a_leader_change(tmp_path, backend):
    # offsetsShouldNotGoBackwards / PartitionTest.testMonotonicOffsetsAfterLeaderChange: the
    # new leader continues at its end offset; the old one, now a follower, follows on.
    a = open_log(tmp_path / "a" / "t-0", backend)
    b = open_log(tmp_path / "b" / "t-0", backend)
    with a, b:
        a.become_leader(0)
        for i in range(5):
            a.append(b"a%d" % i, now_ms=NOW_MS)
        copy_all(a, b)
        b.become_leader(1)
        a.become_follower()
        first = b.append(b"b0", now_ms=NOW_MS)
        assert first == 5
        a.truncate_to(follower_truncation_offset(a, b))
        copy_all(b, a)
        assert [r.offset for r in a.records(max_offset=a.end_offset)] == list(range(6))


# --- the high watermark on open ---------------------------------------------------------------


def test_replicated_log_starts_at_the_given_high_watermark_clamped(tmp_path, backend):
    # PartitionTest.testUseCheckpointToInitializeHighWatermark, at the Log level.
    path = tmp_path / "p-0"
    with open_log(path, backend, auto_hw=True) as log:
        for base in range(0, 10, 2):
            log.append_as_follower(batch(backend, base, 2, epoch=1))
        log.delete_records_before(3)

    def reopen(high_watermark, auto_hw=False):
        with Log.open(path, backend=backend.name, auto_high_watermark=auto_hw,
                      high_watermark=high_watermark) as log:
            return log.start_offset, log.end_offset, log.high_watermark

    assert reopen(6) == (3, 10, 6)
    assert reopen(None) == (3, 10, 3)  # no checkpoint: 0, clamped to the start
    assert reopen(1) == (3, 10, 3)
    assert reopen(50) == (3, 10, 10)
    assert reopen(6, auto_hw=True) == (3, 10, 10)  # standalone: the end, as always
    with Log.open(path, backend=backend.name, auto_high_watermark=False,
                  high_watermark=6) as log:
        assert [r.offset for r in log.records()] == [3, 4, 5]
        assert log.read(6).size_bytes == 0
    with pytest.raises(TypeError):
        Log.open(path, backend=backend.name, auto_high_watermark=False, high_watermark="6")


def test_mutated_follower_input_is_refused_whole_or_taken_whole(tmp_path, backend):
    # Bad bytes from the network: every single-bit change of a fetched chunk either raises a
    # typed error and changes nothing, or is taken as whole valid batches (the bytes outside
    # the CRC: offsets, length, epoch) that read back CRC-checked.
    import random

    from seglog.errors import SeglogError

    rng = random.Random(1234)
    chunk = (batch(backend, 2, 3, epoch=4)
             + batch(backend, 5, 1, epoch=4, producer_id=3, producer_epoch=0, base_sequence=0)
             + batch(backend, 6, 2, epoch=5, compression="gzip"))

    def fresh(n):
        log = open_log(tmp_path / f"p-{n}", backend, auto_hw=True)
        log.append_as_follower(batch(backend, 0, 2, epoch=4))
        return log

    log = fresh(0)
    before = _state(log)
    outcomes = set()
    try:
        for i in range(300):  # bounded
            data = bytearray(chunk)
            position = rng.randrange(len(data))
            data[position] ^= 1 << rng.randrange(8)
            try:
                first, last = log.append_as_follower(bytes(data), now_ms=NOW_MS)
            except SeglogError as e:
                outcomes.add(type(e).__name__)
                assert _state(log) == before, (position, e)
                continue
            outcomes.add("taken")
            if first >= 0:
                assert log.end_offset == last + 1
                assert len(list(log.records())) >= 1  # CRC-checked reads of what was taken
                log.close()
                log = fresh(i + 1)
            assert _state(log) == before
    finally:
        log.close()
    assert {"CorruptRecordError", "OffsetsOutOfOrderError", "taken"} <= outcomes


def test_recovery_restores_epoch_entries_from_the_batches(tmp_path, backend):
    # LogTest.testLogRecoversForLeaderEpoch: after an unclean shutdown, the recovered batches'
    # epochs above the cache's latest are assigned again.
    path = tmp_path / "p-0"
    with open_log(path, backend) as log:
        for offset, epoch in ((0, 1), (1, 2), (2, 2), (3, 3)):
            log.append_as_follower(batch(backend, offset, 1, epoch=epoch))
        assert log.leader_epoch_cache.entries == (E(1, 0), E(2, 1), E(3, 3))
        log.leader_epoch_cache.truncate_from_end(2)  # deliberately lose an entry
        assert log.leader_epoch_cache.entries == (E(1, 0), E(2, 1))
    with open_log(path, backend) as log:  # a clean shutdown: nothing is recovered
        assert log.leader_epoch_cache.entries == (E(1, 0), E(2, 1))
    os.remove(path / filenames.CLEAN_SHUTDOWN_MARKER)
    with open_log(path, backend) as log:
        assert not log.recovery_report.clean_shutdown
        assert log.leader_epoch_cache.entries == (E(1, 0), E(2, 1), E(3, 3))


def test_recovery_of_a_standalone_log_writes_no_epoch_file(tmp_path, backend):
    path = tmp_path / "p-0"
    with open_log(path, backend, auto_hw=True) as log:
        log.append_raw(backend.encode_batch([b"a"], timestamps_ms=NOW_MS,
                                            partition_leader_epoch=0), now_ms=NOW_MS)
    os.remove(path / filenames.CLEAN_SHUTDOWN_MARKER)
    with open_log(path, backend, auto_hw=True) as log:
        assert not log.recovery_report.clean_shutdown and log.recovery_report.recovered_segments
        assert log.leader_epoch_cache.entries == ()
    assert not os.path.exists(path / filenames.LEADER_EPOCH_CHECKPOINT)
