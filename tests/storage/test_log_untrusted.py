"""Issue 8, the Log's part: bytes on disk are untrusted. Every record-decoding read checks
CRC32C by default (``check_crcs=False`` opts out), base offsets must increase batch to batch,
a batch that cannot be read below a segment's end is an error (never a silent end of data),
indexes that name offsets the log no longer holds are rebuilt, garbage index files never crash
an open, and every integer argument gets the same TypeError / ValueError on both backends.
Every test runs on both backends.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import textwrap

import pytest

from seglog import Log, LogConfig
from seglog import format as fmt
from seglog.errors import CorruptRecordError, OffsetOutOfRangeError

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


def log_file(d, base=0):
    return os.path.join(d, f"{base:020d}.log")


def batch_positions(d, backend, base=0):
    """``[(position, base_offset, size_bytes)]`` of the batches in a segment file."""
    data = open(log_file(d, base), "rb").read()
    return [(b.position, b.base_offset, b.size_bytes) for b in backend.iter_batches(data)]


def write_closed(tmp_path, backend, n=30, **config):
    """A cleanly closed log of ``n`` one-record batches with values ``value-000``..."""
    d = str(tmp_path / "t-0")
    with Log.open(d, LogConfig(**config), backend=backend.name) as log:
        for i in range(n):
            log.append(b"value-%03d" % i, key=b"k%d" % (i % 5), timestamp_ms=1000 + i)
    return d


def flip_in_file(path, needle, *, xor=0x01):
    """Flip the low bit of the last byte of the first occurrence of ``needle``."""
    data = bytearray(open(path, "rb").read())
    at = data.find(needle)
    assert at >= 0, needle
    data[at + len(needle) - 1] ^= xor
    with open(path, "r+b") as f:
        f.seek(at + len(needle) - 1)
        f.write(bytes([data[at + len(needle) - 1]]))


# --- CRC on the record-decoding reads ------------------------------------------------------------


def test_records_check_crc_by_default(tmp_path, backend):
    d = write_closed(tmp_path, backend)
    flip_in_file(log_file(d), b"value-017")  # inside a record value: covered by the CRC only
    with Log.open(d, backend=backend.name) as log:  # clean shutdown: no recovery pass
        seen = []
        with pytest.raises(CorruptRecordError) as info:
            for record in log.records():
                seen.append(record.offset)
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        assert seen == list(range(17))  # what came before the bad batch, nothing after
        # The explicit opt-out (Kafka's check.crcs=false) returns the bytes as they are.
        values = [r.value for r in log.records(check_crcs=False)]
        assert values[17] == b"value-016" and len(values) == 30
        # Raw whole-batch reads stay unverified, as a broker serves them.
        assert len(log.read(0).buffer) > 0


def test_read_columns_check_crc_by_default(tmp_path, backend):
    d = write_closed(tmp_path, backend)
    flip_in_file(log_file(d), b"value-005")
    with Log.open(d, backend=backend.name) as log:
        with pytest.raises(CorruptRecordError) as info:
            log.read_columns(0, 100)
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        columns = log.read_columns(0, 100, check_crcs=False)
        assert len(columns) == 30 and columns.value(5) == b"value-004"


def test_control_batch_crc_checked_before_read_committed_filters(tmp_path, backend):
    """The marker's type and the producer fields decide what read_committed returns: a
    corrupt control batch is an error before it is looked at, not an abort turned into a
    commit (Kafka's consumer checks every batch, control batches included)."""
    d = str(tmp_path / "t-0")
    with Log.open(d, backend=backend.name) as log:
        log.append_batch([b"a", b"b"], producer_id=5, producer_epoch=0, base_sequence=0,
                         is_transactional=True)
        log.append_txn_marker(producer_id=5, producer_epoch=0, coordinator_epoch=7,
                              commit=False)
        log.append(b"after")
    position, _base, size = batch_positions(d, backend)[1]  # the ABORT marker
    with open(log_file(d), "r+b") as f:
        f.seek(position + size - 1)  # last byte of the marker's value
        last = f.read(1)
        f.seek(position + size - 1)
        f.write(bytes([last[0] ^ 0x01]))
    with Log.open(d, backend=backend.name) as log:
        with pytest.raises(CorruptRecordError) as info:
            list(log.records(isolation="read_committed"))
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        assert info.value.position == position
        with pytest.raises(CorruptRecordError):
            log.read_columns(0, 10, isolation="read_committed")
        # read_uncommitted looks at no marker: the opt-out returns the data as it is.
        values = [r.value for r in log.records(check_crcs=False)]
        assert values == [b"a", b"b", b"after"]


def test_records_base_offset_not_increasing_is_an_error(tmp_path, backend):
    """The base offset is outside the CRC: a batch whose base offset goes back must not
    bring its records out of order."""
    d = write_closed(tmp_path, backend, n=10)
    position, base_offset, _size = batch_positions(d, backend)[6]
    with open(log_file(d), "r+b") as f:
        f.seek(position)
        f.write(struct.pack(">q", 2))  # batch 6 now claims offset 2
    with Log.open(d, backend=backend.name) as log:
        with pytest.raises(CorruptRecordError) as info:
            [r.offset for r in log.records()]
        assert info.value.reason == fmt.REASON_OFFSETS_NOT_INCREASING


# --- reads never hide records -------------------------------------------------------------------


def two_segment_log(tmp_path, backend):
    d = str(tmp_path / "t-0")
    with Log.open(d, LogConfig(), backend=backend.name) as log:
        for i in range(30):
            log.append(b"v%02d" % i, timestamp_ms=1000 + i)
        log.roll()
        for i in range(30, 40):
            log.append(b"v%02d" % i, timestamp_ms=1000 + i)
    return d


@pytest.mark.parametrize("damage", ["zeros", "small_length", "bad_magic"])
def test_unparseable_header_mid_segment_is_not_end_of_data(tmp_path, backend, damage):
    d = two_segment_log(tmp_path, backend)
    position = batch_positions(d, backend)[20][0]
    with open(log_file(d), "r+b") as f:
        f.seek(position)
        if damage == "zeros":
            f.write(bytes(64))
        elif damage == "small_length":
            f.write(struct.pack(">qi", 20, 3))
        else:
            f.seek(position + fmt.MAGIC_POSITION)
            f.write(b"\x07")
    size_bytes = os.path.getsize(log_file(d))
    for _ in range(2):  # a refused open leaves nothing that makes the next one hide records
        try:
            log = Log.open(d, backend=backend.name)
        except CorruptRecordError as e:
            # The open may refuse (the segment's indexes name offsets past the bad header
            # and only unclean recovery may cut bytes); then nothing was cut.
            assert os.path.getsize(log_file(d)) == size_bytes
            assert str(d) in str(e)
            continue
        with log:
            seen = []
            with pytest.raises(CorruptRecordError):
                for record in log.records():
                    seen.append(record.offset)
            # Records before the bad batch may come out (or the read holding it may fail as
            # a whole), but never a jump to offset 30 of the next segment.
            assert seen == list(range(len(seen))) and len(seen) <= 20
            with pytest.raises(CorruptRecordError):
                log.read(20)
            with pytest.raises(CorruptRecordError):
                log.read_columns(20, 10)
        assert os.path.getsize(log_file(d)) == size_bytes


def test_read_only_reader_of_a_torn_earlier_segment_gets_an_error(tmp_path, backend):
    """A reader opened read-only after a crash (no recovery ran) over a segment whose file
    was cut mid-batch, with a later segment after it: the lost offsets are an error, never
    a jump to the next segment (found by the file fuzz harness)."""
    d = two_segment_log(tmp_path, backend)
    position, _base, size = batch_positions(d, backend)[12]
    os.truncate(log_file(d), position + size // 2)
    os.remove(os.path.join(d, ".kafka_cleanshutdown"))
    with Log.open(d, backend=backend.name, read_only=True) as log:
        seen = []
        with pytest.raises(CorruptRecordError) as info:
            for record in log.records():
                seen.append(record.offset)
        assert info.value.reason == fmt.REASON_TRUNCATED
        assert seen == list(range(len(seen))) and len(seen) <= 12
        with pytest.raises(CorruptRecordError):
            log.read(15)
        with pytest.raises(CorruptRecordError):
            log.read_columns(15, 10)


# --- indexes that name offsets the log does not hold --------------------------------------------


def test_log_cut_at_batch_boundary_closes_cleanly_after_append(tmp_path, backend):
    """Found in issue 8: a clean log whose tail was cut at a batch boundary kept a time
    index entry for a cut offset; the next close failed on it and never wrote the
    clean-shutdown marker. The loader now rebuilds indexes that name cut offsets.

    Changed by fuzz finding F3: after a clean shutdown the cut makes the log end below its
    recovery point, so the open refuses (tests/storage/test_log_offsets_untrusted.py); after a crash
    (no marker) it is reported as missing offsets and the log is usable, as tested here."""
    d = write_closed(tmp_path, backend, n=10)
    position = batch_positions(d, backend)[8][0]
    os.truncate(log_file(d), position)  # offsets 8 and 9 gone, at a batch boundary
    with pytest.raises(CorruptRecordError) as info:
        # Refused on the first use of the last segment, which a writer's open after a
        # clean shutdown does not open (issue 14); the close puts the marker back.
        with Log.open(d, backend=backend.name) as log:
            list(log.records())
    assert info.value.reason == fmt.REASON_BELOW_RECOVERY_POINT
    os.remove(os.path.join(d, ".kafka_cleanshutdown"))
    with pytest.warns(RuntimeWarning, match="below its checkpointed recovery point"):
        log = Log.open(d, backend=backend.name)
    assert log.recovery_report.missing_offsets == [(8, 10)]
    assert log.end_offset == 8  # (the refused open above already rebuilt the indexes)
    assert log.append(b"after", timestamp_ms=5000) == 8
    log.close()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    with Log.open(d, backend=backend.name) as log:
        assert log.recovery_report.clean_shutdown
        assert [r.value for r in log.records()][-2:] == [b"value-007", b"after"]
        assert log.offset_for_timestamp(5000) == 8


def test_changed_max_timestamp_in_a_header_never_breaks_close(tmp_path, backend):
    """A batch header's max timestamp changed on disk (outside nothing: the CRC covers it,
    but a clean open trusts the files): the segment's largest timestamp then disagrees with
    its time index. The first use of the segment (a writer's open after a clean shutdown
    does not open it: issue 14) refuses with a typed error naming the bad batch, cuts
    nothing, and keeps refusing (the close that follows writes the clean-shutdown marker
    again, changing no segment file), instead of a close() that fails on a backwards
    time-index entry and never marks the log clean."""
    d = write_closed(tmp_path, backend, n=10)
    position = batch_positions(d, backend)[3][0]
    with open(log_file(d), "r+b") as f:
        f.seek(position + fmt.MAX_TIMESTAMP_POSITION)
        f.write(struct.pack(">q", 10**12))
    damaged = open(log_file(d), "rb").read()
    for _ in range(2):
        with pytest.raises(CorruptRecordError) as info:
            with Log.open(d, backend=backend.name) as log:
                log.append(b"more")
        assert info.value.position == position
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        assert open(log_file(d), "rb").read() == damaged
        assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))


