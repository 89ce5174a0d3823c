"""Part ``broker``: ``seglog serve`` against the real Kafka broker, same clients, same machine.

Issue 11's targets, each measured on both brokers in the same run (so the ratio is what
counts, not the absolute figure on a noisy 2-core machine):

1. **start to ready**: from launching the broker process to its first answer to an
   ApiVersions request (a raw v0 request over a socket, polled every 10 ms), the same probe
   for both. Kafka's figure starts after ``kafka-storage format`` (done before).
2. **produce throughput**, 100-byte records to one partition, with Kafka's own
   ``ProducerPerformance`` (acks=1 and acks=all, unthrottled, 64 KiB batches, linger 5 ms) and
   with a confluent-kafka (librdkafka) producer in a subprocess of its own (acks=1 and
   acks=all, the same batching);
3. **consume throughput**: Kafka's ``ConsumerPerformance`` (a consumer group; its fetch
   phase) and a confluent-kafka consumer assigned the partition from the beginning;
4. **produce latency** at a fixed rate (ProducerPerformance ``--throughput``, acks=all):
   p50 and p99, send to acknowledgement;
5. **broker RSS** after the runs;
6. **idle CPU**: ten confluent-kafka consumers long-polling an empty topic for a while; the
   broker process's CPU time over that window as a share of one core.

Both brokers run as separate processes on 127.0.0.1; the clients run in their own processes
too, so the bench process's interpreter never competes with either. The seglog broker is
``python -m seglog serve`` on the run's backend. Where java and the Kafka jars of
``ci/kafka-ref.sh`` are not cached (the bench never downloads them), seglog is measured alone
and the part says so; where confluent-kafka is not installed, its rows say so.

Targets ("<=" goals hold the *headroom* goal / measured, met at >= 1, as the scale part):
throughput ratios >= 1.0x Kafka; p99 latency <= Kafka's; start <= 0.5 s; RSS <= 25 % of
Kafka's; idle CPU < 1 % of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .data import Unavailable
from .kafka import (PERF_HEAP_MB, KafkaBroker, consumer_records_flag, find_kafka, free_port,
                    parse_consumer_performance, parse_producer_performance, proc_status)
from .runner import BenchContext
from .stats import UNIT_RATIO, UNIT_RECORDS_PER_S, UNIT_SECONDS, si
from .table import PartResult, Table, Target

NAME = "broker"
TITLE = "seglog serve vs the real Kafka broker, same clients, same machine"

MiB = 1 << 20

#: Records per throughput run, by mode.
RECORDS = {"quick": 50_000, "standard": 500_000, "full": 2_000_000}
#: The fixed rate (records/s) and duration (s) of the latency run, by mode.
LATENCY_RATE = {"quick": 10_000, "standard": 50_000, "full": 50_000}
LATENCY_S = {"quick": 3, "standard": 10, "full": 20}
#: The idle-CPU window (s) and the number of long-polling consumers.
IDLE_S = {"quick": 3.0, "standard": 10.0, "full": 20.0}
IDLE_CONSUMERS = 10
#: How long a broker may take to answer its first ApiVersions before the part gives up.
READY_TIMEOUT_S = 120.0
READY_POLL_S = 0.01
CLIENT_TIMEOUT_S = 600.0

TARGET_START_S = 0.5
TARGET_RSS_SHARE = 0.25
TARGET_IDLE_CPU_SHARE = 0.01

#: What the brokers are called in tables and figure keys.
SEGLOG, KAFKA = "seglog", "kafka"

_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 5) + b"bench"


def api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether a Kafka ApiVersions v0 request to ``host:port`` gets an answer with error 0
    (the broker is serving requests, not just accepting connections)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0)
            head = _recv_exactly(sock, 4)
            size = struct.unpack(">i", head)[0]
            if not 6 <= size <= 1 << 20:
                return False
            body = _recv_exactly(sock, size)
            correlation_id, error_code = struct.unpack(">ih", body[:6])
            return correlation_id == 7 and error_code == 0
    except OSError:
        return False


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def wait_ready(host: str, port: int, proc: subprocess.Popen, t0: float,
               timeout_s: float = READY_TIMEOUT_S) -> float:
    """Poll ApiVersions until it answers; the seconds since ``t0``. RuntimeError when the
    process exits or the timeout passes."""
    deadline = t0 + timeout_s
    while True:
        if api_versions_ok(host, port, timeout_s=0.5):
            return time.perf_counter() - t0
        if proc.poll() is not None:
            raise RuntimeError(f"the broker exited with {proc.returncode} before it was ready")
        if time.perf_counter() > deadline:
            raise RuntimeError(f"the broker did not answer ApiVersions in {timeout_s:.0f} s")
        time.sleep(READY_POLL_S)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class SeglogServe:
    """One ``python -m seglog serve`` process on 127.0.0.1 and a free port (or ``port``: a
    restart on the address clients know), over ``data_dir``; its output goes to
    ``<data_dir>.out``. :meth:`start` returns the seconds to the first ApiVersions answer;
    :meth:`stop` sends SIGTERM (a clean shutdown), :meth:`kill` SIGKILL."""

    def __init__(self, data_dir: Path, *, backend: str | None = None,
                 config: dict[str, str] | None = None, port: int | None = None):
        self.data_dir = Path(data_dir)
        self.port = port if port is not None else free_port()
        self.backend = backend
        self.config = dict(config or {})
        self.log_path = Path(str(self.data_dir) + ".out")
        self.process: subprocess.Popen | None = None
        self.start_s: float | None = None

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's pid while it runs."""
        return self.process.pid if self.process is not None else None

    def start(self) -> float:
        """Launch and wait until ApiVersions is answered; the seconds that took."""
        cmd = [sys.executable, "-m", "seglog", "serve", "--data-dir", str(self.data_dir),
               "--listen", self.bootstrap]
        if self.backend:
            cmd += ["--backend", self.backend]
        for key, value in self.config.items():
            cmd += ["--config", f"{key}={value}"]
        with open(self.log_path, "ab") as out:
            t0 = time.perf_counter()
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.start_s = wait_ready("127.0.0.1", self.port, self.process, t0)
        except RuntimeError as exc:
            self.kill()
            raise RuntimeError(f"seglog serve: {exc}:\n{self.log_tail()}") from None
        return self.start_s

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's output."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def rss_bytes(self) -> int:
        """The broker's resident memory (0 when stopped)."""
        if self.process is None:
            return 0
        return proc_status(self.process.pid)["rss_bytes"]

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout_s``); the exit code."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        self.process = None
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL (only this broker's process, by pid)."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        self.process = None


# --- the confluent-kafka clients, each run in a subprocess of its own -------------------------

def _client_produce(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer

    value = b"x" * args.record_bytes
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": args.acks,
                         "enable.idempotence": False, "linger.ms": 5,
                         "batch.size": 65536, "compression.type": "none",
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 65536})
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    # Metadata (and auto-creation) before the clock starts, as ProducerPerformance does.
    producer.list_topics(args.topic, timeout=30)
    deadline = time.monotonic() + args.timeout_s
    t0 = time.perf_counter()
    for _ in range(args.records):
        while True:
            try:
                producer.produce(args.topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    return {"error": "timed out producing"}
        producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    wall_s = time.perf_counter() - t0
    if left or errors:
        return {"error": f"{left} undelivered; {errors}"}
    return {"records": args.records, "wall_s": wall_s, "records_per_s": args.records / wall_s}


def _client_consume(args: argparse.Namespace) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"bench-{os.getpid()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 1048576})
    consumer.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + args.timeout_s
    received, first_at = 0, None
    try:
        while received < args.records:
            if time.monotonic() > deadline:
                return {"error": f"timed out after {received} records"}
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error():
                    return {"error": str(msg.error())}
                if first_at is None:
                    first_at = time.perf_counter()
                received += 1
        wall_s = time.perf_counter() - first_at
    finally:
        consumer.close()
    return {"records": received, "wall_s": wall_s, "records_per_s": received / wall_s}


def _client_idle(args: argparse.Namespace) -> dict:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumers = []
    for index in range(args.consumers):
        consumer = Consumer({"bootstrap.servers": args.bootstrap,
                             "group.id": f"idle-{os.getpid()}-{index}",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 500})
        consumer.assign([TopicPartition(args.topic, 0, OFFSET_END)])
        consumers.append(consumer)
    # Tell the parent the consumers are polling, then poll until it closes stdin.
    deadline = time.monotonic() + args.timeout_s
    ready_sent = False
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.05)
        if not ready_sent:
            print(json.dumps({"ready": True}), flush=True)
            ready_sent = True
        if os.path.exists(args.stop_file):
            break
    for consumer in consumers:
        consumer.close()
    return {"consumers": args.consumers}


