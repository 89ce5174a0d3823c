"""Random point reads by offset on a large log: seglog's ``Segment.read_record`` against LMDB's
``txn.get`` (issue 27's target: >= 3x LMDB on 10 M records that fit the page cache, >= 1.5x
when they do not).

Not a test. Writes ``--records`` records of 100 B once (seglog: one segment of 1,000-record
batches, Kafka's index interval of 4096 B, so one index entry per batch; LMDB: 8-byte
big-endian keys, ``putmulti(append=True)``, as the peers part does), then measures in one
process, LMDB and seglog interleaved in chunks of 10,000 reads so that both see the same load:

seglog reads each offset twice per round, in separate timed loops, each on another chunk than
LMDB's and than the other's in that step (a third of the round apart: no loop finds its
offsets' cache lines just touched by another): ``read_record(o).value``
(a Record, then its value) and, where the tree has it, ``read_value(o)`` (the value only, as
LMDB's get answers; same lookup, CRC check and record parse).

- ``warm`` (default): every file in the page cache; one untimed pass of all offsets first
  (page faults of the mappings; seglog's first read of a batch checks its CRC once and
  remembers its header and record checkpoints), then ``--rounds`` timed passes.
- ``cold``: before each timed loop (LMDB's, then seglog's ``read_record``, then seglog's
  ``read_value``) both stores are closed and their files dropped from the page cache
  (``posix_fadvise(POSIX_FADV_DONTNEED)``; the files are not mapped then, so the pages go),
  then reopened: the reads go to the disk, and seglog's remembered headers are gone with the
  closed segment (its offset index is read again, a 80 KB file for 10 M records). The loops
  run one after the other over all offsets, not interleaved (one would warm the next).

``--vary-min-bytes N`` writes values of uneven size instead (180 B cut to a random length of
at least N; use another ``--workdir``); ``--batch-records N`` writes seglog batches of N
records instead of 1,000 (the cold read of a batch reads all of it to check its CRC).

Prints records/s per round for both, the ratio seglog/LMDB per round, min/median/max and the
load average. Run it with ``PYTHONPATH`` pointing at the tree to measure (the native backend
is imported from there):

    PYTHONPATH=src python bench/bench_randread.py [--records 10000000] [--reads 500000]
        [--rounds 3] [--mode warm|cold] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

CHUNK_READS = 10_000


def _vary(values: list[bytes], min_bytes: int) -> list[bytes]:
    """Each value cut to a random length in ``[min_bytes, its length]`` (seed 7): records of
    uneven size, where a guess of a record's place from its offset is rough."""
    import random

    rng = random.Random(7)
    return [v[:rng.randint(min_bytes, len(v))] for v in values]


def _build(workdir: str, records: int, vary_min_bytes: int | None = None,
           batch_records: int = 1000) -> tuple[str, str, list[bytes]]:
    from seglog.bench import segops
    from seglog.bench.data import load_backend, make_values, offset_keys

    seg_dir, lmdb_dir = os.path.join(workdir, "seglog"), os.path.join(workdir, "lmdb")
    keys = offset_keys(records)
    done = os.path.join(workdir, f"done-{records}")
    if not os.path.exists(done):
        import lmdb

        os.makedirs(seg_dir, exist_ok=True)
        os.makedirs(lmdb_dir, exist_ok=True)
        values = make_values(records, 100 if vary_min_bytes is None else 180)
        if vary_min_bytes is not None:
            values = _vary(values, vary_min_bytes)
        be = load_backend("native")
        segment = segops.open_segment(be, seg_dir, create=True)
        segops.append_values(be, segment, values, batch_records, None)
        segment.close()
        env = lmdb.open(lmdb_dir, map_size=records * 328, sync=True, metasync=True,
                        readahead=False)
        with env.begin(write=True) as txn:
            txn.cursor().putmulti(zip(keys, values), append=True)
        env.close()
        open(done, "w").close()
    return seg_dir, lmdb_dir, keys


