"""Part ``peers``: seglog against the logs Python users reach for today.

Same records (the shared JSON-like values), same durability, driven as the peer survey drove them
(section 3.1), all in this process and interleaved run by run so noise spreads across peers:

* (a) append every record, then one durable sync/commit; (b) the same with a durable sync
  every 1,000 records; the clock covers the appends and the syncs, not open/close.
* seglog native's (a) again beside the write ceiling on the same number of file bytes, in
  rotating order each run, with one fsync at the end and with one sync per 1 MiB, on one
  thread and with encode and append on two threads (:func:`_ceiling_pairs`, issue 27).
* (c) full sequential read-back after reopening (warm page cache), every value touched.
* (d) random point reads by offset (``random.Random(42)``), warm cache. Codecs that parse a
  whole 1,000-record batch per read get fewer reads (``slow_random_reads``); rates compare.

Peers: a plain length-prefixed file log (per-record buffered writes, and one bytearray per
1,000 records), sqlite3 (WAL, synchronous=FULL, executemany in one transaction), LMDB
(``putmulti`` and ``put(append=True)``, sync commits), RocksDB (``rocksdict`` WriteBatch;
WAL fdatasync), kafka-python's and aiokafka's RecordBatch v2 builders and parsers writing
batches of 1,000 to a file; plus seglog (``Segment``, native and pure) when built. A peer that
is not installed is skipped with a note.

The targets of issue 4 are checked as ratios per run against the fastest peer of that run.
"""

from __future__ import annotations

import bisect
import functools
import mmap
import os
import shutil
import struct
import time
from typing import Any, Callable, Sequence

from . import segops
from .data import Unavailable, load_backend, offset_keys, random_offsets, values_matrix
from .limits import FLOOR_APPEND, FLOOR_SCAN, WRITE_CEILING
from .runner import BATCH_RECORDS, SYNC_EVERY_RECORDS, BenchContext
from .stats import (
    UNIT_BYTES_PER_S,
    UNIT_RATIO,
    UNIT_RECORDS_PER_S,
    Figure,
    Stopwatch,
    fmt_gb_per_s,
    fmt_percent,
    fmt_rate,
    fmt_ratio,
    si,
)
from .table import PartResult, Table, Target

NAME = "peers"
TITLE = "seglog vs Python logs users use today"

PHASES = {
    "append": "(a) append + one sync",
    "append_sync1k": "(b) sync every 1,000",
    "scan": "(c) sequential scan",
    "random": "(d) random reads",
}
_LEN = struct.Struct("<I")


class Peer:
    """One store under test. Subclasses implement the phases; ``label`` names it in tables.

    ``slow_reads`` marks peers whose point read parses a whole batch (fewer reads are timed).
    ``max_records`` caps the record count for very slow peers (None: all). ``keys``: the
    keys a keyed store files each offset's value under (set by the survey); ``note``: what
    the results should say about this peer here ('' for nothing); ``append_s`` and
    ``close_s``: the timed appends' and the close's seconds, set by a peer that times them
    itself (None: the survey times the whole call, or there is no costly close).
    """

    label = ""
    slow_reads = False
    max_records: int | None = None
    keys: Sequence[bytes] = ()
    note = ""
    append_s: float | None = None
    close_s: float | None = None

    def check(self) -> None:
        """Raise Unavailable when the peer cannot run here (module missing, ...)."""

    def append(self, dir_path: str, values: list[bytes], sync_every: int | None) -> None:
        """Create a store in ``dir_path`` and append ``values`` durably.

        A peer whose open or close is costly sets ``self.append_s`` to the seconds of the
        appends and syncs alone (the peer survey's timed region); otherwise the whole call is timed.
        """
        raise NotImplementedError

    def open_read(self, dir_path: str) -> None:
        """Reopen the store for reading (not timed)."""

    def scan(self) -> int:
        """Read every record in order, touching each value; returns the count (timed)."""
        raise NotImplementedError

    def prepare_reads(self) -> None:
        """Build whatever the point reads need (not timed), e.g. a position index."""

    def read(self, offset: int) -> bytes:
        """The value at ``offset`` (used untimed to check correctness)."""
        raise NotImplementedError

    def reads(self, offsets: list[int]) -> None:
        """Point reads of every offset (timed)."""
        read = self.read
        for offset in offsets:
            read(offset)

    def close(self) -> None:
        """Release files and handles."""


# --- plain file logs ------------------------------------------------------------------------


