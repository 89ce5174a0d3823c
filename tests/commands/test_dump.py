"""``seglog dump`` against Kafka 4.4's ``kafka-dump-log`` (``DumpLogSegments`` from the jars):
both run as subprocesses on the same files and their outputs are compared line for line.

The files are written by seglog (tests/kafka's corpus: every codec, headers, null keys and
values, idempotent and transactional batches, control batches, a compacted log with gaps, a
LogAppendTime log; and a Log with leader epochs) and by a real Kafka 4.4 broker (the
session's shared one: plain, compressed, keyed, header-carrying and transactional batches,
aborted transactions, over several rolled segments). Corrupted copies (a flipped byte, a torn
tail) are dumped the same by both. The files Kafka's tool does not read (checkpoints,
``meta.properties``, ``partition.metadata``) are compared with what seglog's own parsers and
the files' text say.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

import seglog
from seglog.bench.kafka import find_kafka
from seglog.coordinator.offsets_schema import offsets_partition_for_group
from seglog.coordinator.txn_schema import partition_for_transactional_id

from test_verify import write_partition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))
from kafka_corpus import WRITERS  # noqa: E402

SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
#: The flag sets compared (kafka-dump-log's options, which seglog dump takes as they are).
FLAG_SETS = ([], ["--deep-iteration"], ["--print-data-log"],
             ["--print-data-log", "--skip-record-metadata"])
#: More of kafka-dump-log's options, compared on seglog's files.
MORE_FLAG_SETS = (["--index-sanity-check"], ["--verify-index-only"],
                  ["--max-bytes", "700", "--deep-iteration"])


def _kafka():
    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    return ref


def _files(d: Path, suffixes=SEGMENT_SUFFIXES) -> list[str]:
    return [str(p) for p in sorted(d.iterdir()) if p.suffix in suffixes and p.name[0].isdigit()]


def _kafka_stderr(text: str) -> list[str]:
    # Kafka's findings; log4j lines ("[...") and JVM warnings are not findings.
    return [line for line in text.splitlines()
            if line.strip() and not line.startswith(("[", "SLF4J", "WARNING", "OpenJDK"))]


def _both(ref, run_seglog, files: list[str], flags: list[str], run_dir: Path):
    kafka = ref.run_tool(ref.dump_log_class, [*flags, "--files", ",".join(files)],
                         run_dir=run_dir, timeout_s=120)
    ours = run_seglog("dump", *flags, "--files", ",".join(files))
    return kafka, ours


def _assert_same(kafka, ours, label: str) -> None:
    assert kafka.returncode == 0, f"{label}: kafka-dump-log failed\n{kafka.stderr[-3000:]}"
    assert ours.returncode == 0, f"{label}: seglog dump failed\n{ours.stderr[-3000:]}"
    kafka_lines, our_lines = kafka.stdout.splitlines(), ours.stdout.splitlines()
    for n, (k, o) in enumerate(zip(kafka_lines, our_lines)):
        assert o == k, f"{label}: line {n + 1} differs\nkafka : {k}\nseglog: {o}"
    assert len(our_lines) == len(kafka_lines), label
    assert _kafka_stderr(ours.stderr) == _kafka_stderr(kafka.stderr), label


@pytest.fixture(scope="module")
def seglog_corpus(tmp_path_factory) -> Path:
    """Partitions written by seglog: kafka_corpus's three and a Log with leader epochs."""
    root = tmp_path_factory.mktemp("dump-corpus")
    for kind, write in WRITERS.items():
        write(root / f"{kind}-0", seglog.default_backend().name)
    write_partition(root / "epochs-0", seglog.default_backend().name)
    return root


@pytest.mark.kafka
@pytest.mark.parametrize("flags", FLAG_SETS + MORE_FLAG_SETS,
                         ids=lambda f: " ".join(f) or "shallow")
