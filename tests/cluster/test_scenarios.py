"""The article's replication scenarios end to end (R§6.5, R§7): a ZooKeeper, three
``seglog serve`` processes, real clients (confluent-kafka) recording a history, process faults
(kill -9, SIGSTOP), then heal, final read, the replicas' files and the checker.

- S1: 3 replicas, acks=all, min.insync.replicas=2; a follower killed, then the leader: writes
  carry on once the ISR shrinks, nothing acknowledged is lost, no duplicate.
- S2: two of three down: new sends fail with NOT_ENOUGH_REPLICAS (19), definitely not
  written; one returns and writes resume.
- S3: min.insync.replicas=3: one broker down blocks every write until it rejoins.
- S6: acks=1 and a leader crash under load: acknowledged writes may be lost, but nothing a
  consumer read ever is (committed-read-lost forbidden).
- Negative control: the leader dies while both followers stall; with ``ack_on_append`` (a
  test break, ``seglog serve --test-break``: acks=all answered after the local append) the
  checker must report lost-write, and without it the same schedule must lose nothing.
- S17-like: transactional producers commit and abort (seeded) over every partition while the
  transaction coordinator's broker is killed; read_committed never sees an aborted record and
  every committed transaction is whole. With ``read_committed_sees_aborted`` (a test break:
  a read_committed Fetch answered without its aborted transactions) the checker must report
  aborted-read.

Each run keeps its history, broker output, data directories and the checker's summary under
its tmp_path. The Kafka system test these follow is ``tests/kafkatest/tests/core/
replication_test.py`` (clean/hard bounce of the leader with ``validate_delivery``), with
Jepsen's checker (``jepsen.tests.kafka``) over the history.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

from harness import faults
from harness.scenario import ScenarioRun

#: The broker's cluster mode: B's ZooKeeper client, C's controller, E1's replica manager,
#: E2's fetcher. A real probe of the modules, not a guess.
MISSING = [name for name in ("seglog.cluster.zk_client", "seglog.cluster.controller",
                             "seglog.cluster.replica_manager", "seglog.cluster.fetcher")
           if importlib.util.find_spec(name) is None]

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(bool(MISSING), reason=f"the broker's cluster mode is missing {MISSING}"),
]

#: The scenarios take about eight minutes together, beyond the default run's budget: they run
#: when selected with ``-m cluster`` (CI's cluster step) or with SEGLOG_CLUSTER_SCENARIOS=1.
SCENARIOS_ENV = "SEGLOG_CLUSTER_SCENARIOS"


@pytest.fixture(autouse=True)
def _selected(request):
    if os.environ.get(SCENARIOS_ENV, "") not in ("", "0"):
        return
    if any(name in (request.config.option.markexpr or "") for name in ("cluster", "soak")):
        return
    pytest.skip(f"the cluster scenarios take ~5 min: run them with -m cluster or "
                f"{SCENARIOS_ENV}=1")


#: Settings of the article's set-up: 3 replicas, acks=all, min.insync.replicas=2.
MIN_ISR_2 = {"min.insync.replicas": 2}


def now_ns() -> int:
    return time.time_ns()


@pytest.fixture
def run_factory(tmp_path, zk_connect):
    """``make(**kwargs)`` -> a started :class:`ScenarioRun` in this test's tmp_path; every run
    is stopped after the test."""
    runs = []

    def make(*, topic_config=None, replication_factor: int = 3, **kwargs) -> ScenarioRun:
        run = ScenarioRun(tmp_path / f"run{len(runs)}", zk_connect, **kwargs)
        runs.append(run)
        return run.up(topic_config=topic_config, replication_factor=replication_factor)

    yield make
    for run in runs:
        run.close()


def follower_of(run: ScenarioRun, partition: int) -> int:
    leader = run.leader(partition)
    return next(b for b in run.isr(partition) if b != leader)


def test_s1_one_broker_down_writes_carry_on_nothing_lost(run_factory):
    """S1, the article: "One broker down: the ISR is two, still at the minimum, so writes
    carry on and nothing acknowledged is lost" — a follower, then (separately) the leader."""
    run = run_factory(topic_config=MIN_ISR_2)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()

    follower = follower_of(run, 0)
    run.cluster.kill(follower)
    run.wait_for(f"broker {follower} out of the ISR of p0",
                 lambda: follower not in run.isr(0) and run.leader(0) >= 0)
    shrunk = now_ns()
    run.wait_sends("writes after the follower's loss", 0, 20, invoked_after_ns=shrunk)
    run.cluster.start(follower)
    run.wait_isr_full()

    leader = run.leader(0)
    run.cluster.kill(leader)
    run.wait_for(f"a new leader of p0 other than {leader}",
                 lambda: run.leader(0) not in (-1, leader))
    elected = now_ns()
    run.wait_sends("writes on the new leader", 0, 20, invoked_after_ns=elected)

    result = run.heal_and_check()
    assert result.valid, result.summary()
    assert result.stats["send-ok"] >= 60


