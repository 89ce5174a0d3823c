"""Run Debian's ZooKeeper 3.8 standalone as a child process: for tests and ``seglog cluster``.

:class:`ZooKeeperServer` writes a private configuration into a directory it is given (the
data, the config file, the log) and runs ``java -cp <classpath>
org.apache.zookeeper.server.ZooKeeperServerMain <dir>/zoo.cfg``. It is the single ZooKeeper a
seglog cluster trusts (no quorum: ZooKeeper itself is not under test), configured for fast
failure detection in tests:

- ``tickTime=500``, so a client may ask for sessions of 1 s to 10 s (ZooKeeper clamps a
  session timeout to [2, 20] ticks, silently); ``max_session_timeout_ms`` widens the upper
  bound (``seglog cluster up`` sets it to the longest ``zookeeper.session.timeout.ms`` its
  brokers ask for, Kafka's 18 s by default);
- ``clientPort`` on 127.0.0.1 only, a free port unless one is given (kept across restarts);
- the admin server (an HTTP port) off; the four-letter words ``ruok``, ``srvr``, ``stat``,
  ``mntr``, ``cons`` allowed (:meth:`start` waits on ``srvr``);
- ``maxClientCnxns=0`` (ZooKeeper's default of 60 connections per address is too few when
  every process of a local cluster and its tests connect from 127.0.0.1);
- ``forceSync=no`` unless asked for: ZooKeeper's durability is not under test, and an fsync
  per transaction on a 2-core machine shared with brokers makes every election slower;
- log4j 1.2 to ``<dir>/zookeeper.log`` (Debian's ZooKeeper logs through slf4j; the
  ``slf4j-log4j12`` binding and ``log4j-1.2`` jars are added to the class path when present),
  the JVM's own output to ``<dir>/zookeeper.out``.

The process is ended by its pid only (SIGTERM, then SIGKILL after a bound);
:meth:`ZooKeeperServer.suspend` / :meth:`~ZooKeeperServer.resume` freeze it (SIGSTOP/SIGCONT)
for fault tests: clients see a disconnection; no session expires *while* it is frozen,
but the frozen time counts: a freeze longer than a session's timeout expires that session as
soon as the server resumes, before its client can reconnect (measured: a 3.3 s freeze with
2 s sessions expired every session).

:func:`find_zookeeper` locates java and the class path (``$SEGLOG_ZOOKEEPER_CLASSPATH``
overrides the Debian default) and raises :class:`ZooKeeperNotInstalledError`, which says
``apt-get install zookeeper``, when either is missing.

Blocking (processes and sockets); not thread-safe: one owner drives one server.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from seglog.cluster.processes import wait_threads_stopped
from seglog.errors import SeglogError

#: Debian's class path for ZooKeeper (``/etc/zookeeper/conf/environment``).
DEBIAN_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
#: The environment variable that replaces :data:`DEBIAN_CLASSPATH` (a ``:``-separated path).
CLASSPATH_ENV = "SEGLOG_ZOOKEEPER_CLASSPATH"
#: The jars that give Debian's ZooKeeper a log: the slf4j binding to log4j 1.2, and log4j.
LOGGING_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
#: The standalone server's main class (takes the config file as its one argument).
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

#: ZooKeeper's tick; sessions may last 2 to 20 ticks (1 s to 10 s here).
TICK_TIME_MS = 500
#: The JVM's heap bound: ZooKeeper with a few thousand small znodes needs far less.
HEAP_MB = 256
#: How long :meth:`ZooKeeperServer.start` waits for ZooKeeper to answer, by default.
START_TIMEOUT_S = 30.0
#: How long :meth:`ZooKeeperServer.stop` waits after SIGTERM before SIGKILL, by default.
STOP_TIMEOUT_S = 10.0
#: How long one four-letter-word exchange may take.
FOUR_LETTER_TIMEOUT_S = 2.0
#: Attempts with a fresh free port when the one picked was taken meanwhile (a race with
#: other processes binding port 0); a given port is tried once.
PORT_ATTEMPTS = 3

_LOG4J_PROPERTIES = """\
# Written by seglog.cluster.zookeeper: ZooKeeper's log in this directory.
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log_path}
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t:%C{{1}}@%L] - %m%n
"""


class ZooKeeperError(SeglogError):
    """Base class of the errors of running ZooKeeper."""


class ZooKeeperNotInstalledError(ZooKeeperError):
    """java or ZooKeeper's jar is missing (the message says how to install them)."""


class ZooKeeperStartError(ZooKeeperError):
    """ZooKeeper did not start or did not answer in time (the message quotes its log)."""


@dataclasses.dataclass(frozen=True)
class ZooKeeperInstall:
    """Where ZooKeeper is: the ``java`` executable and the class path to run it with."""

    java: str
    classpath: str


