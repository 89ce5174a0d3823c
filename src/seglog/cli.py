"""The ``seglog`` command line (``seglog ...`` or ``python -m seglog ...``).

Subcommands:

* ``seglog bench``: measure sequential vs random I/O, seglog's native core vs its pure twin,
  seglog vs the logs Python users reach for today, and this machine's limits; print one table
  per part and write ``bench-results/results.json``, ``results.md`` and PNG charts. See
  :mod:`seglog.bench`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .bench import PART_ORDER, PART_TITLES


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``seglog`` command."""
    parser = argparse.ArgumentParser(
        prog="seglog", description="seglog: Apache Kafka's partition log for Python.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parts_help = "; ".join(f"{name}: {PART_TITLES[name]}" for name in PART_ORDER)
    bench = sub.add_parser(
        "bench", help="benchmark sequential vs random I/O, native vs pure, seglog vs peers",
        description="Run the benchmark suite and write bench-results/. Parts: " + parts_help,
    )
    mode = bench.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="small sizes, well under a minute (the CI smoke run)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="full sizes (1 M records, 1 GiB transfers), under 15 minutes")
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
                       help="no progress line on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``seglog`` console script; returns the process exit code.

    Exit codes: 0 success, 1 a bench part failed with an error, 2 bad usage.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "bench":
        return _bench(args)
    parser.print_help()
    return 2


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
        progress=args.progress,
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
