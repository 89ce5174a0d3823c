"""Part ``seglog``: the article's question asked of a seglog Segment.

A log never writes at random, so the write side is appending batches (encode batches of 1,000,
append them about 1 MiB per ``Segment.append`` call, one fsync), set against writing the very same bytes in 1 MiB ``os.write`` calls (issue
2: append >= 80% of that). The read side is a sequential scan against random reads by offset,
which in Kafka's design go through the sparse offset index (binary search), a header-only scan
to the batch and then a scan inside the batch:

* random batch lookups only (``Segment.read(offset, 1)``: index + header scan, zero-copy);
* random records decoded the Kafka-client way (batch -> record objects -> scan to the offset);
* random records through ``decode_columns`` (no per-record objects);
* random records through ``Segment.read_record`` (the point read: records before the one
  wanted are skipped by their length prefixes in C, one Record is built). Its first read
  of a batch walks the batch's record lengths once and keeps every 8th position; the
  reads are spread over all batches, so that first walk is part of the timed figure.

Penalties are sequential rate / random rate, per run. Figures are also shown as a fraction of
the limits part's write ceiling and page-cache read bandwidth when those were measured. Uses
the native backend when built, else the pure twin (on ``pure_records``), and reports
"not available" when neither has a Segment yet.
"""

from __future__ import annotations

import os

from . import segops
from .data import Unavailable, load_backend, random_offsets
from .limits import PAGECACHE_READ, WRITE_CEILING
from .runner import BATCH_RECORDS, BenchContext
from .stats import (
    UNIT_RECORDS_PER_S,
    Stopwatch,
    fmt_percent,
    fmt_rate,
    fmt_ratio,
    ratio_figure,
)
from .table import PartResult, Table, Target

NAME = "seglog"
TITLE = "sequential vs random, asked of a seglog Segment"

STEPS = {
    "append": "append: encode, write per ~1 MiB of batches, one fsync",
    "append_encoded": "append pre-encoded batches, one fsync",
    "write_1mib": "baseline: same bytes in 1 MiB os.write + fsync",
    "scan_records": "sequential scan -> record objects",
    "scan_columns": "sequential scan -> numpy columns",
    "random_batch": "random offset -> its batch (index + header scan)",
    "random_objects": "random offset -> record (batch -> objects -> scan)",
    "random_columns": "random offset -> record (batch -> columns)",
    "random_record": "random offset -> record (Segment.read_record)",
}


def _pick_backend(ctx: BenchContext):
    reasons = []
    for name in ("native", "pure"):
        be = load_backend(name)
        try:
            for attr in ("encode_batch", "iter_batches", "decode_columns", "Segment"):
                be.need(attr)
        except Unavailable as exc:
            reasons.append(str(exc))
            continue
        n = ctx.profile.records if name == "native" else ctx.profile.pure_records
        return be, n
    raise Unavailable("; ".join(reasons))


def run(ctx: BenchContext) -> PartResult:
    """Build a segment per run and time appends, scans and random reads on it."""
    be, n = _pick_backend(ctx)
    runs = ctx.profile.runs
    reads = ctx.profile.random_reads if be.name == "native" else ctx.profile.slow_random_reads
    slow_reads = max(1, min(reads, ctx.profile.slow_random_reads * 5))
    result = PartResult(NAME, TITLE, params={"backend": be.name, "records": n,
                                             "record_bytes": ctx.record_bytes, "runs": runs,
                                             "random_reads": reads,
                                             "random_object_reads": slow_reads})
    values = ctx.values(n)
    batches = segops.encode_batches(be, values, BATCH_RECORDS)
    stream = b"".join(batches)
    offsets = random_offsets(reads, n)
    scratch = ctx.scratch(NAME)
    for run_index in range(runs):
        path = os.path.join(scratch, f"run-{run_index}")
        os.mkdir(path)
        ctx.progress.step(f"{be.name}: appends", run_index + 1, runs)
        times = {}
        writers = [
            ("append", lambda s: segops.append_values(be, s, values, BATCH_RECORDS, None)),
            ("append_encoded", lambda s: segops.append_encoded(s, batches)),
            ("write_1mib", None),
        ]
        # Rotate the order each run: writing into fresh page-cache pages slows down as dirty
        # memory grows, and rotation spreads that over the three writers.
        shift = run_index % len(writers)
        for step, action in writers[shift:] + writers[:shift]:
            if action is None:
                times[step] = _write_1mib(os.path.join(path, "plain.log"), stream)
                continue
            sub = os.path.join(path, step)
            os.mkdir(sub)
            segment = segops.open_segment(be, sub, create=True)
            try:
                with Stopwatch() as watch:
                    action(segment)
                times[step] = watch.wall_s
            finally:
                segment.close()
        for step, seconds in times.items():
            result.figure(step, UNIT_RECORDS_PER_S).add(n / seconds)
        segment = segops.open_segment(be, os.path.join(path, "append"), create=False)
        try:
            ctx.progress.step(f"{be.name}: scans and {reads:,} random reads", run_index + 1,
                              runs)
            segops.scan_columns(be, segment)  # warm the mapping
            with Stopwatch() as watch:
                count = segops.scan_records(be, segment)
            assert count == n, f"scan saw {count} of {n}"
            result.figure("scan_records", UNIT_RECORDS_PER_S).add(n / watch.wall_s)
            with Stopwatch() as watch:
                segops.scan_columns(be, segment)
            result.figure("scan_columns", UNIT_RECORDS_PER_S).add(n / watch.wall_s)
            probe = offsets[0]
            if bytes(segops.read_record_columns(be, segment, probe)) != values[probe]:
                raise RuntimeError(f"random read of offset {probe} returned the wrong value")
            with Stopwatch() as watch:
                segops.random_batch_reads(segment, offsets)
            result.figure("random_batch", UNIT_RECORDS_PER_S).add(reads / watch.wall_s)
            with Stopwatch() as watch:
                segops.random_reads_objects(be, segment, offsets[:slow_reads])
            result.figure("random_objects", UNIT_RECORDS_PER_S).add(slow_reads / watch.wall_s)
            with Stopwatch() as watch:
                segops.random_reads_columns(be, segment, offsets)
            result.figure("random_columns", UNIT_RECORDS_PER_S).add(reads / watch.wall_s)
            if bytes(segops.read_record(segment, probe)) != values[probe]:
                raise RuntimeError(f"read_record({probe}) returned the wrong value")
            with Stopwatch() as watch:
                segops.random_reads_record(segment, offsets)
            result.figure("random_record", UNIT_RECORDS_PER_S).add(reads / watch.wall_s)
        finally:
            segment.close()
            segops.remove_tree(path)
    f = result.figures
    f["append_vs_1mib"] = ratio_figure(f["append"], f["write_1mib"])
    f["penalty_objects"] = ratio_figure(f["scan_records"], f["random_objects"])
    f["penalty_columns"] = ratio_figure(f["scan_columns"], f["random_columns"])
    f["penalty_record"] = ratio_figure(f["scan_records"], f["random_record"])
    result.tables.append(_table(ctx, result, stream_bytes_per_record=len(stream) / n))
    result.notes += _sentences(result)
    result.charts.append({"title": f"seglog ({be.name}): sequential vs random", "unit":
                          "records/s", "log": True, "bars": {v: k for k, v in STEPS.items()}})
    return result


