"""Store and Topic: Kafka's log-dir layout, topic rules, reopen, delete, read-only, locking."""

from __future__ import annotations

import os
import re
import threading

import pytest

from seglog import filenames
from seglog.storage import checkpoints
from seglog.storage.config import LogConfig
from seglog.errors import (
    InvalidConfigError,
    InvalidTopicError,
    LogClosedError,
    LogLockedError,
    ReadOnlyError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.clients.partitioner import partition_for_key
from seglog.storage.log import Log
from seglog.store import TOPICS_FILE, Store, TopicPartition, validate_topic_name

OFFSETS_PARTITIONS = 2  # a small __consumer_offsets keeps the tests fast


def open_store(path, backend, **kwargs):
    kwargs.setdefault("offsets_topic_partitions", OFFSETS_PARTITIONS)
    return Store(path, backend=backend, **kwargs)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# --- layout ----------------------------------------------------------------------------------


def test_layout_is_a_kafka_log_dir(tmp_path, backend):
    data = tmp_path / "data"
    with open_store(data, backend) as store:
        topic = store.create_topic("clicks", partitions=3)
        for p in range(3):
            topic.log(p).append_batch([b"a", b"b", b"c"][: p + 1])
        assert not os.path.exists(data / filenames.CLEAN_SHUTDOWN_MARKER)  # open: not clean
    names = set(os.listdir(data))
    assert {"clicks-0", "clicks-1", "clicks-2", "meta.properties",
            "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
            "replication-offset-checkpoint", "cleaner-offset-checkpoint",
            ".kafka_cleanshutdown"} <= names
    assert read_text(data / "recovery-point-offset-checkpoint") == (
        "0\n3\nclicks 0 1\nclicks 1 2\nclicks 2 3\n")
    assert read_text(data / "log-start-offset-checkpoint") == (
        "0\n3\nclicks 0 0\nclicks 1 0\nclicks 2 0\n")
    assert read_text(data / "replication-offset-checkpoint") == (
        "0\n3\nclicks 0 1\nclicks 1 2\nclicks 2 3\n")
    assert read_text(data / "cleaner-offset-checkpoint").startswith("0\n")
    assert read_text(data / ".kafka_cleanshutdown") == '{"version":0,"brokerEpoch":-1}'
    ids = set()
    for p in range(3):
        text = read_text(data / f"clicks-{p}" / "partition.metadata")
        match = re.fullmatch(r"version: 0\ntopic_id: ([A-Za-z0-9_-]{22})", text)
        assert match, text
        ids.add(match.group(1))
        assert os.path.exists(data / f"clicks-{p}" / "00000000000000000000.log")
    assert len(ids) == 1  # one topic id for every partition
    with open_store(data, backend) as store:  # a clean close: the next open skips recovery
        assert store.topic("clicks").log(0).recovery_report.clean_shutdown
    props = dict(line.split("=", 1) for line in read_text(data / "meta.properties").splitlines()
                 if line and not line.startswith("#"))
    assert props["version"] == "1" and props["node.id"] == "1"
    assert set(props) == {"version", "node.id", "cluster.id", "directory.id"}


def test_checkpoints_read_back_with_kafka_reader(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("a.b_c-d", partitions=2).log(1).append(b"x")
        store.flush()  # flush writes the checkpoints too
        cp = checkpoints.OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
        assert cp.read() == {("a.b_c-d", 0): 0, ("a.b_c-d", 1): 1}


def test_reopen_keeps_topics_ids_configs_and_offsets(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        t = store.create_topic("events", partitions=2,
                               config={"retention.ms": "1000", "cleanup.policy": "compact,delete"})
        topic_id = t.topic_id
        t.log(0).append_batch([b"1", b"2"], keys=[b"k1", b"k2"])
        store.create_topic("plain")
    with open_store(tmp_path, backend) as store:
        assert store.topics() == ["events", "plain"]
        t = store.topic("events")
        assert t.partitions == 2 and t.topic_id == topic_id
        assert t.config.retention_ms == 1000
        assert t.config.cleanup_policy == frozenset({"compact", "delete"})
        assert t.end_offsets() == {0: 2, 1: 0}
        assert [r.value for r in t.log(0).records()] == [b"1", b"2"]
        assert store.topic("plain").config == LogConfig()


def test_topic_found_on_disk_without_registry_is_adopted(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("orphan", partitions=2).log(1).append(b"x")
    os.unlink(tmp_path / TOPICS_FILE)
    with open_store(tmp_path, backend) as store:
        t = store.topic("orphan")
        assert t.partitions == 2 and t.end_offsets() == {0: 0, 1: 1}
    assert os.path.exists(tmp_path / TOPICS_FILE)


CRASHING_WRITER = """
import os, sys
from seglog.store import Store
store = Store(sys.argv[1], backend=sys.argv[2], offsets_topic_partitions=2)
store.create_topic("t").log(0).append_batch([b"a", b"b"])
os._exit(0)  # a crash: no close, no checkpoints, no clean-shutdown marker
"""


def run_python(code, *args):
    import subprocess
    import sys
    src = os.path.join(os.path.dirname(__file__), os.pardir, "src")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, env=env,
                   timeout=60)


def test_unclean_reopen_recovers(tmp_path, backend):
    run_python(CRASHING_WRITER, tmp_path, backend.name)
    assert not os.path.exists(tmp_path / filenames.CLEAN_SHUTDOWN_MARKER)
    with open(tmp_path / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00garbage tail")
    with open_store(tmp_path, backend) as store:
        assert store.topic("t").end_offsets() == {0: 2}
        assert [r.value for r in store.topic("t").log(0).records()] == [b"a", b"b"]
        report = store.topic("t").log(0).recovery_report
        assert not report.clean_shutdown and report.truncated_bytes == len(b"\x00garbage tail")


# --- topics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "with space", "slash/x", "ü", "a:b"])
def test_illegal_topic_names(tmp_path, backend, name):
    with open_store(tmp_path, backend) as store:
        with pytest.raises(InvalidTopicError):
            store.create_topic(name)
    assert not [n for n in os.listdir(tmp_path) if n.endswith("-0")]


def test_legal_topic_names():
    for name in ["a", "A.b_c-9", "a" * 249, "..."]:
        validate_topic_name(name)


def test_create_topic_errors(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("a.b")
        with pytest.raises(TopicExistsError):
            store.create_topic("a.b")
        with pytest.raises(InvalidTopicError, match="collides"):
            store.create_topic("a_b")  # Kafka: '.' and '_' collide
        with pytest.raises(InvalidTopicError):
            store.create_topic("__consumer_offsets")
        with pytest.raises(InvalidConfigError):
            store.create_topic("x", config={"retention.msec": "1"})
        with pytest.raises(InvalidConfigError):
            store.create_topic("y", config={"retention.ms": "soon"})
        with pytest.raises(InvalidConfigError, match="Unknown topic config"):
            store.create_topic("y", config={"log.cleaner.dedupe.buffer.size": "4194304"})
        with pytest.raises(ValueError):
            store.create_topic("z", partitions=0)
        assert store.topics() == ["a.b"]
        with pytest.raises(UnknownTopicOrPartitionError):
            store.topic("nope")
        with pytest.raises(UnknownTopicOrPartitionError):
            store.topic("a.b").log(1)


def test_config_forms(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        a = store.create_topic("a", config={"segment.bytes": "1048576"})
        b = store.create_topic("b", config={"segment_bytes": 1 << 20})
        c = store.create_topic("c", config=LogConfig(segment_bytes=1 << 20))
        assert a.config == b.config == c.config
        assert a.log(0).config.segment_bytes == 1 << 20


def test_partition_for_matches_kafka_partitioner(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        topic = store.create_topic("keys", partitions=7)
        for i in range(200):
            key = f"user-{i}".encode()
            assert topic.partition_for(key) == partition_for_key(key, 7)
        assert topic.topic_partitions()[3] == TopicPartition("keys", 3) == ("keys", 3)


def test_delete_topic(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("gone", partitions=2).log(0).append(b"x")
        store.create_topic("kept").log(0).append(b"y")
        store.delete_topic("gone")
        assert store.topics() == ["kept"]
        assert not [n for n in os.listdir(tmp_path) if n.startswith("gone")]
        with pytest.raises(UnknownTopicOrPartitionError):
            store.delete_topic("gone")
        again = store.create_topic("gone")  # the name is free again, with a new id
        assert again.end_offsets() == {0: 0}
    assert "gone 1" not in read_text(tmp_path / "recovery-point-offset-checkpoint")
    assert "kept 0 1" in read_text(tmp_path / "recovery-point-offset-checkpoint")


def test_leftover_delete_dir_is_removed_on_open(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t")
    leftover = tmp_path / "old-0.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    with open_store(tmp_path, backend) as store:
        assert store.topics() == ["t"]
    assert not leftover.exists()


# --- access ----------------------------------------------------------------------------------


def _open_files() -> list[str]:
    """What this process's descriptors point at (readlink of /proc/self/fd/*)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_stores_partitions_take_no_lock_of_their_own(tmp_path, backend):
    """The Store's data-dir lock covers its partitions (as Kafka's log-dir lock does): a
    partition holds its active .log's descriptor and no .lock file or descriptor."""
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", partitions=20)
        # Only this store's: another store of the test session (the pytest plugin's
        # session-scoped broker, say) may hold its own data-dir lock meanwhile.
        locks = [f for f in _open_files() if f.endswith(os.sep + filenames.LOCK_FILE)
                 and f.startswith(str(tmp_path) + os.sep)]
        assert locks == [str(tmp_path / filenames.LOCK_FILE)]
        for p in range(20):
            assert not os.path.exists(tmp_path / f"t-{p}" / filenames.LOCK_FILE)
    with open_store(tmp_path, backend) as store:
        assert store.topic("t").end_offsets() == {p: 0 for p in range(20)}
        assert not os.path.exists(tmp_path / "t-0" / filenames.LOCK_FILE)


def test_a_standalone_writer_and_a_store_exclude_each_other(tmp_path, backend):
    """Without a lock per partition, each side checks the other's: a standalone writer on a
    partition of an open Store is refused, and so is a Store whose partition a standalone
    writer holds (and that Store leaves its data dir unlocked behind it)."""
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", partitions=2).log(0).append(b"x")
        with pytest.raises(LogLockedError):
            Log.open(tmp_path / "t-1", backend=backend.name)
        assert store.topic("t").log(1).append(b"y") == 0
    with Log.open(tmp_path / "t-1", backend=backend.name) as log:
        with pytest.raises(LogLockedError):
            open_store(tmp_path, backend)
        assert log.append(b"z") == 1
    with open_store(tmp_path, backend) as store:
        assert [r.value for r in store.topic("t").log(1).records()] == [b"y", b"z"]


def test_second_writer_is_refused_and_readers_follow(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", partitions=2).log(0).append(b"1")
        with pytest.raises(LogLockedError):
            open_store(tmp_path, backend)
        with open_store(tmp_path, backend, read_only=True) as reader:
            assert reader.topics() == ["t"]
            assert reader.topic("t").end_offsets() == {0: 1, 1: 0}
            with pytest.raises(ReadOnlyError):
                reader.create_topic("u")
            store.topic("t").log(0).append(b"2")
            reader.topic("t").log(0).refresh()
            assert reader.topic("t").end_offsets()[0] == 2


def test_closed_store_refuses(tmp_path, backend):
    store = open_store(tmp_path, backend)
    topic = store.create_topic("t")
    store.close()
    store.close()  # idempotent
    with pytest.raises(LogClosedError):
        store.topics()
    with pytest.raises(LogClosedError):
        topic.log(0)


def test_threads_share_a_store(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", partitions=4)
        errors = []

        def work(n):
            try:
                producer = store.producer(linger_ms=0)
                for i in range(50):
                    producer.send("t", b"v", key=f"{n}-{i}".encode())
                producer.close()
                store.create_topic(f"own-{n}")
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sum(store.topic("t").end_offsets().values()) == 200
        assert store.topics() == ["own-0", "own-1", "own-2", "own-3", "t"]


def test_cleaner_checkpoint_is_gathered_and_restored(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        topic = store.create_topic("compacted", config={"cleanup.policy": "compact",
                                                        "segment.bytes": "200"})
        log = topic.log(0)
        for i in range(12):
            log.append(f"v{i}".encode(), key=f"k{i % 3}".encode())
        log.compact(force=True)
        checkpoint = log.cleaner_checkpoint
        assert checkpoint is not None and checkpoint > 0
    assert read_text(tmp_path / "cleaner-offset-checkpoint") == f"0\n1\ncompacted 0 {checkpoint}\n"
    with open_store(tmp_path, backend) as store:
        assert store.topic("compacted").log(0).cleaner_checkpoint == checkpoint


def test_apply_retention_on_every_partition(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        topic = store.create_topic("old", partitions=2,
                                   config={"retention.ms": "1000", "segment.bytes": "200"})
        store.create_topic("kept", config={"retention.ms": "-1", "segment.bytes": "200"})
        for name in ("old", "kept"):
            for i in range(10):
                store.topic(name).log(0).append(bytes(60), timestamp_ms=1000 + i)
        deleted = store.apply_retention(now_ms=10_000_000)
        assert set(deleted) == {TopicPartition("old", 0)}
        assert topic.start_offsets()[0] == topic.end_offsets()[0] == 10  # end offset unchanged
        assert store.topic("kept").start_offsets() == {0: 0}
    assert "old 0 10" in read_text(tmp_path / "log-start-offset-checkpoint")


def test_missing_partition_dir_is_recreated_and_foreign_partition_refused(tmp_path, backend):
    import shutil
    with open_store(tmp_path, backend) as store:
        store.create_topic("t", partitions=2).log(0).append(b"v")
        other = store.create_topic("u")
        other.log(0).append(b"w")  # its close flushes it: partition.metadata is written
        other_id = other.topic_id
    shutil.rmtree(tmp_path / "t-1")
    with open_store(tmp_path, backend) as store:
        t = store.topic("t")
        assert t.partitions == 2 and t.end_offsets() == {0: 1, 1: 0}
        t.log(1).append(b"again")
    assert t.topic_id in read_text(tmp_path / "t-1" / "partition.metadata")
    # A partition directory whose partition.metadata names another topic's id is refused.
    mine = tmp_path / "t-0" / "partition.metadata"
    saved = mine.read_bytes()
    shutil.copy(tmp_path / "u-0" / "partition.metadata", mine)
    from seglog.errors import CorruptCheckpointError
    with pytest.raises(CorruptCheckpointError, match=other_id):
        open_store(tmp_path, backend)
    mine.write_bytes(saved)
    with open_store(tmp_path, backend) as store:  # the failed open released every lock
        assert store.topics() == ["t", "u"]


def test_delete_topic_with_the_longest_name(tmp_path, backend):
    from seglog.log_manager import delete_dir_name
    name = "x" * 249
    assert len(delete_dir_name(name, 12345)) == 255
    assert re.fullmatch(r"t-3\.[0-9a-f]{32}-delete", delete_dir_name("t", 3))
    with open_store(tmp_path, backend) as store:
        store.create_topic(name).log(0).append(b"v")
        store.delete_topic(name)
        assert store.topics() == []
    assert not [n for n in os.listdir(tmp_path) if n.startswith("xxx")]


def test_maintain_runs_the_periodic_tasks(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("old", config={"retention.ms": "1000", "segment.bytes": "200"})
        store.create_topic("lazy", config={"flush.ms": "1000", "retention.ms": "-1"})
        for i in range(10):
            store.topic("old").log(0).append(bytes(60), timestamp_ms=1000 + i)
        store.topic("lazy").log(0).append_batch([b"unflushed", b"too"])
        consumer = store.consumer("gone", ["old"])
        consumer.commit({("old", 0): 1})
        consumer.close()
        now = int(__import__("time").time() * 1000) + 30 * 24 * 3600 * 1000
        report = store.maintain(now_ms=now)
        assert TopicPartition("old", 0) in report["retention"]
        assert TopicPartition("lazy", 0) in report["flushed"]
        assert report["expired_offsets"] == {"gone": [TopicPartition("old", 0)]}
        assert "lazy 0 2" in read_text(tmp_path / "recovery-point-offset-checkpoint")
        assert "old 0 10" in read_text(tmp_path / "log-start-offset-checkpoint")
