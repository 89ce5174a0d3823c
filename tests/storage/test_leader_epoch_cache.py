"""LeaderEpochCache: a port of Kafka 2.8.2's ``LeaderEpochFileCacheTest``
(core/src/test/scala/unit/kafka/server/epoch/LeaderEpochFileCacheTest.scala), test by test
under the same names (snake case), plus seglog's checks of the checkpoint file: written on
every change and only then, read back on load, refused with a typed error when corrupt.

The cache is pure Python and never touches a backend, so these tests run once; the Log-level
behaviour is in test_log_follower.py on both backends.
"""

from __future__ import annotations

import os

import pytest

from seglog import filenames
from seglog.errors import CorruptCheckpointError
from seglog.storage.checkpoints import EpochEntry
from seglog.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class Leo:
    """The log end offset the cache reads for the latest epoch (Kafka's ``logEndOffset``)."""

    def __init__(self):
        self.value = 0

    def __call__(self):
        return self.value


@pytest.fixture
def leo():
    return Leo()


@pytest.fixture
def cache(tmp_path, leo):
    return LeaderEpochCache.load(tmp_path, leo)


def E(epoch, start):  # noqa: N802 - Kafka's EpochEntry(epoch, startOffset)
    return EpochEntry(epoch, start)


def test_previous_epoch(cache):
    assert cache.previous_epoch == UNDEFINED_EPOCH
    cache.assign(2, 10)
    assert cache.previous_epoch == UNDEFINED_EPOCH
    cache.assign(4, 15)
    assert cache.previous_epoch == 2
    cache.assign(10, 20)
    assert cache.previous_epoch == 4
    cache.truncate_from_end(18)
    assert cache.previous_epoch == 2


def test_should_add_epoch_and_message_offset_to_cache(cache, leo):
    cache.assign(2, 10)
    leo.value = 11
    assert cache.latest_epoch == 2
    assert cache.entries[0] == E(2, 10)
    assert cache.end_offset_for(2) == (2, 11)


def test_should_return_log_end_offset_if_latest_epoch_requested(cache, leo):
    cache.assign(2, 11)
    cache.assign(2, 12)
    leo.value = 14
    assert cache.end_offset_for(2) == (2, 14)


def test_should_return_undefined_offset_if_undefined_epoch_requested(cache):
    cache.assign(2, 11)
    cache.assign(3, 12)
    assert cache.end_offset_for(UNDEFINED_EPOCH) == UNDEFINED


def test_should_not_overwrite_log_end_offset_for_a_leader_epoch_once_it_has_been_assigned(
        cache, leo):
    leo.value = 9
    cache.assign(2, leo.value)
    cache.assign(2, 10)
    assert cache.entries[0].start_offset == 9
    assert cache.entries == (E(2, 9),)


def test_should_enforce_monotonically_increasing_start_offsets(cache):
    cache.assign(2, 9)
    cache.assign(3, 9)
    assert cache.entries == (E(3, 9),)


def test_should_not_overwrite_offset_for_a_leader_epoch_once_it_has_been_assigned(cache):
    cache.assign(2, 6)
    cache.assign(2, 10)
    assert cache.entries[0].start_offset == 6


def test_should_return_unsupported_if_no_epoch_recorded(cache):
    assert cache.end_offset_for(0) == UNDEFINED


def test_should_return_unsupported_if_no_epoch_recorded_and_undefined_epoch_requested(
        cache, leo):
    leo.value = 73
    assert cache.end_offset_for(UNDEFINED_EPOCH) == UNDEFINED


def test_should_return_first_epoch_if_requested_epoch_less_than_first_epoch(cache):
    # KIP-279 / apache/kafka PR #5678: (requested, start of the first known epoch)
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    assert cache.end_offset_for(4) == (4, 11)


def test_should_truncate_if_matching_epoch_but_earlier_starting_offset(cache):
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    cache.assign(7, 12)  # epoch 7 starts at an earlier offset
    assert cache.end_offset_for(5) == (5, 12)
    assert cache.end_offset_for(6) == (5, 12)


def test_should_get_first_offset_of_subsequent_epoch_when_offset_requested_for_previous_epoch(
        cache, leo):
    for epoch, start in ((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)):
        cache.assign(epoch, start)
    leo.value = 17
    assert cache.end_offset_for(2) == (2, 15)


def test_should_return_next_available_epoch_if_there_is_no_exact_epoch_for_the_one_requested(
        cache):
    cache.assign(0, 10)
    cache.assign(2, 13)
    cache.assign(4, 17)
    assert cache.end_offset_for(1) == (0, 13)
    assert cache.end_offset_for(2) == (2, 17)
    assert cache.end_offset_for(3) == (2, 17)


