"""``seglog.cluster.zookeeper``: running Debian's ZooKeeper as a child process."""

from __future__ import annotations

import os
import socket

import pytest

from seglog.cluster import zookeeper as zk_runner
from seglog.cluster.zookeeper import (
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    ZooKeeperStartError,
    find_zookeeper,
)


def test_find_zookeeper_names_the_package_when_the_jar_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv(zk_runner.CLASSPATH_ENV, f"{tmp_path}/conf:{tmp_path}/zookeeper.jar")
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install zookeeper"):
        find_zookeeper()


def test_find_zookeeper_names_the_package_when_java_is_missing(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install zookeeper"):
        find_zookeeper()


def test_session_server_answers_on_loopback(zookeeper):
    host, port = zookeeper.connect.split(":")
    assert host == "127.0.0.1" and int(port) == zookeeper.port > 0
    assert zookeeper.ruok()
    assert zk_runner.four_letter_word(host, int(port), "srvr").startswith("Zookeeper version: 3.8")
    os.kill(zookeeper.pid, 0)  # a live process of ours


def test_suspend_resume_stop_and_restart_keep_port_and_znodes(zookeeper, tmp_path):
    from kazoo.client import KazooClient

    server = ZooKeeperServer(tmp_path / "zk")
    with server:
        pid, port = server.pid, server.port
        client = KazooClient(hosts=server.connect, timeout=5)
        client.start(timeout=10)
        client.create("/kept", b"v")
        client.stop()
        client.close()
        server.suspend()
        assert server.suspended and server.pid == pid
        assert not server.ruok(timeout_s=0.5)  # frozen: accepts nothing, answers nothing
        server.resume()
        assert server.ruok()
        assert server.stop() is not None
        assert server.pid is None and server.stop() is not None  # idempotent
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        server.start()
        assert server.port == port and server.pid != pid
        client = KazooClient(hosts=server.connect, timeout=5)
        client.start(timeout=10)
        try:
            assert client.get("/kept")[0] == b"v"
        finally:
            client.stop()
            client.close()
    assert server.pid is None
    assert (tmp_path / "zk" / "zookeeper.log").stat().st_size > 0  # log4j to its own file


def test_start_fails_typed_when_the_given_port_is_taken(zookeeper, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ZooKeeperServer(tmp_path / "zk", port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperStartError, match="exited"):
            server.start(timeout_s=20)
        assert server.pid is None
