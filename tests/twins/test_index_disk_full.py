"""A full disk under an index is a typed error, never SIGBUS (issue 14), and never a wedged log.

The offset and time indexes are sparse files written through a shared mapping, so the first
store into a page of a hole needs a disk block; on a full disk (or over quota) that store used
to be SIGBUS and the process died (10,000 partitions filled a disk that way). An index now
reserves its blocks (``posix_fallocate``) before a store can reach them, and a refusal is
``KafkaStorageError`` (ENOSPC). These tests fill a real small file system, a 1 MiB tmpfs
mounted for the test (tmpfs supports fallocate and counts its pages against ``size``), and run
each scenario in a child process: a SIGBUS would kill the test process itself, so the child's
exit status and output are what is asserted. Skipped, with the reason, where mounting is not
permitted (not root, no tmpfs, a container without CAP_SYS_ADMIN).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest

FS_BYTES = 1 << 20  # the mounted file system: small, so that filling it takes milliseconds
CHILD_TIMEOUT_S = 120

# Shared by every child: fill the file system to its last page (bounded: it holds 1 MiB).
FILL = textwrap.dedent("""
    import errno, json, os, sys
    import seglog
    from seglog.errors import KafkaStorageError

    def fill(directory):
        path = os.path.join(directory, "filler")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        chunk = bytes(4096)
        try:
            for _ in range(100_000):  # far more pages than the file system holds
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    return path
            raise AssertionError("the file system never filled")
        finally:
            os.close(fd)

    def outcome(exc):
        return {"type": type(exc).__name__, "errno": getattr(exc, "errno", None),
                "is_oserror": isinstance(exc, OSError),
                "kafka_error_code": getattr(exc, "kafka_error_code", None)}
""")

INDEX_CHILD = FILL + textwrap.dedent("""
    directory, backend_name, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    backend = seglog.get_backend(backend_name)
    base = 1000
    path = os.path.join(directory, "index")
    cls = backend.OffsetIndex if kind == "offset" else backend.TimeIndex
    index = cls(path, base)  # 10 MiB, sparse: ten times the file system

    def append(n):
        if kind == "offset":
            index.append(base + n, 100 * n)
        else:
            index.maybe_append(10_000 + n, base + n)

    append(1)  # one entry: its page, and no more, is reserved
    reserved_before = index.reserved_bytes
    filler = fill(directory)
    appended, error = 1, None
    for n in range(2, 1_000_000):  # bounded: the file system ends far earlier
        try:
            append(n)
        except KafkaStorageError as exc:
            error = outcome(exc)
            break
        appended = n
    entries_at_error = index.entries
    index.flush()
    with open(path, "rb") as f:
        written = f.read(entries_at_error * (8 if kind == "offset" else 12) + 4096)
    # The failed entry left no trace: the index still counts, and holds, what it had.
    reopened = cls(path, base, writable=False)
    same = reopened.entries == entries_at_error and all(
        reopened.entry(n) == index.entry(n) for n in range(index.entries))
    reopened.close()
    os.remove(filler)  # space again: the same append now succeeds
    append(appended + 1)
    print(json.dumps({"reserved_before": reserved_before, "appended": appended,
                      "entries_at_error": entries_at_error, "error": error,
                      "unchanged": same, "entries_after": index.entries,
                      "tail_zero": not any(written[entries_at_error * (8 if kind == "offset" else 12):])}))
    index.close()
