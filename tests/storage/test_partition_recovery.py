"""``seglog recover`` (:func:`seglog.partition_recovery.recover_partition`, issue 23): an offline
partition of a Store's data dir truncated to its last valid offset, both backends, corruption
made by hand. The Store then opens it online, its records the valid prefix, and it takes
appends; every other partition is untouched."""

from __future__ import annotations

import glob
import os
import warnings

import pytest

import seglog
from seglog.errors import LogLockedError, PartitionOfflineError, UnknownTopicOrPartitionError
from seglog.partition_recovery import recover_partition

from segment_helpers import batch_starts


def _store_with_segments(d: str, backend) -> None:
    """Topic ``t`` (2 partitions) in segments of 300 bytes: six two-record batches in each
    partition (segments at offsets 0 and 6), closed cleanly."""
    with seglog.Store(d, backend=backend.name, offsets_topic_partitions=1) as store:
        store.create_topic("t", partitions=2, config={"segment.bytes": "300"})
        for p in (0, 1):
            log = store.topic("t").log(p)
            for i in range(6):
                log.append_batch([b"a%d" % i, b"b%d" % i])


def _values(store, partition: int) -> list[bytes]:
    return [r.value for r in store.topic("t").log(partition).records()]


ALL = [v for i in range(6) for v in (b"a%d" % i, b"b%d" % i)]


def _reopen(d: str, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no partition offline, no gap reported
        return seglog.Store(d, backend=backend.name, offsets_topic_partitions=1)


def test_a_lost_tail_is_cut_to_the_last_valid_offset(tmp_path, backend):
    d = str(tmp_path / "data")
    _store_with_segments(d, backend)
    last = sorted(glob.glob(os.path.join(d, "t-0", "*.log")))[-1]
    os.truncate(last, batch_starts(last)[1])  # offsets 8..11 flushed, now gone
    with pytest.warns(RuntimeWarning, match="t-0 is offline"):
        with seglog.Store(d, backend=backend.name, offsets_topic_partitions=1) as store:
            store.check_active_segments()
            with pytest.raises(PartitionOfflineError):
                store.topic("t").log(0).append_batch([b"x"])
    outcome = recover_partition(d, "t", 0, backend=backend.name)
    assert (outcome.promised_end, outcome.end_offset) == (12, 8)
    with _reopen(d, backend) as store:
        assert store.offline_partitions() == {}
        assert _values(store, 0) == ALL[:8]
        assert _values(store, 1) == ALL
        assert store.topic("t").log(0).append_batch([b"x"]) == (8, 8)


def test_a_batch_whose_offsets_reach_the_next_segment_is_cut_with_what_follows(tmp_path,
                                                                                backend):
    d = str(tmp_path / "data")
    _store_with_segments(d, backend)
    first = sorted(glob.glob(os.path.join(d, "t-0", "*.log")))[0]
    bad = batch_starts(first)[-1]  # offsets 4-5
    with open(first, "r+b") as f:
        f.seek(bad + 6)
        f.write(b"\x69")  # its base offset, outside the CRC, raised past the next segment
    outcome = recover_partition(d, "t", 0, backend=backend.name)
    assert outcome.end_offset == 4
    assert os.path.getsize(first) == bad
    with _reopen(d, backend) as store:
        assert _values(store, 0) == ALL[:4]
        assert _values(store, 1) == ALL
        assert store.topic("t").log(0).append_batch([b"x"]) == (4, 4)


def test_a_partition_that_loads_whole_keeps_every_record(tmp_path, backend):
    d = str(tmp_path / "data")
    _store_with_segments(d, backend)
    outcome = recover_partition(d, "t", 1, backend=backend.name)
    assert (outcome.promised_end, outcome.end_offset) == (12, 12)
    assert outcome.cut_files == [] and outcome.removed_files == []
    with _reopen(d, backend) as store:
        assert _values(store, 1) == ALL


def test_recover_refuses_an_open_store_and_an_unknown_partition(tmp_path, backend):
    d = str(tmp_path / "data")
    _store_with_segments(d, backend)
    with seglog.Store(d, backend=backend.name, offsets_topic_partitions=1):
        with pytest.raises(LogLockedError):
            recover_partition(d, "t", 0, backend=backend.name)
    with pytest.raises(UnknownTopicOrPartitionError):
        recover_partition(d, "t", 7, backend=backend.name)
