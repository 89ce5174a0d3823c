"""``seglog cluster``: a ZooKeeper and N brokers on this machine, to try replication.

::

    seglog cluster up --brokers 3 --dir DIR     # prints the bootstrap servers
    seglog cluster status --dir DIR             # one line per broker, within a second
    seglog cluster kill 1 --dir DIR             # kill -9 broker 1 (also --signal STOP|CONT|TERM)
    seglog cluster start 1 --dir DIR            # start it again (same port, same data)
    seglog cluster down --dir DIR               # stop every broker, then ZooKeeper

``status`` prints the ZooKeeper, then per broker: ``broker ID HOST:PORT STATE pid=PID
alive=yes|no registered=yes|no controller=yes|no leaders=N under_replicated=N`` (``?`` for
what ZooKeeper did not answer within half a second), then the partitions' totals. ``up``,
``kill``, ``start`` and ``down`` say on stderr what they did (which broker, pid, signal);
``up`` prints the bootstrap servers on stdout and ``start`` the broker's address.

Every subcommand after ``up`` works from another shell: the cluster's processes and ports
are in ``DIR/cluster.json`` (:class:`seglog.cluster.local.LocalCluster`). Only processes that
file records, and that still are what it recorded, are ever signalled.

Exit codes: 0 success, 1 the cluster could not do it (ZooKeeper missing: the message says
``apt-get install zookeeper``; a broker did not start), 2 bad usage.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .local import LocalCluster

class Subcommands(Protocol):
    """What :func:`add_parser` needs of the ``seglog`` command's subcommands (the object
    ``ArgumentParser.add_subparsers`` returns)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """A new subcommand's parser."""


#: The cluster directory when ``--dir`` is not given.
DEFAULT_DIR = "./seglog-cluster"

_SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "STOP": signal.SIGSTOP,
            "CONT": signal.SIGCONT}
#: What each signal did to the broker, for ``kill``'s report.
_SIGNAL_EFFECTS = {"KILL": "killed (a crash); it is down",
                   "TERM": "stopped cleanly; it is down",
                   "STOP": "paused (seglog cluster kill {broker} --signal CONT resumes it)",
                   "CONT": "resumed"}


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "no"


def _count_or_unknown(value: int | None) -> str:
    return "?" if value is None else str(value)


def status_lines(cluster: LocalCluster) -> list[str]:
    """``seglog cluster status``'s lines for ``cluster`` (a
    :class:`~seglog.cluster.local.LocalCluster`): ZooKeeper, one line per broker, the
    partitions' totals (see the module docstring)."""
    view = cluster.zookeeper_view()
    if cluster.zookeeper_port or cluster.external_zookeeper:
        zk = cluster.zookeeper_connect + ("" if view is not None else " (not answering)")
    else:
        zk = "(not running)"
    lines = [f"zookeeper {zk}"]
    for row in cluster.status(view=view):
        lines.append(
            f"broker {row['broker_id']} {row['address']} {row['state']} "
            f"pid={row['pid'] or '-'} alive={_yes_no(row['alive'])} "
            f"registered={_yes_no(row['registered'])} "
            f"controller={_yes_no(row['controller'])} "
            f"leaders={_count_or_unknown(row['leaders'])} "
            f"under_replicated={_count_or_unknown(row['under_replicated'])}")
    if view is not None:
        offline = sum(p.leader < 0 for p in view.partitions)
        under = sum(len(p.isr) < len(p.replicas) for p in view.partitions)
        lines.append(f"partitions {len(view.partitions)} offline={offline} "
                     f"under_replicated={under}")
    return lines


def _config(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"must be 1..64: {text!r}")
    return value


