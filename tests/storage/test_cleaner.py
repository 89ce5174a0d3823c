"""Compaction (seglog.storage.cleaner through Log.compact): Kafka's cleaner rules on both backends.

Each test builds a real Log, compacts it with a driven clock, and checks what a reader sees
against a model (the latest record per key), the files on disk, and crash recovery at every
step of the swap protocol.
"""

from __future__ import annotations

import os
import random

import pytest

import seglog
from seglog import filenames
from seglog.storage import cleaner
from seglog import format as fmt
from seglog.storage.config import LogConfig
from seglog.errors import InvalidRecordError
from seglog.storage.log import Log

NOW_MS = 1_700_000_000_000
DAY_MS = 86_400_000


def compacted_config(**overrides) -> LogConfig:
    values = dict(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0, segment_bytes=4096,
                  file_delete_delay_ms=0)
    values.update(overrides)
    return LogConfig(**values)


def open_log(backend, path, **overrides) -> Log:
    return Log.open(path, compacted_config(**overrides), backend=backend.name, now_ms=NOW_MS)


def fill(log, count, *, keys=20, seed=0, ts=NOW_MS - DAY_MS, tombstone_every=0, batch=1):
    """Append ``count`` records over ``keys`` keys; return the model {key: (offset, value)}."""
    rng = random.Random(seed)
    model = {}
    for start in range(0, count, batch):
        ks, vs = [], []
        for i in range(start, min(start + batch, count)):
            key = b"key-%d" % rng.randrange(keys)
            value = None if tombstone_every and i % tombstone_every == 0 else b"value-%d" % i
            ks.append(key)
            vs.append(value)
        first, _ = log.append_batch(vs, keys=ks, timestamps_ms=ts, now_ms=ts)
        for j, (k, v) in enumerate(zip(ks, vs)):
            model[k] = (first + j, v)
    return model


def latest(log):
    """{key: (offset, value)} of the latest record per key, as a reader sees the log."""
    out = {}
    for record in log.records(0):
        out[record.key] = (record.offset, record.value)
    return out


def all_records(log):
    """``(offset, key, value)`` of every record a reader sees."""
    return [(r.offset, r.key, r.value) for r in log.records(log.start_offset)]


def compact_until_done(log, *, now_ms, passes_max=50, **kwargs):
    stats = []
    for _ in range(passes_max):
        st = cleaner.clean_log(log, now_ms, **kwargs)
        if st.skipped:
            return stats
        stats.append(st)
    raise AssertionError("compaction did not converge")


# --- the basic rule ---------------------------------------------------------------------------


