"""What ``seglog groups``' two backends (:mod:`.groups_local`, :mod:`.groups_remote`) share
with the command (:mod:`.groups`): its error type and the per-partition offsets rows of
``groups describe`` (a streams group's as ``kafka-streams-groups --describe`` computes
them)."""

from __future__ import annotations

from typing import Any, Mapping

from .target import EXIT_ERROR

__all__ = ["GroupsError", "add_task_partitions", "offset_rows", "streams_offset_rows",
           "streams_source_topics"]


class GroupsError(Exception):
    """A failure the command reports on stderr with its exit ``code``."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


def offset_rows(group: Mapping[str, Any], committed: Mapping[tuple[str, int], int],
                log_end: Mapping[tuple[str, int], int | None]) -> list[dict[str, Any]]:
    """Per partition of ``committed`` or of a member's assignment: committed offset, log end
    offset, lag and the member that owns it (as kafka-consumer-groups --describe lists)."""
    owner: dict[tuple[str, int], Mapping[str, Any]] = {}
    for member in group["members"]:
        for p in member["partitions"]:
            owner[(p["topic"], p["partition"])] = member
    rows = []
    for tp in sorted(set(committed) | set(owner)):
        offset = committed.get(tp)
        end = log_end.get(tp)
        member = owner.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "committed_offset": offset,
                     "log_end_offset": end,
                     "lag": None if offset is None or end is None else max(0, end - offset),
                     "member_id": member["member_id"] if member else None,
                     "client_id": member["client_id"] if member else None,
                     "host": member["host"] if member else None})
    return rows


def streams_source_topics(group: Mapping[str, Any]) -> set[str]:
    """The topics a streams group reads (each subtopology's source and repartition source
    topics): the ones whose committed offsets kafka-streams-groups describes."""
    return {t for s in group["subtopologies"]
            for t in (*s["source_topics"], *s["repartition_source_topics"])}


def add_task_partitions(group: dict[str, Any]) -> None:
    """Give each member of a streams group description its ``partitions``: every source
    (and repartition source) topic's partition of each of its active tasks (a task
    ``subtopology_partition`` reads partition ``partition`` of every source topic of the
    subtopology; Kafka's ``StreamsGroupCommand.getTopicPartitions``)."""
    sources = {s["subtopology_id"]: [*s["source_topics"], *s["repartition_source_topics"]]
               for s in group["subtopologies"]}
    for member in group["members"]:
        member["partitions"] = sorted(
            ({"topic": topic, "partition": p}
             for subtopology, partitions in member["tasks"]["active"].items()
             for topic in sources.get(subtopology, ()) for p in partitions),
            key=lambda p: (p["topic"], p["partition"]))


def streams_offset_rows(group: Mapping[str, Any],
                        committed: Mapping[tuple[str, int], tuple[int, int | None]],
                        log_end: Mapping[tuple[str, int], int | None],
                        log_start: Mapping[tuple[str, int], int | None]
                        ) -> list[dict[str, Any]]:
    """A streams group's rows: per partition of ``committed`` (``(offset, leader epoch)``)
    or of a member's active tasks, the committed offset, its leader epoch, the log end
    offset, and the lag as kafka-streams-groups computes it (end - committed; without a
    commit end - log start), with the member that owns it."""
    plain = {tp: offset for tp, (offset, _) in committed.items()}
    rows = offset_rows(group, plain, log_end)
    for row in rows:
        tp = (row["topic"], row["partition"])
        row["leader_epoch"] = committed[tp][1] if tp in committed else None
        end, start = log_end.get(tp), log_start.get(tp)
        if row["committed_offset"] is None and end is not None and start is not None:
            row["lag"] = end - start
    return rows