def _disk_read_bytes() -> int:
    """Bytes this process has made the kernel read from storage (readahead included)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def _drop_cache(dir_path: str) -> None:
    for name in os.listdir(dir_path):
        fd = os.open(os.path.join(dir_path, name), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--reads", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=("warm", "cold"), default="warm")
    parser.add_argument("--workdir", default="/tmp/seglog-randread")
    parser.add_argument("--batch-records", type=int, default=1000,
                        help="records per seglog batch (use another --workdir)")
    parser.add_argument("--vary-min-bytes", type=int, default=None,
                        help="values of uneven size: 180 B cut to a random length of at "
                             "least this (use another --workdir)")
    args = parser.parse_args(argv)

    import lmdb

    from seglog.bench import segops
    from seglog.bench.data import load_backend, random_offsets

    seg_dir, lmdb_dir, keys = _build(args.workdir, args.records, args.vary_min_bytes,
                                     args.batch_records)
    be = load_backend("native")
    offsets = random_offsets(args.reads, args.records)
    chunks = [offsets[i:i + CHUNK_READS] for i in range(0, len(offsets), CHUNK_READS)]
    print(f"seglog from {be.namespace.Segment.__module__} "
          f"({sys.modules[be.namespace.Segment.__module__].__file__}); {args.records:,} "
          f"records, {args.reads:,} reads per round, mode {args.mode}", flush=True)

    def open_both():
        segment = segops.open_segment(be, seg_dir, create=False)
        env = lmdb.open(lmdb_dir, map_size=args.records * 328, readonly=True, lock=False,
                        readahead=False)
        return segment, env, env.begin()

    segment, env, txn = open_both()
    if args.mode == "warm":
        for o in offsets:  # untimed: page faults, first reads of each batch (see docstring)
            txn.get(keys[o])
            segment.read_record(o)
    has_value = hasattr(segment, "read_value")  # (a tree from before read_value: records only)
    rates: dict[str, list[float]] = {"lmdb": [], "seglog": [], "ratio": []}
    if has_value:
        rates.update({"seglog_value": [], "ratio_value": []})

    disk_bytes: dict[str, list[float]] = {}

    def cold_pass(loop) -> float:
        # Both stores closed, their pages dropped, reopened; then one store's loop alone,
        # with the bytes it made the kernel read from the disk (/proc/self/io read_bytes).
        nonlocal segment, env, txn
        txn.abort()
        env.close()
        segment.close()
        _drop_cache(seg_dir)
        _drop_cache(lmdb_dir)
        segment, env, txn = open_both()
        before = _disk_read_bytes()
        t = time.perf_counter()
        loop(segment, txn)
        seconds = time.perf_counter() - t
        disk_bytes.setdefault(loop.__name__, []).append(
            (_disk_read_bytes() - before) / len(offsets))
        return seconds

    def lmdb_loop(segment, txn):
        get = txn.get
        for o in offsets:
            get(keys[o])

    def record_loop(segment, txn):
        read = segment.read_record
        for o in offsets:
            read(o).value

    def value_loop(segment, txn):
        read_value = segment.read_value
        for o in offsets:
            read_value(o)

    for round_index in range(args.rounds):
        read, get = segment.read_record, txn.get
        read_value = segment.read_value if has_value else None
        lmdb_s = seglog_s = value_s = 0.0
        if args.mode == "cold":
            # Each store's reads start from a dropped page cache and a fresh open (the
            # chunks are not interleaved: a loop must not find pages another just read).
            lmdb_s = cold_pass(lmdb_loop)
            seglog_s = cold_pass(record_loop)
            if has_value:
                value_s = cold_pass(value_loop)
        for step in range(len(chunks) if args.mode == "warm" else 0):
            # Each loop reads another chunk (a third of the round apart), so that no loop
            # finds the lines, slots and pages of its offsets just touched by another.
            t0 = time.perf_counter()
            for o in chunks[step]:
                get(keys[o])
            t1 = time.perf_counter()
            for o in chunks[(step + len(chunks) // 3) % len(chunks)]:
                read(o).value
            t2 = time.perf_counter()
            if read_value is not None:
                for o in chunks[(step + 2 * len(chunks) // 3) % len(chunks)]:
                    read_value(o)
            t3 = time.perf_counter()
            lmdb_s += t1 - t0
            seglog_s += t2 - t1
            value_s += t3 - t2
        a, b = len(offsets) / lmdb_s, len(offsets) / seglog_s
        rates["lmdb"].append(a)
        rates["seglog"].append(b)
        rates["ratio"].append(b / a)
        line = (f"round {round_index}: LMDB {a:,.0f}/s  seglog read_record {b:,.0f}/s "
                f"({b / a:.2f}x)")
        if read_value is not None:
            c = len(offsets) / value_s
            rates["seglog_value"].append(c)
            rates["ratio_value"].append(c / a)
            line += f"  seglog read_value {c:,.0f}/s ({c / a:.2f}x)"
        print(f"{line}  (load {os.getloadavg()[0]:.2f})", flush=True)
    txn.abort()
    env.close()
    segment.close()
    for name, values in rates.items():
        print(f"{name}: min {min(values):,.4g} median {statistics.median(values):,.4g} "
              f"max {max(values):,.4g}")
    for name, values in disk_bytes.items():
        print(f"{name}: disk bytes per read: min {min(values):,.0f} median "
              f"{statistics.median(values):,.0f} max {max(values):,.0f}")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
