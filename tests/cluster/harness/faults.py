"""Faults for the cluster scenarios (R§6.2).

Process faults go through :class:`seglog.cluster.local.LocalCluster` (it signals only the pids
it started): ``kill`` (kill -9), ``stop`` (SIGTERM, a clean shutdown), ``pause``/``resume``
(SIGSTOP/SIGCONT), ``expire_session`` (a second ZooKeeper client on the broker's session).
This module adds:

* :func:`cut_log_tail`: lost unflushed data, as Kafka's acceptance test emulates it (kill -9
  cannot: the page cache survives): on a *stopped* broker, delete the clean-shutdown marker
  and cut the last batches of a partition's active ``.log`` file, so recovery must rebuild.
* :class:`NetworkNamespace`: a private network namespace (``ip netns add``) with an nft table
  of drop rules between 127.0.0.x addresses (partitions, one-way or symmetric, and packet
  loss). :func:`network_faults_available` probes for it (root, ``ip``, ``nft``); tests that
  need it skip, never pass, when the probe fails. The local cluster does not run inside a
  namespace yet (its ZooKeeper runner starts the JVM directly), so today the namespace is
  exercised by its own test with plain sockets only.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import uuid
from pathlib import Path

from seglog import format as fmt
from seglog.filenames import CLEAN_SHUTDOWN_MARKER, partition_dir_name

#: Bound on every ``ip``/``nft`` command.
COMMAND_TIMEOUT_S = 10.0


def _batch_starts(path: Path) -> list[tuple[int, int, int]]:
    """``(file position, base offset, last offset)`` of every whole batch in a .log file."""
    data = path.read_bytes()
    starts = []
    position = 0
    while position + fmt.RECORD_BATCH_OVERHEAD <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, position)
        if length < fmt.MIN_BATCH_LENGTH or position + fmt.LOG_OVERHEAD + length > len(data):
            break
        delta = struct.unpack_from(">i", data, position + fmt.LAST_OFFSET_DELTA_POSITION)[0]
        starts.append((position, base_offset, base_offset + delta))
        position += fmt.LOG_OVERHEAD + length
    return starts


def _newest_log(data_dir: str | os.PathLike, topic: str, partition: int) -> Path:
    partition_dir = Path(data_dir) / partition_dir_name(topic, partition)
    logs = sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem))
    if not logs:
        raise ValueError(f"no .log file in {partition_dir}")
    return logs[-1]


def _cut(data_dir: str | os.PathLike, path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(position)
    try:
        os.unlink(Path(data_dir) / CLEAN_SHUTDOWN_MARKER)
    except FileNotFoundError:
        pass


def cut_log_tail(data_dir: str | os.PathLike, topic: str, partition: int, batches: int) -> int:
    """On a stopped broker's ``data_dir``: remove the clean-shutdown marker and cut the last
    ``batches`` batches of the partition's newest ``.log`` file (R§6.2, "lost unflushed
    data"). Returns the offset the log now ends at (the first offset cut). Raises
    ``ValueError`` when that segment holds fewer batches."""
    path = _newest_log(data_dir, topic, partition)
    starts = _batch_starts(path)
    if len(starts) < batches:
        raise ValueError(f"{path} holds {len(starts)} batches, fewer than {batches}")
    position, cut_offset, _last = starts[-batches]
    _cut(data_dir, path, position)
    return cut_offset


def cut_log_to(data_dir: str | os.PathLike, topic: str, partition: int, offset: int) -> int:
    """Like :func:`cut_log_tail`, cutting from the batch that holds ``offset`` (or the first
    batch after it) to the end of the newest segment. Returns the offset the log now ends at
    (<= ``offset``). Raises ``ValueError`` when the segment does not reach ``offset``."""
    path = _newest_log(data_dir, topic, partition)
    for position, base, last in _batch_starts(path):
        if last >= offset:
            _cut(data_dir, path, position)
            return base
    raise ValueError(f"{path} ends before offset {offset}")


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)


def network_faults_available() -> str | None:
    """None when network faults work here (a namespace can be created and nft rules loaded
    in it), else why not (the reason a skipped test gives)."""
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 nftables)"
    try:
        with NetworkNamespace() as namespace:
            namespace.drop("127.0.0.11", "127.0.0.12")
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        return f"network namespaces or nft unavailable here: {exc}"
    return None


class NetworkNamespace:
    """A private network namespace with ``lo`` up (all of 127/8 local to it) and an nft
    table ``seglog`` whose ``output`` chain holds the faults. Created on enter, deleted on
    exit (with every process still in it... left running: the owner stops its processes
    first). Needs root."""

    def __init__(self, name: str | None = None):
        self.name = name or f"seglog-h{uuid.uuid4().hex[:8]}"
        self.created = False

    def __enter__(self) -> "NetworkNamespace":
        self.create()
        return self

    def __exit__(self, *exc_info) -> None:
        self.delete()

    def create(self) -> None:
        """``ip netns add``, ``lo`` up, the nft table and chain. RuntimeError on failure."""
        self._check(["ip", "netns", "add", self.name])
        self.created = True
        try:
            self._check(self.exec_prefix() + ["ip", "link", "set", "lo", "up"])
            self._check(self.exec_prefix() + ["nft", "add", "table", "inet", "seglog"])
            self._check(self.exec_prefix() + [
                "nft", "add", "chain", "inet", "seglog", "output",
                "{ type filter hook output priority 0 ; policy accept ; }"])
        except RuntimeError:
            self.delete()
            raise

    def delete(self) -> None:
        """``ip netns del`` (idempotent)."""
        if self.created:
            _run(["ip", "netns", "del", self.name])
            self.created = False

    def exec_prefix(self) -> list[str]:
        """The command prefix that runs a program inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def drop(self, source: str, destination: str, *, symmetric: bool = False,
             port: int | None = None, percent: int = 100) -> None:
        """Drop packets from ``source`` to ``destination`` (addresses in 127/8), only to TCP
        ``port`` when given, ``percent`` % of them at random (packet loss) when < 100; with
        ``symmetric`` the reverse direction too."""
        pairs = [(source, destination)] + ([(destination, source)] if symmetric else [])
        for src, dst in pairs:
            rule = ["ip", "saddr", src, "ip", "daddr", dst]
            if port is not None:
                rule += ["tcp", "dport", str(port)]
            if percent < 100:
                rule += ["numgen", "random", "mod", "100", "<", str(percent)]
            self._check(self.exec_prefix() + ["nft", "add", "rule", "inet", "seglog", "output",
                                              *rule, "drop"])

    def heal(self) -> None:
        """Remove every drop rule."""
        self._check(self.exec_prefix() + ["nft", "flush", "chain", "inet", "seglog", "output"])

    def _check(self, command: list[str]) -> None:
        result = _run(command)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip() or result.returncode}")


