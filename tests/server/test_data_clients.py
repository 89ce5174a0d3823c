"""The data path end to end with real clients against ``seglog serve``: confluent-kafka
(librdkafka) in every compression on both storage backends, kafka-python, kcat; read_committed
and read_uncommitted consumers over an aborted transaction; a long-polling consumer woken by a
produce. Consumers are assigned partitions (no group), so only the data APIs are involved."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

WAIT_S = 20.0  # bound on every wait for records
KCAT = shutil.which("kcat") or "/usr/bin/kcat"


def _consume(bootstrap, topic, partitions, count, *, isolation="read_uncommitted",
             extra=None):
    """Up to ``count`` messages of ``topic`` from offset 0 of ``partitions``, waiting at most
    WAIT_S; returns them as (partition, offset, key, value, headers)."""
    config = {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
              "isolation.level": isolation, "enable.partition.eof": False}
    config.update(extra or {})
    consumer = confluent_kafka.Consumer(config)
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        got = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.partition(), message.offset(), message.key(), message.value(),
                        message.headers()))
        return got
    finally:
        consumer.close()


def _produce(bootstrap, topic, messages, **config):
    """Produce ``messages`` [(partition, key, value, headers)]; returns the delivery reports
    (error, partition, offset)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                         **config})
    reports = []
    for partition, key, value, headers in messages:
        producer.produce(topic, value=value, key=key, partition=partition, headers=headers,
                         on_delivery=lambda err, msg: reports.append(
                             (err, msg.partition(), msg.offset())))
    assert producer.flush(WAIT_S) == 0
    return reports


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_every_codec(any_backend_broker, codec):
    broker = any_backend_broker
    broker.store.create_topic("c", partitions=2)
    messages = [(i % 2, None if i % 5 == 0 else b"k%d" % i, None if i % 7 == 0 else b"v%d" % i,
                 [("h", b"x%d" % i), ("n", None)] if i % 3 == 0 else None) for i in range(300)]
    reports = _produce(broker.bootstrap, "c", messages, **{"compression.type": codec})
    assert [r[0] for r in reports] == [None] * 300
    got = _consume(broker.bootstrap, "c", [0, 1], 300)
    for p in (0, 1):
        sent = [(k, v, h or None) for q, k, v, h in messages if q == p]
        mine = [(k, v, [tuple(x) for x in hs] if hs else None)
                for q, _o, k, v, hs in got if q == p]
        assert mine == [(k, v, [tuple(x) for x in h] if h else None) for k, v, h in sent]
        assert [o for q, o, *_ in got if q == p] == list(range(150))
    # The broker stored the client's batches as they were built: in the codec.
    batches = list(broker.store.log(("c", 0)).backend.iter_batches(
        broker.store.log(("c", 0)).read(0).buffer))
    assert {b.compression for b in batches} == {codec}


def test_kafka_python_produce_consume_and_offsets(broker):
    kafka = pytest.importorskip("kafka")
    broker.store.create_topic("kp", partitions=1)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
    futures = [producer.send("kp", b"x%d" % i, key=b"k", timestamp_ms=1_700_000_000_000 + i)
               for i in range(50)]
    producer.flush(WAIT_S)
    assert [f.get(WAIT_S).offset for f in futures] == list(range(50))
    producer.close()
    tp = kafka.TopicPartition("kp", 0)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap,
                                   auto_offset_reset="earliest", consumer_timeout_ms=2000)
    try:
        consumer.assign([tp])
        got = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 50 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend((r.offset, r.value) for r in records)
        assert got == [(i, b"x%d" % i) for i in range(50)]
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 50}
        found = consumer.offsets_for_times({tp: 1_700_000_000_000 + 20})[tp]
        assert (found.offset, found.timestamp) == (20, 1_700_000_000_000 + 20)
        assert consumer.offsets_for_times({tp: 1_800_000_000_000})[tp] is None
    finally:
        consumer.close()


