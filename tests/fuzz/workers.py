"""The parent's side of the worker processes: send a case, get a result, survive a crash.

A :class:`Worker` owns one ``_worker.py`` subprocess. :meth:`Worker.call` returns
``Reply(status, value, stderr_tail)`` where status is ``"ok"`` (value is the case's result),
``"crash"`` (the process died: value says by which signal or exit code; ``stderr_tail`` holds
faulthandler's stack), ``"timeout"`` (killed after ``timeout_s``) or ``"harness-error"`` (a
bug in the harness: value is the traceback). After a crash or a timeout the next call starts a
fresh process. The worker imports ``seglog`` from the same tree the parent imported it from.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, NamedTuple

import seglog

WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")
#: RLIMIT_AS of a worker: bombs must fail with a typed error well below it.
AS_BYTES_DEFAULT = 1 << 30


class Reply(NamedTuple):
    status: str
    value: Any
    stderr_tail: str = ""


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class Worker:
    """One crash-tolerant worker process (started lazily, restarted after a death)."""

    def __init__(self, *, as_bytes: int = AS_BYTES_DEFAULT):
        self.as_bytes = as_bytes
        self.proc: subprocess.Popen | None = None
        self.stderr_file = None
        self.starts = 0

    def _start(self) -> None:
        src = os.path.dirname(os.path.dirname(os.path.abspath(seglog.__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        env["SEGLOG_FUZZ_AS_BYTES"] = str(self.as_bytes)
        env["SEGLOG_REQUIRE_NATIVE"] = "1"
        env.setdefault("OPENBLAS_NUM_THREADS", "1")  # thread stacks would eat the AS budget
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("MKL_NUM_THREADS", "1")
        self.stderr_file = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-u", WORKER_SCRIPT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr_file, env=env)
        self.starts += 1
        # The worker says "ready" once its imports are done: a harness that cannot even
        # start is an error of the harness, not a crash to bisect.
        deadline = time.monotonic() + 120
        try:
            header = self._read(4, deadline)
            body = None if header is None else self._read(struct.unpack(">I", header)[0], deadline)
        except TimeoutError:
            body = None
        if body is None:
            self.proc.kill()
            self.proc.wait()
            tail = self._stderr_tail()
            self._reset()
            raise RuntimeError(f"the fuzz worker did not start:\n{tail}")

    def _stderr_tail(self, limit: int = 6000) -> str:
        if self.stderr_file is None:
            return ""
        self.stderr_file.seek(0, os.SEEK_END)
        size = self.stderr_file.tell()
        self.stderr_file.seek(max(0, size - limit))
        return self.stderr_file.read().decode("utf-8", "replace")

    def _read(self, n: int, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        chunks = []
        while n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _dead(self) -> Reply:
        returncode = self.proc.wait()
        tail = self._stderr_tail()
        self._reset()
        return Reply("crash", _signal_name(returncode), tail)

    def _reset(self) -> None:
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        if self.stderr_file is not None:
            self.stderr_file.close()
        self.proc = None
        self.stderr_file = None

    def call(self, kind: str, payload: Any, *, timeout_s: float = 60.0) -> Reply:
        """Run ``cases.run_<kind>(payload)`` in the worker."""
        if self.proc is None:
            self._start()
        else:  # a fresh stderr per call, so a crash report shows this call's output only
            self.stderr_file.seek(0)
            self.stderr_file.truncate()
        data = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(struct.pack(">I", len(data)) + data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._dead()
        deadline = time.monotonic() + timeout_s
        try:
            header = self._read(4, deadline)
            body = None if header is None else self._read(struct.unpack(">I", header)[0], deadline)
        except TimeoutError:
            self.proc.kill()
            self.proc.wait()
            tail = self._stderr_tail()
            self._reset()
            return Reply("timeout", f"no answer in {timeout_s} s", tail)
        if body is None:
            return self._dead()
        status, value = pickle.loads(body)
        return Reply(status, value, self._stderr_tail() if status != "ok" else "")

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self._reset()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
