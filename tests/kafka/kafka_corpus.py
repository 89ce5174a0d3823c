"""What the Kafka tests feed Kafka: seglog-written partitions, corrupted copies, and a parser
for ``kafka-dump-log``'s output.

Partitions (written with one backend; the twins write byte-identical files):

* ``mixed``: every compression type, headers (one with a null value), null keys and null
  values, out-of-order timestamps inside a batch, idempotent batches, transactions committed
  and aborted (control batches, ``.txnindex``), over many small segments with dense offset and
  time indexes, and producer-state snapshots.
* ``compacted``: keys overwritten and tombstoned, then compacted by seglog's cleaner: offset
  gaps inside and between segments.

Values and keys are ASCII without spaces, so the dump's ``key:``/``payload:`` text is the
bytes themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import seglog
from seglog.storage.config import LogConfig

#: Record timestamps start two hours ago (whole seconds): recent enough that neither Kafka
#: nor seglog expires the producers on load (producer.id.expiration.ms is a day), old enough
#: for any clock skew. Kafka topics get retention.ms=-1.
BASE_TS = (int(time.time()) - 7200) * 1000
#: The clock seglog appends with (later than every record timestamp).
NOW_MS = BASE_TS + 3_600_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Producer ids far above the ones Kafka hands out in a test (blocks of 1000 from 0).
IDEMPOTENT_PID = 900_001
TXN_PID = 900_002
ROUNDS = 6

MIXED_CONFIG = dict(segment_bytes=1024, index_interval_bytes=128)
COMPACTED_CONFIG = dict(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                        segment_bytes=1024, index_interval_bytes=100, file_delete_delay_ms=0)


def write_mixed(path: Path, backend: str) -> None:
    """The ``mixed`` partition (see the module docstring) in ``path``, closed cleanly."""
    ts = BASE_TS
    idem_seq = txn_seq = 0
    with seglog.Log.open(path, LogConfig(**MIXED_CONFIG), backend=backend,
                         now_ms=NOW_MS) as log:
        for rnd in range(ROUNDS):
            for codec in CODECS:
                n = 6
                values = [None if i == 3 else f"v{rnd}-{codec}-{i}".encode() * (1 + i % 3)
                          for i in range(n)]
                keys = [None if i % 3 == 0 else f"k{rnd}-{i}".encode() for i in range(n)]
                headers = [[("h1", b"x"), ("h2", None)] if i % 2 else [] for i in range(n)]
                stamps = [ts + 10 * i - (25 if i == 4 else 0) for i in range(n)]
                log.append_batch(values, keys, stamps, headers, compression=codec,
                                 now_ms=NOW_MS)
                ts += 100
            # an idempotent producer's batch
            log.append_batch([f"idem{rnd}-{i}".encode() for i in range(3)],
                             [b"ik"] * 3, [ts] * 3, compression="lz4", now_ms=NOW_MS,
                             producer_id=IDEMPOTENT_PID, producer_epoch=0,
                             base_sequence=idem_seq)
            idem_seq += 3
            ts += 100
            # a transaction, committed in even rounds and aborted in odd ones
            log.append_batch([f"txn{rnd}-{i}".encode() for i in range(4)], None,
                             [ts + i for i in range(4)], compression="zstd", now_ms=NOW_MS,
                             producer_id=TXN_PID, producer_epoch=0, base_sequence=txn_seq,
                             is_transactional=True)
            txn_seq += 4
            ts += 100
            log.append_txn_marker(producer_id=TXN_PID, producer_epoch=0, coordinator_epoch=0,
                                  commit=rnd % 2 == 0, now_ms=ts)
            ts += 100
        # A last single-record batch (Log.append) so the active segment is not empty.
        log.append(b"last", key=b"last", timestamp_ms=ts, now_ms=NOW_MS)


def write_compacted(path: Path, backend: str) -> None:
    """The ``compacted`` partition: 12 keys written in batches of 4, then only the even keys
    (and a few tombstones) again, compacted: the odd keys' first values survive between
    removed records, so offsets have gaps inside batches, between batches and between
    segments."""
    with seglog.Log.open(path, LogConfig(**COMPACTED_CONFIG), backend=backend,
                         now_ms=NOW_MS) as log:
        for i in range(0, 96, 4):
            keys = [f"key{(i + j) % 12}".encode() for j in range(4)]
            log.append_batch([f"val{i + j}".encode() for j in range(4)], keys,
                             [BASE_TS + i + j for j in range(4)], now_ms=NOW_MS)
        for i in range(96, 192):
            key = f"key{2 * (i % 6)}".encode()
            value = None if i % 29 == 5 else f"val{i}".encode()
            log.append(value, key=key, timestamp_ms=BASE_TS + i, now_ms=NOW_MS)
        log.roll(now_ms=NOW_MS)
        log.compact(now_ms=NOW_MS)
        log.append(b"after", key=b"key0", timestamp_ms=BASE_TS + 1000, now_ms=NOW_MS)


LOG_APPEND_CONFIG = dict(message_timestamp_type="LogAppendTime", segment_bytes=1024,
                         index_interval_bytes=128)


def write_log_append_time(path: Path, backend: str) -> None:
    """The ``logappend`` partition: ``message.timestamp.type=LogAppendTime``, so every batch
    carries the append time (each batch a different ``now_ms``) instead of the records'
    CreateTime; several codecs, over a few segments."""
    with seglog.Log.open(path, LogConfig(**LOG_APPEND_CONFIG), backend=backend,
                         now_ms=NOW_MS) as log:
        for i in range(40):
            codec = CODECS[i % len(CODECS)]
            log.append_batch([f"la{i}-{j}".encode() for j in range(3)],
                             [f"k{j}".encode() for j in range(3)],
                             [BASE_TS + j for j in range(3)], compression=codec,
                             now_ms=BASE_TS + 10_000 + 7 * i)


WRITERS = {"mixed": write_mixed, "compacted": write_compacted,
           "logappend": write_log_append_time}


def segment_files(path: Path, *suffixes: str) -> list[Path]:
    """The partition's files with these suffixes, sorted by name (= base offset)."""
    return sorted(p for p in path.iterdir() if p.suffix in suffixes)


