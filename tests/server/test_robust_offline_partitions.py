"""Issue 23: a partition whose files fail to load stays offline alone, reported with its
reason, and ``seglog recover`` brings it back. Both backends, corruption made by hand, real
clients (confluent-kafka) against a running broker.

- ``bad-0`` lost flushed data (its last segment cut after a clean shutdown: lazy loading
  would find it on the first append; the broker's start-up check finds it at once);
- ``bad-1`` has a leader-epoch checkpoint that does not parse (its Log fails to open).

While they are offline: Metadata answers each LEADER_NOT_AVAILABLE with leader -1 and this
broker in ``offline_replicas`` (Kafka's KRaft metadata cache for a replica in an offline log
dir), Produce, Fetch and ListOffsets answer KAFKA_STORAGE_ERROR (Kafka's
``getPartitionOrException`` for an offline partition), DescribeLogDirs lists each partition's
directory as a log dir with KAFKA_STORAGE_ERROR and keeps the healthy partitions under the
data dir; every other partition and topic produces and consumes. Nothing offline is cut.
After ``seglog recover`` (broker stopped) the partitions serve again, ending at their last
valid offset.
"""

from __future__ import annotations

import glob
import io
import os
import socket
import struct
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

import seglog
from core_helpers import read_frame, request_frame
from seglog import error_codes as codes
from seglog.server.apis.data_metadata import build
from segment_helpers import batch_starts

BACKENDS = ("native", "pure")
RECORDS = 10  # per partition, one batch each


def _module(cls):
    return __import__(cls.__module__, fromlist=["_"])


def _call(port: int, api_key: int, version: int, request, *, flexible: bool):
    """One kio request over a fresh connection; the decoded response."""
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(request_frame(api_key, version, 7, body.getvalue(), client_id=b"t",
                                   flexible=flexible))
        frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    assert struct.unpack_from(">i", frame)[0] == 7
    response, _ = entity_reader(load_response_schema(api_key, version))(
        memoryview(frame), 5 if flexible else 4)
    return response


def _metadata(port: int) -> dict:
    """``{(topic, partition): (error, leader, replicas, isr, offline)}`` of Metadata v12."""
    cls = load_request_schema(3, 12)
    response = _call(port, 3, 12, build(cls, topics=None, allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False),
                     flexible=True)
    return {(t.name, p.partition_index): (int(p.error_code), int(p.leader_id),
                                          tuple(p.replica_nodes), tuple(p.isr_nodes),
                                          tuple(p.offline_replicas))
            for t in response.topics for p in t.partitions}


def _log_dirs(port: int) -> dict:
    """``{log dir: (error, {(topic, partition)})}`` of DescribeLogDirs v4, every topic."""
    cls = load_request_schema(35, 4)
    response = _call(port, 35, 4, build(cls, topics=None), flexible=True)
    return {r.log_dir: (int(r.error_code), {(t.name, p.partition_index) for t in r.topics
                                            for p in t.partitions})
            for r in response.results}


def _prepare(data_dir: str, backend: str) -> None:
    """Topics ``bad`` (2 partitions) and ``good``, ``RECORDS`` one-record batches in each
    partition, closed cleanly; then bad-0 loses its last three flushed batches and bad-1's
    leader-epoch checkpoint is garbage."""
    with seglog.Store(data_dir, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("bad", partitions=2)
        store.create_topic("good")
        producer = store.producer(linger_ms=0)
        for i in range(RECORDS):
            for topic, partition in (("bad", 0), ("bad", 1), ("good", 0)):
                producer.send(topic, b"v%d" % i, partition=partition)
            producer.flush()
        producer.close()
    log_path = sorted(glob.glob(os.path.join(data_dir, "bad-0", "*.log")))[-1]
    os.truncate(log_path, batch_starts(log_path)[-3])  # offsets 7..9 flushed, now gone
    with open(os.path.join(data_dir, "bad-1", "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n1\nnot an epoch\n")


def _files(data_dir: str, name: str) -> dict:
    """The records and the leader-epoch checkpoint of partition directory ``name`` (what no
    load may cut; indexes and producer snapshots are derived and may be rebuilt)."""
    paths = glob.glob(os.path.join(data_dir, name, "*.log")) + glob.glob(
        os.path.join(data_dir, name, "leader-epoch-checkpoint"))
    return {path: open(path, "rb").read() for path in sorted(paths)}


def _wait_offline(broker, count: int) -> dict:
    """The broker's offline partitions once its start-up check found ``count`` (bounded)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        offline = broker.store.offline_partitions()
        if len(offline) >= count:
            return offline
        time.sleep(0.02)
    raise AssertionError(f"offline: {broker.store.offline_partitions()}")


def _produce(bootstrap: str, topic: str, partition: int, value: bytes,
             timeout_ms: int = 10000) -> tuple[object, int]:
    """(error or None, offset) of one confluent-kafka delivery."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": timeout_ms,
                         "retries": 0, "enable.idempotence": False, "acks": 1})
    outcome: list = []
    producer.produce(topic, value, partition=partition,
                     on_delivery=lambda err, msg: outcome.append((err, msg.offset())))
    producer.flush(timeout_ms / 1000 + 5)
    assert outcome, "no delivery report"
    return outcome[0]


