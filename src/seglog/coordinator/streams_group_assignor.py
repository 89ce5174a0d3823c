"""Who in a streams group runs which task: a sticky task assignor after Kafka 4.4's
``org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor``.

A task is ``(subtopology id, partition)``. Members are grouped by process (``process.id``,
one per Kafka Streams instance: its stream threads are the members). The assignment is:

* active tasks first stay where they were (the member that had the task in the previous
  target assignment, while that member is still in the group and its process is under its
  fair share), then go to the least loaded process, and within a process to its least loaded
  member (ties: the member id, so the result is deterministic);
* standby tasks (``group.streams.num.standby.replicas``, bounded by the number of other
  processes) go to processes that do not run the task as active nor as another standby,
  previous owners first, then the least loaded;
* no warm-up tasks (Kafka's sticky assignor gives none either).

A pure function of its input: no clock, no I/O. A leaf of the coordinator package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

__all__ = ["AssignorMember", "Task", "TaskAssignment", "assign_tasks"]

#: A task: ``(subtopology id, partition)``.
Task = tuple[str, int]


@dataclass(frozen=True)
class AssignorMember:
    """One member as the assignor sees it: its process and its tasks in the previous target
    assignment."""

    member_id: str
    process_id: str
    previous_active: frozenset[Task] = frozenset()
    previous_standby: frozenset[Task] = frozenset()


@dataclass
class TaskAssignment:
    """One member's target tasks."""

    active: set[Task] = field(default_factory=set)
    standby: set[Task] = field(default_factory=set)
    warmup: set[Task] = field(default_factory=set)


def assign_tasks(members: Iterable[AssignorMember], task_counts: Mapping[str, int],
                 num_standby_replicas: int) -> dict[str, TaskAssignment]:
    """``{member id: TaskAssignment}`` for every member, over the tasks ``(s, p)`` for each
    subtopology ``s`` of ``task_counts`` and ``p`` below its count."""
    ordered = sorted(members, key=lambda m: m.member_id)
    result = {m.member_id: TaskAssignment() for m in ordered}
    if not ordered:
        return result
    tasks = [(s, p) for s in sorted(task_counts) for p in range(task_counts[s])]
    by_process: dict[str, list[AssignorMember]] = {}
    for m in ordered:
        by_process.setdefault(m.process_id, []).append(m)
    load: dict[str, int] = {m.member_id: 0 for m in ordered}
    process_load: dict[str, int] = {p: 0 for p in by_process}
    # The fair share of a process: its members' share of all tasks, rounded up.
    total_members = len(ordered)

    def capacity(process: str) -> int:
        return -(-len(tasks) * len(by_process[process]) // total_members)

    def give(member: AssignorMember, task: Task, active: bool) -> None:
        target = result[member.member_id]
        (target.active if active else target.standby).add(task)
        load[member.member_id] += 1
        process_load[member.process_id] += 1

    def least_loaded_member(process: str) -> AssignorMember:
        return min(by_process[process], key=lambda m: (load[m.member_id], m.member_id))

    previous_owner: dict[Task, AssignorMember] = {}
    for m in ordered:
        for task in sorted(m.previous_active):
            previous_owner.setdefault(task, m)
    unassigned: list[Task] = []
    for task in tasks:
        owner = previous_owner.get(task)
        if owner is not None and process_load[owner.process_id] < capacity(owner.process_id):
            give(owner, task, True)
        else:
            unassigned.append(task)
    for task in unassigned:
        process = min(by_process, key=lambda p: (process_load[p] * total_members
                                                  // len(by_process[p]), p))
        give(least_loaded_member(process), task, True)

    replicas = min(max(num_standby_replicas, 0), len(by_process) - 1)
    if replicas <= 0:
        return result
    active_process = {task: m.process_id for m in ordered
                      for task in result[m.member_id].active}
    previous_standby_processes: dict[Task, list[str]] = {}
    for m in ordered:
        for task in sorted(m.previous_standby):
            previous_standby_processes.setdefault(task, []).append(m.process_id)
    for task in tasks:
        taken = {active_process.get(task)}
        for _ in range(replicas):
            candidates = [p for p in by_process if p not in taken]
            if not candidates:
                break
            sticky = [p for p in previous_standby_processes.get(task, ()) if p in candidates]
            process = sticky[0] if sticky else min(candidates,
                                                  key=lambda p: (process_load[p], p))
            give(least_loaded_member(process), task, False)
            taken.add(process)
    return result