def test_s2_two_down_not_enough_replicas_then_writes_resume(run_factory):
    """S2, the article: "Two brokers down: the ISR is one, below the minimum, so the leader
    rejects writes and the producer gets a NotEnoughReplicas error instead of a silent loss"
    (a producer without retries, so 19 means definitely not written: G1a checks it)."""
    run = run_factory(topic_config=MIN_ISR_2)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=False, max_in_flight=1, retries=0)
    run.wait_sends("first acknowledged writes", 0, 10)
    run.check_baseline()

    leader = run.leader(0)
    down = [b for b in run.cluster.brokers if b != leader]
    for broker in down:
        run.cluster.kill(broker)
    run.wait_for("the ISR of p0 down to its leader", lambda: run.isr(0) == [run.leader(0)])
    shrunk = now_ns()
    refused = run.wait_sends("NOT_ENOUGH_REPLICAS on p0", 0, 5, outcome="fail",
                             invoked_after_ns=shrunk, error="NOT_ENOUGH_REPLICAS")
    assert all(e["code"] == 19 for e in refused)
    assert run.sends(0, invoked_after_ns=shrunk) == [], "acknowledged below min.insync"

    returned = now_ns()
    run.cluster.start(down[0])
    run.wait_for("p0's ISR back to two", lambda: len(run.isr(0)) >= 2)
    run.wait_sends("writes resumed", 0, 10, invoked_after_ns=returned)

    result = run.heal_and_check()
    assert result.valid, result.summary()


def test_s3_min_isr_3_one_restart_blocks_every_write(run_factory):
    """S3, the article: "set min.insync.replicas=3 on the same three replicas and a single
    broker restart blocks every write to the partition"."""
    run = run_factory(topic_config={"min.insync.replicas": 3})
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=False, max_in_flight=1, retries=0)
    run.wait_sends("first acknowledged writes", 0, 10)
    run.check_baseline()

    follower = follower_of(run, 0)
    run.cluster.kill(follower)
    run.wait_for(f"broker {follower} out of p0's ISR", lambda: follower not in run.isr(0))
    blocked_from = now_ns()
    run.wait_sends("NOT_ENOUGH_REPLICAS on p0", 0, 5, outcome="fail",
                   invoked_after_ns=blocked_from, error="NOT_ENOUGH_REPLICAS")
    restarting = now_ns()
    assert [p for p in run.partitions
            if run.sends(p, invoked_after_ns=blocked_from, invoked_before_ns=restarting)] == []
    run.cluster.start(follower)
    run.wait_isr_full()
    rejoined = now_ns()
    run.wait_sends("writes after the rejoin", 0, 10, invoked_after_ns=rejoined)

    result = run.heal_and_check()
    assert result.valid, result.summary()


def test_s6_acks_1_leader_crash_loses_no_read_record(run_factory):
    """S6: acks=1 and kill -9 of the leader under load. "With acks=1 the leader has written
    it, but if the leader dies before any follower copies the record, the record is gone":
    lost-write is allowed; a record a consumer read never is (it was below the HW)."""
    run = run_factory(topic_config=MIN_ISR_2)
    run.start_consumer()
    run.start_producer("p0", acks="1", idempotent=False, max_in_flight=5, retries=3,
                       interval_s=0.001)
    run.wait_sends("first acknowledged writes", 0, 50)
    run.check_baseline()
    leader = run.leader(0)
    run.cluster.kill(leader)
    run.wait_for(f"a new leader of p0 other than {leader}",
                 lambda: run.leader(0) not in (-1, leader))
    run.wait_sends("writes on the new leader", 0, 20, invoked_after_ns=now_ns())

    result = run.heal_and_check()
    # A lost acks=1 write's offset is reused by the new leader: the acknowledgement and the
    # log then disagree at that offset (inconsistent-offsets) — but reads never may.
    assert result.excluding("lost-write", "inconsistent-offsets") == [], result.summary()
    lost = {(a.partition, a.offset) for a in result.of_kind("lost-write")}
    for anomaly in result.of_kind("inconsistent-offsets"):
        assert (anomaly.partition, anomaly.offset) in lost, anomaly
        assert len(read_values(anomaly)) == 1, f"reads disagree: {anomaly}"
    assert "committed-read-lost" not in result.kinds()


def read_values(anomaly) -> set[int]:
    """The values polls and the final read saw at an inconsistent offset."""
    values = set()
    for event in anomaly.events:
        if event["f"] == "poll":
            pairs = event["values"].get(str(anomaly.partition), [])
        elif event["f"] == "final-read":
            pairs = event["records"]
        else:
            continue
        values |= {v for o, v in pairs if o == anomaly.offset}
    return values


ACK_ON_APPEND_HONOURED = "ack_on_append" in open(
    importlib.util.find_spec("seglog.cluster.replica_manager").origin, encoding="utf-8").read() \
    if not MISSING else False


@pytest.mark.parametrize("broken", [False, pytest.param(True, marks=pytest.mark.skipif(
    not ACK_ON_APPEND_HONOURED, reason="the replica manager does not honour ack_on_append"))],
    ids=["correct", "ack_on_append"])