def forget_clean_shutdown(path: Path) -> None:
    """Make the next open of a standalone seglog partition recover every segment (Kafka's
    mode A): remove the clean-shutdown marker and the recovery-point checkpoint."""
    for name in (".kafka_cleanshutdown", "recovery-point-offset-checkpoint"):
        try:
            (path / name).unlink()
        except FileNotFoundError:
            pass


# --- corruptions (the same bytes go to Kafka and to seglog) ----------------------------------

@dataclass
class Corruption:
    """A corrupted copy of a partition: ``path``, what was done, and where (the segment's
    base offset, the byte position in its ``.log`` and the first offset of the batch hit)."""

    name: str
    path: Path
    segment_base: int
    position: int
    first_bad_offset: int
    file: Path


def _batches_of(file: Path, backend) -> list:
    return list(backend.iter_batches(file.read_bytes()))


def corrupt(name: str, source: Path, dest: Path, backend) -> Corruption:
    """Copy partition ``source`` to ``dest`` and corrupt it; ``name`` is one of
    ``flip-last`` (a payload byte of a middle batch of the last segment flipped),
    ``flip-middle`` (the same in a middle segment), ``torn`` (the last batch cut in half),
    ``zero-tail`` (64 zero bytes after the last batch, as a preallocated file leaves),
    ``bad-index`` (a middle segment's ``.index`` overwritten with garbage entries)."""
    shutil.copytree(source, dest)
    forget_clean_shutdown(dest)
    logs = segment_files(dest, ".log")
    assert len(logs) >= 3, logs
    target = logs[-1] if name in ("flip-last", "torn", "zero-tail") else logs[len(logs) // 2]
    base = int(target.stem)
    batches = _batches_of(target, backend)
    if name in ("flip-last", "flip-middle"):
        batch = batches[len(batches) // 2]
        position = batch.position + batch.size_bytes - 3  # inside the records, under the CRC
        data = bytearray(target.read_bytes())
        data[position] ^= 0x5A
        target.write_bytes(bytes(data))
        return Corruption(name, dest, base, batch.position, batch.base_offset, target)
    if name == "torn":
        batch = batches[-1]
        os.truncate(target, batch.position + batch.size_bytes // 2)
        return Corruption(name, dest, base, batch.position, batch.base_offset, target)
    if name == "zero-tail":
        size = target.stat().st_size
        with open(target, "ab") as f:
            f.write(bytes(64))
        return Corruption(name, dest, base, size, batches[-1].next_offset, target)
    if name == "bad-index":
        index = target.with_suffix(".index")
        entries = max(2, index.stat().st_size // 8)
        garbage = b"".join((7 + 3 * i).to_bytes(4, "big") + (999_999 - i).to_bytes(4, "big")
                           for i in range(entries))
        index.write_bytes(garbage)
        return Corruption(name, dest, base, -1, -1, index)
    raise ValueError(name)


CORRUPTIONS = ("flip-last", "flip-middle", "torn", "zero-tail", "bad-index")


# --- kafka-dump-log's output --------------------------------------------------------------

_PAIR = re.compile(r"(\w+): (\S*)")


@dataclass
class FileDump:
    """What ``kafka-dump-log`` printed for one file."""

    path: str
    batches: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    index: list[tuple[int, int]] = field(default_factory=list)
    time_index: list[tuple[int, int]] = field(default_factory=list)
    aborted: list[dict] = field(default_factory=list)
    producers: list[dict] = field(default_factory=list)
    invalid_trailing_bytes: int = 0
    empty: bool = False  # an index the tool found empty
    other: list[str] = field(default_factory=list)


def _pairs(line: str) -> dict:
    return {k: v for k, v in _PAIR.findall(line)}


def parse_dump(stdout: str) -> dict[str, FileDump]:
    """``{path as given: FileDump}`` from the tool's stdout (``--deep-iteration
    --print-data-log``; batch lines, ``| offset:`` record lines, index and time-index
    entries, ``.txnindex`` and ``.snapshot`` entries)."""
    out: dict[str, FileDump] = {}
    cur: FileDump | None = None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            cur = out[line[len("Dumping "):]] = FileDump(line[len("Dumping "):])
        elif cur is None or not line.strip():
            continue
        elif line.startswith("baseOffset: "):
            cur.batches.append(_pairs(line))
        elif line.startswith("| offset: "):
            rec = _pairs(line[2:])
            # key/payload text: everything after "key: " / "payload: " (no spaces in ours)
            cur.records.append(rec)
        elif line.startswith("offset: ") and " position: " in line:
            p = _pairs(line)
            cur.index.append((int(p["offset"]), int(p["position"])))
        elif line.startswith("timestamp: ") and " offset: " in line:
            p = _pairs(line)
            cur.time_index.append((int(p["timestamp"]), int(p["offset"])))
        elif line.startswith("version: ") and "producerId:" in line:
            cur.aborted.append(_pairs(line))
        elif line.startswith("producerId: "):
            cur.producers.append(_pairs(line))
        elif line.startswith("Found ") and "invalid bytes at the end of" in line:
            cur.invalid_trailing_bytes = int(line.split()[1])
        elif line.endswith(" is empty."):
            cur.empty = True
        elif not line.startswith("Log starting offset:"):
            cur.other.append(line)
    return out


@dataclass
class DumpErrors:
    """What the tool printed on stderr after the files: ``{abs path: [(a, b)]}`` for index
    mismatches (index offset, log offset), time-index timestamp mismatches (index timestamp,
    log timestamp), out-of-order time-index timestamps (timestamp, previous), offset gaps
    (before, after); time-index offsets not found (no path: ``[(index offset, log offset)]``);
    and any other line."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_offsets_not_found: list[tuple[int, int]] = field(default_factory=list)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    other: list[str] = field(default_factory=list)


_HEADS = {
    "Mismatches in :": "index_mismatches",
    "Found timestamp mismatch in :": "time_mismatches",
    "Found out of order timestamp in :": "time_out_of_order",
    "Non-consecutive offsets in ": "non_consecutive",
}
_NUMBERS = re.compile(r"-?\d+")


def parse_dump_stderr(stderr: str) -> DumpErrors:
    errors = DumpErrors()
    target: list | None = None
    for line in stderr.splitlines():
        if not line.strip() or line.startswith("["):  # log4j lines (WARN) are not findings
            continue
        head = next((h for h in _HEADS if line.startswith(h)), None)
        if head is not None:
            target = getattr(errors, _HEADS[head]).setdefault(line[len(head):], [])
        elif line.startswith("The following indexed offsets are not found"):
            target = errors.time_offsets_not_found
        elif target is not None and (line.startswith(" ") or line.startswith("Indexed offset:")):
            numbers = [int(n) for n in _NUMBERS.findall(line)]
            target.append((numbers[0], numbers[1]))
        else:
            target = None
            errors.other.append(line)
    return errors


def dump_log(kafka_ref, files: list[Path], run_dir: Path, *, deep: bool = True):
    """One ``kafka-dump-log`` JVM over ``files`` (``deep``: ``--deep-iteration
    --print-data-log``, every record decoded; else batch headers and CRCs only); returns
    ``(CompletedProcess, {path: FileDump}, DumpErrors)``."""
    flags = ["--deep-iteration", "--print-data-log"] if deep else []
    done = kafka_ref.run_tool(
        kafka_ref.dump_log_class,
        [*flags, "--files", ",".join(str(f) for f in files)],
        run_dir=run_dir, timeout_s=300)
    return done, parse_dump(done.stdout), parse_dump_stderr(done.stderr)


def record_text(value: bytes | None) -> str | None:
    """How the dump prints a key or value (None: the field is left out)."""
    return None if value is None else value.decode("ascii")
