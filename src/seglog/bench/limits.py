"""Part ``limits``: this machine's ceilings, the denominators of every other part.

Measured the way the peer survey (Python peers measured on the development machine before
seglog was written; not in this repository) measured them:

* write ceiling: 1 MiB ``os.write`` calls from a page-aligned buffer into a new file, then one
  ``fsync``; the clock covers the writes and the fsync.
* page-cache read bandwidth: ``os.readv`` of 1 MiB into a page-aligned (mmap) buffer over the
  file just written (second pass, so every page is cached).
* bare ``os.sendfile`` from that cached file to a loopback TCP socket, timed until a separate
  reader process (``recv_into`` a page-aligned buffer) has every byte.
* CRC32C (seglog's own, native when built) and lz4 frame compress/decompress over 1 MiB of the
  JSON-like records.
* two Python floors for per-record APIs: ``b"".join`` of the values + one write + one fsync
  (append), and slicing every record out of one buffer into a ``bytes`` object (scan).

The medians go into ``ctx.limits`` (and results.json's ``limits``) under stable keys, so the
seglog, peers and sendfile parts show their figures as a fraction of them.
"""

from __future__ import annotations

import mmap
import os

from . import loopback
from .data import load_backend
from .runner import BenchContext
from .stats import (
    UNIT_BYTES_PER_S,
    UNIT_RECORDS_PER_S,
    Figure,
    Stopwatch,
    best_rate,
    fmt_gb_per_s,
    si,
)
from .table import PartResult, Table

NAME = "limits"
TITLE = "this machine's limits"

CHUNK_BYTES = 1 << 20
#: Keys of ctx.limits (bytes/s unless the name says records/s).
WRITE_CEILING = "write_ceiling_bytes_per_s"
PAGECACHE_READ = "pagecache_read_bytes_per_s"
SENDFILE_LOOPBACK = "sendfile_loopback_bytes_per_s"
CRC32C = "crc32c_bytes_per_s"
LZ4_COMPRESS = "lz4_compress_bytes_per_s"
LZ4_DECOMPRESS = "lz4_decompress_bytes_per_s"
FLOOR_APPEND = "floor_append_records_per_s"
FLOOR_SCAN = "floor_scan_records_per_s"


