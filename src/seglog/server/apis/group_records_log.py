"""A modern group's records in its ``__consumer_offsets`` partition, for the group types
whose coordinator keeps its state as Kafka's records (streams groups, KIP-1071; share
groups, KIP-932): the partition this broker coordinates a group in, loading the records of a
partition once per leadership, and appending what changed in a group (tombstones for what is
gone).

Each group type keeps its own :class:`GroupRecordsLog` (what it loaded, in which leader
epoch, and the records it last wrote per group) and gives its codec and its coordinator's
``load_records`` / ``records``; the reading and writing are the same for every type, as in
Kafka, where one coordinator runtime writes every group type's records.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Iterable

from ...cluster import coordinators as cluster_coordinators
from ...cluster.seam import AppendOrigin, AppendResult
from ...coordinator.offsets_schema import OFFSETS_TOPIC
from ...errors import CorruptRecordError, SeglogError, UnknownTopicOrPartitionError
from ...types import TopicPartition
from ..context import BrokerState
from . import groups
from .data_topics import partition_seam

__all__ = ["GroupRecordsLog", "offsets_partition"]

log = logging.getLogger(__name__)


def offsets_partition(broker: BrokerState, group_id: str) -> int | None:
    """The group's ``__consumer_offsets`` partition when this broker coordinates it, else
    None."""
    groups_state = groups.find_groups_state(broker)
    cluster = partition_seam(broker)
    partition = cluster_coordinators.partition_in(cluster, OFFSETS_TOPIC, group_id)
    if partition is None or groups_state is None or groups_state.partitions is None:
        return None
    return None if groups_state.partitions.error_for(partition) else partition


@dataclasses.dataclass(eq=False)
class GroupRecordsLog:
    """One group type's records in ``__consumer_offsets``.

    ``kind`` names the type in log lines ("share", "streams"); ``decode_key(bytes)`` gives
    ``(record_type, a, b)`` or None for another type's record, ``decode_value(record_type,
    bytes | None)`` the value (both raise :class:`~seglog.errors.CorruptRecordError`);
    ``make_record(record_type, a, b, value)`` the coordinator's record; ``load_records(
    records, now_ms)`` loads them into the coordinator and gives the ids of the groups
    loaded; ``records(group_id)`` is a group's records now, ``{key bytes: value bytes}``.
    """

    kind: str
    decode_key: Callable[[bytes], Any]
    decode_value: Callable[[int, bytes | None], Any]
    make_record: Callable[[int, Any, Any, Any], Any]
    load_records: Callable[[list[Any], int], Iterable[str]]
    records: Callable[[str], dict[bytes, bytes | None]]
    #: The leader epoch each partition was loaded in.
    loaded: dict[int, int | None] = dataclasses.field(default_factory=dict)
    #: Each group's records as last written.
    written: dict[str, dict[bytes, bytes | None]] = dataclasses.field(default_factory=dict)

    def ensure_loaded(self, broker: BrokerState, group_id: str) -> None:
        """Load the groups of ``group_id``'s ``__consumer_offsets`` partition, once per
        leadership of it (Kafka's coordinator loads them when it becomes the leader)."""
        partition = offsets_partition(broker, group_id)
        if partition is not None:
            self.load_partition(broker, partition)

    def load_partition(self, broker: BrokerState, partition: int) -> None:
        """Load the groups of ``__consumer_offsets`` partition ``partition`` (which this
        broker coordinates) unless loaded in its current leader epoch already. A record that
        does not parse is skipped with a warning; a partition that cannot be read loads
        nothing."""
        groups_state = groups.find_groups_state(broker)
        if groups_state is None or groups_state.partitions is None:
            return
        epoch = groups_state.partitions.leader_epoch(partition)
        if partition in self.loaded and self.loaded[partition] == epoch:
            return
        self.loaded[partition] = epoch
        records: list[Any] = []
        try:
            log_ = broker.store.log((OFFSETS_TOPIC, partition))
            for record in log_.records(start=log_.start_offset, max_offset=log_.end_offset):
                if record.key is None:
                    continue
                try:
                    key = self.decode_key(record.key)
                    if key is None:
                        continue
                    value = self.decode_value(key[0], record.value)
                except CorruptRecordError as exc:
                    log.warning("a %s group record of %s-%d does not parse (%s); skipped",
                                self.kind, OFFSETS_TOPIC, partition, exc)
                    continue
                records.append(self.make_record(key[0], key[1], key[2], value))
        except UnknownTopicOrPartitionError:
            return  # no __consumer_offsets yet: no groups to load
        except SeglogError as exc:
            log.warning("loading the %s groups of %s-%d failed: %s", self.kind, OFFSETS_TOPIC,
                        partition, exc)
            return
        for loaded_id in self.load_records(records, broker.now_ms()):
            self.written[loaded_id] = self.records(loaded_id)
            log.info("loaded %s group %r", self.kind, loaded_id)

    def forget_unowned(self, broker: BrokerState, group_ids: Iterable[str]) -> list[str]:
        """Of ``group_ids``, the groups whose ``__consumer_offsets`` partition this broker no
        longer coordinates (for the coordinator to unload); their written records and the
        partitions' load marks are forgotten, so a later leadership loads them again."""
        groups_state = groups.find_groups_state(broker)
        if groups_state is None or groups_state.partitions is None:
            return []
        cluster = partition_seam(broker)
        partitions = groups_state.partitions
        gone = []
        for group_id in group_ids:
            partition = cluster_coordinators.partition_in(cluster, OFFSETS_TOPIC, group_id)
            if partition is None or partitions.error_for(partition):
                gone.append(group_id)
        for group_id in gone:
            self.written.pop(group_id, None)
        for partition in [p for p in self.loaded if partitions.error_for(p)]:
            del self.loaded[partition]
        return gone

    def persist(self, broker: BrokerState, group_id: str) -> AppendResult | None:
        """Append what changed in the group to its ``__consumer_offsets`` partition, as
        Kafka's records (tombstones for what is gone); the append (None: nothing appended,
        or the append failed, which is logged)."""
        if getattr(broker.store, "read_only", False):
            return None
        new = self.records(group_id)
        old = self.written.get(group_id, {})
        changes = [(k, v) for k, v in new.items() if k not in old or old[k] != v]
        changes += [(k, None) for k in old if k not in new]
        if not changes:
            return None
        partition = offsets_partition(broker, group_id)
        if partition is None:
            return None
        now = broker.now_ms()

        def write(log_: Any) -> int:
            _first, last = log_.append_batch([v for _k, v in changes],
                                             keys=[k for k, _v in changes],
                                             timestamps_ms=[now] * len(changes))
            return int(last)

        try:
            result = partition_seam(broker).append_now(
                TopicPartition(OFFSETS_TOPIC, partition), write, acks=1,
                origin=AppendOrigin.COORDINATOR)
        except SeglogError as exc:
            log.warning("%s group %r: writing its records failed: %s", self.kind, group_id,
                        exc)
            return None
        if result.error_code:
            log.warning("%s group %r: writing its records failed (error %d)", self.kind,
                        group_id, result.error_code)
            return None
        if new:
            self.written[group_id] = new
        else:
            self.written.pop(group_id, None)
        return result