class FileLogV1(Peer):
    """Length-prefixed records, one buffered ``f.write`` per record; pread point reads."""

    label = "file log, write per record"

    def append(self, dir_path, values, sync_every):
        self.path = os.path.join(dir_path, "log")
        pack = _LEN.pack
        with open(self.path, "wb") as f:
            write = f.write
            for i, v in enumerate(values, 1):
                write(pack(len(v)) + v)
                if sync_every and i % sync_every == 0:
                    f.flush()
                    os.fsync(f.fileno())
            f.flush()
            os.fsync(f.fileno())

    def open_read(self, dir_path):
        self.path = os.path.join(dir_path, "log")
        self.fd = os.open(self.path, os.O_RDONLY)

    def scan(self):
        count = 0
        unpack = _LEN.unpack
        with open(self.path, "rb") as f:
            read = f.read
            while True:
                head = read(4)
                if len(head) < 4:
                    break
                read(unpack(head)[0])
                count += 1
        return count

    def prepare_reads(self):
        self.positions = _positions(self.path)

    def read(self, offset):
        position = self.positions[offset]
        return os.pread(self.fd, self.positions[offset + 1] - position - 4, position + 4)

    def close(self):
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)
            self.fd = None


class FileLogV2(FileLogV1):
    """Length-prefixed records gathered in one bytearray per 1,000 records (one write each);
    mmap scan and mmap-slice point reads."""

    label = "file log, bytearray per 1,000"

    def append(self, dir_path, values, sync_every):
        self.path = os.path.join(dir_path, "log")
        pack = _LEN.pack
        with open(self.path, "wb") as f:
            for start in range(0, len(values), BATCH_RECORDS):
                chunk = bytearray()
                for v in values[start:start + BATCH_RECORDS]:
                    chunk += pack(len(v))
                    chunk += v
                f.write(chunk)
                if sync_every:
                    f.flush()
                    os.fsync(f.fileno())
            f.flush()
            os.fsync(f.fileno())

    def open_read(self, dir_path):
        super().open_read(dir_path)
        self.map = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)

    def scan(self):
        data, end, position, count = self.map, len(self.map), 0, 0
        unpack_from = _LEN.unpack_from
        while position < end:
            n = unpack_from(data, position)[0]
            data[position + 4:position + 4 + n]
            position += 4 + n
            count += 1
        return count

    def read(self, offset):
        return self.map[self.positions[offset] + 4:self.positions[offset + 1]]

    def close(self):
        if getattr(self, "map", None) is not None:
            self.map.close()
            self.map = None
        super().close()


def _positions(path: str) -> list[int]:
    """Start position of every record plus the end position (untimed index build)."""
    with open(path, "rb") as f:
        data = f.read()
    positions, position, end = [], 0, len(data)
    unpack_from = _LEN.unpack_from
    while position < end:
        positions.append(position)
        position += 4 + unpack_from(data, position)[0]
    positions.append(end)
    return positions


# --- sqlite3, LMDB, RocksDB -----------------------------------------------------------------


class Sqlite(Peer):
    """sqlite3, WAL journal, synchronous=FULL; executemany inside BEGIN..COMMIT."""

    label = "sqlite3 WAL, executemany"

    def check(self):
        _need_module("sqlite3")

    def _connect(self, dir_path):
        import sqlite3

        conn = sqlite3.connect(os.path.join(dir_path, "log.db"), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def append(self, dir_path, values, sync_every):
        conn = self._connect(dir_path)
        conn.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, value BLOB)")
        step = sync_every or len(values)
        sql = "INSERT INTO log VALUES (?, ?)"
        with Stopwatch() as watch:
            for start in range(0, len(values), step):
                conn.execute("BEGIN")
                conn.executemany(sql, zip(range(start, start + step),
                                          values[start:start + step]))
                conn.execute("COMMIT")
        self.append_s = watch.wall_s
        conn.close()

    def open_read(self, dir_path):
        self.conn = self._connect(dir_path)

    def scan(self):
        count = 0
        for _, value in self.conn.execute("SELECT offset, value FROM log ORDER BY offset"):
            count += 1
        return count

    def read(self, offset):
        return self.conn.execute("SELECT value FROM log WHERE offset = ?", (offset,)).fetchone()[0]

    def close(self):
        if getattr(self, "conn", None) is not None:
            self.conn.close()
            self.conn = None