""")

SEGMENT_CHILD = FILL + textwrap.dedent("""
    sys.path.insert(0, sys.argv[4])
    from segment_helpers import batch, records

    directory, backend_name, fitting = sys.argv[1], sys.argv[2], int(sys.argv[3])
    backend = seglog.get_backend(backend_name)
    page_bytes = os.sysconf("SC_PAGE_SIZE")
    # An index entry for every batch but the first: each append needs a slot in both indexes.
    segment = backend.Segment.open(directory, 0, create=True, index_interval_bytes=0)
    acknowledged = []
    for n in range(2):  # the second reserves the first page of each index
        result = segment.append(batch(backend, 2, value_bytes=40, timestamp_ms=1000 + n))
        acknowledged.append((result.first_offset, result.last_offset))
    # Leave free exactly the pages the .log still needs for the appends whose entries fit the
    # indexes' reserved pages (``fitting``), so that the index is what meets the full disk.
    batch_bytes = segment.size_bytes // 2
    log_pages_needed = -(-fitting * batch_bytes // page_bytes)
    log_pages_held = os.stat(segment.log_path).st_blocks * 512 // page_bytes
    spare = os.path.join(directory, "spare")
    with open(spare, "wb") as f:
        f.write(bytes(page_bytes * max(0, log_pages_needed - log_pages_held)))
    filler = fill(directory)
    os.remove(spare)
    error = None
    for n in range(2, 100_000):  # bounded: the indexes' first pages end far earlier
        state = (segment.next_offset, segment.size_bytes, os.path.getsize(segment.log_path),
                 segment.offset_index.entries, segment.time_index.entries)
        try:
            result = segment.append(batch(backend, 2, value_bytes=40, timestamp_ms=1000 + n))
        except OSError as exc:  # KafkaStorageError is one; so is the .log's own ENOSPC
            error = outcome(exc)
            break
        acknowledged.append((result.first_offset, result.last_offset))
    unchanged = state == (segment.next_offset, segment.size_bytes,
                          os.path.getsize(segment.log_path), segment.offset_index.entries,
                          segment.time_index.entries)
    # Roll on the still-full disk: the final time-index entry's slot was reserved ahead.
    try:
        segment.on_become_inactive()
        rolled_on_full_disk = "ok"
    except OSError as exc:
        rolled_on_full_disk = outcome(exc)
    segment.close()
    os.remove(filler)
    segment = backend.Segment.open(directory, 0)
    offsets = [r[0] for r in records(backend, segment.read(0, 1 << 20))]
    last_entry = segment.time_index.last_entry()
    segment.close()
    print(json.dumps({"error": error, "unchanged": unchanged, "acknowledged": acknowledged,
                      "offsets": offsets, "rolled_on_full_disk": rolled_on_full_disk,
                      "last_time_entry": last_entry}))
""")


@contextlib.contextmanager
def _small_fs(tmp_path):
    """A ``FS_BYTES`` tmpfs mounted on a fresh directory, unmounted on exit; skips the test
    where mounting is not permitted."""
    mount_point = tmp_path / "small-fs"
    mount_point.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES}", "tmpfs",
                               str(mount_point)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a small tmpfs to fill ({exc}): needs root on Linux")
    if done.returncode != 0:
        pytest.skip(f"mounting a small tmpfs to fill is not permitted here "
                    f"({done.stderr.strip() or done.returncode}): needs root on Linux")
    try:
        yield str(mount_point)
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True, timeout=30,
                       check=True)


def _run_child(script, *args):
    """Run ``script`` in a child Python; its one JSON line, after checking that no signal
    (SIGBUS above all) killed it."""
    child = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True,
        timeout=CHILD_TIMEOUT_S, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode >= 0, (
        f"the child was killed by signal {-child.returncode} (SIGBUS is 7): {child.stderr}")
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def _assert_storage_error(error):
    assert error == {"type": "KafkaStorageError", "errno": errno.ENOSPC, "is_oserror": True,
                     "kafka_error_code": 56}, error


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_index_on_a_full_disk_raises_a_storage_error(backend, tmp_path, kind):
    """Entries go on into the blocks reserved before the disk filled, then the append that
    needs a new block raises KafkaStorageError (ENOSPC), leaves the index as it was, and
    succeeds once space is freed."""
    with _small_fs(tmp_path) as directory:
        result = _run_child(INDEX_CHILD, directory, backend.name, kind)
    assert result["reserved_before"] == os.sysconf("SC_PAGE_SIZE")
    _assert_storage_error(result["error"])
    entry_bytes = 8 if kind == "offset" else 12
    assert result["appended"] == result["entries_at_error"] == 4096 // entry_bytes
    assert result["unchanged"] and result["tail_zero"]
    assert result["entries_after"] == result["entries_at_error"] + 1


def test_segment_append_on_a_full_disk_fails_before_writing(backend, tmp_path):
    """A segment append whose index entries need a block on a full disk fails with
    KafkaStorageError before its batch is written (nothing acknowledged is lost, nothing
    unacknowledged is kept), the roll's time-index entry still fits (its slot was reserved
    ahead), and every acknowledged record reads back after a reopen."""
    # Appends that fit: one entry per append after the first; the time index (12-byte
    # entries) fills its first page first, and keeps one slot free for the roll's entry.
    fitting = os.sysconf("SC_PAGE_SIZE") // 12
    helpers = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with _small_fs(tmp_path) as directory:
        result = _run_child(SEGMENT_CHILD, directory, backend.name, str(fitting), helpers)
    _assert_storage_error(result["error"])
    assert result["unchanged"]
    assert result["rolled_on_full_disk"] == "ok"
    acknowledged = result["acknowledged"]
    assert len(acknowledged) == fitting
    expected = [o for first, last in acknowledged for o in range(first, last + 1)]
    assert result["offsets"] == expected
    assert result["last_time_entry"] == [1000 + fitting - 1, expected[-1]]


# --- the reservation's steps, on any file system: both twins alike ------------------------------


def _steps(backend, kind, tmp_path):
    """``reserved_bytes`` after each step of a sequence of appends, reserves, cuts and
    reopens, and the file's bytes at the end."""
    cls = backend.OffsetIndex if kind == "offset" else backend.TimeIndex
    path = tmp_path / f"{backend.name}.{kind}"
    index = cls(str(path), 1000, max_index_bytes=64 * 1024)
    seen = [index.reserved_bytes]

    def append(n):
        if kind == "offset":
            index.append(1000 + n, 100 * n)
        else:
            index.maybe_append(10_000 + n, 1000 + n)

    for n in range(1, 1200):
        append(n)
        seen.append(index.reserved_bytes)
    index.reserve(0)
    seen.append(index.reserved_bytes)
    index.reserve(10**12)  # far past the file: up to its end, no further
    seen.append(index.reserved_bytes)
    index.truncate_to(1000 + 600)
    seen.append(index.reserved_bytes)
    index.trim()  # the cut gives its blocks back
    seen.append(index.reserved_bytes)
    index.resize(64 * 1024)
    seen.append(index.reserved_bytes)
    for n in range(600, 700):
        append(n)
        seen.append(index.reserved_bytes)
    index.reset()
    seen.append(index.reserved_bytes)
    index.close()
    index = cls(str(path), 1000)  # reopened: nothing known reserved until the next append
    seen.append(index.reserved_bytes)
    append(1)
    seen.append(index.reserved_bytes)
    index.close()
    return seen, path.read_bytes()


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_reservation_steps_are_the_same_in_both_twins(tmp_path, kind):
    """One page first, then as far ahead as the entries reach; never past the file; a cut
    or a reset forgets what it freed. The same steps and the same bytes in both twins."""
    import seglog

    native_steps, native_bytes = _steps(seglog.get_backend("native"), kind, tmp_path)
    pure_steps, pure_bytes = _steps(seglog.get_backend("pure"), kind, tmp_path)
    assert native_steps == pure_steps
    assert native_bytes == pure_bytes
    page_bytes = os.sysconf("SC_PAGE_SIZE")
    entry_bytes = 8 if kind == "offset" else 12
    file_bytes = 64 * 1024 - 64 * 1024 % entry_bytes
    assert native_steps[0] == 0 and native_steps[1] == page_bytes
    distinct = sorted(set(native_steps[:1200]))
    assert distinct[:3] == [0, page_bytes, 3 * page_bytes]  # then 7 pages, 15, ...: doubling
    assert max(native_steps) == file_bytes  # reserve(10**12): up to the file's end


