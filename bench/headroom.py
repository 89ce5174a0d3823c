"""Broker headroom (issue 27): how far ONE broker goes in MB/s before its event loop
saturates, beside Kafka 4.4 under the same load, and what a second shard on the second core
adds.

The load: 1..N generator processes, each producing records of ``--record-bytes`` for
``--seconds`` from a common start time (or until ``--max-records``) to a topic of
``--partitions`` partitions. ``--gen replay`` (default): ``replay`` subprocesses of this
script, each sending one pre-encoded ~64 KiB record batch per Produce v3 request, 5 in flight
per connection (see :func:`replay_main`; ~4x cheaper per byte than the seglog broker, so it
saturates a broker core without being the limit). ``--gen franz``: ``bench/headroom_gen``, a
small Go program on franz-go v1.22.3 (the client ``tools/franz_go.py`` fetches; built here
with ``go build`` from the Go module cache or the Go proxy): no key, sticky partitioning,
64 KiB batches, linger 5 ms, no compression, no idempotence; a real client, 2-3x dearer per
byte than the broker. Every step uses a fresh topic (deleted afterwards, so the disk does
not fill) and checks that the partitions' high watermarks add up to the records acknowledged.
Each generator reports the records acknowledged and its own CPU seconds (getrusage); this
script reads the brokers' CPU seconds from ``/proc/<pid>/stat``
and each core's busy share from ``/proc/stat`` over the same window.

Cores (``--layout``):

- ``pinned`` (default): every broker on CPU 0 (``sched_setaffinity`` of all its threads:
  seglog's event loop; Kafka's JVM with its network, request-handler and GC threads), every
  generator on CPU 1. seglog's loop is saturated when its main thread's demand (on-CPU plus
  runnable-but-waiting time, ``/proc/<pid>/schedstat``) is ~1.0, whatever share of the core
  other processes took; generators at ~1.00 core mean the load is the limit, not the broker.
- ``free``: nobody pinned (what a user gets on this 2-core machine).

Modes:

    PYTHONPATH=src python bench/headroom.py single --brokers seglog,kafka --gens 1,2,3,4
    PYTHONPATH=src python bench/headroom.py single --gen franz --sizes 100 --acks all
    PYTHONPATH=src python bench/headroom.py shards --shards 1,2 --gens 2,4 [--with-kafka]
    python bench/headroom.py report results.json        # markdown table of a --json file

``single``: one ``seglog serve`` and/or one Kafka 4.4 broker (KRaft, ``KafkaBroker``), both
up at once, rounds alternating the order. ``shards``: ``seglog.cluster.local.LocalCluster``
(ZooKeeper + 1 or 2 ``seglog serve``), RF 1, each broker leading an equal share of the
partitions; "1 shard" and "2 shards" are topics led by the first broker only or by both, on
the same cluster, alternating; ``--layout pinned`` puts broker i on CPU i-1 (generators
unpinned: there is no third core), ``free`` pins nothing; ``--with-kafka`` adds an unpinned
Kafka 4.4 broker as a third target (its threads use both cores, as two shards do). Every
loop is bounded in count and time; only processes this script started are signalled, by pid.
Results: one JSON line per step on stdout and a summary (min/median/max over the rounds) at
the end; ``--json PATH`` writes all of it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
GEN_SRC = HERE / "headroom_gen"
#: Seconds between launching the generators and their common start (connect + warm-up).
START_DELAY_S = 2.0
#: A generator that has not finished this long after its window is killed (by pid).
GEN_GRACE_S = 90.0


def build_generator(out_dir: Path) -> Path:
    """``go build`` the generator into ``out_dir`` (module cache first, then the Go proxy)."""
    binary = out_dir / "headroom-gen"
    env = dict(os.environ, GOFLAGS="-mod=mod")
    for proxy in ("off", env.get("GOPROXY") or "https://proxy.golang.org,direct"):
        done = subprocess.run(["go", "build", "-o", str(binary), "."], cwd=GEN_SRC,
                              env=dict(env, GOPROXY=proxy), capture_output=True, text=True,
                              timeout=600, check=False)
        if done.returncode == 0:
            return binary
    raise SystemExit(f"go build of {GEN_SRC} failed:\n{done.stderr[-2000:]}")


# --- the replay generator: pre-encoded Produce requests, pipelined -------------------------

#: Produce v3 (the lowest version Kafka 4 accepts; topic names, not ids, and no tagged fields).
PRODUCE_VERSION = 3
#: Requests in flight per connection (the producers' ``max.in.flight.requests``).
IN_FLIGHT = 5


def _str16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _produce_body(topic: str, partition: int, batch: bytes, acks: int) -> bytes:
    """A Produce v3 request body: one topic, one partition, one record batch."""
    return (struct.pack(">hhi", -1, acks, 30_000) + struct.pack(">i", 1) + _str16(topic) +
            struct.pack(">iii", 1, partition, len(batch)) + batch)


def replay_main(args: argparse.Namespace) -> None:
    """The ``replay`` generator process: one connection per partition leader, each
    cycling its partitions with one ~``batch_bytes`` record batch (encoded once by seglog's
    codec, timestamps of now) per Produce request, ``IN_FLIGHT`` requests pipelined, until
    ``seconds`` or ``records``. The broker validates and appends every batch as it would a
    client's (a v2 batch's CRC does not cover the base offset it rewrites). Prints the same
    JSON line as the Go generator."""
    import resource
    import socket
    import threading

    from seglog._backend import get_backend

    acks = -1 if args.acks in ("all", "-1") else int(args.acks)
    per_batch = max(1, args.batch_bytes // (args.record_bytes + 10))
    value = bytes(ord("a") + i % 26 for i in range(args.record_bytes))
    batch = get_backend().encode_batch([value] * per_batch)
    by_leader: dict[str, list[int]] = {}
    for item in args.leaders.split(","):
        part, address = item.split("=", 1)
        by_leader.setdefault(address, []).append(int(part))
    header_tail = _str16("headroom")
    deadline_box: list[float] = []
    totals = {"records": 0, "failed": 0, "sent": 0}
    errors: list[str] = []
    lock = threading.Lock()
    socks = {}
    for address in by_leader:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks[address] = sock

    def drive(address: str, parts: list[int]) -> None:
        sock = socks[address]
        reader = sock.makefile("rb", buffering=1 << 16)
        bodies = [_produce_body(args.topic, p, batch, acks) for p in parts]
        corr, pending, sent, acked, failed = 0, 0, 0, 0, 0
        max_sent = args.records // per_batch
        while True:
            while pending < IN_FLIGHT and sent < max_sent and time.time() < deadline_box[0]:
                body = bodies[corr % len(bodies)]
                head = struct.pack(">hhi", 0, PRODUCE_VERSION, corr) + header_tail
                sock.sendmsg([struct.pack(">i", len(head) + len(body)), head, body])
                corr, pending, sent = corr + 1, pending + 1, sent + 1
            if not pending:
                break
            size = struct.unpack(">i", reader.read(4))[0]
            payload = reader.read(size)
            pending -= 1
            # corr(4) topics(4) name(2+n) partitions(4) partition(4) error_code(2)
            at = 4 + 4 + 2 + len(args.topic.encode()) + 4 + 4
            code = struct.unpack_from(">h", payload, at)[0]
            if code == 0:
                acked += 1
            else:
                failed += 1
                if len(errors) < 3:
                    errors.append(f"error code {code}")
        with lock:
            totals["records"] += acked * per_batch
            totals["failed"] += failed * per_batch
            totals["sent"] += sent * per_batch

    if args.start_at_ns:
        time.sleep(max(0.0, (args.start_at_ns - time.time_ns()) / 1e9))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = ru.ru_utime + ru.ru_stime
    t0_ns = time.time_ns()
    deadline_box.append(time.time() + args.seconds)
    threads = [threading.Thread(target=drive, args=(a, ps), daemon=True)
               for a, ps in by_leader.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=args.seconds + GEN_GRACE_S)
    wall_s = (time.time_ns() - t0_ns) / 1e9
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out: dict[str, Any] = dict(totals, bytes=totals["records"] * args.record_bytes,
                               wall_s=wall_s, cpu_s=ru.ru_utime + ru.ru_stime - cpu0,
                               start_ns=t0_ns)
    if errors:
        out["error"] = errors[0]
    print(json.dumps(out), flush=True)


# --- CPU accounting --------------------------------------------------------------------------

def process_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sched_ns(pid: int) -> tuple[int, int]:
    """``(on-CPU ns, runnable-but-waiting ns)`` of the process's main thread (seglog's event
    loop) from /proc/<pid>/schedstat. On a shared core, on-CPU + waiting over a window is
    the share the thread WANTED: ~1.0 means its loop never idled (saturated), whatever other
    processes took of the core."""
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
        run_ns, wait_ns, _slices = (int(x) for x in f.read().split())
    return run_ns, wait_ns


def core_ticks() -> dict[str, tuple[int, int]]:
    """``{"cpu0": (busy, total), ...}`` jiffies from /proc/stat."""
    out = {}
    with open("/proc/stat", encoding="ascii") as f:
        for line in f:
            name, *values = line.split()
            if name.startswith("cpu") and name != "cpu":
                nums = [int(v) for v in values[:8]]
                idle = nums[3] + nums[4]
                out[name] = (sum(nums) - idle, sum(nums))
    return out


def core_busy(before: dict, after: dict) -> dict[str, float]:
    """Each core's busy share between two :func:`core_ticks` readings (all processes)."""
    return {name: round((after[name][0] - before[name][0]) /
                        max(1, after[name][1] - before[name][1]), 3) for name in after}