def run(ctx: BenchContext) -> PartResult:
    """Measure every limit ``runs`` times and store the medians in ``ctx.limits``."""
    runs = ctx.profile.runs
    write_bytes = ctx.profile.limits_write_bytes
    result = PartResult(NAME, TITLE, params={"write_bytes": write_bytes,
                                             "sendfile_bytes": ctx.profile.sendfile_bytes,
                                             "runs": runs})
    scratch = ctx.scratch(NAME)
    sample = b"".join(ctx.values(max(1, CHUNK_BYTES // ctx.record_bytes) + 1))[:CHUNK_BYTES]
    path = str(scratch / "ceiling.dat")
    aligned = mmap.mmap(-1, CHUNK_BYTES)
    aligned.write(sample)
    for run_index in range(runs):
        ctx.progress.step("1 MiB writes + fsync", run_index + 1, runs)
        result.figure(WRITE_CEILING, UNIT_BYTES_PER_S).add(
            write_bytes / _write_ceiling_s(path, aligned, write_bytes))
        ctx.progress.step("page-cache reads", run_index + 1, runs)
        loopback.warm(path)
        result.figure(PAGECACHE_READ, UNIT_BYTES_PER_S).add(_pagecache_read(path, aligned))
    aligned.close()
    os.remove(path)
    _sendfile_limit(ctx, result, str(scratch / "sendfile.dat"))
    _kernels(ctx, result, sample)
    _floors(ctx, result, str(scratch / "floor.dat"))
    for key, fig in result.figures.items():
        if key in _LABELS:
            ctx.limits[key] = fig.median
    ctx.limits_source = "this run"
    result.tables.append(_table(ctx, result))
    result.notes += _sentences(ctx, result)
    result.charts.append({"title": "limits: bandwidth (GB/s)", "unit": "bytes/s",
                          "bars": {_LABELS[k][0]: k for k in _LABELS
                                   if result.figures.get(k) and result.figures[k].unit ==
                                   UNIT_BYTES_PER_S}})
    return result


def _write_ceiling_s(path: str, buffer: mmap.mmap, total_bytes: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with Stopwatch() as watch:
            remaining = total_bytes
            while remaining > 0:
                remaining -= os.write(fd, buffer if remaining >= CHUNK_BYTES
                                      else memoryview(buffer)[:remaining])
            os.fsync(fd)
    finally:
        os.close(fd)
    return watch.wall_s


def _pagecache_read(path: str, buffer: mmap.mmap) -> float:
    fd = os.open(path, os.O_RDONLY)
    targets = [buffer]
    total = 0
    try:
        with Stopwatch() as watch:
            while True:
                n = os.readv(fd, targets)
                if n == 0:
                    break
                total += n
    finally:
        os.close(fd)
    return total / watch.wall_s


def _sendfile_limit(ctx: BenchContext, result: PartResult, path: str) -> None:
    size = ctx.profile.sendfile_bytes
    loopback.write_file(path, size, ctx.values(64)[0])
    loopback.warm(path)
    with loopback.LoopbackReader() as reader:
        for run_index in range(ctx.profile.runs):
            ctx.progress.step("bare os.sendfile -> loopback reader", run_index + 1,
                              ctx.profile.runs)
            t = reader.transfer(size, loopback.send_with_sendfile(path, size))
            result.figure(SENDFILE_LOOPBACK, UNIT_BYTES_PER_S).add(t.bytes_per_s)
            result.figure("sendfile_sender_cpu_s_per_gb", "cpu s/GB").add(t.sender_cpu_s_per_gb)
            result.figure("sendfile_reader_cpu_s_per_gb", "cpu s/GB").add(t.reader_cpu_s_per_gb)
    os.remove(path)


def _crc_function():
    """seglog's crc32c (native first, then the twin) and a label saying which."""
    for name in ("native", "pure"):
        view = load_backend(name)
        if view.has("crc32c"):
            return view.need("crc32c"), f"seglog {name} crc32c"
    return None, ""


def _kernels(ctx: BenchContext, result: PartResult, sample: bytes) -> None:
    crc, label = _crc_function()
    result.params["crc32c"] = label or "none"
    data = sample if "native" in label else sample[:64 * 1024]  # the twin is slow
    try:
        import lz4.frame as lz4_frame
    except ImportError:
        lz4_frame = None
        result.notes.append("lz4 not available: the lz4 package is not installed.")
    compressed = lz4_frame.compress(sample) if lz4_frame else b""
    if lz4_frame:
        result.params["lz4_ratio"] = round(len(sample) / len(compressed), 2)
    for run_index in range(ctx.profile.runs):
        ctx.progress.step("CRC32C and lz4 kernels", run_index + 1, ctx.profile.runs)
        if crc is not None:
            result.figure(CRC32C, UNIT_BYTES_PER_S).add(best_rate(lambda: crc(data), len(data)))
        if lz4_frame:
            result.figure(LZ4_COMPRESS, UNIT_BYTES_PER_S).add(
                best_rate(lambda: lz4_frame.compress(sample), len(sample)))
            result.figure(LZ4_DECOMPRESS, UNIT_BYTES_PER_S).add(
                best_rate(lambda: lz4_frame.decompress(compressed), len(sample)))


def _floors(ctx: BenchContext, result: PartResult, path: str) -> None:
    values = ctx.values(ctx.profile.records)
    size = ctx.record_bytes
    n = len(values)
    for run_index in range(ctx.profile.runs):
        ctx.progress.step("Python floors (join+write+fsync; slice to bytes)", run_index + 1,
                          ctx.profile.runs)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            with Stopwatch() as watch:
                os.write(fd, b"".join(values))
                os.fsync(fd)
        finally:
            os.close(fd)
        result.figure(FLOOR_APPEND, UNIT_RECORDS_PER_S).add(n / watch.wall_s)
        with open(path, "rb") as f:
            blob = f.read()
        with Stopwatch() as watch:
            for position in range(0, n * size, size):
                blob[position:position + size]
        result.figure(FLOOR_SCAN, UNIT_RECORDS_PER_S).add(n / watch.wall_s)
    os.remove(path)


_LABELS = {
    WRITE_CEILING: ("write ceiling", "1 MiB os.write from an aligned buffer + one fsync"),
    PAGECACHE_READ: ("page-cache read", "os.readv 1 MiB into an aligned buffer, cached file"),
    SENDFILE_LOOPBACK: ("sendfile -> loopback", "bare os.sendfile loop to a TCP reader process"),
    CRC32C: ("CRC32C", "crc32c over 1 MiB of records"),
    LZ4_COMPRESS: ("lz4 compress", "lz4.frame.compress of 1 MiB of records"),
    LZ4_DECOMPRESS: ("lz4 decompress", "lz4.frame.decompress to 1 MiB"),
    FLOOR_APPEND: ("Python append floor", "b''.join(values) + one os.write + one fsync"),
    FLOOR_SCAN: ("Python scan floor", "slice each record of one buffer into bytes"),
}


def _table(ctx: BenchContext, result: PartResult) -> Table:
    size = ctx.record_bytes
    table = Table("Limits: median (min..max) over runs",
                  ["limit", "GB/s", "min..max GB/s", f"records/s of {size} B", "how"])
    for key, (label, how) in _LABELS.items():
        fig = result.figures.get(key)
        if fig is None or not fig.values:
            continue
        if key == CRC32C:
            how = f"{result.params['crc32c']} over {'1 MiB' if 'native' in result.params['crc32c'] else '64 KiB'} of records"
        if key == LZ4_COMPRESS and "lz4_ratio" in result.params:
            how += f" (ratio {result.params['lz4_ratio']})"
        if fig.unit == UNIT_BYTES_PER_S:
            table.add(label, fmt_gb_per_s(fig.median),
                      f"{fmt_gb_per_s(fig.min)}..{fmt_gb_per_s(fig.max)}",
                      si(fig.median / size), how)
        else:
            table.add(label, fmt_gb_per_s(fig.median * size), "", f"{si(fig.median)} "
                      f"({si(fig.min)}..{si(fig.max)})", how)
    return table


def _sentences(ctx: BenchContext, result: PartResult) -> list[str]:
    f = result.figures
    out = []
    write, read = f.get(WRITE_CEILING), f.get(PAGECACHE_READ)
    if write and read:
        out.append(
            f"A durable sequential write of {ctx.profile.limits_write_bytes / 2**20:.0f} MiB "
            f"ran at {fmt_gb_per_s(write.median)} GB/s, i.e. {si(write.median / ctx.record_bytes)}"
            f" records/s of {ctx.record_bytes} B; cached reads run "
            f"{read.median / write.median:.0f}x faster, so a log's read path is bound by CPU "
            "work per record, not by the disk.")
    send = f.get(SENDFILE_LOOPBACK)
    if send and read:
        out.append(
            f"sendfile to a loopback reader moved {fmt_gb_per_s(send.median)} GB/s, "
            f"{send.median / read.median:.0%} of page-cache read bandwidth: over loopback the "
            "reader's copy out of the socket is the bottleneck, not the sender.")
    append, scan = f.get(FLOOR_APPEND), f.get(FLOOR_SCAN)
    if append and write and scan:
        out.append(
            f"An API that takes one bytes object per record tops out near {si(append.median)} "
            f"appends/s (join + write + fsync, {append.median * ctx.record_bytes / write.median:.0%}"
            f" of the write ceiling) and {si(scan.median)} reads/s when it hands back one bytes "
            "object per record.")
    return out