@pytest.mark.parametrize("count", [-1, 1.5, "1", None])
def test_reserve_rejects_bad_counts(backend, tmp_path, count):
    index = backend.OffsetIndex(str(tmp_path / "a.index"), 0)
    try:
        with pytest.raises(ValueError if count == -1 else TypeError):
            index.reserve(count)
        assert index.reserved_bytes == 0
    finally:
        index.close()


def test_reserve_needs_a_writable_open_index(backend, tmp_path):
    path = str(tmp_path / "a.index")
    index = backend.OffsetIndex(path, 0)
    index.append(5, 100)
    index.close()
    with pytest.raises(ValueError, match="closed"):
        index.reserve(1)
    reader = backend.OffsetIndex(path, 0, writable=False)
    try:
        with pytest.raises(ValueError, match="read-only"):
            reader.reserve(1)
    finally:
        reader.close()


# --- a full disk under a segment's transaction index: the log goes offline --------------------

TXN_INDEX_CHILD = FILL + textwrap.dedent("""
    from seglog import Log, LogConfig, Store
    from seglog.storage import checkpoints

    directory, backend_name = sys.argv[1], sys.argv[2]
    out = {}

    def attempt(fn):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - the outcome is what is reported
            return outcome(exc)

    def transaction(log):
        # One open transaction of producer 7: the ABORT marker's .txnindex entry is the
        # write that meets the full disk (the marker itself fits the .log's last page).
        log.append_batch([b"x" * 10], producer_id=7, producer_epoch=0, base_sequence=0,
                         is_transactional=True)

    def abort(log):
        return log.append_txn_marker(producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                     commit=False)

    # A Log of its own.
    path = os.path.join(directory, "log", "t-0")
    log = Log.open(path, LogConfig(), backend=backend_name)
    log.append(b"acknowledged")
    transaction(log)
    filler = fill(directory)
    out["log_abort"] = attempt(lambda: abort(log))
    out["log_offline"] = log.offline
    out["log_append_after"] = attempt(lambda: log.append(b"refused"))
    out["log_read"] = [r.value.decode() for r in log.records()]
    os.remove(filler)
    out["log_append_with_space"] = attempt(lambda: log.append(b"refused"))
    log.close()
    log = Log.open(path, LogConfig(), backend=backend_name)
    out["log_reopened"] = {
        "offline": log.offline, "end": log.end_offset, "lso": log.last_stable_offset,
        "committed": [r.value.decode() for r in log.records(isolation="read_committed")],
        "append": attempt(lambda: log.append(b"later"))}
    log.close()

    # The same in a Store: its periodic work leaves the offline log out, and its close
    # writes no clean-shutdown marker, so the reopen recovers the log.
    store_dir = os.path.join(directory, "store")
    store = Store(store_dir, backend=backend_name)
    store.create_topic("t", partitions=2)
    log, other = store.topic("t").log(0), store.topic("t").log(1)
    log.append(b"acknowledged")
    transaction(log)
    filler = fill(directory)
    out["store_abort"] = attempt(lambda: abort(log))
    os.remove(filler)
    out["store_other_append"] = attempt(lambda: other.append(b"fine"))
    out["store_maintain"] = attempt(lambda: sorted(store.maintain()))
    out["store_flush"] = attempt(store.flush)
    store.close()
    out["store_clean_marker"] = checkpoints.has_clean_shutdown_marker(store_dir)
    store = Store(store_dir, backend=backend_name)
    log = store.topic("t").log(0)
    out["store_reopened"] = {
        "offline": log.offline, "end": log.end_offset,
        "committed": [r.value.decode() for r in log.records(isolation="read_committed")],
        "append": attempt(lambda: log.append(b"later")),
        "other": [r.value.decode() for r in store.topic("t").log(1).records()]}
    store.close()
    print(json.dumps(out))
""")