_CLIENTS: dict[str, Callable[[argparse.Namespace], dict]] = {
    "produce": _client_produce, "consume": _client_consume, "idle": _client_idle}


def client_main(argv: list[str] | None = None) -> int:
    """Entry of a client subprocess (``python -m seglog.bench.broker <kind> ...``): one JSON
    line on stdout with the result (``records_per_s``) or an ``error``."""
    parser = argparse.ArgumentParser(prog="seglog.bench.broker")
    parser.add_argument("kind", choices=sorted(_CLIENTS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, default=0)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--consumers", type=int, default=IDLE_CONSUMERS)
    parser.add_argument("--stop-file", default="")
    parser.add_argument("--timeout-s", type=float, default=CLIENT_TIMEOUT_S)
    args = parser.parse_args(argv)
    try:
        out = _CLIENTS[args.kind](args)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a failed row
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    return 0


def run_client(kind: str, bootstrap: str, topic: str, **options: Any) -> dict:
    """Run one client subprocess to completion; its JSON result."""
    cmd = [sys.executable, "-m", "seglog.bench.broker", kind, "--bootstrap", bootstrap,
           "--topic", topic]
    for key, value in options.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLIENT_TIMEOUT_S + 60, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr[-1500:]}"}
    return json.loads(lines[-1])