def test_seglog_written_files_dump_as_kafka_dumps_them(seglog_corpus, run_seglog, tmp_path,
                                                       flags):
    ref = _kafka()
    files = [f for d in sorted(seglog_corpus.iterdir()) for f in _files(d)]
    assert len(files) > 60
    kafka, ours = _both(ref, run_seglog, files, flags, tmp_path)
    _assert_same(kafka, ours, " ".join(flags) or "shallow")
    if flags in (["--deep-iteration"], ["--print-data-log"]):
        assert "endTxnMarker: ABORT" in ours.stdout and "| offset: " in ours.stdout
    assert "LogAppendTime: " in ours.stdout


@pytest.mark.kafka
def test_corrupted_files_dump_as_kafka_dumps_them(seglog_corpus, run_seglog, tmp_path):
    """A flipped byte (``isvalid: false``) and a torn tail (``Found N invalid bytes``)."""
    ref = _kafka()
    source = seglog_corpus / "mixed-0"
    d = tmp_path / "mixed-0"
    shutil.copytree(source, d)
    logs = [Path(f) for f in _files(d, (".log",))]
    flipped, torn = logs[len(logs) // 2], logs[-1]
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x5A
    flipped.write_bytes(bytes(data))
    os.truncate(torn, torn.stat().st_size - 7)
    kafka, ours = _both(ref, run_seglog, [str(flipped), str(torn)], [], tmp_path)
    _assert_same(kafka, ours, "corrupted")
    assert "isvalid: false" in ours.stdout
    assert "invalid bytes at the end of" in ours.stdout
    # an index with a partial entry: Kafka's sanity check throws (exit 1), seglog says why
    index = Path(_files(d, (".index",))[1])
    with open(index, "ab") as f:
        f.write(b"\x00\x01\x02")
    kafka, ours = _both(ref, run_seglog, [str(index)], ["--index-sanity-check"], tmp_path)
    assert kafka.returncode == ours.returncode == 1
    assert ours.stdout == kafka.stdout.split("\n")[0] + "\n" == f"Dumping {index}\n"
    assert "neither positive nor a multiple of 8" in kafka.stderr
    assert "neither positive nor a multiple of 8" in ours.stderr


def _produce_to_kafka(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "segment.ms": "300", "retention.ms": "-1", "segment.index.bytes": "4096",
        "index.interval.bytes": "100"})])[topic].result(30)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                      "enable.idempotence": True})
    for rnd, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                      "compression.type": codec})
        for i in range(12):
            p.produce(topic, value=None if i == 5 else f"v{rnd}-{i}".encode() * (1 + i % 3),
                      key=None if i % 4 == 0 else f"k{i}".encode(),
                      headers=[("h1", b"x"), ("h2", None)] if i % 2 else None)
        assert p.flush(30) == 0
        plain.produce(topic, value=f"idem{rnd}".encode(), key=b"ik")
        assert plain.flush(30) == 0
        txn = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                        "transactional.id": f"{topic}-txn"})
        txn.init_transactions(30)
        txn.begin_transaction()
        for i in range(3):
            txn.produce(topic, value=f"txn{rnd}-{i}".encode())
        assert txn.flush(30) == 0  # sent: an abort would purge what is still queued
        if rnd % 2:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
        time.sleep(0.35)  # segment.ms: the next round rolls a new segment


#: How long a broker's files stay unchanged before they are read, and the most to wait.
QUIET_S, QUIET_S_MAX = 0.5, 10.0


def _wait_quiet(directory: Path, pattern: str) -> None:
    """Wait until the files matching ``pattern`` under ``directory`` kept their sizes for
    :data:`QUIET_S` (at most :data:`QUIET_S_MAX`): Kafka writes a transaction's markers and
    its coordinators' records after it answered, a fixed pause can be outrun on a loaded
    machine, and a file read mid-append would differ between two dumps of it."""
    def sizes() -> list:
        found = []
        for path in directory.glob(pattern):
            try:
                found.append((str(path), path.stat().st_size))
            except FileNotFoundError:  # deleted meanwhile: a change too
                found.append((str(path), -1))
        return sorted(found)

    deadline = time.monotonic() + QUIET_S_MAX
    last, since = sizes(), time.monotonic()
    while time.monotonic() - since < QUIET_S and time.monotonic() < deadline:
        time.sleep(0.05)
        now = sizes()
        if now != last:
            last, since = now, time.monotonic()