def dirty_bytes() -> int:
    """The page cache's dirty + writeback bytes (/proc/meminfo)."""
    total = 0
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith(("Dirty:", "Writeback:")):
                total += int(line.split()[1]) * 1024
    return total


#: Before each step the page cache's dirty data must be below this (the previous step's
#: writes otherwise throttle the next broker's writers: balance_dirty_pages)...
DIRTY_SETTLE_BYTES = 256 << 20
#: ... waiting at most this long.
DIRTY_SETTLE_S = 3.0


def settle_dirty() -> float:
    """Wait (bounded) until the writeback of earlier steps is done; the seconds waited."""
    t0 = time.monotonic()
    while dirty_bytes() > DIRTY_SETTLE_BYTES and time.monotonic() - t0 < DIRTY_SETTLE_S:
        time.sleep(0.2)
    return time.monotonic() - t0


def pin(pid: int, cpus: set[int]) -> None:
    """Put every thread of ``pid`` on ``cpus`` (threads created later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


@contextlib.contextmanager
def affinity(cpus: set[int] | None) -> Iterator[None]:
    """Run the block (and the processes it starts) on ``cpus``; restore afterwards."""
    if cpus is None:
        yield
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


# --- topics ----------------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int,
                 assignment: list[list[int]] | None = None, timeout_s: float = 60.0) -> str:
    """Create ``topic`` (RF 1) and wait until every partition has a leader in Metadata;
    ``"partition=host:port,..."`` of the leaders."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    new = (NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
           if assignment else NewTopic(topic, num_partitions=partitions, replication_factor=1))
    admin.create_topics([new], operation_timeout=timeout_s)[topic].result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and not meta.error and len(meta.partitions) == partitions and \
                all(p.leader >= 0 for p in meta.partitions.values()):
            brokers = admin.list_topics(timeout=10).brokers
            return ",".join(f"{p}={brokers[part.leader].host}:{brokers[part.leader].port}"
                            for p, part in sorted(meta.partitions.items()))
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: partitions without a leader after {timeout_s} s")


