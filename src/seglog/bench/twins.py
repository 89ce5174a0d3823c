"""Part ``twins``: the native core against its pure-Python twin, operation by operation.

Both backends implement the same interface (``seglog._contract``) and write the same bytes, so each
operation is timed on each and the native/pure ratio is computed per run. The pure twin runs
on fewer records (``pure_records``) so it stays fast; rates are per record, so they compare.

Operations: ``encode`` (encode_batch, batches of 1,000, list of bytes in), ``append``
(encode + Segment.append + one fsync), ``scan`` (iter_batches + records(), every value
touched), ``columns`` (decode_columns over the whole buffer), ``index lookup``
(OffsetIndex.lookup of random offsets). Issue 4 asks native >= 20x pure on append and scan
(issue 2: on encode). A second table puts the native codec next to aiokafka's Cython codec,
the peer issue 2 names (encode >= 2x its builder, columns >= 10x and records >= 1.2x its
reader).

Every record decoder checks the batch CRC32C by default (issue 8, Kafka's ``check.crcs``), so
``scan`` and ``columns`` are also timed with ``check_crcs=False`` in the same run: the ratio of
the two is the CRC's cost. Against aiokafka the decoders are compared twice, doing the same
work each time: without a CRC check on either side (aiokafka's record reader never checks it
itself), and with one on both (aiokafka's consumer calls ``validate_crc()`` per batch when
``check_crcs`` is on, its default).
"""

from __future__ import annotations

import os
import random

from . import segops
from .data import BackendView, Unavailable, load_backend
from .runner import BATCH_RECORDS, BenchContext
from .stats import UNIT_RECORDS_PER_S, Figure, Stopwatch, fmt_rate, fmt_ratio, ratio_figure
from .table import PartResult, Table, Target

NAME = "twins"
TITLE = "native core vs pure-Python twin"

OPERATIONS = {
    "encode": ("encode_batch (batches of 1,000)", 20.0),
    "append": ("Segment append (encode + write + fsync)", 20.0),
    "scan": ("scan: iter_batches + records()", 20.0),
    "columns": ("decode_columns (numpy columns)", None),
    "scan_nocrc": ("scan, check_crcs=False", None),
    "columns_nocrc": ("decode_columns, check_crcs=False", None),
    "lookup": ("OffsetIndex.lookup (random offsets)", None),
}
#: Records covered by one offset-index entry in the lookup benchmark (~4 KiB of batches).
RECORDS_PER_INDEX_ENTRY = 37


def run(ctx: BenchContext) -> PartResult:
    """Time each operation on each backend, ``runs`` times, and build the tables."""
    runs = ctx.profile.runs
    counts = {"native": ctx.profile.records, "pure": ctx.profile.pure_records}
    result = PartResult(NAME, TITLE, params={"native_records": counts["native"],
                                             "pure_records": counts["pure"], "runs": runs,
                                             "record_bytes": ctx.record_bytes})
    backends = {name: load_backend(name) for name in counts}
    scratch = ctx.scratch(NAME)
    skipped: dict[tuple[str, str], str] = {}
    aiokafka = _aiokafka()
    # One untimed round first, of every operation on every backend and of aiokafka: the
    # first large allocations of a process touch memory that is fresh to this VM (measured:
    # the first 1M-record decode_columns 25-100 ms, later ones ~7 ms), which is a cost of
    # starting a process, not of the operation.
    ctx.progress.step("warm-up round", 0, runs)
    for op in OPERATIONS:
        for name, be in backends.items():
            try:
                _OPS[op](ctx, be, counts[name], str(scratch))
            except Unavailable:
                pass
    if aiokafka is not None:
        _aiokafka_rates(ctx, aiokafka, counts["native"])
    for run_index in range(runs):
        for op in OPERATIONS:
            for name, be in backends.items():
                if (name, op) in skipped:
                    continue
                ctx.progress.step(f"{name} {op}", run_index + 1, runs)
                try:
                    rate = _OPS[op](ctx, be, counts[name], str(scratch))
                except Unavailable as exc:
                    skipped[(name, op)] = str(exc)
                    continue
                result.figure(f"{name}.{op}", UNIT_RECORDS_PER_S).add(rate)
        if aiokafka is not None:
            ctx.progress.step("aiokafka codec", run_index + 1, runs)
            for op, rate in _aiokafka_rates(ctx, aiokafka, counts["native"]).items():
                result.figure(f"aiokafka.{op}", UNIT_RECORDS_PER_S).add(rate)
    result.tables.append(_twins_table(result, skipped))
    if aiokafka is None:
        result.notes.append("aiokafka comparison not available: aiokafka is not installed.")
    else:
        result.tables.append(_aiokafka_table(result, aiokafka))
    for (name, op), reason in sorted(skipped.items()):
        result.notes.append(f"{name} {op}: not available: {reason}")
    result.notes.append("compaction: not measured by this part yet (the cleaner works on a "
                        "Log, above the backend interface these twins share).")
    result.notes += _sentences(result)
    result.charts.append({
        "title": "twins: records/s, native vs pure", "unit": "records/s", "log": True,
        "bars": {f"{name} {op}": f"{name}.{op}" for op in OPERATIONS
                 for name in ("native", "pure")}})
    return result


