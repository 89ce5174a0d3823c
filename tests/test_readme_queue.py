"""The README's work-queue examples (share groups, issue 25) run as written.

The embedded one twice in one directory (the second run takes only the new jobs: the group's
state survived the close). The real-client one (confluent-kafka's ShareConsumer) against
``seglog serve`` and, as the reference, against a real Kafka 4.4 broker with the same code;
only the bootstrap address differs.
"""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
SRC = str(README.parent / "src")
EXPECTED_JOBS = "[b'job-0', b'job-1', b'job-2', b'job-3', b'job-4', b'job-5']"


def _block(marker: str) -> str:
    found = re.search(rf"<!-- {marker} -->\n```python\n(.*?)```\n<!-- /{marker} -->",
                      README.read_text(), flags=re.S)
    assert found, f"README.md has no {marker} block"
    return found.group(1)


def _run(code: str, cwd: pathlib.Path, timeout_s: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC, "SEGLOG_REQUIRE_NATIVE": "1"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout_s)


def test_readme_embedded_queue_runs_twice(tmp_path):
    code = _block("queue-embedded")
    for _ in range(2):
        done = _run(code, tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "100 100"
    assert (tmp_path / "queue-data" / "jobs-0").is_dir()
    assert any(p.name.startswith("__share_group_state-") for p in
               (tmp_path / "queue-data").iterdir())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _confluent_share_consumer_or_skip() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip(f"confluent-kafka {confluent_kafka.version()[0]} has no ShareConsumer "
                    f"(2.16+)")


def _share_groups_served_or_skip() -> None:
    from seglog.server.registry import served_apis

    served = {api_key for api_key, *_rest in served_apis()}
    # ShareGroupHeartbeat (76) and ShareFetch (78) land from other branches of issue 25.
    if not {76, 78} <= served:
        pytest.skip("seglog serve does not serve share groups on this branch yet "
                    "(ShareGroupHeartbeat 76, ShareFetch 78)")


@pytest.mark.clients
def test_readme_broker_queue_runs_against_seglog_serve(tmp_path):
    _confluent_share_consumer_or_skip()
    _share_groups_served_or_skip()
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": SRC}
    server = subprocess.Popen(
        [sys.executable, "-m", "seglog", "serve", "--data-dir", str(tmp_path / "data"),
         "--listen", f"127.0.0.1:{port}"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                assert time.monotonic() < deadline, "seglog serve did not listen in 30 s"
                time.sleep(0.05)
        code = _block("queue-broker").replace("127.0.0.1:9092", f"127.0.0.1:{port}")
        done = _run(code, tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == EXPECTED_JOBS
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


@pytest.mark.kafka
@pytest.mark.clients
def test_readme_broker_queue_runs_against_kafka(tmp_path):
    """The reference: the same code against a real Kafka 4.4 broker."""
    _confluent_share_consumer_or_skip()
    from seglog.bench.kafka import KafkaBroker, find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    broker = KafkaBroker(ref, tmp_path / "kafka", extra_properties={
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1"})
    broker.format()
    broker.start()
    try:
        code = _block("queue-broker").replace("127.0.0.1:9092", broker.bootstrap)
        done = _run(code, tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == EXPECTED_JOBS
    finally:
        broker.stop()
