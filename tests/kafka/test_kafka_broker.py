"""A real Kafka broker and seglog adopt each other's partitions.

One broker (two starts) serves the whole module; :func:`scenario` runs the choreography once
and the tests check what it saw:

1. Kafka (a fresh single-node KRaft cluster) gets the topics: ``adopt-*`` and ``corrupt-*``
   for seglog's files (retention.ms=-1, index.interval.bytes as seglog wrote them), and
   ``k-*`` that Kafka writes itself through kafka-python: one topic per compression type,
   transactions committed and aborted plus an idempotent producer, a compacted topic that
   Kafka's cleaner cleans, and a consumer group's committed offsets.
2. What Kafka serves is read with kafka-python (records, read_committed records,
   offsetsForTimes); Kafka is stopped cleanly and its data dir copied: **seglog adopts
   Kafka's files** (``Log.open(read_only=True)``, a recovering writer on a copy, ``Store``).
3. Into the stopped broker's ``adopt-*`` / ``corrupt-*`` partition directories go seglog's
   segment files (and ``.txnindex`` / ``.snapshot``), replacing Kafka's, keeping Kafka's
   ``partition.metadata``; the clean-shutdown marker and the recovery checkpoints go, so the
   restart recovers every segment (mode A: recovery forced). **Kafka adopts seglog's
   partitions**: a Kafka consumer reads every record with the same offsets, keys, values,
   headers and timestamps; offsetsForTimes agrees with seglog's time index; Kafka's recovery
   of the corrupted copies cuts where seglog's does.
4. After a second clean stop, Kafka's rebuilt indexes and its producer-state snapshot are
   compared with seglog's.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import seglog
from seglog.coordinator import txn_schema
from kafka_corpus import (
    CODECS,
    COMPACTED_CONFIG,
    CORRUPTIONS,
    IDEMPOTENT_PID,
    LOG_APPEND_CONFIG,
    MIXED_CONFIG,
    NOW_MS,
    TXN_PID,
    WRITERS,
    corrupt,
    dump_log,
    forget_clean_shutdown,
    segment_files,
)

pytestmark = pytest.mark.kafka

kafka = pytest.importorskip("kafka", reason="needs kafka-python (the [test] extra)")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

_ONLY = os.environ.get("SEGLOG_BACKEND", "").strip().lower()
BACKENDS = [_ONLY] if _ONLY else list(seglog.BACKEND_NAMES)
GROUP = "seglog-adopts"
#: The group whose offsets a transactional producer commits (committed and aborted rounds).
TXN_GROUP = "seglog-txn-group"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
#: How long a kafka-python read of one partition may take.
READ_S_MAX = 60.0


@dataclass
class Read:
    """One partition as a Kafka consumer saw it."""

    begin: int
    end: int
    records: list[tuple]  # (offset, timestamp_ms, key, value, headers)


@dataclass
class Scenario:
    broker: object = None
    kafka_copy: Path | None = None          # Kafka's data dir after the first clean stop
    seglog_dirs: dict = field(default_factory=dict)  # adopt topic -> seglog partition dir
    corruptions: dict = field(default_factory=dict)  # corrupt topic -> Corruption
    kafka_reads: dict = field(default_factory=dict)  # (topic, isolation) -> Read, phase 1
    kafka_times: dict = field(default_factory=dict)  # topic -> {ts: offset | None}, phase 1
    committed: dict = field(default_factory=dict)    # (topic, partition) -> (offset, metadata)
    txn_committed: dict = field(default_factory=dict)  # the same, for TXN_GROUP
    adopted_reads: dict = field(default_factory=dict)  # (topic, isolation) -> Read, phase 3
    adopted_times: dict = field(default_factory=dict)  # topic -> {ts: offset | None}
    restart_log: str = ""                  # the broker's log of the recovering start
    final_dir: Path | None = None          # the data dir after the second clean stop
    snapshot_dumps: dict = field(default_factory=dict)  # topic -> FileDump of last snapshot
    trusted_index_dir: Path | None = None  # corrupt-bad-index-0 with a garbage index, marker on
    trusted_index_segment: int = -1        # the base offset of that segment
    trusted_index_reads: dict = field(default_factory=dict)  # seek offset -> first offset served


def _adopt_topic(kind: str, backend: str) -> str:
    return f"adopt-{kind}-{backend}"


def _topic_configs(kind: str | None) -> dict:
    configs = {"retention.ms": "-1"}
    if kind == "mixed":
        configs["index.interval.bytes"] = str(MIXED_CONFIG["index_interval_bytes"])
    elif kind == "logappend":
        configs["index.interval.bytes"] = str(LOG_APPEND_CONFIG["index_interval_bytes"])
        configs["message.timestamp.type"] = "LogAppendTime"
    elif kind == "compacted":
        configs["index.interval.bytes"] = str(COMPACTED_CONFIG["index_interval_bytes"])
        configs["cleanup.policy"] = "compact"
    return configs


def _read_partition(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> Read:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level=isolation, fetch_max_wait_ms=50,
                             request_timeout_ms=30000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        begin = consumer.beginning_offsets([tp])[tp]
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        records = []
        deadline = time.monotonic() + READ_S_MAX
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"{topic}: stuck at {consumer.position(tp)}"
            for batch in consumer.poll(timeout_ms=500).values():
                records += [(r.offset, r.timestamp, r.key, r.value,
                             tuple((k, v) for k, v in r.headers)) for r in batch]
        return Read(begin, end, records)
    finally:
        consumer.close()


def _offsets_for_times(bootstrap: str, topic: str, stamps: list[int]) -> dict:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        out = {}
        for ts in stamps:
            found = consumer.offsets_for_times({tp: ts})[tp]
            out[ts] = None if found is None else found.offset
        return out
    finally:
        consumer.close()


def _probe_stamps(records: list[tuple]) -> list[int]:
    """Every record timestamp, one below and one above each, and one past the last."""
    stamps = {r[1] for r in records}
    probes = set()
    for ts in stamps:
        probes |= {ts - 1, ts, ts + 1}
    probes.add(max(stamps) + 1000)
    return sorted(probes)


def _produce_kafka_topics(bootstrap: str) -> None:
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap,
                                 compression_type=None if codec == "none" else codec,
                                 linger_ms=20)
        for i in range(30):
            # kafka-python takes no null header value, and no record without key and value
            producer.send(f"k-{codec}",
                          value=None if i % 7 == 3 and i % 5 else f"{codec}-{i}".encode(),
                          key=None if i % 5 == 0 else f"key{i % 4}".encode(),
                          headers=[("h", f"{i}".encode()), ("e", b"")] if i % 3 else [])
            if i % 10 == 9:
                producer.flush()
        producer.flush()
        producer.close()
    # transactions, committed and aborted, and an idempotent producer in the same partition
    txn = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="seglog-txn")
    txn.init_transactions()
    idem = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for rnd in range(4):
        txn.begin_transaction()
        for i in range(3):
            txn.send("k-txn", f"t{rnd}-{i}".encode(), key=b"t")
        txn.flush()  # the records reach the log before the marker, also when aborting
        idem.send("k-txn", f"i{rnd}".encode(), key=b"i")
        idem.flush()
        # offsets committed in the transaction: they count only if it commits
        txn.send_offsets_to_transaction(
            {TopicPartition("k-lz4", 0): OffsetAndMetadata(10 + rnd, f"txn{rnd}", -1)},
            TXN_GROUP)
        if rnd % 2:
            txn.abort_transaction()
        else:
            txn.commit_transaction()
    txn.close()
    idem.close()


def _produce_compacted(bootstrap: str, data_dir: Path) -> None:
    """Rounds of the same keys in segments that roll every 100 ms, then wait until Kafka's
    cleaner has cleaned them (its checkpoint names the topic)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for rnd in range(3):
        for i in range(0, 12, 2 if rnd == 2 else 1):  # round 2: even keys only (gaps)
            value = None if (rnd == 1 and i == 5) else f"c{rnd}-{i}".encode()
            producer.send("k-compact", value, key=f"key{i}".encode())
        producer.flush()
        time.sleep(0.3)
    producer.send("k-compact", b"last", key=b"key0")  # rolls: the rounds are all inactive
    producer.flush()
    producer.close()
    checkpoint = data_dir / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = checkpoint.read_text() if checkpoint.exists() else ""
        if re.search(r"^k-compact 0 [1-9]", text, re.M):
            return
        time.sleep(0.25)
    raise AssertionError(f"Kafka's cleaner did not clean k-compact in 60 s: {text!r}")


