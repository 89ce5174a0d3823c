"""Part ``kafka``: a real Apache Kafka broker as a peer, measured with Kafka's own perf tools.

Apache Kafka is the reference seglog follows. This module runs it
from the jars that ``ci/kafka-ref.sh`` caches in ``~/.cache/seglog/kafka-<version>/lib`` (or
``$SEGLOG_KAFKA_LIB``): one single-node KRaft broker+controller on 127.0.0.1, formatted fresh
in a scratch directory, with a small heap. The same machinery (:func:`find_kafka`,
:class:`KafkaRef`, :class:`KafkaBroker`) serves the tests in ``tests/kafka/``, which use the
broker and ``kafka-dump-log`` as the oracle for seglog's files.

The bench part runs ``org.apache.kafka.tools.ProducerPerformance`` (N records of
``--record-bytes``, ``acks=1``, no idempotence, ``linger.ms=5``, 64 KiB batches, no
compression) and then ``ConsumerPerformance`` (the same N records, a fresh group) against the
broker, and prints records/s, MB/s (MiB, as Kafka prints them), the producer's latency
percentiles, the broker's resident memory after the run and how long it took to become ready.
Back of the envelope: one partition, one client JVM and the broker share 2 cores; Kafka's own
benchmark reaches about 1-2 M records/s of 100 bytes per partition on a big machine, so a few
hundred thousand records/s is what to expect here. Without ``java`` or the jars the part is
*unavailable* in one line and the rest of the bench runs.

The next issue (the wire broker) puts ``seglog serve`` beside it with the same two tools.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..storage import checkpoints
from .data import Unavailable
from .stats import UNIT_BYTES_PER_S, UNIT_RECORDS_PER_S, UNIT_SECONDS, si
from .table import PartResult, Table

NAME = "kafka"
TITLE = "a real Apache Kafka broker with Kafka's own perf tools"

#: The pinned Kafka release (``ci/kafka-ref.sh`` fetches it); ``SEGLOG_KAFKA_VERSION`` picks
#: another cached one (4.1.1 is the second pin).
KAFKA_VERSION = "4.4.0"
#: What a test or the bench says when Kafka cannot run here.
SKIP_REASON = "needs java + the Kafka jars: run ci/kafka-ref.sh"
#: The broker's heap (Kafka's scripts use 1 GiB; the broker holds nothing big here).
BROKER_HEAP_MB = 512
#: Heap of the short command-line tools (format, dump-log).
TOOL_HEAP_MB = 256
#: Heap of the perf tools (``bin/*perf-test.sh`` set 512 MiB).
PERF_HEAP_MB = 512
#: How long a broker may take to answer before the start counts as failed.
BROKER_START_S_MAX = 180.0
#: How long a SIGTERM'd broker may take to stop before it is killed.
BROKER_STOP_S_MAX = 60.0
#: The line ``KafkaRaftServer.startup()`` logs once the broker is unfenced and serving.
READY_LINE = "Kafka Server started"

#: Records of ``--record-bytes`` sent by ProducerPerformance per mode.
PERF_RECORDS = {"quick": 50_000, "standard": 500_000, "full": 1_000_000}

_BROKER_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.req.name = kafka.request.logger
logger.req.level = WARN
"""
_TOOLS_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = STDERR
appender.out.target = SYSTEM_ERR
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = STDERR
"""

# A single combined KRaft node (process.roles=broker,controller). Internal topics get one
# partition (the defaults of 50 cost seconds), groups join without the 3 s delay, and the
# cleaner's dedupe buffer (allocated on the heap at start) is 32 MiB instead of 128.
_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data_dir}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.cleaner.dedupe.buffer.size=33554432
num.network.threads=2
num.io.threads=4
"""


