"""Kafka's ``SimpleAssignor`` (KIP-932), the share groups' server-side assignor ("simple").

A share-partition may go to several members (records are shared out by the broker's
acquisition locks), so the assignor balances two numbers: each partition's ``desired
sharing`` (members per partition, ``ceil(members / partitions)``) and each member's desired
partition count. It keeps what members already have where it can (sticky), then revokes from
overfilled members and overshared partitions, then fills the unfilled members. All members
subscribed to the same topics: Kafka's homogeneous builder over the union of partitions;
otherwise its heterogeneous builder, the same balancing topic by topic among the members
subscribed to that topic.

Kafka iterates Java hash maps; seglog iterates in sorted order (member ids, topic ids,
partitions), so the assignment is deterministic; with one member or one partition per
member the result equals Kafka's. Pure: no I/O.
"""

from __future__ import annotations

import math
import uuid
from typing import Mapping, Set

__all__ = ["NAME", "Assignment", "assign"]

#: The assignor's name (``group.share.assignors``, ShareGroupDescribe's AssignorName).
NAME = "simple"

#: ``{topic id: {partition, ...}}``.
Assignment = dict[uuid.UUID, set[int]]

_TP = tuple[uuid.UUID, int]


def assign(subscriptions: Mapping[str, Set[uuid.UUID]],
           current: Mapping[str, Mapping[uuid.UUID, Set[int]]],
           assignable: Mapping[uuid.UUID, Set[int]]) -> dict[str, Assignment]:
    """The target assignment of every member in ``subscriptions`` (member id -> subscribed
    topic ids), starting from the ``current`` target assignment; only the ``assignable``
    partitions (the group's initialized share-partitions) are given out."""
    if not subscriptions:
        return {}
    member_ids = sorted(subscriptions)
    old = {m: {t: set(ps) for t, ps in current.get(m, {}).items()} for m in member_ids}
    topic_sets = {frozenset(s) for s in subscriptions.values()}
    if len(topic_sets) == 1:
        topics = sorted(next(iter(topic_sets)), key=str)
        if not topics:
            return {m: {} for m in member_ids}
        new = _balance(member_ids, _targets(topics, assignable), old, set(topics))
    else:
        new = {m: {t: set(ps) for t, ps in old[m].items()
                   if t in subscriptions[m]} for m in member_ids}
        for topic in sorted(set().union(*subscriptions.values()), key=str):
            members = [m for m in member_ids if topic in subscriptions[m]]
            part = {m: {topic: set(new[m].get(topic, ()))} for m in members}
            result = _balance(members, _targets([topic], assignable), part, {topic})
            for m in members:
                got = result[m].get(topic, set())
                if got:
                    new[m][topic] = got
                else:
                    new[m].pop(topic, None)
    return {m: {t: ps for t, ps in a.items() if ps} for m, a in new.items()}


def _targets(topics: list[uuid.UUID], assignable: Mapping[uuid.UUID, Set[int]]) -> list[_TP]:
    return [(t, p) for t in topics for p in sorted(assignable.get(t, ()))]


def _balance(member_ids: list[str], targets: list[_TP],
             old: Mapping[str, Mapping[uuid.UUID, Set[int]]],
             topics: Set[uuid.UUID]) -> dict[str, Assignment]:
    """Kafka's ``SimpleHomogeneousAssignmentBuilder.build`` over ``targets``."""
    n = len(member_ids)
    sharing = 0 if not targets else (n + len(targets) - 1) // len(targets)
    precise = sharing * len(targets) / n
    desired = [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(n)]
    target_set = set(targets)
    by_partition: dict[_TP, list[int]] = {}
    by_member: dict[int, list[_TP]] = {}
    unfilled: list[int] = []
    overfilled: list[int] = []
    # revokeUnassignablePartitions: keep what is still subscribed and assignable.
    for i, member in enumerate(member_ids):
        kept: list[_TP] = []
        for topic in sorted(old.get(member, {}), key=str):
            if topic not in topics:
                continue
            for p in sorted(old[member][topic]):
                if (topic, p) in target_set:
                    kept.append((topic, p))
                    by_partition.setdefault((topic, p), []).append(i)
        by_member[i] = kept
        if len(kept) < desired[i]:
            unfilled.append(i)
        elif len(kept) > desired[i]:
            overfilled.append(i)
    # revokeOverfilledMembers
    for i in overfilled:
        while len(by_member[i]) > desired[i]:
            tp = by_member[i].pop(0)
            by_partition[tp].remove(i)
    # revokeOversharedPartitions
    for tp in sorted(by_partition, key=lambda e: (str(e[0]), e[1])):
        members = by_partition[tp]
        while len(members) > sharing:
            i = members.pop(0)
            by_member[i].remove(tp)
            if i not in unfilled:
                unfilled.append(i)
    # assignRemainingPartitions: round-robin over the unfilled members.
    unfilled.sort()
    cursor = 0
    for tp in targets:
        if not unfilled:
            break
        members = by_partition.setdefault(tp, [])
        to_make = sharing - len(members)
        tried = 0
        while to_make > 0 and unfilled and tried < len(unfilled):
            i = unfilled[cursor % len(unfilled)]
            if i in members:
                cursor += 1
                tried += 1
                continue
            members.append(i)
            by_member[i].append(tp)
            to_make -= 1
            tried = 0
            if len(by_member[i]) >= desired[i]:
                unfilled.remove(i)
            else:
                cursor += 1
    out: dict[str, Assignment] = {}
    for i, member in enumerate(member_ids):
        assignment: Assignment = {}
        for topic, p in by_member[i]:
            assignment.setdefault(topic, set()).add(p)
        out[member] = assignment
    return out