def _commit_group_offsets(bootstrap: str) -> dict:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        offsets = {TopicPartition("k-none", 0): OffsetAndMetadata(7, "seven", -1),
                   TopicPartition("k-gzip", 0): OffsetAndMetadata(13, "", -1),
                   TopicPartition("k-txn", 0): OffsetAndMetadata(2, "txn", -1)}
        consumer.commit(offsets)
        consumer.commit({TopicPartition("k-none", 0): OffsetAndMetadata(9, "nine", -1),
                         **{tp: om for tp, om in offsets.items() if tp.topic != "k-none"}})
        return {(tp.topic, tp.partition): (consumer.committed(tp), om.metadata)
                for tp, om in offsets.items()} | {("k-none", 0): (9, "nine")}
    finally:
        consumer.close()


def _committed_offsets(bootstrap: str, group: str, tps: list[tuple[str, int]]) -> dict:
    """What Kafka's group coordinator answers for ``group`` (OffsetFetch)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        return {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in offsets.items()
                if (tp.topic, tp.partition) in tps}
    finally:
        admin.close()


def _install(seglog_dir: Path, kafka_partition: Path) -> None:
    """Replace Kafka's segment files (and epoch checkpoint) with seglog's; keep
    ``partition.metadata``."""
    for f in kafka_partition.iterdir():
        if f.suffix in SEGMENT_SUFFIXES or f.name == "leader-epoch-checkpoint":
            f.unlink()
    for f in segment_files(seglog_dir, *SEGMENT_SUFFIXES):
        shutil.copy2(f, kafka_partition / f.name)


@pytest.fixture(scope="module")
def scenario(kafka_ref, kafka_broker_factory, tmp_path_factory):
    work = tmp_path_factory.mktemp("adoption")
    broker = kafka_broker_factory("broker", **{"log.cleaner.backoff.ms": "200"})
    s = Scenario(broker=broker)
    broker.start()
    bootstrap = broker.bootstrap

    # 1. topics
    topics = []
    for backend in BACKENDS:
        for kind in WRITERS:
            topics.append((_adopt_topic(kind, backend), _topic_configs(kind)))
    topics += [(f"corrupt-{name}", _topic_configs("mixed")) for name in CORRUPTIONS]
    topics += [(f"k-{codec}", _topic_configs(None)) for codec in CODECS]
    topics.append(("k-txn", _topic_configs(None)))
    topics.append(("k-compact", {"retention.ms": "-1", "cleanup.policy": "compact",
                                 "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs=configs)
                             for name, configs in topics])
    finally:
        admin.close()

    # 2. Kafka writes; what it serves; clean stop; a copy of its files
    _produce_kafka_topics(bootstrap)
    _produce_compacted(bootstrap, broker.data_dir)
    s.committed = _commit_group_offsets(bootstrap)
    s.txn_committed = _committed_offsets(bootstrap, TXN_GROUP, [("k-lz4", 0)])
    for topic in [f"k-{c}" for c in CODECS] + ["k-txn", "k-compact"]:
        s.kafka_reads[(topic, "read_uncommitted")] = _read_partition(bootstrap, topic)
        s.kafka_times[topic] = _offsets_for_times(
            bootstrap, topic, _probe_stamps(s.kafka_reads[(topic, "read_uncommitted")].records))
    s.kafka_reads[("k-txn", "read_committed")] = _read_partition(bootstrap, "k-txn",
                                                                 "read_committed")
    broker.stop()
    s.kafka_copy = work / "kafka-copy"
    shutil.copytree(broker.data_dir, s.kafka_copy, ignore=shutil.ignore_patterns(".lock"))

    # 3. seglog's partitions into the stopped broker, recovery forced
    for backend in BACKENDS:
        for kind, write in WRITERS.items():
            topic = _adopt_topic(kind, backend)
            path = work / "seglog" / topic
            write(path, backend)
            s.seglog_dirs[topic] = path
            _install(path, broker.data_dir / f"{topic}-0")
    be = seglog.get_backend(BACKENDS[0])
    source = s.seglog_dirs[_adopt_topic("mixed", BACKENDS[0])]
    for name in CORRUPTIONS:
        c = corrupt(name, source, work / "corrupt" / name, be)
        s.corruptions[f"corrupt-{name}"] = c
        _install(c.path, broker.data_dir / f"corrupt-{name}-0")
    for name in (".kafka_cleanshutdown", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        (broker.data_dir / name).unlink(missing_ok=True)
    mark = broker.log_size()
    broker.start()
    s.restart_log = broker.log_since(mark)
    for topic in list(s.seglog_dirs) + list(s.corruptions):
        s.adopted_reads[(topic, "read_uncommitted")] = _read_partition(bootstrap, topic)
    for topic in s.seglog_dirs:
        s.adopted_reads[(topic, "read_committed")] = _read_partition(bootstrap, topic,
                                                                     "read_committed")
        s.adopted_times[topic] = _offsets_for_times(
            bootstrap, topic, _probe_stamps(s.adopted_reads[(topic, "read_uncommitted")].records))

    # 4. second clean stop: Kafka's rebuilt indexes and producer snapshots
    broker.stop()
    s.final_dir = work / "kafka-final"
    shutil.copytree(broker.data_dir, s.final_dir, ignore=shutil.ignore_patterns(".lock"))
    snapshots = {}
    for topic in s.seglog_dirs:
        found = segment_files(s.final_dir / f"{topic}-0", ".snapshot")
        if found:
            snapshots[topic] = found[-1]
    if snapshots:
        _done, dumps, _errors = dump_log(kafka_ref, list(snapshots.values()), work / "dump")
        s.snapshot_dumps = {t: dumps.get(str(p)) for t, p in snapshots.items()}

    # 5. mode B: after a clean shutdown Kafka trusts the indexes as they are. A garbage
    # .index in the middle of corrupt-bad-index-0 (Kafka's own files by now), then seeks.
    partition = broker.data_dir / "corrupt-bad-index-0"
    index = segment_files(partition, ".index")[len(segment_files(partition, ".index")) // 2]
    s.trusted_index_segment = int(index.stem)
    index.write_bytes(_garbage_index(index.stat().st_size // 8))
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    s.trusted_index_dir = work / "trusted-index"
    shutil.copytree(partition, s.trusted_index_dir)
    broker.start()
    nxt = [int(p.stem) for p in segment_files(partition, ".log")
           if int(p.stem) > s.trusted_index_segment][0]
    for offset in range(s.trusted_index_segment + 7, nxt, 4):
        s.trusted_index_reads[offset] = _first_offset_from(bootstrap, "corrupt-bad-index", offset)
    broker.stop()
    return s


def _garbage_index(entries: int) -> bytes:
    """Index entries with increasing relative offsets and positions far past the .log: a
    file that passes Kafka's sanity check (size a multiple of 8, last offset above base)."""
    return b"".join((7 + 3 * i).to_bytes(4, "big") + (999_999 - i).to_bytes(4, "big")
                    for i in range(max(2, entries)))


