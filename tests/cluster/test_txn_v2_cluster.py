"""Transactions v2 (KIP-890) in a ZooKeeper cluster of three: Kafka 4.4's Java producer
(``tests/server/java/TxnSteps.java``) at ``transaction.version`` 2 writes to two partitions
led by different brokers; the leaders add the partitions to the transaction with
AddPartitionsToTxn v5 to the coordinator's broker (KIP-890 part 2's implicit add), every
EndTxn v5 bumps the epoch. Then the coordinator's broker stops: the new coordinator loads the
state (``transaction.version`` 2 kept in the ``__transaction_state`` records), the producer
goes on with the same transactional id, and a read_committed consumer sees exactly the
committed records.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from seglog.bench.kafka import find_kafka

from test_coordinators import (  # noqa: F401 - make_cluster: the fixture
    _nested, _some, call, make_cluster, wait_until)
from test_txn_cluster import TXN_STATE, _read_committed, _setup

_REF, _WHY = find_kafka()
_REQUIRED = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
pytestmark = [pytest.mark.kafka, pytest.mark.skipif(_REF is None and not _REQUIRED,
                                                    reason=_WHY)]

SOURCE = Path(__file__).resolve().parents[1] / "server" / "java" / "TxnSteps.java"
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def txn_steps(tmp_path_factory):
    """``run(bootstrap, topic, transactional_id, *steps)`` -> the Java producer's words."""
    assert _REF is not None, _WHY
    javac = shutil.which("javac") or str(Path(_REF.java).with_name("javac"))
    if not Path(javac).exists() and shutil.which(javac) is None:
        why = "needs javac (a JDK) to compile tests/server/java/TxnSteps.java"
        if _REQUIRED:
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but it {why}", pytrace=False)
        pytest.skip(why)
    out_dir = tmp_path_factory.mktemp("txnsteps")
    subprocess.run([javac, "-cp", _REF.classpath, "-d", str(out_dir), str(SOURCE)],
                   check=True, timeout=RUN_TIMEOUT_S, capture_output=True)

    def run(bootstrap: str, topic: str, transactional_id: str, *steps: str) -> list[str]:
        done = subprocess.run(
            [_REF.java, "-cp", f"{out_dir}:{_REF.classpath}", "TxnSteps", bootstrap, topic,
             transactional_id, *steps], timeout=RUN_TIMEOUT_S, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        return done.stdout.split()

    return run


def _committed(transactional_id: str, steps: list[str]) -> list[bytes]:
    return [f"{transactional_id}-{3 + i}-{j}-c".encode() for i, step in enumerate(steps)
            if step[0] == "c" for j in range(int(step[1:]))]


def test_java_tv2_producer_across_a_coordinator_move(make_cluster, txn_steps):
    cluster = _setup(make_cluster)
    first = ["c3", "a2", "c4"]
    assert txn_steps(cluster.bootstrap, "t", "tx-j", *first)[-1] == "done"
    coordinator = cluster.wait_for_isr(TXN_STATE, 3)
    description = cluster.brokers[coordinator].store.transaction_coordinator().describe("tx-j")
    assert (description.state, description.producer_epoch) == ("CompleteCommit", 3)

    cluster.stop(coordinator)
    new = wait_until(lambda: _some(cluster.leader_of(TXN_STATE)),
                     "a new __transaction_state-0 leader")[0]
    assert new != coordinator
    loaded = wait_until(lambda: _some(
        cluster.brokers[new].store.transaction_coordinator().describe("tx-j")),
        "the new coordinator to load tx-j")[0]
    assert (loaded.state, loaded.producer_epoch) == ("CompleteCommit", 3)
    second = ["a1", "c2"]
    assert txn_steps(cluster.bootstrap, "t", "tx-j", *second)[-1] == "done"
    # InitProducerId bumps to 4, the two EndTxn v5 to 6.
    assert cluster.brokers[new].store.transaction_coordinator().describe(
        "tx-j").producer_epoch == 6
    seen = _read_committed(cluster)
    assert sorted(seen) == sorted(_committed("tx-j", first) + _committed("tx-j", second))


def _group_coordinator(cluster, group_id: str) -> int | None:
    answer = call(cluster.address(0), 10, 3, key=group_id, key_type=0)
    return int(answer.node_id) if int(answer.error_code) == 0 else None


def _txn_produce(address, version: int, tp, producer_id: int, epoch: int, sequence: int) -> int:
    import datetime
    import time

    from seglog import get_backend

    records = get_backend("native").encode_batch(
        [b"v"], None, [int(time.time() * 1000)], None, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
    response = call(address, 0, version, transactional_id="tx-raw", acks=-1,
                    timeout=datetime.timedelta(seconds=10), topic_data=(
                        _nested(0, version, "topic_data")(name=tp.topic, partition_data=(
                            _nested(0, version, "topic_data", "partition_data")(
                                index=tp.partition, records=records),)),))
    return int(response.responses[0].partition_responses[0].error_code)


def test_leaders_ask_the_coordinator_over_the_inter_broker_listener(make_cluster):
    """KIP-890 with the coordinator on another broker than the partition's leader: a
    transactional batch to a partition not in the transaction is refused (Produce v9:
    INVALID_TXN_STATE; v11: TRANSACTION_ABORTABLE) after the leader asked the coordinator
    (AddPartitionsToTxn v5, verify only); Produce v12 makes the leader add it; a commit then
    writes its marker there; an abort with nothing ongoing bumps the epoch once more."""
    import datetime

    from seglog import error_codes as codes

    from test_txn_cluster import T0, T1

    cluster = _setup(make_cluster)
    wait_until(lambda: int(call(cluster.address(0), 10, 3, key="tx-raw",
                                key_type=1).error_code) == codes.NONE,
               "FindCoordinator (it makes __transaction_state)")
    coordinator = cluster.wait_for_isr(TXN_STATE, 3)
    # a partition another broker leads (t-0 by broker 0, t-1 by broker 1)
    tp = T0 if cluster.leader_of(T0) != coordinator else T1
    leader = cluster.address(cluster.leader_of(tp))
    init = wait_until(lambda: _some(call(cluster.address(coordinator), 22, 4,
                                         transactional_id="tx-raw",
                                         transaction_timeout=datetime.timedelta(seconds=60),
                                         producer_id=-1, producer_epoch=-1)),
                      "InitProducerId")[0]
    assert init.error_code == codes.NONE
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    assert _txn_produce(leader, 9, tp, pid, epoch, 0) == codes.INVALID_TXN_STATE
    assert _txn_produce(leader, 11, tp, pid, epoch, 0) == codes.TRANSACTION_ABORTABLE
    assert _txn_produce(leader, 12, tp, pid, epoch, 0) == codes.NONE
    description = cluster.brokers[coordinator].store.transaction_coordinator().describe(
        "tx-raw")
    assert (description.state, description.partitions) == ("Ongoing", (tp,))
    # TxnOffsetCommit v5 at the group's coordinator adds its __consumer_offsets partition.

    def txn_offset_commit():
        # Found again on each try, as a client does after NOT_COORDINATOR: FindCoordinator
        # answers from broker 0's metadata, which can name the partition's new leader before
        # that broker has made itself leader (failed once in a CI rehearsal).
        group_node = _group_coordinator(cluster, "g-raw")
        if group_node is None:
            return None
        committed = call(cluster.address(group_node), 28, 5, transactional_id="tx-raw",
                         group_id="g-raw", producer_id=pid, producer_epoch=epoch,
                         generation_id=-1, member_id="", group_instance_id=None, topics=(
                             _nested(28, 5, "topics")(name=tp.topic, partitions=(
                                 _nested(28, 5, "topics", "partitions")(
                                     partition_index=tp.partition, committed_offset=5,
                                     committed_leader_epoch=-1, committed_metadata=""),)),))
        codes_ = [int(p.error_code) for t in committed.topics for p in t.partitions]
        # The group's __consumer_offsets partition may still be loading (FindCoordinator
        # answers once it is led): a client asks again, as here (failed 1 run in ~10).
        return None if codes_ in ([codes.COORDINATOR_LOAD_IN_PROGRESS],
                                  [codes.NOT_COORDINATOR]) else (codes_,)
    assert wait_until(txn_offset_commit, "TxnOffsetCommit past the group's load")[0] == [0]
    description = cluster.brokers[coordinator].store.transaction_coordinator().describe(
        "tx-raw")
    assert {p.topic for p in description.partitions} == {tp.topic, "__consumer_offsets"}
    end = call(cluster.address(coordinator), 26, 5, transactional_id="tx-raw",
               producer_id=pid, producer_epoch=epoch, committed=True)
    assert (int(end.error_code), int(end.producer_id), int(end.producer_epoch)) == (
        codes.NONE, pid, epoch + 1)
    log = cluster.rm(cluster.leader_of(tp)).partitions[tp].log
    wait_until(lambda: log.producer_state.last_entry(pid).producer_epoch == epoch + 1,
               "the marker at the bumped epoch on the partition's leader")
    # Nothing ongoing at the new epoch: a version 2 client's abort aborts an empty
    # transaction (no marker to send) and bumps the epoch again, as Kafka 4.4 (once the
    # commit completed: while its markers are in flight the new epoch is fenced, as Kafka's
    # PrepareCommit state only takes a retry).
    wait_until(lambda: cluster.brokers[coordinator].store.transaction_coordinator().describe(
        "tx-raw").state == "CompleteCommit", "the commit completed on the coordinator")
    end = call(cluster.address(coordinator), 26, 5, transactional_id="tx-raw",
               producer_id=pid, producer_epoch=epoch + 1, committed=False)
    assert (int(end.error_code), int(end.producer_id), int(end.producer_epoch)) == (
        codes.NONE, pid, epoch + 2)
    description = cluster.brokers[coordinator].store.transaction_coordinator().describe(
        "tx-raw")
    assert (description.state, description.partitions) == ("CompleteAbort", ())
