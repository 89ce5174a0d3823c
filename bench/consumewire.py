"""Side by side: a default-configured confluent-kafka consumer reading one partition of N
100-byte records from ``seglog serve`` and from Kafka 4.4 (issue 27, "consume with a
default-configured client").

Both brokers are filled identically (the bench's confluent-kafka producer settings), then
rounds alternate seglog / Kafka. Each round runs a fresh consumer subprocess with librdkafka's
defaults (only ``bootstrap.servers``, ``group.id``, ``enable.auto.commit=false``), assigned
the partition from the beginning, and reports the wall time from ``assign`` to the last record,
plus, with ``--trace``, per-Fetch facts from librdkafka's ``debug=fetch,protocol`` log:
each Fetch response's size, how many records it held and the time between request sent and
response received. The broker's CPU seconds (``/proc/<pid>/stat``) over each consume are
recorded too.

    PYTHONPATH=src python bench/consumewire.py --records 1000000 --rounds 3 [--trace]

``--seglog-b <another checkout's src>`` adds a second ``seglog serve`` importing that code to
the same rounds (a before/after of a broker change in one run); ``--only seglog`` leaves Kafka
out. The broker CPU is read both from ``/proc/<pid>/stat`` (10 ms ticks) and from the
threads' ``schedstat`` (nanoseconds).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def consume_main(args: argparse.Namespace) -> None:
    """The consumer subprocess: prints one JSON line."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    conf = {"bootstrap.servers": args.bootstrap, "group.id": f"cw-{os.getpid()}",
            "enable.auto.commit": False}
    events: list[tuple[float, str]] = []
    if args.trace:
        class _H(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                events.append((record.created, record.getMessage()))
        logger = logging.getLogger("rdkafka")
        logger.setLevel(logging.DEBUG)
        logger.addHandler(_H())
        conf.update({"debug": "fetch,protocol", "logger": logger})
    for item in args.conf or ():
        key, value = item.split("=", 1)
        conf[key] = value
    consumer = Consumer(conf)
    consumer.list_topics(args.topic, timeout=30)
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    received, first_at = 0, None
    deadline = time.monotonic() + 300
    while received < args.records and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=10_000, timeout=1.0):
            if msg.error():
                raise SystemExit(str(msg.error()))
            if first_at is None:
                first_at = time.perf_counter()
            received += 1
    t1 = time.perf_counter()
    consumer.close()
    out = {"records": received, "wall_s": t1 - t0, "first_to_last_s": t1 - (first_at or t1)}
    if args.trace:
        out["fetches"] = _fetch_facts(events)
        if args.dump:
            with open(args.dump, "w", encoding="utf-8") as f:
                for at, msg in events:
                    f.write(f"{at - events[0][0]:.4f} {msg}\n")
    print(json.dumps(out))


_SENT = re.compile(r"Sent FetchRequest \(v(\d+), (\d+) bytes")
_RECV = re.compile(r"Received FetchResponse \(v(\d+), (\d+) bytes, CorrId (\d+), rtt ([\d.]+)ms")
_BACKOFF = re.compile(r"Fetch backoff for (\d+)ms: (.*)")


