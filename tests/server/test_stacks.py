"""seglog.server.stacks: the text a bounded shutdown puts in its TimeoutError (where the
broker's tasks await, where its threads are), from a real loop in another thread."""

from __future__ import annotations

import asyncio
import threading
import time

from seglog.server import stacks


def _loop_in_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="stacks-test-loop", daemon=True)
    thread.start()
    return loop, thread


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    assert not thread.is_alive()
    loop.close()


def test_task_stacks_name_the_coroutine_a_task_awaits_in():
    loop, thread = _loop_in_thread()
    release = asyncio.Event()

    async def waits_for_release() -> None:
        await release.wait()

    try:
        task_future = asyncio.run_coroutine_threadsafe(waits_for_release(), loop)
        deadline = time.monotonic() + 5
        text = ""
        while "waits_for_release" not in text and time.monotonic() < deadline:
            text = stacks.task_stacks(loop)
        assert "waits_for_release" in text, text
        loop.call_soon_threadsafe(release.set)
        task_future.result(5)
    finally:
        _stop(loop, thread)


def test_a_blocked_loop_is_reported_and_the_thread_stacks_show_where():
    loop, thread = _loop_in_thread()
    blocking = threading.Event()
    unblock = threading.Event()

    def blocks_the_loop() -> None:
        blocking.set()
        unblock.wait(10)

    try:
        loop.call_soon_threadsafe(blocks_the_loop)
        assert blocking.wait(5)
        assert "blocked" in stacks.task_stacks(loop, timeout_s=0.2)
        text = stacks.thread_stacks()
        assert "blocks_the_loop" in text, text
    finally:
        unblock.set()
        _stop(loop, thread)


def test_a_closed_loop_is_reported_not_raised():
    loop = asyncio.new_event_loop()
    loop.close()
    assert "could not be listed" in stacks.task_stacks(loop, timeout_s=0.2)
