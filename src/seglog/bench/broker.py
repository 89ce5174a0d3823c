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
   phase) and a confluent-kafka consumer assigned the partition from the beginning
   (``fetch.queue.backoff.ms`` 10 ms: librdkafka's default sleeps a second whenever its
   prefetch queue is full, which the figure would otherwise count);
4. **produce latency** at a fixed rate (ProducerPerformance ``--throughput``, acks=all):
   p50 and p99, send to acknowledgement;
5. **broker RSS** after the runs;
6. **idle CPU**: ten confluent-kafka consumers long-polling an empty topic for a while; the
   broker process's CPU time over that window as a share of one core.
7. **capacity** (a table, no target): 1,000 idle client connections held (each a real
   client: one ApiVersions answered; then all asked again while held), the seconds to open
   them and the broker's descriptors and RSS before and while held; one topic of 1,000
   partitions created through confluent-kafka's AdminClient, one record produced to each and
   all consumed back, the seconds of each step and the broker's descriptors and RSS before
   and after; then the seconds of the broker's clean stop (SIGTERM) with that topic. The
   bench process raises its RLIMIT_NOFILE soft limit for the connections it holds.

Both brokers run as separate processes on 127.0.0.1, side by side; the clients run in their
own processes too, so the bench process's interpreter never competes with either. The
throughput and latency runs (2-4) go in rounds (three outside quick mode, ``--runs``
overrides), the brokers taking turns and the first to go alternating by round, so that the
machine's drift falls on both alike; each figure is the median of its rounds (results.json
keeps every round). Then each broker in turn gets 5-7 and is stopped. The seglog broker is
``python -m seglog serve`` on the run's backend. Where java and the Kafka jars of
``ci/kafka-ref.sh`` are not cached (the bench never downloads them), seglog is measured alone
and the part says so; where confluent-kafka is not installed, its rows say so. ``--quick``
(the CI smoke run, under a minute in all) measures seglog serve alone with confluent-kafka
(one round, 2 s idle window, 100 partitions, no TLS figures): the real broker and Kafka's
perf tools are the kafka part's in that mode.

Targets ("<=" goals hold the *headroom* goal / measured, met at >= 1, as the scale part):
throughput ratios >= 1.0x Kafka; p99 latency <= Kafka's; start <= 0.5 s; RSS <= 25 % of
Kafka's; idle CPU < 1 % of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .broker_tls import measure_tls, tls_table
from .data import Unavailable
from .kafka import (PERF_HEAP_MB, KafkaBroker, consumer_records_flag, find_kafka, free_port,
                    kill_process, parse_consumer_performance, parse_producer_performance,
                    proc_status, stop_process)
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
#: Rounds of the throughput and latency runs outside quick mode (``--runs`` overrides): the
#: two brokers run side by side and take turns, the first to go alternating by round, so
#: that the machine's drift (these 2-core machines swing by 30-50 % between runs) falls on
#: both alike; each figure is the median of its rounds.
ROUNDS = 3
#: Whether the real Kafka broker (with Kafka's Java perf tools and its TLS listener) runs
#: beside seglog serve in this part, by mode. Quick mode measures seglog serve alone with
#: confluent-kafka: on a 2-core VM the Kafka side (a JVM start of 3-8 s, a JVM per perf-tool
#: run, its idle and capacity figures) took some 40 s of a 60 s quick run; the kafka part
#: still starts the real broker and runs the perf tools against it in quick mode.
KAFKA_SIDE = {"quick": False, "standard": True, "full": True}
#: Whether the TLS figures (a second broker with an SSL listener) are taken, by mode (quick
#: leaves them out: new certificates and a second start, about 10 s on a loaded VM).
TLS_FIGURES = {"quick": False, "standard": True, "full": True}
#: The idle-CPU window (s) and the number of long-polling consumers.
IDLE_S = {"quick": 2.0, "standard": 10.0, "full": 20.0}
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
        proc, self.process = self.process, None
        return stop_process(proc, timeout_s)

    def kill(self) -> None:
        """SIGKILL (only this broker's process, by pid)."""
        proc, self.process = self.process, None
        kill_process(proc)


# --- the confluent-kafka clients, each run in a subprocess of its own -------------------------

