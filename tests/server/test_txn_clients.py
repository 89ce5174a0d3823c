"""Transactions end to end with real clients against ``seglog serve``: confluent-kafka
(librdkafka), kafka-python and aiokafka transactional producers committing and aborting across
partitions with consumer offsets, read by read_committed and read_uncommitted consumers;
zombie fencing; a transaction past its timeout aborted (and its producer fenced) by the broker;
an idempotent producer whose connection drops under it, retrying without duplicates.

Each scenario was run against a Kafka 4.4 broker with the same script and gave the same
records, committed offsets and errors. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP

pytestmark = pytest.mark.clients

WAIT_S = 20


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str, want: int,
                timeout_s: float = 10.0) -> list[bytes]:
    """Up to ``want`` record values of ``topic`` (from the start, sorted), read by a
    confluent-kafka consumer at ``isolation``; waits at most ``timeout_s``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("reader"),
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([CTP(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(values) < want and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        return sorted(values)
    finally:
        consumer.close()


def test_confluent_kafka_commit_abort_offsets_and_fencing(any_backend_broker):
    broker = any_backend_broker
    topic, source, group, transactional_id = (_name("tx"), _name("in"), _name("g"),
                                              _name("ck"))
    broker.store.create_topic(topic, 3)
    broker.store.create_topic(source, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "transactional.id": transactional_id})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=b"c%d" % i, partition=i % 3)
    # A member of the group (joined, generation >= 0): the commit's member and generation
    # are checked by the group coordinator.
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    member.subscribe([source])
    deadline = time.monotonic() + WAIT_S
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.1)
    assert member.assignment() == [CTP(source, 0)]
    producer.send_offsets_to_transaction([CTP(source, 0, 42)],
                                         member.consumer_group_metadata(), WAIT_S)
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"a%d" % i, partition=i % 3)
    producer.flush(WAIT_S)
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"c-last", partition=0)
    producer.commit_transaction(WAIT_S)

    committed = sorted([b"c-last"] + [b"c%d" % i for i in range(6)])
    assert read_values(broker.bootstrap, topic, 3, "read_committed", 7) == committed
    assert read_values(broker.bootstrap, topic, 3, "read_uncommitted", 10) == sorted(
        committed + [b"a0", b"a1", b"a2"])
    (offset,) = member.committed([CTP(source, 0)], WAIT_S)
    assert offset.offset == 42
    member.close()

    # A second producer with the same transactional.id fences the first (a zombie).
    successor = Producer({"bootstrap.servers": broker.bootstrap,
                          "transactional.id": transactional_id})
    successor.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"zombie", partition=0)
    with pytest.raises(KafkaException) as failure:
        producer.commit_transaction(WAIT_S)
    assert failure.value.args[0].fatal()
    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=1)
    successor.commit_transaction(WAIT_S)
    # 7 committed, 3 aborted, the successor's: the zombie's record was never appended.
    everything = read_values(broker.bootstrap, topic, 3, "read_uncommitted", 11)
    assert b"zombie" not in everything and b"successor" in everything
    # With 8 markers (commit 3, abort 3, commit 1, the successor's 1): 19 offsets.
    assert sum(broker.store.log((topic, p)).end_offset for p in range(3)) == 19


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(broker_factory, tmp_path):
    broker = broker_factory(
        data_dir=tmp_path / "data",
        config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    topic = _name("to")
    broker.store.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": _name("to"), "transaction.timeout.ms": 1000})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"lost")
    producer.flush(WAIT_S)
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": _name("r"),
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    try:
        reader.assign([CTP(topic, 0, 0)])
        seen, position = [], 0
        deadline = time.monotonic() + WAIT_S
        # The record and the broker's ABORT marker: read_committed moves past both.
        while position < 2 and time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
            position = reader.position([CTP(topic, 0)])[0].offset
        assert (seen, position) == ([], 2)
    finally:
        reader.close()
    with pytest.raises(KafkaException) as failure:
        producer.commit_transaction(WAIT_S)
    assert failure.value.args[0].fatal()  # fenced by the epoch bump of the abort


def test_kafka_python_transactions(broker):
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata, TopicPartition

    topic, source, group, transactional_id = (_name("kp"), _name("in"), _name("g"),
                                              _name("kp"))
    broker.store.create_topic(topic, 2)
    broker.store.create_topic(source, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap,
                                   transactional_id=transactional_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, b"c%d" % i, partition=i % 2)
        producer.send_offsets_to_transaction(
            {TopicPartition(source, 0): OffsetAndMetadata(7, "", -1)}, group)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(2):
            producer.send(topic, b"a%d" % i, partition=i % 2)
        producer.flush()
        producer.abort_transaction()

        assert read_values(broker.bootstrap, topic, 2, "read_committed", 4) == [
            b"c0", b"c1", b"c2", b"c3"]
        assert read_values(broker.bootstrap, topic, 2, "read_uncommitted", 6) == [
            b"a0", b"a1", b"c0", b"c1", b"c2", b"c3"]
        assert broker.store.offset_fetch(group, TopicPartition(source, 0)).offset == 7

        successor = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap,
                                        transactional_id=transactional_id)
        successor.init_transactions()
        successor.close(timeout=5)
        producer.begin_transaction()
        producer.send(topic, b"zombie", partition=0)
        # The zombie's AddPartitionsToTxn is fenced; whether its answer arrives before the
        # commit (the client is then in an error state naming it) or after (the commit
        # raises it) is the client's timing, against Kafka too.
        with pytest.raises(kafka.errors.KafkaError, match="ProducerFenced"):
            producer.commit_transaction()
    finally:
        producer.close(timeout=5)


