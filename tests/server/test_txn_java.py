"""Kafka 4.4's own Java clients against ``seglog serve``'s transactions: the
``TransactionalMessageCopier`` tool (a Java transactional producer with a read_committed
consumer that joins a group, send_offsets_to_transaction with the group's metadata, so the
member and generation are checked, random aborts) copies a partition exactly once;
``kafka-transactions`` (the Java Admin client's ListTransactions, DescribeTransactions,
DescribeProducers) reports it.

Needs java and the Kafka jars (``ci/kafka-ref.sh``); skips without them (fails under
``SEGLOG_REQUIRE_KAFKA=1``). The broker
finalizes ``transaction.version`` 2, as Kafka 4.4 does, so the Java producer runs
transactions v2 (an epoch bump per transaction, TxnOffsetCommit v5 without AddOffsetsToTxn);
tests/server/test_txn_v2.py checks the epochs.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP

from seglog.bench.kafka import find_kafka

_REF, _WHY = find_kafka()
_REQUIRED = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
pytestmark = [pytest.mark.kafka, pytest.mark.clients, pytest.mark.slow,
              pytest.mark.skipif(_REF is None and not _REQUIRED, reason=_WHY)]

RECORDS = 20


def run_tool(run_dir, main_class: str, *args: str) -> str:
    """Run a Kafka tool in ``run_dir``; its stdout (the test fails on a non-zero exit)."""
    assert _REF is not None, _WHY
    done = _REF.run_tool(main_class, list(args), run_dir=run_dir, timeout_s=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def table(text: str) -> list[dict]:
    """The rows of a kafka-transactions table (tab-separated, a header line first)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = [cell.strip() for cell in lines[0].split("\t")]
    return [dict(zip(header, (cell.strip() for cell in line.split("\t")))) for line in lines[1:]]


def test_java_transactional_copier_and_transactions_tool(broker, tmp_path):
    store = broker.store
    store.create_topic("jin", 1)
    store.create_topic("jout", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(RECORDS):
        producer.produce("jin", value=b"%d" % i)
    assert producer.flush(20) == 0

    output = run_tool(
        tmp_path / "copier", "org.apache.kafka.tools.TransactionalMessageCopier",
        "--broker-list", broker.bootstrap, "--input-topic", "jin", "--input-partition", "0",
        "--output-topic", "jout", "--transactional-id", "jtx", "--consumer-group", "jg",
        "--transaction-size", "5", "--max-messages", str(RECORDS), "--enable-random-aborts",
        "--use-group-metadata", "--group-mode")
    last = json.loads(output.strip().splitlines()[-1])
    assert (last["stage"], last["totalProcessed"], last["remaining"]) == (
        "ShutdownComplete", RECORDS, 0)

    # Exactly once: every record once for read_committed, the group's offset at the end.
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "jr",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        reader.assign([CTP("jout", 0, 0)])
        values: list[int] = []
        deadline = time.monotonic() + 10
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is not None and message.error() is None:
                values.append(int(message.value()))
        assert sorted(values) == list(range(RECORDS))
    finally:
        reader.close()
    from seglog.types import TopicPartition
    assert store.offset_fetch("jg", TopicPartition("jin", 0)).offset == RECORDS
    description = store.transaction_coordinator().describe("jtx")

    # The three Admin calls in parallel JVMs (each start costs seconds).
    command = ["--bootstrap-server", broker.bootstrap]
    with ThreadPoolExecutor(3) as pool:
        outputs = list(pool.map(lambda args: table(run_tool(
            tmp_path / args[0], "org.apache.kafka.tools.TransactionsCommand", *command, *args)),
            [("list",), ("describe", "--transactional-id", "jtx"),
             ("describe-producers", "--topic", "jout", "--partition", "0")]))
    listed, (described,), (producer_row,) = outputs
    assert [(r["TransactionalId"], r["ProducerId"], r["TransactionState"]) for r in listed] \
        == [("jtx", str(description.producer_id), "CompleteCommit")]
    assert (described["ProducerId"], described["ProducerEpoch"],
            described["TransactionState"], described["TransactionTimeoutMs"]) == (
        str(description.producer_id), str(description.producer_epoch), "CompleteCommit",
        "60000")
    state = store.log(("jout", 0)).producer_state.last_entry(description.producer_id)
    assert (producer_row["ProducerId"], producer_row["ProducerEpoch"],
            producer_row["LastSequence"], producer_row["CurrentTransactionStartOffset"]) == (
        str(description.producer_id), str(state.producer_epoch), str(state.last_seq), "None")
