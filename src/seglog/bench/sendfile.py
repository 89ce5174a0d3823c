"""Part ``sendfile``: serving a segment file to a loopback TCP reader, three ways.

The consumer's read path of a Kafka broker: whole batches of a segment go to a socket. Three
senders move the same cached segment file to a reader process (``recv_into`` a page-aligned
buffer, see :mod:`.loopback`), interleaved within each run:

* ``Segment.sendfile``: seglog's zero-copy path (``sendfile(2)`` over whole batches);
* bare ``os.sendfile`` loop over the file (the ceiling for that path);
* ``os.readv`` of 1 MiB into a page-aligned buffer + ``sendall`` (the copying path);
* ``Segment.read`` views + ``sendall``: the zero-copy mmap views of whole batches handed to
  the socket, so the sender copies once (page cache -> socket buffer) instead of twice.

Each is reported in GB/s and in CPU seconds per GB on the sender and on the reader side.
Issue 2 asks Segment.sendfile of a 1 GiB segment to reach >= 80% of the bare loop (``--full``
uses 1 GiB, ``--quick`` much less). Over loopback the reader must copy every byte, so the
copying sender can win on throughput (it leaves the data hot in cache and splits the copying
over both cores) while sendfile should cost the sender less CPU per GB.
"""

from __future__ import annotations

import os

from . import loopback, segops
from .data import Unavailable, load_backend
from .limits import SENDFILE_LOOPBACK
from .runner import BATCH_RECORDS, BenchContext
from .stats import UNIT_BYTES_PER_S, fmt_gb_per_s, fmt_ratio, ratio_figure
from .table import PartResult, Table, Target

NAME = "sendfile"
TITLE = "serving a segment to a loopback TCP reader"

METHODS = {
    "segment": "Segment.sendfile (seglog)",
    "bare": "bare os.sendfile loop",
    "readsend": "os.readv 1 MiB + sendall",
    "view": "Segment.read view + sendall",
}
#: The pure twin validates CRCs in Python on append; building a big segment with it is slow.
PURE_SEGMENT_BYTES_MAX = 32 << 20
#: Bytes of batches appended per Segment.append call while building the segment.
BUILD_CHUNK_BYTES = 4 << 20


def run(ctx: BenchContext) -> PartResult:
    """Build one segment of ``sendfile_bytes``, then time each sender ``runs`` times."""
    runs = ctx.profile.runs
    scratch = ctx.scratch(NAME)
    be, size_target, reason = _segment_backend(ctx)
    result = PartResult(NAME, TITLE, params={"runs": runs, "backend": be.name if be else "none"})
    path, segment = _build(ctx, be, str(scratch), size_target) if be else (None, None)
    if segment is None:
        # No Segment yet: still compare the two plain paths on a file of batches' size.
        path = os.path.join(scratch, "plain.log")
        loopback.write_file(path, size_target, ctx.values(64)[0])
        result.notes.append(f"Segment.sendfile: not available: {reason}")
    assert path is not None  # the segment's file, or the plain one just written
    size = os.path.getsize(path)
    result.params["segment_bytes"] = size
    loopback.warm(path)
    methods = [m for m in METHODS if m not in ("segment", "view") or segment is not None]
    try:
        with loopback.LoopbackReader() as reader:
            for run_index in range(runs):
                for method in methods:
                    ctx.progress.step(f"{METHODS[method]}, {size / 2**20:.0f} MiB",
                                      run_index + 1, runs)
                    send = _sender(method, path, size, segment)
                    t = reader.transfer(size, send)
                    result.figure(f"{method}.throughput", UNIT_BYTES_PER_S).add(t.bytes_per_s)
                    result.figure(f"{method}.sender_cpu", "cpu s/GB").add(t.sender_cpu_s_per_gb)
                    result.figure(f"{method}.reader_cpu", "cpu s/GB").add(t.reader_cpu_s_per_gb)
    finally:
        if segment is not None:
            segment.close()
    result.tables.append(_table(ctx, result, methods, size))
    result.notes += _sentences(result, methods)
    result.charts.append({"title": "sendfile: GB/s to a loopback reader", "unit": "bytes/s",
                          "bars": {METHODS[m]: f"{m}.throughput" for m in methods}})
    result.charts.append({"title": "sendfile: sender CPU s per GB", "unit": "cpu s/GB",
                          "bars": {METHODS[m]: f"{m}.sender_cpu" for m in methods}})
    return result


def _segment_backend(ctx: BenchContext):
    reasons = []
    for name in ("native", "pure"):
        be = load_backend(name)
        try:
            be.need("Segment")
            be.need("encode_batch")
        except Unavailable as exc:
            reasons.append(str(exc))
            continue
        size = ctx.profile.sendfile_bytes
        if name == "pure":
            size = min(size, PURE_SEGMENT_BYTES_MAX)
        return be, size, ""
    return None, ctx.profile.sendfile_bytes, "; ".join(reasons)