def _broker_files_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path, bootstrap: str,
                                           data_dir: Path) -> Path:
    topic = f"test_dump_{uuid.uuid4().hex[:8]}"
    _produce_to_kafka(bootstrap, topic)
    part = data_dir / f"{topic}-0"
    deadline = time.monotonic() + 10
    while not list(part.glob("*.txnindex")) and time.monotonic() < deadline:
        time.sleep(0.2)
    _wait_quiet(part, "*")  # the last transaction's marker lands after its commit's answer
    files = _files(part)
    suffixes = {Path(f).suffix for f in files}
    assert {".log", ".index", ".timeindex", ".snapshot", ".txnindex"} <= suffixes, files
    for flags in FLAG_SETS:
        kafka, ours = _both(ref, run_seglog, files, flags, tmp_path)
        _assert_same(kafka, ours, f"broker-written {' '.join(flags)}")
        if flags == ["--deep-iteration"]:
            assert "compresscodec: zstd" in ours.stdout
            assert "endTxnMarker: ABORT" in ours.stdout and "headerKeys: [h1,h2]" in ours.stdout
    verified = run_seglog("dump", "--verify", str(part))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # the transaction coordinator's records of the producer, --transaction-log-decoder
    count = len(list(data_dir.glob("__transaction_state-*")))
    state = data_dir / f"__transaction_state-{partition_for_transactional_id(f'{topic}-txn', count)}"
    logs = _files(state, (".log",))
    kafka, ours = _both(ref, run_seglog, logs, ["--transaction-log-decoder"], tmp_path)
    _assert_same(kafka, ours, "--transaction-log-decoder")
    assert f'"transactionalId":"{topic}-txn"' in ours.stdout
    assert '"transactionStatus":"CompleteAbort"' in ours.stdout
    # a consumer group's membership and commits, --offsets-decoder
    group = f"{topic}-group"
    _consume_and_commit(bootstrap, topic, group)
    count = len(list(data_dir.glob("__consumer_offsets-*")))
    offsets = data_dir / f"__consumer_offsets-{offsets_partition_for_group(group, count)}"
    kafka, ours = _both(ref, run_seglog, _files(offsets, (".log",)), ["--offsets-decoder"],
                        tmp_path)
    _assert_same(kafka, ours, "--offsets-decoder")
    assert f'"group":"{group}","topic":"{topic}","partition":0' in ours.stdout
    assert f'"assignedPartitions":[{{"topic":"{topic}","partitions":[0]}}]' in ours.stdout
    return part


def _consume_and_commit(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            got += len(consumer.consume(100, timeout=0.5))
        assert got >= 10
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.kafka
def test_kafka_written_files_dump_as_kafka_dumps_them(kafka_shared, run_seglog, tmp_path):
    """Files a real Kafka 4.4 broker wrote (and is still serving: its active segment's
    indexes are preallocated and mmapped) dumped by both tools, every flag set; they verify
    clean; the files Kafka's tool ignores are read as Kafka wrote them."""
    ref = _kafka()
    data_dir = Path(kafka_shared.data_dir)
    part = _broker_files_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path,
                                                  kafka_shared.bootstrap, data_dir)
    extra = run_seglog("dump", "-o", "json", str(part / "leader-epoch-checkpoint"),
                       str(part / "partition.metadata"), str(data_dir / "meta.properties"))
    assert extra.returncode == 0, extra.stderr
    epochs, metadata, meta = extra.json()
    lines = (part / "leader-epoch-checkpoint").read_text().split("\n")
    assert [f"{e['epoch']} {e['startOffset']}" for e in epochs["entries"]] == \
        [line for line in lines[2:] if line]
    assert (part / "partition.metadata").read_text().split("\n")[1] == \
        f"topic_id: {metadata['topicId']}"
    assert meta["properties"]["cluster.id"] == kafka_shared.cluster_id
    # KRaft's metadata log and snapshots (copied: the controller keeps appending), with
    # their control records (leader changes, kraft version, voters, snapshot header/footer)
    metadata_dir = tmp_path / "metadata"
    metadata_dir.mkdir()
    sources = sorted(p for p in (data_dir / "__cluster_metadata-0").iterdir()
                     if p.suffix in (".log", ".checkpoint"))
    sources += sorted(data_dir.glob("bootstrap.checkpoint"))
    copies = []
    for source in sources:
        shutil.copyfile(source, metadata_dir / source.name)
        copies.append(str(metadata_dir / source.name))
    kafka, ours = _both(ref, run_seglog, copies, ["--deep-iteration"], tmp_path)
    _assert_same(kafka, ours, "KRaft metadata log")
    assert "LeaderChange: {" in ours.stdout and "KRaftVoters {" in ours.stdout