def _first_offset_from(bootstrap: str, topic: str, offset: int) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=50)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                if batch:
                    return batch[0].offset
        return None
    finally:
        consumer.close()


def _seglog_records(path: Path, backend: str, isolation: str = "read_uncommitted"):
    with seglog.Log.open(path, read_only=True, backend=backend, now_ms=NOW_MS) as log:
        records = [(r.offset, r.timestamp_ms, r.key, r.value, tuple(r.headers))
                   for r in log.records(log.start_offset, isolation=isolation)]
        return log.start_offset, log.end_offset, records


def _adopt_cases():
    return [(kind, backend) for backend in BACKENDS for kind in WRITERS]


# --- Kafka adopts seglog's partitions -------------------------------------------------------

@pytest.mark.parametrize("kind,backend_name", _adopt_cases())
def test_kafka_serves_seglog_records(scenario, kind, backend_name):
    """Every record, with its offset, timestamp, key, value and headers, as seglog wrote it;
    the same log start and end offsets; read_committed hides the same aborted records."""
    topic = _adopt_topic(kind, backend_name)
    for isolation in ("read_uncommitted", "read_committed"):
        start, end, ours = _seglog_records(scenario.seglog_dirs[topic], backend_name, isolation)
        got = scenario.adopted_reads[(topic, isolation)]
        assert (got.begin, got.end) == (start, end), isolation
        assert got.records == ours, isolation
    assert ours, "nothing was read"


