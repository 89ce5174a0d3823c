"""``__transaction_state`` keys and values (seglog.coordinator.txn_schema): golden bytes written by Kafka
4.4.0's own generated ``TransactionLogKey`` / ``TransactionLogValue`` classes, versions 0 and 1
(the flexible one a ``transaction.version`` 2 cluster writes), hand-built bytes from the
schema, every truncation and byte mutation (a typed error or a value, never anything else),
one test per malformed case, and the coordinator loading and completing version 1 states.

The Kafka vectors came from this program, run against the jars of ``ci/kafka-ref.sh``
(``MessageUtil.toVersionPrefixedBytes(version, value)``, as ``TransactionLog.valueToBytes``)::

    List<PartitionsSchema> parts = List.of(
        new PartitionsSchema().setTopic("__consumer_offsets").setPartitionIds(List.of(17)),
        new PartitionsSchema().setTopic("k-txn").setPartitionIds(List.of(0, 2)));
    new TransactionLogValue().setProducerId(1001).setProducerEpoch(5)
        .setTransactionTimeoutMs(60000).setTransactionStatus(2 /* PrepareCommit */)
        .setTransactionPartitions(parts).setTransactionLastUpdateTimestampMs(1767225600123L)
        .setTransactionStartTimestampMs(1767225600000L)
        // version 1 only:
        .setPreviousProducerId(1000).setNextProducerId(1002).setClientTransactionVersion(2);
"""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings, strategies as st

from seglog.coordinator import txn_schema
from seglog.errors import CorruptRecordError
from seglog.coordinator.offsets_schema import encode_uvarint as _uvarint
from seglog.store import Store
from seglog.coordinator.txn_schema import TransactionLogValue

PREPARE_COMMIT_PARTITIONS = (("__consumer_offsets", 17), ("k-txn", 0), ("k-txn", 2))

#: Kafka 4.4.0, version 0: PrepareCommit, two topics.
KAFKA_V0_PREPARE_COMMIT = bytes.fromhex(
    "0000" "00000000000003e9" "0005" "0000ea60" "02"
    "00000002"
    "0012" "5f5f636f6e73756d65725f6f666673657473" "00000001" "00000011"
    "0005" "6b2d74786e" "00000002" "00000000" "00000002"
    "0000019b76daa87b" "0000019b76daa800")
#: Kafka 4.4.0, version 1, the same state with the tagged fields 0, 1 and 2 set.
KAFKA_V1_PREPARE_COMMIT = bytes.fromhex(
    "0001" "00000000000003e9" "0005" "0000ea60" "02"
    "03"                                                       # 2 topics (+1)
    "13" "5f5f636f6e73756d65725f6f666673657473" "02" "00000011" "00"
    "06" "6b2d74786e" "03" "00000000" "00000002" "00"          # "00": the entry's tags
    "0000019b76daa87b" "0000019b76daa800"
    "03"                                                       # 3 tagged fields
    "00" "08" "00000000000003e8"                               # 0 previous_producer_id 1000
    "01" "08" "00000000000003ea"                               # 1 next_producer_id 1002
    "02" "02" "0002")                                          # 2 client_transaction_version
#: Kafka 4.4.0, version 1 with an unknown tag 9 (two bytes ab cd) after the known ones.
KAFKA_V1_UNKNOWN_TAG = bytes.fromhex(
    "000100000000000003e900050000ea600203135f5f636f6e73756d65725f6f666673657473020000001100"
    "066b2d74786e030000000000000002000000019b76daa87b0000019b76daa800"
    "04" "0008" "00000000000003e8" "0108" "00000000000003ea" "0202" "0002" "0902" "abcd")
#: Kafka 4.4.0, Empty states (null partitions), versions 0 and 1 (client version 2).
KAFKA_V0_EMPTY = bytes.fromhex(
    "0000" "0000000000000007" "0000" "0000ea60" "00" "ffffffff"
    "0000019b76daa800" "ffffffffffffffff")
