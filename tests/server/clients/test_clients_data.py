"""The data path through real clients, against Kafka and seglog (on both storage backends)
alike: every compression with headers and null keys and values, kcat and confluent-kafka
reading each other's records, offsets for times, kcat's metadata listing, every acks, binary
data, fetches from inside a batch and under small fetch limits."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from clients_runner import (
    COMPRESSIONS, KCAT, OP_TIMEOUT_S, Rec, Seen, admin, aiokafka_consume, aiokafka_produce,
    confluent_consume, confluent_produce, create_topic, expected, fetch_batches,
    kafka_python_consume, kafka_python_produce, kcat_consume, kcat_produce, records,
)

needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")

#: The data path runs on both storage backends (conftest.py's ``target``).
SEGLOG_BACKENDS = ("native", "pure")


@needs_kcat
def test_every_client_produces_and_consumes_in_every_codec(target, differential, unique):
    """For each codec, one partition of a five-partition topic: confluent-kafka, kafka-python,
    aiokafka and kcat each produce five records in that codec (null keys, null values,
    headers); each of the four clients reads all five partitions back, identical, at offsets
    0..19 of each; a raw Fetch shows the batches kept in the codec the producer used."""
    b = target.bootstrap
    create_topic(b, unique, len(COMPRESSIONS))
    want: list[Seen] = []
    offsets, by_aiokafka = {}, {}
    for p, codec in enumerate(COMPRESSIONS):
        recs = [records(f"cf-{codec}", 5, partition=p),
                records(f"kp-{codec}", 5, partition=p, both_null=False),
                records(f"ak-{codec}", 5, partition=p, both_null=False),
                records(f"kc-{codec}", 5, partition=p)]
        offsets[codec] = [confluent_produce(b, unique, recs[0], compression=codec),
                          kafka_python_produce(b, unique, recs[1], compression=codec),
                          aiokafka_produce(b, unique, recs[2], compression=codec)]
        kcat_produce(b, unique, recs[3], compression=codec)
        assert offsets[codec] == [[(p, i) for i in range(5 * n, 5 * n + 5)] for n in range(3)]
        want += expected([r for group in recs for r in group])
        # Stored as the producers built them: aiokafka sent one record per batch, always in
        # the codec; the others may have sent a batch uncompressed (librdkafka does when that
        # is smaller), never in another codec.
        batches = fetch_batches(b, unique, p)
        assert {c for _, _, c in batches} <= {codec, "none"}, codec
        by_aiokafka[codec] = [batch for batch in batches if 10 <= batch[0] < 15]
        assert by_aiokafka[codec] == [(i, i, codec) for i in range(10, 15)]
    seen = {f.__name__: f(b, unique, len(COMPRESSIONS))
            for f in (confluent_consume, kafka_python_consume, aiokafka_consume, kcat_consume)}
    for name, got in seen.items():
        for p, codec in enumerate(COMPRESSIONS):
            assert [r for r in got if r.partition == p] == \
                [r for r in want if r.partition == p], (name, codec)
    differential({"offsets": offsets, "seen": seen, "aiokafka batches": by_aiokafka})


@needs_kcat
def test_kcat_and_confluent_read_each_others_records(target, differential, unique):
    """kcat produces keyed records to three partitions, confluent-kafka reads them; then the
    other way round, on a second topic."""
    b = target.bootstrap
    create_topic(b, f"{unique}-a", 3)
    create_topic(b, f"{unique}-b", 3)
    by_kcat = [Rec(f"k{i}".encode(), f"kcat-{i}".encode(), (("from", b"kcat"),), partition=i % 3)
               for i in range(30)]
    kcat_produce(b, f"{unique}-a", by_kcat, compression="lz4")
    by_confluent = [Rec(f"k{i}".encode() if i % 4 else None,
                        f"confluent-{i}".encode() if i % 7 else None,
                        (("from", b"confluent"), ("i", str(i).encode())), partition=i % 3)
                    for i in range(30)]
    delivered = confluent_produce(b, f"{unique}-b", by_confluent, compression="zstd")
    read_by_confluent = confluent_consume(b, f"{unique}-a", 3)
    read_by_kcat = kcat_consume(b, f"{unique}-b", 3)

    def per_partition(recs):
        out, next_offset = [], {}
        for r in recs:
            offset = next_offset.get(r.partition, 0)
            next_offset[r.partition] = offset + 1
            out.append(Seen(r.partition, offset, r.key, r.value, r.headers))
        return sorted(out)

    assert read_by_confluent == per_partition(by_kcat)
    assert read_by_kcat == per_partition(by_confluent)
    assert delivered == [(i % 3, i // 3) for i in range(30)]
    differential({"confluent": read_by_confluent, "kcat": read_by_kcat,
                  "delivered": delivered})


def test_offsets_for_times(target, differential, unique):
    """ListOffsets by timestamp through three clients: the first offset whose timestamp is at
    or after the target (out-of-order timestamps included), nothing past the last one; the
    AdminClient's earliest, latest and max-timestamp offsets."""
    from aiokafka import AIOKafkaConsumer
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import OffsetSpec
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    b = target.bootstrap
    create_topic(b, unique)
    base = (int(time.time()) - 600) * 1000  # ten minutes ago: inside any retention
    stamps = [base + i * 1000 for i in range(10)] + [base + 2500, base + 9000]
    recs = [Rec(f"k{i}".encode(), f"v{i}".encode(), timestamp_ms=ts)
            for i, ts in enumerate(stamps)]
    # Two batches, so that one lookup has to pass over a batch whose max timestamp is lower.
    confluent_produce(b, unique, recs[:6])
    confluent_produce(b, unique, recs[6:])
    queries = [base - 5000, base, base + 2500, base + 2600, base + 3000, base + 9000,
               base + 9001, base + 60_000]
    want = [0, 0, 3, 3, 3, 9, -1, -1]

    c = Consumer({"bootstrap.servers": b, "group.id": f"{unique}-g"})
    try:
        by_confluent = [c.offsets_for_times([TopicPartition(unique, 0, ts)], timeout=10)[0].offset
                        for ts in queries]
    finally:
        c.close()
    kc = KafkaConsumer(bootstrap_servers=b, request_timeout_ms=15000)
    try:
        tp = KTopicPartition(unique, 0)
        by_kafka_python = []
        for ts in queries:
            found = kc.offsets_for_times({tp: ts}, timeout_ms=10000)[tp]
            by_kafka_python.append(found.offset if found is not None else -1)
    finally:
        kc.close()

    async def by_aiokafka_run():
        ac = AIOKafkaConsumer(bootstrap_servers=b, request_timeout_ms=15000)
        await ac.start()
        try:
            from aiokafka import TopicPartition as ATopicPartition
            tp = ATopicPartition(unique, 0)
            out = []
            for ts in queries:
                found = (await ac.offsets_for_times({tp: ts}))[tp]
                out.append(found.offset if found is not None else -1)
            return out
        finally:
            await ac.stop()

    import asyncio
    by_aiokafka = asyncio.run(asyncio.wait_for(by_aiokafka_run(), OP_TIMEOUT_S))

    client = admin(b)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max_timestamp": OffsetSpec.max_timestamp()}
    listed = {}
    for name, spec in specs.items():
        tp = TopicPartition(unique, 0)
        info = client.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=10)
        listed[name] = info.offset
    assert by_confluent == want
    assert by_kafka_python == want
    assert by_aiokafka == want
    assert listed == {"earliest": 0, "latest": 12, "max_timestamp": 9}
    differential({"confluent": by_confluent, "kafka-python": by_kafka_python,
                  "aiokafka": by_aiokafka, "listed": listed})