def test_should_not_update_epoch_and_start_offset_if_it_did_not_change(cache):
    cache.assign(2, 6)
    cache.assign(2, 7)
    assert len(cache.entries) == 1
    assert cache.entries[0] == E(2, 6)


def test_should_return_invalid_offset_if_epoch_is_requested_which_is_not_currently_tracked(
        cache, leo):
    leo.value = 100
    cache.assign(2, 100)
    assert cache.end_offset_for(3) == UNDEFINED


def test_should_support_epochs_that_do_not_start_from_zero(cache, leo):
    cache.assign(2, 6)
    leo.value = 7
    assert cache.end_offset_for(2) == (2, 7)
    assert cache.entries == (E(2, 6),)


def test_should_persist_epochs_between_instances(tmp_path, leo):
    cache = LeaderEpochCache.load(tmp_path, leo)
    cache.assign(2, 6)
    cache2 = LeaderEpochCache.load(tmp_path, leo)
    assert cache2.entries == (E(2, 6),)


def test_should_enforce_monotonically_increasing_epochs(cache, leo):
    cache.assign(1, 5)
    leo.value = 6
    cache.assign(2, 6)
    leo.value = 7
    # An epoch in the past with a different offset: the later epochs are removed.
    cache.assign(1, 7)
    leo.value = 8
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1) == (1, 8)
    assert cache.end_offset_for(2) == UNDEFINED
    assert cache.entries[0] == E(1, 7)


def test_should_enforce_offsets_increase_monotonically(cache):
    cache.assign(2, 6)
    cache.assign(3, 5)
    assert cache.entries[0] == E(3, 5)
    assert cache.entries == (E(3, 5),)


def test_should_increase_and_track_epochs_as_leaders_change_many_times(cache, leo):
    cache.assign(0, 0)
    cache.assign(1, 0)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1) == (1, 0)
    assert cache.end_offset_for(0) == (0, 0)
    leo.value = 5
    assert cache.end_offset_for(1) == (1, 5)
    assert cache.end_offset_for(0) == (0, 0)
    cache.assign(2, 5)
    leo.value = 10
    assert cache.end_offset_for(2) == (2, 10)
    assert cache.end_offset_for(1) == (1, 5)
    assert cache.end_offset_for(0) == (0, 0)


def test_should_increase_and_track_epochs_as_follower_receives_many_messages(cache, leo):
    for epoch in (0, 1, 2):
        for _ in range(3):
            cache.assign(epoch, leo.value)
            leo.value += 1
        assert cache.latest_epoch == epoch
        assert cache.end_offset_for(epoch) == (epoch, leo.value)
    assert cache.end_offset_for(0) == (0, 3)
    assert cache.end_offset_for(1) == (1, 6)


def _three(cache):
    cache.assign(2, 6)
    cache.assign(3, 8)
    cache.assign(4, 11)


def test_should_drop_entries_on_epoch_boundary_when_removing_latest_entries(cache):
    _three(cache)
    cache.truncate_from_end(8)
    assert cache.entries == (E(2, 6),)


def test_should_preserve_reset_offset_on_clear_earliest_if_one_exists(cache):
    _three(cache)
    cache.truncate_from_start(8)
    assert cache.entries == (E(3, 8), E(4, 11))


def test_should_update_saved_offset_when_offset_to_clear_to_is_between_epochs(cache):
    _three(cache)
    cache.truncate_from_start(9)
    assert cache.entries == (E(3, 9), E(4, 11))


def test_should_not_clear_anything_if_offset_to_early(cache):
    _three(cache)
    cache.truncate_from_start(1)
    assert cache.entries == (E(2, 6), E(3, 8), E(4, 11))


def test_should_not_clear_anything_if_offset_to_first_offset(cache):
    _three(cache)
    cache.truncate_from_start(6)
    assert cache.entries == (E(2, 6), E(3, 8), E(4, 11))


def test_should_retain_latest_epoch_on_clear_all_earliest(cache):
    _three(cache)
    cache.truncate_from_start(11)
    assert cache.entries == (E(4, 11),)


def test_should_update_offset_between_epoch_boundaries_on_clear_earliest(cache):
    _three(cache)
    cache.truncate_from_start(9)
    assert cache.entries == (E(3, 9), E(4, 11))


def test_should_update_offset_between_epoch_boundaries_on_clear_earliest2(cache):
    cache.assign(0, 0)
    cache.assign(1, 7)
    cache.assign(2, 10)
    cache.truncate_from_start(5)
    assert cache.entries == (E(0, 5), E(1, 7), E(2, 10))


