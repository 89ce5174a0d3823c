"""The README's usage example runs as written (in a temporary directory), on the default backend."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from doc_examples import check_output, expected_lines

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(tmp_path):
    """The "Use it" example, run twice in one fresh directory: it prints what its comments
    promise, and its exactly-once part copies every record of ``clicks`` to
    ``clicks-enriched`` (read_committed) with the group ``etl``'s offsets committed at the
    end of ``clicks``, once per record across both runs (the second copies only the ten
    clicks it added)."""
    block = _marked_block(README.read_text(), "use-it")
    script = tmp_path / "example.py"
    script.write_text(block)
    src = str(README.parent / "src")
    for run in (1, 2):
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
            timeout=120, env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin",
                              "SEGLOG_REQUIRE_NATIVE": "1"},
        )
        assert result.returncode == 0, result.stderr
        assert "b'k3' b'c'" in result.stdout
        check_output(expected_lines(block), result.stdout)
        clicks, copies, lag, committed_txn = _topic_copies(tmp_path / "data" / "store")
        assert len(clicks) == 10 * run
        assert copies == clicks  # each click copied once, keys and values as read
        assert lag == {p: 0 for p in range(6)}, lag  # etl's commits are at the end
        assert committed_txn  # the copies are transactional batches, committed
    assert (tmp_path / "data" / "clicks-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "data" / "store" / "recovery-point-offset-checkpoint").exists()


def _topic_copies(data_dir: pathlib.Path):
    """(sorted (key, value) of ``clicks``, the same of ``clicks-enriched`` read_committed,
    the group ``etl``'s lag per partition of ``clicks``, whether ``clicks-enriched`` has
    transaction markers) as the Store on ``data_dir`` has them."""
    import seglog

    def read_all(store, topic, isolation):
        consumer = store.consumer(None, isolation_level=isolation,
                                  auto_offset_reset="earliest")
        consumer.assign([(topic, p) for p in range(6)])
        got = []
        for _ in range(100):
            records = consumer.poll(max_records=1000, timeout_ms=0)
            if not records:
                break
            got += [(r.key, r.value) for r in records]
        consumer.close()
        return sorted(got)

    with seglog.Store(data_dir) as store:
        clicks = read_all(store, "clicks", "read_uncommitted")
        copies = read_all(store, "clicks-enriched", "read_committed")
        lag = {tp.partition: n for tp, n in store.group("etl").lag().items()
               if tp.topic == "clicks"}
        # Commit markers take offsets: a log past its records holds transactions' batches.
        markers = sum(store.topic("clicks-enriched").end_offsets().values()) > len(copies)
    return clicks, copies, lag, markers


def test_readme_commands_are_the_ci_commands():
    text = README.read_text()
    test_block = re.search(r"<!-- test-command -->\n```\w*\n(.*?)\n```", text, flags=re.S)
    run_block = re.search(r"<!-- run-command -->\n```\w*\n(.*?)\n```", text, flags=re.S)
    assert test_block and "pytest" in test_block.group(1)
    assert run_block and "seglog bench" in run_block.group(1)


def _marked_block(text: str, marker: str) -> str:
    found = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```\n<!-- /{marker} -->", text, flags=re.S)
    assert found, f"README.md has no {marker} block"
    return found.group(1)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.clients
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_readme_broker_section_runs(tmp_path):
    """The broker section as written: `seglog serve` in the background, kcat produces, the
    confluent-kafka snippet reads the two records, the pytest example passes with the plugin;
    then SIGTERM stops the broker cleanly. Only the port differs (a free one, not 9092)."""
    import signal
    import socket
    import time

    text = README.read_text()
    port = _free_port()
    here = f"127.0.0.1:{port}"
    shell = _marked_block(text, "broker-shell").replace("127.0.0.1:9092", here)
    consume = _marked_block(text, "broker-consume").replace("127.0.0.1:9092", here)
    fixture_test = _marked_block(text, "broker-pytest")
    serve_line, *other_lines = [line for line in shell.splitlines() if line.strip()]
    assert serve_line.startswith("seglog serve ") and serve_line.endswith(" &")
    src = str(README.parent / "src")
    env = {**os.environ, "PYTHONPATH": src, "SEGLOG_REQUIRE_NATIVE": "1"}
    serve_args = shlex.split(serve_line[:-1])[1:]  # `seglog` is `python -m seglog` here
    server = subprocess.Popen([sys.executable, "-m", "seglog", *serve_args], cwd=tmp_path,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "seglog serve did not listen in 30 s"
                time.sleep(0.05)
        for line in other_lines:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (line, done.stderr)
        done = subprocess.run([sys.executable, "-c", consume], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == \
            "[(0, b'user-1', b'clicked'), (1, b'user-2', b'scrolled')]"
        (tmp_path / "fixture_example").mkdir()
        (tmp_path / "fixture_example" / "test_example.py").write_text(fixture_test)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:seglog",
             "-p", "seglog.pytest_plugin", "test_example.py"],
            cwd=tmp_path / "fixture_example", env=env, capture_output=True, text=True,
            timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 passed" in done.stdout
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0, server.stdout.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)
    assert (tmp_path / "seglog-data" / "clicks-0").is_dir()


def _zookeeper_or_skip() -> None:
    from seglog.cluster.zookeeper import ZooKeeperNotInstalledError, find_zookeeper

    try:
        find_zookeeper()
    except ZooKeeperNotInstalledError as exc:
        if os.environ.get("SEGLOG_REQUIRE_ZOOKEEPER") == "1":
            raise
        pytest.skip(str(exc))


@pytest.mark.slow
@pytest.mark.clients
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_readme_cluster_section_runs(tmp_path):
    """The cluster section as written, verbatim (`seglog` is a shim for `python -m seglog`):
    the article's experiment on a local 3-broker cluster refuses writes with two brokers down
    and loses nothing acknowledged."""
    _zookeeper_or_skip()
    shell = _marked_block(README.read_text(), "cluster-shell")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "seglog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m seglog "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(README.parent / "src"),
           "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", shell], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=240)
    finally:
        subprocess.run([str(shim), "cluster", "down"], cwd=tmp_path, env=env,
                       capture_output=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Not enough in-sync replicas" in done.stderr
    assert "refused" in done.stdout
    assert done.stdout.strip().splitlines()[-1].strip() == "2000", done.stdout
