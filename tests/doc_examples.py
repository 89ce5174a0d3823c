"""The fenced code blocks of README.md and docs/*.md, and how an example is run and checked.

The convention (what ``tests/test_examples.py`` enforces):

- Every fenced block names its language. ``python``, ``sh`` and ``bash`` blocks are
  *examples*: each runs in a test, in a fresh temporary directory. ``text`` (output,
  diagrams, synopses), ``properties``, ``json``, ``yaml`` and ``toml`` blocks are not run.
- HTML comments on the lines directly above the opening fence say more about the block:
  ``<!-- not-run: REASON -->`` exempts an example (the reason is required, and says what
  checks it instead); ``<!-- NAME -->`` (lower case, dashes) names the block, and a README
  block named in :data:`DEDICATED` is run by that test instead of the generic one (the
  README's broker, queue, security and cluster sections need more than one block).
- What an example promises is checked: a comment ``# -> TEXT`` (on a ``print`` line or on
  its own line after it; in a shell block on the command's line) is a line the example
  prints, in that order (``<name>`` and ``...`` in TEXT match anything); a python block that
  defines ``test_*`` functions is a pytest module and must pass; a few blocks have a named
  check in ``tests/test_examples.py`` (files made, a broker's answers). An example with
  neither is an error: an example must show an effect a test can see.
- The ports an example names on ``127.0.0.1``/``localhost`` (9092, 9093, a metrics port) are
  rewritten to free ones at run time; an example that names 9092 without starting
  ``seglog serve`` itself gets a broker there.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
RUN_LANGS = frozenset({"python", "sh", "bash"})
OTHER_LANGS = frozenset({"text", "properties", "json", "yaml", "toml", "ini"})
LISTEN_S_MAX = 30

#: README blocks run by a dedicated test (several blocks make one scenario there), by name.
DEDICATED: dict[str, str] = {
    "use-it": "tests/test_readme.py::test_readme_python_example_runs",
    "broker-shell": "tests/test_readme.py::test_readme_broker_section_runs",
    "broker-consume": "tests/test_readme.py::test_readme_broker_section_runs",
    "broker-pytest": "tests/test_readme.py::test_readme_broker_section_runs",
    "queue-embedded": "tests/test_readme_queue.py::test_readme_embedded_queue_runs_twice",
    "queue-broker":
        "tests/test_readme_queue.py::test_readme_broker_queue_runs_against_seglog_serve",
    "secure-shell": "tests/test_readme_secure.py::test_readme_secure_section_runs",
    "secure-python": "tests/test_readme_secure.py::test_readme_secure_section_runs",
    "cluster-shell": "tests/test_readme.py::test_readme_cluster_section_runs",
}

_FENCE = re.compile(r"^```(\S*)\s*$")
_COMMENT = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    doc: str                    # the file, relative to the repository
    line: int                   # 1-based line of the opening fence
    lang: str                   # "" when the fence names none
    text: str
    comments: tuple[str, ...]   # the HTML comments directly above the fence, top down

    @property
    def id(self) -> str:
        """``doc:line`` (and the name, when the block has one), for test ids and messages."""
        return f"{self.doc}:{self.line}" + (f"[{self.name}]" if self.name else "")

    @property
    def name(self) -> str | None:
        """The block's name marker (``<!-- broker-shell -->``), if any."""
        for comment in self.comments:
            if _NAME.match(comment):
                return comment
        return None

    @property
    def not_run(self) -> str | None:
        """The reason of a ``<!-- not-run: REASON -->`` marker ("" when it gives none)."""
        for comment in self.comments:
            if comment.startswith("not-run"):
                return comment[len("not-run"):].lstrip(":").strip()
        return None

    @property
    def is_example(self) -> bool:
        """A python/sh block: an example, to be run unless marked not-run."""
        return self.lang in RUN_LANGS

    @property
    def expected_lines(self) -> list[str]:
        """The ``# -> TEXT`` promises, in order."""
        return expected_lines(self.text)

    @property
    def is_pytest_module(self) -> bool:
        """A python block that defines test functions (run by pytest, must pass)."""
        return self.lang == "python" and re.search(r"^def test_\w+\(", self.text, re.M) is not None


def expected_lines(text: str) -> list[str]:
    """The ``# -> TEXT`` promises of an example's text, in order."""
    return [m.group(1).rstrip() for m in re.finditer(r"#\s*->\s*(.*)$", text, re.M)]


def markdown_files() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file (fences at the start of a line)."""
    lines = path.read_text().splitlines()
    doc = str(path.relative_to(REPO))
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        comments: list[str] = []
        j = i - 1
        while j >= 0 and (m := _COMMENT.match(lines[j])):
            comments.insert(0, m.group(1))
            j -= 1
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        found.append(Block(doc, i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n",
                           tuple(comments)))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    """Every fenced block of README.md and docs/."""
    return [b for path in markdown_files() for b in blocks_of(path)]


def _pattern(expected: str) -> re.Pattern[str]:
    parts = re.split(r"(<[\w .-]+>|\.\.\.)", expected.strip())
    return re.compile("".join(".*?" if i % 2 else re.escape(p) for i, p in enumerate(parts)))


def check_output(expected: list[str], stdout: str) -> None:
    """Each expected line matches a line of ``stdout``, in order (``<x>``/``...`` match
    anything); assertion error naming the first that does not."""
    lines = [line.strip() for line in stdout.splitlines()]
    at = 0
    for want in expected:
        pattern = _pattern(want)
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        assert at < len(lines), f"expected a line {want!r} (in order) in:\n{stdout}"
        at += 1


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def env_with_seglog(tmp_path: Path) -> dict[str, str]:
    """The environment an example runs in: this checkout's src on PYTHONPATH and a
    ``seglog`` command on PATH (a shim for ``python -m seglog``)."""
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "seglog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m seglog "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PYTHONPATH": str(SRC), "SEGLOG_REQUIRE_NATIVE": "1",
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def wait_listening(port: int, alive: "subprocess.Popen[str] | None" = None,
                   timeout_s: float = LISTEN_S_MAX) -> None:
    """Until 127.0.0.1:port accepts a connection (and ``alive`` still runs)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if alive is not None:
                assert alive.poll() is None, "the broker exited before it listened"
            assert time.monotonic() < deadline, f"nothing listened on {port} in {timeout_s} s"
            time.sleep(0.05)


def stop_process(proc: "subprocess.Popen[str]", timeout_s: float = 60) -> None:
    """SIGTERM a child process this test started, then SIGKILL it if it outlives
    ``timeout_s`` (reaped either way)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


def stop_pid(pid: int, timeout_s: float = 60) -> None:
    """SIGTERM a process this test's script left in the background (not a child of this
    process: init reaps it), then SIGKILL it if it outlives ``timeout_s``."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
