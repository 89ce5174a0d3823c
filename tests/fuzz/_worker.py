"""The fuzz worker process: runs cases that may crash it, behind a pipe.

Started by :class:`fuzz.workers.Worker` as ``python _worker.py``. Reads length-prefixed pickled
``(kind, payload)`` messages on stdin, calls ``fuzz.cases.run_<kind>(payload)`` and writes the
pickled ``("ok", result)`` (or ``("harness-error", traceback)`` when the harness itself
failed) on the original stdout; everything the code under test prints goes to stderr, which
the parent keeps for the crash report. The address space is capped with ``RLIMIT_AS``
(``SEGLOG_FUZZ_AS_BYTES``, default 1 GiB) so that a decompression bomb ends as a
``MemoryError`` or a crash, never as a machine out of memory. ``faulthandler`` prints the
Python stack of a segfault, SIGBUS or abort to stderr.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import resource
import struct
import sys
import traceback


def _read_exact(stream, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(here))  # tests/: the package is `fuzz`, as under pytest
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints of the code under test must not corrupt the protocol
    faulthandler.enable()
    limit = int(os.environ.get("SEGLOG_FUZZ_AS_BYTES", str(1 << 30)))
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from fuzz import cases  # after the limit: imports count against it too

    ready = pickle.dumps(("ready", os.getpid()))
    out.write(struct.pack(">I", len(ready)) + ready)
    out.flush()
    stdin = sys.stdin.buffer
    while True:
        header = _read_exact(stdin, 4)
        if header is None:
            return
        kind, payload = pickle.loads(_read_exact(stdin, struct.unpack(">I", header)[0]))
        try:
            reply = ("ok", getattr(cases, "run_" + kind)(payload))
        except BaseException:  # noqa: BLE001 - reported to the parent as a harness error
            reply = ("harness-error", traceback.format_exc())
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(struct.pack(">I", len(data)) + data)
        out.flush()


if __name__ == "__main__":
    main()
