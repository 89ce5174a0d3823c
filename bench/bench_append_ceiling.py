"""Durable append against the write ceiling, A/B alternating in one process (issue 27).

Four writers put the same number of file bytes on the same disk, in rotating order each round:

* ``ceiling``: 1 MiB ``os.write`` calls from a page-aligned buffer, then one ``fsync`` (the
  limits part's write ceiling);
* ``ceiling_sync1m``: the same, with an ``fdatasync`` after every 1 MiB write;
* ``append``: seglog's native Segment through ``segops.append_values`` (records encoded in
  batches of 1,000, appended about 1 MiB per ``Segment.append`` call as a list of batches),
  one ``flush`` (fdatasync) at the end (the peers part's "(a) append + one sync");
* ``append_sync1m``: the same with a ``flush`` as soon as 1 MiB or more was appended since the
  last one (one sync per 1 MiB, the issue's shape);
* ``append_per_batch`` / ``append_per_batch_sync1m``: the same two with one ``Segment.append``
  per 1,000-record batch (how the bench appended before issue 27);
* ``append_encoded`` / ``append_encoded_sync1m``: the same batches encoded once before the
  rounds, appended about 1 MiB per ``Segment.append`` with the same syncs: the segment's own
  write path (every batch's CRC still checked) without the encoding, so that the gap between
  ``append`` and the ceiling splits into the encode and the rest;
* ``ceiling_fresh`` / ``ceiling_fresh_sync1m``: the ceiling's loop writing those encoded
  batches' bytes, joined into 1 MiB chunks before the rounds (55 MB, far more than the
  caches), instead of one hot buffer: what writing data that was made earlier costs, so that
  ``append_encoded`` against it is the segment's own overhead on the same memory.

Each round also times the encode alone (no file), in ms per MiB of file: ``encode_cold``
encodes the values as ``append`` does (each value read once, from memory the caches lost),
``encode_hot`` encodes the first 1,000 values again and again (the same work on values the
caches hold): the difference is the memory, not the encoder.

Rates are file bytes per second (what the disk is given); the append's record rate is the same
figure divided by the file bytes per record. Ratios are taken per round.

    PYTHONPATH=src python bench/bench_append_ceiling.py --records 500000 --rounds 9
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import tempfile
import time

from seglog.bench import segops
from seglog.bench.data import load_backend, make_values

MIB = 1 << 20


def ceiling(path: str, total: int, sync_every_mib: bool) -> float:
    """Seconds for ``total`` bytes in 1 MiB aligned writes of one hot buffer, fsync at the end
    or an fdatasync per write."""
    buf = mmap.mmap(-1, MIB)
    buf.write(b"x" * MIB)
    chunks = [memoryview(buf)] * (total // MIB)
    try:
        if total % MIB:
            chunks.append(memoryview(buf)[:total % MIB])
        return write_chunks(path, chunks, sync_every_mib)
    finally:
        chunks.clear()  # the views go before the buffer can close
        buf.close()


def ceiling_fresh(path: str, chunks: list[bytes], sync_every_mib: bool) -> float:
    """Seconds to write ``chunks`` (about 1 MiB each, made before) as :func:`ceiling` writes
    its one buffer."""
    return write_chunks(path, chunks, sync_every_mib)


def write_chunks(path: str, chunks: list, sync_every_mib: bool) -> float:
    """Seconds to write ``chunks`` to a new file at ``path``: fsync at the end, or an
    fdatasync after every chunk too."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
            if sync_every_mib:
                os.fdatasync(fd)
        os.fsync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def encode_seconds(be, values: list[bytes], hot: bool) -> float:
    """Seconds to encode ``values`` in 1,000-record batches as :func:`append` does, with no
    file; ``hot``: the first 1,000 values every time, the same number of batches."""
    encode = be.need("encode_batch")
    t0 = time.perf_counter()
    for i in range(0, len(values), 1000):
        start = 0 if hot else i  # the same slice and encode calls, on cached or cold values
        encode(values[start:start + 1000], base_offset=i)
    return time.perf_counter() - t0


def append(be, path: str, values: list[bytes], sync_bytes: int | None, group_bytes: int) -> float:
    """Seconds to encode and append ``values`` through a Segment (``segops.append_values``)."""
    os.mkdir(path)
    segment = segops.open_segment(be, path, create=True)
    try:
        t0 = time.perf_counter()
        segops.append_values(be, segment, values, 1000, None, sync_every_bytes=sync_bytes,
                             group_bytes=group_bytes)
        return time.perf_counter() - t0
    finally:
        segment.close()