def end_offsets_sum(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of the partitions' high watermarks (every acknowledged record is there)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "headroom-check",
                         "log_level": 2})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def delete_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> None:
    """Delete ``topic`` (best effort: a failure only leaves data on disk)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    with contextlib.suppress(Exception):
        admin.delete_topics([topic], operation_timeout=timeout_s)[topic].result(timeout_s)


# --- one step: N generators against one broker (or cluster) ----------------------------------

def run_step(gen: Path | None, *, bootstrap: str, leaders: str, topic: str, gens: int,
             record_bytes: int,
             acks: str, seconds: float, max_records: int, gen_cpus: set[int] | None,
             broker_pids: dict[str, int]) -> dict[str, Any]:
    """Start ``gens`` generators with a common start time; the step's figures."""
    start_ns = time.time_ns() + int(START_DELAY_S * 1e9)
    if gen is not None:
        cmd = [str(gen), "-brokers", bootstrap, "-topic", topic, "-record-bytes",
               str(record_bytes), "-acks", acks, "-seconds", str(seconds), "-records",
               str(max_records), "-start-at-ns", str(start_ns)]
    else:
        cmd = [sys.executable, __file__, "replay", "--leaders", leaders, "--topic", topic,
               "--record-bytes", str(record_bytes), "--acks", acks, "--seconds",
               str(seconds), "--records", str(max_records), "--start-at-ns", str(start_ns)]

    def preexec() -> None:
        if gen_cpus is not None:
            os.sched_setaffinity(0, gen_cpus)

    env = dict(os.environ, GOMAXPROCS="1")  # one core's worth per generator, accountable
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, preexec_fn=preexec) for _ in range(gens)]
    try:
        time.sleep(max(0.0, (start_ns - time.time_ns()) / 1e9))
        cpu0 = {name: process_cpu_s(pid) for name, pid in broker_pids.items()}
        sched0 = {name: sched_ns(pid) for name, pid in broker_pids.items()}
        ticks0 = core_ticks()
        t0 = time.perf_counter()
        outs = []
        for proc in procs:
            left = seconds + GEN_GRACE_S - (time.perf_counter() - t0)
            try:
                stdout, stderr = proc.communicate(timeout=max(1.0, left))
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            lines = [line for line in stdout.splitlines() if line.startswith("{")]
            if proc.returncode != 0 or not lines:
                raise RuntimeError(f"generator exit {proc.returncode}: {stderr[-1500:]}")
            outs.append(json.loads(lines[-1]))
        wall_parent = time.perf_counter() - t0
        cpu1 = {name: process_cpu_s(pid) for name, pid in broker_pids.items()}
        sched1 = {name: sched_ns(pid) for name, pid in broker_pids.items()}
        busy = core_busy(ticks0, core_ticks())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    end_ns = max(o["start_ns"] + o["wall_s"] * 1e9 for o in outs)
    wall_s = (end_ns - start_ns) / 1e9
    total_bytes = sum(o["bytes"] for o in outs)
    broker_cpu = {name: cpu1[name] - cpu0[name] for name in broker_pids}
    return {
        "gens": gens, "record_bytes": record_bytes, "acks": acks,
        "records": sum(o["records"] for o in outs), "failed": sum(o["failed"] for o in outs),
        "errors": sorted({o["error"] for o in outs if "error" in o})[:3],
        "wall_s": round(wall_s, 3), "mb_s": round(total_bytes / wall_s / 1e6, 2),
        "records_s": round(sum(o["records"] for o in outs) / wall_s),
        "broker_cores": {n: round(c / wall_parent, 3) for n, c in broker_cpu.items()},
        "main_thread_demand": {
            n: round((sched1[n][0] + sched1[n][1] - sched0[n][0] - sched0[n][1])
                     / 1e9 / wall_parent, 3) for n in broker_pids},
        "main_thread_wait": {n: round((sched1[n][1] - sched0[n][1]) / 1e9 / wall_parent, 3)
                             for n in broker_pids},
        "broker_cpu_s_per_gb": round(sum(broker_cpu.values()) / (total_bytes / 1e9), 2)
        if total_bytes else None,
        "gen_cores": round(sum(o["cpu_s"] for o in outs) / wall_s, 3),
        "core_busy": busy, "load_1m": round(os.getloadavg()[0], 2),
    }


