"""``seglog groups`` on a data directory: the Store's groups through its public API
(:meth:`seglog.Store.groups`, :meth:`~seglog.Store.group`, :meth:`~seglog.Store.offset_fetch`,
:meth:`~seglog.Store.delete_group`, :meth:`~seglog.Store.log`).

No broker serves the directory (the Store's lock says so), so no member is live: every group
is ``Empty``, of type ``classic`` (the committed offsets are what a data directory keeps of
a consumer group, whichever protocol committed them). The log end offset is the partition's
high watermark, what Kafka's ListOffsets for the latest offset answers.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import IllegalStateError, LogLockedError, SeglogError, UnknownTopicOrPartitionError
from .group_rows import GroupsError, offset_rows
from .target import EXIT_PROBLEMS

__all__ = ["LocalGroups"]


class LocalGroups:
    """The groups of the data directory ``path``. It is opened writable even to read
    (``writes`` False): the Store's lock is what tells a directory a broker serves, whose
    groups only the broker knows."""

    def __init__(self, path: str, *, writes: bool):
        from .. import Store

        if not os.path.isdir(path):
            raise GroupsError(f"--data-dir {path}: no such directory")
        try:
            self.store = Store(path)
        except LogLockedError as exc:
            raise GroupsError(f"--data-dir {path} is locked ({exc}): is a broker serving it? "
                              "use --bootstrap-server") from None

    def close(self) -> None:
        """Close the Store."""
        self.store.close()

    def list_groups(self, types: list[str], states: list[str]) -> list[dict[str, Any]]:
        """Every group with committed offsets (filters are applied by the caller)."""
        return [{"group": g, "type": "classic", "state": self.store.group(g).state,
                 "protocol_type": "consumer"} for g in self.store.groups()]

    def group_info(self, group: str) -> tuple[str, str, list[str]] | None:
        """``(type, state, member ids)``, None for a group the directory does not have."""
        if group not in self.store.groups():
            return None
        coordinator = self.store.group(group)
        return "classic", coordinator.state, coordinator.members()

    def committed(self, group: str, kind: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets."""
        return {(tp.topic, tp.partition): om.offset
                for tp, om in self.store.group(group).committed_offsets().items()}

    def describe(self, group: str) -> dict[str, Any] | None:
        """The description of ``groups describe`` (see :mod:`.groups`), None if absent."""
        info = self.group_info(group)
        if info is None:
            return None
        committed = self.committed(group, "classic")
        described: dict[str, Any] = {"group": group, "type": "classic", "state": info[1],
                                     "coordinator": None, "assignor": "", "members": []}
        described["offsets"] = offset_rows(described, committed, self.latest(
            sorted(committed), missing_ok=True))
        return described

    def partitions(self, topic: str) -> list[int] | None:
        """The partition ids of ``topic``, None when it does not exist."""
        if topic not in self.store.topics():
            return None
        return list(range(self.store.topic(topic).partitions))

    def _log(self, tp: tuple[str, int]) -> Any:
        try:
            return self.store.log(tp)
        except UnknownTopicOrPartitionError:
            raise GroupsError(f"{tp[0]}-{tp[1]} does not exist", EXIT_PROBLEMS) from None

    def earliest(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log start offsets."""
        return {tp: int(self._log(tp).start_offset) for tp in partitions}

    def latest(self, partitions: list[tuple[str, int]], *, missing_ok: bool = False
               ) -> dict[tuple[str, int], int | None]:
        """High watermarks (None for a partition gone, with ``missing_ok``)."""
        out: dict[tuple[str, int], int | None] = {}
        for tp in partitions:
            try:
                out[tp] = int(self.store.log(tp).high_watermark)
            except (UnknownTopicOrPartitionError, SeglogError):
                if not missing_ok:
                    raise GroupsError(f"{tp[0]}-{tp[1]} does not exist", EXIT_PROBLEMS) \
                        from None
                out[tp] = None
        return out

    def offsets_for_time(self, partitions: list[tuple[str, int]], timestamp_ms: int
                         ) -> dict[tuple[str, int], int | None]:
        """The first offset at or after ``timestamp_ms`` per partition (None: none)."""
        return {tp: self._log(tp).offset_for_timestamp(timestamp_ms) for tp in partitions}

    def alter(self, group: str, kind: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commit ``offsets`` for the (inactive) group."""
        self.store.group(group).alter_offsets(offsets)

    def delete_offsets(self, group: str, kind: str, partitions: list[tuple[str, int]]
                       ) -> dict[tuple[str, int], str | None]:
        """Delete the committed offsets of ``partitions``: ``{tp: error name or None}``."""
        try:
            self.store.group(group).delete_offsets(partitions)
        except IllegalStateError:
            return {tp: "GROUP_SUBSCRIBED_TO_TOPIC" for tp in partitions}
        return {tp: None for tp in partitions}

    def delete(self, group: str) -> str | None:
        """Delete the group: None, or Kafka's error name."""
        if group not in self.store.groups():
            return "GROUP_ID_NOT_FOUND"
        try:
            self.store.delete_group(group)
        except IllegalStateError:
            return "NON_EMPTY_GROUP"
        return None