def test_leader_dies_while_followers_stall(run_factory, broken):
    """The negative control. Both followers of p0 freeze (SIGSTOP, shorter than
    replica.lag.time.max.ms, so they stay in the ISR) while acks=all sends go to the leader;
    the leader is killed; the followers resume and one is elected. A correct leader cannot
    have acknowledged anything they lack; with ``ack_on_append`` it did, and the checker
    must say lost-write."""
    run = run_factory(topic_config=MIN_ISR_2,
                      test_breaks=("ack_on_append",) if broken else ())
    run.start_consumer()
    # Not idempotent: an idempotent producer whose acknowledged batches vanish stops with a
    # fatal OUT_OF_ORDER_SEQUENCE_NUMBER (librdkafka), and the run needs writes afterwards.
    run.start_producer("p0", acks="all", idempotent=False, max_in_flight=1, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()

    leader = run.leader(0)
    followers = [b for b in run.cluster.brokers if b != leader]
    for broker in followers:
        run.cluster.pause(broker)
    stalled = now_ns()
    time.sleep(1.5)  # < replica.lag.time.max.ms (3 s) and the session timeout (4 s)
    acknowledged_during_stall = run.sends(0, invoked_after_ns=stalled)
    run.cluster.kill(leader)
    for broker in followers:
        run.cluster.resume(broker)
    run.wait_for(f"a new leader of p0 other than {leader}",
                 lambda: run.leader(0) not in (-1, leader))
    run.wait_sends("writes on the new leader", 0, 10, invoked_after_ns=now_ns())

    result = run.heal_and_check()
    if broken:
        assert acknowledged_during_stall, "ack_on_append acknowledged nothing while stalled"
        lost = result.of_kind("lost-write")
        assert lost, "the checker missed the writes ack_on_append lost:\n" + result.summary()
        assert {a.partition for a in lost} <= set(run.partitions)
    else:
        assert acknowledged_during_stall == [], "acks=all answered while the ISR stalled"
        assert result.valid, result.summary()


ELECT_MOST_RECENT_HONOURED = "elect_most_recent" in open(
    importlib.util.find_spec("seglog.cluster.controller").origin, encoding="utf-8").read() \
    if not MISSING else False


@pytest.mark.parametrize("variant", [
    "clean",
    "unclean_enabled",
    pytest.param("elect_most_recent", marks=pytest.mark.skipif(
        not ELECT_MOST_RECENT_HONOURED, reason="the controller does not honour elect_most_recent")),
])
def test_s5_every_isr_member_down_and_a_laggard_returns(run_factory, variant):
    """S5, the article: "If every ISR member is down and a lagging replica comes back,
    electing it as leader restores availability but makes its shorter log the source of
    truth, so committed records vanish. By default Kafka (since 0.11) waits for an in-sync
    replica instead."

    Broker F (a follower of p0) is killed and leaves the ISR; writes go on to the other two;
    both are killed; F returns. ``clean`` (unclean.leader.election.enable=false): p0 waits
    offline (leader -1, ISR = the last member standing) for that member, nothing
    acknowledged is lost. ``unclean_enabled`` (the topic allows
    it): F is elected and the checker must report lost-write and committed-read-lost.
    ``elect_most_recent`` (a test break: the controller ignores the ISR, unclean
    election off): the same loss must be caught — the negative control of the ISR rule.
    In every variant the returning replicas truncate to the leader's log (convergence)."""
    breaks = ("elect_most_recent",) if variant == "elect_most_recent" else ()
    config = {"unclean.leader.election.enable": variant == "unclean_enabled"}
    run = run_factory(topic_config=config, test_breaks=breaks)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=False, max_in_flight=1, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 10)
    run.check_baseline()

    laggard = follower_of(run, 0)
    run.cluster.kill(laggard)
    run.wait_for(f"broker {laggard} out of every ISR",
                 lambda: all(laggard not in run.isr(p) and run.leader(p) >= 0
                             for p in run.partitions))
    unseen_by_laggard = run.wait_sends("writes the laggard never saw", 0, 20,
                                       invoked_after_ns=now_ns())
    # Read by a consumer, so committed: an election of the laggard must lose them.
    run.wait_polled("the consumer reading them", unseen_by_laggard)
    others = [b for b in run.cluster.brokers if b != laggard]
    for broker in others:
        run.cluster.kill(broker)
    offline_from = now_ns()
    run.cluster.start(laggard)
    if variant == "clean":
        # Nothing can be elected: wait for the laggard to be the controller (it is the only
        # live broker), then bring back an ISR member, which must be the one elected.
        run.wait_for("the laggard as controller", lambda: run.cluster.controller_id() == laggard)
        run.wait_for("p0 offline", lambda: run.leader(0) == -1)
        last_in_sync = run.isr(0)
        assert laggard not in last_in_sync and len(last_in_sync) == 1, run.states()
        returning = now_ns()
        run.cluster.start(last_in_sync[0])
        run.wait_for(f"broker {last_in_sync[0]} elected for p0",
                     lambda: run.leader(0) == last_in_sync[0])
        assert run.sends(0, invoked_after_ns=offline_from, invoked_before_ns=returning) == [], \
            "acknowledged while p0 had no in-sync replica"
    else:
        run.wait_for(f"the laggard {laggard} elected for p0", lambda: run.leader(0) == laggard)
    run.wait_sends("writes on the elected leader", 0, 10, invoked_after_ns=now_ns())

    result = run.heal_and_check()
    if variant == "clean":
        assert result.valid, result.summary()
    else:
        kinds = result.kinds()
        assert {"lost-write", "committed-read-lost"} <= kinds, result.summary()
        assert not any(k.startswith("replica-") for k in kinds), result.summary()