def find_zookeeper() -> ZooKeeperInstall:
    """The installed ZooKeeper: ``java`` from ``$JAVA_HOME/bin`` or ``PATH``, and the class
    path ``$SEGLOG_ZOOKEEPER_CLASSPATH`` or Debian's (:data:`DEBIAN_CLASSPATH`, plus the
    logging jars of :data:`LOGGING_JARS` that exist).

    Raises :class:`ZooKeeperNotInstalledError` when java is missing or no ``.jar`` of the
    class path exists.
    """
    java_home = os.environ.get("JAVA_HOME")
    java = None
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        java = os.path.join(java_home, "bin", "java")
    java = java or shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalledError(
            "java not found (JAVA_HOME, PATH); ZooKeeper needs it: apt-get install zookeeper "
            "(pulls in a JRE)")
    override = os.environ.get(CLASSPATH_ENV)
    if override:
        classpath = override
    else:
        classpath = ":".join([DEBIAN_CLASSPATH, *(jar for jar in LOGGING_JARS if os.path.exists(jar))])
    jars = [entry for entry in classpath.split(":") if entry.endswith(".jar")]
    if not jars or not all(os.path.exists(jar) for jar in jars):
        where = f"${CLASSPATH_ENV}={override}" if override else f"Debian's {DEBIAN_CLASSPATH}"
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper's jar not found ({where}): apt-get install zookeeper, or set "
            f"{CLASSPATH_ENV} to a class path holding zookeeper.jar and its dependencies")
    return ZooKeeperInstall(java=java, classpath=classpath)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def four_letter_word(host: str, port: int, word: str,
                     timeout_s: float = FOUR_LETTER_TIMEOUT_S) -> str:
    """Send ZooKeeper's four-letter command ``word`` (``ruok``, ``srvr``, ...) and return its
    whole answer. Raises ``OSError`` (refused, timed out) when nothing answers."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # bounded: ZooKeeper closes after answering
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")


def _listens_on(pid: int, port: int) -> bool:
    """True when process ``pid`` holds the socket listening on TCP ``port`` (Linux: from
    ``/proc``); elsewhere True while the process lives (the best that can be known)."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return True
    inodes = set()
    for table in tables:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 is the inode.
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False


