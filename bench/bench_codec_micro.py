"""Micro-benchmark of the batch codec: native vs pure twin vs aiokafka's Cython codec.

Not a test. Prints records/s for encode and decode of 1,000-record batches of 100-byte
values (uncompressed), all in one process so the ratios are comparable on a noisy machine.

Back of the envelope: a 1,000 x 100 B batch is ~110 KB; memcpy runs at ~10 GB/s and CRC-32C
(SSE4.2, 3 streams) at ~20-30 GB/s, so the byte work is ~15 us per batch (~65 M records/s);
anything slower is per-record overhead (varints, Python objects). Making one ``bytes`` per
record has a floor near 7 M records/s on the development VM.

    PYTHONPATH=src python bench/bench_codec_micro.py [--records 1000] [--batches 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from seglog._native import codec as ncodec
from seglog.pure import codec as pcodec

try:
    from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
except ImportError:  # pragma: no cover
    DefaultRecordBatch = DefaultRecordBatchBuilder = None


def best_rates(cases: dict, repeat: int) -> dict:
    """Best records/s of each ``name -> (fn, records)`` case over ``repeat`` rounds. The cases
    run round-robin, so load from other processes hits all of them alike and the ratios
    stay meaningful on a shared machine."""
    best = {name: float("inf") for name in cases}
    for _ in range(repeat):
        for name, (fn, _records) in cases.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: cases[name][1] / best[name] for name in cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000, help="records per batch")
    parser.add_argument("--batches", type=int, default=200, help="batches per timed run")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, batches, size, repeat = args.records, args.batches, args.value_bytes, args.repeat
    total = n * batches
    rng = np.random.default_rng(1)
    matrix = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    values = [bytes(row) for row in matrix]
    flat = matrix.tobytes()
    lengths = np.full(n, size, dtype=np.int64)
    timestamp = 1_700_000_000_000
    cases: dict[str, tuple] = {}

    def run(name, fn, count=total):
        cases[name] = (fn, count)

    # --- encode -------------------------------------------------------------------------------
    def native_list():
        for _ in range(batches):
            ncodec.encode_batch(values, timestamps_ms=timestamp)

    def native_2d():
        for _ in range(batches):
            ncodec.encode_batch(matrix, timestamps_ms=timestamp)

    def native_data_lengths():
        for _ in range(batches):
            ncodec.encode_batch((flat, lengths), timestamps_ms=timestamp)

    pure_batches = max(1, batches // 50)

    def pure_list():
        for _ in range(pure_batches):
            pcodec.encode_batch(values, timestamps_ms=timestamp)

    def aiokafka_build():
        for _ in range(batches):
            builder = DefaultRecordBatchBuilder(
                magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
            for value in values:
                builder.append(0, timestamp, None, value, [])
            builder.build()

    assert ncodec.encode_batch(values, timestamps_ms=timestamp) == pcodec.encode_batch(
        values, timestamps_ms=timestamp)
    print(f"{batches} batches x {n} records x {size} B values, uncompressed; best of {repeat} "
          "round-robin rounds")
    run("native encode_batch(list of bytes)", native_list)
    run("native encode_batch(2-D uint8 array)", native_2d)
    run("native encode_batch((data, lengths))", native_data_lengths)
    run("pure encode_batch(list of bytes)", pure_list, pure_batches * n)
    if DefaultRecordBatchBuilder is not None:
        run("aiokafka DefaultRecordBatchBuilder (Cython)", aiokafka_build)

    # --- decode -------------------------------------------------------------------------------
    raw = ncodec.encode_batch(values, timestamps_ms=timestamp)
    stream = raw * batches

    def native_records():
        for batch in ncodec.iter_batches(stream):
            for record in batch.records():
                record.value

    def native_columns():
        ncodec.decode_columns(stream)

    def native_columns_per_batch():
        for batch in ncodec.iter_batches(stream):
            batch.columns()

    def pure_records():
        for batch in pcodec.iter_batches(raw * pure_batches):
            for record in batch.records():
                record.value

    def aiokafka_read():
        for offset in range(0, len(stream), len(raw)):
            batch = DefaultRecordBatch(memoryview(stream)[offset:offset + len(raw)])
            for record in batch:
                record.value

    def native_crc():
        for batch in ncodec.iter_batches(stream):
            batch.ensure_valid()

    run("native Batch.records() (Record objects)", native_records)
    run("native decode_columns(all batches)", native_columns)
    run("native Batch.columns() per batch", native_columns_per_batch)
    run("native iter_batches + ensure_valid (CRC)", native_crc)
    run("pure Batch.records()", pure_records, pure_batches * n)
    if DefaultRecordBatch is not None:
        run("aiokafka DefaultRecordBatch iteration", aiokafka_read)

    rates = best_rates(cases, repeat)
    for name, rate in rates.items():
        print(f"{name:<44} {rate / 1e6:9.2f} M records/s")
    print("ratios (targets in brackets):")
    if DefaultRecordBatchBuilder is not None:
        aio_e, aio_d = rates["aiokafka DefaultRecordBatchBuilder (Cython)"], rates[
            "aiokafka DefaultRecordBatch iteration"]
        print(f"  native list encode / aiokafka build   {rates['native encode_batch(list of bytes)'] / aio_e:6.2f}x  [>= 2]")
        print(f"  native 2-D encode / aiokafka build     {rates['native encode_batch(2-D uint8 array)'] / aio_e:6.2f}x")
        print(f"  native decode_columns / aiokafka read  {rates['native decode_columns(all batches)'] / aio_d:6.2f}x  [>= 10]")
        print(f"  native records() / aiokafka read       {rates['native Batch.records() (Record objects)'] / aio_d:6.2f}x  [>= 1.2]")
    print(f"  native list encode / pure encode       {rates['native encode_batch(list of bytes)'] / rates['pure encode_batch(list of bytes)']:6.1f}x  [>= 20]")
    print(f"  native records() / pure records()      {rates['native Batch.records() (Record objects)'] / rates['pure Batch.records()']:6.1f}x")
    print(f"(pid {os.getpid()}; compare ratios within one run)")


if __name__ == "__main__":
    main()
