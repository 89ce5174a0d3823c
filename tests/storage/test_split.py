"""The parts Log is built from, used on their own: the validator's ValidationResult, LocalLog's
segment chain, the reader snapshot, and the public hooks the cleaner uses.

Every test takes the ``backend`` fixture and runs on both twins.
"""

from __future__ import annotations

import dataclasses

import pytest

from seglog import Log, LogConfig
from seglog import format as fmt
from seglog.errors import InvalidRecordError
from seglog.storage.local_log import LocalLog, max_segment_ms
from seglog.storage.reads import LogReadResult
from seglog.storage.validator import (
    ValidationResult,
    check_marker_fields,
    validate_client_batches,
)

NOW_MS = 1_700_000_000_000


def test_validation_result_names_what_to_write(backend):
    raw = backend.encode_batch([b"a", b"b"], None, NOW_MS - 5, None, base_offset=0)
    valid = validate_client_batches(memoryview(raw), backend=backend, config=LogConfig(),
                                    now_ms=NOW_MS)
    assert isinstance(valid, ValidationResult)
    assert bytes(valid.data) == bytes(raw)  # nothing to rewrite: the caller's bytes
    assert (valid.size_bytes, valid.record_count, valid.max_timestamp_ms) == (
        len(raw), 2, NOW_MS - 5)
    assert valid.batches is None  # no producer id: the producer state needs no batches


def test_validation_result_with_log_append_time_is_a_new_buffer(backend):
    raw = backend.encode_batch([b"a"], None, NOW_MS - 5, None, base_offset=0, producer_id=7,
                               producer_epoch=0, base_sequence=0)
    config = LogConfig(message_timestamp_type="LogAppendTime")
    valid = validate_client_batches(memoryview(raw), backend=backend, config=config,
                                    now_ms=NOW_MS)
    assert valid.max_timestamp_ms == NOW_MS
    assert bytes(valid.data) != bytes(raw)  # max timestamp, type bit and CRC rewritten
    (batch,) = valid.batches
    assert batch.timestamp_type == fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME
    batch.ensure_valid()


def test_marker_fields_are_checked():
    assert check_marker_fields(producer_id=1, producer_epoch=2, coordinator_epoch=3) == (1, 2, 3)
    with pytest.raises(InvalidRecordError):
        check_marker_fields(producer_id=-1, producer_epoch=0, coordinator_epoch=0)


def test_read_result_takes_keywords_only_and_is_frozen():
    with pytest.raises(TypeError):
        LogReadResult(memoryview(b""), 0, 0, None, 0, 0, 0, 0, 0)  # noqa: the point
    result = LogReadResult(buffer=memoryview(b""), offset=5, next_offset=5, log_path=None,
                           position=0, size_bytes=0, high_watermark=7, start_offset=0,
                           end_offset=9)
    assert (result.last_stable_offset, result.aborted_transactions) == (-1, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.offset = 6
    moved = dataclasses.replace(result, offset=6)
    assert (moved.offset, moved.high_watermark) == (6, 7) and moved != result


def test_local_log_rolls_and_truncates_its_chain(backend, tmp_path):
    config = LogConfig()
    retired = []
    local = LocalLog(str(tmp_path), config, backend, read_only=False, now_ms=NOW_MS,
                     retire_snapshot=lambda base: retired.append(base))
    local.truncate_fully(0, now_ms=NOW_MS)  # an empty chain starts with one segment at 0
    assert [s.base_offset for s in local.segments] == [0]
    active = local.segments.last()
    active.append(backend.encode_batch([b"x"] * 3, None, NOW_MS, None, base_offset=0))
    with pytest.raises(TypeError):
        local.roll_reason(active, 10, 1, NOW_MS, NOW_MS, 3)  # same-typed ints: keywords only
    assert local.roll_reason(active, size_bytes=10, record_count=1, max_timestamp_ms=NOW_MS,
                             now_ms=NOW_MS, end_offset=3) is None
    assert local.roll_reason(
        active, size_bytes=10, record_count=1,
        max_timestamp_ms=NOW_MS + max_segment_ms(config) + 1, now_ms=NOW_MS,
        end_offset=3) == "time"
    assert local.roll(3, now_ms=NOW_MS)
    assert not local.roll(3, now_ms=NOW_MS)  # the active segment is already empty at 3
    assert [s.base_offset for s in local.segments] == [0, 3]
    local.flush(3, now_ms=NOW_MS)
    assert local.recovery_point == 3
    local.truncate_to(1, now_ms=NOW_MS)  # the batch holding 1 goes: the chain restarts at 1
    assert [s.base_offset for s in local.segments] == [1]
    assert local.recovery_point == 1
    assert sorted(retired) == [0, 3]  # both segments left the chain with their snapshots
    assert local.delete_expired_files(now_ms=NOW_MS + config.file_delete_delay_ms) == 2
    local.close()


def test_cleaner_hooks_are_public(backend, tmp_path):
    config = LogConfig(cleanup_policy="compact", segment_bytes=400)
    with Log.open(tmp_path / "t-0", config, backend=backend.name, now_ms=NOW_MS) as log:
        for i in range(30):
            log.append(b"v%d" % i, key=b"k%d" % (i % 3), timestamp_ms=NOW_MS, now_ms=NOW_MS)
        with log.cleaning():  # the writer lock, re-entrant
            with log.cleaning():
                first = log.segments[0]
                assert log.txn_index(first.base_offset) is log.txn_index(first.base_offset)
        stats = log.compact(now_ms=NOW_MS, force=True)
        assert not stats.skipped and stats.segments_cleaned >= 1
        assert [(r.key, r.value) for r in log.records()][-3:] == [
            (b"k0", b"v27"), (b"k1", b"v28"), (b"k2", b"v29")]
