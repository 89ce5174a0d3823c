"""Partition reassignments (KIP-455) and ElectLeaders in a ZooKeeper cluster, as Kafka 2.8's
controller does them: the replica sets of :mod:`seglog.cluster.reassignment` (pure), then
three in-process brokers over the session's real ZooKeeper, driven with kio's requests over
a socket (the controller answers; another broker says NOT_CONTROLLER, as Kafka 2.8's did),
then Kafka 4.4's own ``kafka-reassign-partitions`` and ``kafka-leader-election``."""

from __future__ import annotations

import datetime
import json
import os

import pytest

from seglog import error_codes as codes
from seglog.cluster import zk_data
from seglog.cluster.reassignment import (ReplicaAssignment, check_cluster_target,
                                         check_lone_target, check_replication_factor,
                                         reassignment_complete)
from seglog.types import TopicPartition

from test_acl_cluster import Wire
from test_broker_cluster import (consume_all, make_cluster,  # noqa: F401 - a fixture
                                 produce_confluent, wait_until)

TIMEOUT = datetime.timedelta(seconds=15)


# --- the replica sets (pure) -------------------------------------------------------------------


def test_reassign_to_keeps_kafkas_order_and_sets():
    current = ReplicaAssignment((1, 2, 3))
    moving = current.reassign_to((4, 5, 6))
    # Kafka's onPartitionReassignment example: RS = TRS + ORS, AR = TRS, RR = ORS.
    assert moving == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert moving.origin == (1, 2, 3) and moving.target == (4, 5, 6) and moving.reassigning
    overlap = current.reassign_to((3, 4, 2))
    assert overlap == ReplicaAssignment((3, 4, 2, 1), (4,), (1,))
    # A new target replaces the one in progress, from the same original replicas.
    assert overlap.reassign_to((1, 2)) == ReplicaAssignment((1, 2, 3), (), (3,))
    assert overlap.cancelled() == ReplicaAssignment((3, 2, 1))
    assert not current.reassign_to((1, 2, 3)).reassigning
    assert reassignment_complete(moving, (1, 2, 3, 4, 5, 6))
    assert not reassignment_complete(moving, (1, 2, 3, 4, 5))


def test_target_checks_carry_kafkas_messages():
    current = ReplicaAssignment((0,))
    assert check_cluster_target(current, (), {0, 1}) == (
        codes.INVALID_REPLICA_ASSIGNMENT,
        "Empty replica list specified in partition reassignment.")
    assert check_cluster_target(current, (1, 1), {0, 1}) == (
        codes.INVALID_REPLICA_ASSIGNMENT,
        "Duplicate replica ids in partition reassignment replica list: List(1, 1)")
    assert check_cluster_target(current, (-1,), {0, 1})[0] == codes.INVALID_REPLICA_ASSIGNMENT
    assert check_cluster_target(current, (1, 7), {0, 1})[1].startswith(
        "Replica assignment has brokers that are not alive. Replica list: Vector(1, 7)")
    assert check_cluster_target(current, (1, 0), {0, 1}) == (codes.NONE, None)
    assert check_lone_target(1, (1,)) == (codes.NONE, None)
    assert check_lone_target(1, (2,))[1] == ("The manual partition assignment includes broker "
                                             "2, but no such broker is registered.")
    assert check_replication_factor(current, (1, 2), allow_change=False) == (
        codes.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 1 to 2")
    assert check_replication_factor(current, (1, 2), allow_change=True) == (codes.NONE, None)



def test_a_leader_stops_tracking_a_replica_the_reassignment_removed():
    from seglog.cluster.replica_state import LeaderReplicaState

    state = LeaderReplicaState(1)
    state.make_leader(leader_epoch=3, isr=[1], replicas=[1, 2, 3], zk_version=0,
                      controller_epoch=1, leader_end_offset=10, now_ms=1000)
    state.update_follower_fetch_state(3, fetch_offset=10, follower_log_start_offset=0,
                                      now_ms=1001, leader_end_offset=10)
    assert state.isr_to_expand(3, high_watermark=10) == (1, 3)
    state.update_replicas([1, 2])
    assert state.replicas == (1, 2) and state.follower(3) is None
    assert state.isr_to_expand(3, high_watermark=10) is None


# --- three brokers --------------------------------------------------------------------------------


def _controller(cluster) -> int:
    return wait_until(lambda: (cluster.rm(0).controller_id,)
                      if cluster.rm(0).controller_id is not None else None,
                      "a controller")[0]


def _alter(wire, topic, targets, version=1):
    ap = wire.m(45, version)
    r = wire.call(45, version, timeout=TIMEOUT, topics=(ap.ReassignableTopic(
        name=topic, partitions=tuple(ap.ReassignablePartition(partition_index=p, replicas=rs)
                                     for p, rs in targets)),))
    return [(int(p.error_code), p.error_message) for t in r.responses for p in t.partitions]


def _list(wire):
    r = wire.call(46, 0, timeout=TIMEOUT, topics=None)
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                          list(p.removing_replicas))
            for t in r.topics for p in t.partitions}


