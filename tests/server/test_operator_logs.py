"""The operator's log lines of ``seglog serve`` (issue 26, "Logs an operator can use"): one
line per state change, ``--log-format json``, rate-limited repeats, ``seglog --version``, and
progress bars drawn on a terminal only.

The broker runs as a real ``seglog serve`` subprocess with ``--log-format json`` (so every
line of its stderr must parse), driven by confluent-kafka (admin, two consumers of one
group); the lines are read back from its stderr."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pathlib
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from typing import Any, Callable

import pytest

from seglog import __version__
from seglog.log_format import JsonFormatter
from seglog.log_limits import RepeatFilter, RepeatLimiter

SRC_DIR = pathlib.Path(__file__).resolve().parents[2] / "src"
WAIT_S = 30.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class ServeProcess:
    """``seglog serve --log-format json`` on a free port, its stderr in a file."""

    def __init__(self, data_dir: pathlib.Path, log_path: pathlib.Path,
                 extra: tuple[str, ...] = ()):
        self.log_path = log_path
        self._out = open(log_path, "ab")
        self._seen = 0
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seglog", "serve", "--data-dir", str(data_dir),
             *([] if any(a.startswith("listeners=") for a in extra)
               else ["--listen", "127.0.0.1:0"]),
             "--log-format", "json", "--log-level", "DEBUG",
             "--config", "group.initial.rebalance.delay.ms=0", *extra],
            stdout=subprocess.DEVNULL, stderr=self._out, env=_env())
        started = self.wait_for(lambda r: "listening on" in r["message"])
        self.bootstrap = started["message"].split("listening on ")[1].split(" ")[0]

    def records(self) -> list[dict[str, Any]]:
        """Every line so far, each parsed (a line that is not JSON fails the test)."""
        text = self.log_path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_for(self, match: Callable[[dict[str, Any]], bool],
                 timeout_s: float = WAIT_S) -> dict[str, Any]:
        """The first line matching ``match``; fails after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for record in self.records():
                if match(record):
                    return record
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no such log line; the log:\n{self.log_path.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._out.close()


@pytest.fixture
def serve(tmp_path):
    started: list[ServeProcess] = []

    def start(name: str = "serve.log", data: str = "data", *configs: str) -> ServeProcess:
        extra = tuple(a for c in configs for a in ("--config", c))
        s = ServeProcess(tmp_path / data, tmp_path / name, extra)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_topic_lines_and_json_format(serve):
    from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic
    s = serve()
    admin = _admin(s.bootstrap)
    admin.create_topics([NewTopic("ops-clicks", 2, 1, config={"retention.ms": "60000"})])[
        "ops-clicks"].result(timeout=20)
    created = s.wait_for(lambda r: r["message"].startswith("Created topic ops-clicks"))
    assert "2 partitions" in created["message"] and "retention.ms" in created["message"]
    assert "User:ANONYMOUS" in created["message"]
    assert created["level"] == "INFO" and created["logger"].startswith("seglog.")
    assert created["time"].endswith("Z") and "T" in created["time"]

    resource = ConfigResource("topic", "ops-clicks", set_config={"cleanup.policy": "compact"})
    admin.alter_configs([resource])[resource].result(timeout=20)
    changed = s.wait_for(lambda r: r["message"].startswith("Configs of topic ops-clicks"))
    assert "cleanup.policy=compact" in changed["message"]
    # AlterConfigs replaces the whole set: retention.ms went away.
    assert "retention.ms (deleted)" in changed["message"]

    admin.create_partitions([NewPartitions("ops-clicks", 3)])["ops-clicks"].result(timeout=20)
    added = s.wait_for(lambda r: r["message"].startswith("Added partitions to topic ops-clicks"))
    assert "2 -> 3" in added["message"]

    admin.delete_topics(["ops-clicks"])["ops-clicks"].result(timeout=20)
    s.wait_for(lambda r: r["message"].startswith("Deleted topic ops-clicks"))
    # Connections at DEBUG: listener, peer, and (on close) the principal.
    s.wait_for(lambda r: r["level"] == "DEBUG" and "opened on listener PLAINTEXT from "
               "127.0.0.1:" in r["message"])
    s.stop()
    closed = [r for r in s.records() if " closed on listener " in r["message"]]
    assert closed and all("User:ANONYMOUS" in r["message"] for r in closed)
    assert s.records()[-1]["message"] == "seglog serve stopped cleanly"


def test_group_rebalance_lines(serve):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import NewTopic
    s = serve()
    admin = _admin(s.bootstrap)
    admin.create_topics([NewTopic("ops-group-t", 2, 1)])["ops-group-t"].result(timeout=20)
    conf = {"bootstrap.servers": s.bootstrap, "group.id": "ops-g",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    consumers = [Consumer(conf) for _ in range(2)]
    try:
        consumers[0].subscribe(["ops-group-t"])
        for _ in range(40):
            consumers[0].poll(0.2)
            # Stable, not only stabilized: the member has its assignment (its SyncGroup is
            # answered), so the second join finds the group Stable, not CompletingRebalance
            # (under load the second join came in between, and Kafka logs that state too).
            if consumers[0].assignment() and any(
                    "Stabilized group ops-g generation 1 " in r["message"]
                    for r in s.records()):
                break
        consumers[1].subscribe(["ops-group-t"])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.2)
            if any("Stabilized group ops-g" in r["message"] and "2 members" in r["message"]
                   for r in s.records()):
                break
    finally:
        for c in consumers:
            c.close()
    first = s.wait_for(lambda r: r["message"].startswith("Stabilized group ops-g generation 1 "))
    assert "protocol type consumer" in first["message"] and "1 members" in first["message"]
    s.wait_for(lambda r: r["message"].startswith("Preparing to rebalance group ops-g in state "
                                                 "Stable with old generation 1"))
    two = s.wait_for(lambda r: r["message"].startswith("Stabilized group ops-g")
                     and "with 2 members" in r["message"])
    assert two["message"].count("rdkafka-") == 2  # both member ids
    s.wait_for(lambda r: r["message"].startswith("Group ops-g with generation")
               and r["message"].endswith("is now empty"))
    admin.delete_consumer_groups(["ops-g"])["ops-g"].result(timeout=20)
    s.wait_for(lambda r: r["message"].startswith("Deleted group ops-g ")
               and "User:ANONYMOUS" in r["message"])


def test_consumer_group_protocol_lines(serve):
    """KIP-848 groups (group.protocol=consumer): the broker assigns; each new target
    assignment and each member leaving is a line."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import NewTopic
    s = serve()
    admin = _admin(s.bootstrap)
    admin.create_topics([NewTopic("ops-848-t", 2, 1)])["ops-848-t"].result(timeout=20)
    consumer = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "ops-848",
                         "group.protocol": "consumer"})
    try:
        consumer.subscribe(["ops-848-t"])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(consumer.assignment()) < 2:
            consumer.poll(0.2)  # until the member owns both partitions (then it leaves)
    finally:
        consumer.close()
    target = s.wait_for(lambda r: r["message"].startswith(
        "[GroupId ops-848] Computed a new target assignment for epoch "))
    assert "1 members: " in target["message"]
    s.wait_for(lambda r: r["message"].startswith("[GroupId ops-848] Member ")
               and "left the group" in r["message"])


def test_sasl_failure_at_info_and_the_principal_at_debug(serve):
    from confluent_kafka.admin import AdminClient
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            'user_alice="alice-secret";')
    s = serve("sasl.log", "data", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
              "inter.broker.listener.name=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN",
              "sasl.mechanism.inter.broker.protocol=PLAIN",
              f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}")
    for password in ("wrong", "alice-secret"):
        admin = AdminClient({"bootstrap.servers": s.bootstrap,
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "alice", "sasl.password": password})
        try:
            admin.list_topics(timeout=5)
        except Exception:  # noqa: BLE001 - the wrong password's refusal
            pass
        del admin
    failed = s.wait_for(lambda r: "Failed authentication with 127.0.0.1" in r["message"])
    assert failed["level"] == "INFO"
    assert "on listener SASL_PLAINTEXT with PLAIN (Authentication failed" in failed["message"]
    assert "wrong" not in failed["message"]  # never the password
    s.wait_for(lambda r: r["level"] == "DEBUG" and "authenticated as User:alice with PLAIN"
               in r["message"])


def test_recovery_after_kill_then_clean_start(serve, tmp_path):
    from confluent_kafka import Producer
    s = serve("first.log")
    producer = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0})
    for i in range(200):
        producer.produce("ops-recover", value=b"x" * 100, key=str(i).encode())
    assert producer.flush(20) == 0
    del producer  # (it would retry the killed broker for the rest of the session)
    s.wait_for(lambda r: r["message"] == "Started with no partitions on disk")
    s.stop(signal.SIGKILL)
    second = serve("second.log")
    summary = second.wait_for(lambda r: r["message"].startswith("Started after an unclean"))
    assert "recovered" in summary["message"]
    line = second.wait_for(lambda r: r["message"].startswith("Recovered ops-recover-0: "))
    assert "segments validated" in line["message"]
    second.stop()
    third = serve("third.log")
    third.wait_for(lambda r: r["message"].startswith("Started after a clean shutdown"))


# --- the pieces, in process -------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def _own(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    """The captured records of the logger ``name``: in a whole-suite run, threads of other
    tests' brokers (session-scoped ones) log at the same time into the same capture."""
    return [r for r in caplog.records if r.name == name]


def test_repeat_limiter_prints_once_then_a_summary(caplog):
    clock = FakeClock()
    limiter = RepeatLimiter(interval_s=30.0, clock=clock)
    log = logging.getLogger("seglog.test.repeats")
    caplog.set_level(logging.INFO, logger="seglog.test.repeats")
    printed = []
    for _second in range(65):  # a loop failing every second for 65 s
        printed.append(limiter.warning(log, "cannot connect to broker %d: %s", 2,
                                       ConnectionRefusedError(111, "refused")))
        clock.now_s += 1.0
    messages = [r.getMessage() for r in _own(caplog, "seglog.test.repeats")]
    assert printed.count(True) == 3
    assert messages[0] == "cannot connect to broker 2: [Errno 111] refused"
    assert messages[1] == ("cannot connect to broker 2: [Errno 111] refused (repeated 30 "
                           "times in the last 30 s)")
    assert messages[2].endswith("(repeated 30 times in the last 30 s)")
    # Another peer is another line: printed at once.
    assert limiter.warning(log, "cannot connect to broker %d: %s", 3, "refused")
    # A line back after a quiet interval prints plain.
    clock.now_s += 100
    assert limiter.warning(log, "cannot connect to broker %d: %s", 3, "refused")
    assert _own(caplog, "seglog.test.repeats")[-1].getMessage() == \
        "cannot connect to broker 3: refused"


def test_repeat_limiter_key_and_disabled_level(caplog):
    clock = FakeClock()
    limiter = RepeatLimiter(interval_s=10.0, clock=clock)
    log = logging.getLogger("seglog.test.repeats2")
    caplog.set_level(logging.WARNING, logger="seglog.test.repeats2")
    assert not limiter.info(log, "below the level %d", 1)  # INFO is off: nothing kept
    assert limiter.warning(log, "fetch from %d failed after %d ms", 1, 5, key=1)
    assert not limiter.warning(log, "fetch from %d failed after %d ms", 1, 7, key=1)
    assert limiter.warning(log, "fetch from %d failed after %d ms", 2, 7, key=2)


def test_repeat_filter_limits_a_library_logger(caplog):
    clock = FakeClock()
    name = "seglog.test.library"
    logger = logging.getLogger(name)
    filt = RepeatFilter(RepeatLimiter(interval_s=30.0, clock=clock))
    logger.addFilter(filt)
    caplog.set_level(logging.INFO, logger=name)
    try:
        for _second in range(31):
            logger.warning("Connection dropped: %s", "socket error")
            logger.warning("100% gone")  # no args: the '%' stays literal in the summary
            logger.info("below the level %d", 1)  # never limited
            clock.now_s += 1.0
    finally:
        logger.removeFilter(filt)
    warnings = [r.getMessage() for r in _own(caplog, name) if r.levelno == logging.WARNING]
    assert warnings == ["Connection dropped: socket error", "100% gone",
                        "Connection dropped: socket error (repeated 30 times in the last 30 s)",
                        "100% gone (repeated 30 times in the last 30 s)"]
    assert sum(r.levelno == logging.INFO for r in _own(caplog, name)) == 31


def test_json_formatter_lines_parse_with_exception():
    formatter = JsonFormatter()
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = logging.LogRecord("seglog.x", logging.ERROR, __file__, 1, "failed %s: %d",
                                   ("topic \"a\"", 3), sys.exc_info())
    line = formatter.format(record)
    assert "\n" not in line
    data = json.loads(line)
    assert data["message"] == 'failed topic "a": 3'
    assert data["level"] == "ERROR" and data["logger"] == "seglog.x"
    assert "ValueError: bad\nthing" in data["exception"]
    assert set(data) == {"time", "level", "logger", "message", "exception"}


def test_version_prints_the_package_version():
    ran = subprocess.run([sys.executable, "-m", "seglog", "--version"], capture_output=True,
                         text=True, env=_env(), timeout=60, check=False)
    assert ran.returncode == 0
    assert ran.stdout.strip() == f"seglog {__version__}"


_BAR_SCRIPT = """
import sys, time
from seglog.progress import progress
with progress("working", total=5) as bar:
    for i in range(5):
        bar.update(1)
        time.sleep(0.02)
print("done", file=sys.stderr)
"""


_BENCH_SCRIPT = """
import sys
from seglog.bench.progress import Progress
p = Progress()
p.start_part("produce")
for run in range(3):
    p.step("acks=all", run + 1, 3)
p.clear()
print("done", file=sys.stderr)
"""


def _run_on(stderr_is_tty: bool, quiet: bool = False, script: str = _BAR_SCRIPT) -> str:
    script = ("from seglog.progress import set_quiet; set_quiet(True)\n" if quiet
              else "") + script
    if not stderr_is_tty:
        ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=_env(), timeout=60, check=False)
        return ran.stderr
    main_fd, child_fd = pty.openpty()
    # A new pty is 0 columns wide (tqdm would draw nothing): a terminal's 24x80.
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=child_fd, env=_env())
        os.close(child_fd)
        chunks = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                data = os.read(main_fd, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=30)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(main_fd)


