"""``seglog cluster`` and :class:`seglog.cluster.local.LocalCluster`: a ZooKeeper and N
``seglog serve`` processes under one directory, driven from other processes through the state
file, and never signalling a process it did not start."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seglog.cluster.local import (
    STATE_FILE_NAME, LocalCluster, LocalClusterError, process_cmdline, process_state,
)

SRC = str(Path(__file__).resolve().parents[2] / "src")
#: The broker's cluster mode (helper E1's replica manager on B's ZooKeeper client): the
#: lifecycle tests need brokers that register in ZooKeeper.
CLUSTER_MODE = all(importlib.util.find_spec(name) is not None for name in (
    "seglog.cluster.zk_client", "seglog.cluster.replica_manager"))
needs_cluster_mode = pytest.mark.skipif(
    not CLUSTER_MODE, reason="the broker's cluster mode (seglog.cluster.zk_client, "
                             "seglog.cluster.replica_manager) is not there yet")
#: Bound on one `seglog cluster` command.
COMMAND_TIMEOUT_S = 120


def seglog(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m seglog ARGS`` (this checkout's seglog), bounded."""
    environ = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run([sys.executable, "-m", "seglog", *args], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S, env=environ)


def test_cluster_without_an_action_is_bad_usage():
    result = seglog("cluster")
    assert result.returncode == 2
    assert "up, down, status" in result.stderr


def test_status_of_no_cluster_says_so(tmp_path):
    result = seglog("cluster", "status", "--dir", str(tmp_path / "none"))
    assert result.returncode == 1
    assert "no local cluster" in result.stderr


def test_up_without_zookeeper_says_how_to_install_it(tmp_path):
    result = seglog("cluster", "up", "--brokers", "1", "--dir", str(tmp_path),
                    env={"SEGLOG_ZOOKEEPER_CLASSPATH": str(tmp_path / "no-zookeeper.jar")})
    assert result.returncode == 1, result
    assert "apt-get install zookeeper" in result.stderr
    assert result.stdout == ""
    state = json.loads((tmp_path / STATE_FILE_NAME).read_text()) \
        if (tmp_path / STATE_FILE_NAME).exists() else {"brokers": []}
    assert all(b["pid"] is None for b in state["brokers"])


def test_a_recycled_pid_is_never_signalled(tmp_path):
    """The state file names a pid that is now another program: status calls the broker
    down, kill refuses, down leaves it alone."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cluster = LocalCluster(tmp_path, 2, zookeeper="127.0.0.1:1")
        cluster.brokers[0].pid = stranger.pid
        cluster.brokers[0].port = 1
        cluster.brokers[1].port = 2
        cluster.save_state()
        status = seglog("cluster", "status", "--dir", str(tmp_path))
        assert status.returncode == 0, status
        assert f"broker 0 127.0.0.1:1 down pid=-" in status.stdout
        for args in (("kill", "0"), ("kill", "0", "--signal", "STOP")):
            result = seglog("cluster", *args, "--dir", str(tmp_path))
            assert result.returncode == 1 and "not running" in result.stderr
        assert seglog("cluster", "down", "--dir", str(tmp_path)).returncode == 0
        assert stranger.poll() is None and process_state(stranger.pid) not in ("T", "Z")
        with pytest.raises(LocalClusterError, match="not running"):
            LocalCluster.attach(tmp_path).pause(0)
    finally:
        stranger.kill()
        stranger.wait(timeout=10)


def test_up_refuses_a_directory_whose_cluster_runs(tmp_path):
    """A second `up` over a live cluster's directory must not start a second cluster (it
    would lose the first one's pids)."""
    cluster = LocalCluster(tmp_path, 1, zookeeper="127.0.0.1:1")
    data_dir = cluster.brokers[0].data_dir
    # A process that looks like that broker: `serve` and its data directory in its argv.
    lookalike = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                  "serve", data_dir])
    try:
        # Popen returns when the child's close-on-exec pipe closes, which is inside execve
        # before the kernel records the new argv: /proc/<pid>/cmdline can read empty for a
        # moment (a loaded CI machine saw it), so wait until it shows the lookalike's argv.
        deadline = time.monotonic() + 10
        while data_dir not in process_cmdline(lookalike.pid):
            assert time.monotonic() < deadline, process_cmdline(lookalike.pid)
            time.sleep(0.01)
        cluster.brokers[0].pid = lookalike.pid
        cluster.save_state()
        with pytest.raises(LocalClusterError, match="already runs"):
            LocalCluster(tmp_path, 1, zookeeper="127.0.0.1:1").up(timeout_s=5)
        assert LocalCluster.attach(tmp_path).status()[0]["state"] == "running"
    finally:
        lookalike.kill()
        lookalike.wait(timeout=10)


