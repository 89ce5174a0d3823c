"""``seglog recover``: with the broker stopped, truncate an offline partition (its files failed
to load) to its last valid offset, as Kafka's unclean recovery does
(:mod:`seglog.partition_recovery`; ``docs/server.md``, "Offline partitions")."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .errors import SeglogError

__all__ = ["add_parser", "main"]


def add_parser(sub: Any) -> None:
    """Add ``seglog recover`` to the ``seglog`` command's subparsers."""
    parser = sub.add_parser(
        "recover", help="truncate an offline partition to its last valid offset "
        "(the broker stopped)",
        description="Truncate partition TOPIC-PARTITION of a stopped broker's data directory "
        "to its last valid offset (Kafka's unclean recovery: every batch checked from the "
        "start; the first invalid one and everything after it cut); the next start serves it "
        "again. Records past that offset are lost; in a cluster the broker fetches them from "
        "the leader again.")
    parser.add_argument("--data-dir", metavar="DIR", required=True,
                        help="the broker's data directory (log.dirs)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, required=True)
    parser.add_argument("--backend", choices=("native", "pure"), default=None)


def main(args: argparse.Namespace) -> int:
    """Run ``seglog recover``: 0 once the partition is truncated (or loaded whole), 1 when
    the directory is open elsewhere, missing or cannot be recovered."""
    from .partition_recovery import recover_partition  # the storage, for this command only

    try:
        outcome = recover_partition(args.data_dir, args.topic, args.partition,
                                    backend=args.backend)
    except (SeglogError, OSError) as exc:
        print(f"seglog recover: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for path, before, after in outcome.cut_files:
        print(f"cut {path} from {before} to {after} bytes")
    for path in outcome.removed_files:
        print(f"removed {path}")
    promised = "none" if outcome.promised_end is None else outcome.promised_end
    print(f"{args.topic}-{args.partition}: ends at offset {outcome.end_offset} "
          f"(the checkpoints said {promised}); the next start serves it")
    return 0
