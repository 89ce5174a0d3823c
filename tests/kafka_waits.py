"""Bounded waits for what a real Kafka broker shows a moment after it answered a write.

Kafka 4.4 (KRaft) answers CreateTopics, IncrementalAlterConfigs, CreateAcls,
AlterClientQuotas, UpdateFeatures, ... once its controller committed the record; the
broker's metadata image, which serves Metadata, DescribeConfigs, DescribeAcls,
ListConfigResources, DescribeClientQuotas, ApiVersions' finalized features and the
authorizer, applies that record a moment later: tens of ms on a busy machine (CI runs on two
loaded cores). A differential test that reads right after a write therefore reads again,
bounded, until the written state shows, and on seglog and Kafka alike; then it compares
whatever it read last, so a broker that never shows the write still fails the comparison.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: How long to wait for a write to show (a healthy broker shows it in well under a second).
PROPAGATION_S_MAX = 10.0
#: Between two reads.
INTERVAL_S = 0.05


def eventually(read: Callable[[], T], done: Callable[[T], bool], *,
               timeout_s: float = PROPAGATION_S_MAX, interval_s: float = INTERVAL_S) -> T:
    """``read()`` again every ``interval_s`` until ``done(result)`` or ``timeout_s`` passed;
    returns the last result either way (the caller's comparison judges it). Giving up is
    written to stderr (pytest shows it with a failure's report)."""
    deadline = time.monotonic() + timeout_s
    result = read()
    while not done(result):
        if time.monotonic() >= deadline:
            print(f"kafka_waits: gave up after {timeout_s} s; the last read: {result!r}"[:2000],
                  file=sys.stderr)
            break
        time.sleep(interval_s)
        result = read()
    return result


def group_configs_shown(admin: Any, group: str, values: dict[str, str], *,
                        timeout_s: float = PROPAGATION_S_MAX) -> dict[str, str | None]:
    """Describe group ``group``'s configs with ``admin`` (a confluent-kafka ``AdminClient``)
    again until each of ``values`` shows, bounded: a share or consumer group member that
    joins before the broker's image has them starts from the old values (a share group at
    ``share.auto.offset.reset=latest``, after the records). Returns the last description."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.GROUP, group)

    def described() -> dict[str, str | None]:
        entries = admin.describe_configs([resource])[resource].result(timeout_s)
        return {name: entry.value for name, entry in entries.items()}

    return eventually(described, lambda now: all(now.get(k) == v for k, v in values.items()),
                      timeout_s=timeout_s)


def partitions_led(client: Any, names: list[str], *,
                   timeout_s: float = PROPAGATION_S_MAX) -> bool:
    """Read again until every partition of the topics ``names`` is in the broker's Metadata
    and answers ListOffsets; True when they all did within ``timeout_s``. CreateTopics
    answers once the controller made a topic, and Kafka's broker then publishes it to its
    metadata cache (Metadata names the leader) a moment before its replica manager makes the
    partition: a Produce in between is NOT_LEADER_OR_FOLLOWER. ``client``: a raw wire client
    whose ``call(api_key, version, **fields)`` takes kio's request entities."""
    from seglog.schemas import load_request_schema
    from seglog.server.apis.data_metadata import build

    meta = sys.modules[load_request_schema(3, 12).__module__]
    offsets = sys.modules[load_request_schema(2, 7).__module__]

    def ready() -> bool:
        r = client.call(3, 12, topics=tuple(build(meta.MetadataRequestTopic, name=n,
                                                  topic_id=None) for n in names),
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False)
        if not all(int(t.error_code) == 0 and t.partitions for t in r.topics):
            return False
        r = client.call(2, 7, replica_id=-1, isolation_level=0, topics=tuple(build(
            offsets.ListOffsetsTopic, name=t.name, partitions=tuple(build(
                offsets.ListOffsetsPartition, partition_index=p.partition_index, timestamp=-1,
                current_leader_epoch=-1) for p in t.partitions)) for t in r.topics))
        return all(int(p.error_code) == 0 for t in r.topics for p in t.partitions)

    return eventually(ready, bool, timeout_s=timeout_s)