# --- operations (each returns records/s of one run) -------------------------------------------


def _encode(ctx: BenchContext, be: BackendView, n: int, scratch: str) -> float:
    encode = be.need("encode_batch")
    values = ctx.values(n)
    with Stopwatch() as watch:
        for i in range(0, n, BATCH_RECORDS):
            encode(values[i:i + BATCH_RECORDS], base_offset=i)
    return n / watch.wall_s


def _append(ctx: BenchContext, be: BackendView, n: int, scratch: str) -> float:
    be.need("encode_batch")
    path = os.path.join(scratch, f"append-{be.name}")
    os.mkdir(path)
    segment = segops.open_segment(be, path, create=True)
    try:
        with Stopwatch() as watch:
            segops.append_values(be, segment, ctx.values(n), BATCH_RECORDS, None)
    finally:
        segment.close()
        segops.remove_tree(path)
    return n / watch.wall_s


def _buffer(ctx: BenchContext, be: BackendView, n: int) -> bytes:
    """The encoded batches of ``n`` records (cached per backend and count)."""
    key = ("twins-buffer", be.name, n)
    cache = ctx.cache
    if key not in cache:
        cache[key] = b"".join(segops.encode_batches(be, ctx.values(n), BATCH_RECORDS))
    return cache[key]


def _scan(ctx: BenchContext, be: BackendView, n: int, scratch: str, *,
          check_crcs: bool = True) -> float:
    iter_batches = be.need("iter_batches")
    buffer = _buffer(ctx, be, n)
    count = 0
    with Stopwatch() as watch:
        for batch in iter_batches(buffer):
            for record in batch.records(check_crcs=check_crcs):
                record.value
                count += 1
    assert count == n, f"scan saw {count} of {n} records"
    return n / watch.wall_s


def _columns(ctx: BenchContext, be: BackendView, n: int, scratch: str, *,
             check_crcs: bool = True) -> float:
    decode_columns = be.need("decode_columns")
    buffer = _buffer(ctx, be, n)
    with Stopwatch() as watch:
        count = len(decode_columns(buffer, check_crcs=check_crcs))
    assert count == n, f"columns saw {count} of {n} records"
    return n / watch.wall_s


def _scan_nocrc(ctx: BenchContext, be: BackendView, n: int, scratch: str) -> float:
    return _scan(ctx, be, n, scratch, check_crcs=False)


def _columns_nocrc(ctx: BenchContext, be: BackendView, n: int, scratch: str) -> float:
    return _columns(ctx, be, n, scratch, check_crcs=False)


