"""Part ``cluster``: a 3-broker seglog cluster over ZooKeeper beside a 3-broker Kafka cluster.

Issue 12's performance targets, each measured in one run so the ratios are what count:

1. **produce throughput with replication**: 100-byte records (``--record-bytes``) to one
   partition with ``acks=all``, on a topic of replication factor 3 (``min.insync.replicas=2``)
   against a topic of replication factor 1 on the same cluster, interleaved run by run. Two
   clients: Kafka's own ``ProducerPerformance`` (64 KiB batches, linger 5 ms, no idempotence,
   unthrottled, as the ``broker`` part runs it) and a confluent-kafka (librdkafka) producer in
   a subprocess of its own (``seglog.bench.broker``'s ``produce`` client). The seglog cluster
   is :class:`seglog.cluster.local.LocalCluster`: one ZooKeeper and three ``seglog serve``
   processes on 127.0.0.1. The Kafka cluster (where java and the jars of ``ci/kafka-ref.sh``
   are cached; the bench never downloads them) is :class:`KafkaCluster`: Kafka 4.4 in KRaft
   mode, one controller-only node and three broker-only nodes on 127.0.0.1, each a JVM with
   its own ports and data directory. Kafka 4 has no ZooKeeper mode at all (removed in 4.0), so
   the comparison is of replication (leader appends, follower fetches, the high watermark),
   not of metadata stores. Target: seglog >= 1.0x Kafka at RF 3.
2. **failover time**: a confluent-kafka producer sends one record every
   ``1 / FAILOVER_RATE`` s with ``acks=all`` (and short client backoffs, printed); once its
   writes are acknowledged, the partition leader's process is killed with SIGKILL and the
   figure is the time from the kill to the first acknowledged write on the *new* leader
   (once per run, on a fresh topic each time, the killed broker restarted between). Which
   acknowledgements came from the new leader is decided afterwards from the log itself: the
   partition is read back from the start and each record's batch carries the leader epoch
   that wrote it (``partitionLeaderEpoch``); the first acknowledgement after the kill of a
   record whose epoch is newer than the epoch of the last write acknowledged before the kill
   is the one. Also printed: when Metadata (polled every 50 ms from a survivor) first names
   the new leader. Both clusters detect the death by a session timeout of the same length:
   seglog's ZooKeeper session (``zookeeper.session.timeout.ms``) and Kafka's broker lease
   with the KRaft controller (``broker.session.timeout.ms``, heartbeats every
   ``broker.heartbeat.interval.ms``). The killed leader is never the seglog controller (the
   topic's replica assignment puts the leader on another broker), as Kafka's dedicated
   controller never is.

``--quick`` (the CI bench smoke) measures the seglog cluster alone with the confluent-kafka
producer and a few records, plus its failover; the Kafka cluster and ProducerPerformance run
in the standard and full modes. Every load loop is bounded in count and time; only processes
this part started are ever signalled (the local cluster's and the Kafka nodes' own pids). Both
clusters run one after the other, never at once, so one's idle work does not slow the other.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import select
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from .broker import has_confluent_kafka, run_client
from .data import Unavailable
from .kafka import (PERF_HEAP_MB, KafkaBroker, KafkaRef, find_kafka, kafka_uuid,
                    parse_producer_performance, proc_status)
from .stats import UNIT_RATIO, UNIT_RECORDS_PER_S, UNIT_SECONDS, Figure, si
from .table import PartResult, Table, Target

NAME = "cluster"
TITLE = "a 3-broker seglog cluster (RF 3 vs RF 1, failover) beside a 3-broker Kafka"

MiB = 1 << 20

#: Brokers in each cluster.
BROKERS = 3
#: Records per throughput run, by mode.
RECORDS = {"quick": 20_000, "standard": 300_000, "full": 1_000_000}
#: ``min.insync.replicas`` of the replicated topics (the article's setting for RF 3).
MIN_INSYNC_REPLICAS = 2
#: The failure-detection timeout both clusters use (seglog: ``zookeeper.session.timeout.ms``;
#: Kafka: ``broker.session.timeout.ms``). Kafka 2.8's ZooKeeper default is 18 s and KRaft's
#: broker lease 9 s; the same shorter value on both sides keeps the comparison about what
#: happens after detection.
SESSION_TIMEOUT_MS = 6_000
#: Kafka's broker heartbeat interval (its default).
KAFKA_HEARTBEAT_INTERVAL_MS = 2_000
#: Records per second the failover producer offers, the acknowledged writes it waits for
#: before the kill, and the bounds of the measurement.
FAILOVER_RATE = 200
FAILOVER_WARMUP_ACKS = 50
FAILOVER_MAX_S = 60.0
#: How long the producer keeps sending once Metadata shows the new leader.
FAILOVER_TAIL_S = 2.0
#: The failover producer's settings (librdkafka names); the short backoffs and a metadata
#: refresh every 250 ms make the figure the cluster's, not the client's retry schedule (with
#: librdkafka's 5-minute refresh the new leader reached this producer 1-2 s after Metadata
#: named it). Identical for both clusters.
FAILOVER_PRODUCER_CONFIG = {
    "acks": "all", "enable.idempotence": False, "linger.ms": 0,
    "message.timeout.ms": int(FAILOVER_MAX_S * 1000), "request.timeout.ms": 5_000,
    "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
    "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100,
    "topic.metadata.refresh.fast.interval.ms": 50, "topic.metadata.refresh.interval.ms": 250,
}
#: Bounds of one client subprocess and of a cluster's start.
CLIENT_TIMEOUT_S = 600.0
START_TIMEOUT_S = 180.0
#: Heaps of the Kafka nodes (the ``broker`` part gives its one broker 512 MiB).
KAFKA_BROKER_HEAP_MB = 512
KAFKA_CONTROLLER_HEAP_MB = 256
#: The Kafka controller's node id (the brokers are 0..N-1, as seglog's).
KAFKA_CONTROLLER_ID = 100

#: The clusters, as tables and figure keys name them.
SEGLOG, KAFKA = "seglog", "kafka"
#: (key, label) of the throughput clients.
CLIENTS = (("perf", "ProducerPerformance"), ("ck", "confluent-kafka producer"))

_CONTROLLER_PROPERTIES = """\
process.roles=controller
node.id={node_id}
controller.quorum.voters={voters}
listeners=CONTROLLER://127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data_dir}
broker.session.timeout.ms={session_timeout_ms}
broker.heartbeat.interval.ms={heartbeat_interval_ms}
"""

# Broker-only nodes: the ``kafka`` part's settings (internal topics of one partition, no group
# join delay, a 32 MiB cleaner buffer, 2 network and 4 io threads), replicated internal topics.
_BROKER_PROPERTIES = """\
process.roles=broker
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data_dir}
num.partitions=1
offsets.topic.replication.factor={rf}
offsets.topic.num.partitions=1
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr={min_isr}
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor={rf}
share.coordinator.state.topic.min.isr={min_isr}
group.initial.rebalance.delay.ms=0
log.cleaner.dedupe.buffer.size=33554432
num.network.threads=2
num.io.threads=4
broker.session.timeout.ms={session_timeout_ms}
broker.heartbeat.interval.ms={heartbeat_interval_ms}
"""


# --- a Kafka KRaft cluster: one controller, N brokers ----------------------------------------

class KafkaNode(KafkaBroker):
    """One node of a :class:`KafkaCluster`: a :class:`~seglog.bench.kafka.KafkaBroker` (its
    process, log and ports) with a controller-only or broker-only ``server.properties`` and a
    static voter set, formatted without ``--standalone`` (Kafka's static-quorum
    alternative to ``--standalone``)."""

    def __init__(self, ref: KafkaRef, run_dir: str | os.PathLike, *, node_id: int, role: str,
                 heap_mb: int, cluster_id: str):
        super().__init__(ref, run_dir, heap_mb=heap_mb)
        if role not in ("controller", "broker"):
            raise ValueError(f"role must be controller or broker, not {role!r}")
        self.node_id = node_id
        self.role = role
        self.cluster_id = cluster_id

    def write_properties(self, voters: str, *, brokers: int, session_timeout_ms: int,
                         heartbeat_interval_ms: int) -> None:
        """Write this node's ``server.properties`` for the voter set ``voters``
        (``id@host:port``)."""
        template = _CONTROLLER_PROPERTIES if self.role == "controller" else _BROKER_PROPERTIES
        text = template.format(node_id=self.node_id, voters=voters, port=self.port,
                               controller_port=self.controller_port, data_dir=self.data_dir,
                               rf=min(3, brokers), min_isr=min(2, brokers),
                               session_timeout_ms=session_timeout_ms,
                               heartbeat_interval_ms=heartbeat_interval_ms)
        self.properties_path.write_text(text, encoding="utf-8")

    #: The voters are in the node's properties (see :meth:`KafkaBroker.format`).
    FORMAT_QUORUM_ARGS: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"node {self.node_id}"


class KafkaCluster:
    """A KRaft cluster of Kafka ``ref`` under ``run_dir``: one controller-only node
    (:data:`KAFKA_CONTROLLER_ID`) and ``brokers`` broker-only nodes with ids 0..N-1, each in
    ``run_dir/node-<id>`` with its own ports on 127.0.0.1. :meth:`up` formats every node (in
    parallel), starts the controller, then the brokers (in parallel), and returns the seconds
    that took; :meth:`kill` SIGKILLs one node by its pid; :meth:`down` kills what still runs
    (the data is scratch: no controlled shutdown to wait for). Not thread-safe."""

    def __init__(self, ref: KafkaRef, run_dir: str | os.PathLike, brokers: int = BROKERS, *,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS,
                 heartbeat_interval_ms: int = KAFKA_HEARTBEAT_INTERVAL_MS,
                 broker_heap_mb: int = KAFKA_BROKER_HEAP_MB,
                 controller_heap_mb: int = KAFKA_CONTROLLER_HEAP_MB):
        self.ref = ref
        self.run_dir = Path(run_dir)
        self.cluster_id = kafka_uuid()
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.controller = KafkaNode(ref, self.run_dir / f"node-{KAFKA_CONTROLLER_ID}",
                                    node_id=KAFKA_CONTROLLER_ID, role="controller",
                                    heap_mb=controller_heap_mb, cluster_id=self.cluster_id)
        self.brokers = {i: KafkaNode(ref, self.run_dir / f"node-{i}", node_id=i, role="broker",
                                     heap_mb=broker_heap_mb, cluster_id=self.cluster_id)
                        for i in range(brokers)}
        self.voters = f"{KAFKA_CONTROLLER_ID}@127.0.0.1:{self.controller.controller_port}"
        for node in self.nodes:
            node.write_properties(self.voters, brokers=brokers,
                                  session_timeout_ms=session_timeout_ms,
                                  heartbeat_interval_ms=heartbeat_interval_ms)

    @property
    def nodes(self) -> list[KafkaNode]:
        """The controller, then the brokers."""
        return [self.controller, *self.brokers.values()]

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``host:port``."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def bootstrap_without(self, broker_id: int) -> str:
        """Every broker's ``host:port`` but ``broker_id``'s."""
        return ",".join(b.bootstrap for i, b in self.brokers.items() if i != broker_id)

    def up(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Format, start the controller, start the brokers; seconds from the first start to
        every broker ready. Kills whatever it started when a node fails."""
        try:
            with ThreadPoolExecutor(len(self.nodes)) as pool:
                list(pool.map(lambda node: node.format(), self.nodes))
            t0 = time.perf_counter()
            self.controller.start(timeout_s)
            with ThreadPoolExecutor(len(self.brokers)) as pool:
                list(pool.map(lambda node: node.start(timeout_s), self.brokers.values()))
            return time.perf_counter() - t0
        except BaseException:
            self.down()
            raise

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker (its own pid) and reap it."""
        self.brokers[broker_id].kill()

    def down(self) -> None:
        """SIGKILL every node that still runs (brokers first), by its pid."""
        for node in [*self.brokers.values(), self.controller]:
            node.kill()

    def rss_bytes(self) -> int:
        """Resident memory of the running brokers (the controller left out: seglog's
        counterpart, ZooKeeper, is left out too)."""
        return sum(b.rss_bytes() for b in self.brokers.values())

    def log_tails(self, lines: int = 15) -> str:
        """The end of every node's console log."""
        return "\n".join(f"-- node {n.node_id}:\n{n.log_tail(lines)}" for n in self.nodes)


