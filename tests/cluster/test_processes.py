"""``seglog.cluster.processes``: a SIGSTOP or SIGCONT is waited for until it has reached every
thread (it is delivered asynchronously; a fault made with it must be in place before the
caller looks), and a wait that runs out says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from seglog.cluster.processes import (
    process_cmdline, process_state, thread_states, wait_threads_stopped,
)

#: A process with several threads asleep, as a broker has (its loop, ZooKeeper client, ...).
THREADED = ("import threading, time\n"
            "for _ in range(4):\n"
            "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")


@pytest.fixture
def threaded():
    proc = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=10)


def test_stop_and_continue_are_waited_for_on_every_thread(threaded):
    pid = threaded.pid
    assert len(thread_states(pid)) == 5
    assert "-c" in process_cmdline(pid)
    os.kill(pid, signal.SIGSTOP)
    assert wait_threads_stopped(pid, True)
    assert set(thread_states(pid)) == {"T"} and process_state(pid) == "T"
    os.kill(pid, signal.SIGCONT)
    assert wait_threads_stopped(pid, False)
    assert "T" not in thread_states(pid) and process_state(pid) != "T"


def test_a_wait_that_runs_out_says_so(threaded):
    # Nobody stops it: the wait for a stop ends with False at its bound, not at once.
    assert not wait_threads_stopped(threaded.pid, True, timeout_s=0.05)
    assert wait_threads_stopped(threaded.pid, False, timeout_s=0.05)


def test_a_process_gone_leaves_nothing_to_wait_for(threaded):
    threaded.kill()
    threaded.wait(timeout=10)
    assert thread_states(threaded.pid) == [] and process_state(threaded.pid) is None
    assert process_cmdline(threaded.pid) == []
    assert wait_threads_stopped(threaded.pid, True, timeout_s=0.05)
