"""Idempotent and transactional producers through real clients, against Kafka and seglog alike:
retried batches are not duplicated (same offsets answered again), a gap in sequences is
refused with Kafka's error code; transactions committed and aborted (with offsets sent to the
transaction) read by read_committed and read_uncommitted consumers of three clients, an open
transaction holding read_committed readers at the last stable offset; aiokafka's and
kafka-python's transactional producers."""

from __future__ import annotations

import asyncio

from clients_runner import (
    OP_TIMEOUT_S, Rec, Seen, aiokafka_consume, committed, confluent_consume, confluent_produce,
    create_topic, kafka_python_consume,
)


def test_idempotent_producer_retries_are_not_duplicated(target, differential, unique):
    """aiokafka's own record batches with a producer id and sequences, sent as a retrying
    producer sends them (the same batch again, an older one again, a gap, a producer id the
    broker never gave): duplicates are answered with their first offsets and not appended
    again, the gap gets OUT_OF_ORDER_SEQUENCE_NUMBER, the stranger is accepted (KIP-360);
    then an idempotent confluent-kafka producer writes 300 records to three partitions
    exactly once."""
    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.produce import ProduceRequest
    from aiokafka.protocol.transaction import InitProducerIdRequest
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from aiokafka.structs import TopicPartition

    b = target.bootstrap
    create_topic(b, unique, 1)
    create_topic(b, f"{unique}-many", 3)

    async def run():
        client = AIOKafkaClient(bootstrap_servers=b, request_timeout_ms=15000)
        await asyncio.wait_for(client.bootstrap(), OP_TIMEOUT_S)
        try:
            await asyncio.wait_for(client.add_topic(unique), OP_TIMEOUT_S)
            leader = client.cluster.leader_for_partition(TopicPartition(unique, 0))
            deadline = asyncio.get_running_loop().time() + OP_TIMEOUT_S
            while True:
                init = await asyncio.wait_for(client.send(leader, InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=60000)), OP_TIMEOUT_S)
                # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE: retriable, as the
                # producers treat them (a fresh broker is still creating its state topic).
                if init.error_code not in (14, 15) \
                        or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert init.error_code == 0, init
            pid, epoch = init.producer_id, init.producer_epoch

            def batch(producer_id, seq, n, tag):
                builder = DefaultRecordBatchBuilder(
                    magic=2, compression_type=0, is_transactional=0, producer_id=producer_id,
                    producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
                for i in range(n):
                    builder.append(i, timestamp=None, key=f"{tag}-{i}".encode(),
                                   value=f"{tag}-{i}".encode(), headers=[])
                return bytes(builder.build())

            async def produce(data):
                resp = await asyncio.wait_for(client.send(leader, ProduceRequest(
                    transactional_id=None, required_acks=-1, timeout=10000,
                    topics=[(unique, [(0, data)])])), OP_TIMEOUT_S)
                (_topic, partitions), = resp.topics
                info = partitions[0]
                return [info[1], info[2]]  # error code, base offset

            first, second = batch(pid, 0, 5, "a"), batch(pid, 5, 5, "b")
            answers = [await produce(first),
                       await produce(first),              # the retry of a lost response
                       await produce(second),
                       await produce(first),              # an older retry, still remembered
                       await produce(second),
                       await produce(batch(pid, 20, 5, "gap")),   # sequences 10..19 missing
                       await produce(batch(pid, 10, 3, "c")),
                       await produce(batch(pid + 1000, 7, 2, "stranger"))]
            return answers
        finally:
            await client.close()

    answers = asyncio.run(run())
    seen = confluent_consume(b, unique)
    assert [a[0] for a in answers[:5]] == [0] * 5
    assert [a[1] for a in answers[:5]] == [0, 0, 5, 0, 5]
    assert answers[5][0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert answers[6] == [0, 10]
    # A producer id the broker does not know may start at any sequence (its state may have
    # expired: Kafka accepts it since KIP-360).
    assert answers[7] == [0, 13]
    assert [s.key for s in seen] == [f"{t}-{i}".encode() for t, n in (
        ("a", 5), ("b", 5), ("c", 3), ("stranger", 2)) for i in range(n)]
    assert [s.offset for s in seen] == list(range(15))

    recs = [Rec(f"k{i}".encode(), f"v{i}".encode(), partition=i % 3) for i in range(300)]
    delivered = confluent_produce(b, f"{unique}-many", recs, **{
        "enable.idempotence": True, "retries": 10, "acks": "all",
        "max.in.flight.requests.per.connection": 5})
    many = confluent_consume(b, f"{unique}-many", 3)
    assert sorted(delivered) == sorted((p, o) for p in range(3) for o in range(100))
    assert sorted(s.value for s in many) == sorted(r.value for r in recs)
    differential({"answers": answers, "seen": seen, "delivered": delivered, "many": many})


def test_transactions_committed_and_aborted(target, differential, unique):
    """A confluent-kafka transactional producer commits, aborts and commits again (offsets of a
    source group sent to each transaction), then leaves a transaction open: read_committed
    consumers (confluent-kafka, kafka-python, aiokafka) see the committed records only and
    stop at the open transaction; read_uncommitted ones see every record; the offsets sent
    to the committed transactions are the group's, the aborted one's are not."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = target.bootstrap
    create_topic(b, unique, 1)
    create_topic(b, f"{unique}-src", 1)
    group = f"{unique}-g"
    p = Producer({"bootstrap.servers": b, "transactional.id": f"{unique}-tx",
                  "transaction.timeout.ms": 60000, "linger.ms": 5})
    source = Consumer({"bootstrap.servers": b, "group.id": group})
    try:
        p.init_transactions(OP_TIMEOUT_S)
        steps = [("commit", "c0", 5, 3), ("abort", "a", 5, 99), ("commit", "c1", 5, 7)]
        for outcome, tag, n, source_offset in steps:
            p.begin_transaction()
            for i in range(n):
                p.produce(unique, key=f"{tag}-{i}".encode(), value=f"{tag}-{i}".encode(),
                          headers=[("txn", tag.encode())], partition=0)
            p.send_offsets_to_transaction([TopicPartition(f"{unique}-src", 0, source_offset)],
                                          source.consumer_group_metadata(), OP_TIMEOUT_S)
            # Written before the outcome: librdkafka drops what it has not sent yet when a
            # transaction aborts, and the offsets below assume every record reached the log.
            assert p.flush(OP_TIMEOUT_S) == 0
            if outcome == "commit":
                p.commit_transaction(OP_TIMEOUT_S)
            else:
                p.abort_transaction(OP_TIMEOUT_S)
        p.begin_transaction()
        for i in range(3):
            p.produce(unique, key=f"open-{i}".encode(), value=f"open-{i}".encode(),
                      partition=0)
        assert p.flush(OP_TIMEOUT_S) == 0
        reads = {"committed": {f.__name__: f(b, unique, isolation="read_committed")
                               for f in (confluent_consume, kafka_python_consume,
                                         aiokafka_consume)},
                 "uncommitted": {f.__name__: f(b, unique, isolation="read_uncommitted")
                                 for f in (confluent_consume, kafka_python_consume,
                                           aiokafka_consume)}}
        offsets = committed(b, group, f"{unique}-src", 1)
        p.abort_transaction(OP_TIMEOUT_S)
    finally:
        source.close()

    def seen(tag, first_offset, n, headers=True):
        return [Seen(0, first_offset + i, f"{tag}-{i}".encode(), f"{tag}-{i}".encode(),
                     (("txn", tag.encode()),) if headers else ()) for i in range(n)]

    # Each transaction's records, then its marker: c0 at 0-4 (marker 5), a at 6-10 (marker
    # 11), c1 at 12-16 (marker 17), the open one at 18-20.
    want_committed = seen("c0", 0, 5) + seen("c1", 12, 5)
    want_all = seen("c0", 0, 5) + seen("a", 6, 5) + seen("c1", 12, 5) + seen("open", 18, 3, False)
    for name, got in reads["committed"].items():
        assert got == want_committed, name
    for name, got in reads["uncommitted"].items():
        assert got == want_all, name
    assert offsets == [7]
    differential({"reads": reads, "offsets": offsets})


def test_aiokafka_and_kafka_python_transactions(target, differential, unique):
    """The other two Python clients' transactional producers (their own InitProducerId,
    AddPartitionsToTxn and EndTxn versions): each commits one record and aborts one; a
    read_committed reader sees the two commits, a read_uncommitted one all four, each
    followed by its marker."""
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    b = target.bootstrap
    create_topic(b, unique)

    async def by_aiokafka():
        p = AIOKafkaProducer(bootstrap_servers=b, transactional_id=f"{unique}-aio",
                             request_timeout_ms=15000)
        await asyncio.wait_for(p.start(), OP_TIMEOUT_S)
        try:
            async with p.transaction():
                await p.send_and_wait(unique, b"aio-commit", key=b"k")
            await p.begin_transaction()
            await p.send_and_wait(unique, b"aio-abort", key=b"k")
            await asyncio.wait_for(p.abort_transaction(), OP_TIMEOUT_S)
        finally:
            await asyncio.wait_for(p.stop(), OP_TIMEOUT_S)

    asyncio.run(asyncio.wait_for(by_aiokafka(), OP_TIMEOUT_S * 2))
    p = KafkaProducer(bootstrap_servers=b, transactional_id=f"{unique}-kp",
                      request_timeout_ms=15000, max_block_ms=15000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(unique, b"kp-commit", key=b"k")
        p.commit_transaction()
        p.begin_transaction()
        p.send(unique, b"kp-abort", key=b"k")
        p.flush(timeout=OP_TIMEOUT_S)
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    committed_view = [(s.offset, s.value) for s in
                      confluent_consume(b, unique, isolation="read_committed")]
    everything = [(s.offset, s.value) for s in confluent_consume(b, unique)]
    assert committed_view == [(0, b"aio-commit"), (4, b"kp-commit")]
    assert everything == [(0, b"aio-commit"), (2, b"aio-abort"), (4, b"kp-commit"),
                          (6, b"kp-abort")]
    differential({"read_committed": committed_view, "read_uncommitted": everything})
