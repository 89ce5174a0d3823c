"""``seglog serve`` as a subprocess: it logs one line when listening, answers Kafka's
ApiVersions, shuts down cleanly on SIGTERM and SIGINT (exit 0, clean-shutdown marker, data
kept for the next start), and refuses bad settings with exit 2 and a suggestion."""

from __future__ import annotations

import logging
import os
import re
import selectors
import signal
import struct
import subprocess
import sys
import time

import pytest

from core_helpers import read_frame, request_frame
from seglog import cli
from seglog.store import Store

LISTENING = re.compile(
    r"seglog serve listening on 127\.0\.0\.1:(\d+) \(data dir (.*), (\d+) topics\)")
START_TIMEOUT_S = 60.0  # a loaded CI machine; the start itself is a fraction of a second


def _serve(*args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "src"), env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-m", "seglog", "serve", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, text=True)


def _wait_listening(proc: subprocess.Popen) -> tuple[int, str, int, list[str]]:
    """(port, data dir, topic count, lines so far) from the listening line, bounded."""
    lines: list[str] = []
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            match = LISTENING.search(line)
            if match:
                return int(match.group(1)), match.group(2), int(match.group(3)), lines
    finally:
        selector.close()
    proc.kill()
    proc.wait(10)
    raise AssertionError("seglog serve did not say it was listening:\n" + "".join(lines))


def _api_versions_answered(port: int) -> bool:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(request_frame(18, 0, 5))
        frame = read_frame(sock)
    return frame is not None and struct.unpack_from(">ih", frame) == (5, 0)


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
        raise AssertionError("seglog serve did not exit:\n" + out)
    return proc.returncode, out


def test_serve_starts_answers_stops_cleanly_and_restarts_with_the_data(tmp_path):
    data_dir = tmp_path / "data"
    with Store(data_dir) as store:
        store.create_topic("kept", partitions=2)
        producer = store.producer()
        producer.send("kept", b"v", partition=1)
        producer.flush()
    for signum, backend in ((signal.SIGINT, "pure"), (signal.SIGTERM, "native")):
        proc = _serve("--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
                      "--config", "num.partitions=2", "--backend", backend)
        port, shown_dir, topics, lines = _wait_listening(proc)
        assert (shown_dir, topics) == (str(data_dir), 1)
        assert _api_versions_answered(port)
        proc.send_signal(signum)
        code, out = _finish(proc)
        assert code == 0, "".join(lines) + out
        assert sum(1 for line in ("".join(lines) + out).splitlines()
                   if "listening on" in line) == 1
        assert (data_dir / ".kafka_cleanshutdown").exists()
    with Store(data_dir) as store:
        assert store.topic("kept").end_offsets() == {0: 0, 1: 1}


def test_serve_takes_a_config_file(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("# Kafka's sample keys\nnum.network.threads=3\n"
                          f"log.dirs={tmp_path / 'from-file'}\n"
                          "listeners=PLAINTEXT://127.0.0.1:0\n")
    proc = _serve("--config-file", str(properties))
    port, shown_dir, _, _ = _wait_listening(proc)
    assert shown_dir == str(tmp_path / "from-file")
    proc.send_signal(signal.SIGTERM)
    assert _finish(proc)[0] == 0
    assert (tmp_path / "from-file" / "meta.properties").exists()


@pytest.fixture
def in_process_serve():
    """``cli.main(["serve", ...])`` run in this process changes what the process keeps for
    its later tests: the root logger's handler (a stream on this test's captured stderr,
    closed once the test ends: later log lines become "--- Logging error ---") and level,
    warnings captured into logging, the SIGUSR1 handler, and ``sys.modules["hypothesis"]``
    set to None (a broker process never imports it; a later test that does would fail).
    Put each back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    hypothesis = sys.modules.get("hypothesis", _ABSENT)
    usr1 = signal.getsignal(signal.SIGUSR1)
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)
    if hypothesis is _ABSENT:
        sys.modules.pop("hypothesis", None)
    else:
        sys.modules["hypothesis"] = hypothesis
    signal.signal(signal.SIGUSR1, usr1)


_ABSENT = object()


@pytest.mark.parametrize("args, message", [
    (["--config", "num.partition=3"], "did you mean 'num.partitions'"),
    (["--config", "num.partitions=zero"], "num.partitions"),
    # A Kafka config seglog does not implement is refused by name, never ignored.
    (["--config", "ssl.cipher.suites=TLS_AES_128_GCM_SHA256"],
     "Kafka broker config ssl.cipher.suites is not implemented by seglog"),
    (["--config", "novalue"], "key=value"),
    (["--listen", "nowhere"], "host:port"),
    (["--config-file", "/nonexistent/server.properties"], "No such file"),
])
@pytest.mark.usefixtures("in_process_serve")
def test_serve_refuses_bad_settings(tmp_path, capsys, args, message):
    # In this process: bad settings are refused before anything starts.
    assert cli.main(["serve", "--data-dir", str(tmp_path / "d"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


@pytest.mark.usefixtures("in_process_serve")
def test_serve_on_a_locked_directory_exits_1(tmp_path, broker_factory, capsys):
    broker = broker_factory(data_dir=tmp_path / "d")
    assert cli.main(["serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0"]) == 1
    assert "lock" in capsys.readouterr().err.lower()
    assert broker.store.topics() == []


def test_sigusr1_writes_every_threads_stack_and_the_broker_carries_on(tmp_path):
    """SIGUSR1 is the operator's thread dump (and what `seglog cluster` sends before it
    SIGKILLs a broker that did not stop): the stacks go to stderr, the broker keeps serving."""
    proc = _serve("--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0")
    port, _, _, lines = _wait_listening(proc)
    proc.send_signal(signal.SIGUSR1)
    assert _api_versions_answered(port)
    proc.send_signal(signal.SIGTERM)
    code, out = _finish(proc)
    assert code == 0, "".join(lines) + out
    assert "Current thread" in out or "Thread 0x" in out, out
    assert "stopped cleanly" in out