@pytest.mark.parametrize("kind,backend_name", _adopt_cases())
def test_kafka_offsets_for_times_agree_with_seglog(scenario, kind, backend_name):
    topic = _adopt_topic(kind, backend_name)
    with seglog.Log.open(scenario.seglog_dirs[topic], read_only=True, backend=backend_name,
                         now_ms=NOW_MS) as log:
        ours = {ts: log.offset_for_timestamp(ts) for ts in scenario.adopted_times[topic]}
    assert scenario.adopted_times[topic] == ours


def test_kafka_recovered_seglog_segments_without_complaint(scenario):
    """The forced recovery validated every adopted segment; nothing but the corrupted copies
    was cut, nothing was renamed stray."""
    log = scenario.restart_log
    assert "marked stray" not in log
    for topic in scenario.seglog_dirs:
        bad = [line for line in log.splitlines() if f"{topic}-0" in line and re.search(
            r"Found invalid messages|Corruption found|Deleting all segments|corrupted index",
            line)]
        assert not bad, bad
    assert re.search(r"Recovering unflushed segment", log), "recovery was not forced"


@pytest.mark.parametrize("kind", ["mixed", "logappend"])
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_kafka_rebuilt_the_same_indexes(scenario, backend_name, kind):
    """Kafka's recovery rebuilt every segment's offset, time and transaction index with the
    same index.interval.bytes; after its clean stop they equal seglog's byte for byte. (The
    compacted topic is left out: Kafka's own cleaner cleans it again after the restart and
    merges its small segments.)"""
    topic = _adopt_topic(kind, backend_name)
    ours_dir, theirs_dir = scenario.seglog_dirs[topic], scenario.final_dir / f"{topic}-0"
    for suffix in (".index", ".timeindex", ".txnindex"):
        ours = {f.name: f.read_bytes() for f in segment_files(ours_dir, suffix)}
        theirs = {f.name: f.read_bytes() for f in segment_files(theirs_dir, suffix)}
        ours = {k: v for k, v in ours.items() if v or k in theirs}
        theirs = {k: v for k, v in theirs.items() if v or k in ours}
        assert theirs == ours, f"{topic}: {suffix} differs"


