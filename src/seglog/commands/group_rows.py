"""What ``seglog groups``' two backends (:mod:`.groups_local`, :mod:`.groups_remote`) share
with the command (:mod:`.groups`): its error type and the per-partition offsets rows of
``groups describe``."""

from __future__ import annotations

from typing import Any, Mapping

from .target import EXIT_ERROR

__all__ = ["GroupsError", "offset_rows"]


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