class Lmdb(Peer):
    """LMDB with sync commits; 8-byte big-endian keys; ``putmulti`` or ``put(append=True)``."""

    def __init__(self, putmulti: bool) -> None:
        self.putmulti = putmulti
        self.label = "LMDB putmulti" if putmulti else "LMDB put(append=True)"

    def check(self):
        _need_module("lmdb")

    def _env(self, dir_path, map_bytes=None):
        import lmdb

        return lmdb.open(dir_path, map_size=map_bytes or self.map_bytes, sync=True,
                         metasync=True, readahead=False)

    def append(self, dir_path, values, sync_every):
        self.map_bytes = max(64 << 20, len(values) * (len(values[0]) + 64) * 2)
        env = self._env(dir_path)
        keys = self.keys if len(self.keys) >= len(values) else offset_keys(len(values))
        step = sync_every or len(values)
        with Stopwatch() as watch:
            for start in range(0, len(values), step):
                with env.begin(write=True) as txn:
                    if self.putmulti:
                        txn.cursor().putmulti(zip(keys[start:start + step],
                                                  values[start:start + step]), append=True)
                    else:
                        put = txn.put
                        for k, v in zip(keys[start:start + step], values[start:start + step]):
                            put(k, v, append=True)
        self.append_s = watch.wall_s
        env.close()

    def open_read(self, dir_path):
        self.env = self._env(dir_path)
        self.txn = self.env.begin()

    def scan(self):
        count = 0
        for _, value in self.txn.cursor():
            count += 1
        return count

    def read(self, offset):
        return self.txn.get(self.keys[offset])

    def close(self):
        if getattr(self, "env", None) is not None:
            self.txn.abort()
            self.env.close()
            self.env = None


class Rocks(Peer):
    """RocksDB via rocksdict (raw bytes): WriteBatch of 10,000 then a synced WAL flush;
    with a sync every 1,000: WriteBatch of 1,000 written with ``sync=True``."""

    label = "RocksDB (rocksdict) WriteBatch"

    def check(self):
        _need_module("rocksdict")

    def _open(self, dir_path):
        from rocksdict import Options, Rdict

        return Rdict(dir_path, Options(raw_mode=True))

    def append(self, dir_path, values, sync_every):
        from rocksdict import WriteBatch, WriteOptions

        db = self._open(dir_path)
        options = WriteOptions()
        options.sync = bool(sync_every)
        step = sync_every or 10_000
        keys = self.keys
        with Stopwatch() as watch:
            for start in range(0, len(values), step):
                batch = WriteBatch(raw_mode=True)
                put = batch.put
                for k, v in zip(keys[start:start + step], values[start:start + step]):
                    put(k, v)
                db.write(batch, options)
            if not sync_every:
                db.flush_wal(True)
        self.append_s = watch.wall_s
        with Stopwatch() as watch:
            db.close()  # memtable flush: reported, not counted (as the peer survey did)
        self.close_s = watch.wall_s

    def open_read(self, dir_path):
        self.db = self._open(dir_path)

    def scan(self):
        count = 0
        for _, value in self.db.items():
            count += 1
        return count

    def read(self, offset):
        return self.db[self.keys[offset]]

    def close(self):
        if getattr(self, "db", None) is not None:
            self.db.close()
            self.db = None


# --- Kafka codecs writing batches to a file ---------------------------------------------------