# --- brokers ---------------------------------------------------------------------------------

class Single:
    """One ``seglog serve`` or one Kafka 4.4 broker, started on ``cpus``."""

    def __init__(self, kind: str, scratch: Path, cpus: set[int] | None):
        self.kind, self.scratch, self.cpus = kind, scratch, cpus
        self.broker: Any = None

    def start(self) -> None:
        """Start it (its threads inherit ``cpus``)."""
        with affinity(self.cpus):
            if self.kind == "seglog":
                from seglog.bench.broker import SeglogServe
                self.broker = SeglogServe(self.scratch / "seglog")
                self.broker.start()
            else:
                from seglog.bench.kafka import KafkaBroker, find_kafka
                ref, why = find_kafka()
                if ref is None:
                    raise SystemExit(why)
                self.broker = KafkaBroker(ref, self.scratch / "kafka")
                self.broker.format()
                self.broker.start()
        if self.cpus is not None:
            pin(self.broker.pid, self.cpus)

    @property
    def bootstrap(self) -> str:
        """The broker's address."""
        return self.broker.bootstrap

    def pids(self) -> dict[str, int]:
        """``{name: pid}`` of the broker process."""
        if self.cpus is not None:  # the JVM starts threads lazily: pin the newcomers too
            pin(self.broker.pid, self.cpus)
        return {self.kind: self.broker.pid}

    def assignment(self, partitions: int) -> None:
        """No explicit assignment (one broker)."""
        return None

    def stop(self) -> None:
        """Stop it (SIGTERM by pid, SIGKILL after a timeout)."""
        if self.broker is not None:
            self.broker.stop()


