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

from test_coordinators import _some, make_cluster, wait_until  # noqa: F401 - the fixture
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