TRUNCATE_TO_HW_HONOURED = "truncate_to_hw" in open(
    importlib.util.find_spec("seglog.cluster.fetcher").origin, encoding="utf-8").read() \
    if not MISSING else False


SKIP_EPOCH_CHECK_HONOURED = "skip_epoch_check" in open(
    importlib.util.find_spec("seglog.cluster.replica_manager").origin, encoding="utf-8").read() \
    if not MISSING else False


@pytest.mark.parametrize("broken", [
    None,
    pytest.param("truncate_to_hw", marks=pytest.mark.skipif(
        not TRUNCATE_TO_HW_HONOURED, reason="the fetcher does not honour truncate_to_hw")),
    pytest.param("skip_epoch_check", marks=pytest.mark.skipif(
        not SKIP_EPOCH_CHECK_HONOURED,
        reason="the replica manager does not honour skip_epoch_check"))],
    ids=["by_epoch", "truncate_to_hw", "skip_epoch_check"])
def test_s9_rejoining_follower_truncates_by_epoch_not_to_its_hw(run_factory, broken):
    """S9, KIP-101's second scenario (``EpochDrivenReplicationProtocolAcceptanceTest.
    shouldNotAllowDivergentLogs``): RF 2, replicas A (leader) and B. B stops cleanly; A
    writes alone; A stops and loses the tail of its log below B's high watermark (unflushed
    data, R§6.2); A returns (the last ISR member) and writes new records in a new epoch over
    the offsets it lost; B returns. By epoch, B truncates to where A's log diverges and the
    replicas converge; the acknowledged records in A's lost tail are reported as lost (the
    expected cost of the cut). With ``truncate_to_hw`` (Kafka before KIP-101) B keeps its
    records up to its own HW over A's new ones; with ``skip_epoch_check`` A never answers
    B's stale ``LastFetchedEpoch`` with ``DivergingEpoch`` and B keeps its whole tail: either
    way the replicas diverge and the checker must say so."""
    run = run_factory(topic_config={"min.insync.replicas": 1},
                      test_breaks=(broken,) if broken else (), replication_factor=2)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=False, max_in_flight=1, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    # A follower learns the high watermark one fetch behind the leader, so B's may still be
    # short of the 20 (by a batch: it was 9 once). A send invoked after they were
    # acknowledged is, once acknowledged itself, in a fetch answer B read with an HW that
    # counts all 20: B's checkpoint at its clean stop holds at least that.
    run.wait_sends("a send B fetched with the 20's high watermark", 0, 1,
                   invoked_after_ns=now_ns())

    a = run.leader(0)
    b = next(r for r in run.isr(0) if r != a)
    run.cluster.stop(b)
    run.wait_for(f"broker {b} out of p0's ISR", lambda: run.isr(0) == [a])
    run.wait_sends("writes on A alone", 0, 10, invoked_after_ns=now_ns())
    run.cluster.stop(a)
    from seglog.filenames import REPLICATION_OFFSET_CHECKPOINT
    from seglog.storage.checkpoints import OffsetCheckpointFile

    hw_b = OffsetCheckpointFile(Path(run.cluster.brokers[b].data_dir)
                                / REPLICATION_OFFSET_CHECKPOINT).read()[(run.topic, 0)]
    assert hw_b >= 10, hw_b
    cut_at = faults.cut_log_to(run.cluster.brokers[a].data_dir, run.topic, 0, hw_b - 5)
    assert cut_at < hw_b
    run.cluster.start(a)
    run.wait_for(f"broker {a} leading p0 again", lambda: run.leader(0) == a)
    run.wait_sends("new writes over the lost offsets", 0, 20, invoked_after_ns=now_ns())
    run.cluster.start(b)

    result = run.heal_and_check(replicas=2, require_full_isr=not broken)
    divergence = {k for k in result.kinds() if k.startswith("replica-")}
    if broken:
        # A batch that differs below the HW: a conflict, not a replica merely behind.
        assert "replica-divergence" in divergence, result.summary()
    else:
        assert divergence == set(), result.summary()
        assert result.of_kind("lost-write"), "the cut's acknowledged records must be reported"
        # The cut's consequences, all expected: its acknowledged and read records gone,
        # their offsets reused by the new epoch (so later sends land lower, and a consumer
        # past the new end is reset back).
        assert result.excluding("lost-write", "inconsistent-offsets", "committed-read-lost",
                                "nonmonotonic-send", "nonmonotonic-poll") == [], \
            result.summary()


