"""Issue 8, the store's and clients' part: the consumer checks CRCs (Kafka's ``check.crcs``),
the cleaner stops on a corrupt batch and loses nothing, the internal topics' loaders never
let a flipped byte change a committed offset or a transaction silently, bad bytes in their
records are typed errors (or skipped where Kafka skips them), the topics registry's JSON is
checked field by field, and integer arguments of the clients get one behaviour. Every test
runs on both backends.
"""

from __future__ import annotations

import json
import os
import struct
import warnings

import pytest

from seglog import format as fmt
from seglog.coordinator import offsets_schema, txn_schema
from seglog.errors import CorruptCheckpointError, CorruptRecordError
from seglog.store import TOPICS_FILE, Store, TopicPartition

TP = TopicPartition


def open_store(path, backend, **kwargs):
    return Store(path, backend=backend.name, offsets_topic_partitions=1,
                 transaction_state_partitions=1, **kwargs)


def segment_file(path, topic, partition=0, base=0):
    return os.path.join(path, f"{topic}-{partition}", f"{base:020d}.log")


def flip_last_byte_of(path, needle):
    data = open(path, "rb").read()
    at = data.find(needle)
    assert at >= 0, needle
    with open(path, "r+b") as f:
        f.seek(at + len(needle) - 1)
        f.write(bytes([data[at + len(needle) - 1] ^ 0x01]))


def file_bytes(path):
    return {name: open(os.path.join(root, name), "rb").read()
            for root, _dirs, names in os.walk(path) for name in names
            if name.endswith(".log")}


# --- the consumer: check.crcs ------------------------------------------------------------------


