"""The broker's Produce path in instructions per request, in-process (issue 27): a figure that
does not move with the machine's load, for changes too small for ``producepath.py``'s CPU
times (this VM's swing 1.5x between runs a minute apart).

Each measured loop runs under ``valgrind --tool=callgrind`` with collection on only inside
``functools.reduce`` (``--toggle-collect``): the loop is a ``reduce`` over a step function,
so what is counted is the steps and nothing of the broker's start, its timers or the
interpreter's exit. Two loop lengths are run and subtracted (the warm-up ``reduce`` of 200
steps is counted in both), so the figure is instructions per step. User-space instructions
only: the kernel's work (the page-cache copy of the pwritev, the socket) is not in it.

Steps (``--modes``), one 16.5 KiB Produce v9 request each (acks=-1, one batch of 150 x 100 B
records, as ``producepath.py`` and ``producewire.py``'s raw client; ``--batch-records 3400``
for the size librdkafka's defaults send):

- ``log``: ``Log.append_raw`` of the batch;
- ``handler``: the Produce handler's first step (``handle_produce_body``), answer encoded;
- ``conn``: ``Connection.data_received`` of the whole frame and the flush the loop would run
  next (the transport only counts the writes);
- ``wire``: the broker's whole process over loopback, the event loop and its socket
  transports included: a client in the parent sends one request at a time (the next after
  the answer) and the child counts everything its loop runs meanwhile (``run_until_complete``
  inside the ``reduce``; its 50 ms polls of the log's end included, a fraction of a percent).
  The broker's one-off background work after its start (the schemas it imports a turn at a
  time) can fall inside short loops: with ``--counts 20,60`` one run gave 27 M instructions
  per request; use at least ``100,500`` (265-268k, 1.5% apart between runs).

With ``--also-src <checkout>/src`` the same steps run against another checkout too
(before/after). Needs valgrind.

    PYTHONPATH=src python bench/producecount.py [--also-src ../before/src] \
        [--modes log,handler,conn,wire] [--counts 300,1300] [--batch-records 150]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

#: Steps run (and counted) before the measured loop in every run.
WARM_STEPS = 200
#: Records of 100 B in each request's batch by default (``--batch-records``): a 16.5 KiB
#: request; librdkafka's defaults send about 3,400, over 256 KiB, read in two or more pieces.
RECORDS_PER_REQUEST = 150


async def _until_end_offset(log: object, end_offset: int) -> None:
    """Return once ``log`` holds ``end_offset`` records (polled: a wait the loop pays little
    for)."""
    while log.end_offset < end_offset:  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)


def _wire_child(steps: int, records: int) -> None:
    """The ``wire`` mode's broker (run under callgrind by the parent, whose client sends
    ``WARM_STEPS`` requests, waits for ``go`` on this process's stdout, then ``steps``)."""
    from producepath import serving_broker

    loop = asyncio.new_event_loop()
    serving = serving_broker("producecount-", 1024 * 1024 * 1024)
    server = loop.run_until_complete(serving.__aenter__())
    try:
        log = server.store.topic("t").log(0)
        print(server.state.port, flush=True)
        loop.run_until_complete(_until_end_offset(log, WARM_STEPS * records))
        print("go", flush=True)
        end_offset = (WARM_STEPS + steps) * records
        functools.reduce(
            lambda acc, _index: loop.run_until_complete(_until_end_offset(log, end_offset))
            or acc, range(1), 0)
    finally:
        loop.run_until_complete(serving.__aexit__(None, None, None))
        loop.close()


def _wire_client(child: subprocess.Popen, steps: int, records: int) -> None:
    """The ``wire`` mode's client: one request at a time over loopback to the child's broker,
    each answer checked."""
    from producepath import produce_frame, read_response

    assert child.stdout is not None
    port = int(child.stdout.readline())
    frame = produce_frame("t", records=records)
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = bytearray()

        def one() -> None:
            sock.sendall(frame)
            response = read_response(sock, pending)
            # v9: correlation id, tags, one topic "t", one partition, its error.
            (error,) = struct.unpack_from(">h", response, 4 + 1 + 1 + 2 + 1 + 4)
            if error:
                raise SystemExit(f"produce failed: error {error}")

        for _ in range(WARM_STEPS):
            one()
        if child.stdout.readline().strip() != "go":
            raise SystemExit("the broker did not start its count")
        for _ in range(steps):
            one()
        child.wait(timeout=1800)