def test_unclean_open_recovers_the_changed_header_as_kafka(tmp_path, backend):
    """The same bytes after an unclean shutdown: recovery validates the segment and cuts at
    the first invalid batch, and says so (Kafka's LogLoader)."""
    d = write_closed(tmp_path, backend, n=10)
    position = batch_positions(d, backend)[3][0]
    with open(log_file(d), "r+b") as f:
        f.seek(position + fmt.MAX_TIMESTAMP_POSITION)
        f.write(struct.pack(">q", 10**12))
    os.remove(os.path.join(d, ".kafka_cleanshutdown"))
    with Log.open(d, backend=backend.name) as log:
        assert log.end_offset == 3
        (cut,) = log.recovery_report.truncations
        assert (cut.position, cut.reason) == (position, fmt.REASON_CRC_MISMATCH)
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))


@pytest.mark.parametrize("which", [".index", ".timeindex"])
@pytest.mark.parametrize("clean", [True, False])
def test_garbage_index_files_never_crash_open(tmp_path, backend, which, clean):
    """Random bytes over the start of the index files: the open and the reads complete with
    every record (in a subprocess, so a crash of the native backend is a failure here)."""
    d = str(tmp_path / "t-0")
    code = f"""
        import os, random
        from seglog import Log, LogConfig
        d = {d!r}
        config = LogConfig(index_interval_bytes=64)
        log = Log.open(d, config, backend={backend.name!r})
        for i in range(200):
            log.append(b"v%03d" % i, timestamp_ms=1000 + i)
        log.flush()
        if {clean!r}:
            log.close()
        else:
            log._dir_lock.close()  # as a killed writer: no trim, no marker
        rng = random.Random(7)
        for name in sorted(os.listdir(d)):
            if name.endswith({which!r}):
                with open(os.path.join(d, name), "r+b") as f:
                    f.write(bytes(rng.randrange(256) for _ in range(96)))
        log = Log.open(d, config, backend={backend.name!r})
        assert [r.offset for r in log.records()] == list(range(200))
        assert log.read(150).next_offset > 150
        log.close()
        ro = Log.open(d, config, backend={backend.name!r}, read_only=True)
        assert sum(1 for _ in ro.records()) == 200
        print("ok")
    """
    env = dict(os.environ, PYTHONPATH=SRC)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# --- integer arguments: one behaviour on both backends -------------------------------------------