class ZooKeeperServer:
    """One standalone ZooKeeper on 127.0.0.1, run from ``run_dir`` (see the module docstring).

    ``port`` 0 picks a free port at the first :meth:`start` and keeps it across restarts.
    ``run_dir`` holds ``zoo.cfg``, ``data/``, ``log4j.properties``, ``zookeeper.log`` and
    ``zookeeper.out``; its data survives :meth:`stop`, so a restart keeps every znode
    (sessions too, until they time out). Usable as a context manager (start on enter, stop
    on exit). Not thread-safe.
    """

    def __init__(self, run_dir: str | os.PathLike[str], *, port: int = 0,
                 tick_time_ms: int = TICK_TIME_MS, max_session_timeout_ms: int | None = None,
                 force_sync: bool = False, heap_mb: int = HEAP_MB,
                 install: ZooKeeperInstall | None = None):
        self.run_dir = Path(run_dir)
        self.data_dir = self.run_dir / "data"
        self.config_path = self.run_dir / "zoo.cfg"
        self.log_path = self.run_dir / "zookeeper.log"
        self.out_path = self.run_dir / "zookeeper.out"
        self.host = "127.0.0.1"
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.force_sync = force_sync
        self.heap_mb = heap_mb
        self._install = install
        self._port = port
        self._port_given = port != 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._suspended = False

    # ----------------------------------------------------------------- what callers read

    @property
    def port(self) -> int:
        """The client port (0 until the first :meth:`start` when it was not given)."""
        return self._port

    @property
    def connect(self) -> str:
        """The connect string for clients: ``"127.0.0.1:<port>"`` (add ``/chroot`` to it)."""
        return f"{self.host}:{self._port}"

    @property
    def session_timeout_min_ms(self) -> int:
        """The shortest session this server grants (ZooKeeper's ``minSessionTimeout``
        default, two ticks): a client asking for less gets this."""
        return 2 * self.tick_time_ms

    @property
    def session_timeout_max_ms(self) -> int:
        """The longest session this server grants: ``max_session_timeout_ms``, else
        ZooKeeper's default of twenty ticks. A client asking for more gets this."""
        if self.max_session_timeout_ms is not None:
            return self.max_session_timeout_ms
        return 20 * self.tick_time_ms

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (also while suspended), else None."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._proc.pid

    @property
    def running(self) -> bool:
        """True while the process lives (suspended included)."""
        return self.pid is not None

    @property
    def suspended(self) -> bool:
        """True between :meth:`suspend` and :meth:`resume`."""
        return self._suspended and self.running

    # ----------------------------------------------------------------- lifecycle

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ZooKeeperServer:
        """Start ZooKeeper and wait until it serves (``srvr`` answers with its version), at
        most ``timeout_s``. Returns self. A no-op when it already runs.

        Raises :class:`ZooKeeperNotInstalledError` (see :func:`find_zookeeper`) and
        :class:`ZooKeeperStartError` (exited, or no answer in time: the process is killed and
        the message quotes the end of its log).
        """
        if self.running:
            return self
        install = self._install or find_zookeeper()
        self._install = install
        attempts = 1 if self._port_given else PORT_ATTEMPTS
        deadline = time.monotonic() + timeout_s
        for attempt in range(attempts):
            if not self._port_given and (attempt > 0 or self._port == 0):
                self._port = free_port()
            self._write_config()
            self._spawn(install)
            failure = self._wait_serving(deadline)
            if failure is None:
                return self
            address_taken = "Address already in use" in self._log_tail()
            self.kill()
            if not address_taken or attempt == attempts - 1 or time.monotonic() >= deadline:
                raise ZooKeeperStartError(
                    f"ZooKeeper on {self.connect} {failure}; end of its log:\n{self._log_tail()}")
        raise AssertionError("unreachable: the last attempt raises")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Stop the server: SIGTERM (after SIGCONT when suspended), SIGKILL after
        ``timeout_s``. Returns its exit code, None when it was not running. Idempotent."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            self._signal(signal.SIGTERM)
            if self._suspended:
                self._signal(signal.SIGCONT)  # a stopped process handles SIGTERM only when continued
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
        self._suspended = False
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown) and reap it. Idempotent."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
        self._suspended = False

    def suspend(self) -> None:
        """Freeze the server (SIGSTOP) and wait until every thread of it is stopped (a
        stop reaches a JVM's threads one by one; on Linux, read from ``/proc``, at most
        :data:`~seglog.cluster.processes.SIGNAL_SETTLE_S`): clients lose their connection,
        sessions do not expire meanwhile. Raises :class:`ZooKeeperError` when it is not
        running."""
        self._require_running("suspend")
        self._signal(signal.SIGSTOP)
        self._suspended = True
        self._wait_threads_stopped(True)

    def resume(self) -> None:
        """Continue a suspended server (SIGCONT; waits until its threads run again, as
        :meth:`suspend`). Raises :class:`ZooKeeperError` when it is not running."""
        self._require_running("resume")
        self._signal(signal.SIGCONT)
        self._suspended = False
        self._wait_threads_stopped(False)

    def ruok(self, timeout_s: float = FOUR_LETTER_TIMEOUT_S) -> bool:
        """True when ZooKeeper answers ``ruok`` with ``imok`` within ``timeout_s``."""
        try:
            return four_letter_word(self.host, self._port, "ruok", timeout_s) == "imok"
        except OSError:
            return False

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({self.connect!r}, pid={self.pid}, run_dir={str(self.run_dir)!r})"

    # ----------------------------------------------------------------- internals

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            "# Written by seglog.cluster.zookeeper (see its module docstring).",
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self._port}",
            f"clientPortAddress={self.host}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons",
            f"forceSync={'yes' if self.force_sync else 'no'}",
        ]
        if self.max_session_timeout_ms is not None:
            lines.append(f"maxSessionTimeout={self.max_session_timeout_ms}")
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        (self.run_dir / "log4j.properties").write_text(
            _LOG4J_PROPERTIES.format(log_path=self.log_path), encoding="utf-8")

    def _spawn(self, install: ZooKeeperInstall) -> None:
        command = [
            install.java, f"-Xmx{self.heap_mb}m", "-Xms16m", "-XX:+UseSerialGC",
            # C1 only: a JVM that starts in about a second and idles cheaply on 2 cores.
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.jmx.log4j.disable=true",
            f"-Dlog4j.configuration=file:{self.run_dir / 'log4j.properties'}",
            "-cp", install.classpath, MAIN_CLASS, str(self.config_path),
        ]
        with open(self.out_path, "ab") as out:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.run_dir,
                # Its own process group: a Ctrl-C in the terminal reaches the owner, which
                # stops ZooKeeper by pid, not the JVM directly.
                start_new_session=True)
        self._suspended = False

    def _wait_serving(self, deadline: float) -> str | None:
        """None once ``srvr`` answers with ZooKeeper's version, else why not."""
        while True:
            proc = self._proc
            assert proc is not None
            if proc.poll() is not None:
                return f"exited with code {proc.returncode} while starting"
            try:
                answer = four_letter_word(self.host, self._port, "srvr", FOUR_LETTER_TIMEOUT_S)
            except OSError:
                answer = ""
            # The answer must come from this process: another server may have taken the port
            # between free_port() and the bind (ours then exits with a BindException).
            if answer.startswith("Zookeeper version") and _listens_on(proc.pid, self._port):
                return None
            if time.monotonic() >= deadline:
                return "did not answer in time"
            time.sleep(0.05)

    def _signal(self, signum: int) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signum)

    def _wait_threads_stopped(self, stopped: bool) -> None:
        if self.pid is not None:
            wait_threads_stopped(self.pid, stopped)

    def _require_running(self, what: str) -> None:
        if not self.running:
            raise ZooKeeperError(f"cannot {what} ZooKeeper on {self.connect}: not running")

    def _log_tail(self, size_bytes: int = 4000) -> str:
        parts = []
        for path in (self.out_path, self.log_path):
            try:
                with open(path, "rb") as f:
                    f.seek(max(0, f.seek(0, os.SEEK_END) - size_bytes))
                    parts.append(f"--- {path.name}\n" + f.read().decode("utf-8", "replace"))
            except FileNotFoundError:
                continue
        return "\n".join(parts) or "(no log written)"