@needs_kcat
def test_kcat_lists_metadata(target, differential, unique):
    """``kcat -L`` (Metadata for all topics, as librdkafka asks for it) shows one broker, the
    topic with its three partitions, each led by that broker with it as the only replica and
    in-sync replica."""
    b = target.bootstrap
    create_topic(b, unique, 3)
    done = subprocess.run([KCAT, "-L", "-J", "-b", b], capture_output=True, timeout=OP_TIMEOUT_S,
                          check=False)
    assert done.returncode == 0, done.stderr.decode()
    md = json.loads(done.stdout)
    (broker,) = md["brokers"]
    (topic,) = [t for t in md["topics"] if t["topic"] == unique]
    partitions = sorted(
        (p["partition"], p["leader"] == broker["id"],
         [r["id"] for r in p["replicas"]] == [broker["id"]],
         [r["id"] for r in p["isrs"]] == [broker["id"]]) for p in topic["partitions"])
    result = {"broker": broker["name"] == b, "partitions": partitions}
    assert result["broker"]
    assert partitions == [(p, True, True, True) for p in range(3)]
    differential(result)


@needs_kcat
def test_null_header_values_and_every_acks(target, differential, unique):
    """A header with a null value (and one empty) survives every consumer; confluent-kafka
    producers with acks=0 (no answer: no offsets reported), acks=1 and acks=all append in
    turn."""
    from confluent_kafka import Producer

    b = target.bootstrap
    create_topic(b, unique)
    confluent_produce(b, unique, [Rec(b"k", b"v", (("n", None), ("e", b"")))])
    reports = {}
    for n, acks in enumerate((0, 1, "all")):
        p = Producer({"bootstrap.servers": b, "acks": acks, "linger.ms": 5})
        got = []
        for i in range(3):
            p.produce(unique, key=f"acks{acks}".encode(), value=f"v{i}".encode(),
                      on_delivery=lambda err, msg: got.append((err, msg.offset())))
        assert p.flush(OP_TIMEOUT_S) == 0
        reports[str(acks)] = got
        # acks=0 returns once sent: wait until appended, so that the next producer's
        # records come after these.
        c_end = 1 + 3 * (n + 1)
        deadline = time.monotonic() + OP_TIMEOUT_S
        while len(confluent_consume(b, unique)) < c_end:
            assert time.monotonic() < deadline, f"acks={acks}: records not appended"
            time.sleep(0.05)
    seen = {f.__name__: f(b, unique) for f in (confluent_consume, kafka_python_consume,
                                               aiokafka_consume, kcat_consume)}
    want = [Seen(0, 0, b"k", b"v", (("n", None), ("e", b"")))] + [
        Seen(0, 1 + 3 * n + i, f"acks{acks}".encode(), f"v{i}".encode())
        for n, acks in enumerate((0, 1, "all")) for i in range(3)]
    for name, got in seen.items():
        assert got == want, name
    assert reports == {"0": [(None, None)] * 3, "1": [(None, 4), (None, 5), (None, 6)],
                       "all": [(None, 7), (None, 8), (None, 9)]}
    differential({"seen": seen, "reports": reports})