@needs_cluster_mode
def test_up_status_kill_start_down_from_other_processes(tmp_path):
    """The user's path: `seglog cluster up` prints the bootstrap servers and returns; every
    other action works from another process through the state file."""
    pids, zookeeper_pid = [], None
    up = seglog("cluster", "up", "--brokers", "3", "--dir", str(tmp_path),
                "--config", "zookeeper.session.timeout.ms=4000")
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        bootstrap = up.stdout.strip()
        state = json.loads((tmp_path / STATE_FILE_NAME).read_text())
        ports = [b["port"] for b in state["brokers"]]
        assert bootstrap == ",".join(f"127.0.0.1:{p}" for p in ports)
        pids = [b["pid"] for b in state["brokers"]]
        zookeeper_pid = state["zookeeper"]["pid"]
        assert all(process_state(pid) not in (None, "Z") for pid in pids)

        status = seglog("cluster", "status", "--dir", str(tmp_path))
        assert status.returncode == 0
        assert status.stdout.count("running") == 3
        assert status.stdout.count(" registered") == 3

        assert seglog("cluster", "kill", "1", "--dir", str(tmp_path)).returncode == 0
        assert process_state(pids[1]) in (None, "Z")
        status = seglog("cluster", "status", "--dir", str(tmp_path)).stdout
        assert f"broker 1 127.0.0.1:{ports[1]} down" in status

        start = seglog("cluster", "start", "1", "--dir", str(tmp_path))
        assert start.returncode == 0, start.stderr[-3000:]
        assert start.stdout.strip() == f"127.0.0.1:{ports[1]}"

        assert seglog("cluster", "kill", "2", "--signal", "STOP",
                      "--dir", str(tmp_path)).returncode == 0
        assert process_state(pids[2]) == "T"
        assert "paused" in seglog("cluster", "status", "--dir", str(tmp_path)).stdout
        assert seglog("cluster", "kill", "2", "--signal", "CONT",
                      "--dir", str(tmp_path)).returncode == 0
        assert process_state(pids[2]) != "T"
    finally:
        down = seglog("cluster", "down", "--dir", str(tmp_path))
    assert down.returncode == 0, down.stderr
    state = json.loads((tmp_path / STATE_FILE_NAME).read_text())
    assert all(b["pid"] is None for b in state["brokers"]) and state["zookeeper"]["pid"] is None
    for pid in pids + [zookeeper_pid]:
        if pid:
            deadline = time.monotonic() + 10
            while process_state(pid) not in (None, "Z") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert process_state(pid) in (None, "Z")


@needs_cluster_mode
def test_cluster_faults_in_process(tmp_path, zookeeper, zk_connect):
    """LocalCluster on the session's ZooKeeper (a chroot of its own): kill -9 takes a broker
    out of /brokers/ids (after the session timeout), start brings it back with a new pid on
    the same port; pause/resume; stop is clean (exit 0)."""
    with LocalCluster(tmp_path, 2, zookeeper=zk_connect,
                      broker_configs={"zookeeper.session.timeout.ms": 4000}) as cluster:
        assert cluster.registered_brokers() == {0, 1}
        old_pid, port = cluster.pid(1), cluster.brokers[1].port
        cluster.kill(1)
        assert cluster.pid(1) is None
        deadline = time.monotonic() + 15
        while 1 in (cluster.registered_brokers() or {1}) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.registered_brokers() == {0}
        cluster.start(1)
        assert cluster.pid(1) not in (None, old_pid) and cluster.brokers[1].port == port
        assert cluster.registered_brokers() == {0, 1}
        cluster.pause(0)
        assert [r["state"] for r in cluster.status()] == ["paused", "running"]
        cluster.resume(0)
        assert cluster.stop(0) == 0
        with pytest.raises(LocalClusterError, match="not running"):
            cluster.kill(0, signal.SIGSTOP)


@needs_cluster_mode
def test_expire_session_makes_the_broker_register_again(tmp_path, zookeeper, zk_connect):
    """The same-session trick (R§6.2): a second client on the broker's own session closes it;
    the broker, still running, registers again with a new broker epoch."""
    with LocalCluster(tmp_path, 2, zookeeper=zk_connect, session_hook=True,
                      broker_configs={"zookeeper.session.timeout.ms": 4000}) as cluster:
        epoch = cluster.broker_epoch(1)
        assert epoch is not None
        pid = cluster.pid(1)
        cluster.expire_session(1)
        deadline = time.monotonic() + 30
        while cluster.broker_epoch(1) in (None, epoch) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.broker_epoch(1) not in (None, epoch)
        assert cluster.pid(1) == pid


@needs_cluster_mode
def test_expire_session_without_the_hook_is_unavailable(tmp_path, zookeeper, zk_connect):
    from seglog.cluster.local import FaultUnavailableError

    with LocalCluster(tmp_path, 1, zookeeper=zk_connect) as cluster:
        with pytest.raises(FaultUnavailableError, match="does not expose"):
            cluster.expire_session(0)
