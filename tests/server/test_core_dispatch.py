"""How the core runs handlers: the first step at once, in request order; a handler that waits
goes on as a task (its awaits, exceptions and cancellation behave as in a Task)."""

from __future__ import annotations

import asyncio
import struct
import threading

from core_helpers import connect, read_frame, request_frame, run_on_broker_loop
from seglog.server.context import RawResponse
from seglog.server.registry import ApiHandler

TEST_KEY = 1000


def _serve(broker, handle) -> None:
    broker.server.handlers[TEST_KEY] = ApiHandler(TEST_KEY, 0, 0, handle, raw_request=True)


def test_handlers_start_in_request_order_before_the_next_frame(broker):
    events: list[str] = []

    async def handle(ctx, body):
        events.append(f"start {ctx.correlation_id}")
        await asyncio.sleep(0)
        events.append(f"end {ctx.correlation_id}")
        return RawResponse((b"",))

    _serve(broker, handle)
    with connect(broker) as sock:
        sock.sendall(b"".join(request_frame(TEST_KEY, 0, i) for i in range(3)))
        for i in range(3):
            assert read_frame(sock) == struct.pack(">i", i)
    assert events[:3] == ["start 0", "start 1", "start 2"]
    assert sorted(events[3:]) == ["end 0", "end 1", "end 2"]


def test_turns_futures_and_exceptions_inside_a_waiting_handler(broker):
    async def handle(ctx, body):
        for _ in range(3):
            await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        failing = loop.create_future()
        loop.call_later(0.01, failing.set_exception, ValueError("inner"))
        try:
            await failing
        except ValueError as exc:
            text = str(exc).encode()
        value = await asyncio.wait_for(asyncio.sleep(0.01, result=b"+slept"), 5)
        executor = await ctx.broker.run_blocking(lambda: b"+thread")
        return RawResponse((text, value, executor))

    _serve(broker, handle)
    with connect(broker) as sock:
        sock.sendall(request_frame(TEST_KEY, 0, 4))
        assert read_frame(sock) == struct.pack(">i", 4) + b"inner+slept+thread"


def test_a_lost_connection_cancels_its_waiting_handlers(broker):
    seen = threading.Event()
    entered = threading.Event()

    async def handle(ctx, body):
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.set()
            raise

    _serve(broker, handle)
    with connect(broker) as sock:
        sock.sendall(request_frame(TEST_KEY, 0, 1))
        assert entered.wait(10)
    assert seen.wait(10)

    async def in_flight():
        for _ in range(100):
            if broker.server.in_flight == 0 and not broker.server.connections:
                return 0
            await asyncio.sleep(0.01)
        return broker.server.in_flight

    assert run_on_broker_loop(broker, in_flight()) == 0


def test_a_handler_that_swallows_cancellation_still_ends(broker):
    done = threading.Event()

    async def handle(ctx, body):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # a handler that ignores it: the connection is gone anyway
        done.set()
        return RawResponse((b"late",))

    _serve(broker, handle)
    with connect(broker) as sock:
        sock.sendall(request_frame(TEST_KEY, 0, 1))
        run_on_broker_loop(broker, asyncio.sleep(0.05))
    assert done.wait(10)