class KafkaCodec(Peer):
    """kafka-python's or aiokafka's RecordBatch v2 builder (batches of 1,000, base offset
    patched, one ``f.write`` per batch) and parser (``MemoryRecords``; point reads: batch index
    -> ``pread`` the batch -> scan its records to the offset)."""

    slow_reads = True

    def __init__(self, package: str) -> None:
        self.package = package
        self.label = {"kafka": "kafka-python codec", "aiokafka": "aiokafka codec"}[package]

    def check(self):
        try:
            if self.package == "kafka":
                from kafka.record import default_records, memory_records
            else:
                from aiokafka.record import default_records, memory_records
        except ImportError as exc:
            raise Unavailable(f"{self.label}: {exc}") from exc
        self.builder = default_records.DefaultRecordBatchBuilder
        self.batch_class = default_records.DefaultRecordBatch
        self.memory_records = memory_records.MemoryRecords
        if self.package == "kafka":
            from kafka.record import util

            if getattr(util, "crc32c_c", True) is None:
                self.note = ("kafka-python computes CRC-32C in pure Python here (the `crc32c` "
                             "package is not installed), which slows its builder and "
                             "validate_crc; the peer survey measured it with `crc32c` installed")
        if self.package == "aiokafka":
            compiled = "_crecords" in self.builder.__module__
            self.label = "aiokafka codec (Cython)" if compiled else "aiokafka codec (pure)"

    def append(self, dir_path, values, sync_every):
        self.path = os.path.join(dir_path, "log")
        builder_class, pack_into = self.builder, struct.pack_into
        with open(self.path, "wb") as f:
            for start in range(0, len(values), BATCH_RECORDS):
                builder = builder_class(2, 0, 0, -1, -1, -1, 1 << 30)
                append = builder.append
                timestamp_ms = int(time.time() * 1000)
                for delta, v in enumerate(values[start:start + BATCH_RECORDS]):
                    append(delta, timestamp_ms, None, v, [])
                buffer = builder.build()
                pack_into(">q", buffer, 0, start)
                f.write(buffer)
                if sync_every:
                    f.flush()
                    os.fsync(f.fileno())
            f.flush()
            os.fsync(f.fileno())

    def open_read(self, dir_path):
        self.path = os.path.join(dir_path, "log")
        self.fd = os.open(self.path, os.O_RDONLY)

    def scan(self):
        with open(self.path, "rb") as f:
            records = self.memory_records(f.read())
        count = 0
        while records.has_next():
            for record in records.next_batch():
                record.value
                count += 1
        return count

    def prepare_reads(self):
        with open(self.path, "rb") as f:
            data = f.read()
        self.bases, self.batches, position = [], [], 0
        while position + 12 <= len(data):
            base, length = struct.unpack_from(">qi", data, position)
            self.bases.append(base)
            self.batches.append((position, 12 + length))
            position += 12 + length

    def read(self, offset):
        position, size = self.batches[bisect.bisect_right(self.bases, offset) - 1]
        for record in self.batch_class(os.pread(self.fd, size, position)):
            if record.offset == offset:
                return record.value
        return None

    def close(self):
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)
            self.fd = None


# --- seglog ---------------------------------------------------------------------------------


class Seglog(Peer):
    """seglog's Segment: encode batches of 1,000 and append them about 1 MiB at a time (one
    ``Segment.append`` of a list of batches, one pwritev), ``flush`` (fdatasync of the .log)
    at the end or every 1,000 records; scan to record objects; point reads with
    ``Segment.read_value`` (sparse index, header scan, then the records before the one wanted
    skipped by their length prefixes; the one record parsed and checked, its value returned,
    as LMDB's get returns the value; ``read_record`` builds a Record on the same path)."""

    def __init__(self, backend: str, *, matrix_input: bool = False) -> None:
        self.backend_name = backend
        self.matrix_input = matrix_input
        self.label = f"seglog {backend}" + (" (numpy rows in)" if matrix_input else "")
        self.slow_reads = backend == "pure"

    def check(self):
        self.be = load_backend(self.backend_name)
        for name in ("encode_batch", "iter_batches", "decode_columns", "Segment"):
            self.be.need(name)
        if self.matrix_input:
            _need_module("numpy")

    def append(self, dir_path, values, sync_every):
        data = values_matrix(values) if self.matrix_input else values
        segment = segops.open_segment(self.be, dir_path, create=True)
        try:
            with Stopwatch() as watch:
                segops.append_values(self.be, segment, data, BATCH_RECORDS, sync_every)
        finally:
            segment.close()
        # Only the appends and fsyncs are timed (not the numpy conversion, open or close).
        self.append_s = watch.wall_s

    def open_read(self, dir_path):
        self.segment = segops.open_segment(self.be, dir_path, create=False)

    def scan(self):
        return segops.scan_records(self.be, self.segment)

    def scan_columns(self) -> int:
        """Sequential scan into numpy columns (no per-record objects)."""
        return segops.scan_columns(self.be, self.segment)

    def read(self, offset):
        return segops.read_record(self.segment, offset)

    def reads(self, offsets):
        segops.random_reads_value(self.segment, offsets)

    def close(self):
        if getattr(self, "segment", None) is not None:
            self.segment.close()
            self.segment = None


def _need_module(name: str) -> None:
    try:
        __import__(name)
    except ImportError as exc:
        raise Unavailable(f"{name} is not installed ({exc}); `pip install seglog[bench]`") \
            from exc


def all_peers() -> list[Peer]:
    """Every peer, in table order (seglog last)."""
    return [FileLogV1(), FileLogV2(), Sqlite(), Lmdb(putmulti=True), Lmdb(putmulti=False),
            Rocks(), KafkaCodec("kafka"), KafkaCodec("aiokafka"), Seglog("native"),
            Seglog("native", matrix_input=True), Seglog("pure")]


