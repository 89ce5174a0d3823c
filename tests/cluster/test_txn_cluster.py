"""The transaction coordinator in a cluster (Kafka 2.8, research R§4): FindCoordinator for a
transactional id names the leader of its ``__transaction_state`` partition, the markers go to
each data partition's leader with WriteTxnMarkers, and a transaction survives the loss of its
coordinator's broker (R§6.5 S17).

Kafka's tests these come from: ``TransactionsTest.testBasicTransactions`` (a read_committed
consumer sees the committed transaction only, over partitions led by different brokers),
``TransactionMarkerChannelManagerTest`` (markers to each partition's leader, completion only
after every one is acknowledged), ``TransactionsBounceTest`` / S17 (the coordinator's broker
stops mid-transaction: the transaction commits or aborts as a whole through the new
coordinator), ``KafkaApisTest.testWriteTxnMarkersShouldAllBeIncludedInTheResponse`` /
``shouldRespondWithUnknownTopicWhenPartitionIsNotHosted`` (WriteTxnMarkers' per-partition
answers).
"""

from __future__ import annotations

import datetime
import time

import pytest

import seglog
from seglog import error_codes as codes
from seglog.cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from seglog.types import TopicPartition

from test_coordinators import Cluster, _nested, _some, call, make_cluster, wait_until  # noqa: F401

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

TXN_STATE = TopicPartition("__transaction_state", 0)
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
TXN_CONFIG = {"transaction.state.log.replication.factor": 3,
              "transaction.state.log.min.isr": 2,
              "offsets.topic.replication.factor": 3,
              "default.replication.factor": 3}


def _setup(make_cluster, **config) -> Cluster:
    """Three brokers (``TXN_CONFIG`` and ``config``); topic ``t`` with two RF-3 partitions led
    by brokers 0 and 1."""
    cluster = make_cluster(3, **TXN_CONFIG, **config)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([confluent_kafka.admin.NewTopic(
        "t", num_partitions=2, replica_assignment=[[0, 1, 2], [1, 2, 0]])])
    futures["t"].result(20)
    assert cluster.wait_for_isr(T0, 3) == 0
    assert cluster.wait_for_isr(T1, 3) == 1
    return cluster


def _producer(cluster: Cluster, transactional_id: str):
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id,
        "transaction.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
        "message.timeout.ms": 30000})
    producer.init_transactions(30)
    return producer


def _transaction(producer, prefix: str, count: int, *, commit: bool) -> list[bytes]:
    producer.begin_transaction()
    values = []
    for i in range(count):
        value = f"{prefix}-{i}".encode()
        producer.produce("t", value=value, partition=i % 2)
        values.append(value)
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return values


def _read_committed(cluster: Cluster) -> list[bytes]:
    """Every record a read_committed consumer sees in ``t`` up to the last stable offsets
    (bounded: the LSO must reach the end of both partitions, i.e. every marker landed)."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": "reader",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "enable.partition.eof": True,
        "topic.metadata.refresh.interval.ms": 1000})
    try:
        ends = {}
        for tp in (T0, T1):
            def lso(tp=tp):
                low, high = consumer.get_watermark_offsets(
                    confluent_kafka.TopicPartition(tp.topic, tp.partition), timeout=5)
                leader = cluster.leader_of(tp)
                end = cluster.rm(leader).partitions[tp].log.end_offset
                return (high,) if high == end else None
            ends[tp] = wait_until(lso, f"{tp}'s last stable offset to reach its end")[0]
        consumer.assign([confluent_kafka.TopicPartition("t", p, 0) for p in (0, 1)])
        seen: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while len(at_end) < 2:
            assert time.monotonic() < deadline, f"read {len(seen)} records, at end {at_end}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    if message.offset() >= ends[TopicPartition("t", message.partition())]:
                        at_end.add(message.partition())
                continue
            seen.append(message.value())
        return seen
    finally:
        consumer.close()


def _converged(cluster: Cluster, tp: TopicPartition) -> None:
    """Every live replica of ``tp`` holds the leader's log (markers included)."""
    def same():
        ends = {b: cluster.on_loop(b, lambda b=b: (cluster.rm(b).partitions[tp].log.end_offset,
                                                   cluster.rm(b).partitions[tp].log.high_watermark))
                for b in cluster.brokers if tp in cluster.rm(b).partitions}
        values = set(ends.values())
        return len(values) == 1 and next(iter(values))[0] == next(iter(values))[1]
    wait_until(same, f"the replicas of {tp} to converge")


