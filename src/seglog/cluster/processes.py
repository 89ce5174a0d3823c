"""Processes seen through Linux's ``/proc``: their state, command line, and waiting for a
SIGSTOP or SIGCONT to reach every thread.

A stop signal is delivered asynchronously: ``kill(pid, SIGSTOP)`` returns before the process
has stopped, and a multi-threaded process (a JVM, a broker with its ZooKeeper client threads)
stops thread by thread. Whoever pauses a process to make a fault, and then looks at it or at
what its peers see, waits for :func:`wait_threads_stopped` first.
"""

from __future__ import annotations

import time
from pathlib import Path

#: How long :func:`wait_threads_stopped` waits by default for every thread to stop or run.
SIGNAL_SETTLE_S = 2.0
#: The pause between two reads of the threads' states.
SETTLE_POLL_S = 0.005


def _stat_state(stat_path: Path) -> str | None:
    """The state letter of a /proc ``stat`` file, None when it is gone."""
    try:
        # The state follows the ")" that closes the command name (which may hold spaces).
        return stat_path.read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` from /proc (``R``, ``S``, ``T`` stopped, ``Z``
    zombie, ...), None when there is no such process."""
    return _stat_state(Path(f"/proc/{pid}/stat"))


def process_cmdline(pid: int) -> list[str]:
    """Process ``pid``'s command line (empty when it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def thread_states(pid: int) -> list[str]:
    """The state letter of every thread of process ``pid`` (empty when it is gone)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    # A thread that ended meanwhile has no state: left out.
    return [state for task in tasks if (state := _stat_state(task / "stat")) is not None]


def wait_threads_stopped(pid: int, stopped: bool, timeout_s: float = SIGNAL_SETTLE_S) -> bool:
    """Wait until every thread of ``pid`` is stopped by a signal (state ``T``) when
    ``stopped``, or none is when not; at most ``timeout_s``. True when they are (or the
    process is gone: nothing is left to wait for), False when the time ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = thread_states(pid)
        if not states or all((state == "T") == stopped for state in states):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(SETTLE_POLL_S)
