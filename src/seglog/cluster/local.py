"""A seglog cluster on one machine: one ZooKeeper and N ``seglog serve`` processes on loopback.

:class:`LocalCluster` is what ``seglog cluster up`` runs for people who want to try the
article's replication scenarios, and what the cluster tests and their fault injection drive.
Everything lives under one directory ``DIR``:

- ``DIR/zookeeper/``: the ZooKeeper (:class:`seglog.cluster.zookeeper.ZooKeeperServer`:
  ``zoo.cfg``, its data and logs), unless the cluster was given an external ZooKeeper;
- ``DIR/broker-<i>/``: broker *i*'s data directory; ``DIR/broker-<i>.out`` its output
  (every start appended);
- ``DIR/cluster.json``: the state file (:data:`STATE_FILE_NAME`): the ZooKeeper and every
  broker with its port, data directory and pid, so ``seglog cluster status|down|kill|start``
  work from another process (:meth:`LocalCluster.attach`).

Processes are signalled only by the pids this cluster recorded, and only after
``/proc/<pid>/cmdline`` shows the pid is still that process (a ``seglog serve`` over that
data directory, a ZooKeeper over that config file): a recycled pid is never signalled.

Faults (:meth:`kill`, :meth:`pause`/:meth:`resume`, :meth:`stop`, :meth:`start`,
:meth:`expire_session`) are the process faults of R§6.2; network faults live in the test
harness (``tests/cluster/harness/faults.py``).

Blocking (processes, sockets, kazoo); not thread-safe: one owner drives one cluster.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping

from seglog import error_codes as codes
from seglog.cluster.processes import (
    SIGNAL_SETTLE_S, process_cmdline, process_state, wait_threads_stopped,
)
from seglog.cluster.test_breaks import TestBreaks
from seglog.errors import SeglogError

if TYPE_CHECKING:
    # kazoo is imported where the cluster talks to ZooKeeper, not when this module loads.
    from kazoo.client import KazooClient

    from seglog.cluster.zookeeper import ZooKeeperServer

#: The state file in the cluster's directory.
STATE_FILE_NAME = "cluster.json"
#: How long a broker may take from launch to being registered in ZooKeeper, by default.
READY_TIMEOUT_S = 60.0
#: How long :meth:`LocalCluster.stop` waits after SIGTERM before SIGKILL, by default.
STOP_TIMEOUT_S = 30.0
#: The pause between readiness probes.
POLL_INTERVAL_S = 0.1
#: How long :meth:`LocalCluster.status` waits for ZooKeeper (connect and reads) before it
#: answers without the ZooKeeper facts: ``seglog cluster status`` answers within a second.
STATUS_ZOOKEEPER_TIMEOUT_S = 0.5
#: The file a broker started with ``--test-expose-zk-session`` (``session_hook=True``) keeps
#: in its data directory: ``{"session_id": int, "password": "<hex>"}`` of its current
#: ZooKeeper session (test-only; docs/cluster.md, "Local clusters").
SESSION_HOOK_FILE = "zookeeper-session.json"
#: Kafka's default ``zookeeper.session.timeout.ms``: the session a broker without the setting
#: asks ZooKeeper for (tests/cluster/test_local.py checks it against the broker's config table).
SESSION_TIMEOUT_MS_DEFAULT = 18000
#: Broker configs a local cluster sets unless told otherwise: the internal topics' replication
#: factors fitted to the number of brokers (Kafka's defaults of 3 cannot be met by fewer).
INTERNAL_TOPIC_CONFIGS = ("offsets.topic.replication.factor",
                          "transaction.state.log.replication.factor",
                          "share.coordinator.state.topic.replication.factor")


class LocalClusterError(SeglogError):
    """A local cluster could not start, be found, or do what was asked."""


class FaultUnavailableError(LocalClusterError):
    """A fault this cluster cannot inject here (the broker does not expose what it needs)."""


@dataclasses.dataclass
class BrokerProcess:
    """One broker of a local cluster: its id, port, data directory, output file and pid
    (None while it is down)."""

    broker_id: int
    port: int
    data_dir: str
    log_path: str
    pid: int | None = None


@dataclasses.dataclass(frozen=True)
class PartitionView:
    """One partition as ZooKeeper holds it: its assignment (``replicas``) and its state
    znode's ``leader`` (-1: none) and ``isr``."""

    topic: str
    partition: int
    replicas: list[int]
    leader: int
    isr: list[int]


