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

from seglog.cluster.local import STATE_FILE_NAME, LocalCluster, LocalClusterError
from seglog.cluster.processes import process_cmdline, process_state

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
#: `seglog cluster status` answers within a second (beyond its interpreter's start).
STATUS_BOUND_S = 1.0


def seglog(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m seglog ARGS`` (this checkout's seglog), bounded."""
    environ = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run([sys.executable, "-m", "seglog", *args], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S, env=environ)


def status_of(cluster_dir) -> list[str]:
    """``seglog cluster status``'s lines, checked to come within the promised second (plus
    the interpreter's start, measured alongside: a loaded machine slows both alike)."""
    started = time.monotonic()
    baseline = subprocess.run([sys.executable, "-c", "import seglog.cli"], timeout=60,
                              env={**os.environ, "PYTHONPATH": SRC})
    startup_s = time.monotonic() - started
    assert baseline.returncode == 0
    started = time.monotonic()
    result = seglog("cluster", "status", "--dir", str(cluster_dir))
    elapsed_s = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert elapsed_s < startup_s + STATUS_BOUND_S, (elapsed_s, startup_s)
    return result.stdout.splitlines()


def broker_line(lines: list[str], broker_id: int) -> list[str]:
    """The fields of broker ``broker_id``'s status line."""
    return next(line.split() for line in lines if line.startswith(f"broker {broker_id} "))


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
        assert f"broker 0 127.0.0.1:1 down pid=- alive=? registered=?" in status.stdout
        assert "zookeeper 127.0.0.1:1 (not answering)" in status.stdout
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
        assert "grants sessions of 1000..10000 ms; brokers ask for 4000 ms" in up.stderr
        bootstrap = up.stdout.strip()
        state = json.loads((tmp_path / STATE_FILE_NAME).read_text())
        ports = [b["port"] for b in state["brokers"]]
        assert bootstrap == ",".join(f"127.0.0.1:{p}" for p in ports)
        pids = [b["pid"] for b in state["brokers"]]
        zookeeper_pid = state["zookeeper"]["pid"]
        assert all(process_state(pid) not in (None, "Z") for pid in pids)

        lines = status_of(tmp_path)
        assert len([line for line in lines if line.startswith("broker ")]) == 3
        controller = LocalCluster.attach(tmp_path).controller_id()
        for broker_id, (pid, port) in enumerate(zip(pids, ports)):
            fields = broker_line(lines, broker_id)
            assert fields[:4] == ["broker", str(broker_id), f"127.0.0.1:{port}", "running"]
            assert fields[4:8] == [f"pid={pid}", "alive=yes", "registered=yes",
                                   f"controller={'yes' if broker_id == controller else 'no'}"]
            assert fields[8:] == ["leaders=0", "under_replicated=0"]  # no topic yet
        assert lines[-1] == "partitions 0 offline=0 under_replicated=0"

        kill = seglog("cluster", "kill", "1", "--dir", str(tmp_path))
        assert kill.returncode == 0
        assert f"sent SIGKILL to broker 1 (pid {pids[1]}, 127.0.0.1:{ports[1]}): killed" \
            in kill.stderr
        assert process_state(pids[1]) in (None, "Z")
        fields = broker_line(status_of(tmp_path), 1)
        assert fields[2:6] == [f"127.0.0.1:{ports[1]}", "down", "pid=-", "alive=no"]

        start = seglog("cluster", "start", "1", "--dir", str(tmp_path))
        assert start.returncode == 0, start.stderr[-3000:]
        assert start.stdout.strip() == f"127.0.0.1:{ports[1]}"
        new_pid = LocalCluster.attach(tmp_path).pid(1)
        assert f"started broker 1 (pid {new_pid}) on 127.0.0.1:{ports[1]}" in start.stderr
        assert broker_line(status_of(tmp_path), 1)[4:6] == [f"pid={new_pid}", "alive=yes"]

        pause = seglog("cluster", "kill", "2", "--signal", "STOP", "--dir", str(tmp_path))
        assert pause.returncode == 0
        assert f"sent SIGSTOP to broker 2 (pid {pids[2]}, " in pause.stderr
        assert "paused" in pause.stderr
        assert process_state(pids[2]) == "T"
        assert broker_line(status_of(tmp_path), 2)[3] == "paused"
        resume = seglog("cluster", "kill", "2", "--signal", "CONT", "--dir", str(tmp_path))
        assert resume.returncode == 0 and "resumed" in resume.stderr
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
def test_lone_broker_is_controller_again_after_its_session_expires(tmp_path, zookeeper,
                                                                   zk_connect):
    """A one-broker ZooKeeper cluster is its own only possible controller: after its session
    expires (the same-session trick) it is the controller again, and a topic created after
    that gets its leader and takes writes. Until session 17 the broker usually resigned the
    term it had already won on its new session and kept /controller: no controller, and no
    new topic ever got a leader."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with LocalCluster(tmp_path, 1, zookeeper=zk_connect, session_hook=True,
                      broker_configs={"zookeeper.session.timeout.ms": 4000}) as cluster:
        epoch = cluster.broker_epoch(0)
        cluster.expire_session(0)
        deadline = time.monotonic() + 30
        while cluster.broker_epoch(0) in (None, epoch) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.broker_epoch(0) not in (None, epoch)
        # Until its new term begins the broker's Metadata names no controller (-1, as
        # Kafka's); librdkafka's AdminClient, told -1, waits out its whole timeout for one.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        deadline = time.monotonic() + 30
        while admin.list_topics(timeout=10).controller_id != 0:
            assert time.monotonic() < deadline, (
                "no controller after the expiry", cluster.controller_id(), cluster.log_tail(0))
            time.sleep(0.1)
        for future in admin.create_topics([NewTopic("after", 1, 1)]).values():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while (cluster.partition_state("after", 0) or {}).get("leader") != 0:
            assert time.monotonic() < deadline, (
                "the topic created after the expiry got no leader",
                cluster.partition_state("after", 0), cluster.controller_id(),
                cluster.log_tail(0))
            time.sleep(0.1)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        producer.produce("after", b"written after the expiry", partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "group.id": "after", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["after"])
            deadline = time.monotonic() + 30
            message = None
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error():
                    message = None
            assert message is not None and message.value() == b"written after the expiry"
        finally:
            consumer.close()
            del producer, admin  # librdkafka's clients end before the broker does


@needs_cluster_mode
def test_expire_session_without_the_hook_is_unavailable(tmp_path, zookeeper, zk_connect):
    from seglog.cluster.local import FaultUnavailableError

    with LocalCluster(tmp_path, 1, zookeeper=zk_connect) as cluster:
        with pytest.raises(FaultUnavailableError, match="does not expose"):
            cluster.expire_session(0)


def test_session_timeout_default_is_the_brokers():
    """LocalCluster's idea of the session a broker asks for when not told is the broker's."""
    from seglog.cluster.local import SESSION_TIMEOUT_MS_DEFAULT
    from seglog.server.config import BrokerConfig

    assert BrokerConfig({})["zookeeper.session.timeout.ms"] == SESSION_TIMEOUT_MS_DEFAULT


@needs_cluster_mode
def test_own_zookeeper_grants_the_session_timeout_the_brokers_ask_for(tmp_path):
    """ZooKeeper caps sessions at twenty ticks (10 s with the cluster's 500 ms ticks) without
    telling the client: a cluster whose brokers ask for 15 s sessions must start its
    ZooKeeper with a maxSessionTimeout that grants them (seen in ZooKeeper's own list of
    connections, ``cons``: the negotiated ``to=``), and say what it grants; Kafka's default
    (18 s) is granted when nothing is asked."""
    from seglog.cluster.zookeeper import four_letter_word

    with LocalCluster(tmp_path / "asked", 1,
                      broker_configs={"zookeeper.session.timeout.ms": 15000}) as cluster:
        connections = four_letter_word("127.0.0.1", cluster.zookeeper_port, "cons")
        assert "to=15000" in connections, connections
        assert cluster.session_timeout_note().startswith(
            "ZooKeeper (tickTime=500 ms) grants sessions of 1000..15000 ms; brokers ask for "
            "15000 ms")
    cluster = LocalCluster(tmp_path / "default", 2, per_broker_configs={
        1: {"zookeeper.session.timeout.ms": 500}})
    assert cluster.session_timeouts_ms() == {0: 18000, 1: 500}
    with cluster:
        assert cluster.session_timeout_note() == (
            "ZooKeeper (tickTime=500 ms) grants sessions of 1000..18000 ms; brokers ask for "
            "500 ms, 18000 ms (zookeeper.session.timeout.ms); broker 1 gets 1000 ms instead "
            "of 500")
        connections = four_letter_word("127.0.0.1", cluster.zookeeper_port, "cons")
        assert "to=18000" in connections and "to=1000," in connections, connections


@needs_cluster_mode
def test_status_counts_partitions_led_and_under_replicated(tmp_path, zookeeper, zk_connect):
    """status(): every partition's leader counted once; after a broker dies its partitions
    move to the survivor, which then leads them under-replicated (ISR of one of two)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    with LocalCluster(tmp_path, 2, zookeeper=zk_connect,
                      broker_configs={"zookeeper.session.timeout.ms": 4000}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic("t", 4, 2)]).values():
            future.result(timeout=30)

        def rows_when(condition, what: str):
            deadline = time.monotonic() + 30
            while True:
                rows = cluster.status()
                if condition(rows):
                    return rows
                assert time.monotonic() < deadline, (what, rows)
                time.sleep(0.1)

        rows = rows_when(lambda rows: sum(r["leaders"] or 0 for r in rows) == 4,
                         "every partition led")
        assert [r["under_replicated"] for r in rows] == [0, 0]
        assert [r["alive"] for r in rows] == [True, True]
        assert sum(r["controller"] for r in rows) == 1
        cluster.kill(1)
        rows = rows_when(lambda rows: rows[0]["leaders"] == 4
                         and rows[0]["under_replicated"] == 4, "broker 0 to lead all 4")
        assert rows[1]["state"] == "down" and rows[1]["alive"] is False
        assert rows[1]["leaders"] == 0 and rows[0]["controller"] is True
        from seglog.cluster.cli_cluster import status_lines

        assert status_lines(cluster)[-1] == "partitions 4 offline=0 under_replicated=4"