def test_keeps_latest_per_key_offsets_unchanged(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        model = fill(log, 600, keys=25, seed=1)
        end, segments_before = log.end_offset, len(log.segments)
        assert segments_before > 3
        size_before = log.size_bytes
        active_records = [r for r in all_records(log) if r[0] >= log.active_segment.base_offset]
        stats = log.compact(now_ms=NOW_MS)
        assert not stats.skipped and stats.groups >= 1
        assert log.end_offset == end and log.size_bytes < size_before / 3
        assert latest(log) == model
        offsets = [r[0] for r in all_records(log)]
        assert offsets == sorted(set(offsets))
        # Below the first uncleanable offset exactly one record per key is left.
        cleaned = [r for r in all_records(log) if r[0] < stats.first_uncleanable_offset]
        assert len({r[1] for r in cleaned}) == len(cleaned)
        # The active segment is never touched.
        assert [r for r in all_records(log) if r[0] >= log.active_segment.base_offset] == \
            active_records
        assert log.cleaner_checkpoint == stats.end_offset == stats.first_uncleanable_offset
        assert stats.records_kept + stats.records_dropped == stats.map_records
        assert stats.bytes_read > stats.bytes_written > 0


def test_second_pass_with_nothing_new_is_skipped(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        fill(log, 300, keys=10)
        assert not log.compact(now_ms=NOW_MS).skipped
        assert log.compact(now_ms=NOW_MS).skipped == "nothing cleanable"


def test_reads_in_gaps_return_the_next_batch(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        model = fill(log, 300, keys=5, seed=2)
        log.compact(now_ms=NOW_MS)
        kept = sorted(offset for offset, _ in model.values())
        present = [r[0] for r in all_records(log)]
        gap = next(o for o in range(log.end_offset) if o not in present)
        after = min(o for o in present if o > gap)
        result = log.read(gap, max_bytes=1 << 16)
        first = next(iter(backend.iter_batches(result.buffer)))
        assert first.last_offset >= gap  # the batch holding the gap's next offset (or an
        assert first.base_offset <= after or first.record_count == 0  # empty batch header)
        assert [r.offset for r in log.records(gap)][0] == after
        assert set(kept) <= set(present)


def test_cleanup_policy_delete_is_not_compacted(backend, tmp_path):
    with Log.open(tmp_path / "p-0", LogConfig(segment_bytes=4096), backend=backend.name) as log:
        fill(log, 300, keys=5)
        assert log.compact(now_ms=NOW_MS).skipped.startswith("cleanup.policy")


# --- keyless records --------------------------------------------------------------------------


def test_keyless_records_rejected_on_compacted_topics(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        with pytest.raises(InvalidRecordError, match="record 0 has no key"):
            log.append(b"v")
        with pytest.raises(InvalidRecordError, match="record 1 has no key"):
            log.append_batch([b"a", b"b"], keys=[b"k", None])
        raw = backend.encode_batch([b"a", b"b", b"c"], keys=[b"k", b"k", None],
                                   timestamps_ms=NOW_MS)
        with pytest.raises(InvalidRecordError, match="record 2 of the batch at position 0"):
            log.append_raw(raw, now_ms=NOW_MS)
        assert log.end_offset == 0
        log.append_batch([b"a"], keys=[b"k"])
    with Log.open(tmp_path / "p-1", LogConfig(), backend=backend.name) as plain:
        plain.append(b"v")  # delete policy: keys are optional


# --- tombstones -------------------------------------------------------------------------------


def test_tombstones_expire_in_a_later_pass(backend, tmp_path):
    retention = 10_000
    with open_log(backend, tmp_path / "p-0", delete_retention_ms=retention) as log:
        for i in range(60):
            log.append(b"v%d" % i, key=b"k%d" % (i % 6), timestamp_ms=NOW_MS)
        log.append(None, key=b"k1", timestamp_ms=NOW_MS)  # tombstone
        tombstone_offset = log.end_offset - 1
        log.roll(now_ms=NOW_MS)
        log.append(b"tail", key=b"other", timestamp_ms=NOW_MS)
        log.compact(now_ms=NOW_MS)
        # First pass: the tombstone is kept, and its batch now carries a delete horizon.
        assert latest(log)[b"k1"] == (tombstone_offset, None)
        batches = [b for s in log.segments for b in s.batches()]
        tomb = next(b for b in batches if b.base_offset <= tombstone_offset <= b.last_offset)
        assert tomb.has_delete_horizon and tomb.delete_horizon_ms == NOW_MS + retention
        record = next(r for r in tomb.records() if r.offset == tombstone_offset)
        assert record.timestamp_ms == NOW_MS  # absolute timestamps survive the new base
        # Before the horizon a forced pass keeps it; after the horizon it goes.
        cleaner.clean_log(log, NOW_MS + retention - 1, force=True)
        assert latest(log)[b"k1"] == (tombstone_offset, None)
        log.cleaner_checkpoint = None  # re-clean from the start
        cleaner.clean_log(log, NOW_MS + retention, force=True)
        assert b"k1" not in latest(log)
        assert latest(log)[b"k2"][1] is not None
        # The tombstone was the last batch of the round: it stays as an empty header, so the
        # offsets before the active segment still end where they did.
        batches = [b for s in log.segments[:-1] for b in s.batches()]
        assert batches[-1].record_count == 0 and batches[-1].last_offset == tombstone_offset
        assert batches[-1].size_bytes == fmt.RECORD_BATCH_OVERHEAD


def test_tombstone_deletes_older_values_at_once(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        fill(log, 200, keys=4, seed=3)
        log.append(None, key=b"key-0", timestamp_ms=NOW_MS)
        log.roll(now_ms=NOW_MS)
        log.compact(now_ms=NOW_MS)
        values = [r for r in all_records(log) if r[1] == b"key-0"]
        assert len(values) == 1 and values[0][2] is None


# --- the offset map filling up ----------------------------------------------------------------


def test_small_map_makes_progress_and_converges(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        model = fill(log, 1500, keys=200, seed=4, batch=7)
        memory = 64 * 16  # 61 slots, 54 keys per pass, for 200 keys
        assert backend.KeyMap(memory).max_entries < 200
        stats = compact_until_done(log, now_ms=NOW_MS, memory_bytes_max=memory)
        assert len(stats) > 3
        assert all(s.map_full for s in stats[:-1])
        ends = [s.end_offset for s in stats]
        assert ends == sorted(ends) and len(set(ends)) == len(ends)  # progress every pass
        assert latest(log) == model
        first_uncleanable = stats[-1].first_uncleanable_offset
        # Converged: a fresh full pass from the start finds nothing more to drop.
        log.cleaner_checkpoint = None
        final = cleaner.clean_log(log, NOW_MS, force=True)
        assert final.records_dropped == 0
        cleaned = [r for r in all_records(log) if r[0] < first_uncleanable]
        assert len({r[1] for r in cleaned}) == len(cleaned)


# --- choosing ---------------------------------------------------------------------------------


def test_dirty_ratio_threshold(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0", min_cleanable_dirty_ratio=0.5) as log:
        fill(log, 600, keys=300, seed=5)
        first = log.compact(now_ms=NOW_MS)
        assert not first.skipped and first.dirty_ratio == 1.0
        clean_bytes = log.size_bytes - log.active_segment.size_bytes
        # A little new data: the dirty ratio stays below 0.5.
        fill(log, 40, keys=10, seed=6)
        log.roll(now_ms=NOW_MS)
        offsets = cleaner.cleanable_offsets(log, NOW_MS)
        assert offsets.clean_bytes == clean_bytes
        assert 0 < offsets.dirty_ratio < 0.5
        st = log.compact(now_ms=NOW_MS)
        assert st.skipped.startswith("dirty ratio")
        # Much more: above 0.5, cleaned.
        fill(log, 900, keys=10, seed=7)
        log.roll(now_ms=NOW_MS)
        st = log.compact(now_ms=NOW_MS)
        assert not st.skipped and st.dirty_ratio > 0.5


def test_first_dirty_offset_resets_into_the_log(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        fill(log, 100)
        log.cleaner_checkpoint = log.end_offset + 5
        assert cleaner.first_dirty_offset(log) == log.start_offset
        log.cleaner_checkpoint = 40
        assert cleaner.first_dirty_offset(log) == 40


def test_min_compaction_lag(backend, tmp_path):
    lag = 60_000
    with open_log(backend, tmp_path / "p-0", min_compaction_lag_ms=lag) as log:
        fill(log, 300, keys=5, ts=NOW_MS - 10 * lag, seed=8)
        log.roll(now_ms=NOW_MS)
        young_base = log.active_segment.base_offset
        fill(log, 300, keys=5, ts=NOW_MS, seed=9)
        log.roll(now_ms=NOW_MS)
        before = all_records(log)
        st = log.compact(now_ms=NOW_MS)
        assert st.first_uncleanable_offset == young_base
        after = all_records(log)
        assert [r for r in after if r[0] >= young_base] == [r for r in before if r[0] >= young_base]
        assert len([r for r in after if r[0] < young_base]) == 5
        # Once the lag has passed the young segments are cleaned too.
        st = log.compact(now_ms=NOW_MS + lag + 1)
        assert st.first_uncleanable_offset == log.active_segment.base_offset


def test_max_compaction_lag_forces_a_clean(backend, tmp_path):
    lag = 60_000
    with open_log(backend, tmp_path / "p-0", min_cleanable_dirty_ratio=0.99,
                  max_compaction_lag_ms=lag) as log:
        fill(log, 300, keys=5, ts=NOW_MS, seed=10)
        log.compact(now_ms=NOW_MS + 1)  # first pass: everything is dirty (ratio 1.0)
        fill(log, 20, keys=5, ts=NOW_MS, seed=11)
        log.roll(now_ms=NOW_MS)
        st = log.compact(now_ms=NOW_MS + 1)
        assert st.skipped and st.compaction_delay_ms == 0
        st = log.compact(now_ms=NOW_MS + lag + 5)
        assert not st.skipped and st.compaction_delay_ms == 5


def test_group_segments_by_size(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0", segment_bytes=1 << 20) as log:
        for _ in range(5):
            fill(log, 30, keys=1000)
            log.roll(now_ms=NOW_MS)
        segments = list(log.segments[:-1])
        size = segments[0].size_bytes
        groups = cleaner.group_segments_by_size(
            segments, segment_bytes_max=2 * size + 10, index_bytes_max=1 << 20,
            first_uncleanable_offset=log.end_offset)
        assert [len(g) for g in groups] == [2, 2, 1]
        groups = cleaner.group_segments_by_size(
            segments, segment_bytes_max=1 << 20, index_bytes_max=1 << 20,
            first_uncleanable_offset=log.end_offset)
        assert [len(g) for g in groups] == [5]
        st = log.compact(now_ms=NOW_MS)
        assert st.groups == 1 and st.segments_cleaned == 5 and len(log.segments) == 2


# --- byte for byte ----------------------------------------------------------------------------


def raw_batches(log):
    out = {}
    for segment in log.segments:
        view = segment.read(segment.base_offset, max(segment.size_bytes, 1))
        for b in log.backend.iter_batches(view):
            out[b.base_offset] = bytes(view[b.position:b.position + b.size_bytes])
    return out


def test_unchanged_batches_are_copied_byte_for_byte(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        for i in range(40):
            log.append_batch([b"u%d-%d" % (i, j) for j in range(5)],
                             keys=[b"unique-%d-%d" % (i, j) for j in range(5)],
                             timestamps_ms=NOW_MS, compression="gzip" if i % 2 else "none")
            log.append(b"x%d" % i, key=b"shared", timestamp_ms=NOW_MS)
        log.roll(now_ms=NOW_MS)
        before = raw_batches(log)
        st = log.compact(now_ms=NOW_MS)
        after = raw_batches(log)
        unique = [base for base in before if before[base][fmt.RECORD_BATCH_OVERHEAD:] and
                  base in after and after[base] == before[base]]
        assert len(unique) == 41 and st.batches_copied == 41  # 40 unique + the last shared
        # The other 39 shared batches go, but the last batch of each group stays (empty).
        assert st.batches_dropped + st.batches_emptied == 39 and st.batches_rebuilt == 0


def test_rebuilt_batch_keeps_header_fields(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        raw = backend.encode_batch([b"a1", b"b1", b"a2"], keys=[b"a", b"b", b"a"],
                                   timestamps_ms=[NOW_MS, NOW_MS + 1, NOW_MS + 2],
                                   compression="lz4", producer_id=77, producer_epoch=3,
                                   base_sequence=0, partition_leader_epoch=4)
        log.append_raw(raw, now_ms=NOW_MS)
        log.append(b"b2", key=b"b", timestamp_ms=NOW_MS)
        log.roll(now_ms=NOW_MS)
        old = next(iter(backend.iter_batches(raw_batches(log)[0])))
        log.compact(now_ms=NOW_MS)
        new = next(iter(backend.iter_batches(raw_batches(log)[0])))
        assert new.is_valid()
        assert (new.base_offset, new.last_offset, new.compression, new.producer_id,
                new.producer_epoch, new.base_sequence, new.partition_leader_epoch) == \
            (old.base_offset, old.last_offset, "lz4", 77, 3, 0, 4)
        assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in new.records()] == \
            [(2, b"a", b"a2", NOW_MS + 2)]


def test_last_batch_of_a_producer_is_kept_empty(backend, tmp_path):
    with open_log(backend, tmp_path / "p-0") as log:
        raw = backend.encode_batch([b"old"], keys=[b"k"], timestamps_ms=NOW_MS, producer_id=5,
                                   producer_epoch=0, base_sequence=0)
        log.append_raw(raw, now_ms=NOW_MS)
        for i in range(5):  # one clock: the wall clock would expire producer 5 (1 day idle)
            log.append(b"new%d" % i, key=b"k", timestamp_ms=NOW_MS, now_ms=NOW_MS)
        log.roll(now_ms=NOW_MS)
        log.compact(now_ms=NOW_MS)
        first = next(iter(backend.iter_batches(raw_batches(log)[0])))
        assert first.record_count == 0 and first.producer_id == 5 and first.base_sequence == 0
        assert first.base_timestamp_ms == -1 and first.is_valid()
        assert raw_batches(log).get(1) is None  # non-producer batches simply go


# --- crash safety -----------------------------------------------------------------------------


def _crash_log(backend, path):
    log = open_log(backend, path, segment_bytes=1 << 20)
    for _ in range(4):
        fill(log, 50, keys=8, seed=len(log.segments))
        log.roll(now_ms=NOW_MS)
    fill(log, 5, keys=8, seed=99)
    return log


@pytest.mark.parametrize("step", cleaner.SWAP_STEPS)
def test_crash_at_each_swap_step_recovers_old_or_new(backend, tmp_path, step):
    old_path, new_path, path = tmp_path / "old-0", tmp_path / "new-0", tmp_path / "p-0"
    with _crash_log(backend, new_path) as reference:
        old_records = all_records(reference)
        reference.compact(now_ms=NOW_MS)
        new_records = all_records(reference)
    assert old_records != new_records
    log = _crash_log(backend, path)
    with pytest.raises(cleaner._InjectedCrash):
        cleaner.clean_log(log, NOW_MS, crash_after=step)
    log._dir_lock.close()  # the process dies: its lock goes, nothing is closed or flushed
    names = os.listdir(path)
    if step == "cleaned":
        assert any(n.endswith(filenames.CLEANED_SUFFIX) for n in names)
    elif step in ("swap", "deleted"):
        assert any(n.endswith(filenames.SWAP_SUFFIX) for n in names)
    with Log.open(path, compacted_config(segment_bytes=1 << 20), backend=backend.name) as again:
        got = all_records(again)
        expected = old_records if step == "cleaned" else new_records
        assert got == expected
        assert not [n for n in os.listdir(path)
                    if n.endswith((filenames.CLEANED_SUFFIX, filenames.SWAP_SUFFIX))]
        # And the log compacts (again) normally afterwards.
        again.compact(now_ms=NOW_MS, force=True)
        assert latest(again) == {r[1]: (r[0], r[2]) for r in new_records}
    del old_path


def test_old_files_are_removed_after_the_delete_delay(backend, tmp_path):
    path = tmp_path / "p-0"
    with open_log(backend, path, file_delete_delay_ms=1000) as log:
        fill(log, 300, keys=5)
        log.compact(now_ms=NOW_MS)
        assert any(n.endswith(filenames.DELETED_SUFFIX) for n in os.listdir(path))
        log.delete_expired_files(now_ms=NOW_MS + 1000)
        assert not any(n.endswith(filenames.DELETED_SUFFIX) for n in os.listdir(path))


def test_reopen_after_compaction(backend, tmp_path):
    path = tmp_path / "p-0"
    with open_log(backend, path) as log:
        model = fill(log, 500, keys=30, seed=12)
        log.compact(now_ms=NOW_MS)
        records = all_records(log)
    with open_log(backend, path) as log:
        assert all_records(log) == records and latest(log) == model
        more = fill(log, 100, keys=30, seed=13)
        model.update(more)
        log.roll(now_ms=NOW_MS)
        log.compact(now_ms=NOW_MS)
        assert latest(log) == model


# --- the twins --------------------------------------------------------------------------------


def _twin_log(backend, path):
    log = open_log(backend, path, delete_retention_ms=1000)
    rng = random.Random(14)
    for i in range(120):
        n = rng.randint(1, 6)
        keys = [b"k%d" % rng.randrange(30) for _ in range(n)]
        values = [None if rng.random() < 0.1 else b"v%d" % i * rng.randint(1, 9) for _ in keys]
        log.append_batch(values, keys=keys, timestamps_ms=NOW_MS + i,
                         compression=rng.choice(["none", "gzip", "lz4"]), now_ms=NOW_MS + i)
    log.roll(now_ms=NOW_MS)
    return log


def test_native_and_pure_write_identical_cleaned_files(native, pure, tmp_path):
    dirs = {}
    for be in (native, pure):
        path = tmp_path / f"{be.name}-0"
        with _twin_log(be, path) as log:
            log.compact(now_ms=NOW_MS + 500)
            log.cleaner_checkpoint = None
            cleaner.clean_log(log, NOW_MS + 5000, force=True)  # tombstones expire
            log.delete_expired_files(now_ms=NOW_MS + 10**9)
        dirs[be.name] = path
    names = sorted(n for n in os.listdir(dirs["native"]) if n.endswith((".log", ".index",
                                                                         ".timeindex")))
    assert names == sorted(n for n in os.listdir(dirs["pure"])
                           if n.endswith((".log", ".index", ".timeindex")))
    for name in names:
        a = (dirs["native"] / name).read_bytes()
        b = (dirs["pure"] / name).read_bytes()
        assert a == b, name


# --- transactions (a test-local log of bare segments: the Log has no transaction API yet) -----


class SegmentsLog:
    """The minimal :class:`seglog.storage.cleaner.CleanableLog` over segments written directly."""

    def __init__(self, backend, dir_path, config, segments):
        import threading

        self.backend, self.dir_path, self.config = backend, str(dir_path), config
        self.segments = list(segments)
        self.start_offset = self.segments[0].base_offset
        self.end_offset = self.high_watermark = self.segments[-1].next_offset
        self.cleaner_checkpoint = None
        self._lock = threading.RLock()

    def aborted_transactions(self, offset, upper_bound_offset):
        from seglog.storage.transactions import collect_aborted_transactions
        from seglog.storage.txnindex import TransactionIndex

        indexes = [TransactionIndex(self.dir_path, s.base_offset) for s in self.segments
                   if s.next_offset > offset or s is self.segments[-1]]
        return collect_aborted_transactions(indexes, offset, upper_bound_offset)

    @property
    def producer_state(self):
        from seglog.storage.producer_state import ProducerStateManager

        state = ProducerStateManager(self.dir_path, backend=self.backend)
        state.rebuild(b for s in self.segments for b in s.batches())
        return state

    def cleaning(self):
        return self._lock

    def replace_segments(self, new_segment, old_segments, *, now_ms, new_txn_index=None,
                         old_txn_indexes=()):
        old = {s.base_offset for s in old_segments}
        self.segments = sorted([s for s in self.segments if s.base_offset not in old]
                               + [new_segment], key=lambda s: s.base_offset)
        for segment in old_segments:
            segment.delete()

    def records(self):
        out = []
        for segment in self.segments:
            for batch in segment.batches():
                if not batch.is_control:
                    out.extend((r.offset, r.key, r.value) for r in batch.records())
        return out


def test_aborted_transactions_are_not_mapped_and_are_removed(backend, tmp_path):
    seg0 = backend.Segment.open(tmp_path, 0, create=True)
    txn = dict(producer_id=9, producer_epoch=0, is_transactional=True)
    for raw in (
        backend.encode_batch([b"a"], keys=[b"k1"], timestamps_ms=NOW_MS, base_offset=0),
        backend.encode_batch([b"b", b"x"], keys=[b"k1", b"k2"], timestamps_ms=NOW_MS,
                             base_offset=1, base_sequence=0, **txn),
        backend.encode_control_batch(fmt.CONTROL_TYPE_ABORT, producer_id=9, producer_epoch=0,
                                     base_offset=3, timestamp_ms=NOW_MS),
        backend.encode_batch([b"c"], keys=[b"k3"], timestamps_ms=NOW_MS, base_offset=4),
    ):
        seg0.append(raw, assign_offsets=False)
    seg0.on_become_inactive()
    from seglog.storage.txnindex import AbortedTxn, TransactionIndex

    TransactionIndex(tmp_path, 0).append(AbortedTxn(9, 1, 3, 4))  # what the Log writes
    seg1 = backend.Segment.open(tmp_path, 5, create=True)
    seg1.append(backend.encode_batch([b"t"], keys=[b"k9"], timestamps_ms=NOW_MS, base_offset=5),
                assign_offsets=False)
    log = SegmentsLog(backend, tmp_path, compacted_config(), [seg0, seg1])
    stats = cleaner.clean_log(log, NOW_MS)
    assert not stats.skipped and log.cleaner_checkpoint == 5
    # k1=a survives: the aborted k1=b does not shadow it; the aborted k2=x is gone.
    assert log.records() == [(0, b"k1", b"a"), (4, b"k3", b"c"), (5, b"k9", b"t")]
    batches = list(log.segments[0].batches())
    assert [b.base_offset for b in batches] == [0, 1, 3, 4]
    assert batches[1].record_count == 0  # producer 9's last batch stays as an empty header
    assert batches[2].is_control  # markers are kept
