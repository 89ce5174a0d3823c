"""EndTxn v5 and the partition leader's add/verification (KIP-890) on the raw wire, against
real Kafka 4.4 and ``seglog serve``: the same sequence of InitProducerId v5, Produce v11/v12
(transactional batches; v12 adds the partition to the transaction, v11 only verifies) and
EndTxn v5 (commit, its retry from the epoch before the bump, a second EndTxn with nothing
ongoing, an abort, a zombie's batch at an old epoch) gives the same error codes and the same
epochs, relative to the first one, on both brokers.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from seglog import error_codes as codes
from seglog import get_backend

from kafka_waits import partitions_led
from test_admin_differential import Client, real_kafka  # noqa: F401 - the fixture

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TIMEOUT = datetime.timedelta(seconds=10)
RETRY_S_MAX = 30.0


def _batch(producer_id: int, epoch: int, sequence: int, value: bytes) -> bytes:
    return get_backend("native").encode_batch(
        [value], None, [int(time.time() * 1000)], None, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=sequence, is_transactional=True)


def _produce(client: Client, version: int, transactional_id: str, topic: str,
             records: bytes) -> int:
    m = client.m(0, version)
    response = client.call(0, version, transactional_id=transactional_id, acks=-1,
                           timeout=TIMEOUT, topic_data=(m.TopicProduceData(
                               name=topic, partition_data=(m.PartitionProduceData(
                                   index=0, records=records),)),))
    return int(response.responses[0].partition_responses[0].error_code)


def _end_txn(client: Client, transactional_id: str, producer_id: int, epoch: int,
             commit: bool) -> tuple[int, int, int]:
    deadline = time.monotonic() + RETRY_S_MAX
    while True:  # CONCURRENT_TRANSACTIONS while the last markers are written: retried
        response = client.call(26, 5, transactional_id=transactional_id,
                               producer_id=producer_id, producer_epoch=epoch, committed=commit)
        if response.error_code != codes.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return (int(response.error_code), int(response.producer_id),
                    int(response.producer_epoch))
        time.sleep(0.05)


def _txn_offset_commit(client: Client, producer_id: int, epoch: int, topic_id) -> list:
    m = client.m(28, 6)
    deadline = time.monotonic() + RETRY_S_MAX
    while True:  # the group's coordinator (and its topic, made by FindCoordinator) loads
        client.call(10, 4, key_type=0, coordinator_keys=("v2d-g",))
        response = client.call(28, 6, transactional_id="v2d-tx", group_id="v2d-g",
                               producer_id=producer_id, producer_epoch=epoch,
                               generation_id=-1, member_id="", group_instance_id=None,
                               topics=(m.TxnOffsetCommitRequestTopic(
                                   topic_id=topic_id, partitions=(
                                       m.TxnOffsetCommitRequestPartition(
                                           partition_index=0, committed_offset=1,
                                           committed_leader_epoch=-1,
                                           committed_metadata=""),)),))
        errors = [int(p.error_code) for t in response.topics for p in t.partitions]
        if not set(errors) & {codes.COORDINATOR_LOAD_IN_PROGRESS, codes.NOT_COORDINATOR,
                              codes.COORDINATOR_NOT_AVAILABLE, codes.CONCURRENT_TRANSACTIONS} \
                or time.monotonic() > deadline:
            return [(t.topic_id == topic_id, errors) for t in response.topics]
        time.sleep(0.1)


def _wait_for_leader(client: Client, topic: str) -> None:
    """Until ``topic``'s partitions answer on the broker (:func:`kafka_waits.partitions_led`;
    a wait for Metadata alone was not enough in CI: the first Produce was
    NOT_LEADER_OR_FOLLOWER)."""
    assert partitions_led(client, [topic], timeout_s=RETRY_S_MAX), \
        f"{topic} has no leader after {RETRY_S_MAX} s"


def scenario(bootstrap: str) -> list:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("v2d", 1, 1)])["v2d"].result(20)
    client = Client(bootstrap)
    try:
        _wait_for_leader(client, "v2d")
        deadline = time.monotonic() + RETRY_S_MAX
        while True:  # the coordinator's topic is made on first use (FindCoordinator)
            client.call(10, 4, key_type=1, coordinator_keys=("v2d-tx",))
            init = client.call(22, 5, transactional_id="v2d-tx", transaction_timeout=
                               datetime.timedelta(seconds=60), producer_id=-1,
                               producer_epoch=-1)
            if init.error_code not in (codes.COORDINATOR_NOT_AVAILABLE, codes.NOT_COORDINATOR,
                                       codes.COORDINATOR_LOAD_IN_PROGRESS) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        pid, e0 = int(init.producer_id), int(init.producer_epoch)
        out: list = [("init", int(init.error_code))]

        def rel(answer: tuple[int, int, int]) -> tuple:
            error, producer_id, epoch = answer
            return (error, producer_id == pid if producer_id != -1 else -1,
                    epoch - e0 if epoch != -1 else -1)

        # v11 verifies only: the partition was not added, TRANSACTION_ABORTABLE.
        out.append(("produce v11 not added",
                    _produce(client, 11, "v2d-tx", "v2d", _batch(pid, e0, 0, b"x"))))
        # v12 adds the partition (a transaction.version 2 producer).
        out.append(("produce v12", _produce(client, 12, "v2d-tx", "v2d",
                                            _batch(pid, e0, 0, b"a"))))
        out.append(("commit", rel(_end_txn(client, "v2d-tx", pid, e0, True))))
        out.append(("commit retry", rel(_end_txn(client, "v2d-tx", pid, e0, True))))
        out.append(("abort retry of commit", rel(_end_txn(client, "v2d-tx", pid, e0, False))))
        out.append(("commit nothing", rel(_end_txn(client, "v2d-tx", pid, e0 + 1, True))))
        out.append(("produce next", _produce(client, 12, "v2d-tx", "v2d",
                                             _batch(pid, e0 + 1, 0, b"b"))))
        out.append(("zombie produce", _produce(client, 12, "v2d-tx", "v2d",
                                               _batch(pid, e0, 1, b"z"))))
        out.append(("zombie end", rel(_end_txn(client, "v2d-tx", pid, e0, True))))
        # TxnOffsetCommit v6 (topic ids): the group's partition joins the transaction.
        metadata = client.call(3, 12, topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)
        topic_id = next(t.topic_id for t in metadata.topics if t.name == "v2d")
        out.append(("offsets v6", _txn_offset_commit(client, pid, e0 + 1, topic_id)))
        out.append(("offsets v6 unknown id", _txn_offset_commit(client, pid, e0 + 1,
                                                                uuid.uuid4())))
        out.append(("abort", rel(_end_txn(client, "v2d-tx", pid, e0 + 1, False))))
        out.append(("unknown producer", rel(_end_txn(client, "v2d-tx", pid + 1000, e0 + 2,
                                                      True))))
        # A new producer of the id while a transaction.version 2 transaction is ongoing:
        # fenced and aborted by the coordinator, CONCURRENT_TRANSACTIONS until then.
        out.append(("produce before fence", _produce(client, 12, "v2d-tx", "v2d",
                                                     _batch(pid, e0 + 2, 0, b"f"))))
        deadline = time.monotonic() + RETRY_S_MAX
        first_init = None
        while True:
            init = client.call(22, 5, transactional_id="v2d-tx", transaction_timeout=
                               datetime.timedelta(seconds=60), producer_id=-1,
                               producer_epoch=-1)
            first_init = first_init if first_init is not None else int(init.error_code)
            if init.error_code != codes.CONCURRENT_TRANSACTIONS \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        out.append(("init fences", first_init, int(init.error_code),
                    int(init.producer_id) == pid, int(init.producer_epoch) - e0))
        out.append(("fenced produce", _produce(client, 12, "v2d-tx", "v2d",
                                               _batch(pid, e0 + 2, 1, b"g"))))
        return out
    finally:
        client.close()


def abort_at_once_after_commit(coordinator: Client, leader: Client, transactional_id: str,
                               topic: str) -> tuple[int, list[int], tuple[int, int]]:
    """franz-go's sequence when the TxnOffsetCommit that opens the next transaction is answered
    CONCURRENT_TRANSACTIONS: InitProducerId v5 (on the transaction's ``coordinator``), a
    transactional record to ``topic``-0 (Produce v12 on its ``leader`` adds the partition),
    EndTxn v5 commit, then at once EndTxn v5 abort at the bumped epoch, asked again while
    the answer is CONCURRENT_TRANSACTIONS (the commit's markers are still being written).
    Returns (the commit's epoch bump, the abort's error codes in order, (its last producer
    id - the first, epoch - the first))."""
    pid, e0, e1 = committed_transaction(coordinator, leader, transactional_id, topic)
    deadline = time.monotonic() + RETRY_S_MAX
    answers = []
    while True:  # no pause before the first: the commit's markers may still be in flight
        abort = coordinator.call(26, 5, transactional_id=transactional_id, producer_id=pid,
                                 producer_epoch=e1, committed=False)
        answers.append(int(abort.error_code))
        if abort.error_code != codes.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return (e1 - e0, answers, (int(abort.producer_id) - pid, int(abort.producer_epoch) - e0))


def committed_transaction(coordinator: Client, leader: Client, transactional_id: str,
                          topic: str) -> tuple[int, int, int]:
    """A new producer of ``transactional_id`` (InitProducerId v5 on its ``coordinator``)
    writes one transactional record to ``topic``-0 (Produce v12 on its ``leader``, which adds
    the partition) and commits (EndTxn v5). Returns (producer id, its first epoch, the epoch
    the commit bumped to); the commit's markers may still be in flight."""
    deadline = time.monotonic() + RETRY_S_MAX
    while True:
        init = coordinator.call(22, 5, transactional_id=transactional_id,
                                transaction_timeout=datetime.timedelta(seconds=60),
                                producer_id=-1, producer_epoch=-1)
        if init.error_code not in (codes.COORDINATOR_NOT_AVAILABLE, codes.NOT_COORDINATOR,
                                   codes.COORDINATOR_LOAD_IN_PROGRESS,
                                   codes.CONCURRENT_TRANSACTIONS) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert init.error_code == codes.NONE, init
    pid, e0 = int(init.producer_id), int(init.producer_epoch)
    while True:  # NOT_ENOUGH_REPLICAS: the leader could not reach the coordinator yet
        produced = _produce(leader, 12, transactional_id, topic, _batch(pid, e0, 0, b"a"))
        if produced != codes.NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert produced == codes.NONE, codes.name(produced)
    commit = coordinator.call(26, 5, transactional_id=transactional_id, producer_id=pid,
                              producer_epoch=e0, committed=True)
    assert commit.error_code == codes.NONE, commit
    return pid, e0, int(commit.producer_epoch)


def check_abort_at_once_after_commit(result: tuple[int, list[int], tuple[int, int]]) -> None:
    """What Kafka 4.4 answers :func:`abort_at_once_after_commit` (measured on the wire: the
    first abort is CONCURRENT_TRANSACTIONS in most rounds against one broker): the commit
    bumps the epoch, the abort is CONCURRENT_TRANSACTIONS until the markers are written,
    then an empty abort that bumps the epoch again; never PRODUCER_FENCED (fatal to the
    client)."""
    bump, answers, last = result
    assert bump == 1
    assert answers[:-1] == [codes.CONCURRENT_TRANSACTIONS] * (len(answers) - 1), \
        [codes.name(a) for a in answers]
    assert (codes.name(answers[-1]), last) == ("NONE", (0, 2)), \
        [codes.name(a) for a in answers]


@pytest.mark.parametrize("side", ["kafka", "seglog"])
def test_abort_right_after_a_commit_waits_for_the_markers(request, side):
    """The abort at the bumped epoch that a client sends right after a commit (franz-go
    does, when the next transaction's TxnOffsetCommit is answered CONCURRENT_TRANSACTIONS)
    is answered as Kafka 4.4 answers it, on both brokers (one broker here; the cluster
    case, where the markers take longer, is in tests/cluster/test_txn_v2_window.py)."""
    bootstrap = request.getfixturevalue("real_kafka" if side == "kafka" else "broker").bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("v2w", 1, 1)])["v2w"].result(20)
    client = Client(bootstrap)
    try:
        _wait_for_leader(client, "v2w")
        for round_ in range(3):
            client.call(10, 4, key_type=1, coordinator_keys=(f"v2w-{round_}",))
            check_abort_at_once_after_commit(
                abort_at_once_after_commit(client, client, f"v2w-{round_}", "v2w"))
    finally:
        client.close()


def test_end_txn_v5_answers_as_kafka_does(real_kafka, broker):  # noqa: F811 - the fixture
    kafka = scenario(real_kafka.bootstrap)
    seglog = scenario(broker.bootstrap)
    assert kafka[0] == ("init", 0)
    for ours, theirs in zip(seglog, kafka):
        assert ours == theirs, (ours, theirs)
    assert len(seglog) == len(kafka)