def write_txn_markers(address, producer_id: int, coordinator_epoch: int,
                      tp: TopicPartition) -> int:
    """WriteTxnMarkers v1: one ABORT marker of ``producer_id`` (epoch 0) for ``tp``; its
    error code."""
    topic = _nested(27, 1, "markers", "topics")(name=tp.topic,
                                                 partition_indexes=(tp.partition,))
    marker = _nested(27, 1, "markers")(producer_id=producer_id, producer_epoch=0,
                                       transaction_result=False, topics=(topic,),
                                       coordinator_epoch=coordinator_epoch)
    response = call(address, 27, 1, markers=(marker,))
    return int(response.markers[0].topics[0].partitions[0].error_code)


def find_txn_coordinator(address, transactional_id: str):
    response = call(address, 10, 3, key=transactional_id, key_type=1)
    return int(response.error_code), int(response.node_id)


@pytest.mark.slow
def test_transactions_across_leaders(make_cluster):
    """A transactional producer commits one transaction and aborts another over two
    partitions led by different brokers: a read_committed consumer sees exactly the committed
    records, and every replica holds the markers."""
    cluster = _setup(make_cluster)
    producer = _producer(cluster, "tx-a")
    coordinator = cluster.wait_for_isr(TXN_STATE, 3)
    for broker_id in cluster.brokers:
        assert find_txn_coordinator(cluster.address(broker_id), "tx-a") == (0, coordinator)
    # Another broker does not coordinate it (NOT_COORDINATOR for InitProducerId).
    other = next(b for b in cluster.brokers if b != coordinator)
    answer = call(cluster.address(other), 22, 1, transactional_id="tx-a",
                  transaction_timeout=datetime.timedelta(seconds=60))
    assert int(answer.error_code) == codes.NOT_COORDINATOR

    committed = _transaction(producer, "c1", 10, commit=True)
    _transaction(producer, "a1", 10, commit=False)
    committed += _transaction(producer, "c2", 6, commit=True)
    producer = None

    assert sorted(_read_committed(cluster)) == sorted(committed)
    # WriteTxnMarkers' per-partition answers: a follower of t-0 refuses (6), an unknown
    # partition is 3, the leader fences a coordinator epoch below the last marker's (52).
    assert write_txn_markers(cluster.address(1), 4242, 7, T0) == 6
    assert write_txn_markers(cluster.address(0), 4242, 7, TopicPartition("t", 9)) == 3
    assert write_txn_markers(cluster.address(0), 4242, 7, T0) == 0
    assert write_txn_markers(cluster.address(0), 4242, 6, T0) == 52
    for tp in (T0, T1, TXN_STATE):
        _converged(cluster, tp)
    # The coordinator completed every transaction (CompleteCommit last).
    description = call(cluster.address(coordinator), 65, 0, transactional_ids=("tx-a",))
    assert description.transaction_states[0].transaction_state == "CompleteCommit"


