"""The server-side assignors of the consumer group protocol (KIP-848): ``uniform`` and
``range``, by the names ``group.consumer.assignors`` and the client's
``group.remote.assignor`` use.

Each is a pure function of the members' subscriptions, the subscribed topics' partition
counts and the previous target assignment; it returns the new target assignment, every
member present (possibly empty). Kafka's versions are ``UniformAssignor`` (a sticky,
balanced assignment: members keep what they had as far as balance allows) and
``RangeAssignor`` (per topic, contiguous runs of partitions over the topic's subscribers
sorted by member id) in ``group-coordinator/.../assignor``. seglog's uniform assignor keeps
Kafka's guarantees (balanced to within one partition among the members that may take a
partition; previous owners keep partitions where that balance allows) though not always
Kafka's exact choice among equally balanced answers; rack-aware placement is not done.
"""

from __future__ import annotations

from typing import Callable, Mapping

from .assignors import java_string_key

__all__ = ["ASSIGNORS", "TargetAssignment", "range_assign", "uniform_assign"]

#: ``{member_id: {topic: frozenset(partitions)}}``.
TargetAssignment = dict[str, dict[str, frozenset[int]]]


def _sorted_members(members: Mapping[str, frozenset[str]]) -> list[str]:
    return sorted(members, key=java_string_key)


def _freeze(assigned: Mapping[str, Mapping[str, set[int]]]) -> TargetAssignment:
    return {m: {t: frozenset(ps) for t, ps in sorted(topics.items()) if ps}
            for m, topics in assigned.items()}


def range_assign(members: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int],
                 previous: Mapping[str, Mapping[str, frozenset[int]]]) -> TargetAssignment:
    """Kafka's server-side ``range``: per topic, its subscribers sorted by member id share
    partitions ``0..n-1`` in contiguous runs of ``n // m``, the first ``n % m`` one more."""
    del previous  # the runs depend on the membership only
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for topic in sorted(partition_counts):
        count = partition_counts[topic]
        subscribers = [m for m in _sorted_members(members) if topic in members[m]]
        if not subscribers or count <= 0:
            continue
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            size = quota + (1 if index < extra else 0)
            if size:
                out[member][topic] = set(range(start, start + size))
            start += size
    return _freeze(out)


def uniform_assign(members: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int],
                   previous: Mapping[str, Mapping[str, frozenset[int]]]) -> TargetAssignment:
    """Kafka's ``uniform``: sticky and balanced. Members keep their previous partitions
    that still exist and that they still subscribe to; the others go one at a time to the
    least loaded subscriber; then partitions move from the most to the least loaded
    subscriber until no two members that could trade differ by more than one."""
    order = _sorted_members(members)
    owned: dict[str, set[tuple[str, int]]] = {m: set() for m in order}
    taken: set[tuple[str, int]] = set()
    every = [(t, p) for t in sorted(partition_counts) for p in range(partition_counts[t])
             if any(t in members[m] for m in order)]
    subscribers = {t: [m for m in order if t in members[m]] for t in partition_counts}
    # Homogeneous groups: a member keeps at most the ceiling of the fair share, so the
    # balancing below moves as little as possible.
    cap = -(-len(every) // len(order)) if order else 0
    for member in order:
        for topic, parts in sorted(previous.get(member, {}).items()):
            if topic not in members[member]:
                continue
            for p in sorted(parts):
                tp = (topic, p)
                if p < partition_counts.get(topic, 0) and tp not in taken and \
                        len(owned[member]) < cap:
                    owned[member].add(tp)
                    taken.add(tp)
    # The partitions left, those of topics with the fewest subscribers first (they have
    # the fewest places to go).
    left = sorted((tp for tp in every if tp not in taken),
                  key=lambda tp: (len(subscribers[tp[0]]), tp))
    for tp in left:
        candidates = subscribers[tp[0]]
        best = min(candidates, key=lambda m: (len(owned[m]), order.index(m)))
        owned[best].add(tp)
    # Balance: a bounded number of single moves from a most loaded member to a least
    # loaded one that subscribes to one of its partitions' topics.
    for _ in range(len(every) * max(1, len(order))):
        moved = False
        for giver in sorted(order, key=lambda m: -len(owned[m])):
            for tp in sorted(owned[giver], reverse=True):
                takers = [m for m in subscribers[tp[0]] if len(owned[m]) + 1 < len(owned[giver])]
                if takers:
                    taker = min(takers, key=lambda m: (len(owned[m]), order.index(m)))
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    out: dict[str, dict[str, set[int]]] = {m: {} for m in order}
    for member, tps in owned.items():
        for topic, p in tps:
            out[member].setdefault(topic, set()).add(p)
    return _freeze(out)


#: The server-side assignors by name (``group.consumer.assignors`` lists which a broker
#: offers; the first is the default).
ASSIGNORS: dict[str, Callable[[Mapping[str, frozenset[str]], Mapping[str, int],
                               Mapping[str, Mapping[str, frozenset[int]]]], TargetAssignment]] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
