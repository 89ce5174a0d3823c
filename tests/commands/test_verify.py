"""``seglog dump --verify``: a clean data dir (a Store's, with compaction, transactions,
several segments, two JBOD log dirs) verifies clean on both backends, and every corruption
seglog's storage tests make (tests/storage/test_recovery.py, test_log_recovery.py,
test_log_untrusted.py, test_log_offsets_untrusted.py, test_txnindex.py, test_checkpoints.py,
test_leader_epoch_cache.py, test_producer_state.py, and tests/kafka's corpus corruptions) is
found and named as ``path: what``, with exit code 3. Every run is the real command, as a
subprocess."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path
from typing import Callable

import pytest

import seglog
from seglog import format as fmt
from seglog.storage.config import LogConfig

from segment_helpers import recrc

TS = 1_700_000_000_000
PID_IDEMPOTENT = 4001
PID_TXN = 4002


def write_partition(path: Path, backend: str) -> None:
    """A standalone Log (its checkpoints in its own dir) over 4+ small segments: plain,
    compressed, idempotent and transactional batches (one committed, one aborted: a
    .txnindex), leader epochs 0 and 3 (a leader-epoch-checkpoint), closed cleanly."""
    with seglog.Log.open(path, LogConfig(segment_bytes=700, index_interval_bytes=100),
                         backend=backend, now_ms=TS + 10_000) as log:
        log.become_leader(0)
        seq = 0
        for rnd in range(4):
            if rnd == 2:
                log.become_leader(3)
            for codec in ("none", "gzip", "lz4"):
                log.append_batch([f"v{rnd}-{codec}-{i}".encode() for i in range(4)],
                                 [f"k{i}".encode() for i in range(4)],
                                 [TS + 100 * rnd + i for i in range(4)], compression=codec,
                                 now_ms=TS + 10_000)
            log.append_batch([b"idem"] * 2, None, TS + 100 * rnd + 50, now_ms=TS + 10_000,
                             producer_id=PID_IDEMPOTENT, producer_epoch=0,
                             base_sequence=2 * rnd)
            log.append_batch([b"txn"] * 3, None, TS + 100 * rnd + 60, now_ms=TS + 10_000,
                             producer_id=PID_TXN, producer_epoch=0, base_sequence=seq,
                             is_transactional=True)
            seq += 3
            log.append_txn_marker(producer_id=PID_TXN, producer_epoch=0, coordinator_epoch=0,
                                  commit=rnd % 2 == 0, now_ms=TS + 100 * rnd + 70)


def write_store(path: Path, backend: str) -> list[str]:
    """A Store's data dir with an extra (JBOD) log dir: two topics, one compacted (and
    compacted), transactions committed and aborted, a group's committed offsets; returns the
    log dirs."""
    jbod = str(path) + "-jbod"
    with seglog.Store(str(path), backend=backend, extra_log_dirs=[jbod],
                      offsets_topic_partitions=1, transaction_state_partitions=1) as store:
        store.create_topic("plain", 2, {"segment.bytes": 1024, "index.interval.bytes": 100})
        store.create_topic("compact", 1, {"cleanup.policy": "compact", "segment.bytes": 600,
                                          "min.cleanable.dirty.ratio": 0.0})
        producer = store.producer(linger_ms=0)
        for i in range(60):
            producer.send("plain", f"v{i}".encode() * 5, key=f"k{i % 7}".encode())
            producer.send("compact", f"c{i}".encode(), key=f"k{i % 5}".encode())
        producer.flush()
        txn = store.producer(transactional_id="verify-txn", linger_ms=0)
        for n in range(4):
            txn.begin_transaction()
            for i in range(5):
                txn.send("plain", f"t{n}-{i}".encode(), partition=0)
            if n % 2:
                txn.abort_transaction()
            else:
                txn.commit_transaction()
        assert store.compact()
        consumer = store.consumer("verify-group", ["plain"], auto_offset_reset="earliest")
        for _ in range(20):
            consumer.poll(timeout_ms=50)
        consumer.commit()
    return [str(path), jbod]


def _segments(d: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.endswith(suffix) and p.name[0].isdigit())


def _batches(file: Path) -> list:
    return list(seglog.get_backend("pure").iter_batches(file.read_bytes()))


def _patch(file: Path, position: int, data: bytes) -> None:
    with open(file, "r+b") as f:
        f.seek(position)
        f.write(data)


def _middle_log(d: Path) -> Path:
    logs = _segments(d)
    return logs[len(logs) // 2]


# --- the corruptions: each returns the file the problem must name and what it must say ---------

def flip_record_byte(d: Path) -> tuple[Path, str]:
    """kafka_corpus flip-middle / test_recovery's crc flip: a byte under the CRC."""
    log = _middle_log(d)
    b = _batches(log)[1]
    _patch(log, b.position + b.size_bytes - 3, bytes([log.read_bytes()[b.position + b.size_bytes - 3] ^ 0x5A]))
    return log, fmt.REASON_CRC_MISMATCH