@pytest.mark.slow
def test_transaction_survives_its_coordinator(make_cluster):
    """R§6.5 S17: the broker coordinating a transaction stops after the produce and before
    the commit; the transaction is committed or aborted as a whole through the new
    coordinator, never partly."""
    cluster = _setup(make_cluster)
    producer = _producer(cluster, "tx-b")
    before = _transaction(producer, "before", 4, commit=True)
    coordinator = cluster.wait_for_isr(TXN_STATE, 3)

    producer.begin_transaction()
    pending = [f"mid-{i}".encode() for i in range(8)]
    for i, value in enumerate(pending):
        producer.produce("t", value=value, partition=i % 2)
    assert producer.flush(30) == 0
    cluster.stop(coordinator)
    new = wait_until(lambda: _some(cluster.leader_of(TXN_STATE)),
                     "a new __transaction_state-0 leader")[0]
    assert new != coordinator
    try:
        producer.commit_transaction(60)
        outcome = "committed"
    except confluent_kafka.KafkaException as error:
        outcome = f"failed: {error}"
        if error.args[0].txn_requires_abort():
            producer.abort_transaction(30)
    seen = _read_committed(cluster)
    print(f"S17 outcome: {outcome}")
    mid = [v for v in seen if v.startswith(b"mid-")]
    assert sorted(v for v in seen if v.startswith(b"before-")) == sorted(before)
    assert mid in ([], ) or sorted(mid) == sorted(pending), (outcome, mid)
    if outcome == "committed":
        assert sorted(mid) == sorted(pending)
    for tp in (T0, T1):
        _converged(cluster, tp)


def _restart(cluster: Cluster, broker_id: int) -> None:
    broker = seglog.Broker(cluster.tmp_path / f"broker-{broker_id}", listen=("127.0.0.1", 0),
                           config=dict(cluster.config, **{
                               "broker.id": broker_id, "zookeeper.connect": cluster.zk_connect}))
    broker.start()
    cluster.brokers[broker_id] = broker


def _isr_size(cluster: Cluster, tp: TopicPartition) -> int | None:
    leader = cluster.leader_of(tp)
    return None if leader is None else len(cluster.rm(leader).partitions[tp].isr)


@pytest.mark.slow
def test_new_coordinator_resends_prepared_markers(make_cluster):
    """``TransactionStateManager`` loading a transaction in PrepareCommit: the markers of a
    committed transaction cannot land (``t`` needs 3 in-sync replicas, one broker is down),
    so it stays PrepareCommit; its coordinator's broker stops too; the new coordinator loads
    it and sends the markers again until both brokers are back, then CompleteCommit."""
    cluster = make_cluster(3, **TXN_CONFIG)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(
        "t", num_partitions=2, replica_assignment=[[0, 1, 2], [1, 2, 0]],
        config={"min.insync.replicas": "3"})])["t"].result(20)
    cluster.wait_for_isr(T0, 3)
    cluster.wait_for_isr(T1, 3)
    producer = _producer(cluster, "tx-c")
    coordinator = cluster.wait_for_isr(TXN_STATE, 3)
    producer.begin_transaction()
    pending = [f"p-{i}".encode() for i in range(6)]
    for i, value in enumerate(pending):
        producer.produce("t", value=value, partition=i % 2)
    assert producer.flush(30) == 0
    down = next(b for b in cluster.brokers if b != coordinator)
    cluster.stop(down)
    wait_until(lambda: _isr_size(cluster, T0) == 2 and _isr_size(cluster, T1) == 2,
               "the ISRs to shrink")
    producer.commit_transaction(30)  # answered once PrepareCommit is written

    def state_on(broker_id: int) -> str:
        answer = call(cluster.address(broker_id), 65, 0, transactional_ids=("tx-c",))
        return answer.transaction_states[0].transaction_state
    assert state_on(coordinator) == "PrepareCommit"
    cluster.stop(coordinator)
    new = wait_until(lambda: _some(cluster.leader_of(TXN_STATE)),
                     "a new __transaction_state-0 leader")[0]
    wait_until(lambda: state_on(new) == "PrepareCommit", "the new coordinator to load it")
    _restart(cluster, down)
    _restart(cluster, coordinator)
    wait_until(lambda: state_on(new) == "CompleteCommit", "the markers to land")
    assert sorted(_read_committed(cluster)) == sorted(pending)
    for tp in (T0, T1):
        _converged(cluster, tp)