def test_s10_zombie_leader_paused_past_its_session(run_factory):
    """S10: the leader freezes (SIGSTOP) past its ZooKeeper session; a new leader is elected
    and takes writes; the old one continues (SIGCONT) as a zombie. No acks=all write it could
    acknowledge is missing (its ISR writes fail the zkVersion check, its followers fetch
    elsewhere), it rejoins as a follower at the higher epoch and truncates its tail, and the
    replicas converge."""
    run = run_factory(topic_config=MIN_ISR_2)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    leader = run.leader(0)
    epoch = run.state(0)["leader_epoch"]
    run.cluster.pause(leader)
    run.wait_for(f"a new leader of p0 other than the paused {leader}",
                 lambda: run.leader(0) not in (-1, leader))
    assert run.state(0)["leader_epoch"] > epoch
    run.wait_sends("writes on the new leader", 0, 20, invoked_after_ns=now_ns())
    run.cluster.resume(leader)
    run.wait_for(f"broker {leader} back in p0's ISR", lambda: leader in run.isr(0), 60)

    result = run.heal_and_check()
    assert result.valid, result.summary()


def test_s11_leader_cut_from_zookeeper_only(run_factory):
    """S11: the leader loses ZooKeeper alone (a black-hole relay on its ZooKeeper connection)
    while clients and followers still reach it; its session expires, another leader is
    elected; the cut leader cannot get an acks=all write acknowledged (its ISR shrink needs
    ZooKeeper); healed, it rejoins as a follower. Nothing acknowledged is lost."""
    run = run_factory(topic_config=MIN_ISR_2, zookeeper_relays=True)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    leader = run.leader(0)
    run.relays[leader].block()
    run.wait_for(f"a new leader of p0 other than the cut {leader}",
                 lambda: run.leader(0) not in (-1, leader))
    run.wait_sends("writes on the new leader", 0, 20, invoked_after_ns=now_ns())
    run.relays[leader].heal()
    run.wait_for(f"broker {leader} back in p0's ISR", lambda: leader in run.isr(0), 60)

    result = run.heal_and_check()
    assert result.valid, result.summary()


def test_s18_forced_session_expiry_of_controller_leader_and_follower(run_factory):
    """S18: the ZooKeeper session of the controller, then of p0's leader, then of one of its
    followers, is expired in turn (a second client on the broker's own session; the process
    keeps running). Each broker registers again with a new broker epoch; the controller role
    and p0's leadership move as Kafka's rules say; nothing acknowledged is lost."""
    run = run_factory(topic_config=MIN_ISR_2, session_hook=True)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()

    def expire(broker: int) -> None:
        epoch = run.cluster.broker_epoch(broker)
        run.cluster.expire_session(broker)
        run.wait_for(f"broker {broker} registered again with a new epoch",
                     lambda: run.cluster.broker_epoch(broker) not in (None, epoch))
        run.wait_isr_full()
        run.wait_sends("writes after it", 0, 10, invoked_after_ns=now_ns())

    controller = run.cluster.controller_id()
    expire(controller)
    leader = run.leader(0)
    epoch = run.state(0)["leader_epoch"]
    expire(leader)
    assert run.state(0)["leader_epoch"] > epoch  # its session's end made the controller elect
    expire(follower_of(run, 0))

    result = run.heal_and_check()
    assert result.valid, result.summary()


@pytest.mark.parametrize("unclean", [False, True], ids=["unclean_off", "unclean_on"])
def test_s4_min_isr_1_acks_all_behaves_like_acks_1(run_factory, unclean):
    """S4, the article: "Leave min.insync.replicas at 1 and acks=all stops meaning much ...
    an acks=all write succeeds because the lone leader is the whole ISR, and it is lost if
    that leader then dies." Both followers freeze until the leader shrinks the ISR to itself
    (session timeout 8 s here, so only the lag check removes them); writes are acknowledged
    by the leader alone; the leader is killed. ``unclean_off``: p0 waits offline (leader -1,
    ISR = [the dead leader]) and nothing is lost once it returns with its disk.
    ``unclean_on``: unclean election is then turned on for the topic (through ZooKeeper, as
    ``kafka-configs --zookeeper`` does), a follower is elected, and the writes acknowledged
    while the ISR was the leader alone must be reported lost."""
    run = run_factory(topic_config={"min.insync.replicas": 1},
                      broker_configs={"zookeeper.session.timeout.ms": 8000})
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=False, max_in_flight=1, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()

    leader = run.leader(0)
    followers = [b for b in run.cluster.brokers if b != leader]
    for broker in followers:
        run.cluster.pause(broker)
    run.wait_for("the ISR of p0 shrunk to its leader", lambda: run.isr(0) == [leader])
    alone = run.wait_sends("writes acknowledged by the leader alone", 0, 10,
                           invoked_after_ns=now_ns())
    run.cluster.kill(leader)
    for broker in followers:
        run.cluster.resume(broker)
    run.wait_for("p0 offline", lambda: run.leader(0) == -1, 60)
    assert run.isr(0) == [leader]
    if unclean:
        from seglog.cluster.zk_client import KafkaZkClient

        zk = KafkaZkClient(run.cluster.zookeeper_connect, session_timeout_ms=4000)
        zk.start()
        try:
            zk.set_topic_config(run.topic, {**zk.topic_config(run.topic),
                                            "unclean.leader.election.enable": "true"})
        finally:
            zk.close()
        run.wait_for("a follower elected uncleanly", lambda: run.leader(0) in followers)
        run.wait_sends("writes on the unclean leader", 0, 10, invoked_after_ns=now_ns())
    else:
        run.cluster.start(leader)
        run.wait_for(f"broker {leader} elected again", lambda: run.leader(0) == leader)

    result = run.heal_and_check()
    if unclean:
        lost = {a.value for a in result.of_kind("lost-write")}
        assert lost & {e["value"] for e in alone}, result.summary()
        assert not any(k.startswith("replica-") for k in result.kinds()), result.summary()
    else:
        assert result.valid, result.summary()