# --- the part -------------------------------------------------------------------------------


def run(ctx: BenchContext) -> PartResult:
    """Run every available peer through (a)-(d), ``runs`` times, interleaved."""
    n = ctx.profile.records
    runs = ctx.profile.runs
    result = PartResult(NAME, TITLE, params={
        "records": n, "record_bytes": ctx.record_bytes, "runs": runs,
        "random_reads": ctx.profile.random_reads,
        "slow_random_reads": ctx.profile.slow_random_reads,
        "pure_records": ctx.profile.pure_records})
    values = ctx.values(n)
    keys = offset_keys(n)
    peers: list[Peer] = []
    for peer in all_peers():
        try:
            peer.check()
        except Unavailable as exc:
            result.notes.append(f"{peer.label}: not available: {exc}")
            continue
        if isinstance(peer, Seglog) and peer.backend_name == "pure":
            peer.max_records = ctx.profile.pure_records
        if isinstance(peer, KafkaCodec) and peer.package == "kafka":
            peer.max_records = ctx.profile.slow_peer_records  # pure-Python codec
        peer.keys = keys
        peers.append(peer)
        if peer.note:
            result.notes.append(f"{peer.label}: {peer.note}.")
    scratch = ctx.scratch(NAME)
    sizes: dict[str, int] = {}
    native = next((p for p in peers if isinstance(p, Seglog) and p.backend_name == "native"
                   and not p.matrix_input), None)
    for run_index in range(runs):
        for peer in list(peers):
            try:
                _run_peer(ctx, result, peer, values, scratch, run_index, sizes)
            except Unavailable as exc:
                result.notes.append(f"{peer.label}: not available: {exc}")
                peers.remove(peer)
            finally:
                peer.close()
        if native is not None and native in peers:
            _ceiling_pairs(ctx, result, native, values, scratch, run_index)
    result.tables.append(_table(ctx, result, peers, sizes))
    for peer in peers:
        close = result.figures.get(f"{peer.label}.close_s")
        if close is not None and close.values:
            result.notes.append(f"{peer.label}: closing after (a) took {close.median:.3f} s "
                                "(median), not counted in (a), as in the peer survey.")
    seglog_peers = [p for p in peers if isinstance(p, Seglog) and p.backend_name == "native"]
    result.notes += _sync_cost_notes(ctx, result, peers)
    others = [p for p in peers if not isinstance(p, Seglog)]
    if seglog_peers and others:
        result.tables.append(_targets(ctx, result, seglog_peers, others))
    elif not seglog_peers:
        result.notes.append("seglog native rows and targets: not available until the native "
                            "codec and Segment are built.")
    result.charts += [
        {"title": f"peers: {label}", "unit": "records/s",
         "bars": {p.label: f"{p.label}.{phase}" for p in peers}}
        for phase, label in PHASES.items()]
    return result


def _run_peer(ctx: BenchContext, result: PartResult, peer: Peer, values: list[bytes],
              scratch, run_index: int, sizes: dict[str, int]) -> None:
    runs = ctx.profile.runs
    n = min(len(values), peer.max_records or len(values))
    values = values[:n]
    reads = ctx.profile.slow_random_reads if peer.slow_reads else ctx.profile.random_reads
    offsets = random_offsets(reads, n)
    path = os.path.join(scratch, f"{_slug(peer.label)}-{run_index}")
    os.mkdir(path)
    try:
        ctx.progress.step(f"{peer.label}: (a) append", run_index + 1, runs)
        peer.append_s = None
        with Stopwatch() as watch:
            peer.append(path, values, None)
        seconds = peer.append_s or watch.wall_s
        result.figure(f"{peer.label}.append", UNIT_RECORDS_PER_S).add(n / seconds)
        if peer.close_s is not None:
            result.figure(f"{peer.label}.close_s", "s").add(peer.close_s)
        sizes[peer.label] = segops.dir_size_bytes(path)
        peer.open_read(path)
        ctx.progress.step(f"{peer.label}: (c) scan", run_index + 1, runs)
        if run_index == 0:
            # Untimed, every peer alike: the first large allocations of a process touch memory
            # that is fresh to this VM (a cost of starting a process, not of the scan).
            peer.scan()
            if isinstance(peer, Seglog):
                peer.scan_columns()
        with Stopwatch() as watch:
            count = peer.scan()
        if count != n:
            raise RuntimeError(f"{peer.label}: scan returned {count} records, expected {n}")
        result.figure(f"{peer.label}.scan", UNIT_RECORDS_PER_S).add(n / watch.wall_s)
        if isinstance(peer, Seglog):
            with Stopwatch() as watch:
                count = peer.scan_columns()
            result.figure(f"{peer.label}.scan_columns", UNIT_RECORDS_PER_S).add(
                count / watch.wall_s)
        peer.prepare_reads()
        probe = offsets[0]
        got = peer.read(probe)
        if bytes(got) != values[probe]:
            raise RuntimeError(f"{peer.label}: read({probe}) returned the wrong value")
        ctx.progress.step(f"{peer.label}: (d) {reads:,} random reads", run_index + 1, runs)
        with Stopwatch() as watch:
            peer.reads(offsets)
        result.figure(f"{peer.label}.random", UNIT_RECORDS_PER_S).add(reads / watch.wall_s)
        peer.close()
    finally:
        peer.close()
        shutil.rmtree(path, ignore_errors=True)
    os.mkdir(path)
    try:
        ctx.progress.step(f"{peer.label}: (b) sync every 1,000", run_index + 1, runs)
        peer.append_s = None
        with Stopwatch() as watch:
            peer.append(path, values, SYNC_EVERY_RECORDS)
        seconds = peer.append_s or watch.wall_s
        result.figure(f"{peer.label}.append_sync1k", UNIT_RECORDS_PER_S).add(n / seconds)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    result.params.setdefault("record_counts", {})[peer.label] = n


