"""The exclusive directory lock: in-process, across processes, released on close and on exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from seglog.errors import LogLockedError
from seglog.storage.locking import DirectoryLock, lock_directory

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")

# A child that takes the lock, reports, and holds it until its stdin closes.
HOLDER = textwrap.dedent("""
    import sys
    from seglog.storage.locking import DirectoryLock
    lock = DirectoryLock(sys.argv[1])
    print("locked", flush=True)
    sys.stdin.read()
    lock.close()
""")

# A child that tries the lock once and prints the outcome.
TRIER = textwrap.dedent("""
    import sys
    from seglog.errors import LogLockedError
    from seglog.storage.locking import DirectoryLock
    try:
        DirectoryLock(sys.argv[1]).close()
        print("acquired")
    except LogLockedError as e:
        print("locked", e.holder_pid)
""")


def _python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True,
                            stdout=subprocess.PIPE, **kwargs)


def _try_in_child(path) -> str:
    child = _python(TRIER, str(path))
    out, _ = child.communicate(timeout=30)
    return out.strip()


def test_second_lock_in_same_process_fails(tmp_path):
    with DirectoryLock(tmp_path) as lock:
        assert lock.locked
        with pytest.raises(LogLockedError) as info:
            DirectoryLock(tmp_path)
        assert info.value.path == os.path.join(str(tmp_path), ".lock")
        assert info.value.holder_pid == os.getpid()
        assert str(tmp_path) in str(info.value) and str(os.getpid()) in str(info.value)
    assert not lock.locked
    DirectoryLock(tmp_path).close()  # free again after close
    assert os.path.exists(tmp_path / ".lock")  # the file stays, as Kafka's does


def test_close_is_idempotent(tmp_path):
    lock = lock_directory(tmp_path)
    lock.close()
    lock.close()
    assert "released" in repr(lock)


def test_lock_excludes_another_process(tmp_path):
    with DirectoryLock(tmp_path):
        assert _try_in_child(tmp_path) == f"locked {os.getpid()}"
    assert _try_in_child(tmp_path) == "acquired"


def test_lock_held_by_another_process_and_freed_when_it_dies(tmp_path):
    holder = _python(HOLDER, str(tmp_path), stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LogLockedError) as info:
            DirectoryLock(tmp_path)
        assert info.value.holder_pid == holder.pid
    finally:
        holder.kill()  # no clean close: the OS must release the lock
        holder.wait(timeout=30)
    DirectoryLock(tmp_path).close()


def test_missing_directory_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        DirectoryLock(tmp_path / "absent")


def test_lock_not_inherited_by_children(tmp_path):
    with DirectoryLock(tmp_path):
        # A child started while we hold the lock must not hold it after we release it.
        holder = _python("import sys; sys.stdin.read()", stdin=subprocess.PIPE)
    try:
        assert _try_in_child(tmp_path) == "acquired"
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
