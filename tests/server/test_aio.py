"""seglog.aio.wait_event: set, timed out, and a cancellation that races with the event being
set (the case ``asyncio.wait_for`` loses on Python 3.10/3.11) always raises."""

from __future__ import annotations

import asyncio

import pytest

from seglog.aio import wait_event


def test_set_event_returns_true_and_timeout_false():
    async def main() -> tuple[bool, bool, bool]:
        event = asyncio.Event()
        timed_out = await wait_event(event, 0.01)
        asyncio.get_running_loop().call_later(0.01, event.set)
        woken = await wait_event(event, 10)
        already = await wait_event(event, 0)
        return timed_out, woken, already

    assert asyncio.run(main()) == (False, True, True)


def test_cancellation_raises_even_when_the_event_is_set_at_the_same_time():
    async def main() -> list[bool]:
        outcomes = []
        for _ in range(50):
            event = asyncio.Event()
            task = asyncio.ensure_future(wait_event(event, 10))
            await asyncio.sleep(0)  # the task now waits
            event.set()
            task.cancel()
            try:
                await task
                outcomes.append(False)  # swallowed
            except asyncio.CancelledError:
                outcomes.append(True)
        return outcomes

    assert all(asyncio.run(main()))


def test_no_waiter_task_is_left_behind():
    async def main() -> int:
        event = asyncio.Event()
        await wait_event(event, 0.01)
        task = asyncio.ensure_future(wait_event(event, 10))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        return len([t for t in asyncio.all_tasks() if t is not asyncio.current_task()])

    assert asyncio.run(main()) == 0