def test_fetch_from_inside_a_batch_and_under_small_fetch_limits(target, differential, unique):
    """Ten lz4 records in one batch (compressible, so librdkafka keeps it compressed), then
    five of 5,000 bytes: every client started at offset
    7 (inside the compressed batch) gets 7 onwards and nothing before; consumers whose fetch
    limits (1 KiB) are smaller than a batch still get every record (Kafka returns the first
    batch whatever the limit, KIP-74)."""
    b = target.bootstrap
    create_topic(b, unique)
    small = [Rec(f"k{i}".encode(), f"value {i} ".encode() * 30) for i in range(10)]
    big = [Rec(f"big{i}".encode(), bytes([65 + i]) * 5000) for i in range(5)]
    confluent_produce(b, unique, small, compression="lz4", **{"linger.ms": 200})
    for r in big:
        confluent_produce(b, unique, [r])
    batches = fetch_batches(b, unique)
    from_7 = {f.__name__: [s.offset for s in f(b, unique, start_offset=7)]
              for f in (confluent_consume, kafka_python_consume, aiokafka_consume,
                        kcat_consume)}
    limited = {
        "confluent": confluent_consume(b, unique, **{
            "fetch.max.bytes": 1024, "message.max.bytes": 1000,
            "max.partition.fetch.bytes": 1024}),
        "kafka-python": kafka_python_consume(b, unique, fetch_max_bytes=1024,
                                             max_partition_fetch_bytes=1024),
        "aiokafka": aiokafka_consume(b, unique, fetch_max_bytes=1024,
                                     max_partition_fetch_bytes=1024),
    }
    assert batches[0] == (0, 9, "lz4") and [bt[0] for bt in batches[1:]] == list(range(10, 15))
    for name, offsets in from_7.items():
        assert offsets == list(range(7, 15)), name
    for name, got in limited.items():
        assert got == expected(small + big), name
    differential({"batches": batches, "from 7": from_7, "limited": limited})


def test_binary_keys_values_and_headers(target, differential, unique):
    """Keys, values and header values of every byte (NUL, 0xFF, invalid UTF-8), an empty key
    and an empty value (not null), produced by kafka-python in gzip, read by the three
    Python clients unchanged."""
    b = target.bootstrap
    create_topic(b, unique)
    every_byte = bytes(range(256))
    recs = [Rec(every_byte, every_byte[::-1] * 40, (("bin", b"\x00\xff\xfe"), ("", b"\x80"))),
            Rec(b"", b"empty key"), Rec(b"empty value", b""),
            Rec(b"\xff" * 3, bytes((i * 7) % 256 for i in range(3000)))]
    offsets = kafka_python_produce(b, unique, recs, compression="gzip")
    seen = {f.__name__: f(b, unique)
            for f in (confluent_consume, kafka_python_consume, aiokafka_consume)}
    for name, got in seen.items():
        assert got == expected(recs), name
    differential({"offsets": offsets, "seen": seen})