def has_confluent_kafka() -> bool:
    """Whether confluent-kafka can be imported (the ``bench`` extra installs it)."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


# --- one broker's measurements ---------------------------------------------------------------

@dataclass
class Side:
    """What one broker measured: ``rows[label] = value`` or an error text."""

    name: str
    figures: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def record(self, key: str, outcome: dict | float | None, field_name: str = "") -> None:
        """Keep ``outcome[field_name]`` (or the value itself) under ``key``, or its error."""
        if isinstance(outcome, dict):
            if "error" in outcome:
                self.errors[key] = str(outcome["error"])[:300]
                return
            outcome = outcome.get(field_name)
        if outcome is not None:
            self.figures[key] = float(outcome)


def _perf_producer(ref, scratch: Path, bootstrap: str, topic: str, records: int,
                   record_bytes: int, acks: str, throughput: int = -1) -> dict:
    done = ref.run_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        ["--topic", topic, "--num-records", str(records), "--record-size", str(record_bytes),
         "--throughput", str(throughput), "--producer-props", f"bootstrap.servers={bootstrap}",
         f"acks={acks}", "enable.idempotence=false", "batch.size=65536", "linger.ms=5",
         "compression.type=none", "buffer.memory=67108864"],
        run_dir=scratch, heap_mb=PERF_HEAP_MB, tool=False, timeout_s=CLIENT_TIMEOUT_S)
    summary = parse_producer_performance(done.stdout)
    if done.returncode != 0 or summary is None:
        return {"error": f"ProducerPerformance exit {done.returncode}: "
                         f"{(done.stdout + done.stderr)[-600:]}"}
    return summary


def _perf_consumer(ref, scratch: Path, bootstrap: str, topic: str, records: int) -> dict:
    done = ref.run_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        ["--bootstrap-server", bootstrap, "--topic", topic,
         consumer_records_flag(ref), str(records),
         "--group", f"perf-{os.getpid()}-{time.monotonic_ns()}", "--timeout", "30000",
         "--fetch-size", "1048576"],
        run_dir=scratch, heap_mb=PERF_HEAP_MB, tool=False, timeout_s=CLIENT_TIMEOUT_S)
    row = parse_consumer_performance(done.stdout)
    if done.returncode != 0 or row is None:
        return {"error": f"ConsumerPerformance exit {done.returncode}: "
                         f"{(done.stdout + done.stderr)[-600:]}"}
    return {"records_per_s": row["fetch.nMsg.sec"]}


def _idle_cpu_share(pid: int, bootstrap: str, topic: str, window_s: float,
                    scratch: Path) -> dict:
    stop_file = scratch / f"idle-stop-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "seglog.bench.broker", "idle", "--bootstrap", bootstrap,
           "--topic", topic, "--consumers", str(IDLE_CONSUMERS), "--stop-file", str(stop_file),
           "--timeout-s", str(window_s + 120)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout is not None else ""
        if '"ready"' not in line:
            proc.wait(timeout=60)
            return {"error": f"idle consumers did not start: {line}{proc.stderr.read()[-600:]}"}
        time.sleep(1.0)  # let the consumers settle into their long polls
        cpu0, t0 = process_cpu_s(pid), time.perf_counter()
        time.sleep(window_s)
        cpu1, t1 = process_cpu_s(pid), time.perf_counter()
    finally:
        stop_file.touch()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    return {"share": (cpu1 - cpu0) / (t1 - t0)}


def measure(side: Side, *, bootstrap: str, pid_of: Callable[[], int], ref, scratch: Path,
            records: int, record_bytes: int, mode: str, progress) -> None:
    """Run every client measurement against one running broker into ``side``."""
    label = side.name
    confluent = has_confluent_kafka()
    for acks in ("1", "all"):
        topic = f"perf-acks-{acks}"
        if ref is not None:
            progress.step(f"{label}: ProducerPerformance acks={acks}, {records:,} records")
            side.record(f"perf.produce.acks_{acks}",
                        _perf_producer(ref, scratch, bootstrap, topic, records, record_bytes,
                                       acks), "records_per_s")
        if confluent:
            progress.step(f"{label}: confluent-kafka producer acks={acks}")
            side.record(f"ck.produce.acks_{acks}",
                        run_client("produce", bootstrap, f"ck-acks-{acks}", records=records,
                                   record_bytes=record_bytes, acks=acks), "records_per_s")
    if ref is not None:
        progress.step(f"{label}: ConsumerPerformance")
        side.record("perf.consume", _perf_consumer(ref, scratch, bootstrap, "perf-acks-1",
                                                   records), "records_per_s")
        rate, seconds = LATENCY_RATE[mode], LATENCY_S[mode]
        progress.step(f"{label}: latency at {rate:,} records/s, acks=all")
        latency = _perf_producer(ref, scratch, bootstrap, "latency", rate * seconds,
                                 record_bytes, "all", throughput=rate)
        side.record("latency.p50_ms", latency, "p50_ms")
        side.record("latency.p99_ms", latency, "p99_ms")
    if confluent:
        progress.step(f"{label}: confluent-kafka consumer")
        side.record("ck.consume", run_client("consume", bootstrap, "ck-acks-1", records=records),
                    "records_per_s")
        progress.step(f"{label}: {IDLE_CONSUMERS} idle long-polling consumers")
        side.record("idle.cpu_share", _idle_cpu_share(pid_of(), bootstrap, "ck-acks-1",
                                                      IDLE_S[mode], scratch), "share")


# --- the part --------------------------------------------------------------------------------

#: (figure key, row label) of the throughput rows; ratio seglog / Kafka, >= 1.0 wanted.
THROUGHPUT_ROWS = (
    ("perf.produce.acks_1", "ProducerPerformance, acks=1"),
    ("perf.produce.acks_all", "ProducerPerformance, acks=all"),
    ("ck.produce.acks_1", "confluent-kafka producer, acks=1"),
    ("ck.produce.acks_all", "confluent-kafka producer, acks=all"),
    ("perf.consume", "ConsumerPerformance (fetch phase)"),
    ("ck.consume", "confluent-kafka consumer"),
)


def run(ctx: BenchContext) -> PartResult:
    """Measure seglog serve, then (where its jars are cached) the real Kafka broker."""
    mode = ctx.config.mode
    records = ctx.config.records if ctx.config.records is not None else \
        RECORDS.get(mode, RECORDS["standard"])
    record_bytes = ctx.record_bytes
    ref, why = find_kafka()
    if ref is None and not has_confluent_kafka():
        raise Unavailable(f"neither Kafka's perf tools ({why}) nor confluent-kafka")
    result = PartResult(NAME, TITLE, params={"records": records, "record_bytes": record_bytes,
                                             "mode": mode})
    scratch = Path(ctx.scratch(NAME))
    sides: dict[str, Side] = {}

    seglog_side = sides[SEGLOG] = Side(SEGLOG)
    server = SeglogServe(scratch / "seglog-data", backend=_backend_name())
    ctx.progress.step("starting seglog serve")
    try:
        seglog_side.figures["start_s"] = server.start()
        measure(seglog_side, bootstrap=server.bootstrap, pid_of=lambda: server.pid, ref=ref,
                scratch=scratch, records=records, record_bytes=record_bytes, mode=mode,
                progress=ctx.progress)
        seglog_side.figures["rss_bytes"] = server.rss_bytes()
    except RuntimeError as exc:
        seglog_side.errors["start_s"] = str(exc)[:600]
    finally:
        code = server.stop()
        if code not in (0, None):
            result.notes.append(f"seglog serve exited with {code} on SIGTERM:\n"
                                f"{server.log_tail(10)}")

    if ref is None:
        result.notes.append(f"Kafka's side skipped: {why} (the jars are never downloaded by "
                            "the bench).")
    else:
        kafka_side = sides[KAFKA] = Side(KAFKA)
        result.params["kafka"] = ref.version
        broker = KafkaBroker(ref, scratch / "kafka")
        ctx.progress.step("formatting the Kafka data dir")
        broker.format()
        ctx.progress.step("starting the Kafka broker")
        try:
            t0 = time.perf_counter()
            broker.start()
            kafka_side.figures["start_s"] = wait_ready("127.0.0.1", broker.port,
                                                       broker.process, t0)
            measure(kafka_side, bootstrap=broker.bootstrap, pid_of=lambda: broker.pid, ref=ref,
                    scratch=scratch, records=records, record_bytes=record_bytes, mode=mode,
                    progress=ctx.progress)
            kafka_side.figures["rss_bytes"] = broker.rss_bytes()
        finally:
            broker.stop()

    _figures(result, sides)
    result.tables += _tables(result, sides, records, record_bytes, mode)
    _targets(result, sides)
    result.notes += _sentences(sides)
    bars = {f"{name} {label}": f"{name}.{key}" for key, label in THROUGHPUT_ROWS[:2]
            for name in sides if f"{name}.{key}" in result.figures}
    if bars:
        result.charts.append({"title": "broker: ProducerPerformance records/s",
                              "unit": UNIT_RECORDS_PER_S, "bars": bars})
    return result


def _backend_name() -> str | None:
    return os.environ.get("SEGLOG_BACKEND") or None


def _figures(result: PartResult, sides: dict[str, Side]) -> None:
    for name, side in sides.items():
        for key, value in side.figures.items():
            unit = UNIT_SECONDS if key.endswith("_s") else (
                "bytes" if key.endswith("_bytes") else (
                    "ms" if key.endswith("_ms") else (
                        "share" if key.endswith("share") else UNIT_RECORDS_PER_S)))
            result.figure(f"{name}.{key}", unit).add(value)


def _cell(side: Side | None, key: str, fmt: Callable[[float], str]) -> str:
    if side is None:
        return "-"
    if key in side.figures:
        return fmt(side.figures[key])
    if key in side.errors:
        return "failed: " + side.errors[key].splitlines()[0][:80]
    return "n/a"


def _ratio(sides: dict[str, Side], key: str, *, inverse: bool = False) -> float | None:
    if SEGLOG not in sides or KAFKA not in sides:
        return None
    ours, theirs = sides[SEGLOG].figures.get(key), sides[KAFKA].figures.get(key)
    if not ours or not theirs:
        return None
    return theirs / ours if inverse else ours / theirs


def _tables(result: PartResult, sides: dict[str, Side], records: int, record_bytes: int,
            mode: str) -> list[Table]:
    seg, kaf = sides.get(SEGLOG), sides.get(KAFKA)
    tput = Table(f"throughput, one partition, {records:,} records of {record_bytes} B "
                 "(records/s)", ["client", "seglog serve", "Kafka", "seglog / Kafka"])
    for key, label in THROUGHPUT_ROWS:
        ratio = _ratio(sides, key)
        tput.add(label, _cell(seg, key, si), _cell(kaf, key, si),
                 "n/a" if ratio is None else f"{ratio:.2f}x")
    ms = lambda v: f"{v:.0f}"  # noqa: E731
    lat = Table(f"produce latency at {LATENCY_RATE[mode]:,} records/s for {LATENCY_S[mode]} s, "
                "acks=all (ProducerPerformance, send to ack, ms)",
                ["percentile", "seglog serve", "Kafka"])
    for key, label in (("latency.p50_ms", "p50"), ("latency.p99_ms", "p99")):
        lat.add(label, _cell(seg, key, ms), _cell(kaf, key, ms))
    mib = lambda v: f"{v / MiB:.0f}"  # noqa: E731
    pct = lambda v: f"{v * 100:.2f} %"  # noqa: E731
    broker = Table("the broker process", ["figure", "seglog serve", "Kafka"])
    broker.add("start to first ApiVersions answer, s",
               _cell(seg, "start_s", lambda v: f"{v:.3f}"),
               _cell(kaf, "start_s", lambda v: f"{v:.2f}"))
    broker.add("RSS after the runs, MiB", _cell(seg, "rss_bytes", mib),
               _cell(kaf, "rss_bytes", mib))
    broker.add(f"CPU with {IDLE_CONSUMERS} idle long-polling consumers, share of a core",
               _cell(seg, "idle.cpu_share", pct), _cell(kaf, "idle.cpu_share", pct))
    return [tput, lat, broker]


def _targets(result: PartResult, sides: dict[str, Side]) -> None:
    for key, label in THROUGHPUT_ROWS:
        ratio = _ratio(sides, key)
        if ratio is not None:
            result.targets.append(Target(f"{label}: seglog / Kafka", ">= 1.0x Kafka", ratio, 1.0))
            result.figure(f"ratio.{key}", UNIT_RATIO).add(ratio)
    p99 = _ratio(sides, "latency.p99_ms", inverse=True)
    if p99 is not None:
        result.targets.append(Target("p99 latency at a fixed rate: Kafka / seglog",
                                     "<= Kafka's p99", p99, 1.0))
    seg = sides.get(SEGLOG)
    if seg is not None and seg.figures.get("start_s"):
        result.targets.append(Target("start to ready (headroom 0.5 s / measured)", "<= 0.5 s",
                                     TARGET_START_S / seg.figures["start_s"], 1.0))
    rss = _ratio(sides, "rss_bytes", inverse=True)
    if rss is not None:
        result.targets.append(Target("broker RSS (headroom 25 % of Kafka's / seglog's)",
                                     "<= 25 % of Kafka's", rss * TARGET_RSS_SHARE, 1.0))
    if seg is not None and "idle.cpu_share" in seg.figures:
        share = seg.figures["idle.cpu_share"]
        result.targets.append(Target(f"idle CPU, {IDLE_CONSUMERS} long-polling consumers "
                                     "(headroom 1 % / measured)", "< 1 % of a core",
                                     TARGET_IDLE_CPU_SHARE / share if share > 0 else float("inf"),
                                     1.0))


def _sentences(sides: dict[str, Side]) -> list[str]:
    out = []
    for side in sides.values():
        for key, error in side.errors.items():
            out.append(f"{side.name}: {key} failed: {error.splitlines()[0][:200]}")
    out.append("Both brokers run as separate processes on 127.0.0.1, the clients in processes "
               "of their own; the ratios are what the targets judge, measured in one run.")
    return out


if __name__ == "__main__":
    raise SystemExit(client_main())
