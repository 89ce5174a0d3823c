"""Where a broker waits: every thread's Python stack and every asyncio task's await chain,
as text, for the error a bounded shutdown raises when it runs out of time (a hang then
reports its place instead of only its duration)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import faulthandler
import io
import tempfile

__all__ = ["current_task_stacks", "thread_stacks", "task_stacks"]


def thread_stacks() -> str:
    """The current Python stack of every thread of this process (faulthandler's dump, the
    form CPython prints for a fatal error: ``Thread 0x...`` then its frames)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as f:
        faulthandler.dump_traceback(f, all_threads=True)
        f.seek(0)
        return f.read()


def current_task_stacks() -> str:
    """The await chain of every unfinished task of the running loop (call it on the loop)."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        task.print_stack(limit=12, file=out)
    return out.getvalue()


def task_stacks(loop: asyncio.AbstractEventLoop, timeout_s: float = 2.0) -> str:
    """The await chain of every unfinished task of ``loop`` (another thread's running loop),
    gathered on that loop; a line saying so when the loop does not answer within
    ``timeout_s`` (it is blocked: :func:`thread_stacks` shows where)."""
    future: concurrent.futures.Future[str] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(current_task_stacks())
        except BaseException as exc:  # noqa: BLE001 - reported in the text, never raised
            future.set_exception(exc)

    try:
        loop.call_soon_threadsafe(run)
        return future.result(timeout_s)
    except concurrent.futures.TimeoutError:
        return f"(the event loop did not answer within {timeout_s} s: it is blocked)\n"
    except (RuntimeError, Exception) as exc:  # noqa: BLE001 - a closed loop, a failed walk
        return f"(the tasks could not be listed: {exc!r})\n"
