"""A work queue on one partition: records acknowledged per second (issue 25).

Not a test. Runs the ``share`` part of ``seglog bench`` on its own (the same code:
:mod:`seglog.bench.share`) and prints its tables as Markdown, ready for bench/RESULTS.md:
seglog's embedded ShareConsumer with 1, 4 and 16 worker threads on one partition, a consumer
group on the same data, persist-queue's SQLiteAckQueue and a hand-rolled sqlite3 queue.

    PYTHONPATH=src python bench/bench_share.py [--records 100000] [--runs 3] [--dir /tmp]

``seglog bench --only share`` runs the same part inside the suite.
"""

from __future__ import annotations

import argparse
import platform
import os
import sys

from seglog.bench.progress import Progress
from seglog.bench.runner import PROFILES, BenchContext, Config, make_workdir
from seglog.bench import share


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the part, print the Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None,
                        help="records per run for every queue (default: the standard "
                             "profile's, 100,000 seglog / 5,000 sqlite-backed)")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--dir", default=None, help="where the data files go (default: tmp)")
    args = parser.parse_args(argv)
    profile = PROFILES["standard"]
    profile = type(profile)(**{**profile.__dict__, "runs": args.runs})
    config = Config(mode="standard", only=("share",), records=args.records,
                    dir_path=args.dir, progress=sys.stderr.isatty())
    workdir, warning = make_workdir(args.dir)
    if warning:
        print(warning, file=sys.stderr)
    try:
        ctx = BenchContext(config, profile, workdir, Progress(enabled=config.progress))
        result = share.run(ctx)
    finally:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, {platform.platform()}\n")
    print(result.to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
