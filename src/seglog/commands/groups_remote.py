"""``seglog groups`` against a broker: librdkafka's AdminClient for consumer groups, and
:mod:`seglog.commands.wire` for what it lacks (ListGroups v5 with every group type,
OffsetDelete, the share-group APIs 77/90/91/92).

A group's type and state come from ListGroups, sent to every broker as Kafka's
``Admin.listGroups`` does; the type decides the path: ``share`` through the wire, the others
(classic, consumer) through the AdminClient. A ``streams`` group (KIP-1071) is described with
StreamsGroupDescribe (through the wire); its offsets are a consumer group's (OffsetFetch,
OffsetCommit, OffsetDelete, DeleteGroups through the AdminClient), as Kafka's Admin
``listStreamsGroupOffsets`` / ``alterStreamsGroupOffsets`` / ``deleteStreamsGroupOffsets`` /
``deleteStreamsGroups`` are its consumer-group calls.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from .. import error_codes as codes
from .group_rows import (GroupsError, add_task_partitions, offset_rows, streams_offset_rows,
                         streams_source_topics)
from .target import EXIT_PROBLEMS, kafka_error_text
from .wire import KafkaResponseError, WireClient, build

__all__ = ["RemoteGroups"]

LIST_GROUPS_KEY = 16
OFFSET_DELETE_KEY = 47
SHARE_GROUP_DESCRIBE_KEY = 77
DESCRIBE_SHARE_GROUP_OFFSETS_KEY = 90
ALTER_SHARE_GROUP_OFFSETS_KEY = 91
DELETE_SHARE_GROUP_OFFSETS_KEY = 92
STREAMS_GROUP_DESCRIBE_KEY = 89
#: How long an AdminClient call may take (s): librdkafka's default request timeout.
_TIMEOUT_S = 30.0
#: The pause before asking again after a retriable error (s).
_RETRY_BACKOFF_S = 0.1


def _error_name(code: int) -> str:
    try:
        return codes.name(code)
    except (KeyError, ValueError, LookupError):
        return f"UNKNOWN_ERROR_{code}"


class RemoteGroups:
    """The groups of the cluster reached with librdkafka's ``config``."""

    def __init__(self, config: Mapping[str, str]):
        self.config: dict[str, str | int | float | bool] = dict(config)
        self._admin: Any = None
        self.wire = WireClient(config)

    @property
    def admin(self) -> Any:
        """librdkafka's AdminClient, made on first use (every command asks the protocol
        client first, so an unreachable broker is one clear error, not librdkafka's
        reconnect log)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient(self.config)
        return self._admin

    def close(self) -> None:
        """Close the protocol client (the AdminClient closes when dropped)."""
        self.wire.close()

    # -- listing and type ------------------------------------------------------------------

    def list_groups(self, types: list[str], states: list[str]) -> list[dict[str, Any]]:
        """ListGroups to every broker, with the type and state filters."""
        metadata = self.wire.metadata([])
        out: dict[str, dict[str, Any]] = {}
        for node_id in sorted(metadata.brokers):
            def make(module: Any, version: int) -> Any:
                return build(module.ListGroupsRequest, states_filter=tuple(states),
                             types_filter=tuple(types))
            # A broker still loading its offsets partitions answers a retriable error
            # (COORDINATOR_LOAD_IN_PROGRESS): asked again, as Kafka's admin client does.
            deadline = time.monotonic() + _TIMEOUT_S
            while True:
                response = self.wire.send(LIST_GROUPS_KEY, make, node_id=node_id,
                                          min_version=3)
                if not (response.error_code and codes.is_retriable(int(response.error_code))
                        and time.monotonic() < deadline):
                    break
                time.sleep(_RETRY_BACKOFF_S)
            if response.error_code:
                raise KafkaResponseError(int(response.error_code), what="ListGroups")
            for g in response.groups:
                kind = (getattr(g, "group_type", "") or "classic").lower()
                out[g.group_id] = {"group": g.group_id, "type": kind,
                                   "state": g.group_state, "protocol_type": g.protocol_type}
        return list(out.values())

    def _listing(self, group: str) -> dict[str, Any] | None:
        for g in self.list_groups([], []):
            if g["group"] == group:
                return g
        return None

    def group_info(self, group: str) -> tuple[str, str, list[str]] | None:
        """``(type, state, member ids)``, None for a group the cluster does not know."""
        listing = self._listing(group)
        if listing is None:
            return None
        if listing["type"] in ("share", "streams"):
            described = self._share_describe(group) if listing["type"] == "share" \
                else self._streams_describe(group)
            members = [m["member_id"] for m in described["members"]]
        else:
            members = [m.member_id for m in self._admin_describe(group).members]
        return listing["type"], listing["state"], members

    # -- describe ---------------------------------------------------------------------------

    def _admin_describe(self, group: str) -> Any:
        future = self.admin.describe_consumer_groups([group], request_timeout=_TIMEOUT_S)[group]
        return future.result(_TIMEOUT_S)

    def describe(self, group: str) -> dict[str, Any] | None:
        """The description of ``groups describe`` (see :mod:`.groups`), None if absent."""
        listing = self._listing(group)
        if listing is None:
            return None
        if listing["type"] == "share":
            share = self._share_describe(group)
            share["offsets"] = self._share_offsets(group)
            return share
        if listing["type"] == "streams":
            streams = self._streams_describe(group)
            # kafka-streams-groups --describe: the committed offsets of the source (and
            # repartition source) topics, and every partition of an active task; a
            # partition without a commit lags by the whole log (end - start)
            sources = streams_source_topics(streams)
            by_source = {tp: o for tp, o in self._committed_with_epochs(group).items()
                         if tp[0] in sources}
            owned = {(p["topic"], p["partition"]) for m in streams["members"]
                     for p in m["partitions"]}
            partitions = sorted(set(by_source) | owned)
            ends = self.latest(partitions, missing_ok=True)
            starts = self._list_offsets_or_none(partitions)
            streams["offsets"] = streams_offset_rows(streams, by_source, ends, starts)
            return streams
        desc = self._admin_describe(group)
        coordinator = desc.coordinator
        members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                    "partitions": sorted(
                        ({"topic": tp.topic, "partition": tp.partition}
                         for tp in (m.assignment.topic_partitions if m.assignment else [])),
                        key=lambda p: (p["topic"], p["partition"]))}
                   for m in desc.members]
        described: dict[str, Any] = {
            "group": group, "type": listing["type"], "state": listing["state"],
            "coordinator": None if coordinator is None else {
                "id": coordinator.id, "host": coordinator.host, "port": coordinator.port},
            "assignor": desc.partition_assignor or "",
            "members": sorted(members, key=lambda m: m["member_id"])}
        committed = self.committed(group, listing["type"])
        owned = {(p["topic"], p["partition"]) for m in members for p in m["partitions"]}
        ends = self.latest(sorted(set(committed) | owned), missing_ok=True)
        described["offsets"] = offset_rows(described, committed, ends)
        return described

    def committed(self, group: str, kind: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (a share group's start offsets)."""
        if kind == "share":
            return {(r["topic"], r["partition"]): r["start_offset"]
                    for r in self._share_offsets(group) if r["start_offset"] is not None}
        from confluent_kafka import ConsumerGroupTopicPartitions

        future = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=_TIMEOUT_S)[group]
        result = future.result(_TIMEOUT_S)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                if tp.offset >= 0 and tp.error is None}

    def streams_input_topics(self, group: str) -> set[str]:
        """The source topics of a streams group's topology (StreamsGroupDescribe)."""
        return {t for s in self._streams_describe(group)["subtopologies"]
                for t in s["source_topics"]}

    def _committed_with_epochs(self, group: str
                               ) -> dict[tuple[str, int], tuple[int, int | None]]:
        """``{tp: (committed offset, leader epoch or None)}`` (OffsetFetch)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        future = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=_TIMEOUT_S)[group]
        result = future.result(_TIMEOUT_S)
        out: dict[tuple[str, int], tuple[int, int | None]] = {}
        for tp in result.topic_partitions:
            if tp.offset >= 0 and tp.error is None:
                epoch = getattr(tp, "leader_epoch", None)
                out[(tp.topic, tp.partition)] = (
                    tp.offset, epoch if epoch is not None and epoch >= 0 else None)
        return out

    def _list_offsets_or_none(self, partitions: list[tuple[str, int]]
                              ) -> dict[tuple[str, int], int | None]:
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.earliest(), missing_ok=True)

    def _streams_describe(self, group: str) -> dict[str, Any]:
        """StreamsGroupDescribe of ``group``: state, epochs, topology (subtopologies with
        their source topics), members with their tasks (and the source-topic partitions of
        their active tasks, as kafka-streams-groups maps them)."""
        node_id = self.wire.find_coordinator(group)

        def make(module: Any, version: int) -> Any:
            return build(module.StreamsGroupDescribeRequest, group_ids=(group,),
                         include_authorized_operations=False,
                         include_topology_description=False)
        response = self.wire.send(STREAMS_GROUP_DESCRIBE_KEY, make, node_id=node_id)
        g = response.groups[0]
        if g.error_code:
            raise KafkaResponseError(int(g.error_code), g.error_message,
                                     what=f"StreamsGroupDescribe {group}")
        broker = self.wire.metadata([]).brokers.get(node_id)
        subtopologies = [] if g.topology is None else [
            {"subtopology_id": s.subtopology_id,
             "source_topics": sorted(s.source_topics),
             "repartition_source_topics": sorted(t.name for t in s.repartition_source_topics),
             "repartition_sink_topics": sorted(s.repartition_sink_topics),
             "state_changelog_topics": sorted(t.name for t in s.state_changelog_topics)}
            for s in g.topology.subtopologies]

        def tasks(assignment: Any) -> dict[str, dict[str, list[int]]]:
            return {kind: {t.subtopology_id: sorted(int(p) for p in t.partitions)
                           for t in getattr(assignment, f"{kind}_tasks")}
                    for kind in ("active", "standby", "warmup")}
        members = [{"member_id": m.member_id, "client_id": m.client_id,
                    "host": m.client_host, "process_id": m.process_id,
                    "member_epoch": int(m.member_epoch), "is_classic": bool(m.is_classic),
                    "tasks": tasks(m.assignment), "target_tasks": tasks(m.target_assignment)}
                   for m in g.members]
        described: dict[str, Any] = {
            "group": group, "type": "streams", "state": g.group_state,
            "coordinator": {"id": node_id, "host": broker.host if broker else "",
                            "port": broker.port if broker else -1},
            "assignor": getattr(g, "assignor_name", None) or "",
            "group_epoch": int(g.group_epoch),
            "target_assignment_epoch": int(g.assignment_epoch),
            "topology_epoch": -1 if g.topology is None else int(g.topology.epoch),
            "subtopologies": sorted(subtopologies, key=lambda s: s["subtopology_id"]),
            "members": sorted(members, key=lambda m: m["member_id"])}
        add_task_partitions(described)
        return described

    def _share_describe(self, group: str) -> dict[str, Any]:
        node_id = self.wire.find_coordinator(group)

        def make(module: Any, version: int) -> Any:
            return build(module.ShareGroupDescribeRequest, group_ids=(group,))
        response = self.wire.send(SHARE_GROUP_DESCRIBE_KEY, make, node_id=node_id)
        g = response.groups[0]
        if g.error_code:
            raise KafkaResponseError(int(g.error_code), g.error_message,
                                     what=f"ShareGroupDescribe {group}")
        broker = self.wire.metadata([]).brokers.get(node_id)
        members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                    "partitions": sorted(
                        ({"topic": tp.topic_name, "partition": int(p)}
                         for tp in m.assignment.topic_partitions for p in tp.partitions),
                        key=lambda p: (p["topic"], p["partition"]))}
                   for m in g.members]
        return {"group": group, "type": "share", "state": g.group_state,
                "coordinator": {"id": node_id, "host": broker.host if broker else "",
                                "port": broker.port if broker else -1},
                "assignor": g.assignor_name,
                "members": sorted(members, key=lambda m: m["member_id"])}

    def _share_offsets(self, group: str) -> list[dict[str, Any]]:
        node_id = self.wire.find_coordinator(group)

        def make(module: Any, version: int) -> Any:
            return build(module.DescribeShareGroupOffsetsRequest, groups=(
                build(module.DescribeShareGroupOffsetsRequestGroup, group_id=group,
                      topics=None),))
        response = self.wire.send(DESCRIBE_SHARE_GROUP_OFFSETS_KEY, make, node_id=node_id)
        g = response.groups[0]
        if g.error_code:
            raise KafkaResponseError(int(g.error_code), g.error_message,
                                     what=f"DescribeShareGroupOffsets {group}")
        rows = []
        for t in g.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaResponseError(int(p.error_code), p.error_message,
                                             what=f"{t.topic_name}-{p.partition_index}")
                start = int(p.start_offset)
                lag = int(getattr(p, "lag", -1))
                rows.append({"topic": t.topic_name, "partition": int(p.partition_index),
                             "start_offset": start if start >= 0 else None,
                             "leader_epoch": int(p.leader_epoch)
                             if int(p.leader_epoch) >= 0 else None,
                             "lag": lag if lag >= 0 else None})
        return sorted(rows, key=lambda r: (r["topic"], r["partition"]))

    # -- log offsets --------------------------------------------------------------------------

    def partitions(self, topic: str) -> list[int] | None:
        """The partition ids of ``topic``, None when it does not exist."""
        metadata = self.wire.metadata([topic])
        entry = metadata.topics.get(topic)
        if entry is None or entry.error_code == codes.UNKNOWN_TOPIC_OR_PARTITION:
            return None
        if entry.error_code:
            raise KafkaResponseError(entry.error_code, what=f"Metadata {topic}")
        return sorted(entry.leaders)

    def _list_offsets(self, partitions: list[tuple[str, int]], spec: Any, *,
                      missing_ok: bool = False) -> dict[tuple[str, int], int | None]:
        from confluent_kafka import KafkaException, TopicPartition

        if not partitions:
            return {}
        futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions},
                                          request_timeout=_TIMEOUT_S)
        out: dict[tuple[str, int], int | None] = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result(_TIMEOUT_S).offset
            except KafkaException as exc:
                if not missing_ok:
                    raise GroupsError(f"{tp.topic}-{tp.partition}: {kafka_error_text(exc)}",
                                      EXIT_PROBLEMS) from None
                out[(tp.topic, tp.partition)] = None
        return out

    def earliest(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """Log start offsets (ListOffsets earliest)."""
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.earliest())

    def latest(self, partitions: list[tuple[str, int]], *, missing_ok: bool = False
               ) -> dict[tuple[str, int], int | None]:
        """Log end offsets (ListOffsets latest: the high watermark)."""
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.latest(), missing_ok=missing_ok)

    def offsets_for_time(self, partitions: list[tuple[str, int]], timestamp_ms: int
                         ) -> dict[tuple[str, int], int | None]:
        """The first offset at or after ``timestamp_ms`` (-1 when no record is that new)."""
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.for_timestamp(timestamp_ms))

    # -- changes ------------------------------------------------------------------------------

    def alter(self, group: str, kind: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commit ``offsets`` for the inactive group (AlterShareGroupOffsets for a share
        group)."""
        if kind == "share":
            self._share_alter(group, offsets)
            return
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        result = self.admin.alter_consumer_group_offsets(
            [request], request_timeout=_TIMEOUT_S)[group].result(_TIMEOUT_S)
        failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in result.topic_partitions
                  if tp.error is not None]
        if failed:
            raise GroupsError("; ".join(failed))

    def _share_alter(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        node_id = self.wire.find_coordinator(group)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in sorted(offsets.items()):
            by_topic.setdefault(t, []).append((p, o))

        def make(module: Any, version: int) -> Any:
            return build(module.AlterShareGroupOffsetsRequest, group_id=group, topics=tuple(
                build(module.AlterShareGroupOffsetsRequestTopic, topic_name=t, partitions=tuple(
                    build(module.AlterShareGroupOffsetsRequestPartition, partition_index=p,
                          start_offset=o) for p, o in parts))
                for t, parts in by_topic.items()))
        response = self.wire.send(ALTER_SHARE_GROUP_OFFSETS_KEY, make, node_id=node_id)
        if response.error_code:
            raise KafkaResponseError(int(response.error_code), response.error_message,
                                     what=f"AlterShareGroupOffsets {group}")
        failed = [f"{t.topic_name}-{p.partition_index}: {_error_name(int(p.error_code))}"
                  for t in response.responses for p in t.partitions if p.error_code]
        if failed:
            raise GroupsError("; ".join(failed))

    def delete_offsets(self, group: str, kind: str, partitions: list[tuple[str, int]]
                       ) -> dict[tuple[str, int], str | None]:
        """Delete committed offsets: ``{tp: error name or None}`` (a share group's state of
        whole topics: DeleteShareGroupOffsets)."""
        node_id = self.wire.find_coordinator(group)
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        if kind == "share":
            def make_share(module: Any, version: int) -> Any:
                return build(module.DeleteShareGroupOffsetsRequest, group_id=group,
                             topics=tuple(build(module.DeleteShareGroupOffsetsRequestTopic,
                                                topic_name=t) for t in by_topic))
            response = self.wire.send(DELETE_SHARE_GROUP_OFFSETS_KEY, make_share,
                                      node_id=node_id)
            if response.error_code:
                raise KafkaResponseError(int(response.error_code), response.error_message,
                                         what=f"DeleteShareGroupOffsets {group}")
            topic_errors = {t.topic_name: (_error_name(int(t.error_code))
                                           if t.error_code else None)
                            for t in response.responses}
            return {(t, p): topic_errors.get(t) for t, p in partitions}

        def make(module: Any, version: int) -> Any:
            return build(module.OffsetDeleteRequest, group_id=group, topics=tuple(
                build(module.OffsetDeleteRequestTopic, name=t, partitions=tuple(
                    build(module.OffsetDeleteRequestPartition, partition_index=p)
                    for p in ps)) for t, ps in by_topic.items()))
        response = self.wire.send(OFFSET_DELETE_KEY, make, node_id=node_id)
        if response.error_code:
            raise KafkaResponseError(int(response.error_code), what=f"OffsetDelete {group}")
        out: dict[tuple[str, int], str | None] = {tp: None for tp in partitions}
        for t in response.topics:
            for p in t.partitions:
                out[(t.name, int(p.partition_index))] = \
                    _error_name(int(p.error_code)) if p.error_code else None
        return out

    def delete_topics(self, topics: list[str]) -> None:
        """Delete ``topics`` (DeleteTopics); a failure is a GroupsError naming them."""
        futures = self.admin.delete_topics(topics, operation_timeout=_TIMEOUT_S,
                                           request_timeout=_TIMEOUT_S)
        failed = []
        for topic, future in sorted(futures.items()):
            try:
                future.result(_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - librdkafka's KafkaException
                failed.append(f"{topic}: {kafka_error_text(exc)}")
        if failed:
            raise GroupsError("deleting internal topics failed: " + "; ".join(failed))

    def delete(self, group: str) -> str | None:
        """Delete the group (DeleteGroups): None, or Kafka's error name and message."""
        from confluent_kafka import KafkaException

        future = self.admin.delete_consumer_groups([group], request_timeout=_TIMEOUT_S)[group]
        try:
            future.result(_TIMEOUT_S)
        except KafkaException as exc:
            return kafka_error_text(exc)
        return None