@dataclasses.dataclass(frozen=True)
class ZooKeeperView:
    """What :meth:`LocalCluster.zookeeper_view` read: the ``registered`` broker ids, the
    ``controller`` (None: none) and every partition."""

    registered: set[int]
    controller: int | None
    partitions: list[PartitionView]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when a Kafka-protocol server on ``host:port`` answers ApiVersions v0 (without
    error) within ``timeout_s``."""
    client_id = b"seglog-cluster"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exactly(sock, 10)
    except OSError:
        return False
    if head is None:
        return False
    correlation_id: int
    error_code: int
    _size, correlation_id, error_code = struct.unpack(">iih", head)
    return correlation_id == 7 and error_code == codes.NONE


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class LocalCluster:
    """ZooKeeper and ``brokers`` ``seglog serve`` processes under ``dir`` (module docstring).

    ``zookeeper_port`` / ``base_port``: fixed ports (broker *i* on ``base_port + i``);
    free ports otherwise, picked once and kept across restarts. ``zookeeper``: the connect
    string (``host:port[/chroot]``, the chroot existing) of a ZooKeeper to use instead of
    starting one. ``broker_configs``: Kafka broker configs for every broker (``--config
    k=v``); ``per_broker_configs``: ``{broker_id: {k: v}}`` on top. ``env``: extra
    environment of the brokers. ``test_breaks``: negative controls every broker runs with
    (names of :data:`seglog.cluster.test_breaks.FLAGS`, passed as ``seglog serve
    --test-break NAME``; tests only). ``session_hook``: start the brokers with
    ``--test-expose-zk-session`` so :meth:`expire_session` works (tests only). ``backend``:
    the brokers' storage backend; ``log_format``: their ``--log-format`` (``text`` or
    ``json``). ``broker_zookeeper``:
    ``{broker_id: connect}``, the ZooKeeper address a broker uses instead of
    :attr:`zookeeper_connect` (a fault relay in front of it, for a partition of that broker
    from ZooKeeper alone). Broker ids are 0..N-1.

    :meth:`start` brings everything up and returns once every broker answers ApiVersions and
    is registered in ZooKeeper; :meth:`down` stops everything. Usable as a context manager.
    """

    def __init__(self, dir: str | os.PathLike[str], brokers: int = 3, *,
                 zookeeper_port: int | None = None, base_port: int | None = None,
                 broker_configs: Mapping[str, Any] | None = None,
                 per_broker_configs: Mapping[int, Mapping[str, Any]] | None = None,
                 host: str = "127.0.0.1", zookeeper: str | None = None,
                 env: Mapping[str, str] | None = None, session_hook: bool = False,
                 test_breaks: Iterable[str] = (), backend: str | None = None,
                 broker_zookeeper: Mapping[int, str] | None = None,
                 log_format: str = "text"):
        if brokers < 1:
            raise LocalClusterError(f"a cluster needs at least one broker, not {brokers}")
        self.dir = Path(dir).resolve()
        self.host = host
        self.backend = backend
        self.log_format = log_format
        self.env = dict(env or {})
        # Validated here (ValueError for an unknown name), not at each broker's start.
        self.test_breaks = TestBreaks(frozenset(test_breaks), expose_zk_session=session_hook)
        configs = {key: min(3, brokers) for key in INTERNAL_TOPIC_CONFIGS}
        configs["transaction.state.log.min.isr"] = min(2, brokers)
        configs["share.coordinator.state.topic.min.isr"] = min(2, brokers)
        configs.update(broker_configs or {})
        self.broker_configs = {k: str(v).lower() if isinstance(v, bool) else str(v)
                               for k, v in configs.items()}
        self.per_broker_configs = {int(b): {k: str(v) for k, v in c.items()}
                                   for b, c in (per_broker_configs or {}).items()}
        self.external_zookeeper = zookeeper
        self.broker_zookeeper = {int(b): c for b, c in (broker_zookeeper or {}).items()}
        self.zookeeper_port = zookeeper_port
        self.zookeeper_pid: int | None = None
        self.brokers: dict[int, BrokerProcess] = {}
        for broker_id in range(brokers):
            port = base_port + broker_id if base_port is not None else 0
            self.brokers[broker_id] = BrokerProcess(
                broker_id, port, str(self.dir / f"broker-{broker_id}"),
                str(self.dir / f"broker-{broker_id}.out"))
        self._zookeeper_server: "ZooKeeperServer | None" = None  # one this object started
        self._procs: dict[int, subprocess.Popen[bytes]] = {}  # children of this object, to reap
        self._kazoo = None

    # ----------------------------------------------------------------- addresses

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' ``zookeeper.connect``."""
        if self.external_zookeeper is not None:
            return self.external_zookeeper
        if not self.zookeeper_port:
            raise LocalClusterError("ZooKeeper has not been started")
        return f"127.0.0.1:{self.zookeeper_port}"

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,host:port,...`` of every broker (Kafka's ``bootstrap.servers``)."""
        return ",".join(f"{self.host}:{b.port}" for b in self.brokers.values())

    def address(self, broker_id: int) -> str:
        """``host:port`` of one broker."""
        return f"{self.host}:{self._broker(broker_id).port}"

    @property
    def state_path(self) -> Path:
        """The state file (:data:`STATE_FILE_NAME`)."""
        return self.dir / STATE_FILE_NAME

    # ----------------------------------------------------------------- lifecycle

    def up(self, timeout_s: float = READY_TIMEOUT_S, *,
           on_progress: Callable[[int, int], None] | None = None) -> "LocalCluster":
        """Start ZooKeeper (unless external) and every broker; wait until all are ready
        (``on_progress(ready, brokers)`` after each). Returns self. Raises :class:`seglog.cluster.zookeeper.ZooKeeperNotInstalledError`
        (its message says ``apt-get install zookeeper``) and :class:`LocalClusterError` (a
        broker exited or was not ready in time; the message quotes its output)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.state_path.exists():
            previous = json.loads(self.state_path.read_text(encoding="utf-8"))
            if _state_has_live_processes(previous):
                raise LocalClusterError(
                    f"a cluster already runs in {self.dir} (seglog cluster down --dir "
                    f"{self.dir} first)")
        try:
            if self.external_zookeeper is None:
                self._start_zookeeper()
            deadline = time.monotonic() + timeout_s
            for broker_id in self.brokers:
                self._spawn(broker_id)
            self.save_state()
            for ready, broker_id in enumerate(self.brokers, 1):
                self._wait_ready(broker_id, deadline)
                if on_progress is not None:
                    on_progress(ready, len(self.brokers))
        except BaseException:
            self.down()
            raise
        return self

    def __enter__(self) -> "LocalCluster":
        return self.up()

    def __exit__(self, *exc_info: Any) -> None:
        self.down()

    def down(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop every broker (SIGTERM, SIGKILL after ``timeout_s``), then ZooKeeper when this
        cluster started it. The data stays; the state file records nothing running."""
        for broker_id in self.brokers:
            self.stop(broker_id, timeout_s=timeout_s)
        self.close_clients()
        if self._zookeeper_server is not None:
            self._zookeeper_server.stop()
            self._zookeeper_server = None
        elif self.zookeeper_pid is not None and self._zookeeper_is_ours(self.zookeeper_pid):
            self._signal_and_wait(self.zookeeper_pid, signal.SIGTERM, timeout_s)
        self.zookeeper_pid = None
        if self.dir.exists():
            self.save_state()

    def close_clients(self) -> None:
        """Close this object's ZooKeeper client (:meth:`zookeeper_client`), if any; the
        cluster keeps running."""
        if self._kazoo is not None:
            try:
                self._kazoo.stop()
                self._kazoo.close()
            except Exception:  # noqa: BLE001 - closing a client must not mask the caller's work
                pass
            self._kazoo = None

    # ----------------------------------------------------------------- broker faults

    def start(self, broker_id: int, timeout_s: float = READY_TIMEOUT_S, *,
              wait: bool = True) -> None:
        """Start a broker that is down, on its old port and data directory; with ``wait``,
        return once it answers and is registered in ZooKeeper.

        After a crash its old registration lives on until ZooKeeper expires the dead
        session, and a broker refuses to start while its id is registered by another session
        (Kafka's checked ephemeral, R§1.3.4), so this first waits (within ``timeout_s``) for
        the stale registration to go, as an operator would."""
        broker = self._broker(broker_id)
        if broker.pid is not None and self._is_ours(broker):
            raise LocalClusterError(f"broker {broker_id} already runs (pid {broker.pid})")
        deadline = time.monotonic() + timeout_s
        while broker_id in (self.registered_brokers() or ()):
            if time.monotonic() >= deadline:
                raise LocalClusterError(
                    f"broker {broker_id} is still registered in ZooKeeper (a session that did "
                    f"not expire in {timeout_s} s)")
            time.sleep(POLL_INTERVAL_S)
        self._spawn(broker_id)
        self.save_state()
        if wait:
            self._wait_ready(broker_id, deadline)

    def stop(self, broker_id: int, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Stop a broker cleanly (SIGTERM; SIGCONT too when paused), SIGKILL after
        ``timeout_s``. Its exit code when this object started it, else None."""
        broker = self._broker(broker_id)
        code = None
        if broker.pid is not None and self._is_ours(broker):
            code = self._signal_and_wait(broker.pid, signal.SIGTERM, timeout_s,
                                         dump_signal=signal.SIGUSR1)
        broker.pid = None
        self.save_state()
        return code

    def kill(self, broker_id: int, signum: int = signal.SIGKILL) -> int:
        """Send ``signum`` (default SIGKILL: a crash) to a running broker; returns the pid
        signalled. For SIGKILL and SIGTERM, wait until it is gone and record it as down; for
        SIGSTOP and SIGCONT, until every thread of it is stopped or running again (raises
        :class:`LocalClusterError` when that takes more than
        :data:`~seglog.cluster.processes.SIGNAL_SETTLE_S`)."""
        broker = self._require_running(broker_id)
        pid = broker.pid
        assert pid is not None
        if signum in (signal.SIGKILL, signal.SIGTERM):
            self._signal_and_wait(pid, signum, STOP_TIMEOUT_S)
            broker.pid = None
            self.save_state()
        else:
            os.kill(pid, signum)
            if signum in (signal.SIGSTOP, signal.SIGCONT):
                # Delivered asynchronously, thread by thread: return once the broker is
                # paused (or running again), so that what follows sees the fault made.
                stopped = signum == signal.SIGSTOP
                if not wait_threads_stopped(pid, stopped):
                    raise LocalClusterError(
                        f"broker {broker_id} (pid {pid}) did not "
                        f"{'stop' if stopped else 'continue'} within "
                        f"{SIGNAL_SETTLE_S} s of {signal.Signals(signum).name}")
        return pid

    def pause(self, broker_id: int) -> None:
        """Freeze a broker (SIGSTOP): a GC pause, a VM stall, a zombie leader."""
        self.kill(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        """Continue a paused broker (SIGCONT)."""
        self.kill(broker_id, signal.SIGCONT)

    def pause_zookeeper(self) -> None:
        """Freeze this cluster's own ZooKeeper (SIGSTOP): clients lose their connection,
        no session expires meanwhile. Raises :class:`LocalClusterError` when the cluster uses
        an external ZooKeeper or was attached from another process."""
        self._own_zookeeper("pause").suspend()

    def resume_zookeeper(self) -> None:
        """Continue a frozen ZooKeeper (SIGCONT)."""
        self._own_zookeeper("resume").resume()

    def _own_zookeeper(self, what: str) -> ZooKeeperServer:
        if self._zookeeper_server is None:
            raise LocalClusterError(f"cannot {what} ZooKeeper: this cluster object did not "
                                    f"start it")
        return self._zookeeper_server

    def expire_session(self, broker_id: int, timeout_s: float = 10.0) -> None:
        """Expire a running broker's ZooKeeper session without pausing it (R§6.2): open a
        second client on the broker's (session id, password) and close it. Needs the broker
        to expose its session (``session_hook=True`` and a broker that writes
        :data:`SESSION_HOOK_FILE`); raises :class:`FaultUnavailableError` otherwise."""
        broker = self._require_running(broker_id)
        path = Path(broker.data_dir) / SESSION_HOOK_FILE
        try:
            exposed = json.loads(path.read_text(encoding="utf-8"))
            session_id, password = int(exposed["session_id"]), bytes.fromhex(exposed["password"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FaultUnavailableError(
                f"broker {broker_id} does not expose its ZooKeeper session ({path}: {exc}); "
                f"start the cluster with session_hook=True (seglog serve "
                f"--test-expose-zk-session)") from None
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.zookeeper_connect, client_id=(session_id, password),
                             timeout=timeout_s)
        client.start(timeout=timeout_s)
        try:
            client.stop()  # closes the session: ZooKeeper expires it for the broker too
        finally:
            client.close()

    # ----------------------------------------------------------------- what is running

    def pid(self, broker_id: int) -> int | None:
        """The running broker's pid (None while down)."""
        broker = self._broker(broker_id)
        return broker.pid if broker.pid is not None and self._is_ours(broker) else None

    def status(self, zookeeper_timeout_s: float = STATUS_ZOOKEEPER_TIMEOUT_S, *,
               view: "ZooKeeperView | None | Literal['read']" = "read"
               ) -> list[dict[str, Any]]:
        """One row per broker, from its process and from ZooKeeper:

        - ``broker_id``, ``address``, ``data_dir``, ``pid`` (None while down), ``state``
          (``running``, ``paused``, ``down``: the process);
        - ``registered``: in ``/brokers/ids``; ``alive``: running and registered (what the
          controller counts as live); ``controller``: named in ``/controller``;
        - ``leaders``: partitions whose ``state`` znode names it leader; ``under_replicated``:
          of those, the ones whose ISR is smaller than their replica set (Kafka's
          ``UnderReplicatedPartitions`` of that broker).

        The ZooKeeper facts are None when ZooKeeper does not answer within
        ``zookeeper_timeout_s`` (so the call returns within about that bound). ``view``: a
        :meth:`zookeeper_view` already read (None: ZooKeeper did not answer) instead of
        reading one."""
        if isinstance(view, str):  # "read"
            view = self.zookeeper_view(zookeeper_timeout_s)
        rows = []
        for broker_id, broker in self.brokers.items():
            pid = self.pid(broker_id)
            state = "down"
            if pid is not None:
                state = "paused" if process_state(pid) == "T" else "running"
            row: dict[str, Any] = {
                "broker_id": broker_id, "address": self.address(broker_id), "pid": pid,
                "state": state, "data_dir": broker.data_dir, "registered": None,
                "alive": None, "controller": None, "leaders": None, "under_replicated": None}
            if view is not None:
                led = [p for p in view.partitions if p.leader == broker_id]
                row.update(registered=broker_id in view.registered,
                           alive=state == "running" and broker_id in view.registered,
                           controller=view.controller == broker_id, leaders=len(led),
                           under_replicated=sum(len(p.isr) < len(p.replicas) for p in led))
            rows.append(row)
        return rows

    def zookeeper_view(self, timeout_s: float = STATUS_ZOOKEEPER_TIMEOUT_S
                       ) -> "ZooKeeperView | None":
        """The cluster as ZooKeeper holds it now (registered brokers, controller, every
        partition's replicas, leader and ISR), read within about ``timeout_s`` (the state
        znodes in parallel); None when ZooKeeper does not answer in time."""
        from kazoo.exceptions import NoNodeError

        deadline = time.monotonic() + timeout_s

        def wait(pending: Any) -> Any:
            # Every read bounded by the one deadline (a sync kazoo call would wait for a
            # reconnection as long as the session lives).
            return pending.get(timeout=max(0.0, deadline - time.monotonic()))

        def children(path: str) -> list[str]:
            try:
                names: list[str] = wait(client.get_children_async(path))
                return names
            except NoNodeError:
                return []

        try:
            client = self.zookeeper_client(connect_timeout_s=timeout_s)
            registered = {int(c) for c in children("/brokers/ids")}
            try:
                controller_data, _stat = wait(client.get_async("/controller"))
                controller: int | None = int(json.loads(controller_data)["brokerid"])
            except NoNodeError:
                controller = None
            topics = children("/brokers/topics")
            assignments = {t: client.get_async(f"/brokers/topics/{t}") for t in topics}
            replicas: dict[tuple[str, int], list[int]] = {}
            for topic, pending in assignments.items():
                try:
                    data, _stat = wait(pending)
                except NoNodeError:
                    continue  # deleted meanwhile
                for p, brokers in json.loads(data)["partitions"].items():
                    replicas[(topic, int(p))] = [int(b) for b in brokers]
            states = {tp: client.get_async(
                f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state") for tp in replicas}
            partitions = []
            for tp, pending in sorted(states.items()):
                try:
                    state = json.loads(wait(pending)[0])
                    leader, isr = int(state["leader"]), [int(b) for b in state["isr"]]
                except NoNodeError:
                    leader, isr = -1, []  # no state yet (being created): no leader
                partitions.append(PartitionView(tp[0], tp[1], replicas[tp], leader, isr))
        except Exception:  # noqa: BLE001 - kazoo's errors and timeouts: "not reachable"
            return None
        return ZooKeeperView(registered, controller, partitions)

    def zookeeper_client(self, timeout_s: float = 10.0, *,
                         connect_timeout_s: float | None = None) -> KazooClient:
        """A started kazoo client on the cluster's ZooKeeper (kept and reused; closed by
        :meth:`down`), for reading the cluster's znodes. ``timeout_s``: its session timeout
        and, unless ``connect_timeout_s`` says otherwise, the wait for the connection."""
        if self._kazoo is None:
            from kazoo.client import KazooClient

            client = KazooClient(hosts=self.zookeeper_connect, timeout=timeout_s)
            client.start(timeout=timeout_s if connect_timeout_s is None
                         else connect_timeout_s)
            self._kazoo = client
        return self._kazoo

    def registered_brokers(self) -> set[int] | None:
        """The broker ids registered in ``/brokers/ids``; None when ZooKeeper does not answer."""
        try:
            client = self.zookeeper_client(timeout_s=2.0)
            if not client.exists("/brokers/ids"):
                return set()
            return {int(child) for child in client.get_children("/brokers/ids")}
        except Exception:  # noqa: BLE001 - kazoo's errors: "not reachable" is the answer
            return None

    def broker_epoch(self, broker_id: int) -> int | None:
        """The broker's epoch: the czxid of its ``/brokers/ids/<id>`` registration (a new
        one after each new session), None while it is not registered."""
        client = self.zookeeper_client()
        stat = client.exists(f"/brokers/ids/{broker_id}")
        return stat.czxid if stat is not None else None

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """The partition's ``state`` znode (Kafka 2.8 JSON: ``leader``, ``leader_epoch``,
        ``isr``, ``controller_epoch``), None while it does not exist."""
        data = self._get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data) if data is not None else None

    def topic_assignment(self, topic: str) -> dict[int, list[int]]:
        """``{partition: [replica broker ids]}`` from the topic's znode (empty when the topic
        does not exist)."""
        data = self._get(f"/brokers/topics/{topic}")
        if data is None:
            return {}
        return {int(p): [int(b) for b in replicas]
                for p, replicas in json.loads(data)["partitions"].items()}

    def controller_id(self) -> int | None:
        """The broker id in ``/controller``, None when there is no controller."""
        data = self._get("/controller")
        return int(json.loads(data)["brokerid"]) if data is not None else None

    def _get(self, path: str) -> bytes | None:
        """A znode's data, None when it does not exist (or went between two reads)."""
        from kazoo.exceptions import NoNodeError

        try:
            data: bytes
            data, _stat = self.zookeeper_client().get(path)
        except NoNodeError:
            return None
        return data

    # ----------------------------------------------------------------- the state file

    @classmethod
    def attach(cls, dir: str | os.PathLike[str]) -> "LocalCluster":
        """The cluster recorded in ``dir``'s state file (started by another process).
        Raises :class:`LocalClusterError` when there is none."""
        path = Path(dir).resolve() / STATE_FILE_NAME
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LocalClusterError(f"no local cluster in {Path(dir)} ({exc})") from None
        brokers = state["brokers"]
        cluster = cls(dir, len(brokers), broker_configs=state["broker_configs"],
                      per_broker_configs={int(b): c for b, c in
                                          state.get("per_broker_configs", {}).items()},
                      host=state["host"], zookeeper=state["zookeeper"].get("external"),
                      env=state.get("env", {}), backend=state.get("backend"),
                      log_format=state.get("log_format", "text"),
                      test_breaks=state.get("test_breaks", ()),
                      session_hook=bool(state.get("session_hook", False)),
                      broker_zookeeper={int(b): c for b, c in
                                        state.get("broker_zookeeper", {}).items()})
        cluster.broker_configs = dict(state["broker_configs"])
        cluster.zookeeper_port = state["zookeeper"].get("port")
        cluster.zookeeper_pid = state["zookeeper"].get("pid")
        cluster.brokers = {int(b["broker_id"]): BrokerProcess(**b) for b in brokers}
        return cluster

    def save_state(self) -> None:
        """Write the state file (atomically): what another process needs to drive this
        cluster (:meth:`attach`)."""
        state = {
            "host": self.host, "backend": self.backend, "env": self.env,
            "log_format": self.log_format,
            "test_breaks": sorted(self.test_breaks.flags),
            "session_hook": self.test_breaks.expose_zk_session,
            "broker_configs": self.broker_configs,
            "per_broker_configs": {str(b): c for b, c in self.per_broker_configs.items()},
            "broker_zookeeper": {str(b): c for b, c in self.broker_zookeeper.items()},
            "zookeeper": {"external": self.external_zookeeper, "port": self.zookeeper_port,
                          "pid": self.zookeeper_pid,
                          "config": str(self.dir / "zookeeper" / "zoo.cfg")},
            "brokers": [dataclasses.asdict(b) for b in self.brokers.values()],
        }
        tmp = self.state_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.state_path)

    # ----------------------------------------------------------------- internals

    def _broker(self, broker_id: int) -> BrokerProcess:
        try:
            return self.brokers[int(broker_id)]
        except (KeyError, ValueError):
            raise LocalClusterError(
                f"no broker {broker_id} in this cluster (brokers {sorted(self.brokers)})"
            ) from None

    def _require_running(self, broker_id: int) -> BrokerProcess:
        broker = self._broker(broker_id)
        if broker.pid is None or not self._is_ours(broker):
            raise LocalClusterError(f"broker {broker_id} is not running")
        return broker

    def session_timeouts_ms(self) -> dict[int, int]:
        """``{broker_id: the zookeeper.session.timeout.ms it asks for}`` (its own config,
        else the cluster's, else Kafka's default)."""
        return {broker_id: int({**self.broker_configs,
                                **self.per_broker_configs.get(broker_id, {})}.get(
                                    "zookeeper.session.timeout.ms", SESSION_TIMEOUT_MS_DEFAULT))
                for broker_id in self.brokers}

    def session_timeout_note(self) -> str:
        """One sentence on the ZooKeeper sessions the brokers get: what they ask for, and
        what the cluster's own ZooKeeper grants (a request outside its bounds is raised or
        capped; ZooKeeper does so silently)."""
        asked = self.session_timeouts_ms()
        wanted = ", ".join(f"{ms} ms" for ms in sorted(set(asked.values())))
        if self.external_zookeeper is not None:
            return (f"brokers ask ZooKeeper for sessions of {wanted} "
                    f"(zookeeper.session.timeout.ms); an external ZooKeeper grants 2 to 20 of "
                    f"its ticks unless its min/maxSessionTimeout say otherwise")
        tick_ms, low, high = self._own_zookeeper_sessions_ms()
        note = (f"ZooKeeper (tickTime={tick_ms} ms) grants sessions of "
                f"{low}..{high} ms; brokers ask for {wanted} (zookeeper.session.timeout.ms)")
        clamped = {b: ms for b, ms in asked.items() if not low <= ms <= high}
        if clamped:
            note += "; " + ", ".join(
                f"broker {b} gets {min(max(ms, low), high)} ms instead of {ms}"
                for b, ms in sorted(clamped.items()))
        return note

    def _own_zookeeper_sessions_ms(self) -> tuple[int, int, int]:
        """``(tick, shortest, longest)`` session of the ZooKeeper this cluster runs itself.

        ZooKeeper caps a session at maxSessionTimeout (twenty ticks by default: 10 s with
        500 ms ticks) without telling the client; the cap is raised to what the brokers ask
        for, keeping the short tick that lets tests ask for sessions of a second or two."""
        from .zookeeper import TICK_TIME_MS

        longest_ms = max(self.session_timeouts_ms().values())
        return TICK_TIME_MS, 2 * TICK_TIME_MS, max(longest_ms, 20 * TICK_TIME_MS)

    def _start_zookeeper(self) -> None:
        from .zookeeper import ZooKeeperServer

        tick_ms, _shortest_ms, longest_ms = self._own_zookeeper_sessions_ms()
        server = ZooKeeperServer(self.dir / "zookeeper", port=self.zookeeper_port or 0,
                                 tick_time_ms=tick_ms, max_session_timeout_ms=longest_ms)
        server.start()
        self._zookeeper_server = server
        self.zookeeper_port = server.port
        self.zookeeper_pid = server.pid

    def _command(self, broker: BrokerProcess) -> list[str]:
        command = [sys.executable, "-m", "seglog", "serve", "--broker-id", str(broker.broker_id),
                   "--zookeeper",
                   self.broker_zookeeper.get(broker.broker_id) or self.zookeeper_connect,
                   "--listen", f"{self.host}:{broker.port}", "--data-dir", broker.data_dir]
        if self.backend:
            command += ["--backend", self.backend]
        if self.log_format != "text":
            command += ["--log-format", self.log_format]
        configs = {**self.broker_configs, **self.per_broker_configs.get(broker.broker_id, {})}
        for key, value in configs.items():
            command += ["--config", f"{key}={value}"]
        return command + self.test_breaks.command_line()

    def _spawn(self, broker_id: int) -> None:
        broker = self._broker(broker_id)
        if not broker.port:
            broker.port = free_port(self.host)
        Path(broker.data_dir).mkdir(parents=True, exist_ok=True)
        # A stale session file from an earlier run must not be mistaken for this one's.
        try:
            os.unlink(Path(broker.data_dir) / SESSION_HOOK_FILE)
        except FileNotFoundError:
            pass
        env = dict(os.environ)
        # The brokers run the same seglog as this process, installed or not.
        source = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (source, env.get("PYTHONPATH", "")) if p)
        env.update(self.env)
        with open(broker.log_path, "ab") as out:
            proc = subprocess.Popen(self._command(broker), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.dir,
                                    # Its own session: outlives `seglog cluster up`, and a
                                    # Ctrl-C in a terminal does not reach it.
                                    start_new_session=True)
        self._procs[proc.pid] = proc
        broker.pid = proc.pid

    def _wait_ready(self, broker_id: int, deadline: float) -> None:
        broker = self._broker(broker_id)
        answered = False
        while True:
            if broker.pid is None or not self._alive(broker.pid):
                raise LocalClusterError(
                    f"broker {broker_id} exited while starting; end of "
                    f"{broker.log_path}:\n{self.log_tail(broker_id)}")
            if not answered:
                answered = api_versions_ok(self.host, broker.port, timeout_s=0.5)
            if answered:
                registered = self.registered_brokers()
                if registered is not None and broker_id in registered:
                    return
            if time.monotonic() >= deadline:
                what = "registered in ZooKeeper" if answered else "answering ApiVersions"
                raise LocalClusterError(
                    f"broker {broker_id} on {self.address(broker_id)} was not {what} in "
                    f"time; end of {broker.log_path}:\n{self.log_tail(broker_id)}")
            time.sleep(POLL_INTERVAL_S)

    def log_tail(self, broker_id: int, lines: int = 30) -> str:
        """The last ``lines`` lines of a broker's output."""
        try:
            text = Path(self._broker(broker_id).log_path).read_text(
                encoding="utf-8", errors="replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])

    def _alive(self, pid: int) -> bool:
        proc = self._procs.get(pid)
        if proc is not None and proc.poll() is not None:
            return False
        state = process_state(pid)
        return state is not None and state != "Z"

    def _is_ours(self, broker: BrokerProcess) -> bool:
        """Whether the recorded pid is still this broker's ``seglog serve`` process."""
        if broker.pid is None or not self._alive(broker.pid):
            return False
        cmdline = process_cmdline(broker.pid)
        return "serve" in cmdline and broker.data_dir in cmdline

    def _zookeeper_is_ours(self, pid: int) -> bool:
        if not self._alive(pid):
            return False
        return str(self.dir / "zookeeper" / "zoo.cfg") in process_cmdline(pid)

    def _signal_and_wait(self, pid: int, signum: int, timeout_s: float, *,
                         dump_signal: int | None = None) -> int | None:
        """Signal a process this cluster recorded (SIGCONT after SIGTERM, in case it is
        paused) and wait until it is gone; SIGKILL after ``timeout_s``, preceded by
        ``dump_signal`` (a broker's SIGUSR1: its thread stacks to its output file, so a stop
        that hung leaves the reason behind). Its exit code when it is this object's child."""
        os.kill(pid, signum)
        if signum != signal.SIGKILL:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + timeout_s
        while self._alive(pid):
            if time.monotonic() >= deadline:
                if signum == signal.SIGKILL:
                    raise LocalClusterError(f"pid {pid} survived SIGKILL for {timeout_s} s")
                if dump_signal is not None:
                    os.kill(pid, dump_signal)
                    time.sleep(0.5)  # faulthandler writes from its signal handler at once
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + STOP_TIMEOUT_S
                signum = signal.SIGKILL
            time.sleep(0.02)
        proc = self._procs.pop(pid, None)
        if proc is not None:
            return proc.wait(timeout=STOP_TIMEOUT_S)
        return None


def _state_has_live_processes(state: dict[str, Any]) -> bool:
    """Whether a state file names a process that still runs as what it recorded."""
    for broker in state.get("brokers", []):
        pid = broker.get("pid")
        if pid is not None and process_state(pid) not in (None, "Z") \
                and broker["data_dir"] in process_cmdline(pid):
            return True
    zk = state.get("zookeeper", {})
    pid = zk.get("pid")
    return (pid is not None and process_state(pid) not in (None, "Z")
            and zk.get("config", "") in process_cmdline(pid))
