"""asyncio waits that keep a cancellation: the broker's loops stop by being cancelled, and
``asyncio.wait_for(event.wait(), t)`` on Python 3.10/3.11 can swallow a cancellation that
arrives as the event is set (it returns the result instead of raising), leaving a task that
was cancelled running on; a shutdown that awaits it then never ends (a `seglog serve` broker
hung that way in its group timers' task)."""

from __future__ import annotations

import asyncio

__all__ = ["wait_event", "cancel_and_wait", "CLOSE_WAIT_S"]


async def wait_event(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Wait until ``event`` is set (True) or ``timeout_s`` passed (False; None waits without
    a bound). A cancellation of the caller always raises CancelledError here, set event or
    not."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _pending = await asyncio.wait({waiter}, timeout=timeout_s)
    finally:
        if not waiter.done():
            waiter.cancel()
    return bool(done)


#: How long closing waits for its cancelled tasks (seconds).
CLOSE_WAIT_S = 5.0


async def cancel_and_wait(tasks: list, timeout_s: float = CLOSE_WAIT_S) -> None:
    """Cancel ``tasks`` and wait at most ``timeout_s`` for them to end. Bounded: a task
    blocked where a cancellation is not seen at once (an executor call, a wait_for that
    swallows it on 3.10/3.11) must not hold the broker's shutdown; such tasks check their
    owner's closed flag and end on their own. The exceptions of those that ended are retrieved (a task that
    failed while stopping is not news)."""
    for task in tasks:
        task.cancel()
    if tasks:
        done, _pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in done:
            if not task.cancelled():
                task.exception()