# --- client subprocesses: the failover producer and the epoch reader -------------------------

def _client_failover(args: argparse.Namespace) -> dict:
    """Send one record every ``1 / args.rate`` s (acks=all) to partition 0 until stdin says
    ``stop`` (or closes) or ``args.max_s`` passes; print ``{"ready": true}`` once
    ``args.warmup`` writes were acknowledged. Returns every record's ``[seq, sent_t,
    ack_t, offset, error]`` (``time.monotonic()``, the same clock as the parent's)."""
    from confluent_kafka import Producer

    config = dict(FAILOVER_PRODUCER_CONFIG)
    config.update({"bootstrap.servers": args.bootstrap,
                   "message.timeout.ms": int(args.max_s * 1000)})
    producer = Producer(config)
    producer.list_topics(args.topic, timeout=30)
    rows: list[list] = []
    acked = [0]

    def delivered(err, msg, seq: int, sent_t: float) -> None:
        ack_t = time.monotonic()
        if err is None:
            acked[0] += 1
            rows.append([seq, sent_t, ack_t, msg.offset(), None])
        else:
            rows.append([seq, sent_t, ack_t, -1, str(err)])

    pad = b"." * max(0, args.record_bytes - 12)
    interval_s = 1.0 / args.rate
    deadline = time.monotonic() + args.max_s
    max_records = int(args.rate * args.max_s) + 1
    next_t, seq, ready, stop = time.monotonic(), 0, False, False
    while not stop and seq < max_records and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_t:
            next_t = max(next_t + interval_s, now - 1.0)  # no burst after a stall
            sent_t = now
            producer.produce(args.topic, b"%012d" % seq + pad, partition=0,
                             on_delivery=_bind_delivery(delivered, seq, sent_t))
            seq += 1
        producer.poll(max(0.0, min(0.002, next_t - time.monotonic())))
        if not ready and acked[0] >= args.warmup:
            print(json.dumps({"ready": True}), flush=True)
            ready = True
        if ready and select.select([sys.stdin], [], [], 0)[0]:
            line = sys.stdin.readline()
            stop = line == "" or line.strip() == "stop"
    left = producer.flush(10.0)
    return {"sent": seq, "undelivered": left, "ready": ready, "rows": rows}