def _consume(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{partition}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.queue.backoff.ms": 10})
    try:
        consumer.assign([CkTopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_offline_partitions_are_reported_alone_and_recover_brings_them_back(
        tmp_path, broker_factory, backend):
    data_dir = str(tmp_path / "data")
    _prepare(data_dir, backend)
    before = {name: _files(data_dir, name) for name in ("bad-0", "bad-1")}
    with pytest.warns(RuntimeWarning, match="bad-1 is offline"):
        broker = broker_factory(data_dir=data_dir, backend=backend)
    offline = _wait_offline(broker, 2)  # bad-0: found by the start-up check
    assert sorted(offline) == [("bad", 0), ("bad", 1)]
    assert "below its checkpointed recovery point 10" in offline[("bad", 0)]
    assert "CorruptCheckpointError" in offline[("bad", 1)]
    me = broker.store.meta.node_id
    metadata = _metadata(broker.port)
    for p in (0, 1):
        assert metadata[("bad", p)] == (codes.LEADER_NOT_AVAILABLE, -1, (me,), (me,), (me,))
    assert metadata[("good", 0)] == (codes.NONE, me, (me,), (me,), ())
    dirs = _log_dirs(broker.port)
    data = os.path.abspath(data_dir)
    assert dirs[data][0] == codes.NONE
    assert ("good", 0) in dirs[data][1] and not {("bad", 0), ("bad", 1)} & dirs[data][1]
    for p in (0, 1):
        assert dirs[os.path.join(data, f"bad-{p}")] == (codes.KAFKA_STORAGE_ERROR, set())

    # Every other partition serves a real client; the offline ones answer
    # KAFKA_STORAGE_ERROR (librdkafka retries it until the message times out).
    assert _produce(broker.bootstrap, "good", 0, b"more") == (None, RECORDS)
    assert _consume(broker.bootstrap, "good", 0, RECORDS + 1)[-1] == b"more"
    err, _offset = _produce(broker.bootstrap, "bad", 0, b"lost?", timeout_ms=1500)
    assert err is not None
    raw = _raw_partition_errors(broker.port, backend)
    assert raw == {"produce": codes.KAFKA_STORAGE_ERROR, "fetch": codes.KAFKA_STORAGE_ERROR,
                   "list_offsets": codes.KAFKA_STORAGE_ERROR}
    broker.stop()
    assert {name: _files(data_dir, name) for name in ("bad-0", "bad-1")} == before

    # The same on the next start: nothing cut it meanwhile.
    with pytest.warns(RuntimeWarning, match="is offline"):
        broker = broker_factory(data_dir=data_dir, backend=backend)
    assert sorted(_wait_offline(broker, 2)) == [("bad", 0), ("bad", 1)]
    broker.stop()

    for p in (0, 1):
        result = subprocess.run(
            [sys.executable, "-m", "seglog", "recover", "--data-dir", data_dir,
             "--topic", "bad", "--partition", str(p), "--backend", backend],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": _src_path()})
        assert result.returncode == 0, result.stderr
        assert f"bad-{p}: ends at offset {7 if p == 0 else RECORDS}" in result.stdout

    broker = broker_factory(data_dir=data_dir, backend=backend)
    time.sleep(0.2)
    assert broker.store.offline_partitions() == {}
    metadata = _metadata(broker.port)
    assert metadata[("bad", 0)] == (codes.NONE, me, (me,), (me,), ())
    assert _produce(broker.bootstrap, "bad", 0, b"after") == (None, 7)
    assert _consume(broker.bootstrap, "bad", 0, 8) == [b"v%d" % i for i in range(7)] + [b"after"]
    assert _produce(broker.bootstrap, "bad", 1, b"after") == (None, RECORDS)
    broker.stop()


def test_recover_refuses_while_the_broker_runs(tmp_path, broker_factory):
    data_dir = str(tmp_path / "data")
    _prepare(data_dir, "native")
    with pytest.warns(RuntimeWarning):
        broker_factory(data_dir=data_dir)
    result = subprocess.run(
        [sys.executable, "-m", "seglog", "recover", "--data-dir", data_dir, "--topic", "bad",
         "--partition", "0"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": _src_path()})
    assert result.returncode == 1
    assert "LogLockedError" in result.stderr


def _src_path() -> str:
    return os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "..", "src"),
                            os.environ.get("PYTHONPATH", "")])


def _raw_partition_errors(port: int, backend: str) -> dict:
    """The error codes of Produce v9, Fetch v12 and ListOffsets v7 for bad-0."""
    import datetime

    out = {}
    cls = load_request_schema(0, 9)
    mod = _module(cls)
    batch = bytes(seglog.get_backend(backend).encode_batch([b"x"], [None], None, None,
                                                            base_offset=0))
    request = build(cls, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5),
                    topic_data=(build(mod.TopicProduceData, name="bad", partition_data=(
                        build(mod.PartitionProduceData, index=0, records=batch),)),))
    (topic,) = _call(port, 0, 9, request, flexible=True).responses
    out["produce"] = int(topic.partition_responses[0].error_code)
    cls = load_request_schema(1, 12)
    mod = _module(cls)
    request = build(cls, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                    max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                    topics=(build(mod.FetchTopic, topic="bad", partitions=(
                        build(mod.FetchPartition, partition=0, current_leader_epoch=-1,
                              fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                              partition_max_bytes=1 << 20),)),),
                    forgotten_topics_data=(), rack_id="")
    (topic,) = _call(port, 1, 12, request, flexible=True).responses
    out["fetch"] = int(topic.partitions[0].error_code)
    cls = load_request_schema(2, 7)
    mod = _module(cls)
    request = build(cls, replica_id=-1, isolation_level=0, topics=(
        build(mod.ListOffsetsTopic, name="bad", partitions=(
            build(mod.ListOffsetsPartition, partition_index=0, current_leader_epoch=-1,
                  timestamp=-1),)),))
    (topic,) = _call(port, 2, 7, request, flexible=True).topics
    out["list_offsets"] = int(topic.partitions[0].error_code)
    return out


@pytest.mark.kafka
@pytest.mark.slow
def test_kafkas_tools_read_the_offline_partitions(tmp_path, broker_factory):
    """Kafka 4.4's own tools read the answers as a failed disk and an unavailable partition:
    ``kafka-log-dirs --describe`` lists each offline partition's directory with a
    KafkaStorageException and the healthy partitions under the data dir; ``kafka-topics
    --describe --unavailable-partitions`` lists exactly the offline partitions, leader none."""
    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    data_dir = str(tmp_path / "data")
    _prepare(data_dir, "native")
    with pytest.warns(RuntimeWarning, match="is offline"):
        broker = broker_factory(data_dir=data_dir)
    _wait_offline(broker, 2)

    def tool(main_class: str, *args: str) -> str:
        done = ref.run_tool(main_class, ["--bootstrap-server", broker.bootstrap, *args],
                            run_dir=tmp_path, timeout_s=120)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    import json

    out = tool("org.apache.kafka.tools.LogDirsCommand", "--describe")
    (described,) = json.loads(out.strip().splitlines()[-1])["brokers"]
    dirs = {d["logDir"]: d for d in described["logDirs"]}
    data = os.path.abspath(data_dir)
    assert dirs[data]["error"] is None
    assert [p["partition"] for p in dirs[data]["partitions"]] == ["good-0"]
    for p in (0, 1):
        offline = dirs[os.path.join(data, f"bad-{p}")]
        assert offline["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
        assert offline["partitions"] == []
    out = tool("org.apache.kafka.tools.TopicCommand", "--describe", "--unavailable-partitions")
    lines = [line.strip().split("\t") for line in out.strip().splitlines()]
    assert [tuple(f[:3]) for f in lines] == [
        ("Topic: bad", "Partition: 0", "Leader: none"),
        ("Topic: bad", "Partition: 1", "Leader: none")]
