"""Who in a consumer group reads which partitions: Kafka's range and round-robin assignors.

Both are pure functions of the group: the members (with their subscribed topics, and for
static members their ``group.instance.id``) and the partition count of each topic. They give
the same answer as Kafka's ``RangeAssignor`` and ``RoundRobinAssignor``
(``clients/.../consumer/RangeAssignor.java``, ``RoundRobinAssignor.java``,
``AbstractPartitionAssignor.java``) without racks:

* members are ordered as Kafka's ``MemberInfo.compareTo``: static members (with a group
  instance id) first, by instance id; then dynamic members by member id. Strings compare as
  Java's ``String.compareTo`` (UTF-16 code units), which differs from Python's order only for
  characters outside the Basic Multilingual Plane;
* range, per topic: its subscribers in that order share partitions ``0..n-1`` in contiguous
  runs of ``n // m``; the first ``n % m`` get one extra. 10 members on 6 partitions: the
  first 6 get one each and 4 get nothing;
* round robin: all partitions of all subscribed topics, topics sorted, go one at a time to
  the next member (circularly) that subscribes to the partition's topic.

Topics with no or zero partitions are skipped (Kafka has no metadata for them). Every member
appears in the result, possibly with an empty list; each list is sorted by (topic,
partition). Rack-aware range assignment (KIP-881) is not implemented.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..errors import InvalidArgumentError, InvalidArgumentTypeError, UnknownAssignorError

TopicPartition = tuple[str, int]
Assignment = dict[str, list[TopicPartition]]


def java_string_key(text: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def _member_order(member_ids: Iterable[str],
                  group_instance_ids: Mapping[str, str | None] | None) -> list[str]:
    instance = group_instance_ids or {}
    static_ids = {m: i for m in member_ids if (i := instance.get(m)) is not None}
    static = list(static_ids)
    dynamic = [m for m in member_ids if m not in static_ids]
    static.sort(key=lambda m: java_string_key(static_ids[m]))
    dynamic.sort(key=java_string_key)
    return static + dynamic


def _check_inputs(subscriptions: Mapping[str, Iterable[str]],
                  partitions_per_topic: Mapping[str, int]) -> dict[str, frozenset[str]]:
    subs = {}
    for member, topics in subscriptions.items():
        if not isinstance(member, str):
            raise InvalidArgumentTypeError(f"member ids must be str, got {member!r}")
        if isinstance(topics, str):
            raise InvalidArgumentTypeError(f"subscription of {member!r} must be a collection "
                                           f"of topics, not the str {topics!r}")
        subs[member] = frozenset(topics)
    for topic, count in partitions_per_topic.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidArgumentError(f"partition count of {topic!r} must be an int >= 0, "
                                       f"got {count!r}")
    return subs


def _sorted_assignment(order: list[str], assignment: Assignment) -> Assignment:
    return {m: sorted(assignment[m], key=lambda tp: (java_string_key(tp[0]), tp[1]))
            for m in order}


class RangeAssignor:
    """Kafka's ``RangeAssignor`` (protocol name ``range``, the consumer's classic default).

    Per topic, contiguous partition runs: with ``n`` partitions and ``m`` subscribers, each
    gets ``n // m`` and the first ``n % m`` (in member order) get one more. Deterministic.
    """

    name = "range"

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]], partitions_per_topic: Mapping[str, int],
               *, group_instance_ids: Mapping[str, str | None] | None = None) -> Assignment:
        """``{member_id: [(topic, partition), ...]}`` for every member of ``subscriptions``.

        ``subscriptions`` maps member id -> subscribed topics; ``partitions_per_topic`` maps
        topic -> partition count; ``group_instance_ids`` maps member id -> static instance
        id (absent or None for dynamic members). Raises InvalidArgumentTypeError (a
        TypeError) / InvalidArgumentError (a ValueError) for malformed input.
        """
        subs = _check_inputs(subscriptions, partitions_per_topic)
        order = _member_order(subs, group_instance_ids)
        assignment: Assignment = {m: [] for m in order}
        topics = sorted({t for ts in subs.values() for t in ts}, key=java_string_key)
        for topic in topics:
            count = partitions_per_topic.get(topic, 0)
            if count <= 0:
                continue
            consumers = [m for m in order if topic in subs[m]]
            per_consumer, with_extra = divmod(count, len(consumers))
            for i, member in enumerate(consumers):
                start = per_consumer * i + min(i, with_extra)
                length = per_consumer + (1 if i < with_extra else 0)
                assignment[member].extend((topic, p) for p in range(start, start + length))
        return _sorted_assignment(order, assignment)


class RoundRobinAssignor:
    """Kafka's ``RoundRobinAssignor`` (protocol name ``roundrobin``).

    All partitions of all subscribed topics, in (topic, partition) order, dealt one at a time
    to the members in member order, skipping members not subscribed to the partition's
    topic. Deterministic; balanced when every member subscribes to the same topics.
    """

    name = "roundrobin"

    @staticmethod
    def assign(subscriptions: Mapping[str, Iterable[str]], partitions_per_topic: Mapping[str, int],
               *, group_instance_ids: Mapping[str, str | None] | None = None) -> Assignment:
        """Same arguments and result as :meth:`RangeAssignor.assign`."""
        subs = _check_inputs(subscriptions, partitions_per_topic)
        order = _member_order(subs, group_instance_ids)
        assignment: Assignment = {m: [] for m in order}
        topics = sorted({t for ts in subs.values() for t in ts}, key=java_string_key)
        cursor = 0  # Kafka's CircularIterator over the sorted members
        for topic in topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                # Some member subscribes to ``topic`` (it came from a subscription), so this
                # loop ends within one turn of the circle.
                for _ in range(len(order)):
                    if topic in subs[order[cursor]]:
                        break
                    cursor = (cursor + 1) % len(order)
                assignment[order[cursor]].append((topic, partition))
                cursor = (cursor + 1) % len(order)
        return _sorted_assignment(order, assignment)


#: Assignors by Kafka protocol name.
ASSIGNORS = {RangeAssignor.name: RangeAssignor, RoundRobinAssignor.name: RoundRobinAssignor}


def get_assignor(name: str):
    """The assignor class for a Kafka protocol name (``range``, ``roundrobin``);
    :class:`~seglog.errors.UnknownAssignorError` (a KeyError) else."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise UnknownAssignorError(
            f"unknown assignor {name!r}; known: {', '.join(sorted(ASSIGNORS))}") \
            from None