def _bind_delivery(fn: Callable[..., None], seq: int, sent_t: float) -> Callable[..., None]:
    """``fn(err, msg, seq, sent_t)`` as a delivery callback ``(err, msg)``."""
    return lambda err, msg: fn(err, msg, seq, sent_t)


def _client_epochs(args: argparse.Namespace) -> dict:
    """Read partition 0 from its start to its high watermark; the leader epoch of each run of
    records as ``[[epoch, first_offset], ...]`` and the high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"epochs-{os.getpid()}",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    deadline = time.monotonic() + args.timeout_s
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(args.topic, 0),
                                                   timeout=min(30.0, args.timeout_s))
        consumer.assign([TopicPartition(args.topic, 0, low)])
        runs: list[list[int]] = []
        position = low
        while position < high:
            if time.monotonic() > deadline:
                return {"error": f"timed out at offset {position} of {high}"}
            for msg in consumer.consume(num_messages=5_000, timeout=0.5):
                if msg.error():
                    return {"error": str(msg.error())}
                epoch, offset = msg.leader_epoch(), msg.offset()
                if epoch is None or epoch < 0 or offset is None:
                    return {"error": f"offset {offset}: no leader epoch in the batch"}
                if not runs or runs[-1][0] != epoch:
                    runs.append([epoch, offset])
                position = offset + 1
    finally:
        consumer.close()
    return {"epochs": runs, "high": high}


_CLIENTS: dict[str, Callable[[argparse.Namespace], dict]] = {
    "failover": _client_failover, "epochs": _client_epochs}


def client_main(argv: list[str] | None = None) -> int:
    """Entry of a client subprocess (``python -m seglog.bench.cluster <kind> ...``): one JSON
    line on stdout with the result or an ``error`` (``failover`` prints a ``ready`` line
    first)."""
    parser = argparse.ArgumentParser(prog="seglog.bench.cluster")
    parser.add_argument("kind", choices=sorted(_CLIENTS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, default=FAILOVER_RATE)
    parser.add_argument("--warmup", type=int, default=FAILOVER_WARMUP_ACKS)
    parser.add_argument("--max-s", type=float, default=FAILOVER_MAX_S + 30)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    args = parser.parse_args(argv)
    try:
        out = _CLIENTS[args.kind](args)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a failed row
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    return 0


def _run_epochs_client(bootstrap: str, topic: str, timeout_s: float = 120.0) -> dict:
    cmd = [sys.executable, "-m", "seglog.bench.cluster", "epochs", "--bootstrap", bootstrap,
           "--topic", topic, "--timeout-s", str(timeout_s)]
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout_s + 60, check=False)
    return _last_json(done.stdout, f"exit {done.returncode}: {done.stderr[-800:]}")


def _last_json(text: str, otherwise: str) -> dict:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": otherwise}


# --- failover --------------------------------------------------------------------------------

def epoch_of(runs: list[list[int]], offset: int) -> int | None:
    """The leader epoch of ``offset`` from ``[[epoch, first_offset], ...]`` (None before the
    first run)."""
    starts = [first for _epoch, first in runs]
    index = bisect.bisect_right(starts, offset) - 1
    return runs[index][0] if index >= 0 else None


def failover_figures(rows: list[list], kill_t: float, runs: list[list[int]]) -> dict:
    """The failover figures from the producer's ``[seq, sent_t, ack_t, offset, error]`` rows,
    the kill's ``time.monotonic()`` and the log's epoch runs (:func:`epoch_of`):
    ``failover_s`` (kill to the first acknowledgement of a record written under a newer epoch
    than the last write acknowledged before the kill), ``last_old_ack_s`` (the last
    acknowledgement from the old epoch, relative to the kill), the epochs, and the counts of
    acknowledged, failed and in-between records. ``{"error": ...}`` when the history does not
    show a failover."""
    acked = sorted((r for r in rows if r[4] is None and r[3] >= 0), key=lambda r: r[2])
    before = [r for r in acked if r[2] < kill_t]
    if not before:
        return {"error": "no write was acknowledged before the kill"}
    epoch_before = epoch_of(runs, max(r[3] for r in before))
    if epoch_before is None:
        return {"error": "the acknowledged offsets are not in the log read back"}
    old: list[tuple[list, int]] = []
    new: list[tuple[list, int]] = []
    for row in acked:
        epoch = epoch_of(runs, row[3])
        if epoch is None:
            continue
        (new if epoch > epoch_before else old).append((row, epoch))
    new_after = [(row, epoch) for row, epoch in new if row[2] >= kill_t]
    if not new_after:
        return {"error": f"no write acknowledged under an epoch newer than {epoch_before} "
                         "after the kill"}
    first_row, epoch_after = new_after[0]
    return {"failover_s": first_row[2] - kill_t,
            "last_old_ack_s": max(row[2] for row, _e in old) - kill_t,
            "first_new_sent_s": first_row[1] - kill_t,
            "epoch_before": float(epoch_before), "epoch_after": float(epoch_after),
            "acked_before": float(len(before)), "acked_after": float(len(new_after)),
            "failed": float(sum(1 for r in rows if r[4] is not None))}


def measure_failover(*, bootstrap: str, survivors: str, topic: str, leader_id: int,
                     kill: Callable[[], object], record_bytes: int,
                     max_s: float = FAILOVER_MAX_S) -> dict:
    """Run the failover producer on ``topic`` (partition 0 led by ``leader_id``), call
    ``kill`` once its writes are acknowledged, wait (bounded by ``max_s``) until Metadata
    from ``survivors`` names another leader, keep sending :data:`FAILOVER_TAIL_S` more, then
    read the log back and compute :func:`failover_figures` (plus ``leader_in_metadata_s`` and
    ``new_leader``)."""
    from confluent_kafka.admin import AdminClient

    cmd = [sys.executable, "-m", "seglog.bench.cluster", "failover", "--bootstrap", bootstrap,
           "--topic", topic, "--record-bytes", str(record_bytes),
           "--max-s", str(max_s + FAILOVER_TAIL_S + 60)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out: dict[str, Any] = {}
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()  # bounded: the client ends itself after --max-s
        if '"ready"' not in line:
            proc.wait(timeout=60)
            return {"error": f"the producer never got acknowledgements: {line.strip()} "
                             f"{(proc.stderr.read() if proc.stderr else '')[-600:]}"}
        kill_t = time.monotonic()
        kill()
        # log_level 2: librdkafka would print every refused connection to the dead broker
        # (Metadata still lists it until the cluster notices).
        admin = AdminClient({"bootstrap.servers": survivors, "log_level": 2})
        deadline = kill_t + max_s
        while time.monotonic() < deadline:
            try:
                meta = admin.list_topics(topic, timeout=1.0).topics.get(topic)
            except Exception:  # noqa: BLE001 - a metadata timeout: ask again
                meta = None
            partition = meta.partitions.get(0) if meta is not None else None
            if partition is not None and partition.leader not in (-1, leader_id):
                out["leader_in_metadata_s"] = time.monotonic() - kill_t
                out["new_leader"] = float(partition.leader)
                break
            time.sleep(0.05)
        time.sleep(FAILOVER_TAIL_S)
        try:
            proc.stdin.write("stop\n")
            proc.stdin.flush()
        except OSError:
            pass
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    result = _last_json(stdout, f"the producer printed nothing: {stderr[-800:]}")
    if "error" in result:
        return result
    epochs = _run_epochs_client(survivors, topic)
    if "error" in epochs:
        return {"error": f"reading the log back: {epochs['error']}"}
    figures = failover_figures(result["rows"], kill_t, epochs["epochs"])
    if "error" in figures:
        if "leader_in_metadata_s" not in out:
            figures["error"] += f"; Metadata named no new leader in {max_s:.0f} s"
        return figures
    out.update(figures)
    out["sent"] = float(result["sent"])
    return out


# --- topics and throughput -------------------------------------------------------------------

def create_topics(bootstrap: str, specs: list[tuple[str, list[int], dict[str, str]]],
                  timeout_s: float = 60.0) -> None:
    """Create one-partition topics ``(name, replicas, config)`` through confluent-kafka's
    AdminClient and wait until Metadata shows each with its first replica leading and every
    replica listed. RuntimeError otherwise.

    INVALID_REPLICA_ASSIGNMENT (39) is asked again until ``timeout_s``: right after a broker
    restarts, the broker serving CreateTopics may not have seen its registration yet (Kafka
    2.8's controller answers the same until its broker-change event runs)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    deadline = time.monotonic() + timeout_s
    todo = list(specs)
    while todo:
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=1, replica_assignment=[replicas], config=config)
             for name, replicas, config in todo],
            operation_timeout=timeout_s, request_timeout=timeout_s)
        again = []
        for name, replicas, config in todo:
            try:
                futures[name].result(timeout=timeout_s)
            except Exception as exc:  # noqa: BLE001 - a KafkaException with the broker's error
                error = exc.args[0] if exc.args else None
                code = error.code() if isinstance(error, KafkaError) else None
                if code != KafkaError.INVALID_REPLICA_ASSIGNMENT or \
                        time.monotonic() > deadline:
                    raise RuntimeError(f"CreateTopics {name}: {exc}") from None
                again.append((name, replicas, config))
        todo = again
        if todo:
            time.sleep(0.1)
    pending = {name: replicas for name, replicas, _c in specs}
    while pending:
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics without their leader in Metadata: {sorted(pending)}")
        meta = admin.list_topics(timeout=10)
        for name in list(pending):
            topic = meta.topics.get(name)
            partition = topic.partitions.get(0) if topic is not None else None
            if partition is not None and partition.leader == pending[name][0] \
                    and len(partition.isrs) == len(pending[name]):
                del pending[name]
        time.sleep(0.05)


