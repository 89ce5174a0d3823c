"""Part ``share``: a work queue on one partition, records acknowledged per second.

What issue 25 asks: the embedded :class:`~seglog.ShareConsumer` (KIP-932 share group: each
record acquired by one worker, acknowledged one by one) with 1, 4 and 16 worker threads on
one partition, beside a consumer-group baseline (seglog's embedded Consumer in a group on the
same data: one partition has one owner, so one worker; "acknowledged" is the committed offset
moving past it), the share consumer again in implicit mode (each poll accepts the last
poll's records: no call per record), and the queues a Python user picks today, in one run:

* ``persist-queue``'s ``SQLiteAckQueue`` (``get`` then ``ack`` per item; its defaults: WAL,
  a commit per call, ``multithreading=True`` so threads share it);
* a hand-rolled sqlite3 queue (stdlib): one connection per worker, WAL,
  ``synchronous=NORMAL``; a worker claims a job with ``BEGIN IMMEDIATE; SELECT ... WHERE
  status=0 LIMIT 1; UPDATE ... SET status=1; COMMIT`` and acknowledges it with ``UPDATE ...
  SET status=2``.

Every queue is filled first (not timed), then the workers drain it; the rate is records
acknowledged over the wall time from the workers' start to the last acknowledgement. Workers
do no work of their own: what is measured is the queue's cost per record. Durability is not
equal, and the notes say so: seglog's acknowledgements reach ``__share_group_state`` in the
page cache (as Kafka's, which fsyncs on its flush schedule), the sqlite queues commit each
claim and each acknowledgement (persist-queue syncs each commit, sqlite's default in WAL
mode; the hand-rolled one uses ``synchronous=NORMAL``, no sync per commit).
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

from .data import Unavailable
from .runner import BATCH_RECORDS, BenchContext
from .stats import UNIT_RECORDS_PER_S, Figure, fmt_rate, fmt_ratio, ratio_figure
from .table import PartResult, Table

NAME = "share"
TITLE = "a work queue on one partition: share consumer vs consumer group vs sqlite queues"

#: Worker threads measured (the issue's 1, 4 and 16).
WORKERS = (1, 4, 16)
#: Records of the seglog queues per run (at most the profile's records).
RECORDS_MAX = 100_000
#: Records of the sqlite-backed queues per run: they commit per record, so fewer keep the
#: part short; the rate is per second either way.
PEER_RECORDS_MAX = 5_000
#: Their least count per run (quick mode's is smaller: see run()).
PEER_RECORDS_MIN = 500
PEER_RECORDS_MIN_QUICK = 200
#: Longest a drain may take before the run is reported unavailable.
DRAIN_TIMEOUT_S = 300.0

QUEUES = {
    "share": "seglog ShareConsumer (explicit ACCEPT per record, commit_sync per poll)",
    "share_implicit": "seglog ShareConsumer, implicit mode (each poll accepts the last)",
    "group": "seglog Consumer in a group (poll + commit per poll; 1 owner per partition)",
    "persist_queue": "persist-queue SQLiteAckQueue (get + ack per item)",
    "sqlite": "sqlite3 queue (SELECT ... LIMIT 1 + UPDATE status per claim and per ack)",
}


def run(ctx: BenchContext) -> PartResult:
    """Time each queue with each worker count ``runs`` times; build the table."""
    runs = ctx.profile.runs
    count = min(ctx.profile.records, RECORDS_MAX)
    # Quick mode gives the sqlite queues 200 records: persist-queue syncs every put, get and
    # ack, which took 3 s per worker count and round on a loaded VM at 500.
    peer_floor = PEER_RECORDS_MIN_QUICK if ctx.config.mode == "quick" else PEER_RECORDS_MIN
    peer_count = min(max(count // 100, peer_floor), PEER_RECORDS_MAX)
    if ctx.config.records is not None:
        count = peer_count = ctx.config.records
    result = PartResult(NAME, TITLE, params={"records": count, "peer_records": peer_count,
                                             "runs": runs, "record_bytes": ctx.record_bytes,
                                             "workers": list(WORKERS)})
    values = ctx.values(count)
    skipped: dict[str, str] = {}
    for run_index in range(runs):
        for queue, fn in _QUEUES.items():
            for workers in (1,) if queue == "group" else WORKERS:
                key = f"{queue}_{workers}"
                if queue in skipped:
                    continue
                ctx.progress.step(key, run_index + 1, runs)
                n = count if queue.startswith("share") or queue == "group" else peer_count
                try:
                    rate = fn(ctx, values[:n], workers)
                except Unavailable as exc:
                    skipped[queue] = str(exc)
                    continue
                result.figure(key, UNIT_RECORDS_PER_S).add(rate)
    table = Table("share: records acknowledged per second (median (min..max) of runs)",
                  ["queue", "1 worker", "4 workers", "16 workers"])
    for queue, label in QUEUES.items():
        cells = []
        for workers in WORKERS:
            figure = result.figures.get(f"{queue}_{workers}")
            cells.append(fmt_rate(figure) if figure is not None else "-")
        table.add(label, *cells)
    result.tables.append(table)
    _ratios(result)
    for queue, reason in sorted(skipped.items()):
        result.notes.append(f"{queue}: not available: {reason}")
    result.notes.append(
        "Durability differs: seglog's acknowledgements reach __share_group_state in the page "
        "cache (no fsync per acknowledgement, as Kafka); persist-queue commits and syncs each "
        "get and ack (sqlite's default); the sqlite3 queue commits each claim and ack in WAL "
        "mode with synchronous=NORMAL (no sync per commit).")
    result.notes.append("A consumer group gives one partition to one member: 4 or 16 members "
                        "on one partition leave all but one idle, so only 1 worker is shown.")
    return result


def _ratios(result: PartResult) -> None:
    figures = result.figures
    ratios = Table("share: seglog ShareConsumer over the others (per run, same run)",
                   ["ratio", "median (min..max)"])
    for workers in WORKERS:
        for other in ("persist_queue", "sqlite", "group"):
            num = figures.get(f"share_{workers}")
            den = figures.get(f"{other}_{1 if other == 'group' else workers}")
            if num is None or den is None or len(num.values) != len(den.values):
                continue
            ratio = ratio_figure(num, den)
            figures[f"share_{workers}/{other}"] = ratio
            ratios.add(f"share, {workers} workers / {other}", fmt_ratio(ratio))
    result.tables.append(ratios)


# --- the queues (each returns records acknowledged per second of one run) ------------------


def _drain(workers: int, work: Callable[[int, Callable[[int], None], threading.Event], None],
           total: int) -> float:
    """Run ``work(index, acked, stop)`` in ``workers`` threads until ``total`` records are
    acknowledged (``acked(n)`` counts them); returns records per second."""
    lock = threading.Lock()
    done = threading.Event()
    stop = threading.Event()
    count = [0]
    finished_at = [0.0]
    errors: list[BaseException] = []

    def acked(n: int) -> None:
        with lock:
            count[0] += n
            if count[0] >= total and not done.is_set():
                finished_at[0] = time.perf_counter()
                done.set()

    def body(index: int) -> None:
        try:
            work(index, acked, stop)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(workers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    done.wait(DRAIN_TIMEOUT_S)
    stop.set()
    for thread in threads:
        thread.join(30)
    if errors:
        raise errors[0]
    if count[0] < total:
        raise Unavailable(f"{count[0]} of {total} acknowledged within {DRAIN_TIMEOUT_S:.0f} s")
    return total / (finished_at[0] - started)


def _store(ctx: BenchContext):
    from ..store import Store
    path = ctx.scratch(NAME) / "store"
    store = Store(str(path), offsets_topic_partitions=1, transaction_state_partitions=1)
    store.create_topic("jobs", partitions=1)
    return store


def _fill(store, values: list) -> None:
    log = store.log(("jobs", 0))
    for i in range(0, len(values), BATCH_RECORDS):
        log.append_batch(values[i:i + BATCH_RECORDS])


def _share(ctx: BenchContext, values: list, workers: int, *, mode: str = "explicit") -> float:
    from ..clients.share_consumer import ShareConsumer
    store = _store(ctx)
    store.share_groups().alter_group_config("bench", {"share.auto.offset.reset": "earliest"})
    consumers = []
    for _ in range(workers):
        consumer = ShareConsumer(store, "bench", share_acknowledgement_mode=mode)
        consumer.subscribe(["jobs"])
        consumers.append(consumer)
    explicit = mode == "explicit"
    # Not timed: the first poll loads the share-partition (and makes __share_group_state),
    # as the consumer group's first assignment makes __consumer_offsets below.
    consumers[0].poll(0)
    _fill(store, values)

    def work(index: int, acked: Callable[[int], None], stop: threading.Event) -> None:
        consumer = consumers[index]
        acknowledge = consumer.acknowledge
        while not stop.is_set():
            records = consumer.poll(100)
            if explicit:
                for record in records:
                    acknowledge(record)
            consumer.commit_sync()  # implicit mode: accepts the poll's records
            if records:
                acked(len(records))

    try:
        return _drain(workers, work, len(values))
    finally:
        for consumer in consumers:
            consumer.close()
        _close(store)


def _group(ctx: BenchContext, values: list, workers: int) -> float:
    store = _store(ctx)
    consumers = [store.consumer("bench", ["jobs"], auto_offset_reset="earliest")
                 for _ in range(workers)]
    consumers[0].assignment()
    consumers[0].commit({("jobs", 0): 0})  # not timed: makes __consumer_offsets
    _fill(store, values)

    def work(index: int, acked: Callable[[int], None], stop: threading.Event) -> None:
        consumer = consumers[index]
        while not stop.is_set():
            records = consumer.poll(timeout_ms=100)
            if records:
                consumer.commit()
                acked(len(records))

    try:
        return _drain(workers, work, len(values))
    finally:
        for consumer in consumers:
            consumer.close()
        _close(store)


def _close(store) -> None:
    path = Path(store.path)
    store.close()
    shutil.rmtree(path.parent, ignore_errors=True)  # the part's scratch directory


def _persist_queue(ctx: BenchContext, values: list, workers: int) -> float:
    try:
        import persistqueue
    except ImportError as exc:
        raise Unavailable(f"persist-queue is not installed ({exc}; pip install "
                          f"'seglog[bench]')") from None
    base = ctx.scratch(NAME)
    path = base / "persist-queue"
    queue = persistqueue.SQLiteAckQueue(str(path), multithreading=True, auto_commit=True)
    for value in values:
        queue.put(value)

    def work(_index: int, acked: Callable[[int], None], stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                item = queue.get(block=True, timeout=0.1)
            except persistqueue.Empty:
                continue
            queue.ack(item)
            acked(1)

    try:
        return _drain(workers, work, len(values))
    finally:
        queue.close()
        shutil.rmtree(base, ignore_errors=True)


def _sqlite_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=60, isolation_level=None,
                           check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _sqlite(ctx: BenchContext, values: list, workers: int) -> float:
    directory = ctx.scratch(NAME)
    path = directory / "queue.db"
    conn = _sqlite_connect(path)
    conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload BLOB, status INTEGER)")
    conn.execute("CREATE INDEX jobs_status ON jobs (status, id)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO jobs (payload, status) VALUES (?, 0)",
                     ((v,) for v in values))
    conn.execute("COMMIT")
    conn.close()

    def work(_index: int, acked: Callable[[int], None], stop: threading.Event) -> None:
        db = _sqlite_connect(path)
        try:
            while not stop.is_set():
                db.execute("BEGIN IMMEDIATE")
                row = db.execute(
                    "SELECT id, payload FROM jobs WHERE status = 0 ORDER BY id LIMIT 1"
                ).fetchone()
                if row is None:
                    db.execute("COMMIT")
                    time.sleep(0.01)
                    continue
                db.execute("UPDATE jobs SET status = 1 WHERE id = ?", (row[0],))
                db.execute("COMMIT")
                db.execute("UPDATE jobs SET status = 2 WHERE id = ?", (row[0],))
                acked(1)
        finally:
            db.close()

    try:
        return _drain(workers, work, len(values))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _share_implicit(ctx: BenchContext, values: list, workers: int) -> float:
    return _share(ctx, values, workers, mode="implicit")


_QUEUES = {"share": _share, "share_implicit": _share_implicit, "group": _group, "persist_queue": _persist_queue,
           "sqlite": _sqlite}

__all__ = ["NAME", "TITLE", "run", "Figure"]
