"""The ``seglog`` command line (``seglog ...`` or ``python -m seglog ...``).

Subcommands:

* ``seglog bench``: measure sequential vs random I/O, seglog's native core vs its pure twin,
  seglog vs the logs Python users reach for today, and this machine's limits; print one table
  per part and write ``bench-results/results.json``, ``results.md`` and PNG charts. See
  :mod:`seglog.bench`.
* ``seglog serve``: run a Kafka-protocol broker over a data directory until SIGTERM or
  SIGINT (a clean shutdown, exit 0). See :mod:`seglog.server` and ``docs/server.md``.
* ``seglog recover``: with the broker stopped, truncate an offline partition (its files
  failed to load) to its last valid offset, as Kafka's unclean recovery does. See
  :mod:`seglog.partition_recovery` and ``docs/server.md``, "Offline partitions".
* The data tools (:mod:`seglog.commands`): ``produce``, ``consume``, ``topics``, ``groups``
  and ``dump``, on a data directory (``--data-dir``) or any Kafka broker
  (``--bootstrap-server``).

``seglog --version`` prints the version; ``--quiet`` (before the command) silences progress
bars, which are drawn only on a terminal anyway (:mod:`seglog.progress`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import importlib

from . import __version__, cli_format, cli_recover
from .bench import PART_ORDER, PART_TITLES
from .cluster import cli_cluster

#: The data tools' modules (seglog.commands.<name>), in the order ``--help`` lists them; each
#: has ``add_parser(sub)``, which sets ``run`` (its ``main(args) -> int``) as a default.
TOOL_MODULES: tuple[str, ...] = (
    "produce",
    "consume",
    "topics",
    "groups",
    "dump",
)


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _runs(text: str) -> int:
    value = _positive_int(text)
    if value < 3:
        raise argparse.ArgumentTypeError("every figure is a median of at least 3 runs: use >= 3")
    return value


def _record_bytes(text: str) -> int:
    value = _positive_int(text)
    if not 8 <= value <= 1 << 20:
        raise argparse.ArgumentTypeError("record size must be 8 B .. 1 MiB")
    return value


def parse_parts(text: str) -> tuple[str, ...]:
    """``"peers,twins"`` -> ``("twins", "peers")`` in run order; raises ArgumentTypeError on an
    unknown name (the message lists the known ones)."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PART_ORDER]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown part {', '.join(unknown) or '(none)'}; choose from {', '.join(PART_ORDER)}")
    return tuple(n for n in PART_ORDER if n in names)