def test_a_txnindex_write_on_a_full_disk_takes_the_log_offline(backend, tmp_path):
    """The ABORT marker reaches the segment, then its ``.txnindex`` entry meets the full disk:
    the append raises KafkaStorageError and the log goes offline (every later write refused
    with KafkaStorageError, even once space is back; reads go on below the published end),
    as Kafka's log directory failure; it used to stay writable with the marker unpublished,
    and every later append failed an assertion after writing its batch. A reopen recovers the
    log: the marker is kept, its abort indexed (read_committed hides the aborted record) and
    writes go on. In a Store, the other partitions and the periodic work carry on, and the
    close leaves out the clean-shutdown marker so that the reopen recovers."""
    with _small_fs(tmp_path) as directory:
        out = _run_child(TXN_INDEX_CHILD, directory, backend.name)
    for key in ("log_abort", "log_append_after", "log_append_with_space", "store_abort"):
        _assert_storage_error(out[key])
    assert out["log_offline"] is True
    assert out["log_read"] == ["acknowledged", "x" * 10]
    assert out["log_reopened"] == {"offline": False, "end": 3, "lso": 3,
                                   "committed": ["acknowledged"], "append": 3}
    assert out["store_other_append"] == 0
    assert out["store_maintain"] == ["aborted_transactions", "compaction", "expired_offsets",
                                     "flushed", "retention"]
    assert out["store_flush"] is None
    assert out["store_clean_marker"] is False
    assert out["store_reopened"] == {"offline": False, "end": 3, "committed": ["acknowledged"],
                                     "append": 3, "other": ["fine"]}
