"""Fixtures of the data tools' tests (issue 26): the real ``seglog`` command run as a
subprocess, and the three places it works on: a seglog data directory (``--data-dir``), a
seglog broker and a real Kafka 4.4 broker (``--bootstrap-server``)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import pytest

SRC_DIR = pathlib.Path(__file__).resolve().parents[2] / "src"
#: Every command run by a test ends within this many seconds (a hang fails the test).
COMMAND_TIMEOUT_S = 60.0


@dataclass
class Ran:
    """A finished ``seglog`` command: exit code, stdout, stderr."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout as one JSON document."""
        return json.loads(self.stdout)

    def json_lines(self) -> list[Any]:
        """stdout as JSON lines."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def run_seglog_command(args: Sequence[str], *, input_text: str | None = None,
                       cwd: str | os.PathLike[str] | None = None,
                       timeout_s: float = COMMAND_TIMEOUT_S,
                       env: dict[str, str] | None = None) -> Ran:
    """Run ``python -m seglog ARGS`` with this checkout's ``src`` first on the path."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC_DIR)] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "seglog", *args], input=input_text,
                          capture_output=True, text=True, cwd=cwd, env=full_env,
                          timeout=timeout_s, check=False)
    return Ran(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def run_seglog():
    """``run_seglog(*args, input_text=None, cwd=None) -> Ran``: the ``seglog`` command as a
    subprocess."""
    def run(*args: str, input_text: str | None = None,
            cwd: str | os.PathLike[str] | None = None,
            timeout_s: float = COMMAND_TIMEOUT_S) -> Ran:
        return run_seglog_command(args, input_text=input_text, cwd=cwd, timeout_s=timeout_s)
    return run


@pytest.fixture
def kafka_bootstrap(kafka_shared) -> str:
    """A real Kafka 4.4 broker's bootstrap servers (the session's shared broker: name
    topics and groups after your test module, read back only what you made)."""
    return str(kafka_shared.bootstrap)
