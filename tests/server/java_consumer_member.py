"""Kafka 4.4's Java consumer as a group member (``java/ConsumerGroupMember.java``, compiled
with ``javac`` at test time) for the KIP-848 tests: :func:`compile_member` builds it once,
:class:`JavaMember` runs one and collects the lines it prints ("ASSIGNED p,p",
"REVOKED p,p", "RECORD partition offset", "EPOCH n", "CLOSED")."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from seglog.bench.kafka import find_kafka

SOURCE = Path(__file__).resolve().parent / "java" / "ConsumerGroupMember.java"


#: (source, its mtime, Kafka's classpath) -> ``(java, classpath)`` of a compile done in this
#: test session: javac takes seconds, and the tests/server and tests/cluster modules both ask.
_COMPILED: dict[tuple[str, int, str], tuple[str, str]] = {}


def compile_member(out_dir: Path) -> tuple[str, str]:
    """``(java, classpath)`` to run ``ConsumerGroupMember``, compiled into ``out_dir`` the
    first time in a session (later calls reuse that compile while its classes are there);
    skips without java, javac or the Kafka jars (fails under ``SEGLOG_REQUIRE_KAFKA=1``)."""
    ref, why = find_kafka()
    required = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
    javac = None
    if ref is not None:
        javac = shutil.which("javac") or str(Path(ref.java).with_name("javac"))
        if not Path(javac).exists():
            javac, why = None, "needs javac (a JDK)"
    if ref is None or javac is None:
        if required:
            pytest.fail(why)
        pytest.skip(why)
    key = (str(SOURCE), SOURCE.stat().st_mtime_ns, ref.classpath)
    done = _COMPILED.get(key)
    if done is not None and Path(done[1].split(":", 1)[0], "ConsumerGroupMember.class").is_file():
        return done
    subprocess.run([javac, "-cp", ref.classpath, "-d", str(out_dir), str(SOURCE)],
                   check=True, timeout=120, capture_output=True)
    _COMPILED[key] = (ref.java, f"{out_dir}:{ref.classpath}")
    return _COMPILED[key]


#: How long a member told to close goes on first, reading: long enough for several polls
#: (200 ms) and commits, so a record read twice after a rebalance still shows.
QUIET_S = 3.0


def start_member(java: str, classpath: str, bootstrap: str, group: str, topic: str,
                 run_s: int) -> subprocess.Popen:
    """A ``ConsumerGroupMember`` process (stdout piped, text; stdin piped for
    :func:`ask_to_close`) that closes after ``run_s`` seconds at the latest."""
    return subprocess.Popen(
        [java, "-cp", classpath, "ConsumerGroupMember", bootstrap, group, topic, str(run_s)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def ask_to_close(process: subprocess.Popen, quiet_s: float = QUIET_S) -> None:
    """Let the member go on reading for ``quiet_s``, then ask it to close (a line on its
    stdin) instead of waiting out its ``run_s``."""
    time.sleep(quiet_s)
    try:
        process.stdin.write("close\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
    except (BrokenPipeError, OSError):  # it closed already
        pass


class JavaMember:
    """One running ``ConsumerGroupMember`` (``run_s`` seconds at the latest, then it
    closes); ``lines`` is what it printed so far."""

    def __init__(self, java: str, classpath: str, bootstrap: str, group: str, topic: str,
                 run_s: int):
        self.process = start_member(java, classpath, bootstrap, group, topic, run_s)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(
            line.rstrip() for line in self.process.stdout), daemon=True)  # type: ignore[union-attr]
        self._reader.start()

    def records(self) -> list[str]:
        """The "RECORD partition offset" lines."""
        return [line for line in self.lines if line.startswith("RECORD")]

    def events(self) -> list[str]:
        """The lines other than records and epochs: assignments, revocations, CLOSED."""
        return [line for line in self.lines if not line.startswith(("RECORD", "EPOCH"))]

    def wait_for(self, done: Callable[[], bool], what: str, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` (or until the process ends) for ``done()``."""
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.1)
        assert done(), (what, self.lines[-20:])

    def finish(self, timeout_s: float) -> int:
        """Let it read for :data:`QUIET_S` more, ask it to close and wait (up to
        ``timeout_s``) until it did; its exit status."""
        ask_to_close(self.process)
        code = self.process.wait(timeout_s)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """Kill it if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