KAFKA_V1_EMPTY = bytes.fromhex(
    "0001" "0000000000000007" "0000" "0000ea60" "00" "00"
    "0000019b76daa800" "ffffffffffffffff" "01" "02" "02" "0002")
#: Kafka 4.4.0: TransactionLogKey "seglog-txn".
KAFKA_KEY = bytes.fromhex("0000" "000a" "7365676c6f672d74786e")

V0_VALUE = TransactionLogValue(1001, 5, 60000, txn_schema.PREPARE_COMMIT,
                               PREPARE_COMMIT_PARTITIONS, 1767225600123, 1767225600000)
V1_VALUE = TransactionLogValue(1001, 5, 60000, txn_schema.PREPARE_COMMIT,
                               PREPARE_COMMIT_PARTITIONS, 1767225600123, 1767225600000,
                               previous_producer_id=1000, next_producer_id=1002,
                               client_transaction_version=2, version=1)


def test_kafka_golden_vectors_decode_and_encode_to_the_same_bytes():
    assert txn_schema.decode_key(KAFKA_KEY) == "seglog-txn"
    assert txn_schema.encode_key("seglog-txn") == KAFKA_KEY
    empty_v0 = TransactionLogValue(7, 0, 60000, txn_schema.EMPTY, (), 1767225600000, -1)
    empty_v1 = TransactionLogValue(7, 0, 60000, txn_schema.EMPTY, (), 1767225600000, -1,
                                   client_transaction_version=2, version=1)
    for data, value in [(KAFKA_V0_PREPARE_COMMIT, V0_VALUE), (KAFKA_V1_PREPARE_COMMIT, V1_VALUE),
                        (KAFKA_V0_EMPTY, empty_v0), (KAFKA_V1_EMPTY, empty_v1)]:
        assert txn_schema.decode_value(data) == value
        assert txn_schema.encode_value(value) == data


def test_kafka_topic_order_does_not_matter():
    """Kafka groups partitions by topic in hash-map order; decoding sorts them."""
    other_order = bytes.fromhex(
        "0001" "00000000000003e9" "0005" "0000ea60" "02" "03"
        "06" "6b2d74786e" "03" "00000000" "00000002" "00"
        "13" "5f5f636f6e73756d65725f6f666673657473" "02" "00000011" "00"
        "0000019b76daa87b" "0000019b76daa800" "00")
    value = txn_schema.decode_value(other_order)
    assert value.partitions == PREPARE_COMMIT_PARTITIONS
    assert (value.previous_producer_id, value.next_producer_id,
            value.client_transaction_version, value.next_producer_epoch) == (-1, -1, 0, -1)


def test_unknown_tags_are_kept_and_written_back():
    value = txn_schema.decode_value(KAFKA_V1_UNKNOWN_TAG)
    assert value.unknown_tagged_fields == ((9, b"\xab\xcd"),)
    assert value == dataclasses.replace(V1_VALUE, unknown_tagged_fields=((9, b"\xab\xcd"),))
    assert txn_schema.encode_value(value) == KAFKA_V1_UNKNOWN_TAG


def _v1(tags: bytes = b"\x00", *, partitions: bytes | None = None) -> bytes:
    """A version 1 Ongoing value built from the schema by hand, with ``tags`` (the tagged
    fields section, count included) and ``partitions`` (the array, count included)."""
    if partitions is None:
        partitions = _uvarint(2) + _uvarint(2) + b"t" + _uvarint(2) + struct.pack(">i", 3) \
            + b"\x00"
    return (struct.pack(">hqhib", 1, 42, 3, 1000, txn_schema.ONGOING) + partitions
            + struct.pack(">qq", 2000, 1500) + tags)