def perf_producer(ref: KafkaRef, scratch: Path, bootstrap: str, topic: str, records: int,
                  record_bytes: int) -> dict:
    """Kafka's ProducerPerformance, acks=all, the ``broker`` part's settings; its summary
    (``records_per_s``, latencies) or ``{"error": ...}``."""
    done = ref.run_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        ["--topic", topic, "--num-records", str(records), "--record-size", str(record_bytes),
         "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
         "acks=all", "enable.idempotence=false", "batch.size=65536", "linger.ms=5",
         "compression.type=none", "buffer.memory=67108864"],
        run_dir=scratch, heap_mb=PERF_HEAP_MB, tool=False, timeout_s=CLIENT_TIMEOUT_S)
    summary = parse_producer_performance(done.stdout)
    if done.returncode != 0 or summary is None:
        return {"error": f"ProducerPerformance exit {done.returncode}: "
                         f"{(done.stdout + done.stderr)[-600:]}"}
    return summary


def anon_rss_bytes(pid: int) -> int:
    """Process ``pid``'s anonymous resident memory (``RssAnon``: heaps, without the file
    pages it maps, such as segments read through mmap), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Side:
    """What one cluster measured: figures over runs (``figures[key]``) and errors by key."""

    def __init__(self, name: str):
        self.name = name
        self.figures: dict[str, Figure] = {}
        self.errors: dict[str, str] = {}
        self.params: dict[str, Any] = {}

    def add(self, key: str, value: float, unit: str) -> None:
        """One more run's ``value`` of ``key``."""
        self.figures.setdefault(key, Figure(unit=unit)).add(value)

    def record(self, key: str, outcome: dict, field_name: str, unit: str) -> float | None:
        """Keep ``outcome[field_name]`` under ``key`` (returned), or its error (None)."""
        if "error" in outcome:
            self.errors.setdefault(key, str(outcome["error"])[:400])
            return None
        value = float(outcome[field_name])
        self.add(key, value, unit)
        return value