def _elect(wire, election_type, topic, partitions):
    el = wire.m(43, 2)
    r = wire.call(43, 2, election_type=election_type, timeout=TIMEOUT, topic_partitions=(
        el.TopicPartitions(topic=topic, partitions=tuple(partitions)),))
    return [(int(p.error_code), p.error_message)
            for t in r.replica_election_results for p in t.partition_result]


def test_reassignment_moves_a_partition_and_elections_follow(make_cluster):
    cluster = make_cluster()
    controller = _controller(cluster)
    other = next(b for b in cluster.brokers if b != controller)
    wire = Wire(cluster.brokers[controller].bootstrap)
    not_controller = Wire(cluster.brokers[other].bootstrap)
    try:
        ct = wire.m(19, 7)
        r = wire.call(19, 7, validate_only=False, timeout=TIMEOUT, topics=(ct.CreatableTopic(
            name="moved", num_partitions=-1, replication_factor=-1, configs=(),
            assignments=(ct.CreatableReplicaAssignment(partition_index=0, broker_ids=(0,)),)),))
        assert int(r.topics[0].error_code) == 0
        tp = TopicPartition("moved", 0)
        wait_until(lambda: cluster.leader_of(tp) == 0, "broker 0 to lead moved-0")
        values = [b"v%d" % i for i in range(40)]
        assert produce_confluent(cluster.bootstrap, "moved", values) == [None] * len(values)

        # Only the controller reassigns and elects (Kafka 2.8: NOT_CONTROLLER elsewhere).
        assert _alter(not_controller, "moved", [(0, (1, 2))]) == [(codes.NOT_CONTROLLER, None)]
        assert _elect(not_controller, 0, "moved", [0]) == [(codes.NOT_CONTROLLER, None)]
        assert _alter(wire, "moved", [(0, None)]) == [(codes.NO_REASSIGNMENT_IN_PROGRESS, None)]
        assert _alter(wire, "moved", [(0, (1, 9))])[0][0] == codes.INVALID_REPLICA_ASSIGNMENT
        assert _alter(wire, "moved", [(0, (1, 2))], version=1) == [(codes.NONE, None)]

        def moved():
            assignment = cluster.rm(controller).assignments.get("moved")
            return (assignment is not None and assignment.partitions[0] == [1, 2]
                    and not assignment.adding_replicas and not assignment.removing_replicas)
        wait_until(moved, "the reassignment of moved-0 to [1, 2] to complete")
        assert _list(wire) == {}
        leader = wait_until(lambda: cluster.leader_of_among(tp, (1, 2)),
                            "broker 1 or 2 to lead moved-0")
        # The metadata may show the new assignment a moment before the new state; broker 0,
        # removed, must not be taken back into the ISR (it would stay there until it lags
        # out, replica.lag.time.max.ms = 3 s later: hence the shorter wait).
        wait_until(lambda: set(cluster.rm(controller).states[tp].isr) <= {1, 2},
                   "an ISR without broker 0", timeout_s=2.0)
        assert consume_all(cluster.bootstrap, "moved", len(values)) == values
        # The preferred replica (1) leads after a preferred election, or already did.
        outcome = _elect(wire, 0, "moved", [0])
        assert outcome[0][0] in (codes.NONE, codes.ELECTION_NOT_NEEDED), outcome
        wait_until(lambda: cluster.leader_of(tp) == 1, "broker 1 to lead moved-0")
        assert _elect(wire, 0, "moved", [0]) == [
            (codes.ELECTION_NOT_NEEDED, codes.message(codes.ELECTION_NOT_NEEDED))]
        assert _elect(wire, 1, "moved", [0])[0][0] == codes.ELECTION_NOT_NEEDED
        assert _alter(wire, "moved", [(0, (2, 1, 0))], version=1) == [(codes.NONE, None)]
        wait_until(lambda: cluster.rm(controller).assignments["moved"].partitions[0]
                   == [2, 1, 0] and not cluster.rm(controller).assignments["moved"]
                   .adding_replicas, "the partition to grow to three replicas")
        wait_until(lambda: cluster.leader_of(tp) is not None and set(
            cluster.rm(controller).states[tp].isr) == {0, 1, 2}, "an ISR of three")
    finally:
        wire.close()
        not_controller.close()



