"""One writer per directory: an exclusive, non-blocking OS lock on the directory's ``.lock``.

:class:`DirectoryLock` takes ``flock(LOCK_EX | LOCK_NB)`` on ``<dir>/.lock`` (creating the
file), so a second writer, in another process or in this one, fails at once with
:class:`~seglog.errors.LogLockedError` instead of waiting or corrupting files. The holder
writes its pid into the file so the error can name it. The OS drops the lock when the file
descriptor is closed, including when the process dies, so a crash never leaves a stale lock;
the ``.lock`` file itself stays (as Kafka's does) and is harmless.

Notes:

* flock locks belong to the open file description: two ``DirectoryLock`` objects on one
  directory exclude each other even within one process; the descriptor is not inherited by
  child processes (Python opens files close-on-exec).
* Kafka's ``FileLock`` uses Java's ``FileChannel.tryLock``, which on Linux is a POSIX
  ``fcntl`` record lock. flock and fcntl locks do not see each other on Linux, so this lock
  does not keep a Kafka broker out of the same directory (nor the reverse).
* On NFS, flock may be emulated with fcntl locks or be local-only; use local disks.
"""

from __future__ import annotations

import errno
import fcntl
import os

from .. import filenames
from ..errors import LogLockedError

#: Most bytes read back from a ``.lock`` file when looking for the holder's pid.
_PID_BYTES_MAX = 32


class DirectoryLock:
    """An exclusive lock on ``<dir_path>/.lock``, taken on construction, released by close.

    Raises :class:`LogLockedError` (with ``path`` and, if the holder wrote it, ``holder_pid``)
    when another open lock holds the directory, and ``OSError`` if the directory is missing or
    unwritable. Use as a context manager or call :meth:`close`; close is idempotent.
    Thread-safety: create and close from one thread.
    """

    def __init__(self, dir_path: str | os.PathLike):
        """Take the lock now, without blocking."""
        self.dir_path = os.fspath(dir_path)
        self.path = os.path.join(self.dir_path, filenames.LOCK_FILE)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder_pid = _read_pid(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _locked_error(self.path, holder_pid) from None
            raise
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        try:
            # Record the holder for the error message of the next would-be writer.
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # the pid is a courtesy; the lock is what matters

    @property
    def locked(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def close(self) -> None:
        """Release the lock (the ``.lock`` file stays). Safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)  # no stale pid for the next reader
            except OSError:
                pass
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> "DirectoryLock":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        # A forgotten lock is released when the object dies, as the OS would at exit.
        if getattr(self, "_fd", None) is not None:
            self.close()

    def __repr__(self) -> str:
        state = "locked" if self.locked else "released"
        return f"DirectoryLock({self.dir_path!r}, {state})"


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, _PID_BYTES_MAX, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _locked_error(path: str, holder_pid: int | None) -> LogLockedError:
    holder = f" by process {holder_pid}" if holder_pid is not None else ""
    return LogLockedError(f"{path} is locked{holder}: another writer has this directory open",
                          path=path, holder_pid=holder_pid)


def lock_directory(dir_path: str | os.PathLike) -> DirectoryLock:
    """Take the exclusive lock of ``dir_path`` (see :class:`DirectoryLock`)."""
    return DirectoryLock(dir_path)


def check_unlocked(dir_path: str | os.PathLike) -> None:
    """Raise :class:`LogLockedError` if another open lock holds ``dir_path`` (its ``.lock``
    file exists and is flock-locked, by another process or another open lock in this one);
    return if it is free or has no ``.lock``. Takes nothing: the probe's shared lock is
    dropped at once.

    How a Store and a standalone writer exclude each other without a lock per partition: a
    Store locks its data directory and checks each partition directory it opens; a standalone
    writer locks its partition directory and then checks the parent. Whichever locks first is
    seen by the other's check, in any interleaving."""
    path = os.path.join(os.fspath(dir_path), filenames.LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _locked_error(path, _read_pid(fd)) from None
            raise
    finally:
        os.close(fd)  # closing drops the probe's shared lock