def crc_field(d: Path) -> tuple[Path, str]:
    log = _segments(d)[-1]
    b = _batches(log)[-1]
    _patch(log, b.position + fmt.CRC_POSITION, struct.pack(">I", 12345))
    return log, fmt.REASON_CRC_MISMATCH


def header_max_timestamp(d: Path) -> tuple[Path, str]:
    """test_log_untrusted: a header's max timestamp changed (the CRC covers it)."""
    log = _middle_log(d)
    b = _batches(log)[0]
    _patch(log, b.position + fmt.MAX_TIMESTAMP_POSITION, struct.pack(">q", TS + 99_999))
    return log, fmt.REASON_CRC_MISMATCH


def torn_tail(d: Path) -> tuple[Path, str]:
    log = _segments(d)[-1]
    b = _batches(log)[-1]
    os.truncate(log, b.position + b.size_bytes // 2)
    return log, fmt.REASON_TRUNCATED


def cut_one_byte(d: Path) -> tuple[Path, str]:
    log = _segments(d)[-1]
    os.truncate(log, log.stat().st_size - 1)
    return log, fmt.REASON_TRUNCATED


def zero_tail(d: Path) -> tuple[Path, str]:
    log = _segments(d)[-1]
    with open(log, "ab") as f:
        f.write(bytes(64))
    return log, fmt.REASON_BATCH_TOO_SMALL


def garbage_appended(d: Path) -> tuple[Path, str]:
    log = _segments(d)[-1]
    with open(log, "ab") as f:
        f.write(bytes(range(7, 200)))
    return log, "position"


def _bad_last_batch(d: Path, position: int, code: str, value: int, *, fix_crc: bool) -> Path:
    log = _segments(d)[-1]
    b = _batches(log)[-1]
    raw = bytearray(log.read_bytes()[b.position:b.position + b.size_bytes])
    struct.pack_into(">" + code, raw, position, value)
    _patch(log, b.position, recrc(raw) if fix_crc else bytes(raw))
    return log


def length_13(d: Path) -> tuple[Path, str]:
    return _bad_last_batch(d, fmt.BATCH_LENGTH_POSITION, "i", 13, fix_crc=False), \
        fmt.REASON_BATCH_TOO_SMALL


def length_30(d: Path) -> tuple[Path, str]:
    return _bad_last_batch(d, fmt.BATCH_LENGTH_POSITION, "i", 30, fix_crc=False), \
        fmt.REASON_BATCH_TOO_SMALL


def length_huge(d: Path) -> tuple[Path, str]:
    return _bad_last_batch(d, fmt.BATCH_LENGTH_POSITION, "i", fmt.INT32_MAX, fix_crc=False), \
        fmt.REASON_TRUNCATED


def bad_magic(d: Path) -> tuple[Path, str]:
    return _bad_last_batch(d, fmt.MAGIC_POSITION, "b", 1, fix_crc=False), fmt.REASON_BAD_MAGIC


def bad_last_offset_delta(d: Path) -> tuple[Path, str]:
    return _bad_last_batch(d, fmt.LAST_OFFSET_DELTA_POSITION, "i", -2, fix_crc=True), \
        fmt.REASON_BAD_LAST_OFFSET_DELTA


def bad_record_count(d: Path) -> tuple[Path, str]:
    """test_recovery's REASON_BAD_RECORDS: the header's count changed, the CRC fixed."""
    log = _segments(d)[-1]
    b = next(b for b in reversed(_batches(log)) if b.record_count > 2 and not b.is_control)
    raw = bytearray(log.read_bytes()[b.position:b.position + b.size_bytes])
    struct.pack_into(">i", raw, fmt.RECORDS_COUNT_POSITION, b.record_count - 1)
    _patch(log, b.position, recrc(raw))
    return log, fmt.REASON_BAD_RECORDS


def overlapping_batch(d: Path) -> tuple[Path, str]:
    """test_recovery's REASON_OFFSETS_NOT_INCREASING: a valid batch going back."""
    log = _segments(d)[-1]
    last = _batches(log)[-1]
    be = seglog.get_backend("pure")
    with open(log, "ab") as f:
        f.write(be.encode_batch([b"x", b"y"], base_offset=last.last_offset))
    return log, fmt.REASON_OFFSETS_NOT_INCREASING


def below_base_offset(d: Path) -> tuple[Path, str]:
    log = _segments(d)[-1]
    be = seglog.get_backend("pure")
    base = int(log.name.split(".")[0])
    data = be.encode_batch([b"x"], base_offset=base - 1) + log.read_bytes()
    log.write_bytes(data)
    return log, "below the segment's base offset"


def raised_base_offset(d: Path) -> tuple[Path, str]:
    """test_log_offsets_untrusted F1: a non-last segment's last batch's base offset raised
    (outside the CRC)."""
    log = _segments(d)[0]
    b = _batches(log)[-1]
    _patch(log, b.position + 6, b"\x69")
    return log, fmt.REASON_OFFSETS_OUTSIDE_SEGMENT


def non_last_segment_cut(d: Path) -> tuple[Path, str]:
    """F2: a non-last segment cut at a batch boundary: its index names what is gone."""
    log = _segments(d)[0]
    os.truncate(log, _batches(log)[1].position)
    return log.with_suffix(".index"), "no batch starts at position"


def below_recovery_point(d: Path) -> tuple[Path, str]:
    """F3: after a clean close the last segment lost its tail at a batch boundary."""
    log = _segments(d)[-1]
    os.truncate(log, _batches(log)[-1].position)
    os.truncate(log.with_suffix(".index"), 0)
    os.truncate(log.with_suffix(".timeindex"), 0)
    return d / "recovery-point-offset-checkpoint", fmt.REASON_BELOW_RECOVERY_POINT


def _set_checkpoint_offset(file: Path, value: int) -> None:
    lines = file.read_text().split("\n")
    lines[2] = lines[2].rsplit(" ", 1)[0] + f" {value}"
    file.write_text("\n".join(lines))


def log_start_past_end(d: Path) -> tuple[Path, str]:
    """F6: an impossible log-start-offset checkpoint."""
    _set_checkpoint_offset(d / "log-start-offset-checkpoint", 2**63 - 1)
    return d / "log-start-offset-checkpoint", "past the log end offset"


def log_start_negative(d: Path) -> tuple[Path, str]:
    _set_checkpoint_offset(d / "log-start-offset-checkpoint", -5)
    return d / "log-start-offset-checkpoint", "negative offset -5"


def malformed_checkpoint(d: Path) -> tuple[Path, str]:
    (d / "recovery-point-offset-checkpoint").write_text("0\n1\nthis is not a line\n")
    return d / "recovery-point-offset-checkpoint", "Malformed line"


def garbage_index(d: Path) -> tuple[Path, str]:
    """kafka_corpus bad-index: entries past the end of the .log."""
    index = _middle_log(d).with_suffix(".index")
    entries = max(2, index.stat().st_size // 8)
    index.write_bytes(b"".join((7 + 3 * i).to_bytes(4, "big") + (999_999 - i).to_bytes(4, "big")
                               for i in range(entries)))
    return index, "no batch starts at position 999999"


def index_partial_entry(d: Path) -> tuple[Path, str]:
    """test_recovery's garbage appended to an index."""
    index = _middle_log(d).with_suffix(".index")
    with open(index, "ab") as f:
        f.write(b"\x01\x02\x03")
    return index, "not a multiple of the 8-byte entry"


def index_out_of_order(d: Path) -> tuple[Path, str]:
    index = _middle_log(d).with_suffix(".index")
    data = index.read_bytes()
    assert len(data) >= 16
    index.write_bytes(data[8:16] + data[0:8] + data[16:])
    return index, "not above the entry before"


def index_wrong_position(d: Path) -> tuple[Path, str]:
    index = _middle_log(d).with_suffix(".index")
    rel, position = struct.unpack(">ii", index.read_bytes()[:8])
    _patch(index, 0, struct.pack(">ii", rel, position + 1))
    return index, f"no batch starts at position {position + 1}"


def index_wrong_offset(d: Path) -> tuple[Path, str]:
    index = _middle_log(d).with_suffix(".index")
    rel, position = struct.unpack(">ii", index.read_bytes()[:8])
    _patch(index, 0, struct.pack(">ii", rel + 50, position))
    return index, "the batch at that position holds offsets"


def missing_index(d: Path) -> tuple[Path, str]:
    """test_recovery's missing index."""
    index = _middle_log(d).with_suffix(".index")
    index.unlink()
    return index, "missing"


def missing_time_index(d: Path) -> tuple[Path, str]:
    index = _middle_log(d).with_suffix(".timeindex")
    index.unlink()
    return index, "missing"


def orphan_index(d: Path) -> tuple[Path, str]:
    """test_log_recovery's orphan index files."""
    orphan = d / f"{99_999:020d}.index"
    orphan.write_bytes(bytes(8))
    return orphan, "an index without its segment"


def garbage_time_index(d: Path) -> tuple[Path, str]:
    index = _middle_log(d).with_suffix(".timeindex")
    index.write_bytes(bytes(range(1, 25)) * 2)
    return index, "timeindex"


def time_index_wrong_timestamp(d: Path) -> tuple[Path, str]:
    index = _middle_log(d).with_suffix(".timeindex")
    ts, rel = struct.unpack(">qi", index.read_bytes()[:12])
    _patch(index, 0, struct.pack(">qi", ts - 1, rel))
    return index, "has max timestamp"


def time_index_out_of_order(d: Path) -> tuple[Path, str]:
    index = _middle_log(d).with_suffix(".timeindex")
    data = index.read_bytes()
    assert len(data) >= 24
    index.write_bytes(data[12:24] + data[0:12] + data[24:])
    return index, "not in order"


def _txn_index(d: Path) -> Path:
    return next(p for p in _segments(d, ".txnindex"))


def txn_index_bad_version(d: Path) -> tuple[Path, str]:
    """test_txnindex: an entry of another version."""
    index = _txn_index(d)
    _patch(index, 0, struct.pack(">h", 7))
    return index, "version"


def txn_index_partial(d: Path) -> tuple[Path, str]:
    index = _txn_index(d)
    with open(index, "ab") as f:
        f.write(b"\x00" * 10)
    return index, "not a multiple of the 34-byte entry"


def txn_index_no_marker(d: Path) -> tuple[Path, str]:
    index = _txn_index(d)
    version, pid, first, last, lso = fmt.ABORTED_TXN_ENTRY.unpack(index.read_bytes()[:34])
    _patch(index, 0, fmt.ABORTED_TXN_ENTRY.pack(version, pid, first, last - 1, lso))
    return index, "no ABORT marker"


def snapshot_flipped(d: Path) -> tuple[Path, str]:
    """test_producer_state: a snapshot whose CRC no longer matches."""
    snap = _segments(d, ".snapshot")[-1]
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0xFF
    snap.write_bytes(bytes(data))
    return snap, "CRC"


def leader_epochs_malformed(d: Path) -> tuple[Path, str]:
    (d / "leader-epoch-checkpoint").write_text("0\n2\n0 0\nnot an entry\n")
    return d / "leader-epoch-checkpoint", "Malformed line"


def leader_epochs_decreasing(d: Path) -> tuple[Path, str]:
    (d / "leader-epoch-checkpoint").write_text("0\n2\n3 0\n1 5\n")
    return d / "leader-epoch-checkpoint", "must increase"


def leader_epochs_past_end(d: Path) -> tuple[Path, str]:
    (d / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 999999\n")
    return d / "leader-epoch-checkpoint", "past the log end offset"


def partition_metadata_garbage(d: Path) -> tuple[Path, str]:
    (d / "partition.metadata").write_text("version: 7\ntopic_id: x\n")
    return d / "partition.metadata", "version"


CORRUPTIONS: dict[str, Callable[[Path], tuple[Path, str]]] = {
    f.__name__: f for f in (
        flip_record_byte, crc_field, header_max_timestamp, torn_tail, cut_one_byte, zero_tail,
        garbage_appended, length_13, length_30, length_huge, bad_magic, bad_last_offset_delta,
        bad_record_count, overlapping_batch, below_base_offset, raised_base_offset,
        non_last_segment_cut, below_recovery_point, log_start_past_end, log_start_negative,
        malformed_checkpoint, garbage_index, index_partial_entry, index_out_of_order,
        index_wrong_position, index_wrong_offset, missing_index, missing_time_index,
        orphan_index, garbage_time_index, time_index_wrong_timestamp, time_index_out_of_order,
        txn_index_bad_version, txn_index_partial, txn_index_no_marker, snapshot_flipped,
        leader_epochs_malformed, leader_epochs_decreasing, leader_epochs_past_end,
        partition_metadata_garbage,
    )
}


@pytest.fixture(scope="module")
def clean_partition(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("verify") / "part-0"
    write_partition(path, seglog.default_backend().name)
    (path / "partition.metadata").write_text("version: 0\ntopic_id: 9Ycl2Wb3SxWmG0Jr7a0e1A")
    return path


def test_clean_partition_verifies_clean(clean_partition, run_seglog):
    ran = run_seglog("dump", "--verify", str(clean_partition))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("no problem found: 1 partitions"), ran.stdout
    names = {p.suffix for p in clean_partition.iterdir()}
    # the corpus holds what the corruptions below need
    assert {".log", ".index", ".timeindex", ".txnindex", ".snapshot"} <= names
    assert (clean_partition / "leader-epoch-checkpoint").read_text().split("\n")[1] == "2"


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_every_corruption_is_found(clean_partition, tmp_path, run_seglog, name):
    d = tmp_path / "part-0"
    shutil.copytree(clean_partition, d)
    file, what = CORRUPTIONS[name](d)
    ran = run_seglog("dump", "--verify", str(d))
    assert ran.returncode == 3, f"{name}: not found\n{ran.stdout}{ran.stderr}"
    lines = ran.stdout.splitlines()
    assert any(line.startswith(f"{file}: ") and what in line for line in lines), \
        f"{name}: expected '{file}: ...{what}...' in\n{ran.stdout}"
    assert "problems" in ran.stderr
    as_json = run_seglog("dump", "--verify", "--output", "json", str(d))
    assert as_json.returncode == 3
    assert [f"{p['path']}: {p['problem']}" for p in as_json.json()] == lines


@pytest.mark.parametrize("backend_name", seglog.BACKEND_NAMES)
def test_clean_store_data_dir_verifies_clean(tmp_path, run_seglog, backend_name):
    """A Store's data dir and its JBOD log dir, written by each backend."""
    dirs = write_store(tmp_path / "data", backend_name)
    ran = run_seglog("dump", "--verify", *dirs)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("no problem found:"), ran.stdout
    partitions = int(ran.stdout.split(":")[1].split()[0])
    assert partitions >= 5  # plain-0, plain-1, compact-0, the offsets and transaction topics
    as_json = run_seglog("dump", "--verify", "-o", "json", *dirs)
    assert (as_json.returncode, as_json.json()) == (0, [])
    # the same data dir with one corruption: found, named under the right log dir
    plain = next(Path(d) / "plain-1" for d in dirs if (Path(d) / "plain-1").exists())
    file, what = flip_record_byte(plain)
    ran = run_seglog("dump", "--verify", *dirs)
    assert ran.returncode == 3
    assert ran.stdout.splitlines() == [line for line in ran.stdout.splitlines()
                                       if line.startswith(f"{file}: ") and what in line]


def test_missing_path_is_a_problem(tmp_path, run_seglog):
    ran = run_seglog("dump", "--verify", str(tmp_path / "nope"))
    assert ran.returncode == 3
    assert ran.stdout.strip() == f"{tmp_path / 'nope'}: no such file or directory"


def test_progress_on_a_terminal_only(clean_partition, run_seglog):
    """The bar (bytes verified) is drawn on a terminal; a pipe gets no control characters,
    and ``--quiet`` silences the terminal too."""
    import fcntl
    import pty
    import subprocess
    import termios
    import sys

    # this checkout's src (not `from conftest import`: in a whole-suite run that name is
    # another directory's conftest)
    src_dir = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, PYTHONPATH=str(src_dir), COLUMNS="100")

    def on_tty(*args: str) -> str:
        leader, follower = pty.openpty()
        # a terminal 100 columns wide (a new pty has none, and tqdm draws nothing in 0)
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        try:
            proc = subprocess.run([sys.executable, "-m", "seglog", *args], stdout=subprocess.PIPE,
                                  stderr=follower, env=env, timeout=60, check=False)
            os.close(follower)
            follower = -1
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            assert proc.returncode == 0
            return b"".join(chunks).decode(errors="replace")
        finally:
            os.close(leader)
            if follower >= 0:
                os.close(follower)

    assert "verifying" in on_tty("dump", "--verify", str(clean_partition))
    assert "verifying" not in on_tty("--quiet", "dump", "--verify", str(clean_partition))
    piped = run_seglog("dump", "--verify", str(clean_partition))
    assert piped.returncode == 0 and "\r" not in piped.stderr and "\x1b" not in piped.stderr
