"""The Kafka Streams 4.4 word count app of the streams group tests (KIP-1071,
``group.protocol=streams``) and the scenario they run on a broker: shared by
tests/kafka/test_streams_groups_java.py (seglog and Kafka 4.4) and
tests/cluster/test_streams_cluster.py (a seglog ZooKeeper cluster).

The app (``kafka/java/StreamsWordCount.java``, compiled with ``javac`` at test time against
the Kafka jars and ``kafka-streams`` from ``ci/kafka-ref.sh``) counts words: lines are split,
re-keyed by word through a repartition topic and counted in a state store with a changelog
topic, so its topology has two subtopologies and needs two internal topics the group
coordinator creates. Two instances share the four tasks (two subtopologies over two
partitions); one stops (leaving the group), the other takes all four over; the counts in
the output topic are exact (each instance commits on close). Each instance names an
``application.server`` endpoint, and each learns where the other's partitions are (the
interactive queries metadata the coordinator sends).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

SOURCE = Path(__file__).parent / "kafka" / "java" / "StreamsWordCount.java"
REQUIRED = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
#: Short heartbeats and sessions (the defaults are 5 s and 45 s), the same on both brokers.
STREAMS_CONFIG = {
    "group.streams.heartbeat.interval.ms": 500,
    "group.streams.min.heartbeat.interval.ms": 500,
    "group.streams.session.timeout.ms": 10000,
    "group.streams.min.session.timeout.ms": 10000,
}
#: Kafka delays a new streams group's first assignment 3 s; seglog does not (the config is
#: not built there, so it is given to Kafka only).
KAFKA_ONLY_CONFIG = {"group.streams.initial.rebalance.delay.ms": 0}
WAIT_S = 90.0
ALL_TASKS = {"0_0", "0_1", "1_0", "1_1"}
BATCH_1 = ["the quick brown fox", "the lazy dog", "quick quick"]
BATCH_2 = ["the end", "fox and dog"]


def _skip_or_fail(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
    pytest.skip(why)


def compile_app(kafka_ref, out: Path) -> Path:
    """The app compiled into ``out`` (skips, or fails under SEGLOG_REQUIRE_KAFKA=1, without
    the kafka-streams jar or javac)."""
    if not list(kafka_ref.lib_dir.glob("kafka-streams-*.jar")):
        _skip_or_fail(f"no kafka-streams jar in {kafka_ref.lib_dir} (run ci/kafka-ref.sh)")
    javac = shutil.which("javac") or str(Path(kafka_ref.java).with_name("javac"))
    if not Path(javac).exists() and shutil.which(javac) is None:
        _skip_or_fail("needs javac (a JDK) to compile tests/kafka/java/StreamsWordCount.java")
    subprocess.run([javac, "-cp", kafka_ref.classpath, "-d", str(out), str(SOURCE)],
                   check=True, timeout=120, capture_output=True)
    return out


class App:
    """One running instance of the app: its output lines, read by a thread."""

    def __init__(self, kafka_ref, classes: Path, run_dir: Path, bootstrap: str,
                 endpoint: str) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        cmd = kafka_ref.java_command("StreamsWordCount",
                                     [bootstrap, "wordcount", "words", "counts",
                                      str(run_dir / "state"), endpoint], run_dir=run_dir)
        cp = cmd.index("-cp")
        cmd[cp + 1] = f"{classes}:{cmd[cp + 1]}"
        self.lines: list[str] = []
        self._stderr = open(run_dir / "stderr.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.run_dir = run_dir

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def tasks(self) -> set[str]:
        """The active tasks it last reported."""
        reported = [line[6:] for line in self.lines if line.startswith("TASKS ")]
        return set(filter(None, reported[-1].split(","))) if reported else set()

    def hosts(self) -> set[str]:
        """The endpoints it last knew to hold partitions (interactive queries' metadata)."""
        reported = [line[6:] for line in self.lines if line.startswith("HOSTS ")]
        return set(filter(None, reported[-1].split(","))) if reported else set()

    def running(self) -> bool:
        states = [line for line in self.lines if line.startswith("STATE ")]
        return bool(states) and states[-1] == "STATE RUNNING"

    def stop(self) -> None:
        """Ask it to close (it leaves the group) and wait; killed by pid if it hangs."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        self._stderr.close()

    def log_tail(self) -> str:
        return (self.run_dir / "stderr.log").read_text(errors="replace")[-3000:]


def _wait(what: str, condition, apps: list[App], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    logs = "\n".join(f"--- app {i}: {a.lines[-10:]}\n{a.log_tail()}" for i, a in enumerate(apps))
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


def _counts(bootstrap: str) -> dict[str, int]:
    """The last count per word in the output topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "counts-reader",
                         "enable.auto.commit": False})
    try:
        consumer.assign([CTP("counts", 0, 0)])
        low, high = consumer.get_watermark_offsets(CTP("counts", 0), timeout=10)
        counts: dict[str, int] = {}
        position = low
        deadline = time.monotonic() + 20
        while position < high and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            counts[message.key().decode()] = struct.unpack(">q", message.value())[0]
            position = message.offset() + 1
        return counts
    finally:
        consumer.close()