def test_kcat_produces_and_consumes(broker):
    if not shutil.which(KCAT):
        pytest.skip("kcat is not installed")
    broker.store.create_topic("kc", partitions=1)
    done = subprocess.run([KCAT, "-b", broker.bootstrap, "-P", "-t", "kc", "-K:", "-z", "lz4",
                           "-H", "h1=v1"], input=b"a:1\nb:2\nc:3\n", capture_output=True,
                          timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", "kc", "-e", "-f",
                           "%k=%s@%o %h\n"], capture_output=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == ["a=1@0 h1=v1", "b=2@1 h1=v1", "c=3@2 h1=v1"]
    done = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", "kc", "-o", "-1", "-e",
                           "-f", "%s\n"], capture_output=True, timeout=WAIT_S)
    assert done.stdout.decode().splitlines() == ["3"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kcat_compresses_in_every_codec(broker, codec):
    # kcat's librdkafka (2.0.2 on Debian) compresses gzip, snappy and lz4 only when the
    # broker advertises Produce v2 (KAFKA-18659: Kafka 4 advertises Produce from v0 for it).
    if not shutil.which(KCAT):
        pytest.skip("kcat is not installed")
    broker.store.create_topic("kz", partitions=1)
    done = subprocess.run([KCAT, "-b", broker.bootstrap, "-P", "-t", "kz", "-z", codec],
                          input=(b"x" * 200 + b"\n") * 20, capture_output=True,
                          timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    log = broker.store.log(("kz", 0))
    assert log.end_offset == 20
    assert {b.compression for b in log.backend.iter_batches(log.read(0).buffer)} == {codec}


def test_read_committed_skips_an_aborted_transaction(any_backend_broker):
    broker = any_backend_broker
    store = broker.store
    store.create_topic("tx", partitions=1)
    # The embedded transactional producer writes through the broker's store: an aborted
    # transaction, a committed one, and one left open (above the last stable offset).
    producer = store.producer(transactional_id="tx-clients")
    producer.init_transactions()
    for values, end in (([b"a1", b"a2"], "abort"), ([b"c1"], "commit"), ([b"o1"], None)):
        producer.begin_transaction()
        for value in values:
            producer.send("tx", value, partition=0)
        producer.flush()
        if end == "abort":
            producer.abort_transaction()
        elif end == "commit":
            producer.commit_transaction()
    committed = _consume(broker.bootstrap, "tx", [0], 1, isolation="read_committed")
    uncommitted = _consume(broker.bootstrap, "tx", [0], 4)
    assert [v for *_x, v, _h in committed] == [b"c1"]
    assert [v for *_x, v, _h in uncommitted] == [b"a1", b"a2", b"c1", b"o1"]
    producer.commit_transaction()
    after = _consume(broker.bootstrap, "tx", [0], 2, isolation="read_committed")
    assert [v for *_x, v, _h in after] == [b"c1", b"o1"]


def test_long_poll_wakes_on_produce(broker):
    broker.store.create_topic("lp", partitions=1)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "unused",
        "fetch.wait.max.ms": 60000, "fetch.min.bytes": 1, "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition("lp", 0, 0)])
        assert consumer.poll(0.5) is None  # a fetch is now waiting on the empty log
        _produce(broker.bootstrap, "lp", [(0, None, b"wake", None)])
        message = None
        deadline = time.monotonic() + WAIT_S  # far below the consumer's 60 s fetch wait
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
        assert message is not None and message.value() == b"wake"
        # Stop fetching, then complete the fetch in flight, so that stopping the broker does
        # not wait for a 60 s long poll of a closed consumer.
        consumer.pause([confluent_kafka.TopicPartition("lp", 0)])
        _produce(broker.bootstrap, "lp", [(0, None, b"end", None)])
    finally:
        consumer.close()


def test_broker_message_max_bytes_is_the_topics_default(broker_factory):
    broker = broker_factory(message_max_bytes=500)
    broker.store.create_topic("sized", partitions=1)
    broker.store.create_topic("roomy", partitions=1, config={"max.message.bytes": "5000"})
    for topic, expected in (("sized", confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE),
                            ("roomy", None)):
        (report,) = _produce(broker.bootstrap, topic, [(0, None, b"x" * 1000, None)])
        assert (report[0].code() if report[0] else None) == expected