def _create_on(wire, topic, replicas):
    ct = wire.m(19, 7)
    r = wire.call(19, 7, validate_only=False, timeout=TIMEOUT, topics=(ct.CreatableTopic(
        name=topic, num_partitions=-1, replication_factor=-1, configs=(),
        assignments=(ct.CreatableReplicaAssignment(partition_index=0,
                                                   broker_ids=tuple(replicas)),)),))
    assert int(r.topics[0].error_code) == 0


def test_a_reassignment_survives_controller_failover_is_listed_and_cancelled(
        make_cluster, zk_client):
    """Kafka's phase U written (RS = [spare, leader], AR = [spare], RR = [leader]) while the
    adding replica's broker is down: the next controller resumes it, lists it, and a
    cancellation (null replicas) puts the original replica set back."""
    import dataclasses

    cluster = make_cluster()
    controller = _controller(cluster)
    leader, spare = [b for b in sorted(cluster.brokers) if b != controller]
    wire = Wire(cluster.brokers[leader].bootstrap)
    try:
        _create_on(wire, "held", (leader,))
        tp = TopicPartition("held", 0)
        wait_until(lambda: cluster.leader_of(tp) == leader, "the leader to lead held-0")
        cluster.stop(spare)
        assignment = zk_client.topic_assignment("held")
        zk_client.set_topic_assignment(dataclasses.replace(
            assignment, partitions={0: [spare, leader]}, adding_replicas={0: [spare]},
            removing_replicas={0: [leader]}))
        cluster.stop(controller)  # the leader's broker, the last one, takes over
        wait_until(lambda: cluster.rm(leader).controller_id == leader,
                   "the leader's broker to become controller")
        expected = {("held", 0): ([spare, leader], [spare], [leader])}
        wait_until(lambda: _list(wire) == expected, "the resumed reassignment to be listed")
        lp = wire.m(46, 0)
        r = wire.call(46, 0, timeout=TIMEOUT, topics=(
            lp.ListPartitionReassignmentsTopics(name="held", partition_indexes=(0, 3)),))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == \
            [("held", [0])]
        assert _alter(wire, "held", [(0, None)]) == [(codes.NONE, None)]
        assignment = zk_client.topic_assignment("held")
        assert (assignment.partitions, assignment.adding_replicas,
                assignment.removing_replicas) == ({0: [leader]}, {}, {})
        # Listed from the broker's metadata, which follows ZooKeeper a moment later.
        wait_until(lambda: _list(wire) == {}, "the cancelled reassignment to leave the list")
        assert _alter(wire, "held", [(0, None)]) == [(codes.NO_REASSIGNMENT_IN_PROGRESS, None)]
        wait_until(lambda: cluster.rm(leader).states[tp].isr == (leader,)
                   and cluster.leader_of(tp) == leader, "the leader alone in the ISR")
    finally:
        wire.close()


def test_the_old_admin_reassign_partitions_znode_is_served(make_cluster, zk_client):
    """``/admin/reassign_partitions`` (Kafka before KIP-455, still served by 2.8's
    controller): the listed partitions move and the request znode goes once done."""
    cluster = make_cluster()
    controller = _controller(cluster)
    wire = Wire(cluster.brokers[controller].bootstrap)
    try:
        _create_on(wire, "old", (0,))
        tp = TopicPartition("old", 0)
        wait_until(lambda: cluster.leader_of(tp) == 0, "broker 0 to lead old-0")
        zk_client.create_recursive(zk_data.REASSIGN_PARTITIONS_PATH,
                                   zk_data.encode_reassign_partitions({tp: [2, 1]}))
        wait_until(lambda: zk_client.topic_assignment("old").partitions == {0: [2, 1]}
                   and not zk_client.topic_assignment("old").adding_replicas,
                   "old-0 to move to [2, 1]")
        wait_until(lambda: not zk_client.path_exists(zk_data.REASSIGN_PARTITIONS_PATH),
                   "the request znode to go")
        wait_until(lambda: cluster.leader_of(tp) in (1, 2), "broker 1 or 2 to lead old-0")
    finally:
        wire.close()



def test_unclean_election_on_demand_and_preferred_refused_out_of_the_isr(make_cluster):
    """``unclean.leader.election.enable`` is off (Kafka's default): a partition whose only
    in-sync replica died stays offline when its other replica comes back, until an UNCLEAN
    ElectLeaders (KIP-460) elects that replica; a preferred election while the preferred
    replica is down is PREFERRED_LEADER_NOT_AVAILABLE."""
    cluster = make_cluster()
    controller = _controller(cluster)
    first, second = [b for b in sorted(cluster.brokers) if b != controller]
    wire = Wire(cluster.brokers[controller].bootstrap)
    try:
        _create_on(wire, "u", (first, second))
        tp = TopicPartition("u", 0)
        cluster.wait_for_isr(tp, 2)
        cluster.stop(second)
        wait_until(lambda: cluster.rm(controller).states[tp].isr == (first,),
                   "the ISR to shrink to the first replica")
        cluster.stop(first)
        wait_until(lambda: cluster.rm(controller).states[tp].leader == -1, "no leader")
        cluster.start(second)
        wait_until(lambda: second in cluster.rm(controller).live_brokers, "second back")
        assert _elect(wire, 0, "u", [0])[0][0] == codes.PREFERRED_LEADER_NOT_AVAILABLE
        assert cluster.rm(controller).states[tp].leader == -1  # the clean rules keep it down
        assert _elect(wire, 1, "u", [0]) == [(codes.NONE, None)]
        state = cluster.rm(controller).states[tp]
        assert (state.leader, state.isr) == (second, (second,))
        assert _elect(wire, 1, "u", [0])[0][0] == codes.ELECTION_NOT_NEEDED
    finally:
        wire.close()


