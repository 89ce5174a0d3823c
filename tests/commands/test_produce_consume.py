"""``seglog produce`` and ``seglog consume`` (issue 26), run as the real command, against a
seglog data directory and a seglog broker (test_produce_consume_kafka.py runs the same tests
against a real Kafka 4.4 broker): one scenario, one expected answer for all three
(timestamps the brokers chose are normalised to "now").

Also: follow mode ended by SIGTERM, and records written by kcat read by ``seglog consume``
and the other way round; a data directory a broker serves is refused clearly.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import selectors
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

SRC_DIR = pathlib.Path(__file__).resolve().parents[2] / "src"

#: A record timestamp the scenario sets explicitly: an hour ago, on a whole second (Kafka
#: keeps it; retention is days).
BASE_MS = (int(time.time()) - 3600) * 1000
EXPLICIT_TS = {BASE_MS + 1000: "base+1000", BASE_MS + 2000: "base+2000"}
BINARY_VALUE = b"\xff\x00bin"
#: Every wait on a command or a line of its output is bounded by this (s).
COMMAND_TIMEOUT_S = 30.0


@dataclass
class Place:
    """Where the commands run: a data dir or a broker's bootstrap."""

    kind: str
    where: list[str]
    bootstrap: str | None = None
    data_dir: pathlib.Path | None = None

    run: Any = None  # the run_seglog fixture

    def seglog(self, *args: str, input_text: str | None = None) -> Any:
        """``seglog ARGS --data-dir|-b ...`` as a subprocess."""
        return self.run(*args, *self.where, input_text=input_text)

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        """Make a topic as a test's setup (the topics command is another tool's test)."""
        if self.data_dir is not None:
            import seglog
            with seglog.Store(self.data_dir, offsets_topic_partitions=1) as store:
                store.create_topic(name, partitions, config=config or {})
            return
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                      operation_timeout=20)
        for future in futures.values():
            future.result(timeout=30)
        # A broker answers CreateTopics before every partition has a leader: wait for them.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            meta = admin.list_topics(name, timeout=10).topics.get(name)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                    and all(p.leader >= 0 for p in meta.partitions.values()):
                return
            time.sleep(0.1)
        raise AssertionError(f"topic {name} has no leaders after 20 s")


@pytest.fixture
def data_dir_place(tmp_path, run_seglog) -> Place:
    data = tmp_path / "data"
    import seglog
    # A small __consumer_offsets (the group part of the scenario creates it).
    seglog.Store(data, offsets_topic_partitions=1).close()
    return Place("data_dir", ["--data-dir", str(data)], data_dir=data, run=run_seglog)


@pytest.fixture
def seglog_place(seglog_bootstrap, run_seglog) -> Place:
    return Place("seglog", ["-b", seglog_bootstrap], bootstrap=seglog_bootstrap,
                 run=run_seglog)


def _norm_ts(ts: int, start_ms: int) -> Any:
    if ts in EXPLICIT_TS:
        return EXPLICIT_TS[ts]
    # A broker's or producer's clock: "now" (within the test's run, minutes of slack)
    assert start_ms - 120_000 <= ts <= time.time() * 1000 + 120_000, ts
    return "now"


def _norm_records(lines: list[dict[str, Any]], names: dict[str, str],
                  start_ms: int) -> list[dict[str, Any]]:
    out = []
    for rec in lines:
        rec = dict(rec, topic=names[rec["topic"]],
                   timestamp=_norm_ts(rec["timestamp"], start_ms))
        out.append(rec)
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