#: The two sync shapes of the append-vs-ceiling pairs (issue 27).
CEILING_SHAPES = {
    "one_sync": "(a) append vs write ceiling, one fsync at the end",
    "sync_1mib": "append vs write ceiling, one sync per 1 MiB",
}
#: The appending sides of the pairs: one thread, and encode | append on two threads.
CEILING_APPENDERS = {"append": "one thread", "threaded": "encode | append on two threads"}
MIB = 1 << 20


def _ceiling_pairs(ctx: BenchContext, result: PartResult, peer: Seglog, values: list[bytes],
                   scratch, run_index: int) -> None:
    """seglog native's durable append beside the write ceiling on the same number of file
    bytes, in rotating order within this run, for both sync shapes: one fsync at the end
    (peers (a); the limits part's ceiling), and one sync per 1 MiB (the ceiling syncs after
    every 1 MiB write, the append as soon as 1 MiB or more was appended since its last sync).
    Rates are file bytes per second (what the disk is given); ratios are per round."""
    be = peer.be
    path = os.path.join(scratch, f"ceiling-pairs-{run_index}")
    os.mkdir(path)
    try:
        probe = os.path.join(path, "probe")
        os.mkdir(probe)
        segment = segops.open_segment(be, probe, create=True)
        try:
            segops.append_values(be, segment, values, BATCH_RECORDS, None)
            file_bytes = segment.size_bytes
        finally:
            segment.close()
        shutil.rmtree(probe)
        steps: list[tuple[str, str, Callable[[str], float]]] = []
        for shape in CEILING_SHAPES:
            sync_bytes = MIB if shape == "sync_1mib" else None
            steps.append((shape, "ceiling", functools.partial(
                _ceiling_write_s, total_bytes=file_bytes, sync_every_bytes=sync_bytes)))
            for side in CEILING_APPENDERS:
                steps.append((shape, side, functools.partial(
                    _seglog_append_s, be, values=values, sync_every_bytes=sync_bytes,
                    threaded=side == "threaded")))
        shift = run_index % len(steps)
        seconds: dict[tuple[str, str], float] = {}
        for shape, side, action in steps[shift:] + steps[:shift]:
            ctx.progress.step(f"same-bytes pairs: {side}, {shape}", run_index + 1,
                              ctx.profile.runs)
            directory = os.path.join(path, f"{shape}-{side}")
            os.mkdir(directory)
            seconds[shape, side] = action(directory)
            shutil.rmtree(directory)
        for shape in CEILING_SHAPES:
            ceiling = file_bytes / seconds[shape, "ceiling"]
            result.figure(f"ceiling_pair.{shape}.ceiling", UNIT_BYTES_PER_S).add(ceiling)
            for side in CEILING_APPENDERS:
                append = file_bytes / seconds[shape, side]
                result.figure(f"ceiling_pair.{shape}.{side}", UNIT_BYTES_PER_S).add(append)
                result.figure(f"ceiling_pair.{shape}.{side}.ratio", UNIT_RATIO).add(
                    append / ceiling)
        result.params["ceiling_pair_file_bytes"] = file_bytes
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _ceiling_write_s(directory: str, total_bytes: int, sync_every_bytes: int | None) -> float:
    """Seconds for ``total_bytes`` in 1 MiB ``os.write`` calls from a page-aligned buffer into
    a new file (``ceiling.dat`` in ``directory``), an fdatasync after each
    ``sync_every_bytes`` (None: none) and one fsync."""
    buffer = mmap.mmap(-1, MIB)
    buffer.write(b"\x5a" * MIB)
    fd = os.open(os.path.join(directory, "ceiling.dat"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                 0o644)
    try:
        with Stopwatch() as watch:
            remaining, since_sync = total_bytes, 0
            while remaining > 0:
                written = os.write(fd, buffer if remaining >= MIB
                                   else memoryview(buffer)[:remaining])
                remaining -= written
                since_sync += written
                if sync_every_bytes is not None and since_sync >= sync_every_bytes:
                    os.fdatasync(fd)
                    since_sync = 0
            os.fsync(fd)
    finally:
        os.close(fd)
        buffer.close()
    return watch.wall_s


def _seglog_append_s(be: Any, directory: str, values: list[bytes],
                     sync_every_bytes: int | None, threaded: bool) -> float:
    segment = segops.open_segment(be, directory, create=True)
    try:
        with Stopwatch() as watch:
            if threaded:
                segops.append_values_threaded(be, segment, values, BATCH_RECORDS,
                                              sync_every_bytes=sync_every_bytes)
            else:
                segops.append_values(be, segment, values, BATCH_RECORDS, None,
                                     sync_every_bytes=sync_every_bytes)
    finally:
        segment.close()
    return watch.wall_s


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())