BAD_INTS = [(1.5, TypeError), ("3", TypeError), (True, TypeError), (2**70, ValueError),
            (-(2**70), ValueError)]


def calls(log):
    """Every public Log method with an integer argument, as ``name -> f(value)``."""
    return {
        "read.offset": lambda v: log.read(v),
        "read.max_bytes": lambda v: log.read(0, v),
        "read.max_offset": lambda v: log.read(0, max_offset=v),
        "records.start": lambda v: list(log.records(v)),
        "records.end": lambda v: list(log.records(0, v)),
        "read_columns.offset": lambda v: log.read_columns(v, 10),
        "read_columns.max_records": lambda v: log.read_columns(0, v),
        "read_columns.max_bytes": lambda v: log.read_columns(0, 10, max_bytes=v),
        "sendfile.offset": lambda v: log.sendfile(1, v),
        "offset_for_timestamp": lambda v: log.offset_for_timestamp(v),
        "aborted_transactions": lambda v: log.aborted_transactions(v, 10),
        "wait_for_data.timeout_ms": lambda v: log.wait_for_data(100, v),
        "update_high_watermark": lambda v: log.update_high_watermark(v),
        "truncate_to": lambda v: log.truncate_to(v),
        "delete_records_before": lambda v: log.delete_records_before(v),
        "append.timestamp_ms": lambda v: log.append(b"x", timestamp_ms=v),
        "append.now_ms": lambda v: log.append(b"x", now_ms=v),
        "append_batch.producer_epoch": lambda v: log.append_batch(
            [b"x"], producer_id=1, producer_epoch=v, base_sequence=0),
        "append_txn_marker.coordinator_epoch": lambda v: log.append_txn_marker(
            producer_id=1, producer_epoch=0, coordinator_epoch=v, commit=True),
        "apply_retention.now_ms": lambda v: log.apply_retention(now_ms=v),
        "flush.now_ms": lambda v: log.flush(now_ms=v),
        "compact.now_ms": lambda v: log.compact(now_ms=v),
        "roll.now_ms": lambda v: log.roll(now_ms=v),
        "maybe_flush.now_ms": lambda v: log.maybe_flush(now_ms=v),
        "delete_expired_files.now_ms": lambda v: log.delete_expired_files(now_ms=v),
        "records.max_offset": lambda v: list(log.records(0, max_offset=v)),
        "sendfile.max_bytes": lambda v: log.sendfile(1, 0, v),
    }