# --- Kafka 4.4's tools against three brokers ---------------------------------------------------


@pytest.mark.kafka
@pytest.mark.slow
def test_kafka_reassign_partitions_and_leader_election_tools(make_cluster, tmp_path):
    import time

    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    cluster = make_cluster()
    controller = _controller(cluster)
    other = next(b for b in cluster.brokers if b != controller)
    # Any broker will do as the bootstrap: the admin client asks the controller it names.
    bootstrap = cluster.brokers[other].bootstrap
    run_dir = tmp_path / "tools"
    run_dir.mkdir()

    def tool(main_class, *args):
        done = ref.run_tool(main_class, ["--bootstrap-server", bootstrap, *args],
                            run_dir=run_dir, timeout_s=60)
        return done.returncode, done.stdout, done.stderr

    wire = Wire(cluster.brokers[controller].bootstrap)
    try:
        ct = wire.m(19, 7)
        r = wire.call(19, 7, validate_only=False, timeout=TIMEOUT, topics=(ct.CreatableTopic(
            name="tool", num_partitions=-1, replication_factor=-1, configs=(),
            assignments=tuple(ct.CreatableReplicaAssignment(partition_index=p, broker_ids=(0,))
                              for p in (0, 1))),))
        assert int(r.topics[0].error_code) == 0
    finally:
        wire.close()
    wait_until(lambda: all(cluster.leader_of(TopicPartition("tool", p)) == 0 for p in (0, 1)),
               "broker 0 to lead both partitions")
    values = [b"t%d" % i for i in range(30)]
    assert produce_confluent(cluster.bootstrap, "tool", values) == [None] * len(values)

    reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    topics_file = run_dir / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": "tool"}]}))
    rc, out, err = tool(reassign, "--generate", "--topics-to-move-json-file", str(topics_file),
                        "--broker-list", "1,2")
    assert rc == 0, err[-2000:]
    proposed = json.loads(out.split("Proposed partition reassignment configuration")[1])
    plan = {(p["topic"], p["partition"]): p["replicas"] for p in proposed["partitions"]}
    assert set(plan) == {("tool", 0), ("tool", 1)}
    assert all(len(r) == 1 and r[0] in (1, 2) for r in plan.values())  # RF kept
    plan_file = run_dir / "plan.json"
    plan_file.write_text(json.dumps(proposed))
    rc, out, err = tool(reassign, "--execute", "--reassignment-json-file", str(plan_file))
    assert rc == 0, (out, err[-2000:])
    assert "Successfully started partition reassignments for tool-0,tool-1" in out
    deadline = time.monotonic() + 30
    while True:
        rc, out, err = tool(reassign, "--verify", "--reassignment-json-file", str(plan_file))
        assert rc == 0, (out, err[-2000:])
        if out.count("is completed.") == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "Reassignment of partition tool-0 is completed." in out
    assert "Reassignment of partition tool-1 is completed." in out
    assignment = cluster.rm(controller).assignments["tool"]
    assert {("tool", p): r for p, r in assignment.partitions.items()} == plan
    assert not assignment.adding_replicas and not assignment.removing_replicas
    rc, out, err = tool(reassign, "--list")
    assert rc == 0 and "No partition reassignments found." in out, (out, err[-2000:])

    election = "org.apache.kafka.tools.LeaderElectionCommand"
    rc, out, err = tool(election, "--election-type", "preferred", "--all-topic-partitions")
    assert rc == 0, (out, err[-2000:])
    for p, replicas in ((0, plan[("tool", 0)]), (1, plan[("tool", 1)])):
        wait_until(lambda: cluster.leader_of(TopicPartition("tool", p)) == replicas[0],
                   f"the preferred replica to lead tool-{p}")
    rc, out, err = tool(election, "--election-type", "preferred", "--topic", "tool",
                        "--partition", "0")
    assert rc == 0 and "Valid replica already elected for partitions tool-0" in out, out
    assert consume_all(cluster.bootstrap, "tool", len(values)) == values
