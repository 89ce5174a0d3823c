"""The streams group state machine (:mod:`seglog.coordinator.streams_group`) and its sticky
task assignor, driven directly: joins, topology checks against the topics, the internal
topics asked for, task assignment, reconciliation with member epochs (a task is revoked from
its owner before another member gets it), leaves and session timeouts, offset commit checks.
The same protocol end to end with Kafka Streams itself is tests/kafka/test_streams_groups_java.py.
"""

from __future__ import annotations

from seglog import error_codes as codes
from seglog.coordinator import streams_group as sg
from seglog.coordinator.streams_group_assignor import AssignorMember, assign_tasks

TOPOLOGY = sg.Topology(0, (
    sg.Subtopology("0", source_topics=("words",), repartition_sink_topics=("app-repartition",)),
    sg.Subtopology("1", repartition_source_topics=(sg.TopicInfo("app-repartition"),),
                   state_changelog_topics=(sg.TopicInfo("app-changelog",
                                                        configs=(("cleanup.policy",
                                                                  "compact"),)),)),
))
NO_TASKS: sg.Tasks = ({}, {}, {})


class World:
    """The topics the coordinator sees, and a clock."""

    def __init__(self, **topics: int) -> None:
        self.topics = {name.replace("_", "-"): n for name, n in topics.items()}
        self.now_ms = 0
        self.coordinator = sg.StreamsGroupCoordinator(
            sg.StreamsGroupConfig(session_timeout_ms=10_000), self.topics.get,
            lambda: list(self.topics))

    def beat(self, member: str, epoch: int, owned: sg.Tasks | None = None, *,
             process: str | None = None, topology: sg.Topology | None = None
             ) -> sg.HeartbeatResult:
        if epoch == 0:
            topology = topology or TOPOLOGY
            owned = NO_TASKS if owned is None else owned
            process = process or f"process-{member}"
        return self.coordinator.heartbeat(
            group_id="app", member_id=member, member_epoch=epoch, instance_id=None,
            rack_id=None, rebalance_timeout_ms=30_000 if epoch == 0 else -1,
            topology=topology, owned=owned, process_id=process, user_endpoint=None,
            client_tags=None, task_offsets=None, task_end_offsets=None,
            shutdown_application=False, client_id="c", client_host="/127.0.0.1",
            now_ms=self.now_ms)


def flat(result: sg.HeartbeatResult) -> set[tuple[str, int]]:
    assert result.active is not None
    return {(s, p) for s, ps in result.active.items() for p in ps}


def owned(tasks: set[tuple[str, int]]) -> sg.Tasks:
    active: dict[str, set[int]] = {}
    for s, p in tasks:
        active.setdefault(s, set()).add(p)
    return (active, {}, {})


ALL = {("0", 0), ("0", 1), ("1", 0), ("1", 1)}


def test_a_join_asks_for_the_missing_internal_topics_then_gets_every_task():
    world = World(words=2)
    first = world.beat("m1", 0)
    assert first.error_code == codes.NONE and first.member_epoch == 1
    assert [code for code, _ in first.statuses] == [sg.STATUS_MISSING_INTERNAL_TOPICS]
    assert {n: t.partitions for n, t in first.create_topics.items()} == {
        "app-repartition": 2, "app-changelog": 2}
    assert first.create_topics["app-changelog"].configs == (("cleanup.policy", "compact"),)
    assert flat(first) == set()
    assert world.coordinator.state("app") == sg.NOT_READY
    world.topics.update({"app-repartition": 2, "app-changelog": 2})  # created by the broker
    second = world.beat("m1", 1, NO_TASKS)
    assert (second.member_epoch, second.statuses, flat(second)) == (2, (), ALL)
    assert world.coordinator.state("app") == sg.STABLE


def test_a_missing_source_topic_is_a_status_and_no_tasks():
    world = World()
    result = world.beat("m1", 0)
    assert [code for code, _ in result.statuses] == [sg.STATUS_MISSING_SOURCE_TOPICS]
    assert not result.create_topics and flat(result) == set()


def test_an_internal_topic_with_the_wrong_partition_count_is_a_status():
    world = World(words=2, app_repartition=3, app_changelog=2)
    result = world.beat("m1", 0)
    assert [code for code, _ in result.statuses] == [sg.STATUS_INCORRECTLY_PARTITIONED_TOPICS]
    assert flat(result) == set()


def test_a_second_member_gets_tasks_only_after_the_first_revoked_them():
    world = World(words=2, app_repartition=2, app_changelog=2)
    m1 = world.beat("m1", 0)
    assert flat(m1) == ALL and m1.member_epoch == 1
    m2 = world.beat("m2", 0)
    # The target gives m2 half of the tasks, but m1 still owns them: m2 waits.
    assert m2.member_epoch == 2 and flat(m2) == set()
    assert world.coordinator.state("app") == sg.RECONCILING
    # m1 is asked to revoke (it stays at its epoch until it has).
    m1 = world.beat("m1", 1, owned(ALL))
    kept = flat(m1)
    assert m1.member_epoch == 1 and len(kept) == 2
    m2 = world.beat("m2", 2, NO_TASKS)
    assert flat(m2) == set()  # still not released
    m1 = world.beat("m1", 1, owned(kept))  # revoked: moves to the group's epoch
    assert m1.member_epoch == 2 and flat(m1) == kept
    m2 = world.beat("m2", 2, NO_TASKS)
    assert flat(m2) == ALL - kept and m2.member_epoch == 2
    assert world.coordinator.state("app") == sg.STABLE


