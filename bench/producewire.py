"""Side by side: the broker's CPU per million 100-byte records produced with acks=all, one
partition, ``seglog serve`` against Kafka 4.4 (issue 27, "broker efficiency").

Both brokers run at once (``SeglogServe``, ``KafkaBroker``). Kafka is warmed up first: one
unmeasured round of every client on a topic of its own (the JIT; seglog gets the same round).
Then Kafka's and seglog's idle CPU rates are read over an idle window (no client connected,
``--idle-s`` seconds, both at once), and rounds alternate ABBA. Each round of each client runs
a fresh producer in a subprocess to a new one-partition topic: the subprocess fetches the
topic's metadata (auto-creation), says ``ready``, and the broker's CPU (``/proc/<pid>/stat``,
user + system, all threads) is read from then until it has flushed every record. Reported per
round: wall time, broker CPU-s per million records gross (and its user / system split), and
net of idle (the broker's idle rate times the round's measured window subtracted), and the
ratio seglog/Kafka of each. The system time is reported apart because on this VM writing new
page-cache pages costs host faults on memory the guest handed back (free page reporting):
up to ~3 ms of system time per MiB written, for either broker, depending on which pages the
kernel hands out.

Clients (``--clients``):

- ``ck-default``: confluent-kafka, ``acks=all`` and librdkafka's defaults otherwise;
- ``ck-bench``: confluent-kafka with the bench's producer settings
  (:mod:`seglog.bench.broker`: linger 5 ms, 64 KiB batches, no idempotence), acks=all;
- ``raw``: pre-built Produce v9 requests (acks=-1, ``--batch-records`` records each), at most
  5 unanswered: a client that is not the limit (it also reports CPU per request);
- ``java``: Kafka's ``ProducerPerformance`` (acks=all, its defaults otherwise; its JVM
  start is outside the window only in that CPU is read just before and after the tool runs,
  so the window includes the tool's connection set-up).

With ``--floor`` the floor of ``producefloor.py`` runs as a third broker ("floor"): asyncio,
the framing, one ``pwrite`` of the records and the answer, none of seglog's checks or
bookkeeping; what any Python asyncio broker of this design pays per record.

With ``--also-src <checkout>/src`` a second seglog broker runs from another checkout in the
same run (before/after side by side); the brokers' order rotates each round.

    PYTHONPATH=src python bench/producewire.py --records 1000000 --rounds 4 \
        --clients ck-default,ck-bench,raw,java [--also-src ../main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The bench's confluent-kafka producer settings (seglog.bench.broker._client_produce).
#: The raw client's records per request (set from ``--batch-records``).
BATCH_RECORDS = [150]
BENCH_SETTINGS = {"enable.idempotence": False, "linger.ms": 5, "batch.size": 65536,
                  "compression.type": "none", "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 65536}


def _await_topic(client, topic: str) -> None:
    """Metadata for ``topic`` (auto-creating it) until its partition 0 has a leader."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = client.list_topics(topic, timeout=30).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions \
                and meta.partitions[0].leader >= 0:
            return
        time.sleep(0.1)


