"""``seglog groups``: list, describe (members, committed offsets, lag), reset offsets, delete
offsets and delete consumer groups, share groups and streams groups, as Kafka's
``kafka-consumer-groups``, ``kafka-share-groups`` and ``kafka-streams-groups`` do, on a data
directory or against any Kafka-protocol broker.

Subcommands::

    seglog groups list [--type classic|consumer|share|streams] [--state S]
    seglog groups describe GROUP ...
    seglog groups reset-offsets GROUP (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO8601 | --shift-by N)
        [--dry-run (default) | --execute]
    seglog groups delete-offsets GROUP --topic T ...
    seglog groups delete GROUP ...

Against a broker (``--bootstrap-server``) the consumer groups go through librdkafka's
AdminClient (describe_consumer_groups, list_consumer_group_offsets, alter_consumer_group_offsets,
delete_consumer_groups, list_offsets), and what it lacks through :mod:`seglog.commands.wire`:
ListGroups v5 to every broker (type and state of every group, share and streams groups too),
OffsetDelete, and the share-group APIs (ShareGroupDescribe, DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets), and StreamsGroupDescribe for a streams
group (KIP-1071; its offsets are a consumer group's, as Kafka's Admin client treats them). On
a data directory (``--data-dir``) the groups are the Store's (:meth:`seglog.Store.groups`):
the committed offsets kept in ``__consumer_offsets``; no member is live when no broker serves the directory, so a group is
``Empty`` there and a consumer group has type ``classic``. A data directory's share groups
(their state in ``__share_group_state``) are listed and described; changing them is left to
a broker (:mod:`.groups_local`); its streams groups (their records in ``__consumer_offsets``)
are ``Empty`` there, described, reset, their offsets deleted and deleted.

``--output json`` shapes (one document on stdout):

* ``list``: ``{"groups": [{"group", "type", "state", "protocol_type"}]}``;
* ``describe``: ``{"groups": [{"group", "type", "state", "coordinator": {"id", "host",
  "port"} | null, "assignor", "members": [{"member_id", "client_id", "host",
  "partitions": [{"topic", "partition"}]}], "offsets": [{"topic", "partition",
  "committed_offset", "log_end_offset", "lag", "member_id", "client_id", "host"}]}]}``
  (a share group's offsets rows have ``start_offset``, ``leader_epoch`` and ``lag``;
  an offset or lag that is not known is null; a streams group also has ``group_epoch``,
  ``target_assignment_epoch``, ``topology_epoch``, ``subtopologies`` [{``subtopology_id``,
  ``source_topics``, ``repartition_source_topics``, ``repartition_sink_topics``,
  ``state_changelog_topics``}], per member ``process_id``, ``member_epoch``, ``is_classic``,
  ``tasks`` and ``target_tasks`` (``{"active"|"standby"|"warmup": {subtopology:
  [partition]}}``) and ``partitions`` (the source topics' partitions of its active tasks), per
  offsets row ``leader_epoch``; its rows are the committed offsets of the source and
  repartition source topics and the partitions of active tasks, a partition without a commit
  lagging by end - start, as kafka-streams-groups computes it);
* ``reset-offsets``: ``{"group", "executed": bool, "offsets": [{"topic", "partition",
  "previous_offset", "new_offset"}]}``;
* ``delete-offsets``: ``{"group", "partitions": [{"topic", "partition", "error"}]}``;
* ``delete``: ``{"groups": [{"group", "error"}]}`` (``error`` null on success; with
  ``--delete-all-internal-topics`` each also has ``internal_topics``, the topics deleted).

Exit codes (:mod:`seglog.commands.target`): 0 done; 1 refused (a group with members, a
broker or store error); 2 usage; 3 a group or topic that does not exist.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from typing import Any, Iterable, Mapping

from ..errors import InvalidConfigError, SeglogError
from .group_rows import GroupsError
from .target import (EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, Target,
                     add_target_options, kafka_error_text, target_from_args)

__all__ = ["add_parser", "main", "parse_datetime_ms", "streams_internal_topics"]

_TYPES = ("classic", "consumer", "share", "streams")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``seglog groups`` and its subcommands on ``sub``."""
    raw = argparse.RawDescriptionHelpFormatter
    parser: argparse.ArgumentParser = sub.add_parser(
        "groups", help="list, describe, reset offsets of and delete consumer, share and streams "
                       "groups",
        description="Consumer groups, share groups and streams groups, as "
                    "kafka-consumer-groups, kafka-share-groups and kafka-streams-groups show "
                    "them, on a data directory or a broker.",
        formatter_class=raw,
        epilog="example:\n  seglog groups describe my-group -b 127.0.0.1:9092")
    parser.set_defaults(run=main, groups_command=None)
    commands = parser.add_subparsers(dest="groups_command", metavar="COMMAND")

    p = commands.add_parser("list", help="list the groups", formatter_class=raw,
                            description="List the groups with their type and state.",
                            epilog="example:\n  seglog groups list -b 127.0.0.1:9092 "
                                   "--type share")
    p.add_argument("--type", choices=_TYPES, action="append", dest="types",
                   help="only groups of this type (repeatable)")
    p.add_argument("--state", action="append", dest="states", metavar="STATE",
                   help="only groups in this state (Stable, Empty, ...; repeatable, any case)")
    add_target_options(p)

    p = commands.add_parser(
        "describe", help="members, committed offsets and lag of groups", formatter_class=raw,
        description="Type, state, coordinator, assignor, members with their partitions, and "
                    "per partition the committed offset, log end offset and lag "
                    "(share groups: start offset and lag; streams groups: members with their "
                    "tasks, offsets of the source topics, as kafka-streams-groups).",
        epilog="example:\n  seglog groups describe clicks-reader --data-dir data")
    p.add_argument("groups", nargs="+", metavar="GROUP", help="the group ids to describe")
    add_target_options(p)

    p = commands.add_parser(
        "reset-offsets", help="set a group's committed offsets (dry run unless --execute)",
        formatter_class=raw,
        description="Compute new committed offsets for an inactive group and print them; "
                    "--execute commits them. Refused while the group has members.",
        epilog="example:\n  seglog groups reset-offsets clicks-reader --topic clicks "
               "--to-earliest --execute -b 127.0.0.1:9092")
    p.add_argument("group", metavar="GROUP", help="the group whose offsets to reset")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", dest="topics", metavar="T[:P,P]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every topic the group has committed offsets for (a streams "
                            "group: its input topics, as --all-input-topics)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-offset", type=int, metavar="N",
                     help="offset N (kept within the log's bounds)")
    how.add_argument("--to-datetime", metavar="ISO8601",
                     help="the first offset at or after a time (2026-12-05T12:00:00Z; "
                          "no zone: UTC)")
    how.add_argument("--shift-by", type=int, metavar="N",
                     help="the committed offset plus N (negative: back)")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only print (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_target_options(p)

    p = commands.add_parser(
        "delete-offsets", help="delete a group's committed offsets of topics",
        formatter_class=raw,
        description="Delete the committed offsets of topics (a topic the group's members "
                    "subscribe to is refused, as Kafka refuses it).",
        epilog="example:\n  seglog groups delete-offsets clicks-reader --topic clicks "
               "-b 127.0.0.1:9092")
    p.add_argument("group", metavar="GROUP", help="the group whose offsets to delete")
    p.add_argument("--topic", action="append", dest="topics", required=True, metavar="T[:P,P]",
                   help="a topic, or some of its partitions (repeatable)")
    add_target_options(p)

    p = commands.add_parser(
        "delete", help="delete groups (refused while they have members)", formatter_class=raw,
        description="Delete groups and their committed offsets; a group with members is "
                    "refused (NON_EMPTY_GROUP).",
        epilog="example:\n  seglog groups delete old-reader --data-dir data")
    p.add_argument("groups", nargs="+", metavar="GROUP", help="the group ids to delete")
    p.add_argument("--delete-all-internal-topics", action="store_true",
                   help="a streams group: delete its internal topics too (the repartition "
                        "and changelog topics of its topology named GROUP-...-repartition "
                        "or -changelog), as kafka-streams-groups --delete-all-internal-topics")
    add_target_options(p)
    return parser


def main(args: argparse.Namespace) -> int:
    """Run ``seglog groups``; returns the exit code."""
    if args.groups_command is None:
        print("seglog groups: a command is required (list, describe, reset-offsets, "
              "delete-offsets, delete); see seglog groups --help", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = target_from_args(args)
        backend = _open_backend(target, writes=args.groups_command not in ("list", "describe"))
        try:
            return _COMMANDS[args.groups_command](backend, args, target)
        finally:
            backend.close()
    except GroupsError as exc:
        print(f"seglog groups: {exc}", file=sys.stderr)
        return exc.code
    except (InvalidConfigError, SeglogError, OSError) as exc:
        print(f"seglog groups: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - librdkafka's KafkaException and its kin
        if type(exc).__name__ != "KafkaException":
            raise
        print(f"seglog groups: {kafka_error_text(exc)}", file=sys.stderr)
        return EXIT_ERROR


def _open_backend(target: Target, *, writes: bool) -> Any:
    if target.local:
        from .groups_local import LocalGroups
        return LocalGroups(str(target.data_dir), writes=writes)
    from .groups_remote import RemoteGroups
    return RemoteGroups(target.client_config)


# -- list ---------------------------------------------------------------------------------

def _list(backend: Any, args: argparse.Namespace, target: Target) -> int:
    types = {t.lower() for t in args.types or ()}
    states = {s.lower() for s in args.states or ()}
    groups = [g for g in backend.list_groups(sorted(types), sorted(states))
              if (not types or g["type"] in types)
              and (not states or g["state"].lower() in states)]
    groups.sort(key=lambda g: g["group"])
    if target.json:
        _print_json({"groups": groups})
    else:
        _print_table(["GROUP", "TYPE", "STATE"],
                     [[g["group"], g["type"], g["state"]] for g in groups])
    return EXIT_OK


# -- describe -----------------------------------------------------------------------------

def _describe(backend: Any, args: argparse.Namespace, target: Target) -> int:
    described = []
    missing = []
    for group in args.groups:
        description = backend.describe(group)
        if description is None:
            missing.append(group)
            print(f"seglog groups: group {group!r} does not exist", file=sys.stderr)
            continue
        described.append(description)
    if target.json:
        _print_json({"groups": described})
    else:
        for n, d in enumerate(described):
            if n:
                print()
            _print_description(d)
    return EXIT_PROBLEMS if missing else EXIT_OK


def _print_description(d: Mapping[str, Any]) -> None:
    coordinator = d["coordinator"]
    where = "-" if coordinator is None else \
        f"{coordinator['host']}:{coordinator['port']} (id {coordinator['id']})"
    print(f"GROUP {d['group']}  TYPE {d['type']}  STATE {d['state']}  COORDINATOR {where}  "
          f"ASSIGNOR {d['assignor'] or '-'}  MEMBERS {len(d['members'])}")
    if d["members"] and d["type"] == "streams":
        print()
        # kafka-streams-groups --describe --members: the tasks of each member
        _print_table(["MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"],
                     [[m["member_id"], m["process_id"], m["client_id"],
                       _tasks_text(m["tasks"]) or "-"] for m in d["members"]])
    elif d["members"]:
        print()
        _print_table(["CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                     [[m["member_id"], m["host"], m["client_id"], len(m["partitions"]),
                       _assignment_text(m["partitions"])] for m in d["members"]])
    print()
    if d["type"] == "streams":
        _print_streams_offsets(d)
        return
    if d["type"] == "share":
        # kafka-share-groups --describe's columns (its --verbose adds LEADER-EPOCH; the JSON
        # output has it)
        _print_table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                     [[d["group"], r["topic"], r["partition"], _dash(r["start_offset"]),
                       _dash(r["lag"])] for r in d["offsets"]])
        return
    _print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID"],
                 [[d["group"], r["topic"], r["partition"], _dash(r["committed_offset"]),
                   _dash(r["log_end_offset"]), _dash(r["lag"]), _dash(r["member_id"]),
                   _dash(r["host"]), _dash(r["client_id"])] for r in d["offsets"]])