def measure_throughput(side: Side, *, bootstrap: str, ref: KafkaRef | None, scratch: Path,
                       topics: dict[tuple[int, int], str], runs: int, records: int,
                       record_bytes: int, progress) -> None:
    """For each run, each client, RF 1 then RF 3 (``topics[(run, rf)]``): records/s into
    ``side`` as ``<client>.rf<rf>``, and the run's RF 3 / RF 1 ratio as
    ``<client>.rf3_over_rf1``."""
    for run_index in range(runs):
        for client, label in CLIENTS:
            if client == "perf" and ref is None:
                continue
            rates: dict[int, float | None] = {}
            for rf in (1, 3):
                topic = topics[(run_index, rf)] + f"-{client}"
                progress.step(f"{side.name}: {label}, RF {rf}, acks=all, {records:,} records",
                              run_index + 1, runs)
                if client == "perf" and ref is not None:
                    outcome = perf_producer(ref, scratch, bootstrap, topic, records,
                                            record_bytes)
                else:
                    outcome = run_client("produce", bootstrap, topic, records=records,
                                         record_bytes=record_bytes, acks="all")
                rates[rf] = side.record(f"{client}.rf{rf}", outcome, "records_per_s",
                                        UNIT_RECORDS_PER_S)
            rf1, rf3 = rates.get(1), rates.get(3)
            if rf1 and rf3:
                side.add(f"{client}.rf3_over_rf1", rf3 / rf1, UNIT_RATIO)


def _topic_specs(runs: int, leader: int, others: list[int], clients: list[str]
                 ) -> tuple[dict[tuple[int, int], str], list[tuple[str, list[int], dict]]]:
    """Fresh topics per run, RF and client (``t<run>-rf<rf>-<client>``): RF 1 on ``leader``,
    RF 3 led by ``leader`` with ``min.insync.replicas``."""
    names: dict[tuple[int, int], str] = {}
    specs: list[tuple[str, list[int], dict]] = []
    replicated = {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)}
    for run_index in range(runs):
        for rf in (1, 3):
            names[(run_index, rf)] = f"t{run_index}-rf{rf}"
            for client in clients:
                specs.append((f"t{run_index}-rf{rf}-{client}",
                              [leader] if rf == 1 else [leader, *others],
                              {} if rf == 1 else dict(replicated)))
    return names, specs


# --- the two clusters ------------------------------------------------------------------------