def test_progress_bar_on_a_terminal_only():
    on_tty = _run_on(True)
    assert "working:" in on_tty and "0/5" in on_tty and "\r" in on_tty
    in_pipe = _run_on(False)
    assert in_pipe.strip() == "done"
    quiet = _run_on(True, quiet=True)
    assert "working" not in quiet and "done" in quiet


def test_bench_progress_is_the_bar_on_a_terminal_and_lines_in_a_pipe():
    on_tty = _run_on(True, script=_BENCH_SCRIPT)
    assert "produce:" in on_tty and "acks=all" in on_tty and "\r" in on_tty
    assert "[produce" not in on_tty  # not the old hand-drawn line
    in_pipe = _run_on(False, script=_BENCH_SCRIPT)
    assert in_pipe.splitlines()[0].startswith("[produce ") and "acks=all 1/3" in in_pipe
    assert in_pipe.count("acks=all") == 1  # each step once


def test_serve_draws_the_loading_bar_on_a_terminal(tmp_path):
    from seglog import Store
    with Store(tmp_path / "data") as store:
        for i in range(3):
            store.create_topic(f"ops-bar-{i}", 2)
    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog", "serve", "--data-dir", str(tmp_path / "data"),
         "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=child_fd, env=_env())
    os.close(child_fd)
    seen = b""
    try:
        deadline = time.monotonic() + WAIT_S
        while b"listening on" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([main_fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(main_fd, 4096)
                except OSError:
                    break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        os.close(main_fd)
    text = seen.decode("utf-8", "replace")
    assert "loading logs" in text and "topics" in text
    assert "Started after a clean shutdown" in text
    # The bar is gone before the broker's next lines: none starts after the bar's text.
    started = [line for line in text.split("\n") if "Started after" in line][0]
    assert "loading logs" not in started.split("\r")[-1]


def test_segment_rolls_and_retention_deletions_are_logged(tmp_path, caplog):
    from seglog import Store
    caplog.set_level(logging.INFO, logger="seglog.storage")
    with Store(tmp_path / "data") as store:
        store.create_topic("ops-roll", 1, {"segment.bytes": 2048, "retention.bytes": 4096})
        producer = store.producer()
        for i in range(100):
            producer.send("ops-roll", b"v" * 100, key=str(i).encode(), partition=0)
            producer.flush()  # one small batch each: many fit a segment
        producer.close()
        rolls = [r.getMessage() for r in caplog.records if "Rolled new log segment" in
                 r.getMessage()]
        assert rolls and all(m.startswith("[ops-roll-0] ") for m in rolls)
        deleted = store.apply_retention()
    lines = [r.getMessage() for r in caplog.records if "Deleting segments" in r.getMessage()]
    assert deleted and lines == [f"[ops-roll-0] Deleting segments due to retention size breach: "
                                 f"{', '.join(str(b) for b in deleted[('ops-roll', 0)])}"]


def test_a_partition_going_offline_while_serving_is_logged_with_why(tmp_path, caplog):
    """A segment whose files are damaged while the store is open (its .log cut, its index
    gone) fails to load at first use: the partition goes offline, and the broker's log dir
    check logs it once, with the reason."""
    from seglog import Store
    from seglog.errors import SeglogError
    from seglog.server.recovery_log import OfflineWatch
    with Store(tmp_path / "data") as store:
        store.create_topic("ops-off", 1, {"segment.bytes": 2048})
        producer = store.producer()
        for _ in range(40):
            producer.send("ops-off", b"v" * 100, partition=0)
            producer.flush()
        producer.close()
    part = tmp_path / "data" / "ops-off-0"
    with Store(tmp_path / "data") as store:
        watch = OfflineWatch(store)
        caplog.set_level(logging.INFO, logger="seglog.server.recovery")
        watch.check()
        assert not _own(caplog, "seglog.server.recovery")  # nothing changed yet
        os.truncate(part / "00000000000000000012.log", 100)
        os.remove(part / "00000000000000000012.index")
        with pytest.warns(RuntimeWarning, match="offline"):
            with pytest.raises(SeglogError):
                store.log(("ops-off", 0)).read(13, max_bytes=1 << 20)
        watch.check()
        watch.check()  # said once
    lines = [r for r in caplog.records if r.name == "seglog.server.recovery"]
    assert len(lines) == 1 and lines[0].levelno == logging.ERROR
    assert lines[0].getMessage().startswith("Partition ops-off-0 is offline: "
                                            "CorruptSegmentError: segment ")


def test_a_compaction_is_logged_with_its_figures(tmp_path, caplog):
    from seglog import Store
    caplog.set_level(logging.INFO, logger="seglog.storage.cleaner")
    with Store(tmp_path / "data") as store:
        store.create_topic("ops-compact", 1, {"segment.bytes": 2048, "cleanup.policy": "compact",
                                              "min.cleanable.dirty.ratio": 0.01})
        producer = store.producer()
        for i in range(60):
            producer.send("ops-compact", b"v" * 100, key=str(i % 3).encode(), partition=0)
            producer.flush()
        producer.close()
        stats = store.compact()[("ops-compact", 0)]
    assert not stats.skipped
    lines = [r.getMessage() for r in _own(caplog, "seglog.storage.cleaner")]
    assert lines == [f"[ops-compact-0] Compacted offsets [{stats.first_dirty_offset}, "
                     f"{stats.first_uncleanable_offset}): {stats.segments_cleaned} segments, "
                     f"{stats.bytes_read} -> {stats.bytes_written} bytes, "
                     f"{stats.records_kept} records kept, {stats.records_dropped} removed, "
                     f"in {stats.duration_ms:.0f} ms"]
    assert stats.records_dropped > 0
