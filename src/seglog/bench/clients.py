"""Part ``clients``: the embedded Producer and Consumer against the core under them.

What the issue (13) asks: ``Producer.send`` >= 2 M records/s keyed and keyless and >= 2x
confluent-kafka's ``produce()`` *call rate*; ``Consumer.poll`` >= 8 M records/s and >= 2x
confluent-kafka's consume rate; ``poll_columns`` >= 50 M records/s; end to end (send +
flush + poll every record) within 2x of the core doing the same (``Log.append_batch`` of
1,000-record batches + ``Log.records()``). Issue 27 adds the consumer against the core under
it, side by side on the same filled store in the same run: ``Consumer.poll`` >= 0.75x the
core's scan to record objects (``Log.read`` of 8 MiB + ``iter_batches`` + ``records()``,
keyed and keyless), ``poll_columns`` >= 0.5x the core's decode to columns (the same reads +
``decode_columns``); CRCs checked on both sides.

The back of the envelope: the core appends ~100-byte records at some 10-20 M records/s and
decodes them at ~10 M records/s into objects (``twins`` part), so a client that does one C
call per record and no per-record Python work above it can reach a few M records/s; every
Python-level call (argument checks, a future object, a lock) costs ~50-100 ns each.

confluent-kafka's ``produce()`` is measured with no broker (``bootstrap.servers`` at a closed
port, ``queue.buffering.max.messages`` large): that is librdkafka's enqueue, the **call
rate** of ``produce()``, not a delivery rate. Its ``consume(num_messages=...)`` rate is taken
against ``python -m seglog serve`` on a free 127.0.0.1 port when the broker starts.

Every operation that writes a new log or fills fresh memory runs once untimed right before
it is timed (``PRIMED``), so that each is timed on memory in the same state (see there).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from .data import Unavailable
from .runner import BATCH_RECORDS, BenchContext
from .stats import UNIT_RECORDS_PER_S, Figure, Stopwatch, fmt_rate, fmt_ratio, ratio_figure
from .table import PartResult, Table, Target

NAME = "clients"
TITLE = "the embedded Producer and Consumer against the core under them"

#: Partitions of the benchmark topic (records spread by key over them).
PARTITIONS = 6
#: Records per poll (the issue's figure).
POLL_RECORDS = 5_000
#: Distinct keys in the keyed send (Kafka users key by entity ids).
KEYS = 10_000

#: Operations that write a new log or fill fresh memory (librdkafka's queue copies every
#: record), each run once untimed right before it is timed. On a VM with free page reporting
#: (virtio-balloon; this bench machine) memory the guest freed more than ~2 s ago is back with
#: the host, and the first touch of each such page faults on the host inside the guest
#: instruction that touched it (the kernel's page-cache copy of a write, the zeroing of new
#: anonymous memory): some 300 ms of system time per million 100-byte records written.
#: Unprimed, that cost fell on whichever writer came first after the part's slower
#: operations (confluent-kafka's): send_keyed, 2.5 M/s against send_keyless' 6.4 M/s in the
#: 2026-12-05 full run, and the reverse with the two swapped. Primed, every one of them is
#: timed on pages its own untimed run just freed, so the rows compare the clients and the
#: core, not the host's page faults (bench/results-issue27-keyed.md, bench/send_pages.py).
PRIMED = frozenset({"send_keyed", "send_keyless", "end_to_end", "core_end_to_end",
                    "confluent_produce"})

OPERATIONS = {
    "send_keyed": "Producer.send, keyed (records/s)",
    "send_keyless": "Producer.send, keyless (records/s)",
    "poll": f"Consumer.poll(max_records={POLL_RECORDS}) to record objects (records/s)",
    "core_scan": "core: Log.read + iter_batches + records(), same store (records/s)",
    "poll_columns": "Consumer.poll_columns (records/s)",
    "core_columns": "core: Log.read + decode_columns, same store (records/s)",
    "poll_keyless": f"Consumer.poll(max_records={POLL_RECORDS}), keyless records (records/s)",
    "core_scan_keyless": "core: Log.read + iter_batches + records(), keyless (records/s)",
    "end_to_end": "send + flush + poll, every record (records/s)",
    "core_end_to_end": "Log.append_batch (1,000) + Log.records() (records/s)",
    "confluent_produce": "confluent-kafka Producer.produce() call rate, no broker",
    "confluent_consume": "confluent-kafka Consumer.consume() from seglog serve",
}


def run(ctx: BenchContext) -> PartResult:
    """Time each operation ``runs`` times on the native backend and build the table."""
    runs = ctx.profile.runs
    count = ctx.profile.records
    e2e_count = min(1_000_000, 2 * count)
    result = PartResult(NAME, TITLE, params={"records": count, "end_to_end_records": e2e_count,
                                             "runs": runs, "record_bytes": ctx.record_bytes,
                                             "partitions": PARTITIONS})
    values = ctx.values(max(count, e2e_count))
    keys = [b"key-%d" % (i % KEYS) for i in range(max(count, e2e_count))]
    skipped: dict[str, str] = {}
    try:
        for run_index in range(runs):
            for op, fn in _OPS.items():
                if op in skipped:
                    continue
                ctx.progress.step(op, run_index + 1, runs)
                n = e2e_count if op in ("end_to_end", "core_end_to_end") else count
                try:
                    if op in PRIMED:
                        fn(ctx, values[:n], keys[:n])  # untimed: see PRIMED
                    rate = fn(ctx, values[:n], keys[:n])
                except Unavailable as exc:
                    skipped[op] = str(exc)
                    continue
                # An operation measured beside the core returns both rates, by name.
                rates = rate if isinstance(rate, dict) else {op: rate}
                for name, value in rates.items():
                    result.figure(name, UNIT_RECORDS_PER_S).add(value)
    finally:
        served = ctx.cache.pop(_SERVE_CACHE_KEY, None)
        if served is not None:
            _stop_serve(served)
    result.tables.append(_rates_table(result))
    _ratio_targets(result)
    for op, reason in sorted(skipped.items()):
        result.notes.append(f"{op}: not available: {reason}")
    result.notes.append("confluent_produce is the call rate of produce() into librdkafka's "
                        "queue with no broker reachable, not a delivery rate.")
    result.notes.append(f"{', '.join(sorted(PRIMED))}: each timed right after an untimed run "
                        "of itself (on a VM with free page reporting, memory freed seconds "
                        "earlier costs host page faults; see seglog.bench.clients.PRIMED).")
    return result


#: The records/s goals of issue 13, by operation.
RATE_GOALS = {"send_keyed": 2e6, "send_keyless": 2e6, "poll": 8e6, "poll_columns": 50e6}


def _rates_table(result: PartResult) -> Table:
    """records/s per operation measured, with the target and verdict where there is one
    (an operation with no target of its own, a reference for the ratios, reads 'measured')."""
    rate_targets = _rate_targets(result)
    table = Table("clients: records/s (median of runs)",
                  ["operation", "records/s", "target", "verdict"])
    for op, label in OPERATIONS.items():
        if op in result.figures:
            target = rate_targets.get(op)
            table.add(label, fmt_rate(result.figures[op]), target.goal if target else "-",
                      target if target else "measured")
    return table


def _rate_targets(result: PartResult) -> dict[str, Target]:
    """The records/s targets of the operations measured, by operation (also appended to
    ``result.targets``)."""
    figures = result.figures
    targets = {}
    for op, threshold in RATE_GOALS.items():
        if op in figures:
            target = Target(OPERATIONS[op], f">= {threshold / 1e6:g} M/s",
                            figures[op].median, threshold)
            result.targets.append(target)
            targets[op] = target
    return targets


def _ratio_targets(result: PartResult) -> None:
    """The same-run ratio targets, as a table with a verdict per row."""
    figures = result.figures
    ratios = Table("clients: ratios (per run, same run)", ["ratio", "median", "goal", "verdict"])
    for num, den, goal in (("send_keyed", "confluent_produce", 2.0),
                           ("send_keyless", "confluent_produce", 2.0),
                           ("poll", "confluent_consume", 2.0),
                           ("poll", "core_scan", 0.75),
                           ("poll_keyless", "core_scan_keyless", 0.75),
                           ("poll_columns", "core_columns", 0.5),
                           ("end_to_end", "core_end_to_end", 0.5)):
        if num in figures and den in figures and \
                len(figures[num].values) == len(figures[den].values):
            ratio = ratio_figure(figures[num], figures[den])
            result.figures[f"{num}/{den}"] = ratio
            target = Target(f"{num} / {den}", f">= {goal:g}x", ratio.median, goal)
            result.targets.append(target)
            ratios.add(f"{num} / {den}", fmt_ratio(ratio), target.goal, target)
    result.tables.append(ratios)


# --- operations (each returns records/s of one run) --------------------------------------------


def _store(ctx: BenchContext):
    from ..store import Store
    store = Store(str(ctx.scratch(NAME)))
    store.create_topic("bench", partitions=PARTITIONS)
    return store


def _close(store) -> None:
    import shutil
    path = store.path if hasattr(store, "path") else None
    store.close()
    if path is not None:
        shutil.rmtree(str(path), ignore_errors=True)


def _send(ctx: BenchContext, values: list, keys: list | None) -> float:
    store = _store(ctx)
    try:
        producer = store.producer(linger_ms=1000, batch_size_bytes=1 << 20)
        send = producer.send
        with Stopwatch() as watch:
            if keys is None:
                for v in values:
                    send("bench", v)
            else:
                for v, k in zip(values, keys):
                    send("bench", v, k)
            producer.flush()
        producer.close()
    finally:
        _close(store)
    return len(values) / watch.wall_s


def _send_keyed(ctx, values, keys):
    return _send(ctx, values, keys)


def _send_keyless(ctx, values, keys):
    return _send(ctx, values, None)


def _filled_store(ctx: BenchContext, values: list, keys: list | None):
    store = _store(ctx)
    producer = store.producer(linger_ms=1000, batch_size_bytes=1 << 20)
    for i in range(0, len(values), BATCH_RECORDS):
        producer.send_batch("bench", values[i:i + BATCH_RECORDS],
                            None if keys is None else keys[i:i + BATCH_RECORDS])
    producer.close()
    return store


def _poll_rate(store, count: int, *, columns: bool = False, group: str = "bench") -> float:
    """Records/s of one consumer reading every record of the filled store from the start."""
    consumer = store.consumer(group_id=group, topics=["bench"], auto_offset_reset="earliest",
                              max_partition_fetch_bytes=READ_BYTES)
    consumer.assignment()
    seen = 0
    with Stopwatch() as watch:
        while seen < count:
            if columns:
                got = consumer.poll_columns(max_records=1 << 20)
                seen += sum(len(c) for c in got.values())
            else:
                seen += len(consumer.poll(max_records=POLL_RECORDS))
    consumer.close()
    return count / watch.wall_s


#: Bytes per read of the core's side (the consumer's ``max_partition_fetch_bytes`` here).
READ_BYTES = 8 << 20


def _core_rate(store, count: int, *, columns: bool = False) -> float:
    """Records/s of the core under the consumer reading the same store: each partition's
    Log read ``READ_BYTES`` at a time, every batch checked (CRC32C, increasing offsets) and
    decoded to record objects (each value touched) or to columns."""
    logs = [store.topic("bench").log(p) for p in range(PARTITIONS)]
    seen = 0
    with Stopwatch() as watch:
        for log in logs:
            backend = log.backend
            offset, end = log.start_offset, log.end_offset
            while offset < end:
                result = log.read(offset, READ_BYTES)
                if columns:
                    seen += len(backend.decode_columns(result.buffer, check_crcs=True,
                                                       check_offsets=True))
                else:
                    for batch in backend.iter_batches(result.buffer, check_offsets=True):
                        for record in batch.records(check_crcs=True):
                            record.value
                            seen += 1
                offset = result.next_offset
    assert seen == count, f"core read {seen} of {count}"
    return count / watch.wall_s


def _poll_beside_core(ctx, values, keys) -> dict[str, float]:
    """poll and poll_columns against the core on one filled store, alternating (A/B)."""
    store = _filled_store(ctx, values, keys)
    try:
        n = len(values)
        # Untimed first: the segments' first reads in this process fault their pages in
        # (the mapping stays), which would count against whichever side ran first.
        _core_rate(store, n, columns=True)
        return {"core_scan": _core_rate(store, n), "poll": _poll_rate(store, n, group="a"),
                "core_columns": _core_rate(store, n, columns=True),
                "poll_columns": _poll_rate(store, n, columns=True, group="b")}
    finally:
        _close(store)


def _poll_keyless_beside_core(ctx, values, keys) -> dict[str, float]:
    store = _filled_store(ctx, values, None)
    try:
        n = len(values)
        _core_rate(store, n, columns=True)  # untimed, as above
        return {"core_scan_keyless": _core_rate(store, n),
                "poll_keyless": _poll_rate(store, n, group="a")}
    finally:
        _close(store)


def _end_to_end(ctx, values, keys):
    store = _store(ctx)
    try:
        producer = store.producer(linger_ms=1000, batch_size_bytes=1 << 20)
        consumer = store.consumer(group_id="bench", topics=["bench"], auto_offset_reset="earliest",
                                  max_partition_fetch_bytes=8 << 20)
        consumer.assignment()
        send = producer.send
        seen = 0
        with Stopwatch() as watch:
            for v, k in zip(values, keys):
                send("bench", v, k)
            producer.flush()
            while seen < len(values):
                seen += len(consumer.poll(max_records=POLL_RECORDS))
        consumer.close()
        producer.close()
    finally:
        _close(store)
    return len(values) / watch.wall_s


def _core_end_to_end(ctx, values, keys):
    from ..storage.log import Log
    path = ctx.scratch(NAME) / "core-0"
    log = Log.open(str(path))
    try:
        seen = 0
        with Stopwatch() as watch:
            for i in range(0, len(values), BATCH_RECORDS):
                log.append_batch(values[i:i + BATCH_RECORDS], keys=keys[i:i + BATCH_RECORDS])
            for _record in log.records(0):
                seen += 1
        assert seen == len(values), f"read {seen} of {len(values)}"
    finally:
        log.close()
        import shutil
        shutil.rmtree(str(path.parent), ignore_errors=True)
    return len(values) / watch.wall_s


def _confluent_produce(ctx, values, keys):
    try:
        import confluent_kafka
    except ImportError as exc:
        raise Unavailable(f"confluent-kafka is not installed ({exc})") from None
    port = _free_port()  # bound then closed: nothing listens there
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{port}",
        "queue.buffering.max.messages": 10_000_000,
        "queue.buffering.max.kbytes": 2_000_000,
        "linger.ms": 1000, "log_level": 0,
        "logger": _quiet_logger(),
    })
    produce = producer.produce
    with Stopwatch() as watch:
        for v, k in zip(values, keys):
            produce("bench", v, k)
    producer.purge()
    producer.flush(0)
    return len(values) / watch.wall_s


def _quiet_logger():
    import logging
    logger = logging.getLogger("seglog.bench.clients.librdkafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: ctx.cache key of quick mode's one seglog serve for every confluent_consume run.
_SERVE_CACHE_KEY = "clients.serve"


def _confluent_consume(ctx, values, keys):
    try:
        import confluent_kafka
    except ImportError as exc:
        raise Unavailable(f"confluent-kafka is not installed ({exc})") from None
    quick = ctx.config.mode == "quick"
    served = ctx.cache.get(_SERVE_CACHE_KEY) if quick else None
    if served is None:
        served = _serve_filled(ctx, values, keys)
        if quick:
            # Quick mode serves the same records to every run from one broker (a start of
            # `seglog serve` is 1-2 s of each run's wall time); run() stops it at the end.
            ctx.cache[_SERVE_CACHE_KEY] = served
    server, port, data_dir = served
    try:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20,
            # librdkafka's default sleeps 1 s whenever its prefetch queue is full, which the
            # rate would count (see the broker part's _client_consume).
            "fetch.queue.backoff.ms": 10,
            "logger": _quiet_logger()})
        if quick:
            # Quick mode assigns the partitions instead of joining a group: the join (the
            # broker's group.initial.rebalance.delay.ms, 3 s) is not timed either way, but
            # it cost 3 s of each run's wall time; it reads from the start each run.
            consumer.assign([confluent_kafka.TopicPartition("bench", partition,
                                                            confluent_kafka.OFFSET_BEGINNING)
                             for partition in range(PARTITIONS)])
        else:
            consumer.subscribe(["bench"])
        seen = timed = 0
        started = None
        deadline = time.monotonic() + 120
        while seen < len(values) and time.monotonic() < deadline:
            got = consumer.consume(num_messages=POLL_RECORDS, timeout=1.0)
            seen += len(got)
            if got and started is None:
                # Timed from the first messages on, so the group join is not counted.
                started = time.perf_counter()
            elif started is not None:
                timed += len(got)
        elapsed_s = time.perf_counter() - started if started else 0.0
        consumer.close()
        if seen < len(values) or not elapsed_s or not timed:
            raise Unavailable(f"confluent-kafka read {seen} of {len(values)} within 120 s")
        return timed / elapsed_s
    finally:
        if not quick:
            _stop_serve(served)


def _serve_filled(ctx, values, keys):
    """``(process, port, data_dir)``: ``seglog serve`` on a free port over a data dir
    filled in-process with ``values`` (same batches as _poll)."""
    data_dir = ctx.scratch(NAME)
    store_dir = data_dir / "serve"
    from ..store import Store
    store = Store(str(store_dir))
    store.create_topic("bench", partitions=PARTITIONS)
    producer = store.producer(linger_ms=1000, batch_size_bytes=1 << 20)
    for i in range(0, len(values), BATCH_RECORDS):
        producer.send_batch("bench", values[i:i + BATCH_RECORDS], keys[i:i + BATCH_RECORDS])
    producer.close()
    store.close()
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    server = subprocess.Popen(
        [sys.executable, "-m", "seglog", "serve", "--data-dir", str(store_dir),
         "--listen", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=env)
    served = (server, port, data_dir)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return served
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                _stop_serve(served)
                raise Unavailable("seglog serve did not start") from None
            time.sleep(0.1)


def _stop_serve(served) -> None:
    """Stop the broker of :func:`_serve_filled` (SIGTERM, then kill) and remove its data."""
    server, _, data_dir = served
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    import shutil
    shutil.rmtree(str(data_dir), ignore_errors=True)


_OPS = {"send_keyed": _send_keyed, "send_keyless": _send_keyless,
        "poll": _poll_beside_core, "poll_keyless": _poll_keyless_beside_core,
        "end_to_end": _end_to_end,
        "core_end_to_end": _core_end_to_end, "confluent_produce": _confluent_produce,
        "confluent_consume": _confluent_consume}

__all__ = ["NAME", "TITLE", "run", "Figure"]