def cache_dir() -> Path:
    """Where ``ci/kafka-ref.sh`` keeps ``kafka-<version>/lib`` (same rule as the script)."""
    explicit = os.environ.get("SEGLOG_KAFKA_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "seglog"


@dataclass(frozen=True)
class KafkaRef:
    """A usable Kafka: the ``java`` binary, the lib dir of jars and the Kafka version."""

    java: str
    lib_dir: Path
    version: str

    @property
    def classpath(self) -> str:
        """Every jar of the lib dir (Java expands ``dir/*``)."""
        return str(self.lib_dir / "*")

    def has_class(self, class_name: str) -> bool:
        """Whether a jar of the lib dir holds ``class_name`` (dotted)."""
        entry = class_name.replace(".", "/") + ".class"
        for jar in sorted(self.lib_dir.glob("kafka*.jar")):
            try:
                with zipfile.ZipFile(jar) as z:
                    if entry in z.namelist():
                        return True
            except (OSError, zipfile.BadZipFile):
                continue
        return False

    @property
    def dump_log_class(self) -> str:
        """``kafka-dump-log``'s main class: moved to the tools jar in Kafka 4.3 (KAFKA-14579)."""
        new = "org.apache.kafka.tools.DumpLogSegments"
        return new if self.has_class(new) else "kafka.tools.DumpLogSegments"

    def java_command(self, main_class: str, args: list[str], *, run_dir: Path,
                     heap_mb: int = TOOL_HEAP_MB, tool: bool = True,
                     log4j: str | None = None) -> list[str]:
        """The ``java`` command line for ``main_class args``. ``tool=True`` adds the flags that
        make a short JVM start fast (serial GC, C1 only); the broker and perf tools take
        Kafka's own (G1). ``run_dir`` gets the log4j config and the JVM's temp dir (zstd-jni
        and snappy-java unpack native libraries there)."""
        tmp = run_dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        if log4j is None:
            log4j = str(_write_once(run_dir / "tools-log4j2.properties", _TOOLS_LOG4J))
        flags = [f"-Xmx{heap_mb}m"]
        if tool:
            flags += ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        else:
            flags += [f"-Xms{heap_mb}m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                      "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"]
        flags += ["-Djava.awt.headless=true", "-Duser.language=en", "-Duser.country=US",
                  f"-Djava.io.tmpdir={tmp}", f"-Dlog4j2.configurationFile={log4j}"]
        return [self.java, *flags, "-cp", self.classpath, main_class, *args]

    def run_tool(self, main_class: str, args: list[str], *, run_dir: Path,
                 timeout_s: float = 300.0, heap_mb: int = TOOL_HEAP_MB,
                 tool: bool = True) -> subprocess.CompletedProcess:
        """Run a Kafka command-line tool to completion; stdout and stderr as text."""
        cmd = self.java_command(main_class, args, run_dir=run_dir, heap_mb=heap_mb, tool=tool)
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=timeout_s, check=False)


def find_kafka(version: str | None = None) -> tuple[KafkaRef | None, str]:
    """``(KafkaRef, "")`` when java and the jars are here, else ``(None, why not)``.

    The lib dir is ``$SEGLOG_KAFKA_LIB`` if set, else ``<cache>/kafka-<version>/lib`` with
    ``version`` defaulting to ``$SEGLOG_KAFKA_VERSION`` or :data:`KAFKA_VERSION`.
    """
    java = shutil.which("java")
    explicit = os.environ.get("SEGLOG_KAFKA_LIB")
    version = version or os.environ.get("SEGLOG_KAFKA_VERSION") or KAFKA_VERSION
    lib = Path(explicit) if explicit else cache_dir() / f"kafka-{version}" / "lib"
    if java is None:
        return None, f"{SKIP_REASON} (no java on PATH)"
    jars = sorted(lib.glob("kafka_2.13-*.jar")) if lib.is_dir() else []
    if not jars:
        return None, f"{SKIP_REASON} (no Kafka jars in {lib})"
    found = re.match(r"kafka_2\.13-(.+)\.jar$", jars[0].name)
    return KafkaRef(java, lib, found.group(1) if found else version), ""


def kafka_uuid() -> str:
    """A random Kafka UUID in its 22-character base64url form (cluster ids, as
    ``kafka-storage random-uuid`` prints them, without a JVM; never one starting with "-",
    which ``kafka-storage format -t`` would take for a flag)."""
    return checkpoints.uuid_to_kafka_str(checkpoints.new_kafka_uuid())


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_once(path: Path, text: str) -> Path:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """``{"rss_bytes", "vm_bytes", "hwm_bytes"}`` of process ``pid`` from /proc/<pid>/status
    (``VmRSS``, ``VmSize``, ``VmHWM``); zeros when it is gone."""
    out = {"rss_bytes": 0, "vm_bytes": 0, "hwm_bytes": 0}
    keys = {"VmRSS:": "rss_bytes", "VmSize:": "vm_bytes", "VmHWM:": "hwm_bytes"}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                name = line.split(None, 1)[0] if line.strip() else ""
                if name in keys:
                    out[keys[name]] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def process_rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (``VmRSS``), 0 when it is gone."""
    return proc_status(pid)["rss_bytes"]


class BrokerError(RuntimeError):
    """The broker failed to format, start or stop; the message ends with its log's tail."""


def stop_process(proc: subprocess.Popen | None, timeout_s: float) -> int | None:
    """SIGTERM ``proc`` (a process this bench started) and wait; SIGKILL after
    ``timeout_s``. Its exit code, None for no process."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_process(proc)
    return proc.returncode


def kill_process(proc: subprocess.Popen | None) -> None:
    """SIGKILL ``proc`` (a process this bench started) unless it has exited, and reap it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


class KafkaBroker:
    """One single-node KRaft broker+controller of Kafka ``ref`` in ``run_dir``.

    ``run_dir`` holds ``server.properties``, the log4j config, the broker's console log
    (``kafka.out``, every start appended) and the data dir ``data/``. Ports are picked free on
    127.0.0.1 once and kept across restarts. :meth:`format` then :meth:`start`; :meth:`stop`
    sends SIGTERM (Kafka's controlled shutdown, which writes ``.kafka_cleanshutdown``) and
    kills the process after :data:`BROKER_STOP_S_MAX`; :meth:`kill` stops it uncleanly.
    ``extra_properties`` are appended to ``server.properties``. Not thread-safe.
    """

    def __init__(self, ref: KafkaRef, run_dir: str | os.PathLike, *,
                 heap_mb: int = BROKER_HEAP_MB, extra_properties: dict | None = None):
        self.ref = ref
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.run_dir / "data"
        self.log_path = self.run_dir / "kafka.out"
        self.heap_mb = heap_mb
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.cluster_id = kafka_uuid()
        self.properties_path = self.run_dir / "server.properties"
        text = _SERVER_PROPERTIES.format(port=self.port, controller_port=self.controller_port,
                                         data_dir=self.data_dir)
        for key, value in (extra_properties or {}).items():
            text += f"{key}={value}\n"
        self.properties_path.write_text(text, encoding="utf-8")
        self._log4j = _write_once(self.run_dir / "broker-log4j2.properties", _BROKER_LOG4J)
        self.process: subprocess.Popen | None = None
        self.start_s: float | None = None  # seconds the last start took to become ready
        self.format_output = ""

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the PLAINTEXT listener, for clients."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running broker's process id (None when stopped)."""
        return self.process.pid if self.process is not None else None

    def __str__(self) -> str:
        return f"the Kafka broker in {self.run_dir}"

    #: ``kafka-storage format``'s quorum argument: this broker is its own single voter (a
    #: cluster's node names none: the voters are in its properties).
    FORMAT_QUORUM_ARGS: tuple[str, ...] = ("--standalone",)

    def format(self, add_scram: Sequence[str] = ()) -> str:
        """``kafka-storage format`` (with :data:`FORMAT_QUORUM_ARGS`): a fresh cluster id,
        meta.properties and the metadata log in ``data/``; each of ``add_scram`` is one
        ``--add-scram`` (``'SCRAM-SHA-256=[name=alice,password=alice-secret]'``: a SCRAM user
        from the start). Returns the tool's output (it names the ``metadata.version``)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        scram_args = [arg for user in add_scram for arg in ("--add-scram", user)]
        done = self.ref.run_tool(
            "kafka.tools.StorageTool",
            ["format", *self.FORMAT_QUORUM_ARGS, "-t", self.cluster_id, "-c",
             str(self.properties_path), *scram_args],
            run_dir=self.run_dir, timeout_s=180)
        self.format_output = done.stdout + done.stderr
        if done.returncode != 0:
            raise BrokerError(f"kafka-storage format of {self} failed (exit "
                              f"{done.returncode}):\n" + self.format_output[-4000:])
        return self.format_output

    @property
    def metadata_version(self) -> str:
        """The ``metadata.version`` the format printed (e.g. ``4.4-IV2``), or ''."""
        found = re.search(r"with metadata\.version (\S+?)\.?$", self.format_output, re.M)
        return found.group(1) if found else ""

    def start(self, timeout_s: float = BROKER_START_S_MAX) -> float:
        """Start the broker and wait until it logs :data:`READY_LINE`; returns the seconds
        that took (also :attr:`start_s`). Raises :class:`BrokerError` (with the log's tail)
        when it exits or does not get ready in ``timeout_s``; the process is then killed."""
        if self.process is not None:
            raise BrokerError("the broker is already running")
        start_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = self.ref.java_command("kafka.Kafka", [str(self.properties_path)],
                                    run_dir=self.run_dir, heap_mb=self.heap_mb, tool=False,
                                    log4j=str(self._log4j))
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as out:
            out.write(f"==== seglog: starting broker at {time.strftime('%H:%M:%S')}\n".encode())
            out.flush()
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = t0 + timeout_s
        while True:
            if READY_LINE in self.log_since(start_at):
                self.start_s = time.perf_counter() - t0
                return self.start_s
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise BrokerError(f"the broker exited with {code} before it was ready:\n"
                                  + self.log_tail())
            if time.perf_counter() > deadline:
                self.kill()
                raise BrokerError(f"the broker was not ready after {timeout_s:.0f} s:\n"
                                  + self.log_tail())
            time.sleep(0.2)

    def log_since(self, position: int = 0) -> str:
        """The broker's console log from byte ``position`` on."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(position)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_size(self) -> int:
        """Bytes in the console log now (a mark for :meth:`log_since`)."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the console log."""
        return "\n".join(self.log_since().splitlines()[-lines:])

    def rss_bytes(self) -> int:
        """The running broker's resident memory (0 when stopped)."""
        return process_rss_bytes(self.process.pid) if self.process is not None else 0

    def stop(self, timeout_s: float = BROKER_STOP_S_MAX) -> int | None:
        """SIGTERM (a controlled shutdown: logs flushed, ``.kafka_cleanshutdown`` written);
        SIGKILL after ``timeout_s``. Returns the exit code (143 after SIGTERM is normal), None
        when it was not running."""
        proc, self.process = self.process, None
        return stop_process(proc, timeout_s)

    def kill(self) -> None:
        """SIGKILL the broker (an unclean stop: the next start recovers)."""
        proc, self.process = self.process, None
        kill_process(proc)

    def __enter__(self) -> "KafkaBroker":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


# --- the bench part ------------------------------------------------------------------------

_PRODUCER_LINE = re.compile(
    r"^(\d+)( steady state)? records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
    r"([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, "
    r"(\d+) ms 99th, (\d+) ms 99.9th\.$", re.M)


def parse_producer_performance(text: str) -> dict | None:
    """The final summary of ProducerPerformance (the last non-steady-state line), or None:
    ``records, records_per_s, mib_per_s, avg_ms, max_ms, p50_ms, p95_ms, p99_ms, p999_ms``."""
    rows = [m for m in _PRODUCER_LINE.finditer(text) if not m.group(2)]
    if not rows:
        return None
    m = rows[-1]
    return {"records": int(m.group(1)), "records_per_s": float(m.group(3)),
            "mib_per_s": float(m.group(4)), "avg_ms": float(m.group(5)),
            "max_ms": float(m.group(6)), "p50_ms": int(m.group(7)), "p95_ms": int(m.group(8)),
            "p99_ms": int(m.group(9)), "p999_ms": int(m.group(10))}


def parse_consumer_performance(text: str) -> dict | None:
    """The result row of ConsumerPerformance (after its ``start.time, end.time, ...``
    header) as a dict of its columns, or None."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if line.startswith("start.time,") and i + 1 < len(lines):
            names = [n.strip() for n in line.split(",")]
            cells = [c.strip() for c in lines[i + 1].split(",")]
            if len(cells) != len(names):
                return None
            out: dict = {}
            for name, cell in zip(names, cells):
                try:
                    out[name] = float(cell)
                except ValueError:
                    out[name] = cell
            return out
    return None


def _records(ctx) -> int:
    if ctx.config.records is not None:
        return ctx.config.records
    return PERF_RECORDS.get(ctx.config.mode, PERF_RECORDS["standard"])



def _tool_failed(name: str, proc: subprocess.CompletedProcess) -> RuntimeError:
    """The error for a Kafka perf tool that failed or printed no summary: its exit code and
    the tails of its output."""
    return RuntimeError(f"{name} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}"
                        f"\n{proc.stderr[-2000:]}")


def run(ctx) -> PartResult:
    """Start a broker in a scratch dir, run ProducerPerformance then ConsumerPerformance
    ``runs`` times on one topic, stop it. Unavailable without java + the jars."""
    ref, why = find_kafka()
    if ref is None:
        raise Unavailable(why)
    records = _records(ctx)
    record_bytes = ctx.record_bytes
    # --quick: one run (the bench smoke run is meant to take under a minute); else up to 3.
    runs = 1 if ctx.config.mode == "quick" else max(1, min(ctx.profile.runs, 3))
    result = PartResult(NAME, TITLE, params={"kafka": ref.version, "records": records,
                                             "record_bytes": record_bytes, "runs": runs,
                                             "broker_heap_mb": BROKER_HEAP_MB})
    scratch = Path(ctx.scratch(NAME))
    broker = KafkaBroker(ref, scratch)
    ctx.progress.step("formatting the Kafka data dir")
    broker.format()
    ctx.progress.step("starting the Kafka broker")
    start_s = broker.start()
    result.figure("broker.start", UNIT_SECONDS).add(start_s)
    rss_idle = broker.rss_bytes()
    try:
        for run_index in range(runs):
            topic = f"bench-{run_index}"
            ctx.progress.step(f"ProducerPerformance {records:,} x {record_bytes} B",
                              run_index + 1, runs)
            produced = ref.run_tool(
                "org.apache.kafka.tools.ProducerPerformance",
                ["--topic", topic, "--num-records", str(records), "--record-size",
                 str(record_bytes), "--throughput", "-1", "--producer-props",
                 f"bootstrap.servers={broker.bootstrap}", "acks=1", "enable.idempotence=false",
                 "batch.size=65536", "linger.ms=5", "compression.type=none",
                 "buffer.memory=67108864"],
                run_dir=scratch, heap_mb=PERF_HEAP_MB, tool=False, timeout_s=600)
            summary = parse_producer_performance(produced.stdout)
            if produced.returncode != 0 or summary is None:
                raise _tool_failed("ProducerPerformance", produced)
            result.figure("produce.records", UNIT_RECORDS_PER_S).add(summary["records_per_s"])
            result.figure("produce.bytes", UNIT_BYTES_PER_S).add(summary["mib_per_s"] * 2**20)
            for key in ("avg_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"):
                result.figure(f"produce.{key}", "ms").add(summary[key])
            ctx.progress.step(f"ConsumerPerformance {records:,} records", run_index + 1, runs)
            consumed = ref.run_tool(
                "org.apache.kafka.tools.ConsumerPerformance",
                ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                 consumer_records_flag(ref), str(records),
                 "--group", f"perf-{run_index}-{os.getpid()}", "--timeout", "30000",
                 "--fetch-size", "1048576"],
                run_dir=scratch, heap_mb=PERF_HEAP_MB, tool=False, timeout_s=600)
            row = parse_consumer_performance(consumed.stdout)
            if consumed.returncode != 0 or row is None:
                raise _tool_failed("ConsumerPerformance", consumed)
            result.figure("consume.records", UNIT_RECORDS_PER_S).add(row["fetch.nMsg.sec"])
            result.figure("consume.bytes", UNIT_BYTES_PER_S).add(row["fetch.MB.sec"] * 2**20)
            result.figure("consume.total_records", UNIT_RECORDS_PER_S).add(row["nMsg.sec"])
            result.figure("consume.rebalance_ms", "ms").add(row["rebalance.time.ms"])
            result.figure("broker.rss", "bytes").add(broker.rss_bytes())
    finally:
        broker.stop()
    result.params["broker_rss_idle_bytes"] = rss_idle
    result.params["metadata_version"] = broker.metadata_version
    result.tables += _tables(result, records, record_bytes)
    result.notes += _sentences(result)
    result.charts.append({"title": "Kafka broker: records/s with Kafka's perf tools",
                          "unit": UNIT_RECORDS_PER_S,
                          "bars": {"ProducerPerformance": "produce.records",
                                   "ConsumerPerformance (fetch)": "consume.records"}})
    return result


def consumer_records_flag(ref: KafkaRef) -> str:
    """ConsumerPerformance's record-count flag: ``--messages`` until 4.2, ``--num-records``
    after (the old name prints a deprecation line)."""
    major_minor = tuple(int(x) for x in re.findall(r"\d+", ref.version)[:2])
    return "--num-records" if major_minor >= (4, 2) else "--messages"


def _spread(fig, fmt) -> str:
    if len(fig.values) < 2:
        return fmt(fig.median)
    return f"{fmt(fig.median)} ({fmt(fig.min)}..{fmt(fig.max)})"


def _tables(result: PartResult, records: int, record_bytes: int) -> list[Table]:
    f = result.figures
    mib = lambda v: f"{v / 2**20:.1f}"  # noqa: E731
    ms = lambda v: f"{v:.0f}"  # noqa: E731
    tput = Table(f"Kafka {result.params['kafka']}, one partition, {records:,} records of "
                 f"{record_bytes} B (median of {len(f['produce.records'].values)}, min..max)",
                 ["tool", "records/s", "MiB/s"])
    tput.add("ProducerPerformance (acks=1, linger 5 ms, 64 KiB batches)",
             _spread(f["produce.records"], si), _spread(f["produce.bytes"], mib))
    tput.add("ConsumerPerformance (fetch phase)", _spread(f["consume.records"], si),
             _spread(f["consume.bytes"], mib))
    tput.add("ConsumerPerformance (incl. group join)",
             _spread(f["consume.total_records"], si), "")
    lat = Table("ProducerPerformance latency, ms (send to ack)",
                ["avg", "p50", "p95", "p99", "p99.9", "max"])
    lat.add(*(_spread(f[f"produce.{k}"], ms)
              for k in ("avg_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")))
    broker = Table("the broker", ["start (format done) to ready, s", "RSS idle, MiB",
                                  "RSS after the run, MiB", "heap, MiB"])
    broker.add(f"{f['broker.start'].median:.1f}", mib(result.params["broker_rss_idle_bytes"]),
               _spread(f["broker.rss"], mib), str(BROKER_HEAP_MB))
    return [tput, lat, broker]


def _sentences(result: PartResult) -> list[str]:
    f = result.figures
    return [f"The real broker ({result.params['kafka']}, metadata.version "
            f"{result.params.get('metadata_version') or '?'}) took "
            f"{f['broker.start'].median:.1f} s from start to '{READY_LINE}' and held "
            f"{f['broker.rss'].median / 2**20:.0f} MiB resident after the runs; its producer "
            f"p99 latency was {f['produce.p99_ms'].median:.0f} ms.",
            "ProducerPerformance runs unthrottled (--throughput -1) with a 64 MiB buffer, as "
            "Kafka's own benchmark does: its latencies are mostly time queued in that buffer, "
            "so they measure a saturated producer, not a lone request."]