def _table(ctx: BenchContext, result: PartResult, peers: list[Peer],
           sizes: dict[str, int]) -> Table:
    f = result.figures
    size = ctx.record_bytes
    table = Table(
        f"Peers, {ctx.profile.records:,} records of {size} B: records/s median (min..max); "
        "MB/s = payload",
        ["peer", "N", *PHASES.values(), "(a) MB/s", "bytes/record on disk"])
    counts = result.params.get("record_counts", {})
    for peer in peers:
        if f"{peer.label}.append" not in f:
            continue
        n = counts.get(peer.label, ctx.profile.records)
        cells = [fmt_rate(f[f"{peer.label}.{phase}"]) for phase in PHASES]
        if f"{peer.label}.scan_columns" in f:
            cells[2] += f"; columns {fmt_rate(f[f'{peer.label}.scan_columns'])}"
        table.add(peer.label, f"{n:,}", *cells,
                  f"{f[f'{peer.label}.append'].median * size / 1e6:.0f}",
                  f"{sizes.get(peer.label, 0) / n:.1f}")
    floors = []
    if ctx.limit(FLOOR_APPEND):
        floors.append(f"Python append floor {si(ctx.limits[FLOOR_APPEND])}/s")
    if ctx.limit(FLOOR_SCAN):
        floors.append(f"scan floor {si(ctx.limits[FLOOR_SCAN])}/s")
    if ctx.limit(WRITE_CEILING):
        floors.append(f"write ceiling {si(ctx.limits[WRITE_CEILING] / size)} records/s")
    if floors:
        table.note = "Limits (from the limits part): " + ", ".join(floors) + "."
    return table


def _best_per_run(result: PartResult, peers: Sequence[Peer], phase: str) -> tuple[Figure, list[str]]:
    """Per run, the fastest of ``peers`` in ``phase``; also who it was in each run."""
    figs = [(p.label, fig) for p in peers
            if (fig := result.figures.get(f"{p.label}.{phase}")) is not None and fig.values]
    best, who = Figure(unit=UNIT_RECORDS_PER_S), []
    runs = min(len(fig.values) for _, fig in figs)
    for i in range(runs):
        label, fig = max(figs, key=lambda item: item[1].values[i])
        best.add(fig.values[i])
        who.append(label)
    return best, who