class Shards:
    """ZooKeeper + ``n`` ``seglog serve`` brokers (``LocalCluster``), broker i on CPU i-1
    when ``pinned``. :meth:`view` gives the targets "k shards": topics whose partitions are
    led by the first k brokers only, so 1 and 2 shards alternate on the same cluster."""

    def __init__(self, n: int, scratch: Path, pinned: bool):
        from seglog.cluster.local import LocalCluster
        self.n, self.pinned = n, pinned
        self.cluster = LocalCluster(scratch / "shards", n)

    def start(self) -> None:
        """Bring the cluster up and pin the brokers."""
        self.cluster.up()
        self.pids()

    @property
    def bootstrap(self) -> str:
        """Every broker's address."""
        return self.cluster.bootstrap_servers

    def pids(self) -> dict[str, int]:
        """``{"broker<i>": pid}``; re-pins every thread when pinned."""
        out = {}
        cpus = sorted(os.sched_getaffinity(0))
        for index, broker_id in enumerate(sorted(self.cluster.brokers)):
            pid = self.cluster.pid(broker_id)
            assert pid is not None
            if self.pinned:
                pin(pid, {cpus[index % len(cpus)]})
            out[f"broker{broker_id}"] = pid
        return out

    def view(self, k: int) -> "ShardView":
        """The target "``k`` shards" of this cluster."""
        return ShardView(self, k)

    def stop(self) -> None:
        """Stop the brokers and ZooKeeper (by pid)."""
        self.cluster.down()


class ShardView:
    """``k`` shards of a :class:`Shards` cluster: partition p led by broker ``p % k`` (RF 1),
    an equal share each; every broker's CPU is counted (the idle ones' too)."""

    def __init__(self, shards: Shards, k: int):
        self.shards, self.k = shards, k

    @property
    def bootstrap(self) -> str:
        """Every broker's address."""
        return self.shards.bootstrap

    def pids(self) -> dict[str, int]:
        """Every broker's pid."""
        return self.shards.pids()

    def assignment(self, partitions: int) -> list[list[int]]:
        """Partition p on broker ``p % k``."""
        ids = sorted(self.shards.cluster.brokers)[:self.k]
        return [[ids[p % len(ids)]] for p in range(partitions)]

    def start(self) -> None:
        """The cluster is started once, by :class:`Shards`."""

    def stop(self) -> None:
        """The cluster is stopped once, by :class:`Shards`."""


# --- the runs --------------------------------------------------------------------------------