def _lookup(ctx: BenchContext, be: BackendView, n: int, scratch: str) -> float:
    index_class = be.need("OffsetIndex")
    entries = max(1_000, n * ctx.record_bytes // 4096)
    path = os.path.join(scratch, f"{be.name}.index")
    index = index_class(path, 0, max_index_bytes=(entries + 1) * 8)
    try:
        for e in range(entries):
            index.append(e * RECORDS_PER_INDEX_ENTRY + 1, e * 4096 + 61)
        rng = random.Random(42)
        upper = entries * RECORDS_PER_INDEX_ENTRY
        lookups = n if be.name == "native" else max(1_000, n // 5)
        targets = [rng.randrange(upper) for _ in range(lookups)]
        lookup = index.lookup
        with Stopwatch() as watch:
            for target in targets:
                lookup(target)
    finally:
        index.close()
        os.remove(path)
    return lookups / watch.wall_s


_OPS = {"encode": _encode, "append": _append, "scan": _scan, "columns": _columns,
        "scan_nocrc": _scan_nocrc, "columns_nocrc": _columns_nocrc, "lookup": _lookup}


# --- aiokafka's Cython codec ------------------------------------------------------------------


def _aiokafka():
    try:
        from aiokafka.record import default_records, memory_records
    except ImportError:
        return None
    return default_records, memory_records


def _aiokafka_rates(ctx: BenchContext, modules, n: int) -> dict[str, float]:
    default_records, memory_records = modules
    builder_class = default_records.DefaultRecordBatchBuilder
    values = ctx.values(n)
    parts = []
    with Stopwatch() as watch:
        for start in range(0, n, BATCH_RECORDS):
            builder = builder_class(2, 0, 0, -1, -1, -1, 1 << 30)
            append = builder.append
            for delta, v in enumerate(values[start:start + BATCH_RECORDS]):
                append(delta, 1_700_000_000_000, None, v, [])
            parts.append(builder.build())
    encode_rate = n / watch.wall_s
    buffer = b"".join(parts)
    rates = {"encode": encode_rate}
    for key, check_crcs in (("scan_nocrc", False), ("scan", True)):
        count = 0
        with Stopwatch() as watch:
            records = memory_records.MemoryRecords(buffer)
            while records.has_next():
                batch = records.next_batch()
                # What aiokafka's fetcher does per batch when check_crcs is on (its default).
                if check_crcs and not batch.validate_crc():
                    raise AssertionError("aiokafka: CRC mismatch on seglog's own bytes")
                for record in batch:
                    record.value
                    count += 1
        rates[key] = count / watch.wall_s
    return rates


# --- tables ------------------------------------------------------------------------------------


def _twins_table(result: PartResult, skipped: dict) -> Table:
    f = result.figures
    table = Table(
        f"native ({result.params['native_records']:,} records) vs pure "
        f"({result.params['pure_records']:,}): records/s median (min..max); ratio per run",
        ["operation", "native", "pure", "native/pure", "target", "verdict"])
    for op, (label, threshold) in OPERATIONS.items():
        native, pure = f.get(f"native.{op}"), f.get(f"pure.{op}")
        cells: list[str | Target] = [fmt_rate(native) if native else "n/a",
                                     fmt_rate(pure) if pure else "n/a"]
        if native and pure and len(native.values) == len(pure.values):
            ratio = f[f"ratio.{op}"] = ratio_figure(native, pure)
            cells.append(fmt_ratio(ratio))
            if threshold:
                target = Target(f"native/pure {op}", f">= {threshold:.0f}x", ratio.median,
                                threshold)
                result.targets.append(target)
                cells += [target.goal, target]
        else:
            cells.append("n/a")
            if threshold:
                cells += [f">= {threshold:.0f}x", "n/a (native not built)"]
        table.add(label, *cells)
    return table


def _aiokafka_table(result: PartResult, modules) -> Table:
    f = result.figures
    compiled = "_crecords" in modules[0].DefaultRecordBatchBuilder.__module__
    peer = "aiokafka (Cython)" if compiled else "aiokafka (pure Python)"
    table = Table(f"native codec vs {peer}, same records, in memory (no I/O)",
                  ["operation", "seglog native", peer, "ratio", "target", "verdict"])
    rows = [("encode", "encode", "encode: batches of 1,000", 2.0),
            ("columns_nocrc", "scan_nocrc",
             "decode to numpy columns vs its record reader, no CRC check on either", 10.0),
            ("scan_nocrc", "scan_nocrc", "decode to record objects, no CRC check on either",
             1.2),
            ("columns", "scan", "decode to numpy columns, CRC checked on both", 10.0),
            ("scan", "scan", "decode to record objects, CRC checked on both", 1.2)]
    for ours, theirs, label, threshold in rows:
        native, other = f.get(f"native.{ours}"), f.get(f"aiokafka.{theirs}")
        if not other:
            continue
        if native:
            ratio = ratio_figure(native, other)
            f[f"vs_aiokafka.{ours}"] = ratio
            target = Target(f"native {ours} / aiokafka", f">= {threshold:g}x", ratio.median,
                            threshold)
            result.targets.append(target)
            table.add(label, fmt_rate(native), fmt_rate(other), fmt_ratio(ratio), target.goal,
                      target)
        else:
            table.add(label, "n/a", fmt_rate(other), "n/a", f">= {threshold:g}x",
                      "n/a (native not built)")
    return table


def _sentences(result: PartResult) -> list[str]:
    f = result.figures
    out = []
    ratios = {op: f[f"ratio.{op}"] for op in OPERATIONS if f"ratio.{op}" in f}
    if ratios:
        low = min(ratios, key=lambda op: ratios[op].median)
        high = max(ratios, key=lambda op: ratios[op].median)
        if low == high:
            out.append(f"The native core is {ratios[low].median:.1f}x faster than the pure "
                       f"twin at {low} (the only operation both backends have yet).")
        else:
            out.append(f"The native core is {ratios[low].median:.0f}x ({low}) to "
                       f"{ratios[high].median:.0f}x ({high}) faster than the pure twin.")
    for op in ("columns", "scan"):
        checked, unchecked = f.get(f"native.{op}"), f.get(f"native.{op}_nocrc")
        if checked and unchecked and len(checked.values) == len(unchecked.values):
            cost = ratio_figure(unchecked, checked)
            f[f"crc_cost.{op}"] = cost
            out.append(f"Checking every batch's CRC32C (the default) costs native {op} "
                       f"{(cost.median - 1) * 100:.0f}% ({fmt_ratio(cost)} the rate without).")
    if "pure.scan" in f and "pure.columns" in f:
        out.append(f"In the twin, columns decode at {f['pure.columns'].median / f['pure.scan'].median:.1f}x the "
                   "rate of record objects: the per-record Python work is the cost either way.")
    return out