async def _child(mode: str, steps: int, records: int) -> None:
    """The measured loops of ``mode`` in this process (run under callgrind by the parent)."""
    from producepath import _CountingTransport, produce_frame, serving_broker

    from seglog.server import protocol
    from seglog.server.apis import data_produce
    from seglog.server.connection import Connection
    from seglog.server.context import RequestContext

    async with serving_broker("producecount-", 1024 * 1024 * 1024) as server:
        state = server.state
        frame = produce_frame("t", records=records)
        header = protocol.parse_request_header(frame[4:], flexible=True)
        body = memoryview(frame[4:])[header.body_offset:]
        log = server.store.topic("t").log(0)
        request = data_produce.read_produce_request(9, body)
        _code, batch = data_produce.check_produce_records(
            request.topic_data[0].partition_data[0].records, 9)
        connection = Connection(server, 1)
        transport = _CountingTransport()
        connection.connection_made(transport)

        def log_step(acc: int, _index: int) -> int:
            log.append_raw(batch, now_ms=state.now_ms(), partition_leader_epoch=0)
            return acc

        def handler_step(acc: int, _index: int) -> int:
            ctx = RequestContext(0, 9, 1, "raw", 1, "127.0.0.1", 5555, state)
            coroutine = data_produce.handle_produce_body(ctx, body)
            try:
                coroutine.send(None)
            except StopIteration:
                return acc
            raise RuntimeError("the handler waited")

        def conn_step(acc: int, _index: int) -> int:
            connection.data_received(frame)
            # What the loop's next turn would run (the flush _finish scheduled).
            connection._flush()  # noqa: SLF001
            connection._flush_scheduled = False  # noqa: SLF001
            return acc

        step = {"log": log_step, "handler": handler_step, "conn": conn_step}[mode]
        functools.reduce(step, range(WARM_STEPS), 0)
        functools.reduce(step, range(steps), 0)
        if mode == "conn" and transport.writes != WARM_STEPS + steps:
            raise RuntimeError(f"{transport.writes} responses written")


def _count(src: str, mode: str, steps: int, records: int) -> int:
    """Instructions counted by callgrind in one child run."""
    with tempfile.TemporaryDirectory(prefix="producecount-cg-") as scratch:
        out = Path(scratch) / "callgrind.out"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [src, str(Path(__file__).resolve().parent)]))
        command = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
                   "--toggle-collect=functools_reduce", f"--callgrind-out-file={out}",
                   sys.executable, __file__, "--child", mode, "--steps", str(steps),
                   "--batch-records", str(records)]
        errors = Path(scratch) / "stderr"
        with errors.open("w") as stderr:
            if mode == "wire":
                with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=stderr,
                                      text=True) as child:
                    try:
                        _wire_client(child, steps, records)
                    finally:
                        if child.poll() is None:
                            child.kill()
                returncode = child.returncode
            else:
                returncode = subprocess.run(
                    command, env=env, stdout=subprocess.DEVNULL, stderr=stderr, timeout=1800,
                    check=False).returncode
        if returncode != 0:
            raise SystemExit(f"{src} {mode} {steps}: exit {returncode}\n"
                             f"{errors.read_text()[-2000:]}")
        match = re.search(r"^summary:\s*(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise SystemExit(f"{src} {mode} {steps}: no summary in callgrind's output")
        return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--modes", default="log,handler,conn,wire")
    parser.add_argument("--counts", default="300,1300",
                        help="the two measured loop lengths (steps) subtracted")
    parser.add_argument("--batch-records", type=int, default=RECORDS_PER_REQUEST,
                        help="records of 100 B in each request (default 150: 16.5 KiB)")
    parser.add_argument("--also-src", default="",
                        help="another checkout's src directory, measured the same way")
    args = parser.parse_args()
    if args.child == "wire":
        _wire_child(args.steps, args.batch_records)
        return
    if args.child:
        asyncio.run(_child(args.child, args.steps, args.batch_records))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    short, long_ = (int(n) for n in args.counts.split(","))
    here = str(Path(__file__).resolve().parent.parent / "src")
    sources = {"this": here}
    if args.also_src:
        sources["other"] = str(Path(args.also_src).resolve())
    modes = args.modes.split(",")
    jobs = {(name, mode, steps): (src, mode, steps, args.batch_records)
            for name, src in sources.items()
            for mode in modes for steps in (short, long_)}
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {key: pool.submit(_count, *job) for key, job in jobs.items()}
        counts = {key: future.result() for key, future in futures.items()}
    print(f"# instructions per request, ({long_} - {short}) steps subtracted")
    for mode in modes:
        per = {name: (counts[(name, mode, long_)] - counts[(name, mode, short)])
               / (long_ - short) for name in sources}
        line = f"{mode}: this {per['this']:,.0f}"
        if "other" in per:
            line += f", other {per['other']:,.0f}, this / other {per['this'] / per['other']:.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
