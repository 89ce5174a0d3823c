"""The data APIs' answers where Kafka's rules are subtle, checked against the real Kafka 4.4
broker: the same raw requests (kio-encoded, over a plain socket) go to ``seglog serve`` and,
where java and the jars are present, to Apache Kafka; both must give :data:`EXPECTED`, which
records what Kafka 4.4.0 answered (auto-creation, authorized operations, produce validation
and its error fields, acks=-1 on one node, idempotent sequences, fetch errors and offsets,
every ListOffsets sentinel, OffsetForLeaderEpoch fencing).

Known and intended differences, left out of the comparison: the order of topics in a Metadata
response (a set in Kafka). Fetch sessions: tests/server/test_fetch_sessions_differential.py.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import time
import uuid

import pytest
from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from seglog import get_backend
from seglog.server.apis.data_metadata import build

from kafka_waits import partitions_led

WAIT_S = 30.0
NOW_MS = int(time.time() * 1000)


class Wire:
    """One connection speaking Kafka's framing with kio's classes."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        self.correlation_id = 0

    def close(self):
        self.sock.close()

    def _recv(self, size_bytes):
        out = bytearray()
        while len(out) < size_bytes:
            chunk = self.sock.recv(size_bytes - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    def module(self, key, version):
        cls = load_request_schema(key, version)
        return __import__(cls.__module__, fromlist=["_"])

    def call(self, key, version, **fields):
        cls = load_request_schema(key, version)
        self.correlation_id += 1
        head = struct.pack(">hhih", key, version, self.correlation_id, 4) + b"diff"
        if cls.__flexible__:
            head += b"\x00"
        body = io.BytesIO()
        entity_writer(cls)(body, build(cls, **fields))
        frame = head + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        data = self._recv(struct.unpack(">i", self._recv(4))[0])
        assert struct.unpack_from(">i", data)[0] == self.correlation_id
        response_cls = load_response_schema(key, version)
        response, _ = entity_reader(response_cls)(
            memoryview(data), 4 + (1 if response_cls.__flexible__ else 0))
        return response


def _batch(values, timestamp_ms, **kwargs):
    return get_backend("native").encode_batch(
        list(values), None, [timestamp_ms] * len(values), None, base_offset=0, **kwargs)


def _wait_for_topics(w, names):
    """Bounded, until every topic's partitions answer (:func:`kafka_waits.partitions_led`)."""
    assert partitions_led(w, names, timeout_s=WAIT_S), f"topics {names} never appeared"


def probe(bootstrap, create_topic):
    """Send every probe; returns {name: what matters of the answer}."""
    out = {}
    w = Wire(bootstrap)
    try:
        def metadata(version, topics, *, auto=True, ops=False):
            module = w.module(3, version)
            wanted = tuple(build(module.MetadataRequestTopic, name=n, topic_id=i)
                           for n, i in topics)
            return w.call(3, version, topics=wanted, allow_auto_topic_creation=auto,
                          include_cluster_authorized_operations=ops,
                          include_topic_authorized_operations=ops)

        r = metadata(12, [("auto1", None)])
        out["auto_first"] = [(int(t.error_code), t.name, t.topic_id, t.partitions)
                             for t in r.topics]
        _wait_for_topics(w, ["auto1"])
        r = metadata(12, [("auto1", None)])
        out["auto_then"] = [[(p.leader_epoch, len(p.isr_nodes)) for p in t.partitions]
                            for t in r.topics]
        r = metadata(10, [("auto1", None)], ops=True)
        out["ops"] = (r.cluster_authorized_operations,
                      [t.topic_authorized_operations for t in r.topics])
        r = metadata(12, [("bad name", None), ("ok.name", None)], auto=False)
        out["invalid"] = sorted((int(t.error_code), t.name) for t in r.topics)
        r = metadata(12, [(None, uuid.uuid4())])
        out["unknown_id"] = [(int(t.error_code), t.name) for t in r.topics]
        r = metadata(10, [("auto1", uuid.uuid4())])
        out["v10_id"] = [(int(t.error_code), t.name) for t in r.topics]

        for name, config in (("strict", {"min.insync.replicas": "2"}), ("plain", {}),
                             ("small", {"max.message.bytes": "100"}),
                             ("compacted", {"cleanup.policy": "compact"}),
                             ("recent", {"message.timestamp.before.max.ms": "60000"})):
            create_topic(name, config)
        _wait_for_topics(w, ["strict", "plain", "small", "compacted", "recent"])

        def produce(topic, records, acks=1, partition=0):
            module = w.module(0, 9)
            r = w.call(0, 9, transactional_id=None, acks=acks,
                       timeout=datetime.timedelta(seconds=5),
                       topic_data=(build(module.TopicProduceData, name=topic, partition_data=(
                           build(module.PartitionProduceData, index=partition,
                                 records=records),)),))
            p = r.responses[0].partition_responses[0]
            return (int(p.error_code), p.base_offset, p.log_start_offset,
                    p.error_message is not None, [e.batch_index for e in p.record_errors])

        one = _batch([b"a", b"b"], NOW_MS)
        corrupt = bytearray(one)
        corrupt[-1] ^= 0xFF
        out["p_ok"] = produce("plain", one)
        out["p_two_batches"] = produce("plain", one + one)
        out["p_torn_tail"] = produce("plain", one + one[:20])
        out["p_crc"] = produce("plain", bytes(corrupt))
        out["p_acks2"] = produce("plain", one, acks=2)
        out["p_all_isr"] = produce("strict", one, acks=-1)
        out["p_unknown_partition"] = produce("plain", one, partition=9)
        out["p_empty"] = produce("plain", b"")
        pid = 4242
        out["p_new_producer_seq5"] = produce("plain", _batch(
            [b"x"], NOW_MS, producer_id=pid, producer_epoch=0, base_sequence=5))
        out["p_seq0"] = produce("plain", _batch(
            [b"x"], NOW_MS + 1, producer_id=pid + 1, producer_epoch=0, base_sequence=0))
        out["p_seq0_again"] = produce("plain", _batch(
            [b"x"], NOW_MS + 1, producer_id=pid + 1, producer_epoch=0, base_sequence=0))
        out["p_seq_gap"] = produce("plain", _batch(
            [b"x"], NOW_MS, producer_id=pid + 1, producer_epoch=0, base_sequence=7))
        out["p_too_large"] = produce("small", _batch([b"y" * 200], NOW_MS))
        out["p_keyless_compacted"] = produce("compacted", _batch([b"y", b"z"], NOW_MS))
        out["p_old_timestamp"] = produce("recent", get_backend("native").encode_batch(
            [b"y", b"z"], None, [int(time.time() * 1000), 1000], None, base_offset=0))
        # Kafka 4.4's message.timestamp.after.max.ms is one hour: two hours ahead is refused.
        out["p_future_timestamp"] = produce("plain", _batch([b"f"], NOW_MS + 2 * 3600 * 1000))
        out["p_later"] = produce("plain", _batch([b"l", b"m"], NOW_MS + 100))

        def fetch(offset, *, epoch=-1, session_epoch=-1, replica=-1, isolation=0):
            module = w.module(1, 12)
            r = w.call(1, 12, replica_id=replica, max_wait=datetime.timedelta(0), min_bytes=1,
                       max_bytes=1 << 20, isolation_level=isolation, session_id=0,
                       session_epoch=session_epoch, topics=(build(
                           module.FetchTopic, topic="plain", partitions=(build(
                               module.FetchPartition, partition=0, fetch_offset=offset,
                               partition_max_bytes=1 << 20, current_leader_epoch=epoch,
                               log_start_offset=-1),)),),
                       forgotten_topics_data=(), rack_id="")
            if not r.responses:
                return ("no topics", int(r.error_code), r.session_id)
            p = r.responses[0].partitions[0]
            return (int(p.error_code), p.high_watermark, p.last_stable_offset,
                    p.log_start_offset, p.aborted_transactions, len(p.records or b""))

        out["f_from_0"] = fetch(0)[:5]
        out["f_out_of_range"] = fetch(100)
        out["f_at_end"] = fetch(8)
        out["f_committed_at_end"] = fetch(8, isolation=1)
        out["f_newer_epoch"] = fetch(0, epoch=1)
        out["f_incremental"] = fetch(0, session_epoch=3)
        out["f_follower"] = fetch(0, replica=2)

        def list_offsets(version, timestamp, epoch=-1):
            module = w.module(2, version)
            r = w.call(2, version, replica_id=-1, isolation_level=0,
                       timeout=datetime.timedelta(seconds=5), topics=(build(
                           module.ListOffsetsTopic, name="plain", partitions=(build(
                               module.ListOffsetsPartition, partition_index=0,
                               timestamp=timestamp, current_leader_epoch=epoch),)),))
            p = r.topics[0].partitions[0]
            return (int(p.error_code), p.offset, p.timestamp, getattr(p, "leader_epoch", None))

        for timestamp in (-1, -2, -3, -4, -5, -6, -7, NOW_MS, NOW_MS + 1, 2 ** 62):
            out[f"lo_{timestamp - NOW_MS if timestamp > 0 else timestamp}"] = \
                list_offsets(11, timestamp)
        out["lo_v6_max_timestamp"] = list_offsets(6, -3)
        out["lo_newer_epoch"] = list_offsets(9, -1, epoch=3)

        module = w.module(23, 4)
        r = w.call(23, 4, replica_id=-1, topics=(build(
            module.OffsetForLeaderTopic, topic="plain", partitions=tuple(
                build(module.OffsetForLeaderPartition, partition=0, current_leader_epoch=c,
                      leader_epoch=e) for c, e in ((-1, 0), (-1, 1), (0, 0), (3, 0), (-1, -1)))),))
        out["epochs"] = [(int(p.error_code), p.leader_epoch, p.end_offset)
                         for p in r.topics[0].partitions]
    finally:
        w.close()
    # acks=0: no response; a failed partition closes the connection (Kafka's way to make the
    # producer refresh its metadata), a good one leaves it open.
    for name, partition in (("p_acks0_ok_stays_open", 0), ("p_acks0_error_closes", 9)):
        w = Wire(bootstrap)
        try:
            module = w.module(0, 9)
            w.correlation_id += 1
            cls = load_request_schema(0, 9)
            head = struct.pack(">hhih", 0, 9, w.correlation_id, 4) + b"diff\x00"
            body = io.BytesIO()
            entity_writer(cls)(body, build(
                cls, transactional_id=None, acks=0, timeout=datetime.timedelta(seconds=5),
                topic_data=(build(module.TopicProduceData, name="plain", partition_data=(
                    build(module.PartitionProduceData, index=partition,
                          records=_batch([b"z"], NOW_MS)),)),)))
            frame = head + body.getvalue()
            w.sock.sendall(struct.pack(">i", len(frame)) + frame)
            if partition == 0:  # still answers the next request on the same connection
                r = w.call(3, 1, topics=())
                out[name] = r.brokers != ()
            else:
                out[name] = w.sock.recv(64) == b""
        finally:
            w.close()
    # Produce v0-v2 are advertised (KAFKA-18659) but refused: the connection closes.
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        body = struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", 5) + b"plain" \
            + struct.pack(">iii", 1, 0, 0)
        frame = struct.pack(">hhih", 0, 2, 1, 4) + b"diff" + body
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        out["p_v2_closes"] = sock.recv(64) == b""
    return out


#: What Apache Kafka 4.4.0 (one KRaft node) answered to :func:`probe`.
EXPECTED = {
    "auto_first": [(3, "auto1", None, ())],  # kio reads the zero uuid as None
    "auto_then": [[(0, 1)]],
    "ops": (8096, [3576]),
    "invalid": [(3, "ok.name"), (17, "bad name")],
    "unknown_id": [(100, None)],
    "v10_id": [(42, "auto1")],
    "p_ok": (0, 0, 0, False, []),
    "p_two_batches": (87, -1, -1, False, []),
    "p_torn_tail": (0, 2, 0, False, []),
    "p_crc": (2, -1, -1, False, []),
    "p_acks2": (21, -1, -1, False, []),
    "p_all_isr": (0, 0, 0, False, []),
    "p_unknown_partition": (3, -1, -1, False, []),
    "p_empty": (87, -1, -1, False, []),
    "p_new_producer_seq5": (0, 4, 0, False, []),
    "p_seq0": (0, 5, 0, False, []),
    "p_seq0_again": (0, 5, 0, False, []),
    "p_seq_gap": (45, -1, 0, False, []),
    "p_too_large": (10, -1, -1, False, []),
    "p_keyless_compacted": (87, -1, 0, True, [0, 1]),
    "p_old_timestamp": (32, -1, 0, True, [1]),
    "p_future_timestamp": (32, -1, 0, True, [0]),
    "p_later": (0, 6, 0, False, []),
    "f_from_0": (0, 8, 8, 0, None),
    "f_out_of_range": (1, -1, -1, -1, None, 0),
    "f_at_end": (0, 8, 8, 0, None, 0),
    "f_committed_at_end": (0, 8, 8, 0, (), 0),
    "f_newer_epoch": (75, -1, -1, -1, None, 0),
    "f_incremental": ("no topics", 70, 0),
    "f_follower": (6, -1, -1, -1, None, 0),
    "lo_-1": (0, 8, -1, 0),
    "lo_-2": (0, 0, -1, 0),
    "lo_-3": (0, 6, NOW_MS + 100, 0),
    "lo_-4": (0, 0, -1, 0),
    "lo_-5": (0, -1, -1, -1),
    "lo_-6": (0, -1, -1, -1),
    "lo_-7": (35, -1, -1, -1),
    "lo_0": (0, 0, NOW_MS, 0),
    "lo_1": (0, 5, NOW_MS + 1, 0),
    f"lo_{2 ** 62 - NOW_MS}": (0, -1, -1, -1),
    "lo_v6_max_timestamp": (35, -1, -1, -1),
    "lo_newer_epoch": (75, -1, -1, -1),
    "epochs": [(0, 0, 8), (0, -1, -1), (0, 0, 8), (75, -1, -1), (0, -1, -1)],
    "p_v2_closes": True,
    "p_acks0_ok_stays_open": True,
    "p_acks0_error_closes": True,
}


def _compare(got):
    assert {k: v for k, v in got.items() if v != EXPECTED.get(k)} == {}
    assert set(got) == set(EXPECTED)


def test_seglog_answers_as_kafka(any_backend_broker):
    broker = any_backend_broker
    _compare(probe(broker.bootstrap,
                   lambda name, config: broker.store.create_topic(name, 1, config)))


@pytest.mark.kafka
@pytest.mark.slow
def test_kafka_answers_as_recorded(kafka_shared):
    # The session's shared broker (tests/conftest.py): the probe names its topics and reads
    # back only those.
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic

    admin = kafka.KafkaAdminClient(bootstrap_servers=kafka_shared.bootstrap)
    try:
        _compare(probe(kafka_shared.bootstrap, lambda name, config: admin.create_topics(
            [NewTopic(name, 1, 1, topic_configs=config)])))
    finally:
        admin.close()