def test_s14_controller_killed_the_next_one_fences_it(run_factory):
    """S14: kill -9 the controller. Another broker wins ``/controller`` with a controller
    epoch one higher; partitions the dead broker led get new leaders from the new controller
    (their state znodes carry the new controller epoch); nothing acknowledged is lost."""
    run = run_factory(topic_config=MIN_ISR_2)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    client = run.cluster.zookeeper_client()
    controller = run.cluster.controller_id()
    epoch = int(client.get("/controller_epoch")[0])
    led = [p for p in run.partitions if run.leader(p) == controller]
    run.cluster.kill(controller)
    run.wait_for("a new controller", lambda: run.cluster.controller_id() not in (None,
                                                                              controller))
    assert int(client.get("/controller_epoch")[0]) == epoch + 1
    for partition in led:
        run.wait_for(f"a new leader of p{partition}",
                     lambda: run.leader(partition) not in (-1, controller))
        assert run.state(partition)["controller_epoch"] == epoch + 1
    run.wait_sends("writes after the failover", 0, 10, invoked_after_ns=now_ns())

    result = run.heal_and_check()
    assert result.valid, result.summary()


#: S19 runs on demand only: `pytest -m soak tests/cluster` (180 s of faults) or
#: SEGLOG_SOAK_S=<seconds of faults>; SEGLOG_SOAK_SEED=<n> replays a schedule.
SOAK_S = float(os.environ.get("SEGLOG_SOAK_S", "0") or 0)
SOAK_S_DEFAULT = 180.0


@pytest.mark.soak
def test_s19_seeded_random_faults(run_factory, request):
    """S19: a seeded random schedule of one fault at a time (kill -9 then restart, SIGSTOP
    then SIGCONT, forced session expiry, ZooKeeper cut by a relay then healed) on random
    brokers for SEGLOG_SOAK_S seconds, acks=all and min.insync.replicas=2; then the full
    checker must find nothing. The seed is printed and kept in the run's ``seed`` file."""
    soak_s = SOAK_S or (SOAK_S_DEFAULT if "soak" in (request.config.option.markexpr or "")
                        else 0.0)
    if soak_s <= 0:
        pytest.skip("on demand: pytest -m soak, or SEGLOG_SOAK_S=<seconds> "
                    "[SEGLOG_SOAK_SEED=<seed> to replay]")
    import random

    seed = int(os.environ.get("SEGLOG_SOAK_SEED") or random.randrange(2 ** 32))
    print(f"S19 seed {seed} (replay: SEGLOG_SOAK_SEED={seed})")
    rng = random.Random(seed)
    run = run_factory(topic_config=MIN_ISR_2, session_hook=True, zookeeper_relays=True)
    (run.run_dir / "seed").write_text(f"{seed}\n")
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000,
                       duration_s=soak_s + 120)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    deadline = time.monotonic() + soak_s
    schedule = []
    while time.monotonic() < deadline:
        fault, broker = rng.choice(["kill", "pause", "expire", "cut"]), rng.choice(
            sorted(run.cluster.brokers))
        hold_s = rng.uniform(0.5, 6.0)
        schedule.append((fault, broker, round(hold_s, 2)))
        if fault == "kill":
            run.cluster.kill(broker)
            time.sleep(hold_s)
            run.cluster.start(broker)
        elif fault == "pause":
            run.cluster.pause(broker)
            time.sleep(hold_s)
            run.cluster.resume(broker)
        elif fault == "expire":
            run.cluster.expire_session(broker)
            time.sleep(hold_s)
        else:
            run.relays[broker].block()
            time.sleep(hold_s)
            run.relays[broker].heal()
        run.wait_isr_full(timeout_s=90)
    (run.run_dir / "schedule").write_text("\n".join(map(str, schedule)) + "\n")
    result = run.heal_and_check()
    assert result.valid, f"seed {seed}, schedule {schedule}\n{result.summary()}"