def summarize(rows: list[dict]) -> list[dict]:
    """min/median/max of MB/s and the CPU shares per (target, record_bytes, acks, gens)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["target"], row["record_bytes"], row["acks"], row["gens"]),
                          []).append(row)
    out = []
    for (target, size, acks, gens), rs in sorted(groups.items()):
        def mmm(values: list[float]) -> list[float]:
            return [round(min(values), 3), round(statistics.median(values), 3),
                    round(max(values), 3)]
        out.append({
            "target": target, "record_bytes": size, "acks": acks, "gens": gens,
            "rounds": len(rs), "mb_s": mmm([r["mb_s"] for r in rs]),
            "records_s": mmm([r["records_s"] for r in rs]),
            "broker_cores": mmm([sum(r["broker_cores"].values()) for r in rs]),
            "gen_cores": mmm([r["gen_cores"] for r in rs]),
            "main_thread_demand": mmm([max(r["main_thread_demand"].values()) for r in rs]),
            "broker_cpu_s_per_gb": mmm([r["broker_cpu_s_per_gb"] for r in rs
                                        if r["broker_cpu_s_per_gb"] is not None] or [0]),
            "load_1m": mmm([r["load_1m"] for r in rs])})
    return out


def _mmm(values: list[float], fmt: str) -> str:
    lo, mid, hi = values
    return f"{mid:{fmt}} ({lo:{fmt}}..{hi:{fmt}})"


def report_markdown(data: dict) -> str:
    """A markdown table of a ``--json`` file's summary (median (min..max) per cell)."""
    lines = ["| target | record | acks | gens | rounds | MB/s | records/s | broker cores | "
             "event-loop demand | gen cores | broker CPU-s/GB | load 1m |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in data["summary"]:
        demand = (_mmm(s["main_thread_demand"], ".2f")
                  if s.get("main_thread_demand") and s["main_thread_demand"][2] > 0 else "-")
        lines.append(
            f"| {s['target']} | {s['record_bytes']} B | {s['acks']} | {s['gens']} | "
            f"{s['rounds']} | {_mmm(s['mb_s'], '.0f')} | "
            f"{_mmm([x / 1e6 for x in s['records_s']], '.2f')} M | "
            f"{_mmm(s['broker_cores'], '.2f')} | {demand} | {_mmm(s['gen_cores'], '.2f')} | "
            f"{_mmm(s['broker_cpu_s_per_gb'], '.2f')} | {_mmm(s['load_1m'], '.1f')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["report"]:
        for path in argv[1:]:
            print(report_markdown(json.loads(Path(path).read_text())))
        return 0
    if argv[:1] == ["replay"]:
        rp = argparse.ArgumentParser(prog="headroom.py replay")
        rp.add_argument("--leaders", required=True, help="partition=host:port,...")
        rp.add_argument("--topic", required=True)
        rp.add_argument("--record-bytes", type=int, default=100)
        rp.add_argument("--batch-bytes", type=int, default=65536)
        rp.add_argument("--acks", default="1")
        rp.add_argument("--seconds", type=float, default=5.0)
        rp.add_argument("--records", type=int, default=50_000_000)
        rp.add_argument("--start-at-ns", type=int, default=0)
        replay_main(rp.parse_args(argv[1:]))
        return 0
    parser.add_argument("mode", choices=("single", "shards"))
    parser.add_argument("--gen", choices=("franz", "replay"), default="replay",
                        help="franz: the Go franz-go producer; replay: pre-encoded Produce "
                             "requests (cheapest per byte)")
    parser.add_argument("--brokers", default="seglog,kafka", help="single: seglog,kafka")
    parser.add_argument("--shards", default="1,2", help="shards: broker counts")
    parser.add_argument("--with-kafka", action="store_true",
                        help="shards: a Kafka 4.4 broker as a third target (never pinned: "
                             "its threads use both cores, as 2 shards do)")
    parser.add_argument("--gens", default="1,2,3,4", help="generator process counts")
    parser.add_argument("--sizes", default="100,1024", help="record sizes (bytes)")
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0, help="each step's window")
    parser.add_argument("--max-records", type=int, default=50_000_000,
                        help="per generator and step")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layout", choices=("pinned", "free"), default="pinned")
    parser.add_argument("--json", default="", help="write every row and the summary here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    if (os.cpu_count() or 1) < 2 and args.layout == "pinned":
        raise SystemExit("--layout pinned needs 2 CPUs")
    scratch = Path(tempfile.mkdtemp(prefix="headroom-"))
    gen = build_generator(scratch) if args.gen == "franz" else None
    pinned = args.layout == "pinned"
    gen_cpus = {1} if pinned and args.mode == "single" else None
    targets: dict[str, Any] = {}
    owners: list[Any] = []
    if args.mode == "single":
        for kind in args.brokers.split(","):
            targets[kind] = Single(kind, scratch, {0} if pinned else None)
        owners = list(targets.values())
    else:
        counts = [int(x) for x in args.shards.split(",")]
        cluster = Shards(max(counts), scratch, pinned)
        owners = [cluster]
        for k in counts:
            targets[f"shards{k}"] = cluster.view(k)
        if args.with_kafka:
            targets["kafka"] = Single("kafka", scratch, None)
            owners.append(targets["kafka"])
    rows: list[dict] = []
    print(f"# {args.mode} layout={args.layout} cpus={os.cpu_count()} "
          f"load={os.getloadavg()[0]:.2f} scratch={scratch}", flush=True)
    step = 0
    try:
        # Every target is up at once (idle in turn), rounds alternate their order.
        for owner in owners:
            owner.start()
        order = list(targets)
        # One unrecorded step per target and size first: Kafka's JIT (and the page cache)
        # warm up; the first step against a fresh JVM ran at a tenth of the later ones.
        for tname in order:
            for size in (int(x) for x in args.sizes.split(",")):
                step += 1
                target = targets[tname]
                leaders = create_topic(target.bootstrap, f"hr{step}", args.partitions,
                                       target.assignment(args.partitions))
                warm = run_step(gen, bootstrap=target.bootstrap, leaders=leaders,
                                topic=f"hr{step}", gens=2, record_bytes=size, acks="1",
                                seconds=args.seconds, max_records=args.max_records,
                                gen_cpus=gen_cpus, broker_pids=target.pids())
                print(f"# warm-up {tname} {size} B: {warm['mb_s']} MB/s", flush=True)
                delete_topic(target.bootstrap, f"hr{step}")
        for size in (int(x) for x in args.sizes.split(",")):
            for acks in args.acks.split(","):
                for rnd in range(args.rounds):
                    for tname in (order if rnd % 2 == 0 else list(reversed(order))):
                        target = targets[tname]
                        for gens in (int(x) for x in args.gens.split(",")):
                            step += 1
                            topic = f"hr{step}"
                            settled_s = settle_dirty()
                            leaders = create_topic(target.bootstrap, topic,
                                                   args.partitions,
                                                   target.assignment(args.partitions))
                            row = run_step(gen, bootstrap=target.bootstrap, leaders=leaders,
                                           topic=topic,
                                           gens=gens, record_bytes=size, acks=acks,
                                           seconds=args.seconds,
                                           max_records=args.max_records, gen_cpus=gen_cpus,
                                           broker_pids=target.pids())
                            row.update(target=tname, round=rnd + 1, gen=args.gen,
                                       settled_s=round(settled_s, 1))
                            # Franz-go's warm-up record is in the log too (one per process).
                            row["log_records"] = end_offsets_sum(target.bootstrap, topic,
                                                                 args.partitions)
                            rows.append(row)
                            print(json.dumps(row), flush=True)
                            delete_topic(target.bootstrap, topic)
    finally:
        for owner in owners:
            with contextlib.suppress(Exception):
                owner.stop()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    summary = summarize(rows)
    print("# summary: target size acks gens | MB/s min/med/max | broker cores | gen cores | "
          "busiest broker main thread demand | broker CPU-s/GB | load")
    for s in summary:
        print(f"{s['target']:8} {s['record_bytes']:5} {s['acks']:3} {s['gens']} | "
              f"{s['mb_s']} | {s['broker_cores']} | {s['gen_cores']} | "
              f"{s['main_thread_demand']} | "
              f"{s['broker_cpu_s_per_gb']} | {s['load_1m']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows,
                                               "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