def test_aiokafka_transactions(broker):
    aiokafka = pytest.importorskip("aiokafka")
    topic, source, group = _name("ak"), _name("in"), _name("g")
    broker.store.create_topic(topic, 2)
    broker.store.create_topic(source, 1)

    async def scenario():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                             transactional_id=_name("ak"),
                                             request_timeout_ms=WAIT_S * 1000)
        await asyncio.wait_for(producer.start(), WAIT_S)
        try:
            async with producer.transaction():
                for i in range(4):
                    await producer.send_and_wait(topic, b"c%d" % i, partition=i % 2)
                await producer.send_offsets_to_transaction(
                    {aiokafka.TopicPartition(source, 0): 11}, group)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send_and_wait(topic, b"a0", partition=0)
                    raise RuntimeError("abort it")
        finally:
            await asyncio.wait_for(producer.stop(), WAIT_S)

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S * 2))
    assert read_values(broker.bootstrap, topic, 2, "read_committed", 4) == [
        b"c0", b"c1", b"c2", b"c3"]
    assert read_values(broker.bootstrap, topic, 2, "read_uncommitted", 5) == [
        b"a0", b"c0", b"c1", b"c2", b"c3"]
    from seglog.types import TopicPartition
    assert broker.store.offset_fetch(group, TopicPartition(source, 0)).offset == 11


class DroppingProxy:
    """A TCP proxy on 127.0.0.1 between clients and the broker that, once, forwards a Produce
    request and then cuts the connection instead of returning its response: the client
    must retry a batch the broker already appended. Threads; every socket has a timeout."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.target_port = None
        self.dropped = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, target_port: int) -> None:
        self.target_port = target_port
        self._spawn(self._accept_loop)

    def _spawn(self, fn, *args) -> None:
        thread = threading.Thread(target=fn, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            client.settimeout(0.2)
            upstream.settimeout(0.2)
            produce_ids: set[int] = set()
            self._spawn(self._pipe, client, upstream, produce_ids, True)
            self._spawn(self._pipe, upstream, client, produce_ids, False)

    def _pipe(self, source, sink, produce_ids: set, to_broker: bool) -> None:
        buffer = b""
        try:
            while not self._stop.is_set():
                try:
                    chunk = source.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    break
                buffer += chunk
                while len(buffer) >= 4:
                    (size,) = struct.unpack_from(">i", buffer)
                    if len(buffer) < 4 + size:
                        break
                    frame, buffer = buffer[:4 + size], buffer[4 + size:]
                    if to_broker:
                        api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 4)
                        if api_key == 0:
                            produce_ids.add(correlation_id)
                    else:
                        (correlation_id,) = struct.unpack_from(">i", frame, 4)
                        with self._lock:
                            drop = correlation_id in produce_ids and not self.dropped.is_set()
                            if drop:
                                self.dropped.set()
                        if drop:
                            return  # the finally closes both sides: the response is lost
                    sink.sendall(frame)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        for thread in self._threads:
            thread.join(timeout=2)


def test_idempotent_producer_retries_without_duplicates(broker_factory, tmp_path):
    proxy = DroppingProxy()
    try:
        broker = broker_factory(
            data_dir=tmp_path / "data",
            config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
        proxy.start(broker.port)
        topic = _name("idem")
        broker.store.create_topic(topic, 1)
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{proxy.port}",
                             "enable.idempotence": True, "linger.ms": 2,
                             "retry.backoff.ms": 50})
        count = 300
        for i in range(count):
            producer.produce(topic, value=b"%d" % i)
            if i % 50 == 0:
                producer.poll(0)
        assert producer.flush(WAIT_S) == 0
        assert proxy.dropped.is_set()  # a Produce response was really lost
        log = broker.store.log((topic, 0))
        assert log.end_offset == count  # the retried batch was not appended twice
        values = read_values(broker.bootstrap, topic, 1, "read_uncommitted", count)
        assert values == sorted(b"%d" % i for i in range(count))
    finally:
        proxy.close()


def test_transaction_survives_a_broker_restart(broker_factory, tmp_path):
    """A transaction open across a clean broker restart (same data dir and port) commits
    after it: the coordinator reloads the producer's state from __transaction_state and the
    partitions' producer state from their logs; read_committed readers then see it."""
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir=data_dir)
    port = broker.port
    topic, transactional_id = _name("rs"), _name("rs")
    broker.store.create_topic(topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": transactional_id, "linger.ms": 1})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"r%d" % i, partition=i % 2)
    producer.flush(WAIT_S)
    broker.stop()
    broker = broker_factory(data_dir=data_dir, listen=("127.0.0.1", port))
    assert broker.store.transaction_coordinator().describe(transactional_id).state == "Ongoing"
    producer.commit_transaction(WAIT_S)
    assert read_values(broker.bootstrap, topic, 2, "read_committed", 4) == [
        b"r0", b"r1", b"r2", b"r3"]