def test_hand_built_v1_with_every_tag():
    tags = (_uvarint(4) + b"\x00\x08" + struct.pack(">q", 40) + b"\x01\x08"
            + struct.pack(">q", 43) + b"\x02\x02" + struct.pack(">h", 2)
            + b"\x03\x02" + struct.pack(">h", 0))
    value = txn_schema.decode_value(_v1(tags))
    assert value == TransactionLogValue(42, 3, 1000, txn_schema.ONGOING, (("t", 3),), 2000, 1500,
                                        previous_producer_id=40, next_producer_id=43,
                                        client_transaction_version=2, next_producer_epoch=0,
                                        version=1)
    assert txn_schema.encode_value(value) == _v1(tags)


def test_tags_in_any_order_and_unknown_ones_in_partition_entries_are_read():
    """Kafka's generated reader takes tags in any order and skips unknown ones, also in the
    partition entries."""
    tags = _uvarint(2) + b"\x02\x02" + struct.pack(">h", 2) + b"\x00\x08" + struct.pack(">q", 9)
    entry_tags = _uvarint(1) + _uvarint(300) + _uvarint(3) + b"xyz"
    partitions = _uvarint(2) + _uvarint(2) + b"t" + _uvarint(2) + struct.pack(">i", 3) + entry_tags
    value = txn_schema.decode_value(_v1(tags, partitions=partitions))
    assert (value.partitions, value.previous_producer_id, value.client_transaction_version) == \
        ((("t", 3),), 9, 2)


def test_null_partitions_and_trailing_bytes_are_accepted_as_kafka_does():
    value = txn_schema.decode_value(_v1(partitions=b"\x00"))
    assert value.partitions == ()
    assert txn_schema.decode_value(KAFKA_V1_PREPARE_COMMIT + b"junk") == V1_VALUE
    assert txn_schema.decode_value(KAFKA_V0_PREPARE_COMMIT + b"junk") == V0_VALUE
    assert txn_schema.decode_value(None) is None


ALL_VECTORS = [KAFKA_V0_PREPARE_COMMIT, KAFKA_V1_PREPARE_COMMIT, KAFKA_V1_UNKNOWN_TAG,
               KAFKA_V0_EMPTY, KAFKA_V1_EMPTY]


@pytest.mark.parametrize("data", ALL_VECTORS, ids=["v0", "v1", "v1-unknown-tag", "v0-empty",
                                                   "v1-empty"])
def test_every_truncation_is_a_typed_error(data):
    for length in range(len(data)):
        with pytest.raises(CorruptRecordError):
            txn_schema.decode_value(data[:length])


@pytest.mark.parametrize("data", ALL_VECTORS, ids=["v0", "v1", "v1-unknown-tag", "v0-empty",
                                                   "v1-empty"])
def test_every_byte_mutation_decodes_or_is_a_typed_error(data):
    """Each byte set to each of a few values: a value, or CorruptRecordError; a value
    that decodes re-encodes without error in its own version."""
    for position in range(len(data)):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF, data[position] ^ 0x01):
            mutated = data[:position] + bytes([byte]) + data[position + 1:]
            try:
                value = txn_schema.decode_value(mutated)
            except CorruptRecordError:
                continue
            assert value.version in (0, 1)
            if value.status != txn_schema.EMPTY or not value.partitions:
                txn_schema.encode_value(value)