def test_a_member_that_leaves_or_times_out_gives_its_tasks_to_the_others():
    world = World(words=2, app_repartition=2, app_changelog=2)
    world.beat("m1", 0)
    world.beat("m2", 0)
    m1 = world.beat("m1", 1, owned(ALL))
    world.beat("m1", 1, owned(flat(m1)))
    assert world.beat("m1", -1).member_epoch == -1
    m2 = world.beat("m2", 2, NO_TASKS)
    assert flat(m2) == ALL and m2.member_epoch == 3
    world.beat("m3", 0)
    world.now_ms += 10_000  # m2's session ends; m3 heartbeats on time
    world.coordinator.poll(world.now_ms - 1)
    m3 = world.beat("m3", 4, NO_TASKS)
    world.coordinator.poll(world.now_ms + 1)
    m3 = world.beat("m3", m3.member_epoch, NO_TASKS)
    assert flat(m3) == ALL
    assert [v.member_id for v in world.coordinator.describe("app").members] == ["m3"]


def test_epochs_are_checked():
    world = World(words=2, app_repartition=2, app_changelog=2)
    world.beat("m1", 0)
    assert world.beat("m1", 7, NO_TASKS).error_code == codes.FENCED_MEMBER_EPOCH
    assert world.beat("nobody", 3, NO_TASKS).error_code == codes.UNKNOWN_MEMBER_ID
    assert world.beat("m1", -3).error_code == codes.INVALID_REQUEST
    bad = world.coordinator.heartbeat(
        group_id="app", member_id="m9", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=-1, topology=TOPOLOGY, owned=NO_TASKS, process_id="p",
        user_endpoint=None, client_tags=None, task_offsets=None, task_end_offsets=None,
        shutdown_application=False, client_id="c", client_host="h", now_ms=0)
    assert (bad.error_code, bad.error_message) == (
        codes.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
    commit = world.coordinator.validate_offset_commit
    assert commit("app", "m1", 1) == codes.NONE
    assert commit("app", "m1", 0) == codes.STALE_MEMBER_EPOCH
    assert commit("app", "nobody", 1) == codes.UNKNOWN_MEMBER_ID
    assert world.coordinator.delete_group("app") == codes.NON_EMPTY_GROUP


def test_the_sticky_assignor_balances_processes_and_keeps_previous_owners():
    counts = {"0": 3, "1": 3}
    fresh = assign_tasks([AssignorMember("a", "p1"), AssignorMember("b", "p2")], counts, 0)
    assert sorted(len(a.active) for a in fresh.values()) == [3, 3]
    # A third process joins: the others keep what they had, up to their share.
    again = assign_tasks([AssignorMember("a", "p1", frozenset(fresh["a"].active)),
                          AssignorMember("b", "p2", frozenset(fresh["b"].active)),
                          AssignorMember("c", "p3")], counts, 0)
    assert sorted(len(a.active) for a in again.values()) == [2, 2, 2]
    assert again["a"].active <= fresh["a"].active and again["b"].active <= fresh["b"].active
    # One standby per task, never on the process that runs it active.
    with_standby = assign_tasks([AssignorMember("a", "p1"), AssignorMember("b", "p2")],
                                counts, 1)
    assert with_standby["a"].standby == with_standby["b"].active
    assert with_standby["b"].standby == with_standby["a"].active


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed():
    world = World(words=2, app_repartition=2, app_changelog=2)
    world.beat("m1", 0)
    world.beat("m2", 0)
    m1 = world.beat("m1", 1, owned(ALL))  # asked to revoke half (rebalance timeout 30 s)
    assert len(flat(m1)) == 2
    for _ in range(6):  # both heartbeat (sessions alive), m1 without revoking
        world.now_ms += 5_000
        assert world.beat("m1", 1, owned(ALL)).member_epoch == 1
        world.beat("m2", 2, NO_TASKS)
        world.coordinator.poll(world.now_ms - 1)
    assert [v.member_id for v in world.coordinator.describe("app").members] == ["m1", "m2"]
    assert world.coordinator.poll(world.now_ms) == [("app", "m1")]
    m2 = world.beat("m2", 2, NO_TASKS)
    assert flat(m2) == ALL
    assert world.beat("m1", 1, owned(ALL)).error_code == codes.UNKNOWN_MEMBER_ID


def test_members_with_endpoints_hear_where_every_partition_is():
    world = World(words=2, app_repartition=2, app_changelog=2)

    def beat(member, epoch, owned_tasks, known_epoch):
        return world.coordinator.heartbeat(
            group_id="app", member_id=member, member_epoch=epoch, instance_id=None,
            rack_id=None, rebalance_timeout_ms=30_000, topology=TOPOLOGY if epoch == 0 else None,
            owned=owned_tasks, process_id=f"p-{member}" if epoch == 0 else None,
            user_endpoint=("host", 8000 + int(member[1])), client_tags=None, task_offsets=None,
            task_end_offsets=None, shutdown_application=False, client_id="c", client_host="h",
            now_ms=0, endpoint_information_epoch=known_epoch)

    first = beat("m1", 0, NO_TASKS, -1)
    assert first.partitions_by_endpoint == [(("host", 8001), {
        "app-repartition": [0, 1], "words": [0, 1]}, {})]
    again = beat("m1", first.member_epoch, owned(ALL), first.endpoint_epoch)
    assert again.partitions_by_endpoint is None  # the member knows this epoch already
    second = beat("m2", 0, NO_TASKS, -1)
    assert second.endpoint_epoch > first.endpoint_epoch
    assert [endpoint for endpoint, _, _ in second.partitions_by_endpoint] == [
        ("host", 8001), ("host", 8002)]