def _build(ctx: BenchContext, be, scratch: str, size_target: int):
    """A segment of about ``size_target`` bytes: one ~4 MiB run of encoded batches appended
    repeatedly (the segment assigns the offsets), flushed, closed and reopened for reading."""
    ctx.progress.step(f"building a {size_target / 2**20:.0f} MiB segment ({be.name})")
    records = max(BATCH_RECORDS, BUILD_CHUNK_BYTES // (ctx.record_bytes + 10))
    records -= records % BATCH_RECORDS
    chunk = b"".join(segops.encode_batches(be, ctx.values(records), BATCH_RECORDS))
    path = os.path.join(scratch, "segment")
    os.mkdir(path)
    segment = segops.open_segment(be, path, create=True)
    try:
        while segment.size_bytes + len(chunk) <= size_target:
            segment.append(chunk)
        segment.flush()
    finally:
        segment.close()
    segment = segops.open_segment(be, path, create=False)
    return str(segment.log_path), segment


def _sender(method: str, path: str, size: int, segment):
    if method == "bare":
        return loopback.send_with_sendfile(path, size)
    if method == "readsend":
        return loopback.send_with_read_sendall(path, size)
    if method == "view":
        return _send_views(segment, size)

    def send(sock) -> None:
        out_fd, offset, sent_total = sock.fileno(), 0, 0
        end_offset = segment.next_offset
        while offset < end_offset:
            sent, offset = segment.sendfile(out_fd, offset, size - sent_total)
            if sent == 0:
                raise RuntimeError("Segment.sendfile sent nothing before the end")
            sent_total += sent
    return send


def _send_views(segment, size: int):
    """Whole batches as read-only mmap views (``Segment.read``), each ~1 MiB, to ``sendall``."""
    from .. import format as fmt

    def send(sock) -> None:
        offset, end_offset, sent_total = 0, segment.next_offset, 0
        while offset < end_offset:
            view = segment.read(offset, min(1 << 20, size - sent_total))
            sock.sendall(view)
            sent_total += len(view)
            # Walk the batch lengths to the last batch; its last offset + 1 is the next offset.
            position, last = 0, 0
            while position < len(view):
                last = position
                position += fmt.LOG_OVERHEAD + int.from_bytes(
                    view[position + fmt.BATCH_LENGTH_POSITION:position + fmt.LOG_OVERHEAD], "big")
            base = int.from_bytes(view[last:last + 8], "big", signed=True)
            delta = int.from_bytes(
                view[last + fmt.LAST_OFFSET_DELTA_POSITION:last + fmt.LAST_OFFSET_DELTA_POSITION + 4],
                "big")
            view.release()
            offset = base + delta + 1
    return send


def _table(ctx: BenchContext, result: PartResult, methods: list[str], size: int) -> Table:
    f = result.figures
    table = Table(
        f"{size / 2**20:.0f} MiB segment file -> loopback TCP reader process: median (min..max)",
        ["sender", "GB/s", "min..max", "sender CPU s/GB", "reader CPU s/GB", "vs bare sendfile",
         "target", "verdict"])
    for method in methods:
        thr = f[f"{method}.throughput"]
        cells: list[str | Target] = [
            fmt_gb_per_s(thr.median), f"{fmt_gb_per_s(thr.min)}..{fmt_gb_per_s(thr.max)}",
            f"{f[f'{method}.sender_cpu'].median:.3f}", f"{f[f'{method}.reader_cpu'].median:.3f}"]
        if method != "bare":
            ratio = f[f"{method}.vs_bare"] = ratio_figure(thr, f["bare.throughput"])
            cells.append(fmt_ratio(ratio))
            if method == "segment":
                target = Target("Segment.sendfile vs bare os.sendfile", ">= 0.8x bare",
                                ratio.median, 0.8)
                result.targets.append(target)
                cells += [target.goal, target]
        else:
            cells.append("1x")
        table.add(METHODS[method], *cells)
    if ctx.limit(SENDFILE_LOOPBACK):
        table.note = (f"limits part: bare sendfile {fmt_gb_per_s(ctx.limits[SENDFILE_LOOPBACK])}"
                      " GB/s on its own file.")
    return table


def _sentences(result: PartResult, methods: list[str]) -> list[str]:
    f = result.figures
    out = []
    ratio_copy = f["readsend.vs_bare"].median
    bare_cpu, copy_cpu = f["bare.sender_cpu"].median, f["readsend.sender_cpu"].median
    faster = "faster" if ratio_copy > 1 else "slower"
    out.append(
        f"read()+sendall() moved bytes {ratio_copy:.2f}x as fast as bare sendfile ({faster}) "
        f"while costing the sender {copy_cpu:.3f} vs {bare_cpu:.3f} CPU s/GB "
        f"({copy_cpu / bare_cpu:.1f}x); the reader paid {f['readsend.reader_cpu'].median:.3f} vs "
        f"{f['bare.reader_cpu'].median:.3f} CPU s/GB.")
    if "segment" in methods:
        ratio = f["segment.vs_bare"].median
        seg_cpu = f["segment.sender_cpu"].median
        keep = ("sendfile keeps its place as the read path: it uses less sender CPU per GB"
                if seg_cpu < copy_cpu else
                "sendfile does not save sender CPU here either, so the copy path deserves a look")
        out.append(f"Segment.sendfile reached {ratio:.0%} of the bare loop at {seg_cpu:.3f} "
                   f"sender CPU s/GB; {keep}.")
    if "view" in methods:
        view_cpu = f["view.sender_cpu"].median
        out.append(
            f"Handing Segment.read's mmap views to sendall (one copy, page cache -> socket) "
            f"moved {f['view.vs_bare'].median:.2f}x the bare sendfile rate at {view_cpu:.3f} "
            f"sender CPU s/GB: over loopback every byte is copied into the reader anyway, so "
            f"sendfile's saved copy does not show; on a NIC with scatter-gather it does.")
    return out
