"""A broker restart keeps the data and the committed offsets, against Kafka and seglog alike:
records and group offsets written before a clean stop are there after the start on the same
data dir and port, and producing carries on at the next offsets."""

from __future__ import annotations

import pytest

from clients_runner import (
    OP_TIMEOUT_S, Rec, committed, confluent_consume, confluent_produce, create_topic,
    kafka_python_consume,
)


@pytest.mark.slow  # Kafka's side restarts a JVM broker: 10-25 s on this 2-core machine
def test_restart_keeps_data_and_committed_offsets(target, differential, unique):
    """50 records on two partitions (one batch of them gzip), a group's commit of [20, 5],
    and on a second topic a committed and an aborted transaction; restart; the same records,
    the same committed offsets, read_committed still skips the aborted records, new records
    land at 25 and 25, and the transactional id's next producer commits after them."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = target.bootstrap
    create_topic(b, unique, 2)
    group = f"{unique}-g"
    before = [Rec(f"k{i}".encode(), f"v{i}".encode(), (("n", str(i).encode()),), partition=i % 2)
              for i in range(50)]
    confluent_produce(b, unique, before[:30])
    confluent_produce(b, unique, before[30:], compression="gzip")
    c = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(unique, 0, 20), TopicPartition(unique, 1, 5)],
                 asynchronous=False)
    finally:
        c.close()
    create_topic(b, f"{unique}-tx")

    def transactions(outcomes):
        p = Producer({"bootstrap.servers": b, "transactional.id": f"{unique}-tx",
                      "transaction.timeout.ms": 60000})
        p.init_transactions(OP_TIMEOUT_S)
        for outcome in outcomes:
            p.begin_transaction()
            for i in range(3):
                p.produce(f"{unique}-tx", f"{outcome}-{i}".encode(), partition=0)
            assert p.flush(OP_TIMEOUT_S) == 0
            if outcome.startswith("commit"):
                p.commit_transaction(OP_TIMEOUT_S)
            else:
                p.abort_transaction(OP_TIMEOUT_S)

    def txn_views():
        return {iso: [(s.offset, s.value) for s in confluent_consume(
                    b, f"{unique}-tx", isolation=iso, timeout_s=OP_TIMEOUT_S * 2)]
                for iso in ("read_committed", "read_uncommitted")}

    transactions(["commit", "abort"])
    seen_before = confluent_consume(b, unique, 2)
    committed_before = committed(b, group, unique, 2)
    txn_before = txn_views()

    target.restart()

    seen_after = confluent_consume(b, unique, 2, timeout_s=OP_TIMEOUT_S * 2)
    committed_after = committed(b, group, unique, 2, timeout_s=OP_TIMEOUT_S)
    more = confluent_produce(b, unique, [Rec(b"new", f"new{p}".encode(), partition=p)
                                         for p in (0, 1)])
    read_by_kafka_python = kafka_python_consume(b, unique, 2)
    txn_after = txn_views()
    transactions(["commit-again"])
    txn_more = txn_views()["read_committed"]
    assert txn_before == txn_after == {
        "read_committed": [(i, f"commit-{i}".encode()) for i in range(3)],
        "read_uncommitted": [(i, f"commit-{i}".encode()) for i in range(3)]
        + [(4 + i, f"abort-{i}".encode()) for i in range(3)]}
    assert txn_more == txn_after["read_committed"] + [(8 + i, f"commit-again-{i}".encode())
                                                      for i in range(3)]
    assert len(seen_before) == 50
    assert seen_after == seen_before
    assert committed_before == committed_after == [20, 5]
    assert more == [(0, 25), (1, 25)]
    assert read_by_kafka_python[:25] + read_by_kafka_python[26:51] == seen_before
    differential({"seen": seen_after, "committed": committed_after, "more": more,
                  "kafka_python": read_by_kafka_python, "transactions": txn_after,
                  "after the restart": txn_more})