def _print_streams_offsets(d: Mapping[str, Any]) -> None:
    # kafka-streams-groups --describe --verbose's offsets columns, and the member owning
    # the partition (an active task of it)
    _print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH",
                  "LOG-END-OFFSET", "OFFSET-LAG", "MEMBER"],
                 [[d["group"], r["topic"], r["partition"], _dash(r["committed_offset"]),
                   _dash(r["leader_epoch"]), _dash(r["log_end_offset"]), _dash(r["lag"]),
                   _dash(r["member_id"])] for r in d["offsets"]])


def _tasks_text(tasks: Mapping[str, Mapping[str, list[int]]]) -> str:
    """A member's tasks as kafka-streams-groups prints them:
    ``ACTIVE: 0:[0,1]; 1:[0]; STANDBY: ...``."""
    out = []
    for kind in ("active", "standby", "warmup"):
        if tasks[kind]:
            out.append(f"{kind.upper()}: " + " ".join(
                f"{s}:[{','.join(str(p) for p in ps)}];" for s, ps in sorted(tasks[kind].items())))
    return " ".join(out)


def _assignment_text(partitions: list[dict[str, Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for p in partitions:
        by_topic.setdefault(p["topic"], []).append(p["partition"])
    return ",".join(f"{t}({','.join(str(n) for n in sorted(ps))})"
                    for t, ps in sorted(by_topic.items())) or "-"


# -- reset-offsets ------------------------------------------------------------------------

def _reset(backend: Any, args: argparse.Namespace, target: Target) -> int:
    group = args.group
    info = backend.group_info(group)
    if info is None:
        raise GroupsError(f"group {group!r} does not exist", EXIT_PROBLEMS)
    kind, state, members = info
    if members or state.lower() not in ("empty", "dead"):
        raise GroupsError(f"assignments can only be reset if the group {group!r} is inactive, "
                          f"but the current state is {state}")
    committed = backend.committed(group, kind)
    if args.all_topics and kind == "streams":
        # kafka-streams-groups --all-input-topics: the topology's source topics (not its
        # repartition topics)
        inputs = backend.streams_input_topics(group)
        partitions = sorted(tp for tp in committed if tp[0] in inputs)
    elif args.all_topics:
        partitions = sorted(committed)
    else:
        partitions = _partitions_of(backend, args.topics)
        if kind == "streams" and any(tp not in committed for tp in partitions):
            # as kafka-streams-groups refuses a topic the group has no offsets of
            raise GroupsError(f"one or more topics are not part of the group {group!r}",
                              EXIT_PROBLEMS)
    earliest = backend.earliest(partitions)
    latest = backend.latest(partitions)
    new: dict[tuple[str, int], int] = {}
    if args.to_datetime is not None:
        found = backend.offsets_for_time(partitions, parse_datetime_ms(args.to_datetime))
    for tp in partitions:
        low, high = earliest[tp], latest[tp]
        if args.to_earliest:
            value = low
        elif args.to_latest:
            value = high
        elif args.to_offset is not None:
            value = args.to_offset
        elif args.to_datetime is not None:
            got = found.get(tp)
            value = high if got is None or got < 0 else got
        else:
            if tp not in committed:
                raise GroupsError(f"group {group!r} has no committed offset for "
                                  f"{tp[0]}-{tp[1]} to shift")
            value = committed[tp] + args.shift_by
        new[tp] = min(max(value, low), high)
    if args.execute:
        backend.alter(group, kind, new)
    rows = [{"topic": tp[0], "partition": tp[1], "previous_offset": committed.get(tp),
             "new_offset": offset} for tp, offset in sorted(new.items())]
    if target.json:
        _print_json({"group": group, "executed": bool(args.execute), "offsets": rows})
    else:
        _print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                     [[group, r["topic"], r["partition"], r["new_offset"]] for r in rows])
        if not args.execute:
            print("(dry run: nothing was changed; --execute commits these offsets)",
                  file=sys.stderr)
    return EXIT_OK


def parse_datetime_ms(text: str) -> int:
    """An ISO 8601 date-time (``2026-12-05T12:00:00``, ``...Z``, ``...+01:00``,
    ``...T12:00:00.123``) as ms since the epoch; without a zone it is UTC."""
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise GroupsError(f"--to-datetime {text!r} is not an ISO 8601 date-time",
                          EXIT_USAGE) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


def _partitions_of(backend: Any, specs: Iterable[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for spec in specs:
        topic, _, numbers = spec.partition(":")
        existing = backend.partitions(topic)
        if existing is None:
            raise GroupsError(f"topic {topic!r} does not exist", EXIT_PROBLEMS)
        if numbers:
            try:
                wanted = [int(n) for n in numbers.split(",") if n.strip()]
            except ValueError:
                raise GroupsError(f"--topic {spec!r}: partitions are numbers (T:0,1)",
                                  EXIT_USAGE) from None
            absent = [n for n in wanted if n not in existing]
            if absent:
                raise GroupsError(f"topic {topic!r} has no partition {absent[0]}",
                                  EXIT_PROBLEMS)
        else:
            wanted = list(existing)
        out.extend((topic, n) for n in sorted(wanted))
    return sorted(set(out))


# -- delete-offsets and delete --------------------------------------------------------------

def _delete_offsets(backend: Any, args: argparse.Namespace, target: Target) -> int:
    group = args.group
    info = backend.group_info(group)
    if info is None:
        raise GroupsError(f"group {group!r} does not exist", EXIT_PROBLEMS)
    kind = info[0]
    partitions: list[tuple[str, int]] = []
    for spec in args.topics:
        topic, _, numbers = spec.partition(":")
        if numbers:
            partitions.extend(_partitions_of(backend, [spec]))
        else:
            known = backend.partitions(topic)
            if known is None:
                raise GroupsError(f"topic {topic!r} does not exist", EXIT_PROBLEMS)
            partitions.extend((topic, p) for p in known)
    errors = backend.delete_offsets(group, kind, sorted(set(partitions)))
    rows = [{"topic": tp[0], "partition": tp[1], "error": err}
            for tp, err in sorted(errors.items())]
    if target.json:
        _print_json({"group": group, "partitions": rows})
    else:
        _print_table(["TOPIC", "PARTITION", "STATUS"],
                     [[r["topic"], r["partition"], r["error"] or "Successful"] for r in rows])
    return EXIT_ERROR if any(r["error"] for r in rows) else EXIT_OK


def _delete(backend: Any, args: argparse.Namespace, target: Target) -> int:
    rows = []
    code = EXIT_OK
    for group in args.groups:
        internal: list[str] = []
        if args.delete_all_internal_topics:
            # read before the group goes: its topology names them
            info = backend.group_info(group)
            if info is not None and info[0] == "streams":
                internal = streams_internal_topics(group, backend.describe(group))
        error = backend.delete(group)
        row: dict[str, Any] = {"group": group, "error": error}
        if args.delete_all_internal_topics:
            row["internal_topics"] = internal if error is None else []
            if error is None and internal:
                backend.delete_topics(internal)
        rows.append(row)
        if error is not None:
            code = max(code, EXIT_PROBLEMS if "GROUP_ID_NOT_FOUND" in error else EXIT_ERROR)
    if target.json:
        _print_json({"groups": rows})
    else:
        for r in rows:
            if r["error"] is None:
                print(f"Deletion of group {r['group']!r} was successful.")
                if r.get("internal_topics"):
                    print(f"Deletion of its internal topics ({', '.join(r['internal_topics'])})"
                          " was successful.")
            else:
                print(f"seglog groups: deletion of group {r['group']!r} failed: {r['error']}",
                      file=sys.stderr)
    return code


def streams_internal_topics(group: str, description: Mapping[str, Any] | None) -> list[str]:
    """The internal topics of a streams group kafka-streams-groups --delete-all-internal-topics
    deletes: its topology's repartition source and changelog topics that are not source
    topics and are named ``GROUP-...`` with an internal topic's suffix."""
    if description is None:
        return []
    sources = {t for s in description["subtopologies"] for t in s["source_topics"]}
    named = {t for s in description["subtopologies"]
             for t in (*s["repartition_source_topics"], *s["state_changelog_topics"])}
    return sorted(t for t in named - sources
                  if t.startswith(group + "-") and _INTERNAL_TOPIC.fullmatch(t))


#: Kafka Streams' internal topic names (StreamsGroupCommand.matchesInternalTopicFormat).
_INTERNAL_TOPIC = re.compile(
    r".+(-changelog|-repartition|-subscription-registration-topic|-subscription-response-topic)"
    r"|.+-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)-\d+-topic")


_COMMANDS = {"list": _list, "describe": _describe, "reset-offsets": _reset,
             "delete-offsets": _delete_offsets, "delete": _delete}


# -- output -------------------------------------------------------------------------------

def _dash(value: Any) -> Any:
    return "-" if value is None else value


def _print_json(document: Any) -> None:
    print(json.dumps(document, sort_keys=True))


def _print_table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    sys.stdout.flush()