def test_write_txn_markers_standalone(tmp_path):
    """A standalone broker serves WriteTxnMarkers with Kafka's per-partition answers
    (``KafkaApisTest.testWriteTxnMarkersShouldAllBeIncludedInTheResponse``): the marker
    appended, an unknown partition UNKNOWN_TOPIC_OR_PARTITION, an older coordinator epoch
    TRANSACTION_COORDINATOR_FENCED; the log holds exactly the one control batch."""
    broker = seglog.Broker(tmp_path / "standalone", listen=("127.0.0.1", 0))
    broker.start()
    try:
        broker.state.store.create_topic("t", 1)
        host, port = broker.bootstrap.rsplit(":", 1)
        address = (host, int(port))
        assert write_txn_markers(address, 4242, 3, T0) == 0
        assert write_txn_markers(address, 4242, 3, TopicPartition("t", 1)) == 3
        assert write_txn_markers(address, 4242, 2, T0) == 52
        assert broker.state.store.log(("t", 0)).end_offset == 1
    finally:
        broker.stop()


@pytest.mark.slow
def test_transactional_offsets_in_a_cluster(make_cluster):
    """``TransactionsTest.testSendOffsetsWithGroupMetadata``'s shape: offsets sent to a
    transaction (AddOffsetsToTxn on the transaction coordinator, TxnOffsetCommit on the
    group's) are committed by the COMMIT marker the group coordinator's broker receives."""
    cluster = _setup(make_cluster)
    group = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g",
                                      "enable.auto.commit": False})
    try:
        producer = _producer(cluster, "tx-o")
        producer.begin_transaction()
        producer.produce("t", value=b"x", partition=0)
        assert producer.flush(30) == 0
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition("t", 1, 5)], group.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        committed = wait_until(lambda: _some(group.committed(
            [confluent_kafka.TopicPartition("t", 1)], 10)[0].offset),
            "the transactional offset to be committed")[0]
        assert committed == 5
    finally:
        group.close()


def _read_committed_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value a read_committed consumer returns from ``topic``-0, read from offset 0 to
    the partition's end (bounded)."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        _low, stable = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=10)
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, f"read {seen}, no end at {stable}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                seen.append(message.value())
            elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF \
                    and message.offset() >= stable:
                return seen
    finally:
        consumer.close()


@pytest.mark.parametrize("broken", [False, True], ids=["correct", "read_committed_sees_aborted"])
def test_read_committed_sees_aborted_break(tmp_path, broken):
    """The negative control ``read_committed_sees_aborted`` (the Broker's ``test_breaks``)
    on a standalone broker: an aborted then a committed transaction; a read_committed consumer
    returns the committed records only, and with the break (the Fetch answered without its
    aborted transactions) the aborted ones too, in log order."""
    breaks = TestBreaks.of("read_committed_sees_aborted") if broken else NO_TEST_BREAKS
    broker = seglog.Broker(tmp_path / "standalone", listen=("127.0.0.1", 0),
                           test_breaks=breaks)
    broker.start()
    try:
        broker.state.store.create_topic("t", 1)
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap, "transactional.id": "tx-break",
            "transaction.timeout.ms": 60000, "message.timeout.ms": 30000})
        producer.init_transactions(30)
        for prefix, commit in (("aborted", False), ("committed", True)):
            producer.begin_transaction()
            for i in range(3):
                producer.produce("t", value=f"{prefix}-{i}".encode(), partition=0)
            assert producer.flush(30) == 0
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        producer = None
        seen = _read_committed_values(broker.bootstrap, "t")
    finally:
        broker.stop()
    committed = [f"committed-{i}".encode() for i in range(3)]
    aborted = [f"aborted-{i}".encode() for i in range(3)]
    assert seen == (aborted + committed if broken else committed)