def _write_1mib(path: str, data: bytes) -> float:
    """Seconds to write ``data`` in 1 MiB ``os.write`` calls to a new file, plus one fsync."""
    chunk = 1 << 20
    view = memoryview(data)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with Stopwatch() as watch:
            for start in range(0, len(view), chunk):
                os.write(fd, view[start:start + chunk])
            os.fsync(fd)
    finally:
        os.close(fd)
    return watch.wall_s


def _table(ctx: BenchContext, result: PartResult, stream_bytes_per_record: float) -> Table:
    f = result.figures
    p = result.params
    write_ceiling = ctx.limit(WRITE_CEILING)
    read_bw = ctx.limit(PAGECACHE_READ)
    table = Table(
        f"seglog {p['backend']} Segment, {p['records']:,} records of {p['record_bytes']} B "
        f"({stream_bytes_per_record:.1f} B/record in the file): records/s median (min..max)",
        ["step", "records/s", "file MB/s", "% of limit", "penalty / ratio", "target",
         "verdict"])
    for key, label in STEPS.items():
        fig = f[key]
        bytes_per_s = fig.median * stream_bytes_per_record
        limit = write_ceiling if key.startswith(("append", "write")) else (
            read_bw if key.startswith("scan") else None)
        cells: list[str | Target] = [fmt_rate(fig), f"{bytes_per_s / 1e6:.0f}",
                 fmt_percent(bytes_per_s / limit) if limit else ""]
        if key == "append":
            ratio = f["append_vs_1mib"]
            target = Target("append vs 1 MiB writes", ">= 0.8x the 1 MiB baseline",
                            ratio.median, 0.8)
            result.targets.append(target)
            cells += [f"{fmt_ratio(ratio)} of baseline", target.goal, target]
        elif key == "random_objects":
            cells += [f"{fmt_ratio(f['penalty_objects'])} below scan"]
        elif key == "random_columns":
            cells += [f"{fmt_ratio(f['penalty_columns'])} below scan"]
        elif key == "random_record":
            cells += [f"{fmt_ratio(f['penalty_record'])} below the object scan"]
        table.add(label, *cells)
    if write_ceiling or read_bw:
        table.note = ("% of limit: appends against the write ceiling, scans against "
                      "page-cache read bandwidth (limits part" +
                      (f", {ctx.limits_source}" if ctx.limits_source != "this run" else "") + ").")
    return table


def _sentences(result: PartResult) -> list[str]:
    f = result.figures
    out = [
        f"Appending through the Segment ran at {f['append_vs_1mib'].median:.0%} of writing "
        f"the same bytes in 1 MiB calls; pre-encoded batches at "
        f"{f['append_encoded'].median / f['write_1mib'].median:.0%}, so "
        + ("encoding is" if f["append"].median < 0.8 * f["append_encoded"].median else
           "encoding is not") + " the main cost of an append.",
        f"A random read decoded the Kafka-client way was {f['penalty_objects'].median:,.0f}x "
        f"slower than a sequential scan, and {f['penalty_columns'].median:,.0f}x through "
        f"columns: the sparse index makes finding the batch cheap "
        f"({f['random_batch'].median / f['random_columns'].median:.0f}x the full read rate), "
        "the cost is decoding a whole batch to reach one record.",
        f"Segment.read_record skips to the record without decoding the batch: "
        f"{f['random_record'].median / f['random_columns'].median:.0f}x the columns path, "
        f"{f['penalty_record'].median:.1f}x below a scan to record objects.",
    ]
    return out