def test_s13_slow_follower_leaves_and_rejoins_the_isr(run_factory):
    """S13: one follower of p0 stalls (SIGSTOP) longer than replica.lag.time.max.ms but
    shorter than its session (8 s here), twice, running in between: its leader shrinks the
    ISR without it (acks=all carries on with min.insync.replicas=2) and expands it again once
    it has caught up; nothing acknowledged is lost."""
    run = run_factory(topic_config=MIN_ISR_2,
                      broker_configs={"zookeeper.session.timeout.ms": 8000})
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    slow = follower_of(run, 0)
    for _cycle in range(2):
        run.cluster.pause(slow)
        run.wait_for(f"broker {slow} out of p0's ISR", lambda: slow not in run.isr(0))
        run.wait_sends("writes without it", 0, 10, invoked_after_ns=now_ns())
        run.cluster.resume(slow)
        run.wait_for(f"broker {slow} back in p0's ISR", lambda: slow in run.isr(0))
    leader = run.leader(0)
    changes = [line for line in run.isr_changes() if f"broker {leader}:" in line
               and f"ISR of {run.topic}-0 " in line]
    assert sum(" shrink ISR" in line for line in changes) >= 2, changes
    assert sum(" expand ISR" in line for line in changes) >= 2, changes

    result = run.heal_and_check()
    assert result.valid, result.summary()


def test_s16_group_offsets_survive_the_coordinators_death(run_factory):
    """S16: a consumer group consumes and commits (synchronously, at-least-once) while the
    broker that coordinates it (the leader of its ``__consumer_offsets`` partition) is killed:
    FindCoordinator moves, commits succeed again, and a new member of the group starts from
    the committed offsets: duplicates allowed, gaps forbidden, nothing lost."""
    from confluent_kafka.admin import AdminClient

    from harness.workload import GroupConsumer

    run = run_factory(topic_config=MIN_ISR_2,
                      broker_configs={"offsets.topic.num.partitions": 3})
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    bootstrap = run.cluster.bootstrap_servers
    first = GroupConsumer(run.history, bootstrap, run.topic, "s16", name="g0", duration_s=120)
    first.start()
    run.wait_for("the group consuming and committing",
                 lambda: first.commits["ok"] >= 3 and first.error is None)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups(["s16"])["s16"].result(timeout=20)
    coordinator = description.coordinator.id
    committed_before = dict(first.committed)
    run.cluster.kill(coordinator)
    killed_commits = first.commits["ok"]
    run.wait_for("commits again after the coordinator moved",
                 lambda: first.commits["ok"] >= killed_commits + 3, 60)
    first.stop()
    first.join(timeout=30)
    assert not first.is_alive() and first.error is None, first.error
    second = GroupConsumer(run.history, bootstrap, run.topic, "s16", name="g1", duration_s=60)
    second.start()
    run.wait_for("the new member polling every partition",
                 lambda: set(second.first_polled) == set(run.partitions), 60)
    second.stop()
    second.join(timeout=30)
    assert committed_before, "nothing was committed before the kill"
    for partition in run.partitions:
        resumed = second.first_polled[partition]
        assert resumed >= committed_before.get(partition, 0), (
            f"p{partition}: the group resumed at {resumed}, before the offset "
            f"{committed_before.get(partition)} committed before the coordinator died")
        assert resumed <= first.last_polled.get(partition, -1) + 1, (
            f"p{partition}: the group resumed at {resumed} after reading up to "
            f"{first.last_polled.get(partition)}: a gap")
    run.cluster.start(coordinator)

    result = run.heal_and_check()
    assert result.valid, result.summary()


READ_COMMITTED_BREAK_HONOURED = "read_committed_sees_aborted" in open(
    importlib.util.find_spec("seglog.server.apis.data_fetch").origin, encoding="utf-8").read()

