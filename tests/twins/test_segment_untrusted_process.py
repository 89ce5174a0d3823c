"""A read-only follower in another process while the writer truncates (issue 8, symptom 3).

The reader used to mmap the .log: when the writer truncated it (``Log.truncate_to``, a
follower truncation), the reader's next access to a page past the new end was SIGBUS and the
process died. A read-only segment now reads with pread and never maps the .log, so it sees
fewer bytes, never a fault. The test is deterministic: the reader reads a little, the writer
truncates while the reader waits, then the reader goes on with its old state."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import seglog

READER = textwrap.dedent("""
    import sys
    import seglog
    from seglog.errors import SeglogError

    path, backend = sys.argv[1], sys.argv[2]
    log = seglog.Log.open(path, backend=backend, read_only=True)
    records = log.records()
    first = next(records)
    print("ready", first.offset, flush=True)
    sys.stdin.readline()  # the writer truncates now
    count = 1
    try:
        for _ in records:  # bounded: at most the records that were there
            count += 1
        outcome = "end"
    except SeglogError as exc:  # a typed error is allowed; a signal is not
        outcome = type(exc).__name__
    print("done", count, outcome, flush=True)
""")


def test_reader_process_survives_writer_truncation(backend, tmp_path):
    path = str(tmp_path / "part-0")
    config = seglog.LogConfig(segment_bytes=64 << 20, index_interval_bytes=4096)
    log = seglog.Log.open(path, config, backend=backend.name)
    value = b"x" * 4000
    for _ in range(8):  # 8 MiB in one segment: reads of 1 MiB touch many pages
        log.append_batch([value] * 256)
    log.flush()
    end = log.end_offset
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, path, backend.name], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        line = reader.stdout.readline()
        assert line.startswith("ready"), (line, reader.stderr.read())
        log.truncate_to(10)  # the .log shrinks to one batch under the reader
        reader.stdin.write("go\n")
        reader.stdin.flush()
        out, err = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
        log.close()
    assert reader.returncode >= 0, f"reader killed by signal {-reader.returncode}: {err}"
    assert reader.returncode == 0, err
    done = out.split()
    assert done[0] == "done" and int(done[1]) <= end, out