def test_kafka_keeps_the_producer_state(scenario, backend):
    """Kafka rebuilt the idempotent and transactional producers' state from seglog's batches
    (mode A recovery) and snapshotted it at its clean stop: the same epoch, last sequence and
    last offset as seglog's state."""
    topic = _adopt_topic("mixed", backend.name)
    dump = scenario.snapshot_dumps.get(topic)
    assert dump is not None and dump.producers, "Kafka wrote no producer snapshot"
    by_pid = {int(p["producerId"]): p for p in dump.producers}
    with seglog.Log.open(scenario.seglog_dirs[topic], read_only=True, backend=backend.name,
                         now_ms=NOW_MS) as log:
        for pid in (IDEMPOTENT_PID, TXN_PID):
            entry = log.producer_state.last_entry(pid)
            assert pid in by_pid, f"Kafka lost producer {pid}"
            assert int(by_pid[pid]["producerEpoch"]) == entry.producer_epoch
            assert int(by_pid[pid]["lastSequence"]) == entry.last_seq
            assert int(by_pid[pid]["lastOffset"]) == entry.last_data_offset


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_kafka_recovery_cuts_where_seglog_does(scenario, backend, name, tmp_path):
    """The same corrupted partition recovered by Kafka (at its start) and by seglog: the same
    end offset, and Kafka serves exactly the records seglog keeps."""
    topic = f"corrupt-{name}"
    c = scenario.corruptions[topic]
    copy = tmp_path / name
    shutil.copytree(c.path, copy)
    forget_clean_shutdown(copy)
    with seglog.Log.open(copy, backend=backend.name, now_ms=NOW_MS) as log:
        ours = [(r.offset, r.timestamp_ms, r.key, r.value, tuple(r.headers))
                for r in log.records(log.start_offset)]
        end = log.end_offset
    got = scenario.adopted_reads[(topic, "read_uncommitted")]
    assert got.end == end
    assert got.records == ours
    log = scenario.restart_log
    if name == "bad-index":
        assert not re.search(rf"Corruption found in segment \d+ .*{topic}|{topic}\S* at byte "
                             rf"offset", log)
        return
    # LogLoader: "Corruption found in segment B, truncating to offset O" for every cut;
    # LogSegment.recover adds "Found invalid messages ... at byte offset N" when a batch
    # failed its checks, but not for a torn tail (a partial batch just ends the iteration).
    cut = re.search(rf"\[LogLoader partition={topic}-0, .*\] Corruption found in segment "
                    rf"(\d+), truncating to offset (\d+)", log)
    assert cut and (int(cut.group(1)), int(cut.group(2))) == (c.segment_base,
                                                             c.first_bad_offset)
    found = re.search(rf"Found invalid messages in log segment \S*{topic}-0/0*{c.segment_base}"
                      rf"\.log at byte offset (\d+)", log)
    if name == "torn":
        assert found is None
    else:
        assert found and int(found.group(1)) == c.position