def produce_main(args: argparse.Namespace) -> None:
    """The producer subprocess: ``ready`` once the topic exists, then (after a line on stdin)
    produces and flushes, and prints one JSON line."""
    from confluent_kafka import Producer

    conf: dict[str, object] = {"bootstrap.servers": args.bootstrap, "acks": "all"}
    if args.variant == "ck-bench":
        conf.update(BENCH_SETTINGS)
    producer = Producer(conf)
    _await_topic(producer, args.topic)
    print("ready", flush=True)
    sys.stdin.readline()
    value = b"x" * args.record_bytes
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    t0 = time.perf_counter()
    deadline = time.monotonic() + 600
    for _ in range(args.records):
        while True:
            try:
                producer.produce(args.topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise SystemExit("timed out producing") from None
        producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    wall_s = time.perf_counter() - t0
    if left or errors:
        raise SystemExit(f"{left} undelivered; {errors}")
    print(json.dumps({"records": args.records, "wall_s": wall_s}), flush=True)


def raw_main(args: argparse.Namespace) -> None:
    """The raw load subprocess: one Produce v9 request (acks=-1, one batch of
    ``--batch-records`` records, built once) sent over and over, at most 5 unanswered, until
    ``--records`` records are acknowledged: a client that costs next to nothing per request,
    so the broker's CPU per request shows without a client's batching in the way."""
    import datetime
    import io
    import socket
    import struct

    from kio.serial import entity_writer

    from producepath import read_response

    from seglog._native import codec
    from seglog.schemas import load_request_schema

    host, port = args.bootstrap.rsplit(":", 1)
    per = args.batch_records
    batch = codec.encode_batch([b"x" * args.record_bytes] * per,
                               timestamps_ms=int(time.time() * 1000))
    cls = load_request_schema(0, 9)
    mod = sys.modules[cls.__module__]
    request = cls(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                  topic_data=(mod.TopicProduceData(name=args.topic, partition_data=(
                      mod.PartitionProduceData(index=0, records=batch),)),))
    out = io.BytesIO()
    entity_writer(cls)(out, request)
    body = out.getvalue()
    header = struct.pack(">hhih", 0, 9, 1, 3) + b"raw" + b"\x00"
    frame = struct.pack(">i", len(header) + len(body)) + header + body
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending = bytearray()

    def check(response: bytes) -> None:
        # v9 response: header (correlation id, tagged fields), one topic, one partition:
        # the partition's error code follows its index.
        name_end = 4 + 1 + 1 + 1 + len(args.topic)
        error = struct.unpack_from(">h", response, name_end + 1 + 4)[0]
        if error:
            raise SystemExit(f"produce failed: error {error}")

    from confluent_kafka import Producer

    _await_topic(Producer({"bootstrap.servers": args.bootstrap}), args.topic)
    sock.sendall(frame)
    check(read_response(sock, pending))
    print("ready", flush=True)
    sys.stdin.readline()
    requests = max(1, args.records // per)
    sent = answered = 0
    t0 = time.perf_counter()
    while answered < requests:
        while sent < requests and sent - answered < 5:
            sock.sendall(frame)
            sent += 1
        check(read_response(sock, pending))
        answered += 1
    wall_s = time.perf_counter() - t0
    print(json.dumps({"records": requests * per, "requests": requests, "wall_s": wall_s}),
          flush=True)


def process_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pid`` (all threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all threads)."""
    return sum(process_cpu(pid))


def _cpu_delta(before: tuple[float, float], after: tuple[float, float]) -> dict:
    user, system = after[0] - before[0], after[1] - before[1]
    return {"broker_cpu_s": user + system, "user_s": user, "sys_s": system}


def _ck_round(variant: str, pid: int, bootstrap: str, topic: str, records: int,
              record_bytes: int) -> dict:
    cmd = [sys.executable, __file__, "--child", "--variant", variant, "--bootstrap", bootstrap,
           "--topic", topic, "--records", str(records), "--record-bytes", str(record_bytes),
           "--batch-records", str(BATCH_RECORDS[0])]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.wait(timeout=30)
            raise RuntimeError(f"producer not ready: {line} {proc.stderr.read()[-1500:]}")
        time.sleep(0.2)
        cpu0, t0 = process_cpu(pid), time.perf_counter()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        cpu1, t1 = process_cpu(pid), time.perf_counter()
        proc.wait(timeout=60)
        if not line.strip():
            raise RuntimeError(proc.stderr.read()[-1500:])
        out = json.loads(line)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    out.update(_cpu_delta(cpu0, cpu1), window_s=t1 - t0)
    return out


def _java_round(ref, scratch: Path, pid: int, bootstrap: str, topic: str, records: int,
                record_bytes: int) -> dict:
    from seglog.bench.kafka import parse_producer_performance

    cpu0, t0 = process_cpu(pid), time.perf_counter()
    done = ref.run_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        ["--topic", topic, "--num-records", str(records), "--record-size", str(record_bytes),
         "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
         "acks=all"],
        run_dir=scratch, heap_mb=512, tool=False, timeout_s=600)
    cpu1, t1 = process_cpu(pid), time.perf_counter()
    summary = parse_producer_performance(done.stdout)
    if done.returncode != 0 or summary is None:
        raise RuntimeError((done.stdout + done.stderr)[-1500:])
    return {"records": records, "wall_s": records / summary["records_per_s"],
            **_cpu_delta(cpu0, cpu1), "window_s": t1 - t0}


def _idle_rates(brokers: dict, window_s: float) -> dict[str, float]:
    """CPU-s per second of each broker with no client, over the same window."""
    time.sleep(2.0)
    cpu0 = {name: process_cpu_s(b.pid) for name, b in brokers.items()}
    t0 = time.perf_counter()
    time.sleep(window_s)
    dt = time.perf_counter() - t0
    return {name: (process_cpu_s(b.pid) - cpu0[name]) / dt for name, b in brokers.items()}


def _mmm(xs: list[float], fmt: str = "{:.3f}") -> str:
    xs = sorted(xs)
    return "/".join(fmt.format(x) for x in (xs[0], statistics.median(xs), xs[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--variant", default="ck-default")
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic", default="pw")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", default="ck-default,ck-bench",
                        help="comma-separated: ck-default, ck-bench, java")
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--batch-records", type=int, default=150,
                        help="raw client: records per request (150 x 100 B: about 16 KiB, "
                             "the Java producer's default batch.size)")
    parser.add_argument("--also-src", default="",
                        help="also run a second seglog broker from this checkout's src "
                             "directory (before/after in one run): 'seglog-other'")
    parser.add_argument("--floor", action="store_true",
                        help="also run producefloor.py's floor (asyncio, framing, one pwrite, "
                             "the answer; none of seglog's checks or bookkeeping): 'floor'")
    parser.add_argument("--only", choices=("seglog", "kafka"))
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--warmups", type=int, default=1,
                        help="unmeasured rounds of every client first (Kafka's JIT: one "
                             "round leaves its CPU per record 2-5x the warm figure)")
    parser.add_argument("--json", default="", help="write every round's row here")
    args = parser.parse_args()
    if args.child:
        if args.variant == "raw":
            raw_main(args)
        else:
            produce_main(args)
        return
    from seglog.bench.broker import SeglogServe
    from seglog.bench.kafka import KafkaBroker, find_kafka

    clients = [c for c in args.clients.split(",") if c]
    scratch = Path(tempfile.mkdtemp(prefix="producewire-"))
    brokers: dict[str, object] = {}
    seglog = SeglogServe(scratch / "seglog")
    kafka = None
    others: list[SeglogServe] = []  # FloorServe is one too
    ref, why = find_kafka()
    try:
        BATCH_RECORDS[0] = args.batch_records
        if args.only != "kafka":
            seglog.start()
            brokers["seglog"] = seglog
        if args.also_src:
            other = SeglogServe(scratch / "seglog-other")
            others.append(other)
            saved = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = args.also_src
            try:
                other.start()
            finally:
                if saved is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = saved
            brokers["seglog-other"] = other
        if args.floor:
            from producefloor import FloorServe

            floor = FloorServe(scratch / "floor")
            others.append(floor)
            floor.start()
            brokers["floor"] = floor
        if args.only != "seglog":
            if ref is None:
                raise SystemExit(why)
            kafka = KafkaBroker(ref, scratch / "kafka")
            kafka.format()
            kafka.start()
            brokers["kafka"] = kafka
        print(f"# seglog pid {seglog.pid}; kafka pid {kafka.pid if kafka else None}; "
              f"records {args.records:,} x {args.record_bytes} B; clients {clients}; "
              f"load {os.getloadavg()}", flush=True)

        def one(client: str, name: str, topic: str) -> dict:
            broker = brokers[name]
            if client == "java":
                return _java_round(ref, scratch, broker.pid, broker.bootstrap, topic,
                                   args.records, args.record_bytes)
            return _ck_round(client, broker.pid, broker.bootstrap, topic, args.records,
                             args.record_bytes)

        for warm in range(0 if args.no_warmup else args.warmups):
            for client in clients:
                for name in brokers:
                    out = one(client, name, f"{args.topic}-warm{warm}-{client}")
                    print(f"# warm-up {client} {name}: {json.dumps(out)}", flush=True)
        idle = _idle_rates(brokers, args.idle_s)
        print(f"# idle CPU-s per s over {args.idle_s:.0f} s: {idle}", flush=True)
        rows: list[dict] = []
        for rnd in range(args.rounds):
            names = list(brokers)
            if len(names) == 2:  # ABBA
                order = names if rnd % 4 in (0, 3) else names[::-1]
            else:  # rotate, and reverse every other round
                order = names[rnd % len(names):] + names[:rnd % len(names)]
                order = order if rnd % 2 == 0 else order[::-1]
            for client in clients:
                for name in order:
                    out = one(client, name, f"{args.topic}-{client}-r{rnd}")
                    per_m = 1e6 / out["records"]
                    out.update(round=rnd + 1, client=client, broker=name,
                               load=os.getloadavg()[0],
                               cpu_per_m=out["broker_cpu_s"] * per_m,
                               user_per_m=out["user_s"] * per_m,
                               sys_per_m=out["sys_s"] * per_m,
                               net_cpu_per_m=(out["broker_cpu_s"] - idle[name]
                                              * out["window_s"]) * per_m)
                    if "requests" in out:
                        out["us_per_request"] = out["broker_cpu_s"] / out["requests"] * 1e6
                        out["user_us_per_request"] = out["user_s"] / out["requests"] * 1e6
                    rows.append(out)
                    print(f"round {rnd + 1} {client} {name}: wall {out['wall_s']:.2f} s, "
                          f"CPU {out['broker_cpu_s']:.2f} s (user {out['user_s']:.2f}, sys "
                          f"{out['sys_s']:.2f}), {out['cpu_per_m']:.3f} s/M "
                          f"(net {out['net_cpu_per_m']:.3f}), load {out['load']:.1f}",
                          flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"idle": idle, "rows": rows}, indent=1))
        for client in clients:
            for name in brokers:
                mine = [r for r in rows if r["client"] == client and r["broker"] == name]
                print(f"## {client} {name}: wall s {_mmm([r['wall_s'] for r in mine], '{:.2f}')}"
                      f"; CPU s/M gross {_mmm([r['cpu_per_m'] for r in mine])}, net "
                      f"{_mmm([r['net_cpu_per_m'] for r in mine])}; user "
                      f"{_mmm([r['user_per_m'] for r in mine])}, sys "
                      f"{_mmm([r['sys_per_m'] for r in mine])}"
                      + (f"; CPU us per request {_mmm([r['us_per_request'] for r in mine], '{:.1f}')}"
                         f" (user {_mmm([r['user_us_per_request'] for r in mine], '{:.1f}')})"
                         if mine and "us_per_request" in mine[0] else ""))
            for mine_name in [n for n in brokers if n != "kafka"] if "kafka" in brokers else []:
                pairs = [(s, k) for s in rows for k in rows
                         if s["client"] == k["client"] == client and s["broker"] == mine_name
                         and k["broker"] == "kafka" and s["round"] == k["round"]]
                gross = [s["cpu_per_m"] / k["cpu_per_m"] for s, k in pairs]
                net = [s["net_cpu_per_m"] / k["net_cpu_per_m"] for s, k in pairs]
                user = [s["user_per_m"] / max(k["user_per_m"], 1e-9) for s, k in pairs]
                print(f"## {client} ratio {mine_name}/kafka (<= 0.35 wanted): gross "
                      f"{_mmm(gross)}, net of idle {_mmm(net)}, user CPU only {_mmm(user)}")
    finally:
        if kafka is not None:
            kafka.stop()
        for other in others:
            other.stop()
        seglog.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