def add_parser(sub: Subcommands) -> argparse.ArgumentParser:
    """Add the ``cluster`` subcommand (and its own subcommands) to ``seglog``'s parser
    (``sub``: what ``ArgumentParser.add_subparsers`` returned)."""
    cluster = sub.add_parser(
        "cluster", help="run a ZooKeeper and several brokers on loopback (try replication)",
        description="A local seglog cluster: ZooKeeper and N `seglog serve` brokers on "
                    "127.0.0.1, all under one directory (docs/cluster.md).")
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help, description=help)
        parser.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                            help=f"the cluster's directory (default {DEFAULT_DIR})")
        return parser

    up = action("up", "start ZooKeeper and the brokers; print the bootstrap servers")
    up.add_argument("--brokers", type=_count, default=3, metavar="N",
                    help="number of brokers, ids 0..N-1 (default 3)")
    up.add_argument("--base-port", type=int, metavar="PORT",
                    help="broker i listens on PORT+i (default: free ports)")
    up.add_argument("--zookeeper-port", type=int, metavar="PORT",
                    help="ZooKeeper's client port (default: a free port)")
    up.add_argument("--config", dest="configs", action="append", default=[], type=_config,
                    metavar="KEY=VALUE",
                    help="a Kafka broker config for every broker, e.g. "
                         "min.insync.replicas=2 (repeatable)")
    up.add_argument("--backend", choices=("native", "pure"),
                    help="the brokers' storage backend")
    up.add_argument("--timeout", type=float, default=60.0, metavar="S",
                    help="seconds to wait for every broker (default 60)")
    up.add_argument("--log-format", choices=("text", "json"), default="text",
                    help="the brokers' log files: text lines (default) or "
                         "JSON lines, as seglog serve --log-format")
    action("down", "stop every broker, then ZooKeeper (the data stays)")
    action("status", "one line per broker: address, pid, alive, controller, partitions led "
                     "and under-replicated (within a second)")
    kill = action("kill", "send a signal to one broker (default KILL: a crash)")
    kill.add_argument("broker", type=int, metavar="BROKER")
    kill.add_argument("--signal", choices=sorted(_SIGNALS), default="KILL",
                      help="KILL (default), TERM (clean stop), STOP (pause), CONT (resume)")
    start = action("start", "start one broker that is down (same port, same data)")
    start.add_argument("broker", type=int, metavar="BROKER")
    start.add_argument("--timeout", type=float, default=60.0, metavar="S",
                       help="seconds to wait for it (default 60)")
    return cluster


def main(args: argparse.Namespace) -> int:
    """Run ``seglog cluster ACTION``; the exit code (module docstring)."""
    from ..progress import progress
    from .local import LocalCluster, LocalClusterError
    from .zookeeper import ZooKeeperError

    command = getattr(args, "cluster_command", None)
    if command is None:
        print("seglog cluster: choose an action: up, down, status, kill, start",
              file=sys.stderr)
        return 2
    try:
        if command == "up":
            cluster = LocalCluster(args.dir, args.brokers, zookeeper_port=args.zookeeper_port,
                                   base_port=args.base_port, broker_configs=dict(args.configs),
                                   backend=args.backend, log_format=args.log_format)
            with progress("brokers ready", total=args.brokers, unit="brokers") as bar:
                cluster.up(timeout_s=args.timeout, on_progress=bar.update_to)
            print(f"seglog cluster: {args.brokers} brokers and ZooKeeper "
                  f"{cluster.zookeeper_connect} up in {cluster.dir}; "
                  f"{cluster.session_timeout_note()}; bootstrap servers:", file=sys.stderr)
            print(cluster.bootstrap_servers)
            return 0
        cluster = LocalCluster.attach(args.dir)
        if command == "down":
            cluster.down()
            print(f"seglog cluster: down ({cluster.dir})", file=sys.stderr)
        elif command == "status":
            print("\n".join(status_lines(cluster)))
            cluster.close_clients()
        elif command == "kill":
            pid = cluster.kill(args.broker, _SIGNALS[args.signal])
            effect = _SIGNAL_EFFECTS[args.signal].format(broker=args.broker)
            print(f"seglog cluster: sent SIG{args.signal} to broker {args.broker} (pid {pid}, "
                  f"{cluster.address(args.broker)}): {effect}", file=sys.stderr)
        elif command == "start":
            cluster.start(args.broker, timeout_s=args.timeout)
            cluster.close_clients()
            print(f"seglog cluster: started broker {args.broker} (pid "
                  f"{cluster.pid(args.broker)}) on {cluster.address(args.broker)}, data "
                  f"{cluster.brokers[args.broker].data_dir}; it answers and is registered in "
                  f"ZooKeeper", file=sys.stderr)
            print(cluster.address(args.broker))
        return 0
    except (LocalClusterError, ZooKeeperError, OSError) as exc:
        print(f"seglog cluster {command}: {exc}", file=sys.stderr)
        return 1
