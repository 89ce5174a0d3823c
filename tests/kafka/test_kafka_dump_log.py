"""``kafka-dump-log`` (Kafka's DumpLogSegments) reads every kind of file seglog writes.

Per backend, seglog writes the ``mixed`` and ``compacted`` partitions of
:mod:`kafka_corpus` (every codec, headers, null keys and values, idempotent and transactional
batches, control batches, many segments, dense indexes, a compacted log with gaps). One JVM
dumps every file of both backends with ``--deep-iteration --print-data-log``: each ``.log``
batch by batch and record by record (CRC checked: ``isvalid``), each ``.index`` and
``.timeindex`` verified against its ``.log``, each ``.txnindex`` and producer ``.snapshot``.
The tool exits 0 on bad CRCs and index mismatches, so the tests read its output: every batch
valid, no trailing bytes, no index or time-index complaint, offset gaps only where seglog's
cleaner made them, and every batch and record field equal to seglog's own reading.

Then the same corrupted files (a flipped byte, a torn tail, a zero-filled tail, a garbage
index) go to the tool and to seglog's recovery: both must point at the same batch.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

import seglog
from kafka_corpus import (
    CODECS,
    CORRUPTIONS,
    IDEMPOTENT_PID,
    NOW_MS,
    TXN_PID,
    WRITERS,
    corrupt,
    dump_log,
    forget_clean_shutdown,
    record_text,
    segment_files,
)

pytestmark = pytest.mark.kafka

_ONLY = os.environ.get("SEGLOG_BACKEND", "").strip().lower()
BACKENDS = [_ONLY] if _ONLY else list(seglog.BACKEND_NAMES)
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
_COMPRESSION_NAMES = {"none": "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4",
                      "zstd": "zstd"}


class Dumped:
    """The corpus of every backend and what the tool printed for it."""

    def __init__(self, root: Path):
        self.root = root
        self.partitions: dict[tuple[str, str], Path] = {}
        self.corruptions = {}
        self.good = None  # (CompletedProcess, {path: FileDump}, DumpErrors)
        self.bad = None
        self.bad_index = None
        self.sanity = None


@pytest.fixture(scope="module")
def dumped(kafka_ref, tmp_path_factory):
    root = tmp_path_factory.mktemp("dump")
    d = Dumped(root)
    files: list[Path] = []
    for backend in BACKENDS:
        for kind, write in WRITERS.items():
            path = root / f"{kind}-{backend}"
            write(path, backend)
            d.partitions[(kind, backend)] = path
            files += segment_files(path, *SUFFIXES)
    d.good = dump_log(kafka_ref, files, root / "run-good")
    indexes = [f for f in files if f.suffix in (".index", ".timeindex")]
    d.sanity = (indexes, kafka_ref.run_tool(
        kafka_ref.dump_log_class, ["--index-sanity-check", "--files",
                                   ",".join(str(f) for f in indexes)],
        run_dir=root / "run-sanity", timeout_s=300))
    source = d.partitions[("mixed", BACKENDS[0])]
    be = seglog.get_backend(BACKENDS[0])
    for name in CORRUPTIONS:
        d.corruptions[name] = corrupt(name, source, root / f"corrupt-{name}", be)
    # The tool stops at the first exception (a zero-filled tail, an index entry past the end
    # of the .log), so the zero-filled tail goes last and the garbage index alone.
    logs = [d.corruptions[n].file for n in ("flip-last", "flip-middle", "torn", "zero-tail")]
    # Shallow: --deep-iteration would decompress the batch whose byte was flipped, and the
    # tool dies on that (a KafkaException from the gzip stream) instead of going on.
    d.bad = dump_log(kafka_ref, logs, root / "run-bad", deep=False)
    d.bad_index = dump_log(kafka_ref, [d.corruptions["bad-index"].file], root / "run-bad-index")
    return d


def _files(d: Dumped, kind: str, backend: str, suffix: str) -> list[Path]:
    return segment_files(d.partitions[(kind, backend)], suffix)


def test_the_tool_ran_cleanly(dumped):
    done, dumps, errors = dumped.good
    assert done.returncode == 0, done.stderr[-3000:]
    assert not errors.other, errors.other
    assert not errors.index_mismatches, errors.index_mismatches
    assert not errors.time_out_of_order, errors.time_out_of_order
    assert not errors.time_offsets_not_found, errors.time_offsets_not_found
    for other in (fd.other for fd in dumps.values()):
        assert not other, other


def test_index_sanity_check(dumped):
    """``--index-sanity-check`` (Kafka's OffsetIndex/TimeIndex.sanityCheck) passes every
    ``.index`` and ``.timeindex`` seglog wrote."""
    indexes, done = dumped.sanity
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for f in indexes:
        assert f"{f} passed sanity check." in done.stdout or f"{f} is empty." in done.stdout, f


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_time_indexes_agree_with_the_logs(dumped, backend, kind):
    """Kafka checks each ``.timeindex`` entry against the max timestamp of the batch ending at
    its offset. One known deviation (docs/kafka-interop.md): seglog's cleaner keeps an *empty*
    batch (no records) at the end of each cleaned group where Kafka drops it, and indexes its
    header's max timestamp; Kafka, iterating its (zero) records, finds -1 there. Anything
    else is a failure."""
    _done, dumps, errors = dumped.good
    for f in _files(dumped, kind, backend.name, ".timeindex"):
        problems = errors.time_mismatches.get(str(f.resolve()), [])
        if not problems:
            continue
        log = f.with_suffix(".log")
        empty = {int(b.get("lastOffset")): int(b.get("CreateTime", -1))
                 for b in dumps[str(log)].batches if b.get("count") == "0"}
        entries = dict((ts, off) for ts, off in dumps[str(f)].time_index)
        for index_ts, log_ts in problems:
            assert kind == "compacted" and log_ts == -1 and entries.get(index_ts) in empty, \
                f"{f}: time index entry {index_ts} disagrees with the log ({log_ts})"


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_every_batch_valid_and_every_file_dumped(dumped, backend, kind):
    _done, dumps, _errors = dumped.good
    for suffix in SUFFIXES:
        for f in _files(dumped, kind, backend.name, suffix):
            assert str(f) in dumps, f"the tool did not dump {f}"
    for f in _files(dumped, kind, backend.name, ".log"):
        fd = dumps[str(f)]
        assert fd.batches, f"{f}: no batch"
        bad = [b for b in fd.batches if b.get("isvalid") != "true"]
        assert not bad, f"{f}: Kafka finds invalid batches {bad}"
        assert fd.invalid_trailing_bytes == 0, f"{f}: {fd.invalid_trailing_bytes} invalid bytes"


def _seglog_batches(backend, path: Path):
    return list(backend.iter_batches(path.read_bytes()))


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_batches_and_records_as_seglog_reads_them(dumped, backend, kind):
    """Every batch header field and every record (offset, timestamp, key, value, header keys)
    as Kafka prints it equals seglog's own decoding of the same file."""
    _done, dumps, _errors = dumped.good
    for f in _files(dumped, kind, backend.name, ".log"):
        fd = dumps[str(f)]
        ours = _seglog_batches(backend, f)
        assert len(fd.batches) == len(ours), f
        records = iter(fd.records)
        for kb, sb in zip(fd.batches, ours):
            expect = {
                "baseOffset": sb.base_offset, "lastOffset": sb.last_offset,
                "count": sb.record_count, "baseSequence": sb.base_sequence,
                "lastSequence": sb.last_sequence, "producerId": sb.producer_id,
                "producerEpoch": sb.producer_epoch,
                "partitionLeaderEpoch": sb.partition_leader_epoch,
                "isTransactional": str(bool(sb.is_transactional)).lower(),
                "isControl": str(bool(sb.is_control)).lower(), "position": sb.position,
                "size": sb.size_bytes, "magic": 2, "crc": sb.crc,
                "compresscodec": _COMPRESSION_NAMES[sb.compression],
            }
            got = {k: kb.get(k) for k in expect}
            assert got == {k: str(v) for k, v in expect.items()}, (f, sb.base_offset)
            ts_key = "CreateTime" if sb.timestamp_type == 0 else "LogAppendTime"
            assert kb.get(ts_key) == str(sb.max_timestamp_ms), (f, sb.base_offset)
            for rec in sb.records():
                kr = next(records)
                assert int(kr["offset"]) == rec.offset
                assert kr.get(ts_key) == str(rec.timestamp_ms), (f, rec.offset)
                assert kr["keySize"] == str(-1 if rec.key is None else len(rec.key))
                assert kr["valueSize"] == str(-1 if rec.value is None else len(rec.value))
                assert kr["headerKeys"] == "[" + ",".join(k for k, _ in rec.headers) + "]"
                if sb.is_control:
                    assert kr.get("endTxnMarker") in ("COMMIT", "ABORT")
                else:
                    assert kr.get("key") == record_text(rec.key), (f, rec.offset)
                    assert kr.get("payload") == record_text(rec.value), (f, rec.offset)
        assert next(records, None) is None, f"{f}: Kafka printed more records than seglog reads"


def test_the_corpus_has_every_kind_of_batch(dumped, backend):
    """The oracle saw what it is meant to check: every codec, control and transactional
    batches, an idempotent producer, null keys and values, headers, gaps, index entries."""
    _done, dumps, _errors = dumped.good
    mixed = [dumps[str(f)] for f in _files(dumped, "mixed", backend.name, ".log")]
    batches = [b for fd in mixed for b in fd.batches]
    records = [r for fd in mixed for r in fd.records]
    assert {b["compresscodec"] for b in batches} == set(CODECS)
    assert any(b["isControl"] == "true" for b in batches)
    assert any(b["isTransactional"] == "true" and b["producerId"] == str(TXN_PID)
               for b in batches)
    assert any(b["producerId"] == str(IDEMPOTENT_PID) for b in batches)
    assert any(r["keySize"] == "-1" for r in records)
    assert any(r["valueSize"] == "-1" for r in records)
    assert any(r["headerKeys"] == "[h1,h2]" for r in records)
    assert len(mixed) >= 5, "many segments"
    indexes = [dumps[str(f)].index for f in _files(dumped, "mixed", backend.name, ".index")]
    assert sum(len(i) for i in indexes) >= 10
    times = [dumps[str(f)].time_index for f in _files(dumped, "mixed", backend.name,
                                                       ".timeindex")]
    assert sum(len(t) for t in times) >= 10


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_offset_gaps_only_where_seglog_has_them(dumped, kafka_ref, backend, kind):
    """Kafka lists non-consecutive offsets per file. The Java tool (4.3+) starts its counter
    at -1, so a segment whose base is not 0 always shows ``-1 is followed by <base>``; the
    Scala one (up to 4.2) starts at the first record. Any other gap must be one seglog's
    reader also sees (compaction), and the uncompacted log has none."""
    _done, _dumps, errors = dumped.good
    first = [-1] if kafka_ref.dump_log_class.startswith("org.") else []
    for f in _files(dumped, kind, backend.name, ".log"):
        offsets = [r.offset for b in _seglog_batches(backend, f) for r in b.records()]
        previous = first + offsets[:-1] if first else offsets[:-1]
        expected = [(a, b) for a, b in zip(previous, offsets if first else offsets[1:])
                    if b != a + 1]
        got = errors.non_consecutive.get(str(f.resolve()), [])
        assert sorted(got) == sorted(expected), f
        if kind == "mixed":
            assert all(a == -1 for a, _b in got), f"{f}: gaps in an uncompacted log: {got}"
    if kind == "compacted":
        gaps = [g for f in _files(dumped, kind, backend.name, ".log")
                for g in errors.non_consecutive.get(str(f.resolve()), []) if g[0] != -1]
        assert gaps, "the compacted log should have gaps inside segments"


def test_txnindex_and_producer_snapshots_as_seglog_keeps_them(dumped, backend):
    _done, dumps, _errors = dumped.good
    path = dumped.partitions[("mixed", backend.name)]
    kafka_aborted = [(int(a["producerId"]), int(a["firstOffset"]), int(a["lastOffset"]),
                      int(a["lastStableOffset"]))
                     for f in _files(dumped, "mixed", backend.name, ".txnindex")
                     for a in dumps[str(f)].aborted]
    with seglog.Log.open(path, read_only=True, backend=backend.name, now_ms=NOW_MS) as log:
        ours = [tuple(a) for a in log.aborted_transactions(log.start_offset, log.end_offset)]
        producers = log.producer_state
        assert kafka_aborted and kafka_aborted == ours
        snapshots = _files(dumped, "mixed", backend.name, ".snapshot")
        assert snapshots
        last = dumps[str(snapshots[-1])]
        assert last.producers, f"{snapshots[-1]}: no producer in Kafka's reading"
        by_pid = {int(p["producerId"]): p for p in last.producers}
        assert set(by_pid) == {IDEMPOTENT_PID, TXN_PID}
        for pid, entry in by_pid.items():
            ours_entry = producers.last_entry(pid)
            assert int(entry["producerEpoch"]) == ours_entry.producer_epoch
            assert int(entry["lastSequence"]) == ours_entry.last_seq
            assert int(entry["lastOffset"]) == ours_entry.last_data_offset


# --- the same corrupted files to Kafka's tool and to seglog's recovery ----------------------

def _recover_with_seglog(corruption, backend, tmp_path):
    path = tmp_path / corruption.name
    shutil.copytree(corruption.path, path)
    forget_clean_shutdown(path)
    with seglog.Log.open(path, backend=backend.name) as log:
        return log.recovery_report, log.end_offset


@pytest.mark.parametrize("name", ["flip-last", "flip-middle"])
def test_flipped_byte_same_batch(dumped, backend, name, tmp_path):
    """Kafka prints the batch whose CRC fails as ``isvalid: false`` (and goes on); seglog's
    recovery cuts the segment at that batch and, like Kafka's LogLoader, deletes every later
    segment."""
    c = dumped.corruptions[name]
    done, dumps, _errors = dumped.bad
    invalid = [b for b in dumps[str(c.file)].batches if b["isvalid"] != "true"]
    assert [int(b["baseOffset"]) for b in invalid] == [c.first_bad_offset]
    assert int(invalid[0]["position"]) == c.position
    report, end = _recover_with_seglog(c, backend, tmp_path)
    assert [(t.base_offset, t.position) for t in report.truncations] == \
        [(c.segment_base, c.position)]
    assert end == c.first_bad_offset
    later = [int(p.stem) for p in segment_files(c.path, ".log") if int(p.stem) > c.segment_base]
    assert sorted(report.deleted_segments) == later


def test_torn_tail_same_position(dumped, backend, tmp_path):
    c = dumped.corruptions["torn"]
    _done, dumps, _errors = dumped.bad
    fd = dumps[str(c.file)]
    assert fd.invalid_trailing_bytes == c.file.stat().st_size - c.position
    assert all(b["isvalid"] == "true" for b in fd.batches)
    report, end = _recover_with_seglog(c, backend, tmp_path)
    assert [(t.base_offset, t.position) for t in report.truncations] == \
        [(c.segment_base, c.position)]
    assert end == c.first_bad_offset


def test_zero_filled_tail(dumped, backend, tmp_path):
    """Zeros after the last batch (a preallocated or crashed file): Kafka's reader throws
    CorruptRecordException (size 0 below the 14-byte minimum) and the tool exits 1; seglog's
    recovery cuts the zeros and keeps every batch, as Kafka's LogSegment.recover does."""
    c = dumped.corruptions["zero-tail"]
    done, dumps, _errors = dumped.bad
    assert done.returncode == 1
    assert re.search(r"Found record size 0 smaller than minimum record overhead \(14\)",
                     done.stdout + done.stderr)
    assert all(b["isvalid"] == "true" for b in dumps[str(c.file)].batches)
    report, end = _recover_with_seglog(c, backend, tmp_path)
    assert [(t.base_offset, t.position) for t in report.truncations] == \
        [(c.segment_base, c.position)]
    assert end == c.first_bad_offset


def test_garbage_index(dumped, backend, tmp_path):
    """A garbage ``.index`` (entries past the end of the ``.log``): the tool fails on it;
    seglog's recovery rebuilds it and loses no record."""
    c = dumped.corruptions["bad-index"]
    done, _dumps, errors = dumped.bad_index
    told = done.returncode != 0 or errors.index_mismatches
    assert told, f"kafka-dump-log accepted a garbage index:\n{done.stdout[-2000:]}"
    report, end = _recover_with_seglog(c, backend, tmp_path)
    assert c.segment_base in report.rebuilt_indexes or c.segment_base in \
        report.recovered_segments
    assert not report.truncations and not report.deleted_segments
    with seglog.Log.open(dumped.partitions[("mixed", BACKENDS[0])], read_only=True,
                         backend=backend.name) as original:
        assert end == original.end_offset