#: Transactions in the scenarios: one ``__transaction_state`` partition (so one broker
#: coordinates every transactional id), timed-out transactions aborted within a second.
TXN_BROKER_CONFIGS = {"transaction.state.log.num.partitions": 1,
                      "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}


@pytest.mark.parametrize("broken", [False, pytest.param(True, marks=pytest.mark.skipif(
    not READ_COMMITTED_BREAK_HONOURED,
    reason="the Fetch handler does not honour read_committed_sees_aborted"))],
    ids=["correct", "read_committed_sees_aborted"])
def test_s17_transactions_survive_the_coordinators_death(run_factory, broken):
    """S17-like, and the negative control of the checker's transaction checks. Two
    transactional producers each write a few records to several partitions per transaction
    and commit or abort it (seeded, about 40 % aborted); a read_committed and a
    read_uncommitted consumer poll throughout. The broker coordinating the transactions (the
    leader of ``__transaction_state-0``) is killed with -9; the producers carry on through the
    new coordinator (a commit caught by the kill is *unknown*: it must end all or nothing).
    The checker must find no aborted record visible to read_committed and every committed
    transaction whole in the read_committed final read; with ``read_committed_sees_aborted``
    it must report aborted-read, and only that."""
    from harness.history import READ_COMMITTED

    run = run_factory(topic_config=MIN_ISR_2, broker_configs=TXN_BROKER_CONFIGS,
                      test_breaks=("read_committed_sees_aborted",) if broken else ())
    run.start_consumer("rc", isolation=READ_COMMITTED)
    run.start_consumer("c0")
    producers = [run.start_txn_producer(f"tx{i}", seed=17 + i, duration_s=60.0)
                 for i in range(2)]

    def decided(outcome: str) -> int:
        for producer in producers:  # a producer that died fails the run at once
            assert producer.error is None, producer.error
        return sum(p.outcomes[outcome] for p in producers)

    run.wait_for("committed and aborted transactions",
                 lambda: decided("committed") >= 6 and decided("aborted") >= 3)
    run.check_baseline()
    coordinator = run.wait_for("a __transaction_state-0 leader", lambda: (
        (s := run.cluster.partition_state("__transaction_state", 0)) is not None
        and s["leader"] >= 0 and (int(s["leader"]),)))[0]
    before = decided("committed"), decided("aborted")
    run.cluster.kill(coordinator)
    run.wait_for("a new transaction coordinator", lambda: int(
        run.cluster.partition_state("__transaction_state", 0)["leader"]) not in (-1, coordinator))
    run.wait_for("transactions committed and aborted through the new coordinator",
                 lambda: decided("committed") >= before[0] + 6
                 and decided("aborted") >= before[1] + 3, 60)

    result = run.heal_and_check()
    assert result.stats.get("final-rc-partitions") == len(run.partitions), result.summary()
    if broken:
        found = result.of_kind("aborted-read")
        assert found, "the checker missed the aborted records read_committed saw:\n" \
            + result.summary()
        assert result.excluding("aborted-read") == [], result.summary()
    else:
        assert result.valid, result.summary()


def test_s15_zookeeper_frozen_leaders_keep_serving(tmp_path):
    """S15: ZooKeeper itself freezes (SIGSTOP) for longer than the session timeout while
    producing: the leaders keep serving acks=all writes (nothing can be elected while it is
    frozen); after SIGCONT nothing is lost. Whether a session survives the freeze is a race
    inside ZooKeeper (its session tracker runs on elapsed time, which a stop does not stop,
    against the clients' reconnects queued in its sockets): when no broker's session expired,
    nothing is elected at all; when one did, its broker registers again (a new broker epoch)
    and the controller's elections follow Kafka's rules (replication.md's table expects "no
    elections" unconditionally: not what ZooKeeper promises). The cluster has a ZooKeeper of
    its own here (the session's shared one is never frozen)."""
    run = ScenarioRun(tmp_path / "run", None)
    try:
        run.up(topic_config=MIN_ISR_2)
        run.start_consumer()
        run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5,
                           retries=1_000_000)
        run.wait_sends("first acknowledged writes", 0, 20)
        run.check_baseline()
        before = run.states()
        broker_epochs = {b: run.cluster.broker_epoch(b) for b in run.cluster.brokers}
        run.cluster.close_clients()  # the harness's own ZooKeeper client would block too
        run.cluster.pause_zookeeper()
        frozen, frozen_at = now_ns(), time.monotonic()
        try:
            run.wait_sends("writes while ZooKeeper is frozen", 0, 20, invoked_after_ns=frozen,
                           timeout_s=20)
            # Frozen past the 4 s session timeout.
            time.sleep(max(0.0, 5.0 - (time.monotonic() - frozen_at)))
            during = run.sends(0, invoked_after_ns=frozen)
        finally:
            run.cluster.resume_zookeeper()
        assert len(during) >= 20
        # Past one more session timeout every session has either been touched again or
        # expired, and an expired broker has registered again.
        time.sleep(5.0)
        run.wait_for("every broker registered", lambda: all(
            run.cluster.broker_epoch(b) is not None for b in run.cluster.brokers))
        run.wait_isr_full()
        expired = sorted(b for b, epoch in broker_epochs.items()
                         if run.cluster.broker_epoch(b) != epoch)
        if not expired:
            after = run.states()
            assert {p: s["leader_epoch"] for p, s in after.items()} == \
                {p: s["leader_epoch"] for p, s in before.items()}, (before, after)
        run.wait_sends("writes after the freeze", 0, 10, invoked_after_ns=now_ns())
        result = run.heal_and_check()
        assert result.valid, (f"sessions expired by the freeze: {expired or 'none'}; "
                              + result.summary())
    finally:
        run.close()


@pytest.mark.parametrize("target,how", [("leader", "hard"), ("controller", "clean")])
def test_s7_bounces_lose_nothing(run_factory, target, how):
    """S7, after Kafka's ``replication_test.py`` (``hard_bounce`` / ``clean_bounce`` of the
    leader or the controller, then ``validate_delivery``): three bounces in a row, each
    waiting for the ISR to be full again; every acknowledged record is read at the end and
    the idempotent producer leaves no duplicate."""
    run = run_factory(topic_config=MIN_ISR_2)
    run.start_consumer()
    run.start_producer("p0", acks="all", idempotent=True, max_in_flight=5, retries=1_000_000)
    run.wait_sends("first acknowledged writes", 0, 20)
    run.check_baseline()
    for _bounce in range(3):
        broker = run.leader(0) if target == "leader" else run.cluster.controller_id()
        if how == "hard":
            run.cluster.kill(broker)
        else:
            run.cluster.stop(broker)
        run.cluster.start(broker)
        run.wait_isr_full()
        run.wait_sends("writes after the bounce", 0, 10, invoked_after_ns=now_ns())
    producer = run.producers[0]
    producer.stop()
    producer.join(timeout=60)
    acknowledged = [e for p in run.partitions for e in run.sends(p)]
    run.wait_polled("the consumer reading every acknowledged record", acknowledged, 60)

    result = run.heal_and_check()
    assert result.valid, result.summary()
