"""The README's "Secure it" section runs as written: openssl makes the certificates, `seglog
format` gives the broker its first SCRAM user, `seglog serve` starts with SASL_SSL + SCRAM +
ACLs, and the confluent-kafka snippet prints what the README says (alice writes and reads
her topic and is refused another). Only the port differs (a free one, not 9093)."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
LISTEN_S_MAX = 60


def _marked_block(text: str, marker: str) -> str:
    found = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```\n<!-- /{marker} -->", text,
                      flags=re.S)
    assert found, f"README.md has no {marker} block"
    return found.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.clients
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_readme_secure_section_runs(tmp_path):
    text = README.read_text()
    port = _free_port()
    shell = _marked_block(text, "secure-shell").replace("127.0.0.1:9093", f"127.0.0.1:{port}")
    client = _marked_block(text, "secure-python").replace("127.0.0.1:9093",
                                                          f"127.0.0.1:{port}")
    expected = [line for line in client.splitlines() if line.startswith("# [")][0][2:]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "seglog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m seglog "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(README.parent / "src"),
           "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    # The section as written, then the background broker's pid, so that this test stops
    # the process it started (and only that one).
    script = shell + "\necho $! > serve.pid\n"
    with open(tmp_path / "shell.out", "w") as out:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                              env=env, stdout=out, stderr=subprocess.STDOUT, timeout=120)
    pid = int((tmp_path / "serve.pid").read_text())
    try:
        assert done.returncode == 0, (tmp_path / "shell.out").read_text()
        deadline = time.monotonic() + LISTEN_S_MAX
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "shell.out").read_text()
                time.sleep(0.1)
        run = subprocess.run([sys.executable, "-c", client], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr + (tmp_path / "shell.out").read_text()
        assert run.stdout.strip() == expected, run.stdout
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
    log = (tmp_path / "shell.out").read_text()
    assert "stopped cleanly" in log, log
    assert (tmp_path / "secure-data" / "scram-credentials.json").exists()