def corrupt_topic(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        topic = store.create_topic("t")
        for i in range(20):
            topic.log(0).append(b"value-%03d" % i)
    flip_last_byte_of(segment_file(tmp_path, "t"), b"value-011")


def test_consumer_poll_checks_crcs_by_default(tmp_path, backend):
    corrupt_topic(tmp_path, backend)
    with open_store(tmp_path, backend) as store:
        consumer = store.consumer(auto_offset_reset="earliest")
        assert consumer.check_crcs is True
        consumer.assign([("t", 0)])
        got = []
        with pytest.raises(CorruptRecordError) as info:
            for _ in range(30):
                got += consumer.poll(max_records=5)
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        # Kafka's consumer: the records before the corrupt batch, then the error, which
        # stays (the position does not move past the batch).
        assert [r.value for r in got] == [b"value-%03d" % i for i in range(11)]
        assert consumer.position(("t", 0)) == 11
        with pytest.raises(CorruptRecordError):
            consumer.poll(max_records=5)
        # Kafka's check.crcs=false: the bytes as they are.
        relaxed = store.consumer(auto_offset_reset="earliest", check_crcs=False)
        relaxed.assign([("t", 0)])
        values = [r.value for r in relaxed.poll(max_records=100)]
        assert values[11] == b"value-010" and len(values) == 20


def test_consumer_poll_does_not_skip_a_batch_whose_control_bit_flipped(tmp_path, backend):
    # A data batch with its control bit flipped looks like a transaction marker, which a
    # consumer leaves out: its CRC32C is checked before that header bit is believed, so the
    # poll raises instead of losing the batch's records without a word.
    with open_store(tmp_path, backend) as store:
        log = store.create_topic("t").log(0)
        for i in range(3):
            log.append_batch([b"value-%d-%d" % (i, j) for j in range(4)])
    path = segment_file(tmp_path, "t")
    data = bytearray(open(path, "rb").read())
    second = 12 + struct.unpack_from(">i", data, 8)[0]  # the second batch's position
    data[second + 22] ^= 0x20  # attributes' low byte: the control flag
    open(path, "wb").write(bytes(data))
    with open_store(tmp_path, backend) as store:
        consumer = store.consumer(auto_offset_reset="earliest")
        consumer.assign([("t", 0)])
        got = consumer.poll(max_records=100)
        assert [r.offset for r in got] == [0, 1, 2, 3]  # the batch before it, first
        with pytest.raises(CorruptRecordError) as info:
            consumer.poll(max_records=100)
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        assert consumer.position(("t", 0)) == 4


def test_consumer_poll_columns_checks_crcs_by_default(tmp_path, backend):
    corrupt_topic(tmp_path, backend)
    with open_store(tmp_path, backend) as store:
        consumer = store.consumer(auto_offset_reset="earliest")
        consumer.assign([("t", 0)])
        with pytest.raises(CorruptRecordError):
            for _ in range(30):
                consumer.poll_columns(max_records=5)
        relaxed = store.consumer(auto_offset_reset="earliest", check_crcs=False)
        relaxed.assign([("t", 0)])
        columns = relaxed.poll_columns(max_records=100)[TP("t", 0)]
        assert columns.value(11) == b"value-010"


# --- the cleaner -------------------------------------------------------------------------------


def compacted_with_corrupt_batch(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        topic = store.create_topic("c", config={"cleanup.policy": "compact",
                                                "min.cleanable.dirty.ratio": "0.01"})
        log = topic.log(0)
        for i in range(40):
            log.append(b"value-%03d" % i, key=b"k%d" % (i % 4))
        log.roll()
        log.append(b"tail", key=b"k0")
    flip_last_byte_of(segment_file(tmp_path, "c"), b"value-030")


def test_cleaner_stops_on_a_corrupt_batch_and_loses_nothing(tmp_path, backend):
    compacted_with_corrupt_batch(tmp_path, backend)
    before = file_bytes(tmp_path)
    with open_store(tmp_path, backend) as store:
        log = store.topic("c").log(0)
        with pytest.raises(CorruptRecordError) as info:
            log.compact(force=True)
        assert info.value.reason == fmt.REASON_CRC_MISMATCH
        assert "00000000000000000000.log" in str(info.value)
        assert not [n for n in os.listdir(log.dir_path) if ".cleaned" in n or ".swap" in n]
        assert len(list(log.records(check_crcs=False))) == 41  # every record still there
        # The store's pass marks the partition uncleanable, warns, and goes on.
        with pytest.warns(RuntimeWarning, match="compaction of c-0"):
            assert TP("c", 0) not in store.compact()
        assert isinstance(store.uncleanable_partitions[TP("c", 0)], CorruptRecordError)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # not retried, so no second warning
            assert TP("c", 0) not in store.compact()
    assert file_bytes(tmp_path) == before  # nothing cut, nothing rewritten


# --- __consumer_offsets ------------------------------------------------------------------------


COMMITTED = 0x0123456789  # an offset whose bytes are easy to find


def committed_store(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t")
        group = store.group("g")
        group.alter_offsets({("t", 0): COMMITTED})
    return os.path.join(tmp_path, f"{offsets_schema.OFFSETS_TOPIC}-0")


def test_flipped_byte_in_consumer_offsets_never_changes_an_offset(tmp_path, backend):
    offsets_dir = committed_store(tmp_path, backend)
    path = os.path.join(offsets_dir, f"{0:020d}.log")
    flip_last_byte_of(path, struct.pack(">q", COMMITTED))
    damaged = open(path, "rb").read()
    for _ in range(2):  # an open with a failed partition must not make the next one cut it
        with open_store(tmp_path, backend) as store:  # the partition alone is offline
            with pytest.raises(CorruptRecordError) as info:
                store.group("g").committed(("t", 0))
            assert offsets_schema.OFFSETS_TOPIC in str(info.value)
            with pytest.raises(CorruptRecordError):
                store.group("g").alter_offsets({("t", 0): 1})
        assert open(path, "rb").read() == damaged


def append_internal_record(store, topic, key, value):
    """Append one record to an internal topic as bad bytes on disk would hold it: a null key
    included (the compacted topic's own check is lifted for that one append)."""
    log = store.topic(topic).log(0)
    config = log.config
    log.update_config(config.replace(cleanup_policy=("delete",)))
    try:
        log.append_batch([value], keys=[key])
    finally:
        log.update_config(config)


def append_offsets_record(tmp_path, backend, key, value):
    with open_store(tmp_path, backend) as store:
        append_internal_record(store, offsets_schema.OFFSETS_TOPIC, key, value)


@pytest.mark.parametrize("version", [999, -3])  # 3-8, 16-23: group records (KIP-848, KIP-1071)
def test_unknown_offsets_key_version_is_skipped_as_kafka_does(tmp_path, backend, version):
    """GroupMetadataManager: "Unknown message key with version ... Ignoring it"."""
    committed_store(tmp_path, backend)
    append_offsets_record(tmp_path, backend, struct.pack(">h", version) + b"future", b"x")
    with pytest.warns(RuntimeWarning, match=f"unknown message key with version {version}"):
        store = open_store(tmp_path, backend)
    with store:
        assert store.group("g").committed(("t", 0)) == COMMITTED


@pytest.mark.parametrize("key,value", [
    (offsets_schema.encode_key(offsets_schema.OffsetCommitKey("g", "t", 0)),
     struct.pack(">h", 99) + bytes(20)),                     # unknown value version
    (offsets_schema.encode_key(offsets_schema.OffsetCommitKey("g", "t", 0)),
     struct.pack(">hq", 3, 5)),                              # truncated value
    (struct.pack(">hh", 1, 40) + b"g", b"x"),                # truncated key
    (b"\x00", b"x"),                                         # a key shorter than its version
    (None, b"x"),                                            # null key (Kafka: require)
], ids=["value-version", "short-value", "short-key", "one-byte-key", "null-key"])
def test_bad_offsets_records_are_typed_errors(tmp_path, backend, key, value):
    committed_store(tmp_path, backend)
    append_offsets_record(tmp_path, backend, key, value)
    with open_store(tmp_path, backend) as store, pytest.raises(CorruptRecordError) as info:
        store.group("g").committed(("t", 0))
    assert offsets_schema.OFFSETS_TOPIC in str(info.value)


# --- __transaction_state -----------------------------------------------------------------------


def transactional_store(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t")
        producer = store.producer(transactional_id="the-txn-id", linger_ms=0)
        producer.begin_transaction()
        producer.send("t", b"v", key=b"k", partition=0)
        producer.commit_transaction()
        producer.close()
    return os.path.join(tmp_path, f"{txn_schema.TRANSACTION_STATE_TOPIC}-0", f"{0:020d}.log")


def test_flipped_byte_in_transaction_state_is_a_typed_error(tmp_path, backend):
    path = transactional_store(tmp_path, backend)
    flip_last_byte_of(path, b"the-txn-id")
    with open_store(tmp_path, backend) as store, pytest.raises(CorruptRecordError) as info:
        store.describe_transaction("the-txn-id")
    assert txn_schema.TRANSACTION_STATE_TOPIC in str(info.value)


@pytest.mark.parametrize("key,value", [
    (txn_schema.encode_key("other"), struct.pack(">hq", 0, 1)),      # truncated value
    (txn_schema.encode_key("other"), struct.pack(">h", 5) + bytes(30)),  # value version
    (None, b"x"),                                                    # null key
    (b"\x00", b"x"),                                                 # one-byte key
], ids=["short-value", "value-version", "null-key", "one-byte-key"])
def test_bad_transaction_state_records_are_typed_errors(tmp_path, backend, key, value):
    transactional_store(tmp_path, backend)
    with open_store(tmp_path, backend) as store:
        append_internal_record(store, txn_schema.TRANSACTION_STATE_TOPIC, key, value)
    with open_store(tmp_path, backend) as store, pytest.raises(CorruptRecordError) as info:
        store.init_producer_id("the-txn-id")
    assert txn_schema.TRANSACTION_STATE_TOPIC in str(info.value)


def test_unknown_transaction_state_key_version_is_skipped_as_kafka_does(tmp_path, backend):
    """TransactionStateManager: "Unknown message key with version ... Ignoring it"."""
    transactional_store(tmp_path, backend)
    with open_store(tmp_path, backend) as store:
        store.topic(txn_schema.TRANSACTION_STATE_TOPIC).log(0).append_batch(
            [b"x"], keys=[struct.pack(">hh", 9, 1) + b"x"])
    with pytest.warns(RuntimeWarning, match="unknown message key with version 9"):
        store = open_store(tmp_path, backend)
    with store:
        assert store.describe_transaction("the-txn-id").state == "CompleteCommit"


# --- the topics registry -----------------------------------------------------------------------


REGISTRY_DAMAGE = {
    "topic-entry-list": lambda r: r["topics"].__setitem__("t", []),
    "topic-entry-bool": lambda r: r["topics"].__setitem__("t", True),
    "partitions-str": lambda r: r["topics"]["t"].__setitem__("partitions", "2"),
    "partitions-null": lambda r: r["topics"]["t"].__setitem__("partitions", None),
    "partitions-huge": lambda r: r["topics"]["t"].__setitem__("partitions", 2**70),
    "partitions-bool": lambda r: r["topics"]["t"].__setitem__("partitions", True),
    "topic-id-int": lambda r: r["topics"]["t"].__setitem__("topic_id", 5),
    "topic-id-garbage": lambda r: r["topics"]["t"].__setitem__("topic_id", "x!"),
    "config-list": lambda r: r["topics"]["t"].__setitem__("config", ["a"]),
    "config-int-key": lambda r: r["topics"]["t"]["config"].__setitem__(1, 2),
    "config-bad-value": lambda r: r["topics"]["t"]["config"].__setitem__("retention.ms", []),
    "topics-list": lambda r: r.__setitem__("topics", []),
    "block-end-str": lambda r: r.__setitem__("producer_id_block_end", "7"),
    "block-end-negative": lambda r: r.__setitem__("producer_id_block_end", -1),
    "bad-topic-name": lambda r: r["topics"].__setitem__("../escape", r["topics"]["t"]),
    "not-an-object": lambda r: r.clear() or r.__setitem__("x", 1),
}


@pytest.mark.parametrize("damage", sorted(REGISTRY_DAMAGE))
def test_topics_registry_wrong_json_types_are_typed_errors(tmp_path, backend, damage):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", partitions=2, config={"retention.ms": "1000"})
    path = os.path.join(tmp_path, TOPICS_FILE)
    registry = json.load(open(path))
    REGISTRY_DAMAGE[damage](registry)
    # json.dumps turns int keys into strings: write the int-key case by hand.
    text = json.dumps(registry).replace('"1": 2', '1: 2')
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises(CorruptCheckpointError) as info:
        open_store(tmp_path, backend)
    assert TOPICS_FILE in str(info.value)


# --- integer arguments of the clients ----------------------------------------------------------


@pytest.mark.parametrize("value,error", [(1.5, TypeError), ("1", TypeError), (True, TypeError),
                                         (2**70, ValueError)], ids=repr)
def test_client_integer_arguments(tmp_path, backend, value, error):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t")
        consumer = store.consumer(auto_offset_reset="earliest")
        consumer.assign([("t", 0)])
        producer = store.producer(linger_ms=0)
        checks = [
            lambda: consumer.poll(max_records=value),
            lambda: consumer.poll(timeout_ms=value),
            lambda: consumer.poll_columns(max_records=value),
            lambda: consumer.seek(("t", 0), value) if error is TypeError else
            consumer.seek(("t", 0), 2**70),
            lambda: store.consumer(max_poll_records=value),
            lambda: store.consumer(max_partition_fetch_bytes=value),
            lambda: producer.send("t", b"v", partition=value),
            lambda: producer.send("t", b"v", timestamp_ms=value),
            lambda: producer.send_batch("t", [b"v"], timestamps_ms=value),
            lambda: producer.flush(timeout_ms=value),
            lambda: store.producer(linger_ms=value),
            lambda: store.producer(batch_size_bytes=value),
            lambda: store.apply_retention(now_ms=value),
            lambda: store.create_topic("n", partitions=value),
            lambda: Store(tmp_path / "other", backend=backend.name,
                          offsets_topic_partitions=value),
            lambda: store.maintain(now_ms=value),
        ]
        for i, check in enumerate(checks):
            expected = ValueError if i == 3 and error is not TypeError else error
            with pytest.raises(expected):
                check()
        assert store.topic("t").log(0).end_offset == 0  # nothing was written