def test_should_retain_latest_epoch_on_clear_all_earliest_and_update_its_offset(cache):
    _three(cache)
    cache.truncate_from_start(15)
    assert cache.entries == (E(4, 15),)


def test_should_drop_entries_between_epoch_boundary_when_removing_newest(cache):
    _three(cache)
    cache.truncate_from_end(9)
    assert cache.latest_epoch == 3
    assert cache.entries == (E(2, 6), E(3, 8))


def test_should_clear_all_entries(cache):
    _three(cache)
    cache.clear()
    assert cache.entries == ()


def test_should_not_reset_epoch_history_head_if_undefined_passed(cache):
    _three(cache)
    cache.truncate_from_start(UNDEFINED_EPOCH_OFFSET)
    assert len(cache.entries) == 3


def test_should_not_reset_epoch_history_tail_if_undefined_passed(cache):
    _three(cache)
    cache.truncate_from_end(UNDEFINED_EPOCH_OFFSET)
    assert len(cache.entries) == 3


def test_should_fetch_latest_epoch_of_empty_cache(cache):
    assert cache.latest_epoch == UNDEFINED_EPOCH


def test_should_fetch_end_offset_of_empty_cache(cache):
    assert cache.end_offset_for(7) == UNDEFINED


def test_should_clear_earliest_on_empty_cache(cache):
    assert cache.truncate_from_start(7) is False
    assert cache.entries == ()


def test_should_clear_latest_on_empty_cache(cache):
    assert cache.truncate_from_end(7) is False
    assert cache.entries == ()


# --- seglog: the checkpoint file -------------------------------------------------------------


def _file(tmp_path):
    return os.path.join(tmp_path, filenames.LEADER_EPOCH_CHECKPOINT)


def _text(tmp_path):
    with open(_file(tmp_path), "rb") as f:
        return f.read()


def test_every_change_is_written_in_kafkas_format(tmp_path, leo):
    cache = LeaderEpochCache.load(tmp_path, leo)
    assert not os.path.exists(_file(tmp_path))  # nothing to record: no file (standalone logs)
    cache.clear()
    assert not os.path.exists(_file(tmp_path))
    assert cache.assign(0, 0) is True
    assert _text(tmp_path) == b"0\n1\n0 0\n"
    assert cache.assign(0, 5) is False  # a no-op writes nothing
    cache.assign(3, 7)
    cache.assign(5, 20)
    assert _text(tmp_path) == b"0\n3\n0 0\n3 7\n5 20\n"
    cache.truncate_from_end(20)
    assert _text(tmp_path) == b"0\n2\n0 0\n3 7\n"
    cache.truncate_from_start(4)
    assert _text(tmp_path) == b"0\n2\n0 4\n3 7\n"
    assert LeaderEpochCache.load(tmp_path, leo).entries == (E(0, 4), E(3, 7))
    cache.clear()
    assert _text(tmp_path) == b"0\n0\n"
    assert LeaderEpochCache.load(tmp_path, leo).entries == ()


def test_read_only_cache_never_writes(tmp_path, leo):
    LeaderEpochCache.load(tmp_path, leo).assign(1, 3)
    before = _text(tmp_path)
    reader = LeaderEpochCache.load(tmp_path, leo, read_only=True)
    assert reader.path is None
    reader.assign(2, 9)
    reader.clear()
    assert _text(tmp_path) == before


def test_load_applies_assign_rules_to_non_monotonic_entries(tmp_path, leo):
    # Kafka loads through assign(): entries that break monotonicity are dropped.
    with open(_file(tmp_path), "w") as f:
        f.write("0\n3\n1 5\n2 3\n4 9\n")
    assert LeaderEpochCache.load(tmp_path, leo).entries == (E(2, 3), E(4, 9))


@pytest.mark.parametrize("text", [
    "1\n1\n0 0\n",          # unknown version
    "0\n2\n0 0\n",          # count does not match
    "0\n1\n0\n",            # malformed line
    "0\n1\nx 0\n",          # not a number
    "0\n1\n-1 0\n",         # negative epoch (Kafka: IllegalArgumentException)
    "0\n1\n0 -5\n",         # negative start offset
    "0\n1\n2147483648 0\n",  # epoch outside int32
])
def test_corrupt_checkpoint_is_a_typed_error(tmp_path, leo, text):
    with open(_file(tmp_path), "w") as f:
        f.write(text)
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache.load(tmp_path, leo)


@pytest.mark.parametrize("epoch, start", [(-1, 0), (0, -1), (2**31, 0), (0, 2**63)])
def test_assign_refuses_invalid_entries(cache, epoch, start):
    with pytest.raises(ValueError):
        cache.assign(epoch, start)
    assert cache.entries == ()