BAD_V1 = {
    "version-2": struct.pack(">h", 2) + KAFKA_V1_PREPARE_COMMIT[2:],
    "version-negative": struct.pack(">h", -1) + KAFKA_V1_PREPARE_COMMIT[2:],
    "unknown-status": KAFKA_V1_PREPARE_COMMIT[:16] + b"\x09" + KAFKA_V1_PREPARE_COMMIT[17:],
    "varint-6-bytes": _v1(partitions=b"\xff\xff\xff\xff\xff\x01"),
    "topic-count-past-end": _v1(partitions=_uvarint(1000)),
    "topic-count-huge": _v1(partitions=_uvarint(2**34)),
    "topic-null-string": _v1(partitions=_uvarint(2) + b"\x00"),
    "topic-string-past-end": _v1(partitions=_uvarint(2) + _uvarint(200) + b"t"),
    "topic-string-too-long": _v1(partitions=_uvarint(2) + _uvarint(0x8001) + bytes(0x8000)),
    "topic-not-utf8": _v1(partitions=_uvarint(2) + _uvarint(2) + b"\xff" + _uvarint(1)
                          + b"\x00"),
    "partition-ids-null": _v1(partitions=_uvarint(2) + _uvarint(2) + b"t" + b"\x00"),
    "partition-ids-past-end": _v1(partitions=_uvarint(2) + _uvarint(2) + b"t"
                                  + _uvarint(100) + bytes(8)),
    "entry-tag-count-past-end": _v1(partitions=_uvarint(2) + _uvarint(2) + b"t" + _uvarint(1)
                                    + _uvarint(50)),
    "tag-count-past-end": _v1(_uvarint(40)),
    "tag-count-over-limit": _v1(_uvarint(10_001)) + bytes(20_000),
    "tag-size-past-end": _v1(_uvarint(1) + b"\x09" + _uvarint(100) + b"xy"),
    "tag-size-varint-too-long": _v1(_uvarint(1) + b"\x09" + b"\x80" * 5 + b"\x01"),
    "known-tag-wrong-size": _v1(_uvarint(1) + b"\x00\x04" + bytes(4)),
    "known-int16-tag-wrong-size": _v1(_uvarint(1) + b"\x02\x08" + bytes(8)),
    "no-tag-section": _v1(b""),
}
BAD_V0 = {
    "truncated": struct.pack(">hq", 0, 1),
    "partition-count-negative": KAFKA_V0_PREPARE_COMMIT[:41] + struct.pack(">i", -5)
    + KAFKA_V0_PREPARE_COMMIT[45:],
    "topic-count-huge": KAFKA_V0_PREPARE_COMMIT[:17] + struct.pack(">i", 2**31 - 1)
    + KAFKA_V0_PREPARE_COMMIT[21:],
    "partition-count-huge": KAFKA_V0_PREPARE_COMMIT[:41] + struct.pack(">i", 2**31 - 1)
    + KAFKA_V0_PREPARE_COMMIT[45:],
    "topic-null-string": KAFKA_V0_PREPARE_COMMIT[:21] + struct.pack(">h", -1)
    + KAFKA_V0_PREPARE_COMMIT[23:],
}


@pytest.mark.parametrize("data", list(BAD_V1.values()) + list(BAD_V0.values()),
                         ids=[f"v1-{k}" for k in BAD_V1] + [f"v0-{k}" for k in BAD_V0])
def test_malformed_values_are_corrupt_record_errors(data):
    with pytest.raises(CorruptRecordError) as info:
        txn_schema.decode_value(data)
    assert info.value.reason == "invalid records"
    assert str(info.value).startswith("invalid transaction log value: ")


def test_the_mutated_v0_cases_change_only_what_they_say():
    """The v0 cases above are offsets into KAFKA_V0_PREPARE_COMMIT: check the offsets."""
    data = KAFKA_V0_PREPARE_COMMIT
    assert struct.unpack_from(">i", data, 17)[0] == 2                    # topic count
    assert struct.unpack_from(">h", data, 21)[0] == 0x12                 # first topic length
    assert struct.unpack_from(">i", data, 41)[0] == 1                    # its partition count


def test_a_negative_v0_topic_count_is_null_as_kafka_reads_it():
    data = KAFKA_V0_PREPARE_COMMIT[:17] + struct.pack(">i", -7) + KAFKA_V0_EMPTY[-16:]
    assert txn_schema.decode_value(data).partitions == ()


@pytest.mark.parametrize("field,value", [("previous_producer_id", 1),
                                         ("next_producer_id", 1),
                                         ("client_transaction_version", 2),
                                         ("next_producer_epoch", 0),
                                         ("unknown_tagged_fields", ((9, b"x"),))])