def test_trusted_garbage_index_kafka_skips_seglog_does_not(scenario, backend, tmp_path):
    """Mode B (clean shutdown, indexes trusted). A garbage ``.index`` that passes Kafka's
    sanity check: a Kafka consumer seeking into that segment gets records from the *next*
    segment, silently skipping the rest of this one (Kafka 4.4.0 and 4.1.1: OffsetIndex
    lookup -> a position past the end -> no batch -> LocalLog.read moves to the next
    segment). seglog checks index entries before use: reading the same files (the marker
    present, so nothing is recovered) returns the offset asked for. docs/kafka-interop.md."""
    copy = tmp_path / "p"
    shutil.copytree(scenario.trusted_index_dir, copy)
    (copy / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
    with seglog.Log.open(copy, read_only=True, backend=backend.name, now_ms=NOW_MS) as log:
        assert log.recovery_report.clean_shutdown
        for offset in scenario.trusted_index_reads:
            first = next(iter(log.records(offset)), None)
            assert first is not None and first.offset == offset
    assert scenario.trusted_index_reads
    nxt = min(o for o in (r for r in scenario.trusted_index_reads.values()) if o is not None)
    assert all(r is not None and r > offset for offset, r in scenario.trusted_index_reads.items()
               ), ("Kafka no longer skips past a trusted garbage index: update "
                   f"docs/kafka-interop.md ({scenario.trusted_index_reads})")
    assert nxt > scenario.trusted_index_segment


# --- seglog adopts Kafka's files ------------------------------------------------------------

KAFKA_TOPICS = [f"k-{c}" for c in CODECS] + ["k-txn", "k-compact"]


@pytest.mark.parametrize("topic", KAFKA_TOPICS)
def test_seglog_reads_kafka_records(scenario, backend, topic):
    path = scenario.kafka_copy / f"{topic}-0"
    start, end, ours = _seglog_records(path, backend.name)
    kafka_read = scenario.kafka_reads[(topic, "read_uncommitted")]
    assert (start, end) == (kafka_read.begin, kafka_read.end)
    assert ours == kafka_read.records
    if topic == "k-txn":
        _s, _e, committed = _seglog_records(path, backend.name, "read_committed")
        assert committed == scenario.kafka_reads[(topic, "read_committed")].records
        assert len(committed) < len(ours), "an aborted transaction should be hidden"
    if topic == "k-compact":
        offsets = [r[0] for r in ours]
        assert offsets != list(range(offsets[0], offsets[0] + len(offsets))), \
            "Kafka's cleaner left no gap"


@pytest.mark.parametrize("topic", KAFKA_TOPICS)
def test_seglog_offset_for_timestamp_agrees_with_kafka(scenario, backend, topic):
    path = scenario.kafka_copy / f"{topic}-0"
    with seglog.Log.open(path, read_only=True, backend=backend.name, now_ms=NOW_MS) as log:
        ours = {ts: log.offset_for_timestamp(ts) for ts in scenario.kafka_times[topic]}
    assert ours == scenario.kafka_times[topic]


def test_seglog_sees_kafka_aborted_transactions(scenario, backend):
    path = scenario.kafka_copy / "k-txn-0"
    with seglog.Log.open(path, read_only=True, backend=backend.name, now_ms=NOW_MS) as log:
        aborted = log.aborted_transactions(log.start_offset, log.end_offset)
    kafka_read = scenario.kafka_reads[("k-txn", "read_uncommitted")].records
    committed = {r[0] for r in scenario.kafka_reads[("k-txn", "read_committed")].records}
    hidden = sorted(r[0] for r in kafka_read if r[0] not in committed)
    assert len(aborted) == 2
    covered = sorted(o for o in hidden if any(a.first_offset <= o <= a.last_offset
                                              for a in aborted))
    assert hidden and covered == hidden


@pytest.mark.parametrize("topic", KAFKA_TOPICS)
def test_seglog_recovers_kafka_segments_without_cutting(scenario, backend, topic, tmp_path):
    """A seglog writer on a copy of Kafka's partition (no partition-level clean-shutdown
    marker, so every segment is validated): nothing cut, nothing deleted, the same records,
    and the indexes it rebuilds equal Kafka's where Kafka kept them."""
    copy = tmp_path / f"{topic}-0"
    shutil.copytree(scenario.kafka_copy / f"{topic}-0", copy)
    with seglog.Log.open(copy, backend=backend.name, now_ms=NOW_MS) as log:
        report = log.recovery_report
        assert not report.truncations and not report.deleted_segments, report
        assert [(r.offset, r.value) for r in log.records(log.start_offset)] == \
            [(r[0], r[3]) for r in scenario.kafka_reads[(topic, "read_uncommitted")].records]


def _group_offsets(store, group: str) -> dict:
    return {(tp.topic, tp.partition): (om.offset, om.metadata)
            for tp, om in store.group(group).committed_offsets().items()}


def test_seglog_store_reads_kafka_group_offsets(scenario, backend):
    """Plain commits, and offsets committed inside transactions (two committed, two
    aborted: only the last committed one counts), as Kafka's coordinator answered."""
    with seglog.Store(scenario.kafka_copy, backend=backend.name, read_only=True) as store:
        assert {"k-none", "k-txn", "k-compact", "__consumer_offsets"} <= set(store.topics())
        assert _group_offsets(store, GROUP) == scenario.committed
        assert scenario.txn_committed == {("k-lz4", 0): (12, "txn2")}
        assert _group_offsets(store, TXN_GROUP) == scenario.txn_committed


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "recovering"])
def test_seglog_store_writer_adopts_kafka_log_dir(scenario, backend, clean, tmp_path):
    """A writer Store on a copy of Kafka's whole log dir (``__transaction_state`` left out,
    see the next test), with Kafka's clean-shutdown marker or without it (then every
    partition, ``__consumer_offsets`` included, is recovered from Kafka's recovery-point
    checkpoint): nothing cut, the same records and group offsets. The KRaft metadata log is
    no topic (Kafka's LogManager skips it) and is left as Kafka wrote it."""
    copy = tmp_path / "logdir"
    shutil.copytree(scenario.kafka_copy, copy,
                    ignore=shutil.ignore_patterns("__transaction_state-*"))
    if not clean:
        (copy / ".kafka_cleanshutdown").unlink()
    metadata_log = {p.name: p.read_bytes() for p in (copy / "__cluster_metadata-0").iterdir()}
    with seglog.Store(copy, backend=backend.name) as store:
        assert "__cluster_metadata" not in store.topics()
        for topic in store.topics():
            for log in store.topic(topic).logs:
                report = log.recovery_report
                assert not report.truncations and not report.deleted_segments, (topic, report)
                assert report.clean_shutdown == clean
        assert _group_offsets(store, GROUP) == scenario.committed
        assert _group_offsets(store, TXN_GROUP) == scenario.txn_committed
        for topic in KAFKA_TOPICS:
            log = store.log((topic, 0))
            assert [(r.offset, r.value) for r in log.records(log.start_offset)] == \
                [(r[0], r[3]) for r in scenario.kafka_reads[(topic, "read_uncommitted")].records]
    assert {p.name: p.read_bytes() for p in (copy / "__cluster_metadata-0").iterdir()} == \
        metadata_log