class Relay:
    """A TCP relay on 127.0.0.1 (a free port) to ``target`` ``(host, port)``, for faults on one
    broker's connections only (R§6.2: tc netem does not exist here): give a broker the relay's
    address instead of the target's (e.g. its ZooKeeper connect string) and :meth:`block`
    becomes a partition of that broker from the target alone.

    :meth:`block` is a black hole that keeps every socket open: nothing is forwarded in
    either direction (bytes already read are held, new connections are accepted and held),
    the harshest partition (peers see silence, not a reset). :meth:`heal` forwards again,
    held bytes first, like TCP retransmitting after a partition heals. :meth:`close` ends
    every connection. One thread per direction of each connection; all are daemons and are
    unblocked by :meth:`close`.
    """

    def __init__(self, target: tuple[str, int]):
        import socket
        import threading

        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.gate = threading.Event()
        self.gate.set()
        self.closed = threading.Event()
        self.sockets: list = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._accept, daemon=True,
                                         name=f"relay-{self.port}")]
        self.threads[0].start()

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>`` of the relay."""
        return f"127.0.0.1:{self.port}"

    def block(self) -> None:
        """Stop forwarding (a black hole; sockets stay open)."""
        self.gate.clear()

    def heal(self) -> None:
        """Forward again."""
        self.gate.set()

    def close(self) -> None:
        """Close the listener and every relayed connection (idempotent)."""
        self.closed.set()
        self.gate.set()
        self.listener.close()
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> "Relay":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _accept(self) -> None:
        import socket
        import threading

        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.gate.wait()  # a blocked relay holds new connections too
            if self.closed.is_set():
                client.close()
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                thread = threading.Thread(target=self._pump, args=(src, dst), daemon=True)
                thread.start()

    def _pump(self, src, dst) -> None:
        while not self.closed.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            self.gate.wait()
            if self.closed.is_set():
                return
            try:
                if not data:
                    dst.shutdown(1)  # SHUT_WR: pass the end of stream on
                    return
                dst.sendall(data)
            except OSError:
                return