def test_version_0_cannot_carry_version_1_fields(field, value):
    with pytest.raises(ValueError, match="version 0 has no tagged fields"):
        txn_schema.encode_value(TransactionLogValue(1, 0, 1000, txn_schema.EMPTY, (), 0,
                                                    **{field: value}))


def test_encode_rejects_what_kafka_rejects():
    base = dict(producer_id=1, producer_epoch=0, timeout_ms=1000, status=txn_schema.ONGOING,
                partitions=(("t", 0),), last_update_timestamp_ms=0, version=1)
    with pytest.raises(ValueError, match="version must be 0 or 1"):
        txn_schema.encode_value(TransactionLogValue(**{**base, "version": 2}))
    with pytest.raises(ValueError, match="no partitions"):
        txn_schema.encode_value(TransactionLogValue(**{**base, "status": txn_schema.EMPTY}))
    with pytest.raises(ValueError, match="known tag"):
        txn_schema.encode_value(TransactionLogValue(**base, unknown_tagged_fields=((1, b""),)))
    with pytest.raises(ValueError, match="repeated"):
        txn_schema.encode_value(TransactionLogValue(
            **base, unknown_tagged_fields=((7, b""), (7, b"x"))))


def test_seglog_writes_version_0_by_default():
    value = TransactionLogValue(1, 0, 1000, txn_schema.EMPTY, (), 0)
    assert txn_schema.VALUE_VERSION == 0
    assert txn_schema.encode_value(value)[:2] == b"\x00\x00"


# --- the coordinator on version 1 states ---------------------------------------------------------


def _store_with_kafka_state(path, backend, value: TransactionLogValue, transactional_id="k"):
    """A store whose ``__transaction_state`` holds ``value`` for ``transactional_id``, as a
    Kafka coordinator at transaction.version 2 would have left it; topic ``t`` exists."""
    with Store(path, backend=backend, offsets_topic_partitions=1,
               transaction_state_partitions=1) as store:
        store.create_topic("t")
        store._coordinators.internal_topic("__transaction_state").log(0).append_batch(
            [txn_schema.encode_value(value)], keys=[txn_schema.encode_key(transactional_id)])


def _state_values(store, transactional_id="k"):
    log = store.topic(txn_schema.TRANSACTION_STATE_TOPIC).log(0)
    return [txn_schema.decode_value(r.value) for r in log.records(log.start_offset)
            if txn_schema.decode_key(r.key) == transactional_id]


def _markers(store):
    """``{producer_id: producer_epoch}`` of t-0's producers (the markers' epochs)."""
    log = store.log(("t", 0))
    entries = log.producer_state.active_producers
    return {pid: entry.producer_epoch for pid, entry in entries.items()}


def open_store(path, backend):
    return Store(path, backend=backend, offsets_topic_partitions=1,
                 transaction_state_partitions=1)