def _scenario(place: Place) -> dict[str, Any]:
    """Every option of the contract, on ``place``; returns what the commands said,
    normalised (topic names back to A/B/C/D, timestamps the clock chose to "now")."""
    start_ms = int(time.time() * 1000)
    tag = uuid.uuid4().hex[:8]
    a, b, c, d = (f"pc-{x}-{tag}" for x in "abcd")
    names = {a: "A", b: "B", c: "C", d: "D"}
    place.create_topic(a, 3)
    place.create_topic(b, 1)
    place.create_topic(d, 1, {"max.message.bytes": "200"})
    got: dict[str, Any] = {}

    def norm_text(text: str) -> str:
        for real, short in names.items():
            text = text.replace(real, short)
        return text

    # Lines with kcat's -K, a header on each, an explicit partition, gzip; JSON report.
    ran = place.seglog("produce", a, "-K", ":", "-H", "src=cli", "-p", "1", "-z", "gzip",
                  "-o", "json", input_text="k1:v1\nk2:v2\n")
    assert ran.returncode == 0, ran.stderr
    got["produce_lines"] = dict(ran.json(), topic=names[ran.json()["topic"]])
    # JSON lines: keys, null key, headers as an object and as pairs (a null header value),
    # partitions and timestamps per record, a binary value in base64; zstd.
    json_input = "\n".join(json.dumps(x) for x in [
        {"key": "j1", "value": "at-1000", "partition": 0, "timestamp": BASE_MS + 1000,
         "headers": {"h": "1"}},
        {"key": "j2", "value": "at-2000", "partition": 0, "timestamp": BASE_MS + 2000},
        {"key": None, "value_b64": base64.b64encode(BINARY_VALUE).decode(), "partition": 2,
         "timestamp": BASE_MS + 1000, "headers": [["bin", None]]},
    ]) + "\n"
    ran = place.seglog("produce", a, "--format", "json", "-z", "zstd", "-o", "json",
                  input_text=json_input)
    assert ran.returncode == 0, ran.stderr
    got["produce_json"] = dict(ran.json(), topic=names[ran.json()["topic"]])
    # Plain, acks=1, not idempotent, snappy; an empty line is an empty value.
    ran = place.seglog("produce", a, "-p", "2", "-z", "snappy", "--acks", "1",
                  "--no-idempotence", input_text="s1\n\ns3\n")
    assert ran.returncode == 0, ran.stderr
    got["produce_plain_stderr"] = norm_text(ran.stderr.strip().splitlines()[-1])
    # A transaction around the whole input, committed (lz4).
    ran = place.seglog("produce", a, "--transactional-id", f"pc-commit-{tag}", "-p", "0",
                  "-z", "lz4", "-K", ":", "-o", "json", input_text="t1:x\nt2:y\n")
    assert ran.returncode == 0, ran.stderr
    got["produce_txn"] = dict(ran.json(), topic=names[ran.json()["topic"]])
    # A transaction aborted by a bad input line: nothing of it is read committed.
    ran = place.seglog("produce", b, "--transactional-id", f"pc-abort-{tag}", "--format",
                  "json", input_text='{"value": "doomed"}\nnot json\n')
    got["produce_abort"] = (ran.returncode, "line 2" in ran.stderr, "aborted" in ran.stderr)
    # Without a transaction the records before a bad line are written (Kafka's console
    # producer does the same), and the command fails.
    ran = place.seglog("produce", b, "-K", ":", input_text="k:kept\nno separator\n")
    got["produce_bad_line"] = (ran.returncode, "line 2: no key separator" in ran.stderr,
                               "1 record before the error was written" in ran.stderr)
    ran = place.seglog("consume", b, "--from-beginning", "-e", "--isolation-level",
                  "read_committed", "-f", "%s\\n")
    got["abort_read_committed"] = (ran.returncode, ran.stdout)

    # Everything committed in A, as JSON lines.
    ran = place.seglog("consume", a, "--from-beginning", "-e", "--format", "json",
                  "--isolation-level", "read_committed")
    assert ran.returncode == 0, ran.stderr
    got["consume_all"] = _norm_records(ran.json_lines(), names, start_ms)
    # kcat's -f, one partition from an offset.
    ran = place.seglog("consume", a, "-e", "-p", "0", "--offset", "1",
                  "-f", "%t|%p|%o|%k|%s|%K|%S|%h\\n")
    assert ran.returncode == 0, ran.stderr
    got["consume_format"] = norm_text(ran.stdout)
    # From a timestamp: per partition, the first record at or after it.
    ran = place.seglog("consume", a, "-e", "--timestamp", str(BASE_MS + 1500),
                  "--format", "json")
    assert ran.returncode == 0, ran.stderr
    got["consume_timestamp"] = sorted((r["partition"], r["offset"]) for r in ran.json_lines())
    # --binary base64 and -c.
    ran = place.seglog("consume", a, "--from-beginning", "-p", "2", "-c", "2",
                  "--binary", "base64", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    got["consume_base64"] = [(r.get("key_b64", r.get("key")), r["value_b64"])
                             for r in ran.json_lines()]
    # Plain with keys.
    ran = place.seglog("consume", a, "--from-beginning", "-e", "-p", "1", "--print-key",
                  "--key-separator", "=")
    got["consume_print_key"] = ran.stdout

    # A group: the first consume commits what it printed, the second goes on from there.
    # C does not exist yet: produce creates it (auto.create.topics.enable).
    ran = place.seglog("produce", c, input_text="".join(f"c{i}\n" for i in range(5)))
    assert ran.returncode == 0, ran.stderr
    group = f"pc-group-{tag}"
    first = place.seglog("consume", c, "-g", group, "--from-beginning", "-c", "2")
    second = place.seglog("consume", c, "-g", group, "--from-beginning", "-e")
    third = place.seglog("consume", c, "-g", group, "--from-beginning", "-e")
    got["group"] = [(r.returncode, r.stdout) for r in (first, second, third)]

    # Errors: a topic that does not exist (3); the broker / store refuses a record (1).
    ran = place.seglog("consume", f"pc-missing-{tag}", "-e")
    got["missing_topic"] = (ran.returncode, "UNKNOWN_TOPIC_OR_PARTITION" in ran.stderr)
    ran = place.seglog("produce", d, input_text="x" * 1000 + "\n")
    got["too_large"] = (ran.returncode, "TOO_LARGE" in ran.stderr, "Traceback" in ran.stderr)
    # Bad usage: --offset N with a group.
    ran = place.seglog("consume", a, "-g", group, "--offset", "3")
    got["usage"] = ran.returncode
    return got


EXPECTED: dict[str, Any] = {
    "produce_lines": {"topic": "A", "records": 2,
                      "partitions": {"1": {"first_offset": 0, "last_offset": 1}}},
    "produce_json": {"topic": "A", "records": 3,
                     "partitions": {"0": {"first_offset": 0, "last_offset": 1},
                                    "2": {"first_offset": 0, "last_offset": 0}}},
    "produce_plain_stderr": "produced 3 records to A",
    "produce_txn": {"topic": "A", "records": 2,
                    "partitions": {"0": {"first_offset": 2, "last_offset": 3}}},
    "produce_abort": (2, True, True),
    "produce_bad_line": (2, True, True),
    "abort_read_committed": (0, "kept\n"),
    "consume_all": [
        {"topic": "A", "partition": 0, "offset": 0, "timestamp": "base+1000", "key": "j1",
         "value": "at-1000", "headers": [{"key": "h", "value": "1"}]},
        {"topic": "A", "partition": 0, "offset": 1, "timestamp": "base+2000", "key": "j2",
         "value": "at-2000", "headers": []},
        {"topic": "A", "partition": 0, "offset": 2, "timestamp": "now", "key": "t1",
         "value": "x", "headers": []},
        {"topic": "A", "partition": 0, "offset": 3, "timestamp": "now", "key": "t2",
         "value": "y", "headers": []},
        {"topic": "A", "partition": 1, "offset": 0, "timestamp": "now", "key": "k1",
         "value": "v1", "headers": [{"key": "src", "value": "cli"}]},
        {"topic": "A", "partition": 1, "offset": 1, "timestamp": "now", "key": "k2",
         "value": "v2", "headers": [{"key": "src", "value": "cli"}]},
        {"topic": "A", "partition": 2, "offset": 0, "timestamp": "base+1000", "key": None,
         "value_b64": base64.b64encode(BINARY_VALUE).decode(),
         "headers": [{"key": "bin", "value": None}]},
        {"topic": "A", "partition": 2, "offset": 1, "timestamp": "now", "key": None,
         "value": "s1", "headers": []},
        {"topic": "A", "partition": 2, "offset": 2, "timestamp": "now", "key": None,
         "value": "", "headers": []},
        {"topic": "A", "partition": 2, "offset": 3, "timestamp": "now", "key": None,
         "value": "s3", "headers": []},
    ],
    "consume_format": "A|0|1|j2|at-2000|2|7|\nA|0|2|t1|x|2|1|\nA|0|3|t2|y|2|1|\n",
    "consume_timestamp": [(0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (2, 1), (2, 2), (2, 3)],
    "consume_base64": [(None, base64.b64encode(BINARY_VALUE).decode()),
                       (None, base64.b64encode(b"s1").decode())],
    "consume_print_key": "k1=v1\nk2=v2\n",
    "group": [(0, "c0\nc1\n"), (0, "c2\nc3\nc4\n"), (0, "")],
    "missing_topic": (3, True),
    "too_large": (1, True, False),
    "usage": 2,
}


def _compare(got: dict[str, Any]) -> None:
    for name, expected in EXPECTED.items():
        assert got[name] == expected, name


def test_scenario_on_a_data_dir(data_dir_place):
    _compare(_scenario(data_dir_place))


def test_scenario_on_a_seglog_broker(seglog_place):
    _compare(_scenario(seglog_place))


# --- follow mode ------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class _Lines:
    """A child's stdout read line by line, each read bounded in time."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._buffer = b""

    def next(self, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line within {timeout_s} s (got {self._buffer!r})"
            if self._selector.select(remaining):
                chunk = os.read(self._fd, 65536)
                assert chunk, f"stdout closed (got {self._buffer!r})"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


def _follow_until_sigterm(place: Place) -> None:
    topic = f"pc-follow-{uuid.uuid4().hex[:8]}"
    ran = place.seglog("produce", topic, input_text="old\n")
    assert ran.returncode == 0, ran.stderr
    proc = subprocess.Popen([sys.executable, "-m", "seglog", "consume", topic,
                             "--from-beginning", *place.where],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    try:
        lines = _Lines(proc)
        assert lines.next(COMMAND_TIMEOUT_S) == b"old"
        # The consumer follows: a record written now (by another process) is printed.
        ran = place.seglog("produce", topic, input_text="new\n")
        assert ran.returncode == 0, ran.stderr
        assert lines.next(COMMAND_TIMEOUT_S) == b"new"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert proc.stderr is not None
        assert "processed a total of 2 records" in proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_follow_on_a_data_dir_ends_on_sigterm(data_dir_place):
    _follow_until_sigterm(data_dir_place)


def test_follow_on_a_seglog_broker_ends_on_sigterm(seglog_place):
    _follow_until_sigterm(seglog_place)


# --- other clients: kcat writes, seglog reads, and the other way round ------------------------

def _kcat(*args: str, input_bytes: bytes | None = None) -> bytes:
    proc = subprocess.run(["kcat", *args], input=input_bytes, capture_output=True,
                          timeout=COMMAND_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _with_kcat(place: Place) -> None:
    assert place.bootstrap is not None
    tag = uuid.uuid4().hex[:8]
    from_kcat, from_seglog = f"pc-kcat-in-{tag}", f"pc-kcat-out-{tag}"
    place.create_topic(from_kcat, 2)
    place.create_topic(from_seglog, 1)
    # kcat produces (key, header, partition 1); seglog consume prints it as JSON.
    _kcat("-P", "-b", place.bootstrap, "-t", from_kcat, "-p", "1", "-K", ":", "-H", "via=kcat",
          input_bytes=b"kk:vv\n")
    ran = place.seglog("consume", from_kcat, "--from-beginning", "-e", "--format", "json")
    assert ran.returncode == 0, ran.stderr
    assert [{k: v for k, v in r.items() if k != "timestamp"} for r in ran.json_lines()] == [
        {"topic": from_kcat, "partition": 1, "offset": 0, "key": "kk", "value": "vv",
         "headers": [{"key": "via", "value": "kcat"}]}]
    # seglog produces (a binary value, a key, a header); kcat reads the same bytes.
    record = {"key": "sk", "value_b64": base64.b64encode(BINARY_VALUE).decode(),
              "headers": {"via": "seglog"}}
    ran = place.seglog("produce", from_seglog, "--format", "json", "-z", "gzip",
                       input_text=json.dumps(record) + "\n")
    assert ran.returncode == 0, ran.stderr
    out = _kcat("-C", "-b", place.bootstrap, "-t", from_seglog, "-e", "-q",
                "-f", "%k|%s|%h|%o\n")
    assert out == b"sk|" + BINARY_VALUE + b"|via=seglog|0\n"
    # And seglog's -f prints what kcat's -f prints for the same record.
    ran = place.seglog("consume", from_seglog, "--from-beginning", "-e", "-f",
                       "%k|%S|%h|%o\\n")
    assert ran.stdout == f"sk|{len(BINARY_VALUE)}|via=seglog|0\n"


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_and_seglog_on_a_seglog_broker(seglog_place):
    _with_kcat(seglog_place)


def test_a_data_dir_a_broker_serves_is_refused_clearly(seglog_broker, run_seglog):
    ran = run_seglog("produce", "t", "--data-dir", seglog_broker.data_dir, input_text="x\n")
    assert ran.returncode == 1
    assert "is a broker serving it? use --bootstrap-server" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_acks(data_dir_place, seglog_place):
    """--acks 0 on a broker: written, offsets unknown; refused on a data dir, where every write
    knows its offset. --idempotence with --acks 1: refused everywhere, as Kafka's producer."""
    ran = seglog_place.seglog("produce", "pc-acks0", "--acks", "0", "-o", "json",
                              input_text="a\n")
    assert ran.returncode == 0, ran.stderr
    assert ran.json() == {"topic": "pc-acks0", "records": 1, "partitions": {}}
    ran = seglog_place.seglog("consume", "pc-acks0", "--from-beginning", "-e")
    assert ran.stdout == "a\n"
    ran = data_dir_place.seglog("produce", "pc-acks0", "--acks", "0", input_text="a\n")
    assert ran.returncode == 2 and "--acks 0 is refused with --data-dir" in ran.stderr
    for place in (data_dir_place, seglog_place):
        ran = place.seglog("produce", "pc-acks1", "--acks", "1", "--idempotence",
                           input_text="a\n")
        assert ran.returncode == 2 and "needs --acks all" in ran.stderr