def measure_seglog(side: Side, *, scratch: Path, ref: KafkaRef | None, runs: int,
                   records: int, record_bytes: int, failovers: int, progress) -> None:
    """Bring up a LocalCluster, measure throughput and ``failovers`` failovers (the killed
    leader restarted between them), bring it down."""
    from seglog.cluster.local import LocalCluster

    cluster = LocalCluster(scratch / "seglog-cluster", BROKERS,
                           broker_configs={"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS},
                           backend=os.environ.get("SEGLOG_BACKEND") or None)
    side.params["zookeeper.session.timeout.ms"] = SESSION_TIMEOUT_MS
    progress.step("seglog: starting ZooKeeper and 3 brokers")
    t0 = time.perf_counter()
    try:
        cluster.up(timeout_s=START_TIMEOUT_S)
        side.add("start_s", time.perf_counter() - t0, UNIT_SECONDS)
        controller = cluster.controller_id()
        # The partitions' leader is never the controller: Kafka's is a node of its own.
        leader = next(b for b in sorted(cluster.brokers) if b != controller)
        others = [b for b in sorted(cluster.brokers) if b != leader]
        side.params.update(controller=controller, leader=leader)
        clients = [c for c, _l in CLIENTS if c == "ck" or ref is not None]
        topics, specs = _topic_specs(runs, leader, others, clients)
        progress.step(f"seglog: creating {len(specs)} topics")
        create_topics(cluster.bootstrap_servers, specs)
        measure_throughput(side, bootstrap=cluster.bootstrap_servers, ref=ref, scratch=scratch,
                           topics=topics, runs=runs, records=records,
                           record_bytes=record_bytes, progress=progress)
        pids = [pid for pid in (cluster.pid(b) for b in cluster.brokers) if pid is not None]
        side.add("rss_bytes", sum(proc_status(pid)["rss_bytes"] for pid in pids), "bytes")
        side.add("anon_rss_bytes", sum(anon_rss_bytes(pid) for pid in pids), "bytes")
        survivors = ",".join(cluster.address(b) for b in others)
        for round_index in range(failovers):
            if round_index:
                progress.step(f"seglog: restarting broker {leader}")
                cluster.start(leader, timeout_s=START_TIMEOUT_S)
            progress.step(f"seglog: failover (kill -9 of broker {leader}, the leader)",
                          round_index + 1, failovers)
            topic = f"failover-{round_index}"
            create_topics(cluster.bootstrap_servers, [(topic, [leader, *others], {
                "min.insync.replicas": str(MIN_INSYNC_REPLICAS)})])
            outcome = measure_failover(bootstrap=cluster.bootstrap_servers, survivors=survivors,
                                       topic=topic, leader_id=leader,
                                       kill=lambda: cluster.kill(leader),
                                       record_bytes=record_bytes)
            _record_failover(side, outcome)
            if "error" in outcome:
                side.errors["failover"] += "\n" + "\n".join(
                    f"-- broker {b}:\n{cluster.log_tail(b, 8)}" for b in cluster.brokers)
                break
    except Exception as exc:  # noqa: BLE001 - the part reports it as a failed row
        side.errors.setdefault("cluster", f"{type(exc).__name__}: {exc}"[:1500])
    finally:
        progress.step("seglog: stopping the cluster")
        cluster.down()
        side.params["broker_log_problems"] = broker_log_problems(
            Path(b.log_path) for b in cluster.brokers.values())


#: What counts as a problem in a seglog broker's output (its log lines carry the level).
_PROBLEM_MARKERS = (" ERROR ", " CRITICAL ", "Traceback (most recent call last)")


def broker_log_problems(paths, limit: int = 5) -> list[str]:
    """The first ``limit`` ERROR/CRITICAL lines and tracebacks of the brokers' outputs
    (``<path name>: <line>``), so a run that measured through a misbehaving broker says so."""
    found: list[str] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if any(marker in line for marker in _PROBLEM_MARKERS):
                found.append(f"{Path(path).name}: {line.strip()[:300]}")
                if len(found) >= limit:
                    return found
    return found


def measure_kafka(side: Side, *, scratch: Path, ref: KafkaRef, runs: int, records: int,
                  record_bytes: int, failovers: int, progress) -> None:
    """Bring up a KafkaCluster, measure throughput and ``failovers`` failovers (the killed
    leader restarted between them), kill it."""
    cluster = KafkaCluster(ref, scratch / "kafka-cluster")
    side.params.update({"broker.session.timeout.ms": cluster.session_timeout_ms,
                        "broker.heartbeat.interval.ms": cluster.heartbeat_interval_ms})
    try:
        progress.step("kafka: formatting 4 nodes, starting the controller and 3 brokers")
        side.add("start_s", cluster.up(), UNIT_SECONDS)
        leader, others = 0, sorted(b for b in cluster.brokers if b != 0)
        side.params.update(controller=KAFKA_CONTROLLER_ID, leader=leader)
        topics, specs = _topic_specs(runs, leader, others, ["perf", "ck"])
        progress.step(f"kafka: creating {len(specs)} topics")
        create_topics(cluster.bootstrap_servers, specs)
        measure_throughput(side, bootstrap=cluster.bootstrap_servers, ref=ref, scratch=scratch,
                           topics=topics, runs=runs, records=records,
                           record_bytes=record_bytes, progress=progress)
        side.add("rss_bytes", cluster.rss_bytes(), "bytes")
        side.add("anon_rss_bytes", sum(anon_rss_bytes(b.pid) for b in cluster.brokers.values()
                                       if b.pid is not None), "bytes")
        for round_index in range(failovers):
            if round_index:
                progress.step(f"kafka: restarting broker {leader}")
                cluster.brokers[leader].start(START_TIMEOUT_S)
            progress.step(f"kafka: failover (kill -9 of broker {leader}, the leader)",
                          round_index + 1, failovers)
            topic = f"failover-{round_index}"
            create_topics(cluster.bootstrap_servers, [(topic, [leader, *others], {
                "min.insync.replicas": str(MIN_INSYNC_REPLICAS)})])
            outcome = measure_failover(bootstrap=cluster.bootstrap_servers,
                                       survivors=cluster.bootstrap_without(leader),
                                       topic=topic, leader_id=leader,
                                       kill=lambda: cluster.kill(leader),
                                       record_bytes=record_bytes)
            _record_failover(side, outcome)
            if "error" in outcome:
                break
    except Exception as exc:  # noqa: BLE001 - the part reports it as a failed row
        side.errors.setdefault("cluster", f"{type(exc).__name__}: {exc}\n"
                                          f"{cluster.log_tails()}"[:3000])
    finally:
        progress.step("kafka: killing the cluster (scratch data)")
        cluster.down()


def _record_failover(side: Side, outcome: dict) -> None:
    if "error" in outcome:
        side.errors["failover"] = str(outcome["error"])
        return
    for key, value in outcome.items():
        side.add(f"failover.{key}", float(value),
                 UNIT_SECONDS if key.endswith("_s") else "count")


# --- the part --------------------------------------------------------------------------------

def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def run(ctx) -> PartResult:
    """Measure the seglog cluster, then (standard and full modes, where java and the jars are
    cached) the Kafka cluster; tables, ratios and targets."""
    from seglog.cluster.zookeeper import ZooKeeperNotInstalledError, find_zookeeper

    try:
        find_zookeeper()
    except ZooKeeperNotInstalledError as exc:
        raise Unavailable(str(exc)) from None
    if not has_confluent_kafka():
        raise Unavailable("needs confluent-kafka (the bench extra)")
    mode = ctx.config.mode
    quick = mode == "quick"
    records = ctx.config.records if ctx.config.records is not None else \
        RECORDS.get(mode, RECORDS["standard"])
    runs = 1 if quick else max(1, min(ctx.profile.runs, 3))
    if ctx.config.runs is not None:
        runs = max(1, ctx.config.runs)
    record_bytes = ctx.record_bytes
    ref, why = (None, "not in quick mode") if quick else find_kafka()
    result = PartResult(NAME, TITLE, params={
        "records": records, "record_bytes": record_bytes, "runs": runs, "brokers": BROKERS,
        "acks": "all", "min.insync.replicas (RF 3)": MIN_INSYNC_REPLICAS,
        "session_timeout_ms": SESSION_TIMEOUT_MS, "load_average_at_start": _load()})
    scratch = Path(ctx.scratch(NAME))
    sides: dict[str, Side] = {SEGLOG: Side(SEGLOG)}
    measure_seglog(sides[SEGLOG], scratch=scratch, ref=ref, runs=runs, records=records,
                   record_bytes=record_bytes, failovers=runs, progress=ctx.progress)
    if ref is None:
        result.notes.append(f"The Kafka cluster and ProducerPerformance were not measured: "
                            f"{why}.")
    else:
        result.params["kafka"] = ref.version
        sides[KAFKA] = Side(KAFKA)
        measure_kafka(sides[KAFKA], scratch=scratch, ref=ref, runs=runs, records=records,
                      record_bytes=record_bytes, failovers=runs, progress=ctx.progress)
    result.params["load_average_at_end"] = _load()
    for side in sides.values():
        for key, figure in side.figures.items():
            result.figures[f"{side.name}.{key}"] = figure
    _cross_ratios(result, sides)
    result.tables += _tables(result, sides, records, record_bytes)
    result.notes += _sentences(sides)
    bars = {f"{side} {label} RF {rf}": f"{side}.{client}.rf{rf}" for side in sides
            for client, label in CLIENTS for rf in (1, 3)
            if f"{side}.{client}.rf{rf}" in result.figures}
    if bars:
        result.charts.append({"title": "cluster: acks=all produce records/s, RF 1 and RF 3",
                              "unit": UNIT_RECORDS_PER_S, "bars": bars})
    return result


def _cross_ratios(result: PartResult, sides: dict[str, Side]) -> None:
    """seglog / Kafka per client and RF (run i against run i), and the targets."""
    if KAFKA not in sides:
        return
    for client, label in CLIENTS:
        for rf in (1, 3):
            ours = sides[SEGLOG].figures.get(f"{client}.rf{rf}")
            theirs = sides[KAFKA].figures.get(f"{client}.rf{rf}")
            if ours is None or theirs is None or not ours.values or not theirs.values:
                continue
            ratio = Figure(unit=UNIT_RATIO)
            for a, b in zip(ours.values, theirs.values):
                ratio.add(a / b if b else float("nan"))
            result.figures[f"ratio.{client}.rf{rf}.seglog_over_kafka"] = ratio
            if rf == 3:
                result.targets.append(Target(f"{label}, RF 3, acks=all: seglog / Kafka",
                                             ">= 1.0x Kafka", ratio.median, 1.0))


def _fmt(figure: Figure | None, fmt: Callable[[float], str]) -> str:
    if figure is None or not figure.values:
        return "n/a"
    if len(figure.values) == 1:
        return fmt(figure.median)
    return f"{fmt(figure.median)} ({fmt(figure.min)}..{fmt(figure.max)})"


def _ratio_text(value: float) -> str:
    return f"{value:.2f}x"


def _cell(side: Side | None, key: str, fmt: Callable[[float], str],
          error_keys: tuple[str, ...] = ()) -> str:
    if side is None:
        return "-"
    figure = side.figures.get(key)
    if figure is not None and figure.values:
        return _fmt(figure, fmt)
    for failed in (key, *error_keys, "cluster"):
        if failed in side.errors:
            return "failed: " + side.errors[failed].splitlines()[0][:80]
    return "n/a"


def _time_ratio(seg: Side | None, kaf: Side | None, key: str) -> str:
    """The medians' ratio seglog / Kafka of a time (below 1: seglog is faster)."""
    if seg is None or kaf is None or key not in seg.figures or key not in kaf.figures:
        return "n/a"
    theirs = kaf.figures[key].median
    return _ratio_text(seg.figures[key].median / theirs) if theirs else "n/a"


def _tables(result: PartResult, sides: dict[str, Side], records: int,
            record_bytes: int) -> list[Table]:
    seg, kaf = sides.get(SEGLOG), sides.get(KAFKA)
    runs = result.params["runs"]
    tput = Table(f"produce throughput, acks=all, one partition, {records:,} records of "
                 f"{record_bytes} B, {BROKERS} brokers (records/s; median of {runs}, min..max)",
                 ["client", "seglog RF 1", "seglog RF 3", "seglog RF 3 / RF 1", "Kafka RF 1",
                  "Kafka RF 3", "Kafka RF 3 / RF 1", "seglog / Kafka at RF 3"])
    for client, label in CLIENTS:
        if not any(side is not None and any(k.startswith(client + ".") for k in
                                            (*side.figures, *side.errors))
                   for side in (seg, kaf)) and client == "perf":
            continue
        cross = result.figures.get(f"ratio.{client}.rf3.seglog_over_kafka")
        tput.add(label, _cell(seg, f"{client}.rf1", si), _cell(seg, f"{client}.rf3", si),
                 _cell(seg, f"{client}.rf3_over_rf1", _ratio_text),
                 _cell(kaf, f"{client}.rf1", si), _cell(kaf, f"{client}.rf3", si),
                 _cell(kaf, f"{client}.rf3_over_rf1", _ratio_text),
                 _fmt(cross, _ratio_text) if cross is not None else "n/a")
    secs = lambda v: f"{v:.2f}"  # noqa: E731
    whole = lambda v: f"{v:.0f}"  # noqa: E731
    count = max((len(side.figures[k].values) for side in sides.values()
                 for k in ("failover.failover_s",) if k in side.figures), default=0)
    fail = Table("failover: kill -9 of the partition leader under an acks=all producer "
                 f"({FAILOVER_RATE} records/s offered), seconds from the kill (median of "
                 f"{count}, min..max)",
                 ["figure", "seglog (ZooKeeper)", "Kafka (KRaft)", "seglog / Kafka"])
    fail.add("failure detection setting",
             f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}" if seg else "-",
             (f"broker.session.timeout.ms={kaf.params.get('broker.session.timeout.ms')}, "
              f"broker.heartbeat.interval.ms={kaf.params.get('broker.heartbeat.interval.ms')}")
             if kaf else "-")
    for key, label, fmt in (
            ("failover.failover_s", "first acknowledged write on the new leader, s", secs),
            ("failover.leader_in_metadata_s", "Metadata names the new leader, s", secs),
            ("failover.last_old_ack_s", "last acknowledgement from the old leader, ms",
             lambda v: f"{v * 1000:+.1f}"),
            ("failover.epoch_before", "leader epoch before -> after", whole),
            ("failover.acked_before", "writes acknowledged before the kill / after it "
                                      "(new leader)", whole),
            ("failover.failed", "sends that failed", whole)):
        cells = []
        for side in (seg, kaf):
            if side is None:
                cells.append("-")
            elif key == "failover.epoch_before" and key in side.figures:
                cells.append(f"{_fmt(side.figures[key], whole)} -> "
                             f"{_fmt(side.figures['failover.epoch_after'], whole)}")
            elif key == "failover.acked_before" and key in side.figures:
                cells.append(f"{_fmt(side.figures[key], whole)} / "
                             f"{_fmt(side.figures['failover.acked_after'], whole)}")
            else:
                cells.append(_cell(side, key, fmt, ("failover",)))
        ratio = "" if key not in ("failover.failover_s", "failover.leader_in_metadata_s") \
            else _time_ratio(seg, kaf, key)
        fail.add(label, *cells, ratio)
    mib = lambda v: f"{v / MiB:.0f}"  # noqa: E731
    procs = Table("the clusters", ["figure", "seglog", "Kafka"])
    procs.add("start to every broker ready, s (Kafka: after formatting)",
              _cell(seg, "start_s", secs), _cell(kaf, "start_s", secs))
    procs.add("RSS of the 3 brokers after the throughput runs, MiB",
              _cell(seg, "rss_bytes", mib), _cell(kaf, "rss_bytes", mib))
    procs.add("of which anonymous (RssAnon: heaps; the rest is mapped files), MiB",
              _cell(seg, "anon_rss_bytes", mib), _cell(kaf, "anon_rss_bytes", mib))
    return [tput, fail, procs]


