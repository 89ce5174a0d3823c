"""``seglog groups`` on a data directory: the Store's groups through its public API
(:meth:`seglog.Store.groups`, :meth:`~seglog.Store.group`, :meth:`~seglog.Store.offset_fetch`,
:meth:`~seglog.Store.delete_group`, :meth:`~seglog.Store.log`).

No broker serves the directory (the Store's lock says so), so no member is live: every group
is ``Empty``; a consumer group is of type ``classic`` (the committed offsets are what a data
directory keeps of a consumer group, whichever protocol committed them). The log end offset
is the partition's high watermark, what Kafka's ListOffsets for the latest offset answers.

Share groups are the share-partitions with state in ``__share_group_state``
(:meth:`seglog.Store.share_coordinator`'s ``share_partitions`` and ``read_state_summary``):
listed and described (start offset, lag as Kafka computes it: high watermark - start offset
- records already delivered past it); changing them is left to a broker (their group
metadata lives with the broker's group coordinator), so reset, delete-offsets and delete of
a share group are refused here.

Streams groups (KIP-1071) are the streams-group records in ``__consumer_offsets``
(:meth:`seglog.Store.offsets_records`, loaded into a
:class:`~seglog.coordinator.streams_group.StreamsGroupCoordinator`): their members' sessions
are over when no broker runs (they are removed, as a broker loading the group would once
their session timeouts pass), so a streams group is ``Empty`` here, with its topology; its
committed offsets are reset and deleted as a consumer group's, and deleting it tombstones its
records (:meth:`seglog.Store.write_offsets_records`) and its offsets.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import IllegalStateError, LogLockedError, SeglogError, UnknownTopicOrPartitionError
from .group_rows import (GroupsError, add_task_partitions, offset_rows, streams_offset_rows,
                         streams_source_topics)
from .target import EXIT_PROBLEMS

#: Kafka's share-group state topic (``__share_group_state``).
_SHARE_STATE_TOPIC = "__share_group_state"
_SHARE_READ_ONLY = ("share groups in a data directory are read here, not changed (their group "
                    "metadata is the broker's): use --bootstrap-server")

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
        self._streams_loaded: tuple[Any, dict[str, list[bytes]]] | None = None

    def close(self) -> None:
        """Close the Store."""
        self.store.close()

    def _streams(self) -> tuple[Any, dict[str, list[bytes]]]:
        """The streams groups of the directory: a coordinator loaded from their records in
        ``__consumer_offsets`` (members' sessions over), and each group's record keys (read
        once; :meth:`delete` forgets them)."""
        if self._streams_loaded is None:
            self._streams_loaded = self._load_streams()
        return self._streams_loaded

    def _load_streams(self) -> tuple[Any, dict[str, list[bytes]]]:
        from ..coordinator import streams_group as sg
        from ..coordinator import streams_group_records as rec
        from ..coordinator.offsets_schema import OFFSETS_TOPIC

        store = self.store

        def partition_count(topic: str) -> int | None:
            return store.topic(topic).partitions if topic in store.topics() else None
        coordinator = sg.StreamsGroupCoordinator(sg.StreamsGroupConfig(), partition_count,
                                                 store.topics)
        keys: dict[str, list[bytes]] = {}
        if OFFSETS_TOPIC not in store.topics():
            return coordinator, keys
        records = []
        for partition in range(store.topic(OFFSETS_TOPIC).partitions):
            for key, value in store.offsets_records(partition, rec.RECORD_TYPES).items():
                try:
                    decoded = rec.decode_key(key)
                    if decoded is None:
                        continue
                    records.append(rec.StreamsRecord(decoded[0], decoded[1], decoded[2],
                                                     rec.decode_value(decoded[0], value)))
                except SeglogError:
                    continue  # a record that does not parse: the broker skips it too
                if value is not None:
                    keys.setdefault(decoded[1], []).append(key)
        coordinator.load_records(records, 0)
        # no broker runs: every member's session is over
        coordinator.poll(2**62)
        return coordinator, keys

    def streams_input_topics(self, group: str) -> set[str]:
        """The source topics of a streams group's topology (its records)."""
        view = self._streams()[0].describe(group)
        if view is None or view.topology is None:
            return set()
        return {t for s in view.topology.subtopologies for t in s.source_topics}

    def _streams_description(self, group: str) -> dict[str, Any] | None:
        view = self._streams()[0].describe(group)
        if view is None:
            return None
        subtopologies = [] if view.topology is None else [
            {"subtopology_id": s.subtopology_id, "source_topics": sorted(s.source_topics),
             "repartition_source_topics": sorted(t.name for t in s.repartition_source_topics),
             "repartition_sink_topics": sorted(s.repartition_sink_topics),
             "state_changelog_topics": sorted(t.name for t in s.state_changelog_topics)}
            for s in view.topology.subtopologies]
        described: dict[str, Any] = {
            "group": group, "type": "streams", "state": view.state, "coordinator": None,
            "assignor": "", "group_epoch": view.group_epoch,
            "target_assignment_epoch": view.assignment_epoch,
            "topology_epoch": -1 if view.topology is None else view.topology.epoch,
            "subtopologies": sorted(subtopologies, key=lambda s: s["subtopology_id"]),
            "members": []}
        add_task_partitions(described)
        sources = streams_source_topics(described)
        committed = {(tp.topic, tp.partition): (om.offset, om.leader_epoch
                                                 if om.leader_epoch is not None
                                                 and om.leader_epoch >= 0 else None)
                     for tp, om in self.store.group(group).committed_offsets().items()
                     if tp.topic in sources}
        partitions = sorted(committed)
        described["offsets"] = streams_offset_rows(
            described, committed, self.latest(partitions, missing_ok=True),
            {tp: self.earliest([tp])[tp] for tp in partitions})
        return described

    def _share_partitions(self) -> dict[str, list[tuple[Any, int]]]:
        """``{share group: [(topic id, partition), ...]}`` with state in the directory."""
        if _SHARE_STATE_TOPIC not in self.store.topics():
            return {}
        out: dict[str, list[tuple[Any, int]]] = {}
        for group, topic_id, partition in self.store.share_coordinator().share_partitions():
            out.setdefault(group, []).append((topic_id, partition))
        return out

    def list_groups(self, types: list[str], states: list[str]) -> list[dict[str, Any]]:
        """Every group with committed offsets or share state (filters are applied by the
        caller)."""
        streams = self._streams()[0]
        groups = [{"group": g, "type": "classic", "state": self.store.group(g).state,
                   "protocol_type": "consumer"} for g in self.store.groups()
                  if not streams.has_group(g)]
        groups += [{"group": g, "type": "streams", "state": streams.state(g) or "Dead",
                    "protocol_type": "streams"} for g in streams.group_ids()]
        return groups + [{"group": g, "type": "share", "state": "Empty",
                          "protocol_type": "share"} for g in sorted(self._share_partitions())]

    def group_info(self, group: str) -> tuple[str, str, list[str]] | None:
        """``(type, state, member ids)``, None for a group the directory does not have."""
        streams = self._streams()[0]
        if streams.has_group(group):
            return "streams", streams.state(group) or "Dead", []
        if group not in self.store.groups():
            return ("share", "Empty", []) if group in self._share_partitions() else None
        coordinator = self.store.group(group)
        return "classic", coordinator.state, coordinator.members()

    def committed(self, group: str, kind: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (a share group's start offsets)."""
        if kind == "share":
            return {(r["topic"], r["partition"]): r["start_offset"]
                    for r in self._share_rows(group) if r["start_offset"] is not None}
        return {(tp.topic, tp.partition): om.offset
                for tp, om in self.store.group(group).committed_offsets().items()}

    def _share_rows(self, group: str) -> list[dict[str, Any]]:
        from ..storage.checkpoints import uuid_from_kafka_str

        # a Topic's id is Kafka's base64 text; the share state is keyed by the UUID
        names = {uuid_from_kafka_str(str(self.store.topic(t).topic_id)): t
                 for t in self.store.topics()}
        coordinator = self.store.share_coordinator()
        rows = []
        for topic_id, partition in self._share_partitions().get(group, []):
            topic = names.get(topic_id)
            if topic is None:
                continue  # the topic is gone; Kafka's describe skips it too
            summary = coordinator.read_state_summary(group, topic_id, partition)
            start = int(summary.start_offset)
            complete = int(summary.delivery_complete_count)
            end = self.latest([(topic, partition)], missing_ok=True)[(topic, partition)]
            known = start >= 0 and complete >= 0 and end is not None
            rows.append({"topic": topic, "partition": partition,
                         "start_offset": start if start >= 0 else None,
                         "leader_epoch": int(summary.leader_epoch)
                         if int(summary.leader_epoch) >= 0 else None,
                         "lag": end - start - complete if known and end is not None else None})
        return sorted(rows, key=lambda r: (r["topic"], r["partition"]))

    def describe(self, group: str) -> dict[str, Any] | None:
        """The description of ``groups describe`` (see :mod:`.groups`), None if absent."""
        info = self.group_info(group)
        if info is None:
            return None
        if info[0] == "streams":
            return self._streams_description(group)
        if info[0] == "share":
            return {"group": group, "type": "share", "state": "Empty", "coordinator": None,
                    "assignor": "", "members": [], "offsets": self._share_rows(group)}
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
        if kind == "share":
            raise GroupsError(_SHARE_READ_ONLY)
        self.store.group(group).alter_offsets(offsets)

    def delete_offsets(self, group: str, kind: str, partitions: list[tuple[str, int]]
                       ) -> dict[tuple[str, int], str | None]:
        """Delete the committed offsets of ``partitions``: ``{tp: error name or None}``."""
        if kind == "share":
            raise GroupsError(_SHARE_READ_ONLY)
        try:
            self.store.group(group).delete_offsets(partitions)
        except IllegalStateError:
            return {tp: "GROUP_SUBSCRIBED_TO_TOPIC" for tp in partitions}
        return {tp: None for tp in partitions}

    def delete_topics(self, topics: list[str]) -> None:
        """Delete ``topics`` from the store."""
        for topic in topics:
            self.store.delete_topic(topic)

    def delete(self, group: str) -> str | None:
        """Delete the group: None, or Kafka's error name (a streams group: its records
        tombstoned, then its committed offsets)."""
        streams, keys = self._streams()
        if streams.has_group(group):
            self.store.write_offsets_records(group, [(k, None) for k in keys.get(group, [])])
            self._streams_loaded = None
            if group in self.store.groups():
                self.store.delete_group(group)
            return None
        if group not in self.store.groups():
            if group in self._share_partitions():
                raise GroupsError(_SHARE_READ_ONLY)
            return "GROUP_ID_NOT_FOUND"
        try:
            self.store.delete_group(group)
        except IllegalStateError:
            return "NON_EMPTY_GROUP"
        return None