@pytest.mark.kafka
def test_seglog_broker_written_files_dump_as_kafka_dumps_them(seglog_broker_factory,
                                                              run_seglog, tmp_path):
    """The same for a seglog broker (``seglog serve``'s Broker) serving its data dir."""
    ref = _kafka()
    data_dir = tmp_path / "seglog-data"
    broker = seglog_broker_factory(data_dir=data_dir)
    _broker_files_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path, broker.bootstrap,
                                           data_dir)


def test_checkpoints_and_metadata_files(seglog_corpus, run_seglog, tmp_path):
    """The files Kafka's tool does not dump, as text and JSON, against the files' text."""
    d = seglog_corpus / "epochs-0"
    (tmp_path / "meta.properties").write_text(
        "#a comment\nversion=1\ncluster.id=abc\nnode.id=3\n")
    ran = run_seglog("dump", str(d / "leader-epoch-checkpoint"),
                     str(d / "recovery-point-offset-checkpoint"),
                     str(tmp_path / "meta.properties"))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        f"Dumping {d / 'leader-epoch-checkpoint'}", "epoch: 0 startOffset: 0",
        f"epoch: 3 startOffset: {_epoch_3_start(d)}",
        f"Dumping {d / 'recovery-point-offset-checkpoint'}",
        f"topic: epochs partition: 0 offset: {_end_offset(d)}",
        f"Dumping {tmp_path / 'meta.properties'}", "version: 1", "cluster.id: abc",
        "node.id: 3"]


def _epoch_3_start(d: Path) -> int:
    return int((d / "leader-epoch-checkpoint").read_text().split("\n")[3].split()[1])


def _end_offset(d: Path) -> int:
    with seglog.Log.open(d, read_only=True) as log:
        return log.end_offset


def test_directory_and_json(seglog_corpus, run_seglog):
    """A directory stands for its files; ``-o json`` gives one object per file with the
    same fields as the text."""
    d = seglog_corpus / "epochs-0"
    text = run_seglog("dump", "--deep-iteration", str(d))
    as_json = run_seglog("dump", "--deep-iteration", "-o", "json", str(d))
    assert text.returncode == as_json.returncode == 0, text.stderr + as_json.stderr
    dumped = as_json.json()
    assert [f["file"] for f in dumped] == [
        line[len("Dumping "):] for line in text.stdout.splitlines() if line.startswith("Dumping ")]
    logs = [f for f in dumped if f["kind"] == "log"]
    batches = [b for f in logs for b in f["batches"]]
    with seglog.Log.open(d, read_only=True) as log:
        assert sum(len(b["records"]) for b in batches) == len(list(log.records())) + sum(
            b["count"] for b in batches if b["isControl"])
    assert all(b["isvalid"] for b in batches)
    assert {f["kind"] for f in dumped} >= {"log", "index", "timeindex", "txnindex", "snapshot",
                                            "leader-epoch-checkpoint", "offset-checkpoint"}


def test_help_has_an_example_and_bad_usage(run_seglog, tmp_path):
    ran = run_seglog("dump", "--help")
    assert ran.returncode == 0 and "example" in ran.stdout and "--verify" in ran.stdout
    assert run_seglog("dump").returncode == 2
    unknown = tmp_path / "notes.txt"
    unknown.write_text("x")
    ran = run_seglog("dump", str(unknown))
    assert ran.returncode == 0 and f"Ignoring unknown file {unknown}" in ran.stderr
    missing = run_seglog("dump", str(tmp_path / "00000000000000000000.log"))
    assert missing.returncode == 1 and missing.stderr.startswith("seglog dump: ")
    assert "Traceback" not in missing.stderr