#: librdkafka's ``fetch.queue.backoff.ms`` for the consumer row (see ``_client_consume``).
CONSUMER_QUEUE_BACKOFF_MS = 10

def _security(args: argparse.Namespace) -> dict[str, str]:
    """librdkafka's settings for an SSL listener (``--ssl-ca``: the CA to trust), or none."""
    ssl_ca = getattr(args, "ssl_ca", "")
    return {"security.protocol": "SSL", "ssl.ca.location": ssl_ca} if ssl_ca else {}


def _client_produce(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer

    value = b"x" * args.record_bytes
    producer = Producer({**_security(args), "bootstrap.servers": args.bootstrap,
                         "acks": args.acks,
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

    # fetch.queue.backoff.ms: librdkafka (>= 2.3) stops fetching for that long (default
    # 1,000 ms) whenever its prefetch queue holds more than queued.min.messages (100,000); a
    # broker that answers fast fills the queue sooner, so with the default the figure counts
    # the consumer's one-second sleeps (2 to 4 per 500,000 records, whichever broker: debug=fetch
    # logs "Fetch backoff for 1000ms: Local: Queue full"), not either broker. 10 ms keeps the
    # prefetch bounded and lets the rate show; both brokers get the same setting.
    consumer = Consumer({**_security(args), "bootstrap.servers": args.bootstrap,
                         "group.id": f"bench-{os.getpid()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 1048576,
                         "fetch.queue.backoff.ms": CONSUMER_QUEUE_BACKOFF_MS})
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
        wall_s = time.perf_counter() - (first_at or time.perf_counter())
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


def _client_partitions(args: argparse.Namespace) -> dict:
    """Phase ``create``: create topic ``args.topic`` of ``args.partitions`` partitions with
    the AdminClient and wait until Metadata lists them all. Phase ``roundtrip``: produce one
    record to each partition (acks=all), consume them all back (assigned, from offset 0) and
    check each partition's record. Phase ``all``: both. The seconds of each step."""
    from confluent_kafka.admin import AdminClient

    count, deadline = args.partitions, time.monotonic() + args.timeout_s
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    out: dict = {"partitions": count}
    if args.phase in ("create", "all"):
        out.update(_create_partitions(args, admin, count, deadline))
    if "error" not in out and args.phase in ("roundtrip", "all"):
        out.update(_roundtrip_partitions(args, count, deadline))
    return out


def _create_partitions(args: argparse.Namespace, admin: Any, count: int,
                       deadline: float) -> dict:
    from confluent_kafka.admin import NewTopic

    t0 = time.perf_counter()
    futures = admin.create_topics([NewTopic(args.topic, count, 1)],
                                  operation_timeout=args.timeout_s,
                                  request_timeout=args.timeout_s)
    futures[args.topic].result(timeout=args.timeout_s)
    create_s = time.perf_counter() - t0
    # Until Metadata lists every partition (Kafka's brokers learn of a new topic shortly
    # after CreateTopics answers).
    while True:
        topic = admin.list_topics(args.topic, timeout=30).topics.get(args.topic)
        if topic is not None and topic.error is None and len(topic.partitions) == count:
            break
        if time.monotonic() > deadline:
            return {"error": "the topic's partitions never all showed in Metadata"}
        time.sleep(0.05)
    return {"create_s": create_s, "metadata_s": time.perf_counter() - t0 - create_s}


def _roundtrip_partitions(args: argparse.Namespace, count: int, deadline: float) -> dict:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    t1 = time.perf_counter()
    for partition in range(count):
        producer.produce(args.topic, b"p%d" % partition, partition=partition,
                         on_delivery=on_delivery)
        producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    produce_s = time.perf_counter() - t1
    if left or errors:
        return {"error": f"{left} undelivered; {errors}"}

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    seen: dict[int, bytes] = {}
    t2 = time.perf_counter()
    try:
        consumer.assign([TopicPartition(args.topic, p, 0) for p in range(count)])
        while len(seen) < count:
            if time.monotonic() > deadline:
                return {"error": f"timed out with {len(seen)} of {count} partitions consumed"}
            for msg in consumer.consume(num_messages=count, timeout=0.5):
                if msg.error():
                    return {"error": str(msg.error())}
                seen[int(msg.partition() or 0)] = bytes(msg.value() or b"")
    finally:
        consumer.close()
    consume_s = time.perf_counter() - t2
    wrong = [p for p in range(count) if seen.get(p) != b"p%d" % p]
    if wrong:
        return {"error": f"partitions with the wrong record: {wrong[:10]}"}
    return {"produce_s": produce_s, "consume_s": consume_s}


_CLIENTS: dict[str, Callable[[argparse.Namespace], dict]] = {
    "produce": _client_produce, "consume": _client_consume, "idle": _client_idle,
    "partitions": _client_partitions}


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
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--phase", choices=("create", "roundtrip", "all"), default="all")
    parser.add_argument("--stop-file", default="")
    parser.add_argument("--ssl-ca", default="", help="connect over TLS trusting this CA")
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


# --- capacity: idle connections held, partitions on one broker -------------------------------

#: How many idle client connections and partitions the capacity figures hold, by mode.
CAPACITY_CONNECTIONS = {"quick": 1_000, "standard": 1_000, "full": 1_000}
#: Quick mode creates 100 partitions (seglog serve took 3 s to stop with 1,000 on a quiet
#: VM: a clean shutdown syncs every partition written).
CAPACITY_PARTITIONS = {"quick": 100, "standard": 1_000, "full": 1_000}
#: Whether the real Kafka broker gets the partitions figure too, by mode: quick mode leaves it
#: out (Kafka takes tens of seconds to take one record on each of 1,000 new partitions and
#: as long again to stop with them: over the quick run's budget).
CAPACITY_KAFKA_PARTITIONS = {"quick": False, "standard": True, "full": True}
CAPACITY_TIMEOUT_S = 300.0
_NOT_MEASURED = "not measured"
#: How long the connection figure waits for the broker to drop closed connections'
#: descriptors (so that the partitions figure starts from a settled count).
_SETTLE_S = 20.0
#: Descriptors this process keeps for itself beside the connections it holds.
_FDS_SPARE = 100


def api_versions_on(sock: socket.socket, correlation_id: int) -> bool:
    """Send ApiVersions v0 on an open connection and read its answer; whether it came with
    ``correlation_id`` and error 0 (the socket's timeout bounds the wait)."""
    frame = struct.pack(">hhih", 18, 0, correlation_id, 5) + b"bench"
    try:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        if not 6 <= size <= 1 << 20:
            return False
        return struct.unpack_from(">ih", _recv_exactly(sock, size)) == (correlation_id, 0)
    except OSError:
        return False


def hold_connections(host: str, port: int, count: int,
                     timeout_s: float = 30.0) -> list[socket.socket]:
    """``count`` TCP connections to ``host:port``, each a real client: its ApiVersions v0
    is answered before the next one opens. The caller closes them. RuntimeError (all closed)
    when one is not answered; the caller's RLIMIT_NOFILE must allow ``count`` more."""
    socks: list[socket.socket] = []
    try:
        for index in range(count):
            sock = socket.create_connection((host, port), timeout=timeout_s)
            socks.append(sock)
            sock.settimeout(timeout_s)
            if not api_versions_on(sock, index):
                raise RuntimeError(f"connection {index} of {count}: ApiVersions not answered")
    except BaseException:
        close_all(socks)
        raise
    return socks


def close_all(socks: list[socket.socket]) -> None:
    """Close every socket of ``socks``."""
    for sock in socks:
        sock.close()


def served_count(socks: list[socket.socket], step: int = 1) -> int:
    """How many of ``socks[::step]`` get one more ApiVersions answered."""
    return sum(api_versions_on(sock, 1_000_000 + index)
               for index, sock in enumerate(socks[::step]))


def _usage(pid: int) -> dict[str, float]:
    from .scale import open_fds

    return {"fds": float(open_fds(pid)), "rss_bytes": float(proc_status(pid)["rss_bytes"])}


def capacity_connections(pid: int, host: str, port: int, count: int) -> dict:
    """Hold ``count`` idle client connections to the broker (process ``pid``): seconds to
    open them (each answered once), the broker's descriptors and RSS before and while held,
    and how many answer again once all are open (``served``)."""
    from .scale import nofile_raised

    before = _usage(pid)
    with nofile_raised() as limits:
        soft = limits["soft"]
        if 0 <= soft < count + _FDS_SPARE:  # -1: unlimited
            return {"error": f"RLIMIT_NOFILE of the bench process {soft} < {count + _FDS_SPARE}"}
        t0 = time.perf_counter()
        try:
            socks = hold_connections(host, port, count)
        except (OSError, RuntimeError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        try:
            open_s = time.perf_counter() - t0
            held = _usage(pid)
            served = served_count(socks)
        finally:
            close_all(socks)
    from .scale import open_fds

    deadline = time.monotonic() + _SETTLE_S
    while open_fds(pid) > before["fds"] + 16 and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"open_s": open_s, "served": float(served), "fds_before": before["fds"],
            "fds_after": held["fds"], "fds_closed": float(open_fds(pid)),
            "rss_before_bytes": before["rss_bytes"], "rss_after_bytes": held["rss_bytes"]}


def capacity_partitions(pid: int, bootstrap: str, count: int,
                        topic: str = "capacity") -> dict:
    """One topic of ``count`` partitions created through confluent-kafka's AdminClient, then
    one record produced to each and all consumed back (client subprocesses); the seconds of
    each step and the broker's descriptors and RSS before, once created (partitions never
    written: a broker that opens segments lazily holds no descriptor for them yet) and after
    the records."""
    before = _usage(pid)
    out = run_client("partitions", bootstrap, topic, partitions=count, phase="create",
                     timeout_s=CAPACITY_TIMEOUT_S)
    if "error" in out:
        return out
    created = _usage(pid)
    out.update(run_client("partitions", bootstrap, topic, partitions=count, phase="roundtrip",
                          timeout_s=CAPACITY_TIMEOUT_S))
    if "error" in out:
        return out
    after = _usage(pid)
    out.update({"fds_before": before["fds"], "fds_created": created["fds"],
                "fds_after": after["fds"], "rss_before_bytes": before["rss_bytes"],
                "rss_created_bytes": created["rss_bytes"], "rss_after_bytes": after["rss_bytes"]})
    return out


def measure_capacity(side: "Side", *, host: str, port: int, bootstrap: str, pid: int,
                     mode: str, progress, partitions_too: bool = True) -> None:
    """The capacity figures of one running broker into ``side`` (keys ``cap.conn.*`` and,
    with ``partitions_too``, ``cap.part.*``)."""
    connections = CAPACITY_CONNECTIONS.get(mode, CAPACITY_CONNECTIONS["standard"])
    progress.step(f"{side.name}: {connections:,} idle client connections")
    side.record_all("cap.conn", capacity_connections(pid, host, port, connections))
    if partitions_too and has_confluent_kafka():
        partitions = CAPACITY_PARTITIONS.get(mode, CAPACITY_PARTITIONS["standard"])
        progress.step(f"{side.name}: a topic of {partitions:,} partitions")
        side.record_all("cap.part", capacity_partitions(pid, bootstrap, partitions))


# --- one broker's measurements ---------------------------------------------------------------

@dataclass
class Side:
    """What one broker measured: ``rows[label] = value`` or an error text."""

    name: str
    figures: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: Every run's value of a figure measured in several rounds (``figures`` holds their
    #: median).
    samples: dict[str, list[float]] = field(default_factory=dict)

    def record_all(self, prefix: str, outcome: dict) -> None:
        """Keep every number of ``outcome`` under ``<prefix>.<name>``, or its error under
        ``prefix``."""
        if "error" in outcome:
            self.errors[prefix] = str(outcome["error"])[:300]
            return
        for name, value in outcome.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.figures[f"{prefix}.{name}"] = float(value)

    def record(self, key: str, outcome: dict | float | None, field_name: str = "") -> None:
        """Keep ``outcome[field_name]`` (or the value itself) under ``key``, or its error."""
        if isinstance(outcome, dict):
            if "error" in outcome:
                self.errors[key] = str(outcome["error"])[:300]
                return
            outcome = outcome.get(field_name)
        if outcome is not None:
            values = self.samples.setdefault(key, [])
            values.append(float(outcome))
            self.figures[key] = statistics.median(values)


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
            tail = proc.stderr.read()[-600:] if proc.stderr is not None else ""
            return {"error": f"idle consumers did not start: {line}{tail}"}
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


def measure_rates(side: Side, *, bootstrap: str, ref, scratch: Path, records: int,
                  record_bytes: int, mode: str, round_index: int, progress) -> None:
    """One round of the throughput and latency runs against one running broker into
    ``side`` (each round writes topics of its own, so every round produces to new topics
    and consumes what that round produced)."""
    label = f"{side.name} (round {round_index + 1})"
    suffix = f"-r{round_index}"
    confluent = has_confluent_kafka()
    for acks in ("1", "all"):
        topic = f"perf-acks-{acks}{suffix}"
        if ref is not None:
            progress.step(f"{label}: ProducerPerformance acks={acks}, {records:,} records")
            side.record(f"perf.produce.acks_{acks}",
                        _perf_producer(ref, scratch, bootstrap, topic, records, record_bytes,
                                       acks), "records_per_s")
        if confluent:
            progress.step(f"{label}: confluent-kafka producer acks={acks}")
            side.record(f"ck.produce.acks_{acks}",
                        run_client("produce", bootstrap, f"ck-acks-{acks}{suffix}",
                                   records=records, record_bytes=record_bytes, acks=acks),
                        "records_per_s")
    if ref is not None:
        progress.step(f"{label}: ConsumerPerformance")
        side.record("perf.consume", _perf_consumer(ref, scratch, bootstrap,
                                                   f"perf-acks-1{suffix}", records),
                    "records_per_s")
        rate, seconds = LATENCY_RATE[mode], LATENCY_S[mode]
        progress.step(f"{label}: latency at {rate:,} records/s, acks=all")
        latency = _perf_producer(ref, scratch, bootstrap, f"latency{suffix}", rate * seconds,
                                 record_bytes, "all", throughput=rate)
        side.record("latency.p50_ms", latency, "p50_ms")
        side.record("latency.p99_ms", latency, "p99_ms")
    if confluent:
        progress.step(f"{label}: confluent-kafka consumer")
        side.record("ck.consume", run_client("consume", bootstrap, f"ck-acks-1{suffix}",
                                             records=records), "records_per_s")


def measure_idle(side: Side, *, bootstrap: str, pid: int, scratch: Path, mode: str,
                 progress) -> None:
    """The broker's CPU share while ten consumers long-poll an empty topic."""
    if not has_confluent_kafka():
        return
    progress.step(f"{side.name}: {IDLE_CONSUMERS} idle long-polling consumers")
    # The first round's consumer topic: it exists (a consumer does not create topics) and
    # nothing writes to it any more, so the consumers long-poll at its end.
    side.record("idle.cpu_share", _idle_cpu_share(pid, bootstrap, "ck-acks-1-r0",
                                                  IDLE_S[mode], scratch), "share")


def rounds_for(mode: str, runs: int | None) -> int:
    """How many rounds of the rate runs: ``--runs`` when given, else one in quick mode (the
    CI smoke run) and three otherwise; the figures are each side's median over them."""
    if runs is not None:
        return max(1, runs)
    return 1 if mode == "quick" else ROUNDS


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
    """Start seglog serve and (where its jars are cached) the real Kafka broker side by side,
    run the rate rounds on each in turn, then each broker's idle, RSS and capacity figures."""
    mode = ctx.config.mode
    records = ctx.config.records if ctx.config.records is not None else \
        RECORDS.get(mode, RECORDS["standard"])
    record_bytes = ctx.record_bytes
    ref, why = find_kafka()
    if ref is None and not has_confluent_kafka():
        raise Unavailable(f"neither Kafka's perf tools ({why}) nor confluent-kafka")
    left_out = not KAFKA_SIDE.get(mode, True) and has_confluent_kafka()
    if left_out:
        ref, why = None, (f"not run in {mode} mode (the kafka part starts the real broker "
                          "with Kafka's perf tools; the standard and full modes compare "
                          "both brokers here)")
    rounds = rounds_for(mode, ctx.config.runs)
    result = PartResult(NAME, TITLE, params={"records": records, "record_bytes": record_bytes,
                                             "mode": mode, "rounds": rounds})
    scratch = Path(ctx.scratch(NAME))
    sides: dict[str, Side] = {SEGLOG: Side(SEGLOG)}
    server = SeglogServe(scratch / "seglog-data", backend=_backend_name())
    broker: KafkaBroker | None = None
    #: The brokers still running: name -> (port, bootstrap, pid getter, RSS getter).
    running: dict[str, Any] = {}

    def stop(name: str) -> None:
        t0 = time.perf_counter()
        if name == SEGLOG:
            ctx.progress.step("stopping seglog serve")
            code = server.stop()
            if code not in (0, None):
                result.notes.append(f"seglog serve exited with {code} on SIGTERM:\n"
                                    f"{server.log_tail(10)}")
        elif broker is not None:
            ctx.progress.step("stopping the Kafka broker")
            broker.stop()
        if "cap.part.partitions" in sides[name].figures:
            sides[name].figures["cap.stop_s"] = time.perf_counter() - t0
        running.pop(name, None)

    try:
        ctx.progress.step("starting seglog serve")
        running[SEGLOG] = (server.port, server.bootstrap, lambda: _pid(server.pid),
                           server.rss_bytes)
        try:
            sides[SEGLOG].figures["start_s"] = server.start()
        except RuntimeError as exc:
            sides[SEGLOG].errors["start_s"] = str(exc)[:600]
            stop(SEGLOG)
        if ref is None:
            result.notes.append(f"Kafka's side skipped: {why}" + (
                "." if left_out else " (the jars are never downloaded by the bench)."))
        else:
            sides[KAFKA] = Side(KAFKA)
            result.params["kafka"] = ref.version
            broker = KafkaBroker(ref, scratch / "kafka")
            ctx.progress.step("formatting the Kafka data dir")
            broker.format()
            ctx.progress.step("starting the Kafka broker")
            kafka_broker = broker
            running[KAFKA] = (broker.port, broker.bootstrap, lambda: _pid(kafka_broker.pid),
                              broker.rss_bytes)
            try:
                t0 = time.perf_counter()
                broker.start()
                process = broker.process
                assert process is not None  # start() returned: it runs
                sides[KAFKA].figures["start_s"] = wait_ready("127.0.0.1", broker.port,
                                                             process, t0)
            except RuntimeError as exc:
                sides[KAFKA].errors["start_s"] = str(exc)[:600]
                stop(KAFKA)
        for round_index in range(rounds):
            names = list(running)
            for name in names if round_index % 2 == 0 else names[::-1]:
                try:
                    measure_rates(sides[name], bootstrap=running[name][1], ref=ref,
                                  scratch=scratch, records=records, record_bytes=record_bytes,
                                  mode=mode, round_index=round_index, progress=ctx.progress)
                except RuntimeError as exc:
                    sides[name].errors[f"round {round_index + 1}"] = str(exc)[:600]
        for name in list(running):
            side = sides[name]
            port, bootstrap, pid_of, rss_bytes = running[name]
            partitions_too = name == SEGLOG or CAPACITY_KAFKA_PARTITIONS.get(mode, True)
            try:
                measure_idle(side, bootstrap=bootstrap, pid=pid_of(), scratch=scratch,
                             mode=mode, progress=ctx.progress)
                side.figures["rss_bytes"] = rss_bytes()
                measure_capacity(side, host="127.0.0.1", port=port, bootstrap=bootstrap,
                                 pid=pid_of(), mode=mode, progress=ctx.progress,
                                 partitions_too=partitions_too)
            except RuntimeError as exc:
                side.errors["rss_bytes"] = str(exc)[:600]
            if not partitions_too:
                side.errors["cap.part"] = f"{_NOT_MEASURED} in {mode} mode (time budget)"
            stop(name)
    finally:
        for name in list(running):
            stop(name)
    if not TLS_FIGURES.get(mode, True):
        result.notes.append(f"TLS figures not taken in {mode} mode (the standard and full "
                            "modes take them).")
    elif has_confluent_kafka():
        # What TLS costs: both listeners of a broker with an SSL one (broker_tls.py).
        measure_tls(sides, make_side=Side, scratch=scratch, ref=ref, records=records,
                    record_bytes=record_bytes, rounds=rounds, run_client=run_client,
                    seglog_serve=lambda data_dir, config: SeglogServe(
                        data_dir, backend=_backend_name(), config=config),
                    progress=ctx.progress, notes=result.notes)

    _figures(result, sides)
    result.tables += _tables(result, sides, records, record_bytes, mode)
    if TLS_FIGURES.get(mode, True):
        result.tables.append(tls_table(sides, records, record_bytes, _cell, si))
    _targets(result, sides)
    result.notes += _sentences(sides)
    bars = {f"{name} {label}": f"{name}.{key}" for key, label in THROUGHPUT_ROWS[:2]
            for name in sides if f"{name}.{key}" in result.figures}
    if bars:
        result.charts.append({"title": "broker: ProducerPerformance records/s",
                              "unit": UNIT_RECORDS_PER_S, "bars": bars})
    return result


def _pid(pid: int | None) -> int:
    if pid is None:
        raise RuntimeError("the broker is not running")
    return pid


def _backend_name() -> str | None:
    return os.environ.get("SEGLOG_BACKEND") or None


def _figures(result: PartResult, sides: dict[str, Side]) -> None:
    for name, side in sides.items():
        for key, value in side.figures.items():
            unit = UNIT_SECONDS if key.endswith("_s") else (
                "bytes" if key.endswith("_bytes") else (
                    "ms" if key.endswith("_ms") else (
                        "share" if key.endswith("share") else (
                            "count" if key.startswith("cap.") else UNIT_RECORDS_PER_S))))
            figure = result.figure(f"{name}.{key}", unit)
            for sample in side.samples.get(key, [value]):  # every round's, in order
                figure.add(sample)


def _cell(side: Side | None, key: str, fmt: Callable[[float], str]) -> str:
    if side is None:
        return "-"
    if key in side.figures:
        return fmt(side.figures[key])
    for failed in (key, key.rsplit(".", 1)[0]):  # the figure's, or its group's (cap.part)
        if failed in side.errors:
            text = side.errors[failed].splitlines()[0][:80]
            return text if text.startswith(_NOT_MEASURED) else "failed: " + text
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
        cells = (_cell(seg, key, si), _cell(kaf, key, si))
        if cells == ("n/a", "n/a"):
            continue  # not run in this mode or without the tool (the notes say which)
        tput.add(label, *cells, "n/a" if ratio is None else f"{ratio:.2f}x")
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
    latency_measured = any(cell != "n/a" for row in lat.rows for cell in row[1:])
    return [tput, *([lat] if latency_measured else []), broker,
            _capacity_table(seg, kaf, mode)]


def _pair(side: Side | None, before: str, after: str, fmt: Callable[[float], str]) -> str:
    """``before -> after`` of two figures of ``side`` (or why not)."""
    if side is None:
        return "-"
    if before in side.figures and after in side.figures:
        return f"{fmt(side.figures[before])} -> {fmt(side.figures[after])}"
    return _cell(side, after, fmt)


def _per(side: Side | None, before: str, after: str, count_key: str, scale: float,
         unit: str) -> str:
    """The growth of a figure from ``before`` to ``after`` per item (``count_key``)."""
    if side is None or not all(k in side.figures for k in (before, after, count_key)):
        return "n/a"
    count = side.figures[count_key]
    if not count:
        return "n/a"
    return f"{(side.figures[after] - side.figures[before]) / count / scale:.2f} {unit}"


def _capacity_table(seg: Side | None, kaf: Side | None, mode: str) -> Table:
    """Idle connections held and partitions on one broker: seconds, descriptors, RSS."""
    conns = CAPACITY_CONNECTIONS.get(mode, CAPACITY_CONNECTIONS["standard"])
    parts = CAPACITY_PARTITIONS.get(mode, CAPACITY_PARTITIONS["standard"])
    table = Table(f"capacity: {conns:,} idle client connections held; one topic of "
                  f"{parts:,} partitions created with confluent-kafka's AdminClient, one "
                  "record produced to each (acks=all) and all consumed back",
                  ["figure", "seglog serve", "Kafka"])
    secs = lambda v: f"{v:.2f}"  # noqa: E731
    whole = lambda v: f"{v:.0f}"  # noqa: E731
    mib = lambda v: f"{v / MiB:.0f}"  # noqa: E731
    add = table.add
    add("connections: seconds to open them (each answers one ApiVersions)",
        _cell(seg, "cap.conn.open_s", secs), _cell(kaf, "cap.conn.open_s", secs))
    add("connections answering again while all are held",
        _cell(seg, "cap.conn.served", whole), _cell(kaf, "cap.conn.served", whole))
    add("broker descriptors, before -> connections held",
        _pair(seg, "cap.conn.fds_before", "cap.conn.fds_after", whole),
        _pair(kaf, "cap.conn.fds_before", "cap.conn.fds_after", whole))
    add("broker descriptors once they are closed",
        _cell(seg, "cap.conn.fds_closed", whole), _cell(kaf, "cap.conn.fds_closed", whole))
    add("broker RSS MiB, before -> connections held",
        _pair(seg, "cap.conn.rss_before_bytes", "cap.conn.rss_after_bytes", mib),
        _pair(kaf, "cap.conn.rss_before_bytes", "cap.conn.rss_after_bytes", mib))
    add("RSS growth per held connection",
        _per(seg, "cap.conn.rss_before_bytes", "cap.conn.rss_after_bytes", "cap.conn.served",
             1024, "KiB"),
        _per(kaf, "cap.conn.rss_before_bytes", "cap.conn.rss_after_bytes", "cap.conn.served",
             1024, "KiB"))
    add("partitions: CreateTopics answered, s",
        _cell(seg, "cap.part.create_s", secs), _cell(kaf, "cap.part.create_s", secs))
    add("then until Metadata lists them all, s",
        _cell(seg, "cap.part.metadata_s", secs), _cell(kaf, "cap.part.metadata_s", secs))
    add("one record to each partition, produced, s",
        _cell(seg, "cap.part.produce_s", secs), _cell(kaf, "cap.part.produce_s", secs))
    add("all consumed back (assigned), s",
        _cell(seg, "cap.part.consume_s", secs), _cell(kaf, "cap.part.consume_s", secs))
    for stage, key in (("created, never written", "created"),
                       ("one record in each", "after")):
        add(f"broker descriptors, before -> topic {stage}",
            _pair(seg, "cap.part.fds_before", f"cap.part.fds_{key}", whole),
            _pair(kaf, "cap.part.fds_before", f"cap.part.fds_{key}", whole))
        add(f"descriptors per partition, {stage}",
            _per(seg, "cap.part.fds_before", f"cap.part.fds_{key}", "cap.part.partitions", 1,
                 ""),
            _per(kaf, "cap.part.fds_before", f"cap.part.fds_{key}", "cap.part.partitions", 1,
                 ""))
        add(f"broker RSS MiB, before -> topic {stage}",
            _pair(seg, "cap.part.rss_before_bytes", f"cap.part.rss_{key}_bytes", mib),
            _pair(kaf, "cap.part.rss_before_bytes", f"cap.part.rss_{key}_bytes", mib))
        add(f"RSS growth per partition, {stage}",
            _per(seg, "cap.part.rss_before_bytes", f"cap.part.rss_{key}_bytes",
                 "cap.part.partitions", 1024, "KiB"),
            _per(kaf, "cap.part.rss_before_bytes", f"cap.part.rss_{key}_bytes",
                 "cap.part.partitions", 1024, "KiB"))
    add("clean stop (SIGTERM) with the topic, s",
        _cell(seg, "cap.stop_s", secs), _cell(kaf, "cap.stop_s", secs))
    return table


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
            if error.startswith(_NOT_MEASURED):
                out.append(f"{side.name}: {key} {error}.")
                continue
            out.append(f"{side.name}: {key} failed: {error.splitlines()[0][:200]}")
    out.append("Both brokers run as separate processes on 127.0.0.1, the clients in processes "
               "of their own; the ratios are what the targets judge, measured in one run.")
    seg = sides.get(SEGLOG)
    if seg is not None and all(f"cap.part.fds_{k}" in seg.figures
                               for k in ("before", "created", "after")):
        count = max(1.0, seg.figures.get("cap.part.partitions", 1.0))
        created, written = ((seg.figures[f"cap.part.fds_{k}"]
                             - seg.figures["cap.part.fds_before"]) / count
                            for k in ("created", "after"))
        out.append(f"Descriptors: seglog serve holds {created:.2f} per partition created and "
                   f"never written, {written:.2f} per partition with a record. Segments open "
                   "lazily (issue 14) and a file cache closes the least recently used past "
                   "its bound (half the soft RLIMIT_NOFILE by default, so 1,000 written "
                   "partitions stay open under a 20,000 limit); before issue 14 every "
                   "partition held its active segment's descriptor from creation on "
                   "(measured at commit 8412c9e, with a record in each: 1.00 per "
                   "partition).")
    return out


if __name__ == "__main__":
    raise SystemExit(client_main())