def append_encoded(be, path: str, batches: list[bytes], sync_bytes: int | None) -> float:
    """Seconds to append already-encoded ``batches`` about 1 MiB per ``Segment.append`` (a list
    of batches), syncing once ``sync_bytes`` were appended since the last sync (None: only at
    the end), as :func:`segops.append_values` groups them."""
    os.mkdir(path)
    segment = segops.open_segment(be, path, create=True)
    try:
        t0 = time.perf_counter()
        group: list[bytes] = []
        group_size = since_sync = 0
        for batch in batches:
            group.append(batch)
            group_size += len(batch)
            since_sync += len(batch)
            sync = sync_bytes is not None and since_sync >= sync_bytes
            if sync or group_size >= segops.APPEND_GROUP_BYTES:
                segment.append(group)
                group, group_size = [], 0
            if sync:
                segment.flush()
                since_sync = 0
        if group:
            segment.append(group)
        segment.flush()
        return time.perf_counter() - t0
    finally:
        segment.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=os.getcwd(), help="scratch parent (a real disk)")
    parser.add_argument("--only", default="", help="comma-separated writer names")
    args = parser.parse_args()
    be = load_backend("native")
    values = make_values(args.records, args.record_bytes)
    probe = tempfile.mkdtemp(prefix="seglog-append95-", dir=args.dir)
    try:
        segment_dir = os.path.join(probe, "probe")
        append(be, segment_dir, values, None, segops.APPEND_GROUP_BYTES)
        file_bytes = os.path.getsize(os.path.join(segment_dir, "00000000000000000000.log"))
        shutil.rmtree(segment_dir)
        batches = segops.encode_batches(be, values, 1000)
        chunks = [b"".join(batches[i:i + 10]) for i in range(0, len(batches), 10)]
        writers = {
            "ceiling": lambda p: ceiling(p, file_bytes, False),
            "ceiling_sync1m": lambda p: ceiling(p, file_bytes, True),
            "append": lambda p: append(be, p, values, None, segops.APPEND_GROUP_BYTES),
            "append_sync1m": lambda p: append(be, p, values, MIB, segops.APPEND_GROUP_BYTES),
            "append_per_batch": lambda p: append(be, p, values, None, 0),
            "append_per_batch_sync1m": lambda p: append(be, p, values, MIB, 0),
            "append_encoded": lambda p: append_encoded(be, p, batches, None),
            "append_encoded_sync1m": lambda p: append_encoded(be, p, batches, MIB),
            "ceiling_fresh": lambda p: ceiling_fresh(p, chunks, False),
            "ceiling_fresh_sync1m": lambda p: ceiling_fresh(p, chunks, True),
        }
        if args.only:
            writers = {k: v for k, v in writers.items() if k in args.only.split(",")}
        names = list(writers)
        rates: dict[str, list[float]] = {name: [] for name in names}
        encode_ms_per_mib: dict[str, list[float]] = {"encode_cold": [], "encode_hot": []}
        print(f"{args.records:,} records of {args.record_bytes} B = {file_bytes:,} file bytes "
              f"({file_bytes / args.records:.2f} B/record); load {os.getloadavg()}")
        for r in range(args.rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                path = os.path.join(probe, f"{name}-{r}")
                seconds = writers[name](path)
                rates[name].append(file_bytes / seconds)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
            for name, hot in (("encode_cold", False), ("encode_hot", True))[::1 - 2 * (r % 2)]:
                encode_ms_per_mib[name].append(
                    encode_seconds(be, values, hot) * 1e3 / (file_bytes / MIB))
            print(f"round {r + 1}: " + ", ".join(
                f"{n} {rates[n][-1] / 1e6:.0f} MB/s" for n in names), flush=True)
        print(f"load after {os.getloadavg()}")

        def fmt(xs: list[float], scale: float = 1e6, unit: str = "") -> str:
            return (f"{statistics.median(xs) / scale:.3g}{unit} "
                    f"({min(xs) / scale:.3g}..{max(xs) / scale:.3g})")
        for name in names:
            print(f"{name:24s} MB/s {fmt(rates[name])}  records/s "
                  f"{fmt([x / (file_bytes / args.records) for x in rates[name]])} M")
        for name, xs in encode_ms_per_mib.items():
            print(f"{name:24s} ms per MiB of file {fmt(xs, 1.0)}")
        pairs = [("append", "ceiling"), ("append_sync1m", "ceiling_sync1m"),
                 ("append_per_batch", "ceiling"),
                 ("append_per_batch_sync1m", "ceiling_sync1m"),
                 ("append_encoded", "ceiling"), ("append_encoded_sync1m", "ceiling_sync1m"),
                 ("ceiling_fresh", "ceiling"), ("ceiling_fresh_sync1m", "ceiling_sync1m"),
                 ("append_encoded", "ceiling_fresh"),
                 ("append_encoded_sync1m", "ceiling_fresh_sync1m")]
        for a, c in pairs:
            if a in rates and c in rates:
                ratios = [x / y for x, y in zip(rates[a], rates[c])]
                print(f"{a} / {c}: {fmt(ratios, 0.01, '%')}")
    finally:
        shutil.rmtree(probe, ignore_errors=True)


if __name__ == "__main__":
    main()