@pytest.mark.parametrize("value,error", BAD_INTS, ids=repr)
def test_bad_integer_arguments_same_error_on_both_backends(tmp_path, backend, value, error):
    with Log.open(str(tmp_path / "t-0"), backend=backend.name) as log:
        for i in range(5):
            log.append(b"v%d" % i, timestamp_ms=1000 + i)
        end = log.end_offset
        for name, call in calls(log).items():
            with pytest.raises(error):
                call(value)
            assert log.end_offset == end, name  # nothing was written


def test_negative_counts_are_errors(tmp_path, backend):
    with Log.open(str(tmp_path / "t-0"), backend=backend.name) as log:
        for i in range(5):
            log.append(b"v%d" % i)
        with pytest.raises(ValueError):
            log.read_columns(0, -1)
        with pytest.raises(ValueError):
            log.read(0, -1)
        with pytest.raises(ValueError):
            log.truncate_to(-1)
        assert len(log.read_columns(0, 0)) == 0
        # Numpy integers are integers; offsets outside the log are still range errors.
        import numpy as np

        assert log.read(np.int64(2)).next_offset == 5
        with pytest.raises(OffsetOutOfRangeError):
            log.read(2**62)
        # A max_bytes larger than any segment reads what there is.
        assert log.read(0, 2**40).next_offset == 5


def test_records_checks_its_arguments_when_called(tmp_path, backend):
    with Log.open(str(tmp_path / "t-0"), backend=backend.name) as log:
        with pytest.raises(TypeError):
            log.records(0.5)  # not deferred to the first next()


def test_random_bytes_in_records_never_served(tmp_path, backend):
    """Small mutation run over the records areas (the batch headers are the fuzz harness's
    and the segment's business): reads give records exactly as written or a
    CorruptRecordError, never changed data and never another exception."""
    d = write_closed(tmp_path, backend, n=40)
    pristine = open(log_file(d), "rb").read()
    records_areas = [(position + fmt.RECORD_BATCH_OVERHEAD, position + size)
                     for position, _base, size in batch_positions(d, backend)]
    written = {b"value-%03d" % i for i in range(40)}
    rng = random.Random(8)
    for _ in range(30):
        data = bytearray(pristine)
        for _ in range(rng.randrange(1, 4)):
            lo, hi = rng.choice(records_areas)
            data[rng.randrange(lo, hi)] ^= 1 << rng.randrange(8)
        with open(log_file(d), "wb") as f:
            f.write(data)
        with Log.open(d, backend=backend.name) as log:
            try:
                for record in log.records():
                    assert record.value in written
            except CorruptRecordError:
                pass
            try:
                columns = log.read_columns(0, 100)
                assert {columns.value(i) for i in range(len(columns))} <= written
            except CorruptRecordError:
                pass