def _fetch_facts(events: list[tuple[float, str]]) -> dict:
    sizes, rtts, backoffs = [], [], []
    for _at, msg in events:
        m = _RECV.search(msg)
        if m:
            sizes.append(int(m.group(2)))
            rtts.append(float(m.group(4)))
        m = _BACKOFF.search(msg)
        if m:
            backoffs.append((int(m.group(1)), m.group(2).strip()[:60]))
    def summary(xs: list) -> dict:
        if not xs:
            return {}
        xs = sorted(xs)
        return {"n": len(xs), "min": xs[0], "median": xs[len(xs) // 2], "max": xs[-1],
                "sum": sum(xs)}
    return {"response_bytes": summary(sizes), "rtt_ms": summary(rtts),
            "queue_full_backoffs": sum(1 for _, r in backoffs if "Queue full" in r), "backoff_ms_sum": sum(b for b, _ in backoffs),
            "backoff_reasons": sorted({r for _, r in backoffs})[:4],
            "first_sizes": sizes[:8], "first_rtts": rtts[:8]}


def process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_run_s(pid: int) -> float:
    """The nanosecond CPU clock of ``pid`` (``/proc/<pid>/task/*/schedstat``'s time on a CPU,
    summed over its live threads): finer than ``/proc/<pid>/stat``'s 10 ms ticks, which
    quantize a 1 M-record consume (about 0.05 s of a seglog broker) to +-20%. Threads that
    ended between two readings drop out of it, so :func:`process_cpu_s` stays beside it."""
    total_ns = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as f:
                total_ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total_ns / 1e9


def _child(bootstrap: str, topic: str, records: int, trace: bool, conf: list[str],
           dump: str = "") -> dict:
    cmd = [sys.executable, __file__, "--child", "--bootstrap", bootstrap, "--topic", topic,
           "--records", str(records)]
    if dump:
        cmd += ["--dump", dump]
    if trace:
        cmd.append("--trace")
    for item in conf:
        cmd += ["--conf", item]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _java_consume(ref, scratch: Path, bootstrap: str, topic: str, records: int) -> dict:
    """Kafka's ConsumerPerformance with the consumer's defaults (a fresh group)."""
    from seglog.bench.kafka import consumer_records_flag, parse_consumer_performance

    t0 = time.perf_counter()
    done = ref.run_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        ["--bootstrap-server", bootstrap, "--topic", topic, consumer_records_flag(ref),
         str(records), "--group", f"cwj-{time.monotonic_ns()}", "--timeout", "60000"],
        run_dir=scratch, heap_mb=512, tool=False, timeout_s=600)
    row = parse_consumer_performance(done.stdout)
    if done.returncode != 0 or row is None:
        raise RuntimeError((done.stdout + done.stderr)[-1500:])
    return {"records": int(row["data.consumed.in.nMsg"]), "fetch_s": row["fetch.time.ms"] / 1000,
            "total_s": time.perf_counter() - t0, "records_per_s": row["fetch.nMsg.sec"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic", default="cw")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--conf", action="append", help="extra consumer setting k=v")
    parser.add_argument("--only", choices=("seglog", "kafka"))
    parser.add_argument("--seglog-b", default="",
                        help="also run a second seglog serve (\"seglog-b\") importing seglog "
                             "from this PYTHONPATH (another checkout's src), in the same "
                             "rounds: a before/after of the broker in one run")
    parser.add_argument("--java", action="store_true",
                        help="also Kafka's ConsumerPerformance (defaults) each round")
    parser.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    parser.add_argument("--no-confluent", action="store_true",
                        help="skip the confluent-kafka consumer (with --java: Java only)")
    parser.add_argument("--dump", default="", help="child: write the raw debug log here")
    parser.add_argument("--dump-dir", default="", help="write each round's debug log here")
    args = parser.parse_args()
    if args.child:
        consume_main(args)
        return
    from seglog.bench.broker import SeglogServe, run_client
    from seglog.bench.kafka import KafkaBroker, find_kafka

    scratch = Path(tempfile.mkdtemp(prefix="consumewire-"))
    brokers: dict[str, object] = {}
    seglog_b = None
    seglog = SeglogServe(scratch / "seglog")
    if args.only != "kafka":
        seglog.start()
        brokers["seglog"] = seglog
    if args.seglog_b:
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = args.seglog_b
        try:
            seglog_b = SeglogServe(scratch / "seglog-b")
            seglog_b.start()
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
        brokers["seglog-b"] = seglog_b
    kafka = None
    ref, why = find_kafka()
    if ref is None and (args.java or args.only != "seglog"):
        raise SystemExit(why)
    if args.only != "seglog":
        kafka = KafkaBroker(ref, scratch / "kafka")
        kafka.format()
        kafka.start()
        brokers["kafka"] = kafka
    try:
        for name, broker in brokers.items():
            out = run_client("produce", broker.bootstrap, args.topic, records=args.records,
                             record_bytes=100, acks="1")
            print(f"# filled {name}: {out}", flush=True)
        rows: dict[str, list[dict]] = {name: [] for name in brokers}
        jrows: dict[str, list[dict]] = {name: [] for name in brokers}
        for rnd in range(args.rounds):
            order = list(brokers)[rnd % len(brokers):] + list(brokers)[:rnd % len(brokers)]
            if rnd % 2:
                order.reverse()
            for name in order:
                broker = brokers[name]
                if not args.no_confluent:
                    cpu0, run0 = process_cpu_s(broker.pid), process_run_s(broker.pid)
                    dump = (os.path.join(args.dump_dir, f"{name}-r{rnd + 1}.log")
                            if args.dump_dir else "")
                    out = _child(broker.bootstrap, args.topic, args.records, args.trace,
                                 args.conf or [], dump)
                    out["broker_cpu_s"] = process_cpu_s(broker.pid) - cpu0
                    out["broker_run_s"] = process_run_s(broker.pid) - run0
                    out["load"] = os.getloadavg()[0]
                    rows[name].append(out)
                    print(f"round {rnd + 1} {name}: " + json.dumps(out), flush=True)
                if args.java:
                    cpu0, run0 = process_cpu_s(broker.pid), process_run_s(broker.pid)
                    jout = _java_consume(ref, scratch, broker.bootstrap, args.topic,
                                         args.records)
                    jout["broker_cpu_s"] = process_cpu_s(broker.pid) - cpu0
                    jout["broker_run_s"] = process_run_s(broker.pid) - run0
                    jout["load"] = os.getloadavg()[0]
                    jrows[name].append(jout)
                    print(f"round {rnd + 1} {name} java: " + json.dumps(jout), flush=True)
        for name, outs in rows.items():
            if not outs:
                continue
            walls = sorted(o["wall_s"] for o in outs)
            cpus = sorted(o["broker_cpu_s"] / (o["records"] / 1e6) for o in outs)
            runs = sorted(o["broker_run_s"] / (o["records"] / 1e6) for o in outs)
            print(f"## {name}: wall s min/median/max {walls[0]:.2f}/"
                  f"{statistics.median(walls):.2f}/{walls[-1]:.2f}; broker CPU s per M "
                  f"{cpus[0]:.3f}/{statistics.median(cpus):.3f}/{cpus[-1]:.3f} (ticks), "
                  f"{runs[0]:.4f}/{statistics.median(runs):.4f}/{runs[-1]:.4f} (schedstat)")
        for a, b in (("seglog", "seglog-b"), ("seglog", "kafka"), ("seglog-b", "kafka")):
            if args.no_confluent or not rows.get(a) or not rows.get(b):
                continue
            ratios = sorted(x["broker_run_s"] / y["broker_run_s"]
                            for x, y in zip(rows[a], rows[b]))
            print(f"## CPU ratio {a}/{b} (schedstat) min/median/max {ratios[0]:.3f}/"
                  f"{statistics.median(ratios):.3f}/{ratios[-1]:.3f}")
        for a, b in (("seglog", "seglog-b"), ("seglog", "kafka"), ("seglog-b", "kafka")):
            if not args.java or not jrows.get(a) or not jrows.get(b):
                continue
            ratios = sorted(x["broker_run_s"] / y["broker_run_s"]
                            for x, y in zip(jrows[a], jrows[b]))
            print(f"## java CPU ratio {a}/{b} (schedstat) min/median/max {ratios[0]:.3f}/"
                  f"{statistics.median(ratios):.3f}/{ratios[-1]:.3f}")
        if "seglog" in rows and "kafka" in rows and not args.no_confluent:
            ratios = sorted(k["wall_s"] / s["wall_s"]
                            for s, k in zip(rows["seglog"], rows["kafka"]))
            cpu_ratios = sorted(s["broker_cpu_s"] / k["broker_cpu_s"]
                                for s, k in zip(rows["seglog"], rows["kafka"]))
            print(f"## speed ratio kafka_wall/seglog_wall (>= 1.0 wanted) min/median/max "
                  f"{ratios[0]:.2f}/{statistics.median(ratios):.2f}/{ratios[-1]:.2f}")
            print(f"## CPU ratio seglog/kafka (<= 0.1 wanted) min/median/max "
                  f"{cpu_ratios[0]:.3f}/{statistics.median(cpu_ratios):.3f}/"
                  f"{cpu_ratios[-1]:.3f}")
        if args.java and "seglog" in jrows and "kafka" in jrows:
            for name, outs in jrows.items():
                if not outs:
                    continue
                walls = sorted(o["fetch_s"] for o in outs)
                print(f"## java {name}: fetch s min/median/max {walls[0]:.2f}/"
                      f"{statistics.median(walls):.2f}/{walls[-1]:.2f}")
            ratios = sorted(k["fetch_s"] / s["fetch_s"]
                            for s, k in zip(jrows["seglog"], jrows["kafka"]))
            cpu_ratios = sorted(s["broker_cpu_s"] / k["broker_cpu_s"]
                                for s, k in zip(jrows["seglog"], jrows["kafka"]))
            print(f"## java speed ratio kafka/seglog min/median/max {ratios[0]:.2f}/"
                  f"{statistics.median(ratios):.2f}/{ratios[-1]:.2f}; CPU ratio "
                  f"seglog/kafka {cpu_ratios[0]:.3f}/{statistics.median(cpu_ratios):.3f}/"
                  f"{cpu_ratios[-1]:.3f}")
    finally:
        if kafka is not None:
            kafka.stop()
        seglog.stop()
        if seglog_b is not None:
            seglog_b.stop()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)  # 10 M records: about 1.1 GB a broker


if __name__ == "__main__":
    main()