def _sentences(sides: dict[str, Side]) -> list[str]:
    out = []
    for side in sides.values():
        for key, error in side.errors.items():
            out.append(f"{side.name}: {key} failed: {error[:1500]}")
    seg = sides.get(SEGLOG)
    problems = seg.params.get("broker_log_problems") if seg else None
    if problems:
        out.append("seglog brokers logged errors during the run (first "
                   f"{len(problems)}): " + " | ".join(problems))
    out.append(
        f"seglog: {BROKERS} `seglog serve` processes over one ZooKeeper "
        f"(zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}); the partitions are led by broker "
        f"{seg.params.get('leader', '?') if seg else '?'}, not the controller "
        f"({seg.params.get('controller', '?') if seg else '?'}).")
    if KAFKA in sides:
        out.append(
            f"Kafka: {BROKERS} broker-only nodes and one controller-only node in KRaft mode "
            "(Kafka 4 has no ZooKeeper mode: the comparison is of replication, not of metadata "
            "stores), broker.session.timeout.ms="
            f"{sides[KAFKA].params.get('broker.session.timeout.ms')} (Kafka's default 9000), "
            f"heartbeats every {sides[KAFKA].params.get('broker.heartbeat.interval.ms')} ms.")
    out.append(f"RF 3 topics have min.insync.replicas={MIN_INSYNC_REPLICAS}; each run writes "
               "fresh topics, RF 1 then RF 3, so the RF 3 / RF 1 ratio is per run. The "
               "failover producer: " + ", ".join(f"{k}={v}" for k, v in
                                                  FAILOVER_PRODUCER_CONFIG.items()) + ".")
    return out


if __name__ == "__main__":
    raise SystemExit(client_main())