#: Expected wall time of each bench mode on a quiet 2-core VM (bench/results-issue27-
#: benchquick.md has the measurements behind them; the full run of 2026-12-05, every part
#: with Kafka's jars cached, took 796 s: bench/RESULTS.md).
BENCH_QUICK_DURATION = "under a minute"
BENCH_STANDARD_DURATION = "about 10 minutes"
BENCH_FULL_DURATION = "about 15 minutes"
BENCH_DURATIONS = (f"--quick {BENCH_QUICK_DURATION}; the default (standard) "
                   f"{BENCH_STANDARD_DURATION}; --full {BENCH_FULL_DURATION}.")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``seglog`` command."""
    parser = argparse.ArgumentParser(
        prog="seglog", description="seglog: Apache Kafka's partition log for Python.")
    parser.add_argument("--version", action="version", version=f"seglog {__version__}")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress bars (they are drawn only on a terminal anyway)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parts_help = "; ".join(f"{name}: {PART_TITLES[name]}" for name in PART_ORDER)
    bench = sub.add_parser(
        "bench", help="benchmark sequential vs random I/O, native vs pure, seglog vs peers",
        description="Run the benchmark suite and write bench-results/. Modes and their "
                    "expected duration on a quiet 2-core VM: " + BENCH_DURATIONS + " A loaded "
                    "machine takes longer (each part prints the load average it ran under). "
                    "Parts: " + parts_help,
    )
    mode = bench.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="small sizes, every part, " + BENCH_QUICK_DURATION + " (the CI "
                           "smoke run); the Kafka side of the broker and scale parts and the "
                           "TLS figures are left out (the kafka part still runs the real "
                           "broker)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="full sizes (1 M records, 1 GiB transfers, 10,000 partitions), "
                           + BENCH_FULL_DURATION)
    bench.add_argument("--only", type=parse_parts, metavar="PART[,PART]",
                       help=f"run only these parts ({', '.join(PART_ORDER)})")
    bench.add_argument("--record-bytes", type=_record_bytes, default=100, metavar="N",
                       help="size of each record value in bytes (default 100)")
    bench.add_argument("--records", type=_positive_int, metavar="N",
                       help="records per measurement (overrides the mode's count)")
    bench.add_argument("--runs", type=_runs, metavar="N",
                       help="runs per figure (>= 3; default 3, article 3 or 5)")
    bench.add_argument("--dir", dest="dir_path", metavar="PATH",
                       help="where temporary data files go (default: the current directory's "
                            "file system); removed afterwards")
    bench.add_argument("--json", dest="json_stdout", action="store_true",
                       help="print results.json to stdout instead of tables")
    bench.add_argument("--out", dest="out_dir", default="bench-results", metavar="DIR",
                       help="directory for results.json, results.md and charts "
                            "(default bench-results)")
    bench.add_argument("--no-charts", dest="charts", action="store_false",
                       help="do not draw PNG charts")
    bench.add_argument("--no-progress", dest="progress", action="store_false",
                       help="no progress on stderr (a bar on a terminal, a line per step "
                            "elsewhere)")
    serve = sub.add_parser(
        "serve", help="run a Kafka-protocol broker (Kafka clients connect to it unmodified)",
        description="Serve a data directory over Kafka's wire protocol until SIGTERM or "
                    "SIGINT, which shut down cleanly (requests in flight answered, logs "
                    "flushed, clean-shutdown marker written) and exit 0. Settings take "
                    "Kafka's broker config names (docs/server.md lists them).")
    serve.add_argument("--data-dir", metavar="DIR",
                       help="the data directory (default: log.dirs when configured, else "
                            "./seglog-data)")
    serve.add_argument("--listen", metavar="HOST:PORT",
                       help="address to listen on (default: listeners when configured, else "
                            "127.0.0.1:9092; port 0 picks a free port)")
    serve.add_argument("--config", dest="configs", action="append", default=[],
                       metavar="KEY=VALUE",
                       help="a Kafka broker config, e.g. num.partitions=3 (repeatable; wins "
                            "over --config-file)")
    serve.add_argument("--config-file", metavar="FILE",
                       help="a Java properties file of broker configs (server.properties)")
    serve.add_argument("--broker-id", type=int, metavar="N",
                       help="this broker's id in a cluster (Kafka's broker.id; wins over "
                            "--config)")
    serve.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                       help="join the cluster kept in this ZooKeeper (Kafka's "
                            "zookeeper.connect; wins over --config; docs/cluster.md)")
    serve.add_argument("--metrics-listen", metavar="HOST:PORT",
                       help="serve Prometheus metrics at http://HOST:PORT/metrics (Kafka's "
                            "metric names; docs/metrics.md; port 0 picks a free port)")
    serve.add_argument("--backend", choices=("native", "pure"),
                       help="storage backend (default: seglog's default backend)")
    serve.add_argument("--log-level", default="INFO",
                       choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                       help="logging level on stderr (default INFO)")
    serve.add_argument("--log-format", default="text", choices=("text", "json"),
                       help="log lines as text (default) or as one JSON object per line "
                            "(time, level, logger, message, exception) for log shippers")
    # Test-only, hidden from --help: each puts a known bug back (a negative control for the
    # cluster scenarios) or exposes a secret (the ZooKeeper session); see
    # seglog.cluster.test_breaks and docs/cluster.md, "Negative controls".
    serve.add_argument("--test-break", dest="test_breaks", action="append", default=[],
                       metavar="NAME", help=argparse.SUPPRESS)
    serve.add_argument("--test-expose-zk-session", action="store_true",
                       help=argparse.SUPPRESS)
    cli_cluster.add_parser(sub)
    cli_format.add_parser(sub)
    cli_recover.add_parser(sub)
    for name in TOOL_MODULES:
        importlib.import_module(f"{__package__}.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``seglog`` console script; returns the process exit code.

    Exit codes: 0 success, 1 a bench part failed with an error, 2 bad usage.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quiet:
        from .progress import set_quiet
        set_quiet(True)
    run = getattr(args, "run", None)
    if run is not None:
        return int(run(args))
    if args.command == "bench":
        return _bench(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "cluster":
        return cli_cluster.main(args)
    if args.command == "format":
        return cli_format.main(args)
    if args.command == "recover":
        return cli_recover.main(args)
    parser.print_help()
    return 2


#: The data directory ``seglog serve`` uses when neither --data-dir nor log.dirs says.
SERVE_DATA_DIR_DEFAULT = "./seglog-data"
#: When a `seglog serve` shutdown has run this long, it logs where its tasks wait.
SERVE_SHUTDOWN_REPORT_AFTER_S = 10.0


def _serve(args: argparse.Namespace) -> int:
    """``seglog serve``: exit 0 after a clean shutdown on SIGTERM/SIGINT, 2 for bad settings,
    1 when the broker cannot start (directory locked, address in use, unreadable data)."""
    import asyncio
    import faulthandler
    import io
    import logging
    import signal

    from . import log_format
    from .cluster.test_breaks import TestBreaks
    from .errors import InvalidConfigError, SeglogError
    from .progress import progress
    from .server.config import BrokerConfig

    try:
        test_breaks = TestBreaks(frozenset(args.test_breaks),
                                 expose_zk_session=args.test_expose_zk_session)
    except ValueError as exc:
        print(f"seglog serve: --test-break: {exc}", file=sys.stderr)
        return 2
    try:
        file_text = None
        if args.config_file is not None:
            with open(args.config_file, encoding="utf-8") as f:
                file_text = f.read()
        flags = {}
        if args.broker_id is not None:
            flags["broker.id"] = args.broker_id
        if args.zookeeper is not None:
            flags["zookeeper.connect"] = args.zookeeper
        config = BrokerConfig.from_sources(file_text=file_text, args=args.configs,
                                           configs=flags)
    except (InvalidConfigError, OSError, UnicodeDecodeError) as exc:
        print(f"seglog serve: {exc}", file=sys.stderr)
        return 2
    if "hypothesis" not in sys.modules:
        # kio registers Hypothesis strategies for its types whenever Hypothesis is importable
        # (a test dependency), which costs ~0.4 s of start-up; a broker process never uses
        # them, so Hypothesis is made unimportable here (this process only).
        sys.modules["hypothesis"] = None  # type: ignore[assignment]
    from .server import stacks
    from .server.broker import Broker

    log_format.configure(getattr(logging, args.log_level), args.log_format)
    # The storage warns (RuntimeWarning) of what it found at the open, such as a partition
    # whose files failed to load: one log line each, with the broker's other lines.
    logging.captureWarnings(True)
    log = logging.getLogger("seglog.serve")
    data_dir = args.data_dir
    if data_dir is None:
        data_dir = (config["log.dirs"][0] if not config.is_default("log.dirs")
                    or not config.is_default("log.dir") else SERVE_DATA_DIR_DEFAULT)
    # Opening the data dir (recovering it after a crash) can take minutes: a bar on a terminal.
    opening = progress("loading logs", unit="topics")

    def opened(done: int, total: int) -> None:
        opening.update_to(done, total)
        if done >= total:
            opening.close()  # before the broker's next log lines, which would follow it

    try:
        broker = Broker(data_dir, listen=args.listen, config=config, backend=args.backend,
                        test_breaks=test_breaks, metrics_listen=args.metrics_listen,
                        on_open_progress=opened)
    except InvalidConfigError as exc:
        opening.close()
        print(f"seglog serve: {exc}", file=sys.stderr)
        return 2

    # SIGUSR1 writes every thread's Python stack to stderr: how an operator (or `seglog
    # cluster`, before it SIGKILLs a broker that did not stop) sees where a stuck broker is
    # (the JVM's SIGQUIT thread dump, for Python). A Python-level handler, so the dump runs
    # on the main thread holding the GIL: faulthandler.register's dump runs inside the C
    # signal handler and reads other threads' frames while they may be changing them, which
    # crashed the broker now and then (a thread starting or importing at that moment). The
    # handler runs at the main thread's next bytecode, which a blocked event loop still
    # reaches: a loop stuck in Python code, or in a system call (which returns EINTR).
    try:
        stderr_fd = sys.stderr.fileno()
        signal.signal(signal.SIGUSR1, lambda _signum, _frame: faulthandler.dump_traceback(
            stderr_fd, all_threads=True))
    except (AttributeError, ValueError, io.UnsupportedOperation):
        pass  # stderr is not a file (an embedding caller replaced it), or not the main thread

    async def run() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        try:
            await broker.serve()
        finally:
            opening.close()
        log.info("seglog serve listening on %s (data dir %s, %d topics)", broker.bootstrap,
                 broker.data_dir, len(broker.store.topics()))
        for name, (host, port), (_name, protocol, adv_host, adv_port) in zip(
                broker.listener_names, broker.server.bound_addresses.values(),
                broker.state.endpoints):
            log.info("seglog serve listener %s (%s) on %s:%d, advertised as %s:%d", name,
                     protocol, host, port, adv_host, adv_port)
        if broker.metrics_address is not None:
            log.info("seglog serve metrics on http://%s:%d/metrics", *broker.metrics_address)
        await stop.wait()
        log.info("seglog serve shutting down")
        closing = asyncio.ensure_future(broker.aclose())
        done, _ = await asyncio.wait({closing}, timeout=SERVE_SHUTDOWN_REPORT_AFTER_S)
        if not done:
            # Every step of the shutdown is bounded; one that is not shows up here, with
            # where each task waits, instead of as a broker that just never exits.
            log.warning("seglog serve: shutdown still running after %.0f s; tasks:\n%s",
                        SERVE_SHUTDOWN_REPORT_AFTER_S, stacks.current_task_stacks())
        await closing
        log.info("seglog serve stopped cleanly")

    try:
        asyncio.run(run())
    except (SeglogError, OSError) as exc:
        print(f"seglog serve: {exc}", file=sys.stderr)
        return 1
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench.report import write_report
    from .bench.runner import Config, run_bench

    config = Config(
        mode=args.mode or "standard",
        only=args.only or PART_ORDER,
        record_bytes=args.record_bytes,
        records=args.records,
        runs=args.runs,
        dir_path=args.dir_path,
        out_dir=args.out_dir,
        json_stdout=args.json_stdout,
        charts=args.charts,
        progress=args.progress and not args.quiet,
    )

    def show(part) -> None:
        if not config.json_stdout:
            print(part.to_text(), end="\n\n", flush=True)

    if not config.json_stdout:
        print(f"seglog bench ({config.mode}): parts {', '.join(config.only)}; "
              f"{config.record_bytes}-byte records\n", flush=True)
    run = run_bench(config, on_part=show)
    written = write_report(run, config.out_dir, charts=config.charts)
    if config.json_stdout:
        with open(written["json"], encoding="utf-8") as f:
            json.dump(json.load(f), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        charts = sum(1 for k in written if k.startswith("chart:"))
        print(f"wrote {written['json']}, {written['md']}"
              + (f" and {charts} charts" if charts else "")
              + f" in {run.elapsed_s:.1f} s")
    for part in run.parts:
        if part.status == "error":
            print(f"seglog bench: part {part.name} failed: {part.reason.splitlines()[0]}",
                  file=sys.stderr)
    return 1 if run.failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
