"""An EndTxn v5 abort sent at once after a commit, in a cluster of three, where the commit's
markers (WriteTxnMarkers to each partition's leader, replicated acks=all, then CompleteCommit
replicated in ``__transaction_state``) are still being written when the commit's answer
arrives.

franz-go sends exactly this when the TxnOffsetCommit that opens its next transaction is
answered CONCURRENT_TRANSACTIONS (its ``GroupTransactSession`` aborts the transaction): the
abort names the epoch the commit bumped to. Kafka 4.4 answers CONCURRENT_TRANSACTIONS until
the markers are written, then aborts the empty transaction (measured on the wire; the same
sequence against a real Kafka 4.4 broker is
``tests/server/test_txn_v2_differential.py::test_abort_right_after_a_commit_waits_for_the_markers``).
seglog answered PRODUCER_FENCED, which is fatal to the client: franz-go's ``TestTxnEtl`` and
``TestShareGroupETL`` failed against a three-broker seglog cluster and passed against a
three-broker Kafka 4.4 (``tools/franz_go.py --brokers kafka-cluster,seglog-cluster``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from seglog import error_codes as codes

from test_coordinators import make_cluster  # noqa: F401 - the fixture
from test_txn_cluster import TXN_STATE, _setup

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from test_admin_differential import Client  # noqa: E402
from test_txn_v2_differential import (  # noqa: E402
    _batch, _produce, abort_at_once_after_commit, check_abort_at_once_after_commit,
    committed_transaction)

#: Rounds, each with a fresh transactional id: the old answer (PRODUCER_FENCED) came in 13 of
#: 15 rounds of a three-broker cluster.
ROUNDS = 5


def _clients(cluster, transactional_id: str) -> tuple[Client, Client]:
    """Connections to "t"-0's leader (broker 0, :func:`_setup`) and to the transaction
    coordinator (FindCoordinator makes ``__transaction_state``: one partition here)."""
    leader = Client(cluster.brokers[0].bootstrap)
    leader.call(10, 4, key_type=1, coordinator_keys=(transactional_id,))
    return leader, Client(cluster.brokers[cluster.wait_for_isr(TXN_STATE, 3)].bootstrap)


def test_abort_right_after_a_commit_waits_for_the_markers(make_cluster):
    cluster = _setup(make_cluster)
    leader, coordinator = _clients(cluster, "w-0")
    concurrent = 0
    try:
        for round_ in range(ROUNDS):
            result = abort_at_once_after_commit(coordinator, leader, f"w-{round_}", "t")
            check_abort_at_once_after_commit(result)
            concurrent += result[1][0] == codes.CONCURRENT_TRANSACTIONS
    finally:
        coordinator.close()
        leader.close()
    # Not asserted (timing): how often the first abort found the markers in flight.
    print(f"first abort answered CONCURRENT_TRANSACTIONS in {concurrent} of {ROUNDS} rounds")


def test_the_next_transactions_produce_waits_for_the_markers(make_cluster):
    """Produce v12 of the next transaction at once after a commit: the leader asks the
    coordinator to add the partition again every ``add.partitions.to.txn.retry.backoff.ms``
    while it answers CONCURRENT_TRANSACTIONS (Kafka 4.4's server-side retry: on one Kafka
    4.4 broker this produce was NONE after 25-35 ms in 15 of 15 rounds), up to
    ``add.partitions.to.txn.retry.backoff.max.ms`` (5 s here, so that every round waits out
    its markers; Kafka's 100 ms default is shorter than some windows of this cluster, and the
    producer then gets NOT_ENOUGH_REPLICAS and retries itself). Without the retry: the first
    answer was NOT_ENOUGH_REPLICAS in 12 of 15 rounds."""
    cluster = _setup(make_cluster, **{"add.partitions.to.txn.retry.backoff.max.ms": 5000})
    leader, coordinator = _clients(cluster, "p-0")
    try:
        for round_ in range(ROUNDS):
            transactional_id = f"p-{round_}"
            pid, e0, e1 = committed_transaction(coordinator, leader, transactional_id, "t")
            assert e1 == e0 + 1
            following = _produce(leader, 12, transactional_id, "t", _batch(pid, e1, 0, b"b"))
            assert codes.name(following) == "NONE"
    finally:
        coordinator.close()
        leader.close()