def test_pending_v1_commit_with_a_next_producer_id_completes_as_kafka(tmp_path, backend):
    """PrepareCommit at the last epoch with a next producer id (Kafka's epoch exhaustion
    under transaction.version 2): the markers carry the current id and epoch, then the id
    moves to the next producer id at epoch 0 (TransactionMetadata.prepareComplete), and the
    version 1 fields are written back until a seglog producer takes the id."""
    pending = TransactionLogValue(500, 32767, 60000, txn_schema.PREPARE_COMMIT, (("t", 0),),
                                  1000, 900, previous_producer_id=499, next_producer_id=501,
                                  client_transaction_version=2, version=1)
    _store_with_kafka_state(tmp_path, backend, pending)
    with open_store(tmp_path, backend) as store:
        state = store.describe_transaction("k")
        assert (state.state, state.producer_id, state.producer_epoch) == \
            ("CompleteCommit", 501, 0)
        assert _markers(store) == {500: 32767}
        written = _state_values(store)[1:]
        assert [v.status for v in written] == [txn_schema.PREPARE_COMMIT,
                                              txn_schema.COMPLETE_COMMIT]
        assert [v.version for v in written] == [1, 1]
        assert [(v.producer_id, v.producer_epoch, v.next_producer_id) for v in written] == \
            [(500, 32767, 501), (501, 0, -1)]
        assert {(v.previous_producer_id, v.client_transaction_version) for v in written} == \
            {(499, 2)}
        producer = store.producer(transactional_id="k")
        assert (producer.producer_id, producer.producer_epoch) == (501, 1)
        producer.close()
        last = _state_values(store)[-1]
        assert (last.version, last.status, last.producer_id, last.producer_epoch) == \
            (0, txn_schema.EMPTY, 501, 1)
    with open_store(tmp_path, backend) as store:
        assert store.describe_transaction("k").producer_epoch == 1


def test_pending_v1_abort_without_next_producer_id_keeps_the_producer(tmp_path, backend):
    pending = TransactionLogValue(500, 7, 60000, txn_schema.PREPARE_ABORT, (("t", 0),),
                                  1000, 900, client_transaction_version=2, version=1)
    _store_with_kafka_state(tmp_path, backend, pending)
    with open_store(tmp_path, backend) as store:
        state = store.describe_transaction("k")
        assert (state.state, state.producer_id, state.producer_epoch) == \
            ("CompleteAbort", 500, 7)
        assert _markers(store) == {500: 7}


def test_v1_with_a_next_producer_id_but_client_version_below_2_keeps_the_producer(
        tmp_path, backend):
    """prepareComplete moves to the next producer id only for a client that supports the
    epoch bump (transaction.version 2)."""
    pending = TransactionLogValue(500, 7, 60000, txn_schema.PREPARE_COMMIT, (("t", 0),),
                                  1000, 900, next_producer_id=501,
                                  client_transaction_version=1, version=1)
    _store_with_kafka_state(tmp_path, backend, pending)
    with open_store(tmp_path, backend) as store:
        state = store.describe_transaction("k")
        assert (state.state, state.producer_id, state.producer_epoch) == \
            ("CompleteCommit", 500, 7)


def test_ongoing_v1_transaction_is_fenced_and_aborted_by_a_seglog_producer(tmp_path, backend):
    ongoing = TransactionLogValue(500, 4, 60000, txn_schema.ONGOING, (("t", 0),), 1000, 900,
                                  client_transaction_version=2, version=1)
    _store_with_kafka_state(tmp_path, backend, ongoing)
    with open_store(tmp_path, backend) as store:
        state = store.describe_transaction("k")
        assert (state.state, state.partitions) == ("Ongoing", (("t", 0),))
        producer = store.producer(transactional_id="k")
        assert (producer.producer_id, producer.producer_epoch) == (500, 6)
        assert _markers(store) == {500: 5}
        producer.close()
        assert [v.version for v in _state_values(store)] == [1, 1, 1, 0]


def test_v0_states_are_still_written_in_version_0(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t")
        producer = store.producer(transactional_id="k")
        producer.begin_transaction()
        producer.send("t", b"v", partition=0)
        producer.commit_transaction()
        producer.close()
        values = _state_values(store)
    assert values and {v.version for v in values} == {0}
    assert [v.status for v in values] == [txn_schema.EMPTY, txn_schema.ONGOING,
                                         txn_schema.PREPARE_COMMIT, txn_schema.COMPLETE_COMMIT]


@given(st.binary(max_size=80), st.sampled_from([b"\x00\x00", b"\x00\x01"]))
@settings(max_examples=300, deadline=None)
def test_random_bytes_decode_or_are_typed_errors(tail, version):
    try:
        value = txn_schema.decode_value(version + tail)
    except CorruptRecordError:
        return
    assert value.version == version[1]