def test_seglog_store_writer_reads_kafka_transaction_state(scenario, backend, tmp_path):
    """A writer Store on a copy of Kafka's whole log dir, ``__transaction_state`` included:
    Kafka 4.x (``transaction.version`` 2) wrote it in ``TransactionLogValue`` version 1,
    which seglog's coordinator loads. The last transaction of ``seglog-txn`` was aborted, and
    its producer id and epoch are those of the markers in ``k-txn``. A seglog producer then
    takes the id over (the next epoch) and commits; the store reopens on its records."""
    copy = tmp_path / "logdir"
    shutil.copytree(scenario.kafka_copy, copy)
    values = []
    with seglog.Store(copy, backend=backend.name, read_only=True) as store:
        for log in store.topic(txn_schema.TRANSACTION_STATE_TOPIC).logs:
            values += [txn_schema.decode_value(r.value) for r in log.records(log.start_offset)
                       if txn_schema.decode_key(r.key) == "seglog-txn"]
    assert values and {v.version for v in values} == {1}, values
    with seglog.Store(copy, backend=backend.name) as store:
        assert "__transaction_state" in store.topics()
        assert "__cluster_metadata" not in store.topics()
        for topic in store.topics():
            for log in store.topic(topic).logs:
                report = log.recovery_report
                assert not report.truncations and not report.deleted_segments, (topic, report)
        state = store.describe_transaction("seglog-txn")
        assert state is not None
        assert state.state == "CompleteAbort" and state.partitions == ()
        assert (state.producer_id, state.producer_epoch) == \
            (values[-1].producer_id, values[-1].producer_epoch)
        entry = store.log(("k-txn", 0)).producer_state.last_entry(state.producer_id)
        assert entry is not None and entry.producer_epoch == state.producer_epoch
        producer = store.producer(transactional_id="seglog-txn")
        producer.begin_transaction()
        producer.send("k-txn", b"seglog", key=b"s")
        producer.commit_transaction()
        producer.close()
        after = store.describe_transaction("seglog-txn")
        assert after.state == "CompleteCommit"
        assert (after.producer_id, after.producer_epoch) == \
            (state.producer_id, state.producer_epoch + 1)
    with seglog.Store(copy, backend=backend.name) as store:
        assert store.describe_transaction("seglog-txn") == after
        log = store.log(("k-txn", 0))
        assert [r.value for r in log.records(log.start_offset, isolation="read_committed")][-1] \
            == b"seglog"