def _targets(ctx: BenchContext, result: PartResult, seglog_peers: Sequence[Peer],
             others: Sequence[Peer]) -> Table:
    size = ctx.record_bytes
    table = Table("Targets (issue 4): seglog native / fastest peer, ratio per run",
                  ["measurement", "seglog native", "fastest peer (per run)", "ratio",
                   "target", "verdict"])
    lmdb = [p for p in others if p.label.startswith("LMDB put(")] or \
        [p for p in others if p.label.startswith("LMDB")]
    rows = [
        ("append", "append", others, "(a) durable append", 1.2, ">= 1.2x fastest peer"),
        ("append_sync1k", "append_sync1k", others, "(b) sync every 1,000", 1.0,
         ">= fastest peer"),
        ("scan_columns", "scan", others, "(c) scan to numpy columns", 10.0,
         ">= 10x fastest peer's scan"),
        ("scan", "scan", others, "(c) scan to record objects", 1.2, ">= 1.2x fastest peer"),
        ("random", "random", lmdb, "(d) random reads by offset", 1.0, ">= LMDB random gets"),
    ]
    for seg_phase, peer_phase, group, label, threshold, goal in rows:
        if not group:
            continue
        best_seg, seg_who = _best_per_run(result, seglog_peers, seg_phase)
        best_peer, peer_who = _best_per_run(result, group, peer_phase)
        runs = min(len(best_seg.values), len(best_peer.values))
        ratio = Figure([best_seg.values[i] / best_peer.values[i] for i in range(runs)], "x")
        target = Target(label, goal, ratio.median, threshold)
        result.targets.append(target)
        result.figures[f"target.{seg_phase}"] = ratio
        table.add(label, f"{fmt_rate(best_seg)} [{_mode(seg_who)}]",
                  f"{fmt_rate(best_peer)} [{_mode(peer_who)}]", fmt_ratio(ratio), goal,
                  target)
    for shape, label in CEILING_SHAPES.items():
        for side, how in CEILING_APPENDERS.items():
            pair = result.figures.get(f"ceiling_pair.{shape}.{side}.ratio")
            if pair is None or not pair.values:
                continue
            target = Target(f"{label} ({how})",
                            ">= 95% of the write ceiling, same bytes, same syncs",
                            pair.median, 0.95)
            result.targets.append(target)
            table.add(target.label,
                      f"{fmt_gb_per_s(result.figures[f'ceiling_pair.{shape}.{side}'].median)}"
                      " GB/s of file bytes",
                      f"{fmt_gb_per_s(result.figures[f'ceiling_pair.{shape}.ceiling'].median)}"
                      " GB/s [1 MiB aligned writes]",
                      f"{fmt_percent(pair.median)} ({fmt_percent(pair.min)}.."
                      f"{fmt_percent(pair.max)})", target.goal, target)
    if ctx.limit(WRITE_CEILING):
        best_seg, _ = _best_per_run(result, seglog_peers, "append")
        result.notes.append(
            f"seglog's (a) payload rate against the limits part's write ceiling "
            f"({ctx.profile.limits_write_bytes / 2**20:.0f} MiB, measured earlier in the run): "
            f"{fmt_percent(best_seg.median * size / ctx.limits[WRITE_CEILING])} (payload bytes "
            "only; the file also holds Kafka's record and batch framing, and the ceiling wrote "
            "a different amount at another time, so the targets use the same-bytes pairs).")
    return table


def _sync_cost_notes(ctx: BenchContext, result: PartResult, peers: list[Peer]) -> list[str]:
    """What one durable sync costs each peer: (1/rate_b - 1/rate_a) x records per sync."""
    costs = {}
    for peer in peers:
        a = result.figures.get(f"{peer.label}.append")
        b = result.figures.get(f"{peer.label}.append_sync1k")
        if a and b and a.values and b.values:
            costs[peer.label] = (1 / b.median - 1 / a.median) * SYNC_EVERY_RECORDS * 1e3
    # A non-positive cost is noise (a peer whose (a) and (b) differ by less than the run to
    # run spread, e.g. a slow codec): it cannot be the cheapest sync.
    positive = {label: ms for label, ms in costs.items() if ms > 0}
    if not positive:
        return []
    cheapest = min(positive, key=lambda label: positive[label])
    out = [f"Cost of one durable sync, from (b) against (a): {cheapest} "
           f"{costs[cheapest]:.2f} ms (the cheapest); " + ", ".join(
               f"{label} {ms:.2f} ms" for label, ms in costs.items() if label != cheapest) +
           " (a figure <= 0 is within noise)."]
    seg = positive.get("seglog native")
    if seg is not None and seg > 2 * costs[cheapest]:
        out.append(f"seglog's Segment.flush costs {seg / costs[cheapest]:.1f}x the cheapest "
                   "sync: it fdatasyncs only the .log (indexes are derived and synced on roll "
                   "and close), so the rest is the sync itself on this disk.")
    return out


def _mode(labels: list[str]) -> str:
    return max(set(labels), key=labels.count) if labels else ""
