"""Fixtures of the cluster tests: one real ZooKeeper per test session, a fresh chroot per test.

- ``zookeeper`` (session scope): a running :class:`seglog.cluster.zookeeper.ZooKeeperServer`
  (Debian's ZooKeeper 3.8, ``tickTime=500``: sessions of 1-10 s), ``.connect`` =
  ``"127.0.0.1:PORT"``, ``.pid``. Skipped when ZooKeeper is not installed (java or
  ``/usr/share/java/zookeeper.jar`` missing: ``apt-get install zookeeper``); a failure instead
  when ``SEGLOG_REQUIRE_ZOOKEEPER=1`` (CI sets it). Shared by every test: never stop, kill or
  suspend it; a fault test on ZooKeeper itself starts its own ``ZooKeeperServer``.
- ``zk_connect``: ``"127.0.0.1:PORT/seglog-<unique>"``, a chroot created empty for this test
  (and removed after it), so tests never see each other's znodes.
- ``zk_client``: a started ``KafkaZkClient(zk_connect, session_timeout_ms=4000)`` with
  ``ensure_persistent_paths()`` done, closed after the test.
"""

from __future__ import annotations

import os
import uuid

import pytest

from seglog.cluster.zookeeper import ZooKeeperNotInstalledError, ZooKeeperServer

REQUIRE_ZOOKEEPER = os.environ.get("SEGLOG_REQUIRE_ZOOKEEPER", "") not in ("", "0")
#: The session timeout of ``zk_client`` (ms): the harness's (research §6.1).
ZK_SESSION_TIMEOUT_MS = 4000
#: How long fixtures wait for a kazoo connection.
ZK_CONNECT_TIMEOUT_S = 10.0


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """The session's ZooKeeper (see the module docstring)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
    except ZooKeeperNotInstalledError as exc:
        if REQUIRE_ZOOKEEPER:
            pytest.fail(f"SEGLOG_REQUIRE_ZOOKEEPER=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _zk_admin(zookeeper):
    """A plain kazoo client on the root, to create and remove the tests' chroots."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.connect, timeout=ZK_CONNECT_TIMEOUT_S)
    client.start(timeout=ZK_CONNECT_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_connect(zookeeper, _zk_admin):
    """A connect string with a fresh, empty chroot of this test's own."""
    chroot = f"/seglog-{uuid.uuid4().hex[:12]}"
    _zk_admin.create(chroot)
    try:
        yield f"{zookeeper.connect}{chroot}"
    finally:
        # Best effort: a test's live sessions may still own ephemerals under it.
        try:
            _zk_admin.delete(chroot, recursive=True)
        except Exception:  # noqa: BLE001 - cleanup must not mask the test's own result
            pass


@pytest.fixture
def zk_client(zk_connect):
    """A started KafkaZkClient on ``zk_connect`` with Kafka's persistent paths created."""
    from seglog.cluster.zk_client import KafkaZkClient

    client = KafkaZkClient(zk_connect, session_timeout_ms=ZK_SESSION_TIMEOUT_MS)
    client.start()
    try:
        client.ensure_persistent_paths()
        yield client
    finally:
        client.close()
