"""Kafka 4.4's timestamp rules on append (``LogValidator.validateTimestamp``), through the
public Log API on both backends: a CreateTime record more than
``message.timestamp.after.max.ms`` (default one hour) ahead of the broker's clock, or more
than ``message.timestamp.before.max.ms`` behind it, is refused with InvalidTimestampError;
a record without a timestamp (-1) is never out of range; a producer may not mark a batch
LogAppendTime unless every record has a CreateTime timestamp on a CreateTime topic."""

from __future__ import annotations

import pytest

from seglog import Log, LogConfig
from seglog.errors import InvalidTimestampError
from seglog.storage.validator import timestamp_out_of_range

NOW_MS = 1_700_000_000_000
HOUR_MS = 3600 * 1000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def open_log(path, backend, **config):
    return Log.open(path, config=LogConfig(**config), backend=backend.name)


def test_default_after_max_is_kafkas_hour():
    assert LogConfig().message_timestamp_after_max_ms == HOUR_MS
    assert LogConfig().message_timestamp_before_max_ms == INT64_MAX


def test_a_record_two_hours_ahead_is_refused_by_default(tmp_path, backend):
    ahead_ms = NOW_MS + 2 * HOUR_MS
    with open_log(tmp_path / "t-0", backend) as log:
        with pytest.raises(InvalidTimestampError):
            log.append(b"v", timestamp_ms=ahead_ms, now_ms=NOW_MS)
        with pytest.raises(InvalidTimestampError):
            log.append_batch([b"a", b"b"], timestamps_ms=[NOW_MS, ahead_ms], now_ms=NOW_MS)
        raw = backend.encode_batch([b"a", b"b"], timestamps_ms=[NOW_MS, ahead_ms])
        with pytest.raises(InvalidTimestampError, match=(
                rf"Timestamp {ahead_ms} of message with offset 1 is out of range. The "
                rf"timestamp should be within \[{NOW_MS - INT64_MAX}, {NOW_MS + HOUR_MS}\]")):
            log.append_raw(raw, now_ms=NOW_MS)
        assert log.end_offset == 0
        # Exactly one hour ahead is allowed (Kafka: difference > after.max.ms fails).
        log.append(b"v", timestamp_ms=NOW_MS + HOUR_MS, now_ms=NOW_MS)
        log.append_raw(backend.encode_batch([b"v"], timestamps_ms=NOW_MS + HOUR_MS),
                       now_ms=NOW_MS)
        with pytest.raises(InvalidTimestampError):
            log.append_raw(backend.encode_batch([b"v"], timestamps_ms=NOW_MS + HOUR_MS + 1),
                           now_ms=NOW_MS)
        assert log.end_offset == 2


def test_before_max(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, message_timestamp_before_max_ms=1000) as log:
        log.append_raw(backend.encode_batch([b"v"], timestamps_ms=NOW_MS - 1000), now_ms=NOW_MS)
        with pytest.raises(InvalidTimestampError, match="offset 0 is out of range"):
            log.append_raw(backend.encode_batch([b"v"], timestamps_ms=NOW_MS - 1001),
                           now_ms=NOW_MS)
        with pytest.raises(InvalidTimestampError):
            log.append(b"v", timestamp_ms=NOW_MS - 1001, now_ms=NOW_MS)
        assert log.end_offset == 1


def test_a_record_without_timestamp_is_never_out_of_range(tmp_path, backend):
    # Kafka skips RecordBatch.NO_TIMESTAMP (-1); -2 is a timestamp, far in the past.
    with open_log(tmp_path / "t-0", backend, message_timestamp_before_max_ms=1000) as log:
        log.append_raw(backend.encode_batch([b"a", b"b"], timestamps_ms=[-1, NOW_MS]),
                       now_ms=NOW_MS)
        log.append_batch([b"a"], timestamps_ms=[-1], now_ms=NOW_MS)
        assert log.end_offset == 3


def test_a_log_append_time_topic_ignores_the_bounds(tmp_path, backend):
    with open_log(tmp_path / "t-0", backend, message_timestamp_type="LogAppendTime") as log:
        log.append_raw(backend.encode_batch([b"v"], timestamps_ms=NOW_MS + 10 * HOUR_MS),
                       now_ms=NOW_MS)
        log.append(b"v", timestamp_ms=NOW_MS + 10 * HOUR_MS, now_ms=NOW_MS)
        assert [r.timestamp_ms for r in log.records()] == [NOW_MS, NOW_MS]


def test_a_producer_may_not_set_log_append_time(tmp_path, backend):
    marked = backend.encode_batch([b"v"], timestamps_ms=NOW_MS, timestamp_type=1)
    with open_log(tmp_path / "lat-0", backend, message_timestamp_type="LogAppendTime") as log:
        with pytest.raises(InvalidTimestampError, match="should not set timestamp type to "
                                                        "LogAppendTime"):
            log.append_raw(marked, now_ms=NOW_MS)
    with open_log(tmp_path / "ct-0", backend) as log:
        # On a CreateTime topic a record with a timestamp is checked as CreateTime ...
        log.append_raw(marked, now_ms=NOW_MS)
        # ... and one without is refused.
        with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
            log.append_raw(backend.encode_batch([b"v"], timestamps_ms=-1, timestamp_type=1),
                           now_ms=NOW_MS)
        assert log.end_offset == 1


@pytest.mark.parametrize("timestamp_ms,before_ms,after_ms,expected", [
    (NOW_MS, INT64_MAX, HOUR_MS, False),
    (-1, 0, 0, False),                      # NO_TIMESTAMP
    (-2, INT64_MAX, 0, False),              # far past, no before bound
    (-2, NOW_MS, 0, True),
    (INT64_MAX, INT64_MAX, INT64_MAX, False),
    (INT64_MAX, INT64_MAX, HOUR_MS, True),
    # Java's long arithmetic: now - MIN overflows to a negative difference whose negation
    # is above after.max.ms, so Kafka refuses it although before.max.ms is unbounded.
    (INT64_MIN, INT64_MAX, HOUR_MS, True),
])
def test_kafkas_rule_in_long_arithmetic(timestamp_ms, before_ms, after_ms, expected):
    config = LogConfig(message_timestamp_before_max_ms=before_ms,
                       message_timestamp_after_max_ms=after_ms)
    assert timestamp_out_of_range(timestamp_ms, config=config, now_ms=NOW_MS) is expected