def _table(text: str) -> list[dict[str, str]]:
    """The rows of a kafka-streams-groups table (columns split on runs of spaces; the
    COORDINATOR column's "host:port (id)" is one cell)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].replace("COORDINATOR (ID)", "COORDINATOR").split()
    rows = []
    for line in lines[1:]:
        cells = line.replace(" (", "(").split(None, len(header) - 1)
        rows.append(dict(zip(header, cells)))
    return rows


def _describe(kafka_ref, bootstrap: str, run_dir: Path) -> dict:
    """What ``kafka-streams-groups --describe`` (StreamsGroupDescribe, Kafka's Admin
    client) says of the group while both instances run, without ids and epochs."""
    def run(*args: str) -> list[dict[str, str]]:
        done = kafka_ref.run_tool("org.apache.kafka.tools.streams.StreamsGroupCommand",
                                  ["--bootstrap-server", bootstrap, "--describe", "--group",
                                   "wordcount", *args, "--verbose"],
                                  run_dir=run_dir / "tool", timeout_s=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return _table(done.stdout)

    (state,) = run("--state")
    members = run("--members")
    return dict(state={k: state[k] for k in ("GROUP", "ASSIGNOR", "STATE", "#MEMBERS")},
                members=sorted((m["MEMBER-PROTOCOL"], m["ASSIGNMENTS"].count(":[") > 0)
                               for m in members))


def _expected(lines: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in lines:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    return counts


def scenario(kafka_ref, classes: Path, bootstrap: str, run_dir: Path, *,
             replication_factor: int = 1) -> dict:
    """Two instances share the tasks, one leaves, the other takes over; what was seen."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("words", 2, replication_factor),
                                       NewTopic("counts", 1, replication_factor)],
                                      operation_timeout=30).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap})

    def produce(lines: list[str]) -> None:
        for i, line in enumerate(lines):
            producer.produce("words", key=f"k{i}", value=line)
        assert producer.flush(30) == 0

    produce(BATCH_1)
    endpoints = {"a": "host-a:7001", "b": "host-b:7002"}
    apps = [App(kafka_ref, classes, run_dir / name, bootstrap, endpoints[name])
            for name in ("a", "b")]
    try:
        a, b = apps
        _wait("both instances running with the four tasks shared",
              lambda: a.running() and b.running() and a.tasks() and b.tasks()
              and a.tasks() | b.tasks() == ALL_TASKS and not a.tasks() & b.tasks(), apps)
        shared = (len(a.tasks()), len(b.tasks()))
        _wait("both instances knowing where every partition is (interactive queries)",
              lambda: a.hosts() == b.hosts() == set(endpoints.values()), apps, timeout_s=30)
        described = _describe(kafka_ref, bootstrap, run_dir)
        _wait("the first batch counted",
              lambda: _counts(bootstrap) == _expected(BATCH_1), apps, timeout_s=60)
        a.stop()
        assert "CLOSED" in a.lines, a.lines
        _wait("the second instance running all four tasks",
              lambda: b.running() and b.tasks() == ALL_TASKS, apps)
        _wait("the second instance knowing it holds every partition",
              lambda: b.hosts() == {endpoints["b"]}, apps, timeout_s=30)
        produce(BATCH_2)
        _wait("both batches counted",
              lambda: _counts(bootstrap) == _expected(BATCH_1 + BATCH_2), apps, timeout_s=60)
        b.stop()
        assert "CLOSED" in b.lines, b.lines
        topics = set(admin.list_topics(timeout=10).topics)
    finally:
        for app in apps:
            app.stop()
    return dict(shared=sorted(shared), described=described, counts=_counts(bootstrap),
                internal_topics=sorted(t for t in topics if t.startswith("wordcount-")))


EXPECTED = dict(shared=[2, 2],
                described=dict(state={"GROUP": "wordcount", "ASSIGNOR": "sticky",
                                      "STATE": "Stable", "#MEMBERS": "2"},
                               members=[("streams", True), ("streams", True)]),
                counts=_expected(BATCH_1 + BATCH_2),
                internal_topics=["wordcount-counts-changelog", "wordcount-words-repartition"])


